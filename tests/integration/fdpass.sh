#!/usr/bin/env bash
# File bytes by file descriptor (issue 26): write_file and read_file with "fd": true, a pipe passed
# to nsboxd with SCM_RIGHTS and on to the agent; nsbox cp and the Python client use it.
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

SESSION_DIR=$(mktemp -d /tmp/nsbox-fd.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT

jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

MY_SANDBOXES=""
new_sandbox() { # VAR [nsbox create options]
        local _var=$1 _sid; shift
        _sid=$("$NSBOX" create "$@" 2>&1) || fail "nsbox create $*: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid', not a 32-hex-digit id"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        printf -v "$_var" %s "$_sid"
}

# fdcall ID CASE: one raw call over nsboxd's socket with descriptors as CASE says; prints the
# first reply line.  Cases: see the Python below.
fdcall() {
        python3 - "$NSBOX_SOCKET" "$@" <<'PY'
import array, json, os, socket, sys, time
sock, sid, case = sys.argv[1], sys.argv[2], sys.argv[3]
arg = sys.argv[4] if len(sys.argv) > 4 else ""
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
def send(tool, params, fds=()):
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "call",
                       "params": {"sandbox": sid, "tool": tool, "params": params}}).encode() + b"\n"
    if fds:
        s.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        s.sendall(line)
buf = b""
def reply():
    global buf
    s.settimeout(30)
    while b"\n" not in buf:
        c = s.recv(65536)
        if not c:
            break
        buf += c
    line, _, buf = buf.partition(b"\n")
    return line.decode()
target = {"path": arg, "size": 1, "fd": True}
if case == "regular":
    f = os.open("/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd", os.O_RDONLY)
    send("write_file", target, [f])
elif case == "socket":
    a, b = socket.socketpair()
    send("write_file", target, [a.fileno()])
elif case == "fifo":  # a named FIFO: S_ISFIFO, but an inode of a host file system
    path = os.path.join(os.environ.get("TEST_TMP", "/tmp"), "fifo.%d" % os.getpid())
    os.mkfifo(path)
    f = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.unlink(path)
    send("write_file", target, [f])
elif case == "wrongdir":
    r, w = os.pipe()
    send("write_file", target, [w])
elif case == "wrongdir_read":
    r, w = os.pipe()
    send("read_file", {"path": arg, "fd": True}, [r])
elif case == "missing":
    send("write_file", target)
elif case == "nosize":
    r, w = os.pipe()
    os.write(w, b"x")
    os.close(w)
    send("write_file", {"path": arg, "fd": True}, [r])
elif case == "two":
    r, w = os.pipe()
    r2, w2 = os.pipe()
    os.write(w, b"x")
    send("write_file", target, [r, r2])
elif case == "short":
    r, w = os.pipe()
    os.write(w, b"ab")
    os.close(w)
    send("write_file", {"path": arg, "size": 5, "fd": True}, [r])
elif case == "long":
    r, w = os.pipe()
    os.write(w, b"abcdef")
    os.close(w)
    send("write_file", {"path": arg, "size": 5, "fd": True}, [r])
elif case == "killed":
    # 64 MiB announced, 1 MiB sent, then the writer dies with SIGKILL
    r, w = os.pipe()
    send("write_file", {"path": arg, "size": 64 << 20, "fd": True}, [r])
    os.close(r)
    os.write(w, b"k" * (1 << 20)) if False else None
    for _ in range(16):
        os.write(w, b"k" * 65536)
    time.sleep(0.3)
    os.kill(os.getpid(), 9)
