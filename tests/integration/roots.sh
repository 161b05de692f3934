#!/usr/bin/env bash
# Sandbox roots as users expect them (issue 24): binds of the caller's own tree show its files as
# the sandbox user's and writes land owned by the caller, root included (id-mapped binds);
# `python` and `pip install` in the default host view; a writable root by policy.
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
MY_DAEMONS=""

# start_daemon: an nsboxd of this test on a socket of its own (stopped by cleanup).
start_daemon() {
        local i dpid
        NSBOX_STORE="$TEST_TMP/store" "$NSBOXD" --socket "$TEST_TMP/d.sock" >> "$TEST_TMP/dlog" 2>&1 < /dev/null &
        dpid=$!
        MY_DAEMONS="$MY_DAEMONS $dpid"
        export NSBOX_SOCKET="$TEST_TMP/d.sock"
        for i in $(seq 300); do
                [ "$(daemon_pid)" = "$dpid" ] && return 0
                pid_alive "$dpid" || fail "nsboxd exited at start: $(tail -n 5 "$TEST_TMP/dlog")"
                sleep 0.1
        done
        fail "nsboxd did not answer ping within 30 s"
}

# A small git project made by the caller (root: owned by root:root), fresh for each test.
make_project() { # DIR
        rm -rf "$1"
        mkdir -p "$1" && (cd "$1" && git init -q . && echo hello > a.txt && git add a.txt &&
                git -c user.name=t -c user.email=t@t commit -qm init) || fail "git project in $1"
}

test_callers_tree_is_the_sandbox_users_and_git_works() {
        make_project "$TEST_TMP/proj"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/proj:/workspace/project:rw" -- sh -c \
                'cd project && stat -c "%U:%G" a.txt . && git status --porcelain && echo edit >> a.txt && echo new > new.txt && git status --porcelain'
        assert_eq "user:user
user:user
 M a.txt
?? new.txt" "$OUT" "owners inside, git status before and after"
        assert_eq "hello
edit" "$(cat "$TEST_TMP/proj/a.txt")" "edited file on the host"
        assert_eq "$(id -u):$(id -g)" "$(stat -c %u:%g "$TEST_TMP/proj/new.txt")" "owner of the new file on the host"
        assert_eq "$(id -u):$(id -g)" "$(stat -c %u:%g "$TEST_TMP/proj/a.txt")" "owner of the edited file on the host"
}

test_file_tools_edit_and_create_in_the_callers_tree() {
        make_project "$TEST_TMP/proj"
        trap cleanup EXIT
        start_daemon
        local id
        id=$("$NSBOX" create --bind "$TEST_TMP/proj:/workspace/project:rw" --workdir /workspace/project) || fail "create: $id"
        assert_status 0 "$NSBOX" call "$id" edit_file '{"path": "a.txt", "old_string": "hello", "new_string": "edited"}'
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "b.txt", "content": "b\n"}'
        assert_status 0 "$NSBOX" exec "$id" -- git status --porcelain
        local status=$OUT
        "$NSBOX" rm -f "$id" > /dev/null
        assert_eq " M a.txt
?? b.txt" "$status" "git status after the file tools"
        assert_eq edited "$(cat "$TEST_TMP/proj/a.txt")"
        assert_eq "$(id -u):$(id -g)" "$(stat -c %u:%g "$TEST_TMP/proj/b.txt")" "owner of the file the tool wrote"
}

