#!/usr/bin/env bash
# Persistent sandboxes, as a user sees them: nsbox create, exec, call, cp, ls, rm, tools, and
# nsboxd behind them (issue "persistent sandboxes served by nsboxd").
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"
# In a sanitizer build, freed memory sits in ASan's quarantine (256 MiB by default) and counts as
# resident: keep it small so the memory bound below measures nsbox, not the sanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

# A daemon of our own, on a socket of our own (short: a unix socket path is < 108 bytes),
# started by the first client command; stopped, with its sandboxes, when this file ends.
SESSION_DIR=$(mktemp -d /tmp/nsbox-sess.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
# What the host had before any sandbox: the last test compares.
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"

# ---- helpers -------------------------------------------------------------------------------

# Send each argument as one line on one connection to nsboxd and print each reply on one line
# ("NO REPLY" when none comes).  Special arguments: !LINE sends LINE without waiting for a reply;
# @big sends a request line of 33 MiB; @garbage sends 256 KiB of random bytes with newlines and
# prints every reply to them; @hangup waits half a second and closes the connection.
rpc() {
        python3 - "$NSBOX_SOCKET" "$@" <<'PY'
import os, random, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
buf = b""
def reply(idle):
    """The next line that answers a request (has an id), or None after idle seconds of silence."""
    global buf
    while True:
        while b"\n" not in buf:
            s.settimeout(idle)
            try:
                chunk = s.recv(1 << 20)
            except socket.timeout:
                return None
            if not chunk:
                return None
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        if b'"id"' in line:
            return line.decode(errors="replace")
for a in sys.argv[2:]:
    if a == "@hangup":
        time.sleep(0.5)
        s.close()
        sys.exit(0)
    if a == "@garbage":
        rnd = random.Random(1234)
        data = bytearray(rnd.getrandbits(8) for _ in range(256 << 10))
        for i in range(0, len(data), 997):
            data[i] = 10
        s.sendall(bytes(data) + b"\n")
        while (line := reply(2)) is not None:
            print(line)
        continue
    if a == "@big":
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"a" * (33 << 20) + b'"}}\n')
    elif a.startswith("!"):
        s.sendall(a[1:].encode() + b"\n")
        continue
    else:
        s.sendall(a.encode() + b"\n")
    line = reply(60)
    print(line if line is not None else "NO REPLY")
PY
}

# Evaluate a Python expression over the JSON document d read from standard input: a string is
# printed as it is, anything else as JSON (true, null, [1, 2]).
jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

daemon_pid() { rpc '{"jsonrpc":"2.0","id":1,"method":"ping"}' 2>/dev/null | jget 'd["result"]["pid"]' 2>/dev/null; }

# Create a sandbox into variable VAR; it is removed when the test ends, whatever happens.
MY_SANDBOXES=""
new_sandbox() { # VAR [nsbox create options]
        local _var=$1 _sid; shift
        _sid=$("$NSBOX" create "$@" 2>&1) || fail "nsbox create $*: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid', not a 32-hex-digit id"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        printf -v "$_var" %s "$_sid"
}

# The processes in sandbox ID, one command line each (ps's own line left out).
sandbox_ps() { "$NSBOX" exec "$1" -- ps -eo args= | grep -v '^ps -eo'; }

trap 'stop_file_daemon "$SESSION_DIR"' EXIT

# ---- tests ---------------------------------------------------------------------------------

test_create_exec_100_times_then_rm() {
        local id i out
        new_sandbox id
        assert_status 0 "$NSBOX" ls
        assert_contains "$OUT" "$id" "nsbox ls"
        assert_eq running "$(printf '%s\n' "$OUT" | awk -v id="$id" '$1 == id {print $2}')" "STATE in nsbox ls"
        assert_status 0 "$NSBOX" ls --json
        assert_eq running "$(printf '%s' "$OUT" | jget "[s['state'] for s in d if s['id'] == '$id'][0]")" "state in nsbox ls --json"
        for i in $(seq 100); do
                if [ $((i % 2)) = 0 ]; then
                        out=$("$NSBOX" exec "$id" -- true 2>&1) || fail "exec $i (true) failed: $out"
                        assert_eq "" "$out" "output of exec $i (true)"
                else
                        out=$("$NSBOX" exec "$id" -- echo "$i" 2>&1) || fail "exec $i (echo) failed: $out"
                        assert_eq "$i" "$out" "output of exec $i (echo $i)"
                fi
        done
        assert_status 0 "$NSBOX" rm "$id"
        assert_eq "" "$OUT" "output of nsbox rm"
        assert_status 0 "$NSBOX" ls
        assert_not_contains "$OUT" "$id" "nsbox ls after rm"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | jget "[s['id'] for s in d if s['id'] == '$id']")" "nsbox ls --json after rm"
        assert_status 125 "$NSBOX" exec "$id" -- true
        assert_contains "$OUT" "not_found" "exec in a removed sandbox"
        assert_one_line_error "$OUT"
}

