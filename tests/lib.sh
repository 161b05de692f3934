# shellcheck shell=bash
# Test library for nsbox's shell tiers (integration, escape).  A test file sources this file,
# defines functions named test_*, and ends with `run_tests`.  tests/run executes every file twice:
# as root and, through setpriv, as the unprivileged user $NSBOX_TEST_USER, with TEST_AS set to
# "root" or "user".  Each test runs in a subshell; it fails if it calls fail (or an assert_*
# fails), passes otherwise, and may call skip "reason" when a precondition is truly absent.
#
# Variables: NSBOX (the binary), NSBOX_BUILD (build dir: probes in $NSBOX_BUILD/tests),
# NSBOX_SRC (source tree), TEST_AS, RESULTS (file to which PASS/FAIL/SKIP lines are appended),
# TEST_TMP (a scratch directory for this file, writable by the current user, removed after).

: "${NSBOX:?NSBOX must point at the nsbox binary}"
: "${RESULTS:=/dev/null}"
: "${TEST_AS:=$( [ "$(id -u)" = 0 ] && echo root || echo user )}"
TEST_FILE=${TEST_FILE:-$(basename "$0")}
TEST_TIER=${TEST_TIER:-$(basename "$(dirname "$0")")}

fail() { echo "    $*" >&2; exit 1; }
skip() { echo "    skip: $*" >&2; exit 77; }

assert_eq() { # expected actual [what]
        [ "$1" = "$2" ] || fail "${3:-value}: expected '$1', got '$2'"
}
assert_ne() { # unexpected actual [what]
        [ "$1" != "$2" ] || fail "${3:-value}: did not expect '$1'"
}
assert_contains() { # haystack needle [what]
        case "$1" in *"$2"*) ;; *) fail "${3:-output} does not contain '$2': $(printf '%s' "$1" | head -c 600)" ;; esac
}
assert_not_contains() { # haystack needle [what]
        case "$1" in *"$2"*) fail "${3:-output} contains '$2': $(printf '%s' "$1" | head -c 600)" ;; *) ;; esac
}
assert_status() { # expected-status cmd... ; stdout+stderr of cmd go to $OUT
        local want=$1; shift
        OUT=$("$@" 2>&1); local got=$?
        [ "$got" = "$want" ] || fail "exit status of '$*': expected $want, got $got; output: $(printf '%s' "$OUT" | head -c 600)"
}
# A one-line error that starts with "nsbox: ", as every nsbox failure must be.
assert_one_line_error() { # output
        local n; n=$(printf '%s\n' "$1" | grep -c .)
        [ "$n" = 1 ] || fail "expected one line of error, got $n: $1"
        case "$1" in "nsbox: "*) ;; *) fail "error does not start with 'nsbox: ': $1" ;; esac
}

# Snapshot of what a sandbox could leave behind on the host: processes descending from nothing
# we started are not ours, so count nsbox processes and overlay/tmpfs mounts visible to us.
host_leftovers() {
        echo "procs=$(pgrep -u "$(id -u)" -x nsbox | grep -vc "^$$\$")"
        echo "mounts=$(grep -c . /proc/self/mountinfo)"
}
# A process that ended is gone, even as a zombie its reaper has not collected yet.
pid_alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# Wait until the processes are gone; echo those left after the given seconds.
wait_pids_gone() { # seconds pid...
        local secs=$1 i p left; shift
        for i in $(seq $((secs * 10))); do
                left=""
                for p in "$@"; do pid_alive "$p" && left="$left $p"; done
                [ -z "$left" ] && return 0
                sleep 0.1
        done
        echo "$left"
        return 1
}

# Wait (up to 5 s) until no process matching pattern remains; echo what remains.
wait_gone() { # pgrep -f pattern
        local i
        for i in $(seq 50); do pgrep -f "$1" >/dev/null || return 0; sleep 0.1; done
        pgrep -af "$1"
        return 1
}

# The pid of the nsboxd answering on $NSBOX_SOCKET (empty, status 1, when none answers).
daemon_pid() {
        python3 - "$NSBOX_SOCKET" <<'PY' 2>/dev/null
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
f = s.makefile("rb")
while True:
    d = json.loads(f.readline())
    if d.get("id") == 1:
        print(d["result"]["pid"])
        break
PY
}