test_other_host_users_files_stay_unmapped_and_unwritable() {
        if [ "$TEST_AS" != root ]; then # a user binds root's files: unmapped for a user too
                mkdir "$TEST_TMP/etc" && cp /etc/hostname "$TEST_TMP/etc/" # ours; /etc is root's
                assert_status 0 "$NSBOX" run --bind /etc:/workspace/etc:rw -- sh -c \
                        'stat -c "%u:%g" etc/hostname etc; (echo x >> etc/hostname) 2>/dev/null || echo refused; (touch etc/n) 2>/dev/null || echo refused'
                assert_eq "65534:65534
65534:65534
refused
refused" "$OUT" "root's file and directory, bound read-write by a user"
                assert_eq "$(cat "$TEST_TMP/etc/hostname")" "$(cat /etc/hostname)" "/etc/hostname on the host"
                return
        fi
        make_project "$TEST_TMP/proj"
        echo theirs > "$TEST_TMP/proj/theirs.txt"
        chown 1234:1234 "$TEST_TMP/proj/theirs.txt" && chmod 0666 "$TEST_TMP/proj/theirs.txt"
        mkdir "$TEST_TMP/proj/theirdir" && chown 65534:65534 "$TEST_TMP/proj/theirdir" && chmod 0777 "$TEST_TMP/proj/theirdir"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/proj:/workspace/project:rw" -- sh -c \
                'cd project; stat -c "%u:%g" theirs.txt theirdir; (echo x >> theirs.txt) 2>/dev/null || echo refused; (echo y > theirdir/f) 2>/dev/null || echo refused; (rm -f theirs.txt) 2>/dev/null; test -e theirs.txt && echo kept'
        assert_eq "65534:65534
65534:65534
refused
refused" "$(printf '%s\n' "$OUT" | head -n 4)" "another user's file and directory, mode 0666 and 0777"
        assert_eq theirs "$(cat "$TEST_TMP/proj/theirs.txt")" "the other user's file on the host"
        assert_eq "" "$(ls "$TEST_TMP/proj/theirdir")" "the other user's directory on the host"
}

test_readonly_bind_stays_readonly() {
        make_project "$TEST_TMP/proj"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/proj:/data:ro" -- sh -c \
                'stat -c %U /data/a.txt; (echo x >> /data/a.txt) 2>/dev/null || echo refused; (touch /data/n) 2>/dev/null || echo refused'
        assert_eq "user
refused
refused" "$OUT"
        assert_eq hello "$(cat "$TEST_TMP/proj/a.txt")"
        [ ! -e "$TEST_TMP/proj/n" ] || fail "a file appeared through the read-only bind"
}

test_bind_of_a_filesystem_that_cannot_be_idmapped_fails_with_one_line() {
        if [ "$TEST_AS" != root ]; then # a user's binds are not id-mapped: sysfs binds as it is
                assert_status 0 "$NSBOX" run --bind /sys/kernel:/x:ro -- sh -c 'test -e /x/uevent_seqnum && echo sysfs'
                assert_eq sysfs "$OUT" "a user's bind of sysfs"
                return
        fi
        # sysfs cannot be id-mapped
        local before; before=$(grep -c . /proc/self/mountinfo)
        assert_status 125 "$NSBOX" run --bind /sys/kernel:/x:ro -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "bind '/sys/kernel'"
        assert_contains "$OUT" "cannot be id-mapped"
        assert_eq "$before" "$(grep -c . /proc/self/mountinfo)" "host mounts after the failed start"
}

test_noidmap_bind_shows_the_files_as_they_are() {
        if [ "$TEST_AS" != root ]; then # a user's binds are not id-mapped: noidmap changes nothing
                make_project "$TEST_TMP/proj"
                assert_status 0 "$NSBOX" run --bind "$TEST_TMP/proj:/p:rw,noidmap" -- sh -c 'stat -c %U /p/a.txt; touch /p/n && echo made'
                assert_eq "user
made" "$OUT" "a user's noidmap bind of its own tree"
                [ -O "$TEST_TMP/proj/n" ] || fail "the file made through the bind is not the user's"
                return
        fi
        make_project "$TEST_TMP/proj"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/proj:/p:rw,noidmap" --bind /sys/kernel:/k:ro,noidmap -- sh -c \
                'stat -c %U /p/a.txt; (touch /p/n) 2>/dev/null || echo refused; test -e /k/uevent_seqnum && echo sysfs'
        assert_eq "nobody
refused
sysfs" "$OUT" "a noidmap bind of root's tree (as before id-mapping), and of sysfs"
        [ ! -e "$TEST_TMP/proj/n" ] || fail "a file appeared through the noidmap bind"
}

# ---- python and pip in the host view ------------------------------------------------------

