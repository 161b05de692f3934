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
# an ASan build frees late (its quarantine): keep that small, as the memory of a clone worker is
# measured here
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

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

# ---- copies out ---------------------------------------------------------------------------------

test_cp_out_keeps_holes_and_bounds_size() {
        local id want got blocks
        new_daemon_sandbox id --disk 16M
        # 512 MiB that hold 3 small pieces of data, in a sandbox of 16 MiB
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'truncate -s 512M sparse && printf head | dd of=sparse conv=notrunc 2>/dev/null &&
                printf middle | dd of=sparse bs=1M seek=256 conv=notrunc 2>/dev/null && printf tail | dd of=sparse bs=1 seek=$((512 * 1048576 - 4)) conv=notrunc 2>/dev/null &&
                stat -c %s sparse && sha256sum < sparse'
        want=$OUT
        scratch_dir
        assert_status 0 "$NSBOX" cp "$id:sparse" "$SCRATCH/sparse"
        got=$(stat -c %s "$SCRATCH/sparse" && sha256sum < "$SCRATCH/sparse")
        assert_eq "$want" "$got" "size and sha256 of the copy"
        # the holes stay holes: a few blocks of data, not 512 MiB of zeros
        blocks=$(stat -c %b "$SCRATCH/sparse")
        echo "    the copy: $(stat -c '%s bytes, %b blocks of %B' "$SCRATCH/sparse")" >&2
        [ "$blocks" -le 4096 ] || fail "the copy of a sparse file takes $blocks blocks (512-byte) on the host: it was written densely"
        # standard output gets the zeros (a pipe has no holes), the same bytes
        assert_eq "$(echo "$want" | tail -n 1)" "$("$NSBOX" cp "$id:sparse" - | sha256sum)" "sha256 of the copy to standard output"
        assert_eq "sparse" "$(find "$SCRATCH" -mindepth 1 -printf '%f\n')" "the host directory after the copies (no temporary left)"
}

test_cp_out_of_a_growing_file_stops_at_the_size_seen_at_open() {
        local id size_before size_after copied st
        new_daemon_sandbox id --disk 16M
        # a writer that appends data and grows the file by 64 MiB of holes, for ever: far faster
        # than any copy could follow
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo start > grow; (while :; do echo line >> grow; truncate -s +64M grow; done) >/dev/null 2>&1 &
                sleep 0.5; echo started'
        size_before=$("$NSBOX" exec "$id" -- stat -c %s grow)
        scratch_dir
        timeout 120 "$NSBOX" cp "$id:grow" "$SCRATCH/grow"
        st=$?
        [ "$st" != 124 ] || fail "nsbox cp of a growing file was still copying after 120 s"
        assert_eq 0 "$st" "exit status of nsbox cp of a growing file"
        size_after=$("$NSBOX" exec "$id" -- stat -c %s grow)
        copied=$(stat -c %s "$SCRATCH/grow")
        echo "    sizes inside: $size_before before the copy, $size_after after; the copy: $copied bytes, $(stat -c %b "$SCRATCH/grow") blocks" >&2
        if [ "$copied" -lt "$size_before" ] || [ "$copied" -gt "$size_after" ]; then
                fail "the copy has $copied bytes: not a size the file had while cp ran ($size_before to $size_after)"
        fi
        assert_eq start "$(head -n 1 "$SCRATCH/grow")" "the first line of the copy"
        [ "$(stat -c %b "$SCRATCH/grow")" -le 8192 ] || fail "the copy of a file of holes and lines was written densely"
}

test_cp_out_of_a_fifo_is_refused() {
        local id
        new_daemon_sandbox id
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'mkfifo fifo && mkdir d && ln -s fifo link'
        scratch_dir
        for src in fifo link d /dev/null; do
                assert_status 125 timeout 30 "$NSBOX" cp "$id:$src" "$SCRATCH/out"
                echo "    cp $src: $OUT" >&2
                assert_one_line_error "$OUT"
                if [ "$src" = d ]; then
                        assert_contains "$OUT" "is a directory (use -r)" "nsbox cp of a directory without -r"
                else
                        assert_contains "$OUT" "is not a regular file" "nsbox cp of '$src'"
                fi
        done
        assert_eq "" "$(find "$SCRATCH" -mindepth 1)" "the host directory after the refused copies"
        # cp -r of a directory holding a FIFO and a link to a host path: never hangs on the FIFO,
        # and the link comes out as a link, not followed
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'mkfifo d/fifo && ln -s /etc/shadow d/shadow && echo x > d/file'
        assert_status 0 timeout 30 "$NSBOX" cp -r "$id:d" "$SCRATCH/dcopy"
        [ -L "$SCRATCH/dcopy/shadow" ] || fail "the link came out as $(stat -c %F "$SCRATCH/dcopy/shadow" 2>&1)"
        assert_eq /etc/shadow "$(readlink "$SCRATCH/dcopy/shadow")" "the link's target, kept as text"
        assert_eq x "$(cat "$SCRATCH/dcopy/file")" "the plain file"
        [ ! -p "$SCRATCH/dcopy/fifo" ] || fail "a FIFO was made on the host"
        rm -rf "$SCRATCH/dcopy"
        # into the sandbox: a host FIFO is refused at once too, not waited on
        mkfifo "$SCRATCH/hostfifo"
        assert_status 125 timeout 30 "$NSBOX" cp "$SCRATCH/hostfifo" "$id:in"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "is not a regular file" "nsbox cp of a host FIFO into the sandbox"
        assert_status 1 "$NSBOX" exec "$id" -- test -e in
}

