"""The code interpreter's results, shaped like E2B's code-interpreter SDK (``Execution``,
``Result``, ``Logs``, ``ExecutionError``, ``Context``), from nsbox's tools run_code and
create_code_context (nsbox-protocol(7)): the sandbox's agent runs the cells in live kernels."""

import base64
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .exceptions import InvalidArgumentException

# what run_code's "language" takes (the server's aliases: py, js, node, sh, ...)
CODE_LANGUAGES = ("python", "python3", "py", "ipython", "javascript", "js", "node", "typescript", "ts", "r",
                  "java", "bash", "sh", "shell")

_FORMATS = ("text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json", "javascript", "data", "chart")


@dataclass
class Result:
    """One output of a cell: the value of its last expression (is_main_result) or something it
    displayed (a chart: png), in every format it had."""

    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None          # base64, as E2B gives it
    jpeg: Optional[str] = None
    pdf: Optional[str] = None
    latex: Optional[str] = None
    json: Optional[Any] = None
    javascript: Optional[str] = None
    data: Optional[Any] = None
    chart: Optional[Any] = None
    is_main_result: bool = False
    extra: Optional[Dict[str, Any]] = None

    @classmethod
    def _from(cls, r: Dict[str, Any]) -> "Result":
        return cls(**{k: r.get(k) for k in _FORMATS}, is_main_result=bool(r.get("is_main_result")),
                   extra=r.get("extra"))

    def formats(self) -> List[str]:
        """The formats this result has, e.g. ["text", "png"]."""
        return [k for k in _FORMATS if getattr(self, k) is not None] + list(self.extra or {})

    def png_bytes(self) -> Optional[bytes]:
        return None if self.png is None else base64.b64decode(self.png)

    def __str__(self) -> str:
        return self.text or ""


@dataclass
class Logs:
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class ExecutionError:
    """An exception the cell raised: its class name, its message and the traceback."""

    name: str
    value: str
    traceback: str


@dataclass
class Execution:
    """What a cell did (E2B's Execution): results, logs, error; text is the main result's."""

    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def text(self) -> Optional[str]:
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @classmethod
    def _from(cls, x: Dict[str, Any]) -> "Execution":
        logs = x.get("logs") or {}
        err = x.get("error")
        return cls(results=[Result._from(r) for r in x.get("results") or []],
                   logs=Logs(list(logs.get("stdout") or []), list(logs.get("stderr") or [])),
                   error=ExecutionError(err.get("name") or "", err.get("value") or "", err.get("traceback") or "")
                   if isinstance(err, dict) else None,
                   execution_count=x.get("execution_count"), raw=x)


@dataclass
class Context:
    """A code context: a kernel of its own (create_code_context)."""

    id: str
    language: str
    cwd: str

    @classmethod
    def _from(cls, c: Dict[str, Any]) -> "Context":
        return cls(c.get("id", ""), c.get("language", ""), c.get("cwd", ""))


def context_id(context: Any) -> str:
    """A Context or its id."""
    cid = context.id if isinstance(context, Context) else context
    if not isinstance(cid, str) or not cid:
        raise InvalidArgumentException(f"context must be a Context or its id, not {context!r}", "invalid_argument")
    return cid


def check_language(language: Optional[str]) -> None:
    if language is not None and (not isinstance(language, str) or language.lower() not in CODE_LANGUAGES):
        raise InvalidArgumentException(f"run_code: unknown language {language!r} (python, r, javascript, typescript, java or bash)",
                                       "invalid_argument")


class CellEvents:
    """run_code's events (streamed) to the callbacks: stdout and stderr as text, results as
    Result, the error as ExecutionError."""

    def __init__(self, on_stdout: Optional[Callable[[str], None]], on_stderr: Optional[Callable[[str], None]],
                 on_result: Optional[Callable[[Result], None]], on_error: Optional[Callable[[ExecutionError], None]]):
        self.cbs = {"stdout": on_stdout, "stderr": on_stderr}
        self.on_result, self.on_error = on_result, on_error

    def __call__(self, ev: Dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind in self.cbs and self.cbs[kind] and "data_b64" in ev:
            self.cbs[kind](base64.b64decode(ev["data_b64"]).decode("utf-8", "replace"))
        elif kind == "result" and self.on_result and isinstance(ev.get("result"), dict):
            self.on_result(Result._from(ev["result"]))
        elif kind == "error" and self.on_error and isinstance(ev.get("error"), dict):
            e = ev["error"]
            self.on_error(ExecutionError(e.get("name") or "", e.get("value") or "", e.get("traceback") or ""))
