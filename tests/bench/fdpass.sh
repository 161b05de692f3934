#!/usr/bin/env bash
# File bytes by descriptor (issue 26; part of make bench): 64 MiB written and read back through
# the fd path (a pipe passed with SCM_RIGHTS), the base64 path (16 MiB write_file/read_file
# calls) and HTTP /files (curl), same nsboxd, same run, medians; then the fd path's throughput
# for sizes from 4 KiB to 1 GiB.  Every transfer is checked (sha256).  As whoever runs it.
#   tests/bench/fdpass.sh [N]      N runs per figure (default 5)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$(dirname "$here")")
NSBOX=${NSBOX:-$src/build/nsbox}
NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
export NSBOX_POLICY_PATH=${NSBOX_POLICY_PATH:-$src/policy}
N=${1:-5}
dir=$(mktemp -d /tmp/nsbox-bench-fd.XXXXXX)
chmod 0711 "$dir"
trap 'kill -TERM $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$dir/config.json" <<JSON
{"http": {"listen": "127.0.0.1:$port", "keys": "$dir/keys.json", "internet": false},
 "templates": {"base": {"create": {"workdir": "/home/user"}}}}
JSON
NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" > "$dir/log" 2>&1 &
dpid=$!
export NSBOX_SOCKET=$dir/d.sock
for _ in $(seq 100); do [ -S "$dir/d.sock" ] && break; sleep 0.1; done
key=$("$NSBOX" api-key create 2>/dev/null)
body=$(curl -s -H "X-API-KEY: $key" -d '{"templateID": "base", "timeout": 600}' "http://127.0.0.1:$port/v2/sandboxes")
hsid=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])')
tok=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])')
sid=$("$NSBOX" create --disk 3G)
head -c 64M /dev/urandom > "$dir/big"
hw=() hr=()
for _ in $(seq "$N"); do
        hw+=("$(curl -s -o /dev/null -w '%{time_total}' -H "E2b-Sandbox-Id: $hsid" -H "X-Access-Token: $tok" \
                -H 'Content-Type: application/octet-stream' --data-binary @"$dir/big" "http://127.0.0.1:$port/files?path=big.bin")")
        hr+=("$(curl -s -o "$dir/back" -w '%{time_total}' -H "E2b-Sandbox-Id: $hsid" -H "X-Access-Token: $tok" \
                "http://127.0.0.1:$port/files?path=big.bin")")
        cmp -s "$dir/big" "$dir/back" || { echo "bench: 64 MiB came back different through /files" >&2; exit 1; }
done
python3 - "$dir/d.sock" "$sid" "$N" "${hw[*]}" "${hr[*]}" <<'PY'
import array, base64, hashlib, json, os, socket, statistics, sys, threading, time
sock, sid, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
hw, hr = [float(x) for x in sys.argv[4].split()], [float(x) for x in sys.argv[5].split()]
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
f = s.makefile("rb")
rid = 0
def call(tool, params, fd=None):
    global rid
    rid += 1
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "call",
                       "params": {"sandbox": sid, "tool": tool, "params": params}}).encode() + b"\n"
    if fd is None:
        s.sendall(line)
    else:
        k = s.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        s.sendall(line[k:])
    return rid
def reply():
    m = json.loads(f.readline())
    if "error" in m:
        raise SystemExit(f"bench: {m['error']['message']}")
    return m["result"]
def setpipe(fd):
    try:
        import fcntl
        fcntl.fcntl(fd, 1031, 1 << 20)
    except OSError:
        pass
def fd_write(path, src):  # src: a file of the data
    size = os.fstat(src).st_size
    r, w = os.pipe(); setpipe(w)
    def feed():
        off = 0
        while off < size:
            off += os.splice(src, w, min(size - off, 1 << 20), offset_src=off)
        os.close(w)
    t = threading.Thread(target=feed); t.start()
    call("write_file", {"path": path, "size": size, "fd": True}, r); os.close(r)
    reply(); t.join()
