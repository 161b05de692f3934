"""Errors of the nsbox client.

Every error nsboxd reports carries a stable code (nsbox-protocol(7), ERRORS) in ``.code``; the
class is chosen from that code, with E2B's class names where E2B has one, so that code written
for E2B (``except NotFoundException``) keeps working.
"""

from typing import Optional


class SandboxException(Exception):
    """Base class of every error of the client; ``code`` is nsbox's stable code."""

    code = "internal"

    def __init__(self, message: str, code: Optional[str] = None, rpc_code: Optional[int] = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.rpc_code = rpc_code


class NotFoundException(SandboxException):
    """file_not_found (a path) or not_found (a sandbox, process, tool, string to edit...)."""

    code = "not_found"


class InvalidArgumentException(SandboxException):
    """invalid_argument, invalid_path, is_directory, not_a_directory."""

    code = "invalid_argument"


class PermissionDeniedException(SandboxException):
    code = "permission_denied"


class AuthenticationException(PermissionDeniedException):
    """E2B's name for a user the sandbox does not have (it has one, its policy's), which its SDKs
    raise when envd refuses the user; the client raises it before calling (permission_denied)."""


class ConflictException(SandboxException):
    """Exists already, not unique, busy (a sandbox paused or starting...)."""

    code = "conflict"


class TooLargeException(SandboxException):
    code = "too_large"


class TimeoutException(SandboxException):
    """A command's timeout fired, a process_wait timed out, or the sandbox expired."""

    code = "timeout"


class CapacityException(SandboxException):
    """A limit of nsboxd on the number or memory of sandboxes is reached: try again later."""

    code = "capacity"


class UnavailableException(SandboxException):
    """nsboxd is stopping, or cannot be reached or started."""

    code = "unavailable"


class LimitsWarning(UserWarning):
    """A limit asked for does not hold on this host (created with limits="best-effort", or a
    best-effort policy or template): the sandbox runs without it.  Its text is nsboxd's."""


_BY_CODE = {
    "file_not_found": NotFoundException,
    "not_found": NotFoundException,
    "invalid_argument": InvalidArgumentException,
    "invalid_path": InvalidArgumentException,
    "is_directory": InvalidArgumentException,
    "not_a_directory": InvalidArgumentException,
    "permission_denied": PermissionDeniedException,
    "conflict": ConflictException,
    "too_large": TooLargeException,
    "timeout": TimeoutException,
    "capacity": CapacityException,
    "unavailable": UnavailableException,
}


def from_code(code: str, message: str, rpc_code: Optional[int] = None) -> SandboxException:
    """The exception for a stable code (an unknown one is a plain SandboxException)."""
    return _BY_CODE.get(code, SandboxException)(message, code, rpc_code)


class CommandExitException(SandboxException):
    """A command run with commands.run() (or waited for) exited with a non-zero status.

    It carries the command's result, as E2B's does: stdout, stderr, exit_code, error.
    """

    code = "command_exit"

    def __init__(self, stdout: str, stderr: str, exit_code: int, error: Optional[str] = None, result=None):
        super().__init__(f"command exited with status {exit_code}" + (f": {error}" if error else ""))
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code
        self.error = error
        self.result = result