# The last test of a file that shares one nsboxd: every test removed what it made.  nsboxd lists
# no sandbox and runs no process, and the host has as many mounts as before the file.
assert_no_nsboxd_of() { # DIR: no live nsboxd of ours has DIR in its environment
        local p left=""
        for p in $(pgrep -u "$(id -u)" -x 'nsboxd|nsboxd-keeper'); do
                grep -q "$1" "/proc/$p/environ" 2> /dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" &&
                        left="$left $p"
        done
        assert_eq "" "$left" "nsboxd processes the tests left running"
}

# The processes under nsboxd PID, once it has reaped what it was told to end: a sandbox's
# slirp4netns exits some 20 ms after the sandbox's removal is answered and is reaped then, so
# this waits up to 2 s for the list to empty.
daemon_children() { # PID
        local i left
        for i in $(seq 100); do
                left=$(ps --ppid "$1" -o pid=,args= 2> /dev/null)
                [ -z "$left" ] && return 0
                sleep 0.02
        done
        printf '%s' "$left"
}

assert_daemon_holds_nothing() { # mount-count-before
        local dpid
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(json.dumps([s["id"] for s in json.load(sys.stdin)]))')" \
                "sandboxes left by the tests"
        dpid=$(daemon_pid)
        [ -n "$dpid" ] || fail "no nsboxd"
        assert_eq "" "$(daemon_children "$dpid")" "processes under nsboxd"
        assert_eq "$1" "$(grep -c . /proc/self/mountinfo)" "host mount count"
}

# What a test started goes when it ends, whatever happens (`trap cleanup EXIT` in the test: each
# test runs in a subshell, which does not run its parent's EXIT trap): the pids in MY_PIDS get
# SIGTERM, the nsboxd daemons in MY_DAEMONS SIGTERM (which destroys their sandboxes), then
# SIGKILL if they linger.
# An EXIT trap for a file whose tests share one nsboxd on $NSBOX_SOCKET in DIR: stop that daemon
# and its sandboxes' agents (SIGTERM, SIGKILL after 5 s) and remove DIR (store layers keep the
# sandbox's modes, 0555 directories too: made removable first), keeping the file's exit status.
stop_file_daemon() { # DIR
        local st=$? pid agents
        pid=$(daemon_pid)
        if [ -n "$pid" ]; then
                agents=$("$NSBOX" ls --json 2>/dev/null |
                        python3 -c 'import json, sys; print(" ".join(str(s["pid"]) for s in json.load(sys.stdin)))' 2>/dev/null)
                kill -TERM "$pid" 2>/dev/null
                # shellcheck disable=SC2086
                wait_pids_gone 5 "$pid" $agents >/dev/null || kill -KILL "$pid" $agents 2>/dev/null
        fi
        chmod -R u+rwX "$1" 2>/dev/null
        rm -rf "$1"
        return $st
}

cleanup() {
        local p
        # shellcheck disable=SC2086
        [ -z "${MY_PIDS:-}" ] || kill $MY_PIDS 2> /dev/null
        for p in ${MY_DAEMONS:-}; do kill -TERM "$p" 2> /dev/null; done
        for p in ${MY_DAEMONS:-}; do
                wait_pids_gone 30 "$p" > /dev/null || kill -KILL "$p" 2> /dev/null
        done
}

# npm packages for a test, installed once per machine (root: /var/cache/nsbox-test/NAME) or per
# user ($HOME/.cache/nsbox-test/NAME, unless root's is there to read); echoes the directory whose
# node_modules holds them.  MARKER (a path under that directory) shows a finished install.  WHAT
# is either a directory with package.json and package-lock.json, installed exactly (npm ci; the
# directory's name gets the lock's hash, so a changed lock installs afresh), or package specs for
# npm install.  npm's output goes to stderr.
# A pseudo file (its size says 0) longer than one read_file call: the command line of a process
# with 15 arguments of 100000 x's.  big_cmdline prints those bytes; big_cmdline_process ID starts
# it in sandbox ID and prints its pid there once its command line is whole.
big_cmdline() { python3 -c 'import sys; sys.stdout.buffer.write(b"python3\0-c\0import time; time.sleep(300)\0" + (b"x" * 100000 + b"\0") * 15)'; }
big_cmdline_process() { # ID
        local pid i
        pid=$("$NSBOX" exec -d "$1" -- bash -c 'exec python3 -c "import time; time.sleep(300)" $(python3 -c "print(\" \".join([\"x\" * 100000] * 15))")') || return 1
        for i in $(seq 100); do
                [ "$("$NSBOX" exec "$1" -- wc -c "/proc/$pid/cmdline" 2> /dev/null)" = "1500055 /proc/$pid/cmdline" ] && { echo "$pid"; return 0; }
                sleep 0.05
        done
        return 1
}

