#!/usr/bin/env bash
# nsboxd under systemd, without systemd: its two protocols against real sockets, driven by a
# harness playing the service manager.  sd_notify(3): READY=1 only once the socket accepts,
# STOPPING=1 when it drains, to a path or an abstract $NOTIFY_SOCKET.  Socket activation
# (sd_listen_fds(3)): a listening socket as fd 3 with LISTEN_FDS=1 and LISTEN_PID, served as it
# is and left in place at exit; what is not one listening unix stream socket is refused in one
# line.  The units themselves are checked by install.sh (make install, systemd-analyze verify).
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SESSION_DIR=$(mktemp -d /tmp/nsbox-svc.XXXXXX) || exit 1
export NSBOX_STORE="$SESSION_DIR/store"

# The service manager's side.  notify MODE SOCKPATH|@NAME -- CMD...: run CMD with NOTIFY_SOCKET,
# print each datagram's lines as they come ("got: READY=1"), and after READY=1 connect to
# $DAEMON_SOCK and ping: "ping: ok PID".  After the first READY=1 it sends SIGTERM and waits
# for STOPPING=1 and the exit: "exit: STATUS".
# activate SOCKPATH -- CMD...: bind and listen on SOCKPATH, run CMD with it as fd 3 and
# LISTEN_FDS=1 LISTEN_PID=its pid, ping through SOCKPATH ("ping: ok PID"), SIGTERM, "exit: STATUS",
# and whether SOCKPATH is still there.
HARNESS='import json, os, select, signal, socket, subprocess, sys, time
def ping(path):
    for _ in range(100):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(path)
            s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            return "ok %s" % json.loads(s.makefile().readline())["result"]["pid"]
        except OSError as e:
            err = e
            time.sleep(0.05)
    return "failed: %s" % err
mode, where, cmd = sys.argv[1], sys.argv[2], sys.argv[4:]
if mode == "notify":
    n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    n.bind("\0" + where[1:] if where.startswith("@") else where)
    # the log of the daemon goes elsewhere: in one pipe with ours, its lines could land inside ours
    p = subprocess.Popen(cmd, env=dict(os.environ, NOTIFY_SOCKET=where), stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    ready = stopping = False
    while time.monotonic() < deadline and not stopping:
        r, _, _ = select.select([n], [], [], 0.5)
        if not r:
            if p.poll() is not None:
                break
            continue
        for line in n.recv(4096).decode().splitlines():
            print("got:", line, flush=True)
            if line == "READY=1" and not ready:
                ready = True
                # right now, with no retry: READY=1 promises a socket that accepts
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(os.environ["DAEMON_SOCK"])
                    print("connect after ready: ok", flush=True)
                except OSError as e:
                    print("connect after ready: %s" % e, flush=True)
                print("ping:", ping(os.environ["DAEMON_SOCK"]), flush=True)
                p.send_signal(signal.SIGTERM)
            if line == "STOPPING=1":
                stopping = True
    try:
        print("exit:", p.wait(timeout=20))
    except subprocess.TimeoutExpired:
        p.kill()
        print("exit: hung")
else:
    l = socket.socket(socket.AF_UNIX)
    l.bind(where)
    l.listen(16)
    def child():
        os.dup2(l.fileno(), 3)
        os.set_inheritable(3, True) # dup2 onto itself keeps close-on-exec
        os.environ["LISTEN_FDS"] = os.environ.get("TEST_LISTEN_FDS", "1")
        os.environ["LISTEN_PID"] = str(os.getpid())
    quiet = os.environ.get("TEST_LISTEN_FDS", "1") == "1" # else its one-line error is what we test
    p = subprocess.Popen(cmd, preexec_fn=child, close_fds=False, stderr=subprocess.DEVNULL if quiet else None)
    l.close()
    if os.environ.get("TEST_LISTEN_FDS", "1") == "1":
        print("ping:", ping(where), "daemon", p.pid, flush=True)
        p.send_signal(signal.SIGTERM)
    try:
        print("exit:", p.wait(timeout=20))
    except subprocess.TimeoutExpired:
        p.kill()
        print("exit: hung")
    print("socket left:", os.path.exists(where))'

test_sd_notify_ready_only_once_listening_then_stopping() {
        local where
        for where in "$TEST_TMP/notify" "@nsbox-test-notify-$$-$RANDOM"; do
                rm -f "$TEST_TMP/d.sock" "$TEST_TMP/notify"
                OUT=$(DAEMON_SOCK="$TEST_TMP/d.sock" python3 -c "$HARNESS" notify "$where" -- "$NSBOXD" --socket "$TEST_TMP/d.sock" 2>&1)
                assert_contains "$OUT" "got: READY=1" "notifications to $where"
                assert_contains "$OUT" "got: STATUS=listening on $TEST_TMP/d.sock" "notifications to $where"
                assert_contains "$OUT" "connect after ready: ok" "a connect right after READY=1 ($where)"
                assert_contains "$OUT" "ping: ok " "nsboxd answering after READY=1 ($where)"
                assert_contains "$OUT" "got: STOPPING=1" "notifications after SIGTERM ($where)"
                assert_contains "$OUT" "exit: 0" "nsboxd's exit status after SIGTERM ($where)"
                [ ! -e "$TEST_TMP/d.sock" ] || fail "nsboxd left its own socket $TEST_TMP/d.sock"
                # READY=1 exactly once
                assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c '^got: READY=1$')" "READY=1 datagrams ($where)"
        done
}

