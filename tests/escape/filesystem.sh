#!/usr/bin/env bash
# Escape tier, file system: host files outside the policy's binds can be neither read nor written
# (marker files the test plants, /etc/shadow, symlinks, `..`, /proc/PID/root, a caller's fd), the
# read-only places stay read-only (the root, /usr, /proc/sys, /sys, a read-only --bind), no device
# node can be made, and a setuid file gains nothing.  See escape.bash for the controls.
# shellcheck source-path=SCRIPTDIR
# KIND_NAME: set for each kind of sandbox in the subshell of for_each_kind (escape.bash)
# shellcheck disable=SC2031
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

# A marker in a host directory: unreadable and invisible from a sandbox of either kind.
check_marker_unreachable() { # dir
        local dir=$1 name=".nsbox-escape-marker.$$" secret="nsbox-secret-$$-$RANDOM"
        printf '%s\n' "$secret" >"$dir/$name" || fail "cannot plant a marker in $dir"
        chmod 0644 "$dir/$name"
        at_exit "rm -f '$dir/$name'"
        for_each_kind check_marker_in "$dir" "$name" "$secret"
        # control: the same reads on the host find it
        assert_contains "$(sh -c "$read_each" sh "$dir/$name")" "READ $dir/$name: $secret" "control: the marker read on the host"
}

check_marker_in() { # kind dir name secret
        local kind=$1 dir=$2 name=$3 secret=$4 out
        # shellcheck disable=SC2046
        out=$(in_kind "$kind" -- sh -c "$read_each" sh $(host_path_variants "$dir/$name"))
        echo "    $KIND_NAME: $out" >&2
        assert_not_contains "$out" "$secret" "reads of the host marker $dir/$name ($KIND_NAME)"
        assert_not_contains "$out" "READ " "reads of the host marker $dir/$name ($KIND_NAME)"
        assert_contains "$out" "refused $dir/$name" "the output of the $KIND_NAME"
        out=$(in_kind "$kind" -- sh -c "ls -la /home /root $dir; find /home /workspace /tmp /var /run /mnt /opt -name '$name'; echo listed")
        echo "    $KIND_NAME: ls/find: $out" >&2
        assert_contains "$out" "listed" "the output of the $KIND_NAME (did it run?)"
        assert_not_contains "$out" "$name" "a listing of /home, /root, $dir in the $KIND_NAME"
        # control: the same file, bound in, is readable by the sandbox's user (so only its
        # absence keeps it out)
        scratch_dir
        cp -p "$dir/$name" "$SCRATCH/$name"
        out=$(in_kind "$kind" --bind "$SCRATCH:/bound" -- sh -c "$read_each" sh "/bound/$name")
        assert_contains "$out" "READ /bound/$name: $secret" "control: the marker bound into the $KIND_NAME"
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
        for_each_kind check_etc_shadow
        # control: the host has one, and as root the same read finds root's entry
        [ -e /etc/shadow ] || echo "    control: the host has no /etc/shadow" >&2
        if [ "$TEST_AS" = root ] && [ -e /etc/shadow ]; then
                assert_contains "$(sh -c "$read_each" sh /etc/shadow)" "READ /etc/shadow: root:" "control: /etc/shadow on the host"
        fi
}

check_etc_shadow() { # kind
        local out
        out=$(in_kind "$1" -- sh -c "$read_each; ls -a /etc" sh /etc/shadow /etc/gshadow)
        echo "    $KIND_NAME: $out" >&2
        assert_contains "$out" "refused /etc/shadow" "the output of the $KIND_NAME (did it run?)"
        assert_not_contains "$out" "READ " "reads of /etc/shadow in the $KIND_NAME"
        assert_not_contains "$out" "root:" "reads of /etc/shadow in the $KIND_NAME"
        if printf '%s\n' "$out" | grep -qx 'g\{0,1\}shadow'; then fail "/etc/shadow exists in the $KIND_NAME: $out"; fi
}

