#!/usr/bin/env bash
# Escape tier, resources that hold without cgroups: the upper layer's size (--disk) in an
# `nsbox run` sandbox and an nsboxd one, and a write_files of thousands of files.  Fork, memory
# and CPU bombs need cgroup v2 controllers, which this host's v2 hierarchy lacks: they are in
# tests/vm/guest.sh (pids_forkbomb, run_pids_forkbomb, memory_oom, daemon_oom, cpus_half,
# disk_enospc, daemon_disk_enospc); endless output in tests/integration/session.sh.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

# KiB used on the file system of the nsbox state (the overlay's upper dirs live under the
# runtime directory or /tmp): it must not grow past the limit.
used_kib() { df -k --output=used /tmp | tail -n 1 | tr -d ' '; }

test_disk_fill_stops_at_the_upper_layers_limit() {
        local kind out id before grew
        # shellcheck disable=SC2016
        local fill='dd if=/dev/zero of=/workspace/big bs=1M count=64 2>&1 | tail -n 1; echo "rc=$?"
                dd if=/dev/zero of=/workspace/big2 bs=1M count=64 2>&1 | grep -o "No space left on device" | head -n 1
                echo more >/workspace/small || echo "small write refused"; du -sm /workspace | cut -f1 | sed "s/^/MiB used: /"'
        for kind in run daemon; do
                before=$(used_kib)
                if [ $kind = run ]; then
                        out=$("$NSBOX" run --disk 16M -- sh -c "$fill" 2>&1)
                else
                        new_daemon_sandbox id --disk 16M
                        out=$("$NSBOX" exec "$id" -- sh -c "$fill" 2>&1)
                fi
                grew=$(($(used_kib) - before))
                echo "    $kind sandbox, --disk 16M, dd 2 x 64 MiB into /workspace: $(printf '%s' "$out" | tr '\n' ' '); the host's /tmp grew by $grew KiB" >&2
                assert_contains "$out" "No space left on device" "the $kind sandbox's dd"
                assert_contains "$out" "small write refused" "the $kind sandbox"
                local mib
                mib=$(printf '%s\n' "$out" | sed -n 's/^MiB used: //p')
                [ -n "$mib" ] && [ "$mib" -le 17 ] || fail "the $kind sandbox's /workspace holds '$mib' MiB with --disk 16M"
                [ "$grew" -le $((20 * 1024)) ] || fail "the host's /tmp grew by $grew KiB for a --disk 16M sandbox"
                if [ $kind = daemon ]; then
                        # the agent's own writes get a clear error, and the sandbox still answers
                        out=$("$NSBOX" call "$id" write_file '{"path": "more.txt", "content": "more\n"}' 2>&1)
                        echo "    write_file on the full disk: $out" >&2
                        assert_contains "$out" "too_large" "write_file on a full disk"
                        assert_eq alive "$("$NSBOX" exec "$id" -- echo alive 2>&1)" "an exec in the full sandbox"
                fi
        done
        # control: without the limit the same writes fit
        out=$("$NSBOX" run --disk 256M -- sh -c 'dd if=/dev/zero of=/workspace/big bs=1M count=64 2>&1 | tail -n 1; echo "rc=$?"' 2>&1)
        echo "    control (--disk 256M): $(printf '%s' "$out" | tr '\n' ' ')" >&2
        assert_not_contains "$out" "No space left on device" "control: 64 MiB with --disk 256M"
}

# write_files takes at most 1000 files: 1000 are written, 1001 are refused whole (nothing
# written), 5000 small write_file calls in a row are served, and the sandbox answers after each.
test_thousands_of_files_in_one_write_files() {
        local id out
        new_daemon_sandbox id
        out=$(python3 - "$NSBOX_SOCKET" "$id" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rwb")
n = 0
def call(tool, params):
    global n
    n += 1
    f.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": "call",
                        "params": {"sandbox": sys.argv[2], "tool": tool, "params": params}}).encode() + b"\n")
    f.flush()
    while True:
        d = json.loads(f.readline())
        if d.get("id") == n:
            return d
files = lambda k, d: [{"path": "%s/f%05d" % (d, i), "content": "x%d\n" % i} for i in range(k)]
r = call("write_files", {"files": files(1000, "ok")})["result"]
print("1000 files: written %d failed %d" % (r["written"], r["failed"]))
r = call("write_files", {"files": files(1001, "over")})
print("1001 files: %s" % json.dumps(r.get("error", r.get("result")))[:300])
r = call("write_files", {"files": files(5000, "many")})
print("5000 files: %s" % json.dumps(r.get("error", r.get("result")))[:300])
bad = 0
for i in range(5000):
    if "error" in call("write_file", {"path": "calls/f%05d" % i, "content": "y"}):
        bad += 1