def fd_read(path, dst):
    r, w = os.pipe(); setpipe(w)
    got = [0]
    def drain():
        while True:
            k = os.splice(r, dst, 1 << 20)
            if not k:
                break
            got[0] += k
        os.close(r)
    t = threading.Thread(target=drain); t.start()
    call("read_file", {"path": path, "fd": True}, w); os.close(w)
    res = reply(); t.join()
    assert res["bytes"] == got[0]
    return got[0]
def b64_write(path, data):
    C = 16 << 20
    for off in range(0, len(data), C):
        call("write_file", {"path": path, "append": off > 0, "content_b64": base64.b64encode(data[off:off + C]).decode()}); reply()
def b64_read(path, size):
    out = bytearray(); C = 16 << 20
    while len(out) < size:
        call("read_file", {"path": path, "encoding": "base64", "byte_offset": len(out), "byte_limit": C})
        out += base64.b64decode(reply()["content"])
    return out
def timed(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t
def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while b := fh.read(1 << 20):
            h.update(b)
    return h.hexdigest()
tmp = os.path.dirname(sock)
big = os.path.join(tmp, "big")
data = open(big, "rb").read()
want = hashlib.sha256(data).hexdigest()
MB = 64 * 1048576 / 1e6
rows = {"fd": ([], []), "base64": ([], []), "http": (hw, hr)}
for _ in range(n):
    src = os.open(big, os.O_RDONLY)
    rows["fd"][0].append(timed(lambda: fd_write("/workspace/fd.bin", src))); os.close(src)
    back = os.path.join(tmp, "fdback")
    dst = os.open(back, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    rows["fd"][1].append(timed(lambda: fd_read("/workspace/fd.bin", dst))); os.close(dst)
    assert sha(back) == want, "fd path: different bytes"
    rows["base64"][0].append(timed(lambda: b64_write("/workspace/b64.bin", data)))
    got = []
    rows["base64"][1].append(timed(lambda: got.append(b64_read("/workspace/b64.bin", len(data)))))
    assert hashlib.sha256(got[0]).hexdigest() == want, "base64 path: different bytes"
print(f"== 64 MiB through nsboxd, {n} runs each, medians (MB/s)")
res = {}
for k, (w, r) in rows.items():
    mw, mr = MB / statistics.median(w), MB / statistics.median(r)
    res[k] = {"write_MBps": round(mw), "read_MBps": round(mr)}
    print(f"  {k:8s} write {mw:8.0f}   read {mr:8.0f}")
print("== fd path by size (to and from a file in /tmp; medians, MB/s)")
sizes = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
bysize = []
for size in sizes:
    p = os.path.join(tmp, "s")
    with open(p, "wb") as fh:
        left = size
        while left:
            k = min(left, 1 << 24); fh.write(os.urandom(k)); left -= k
    runs = n if size < (256 << 20) else 1
    w, r = [], []
    for _ in range(runs):
        src = os.open(p, os.O_RDONLY)
        w.append(timed(lambda: fd_write("/workspace/s.bin", src))); os.close(src)
        dst = os.open(p + ".back", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        r.append(timed(lambda: fd_read("/workspace/s.bin", dst))); os.close(dst)
    assert sha(p) == sha(p + ".back"), f"{size}: different bytes"
    mw, mr = size / 1e6 / statistics.median(w), size / 1e6 / statistics.median(r)
    bysize.append({"bytes": size, "write_MBps": round(mw), "read_MBps": round(mr), "runs": runs,
                   "write_ms": round(statistics.median(w) * 1000, 2), "read_ms": round(statistics.median(r) * 1000, 2)})
    print(f"  {size:>11d} B  write {mw:8.0f} ({statistics.median(w)*1000:8.2f} ms)   read {mr:8.0f} ({statistics.median(r)*1000:8.2f} ms)  runs {runs}")
    os.unlink(p); os.unlink(p + ".back")
print(json.dumps({"fdpass": {"64MiB": res, "by_size": bysize}}))
PY
"$NSBOX" rm -f "$sid" > /dev/null
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $key" "http://127.0.0.1:$port/sandboxes/$hsid"
