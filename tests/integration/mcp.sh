#!/usr/bin/env bash
# nsbox mcp, as an MCP client sees it: raw JSON-RPC lines through a pipe (initialize, tools/list,
# tools/call, errors, the default sandbox gone after end of input or SIGTERM), then the official
# TypeScript SDK client (npm @modelcontextprotocol/sdk, installed once into a cache).
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

# A daemon of our own, on a socket of our own, started by the first nsbox mcp.
SESSION_DIR=$(mktemp -d /tmp/nsbox-mcp.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"

trap 'stop_file_daemon "$SESSION_DIR"' EXIT

INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcp.sh","version":"1"}}}'
INITIALIZED='{"jsonrpc":"2.0","method":"notifications/initialized"}'

# Each argument is one line to nsbox mcp (extra arguments before -- are its options); its stdin
# ends after the last, and its replies are printed, one per line.  Its exit status is in MCP_STATUS
# (a file: the function runs in a command substitution).
mcp() { # [OPTIONS --] LINE...
        local opts=()
        if printf '%s\n' "$@" | grep -qx -- --; then
                while [ "$1" != -- ]; do opts+=("$1"); shift; done
                shift
        fi
        printf '%s\n' "$@" | "$NSBOX" mcp "${opts[@]}" 2> "$TEST_TMP/mcp.err"
        echo $? > "$TEST_TMP/mcp.status"
}
# A Python expression on the reply with id ID (r), from replies on stdin.
reply() { # ID EXPR
        python3 -c '
import json, sys
want, expr = json.loads(sys.argv[1]), sys.argv[2]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("id") == want:
        r = m
        print(eval(expr))
        break
else:
    print("NO REPLY %s" % sys.argv[1])' "$1" "$2"
}
call() { # ID TOOL ARGS-JSON
        printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}' "$1" "$2" "$3"
}
# The text of a tools/call result, parsed as the JSON it holds.
TEXT='json.loads(r["result"]["content"][0]["text"])'

sandboxes() { "$NSBOX" ls --json | python3 -c 'import json, sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))'; }

test_initialize_negotiates_the_version_and_lists_every_tool() {
        local out
        out=$(mcp "$INIT" "$INITIALIZED" '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
                '{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}' \
                '{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}' \
                '{"jsonrpc":"2.0","id":"p","method":"ping"}')
        assert_eq 0 "$(cat "$TEST_TMP/mcp.status")" "nsbox mcp exit status at end of input"
        assert_eq "2025-06-18" "$(reply 1 'r["result"]["protocolVersion"]' <<< "$out")" "version for a 2025-06-18 client"
        assert_eq '{"tools": {"listChanged": false}}' "$(reply 1 'json.dumps(r["result"]["capabilities"])' <<< "$out")" "capabilities"
        assert_eq "nsbox $("$NSBOX" --version | cut -d' ' -f2)" "$(reply 1 'r["result"]["serverInfo"]["name"] + " " + r["result"]["serverInfo"]["version"]' <<< "$out")" "serverInfo"
        assert_eq "2025-06-18" "$(reply 3 'r["result"]["protocolVersion"]' <<< "$out")" "version for a client asking for an unknown one"
        assert_eq "2024-11-05" "$(reply 4 'r["result"]["protocolVersion"]' <<< "$out")" "version for a 2024-11-05 client"
        assert_eq "{}" "$(reply '"p"' 'json.dumps(r["result"])' <<< "$out")" "ping"
        # every tool of nsbox tools --format mcp, each with an object schema and a sandbox param, plus the lifecycle tools
        local want got
        want=$("$NSBOX" tools --format mcp | python3 -c 'import json, sys; print(" ".join(sorted([t["name"] for t in json.load(sys.stdin)] + ["create_sandbox", "destroy_sandbox", "list_sandboxes", "reset_sandbox", "snapshot_sandbox"])))')
        got=$(reply 2 '" ".join(sorted(t["name"] for t in r["result"]["tools"]))' <<< "$out")
        assert_eq "$want" "$got" "tools/list names"
        assert_eq "True" "$(reply 2 'all(t["inputSchema"]["type"] == "object" and t["description"] for t in r["result"]["tools"])' <<< "$out")" "every tool has a description and an object schema"
        assert_eq "string" "$(reply 2 '[t for t in r["result"]["tools"] if t["name"] == "exec"][0]["inputSchema"]["properties"]["sandbox"]["type"]' <<< "$out")" "exec's sandbox param"
        assert_eq "" "$(sandboxes)" "sandboxes made by a session that called no tool"
}