test_exec_status_signals_timeout() {
        local id t0 t1
        new_sandbox id
        assert_status 7 "$NSBOX" exec "$id" -- sh -c 'exit 7'
        assert_status 143 "$NSBOX" exec "$id" -- sh -c 'kill -TERM $$'
        assert_status 137 "$NSBOX" exec "$id" -- sh -c 'kill -KILL $$'
        t0=$(date +%s%N)
        assert_status 124 "$NSBOX" exec --timeout 0.5 "$id" -- sleep 30
        t1=$(date +%s%N)
        [ $(((t1 - t0) / 1000000)) -lt 3000 ] || fail "--timeout 0.5 took $(((t1 - t0) / 1000000)) ms"
        "$NSBOX" exec "$id" -- nosuchcmd > "$TEST_TMP/out" 2> "$TEST_TMP/err"
        assert_eq 127 $? "status of a missing command"
        assert_eq "" "$(cat "$TEST_TMP/out")" "stdout of a missing command"
        assert_contains "$(cat "$TEST_TMP/err")" "command not found" "stderr of a missing command"
        "$NSBOX" exec "$id" -- sh -c 'echo to-out; echo to-err >&2; echo more-out' > "$TEST_TMP/out" 2> "$TEST_TMP/err"
        assert_eq 0 $? "status"
        assert_eq "to-out
more-out" "$(cat "$TEST_TMP/out")" "stdout"
        assert_eq "to-err" "$(cat "$TEST_TMP/err")" "stderr"
        assert_status 0 "$NSBOX" exec -e GREETING=hello -e SECOND=two --cwd /tmp "$id" -- sh -c 'echo "$GREETING $SECOND"; pwd'
        assert_eq "hello two
/tmp" "$OUT" "-e and --cwd"
        assert_status 0 "$NSBOX" exec "$id" -- pwd
        assert_eq /workspace "$OUT" "default working directory"
}

test_files_write_read_edit_grep_glob_list() {
        local id
        new_sandbox id
        call() { assert_status 0 "$NSBOX" call "$id" "$@"; }
        # write_file creates parents; read_file pages
        call write_file '{"path": "deep/er/notes.txt", "content": "l1\nl2\nl3\nl4\nl5\n"}'
        assert_eq "15 true /workspace/deep/er/notes.txt" "$(echo "$OUT" | jget '"%s %s %s" % (d["bytes_written"], json.dumps(d["created"]), d["path"])')" "write_file result"
        call read_file '{"path": "deep/er/notes.txt", "offset": 1, "limit": 2}'
        assert_eq '"l2\nl3\n" 5 3' "$(echo "$OUT" | jget '"%s %s %s" % (json.dumps(d["content"]), d["total_lines"], d["next_offset"])')" "read_file page 1"
        call read_file '{"path": "/workspace/deep/er/notes.txt", "offset": 3, "limit": 2}'
        assert_eq '"l4\nl5\n" 5 null' "$(echo "$OUT" | jget '"%s %s %s" % (json.dumps(d["content"]), d["total_lines"], json.dumps(d["next_offset"]))')" "read_file page 2"
        # binary bytes, every value 0-255, through base64 both ways
        local b64
        b64=$(python3 -c 'import base64; print(base64.b64encode(bytes(range(256)) * 3).decode())')
        call write_file "{\"path\": \"bin/all.bytes\", \"content_b64\": \"$b64\"}"
        assert_eq 768 "$(echo "$OUT" | jget 'd["bytes_written"]')" "bytes written"
        call read_file '{"path": "bin/all.bytes", "encoding": "base64"}'
        assert_eq "$b64" "$(echo "$OUT" | jget 'd["content"]')" "base64 read back"
        assert_status 0 "$NSBOX" exec "$id" -- sha256sum bin/all.bytes
        assert_eq "$(python3 -c 'import hashlib; print(hashlib.sha256(bytes(range(256)) * 3).hexdigest())')" "${OUT%% *}" "sha256 inside"
        call write_files '{"files": [{"path": "src/app.py", "content": "import os\nprint(1)\n"},
                {"path": "src/lib/util.py", "data": "def f():\n    return 2\n"},
                {"path": "src/README.txt", "content": "import nothing here\nprint(1)\nprint(1)\n"}]}'
        assert_eq "3 0" "$(echo "$OUT" | jget '"%s %s" % (d["written"], d["failed"])')" "write_files counts"
        # edit_file: unique, ambiguous, replace_all
        call edit_file '{"path": "src/app.py", "old_string": "print(1)", "new_string": "print(42)"}'
        assert_eq 1 "$(echo "$OUT" | jget 'd["occurrences"]')" "occurrences"
        assert_status 0 "$NSBOX" exec "$id" -- cat src/app.py
        assert_eq "import os
