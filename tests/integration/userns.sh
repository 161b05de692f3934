#!/usr/bin/env bash
# nsbox as uid 0 of a user namespace (unshare -Ur; CI and rootless containers run so): it is a
# user there, not the host's root, so its runtime directory, store, configuration and API keys
# are a user's (nsbox(1), HOST SETUP), NSBOX_SOCKET is honoured, and create, exec, snapshots,
# mcp and rm work.  Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

SESSION_DIR=$(mktemp -d /tmp/nsbox-userns.XXXXXX) || exit 1
chmod 755 "$SESSION_DIR"
# the runtime directory uid 0 of our namespace gets in the shared /tmp: removed if we made it
RUNDIR=/tmp/nsbox-0$([ "$(id -u)" = 0 ] || echo ".$(id -u)")
[ -e "$RUNDIR" ] && RUNDIR=
trap 'rm -rf "$SESSION_DIR" ${RUNDIR:+"$RUNDIR"}' EXIT

# in_userns SCRIPT: bash -c SCRIPT as uid 0 of a new user namespace, with a home of its own and
# nsbox on PATH; the nsboxd it starts is stopped at the end, whatever the script did
in_userns() {
        HOME="$SESSION_DIR/home" XDG_RUNTIME_DIR= XDG_DATA_HOME= XDG_CONFIG_HOME= XDG_STATE_HOME= \
                PATH="$(dirname "$NSBOX"):$PATH" unshare -Ur bash -c "$1"'
                st=$?; nsbox daemon stop > /dev/null 2>&1; exit $st' 2>&1
}

test_uid_0_of_a_user_namespace_is_a_user_with_its_own_places() {
        mkdir -p "$SESSION_DIR/home"
        OUT=$(in_userns 'set -e
                [ "$(id -u)" = 0 ]
                id=$(nsbox create --label k=v)
                nsbox exec "$id" -- sh -c "echo kept > notes; id -un"
                nsbox snapshot "$id" s1 > /dev/null
                nsbox snapshot ls | grep -q "^s1 " || { echo "snapshot ls: $(nsbox snapshot ls 2>&1)"; exit 1; }
                id2=$(nsbox create --from s1)
                echo "from the snapshot: $(nsbox exec "$id2" -- cat notes)"
                nsbox daemon status | sed -n "s/^  socket *//p"
                nsbox rm "$id" "$id2" > /dev/null
                nsbox snapshot rm s1 > /dev/null
                echo done')
        assert_eq "user
from the snapshot: kept" "$(sed -n 1,2p <<< "$OUT")" "exec and a snapshot: $OUT"
        assert_eq done "$(tail -n 1 <<< "$OUT")" "the session: $OUT"
        local sock; sock=$(sed -n 3p <<< "$OUT")
        case $sock in /run/nsbox/*) fail "uid 0 of a user namespace took the host root's socket $sock" ;; /*) ;; *) fail "socket: $OUT" ;; esac
        [ -d "$SESSION_DIR/home/.local/share/nsbox" ] || fail "the store is not in the home: $(ls -R "$SESSION_DIR/home" | head)"
}

test_nsbox_socket_and_mcp_in_a_user_namespace() {
        mkdir -p "$SESSION_DIR/home"
        OUT=$(NSBOX_SOCKET="$SESSION_DIR/u.sock" in_userns '
                printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}" \
                        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"exec\",\"arguments\":{\"shell\":\"echo via-mcp\"}}}" |
                        nsbox mcp | grep -c via-mcp
                [ -S "$NSBOX_SOCKET" ] && echo socket-honoured')
        assert_eq "1
socket-honoured" "$OUT" "mcp through the socket named by NSBOX_SOCKET"
}

run_tests