npm_cache_dir() { # NAME MARKER WHAT...
        local name=$1 marker=$2 pkgdir="" shared dir; shift 2
        if [ $# = 1 ] && [ -d "$1" ]; then
                pkgdir=$1
                name="$name-$(sha256sum "$pkgdir/package-lock.json" | cut -c1-12)" || return 1
        fi
        shared=/var/cache/nsbox-test/$name
        if [ "$(id -u)" = 0 ]; then
                dir=$shared
        elif [ -r "$shared/$marker" ]; then
                echo "$shared"
                return 0
        else
                dir=${XDG_CACHE_HOME:-$HOME/.cache}/nsbox-test/$name
        fi
        mkdir -p "$dir" || return 1
        # --prefix would also move npm's global configuration (PREFIX/etc/npmrc): keep the machine's
        # (its registry, proxy or cafile)
        local global; global=$(npm config get globalconfig 2> /dev/null)
        (
                flock 9
                [ -r "$dir/$marker" ] && exit 0
                if [ -n "$pkgdir" ]; then
                        cp "$pkgdir/package.json" "$pkgdir/package-lock.json" "$dir/" &&
                                npm ci --prefix "$dir" --no-audit --no-fund --update-notifier=false --loglevel=error --cache "$dir/.npm-cache" \
                                        ${global:+--globalconfig "$global"} >&2
                else
                        npm install --prefix "$dir" --no-audit --no-fund --update-notifier=false --loglevel=error --cache "$dir/.npm-cache" \
                                ${global:+--globalconfig "$global"} "$@" >&2
                fi
        ) 9> "$dir/.lock" || return 1
        [ -r "$dir/$marker" ] || return 1
        echo "$dir"
}

# One result line of a test file, into $RESULTS and on stdout (run_tests' format; FAIL and SKIP
# lines may carry a reason, shown on stdout only).
record_result() { # PASS|FAIL|SKIP NAME [REASON]
        case $1 in
        SKIP) echo "SKIP $2: ${3:-}" ;;
        FAIL) echo "FAIL $2"; [ -z "${3:-}" ] || printf '%s\n' "$3" | sed 's/^/    /' | tail -n 20 ;;
        *) echo "$1 $2" ;;
        esac
        echo "$1 $2" >> "$RESULTS"
}

run_tests() {
        local t status pass=0 failn=0 skipn=0
        TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nsbox-test.XXXXXX")
        export TEST_TMP
        for t in $(declare -F | awk '{print $3}' | grep '^test_' ); do
                if [ -n "${TEST_ONLY:-}" ] && [ "$t" != "$TEST_ONLY" ]; then continue; fi
                local t0=$EPOCHREALTIME
                ( cd "$TEST_TMP" && "$t" ) 2> "$TEST_TMP/.err" >"$TEST_TMP/.out"
                status=$?
                local name="$TEST_TIER/$TEST_FILE:${t#test_} [$TEST_AS]"
                # the log says how long each test took ($RESULTS has the bare lines)
                local took; took=$(LC_ALL=C awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
                if [ $status = 0 ]; then
                        echo "PASS $name ($took s)"; echo "PASS $name" >> "$RESULTS"; pass=$((pass + 1))
                elif [ $status = 77 ]; then
                        echo "SKIP $name: $(tail -n 1 "$TEST_TMP/.err" | sed 's/^ *skip: //')"
                        echo "SKIP $name" >> "$RESULTS"; skipn=$((skipn + 1))
                else
                        echo "FAIL $name ($took s)"; sed 's/^/    /' "$TEST_TMP/.err" | tail -n 20
                        echo "FAIL $name" >> "$RESULTS"; failn=$((failn + 1))
                fi
        done
        rm -rf "$TEST_TMP"
        [ $failn = 0 ]
}
