#!/usr/bin/env bash
# envd's process.Process over nsboxd's HTTP API (nsboxd(8) HTTP API, nsbox-protocol(7)): the
# Connect framing of Start and Connect (one envelope per event, start first, the end-stream
# envelope last, errors in it), bad requests answered in one line with nothing started, 200
# concurrent streams all ending, a detached process left to run when its stream's client goes,
# no process left when nsboxd is killed mid-stream, and the real E2B JS SDK (e2b@2.51.0):
# commands.run, its errors, callbacks, cwd, envs, timeoutMs, background + list + kill,
# connect, sendStdin, and pty.create when the agent has ptys.  Each test runs an nsboxd of its
# own on 127.0.0.1 (an unused port) with a key file in a directory of its own.
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SESSION_DIR=$(mktemp -d /tmp/nsbox-hproc.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"
E2B_VERSION=2.51.0
MY_DAEMONS=""
MY_PIDS=""

new_dir() { local d; d=$(mktemp -d "$SESSION_DIR/t.XXXXXX") && chmod 0711 "$d" && echo "$d"; }

# start_daemon DIR: nsboxd with the HTTP API on a free port of 127.0.0.1; sets DPID, NSBOX_SOCKET,
# URL, KEY.
start_daemon() {
        local dir=$1 i port
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json"}}\n' "$port" "$dir" > "$dir/config.json"
        NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" >> "$dir/log" 2>&1 < /dev/null &
        DPID=$!
        MY_DAEMONS="$MY_DAEMONS $DPID"
        export NSBOX_SOCKET="$dir/d.sock"
        for i in $(seq 300); do
                grep -q "E2B-compatible HTTP API on 127.0.0.1:$port" "$dir/log" && [ "$(daemon_pid)" = "$DPID" ] && break
                pid_alive "$DPID" || fail "nsboxd exited at start: $(tail -n 5 "$dir/log")"
                sleep 0.1
        done
        grep -q "HTTP API on 127.0.0.1:$port" "$dir/log" || fail "nsboxd did not listen within 30 s: $(tail -n 5 "$dir/log")"
        URL="http://127.0.0.1:$port"
        KEY=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create"
}

# new_sandbox: an E2B create; sets SID and TOK
new_sandbox() {
        local out
        out=$(curl -sS -m 30 -H "X-API-KEY: $KEY" -d '{"templateID": "base", "timeout": 600, "envVars": {"SBV": "sv", "FOO": "sandbox"}}' "$URL/v2/sandboxes") ||
                fail "create: $out"
        SID=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create: $out"
        TOK=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])')
}

# envelope JSON: one Connect envelope (flags 0) around JSON, on stdout
envelope() { python3 -c 'import sys, struct; d = sys.argv[1].encode(); sys.stdout.buffer.write(b"\0" + struct.pack(">I", len(d)) + d)' "$1"; }

# frames: a streamed response body on stdin as lines "FLAGS JSON"; "BAD ..." when it does not
# split into whole envelopes
frames() {
        python3 -c '
import sys, struct
b = sys.stdin.buffer.read()
while b:
    if len(b) < 5 or len(b) < 5 + struct.unpack(">I", b[1:5])[0]:
        print("BAD trailing", len(b)); break
    n = struct.unpack(">I", b[1:5])[0]
    print(b[0], b[5:5 + n].decode()); b = b[5 + n:]'
}

# stream METHOD JSON [curl args]: a streamed call's frames
stream() {
        local m=$1 j=$2
        shift 2
        envelope "$j" | curl -sS -m 30 -H "E2b-Sandbox-Id: $SID" -H "X-Access-Token: $TOK" -H 'Content-Type: application/connect+json' \
                --data-binary @- "$@" "$URL/process.Process/$m" | frames
}

# unary METHOD JSON: "STATUS BODY"
unary() {
        curl -sS -m 30 -o "$TEST_TMP/u.out" -w '%{http_code}' -H "E2b-Sandbox-Id: $SID" -H "X-Access-Token: $TOK" \
                -H 'Content-Type: application/json' -d "$2" "$URL/process.Process/$1"
        printf ' %s\n' "$(cat "$TEST_TMP/u.out")"
}

b64() { printf '%s' "$1" | base64 -w0; }

# decoded KIND: the bytes of the KIND (stdout, stderr, pty) data events in frames on stdin
decoded() {
        python3 -c '
import base64, json, sys
for line in sys.stdin:
    f, _, j = line.partition(" ")
    d = json.loads(j).get("event", {}).get("data", {})
    if sys.argv[1] in d:
        sys.stdout.write(base64.b64decode(d[sys.argv[1]]).decode())' "$1"
}

