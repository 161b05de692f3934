#!/usr/bin/env bash
# nsbox watch through nsboxd, as a user sees it (issue 21's watch tool): a command's creates,
# writes, chmods, renames and removes reach the watch in order; recursive watches see new
# subdirectories; bad input and too many watches are one-line errors; Ctrl-C cancels.
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"
# In a sanitizer build, freed memory sits in ASan's quarantine (256 MiB by default) and counts as
# resident: keep it small so the unread watch's memory bound measures nsbox, not the sanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

SESSION_DIR=$(mktemp -d /tmp/nsbox-watch.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT

MY_SANDBOXES=""
new_sandbox() { # VAR
        local _sid
        _sid=$("$NSBOX" create 2>&1) || fail "nsbox create: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid'"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap 'cleanup; [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        printf -v "$1" %s "$_sid"
}

# Start `nsbox watch [-r] ID DIR` in the background into FILE, and return once it reports
# (a marker file touched until its create shows).
start_watch() { # FILE ID DIR [-r]
        local file=$1 id=$2 dir=$3 i
        "$NSBOX" watch ${4:-} "$id" "$dir" > "$file" 2>&1 &
        WATCH_PID=$!
        MY_PIDS="${MY_PIDS:-} $WATCH_PID"
        for i in $(seq 100); do
                "$NSBOX" exec "$id" -- touch "$dir/.ready"
                grep -q '\.ready$' "$file" && return 0
                kill -0 "$WATCH_PID" 2>/dev/null || fail "nsbox watch ended: $(cat "$file")"
                sleep 0.1
        done
        fail "nsbox watch $dir reported nothing: $(cat "$file")"
}

wait_for_line() { # FILE PATTERN
        local i
        for i in $(seq 100); do
                grep -q "$2" "$1" && return 0
                sleep 0.1
        done
        fail "no line '$2' in: $(cat "$1")"
}

stop_watch() { # ends $WATCH_PID as Ctrl-C does: status 0
        kill -INT "$WATCH_PID"
        wait "$WATCH_PID"
        assert_eq 0 "$?" "nsbox watch's status after SIGINT"
}

# ---- tests ---------------------------------------------------------------------------------

test_watch_sees_each_op_in_order() {
        trap cleanup EXIT
        new_sandbox id
        assert_status 0 "$NSBOX" exec "$id" -- mkdir /workspace/w
        start_watch "$TEST_TMP/w.out" "$id" /workspace/w
        assert_status 0 "$NSBOX" exec --cwd /workspace/w "$id" -- sh -c 'echo hi > a.txt; chmod 600 a.txt; mv a.txt b.txt; rm b.txt'
        wait_for_line "$TEST_TMP/w.out" '^remove file /workspace/w/b.txt$'
        stop_watch
        assert_eq "create file /workspace/w/a.txt
write file /workspace/w/a.txt
chmod file /workspace/w/a.txt
rename file /workspace/w/a.txt
create file /workspace/w/b.txt
remove file /workspace/w/b.txt" "$(grep -v '\.ready$' "$TEST_TMP/w.out")" "the watch's events"
}

test_watch_recursive_sees_a_new_subdirectory() {
        trap cleanup EXIT
        new_sandbox id
        assert_status 0 "$NSBOX" exec "$id" -- mkdir -p /workspace/r/old
        start_watch "$TEST_TMP/r.out" "$id" /workspace/r -r
        assert_status 0 "$NSBOX" exec --cwd /workspace/r "$id" -- sh -c 'mkdir -p sub/deeper && echo x > sub/deeper/f && echo y > old/g'
        wait_for_line "$TEST_TMP/r.out" '^write file /workspace/r/old/g$'
        wait_for_line "$TEST_TMP/r.out" '^create file /workspace/r/sub/deeper/f$'
        stop_watch
        grep -q '^create dir /workspace/r/sub$' "$TEST_TMP/r.out" || fail "no create of sub: $(cat "$TEST_TMP/r.out")"
        # relative paths are the caller's: from the sandbox's workdir
        start_watch "$TEST_TMP/rel.out" "$id" r
        assert_status 0 "$NSBOX" exec "$id" -- touch /workspace/r/t
        wait_for_line "$TEST_TMP/rel.out" '^create file r/t$'
        stop_watch
}

test_watch_bad_input_is_a_one_line_error() {
        trap cleanup EXIT
        new_sandbox id
        assert_status 125 "$NSBOX" watch "$id" /nope
        assert_one_line_error "$OUT"
        case "$OUT" in *file_not_found*) ;; *) fail "missing path: $OUT" ;; esac
        assert_status 0 "$NSBOX" exec "$id" -- touch /workspace/f
        assert_status 125 "$NSBOX" watch "$id" /workspace/f
        assert_one_line_error "$OUT"
        case "$OUT" in *not_a_directory*) ;; *) fail "a file: $OUT" ;; esac
        # a call that would not get the events
        assert_status 1 "$NSBOX" call "$id" watch '{"path": "/workspace"}'
        assert_one_line_error "$OUT"
        case "$OUT" in *invalid_argument*"stream: true"*) ;; *) fail "watch without stream: $OUT" ;; esac
}

