#!/usr/bin/env python3
"""Bench (not a test): transfer throughput against size, every path of nsboxd; run by xfer.sh.

Per size, per run, each path in turn (interleaved): a file of random bytes written into a
sandbox, read back, the copy compared with the original (a path whose bytes differ stops the
bench: no figure from it), the sandbox's copy removed.  Times are wall clock around the whole
transfer as its client does it, nsbox cp's process start included; curl's own time_total.  Writes
OUT/xfer.json and, with gnuplot, OUT/xfer.png (log size against MB/s, log, a line per path and
direction).
"""

import argparse
import array
import fcntl
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

from nsbox import Sandbox

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
B64_MAX = 64 << 20  # base64 JSON calls: about 100 MB/s, so not beyond


def size_arg(s):
    units = {"K": 10, "M": 20, "G": 30}
    t = s.strip().upper().removesuffix("IB").removesuffix("B")
    try:
        return int(t[:-1]) << units[t[-1]] if t and t[-1] in units else int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}': expected a size such as 64M or 1G")


def size_name(n):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    if p.returncode:
        raise SystemExit(f"bench: {cmd[0]} exited {p.returncode}: {p.stderr.decode(errors='replace').strip()}")


def same_file(a, b):
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


class RawSocket:
    """write_file/read_file with "fd": true on a socket of its own: a pipe passed with SCM_RIGHTS,
    spliced from and to the host file (no copy through Python): the descriptor path's floor."""

    def __init__(self, path, sid):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.sid, self.rid = sid, 0

    def _call(self, tool, params, fd):
        self.rid += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.rid, "method": "call",
                           "params": {"sandbox": self.sid, "tool": tool, "params": dict(params, fd=True)}}).encode() + b"\n"
        k = self.s.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        self.s.sendall(line[k:])

    def _reply(self):
        m = json.loads(self.f.readline())
        if "error" in m:
            raise SystemExit(f"bench: raw socket: {m['error']['message']}")
        return m["result"]

    def _pumped(self, tool, params, pump):
        r, w = os.pipe()
        try:
            fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            pass
        theirs, ours = (r, w) if tool == "write_file" else (w, r)
        t = threading.Thread(target=pump, args=(ours,))
        t.start()
        self._call(tool, params, theirs)
        os.close(theirs)
        res = self._reply()
        t.join()
        return res

    def write(self, src, path):
        size = os.path.getsize(src)
        fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)

        def feed(w):
            off = 0
            while off < size:
                off += os.splice(fd, w, min(size - off, 1 << 20), offset_src=off)
            os.close(w)
        try:
            self._pumped("write_file", {"path": path, "size": size}, feed)
        finally:
            os.close(fd)

    def read(self, path, dst):
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        got = [0]

        def drain(r):
            while k := os.splice(r, fd, 1 << 20):
                got[0] += k
            os.close(r)
        try:
            res = self._pumped("read_file", {"path": path}, drain)
        finally:
            os.close(fd)
        if res.get("bytes") != got[0]:
            raise SystemExit(f"bench: raw socket: {got[0]} bytes came of {res.get('bytes')}")


def paths(a, sb, raw, http):
    """(name, label, largest size, round trip): trip(src, back, remote) -> (write s, read s, same)."""
    hdr = ["-H", f"E2b-Sandbox-Id: {http['sandboxID']}", "-H", f"X-Access-Token: {http['envdAccessToken']}"]
    b64 = dict(os.environ, NSBOX_CP_NO_FD="1")

    def cp(env):
        def trip(src, back, remote):
            w = timed(lambda: run([a.nsbox, "cp", src, f"{a.sandbox}:{remote}"], env))
            r = timed(lambda: run([a.nsbox, "cp", f"{a.sandbox}:{remote}", back], env))
            return w, r, same_file(src, back)
        return trip

    def raw_trip(src, back, remote):
        w = timed(lambda: raw.write(src, remote))
        r = timed(lambda: raw.read(remote, back))
        return w, r, same_file(src, back)

    def python_trip(src, _back, remote):
        with open(src, "rb") as f:
            data = f.read()
        w = timed(lambda: sb.files.write(remote, data))
        got = []
        r = timed(lambda: got.append(sb.files.read(remote, format="bytes")))
        return w, r, got[0] == data

    def curl(args):
        # curl's own time, connect to last byte: its process start (about 15 ms here, most of it
        # loading its libraries) would hide the API's figure at small sizes
        p = subprocess.run(["curl", "-sSf", "-w", "%{time_total}", *hdr, *args], capture_output=True)
        if p.returncode:
            raise SystemExit(f"bench: curl exited {p.returncode}: {p.stderr.decode(errors='replace').strip()}")
        return float(p.stdout.decode().split()[-1])

    def http_trip(src, back, remote):
        url = f"{a.http}/files?path={os.path.basename(remote)}"  # the workdir: E2B's user may not write /workspace
        # -T streams the file (--data-binary @ would read it whole into curl's memory first)
        w = curl(["-X", "POST", "-H", "Content-Type: application/octet-stream", "-T", src, "-o", "/dev/null", url])
        r = curl(["-o", back, url])
        return w, r, same_file(src, back)

    return [("cp", "nsbox cp (fd path)", None, cp(None)),
            ("cp-base64", "nsbox cp, base64 JSON calls (NSBOX_CP_NO_FD=1)", B64_MAX, cp(b64)),
            ("socket-fd", "raw socket, pipe passed (spliced)", None, raw_trip),
            ("python", "Python client files.write/read (fd path)", None, python_trip),
            ("http", "HTTP /files (curl)", None, http_trip)]


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def make_file(p, size):
    with open(p, "wb") as f:
        left = size
        while left:
            k = min(left, 16 << 20)
            f.write(os.urandom(k))
            left -= k


