"""knowlyr AgentSandbox's trajectories, ``{"steps": [{"tool_name", "params", "expected_output"}]}``,
replayed on a Sandbox with the rules of ``nsbox replay`` (nsbox(1), REPLAY): a step is a success
when its call raised no error and, for an exec-family tool, the command exited 0 (no signal, no
timeout); it matches when it is a success and its main output equals expected_output (stdout for
exec, shell, git and run_commands; content for read_file and file_read; "path:line:text" lines for
grep and search; the result as compact JSON with sorted keys for the others), or when it is a
success and expected_output is absent or null.
"""

import json
import os
from typing import Any, Dict, List, Optional, Tuple

from .exceptions import InvalidArgumentException, SandboxException, UnavailableException

MAX_STEPS = 100000
MAX_BYTES = 64 << 20
_EXEC = {"exec", "run_commands", "shell", "git"}
_READ = {"read_file", "file_read"}
_GREP = {"grep", "search"}


def _bad(msg: str) -> InvalidArgumentException:
    return InvalidArgumentException(msg, "invalid_argument")


def load(trajectory: Any) -> List[Dict[str, Any]]:
    """The steps of a trajectory given as a dict, a JSON text or a path to a file, checked as
    strictly as nsbox replay checks them: InvalidArgumentException saying what is wrong."""
    name = "trajectory"
    if isinstance(trajectory, (str, os.PathLike)) and not str(trajectory).lstrip().startswith("{"):
        name = f"trajectory '{os.fspath(trajectory)}'"
        try:
            if os.path.getsize(trajectory) > MAX_BYTES:
                raise _bad(f"{name}: more than {MAX_BYTES} bytes")
            with open(trajectory, encoding="utf-8") as f:
                trajectory = f.read()
        except OSError as e:
            raise _bad(f"{name}: {e.strerror}") from None
    if isinstance(trajectory, str):
        try:
            trajectory = json.loads(trajectory)
        except ValueError as e:
            raise _bad(f"{name}: malformed JSON: {e}") from None
    if not isinstance(trajectory, dict):
        raise _bad(f"{name}: expected an object {{steps: [...]}}")
    for k in trajectory:
        if k not in ("steps", "metadata"):
            raise _bad(f"{name}: unknown key '{k}' (a knowlyr trajectory has steps and metadata)")
    steps = trajectory.get("steps")
    if not isinstance(steps, list) or not steps:
        raise _bad(f"{name}: 'steps' must be a non-empty array")
    if len(steps) > MAX_STEPS:
        raise _bad(f"{name}: {len(steps)} steps, more than {MAX_STEPS}")
    for i, st in enumerate(steps, 1):
        if not isinstance(st, dict):
            raise _bad(f"{name} step {i}: must be an object {{tool_name, params, expected_output}}")
        for k in st:
            if k not in ("tool_name", "params", "expected_output"):
                raise _bad(f"{name} step {i}: unknown key '{k}'")
        if not isinstance(st.get("tool_name"), str):
            raise _bad(f"{name} step {i}: 'tool_name' must be a string")
        if not isinstance(st.get("params"), dict):
            raise _bad(f"{name} step {i}: 'params' must be an object")
        if st.get("expected_output") is not None and not isinstance(st["expected_output"], str):
            raise _bad(f"{name} step {i}: 'expected_output' must be a string or null")
    return steps


def main_output(tool: str, result: Any) -> str:
    """What a step's output is compared by (see the module's text)."""
    if result is None:
        return ""
    if tool in _EXEC:
        return result.get("stdout") or ""
    if tool in _READ:
        return result.get("content") or ""
    if tool in _GREP:
        return "".join(f"{m.get('path', '')}:{m.get('line', 0)}:{m.get('text', '')}\n" for m in result.get("matches", []))
    return json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def judge(tool: str, result: Any, error: Optional[SandboxException], expected: Optional[str]) -> Tuple[bool, bool, Optional[str]]:
    """(success, match, why) of one replayed step."""
    why = None
    if error is not None:
        why = f"failed: error {error.code}"
    elif tool in _EXEC:
        if result.get("timed_out"):
            why = "failed: timed out"
        elif result.get("signal"):
            why = f"failed: killed by signal {result['signal']}"
        elif result.get("exit_code") != 0:
            why = f"failed: exit_code {result.get('exit_code')}"
    if why:
        return False, False, why
    if expected is None:
        return True, True, None
    out = main_output(tool, result)
    if out == expected:
        return True, True, None
    return True, False, f"output {json.dumps(out[:60])}, expected {json.dumps(expected[:60])}"


def replay(sandbox: Any, trajectory: Any) -> Dict[str, Any]:
    """Run each step on sandbox (its call method, aliases included) and report as nsbox replay
    --json does: {format, steps, matched, mismatched, succeeded, first_divergent_step, results:
    [{step, tool, success, match, why, output, expected_output}]}."""
    steps = load(trajectory)
    results = []
    for i, st in enumerate(steps, 1):
        tool = st["tool_name"]
        result, error = None, None
        try:
            result = sandbox.call(tool, dict(st["params"]))
        except UnavailableException:
            raise  # nsboxd is gone: the replay itself failed
        except SandboxException as e:
            error = e
        success, match, why = judge(tool, result, error, st.get("expected_output"))
        results.append({"step": i, "tool": tool, "success": success, "match": match, "why": why,
                        "output": main_output(tool, result) if error is None else "",
                        "expected_output": st.get("expected_output")})
    bad = [r["step"] for r in results if not r["match"]]
    return {"format": "knowlyr", "steps": len(results), "matched": len(results) - len(bad), "mismatched": len(bad),
            "succeeded": sum(r["success"] for r in results), "first_divergent_step": bad[0] if bad else None,
            "results": results}
