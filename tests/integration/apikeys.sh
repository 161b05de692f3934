#!/usr/bin/env bash
# API keys for nsboxd's HTTP API (nsbox api-key, nsboxd(8) http.keys): made, listed and removed
# through nsboxd; the key printed alone and once; its file holding only hashes, 0600, surviving
# a restart; per-uid and name limits refused in one line with nothing changed; a corrupt file
# stopping nsboxd at start in one line.  Every test starts an nsboxd of its own with its key
# file in a directory of its own.  As root, the other user is $NSBOX_TEST_USER (nsboxtest), a
# configured client of root's nsboxd: the tests between users are root-only (only root can switch
# uids and only a root nsboxd serves other users).
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SESSION_DIR=$(mktemp -d /tmp/nsbox-keys.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"
TENANT=${NSBOX_TEST_USER:-nsboxtest}
KEY_RE='^e2b_[0-9a-f]{40}$'

MY_DAEMONS=""
MY_PIDS=""

new_dir() { local d; d=$(mktemp -d "$SESSION_DIR/t.XXXXXX") && chmod 0711 "$d" && echo "$d"; }

# conf DIR: http.keys in DIR/keys/ (made by nsboxd), and the tenant as a client when root runs it.
conf() {
        local clients=""
        [ "$TEST_AS" = root ] && clients=", \"clients\": {\"uids\": [$(id -u "$TENANT")]}"
        printf '{"http": {"keys": "%s/keys/api-keys.json"}%s}\n' "$1" "$clients"
}

# start_daemon DIR: nsboxd with conf DIR on DIR/d.sock, its log DIR/log; waits until it answers
# ping.  Sets DPID and NSBOX_SOCKET.
start_daemon() {
        local dir=$1 i
        conf "$dir" > "$dir/config.json"
        NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" >> "$dir/log" 2>&1 < /dev/null &
        DPID=$!
        MY_DAEMONS="$MY_DAEMONS $DPID"
        export NSBOX_SOCKET="$dir/d.sock"
        for i in $(seq 300); do
                [ "$(daemon_pid)" = "$DPID" ] && return 0
                pid_alive "$DPID" || fail "nsboxd exited at start: $(tail -n 5 "$dir/log")"
                sleep 0.1
        done
        fail "nsboxd did not answer ping within 30 s: $(tail -n 5 "$dir/log")"
}

stop_daemon() {
        kill -TERM "$DPID"
        wait_pids_gone 30 "$DPID" > /dev/null || fail "nsboxd $DPID did not stop"
}

# as_tenant CMD...: CMD as the other user (root runs only)
as_tenant() { (cd / && PATH=/usr/local/bin:/usr/bin:/bin setpriv --reuid="$TENANT" --regid="$TENANT" --init-groups "$@"); }

# names KEYS-JSON: the names in an api-key ls --json, space-separated, sorted
names() { printf '%s' "$1" | python3 -c 'import json, sys; print(" ".join(sorted(k["name"] for k in json.load(sys.stdin))))'; }

test_create_ls_rm() {
        trap cleanup EXIT
        local d key key2 err prefix
        d=$(new_dir)
        start_daemon "$d"
        key=$("$NSBOX" api-key create 2> "$d/err") || fail "api-key create: $(cat "$d/err")"
        [[ $key =~ $KEY_RE ]] || fail "the key printed: '$key'"
        err=$(cat "$d/err")
        assert_contains "$err" "shown this once" "api-key create's stderr"
        assert_eq 1 "$(printf '%s\n' "$err" | grep -c .)" "lines on stderr: $err"
        key2=$("$NSBOX" api-key create --name ci.bot-2 2> /dev/null) || fail "api-key create --name"
        [[ $key2 =~ $KEY_RE ]] || fail "the second key: '$key2'"
        assert_ne "$key" "$key2" "two keys"
        assert_status 0 "$NSBOX" api-key ls
        prefix=${key:0:12}
        assert_contains "$OUT" "key-1" "api-key ls"
        assert_contains "$OUT" "$prefix" "api-key ls"
        assert_contains "$OUT" "ci.bot-2" "api-key ls"
        assert_not_contains "$OUT" "$key" "api-key ls (the key itself)"
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq "ci.bot-2 key-1" "$(names "$OUT")" "the keys listed"
        printf '%s' "$OUT" | python3 -c '
import json, re, sys
for k in json.load(sys.stdin):
    assert set(k) <= {"name", "prefix", "uid", "created_at", "last_used_at"}, k
    assert k["uid"] == int(sys.argv[1]), k
    assert re.match(r"^e2b_[0-9a-f]{8}$", k["prefix"]), k
    assert re.match(r"^20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ$", k["created_at"]), k' "$(id -u)" || fail "api-key ls --json: $OUT"
        # rm by prefix and by name; then nothing is left, and rm again is one line of error
        assert_status 0 "$NSBOX" api-key rm "$prefix"
        assert_status 0 "$NSBOX" api-key rm ci.bot-2
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq "[]" "$OUT" "keys after rm"
        assert_status 125 "$NSBOX" api-key rm ci.bot-2
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "not_found" "api-key rm of a removed key"
        assert_status 125 "$NSBOX" api-key frobnicate
        assert_one_line_error "$OUT"
}

test_the_file_holds_hashes_only_mode_0600() {
        trap cleanup EXIT
        local d key f
        d=$(new_dir)
        start_daemon "$d"
        key=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create"
        f="$d/keys/api-keys.json"
        [ -f "$f" ] || fail "no key file $f"
        assert_eq "600 $(id -u)" "$(stat -c '%a %u' "$f")" "the key file's mode and owner"
        assert_eq "700" "$(stat -c '%a' "$d/keys")" "the mode of the directory nsboxd made"
        grep -q "${key:4}" "$f" && fail "the key is in the file in clear: $(cat "$f")"
        grep -q "$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)" "$f" || fail "no sha256 of the key in the file: $(cat "$f")"
        # no temporary file left next to it
        assert_eq "api-keys.json" "$(ls -A "$d/keys")" "the key file's directory"
}

test_keys_survive_a_restart() {
        trap cleanup EXIT
        local d key
        d=$(new_dir)
        start_daemon "$d"
        key=$("$NSBOX" api-key create --name kept 2> /dev/null) || fail "api-key create"
        stop_daemon
        start_daemon "$d"
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq "kept" "$(names "$OUT")" "keys after a restart"
        assert_contains "$OUT" "${key:0:12}" "the prefix after a restart"
        # and a new one goes next to it: the default name counts on
        assert_status 0 "$NSBOX" api-key create
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq "kept key-2" "$(names "$OUT")" "keys after a create"
}

test_limits_and_bad_names_change_nothing() {
        trap cleanup EXIT
        local d i before
        d=$(new_dir)
        start_daemon "$d"
        for i in $(seq 64); do
                "$NSBOX" api-key create --name "k$i" > /dev/null 2>&1 || fail "api-key create k$i"
        done
        before=$(sha256sum < "$d/keys/api-keys.json")
        assert_status 125 "$NSBOX" api-key create --name k65
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "has 64 keys" "the 65th key"
        for i in 'b a d' '' "$(printf 'x%.0s' $(seq 65))" 'e2b_12345678' 'a/b' $'a\x1bb'; do
                assert_status 125 "$NSBOX" api-key create --name "$i"
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "invalid_argument" "api-key create --name '$i'"
        done
        assert_status 0 "$NSBOX" api-key rm k1
        before=$(sha256sum < "$d/keys/api-keys.json")
        assert_status 125 "$NSBOX" api-key create --name k2
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "conflict" "a name taken"
        assert_eq "$before" "$(sha256sum < "$d/keys/api-keys.json")" "the key file after refusals"
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq 63 "$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" "keys"
}

test_a_corrupt_key_file_stops_nsboxd_in_one_line() {
        local d st f
        d=$(new_dir)
        mkdir -m 0700 "$d/keys"
        f="$d/keys/api-keys.json"
        conf "$d" > "$d/config.json"
        for bad in '{"version": 1, "keys": [' '{"version": 1, "keys": [{"name": "x"}]}' '[]' '{"version": 1, "keys": [], "x": 1}'; do
                printf '%s' "$bad" > "$f"
                chmod 0600 "$f"
                OUT=$(timeout 20 "$NSBOXD" --config "$d/config.json" --socket "$d/d.sock" 2>&1 < /dev/null)
                st=$?
                assert_eq 1 "$st" "nsboxd's exit status with the key file '$bad' ($OUT)"
                assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of error: $OUT"
                assert_contains "$OUT" "nsboxd: api keys: $f" "nsboxd with the key file '$bad'"
                [ -e "$d/d.sock" ] && fail "nsboxd left a socket"
        done
        # a file others may write is not trusted either
        printf '{"version": 1, "keys": []}' > "$f"
        chmod 0622 "$f"
        OUT=$(timeout 20 "$NSBOXD" --config "$d/config.json" --socket "$d/d.sock" 2>&1 < /dev/null)
        assert_eq 1 "$?" "nsboxd's exit status with a key file others may write ($OUT)"
        assert_contains "$OUT" "no one else may write" "nsboxd with a key file of mode 0622"
}

# As the user (its own nsboxd serves no one else): a key for another uid is refused, nothing made.
users_own_keys_as_user() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d"
        assert_status 125 "$NSBOX" api-key create --uid 0 --name forroot
        assert_contains "$OUT" "permission_denied" "a key for root, asked by a user"
        assert_one_line_error "$OUT"
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq "[]" "$OUT" "keys after the refusal"
}

