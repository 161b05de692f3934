#!/usr/bin/env python3
"""Checks of the Python client (clients/python) against a real nsboxd, run by
tests/integration/python.sh: `client_tests.py NAME` runs check NAME against the nsboxd on
$NSBOX_SOCKET, prints "ok" and exits 0, or exits with a message saying what differed."""

import datetime
import hashlib
import json
import os
import shutil
import sys
import threading
import time

import nsbox
from nsbox import (CommandExitException, FileType, InvalidArgumentException, NotFoundException,
                   PermissionDeniedException, Sandbox, SandboxException, TimeoutException)
from nsbox.deepagents import FILE_ERRORS, NsboxBackend


def check(cond, what):
    if not cond:
        sys.exit(f"check failed: {what}")


def wait_for(cond, seconds):
    """cond() true within seconds (checked every 0.1 s)"""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def raises(fn, exc, code, what):
    """fn() must raise exc with stable code `code`; returns the exception."""
    try:
        fn()
    except exc as e:
        check(e.code == code, f"{what}: code {e.code!r}, expected {code!r} ({e})")
        check(str(e) and "\n" not in str(e), f"{what}: message not one line: {e!r}")
        return e
    except Exception as e:  # noqa: BLE001
        sys.exit(f"check failed: {what}: raised {type(e).__name__}: {e}, expected {exc.__name__}")
    sys.exit(f"check failed: {what}: nothing raised, expected {exc.__name__} {code}")


def t_files():
    with Sandbox.create(metadata={"test": "files"}) as s:
        w = s.files.write("src/hello.txt", "héllo\nworld\n")
        check(w.path == "/workspace/src/hello.txt" and w.name == "hello.txt" and w.type == FileType.FILE, f"write: {w}")
        check(s.files.read("src/hello.txt") == "héllo\nworld\n", "read text")
        b = s.files.read("/workspace/src/hello.txt", format="bytes")
        check(isinstance(b, bytearray) and bytes(b) == "héllo\nworld\n".encode(), f"read bytes: {b!r}")
        check(b"".join(s.files.read("src/hello.txt", format="stream")) == bytes(b), "read stream")
        s.files.write("bin/blob", bytes(range(256)))
        check(bytes(s.files.read("bin/blob", format="bytes")) == bytes(range(256)), "binary round trip")
        ws = s.files.write_files([{"path": "many/a.txt", "data": "A"}, {"path": "many/b.bin", "data": b"\x00B\xff"}])
        check([x.path for x in ws] == ["/workspace/many/a.txt", "/workspace/many/b.bin"], f"write_files: {ws}")
        check(bytes(s.files.read("many/b.bin", format="bytes")) == b"\x00B\xff", "write_files bytes")
        ents = s.files.list("/workspace")
        check([e.name for e in ents] == ["bin", "many", "src"], f"list depth 1: {[e.name for e in ents]}")
        deep = {e.path: e for e in s.files.list("/workspace", depth=2)}
        e = deep.get("/workspace/src/hello.txt")
        check(e is not None, f"list depth 2: {sorted(deep)}")
        check(e.type == FileType.FILE and e.size == len("héllo\nworld\n".encode()) and e.mode == 0o644
              and e.permissions == "-rw-r--r--" and isinstance(e.modified_time, datetime.datetime)
              and e.symlink_target is None, f"entry: {e}")
        check(deep["/workspace/src"].type == FileType.DIR and deep["/workspace/src"].permissions.startswith("d"),
              f"dir entry: {deep['/workspace/src']}")
        s.commands.run("ln -s src/hello.txt link")
        link = s.files.get_info("link")
        check(link.type == FileType.SYMLINK and link.symlink_target == "src/hello.txt", f"symlink: {link}")
        check(s.files.exists("src/hello.txt") and not s.files.exists("src/nope"), "exists")
        check(s.files.make_dir("a/b/c") is True and s.files.make_dir("a/b/c") is False, "make_dir created / existed")
        check(s.files.get_info("a/b/c").type == FileType.DIR, "make_dir made a directory")
        r = s.files.rename("src/hello.txt", "dst/moved.txt")
        check(r.path == "/workspace/dst/moved.txt" and r.size == 13, f"rename: {r}")
        check(not s.files.exists("src/hello.txt"), "rename left the source")
        s.files.remove("a")
        check(not s.files.exists("a/b/c") and not s.files.exists("a"), "remove is recursive")
        # the host never saw any of it
        check(not os.path.exists("/workspace/dst/moved.txt"), "file visible on the host")


def t_big_file():
    data = os.urandom(50 << 20)
    want = hashlib.sha256(data).hexdigest()
    with Sandbox.create(metadata={"test": "big"}) as s:
        t = time.monotonic()
        s.files.write("big.bin", data)
        tw = time.monotonic() - t
        r = s.commands.run("sha256sum big.bin; stat -c %s big.bin; ls -A")
        inside = r.stdout.split()
        check(inside[0] == want, f"sha256 inside the sandbox {inside[0]}, written {want}")
        check(inside[2] == str(50 << 20), f"size inside {inside[2]}")
        check(inside[3:] == ["big.bin"], f"temporary files left next to it: {inside[3:]}")
        t = time.monotonic()
        back = s.files.read("big.bin", format="bytes")
        tr = time.monotonic() - t
        check(hashlib.sha256(back).hexdigest() == want, "sha256 of what was read back")
        print(f"50 MiB: write {50 / tw:.0f} MiB/s, read {50 / tr:.0f} MiB/s", file=sys.stderr)
        # a file growing inside: read stops at the size it had at its first piece
        s.commands.run("truncate -s 16M grow")
        stream = s.files.read("grow", format="stream")  # its first piece is read now
        s.commands.run("(while :; do truncate -s +64M grow; done) >/dev/null 2>&1 &")
        while s.files.get_info("grow").size < (1 << 30):
            time.sleep(0.05)
        total = 0
        for piece in stream:
            total += len(piece)
            check(total <= 16 << 20, f"files.read of a growing file went past its size at the first piece: {total} bytes")
        check(total == 16 << 20, f"files.read of a growing file gave {total} bytes, expected 16 MiB")


def t_commands():
    with Sandbox.create(metadata={"test": "commands"}, envs={"FROM_CREATE": "c"}) as s:
        r = s.commands.run("echo out; echo err >&2; echo $FROM_CREATE$X; pwd", envs={"X": "x"}, cwd="/tmp")
        check((r.stdout, r.stderr, r.exit_code, r.error) == ("out\ncx\n/tmp\n", "err\n", 0, None), f"run: {r}")
        check(s.commands.run("cat", stdin="from stdin").stdout == "from stdin", "stdin")
        # streaming: each chunk reaches the callback while the command still runs
        seen, times = [], []
        script = "for i in 1 2 3; do echo line$i; echo e$i >&2; sleep 0.3; done"
        t0 = time.monotonic()
        r = s.commands.run(script, on_stdout=lambda d: (seen.append(("out", d)), times.append(time.monotonic() - t0)),
                           on_stderr=lambda d: seen.append(("err", d)))
        total = time.monotonic() - t0
        check("".join(d for k, d in seen if k == "out") == "line1\nline2\nline3\n", f"streamed stdout: {seen}")
        check("".join(d for k, d in seen if k == "err") == "e1\ne2\ne3\n", f"streamed stderr: {seen}")
        check(r.stdout == "line1\nline2\nline3\n" and r.stderr == "e1\ne2\ne3\n", f"result of a streamed run: {r}")
        check(times and times[0] < total - 0.3, f"first chunk came at {times[0] if times else None} s of {total} s")
        # a character split across chunks is not mangled
        r = s.commands.run("printf '\\303'; sleep 0.2; printf '\\251\\n'", on_stdout=lambda d: None)
        check(r.stdout == "é\n", f"split UTF-8: {r.stdout!r}")
        # a non-zero exit raises, carrying the result
        e = raises(lambda: s.commands.run("echo partial; exit 3"), CommandExitException, "command_exit", "exit 3")
        check((e.exit_code, e.stdout) == (3, "partial\n"), f"CommandExitException: {e.exit_code} {e.stdout!r}")
        raises(lambda: s.commands.run("sleep 10", timeout=0.5), TimeoutException, "timeout", "timeout")
        e = raises(lambda: s.commands.run("no-such-program-here"), CommandExitException, "command_exit", "127")
        check(e.exit_code == 127 and "not found" in e.stderr, f"not found: {e.exit_code} {e.stderr!r}")


