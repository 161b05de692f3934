#!/usr/bin/env bash
# Escape tier, the sandbox as a client of nsboxd: a unix socket is reachable through any bind
# that shows its directory, read-only included (connect() writes nothing), and a sandbox's uid
# maps to its owner's.  nsboxd and its keeper refuse peers that run inside a sandbox (another
# user or pid namespace than theirs), say so to the peer and in their log, and go on serving the
# host; nsbox's runtime directories are hidden from binds that would show them; and a runtime
# directory that another user took first in /tmp does not leave its owner without nsboxd.
# shellcheck source-path=SCRIPTDIR
# shellcheck disable=SC2031 # KIND_NAME is set by for_each_kind's subshell for its check
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
REFUSAL="nsboxd refused the connection: clients inside a sandbox are not served"

# The number of sandboxes nsboxd on $NSBOX_SOCKET lists.
count_sandboxes() {
        "$NSBOX" ls --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'
}

# Root's nsboxd has a 0600 socket, which a sandbox's uid (an unprivileged host uid) may not open
# at all; with "clients" configured it is 0666.  Open it so, for this test: the check that
# matters is then the one of the sandbox's namespaces, not of its uid.
open_socket_as_root_does_for_clients() {
        if [ "$TEST_AS" = root ]; then
                chmod 0666 "$NSBOX_SOCKET" || fail "chmod $NSBOX_SOCKET"
                at_exit "chmod 0600 '$NSBOX_SOCKET'"
        fi
}

# The attack of issue 19: from a sandbox that sees nsboxd's socket through a read-only bind of
# its directory, ask for a new sandbox with the host "home" bound read-write.
test_sandbox_is_refused_as_a_client_of_nsboxd() {
        local log=$NSBOX_SOCKET.log req before refused_before n
        "$NSBOX" ls >/dev/null || fail "the file's nsboxd does not answer"
        scratch_dir
        mkdir "$SCRATCH/home" && echo untouched >"$SCRATCH/home/marker" && chmod 0777 "$SCRATCH/home"
        open_socket_as_root_does_for_clients
        control_host daemon_client "$NSBOX_SOCKET"
        before=$(count_sandboxes)
        refused_before=$(grep -c 'event=client.refused' "$log")
        req='{"jsonrpc":"2.0","id":1,"method":"create","params":{"bind":["'$SCRATCH/home':/h:rw"]}}'
        PROBE_OPTS=(--bind "$ESCAPE_DIR:/rt")
        assert_held daemon_client /rt/d.sock "$req"
        assert_probe_says "connect '/rt/d.sock': connected"
        assert_probe_says "$REFUSAL"
        # nothing was made, the host home is as it was, and nsboxd still serves the host
        assert_eq "$before" "$(count_sandboxes)" "sandboxes after the requests from inside"
        assert_eq "marker" "$(ls -A "$SCRATCH/home")" "the host home's entries"
        assert_eq untouched "$(cat "$SCRATCH/home/marker")" "the host home's marker"
        assert_status 0 "$NSBOX" ls
        # each refusal is in nsboxd's log with its reason
        n=$(tail -n "+$((refused_before + 1))" "$log" | grep 'event=client.refused' | grep -c 'namespace (inside a sandbox)')
        [ "$n" -ge 2 ] || fail "expected 2 'client.refused ... inside a sandbox' lines in nsboxd's log, got $n: $(grep client.refused "$log" | tail -n 3)"
}

