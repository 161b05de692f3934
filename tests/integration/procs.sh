#!/usr/bin/env bash
# Background processes that outlive their connection, carry a tag and are re-attached with their
# recent and live output: nsbox exec -d, logs, attach and process_connect (issue 21).
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

# A daemon of our own on a socket of our own, stopped with its sandboxes when this file ends.
SESSION_DIR=$(mktemp -d /tmp/nsbox-procs.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT

# ---- helpers -------------------------------------------------------------------------------

jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

MY_SANDBOXES=""
new_sandbox() { # VAR
        local _var=$1 _sid
        _sid=$("$NSBOX" create 2>&1) || fail "nsbox create: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid'"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        printf -v "$_var" %s "$_sid"
}

# Each line of standard input, prefixed with the seconds since the epoch it arrived at.
stamp() { python3 -u -c 'import sys, time
for l in sys.stdin:
    print("%.2f %s" % (time.time(), l.rstrip("\n")), flush=True)'; }

# "running exit_code" of process PID|TAG in sandbox ID's process_list.
proc_state() { # ID TAG
        "$NSBOX" call "$1" process_list | jget "' '.join(str(p.get(k)) for p in d['processes'] if p['tag'] == '$2' for k in ('running', 'exit_code'))"
}

# Start a job printing 1 to 5, a second apart, then exiting 3.
JOB='for i in 1 2 3 4 5; do echo $i; sleep 1; done; exit 3'

# ---- tests ---------------------------------------------------------------------------------

test_exec_d_then_logs_f_streams_lines_as_they_come() {
        local id pid
        new_sandbox id
        assert_status 0 "$NSBOX" exec -d --tag job "$id" -- sh -c "$JOB"
        [[ $OUT =~ ^[0-9]+$'\t'job$ ]] || fail "exec -d printed '$OUT', not PID<tab>job"
        pid=${OUT%%$'\t'*}
        # another connection follows it: each line comes about when printed, status is the job's
        { "$NSBOX" logs -f "$id" job; echo "status $?"; } | stamp > "$TEST_TMP/follow"
        assert_eq "1 2 3 4 5 status 3" "$(cut -d' ' -f2- "$TEST_TMP/follow" | tr '\n' ' ' | sed 's/ $//')" "logs -f output and status"
        local first last
        first=$(sed -n 2p "$TEST_TMP/follow" | cut -d' ' -f1)
        last=$(sed -n 5p "$TEST_TMP/follow" | cut -d' ' -f1)
        python3 -c "import sys; sys.exit(0 if $last - $first > 2 else 1)" ||
                fail "lines 2 to 5 came within $(python3 -c "print($last - $first)") s: not as they were printed"
        assert_status 0 "$NSBOX" call "$id" process_list
        assert_eq "[\"job\", true, true, false, false]" \
                "$(echo "$OUT" | jget "[[p['tag'], p['detached'], p['background'], p['pty'], p['running']] for p in d['processes'] if p['pid'] == $pid][0]")" \
                "tag, detached, background, pty, running in process_list"
        echo "$OUT" | jget "[p['started_at'] for p in d['processes']][0]" | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$' ||
                fail "started_at is not RFC 3339 UTC: $OUT"
}

test_logs_after_exit_give_the_tail_and_status() {
        local id pid
        new_sandbox id
        assert_status 0 "$NSBOX" exec -d --tag job "$id" -- sh -c 'echo out; echo err >&2; exit 3'
        pid=${OUT%%$'\t'*}
        for i in $(seq 50); do [ "$(proc_state "$id" job)" = "False 3" ] && break; sleep 0.1; done
        assert_status 3 "$NSBOX" logs "$id" job
        assert_eq "out err" "$(echo $OUT)" "logs after the job ended"
        assert_status 3 "$NSBOX" logs "$id" "$pid"
        assert_eq "out err" "$(echo $OUT)" "logs by pid"
        "$NSBOX" attach "$id" job > "$TEST_TMP/o" 2> "$TEST_TMP/e"
        assert_eq "3 out err" "$? $(cat "$TEST_TMP/o") $(cat "$TEST_TMP/e")" "attach after the job ended: status, stdout, stderr"
        # a running one: logs without -f returns at once, with status 0
        assert_status 0 "$NSBOX" exec -d --tag long "$id" -- sh -c 'echo started; exec sleep 300'
        for i in $(seq 50); do "$NSBOX" logs "$id" long | grep -q started && break; sleep 0.1; done
        assert_status 0 timeout 5 "$NSBOX" logs "$id" long
        assert_eq started "$OUT" "logs of a running job"
        assert_status 0 "$NSBOX" call "$id" process_kill '{"tag": "long"}'
        assert_status 137 timeout 5 "$NSBOX" logs -f "$id" long
}

test_two_attachers_both_get_the_output() {
        local id a b
        new_sandbox id
        assert_status 0 "$NSBOX" exec -d --tag job "$id" -- sh -c 'sleep 1; for i in 1 2 3; do echo $i; sleep 0.5; done'
        "$NSBOX" attach "$id" job > "$TEST_TMP/a" 2>&1 &
        a=$!
        "$NSBOX" logs -f "$id" job > "$TEST_TMP/b" 2>&1 &
        b=$!
        wait $a
        local sa=$?
        wait $b
        local sb=$?
        assert_eq "0 1 2 3" "$sa $(echo $(cat "$TEST_TMP/a"))" "first attacher"
        assert_eq "0 1 2 3" "$sb $(echo $(cat "$TEST_TMP/b"))" "second attacher"
}

test_detached_job_outlives_its_clients() {
        local id i
        new_sandbox id
        # started by a client that leaves at once (nsbox exec -d does), followed by one killed
        assert_status 0 "$NSBOX" exec -d --tag job "$id" -- sh -c 'sleep 1.5; echo done-ok'
        timeout -s INT 0.5 "$NSBOX" attach "$id" job
        assert_eq "True None" "$(proc_state "$id" job)" "the job after its attacher was interrupted"
        assert_status 0 timeout 10 "$NSBOX" attach "$id" job
        assert_eq done-ok "$OUT" "re-attached after the first attacher went"
        # a foreground exec whose client goes is still cancelled
        "$NSBOX" exec "$id" -- sleep 300 &
        local client=$!
        for i in $(seq 50); do "$NSBOX" exec "$id" -- ps -eo args= | grep -q '^sleep 300' && break; sleep 0.1; done
        kill $client
        wait $client 2>/dev/null
        local left
        for i in $(seq 50); do
                left=$("$NSBOX" exec "$id" -- ps -eo args= | grep '^sleep 300')
                [ -z "$left" ] && break
                sleep 0.1
        done
        assert_eq "" "$left" "a foreground command after its client went"
}

test_slow_attacher_does_not_hold_the_job() {
        local id slow i
        new_sandbox id
        assert_status 0 "$NSBOX" exec -d --tag big "$id" -- sh -c 'sleep 1; head -c 50000000 /dev/zero | tr "\0" x; echo; echo end'
        mkfifo "$TEST_TMP/fifo"
        "$NSBOX" attach "$id" big > "$TEST_TMP/fifo" &
        slow=$!
        exec 3< "$TEST_TMP/fifo" # opened, never read: the attacher blocks, nsboxd pauses its stream
        for i in $(seq 200); do [ "$(proc_state "$id" big)" = "False 0" ] && break; sleep 0.1; done
        assert_eq "False 0" "$(proc_state "$id" big)" "the job, 20 s after it started, with a reader that reads nothing"
        kill $slow
        exec 3<&-
        wait $slow 2>/dev/null
        # the tail: its last 64 KiB of stdout
        "$NSBOX" logs "$id" big > "$TEST_TMP/tail"
        assert_eq "65536 end" "$(wc -c < "$TEST_TMP/tail") $(tail -n 1 "$TEST_TMP/tail")" "bytes and last line of the tail"
        assert_status 0 "$NSBOX" call "$id" process_connect '{"tag": "big"}'
        assert_eq "true 0" "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["truncated"]), d["exit_code"])')" "process_connect result after a lost start"
}

# A reader with hold: true makes the job wait for it (E2B's commands.run reads this way):
# nothing is dropped however slow it is, and the job goes on once the reader goes.  Each job
# says "ready" and waits for a file: its 40 MB start only once the reader is attached (it got
# "ready" from the job's tail).
test_a_holding_reader_gets_every_byte_and_lets_go() {
        local id reader i
        new_sandbox id
        cat > "$TEST_TMP/reader.py" <<'EOF'
import base64, json, os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["NSBOX_SOCKET"])
s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "call", "params": {"sandbox": sys.argv[1], "tool": "process_connect",
           "params": {"tag": sys.argv[2], "hold": True}, "stream": True}}) + "\n").encode())
