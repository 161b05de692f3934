#!/usr/bin/env python3
"""Bench (not a test): the Python client against the same calls over the raw socket.

usage: [NSBOXD=build/nsboxd] PYTHONPATH=clients/python python3 tests/bench/python.py [N]
With NSBOXD, an nsboxd of its own is started on a private socket and stopped at the end; else
the client's usual one is used (NSBOX_SOCKET, else the user's default socket).
Measures, N times each (default 500, at least 200), in one sandbox: commands.run("true") and
files.read of a 4 KiB file through the client, and the same exec and read_file (base64) calls
as hand-written JSON lines on a socket of its own; prints median and p99 in milliseconds.
"""

import json
import os
import socket
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from nsbox import Sandbox


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def timed(fn, n):
    for _ in range(20):  # warm up
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


class Raw:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.n = 0

    def call(self, params):
        self.n += 1
        self.s.sendall(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": "call", "params": params}).encode() + b"\n")
        while True:
            d = json.loads(self.f.readline())
            if d.get("id") == self.n:
                return d["result"]


def own_daemon():
    d = tempfile.mkdtemp(prefix="nsbox-bench-py.")
    os.environ["NSBOX_SOCKET"] = sock = os.path.join(d, "d.sock")
    p = subprocess.Popen([os.environ["NSBOXD"], "--socket", sock], stdin=subprocess.DEVNULL,
                         stdout=open(os.path.join(d, "log"), "ab"), stderr=subprocess.STDOUT)
    for _ in range(300):
        if os.path.exists(sock):
            return p
        time.sleep(0.1)
    sys.exit("bench: nsboxd did not start (log in %s)" % d)


def main():
    n = max(200, int(sys.argv[1]) if len(sys.argv) > 1 else 500)
    daemon = own_daemon() if os.environ.get("NSBOXD") else None
    try:
        bench(n)
    finally:
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)


def bench(n):
    with Sandbox.create(metadata={"bench": "python"}) as s:
        s.files.write("4k.bin", os.urandom(4096))
        raw = Raw(s._conn.path)
        sid = s.sandbox_id
        rows = [
            ('commands.run("true")', timed(lambda: s.commands.run("true"), n),
             "raw exec shell true", timed(lambda: raw.call({"sandbox": sid, "tool": "exec", "params": {"shell": "true"}}), n)),
            ('files.read 4 KiB (bytes)', timed(lambda: s.files.read("4k.bin", format="bytes"), n),
             "raw read_file base64", timed(lambda: raw.call({"sandbox": sid, "tool": "read_file",
                                                             "params": {"path": "4k.bin", "encoding": "base64"}}), n)),
        ]
        print(f"{n} calls each, one sandbox, milliseconds")
        print(f"{'call':28} {'median':>8} {'p99':>8}   {'raw socket':24} {'median':>8} {'p99':>8}   ratio")
        for name, a, rname, b in rows:
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"{name:28} {ma:8.3f} {pct(a, 99):8.3f}   {rname:24} {mb:8.3f} {pct(b, 99):8.3f}   {ma / mb:5.2f}")


if __name__ == "__main__":
    main()
