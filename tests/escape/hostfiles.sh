#!/usr/bin/env bash
# Escape tier, files the host acts on: a trajectory replayed (its recorded create parameters
# choose no host path), files copied out of a sandbox (sparse, growing, FIFOs, modes) and a
# repository cloned for a sandbox (a git bomb): each bounded in size and time, read strictly, and
# never trusted to choose what happens on the host.
# shellcheck source-path=SCRIPTDIR
# shellcheck disable=SC2016
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"
# a store of this file's own (the daemon sees it: the first client starts it with this
# environment), so that what a clone leaves there is ours to measure
export NSBOX_STORE="$ESCAPE_DIR/store"

# ---- replay ------------------------------------------------------------------------------------

# A trajectory recorded on a sandbox binding $SCRATCH/h read-write at /h, whose one step appends
# a line to /h/log.  Sets REC (the file) and HOSTLOG (the host file, one line after the recording).
record_a_bind_trajectory() {
        local id
        scratch_dir
        mkdir "$SCRATCH/h"
        chmod 0777 "$SCRATCH/h"
        REC="$SCRATCH/rec.jsonl"
        HOSTLOG="$SCRATCH/h/log"
        id=$("$NSBOX" create --bind "$SCRATCH/h:/h:rw" --record "$REC" 2>&1) || fail "create --record: $id"
        at_exit "\"\$NSBOX\" rm -f $id >/dev/null 2>&1"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'umask 0; echo appended >> /h/log'
        assert_status 0 "$NSBOX" rm "$id"
        assert_eq 1 "$(grep -c appended "$HOSTLOG")" "lines in the host file after the recording"
}

test_replay_refuses_host_binds_from_the_trajectory() {
        local before
        record_a_bind_trajectory
        before=$(sha256sum "$HOSTLOG")
        # the recorded bind is not used unless given again
        assert_status 125 "$NSBOX" replay "$REC"
        echo "    replay without --bind: $OUT" >&2
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "nsbox: replay: the trajectory asks for host-facing parameters not given on the command line: --bind $SCRATCH/h:/h:rw; pass them again to allow" "the refusal"
        assert_eq "$before" "$(sha256sum "$HOSTLOG")" "the host file after the refused replay"
        # a crafted header asking for more: every host-facing parameter listed in one line, the
        # harmless ones (memory, timeout, env, workdir) used without a word
        python3 - "$REC" "$SCRATCH/crafted.jsonl" "$SCRATCH" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
h = json.loads(lines[0])
h["create"].update({"net": "nat", "rootfs": "host", "record": sys.argv[3] + "/h/evil.jsonl", "publish": ["8080:80"],
                    "policy": "/etc/nsbox/evil.json", "allow": ["10.0.0.1:443"], "repo": "/srv/\u001b[31mrepo",
                    "memory": "64M", "timeout": 60, "env": ["A=1"], "workdir": "/workspace"})
open(sys.argv[2], "w").write("\n".join([json.dumps(h)] + lines[1:]) + "\n")
PY
        assert_status 125 "$NSBOX" replay --bind "$SCRATCH/h:/h:rw" "$SCRATCH/crafted.jsonl"
        echo "    replay of the crafted header: $OUT" >&2
        assert_one_line_error "$OUT"
        local want
        for want in "--net nat" "--rootfs host" "--record $SCRATCH/h/evil.jsonl" "--publish 8080:80" "--policy /etc/nsbox/evil.json" \
                "--allow 10.0.0.1:443" '--repo /srv/\x1b[31mrepo'; do
                assert_contains "$OUT" "$want" "the refusal of the crafted header"
        done
        for want in memory timeout env workdir "--bind"; do
                assert_not_contains "$OUT" "$want" "the refusal of the crafted header (harmless or given again)"
        done
        assert_eq "$before" "$(sha256sum "$HOSTLOG")" "the host file after the refused replays"
        [ ! -e "$SCRATCH/h/evil.jsonl" ] || fail "the crafted header's record file was written"
        # the trajectory file is read strictly: a FIFO is refused at once, not waited on
        mkfifo "$SCRATCH/fifo.jsonl"
        assert_status 125 timeout 10 "$NSBOX" replay "$SCRATCH/fifo.jsonl"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "not a regular file" "replay of a FIFO"
}

test_replay_uses_host_binds_given_again() {
        record_a_bind_trajectory
        assert_status 0 "$NSBOX" replay --bind "$SCRATCH/h:/h:rw" "$REC"
        echo "    replay with --bind: $OUT" >&2
        assert_contains "$OUT" "all matched" "the replay with the bind given again"
        assert_eq 2 "$(grep -c appended "$HOSTLOG")" "lines in the host file after the replay (its step ran on the bind)"
        # given, but elsewhere: still refused, and the host file untouched
        mkdir "$SCRATCH/other"
        assert_status 125 "$NSBOX" replay --bind "$SCRATCH/other:/h:rw" "$REC"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "--bind $SCRATCH/h:/h:rw;" "the refusal of another bind"
        assert_eq 2 "$(grep -c appended "$HOSTLOG")" "lines in the host file after the refused replay"
}

run_tests
