"""llm-sandbox's SandboxSession on nsboxd: code written for ``llm_sandbox`` runs with only its
import changed.

    from nsbox.llm_sandbox import SandboxSession
    with SandboxSession(lang="python") as session:
        print(session.run("open('n.txt', 'w').write('7')").exit_code)    # 0
        print(session.run("print(open('n.txt').read())").stdout)        # 7 (same workdir)
        session.copy_to_runtime("data.csv", "/sandbox/data.csv")
        print(session.execute_command("ls /sandbox").stdout)

One sandbox per session, made at open() (or ``with``) and destroyed at close().  Its working
directory is llm-sandbox's ``/sandbox`` (workdir=), made writable by nsbox in the sandbox's
own file system, so what the code writes there stays for the next run() of the session.
Languages: python, javascript (node), bash, and java, cpp, go, ruby, r where the sandbox's root
has their command; a missing one gives exit code 127 and stderr naming the command.
llm-sandbox's Docker/Kubernetes arguments (image, dockerfile, keep_template, backend, ...)
are accepted and ignored; other keyword arguments are nsbox create's (policy, net, memory...).
"""

import os
import secrets
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .exceptions import InvalidArgumentException, SandboxException
from .sandbox import Sandbox, _quote

# language: (code file, command needed, how it runs ({f}: the file, {d}: its directory))
LANGUAGES: Dict[str, tuple] = {
    "python": ("code.py", "python3", "python3 {f}"),
    "javascript": ("code.js", "node", "node {f}"),
    "bash": ("code.sh", "bash", "bash {f}"),
    "java": ("Main.java", "java", "java -XX:-UsePerfData {f}"),
    "cpp": ("code.cpp", "g++", "g++ -O1 -o {d}/a.out {f} && {d}/a.out"),
    "go": ("code.go", "go", "go run {f}"),
    "ruby": ("code.rb", "ruby", "ruby {f}"),
    "r": ("code.R", "Rscript", "Rscript {f}"),
}
ALIASES = {"py": "python", "python3": "python", "js": "javascript", "node": "javascript", "sh": "bash",
           "c++": "cpp", "golang": "go", "rb": "ruby"}

# llm-sandbox's arguments for its container backends: nothing to do with nsbox's sandboxes
IGNORED = frozenset(("backend", "image", "dockerfile", "keep_template", "commit_container", "verbose",
                     "runtime_configs", "client", "container_configs", "mounts", "stream", "session_timeout",
                     "skip_environment_setup", "security_policy", "default_timeout", "execution_timeout",
                     "container_id", "kube_namespace", "pod_manifest", "env_vars"))

SITE = "/tmp/.llm-sandbox/site"  # python libraries of the session (pip --target), on PYTHONPATH


@dataclass
class ConsoleOutput:
    """What a run or a command gave, as llm-sandbox's ConsoleOutput."""

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""

    @property
    def text(self) -> str:
        return self.stdout

    def success(self) -> bool:
        return self.exit_code == 0


ExecutionResult = ConsoleOutput


class LibraryInstallationError(SandboxException):
    """run(libraries=...) could not install them (no network, no such package...)."""

    code = "library_installation"


def _lang(lang: Any) -> str:
    name = ALIASES.get(lang.lower(), lang.lower()) if isinstance(lang, str) else None
    if name not in LANGUAGES:
        raise InvalidArgumentException(f"SandboxSession: unknown language {lang!r} (one of {', '.join(LANGUAGES)})",
                                       "invalid_argument")
    return name


