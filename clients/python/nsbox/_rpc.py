"""The connection to nsboxd: its socket found, and nsboxd started, as the nsbox command does.

JSON-RPC 2.0, one object per line (nsbox-protocol(7)).  Several threads may use one connection:
requests are sent at once and matched to their replies by id; whichever caller is waiting reads
the socket for everyone, so a long call (a command, a process_wait) does not hold the others up.
"""

import array
import errno
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .exceptions import InvalidArgumentException, SandboxException, UnavailableException, from_code

AUTOSTART_TIMEOUT = 10.0  # seconds, as runtime/client.c


def _usable_base(base: Optional[str]) -> bool:
    try:
        st = os.stat(base) if base and base.startswith("/") else None
    except OSError:
        return False
    return st is not None and stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


_warned = False


def _squatted(path: str) -> bool:
    """PATH exists and is not a directory of ours: another user made it first (or a symlink)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid()


def _fallback_dir(uid: int, taken: str) -> str:
    """~/.cache/nsbox-run, the home from the password database, as runtime/paths.c; said once."""
    global _warned
    try:
        home = pwd.getpwuid(uid).pw_dir
    except KeyError:
        home = ""
    if not home.startswith("/"):
        raise UnavailableException(
            f"runtime directory '{taken}' belongs to another user, and uid {uid} has no home directory to use instead")
    d = f"{home.rstrip('/')}/.cache/nsbox-run"
    if not _warned:
        sys.stderr.write(f"nsbox: warning: runtime directory '{taken}' is not ours (another user made it first): "
                         f"using '{d}' instead\n")
        _warned = True
    return d


def runtime_paths() -> Tuple[str, str, str]:
    """(runtime directory, socket, log) of the calling user, as runtime/paths.c finds them."""
    uid = os.geteuid()
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if uid == 0:
        d = "/run/nsbox"
    elif _usable_base(xdg):
        d = f"{xdg}/nsbox"
    elif _usable_base(f"/run/user/{uid}"):
        d = f"/run/user/{uid}/nsbox"
    else:
        d = f"/tmp/nsbox-{uid}"
        if _squatted(d):
            d = _fallback_dir(uid, d)
    sock = os.environ.get("NSBOX_SOCKET") or ""
    if sock and not sock.startswith("/"):
        raise InvalidArgumentException(f"NSBOX_SOCKET '{sock}': expected an absolute path", "invalid_argument")
    if sock:
        path, log = sock, sock + ".log"
    else:
        path, log = f"{d}/nsboxd.sock", f"{d}/nsboxd.log"
    if len(path.encode()) >= 108:
        raise InvalidArgumentException(
            f"socket path '{path}' is longer than a unix socket address allows (107 bytes)", "invalid_argument")
    return d, path, log


def _check_private_dir(d: str, create: bool) -> None:
    # a directory another user controls could hold a planted socket or log symlink
    if create:
        if d.endswith("/.cache/nsbox-run"):
            # the fallback's parent: made 0700 when missing, as runtime/paths.c
            try:
                os.mkdir(os.path.dirname(d), 0o700)
            except FileExistsError:
                pass
            except OSError as e:
                raise UnavailableException(f"create '{os.path.dirname(d)}': {e.strerror}") from None
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise UnavailableException(f"create runtime directory '{d}': {e.strerror}") from None
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o066:
        raise UnavailableException(
            f"runtime directory '{d}' is not a private directory of uid {os.geteuid()} (mode 0700 or 0711), refusing to use it")


def find_daemon() -> str:
    """nsboxd next to the nsbox on PATH (a build tree, or the same bin directory), else from PATH.

    The nsbox command looks next to its own executable; a Python program has none of its own,
    so the nsbox it would run stands in for it.
    """
    nsbox = shutil.which("nsbox")
    if nsbox:
        cand = os.path.join(os.path.dirname(os.path.realpath(nsbox)), "nsboxd")
        if os.access(cand, os.X_OK):
            return cand
    return shutil.which("nsboxd") or "nsboxd"


def start_daemon(runtime_dir: str, log: str) -> None:
    """Start nsboxd detached (its own session, stdio to the log) and wait until it listens.

    Losing a race to another client's daemon is fine: the caller connects again.
    """
    if not os.environ.get("NSBOX_SOCKET"):
        _check_private_dir(runtime_dir, True)
    exe = find_daemon()
    r, w = os.pipe()  # O_CLOEXEC by default; pass_fds makes w inheritable in the child only
    try:
        logfd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        os.close(r)
        os.close(w)
        raise UnavailableException(f"start nsboxd: open its log '{log}': {e.strerror}") from None
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")}
    try:
        # sh starts nsboxd in the background and exits: nsboxd is re-parented to init and is
        # never a zombie of this process (the C client forks twice for the same reason)
        sh = subprocess.Popen(["/bin/sh", "-c", '"$0" "$1" </dev/null &', exe, f"--ready-fd={w}"],
                              stdin=subprocess.DEVNULL, stdout=logfd, stderr=logfd, pass_fds=(w, logfd),
                              cwd="/", env=env, start_new_session=True)
        sh.wait()
    except OSError as e:
        raise UnavailableException(f"start nsboxd '{exe}': {e.strerror}") from None
    finally:
        os.close(w)
        os.close(logfd)
    try:
        import select
        ready, _, _ = select.select([r], [], [], AUTOSTART_TIMEOUT)
        if ready:
            os.read(r, 1)  # not ready may mean another daemon won the lock: connect tells
    finally:
        os.close(r)


class Connection:
    """One connection to nsboxd, shared safely by threads."""

    def __init__(self, path: Optional[str] = None, autostart: bool = True):
        runtime_dir, sock_path, log = runtime_paths()
        path = path or sock_path
        self.path = path
        try:
            self._sock = self._connect(path)
        except OSError as e:
            if not (autostart and e.errno in (errno.ENOENT, errno.ECONNREFUSED)):
                raise UnavailableException(f"connect to nsboxd at '{path}': {e.strerror}") from None
            start_daemon(runtime_dir, log)
            try:
                self._sock = self._connect(path)
            except OSError as e2:
                raise UnavailableException(
                    f"connect to nsboxd at '{path}' (its log: '{log}'): {e2.strerror}") from None
        self._rfile = self._sock.makefile("rb")
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._next_id = 0
        self._replies: Dict[int, dict] = {}
        self._handlers: Dict[int, Optional[Callable[[dict], None]]] = {}
        self._events: Dict[int, List[dict]] = {}
        self._reading = False
        self._closed: Optional[str] = None
        self._refused: Optional[SandboxException] = None  # nsboxd refused the connection (id null)

    @staticmethod
    def _connect(path: str) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            s.connect(path)
        except OSError:
            s.close()
            raise
        return s

    def close(self) -> None:
        with self._cond:
            if self._closed is None:
                self._closed = "the connection was closed"
            self._cond.notify_all()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    # ---- requests --------------------------------------------------------------------------

    @property
    def passes_fds(self) -> bool:
        """Whether descriptors can go with requests (SCM_RIGHTS): a unix socket."""
        return self._sock.family == socket.AF_UNIX and hasattr(socket, "SCM_RIGHTS")

    def send(self, method: str, params: Optional[dict] = None,
             on_event: Optional[Callable[[dict], None]] = None, fd: Optional[int] = None) -> int:
        """Send a request; returns its id for wait().  on_event gets its notifications' params.

        fd: a descriptor passed with the request (SCM_RIGHTS), for a call with "fd": true.
        """
        with self._cond:
            if self._closed:
                raise UnavailableException(f"nsboxd at '{self.path}': {self._closed}")
            self._next_id += 1
            rid = self._next_id
            self._handlers[rid] = on_event
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}},
                          separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        try:
            with self._send_lock:
                if fd is None:
                    self._sock.sendall(line)
                else:
                    n = self._sock.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
                    self._sock.sendall(line[n:])
        except OSError as e:
            with self._cond:
                self._handlers.pop(rid, None)
            # nsboxd may have said why before it closed: a refusal of the connection
            try:
                refused = self._refusal(json.loads(self._rfile.readline() or b"null"))
            except (OSError, ValueError):
                refused = None
            if refused is not None:
                raise refused from None
            raise UnavailableException(f"send to nsboxd at '{self.path}': {e.strerror}") from None
        return rid

    @staticmethod
    def _refusal(msg: Any) -> Optional[SandboxException]:
        """An error about the connection (id null), not a request: nsboxd refused it."""
        if not isinstance(msg, dict) or "id" not in msg or msg["id"] is not None:
            return None
        if not isinstance(msg.get("error"), dict):
            return None
        err = msg["error"]
        data = err.get("data") if isinstance(err.get("data"), dict) else {}
        return from_code(str(data.get("code") or "internal"), str(err.get("message") or "nsboxd refused the connection"),
                         err.get("code"))

    def wait(self, rid: int) -> Any:
        """The result of request rid, or its error raised as the exception of its stable code."""
        msg = self._wait_reply(rid)
        err = msg.get("error")
        if err is not None:
            data = err.get("data") if isinstance(err.get("data"), dict) else {}
            raise from_code(str(data.get("code") or "internal"), str(err.get("message") or "nsboxd reported an error"),
                            err.get("code"))
        if "result" not in msg:
            raise SandboxException("nsboxd sent a reply without a result")
        return msg["result"]

    def call(self, method: str, params: Optional[dict] = None,
             on_event: Optional[Callable[[dict], None]] = None) -> Any:
        return self.wait(self.send(method, params, on_event))

    def batch(self, requests: List[Tuple[str, dict]]) -> List[Any]:
        """Send every request, then collect each result or exception, in order (not raised)."""
        ids = [self.send(m, p) for m, p in requests]
        out: List[Any] = []
        for rid in ids:
            try:
                out.append(self.wait(rid))
            except SandboxException as e:
                out.append(e)
        return out

    def _wait_reply(self, rid: int) -> dict:
        # Notifications of a call are queued for it and handed to its handler here, by the
        # thread that waits for it: in order, and free to make calls of its own.
        while True:
            with self._cond:
                while (rid not in self._replies and not self._events.get(rid) and self._reading
                       and not self._closed):
                    self._cond.wait()
                events = self._events.pop(rid, None)
                handler = self._handlers.get(rid)
                if not events:
                    if rid in self._replies:
                        self._handlers.pop(rid, None)
                        return self._replies.pop(rid)
                    if self._closed:
                        self._handlers.pop(rid, None)
                        if self._refused is not None:
                            raise self._refused
                        raise UnavailableException(f"nsboxd at '{self.path}': {self._closed}")
                    self._reading = True
            if events:
                for ev in events:
                    if handler is not None:
                        handler(ev)
                continue
            # read one line for everyone, outside the lock (it may take as long as a command)
            try:
                line = self._rfile.readline()
            except OSError as e:
                line, why = b"", e.strerror
            else:
                why = "nsboxd closed the connection"
            with self._cond:
                self._reading = False
                self._cond.notify_all()
                if not line:
                    self._closed = why
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    self._closed = "nsboxd sent malformed JSON"
                    continue
                if not isinstance(msg, dict):
                    continue  # a client skips lines it does not expect
                refused = self._refusal(msg)
                if refused is not None:
                    self._refused, self._closed = refused, refused.message
                    continue
                if "id" in msg:
                    if msg["id"] in self._handlers:
                        self._replies[msg["id"]] = msg
                elif isinstance(msg.get("params"), dict):
                    call = msg["params"].get("call")
                    if self._handlers.get(call) is not None:
                        self._events.setdefault(call, []).append(msg["params"])