elif case == "nosandbox":
    # refused before its pipe is looked at: the pipe goes with it, the connection stays clean
    r, w = os.pipe()
    sid = "ffffffffffffffffffffffffffffffff"
    send("write_file", target, [r])
    first = reply()
    s.sendall(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
    print(first)
    print(reply())
    sys.exit(0)
elif case == "many":
    # 17 transfers at once on one connection, each pipe held open with nothing written: the 17th
    # is refused (conflict); once the pipes close, each of the 16 ends with a one-line error
    ws = []
    for i in range(17):
        r, w = os.pipe()
        send("write_file", {"path": f"{arg}{i}", "size": 10, "fd": True}, [r])
        os.close(r)
        ws.append(w)
    first = reply()
    time.sleep(0.5)
    for w in ws:
        os.close(w)
    print(first)
    for i in range(16):
        print(reply())
    sys.exit(0)
elif case == "stall":
    # a reader that stops: read 64 KiB, then hold the pipe for 3 s; print when done
    r, w = os.pipe()
    send("read_file", {"path": arg, "fd": True}, [w])
    os.close(w)
    got = 0
    while got < 65536:
        got += len(os.read(r, 65536 - got))
    open(os.environ["STALL_MARK"], "w").close()
    time.sleep(3)
    os.close(r)
print(reply())
PY
}

rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# ---- tests ---------------------------------------------------------------------------------

test_cp_round_trips_are_byte_exact() {
        local id n sum
        new_sandbox id
        for n in 0 1 4096 $(((16 << 20) + 1)); do
                head -c "$n" /dev/urandom > "$TEST_TMP/f$n"
                sum=$(sha256sum < "$TEST_TMP/f$n")
                assert_status 0 "$NSBOX" cp "$TEST_TMP/f$n" "$id:/workspace/f$n"
                assert_eq "" "$OUT" "output of cp in ($n bytes)"
                assert_status 0 "$NSBOX" exec "$id" -- sh -c "sha256sum < /workspace/f$n"
                assert_eq "$sum" "$OUT" "sha256 inside of $n bytes"
                assert_status 0 "$NSBOX" cp "$id:/workspace/f$n" "$TEST_TMP/back$n"
                assert_eq "$sum" "$(sha256sum < "$TEST_TMP/back$n")" "sha256 of $n bytes copied back"
                assert_eq "$n" "$(stat -c %s "$TEST_TMP/back$n")" "size of $n bytes copied back"
        done
        # a sparse file: zeros of the right size both ways
        truncate -s 40M "$TEST_TMP/sparse"
        printf 'middle' | dd of="$TEST_TMP/sparse" bs=1 seek=$((20 << 20)) conv=notrunc 2> /dev/null
        sum=$(sha256sum < "$TEST_TMP/sparse")
        assert_status 0 "$NSBOX" cp "$TEST_TMP/sparse" "$id:/workspace/sparse"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'truncate -s 30M /workspace/holes && printf end >> /workspace/holes'
        assert_status 0 "$NSBOX" cp "$id:/workspace/sparse" "$TEST_TMP/sparse.back"
        assert_eq "$sum" "$(sha256sum < "$TEST_TMP/sparse.back")" "sparse file copied back"
        assert_status 0 "$NSBOX" cp "$id:/workspace/holes" "$TEST_TMP/holes"
        assert_eq "$(( (30 << 20) + 3 ))" "$(stat -c %s "$TEST_TMP/holes")" "size of a sparse file made inside"
        assert_eq "end" "$(tail -c 3 "$TEST_TMP/holes")" "its last bytes"
        [ "$(du -k "$TEST_TMP/holes" | cut -f1)" -lt 1024 ] || fail "a sparse file copied out is not sparse: $(du -k "$TEST_TMP/holes")"
        assert_status 0 "$NSBOX" cp "$id:/workspace/holes" - > /dev/null
        "$NSBOX" cp "$id:/workspace/holes" - | cmp - "$TEST_TMP/holes" || fail "cp to standard output differs"
        assert_status 0 "$NSBOX" exec "$id" -- ls -A /workspace
        assert_eq "f0
f1
f16777217
f4096
holes
sparse" "$OUT" "the workspace: no temporary files"
}

