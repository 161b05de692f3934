"""E2B's Sandbox as E2B's SDK shapes it, on nsboxd: code written for ``e2b`` runs with only
its import changed.

    from nsbox.e2b import Sandbox, CommandExitException
    sbx = Sandbox.create("base", timeout=120, metadata={"task": "demo"})
    try:
        sbx.commands.run("ls /nope")
    except CommandExitException as e:
        print(e)            # Command exited with code 2 and error:\\nls: cannot access ...
    Sandbox.pause(sbx.sandbox_id)          # kept, paused, past its timeout
    sbx = Sandbox.connect(sbx.sandbox_id)  # resumed

Where E2B and nsbox's own ``nsbox.Sandbox`` differ, this class follows E2B: the first
positional argument is the template (nsbox's is a policy), a paused sandbox is kept until it is
resumed or killed (its timeout no longer runs), kill/pause/set_timeout/get_info work on the
class with a sandbox id too, and a non-zero exit's message carries stderr.  E2B's connection
arguments (api_key, domain, request_timeout, ...) are accepted and ignored: nsboxd is local.
"""

import functools
from typing import Any, Callable, Dict, Optional

from . import sandbox as _base
from ._rpc import Connection
from .exceptions import CommandExitException as _NsboxCommandExit
from .exceptions import AuthenticationException, InvalidArgumentException, NotFoundException

# E2B's keyword arguments that mean nothing to a local nsboxd (its connection, its cloud)
E2B_IGNORED = frozenset((
    "api_key", "access_token", "domain", "debug", "request_timeout", "proxy", "headers", "secure",
    "allow_internet_access", "network", "mcp", "auto_resume", "api_url", "sandbox_url",
    "connection_config", "validate", "opts"))

DEFAULT_TIMEOUT = 300  # E2B's, seconds


class CommandExitException(_NsboxCommandExit):
    """E2B's: ``str(e)`` is ``Command exited with code N and error:\\n<stderr>``; exit_code,
    stdout, stderr and error as nsbox's (which it subclasses)."""

    def __str__(self) -> str:
        return f"Command exited with code {self.exit_code} and error:\n{self.stderr}"


class _dual:
    """A method callable on an instance (``sbx.kill()``) or on the class with a sandbox id
    (``Sandbox.kill(sandbox_id)``), as E2B's class_method_variant."""

    def __init__(self, on_class: Callable[..., Any]):
        self._on_class = on_class
        self._on_instance: Optional[Callable[..., Any]] = None

    def instance(self, fn: Callable[..., Any]) -> "_dual":
        self._on_instance = fn
        return self

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        if obj is None:
            return functools.partial(self._on_class, cls)
        return functools.partial(self._on_instance, obj)


def _check_id(sandbox_id: Any) -> str:
    if not isinstance(sandbox_id, str) or not sandbox_id:
        raise InvalidArgumentException(f"expected a sandbox id (a non-empty string), not {sandbox_id!r}",
                                       "invalid_argument")
    return sandbox_id


def _with_conn(socket: Optional[str], fn: Callable[[Connection], Any]) -> Any:
    conn = Connection(socket)
    try:
        return fn(conn)
    finally:
        conn.close()


def _find(conn: Connection, sandbox_id: str) -> Dict[str, Any]:
    """The sandbox of that id, or of a unique prefix of 4 characters or more."""
    found = [s for s in conn.call("list", {})["sandboxes"]
             if s["id"] == sandbox_id or (len(sandbox_id) >= 4 and s["id"].startswith(sandbox_id))]
    exact = [s for s in found if s["id"] == sandbox_id]
    if exact or len(found) == 1:
        return (exact or found)[0]
    raise NotFoundException(f"no sandbox '{sandbox_id}' (see Sandbox.list())", "not_found")


def _pause(conn: Connection, sandbox_id: str, keep_memory: bool = True) -> None:
    # E2B keeps a paused sandbox until it is resumed or killed: its timeout stops.  Without
    # memory only its files stay (its processes are killed) and its resume is a reboot.
    if not isinstance(keep_memory, bool):
        raise InvalidArgumentException(f"pause: keep_memory must be True or False, not {keep_memory!r}", "invalid_argument")
    conn.call("pause", {"sandbox": sandbox_id, "memory": keep_memory})
    conn.call("set_timeout", {"sandbox": sandbox_id, "timeout": 0})


