#!/usr/bin/env python3
"""Bench (not a test): interactive latency through nsboxd's socket (issue 21).

usage: [NSBOXD=build/nsboxd] python3 tests/bench/interactive.py [N]
With NSBOXD, an nsboxd of its own is started on a private socket and stopped at the end; else
the usual one is used (NSBOX_SOCKET, else the user's default socket).  Raw JSON lines on the
socket, so that the figures are nsboxd's and the agent's, not a client library's.

  keystroke echo  cat on a pty (exec pty, streamed): one byte with process_write_stdin, time
                  until the "pty" event with its echo arrives; N keystrokes (default 200).
                  Baseline: cat on a local pty (openpty), the byte written to its master.
                  Then the same through the CLI: `nsbox exec -it ID cat` on a local pty (our
                  terminal raw, keys as process_write_stdin calls, echo to our stdout), when
                  NSBOX (the nsbox binary) is set or nsbox is on PATH.
  live output     a detached process printing a CLOCK_REALTIME timestamp line every 10 ms;
                  a process_connect client takes arrival minus the timestamp in the line,
                  over N lines (the tail sent at attach is left out).  Then the same into an
                  on_stdout callback of the Python client (commands.run(background=True)),
                  when clients/python is importable.  Baseline: the same loop as a local
                  child on a pipe.
Prints median and p99 in milliseconds; no pass or fail.
"""

import base64
import json
import os
import pty
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import termios
import threading
import time

TICKER = "while :; do date +%s%N; sleep 0.01; done"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def row(what, xs):
    print("   %-44s %8.3f %8.3f %6d" % (what, statistics.median(xs), pct(xs, 99), len(xs)))


class Raw:
    """One connection: requests by id, events of any call handed to on_event while waiting."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.n = 0

    def send(self, method, params):
        self.n += 1
        self.s.sendall(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode() + b"\n")
        return self.n

    def read(self):
        return json.loads(self.f.readline())

    def wait(self, rid, on_event=None):
        while True:
            d = self.read()
            if d.get("id") == rid:
                if "error" in d:
                    sys.exit("bench: %s" % d["error"]["message"])
                return d["result"]
            if d.get("method") == "event" and on_event:
                on_event(d["params"])

    def call(self, method, params):
        return self.wait(self.send(method, params))

    def tool(self, sb, tool, params, stream=False):
        return self.send("call", {"sandbox": sb, "tool": tool, "params": params, "stream": stream})


def keystrokes_nsbox(sock, sb, n):
    c = Raw(sock)
    cid = c.tool(sb, "exec", {"cmd": ["cat"], "pty": True}, stream=True)
    pid = None
    while pid is None:
        d = c.read()
        if d.get("method") == "event" and d["params"]["event"] == "started":
            pid = d["params"]["pid"]
    out = []
    for i in range(n + 20):  # 20 to warm up
        key = "abcdefghijklmnopqrstuvwxyz"[i % 26]  # no newline: cat's copy of a line would hold old keys
        t = time.perf_counter()
        c.tool(sb, "process_write_stdin", {"pid": pid, "data": key})
        while True:
            d = c.read()
            if d.get("method") == "event" and d["params"].get("call") == cid and d["params"]["event"] == "pty":
                if base64.b64decode(d["params"]["data_b64"]).decode(errors="replace") == key:
                    break
        if i >= 20:
            out.append((time.perf_counter() - t) * 1000)
    c.call("call", {"sandbox": sb, "tool": "process_kill", "params": {"pid": pid}})
    return out


def echo_times(master, n):
    """Write a key at a time to a pty's master and time its echo, ms; 20 warm-up keys left out."""
    out = []
    for i in range(n + 20):
        key = b"abcdefghijklmnopqrstuvwxyz"[i % 26:i % 26 + 1]
        t = time.perf_counter()
        os.write(master, key)
        got = b""
        while key not in got:
            select.select([master], [], [])
            got += os.read(master, 4096)
        if i >= 20:
            out.append((time.perf_counter() - t) * 1000)
    return out