n, f, slept = 0, s.makefile("rb"), False
for line in f:
    m = json.loads(line)
    if m.get("id") == 1:
        r = m.get("result") or m
        print(n, json.dumps(r.get("truncated")), r.get("exit_code"), flush=True)
        break
    p = m.get("params", {})
    if p.get("event") == "stdout":
        n += len(base64.b64decode(p["data_b64"]))
        if not slept:
            slept = True
            print("attached", flush=True)
            time.sleep(float(sys.argv[3]))  # reads nothing meanwhile: nsboxd pauses the stream
EOF
        for i in 1 2; do
                assert_status 0 "$NSBOX" exec -d --tag "big$i" "$id" -- \
                        sh -c "echo ready; until [ -e /tmp/go$i ]; do sleep 0.05; done; head -c 40000000 /dev/zero | tr '\\0' x; echo end"
        done
        python3 "$TEST_TMP/reader.py" "$id" big1 6 > "$TEST_TMP/got1" &
        reader=$!
        for i in $(seq 300); do grep -q attached "$TEST_TMP/got1" && break; sleep 0.1; done
        grep -q attached "$TEST_TMP/got1" || fail "the first reader did not attach within 30 s: $(cat "$TEST_TMP/got1")"
        assert_status 0 "$NSBOX" exec "$id" -- touch /tmp/go1
        sleep 3
        assert_eq "True None" "$(proc_state "$id" big1)" "the job 3 s into its output, held by a reader that reads nothing"
        wait $reader
        assert_eq "40000010 false 0" "$(tail -n 1 "$TEST_TMP/got1")" "bytes, truncated and exit code the holding reader got"
        # a holder that goes away while it holds lets the job go on
        python3 "$TEST_TMP/reader.py" "$id" big2 600 > "$TEST_TMP/got2" &
        reader=$!
        for i in $(seq 300); do grep -q attached "$TEST_TMP/got2" && break; sleep 0.1; done
        grep -q attached "$TEST_TMP/got2" || { kill $reader; fail "the second reader did not attach within 30 s: $(cat "$TEST_TMP/got2")"; }
        assert_status 0 "$NSBOX" exec "$id" -- touch /tmp/go2
        sleep 3
        local held
        held=$(proc_state "$id" big2)
        kill $reader
        wait $reader 2>/dev/null
        assert_eq "True None" "$held" "the second job, held by a reader that reads nothing"
        for i in $(seq 300); do [ "$(proc_state "$id" big2)" = "False 0" ] && break; sleep 0.1; done
        assert_eq "False 0" "$(proc_state "$id" big2)" "the second job, 30 s after its reader went away"
}

