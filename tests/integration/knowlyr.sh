#!/usr/bin/env bash
# knowlyr AgentSandbox's flow, as its users run it against nsbox (a stand-in written from its
# documented interface): its tool names and params (file_read, file_write, shell, search, git),
# its trajectory document replayed with its success semantics, and a sandbox made from
# --repo http://... --commit SHA, cloned inside the sandbox through its own network.
# Runs as root and as an unprivileged user (tests/run does both).
# The shell scripts run in sandboxes are in single quotes on purpose: they expand inside.
# shellcheck disable=SC2016
. "$(dirname "$0")/../lib.sh"

# A daemon of our own on a socket of our own, and a store of our own; both go when this file ends.
SESSION_DIR=$(mktemp -d /tmp/nsbox-kn.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
export NSBOX_STORE="$SESSION_DIR/store"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT

# A Python expression over the JSON document d read from standard input: a string is printed as
# it is, anything else as JSON.
jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

MY_SANDBOXES=""
cleanup_test() {
        # shellcheck disable=SC2086
        [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES > /dev/null 2>&1
        # shellcheck disable=SC2086
        [ -z "${MY_PIDS:-}" ] || { kill $MY_PIDS 2> /dev/null; wait 2> /dev/null; }
}
new_sandbox() { # VAR [nsbox create options]
        local _var=$1 _sid; shift
        _sid=$("$NSBOX" create "$@" 2>&1) || fail "nsbox create $*: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create $* printed '$_sid', not a 32-hex-digit id"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap cleanup_test EXIT
        printf -v "$_var" %s "$_sid"
}

# ---- tool names ----------------------------------------------------------------------------

test_knowlyr_tool_names_and_params_through_nsbox_call() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" file_write '{"path": "src/a.py", "content": "one\ntwo\nthree\nfour\n# TODO x\n"}'
        assert_status 0 "$NSBOX" call "$id" file_read '{"path": "src/a.py", "start_line": 2, "end_line": 3}'
        assert_eq '"two\nthree\n"' "$(echo "$OUT" | jget 'json.dumps(d["content"])')" "file_read lines 2 to 3"
        assert_status 0 "$NSBOX" call "$id" file_read '{"path": "src/a.py", "start_line": 4}'
        assert_eq '"four\n# TODO x\n"' "$(echo "$OUT" | jget 'json.dumps(d["content"])')" "file_read from line 4"
        assert_status 0 "$NSBOX" call "$id" shell '{"command": "wc -l < src/a.py; exit 3", "timeout": 10}'
        assert_eq '5 3' "$(echo "$OUT" | jget '"%s %s" % (d["stdout"].strip(), d["exit_code"])')" "shell: stdout and exit code"
        assert_status 0 "$NSBOX" call "$id" shell '{"command": "sleep 5", "timeout": 0.3}'
        assert_eq 'true' "$(echo "$OUT" | jget 'd["timed_out"]')" "shell's timeout"
        assert_status 0 "$NSBOX" call "$id" file_write '{"path": "notes.txt", "content": "TODO not python\n"}'
        assert_status 0 "$NSBOX" call "$id" search '{"pattern": "TODO", "file_pattern": "*.py"}'
        assert_eq '["src/a.py:5"]' "$(echo "$OUT" | jget '[m["path"].split("/workspace/")[-1] + ":%d" % m["line"] for m in d["matches"]]')" "search with file_pattern"
        "$NSBOX" exec "$id" -- git --version > /dev/null 2>&1 || skip "no git in the sandbox"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'git init -q . && git add -A && git -c user.name=t -c user.email=t@t commit -qm "first one"'
        assert_status 0 "$NSBOX" call "$id" git '{"subcommand": "log --format=%s%x09$HOME -n 1"}'
        assert_eq 'first one	$HOME 0' "$(echo "$OUT" | jget '"%s %s" % (d["stdout"].strip(), d["exit_code"])')" "git: argv without a shell"
        assert_status 0 "$NSBOX" call "$id" git '{"subcommand": "no-such-subcommand"}'
        assert_eq 1 "$(echo "$OUT" | jget 'd["exit_code"]')" "git with a bad subcommand: git's own status"
        # refused as their tools refuse, with one-line errors
        assert_status 1 "$NSBOX" call "$id" file_read '{"path": "src/a.py", "start_line": 3, "end_line": 2}'
        assert_contains "$OUT" "'end_line' (2) is before 'start_line' (3)" "file_read with end before start"
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" git '{"subcommand": "commit -m \"open"}'
        assert_contains "$OUT" "unterminated" "git with an open quote"
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" shell '{"timeout": 1}'
        assert_contains "$OUT" "give exactly one of" "shell without a command: exec's own error"
        # the json list shows them as aliases of their tools, as ls and run_commands are
        assert_status 0 "$NSBOX" tools
        assert_eq '["run_commands", "shell", "git"] ["file_read"] ["file_write"] ["search"]' \
                "$(echo "$OUT" | jget '" ".join(json.dumps([t for t in d if t["name"] == n][0]["aliases"]) for n in ("exec", "read_file", "write_file", "grep"))')" "aliases in nsbox tools"
}