test_exec_write_read_in_the_default_sandbox_gone_after_end_of_input() {
        local out id
        out=$(mcp "$INIT" "$INITIALIZED" \
                "$(call 2 exec '{"shell":"echo hello from $(id -un); echo oops >&2; exit 3"}')" \
                "$(call 3 write_file '{"path":"notes/a.txt","content":"written through MCP\n"}')" \
                "$(call 4 read_file '{"path":"/workspace/notes/a.txt"}')" \
                "$(call 5 exec '{"cmd":["cat","notes/a.txt"]}')" \
                "$(call 6 list_sandboxes '{}')")
        assert_eq 0 "$(cat "$TEST_TMP/mcp.status")" "nsbox mcp exit status; stderr: $(cat "$TEST_TMP/mcp.err")"
        assert_eq "False|3|hello from user|oops" "$(reply 2 '"%s|%s|%s|%s" % (r["result"]["isError"], '"$TEXT"'["exit_code"], '"$TEXT"'["stdout"].strip(), '"$TEXT"'["stderr"].strip())' <<< "$out")" "exec result"
        assert_eq "3" "$(reply 2 'r["result"]["structuredContent"]["exit_code"]' <<< "$out")" "exec structuredContent"
        # what the model reads says 2.149, not 2.1493880000000001
        assert_eq "" "$(grep -oE '"duration_ms":[0-9]+\.[0-9]{12,}' <<< "$out")" "float noise in the text"
        assert_contains "$out" '"duration_ms":' "the durations"
        assert_eq "False" "$(reply 3 'r["result"]["isError"]' <<< "$out")" "write_file"
        assert_eq "written through MCP" "$(reply 4 "$TEXT"'["content"].strip()' <<< "$out")" "read_file content"
        assert_eq "written through MCP" "$(reply 5 "$TEXT"'["stdout"].strip()' <<< "$out")" "the file as a command sees it"
        id=$(reply 6 "$TEXT"'["default"]' <<< "$out")
        [[ $id =~ ^[0-9a-f]{32}$ ]] || fail "list_sandboxes default: '$id'"
        assert_eq "True" "$(reply 6 "any(s['id'] == '$id' for s in $TEXT['sandboxes'])" <<< "$out")" "the default sandbox listed while the session ran"
        assert_not_contains "$(sandboxes)" "$id" "sandboxes after the session ended"
}

# knowlyr's tool names are callable though not listed, with their params mapped as nsbox call maps
# them; reset_sandbox puts the sandbox back
test_knowlyr_tool_names_with_their_params() {
        local out
        out=$(mcp "$INIT" "$INITIALIZED" \
                "$(call 2 file_write '{"path":"k.txt","content":"a\nb\nc\n"}')" \
                "$(call 3 file_read '{"path":"k.txt","start_line":2,"end_line":2}')" \
                "$(call 4 shell '{"command":"cat k.txt | wc -l","timeout":10}')" \
                "$(call 5 search '{"pattern":"^b","file_pattern":"*.txt"}')" \
                "$(call 6 file_read '{"path":"k.txt","start_line":0}')" \
                "$(call 7 reset_sandbox '{}')" \
                "$(call 8 exists '{"path":"k.txt"}')")
        assert_eq 0 "$(cat "$TEST_TMP/mcp.status")" "nsbox mcp exit status; stderr: $(cat "$TEST_TMP/mcp.err")"
        assert_eq "False" "$(reply 2 'r["result"]["isError"]' <<< "$out")" "file_write"
        assert_eq '"b\n"' "$(reply 3 'json.dumps('"$TEXT"'["content"])' <<< "$out")" "file_read line 2"
        assert_eq "3 0" "$(reply 4 '"%s %s" % ('"$TEXT"'["stdout"].strip(), '"$TEXT"'["exit_code"])' <<< "$out")" "shell"
        assert_eq "1" "$(reply 5 'len('"$TEXT"'["matches"])' <<< "$out")" "search"
        assert_eq "True" "$(reply 6 'r["result"]["isError"]' <<< "$out")" "file_read from line 0"
        assert_contains "$(reply 6 'r["result"]["content"][0]["text"]' <<< "$out")" "'start_line' must be a line number" "file_read from line 0"
        # reset_sandbox: back to the creation state, the same sandbox
        assert_eq "False running" "$(reply 7 '"%s %s" % (r["result"]["isError"], '"$TEXT"'["state"])' <<< "$out")" "reset_sandbox"
        assert_eq "False" "$(reply 8 "$TEXT"'["exists"]' <<< "$out")" "the file after reset_sandbox"
}