test_process_tools_take_a_tag() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["cat"], "background": true, "tag": "cat.1"}'
        assert_eq '"cat.1"' "$(echo "$OUT" | jget 'json.dumps(d["tag"])')" "exec's result"
        assert_status 0 "$NSBOX" call "$id" process_write_stdin '{"tag": "cat.1", "data": "hi\n"}'
        assert_status 0 "$NSBOX" call "$id" process_close_stdin '{"tag": "cat.1"}'
        assert_status 0 "$NSBOX" call "$id" process_wait '{"tag": "cat.1", "timeout": 10}'
        assert_eq '"hi\n" 0' "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["stdout"]), d["exit_code"])')" "cat's result"
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": "sleep 300", "detach": true, "tag": "s"}'
        assert_status 0 "$NSBOX" call "$id" process_kill '{"tag": "s", "signal": "TERM"}'
        assert_status 0 "$NSBOX" call "$id" process_wait '{"tag": "s", "timeout": 10}'
        assert_eq 143 "$(echo "$OUT" | jget 'd["exit_code"]')" "sleep's exit code"
        # a tag is free again once its process ended
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": "true", "background": true, "tag": "s"}'
}

test_a_waiter_that_goes_away_lets_go_of_the_process() {
        local id w
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": "sleep 300", "detach": true, "tag": "w"}'
        "$NSBOX" call "$id" process_wait '{"tag": "w"}' > /dev/null 2>&1 &
        w=$!
        sleep 0.5
        kill -9 "$w"
        wait "$w" 2> /dev/null
        # the first waiter is gone: a second one is not refused as a duplicate, and gets the end
        "$NSBOX" call "$id" process_kill '{"tag": "w", "signal": "KILL"}' > /dev/null
        assert_status 0 "$NSBOX" call "$id" process_wait '{"tag": "w", "timeout": 10}'
        assert_eq 137 "$(echo "$OUT" | jget 'd["exit_code"]')" "the process's end, to the second waiter"
        assert_eq "" "$(proc_state "$id" w)" "the process, reaped"
}

