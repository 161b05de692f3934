#!/usr/bin/env bash
# Snapshots, resets, forks, repository workspaces and recorded trajectories, as a user sees them
# through the nsbox command line: nsbox snapshot, snapshot ls/rm, reset, create --from/--count/
# --repo/--commit/--record, replay and gc, with nsboxd and the layer store behind them.
# Runs as root and as an unprivileged user (tests/run does both); as root a sandbox is frozen with
# the cgroup freezer, as a user without a delegated cgroup each process gets SIGSTOP.
# The shell scripts run in sandboxes are in single quotes on purpose: they expand inside.
# shellcheck disable=SC2016
. "$(dirname "$0")/../lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

# A daemon of our own on a socket of our own (short: a unix socket path is < 108 bytes), and a
# store of our own, which the daemon sees because the first client starts it with our
# environment.  Both go when this file ends.
SESSION_DIR=$(mktemp -d /tmp/nsbox-snap.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
export NSBOX_STORE="$SESSION_DIR/store"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"

# ---- helpers -------------------------------------------------------------------------------

# Evaluate a Python expression over the JSON document d read from standard input: a string is
# printed as it is, anything else as JSON (true, null, [1, 2]).
jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

# What a test made goes when it ends, whatever happens: its sandboxes, then its snapshots (and
# with them the layers only they used).
MY_SANDBOXES=""
MY_SNAPSHOTS=""
cleanup_test() {
        # shellcheck disable=SC2086
        [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES > /dev/null 2>&1
        local n
        for n in $MY_SNAPSHOTS; do "$NSBOX" snapshot rm "$n" > /dev/null 2>&1; done
        [ -z "${MY_PIDS:-}" ] || kill "$MY_PIDS" 2> /dev/null
}
arm_cleanup() { trap cleanup_test EXIT; }

# Create a sandbox into variable VAR.
new_sandbox() { # VAR [nsbox create options]
        local _var=$1 _sid; shift
        _sid=$("$NSBOX" create "$@" 2>&1) || fail "nsbox create $*: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create $* printed '$_sid', not a 32-hex-digit id"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        arm_cleanup
        printf -v "$_var" %s "$_sid"
}

# Take snapshot NAME of sandbox ID (removed when the test ends).
take_snapshot() { # ID NAME
        MY_SNAPSHOTS="$MY_SNAPSHOTS $2"
        arm_cleanup
        assert_status 0 "$NSBOX" snapshot "$1" "$2"
        assert_eq "$2" "$OUT" "output of nsbox snapshot $1 $2"
}

# A sandbox whose /workspace/NAME files hold the given contents, snapshotted as SNAP and removed.
snapshot_of_files() { # SNAP file=content...
        local snap=$1 sid kv; shift
        new_sandbox sid
        for kv in "$@"; do
                assert_status 0 "$NSBOX" exec "$sid" -- sh -c 'printf "%s\n" "$2" > "$1"' sh "${kv%%=*}" "${kv#*=}"
        done
        take_snapshot "$sid" "$snap"
        assert_status 0 "$NSBOX" rm "$sid"
}

snapshot_names() { "$NSBOX" snapshot ls --json | jget '" ".join(s["name"] for s in d)'; }
snapshot_field() { # NAME python-expression-over-s
        "$NSBOX" snapshot ls --json | jget "[$2 for s in d if s['name'] == '$1'][0]"
}
sandbox_ids() { "$NSBOX" ls --json | jget '" ".join(sorted(s["id"] for s in d))'; }

# The store's top-level entries: snapshot records, layers, repository records, unfinished layers.
store_state() {
        (cd "$NSBOX_STORE" && find snapshots layers repos tmp -mindepth 1 -maxdepth 1 -printf '%p\n' | LC_ALL=C sort)
}

# Layers named by a snapshot or a repository record, one per line, sorted.
named_layers() {
        python3 - "$NSBOX_STORE" <<'PY'
import glob, json, os, sys
ids = set()
for f in glob.glob(os.path.join(sys.argv[1], "snapshots", "*.json")):
    ids.update(json.load(open(f))["layers"])
for f in glob.glob(os.path.join(sys.argv[1], "repos", "*.json")):
    ids.add(json.load(open(f))["layer"])
print("\n".join(sorted(ids)))
PY
}

# Every snapshot record names layers that exist, and is complete JSON with its keys.
check_snapshot_records() {
        python3 - "$NSBOX_STORE" <<'PY' || fail "inconsistent store"
import glob, json, os, sys
store = sys.argv[1]
for f in glob.glob(os.path.join(store, "snapshots", "*")):
    base = os.path.basename(f)
    if not base.endswith(".json") or base.startswith("."):
        sys.exit("stray file in snapshots/: %s" % base)
    d = json.load(open(f))
    for k in ("name", "layers", "root", "workdir", "created", "source", "size"):
        if k not in d:
            sys.exit("%s has no '%s'" % (base, k))
    if d["name"] + ".json" != base:
        sys.exit("%s names itself '%s'" % (base, d["name"]))
    if not d["layers"]:
        sys.exit("%s has no layers" % base)
    for l in d["layers"]:
        if not os.path.isdir(os.path.join(store, "layers", l)):
            sys.exit("%s names a missing layer %s" % (base, l))
PY
}

trap 'stop_file_daemon "$SESSION_DIR"' EXIT

# What a sandbox shows of /workspace and /tmp/st: every entry with its mode, type, owner, size,
# link target and modification time (directories without their size, which differs between
# tmpfs and the store's file system), then the sha256 of every regular file.
LISTING='cd /workspace && {
        find . /tmp/st ! -type d -printf "%p %m %y %U:%G %s [%l] %T@\n"
        find . /tmp/st -type d -printf "%p %m %y %U:%G [] %T@\n"
} | LC_ALL=C sort && find . /tmp/st -type f -exec sha256sum {} + | LC_ALL=C sort -k 2'

# A user extended attribute on FILE in the sandbox, set (SET=value) or printed.
XATTR_TOOL=""
xattr_tool() { # sandbox id: which tool the sandbox has for user xattrs
        if "$NSBOX" exec "$1" -- sh -c 'command -v setfattr && command -v getfattr' > /dev/null 2>&1; then
                XATTR_TOOL=attr
        elif "$NSBOX" exec "$1" -- python3 -c 'import os; os.setxattr' > /dev/null 2>&1; then
                XATTR_TOOL=python3
        fi
}
xattr_set() { # id file value
        case $XATTR_TOOL in
        attr) "$NSBOX" exec "$1" -- setfattr -n user.snaptest -v "$3" "$2" ;;
        python3) "$NSBOX" exec "$1" -- python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.snaptest", sys.argv[2].encode())' "$2" "$3" ;;
        esac
}
xattr_get() { # id file
        case $XATTR_TOOL in
        attr) "$NSBOX" exec "$1" -- getfattr --only-values -n user.snaptest "$2" ;;
        python3) "$NSBOX" exec "$1" -- python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.snaptest").decode(), end="")' "$2" ;;
        esac
}