test_socket_activation_serves_the_passed_socket_and_leaves_it() {
        OUT=$(python3 -c "$HARNESS" activate "$TEST_TMP/act.sock" -- "$NSBOXD" 2>&1)
        local pid
        pid=$(printf '%s\n' "$OUT" | sed -n 's/^ping: ok \([0-9]*\) daemon \([0-9]*\)$/\1 \2/p')
        [ -n "$pid" ] || fail "no answer through the activated socket: $OUT"
        assert_eq "${pid% *}" "${pid#* }" "the pid that answered (the activated nsboxd)"
        assert_contains "$OUT" "exit: 0" "nsboxd's exit status after SIGTERM"
        assert_contains "$OUT" "socket left: True" "the activation socket after nsboxd exits (systemd's, not nsboxd's)"
        # and a client can use it for real: a sandbox through an activated daemon
        rm -f "$TEST_TMP/act.sock"
        python3 - "$TEST_TMP/act.sock" "$NSBOXD" > "$TEST_TMP/act.pid" 2>&1 <<'PY' &
import os, socket, subprocess, sys
l = socket.socket(socket.AF_UNIX)
l.bind(sys.argv[1])
l.listen(16)
def child():
    os.dup2(l.fileno(), 3)
    os.set_inheritable(3, True)
    os.environ["LISTEN_FDS"] = "1"
    os.environ["LISTEN_PID"] = str(os.getpid())
# its log elsewhere: in the pid file, a log line could come before the pid
p = subprocess.Popen([sys.argv[2]], preexec_fn=child, close_fds=False, stderr=subprocess.DEVNULL)
print(p.pid, flush=True)
p.wait()
PY
        local hpid=$! id dpid="" answering i
        # the client only once the activated daemon runs: else it would start a daemon of its own
        for i in $(seq 100); do
                dpid=$(head -n 1 "$TEST_TMP/act.pid" 2> /dev/null)
                [ -n "$dpid" ] && break
                sleep 0.05
        done
        export NSBOX_SOCKET="$TEST_TMP/act.sock"
        answering=$(daemon_pid)
        id=$("$NSBOX" create 2>&1)
        local st=$?
        OUT=$("$NSBOX" exec "$id" -- echo activated 2>&1)
        "$NSBOX" rm "$id" > /dev/null 2>&1
        # whoever serves the socket goes: the activated daemon, or one a client started by mistake
        [ -n "$dpid" ] && kill -TERM "$dpid"
        i=$(daemon_pid) && [ "$i" != "$dpid" ] && kill -TERM "$i"
        wait "$hpid"
        [ -n "$dpid" ] || fail "the harness did not start nsboxd: $(cat "$TEST_TMP/act.pid")"
        assert_eq "$dpid" "$answering" "the nsboxd answering on the activated socket"
        assert_eq 0 "$st" "nsbox create through the activated daemon: $id"
        assert_eq activated "$OUT" "nsbox exec through the activated daemon"
}

test_bad_socket_activation_is_one_clear_line() {
        # two sockets: nsboxd serves exactly one
        OUT=$(TEST_LISTEN_FDS=2 python3 -c "$HARNESS" activate "$TEST_TMP/two.sock" -- "$NSBOXD" 2>&1)
        assert_contains "$OUT" "nsboxd: socket activation: 2 sockets passed (LISTEN_FDS), nsboxd serves exactly one" "LISTEN_FDS=2"
        assert_contains "$OUT" "exit: 1" "nsboxd's exit status with LISTEN_FDS=2"
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c '^nsboxd:')" "lines of error: $OUT"
        # fd 3 a file, not a listening socket
        OUT=$(bash -c 'export LISTEN_FDS=1; exec 3< /dev/null; LISTEN_PID=$BASHPID exec "$0"' "$NSBOXD" 2>&1)
        local st=$?
        assert_eq 1 "$st" "nsboxd's exit status with a file as fd 3 ($OUT)"
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of error: $OUT"
        assert_contains "$OUT" "nsboxd: socket activation: fd 3 is not a listening unix stream socket" "fd 3 a file"
        # LISTEN_PID of another process: not for us; nsboxd makes its own socket as usual
        LISTEN_FDS=1 LISTEN_PID=1 "$NSBOXD" --socket "$TEST_TMP/own.sock" 2> /dev/null &
        local p=$! got="" i
        for i in $(seq 100); do
                got=$(NSBOX_SOCKET="$TEST_TMP/own.sock" daemon_pid) && break
                sleep 0.05
        done
        kill "$p"
        wait "$p"
        assert_eq "$p" "$got" "the nsboxd answering on its own socket with LISTEN_PID of another process"
}

