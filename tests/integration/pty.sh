#!/usr/bin/env bash
# Commands on a terminal of their own (exec's pty, process_resize, nsbox exec -t/-it; issue 21):
# the sandbox's own devpts, job control, resize, input, re-attach, and the caller's terminal
# driven through tmux.  Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

# A daemon of our own on a socket of our own, stopped with its sandboxes when this file ends.
SESSION_DIR=$(mktemp -d /tmp/nsbox-pty.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT

# ---- helpers -------------------------------------------------------------------------------

jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

MY_SANDBOXES=""
new_sandbox() { # VAR
        local _var=$1 _sid
        _sid=$("$NSBOX" create 2>&1) || fail "nsbox create: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid'"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        printf -v "$_var" %s "$_sid"
}

# Keys (process_write_stdin "data", a JSON string's contents) to the pty process tagged TAG.
keys() { # ID TAG JSON-STRING-CONTENTS
        "$NSBOX" call "$1" process_write_stdin "{\"tag\": \"$2\", \"data\": \"$3\"}" > /dev/null || fail "process_write_stdin $3"
}

# Wait until the recent output of TAG (nsbox logs) matches the extended regex RE; it goes to $LOG.
wait_output() { # ID TAG RE [what]
        for _ in $(seq 100); do
                LOG=$("$NSBOX" logs "$1" "$2" 2>&1 | tr -d '\r')
                printf '%s' "$LOG" | grep -Eq -- "$3" && return 0
                sleep 0.1
        done
        fail "${4:-output} never matched '$3'; output: $(printf '%s' "$LOG" | tail -c 800)"
}

# ---- tests ---------------------------------------------------------------------------------

test_a_pty_is_a_terminal_of_the_sandboxs_own_devpts() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["sh", "-c", "tty; stty size; test -t 0 && test -t 2 && echo tty012; echo TERM=$TERM; ls /dev/pts | tr \"\\n\" \" \""], "pty": {"cols": 100, "rows": 30}}'
        local out
        out=$(echo "$OUT" | jget 'd["stdout"]' | tr -d '\r')
        [[ $out =~ ^/dev/pts/[0-9]+$'\n'"30 100"$'\n'tty012$'\n'TERM=[a-z] ]] || fail "tty, stty size, fds, TERM: $out"
        # a devpts of its own: only its own pty and ptmx, whatever the host has
        assert_eq "0 ptmx" "$(echo "$out" | tail -n 1 | sed 's/ $//')" "/dev/pts in the sandbox"
        assert_eq "" "$(echo "$OUT" | jget 'd["stderr"]')" "stderr of a pty command (its terminal is stdout)"
        # TERM defaults to xterm-256color when the environment has none
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["/usr/bin/env", "-u", "TERM", "sh", "-c", "echo ${TERM:-unset}"], "pty": true}'
        assert_eq "unset" "$(echo "$OUT" | jget 'd["stdout"].strip()')" "env -u TERM"
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["sh", "-c", "stty size"], "pty": true}'
        assert_eq "24 80" "$(echo "$OUT" | jget 'd["stdout"].strip()')" "pty: true is 80x24"
}

