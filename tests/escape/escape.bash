# shellcheck shell=bash
# Helpers of the escape tests, sourced after tests/lib.sh (not a test file itself: tests/run only
# runs *.sh).  The probe ($NSBOX_BUILD/tests/probe, from probe.c) performs one attack and exits 0
# if it failed (the sandbox held), 1 if it worked, 2 if it was not run.
#
# Every test must be able to fail.  Where it is harmless, a test also runs the same attack where
# the protection is absent, as a control that must see it work:
#   control_host    the probe on the host, no sandbox.  Only attacks that change nothing but the
#                   probe's own process (or only look) are run this way; probe.c refuses the
#                   destructive ones (mount, kexec, modules, setns, writes under / and /proc/sys,
#                   signals to pid 1...) whenever it has the host root's rights.
#   control_userns  the probe as root of a user namespace of its own (`unshare -Ur`, with new
#                   mount/pid namespaces): what it mounts or signals stays there.  Only as the
#                   unprivileged user: root's user namespace maps to host root, and the probe
#                   refuses destructive attacks there.
PROBE=$NSBOX_BUILD/tests/probe
[ -x "$PROBE" ] || { echo "escape tests need $PROBE (make $PROBE)" >&2; exit 1; }
PROBE_OPTS=()   # extra nsbox options for probe_in_sandbox and probe_in_daemon
PROBE_OUT=      # the last probe line (probe_in_sandbox, probe_in_daemon)
PROBE_OUTS=()   # every probe line of the last assert_held, one per kind of sandbox
CONTROL_OUT=    # the last control's output (control_host)

# Every file has its own nsboxd, on a socket of its own (short: a unix socket path is < 108
# bytes), started by the first `nsbox create` and stopped with its sandboxes when the file ends.
ESCAPE_DIR=$(mktemp -d /tmp/nsbox-esc.XXXXXX) || exit 1
chmod 0755 "$ESCAPE_DIR"
export NSBOX_SOCKET="$ESCAPE_DIR/d.sock"
trap 'stop_file_daemon "$ESCAPE_DIR"' EXIT

# A sandbox of nsboxd, removed when the test ends (see at_exit): its id in the variable VAR.
DAEMON_SANDBOXES=""
new_daemon_sandbox() { # VAR [nsbox create options]
        local _var=$1 _sid; shift
        _sid=$("$NSBOX" create "$@" 2>&1) || fail "nsbox create $*: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid', not a 32-hex-digit id"
        DAEMON_SANDBOXES="$DAEMON_SANDBOXES $_sid"
        at_exit "\"\$NSBOX\" rm -f $_sid >/dev/null 2>&1"
        printf -v "$_var" %s "$_sid"
}

# The two kinds of sandbox every check runs in: one of `nsbox run`, and one of nsboxd (`nsbox
# create` with the same options, then `nsbox exec`).
KINDS="run daemon"
kind_name() { # run|daemon
        case $1 in
        run) echo "nsbox run sandbox" ;;
        daemon) echo "nsboxd sandbox" ;;
        *) fail "kind_name: unknown kind '$1'" ;;
        esac
}

# Run CHECK once per kind, as `CHECK KIND ARGS...`, each in a subshell of its own (its at_exit
# commands run when that kind is done), with KIND_NAME set for its messages.  A check that fails
# ends the test, and the last line says in which kind of sandbox.
for_each_kind() { # check [args...]
        local kind
        for kind in $KINDS; do
                # shellcheck disable=SC2030,SC2034
                (AT_EXIT='' KIND_NAME=$(kind_name "$kind") && "$1" "$kind" "${@:2}") ||
                        fail "^ failed in the $(kind_name "$kind")"
        done
}

# Run CMD in a new sandbox of KIND with the nsbox options given, then remove it.  Prints what CMD
# printed (stdout and stderr), returns its status, or 125 when the sandbox could not be made.
# Standard input: the caller's for nsbox run; nsbox exec always gives /dev/null.
in_kind() { # run|daemon [nsbox options...] -- cmd [args...]
        local kind=$1 opts=() id st
        shift
        while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
        [ "${1:-}" = -- ] || fail "in_kind: no -- before the command"
        shift
        case $kind in
        run)
                "$NSBOX" run "${opts[@]}" -- "$@" 2>&1
                ;;
        daemon)
                id=$("$NSBOX" create "${opts[@]}" 2>&1) || { echo "nsbox create ${opts[*]} failed: $id"; return 125; }
                "$NSBOX" exec "$id" -- "$@" 2>&1
                st=$?
                "$NSBOX" rm -f "$id" >/dev/null 2>&1
                return "$st"
                ;;
        *) fail "in_kind: unknown kind '$kind'" ;;
        esac
}

# The probe in a sandbox, the probe directory bound at /probe; extra nsbox options in PROBE_OPTS.
# Sets PROBE_OUT, prints it on stdout and stderr, returns the probe's (or nsbox's) status.
probe_in_sandbox() { # attack [args...]
        local st
        PROBE_OUT=$("$NSBOX" run "${PROBE_OPTS[@]}" --bind "$NSBOX_BUILD/tests:/probe" -- /probe/probe "$@" </dev/null 2>&1)
        st=$?
        printf '%s\n' "$PROBE_OUT"
        printf '    nsbox run: probe %s: %s [exit %s]\n' "$*" "$PROBE_OUT" "$st" >&2
        return "$st"
}

