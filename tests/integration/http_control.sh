#!/usr/bin/env bash
# nsboxd's E2B-compatible control plane (nsboxd --http, nsboxd(8) HTTP API) with curl: keys,
# create with metadata/envVars/timeout, get, list with metadata and state filters and paging,
# setTimeout, connect, pause, metrics, kill; errors as JSON with an integer code; bad bodies and
# smuggled framing refused with nothing changed; another user's sandbox unreachable with one's
# own key; a sandbox's access token opening its data plane and no other's; kill -9 of nsboxd
# leaving nothing.  The SDKs themselves run in integration/e2b.sh.
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SESSION_DIR=$(mktemp -d /tmp/nsbox-http.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"
TENANT=${NSBOX_TEST_USER:-nsboxtest}
MY_DAEMONS=""
MY_PIDS=""

new_dir() { local d; d=$(mktemp -d "$SESSION_DIR/t.XXXXXX") && chmod 0711 "$d" && echo "$d"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_daemon DIR [MEMBERS]: nsboxd serving HTTP on a free port, MEMBERS (JSON, ", ..." ) added to
# its configuration; sets DPID, PORT, URL, NSBOX_SOCKET, KEY
start_daemon() {
        local dir=$1 extra=${2:-} i clients=""
        PORT=$(free_port)
        URL=http://127.0.0.1:$PORT
        [ "$TEST_AS" = root ] && clients=", \"clients\": {\"uids\": [$(id -u "$TENANT")]}"
        printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json"}%s%s}\n' "$PORT" "$dir" "$clients" "$extra" > "$dir/config.json"
        NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" >> "$dir/log" 2>&1 < /dev/null &
        DPID=$!
        MY_DAEMONS="$MY_DAEMONS $DPID"
        export NSBOX_SOCKET="$dir/d.sock"
        for i in $(seq 300); do
                [ "$(daemon_pid)" = "$DPID" ] && break
                pid_alive "$DPID" || fail "nsboxd exited at start: $(tail -n 5 "$dir/log")"
                sleep 0.1
        done
        [ "$(daemon_pid)" = "$DPID" ] || fail "nsboxd did not answer within 30 s"
        KEY=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create"
}

# api METHOD PATH [BODY] [curl args...]: sets CODE (HTTP status) and BODY (the answer), with KEY
api() {
        local method=$1 path=$2 data=${3:-}
        shift 3 2> /dev/null || shift $#
        local args=(-s -o "$TEST_TMP/body" -w '%{http_code}' -X "$method" -H "X-API-KEY: $KEY" "$@")
        [ -n "$data" ] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
        CODE=$(curl "${args[@]}" "$URL$path") || CODE=000
        BODY=$(cat "$TEST_TMP/body" 2> /dev/null)
}

# jq-like: json EXPR reads BODY as j and prints EXPR
json() { printf '%s' "$BODY" | python3 -c "import json, sys; j = json.load(sys.stdin); print($1)"; }

create() { # [BODY]: sets ID, TOKEN
        api POST /v2/sandboxes "${1:-{\"templateID\": \"base\", \"timeout\": 300\}}"
        assert_eq 201 "$CODE" "create: $BODY"
        ID=$(json 'j["sandboxID"]')
        TOKEN=$(json 'j["envdAccessToken"]')
}

test_keys_and_errors_are_json() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d"
        local good=$KEY
        KEY=""
        api GET /v2/sandboxes
        assert_eq 401 "$CODE" "no key"
        assert_eq 401 "$(json 'j["code"]')" "the JSON code without a key"
        KEY=e2b_0000000000000000000000000000000000000000
        api GET /v2/sandboxes
        assert_eq 401 "$CODE" "a wrong key"
        KEY=not-a-key
        api GET /v2/sandboxes
        assert_eq 401 "$CODE" "a malformed key"
        KEY=$good
        api GET /v2/sandboxes
        assert_eq 200 "$CODE" "the right key"
        assert_eq "[]" "$BODY" "no sandboxes yet"
        api GET /v2/nothing
        assert_eq 404 "$CODE" "an unknown path"
        assert_eq 404 "$(json 'j["code"]')" "its JSON code"
        api GET /sandboxes/0123456789abcdef0123456789abcdef
        assert_eq 404 "$CODE" "an unknown sandbox"
        api DELETE /sandboxes/0123456789abcdef0123456789abcdef
        assert_eq 404 "$CODE" "killing an unknown sandbox"
}

test_create_get_list_kill() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d"
        create '{"templateID": "base", "timeout": 120, "metadata": {"user id": "a=b&c", "ünï": "çødé", "empty?": "x"}, "envVars": {"FOO": "bar"}}'
        [[ $ID =~ ^[0-9a-f]{32}$ ]] || fail "sandboxID '$ID'"
        [[ $TOKEN =~ ^[0-9a-f]{32}$ ]] || fail "envdAccessToken '$TOKEN'"
        assert_eq "base nsbox 0.6.4" "$(json 'j["templateID"], j["clientID"], j["envdVersion"]')" "create's answer" 2> /dev/null ||
                assert_eq "('base', 'nsbox', '0.6.4')" "$(json 'j["templateID"], j["clientID"], j["envdVersion"]')" "create's answer"
        api GET "/sandboxes/$ID"
        assert_eq 200 "$CODE" "get"
        assert_eq '{"user id": "a=b&c", "\u00fcn\u00ef": "\u00e7\u00f8d\u00e9", "empty?": "x"}' "$(json 'json.dumps(j["metadata"])')" "metadata kept exactly"
        assert_eq "running" "$(json 'j["state"]')" "state"
        local left
        left=$(json 'int((__import__("datetime").datetime.fromisoformat(j["endAt"].replace("Z", "+00:00")) - __import__("datetime").datetime.now(__import__("datetime").timezone.utc)).total_seconds())')
        [ "$left" -gt 100 ] && [ "$left" -le 121 ] || fail "endAt is $left s away, not about 120"
        assert_eq "kill False" "$(json 'j["lifecycle"]["onTimeout"], j["lifecycle"]["autoResume"]' | tr -d "(',)")" "the default lifecycle"
        local other=$ID
        create '{"autoPause": true, "autoResume": {"enabled": true}, "volumeMounts": []}'
        api GET "/sandboxes/$ID"
        assert_eq "pause True" "$(json 'j["lifecycle"]["onTimeout"], j["lifecycle"]["autoResume"]' | tr -d "(',)")" "lifecycle: pause, auto-resume"
        # updateNetwork: what the sandbox has is 204; another setting is refused, naming why
        local net=$ID
        create '{"allow_internet_access": false}'
        api PUT "/sandboxes/$ID/network" '{"allow_internet_access": false, "allowOut": []}'
        assert_eq 204 "$CODE" "updateNetwork to what it is: $BODY"
        api PUT "/sandboxes/$ID/network" '{"allow_internet_access": true}'
        assert_eq 409 "$CODE" "updateNetwork turning the internet on: $BODY"
        for b in '{"denyOut": ["1.1.1.1"]}' '{"allow_internet_access": "no"}' '{"bogus": 1}' '[]'; do
                api PUT "/sandboxes/$ID/network" "$b"
                assert_eq 400 "$CODE" "updateNetwork with $b: $BODY"
        done
        api DELETE "/sandboxes/$ID"
        ID=$net
        api GET "/v2/sandboxes"
        assert_eq 2 "$(json 'len(j)')" "listed"
        # as the SDKs send it: encodeURIComponent of each key and value, a form, the query's own escaping
        api GET "/v2/sandboxes?metadata=user%252520id%3Da%25253Db%252526c"
        assert_eq "$other" "$(json '" ".join(s["sandboxID"] for s in j)')" "listed by metadata"
        api GET "/v2/sandboxes?metadata=user%2520id%3Dnope"
        assert_eq "[]" "$BODY" "a metadata filter that matches nothing"
        api GET "/v2/sandboxes?state=paused"
        assert_eq "[]" "$BODY" "none paused"
        api DELETE "/sandboxes/$ID"
        assert_eq 204 "$CODE" "kill"
        api DELETE "/sandboxes/$ID"
        assert_eq 404 "$CODE" "kill again"
        api GET "/sandboxes/$ID"
        assert_eq 404 "$CODE" "get after kill"
        api DELETE "/sandboxes/$other"
        assert_eq 204 "$CODE" "kill the first"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "nsbox ls after the kills"
}

test_paging() {
        trap cleanup EXIT
        local d i ids="" token
        d=$(new_dir)
        start_daemon "$d"
        for i in 1 2 3; do
                create
                ids="$ids $ID"
        done
        local seen
        CODE=$(curl -s -D "$TEST_TMP/h" -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" "$URL/v2/sandboxes?limit=2")
        BODY=$(cat "$TEST_TMP/body")
        assert_eq 200 "$CODE" "the first page"
        assert_eq 2 "$(json 'len(j)')" "the first page's length"
        seen=$(json '" ".join(s["sandboxID"] for s in j)')
        token=$(grep -i '^x-next-token:' "$TEST_TMP/h" | tr -d '\r' | cut -d' ' -f2)
        [ -n "$token" ] || fail "no X-Next-Token: $(cat "$TEST_TMP/h")"
        CODE=$(curl -s -D "$TEST_TMP/h" -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" "$URL/v2/sandboxes?limit=2&nextToken=$token")
        BODY=$(cat "$TEST_TMP/body")
        assert_eq 1 "$(json 'len(j)')" "the second page's length"
        seen="$seen $(json '" ".join(s["sandboxID"] for s in j)')"
        assert_eq "" "$(grep -i '^x-next-token:' "$TEST_TMP/h")" "a token after the last page"
        assert_eq "$(echo $ids | tr ' ' '\n' | sort | tr '\n' ' ')" "$(echo $seen | tr ' ' '\n' | sort | tr '\n' ' ')" "every sandbox once"
        api GET "/v2/sandboxes?limit=0"
        assert_eq 400 "$CODE" "limit 0"
        api GET "/v2/sandboxes?nextToken=abc"
        assert_eq 400 "$CODE" "a token not given"
}

# order, startedAfter and template as e2b 2.x's Sandbox.list sends them; paging either way
test_list_order_started_after_and_template() {
        trap cleanup EXIT
        local d a b c after
        d=$(new_dir)
        start_daemon "$d" ', "templates": {"small": {"create": {"memory": "256M"}}}'
        create
        a=$ID
        sleep 1.1
        after=$(date -u +%Y-%m-%dT%H:%M:%S.000Z)
        create
        b=$ID
        create '{"templateID": "small"}'
        c=$ID
        api GET "/v2/sandboxes?order=asc"
        assert_eq "$a $b $c" "$(json '" ".join(s["sandboxID"] for s in j)')" "oldest first"
        api GET "/v2/sandboxes"
        assert_eq "$c $b $a" "$(json '" ".join(s["sandboxID"] for s in j)')" "newest first, the default"
        local page seen="" token="" i
        for i in 1 2 3; do
                CODE=$(curl -s -D "$TEST_TMP/h" -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" \
                        "$URL/v2/sandboxes?order=asc&limit=1${token:+&nextToken=$token}")
                BODY=$(cat "$TEST_TMP/body")
                seen="$seen $(json 'j[0]["sandboxID"]')"
                token=$(grep -i '^x-next-token:' "$TEST_TMP/h" | tr -d '\r' | cut -d' ' -f2)
        done
        assert_eq " $a $b $c" "$seen" "pages of one, oldest first"
        assert_eq "" "$token" "no token after the last page"
        api GET "/v2/sandboxes?startedAfter=$after"
        assert_eq "$c $b" "$(json '" ".join(s["sandboxID"] for s in j)')" "started at or after $after"
        api GET "/v2/sandboxes?template=small"
        assert_eq "$c" "$(json '" ".join(s["sandboxID"] for s in j)')" "of template small"
        api GET "/v2/sandboxes?template=nope"
        assert_eq "[]" "$BODY" "of an unknown template"
        for page in "order=up" "startedAfter=yesterday" "startedAfter=2026-13-01T00:00:00Z" "template="; do
                api GET "/v2/sandboxes?$page"
                assert_eq "400 400" "$CODE $(json 'j["code"]')" "list with '$page'"
        done
}

# E2B's answers around a paused sandbox and a sandbox's time: its data plane is a 502 (isRunning()
# false) until connect resumes it; connect extends a running sandbox's time, never shortens it;
# metrics answer for a range that holds now
test_paused_data_plane_connect_and_metrics_range() {
        trap cleanup EXIT
        local d end now
        d=$(new_dir)
        start_daemon "$d"
        create '{"templateID": "base", "timeout": 600}'
        api GET "/sandboxes/$ID"
        end=$(json 'j["endAt"]')
        api POST "/sandboxes/$ID/connect" '{"timeout": 10}'
        assert_eq 200 "$CODE" "connect"
        api GET "/sandboxes/$ID"
        assert_eq "$end" "$(json 'j["endAt"]')" "a shorter connect timeout leaves endAt"
        api POST "/sandboxes/$ID/connect" '{"timeout": 3600}'
        api GET "/sandboxes/$ID"
        [ "$(json 'j["endAt"]')" \> "$end" ] || fail "a longer connect timeout did not extend endAt ($end): $BODY"
        health() { curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOKEN" "$URL/health"; }
        assert_eq 204 "$(health)" "envd's /health while running"
        api POST "/sandboxes/$ID/pause"
        assert_eq 204 "$CODE" "pause"
        assert_eq 502 "$(health)" "envd's /health while paused"
        assert_eq 502 "$(curl -s -o "$TEST_TMP/b" -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOKEN" \
                -H 'Content-Type: application/json' -d '{}' "$URL/process.Process/List")" "a call while paused"
        assert_contains "$(cat "$TEST_TMP/b")" "is paused" "its message"
        api POST "/sandboxes/$ID/connect" '{"timeout": 300}'
        assert_eq 201 "$CODE" "connect resumes"
        assert_eq 204 "$(health)" "envd's /health once resumed"
        now=$(date +%s)
        api GET "/sandboxes/$ID/metrics?start=$((now - 60))&end=$now"
        assert_eq 1 "$(json 'len(j)')" "a range holding now: $BODY"
        api GET "/sandboxes/$ID/metrics?start=$((now - 3600))&end=$((now - 1800))"
        assert_eq "200 []" "$CODE $BODY" "a range of the past"
        api GET "/sandboxes/$ID/metrics?start=$now&end=$((now - 5))"
        assert_eq 400 "$CODE" "start after end"
}

# E2B's filesystem-only pause (pause {"memory": false}, create's autoPauseMemory false, connect
# {"memory": false}): the sandbox's processes are killed and its files kept, it is paused until a
# connect, which resumes it rebooted; traffic never wakes it; bad values change nothing
test_pause_without_memory_keeps_files_only() {
        trap cleanup EXIT
        local d left
        d=$(new_dir)
        start_daemon "$d"
        create '{"templateID": "base", "timeout": 300, "allow_internet_access": false}'
        health() { curl -s -o "$TEST_TMP/h" -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOKEN" "$URL/health"; }
        "$NSBOX" exec "$ID" -- sh -c 'echo kept > /home/user/kept.txt; (sleep 4301.5 > /dev/null 2>&1 &)' || fail "exec"
        pgrep -f 'sleep 4301.5' > /dev/null || fail "the background process did not start"
        for bad in '{"memory": "no"}' '{"memory": 0}'; do
                api POST "/sandboxes/$ID/pause" "$bad"
                assert_eq 400 "$CODE" "pause with $bad: $BODY"
        done
        api GET "/sandboxes/$ID"
        assert_eq running "$(json 'j["state"]')" "the state after the bad pauses"
        pgrep -f 'sleep 4301.5' > /dev/null || fail "a bad pause killed the process"
        api POST "/sandboxes/$ID/pause" '{"memory": false}'
        assert_eq 204 "$CODE" "pause without memory: $BODY"
        left=$(wait_gone 'sleep 4301.5') || fail "processes left after a pause without memory: $left"
        api GET "/sandboxes/$ID"
        assert_eq paused "$(json 'j["state"]')" "the state"
        assert_eq "paused False" "$("$NSBOX" ls --json | python3 -c 'import json, sys; s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]][0]; print(s["state"], s["paused_memory"])' "$ID")" "nsbox ls"
        assert_eq 502 "$(health)" "envd's /health while paused"
        assert_contains "$(cat "$TEST_TMP/h")" "without its memory" "its message"
        api POST "/sandboxes/$ID/pause" '{"memory": false}'
        assert_eq 409 "$CODE" "a second pause"
        api POST "/sandboxes/$ID/connect" '{"timeout": 300}'
        assert_eq 201 "$CODE" "connect resumes it: $BODY"
        assert_eq 204 "$(health)" "envd's /health once resumed"
        assert_eq kept "$("$NSBOX" exec "$ID" -- cat /home/user/kept.txt)" "a file written before the pause"
        pgrep -f 'sleep 4301.5' > /dev/null && fail "the killed process is back"
        # a pause that keeps memory, then a connect that reboots (the SDKs' onResume "reboot")
        "$NSBOX" exec "$ID" -- sh -c '(sleep 4302.5 > /dev/null 2>&1 &)' || fail "exec after the resume"
        pgrep -f 'sleep 4302.5' > /dev/null || fail "the second background process did not start"
        api POST "/sandboxes/$ID/pause"
        assert_eq 204 "$CODE" "pause"
        pgrep -f 'sleep 4302.5' > /dev/null || fail "a pause that keeps memory killed the process"
        api POST "/sandboxes/$ID/connect" '{"timeout": 300, "memory": "no"}'
        assert_eq 400 "$CODE" "connect with a bad memory"
        api GET "/sandboxes/$ID"
        assert_eq paused "$(json 'j["state"]')" "the state after the bad connect"
        api POST "/sandboxes/$ID/connect" '{"timeout": 300, "memory": false}'
        assert_eq 201 "$CODE" "connect that reboots: $BODY"
        left=$(wait_gone 'sleep 4302.5') || fail "processes left after a connect that reboots: $left"
        assert_eq kept "$("$NSBOX" exec "$ID" -- cat /home/user/kept.txt)" "the file after the reboot"
        # create's autoPauseMemory: its timeout's pause keeps only files; never with autoResume
        api POST /v2/sandboxes '{"templateID": "base", "autoPause": true, "autoPauseMemory": false, "autoResume": {"enabled": true}}'
        assert_eq 400 "$CODE" "autoPauseMemory false with autoResume: $BODY"
        api POST /v2/sandboxes '{"templateID": "base", "autoPause": true, "autoPauseMemory": "no"}'
        assert_eq 400 "$CODE" "a bad autoPauseMemory"
        assert_eq 1 "$("$NSBOX" ls --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" "sandboxes after the bad creates"
        create '{"templateID": "base", "timeout": 2, "autoPause": true, "autoPauseMemory": false, "allow_internet_access": false}'
        "$NSBOX" exec "$ID" -- sh -c 'echo timed > /home/user/t.txt; (sleep 4303.5 > /dev/null 2>&1 &)' || fail "exec in the timed sandbox"
        local i
        for i in $(seq 100); do
                api GET "/sandboxes/$ID"
                [ "$(json 'j["state"]')" = paused ] && break
                sleep 0.2
        done
        assert_eq paused "$(json 'j["state"]')" "the state once its 2 s were up"
        left=$(wait_gone 'sleep 4303.5') || fail "processes left after its timeout's pause: $left"
        assert_eq 502 "$(health)" "envd's /health of the timed-out sandbox"
        api POST "/sandboxes/$ID/connect" '{"timeout": 300}'
        assert_eq 201 "$CODE" "connect after the timeout's pause"
        assert_eq timed "$("$NSBOX" exec "$ID" -- cat /home/user/t.txt)" "its file"
}

test_timeout_connect_pause_metrics() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d"
        create '{"templateID": "base", "timeout": 30}'
        api POST "/sandboxes/$ID/timeout" '{"timeout": 600}'
        assert_eq 204 "$CODE" "setTimeout"
        api GET "/sandboxes/$ID"
        local left
        left=$(json 'int((__import__("datetime").datetime.fromisoformat(j["endAt"].replace("Z", "+00:00")) - __import__("datetime").datetime.now(__import__("datetime").timezone.utc)).total_seconds())')
        [ "$left" -gt 500 ] || fail "endAt is $left s away after setTimeout 600"
        api POST "/sandboxes/$ID/connect" '{"timeout": 300}'
        assert_eq 200 "$CODE" "connect to a running sandbox"
        assert_eq "$ID $TOKEN" "$(json 'j["sandboxID"] + " " + j["envdAccessToken"]')" "connect's answer"
        api GET "/sandboxes/$ID/metrics"
        assert_eq 200 "$CODE" "metrics"
        assert_eq "True" "$(json 'all(k in j[0] for k in ("timestamp", "cpuCount", "cpuUsedPct", "memUsed", "memTotal", "diskUsed", "diskTotal"))')" "metrics fields"
        # paused by its cgroup's freezer, or, with no cgroup (a user on cgroup v1), by SIGSTOP
        api POST "/sandboxes/$ID/pause"
        assert_eq 204 "$CODE" "pause: $BODY"
        api POST "/sandboxes/$ID/pause"
        assert_eq 409 "$CODE" "pause of a paused sandbox"
        api GET "/v2/sandboxes?state=paused"
        assert_eq "$ID" "$(json '" ".join(s["sandboxID"] for s in j)')" "listed as paused"
        # the state filter as the JS SDK sends it (comma-separated) and as the Python SDK does (repeated)
        local other=$ID q
        create
        for q in "state=running,paused" "state=paused&state=running" ""; do
                api GET "/v2/sandboxes?$q"
                assert_eq "$(printf '%s\n' "$ID" "$other" | sort | paste -sd' ')" "$(json '" ".join(sorted(s["sandboxID"] for s in j))')" "listed with '$q'"
        done
        api GET "/v2/sandboxes?state=running"
        assert_eq "$ID" "$(json '" ".join(s["sandboxID"] for s in j)')" "listed as running"
        for q in "state=bogus" "state=running," "state=" "metadata=%25ZZ" "metadata=%3Dx" "metadata=a%3Db%26c"; do
                api GET "/v2/sandboxes?$q"
                assert_eq 400 "$CODE" "list with '$q': $BODY"
                assert_eq 1 "$(printf '%s\n' "$(json 'j["message"]')" | grep -c .)" "a one-line message"
        done
        api DELETE "/sandboxes/$ID"
        ID=$other
        api POST "/sandboxes/$ID/connect" '{"timeout": 300}'
        assert_eq 201 "$CODE" "connect resumes"
        api GET "/sandboxes/$ID"
        assert_eq running "$(json 'j["state"]')" "state after connect"
}

# the sandbox's own log (the e2b CLI's `sandbox logs`): nsboxd's lines about it and its commands
test_logs_tell_what_happened_to_the_sandbox() {
        trap cleanup EXIT
        local d before
        d=$(new_dir)
        start_daemon "$d"
        create
        "$NSBOX" exec "$ID" -- sh -c 'echo "a b"' > /dev/null || fail "exec"
        "$NSBOX" exec "$ID" -- echo "$(head -c 300 /dev/zero | tr '\0' x)" > /dev/null || fail "exec of a long line"
        api POST "/sandboxes/$ID/pause"
        assert_eq 204 "$CODE" "pause"
        api POST "/sandboxes/$ID/connect" '{"timeout": 300}'
        assert_eq 201 "$CODE" "connect resumes"
        api GET "/sandboxes/$ID/logs"
        assert_eq 200 "$CODE" "logs: $BODY"
        # v1: each line a JSON object with a level, as the CLI parses it; the same in logEntries
        assert_eq "sandbox.created process.started process.started sandbox.paused sandbox.resumed" \
                "$(json '" ".join(json.loads(l["line"])["event"] for l in j["logs"] if json.loads(l["line"])["level"] == "info")' | sed 's/ sandbox.timeout_set//g')" "the events"
        assert_eq "exec: sh -c echo \"a b\"" "$(json '[e["message"] for e in j["logEntries"] if e["fields"]["event"] == "process.started"][0]')" "the command"
        assert_eq True "$(json 'len(j["logs"]) == len(j["logEntries"]) and all(l["timestamp"].endswith("Z") for l in j["logs"])')" "v1's two forms"
        assert_eq "206 True" "$(json '[(len(e["message"]), e["message"].endswith("xx...")) for e in j["logEntries"] if "xxx" in e["message"]][0]' | tr -d "(),")" \
                "a long command's line, cut at 200 bytes"
        before=$(( $(date +%s) * 1000 - 600000 ))
        api GET "/sandboxes/$ID/logs?start=$before&limit=2"
        assert_eq 2 "$(json 'len(j["logs"])')" "a limit of 2"
        api GET "/sandboxes/$ID/logs?start=$(( $(date +%s) * 1000 + 600000 ))"
        assert_eq 0 "$(json 'len(j["logs"])')" "lines after a start in the future"
        # v2: newest first backward, a search, a level
        api GET "/v2/sandboxes/$ID/logs?direction=backward&limit=1&search=paused"
        assert_eq "sandbox.paused" "$(json '" ".join(e["fields"]["event"] for e in j["logs"])')" "v2, backward, searched"
        api GET "/v2/sandboxes/$ID/logs?level=warn"
        assert_eq "200 0" "$CODE $(json 'len(j["logs"])')" "no warnings"
        local q
        for q in "start=-1" "start=x" "limit=1001" "limit=" ; do
                api GET "/sandboxes/$ID/logs?$q"
                assert_eq 400 "$CODE" "logs with '$q': $BODY"
        done
        for q in "direction=up" "level=loud" "cursor=1.5"; do
                api GET "/v2/sandboxes/$ID/logs?$q"
                assert_eq 400 "$CODE" "v2 logs with '$q': $BODY"
                assert_eq 1 "$(printf '%s\n' "$(json 'j["message"]')" | grep -c .)" "a one-line message"
        done
        api DELETE "/sandboxes/$ID"
        api GET "/sandboxes/$ID/logs"
        assert_eq 404 "$CODE" "the logs of a killed sandbox"
}

# what the sandbox uses, with or without a cgroup: its processes' resident memory and CPU time, and
# its writable layer's bytes
test_metrics_count_what_the_sandbox_uses() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d"
        create
        "$NSBOX" exec "$ID" -- sh -c 'head -c 30000000 /dev/zero > /home/user/big; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done' ||
                fail "exec"
        "$NSBOX" exec -d "$ID" -- python3 -c 'import time; x = bytearray(80 << 20); open("/tmp/held", "w").close(); time.sleep(300)' > /dev/null ||
                fail "exec -d"
        local i
        for i in $(seq 100); do
                "$NSBOX" exec "$ID" -- test -e /tmp/held && break
                sleep 0.1
        done
        sleep 1 # a whole second of life: cpuUsedPct is over the sandbox's lifetime, in seconds
        api GET "/sandboxes/$ID/metrics"
        assert_eq 200 "$CODE" "metrics"
        local m
        m=$(json '"%d %d %d" % (j[0]["diskUsed"] >= 30000000, j[0]["memUsed"] >= 80 << 20, j[0]["cpuUsedPct"] > 0)')
        assert_eq "1 1 1" "$m" "diskUsed >= 30 MB, memUsed >= 80 MiB, cpuUsedPct > 0: $BODY"
}

test_templates_are_what_a_create_takes() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" ', "templates": {"small": {"create": {"memory": "256M"}}}'
        api GET /templates
        assert_eq 200 "$CODE" "template list: $BODY"
        assert_eq "base small code-interpreter-v1" "$(json '" ".join(t["templateID"] for t in j)')" "base, the configured one, the code interpreter"
        assert_eq "0 None ready True" "$(json '"%d %s %s %s" % (j[1]["spawnCount"], j[1]["lastSpawnedAt"], j[1]["buildStatus"], j[1]["public"])')" \
                "small, never used yet"
        create '{"templateID": "small"}'
        create
        api GET /templates
        assert_eq "1 1 256 True" "$(json '"%d %d %d %s" % (j[0]["spawnCount"], j[1]["spawnCount"], j[1]["memoryMB"], j[1]["lastSpawnedAt"] is not None)')" \
                "each create counted; small's figures are its sandboxes': $BODY"
        api GET /templates/aliases/code-interpreter
        assert_eq "200 code-interpreter-v1" "$CODE $(json 'j["templateID"]')" "the code interpreter's other name"
        api GET /templates/aliases/no-such
        assert_eq "404 404" "$CODE $(json 'j["code"]')" "an unknown alias"
        api GET /templates/small
        assert_eq "200 small ready" "$CODE $(json 'j["templateID"] + " " + j["builds"][0]["status"]')" "one template with its build"
        api POST /v3/templates '{"name": "mine"}'
        assert_eq 501 "$CODE" "a template build: $BODY"
        api GET /templates
        assert_eq 3 "$(json 'len(j)')" "the refused build made no template"
}

test_metrics_of_many_sandboxes() {
        trap cleanup EXIT
        local d a b
        d=$(new_dir)
        start_daemon "$d"
        create
        a=$ID
        create
        b=$ID
        api GET "/sandboxes/metrics?sandbox_ids=$a,$b,0123456789abcdef0123456789abcdef"
        assert_eq 200 "$CODE" "metrics of many: $BODY"
        assert_eq "$(printf '%s\n' "$a" "$b" | sort | tr '\n' ' ')" "$(json '" ".join(sorted(j["sandboxes"])) + " "')" "both, the unknown id left out"
        assert_eq 1073741824 "$(json 'j["sandboxes"]["'"$a"'"]["diskTotal"]')" "a SandboxMetric each"
        local q
        for q in "" "sandbox_ids=" "sandbox_ids=$a,$a" "sandbox_ids=$a,,$b" "sandbox_ids=$(python3 -c 'print(",".join("%032x" % i for i in range(101)))')"; do
                api GET "/sandboxes/metrics?$q"
                assert_eq "400 400" "$CODE $(json 'j["code"]')" "metrics?$q"
        done
}

test_bad_bodies_change_nothing() {
        trap cleanup EXIT
        local d b
        d=$(new_dir)
        start_daemon "$d"
        for b in 'nope' '[]' '{"timeout": "60"}' '{"timeout": -1}' '{"timeout": 1e12}' '{"metadata": {"a": 1}}' \
                 '{"metadata": "x"}' '{"envVars": {"A": null}}' '{"autoPause": "yes"}' '{"templateID": 7}' \
                 '{"allow_internet_access": 1}' '{"autoResume": true}' '{"autoResume": {"enabled": 1}}' \
                 '{"autoResume": {"enabled": true, "x": 1}}' '{"envVars": {"A=B": "x"}}' '{"envVars": {"": "x"}}' \
                 '{"volumeMounts": [{"name": "v", "path": "/data"}]}' '{"iam": {"tokens": {}}}'; do
                api POST /v2/sandboxes "$b"
                assert_eq 400 "$CODE" "create with $b: $BODY"
                assert_eq 400 "$(json 'j["code"]')" "its JSON code"
                assert_eq 1 "$(printf '%s\n' "$(json 'j["message"]')" | grep -c .)" "a one-line message"
        done
        api POST /v2/sandboxes '{"templateID": "no-such-template"}'
        assert_eq 404 "$CODE" "an unknown template"
        # framing that could smuggle a request, a body too large
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" -H 'Transfer-Encoding: chunked' -H 'Content-Length: 4' \
                --data-binary '{}' "$URL/v2/sandboxes")
        assert_eq 400 "$CODE" "Content-Length with Transfer-Encoding"
        head -c 2000000 /dev/zero | tr '\0' ' ' > "$TEST_TMP/big"
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" --data-binary @"$TEST_TMP/big" "$URL/v2/sandboxes")
        assert_eq 413 "$CODE" "a 2 MB body"
        # headers over libmicrohttpd's per-connection memory (128 KiB): refused, not buffered
        printf 'X-Big: %s\r\n' "$(head -c 100000 /dev/zero | tr '\0' a)" > "$TEST_TMP/h1"
        printf 'X-Big2: %s\r\n' "$(head -c 100000 /dev/zero | tr '\0' b)" >> "$TEST_TMP/h1"
        CODE=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-KEY: $KEY" -H @"$TEST_TMP/h1" "$URL/v2/sandboxes")
        [ "$CODE" -ge 400 ] || [ "$CODE" = 000 ] || fail "200 KB of headers were answered $CODE"
        api GET /v2/sandboxes
        assert_eq "[]" "$BODY" "nothing was made"
        # snapshots and forks: bad input is a 400 and makes neither a snapshot nor a sandbox
        create
        for b in '{"count": 0}' '{"count": 101}' '{"count": "2"}' '{"timeout": -5}' '[]'; do
                api POST "/sandboxes/$ID/fork" "$b"
                assert_eq 400 "$CODE" "fork with $b: $BODY"
        done
        for b in '{"name": "a/b"}' '{"name": ".hidden"}' '{"name": 5}'; do
                api POST "/sandboxes/$ID/snapshots" "$b"
                assert_eq 400 "$CODE" "snapshot with $b: $BODY"
        done
        api GET "/snapshots?limit=0"
        assert_eq 400 "$CODE" "list snapshots with limit 0"
        api GET /snapshots
        assert_eq "200 []" "$CODE $BODY" "snapshots after the refusals"
        api DELETE "/templates/no-such-snapshot"
        assert_eq 404 "$CODE" "delete of an unknown snapshot"
        api POST "/sandboxes/ffffffffffffffffffffffffffffffff/fork" '{}'
        assert_eq 404 "$CODE" "fork of an unknown sandbox"
        api GET /v2/sandboxes
        assert_eq "$ID" "$(json '" ".join(s["sandboxID"] for s in j)')" "sandboxes after the refusals"
}

test_tokens_open_their_own_sandbox_only() {
        trap cleanup EXIT
        local d a atok
        d=$(new_dir)
        start_daemon "$d"
        create
        a=$ID atok=$TOKEN
        create
        envd() { curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $1" "${@:2}" "$URL/health"; }
        assert_eq 204 "$(envd "$a" -H "X-Access-Token: $atok")" "its own token"
        assert_eq 401 "$(envd "$ID" -H "X-Access-Token: $atok")" "another sandbox's token"
        assert_eq 401 "$(envd "$a")" "no token"
        assert_eq 204 "$(envd "$a" -H "X-API-KEY: $KEY")" "its owner's key"
        assert_eq 502 "$(envd 0123456789abcdef0123456789abcdef -H "X-API-KEY: $KEY")" "an unknown sandbox"
        assert_eq 400 "$(envd "$a" -H "X-Access-Token: $atok" -H 'E2b-Sandbox-Port: 99999')" "a bad port"
}

# A key acts as its user: another user's key does not reach root's sandboxes (root's nsboxd
# serves the tenant; root only).
# As the user: a key acts as its user, not as itself (a second key of the same user reaches the
# sandbox the first made), and a key for another uid cannot be made.
same_users_keys() {
        trap cleanup EXIT
        local d first
        d=$(new_dir)
        start_daemon "$d"
        create
        first=$KEY
        KEY=$("$NSBOX" api-key create --name second 2> /dev/null) || fail "a second key"
        api GET "/sandboxes/$ID"
        assert_eq 200 "$CODE" "the sandbox with the user's second key"
        api DELETE "/sandboxes/$ID"
        assert_eq 204 "$CODE" "killed with the second key"
        assert_status 125 "$NSBOX" api-key create --uid 0 --name forroot
        assert_contains "$OUT" "permission_denied" "a key for root, asked by a user"
        KEY=$first
}

test_another_users_key() {
        [ "$TEST_AS" = root ] || { same_users_keys; return; }
        trap cleanup EXIT
        local d mine tkey
        d=$(new_dir)
        start_daemon "$d"
        create
        mine=$ID
        tkey=$("$NSBOX" api-key create --uid "$(id -u "$TENANT")" --name tenant 2> /dev/null) || fail "a key for the tenant"
        local rootkey=$KEY
        KEY=$tkey
        api GET /v2/sandboxes
        assert_eq "[]" "$BODY" "the tenant's list"
        api GET "/sandboxes/$mine"
        assert_eq 404 "$CODE" "root's sandbox with the tenant's key"
        api DELETE "/sandboxes/$mine"
        assert_eq 404 "$CODE" "killing root's sandbox with the tenant's key"
        assert_eq 502 "$(curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $mine" -H "X-API-KEY: $tkey" "$URL/health")" "root's data plane"
        create
        KEY=$rootkey
        api GET "/sandboxes/$ID"
        assert_eq 404 "$CODE" "the tenant's sandbox with root's key (root's reach is the socket's)"
        api GET /v2/sandboxes
        assert_eq "$mine" "$(json '" ".join(s["sandboxID"] for s in j)')" "root's key lists root's sandboxes only"
        assert_status 0 "$NSBOX" ls --json
        assert_contains "$OUT" "\"uid\": $(id -u "$TENANT")" "the tenant's sandbox is the tenant's"
}

test_kill_9_leaves_nothing() {
        trap cleanup EXIT
        local d agents mounts
        mounts=$(grep -c . /proc/self/mountinfo)
        d=$(new_dir)
        start_daemon "$d"
        create
        create
        agents=$("$NSBOX" ls --json | python3 -c 'import json, sys; print(" ".join(str(s["pid"]) for s in json.load(sys.stdin)))')
        # a request in flight when nsboxd dies
        curl -s -m 20 -H "X-API-KEY: $KEY" -d '{"timeout": 60}' "$URL/v2/sandboxes" > /dev/null &
        kill -KILL "$DPID"
        wait_pids_gone 10 $agents > /dev/null || fail "agents left after kill -9 of nsboxd: $agents"
        wait
        assert_eq "$mounts" "$(grep -c . /proc/self/mountinfo)" "host mounts"
        CODE=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health") || true
        assert_eq 000 "$CODE" "the port after nsboxd died"
}

# on_stop "keep": the next nsboxd serves the same sandbox with its metadata and access token
test_kept_sandboxes_keep_their_token_and_metadata() {
        trap cleanup EXIT
        local d keeper tok
        d=$(new_dir)
        start_daemon "$d" ', "on_stop": "keep", "keep_timeout": 120'
        create '{"templateID": "base", "timeout": 300, "allow_internet_access": false}'
        local files=$ID files_tok=$TOKEN
        api POST "/sandboxes/$files/pause" '{"memory": false}'
        assert_eq 204 "$CODE" "pause without memory"
        create '{"templateID": "base", "timeout": 300, "metadata": {"who": "kept one"}}'
        tok=$TOKEN
        kill -TERM "$DPID"
        wait_pids_gone 30 "$DPID" > /dev/null || fail "nsboxd did not stop"
        keeper=$(sed -n 's/.*sandboxes kept for the next nsboxd by keeper \([0-9]*\) .*/\1/p' "$d/log" | tail -n 1)
        [ -n "$keeper" ] || fail "no keeper: $(tail -n 3 "$d/log")"
        MY_PIDS="$MY_PIDS $keeper"
        start_daemon "$d" ', "on_stop": "keep", "keep_timeout": 120'
        wait_pids_gone 10 "$keeper" > /dev/null || fail "the keeper still runs"
        api GET "/sandboxes/$ID"
        assert_eq 200 "$CODE" "get after the restart: $BODY"
        assert_eq "kept one" "$(json 'j["metadata"]["who"]')" "metadata after the restart"
        assert_eq "$tok" "$(json 'j["envdAccessToken"]')" "the token after the restart"
        assert_eq 204 "$(curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $tok" "$URL/health")" "the token opens its data plane"
        api DELETE "/sandboxes/$ID"
        assert_eq 204 "$CODE" "kill after the restart"
        # the one paused without memory is still so: traffic does not wake it, a connect reboots it
        assert_eq 502 "$(curl -s -o "$TEST_TMP/h" -w '%{http_code}' -H "E2b-Sandbox-Id: $files" -H "X-Access-Token: $files_tok" "$URL/health")" \
                "its data plane after the restart"
        assert_contains "$(cat "$TEST_TMP/h")" "without its memory" "its message after the restart"
        api POST "/sandboxes/$files/connect" '{"timeout": 300}'
        assert_eq 201 "$CODE" "connect after the restart: $BODY"
        assert_eq 204 "$(curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $files" -H "X-Access-Token: $files_tok" "$URL/health")" \
                "its data plane once resumed"
        api DELETE "/sandboxes/$files"
        assert_eq 204 "$CODE" "kill of the rebooted one"
}

test_zz_no_daemon_left() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
st=$?
chmod -R u+rwX "$SESSION_DIR" 2> /dev/null
rm -rf "$SESSION_DIR"
exit $st
