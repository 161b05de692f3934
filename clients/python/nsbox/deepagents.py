"""A LangChain deepagents sandbox backend on nsbox's own tools.

    from deepagents import create_deep_agent
    from nsbox.deepagents import NsboxBackend
    agent = create_deep_agent(model=..., backend=NsboxBackend())

Every method is one or a few nsbox tool calls (exec, list_dir, read_file, write_file, edit_file,
remove, grep, glob, stat), never a program run inside the sandbox.  The results are deepagents' own
classes when deepagents is installed, else dataclasses of the same names and fields; file
errors use deepagents' names (file_not_found, permission_denied, is_directory, invalid_path).
"""

import base64
import datetime
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .exceptions import SandboxException
from .sandbox import Sandbox

try:  # the real classes when deepagents is there, so that isinstance() checks hold
    from deepagents.backends import protocol as _da
except ImportError:  # pragma: no cover - deepagents is optional
    _da = None


def _pick(name: str, fallback: type) -> type:
    return getattr(_da, name, fallback) if _da is not None else fallback


@dataclass
class ExecuteResponse:
    output: str
    exit_code: Optional[int] = None
    truncated: bool = False


@dataclass
class LsResult:
    error: Optional[str] = None
    entries: Optional[List[Dict[str, Any]]] = None


@dataclass
class ReadResult:
    error: Optional[str] = None
    file_data: Optional[Dict[str, Any]] = None
    total_lines: Optional[int] = None
    start_line: Optional[int] = None
    end_line: Optional[int] = None
    next_offset: Optional[int] = None
    no_lines_requested: bool = False


@dataclass
class WriteResult:
    error: Optional[str] = None
    path: Optional[str] = None


@dataclass
class EditResult:
    error: Optional[str] = None
    path: Optional[str] = None
    occurrences: Optional[int] = None


@dataclass
class DeleteResult:
    error: Optional[str] = None
    path: Optional[str] = None


@dataclass
class GrepResult:
    error: Optional[str] = None
    matches: Optional[List[Dict[str, Any]]] = None
    truncated: bool = False


@dataclass
class GlobResult:
    error: Optional[str] = None
    matches: Optional[List[Dict[str, Any]]] = None
    truncated: bool = False


@dataclass
class FileUploadResponse:
    path: str
    error: Optional[str] = None


@dataclass
class FileDownloadResponse:
    path: str
    content: Optional[bytes] = None
    error: Optional[str] = None


ExecuteResponse = _pick("ExecuteResponse", ExecuteResponse)
LsResult = _pick("LsResult", LsResult)
ReadResult = _pick("ReadResult", ReadResult)
WriteResult = _pick("WriteResult", WriteResult)
EditResult = _pick("EditResult", EditResult)
DeleteResult = _pick("DeleteResult", DeleteResult)
GrepResult = _pick("GrepResult", GrepResult)
GlobResult = _pick("GlobResult", GlobResult)
FileUploadResponse = _pick("FileUploadResponse", FileUploadResponse)
FileDownloadResponse = _pick("FileDownloadResponse", FileDownloadResponse)
_Base = _pick("SandboxBackendProtocol", object)
# deepagents before its 2026 protocol has no ReadResult: read() returned the text itself
LEGACY_READ = _da is not None and not hasattr(_da, "ReadResult")

# deepagents' FileOperationError names; nsbox's stable codes of the same name map to themselves
FILE_ERRORS = ("file_not_found", "permission_denied", "is_directory", "invalid_path")


def _code(e: SandboxException) -> str:
    if e.code in FILE_ERRORS:
        return e.code
    if e.code == "not_a_directory":
        return "invalid_path"  # a path that goes through a file
    return e.code


def _err(e: SandboxException) -> str:
    # a message for the model: what failed, and the stable name a program can test
    return f"Error: {_code(e)}: {e.message}"


def _iso(mtime: Optional[float]) -> Optional[str]:
    if mtime is None:
        return None
    return datetime.datetime.fromtimestamp(mtime, tz=datetime.timezone.utc).isoformat()


def _file_info(e: Dict[str, Any]) -> Dict[str, Any]:
    info: Dict[str, Any] = {"path": e["path"], "is_dir": e.get("type") == "directory"}
    if e.get("size") is not None:
        info["size"] = int(e["size"])
    if e.get("mtime") is not None:
        info["modified_at"] = _iso(e["mtime"])
    return info