# run_code keeps state between calls, and its pictures reach the model as MCP image blocks (the
# text says where each went); structuredContent keeps the whole result
test_run_code_state_and_pictures_as_image_blocks() {
        /usr/bin/python3 -c 'import jupyter_client, ipykernel, matplotlib' 2> /dev/null ||
                fail "no Jupyter kernel on this host: ./quickstart.sh --deps installs it"
        local out
        out=$(mcp "$INIT" "$INITIALIZED" "$(call 2 run_code '{"code":"x = 41"}')" \
                "$(call 3 run_code '{"code":"import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nx + 1"}')")
        assert_eq 0 "$(cat "$TEST_TMP/mcp.status")" "nsbox mcp exit status; stderr: $(cat "$TEST_TMP/mcp.err")"
        assert_eq "42" "$(reply 3 "$TEXT"'["text"]' <<< "$out")" "state between run_code calls"
        assert_eq "text image" "$(reply 3 '" ".join(c["type"] for c in r["result"]["content"])' <<< "$out")" "content blocks"
        assert_eq "image/png True" "$(reply 3 'r["result"]["content"][1]["mimeType"] + " " + str(__import__("base64").b64decode(r["result"]["content"][1]["data"])[:8] == b"\x89PNG\r\n\x1a\n")' <<< "$out")" "the picture"
        assert_contains "$(reply 3 'r["result"]["content"][0]["text"]' <<< "$out")" "(image/png, " "the note in the text"
        assert_eq "True" "$(reply 3 'r["result"]["structuredContent"]["results"][0]["png"] == r["result"]["content"][1]["data"]' <<< "$out")" "structuredContent"
}

test_bad_input_gets_jsonrpc_errors_and_the_session_goes_on() {
        local out
        out=$(mcp "$INIT" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec"' \
                '[1,2]' '42' \
                '{"jsonrpc":"1.0","id":3,"method":"ping"}' \
                '{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}' \
                '{"jsonrpc":"2.0","id":4,"method":"resources/list"}' \
                "$(call 5 no_such_tool '{}')" \
                '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}' \
                '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":"ls"}}' \
                "$(call 8 exec '{"shell":"true","sandbox":42}')" \
                '{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}' \
                '{"jsonrpc":"2.0","id":10,"method":"tools/list","params":[]}' \
                "$(call 11 read_file '{"path":"/no/such/file"}')" \
                "$(call 12 exec '{"sandbox":"ffffffffffffffffffffffffffffffff","shell":"true"}')" \
                "$(call 13 exec '{"timeout":"soon"}')" \
                '{"jsonrpc":"2.0","method":"notifications/unknown"}' \
                "$(call 14 exec '{"shell":"echo still here"}')")
        assert_eq 0 "$(cat "$TEST_TMP/mcp.status")" "nsbox mcp exit status; stderr: $(cat "$TEST_TMP/mcp.err")"
        local codes
        codes=$(python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "error" in m:
        assert m["error"]["message"] and "\n" not in m["error"]["message"], m
        print(m["id"], m["error"]["code"])' <<< "$out" | tr '\n' ' ')
        assert_eq "None -32700 None -32600 None -32600 3 -32600 None -32600 4 -32601 5 -32602 6 -32602 7 -32602 8 -32602 9 -32602 10 -32602 " "$codes" "error replies (id code)"
        assert_eq "True|file_not_found" "$(reply 11 'str(r["result"]["isError"]) + "|" + r["result"]["content"][0]["text"].split(":")[0]' <<< "$out")" "a tool's error"
        assert_eq "True|not_found" "$(reply 12 'str(r["result"]["isError"]) + "|" + r["result"]["content"][0]["text"].split(":")[0]' <<< "$out")" "an unknown sandbox"
        assert_eq "True|invalid_argument" "$(reply 13 'str(r["result"]["isError"]) + "|" + r["result"]["content"][0]["text"].split(":")[0]' <<< "$out")" "bad tool params"
        assert_eq "still here" "$(reply 14 "$TEXT"'["stdout"].strip()' <<< "$out")" "a call after the bad input"
        assert_eq "" "$(cat "$TEST_TMP/mcp.err")" "stderr of nsbox mcp"
        assert_eq "" "$(sandboxes)" "sandboxes after the session ended"
}

