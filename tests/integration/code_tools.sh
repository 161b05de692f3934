#!/usr/bin/env bash
# nsbox's own code interpreter tools (issue 23): run_code and the *_code_context tools, served by
# the agent, which talks to the code interpreter's server on the sandbox's 127.0.0.1:49999 and
# starts it on first use.  Through nsbox call, the Python client (streamed events) and nsbox mcp:
# state that persists, rich results (PNG, HTML), prints before the cell ends, errors, isolated
# contexts (python, bash, javascript), timeouts that interrupt and leave the context alive, bad
# input, and a hostile listener on the port.  Runs as root and as an unprivileged user.
. "$(dirname "$0")/../lib.sh"

SESSION_DIR=$(mktemp -d /tmp/nsbox-ct.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store" NSBOX_SOCKET="$SESSION_DIR/d.sock"
export PYTHONPATH="$NSBOX_SRC/clients/python" PYTHONDONTWRITEBYTECODE=1

# The kernels are Debian's (quickstart.sh installs them); without them there is nothing to test.
KERNEL_MISSING=$(/usr/bin/python3 -c 'import jupyter_client, ipykernel, matplotlib, pandas' 2>&1 | tail -n 1)

# One nsboxd for the whole file; stopped with its sandboxes at the end.
NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
"$NSBOXD" --socket "$NSBOX_SOCKET" >> "$SESSION_DIR/log" 2>&1 < /dev/null &
DPID=$!
trap 'stop_file_daemon "$SESSION_DIR"' EXIT
for _ in $(seq 300); do
        [ "$(daemon_pid)" = "$DPID" ] && break
        sleep 0.1
done

MY_SANDBOXES=""
# sandbox VAR: a new sandbox, destroyed at the end of the test
sandbox() {
        local _sid
        _sid=$("$NSBOX" create 2>&1) || fail "nsbox create: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid'"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        printf -v "$1" '%s' "$_sid"
}
need_kernel() {
        [ -z "$KERNEL_MISSING" ] || fail "no Jupyter kernel on this host ($KERNEL_MISSING): ./quickstart.sh --deps installs it"
}
# call SID TOOL JSON: the result in $OUT (or the error line), the exit status in $ST
call() {
        OUT=$(timeout 120 "$NSBOX" call "$1" "$2" "$3" 2>&1)
        ST=$?
}
# A Python expression on $OUT parsed as JSON (r)
get() { printf '%s' "$OUT" | python3 -c 'import base64, json, sys; r = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
ok() { # SID TOOL JSON: the call succeeds
        call "$@"
        [ "$ST" = 0 ] || fail "$2 $3: $OUT"
}
bad() { # SID TOOL JSON CODE-AND-MESSAGE-PART: a one-line error
        call "$1" "$2" "$3"
        [ "$ST" != 0 ] || fail "$2 $3 succeeded: $OUT"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "$4" "$2 $3"
}
# running SID TAG: how many running processes of the sandbox have that tag
running() { "$NSBOX" call "$1" process_list | python3 -c 'import json, sys; print(sum(p.get("tag") == sys.argv[1] and p["running"] for p in json.load(sys.stdin)["processes"]))' "$2"; }
server_tagged() { running "$1" code-interpreter; }

test_state_persists_between_calls_and_the_main_result_has_text() {
        need_kernel
        local sid
        sandbox sid
        assert_eq 0 "$(server_tagged "$sid")" "a code interpreter before the first call"
        ok "$sid" run_code '{"code": "x = 41"}'
        assert_eq "None|[]|None" "$(get '"%s|%s|%s" % (r["text"], r["results"], r["error"])')" "x = 41"
        assert_eq 1 "$(server_tagged "$sid")" "the code interpreter started by the first call"
        ok "$sid" run_code '{"code": "x + 1"}'
        assert_eq "42|True|42" "$(get '"%s|%s|%s" % (r["text"], r["results"][0]["is_main_result"], r["results"][0]["text"])')" "x + 1"
        assert_eq "2" "$(get 'r["execution_count"]')" "execution_count"
        ok "$sid" run_code '{"code": "import os\nos.chdir(\"/tmp\")\nprint(\"moved\")"}'
        assert_eq "['moved\\n']" "$(get 'r["logs"]["stdout"]')" "stdout in logs"
        ok "$sid" run_code '{"code": "os.getcwd()"}'
        assert_eq "/tmp" "$(get 'r["text"]')" "the working directory persists"
        ok "$sid" run_code '{"code": "import sys; print(\"to stderr\", file=sys.stderr)"}'
        assert_eq "['to stderr\\n']" "$(get 'r["logs"]["stderr"]')" "stderr in logs"
        assert_eq 1 "$(server_tagged "$sid")" "one code interpreter for every call"
}

test_rich_results_png_chart_and_html_table() {
        need_kernel
        local sid
        sandbox sid
        ok "$sid" run_code '{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"}'
        assert_eq "True" "$(get 'base64.b64decode(r["results"][0]["png"])[:8] == b"\x89PNG\r\n\x1a\n"')" "the chart is a PNG"
        ok "$sid" run_code '{"code": "import pandas as pd\npd.DataFrame({\"a\": [1, 2], \"b\": [3, 4]})"}'
        assert_eq "True|True" "$(get '"%s|%s" % ("<table" in r["results"][0]["html"], r["results"][0]["is_main_result"])')" "a DataFrame as HTML"
        assert_contains "$(get 'r["text"]')" "a  b" "the DataFrame's text"
}

test_prints_stream_as_events_before_the_cell_ends() {
        need_kernel
        local sid out
        sandbox sid
        out=$(timeout 120 python3 - "$sid" <<'PY' 2>&1
import sys, time
from nsbox import Sandbox
s = Sandbox.connect(sys.argv[1])
t0, seen = time.time(), []
x = s.run_code("import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')\n6 * 7",
               on_stdout=lambda t: seen.append((time.time() - t0, "out", t)),
               on_result=lambda r: seen.append((time.time() - t0, "result", r.text)))
end = time.time() - t0
first = [t for t, k, v in seen if v == "first\n"]
print("early" if first and first[0] < end - 1.5 else "late %s %.2f" % (seen, end))
print([(k, v) for _, k, v in seen])
print(x.text, x.logs.stdout)
PY
)
        assert_eq "early" "$(sed -n 1p <<< "$out")" "the first print came before the cell ended: $out"
        assert_eq "[('out', 'first\\n'), ('out', 'second\\n'), ('result', '42')]" "$(sed -n 2p <<< "$out")" "events in order"
        assert_eq "42 ['first\\n', 'second\\n']" "$(sed -n 3p <<< "$out")" "the Execution"
}

test_an_exception_is_the_error_with_traceback() {
        need_kernel
        local sid
        sandbox sid
        ok "$sid" run_code '{"code": "def f():\n    return 1 / 0\nf()"}'
        assert_eq "ZeroDivisionError|division by zero|None" "$(get '"%s|%s|%s" % (r["error"]["name"], r["error"]["value"], r["text"])')" "the error"
        assert_contains "$(get 'r["error"]["traceback"]')" "return" "the traceback shows the failing line"
        ok "$sid" run_code '{"code": "\"still here\""}'
        assert_eq "still here" "$(get 'r["text"]')" "the context after an error"
}

test_contexts_are_isolated_and_can_be_restarted_and_removed() {
        need_kernel
        local sid a b
        sandbox sid
        ok "$sid" list_code_contexts '{}'
        assert_eq "[]" "$(get 'r["contexts"]')" "no contexts before the interpreter started"
        assert_eq 0 "$(server_tagged "$sid")" "list_code_contexts started nothing"
        ok "$sid" create_code_context '{}'
        a=$(get 'r["id"]')
        assert_eq "python" "$(get 'r["language"]')" "the default language"
        ok "$sid" create_code_context '{"language": "python", "cwd": "/tmp"}'
        b=$(get 'r["id"]')
        assert_eq "/tmp" "$(get 'r["cwd"]')" "cwd"
        ok "$sid" run_code "{\"code\": \"v = 'a'\", \"context\": \"$a\"}"
        ok "$sid" run_code "{\"code\": \"v = 'b'\", \"context\": \"$b\"}"
        ok "$sid" run_code "{\"code\": \"v\", \"context\": \"$a\"}"
        assert_eq "a" "$(get 'r["text"]')" "context a's v"
        ok "$sid" run_code "{\"code\": \"import os; os.getcwd()\", \"context\": \"$b\"}"
        assert_eq "/tmp" "$(get 'r["text"]')" "context b's directory"
        ok "$sid" run_code '{"code": "v"}'
        assert_eq "NameError" "$(get 'r["error"]["name"]')" "the default context has no v"
        ok "$sid" list_code_contexts '{}'
        # python's: a, b and the default (javascript's default is listed too, where there is node)
        assert_eq "True|True|3" "$(get '"%s|%s|%d" % (any(c["id"] == "'"$a"'" for c in r["contexts"]), any(c["id"] == "'"$b"'" for c in r["contexts"]), sum(c["language"] == "python" for c in r["contexts"]))')" "listed"
        ok "$sid" restart_code_context "{\"context\": \"$a\"}"
        assert_eq "True" "$(get 'r["restarted"]')" "restart"
        ok "$sid" run_code "{\"code\": \"v\", \"context\": \"$a\"}"
        assert_eq "NameError" "$(get 'r["error"]["name"]')" "a restarted context lost its state"
        ok "$sid" remove_code_context "{\"context\": \"$b\"}"
        assert_eq "True" "$(get 'r["removed"]')" "remove"
        bad "$sid" run_code "{\"code\": \"v\", \"context\": \"$b\"}" "not_found: run_code: context '$b' not found"
        ok "$sid" list_code_contexts '{}'
        assert_eq "2" "$(get 'sum(c["language"] == "python" for c in r["contexts"])')" "python contexts after the removal"
}

test_a_timeout_interrupts_the_cell_and_the_context_answers() {
        need_kernel
        local sid t0 t1
        sandbox sid
        ok "$sid" run_code '{"code": "y = 7"}'
        t0=$(date +%s.%N)
        ok "$sid" run_code '{"code": "while True: pass", "timeout": 1}'
        t1=$(date +%s.%N)
        assert_eq "KeyboardInterrupt" "$(get 'r["error"]["name"]')" "the interrupted cell's error"
        python3 -c "import sys; sys.exit(not ($t1 - $t0 < 8))" || fail "the interrupt took $(python3 -c "print($t1 - $t0)") s"
        ok "$sid" run_code '{"code": "y * 6"}'
        assert_eq "42" "$(get 'r["text"]')" "the context after the interrupt"
}

test_bash_and_javascript_contexts_keep_their_state() {
        need_kernel
        local sid
        sandbox sid
        ok "$sid" run_code '{"code": "cd /tmp; N=6; echo start", "language": "bash"}'
        assert_eq "['start\\n']" "$(get 'r["logs"]["stdout"]')" "bash output"
        ok "$sid" run_code '{"code": "echo $((N * 7)) $PWD", "language": "bash"}'
        assert_eq "['42 /tmp\\n']" "$(get 'r["logs"]["stdout"]')" "bash keeps variables and its directory"
        command -v node > /dev/null || fail "node is needed for javascript contexts (./quickstart.sh --deps)"
        ok "$sid" create_code_context '{"language": "javascript"}'
        local js
        js=$(get 'r["id"]')
        ok "$sid" run_code "{\"code\": \"let n = 6; console.log('hi')\", \"context\": \"$js\"}"
        assert_eq "['hi\\n']" "$(get 'r["logs"]["stdout"]')" "javascript output"
        ok "$sid" run_code "{\"code\": \"n * 7\", \"context\": \"$js\"}"
        assert_eq "42" "$(get 'r["text"]')" "javascript keeps its globals"
        ok "$sid" run_code "{\"code\": \"null.x\", \"context\": \"$js\"}"
        assert_eq "TypeError" "$(get 'r["error"]["name"]')" "a javascript error"
}

test_bad_input_gets_one_line_errors_and_changes_nothing() {
        need_kernel
        local sid
        sandbox sid
        # before the interpreter runs: refused without starting it
        bad "$sid" run_code '{"code": "1", "language": "cobol"}' "invalid_argument: run_code: language 'cobol' is not supported"
        bad "$sid" run_code '{"code": 5}' "invalid_argument: run_code: 'code' must be a string"
        bad "$sid" run_code '{}' "invalid_argument: run_code: 'code' is required"
        bad "$sid" run_code '{"code": "1", "timeout": "soon"}' "invalid_argument: run_code: 'timeout' must be a number"
        bad "$sid" run_code '{"code": "1", "timeout": -1}' "invalid_argument: run_code: 'timeout'"
        bad "$sid" run_code '{"code": "1", "context": 5}' "invalid_argument: run_code: 'context' must be a string"
        bad "$sid" run_code '{"code": "1", "context": "../../etc"}' "not_found: run_code: context '../../etc' not found"
        bad "$sid" run_code '{"code": "1", "context": "abc", "language": "python"}' "invalid_argument: run_code: give 'context' or 'language', not both"
        bad "$sid" restart_code_context '{"context": "nope"}' "not_found: restart_code_context: context 'nope' not found"
        bad "$sid" remove_code_context '{}' "invalid_argument: remove_code_context: 'context' is required"
        bad "$sid" create_code_context '{"language": "fortran"}' "invalid_argument: create_code_context: language 'fortran'"
        bad "$sid" create_code_context '{"cwd": 7}' "invalid_argument: create_code_context: 'cwd' must be a string"
        OUT=$(python3 - "$sid" <<'PY' 2>&1
import sys
from nsbox import Sandbox
try:
    Sandbox.connect(sys.argv[1]).call("run_code", {"code": "#" * ((1 << 20) + 1)})
    print("accepted")
except Exception as e:
    print(e.code, e)
PY
)
        assert_eq "too_large run_code: 'code' is over 1048576 bytes" "$OUT" "code over the size limit"
        assert_eq 0 "$(server_tagged "$sid")" "a code interpreter started by bad input"
        # with the interpreter running: the same, and its state is untouched
        ok "$sid" run_code '{"code": "z = 1"}'
        bad "$sid" run_code '{"code": "1", "context": "0123456789abcdef"}' "not_found: run_code: context '0123456789abcdef' not found"
        bad "$sid" create_code_context '{"cwd": "/etc/passwd"}' "invalid_argument: create_code_context: 'cwd' '/etc/passwd' cannot be made"
        bad "$sid" remove_code_context '{"context": "nope"}' "not_found: remove_code_context: context 'nope' not found"
        ok "$sid" list_code_contexts '{}'
        assert_eq "1" "$(get 'sum(c["language"] == "python" for c in r["contexts"])')" "python contexts after bad input"
        ok "$sid" run_code '{"code": "z + 41"}'
        assert_eq "42|2" "$(get '"%s|%s" % (r["text"], r["execution_count"])')" "the default context after bad input"
}

# Whatever listens on 127.0.0.1:49999 is the sandbox's: what it answers is an error of the call,
# bounded in size and time, and the agent serves the next calls.
test_a_hostile_listener_on_the_port_gets_bounded_errors() {
        local sid mode
        sandbox sid
        cat > "$TEST_TMP/evil.py" <<'PY'
import socket, sys, time
mode = sys.argv[1]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 49999))
s.listen(8)
open("/tmp/evil.ready", "w").close()
while True:
    c, _ = s.accept()
    c.recv(65536)  # the request: unread, it would make close() a reset
    if mode == "garbage":
        c.sendall(b"SSH-2.0-hello\r\n\r\n")
    elif mode == "headers":
        c.sendall(b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 100000)
    elif mode == "chunks":
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    elif mode == "notjson":
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello\n\r\n0\r\n\r\n")
    elif mode == "early":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"type\": \"stdout\"")
    elif mode == "endless":
        c.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        try:
            while True:
                c.sendall(b"x" * 65536)
        except OSError:
            pass
    elif mode == "silent":
        time.sleep(30)
    c.close()
