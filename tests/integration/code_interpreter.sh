#!/usr/bin/env bash
# The code interpreter (issue 23): its server (rootfs/code-interpreter/server.py) in a sandbox,
# started with nsbox exec -d and driven from inside the same sandbox with a urllib client:
# state that persists, rich results (PNG, HTML), streamed prints, errors, isolated contexts
# (python, bash, javascript), timeouts that interrupt and leave the context alive, bad input;
# and nsboxd's built-in code-interpreter template through the HTTP API, with the real SDK.  Runs as root and as an unprivileged user.
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SERVER=${NSBOX_SRC:-$(dirname "$0")/../..}/rootfs/code-interpreter/server.py
SESSION_DIR=$(mktemp -d /tmp/nsbox-ci.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"

# The kernels are Debian's (quickstart.sh installs them); without them there is nothing to test.
KERNEL_MISSING=$(/usr/bin/python3 -c 'import jupyter_client, ipykernel, matplotlib, pandas' 2>&1 | tail -n 1)

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# One nsboxd with the HTTP API for the whole file; stopped with its sandboxes at the end.
PORT=$(free_port)
URL=http://127.0.0.1:$PORT
printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json"}}\n' "$PORT" "$SESSION_DIR" > "$SESSION_DIR/config.json"
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
"$NSBOXD" --config "$SESSION_DIR/config.json" --socket "$NSBOX_SOCKET" >> "$SESSION_DIR/log" 2>&1 < /dev/null &
DPID=$!
trap 'stop_file_daemon "$SESSION_DIR"' EXIT
for _ in $(seq 300); do
        [ "$(daemon_pid)" = "$DPID" ] && break
        sleep 0.1
done

# The client run inside the sandbox: "exec CODE [JSON]" prints each line as it came
# ("SECONDS JSON"), "req METHOD PATH [BODY]" prints "STATUS BODY".
cat > "$SESSION_DIR/client.py" <<'PY'
import json, sys, time, urllib.error, urllib.request
def req(method, path, body=None, timeout=120):
    data = None if body is None else (body if isinstance(body, bytes) else body.encode())
    r = urllib.request.Request("http://127.0.0.1:49999" + path, method=method, data=data,
                               headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(r, timeout=timeout)
cmd = sys.argv[1]
try:
    if cmd == "exec":
        body = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
        body["code"] = sys.argv[2]
        t0, limit = time.time(), float(body.pop("client_timeout", 120))
        with req("POST", "/execute", json.dumps(body), limit) as r:
            for line in r:
                print("%.3f %s" % (time.time() - t0, line.decode().rstrip("\n")), flush=True)
    elif cmd == "big":
        with req("POST", "/execute", json.dumps({"code": "#" * (int(sys.argv[2]))})) as r:
            print(r.status, r.read().decode())
    else:
        with req(cmd, sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None) as r:
            print(r.status, r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except OSError as e:
    print("client:", e)
PY

MY_SANDBOXES=""
# ci_sandbox VAR [CREATE-OPTION...]: a sandbox with the server running and its default context ready
ci_sandbox() {
        [ -z "$KERNEL_MISSING" ] || fail "no Jupyter kernel on this host ($KERNEL_MISSING): ./quickstart.sh --deps installs it"
        local _var=$1 _sid _i
        shift
        _sid=$("$NSBOX" create "$@" 2>&1) || fail "nsbox create: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid'"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        "$NSBOX" cp "$SERVER" "$_sid:/tmp/server.py" || fail "cp server"
        "$NSBOX" cp "$SESSION_DIR/client.py" "$_sid:/tmp/client.py" || fail "cp client"
        START=$(date +%s.%N)
        assert_status 0 "$NSBOX" exec -d --tag ci "$_sid" -- /usr/bin/python3 /tmp/server.py --ready-file /tmp/ready
        for _i in $(seq 600); do
                "$NSBOX" exec "$_sid" -- test -e /tmp/ready 2> /dev/null && break
                "$NSBOX" exec "$_sid" -- test -e /tmp/ready.failed 2> /dev/null &&
                        fail "server: $("$NSBOX" exec "$_sid" -- cat /tmp/ready.failed)"
                sleep 0.05
        done
        "$NSBOX" exec "$_sid" -- test -e /tmp/ready || fail "the server was not ready in 30 s: $("$NSBOX" logs "$_sid" ci 2>&1 | tail -n 5)"
        printf -v "$_var" %s "$_sid"
}

# run ID CODE [JSON]: sets OUT to the lines the server sent (each "SECONDS JSON")
run() { OUT=$("$NSBOX" exec "$1" -- python3 /tmp/client.py exec "$2" "${3:-{\}}" 2>&1); }
# req ID METHOD PATH [BODY]: sets OUT to "STATUS BODY"
req() { local id=$1; shift; OUT=$("$NSBOX" exec "$id" -- python3 /tmp/client.py "$@" 2>&1); }
# field JSONEXPR: from OUT's lines (l: list of objects), e.g. 'main(l)["text"]'
field() {
        printf '%s\n' "$OUT" | python3 -c '
import json, sys
l = [json.loads(x.split(" ", 1)[1]) for x in sys.stdin if x.strip()]
main = lambda l: [o for o in l if o.get("type") == "result" and o.get("is_main_result")][0]
of = lambda t: [o for o in l if o.get("type") == t]
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1" 2>&1
}

# ---- tests ---------------------------------------------------------------------------------

test_state_and_working_directory_persist() {
        local id t0 t1
        ci_sandbox id
        t0=$(date +%s.%N)
        run "$id" "1+1"
        t1=$(date +%s.%N)
        echo "    first 1+1: $(python3 -c "print('%.2f s after the server started, round trip %.3f s' % ($t1 - $START, $t1 - $t0))")" >&2
        assert_eq 2 "$(field 'main(l)["text"]')" "1+1"
        run "$id" "x = 41"
        assert_eq "[]" "$(field 'of("result")')" "x = 41 has no result"
        run "$id" "x + 1"
        assert_eq 42 "$(field 'main(l)["text"]')" "x + 1"
        assert_eq end_of_execution "$(field 'l[-1]["type"]')" "last line"
        assert_contains "$(field 'of("number_of_executions")[0]["execution_count"]')" 3 "execution count"
        run "$id" "import os; os.chdir('/tmp')"
        run "$id" "os.getcwd()"
        assert_eq /tmp "$(field 'main(l)["text"]')" "cwd after chdir"
}

test_matplotlib_png_and_pandas_html() {
        local id
        ci_sandbox id
        run "$id" $'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()'
        assert_eq "" "$(field 'of("error")' | grep -v '^\[\]$')" "plot errors"
        assert_eq "True b'\\x89PNG\\r\\n\\x1a\\n'" "$(field '(lambda b: "%s %s" % (len(b) > 1000, b[:8]))(__import__("base64").b64decode(of("result")[0]["png"]))')" "png"
        run "$id" $'import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})'
        assert_contains "$(field 'main(l)["html"]')" "<table" "DataFrame html"
        assert_contains "$(field 'main(l)["text"]')" "a  b" "DataFrame text"
}

# E2B's other result formats, each from IPython's display classes: markdown, svg, jpeg, json, latex
test_markdown_svg_jpeg_json_latex_results() {
        local id
        ci_sandbox id
        run "$id" $'from IPython.display import display, Markdown, SVG, Image, JSON, Latex
display(Markdown("**bold**"))
display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="2" height="2"/>\'))
display(Image(data=bytes.fromhex("ffd8ffe000104a464946") + bytes(8), format="jpeg"))
display(JSON({"a": 1}))
Latex(r"$x^2$")'
        assert_eq "[]" "$(field 'of("error")')" "display errors"
        assert_eq "**bold**" "$(field 'of("result")[0]["markdown"]')" "markdown"
        assert_contains "$(field 'of("result")[1]["svg"]')" "<svg" "svg"
        assert_eq "b'\\xff\\xd8\\xff\\xe0'" "$(field 'str(__import__("base64").b64decode(of("result")[2]["jpeg"])[:4])')" "jpeg"
        assert_eq '{"a": 1}' "$(field 'of("result")[3]["json"]')" "json"
        assert_eq '$x^2$ True' "$(field 'main(l)["latex"] + " " + str(main(l)["is_main_result"])')" "latex as the main result"
        assert_eq "[false, false, false, false, true]" "$(field '[o["is_main_result"] for o in of("result")]')" "only the last expression is main"
}

test_print_streams_before_the_cell_ends() {
        local id
        ci_sandbox id
        run "$id" $'import time\nprint("first", flush=True)\ntime.sleep(2)\nprint("second")'
        local first end
        first=$(printf '%s\n' "$OUT" | grep '"first' | cut -d' ' -f1)
        end=$(printf '%s\n' "$OUT" | grep end_of_execution | cut -d' ' -f1)
        [ -n "$first" ] && [ -n "$end" ] || fail "lines: $OUT"
        python3 -c "import sys; sys.exit(0 if $end - $first > 1.5 else 1)" || fail "'first' came at $first s, the end at $end s: not streamed"
        assert_eq "first
second" "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "stdout"
}

test_error_with_traceback() {
        local id
        ci_sandbox id
        run "$id" "1/0"
        assert_eq ZeroDivisionError "$(field 'of("error")[0]["name"]')" "error name"
        assert_eq "division by zero" "$(field 'of("error")[0]["value"]')" "error value"
        assert_contains "$(field 'of("error")[0]["traceback"]')" "Traceback (most recent call last)" "traceback"
        run "$id" "print('still here')"
        assert_eq "still here" "$(field 'of("stdout")[0]["text"].strip()')" "after an error"
}

test_contexts_are_isolated_listed_restarted_removed() {
        local id ctx
        ci_sandbox id
        req "$id" POST /contexts '{"language": "python", "cwd": "/tmp"}'
        assert_eq 200 "${OUT%% *}" "create context: $OUT"
        ctx=$(printf '%s' "${OUT#* }" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["cwd"] == "/tmp" and d["language"] == "python"; print(d["id"])') ||
                fail "context: $OUT"
        run "$id" "y = 'mine'" "{\"context_id\": \"$ctx\"}"
        run "$id" "y" "{\"context_id\": \"$ctx\"}"
        assert_eq mine "$(field 'main(l)["text"]')" "y in its context"
        run "$id" "y"
        assert_eq NameError "$(field 'of("error")[0]["name"]')" "y in the default context"
        run "$id" "import os; os.getcwd()" "{\"context_id\": \"$ctx\"}"
        assert_eq /tmp "$(field 'main(l)["text"]')" "the context's cwd"
        req "$id" GET /contexts
        assert_contains "$OUT" "$ctx" "list"
        req "$id" POST "/contexts/$ctx/restart"
        assert_eq 204 "${OUT%% *}" "restart"
        run "$id" "y" "{\"context_id\": \"$ctx\"}"
        assert_eq NameError "$(field 'of("error")[0]["name"]')" "y after a restart"
        req "$id" DELETE "/contexts/$ctx"
        assert_eq 204 "${OUT%% *}" "delete"
        run "$id" "1" "{\"context_id\": \"$ctx\"}"
        assert_contains "$OUT" "404" "a deleted context"
}

test_timeout_interrupts_and_the_context_survives() {
        local id
        ci_sandbox id
        run "$id" "x = 7"
        run "$id" "while True: pass" '{"timeout": 1}'
        assert_eq KeyboardInterrupt "$(field 'of("error")[0]["name"]')" "interrupted: $OUT"
        python3 -c "import sys; sys.exit(0 if $(printf '%s\n' "$OUT" | tail -n 1 | cut -d' ' -f1) < 5 else 1)" || fail "took too long: $OUT"
        run "$id" "x"
        assert_eq 7 "$(field 'main(l)["text"]')" "x after the interrupt"
        # a client that goes away (the SDK's timeoutMs) interrupts the cell too
        run "$id" "while True: pass" '{"client_timeout": 1}'
        assert_contains "$OUT" "timed out" "client timeout"
        run "$id" "x + 1" '{"client_timeout": 10}'
        assert_eq 8 "$(field 'main(l)["text"]')" "x after the client went away"
}

# a kernel that dies is reported by its cell and started again for the next one, as Jupyter's
# restarter does: a default context is never left dead (the SDK user has no id to restart it by)
test_dead_kernel_is_reported_and_started_again() {
        local id ctx
        ci_sandbox id
        req "$id" POST /contexts '{}'
        ctx=$(printf '%s' "${OUT#* }" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])') || fail "context: $OUT"
        run "$id" "y = 1" "{\"context_id\": \"$ctx\"}"
        run "$id" "import os; os._exit(1)" "{\"context_id\": \"$ctx\"}"
        assert_eq DeadKernelError "$(field 'of("error")[0]["name"]')" "the cell that killed its kernel: $OUT"
        run "$id" "'y' in dir()" "{\"context_id\": \"$ctx\"}"
        assert_eq False "$(field 'main(l)["text"]')" "the next cell, in a new kernel: $OUT"
        assert_contains "$(field 'of("stderr")[0]["text"]')" "runs in a new one" "what the next cell is told"
        run "$id" "exit 3" '{"language": "bash"}'
        assert_eq DeadKernelError "$(field 'of("error")[0]["name"]')" "bash's exit: $OUT"
        run "$id" "echo again" '{"language": "bash"}'
        assert_eq again "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "bash's default context after its exit"
        req "$id" POST "/contexts/$ctx/restart"
        run "$id" "2 + 2" "{\"context_id\": \"$ctx\"}"
        assert_eq 4 "$(field 'main(l)["text"]')" "after an explicit restart"
}

test_bash_and_javascript_contexts() {
        local id
        ci_sandbox id
        run "$id" $'X=5; cd /tmp\necho "hi $X"' '{"language": "bash"}'
        assert_eq "hi 5" "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "bash"
        run "$id" 'echo "$X $PWD $ONE"' '{"language": "bash", "env_vars": {"ONE": "1"}}'
        assert_eq "5 /tmp 1" "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "bash state and env_vars"
        run "$id" 'sleep 100' '{"language": "bash", "timeout": 1}'
        assert_eq KeyboardInterrupt "$(field 'of("error")[0]["name"]')" "bash interrupted"
        run "$id" 'echo "[$X] [$ONE]"' '{"language": "bash"}'
        assert_eq "[5] []" "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "bash after the interrupt"
        command -v node > /dev/null || fail "no node on this host for javascript contexts (./quickstart.sh --deps)"
        run "$id" "let y = 41; console.log('hi'); y + 1" '{"language": "js"}'
        assert_eq "hi 42" "$(field 'of("stdout")[0]["text"].strip() + " " + main(l)["text"]')" "javascript"
        run "$id" "while (true) {}" '{"language": "javascript", "timeout": 1}'
        assert_contains "$(field 'of("error")[0]["value"]')" "interrupted" "javascript interrupted"
        run "$id" "null.x" '{"language": "js"}'
        assert_eq TypeError "$(field 'of("error")[0]["name"]')" "javascript error"
        run "$id" "Promise.resolve(y)" '{"language": "js"}'
        assert_eq 41 "$(field 'main(l)["text"]')" "javascript after the interrupt, a promise's value"
        # top-level await and static imports, as E2B's JavaScript kernel takes them; what they
        # declare stays for the next cells, as a script's declarations do
        run "$id" $'import { join } from "path";\nimport * as os from "os"\nconst r = await Promise.resolve(y + 1);\nconsole.log(join("a", "b")); r + os.EOL.length' '{"language": "js"}'
        assert_eq "a/b 43" "$(field 'of("stdout")[0]["text"].strip() + " " + main(l)["text"]')" "javascript: imports and a top-level await"
        run "$id" "r + y" '{"language": "js"}'
        assert_eq 83 "$(field 'main(l)["text"]')" "the await cell's declaration in the next cell"
        run "$id" "await null; throw new RangeError('late')" '{"language": "js"}'
        assert_eq RangeError "$(field 'of("error")[0]["name"]')" "an await cell's error"
        run "$id" "await new Promise(() => {})" '{"language": "js", "timeout": 1}'
        assert_contains "$(field 'of("error")[0]["value"]')" "interrupted" "an await cell interrupted"
        run "$id" "y" '{"language": "js"}'
        assert_eq 41 "$(field 'main(l)["text"]')" "javascript after that interrupt"
        # a throw in a callback after its cell ended, a promise nobody awaited: the context lives on
        run "$id" "setTimeout(() => { throw new Error('late') }, 10); Promise.reject(new Error('unawaited')); 1" '{"language": "js"}'
        sleep 0.3
        run "$id" "y" '{"language": "js"}'
        assert_eq 41 "$(field 'main(l)["text"]')" "javascript after a late throw"
        assert_contains "$OUT" "Uncaught Error: late" "the late throw, on the next cell's stderr"
}

# TypeScript: a javascript context whose cells' types the host's compiler strips (Debian's
# node-typescript); where the sandbox has no compiler, such a context is a clear 400
test_typescript_contexts() {
        local id d hide=()
        command -v node > /dev/null || fail "no node on this host for typescript contexts (./quickstart.sh --deps)"
        [ -r /usr/share/nodejs/typescript/lib/typescript.js ] || fail "no TypeScript compiler on this host (./quickstart.sh --deps installs node-typescript)"
        ci_sandbox id
        run "$id" $'interface P { a: number }\nconst p: P = { a: 41 };\nenum C { A, B }\nconsole.log(typeof p, C.B)' '{"language": "ts"}'
        assert_eq "object 1" "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "a typescript cell"
        run "$id" "p.a + 1 as number" '{"language": "typescript"}'
        assert_eq 42 "$(field 'main(l)["text"]')" "its declarations in the next cell"
        run "$id" $'import { join } from "path"\nconst r: string = await Promise.resolve(join("a", "b")); r' '{"language": "ts"}'
        assert_eq a/b "$(field 'main(l)["text"]')" "a static import and a top-level await"
        run "$id" "let x: = 3" '{"language": "ts"}'
        assert_eq SyntaxError "$(field 'of("error")[0]["name"]')" "a cell that is not TypeScript"
        assert_contains "$(field 'of("error")[0]["value"]')" "Type expected. (cell.ts:1:8)" "its message"
        run "$id" "typeof p" '{"language": "js"}'
        assert_eq undefined "$(field 'main(l)["text"]')" "p in the javascript context"
        req "$id" POST /contexts '{"language": "ts"}'
        assert_contains "$OUT" '"language": "typescript"' "a new typescript context"
        # the compiler hidden from the sandbox: a typescript context is refused, javascript still runs
        for d in /usr/share/nodejs/typescript /usr/lib/node_modules/typescript /usr/local/lib/node_modules/typescript; do
                [ -d "$d" ] && hide+=(--tmpfs "$d")
        done
        ci_sandbox id "${hide[@]}"
        run "$id" "1 as number" '{"language": "ts"}'
        assert_contains "$OUT" "400" "typescript without a compiler"
        assert_contains "$OUT" "typescript contexts need the TypeScript compiler" "typescript without a compiler"
        assert_contains "$OUT" "apt-get install node-typescript" "typescript without a compiler"
        run "$id" "1 + 1" '{"language": "js"}'
        assert_eq 2 "$(field 'main(l)["text"]')" "javascript without the TypeScript compiler"
}

# R: a Jupyter context of the host's IRkernel (Debian's r-cran-irkernel), with E2B's env_vars;
# where the sandbox has no such kernel, an R context is a clear 400
test_r_contexts() {
        local id
        [ -r /usr/share/jupyter/kernels/ir/kernel.json ] || fail "no R kernel on this host (./quickstart.sh --deps installs r-cran-irkernel)"
        ci_sandbox id
        run "$id" $'x <- 41\nprint(getwd())\nx + 1' '{"language": "r"}'
        assert_eq '[1] "/workspace"' "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "an R cell's output (in the working directory)"
        assert_eq "[1] 42" "$(field 'of("result")[0]["text"]')" "its value"
        run "$id" 'Sys.getenv(c("ONE", "TWO"))' '{"language": "r", "env_vars": {"ONE": "1", "TWO": "a \"quoted\" \\ value"}}'
        assert_contains "$(field 'of("result")[0]["text"]')" '"a \"quoted\" \\ value"' "env_vars in an R cell"
        run "$id" 'Sys.getenv("ONE", unset = "gone")' '{"language": "r"}'
        assert_eq '[1] "gone"' "$(field 'of("result")[0]["text"]')" "an execution's env_vars after it"
        run "$id" "stop('nope')" '{"language": "r"}'
        assert_contains "$(field 'of("error")[0]["value"]')" "nope" "an R error"
        run "$id" "Sys.sleep(100)" '{"language": "r", "timeout": 1}'
        assert_eq KeyboardInterrupt "$(field 'of("error")[0]["name"]')" "an R cell interrupted"
        run "$id" "x" '{"language": "r"}'
        assert_eq "[1] 41" "$(field 'of("result")[0]["text"]')" "x after the error and the interrupt"
        req "$id" POST /contexts '{"language": "R"}'
        assert_contains "$OUT" '"language": "r"' "a new R context"
        # the kernel hidden from the sandbox: an R context is refused, python still runs
        ci_sandbox id --tmpfs /usr/share/jupyter/kernels/ir
        run "$id" "1" '{"language": "r"}'
        assert_contains "$OUT" "400" "R without its kernel"
        assert_contains "$OUT" "apt-get install r-cran-irkernel" "R without its kernel"
        run "$id" "1 + 1"
        assert_eq 2 "$(field 'main(l)["text"]')" "python without the R kernel"
}

# Java: the host JDK's JShell in a JVM of its own (Debian's openjdk-17-jdk-headless), env_vars as
# system properties (E2B's); without jshell in the sandbox, a Java context is a clear 400
test_java_contexts() {
        local id jdk
        command -v jshell > /dev/null || fail "no JShell on this host (./quickstart.sh --deps installs openjdk-17-jdk-headless)"
        ci_sandbox id
        run "$id" $'import java.util.*;\nint x = 41;\nSystem.out.println("hi " + x);\nString twice(String s) { return s + s; }\ntwice("ab")' '{"language": "java"}'
        assert_eq "hi 41" "$(field '"".join(o["text"] for o in of("stdout")).strip()')" "a Java cell's output"
        assert_eq abab "$(field 'main(l)["text"]')" "its value, a String's text"
        run "$id" $'List<Integer> l = new ArrayList<>(List.of(3, 1, 2));\nCollections.sort(l);\nl' '{"language": "java"}'
        assert_eq "[1, 2, 3]" "$(field 'main(l)["text"]')" "an import and a method kept for the next cells"
        run "$id" 'System.getProperty("ONE") + System.getProperty("user.dir")' '{"language": "java", "env_vars": {"ONE": "1 \"q\" "}}'
        assert_eq '1 "q" /workspace' "$(field 'main(l)["text"]')" "env_vars as system properties, and the working directory"
        run "$id" 'System.getProperty("ONE", "gone")' '{"language": "java"}'
        assert_eq gone "$(field 'main(l)["text"]')" "an execution's env_vars after it"
        run "$id" "1 / 0" '{"language": "java"}'
        assert_eq "java.lang.ArithmeticException / by zero" "$(field 'of("error")[0]["name"] + " " + of("error")[0]["value"]')" "an exception"
        run "$id" "int y = " '{"language": "java"}'
        assert_eq CompilationException "$(field 'of("error")[0]["name"]')" "a cell the compiler refuses"
        run "$id" "long n = 0; while (true) { n++; }" '{"language": "java", "timeout": 1}'
        assert_eq InterruptedException "$(field 'of("error")[0]["name"]')" "a Java cell interrupted"
        run "$id" "x" '{"language": "java"}'
        assert_eq 41 "$(field 'main(l)["text"]')" "x after the interrupt"
        req "$id" POST /contexts '{"language": "java"}'
        assert_contains "$OUT" '"language": "java"' "a new Java context"
        # the JDK hidden from the sandbox: a Java context is refused, python still runs
        jdk=$(dirname "$(dirname "$(readlink -f "$(command -v jshell)")")")
        ci_sandbox id --tmpfs "$jdk"
        run "$id" "1" '{"language": "java"}'
        assert_contains "$OUT" "400" "Java without a JDK"
        assert_contains "$OUT" "apt-get install openjdk-17-jdk-headless" "Java without a JDK"
        run "$id" "1 + 1"
        assert_eq 2 "$(field 'main(l)["text"]')" "python without the JDK"
}

test_bad_input_is_refused_clearly() {
        local id
        ci_sandbox id
        run "$id" "1" '{"language": "cobol"}'
        assert_contains "$OUT" "400" "unknown language"
        assert_contains "$OUT" "not supported" "unknown language"
        req "$id" POST /contexts '{"language": "fortran"}'
        assert_contains "$OUT" "400" "a Fortran context"
        run "$id" "1" '{"context_id": "nope"}'
        assert_contains "$OUT" "404" "unknown context"
        run "$id" "1" '{"context_id": "x", "language": "python"}'
        assert_contains "$OUT" "400" "context and language"
        req "$id" big 1048577
        assert_contains "$OUT" "413" "code over 1 MiB"
        req "$id" POST /execute '{"code": '
        assert_contains "$OUT" "400" "bad JSON"
        req "$id" POST /execute '{"code": 1}'
        assert_contains "$OUT" "'code' must be a string" "code not a string"
        req "$id" GET /nothing
        assert_contains "$OUT" "404" "unknown path"
        req "$id" POST /contexts '{"cwd": "/no/such"}'
        assert_contains "$OUT" "400" "missing cwd"
        run "$id" "21 * 2"
        assert_eq 42 "$(field 'main(l)["text"]')" "the server after bad input"
}

test_builtin_template_through_the_http_api() {
        [ -z "$KERNEL_MISSING" ] || fail "no Jupyter kernel on this host ($KERNEL_MISSING): ./quickstart.sh --deps installs it"
        local key body sid t0 t1
        key=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create"
        t0=$(date +%s.%N)
        body=$(curl -s -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"templateID": "code-interpreter-v1", "timeout": 120}' "$URL/v2/sandboxes")
        t1=$(date +%s.%N)
        sid=$(printf '%s' "$body" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["templateID"] == "code-interpreter-v1"; print(d["sandboxID"])') ||
                fail "create: $body"
        MY_SANDBOXES="$MY_SANDBOXES $sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        echo "    create code-interpreter-v1: $(python3 -c "print('%.2f s' % ($t1 - $t0))")" >&2
        "$NSBOX" cp "$SESSION_DIR/client.py" "$sid:/tmp/client.py" || fail "cp client"
        # ready when create answered: the first cell needs no wait
        t0=$(date +%s.%N)
        run "$sid" "import os; os.getcwd(), os.environ['HOME']"
        t1=$(date +%s.%N)
        assert_eq "('/home/user', '/home/user')" "$(field 'main(l)["text"]')" "the template's context"
        echo "    first cell after create: $(python3 -c "print('%.3f s' % ($t1 - $t0))")" >&2
        assert_contains "$("$NSBOX" call "$sid" process_list)" '"tag": "code-interpreter"' "the server's tag"
        body=$(curl -s -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"templateID": "code-interpreter-v2"}' "$URL/v2/sandboxes")
        assert_contains "$body" '"code":404' "another name"
}

# A pause that keeps no memory kills the server with the rest; the connect that resumes the sandbox
# starts it again, with the create's envVars, and answers once its default context is ready:
# the cells see a fresh kernel
test_builtin_server_starts_again_after_a_pause_without_memory() {
        [ -z "$KERNEL_MISSING" ] || fail "no Jupyter kernel on this host ($KERNEL_MISSING): ./quickstart.sh --deps installs it"
        local key body sid code
        key=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create"
        body=$(curl -s -H "X-API-KEY: $key" -H 'Content-Type: application/json' \
                -d '{"templateID": "code-interpreter-v1", "timeout": 120, "envVars": {"GREETING": "hi again"}, "allow_internet_access": false}' "$URL/v2/sandboxes")
        sid=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create: $body"
        MY_SANDBOXES="$MY_SANDBOXES $sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        "$NSBOX" cp "$SESSION_DIR/client.py" "$sid:/tmp/client.py" || fail "cp client"
        run "$sid" "x = 41"
        run "$sid" "x + 1"
        assert_eq 42 "$(field 'main(l)["text"]')" "x + 1 before the pause"
        code=$(curl -s -o "$TEST_TMP/b" -w '%{http_code}' -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"memory": false}' "$URL/sandboxes/$sid/pause")
        assert_eq 204 "$code" "pause without memory: $(cat "$TEST_TMP/b")"
        code=$(curl -s -o "$TEST_TMP/b" -w '%{http_code}' -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"timeout": 120}' "$URL/sandboxes/$sid/connect")
        assert_eq 201 "$code" "connect: $(cat "$TEST_TMP/b")"
        run "$sid" "x + 1"
        assert_eq NameError "$(field 'of("error")[0]["name"]')" "x in the new kernel"
        run "$sid" "import os; os.environ.get('GREETING') == 'hi again'"
        assert_eq True "$(field 'main(l)["text"]')" "the create's envVars after the reboot"
        assert_eq "[True]" "$("$NSBOX" call "$sid" process_list | python3 -c 'import json, sys; print([p["running"] for p in json.load(sys.stdin)["processes"] if p["tag"] == "code-interpreter" and p["running"]])')" "servers running"
}

# A template named code-interpreter with a pool (nsboxd(8), TEMPLATES): its pooled sandboxes start
# the server beforehand, and a create that takes one starts no second server; the create's
# envVars still reach every cell and new contexts, and a create without them sees none; the
# pool serves E2B's name code-interpreter-v1 too, its default context started before the create.
pool_ready() { # up to 30 s, until the code-interpreter template's pool has a sandbox ready
        local i
        for i in $(seq 300); do
                "$NSBOX" stats --json 2> /dev/null |
                        python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["templates"]["code-interpreter"]["ready"] < 1)' 2> /dev/null && return 0
                sleep 0.1
        done
        return 1
}

test_warm_pool_starts_the_kernel_beforehand() {
        [ -z "$KERNEL_MISSING" ] || fail "no Jupyter kernel on this host ($KERNEL_MISSING): ./quickstart.sh --deps installs it"
        local dir port url key body sid sid2 i
        dir=$(mktemp -d "$SESSION_DIR/pool.XXXXXX") && chmod 0711 "$dir" || fail "mktemp"
        port=$(free_port)
        url=http://127.0.0.1:$port
        printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json"},
 "templates": {"code-interpreter": {"create": {"workdir": "/home/user"}, "pool": 1}}}\n' "$port" "$dir" > "$dir/config.json"
        export NSBOX_SOCKET="$dir/d.sock"
        "$NSBOXD" --config "$dir/config.json" --socket "$NSBOX_SOCKET" >> "$dir/log" 2>&1 < /dev/null &
        trap 'stop_file_daemon "$dir"' EXIT
        for i in $(seq 300); do [ -n "$(daemon_pid)" ] && break; sleep 0.1; done
        key=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create: $(tail -n 3 "$dir/log")"
        pool_ready || fail "the pool did not fill: $(tail -n 3 "$dir/log")"
        body=$(curl -s -H "X-API-KEY: $key" -H 'Content-Type: application/json' \
                -d '{"templateID": "code-interpreter", "timeout": 120, "envVars": {"GREETING": "warm hello"}}' "$url/v2/sandboxes")
        sid=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create: $body"
        grep -q "pool.handover.*$sid" "$dir/log" || fail "the sandbox did not come from the pool: $(grep -c pool "$dir/log") pool lines in the log"
        assert_eq 1 "$("$NSBOX" call "$sid" process_list | grep -o '"tag": "code-interpreter"' | wc -l)" "code-interpreter servers in the sandbox"
        "$NSBOX" cp "$SESSION_DIR/client.py" "$sid:/tmp/client.py" || fail "cp client"
        run "$sid" "import os; os.environ.get('GREETING') == 'warm hello'"
        assert_eq True "$(field 'main(l)["text"]')" "the create's envVars in a cell"
        run "$sid" "x = 41"
        run "$sid" "x + 1"
        assert_eq 42 "$(field 'main(l)["text"]')" "state between cells"
        req "$sid" POST /contexts '{"language": "python"}'
        local ctx
        ctx=$(printf '%s' "${OUT#* }" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])') || fail "context: $OUT"
        run "$sid" "import os; os.environ.get('GREETING') == 'warm hello'" "{\"context_id\": \"$ctx\"}"
        assert_eq True "$(field 'main(l)["text"]')" "the create's envVars in a new context"
        # the SDK's default name, code-interpreter-v1, is served by the same pool; once the pool
        # has refilled and its kernel had time to start, the server's ready file (written once
        # the default context answers) is older than the create
        pool_ready || fail "the pool did not refill: $(tail -n 3 "$dir/log")"
        sleep 8
        local t0
        t0=$(date +%s.%N)
        body=$(curl -s -H "X-API-KEY: $key" -H 'Content-Type: application/json' -d '{"templateID": "code-interpreter-v1", "timeout": 120}' "$url/v2/sandboxes")
        sid2=$(printf '%s' "$body" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["templateID"] == "code-interpreter-v1"; print(d["sandboxID"])') ||
                fail "second create: $body"
        grep -q "pool.handover.*$sid2" "$dir/log" || fail "code-interpreter-v1 did not come from code-interpreter's pool"
        assert_eq 1 "$("$NSBOX" call "$sid2" process_list | grep -o '"tag": "code-interpreter"' | wc -l)" "code-interpreter servers in the v1 sandbox"
        local ready
        ready=$("$NSBOX" exec "$sid2" -- python3 -c 'import glob, os; print(min(os.stat(p).st_mtime for p in glob.glob("/tmp/.nsbox-code-interpreter-*") if p[-1].isdigit()))' 2>&1)
        python3 -c "import sys; sys.exit(0 if $ready < $t0 else 1)" 2> /dev/null ||
                fail "the default context was ready at $ready, not before the create at $t0"
        "$NSBOX" cp "$SESSION_DIR/client.py" "$sid2:/tmp/client.py" || fail "cp client"
        run "$sid2" "import os; 'GREETING' in os.environ"
        assert_eq False "$(field 'main(l)["text"]')" "another sandbox's envVars"
}

test_sdk_through_the_port_proxy() {
        [ -z "$KERNEL_MISSING" ] || fail "no Jupyter kernel on this host ($KERNEL_MISSING): ./quickstart.sh --deps installs it"
        local key body sid tok
        key=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create"
        body=$(curl -s -H "X-API-KEY: $key" -d '{"templateID": "code-interpreter", "timeout": 60}' "$URL/v2/sandboxes")
        sid=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create: $body"
        tok=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])')
        MY_SANDBOXES="$MY_SANDBOXES $sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        body=$(curl -s -m 10 -H "E2b-Sandbox-Id: $sid" -H "X-Access-Token: $tok" -H "E2b-Sandbox-Port: 49999" "$URL/health")
        case "$body" in *'"status"'*) ;; *) fail "the port proxy does not reach the code interpreter on port 49999: $body" ;; esac
        command -v node > /dev/null && command -v npm > /dev/null || fail "node and npm are needed for the SDK (./quickstart.sh --deps)"
        local v dir out st
        v=$(node --version 2>&1)
        [ "$(printf '%s\n%s\n' 20.18.1 "${v#v}" | sort -V | head -n 1)" = 20.18.1 ] || fail "node $v: the SDK needs 20.18.1 or later"
        "$NSBOX" rm -f "$sid" > /dev/null 2>&1
        dir=$(npm_cache_dir e2b node_modules/.package-lock.json "$NSBOX_SRC/tests/e2b" 2> "$TEST_TMP/npm.err") ||
                fail "npm ci of tests/e2b: $(tail -n 5 "$TEST_TMP/npm.err")"
        mkdir -p "$TEST_TMP/e2b" && cp "$NSBOX_SRC"/tests/e2b/lib.mjs "$NSBOX_SRC"/tests/e2b/code_interpreter.mjs "$TEST_TMP/e2b/" &&
                ln -s "$dir/node_modules" "$TEST_TMP/e2b/node_modules" || fail "lay out $TEST_TMP/e2b"
        out=$(cd "$TEST_TMP/e2b" && E2B_API_URL=$URL E2B_SANDBOX_URL=$URL E2B_API_KEY=$key E2B_DEBUG=false NO_UPDATE_NOTIFIER=1 \
                timeout -k 10 300 node code_interpreter.mjs 2> "$TEST_TMP/node.err")
        st=$?
        printf '%s\n' "$out" "$(cat "$TEST_TMP/node.err")" | sed 's/^/    /' >&2
        assert_not_contains "$out" "not ok" "the SDK's checks"
        assert_not_contains "$out" "skip " "the SDK's checks"
        assert_contains "$out" "ok ci_timeout_interrupts" "the SDK's checks"
        assert_contains "$out" "ok ci_contexts" "the SDK's context calls (no access token: public ports)"
        assert_contains "$out" "ok ci_chart_and_data" "E2B's chart and data results"
        assert_contains "$out" "ok ci_default_contexts_and_a_new_cwd" "python and javascript default contexts"
        assert_contains "$out" "ok ci_typescript" "TypeScript contexts"
        assert_contains "$out" "ok ci_r" "R contexts"
        assert_contains "$out" "ok ci_java" "Java contexts"
        assert_contains "$out" "ok ci_run_code_of_a_killed_sandbox_is_a_timeout_error" "a cell cut by a kill"
        assert_eq 0 "$st" "node's exit status"
}

run_tests