print(42)" "$OUT" "edited file"
        assert_status 1 "$NSBOX" call "$id" edit_file '{"path": "src/README.txt", "old_string": "print(1)", "new_string": "x"}'
        assert_contains "$OUT" "conflict" "ambiguous edit"
        call edit_file '{"path": "src/README.txt", "old_string": "print(1)", "new_string": "p", "replace_all": true}'
        assert_eq 2 "$(echo "$OUT" | jget 'd["occurrences"]')" "replace_all occurrences"
        # grep: regex with line numbers, fixed strings, a glob filter
        call grep '{"pattern": "re?turn [0-9]", "path": "src"}'
        assert_eq '[["/workspace/src/lib/util.py", 2, "    return 2"]]' "$(echo "$OUT" | jget '[[m["path"], m["line"], m["text"]] for m in d["matches"]]')" "grep regex"
        call grep '{"pattern": "print(42)", "fixed": true}'
        assert_eq '[["/workspace/src/app.py", 2]]' "$(echo "$OUT" | jget '[[m["path"], m["line"]] for m in d["matches"]]')" "grep fixed"
        call grep '{"pattern": "import", "path": "src", "glob": "*.py"}'
        assert_eq '["/workspace/src/app.py"]' "$(echo "$OUT" | jget '[m["path"] for m in d["matches"]]')" "grep with glob"
        call glob '{"pattern": "**/*.py"}'
        assert_eq '["/workspace/src/app.py", "/workspace/src/lib/util.py"]' "$(echo "$OUT" | jget 'd["matches"]')" "glob **/*.py"
        # list_dir depth 1 and 2
        call list_dir '{"path": "src"}'
        assert_eq '[["/workspace/src/README.txt", "file"], ["/workspace/src/app.py", "file"], ["/workspace/src/lib", "directory"]]' \
                "$(echo "$OUT" | jget 'sorted([e["path"], e["type"]] for e in d["entries"])')" "list_dir depth 1"
        call list_dir '{"path": "src", "depth": 2}'
        assert_eq '["README.txt", "app.py", "lib", "util.py"]' "$(echo "$OUT" | jget 'sorted(e["name"] for e in d["entries"])')" "list_dir depth 2"
        call stat '{"path": "src/app.py"}'
        assert_eq "file 20" "$(echo "$OUT" | jget '"%s %s" % (d["type"], d["size"])')" "stat"
        call exists '{"path": "src/lib"}'
        assert_eq "true directory" "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["exists"]), d["type"])')" "exists"
        call exists '{"path": "src/nope"}'
        assert_eq "false null" "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["exists"]), json.dumps(d["type"]))')" "exists (missing)"
        # mkdir, rename, remove
        assert_status 1 "$NSBOX" call "$id" mkdir '{"path": "a/b/c"}'
        call mkdir '{"path": "a/b/c", "parents": true}'
        call rename '{"from": "src/app.py", "to": "moved/app2.py"}'
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'ls src; ls moved; test -d a/b/c && echo dir'
        assert_eq "README.txt
lib
app2.py
dir" "$OUT" "after mkdir and rename"
        assert_status 1 "$NSBOX" call "$id" remove '{"path": "src"}'
        assert_contains "$OUT" "not empty" "remove of a full directory without recursive"
        call remove '{"path": "src", "recursive": true}'
        assert_eq 4 "$(echo "$OUT" | jget 'd["removed"]')" "entries removed"
        call exists '{"path": "src"}'
        assert_eq false "$(echo "$OUT" | jget 'd["exists"]')" "src after remove"
}

test_call_prints_times_to_the_second() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo x > f; touch -d @1700000003 f'
        assert_status 0 "$NSBOX" call "$id" stat '{"path": "f"}'
        assert_eq 1700000003 "$(echo "$OUT" | jget 'int(d["mtime"])')" "mtime printed by nsbox call stat"
}

test_git_init_commit_status_diff_log() {
        local id first second
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" git_init '{"path": "repo"}'
        assert_eq true "$(echo "$OUT" | jget 'd["created"]')" "git_init created"
        assert_status 0 "$NSBOX" call "$id" write_files '{"files": [{"path": "repo/a.txt", "content": "one\ntwo\n"}, {"path": "repo/b.txt", "content": "bee\n"}]}'
        assert_status 0 "$NSBOX" call "$id" git_commit '{"path": "repo", "message": "first commit"}'
        first=$(echo "$OUT" | jget 'd["id"]')
        assert_eq 2 "$(echo "$OUT" | jget 'd["files_changed"]')" "files in the first commit"
        assert_status 0 "$NSBOX" call "$id" edit_file '{"path": "repo/a.txt", "old_string": "two", "new_string": "TWO"}'
        assert_status 0 "$NSBOX" call "$id" git_commit '{"path": "repo", "message": "second commit"}'
        second=$(echo "$OUT" | jget 'd["id"]')
        [[ $second =~ ^[0-9a-f]{40}$ ]] || fail "commit id '$second'"
        assert_status 0 "$NSBOX" call "$id" git_status '{"path": "repo"}'
        assert_eq "true []" "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["clean"]), json.dumps(d["entries"]))')" "status after commit"
        assert_status 0 "$NSBOX" call "$id" edit_file '{"path": "repo/a.txt", "old_string": "TWO", "new_string": "three"}'
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "repo/new.txt", "content": "n\n"}'
        assert_status 0 "$NSBOX" call "$id" git_status '{"path": "repo"}'
        assert_eq 'false [["a.txt", "modified"], ["new.txt", "untracked"]]' \
                "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["clean"]), json.dumps(sorted([e["path"], e["unstaged"]] for e in d["entries"])))')" "status"
        assert_status 0 "$NSBOX" call "$id" git_diff '{"path": "repo"}'
        local diff; diff=$(echo "$OUT" | jget 'd["diff"]')
        assert_contains "$diff" "