def t_background():
    with Sandbox.create(metadata={"test": "background"}) as s:
        h = s.commands.run("while read l; do echo got $l; [ $l = end ] && break; done", background=True)
        check(isinstance(h.pid, int) and h.pid > 0, f"pid {h.pid}")
        running = [p for p in s.commands.list() if p["pid"] == h.pid]
        check(running and running[0]["running"], f"process_list: {s.commands.list()}")
        h.send_stdin("one\n")
        h.send_stdin(b"two\nend\n")
        out = []
        r = h.wait(on_stdout=out.append)
        check(r.stdout == "got one\ngot two\ngot end\n" and r.exit_code == 0, f"wait: {r}")
        check(out == ["got one\ngot two\ngot end\n"], f"wait's on_stdout: {out}")
        # close_stdin ends a reader
        h = s.commands.run("wc -l", background=True)
        h.send_stdin("a\nb\n")
        h.close_stdin()
        check(h.wait().stdout.strip() == "2", "close_stdin")
        # kill
        h = s.commands.run("sleep 300", background=True)
        check(h.kill() is True, "kill of a running command")
        e = raises(h.wait, CommandExitException, "command_exit", "wait after kill")
        check(e.exit_code == 137, f"exit code after kill: {e.exit_code}")
        check(h.kill() is False, "kill after it ended")
        # a background command and a streamed one at the same time, from two threads
        h = s.commands.run("sleep 1; echo late", background=True)
        got = {}
        th = threading.Thread(target=lambda: got.setdefault("bg", h.wait()))
        th.start()
        r = s.commands.run("echo quick", on_stdout=lambda d: None)
        check(r.stdout == "quick\n" and "bg" not in got, "a call made while another thread waits")
        th.join(30)
        check(got.get("bg") and got["bg"].stdout == "late\n", f"the background wait: {got}")
        # a handle from its pid
        h = s.commands.run("echo by pid", background=True)
        check(s.commands.connect(h.pid).wait().stdout == "by pid\n", "commands.connect(pid).wait()")
        raises(lambda: s.commands.send_stdin(999999, "x"), NotFoundException, "not_found", "send_stdin to no process")
        raises(lambda: s.commands.close_stdin(999999), NotFoundException, "not_found", "close_stdin of no process")
        # a foreground run with stdin=True: fed by pid from another thread while it streams
        for tag, feed, want in (("fg1", "typed\n", "typed\nfg-done\n"), ("fg2", "abc", "3\nfg-done\n")):
            got, out = {}, []
            cmd = "wc -c | tr -d ' '; echo fg-done" if tag == "fg2" else "head -n 1; echo fg-done"
            th = threading.Thread(target=lambda: got.setdefault("r", s.commands.run(cmd, stdin=True, tag=tag, on_stdout=out.append)))
            th.start()
            fg = []
            for _ in range(100):
                fg = [p for p in s.commands.list() if p.get("tag") == tag]
                if fg:
                    break
                time.sleep(0.05)
            check(fg and fg[0]["running"], f"the foreground run in list(): {s.commands.list()}")
            s.commands.send_stdin(fg[0]["pid"], feed)
            if tag == "fg2":
                s.commands.close_stdin(fg[0]["pid"])
            th.join(30)
            check(got.get("r") and got["r"].stdout == want and "".join(out) == want, f"run(stdin=True) {tag}: {got} {out}")
        check(s.commands.run("cat; echo end").stdout == "end\n", "a foreground run's stdin without stdin=True")


def t_live_output():
    with Sandbox.create(metadata={"test": "live"}) as s:
        # run(background=True) with callbacks: each line reaches them about when it is printed
        got, errs = [], []
        h = s.commands.run("for i in 1 2 3 4; do echo $i; sleep 0.5; done; echo oops >&2",
                           background=True, tag="counter", on_stdout=lambda t: got.append((time.time(), t)),
                           on_stderr=errs.append)
        check(h.tag == "counter", f"the handle's tag: {h.tag!r}")
        r = h.wait()
        check("".join(t for _, t in got) == "1\n2\n3\n4\n" and errs == ["oops\n"], f"live output: {got} {errs}")
        check(got[-1][0] - got[0][0] > 1.0, f"the chunks came at once, not as printed: {got}")
        check(r.stdout == "1\n2\n3\n4\n" and r.stderr == "oops\n" and r.exit_code == 0, f"wait's result: {r}")
        # another connection re-attaches by pid and by tag: the recent output, then the live one
        h = s.commands.run("echo early; sleep 1.5; echo late", background=True, tag="job")
        time.sleep(0.5)
        with_other = Sandbox.connect(s.sandbox_id)
        try:
            seen_pid, seen_tag = [], []
            r = with_other.commands.connect(h.pid, on_stdout=seen_pid.append).wait()
            check(seen_pid[0] == "early\n" and "".join(seen_pid) == "early\nlate\n" and r.stdout == "early\nlate\n",
                  f"connect(pid): {seen_pid} {r}")
            s.commands.run("echo one; sleep 1; echo two", background=True, tag="job2")
            r = with_other.commands.connect("job2", on_stdout=seen_tag.append).wait()
            check("".join(seen_tag) == "one\ntwo\n" and r.exit_code == 0, f"connect(tag): {seen_tag} {r}")
        finally:
            with_other._conn.close()
        # a tag in use, a bad one, an unknown one
        h = s.commands.run("sleep 300", background=True, tag="busy")
        raises(lambda: s.commands.run("true", background=True, tag="busy"), nsbox.ConflictException, "conflict", "duplicate tag")
        raises(lambda: s.commands.run("true", background=True, tag="a b"), InvalidArgumentException, "invalid_argument", "bad tag")
        raises(lambda: s.commands.connect("nosuch"), NotFoundException, "not_found", "connect to an unknown tag")
        check(h.kill() is True, "kill of the tagged sleep")
        listed = [p for p in s.commands.list() if p.get("tag") == "busy"]
        check(listed and listed[0]["pty"] is False and listed[0]["started_at"].endswith("Z"), f"process_list: {listed}")