test_bad_unknown_and_duplicate_tags_are_one_line_errors() {
        local id before
        new_sandbox id
        assert_status 0 "$NSBOX" exec -d --tag job "$id" -- sleep 300
        before=$("$NSBOX" call "$id" process_list)
        assert_status 125 "$NSBOX" exec -d --tag job "$id" -- sleep 300
        assert_contains "$OUT" conflict "duplicate tag"
        assert_one_line_error "$OUT"
        for bad in "" "a b" "x/y" "$(printf 'a%.0s' $(seq 65))"; do
                assert_status 125 "$NSBOX" exec -d --tag "$bad" "$id" -- true
                assert_contains "$OUT" invalid_argument "tag '$bad'"
                assert_one_line_error "$OUT"
        done
        assert_status 125 "$NSBOX" logs "$id" nosuch
        assert_contains "$OUT" not_found "logs of an unknown tag"
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" attach "$id" 99999
        assert_contains "$OUT" not_found "attach to an unknown pid"
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" process_kill '{"tag": "nosuch"}'
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" process_kill '{"tag": "job", "pid": 2}'
        assert_contains "$OUT" invalid_argument "pid and tag"
        assert_status 125 "$NSBOX" logs "$id"
        assert_one_line_error "$OUT"
        assert_eq "$before" "$("$NSBOX" call "$id" process_list)" "process_list after the errors"
}

test_exec_i_forwards_stdin_bytes_exactly() {
        local id t0 secs want got
        new_sandbox id
        t0=$(date +%s.%N)
        got=$(head -c 100000000 /dev/urandom | "$NSBOX" exec -i "$id" -- sh -c 'wc -c') || fail "exec -i wc -c failed"
        secs=$(python3 -c "import time; print(round(time.time() - $t0, 1))")
        echo "    100 MB through exec -i in ${secs}s" >&2
        assert_eq 100000000 "$got" "bytes counted inside"
        head -c 3000000 /dev/urandom > "$SESSION_DIR/rand"
        want=$(sha256sum < "$SESSION_DIR/rand")
        got=$("$NSBOX" exec -i "$id" -- sha256sum < "$SESSION_DIR/rand") || fail "exec -i sha256sum failed"
        assert_eq "$want" "$got" "sha256 inside"
        # without -i the command's stdin is /dev/null, as before
        got=$(echo hi | "$NSBOX" exec "$id" -- cat) || fail "exec cat failed"
        assert_eq "" "$got" "stdin without -i"
}