# ---- trajectories --------------------------------------------------------------------------

# knowlyr's document, replayed step by step through the tool registry; a failed command (127) is
# no success even though its output is the expected one, and makes the replay exit 1.
test_knowlyr_trajectory_replays_with_success_semantics() {
        cat > "$TEST_TMP/traj.json" <<'EOF'
{
  "steps": [
    {"tool_name": "file_write", "params": {"path": "app.py", "content": "print('hi')\n"}},
    {"tool_name": "file_read", "params": {"path": "app.py", "start_line": 1, "end_line": 1}, "expected_output": "print('hi')\n"},
    {"tool_name": "shell", "params": {"command": "echo ok; wc -l < app.py", "timeout": 30}, "expected_output": "ok\n1\n"},
    {"tool_name": "search", "params": {"pattern": "print", "file_pattern": "*.py"}, "expected_output": "/workspace/app.py:1:print('hi')\n"},
    {"tool_name": "shell", "params": {"command": "no-such-program-here 2> /dev/null"}, "expected_output": ""},
    {"tool_name": "shell", "params": {"command": "echo different"}, "expected_output": "same\n"}
  ],
  "metadata": {"task": "knowlyr.sh"}
}
EOF
        local before; before=$("$NSBOX" ls --json | jget 'len(d)')
        assert_status 1 "$NSBOX" replay "$TEST_TMP/traj.json"
        assert_eq 7 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of the report: $OUT"
        assert_contains "$OUT" "step 1 file_write: match" "report"
        assert_contains "$OUT" "step 2 file_read: match" "report"
        assert_contains "$OUT" "step 3 shell: match" "report"
        assert_contains "$OUT" "step 4 search: match" "report"
        assert_contains "$OUT" "step 5 shell: MISMATCH: failed: exit_code 127" "report"
        assert_contains "$OUT" 'step 6 shell: MISMATCH: output "different\n", expected "same\n"' "report"
        assert_eq "replay: 6 steps, 4 matched, 2 diverged (1 failed); first divergent step: 5 (shell)" "$(printf '%s\n' "$OUT" | tail -n 1)" "summary"
        assert_status 1 "$NSBOX" replay --json "$TEST_TMP/traj.json"
        assert_eq "knowlyr 6 4 2 5 5 [True, True, True, True, False, True] [5, 6]" \
                "$(echo "$OUT" | jget '" ".join(str(x) for x in (d["format"], d["steps"], d["matched"], d["mismatched"], d["succeeded"], d["first_divergent_step"], [r["success"] for r in d["results"]], [r["step"] for r in d["results"] if not r["match"]]))')" "replay --json"
        assert_eq "$before" "$("$NSBOX" ls --json | jget 'len(d)')" "sandboxes after the replays"
        # without the failing steps it matches whole
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["steps"] = d["steps"][:4]; json.dump(d, open(sys.argv[2], "w"))' \
                "$TEST_TMP/traj.json" "$TEST_TMP/good.json"
        assert_status 0 "$NSBOX" replay "$TEST_TMP/good.json"
        assert_eq "replay: 4 steps, all matched: no divergence" "$(printf '%s\n' "$OUT" | tail -n 1)" "a matching replay"
        # strict: one-line errors, exit 125, nothing made
        local bad
        for bad in '{"steps": []}' '{"steps": [{"tool_name": "nope", "params": {}}]}' '{"steps": [{"tool_name": "shell", "params": {}, "x": 1}]}' \
                '{"steps": [{"tool_name": "shell", "params": {"command": "true"}}]} trailing'; do
                printf '%s\n' "$bad" > "$TEST_TMP/bad.json"
                assert_status 125 "$NSBOX" replay "$TEST_TMP/bad.json"
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "trajectory '$TEST_TMP/bad.json'" "error for $bad"
        done
        assert_eq "$before" "$("$NSBOX" ls --json | jget 'len(d)')" "sandboxes after refused replays"
}

