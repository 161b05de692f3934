#!/usr/bin/env bash
# Escape tier, the agent's file tools under a symlink race: a process in an nsboxd sandbox swaps
# links between a harmless file of the workspace and a path out of the sandbox (a host file that
# is not bound, a host-bound read-only file, /proc/1/root, /) as fast as it can, while
# read_file, write_file, edit_file and list_dir run through the same links in a loop, through
# nsboxd's socket and through `nsbox call`.  No host content ever comes back and nothing outside
# the sandbox is written.  See escape.bash.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

# The swapper, run in the sandbox: replaces each link with rename(2) (atomic) and with
# unlink + symlink (a window with no link at all), over and over, until /workspace/stop exists;
# then prints how many swaps it made.  args: pairs of LINK TARGET-A TARGET-B, a | separated list.
# shellcheck disable=SC2016
SWAPPER='import os, shutil, sys
links = [t.split("|") for t in sys.argv[1:]]
def clear(p):
    # the tools may have made a file or a directory where the link was missing
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p, ignore_errors=True)
    else:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
n = 0
while not os.path.exists("/workspace/stop") and n < 2000000:
    for link, a, b in links:
        t = b if n % 2 else a
        try:
            if n % 4 < 2:
                clear(link + ".new")
                os.symlink(t, link + ".new")
                os.replace(link + ".new", link)
            else:
                clear(link)
                os.symlink(t, link)
        except OSError:
            clear(link)
    n += 1
    if n == 1:
        open("/workspace/started", "w").close()
print("swaps", n, flush=True)'

# Every call of the list, ROUNDS times, on one connection to nsboxd; each reply on one line.
# shellcheck disable=SC2016
CALLER='import json, socket, sys
sock, sid, rounds, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
f = s.makefile("rwb")
n = 0
for r in range(rounds):
    for tool, params in calls:
        n += 1
        f.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": "call",
                            "params": {"sandbox": sid, "tool": tool, "params": params}}).encode() + b"\n")
        f.flush()
        while True:
            line = f.readline()
            if not line:
                sys.exit("nsboxd closed the connection")
            d = json.loads(line)
            if d.get("id") == n:
                break
        print(tool, json.dumps(params), json.dumps(d.get("result", d.get("error"))), flush=True)'

# What the host has that the sandbox must never see or change.
# The test's own output ($TEST_TMP/out, the harness's .out and .err) is left out.
host_state() { # dir
        find "$1" \( -path "$1/out" -o -path "$1/.out" -o -path "$1/.err" \) -prune -o -printf '%p %y %s %m %T@\n' | sort
        find "$1" \( -path "$1/out" -o -path "$1/.out" -o -path "$1/.err" \) -prune -o -type f -exec sha256sum {} + | sort
}