PY
        "$NSBOX" cp "$TEST_TMP/evil.py" "$sid:/tmp/evil.py" || fail "cp"
        for mode in garbage headers chunks notjson early endless silent; do
                assert_status 0 "$NSBOX" exec -d --tag "evil-$mode" "$sid" -- python3 /tmp/evil.py "$mode"
                for _ in $(seq 100); do "$NSBOX" exec "$sid" -- test -e /tmp/evil.ready && break; sleep 0.05; done
                case $mode in
                garbage) bad "$sid" run_code '{"code": "1"}' "run_code: the code interpreter's answer is not valid HTTP: status line" ;;
                headers) bad "$sid" run_code '{"code": "1"}' "run_code: the code interpreter's answer is not valid HTTP: headers too long" ;;
                chunks) bad "$sid" run_code '{"code": "1"}' "run_code: the code interpreter's answer is not valid HTTP: chunk size" ;;
                notjson) bad "$sid" run_code '{"code": "1"}' "run_code: the code interpreter's answer is not valid HTTP: a line of the cell's output is not a JSON object" ;;
                early) bad "$sid" run_code '{"code": "1"}' "run_code: the code interpreter closed the connection before its answer was complete" ;;
                endless) bad "$sid" run_code '{"code": "1"}' "too_large: run_code: a line of the cell's output is over 16777216 bytes" ;;
                silent) bad "$sid" run_code '{"code": "1", "timeout": 0.5}' "timeout: run_code: the code interpreter did not answer in time" ;;
                esac
                assert_status 0 "$NSBOX" call "$sid" process_kill "{\"tag\": \"evil-$mode\"}"
                "$NSBOX" exec "$sid" -- rm -f /tmp/evil.ready
                for _ in $(seq 100); do [ "$(running "$sid" "evil-$mode")" = 0 ] && break; sleep 0.05; done
        done
        ok "$sid" list_dir '{"path": "/tmp"}'
        assert_eq 0 "$(server_tagged "$sid")" "a code interpreter started while something else listened"
}