test_write_outside_workdir_and_tmp_fails() {
        assert_held_unprivileged write_outside
        for_each_kind check_write_outside ".nsbox-escape-write.$$"
        # a root policy writes its root by design: into its upper layer, never the host's; the
        # host's /usr stays a read-only bind
        assert_root_probe_says write_outside -- "create in /etc SUCCEEDED" "create in /usr: Read-only file system" \
                "create in /usr/bin: Read-only file system" "create in /dev: Read-only file system"
        local name=".nsbox-escape-write.$$" d out
        # shellcheck disable=SC2016
        out=$("$NSBOX" run --policy root -- sh -c 'for d in / /etc /var /opt /root; do echo x >"$d/$1" || exit 1; done; echo wrote' sh "$name" 2>&1)
        assert_contains "$out" "wrote" "writes of a root policy's user to its root"
        for d in / /etc /var /opt /root; do
                if [ -e "$d/$name" ]; then fail "$d/$name appeared on the host after a root-policy sandbox wrote it"; fi
        done
        # control: on the host, as a user, / is a writable mount (the probe refuses this as root)
        if [ "$TEST_AS" = user ]; then control_host write_outside; fi
}

check_write_outside() { # kind name
        local name=$2 out d
        # shellcheck disable=SC2016
        out=$(in_kind "$1" -- sh -c 'for d in / /etc /usr /usr/bin /home /var /opt /run /mnt; do
                        echo x 2>/dev/null >"$d/$1" && echo "WROTE $d"; mkdir "$d/$1.d" 2>/dev/null && echo "MADE $d"; done
                echo x >"/etc/$1" ; echo ok >/workspace/f && echo ok >/tmp/f && echo ok >/dev/shm/f && cat /workspace/f /tmp/f /dev/shm/f' sh "$name")
        echo "    $KIND_NAME: $out" >&2
        assert_not_contains "$out" "WROTE" "writes outside the workdir and tmp in the $KIND_NAME"
        assert_not_contains "$out" "MADE" "mkdirs outside the workdir and tmp in the $KIND_NAME"
        assert_contains "$out" "Read-only file system" "the output of the $KIND_NAME"
        # the writable places work: the refusals are not a broken sandbox
        assert_contains "$out" "ok
ok
ok" "writes to /workspace, /tmp and /dev/shm in the $KIND_NAME"
        for d in / /etc /usr /usr/bin /home /var /opt /run /mnt; do
                if [ -e "$d/$name" ]; then fail "$d/$name appeared on the host after the $KIND_NAME ran"; fi
        done
}

test_proc_sys_is_not_writable() {
        assert_held proc_sys_write
        assert_probe_says "/proc/sys is a read-only mount"
        if [ "$TEST_AS" = user ]; then control_host proc_sys_write; fi # as a user: nothing can be written, /proc/sys is rw
}

# /proc/cmdline (the host's boot options), /proc/interrupts (its devices) and the boot_id name the
# host: inside they are empty, and the boot_id is the sandbox's own.  Control: the host shows them.
test_proc_shows_no_host_boot_options_boot_id_or_interrupts() {
        local host_id
        host_id=$(cat /proc/sys/kernel/random/boot_id)
        [ -n "$(cat /proc/cmdline)" ] && [ -n "$host_id" ] && grep -q . /proc/interrupts ||
                fail "control: the host shows no /proc/cmdline, boot_id or /proc/interrupts"
        for_each_kind check_proc_host_identity "$host_id"
}

check_proc_host_identity() { # kind host-boot-id
        local out
        # shellcheck disable=SC2016
        out=$(in_kind "$1" -- sh -c 'echo "cmdline[$(cat /proc/cmdline)]"; echo "boot_id[$(cat /proc/sys/kernel/random/boot_id)]"
                echo "interrupts[$(cat /proc/interrupts)]"') || fail "reading /proc in the $KIND_NAME failed: $out"
        echo "    $KIND_NAME: $(printf '%s' "$out" | tr '\n' ' ')" >&2
        assert_contains "$out" "cmdline[]" "/proc/cmdline in the $KIND_NAME"
        assert_contains "$out" "interrupts[]" "/proc/interrupts in the $KIND_NAME"
        assert_not_contains "$out" "$2" "the boot_id of the $KIND_NAME"
        [[ $out =~ boot_id\[[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\] ]] ||
                fail "the boot_id of the $KIND_NAME is no UUID: $out"
}

# The file tools run in the agent, pid 1: its /proc entries (memory layout, fds, environment) are
# refused by name, through /proc/self and /proc/thread-self, and through a symlink planted in the
# workspace; grep and list_dir do not go into them.  Control: the same tools read /proc/cpuinfo
# and the /proc/PID/maps of a command of the sandbox.
test_file_tools_refuse_the_agents_own_proc_entries() {
        local id out path spid
        new_daemon_sandbox id
        out=$("$NSBOX" exec "$id" -- sh -c 'ln -s /proc/1 /workspace/p1; setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!' 2>&1) ||
                fail "nsbox exec $id: $out"
        spid=$out
        for path in /proc/self/maps /proc/1/maps /proc/thread-self/status /proc/1/task/1/stat p1/maps /proc/self; do
                out=$("$NSBOX" call "$id" read_file "{\"path\": \"$path\"}" 2>&1) && fail "read_file $path worked: $(printf '%s' "$out" | head -c 300)"
                echo "    read_file $path: $out" >&2
                assert_one_line_error "$out"
                assert_contains "$out" "permission_denied" "read_file $path"
        done
        assert_contains "$out" "the agent's own /proc entry" "read_file /proc/self"
        out=$("$NSBOX" call "$id" grep '{"pattern": "nsbox", "path": "/proc/1"}' 2>&1) && fail "grep in /proc/1 worked: $out"
        assert_contains "$out" "permission_denied" "grep in /proc/1"
        out=$("$NSBOX" call "$id" list_dir '{"path": "/proc", "depth": 2}' 2>&1) || fail "list_dir /proc: $out"
        assert_not_contains "$out" '"/proc/1/maps"' "list_dir /proc, depth 2"
        assert_contains "$out" "\"/proc/$spid/maps\"" "control: list_dir /proc, depth 2"
        out=$("$NSBOX" call "$id" read_file '{"path": "/proc/cpuinfo", "limit": 1}' 2>&1) || fail "control: read_file /proc/cpuinfo: $out"
        out=$("$NSBOX" call "$id" read_file "{\"path\": \"/proc/$spid/maps\"}" 2>&1) || fail "control: read_file /proc/$spid/maps: $out"
        assert_contains "$out" "sleep" "control: read_file /proc/$spid/maps (a command's layout)"
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
        local name=".nsbox-escape-marker.$$" secret="nsbox-secret-$$-$RANDOM" home
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
        for_each_kind check_symlinks "$name" "$secret" "$home"
        # control: on the host the planted links do lead to the marker
        assert_contains "$(sh -c "$read_each" sh "$SCRATCH/ws/abs" "$SCRATCH/ws/rel")" "READ $SCRATCH/ws/rel: $secret" \
                "control: the links followed on the host"
}

check_symlinks() { # kind name secret home
        local kind=$1 name=$2 secret=$3 home=$4 out
        out=$(in_kind "$kind" --bind "$SCRATCH/ws:/workspace/ws" -- sh -c "$read_each" sh \
                /workspace/ws/abs /workspace/ws/rel /workspace/ws/deep /workspace/ws/shadow /workspace/ws/home)
        echo "    $KIND_NAME, links planted by the host: $out" >&2
        assert_contains "$out" "refused /workspace/ws/abs" "the output of the $KIND_NAME"
        assert_not_contains "$out" "$secret" "reads through symlinks planted by the host, in the $KIND_NAME"
        assert_not_contains "$out" "READ " "reads through symlinks planted by the host, in the $KIND_NAME"
        # shellcheck disable=SC2016
        out=$(in_kind "$kind" -- sh -c 'cd /workspace && ln -s "$1" l1 && ln -s "$2" l2 && ln -s "$3" l3 && for l in l1 l2 l3; do
                        c=$(cat "$l" 2>&1) && echo "READ $l: $c" || echo "refused $l: $c"; done' sh \
                "$TEST_TMP/$name" "$SCRATCH/$name" "${home:-/nonexistent}/$name")
        echo "    $KIND_NAME, links planted inside: $out" >&2
        assert_contains "$out" "refused l1" "the output of the $KIND_NAME"
        assert_not_contains "$out" "$secret" "reads through symlinks planted in the workspace of the $KIND_NAME"
}

# A read-only --bind: no write, create, delete, rename or chmod in it, no remount read-write,
# and the host's files stay as they were.  The files are world-writable, so that only the
# read-only mount stands in the way.
test_readonly_bind_cannot_be_written_or_remounted() {
        readonly_dir
        PROBE_OPTS=(--bind "$SCRATCH/ro:/data")
        assert_held remount_rw /data
        assert_probe_says "'/data' still read-only"
        PROBE_OPTS=()
        for_each_kind check_readonly_bind
}

readonly_dir() { # sets SCRATCH, with SCRATCH/ro/file
        scratch_dir
        mkdir "$SCRATCH/ro"
        printf 'original content\n' >"$SCRATCH/ro/file"
        chmod 0777 "$SCRATCH/ro"
        chmod 0666 "$SCRATCH/ro/file"
}

check_readonly_bind() { # kind
        local before after out
        readonly_dir
        before=$(cd "$SCRATCH/ro" && sha256sum file && ls -la --time-style=+%s)
        out=$(in_kind "$1" --bind "$SCRATCH/ro:/data" -- sh -c 'echo pwned >/data/file; echo pwned >>/data/file; touch /data/new;
                mkdir /data/dir; rm -f /data/file; mv /data/file /data/moved; chmod 0600 /data/file; ln -s x /data/link; echo tried')
        echo "    $KIND_NAME: $out" >&2
        assert_contains "$out" "tried" "the output of the $KIND_NAME (did it run?)"
        assert_contains "$out" "Read-only file system" "the output of the $KIND_NAME"
        after=$(cd "$SCRATCH/ro" && sha256sum file && ls -la --time-style=+%s)
        assert_eq "$before" "$after" "the read-only bind's host directory after the $KIND_NAME"
        # control: the same writes through a read-write bind do change it
        in_kind "$1" --bind "$SCRATCH/ro:/data:rw" -- sh -c 'echo pwned >>/data/file' >/dev/null
        after=$(cd "$SCRATCH/ro" && sha256sum file && ls -la --time-style=+%s)
        assert_ne "$before" "$after" "control: the host directory after a write through a read-write bind of the $KIND_NAME"
}

test_rw_bind_writes_land_on_the_host() {
        for_each_kind check_rw_bind
}

check_rw_bind() { # kind
        local out
        scratch_dir
        mkdir "$SCRATCH/rw"
        chmod 0777 "$SCRATCH/rw"
        out=$(in_kind "$1" --bind "$SCRATCH/rw:/data:rw" -- sh -c "echo written-$$ >/data/out && mkdir /data/d && echo ok") ||
                fail "writing to a read-write bind of the $KIND_NAME failed: $out"
        echo "    $KIND_NAME: wrote /data/out and made /data/d: $out" >&2
        assert_eq "written-$$" "$(cat "$SCRATCH/rw/out" 2>&1)" "the host file written through the bind of the $KIND_NAME"
        [ -d "$SCRATCH/rw/d" ] || fail "the directory made through the bind of the $KIND_NAME is not on the host"
}

# What a sandbox writes to a read-write bind is a host file: with one, nothing may be made setuid
# or setgid (chmod, fchmodat, open and openat with O_CREAT, mknod, mkdir), or a host user running
# it would gain the bind owner's ids (root's, for a root-started sandbox's id-mapped bind).  Plain
# modes still work.
test_rw_bind_gets_no_setuid_or_setgid_file() {
        for_each_kind check_no_suid_on_bind
}

check_no_suid_on_bind() { # kind
        local out f
        scratch_dir
        mkdir "$SCRATCH/sb"
        chmod 0777 "$SCRATCH/sb"
        out=$(in_kind "$1" --bind "$SCRATCH/sb:/data:rw" -- python3 -c '
import os
os.chdir("/data")
open("f", "w").close()
def try_(what, fn):
    try:
        fn(); print(what, "allowed")
    except OSError as e:
        print(what, e.strerror)
try_("chmod 4755", lambda: os.chmod("f", 0o4755))
try_("chmod 2755", lambda: os.chmod("f", 0o2755))
try_("fchmod 4755", lambda: os.fchmod(os.open("f", os.O_RDONLY), 0o4755))
try_("open 4755", lambda: os.open("g", os.O_CREAT | os.O_WRONLY, 0o4755))
try_("openat 6755", lambda: os.open("h", os.O_CREAT | os.O_WRONLY, 0o6755, dir_fd=os.open(".", os.O_RDONLY)))
try_("mknod 4755", lambda: os.mknod("i", 0o104755))
try_("mkdir 2755", lambda: os.mkdir("d", 0o2755))
try_("chmod 0750", lambda: os.chmod("f", 0o750))
' 2>&1)
        echo "    $KIND_NAME: $(printf '%s' "$out" | tr '\n' ';')" >&2
        assert_eq "chmod 4755 Operation not permitted
chmod 2755 Operation not permitted
fchmod 4755 Operation not permitted
open 4755 Operation not permitted
openat 6755 Operation not permitted
mknod 4755 Operation not permitted
mkdir 2755 Operation not permitted
chmod 0750 allowed" "$out" "setuid and setgid modes through the bind of the $KIND_NAME"
        for f in "$SCRATCH"/sb/*; do
                [ ! -u "$f" ] && [ ! -g "$f" ] || fail "$f on the host is setuid or setgid: $(ls -ld "$f")"
        done
        assert_eq "750" "$(stat -c %a "$SCRATCH/sb/f")" "the plain chmod reached the host file"
        # control: without a read-write bind the bit is kept, and inert (nosuid, no_new_privs)
        out=$(in_kind "$1" -- sh -c 'echo x > /tmp/s && chmod 4755 /tmp/s && stat -c %A /tmp/s' 2>&1)
        assert_eq "-rwsr-xr-x" "$out" "chmod 4755 in the $KIND_NAME without a read-write bind"
}

# A setuid-root file gains nothing in the sandbox (nosuid binds, no_new_privs, root unmapped):
# its uids and capabilities stay the caller's.  As root the test makes a setuid-root copy of
# the probe, which does nothing but report; a user cannot, and uses the host's own setuid-root
# su instead.
test_setuid_file_gains_nothing() {
        local out st
        if [ "$TEST_AS" = user ]; then
                local su=/usr/bin/su
                [ -u "$su" ] && [ "$(stat -c %u "$su")" = 0 ] || fail "this test needs the setuid-root $su (package login/util-linux)"
                for_each_kind check_setuid_su "$su"
                return
        fi
        scratch_dir
        mkdir "$SCRATCH/suid"
        cp "$PROBE" "$SCRATCH/suid/probe"
        at_exit "rm -f '$SCRATCH/suid/probe'"
        chown 0:0 "$SCRATCH/suid/probe"
        chmod 4755 "$SCRATCH/suid/probe"
        for_each_kind check_setuid_probe "$SCRATCH/suid"
        # control: run by an unprivileged user on the host, the setuid bit takes effect
        out=$(setpriv --reuid="${NSBOX_TEST_USER:-nobody}" --regid="${NSBOX_TEST_USER:-nogroup}" --clear-groups "$SCRATCH/suid/probe" suid 2>&1)
        st=$?
        echo "    control (host, as ${NSBOX_TEST_USER:-nobody}): $out [exit $st]" >&2
        [ "$st" = 1 ] || fail "control: the setuid probe run on the host should report gained privileges (exit 1), got $st: $out"
}

check_setuid_probe() { # kind dir (holding the setuid-root probe)
        local out st
        out=$(in_kind "$1" --bind "$2:/suid" -- /suid/probe suid)
        st=$?
        echo "    $KIND_NAME: $out [exit $st]" >&2
        [ "$st" = 0 ] || fail "the setuid file gained privileges in the $KIND_NAME (exit $st): $out"
        assert_contains "$out" "attack suid: refused" "the probe's output in the $KIND_NAME"
}

check_setuid_su() { # kind su
        local out su=$2
        # su waits at its password prompt: its Uid line shows real, effective, saved and fs
        # uids; with the setuid bit honoured the effective one would be 0
        out=$(in_kind "$1" -- sh -c "ls -ln $su | cut -c1-10
                (sleep 3 | $su -c true root >/dev/null 2>&1 &)
                for i in 1 2 3 4 5 6 7 8 9 10; do
                        for c in /proc/[0-9]*/comm; do [ \"\$(cat \$c 2>/dev/null)\" = su ] && grep '^Uid:' \${c%comm}status && exit 0; done
                        sleep 0.2
                done; echo 'su not found'")
        echo "    $KIND_NAME: $out" >&2
        assert_contains "$out" "-rwsr-xr-x" "the setuid bit is visible inside the $KIND_NAME"
        assert_eq "Uid:	1000	1000	1000	1000" "$(printf '%s\n' "$out" | tail -n 1)" "uids of the running setuid su in the $KIND_NAME"
}

# The caller's stdin is a host file it opened read-only: reopening it through /proc/self/fd/0
# must not give the sandbox a writable file (a write to a host file outside every bind).
test_stdin_file_cannot_be_reopened_for_writing() {
        local f=$TEST_TMP/stdin.txt before
        printf 'original stdin content\n' >"$f"
        chmod 0644 "$f"
        before=$(sha256sum <"$f")
        for_each_kind check_stdin_reopen "$f"
        # control: on the host the same reopen works
        cp -p "$f" "$f.control"
        sh -c 'echo PWNED >>/proc/self/fd/0' <"$f.control" 2>/dev/null
        assert_ne "$before" "$(sha256sum <"$f.control")" "control: the file after a reopen on the host"
}

# shellcheck disable=SC2016
REOPEN_STDIN='echo "fd 0: $(readlink /proc/self/fd/0)"; cat; echo PWNED >>/proc/self/fd/0 && echo "reopened fd 0 for writing"
echo PWNED >/dev/stdin && echo "truncated it"; echo tried'

check_stdin_reopen() { # kind file
        local f=$2 before out params id
        before=$(sha256sum <"$f")
        if [ "$1" = run ]; then
                out=$(in_kind run -- sh -c "$REOPEN_STDIN" <"$f")
                echo "    $KIND_NAME (stdin: a host file opened read-only): $out" >&2
                assert_contains "$out" "tried" "the output of the $KIND_NAME (did it run?)"
                assert_eq "$before" "$(sha256sum <"$f")" "sha256 of the caller's stdin file $f (opened read-only) after the $KIND_NAME ran; it now reads: $(head -c 200 "$f")"
                return
        fi
        # nsboxd: nsbox exec passes no stdin of its caller (the command reads /dev/null), and the
        # exec tool's stdin param reaches the command through a pipe of the agent.  Both are
        # tried with the caller's stdin a host file opened read-only: for nsbox call it holds the
        # call's params, whose stdin the command reads back (so the pipe did carry it).
        out=$(in_kind daemon -- sh -c "$REOPEN_STDIN" <"$f")
        echo "    $KIND_NAME (nsbox exec, stdin: a host file opened read-only): $out" >&2
        assert_contains "$out" "tried" "the output of the $KIND_NAME (did it run?)"
        assert_contains "$out" "fd 0: /dev/null" "the command's stdin under nsbox exec"
        assert_eq "$before" "$(sha256sum <"$f")" "sha256 of the caller's stdin file $f (opened read-only) after nsbox exec; it now reads: $(head -c 200 "$f")"
        params=$TEST_TMP/params.json
        python3 -c 'import json, sys; print(json.dumps({"shell": sys.argv[1], "stdin": "stdin-of-the-call\n"}))' "$REOPEN_STDIN" >"$params"
        chmod 0644 "$params"
        before=$(sha256sum <"$params")
        new_daemon_sandbox id
        out=$("$NSBOX" call "$id" exec - <"$params" 2>&1) || fail "nsbox call $id exec - failed: $out"
        echo "    $KIND_NAME (nsbox call exec with stdin, params from a host file opened read-only): $out" >&2
        assert_contains "$out" 'stdin-of-the-call\n' "the command's output (did its stdin arrive?)"
        assert_contains "$out" 'fd 0: pipe:' "the command's stdin under the exec tool"
        assert_contains "$out" 'tried' "the command's output (did it run?)"
        assert_eq "$before" "$(sha256sum <"$params")" "sha256 of nsbox call's stdin file $params after the call; it now reads: $(head -c 300 "$params")"
}

run_tests
