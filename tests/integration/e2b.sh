#!/usr/bin/env bash
# nsboxd's E2B-compatible HTTP API (issue 22) against the real, unmodified npm packages, pinned in
# tests/e2b/package-lock.json (e2b, novita-sandbox, @e2b/cli, @e2b/code-interpreter) and installed
# once into a cache (npm_cache_dir in lib.sh: npm ci on first use; CI reaches npm's registry).
# One nsboxd of its own, on a private socket and `--http 127.0.0.1:PORT`, a key from
# `nsbox api-key create`; each tests/e2b/*.mjs program (control, commands, files, pty, novita,
# cli) runs with E2B_API_URL/E2B_SANDBOX_URL/E2B_API_KEY (and NOVITA_*) set, and each of its
# "ok NAME" / "not ok NAME: why" / "skip NAME: why" lines becomes a result
# integration/e2b.sh:PROGRAM.NAME; the program's own test fails too if any check failed or it
# crashed.  As root, nsboxd also serves $NSBOX_TEST_USER, whose key is the "another user's" key.
# Node.js 20.18.1 or later is required (e2b 2.x imports undici 7): an older node fails every test.
#
# The tier alone (root; then as the user, see tests/run's as_user):
#   R=$(mktemp); chmod 666 $R; NSBOX_SRC=$PWD NSBOX=$PWD/build/nsbox NSBOX_BUILD=$PWD/build \
#           RESULTS=$R TEST_AS=root bash tests/integration/e2b.sh
# One program: TEST_ONLY=test_files.  By hand against any server: copy tests/e2b/*.mjs next to a
# node_modules of tests/e2b's packages (cd tests/e2b && npm ci, or the cache's) and run
#   E2B_API_URL=http://127.0.0.1:PORT E2B_SANDBOX_URL=http://127.0.0.1:PORT E2B_API_KEY=KEY node files.mjs
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
NSBOX_SRC=${NSBOX_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
TENANT=${NSBOX_TEST_USER:-nsboxtest}
NODE_MIN=20.18.1

SESSION_DIR=$(mktemp -d /tmp/nsbox-e2b.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_SOCKET="$SESSION_DIR/d.sock" NSBOX_STORE="$SESSION_DIR/store"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"
DPID=""
exec 3>&1 # record_result of each check goes to the file's stdout, not to a test's captured one

stop_all() {
        local st=$?
        stop_file_daemon "$SESSION_DIR"
        if [ -n "$DPID" ] && pid_alive "$DPID"; then
                kill -TERM "$DPID" 2>/dev/null
                wait_pids_gone 5 "$DPID" >/dev/null || kill -KILL "$DPID" 2>/dev/null
        fi
        return $st
}
trap stop_all EXIT

# Why the setup failed, in one place every test reports (the tests run in subshells).
setup_failed() { printf '%s\n' "$*" > "$SESSION_DIR/setup.err"; return 1; }

free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# nsboxd --http on a free port (another port if it was taken meanwhile); sets DPID and PORT.
start_nsboxd() {
        # keys in a file of the session's: never in the machine's (or the user's) own key file,
        # where every run would leave two more, up to the 64 a user may hold; a template "root"
        # whose sandboxes' one user is root (commands.mjs: E2B's user "root")
        local keys="\"http\": {\"keys\": \"$SESSION_DIR/keys.json\"}, \"templates\": {\"root\": {\"create\": {\"policy\": \"root\"}}}" conf uid
        conf="{$keys}"
        if [ "$TEST_AS" = root ]; then
                uid=$(id -u "$TENANT") || { setup_failed "no user $TENANT (tests/run creates it)"; return 1; }
                conf="{$keys, \"clients\": {\"uids\": [$uid]}}"
        fi
        printf '%s\n' "$conf" > "$SESSION_DIR/config.json"
        for _ in 1 2 3; do
                PORT=$(free_port) || { setup_failed "no free TCP port"; return 1; }
                "$NSBOXD" --config "$SESSION_DIR/config.json" --socket "$NSBOX_SOCKET" --http "127.0.0.1:$PORT" \
                        >> "$SESSION_DIR/log" 2>&1 < /dev/null 3>&- &
                DPID=$!
                for _ in $(seq 300); do
                        if ! pid_alive "$DPID"; then
                                grep -qi 'in use' "$SESSION_DIR/log" && continue 2
                                setup_failed "nsboxd --http 127.0.0.1:$PORT exited at start: $(tail -n 5 "$SESSION_DIR/log")"
                                return 1
                        fi
                        if [ "$(daemon_pid)" = "$DPID" ] && (exec 4<> "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
                                return 0
                        fi
                        sleep 0.1
                done
                setup_failed "nsboxd --http 127.0.0.1:$PORT: no answer on its socket and port within 30 s: $(tail -n 5 "$SESSION_DIR/log")"
                return 1
        done
        setup_failed "nsboxd --http: port taken three times: $(tail -n 5 "$SESSION_DIR/log")"
}

# A key from nsbox api-key create (run as the user of the command given, e.g. through setpriv).
new_key() { # [COMMAND-PREFIX...]
        local out key
        # the key alone on stdout; stderr names its prefix, which is no key
        out=$("$@" "$NSBOX" api-key create 2> "$SESSION_DIR/key.err")
        key=$(printf '%s\n' "$out" | grep -xE 'e2b_[0-9a-f]{40}')
        [ -n "$key" ] || { setup_failed "nsbox api-key create${1:+ (as $TENANT)} gave no key (e2b_ + hex): $(printf '%s' "$out" | head -c 400) $(head -c 400 "$SESSION_DIR/key.err")"; return 1; }
        echo "$key"
}

setup() {
        command -v node > /dev/null || { setup_failed "node is missing: Node.js >= $NODE_MIN is needed (./quickstart.sh --deps)"; return 1; }
        command -v npm > /dev/null || { setup_failed "npm is missing (./quickstart.sh --deps)"; return 1; }
        local v; v=$(node --version 2>&1); v=${v#v}
        if [ "$(printf '%s\n%s\n' "$NODE_MIN" "$v" | sort -V | head -n 1)" != "$NODE_MIN" ]; then
                setup_failed "node $v is older than $NODE_MIN, which e2b 2.x needs (it imports undici 7): install Node.js 20.18.1+ (Debian 12's nodejs is 18)"
                return 1
        fi
        local dir
        dir=$(npm_cache_dir e2b node_modules/.package-lock.json "$NSBOX_SRC/tests/e2b" 2> "$SESSION_DIR/npm.err") ||
                { setup_failed "npm ci of tests/e2b failed: $(tail -n 5 "$SESSION_DIR/npm.err")"; return 1; }
        if ! { mkdir -p "$SESSION_DIR/e2b" && cp "$NSBOX_SRC"/tests/e2b/*.mjs "$SESSION_DIR/e2b/" &&
                ln -s "$dir/node_modules" "$SESSION_DIR/e2b/node_modules"; }; then
                setup_failed "cannot lay out $SESSION_DIR/e2b"
                return 1
        fi
        start_nsboxd || return 1
        KEY=$(new_key) || return 1
        if [ "$TEST_AS" = root ]; then
                OTHER_KEY=$(cd / && new_key setpriv --reuid="$TENANT" --regid="$TENANT" --init-groups env NSBOX_SOCKET="$NSBOX_SOCKET") || return 1
                export E2B_OTHER_API_KEY=$OTHER_KEY
        else
                E2B_SECOND_API_KEY=$(new_key) || return 1
                export E2B_SECOND_API_KEY
        fi
        export E2B_API_URL=http://127.0.0.1:$PORT E2B_SANDBOX_URL=http://127.0.0.1:$PORT E2B_API_KEY=$KEY
        export NOVITA_API_URL=$E2B_API_URL NOVITA_SANDBOX_URL=$E2B_SANDBOX_URL NOVITA_API_KEY=$KEY
        # no telemetry or update checks from the packages, nothing from the host's own E2B setup
        export NO_UPDATE_NOTIFIER=1 E2B_DEBUG=false
        unset E2B_DOMAIN NOVITA_DOMAIN E2B_ACCESS_TOKEN NOVITA_ACCESS_TOKEN
        touch "$SESSION_DIR/setup.ok"
}
setup

# Runs tests/e2b/NAME.mjs; each line it prints becomes a result (NAME.CHECK); fails when a check
# failed, the program crashed or hung, or printed no check at all.
e2b_program() { # NAME
        [ -e "$SESSION_DIR/setup.ok" ] || fail "$(cat "$SESSION_DIR/setup.err")"
        local name=$1 out="$TEST_TMP/$1.out" st line check status why n=0 bad=""
        (cd "$SESSION_DIR/e2b" && timeout -k 10 1200 node "$name.mjs") > "$out" 2> "$TEST_TMP/$name.err" 3>&-
        st=$?
        while IFS= read -r line; do
                case $line in
                "ok "*) status=PASS; check=${line#ok }; why="" ;;
                "not ok "*) status=FAIL; check=${line#not ok }; why=${check#*: }; check=${check%%: *} ;;
                "skip "*) status=SKIP; check=${line#skip }; why=${check#*: }; check=${check%%: *} ;;
                *) continue ;;
                esac
                n=$((n + 1))
                [ $status = FAIL ] && bad="$bad $check"
                record_result $status "$TEST_TIER/$TEST_FILE:$name.$check [$TEST_AS]" "$why" >&3
        done < "$out"
        [ $st = 124 ] || [ $st = 137 ] && fail "node $name.mjs did not end within 20 minutes; last lines: $(tail -n 3 "$out")"
        [ $n -gt 0 ] || fail "node $name.mjs printed no check (status $st): $(tail -n 5 "$TEST_TMP/$name.err")"
        [ -z "$bad" ] || fail "checks failed:$bad"
        [ $st = 0 ] || fail "node $name.mjs exited with status $st, no check failed: $(tail -n 5 "$TEST_TMP/$name.err")"
}

test_cli() { e2b_program cli; }
test_commands() { e2b_program commands; }
test_control() { e2b_program control; }
test_files() { e2b_program files; }
test_novita() { e2b_program novita; }
test_pty() { e2b_program pty; }

# Last (tests run in name order): the programs killed what they made; nsboxd holds no sandbox, runs
# no process, and the host has as many mounts as before.
test_zz_nothing_is_left() {
        [ -e "$SESSION_DIR/setup.ok" ] || fail "$(cat "$SESSION_DIR/setup.err")"
        for _ in $(seq 50); do
                [ "$("$NSBOX" ls --json 2>/dev/null)" = "[]" ] && break
                sleep 0.1
        done
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