def keystrokes_local(n):
    master, slave = pty.openpty()
    p = subprocess.Popen(["cat"], stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out = echo_times(master, n)
    p.kill()
    p.wait()
    os.close(master)
    return out


def keystrokes_cli(nsbox, sb, n):
    """nsbox exec -it SB cat on a pty of ours: a key written to its master, until its echo."""
    master, slave = pty.openpty()
    p = subprocess.Popen([nsbox, "exec", "-it", sb, "cat"], stdin=slave, stdout=slave, stderr=slave,
                         start_new_session=True)
    os.close(slave)
    for _ in range(300):  # nsbox has made our terminal raw: cat runs, keys go to it
        if not termios.tcgetattr(master)[3] & termios.ECHO:
            break
        time.sleep(0.1)
    os.write(master, b"ready")
    got = b""
    while b"ready" not in got:
        if not select.select([master], [], [], 30)[0]:
            sys.exit("bench: nsbox exec -it did not echo")
        got += os.read(master, 4096)
    out = echo_times(master, n)
    p.terminate()  # nsbox kills cat and restores the terminal
    p.wait(30)
    os.close(master)
    return out


def lateness(lines, since_ns, out):
    now = time.time_ns()
    for line in lines:
        try:
            ts = int(line)
        except ValueError:
            continue
        if ts >= since_ns:  # not the tail sent at attach
            out.append((now - ts) / 1e6)


def live_nsbox(sock, sb, n):
    c = Raw(sock)
    pid = c.call("call", {"sandbox": sb, "tool": "exec", "params": {"shell": TICKER, "detach": True, "tag": "ticker"}})["pid"]
    time.sleep(0.3)
    since = time.time_ns()
    cid = c.tool(sb, "process_connect", {"tag": "ticker"}, stream=True)
    out, part = [], b""
    while len(out) < n + 20:
        d = c.read()
        if d.get("method") == "event" and d["params"].get("call") == cid and d["params"]["event"] == "stdout":
            part += base64.b64decode(d["params"]["data_b64"])
            *lines, part = part.split(b"\n")
            lateness(lines, since, out)
    c.s.close()  # detaches the reader; the ticker is killed below
    Raw(sock).call("call", {"sandbox": sb, "tool": "process_kill", "params": {"pid": pid}})
    return out[20:]


def live_python(sock, sb, n):
    """commands.run(background=True, on_stdout=...) of the Python client: arrival in the callback."""
    from nsbox import Sandbox
    s = Sandbox.connect(sb, socket=sock)
    since, out, part, enough = time.time_ns(), [], [""], threading.Event()

    def on_stdout(text):
        part[0] += text
        *lines, part[0] = part[0].split("\n")
        lateness(lines, since, out)
        if len(out) >= n + 20:
            enough.set()
    h = s.commands.run(TICKER, background=True, on_stdout=on_stdout, timeout=0)
    enough.wait(300)
    h.kill()
    s._conn.close()
    return out[20:n + 20]


def live_local(n):
    p = subprocess.Popen(["sh", "-c", TICKER], stdout=subprocess.PIPE, start_new_session=True)
    since = time.time_ns()
    out, part = [], b""
    while len(out) < n + 20:
        part += os.read(p.stdout.fileno(), 65536)
        *lines, part = part.split(b"\n")
        lateness(lines, since, out)
    p.kill()
    p.wait()
    return out[20:]


def own_daemon():
    d = tempfile.mkdtemp(prefix="nsbox-bench-pty.")
    os.environ["NSBOX_SOCKET"] = sock = os.path.join(d, "d.sock")
    p = subprocess.Popen([os.environ["NSBOXD"], "--socket", sock], stdin=subprocess.DEVNULL,
                         stdout=open(os.path.join(d, "log"), "ab"), stderr=subprocess.STDOUT)
    for _ in range(300):
        if os.path.exists(sock):
            return p
        time.sleep(0.1)
    sys.exit("bench: nsboxd did not start (log in %s)" % d)


def default_socket():
    if os.environ.get("NSBOX_SOCKET"):
        return os.environ["NSBOX_SOCKET"]
    run = os.environ.get("XDG_RUNTIME_DIR") or "/run/user/%d" % os.getuid()
    return os.path.join(run, "nsbox", "nsboxd.sock")


def main():
    n = min(4000, max(50, int(sys.argv[1]) if len(sys.argv) > 1 else 200))  # a terminal line holds 4095 keys
    daemon = own_daemon() if os.environ.get("NSBOXD") else None
    sock = default_socket()
    try:
        c = Raw(sock)
        sb = c.call("create", {})["id"]
        try:
            print("== interactive latency through nsboxd's socket (issue 21), ms")
            print("   %-44s %8s %8s %6s" % ("", "median", "p99", "n"))
            row("keystroke echo, cat on a pty in nsbox", keystrokes_nsbox(sock, sb, n))
            row("keystroke echo, cat on a local pty", keystrokes_local(n))
            nsbox = os.environ.get("NSBOX") or shutil.which("nsbox")
            if nsbox:
                row("keystroke echo, nsbox exec -it ID cat", keystrokes_cli(nsbox, sb, n))
            row("live output, process_connect in nsbox", live_nsbox(sock, sb, n))
            try:
                import nsbox as _  # noqa: F401
                row("live output, Python client's on_stdout", live_python(sock, sb, n))
            except ImportError:
                print("   (no Python client on PYTHONPATH: its live output row left out)")
            row("live output, local child on a pipe", live_local(n))
        finally:
            c.call("destroy", {"sandbox": sb})
    finally:
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
            shutil.rmtree(os.path.dirname(sock), ignore_errors=True)


if __name__ == "__main__":
    main()
