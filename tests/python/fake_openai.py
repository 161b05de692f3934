#!/usr/bin/env python3
"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for the tutorial's test.

usage: fake_openai.py DIR NONCE
Listens on a free port, writes it to DIR/port, and logs every request body (with its
Authorization header) as one JSON line to DIR/requests.jsonl.  Its "model" answers, by the
number of tool results in the conversation: 0, a write_file call of hello.py (a program that
prints NONCE, its uid, hostname and working directory); 1, a run_commands call running it; 2, a
final answer quoting what the last tool result said the program printed.
"""

import http.server
import json
import os
import sys

DIR, NONCE = sys.argv[1], sys.argv[2]
PROGRAM = ("import os, socket\n"
           f"print('nonce {NONCE}')\n"
           "print('uid', os.getuid(), 'host', socket.gethostname(), 'cwd', os.getcwd())\n")


def tool_call(n, name, args):
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{n}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}]}


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with open(os.path.join(DIR, "requests.jsonl"), "a") as f:
            f.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"), "body": body}) + "\n")
        if self.path != "/v1/chat/completions":
            self.send_response(404)
            self.end_headers()
            return
        tools = [m for m in body["messages"] if m.get("role") == "tool"]
        if len(tools) == 0:
            msg = tool_call(1, "write_file", {"path": "hello.py", "data": PROGRAM})
        elif len(tools) == 1:
            msg = tool_call(2, "run_commands", {"command": "python3 hello.py"})
        else:
            result = json.loads(tools[-1]["content"])
            msg = {"role": "assistant", "content": "The program printed:\n" + result.get("stdout", json.dumps(result))}
        out = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
                          "choices": [{"index": 0, "message": msg,
                                       "finish_reason": "tool_calls" if "tool_calls" in msg else "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(os.path.join(DIR, "port.tmp"), "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
srv.serve_forever()