test_an_interactive_shell_has_job_control_resize_input_and_ctrl_c() {
        local id pid
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["bash", "--norc", "-i"], "pty": {"cols": 80, "rows": 24}, "detach": true, "tag": "sh", "env": {"PS1": "$ "}}'
        pid=$(echo "$OUT" | jget 'd["pid"]')
        assert_status 0 "$NSBOX" call "$id" process_list
        assert_eq "true" "$(echo "$OUT" | jget "[p['pty'] for p in d['processes'] if p['pid'] == $pid][0]")" "process_list pty"
        keys "$id" sh 'set -- $(stty size); echo sz-$1x$2\n'
        wait_output "$id" sh 'sz-24x80' "stty size before resizing"
        assert_status 0 "$NSBOX" call "$id" process_resize '{"tag": "sh", "cols": 120, "rows": 40}'
        assert_eq "120 40" "$(echo "$OUT" | jget '"%d %d" % (d["cols"], d["rows"])')" "process_resize result"
        keys "$id" sh 'set -- $(stty size); echo sz-$1x$2\n'
        wait_output "$id" sh 'sz-40x120' "stty size after process_resize"
        # job control: a background job listed, then killed by its job number
        keys "$id" sh 'sleep 100 &\n'
        keys "$id" sh 'jobs\n'
        wait_output "$id" sh '\[1\]\+ +Running +sleep 100' "jobs"
        keys "$id" sh 'kill %1; sleep 0.3; jobs\n'
        wait_output "$id" sh '\[1\]\+ +Terminated +sleep 100' "kill %1"
        # input is echoed, Ctrl-C stops the foreground job and the shell goes on
        keys "$id" sh 'sleep 100\n'
        sleep 0.5
        keys "$id" sh '\u0003'
        keys "$id" sh 'echo alive-$((40+2))\n'
        wait_output "$id" sh 'alive-42' "the shell after Ctrl-C"
        assert_contains "$LOG" 'echo alive-$((40+2))' "the keys echoed"
        assert_contains "$LOG" '^C' "Ctrl-C echoed"
        keys "$id" sh 'exit 3\n'
        assert_status 0 "$NSBOX" call "$id" process_wait '{"tag": "sh", "timeout": 10}'
        assert_eq "3" "$(echo "$OUT" | jget 'd["exit_code"]')" "exit status of the shell"
}

test_a_detached_pty_process_reattached_by_tag_gets_its_tail() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" exec -d -t --tag tail "$id" -- sh -c 'echo hello-$((6*7)); [ -t 1 ] && echo on-a-tty; sleep 100'
        wait_output "$id" tail 'on-a-tty' "logs of a detached pty process"
        assert_contains "$LOG" "hello-42" "the tail"
        "$NSBOX" call "$id" process_kill '{"tag": "tail"}' > /dev/null
        # process_close_stdin on a pty is ^D: cat reads end of file and ends
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["cat"], "pty": true, "detach": true, "tag": "cat"}'
        keys "$id" cat 'abc\n'
        assert_status 0 "$NSBOX" call "$id" process_close_stdin '{"tag": "cat"}'
        assert_status 0 "$NSBOX" call "$id" process_wait '{"tag": "cat", "timeout": 10}'
        assert_eq "0 abc abc" "$(echo "$OUT" | jget '"%d %s" % (d["exit_code"], " ".join(d["stdout"].split()))')" "cat on a pty: echo, output, end of file"
}

test_bad_sizes_and_non_pty_processes_are_refused() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["sleep", "100"], "background": true, "tag": "plain"}'
        assert_status 1 "$NSBOX" call "$id" process_resize '{"tag": "plain", "cols": 80, "rows": 24}'
        assert_contains "$OUT" invalid_argument "resize of a non-pty process"
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" process_resize '{"tag": "nosuch", "cols": 80, "rows": 24}'
        assert_contains "$OUT" not_found "resize of an unknown tag"
        assert_one_line_error "$OUT"
        assert_status 1 "$NSBOX" call "$id" process_resize '{"pid": 99999, "cols": 80, "rows": 24}'
        assert_contains "$OUT" not_found "resize of an unknown pid"
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["sleep", "100"], "pty": {"cols": 50, "rows": 20}, "background": true, "tag": "t"}'
        local bad
        for bad in '"cols": 0, "rows": 20' '"cols": 100000, "rows": 20' '"cols": "80", "rows": 20' '"cols": 80' '"cols": 80, "rows": -1'; do
                assert_status 1 "$NSBOX" call "$id" process_resize "{\"tag\": \"t\", $bad}"
                assert_contains "$OUT" invalid_argument "process_resize {$bad}"
                assert_one_line_error "$OUT"
        done
        for bad in '{"cols": 0}' '{"rows": 100000}' '{"cols": "80"}' '"big"' '3'; do
                assert_status 1 "$NSBOX" call "$id" exec "{\"cmd\": [\"true\"], \"pty\": $bad}"
                assert_contains "$OUT" invalid_argument "exec pty $bad"
                assert_one_line_error "$OUT"
        done
        # nothing changed: the size is still the one given
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["sh", "-c", "stty size < /proc/'"$(
                "$NSBOX" call "$id" process_list | jget "[p['pid'] for p in d['processes'] if p['tag'] == 't'][0]")"'/fd/0"]}'
        assert_eq "20 50" "$(echo "$OUT" | jget 'd["stdout"].strip()')" "size after refused resizes"
        assert_status 125 "$NSBOX" exec -it "$id" true < /dev/null
        assert_one_line_error "$OUT"
}