class SandboxSession:
    """llm-sandbox's SandboxSession on an nsbox sandbox (see the module's docstring)."""

    def __init__(self, lang: str = "python", workdir: str = "/sandbox", timeout: Optional[float] = 3600,
                 socket: Optional[str] = None, **kwargs):
        self.lang = _lang(lang)
        if not isinstance(workdir, str) or not workdir.startswith("/"):
            raise InvalidArgumentException(f"SandboxSession: workdir must be an absolute path, not {workdir!r}",
                                           "invalid_argument")
        self.workdir = workdir
        self._timeout = timeout
        self._socket = socket
        self._create = {k: v for k, v in kwargs.items() if k not in IGNORED}
        self._tmp = f"/tmp/.llm-sandbox/{secrets.token_hex(4)}"
        self.sandbox: Optional[Sandbox] = None

    # ---- lifecycle --------------------------------------------------------------------------

    def open(self) -> "SandboxSession":
        """Create the session's sandbox, its workdir the session's (nsbox makes it writable)."""
        if self.sandbox is None:
            self.sandbox = Sandbox.create(timeout=self._timeout, workdir=self.workdir, socket=self._socket,
                                          **self._create)
        return self

    def close(self) -> None:
        """Destroy the sandbox and everything in it."""
        if self.sandbox is not None:
            sb, self.sandbox = self.sandbox, None
            try:
                sb.kill()
            finally:
                sb.close()

    def __enter__(self) -> "SandboxSession":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def _sb(self) -> Sandbox:
        if self.sandbox is None:
            raise SandboxException("SandboxSession: not open (use open() or a with block)", "conflict")
        return self.sandbox

    def _exec(self, shell: str, timeout: Optional[float], env: Optional[Dict[str, str]] = None) -> ConsoleOutput:
        # streamed through commands.run's path: bytes as they were (NUL included), any exit
        try:
            r = self._sb().commands.run(shell, cwd=self.workdir, timeout=timeout or 0, envs=env)
        except SandboxException as e:
            if not hasattr(e, "exit_code"):
                raise
            return ConsoleOutput(e.exit_code, e.stdout, e.stderr)
        return ConsoleOutput(r.exit_code, r.stdout, r.stderr)

    # ---- llm-sandbox's methods --------------------------------------------------------------

    def run(self, code: str, libraries: Optional[List[str]] = None, timeout: Optional[float] = None,
            **_ignored) -> ConsoleOutput:
        """Run code in the session's language, in the workdir; whatever the exit status, its
        ConsoleOutput.  libraries are installed first (python: pip into the session, javascript:
        npm into the workdir); they need a network (create with net=) unless they are paths
        of package files in the sandbox.  A failed install raises LibraryInstallationError."""
        if not isinstance(code, str):
            raise InvalidArgumentException("run: code must be a string", "invalid_argument")
        if libraries:
            self.install(libraries, timeout=timeout)
        fname, needs, how = LANGUAGES[self.lang]
        d = f"{self._tmp}/run-{secrets.token_hex(4)}"
        self._sb().files.write(f"{d}/{fname}", code)
        line = (f"command -v {needs} >/dev/null 2>&1 || {{ echo \"llm_sandbox: language '{self.lang}' needs the "
                f"command '{needs}', which this sandbox does not have\" >&2; exit 127; }}; "
                + how.format(f=_quote(f"{d}/{fname}"), d=_quote(d)))
        # the libraries of the session: pip's target, npm's node_modules in the workdir (node
        # looks next to the script, which is not there)
        env = {"python": {"PYTHONPATH": SITE},
               "javascript": {"NODE_PATH": f"{self.workdir}/node_modules"}}.get(self.lang)
        try:
            return self._exec(line, timeout, env)
        finally:
            try:
                self._sb().files.remove(d)
            except SandboxException:
                pass

    def install(self, libraries: List[str], timeout: Optional[float] = None) -> None:
        """Install libraries for the session's language (python, javascript)."""
        if not isinstance(libraries, (list, tuple)) or not all(isinstance(x, str) and x for x in libraries):
            raise InvalidArgumentException("run: libraries must be a list of package names", "invalid_argument")
        libs = " ".join(_quote(x) for x in libraries)
        if self.lang == "python":
            cmd = (f"python3 -m pip install --quiet --disable-pip-version-check --retries 0 --timeout 10 "
                   f"--target {SITE} {libs}")
        elif self.lang == "javascript":
            cmd = f"npm install --silent --no-save --no-audit --no-fund --fetch-retries=0 {libs}"
        else:
            raise LibraryInstallationError(f"run: libraries are not supported for {self.lang} (python, javascript)",
                                           "invalid_argument")
        r = self._exec(cmd, timeout or 600)
        if r.exit_code != 0:
            last = [x for x in (r.stderr or r.stdout).splitlines() if x.strip()]
            hint = " (the sandbox has no network? create the session with net=...)" if any(
                w in (r.stderr or "") for w in ("resolution", "ENOTFOUND", "EAI_AGAIN", "connection")) else ""
            raise LibraryInstallationError(
                f"run: could not install {', '.join(libraries)} (exit {r.exit_code}): "
                f"{last[-1] if last else 'no message'}{hint}")

    def execute_command(self, command: str, workdir: Optional[str] = None, timeout: Optional[float] = None,
                        **_ignored) -> ConsoleOutput:
        """A shell command line in the workdir (or workdir=); its ConsoleOutput, any exit."""
        if not isinstance(command, str) or not command:
            raise InvalidArgumentException("execute_command: command must be a non-empty string", "invalid_argument")
        if workdir:
            command = f"cd {_quote(workdir)} && {command}"
        return self._exec(command, timeout)

    def execute_commands(self, commands: List[str], workdir: Optional[str] = None) -> ConsoleOutput:
        """Each command in turn; the output of the last, or of the first that failed."""
        out = ConsoleOutput()
        for c in commands:
            out = self.execute_command(c, workdir)
            if out.exit_code:
                break
        return out

    def copy_to_runtime(self, src: str, dest: str) -> None:
        """A file or directory of this machine to dest in the sandbox (relative: the workdir's)."""
        if not os.path.exists(src):
            raise SandboxException(f"copy_to_runtime: no such file or directory '{src}'", "file_not_found")
        dest = dest if dest.startswith("/") else f"{self.workdir}/{dest}"
        if os.path.isdir(src):
            for root, _, files in os.walk(src):
                rel = os.path.relpath(root, src)
                for f in files:
                    with open(os.path.join(root, f), "rb") as fh:
                        self._sb().files.write(os.path.normpath(f"{dest}/{rel}/{f}"), fh)
            return
        with open(src, "rb") as fh:
            self._sb().files.write(dest, fh)

    def copy_from_runtime(self, src: str, dest: str) -> None:
        """A file (or a directory, recursively) of the sandbox to dest on this machine."""
        src = src if src.startswith("/") else f"{self.workdir}/{src}"
        sb = self._sb()
        info = sb.files.get_info(src)
        if info.type.value == "dir":
            for e in sb.files.list(src, depth=32):
                target = os.path.join(dest, os.path.relpath(e.path, src))
                if e.type.value == "dir":
                    os.makedirs(target, exist_ok=True)
                elif e.type.value == "file":
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with open(target, "wb") as fh:
                        fh.write(sb.files.read(e.path, format="bytes"))
            return
        if os.path.dirname(dest):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as fh:
            fh.write(sb.files.read(src, format="bytes"))


__all__ = ["SandboxSession", "ConsoleOutput", "ExecutionResult", "LibraryInstallationError", "LANGUAGES"]