test_cp_one_gib() {
        local id sum
        new_sandbox id --disk 3G
        head -c $((1 << 30)) /dev/urandom > "$TEST_TMP/g"
        sum=$(sha256sum < "$TEST_TMP/g")
        assert_status 0 "$NSBOX" cp "$TEST_TMP/g" "$id:/workspace/g"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'sha256sum < /workspace/g'
        assert_eq "$sum" "$OUT" "sha256 of 1 GiB inside"
        rm -f "$TEST_TMP/g"
        assert_status 0 "$NSBOX" cp "$id:/workspace/g" "$TEST_TMP/g2"
        assert_eq "$sum" "$(sha256sum < "$TEST_TMP/g2")" "sha256 of 1 GiB copied back"
        rm -f "$TEST_TMP/g2"
}

test_old_base64_path_still_works() {
        local id
        new_sandbox id
        head -c 100000 /dev/urandom > "$TEST_TMP/b"
        NSBOX_CP_NO_FD=1 assert_status 0 "$NSBOX" cp "$TEST_TMP/b" "$id:/workspace/b"
        NSBOX_CP_NO_FD=1 assert_status 0 "$NSBOX" cp "$id:/workspace/b" "$TEST_TMP/b2"
        cmp "$TEST_TMP/b" "$TEST_TMP/b2" || fail "the chunked path's copy differs"
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "/workspace/c", "content_b64": "aGVsbG8="}'
        assert_status 0 "$NSBOX" call "$id" read_file '{"path": "/workspace/c", "encoding": "base64"}'
        assert_eq "aGVsbG8=" "$(echo "$OUT" | jget 'd["content"]')" "base64 read back"
}

test_pseudo_files_come_whole_through_every_path() {
        local id pid how
        new_sandbox id
        pid=$(big_cmdline_process "$id") || fail "the process with a long command line did not start"
        big_cmdline > "$TEST_TMP/want"
        "$NSBOX" exec "$id" -- cat /proc/version > "$TEST_TMP/version" || fail "cat /proc/version"
        for how in fd base64; do
                [ $how = fd ] && unset NSBOX_CP_NO_FD || export NSBOX_CP_NO_FD=1
                # their size says 0: each is read to its end, to a file and to standard output
                assert_status 0 "$NSBOX" cp "$id:/proc/$pid/cmdline" "$TEST_TMP/got.$how"
                cmp "$TEST_TMP/want" "$TEST_TMP/got.$how" || fail "cp ($how) of /proc/$pid/cmdline: $(stat -c %s "$TEST_TMP/got.$how") bytes of 1500055"
                "$NSBOX" cp "$id:/proc/version" - > "$TEST_TMP/out.$how" || fail "cp ($how) of /proc/version to stdout"
                cmp "$TEST_TMP/version" "$TEST_TMP/out.$how" || fail "cp ($how) of /proc/version: $(stat -c %s "$TEST_TMP/out.$how") bytes"
        done
        unset NSBOX_CP_NO_FD
        assert_status 0 "$NSBOX" call "$id" read_file '{"path": "/proc/version", "encoding": "base64"}'
        assert_eq "$(base64 -w0 < "$TEST_TMP/version") True" "$(echo "$OUT" | jget 'd["content"] + " " + str(d["eof"])')" "read_file of /proc/version in base64"
        PYTHONPATH="$NSBOX_SRC/clients/python" python3 - "$id" "$pid" "$TEST_TMP/want" <<'PY' || fail "the python client's reads of a pseudo file"
import os, sys
import nsbox
sb = nsbox.Sandbox.connect(sys.argv[1])
path, want = f"/proc/{sys.argv[2]}/cmdline", open(sys.argv[3], "rb").read()
assert sb.files.read(path, format="bytes") == want, "the pipe"
assert b"".join(sb.files.read(path, format="stream")) == want, "stream"
os.environ["NSBOX_NO_FD"] = "1"
assert sb.files.read(path, format="bytes") == want, "base64"
PY
}

