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

# Every nsboxd agent is a fresh exec of nsbox-agent, never a copy of nsboxd's memory: sandbox A
# gets one secret in its environment (-e) and writes another into a file through a tool call (its
# bytes cross nsboxd); then B is made.  Read from the host as its owner, B's agent's whole memory
# (process_vm_readv over /proc/PID/maps: its /proc/PID/mem belongs to root, the agent being
# non-dumpable), environment and command line hold neither secret, and its /proc/PID/exe is
# nsbox-agent.  The control: A's own agent holds its environment secret.
# shellcheck disable=SC2016
READ_AGENT='import ctypes, os, re, sys
pid, needles = int(sys.argv[1]), [n.encode() for n in sys.argv[2:]]
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(iovec), ctypes.c_ulong, ctypes.POINTER(iovec), ctypes.c_ulong, ctypes.c_ulong]
libc.process_vm_readv.restype = ctypes.c_ssize_t
def read(lo, hi):
    out = b""
    while lo < hi:
        n = min(hi - lo, 1 << 20)
        buf = ctypes.create_string_buffer(n)
        got = libc.process_vm_readv(pid, ctypes.byref(iovec(ctypes.addressof(buf), n)), 1, ctypes.byref(iovec(lo, n)), 1, 0)
        if got <= 0:
            if ctypes.get_errno() == 1:
                sys.exit("process_vm_readv: %s" % os.strerror(1))
            break
        out += buf.raw[:got]
        lo += got
    return out
found, readable = set(), 0
for line in open("/proc/%d/maps" % pid):
    m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
    # past 1 GiB: the shadow of a sanitizer build (terabytes reserved), no data of anyone
    if m and "[vsyscall]" not in line and int(m.group(2), 16) - int(m.group(1), 16) <= 1 << 30:
        data = read(int(m.group(1), 16), int(m.group(2), 16))
        readable += len(data)
        found.update(n for n in needles if n in data)
stat = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
environ = read(int(stat[-4]), int(stat[-3]))
cmdline = open("/proc/%d/cmdline" % pid, "rb").read()
for name, data in (("environ", environ), ("cmdline", cmdline)):
    found.update(n + (" in %s" % name).encode() for n in needles if n in data)
print("read %d bytes, environ %r" % (readable, environ))
for n in sorted(found):
    print("FOUND " + n.decode())'

test_agent_holds_no_other_sandboxs_data() {
        local env_secret="nsbox-env-secret-$$-$RANDOM$RANDOM" file_secret="nsbox-file-secret-$$-$RANDOM$RANDOM" a b apid bpid out b64
        new_daemon_sandbox a -e "AGENT_SECRET=$env_secret"
        b64=$(printf '%s-and-more-bytes' "$file_secret" | base64 -w0)
        assert_status 0 "$NSBOX" call "$a" write_file "{\"path\": \"/tmp/secret\", \"content\": \"$file_secret-and-more-bytes\"}"
        assert_status 0 "$NSBOX" exec "$a" -- cat /tmp/secret
        assert_contains "$OUT" "$file_secret" "A's file, read back"
        new_daemon_sandbox b
        assert_status 0 "$NSBOX" exec "$b" -- true
        apid=$("$NSBOX" ls --json | python3 -c 'import json, sys; print({s["id"]: s["pid"] for s in json.load(sys.stdin)}[sys.argv[1]])' "$a")
        bpid=$("$NSBOX" ls --json | python3 -c 'import json, sys; print({s["id"]: s["pid"] for s in json.load(sys.stdin)}[sys.argv[1]])' "$b")
        [ -n "$apid" ] && [ -n "$bpid" ] || fail "no agent pids in nsbox ls --json"
        assert_eq "$NSBOX_BUILD/nsbox-agent" "$(readlink "/proc/$bpid/exe")" "B's agent's program"
        # the control: the reader finds A's secret in A's own agent
        out=$(python3 -c "$READ_AGENT" "$apid" "$env_secret" 2>&1) || fail "read A's agent's memory: $out"
        assert_contains "$out" "FOUND $env_secret" "A's agent's memory (the control)"
        out=$(python3 -c "$READ_AGENT" "$bpid" "$env_secret" "$file_secret" "${b64:0:40}" 2>&1) || fail "read B's agent's memory: $out"
        echo "    B's agent: $(printf '%s' "$out" | tr '\n' ' ')" >&2
        assert_contains "$out" "read " "B's agent's memory"
        assert_not_contains "$out" "FOUND" "B's agent's memory, environment and command line"
}

run_tests
