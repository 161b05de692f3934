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
        assert_contains "$PROBE_OUT" "io_uring_setup(1): Function not implemented"
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
        assert_contains "$PROBE_OUT" "finit_module(-1):"
}

# ---- mounts and namespaces --------------------------------------------------------------------

test_mount_is_refused() {
        assert_held mount
        control_userns --mount -- mount "$TEST_TMP"
}

test_remount_rw_is_refused() {
        assert_held remount_rw
        assert_contains "$PROBE_OUT" "'/usr' still read-only"
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
        assert_contains "$PROBE_OUT" "/proc/1/ns/mnt"
        control_userns --mount -- setns
}

test_nested_user_namespace_is_refused() {
        assert_held unshare_user
        control_host unshare_user # harmless: a forked child unshares and exits
}

test_clone_with_namespace_flags_is_refused() {
        assert_held clone_newns
        assert_contains "$PROBE_OUT" "clone(CLONE_NEWUSER | high 32 bits set): Operation not permitted"
        control_host clone_newns # harmless: the clone()d children exit at once
}

test_clone3_is_enosys() {
        assert_held clone3
        control_host clone3 # harmless: the children exit at once
}

test_open_tree_is_enosys() {
        assert_held open_tree
        control_host open_tree # harmless: a detached tree or a path fd, closed at once
}

test_fsopen_is_enosys() {
        assert_held fsopen
        control_host fsopen # harmless: a file system context never mounted, invalid fds
}

test_move_mount_is_enosys() {
        assert_held move_mount
        control_host move_mount # harmless: invalid fds, nothing is moved
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
        assert_contains "$PROBE_OUT" "AF_PACKET raw:"
        assert_contains "$PROBE_OUT" "NETLINK_AUDIT:"
        control_host socket_families # harmless: sockets created and closed (uevent/vsock work unprivileged)
}

test_allowed_socket_families_still_work() {
        probe_in_sandbox socket_allowed
        local st=$?
        [ "$st" = 0 ] || fail "AF_UNIX, AF_INET, AF_INET6 or NETLINK_ROUTE does not work in the sandbox (probe exit $st)"
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
        assert_contains "$PROBE_OUT" "personality query: 0x"
        control_host personality # harmless: the probe's own personality, restored
}

# ---- credentials ------------------------------------------------------------------------------

test_setuid_root_and_capset_are_refused() {
        assert_held setuid_root
        # harmless: the probe's own credentials
        if [ "$TEST_AS" = root ]; then control_host setuid_root; else control_userns -- setuid_root; fi
}

test_no_capabilities_no_new_privs_seccomp() {
        assert_held caps
        control_host caps # only reads /proc/self/status
}

test_chown_is_refused() {
        assert_held chown
        # harmless: a file the probe creates in TEST_TMP and removes
        if [ "$TEST_AS" = root ]; then control_host chown "$TEST_TMP"; else control_userns -- chown "$TEST_TMP"; fi
}

test_setgroups_is_refused() {
        assert_held setgroups
        if [ "$TEST_AS" = root ]; then control_host setgroups; fi # harmless: the probe's own groups
}

run_tests