def _glob_part(part: str) -> str:
    """One path component of a glob as a regular expression: * ? [...] as in the shell; a
    name beginning with a dot only for a part beginning with one."""
    out, i = [] if part.startswith(".") else [r"(?!\.)"], 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = part.find("]", i + 2 if part[i + 1:i + 2] in ("!", "^") else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = part[i + 1:j]
                body = "^" + body[1:] if body[:1] in ("!", "^") else body
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _glob_regex(pattern: str, bare: bool) -> "re.Pattern[str]":
    """deepagents' glob (see NsboxBackend.glob) as a regular expression over the path
    relative to the search root."""
    if bare:  # the file name at any depth, under any directory
        return re.compile(r"(?:.*/)?" + _glob_part(pattern))
    parts = [p for p in pattern.split("/") if p]
    rx = ""
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if part == "**":  # any number of directories not beginning with a dot
            rx += r"(?:(?!\.)[^/]+/)*" + (r"(?!\.)[^/]+" if last else "")
        else:
            rx += _glob_part(part) + ("" if last else "/")
    return re.compile(rx)


def _legacy_text(r: Any, offset: int) -> str:
    """A ReadResult as deepagents' read() returned it before 2026: the lines numbered from
    offset + 1 (6 columns and a tab, as cat -n), or the error."""
    if r.error:
        return r.error
    data = r.file_data or {}
    if data.get("encoding") == "base64":
        return data.get("content", "")
    text = data.get("content", "")
    if not text:
        return "System reminder: File exists but has empty contents"
    start = (r.start_line or (max(int(offset or 0), 0) + 1))
    return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(text.splitlines(), start))


