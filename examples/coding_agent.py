#!/usr/bin/env python3
"""The coding-agent tutorial on nsbox: an OpenAI-compatible chat loop whose tools run in a sandbox.

    OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini \\
        python3 examples/coding_agent.py "Write fib.py printing the first 10 Fibonacci numbers, run it"

The model gets the tutorial's four tools, read_file, write_file, write_files and run_commands,
with the schemas `nsbox tools --format openai` prints; each function call it makes is passed to
the sandbox as it is (Sandbox.call), and the JSON result (or error) goes back as the tool
message.  The loop ends when the model answers without calling a tool.  Standard library only;
the sandbox object is the only nsbox-specific line.

Environment: OPENAI_BASE_URL (default https://api.openai.com/v1), OPENAI_API_KEY, OPENAI_MODEL
(default gpt-4o-mini); NSBOX_SOCKET as for nsbox(1).
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

try:
    import nsbox
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
    import nsbox

TUTORIAL_TOOLS = ("read_file", "write_file", "write_files", "run_commands")
SYSTEM = ("You are a coding agent. You work in a Linux sandbox whose working directory is /workspace: "
          "write files with write_file or write_files, read them with read_file, and run programs "
          "with run_commands. When the task is done, answer with what you did and what the programs printed.")


def chat(base_url, api_key, body, timeout=300):
    """One Chat Completions request; the reply's first choice's message."""
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {api_key}"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            reply = json.load(resp)
    except urllib.error.HTTPError as e:
        raise SystemExit(f"coding_agent: {base_url}: HTTP {e.code}: {e.read().decode(errors='replace')[:500]}")
    except (urllib.error.URLError, OSError) as e:
        raise SystemExit(f"coding_agent: cannot reach {base_url}: {getattr(e, 'reason', e)}")
    try:
        return reply["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise SystemExit(f"coding_agent: unexpected reply from {base_url}: {json.dumps(reply)[:500]}")


def run_tool(sandbox, call):
    """The JSON text of a tool call's result, or of its error: what the model reads back."""
    name = call["function"]["name"]
    try:
        args = json.loads(call["function"].get("arguments") or "{}")
        if not isinstance(args, dict):
            raise ValueError("arguments are not a JSON object")
    except ValueError as e:
        return json.dumps({"error": {"code": "invalid_argument", "message": f"{name}: bad arguments: {e}"}})
    try:
        return json.dumps(sandbox.call(name, args))
    except nsbox.SandboxException as e:
        return json.dumps({"error": {"code": e.code, "message": e.message}})


def main():
    ap = argparse.ArgumentParser(description="A coding agent whose tools run in an nsbox sandbox.")
    ap.add_argument("task", nargs="?", help="what to do (default: read from standard input)")
    ap.add_argument("--max-turns", type=int, default=20, help="model calls at most (default 20)")
    ap.add_argument("--all-tools", action="store_true", help="offer every nsbox tool, not only the tutorial's four")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox at the end and print its id")
    opts = ap.parse_args()
    task = opts.task if opts.task is not None else sys.stdin.read()
    base_url = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    api_key = os.environ.get("OPENAI_API_KEY") or ""
    model = os.environ.get("OPENAI_MODEL") or "gpt-4o-mini"
    if not task.strip():
        ap.error("no task given")

    sandbox = nsbox.Sandbox.create(metadata={"app": "coding_agent"})  # the one nsbox-specific line
    try:
        tools = sandbox.tools("openai")
        if not opts.all_tools:
            tools = [t for t in tools if t["function"]["name"] in TUTORIAL_TOOLS]
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
        for _ in range(opts.max_turns):
            msg = chat(base_url, api_key, {"model": model, "messages": messages, "tools": tools})
            messages.append({k: v for k, v in msg.items() if v is not None})
            calls = msg.get("tool_calls") or []
            if not calls:
                print(msg.get("content") or "")
                return 0
            for call in calls:
                print(f"[tool] {call['function']['name']} {call['function'].get('arguments', '')[:200]}",
                      file=sys.stderr)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(sandbox, call)})
        print(f"coding_agent: no answer after {opts.max_turns} model calls", file=sys.stderr)
        return 1
    finally:
        if opts.keep:
            print(f"[sandbox] {sandbox.sandbox_id}", file=sys.stderr)
            sandbox.close()
        else:
            sandbox.kill()
            sandbox.close()


if __name__ == "__main__":
    sys.exit(main())
