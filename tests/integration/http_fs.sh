#!/usr/bin/env bash
# envd's filesystem.Filesystem over nsboxd's HTTP API (nsboxd(8) "HTTP API"), with curl: Stat,
# ListDir, MakeDir, Move, Remove, the WatchDir stream and the polling watchers; bad input (bad
# JSON, unknown fields, bad depths, paths too long), missing paths and files in the way as
# one-line Connect errors; then the real e2b SDK (npm e2b@2.51.0, cached like mcp.sh's) doing
# files.list, exists, getInfo, makeDir, rename, remove and watchDir.  One nsboxd for the file,
# listening on a port of its own choosing (127.0.0.1:0); runs as root and as a user.
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SESSION_DIR=$(mktemp -d /tmp/nsbox-httpfs.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_SOCKET="$SESSION_DIR/d.sock" NSBOX_STORE="$SESSION_DIR/store"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT
E2B_SDK_VERSION=2.51.0

# The file's nsboxd on a free port, an API key and one sandbox made over HTTP (ID, TOK).
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json"}}\n' "$PORT" "$SESSION_DIR" > "$SESSION_DIR/config.json"
"$NSBOXD" --config "$SESSION_DIR/config.json" --socket "$NSBOX_SOCKET" >> "$SESSION_DIR/log" 2>&1 < /dev/null &
DPID=$!
for _ in $(seq 300); do
        grep -q 'E2B-compatible HTTP API on' "$SESSION_DIR/log" && [ -n "$(daemon_pid)" ] && break
        kill -0 "$DPID" 2> /dev/null || break
        sleep 0.1
done
grep -q 'E2B-compatible HTTP API on' "$SESSION_DIR/log" || { echo "nsboxd did not listen: $(tail -n 5 "$SESSION_DIR/log")" >&2; exit 1; }
URL="http://127.0.0.1:$PORT"
KEY=$("$NSBOX" api-key create 2> /dev/null)
SB=$(curl -s -H "X-API-KEY: $KEY" -d '{"templateID": "base", "timeout": 600}' "$URL/v2/sandboxes")
ID=$(printf '%s' "$SB" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])' 2> /dev/null)
TOK=$(printf '%s' "$SB" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])' 2> /dev/null)