print("5000 write_file calls: %d failed" % bad)
PY
        )
        echo "    $(printf '%s' "$out" | tr '\n' ';')" >&2
        assert_contains "$out" "1000 files: written 1000 failed 0"
        assert_contains "$out" "1001 files: {\"code\": -32000, \"message\": \"write_files: 'files' must be an array of 1 to 1000 objects\", \"data\": {\"code\": \"invalid_argument\"}}"
        assert_contains "$out" "5000 files: {\"code\": -32000, \"message\": \"write_files: 'files' must be an array of 1 to 1000 objects\""
        assert_contains "$out" "5000 write_file calls: 0 failed"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'ls /workspace/ok | wc -l; ls /workspace/calls | wc -l; ls -d /workspace/over /workspace/many 2>&1 | wc -l'
        assert_eq "1000
5000
2" "$OUT" "files in ok/ and calls/, and no over/ or many/ (ls errors)"
}

# Per-user kernel counters (inotify instances and watches, user namespaces, mqueue bytes...) are
# charged at every level up to the owner of each user namespace.  A sandbox opens inotify
# instances until the kernel refuses (a chain of processes, each under its fd limit, so that the
# count and not RLIMIT_NOFILE stops it) and holds them: it got at most half of the limit, and the
# host (root, the test user) and other sandboxes of both kinds can still open one.  As root the
# owner of a sandbox's user namespace is its own host id, not root: three such hogs at once (two
# of nsboxd, one of nsbox run) leave root untouched; as a user, one sandbox takes at most half of
# the user's share.
# shellcheck disable=SC2016
INOTIFY_HOG='import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
total = 0
while True:
    n = 0
    while n < 500 and libc.inotify_init1(0) >= 0:
        n += 1
    total += n
    if n < 500:
        print("held %d inotify instances: %s" % (total, os.strerror(ctypes.get_errno())), flush=True)
        break
    if total >= 20000:
        print("held %d inotify instances, and no limit met" % total, flush=True)
        break
    if os.fork() == 0:
        os.closerange(3, 65536)  # the parent holds these; the child opens more
    else:
        break
time.sleep(60)'
INOTIFY_ONE='import ctypes, os
fd = ctypes.CDLL(None, use_errno=True).inotify_init1(0)
print("inotify_init: ok" if fd >= 0 else "inotify_init: " + os.strerror(ctypes.get_errno()))'

test_inotify_exhaustion_in_a_sandbox_leaves_the_host_and_other_sandboxes_working() {
        local max half id hog log out pids=() logs=() i kinds=(daemon) who
        max=$(cat /proc/sys/fs/inotify/max_user_instances)
        half=$((max / 2))
        [ "$TEST_AS" = root ] && kinds=(daemon daemon run)
        for i in "${!kinds[@]}"; do
                log=$TEST_TMP/hog.$i
                if [ "${kinds[$i]}" = daemon ]; then
                        new_daemon_sandbox id
                        "$NSBOX" exec "$id" -- python3 -c "$INOTIFY_HOG" >"$log" 2>&1 </dev/null &
                else
                        "$NSBOX" run -- python3 -c "$INOTIFY_HOG" >"$log" 2>&1 </dev/null &
                fi
                pids+=($!)
                logs+=("$log")
                at_exit "kill $! 2>/dev/null"
        done
        for i in "${!logs[@]}"; do
                for _ in $(seq 200); do grep -q held "${logs[$i]}" && break; sleep 0.1; done
                out=$(cat "${logs[$i]}")
                echo "    hog $i (${kinds[$i]} sandbox, host limit $max): $out" >&2
                [[ $out =~ held\ ([0-9]+)\ inotify\ instances:\ Too\ many\ open\ files ]] ||
                        fail "the hog in the ${kinds[$i]} sandbox did not meet the kernel's limit: $out"
                [ "${BASH_REMATCH[1]}" -le "$half" ] ||
                        fail "a ${kinds[$i]} sandbox held ${BASH_REMATCH[1]} inotify instances, more than half of the limit $max"
        done
        # while they hold them: the host, and new sandboxes of both kinds
        out=$(python3 -c "$INOTIFY_ONE")
        echo "    the host, as $(id -un): $out" >&2
        assert_eq "inotify_init: ok" "$out" "inotify_init on the host as $(id -un), while the sandboxes hold theirs"
        if [ "$TEST_AS" = root ]; then
                who=${NSBOX_TEST_USER:-nsboxtest}
                out=$(setpriv --reuid="$who" --regid="$who" --init-groups --reset-env python3 -c "$INOTIFY_ONE")
                echo "    the host, as $who: $out" >&2
                assert_eq "inotify_init: ok" "$out" "inotify_init on the host as $who"
        fi
        for kind in daemon run; do
                out=$(in_kind $kind -- python3 -c "$INOTIFY_ONE")
                echo "    another $kind sandbox: $out" >&2
                assert_eq "inotify_init: ok" "$out" "inotify_init in another $kind sandbox"
        done
}

run_tests