# A directory on FUSE (bindfs, a user's own FUSE mount through fusermount when not root) bound
# into the sandbox: a watch with network_mounts false is refused in one line, since a network or
# FUSE file system may never report a change (E2B's allowNetworkMounts); the default watches it.
test_watch_of_a_fuse_directory_only_when_allowed() {
        local id pid i how
        mkdir "$TEST_TMP/fsrc" "$TEST_TMP/fmnt"
        chmod 777 "$TEST_TMP/fsrc" # as root, the sandbox's user is not the host's root
        command -v bindfs > /dev/null || fail "bindfs is not installed (./quickstart.sh --deps installs it)"
        # not root: fusermount mounts it, for this user alone (allow_other needs fuse.conf's consent)
        bindfs $([ "$(id -u)" = 0 ] || echo --no-allow-other) "$TEST_TMP/fsrc" "$TEST_TMP/fmnt" || fail "bindfs $TEST_TMP/fsrc $TEST_TMP/fmnt failed"
        trap 'cleanup; [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1; fusermount -u "$TEST_TMP/fmnt" 2> /dev/null || umount "$TEST_TMP/fmnt"' EXIT
        assert_eq fuse "$(findmnt -n -o FSTYPE "$TEST_TMP/fmnt")" "the host directory's file system"
        id=$("$NSBOX" create --bind "$TEST_TMP/fmnt:/data:rw,noidmap" 2>&1) || fail "nsbox create --bind on FUSE: $id"
        MY_SANDBOXES=$id
        cat > "$TEST_TMP/w.py" <<'PY'
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["NSBOX_SOCKET"])
params = {"path": "/data", "stream": True}
if sys.argv[2] != "default":
    params["network_mounts"] = sys.argv[2] == "true"
s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "call",
                       "params": {"sandbox": sys.argv[1], "tool": "watch", "params": params, "stream": True}}) + "\n").encode())
for line in s.makefile("rb"):
    m = json.loads(line)
    if m.get("id") == 1:  # the call's end: an error (or a result, which a watch has only when cancelled)
        print(json.dumps(m.get("error") or m.get("result")), flush=True)
        break
    p = m.get("params", {})
    if p.get("op"):
        print(p["op"], p.get("path"), flush=True)
PY
        OUT=$(timeout 20 python3 "$TEST_TMP/w.py" "$id" false 2>&1)
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of the refused watch"
        assert_contains "$OUT" "invalid_argument"
        assert_contains "$OUT" "'/data' is on a network file system"
        # the default (and network_mounts: true) watch it; its events come as on any directory
        for how in default true; do
                python3 "$TEST_TMP/w.py" "$id" "$how" > "$TEST_TMP/$how.out" 2>&1 &
                pid=$!
                MY_PIDS="${MY_PIDS:-} $pid"
                for i in $(seq 100); do
                        "$NSBOX" exec "$id" -- touch "/data/$how-$i"
                        grep -q "^create /data/$how-[0-9]*\$" "$TEST_TMP/$how.out" && break
                        kill -0 "$pid" 2> /dev/null || fail "the watch ($how) ended: $(cat "$TEST_TMP/$how.out")"
                        sleep 0.1
                done
                grep -q "^create /data/$how-[0-9]*\$" "$TEST_TMP/$how.out" || fail "no create event ($how): $(cat "$TEST_TMP/$how.out")"
                kill "$pid"
                wait "$pid" 2> /dev/null
        done
        [ -e "$TEST_TMP/fsrc/default-1" ] && [ -e "$TEST_TMP/fsrc/true-1" ] || fail "the files on the host: $(ls "$TEST_TMP/fsrc")"
        "$NSBOX" rm -f "$id" > /dev/null
        MY_SANDBOXES=""
}

