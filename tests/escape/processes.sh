#!/usr/bin/env bash
# Escape tier, processes: host and neighbour processes are invisible and out of reach, pid 1 (the
# sandbox's init, non-dumpable) can be neither traced nor read nor killed, the caller's terminal
# takes no input from the sandbox, nothing survives the sandbox, no host fd leaks in, and the
# nsbox binary cannot be reached through /proc/PID/exe.  See escape.bash for the controls.
# shellcheck source-path=SCRIPTDIR
# KIND_NAME: set for each kind of sandbox in the subshell of for_each_kind (escape.bash)
# shellcheck disable=SC2031
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

# Every process's pid and command line, as seen from where it runs.
# shellcheck disable=SC2016
list_processes='for d in /proc/[0-9]*; do printf "%s " "${d#/proc/}"; tr "\0" " " < "$d/cmdline" 2>/dev/null; echo; done'

test_host_processes_are_invisible() {
        sleep "31337.$$" &
        local pid=$!
        at_exit "kill $pid 2>/dev/null"
        for_each_kind check_host_processes_invisible "$pid"
        # control: the same listing on the host shows the sleep
        assert_contains "$(sh -c "$list_processes")" "31337.$$" "control: the host's process list"
        local init
        init=$(cat /proc/1/comm)
        assert_held host_pids "$init"
        control_host host_pids "$init" # only reads /proc
}

# The host's sleep, and the supervisor: neither nsbox run, nor nsbox exec, nor nsboxd (whose
# command line is "nsboxd ...") is listed; only the sandbox's init and its command are.
check_host_processes_invisible() { # kind host-pid
        local out dpid
        out=$(in_kind "$1" -- sh -c "$list_processes") || fail "listing /proc in the $KIND_NAME failed: $out"
        printf '    %s processes:\n%s\n' "$KIND_NAME" "$out" >&2
        assert_not_contains "$out" "31337.$$" "the process list of the $KIND_NAME"
        if printf '%s\n' "$out" | awk '{print $1}' | grep -qx "$2"; then fail "host pid $2 is in the /proc of the $KIND_NAME"; fi
        assert_not_contains "$out" "$NSBOX" "the process list of the $KIND_NAME (a host nsbox command line)"
        assert_not_contains "$out" "nsboxd" "the process list of the $KIND_NAME"
        assert_contains "$out" "1 nsbox-init" "the process list of the $KIND_NAME (its init)"
        if [ "$1" = daemon ]; then
                dpid=$(daemon_pid) || fail "no nsboxd answers on $NSBOX_SOCKET"
                if printf '%s\n' "$out" | awk '{print $1}' | grep -qx "$dpid"; then fail "nsboxd's pid $dpid is in the /proc of the $KIND_NAME"; fi
        fi
}

test_host_process_cannot_be_signalled() {
        sleep "31338.$$" &
        local pid=$!
        at_exit "kill $pid 2>/dev/null"
        for_each_kind check_host_process_unsignallable "$pid"
        # control: from the host the same command reaches it (kill -0 only)
        sh -c "kill -0 $pid" || fail "control: the host cannot signal its own sleep"
}

