#!/usr/bin/env bash
# Escape tier, file system: host files outside the policy's binds can be neither read nor written
# (marker files the test plants, /etc/shadow, symlinks, `..`, /proc/PID/root, a caller's fd), the
# read-only places stay read-only (the root, /usr, /proc/sys, /sys, a read-only --bind), no device
# node can be made, and a setuid file gains nothing.  See escape.bash for the controls.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

# Each path that can be read in the sandbox is printed as "READ <path>: <content>".
# shellcheck disable=SC2016
read_each='for p in "$@"; do c=$(cat "$p" 2>&1) && echo "READ $p: $c" || echo "refused $p: $c"; done'

# The ways to name a host path from inside: as is, through .. from the workdir, through
# /proc/self/root and /proc/1/root.
host_path_variants() { # absolute host path
        echo "$1" "/workspace/../../../..$1" "../../../../..$1" "/proc/self/root$1" "/proc/1/root$1" "/proc/1/cwd/../../..$1"
}

# A marker in a host directory: unreadable and invisible from a sandbox.
check_marker_unreachable() { # dir
        local dir=$1 name=".nsbox-escape-marker.$$" secret="nsbox-secret-$$-$RANDOM" out
        printf '%s\n' "$secret" >"$dir/$name" || fail "cannot plant a marker in $dir"
        chmod 0644 "$dir/$name"
        at_exit "rm -f '$dir/$name'"
        # shellcheck disable=SC2046
        out=$("$NSBOX" run -- sh -c "$read_each" sh $(host_path_variants "$dir/$name") 2>&1)
        echo "    sandbox: $out" >&2
        assert_not_contains "$out" "$secret" "reads of the host marker $dir/$name"
        assert_not_contains "$out" "READ " "reads of the host marker $dir/$name"
        assert_contains "$out" "refused $dir/$name"
        out=$("$NSBOX" run -- sh -c "ls -la /home /root $dir; find /home /workspace /tmp /var /run /mnt /opt -name '$name'; echo listed" 2>&1)
        echo "    sandbox: ls/find: $out" >&2
        assert_contains "$out" "listed" "the sandbox's output (did it run?)"
        assert_not_contains "$out" "$name" "a listing of the sandbox's /home, /root, $dir"
        # control: the same file, bound in, is readable by the sandbox's user (so only its
        # absence keeps it out), and the same reads on the host find it
        scratch_dir
        cp -p "$dir/$name" "$SCRATCH/$name"
        out=$("$NSBOX" run --bind "$SCRATCH:/bound" -- sh -c "$read_each" sh "/bound/$name" 2>&1)
        assert_contains "$out" "READ /bound/$name: $secret" "control: the marker bound into a sandbox"
        assert_contains "$(sh -c "$read_each" sh "$dir/$name")" "READ $dir/$name: $secret" "control: the marker read on the host"
}

test_host_marker_in_home_is_unreachable() {
        local home
        home=$(caller_home)
        if [ -z "$home" ] || [ ! -d "$home" ] || [ ! -w "$home" ]; then skip "no writable home directory for uid $(id -u)"; fi
        check_marker_unreachable "$home"
}

test_host_marker_in_test_tmp_is_unreachable() {
        chmod 0755 "$TEST_TMP"
        check_marker_unreachable "$TEST_TMP"
}

test_etc_shadow_is_unreadable() {
        local out
        out=$("$NSBOX" run -- sh -c "$read_each; ls -a /etc" sh /etc/shadow /etc/gshadow 2>&1)
        echo "    sandbox: $out" >&2
        assert_contains "$out" "refused /etc/shadow" "the sandbox's output (did it run?)"
        assert_not_contains "$out" "READ " "reads of /etc/shadow"
        assert_not_contains "$out" "root:" "reads of /etc/shadow"
        printf '%s\n' "$out" | grep -qx 'g\{0,1\}shadow' && fail "/etc/shadow exists in the sandbox: $out"
        # control: the host has one, and as root the same read finds root's entry
        [ -e /etc/shadow ] || echo "    control: the host has no /etc/shadow" >&2
        if [ "$TEST_AS" = root ] && [ -e /etc/shadow ]; then
                assert_contains "$(sh -c "$read_each" sh /etc/shadow)" "READ /etc/shadow: root:" "control: /etc/shadow on the host"
        fi
}

