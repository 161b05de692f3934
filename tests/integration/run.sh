#!/usr/bin/env bash
# nsbox run, as a user sees it (issue "nsbox run: a fully isolated one-shot sandbox").
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

my_home() { getent passwd "$(id -u)" | cut -d: -f6; }

test_id_is_the_policy_user() {
        assert_status 0 "$NSBOX" run -- id
        assert_eq "uid=1000(user) gid=1000(user) groups=1000(user)" "$OUT" "id"
}

test_login_shell_path_without_running_id() {
        # E2B's SDKs run every command as `bash -l -c`: the profile must not fork id(1) for bash,
        # and must still set Debian's PATH for the user and for root, after the sandbox's Python
        # environment (python and its pip).  A fake id on PATH tells.
        local probe='mkdir -p /tmp/fb && printf "#!/bin/sh\ntouch /tmp/ran-id\nexec /usr/bin/id \"\$@\"\n" > /tmp/fb/id && chmod +x /tmp/fb/id
                PATH=/tmp/fb:$PATH bash -l -c "echo \$PATH"; [ -e /tmp/ran-id ] && echo bash-ran-id
                PATH=/tmp/fb:$PATH sh -l -c "echo \$PATH"; [ -e /tmp/ran-id ] && echo sh-ran-id; true'
        assert_status 0 "$NSBOX" run -- sh -c "$probe"
        assert_eq "/opt/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games
/opt/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games
sh-ran-id" "$OUT" "login shells as the user (dash has no EUID and runs id)"
        assert_status 0 "$NSBOX" run --policy root -- bash -l -c 'echo $PATH'
        assert_eq "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "$OUT" "root's login shell"
}

test_proc_lists_only_sandbox_processes() {
        sleep 300 & local host_sleep=$!
        assert_status 0 "$NSBOX" run -- sh -c 'ls /proc | grep -E "^[0-9]+$" | sort -n | tr "\n" " "'
        kill "$host_sleep"
        # init (1), the shell (2) and ls/grep/sort/tr: all small pids, never the host's
        for p in $OUT; do [ "$p" -lt 20 ] || fail "host-looking pid $p in the sandbox's /proc: $OUT"; done
        assert_not_contains " $OUT" " $host_sleep " "sandbox /proc"
}

test_hostname_is_the_sandboxes() {
        assert_status 0 "$NSBOX" run -- hostname
        assert_eq nsbox "$OUT"
        assert_status 0 "$NSBOX" run --hostname agent-7 -- sh -c 'hostname; cat /etc/hostname'
        assert_eq "agent-7
agent-7" "$OUT"
        assert_eq "$(hostname)" "$(hostname)" # the host's name is untouched
}

test_only_loopback_exists_and_is_up_with_no_route_out() {
        # interfaces; IPv4 routes (the header line only); IPv6 routes not on lo (loopback's own)
        assert_status 0 "$NSBOX" run -- sh -c 'ls /sys/class/net 2>/dev/null; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "; cat /proc/net/route | wc -l; grep -vc " lo$" /proc/net/ipv6_route; true'
        assert_eq "lo
1
0" "$OUT" "interfaces, IPv4 route lines, IPv6 routes off lo"
        assert_status 0 "$NSBOX" run -- python3 -c 'import fcntl,socket,struct; s=socket.socket(); f=struct.unpack("16sH", fcntl.ioctl(s.fileno(), 0x8913, struct.pack("16sH", b"lo", 0)))[1]; print(f & 1)'
        assert_eq 1 "$OUT" "lo IFF_UP"
}