-TWO
+three" "diff"
        assert_contains "$diff" "+++ b/a.txt" "diff"
        assert_eq "1 1" "$(echo "$OUT" | jget '"%s %s" % (d["insertions"], d["deletions"])')" "diff counts"
        assert_status 0 "$NSBOX" call "$id" git_log '{"path": "repo"}'
        assert_eq "[\"$second\", \"$first\"] [\"second commit\", \"first commit\"]" \
                "$(echo "$OUT" | jget '"%s %s" % (json.dumps([c["id"] for c in d["commits"]]), json.dumps([c["summary"] for c in d["commits"]]))')" "git_log, newest first"
        if [ -x /usr/bin/git ]; then
                assert_status 0 "$NSBOX" exec --cwd /workspace/repo "$id" -- git log --oneline
                assert_eq "${second:0:7} second commit
${first:0:7} first commit" "$OUT" "git log --oneline inside"
        fi
}

test_background_process_survives_calls_and_is_waited_fed_killed() {
        local id cat_pid sleep_pid i
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["cat"], "background": true}'
        cat_pid=$(echo "$OUT" | jget 'd["pid"]')
        [[ $cat_pid =~ ^[0-9]+$ ]] || fail "background exec gave pid '$cat_pid': $OUT"
        for i in 1 2 3; do
                assert_status 0 "$NSBOX" call "$id" write_file "{\"path\": \"f$i\", \"content\": \"$i\"}"
                assert_status 0 "$NSBOX" exec "$id" -- cat "f$i"
                assert_status 0 "$NSBOX" call "$id" process_list
                assert_eq '[true, "cat"]' "$(echo "$OUT" | jget "[[p['running'], p['command']] for p in d['processes'] if p['pid'] == $cat_pid][0]")" "cat in process_list after call $i"
        done
        assert_status 0 "$NSBOX" call "$id" process_write_stdin "{\"pid\": $cat_pid, \"data\": \"hello\\n\"}"
        assert_eq 6 "$(echo "$OUT" | jget 'd["bytes"]')" "bytes written to stdin"
        assert_status 0 "$NSBOX" call "$id" process_write_stdin "{\"pid\": $cat_pid, \"data\": \"world\\n\"}"
        assert_status 0 "$NSBOX" call "$id" process_close_stdin "{\"pid\": $cat_pid}"
        assert_status 0 "$NSBOX" call "$id" process_wait "{\"pid\": $cat_pid, \"timeout\": 10}"
        assert_eq '"hello\nworld\n" 0' "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["stdout"]), d["exit_code"])')" "cat's result"
        # a long one: waiting with a timeout is an error, killing ends it with SIGKILL
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": "sleep 300", "background": true}'
        sleep_pid=$(echo "$OUT" | jget 'd["pid"]')
        assert_status 1 "$NSBOX" call "$id" process_wait "{\"pid\": $sleep_pid, \"timeout\": 0.3}"
        assert_contains "$OUT" "timeout" "process_wait on a running process"
        assert_status 0 "$NSBOX" call "$id" process_kill "{\"pid\": $sleep_pid}"
        assert_eq true "$(echo "$OUT" | jget 'd["signaled"]')" "signaled"
        assert_status 0 "$NSBOX" call "$id" process_wait "{\"pid\": $sleep_pid, \"timeout\": 10}"
        assert_eq "9 137" "$(echo "$OUT" | jget '"%s %s" % (d["signal"], d["exit_code"])')" "signal and exit_code of the killed sleep"
        assert_status 0 "$NSBOX" call "$id" process_list
        assert_eq "[]" "$(echo "$OUT" | jget 'd["processes"]')" "process_list once both were waited for"
        assert_eq "" "$(sandbox_ps "$id" | grep -E '^(cat|sleep)')" "processes left in the sandbox"
}