# What a client inside sees: the nsbox command and the Python client each say it in one line.
test_refused_clients_get_one_clear_error() {
        local bindir
        bindir=$(dirname "$NSBOX")
        "$NSBOX" ls >/dev/null || fail "the file's nsboxd does not answer"
        open_socket_as_root_does_for_clients
        # shellcheck disable=SC2317
        refused_cli() { # kind
                local out st
                # a sanitizer build's leak check needs ptrace, which no sandbox allows
                out=$(in_kind "$1" --bind "$ESCAPE_DIR:/rt" --bind "$bindir:/nsboxbin" -- \
                        env NSBOX_SOCKET=/rt/d.sock ASAN_OPTIONS=detect_leaks=0 /nsboxbin/nsbox ls)
                st=$?
                assert_eq 125 "$st" "exit status of nsbox ls inside the $KIND_NAME (output: $out)"
                assert_one_line_error "$out"
                assert_eq "nsbox: ls: $REFUSAL" "$out" "nsbox ls inside the $KIND_NAME"
        }
        for_each_kind refused_cli
        local out
        out=$("$NSBOX" run --bind "$ESCAPE_DIR:/rt" --bind "$NSBOX_SRC/clients/python:/py" -- env NSBOX_SOCKET=/rt/d.sock PYTHONPATH=/py \
                python3 -c 'import nsbox._rpc as r
try:
    r.Connection(autostart=False).call("list")
except Exception as e:
    print(type(e).__name__ + ": " + str(e))' 2>&1)
        assert_eq "PermissionDeniedException: $REFUSAL" "$out" "the Python client inside a sandbox"
}

# nsbox's runtime directories, with a marker file of ours in each, are empty inside a sandbox
# whose binds would show them: a bind of a parent (/tmp, /run, $XDG_RUNTIME_DIR) and one of the
# directory itself.  As root: /run/nsbox; as a user: /tmp/nsbox-UID (no XDG_RUNTIME_DIR), then
# $XDG_RUNTIME_DIR/nsbox.
hidden_in() { # kind parent-bind-source path-below-it
        local out st
        # shellcheck disable=SC2016 # expanded by the sandbox's shell
        out=$(in_kind "$1" --bind "$2:/hostdir" --bind "$2/$3:/rt" --bind "$NSBOX_BUILD/tests:/probe" -- \
                sh -c 'ls -A "/hostdir/$1" /rt; /probe/probe daemon_client "/hostdir/$1/nsboxd.sock"' sh "$3")
        st=$?
        printf '    %s: %s\n' "$KIND_NAME" "$out" >&2
        assert_eq 0 "$st" "status of ls and the probe inside the $KIND_NAME (output: $out)"
        assert_not_contains "$out" "hide-marker" "what the $KIND_NAME lists of $2/$3"
        assert_contains "$out" "attack daemon_client: refused: connect '/hostdir/$3/nsboxd.sock': No such file or directory"
}

test_runtime_directory_is_hidden_from_binds() {
        local rt parent
        if [ "$TEST_AS" = root ]; then
                rt=/run/nsbox parent=/run
        else
                rt=/tmp/nsbox-$(id -u) parent=/tmp
        fi
        [ -e "$rt" ] || mkdir -m 0700 "$rt" || fail "mkdir $rt"
        if [ ! -d "$rt" ] || [ "$(stat -c %u "$rt")" != "$(id -u)" ]; then
                fail "$rt is not a directory of ours: $(ls -ld "$rt")"
        fi
        touch "$rt/hide-marker.$$" || fail "cannot plant a marker in $rt"
        at_exit "rm -f '$rt/hide-marker.$$'"
        for_each_kind hidden_in "$parent" "${rt#"$parent"/}"
        [ "$TEST_AS" = user ] || return 0
        # With XDG_RUNTIME_DIR set (a private one here, as /run/user/UID would be): its nsbox
        # directory, where the nsboxd it starts listens, is hidden from a bind of XDG_RUNTIME_DIR.
        local xdg=$TEST_TMP/xdg pid
        mkdir -m 0700 "$xdg" || fail "mkdir $xdg"
        export XDG_RUNTIME_DIR=$xdg
        unset NSBOX_SOCKET
        "$NSBOX" ls >/dev/null || fail "no nsboxd started in $xdg"
        pid=$(NSBOX_SOCKET=$xdg/nsbox/nsboxd.sock daemon_pid)
        at_exit "kill $pid 2>/dev/null"
        touch "$xdg/nsbox/hide-marker.$$"
        [ -S "$xdg/nsbox/nsboxd.sock" ] || fail "no socket in $xdg/nsbox: $(ls -A "$xdg/nsbox")"
        for_each_kind hidden_in "$xdg" nsbox
}

# The keeper (nsboxd with on_stop "keep", stopped: it holds the sandboxes for the next nsboxd)
# hands nothing to a sandbox that sees its socket, and still hands everything to the next nsboxd.
test_keeper_refuses_a_sandbox_peer() {
        local d dpid id run st out
        scratch_dir
        d=$SCRATCH/k
        mkdir -m 0755 "$d"
        printf '{"on_stop": "keep", "keep_timeout": 60}\n' >"$d/conf.json"
        export NSBOX_SOCKET=$d/d.sock
        start_keeping_nsboxd() { # log
                "$NSBOXD" --config "$d/conf.json" --socket "$d/d.sock" >>"$1" 2>&1 </dev/null &
                dpid=$!
                at_exit "kill $dpid 2>/dev/null"
                for _ in $(seq 100); do [ "$(daemon_pid)" = "$dpid" ] && return 0; sleep 0.1; done
                fail "nsboxd did not start: $(tail -n 3 "$1")"
        }
        start_keeping_nsboxd "$d/log"
        id=$("$NSBOX" create 2>&1) || fail "nsbox create: $id"
        # removed by whichever nsboxd holds it, before that one is stopped (at_exit runs the last
        # command first); never through a client that would start one of its own
        at_exit "[ -z \"\$(daemon_pid)\" ] || '$NSBOX' rm -f $id >/dev/null 2>&1"
        # the attacker sees the state directory, and waits for the keeper's socket
        "$NSBOX" run --bind "$d:/rt" --bind "$NSBOX_BUILD/tests:/probe" -- \
                sh -c 'while [ ! -e /rt/go ]; do sleep 0.1; done; exec /probe/probe keeper_client /rt/d.sock.state/keeper' \
                >"$d/probe.out" 2>&1 </dev/null &
        run=$!
        at_exit "kill $run 2>/dev/null"
        kill -TERM "$dpid"
        for _ in $(seq 100); do [ -S "$d/d.sock.state/keeper" ] && break; sleep 0.1; done
        [ -S "$d/d.sock.state/keeper" ] || fail "no keeper socket after SIGTERM: $(tail -n 3 "$d/log")"
        if [ "$TEST_AS" = root ]; then
                # as open as a tenant's: the sandbox's uid reaches the socket
                chmod 0711 "$d/d.sock.state" || fail "chmod the state directory"
                chmod 0666 "$d/d.sock.state/keeper" || fail "chmod the keeper's socket"
        fi
        touch "$d/go"
        wait "$run"
        st=$?
        [ "$TEST_AS" != root ] || chmod 0700 "$d/d.sock.state" # as nsboxd wants it
        out=$(cat "$d/probe.out")
        printf '    probe in a nsbox run sandbox: %s [exit %s]\n' "$out" "$st" >&2
        assert_eq 0 "$st" "the keeper_client probe's status (output: $out)"
        assert_contains "$out" "connect '/rt/d.sock.state/keeper': connected"
        assert_contains "$out" "the keeper sent nothing"
        grep 'event=client.refused' "$d/log" | grep 'keeper: refused' | grep -q 'namespace (inside a sandbox)' ||
                fail "no 'keeper: refused ... inside a sandbox' in the log: $(tail -n 5 "$d/log")"
        # the next nsboxd still gets the sandbox
        start_keeping_nsboxd "$d/log2"
        at_exit "[ -z \"\$(daemon_pid)\" ] || '$NSBOX' rm -f $id >/dev/null 2>&1"
        assert_status 0 "$NSBOX" ls
        assert_contains "$OUT" "$id" "nsbox ls after the hand-over (log: $(tail -n 4 "$d/log" "$d/log2"))"
}

# Another user made /tmp/nsbox-UID first (root plants it for the test user, in a mount namespace
# of the test's own with an empty /tmp; as the user, a symbolic link stands in for it in a user
# namespace of its own): nsbox falls back to ~/.cache/nsbox-run, says so once, and works.
test_runtime_directory_taken_by_another_user_falls_back_to_home() {
        local user uid home fb out st pid
        if [ "$TEST_AS" = root ]; then
                user=${NSBOX_TEST_USER:-nsboxtest}
                id "$user" >/dev/null 2>&1 || fail "no user '$user' to run as"
        else
                user=$(id -un)
        fi
        uid=$(id -u "$user")
        home=$(getent passwd "$user" | cut -d: -f6)
        fb=$home/.cache/nsbox-run
        rm -f "$fb/nsboxd.log" # a previous run's lines are not this one's
        # As the user, with no XDG_RUNTIME_DIR: nsbox ls (which starts nsboxd), then the pid of the
        # nsboxd that answers, asked from the same namespaces (it refuses clients of others: the
        # user variant's nsboxd runs in a user namespace of the test's).
        local client='import json, os, socket, subprocess, sys
env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "NSBOX_SOCKET")}
r = subprocess.run([sys.argv[1], "ls"], env=env, stdout=sys.stdout, stderr=subprocess.STDOUT)
if r.returncode:
    sys.exit(r.returncode)
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[2])
s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
print("PID=%d" % json.loads(s.makefile().readline())["result"]["pid"], flush=True)'
        # shellcheck disable=SC2016
        # (nsbox and nsboxd stay where they are when they are under /tmp: bound back from a
        # descriptor taken before the tmpfs covers them)
        local inner='bin=$(dirname "$4")