test_start_framing_and_end() {
        trap cleanup EXIT
        local d out
        d=$(new_dir)
        start_daemon "$d"
        new_sandbox
        out=$(stream Start '{"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hi; echo err >&2; echo $FOO $SBV $HOME $USER; pwd; exit 3"], "envs": {"FOO": "bar"}}, "stdin": false}')
        printf '%s\n' "$out" | grep -q BAD && fail "the stream does not split into envelopes: $out"
        assert_contains "$(printf '%s\n' "$out" | head -n 1)" '0 {"event":{"start":{"pid":' "the first envelope: $out"
        assert_eq '2 {}' "$(printf '%s\n' "$out" | tail -n 1)" "the last envelope: $out"
        assert_eq 1 "$(printf '%s\n' "$out" | grep -c '^2 ')" "end-stream envelopes: $out"
        assert_eq "hi|bar sv /home/user user|/home/user|" "$(printf '%s\n' "$out" | decoded stdout | tr '\n' '|')" \
                "stdout: the environment (the request's envs win) and the default cwd"
        assert_eq "err" "$(printf '%s\n' "$out" | decoded stderr)" "stderr"
        assert_contains "$out" '{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}' "the end event"
        # killed: exitCode -1, not exited, Go's status string
        out=$(stream Start '{"process": {"cmd": "/bin/sh", "args": ["-c", "kill -9 $$"], "cwd": "/tmp"}}')
        assert_contains "$out" '{"end":{"exitCode":-1,"exited":false,"status":"signal: killed","error":"signal: killed"}}' "a killed process's end"
        # a relative cwd is in /home/user
        stream Start '{"process": {"cmd": "mkdir", "args": ["-p", "/home/user/sub"]}}' > /dev/null
        out=$(stream Start '{"process": {"cmd": "pwd", "cwd": "sub"}}')
        assert_eq "/home/user/sub" "$(printf '%s\n' "$out" | decoded stdout)" "a relative cwd"
        # keepalives while it runs, with Keepalive-Ping-Interval
        out=$(stream Start '{"process": {"cmd": "sleep", "args": ["2.5"]}}' -H 'Keepalive-Ping-Interval: 1')
        assert_contains "$out" '0 {"event":{"keepalive":{}}}' "keepalive events"
        assert_eq '2 {}' "$(printf '%s\n' "$out" | tail -n 1)" "the last envelope after keepalives"
}

