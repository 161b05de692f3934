#!/usr/bin/env bash
# Escape tier, cross-sandbox: two sandboxes run at once; the victim holds a secret in its
# workspace, /tmp and /dev/shm, SysV shared memory, a message queue and a semaphore set, an
# abstract unix socket, and a process that reports any signal.  The attacker looks for each and
# signals every process it can (kill -1).  Pairs: two `nsbox run` sandboxes, two of one nsboxd,
# and one of each.  The victim shows each resource is there and reachable from inside itself
# (the control); the attacker sees none of them; the host's IPC and abstract sockets are as before.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

# The victim: sets everything up, checks it from inside, says "ready", then waits up to 30 s
# (or until the attacker is done: the host removes $TEST_TMP/victim.wait).
# shellcheck disable=SC2016
VICTIM='tag=$1 secret=$2
trap "echo GOT-SIGNAL CONT" CONT
trap "echo GOT-SIGNAL USR1" USR1
for f in /workspace/cross-secret /tmp/cross-secret /dev/shm/cross-secret; do echo "$secret" >"$f"; done
ipcmk -M 4096 -p 0666 && ipcmk -Q -p 0666 && ipcmk -S 1 -p 0666
echo "self: ipc $(ipcs -m -q -s | grep -c "^0x")"
python3 -c "
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(\"\0cross-\" + sys.argv[1]); s.listen(4)
c = socket.socket(socket.AF_UNIX); c.connect(\"\0cross-\" + sys.argv[1]); s.accept()
print(\"self: abstract connect ok\", flush=True)
s.settimeout(30)
while True:
    try:
        a, _ = s.accept()
    except OSError:
        break
    print(\"GOT-CONNECTION\", flush=True)
" "$tag" &
sleep "3000.$tag" &
sleep 0.3
echo "self: sees its sleep $(for d in /proc/[0-9]*; do tr "\0" " " <"$d/cmdline" 2>/dev/null; echo; done | grep -c "^sleep 3000.$tag")"
echo ready
i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done'

# The attacker: looks for the victim's processes, files, IPC and socket, and signals everything.
# shellcheck disable=SC2016
ATTACKER='tag=$1 secret=$2
for d in /proc/[0-9]*; do tr "\0" " " <"$d/cmdline" 2>/dev/null; echo; done | grep -F "$tag" | grep -v -e cross-attacker -e "^grep " | sed "s/^/SAW PROCESS /"
for f in /workspace/cross-secret /tmp/cross-secret /dev/shm/cross-secret /proc/*/root/workspace/cross-secret /proc/*/root/tmp/cross-secret; do
        c=$(cat "$f" 2>/dev/null) && echo "READ $f: $c"
done
find / -xdev -name cross-secret 2>/dev/null | sed "s/^/FOUND /"
ls /dev/shm /tmp | grep -q cross-secret && echo "LISTED cross-secret"
echo "ipc: $(ipcs -m -q -s 2>&1 | grep -c "^0x") entries"
python3 -c "
import socket, sys
try:
    c = socket.socket(socket.AF_UNIX); c.connect(\"\0cross-\" + sys.argv[1]); print(\"REACHED abstract socket\")
except OSError as e:
    print(\"abstract: %s\" % e.strerror)
" "$tag"
kill -s CONT -- -1 2>/dev/null; kill -s USR1 -- -1 2>/dev/null; echo "cross-attacker done"'

start_victim() { # run|daemon tag secret; sets VICTIM_PID (host side), waits for "ready"
        local id log=$TEST_TMP/victim.$1.log
        if [ "$1" = run ]; then
                "$NSBOX" run -- sh -c "$VICTIM" sh "$2" "$3" >"$log" 2>&1 </dev/null &
        else
                new_daemon_sandbox id
                "$NSBOX" exec "$id" -- sh -c "$VICTIM" sh "$2" "$3" >"$log" 2>&1 </dev/null &
        fi
        VICTIM_PID=$!
        at_exit "kill $VICTIM_PID 2>/dev/null"
        for _ in $(seq 100); do grep -q '^ready' "$log" && break; sleep 0.1; done
        grep -q '^ready' "$log" || fail "the $1 victim did not start: $(cat "$log")"
}

attack_from() { # run|daemon tag secret
        local id
        if [ "$1" = run ]; then
                "$NSBOX" run -- sh -c "$ATTACKER" cross-attacker "$2" "$3" </dev/null 2>&1
        else
                id=$("$NSBOX" create 2>&1) || { echo "nsbox create failed: $id"; return; }
                "$NSBOX" exec "$id" -- sh -c "$ATTACKER" cross-attacker "$2" "$3" </dev/null 2>&1
                "$NSBOX" rm -f "$id" >/dev/null 2>&1
        fi
}

host_ipc_and_abstract() {
        ipcs -m -q -s | grep '^0x' | sort
        grep -o '@cross-.*' /proc/net/unix | sort
}

cross_check() { # victim-kind attacker-kind
        local tag="$$$RANDOM" secret="nsbox-cross-secret-$$-$RANDOM" out vlog host_before
        host_before=$(host_ipc_and_abstract)
        start_victim "$1" "$tag" "$secret"
        out=$(attack_from "$2" "$tag" "$secret")
        sleep 0.5
        vlog=$(cat "$TEST_TMP/victim.$1.log")
        echo "    victim ($1): $(printf '%s' "$vlog" | tr '\n' ' ')" >&2
        echo "    attacker ($2): $(printf '%s' "$out" | tr '\n' ' ')" >&2
        assert_contains "$out" "cross-attacker done" "the attacker's output (did it run?)"
        # the control: inside the victim each thing is there and reachable
        assert_contains "$vlog" "self: ipc 3" "the victim's own IPC objects"
        assert_contains "$vlog" "self: abstract connect ok" "the victim's own abstract socket"
        assert_contains "$vlog" "self: sees its sleep 1" "the victim's own process list"
        # the attacker reached none of it
        assert_not_contains "$out" "$secret" "what the attacker read"
        assert_not_contains "$out" "SAW PROCESS" "the attacker's process list"
        assert_not_contains "$out" "FOUND" "the attacker's find"
        assert_not_contains "$out" "LISTED" "the attacker's listing of /tmp and /dev/shm"
        assert_contains "$out" "ipc: 0 entries" "the attacker's ipcs"
        assert_contains "$out" "abstract: Connection refused" "the attacker's connect to the victim's abstract socket"
        assert_not_contains "$vlog" "GOT-SIGNAL" "the victim's output (a signal from the attacker)"
        assert_not_contains "$vlog" "GOT-CONNECTION" "the victim's output (a connection from the attacker)"
        kill -0 "$VICTIM_PID" 2>/dev/null || fail "the victim ended while attacked: $vlog"
        # and the host's IPC and abstract sockets are its own
        assert_eq "$host_before" "$(host_ipc_and_abstract)" "the host's SysV IPC objects and @cross- abstract sockets"
}

test_two_run_sandboxes_cannot_reach_each_other() {
        cross_check run run
}

test_two_nsboxd_sandboxes_cannot_reach_each_other() {
        cross_check daemon daemon
}

test_run_and_nsboxd_sandboxes_cannot_reach_each_other() {
        cross_check run daemon
}

run_tests
