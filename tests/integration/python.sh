#!/usr/bin/env bash
# The Python client (clients/python) and the coding-agent tutorial (examples/coding_agent.py)
# against a real nsboxd, as their users see them (issue 8): the E2B-shaped Sandbox (files, a
# 50 MB binary file, commands with streamed output, background commands, lifecycle, run_code),
# errors as exceptions with the stable codes, the deepagents backend's result shapes, the client
# starting nsboxd itself, pip install, and the tutorial driven by a scripted OpenAI-compatible
# server on 127.0.0.1.  Every test starts its own nsboxd on its own socket and stops it.  The
# checks themselves are in tests/python/client_tests.py (one NAME each).
# Runs as root and as an unprivileged user (tests/run does both), with /usr/bin/python3.
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
PY=/usr/bin/python3
CLIENT="$NSBOX_SRC/clients/python"
CHECKS="$NSBOX_SRC/tests/python/client_tests.py"
export PYTHONPATH="$CLIENT" PYTHONDONTWRITEBYTECODE=1
SESSION_DIR=$(mktemp -d /tmp/nsbox-py.XXXXXX) || exit 1
export NSBOX_STORE="$SESSION_DIR/store"

MY_DAEMONS=""
MY_PIDS=""

# start_daemon: an nsboxd of this test on a socket of its own; sets DIR, DPID and NSBOX_SOCKET.
start_daemon() {
        local i
        DIR=$(mktemp -d "$SESSION_DIR/t.XXXXXX")
        "$NSBOXD" --socket "$DIR/d.sock" >> "$DIR/log" 2>&1 < /dev/null &
        DPID=$!
        MY_DAEMONS="$MY_DAEMONS $DPID"
        export NSBOX_SOCKET="$DIR/d.sock"
        for i in $(seq 300); do
                [ "$(daemon_pid)" = "$DPID" ] && return 0
                pid_alive "$DPID" || fail "nsboxd exited at start: $(tail -n 5 "$DIR/log")"
                sleep 0.1
        done
        fail "nsboxd did not answer ping within 30 s: $(tail -n 5 "$DIR/log")"
}

# run_check NAME: client_tests.py NAME against this test's nsboxd, which must still answer after,
# hold no sandbox, and have no process under it.
run_check() {
        trap cleanup EXIT
        start_daemon
        OUT=$(timeout 600 "$PY" "$CHECKS" "$1" 2>&1) || fail "client_tests.py $1: $(printf '%s' "$OUT" | tail -n 15)"
        assert_contains "$OUT" "ok" "client_tests.py $1"
        [ "$(daemon_pid)" = "$DPID" ] || fail "nsboxd no longer answers after client_tests.py $1"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | "$PY" -c 'import json, sys; print(json.dumps([s["id"] for s in json.load(sys.stdin)]))')" \
                "sandboxes left after client_tests.py $1"
        assert_eq "" "$(daemon_children "$DPID")" "processes under nsboxd after client_tests.py $1"
}

test_files_write_read_list_stat_rename_remove() { run_check files; }
test_fifty_megabyte_binary_file_round_trip_keeps_its_sha256() { run_check big_file; }
test_commands_stream_output_to_callbacks_and_raise_on_exit_status() { run_check commands; }
test_background_commands_take_stdin_and_can_be_waited_for_or_killed() { run_check background; }
test_background_output_reaches_callbacks_live_and_connect_reattaches() { run_check live_output; }
test_sandbox_lifecycle_create_list_pause_connect_timeout_kill() { run_check lifecycle; }
test_bad_input_raises_stable_codes_and_changes_nothing() { run_check errors; }
test_run_code_runs_python_javascript_c_cpp() { run_check run_code; }
test_run_code_e2b_style_keeps_state_in_code_contexts() { run_check code_interpreter; }
test_files_watch_dir_sees_each_change_in_order() { run_check watch; }
test_pty_create_takes_keys_resizes_and_ctrl_c() { run_check pty; }
test_deepagents_backend_returns_deepagents_shapes() { run_check deepagents_shapes; }
test_deepagents_backend_errors_use_deepagents_names() { run_check deepagents_errors; }
test_deepagents_backend_delete_glob_contract_grep_cwd_read_versions() { run_check deepagents_protocol; }
test_e2b_shaped_sandbox_takes_template_first_and_raises_e2b_text() { run_check e2b; }
test_e2b_paused_sandbox_outlives_its_timeout_and_get_or_create_races() { run_check e2b_lifecycle; }
test_llm_sandbox_session_runs_languages_keeps_files_copies_and_installs() { run_check llm_sandbox; }
test_limits_that_cannot_hold_are_refused_or_warned_about() { run_check limits_warning; }
test_knowlyr_names_snapshot_reset_and_replay_with_success_semantics() { run_check knowlyr; }