test_write_outside_workdir_and_tmp_fails() {
        local name=".nsbox-escape-write.$$" out d
        assert_held write_outside
        # shellcheck disable=SC2016
        out=$("$NSBOX" run -- sh -c 'for d in / /etc /usr /usr/bin /home /var /opt /run /mnt; do
                        echo x 2>/dev/null >"$d/$1" && echo "WROTE $d"; mkdir "$d/$1.d" 2>/dev/null && echo "MADE $d"; done
                echo x >"/etc/$1" ; echo ok >/workspace/f && echo ok >/tmp/f && echo ok >/dev/shm/f && cat /workspace/f /tmp/f /dev/shm/f' sh "$name" 2>&1)
        echo "    sandbox: $out" >&2
        assert_not_contains "$out" "WROTE" "writes outside the workdir and tmp"
        assert_not_contains "$out" "MADE" "mkdirs outside the workdir and tmp"
        assert_contains "$out" "Read-only file system"
        # the writable places work: the refusals are not a broken sandbox
        assert_contains "$out" "ok
ok
ok" "writes to /workspace, /tmp and /dev/shm"
        for d in / /etc /usr /usr/bin /home /var /opt /run /mnt; do
                [ -e "$d/$name" ] && fail "$d/$name appeared on the host"
        done
        # control: on the host, as a user, / is a writable mount (the probe refuses this as root)
        if [ "$TEST_AS" = user ]; then control_host write_outside; fi
}

test_proc_sys_is_not_writable() {
        assert_held proc_sys_write
        assert_probe_says "/proc/sys is a read-only mount"
        if [ "$TEST_AS" = user ]; then control_host proc_sys_write; fi # as a user: nothing can be written, /proc/sys is rw
}

test_sys_is_not_writable() {
        assert_held sys_write
        if [ "$TEST_AS" = user ]; then control_host sys_write; fi # as a user: opens only, /sys is a rw mount
}

test_dev_has_only_harmless_nodes() {
        assert_held dev_nodes
        control_host dev_nodes # only lists /dev
}

test_mknod_is_refused() {
        assert_held mknod
        if [ "$TEST_AS" = root ]; then control_host mknod "$TEST_TMP"; fi # harmless: nodes in TEST_TMP, removed
}

# Symlinks to host paths, planted in a bound directory by the host and in the workspace by the
# sandbox itself, resolve inside the sandbox: they read nothing of the host.
test_symlink_in_workspace_reads_nothing_of_the_host() {
        local name=".nsbox-escape-marker.$$" secret="nsbox-secret-$$-$RANDOM" home out
        home=$(caller_home)
        scratch_dir
        mkdir "$SCRATCH/ws"
        printf '%s\n' "$secret" >"$SCRATCH/$name"
        printf '%s\n' "$secret" >"$TEST_TMP/$name"
        chmod 0644 "$SCRATCH/$name" "$TEST_TMP/$name"
        chmod 0755 "$TEST_TMP"
        ln -s "$TEST_TMP/$name" "$SCRATCH/ws/abs"
        ln -s "../$name" "$SCRATCH/ws/rel"
        ln -s "../../../../../../..$SCRATCH/$name" "$SCRATCH/ws/deep"
        ln -s /etc/shadow "$SCRATCH/ws/shadow"
        if [ -n "$home" ] && [ -w "$home" ]; then
                printf '%s\n' "$secret" >"$home/$name"
                at_exit "rm -f '$home/$name'"
                ln -s "$home/$name" "$SCRATCH/ws/home"
        fi
        out=$("$NSBOX" run --bind "$SCRATCH/ws:/workspace/ws" -- sh -c "$read_each" sh \
                /workspace/ws/abs /workspace/ws/rel /workspace/ws/deep /workspace/ws/shadow /workspace/ws/home 2>&1)
        echo "    sandbox, planted by the host: $out" >&2
        assert_contains "$out" "refused /workspace/ws/abs"
        assert_not_contains "$out" "$secret" "reads through symlinks planted by the host"
        assert_not_contains "$out" "READ " "reads through symlinks planted by the host"
        # shellcheck disable=SC2016
        out=$("$NSBOX" run -- sh -c 'cd /workspace && ln -s "$1" l1 && ln -s "$2" l2 && ln -s "$3" l3 && for l in l1 l2 l3; do
                        c=$(cat "$l" 2>&1) && echo "READ $l: $c" || echo "refused $l: $c"; done' sh \
                "$TEST_TMP/$name" "$SCRATCH/$name" "${home:-/nonexistent}/$name" 2>&1)
        echo "    sandbox, planted inside: $out" >&2
        assert_contains "$out" "refused l1"
        assert_not_contains "$out" "$secret" "reads through symlinks planted in the workspace"
        # control: on the host the planted links do lead to the marker
        assert_contains "$(sh -c "$read_each" sh "$SCRATCH/ws/abs" "$SCRATCH/ws/rel")" "READ $SCRATCH/ws/rel: $secret" \
                "control: the links followed on the host"
}

# A read-only --bind: no write, create, delete, rename or chmod in it, no remount read-write,
# and the host's files stay as they were.  The files are world-writable, so that only the
# read-only mount stands in the way.
test_readonly_bind_cannot_be_written_or_remounted() {
        local before after out
        scratch_dir
        mkdir "$SCRATCH/ro"
        printf 'original content\n' >"$SCRATCH/ro/file"
        chmod 0777 "$SCRATCH/ro"
        chmod 0666 "$SCRATCH/ro/file"
        before=$(cd "$SCRATCH/ro" && sha256sum file && ls -la --time-style=+%s)
        PROBE_OPTS=(--bind "$SCRATCH/ro:/data")
        assert_held remount_rw /data
        assert_probe_says "'/data' still read-only"
        PROBE_OPTS=()
        out=$("$NSBOX" run --bind "$SCRATCH/ro:/data" -- sh -c 'echo pwned >/data/file; echo pwned >>/data/file; touch /data/new;
                mkdir /data/dir; rm -f /data/file; mv /data/file /data/moved; chmod 0600 /data/file; ln -s x /data/link; true' 2>&1)
        echo "    sandbox: $out" >&2
        assert_contains "$out" "Read-only file system"
        after=$(cd "$SCRATCH/ro" && sha256sum file && ls -la --time-style=+%s)
        assert_eq "$before" "$after" "the read-only bind's host directory"
        # control: the same writes through a read-write bind do change it
        "$NSBOX" run --bind "$SCRATCH/ro:/data:rw" -- sh -c 'echo pwned >>/data/file' >/dev/null 2>&1
        after=$(cd "$SCRATCH/ro" && sha256sum file && ls -la --time-style=+%s)
        assert_ne "$before" "$after" "control: the host directory after a write through a read-write bind"
}

test_rw_bind_writes_land_on_the_host() {
        local out
        scratch_dir
        mkdir "$SCRATCH/rw"
        chmod 0777 "$SCRATCH/rw"
        out=$("$NSBOX" run --bind "$SCRATCH/rw:/data:rw" -- sh -c "echo written-$$ >/data/out && mkdir /data/d && echo ok" 2>&1) ||
                fail "writing to a read-write bind failed: $out"
        assert_eq "written-$$" "$(cat "$SCRATCH/rw/out" 2>&1)" "the host file written through the bind"
        [ -d "$SCRATCH/rw/d" ] || fail "the directory made through the bind is not on the host"
}

# A setuid-root file run in the sandbox (nosuid binds, no_new_privs, root unmapped): its uids and
# capabilities stay the caller's.  The probe, setuid, does nothing but report.
# A setuid-root file gains nothing in the sandbox (no_new_privs).  As root the test makes a
# setuid-root copy of the probe; a user cannot, and uses the host's own setuid-root su instead.
test_setuid_file_gains_nothing() {
        local out st
        if [ "$TEST_AS" = user ]; then
                local su=/usr/bin/su
                [ -u "$su" ] && [ "$(stat -c %u "$su")" = 0 ] || fail "this test needs the setuid-root $su (package login/util-linux)"
                # su waits at its password prompt: its Uid line shows real, effective, saved and
                # fs uids; with the setuid bit honoured the effective one would be 0
                out=$("$NSBOX" run -- sh -c "ls -ln $su | cut -c1-10
                        (sleep 3 | $su -c true root >/dev/null 2>&1 &)
                        for i in 1 2 3 4 5 6 7 8 9 10; do
                                for c in /proc/[0-9]*/comm; do [ \"\$(cat \$c 2>/dev/null)\" = su ] && grep '^Uid:' \${c%comm}status && exit 0; done
                                sleep 0.2
                        done; echo 'su not found'" 2>&1)
                echo "    sandbox: $out" >&2
                assert_contains "$out" "-rwsr-xr-x" "the setuid bit is visible inside"
                assert_eq "Uid:	1000	1000	1000	1000" "$(printf '%s\n' "$out" | tail -n 1)" "uids of the running setuid su"
                return
        fi
        scratch_dir
        mkdir "$SCRATCH/suid"
        cp "$PROBE" "$SCRATCH/suid/probe"
        at_exit "rm -f '$SCRATCH/suid/probe'"
        chown 0:0 "$SCRATCH/suid/probe"
        chmod 4755 "$SCRATCH/suid/probe"
        out=$("$NSBOX" run --bind "$SCRATCH/suid:/suid" -- /suid/probe suid 2>&1)
        st=$?
        echo "    sandbox: $out [exit $st]" >&2
        [ "$st" = 0 ] || fail "the setuid file gained privileges in the sandbox (exit $st): $out"
        assert_contains "$out" "attack suid: refused"
        # control: run by an unprivileged user on the host, the setuid bit takes effect
        out=$(setpriv --reuid="${NSBOX_TEST_USER:-nobody}" --regid="${NSBOX_TEST_USER:-nogroup}" --clear-groups "$SCRATCH/suid/probe" suid 2>&1)
        st=$?
        echo "    control (host, as ${NSBOX_TEST_USER:-nobody}): $out [exit $st]" >&2
        [ "$st" = 1 ] || fail "control: the setuid probe run on the host should report gained privileges (exit 1), got $st: $out"
}

# The caller's stdin is a host file it opened read-only: reopening it through /proc/self/fd/0
# must not give the sandbox a writable file (a write to a host file outside every bind).
test_stdin_file_cannot_be_reopened_for_writing() {
        local f=$TEST_TMP/stdin.txt before after out
        printf 'original stdin content\n' >"$f"
        chmod 0644 "$f"
        before=$(sha256sum <"$f")
        out=$("$NSBOX" run -- sh -c 'echo PWNED >>/proc/self/fd/0 && echo "reopened fd 0 for writing"; echo PWNED >/dev/stdin && echo "truncated it"; echo tried' <"$f" 2>&1)
        echo "    sandbox (stdin: a host file opened read-only): $out" >&2
        assert_contains "$out" "tried" "the sandbox's output (did it run?)"
        after=$(sha256sum <"$f")
        assert_eq "$before" "$after" "sha256 of the caller's stdin file $f (opened read-only) after the sandbox ran; it now reads: $(head -c 200 "$f")"
        # control: on the host the same reopen works
        cp -p "$f" "$f.control"
        sh -c 'echo PWNED >>/proc/self/fd/0' <"$f.control" 2>/dev/null
        assert_ne "$before" "$(sha256sum <"$f.control")" "control: the file after a reopen on the host"
}

run_tests