exec 9<"$bin" || exit 89
mount -t tmpfs tmpfs /tmp || exit 90
case $bin in /tmp/*) mkdir -p "$bin" && mount --no-canonicalize --bind /proc/self/fd/9 "$bin" || exit 93 ;; esac
exec 9<&-
[ ! -d /run/user ] || mount -t tmpfs tmpfs /run/user || exit 91
if [ "$1" = root ]; then
        mkdir -m 0700 "/tmp/nsbox-$2" && chown 4242:4242 "/tmp/nsbox-$2" || exit 92
        exec setpriv --reuid="$2" --regid="$2" --init-groups --reset-env python3 -c "$3" "$4" "$5"
fi
ln -s /nonexistent "/tmp/nsbox-$2" || exit 92
exec python3 -c "$3" "$4" "$5"'
        if [ "$TEST_AS" = root ]; then
                out=$(unshare --mount sh -c "$inner" sh root "$uid" "$client" "$NSBOX" "$fb/nsboxd.sock" 2>&1)
        else
                out=$(unshare --user --map-current-user --mount --keep-caps sh -c "$inner" sh user "$uid" "$client" "$NSBOX" "$fb/nsboxd.sock" 2>&1)
        fi
        st=$?
        pid=$(printf '%s\n' "$out" | sed -n 's/^PID=//p')
        at_exit "[ -z '$pid' ] || kill $pid 2>/dev/null"
        assert_eq 0 "$st" "exit status of nsbox ls (output: $out)"
        assert_contains "$out" "nsbox: warning: runtime directory '/tmp/nsbox-$uid' is not ours (another user made it first): using '$fb' instead"
        assert_eq 1 "$(printf '%s\n' "$out" | grep -c warning)" "warnings printed"
        assert_contains "$out" "ID " "nsbox ls's output"
        [ -n "$pid" ] || fail "no nsboxd answers on $fb/nsboxd.sock"
        grep 'event=daemon.runtime_dir' "$fb/nsboxd.log" | grep -q "using '$fb' instead" ||
                fail "no daemon.runtime_dir warning in $fb/nsboxd.log: $(tail -n 3 "$fb/nsboxd.log")"
        assert_eq 700 "$(stat -c %a "$fb")" "mode of $fb"
}

run_tests