# ---- tests ---------------------------------------------------------------------------------

test_snapshot_then_reset_restores_content_modes_symlinks_and_deletions() {
        local id l0 l1 x0 s0layers s1layers
        new_sandbox id
        assert_status 0 "$NSBOX" exec "$id" -- sh -c '
                set -e
                mkdir -p sub/deep empty ro sg gone.d moved.d /tmp/st/inner
                printf "x-content\n" > x
                printf "secret\n" > sub/mode640 && chmod 0640 sub/mode640
                printf "#!/bin/sh\necho ran\n" > run.sh && chmod 0755 run.sh
                printf "deep\n" > sub/deep/file.txt
                printf "ro\n" > ro/inside
                echo g > sg/f && chmod 2775 sg
                ln -s sub/deep/file.txt lnk
                ln -s /nonexistent/target dangling
                printf "linked\n" > h1 && ln h1 h2
                printf "with space\n" > "name with space"
                : > empty.file
                mkfifo fifo
                head -c 300000 /dev/urandom > bin.dat
                printf "end" | dd of=sparse bs=1 seek=10485760 status=none
                echo g1 > gone.d/a && echo g2 > gone.d/b
                echo m > moved.d/m
                echo t > /tmp/st/tmpfile && echo i > /tmp/st/inner/deeper
                touch -h -d @1600000000.123456789 x lnk
                chmod 0555 ro'
        xattr_tool "$id"
        if [ -n "$XATTR_TOOL" ]; then
                xattr_set "$id" bin.dat value-0 || fail "cannot set a user xattr in the sandbox with $XATTR_TOOL"
        else
                echo "    (no setfattr nor python3 in the sandbox: extended attributes not checked)" >&2
        fi
        assert_status 0 "$NSBOX" exec "$id" -- sh -c "$LISTING"
        l0=$OUT
        assert_contains "$l0" "./x 644 f" "listing"
        assert_contains "$l0" "./sg 2775 d" "listing"
        assert_contains "$l0" "./lnk 777 l" "listing"
        assert_contains "$l0" "[sub/deep/file.txt] 1600000000.1234567890" "listing"
        assert_contains "$l0" "./fifo 644 p" "listing"
        take_snapshot "$id" st-s0
        s0layers=$(snapshot_field st-s0 's["layers"]')
        assert_eq 1 "$(echo "$s0layers" | jget 'len(d)')" "layers of a snapshot of a sandbox on no snapshot"
        # the sandbox goes on as it was
        assert_status 0 "$NSBOX" exec "$id" -- sh -c "$LISTING"
        assert_eq "$l0" "$OUT" "listing right after the snapshot"

        # on s0 (a lower layer now): delete x and a directory, replace one, move one, change modes
        assert_status 0 "$NSBOX" reset "$id" st-s0
        assert_eq "" "$OUT" "output of nsbox reset"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c "$LISTING"
        assert_eq "$l0" "$OUT" "listing after reset to st-s0"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c '
                set -e
                rm x
                rm -r gone.d && mkdir gone.d && echo c > gone.d/c
                mv moved.d moved2.d
                chmod 0600 sub/mode640
                echo t2 > /tmp/st/tmpfile
                rm /tmp/st/inner/deeper'
        [ -z "$XATTR_TOOL" ] || xattr_set "$id" bin.dat value-1 || fail "cannot change the user xattr"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c "$LISTING"
        l1=$OUT
        assert_not_contains "$l1" "./x " "listing after rm x"
        take_snapshot "$id" st-s1
        s1layers=$(snapshot_field st-s1 's["layers"]')
        assert_eq "$(echo "$s0layers" | jget 'd[0]')" "$(echo "$s1layers" | jget 'd[1]')" "st-s1's lower layer (st-s0's layer)"
        assert_eq 2 "$(echo "$s1layers" | jget 'len(d)')" "layers of st-s1"

        # change everything, then back to s1
        assert_status 0 "$NSBOX" exec "$id" -- sh -c '
                set -e
                echo x-again > x
                for f in run.sh h1 h2 bin.dat sparse empty.file "name with space" gone.d/c sg/f; do echo junk > "$f"; done
                rm -rf sub moved2.d && mkdir gone.d/new && ln -sf elsewhere lnk && rm dangling fifo
                chmod 0777 run.sh && chmod 0755 sg && chmod u+w ro && rm -r ro
                mkdir -p moved.d && echo back > moved.d/m
                rm -rf /tmp/st/* && echo other > /tmp/st/new'
        [ -z "$XATTR_TOOL" ] || xattr_set "$id" bin.dat changed
        assert_status 0 "$NSBOX" reset "$id" st-s1
        assert_status 0 "$NSBOX" exec "$id" -- sh -c "$LISTING"
        [ "$l1" = "$OUT" ] || fail "listing after reset to st-s1 differs from the one at snapshot time: $(diff <(echo "$l1") <(echo "$OUT") | head -n 20)"
        assert_status 1 "$NSBOX" exec "$id" -- sh -c 'test -e x || test -L x'
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'ls -A gone.d; stat -c %i h1 h2 | uniq | wc -l'
        assert_eq "c
1" "$OUT" "the replaced directory and the hard link pair after reset to st-s1"
        assert_status 0 "$NSBOX" exec "$id" -- ./run.sh
        assert_eq ran "$OUT" "the executable after reset"
        if [ -n "$XATTR_TOOL" ]; then
                assert_eq value-1 "$(xattr_get "$id" bin.dat)" "user xattr after reset to st-s1"
        fi

        # and back to s0: x is there again
        assert_status 0 "$NSBOX" reset "$id" st-s0
        assert_status 0 "$NSBOX" exec "$id" -- sh -c "$LISTING"
        [ "$l0" = "$OUT" ] || fail "listing after reset to st-s0 differs from the one at snapshot time: $(diff <(echo "$l0") <(echo "$OUT") | head -n 20)"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'cat x; ls -A gone.d | tr "\n" " "; stat -c %i h1 h2 | uniq | wc -l'
        assert_eq "x-content
a b 1" "$OUT" "x, gone.d and the hard links after reset to st-s0"
        assert_status 0 "$NSBOX" exec "$id" -- stat -c '%s %b %B' sparse
        local size blocks bsize
        read -r size blocks bsize <<< "$OUT"
        assert_eq 10485763 "$size" "size of the sparse file"
        [ $((blocks * bsize)) -lt 1048576 ] || fail "the sparse file of 10 MiB with 3 bytes of data takes $((blocks * bsize)) bytes after reset: its hole was filled"
        if [ -n "$XATTR_TOOL" ]; then
                assert_eq value-0 "$(xattr_get "$id" bin.dat)" "user xattr after reset to st-s0"
        fi
        # a fresh sandbox on st-s1 sees the same as the reset one did
        local f1
        new_sandbox f1 --from st-s1
        assert_status 0 "$NSBOX" exec "$f1" -- sh -c "$LISTING"
        x0=$OUT
        [ "$l1" = "$x0" ] || fail "listing of a sandbox created on st-s1 differs: $(diff <(echo "$l1") <(echo "$x0") | head -n 20)"
}

test_reset_without_name_returns_to_creation_state() {
        local id f
        new_sandbox id
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo a > /workspace/f; mkdir /workspace/d; echo b > /tmp/g'
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["sleep", "300"], "background": true}'
        assert_status 0 "$NSBOX" reset "$id"
        assert_eq "" "$OUT" "output of nsbox reset ID"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'ls -A /workspace; test -e /tmp/g && echo /tmp/g is there; ps -eo args= | grep -c "^sleep"; true'
        assert_eq "0" "$OUT" "files and processes after reset of a plain sandbox"
        assert_eq running "$("$NSBOX" ls --json | jget "[s['state'] for s in d if s['id'] == '$id'][0]")" "state after reset"

        # a sandbox created on a snapshot returns to it, not to a snapshot it was reset to since
        snapshot_of_files rn-base base.txt=base-content
        new_sandbox f --from rn-base
        assert_status 0 "$NSBOX" exec "$f" -- sh -c 'echo changed > base.txt; echo new > new.txt'
        take_snapshot "$f" rn-changed
        assert_status 0 "$NSBOX" reset "$f"
        assert_status 0 "$NSBOX" exec "$f" -- sh -c 'ls -A; cat base.txt'
        assert_eq "base.txt
base-content" "$OUT" "after reset of a --from sandbox"
        assert_status 0 "$NSBOX" reset "$f" rn-changed
        assert_eq rn-changed "$("$NSBOX" ls --json | jget "[s['snapshot'] for s in d if s['id'] == '$f'][0]")" "snapshot in nsbox ls --json after reset to rn-changed"
        assert_status 0 "$NSBOX" exec "$f" -- sh -c 'ls -A | tr "\n" " "; cat base.txt'
        assert_eq "base.txt new.txt changed" "$OUT" "after reset to rn-changed"
        # in use: rn-base (what it was created on, which reset returns to) and rn-changed (what it runs on)
        assert_eq "true true" "$(snapshot_field rn-base 's["in_use"]') $(snapshot_field rn-changed 's["in_use"]')" "in_use of rn-base, rn-changed"
        assert_status 125 "$NSBOX" snapshot rm rn-changed
        assert_contains "$OUT" "in use" "snapshot rm of the snapshot a sandbox was reset to"
        assert_status 0 "$NSBOX" reset "$f"
        assert_status 0 "$NSBOX" exec "$f" -- sh -c 'ls -A; cat base.txt'
        assert_eq "base.txt
base-content" "$OUT" "after reset to rn-changed, then reset without a name"
        assert_eq rn-base "$("$NSBOX" ls --json | jget "[s['snapshot'] for s in d if s['id'] == '$f'][0]")" "snapshot in nsbox ls --json after reset without a name"
        assert_eq "$f" "$("$NSBOX" ls --json | jget "[s['id'] for s in d if s['id'] == '$f'][0]")" "the id after resets"
        # back on its creation snapshot, the sandbox no longer uses rn-changed
        assert_eq "true false" "$(snapshot_field rn-base 's["in_use"]') $(snapshot_field rn-changed 's["in_use"]')" "in_use of rn-base, rn-changed after reset without a name"
}

test_fork_10_sandboxes_each_sees_only_its_own_change() {
        local ids i own eleventh out
        snapshot_of_files fork-base shared.txt=orig
        out=$("$NSBOX" create --from fork-base --count 10 2>&1)
        local st=$?
        ids=$(printf '%s\n' "$out" | grep -E '^[0-9a-f]{32}$')
        MY_SANDBOXES="$MY_SANDBOXES ${ids//$'\n'/ }"
        arm_cleanup
        assert_eq 0 "$st" "status of create --count 10: $out"
        assert_eq 10 "$(printf '%s\n' "$out" | grep -c .)" "lines printed by create --count 10"
        assert_eq 10 "$(printf '%s\n' "$ids" | sort -u | grep -c .)" "distinct ids printed by create --count 10"
        assert_eq true "$(snapshot_field fork-base 's["in_use"]')" "in_use with 10 forks"
        for i in $ids; do
                assert_status 0 "$NSBOX" exec "$i" -- sh -c 'test "$(cat shared.txt)" = orig && echo "$1" > shared.txt && echo "$1" > /tmp/own' sh "$i"
        done
        for i in $ids; do
                assert_status 0 "$NSBOX" exec "$i" -- sh -c 'cat shared.txt /tmp/own'
                own=$OUT
                assert_eq "$i
$i" "$own" "what fork $i reads back"
        done
        assert_status 0 "$NSBOX" run --from fork-base -- sh -c 'cat shared.txt; echo run > shared.txt'
        assert_eq orig "$OUT" "nsbox run --from fork-base"
        new_sandbox eleventh --from fork-base
        assert_status 0 "$NSBOX" exec "$eleventh" -- sh -c 'cat shared.txt; ls -A /tmp'
        assert_eq orig "$OUT" "the snapshot's file in an 11th fork"
        # shellcheck disable=SC2086
        assert_status 0 "$NSBOX" rm $ids "$eleventh"
        assert_eq false "$(snapshot_field fork-base 's["in_use"]')" "in_use once every fork is removed"
}

# A writer appends n to log, then writes n to last.tmp and renames it to last, forever.  A copy
# taken at one instant (frozen) shows log = 1..n, complete lines, and last = n-1 or n (n-1 when
# last.tmp exists, holding n or nothing yet); a copy made while it runs would show log and last
# from different moments, a half-written line, or fail on last renamed under it.
test_snapshot_while_writing_is_consistent() {
        local id client k f n prev=0
        new_sandbox id
        "$NSBOX" exec "$id" -- sh -c 'i=0; while :; do i=$((i+1)); echo $i >> /workspace/log; echo $i > /workspace/last.tmp && mv /workspace/last.tmp /workspace/last; done' > /dev/null 2>&1 &
        client=$!
        MY_PIDS=$client
        sleep 0.3
        for k in 1 2 3; do
                assert_status 0 "$NSBOX" snapshot "$id" "wr-$k"
                MY_SNAPSHOTS="$MY_SNAPSHOTS wr-$k"
                sleep 0.2
        done
        kill -0 "$client" 2> /dev/null || fail "the writer's client ended during the snapshots"
        for k in 1 2 3; do
                new_sandbox f --from "wr-$k"
                "$NSBOX" exec "$f" -- cat /workspace/log > "$TEST_TMP/log" 2>&1 || fail "no log in wr-$k: $(head -c 300 "$TEST_TMP/log")"
                "$NSBOX" exec "$f" -- sh -c 'if [ -e last ]; then cat last; else echo none; fi; if [ -e last.tmp ]; then echo "tmp:$(cat last.tmp)"; fi' > "$TEST_TMP/last" 2>&1
                n=$(python3 - "$TEST_TMP/log" "$TEST_TMP/last" <<'PY'
import sys
log = open(sys.argv[1]).read()
last = open(sys.argv[2]).read().split("\n")
def bad(why):
    sys.exit("%s (log: %d bytes, ends %r; last: %r)" % (why, len(log), log[-30:], last))
if log and not log.endswith("\n"):
    bad("the log ends in a partial line")
lines = log.split("\n")[:-1]
if lines != [str(i) for i in range(1, len(lines) + 1)]:
    bad("the log is not 1..n")
n = len(lines)
l = 0 if last[0] == "none" else int(last[0])
tmp = [x for x in last if x.startswith("tmp:")]
if tmp:
    if l != n - 1 or tmp[0] not in ("tmp:", "tmp:%d" % n):
        bad("last.tmp exists with last %d, log's tail %d" % (l, n))
elif l not in (n - 1, n):
    bad("last is %d, log's tail %d" % (l, n))
print(n)
PY
) || fail "snapshot wr-$k is not a consistent copy: $n"
                [ "$n" -gt "$prev" ] || fail "wr-$k holds $n lines, the snapshot before $prev: the writer did not go on between snapshots"
                prev=$n
                assert_status 0 "$NSBOX" rm "$f"
        done
        [ "$prev" -ge 20 ] || fail "only $prev lines written in a second"
        kill "$client" 2> /dev/null
        wait "$client" 2> /dev/null
        return 0
}

test_snapshot_does_not_stop_the_sandbox() {
        local id client c1 c2 c3 i
        new_sandbox id
        "$NSBOX" exec "$id" -- sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.01; done' > /dev/null 2>&1 &
        client=$!
        MY_PIDS=$client
        for i in $(seq 50); do
                "$NSBOX" exec "$id" -- test -e /tmp/count > /dev/null 2>&1 && break
                sleep 0.1
        done
        MY_SNAPSHOTS="$MY_SNAPSHOTS run-on"
        assert_status 0 "$NSBOX" snapshot --json "$id" run-on
        assert_eq "run-on $id True" "$(echo "$OUT" | jget '"%s %s %s" % (d["name"], d["sandbox"], all(isinstance(d[k], (int, float)) and d[k] >= 0 for k in ("files", "dirs", "bytes", "copy_ms", "sync_ms", "duration_ms")))')" "nsbox snapshot --json"
        assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/count
        c1=$OUT
        assert_status 0 "$NSBOX" call "$id" exists '{"path": "/tmp/count"}'
        assert_eq true "$(echo "$OUT" | jget 'd["exists"]')" "a tool call after the snapshot"
        sleep 0.5
        assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/count
        c2=$OUT
        [ "$c2" -gt "$c1" ] 2> /dev/null || fail "the counter stood still after the snapshot: $c1, then $c2 half a second later"
        kill -0 "$client" 2> /dev/null || fail "the client of the background loop ended"
        assert_eq running "$("$NSBOX" ls --json | jget "[s['state'] for s in d if s['id'] == '$id'][0]")" "state after the snapshot"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'ps -eo stat=,args= | grep "sh -c i=0" | grep -v grep | cut -c1'
        assert_not_contains "$OUT" "T" "the loop's process state (T: stopped)"
        # a second snapshot right after the first: the same
        take_snapshot "$id" run-on2
        sleep 0.3
        assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/count
        c3=$OUT
        [ "$c3" -gt "$c2" ] 2> /dev/null || fail "the counter stood still after a second snapshot: $c2, then $c3"
        # a paused sandbox (cgroup freezer: when the sandbox has a cgroup) stays paused
        if "$NSBOX" pause "$id" > /dev/null 2>&1; then
                assert_status 0 "$NSBOX" snapshot "$id" run-paused
                MY_SNAPSHOTS="$MY_SNAPSHOTS run-paused"
                assert_eq paused "$("$NSBOX" ls --json | jget "[s['state'] for s in d if s['id'] == '$id'][0]")" "state after a snapshot of a paused sandbox"
                assert_status 0 "$NSBOX" resume "$id"
                sleep 0.3
                assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/count
                [ "$OUT" -gt "$c3" ] 2> /dev/null || fail "the counter stood still after resume: $c3, then $OUT"
        fi
        kill "$client" 2> /dev/null
        wait "$client" 2> /dev/null
        return 0
}

# A process stopped between vfork and exec keeps its parent in vfork (state D), where SIGSTOP cannot
# stop it: a sandbox frozen with signals (no cgroup) cannot be stopped whole.  The snapshot may
# fail then, but the sandbox must go on, and nsboxd must serve other clients meanwhile.
test_snapshot_of_a_sandbox_that_cannot_be_stopped_leaves_it_running() {
        local id st i t0 ls_ms
        [ "$(uname -m)" = x86_64 ] || skip "the vfork test uses x86_64 system call numbers"
        new_sandbox id
        "$NSBOX" exec "$id" -- sh -c 'command -v perl' > /dev/null 2>&1 || skip "no perl in the sandbox"
        # vfork (58); in the child: kill (62) getpid (39) with SIGSTOP (19), then _exit (60)
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["perl", "-e", "my $p = syscall(58); if ($p == 0) { syscall(62, syscall(39), 19); syscall(60, 0) } sleep 1000"], "background": true}'
        for i in $(seq 50); do
                "$NSBOX" exec "$id" -- ps -eo stat=,args= | grep -q '^T.*perl' && break
                sleep 0.1
        done
        ( sleep 0.5; t0=$(date +%s%N); "$NSBOX" ls > /dev/null 2>&1; echo $((($(date +%s%N) - t0) / 1000000)) > "$TEST_TMP/ls_ms" ) &
        MY_SNAPSHOTS="$MY_SNAPSHOTS stuck"
        "$NSBOX" snapshot "$id" stuck > "$TEST_TMP/out" 2>&1
        st=$?
        wait
        if [ "$st" != 0 ]; then
                assert_eq 1 "$st" "status of a snapshot that could not stop the sandbox: $(cat "$TEST_TMP/out")"
                assert_one_line_error "$(cat "$TEST_TMP/out")"
                assert_not_contains " $(snapshot_names) " " stuck " "snapshots after a failed snapshot"
        fi
        timeout 5 "$NSBOX" exec "$id" -- echo alive > "$TEST_TMP/out" 2>&1
        assert_eq "0 alive" "$? $(cat "$TEST_TMP/out")" "exec after the snapshot (124: the sandbox hangs)"
        timeout 5 "$NSBOX" exec "$id" -- ps -eo pid=,stat=,args= > "$TEST_TMP/out" 2>&1
        assert_eq "" "$(grep -v perl "$TEST_TMP/out" | awk '$2 ~ /^T/')" "stopped processes in the sandbox after the snapshot"
        ls_ms=$(cat "$TEST_TMP/ls_ms")
        [ "$ls_ms" -lt 1000 ] || fail "nsbox ls took $ls_ms ms while nsboxd was stopping a sandbox"
}

test_repo_at_commit_shows_it_as_head_and_reset_restores_it() {
        local repo="$TEST_TMP/repo" c1 c2 c3 id id2 id3 id4 agent_commit
        command -v git > /dev/null || skip "no git on the host to build a test repository"
        g() { git -C "$repo" -c user.name=t -c user.email=t@t "$@"; }
        git init -q "$repo" || fail "git init"
        echo v1 > "$repo/f.txt"; g add f.txt; g commit -qm c1
        echo v2 > "$repo/f.txt"; g commit -qam c2
        echo v3 > "$repo/f.txt"; echo three > "$repo/new3.txt"; g add new3.txt; g commit -qam c3
        c1=$(g rev-parse HEAD~2) c2=$(g rev-parse HEAD~1) c3=$(g rev-parse HEAD)
        new_sandbox id --repo "$repo" --commit "$c2"
        assert_status 0 "$NSBOX" call "$id" git_log '{}'
        assert_eq "[\"$c2\", \"$c1\"]" "$(echo "$OUT" | jget '[c["id"] for c in d["commits"]]')" "git_log at the middle commit"
        assert_status 0 "$NSBOX" call "$id" git_status '{}'
        assert_eq "$c2 true" "$(echo "$OUT" | jget '"%s %s" % (d["head"], json.dumps(d["clean"]))')" "git_status head and clean"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'pwd; cat f.txt; ls -A | tr "\n" " "'
        assert_eq "/workspace
v2
.git f.txt " "$OUT" "work tree at the middle commit"
        # the agent edits and commits; reset takes it back to the commit, edits gone
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "f.txt", "content": "agent\n"}'
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "agent.txt", "content": "a\n"}'
        assert_status 0 "$NSBOX" call "$id" git_commit '{"message": "agent work"}'
        agent_commit=$(echo "$OUT" | jget 'd["id"]')
        assert_status 0 "$NSBOX" call "$id" git_status '{}'
        assert_eq "$agent_commit" "$(echo "$OUT" | jget 'd["head"]')" "head after the agent's commit"
        assert_ne "$c2" "$agent_commit" "the agent's commit"
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "f.txt", "content": "uncommitted\n"}'
        assert_status 0 "$NSBOX" reset "$id"
        assert_status 0 "$NSBOX" call "$id" git_status '{}'
        assert_eq "$c2 true []" "$(echo "$OUT" | jget '"%s %s %s" % (d["head"], json.dumps(d["clean"]), json.dumps(d["entries"]))')" "git_status after reset"
        assert_status 0 "$NSBOX" call "$id" git_log '{}'
        assert_eq "[\"$c2\", \"$c1\"]" "$(echo "$OUT" | jget '[c["id"] for c in d["commits"]]')" "git_log after reset"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'cat f.txt; ls -A | tr "\n" " "'
        assert_eq "v2
.git f.txt " "$OUT" "work tree after reset"
        # a file:// URL, at the first commit; without --commit: HEAD
        new_sandbox id2 --repo "file://$repo" --commit "$c1"
        assert_status 0 "$NSBOX" call "$id2" git_status '{}'
        assert_eq "$c1" "$(echo "$OUT" | jget 'd["head"]')" "head of a file:// clone at the first commit"
        assert_status 0 "$NSBOX" exec "$id2" -- cat f.txt
        assert_eq v1 "$OUT" "f.txt of a file:// clone at the first commit"
        new_sandbox id3 --repo "$repo"
        assert_status 0 "$NSBOX" call "$id3" git_status '{}'
        assert_eq "$c3" "$(echo "$OUT" | jget 'd["head"]')" "head of a clone without --commit"
        assert_status 0 "$NSBOX" exec "$id3" -- sh -c 'cat f.txt new3.txt'
        assert_eq "v3
three" "$OUT" "files of a clone without --commit"
        # the same repository and full commit again: the clone in the store serves it
        local entries
        entries() {
                python3 - "$NSBOX_STORE" "$repo" "$c2" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "repos", "*.json"))):
    d = json.load(open(f))
    if d["url"] == sys.argv[2] and d["commit"] == sys.argv[3]:
        print(os.path.basename(f), d["layer"], d["created"])
PY
        }
        entries=$(entries)
        assert_eq 1 "$(printf '%s\n' "$entries" | grep -c .)" "repos/ entries for $repo at $c2: $entries"
        g commit -q --allow-empty -m "moved on" # the source changes: a cached clone does not care
        new_sandbox id4 --repo "$repo" --commit "$c2"
        assert_eq "$entries" "$(entries)" "repos/ entries for $repo at $c2 after a second create"
        assert_status 0 "$NSBOX" call "$id4" git_status '{}'
        assert_eq "$c2" "$(echo "$OUT" | jget 'd["head"]')" "head of the second sandbox at the middle commit"
        assert_status 0 "$NSBOX" exec "$id4" -- cat f.txt
        assert_eq v2 "$OUT" "f.txt of the second sandbox"
}

# 20 tool calls on a sandbox created on a snapshot, a snapshot and a reset, recorded; replayed
# on the same snapshot everything matches; on one whose data.txt differs, step 13 (the first
# to read it) diverges.
test_record_20_calls_then_replay_matches() {
        local id rec="$TEST_TMP/rec/trajectory.jsonl" sandboxes_before snaps_before
        mkdir -p "$TEST_TMP/rec"
        snapshot_of_files rp-a data.txt=alpha
        snapshot_of_files rp-b data.txt=bravo-two
        # a relative --record path is the client's
        id=$(cd "$TEST_TMP/rec" && "$NSBOX" create --from rp-a --record trajectory.jsonl 2>&1) || fail "create --record: $id"
        MY_SANDBOXES="$MY_SANDBOXES $id"
        arm_cleanup
        [ -f "$rec" ] || fail "no trajectory at $rec"
        local calls=(
                'write_file {"path": "a.txt", "content": "one\ntwo\n"}'
                'read_file {"path": "a.txt"}'
                'exists {"path": "a.txt"}'
                'mkdir {"path": "d"}'
                'write_file {"path": "d/b.txt", "content": "bee\n"}'
                'list_dir {"path": "d"}'
                'edit_file {"path": "a.txt", "old_string": "two", "new_string": "TWO"}'
                'read_file {"path": "a.txt"}'
                'stat {"path": "d/b.txt"}'
                'grep {"pattern": "TWO", "path": "."}'
                'glob {"pattern": "**/*.txt"}'
                'exec {"cmd": ["cat", "a.txt", "d/b.txt"]}'
                'read_file {"path": "data.txt"}'
                'write_file {"path": "c.txt", "content": "sea\n"}'
                'rename {"from": "c.txt", "to": "d/c.txt"}'
                'exists {"path": "c.txt"}'
                'exec {"shell": "wc -c < data.txt"}'
                'read_file {"path": "d/c.txt"}'
                'remove {"path": "d/c.txt"}'
                'list_dir {"path": "d"}'
        )
        local c i=0
        for c in "${calls[@]}"; do
                i=$((i + 1))
                "$NSBOX" call "$id" "${c%% *}" "${c#* }" > "$TEST_TMP/out" 2>&1 || fail "call $i (${c%% *}) failed: $(head -c 300 "$TEST_TMP/out")"
        done
        assert_status 0 "$NSBOX" snapshot "$id" rp-mid
        MY_SNAPSHOTS="$MY_SNAPSHOTS rp-mid"
        assert_status 0 "$NSBOX" call "$id" write_file '{"path": "after.txt", "content": "x"}'
        assert_status 0 "$NSBOX" reset "$id" rp-mid
        assert_status 1 "$NSBOX" call "$id" read_file '{"path": "after.txt"}'
        assert_status 0 "$NSBOX" rm "$id"
        # the file: a header, then steps 1..24 with what they were
        python3 - "$rec" <<'PY' || fail "the trajectory file"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0].get("nsbox_trajectory") == 1, lines[0]
