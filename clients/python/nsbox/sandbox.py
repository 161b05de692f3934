"""A sandbox of nsboxd, shaped like E2B's ``Sandbox`` (files, commands, the code interpreter's
run_code and contexts) plus llm-sandbox's run_code.

Each Sandbox object has a connection of its own to nsboxd; its methods are plain JSON-RPC calls
of nsbox-protocol(7), named in each docstring.
"""

import base64
import codecs
import fcntl
import os
import datetime
import posixpath
import secrets
import stat as statmod
import threading
import warnings
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Union

from . import trajectory as _trajectory
from ._rpc import Connection
from .code import CellEvents, Context, Execution, ExecutionError, Result, check_language, context_id
from .exceptions import (AuthenticationException, CommandExitException, LimitsWarning, InvalidArgumentException,
                         NotFoundException, SandboxException, TimeoutException)

# Bytes per read_file/write_file call: under the protocol's 16 MiB per call, and base64 of it
# stays well under the 32 MiB line limit.
CHUNK = 8 << 20
# Bytes of each output stream commands.run keeps, as exec's default max_output.
OUTPUT_MAX = 1 << 20


def _warn_limits(info: Dict[str, Any]) -> None:
    """A created sandbox's limits that do not hold, as nsboxd says: a LimitsWarning each."""
    for w in info.get("warnings") or []:
        warnings.warn(w, LimitsWarning, stacklevel=3)


def _ts(seconds: Optional[float]) -> Optional[datetime.datetime]:
    return None if seconds is None else datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