# With no daemon on its socket, the client starts one (next to the nsbox on PATH), as nsbox does.
test_client_starts_nsboxd_when_none_runs() {
        trap 'cleanup; [ -z "$AUTO" ] || kill -TERM "$AUTO" 2> /dev/null' EXIT
        local d
        AUTO=""
        d=$(mktemp -d "$SESSION_DIR/a.XXXXXX")
        export NSBOX_SOCKET="$d/auto.sock"
        OUT=$(PATH="$(dirname "$NSBOX"):/usr/local/bin:/usr/bin:/bin" "$PY" -c '
from nsbox import Sandbox
with Sandbox.create() as s:
    print(s.commands.run("echo started").stdout.strip())' 2>&1) || fail "first use without a daemon: $OUT"
        assert_eq "started" "$OUT" "output through an autostarted nsboxd"
        AUTO=$(daemon_pid)
        [ -n "$AUTO" ] || fail "no nsboxd answers on $NSBOX_SOCKET after autostart"
        assert_eq "$(readlink -f "$NSBOXD")" "$(readlink -f "/proc/$AUTO/exe")" "the nsboxd started"
        [ -s "$NSBOX_SOCKET.log" ] || [ -e "$NSBOX_SOCKET.log" ] || fail "no log at $NSBOX_SOCKET.log"
        kill -TERM "$AUTO"
        wait_pids_gone 30 "$AUTO" > /dev/null || fail "autostarted nsboxd did not stop"
        AUTO=""
        # no nsboxd to be found: one clear line, not a traceback
        OUT=$(PATH=/nonexistent "$PY" -c '
import sys
from nsbox import Sandbox, SandboxException
try:
    Sandbox.create()
except SandboxException as e:
    sys.exit("%s: %s" % (e.code, e))' 2>&1)
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of the error without nsboxd"
        assert_contains "$OUT" "unavailable: connect to nsboxd at '$NSBOX_SOCKET'"
}

# pip install of the package (no network: the system's setuptools), used from outside the tree.
test_pip_install_gives_an_importable_package() {
        trap cleanup EXIT
        start_daemon
        cp -r "$CLIENT" "$TEST_TMP/src"
        "$PY" -m venv --system-site-packages "$TEST_TMP/venv" > "$TEST_TMP/venv.log" 2>&1 || fail "venv: $(tail -n 3 "$TEST_TMP/venv.log")"
        OUT=$("$TEST_TMP/venv/bin/pip" install --no-index --no-build-isolation "$TEST_TMP/src" 2>&1) ||
                fail "pip install: $(printf '%s' "$OUT" | tail -n 5)"
        OUT=$(cd / && env -u PYTHONPATH "$TEST_TMP/venv/bin/python" -c '
import nsbox, nsbox.deepagents, nsbox.e2b, nsbox.llm_sandbox
from nsbox import Sandbox
print(nsbox.__file__.startswith("'"$TEST_TMP/venv"'"))
with Sandbox.create() as s:
    print(s.commands.run("echo installed").stdout.strip())' 2>&1) || fail "installed package: $OUT"
        assert_eq "True
installed" "$OUT" "the installed package"
}

# The tutorial: a scripted model asks for write_file of a program, then run_commands to run it,
# then answers; the program ran in the sandbox and its output reached the model.
test_coding_agent_tutorial_runs_end_to_end_against_a_scripted_model() {
        trap cleanup EXIT
        local srv nonce port i want_uid reqs
        start_daemon
        srv="$TEST_TMP/srv"
        mkdir "$srv"
        nonce=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
        "$PY" "$NSBOX_SRC/tests/python/fake_openai.py" "$srv" "$nonce" > "$srv/log" 2>&1 &
        MY_PIDS="$MY_PIDS $!"
        for i in $(seq 100); do [ -s "$srv/port" ] && break; sleep 0.1; done
        port=$(cat "$srv/port" 2> /dev/null) || fail "the scripted server did not start: $(cat "$srv/log")"
        OUT=$(cd "$TEST_TMP" && OPENAI_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_API_KEY=test-key OPENAI_MODEL=scripted-1 \
                "$PY" "$NSBOX_SRC/examples/coding_agent.py" "Write hello.py and run it" 2> "$TEST_TMP/agent.err") ||
                fail "coding_agent.py: $(tail -n 5 "$TEST_TMP/agent.err")"
        # the program ran in the sandbox: its user (uid 1000, not ours), hostname and workdir
        want_uid=1000
        assert_contains "$OUT" "The program printed:" "the final answer"
        assert_contains "$OUT" "nonce $nonce" "the final answer"
        assert_contains "$OUT" "uid $want_uid host nsbox cwd /workspace" "the final answer"
        [ ! -e /workspace/hello.py ] && [ ! -e "$TEST_TMP/hello.py" ] || fail "hello.py was written on the host"
        # what the model was sent: the tutorial's four tools with nsbox's openai schemas, the
        # key, the model, and the tool results
        reqs="$srv/requests.jsonl"
        assert_eq 3 "$(grep -c . "$reqs")" "requests the model got"
        OUT=$("$PY" - "$reqs" "$nonce" "$NSBOX" <<'PY'
import json, subprocess, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
nonce, nsbox = sys.argv[2], sys.argv[3]
want = [t for t in json.loads(subprocess.check_output([nsbox, "tools", "--format", "openai"]))
        if t["function"]["name"] in ("read_file", "write_file", "write_files", "run_commands")]
for r in reqs:
    assert r["path"] == "/v1/chat/completions", r["path"]
    assert r["auth"] == "Bearer test-key", r["auth"]
    assert r["body"]["model"] == "scripted-1", r["body"]["model"]
    assert r["body"]["tools"] == want, "tools sent: %s" % [t["function"]["name"] for t in r["body"]["tools"]]
tools = [m for m in reqs[2]["body"]["messages"] if m["role"] == "tool"]
w, x = json.loads(tools[0]["content"]), json.loads(tools[1]["content"])
assert w["path"] == "/workspace/hello.py" and w["created"] is True, w
assert x["exit_code"] == 0 and x["stdout"].startswith("nonce " + nonce + "\n"), x
assert [t["tool_call_id"] for t in tools] == ["call_1", "call_2"], tools
print("ok")
PY
) || fail "requests to the model: $OUT"
        assert_eq ok "$OUT" "requests to the model"
        # the sandbox is gone at the end, and stderr showed the tool calls
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "sandboxes left by coding_agent.py"
        assert_contains "$(cat "$TEST_TMP/agent.err")" "[tool] run_commands"
}

test_coding_agent_reports_an_unreachable_endpoint_in_one_line() {
        trap cleanup EXIT
        start_daemon
        OUT=$(OPENAI_BASE_URL="http://127.0.0.1:9/v1" OPENAI_API_KEY=k "$PY" "$NSBOX_SRC/examples/coding_agent.py" "x" 2>&1)
        [ $? = 1 ] || fail "exit status of coding_agent.py with no endpoint: $OUT"
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of the error"
        assert_contains "$OUT" "coding_agent: cannot reach http://127.0.0.1:9/v1"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "sandboxes left after the failure"
}

# The last test: every test stopped the daemons it started.
test_zz_no_daemon_left_running() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
status=$?
rm -rf "$SESSION_DIR"
exit $status