assert lines[0]["create"]["from"] == "rp-a", lines[0]
steps = lines[1:]
assert [s["step"] for s in steps] == list(range(1, 25)), [s["step"] for s in steps]
ops = [s["op"] if s["op"] != "call" else s["tool"] for s in steps]
assert ops[12] == "read_file" and ops[20:] == ["snapshot", "write_file", "reset", "read_file"], ops
assert steps[23]["error"] == "file_not_found", steps[23]
assert all(s["error"] is None for s in steps[:23]), [s["error"] for s in steps]
PY
        sandboxes_before=$(sandbox_ids)
        snaps_before=$(snapshot_names)
        assert_status 0 "$NSBOX" replay "$rec"
        assert_eq 25 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of the replay report: $OUT"
        assert_eq 24 "$(printf '%s\n' "$OUT" | grep -cE '^step [0-9]+ [a-z_]+: match$')" "matching steps: $OUT"
        assert_contains "$(printf '%s\n' "$OUT" | tail -n 1)" "no divergence" "last line of the replay"
        assert_contains "$OUT" "step 21 snapshot: match" "replay"
        assert_contains "$OUT" "step 23 reset: match" "replay"
        assert_eq "$sandboxes_before" "$(sandbox_ids)" "sandboxes after the replay"
        assert_eq "$snaps_before" "$(snapshot_names)" "snapshots after the replay (its own removed)"
        # on a snapshot whose data.txt differs
        assert_status 1 "$NSBOX" replay --from rp-b "$rec"
        assert_contains "$OUT" "step 12 exec: match" "replay --from rp-b"
        assert_contains "$OUT" "step 13 read_file: MISMATCH" "replay --from rp-b"
        assert_contains "$OUT" "step 14 write_file: match" "replay --from rp-b"
        assert_contains "$(printf '%s\n' "$OUT" | tail -n 1)" "first divergent step: 13 (read_file)" "last line of the replay --from rp-b"
        assert_status 1 "$NSBOX" replay --from rp-b --json "$rec"
        assert_eq "24 22 2 13 [13, 17]" "$(echo "$OUT" | jget '"%s %s %s %s %s" % (d["steps"], d["matched"], d["mismatched"], d["first_divergent_step"], [r["step"] for r in d["results"] if not r["match"]])')" "replay --json: steps, matched, mismatched, first_divergent_step, mismatched steps"
        # the snapshot it was recorded on, taken again with other content
        assert_status 0 "$NSBOX" snapshot rm rp-a
        snapshot_of_files rp-a data.txt=charlie
        assert_status 1 "$NSBOX" replay "$rec"
        assert_contains "$(printf '%s\n' "$OUT" | tail -n 1)" "first divergent step: 13 (read_file)" "replay on a new rp-a"
        assert_eq "$sandboxes_before" "$(sandbox_ids)" "sandboxes after three replays"
        assert_eq "$snaps_before" "$(snapshot_names)" "snapshots after three replays"
}