test_bad_descriptors_get_one_line_errors_and_change_nothing() {
        local id c out
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "/workspace/t", "content": "old"}'
        for c in regular socket fifo wrongdir wrongdir_read missing nosize two short long; do
                out=$(fdcall "$id" "$c" /workspace/t)
                assert_contains "$out" '"error"' "$c"
                assert_contains "$out" 'invalid_argument' "$c"
                assert_eq 1 "$(printf '%s\n' "$out" | grep -c .)" "lines of the answer to $c"
        done
        out=$(fdcall "$id" nosandbox /workspace/t)
        assert_contains "$(printf '%s\n' "$out" | head -1)" '"not_found"' "an fd call to no sandbox"
        assert_contains "$(printf '%s\n' "$out" | tail -1)" '"id":2,"result"' "the next request on that connection: $out"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'cat /workspace/t; echo; ls -A /workspace'
        assert_eq "old
t" "$OUT" "the target and its directory after bad calls"
        # nsbox cp of what is not a regular file, as before
        assert_status 125 "$NSBOX" cp "$TEST_TMP" "$id:/workspace/d"
        assert_one_line_error "$OUT"
        [ -n "$(pgrep -u "$(id -u)" -x nsboxd | head -1)" ] || fail "nsboxd is gone"
}

test_killed_writer_leaves_no_temporary_file() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "/workspace/t", "content": "old"}'
        fdcall "$id" killed /workspace/t > /dev/null 2>&1
        sleep 0.5
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'cat /workspace/t; echo; ls -A /workspace'
        assert_eq "old
t" "$OUT" "the target and its directory after a writer killed mid-transfer"
}

test_stalled_reader_does_not_grow_memory() {
        local id dpid apid base_d base_a max_d max_a i r client
        new_sandbox id --disk 2G
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'head -c 268435456 /dev/zero > /workspace/big'
        dpid=$(NSBOX_SOCKET=$NSBOX_SOCKET python3 -c '
import json, os, socket
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["NSBOX_SOCKET"])
s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
print(json.loads(s.makefile().readline())["result"]["pid"])')
        apid=$("$NSBOX" ls --json | jget "[s['pid'] for s in d if s['id'] == '$id'][0]")
        base_d=$(rss "$dpid") base_a=$(rss "$apid")
        max_d=$base_d max_a=$base_a
        export STALL_MARK="$TEST_TMP/stalled"
        fdcall "$id" stall /workspace/big > "$TEST_TMP/stall.out" 2>&1 &
        client=$!
        for i in $(seq 50); do [ -e "$STALL_MARK" ] && break; sleep 0.1; done
        [ -e "$STALL_MARK" ] || fail "the reader got nothing"
        for i in $(seq 8); do
                sleep 0.25
                r=$(rss "$dpid"); [ "$r" -gt "$max_d" ] && max_d=$r
                r=$(rss "$apid"); [ "$r" -gt "$max_a" ] && max_a=$r
        done
        # the agent serves other calls meanwhile: the transfer waits in its loop, not in it
        OUT=$(timeout 5 "$NSBOX" exec "$id" -- echo served 2>&1) || fail "exec during a stalled transfer: $OUT"
        assert_eq served "$OUT" "exec during a stalled transfer"
        wait "$client"
        [ $((max_d - base_d)) -lt 16384 ] || fail "nsboxd grew from $base_d kB to $max_d kB"
        [ $((max_a - base_a)) -lt 16384 ] || fail "the agent grew from $base_a kB to $max_a kB"
        assert_contains "$(cat "$TEST_TMP/stall.out")" '"error"' "the answer once the reader closed its pipe"
        assert_status 0 "$NSBOX" exec "$id" -- true
}