test_host_loopback_server_is_unreachable_and_dns_fails() {
        python3 -u -m http.server 0 --bind 127.0.0.1 > "$TEST_TMP/srv.log" 2>&1 & local srv=$!
        local port="" i
        for i in $(seq 200); do port=$(grep -o 'port [0-9]*' "$TEST_TMP/srv.log" | awk '{print $2}'); [ -n "$port" ] && break; sleep 0.1; done
        [ -n "$port" ] || { kill $srv; fail "test server did not start"; }
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), timeout=2)" || { kill $srv; fail "host cannot reach its own test server"; }
        "$NSBOX" run -- python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), timeout=2)" > "$TEST_TMP/out" 2>&1
        local st=$?
        kill $srv
        [ $st != 0 ] || fail "the sandbox reached the host's loopback server on port $port"
        assert_contains "$(cat "$TEST_TMP/out")" "Connection refused" "sandbox connect error"
        "$NSBOX" run -- python3 -c "import socket; socket.gethostbyname('example.com')" > "$TEST_TMP/out" 2>&1 && fail "DNS resolved inside: $(cat "$TEST_TMP/out")"
        true
}

test_no_capabilities_no_new_privs_seccomp_filter() {
        assert_status 0 "$NSBOX" run -- grep -E 'Cap(Eff|Prm|Bnd|Amb|Inh)|NoNewPrivs|^Seccomp:' /proc/self/status
        assert_eq "CapInh:	0000000000000000
CapPrm:	0000000000000000
CapEff:	0000000000000000
CapBnd:	0000000000000000
CapAmb:	0000000000000000
NoNewPrivs:	1
Seccomp:	2" "$OUT" "status"
}