# The same in a sandbox of nsboxd (nsbox create, then nsbox exec), removed afterwards.
probe_in_daemon() { # attack [args...]
        local st id
        id=$("$NSBOX" create "${PROBE_OPTS[@]}" --bind "$NSBOX_BUILD/tests:/probe" 2>&1) ||
                { PROBE_OUT="nsbox create failed: $id"; echo "    $PROBE_OUT" >&2; return 125; }
        PROBE_OUT=$("$NSBOX" exec "$id" -- /probe/probe "$@" </dev/null 2>&1)
        st=$?
        "$NSBOX" rm -f "$id" >/dev/null 2>&1
        printf '%s\n' "$PROBE_OUT"
        printf '    nsboxd sandbox (create + exec): probe %s: %s [exit %s]\n' "$*" "$PROBE_OUT" "$st" >&2
        return "$st"
}

# The same in a sandbox of `nsbox run --policy root`: the sandbox's user is root of its own user
# namespace, with the capabilities containers get by default there.
probe_in_root() { # attack [args...]
        local saved=("${PROBE_OPTS[@]}") st
        PROBE_OPTS=(--policy root "${PROBE_OPTS[@]}")
        echo "    with --policy root:" >&2
        probe_in_sandbox "$@"
        st=$?
        PROBE_OPTS=("${saved[@]}")
        return "$st"
}

# The attack must fail inside the sandbox: in one of `nsbox run`, one of nsboxd and one whose
# user is root with a container's capabilities.
assert_held() { # attack [args...]
        local st kind
        PROBE_OUTS=()
        for kind in ${HELD_KINDS:-sandbox daemon root}; do
                "probe_in_$kind" "$@" >/dev/null
                st=$?
                PROBE_OUTS+=("$PROBE_OUT")
                [ "$st" = 0 ] || fail "attack '$1' was not refused inside the $kind sandbox (probe exit $st): $PROBE_OUT"
                assert_contains "$PROBE_OUT" "attack $1: refused:" "probe output ($kind sandbox)"
        done
}

# For what only an unprivileged sandbox user is refused (capabilities, chown, setuid, a read-only
# root): in the first two kinds.  The caller checks what bounds the root kind instead.
assert_held_unprivileged() { # attack [args...]
        HELD_KINDS="sandbox daemon" assert_held "$@"
}

# The probe in a root-policy sandbox: PROBE_OUT says each TEXT given.
assert_root_probe_says() { # attack -- text...
        local attack=$1
        shift 2
        probe_in_root "$attack" >/dev/null
        for t in "$@"; do assert_contains "$PROBE_OUT" "$t" "probe output (sandbox with --policy root)"; done
}

# Each probe line of the last assert_held says TEXT.
assert_probe_says() { # text
        local o
        [ "${#PROBE_OUTS[@]}" -gt 0 ] || fail "assert_probe_says: no probe ran"
        for o in "${PROBE_OUTS[@]}"; do assert_contains "$o" "$1" "probe output"; done
}

control_host() { # attack [args...]; sets CONTROL_OUT
        local st
        CONTROL_OUT=$(cd "$TEST_TMP" && "$PROBE" "$@" </dev/null 2>&1)
        st=$?
        printf '    control (host, no sandbox): %s [exit %s]\n' "$CONTROL_OUT" "$st" >&2
        [ "$st" = 1 ] || fail "control: without a sandbox the probe should see '$1' work (exit 1), got exit $st: $CONTROL_OUT"
}

control_userns() { # [unshare options...] -- attack [args...]
        local opts=() out st
        while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
        shift
        if [ "$TEST_AS" != user ]; then
                echo "    control (user namespace): not run as root (it would map to host root)" >&2
                return 0
        fi
        if ! unshare --user --map-root-user "${opts[@]}" true 2>/dev/null; then
                echo "    control (user namespace): unshare --user ${opts[*]} is not available here" >&2
                return 0
        fi
        out=$(cd "$TEST_TMP" && unshare --user --map-root-user "${opts[@]}" "$PROBE" "$@" </dev/null 2>&1)
        st=$?
        printf '    control (own user namespace, %s): %s [exit %s]\n' "${opts[*]}" "$out" "$st" >&2
        [ "$st" = 1 ] || fail "control: as root of its own user namespace the probe should see '$1' work (exit 1), got exit $st: $out"
}

# Run a command when the test's subshell exits (each test runs in a subshell of its own).
AT_EXIT=
at_exit() { # command (a string for eval)
        AT_EXIT="$1; $AT_EXIT"
        trap 'eval "$AT_EXIT"' EXIT
}

# A scratch directory for --bind sources, in TEST_TMP (removed with it).  0755 along the path: a
# sandbox started by root runs as an unprivileged host uid, which must reach a bind's source.
scratch_dir() { # sets SCRATCH
        chmod 0755 "$TEST_TMP"
        SCRATCH=$(mktemp -d "$TEST_TMP/scratch.XXXXXX") || fail "cannot create a scratch directory in $TEST_TMP"
        chmod 0755 "$SCRATCH"
}

# The caller's home directory (setpriv --reset-env may leave HOME unset).
caller_home() {
        getent passwd "$(id -u)" | cut -d: -f6
}