# tmux on the test's own socket; pane and wait_pane read the session named $PANE
tmx() { TERM=xterm tmux -S "$TEST_TMP/tmux.sock" "$@"; }
pane() { tmx capture-pane -p -t "$PANE" | grep -v '^$'; }
wait_pane() { # RE what
        for _ in $(seq 100); do pane | grep -Eq -- "$1" && return 0; sleep 0.1; done
        fail "$2: the pane never matched '$1': $(pane | tail -n 15)"
}

# nsbox exec -it driven through tmux: prompt, tty, resize, Ctrl-C, exit status, our terminal
# restored, and the detach keys.
test_exec_it_under_tmux() {
        command -v tmux > /dev/null || skip "no tmux (quickstart.sh installs it)"
        local id sock="$TEST_TMP/tmux.sock"
        new_sandbox id
        PANE=t
        tmx new-session -d -s t -x 90 -y 30 "stty -a > $TEST_TMP/before; NSBOX_SOCKET=$NSBOX_SOCKET $NSBOX exec -it $id env PS1='\$ ' bash --norc -i; echo status=\$?; stty -a > $TEST_TMP/after; sleep 60" ||
                fail "tmux new-session"
        trap 'tmux -S "'"$sock"'" kill-server 2>/dev/null; [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        wait_pane '^\$' "the prompt"
        tmx send-keys -t t 'tty; stty size' Enter
        wait_pane '^30 90$' "stty size of the window"
        pane | grep -Eq '^/dev/pts/[0-9]+$' || fail "tty: $(pane)"
        tmx resize-window -t t -x 100 -y 35 2> /dev/null || tmx resize-pane -t t -x 100 -y 35
        sleep 0.5
        tmx send-keys -t t 'stty size' Enter
        wait_pane '^35 100$' "stty size after the window changed"
        tmx send-keys -t t 'sleep 100' Enter
        sleep 0.5
        tmx send-keys -t t C-c
        tmx send-keys -t t 'echo after-$((1+1))' Enter
        wait_pane '^after-2$' "the shell after Ctrl-C"
        tmx send-keys -t t 'exit 3' Enter
        wait_pane '^status=3$' "exit status"
        for _ in $(seq 50); do [ -s "$TEST_TMP/after" ] && break; sleep 0.1; done
        assert_eq "$(sed 's/rows [0-9]*; columns [0-9]*;//' "$TEST_TMP/before")" "$(sed 's/rows [0-9]*; columns [0-9]*;//' "$TEST_TMP/after")" "our terminal's settings after -it"
        # Ctrl-P Ctrl-Q: nsbox exits 0, the shell runs on
        tmx kill-session -t t
        tmx new-session -d -s t -x 90 -y 30 "NSBOX_SOCKET=$NSBOX_SOCKET $NSBOX exec -it --tag kept $id bash --norc -i; echo status=\$?; sleep 60"
        wait_pane '\$ *$' "the prompt before the detach keys" # keys before it could beat our raw mode
        tmx send-keys -t t 'echo typed > /tmp/typed' Enter C-p C-q
        wait_pane 'status=0$' "detach"
        pane | grep -q 'detached' || fail "no detach message: $(pane)"
        assert_status 0 "$NSBOX" call "$id" process_list
        assert_eq "true true" "$(echo "$OUT" | jget "' '.join(json.dumps(p[k]) for p in d['processes'] if p['tag'] == 'kept' for k in ('running', 'pty'))")" "the detached shell"
        assert_status 0 "$NSBOX" exec "$id" cat /tmp/typed
        assert_eq "typed" "$OUT" "keys before the detach keys"
        "$NSBOX" call "$id" process_kill '{"tag": "kept"}' > /dev/null
        tmx kill-server
}