test_model_cannot_bind_host_paths_or_widen_the_network_through_create_sandbox() {
        mkdir -p "$TEST_TMP/home"
        echo keep > "$TEST_TMP/home/marker"
        echo '{"seccomp": null}' > "$TEST_TMP/weak.json"
        local out n
        out=$(mcp "$INIT" \
                "$(call 2 create_sandbox "{\"bind\":[\"$TEST_TMP/home:/h:rw\"]}")" \
                "$(call 3 create_sandbox "{\"policy\":\"$TEST_TMP/weak.json\"}")" \
                "$(call 4 create_sandbox '{"net":"nat"}')" \
                "$(call 5 create_sandbox '{"rootfs":"/"}')" \
                "$(call 6 create_sandbox '{"record":"/tmp/x.jsonl"}')" \
                "$(call 7 create_sandbox '{"labels":{"ok":"yes"},"net":"none","memory":"256M","limits":"best-effort"}')")
        for n in 2 3 4 5 6; do
                assert_eq "True|permission_denied" "$(reply $n 'str(r["result"]["isError"]) + "|" + r["result"]["content"][0]["text"].split(":")[0]' <<< "$out")" "create_sandbox refused ($n): $out"
        done
        assert_contains "$(reply 2 'r["result"]["content"][0]["text"]' <<< "$out")" "'bind' is not an argument a model may set" "the refusal says why"
        assert_eq "False" "$(reply 7 'str(r["result"]["isError"])' <<< "$out")" "allowed arguments still create"
        assert_eq "keep" "$(cat "$TEST_TMP/home/marker")" "the host directory"
        assert_eq "" "$(sandboxes)" "sandboxes after the session ended"
}

test_tools_can_name_another_sandbox_which_ends_with_the_session() {
        local out id
        out=$(mcp "$INIT" "$(call 2 create_sandbox '{"labels":{"purpose":"mcp-test"}}')" "$(call 3 list_sandboxes '{}')")
        id=$(reply 2 "$TEXT"'["id"]' <<< "$out")
        [[ $id =~ ^[0-9a-f]{32}$ ]] || fail "create_sandbox: $out"
        assert_eq "None" "$(reply 3 "$TEXT"'["default"]' <<< "$out")" "default sandbox when no tool ran"
        assert_eq "mcp-test" "$(reply 3 "[s for s in $TEXT['sandboxes'] if s['id'] == '$id'][0]['labels']['purpose']" <<< "$out")" "its label"
        assert_not_contains "$(sandboxes)" "$id" "the created sandbox after the session"
        # the id is known only once create_sandbox answered: drive the session interactively
        out=$(python3 - "$NSBOX" "$INIT" <<'PY'
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
n = 0
def rpc(method, params):
    global n
    n += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())
def tool(name, **args):
    r = rpc("tools/call", {"name": name, "arguments": args})["result"]
    return r["isError"], (r["content"][0]["text"] if r["isError"] else json.loads(r["content"][0]["text"]))
rpc("initialize", json.loads(sys.argv[2])["params"])
_, made = tool("create_sandbox")
sb = made["id"]
print("write", tool("write_file", path="only-there.txt", content="x", sandbox=sb)[0])
print("exists-there", tool("exists", path="only-there.txt", sandbox=sb)[1]["exists"])
print("exists-default", tool("exists", path="only-there.txt")[1]["exists"])
_, listed = tool("list_sandboxes")
print("default-is-another", listed["default"] not in (None, sb))
print("destroy", tool("destroy_sandbox", sandbox=sb)[1]["destroyed"] == sb)
err, text = tool("exec", shell="true", sandbox=sb)
print("after-destroy", err, text.split(":")[0])
print("default", listed["default"])
p.stdin.close()
print("status", p.wait(timeout=60))
PY
)
        assert_contains "$out" "write False" "write_file in the created sandbox"
        assert_contains "$out" "exists-there True" "the file in the created sandbox"
        assert_contains "$out" "exists-default False" "the file in the default sandbox"
        assert_contains "$out" "default-is-another True" "default sandbox"
        assert_contains "$out" "destroy True" "destroy_sandbox"
        assert_contains "$out" "after-destroy True not_found" "a call to the destroyed sandbox"
        assert_contains "$out" "status 0" "nsbox mcp exit status"
        local def; def=$(sed -n 's/^default //p' <<< "$out")
        assert_not_contains "$(sandboxes)" "$def" "the default sandbox after the session"
}