def _on_expiry(lifecycle: Any, auto_pause: bool) -> Optional[str]:
    """E2B's lifecycle={"on_timeout": "kill" | "pause" | {"action": ..., "keep_memory": bool}}
    as nsbox's on_expiry (destroy, pause, pause_files); None: nsboxd's default."""
    if lifecycle is None:
        return "pause" if auto_pause else None
    bad = InvalidArgumentException(
        f"lifecycle: expected {{'on_timeout': 'kill' | 'pause' | {{'action': 'pause', 'keep_memory': bool}}}}, not {lifecycle!r}",
        "invalid_argument")
    if not isinstance(lifecycle, dict) or set(lifecycle) - {"on_timeout", "auto_resume"}:
        raise bad
    on = lifecycle.get("on_timeout")
    if on is None:
        return "pause" if auto_pause else None
    keep = True
    if isinstance(on, dict):
        if set(on) - {"action", "keep_memory"} or (on.get("action") != "pause" and "keep_memory" in on):
            raise bad
        keep = on.get("keep_memory", True)
        on = on.get("action")
    if on not in ("kill", "pause") or not isinstance(keep, bool):
        raise bad
    return "destroy" if on == "kill" else "pause" if keep else "pause_files"


def _resume(conn: Connection, info: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
    if info.get("state") == "paused":
        info = conn.call("resume", {"sandbox": info["id"]})
        timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if timeout is not None:
        info = conn.call("set_timeout", {"sandbox": info["id"], "timeout": timeout})
    return info


def _template(template: Optional[str], socket: Optional[str]) -> Optional[str]:
    """E2B's "base" is nsboxd's default policy, unless its configuration has a "base" template."""
    if template is not None and not isinstance(template, str):
        raise InvalidArgumentException(f"Sandbox: template must be a template name, not {template!r}",
                                       "invalid_argument")
    if template == "base" and "base" not in (_with_conn(socket, lambda c: c.call("stats", {})).get("templates") or {}):
        return None
    return template


class Sandbox(_base.Sandbox):
    """E2B's Sandbox on nsboxd (see the module's docstring)."""

    _exit_exception = CommandExitException

    def __init__(self, template: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 metadata: Optional[Dict[str, str]] = None, envs: Optional[Dict[str, str]] = None,
                 *, auto_pause: bool = False, policy: Optional[str] = None, socket: Optional[str] = None,
                 **kwargs):
        """Create a sandbox of template (None or "base": nsboxd's default policy, unless its
        configuration has a template "base"; another name: a template of nsboxd's
        configuration).  timeout: seconds until it is killed (or paused with auto_pause); 0 or
        None: no limit.  Other keyword arguments are nsbox create's (memory, cpus, net, ...),
        except E2B's connection arguments, which are ignored."""
        attach = kwargs.pop("_attach", None)
        for k in E2B_IGNORED:
            kwargs.pop(k, None)
        if attach is not None:
            super().__init__(socket=socket, _attach=attach)
            return
        template = _template(template, socket)
        on_expiry = _on_expiry(kwargs.pop("lifecycle", None), auto_pause)
        if on_expiry:
            kwargs["on_expiry"] = on_expiry
        super().__init__(policy=policy, timeout=timeout or None, metadata=metadata, envs=envs, template=template,
                         socket=socket, **kwargs)

    @classmethod
    def create(cls, template: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
               metadata: Optional[Dict[str, str]] = None, envs: Optional[Dict[str, str]] = None,
               **kwargs) -> "Sandbox":
        return cls(template, timeout, metadata, envs, **kwargs)

    @classmethod
    def beta_create(cls, template: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
                    auto_pause: bool = False, **kwargs) -> "Sandbox":
        """E2B's beta_create: auto_pause=True pauses it at its timeout instead of killing it."""
        return cls(template, timeout, auto_pause=auto_pause, **kwargs)

    @classmethod
    def connect(cls, sandbox_id: str, timeout: Optional[float] = None, socket: Optional[str] = None,
                **_ignored) -> "Sandbox":
        """Attach to a sandbox; a paused one is resumed with timeout (default 300 s) to live."""
        _check_id(sandbox_id)
        info = _with_conn(socket, lambda c: _resume(c, _find(c, sandbox_id), timeout))
        return cls(socket=socket, _attach=info)

    @classmethod
    def get_or_create(cls, metadata: Dict[str, str], template: Optional[str] = None,
                      timeout: Optional[float] = DEFAULT_TIMEOUT, envs: Optional[Dict[str, str]] = None,
                      socket: Optional[str] = None, **kwargs) -> "Sandbox":
        """The sandbox whose metadata includes all of metadata, or a new one with it (nsboxd's
        get_or_create: threads and processes asking at once get the same one).  A paused one
        is resumed.  ``.created`` says whether this call made it."""
        if not isinstance(metadata, dict) or not metadata:
            raise InvalidArgumentException("get_or_create: metadata must name the sandbox (a non-empty dict)",
                                           "invalid_argument")
        for k in E2B_IGNORED:
            kwargs.pop(k, None)
        params: Dict[str, Any] = dict(kwargs, labels=dict(metadata))
        template = _template(template, socket)
        if template is not None:
            params["template"] = template
        if timeout:
            params["timeout"] = timeout
        if envs:
            params["env"] = dict(envs)

        def get(c: Connection) -> Dict[str, Any]:
            info = c.call("get_or_create", params)
            created = bool(info.get("created"))
            if info.get("state") == "paused":
                info = _resume(c, info, timeout)
            return dict(info, created=created)

        info = _with_conn(socket, get)
        _base._warn_limits(info)
        sbx = cls(socket=socket, _attach=info)
        sbx.created = info["created"]
        return sbx

    # ---- on the instance, or on the class with an id ----------------------------------------

    def _kill_cls(cls, sandbox_id: str, socket: Optional[str] = None, **_ignored) -> bool:
        _check_id(sandbox_id)
        try:
            _with_conn(socket, lambda c: c.call("destroy", {"sandbox": sandbox_id}))
            return True
        except NotFoundException:
            return False

    kill = _dual(_kill_cls).instance(lambda self, **_ignored: _base.Sandbox.kill(self))
    stop = kill

    def _pause_cls(cls, sandbox_id: str, socket: Optional[str] = None, keep_memory: bool = True, **_ignored) -> str:
        _check_id(sandbox_id)
        _with_conn(socket, lambda c: _pause(c, _find(c, sandbox_id)["id"], keep_memory))
        return sandbox_id

    def _pause_self(self, keep_memory: bool = True, **_ignored) -> str:
        _pause(self._conn, self.sandbox_id, keep_memory)
        return self.sandbox_id

    pause = _dual(_pause_cls).instance(_pause_self)
    beta_pause = pause

    def _resume_cls(cls, sandbox_id: str, timeout: Optional[float] = None, socket: Optional[str] = None,
                    **_ignored) -> "Sandbox":
        return cls.connect(sandbox_id, timeout=timeout, socket=socket)

    def _resume_self(self, timeout: Optional[float] = None, **_ignored) -> "Sandbox":
        self._info = _resume(self._conn, {"id": self.sandbox_id, "state": "paused"}, timeout)
        return self

    resume = _dual(_resume_cls).instance(_resume_self)

    def _set_timeout_cls(cls, sandbox_id: str, timeout: float, socket: Optional[str] = None, **_ignored) -> None:
        _check_id(sandbox_id)
        _with_conn(socket, lambda c: c.call("set_timeout", {"sandbox": _find(c, sandbox_id)["id"], "timeout": timeout}))

    set_timeout = _dual(_set_timeout_cls).instance(
        lambda self, timeout, **_ignored: _base.Sandbox.set_timeout(self, timeout))

    def _get_info_cls(cls, sandbox_id: str, socket: Optional[str] = None, **_ignored) -> _base.SandboxInfo:
        _check_id(sandbox_id)
        return _base.SandboxInfo._from(_with_conn(socket, lambda c: _find(c, sandbox_id)))

    get_info = _dual(_get_info_cls).instance(lambda self, **_ignored: _base.Sandbox.get_info(self))

    def __exit__(self, *exc) -> None:
        try:
            _base.Sandbox.kill(self)
        finally:
            self.close()


__all__ = ["Sandbox", "AuthenticationException", "CommandExitException", "DEFAULT_TIMEOUT", "E2B_IGNORED"]