# A server that exits before it listens (python3-ipykernel missing says so on stderr): the call
# fails with its last line, and the next call starts a server of its own.
test_a_server_that_exits_before_it_is_ready_is_a_clear_error() {
        local sid
        sandbox sid
        assert_status 0 "$NSBOX" exec -d --tag code-interpreter "$sid" -- sh -c 'sleep 0.5; echo starting >&2; echo "the code interpreter did not start: no kernel here" >&2; exit 1'
        bad "$sid" run_code '{"code": "1"}' "run_code: the code interpreter did not start: no kernel here"
        need_kernel
        ok "$sid" run_code '{"code": "6 * 7"}'
        assert_eq "42" "$(get 'r["text"]')" "a call after the failed server"
}

test_mcp_tools_call_run_code() {
        need_kernel
        local out
        out=$(printf '%s\n' \
                '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"code_tools.sh","version":"1"}}}' \
                '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
                '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
                '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"import math\nmath.factorial(5)"}}}' |
                timeout 120 "$NSBOX" mcp 2> "$TEST_TMP/mcp.err")
        assert_eq "True|False|120" "$(printf '%s\n' "$out" | python3 -c '
import json, sys
r = {m.get("id"): m for m in map(json.loads, sys.stdin)}
names = [t["name"] for t in r[2]["result"]["tools"]]
res = r[3]["result"]
print("%s|%s|%s" % (all(n in names for n in ("run_code", "create_code_context", "list_code_contexts", "restart_code_context", "remove_code_context")),
                    res["isError"], json.loads(res["content"][0]["text"])["text"]))')" "MCP tools/list and tools/call run_code ($(cat "$TEST_TMP/mcp.err"))"
}

run_tests