def measure(a, ways, sb):
    sizes = [s for s in SIZES if s <= a.max]
    res = {name: {"label": label, "rows": []} for name, label, _, _ in ways}
    print(f"== transfer throughput by size: {a.runs} runs per size (at most 3 from 256 MiB), "
          "each path in turn, every copy compared; medians, MB/s written/read")
    for size in sizes:
        runs = a.runs if size <= 64 << 20 else min(a.runs, 3)
        src, back = os.path.join(a.dir, "src"), os.path.join(a.dir, "back")
        make_file(src, size)
        times = {name: ([], []) for name, _, _, _ in ways}
        for _ in range(runs):
            for name, _, cap, trip in ways:
                if cap is not None and size > cap:
                    continue
                if size >= 16 << 20:
                    os.sync()  # the last transfer's dirty pages are not this one's to write back
                w, r, same = trip(src, back, f"/workspace/{name}.bin")
                if not same:
                    raise SystemExit(f"bench: {name}: {size} bytes came back different")
                times[name][0].append(w)
                times[name][1].append(r)
                if os.path.exists(back):
                    os.unlink(back)
                if name != "http":  # (the HTTP sandbox has its one file, replaced each time)
                    sb.files.remove(f"/workspace/{name}.bin")
        line = f"   {size_name(size)}:"
        for name, _, _, _ in ways:
            w, r = times[name]
            if w:
                mw, mr = statistics.median(w), statistics.median(r)
                res[name]["rows"].append({"bytes": size, "runs": len(w), "write_MBps": round(size / 1e6 / mw, 2),
                                          "read_MBps": round(size / 1e6 / mr, 2), "write_ms": round(mw * 1000, 3),
                                          "read_ms": round(mr * 1000, 3)})
                line += f"  {name} {size / 1e6 / mw:.1f}/{size / 1e6 / mr:.1f}"
        print(line, flush=True)
        os.unlink(src)
    return res


def tables(res, sizes):
    for d in ("write", "read"):
        print(f"\n   {d}, MB/s (ms)" + "".join(f"{n:>20s}" for n in res))
        for size in sizes:
            line = f"   {size_name(size):>{len(d) + 11}s}"
            for p in res.values():
                row = next((x for x in p["rows"] if x["bytes"] == size), None)
                cell = f"{row[d + '_MBps']:.1f} ({row[d + '_ms']:.2f})" if row else "-"
                line += f"{cell:>20s}"
            print(line)


def plot(out, res, tmp):
    dats = []
    for name, p in res.items():
        dat = os.path.join(tmp, f"xfer-{name}.dat")
        with open(dat, "w") as f:
            for row in p["rows"]:
                f.write(f"{row['bytes']} {row['write_MBps']} {row['read_MBps']}\n")
        if p["rows"]:
            dats.append((dat, p["label"]))
    gp = os.path.join(tmp, "xfer.gp")
    lines = []
    for i, (dat, label) in enumerate(dats):
        lines.append(f'"{dat}" using 1:2 with linespoints lw 2 lc {i + 1} pt 7 dt 1 title "{label}: write"')
        lines.append(f'"{dat}" using 1:3 with linespoints lw 2 lc {i + 1} pt 5 dt 2 title "{label}: read"')
    with open(gp, "w") as f:
        f.write(f'''set terminal pngcairo size 1000,650 noenhanced
set output "{os.path.join(out, "xfer.png")}"
set title "transfer throughput against size into and out of a sandbox (nsboxd; medians)"
set xlabel "file size (log)"; set ylabel "MB/s (log)"
set logscale x 2; set logscale y 10; set grid; set key bottom right font ",9"
set xtics ("4K" 4096, "64K" 65536, "1M" 1048576, "16M" 16777216, "64M" 67108864, "256M" 268435456, "1G" 1073741824)
plot {", ".join(lines)}
''')
    if not shutil.which("gnuplot"):
        print("no plot: gnuplot is missing (apt-get install gnuplot-nox)")
        return
    subprocess.run(["gnuplot", gp], check=True)
    print(f"plot: {os.path.join(out, 'xfer.png')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--nsbox", required=True)
    ap.add_argument("--sandbox", required=True)
    ap.add_argument("--http", required=True)
    ap.add_argument("--http-sandbox", required=True, type=json.loads, help="the body of POST /v2/sandboxes")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max", type=size_arg, default=1 << 30)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.runs < 1 or a.max < SIZES[0]:
        raise SystemExit("bench: --runs must be at least 1 and --max at least 4K")
    sock = os.environ["NSBOX_SOCKET"]
    sb = Sandbox.connect(a.sandbox, socket=sock)
    raw = RawSocket(sock, sb.sandbox_id)
    res = measure(a, paths(a, sb, raw, a.http_sandbox), sb)
    tables(res, [s for s in SIZES if s <= a.max])
    with open(os.path.join(a.out, "xfer.json"), "w") as f:
        json.dump({"xfer": {"runs": a.runs, "max": a.max, "host_dir": a.dir, "paths": res}}, f, indent=1)
    print(f"figures written to {os.path.join(a.out, 'xfer.json')}")
    plot(a.out, res, a.dir)


if __name__ == "__main__":
    sys.exit(main())