test_exec_i_carries_a_tar_stream() {
        local id src
        new_sandbox id
        src="$SESSION_DIR/tree"
        mkdir -p "$src/sub"
        head -c 500000 /dev/urandom > "$src/sub/blob"
        echo hello > "$src/a.txt"
        tar c -C "$src" . | "$NSBOX" exec -i "$id" -- sh -c 'mkdir -p /tmp/t && tar x -C /tmp/t' || fail "tar x inside failed"
        "$NSBOX" exec "$id" -- cat /tmp/t/sub/blob > "$SESSION_DIR/blob.out" || fail "cat blob failed"
        cmp -s "$src/sub/blob" "$SESSION_DIR/blob.out" || fail "blob differs after tar x"
        assert_eq hello "$("$NSBOX" exec "$id" -- cat /tmp/t/a.txt)" "a.txt"
}

test_exec_i_client_killed_cancels_the_command() {
        local id fifo pid n
        new_sandbox id
        fifo="$SESSION_DIR/fifo"
        mkfifo "$fifo"
        exec 7<>"$fifo" # a stdin that never ends
        "$NSBOX" exec -i "$id" -- sleep 300 < "$fifo" &
        pid=$!
        exec 7>&-
        for _ in $(seq 50); do
                n=$("$NSBOX" call "$id" process_list | jget 'len(d["processes"])')
                [ "$n" = 1 ] && break
                sleep 0.1
        done
        assert_eq 1 "$n" "processes while exec -i runs"
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        for _ in $(seq 100); do
                n=$("$NSBOX" call "$id" process_list | jget 'len(d["processes"])')
                [ "$n" = 0 ] && break
                sleep 0.1
        done
        assert_eq 0 "$n" "processes after the exec -i client was killed"
}

test_exec_i_command_ignoring_stdin_ends_without_hanging() {
        local id rc
        new_sandbox id
        head -c 50000000 /dev/zero | timeout 60 "$NSBOX" exec -i "$id" -- true 2> "$SESSION_DIR/err"
        rc=${PIPESTATUS[1]}
        assert_eq 0 "$rc" "exit status of exec -i true"
        assert_eq "" "$(cat "$SESSION_DIR/err")" "stderr of exec -i true"
        head -c 50000000 /dev/zero | timeout 60 "$NSBOX" exec -i "$id" -- sh -c 'exit 7'
        assert_eq 7 "${PIPESTATUS[1]}" "exit status of exec -i sh -c 'exit 7'"
        assert_status 125 "$NSBOX" exec -i -d "$id" -- true
        assert_one_line_error "$OUT"
}

test_process_write_stdin_bad_data_is_a_one_line_error() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" exec -d --tag cat.2 "$id" -- od -An -tx1
        assert_status 1 "$NSBOX" call "$id" process_write_stdin '{"tag": "cat.2", "data": "a", "data_b64": "YQ=="}'
        assert_contains "$OUT" invalid_argument "data and data_b64"
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" process_write_stdin '{"tag": "cat.2", "data_b64": "a!c="}'
        assert_contains "$OUT" invalid_argument "invalid base64"
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" process_write_stdin '{"tag": "cat.2"}'
        assert_contains "$OUT" invalid_argument "neither data nor data_b64"
        assert_one_line_error "$OUT"
        assert_status 0 "$NSBOX" call "$id" process_write_stdin '{"tag": "cat.2", "data_b64": "AP8K"}'
        assert_status 0 "$NSBOX" call "$id" process_close_stdin '{"tag": "cat.2"}'
        assert_status 0 "$NSBOX" call "$id" process_wait '{"tag": "cat.2"}'
        assert_eq "00 ff 0a" "$(echo "$OUT" | jget 'd["stdout"].strip()')" "bytes written with data_b64"
}