# kill -9 of the host's sleep; from a sandbox of nsboxd also kill -0 of nsboxd, its supervisor
# (only -0: were it reachable, a real signal would end the file's other tests).
check_host_process_unsignallable() { # kind host-pid
        local pid=$2 out dpid=""
        if [ "$1" = daemon ]; then
                "$NSBOX" ls >/dev/null 2>&1 # starts the file's nsboxd if no test did yet
                dpid=$(daemon_pid) || fail "no nsboxd answers on $NSBOX_SOCKET"
        fi
        out=$(in_kind "$1" -- sh -c "echo attempted; kill -9 $pid && echo KILLED; kill -0 $pid && echo SIGNALLABLE
                [ -z '$dpid' ] || { kill -0 '$dpid' && echo NSBOXD-SIGNALLABLE; }; true")
        echo "    $KIND_NAME: kill -9 $pid${dpid:+, kill -0 $dpid (nsboxd)}: $out" >&2
        assert_contains "$out" "attempted" "the output of the $KIND_NAME (did it run?)"
        assert_not_contains "$out" "KILLED" "kill -9 of host pid $pid from the $KIND_NAME"
        assert_not_contains "$out" "SIGNALLABLE" "kill -0 of host pid $pid${dpid:+ and of nsboxd, pid $dpid} from the $KIND_NAME"
        kill -0 "$pid" 2>/dev/null || fail "host process $pid died while the $KIND_NAME tried to kill it"
}

# A neighbour sandbox traps SIGCONT; another sandbox sends SIGCONT to every process it can
# (kill -1).  SIGCONT, because it harms nothing even if it reached the host.  Both sandboxes of
# `nsbox run`, then both of nsboxd (the pairs across kinds: cross.sh).
test_neighbour_sandbox_gets_no_signal() {
        for_each_kind check_neighbour
}

check_neighbour() { # kind
        local log=$TEST_TMP/neighbour.$1.log tag="nsbox-neighbour-$1-$$" out nb id
        # shellcheck disable=SC2016
        local neighbour='trap "echo GOT-SIGNAL" CONT; echo ready; i=0; while [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done'
        if [ "$1" = run ]; then
                "$NSBOX" run -- sh -c "$neighbour" "$tag" >"$log" 2>&1 </dev/null &
        else
                new_daemon_sandbox id
                "$NSBOX" exec "$id" -- sh -c "$neighbour" "$tag" >"$log" 2>&1 </dev/null &
        fi
        nb=$!
        at_exit "kill $nb 2>/dev/null; wait $nb 2>/dev/null"
        for _ in $(seq 50); do grep -q ready "$log" && break; sleep 0.1; done
        grep -q ready "$log" || fail "the neighbour $KIND_NAME did not start: $(cat "$log")"
        # shellcheck disable=SC2016
        out=$(in_kind "$1" -- sh -c 'kill -s CONT -- -1; echo "kill -1: $?"')
        echo "    attacker, $KIND_NAME: $out" >&2
        assert_contains "$out" "kill -1: " "the attacker's output (did it run?)"
        sleep 0.5
        kill -0 "$nb" 2>/dev/null || fail "the neighbour $KIND_NAME died: $(cat "$log")"
        assert_not_contains "$(cat "$log")" "GOT-SIGNAL" "the output of the neighbour $KIND_NAME"
        # control: sent from the host, the neighbour gets it (pkill -f also hits its nsbox run or
        # nsbox exec: harmless)
        pkill -CONT -f "$tag"
        for _ in $(seq 30); do grep -q GOT-SIGNAL "$log" && break; sleep 0.1; done
        assert_contains "$(cat "$log")" "GOT-SIGNAL" "control: the output of the neighbour $KIND_NAME after a SIGCONT from the host"
}

test_ptrace_of_pid1_is_refused() {
        assert_held ptrace
        # harmless as a user (PTRACE_TRACEME in a child works; attaching to the host's pid 1 is refused)
        if [ "$TEST_AS" = user ]; then control_host ptrace; fi
}

test_process_vm_readv_of_pid1_is_refused() {
        assert_held process_vm_readv
        # in a new pid namespace the probe is pid 1 itself
        control_userns --mount --pid --fork --mount-proc -- process_vm_readv
}

test_pid1_memory_and_fds_are_unreadable() {
        assert_held proc1_mem
        assert_probe_says "read /proc/1/mem: Permission denied"
        # harmless: reads only
        if [ "$TEST_AS" = root ]; then control_host proc1_mem; else control_userns --mount --pid --fork --mount-proc -- proc1_mem; fi
}

# No control: a pid namespace's init ignores SIGKILL and SIGSTOP from inside it (the kernel does
# this); the probe checks that init still runs and is not stopped.
test_kill_pid1_leaves_init_running() {
        assert_held kill_pid1
        assert_probe_says "pid 1 still alive"
}

# Every signal 1-64, sent to pid 1 from inside: the agent blocks some of them for a signalfd,
# which lifts the kernel's protection of init, so the agent itself must drop what comes from
# inside.  Afterwards the sandbox still runs its commands and keeps its files, and signals from
# outside (nsbox rm, the caller's SIGTERM to nsbox run) still reach it.  No control: the kernel
# protects no init on the host from root, and from a user's own pid namespace it is what we test.
test_signals_from_inside_leave_the_sandbox_serving() {
        for_each_kind check_signals_from_inside
}

# shellcheck disable=SC2016
send_every_signal_to_pid1='n=0; for s in $(seq 1 64); do kill -$s 1 && n=$((n + 1)); done; sleep 0.3; echo "sent $n signals to pid 1"'

check_signals_from_inside() { # kind
        local id out out2 st pid
        if [ "$1" = run ]; then
                # the command must neither get the signals back nor lose its sandbox; then the
                # caller's SIGTERM is still forwarded to it
                "$NSBOX" run -- sh -c "echo kept > f; $send_every_signal_to_pid1; cat f; "'trap "exit 42" TERM; echo ready; sleep 100 & wait' \
                        >"$TEST_TMP/sig.out" 2>&1 </dev/null &
                pid=$!
                for _ in $(seq 100); do grep -q ready "$TEST_TMP/sig.out" && break; pid_alive "$pid" || break; sleep 0.1; done
                out=$(cat "$TEST_TMP/sig.out")
                echo "    $KIND_NAME: $(printf '%s' "$out" | tr '\n' ' ')" >&2
                if ! pid_alive "$pid"; then
                        wait "$pid"
                        fail "nsbox run ended (status $?) after its command signalled pid 1: $out"
                fi
                kill -TERM "$pid"
                wait "$pid"
                st=$?
                assert_eq 42 "$st" "status of nsbox run after the caller's SIGTERM, once its command had signalled pid 1"
        else
                new_daemon_sandbox id
                out=$("$NSBOX" exec "$id" -- sh -c 'echo kept > f' 2>&1) || fail "nsbox exec $id: $out"
                out=$("$NSBOX" exec "$id" -- sh -c "$send_every_signal_to_pid1" 2>&1) || fail "nsbox exec $id (signals to pid 1): $out"
                echo "    $KIND_NAME: $out" >&2
                out="$out $("$NSBOX" exec "$id" -- cat f 2>&1)" || fail "the sandbox no longer runs commands after its pid 1 was signalled: $out"
                out2=$("$NSBOX" rm "$id" 2>&1) || fail "nsbox rm $id after the signals: $out2"
                "$NSBOX" ls 2>&1 | grep -q "$id" && fail "nsbox rm $id left it listed"
        fi
        assert_contains "$out" "sent 64 signals to pid 1" "the output of the $KIND_NAME"
        assert_contains "$out" "kept" "the file of the $KIND_NAME, read after the signals"
}

# CVE-2019-10063 (flatpak): a filter that compares the whole 64-bit ioctl command lets
# TIOCSTI through with high bits set (the kernel uses the low 32): 0x100005412 and
# 0xffffffff00005412, on fd 0, /dev/tty and a pty the sandbox makes its controlling terminal.
test_cve_2019_10063_tiocsti_high_bit_ioctl_fails() {
        assert_held tiocsti
        assert_probe_says "TIOCSTI on an own pty (controlling tty): Operation not permitted"
        assert_probe_says "ioctl 0x100005412 (TIOCSTI|1<<32) on an own pty (controlling tty): Operation not permitted"
        assert_probe_says "TIOCSTI|0xffffffff00000000 on an own pty (controlling tty): Operation not permitted"
        control_host tiocsti # harmless: stdin is /dev/null; the pty is the probe's own
        assert_contains "$CONTROL_OUT" "ioctl 0x100005412 (TIOCSTI|1<<32) on an own pty (controlling tty) SUCCEEDED" "control"
}

# CVE-2017-5226 (bubblewrap): the caller's terminal.  A pty from script(1) is nsbox's stdin, and
# the sandbox tries to push input into it; and an nsboxd started from that terminal (by its
# first nsbox create) must not hand it to its sandboxes either.  Outside a sandbox the same
# probe succeeds on it (it is the controlling tty).
test_cve_2017_5226_tiocsti_into_callers_terminal_fails() {
        command -v script >/dev/null || fail "this test needs script (util-linux) for a terminal"
        local out st sock="$TEST_TMP/tty.sock"
        out=$(script -qec "'$NSBOX' run --bind '$NSBOX_BUILD/tests:/probe' -- /probe/probe tiocsti" /dev/null </dev/null 2>&1)
        st=$?
        out=$(printf '%s' "$out" | tr -d '\r')
        echo "    nsbox run on a pty: $out [exit $st]" >&2
        [ "$st" = 0 ] || fail "TIOCSTI into the caller's terminal was not refused (exit $st)"
        assert_contains "$out" "fd 0 is a terminal"
        assert_contains "$out" "TIOCSTI on fd 0: Operation not permitted"
        assert_contains "$out" "ioctl 0x100005412 (TIOCSTI|1<<32) on fd 0: Operation not permitted"
        assert_not_contains "$out" "#" "the terminal's output (an injected '#' would be echoed)"
        # nsboxd started from the terminal: its sandbox's command has neither it nor /dev/tty
        # shellcheck disable=SC2016
        printf '%s\n' 'id=$("$NSBOX" create --bind "$NSBOX_BUILD/tests:/probe") && "$NSBOX" exec "$id" -- /probe/probe tiocsti' \
                'echo "[exit $?]"; "$NSBOX" rm -f "$id"' >"$TEST_TMP/tty.sh"
        out=$(NSBOX_SOCKET=$sock script -qec "sh '$TEST_TMP/tty.sh'" /dev/null </dev/null 2>&1)
        # the daemon this started is stopped by the file's own: a socket of its own
        NSBOX_SOCKET=$sock daemon_pid >"$TEST_TMP/tty.pid"
        [ -s "$TEST_TMP/tty.pid" ] && at_exit "kill $(cat "$TEST_TMP/tty.pid") 2>/dev/null"
        out=$(printf '%s' "$out" | tr -d '\r')
        echo "    nsboxd sandbox, daemon started on a pty: $out" >&2
        assert_contains "$out" "[exit 0]" "the probe in the nsboxd sandbox"
        assert_contains "$out" "fd 0 is not a terminal"
        assert_contains "$out" "open /dev/tty: No such device or address"
        assert_not_contains "$out" "#" "the terminal's output (an injected '#' would be echoed)"
        # control: the probe run directly on such a pty injects into it
        out=$(script -qec "'$PROBE' tiocsti" /dev/null </dev/null 2>&1)
        st=$?
        echo "    control (host pty): $(printf '%s' "$out" | tr -d '\r') [exit $st]" >&2
        [ "$st" = 1 ] || fail "control: on a pty outside the sandbox TIOCSTI should work (exit 1), got $st"
        assert_contains "$out" "TIOCSTI on fd 0 SUCCEEDED" "control"
}

test_sandbox_processes_die_with_it() {
        local tag=$$
        for_each_kind check_processes_die
        # control: the same on the host leaves them running, and the check sees them
        bash -c "setsid sleep 1000.$tag & disown; exit 0" </dev/null >/dev/null 2>&1
        sleep 0.2
        pgrep -f "sleep 100[012]\\.$tag" >/dev/null || fail "control: a setsid sleep on the host is not found"
        pkill -f "sleep 100[012]\\.$tag"
}

# setsid + disown, nohup, and a double fork: three ways to outlive a parent.  Output to a file: a
# pipe would make the test wait for any survivor holding it open.  The command lists what runs
# before it exits: proof the three did start.  A sandbox of nsboxd outlives each command, and so
# may what a command leaves in the background: there "dying with the sandbox" means after nsbox
# rm, and the three must still run when nsbox exec has returned (else rm would prove nothing).
check_processes_die() { # kind
        local tag left out d id
        # digits (the sleeps' argument), one tag per kind
        if [ "$1" = run ]; then tag=$$1; else tag=$$2; fi
        # shellcheck disable=SC2016
        local cmd="setsid sleep 1000.$tag & disown; nohup sleep 1001.$tag >/dev/null 2>&1 & (sleep 1002.$tag &);
                sleep 0.3; $list_processes; exit 0"
        at_exit "pkill -f 'sleep 100[012]\\.$tag'"
        if [ "$1" = run ]; then
                "$NSBOX" run -- bash -c "$cmd" >"$TEST_TMP/out" 2>&1 </dev/null || fail "nsbox run failed: $(cat "$TEST_TMP/out")"
        else
                new_daemon_sandbox id
                "$NSBOX" exec "$id" -- bash -c "$cmd" >"$TEST_TMP/out" 2>&1 </dev/null || fail "nsbox exec failed: $(cat "$TEST_TMP/out")"
        fi
        out=$(cat "$TEST_TMP/out")
        echo "    $KIND_NAME, processes before its command ended: $(printf '%s' "$out" | tr '\n' ' ')" >&2
        for d in 1000 1001 1002; do assert_contains "$out" "sleep $d.$tag" "the processes of the $KIND_NAME"; done
        if [ "$1" = daemon ]; then
                for d in 1000 1001 1002; do
                        pgrep -f "sleep $d\\.$tag" >/dev/null ||
                                fail "cannot check: sleep $d.$tag did not outlive nsbox exec in the $KIND_NAME, which still lives"
                done
                out=$("$NSBOX" rm "$id" 2>&1) || fail "nsbox rm $id: $out"
                echo "    $KIND_NAME: the three ran after nsbox exec returned; nsbox rm $id" >&2
        fi
        left=$(wait_gone "sleep 100[012]\\.$tag") || fail "processes outlived their $KIND_NAME: $left"
}

test_host_fd_does_not_leak() {
        exec 7</etc/passwd
        exec 8<>"$TEST_TMP/fd8"
        assert_held fd_leak
        assert_probe_says "cwd /workspace"
        check_fds_of_new_daemon
        control_host fd_leak # only lists its fds
        assert_contains "$CONTROL_OUT" "fd 7 is open: /etc/passwd" "control"
}

# The nsboxd of the file was started before fds 7 and 8 were opened.  One that a caller holding
# them starts (nsbox create does, when no nsboxd answers) gives them to no sandbox either, and
# keeps none of them itself.  Its fds can be listed by root only: it is not dumpable.
check_fds_of_new_daemon() {
        local sock=$ESCAPE_DIR/fd.sock dpid fds
        NSBOX_SOCKET=$sock probe_in_daemon fd_leak >/dev/null
        assert_contains "$PROBE_OUT" "attack fd_leak: refused:" "the probe in a sandbox of an nsboxd started holding fds 7 and 8"
        assert_contains "$PROBE_OUT" "only fds 0, 1, 2 are open" "the probe in a sandbox of an nsboxd started holding fds 7 and 8"
        dpid=$(NSBOX_SOCKET=$sock daemon_pid) || fail "no nsboxd answers on $sock"
        at_exit "kill $dpid 2>/dev/null; wait_pids_gone 5 $dpid >/dev/null"
        if [ "$TEST_AS" = root ]; then
                fds=$(ls -l "/proc/$dpid/fd/" 2>&1) || fail "cannot list the fds of nsboxd $dpid: $fds"
                echo "    nsboxd $dpid, started holding fds 7 and 8: $(printf '%s\n' "$fds" | awk 'NR > 1 {print $(NF - 2), $NF}' | tr '\n' ' ')" >&2
                assert_not_contains "$fds" "/etc/passwd" "the fds of an nsboxd started by a caller holding /etc/passwd as fd 7"
                assert_not_contains "$fds" "$TEST_TMP/fd8" "the fds of an nsboxd started by a caller holding $TEST_TMP/fd8 as fd 8"
        else
                echo "    nsboxd $dpid, started holding fds 7 and 8: its fds are not listed (it is not dumpable)" >&2
        fi
}

# runc CVE-2019-5736: a process of the sandbox opens /proc/self/exe or /proc/1/exe (the agent,
# i.e. the nsbox binary) and writes the host's binary through it.  Both binaries stay as they were.
test_cve_2019_5736_proc_self_exe_overwrite_fails() {
        local before after
        before=$(sha256sum "$NSBOX" "$NSBOX_BUILD/nsboxd")
        assert_held proc_exe_write
        assert_probe_says "/proc/1/exe O_PATH: Permission denied"
        assert_probe_says "open /proc/self/exe O_WRONLY:"
        after=$(sha256sum "$NSBOX" "$NSBOX_BUILD/nsboxd")
        assert_eq "$before" "$after" "sha256 of the nsbox binaries"
        # control: as pid 1 of its own pid namespace, the probe reaches its own /proc/1/exe
        control_userns --mount --pid --fork --mount-proc -- proc_exe_write
}

# runc CVE-2024-21626: a host directory fd leaked into the sandbox (or a cwd set through
# /proc/self/fd/N) walks up to the host's root.  The caller holds directory fds on the host (its
# test directory, /, its home) and runs from a host directory; in the sandbox every fd, cwd and
# root of every process it can see must lead nowhere out of its root, nor open the host marker
# as /proc/PID/fd/N/../../..MARKER.  Then the exploit itself: a command whose working directory
# is /proc/self/fd/N, for N from 3 to 40, through nsbox exec --cwd and nsbox run --workdir.
test_cve_2024_21626_leaked_fd_and_cwd_lead_nowhere() {
        local marker="$TEST_TMP/cve-2024-21626.marker" secret="nsbox-secret-$$-$RANDOM" before n out st id ran=0
        chmod 0755 "$TEST_TMP"
        printf '%s\n' "$secret" >"$marker"
        chmod 0644 "$marker"
        before=$(sha256sum "$marker")
        exec 7<"$TEST_TMP" 8</ 9<"$(caller_home)"
        cd "$TEST_TMP" || fail "cd $TEST_TMP"
        assert_held fd_escape "$marker"
        assert_probe_says "directories (fds, cwds, roots) walked up"
        local o
        for o in "${PROBE_OUTS[@]}"; do assert_not_contains "$o" "$secret" "probe output"; done
        new_daemon_sandbox id --bind "$NSBOX_BUILD/tests:/probe"
        for n in $(seq 3 40); do
                out=$("$NSBOX" exec --cwd "/proc/self/fd/$n" "$id" -- /probe/probe fd_escape "$marker" </dev/null 2>&1)
                st=$?
                case $out in *"attack fd_escape"*) ran=$((ran + 1)) ;; esac
                [ "$st" = 1 ] && fail "nsbox exec --cwd /proc/self/fd/$n: the command's cwd leads out of the sandbox: $out"
                assert_not_contains "$out" "$secret" "nsbox exec --cwd /proc/self/fd/$n"
                out=$("$NSBOX" run --workdir "/proc/self/fd/$n" --bind "$NSBOX_BUILD/tests:/probe" -- /probe/probe fd_escape "$marker" </dev/null 2>&1)
                st=$?
                case $out in *"attack fd_escape"*) ran=$((ran + 1)) ;; esac
                [ "$st" = 1 ] && fail "nsbox run --workdir /proc/self/fd/$n: the command's cwd leads out of the sandbox: $out"
                assert_not_contains "$out" "$secret" "nsbox run --workdir /proc/self/fd/$n"
        done
        echo "    cwd /proc/self/fd/N, N=3..40: the probe ran in $ran of 76 commands (the others were refused)," \
                "none of them outside the sandbox" >&2
        assert_eq "$before" "$(sha256sum "$marker")" "the host marker"
        control_chroot_fd_escape "$marker"
}