test_users_see_and_remove_only_their_own_keys() {
        [ "$TEST_AS" = root ] || { users_own_keys_as_user; return; }
        trap cleanup EXIT
        local d rootkey tkey uid i
        d=$(new_dir)
        start_daemon "$d"
        uid=$(id -u "$TENANT")
        rootkey=$("$NSBOX" api-key create --name shared 2> /dev/null) || fail "root's api-key create"
        tkey=$(as_tenant env NSBOX_SOCKET="$NSBOX_SOCKET" "$NSBOX" api-key create --name shared 2> /dev/null) || fail "the tenant's api-key create"
        [[ $tkey =~ $KEY_RE ]] || fail "the tenant's key: '$tkey'"
        # the tenant sees its own only, and removes none of root's
        OUT=$(as_tenant env NSBOX_SOCKET="$NSBOX_SOCKET" "$NSBOX" api-key ls --json 2>&1) || fail "the tenant's api-key ls: $OUT"
        assert_eq "shared" "$(names "$OUT")" "the tenant's keys"
        assert_contains "$OUT" "${tkey:0:12}" "the tenant's keys"
        assert_not_contains "$OUT" "${rootkey:0:12}" "the tenant's keys"
        OUT=$(as_tenant env NSBOX_SOCKET="$NSBOX_SOCKET" "$NSBOX" api-key rm "${rootkey:0:12}" 2>&1)
        assert_eq 125 "$?" "the tenant removing root's key by prefix ($OUT)"
        assert_one_line_error "$OUT"
        OUT=$(as_tenant env NSBOX_SOCKET="$NSBOX_SOCKET" "$NSBOX" api-key create --uid 0 2>&1)
        assert_eq 125 "$?" "the tenant making a key for root ($OUT)"
        assert_contains "$OUT" "permission_denied" "the tenant making a key for root"
        # root sees both and makes one for another uid
        assert_status 0 "$NSBOX" api-key create --uid 65534 --name nobody
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq "nobody shared shared" "$(names "$OUT")" "root's view"
        assert_eq "0 $uid 65534" "$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(" ".join(str(u) for u in sorted(k["uid"] for k in json.load(sys.stdin))))')" "the uids root sees"
        # nor another user's, by name or by prefix
        local nobody
        nobody=$(printf '%s' "$OUT" | python3 -c 'import json, sys; print([k["prefix"] for k in json.load(sys.stdin) if k["name"] == "nobody"][0])')
        for i in nobody "$nobody"; do
                OUT=$(as_tenant env NSBOX_SOCKET="$NSBOX_SOCKET" "$NSBOX" api-key rm "$i" 2>&1)
                assert_eq 125 "$?" "the tenant removing uid 65534's key $i ($OUT)"
                assert_contains "$OUT" "not_found" "the tenant removing uid 65534's key $i"
        done
        # the tenant removes its own; root's 'shared' stays
        OUT=$(as_tenant env NSBOX_SOCKET="$NSBOX_SOCKET" "$NSBOX" api-key rm shared 2>&1) || fail "the tenant's api-key rm: $OUT"
        assert_status 0 "$NSBOX" api-key ls --json
        assert_eq "nobody shared" "$(names "$OUT")" "keys after the tenant's rm"
        assert_contains "$OUT" "${rootkey:0:12}" "root's key after the tenant's rm"
}

# Last: no nsboxd of this file's is left (every one has this file's NSBOX_STORE in its environment).
test_zz_no_daemon_left() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
st=$?
rm -rf "$SESSION_DIR"
exit $st
