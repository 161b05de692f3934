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

run_tests