# fs METHOD JSON: the unary answer in OUT, the HTTP status in CODE
fs() {
        local res
        res=$(curl -s -w '\n%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOK" -H 'Content-Type: application/json' \
                --data-binary "$2" "$URL/filesystem.Filesystem/$1") || fail "curl $1 failed"
        OUT=$(printf '%s' "$res" | sed '$d')
        CODE=$(printf '%s' "$res" | tail -n 1)
}

# jget JSON EXPR: EXPR of the JSON as j (python)
jget() { printf '%s' "$1" | python3 -c "import json, sys; j = json.load(sys.stdin); print($2)"; }

# expect_error METHOD JSON STATUS CONNECT-CODE [message part]
expect_error() {
        fs "$1" "$2"
        assert_eq "$3" "$CODE" "$1 $2: status ($OUT)"
        assert_eq "$4" "$(jget "$OUT" 'j["code"]')" "$1 $2: code"
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "$1: one line"
        [ -z "${5:-}" ] || assert_contains "$OUT" "$5" "$1 $2: message"
}

# envelope JSON: one Connect envelope (flags 0) on stdout
envelope() { python3 -c 'import struct, sys; d = sys.argv[1].encode(); sys.stdout.buffer.write(b"\0" + struct.pack(">I", len(d)) + d)' "$1"; }

# envelopes < BODY: one "FLAGS JSON" line per envelope
envelopes() {
        python3 -c '
import struct, sys
b = sys.stdin.buffer.read(); i = 0
while i + 5 <= len(b):
    n = struct.unpack(">I", b[i + 1:i + 5])[0]
    print(b[i], b[i + 5:i + 5 + n].decode()); i += 5 + n
if i != len(b): print("TRAILING", len(b) - i)'
}

# watch_start OUTFILE JSON: WatchDir in the background (curl, PID in WATCH_PID) until its start
watch_start() {
        envelope "$2" > "$TEST_TMP/w.req"
        curl -s -N -m 60 -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOK" -H 'Content-Type: application/connect+json' \
                -H 'Keepalive-Ping-Interval: 1' --data-binary @"$TEST_TMP/w.req" "$URL/filesystem.Filesystem/WatchDir" > "$1" &
        WATCH_PID=$!
        MY_PIDS="${MY_PIDS:-} $WATCH_PID"
        local i
        for i in $(seq 100); do
                envelopes < "$1" | grep -q '^0 {"start":{}}$' && return 0
                sleep 0.1
        done
        fail "WatchDir did not start: $(envelopes < "$1")"
}

# wait_events FILE PATTERN: FILE's envelopes match PATTERN (grep -E) within 10 s
wait_events() {
        local i
        for i in $(seq 100); do
                envelopes < "$1" | grep -qE "$2" && return 0
                sleep 0.1
        done
        fail "no '$2' in the watch: $(envelopes < "$1")"
}

write_file() { # PATH CONTENT, through nsbox's own write_file (a temporary renamed into place)
        "$NSBOX" call "$ID" write_file "{\"path\": \"$1\", \"content\": \"$2\"}" > /dev/null || fail "writing $1"
}

test_a_sandbox_was_made() {
        [[ $ID =~ ^[0-9a-f]{32}$ ]] || fail "create over HTTP: $SB"
}

test_stat_and_list_dir_describe_entries() {
        fs MakeDir '{"path": "st/sub"}'
        assert_eq 200 "$CODE" "MakeDir: $OUT"
        "$NSBOX" exec "$ID" -- sh -c 'printf hello > /home/user/st/f.txt; chmod 640 /home/user/st/f.txt; ln -s f.txt /home/user/st/ln' ||
                fail "setting up"
        fs Stat '{"path": "st/f.txt"}'
        assert_eq 200 "$CODE" "Stat: $OUT"
        assert_eq "f.txt FILE_TYPE_FILE /home/user/st/f.txt 5 416 -rw-r----- user user" \
                "$(jget "$OUT" '" ".join(str(j["entry"][k]) for k in ("name", "type", "path", "size", "mode", "permissions", "owner", "group"))')" "Stat's entry"
        [[ $(jget "$OUT" 'j["entry"]["modifiedTime"]') =~ ^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$ ]] || fail "modifiedTime: $OUT"
        fs Stat '{"path": "/home/user/st/ln"}'
        assert_eq "FILE_TYPE_SYMLINK /home/user/st/f.txt" "$(jget "$OUT" 'j["entry"]["type"] + " " + j["entry"]["symlinkTarget"]')" \
                "a symlink: where it leads, resolved (envd's)"
        fs Stat '{"path": "/"}'
        # a user's sandbox maps only its own uid: its / shows as user's there; writable by the
        # sandbox's user (the E2B base's root is its own), sticky as /tmp is (Go's "t")
        [ "$TEST_AS" = root ] &&
                assert_eq "root root dtrwxrwxrwx" "$(jget "$OUT" 'j["entry"]["owner"] + " " + j["entry"]["group"] + " " + j["entry"]["permissions"]')" "/"
        fs ListDir '{"path": "st"}'
        assert_eq 200 "$CODE" "ListDir: $OUT"
        assert_eq "/home/user/st/f.txt /home/user/st/ln /home/user/st/sub" "$(jget "$OUT" '" ".join(e["path"] for e in j["entries"])')" "depth 1"
        fs ListDir '{"path": "/home/user/st", "depth": "2"}'
        assert_eq 3 "$(jget "$OUT" 'len(j["entries"])')" "depth 2 (an empty subdirectory)"
        "$NSBOX" exec "$ID" -- touch /home/user/st/sub/deep || fail "touch"
        fs ListDir '{"path": "st", "depth": 2}'
        assert_contains "$(jget "$OUT" '" ".join(e["path"] for e in j["entries"])')" "/home/user/st/sub/deep" "depth 2"
        fs Remove '{"path": "st"}'
        assert_eq "200 {}" "$CODE $OUT" "Remove of a tree"
}

test_make_dir_move_remove() {
        fs MakeDir '{"path": "/home/user/m/a/b"}'
        assert_eq "200 b FILE_TYPE_DIRECTORY" "$CODE $(jget "$OUT" 'j["entry"]["name"] + " " + j["entry"]["type"]')" "MakeDir with parents"
        expect_error MakeDir '{"path": "m/a/b"}' 409 already_exists
        fs Move '{"source": "m/a", "destination": "m/c"}'
        assert_eq "200 /home/user/m/c" "$CODE $(jget "$OUT" 'j["entry"]["path"]')" "Move"
        fs Stat '{"path": "m/c/b"}'
        assert_eq 200 "$CODE" "moved with what it holds"
        expect_error Stat '{"path": "m/a"}' 404 not_found
        fs Remove '{"path": "m"}'
        assert_eq 200 "$CODE" "Remove: $OUT"
        expect_error Stat '{"path": "/home/user/m"}' 404 not_found
}

test_errors_are_one_line_and_change_nothing() {
        expect_error Stat '{"path": "/nope"}' 404 not_found
        fs Remove '{"path": "nope"}'
        assert_eq "200 {}" "$CODE $OUT" "Remove of a missing path (envd's RemoveAll)"
        expect_error Move '{"source": "nope", "destination": "x"}' 404 not_found
        expect_error ListDir '{"path": "/nope"}' 404 not_found
        expect_error ListDir '{"path": "/etc/passwd"}' 400 invalid_argument "Not a directory"
        expect_error MakeDir '{"path": "/etc/passwd"}' 400 invalid_argument "not a directory"
        expect_error MakeDir '{"path": "/etc/passwd/x"}' 400 invalid_argument
        expect_error ListDir '{"path": "/", "depth": 33}' 400 invalid_argument "depth"
        expect_error ListDir '{"path": "/", "depth": -1}' 400 invalid_argument "depth"
        expect_error ListDir '{"path": "/", "depth": "x"}' 400 invalid_argument "depth"
        expect_error ListDir '{"path": "/", "depth": 1.5}' 400 invalid_argument "depth"
        expect_error Stat '{"path": ' 400 invalid_argument "JSON"
        expect_error Stat '[1]' 400 invalid_argument "JSON object"
        expect_error Stat '{"path": 5}' 400 invalid_argument "string"
        expect_error Stat '{"path": "a", "colour": 1}' 400 invalid_argument "unknown field"
        expect_error Stat '{"path": "a", "Path": 1}' 400 invalid_argument "unknown field"
        expect_error MakeDir '{}' 400 invalid_argument "required"
        expect_error Remove '{"path": ""}' 400 invalid_argument "required"
        expect_error Move '{"source": "a"}' 400 invalid_argument "required"
        expect_error Stat "{\"path\": \"/$(printf 'a%.0s' $(seq 4100))\"}" 400 invalid_argument "4096"
        expect_error Stat '{"path": "a\u0000b"}' 400 invalid_argument "NUL"
        expect_error Nope '{}' 501 unimplemented
        expect_error WatchDir '{"path": "/"}' 400 invalid_argument "connect+json"
        expect_error GetWatcherEvents '{"watcherId": "0123456789abcdef0123456789abcdef"}' 404 not_found
        expect_error GetWatcherEvents '{"watcherId": 7}' 400 invalid_argument
        expect_error CreateWatcher '{"path": "/nope"}' 404 not_found
        expect_error Remove '{"path": "/"}' 400 invalid_argument
        fs Stat '{"path": "/etc/passwd"}'
        assert_eq 200 "$CODE" "still there: $OUT"
        # snake_case is proto3 JSON too
        fs Move '{"source": "nope", "destination": "x", "source": "y"}'
        assert_eq 400 "$CODE" "a duplicate key: $OUT"
        # a bad envelope on a stream: its end carries the error
        printf 'xx' > "$TEST_TMP/bad"
        curl -s -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOK" -H 'Content-Type: application/connect+json' \
                --data-binary @"$TEST_TMP/bad" "$URL/filesystem.Filesystem/WatchDir" > "$TEST_TMP/bad.out"
        assert_contains "$(envelopes < "$TEST_TMP/bad.out")" '2 {"error":{"code":"invalid_argument"' "a bad envelope"
        envelope '{"path": "/nope"}' > "$TEST_TMP/nope"
        curl -s -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOK" -H 'Content-Type: application/connect+json' \
                --data-binary @"$TEST_TMP/nope" "$URL/filesystem.Filesystem/WatchDir" > "$TEST_TMP/nope.out"
        assert_contains "$(envelopes < "$TEST_TMP/nope.out")" '2 {"error":{"code":"not_found"' "WatchDir of a missing directory"
}

test_watch_dir_streams_create_write_remove() {
        trap cleanup EXIT
        fs MakeDir '{"path": "w"}'
        watch_start "$TEST_TMP/watch" '{"path": "w", "recursive": true}'
        write_file /home/user/w/f.txt hello
        wait_events "$TEST_TMP/watch" '"name":"f.txt","type":"EVENT_TYPE_WRITE"'
        fs Remove '{"path": "w/f.txt"}'
        wait_events "$TEST_TMP/watch" '"name":"f.txt","type":"EVENT_TYPE_REMOVE"'
        fs MakeDir '{"path": "w/sub"}'
        "$NSBOX" exec "$ID" -- touch /home/user/w/sub/inner || fail "touch"
        wait_events "$TEST_TMP/watch" '"name":"sub/inner","type":"EVENT_TYPE_CREATE"'
        wait_events "$TEST_TMP/watch" '^0 \{"keepalive":\{\}\}$'
        local ev
        ev=$(envelopes < "$TEST_TMP/watch" | grep -v keepalive)
        assert_eq '0 {"start":{}}' "$(printf '%s\n' "$ev" | head -n 1)" "the first message"
        assert_not_contains "$ev" "nsbox-" "nsbox's temporaries"
        assert_eq "f.txt:EVENT_TYPE_CREATE f.txt:EVENT_TYPE_WRITE f.txt:EVENT_TYPE_REMOVE sub:EVENT_TYPE_CREATE" \
                "$(printf '%s\n' "$ev" | sed 1d | python3 -c '
import json, sys
print(" ".join(e["filesystem"]["name"] + ":" + e["filesystem"]["type"] for e in (json.loads(l.split(" ", 1)[1]) for l in sys.stdin) if not e["filesystem"]["name"].startswith("sub/")))')" \
                "the events, in order"
        kill "$WATCH_PID"
        wait "$WATCH_PID" 2> /dev/null
        fs Remove '{"path": "w"}'
}

# envd 0.6.3: a watcher with includeEntry gives each create, write and chmod event its EntryInfo
test_polling_watcher_include_entry() {
        fs MakeDir '{"path": "pe"}'
        fs CreateWatcher '{"path": "/home/user/pe", "includeEntry": true, "allowNetworkMounts": false}'
        assert_eq 200 "$CODE" "CreateWatcher: $OUT"
        local w i ev=""
        w=$(jget "$OUT" 'j["watcherId"]')
        write_file /home/user/pe/a hi
        "$NSBOX" exec "$ID" -- rm /home/user/pe/a
        for i in $(seq 100); do
                fs GetWatcherEvents "{\"watcherId\": \"$w\"}"
                ev="$ev $(jget "$OUT" '" ".join(e["name"] + ":" + e["type"] + ":" + e.get("entry", {}).get("path", "-") for e in j["events"])')"
                [[ $ev == *a:EVENT_TYPE_REMOVE* ]] && break
                sleep 0.1
        done
        assert_eq "a:EVENT_TYPE_CREATE:/home/user/pe/a a:EVENT_TYPE_WRITE:/home/user/pe/a a:EVENT_TYPE_REMOVE:-" "$(echo $ev)" "the events"
        fs RemoveWatcher "{\"watcherId\": \"$w\"}"
        expect_error CreateWatcher '{"path": "pe", "includeEntry": 1}' 400 invalid_argument includeEntry
}

test_polling_watchers() {
        fs MakeDir '{"path": "pw"}'
        fs CreateWatcher '{"path": "/home/user/pw", "recursive": false}'
        assert_eq 200 "$CODE" "CreateWatcher: $OUT"
        local w
        w=$(jget "$OUT" 'j["watcherId"]')
        write_file /home/user/pw/a hi
        local i ev=""
        for i in $(seq 100); do
                fs GetWatcherEvents "{\"watcher_id\": \"$w\"}"
                ev="$ev $(jget "$OUT" '" ".join(e["name"] + ":" + e["type"] for e in j["events"])')"
                [[ $ev == *a:EVENT_TYPE_WRITE* ]] && break
                sleep 0.1
        done
        assert_eq "a:EVENT_TYPE_CREATE a:EVENT_TYPE_WRITE" "$(echo $ev)" "the events"
        fs GetWatcherEvents "{\"watcherId\": \"$w\"}"
        assert_eq '{"events": []}' "$(jget "$OUT" 'json.dumps(j)')" "nothing new"
        fs RemoveWatcher "{\"watcherId\": \"$w\"}"
        assert_eq "200 {}" "$CODE $OUT" "RemoveWatcher"
        expect_error GetWatcherEvents "{\"watcherId\": \"$w\"}" 404 not_found
        expect_error RemoveWatcher "{\"watcherId\": \"$w\"}" 404 not_found
        # at most 16 a sandbox
        local ids=""
        for i in $(seq 16); do
                fs CreateWatcher '{"path": "pw"}'
                assert_eq 200 "$CODE" "watcher $i: $OUT"
                ids="$ids $(jget "$OUT" 'j["watcherId"]')"
        done
        expect_error CreateWatcher '{"path": "pw"}' 429 resource_exhausted
        for w in $ids; do
                fs RemoveWatcher "{\"watcherId\": \"$w\"}"
                assert_eq 200 "$CODE" "RemoveWatcher $w"
        done
        fs Remove '{"path": "pw"}'
}

# A sandbox with watchers is killed: they go with it, and nsboxd goes on.
test_watchers_go_with_their_sandbox() {
        local sb id2 tok2 i
        sb=$(curl -s -H "X-API-KEY: $KEY" -d '{"templateID": "base", "timeout": 600}' "$URL/v2/sandboxes")
        id2=$(jget "$sb" 'j["sandboxID"]')
        tok2=$(jget "$sb" 'j["envdAccessToken"]')
        for i in 1 2 3; do
                OUT=$(curl -s -H "E2b-Sandbox-Id: $id2" -H "X-Access-Token: $tok2" -H 'Content-Type: application/json' \
                        -d '{"path": "/tmp"}' "$URL/filesystem.Filesystem/CreateWatcher")
                assert_contains "$OUT" watcherId "CreateWatcher $i"
        done
        assert_status 0 curl -s -f -X DELETE -H "X-API-KEY: $KEY" "$URL/sandboxes/$id2"
        fs Stat '{"path": "/"}'
        assert_eq 200 "$CODE" "the other sandbox: $OUT"
}

# ---- the real SDK ------------------------------------------------------------------------------

# npm e2b@$E2B_SDK_VERSION, installed once per machine (root) or per user, like mcp.sh's sdk_dir
e2b_sdk_dir() {
        local shared=/var/cache/nsbox-test/npm-e2b-$E2B_SDK_VERSION dir
        if [ "$(id -u)" = 0 ]; then
                dir=$shared
        elif [ -r "$shared/node_modules/e2b/package.json" ]; then
                echo "$shared"
                return 0
        else
                dir=${XDG_CACHE_HOME:-$HOME/.cache}/nsbox-test/npm-e2b-$E2B_SDK_VERSION
        fi
        mkdir -p "$dir" || return 1
        local global; global=$(npm config get globalconfig 2> /dev/null)
        (
                flock 9
                [ -r "$dir/node_modules/e2b/package.json" ] ||
                        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --cache "$dir/.npm-cache" \
                                ${global:+--globalconfig "$global"} "e2b@$E2B_SDK_VERSION" >&2
        ) 9> "$dir/.lock" || return 1
        echo "$dir"
}

test_the_e2b_sdk_lists_stats_makes_moves_removes_and_watches() {
        command -v node > /dev/null || fail "node is missing (apt-get install nodejs npm, or ./quickstart.sh --deps)"
        command -v npm > /dev/null || fail "npm is missing"
        local dir
        dir=$(e2b_sdk_dir) || fail "npm install e2b@$E2B_SDK_VERSION failed"
        mkdir -p "$TEST_TMP/sdk"
        ln -sfn "$dir/node_modules" "$TEST_TMP/sdk/node_modules"
        cat > "$TEST_TMP/sdk/fs.mjs" << 'JS'
import { Sandbox, FileNotFoundError } from "e2b";
const ok = (c, what) => { if (!c) throw new Error("failed: " + what); };
const sbx = await Sandbox.connect(process.env.SANDBOX_ID);
{
        const fs = sbx.files;
        ok((await fs.makeDir("sdk/a")) === true, "makeDir creates");
        ok((await fs.makeDir("sdk/x/y")) === true && (await fs.makeDir("sdk/x")) === false, "makeDir with parents");
        await fs.remove("sdk/x");
        ok((await fs.makeDir("/home/user/sdk/a")) === false, "makeDir of an existing directory is false");
        ok(await fs.exists("sdk/f.txt"), "exists");
        ok(!(await fs.exists("sdk/nope")), "exists of a missing path is false");
        const info = await fs.getInfo("sdk/f.txt");
        ok(info.type === "file" && info.size === 5 && info.name === "f.txt" && info.path === "/home/user/sdk/f.txt", "getInfo " + JSON.stringify(info));
        ok(info.permissions === "-rw-r--r--" && info.owner === "user" && info.group === "user" && info.modifiedTime instanceof Date, "getInfo's owner " + JSON.stringify(info));
        const list = await fs.list("sdk");
        ok(list.map((e) => e.name + ":" + e.type).join(" ") === "a:dir f.txt:file", "list " + JSON.stringify(list));
        const deep = await fs.list("/home/user/sdk", { depth: 2 });
        ok(deep.length === 2, "list depth 2");
        const moved = await fs.rename("sdk/f.txt", "sdk/g.txt");
        ok(moved.path === "/home/user/sdk/g.txt" && moved.type === "file", "rename " + JSON.stringify(moved));
        let nf = false;
        try { await fs.getInfo("sdk/f.txt"); } catch (e) { nf = e instanceof FileNotFoundError; }
        ok(nf, "getInfo of a missing file throws FileNotFoundError");
        const seen = [];
        const h = await fs.watchDir("sdk", (e) => seen.push(e.name + ":" + e.type), { recursive: true });
        await fs.makeDir("sdk/new");
        await fs.remove("sdk/g.txt");
        for (let i = 0; i < 100 && !seen.includes("g.txt:remove"); i++) await new Promise((r) => setTimeout(r, 100));
        await h.stop();
        ok(seen.includes("new:create") && seen.includes("g.txt:remove"), "watchDir saw " + seen.join(" "));
        await fs.remove("sdk");
        ok(!(await fs.exists("sdk")), "remove");
        console.log("sdk ok");
}
JS
        local out
        fs MakeDir '{"path": "sdk"}'
        write_file /home/user/sdk/f.txt hello
        out=$(cd "$TEST_TMP/sdk" && SANDBOX_ID=$ID E2B_API_KEY=$KEY E2B_API_URL=$URL E2B_SANDBOX_URL=$URL timeout 120 node fs.mjs 2>&1) ||
                fail "the e2b SDK: $out"
        assert_contains "$out" "sdk ok" "the SDK script"
}

# Last (tests run in name order): the file's sandbox removed, then nothing is left.
test_zz_nothing_is_left() {
        assert_status 0 curl -s -f -X DELETE -H "X-API-KEY: $KEY" "$URL/sandboxes/$ID"
        assert_daemon_holds_nothing "$(cat "$SESSION_DIR/mounts-before")"
}

run_tests