# ---- --repo of an http URL -------------------------------------------------------------------

# A repository served over git's "dumb" HTTP by python's http.server on the host's 127.0.0.1,
# which a sandbox reaches as 10.0.2.2 with --net nat and network.host_loopback; its port in VAR.
# The host's git only builds it: the clone runs in the sandbox.
serve_repo() { # VAR DIR
        local _dir=$2 _port
        git init -q "$_dir/src" || fail "git init"
        g() { git -C "$_dir/src" -c user.name=t -c user.email=t@t "$@"; }
        echo v1 > "$_dir/src/f.txt"; g add f.txt; g commit -qm c1
        echo v2 > "$_dir/src/f.txt"; g commit -qam c2
        git clone -q --bare "$_dir/src" "$_dir/srv/r.git" && git -C "$_dir/srv/r.git" update-server-info || fail "bare repository"
        (cd "$_dir/srv" && exec python3 -u -c 'import http.server, sys
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        with open(sys.argv[1], "a") as f:
            f.write(self.requestline + "\n")
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()' "$_dir/requests" > "$_dir/port" 2> /dev/null) &
        MY_PIDS="$MY_PIDS $!"
        trap cleanup_test EXIT
        for _ in $(seq 300); do [ -s "$_dir/port" ] && break; sleep 0.1; done
        _port=$(cat "$_dir/port")
        [ -n "$_port" ] || fail "the http server did not start"
        printf -v "$1" %s "$_port"
}

test_repo_http_url_is_cloned_inside_through_the_sandbox_network() {
        command -v git > /dev/null || skip "no git on the host"
        local port c1 id id2 url
        serve_repo port "$TEST_TMP"
        c1=$(git -C "$TEST_TMP/src" rev-parse HEAD~1)
        url="http://10.0.2.2:$port/r.git"
        python3 - "$NSBOX_SRC/policy/default.json" "$TEST_TMP/p.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["network"].update({"mode": "nat", "host_loopback": True})
json.dump(p, open(sys.argv[2], "w"))
PY
        new_sandbox id --policy "$TEST_TMP/p.json" --allow "10.0.2.2:$port" --repo "$url" --commit "$c1"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'pwd; git rev-parse HEAD; cat f.txt; git status --porcelain; stat -c %U .git'
        assert_eq "/workspace $c1 v1 $("$NSBOX" exec "$id" -- id -un)" "$(printf '%s\n' "$OUT" | tr '\n' ' ' | sed 's/ $//')" "the checkout in the sandbox"
        assert_contains "$(cat "$TEST_TMP/requests")" "GET /r.git/info/refs" "what the server was asked"
        assert_status 0 "$NSBOX" inspect "$id"
        assert_eq "$url $c1" "$(echo "$OUT" | jget '"%s %s" % (d[0]["repo"], d[0]["commit"])')" "nsbox inspect"
        # a reset clones again: the work tree is the commit's once more
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo changed > f.txt; rm -rf .git'
        assert_status 0 "$NSBOX" reset "$id"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'git rev-parse HEAD; cat f.txt'
        assert_eq "$c1 v1" "$(printf '%s\n' "$OUT" | tr '\n' ' ' | sed 's/ $//')" "after a reset"
        # knowlyr's whole flow: its trajectory replayed on --repo URL --commit SHA
        printf '%s\n' '{"steps": [{"tool_name": "git", "params": {"subcommand": "log --format=%s"}, "expected_output": "c1\n"},' \
                '{"tool_name": "file_read", "params": {"path": "f.txt", "start_line": 1}, "expected_output": "v1\n"}]}' > "$TEST_TMP/t.json"
        assert_status 0 "$NSBOX" replay --policy "$TEST_TMP/p.json" --repo "$url" --commit "$c1" "$TEST_TMP/t.json"
        assert_eq "replay: 2 steps, all matched: no divergence" "$(printf '%s\n' "$OUT" | tail -n 1)" "a replay on the repository"
        # no commit: the remote's HEAD
        new_sandbox id2 --policy "$TEST_TMP/p.json" --repo "$url"
        assert_status 0 "$NSBOX" exec "$id2" -- cat f.txt
        assert_eq v2 "$OUT" "the default branch"
        # failures: one line, exit 125, no sandbox left
        local before; before=$("$NSBOX" ls --json | jget 'len(d)')
        assert_status 125 "$NSBOX" create --policy "$TEST_TMP/p.json" --repo "$url" --commit 0123456789abcdef0123456789abcdef01234567
        assert_contains "$OUT" "commit '0123456789abcdef0123456789abcdef01234567': not found in '$url'" "a commit the repository lacks"
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" create --policy "$TEST_TMP/p.json" --allow "10.0.2.2:1" --repo "$url"
        assert_contains "$OUT" "clone '$url' inside the sandbox: fatal: unable to access" "a server the allow-list refuses"
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" create --net nat --repo "$url"
        assert_contains "$OUT" "inside the sandbox: fatal: unable to access" "nat without host_loopback: the host's loopback is not reachable"
        # a commit that git inside would read as an option: refused before the sandbox starts
        assert_status 125 "$NSBOX" create --policy "$TEST_TMP/p.json" --repo "$url" --commit=--output=/tmp/x
        assert_contains "$OUT" "commit '--output=/tmp/x': expected a commit id, a branch or a tag" "a commit starting with '-'"
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" create --repo "$url"
        assert_contains "$OUT" "needs network access; the sandbox's network is 'none'" "--net none"
        assert_one_line_error "$OUT"
        assert_eq "$before" "$("$NSBOX" ls --json | jget 'len(d)')" "sandboxes after the failed creates"
}

# A sandbox kept across an nsboxd restart (on_stop "keep") still knows its repository: a reset
# after the restart clones it again.
test_repo_url_survives_an_nsboxd_restart() {
        local port c1 id d="$SESSION_DIR/keep" i
        mkdir -p "$TEST_TMP/k" # TEST_TMP is the file's: the other test served its repository there
        serve_repo port "$TEST_TMP/k"
        c1=$(git -C "$TEST_TMP/k/src" rev-parse HEAD~1)
        mkdir -p "$d" && chmod 0711 "$d"
        printf '{"on_stop": "keep", "keep_timeout": 60}\n' > "$d/config.json"
        printf '{"network": {"mode": "nat", "host_loopback": true}}\n' > "$TEST_TMP/p.json"
        export NSBOX_SOCKET="$d/d.sock"
        keep_daemon() {
                "$(dirname "$NSBOX")/nsboxd" --config "$d/config.json" --socket "$d/d.sock" >> "$d/log" 2>&1 &
                DPID=$!
                for i in $(seq 100); do [ "$(daemon_pid)" = "$DPID" ] && return 0; sleep 0.1; done
                fail "nsboxd did not start: $(tail -n 3 "$d/log")"
        }
        keep_daemon
        MY_PIDS="$MY_PIDS $DPID"
        new_sandbox id --policy "$TEST_TMP/p.json" --repo "http://10.0.2.2:$port/r.git" --commit "$c1"
        kill -TERM "$DPID"; wait "$DPID" 2> /dev/null
        keep_daemon
        MY_PIDS="$MY_PIDS $DPID"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo changed > f.txt'
        assert_status 0 "$NSBOX" reset "$id"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'git rev-parse HEAD; cat f.txt'
        assert_eq "$c1 v1" "$(printf '%s\n' "$OUT" | tr '\n' ' ' | sed 's/ $//')" "a reset after the restart"
        assert_status 0 "$NSBOX" rm -f "$id"
}

# Last (tests run in name order): every test removed what it made.
test_zz_nothing_is_left() {
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