test_timed_out_command_whole_process_group_is_gone() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"shell": "sleep 300 & sleep 301 & wait", "timeout": 1}'
        assert_eq "true 124" "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["timed_out"]), d["exit_code"])')" "timed_out, exit_code"
        local left; left=$(sandbox_ps "$id")
        assert_not_contains "$left" "sleep" "processes in the sandbox after the timeout"
        assert_contains "$left" "nsbox-init" "processes in the sandbox after the timeout"
}

test_output_past_max_output_is_truncated_and_says_so() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["seq", "100000"], "max_output": 100}'
        local len; len=$(echo "$OUT" | jget 'len(d["stdout"])')
        { [ "$len" -le 100 ] && [ "$len" -gt 0 ]; } || fail "stdout of $len bytes with max_output 100"
        assert_eq "true 0" "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["truncated"]), d["exit_code"])')" "truncated, exit_code"
        assert_eq "1 2 3" "$(echo "$OUT" | jget '" ".join(d["stdout"].split()[:3])')" "start of the output"
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["seq", "10"], "max_output": 100}'
        assert_eq "false 21" "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["truncated"]), len(d["stdout"]))')" "output under the limit"
}

test_tool_paths_stay_inside_the_sandbox() {
        local id marker=host-secret-$$-$RANDOM home p
        new_sandbox id
        echo "$marker" > "$TEST_TMP/host-secret"
        chmod 0644 "$TEST_TMP/host-secret"
        home=$(getent passwd "$(id -u)" | cut -d: -f6)
        local home_file=""
        if [ -w "$home" ]; then
                home_file="$home/.nsbox-session-marker-$$"
                echo "$marker" > "$home_file"
                # shellcheck disable=SC2064 # the file's name now: home_file is local
                trap "rm -f '$home_file'"'; [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        fi
        local shadow_line=""
        [ -r /etc/shadow ] && shadow_line=$(head -n 1 /etc/shadow)
        for p in "$TEST_TMP/host-secret" "../../../../..$TEST_TMP/host-secret" ../../etc/shadow /etc/shadow /root/.bashrc \
                ${home_file:+"$home_file"} ${home_file:+"../../../..$home_file"}; do
                "$NSBOX" call "$id" read_file "{\"path\": \"$p\"}" > "$TEST_TMP/out" 2>&1
                assert_not_contains "$(cat "$TEST_TMP/out")" "$marker" "read_file '$p'"
                [ -z "$shadow_line" ] || assert_not_contains "$(cat "$TEST_TMP/out")" "$shadow_line" "read_file '$p'"
        done
        # symbolic links planted inside lead to the sandbox's own files, never the host's
        assert_status 0 "$NSBOX" exec "$id" -- ln -s "$TEST_TMP/host-secret" /workspace/link
        assert_status 0 "$NSBOX" exec "$id" -- ln -s / /workspace/rootlink
        for p in link "rootlink$TEST_TMP/host-secret" ${home_file:+"rootlink$home_file"}; do
                "$NSBOX" call "$id" read_file "{\"path\": \"$p\"}" > "$TEST_TMP/out" 2>&1
                assert_not_contains "$(cat "$TEST_TMP/out")" "$marker" "read_file '$p'"
        done
        "$NSBOX" call "$id" read_file "{\"path\": \"link\", \"encoding\": \"base64\"}" > "$TEST_TMP/out" 2>&1
        assert_not_contains "$(cat "$TEST_TMP/out")" "$(printf '%s\n' "$marker" | base64)" "read_file link as base64"
        # (before anything is written there: writes through the links create the sandbox's own)
        for p in "rootlink$TEST_TMP" "rootlink$(dirname "$TEST_TMP")" ${home_file:+"rootlink$home"}; do
                "$NSBOX" call "$id" list_dir "{\"path\": \"$p\"}" > "$TEST_TMP/out" 2>&1
                assert_not_contains "$(cat "$TEST_TMP/out")" "host-secret" "list_dir '$p'"
                assert_not_contains "$(cat "$TEST_TMP/out")" "$(basename "$TEST_TMP")\"" "list_dir '$p'"
                assert_not_contains "$(cat "$TEST_TMP/out")" "nsbox-session-marker" "list_dir '$p'"
        done
        "$NSBOX" call "$id" write_file "{\"path\": \"rootlink$TEST_TMP/planted\", \"content\": \"x\"}" > /dev/null 2>&1
        "$NSBOX" call "$id" write_file "{\"path\": \"link\", \"content\": \"overwritten\"}" > /dev/null 2>&1
        [ ! -e "$TEST_TMP/planted" ] || fail "write_file through a symlink to / created '$TEST_TMP/planted' on the host"
        assert_eq "$marker" "$(cat "$TEST_TMP/host-secret")" "host file a sandbox symlink points at"
        mkdir "$TEST_TMP/cpout"
        "$NSBOX" cp "$id:/workspace/link" "$TEST_TMP/cpout/out" > "$TEST_TMP/out" 2>&1
        if [ -e "$TEST_TMP/cpout/out" ]; then
                assert_not_contains "$(cat "$TEST_TMP/cpout/out")" "$marker" "file copied out through the symlink"
        fi
        assert_eq "" "$(find "$TEST_TMP/cpout" -mindepth 1 ! -name out -printf '%f\n')" "leftovers of nsbox cp"
}