test_bad_requests_answered_in_one_line() {
        trap cleanup EXIT
        local d out bad
        d=$(new_dir)
        start_daemon "$d"
        new_sandbox
        # a stream's errors: 200, one end-stream envelope with the error
        for bad in '{"process": {}}' '{"process": {"cmd": "x", "args": "no"}}' '{"process": {"cmd": "x", "envs": {"A": 1}}}' \
                '{"process": {"cmd": "x"}, "pty": {"size": {"cols": 0, "rows": 5}}}' '{"process": {"cmd": "x"}, "stdin": "yes"}' '[1]'; do
                out=$(stream Start "$bad")
                assert_eq 1 "$(printf '%s\n' "$out" | grep -c .)" "envelopes for $bad: $out"
                assert_contains "$out" '2 {"error":{"code":"invalid_argument","message":"' "Start $bad"
        done
        out=$(printf 'not an envelope' | curl -sS -m 10 -H "E2b-Sandbox-Id: $SID" -H "X-Access-Token: $TOK" \
                -H 'Content-Type: application/connect+json' --data-binary @- "$URL/process.Process/Start" | frames)
        assert_contains "$out" '2 {"error":{"code":"invalid_argument"' "a body that is not an envelope"
        out=$(stream Start '{"process": {"cmd": "/no/such/program"}}')
        assert_contains "$out" '2 {"error":{"code":"internal","message":"error starting process' "a program that is not there"
        out=$(stream Start '{"process": {"cmd": "true", "cwd": "/no/such/dir"}}')
        assert_contains "$out" '2 {"error":{"code":"not_found"' "a cwd that is not there"
        out=$(stream Start '{"process": {"cmd": "true"}}' -H "Authorization: Basic $(b64 root:)")
        assert_contains "$out" '2 {"error":{"code":"unauthenticated"' "the user root"
        out=$(stream Connect '{"process": {"pid": 99999}}')
        assert_eq '2 {"error":{"code":"not_found","message":"process with pid 99999 not found"}}' "$out" "Connect to no process"
        out=$(stream Connect '{"process": {"tag": "nope"}}')
        assert_contains "$out" '2 {"error":{"code":"not_found"' "Connect to no tag"
        # unary errors: a status and {code, message}
        assert_contains "$(unary SendSignal '{"process": {"pid": 99999}, "signal": "SIGNAL_SIGKILL"}')" '404 {"code":"not_found"' \
                "SendSignal to no process"
        assert_contains "$(unary SendSignal '{"process": {"pid": 1}, "signal": "SIGNAL_SIGHUP"}')" '400 {"code":"invalid_argument"' "an unknown signal"
        assert_contains "$(unary SendInput '{"process": {"pid": 1}, "input": {}}')" '400 {"code":"invalid_argument"' "input without stdin or pty"
        assert_contains "$(unary SendInput '{"process": {"pid": 99999}, "input": {"stdin": "aGkK"}}')" '404 {"code":"not_found"' "input to no process"
        assert_contains "$(unary SendInput '{"process": {"pid": 1, "tag": "x"}, "input": {"stdin": "aGkK"}}')" '400 {"code":"invalid_argument"' "a pid and a tag"
        assert_contains "$(unary CloseStdin '{"process": {"pid": "x"}}')" '400 {"code":"invalid_argument"' "a pid that is not a number"
        assert_contains "$(unary List '{"a": ')" '400 {"code":"invalid_argument"' "a body that is not JSON"
        assert_contains "$(unary StreamInput '{}')" '{"code":"unimplemented"' "StreamInput"
        assert_contains "$(unary Nope '{}')" '{"code":"unimplemented"' "a method that is not there"
        assert_contains "$(unary Start '{}')" '400 {"code":"invalid_argument"' "Start asked as unary"
        assert_eq '200 {"processes":[]}' "$(unary List '{}')" "nothing was started by the bad requests"
}

test_background_list_input_signal_by_tag() {
        trap cleanup EXIT
        local d out pid
        d=$(new_dir)
        start_daemon "$d"
        new_sandbox
        # the stream's client goes (curl's deadline): the detached process goes on
        stream Start '{"process": {"cmd": "/bin/sh", "args": ["-c", "read l; echo got $l; sleep 60"]}, "tag": "my tag", "stdin": true}' \
                -m 2 > "$TEST_TMP/s.out" 2> /dev/null
        pid=$(sed -n 's/^0 {"event":{"start":{"pid":\([0-9]*\)}}}$/\1/p' "$TEST_TMP/s.out")
        [ -n "$pid" ] || fail "no start event: $(cat "$TEST_TMP/s.out")"
        out=$(unary List '{}')
        assert_eq "200 {\"processes\":[{\"pid\":$pid,\"config\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"read l; echo got \$l; sleep 60\"],\"envs\":{}},\"tag\":\"my tag\"}]}" \
                "$out" "List"
        assert_eq '200 {}' "$(unary SendInput '{"process": {"tag": "my tag"}, "input": {"stdin": "'"$(b64 $'x\n')"'"}}')" "SendInput by tag"
        stream Connect '{"process": {"tag": "my tag"}}' -m 3 > "$TEST_TMP/c.out" 2> /dev/null
        assert_contains "$(cat "$TEST_TMP/c.out")" "0 {\"event\":{\"start\":{\"pid\":$pid}}}" "Connect's start"
        assert_eq "got x" "$(decoded stdout < "$TEST_TMP/c.out")" "Connect's output (the recent, then the live)"
        assert_eq '200 {}' "$(unary Update '{"process": {"pid": '"$pid"'}}')" "Update without a pty"
        assert_eq '200 {}' "$(unary SendSignal '{"process": {"pid": '"$pid"'}, "signal": "SIGNAL_SIGTERM"}')" "SendSignal"
        for _ in $(seq 50); do
                [ "$(unary List '{}')" = '200 {"processes":[]}' ] && break
                sleep 0.1
        done
        assert_eq '200 {"processes":[]}' "$(unary List '{}')" "List once it ended"
        assert_contains "$(unary SendSignal '{"process": {"tag": "my tag"}, "signal": "SIGNAL_SIGKILL"}')" '404 {"code":"not_found"' "its tag once it ended"
}