test_policy_capability_is_kept_and_nothing_else() {
        printf '{ "capabilities": ["CAP_NET_BIND_SERVICE"] }\n' > "$TEST_TMP/caps.json"
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/caps.json" -- sh -c 'grep -E "^Cap(Eff|Bnd|Amb)" /proc/self/status | cut -f2 | tr "\n" " "; python3 -c "import socket; socket.socket().bind((\"127.0.0.1\", 80)); print(\"bound\")"'
        assert_eq "0000000000000400 0000000000000400 0000000000000400 bound" "$(echo $OUT)" "kept capability"
        assert_status 0 "$NSBOX" run -- python3 -c 'import socket
try: socket.socket().bind(("127.0.0.1", 80)); print("bound")
except PermissionError: print("refused")'
        assert_eq refused "$OUT" "port 80 without the capability"
}

test_privileged_operations_fail() {
        local cmd
        for cmd in "unshare -U true" "unshare -r true" "mount -t tmpfs none /tmp" "keyctl show" "umount /proc" "chroot / true"; do
                "$NSBOX" run -- $cmd > "$TEST_TMP/out" 2>&1 && fail "'$cmd' succeeded in the sandbox: $(cat "$TEST_TMP/out")"
        done
        true
}

test_setuid_binary_gains_nothing() {
        [ -u /usr/bin/su ] || skip "no setuid /usr/bin/su on this host"
        "$NSBOX" run -- /usr/bin/su -c id root < /dev/null > "$TEST_TMP/out" 2>&1 && fail "su succeeded: $(cat "$TEST_TMP/out")"
        assert_status 0 "$NSBOX" run -- sh -c 'ls -ln /usr/bin/su | cut -c1-10; id -u'
        assert_contains "$OUT" "1000" "id after su attempt"
}

test_marker_in_callers_home_is_invisible() {
        local home; home=$(my_home)
        [ -w "$home" ] || skip "home '$home' of $(id -un) is not writable"
        local marker="$home/.nsbox-marker-$$"
        echo secret-$$ > "$marker"
        "$NSBOX" run -- cat "$marker" > "$TEST_TMP/out" 2>&1; local st=$?
        assert_status 0 "$NSBOX" run -- sh -c "ls -a /home /root 2>&1; cat /etc/shadow 2>&1; true"
        rm -f "$marker"
        [ $st != 0 ] || fail "marker readable in the sandbox"
        assert_not_contains "$OUT" "nsbox-marker" "ls of /home and /root"
        assert_not_contains "$OUT" "root:" "/etc/shadow"
}

test_writes_outside_workspace_tmp_and_shm_fail() {
        assert_status 0 "$NSBOX" run -- sh -c 'for d in / /etc /usr /usr/local /var /home /opt /run /dev /proc/sys/kernel; do touch $d/nsbox-x 2>/dev/null && echo "wrote $d"; done; touch /workspace/a /tmp/b /dev/shm/c && echo ok'
        assert_eq ok "$OUT" "writes"
}

test_workspace_is_gone_after_the_run() {
        assert_status 0 "$NSBOX" run -- sh -c 'echo data > /workspace/file; echo t > /tmp/file; cat /workspace/file'
        assert_eq data "$OUT"
        assert_status 0 "$NSBOX" run -- sh -c 'find /workspace /tmp -mindepth 1 | wc -l'
        assert_eq 0 "$OUT" "entries in a new sandbox's /workspace and /tmp"
}

test_rw_bind_writes_land_on_the_host() {
        mkdir -p "$TEST_TMP/proj" && echo old > "$TEST_TMP/proj/in"
        chmod 0777 "$TEST_TMP/proj"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/proj:/workspace/proj:rw" -- sh -c 'cat proj/in; echo new > proj/out'
        assert_eq old "$OUT"
        assert_eq new "$(cat "$TEST_TMP/proj/out")" "file written through the rw bind"
        if [ "$TEST_AS" = user ]; then
                assert_eq "$(id -u)" "$(stat -c %u "$TEST_TMP/proj/out")" "owner of the written file"
        else
                # a root-started sandbox's binds are id-mapped: what it writes belongs to the caller
                assert_eq 0 "$(stat -c %u "$TEST_TMP/proj/out")" "owner of the written file"
        fi
}

test_ro_bind_is_readonly() {
        mkdir -p "$TEST_TMP/ro" && echo keep > "$TEST_TMP/ro/f"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/ro:/data" -- sh -c 'cat /data/f; (echo x > /data/f) 2>/dev/null || echo refused'
        assert_eq "keep
refused" "$OUT"
        assert_eq keep "$(cat "$TEST_TMP/ro/f")"
}

test_stdio_passes_through() {
        assert_eq "HELLO" "$(echo hello | "$NSBOX" run -- tr a-z A-Z)" "stdin to stdout"
        assert_eq "err" "$("$NSBOX" run -- sh -c 'echo err >&2' 2>&1 >/dev/null)" "stderr"
}

test_closed_standard_fds_are_survived() {
        # stdin closed by the caller: the sandbox still writes its output, and sees /dev/null
        OUT=$("$NSBOX" run -- sh -c 'cat; echo done' <&- 2>&1)
        assert_eq done "$OUT"
        OUT=$("$NSBOX" run -- sh -c 'echo to-stderr >&2' 2>&1 >&-)
        assert_eq to-stderr "$OUT"
}

test_100mb_stream_passes_through() {
        local sum_in sum_out
        sum_in=$(head -c 100000000 /dev/zero | tr '\0' 'x' | sha256sum | cut -d' ' -f1)
        sum_out=$(head -c 100000000 /dev/zero | tr '\0' 'x' | "$NSBOX" run -- cat | sha256sum | cut -d' ' -f1)
        assert_eq "$sum_in" "$sum_out" "sha256 of 100 MB through the sandbox"
}

test_exit_status_passes_through() {
        assert_status 0 "$NSBOX" run -- true
        assert_status 1 "$NSBOX" run -- false
        assert_status 42 "$NSBOX" run -- sh -c 'exit 42'
}

test_killed_by_signal_gives_128_plus_n() {
        assert_status 137 "$NSBOX" run -- sh -c 'kill -KILL $$'
        assert_status 143 "$NSBOX" run -- sh -c 'kill -TERM $$'
}

test_missing_command_gives_127_and_not_executable_126() {
        assert_status 127 "$NSBOX" run -- no-such-command-here
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "no-such-command-here"
        assert_status 127 "$NSBOX" run -- /no/such/path
        assert_status 126 "$NSBOX" run -- /etc/passwd
        assert_one_line_error "$OUT"
}

test_timeout_kills_every_process_and_exits_124() {
        local start=$SECONDS
        assert_status 124 "$NSBOX" run --timeout 0.5 -- sh -c 'sleep 271 & sleep 272'
        [ $((SECONDS - start)) -lt 5 ] || fail "timeout took $((SECONDS - start)) s"
        wait_gone "sleep 27[12]" || fail "processes survived the timeout"
}

test_json_result_on_stderr() {
        "$NSBOX" run --json -- sh -c 'echo out; exit 3' > "$TEST_TMP/out" 2> "$TEST_TMP/err"
        assert_eq 3 $? "exit status"
        assert_eq out "$(cat "$TEST_TMP/out")" "stdout"
        python3 - "$TEST_TMP/err" <<'PY' || fail "json: $(cat "$TEST_TMP/err")"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["exit_code"] == 3 and r["signal"] == 0 and r["timed_out"] is False and r["reason"] == "exited", r
assert r["oom_killed"] is False and r["wall_time_ms"] > 0 and r["cpu_time_ms"] >= 0 and r["peak_memory_bytes"] > 0, r
PY
        "$NSBOX" run --json --timeout 0.3 -- sleep 5 2> "$TEST_TMP/err"
        assert_contains "$(cat "$TEST_TMP/err")" '"timed_out":true' "json after timeout"
        assert_contains "$(cat "$TEST_TMP/err")" '"reason":"timed_out"' "json after timeout"
}

test_environment_is_the_policys_not_the_callers() {
        OUT=$(NSBOX_TEST_SECRET=hunter2 "$NSBOX" run -e FOO=bar -e NSBOX_TEST_PASS -- env 2>&1)
        assert_not_contains "$OUT" "hunter2" "sandbox env"
        assert_contains "$OUT" "FOO=bar"
        assert_contains "$OUT" "HOME=/workspace"
        assert_contains "$OUT" "PATH=/opt/venv/bin:/usr/local/sbin" # the Python environment's first (issue 24)
        OUT=$(NSBOX_TEST_PASS=through "$NSBOX" run -e NSBOX_TEST_PASS -- printenv NSBOX_TEST_PASS)
        assert_eq through "$OUT" "-e NAME passes the caller's value"
}

test_workdir_and_tmpfs_options() {
        assert_status 0 "$NSBOX" run --workdir /work --tmpfs /scratch:1M -- sh -c 'pwd; echo a > /work/a && echo w; head -c 2000000 /dev/zero > /scratch/big 2>/dev/null || echo full'
        assert_eq "/work
w
full" "$OUT"
}

test_disk_limit_gives_enospc_inside() {
        assert_status 0 "$NSBOX" run --disk 8M -- sh -c 'dd if=/dev/zero of=/workspace/big bs=1M count=32 2>&1 | grep -o "No space left on device" | head -1'
        assert_eq "No space left on device" "$OUT"
}

test_python_and_git_work() {
        assert_status 0 "$NSBOX" run -- python3 -c 'import json, ssl, sqlite3; print(sum(range(10)))'
        assert_eq 45 "$OUT"
        assert_status 0 "$NSBOX" run -- sh -c 'git init -q r && cd r && git config user.email a@b && git config user.name a && echo x > f && git add f && git commit -qm m && git log --format=%s'
        assert_eq m "$OUT"
}

test_signals_are_forwarded_to_the_command() {
        "$NSBOX" run -- sh -c 'trap "exit 42" TERM; sleep 100 & wait' & local pid=$!
        sleep 0.5
        kill -TERM $pid
        wait $pid
        assert_eq 42 $? "status after SIGTERM to nsbox"
}

test_kill_9_of_nsbox_leaves_nothing_behind() {
        local before after
        before=$(grep -c . /proc/self/mountinfo)
        "$NSBOX" run -- sh -c 'sleep 281 & setsid sleep 282 & sleep 283' & local pid=$!
        # anchored: nsbox's own stdio copiers carry the same words in their command line, and
        # one built with ASan takes a while to exit after its pipe closes
        local i; for i in $(seq 50); do pgrep -f "^sleep 283$" >/dev/null && break; sleep 0.1; done
        pgrep -f "^sleep 283$" >/dev/null || fail "sandbox did not start"
        kill -9 $pid
        wait $pid 2>/dev/null
        wait_gone "^sleep 28[123]$" || fail "sandbox processes survived kill -9 of nsbox"
        after=$(grep -c . /proc/self/mountinfo)
        assert_eq "$before" "$after" "host mount count"
        ls /tmp | grep -q '^nsbox-stage' && fail "staging directory left in /tmp"
        true
}

test_rootfs_dir_is_the_lower_layer() {
        local bb; bb=$(command -v busybox) || fail "busybox is needed (apt-get install busybox-static)"
        local r="$TEST_TMP/root"
        mkdir -p "$r/bin" "$r/etc" && cp "$bb" "$r/bin/busybox" && ln -s busybox "$r/bin/sh" && ln -s busybox "$r/bin/cat" && ln -s busybox "$r/bin/id"
        echo "root:x:0:0:root:/root:/bin/sh" > "$r/etc/passwd"
        assert_status 0 "$NSBOX" run --rootfs "$r" -- /bin/sh -c 'cat /etc/passwd; id -un; ls /usr 2>&1; echo x > /workspace/f && echo w'
        assert_contains "$OUT" "root:x:0:0"
        assert_contains "$OUT" "user:x:1000:1000"
        assert_contains "$OUT" "w"
        assert_not_contains "$OUT" "python3" "the host's /usr must not be in a rootfs sandbox"
        assert_eq "root:x:0:0:root:/root:/bin/sh" "$(cat "$r/etc/passwd")" "the rootfs on the host is unchanged"
}

test_json_result_when_the_command_cannot_run() {
        "$NSBOX" run --json -- no-such-cmd 2> "$TEST_TMP/err"
        assert_eq 127 $? "status"
        python3 - "$TEST_TMP/err" <<'PY' || fail "json: $(cat "$TEST_TMP/err")"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["status"] == 127 and r["reason"] == "not_found" and "no-such-cmd" in r["error"], r
PY
        "$NSBOX" run --json --bind /no/such:/x -- true 2> "$TEST_TMP/err"
        assert_eq 125 $? "status"
        assert_contains "$(tail -n 1 "$TEST_TMP/err")" '"reason":"setup_failed"'
}

test_timeout_reports_the_commands_cpu_time() {
        "$NSBOX" run --json --timeout 0.6 -- sh -c 'while :; do :; done' 2> "$TEST_TMP/err"
        assert_eq 124 $? "status"
        python3 - "$TEST_TMP/err" <<'PY' || fail "json: $(cat "$TEST_TMP/err")"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["timed_out"] and r["status"] == 124, r
assert r["cpu_time_ms"] > 150, r  # the spinning shell's time, not just init's
PY
}

test_second_sigterm_kills_a_command_that_ignores_it() {
        "$NSBOX" run -- sh -c 'trap "" TERM INT; sleep 291' & local pid=$!
        local i; for i in $(seq 50); do pgrep -f "^sleep 291" >/dev/null && break; sleep 0.1; done
        kill -TERM $pid; sleep 0.3
        kill -0 $pid 2>/dev/null || fail "the first SIGTERM should only be forwarded"
        kill -TERM $pid
        wait $pid
        assert_eq 137 $? "status after the second SIGTERM"
        wait_gone "sleep 291" || fail "sandbox survived"
}

test_init_cmdline_reveals_no_host_paths() {
        mkdir -p "$TEST_TMP/secret-project"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/secret-project:/p" -- sh -c 'tr "\0" " " < /proc/1/cmdline'
        assert_not_contains "$OUT" "secret-project" "/proc/1/cmdline"
        assert_not_contains "$OUT" "$NSBOX" "/proc/1/cmdline"
}

test_root_inside_an_outer_user_namespace_maps_itself() {
        # uid 0 of a user namespace (unshare -r, rootless containers) is not host root
        OUT=$(unshare -Ur "$NSBOX" run -- id -un 2>&1)
        assert_eq user "$OUT"
}

# ---- bad input: one clear line, exit 125, nothing left behind --------------------------------

expect_125() { # what cmd...
        local what=$1; shift
        local before; before=$(ls "$TEST_TMP")
        assert_status 125 "$@"
        assert_one_line_error "$OUT"
        assert_eq "$before" "$(ls "$TEST_TMP")" "files after $what"
}

test_bad_input_gets_one_line_and_125() {
        expect_125 "unknown option" "$NSBOX" run --frobnicate -- true
        assert_contains "$OUT" "--frobnicate"
        expect_125 "no command" "$NSBOX" run
        assert_contains "$OUT" "no command"
        expect_125 "no command after --" "$NSBOX" run --hostname x --
        expect_125 "missing rootfs" "$NSBOX" run --rootfs /no/such/rootfs -- true
        assert_contains "$OUT" "/no/such/rootfs"
        expect_125 "bind of a missing path" "$NSBOX" run --bind /no/such/src:/x -- true
        assert_contains "$OUT" "/no/such/src"
        expect_125 "bind onto /proc" "$NSBOX" run --bind /tmp:/proc/x -- true
        expect_125 "bad timeout" "$NSBOX" run --timeout soon -- true
        expect_125 "workdir in /proc" "$NSBOX" run --workdir /proc/x -- true
        expect_125 "option without its value" "$NSBOX" run --timeout
        assert_contains "$OUT" "needs a value"
        expect_125 "bad hostname" "$NSBOX" run --hostname 'a b' -- true
        expect_125 "bad env" "$NSBOX" run -e '1X=y' -- true
        expect_125 "unknown command" "$NSBOX" frobnicate
        expect_125 "unknown policy" "$NSBOX" run --policy no-such-policy -- true
}

test_bad_policy_names_file_key_and_reason() {
        printf '{ "limits": { "memroy": "1G" } }\n' > "$TEST_TMP/p.json"
        expect_125 "bad policy" "$NSBOX" run --policy "$TEST_TMP/p.json" -- true
        assert_contains "$OUT" "$TEST_TMP/p.json"
        assert_contains "$OUT" "limits.memroy"
        assert_contains "$OUT" "unknown key"
        printf '{ "user": { "uid": "1000" } }\n' > "$TEST_TMP/p.json"
        expect_125 "bad value" "$NSBOX" run --policy "$TEST_TMP/p.json" -- true
        assert_contains "$OUT" "user.uid"
        printf '{ "user": \n' > "$TEST_TMP/p.json"
        expect_125 "bad json" "$NSBOX" run --policy "$TEST_TMP/p.json" -- true
        assert_contains "$OUT" "line"
        rm -f "$TEST_TMP/p.json"
}

test_policy_found_by_name_on_the_search_path() {
        mkdir -p "$TEST_TMP/pol"
        printf '{ "hostname": "from-policy", "user": { "name": "agent", "uid": 2000, "gid": 2000 } }\n' > "$TEST_TMP/pol/mine.json"
        OUT=$(NSBOX_POLICY_PATH="$TEST_TMP/pol" "$NSBOX" run --policy mine -- sh -c 'hostname; id -un; id -u' 2>&1)
        assert_eq "from-policy
agent
2000" "$OUT"
}

test_restricted_user_namespaces_are_explained() {
        # An outer user namespace whose user.max_user_namespaces is 0: harmless to the host.
        command -v unshare >/dev/null || skip "no unshare(1)"
        OUT=$(unshare -U -r --map-root-user sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && "$0" run -- true' "$NSBOX" 2>&1)
        local st=$?
        assert_eq 125 "$st" "exit status"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "cannot create user namespace"
        assert_contains "$OUT" "max_user_namespaces"
        assert_contains "$OUT" "HOST SETUP"
}

test_stdout_and_stderr_to_one_file_keep_every_line_in_order() {
        "$NSBOX" run -- sh -c 'for i in 1 2 3; do echo "out $i"; echo "err $i" >&2; done' > "$TEST_TMP/both" 2>&1
        assert_eq 0 "$?" "exit status"
        assert_eq "out 1
err 1
out 2
err 2
out 3
err 3" "$(cat "$TEST_TMP/both")" "> file 2>&1"
        "$NSBOX" run -- sh -c 'echo appended; echo also >&2' >> "$TEST_TMP/both" 2>&1
        assert_eq "err 3
appended
also" "$(tail -n 3 "$TEST_TMP/both")" ">> file 2>&1"
}

run_tests