# Without its agent program nsboxd could start no sandbox: it says so in one line when it starts
# and makes nothing (no socket, no lock file).
test_nsboxd_without_its_agent_refuses_to_start_in_one_line() {
        OUT=$(NSBOX_AGENT="$TEST_TMP/no-such-agent" timeout 10 "$NSBOXD" --socket "$TEST_TMP/noagent.sock" 2>&1)
        local st=$?
        assert_eq 1 "$st" "nsboxd's exit status without its agent ($OUT)"
        assert_eq "nsboxd: open the sandbox agent '$TEST_TMP/no-such-agent': No such file or directory" "$OUT"
        OUT=$(NSBOX_AGENT="$TEST_TMP" timeout 10 "$NSBOXD" --socket "$TEST_TMP/noagent.sock" 2>&1)
        assert_eq "nsboxd: open the sandbox agent '$TEST_TMP': Is a directory" "$OUT"
        assert_eq "" "$(ls "$TEST_TMP" | grep noagent)" "what nsboxd made"
}

# A client that systemd runs (NOTIFY_SOCKET in its environment) starts nsboxd for itself: the
# daemon must not talk to the client's service manager.
test_daemon_started_by_a_client_keeps_off_the_clients_notify_socket() {
        OUT=$(python3 - "$TEST_TMP/client-notify" "$NSBOX" "$TEST_TMP/auto.sock" <<'PY' 2>&1
import os, socket, subprocess, sys
n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
n.bind(sys.argv[1])
n.settimeout(1.0)
r = subprocess.run([sys.argv[2], "ls", "--json"], env=dict(os.environ, NOTIFY_SOCKET=sys.argv[1], NSBOX_SOCKET=sys.argv[3]),
                   capture_output=True, text=True)
print("ls:", r.returncode, r.stdout.strip())
try:
    print("got:", n.recv(4096).decode().replace("\n", " "))
except socket.timeout:
    print("got nothing")
PY
)
        local dpid
        dpid=$(NSBOX_SOCKET="$TEST_TMP/auto.sock" daemon_pid) && kill "$dpid"
        assert_contains "$OUT" "ls: 0 []" "nsbox ls starting its own nsboxd"
        assert_contains "$OUT" "got nothing" "what reached the client's NOTIFY_SOCKET"
}

# The log: key=value fields, a sandbox's id in its own field, the time first; under the journal
# (stderr is the stream $JOURNAL_STREAM names) a <N> priority prefix instead of the time.
test_log_lines_are_key_value_with_journal_priority() {
        local mode log id line
        for mode in plain journal; do
                log="$TEST_TMP/$mode.log"
                : > "$log"
                if [ $mode = journal ]; then
                        JOURNAL_STREAM=$(stat -c '%d:%i' "$log") "$NSBOXD" --socket "$TEST_TMP/log.sock" 2>> "$log" &
                else
                        # a JOURNAL_STREAM that is not our stderr (a client's, inherited) changes nothing
                        JOURNAL_STREAM=1:1 "$NSBOXD" --socket "$TEST_TMP/log.sock" 2>> "$log" &
                fi
                local p=$! i
                for i in $(seq 100); do NSBOX_SOCKET="$TEST_TMP/log.sock" daemon_pid > /dev/null && break; sleep 0.05; done
                id=$(NSBOX_SOCKET="$TEST_TMP/log.sock" "$NSBOX" create 2>&1) || fail "create ($mode): $id"
                NSBOX_SOCKET="$TEST_TMP/log.sock" "$NSBOX" rm "$id" > /dev/null 2>&1 || fail "rm ($mode)"
                kill "$p"
                wait "$p"
                line=$(grep "event=sandbox.created" "$log") || fail "no event=sandbox.created in the $mode log: $(cat "$log")"
                if [ $mode = journal ]; then
                        assert_contains "$line" "<6>level=info event=sandbox.created sandbox=$id msg=\"sandbox $id created for uid $(id -u) " "the $mode log line"
                        assert_eq 0 "$(grep -vc '^<[0-7]>level=[a-z]* event=[a-z_.]* ' "$log")" "$mode log lines without <N>level=... event=...: $(cat "$log")"
                else
                        [[ $line =~ ^20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9:.]+\ nsboxd\[$p\]:\ level=info\ event=sandbox.created\ sandbox=$id\ msg=\"sandbox\ $id\ created ]] ||
                                fail "the $mode log line: $line"
                        assert_eq 0 "$(grep -vc '^20[0-9-]*T[0-9:.]* nsboxd\['"$p"'\]: level=[a-z]* event=[a-z_.]* ' "$log")" "$mode log lines not time, nsboxd[pid], level, event: $(cat "$log")"
                fi
                assert_contains "$(grep event=sandbox.removed "$log")" "sandbox=$id msg=\"sandbox $id removed: was destroyed\"" "the $mode log's removal"
                assert_contains "$(cat "$log")" "level=notice event=daemon.listening " "the $mode log's start"
        done
}

# Last: no nsboxd of this file's is left (every one has this file's NSBOX_STORE in its environment).
test_zz_no_daemon_left() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
st=$?
rm -rf "$SESSION_DIR"
exit $st