test_cp_out_applies_umask() {
        local id
        new_daemon_sandbox id
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'echo x > open && chmod 0777 open && echo y > suid && chmod 04755 suid && echo z > private && chmod 0600 private'
        scratch_dir
        (umask 022 && "$NSBOX" cp "$id:open" "$SCRATCH/open" && "$NSBOX" cp "$id:suid" "$SCRATCH/suid" &&
                "$NSBOX" cp "$id:private" "$SCRATCH/private") || fail "nsbox cp out failed"
        (umask 077 && "$NSBOX" cp "$id:open" "$SCRATCH/open077") || fail "nsbox cp out with umask 077 failed"
        assert_eq "755 755 600 700" "$(stat -c %a "$SCRATCH/open" "$SCRATCH/suid" "$SCRATCH/private" "$SCRATCH/open077" | tr '\n' ' ' | sed 's/ $//')" \
                "modes of the copies (0777, 04755, 0600 inside; umask 022, then 077)"
}

# ---- repositories --------------------------------------------------------------------------------

# The bytes of the regular files in the store, and its entries that are not empty directories or
# lock files: what a failed clone must not change.
store_usage() {
        [ -d "$NSBOX_STORE" ] || { echo "0 bytes"; return; }
        echo "$(find "$NSBOX_STORE" -type f -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }') bytes"
        (cd "$NSBOX_STORE" && find . -mindepth 2 ! -empty -printf '%p\n' | LC_ALL=C sort)
}

test_repo_git_bomb_fails_and_leaves_nothing_in_the_store() {
        local repo blob tree sub commit small before out peak i peaks
        scratch_dir
        repo="$SCRATCH/bomb"
        export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
        git init -q -b main "$repo" || fail "git init"
        # one blob of 128 MiB of zeros (a few hundred KiB stored), named 8 times: 1 GiB to check out
        blob=$(head -c 128M /dev/zero | git -C "$repo" hash-object -w --stdin) || fail "git hash-object"
        tree=$(for i in 1 2 3 4 5 6 7 8; do printf '100644 blob %s\tzeros%s\n' "$blob" "$i"; done | git -C "$repo" mktree) || fail "git mktree"
        commit=$(git -C "$repo" commit-tree -m bomb "$tree") || fail "git commit-tree"
        git -C "$repo" update-ref refs/heads/main "$commit"
        # a tree of trees: 16 names for one subtree, 6 levels deep, 16^6 empty files
        sub=$(printf '100644 blob %s\tf\n' "$(git -C "$repo" hash-object -w --stdin </dev/null)" | git -C "$repo" mktree)
        for i in 1 2 3 4 5 6; do
                sub=$(for j in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do printf '040000 tree %s\td%s\n' "$sub" "$j"; done | git -C "$repo" mktree)
        done
        git -C "$repo" update-ref refs/heads/treebomb "$(git -C "$repo" commit-tree -m treebomb "$sub")"
        # and a commit that fits, as a control
        small=$(printf '100644 blob %s\tsmall\n' "$(echo small | git -C "$repo" hash-object -w --stdin)" | git -C "$repo" mktree)
        git -C "$repo" update-ref refs/heads/small "$(git -C "$repo" commit-tree -m small "$small")"
        echo "    the repository: $(du -sk "$repo/.git" | cut -f1) KiB" >&2
        # the daemon runs, so that its store and log exist before we measure
        new_daemon_sandbox i
        before=$(store_usage)
        for commit in main treebomb; do
                assert_status 125 "$NSBOX" create --disk 16M --repo "$repo" --commit "$commit"
                echo "    --commit $commit: $OUT" >&2
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "take more than 16.0 MiB, the sandbox's disk limit (--disk); nothing was checked out" "create --repo of a git bomb"
                assert_eq "$before" "$(store_usage)" "the store after the git bomb '$commit' (files and bytes)"
        done
        # control: a commit that fits the same limit is checked out
        new_daemon_sandbox i --disk 16M --repo "$repo" --commit small
        assert_status 0 "$NSBOX" exec "$i" -- cat small
        assert_eq small "$OUT" "the file of the commit that fits"
        # the workers never inflated the blob: their peak memory is that of the clone of one small
        # file, and far below the blob's 128 MiB
        out=$(grep "repository worker done" "$NSBOX_SOCKET.log")
        echo "    nsboxd: $out" >&2
        assert_eq 3 "$(printf '%s\n' "$out" | grep -c .)" "repository workers in nsboxd's log"
        read -ra peaks <<<"$(printf '%s\n' "$out" | sed -n 's/.*peak memory \([0-9]*\) KiB.*/\1/p' | tr '\n' ' ')"
        [ "${#peaks[@]}" = 3 ] || fail "no peak memory in nsboxd's log: $out"
        for peak in "${peaks[0]}" "${peaks[1]}"; do
                if [ "$peak" -gt $((peaks[2] + 32768)) ] || [ "$peak" -ge 131072 ]; then
                        fail "a clone worker of a git bomb peaked at $peak KiB (the small commit's at ${peaks[2]} KiB)"
                fi
        done
}

run_tests