test_200_concurrent_streams_all_end() {
        trap cleanup EXIT
        local d i n pids=""
        d=$(new_dir)
        start_daemon "$d"
        new_sandbox
        for i in $(seq 200); do
                stream Start '{"process": {"cmd": "echo", "args": ["n'"$i"'"]}, "stdin": false}' > "$TEST_TMP/c.$i" 2>&1 &
                pids="$pids $!"
        done
        # shellcheck disable=SC2086
        wait $pids
        n=0
        for i in $(seq 200); do
                [ "$(decoded stdout < "$TEST_TMP/c.$i")" = "n$i" ] && grep -q '"end":{"exitCode":0' "$TEST_TMP/c.$i" &&
                        [ "$(tail -n 1 "$TEST_TMP/c.$i")" = '2 {}' ] && n=$((n + 1))
        done
        assert_eq 200 "$n" "streams that ended with their output and exit 0 (one: $(cat "$TEST_TMP/c.1"))"
        assert_eq '200 {"processes":[]}' "$(unary List '{}')" "processes left"
}

# Readers that never read: each command waits in its pipe (held, as under envd), and what nsboxd
# keeps for them stays small (1 MiB a stream before its command is paused, 1 MiB in the stream).
test_streams_nobody_reads_hold_their_commands_in_little_memory() {
        trap cleanup EXIT
        local d i rss0 rss1 n=30
        d=$(new_dir)
        # an ASan build keeps what is freed (quarantine): RSS would count it
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1" start_daemon "$d"
        new_sandbox
        rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$DPID/status")
        python3 - "$URL" "$SID" "$TOK" "$n" > "$TEST_TMP/flood" 2>&1 <<'PY' &
import json, socket, struct, sys, time
url, sid, tok, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
host, port = url.split("//")[1].split(":")
body = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "yes 0123456789abcdef0123456789abcdef"]}}).encode()
env = b"\0" + struct.pack(">I", len(body)) + body
socks = []
for i in range(n):
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall((f"POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
               f"E2b-Sandbox-Id: {sid}\r\nX-Access-Token: {tok}\r\nContent-Length: {len(env)}\r\n\r\n").encode() + env)
    socks.append(s)
print("open", flush=True)
time.sleep(600)
PY
        local flood=$!
        MY_PIDS="$MY_PIDS $flood"
        for i in $(seq 300); do grep -q open "$TEST_TMP/flood" && break; sleep 0.1; done
        # every yes runs, then blocks: the held pipes stop them
        for i in $(seq 300); do [ "$(unary List '{}' | grep -o '"pid"' | wc -l)" = "$n" ] && break; sleep 0.1; done
        assert_eq "$n" "$(unary List '{}' | grep -o '"pid"' | wc -l)" "commands running"
        sleep 5
        rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$DPID/status")
        # nsbox stats: every stream is paused in the agent, a few MiB held for each
        local st
        for i in $(seq 100); do
                st=$("$NSBOX" stats --json | python3 -c 'import json, sys; s = json.load(sys.stdin)["streams"]; print(s["open"], s["paused"], s["held_bytes"] >> 20)')
                [ "${st% *}" = "$n $n" ] && break
                sleep 0.2
        done
        local human
        human=$("$NSBOX" stats)
        kill $flood
        wait $flood 2>/dev/null
        [ "${st% *}" = "$n $n" ] || fail "streams open, paused, MiB held: $st, not all $n paused"
        [ "${st##* }" -lt $((n * 6)) ] || fail "nsboxd holds ${st##* } MiB for $n streams nobody reads"
        assert_contains "$human" "streams: $n open, $n paused while their clients lag; " "nsbox stats"
        # 30 streams: 18 MiB each when only a 16 MiB backlog paused them
        [ $((rss1 - rss0)) -lt $((n * 6 * 1024)) ] || fail "nsboxd grew by $(((rss1 - rss0) / 1024)) MiB for $n streams nobody reads (streams open, paused, MiB held: $st)"
        local stuck
        stuck=$(unary List '{}')
        [[ $stuck == '200 {"processes":[{'* ]] || fail "List while held: $stuck"
}

