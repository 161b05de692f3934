#!/usr/bin/env bash
# libnsbox, as a C programmer sees it: make install, then the example built with
# `pkg-config --cflags --libs nsbox` runs against a real nsboxd (started by the library); bad
# input through the C API gets clean errors and leaves the daemon as it was.  In-process mode
# (NSBOX_IN_PROCESS): the same example without any nsboxd, and a host program
# (libnsbox-inprocess.c) whose sandboxes leave nothing behind and whose own children and
# SIGCHLD handler the library leaves alone.  When $NSBOX_BUILD's library is a sanitizer build,
# the installed library and the programs are built with the same sanitizers.
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

SESSION_DIR=$(mktemp -d /tmp/nsbox-lib.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
stop_session_daemon() {
        local st=$? pid
        for NSBOX_SOCKET in "$SESSION_DIR"/*.sock; do
                pid=$(daemon_pid)
                [ -n "$pid" ] && kill -TERM "$pid" 2> /dev/null && { wait_pids_gone 5 "$pid" > /dev/null || kill -KILL "$pid"; }
        done
        rm -rf "$SESSION_DIR"
        return $st
}
trap stop_session_daemon EXIT

errno_of() { python3 -c "import errno, sys; print(getattr(errno, sys.argv[1]))" "$1"; }
sandboxes() { "$NSBOX" ls --json | python3 -c 'import json, sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))'; }

# The sanitizers $NSBOX_BUILD was built with ("" for none), for the library installed here.
sanitizers() {
        nm -D "$NSBOX_BUILD/libnsbox.so" 2> /dev/null | grep -q ' U __asan_init' && echo address,undefined
}
# make install into $TEST_TMP/prefix (once per file: make keeps what is up to date).
install_library() {
        make -s -j"$(nproc)" -C "$NSBOX_SRC" B="$TEST_TMP/build" PREFIX="$TEST_TMP/prefix" SANITIZE="$(sanitizers)" install > "$TEST_TMP/make.log" 2>&1 ||
                fail "make install: $(tail -5 "$TEST_TMP/make.log")"
}
# cc a program against the installed library, as its user would.
cc_installed() { # source output
        local san; san=$(sanitizers)
        # shellcheck disable=SC2046
        PKG_CONFIG_PATH="$TEST_TMP/prefix/lib/pkgconfig" cc -Wall -Wextra -Werror -pthread ${san:+-fsanitize=$san} -o "$2" "$1" \
                $(PKG_CONFIG_PATH="$TEST_TMP/prefix/lib/pkgconfig" pkg-config --cflags --libs nsbox) > "$TEST_TMP/cc.log" 2>&1 ||
                fail "cc $(basename "$1"): $(cat "$TEST_TMP/cc.log")"
}

# What nsbox-example prints ($OUT), in either mode: its sandbox's id, streamed output, a file
# read back, and a clean error for each bad input.
assert_example_output() {
        local id; id=$(sed -n 's/^sandbox: //p' <<< "$OUT")
        [[ $id =~ ^[0-9a-f]{32}$ ]] || fail "sandbox id: '$id' in $OUT"
        assert_contains "$OUT" "stdout: hello from user" "streamed stdout"
        assert_contains "$OUT" "stderr: to stderr" "streamed stderr"
        assert_contains "$OUT" "exit: 3" "exit status of the command"
        assert_contains "$OUT" '"content":"echo hello from $(id -un)\n"' "read_file result"
        assert_contains "$OUT" "bad json: -22 invalid_argument: read_file: not JSON" "bad JSON"
        assert_contains "$OUT" "unknown tool: -3 not_found: unknown tool 'no_such_tool'" "unknown tool"
        assert_contains "$OUT" "unknown sandbox: -3 not_found: no sandbox 'ffffffffffffffffffffffffffffffff'" "unknown sandbox"
        assert_contains "$OUT" "missing file: -2 file_not_found" "missing file"
        assert_contains "$OUT" "destroyed: $id" "destroy"
        assert_contains "$OUT" "after destroy: -3 not_found" "a call after destroy"
}

test_example_builds_with_pkg_config_against_the_installed_library_and_runs() {
        local prefix="$TEST_TMP/prefix" b="$TEST_TMP/build"
        install_library
        local f
        for f in lib/libnsbox.so.0 lib/libnsbox.so include/nsbox.h lib/pkgconfig/nsbox.pc share/man/man3/libnsbox.3; do
                [ -e "$prefix/$f" ] || fail "make install did not install $f"
        done
        assert_eq "libnsbox.so.0" "$(objdump -p "$prefix/lib/libnsbox.so" | awk '/SONAME/ {print $2}')" "soname"
        # only the functions of the header are exported
        local exported declared
        exported=$(nm -D --defined-only "$prefix/lib/libnsbox.so" | awk '$2 == "T" {sub(/@.*/, "", $3); print $3}' | sort | tr '\n' ' ')
        declared=$(grep -o 'NSBOX_API [^(]*(' "$prefix/include/nsbox.h" | grep -o 'nsbox_[a-z_]*' | sort | tr '\n' ' ')
        assert_eq "$declared" "$exported" "exported symbols"
        # users link with -lnsbox alone: jansson is the library's own dependency
        export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
        assert_status 0 pkg-config --cflags --libs nsbox
        assert_eq "-I$prefix/include -L$prefix/lib -lnsbox" "$(echo $OUT)" "pkg-config --cflags --libs nsbox"
        assert_eq "$(cd "$NSBOX_SRC" && sed -n 's/^VERSION := //p' Makefile)" "$(pkg-config --modversion nsbox)" "pkg-config --modversion"
        cc_installed "$NSBOX_SRC/examples/nsbox-example.c" "$TEST_TMP/example"
        # no nsboxd runs on this socket: the library starts the installed one
        local sock="$SESSION_DIR/inst.sock"
        OUT=$(cd / && NSBOX_SOCKET="$sock" LD_LIBRARY_PATH="$prefix/lib" "$TEST_TMP/example" 2>&1)
        assert_eq 0 "$?" "nsbox-example exit status; output: $OUT"
        assert_example_output
        local dpid; dpid=$(NSBOX_SOCKET="$sock" daemon_pid)
        [ -n "$dpid" ] || fail "no nsboxd answers on $sock"
        assert_eq "$prefix/bin/nsboxd" "$(readlink "/proc/$dpid/exe")" "the daemon the library started"
        assert_eq "" "$(NSBOX_SOCKET="$sock" sandboxes)" "sandboxes left"
}