def t_lifecycle():
    s = Sandbox.create(metadata={"test": "lifecycle", "n": "1"}, timeout=120)
    try:
        info = s.get_info()
        check(info.sandbox_id == s.sandbox_id and info.state == "running" and info.metadata["n"] == "1",
              f"get_info: {info}")
        check(info.end_at is not None and 100 < (info.end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds() <= 120,
              f"end_at: {info.end_at}")
        s.set_timeout(1000)
        left = (s.get_info().end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        check(900 < left <= 1000, f"set_timeout(1000): {left} s left")
        ids = [i.sandbox_id for i in Sandbox.list({"metadata": {"test": "lifecycle"}})]
        check(ids == [s.sandbox_id], f"list by metadata: {ids}")
        check(Sandbox.list(nsbox.SandboxQuery(metadata={"test": "other"})) == [], "list: no match")
        s.files.write("keep.txt", "kept")
        # paused by its cgroup's freezer, or without a cgroup by SIGSTOP of its processes
        s.pause()
        check(s.get_info().state == "paused", "pause")
        raises(lambda: s.commands.run("true"), nsbox.ConflictException, "conflict", "a call in a paused sandbox")
        check([i.sandbox_id for i in Sandbox.list({"state": ["paused"]})] == [s.sandbox_id], "list by state")
        s2 = Sandbox.connect(s.sandbox_id[:8])  # connect resumes, as E2B's does
        check(s2.sandbox_id == s.sandbox_id and s2.get_info().state == "running", "connect resumed it")
        check(s2.files.read("keep.txt") == "kept", "connect: the same sandbox")
        s2.close()
        check(s.kill() is True and s.kill() is False, "kill twice")
        check(Sandbox.list({"metadata": {"test": "lifecycle"}}) == [], "listed after kill")
        raises(lambda: Sandbox.connect(s.sandbox_id), NotFoundException, "not_found", "connect to a killed sandbox")
    finally:
        s.kill()
        s.close()
    # the context manager destroys it, also when the block raises
    try:
        with Sandbox.create(metadata={"test": "ctx"}) as s3:
            sid = s3.sandbox_id
            raise KeyError("boom")
    except KeyError:
        pass
    check(sid not in [i.sandbox_id for i in Sandbox.list()], "context manager left the sandbox")


def t_errors():
    with Sandbox.create(metadata={"test": "errors"}) as s:
        before = s.commands.run("ls -A /workspace").stdout
        raises(lambda: s.files.read("missing.txt"), NotFoundException, "file_not_found", "read missing")
        raises(lambda: s.files.read("/workspace"), InvalidArgumentException, "is_directory", "read a directory")
        raises(lambda: s.files.write("/etc/passwd", "x"), PermissionDeniedException, "permission_denied",
               "write /etc/passwd")
        raises(lambda: s.files.write("/workspace", "x"), InvalidArgumentException, "is_directory", "write a dir")
        raises(lambda: s.files.list("/workspace/missing"), NotFoundException, "file_not_found", "list missing")
        raises(lambda: s.files.remove("/"), InvalidArgumentException, "invalid_path", "remove /")
        raises(lambda: s.files.read(""), InvalidArgumentException, "invalid_argument", "empty path")
        raises(lambda: s.files.read("x", format="xml"), InvalidArgumentException, "invalid_argument", "bad format")
        raises(lambda: s.files.write("x", 42), InvalidArgumentException, "invalid_argument", "bad data")
        raises(lambda: s.files.list("/workspace", depth=0), InvalidArgumentException, "invalid_argument", "depth 0")
        raises(lambda: s.files.write_files([]), InvalidArgumentException, "invalid_argument", "write_files []")
        raises(lambda: s.files.write_files([{"path": "a"}]), InvalidArgumentException, "invalid_argument",
               "write_files without data")
        raises(lambda: s.commands.run("true", timeout=-1), InvalidArgumentException, "invalid_argument",
               "negative timeout")
        raises(lambda: s.run_code("cobol", "x"), InvalidArgumentException, "invalid_argument", "unknown language")
        raises(lambda: s.call("no_such_tool"), NotFoundException, "not_found", "unknown tool")
        raises(lambda: s.call("exec", {"cmd": "not an array"}), InvalidArgumentException, "invalid_argument",
               "exec with a bad cmd")
        raises(lambda: s.set_timeout("soon"), InvalidArgumentException, "invalid_argument", "set_timeout('soon')")
        raises(lambda: s.call("edit_file", path="nope.txt", old_string="a", new_string="b"), NotFoundException,
               "file_not_found", "edit a missing file")
        raises(lambda: Sandbox.create(memory="lots"), InvalidArgumentException, "invalid_argument", "bad memory")
        raises(lambda: Sandbox.create(no_such_option=1), InvalidArgumentException, "invalid_argument",
               "unknown create option")
        raises(lambda: Sandbox.create(metadata={"bad key!": "v"}), InvalidArgumentException, "invalid_argument",
               "bad label")
        raises(lambda: Sandbox.connect("zzzzzzzz"), NotFoundException, "not_found", "connect to no sandbox")
        # nothing changed, and the sandbox and daemon still serve
        check(s.commands.run("ls -A /workspace").stdout == before, "bad input changed the workspace")
        check(s.commands.run("echo alive").stdout == "alive\n", "sandbox still serves")
        check([i.sandbox_id for i in Sandbox.list()] == [s.sandbox_id], f"sandboxes: {Sandbox.list()}")
    # a socket nobody listens on: a clear error, no daemon started (autostart goes by the socket
    # of NSBOX_SOCKET; a relative one is refused)
    old = os.environ["NSBOX_SOCKET"]
    try:
        os.environ["NSBOX_SOCKET"] = "relative.sock"
        raises(lambda: Sandbox.list(), InvalidArgumentException, "invalid_argument", "relative NSBOX_SOCKET")
    finally:
        os.environ["NSBOX_SOCKET"] = old


def t_run_code():
    progs = {
        "python": "import sys\nprint(6 * 7, sys.version_info[0])",
        "javascript": "console.log(6 * 7, typeof process)",
        "c": "#include <stdio.h>\nint main(void) { printf(\"%d c\\n\", 6 * 7); return 0; }",
        "cpp": "#include <iostream>\nint main() { std::cout << 6 * 7 << \" cpp\" << std::endl; }",
    }
    want = {"python": "42 3\n", "javascript": "42 object\n", "c": "42 c\n", "cpp": "42 cpp\n"}
    if shutil.which("java"):  # the root's languages: java when the host has a JDK
        progs["java"] = ("public class Main { public static void main(String[] a) throws Exception {\n"
                         "  System.out.println(6 * 7 + \" \" + java.security.MessageDigest.getInstance(\"SHA-256\").getAlgorithm()); } }")
        want["java"] = "42 SHA-256\n"
    with Sandbox.create(metadata={"test": "run_code"}) as s:
        for lang, code in progs.items():
            r = s.run_code(lang, code)
            check((r.exit_code, r.stdout) == (0, want[lang]), f"run_code {lang}: {r}")
        r = s.run_code("python", "import sys\nsys.exit('bad')")
        check(r.exit_code == 1 and "bad" in r.stderr, f"run_code of a failing program returns: {r}")
        check(s.run_code("py", "print(1)").stdout == "1\n", "alias py")
        check(s.commands.run("ls -A /tmp").stdout == "", "run_code left files in /tmp")


def t_code_interpreter():
    """E2B's run_code (tool run_code): a live kernel, rich results, callbacks, contexts."""
    from nsbox import Context, Execution
    with Sandbox.create(metadata={"test": "code_interpreter"}) as s:
        x = s.run_code("x = 41")
        check(isinstance(x, Execution) and x.text is None and x.error is None, f"x = 41: {x}")
        x = s.run_code("x + 1")
        check(x.text == "42" and x.results[0].is_main_result and x.execution_count == 2, f"x + 1: {x}")
        out, res, errs = [], [], []
        x = s.run_code("print('hello')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n1/0",
                       on_stdout=out.append, on_result=res.append, on_error=errs.append)
        check(out == ["hello\n"] and x.logs.stdout == ["hello\n"], f"stdout callback and logs: {out} {x.logs}")
        check(len(res) == 1 and res[0].png_bytes()[:4] == b"\x89PNG" and "png" in res[0].formats(), f"chart: {res}")
        check(res[0].chart and res[0].chart["type"] == "line" and res[0].chart["elements"][0]["points"] == [[0, 1], [1, 2]],
              f"the chart's data: {res[0].chart}")
        check(x.error is not None and x.error.name == "ZeroDivisionError" and "line 5" in x.error.traceback
              and [e.name for e in errs] == ["ZeroDivisionError"], f"error: {x.error} {errs}")
        err_out = []
        x = s.run_code("import sys\nprint('warn', file=sys.stderr, flush=True)", on_stderr=err_out.append)
        check(err_out == ["warn\n"] and x.logs.stderr == ["warn\n"], f"stderr callback and logs: {err_out} {x.logs}")
        x = s.run_code("import pandas as pd\npd.DataFrame({'a': [1]})", language="python")
        check("<table" in (x.results[0].html or ""), f"DataFrame html: {x.results}")
        x = s.run_code("while True: pass", timeout=1)
        check(x.error is not None and x.error.name == "KeyboardInterrupt", f"timeout: {x.error}")
        check(s.run_code("x").text == "41", "the context after an interrupt")
        c = s.create_code_context(language="bash", cwd="/tmp")
        check(isinstance(c, Context) and c.language == "bash" and c.cwd == "/tmp", f"context: {c}")
        s.run_code("V=7", context=c)
        check(s.run_code("echo $V $PWD", context=c.id).logs.stdout == ["7 /tmp\n"], "bash context state")
        check({k.id for k in s.list_code_contexts()} >= {c.id}, "list_code_contexts")
        s.restart_code_context(c)
        check(s.run_code("echo x${V}x", context=c).logs.stdout == ["xx\n"], "a restarted context lost its state")
        s.remove_code_context(c)
        raises(lambda: s.run_code("echo", context=c), NotFoundException, "not_found", "a removed context")
        raises(lambda: s.run_code("1", language="cobol"), InvalidArgumentException, "invalid_argument", "language")
        raises(lambda: s.run_code(5), InvalidArgumentException, "invalid_argument", "code not a string")
        raises(lambda: s.remove_code_context(""), InvalidArgumentException, "invalid_argument", "empty context")
        # llm-sandbox's style is chosen by its language as first of two strings
        r = s.run_code("python", "print(6 * 7)")
        check(r.exit_code == 0 and r.stdout == "42\n", f"llm-sandbox style: {r}")
        check(s.run_code("print(6 * 7)", "python").logs.stdout == ["42\n"], "E2B style, language positional")


def t_deepagents_shapes():
    with NsboxBackend(metadata={"test": "deepagents"}) as b:
        check(isinstance(b.id, str) and len(b.id) == 32, f"id: {b.id}")
        r = b.execute("echo out; echo err >&2; exit 3")
        check((r.output, r.exit_code, r.truncated) == ("out\nerr\n", 3, False), f"execute: {r}")
        r = b.execute("sleep 5", timeout=1)
        check(r.exit_code == 124 and "timed out" in r.output, f"execute with timeout: {r}")
        small = NsboxBackend(b.sandbox, max_output=1000)
        r = small.execute("head -c 5000 /dev/zero | tr '\\0' x")
        check(r.truncated is True and r.output == "x" * 1000, f"execute truncated: {r.truncated} {len(r.output)}")
        w = b.write("/workspace/pkg/mod.py", "a = 1\nb = 2\na = 1\n")
        check(w.error is None and w.path == "/workspace/pkg/mod.py", f"write: {w}")
        ls = b.ls("/workspace")
        check(ls.error is None and [e["path"] for e in ls.entries] == ["/workspace/pkg"] and ls.entries[0]["is_dir"]
              and "modified_at" in ls.entries[0], f"ls: {ls}")
        ls = b.ls("/workspace/pkg")
        check(ls.entries == [{"path": "/workspace/pkg/mod.py", "is_dir": False, "size": 18,
                              "modified_at": ls.entries[0]["modified_at"]}], f"ls of a file: {ls}")
        check(b.ls_info("/workspace") == b.ls("/workspace").entries, "ls_info")
        r = b.read("/workspace/pkg/mod.py")
        check(r.error is None and r.file_data == {"content": "a = 1\nb = 2\na = 1\n", "encoding": "utf-8"}
              and (r.total_lines, r.start_line, r.end_line) == (3, 1, 3), f"read: {r}")
        r = b.read("/workspace/pkg/mod.py", offset=1, limit=1)
        check(r.file_data["content"] == "b = 2\n" and (r.start_line, r.end_line, r.next_offset) == (2, 2, 2),
              f"read offset 1 limit 1: {r}")
        r = b.read("/workspace/pkg/mod.py", limit=0)
        check(r.no_lines_requested and r.file_data["content"] == "" and r.start_line is None, f"read limit 0: {r}")
        r = b.edit("/workspace/pkg/mod.py", "a = 1", "a = 10", replace_all=True)
        check((r.error, r.path, r.occurrences) == (None, "/workspace/pkg/mod.py", 2), f"edit replace_all: {r}")
        r = b.edit("/workspace/pkg/mod.py", "b = 2", "b = 20")
        check(r.occurrences == 1, f"edit: {r}")
        check(b.read("/workspace/pkg/mod.py").file_data["content"] == "a = 10\nb = 20\na = 10\n", "edited content")
        g = b.grep("a = 1", "/workspace")
        check(g.error is None and g.matches == [{"path": "/workspace/pkg/mod.py", "line": 1, "text": "a = 10"},
                                                {"path": "/workspace/pkg/mod.py", "line": 3, "text": "a = 10"}],
              f"grep: {g}")
        check(b.grep("a.=", "/workspace").matches == [], "grep is literal, not a regular expression")
        check(b.grep("a = 1", "/workspace", glob="*.txt").matches == [], "grep glob filter")
        g = b.grep("a = 1", "/workspace", max_count=1)
        check(len(g.matches) == 1 and g.truncated, f"grep max_count: {g}")
        check(b.grep_raw("b = 20", "/workspace") == [{"path": "/workspace/pkg/mod.py", "line": 2, "text": "b = 20"}],
              "grep_raw")
        gl = b.glob("**/*.py", "/workspace")
        check(gl.error is None and [m["path"] for m in gl.matches] == ["/workspace/pkg/mod.py"]
              and gl.matches[0]["is_dir"] is False and gl.matches[0]["size"] == 21, f"glob: {gl}")
        # deepagents' glob contract (#5026): "*" recurses and gives files only (issue 28)
        check(b.glob_info("*", "/workspace") == [{"path": "/workspace/pkg/mod.py", "is_dir": False, "size": 21,
                                                  "modified_at": b.glob_info("*", "/workspace")[0]["modified_at"]}],
              "glob_info")
        up = b.upload_files([("/workspace/up/a.bin", b"\x00\x01\xff"), ("/workspace/up/b.txt", b"text")])
        check([(u.path, u.error) for u in up] == [("/workspace/up/a.bin", None), ("/workspace/up/b.txt", None)],
              f"upload_files: {up}")
        down = b.download_files(["/workspace/up/a.bin", "/workspace/up/b.txt"])
        check([(d.path, d.content, d.error) for d in down] == [("/workspace/up/a.bin", b"\x00\x01\xff", None),
                                                                ("/workspace/up/b.txt", b"text", None)],
              f"download_files: {down}")


# deepagents' glob contract (its #5026) over one tree: pattern, path, the files expected (relative)
GLOB_TREE = ["a.py", ".hidden.py", "README.md", "src/b.py", "src/app/c.py", "src/app/.d.py", ".cfg/e.py",
             ".github/w/ci.yml", "ci.yml", "docs/x.yml", "node.py/f.txt", "t1.txt", "t2.txt", "t10.txt"]
GLOB_TABLE = [
    ("*.py", None, ["a.py", "src/b.py", "src/app/c.py", ".cfg/e.py"]),     # no "/": any depth
    ("/*.py", None, ["a.py"]),                                             # leading "/": anchored
    ("**/*.py", None, ["a.py", "src/b.py", "src/app/c.py"]),               # ** skips dot-directories
    (".*.py", None, [".hidden.py", "src/app/.d.py"]),                      # dot-files: explicit dot
    ("src/*.py", None, ["src/b.py"]),                                      # "/": relative to the root
    ("src/**/*.py", None, ["src/b.py", "src/app/c.py"]),
    ("*.yml", None, [".github/w/ci.yml", "ci.yml", "docs/x.yml"]),         # bare: more than **/*.yml
    ("**/*.yml", None, ["ci.yml", "docs/x.yml"]),
    (".github/**/*.yml", None, [".github/w/ci.yml"]),
    ("*.py", "/workspace/g/src", ["b.py", "app/c.py"]),                    # relative to path
    ("/*.py", "/workspace/g/src", ["b.py"]),
    ("t?.txt", None, ["t1.txt", "t2.txt"]),
    ("t[!1].txt", None, ["t2.txt"]),
    ("node.py", None, []),                                                 # a directory: never
    ("*", "/workspace/g/node.py", ["f.txt"]),
    ("nothing*", None, []),
]


def t_deepagents_protocol():
    """delete, glob's contract table, grep in the working directory, read's shape per version."""
    with NsboxBackend(metadata={"test": "deepagents-protocol"}) as b:
        up = b.upload_files([(f"/workspace/g/{p}", b"x\n") for p in GLOB_TREE])
        check(all(u.error is None for u in up), f"upload: {up}")
        for pattern, path, want in GLOB_TABLE:
            root = path or "/workspace/g"
            r = b.glob(pattern, root)
            got = sorted(m["path"][len(root) + 1:] for m in (r.matches or []))
            check(r.error is None and got == sorted(want), f"glob({pattern!r}, {root!r}): {got or r.error}, expected {sorted(want)}")
            check(all(m["is_dir"] is False for m in r.matches), f"glob({pattern!r}) gave a directory")
        check(b.glob("[", "/workspace/g").matches == [], "an unclosed [ is literal")
        check(b.glob("/", "/workspace").error.startswith("Error: invalid_argument"), "glob('/')")
        # grep without a path: the working directory, quickly, not the whole root
        b.write("/tmp/elsewhere.txt", "needle-7\n")
        b.write("/workspace/here.txt", "needle-7\n")
        t = time.monotonic()
        g = b.grep("needle-7")
        check(g.error is None and [m["path"] for m in g.matches] == ["/workspace/here.txt"], f"grep no path: {g}")
        check(time.monotonic() - t < 2, f"grep without a path took {time.monotonic() - t:.1f} s")
        # delete: a file, a directory with what is in it, then errors
        d = b.delete("/workspace/here.txt")
        check((d.error, d.path) == (None, "/workspace/here.txt") and b.read("/workspace/here.txt").error, f"delete: {d}")
        d = b.delete("/workspace/g/src")
        check(d.error is None and b.ls("/workspace/g/src").error.startswith("Error: file_not_found"), f"delete dir: {d}")
        check(b.glob("*.py", "/workspace/g").matches[0]["path"] == "/workspace/g/.cfg/e.py", "the rest is still there")
        check(b.delete("/workspace/nope").error.startswith("Error: file_not_found: "), "delete missing")
        check(b.delete("relative").error.startswith("Error: invalid_path: "), "delete relative")
        check(b.delete("/").error.startswith("Error: invalid_path: "), "delete /")
        check(b.delete("/etc/passwd").error.startswith("Error: permission_denied: "), "delete /etc/passwd")
        import asyncio
        b.write("/workspace/async.txt", "a")
        check(asyncio.run(b.adelete("/workspace/async.txt")).path == "/workspace/async.txt", "adelete")
    # read's shape follows the deepagents installed: its classes when it has ReadResult, the
    # numbered text (a str) before its 2026 protocol; stand-ins of each, in a fresh interpreter
    import subprocess
    import tempfile
    prog = """
import nsbox.deepagents as d
from nsbox import Sandbox
with Sandbox.create(metadata={"test": "deepagents-read"}) as s:
    b = d.NsboxBackend(s)
    b.write("/workspace/r.txt", "one\\ntwo\\nthree\\n")
    b.write("/workspace/empty.txt", "")
    def v(x):
        return x if isinstance(x, str) else ["ReadResult", x.error and x.error[:23], (x.file_data or {}).get("content"), x.start_line]
    print(repr((d.LEGACY_READ, type(b.read("/workspace/r.txt")).__module__, v(b.read("/workspace/r.txt", 1, 1)),
                v(b.read("/workspace/empty.txt")), v(b.read("/workspace/missing"))[:23], isinstance(b, d._Base))))
"""
    with tempfile.TemporaryDirectory() as tmp:
        for version, body in (("old", "class SandboxBackendProtocol: pass\n"),
                              ("new", "from dataclasses import dataclass\nclass SandboxBackendProtocol: pass\n"
                                      "@dataclass\nclass ReadResult:\n    error: object = None\n"
                                      "    file_data: object = None\n    total_lines: object = None\n"
                                      "    start_line: object = None\n    end_line: object = None\n"
                                      "    next_offset: object = None\n    no_lines_requested: bool = False\n")):
            pkg = os.path.join(tmp, version, "deepagents", "backends")
            os.makedirs(pkg)
            for f in ("../__init__.py", "__init__.py"):
                open(os.path.join(pkg, f), "w").close()
            with open(os.path.join(pkg, "protocol.py"), "w") as f:
                f.write(body)
            env = dict(os.environ, PYTHONPATH=os.path.join(tmp, version) + os.pathsep + os.environ["PYTHONPATH"])
            out = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=60)
            check(out.returncode == 0, f"read with the {version} protocol: {out.stderr[-800:]}")
            got = eval(out.stdout)  # noqa: S307 - our own program's repr
            if version == "old":
                check(got == (True, "builtins", "     2\ttwo", "System reminder: File exists but has empty contents",
                              "Error: file_not_found: ", True), f"read, pre-2026 protocol: {got}")
            else:
                check(got == (False, "deepagents.backends.protocol", ["ReadResult", None, "two\n", 2],
                              ["ReadResult", None, "", None], ["ReadResult", "Error: file_not_found: ", None, None], True),
                      f"read, 2026 protocol: {got}")

def t_deepagents_errors():
    with NsboxBackend(metadata={"test": "deepagents-errors"}) as b:
        b.write("/workspace/f.txt", "x\n")
        b.execute("mkdir -p /workspace/locked && echo s > /workspace/locked/secret && chmod 000 /workspace/locked/secret")
        up = b.upload_files([("/workspace/ok.txt", b"ok"), ("relative.txt", b"x"), ("/usr/bin/new", b"x"),
                             ("/workspace", b"x"), ("/workspace/f.txt/under", b"x")])
        check([u.error for u in up] == [None, "invalid_path", "permission_denied", "is_directory", "invalid_path"],
              f"upload_files errors: {[(u.path, u.error) for u in up]}")
        down = b.download_files(["/workspace/missing", "/workspace", "/workspace/locked/secret", "rel", "/workspace/ok.txt"])
        check([(d.error, d.content) for d in down] == [("file_not_found", None), ("is_directory", None),
                                                        ("permission_denied", None), ("invalid_path", None),
                                                        (None, b"ok")],
              f"download_files errors: {[(d.path, d.error) for d in down]}")
        check(set(FILE_ERRORS) == {"file_not_found", "permission_denied", "is_directory", "invalid_path"}, "FILE_ERRORS")
        for name, r in [("read missing", b.read("/workspace/missing")), ("ls missing", b.ls("/workspace/missing")),
                        ("edit missing", b.edit("/workspace/missing", "a", "b"))]:
            check(r.error and r.error.startswith("Error: file_not_found: "), f"{name}: {r}")
        check(b.read("/workspace").error.startswith("Error: is_directory: "), "read a directory")
        check(b.read("relative").error.startswith("Error: invalid_path: "), "read a relative path")
        check(b.write("/etc/x", "x").error.startswith("Error: permission_denied: "), "write /etc")
        check(b.read("/workspace/locked/secret").error.startswith("Error: permission_denied: "), "read mode 000")
        check(b.write("/workspace", "x").error.startswith("Error: is_directory: "), "write a directory")
        r = b.edit("/workspace/f.txt", "zzz", "y")
        check(r.error == "Error: String not found in file: 'zzz'" and r.occurrences is None, f"edit not found: {r}")
        b.write("/workspace/g.txt", "a a\n")
        r = b.edit("/workspace/g.txt", "a", "b")
        check(r.error and "multiple times" in r.error, f"edit ambiguous: {r}")
        check(b.read("/workspace/g.txt").file_data["content"] == "a a\n", "failed edit changed the file")
        r = b.read("/workspace/f.txt", offset=10)
        check(r.error and "past the end" in r.error, f"read past the end: {r}")
        check(b.grep("x", "/workspace/missing").error.startswith("Error: file_not_found: "), "grep missing")
        check(b.grep("", "/workspace").error.startswith("Error: invalid_argument"), "grep empty pattern")
        check(b.glob("*", "relative").error.startswith("Error: invalid_path: "), "glob relative")
        r = b.execute("")
        check(r.exit_code == 1 and r.output.startswith("Error: invalid_argument"), f"execute empty: {r}")
        check(b.execute("echo still fine").output == "still fine\n", "the sandbox still serves")


def t_watch():
    from nsbox import FilesystemEventType as T
    with Sandbox.create(metadata={"test": "watch"}) as s:
        s.files.make_dir("w/old")
        got, lock = [], threading.Lock()

        def on_event(ev):
            with lock:
                got.append(ev)

        def wait_for(pred, what):
            for _ in range(100):
                with lock:
                    if any(pred(e) for e in got):
                        return
                time.sleep(0.1)
            sys.exit(f"check failed: {what}: {got}")

        h = s.files.watch_dir("w", on_event, recursive=True)
        s.commands.run("cd w && echo hi > a.txt && chmod 600 a.txt && mv a.txt b.txt && rm b.txt")
        wait_for(lambda e: e.type == T.REMOVE and e.name == "b.txt", "remove event")
        with lock:
            seen = [(e.type, e.name) for e in got]
        check(seen == [(T.CREATE, "a.txt"), (T.WRITE, "a.txt"), (T.CHMOD, "a.txt"), (T.RENAME, "a.txt"),
                       (T.CREATE, "b.txt"), (T.REMOVE, "b.txt")], f"events in order: {seen}")
        check(got[0].path == "w/a.txt" and got[0].entry_type == "file", f"first event: {got[0]}")
        s.commands.run("mkdir -p w/sub && echo x > w/sub/f && echo y > w/old/g")
        wait_for(lambda e: e.name == "sub/f", "recursive: a new subdirectory's file")
        wait_for(lambda e: e.name == "old/g" and e.type == T.WRITE, "recursive: an old subdirectory's file")
        h.stop()
        h.stop()  # twice is fine
        n = len(got)
        s.commands.run("touch w/after")
        time.sleep(0.3)
        check(len(got) == n, f"events after stop(): {got[n:]}")
        # without on_event: kept for get_new_events
        h2 = s.files.watch_dir("/workspace/w")
        s.files.write("w/c.txt", "c")
        evs = []
        for _ in range(100):
            evs += h2.get_new_events()
            if any(e.name == "c.txt" for e in evs):
                break
            time.sleep(0.1)
        # write_file writes a temporary file and renames it into place
        check(evs and (evs[-1].name, evs[-1].type) == ("c.txt", T.CREATE), f"get_new_events: {evs}")
        h2.stop()
        raises(lambda: s.files.watch_dir("nope", on_event), NotFoundException, "file_not_found", "missing path")
        raises(lambda: s.files.watch_dir("w/c.txt", on_event), SandboxException, "not_a_directory", "a file")


def t_pty():
    from nsbox import PtySize
    with Sandbox.create(metadata={"test": "pty"}) as s:
        got, lock = bytearray(), threading.Lock()

        def on_data(b):
            check(isinstance(b, bytes), f"on_data gets bytes: {b!r}")
            with lock:
                got.extend(b)

        def wait_for(needle, what):
            for _ in range(100):
                with lock:
                    if needle in got:
                        return
                time.sleep(0.1)
            sys.exit(f"check failed: {what}: {bytes(got)[-800:]!r}")

        h = s.pty.create(cols=100, rows=30, on_data=on_data, cmd=["bash", "--norc", "-i"], envs={"PS1": "$ "})
        check(any(p["pid"] == h.pid and p["pty"] for p in s.commands.list()), "process_list shows pty")
        h.send_input(b"tty; set -- $(stty size); echo sz-$1x$2\n")
        wait_for(b"sz-30x100", "stty size as created")
        check(b"/dev/pts/" in got, f"tty: {bytes(got)!r}")
        h.resize(120, 40)
        h.send_input("set -- $(stty size); echo sz-$1x$2\n")
        wait_for(b"sz-40x120", "stty size after resize")
        h.send_input(b"sleep 100\n")
        time.sleep(0.5)
        h.send_input(b"\x03")
        h.send_input(b"echo after-$((1+1))\n")
        wait_for(b"after-2", "the shell after Ctrl-C")
        h.send_input(b"exit 0\n")
        r = h.wait(timeout=10)
        check(r.exit_code == 0, f"exit status: {r}")
        # E2B's shapes: a PtySize, and kill() of one still running
        h2 = s.pty.create(PtySize(rows=10, cols=20), on_data=None, cmd=["sleep", "100"])
        s.pty.resize(h2.pid, PtySize(rows=11, cols=21))
        check(h2.kill() is True, "kill of a running pty command")
        raises(lambda: h2.wait(timeout=10), CommandExitException, "command_exit", "wait after kill")
        raises(lambda: s.pty.create(cols=0), InvalidArgumentException, "invalid_argument", "cols 0")
        bg = s.commands.run("sleep 100", background=True)
        raises(lambda: s.pty.resize(bg.pid, PtySize(rows=5, cols=5)), InvalidArgumentException, "invalid_argument",
               "resize of a command without a pty")
        bg.kill()
        # cwd and envs reach the command
        seen = []
        h3 = s.pty.create(on_data=seen.append, cwd="/tmp", envs={"GREETING": "hi-pty"}, cmd=["sh", "-c", "pwd; echo $GREETING"])
        r = h3.wait(timeout=30)
        text = b"".join(seen).decode().replace("\r", "")
        check(r.exit_code == 0 and text == "/tmp\nhi-pty\n", f"pty.create cwd and envs: {text!r} {r}")



def t_e2b():
    """nsbox.e2b.Sandbox as E2B's SDK shapes it (issue 28)."""
    from nsbox import e2b
    # the template first, positional or by name; E2B's connection arguments are accepted
    for make in (lambda: e2b.Sandbox("base", api_key="e2b_x", domain="e2b.dev", request_timeout=5),
                 lambda: e2b.Sandbox.create("base", debug=False, secure=True, allow_internet_access=True),
                 lambda: e2b.Sandbox.create(template="base", timeout=60, envs={"E": "e"}, metadata={"m": "1"})):
        with make() as s:
            check(isinstance(s, nsbox.Sandbox) and s.commands.run("echo ok").stdout == "ok\n", f"create: {s}")
            check(s.get_info().template_id is None, f"'base' is nsbox's default policy: {s.get_info()}")
    raises(lambda: e2b.Sandbox("no-such-template"), NotFoundException, "not_found", "an unknown template")
    raises(lambda: e2b.Sandbox(42), InvalidArgumentException, "invalid_argument", "a template not a string")
    with e2b.Sandbox.create(metadata={"test": "e2b"}) as s:
        # E2B's exception text, with stderr; still nsbox's class and attributes
        try:
            s.commands.run("echo partial; echo 'went wrong' >&2; exit 3")
            sys.exit("check failed: exit 3 raised nothing")
        except e2b.CommandExitException as e:
            check(str(e) == "Command exited with code 3 and error:\nwent wrong\n", f"str: {str(e)!r}")
            check(f"Error running commands: {e}".endswith("went wrong\n"), "the tutorial's message")
            check((e.exit_code, e.stdout, e.stderr) == (3, "partial\n", "went wrong\n") and isinstance(
                e, nsbox.CommandExitException) and e.code == "command_exit", f"attributes: {e.exit_code} {e.stdout!r}")
        h = s.commands.run("exit 4", background=True)
        try:
            h.wait()
            sys.exit("check failed: wait of exit 4 raised nothing")
        except e2b.CommandExitException as e:
            check(str(e) == "Command exited with code 4 and error:\n", f"str after wait: {str(e)!r}")
        # NUL bytes come back as they were, on both streams, with and without callbacks
        r = s.commands.run("printf 'a\\000b\\n'; printf 'e\\000\\303\\251' >&2")
        check((r.stdout, r.stderr) == ("a\x00b\n", "e\x00\u00e9"), f"NUL bytes: {r.stdout!r} {r.stderr!r}")
        got = []
        r = s.commands.run("printf '\\000x\\000'", on_stdout=got.append)
        check(r.stdout == "\x00x\x00" and "".join(got) == "\x00x\x00", f"NUL streamed: {r.stdout!r} {got}")
        r = s.commands.run("head -c 3000000 /dev/zero")
        check(len(r.stdout) == 1 << 20 and r.raw["truncated"] is True, f"output kept: {len(r.stdout)} {r.raw}")
    # E2B's user=: the sandbox's one user (its info's), "user" for a sandbox not root; another is
    # refused as E2B's SDKs refuse it, before anything runs
    with e2b.Sandbox.create() as s:
        check(s.commands.run("whoami", user="user").stdout == "user\n", "user named")
        for what, f in (("commands.run", lambda: s.commands.run("touch /tmp/ran", user="root")),
                        ("files.write", lambda: s.files.write("/tmp/w", "x", user="root")),
                        ("files.read", lambda: s.files.read("/etc/hostname", user="root")),
                        ("pty.create", lambda: s.pty.create(user="root")),
                        ("files.list", lambda: s.files.list("/tmp", user="nobody"))):
            e = raises(f, e2b.AuthenticationException, "permission_denied", what)
            check("one user is 'user'" in str(e), f"{what}: {e}")
        check(not s.files.exists("/tmp/ran") and not s.files.exists("/tmp/w"), "a refused call ran")
    with e2b.Sandbox.create(policy="root") as s:
        check(s.commands.run("id -u", user="root").stdout == "0\n", "root named in a root sandbox")
        raises(lambda: s.commands.run("id -u", user="user"), e2b.AuthenticationException, "permission_denied", "user in root's")
    # nsbox's own Sandbox keeps its documented text, and gets NUL bytes too
    with Sandbox.create(metadata={"test": "e2b-own"}) as s:
        e = raises(lambda: s.commands.run("echo x >&2; exit 3"), CommandExitException, "command_exit", "own")
        check(str(e) == "command exited with status 3" and not isinstance(e, e2b.CommandExitException), f"own: {e}")
        check(s.commands.run("printf '\\000'").stdout == "\x00", "NUL through nsbox.Sandbox")


def t_e2b_lifecycle():
    """E2B's pause (class and instance), a paused sandbox outliving its timeout, kill, stop,
    get_or_create with 8 threads at once."""
    from nsbox import e2b
    now = lambda: datetime.datetime.now(datetime.timezone.utc)  # noqa: E731
    s = e2b.Sandbox.create(timeout=2, metadata={"test": "e2b-pause"})
    try:
        s.files.write("keep.txt", "kept")
        check(e2b.Sandbox.pause(s.sandbox_id) == s.sandbox_id, "Sandbox.pause(id) returns the id")
        check(e2b.Sandbox.get_info(s.sandbox_id).state == "paused", "paused by the class method")
        time.sleep(3)  # past its timeout: E2B keeps a paused sandbox
        info = e2b.Sandbox.get_info(s.sandbox_id)
        check(info.state == "paused" and info.end_at is None, f"paused past its timeout: {info}")
        s2 = e2b.Sandbox.connect(s.sandbox_id)  # resumed, with E2B's 300 s to live
        left = (s2.get_info().end_at - now()).total_seconds()
        check(s2.get_info().state == "running" and 290 < left <= 300, f"connect resumed it: {s2.get_info()} {left}")
        check(s2.files.read("keep.txt") == "kept", "the same sandbox after resume")
        check(s2.beta_pause() == s.sandbox_id and s2.get_info().state == "paused", "beta_pause on the instance")
        s2.resume(timeout=60)
        left = (s2.get_info().end_at - now()).total_seconds()
        check(s2.get_info().state == "running" and 50 < left <= 60, f"resume(timeout=60): {left}")
        e2b.Sandbox.set_timeout(s.sandbox_id, 100)
        check(90 < (e2b.Sandbox.get_info(s.sandbox_id).end_at - now()).total_seconds() <= 100, "Sandbox.set_timeout")
        s2.close()
        check(e2b.Sandbox.kill(s.sandbox_id) is True and e2b.Sandbox.kill(s.sandbox_id) is False, "Sandbox.kill(id)")
        raises(lambda: e2b.Sandbox.pause(s.sandbox_id), NotFoundException, "not_found", "pause of a killed one")
        raises(lambda: e2b.Sandbox.kill(""), InvalidArgumentException, "invalid_argument", "kill('')")
    finally:
        s.kill()
        s.close()
    # nsbox's own Sandbox: a paused sandbox still ends at its timeout (its documented behaviour)
    own = Sandbox.create(timeout=2, metadata={"test": "own-pause"})
    own.pause()
    time.sleep(3)
    check(Sandbox.list({"metadata": {"test": "own-pause"}}) == [], "nsbox.Sandbox paused past its timeout")
    own.close()
    # auto_pause: paused at its timeout instead of killed
    a = e2b.Sandbox.beta_create(timeout=1, auto_pause=True, metadata={"test": "auto-pause"})
    try:
        time.sleep(2.5)
        check(e2b.Sandbox.get_info(a.sandbox_id).state == "paused", "auto_pause paused it at its timeout")
    finally:
        a.kill()
        a.close()
    # E2B's filesystem-only pause: pause(keep_memory=False) and lifecycle keep_memory False kill
    # the processes and keep the files; connect reboots it
    import subprocess
    mark = f"fs-pause-{os.getpid()}"
    alive = lambda tag: subprocess.run(["pgrep", "-f", f"{mark}-{tag}"], capture_output=True).returncode == 0  # noqa: E731
    f = e2b.Sandbox.create(metadata={"test": "fs-pause"})
    try:
        f.files.write("fs.txt", "files only")
        f.commands.run(f"sleep 600; : {mark}-a", background=True)
        check(wait_for(lambda: alive("a"), 5), "the background command runs")
        raises(lambda: f.pause(keep_memory="no"), InvalidArgumentException, "invalid_argument", "pause(keep_memory='no')")
        check(alive("a") and e2b.Sandbox.get_info(f.sandbox_id).state == "running", "a bad pause changed nothing")
        check(f.pause(keep_memory=False) == f.sandbox_id, "pause(keep_memory=False)")
        check(wait_for(lambda: not alive("a"), 5), "its processes are killed")
        check(e2b.Sandbox.get_info(f.sandbox_id).state == "paused", "paused")
        f2 = e2b.Sandbox.connect(f.sandbox_id)
        check(f2.files.read("fs.txt") == "files only" and not alive("a"), "connect: the files, not the processes")
        f2.close()
    finally:
        f.kill()
        f.close()
    for bad in ({"on_timeout": "sleep"}, {"on_timeout": {"action": "kill", "keep_memory": False}},
                {"on_timeout": {"action": "pause", "keep_memory": "no"}}, {"on_timeout": "pause", "x": 1}, "pause"):
        raises(lambda: e2b.Sandbox.create(lifecycle=bad), InvalidArgumentException, "invalid_argument", f"lifecycle={bad!r}")
    check(e2b.Sandbox.list({"metadata": {"test": "fs-lifecycle"}}) == [], "no sandbox made by the bad lifecycles")
    g = e2b.Sandbox.create(timeout=1, metadata={"test": "fs-lifecycle"}, lifecycle={"on_timeout": {"action": "pause", "keep_memory": False}})
    try:
        g.commands.run(f"sleep 600; : {mark}-b", background=True)
        check(wait_for(lambda: e2b.Sandbox.get_info(g.sandbox_id).state == "paused", 10), "paused at its timeout")
        check(wait_for(lambda: not alive("b"), 5), "its processes killed at its timeout")
        k = e2b.Sandbox.create(timeout=1, metadata={"test": "fs-lifecycle"}, lifecycle={"on_timeout": "pause"})
        k.commands.run(f"sleep 600; : {mark}-c", background=True)
        check(wait_for(lambda: e2b.Sandbox.get_info(k.sandbox_id).state == "paused", 10), "lifecycle on_timeout pause")
        check(alive("c"), "a pause that keeps memory keeps the processes")
        k.kill()
        k.close()
    finally:
        g.kill()
        g.close()
    # stop() is kill()
    st = e2b.Sandbox.create(metadata={"test": "stop"})
    check(st.stop() is True and st.stop() is False, "stop twice")
    st.close()
    # get_or_create: 8 threads at once get one sandbox, made by one of them
    got, errs = [], []

    def one():
        try:
            got.append(e2b.Sandbox.get_or_create(metadata={"thread_id": "t-42"}, timeout=60))
        except Exception as e:  # noqa: BLE001
            errs.append(e)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        check(not errs and len(got) == 8, f"get_or_create errors: {errs}")
        ids = {x.sandbox_id for x in got}
        check(len(ids) == 1 and sum(x.created for x in got) == 1, f"8 threads: {ids} {[x.created for x in got]}")
        check([i.sandbox_id for i in e2b.Sandbox.list({"metadata": {"thread_id": "t-42"}})] == list(ids), "listed once")
        e2b.Sandbox.pause(got[0].sandbox_id)
        again = e2b.Sandbox.get_or_create(metadata={"thread_id": "t-42"})
        check(again.sandbox_id in ids and again.created is False and again.get_info().state == "running",
              f"get_or_create of a paused one resumes it: {again.get_info()}")
        again.close()
        raises(lambda: e2b.Sandbox.get_or_create(metadata={}), InvalidArgumentException, "invalid_argument",
               "get_or_create without metadata")
    finally:
        for x in got:
            x.kill()
            x.close()


def t_llm_sandbox():
    """nsbox.llm_sandbox.SandboxSession as llm-sandbox's users see it (issue 28)."""
    import tempfile
    from nsbox.llm_sandbox import ConsoleOutput, LibraryInstallationError, SandboxSession
    progs = {
        "python": ("import os\nprint(6 * 7, os.getcwd())", "42 /sandbox\n", "python3"),
        "javascript": ("console.log(6 * 7, process.cwd())", "42 /sandbox\n", "node"),
        "bash": ("echo $((6 * 7)) $PWD", "42 /sandbox\n", "bash"),
        "cpp": ("#include <iostream>\nint main() { std::cout << 6 * 7 << std::endl; }", "42\n", "g++"),
        "java": ("class Main { public static void main(String[] a) { System.out.println(6 * 7); } }", "42\n", "java"),
        "go": ("package main\nimport \"fmt\"\nfunc main() { fmt.Println(6 * 7) }", "42\n", "go"),
        "ruby": ("puts 6 * 7", "42\n", "ruby"),
    }
    for lang, (code, want, cmd) in progs.items():
        with SandboxSession(lang=lang, keep_template=True, verbose=False, image="ignored") as s:
            r = s.run(code)
            check(isinstance(r, ConsoleOutput), f"{lang}: {r!r}")
            if shutil.which(cmd):
                check((r.exit_code, r.stdout, r.success()) == (0, want, True), f"run {lang}: {r}")
            else:  # never an empty result: 127, and stderr naming the command
                check(r.exit_code == 127 and f"command '{cmd}'" in r.stderr and not r.success(),
                      f"run {lang} without {cmd}: {r}")
    with SandboxSession(lang="python") as s:
        sid = s.sandbox.sandbox_id
        # files written to the workdir stay for the next run; the code's own file does not
        check(s.run("open('state.txt', 'w').write('kept')").exit_code == 0, "write state")
        r = s.run("import os\nprint(open('state.txt').read(), sorted(os.listdir('.')))")
        check(r.stdout == "kept ['state.txt']\n", f"state across runs: {r}")
        r = s.execute_command("ls -ld /sandbox | cut -c1-10; cat state.txt; printf '\\000'")
        check((r.exit_code, r.stdout) == (0, "drwxr-xr-x\nkept\x00"), f"execute_command: {r}")
        r = s.run("import sys\nprint('out')\nsys.exit('bad thing')")
        check((r.exit_code, r.stdout, r.stderr) == (1, "out\n", "bad thing\n"), f"a failing run: {r}")
        r = s.execute_command("exit 3")
        check(r.exit_code == 3, f"execute_command exit 3: {r}")
        check(s.execute_command("pwd", workdir="/tmp").stdout == "/tmp\n", "execute_command workdir=")
        # copies both ways, files and directories
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(f"{tmp}/in/sub")
            with open(f"{tmp}/in/a.bin", "wb") as f:
                f.write(bytes(range(256)))
            with open(f"{tmp}/in/sub/b.txt", "w") as f:
                f.write("b")
            s.copy_to_runtime(f"{tmp}/in/a.bin", "/sandbox/data/a.bin")
            s.copy_to_runtime(f"{tmp}/in", "tree")
            r = s.execute_command("sha256sum data/a.bin tree/a.bin | cut -c1-8 | uniq | wc -l; cat tree/sub/b.txt")
            check(r.stdout == "1\nb", f"copy_to_runtime: {r}")
            s.run("import os\nos.makedirs('out/deep')\nopen('out/deep/r.txt', 'w').write('result')")
            s.copy_from_runtime("/sandbox/out/deep/r.txt", f"{tmp}/got/r.txt")
            s.copy_from_runtime("out", f"{tmp}/outdir")
            check(open(f"{tmp}/got/r.txt").read() == "result" and open(f"{tmp}/outdir/deep/r.txt").read() == "result",
                  "copy_from_runtime")
            raises(lambda: s.copy_to_runtime(f"{tmp}/nope", "x"), SandboxException, "file_not_found", "copy a missing file")
            raises(lambda: s.copy_from_runtime("/sandbox/nope", f"{tmp}/x"), NotFoundException, "file_not_found",
                   "copy back a missing file")
        # libraries: a wheel built here (no network needed), kept for the session's later runs
        r = s.execute_command(
            "mkdir -p /tmp/w/pkg/hello_nsbox && cd /tmp/w/pkg && echo 'def hi(): return 42' > hello_nsbox/__init__.py"
            " && printf '[project]\\nname = \"hello-nsbox\"\\nversion = \"0.1\"\\n' > pyproject.toml"
            " && python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/w/dist . 2>&1", timeout=120)
        if r.exit_code == 0:
            whl = s.execute_command("ls /tmp/w/dist/*.whl").stdout.strip()
            r = s.run("import hello_nsbox\nprint(hello_nsbox.hi())", libraries=[whl])
            check((r.exit_code, r.stdout) == (0, "42\n"), f"run with a library: {r}")
            check(s.run("import hello_nsbox\nprint(hello_nsbox.hi())").stdout == "42\n", "the library stays")
        else:
            print(f"no wheel could be built here (skipped): {r.stdout[-300:]}", file=sys.stderr)
        # from an index without a network: one clear line
        e = raises(lambda: s.run("print(1)", libraries=["no-such-package-nsbox-x"]), LibraryInstallationError,
                   "library_installation", "pip without a network")
        check("no-such-package-nsbox-x" in str(e), f"the library named: {e}")
        raises(lambda: s.run("print(1)", libraries="numpy"), InvalidArgumentException, "invalid_argument", "libraries str")
        raises(lambda: s.run(5), InvalidArgumentException, "invalid_argument", "code not a string")
    check(sid not in [i.sandbox_id for i in Sandbox.list()], "the session's sandbox outlived close()")
    with SandboxSession(lang="javascript") as s:
        # npm: a package packed here, installed into the workdir
        r = s.execute_command("mkdir -p /tmp/j/p && cd /tmp/j/p && echo 'module.exports = () => 42' > index.js"
                              " && echo '{\"name\": \"hello-nsbox\", \"version\": \"1.0.0\"}' > package.json"
                              " && npm pack --silent --pack-destination /tmp/j 2>&1", timeout=120)
        if r.exit_code == 0 and shutil.which("npm"):
            r = s.run("console.log(require('hello-nsbox')())", libraries=["/tmp/j/hello-nsbox-1.0.0.tgz"], timeout=120)
            check((r.exit_code, r.stdout) == (0, "42\n"), f"javascript with a library: {r}")
        else:
            print(f"npm pack failed (skipped): {r}", file=sys.stderr)
    s = SandboxSession(lang="bash")
    raises(lambda: s.run("true"), SandboxException, "conflict", "run before open")
    s.open()
    try:
        raises(lambda: s.run("true", libraries=["x"]), LibraryInstallationError, "invalid_argument", "bash libraries")
    finally:
        s.close()
        s.close()  # twice is fine
    raises(lambda: SandboxSession(lang="cobol"), InvalidArgumentException, "invalid_argument", "unknown language")
    raises(lambda: SandboxSession(workdir="rel"), InvalidArgumentException, "invalid_argument", "relative workdir")

def t_knowlyr():
    """knowlyr AgentSandbox's flow (issue 28): its tool names, snapshot and reset, and a
    trajectory replayed with its success semantics."""
    with Sandbox.create(metadata={"test": "knowlyr"}) as s:
        s.call("file_write", {"path": "app.py", "content": "a = 1\nb = 2\n"})
        check(s.call("file_read", path="app.py", start_line=2, end_line=2)["content"] == "b = 2\n", "file_read")
        r = s.call("shell", command="cat app.py | wc -l", timeout=10)
        check((r["stdout"], r["exit_code"]) == ("2\n", 0), f"shell: {r}")
        # snapshot, change, reset to it, reset to the creation state
        name = f"kn-{os.getpid()}"
        check(s.snapshot(name) == name, "snapshot returns its name")
        try:
            check(any(x["name"] == name for x in s.list_snapshots()), "list_snapshots has it")
            s.call("file_write", {"path": "app.py", "content": "changed\n"})
            s.call("file_write", {"path": "new.txt", "content": "new\n"})
            s.reset(name)
            check(s.files.read("app.py") == "a = 1\nb = 2\n" and not s.files.exists("new.txt"), "reset to the snapshot")
            check(s.commands.run("echo alive").stdout == "alive\n", "commands after reset")
            s.reset()
            check(not s.files.exists("app.py"), "reset to the creation state")
            raises(lambda: s.reset("no-such-snapshot"), NotFoundException, "not_found", "reset to an unknown snapshot")
        finally:
            s.delete_snapshot(name)
        check(all(x["name"] != name for x in s.list_snapshots()), "delete_snapshot")
        # a trajectory: a failed command (127) is no success although its output is the expected one
        traj = {"steps": [
            {"tool_name": "file_write", "params": {"path": "t.txt", "content": "hi\n"}},
            {"tool_name": "file_read", "params": {"path": "t.txt", "start_line": 1}, "expected_output": "hi\n"},
            {"tool_name": "shell", "params": {"command": "no-such-program 2> /dev/null"}, "expected_output": ""},
            {"tool_name": "shell", "params": {"command": "echo other"}, "expected_output": "hi\n"},
            {"tool_name": "search", "params": {"pattern": "hi", "file_pattern": "*.txt"},
             "expected_output": "/workspace/t.txt:1:hi\n"},
        ]}
        rep = s.replay(traj)
        check([(r["success"], r["match"]) for r in rep["results"]]
              == [(True, True), (True, True), (False, False), (True, False), (True, True)], f"replay: {rep['results']}")
        check((rep["matched"], rep["mismatched"], rep["succeeded"], rep["first_divergent_step"]) == (3, 2, 4, 3), f"replay: {rep}")
        check(rep["results"][2]["why"] == "failed: exit_code 127", f"why: {rep['results'][2]}")
        path = f"/tmp/nsbox-kn-{os.getpid()}.json"
        try:
            with open(path, "w") as f:
                json.dump({"steps": traj["steps"][:2]}, f)
            check(s.replay(path)["mismatched"] == 0, "replay of a file")
        finally:
            os.unlink(path)
        for bad in ({"steps": []}, {"steps": [{"tool_name": "shell"}]}, {"steps": [{"tool_name": "x", "params": {}, "y": 1}]},
                    "{not json", {"steps": [{"tool_name": "shell", "params": {}, "expected_output": 1}]}):
            raises(lambda: s.replay(bad), InvalidArgumentException, "invalid_argument", f"replay of {bad!r}")


def t_limits_warning():
    """A limit that cannot hold: refused when asked for plainly, a LimitsWarning with
    limits="best-effort"; none where it holds (issue 25)."""
    import warnings
    from nsbox import LimitsWarning
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        s = Sandbox.create(memory="64M", limits="best-effort")
    try:
        held = s._info["limits_enforced"].get("memory") == 64 << 20
        ours = [w for w in seen if issubclass(w.category, LimitsWarning)]
        if held:
            check(not ours and "warnings" not in s._info, f"a warning for a limit that holds: {[str(w.message) for w in ours]}")
        else:
            check(len(ours) == 1 and str(ours[0].message).startswith("limits not enforced: memory"),
                  f"LimitsWarning: {[str(w.message) for w in seen]}")
            check(s.commands.run("echo runs").stdout == "runs\n", "the best-effort sandbox runs")
    finally:
        s.kill()
    if not held:
        e = raises(lambda: Sandbox.create(memory="64M"), InvalidArgumentException, "invalid_argument", "memory that cannot hold")
        check("--limits best-effort" in str(e), f"the refusal names the way out: {e}")
    raises(lambda: Sandbox.create(limits="sometimes"), InvalidArgumentException, "invalid_argument", "bad limits")
    print("ok")


CHECKS = {name[2:]: fn for name, fn in globals().items() if name.startswith("t_")}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CHECKS:
        sys.exit(f"usage: client_tests.py {'|'.join(CHECKS)}")
    try:
        CHECKS[sys.argv[1]]()
    except SandboxException as e:
        sys.exit(f"unexpected {type(e).__name__} ({e.code}): {e}")
    print("ok")