# A session of nsbox mcp driven from Python (argv: nsbox, the initialize line), initialized;
# running(CMD) waits until CMD runs in a sandbox (a grandchild of nsboxd) and prints how many
# sandboxes are listed then.
SESSION_PY='import json, os, signal, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(m):
    p.stdin.write(json.dumps(m) + "\n")
    p.stdin.flush()
send(json.loads(sys.argv[2]))
p.stdout.readline()
def running(cmd):
    for _ in range(600):
        if cmd in subprocess.run(["pgrep", "-af", "^" + cmd], capture_output=True, text=True).stdout:
            break
        time.sleep(0.1)
    else:
        print("%s never ran" % cmd)
    print("running", len(json.loads(subprocess.run([sys.argv[1], "ls", "--json"], capture_output=True, text=True).stdout)))
'

test_sigterm_during_a_long_exec_destroys_the_sandbox() {
        local out
        out=$(python3 -c "$SESSION_PY$(cat <<'PY'
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "exec", "arguments": {"shell": "sleep 987.654"}}})
running("sleep 987.654")
p.send_signal(signal.SIGTERM)
try:
    print("status", p.wait(timeout=60))
except subprocess.TimeoutExpired:
    print("still running after SIGTERM")
    p.kill()
print("rest", repr(p.stdout.read()))
PY
)" "$NSBOX" "$INIT")
        assert_contains "$out" "running 1" "sandboxes while the exec ran"
        assert_contains "$out" "status 0" "nsbox mcp after SIGTERM"
        assert_eq "" "$(sandboxes)" "sandboxes after SIGTERM"
        local left; left=$(wait_gone '^sleep 987.654') || fail "the command outlived the session: $left"
}

# kill -9 of the session: nothing cleans up in nsbox mcp; its sandboxes were created with
# close_with_client, so nsboxd destroys them when the session's connection closes.
test_sigkill_of_the_session_leaves_no_sandbox() {
        local out
        out=$(python3 -c "$SESSION_PY$(cat <<'PY'
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_sandbox", "arguments": {}}})
print("created", json.loads(json.loads(p.stdout.readline())["result"]["content"][0]["text"]).get("close_with_client"))
send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "exec", "arguments": {"shell": "sleep 876.543"}}})
running("sleep 876.543")
p.send_signal(signal.SIGKILL)
print("status", p.wait(timeout=60))
PY
)" "$NSBOX" "$INIT")
        assert_contains "$out" "created True" "create_sandbox's reply: close_with_client"
        assert_contains "$out" "running 2" "sandboxes while the exec ran (the default one and create_sandbox's)"
        assert_contains "$out" "status -9" "nsbox mcp after SIGKILL"
        local i left=""
        for i in $(seq 100); do
                left=$(sandboxes)
                [ -z "$left" ] && break
                sleep 0.1
        done
        assert_eq "" "$left" "sandboxes 10 s after the session was killed"
        left=$(wait_gone '^sleep 876.543') || fail "the command outlived the killed session: $left"
}

test_bad_option_is_a_one_line_error() {
        assert_status 125 "$NSBOX" mcp --memory lots
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" mcp --count 2
        assert_one_line_error "$OUT"
        assert_status 0 "$NSBOX" mcp --help
        assert_contains "$OUT" "usage: nsbox mcp"
}

test_options_shape_the_default_sandbox() {
        local out
        out=$(mcp --label role=mcp-default -e GREETING=hi -- "$INIT" "$(call 2 exec '{"shell":"echo $GREETING"}')" "$(call 3 list_sandboxes '{}')")
        assert_eq "hi" "$(reply 2 "$TEXT"'["stdout"].strip()' <<< "$out")" "-e in the default sandbox"
        assert_eq "mcp-default" "$(reply 3 "[s for s in $TEXT['sandboxes'] if s['id'] == $TEXT['default']][0]['labels']['role']" <<< "$out")" "--label of the default sandbox"
}