# Bad input through the C API: each call fails with an errno, a stable code and one line, and
# nothing reaches the daemon (same sandboxes, still answering).
test_bad_input_gets_clean_errors_and_leaves_the_daemon_as_it_was() {
        cat > "$TEST_TMP/bad.c" <<'C'
#include <nsbox.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void show(nsbox *nb, const char *what, int r)
{
        const char *m = nsbox_error_message(nb);
        printf("%s: %d %s %s\n", what, r, nsbox_error_code(nb) ? nsbox_error_code(nb) : "-", m && !strchr(m, '\n') && *m ? "one-line" : "NO-MESSAGE");
}
int main(int argc, char **argv)
{
        nsbox *nb = NULL;
        char *s = NULL, *id = NULL;
        int r = nsbox_connect(0, &nb);
        if (r < 0) { printf("connect: %d %s\n", r, nsbox_error_message(nb)); return 1; }
        show(nb, "create bad options", nsbox_create(nb, "{\"memory\": ", &id));
        show(nb, "create not an object", nsbox_create(nb, "[1]", &id));
        show(nb, "create unknown option", nsbox_create(nb, "{\"no_such_option\": 1}", &id));
        printf("id untouched: %s\n", id ? "no" : "yes");
        show(nb, "call NULL tool", nsbox_call(nb, "x", NULL, NULL, &s));
        show(nb, "call unknown sandbox", nsbox_call(nb, "ffffffffffffffffffffffffffffffff", "exec", "{\"shell\": \"true\"}", &s));
        show(nb, "request unknown method", nsbox_request(nb, "no_such_method", NULL, &s));
        show(nb, "destroy unknown", nsbox_destroy(nb, "ffffffffffffffffffffffffffffffff"));
        show(nb, "exec bad json", nsbox_exec(nb, "x", "{", NULL, NULL, NULL, NULL));
        show(nb, "list", nsbox_request(nb, "list", NULL, &s));
        printf("list result: %s\n", s);
        free(s);
        nsbox_close(nb);
        nb = NULL;
        setenv("NSBOX_SOCKET", argv[1], 1); /* where nothing listens */
        r = nsbox_connect(NSBOX_CONNECT_NO_AUTOSTART, &nb);
        show(nb, "connect no autostart", r);
        nsbox_close(nb);
        (void)argc;
        return 0;
}
C
        local san; san=$(sanitizers)
        cc -Wall -Wextra -Werror ${san:+-fsanitize=$san} -I"$NSBOX_SRC/include" -o "$TEST_TMP/bad" "$TEST_TMP/bad.c" -L"$NSBOX_BUILD" -lnsbox \
                -Wl,-rpath,"$NSBOX_BUILD" > "$TEST_TMP/cc.log" 2>&1 || fail "cc bad.c: $(cat "$TEST_TMP/cc.log")"
        "$NSBOX" ls > /dev/null || fail "nsbox ls could not start nsboxd"
        local before dpid; before=$(sandboxes); dpid=$(daemon_pid)
        OUT=$("$TEST_TMP/bad" "$SESSION_DIR/nobody.sock" 2>&1)
        assert_eq 0 "$?" "status; output: $OUT"
        assert_contains "$OUT" "create bad options: -22 invalid_argument one-line"
        assert_contains "$OUT" "create not an object: -22 invalid_argument one-line"
        assert_contains "$OUT" "create unknown option: -22 invalid_argument one-line"
        assert_contains "$OUT" "id untouched: yes"
        assert_contains "$OUT" "call NULL tool: -22 invalid_argument one-line"
        assert_contains "$OUT" "call unknown sandbox: -3 not_found one-line"
        assert_contains "$OUT" "request unknown method: -3 not_found one-line"
        assert_contains "$OUT" "destroy unknown: -3 not_found one-line"
        assert_contains "$OUT" "exec bad json: -22 invalid_argument one-line"
        assert_contains "$OUT" "list: 0 - NO-MESSAGE" "a success after failures clears the error"
        assert_eq "$before" "$(sandboxes)" "sandboxes after the bad calls"
        assert_eq "$dpid" "$(daemon_pid)" "the daemon that answers"
        assert_contains "$OUT" "connect no autostart: -$(errno_of ENOENT) unavailable one-line" "NO_AUTOSTART where nothing listens"
        [ ! -e "$SESSION_DIR/nobody.sock" ] || fail "NO_AUTOSTART started a daemon"
}