# nsbox exec records its command as an exec step too ("every tool call made to the sandbox, through
# any client"); a replay on the same base must find it matching.
test_record_exec_from_the_command_line_replays_as_match() {
        local id rec="$TEST_TMP/exec-trajectory.jsonl"
        id=$("$NSBOX" create --record "$rec" 2>&1) || fail "create --record: $id"
        MY_SANDBOXES="$MY_SANDBOXES $id"
        arm_cleanup
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo hello > f; cat f'
        assert_status 0 "$NSBOX" exec "$id" -- true
        assert_status 0 "$NSBOX" call "$id" read_file '{"path": "f"}'
        assert_status 0 "$NSBOX" rm "$id"
        assert_eq "exec exec read_file" "$(tail -n +2 "$rec" | python3 -c 'import json, sys; print(" ".join(json.loads(l)["tool"] for l in sys.stdin))')" "recorded steps"
        assert_status 0 "$NSBOX" replay "$rec"
        assert_contains "$OUT" "no divergence" "replay of nsbox exec steps"
}

test_bad_input_gets_one_line_errors_and_changes_nothing() {
        local id gone before sandboxes errors=() long129 long128 e
        snapshot_of_files bad-s f=1
        new_sandbox id
        new_sandbox gone
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo keep > keep.txt'
        assert_status 0 "$NSBOX" call "$id" exec '{"cmd": ["sleep", "300"], "background": true}'
        assert_status 0 "$NSBOX" rm "$gone"
        # a name of 128 characters is fine (and goes again)
        long128=$(printf 'a%.0s' $(seq 128))
        long129=${long128}b
        assert_status 0 "$NSBOX" snapshot "$id" "$long128"
        assert_status 0 "$NSBOX" snapshot rm "$long128"
        before=$(store_state)
        sandboxes=$(sandbox_ids)
        # unknown snapshots
        assert_status 125 "$NSBOX" create --from nosuch
        assert_contains "$OUT" "no snapshot 'nosuch'" "create --from nosuch"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" reset "$id" nosuch
        assert_contains "$OUT" "no snapshot 'nosuch'" "reset ID nosuch"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" snapshot rm nosuch
        assert_contains "$OUT" "no snapshot 'nosuch'" "snapshot rm nosuch"
        errors+=("$OUT")
        # a name already bound
        assert_status 125 "$NSBOX" snapshot "$id" bad-s
        assert_contains "$OUT" "exists" "snapshot ID existing-name"
        errors+=("$OUT")
        # invalid names
        local name
        # (a name starting with '-' is taken for an option where it could be one: also a usage error)
        assert_status 125 "$NSBOX" snapshot "$id" -x
        errors+=("$OUT")
        for name in ../x .hidden "" "$long129" "a/b"; do
                assert_status 125 "$NSBOX" snapshot "$id" "$name"
                assert_contains "$OUT" "invalid snapshot name" "snapshot ID '$name'"
                errors+=("$OUT")
                assert_status 125 "$NSBOX" create --from "$name"
                assert_contains "$OUT" "invalid snapshot name" "create --from '$name'"
                errors+=("$OUT")
                assert_status 125 "$NSBOX" reset "$id" "$name"
                assert_contains "$OUT" "invalid snapshot name" "reset ID '$name'"
                errors+=("$OUT")
                assert_status 125 "$NSBOX" snapshot rm "$name"
                assert_contains "$OUT" "invalid snapshot name" "snapshot rm '$name'"
                errors+=("$OUT")
        done
        # a destroyed sandbox
        assert_status 125 "$NSBOX" snapshot "$gone" bad-gone
        assert_contains "$OUT" "not_found" "snapshot of a destroyed sandbox"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" reset "$gone"
        assert_contains "$OUT" "not_found" "reset of a destroyed sandbox"
        errors+=("$OUT")
        # a snapshot in use
        local user
        new_sandbox user --from bad-s
        assert_eq bad-s "$("$NSBOX" ls --json | jget "[s['snapshot'] for s in d if s['id'] == '$user'][0]")" "the snapshot a sandbox runs on"
        before=$(store_state)
        sandboxes=$(sandbox_ids)
        assert_status 125 "$NSBOX" snapshot rm bad-s
        assert_contains "$OUT" "in use" "snapshot rm of a snapshot in use"
        errors+=("$OUT")
        assert_contains " $(snapshot_names) " " bad-s " "snapshots after a refused rm"
        # repositories
        local repo="$TEST_TMP/badrepo"
        { git init -q "$repo" && echo x > "$repo/x" && git -C "$repo" add x && git -C "$repo" -c user.name=t -c user.email=t@t commit -qm x; } || fail "git"
        mkdir -p "$TEST_TMP/notrepo"
        assert_status 125 "$NSBOX" create --commit HEAD
        assert_contains "$OUT" "--commit needs --repo" "--commit without --repo"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" create --repo "$repo" --from bad-s
        assert_contains "$OUT" "--repo and --from" "--repo with --from"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" create --repo "$repo" --commit 0123456789abcdef0123456789abcdef01234567
        assert_contains "$OUT" "not found" "unknown commit"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" create --repo "$repo" --commit no-such-branch
        assert_contains "$OUT" "not found" "unknown branch"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" create --repo "$TEST_TMP/notrepo"
        assert_contains "$OUT" "not a git repository" "a directory that is no repository"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" create --repo "$TEST_TMP/missing-dir"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" create --repo https://example.com/x.git
        assert_contains "$OUT" "network" "an https:// repository"
        errors+=("$OUT")
        # trajectories
        assert_status 125 "$NSBOX" replay "$TEST_TMP/no-such-trajectory.jsonl"
        errors+=("$OUT")
        printf 'garbage\n' > "$TEST_TMP/garbage.jsonl"
        assert_status 125 "$NSBOX" replay "$TEST_TMP/garbage.jsonl"
        errors+=("$OUT")
        printf '{"nsbox_trajectory":1,"sandbox":"x","created":1,"create":{}}\n{"step":1,"op":"call"}\n' > "$TEST_TMP/partial.jsonl"
        assert_status 125 "$NSBOX" replay "$TEST_TMP/partial.jsonl"
        errors+=("$OUT")
        : > "$TEST_TMP/empty.jsonl"
        assert_status 125 "$NSBOX" replay "$TEST_TMP/empty.jsonl"
        errors+=("$OUT")
        assert_status 125 "$NSBOX" replay --from nosuch "$TEST_TMP/garbage.jsonl"
        errors+=("$OUT")
        for e in "${errors[@]}"; do assert_one_line_error "$e"; done
        # nothing changed: the store, the sandboxes, the sandbox's files and processes
        assert_eq "$before" "$(store_state)" "the store after bad input"
        assert_eq "$sandboxes" "$(sandbox_ids)" "sandboxes after bad input"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'cat keep.txt; ps -eo args= | grep -c "^sleep 300"'
        assert_eq "keep
1" "$OUT" "the sandbox's file and background process after refused resets"
}