test_watch_64_per_sandbox_then_cancelled_ones_free_their_place() {
        trap cleanup EXIT
        new_sandbox id
        local i pids=""
        for i in $(seq 64); do
                "$NSBOX" watch "$id" /workspace > "$TEST_TMP/$i.out" 2>&1 &
                pids="$pids $!"
        done
        MY_PIDS="$pids"
        # every one active: each sees the marker, touched until it does
        local n
        for i in $(seq 64); do
                for n in $(seq 100); do
                        grep -q ' /workspace/m$' "$TEST_TMP/$i.out" && break
                        "$NSBOX" exec "$id" -- touch /workspace/m
                        sleep 0.1
                done
                grep -q ' /workspace/m$' "$TEST_TMP/$i.out" || fail "watch $i saw nothing: $(cat "$TEST_TMP/$i.out")"
        done
        assert_status 125 "$NSBOX" watch "$id" /workspace
        assert_one_line_error "$OUT"
        case "$OUT" in *conflict*64*) ;; *) fail "65th watch: $OUT" ;; esac
        # shellcheck disable=SC2086
        kill -TERM $pids
        # shellcheck disable=SC2086
        wait $pids
        # the agent cancelled them when their clients went: a new one starts
        local tries
        for tries in $(seq 50); do
                start_watch "$TEST_TMP/again.out" "$id" /workspace 2>/dev/null && break
        done
        stop_watch
}

# A watch whose client reads nothing: a burst of some 400000 events stops in pipes, in bounded
# buffers (nsboxd's 16 MiB per client, the agent's 8 MiB) and in the kernel's inotify queue,
# which overflows; the sandbox still works.
test_watch_unread_burst_does_not_grow_memory() {
        trap cleanup EXIT
        new_sandbox id
        local dpid apid base_d base_a max_d max_a rss w
        dpid=$(daemon_pid)
        apid=$("$NSBOX" ls --json | python3 -c 'import json, sys; print([s["pid"] for s in json.load(sys.stdin) if s["id"] == sys.argv[1]][0])' "$id")
        assert_status 0 "$NSBOX" exec "$id" -- mkdir /workspace/burst
        mkfifo "$TEST_TMP/unread.fifo"
        "$NSBOX" watch "$id" /workspace/burst > "$TEST_TMP/unread.fifo" 2>&1 &
        w=$!
        MY_PIDS="$w"
        exec 3< "$TEST_TMP/unread.fifo" # open, never read
        sleep 1
        base_d=$(rss_of "$dpid") base_a=$(rss_of "$apid")
        max_d=$base_d max_a=$base_a
        "$NSBOX" exec --cwd /workspace/burst "$id" -- sh -c 'seq 200000 | xargs touch && seq 200000 | xargs rm' &
        local burst=$!
        while kill -0 "$burst" 2> /dev/null; do
                rss=$(rss_of "$dpid"); [ "$rss" -gt "$max_d" ] && max_d=$rss
                rss=$(rss_of "$apid"); [ "$rss" -gt "$max_a" ] && max_a=$rss
                sleep 0.2
        done
        wait "$burst" || fail "the burst of files failed"
        kill -0 "$w" 2> /dev/null || fail "nsbox watch ended while nobody read it"
        # read at last: what the buffers held, then the overflow the kernel's queue met meanwhile
        timeout 20 cat <&3 > "$TEST_TMP/read"
        kill "$w"
        exec 3<&-
        wait "$w" 2> /dev/null
        grep -q '^overflow' "$TEST_TMP/read" || fail "no overflow in $(wc -l < "$TEST_TMP/read") lines; last: $(tail -n 2 "$TEST_TMP/read")"
        echo "    RSS growth with an unread watch: nsboxd $((max_d - base_d)) kB, agent $((max_a - base_a)) kB" >&2
        # the bounds hold for nsbox's own builds; in a sanitizer build the agent (whose
        # environment is the sandbox's) keeps 256 MiB of freed memory in ASan's quarantine and
        # every allocation carries redzones, so RSS measures the sanitizer: there the overflow
        # above is what shows that nothing piled up
        if ! nm -D "$NSBOX_BUILD/libnsbox.so" 2> /dev/null | grep -q ' U __asan_init'; then
                [ $((max_d - base_d)) -lt 24576 ] || fail "nsboxd grew from $base_d kB to $max_d kB"
                [ $((max_a - base_a)) -lt 16384 ] || fail "the agent grew from $base_a kB to $max_a kB"
        fi
        assert_status 0 "$NSBOX" exec "$id" -- echo still-here
        assert_eq still-here "$OUT" "the sandbox after the burst"
}

rss_of() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# Last (tests run in name order): every test removed what it made.
test_zz_nothing_is_left() {
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