test_python_client_files_use_the_pipe() {
        local id
        python3 -c 'import os; os.splice' 2> /dev/null || skip "python3 without os.splice (3.10+)"
        new_sandbox id
        PYTHONPATH="$NSBOX_SRC/clients/python" python3 - "$id" "$TEST_TMP" <<'PY' || fail "python round trips failed"
import hashlib, os, sys
import nsbox
sid, tmp = sys.argv[1], sys.argv[2]
sb = nsbox.Sandbox.connect(sid)
assert sb._conn.passes_fds
for n in (0, 1, 4096, (16 << 20) + 1):
    data = os.urandom(n)
    sb.files.write(f"/workspace/p{n}", data)
    back = sb.files.read(f"/workspace/p{n}", format="bytes")
    assert hashlib.sha256(back).digest() == hashlib.sha256(data).digest(), n
    assert sb.files.read(f"/workspace/p{n}", format="stream") is not None
# a sparse file made inside reads back as zeros of its size
sb.commands.run("truncate -s 5M /workspace/holes")
assert sb.files.read("/workspace/holes", format="bytes") == bytearray(5 << 20)
# the old base64 path, for comparison
os.environ["NSBOX_NO_FD"] = "1"
sb.files.write("/workspace/old", b"\x00\xffold")
assert sb.files.read("/workspace/old", format="bytes") == b"\x00\xffold"
del os.environ["NSBOX_NO_FD"]
assert sb.files.read("/workspace/old", format="bytes") == b"\x00\xffold"
assert sb.files.read("/workspace/old") == "\x00\ufffdold"
try:
    sb.files.read("/workspace/missing", format="bytes")
    raise SystemExit("no error for a missing file")
except nsbox.NotFoundException:
    pass
print("ok")
PY
}

test_sixteen_transfers_at_once_and_a_full_disk() {
        local id out
        new_sandbox id --disk 64M
        out=$(fdcall "$id" many /workspace/m)
        assert_eq 17 "$(printf '%s\n' "$out" | grep -c .)" "answers to 17 transfers: $out"
        assert_contains "$(printf '%s\n' "$out" | head -1)" '"conflict"' "the 17th transfer"
        assert_eq 16 "$(printf '%s\n' "$out" | grep -c 'the pipe ended after 0 of 10 bytes')" "the 16 when their pipes closed"
        head -c $((100 << 20)) /dev/urandom > "$TEST_TMP/big"
        assert_status 125 "$NSBOX" cp "$TEST_TMP/big" "$id:/workspace/big"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" too_large "cp onto a full disk"
        assert_status 0 "$NSBOX" exec "$id" -- ls -A /workspace
        assert_eq "" "$OUT" "the workspace after a full disk and cut transfers"
}

test_libnsbox_call_fd_in_both_modes() {
        local san mode
        nm -D "$NSBOX_BUILD/libnsbox.so" 2> /dev/null | grep -q ' U __asan_init' && san=address,undefined
        cc -Wall -Wextra -Werror -pthread ${san:+-fsanitize=$san} -I"$NSBOX_SRC/include" -o "$TEST_TMP/libfd" \
                "$NSBOX_SRC/tests/integration/libnsbox-fd.c" -L"$NSBOX_BUILD" -lnsbox -Wl,-rpath,"$NSBOX_BUILD" > "$TEST_TMP/cc.log" 2>&1 ||
                fail "cc libnsbox-fd.c: $(cat "$TEST_TMP/cc.log")"
        "$NSBOX" ls > /dev/null # nsboxd up (the library would look for an installed one)
        for mode in daemon --in-process; do
                OUT=$(cd / && timeout 120 "$TEST_TMP/libfd" $mode 2>&1)
                assert_eq 0 "$?" "libnsbox-fd ($mode) exit status; output: $OUT"
                assert_eq "write: 0 bytes_written ok
read: 0 16777217 bytes same
regular file: -22 invalid_argument" "$OUT" "nsbox_call_fd ($mode)"
        done
}

run_tests