# Kill nsboxd while it copies 200 MB into the store: the store has the whole snapshot or none of
# it, gc removes the rest, and nothing of the sandbox is left running or mounted.
test_kill_9_of_nsboxd_during_snapshot_leaves_the_store_consistent() {
        local id dpid children client st delay killed_mid_copy="" i mounts_before out
        mounts_before=$(grep -c . /proc/self/mountinfo)
        for delay in 0.05 0.2 0.5 1; do
                new_sandbox id --disk 1G
                assert_status 0 "$NSBOX" exec "$id" -- sh -c 'for i in 1 2 3 4; do head -c 52428800 /dev/urandom > big$i; done; mkdir many; for i in $(seq 500); do echo $i > many/$i; done'
                dpid=$(daemon_pid)
                [ -n "$dpid" ] || fail "no nsboxd answers ping"
                "$NSBOX" snapshot "$id" big > "$TEST_TMP/snap.out" 2>&1 &
                client=$!
                # the copy has begun when tmp/ has the layer being written
                for i in $(seq 100); do
                        [ -n "$(ls -A "$NSBOX_STORE/tmp" 2> /dev/null)" ] && break
                        sleep 0.02
                done
                sleep "$delay"
                children=$(ps --ppid "$dpid" -o pid= | tr -d ' ' | tr '\n' ' ')
                kill -KILL "$dpid"
                wait "$client"
                st=$?
                out=$(cat "$TEST_TMP/snap.out")
                local left
                # shellcheck disable=SC2086 # one pid per word
                left=$(wait_pids_gone 5 "$dpid" $children) || { left=${left# }; fail "still running 5 s after kill -9 of nsboxd: $(ps -o pid=,args= -p "${left// /,}")"; }
                if [ "$st" != 0 ]; then
                        assert_eq 125 "$st" "status of nsbox snapshot when nsboxd is killed: $out"
                        assert_one_line_error "$out"
                fi
                check_snapshot_records
                if [ -n "$(ls -A "$NSBOX_STORE/tmp")" ] || [ ! -e "$NSBOX_STORE/snapshots/big.json" ]; then
                        killed_mid_copy=$delay
                        [ ! -e "$NSBOX_STORE/snapshots/big.json" ] || fail "snapshot 'big' exists with its copy unfinished in tmp/"
                        assert_eq 125 "$st" "status of nsbox snapshot killed mid-copy: $out"
                        break
                fi
                # whole: its layer holds the 200 MB
                assert_eq 209715200 "$(snapshot_field big 's["size"]' | jget 'd - d % 52428800')" "size of a finished snapshot"
                MY_SNAPSHOTS="$MY_SNAPSHOTS big"
                cleanup_test
                MY_SANDBOXES="" MY_SNAPSHOTS=""
        done
        [ -n "$killed_mid_copy" ] || fail "no delay killed nsboxd in the middle of a copy"
        # a fresh daemon: the sandbox is gone, the store is consistent
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(echo "$OUT" | jget "[s['id'] for s in d if s['id'] == '$id']")" "the killed daemon's sandbox in nsbox ls"
        assert_status 0 "$NSBOX" snapshot ls --json
        assert_eq "[]" "$(echo "$OUT" | jget '[s["name"] for s in d if s["name"] == "big"]')" "snapshot big after kill -9 mid-copy"
        assert_status 0 "$NSBOX" gc --json
        local gc=$OUT
        [ "$(echo "$gc" | jget 'd["tmp_removed"]')" -ge 1 ] || fail "gc removed no unfinished layer: $gc"
        assert_eq "" "$(ls -A "$NSBOX_STORE/tmp")" "tmp/ after gc"
        assert_eq "$(named_layers)" "$(find "$NSBOX_STORE/layers" -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort)" "layers after gc (those named by a snapshot or repository record)"
        check_snapshot_records
        assert_status 0 "$NSBOX" gc --json
        assert_eq "0 0 0" "$(echo "$OUT" | jget '"%s %s %s" % (d["layers_removed"], d["tmp_removed"], d["bytes_freed"])')" "a second gc"
        assert_eq "$mounts_before" "$(grep -c . /proc/self/mountinfo)" "host mount count"
        # the store works on
        local again
        new_sandbox again
        take_snapshot "$again" after-kill
}

# Last (tests run in name order): every test removed what it made.
test_with_every_sandbox_removed_nothing_is_left_and_gc_keeps_only_named_layers() {
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
        assert_status 0 "$NSBOX" snapshot ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | jget '[s["name"] for s in d]')" "snapshots left by the tests"
        check_snapshot_records
        assert_status 0 "$NSBOX" gc --json
        assert_eq "" "$(cd "$NSBOX_STORE" && find layers repos tmp snapshots -mindepth 1 -maxdepth 1)" "the store after gc with no snapshot and no sandbox"
}

run_tests
