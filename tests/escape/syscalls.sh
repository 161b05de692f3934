#!/usr/bin/env bash
# Escape tier, system calls: the kernel's attack surface, namespaces, the mount API, the 32-bit
# ABIs, personality, credentials and socket families, each attacked from inside a sandbox by the
# probe (probe.c), which must report that the attack failed.  See escape.bash for the controls
# that show each assertion can fire.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

sysctl_value() { cat "/proc/sys/$1" 2>/dev/null || echo "${2:-}"; }

# ---- kernel attack surface --------------------------------------------------------------------

test_keyctl_is_refused() {
        assert_held keyctl
        control_host keyctl # harmless: looks up the caller's own keyrings
}

test_add_key_is_refused() {
        assert_held add_key
        control_host add_key # harmless: a key in the probe's own process keyring, gone with it
}

test_bpf_is_refused() {
        assert_held bpf
        # harmless (a map and a program that are never attached); unprivileged bpf is often off
        if [ "$TEST_AS" = root ] || [ "$(sysctl_value kernel/unprivileged_bpf_disabled 1)" = 0 ]; then
                control_host bpf
        fi
}

test_perf_event_open_is_refused() {
        assert_held perf_event_open
        # harmless: a software clock counting the probe itself, user space only
        if [ "$TEST_AS" = root ] || [ "$(sysctl_value kernel/perf_event_paranoid 3)" -le 2 ]; then
                control_host perf_event_open
        fi
}

test_userfaultfd_is_refused() {
        assert_held userfaultfd
        control_host userfaultfd # harmless: an fd that registers nothing (user-mode-only works unprivileged)
}

test_io_uring_setup_is_enosys() {
        assert_held io_uring_setup
        assert_probe_says "io_uring_setup(1): Function not implemented"
        if [ "$(sysctl_value kernel/io_uring_disabled 0)" != 2 ]; then
                control_host io_uring_setup # harmless: a one-entry ring, closed at once
        fi
}

# No control for kexec and modules: never tried on the host as root, and as a user the kernel
# refuses them anyway.  The probe uses arguments the kernel rejects right after its permission
# check, so only EPERM (or ENOSYS: not in this kernel) counts as refused.
test_kexec_load_is_refused() {
        assert_held kexec_load
}

test_module_loading_is_refused() {
        assert_held init_module
        assert_probe_says "finit_module(-1):"
}

# ---- mounts and namespaces --------------------------------------------------------------------

test_mount_is_refused() {
        assert_held mount
        control_userns --mount -- mount "$TEST_TMP"
}

test_remount_rw_is_refused() {
        assert_held_unprivileged remount_rw
        assert_probe_says "'/usr' still read-only"
        # a root policy's / is writable by design: its read-only binds stay so
        assert_root_probe_says remount_rw -- "remount '/usr' rw (bind): Operation not permitted" "'/usr' still read-only"
        # as a user the remounts fail on the host too, and the probe still sees / writable there
        if [ "$TEST_AS" = user ]; then control_host remount_rw; fi
}

test_umount_is_refused() {
        assert_held umount
        control_userns --mount --pid --fork --mount-proc -- umount
}

# No control: pivot_root needs a mount point as the new root, which only the sandbox has.
test_pivot_root_is_refused() {
        assert_held pivot_root
}

test_chroot_is_refused() {
        assert_held chroot
        control_userns --mount -- chroot "$TEST_TMP"
}

test_setns_is_refused() {
        assert_held setns
        assert_probe_says "/proc/1/ns/mnt"
        control_userns --mount -- setns
}

# Nested user namespaces, where the sandbox's user would be root with every capability again:
# unshare(2), clone(2) with CLONE_NEW* flags (also with high bits set in the flags) and clone3,
# from the probe and from util-linux's unshare(1).
test_nested_user_namespaces_via_unshare_and_clone_fail() {
        local out kind id
        assert_held unshare_user
        assert_probe_says "unshare(CLONE_NEWUSER): Operation not permitted"
        assert_held clone_newns
        assert_probe_says "clone(CLONE_NEWUSER | high 32 bits set): Operation not permitted"
        # shellcheck disable=SC2016
        local cmd='unshare --user --map-root-user id -u 2>&1; echo "unshare -Ur: $?"; unshare --user --map-root-user --mount --pid --fork true 2>&1; echo "unshare -Urmpf: $?"'
        for kind in run daemon; do
                if [ $kind = run ]; then
                        out=$("$NSBOX" run -- sh -c "$cmd" 2>&1)
                else
                        new_daemon_sandbox id
                        out=$("$NSBOX" exec "$id" -- sh -c "$cmd" 2>&1)
                fi
                echo "    $kind sandbox: unshare(1): $out" >&2
                assert_contains "$out" "unshare -Ur: 1" "unshare(1) in the $kind sandbox"
                assert_contains "$out" "unshare -Urmpf: 1" "unshare(1) in the $kind sandbox"
                assert_contains "$out" "Operation not permitted" "unshare(1) in the $kind sandbox"
                printf '%s\n' "$out" | grep -qx 0 && fail "uid 0 in a nested user namespace of the $kind sandbox: $out"
        done
        control_host unshare_user # harmless: a forked child unshares and exits
        control_host clone_newns  # harmless: the clone()d children exit at once
}

