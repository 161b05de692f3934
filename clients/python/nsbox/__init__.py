"""nsbox: a client of nsboxd, shaped like E2B's Sandbox, with a deepagents backend.

    from nsbox import Sandbox
    with Sandbox.create() as sbx:
        sbx.files.write("hello.py", "print(6*7)")
        print(sbx.commands.run("python3 hello.py").stdout)

Standard library only.  See clients/python/README.md and nsbox-protocol(7).
"""

from ._rpc import Connection, runtime_paths
from .exceptions import (AuthenticationException, CapacityException, CommandExitException, ConflictException,
                         InvalidArgumentException, LimitsWarning, NotFoundException, PermissionDeniedException,
                         SandboxException, TimeoutException, TooLargeException, UnavailableException)
from .code import Context, Execution, ExecutionError, Logs, Result
from .sandbox import (CommandHandle, CommandResult, Commands, EntryInfo, Filesystem, FilesystemEvent,
                      FilesystemEventType, FileType, Pty, PtyHandle, PtySize, Sandbox, SandboxInfo, SandboxQuery, WatchHandle, WriteInfo)

__version__ = "0.1.0"

__all__ = ["Sandbox", "SandboxInfo", "SandboxQuery", "Filesystem", "Commands", "CommandHandle", "CommandResult",
           "EntryInfo", "FileType", "WriteInfo", "FilesystemEvent", "FilesystemEventType", "WatchHandle",
           "Pty", "PtyHandle", "PtySize", "Connection", "runtime_paths", "SandboxException",
           "NotFoundException", "InvalidArgumentException", "PermissionDeniedException", "AuthenticationException",
           "ConflictException", "TooLargeException", "TimeoutException", "CapacityException", "UnavailableException",
           "LimitsWarning",
           "CommandExitException", "Execution", "Result", "Logs", "ExecutionError", "Context"]