test_cp_copies_large_binary_files_both_ways() {
        local id sum
        new_sandbox id
        head -c $((20 << 20)) /dev/urandom > "$TEST_TMP/big.bin"
        sum=$(sha256sum < "$TEST_TMP/big.bin" | cut -d' ' -f1)
        assert_status 0 "$NSBOX" cp "$TEST_TMP/big.bin" "$id:/workspace/big.bin"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'sha256sum < /workspace/big.bin; stat -c %s /workspace/big.bin; ls -a /workspace'
        assert_eq "$sum  -
$((20 << 20))
.
..
big.bin" "$OUT" "sha256, size and directory inside"
        assert_status 0 "$NSBOX" exec "$id" -- mkdir dir
        assert_status 0 "$NSBOX" cp "$TEST_TMP/big.bin" "$id:dir"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'sha256sum < dir/big.bin; ls -a dir'
        assert_eq "$sum  -
.
..
big.bin" "$OUT" "copy into a directory"
        assert_status 0 "$NSBOX" cp "$id:/workspace/big.bin" "$TEST_TMP/back.bin"
        cmp "$TEST_TMP/big.bin" "$TEST_TMP/back.bin" || fail "the file copied back differs"
        mkdir "$TEST_TMP/outdir"
        assert_status 0 "$NSBOX" cp "$id:dir/big.bin" "$TEST_TMP/outdir"
        cmp "$TEST_TMP/big.bin" "$TEST_TMP/outdir/big.bin" || fail "the file copied into a host directory differs"
        assert_eq "big.bin" "$(find "$TEST_TMP/outdir" -mindepth 1 -printf '%f\n')" "host directory after cp"
        # errors
        local errors=()
        assert_status 125 "$NSBOX" cp "$id:/workspace/missing" "$TEST_TMP/missing"
        errors+=("$OUT")
        [ ! -e "$TEST_TMP/missing" ] || fail "cp of a missing file created '$TEST_TMP/missing'"
        assert_status 125 "$NSBOX" cp "$TEST_TMP/missing" "$id:/workspace/missing"
        errors+=("$OUT")
        assert_status 0 "$NSBOX" call "$id" exists '{"path": "/workspace/missing"}'
        assert_eq false "$(echo "$OUT" | jget 'd["exists"]')" "missing file after a failed cp in"
        assert_status 125 "$NSBOX" cp "$TEST_TMP/big.bin" "$TEST_TMP/other.bin"
        errors+=("$OUT")
        [ ! -e "$TEST_TMP/other.bin" ] || fail "cp without an ID copied on the host"
        local e
        for e in "${errors[@]}"; do assert_one_line_error "$e"; done
}