# Another owner's process: a root nsboxd that serves $NSBOX_TEST_USER too; the tenant cannot
# attach to, read, feed or kill root's job (its sandbox is not theirs: not_found, one line), and
# the job runs on unchanged.  A user's own nsboxd serves no other uid: as the user, another
# sandbox of the same owner cannot reach the job by its tag either.
test_another_owners_process_is_out_of_reach() {
        if [ "$TEST_AS" = user ]; then
                local a b
                a=$("$NSBOX" create 2>&1) || fail "nsbox create: $a"
                b=$("$NSBOX" create 2>&1) || fail "nsbox create: $b"
                assert_status 0 "$NSBOX" exec -d --tag job "$a" -- sh -c 'echo secret; exec sleep 300'
                assert_status 125 "$NSBOX" logs "$b" job
                assert_contains "$OUT" not_found "another sandbox's tag"
                assert_one_line_error "$OUT"
                assert_status 0 "$NSBOX" logs "$a" job
                assert_eq secret "$OUT" "the job's own sandbox"
                "$NSBOX" rm -f "$a" "$b" > /dev/null
                return
        fi
        local tenant=${NSBOX_TEST_USER:-nsboxtest} dir dpid id before i
        id -u "$tenant" > /dev/null 2>&1 || skip "no user $tenant"
        dir=$(mktemp -d "$SESSION_DIR/tenant.XXXXXX") && chmod 0711 "$SESSION_DIR" "$dir" || fail "mktemp"
        printf '{"clients": {"uids": [%s]}}\n' "$(id -u "$tenant")" > "$dir/config.json"
        NSBOX_STORE="$dir/store" "$(dirname "$NSBOX")/nsboxd" --config "$dir/config.json" --socket "$dir/d.sock" >> "$dir/log" 2>&1 < /dev/null &
        dpid=$!
        trap 'kill -TERM '"$dpid"' 2>/dev/null; wait '"$dpid"' 2>/dev/null; chmod -R u+rwX "'"$dir"'"; rm -rf "'"$dir"'"' EXIT
        export NSBOX_SOCKET="$dir/d.sock"
        for i in $(seq 300); do [ "$(daemon_pid)" = "$dpid" ] && break; sleep 0.1; done
        [ "$(daemon_pid)" = "$dpid" ] || fail "nsboxd with clients did not answer: $(tail -n 5 "$dir/log")"
        id=$("$NSBOX" create 2>&1) || fail "nsbox create: $id"
        assert_status 0 "$NSBOX" exec -d --tag job "$id" -- sh -c 'echo secret; exec sleep 300'
        before=$("$NSBOX" call "$id" process_list)
        as_tenant() { (cd / && setpriv --reuid="$tenant" --regid="$tenant" --init-groups env NSBOX_SOCKET="$NSBOX_SOCKET" "$NSBOX" "$@" 2>&1); }
        assert_status 0 as_tenant ls -q
        assert_eq "" "$OUT" "the tenant's sandboxes"
        local what
        for what in "attach $id job" "logs $id job" "logs -f $id 1"; do
                # shellcheck disable=SC2086
                OUT=$(as_tenant $what)
                assert_eq 125 "$?" "nsbox $what as the tenant"
                assert_contains "$OUT" not_found "nsbox $what as the tenant"
                assert_one_line_error "$OUT"
        done
        for what in process_connect process_write_stdin process_kill; do
                OUT=$(as_tenant call "$id" "$what" '{"tag": "job", "data": "x"}')
                assert_eq 1 "$?" "$what as the tenant"
                assert_contains "$OUT" not_found "$what as the tenant"
                assert_one_line_error "$OUT"
        done
        assert_eq "$before" "$("$NSBOX" call "$id" process_list)" "root's processes after the tenant's tries"
        assert_status 0 "$NSBOX" logs "$id" job
        assert_eq secret "$OUT" "root's job's output"
        "$NSBOX" rm -f "$id" > /dev/null
}

# Last (tests run in name order): every test removed what it made.
test_zz_with_every_sandbox_removed_nothing_is_left() {
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