test_nsboxd_killed_mid_stream_leaves_no_process() {
        trap cleanup EXIT
        local d spid left
        d=$(new_dir)
        start_daemon "$d"
        new_sandbox
        stream Start '{"process": {"cmd": "sleep", "args": ["4242.5"]}}' -m 60 > /dev/null 2>&1 &
        spid=$!
        MY_PIDS="$MY_PIDS $spid"
        for _ in $(seq 50); do
                pgrep -f 'sleep 4242.5' > /dev/null && break
                sleep 0.1
        done
        pgrep -f 'sleep 4242.5' > /dev/null || fail "the process did not start"
        kill -KILL "$DPID"
        wait_pids_gone 10 "$DPID" > /dev/null || fail "nsboxd did not die"
        left=$(wait_gone 'sleep 4242.5') || fail "processes left after nsboxd was killed: $left"
        wait_pids_gone 10 "$spid" > /dev/null || fail "the client's stream did not end"
}

# ---- the real E2B JS SDK -----------------------------------------------------------------------

# e2b@$E2B_VERSION, installed once per machine (root: /var/cache/nsbox-test/npm-e2b) or per user
# ($HOME/.cache/nsbox-test/npm-e2b, unless root's is there to read); echoes its directory.
e2b_sdk_dir() {
        local shared=/var/cache/nsbox-test/npm-e2b dir global
        if [ "$(id -u)" = 0 ]; then
                dir=$shared
        elif [ -r "$shared/node_modules/e2b/package.json" ]; then
                echo "$shared"
                return 0
        else
                dir=${XDG_CACHE_HOME:-$HOME/.cache}/nsbox-test/npm-e2b
        fi
        mkdir -p "$dir" || return 1
        global=$(npm config get globalconfig 2> /dev/null)
        (
                flock 9
                grep -qs "\"version\": \"$E2B_VERSION\"" "$dir/node_modules/e2b/package.json" ||
                        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --cache "$dir/.npm-cache" \
                                ${global:+--globalconfig "$global"} "e2b@$E2B_VERSION" >&2
        ) 9> "$dir/.lock" || return 1
        echo "$dir"
}

test_e2b_sdk_commands_and_pty() {
        trap cleanup EXIT
        command -v node > /dev/null || skip "node is missing (apt-get install nodejs npm)"
        [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || skip "e2b needs node >= 20"
        local d dir out pty=""
        dir=$(e2b_sdk_dir) || fail "npm install e2b@$E2B_VERSION failed"
        d=$(new_dir)
        start_daemon "$d"
        "$NSBOX" tools --format json | grep -q process_resize && pty=1
        mkdir -p "$TEST_TMP/sdk"
        ln -sfn "$dir/node_modules" "$TEST_TMP/sdk/node_modules"
        cp "$NSBOX_SRC/tests/integration/http_process.mjs" "$TEST_TMP/sdk/"
        out=$(cd "$TEST_TMP/sdk" && E2B_API_KEY=$KEY E2B_API_URL=$URL E2B_SANDBOX_URL=$URL PTY=$pty timeout 180 node http_process.mjs 2>&1) ||
                fail "the SDK script: $out"
        assert_contains "$out" 'run {"stdout":"hi\n","exitCode":0}' "commands.run"
        assert_contains "$out" 'exit {"cls":true,"exitCode":3,"stderr":"bad\n","stdout":"out\n","error":"exit status 3"}' "CommandExitError"
        assert_contains "$out" 'order "o:a\ne:b\no:c\n"' "onStdout and onStderr in order"
        assert_contains "$out" 'cwd /tmp' "cwd"
        assert_contains "$out" 'envs bar /home/user user' "envs"
        assert_contains "$out" 'who user,/home/user' "the user and the home"
        assert_contains "$out" 'timeout {"name":"TimeoutError","fast":true,"gone":true}' "timeoutMs"
        assert_contains "$out" 'list {"cmd":"/bin/bash","args":["-l","-c","sleep 60"]}' "commands.list"
        assert_contains "$out" 'kill true killed true again false' "commands.kill"
        assert_contains "$out" 'connect "first\nsecond\n"' "commands.connect"
        assert_contains "$out" 'stdin "piped\n"' "commands.sendStdin and closeStdin"
        assert_contains "$out" 'nostdin done' "stdin closed unless asked for"
        if [ -n "$pty" ]; then
                assert_contains "$out" 'pty {"first":true,"resized":true,"kill":true}' "pty.create, sendInput, resize, kill"
        else
                assert_contains "$out" 'pty-error ' "pty.create without ptys in the agent"
        fi
}

# Last: no nsboxd of this file's is left (every one has this file's NSBOX_STORE in its environment).
test_zz_no_daemon_left() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
st=$?
chmod -R u+rwX "$SESSION_DIR" 2> /dev/null
rm -rf "$SESSION_DIR"
exit $st