test_bad_input_gets_clear_errors_and_harms_nothing() {
        local id a b
        new_sandbox a
        new_sandbox b
        new_sandbox id
        local call='{"jsonrpc":"2.0","id":7,"method":"call","params":{"sandbox":"'$id'","tool":'
        rpc '{"jsonrpc":"2.0","id":1,"method":' > "$TEST_TMP/r"
        assert_eq "-32700 invalid_argument" "$(jget '"%s %s" % (d["error"]["code"], d["error"]["data"]["code"])' < "$TEST_TMP/r")" "malformed JSON"
        rpc '{"jsonrpc":"2.0","id":2,"method":"no_such_method","params":{}}' > "$TEST_TMP/r"
        assert_eq "-32601 2" "$(jget '"%s %s" % (d["error"]["code"], d["id"])' < "$TEST_TMP/r")" "unknown method"
        rpc "$call"'"no_such_tool","params":{}}}' > "$TEST_TMP/r"
        assert_eq "not_found" "$(jget 'd["error"]["data"]["code"]' < "$TEST_TMP/r")" "unknown tool"
        rpc "$call"'"read_file","params":{"path":5}}}' > "$TEST_TMP/r"
        assert_eq "invalid_argument" "$(jget 'd["error"]["data"]["code"]' < "$TEST_TMP/r")" "read_file with path 5"
        rpc "$call"'"read_file","params":{}}}' > "$TEST_TMP/r"
        assert_eq "invalid_argument" "$(jget 'd["error"]["data"]["code"]' < "$TEST_TMP/r")" "read_file without path"
        rpc "$call"'"exec","params":{"cmd":"ls"}}}' > "$TEST_TMP/r"
        assert_eq "invalid_argument" "$(jget 'd["error"]["data"]["code"]' < "$TEST_TMP/r")" "exec with cmd a string"
        # an oversized line: refused, and the same connection still works
        rpc @big '{"jsonrpc":"2.0","id":3,"method":"ping"}' > "$TEST_TMP/r"
        assert_eq 2 "$(grep -c . "$TEST_TMP/r")" "replies to an oversized line and a ping: $(head -c 300 "$TEST_TMP/r")"
        assert_eq "too_large" "$(head -n 1 "$TEST_TMP/r" | jget 'd["error"]["data"]["code"]')" "oversized line"
        assert_eq "3 $(daemon_pid)" "$(tail -n 1 "$TEST_TMP/r" | jget '"%s %s" % (d["id"], d["result"]["pid"])')" "ping after an oversized line"
        # random bytes: errors, and the daemon lives on
        rpc @garbage '{"jsonrpc":"2.0","id":4,"method":"ping"}' > "$TEST_TMP/r"
        local n; n=$(grep -c . "$TEST_TMP/r")
        [ "$n" -ge 10 ] || fail "only $n replies to 256 KiB of random lines: $(head -c 300 "$TEST_TMP/r")"
        head -n $((n - 1)) "$TEST_TMP/r" | python3 -c 'import json, sys
for l in sys.stdin:
    d = json.loads(l)
    assert "error" in d and d["error"]["code"] in (-32700, -32600), l' || fail "a reply to random bytes was not a parse error"
        assert_eq 4 "$(tail -n 1 "$TEST_TMP/r" | jget 'd["id"]')" "ping after random bytes"
        # a client that goes away mid-call: its command is cancelled, the daemon answers the next
        rpc "!$call"'"exec","params":{"cmd":["sleep","30"]}}}' @hangup
        [ -n "$(daemon_pid)" ] || fail "nsboxd does not answer after a client left mid-call"
        local i left
        for i in $(seq 50); do
                left=$(sandbox_ps "$id" | grep '^sleep')
                [ -z "$left" ] && break
                sleep 0.1
        done
        assert_eq "" "$left" "the abandoned command, 5 s after its client left"
        # the CLI
        assert_status 125 "$NSBOX" call "$id" read_file '{"path": '
        local bad_json=$OUT
        assert_status 1 "$NSBOX" call 0123456789abcdef0123456789abcdef exists '{"path": "."}'
        assert_contains "$OUT" "not_found" "call in an unknown sandbox"
        local unknown=$OUT
        # nothing else was harmed
        assert_status 0 "$NSBOX" exec "$a" -- echo a-alive
        assert_eq a-alive "$OUT"
        assert_status 0 "$NSBOX" exec "$b" -- echo b-alive
        assert_eq b-alive "$OUT"
        assert_status 0 "$NSBOX" exec "$id" -- echo alive
        assert_eq alive "$OUT"
        assert_one_line_error "$bad_json"
        assert_one_line_error "$unknown"
}

# A client that reads nothing: the stream must stop in pipes, not pile up in nsboxd or the agent.
test_endless_output_does_not_grow_memory() {
        local id dpid apid client i rss max_d=0 max_a=0
        new_sandbox id
        dpid=$(daemon_pid)
        apid=$("$NSBOX" ls --json | jget "[s['pid'] for s in d if s['id'] == '$id'][0]")
        mkfifo "$TEST_TMP/endless.fifo"
        "$NSBOX" exec "$id" -- yes > "$TEST_TMP/endless.fifo" &
        client=$!
        exec 3< "$TEST_TMP/endless.fifo" # open, never read
        head -c 65536 <&3 > /dev/null # it does flow
        # growth from here is what the stream costs (a sanitizer build starts far higher)
        local base_d base_a
        base_d=$(awk '/^VmRSS/ {print $2}' "/proc/$dpid/status")
        base_a=$(awk '/^VmRSS/ {print $2}' "/proc/$apid/status")
        max_d=$base_d max_a=$base_a
        for i in $(seq 12); do
                sleep 0.25
                rss=$(awk '/^VmRSS/ {print $2}' "/proc/$dpid/status")
                [ "$rss" -gt "$max_d" ] && max_d=$rss
                rss=$(awk '/^VmRSS/ {print $2}' "/proc/$apid/status")
                [ "$rss" -gt "$max_a" ] && max_a=$rss
        done
        kill -0 "$client" 2>/dev/null || fail "nsbox exec ended while nobody read its output"
        pgrep -P "$apid" -x yes > /dev/null || fail "yes is not running in the sandbox"
        kill "$client"
        exec 3<&-
        wait "$client" 2>/dev/null
        [ $((max_d - base_d)) -lt 65536 ] || fail "nsboxd grew from $base_d kB to $max_d kB"
        [ $((max_a - base_a)) -lt 65536 ] || fail "the agent grew from $base_a kB to $max_a kB"
        for i in $(seq 50); do
                pgrep -P "$apid" -x yes > /dev/null || break
                sleep 0.1
        done
        assert_eq "" "$(sandbox_ps "$id" | grep '^yes')" "yes, 5 s after its client was killed"
}

