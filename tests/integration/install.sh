#!/usr/bin/env bash
# make install: what a packager or an operator gets.
. "$(dirname "$0")/../lib.sh"

test_installed_nsbox_runs_with_its_own_policy_and_man_pages() {
        local prefix="$TEST_TMP/prefix" b="$TEST_TMP/build"
        make -s -j"$(nproc)" -C "$NSBOX_SRC" B="$b" PREFIX="$prefix" install > "$TEST_TMP/make.log" 2>&1 || fail "make install: $(tail -5 "$TEST_TMP/make.log")"
        local f
        for f in bin/nsbox bin/nsboxd libexec/nsbox/nsbox-agent share/nsbox/policy/default.json share/man/man1/nsbox.1 share/man/man5/nsbox-policy.5 \
                share/man/man7/nsbox-protocol.7 share/man/man8/nsboxd.8 \
                share/nsbox/rootfs/mkrootfs-debootstrap share/nsbox/apparmor/nsbox \
                lib/systemd/system/nsboxd.service lib/systemd/system/nsboxd.socket \
                lib/systemd/user/nsboxd.service lib/systemd/user/nsboxd.socket; do
                [ -f "$prefix/$f" ] || fail "make install did not install $f"
        done
        # the units name the installed nsboxd, and systemd reads them without a word
        assert_contains "$(cat "$prefix/lib/systemd/system/nsboxd.service")" "ExecStart=$prefix/bin/nsboxd" "nsboxd.service"
        assert_contains "$(cat "$prefix/lib/systemd/user/nsboxd.service")" "ExecStart=$prefix/bin/nsboxd" "user nsboxd.service"
        command -v systemd-analyze > /dev/null || fail "systemd-analyze is missing (package systemd)"
        OUT=$(cd "$TEST_TMP" && systemd-analyze verify --man=no "$prefix/lib/systemd/system/nsboxd.service" \
                "$prefix/lib/systemd/system/nsboxd.socket" 2>&1)
        assert_eq "0 " "$? $OUT" "systemd-analyze verify of the system units"
        mkdir -p -m 0700 "$TEST_TMP/xdg"
        OUT=$(cd "$TEST_TMP" && XDG_RUNTIME_DIR="$TEST_TMP/xdg" systemd-analyze verify --user --man=no \
                "$prefix/lib/systemd/user/nsboxd.service" "$prefix/lib/systemd/user/nsboxd.socket" 2>&1)
        assert_eq "0 " "$? $OUT" "systemd-analyze verify of the user units"
        # the installed binary finds the installed policy by itself (no source tree next to it)
        OUT=$(cd / && env -u NSBOX_POLICY_PATH "$prefix/bin/nsbox" run -- id -un 2>&1)
        assert_eq user "$OUT" "installed nsbox run"
        assert_contains "$(cat "$prefix/share/nsbox/apparmor/nsbox")" "profile nsbox $prefix/bin/nsbox"
        assert_contains "$(cat "$prefix/share/nsbox/apparmor/nsbox")" "profile nsboxd $prefix/bin/nsboxd"
        # the installed client starts the installed daemon (next to it) and uses it
        local sock="$TEST_TMP/inst.sock" id
        id=$(cd / && env -u NSBOX_POLICY_PATH NSBOX_SOCKET="$sock" "$prefix/bin/nsbox" create 2>&1) || fail "installed nsbox create: $id"
        OUT=$(cd / && NSBOX_SOCKET="$sock" "$prefix/bin/nsbox" exec "$id" -- id -un 2>&1)
        assert_eq user "$OUT" "installed nsbox exec"
        local dpid; dpid=$(python3 -c 'import json,socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"); print(json.loads(s.makefile().readline())["result"]["pid"])' "$sock")
        assert_eq "$prefix/bin/nsboxd" "$(readlink "/proc/$dpid/exe")" "the daemon that answered"
        # and its sandbox's agent is an exec of the installed nsbox-agent (none is next to nsboxd)
        local apid; apid=$(cd / && NSBOX_SOCKET="$sock" "$prefix/bin/nsbox" ls --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["pid"])')
        assert_eq "$prefix/libexec/nsbox/nsbox-agent" "$(readlink "/proc/$apid/exe")" "the sandbox's agent"
        kill "$dpid"
        if command -v man >/dev/null; then
                OUT=$(MANWIDTH=80 man -l "$prefix/share/man/man1/nsbox.1" 2>&1)
                assert_contains "$OUT" "EXIT STATUS" "rendered nsbox(1)"
        fi
}

test_destdir_install_stages_without_touching_prefix() {
        local b="$TEST_TMP/build2"
        make -s -j"$(nproc)" -C "$NSBOX_SRC" B="$b" PREFIX=/usr DESTDIR="$TEST_TMP/stage" install > "$TEST_TMP/make.log" 2>&1 || fail "make install: $(tail -5 "$TEST_TMP/make.log")"
        [ -x "$TEST_TMP/stage/usr/bin/nsbox" ] || fail "no staged binary"
        assert_contains "$(strings "$TEST_TMP/stage/usr/bin/nsbox")" "/usr/share/nsbox/policy" "compiled-in policy directory"
}

run_tests