# In process: the example, with no nsboxd anywhere (none is started either), sees the same.
test_in_process_example_runs_without_nsboxd() {
        install_library
        cc_installed "$NSBOX_SRC/examples/nsbox-example.c" "$TEST_TMP/example"
        local sock="$SESSION_DIR/none.sock"
        OUT=$(cd / && NSBOX_SOCKET="$sock" LD_LIBRARY_PATH="$TEST_TMP/prefix/lib" "$TEST_TMP/example" --in-process 2>&1)
        assert_eq 0 "$?" "nsbox-example --in-process exit status; output: $OUT"
        assert_contains "$OUT" "in process"
        assert_example_output
        [ ! -e "$sock" ] || fail "the in-process mode started an nsboxd on $sock"
}

# In process, as a host program sees it: its sandboxes are its children, fresh execs of the
# installed nsbox-agent, get the create options, stream, fail cleanly on bad input, and leave no
# process, mount, cgroup or temp directory; its own child and SIGCHLD handler are untouched (an
# agent's exit is a SIGCHLD too, and the library copes with the program reaping one).
test_in_process_sandboxes_are_children_that_leave_nothing_behind() {
        install_library
        cc_installed "$NSBOX_SRC/tests/integration/libnsbox-inprocess.c" "$TEST_TMP/host"
        local before; before=$(host_leftovers)
        OUT=$(cd / && LD_LIBRARY_PATH="$TEST_TMP/prefix/lib" "$TEST_TMP/host" 2>&1)
        assert_eq 0 "$?" "host program exit status; output: $OUT"
        local line
        while IFS= read -r line; do
                assert_contains "$OUT" "$line"
        done <<'EXPECTED'
connect without the agent: -2 unavailable open the sandbox agent '/no/such/nsbox-agent': No such file or directory
connect: 0 - NO-MESSAGE
create bad json: -22 invalid_argument create: not JSON
create not an object: -22 invalid_argument create: expected a JSON object
create unknown option: -22 invalid_argument create: unknown parameter 'no_such_option'
create bad value: -22 invalid_argument create: --memory 'lots'
create unknown policy: -22 invalid_argument policy 'no-such-policy' not found
create daemon option: -95 unavailable create: 'labels' needs nsboxd
create NULL ret: -22 invalid_argument
id untouched: yes
request list: -95 unavailable list: a method of nsboxd
request snapshot: -95 unavailable snapshot: a method of nsboxd
request tools: 0 has read_file
call unknown sandbox: -3 not_found no sandbox 'ffffffffffffffffffffffffffffffff'
destroy unknown: -3 not_found no sandbox 'ffffffffffffffffffffffffffffffff'
children after bad input: only its own
agent is a child: yes
write_file: 0 - NO-MESSAGE
read_file: 0 {"path":"/work/notes/a.txt","content":"line1\nline2\n"
read_file base64: 0 same bytes
exec: 0 exit 7 stdout [out-hi] stderr [err]
exec result without output: yes
exec as a call: 0 stdout in the result
exec missing command: 0 exit 127
unknown tool: -3 not_found unknown tool 'no_such_tool'
missing file: -2 file_not_found read_file: open '/no/such/file'
bad params: -22 invalid_argument read_file: not JSON
bad base64: -22 invalid_argument write_file: 'content_b64' is not valid base64
call by prefix: 0 {"path":"/work/notes/a.txt","exists":true
destroy: 0 - NO-MESSAGE
after destroy: -3 not_found no sandbox
agent gone: yes
killed agents the program reaped: 1
destroy after the agent was killed: -3 not_found no sandbox
children with two sandboxes: 3
two threads create at once, round 0: ok ok
two threads create at once, round 1: ok ok
two threads create at once, round 2: ok ok
children after close: only its own
wait: its own child, status 42
wait again: no children
SIGCHLD from its own child: yes
SIGCHLD handler: its own
getopt state: as before
mounts: as before
tmp: as before
EXPECTED
        # found where make install put it (the library's own directory has none)
        assert_contains "$OUT" "agent program: $TEST_TMP/prefix/libexec/nsbox/nsbox-agent"
        assert_contains "$OUT" "call after the agent was killed: -5 internal sandbox " "a call after the agent died"
        assert_not_contains "$OUT" "NOT-FOUND" "the agent's cgroup"
        # root gets a cgroup per sandbox here; it must be gone with the sandbox
        if grep -q "^agent cgroup: its own" <<< "$OUT"; then
                assert_contains "$OUT" "cgroup removed: yes" "the sandbox's cgroup after destroy"
        elif [ "$TEST_AS" = root ]; then
                fail "root's sandbox got no cgroup of its own: $(grep '^agent cgroup' <<< "$OUT")"
        fi
        assert_eq "$before" "$(host_leftovers)" "nsbox processes and mounts of the host"
}

# nsbox_call_stream, in both modes alike (libnsbox-stream.c): a watch sees a file a second call
# makes, process_connect gets a detached command's output then its result, a callback's stop
# cancels the call and the handle goes on, so does nsbox_cancel from another thread, bad input
# fails with no event.
test_call_stream_watches_and_attaches_in_both_modes() {
        install_library
        cc_installed "$NSBOX_SRC/tests/integration/libnsbox-stream.c" "$TEST_TMP/stream"
        local mode out_daemon
        for mode in daemon --in-process; do
                OUT=$(cd / && NSBOX_SOCKET="$SESSION_DIR/stream.sock" LD_LIBRARY_PATH="$TEST_TMP/prefix/lib" timeout 120 "$TEST_TMP/stream" $mode 2>&1)
                assert_eq 0 "$?" "stream program ($mode) exit status; output: $OUT"
                local line
                while IFS= read -r line; do
                        assert_contains "$OUT" "$line" "$mode"
                done <<'EXPECTED'
exec: 0 - NO-MESSAGE events 2
exec first event: started with pid
exec output: [hi] exit 0 stdout in result: no
watch stopped: 1 - NO-MESSAGE events 2
watch first event: {"event":"started"}
watch saw: a file the other call made
result untouched: yes
a call after the stop: 0 answered
watch cancelled by another thread: 1 - NO-MESSAGE events 1
a streamed call after a cancel: 0 [after]
exec stopped: 1 - NO-MESSAGE events 1
stopped command killed: yes
process_connect: 0 - NO-MESSAGE events 2
process_connect output: [a b] exit 0
unknown tool: -3 not_found one-line events 0
bad json: -22 invalid_argument one-line events 0
missing directory: -2 file_not_found one-line events 0
unknown process: -3 not_found one-line events 0
unknown sandbox: -3 not_found one-line events 0
NULL tool: -22 invalid_argument one-line events 0
destroy: 0 - NO-MESSAGE events 0
EXPECTED
                assert_not_contains "$OUT" "event length: WRONG" "$mode"
                [ "$mode" = daemon ] && out_daemon=$OUT
        done
        assert_eq "$out_daemon" "$OUT" "the same in both modes"
        assert_eq "" "$(NSBOX_SOCKET="$SESSION_DIR/stream.sock" sandboxes)" "sandboxes left"
}

run_tests
