#!/usr/bin/env bash
# Resource limits, accounting and pause/resume on the host tier (issue "cgroup v2 limits,
# accounting and pause/resume").  This host's cgroup v2 hierarchy lacks the memory, pids and cpu
# controllers (cgroup v1 holds them): what is checked here is what a user sees on such a host, and
# what works without controllers (a cgroup per sandbox for root, cgroup.kill, cgroup.freeze,
# cpu.stat).  The limits themselves are exercised on a real cgroup v2 kernel by tests/vm.
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

SESSION_DIR=$(mktemp -d /tmp/nsbox-lim.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
# the nsboxd the commands start goes with the file, whichever tests ran (TEST_ONLY too)
trap 'stop_file_daemon "$SESSION_DIR"' EXIT

jget() {
        python3 -c 'import json, sys
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

# The controllers the v2 hierarchy offers at its root (what a sandbox could ever get here).
v2_root() { awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo; }
root_controllers() { cat "$(v2_root)/cgroup.controllers" 2>/dev/null; }
has_all_controllers() { local c; for c in memory pids cpu; do grep -qw "$c" <<<"$(root_controllers)" || return 1; done; }
# The mount of the cgroup v1 hierarchy holding controller $1 ("" when v1 does not hold it).
v1_mount() { awk -v c="$1" '$9 == "cgroup" { n = split($NF, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) { print $5; exit } }' /proc/self/mountinfo; }
# Root on a hybrid host: the controllers cgroup2 lacks come from cgroup v1 (nsbox(1), RESOURCE LIMITS).
v1_limits() { [ "$TEST_AS" = root ] && [ -n "$(v1_mount memory)" ] && [ -n "$(v1_mount pids)" ] && [ -n "$(v1_mount cpu)" ]; }
# Limits hold for whoever runs the test: in v2, or for root in v1.
limits_hold() { { has_all_controllers && [ "$TEST_AS" = root ]; } || v1_limits; }
# Sandbox cgroups under nsbox's own cgroup of each v1 hierarchy (0 without v1).
v1_sandboxes() { local c n=0; for c in memory pids cpu; do [ -n "$(v1_mount $c)" ] && n=$((n + $(ls "$(v1_mount $c)/nsbox" 2>/dev/null | grep -c '^sb-'))); done; echo $n; }

# Where root's sandbox cgroups go on this host (nsbox(1), RESOURCE LIMITS).
sandbox_cgroup_of_run() { # json-line
        printf '%s\n' "$1" | jget 'd["cgroup"] or ""'
}

test_limit_options_with_bad_values_are_one_line_errors() {
        local bad
        for bad in "--memory abc" "--memory 10" "--memory 1K" "--pids 0" "--pids x" "--pids 99999999" "--cpus 0" \
                "--cpus -1" "--cpus abc" "--cpus 2000" "--cpus 0.5x" "--memory"; do
                # shellcheck disable=SC2086
                assert_status 125 "$NSBOX" run $bad -- true
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "${bad%% *}" "error for '$bad'"
        done
        assert_status 125 "$NSBOX" create --pids 0
        assert_one_line_error "$OUT"
        # the daemon checks what reaches it with the same parser
        "$NSBOX" ls > /dev/null || fail "no nsboxd"
        local p
        for p in '{"pids": "x"}' '{"pids": 0}' '{"cpus": "half"}' '{"cpus": -1}' '{"memory": "lots"}' '{"memory": -5}'; do
                OUT=$(python3 -c 'import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "create", "params": json.loads(sys.argv[2])}).encode() + b"\n")
e = json.loads(s.makefile().readline())["error"]
print(e["data"]["code"], e["message"])' "$NSBOX_SOCKET" "$p") || fail "create $p: no error reply"
                assert_contains "$OUT" "invalid_argument" "create $p"
        done
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "sandboxes after refused creates"
}

test_required_limits_refused_naming_missing_controllers() {
        printf '{"limits": {"memory": "64M", "pids": 32, "cpus": 0.5, "enforce": "required"}}\n' > "$TEST_TMP/req.json"
        if limits_hold; then # enforced: it runs, in silence
                assert_status 0 "$NSBOX" run --policy "$TEST_TMP/req.json" -- echo ran
                assert_eq ran "$OUT" "a run whose required limits hold here"
                return
        fi
        local before; before=$(ls "$(v2_root)/nsbox" 2>/dev/null | grep -c '^sb-')
        assert_status 125 "$NSBOX" run --policy "$TEST_TMP/req.json" -- echo ran
        assert_one_line_error "$OUT"
        assert_not_contains "$OUT" "ran"
        if [ "$TEST_AS" = root ]; then
                assert_contains "$OUT" "need the cgroup v2 controllers memory pids cpu" "refusal"
                assert_contains "$OUT" "does not offer" "refusal"
        else
                assert_contains "$OUT" "need the cgroup v2 controllers memory pids cpu" "refusal"
                assert_contains "$OUT" "not delegated to uid $(id -u)" "refusal"
        fi
        assert_eq "$before" "$(ls "$(v2_root)/nsbox" 2>/dev/null | grep -c '^sb-')" "sandbox cgroups after a refusal"
        # the same limit from the command line with a required policy: refused the same way
        printf '{"limits": {"enforce": "required"}}\n' > "$TEST_TMP/req2.json"
        assert_status 125 "$NSBOX" run --policy "$TEST_TMP/req2.json" --pids 10 -- true
        assert_contains "$OUT" "controllers pids" "refusal of --pids"
        # no limit asked for: nothing to refuse
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/req2.json" -- echo ok
        assert_eq ok "$OUT"
}

# A limit asked for on the command line holds, or the start is refused in one line naming the
# controller and the way out; --limits best-effort runs without it and says so, in nsbox run's
# warning and in nsboxd's reply (create's stderr, inspect's limits_enforced and warnings).
pyj() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; } # a whole JSON text

test_explicit_limits_hold_or_are_refused() {
        "$NSBOX" run --memory 64M --pids 32 --cpus 0.5 -- echo ran > "$TEST_TMP/out" 2> "$TEST_TMP/err"
        local st=$?
        if limits_hold; then # enforced: no warning
                assert_eq "0 ran" "$st $(cat "$TEST_TMP/out")" "a run whose limits hold"
                assert_eq "" "$(cat "$TEST_TMP/err")" "stderr of a run whose limits hold"
        else
                assert_eq "125 " "$st $(cat "$TEST_TMP/out")" "a run whose limits cannot hold"
                assert_one_line_error "$(cat "$TEST_TMP/err")"
                assert_contains "$(cat "$TEST_TMP/err")" "need the cgroup v2 controllers memory pids cpu"
                assert_contains "$(cat "$TEST_TMP/err")" "; --limits best-effort runs without them"
                "$NSBOX" run --limits best-effort --memory 64M --pids 32 --cpus 0.5 -- echo ran > "$TEST_TMP/out" 2> "$TEST_TMP/err"
                assert_eq "0 ran" "$? $(cat "$TEST_TMP/out")" "--limits best-effort"
                assert_eq 1 "$(grep -c . "$TEST_TMP/err")" "stderr lines: $(cat "$TEST_TMP/err")"
                assert_contains "$(cat "$TEST_TMP/err")" "nsbox: warning: limits of policy 'default.json' need the cgroup v2 controllers memory pids cpu"
                assert_contains "$(cat "$TEST_TMP/err")" "running without them (limits.enforce is best-effort)"
        fi
        # the JSON result says so too, with what was asked for and what held (as nsboxd's replies)
        "$NSBOX" run --json --limits best-effort --pids 10 -- true 2> "$TEST_TMP/err"
        assert_eq '{"pids": 10, "disk": 1073741824}' "$(tail -n 1 "$TEST_TMP/err" | jget 'd["limits"]')" "the JSON result's limits"
        if limits_hold; then
                assert_eq None "$(tail -n 1 "$TEST_TMP/err" | jget 'str(d.get("warnings"))')" "warnings of a run whose limits hold"
                assert_eq '{"pids": 10, "disk": 1073741824}' "$(tail -n 1 "$TEST_TMP/err" | jget 'd["limits_enforced"]')" "limits_enforced"
        else
                assert_contains "$(tail -n 1 "$TEST_TMP/err" | jget 'd["warnings"][0]')" "limits not enforced: pids: " "the JSON result's warning"
                assert_eq '{"disk": 1073741824}' "$(tail -n 1 "$TEST_TMP/err" | jget 'd["limits_enforced"]')" "limits_enforced"
        fi
        assert_status 125 "$NSBOX" run --limits maybe -- true
        assert_eq "nsbox: run: --limits 'maybe': expected required or best-effort" "$OUT" "a bad --limits"
        # through nsboxd
        local id
        if limits_hold; then
                id=$("$NSBOX" create --memory 64M --pids 10 2> "$TEST_TMP/err") || fail "create: $(cat "$TEST_TMP/err")"
                assert_eq "" "$(cat "$TEST_TMP/err")" "create's stderr"
                "$NSBOX" inspect "$id" > "$TEST_TMP/i.json"
                assert_eq "67108864 10 None" "$(pyj '"%s %s %s" % (d[0]["limits_enforced"]["memory"], d[0]["limits_enforced"]["pids"], d[0].get("warnings"))' < "$TEST_TMP/i.json")" "inspect"
                "$NSBOX" rm -f "$id" > /dev/null
                return
        fi
        assert_status 125 "$NSBOX" create --memory 64M
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "--limits best-effort" "create's refusal"
        id=$("$NSBOX" create --limits best-effort --memory 64M --pids 10 2> "$TEST_TMP/err") || fail "create: $(cat "$TEST_TMP/err")"
        assert_eq 1 "$(grep -c . "$TEST_TMP/err")" "create's stderr lines: $(cat "$TEST_TMP/err")"
        assert_contains "$(cat "$TEST_TMP/err")" "nsbox: warning: limits not enforced: memory, pids: " "create's warning"
        "$NSBOX" inspect "$id" > "$TEST_TMP/i.json"
        assert_eq "67108864 10 | 1073741824 | 1" "$(pyj '"%s %s | %s | %d" % (d[0]["limits"]["memory"], d[0]["limits"]["pids"], " ".join(str(v) for v in d[0]["limits_enforced"].values()), len(d[0]["warnings"]))' < "$TEST_TMP/i.json")" "inspect: asked for, enforced (the disk), warnings"
        "$NSBOX" rm -f "$id" > /dev/null
}

test_run_json_reports_accounting() {
        "$NSBOX" run --json -- sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; head -c 3000000 /dev/zero > /tmp/f; exit 3' \
                > /dev/null 2> "$TEST_TMP/err"
        assert_eq 3 "$?" "exit status"
        local j; j=$(tail -n 1 "$TEST_TMP/err")
        assert_eq exited "$(printf '%s' "$j" | jget 'd["reason"]')" "reason"
        assert_eq 3 "$(printf '%s' "$j" | jget 'd["exit_code"]')" "exit_code"
        assert_eq false "$(printf '%s' "$j" | jget 'd["oom_killed"]')" "oom_killed"
        assert_eq false "$(printf '%s' "$j" | jget 'd["pids_limited"]')" "pids_limited"
        assert_eq True "$(printf '%s' "$j" | jget 'str(d["cpu_time_ms"] > 0 and d["wall_time_ms"] >= d["cpu_time_ms"] / 4)')" "cpu and wall time: $j"
        assert_eq True "$(printf '%s' "$j" | jget 'str(d["peak_memory_bytes"] > 1000000)')" "peak memory: $j"
        local cg; cg=$(sandbox_cgroup_of_run "$j")
        if [ "$TEST_AS" = root ]; then
                case "$cg" in "$(v2_root)"/*/sb-*) ;; *) fail "root's sandbox cgroup '$cg' is not under $(v2_root)" ;; esac
                [ ! -e "$cg" ] || fail "cgroup $cg left behind"
        else
                assert_eq "" "$cg" "cgroup of a user without a delegated subtree"
        fi
}

test_unwritable_cgroup_parent_runs_without_a_cgroup_with_one_warning() {
        # the root of the v2 hierarchy: root may create cgroups there, a user may not
        NSBOX_CGROUP_PARENT=/ "$NSBOX" run --json -- echo ok > "$TEST_TMP/out" 2> "$TEST_TMP/err"
        assert_eq 0 "$?" "exit status: $(cat "$TEST_TMP/err")"
        assert_eq ok "$(cat "$TEST_TMP/out")" "output"
        local cg; cg=$(sandbox_cgroup_of_run "$(tail -n 1 "$TEST_TMP/err")")
        if [ "$TEST_AS" = root ]; then
                assert_eq "$(v2_root)" "$(dirname "$cg")" "cgroup of a run under NSBOX_CGROUP_PARENT=/"
                assert_eq 1 "$(grep -c . "$TEST_TMP/err")" "stderr lines (the JSON only): $(cat "$TEST_TMP/err")"
        else
                assert_eq "" "$cg" "cgroup"
                assert_eq 2 "$(grep -c . "$TEST_TMP/err")" "stderr lines (a warning and the JSON): $(cat "$TEST_TMP/err")"
                assert_contains "$(head -n 1 "$TEST_TMP/err")" "nsbox: warning: cannot create cgroup $(v2_root)/sb-"
                assert_contains "$(head -n 1 "$TEST_TMP/err")" "Permission denied; running without one"
                # with limits that must hold: refused, in one line
                printf '{"limits": {"pids": 10, "enforce": "required"}}\n' > "$TEST_TMP/req.json"
                NSBOX_CGROUP_PARENT=/ "$NSBOX" run --policy "$TEST_TMP/req.json" -- echo ran > "$TEST_TMP/out" 2>&1
                assert_eq 125 "$?" "exit status with required limits"
                assert_one_line_error "$(cat "$TEST_TMP/out")"
        fi
        # a bad parent is a warning too (best-effort), never a crash; nor is cgroup v1 used instead
        NSBOX_CGROUP_PARENT=relative/path "$NSBOX" run --limits best-effort --pids 5 -- echo ok > "$TEST_TMP/out" 2> "$TEST_TMP/err"
        assert_eq 0 "$?" "exit status with a bad NSBOX_CGROUP_PARENT"
        assert_contains "$(cat "$TEST_TMP/err")" "NSBOX_CGROUP_PARENT 'relative/path' is not a cgroup path"
}

# Root on a hybrid host (this one: cgroup v1 holds memory, pids and cpu): the limits hold through
# nsbox's own cgroup under each v1 hierarchy, through nsbox run and nsboxd alike, and each
# sandbox's v1 cgroups go with it, kill -9 of its supervisor included.  A user cannot use v1: a
# warning, and nothing made there.
test_cgroup_v1_limits_hold_for_root() {
        if ! v1_limits; then
                local before; before=$(v1_sandboxes)
                "$NSBOX" run --limits best-effort --pids 32 -- echo ran > "$TEST_TMP/out" 2> "$TEST_TMP/err"
                assert_eq ran "$(cat "$TEST_TMP/out")" "output"
                [ "$TEST_AS" = root ] || assert_contains "$(cat "$TEST_TMP/err")" "nsbox: warning: limits of policy" "a user's warning"
                assert_eq "$before" "$(v1_sandboxes)" "cgroup v1 directories made by a run without v1"
                return
        fi
        local j
        "$NSBOX" run --json --memory 64M -- python3 -c 'a = bytearray(300 << 20); print("allocated")' > "$TEST_TMP/out" 2> "$TEST_TMP/err"
        j=$(tail -n 1 "$TEST_TMP/err")
        assert_eq "oom_killed true" "$(printf '%s' "$j" | jget 'd["reason"] + " " + json.dumps(d["oom_killed"])')" "a 300 MB allocation under --memory 64M: $j"
        assert_not_contains "$(cat "$TEST_TMP/out")" allocated "the allocation"
        assert_eq True "$(printf '%s' "$j" | jget 'str(0 < d["peak_memory_bytes"] <= 64 << 20)')" "peak memory: $j"
        "$NSBOX" run --json --pids 32 -- sh -c 'for i in $(seq 100); do sleep 5 & done 2> /dev/null; echo forked' > /dev/null 2> "$TEST_TMP/err"
        assert_eq "pids_limited true" "$(tail -n 1 "$TEST_TMP/err" | jget 'd["reason"] + " " + json.dumps(d["pids_limited"])')" "a fork loop under --pids 32"
        "$NSBOX" run --json --cpus 0.2 -- timeout 2 sh -c 'while :; do :; done' > /dev/null 2> "$TEST_TMP/err"
        assert_eq True "$(tail -n 1 "$TEST_TMP/err" | jget 'str(d["cpu_time_ms"] < 0.45 * d["wall_time_ms"])')" "a spin under --cpus 0.2: $(tail -n 1 "$TEST_TMP/err")"
        assert_eq 0 "$(v1_sandboxes)" "cgroup v1 directories after the runs"
        # nsboxd: the same limits; the cgroups go with the sandbox, and after kill -9 of nsbox run
        local id
        id=$("$NSBOX" create --memory 64M --pids 50 2> "$TEST_TMP/err") || fail "create: $(cat "$TEST_TMP/err")"
        assert_status 0 "$NSBOX" exec "$id" -- cat /proc/self/cgroup
        assert_contains "$OUT" ":memory:/" "inside, its cgroup namespace is rooted at its v1 cgroups"
        assert_not_contains "$OUT" "nsbox" "its cgroup paths inside"
        local agent cg
        agent=$("$NSBOX" ls --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["pid"])')
        cg=$(sed -n 's|^[0-9]*:memory:/nsbox/||p' "/proc/$agent/cgroup")
        case $cg in sb-*) ;; *) fail "the agent's v1 memory cgroup: $(cat "/proc/$agent/cgroup")" ;; esac
        assert_eq 67108864 "$(cat "$(v1_mount memory)/nsbox/$cg/memory.limit_in_bytes")" "its memory limit"
        # swap too, where the kernel accounts it (memory.memsw.*): no swapping past the limit
        [ ! -e "$(v1_mount memory)/nsbox/$cg/memory.memsw.limit_in_bytes" ] ||
                assert_eq 67108864 "$(cat "$(v1_mount memory)/nsbox/$cg/memory.memsw.limit_in_bytes")" "its memory+swap limit"
        assert_status 137 "$NSBOX" exec "$id" -- python3 -c 'a = bytearray(300 << 20); print("allocated")'
        assert_not_contains "$OUT" allocated "a 300 MB allocation in a 64M sandbox"
        assert_eq True "$("$NSBOX" inspect "$id" | pyj 'str(d[0]["oom_kills"] >= 1)')" "oom_kills of the sandbox"
        assert_status 0 "$NSBOX" rm "$id"
        assert_eq 0 "$(v1_sandboxes)" "cgroup v1 directories after nsbox rm"
        # kill -9 of nsboxd: its sandboxes end, and the next nsboxd removes their v1 cgroups
        local dpid i
        id=$("$NSBOX" create --memory 64M --pids 50 2> "$TEST_TMP/err") || fail "create: $(cat "$TEST_TMP/err")"
        agent=$("$NSBOX" ls --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["pid"])')
        dpid=$(daemon_pid) || fail "no nsboxd"
        [ "$(v1_sandboxes)" -gt 0 ] || fail "no v1 cgroup for sandbox $id"
        kill -KILL "$dpid"
        wait_pids_gone 10 "$dpid" "$agent" > /dev/null || fail "nsboxd $dpid or agent $agent left after kill -9 of nsboxd"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "sandboxes of the next nsboxd"
        for i in $(seq 50); do [ "$(v1_sandboxes)" = 0 ] && break; sleep 0.1; done
        assert_eq 0 "$(v1_sandboxes)" "cgroup v1 directories after kill -9 of nsboxd and the next start"
        "$NSBOX" run --memory 64M -- sleep 60 &
        local pid=$! i
        for i in $(seq 100); do [ "$(v1_sandboxes)" -gt 0 ] && break; sleep 0.05; done
        kill -KILL $pid
        wait $pid 2> /dev/null
        "$NSBOX" run --memory 64M -- true || fail "the next run"
        for i in $(seq 50); do [ "$(v1_sandboxes)" = 0 ] && break; sleep 0.1; done
        assert_eq 0 "$(v1_sandboxes)" "cgroup v1 directories after kill -9 of nsbox run and the next run"
}

test_sandbox_sees_itself_at_its_cgroup_namespace_root() {
        assert_status 0 "$NSBOX" run -- sh -c 'grep "^0::" /proc/self/cgroup'
        assert_eq "0::/" "$OUT" "/proc/self/cgroup inside"
}

test_no_cgroup_left_after_timeout_or_kill_9_of_the_supervisor() {
        local parent="" j cg i
        j=$("$NSBOX" run --json --timeout 0.3 -- sleep 10 2>&1 >/dev/null | tail -n 1)
        assert_eq timed_out "$(printf '%s' "$j" | jget 'd["reason"]')" "reason"
        cg=$(sandbox_cgroup_of_run "$j")
        if [ "$TEST_AS" = root ]; then
                [ -n "$cg" ] || fail "root's sandbox had no cgroup: $j"
                parent=$(dirname "$cg")
                [ ! -e "$cg" ] || fail "cgroup left after a timeout"
        else
                assert_eq "" "$cg" "cgroup of a user without a delegated subtree"
        fi
        "$NSBOX" run -- sleep 4242.5 & local sup=$!
        cg=""
        for i in $(seq 100); do
                if [ -n "$parent" ]; then cg=$(ls -d "$parent"/sb-"$sup"-* 2>/dev/null); [ -n "$cg" ] && pgrep -f "sleep 4242.5" > /dev/null && break
                else pgrep -f "sleep 4242.5" > /dev/null && break; fi
                sleep 0.05
        done
        pgrep -f "sleep 4242.5" > /dev/null || fail "the sandbox did not start"
        [ -z "$parent" ] || [ -n "$cg" ] || fail "no cgroup appeared for supervisor $sup"
        kill -9 "$sup"
        wait "$sup" 2>/dev/null
        wait_gone "sleep 4242.5" || fail "the sandbox outlived its supervisor"
        # the cgroup is orphaned (nobody is left to remove it) until the next nsbox uses the parent
        assert_status 0 "$NSBOX" run -- true
        [ -z "$cg" ] || [ ! -e "$cg" ] || fail "orphaned cgroup $cg not collected by the next run"
}

test_pause_freezes_and_resume_thaws() {
        local id a b c cg mark="pause-loop-$$-$RANDOM" pid st
        id=$("$NSBOX" create) || fail "create failed"
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": ": '"$mark"'; i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.05; done", "background": true}'
        sleep 0.5
        assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/c
        a=$OUT
        assert_status 0 "$NSBOX" pause "$id"
        assert_status 0 "$NSBOX" ls --json
        assert_eq paused "$(printf '%s' "$OUT" | python3 -c 'import json,sys; print([s["state"] for s in json.load(sys.stdin) if s["id"] == sys.argv[1]][0])' "$id")" "state"
        cg=$(printf '%s' "$OUT" | python3 -c 'import json,sys; print([s["cgroup"] for s in json.load(sys.stdin) if s["id"] == sys.argv[1]][0])' "$id")
        if [ "$cg" != None ]; then
                grep -qx 'frozen 1' "$cg/cgroup.events" || fail "cgroup.events of $cg: $(cat "$cg/cgroup.events")"
        else # no cgroup (a user without a delegated one): every process is stopped (SIGSTOP)
                [ "$TEST_AS" = user ] || fail "root's sandbox has no cgroup"
                pid=$(pgrep -f "$mark" | head -n 1)
                [ -n "$pid" ] || fail "the loop's process is not found"
                # a process in uninterruptible sleep (D: its write, on a loaded disk) stops when it leaves it
                for _ in $(seq 250); do
                        st=$(awk '{print $3}' "/proc/$pid/stat")
                        [ "$st" = T ] && break
                        sleep 0.02
                done
                assert_eq T "$st" "the state of the sandbox's loop while paused"
        fi
        assert_status 125 "$NSBOX" exec "$id" -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "conflict: sandbox $id is paused; resume it first" "exec while paused"
        assert_status 1 "$NSBOX" call "$id" read_file '{"path": "/tmp/c"}'
        assert_contains "$OUT" "is paused" "call while paused"
        assert_status 0 "$NSBOX" pause "$id" # again: already paused, no error
        sleep 1.5
        assert_status 0 "$NSBOX" resume "$id"
        assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/c
        b=$OUT
        [ $((b - a)) -le 12 ] || fail "the counter went on while paused: $a before, $b after 1.5 s paused"
        sleep 0.5
        assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/c
        c=$OUT
        [ "$c" -gt "$b" ] || fail "the counter did not go on after resume: $b then $c"
        # a paused sandbox can be destroyed, and leaves no cgroup and no process
        assert_status 0 "$NSBOX" pause "$id"
        assert_status 0 "$NSBOX" rm "$id"
        [ "$cg" = None ] || [ ! -e "$cg" ] || fail "cgroup $cg left after rm of a paused sandbox"
        for _ in $(seq 50); do pgrep -f "$mark" > /dev/null || break; sleep 0.1; done
        ! pgrep -f "$mark" > /dev/null || fail "the loop outlived rm of its paused sandbox"
}

# Root on a host without cgroup2 (RHEL 8's layout): pause uses the cgroup v1 freezer.  Here, an
# nsboxd in a mount namespace whose cgroup2 mount is gone: a counter stops while paused
# (freezer.state FROZEN) and goes on after resume; rm of a paused sandbox leaves no v1 cgroup.
test_pause_with_the_cgroup_v1_freezer_for_root() {
        [ -n "$(v1_mount freezer)" ] || skip "no cgroup v1 freezer on this host"
        local frz; frz="$(v1_mount freezer)/nsbox"
        if [ "$TEST_AS" = user ]; then
                # not for a user: the v1 hierarchies are root's, so a user's pause stops by
                # SIGSTOP (test_pause_freezes_and_resume_thaws) and makes no freezer cgroup
                mkdir "$(v1_mount freezer)/nsbox-usertest" 2> /dev/null && fail "a user made a v1 freezer cgroup"
                local uid; uid=$("$NSBOX" create) || fail "create"
                assert_status 0 "$NSBOX" pause "$uid"
                assert_eq "" "$(ls -d "$frz"/*"$uid"* 2> /dev/null)" "a user's v1 freezer cgroup"
                assert_status 0 "$NSBOX" rm "$uid"
                return
        fi
        OUT=$(NSBOX_SOCKET="$SESSION_DIR/v1.sock" FRZ=$frz unshare -m --propagation private bash -c '
                umount -l "$1" || exit 1
                trap "\"\$NSBOX\" daemon stop > /dev/null 2>&1" EXIT # whatever failed
                id=$("$NSBOX" create) || exit 1
                "$NSBOX" call "$id" exec "{\"shell\": \"i=0; while :; do i=\$((i+1)); echo \$i > /tmp/c; sleep 0.05; done\", \"background\": true}" > /dev/null
                sleep 0.5
                a=$("$NSBOX" exec "$id" -- cat /tmp/c)
                "$NSBOX" pause "$id" || exit 1
                echo "state $(cat "$FRZ"/sb-*-"$id"*/freezer.state)"
                echo "calls refused $("$NSBOX" call "$id" read_file "{\"path\": \"/tmp/c\"}" 2>&1 | grep -c "is paused")"
                sleep 1.5
                "$NSBOX" resume "$id" || exit 1
                b=$("$NSBOX" exec "$id" -- cat /tmp/c); sleep 0.5; c=$("$NSBOX" exec "$id" -- cat /tmp/c)
                [ $((b - a)) -le 12 ] && echo "stopped while paused" || echo "went on while paused: $a, then $b"
                [ "$c" -gt "$b" ] && echo "goes on after resume" || echo "did not go on: $b, then $c"
                "$NSBOX" pause "$id" && "$NSBOX" rm "$id" > /dev/null && echo removed
                echo "$id"' bash "$(v2_root)" 2>&1)
        assert_eq "state FROZEN
calls refused 1
stopped while paused
goes on after resume
removed" "$(sed '$d' <<< "$OUT")" "pause through the v1 freezer"
        local id i; id=$(tail -n 1 <<< "$OUT")
        for i in $(seq 50); do ls -d "$frz"/sb-*-"$id"* > /dev/null 2>&1 || break; sleep 0.1; done
        assert_eq "" "$(ls -d "$frz"/sb-*-"$id"* 2>/dev/null)" "v1 freezer cgroups of $id left"
}

# pause --no-memory: the processes go, the files stay, nothing is frozen (no cgroup needed: the same
# as root and as a user); resume is a reboot; resume --reboot does the same to a frozen sandbox;
# --on-expiry pause_files is that pause at the timeout
test_pause_without_memory_keeps_only_the_files() {
        local id id2 mark="nomem-$$-$RANDOM" left i boot
        id=$("$NSBOX" create) || fail "create failed"
        boot=$("$NSBOX" exec "$id" -- cat /proc/sys/kernel/random/boot_id) || fail "boot_id"
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": "echo kept > $HOME/f; sleep 600; : '"$mark"'-a", "background": true}'
        for i in $(seq 50); do pgrep -f "$mark-a" > /dev/null && break; sleep 0.1; done
        pgrep -f "$mark-a" > /dev/null || fail "the background command did not start"
        assert_status 0 "$NSBOX" pause --no-memory "$id"
        left=$(wait_gone "$mark-a") || fail "processes left after pause --no-memory: $left"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "paused False" "$(printf '%s' "$OUT" | python3 -c 'import json, sys; s = [s for s in json.load(sys.stdin) if s["id"] == sys.argv[1]][0]; print(s["state"], s["paused_memory"])' "$id")" "state, paused_memory"
        assert_status 125 "$NSBOX" exec "$id" -- true
        assert_contains "$OUT" "is paused" "exec while paused"
        assert_status 0 "$NSBOX" resume "$id"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'cat "$HOME/f"'
        assert_eq kept "$OUT" "a file written before the pause"
        assert_status 0 "$NSBOX" exec "$id" -- cat /proc/sys/kernel/random/boot_id
        [[ $OUT =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]] || fail "boot_id after the reboot: '$OUT'"
        [ "$OUT" != "$boot" ] || fail "the boot_id did not change with the reboot: $boot"
        boot=$OUT
        pgrep -f "$mark-a" > /dev/null && fail "the killed command is back"
        # a frozen sandbox, resumed with --reboot
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": "sleep 600; : '"$mark"'-b", "background": true}'
        for i in $(seq 50); do pgrep -f "$mark-b" > /dev/null && break; sleep 0.1; done
        assert_status 0 "$NSBOX" pause "$id"
        pgrep -f "$mark-b" > /dev/null || fail "a pause that keeps memory killed the command"
        assert_status 0 "$NSBOX" resume "$id"
        assert_status 0 "$NSBOX" exec "$id" -- cat /proc/sys/kernel/random/boot_id
        assert_eq "$boot" "$OUT" "the boot_id after a pause that kept memory"
        assert_status 0 "$NSBOX" pause "$id"
        assert_status 0 "$NSBOX" resume --reboot "$id"
        left=$(wait_gone "$mark-b") || fail "processes left after resume --reboot: $left"
        assert_status 0 "$NSBOX" exec "$id" -- echo alive
        assert_eq alive "$OUT" "a command after the reboot"
        # the timeout's pause
        id2=$("$NSBOX" create --timeout 1 --on-expiry pause_files) || fail "create --on-expiry pause_files"
        assert_status 0 "$NSBOX" call "$id2" exec '{"shell": "sleep 600; : '"$mark"'-c", "background": true}'
        for i in $(seq 100); do
                "$NSBOX" ls --json --state paused | grep -q "$id2" && break
                sleep 0.1
        done
        assert_status 0 "$NSBOX" ls --json --state paused
        assert_eq "False pause_files" "$(printf '%s' "$OUT" | python3 -c 'import json, sys; s = [s for s in json.load(sys.stdin) if s["id"] == sys.argv[1]][0]; print(s["paused_memory"], s["on_expiry"])' "$id2")" "the timed-out sandbox"
        left=$(wait_gone "$mark-c") || fail "processes left after the timeout's pause: $left"
        assert_status 0 "$NSBOX" rm "$id" "$id2"
}

test_pause_and_resume_bad_input() {
        assert_status 125 "$NSBOX" pause 00000000
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "not_found" "unknown id"
        assert_status 125 "$NSBOX" pause
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" resume --bogus x
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" pause --no-memory
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" resume --no-memory x
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "--no-memory" "the option named"
        assert_status 125 "$NSBOX" create --on-expiry pausefiles
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "destroy, pause or pause_files" "create --on-expiry pausefiles"
}

test_ls_json_shows_limits_and_usage() {
        local id
        id=$("$NSBOX" create --disk 64M --timeout 600 2>/dev/null) || fail "create failed"
        assert_status 0 "$NSBOX" exec "$id" -- true
        assert_status 0 "$NSBOX" ls --json
        local s; s=$(printf '%s' "$OUT" | python3 -c 'import json,sys; print(json.dumps([s for s in json.load(sys.stdin) if s["id"] == sys.argv[1]][0]))' "$id")
        assert_eq running "$(printf '%s' "$s" | jget 'd["state"]')" "state"
        assert_eq 67108864 "$(printf '%s' "$s" | jget 'd["limits"]["disk"]')" "disk limit"
        if [ "$TEST_AS" = root ]; then
                assert_eq True "$(printf '%s' "$s" | jget 'str(d["cpu_time_ms"] > 0)')" "cpu time: $s"
                [ -d "$(printf '%s' "$s" | jget 'd["cgroup"]')" ] || fail "no cgroup directory: $s"
        else
                assert_eq None "$(printf '%s' "$s" | jget 'str(d["cgroup"])')" "cgroup"
        fi
        assert_status 0 "$NSBOX" rm "$id"
}

test_zz_daemon_stops_with_nothing_left() {
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "sandboxes left"
        local dpid; dpid=$(daemon_pid) || fail "no nsboxd"
        kill "$dpid"
        local i; for i in $(seq 50); do [ -e "/proc/$dpid" ] || break; grep -q '^State:.*Z' "/proc/$dpid/status" 2>/dev/null && break; sleep 0.1; done
        [ ! -e "/proc/$dpid" ] || grep -q '^State:.*Z' "/proc/$dpid/status" || fail "nsboxd $dpid did not stop on SIGTERM"
}

run_tests