need_host_python() {
        [ -x /usr/bin/python3 ] || skip "no /usr/bin/python3 on this host"
        /usr/bin/python3 -c 'import pip' 2> /dev/null || skip "no pip module for /usr/bin/python3"
}

# A wheel of package nsboxdemo (VALUE = 42), written by hand: no network, no build tools.
make_wheel() { # DIR
        mkdir -p "$1" && /usr/bin/python3 - "$1" << 'PY' || fail "wheel"
import sys, zipfile
name = "nsboxdemo-1.0.dist-info"
with zipfile.ZipFile(sys.argv[1] + "/nsboxdemo-1.0-py3-none-any.whl", "w") as z:
    z.writestr("nsboxdemo/__init__.py", "VALUE = 42\n")
    z.writestr(name + "/METADATA", "Metadata-Version: 2.1\nName: nsboxdemo\nVersion: 1.0\n")
    z.writestr(name + "/WHEEL", "Wheel-Version: 1.0\nGenerator: nsbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(name + "/RECORD", "".join(f"{p},,\n" for p in ("nsboxdemo/__init__.py", name + "/METADATA", name + "/WHEEL", name + "/RECORD")))
PY
        chmod -R a+rX "$1"
}

test_python_command_exists_in_the_default_sandbox() {
        need_host_python
        assert_status 0 "$NSBOX" run -- python -c 'print(1)'
        assert_eq 1 "$OUT" "python -c 'print(1)'"
        assert_status 0 "$NSBOX" run -- sh -c 'for c in python python3 pip; do command -v $c; done; python -c "import sys; print(sys.prefix != sys.base_prefix)"'
        assert_eq "/opt/venv/bin/python
/opt/venv/bin/python3
/opt/venv/bin/pip
True" "$OUT" "the commands and the environment they run in"
}

test_pip_install_of_a_local_wheel_works_and_leaves_the_host_alone() {
        need_host_python
        make_wheel "$TEST_TMP/wheels"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/wheels:/wheels" -- sh -c \
                'pip install -q --no-index /wheels/nsboxdemo-1.0-py3-none-any.whl && python -c "import nsboxdemo; print(nsboxdemo.VALUE)" && python3 -c "import nsboxdemo; print(nsboxdemo.VALUE)" && /usr/bin/python3 -c "import nsboxdemo; print(nsboxdemo.VALUE)"; ls -A /workspace'
        assert_eq "42
42
42" "$OUT" "import after pip install (python, python3, /usr/bin/python3), and an empty /workspace"
        assert_status 0 "$NSBOX" run --bind "$TEST_TMP/wheels:/wheels" -- sh -c \
                'python3 -m pip install -q --user --no-index /wheels/nsboxdemo-1.0-py3-none-any.whl && python3 -c "import nsboxdemo; print(nsboxdemo.__file__)"; ls -A /workspace'
        assert_eq "/opt/venv/lib/python3.$(/usr/bin/python3 -c 'import sys; print(sys.version_info[1])')/site-packages/nsboxdemo/__init__.py" \
                "$OUT" "pip install --user lands in the sandbox's environment, not in /workspace"
        /usr/bin/python3 -c 'import nsboxdemo' 2> /dev/null && fail "nsboxdemo is importable on the host"
        assert_status 0 "$NSBOX" run -- python -c 'import importlib.util; print(importlib.util.find_spec("nsboxdemo"))'
        assert_eq None "$OUT" "nsboxdemo in a new sandbox"
}

test_system_python_stays_externally_managed() {
        need_host_python
        [ -e "/usr/lib/python3.$(/usr/bin/python3 -c 'import sys; print(sys.version_info[1])')/EXTERNALLY-MANAGED" ] ||
                skip "the host's python3 is not marked externally managed"
        make_wheel "$TEST_TMP/wheels"
        assert_status 1 "$NSBOX" run --bind "$TEST_TMP/wheels:/wheels" -- /usr/bin/python3 -m pip install --no-index /wheels/nsboxdemo-1.0-py3-none-any.whl
        assert_contains "$OUT" "externally-managed-environment"
}

test_python_venv_false_in_the_policy_leaves_it_out() {
        need_host_python
        printf '{"root": {"python_venv": false}}\n' > "$TEST_TMP/novenv.json"
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/novenv.json" -- sh -c 'echo "$PATH"; test -e /opt/venv && echo venv; echo "${VIRTUAL_ENV:-none}"'
        assert_eq "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
none" "$OUT"
}

test_run_code_libraries_install_from_a_local_wheel() {
        need_host_python
        make_wheel "$TEST_TMP/wheels"
        trap cleanup EXIT
        start_daemon
        OUT=$(PYTHONPATH="$NSBOX_SRC/clients/python" PYTHONDONTWRITEBYTECODE=1 timeout 300 /usr/bin/python3 - "$TEST_TMP/wheels/nsboxdemo-1.0-py3-none-any.whl" 2>&1 << 'PY'
import sys
from nsbox import Sandbox
with open(sys.argv[1], "rb") as f:
    wheel = f.read()
with Sandbox.create() as sb:
    sb.files.write("/tmp/nsboxdemo-1.0-py3-none-any.whl", wheel)
    r = sb.run_code("python", "import nsboxdemo; print(nsboxdemo.VALUE)", libraries=["/tmp/nsboxdemo-1.0-py3-none-any.whl"])
    print(r.exit_code, r.stdout.strip())
PY
)
        assert_eq "0 42" "$(printf '%s\n' "$OUT" | tail -n 1)" "run_code with libraries: $OUT"
}

# ---- a writable root (policy root.readonly: false) ----------------------------------------

writable_policy() { printf '{"root": {"readonly": false}}\n' > "$TEST_TMP/writable.json"; }

test_writable_root_takes_writes_anywhere_the_user_may() {
        writable_policy
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/writable.json" -- sh -c \
                'mkdir -p /large_tool_results /conversation_history /home/user && echo x > /large_tool_results/x && echo a > /home/user/a.txt && cat /large_tool_results/x /home/user/a.txt && stat -c %U /home/user/a.txt; (echo z > /usr/z) 2>/dev/null || echo usr-refused'
        assert_eq "x
a
user
usr-refused" "$OUT" "writes to /large_tool_results and /home/user; the host's /usr stays read-only"
        [ ! -e /large_tool_results ] || fail "/large_tool_results appeared on the host"
        [ ! -e /conversation_history ] || fail "/conversation_history appeared on the host"
}

test_writable_root_vanishes_with_the_sandbox() {
        writable_policy
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/writable.json" -- sh -c 'mkdir -p /home/user && echo a > /home/user/a.txt'
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/writable.json" -- sh -c 'ls -A /home; ls -d /large_tool_results 2>/dev/null; echo end'
        assert_eq end "$OUT" "a new sandbox's /home and root"
}

test_writable_root_counts_against_the_disk_limit() {
        writable_policy
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/writable.json" --disk 16M -- sh -c \
                'mkdir /big; dd if=/dev/zero of=/big/f bs=1M count=32 2>/dev/null || echo full; du -sm /big | cut -f1'
        assert_contains "$OUT" "full" "a 32 MiB write into a 16 MiB disk"
        [ "$(printf '%s\n' "$OUT" | tail -n 1)" -le 16 ] || fail "more than 16 MiB written: $OUT"
}

test_default_root_stays_readonly() {
        assert_status 0 "$NSBOX" run -- sh -c '(mkdir /large_tool_results) 2>/dev/null || echo refused; (mkdir /home/user) 2>/dev/null || echo refused'
        assert_eq "refused
refused" "$OUT"
}

# ---- a root user (policy user.uid 0; the shipped policy "root") ----------------------------

test_root_policy_is_root_of_its_namespace_with_a_containers_capabilities() {
        assert_status 0 "$NSBOX" run --policy root -- sh -c \
                'id -u; id -un; grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/self/status | tr -s "\t" " "; echo $HOME'
        assert_eq "0
root
CapEff: 00000000a80425fb
CapBnd: 00000000a80425fb
NoNewPrivs: 1
Seccomp: 2
/root" "$OUT" "uid, capabilities (Docker's default set), no_new_privs, seccomp, home"
        # what the capabilities do not give: mounts, namespaces, chroot, raw sockets, the host's /usr
        assert_status 0 "$NSBOX" run --policy root -- sh -c \
                'mount -t tmpfs t /mnt 2>/dev/null || echo mount-refused; unshare -U true 2>/dev/null || echo unshare-refused
                 mkdir /c; chroot /c /x 2>/dev/null || echo chroot-refused; (echo z > /usr/z) 2>/dev/null || echo usr-readonly
                 python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)" 2>/dev/null || echo raw-refused'
        assert_eq "mount-refused
unshare-refused
chroot-refused
usr-readonly
raw-refused" "$OUT" "what a root policy's user is refused"
}

test_root_policy_writes_its_root_and_leaves_the_host_alone() {
        local m=".nsbox-rootuser.$$"
        assert_status 0 "$NSBOX" run --policy root -- sh -c \
                "echo a > /etc/$m && mkdir -p /large_tool_results /home/user && echo b > /large_tool_results/x && echo c > /home/user/a.txt && touch /root/r && stat -c %U:%G /etc/$m /root/r"
        assert_eq "root:root
root:root" "$OUT" "owners of what root wrote"
        [ ! -e "/etc/$m" ] && [ ! -e /large_tool_results ] || fail "a root-policy sandbox's writes reached the host"
}

test_root_policy_changes_owners_within_its_id_range() {
        if [ "$TEST_AS" = root ]; then
                # a root caller's sandbox has 65536 ids: root may hand files to them and become them
                assert_status 0 "$NSBOX" run --policy root -- sh -c \
                        'touch /tmp/f && chown 42:42 /tmp/f && stat -c %u:%g /tmp/f && setpriv --reuid=42 --regid=42 --clear-groups id -u'
                assert_eq "42:42
42" "$OUT" "chown and setuid to another id of the sandbox"
        else
                # a user's sandbox maps that user alone: other ids do not exist there
                assert_status 0 "$NSBOX" run --policy root -- sh -c 'touch /tmp/f && chown 42 /tmp/f 2>&1; stat -c %u /tmp/f'
                assert_contains "$OUT" "Invalid argument" "chown to an id the user's sandbox does not map"
                assert_eq 0 "$(printf '%s\n' "$OUT" | tail -n 1)" "the file's owner after the refused chown"
        fi
}

test_root_policy_writes_in_a_bind_are_the_callers() {
        make_project "$TEST_TMP/proj"
        assert_status 0 "$NSBOX" run --policy root --bind "$TEST_TMP/proj:/workspace/project:rw" -- sh -c \
                'cd project && stat -c %U a.txt && echo new > new.txt && git status --porcelain'
        assert_eq "root
?? new.txt" "$OUT" "the caller's tree inside, git status"
        assert_eq "$(id -u)" "$(stat -c %u "$TEST_TMP/proj/new.txt")" "the owner of the new file on the host"
}

test_root_policy_in_nsboxd() {
        trap cleanup EXIT
        start_daemon
        local id
        id=$("$NSBOX" create --policy root 2>&1) || fail "create --policy root: $id"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'id -u; grep CapEff /proc/self/status | tr -s "\t" " "'
        assert_eq "0
CapEff: 00000000a80425fb" "$OUT" "a root policy through nsboxd"
        "$NSBOX" rm -f "$id" >/dev/null
}

test_uid_0_with_capabilities_named_keeps_only_those() {
        printf '{"user": {"name": "root", "uid": 0, "gid": 0, "home": "/root"}, "capabilities": []}\n' > "$TEST_TMP/r0.json"
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/r0.json" -- sh -c 'id -u; grep CapEff /proc/self/status | tr -s "\t" " "; touch /tmp/f; chown 1:1 /tmp/f 2>/dev/null || echo chown-refused'
        assert_eq "0
CapEff: 0000000000000000
chown-refused" "$OUT" "uid 0 with \"capabilities\": []"
}

run_tests