# flatpak CVE-2021-41133: the new mount API (open_tree, move_mount, fsopen, fsconfig, fsmount,
# fspick, mount_setattr) and clone3 were missing from a deny list, and let the sandbox mount.
# The filter answers ENOSYS (so libcs fall back to the filtered calls); the host's mount table
# is unchanged.
test_cve_2021_41133_new_mount_api_and_clone3_fail() {
        local before attack
        before=$(grep -c . /proc/self/mountinfo)
        for attack in open_tree move_mount fsopen clone3; do
                assert_held "$attack"
        done
        assert_eq "$before" "$(grep -c . /proc/self/mountinfo)" "the host's mount count"
        # harmless on the host: a detached tree or a context never mounted, invalid fds, children
        # that exit at once
        for attack in open_tree move_mount fsopen clone3; do
                control_host "$attack"
        done
}

test_open_by_handle_at_is_refused() {
        assert_held open_by_handle_at
        # harmless: opens the host's root directory read-only; needs CAP_DAC_READ_SEARCH
        if [ "$TEST_AS" = root ]; then control_host open_by_handle_at; fi
}

test_name_to_handle_at_is_refused() {
        assert_held name_to_handle_at
        control_host name_to_handle_at # harmless: only reads a handle
}

test_tioclinux_is_refused() {
        assert_held tioclinux
        control_host tioclinux # harmless: TIOCL_GETSHIFTSTATE on non-console fds
}

# ---- sockets ----------------------------------------------------------------------------------

test_socket_families_are_refused() {
        assert_held socket_families
        assert_probe_says "AF_PACKET raw:"
        assert_probe_says "NETLINK_AUDIT:"
        control_host socket_families # harmless: sockets created and closed (uevent/vsock work unprivileged)
}

# AF_PACKET, AF_VSOCK and AF_ALG each by name.  The probe also asks for an invalid socket type,
# which the kernel refuses with EINVAL before it looks at the family: the control (the probe on
# the host) always sees that reach the kernel, even when this kernel lacks the family itself.
test_af_packet_socket_is_refused() {
        assert_held af_packet
        assert_probe_says "socket(AF_PACKET, SOCK_RAW, ETH_P_ALL): Address family not supported by protocol"
        control_host af_packet # harmless: sockets created and closed, nothing bound
}

test_af_vsock_socket_is_refused() {
        assert_held af_vsock
        assert_probe_says "socket(AF_VSOCK, SOCK_STREAM): Address family not supported by protocol"
        control_host af_vsock # harmless: a connect to the host's cid on port 22, closed at once
}

test_af_alg_socket_is_refused() {
        assert_held af_alg
        assert_probe_says "socket(AF_ALG, SOCK_SEQPACKET): Address family not supported by protocol"
        control_host af_alg # harmless: a hash socket bound, closed
}

test_allowed_socket_families_still_work() {
        local kind st
        for kind in sandbox daemon; do
                "probe_in_$kind" socket_allowed >/dev/null
                st=$?
                [ "$st" = 0 ] || fail "AF_UNIX, AF_INET, AF_INET6 or NETLINK_ROUTE does not work in the $kind sandbox (probe exit $st)"
        done
}

# ---- other ABIs, personality ----------------------------------------------------------------

# A kernel without the ABI answers ENOSYS itself: then the control cannot show anything.
control_foreign_abi() { # attack
        local out st
        out=$(cd "$TEST_TMP" && "$PROBE" "$1" </dev/null 2>&1)
        st=$?
        printf '    control (host, no sandbox): %s [exit %s]\n' "$out" "$st" >&2
        if [ "$st" = 0 ]; then
                assert_contains "$out" "Function not implemented" "control"
                echo "    control: this kernel has no such ABI, the control shows nothing" >&2
        else
                [ "$st" = 1 ] || fail "control: probe exit $st: $out"
        fi
}

test_int80_32bit_syscalls_are_killed() {
        assert_held int80
        control_foreign_abi int80 # harmless: getpid and a keyring lookup, in a child
}

test_x32_syscalls_are_killed() {
        assert_held x32
        control_foreign_abi x32 # harmless: getpid and a keyring lookup, in a child
}

test_personality_flags_are_refused() {
        assert_held personality
        assert_probe_says "personality query: 0x"
        control_host personality # harmless: the probe's own personality, restored
}

# ---- credentials ------------------------------------------------------------------------------

test_setuid_root_and_capset_are_refused() {
        assert_held_unprivileged setuid_root
        # root of its own namespace already: no capability beyond a container's can be gained
        assert_root_probe_says setuid_root -- "capset(+CAP_SYS_ADMIN): Operation not permitted"
        # harmless: the probe's own credentials
        if [ "$TEST_AS" = root ]; then control_host setuid_root; else control_userns -- setuid_root; fi
}

test_no_capabilities_no_new_privs_seccomp() {
        assert_held_unprivileged caps
        # a root policy: a container's set (Docker's default, 0xa80425fb) and nothing more
        assert_root_probe_says caps -- "CapBnd=00000000a80425fb (expected 0)" "CapEff=00000000a80425fb" "NoNewPrivs=1; Seccomp=2"
        control_host caps # only reads /proc/self/status
}

test_chown_is_refused() {
        assert_held_unprivileged chown # a root policy's user chowns in its own namespace
        # harmless: a file the probe creates in TEST_TMP and removes
        if [ "$TEST_AS" = root ]; then control_host chown "$TEST_TMP"; else control_userns -- chown "$TEST_TMP"; fi
}

test_setgroups_is_refused() {
        assert_held_unprivileged setgroups # as a root policy's user may
        if [ "$TEST_AS" = root ]; then control_host setgroups; fi # harmless: the probe's own groups
}

run_tests