def _check_str(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentException(f"'{name}' must be a non-empty string, not {value!r}", "invalid_argument")


# ---- results ----------------------------------------------------------------------------------

@dataclass
class CommandResult:
    """What a command did, as E2B's CommandResult; ``raw`` is nsbox's exec result."""

    stdout: str
    stderr: str
    exit_code: int
    error: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


class FileType(Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    OTHER = "other"


_TYPES = {"file": FileType.FILE, "directory": FileType.DIR, "symlink": FileType.SYMLINK, "other": FileType.OTHER}
_TYPE_CHAR = {FileType.FILE: "-", FileType.DIR: "d", FileType.SYMLINK: "l", FileType.OTHER: "?"}


@dataclass
class EntryInfo:
    """A file system entry, as E2B's EntryInfo (owner and group only from get_info)."""

    name: str
    type: FileType
    path: str
    size: int
    mode: int
    permissions: str
    modified_time: Optional[datetime.datetime]
    symlink_target: Optional[str] = None
    owner: Optional[str] = None
    group: Optional[str] = None

    @classmethod
    def _from(cls, e: Dict[str, Any]) -> "EntryInfo":
        t = _TYPES.get(e.get("type"), FileType.OTHER)
        mode = int(e.get("mode") or 0)
        return cls(name=e.get("name") or posixpath.basename(e["path"]) or "/", type=t, path=e["path"],
                   size=int(e.get("size") or 0), mode=mode, permissions=_TYPE_CHAR[t] + statmod.filemode(mode)[1:],
                   modified_time=_ts(e.get("mtime")), symlink_target=e.get("target"),
                   owner=None if e.get("uid") is None else str(e["uid"]),
                   group=None if e.get("gid") is None else str(e["gid"]))


@dataclass
class WriteInfo:
    """What files.write() wrote, as E2B's WriteInfo."""

    name: str
    type: FileType
    path: str


@dataclass
class SandboxInfo:
    """A sandbox as list() and get_info() describe it (E2B's SandboxInfo); ``raw`` is nsboxd's object."""

    sandbox_id: str
    template_id: Optional[str]
    metadata: Dict[str, str]
    state: str
    started_at: Optional[datetime.datetime]
    end_at: Optional[datetime.datetime]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def _from(cls, s: Dict[str, Any]) -> "SandboxInfo":
        end = None
        if s.get("expires_in") is not None:
            end = datetime.datetime.now(tz=datetime.timezone.utc) + datetime.timedelta(seconds=s["expires_in"])
        return cls(sandbox_id=s["id"], template_id=s.get("template"), metadata=dict(s.get("labels") or {}),
                   state=s.get("state", ""), started_at=_ts(s.get("created")), end_at=end, raw=s)


@dataclass
class SandboxQuery:
    """A filter for Sandbox.list(), as E2B's: metadata (labels all present) and state."""

    metadata: Optional[Dict[str, str]] = None
    state: Optional[Union[str, List[str]]] = None


# ---- files ------------------------------------------------------------------------------------

class Filesystem:
    """sandbox.files: E2B's Filesystem over nsbox's file tools."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def read(self, path: str, format: str = "text", **_ignored) -> Union[str, bytearray, Iterator[bytes]]:
        """The whole file: format "text" (UTF-8, bad bytes replaced), "bytes" or "stream".

        read_file with encoding base64, in pieces of 8 MiB (byte_offset/byte_limit).
        """
        self._sb._as_user(_ignored.get("user"))
        _check_str("path", path)
        if format not in ("text", "bytes", "stream"):
            raise InvalidArgumentException(f"files.read: format must be 'text', 'bytes' or 'stream', not {format!r}",
                                           "invalid_argument")
        if format == "stream":
            first = self._chunk(path, 0)  # errors now, not at the first next()
            return self._stream(path, first)
        if self._use_fd():
            data = self._read_fd(path)
            return data.decode("utf-8", errors="replace") if format == "text" else data
        data = bytearray()
        for piece in self._stream(path, self._chunk(path, 0)):
            data += piece
        return data.decode("utf-8", errors="replace") if format == "text" else data

    def _use_fd(self) -> bool:
        # a pipe passed to nsboxd: the bytes go straight to and from the agent, no base64
        return self._sb._conn.passes_fds and not os.environ.get("NSBOX_NO_FD")

    def _fd_call(self, tool: str, params: Dict[str, Any], theirs: int, ours: int, pump: Callable[[], None]) -> Dict[str, Any]:
        try:
            fcntl.fcntl(theirs, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        except OSError:
            pass  # past the user's pipe quota: the default size
        failed: List[BaseException] = []

        def run() -> None:
            try:
                pump()
            except OSError as e:  # the other side gave up: its error is the answer
                failed.append(e)
            finally:
                os.close(ours)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        try:
            rid = self._sb._conn.send("call", {"sandbox": self._sb.sandbox_id, "tool": tool,
                                               "params": dict(params, fd=True)}, fd=theirs)
        finally:
            os.close(theirs)  # nsboxd has its own copy
        try:
            r = self._sb._conn.wait(rid)
        finally:
            t.join()
        if failed:
            raise SandboxException(f"files: {tool} through a pipe: {failed[0]}")
        return r

    def _read_fd(self, path: str) -> bytearray:
        r, w = os.pipe()
        data = bytearray()

        def drain() -> None:
            while True:
                piece = os.read(r, 1 << 20)
                if not piece:
                    return
                data.extend(piece)

        res = self._fd_call("read_file", {"path": path}, w, r, drain)
        if res.get("bytes") != len(data):
            raise SandboxException(f"files.read '{path}': {len(data)} bytes came of {res.get('bytes')}")
        return data

    def _write_fd(self, path: str, blob: bytes) -> Dict[str, Any]:
        r, w = os.pipe()

        def feed() -> None:
            view, off = memoryview(blob), 0
            while off < len(view):
                off += os.write(w, view[off:off + (1 << 20)])

        return self._fd_call("write_file", {"path": path, "size": len(blob)}, r, w, feed)

    def _chunk(self, path: str, offset: int) -> Dict[str, Any]:
        return self._sb._call("read_file", {"path": path, "encoding": "base64", "byte_offset": offset,
                                            "byte_limit": CHUNK})

    def _stream(self, path: str, r: Dict[str, Any]) -> Iterator[bytes]:
        # at most the size the file had at the first read: one growing inside would never end;
        # a pseudo file's size says 0 (procfs, sysfs): read to its end
        end = r.get("size")
        bounded = isinstance(end, int) and end > 0
        offset = 0
        while True:
            piece = base64.b64decode(r["content"])
            if bounded:
                piece = piece[:max(end - offset, 0)]
            offset += len(piece)
            if piece:
                yield piece
            if r.get("eof", True) or not piece or (bounded and offset >= end):
                return
            r = self._chunk(path, offset)

    def write(self, path: Union[str, List[Dict[str, Any]]], data: Union[str, bytes, bytearray, IO, None] = None,
              **_ignored) -> Union[WriteInfo, List[WriteInfo]]:
        """Create or replace a file (parents created): write_file with content_b64.

        More than 8 MiB goes to a temporary file next to it, in pieces (append), then renamed
        over it: readers see the old or the new content, never part of it.
        """
        self._sb._as_user(_ignored.get("user"))
        if isinstance(path, list):  # E2B's older write(files) form
            return self.write_files(path)
        _check_str("path", path)
        blob = self._bytes(data, "files.write")
        if self._use_fd():
            r = self._write_fd(path, blob)
        elif len(blob) <= CHUNK:
            r = self._sb._call("write_file", {"path": path, "content_b64": base64.b64encode(blob).decode()})
        else:
            d, name = posixpath.split(path)
            tmp = posixpath.join(d, f".{name}.nsbox-{secrets.token_hex(4)}")
            try:
                for off in range(0, len(blob), CHUNK):
                    self._sb._call("write_file", {"path": tmp, "append": off > 0,
                                                  "content_b64": base64.b64encode(blob[off:off + CHUNK]).decode()})
                r = self._sb._call("rename", {"from": tmp, "to": path})
            except BaseException:
                try:
                    self._sb._call("remove", {"path": tmp})
                except SandboxException:
                    pass
                raise
            r = {"path": r["to"]}
        return WriteInfo(name=posixpath.basename(r["path"]), type=FileType.FILE, path=r["path"])

    @staticmethod
    def _bytes(data: Any, what: str) -> bytes:
        if hasattr(data, "read"):
            data = data.read()
        if isinstance(data, str):
            return data.encode()
        if isinstance(data, (bytes, bytearray, memoryview)):
            return bytes(data)
        raise InvalidArgumentException(f"{what}: data must be str, bytes or a file object, not {type(data).__name__}",
                                       "invalid_argument")

    def write_files(self, files: List[Any], **_ignored) -> List[WriteInfo]:
        """Write several files, [{"path": ..., "data": str|bytes}, ...]: write_files calls of
        up to 8 MiB each (a larger file alone through write()).  Every file is tried; then the
        first failure, if any, is raised with its stable code."""
        self._sb._as_user(_ignored.get("user"))
        if not isinstance(files, list) or not files:
            raise InvalidArgumentException("files.write_files: expected a non-empty list of {'path', 'data'}",
                                           "invalid_argument")
        entries = []
        for i, f in enumerate(files):
            p = f.get("path") if isinstance(f, dict) else getattr(f, "path", None)
            d = f.get("data") if isinstance(f, dict) else getattr(f, "data", None)
            if not isinstance(p, str) or not p or d is None:
                raise InvalidArgumentException(f"files.write_files: entry {i} needs a 'path' and 'data'",
                                               "invalid_argument")
            entries.append((p, self._bytes(d, f"files.write_files: entry {i}")))
        out: List[Optional[WriteInfo]] = [None] * len(entries)
        first_error: Optional[SandboxException] = None
        batch: List[int] = []
        size = 0

        def flush():
            nonlocal first_error, size
            if not batch:
                return
            r = self._sb._call("write_files", {"files": [
                {"path": entries[i][0], "content_b64": base64.b64encode(entries[i][1]).decode()} for i in batch]})
            for i, res in zip(batch, r["results"]):
                if res.get("ok"):
                    out[i] = WriteInfo(posixpath.basename(res["path"]), FileType.FILE, res["path"])
                elif first_error is None:
                    err = res.get("error") or {}
                    from .exceptions import from_code
                    first_error = from_code(err.get("code", "internal"), err.get("message", "write failed"))
            batch.clear()
            size = 0

        for i, (p, blob) in enumerate(entries):
            if len(blob) > CHUNK:
                try:
                    out[i] = self.write(p, blob)
                except SandboxException as e:
                    first_error = first_error or e
                continue
            if size + len(blob) > CHUNK or len(batch) >= 1000:
                flush()
            batch.append(i)
            size += len(blob)
        flush()
        if first_error is not None:
            raise first_error
        return [w for w in out if w is not None]

    def list(self, path: str, depth: int = 1, **_ignored) -> List[EntryInfo]:
        """The entries below a directory, depth levels deep: list_dir."""
        self._sb._as_user(_ignored.get("user"))
        _check_str("path", path)
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise InvalidArgumentException(f"files.list: depth must be an integer >= 1, not {depth!r}",
                                           "invalid_argument")
        r = self._sb._call("list_dir", {"path": path, "depth": depth})
        return [EntryInfo._from(e) for e in r["entries"]]

    def exists(self, path: str, **_ignored) -> bool:
        self._sb._as_user(_ignored.get("user"))
        _check_str("path", path)
        return bool(self._sb._call("exists", {"path": path})["exists"])

    def get_info(self, path: str, **_ignored) -> EntryInfo:
        """stat (a final symbolic link described, not followed)."""
        self._sb._as_user(_ignored.get("user"))
        _check_str("path", path)
        return EntryInfo._from(self._sb._call("stat", {"path": path}))

    def remove(self, path: str, **_ignored) -> None:
        """A file, a symbolic link or a directory with everything in it (remove, recursive)."""
        self._sb._as_user(_ignored.get("user"))
        _check_str("path", path)
        self._sb._call("remove", {"path": path, "recursive": True})

    def rename(self, old_path: str, new_path: str, **_ignored) -> EntryInfo:
        self._sb._as_user(_ignored.get("user"))
        _check_str("old_path", old_path)
        _check_str("new_path", new_path)
        r = self._sb._call("rename", {"from": old_path, "to": new_path})
        return self.get_info(r["to"])

    def watch_dir(self, path: str, on_event: Optional[Callable[["FilesystemEvent"], None]] = None,
                  recursive: bool = False, on_exit: Optional[Callable[[Optional[Exception]], None]] = None,
                  **_ignored) -> "WatchHandle":
        """Watch directory path (tool watch, streamed): on_event(FilesystemEvent) for each change,
        from a thread of its own, until handle.stop().  Raises at once for a missing path
        (NotFoundException), a file, or too many watches; on_exit(error or None) when it ends."""
        self._sb._as_user(_ignored.get("user"))
        _check_str("path", path)
        return WatchHandle(self._sb, path, on_event, bool(recursive), on_exit)

    def make_dir(self, path: str, **_ignored) -> bool:
        """Create a directory and its parents; False when it existed already (mkdir, parents)."""
        self._sb._as_user(_ignored.get("user"))
        _check_str("path", path)
        return bool(self._sb._call("mkdir", {"path": path, "parents": True})["created"])


# ---- watching ---------------------------------------------------------------------------------

class FilesystemEventType(Enum):
    """E2B's FilesystemEventType: what happened to an entry (nsbox's watch ops)."""
    CHMOD = "chmod"
    CREATE = "create"
    REMOVE = "remove"
    RENAME = "rename"
    WRITE = "write"


@dataclass
class FilesystemEvent:
    """E2B's FilesystemEvent: name is relative to the watched directory; path is the path as nsbox
    reports it (the watched path as given, joined with name); entry_type "file", "dir", ..."""
    name: str
    type: FilesystemEventType
    path: str = ""
    entry_type: Optional[str] = None


class WatchHandle:
    """A running files.watch_dir: its own connection, read by a thread that calls on_event for
    each change (or keeps them for get_new_events).  stop() closes the connection, which cancels
    the watch in the sandbox."""

    def __init__(self, sb: "Sandbox", path: str, on_event: Optional[Callable[[FilesystemEvent], None]],
                 recursive: bool, on_exit: Optional[Callable[[Optional[Exception]], None]]):
        self._prefix = path.rstrip("/") or "/"
        self._on_event = on_event
        self._on_exit = on_exit
        self._pending: List[FilesystemEvent] = []
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._error: Optional[Exception] = None
        self._stopped = False
        self._conn = Connection(sb._conn.path, autostart=False)
        req = {"sandbox": sb.sandbox_id, "tool": "watch", "params": {"path": path, "recursive": recursive},
               "stream": True}
        self._thread = threading.Thread(target=self._run, args=(req,), name="nsbox-watch", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            self._conn.close()
            raise self._error

    def _name(self, p: str) -> str:
        if self._prefix == "/":
            return p.lstrip("/")
        return p[len(self._prefix):].lstrip("/") if p.startswith(self._prefix) else p

    def _event(self, ev: Dict[str, Any]) -> None:
        if ev.get("event") == "started":
            self._started.set()
            return
        try:
            kind = FilesystemEventType(ev.get("op"))
        except ValueError:
            return  # overflow: E2B has no such event
        path = ev.get("path", "")
        fe = FilesystemEvent(self._name(path), kind, path, ev.get("type"))
        if self._on_event:
            self._on_event(fe)
        else:
            with self._lock:
                self._pending.append(fe)

    def _run(self, req: Dict[str, Any]) -> None:
        err: Optional[Exception] = None
        try:
            self._conn.call("call", req, self._event)
        except Exception as e:  # the watch ended: refused, the directory gone, or stop()
            err = None if self._stopped else e
        if not self._started.is_set():
            self._error = err or SandboxException("watch: ended before it started", "internal")
            self._started.set()
            return
        if self._on_exit:
            self._on_exit(err)

    def get_new_events(self) -> List[FilesystemEvent]:
        """The events since the last call (when watch_dir was given no on_event)."""
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def stop(self) -> None:
        """Stop watching: the connection closes and nsboxd cancels the watch."""
        if self._stopped:
            return
        self._stopped = True
        self._conn.close()
        if threading.current_thread() is not self._thread:
            self._thread.join()


# ---- commands ---------------------------------------------------------------------------------

def _result(r: Dict[str, Any], stdout: Optional[str] = None, stderr: Optional[str] = None) -> CommandResult:
    err = None
    if r.get("timed_out"):
        err = "timed out"
    elif r.get("reason") == "oom_killed":
        err = "killed by the OOM killer"
    elif r.get("signal"):
        err = f"killed by signal {r['signal']}"
    return CommandResult(stdout=r.get("stdout", "") if stdout is None else stdout,
                         stderr=r.get("stderr", "") if stderr is None else stderr,
                         exit_code=int(r.get("exit_code", -1)), error=err, raw=r)


def _finish(res: CommandResult, timeout: Optional[float], sb: Optional["Sandbox"] = None) -> CommandResult:
    if res.raw.get("timed_out"):
        raise TimeoutException(f"command timed out after {timeout} s (killed)", "timeout")
    if res.exit_code != 0:
        exc = sb._exit_exception if sb is not None else CommandExitException
        raise exc(res.stdout, res.stderr, res.exit_code, res.error, res)
    return res


class _Decoders:
    """Output chunks as text as they come: a character split between chunks waits for the rest."""

    def __init__(self, on_stdout=None, on_stderr=None, limit: Optional[int] = None):
        self.dec = {"stdout": codecs.getincrementaldecoder("utf-8")("replace"),
                    "stderr": codecs.getincrementaldecoder("utf-8")("replace")}
        self.got: Dict[str, List[str]] = {"stdout": [], "stderr": []}
        self.cbs = {"stdout": on_stdout, "stderr": on_stderr}
        self.limit = limit  # bytes kept of each stream (None: all)
        self.seen = {"stdout": 0, "stderr": 0}
        self.truncated = False

    def _give(self, kind: str, text: str) -> None:
        if text:
            self.got[kind].append(text)
            if self.cbs[kind]:
                self.cbs[kind](text)

    def on_event(self, ev: Dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind in self.dec and "data_b64" in ev:
            data = base64.b64decode(ev["data_b64"])
            if self.limit is not None:
                room = max(self.limit - self.seen[kind], 0)
                if len(data) > room:
                    data, self.truncated = data[:room], True
                self.seen[kind] += len(data)
            self._give(kind, self.dec[kind].decode(data))

    def flush(self) -> None:
        for kind in self.dec:
            self._give(kind, self.dec[kind].decode(b"", final=True))


class CommandHandle:
    """A background command (E2B's CommandHandle): wait(), kill(), send_stdin(), close_stdin().

    With on_stdout/on_stderr its output reaches them as it comes: a process_connect call (the
    command's recent output, then its live output) runs on a thread of the handle's own.  A slow
    callback makes the command wait for it (hold), as on E2B: no output is lost."""

    def __init__(self, sandbox: "Sandbox", pid: int, on_stdout=None, on_stderr=None, timeout=None,
                 tag: Optional[str] = None, live: bool = False, stream_on_wait: bool = False):
        self._sb = sandbox
        self.pid = pid
        self.tag = tag
        self._on_stdout, self._on_stderr, self._timeout = on_stdout, on_stderr, timeout
        self._result: Optional[CommandResult] = None
        self._thread: Optional[threading.Thread] = None
        self._stream_error: Optional[BaseException] = None
        self._stream_on_wait = stream_on_wait
        if live and (on_stdout or on_stderr):
            self._thread = threading.Thread(target=self._follow, args=(on_stdout, on_stderr), daemon=True)
            self._thread.start()

    def _connect(self, on_stdout, on_stderr) -> Dict[str, Any]:
        """process_connect: the output to the callbacks until the command ends; its result."""
        d = _Decoders(on_stdout, on_stderr)
        r = self._sb._call("process_connect", {"pid": self.pid, "hold": True}, on_event=d.on_event, stream=True)
        d.flush()
        return r

    def _follow(self, on_stdout, on_stderr) -> None:
        try:
            self._connect(on_stdout, on_stderr)
        except BaseException as e:  # given to wait()
            self._stream_error = e

    def wait(self, on_stdout: Optional[Callable[[str], None]] = None,
             on_stderr: Optional[Callable[[str], None]] = None, timeout: Optional[float] = None) -> CommandResult:
        """Wait until it ends, then collect its result (process_wait).  Callbacks given to run()
        got its output live already; a handle of connect() gives its output to the callbacks as
        it comes (process_connect) unless a timeout is given; otherwise they get it all at once
        at the end.  A non-zero exit raises CommandExitException; timeout (seconds) raises
        TimeoutException and leaves it running."""
        if self._result is None:
            out, err = on_stdout or self._on_stdout, on_stderr or self._on_stderr
            delivered = False
            if self._thread is not None:
                self._thread.join(timeout or None)
                if self._thread.is_alive():
                    raise TimeoutException(f"process {self.pid} is still running", "timeout")
                if self._stream_error is not None:
                    raise self._stream_error
                delivered = True
            elif self._stream_on_wait and (out or err) and not timeout:
                self._connect(out, err)
                delivered = True
            r = self._sb._call("process_wait", {"pid": self.pid, "timeout": timeout or 0})
            self._result = _result(r)
            if not delivered:
                if out and self._result.stdout:
                    out(self._result.stdout)
                if err and self._result.stderr:
                    err(self._result.stderr)
        return _finish(self._result, self._timeout, self._sb)

    def kill(self) -> bool:
        """SIGKILL to its process group; False when it had ended already."""
        try:
            return bool(self._sb._call("process_kill", {"pid": self.pid, "signal": "KILL"})["signaled"])
        except NotFoundException:
            return False

    def send_stdin(self, data: Union[str, bytes], **_ignored) -> None:
        """Queue text for its standard input (process_write_stdin)."""
        self._sb.commands.send_stdin(self.pid, data)

    def close_stdin(self, **_ignored) -> None:
        """End its standard input: a reader sees end of file (process_close_stdin)."""
        self._sb.commands.close_stdin(self.pid)


class Commands:
    """sandbox.commands: E2B's Commands over nsbox's exec and process tools."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def run(self, cmd: str, background: bool = False, envs: Optional[Dict[str, str]] = None,
            cwd: Optional[str] = None, timeout: Optional[float] = 60,
            on_stdout: Optional[Callable[[str], None]] = None, on_stderr: Optional[Callable[[str], None]] = None,
            stdin: Optional[Union[str, bytes, bool]] = None, tag: Optional[str] = None,
            **_ignored) -> Union[CommandResult, CommandHandle]:
        """Run a shell command line (exec with shell).

        timeout: seconds before it is killed (0 or None: none); when it fires, TimeoutException.
        on_stdout/on_stderr: called with each chunk of output as it comes (exec with stream).
        stdin: text for its standard input; or True (E2B's): its standard input stays open for
        send_stdin()/close_stdin() by pid (or tag, through list()) from another thread while run()
        streams (exec's stdin_open).  A non-zero exit raises CommandExitException.
        background=True returns a CommandHandle at once; its standard input stays open for
        send_stdin(), and on_stdout/on_stderr get its output live.  tag: a name for it (1-64 of
        A-Z a-z 0-9 . _ -, unique among the sandbox's running commands), for connect().
        """
        self._sb._as_user(_ignored.get("user"))
        _check_str("cmd", cmd)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
            raise InvalidArgumentException(f"commands.run: timeout must be a number of seconds >= 0, not {timeout!r}",
                                           "invalid_argument")
        params: Dict[str, Any] = {"shell": cmd}
        if envs:
            params["env"] = dict(envs)
        if cwd:
            params["cwd"] = cwd
        if timeout:
            params["timeout"] = timeout
        if isinstance(stdin, (bytes, bytearray)):
            stdin = bytes(stdin).decode()
        if isinstance(stdin, str):
            params["stdin"] = stdin
        elif stdin is True and not background:  # a background command's stays open anyway
            params["stdin_open"] = True
        if tag is not None:
            _check_str("tag", tag)
            params["tag"] = tag
        if background:
            params["background"] = True
            r = self._sb._call("exec", params)
            if not r.get("background"):  # it could not start: its result (127, 126) at once
                return _finish(_result(r), timeout, self._sb)
            return CommandHandle(self._sb, r["pid"], on_stdout, on_stderr, timeout, tag=r.get("tag"), live=True)
        # always streamed: the events carry the output's bytes (NUL bytes included, which the
        # result's text would have replaced with U+FFFD); without callbacks, at most
        # OUTPUT_MAX of each stream is kept, as exec's own default max_output
        d = _Decoders(on_stdout, on_stderr, None if (on_stdout or on_stderr) else OUTPUT_MAX)
        r = self._sb._call("exec", params, on_event=d.on_event, stream=True)
        d.flush()
        if d.truncated:
            r["truncated"] = True
        return _finish(_result(r, "".join(d.got["stdout"]), "".join(d.got["stderr"])), timeout, self._sb)

    def send_stdin(self, pid: int, data: Union[str, bytes], **_ignored) -> None:
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data).decode()
        if not isinstance(data, str):
            raise InvalidArgumentException("commands.send_stdin: data must be str or bytes", "invalid_argument")
        self._sb._call("process_write_stdin", {"pid": pid, "data": data})

    def close_stdin(self, pid: int, **_ignored) -> None:
        """End the standard input of command pid: a reader sees end of file (process_close_stdin)."""
        self._sb._call("process_close_stdin", {"pid": pid})

    def kill(self, pid: int, **_ignored) -> bool:
        return CommandHandle(self._sb, pid).kill()

    def list(self, **_ignored) -> List[Dict[str, Any]]:
        """The running commands and background ones not waited for: process_list."""
        return self._sb._call("process_list", {})["processes"]

    def connect(self, pid: Union[int, str], on_stdout: Optional[Callable[[str], None]] = None,
                on_stderr: Optional[Callable[[str], None]] = None, timeout: Optional[float] = None,
                **_ignored) -> CommandHandle:
        """A handle on a background command started earlier, by pid or by tag: its wait() gives
        the callbacks the command's recent output (the last 64 KiB of each stream), then its
        output as it comes (process_connect), until it ends."""
        tag = None
        if isinstance(pid, str):
            tag = pid
            found = [p for p in self.list() if p.get("tag") == tag]
            found.sort(key=lambda p: not p.get("running"))
            if not found:
                raise NotFoundException(f"commands.connect: no process tagged '{tag}'", "not_found")
            pid = found[0]["pid"]
        return CommandHandle(self._sb, pid, on_stdout, on_stderr, timeout, tag=tag, stream_on_wait=True)


# ---- pty --------------------------------------------------------------------------------------

@dataclass
class PtySize:
    """A terminal's size (E2B's PtySize)."""
    rows: int = 24
    cols: int = 80


class PtyHandle:
    """A command on a terminal of its own (exec with pty), detached: send_input(), resize(),
    kill(), wait().  Its output, one stream of bytes, goes to on_data as it comes from a
    process_connect call on a thread of the handle's own."""

    def __init__(self, sandbox: "Sandbox", pid: int, on_data: Optional[Callable[[bytes], None]] = None,
                 tag: Optional[str] = None):
        self._sb = sandbox
        self.pid = pid
        self.tag = tag
        self._on_data = on_data
        self._error: Optional[BaseException] = None
        self._result: Optional[CommandResult] = None
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _event(self, ev: Dict[str, Any]) -> None:
        if ev.get("event") == "pty" and "data_b64" in ev and self._on_data:
            self._on_data(base64.b64decode(ev["data_b64"]))

    def _follow(self) -> None:
        try:
            self._sb._call("process_connect", {"pid": self.pid, "hold": True}, on_event=self._event, stream=True)
        except BaseException as e:  # given to wait()
            self._error = e

    def send_input(self, data: Union[str, bytes]) -> None:
        """Keys for the terminal (bytes, or text as UTF-8): b"\\x03" is Ctrl-C."""
        self._sb.pty.send_stdin(self.pid, data)

    send_stdin = send_input

    def resize(self, cols: Union[int, PtySize], rows: Optional[int] = None) -> None:
        """The terminal's new size (process_resize); the command gets SIGWINCH."""
        self._sb.pty.resize(self.pid, cols if isinstance(cols, PtySize) else PtySize(rows=rows or 0, cols=cols))

    def kill(self) -> bool:
        """SIGKILL to its process group; False when it had ended already."""
        return self._sb.pty.kill(self.pid)

    def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Wait until it ends (its output has all reached on_data then); its result, whose
        stdout is empty.  A non-zero exit raises CommandExitException; timeout (seconds) raises
        TimeoutException and leaves it running."""
        if self._result is None:
            self._thread.join(timeout or None)
            if self._thread.is_alive():
                raise TimeoutException(f"process {self.pid} is still running", "timeout")
            if self._error is not None:
                raise self._error
            self._result = _result(self._sb._call("process_wait", {"pid": self.pid, "timeout": timeout or 0}), "", "")
        return _finish(self._result, None, self._sb)


class Pty:
    """sandbox.pty: E2B's Pty over exec's pty param and process_resize."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def create(self, size: Optional[PtySize] = None, on_data: Optional[Callable[[bytes], None]] = None,
               cwd: Optional[str] = None, envs: Optional[Dict[str, str]] = None,
               cmd: Optional[List[str]] = None, cols: Optional[int] = None, rows: Optional[int] = None,
               tag: Optional[str] = None, **_ignored) -> PtyHandle:
        """Start cmd (default: an interactive bash) on a new terminal of size (or cols x rows;
        default 80x24), detached: it runs on when this connection goes, and tag names it.
        on_data gets the terminal's output as bytes as it comes."""
        self._sb._as_user(_ignored.get("user"))
        size = size or PtySize(rows=rows if rows is not None else 24, cols=cols if cols is not None else 80)
        params: Dict[str, Any] = {"cmd": list(cmd or ["/bin/bash", "-i", "-l"]), "detach": True,
                                  "pty": {"cols": size.cols, "rows": size.rows}}
        if cwd:
            params["cwd"] = cwd
        if envs:
            params["env"] = dict(envs)
        if tag is not None:
            _check_str("tag", tag)
            params["tag"] = tag
        r = self._sb._call("exec", params)
        if not r.get("background"):  # it could not start: its result (127, 126) at once
            _finish(_result(r), None, self._sb)  # raises, with the status and why
        return PtyHandle(self._sb, r["pid"], on_data, tag=r.get("tag"))

    def send_stdin(self, pid: int, data: Union[str, bytes], **_ignored) -> None:
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, (bytes, bytearray)):
            raise InvalidArgumentException("pty.send_stdin: data must be bytes or str", "invalid_argument")
        self._sb._call("process_write_stdin", {"pid": pid, "data_b64": base64.b64encode(bytes(data)).decode()})

    def resize(self, pid: int, size: PtySize, **_ignored) -> None:
        self._sb._call("process_resize", {"pid": pid, "cols": size.cols, "rows": size.rows})

    def kill(self, pid: int, **_ignored) -> bool:
        try:
            return bool(self._sb._call("process_kill", {"pid": pid, "signal": "KILL"})["signaled"])
        except NotFoundException:
            return False