# One client not reading its stream must not stop every other call to the same sandbox.
test_unread_stream_does_not_stall_other_calls() {
        local id client
        new_sandbox id
        mkfifo "$TEST_TMP/unread.fifo"
        "$NSBOX" exec "$id" -- yes > "$TEST_TMP/unread.fifo" &
        client=$!
        exec 3< "$TEST_TMP/unread.fifo"
        head -c 65536 <&3 > /dev/null
        sleep 1.5 # long enough for every queue between yes and us to fill
        timeout 5 "$NSBOX" exec "$id" -- echo still-served > "$TEST_TMP/out" 2>&1
        local st=$?
        timeout 5 "$NSBOX" call "$id" exists '{"path": "."}' > "$TEST_TMP/out2" 2>&1
        local st2=$?
        kill "$client"
        exec 3<&-
        wait "$client" 2>/dev/null
        assert_eq "0 still-served" "$st $(cat "$TEST_TMP/out")" "exec while another client's stream is unread (124: hung)"
        assert_eq 0 "$st2" "call exists while another client's stream is unread (124: hung)"
}

test_kill_9_nsboxd_leaves_nothing_behind() {
        local a b dpid pids mounts_before left
        mounts_before=$(grep -c . /proc/self/mountinfo)
        new_sandbox a
        new_sandbox b
        dpid=$(daemon_pid)
        [ -n "$dpid" ] || fail "no nsboxd answers ping"
        pids=$("$NSBOX" ls --json | jget "' '.join(str(s['pid']) for s in d if s['id'] in ('$a', '$b'))")
        [[ $pids =~ ^[0-9]+\ [0-9]+$ ]] || fail "agent pids '$pids'"
        # shellcheck disable=SC2086
        for p in $pids; do pid_alive "$p" || fail "agent $p is not running"; done
        kill -KILL "$dpid"
        # shellcheck disable=SC2086
        left=$(wait_pids_gone 5 "$dpid" $pids) || { left=${left# }; fail "still running 5 s after kill -9 of nsboxd: $(ps -o pid=,args= -p "${left// /,}")"; }
        assert_status 0 "$NSBOX" ls
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of nsbox ls from a fresh daemon: $OUT"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | jget 'd')" "nsbox ls --json from a fresh daemon"
        local fresh; fresh=$(daemon_pid)
        { [ -n "$fresh" ] && [ "$fresh" != "$dpid" ]; } || fail "no fresh nsboxd (pid '$fresh', the killed one was $dpid)"
        assert_eq "$mounts_before" "$(grep -c . /proc/self/mountinfo)" "host mount count"
        assert_status 125 "$NSBOX" exec "$a" -- true
}

test_tools_formats() {
        local id
        assert_status 0 "$NSBOX" tools --format openai
        printf '%s' "$OUT" | python3 -c 'import json, sys
tools = json.load(sys.stdin)
assert isinstance(tools, list), "not an array"
by = {t["function"]["name"]: t["function"] for t in tools if t.get("type") == "function"}
want = {"read_file": {"path"}, "write_file": {"path", "data"}, "write_files": {"files"}, "run_commands": {"command"}}
for name, params in want.items():
    assert name in by, "no tool " + name
    props = set(by[name]["parameters"]["properties"])
    assert params <= props, "%s has %s, wants %s" % (name, sorted(props), sorted(params))
' || fail "nsbox tools --format openai"
        assert_status 0 "$NSBOX" tools --format mcp
        printf '%s' "$OUT" | python3 -c 'import json, sys
tools = json.load(sys.stdin)
assert isinstance(tools, list) and len(tools) >= 20, "not a list of tools"
for t in tools:
    assert t["inputSchema"]["type"] == "object", t["name"]
    assert t["name"] and t["description"], t
assert "read_file" in [t["name"] for t in tools]
' || fail "nsbox tools --format mcp"
        assert_status 0 "$NSBOX" tools
        assert_eq "read_file" "$(printf '%s' "$OUT" | jget '[t["name"] for t in d if t["name"] == "read_file"][0]')" "nsbox tools (json)"
        assert_status 125 "$NSBOX" tools --format bogus
        local bogus_out=$OUT
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" run_commands '{"command": "echo hi"}'
        assert_eq '"hi\n" 0' "$(echo "$OUT" | jget '"%s %s" % (json.dumps(d["stdout"]), d["exit_code"])')" "run_commands"
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "w.txt", "data": "via data\n"}'
        assert_status 0 "$NSBOX" call "$id" ls '{}'
        assert_eq '["w.txt"]' "$(echo "$OUT" | jget '[e["name"] for e in d["entries"]]')" "ls (list_dir alias)"
        assert_status 0 "$NSBOX" exec "$id" -- cat w.txt
        assert_eq "via data" "$OUT" "file written with data"
        assert_one_line_error "$bogus_out"
}

# Last (tests run in name order): every test removed what it made.
test_with_every_sandbox_removed_nothing_is_left() {
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