class NsboxBackend(_Base):  # type: ignore[misc,valid-type]
    """deepagents' SandboxBackendProtocol on an nsbox sandbox.

    NsboxBackend(sandbox) uses an existing Sandbox; NsboxBackend(**create_params) creates one
    (Sandbox.create's arguments) and close() destroys it.  Paths must be absolute, as deepagents
    requires; a relative one is invalid_path.
    """

    def __init__(self, sandbox: Optional[Sandbox] = None, *, default_timeout: Optional[float] = None,
                 max_output: int = 1 << 20, **create_params):
        self._owned = sandbox is None
        self.sandbox = sandbox if sandbox is not None else Sandbox.create(**create_params)
        self.default_timeout = default_timeout
        self.max_output = max_output

    @property
    def id(self) -> str:
        return self.sandbox.sandbox_id

    def close(self) -> None:
        if self._owned:
            self.sandbox.kill()
        self.sandbox.close()

    def __enter__(self) -> "NsboxBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def _absolute(path: Optional[str]) -> Optional[str]:
        if not isinstance(path, str) or not path.startswith("/"):
            return f"Error: invalid_path: path must be absolute (start with '/'), not {path!r}"
        return None

    # ---- execute ------------------------------------------------------------------------------

    def execute(self, command: str, *, timeout: Optional[int] = None) -> Any:
        """Run a shell command line (exec, streamed): output is stdout and stderr in the order
        they were read, the first max_output bytes; exit_code 124 when timeout fired."""
        if not isinstance(command, str) or not command:
            return ExecuteResponse(output="Error: invalid_argument: command must be a non-empty string", exit_code=1)
        limit = timeout if timeout is not None else self.default_timeout
        chunks: List[bytes] = []
        kept = 0
        truncated = False

        def on_event(ev: Dict[str, Any]) -> None:
            nonlocal kept, truncated
            if ev.get("event") in ("stdout", "stderr") and "data_b64" in ev:
                data = base64.b64decode(ev["data_b64"])
                room = self.max_output - kept
                if len(data) > room:
                    data, truncated = data[:max(room, 0)], True
                chunks.append(data)
                kept += len(data)

        params: Dict[str, Any] = {"shell": command}
        if limit:
            params["timeout"] = limit
        try:
            r = self.sandbox._call("exec", params, on_event=on_event, stream=True)
        except SandboxException as e:
            return ExecuteResponse(output=_err(e), exit_code=None)
        output = b"".join(chunks).decode("utf-8", errors="replace")
        if r.get("timed_out"):
            output += f"\n[nsbox: command timed out after {limit} s and was killed]"
        return ExecuteResponse(output=output, exit_code=int(r.get("exit_code", -1)), truncated=truncated)

    async def aexecute(self, command: str, *, timeout: Optional[int] = None) -> Any:
        import asyncio
        return await asyncio.to_thread(self.execute, command, timeout=timeout)

    # ---- files --------------------------------------------------------------------------------

    def ls(self, path: str) -> Any:
        """The directory's own entries (list_dir) as FileInfo dicts: path, is_dir, size, modified_at."""
        bad = self._absolute(path)
        if bad:
            return LsResult(error=bad)
        try:
            r = self.sandbox._call("list_dir", {"path": path})
        except SandboxException as e:
            return LsResult(error=_err(e))
        return LsResult(entries=[_file_info(e) for e in r["entries"]])

    def ls_info(self, path: str) -> List[Dict[str, Any]]:
        """Older deepagents' name: the entries, or [] on error."""
        return self.ls(path).entries or []

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> Any:
        """Lines offset (from 0) to offset+limit of a text file (read_file), raw; a file that is
        not UTF-8 comes whole, base64-encoded.  With a deepagents older than its 2026 protocol
        (no ReadResult), the text with line numbers, or the error, as a str (its contract)."""
        r = self._read(file_path, offset, limit)
        return _legacy_text(r, offset) if LEGACY_READ else r

    def _read(self, file_path: str, offset: int, limit: int) -> Any:
        bad = self._absolute(file_path)
        if bad:
            return ReadResult(error=bad)
        offset = max(int(offset or 0), 0)
        if int(limit) <= 0:
            return ReadResult(file_data={"content": "", "encoding": "utf-8"}, no_lines_requested=True)
        try:
            r = self.sandbox._call("read_file", {"path": file_path, "offset": offset, "limit": min(int(limit), 100000)})
            if r.get("lossy"):
                b = self.sandbox._call("read_file", {"path": file_path, "encoding": "base64"})
                return ReadResult(file_data={"content": b["content"], "encoding": "base64"})
        except SandboxException as e:
            return ReadResult(error=_err(e))
        total = int(r["total_lines"])
        if total == 0:
            return ReadResult(file_data={"content": "", "encoding": "utf-8"})
        if offset >= total:
            return ReadResult(error=f"Error: line offset {offset} is past the end of '{r['path']}' ({total} lines)")
        # nsbox counts lines from 0, start inclusive, end exclusive; deepagents from 1, inclusive
        return ReadResult(file_data={"content": r["content"], "encoding": "utf-8"}, total_lines=total,
                          start_line=int(r["start_line"]) + 1, end_line=int(r["end_line"]),
                          next_offset=r.get("next_offset"))

    def write(self, file_path: str, content: str) -> Any:
        """Create or replace a file, parents created (write_file)."""
        bad = self._absolute(file_path)
        if bad:
            return WriteResult(error=bad)
        if not isinstance(content, str):
            return WriteResult(error="Error: invalid_argument: content must be a string")
        try:
            r = self.sandbox._call("write_file", {"path": file_path, "content": content})
        except SandboxException as e:
            return WriteResult(error=_err(e))
        return WriteResult(path=r["path"])

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> Any:
        """Replace old_string with new_string exactly (edit_file)."""
        bad = self._absolute(file_path)
        if bad:
            return EditResult(error=bad)
        try:
            r = self.sandbox._call("edit_file", {"path": file_path, "old_string": old_string,
                                                 "new_string": new_string, "replace_all": bool(replace_all)})
        except SandboxException as e:
            if e.code == "not_found":
                return EditResult(error=f"Error: String not found in file: '{old_string}'")
            if e.code == "conflict":
                return EditResult(error=f"Error: String '{old_string}' appears multiple times. "
                                        "Use replace_all=True to replace all occurrences.")
            return EditResult(error=_err(e))
        return EditResult(path=r["path"], occurrences=int(r["occurrences"]))

    def delete(self, file_path: str) -> Any:
        """Remove a file, or a directory and everything in it (remove, recursive)."""
        bad = self._absolute(file_path)
        if bad:
            return DeleteResult(error=bad)
        if file_path.rstrip("/") == "":
            return DeleteResult(error="Error: invalid_path: refusing to delete '/'")
        try:
            r = self.sandbox._call("remove", {"path": file_path, "recursive": True})
        except SandboxException as e:
            return DeleteResult(error=_err(e))
        return DeleteResult(path=r.get("path") or file_path)

    async def adelete(self, file_path: str) -> Any:
        import asyncio
        return await asyncio.to_thread(self.delete, file_path)

    def grep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None, *,
             max_count: Optional[int] = None) -> Any:
        """Lines holding pattern literally (grep, fixed) in the files below path (default: the
        working directory): {path, line, text}."""
        if path is not None:
            bad = self._absolute(path)
            if bad:
                return GrepResult(error=bad)
        if not isinstance(pattern, str) or not pattern:
            return GrepResult(error="Error: invalid_argument: pattern must be a non-empty string")
        # no path: the tool's default, the working directory (deepagents' contract), not "/"
        params: Dict[str, Any] = {"pattern": pattern, "fixed": True}
        if path:
            params["path"] = path
        if glob:
            params["glob"] = glob
        if max_count is not None:
            params["max_count"] = max(1, min(int(max_count), 100000))
        try:
            r = self.sandbox._call("grep", params)
        except SandboxException as e:
            return GrepResult(error=_err(e))
        return GrepResult(matches=[{"path": m["path"], "line": int(m["line"]), "text": m["text"]}
                                   for m in r["matches"]], truncated=bool(r.get("truncated")))

    def grep_raw(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None):
        """Older deepagents' name: the matches, or the error string."""
        r = self.grep(pattern, path, glob)
        return r.error if r.error else r.matches

    def glob(self, pattern: str, path: Optional[str] = None) -> Any:
        """Files matching pattern below path (default "/"), as FileInfo dicts, by deepagents'
        contract: a pattern without "/" matches the file name at any depth; one with "/" the
        path relative to path, with "**"; a leading "/" anchors it at path ("/*.py": the top
        level only); a name beginning with a dot matches only a pattern part beginning with
        one, and "**" does not enter dot-directories; only files (not directories) come back.
        One glob call, then one stat per candidate, pipelined."""
        base = path or "/"
        bad = self._absolute(base)
        if bad:
            return GlobResult(error=bad)
        if not isinstance(pattern, str) or not pattern.strip("/"):
            return GlobResult(error="Error: invalid_argument: pattern must be a non-empty string")
        anchored = pattern.lstrip("/")
        bare = "/" not in pattern
        try:
            want = _glob_regex(anchored, bare)
            r = self.sandbox._call("glob", {"pattern": "**/" + anchored if bare else anchored, "path": base})
        except re.error as e:
            return GlobResult(error=f"Error: invalid_argument: bad glob pattern {pattern!r}: {e}")
        except SandboxException as e:
            return GlobResult(error=_err(e))
        root = r.get("path") or base
        prefix = root.rstrip("/") + "/"
        cands = [p for p in r["matches"] if p.startswith(prefix) and want.fullmatch(p[len(prefix):])]
        sid = self.sandbox.sandbox_id
        stats = self.sandbox._conn.batch([("call", {"sandbox": sid, "tool": "stat", "params": {"path": p}})
                                          for p in cands])
        out = [_file_info(st) if isinstance(st, dict) else {"path": p} for p, st in zip(cands, stats)
               if not (isinstance(st, dict) and st.get("type") == "directory")]
        return GlobResult(matches=out, truncated=bool(r.get("truncated")))

    def glob_info(self, pattern: str, path: str = "/") -> List[Dict[str, Any]]:
        """Older deepagents' name: the matches, or [] on error."""
        return self.glob(pattern, path).matches or []

    def upload_files(self, files: List[Tuple[str, bytes]]) -> List[Any]:
        """Write each (path, bytes) (write_file, pipelined); one response per file, in order."""
        out: List[Any] = [None] * len(files)
        reqs, where = [], []
        sid = self.sandbox.sandbox_id
        for i, item in enumerate(files):
            path, data = (item[0], item[1]) if isinstance(item, (tuple, list)) and len(item) == 2 else (None, None)
            if self._absolute(path):
                out[i] = FileUploadResponse(path=path if isinstance(path, str) else str(path), error="invalid_path")
                continue
            if not isinstance(data, (bytes, bytearray, memoryview)):
                out[i] = FileUploadResponse(path=path, error="invalid_argument")
                continue
            reqs.append(("call", {"sandbox": sid, "tool": "write_file",
                                  "params": {"path": path, "content_b64": base64.b64encode(bytes(data)).decode()}}))
            where.append(i)
        for i, res in zip(where, self.sandbox._conn.batch(reqs)):
            out[i] = FileUploadResponse(path=files[i][0], error=_code(res) if isinstance(res, SandboxException) else None)
        return out

    def download_files(self, paths: List[str]) -> List[Any]:
        """Read each file whole (read_file base64, pipelined); one response per path, in order."""
        out: List[Any] = [None] * len(paths)
        reqs, where = [], []
        sid = self.sandbox.sandbox_id
        for i, p in enumerate(paths):
            if self._absolute(p):
                out[i] = FileDownloadResponse(path=p if isinstance(p, str) else str(p), content=None,
                                              error="invalid_path")
                continue
            reqs.append(("call", {"sandbox": sid, "tool": "read_file", "params": {"path": p, "encoding": "base64"}}))
            where.append(i)
        for i, res in zip(where, self.sandbox._conn.batch(reqs)):
            if isinstance(res, SandboxException):
                out[i] = FileDownloadResponse(path=paths[i], content=None, error=_code(res))
            else:
                out[i] = FileDownloadResponse(path=paths[i], content=base64.b64decode(res["content"]), error=None)
        return out


__all__ = ["NsboxBackend", "ExecuteResponse", "LsResult", "ReadResult", "WriteResult", "EditResult", "DeleteResult",
           "GrepResult", "GlobResult", "FileUploadResponse", "FileDownloadResponse", "FILE_ERRORS"]