test_symlink_race_on_file_tools_reads_and_writes_nothing_of_the_host() {
        echo "    (details on stderr: the calls, the replies, the swaps)" >&2
        local secret="nsbox-secret-$$-$RANDOM" robound="nsbox-ro-bound-$$-$RANDOM" id before after out swaps calls
        scratch_dir
        mkdir "$TEST_TMP/out"
        chmod 0755 "$TEST_TMP"
        printf '%s\n' "$secret" >"$TEST_TMP/secret"
        mkdir "$TEST_TMP/secretdir"
        printf '%s\n' "$secret" >"$TEST_TMP/secretdir/file"
        mkdir "$SCRATCH/ro"
        printf '%s\n' "$robound" >"$SCRATCH/ro/file"
        chmod 0644 "$TEST_TMP/secret" "$TEST_TMP/secretdir/file" "$SCRATCH/ro/file"
        chmod 0777 "$SCRATCH/ro" # only the read-only mount stands in the way of a write
        chmod 0666 "$SCRATCH/ro/file"
        before=$(host_state "$TEST_TMP")
        new_daemon_sandbox id --bind "$SCRATCH/ro:/ro"
        "$NSBOX" exec "$id" -- sh -c 'mkdir -p /workspace/dir && echo harmless >/workspace/harmless && echo harmless >/workspace/dir/file' ||
                fail "cannot set up the workspace"
        # l: a file link; d: a directory link; each between a harmless target and a way out
        local pairs=(
                "/workspace/l1|/workspace/harmless|$TEST_TMP/secret"
                "/workspace/l2|/workspace/harmless|/ro/file"
                "/workspace/l3|/workspace/harmless|/proc/1/root$TEST_TMP/secret"
                "/workspace/l4|harmless|../../../../../../..$TEST_TMP/secret"
                "/workspace/d1|/workspace/dir|/"
                "/workspace/d2|/workspace/dir|$TEST_TMP/secretdir"
                "/workspace/d3|/workspace/dir|/ro"
                "/workspace/d4|/workspace/dir|/proc/1/root$TEST_TMP/secretdir"
        )
        "$NSBOX" exec "$id" -- python3 -c "$SWAPPER" "${pairs[@]}" >"$TEST_TMP/out/swapper.out" 2>&1 &
        local swapper=$!
        at_exit "kill $swapper 2>/dev/null"
        # the swapper marks its first full round; a link itself may be missing at any instant
        for _ in $(seq 100); do "$NSBOX" exec "$id" -- test -e /workspace/started 2>/dev/null && break; sleep 0.1; done
        "$NSBOX" exec "$id" -- test -e /workspace/started || fail "the swapper did not start: $(cat "$TEST_TMP/out/swapper.out")"
        echo "    sandbox: swapping links l1..l4 (files) and d1..d4 (directories) between the workspace and: $TEST_TMP/secret," \
                "/ro/file (a read-only bind), /proc/1/root$TEST_TMP/secret, /, $TEST_TMP/secretdir, /ro" >&2
        calls=$(python3 -c 'import json, sys
calls = []
for l in ["l1", "l2", "l3", "l4"]:
    calls += [["read_file", {"path": l}], ["read_file", {"path": l, "encoding": "base64"}],
              ["write_file", {"path": l, "content": "pwned\n"}],
              ["edit_file", {"path": l, "old_string": "harmless", "new_string": "harmless"}]]
for d in ["d1", "d2", "d3", "d4"]:
    calls += [["read_file", {"path": d + "/file"}], ["list_dir", {"path": d}],
              ["write_file", {"path": d + "/file", "content": "pwned\n"}],
              ["write_file", {"path": d + "/planted", "content": "pwned\n"}],
              ["edit_file", {"path": d + "/file", "old_string": "harmless", "new_string": "harmless"}],
              ["read_file", {"path": d + sys.argv[1] + "/secret"}]]
print(json.dumps(calls))' "$TEST_TMP")
        python3 -c "$CALLER" "$NSBOX_SOCKET" "$id" 40 "$calls" >"$TEST_TMP/out/calls.out" 2>&1 ||
                fail "the calls through nsboxd failed: $(tail -n 3 "$TEST_TMP/out/calls.out")"
        # and the same through the command line
        local l
        for _ in $(seq 10); do
                for l in l1 l2 l3 l4; do
                        "$NSBOX" call "$id" read_file "{\"path\": \"$l\"}" 2>&1
                        "$NSBOX" call "$id" write_file "{\"path\": \"$l\", \"content\": \"pwned\\n\"}" 2>&1
                done
                for l in d1 d2 d3 d4; do
                        "$NSBOX" call "$id" list_dir "{\"path\": \"$l\"}" 2>&1
                        "$NSBOX" call "$id" read_file "{\"path\": \"$l/file\"}" 2>&1
                        "$NSBOX" call "$id" write_file "{\"path\": \"$l/planted\", \"content\": \"pwned\\n\"}" 2>&1
                done
        done >"$TEST_TMP/out/cli.out"
        "$NSBOX" call "$id" write_file '{"path": "/workspace/stop", "content": ""}' >/dev/null || fail "cannot stop the swapper"
        wait "$swapper"
        swaps=$(cat "$TEST_TMP/out/swapper.out")
        out=$(cat "$TEST_TMP/out/calls.out" "$TEST_TMP/out/cli.out")
        echo "    $(grep -c . "$TEST_TMP/out/calls.out") calls through nsboxd's socket, $(grep -c . "$TEST_TMP/out/cli.out") lines from nsbox call;" \
                "the swapper: $swaps" >&2
        echo "    replies: $(grep -c '"content"' "$TEST_TMP/out/calls.out") reads with content," \
                "$(grep -c 'harmless' "$TEST_TMP/out/calls.out") replies with the workspace's content," \
                "$(grep -c '"bytes_written"' "$TEST_TMP/out/calls.out") writes done (inside), $(grep -c '"code"' "$TEST_TMP/out/calls.out") errors" >&2
        # the race ran: links were swapped while the calls went on, and calls got through both ways
        case $swaps in "swaps "[1-9]*) ;; *) fail "the swapper did not run: $swaps" ;; esac
        [ "${swaps#swaps }" -ge 100 ] || fail "the swapper made only ${swaps#swaps } swaps: no race"
        assert_contains "$out" "harmless" "the replies (a read through a link to the workspace)"
        assert_contains "$out" '"code"' "the replies (a call refused or failed)"
        # no host content came back, nothing of the host was written
        assert_not_contains "$out" "$secret" "the replies"
        assert_not_contains "$out" "$(printf '%s\n' "$secret" | base64)" "the replies (base64)"
        assert_not_contains "$out" "secretdir\"" "the replies (a listing of the host directory)"
        after=$(host_state "$TEST_TMP")
        assert_eq "$before" "$after" "the host's test directory (the secret, the read-only bind's source)"
        assert_eq "$robound" "$(cat "$SCRATCH/ro/file")" "the read-only bound file"
        [ ! -e "$SCRATCH/ro/planted" ] || fail "a file was planted in the read-only bind's host directory"
        [ ! -e /planted ] || fail "a file was planted in the host's /"
        # the writes that went through landed in the sandbox's own files
        out=$("$NSBOX" exec "$id" -- sh -c 'cat /workspace/harmless /workspace/dir/file; ls /workspace/dir; ls /ro' 2>&1)
        echo "    sandbox afterwards: $(printf '%s' "$out" | tr '\n' ' ')" >&2
        assert_contains "$out" "pwned" "the workspace's files (the writes through the links)"
        assert_eq "file" "$(printf '%s\n' "$out" | tail -n 1)" "/ro in the sandbox"
        # control: on the host the same links lead to the secret
        ln -s "$TEST_TMP/secret" "$TEST_TMP/out/control-link"
        assert_eq "$secret" "$(cat "$TEST_TMP/out/control-link")" "control: the link followed on the host"
}

run_tests