# Control: the probe chroot()ed into a directory of TEST_TMP, holding fd 7 on TEST_TMP (outside
# that root): it must see fd 7 lead out, and read the marker through it.  Only reads.
control_chroot_fd_escape() { # marker
        local root="$TEST_TMP/chroot" out st ns=(--mount)
        mkdir -p "$root/usr" "$root/proc"
        ln -sfn usr/lib "$root/lib"
        ln -sfn usr/lib64 "$root/lib64"
        cp "$PROBE" "$root/probe"
        [ "$TEST_AS" = user ] && ns=(--user --map-root-user --mount)
        # shellcheck disable=SC2016
        out=$(unshare "${ns[@]}" --propagation private sh -c 'mount --rbind /usr "$1/usr" && mount --rbind /proc "$1/proc" &&
                exec 7<"$2" && exec "$4" "$1" /probe fd_escape "$3"' sh "$root" "$TEST_TMP" "$1" "$(command -v chroot || echo /usr/sbin/chroot)" </dev/null 2>&1)
        st=$?
        echo "    control (chroot with a directory fd from outside): $out [exit $st]" >&2
        [ "$st" = 1 ] || fail "control: the chroot()ed probe should see fd 7 lead out of its root (exit 1), got $st: $out"
        assert_contains "$out" "/fd/7 leads out of the root" "control"
        assert_contains "$out" "opened the host marker" "control"
}

run_tests