# ---- the official TypeScript SDK client ------------------------------------------------------

# @modelcontextprotocol/sdk, installed once per machine or per user (npm_cache_dir in lib.sh);
# echoes its directory.
sdk_dir() {
        npm_cache_dir npm node_modules/@modelcontextprotocol/sdk/package.json '@modelcontextprotocol/sdk@^1'
}

test_official_typescript_sdk_client_lists_and_calls_tools() {
        command -v node > /dev/null || fail "node is missing (apt-get install nodejs npm, or ./quickstart.sh --deps)"
        command -v npm > /dev/null || fail "npm is missing (apt-get install nodejs npm, or ./quickstart.sh --deps)"
        local dir
        dir=$(sdk_dir) || fail "npm install @modelcontextprotocol/sdk failed"
        mkdir -p "$TEST_TMP/sdk"
        ln -sfn "$dir/node_modules" "$TEST_TMP/sdk/node_modules"
        cat > "$TEST_TMP/sdk/client.mjs" <<'JS'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const transport = new StdioClientTransport({ command: process.argv[2], args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "nsbox-mcp-test", version: "1.0.0" });
await client.connect(transport);
const out = (k, v) => console.log(k + " " + (typeof v === "string" ? v : JSON.stringify(v)));
out("server", client.getServerVersion().name);
out("capabilities", client.getServerCapabilities());
const { tools } = await client.listTools();
out("tools", tools.map((t) => t.name).sort().join(","));
const text = (r) => JSON.parse(r.content[0].text);
const ex = await client.callTool({ name: "exec", arguments: { shell: "echo hello $(id -un)" } });
out("exec", [ex.isError, text(ex).exit_code, text(ex).stdout.trim()]);
const w = await client.callTool({ name: "write_file", arguments: { path: "sdk.txt", content: "from the SDK\n" } });
out("write", w.isError);
const rd = await client.callTool({ name: "read_file", arguments: { path: "sdk.txt" } });
out("read", [rd.isError, text(rd).content]);
const bad = await client.callTool({ name: "read_file", arguments: { path: "/nope" } });
out("bad", [bad.isError, bad.content[0].text.split(":")[0]]);
try {
        await client.callTool({ name: "no_such_tool", arguments: {} });
        out("unknown", "no error");
} catch (e) {
        out("unknown", e.code);
}
const ls = await client.callTool({ name: "list_sandboxes", arguments: {} });
out("default", text(ls).default);
await client.close();
out("closed", true);
JS
        OUT=$(cd "$TEST_TMP/sdk" && timeout 120 node client.mjs "$NSBOX" 2>&1)
        local st=$?
        [ $st = 0 ] || fail "node client.mjs: status $st: $OUT"
        assert_contains "$OUT" "server nsbox"
        assert_contains "$OUT" 'capabilities {"tools":{"listChanged":false}}'
        local want
        want=$("$NSBOX" tools --format mcp | python3 -c 'import json, sys; print(",".join(sorted([t["name"] for t in json.load(sys.stdin)] + ["create_sandbox", "destroy_sandbox", "list_sandboxes", "reset_sandbox", "snapshot_sandbox"])))')
        assert_contains "$OUT" "tools $want" "listTools"
        assert_contains "$OUT" 'exec [false,0,"hello user"]'
        assert_contains "$OUT" "write false"
        assert_contains "$OUT" 'read [false,"from the SDK\n"]'
        assert_contains "$OUT" 'bad [true,"file_not_found"]'
        assert_contains "$OUT" "unknown -32602"
        assert_contains "$OUT" "closed true"
        local id; id=$(sed -n 's/^default //p' <<< "$OUT")
        [[ $id =~ ^[0-9a-f]{32}$ ]] || fail "default sandbox id: '$id'"
        # close() ends nsbox mcp (stdin closed, then SIGTERM): the sandbox goes with it
        local i
        for i in $(seq 100); do [[ "$(sandboxes)" == *"$id"* ]] || break; sleep 0.1; done
        assert_not_contains "$(sandboxes)" "$id" "sandboxes after client.close()"
}

# Last (tests run in name order): every session removed what it made.
test_zz_nothing_is_left() {
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