# nsbox exec -it's other ways out: the sandbox's shell killed with SIGKILL from inside, and the
# sandbox removed from another terminal.  Our terminal is raw meanwhile, and as it was after.
test_exec_it_terminal_restored_after_kill_9_and_rm() {
        command -v tmux > /dev/null || skip "no tmux (quickstart.sh installs it)"
        local id sock="$TEST_TMP/tmux.sock" how pid ptty
        PANE=k
        trap 'tmux -S "'"$sock"'" kill-server 2>/dev/null; [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        for how in kill9 rm; do
                new_sandbox id
                rm -f "$TEST_TMP/before" "$TEST_TMP/after"
                tmx new-session -d -s k -x 90 -y 30 "stty -a > $TEST_TMP/before; NSBOX_SOCKET=$NSBOX_SOCKET $NSBOX exec -it --tag sh $id env PS1='\$ ' bash --norc -i; echo status=\$?; stty -a > $TEST_TMP/after; sleep 60" ||
                        fail "tmux new-session ($how)"
                wait_pane '^\$' "the prompt ($how)"
                ptty=$(tmx display -p -t k '#{pane_tty}')
                stty -F "$ptty" -a | grep -q -- '-icanon' || fail "our terminal is not raw while exec -it runs ($how): $(stty -F "$ptty" -a)"
                if [ $how = kill9 ]; then
                        pid=$("$NSBOX" call "$id" process_list | jget "[p['pid'] for p in d['processes'] if p['tag'] == 'sh'][0]")
                        assert_status 0 "$NSBOX" exec "$id" kill -9 "$pid"
                        wait_pane 'status=137$' "exit status after kill -9 of the shell"
                else
                        assert_status 0 "$NSBOX" rm -f "$id"
                        wait_pane 'status=125$' "nsbox exec -it after nsbox rm: 125"
                        pane | grep -q 'was destroyed' || fail "no message after nsbox rm: $(pane | tail -n 5)"
                fi
                for _ in $(seq 50); do [ -s "$TEST_TMP/after" ] && break; sleep 0.1; done
                assert_eq "$(cat "$TEST_TMP/before")" "$(cat "$TEST_TMP/after")" "our terminal's settings after $how"
                tmx kill-server
        done
}

# nsbox run -it -- bash: a terminal of its own, job control, resize, our terminal restored.
test_run_it_gives_the_command_a_terminal_with_job_control() {
        command -v tmux > /dev/null || skip "no tmux (quickstart.sh installs it)"
        local sock="$TEST_TMP/tmux.sock"
        PANE=r
        trap 'tmux -S "'"$sock"'" kill-server 2>/dev/null' EXIT
        tmx new-session -d -s r -x 90 -y 30 "stty -a > $TEST_TMP/before; $NSBOX run -it -- env PS1='\$ ' bash --norc -i; echo status=\$?; stty -a > $TEST_TMP/after; sleep 60" ||
                fail "tmux new-session"
        wait_pane '^\$' "the prompt"
        tmx send-keys -t r 'tty; stty size; sleep 100 &' Enter
        wait_pane '^30 90$' "stty size"
        pane | grep -Eq '^/dev/pts/[0-9]+$' || fail "tty: $(pane)"
        pane | grep -q 'no job control' && fail "bash has no job control: $(pane)"
        tmx send-keys -t r 'jobs' Enter
        wait_pane 'Running +sleep 100' "jobs"
        tmx resize-window -t r -x 100 -y 35 2> /dev/null || tmx resize-pane -t r -x 100 -y 35
        sleep 0.5
        tmx send-keys -t r 'stty size; sleep 50' Enter
        wait_pane '^35 100$' "stty size after the window changed"
        tmx send-keys -t r C-c
        tmx send-keys -t r 'echo after-$((1+1))' Enter
        wait_pane '^after-2$' "the shell after Ctrl-C"
        tmx send-keys -t r 'exit 4' Enter
        wait_pane '^status=4$' "exit status"
        for _ in $(seq 50); do [ -s "$TEST_TMP/after" ] && break; sleep 0.1; done
        assert_eq "$(sed 's/rows [0-9]*; columns [0-9]*;//' "$TEST_TMP/before")" "$(sed 's/rows [0-9]*; columns [0-9]*;//' "$TEST_TMP/after")" "our terminal's settings after run -it"
        tmx kill-server
        # without a terminal, -t changes nothing
        assert_status 0 "$NSBOX" run -t -- sh -c 'tty || true' < /dev/null
        assert_eq "not a tty" "$OUT" "run -t without a terminal"
}

# Last (tests run in name order): every test removed what it made.
test_zz_with_every_sandbox_removed_nothing_is_left() {
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