# ---- run_code ---------------------------------------------------------------------------------

# language: (file name, command line run in the directory of the file, installer of libraries)
_LANGS = {
    "python": ("main.py", "python3 main.py", "python3 -m pip install --user --quiet"),
    "javascript": ("main.js", "node main.js", "npm install --silent --no-save"),
    "c": ("main.c", "gcc -O1 -o main main.c -lm && ./main", None),
    "cpp": ("main.cpp", "g++ -O1 -o main main.cpp && ./main", None),
    "go": ("main.go", "go run main.go", None),
    "java": ("Main.java", "java -XX:-UsePerfData Main.java", None),  # no /tmp/hsperfdata_USER left behind
    "ruby": ("main.rb", "ruby main.rb", "gem install --user-install --silent"),
}
_ALIASES = {"py": "python", "python3": "python", "js": "javascript", "node": "javascript", "c++": "cpp",
            "golang": "go", "rb": "ruby"}


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


# ---- the sandbox ------------------------------------------------------------------------------

class Sandbox:
    """A persistent sandbox of nsboxd.

    ``Sandbox.create(...)`` (or ``Sandbox(...)``) creates one, ``Sandbox.connect(id)`` attaches to
    one; used as a context manager it is destroyed at the end of the block.
    """

    _exit_exception = CommandExitException  # what a non-zero exit raises (nsbox.e2b: E2B's text)

    def __init__(self, policy: Optional[str] = None, timeout: Optional[float] = 300,
                 metadata: Optional[Dict[str, str]] = None, envs: Optional[Dict[str, str]] = None,
                 template: Optional[str] = None, socket: Optional[str] = None, **create_params):
        """Create a sandbox (method create).  policy: a policy name or file; timeout: its lifetime
        in seconds (0 or None: none); metadata: its labels; envs: environment of its commands;
        template: a template of nsboxd's configuration; other keyword arguments are create's
        params (memory, cpus, net, bind, ...).  socket: nsboxd's socket instead of the default."""
        self._conn = Connection(socket)
        self.files = Filesystem(self)
        self.commands = Commands(self)
        self.pty = Pty(self)
        attach = create_params.pop("_attach", None)
        if attach is not None:
            self._info = attach
        else:
            params: Dict[str, Any] = dict(create_params)
            if policy is not None:
                # a file (a "/" or ".json" in it, as nsbox(1) takes it) goes to nsboxd absolute:
                # it refuses a relative one, which would be relative to its own directory
                if "/" in policy or policy.endswith(".json"):
                    policy = os.path.realpath(policy)
                params["policy"] = policy
            if template is not None:
                params["template"] = template
            if timeout is not None:
                params["timeout"] = timeout
            if metadata:
                params["labels"] = dict(metadata)
            if envs:
                params["env"] = dict(envs)
            try:
                self._info = self._conn.call("create", params)
            except BaseException:
                self._conn.close()
                raise
            _warn_limits(self._info)
        self.sandbox_id: str = self._info["id"]

    # E2B names
    @classmethod
    def create(cls, policy: Optional[str] = None, timeout: Optional[float] = 300,
               metadata: Optional[Dict[str, str]] = None, envs: Optional[Dict[str, str]] = None,
               **kwargs) -> "Sandbox":
        return cls(policy=policy, timeout=timeout, metadata=metadata, envs=envs, **kwargs)

    @classmethod
    def connect(cls, sandbox_id: str, socket: Optional[str] = None, **_ignored) -> "Sandbox":
        """Attach to an existing sandbox (a unique prefix of 4 characters or more will do); a
        paused one is resumed, as E2B's connect does."""
        _check_str("sandbox_id", sandbox_id)
        conn = Connection(socket)
        try:
            info = next((s for s in conn.call("list", {})["sandboxes"]
                         if s["id"] == sandbox_id or (len(sandbox_id) >= 4 and s["id"].startswith(sandbox_id))), None)
            if info is None:
                raise NotFoundException(f"no sandbox '{sandbox_id}' (see Sandbox.list())", "not_found")
            if info.get("state") == "paused":
                info = conn.call("resume", {"sandbox": info["id"]})
        finally:
            conn.close()
        return cls(socket=socket, _attach=info)

    @staticmethod
    def list(query: Optional[Union[SandboxQuery, Dict[str, Any]]] = None, socket: Optional[str] = None,
             **_ignored) -> List[SandboxInfo]:
        """The caller's sandboxes (list), filtered by query's metadata (labels) and state."""
        if isinstance(query, dict):
            query = SandboxQuery(**query)
        params: Dict[str, Any] = {}
        states = None
        if query is not None:
            if query.metadata:
                params["labels"] = dict(query.metadata)
            if isinstance(query.state, str):
                params["state"] = query.state
            elif query.state:
                states = set(query.state)
        conn = Connection(socket)
        try:
            boxes = conn.call("list", params)["sandboxes"]
        finally:
            conn.close()
        return [SandboxInfo._from(s) for s in boxes if states is None or s.get("state") in states]

    def _as_user(self, user: Any) -> None:
        """E2B's user= of a call: the sandbox has one user, its policy's (its info's "user");
        "user" names it too when it is not root, "root" when it is uid 0.  Another raises AuthenticationException, as
        E2B's SDKs do for a user envd refuses; nothing is called."""
        if user is None or user == "":
            return
        me = self._info.get("user") if isinstance(self._info, dict) else None
        name = me.get("name", "user") if isinstance(me, dict) else "user"
        root = isinstance(me, dict) and me.get("uid") == 0
        if user == name or user == ("root" if root else "user"):
            return
        hint = (" (a sandbox whose policy's user is uid 0, such as nsbox's root policy, runs everything as root)"
                if user == "root" else "")
        raise AuthenticationException(f"user {str(user)[:64]!r}: this sandbox's one user is {name!r}{hint}",
                                      "permission_denied")

    def _call(self, tool: str, params: Dict[str, Any], on_event=None, stream: bool = False) -> Any:
        req: Dict[str, Any] = {"sandbox": self.sandbox_id, "tool": tool, "params": params}
        if stream:
            req["stream"] = True
        return self._conn.call("call", req, on_event)

    def call(self, tool: str, params: Optional[Dict[str, Any]] = None, **kwargs) -> Any:
        """Any nsbox tool by name with its params (nsbox-protocol(7), TOOLS): the JSON result."""
        _check_str("tool", tool)
        p = dict(params or {})
        p.update(kwargs)
        return self._call(tool, p)

    def tools(self, format: str = "json") -> List[Dict[str, Any]]:
        """The tool schemas, as nsbox tools --format prints them: "json", "openai" or "mcp"."""
        return self._conn.call("tools", {"format": format})["tools"]

    def kill(self) -> bool:
        """Destroy the sandbox; False when it was gone already."""
        try:
            self._conn.call("destroy", {"sandbox": self.sandbox_id})
            return True
        except NotFoundException:
            return False

    def pause(self, memory: bool = True) -> str:
        """Freeze every process of the sandbox (pause); Sandbox.connect() or resume() thaws it.
        memory=False keeps only its files: its processes are killed, and resume() reboots it."""
        if not isinstance(memory, bool):
            raise InvalidArgumentException(f"pause: memory must be True or False, not {memory!r}", "invalid_argument")
        self._info = self._conn.call("pause", {"sandbox": self.sandbox_id, "memory": memory})
        return self.sandbox_id

    def resume(self, reboot: bool = False) -> None:
        """Thaw it; reboot=True kills its processes as it thaws (only its files go on)."""
        if not isinstance(reboot, bool):
            raise InvalidArgumentException(f"resume: reboot must be True or False, not {reboot!r}", "invalid_argument")
        self._info = self._conn.call("resume", {"sandbox": self.sandbox_id, "memory": not reboot})

    def set_timeout(self, timeout: float) -> None:
        """The sandbox lives timeout seconds from now (0: no limit): set_timeout."""
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise InvalidArgumentException(f"set_timeout: timeout must be a number of seconds, not {timeout!r}",
                                           "invalid_argument")
        self._info = self._conn.call("set_timeout", {"sandbox": self.sandbox_id, "timeout": timeout})

    # snapshots, resets and replays (knowlyr's AgentSandbox calls these)
    def snapshot(self, name: str) -> str:
        """Capture the sandbox's files as snapshot name in nsboxd's store (method snapshot); the
        sandbox keeps running.  Returns name; Sandbox.create(**{"from": name}) starts another on it."""
        _check_str("name", name)
        return self._conn.call("snapshot", {"sandbox": self.sandbox_id, "name": name})["name"]

    def reset(self, snapshot: Optional[str] = None) -> None:
        """Kill every process and discard every change since snapshot (a name given to
        snapshot()), or since the sandbox was created (its --repo checkout cloned again): method
        reset.  The id stays."""
        params: Dict[str, Any] = {"sandbox": self.sandbox_id}
        if snapshot is not None:
            _check_str("snapshot", snapshot)
            params["snapshot"] = snapshot
        self._info = self._conn.call("reset", params)

    def list_snapshots(self) -> List[Dict[str, Any]]:
        """The snapshots of nsboxd's store (method snapshot_list): [{name, created, size, ...}]."""
        return self._conn.call("snapshot_list", {})["snapshots"]

    def delete_snapshot(self, name: str) -> None:
        """Remove snapshot name from the store (method snapshot_delete)."""
        _check_str("name", name)
        self._conn.call("snapshot_delete", {"name": name})

    def replay(self, trajectory: Any) -> Dict[str, Any]:
        """Replay a knowlyr trajectory ({"steps": [{tool_name, params, expected_output}]}: a dict,
        its JSON text or a file's path) step by step in this sandbox, as nsbox replay judges it:
        a step whose command fails (exit status 127...) is success False and no match even when
        its output is the expected one.  Returns {format, steps, matched, mismatched, succeeded,
        first_divergent_step, results: [{step, tool, success, match, why, output,
        expected_output}]} (nsbox.trajectory); a malformed trajectory raises
        InvalidArgumentException before any step runs."""
        return _trajectory.replay(self, trajectory)

    def get_info(self) -> SandboxInfo:
        for s in self._conn.call("list", {})["sandboxes"]:
            if s["id"] == self.sandbox_id:
                return SandboxInfo._from(s)
        raise NotFoundException(f"sandbox {self.sandbox_id} does not exist (any more)", "not_found")

    def is_running(self) -> bool:
        try:
            return self.get_info().state == "running"
        except NotFoundException:
            return False

    def run_code(self, *args, **kwargs) -> Union[Execution, CommandResult]:
        """Run code, in one of two styles.

        E2B's (tool run_code): ``run_code(code, language=None, context=None, on_stdout=None,
        on_stderr=None, on_result=None, on_error=None, timeout=None)`` runs a cell in a live
        kernel of the sandbox's code interpreter, which keeps its state between calls: the
        default context of language ("python", "r", "javascript", "typescript", "java" or "bash"; default
        python), or
        context (a Context from create_code_context, or its id).  The callbacks get the cell's
        output as it comes (text, Result, ExecutionError); timeout (seconds, default 300, 0: none)
        interrupts the cell and keeps the context.  Returns an Execution (results, logs, error,
        text: the main result's).  The interpreter starts on first use; it needs
        python3-ipykernel in the sandbox's root.

        llm-sandbox's: ``run_code(lang, code, libraries=None, timeout=60)`` runs a program once
        and returns a CommandResult (see _run_program).  This style is used when the first two
        positional arguments are strings and the first is one of its languages (python,
        javascript, c, cpp, go, java, ruby and their aliases), or when lang= or libraries= is
        given; else E2B's.  So run_code("python", "print(1)") is llm-sandbox's and
        run_code("print(1)") or run_code("x", language="python") E2B's."""
        if "lang" in kwargs or "libraries" in kwargs or (
                len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str)
                and _ALIASES.get(args[0].lower(), args[0].lower()) in _LANGS):
            return self._run_program(*args, **kwargs)
        return self._run_cell(*args, **kwargs)

    def _run_cell(self, code: str, language: Optional[str] = None, context: Any = None,
                  on_stdout: Optional[Callable[[str], None]] = None, on_stderr: Optional[Callable[[str], None]] = None,
                  on_result: Optional[Callable[[Result], None]] = None,
                  on_error: Optional[Callable[[ExecutionError], None]] = None,
                  timeout: Optional[float] = None, **_ignored) -> Execution:
        if not isinstance(code, str):
            raise InvalidArgumentException("run_code: code must be a string", "invalid_argument")
        check_language(language)
        params: Dict[str, Any] = {"code": code}
        if language is not None:
            params["language"] = language
        if context is not None:
            params["context"] = context_id(context)
        if timeout is not None:
            params["timeout"] = timeout
        streamed = any((on_stdout, on_stderr, on_result, on_error))
        ev = CellEvents(on_stdout, on_stderr, on_result, on_error) if streamed else None
        return Execution._from(self._call("run_code", params, on_event=ev, stream=streamed))

    def create_code_context(self, language: Optional[str] = None, cwd: Optional[str] = None, **_ignored) -> Context:
        """A new code context (tool create_code_context): a kernel of its own, for run_code's
        context; language "python" (default), "r", "javascript", "typescript", "java" or "bash"; cwd its
        directory."""
        check_language(language)
        params = {k: v for k, v in (("language", language), ("cwd", cwd)) if v is not None}
        return Context._from(self._call("create_code_context", params))

    def list_code_contexts(self, **_ignored) -> List[Context]:
        """The code interpreter's contexts, the default ones included (tool list_code_contexts)."""
        return [Context._from(c) for c in self._call("list_code_contexts", {})["contexts"]]

    def restart_code_context(self, context: Any, **_ignored) -> None:
        """Restart a context's kernel: its state is lost, its id stays (restart_code_context)."""
        self._call("restart_code_context", {"context": context_id(context)})

    def remove_code_context(self, context: Any, **_ignored) -> None:
        """Shut a context's kernel down and forget it (tool remove_code_context)."""
        self._call("remove_code_context", {"context": context_id(context)})

    def _run_program(self, lang: str, code: str, libraries: Optional[List[str]] = None,
                     timeout: Optional[float] = 60) -> CommandResult:
        """Run a program in one of python, javascript, c, cpp, go, java, ruby (as llm-sandbox's
        run): the code goes to a fresh directory under /tmp, is compiled if need be and run;
        the result is returned whatever the exit status.  libraries are installed first with
        the language's package manager (pip, npm, gem), which needs a network (net "nat")."""
        if not isinstance(lang, str) or _ALIASES.get(lang.lower(), lang.lower()) not in _LANGS:
            raise InvalidArgumentException(f"run_code: unknown language {lang!r} (one of {', '.join(_LANGS)})",
                                           "invalid_argument")
        if not isinstance(code, str):
            raise InvalidArgumentException("run_code: code must be a string", "invalid_argument")
        lang = _ALIASES.get(lang.lower(), lang.lower())
        fname, run, installer = _LANGS[lang]
        if libraries and installer is None:
            raise InvalidArgumentException(f"run_code: libraries are not supported for {lang}", "invalid_argument")
        d = f"/tmp/nsbox-code-{secrets.token_hex(6)}"
        self._call("write_file", {"path": f"{d}/{fname}", "content": code})
        try:
            if libraries:
                self.commands.run(installer + " " + " ".join(_quote(lib) for lib in libraries), cwd=d,
                                  timeout=timeout)
            r = self._call("exec", {"shell": run, "cwd": d, **({"timeout": timeout} if timeout else {})})
            return _result(r)
        finally:
            try:
                self._call("remove", {"path": d, "recursive": True})
            except SandboxException:
                pass

    def close(self) -> None:
        """Close the connection; the sandbox lives on (until kill() or its timeout)."""
        self._conn.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.kill()
        finally:
            self.close()

    def __repr__(self) -> str:
        return f"Sandbox(sandbox_id={self.sandbox_id!r})"
