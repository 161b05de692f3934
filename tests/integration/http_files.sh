#!/usr/bin/env bash
# envd's GET and POST /files on nsboxd's HTTP API: octet-stream, multipart and gzip uploads, a
# 64 MiB round trip (its throughput printed, not asserted), relative paths and parents, the
# errors (404, a directory, a bad user, no path), an interrupted upload leaving nothing, envd's
# signed URLs, and the real e2b SDK (files.write/read/writeFiles, uploadUrl/downloadUrl).  One nsboxd of this file's, on a port of its own;
# each test makes its own sandbox.
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SESSION_DIR=$(mktemp -d /tmp/nsbox-files.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
MY_DAEMONS=""

# nsboxd with an HTTP listener on a free port: sets URL and KEY
start_daemon() {
        local i port
        # a free port (the configuration takes no port 0)
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json"}}\n' "$port" "$SESSION_DIR" > "$SESSION_DIR/config.json"
        port=""
        "$NSBOXD" --config "$SESSION_DIR/config.json" --socket "$NSBOX_SOCKET" >> "$SESSION_DIR/log" 2>&1 < /dev/null &
        DPID=$!
        MY_DAEMONS="$DPID"
        for i in $(seq 300); do
                port=$(sed -n 's/.*E2B-compatible HTTP API on 127.0.0.1:\([0-9]*\).*/\1/p' "$SESSION_DIR/log" | tail -n 1)
                [ -n "$port" ] && [ "$(daemon_pid)" = "$DPID" ] && break
                pid_alive "$DPID" || { echo "nsboxd exited at start: $(tail -n 5 "$SESSION_DIR/log")" >&2; return 1; }
                sleep 0.1
        done
        [ -n "$port" ] || return 1
        URL="http://127.0.0.1:$port"
        KEY=$("$NSBOX" api-key create 2> /dev/null) || return 1
}

# new_sandbox: an E2B sandbox; sets ID, TOK and H (the data plane's headers)
new_sandbox() {
        local out
        out=$(curl -sS -m 60 -H "X-API-KEY: $KEY" -d '{"templateID":"base","timeout":300}' "$URL/v2/sandboxes") || fail "create: $out"
        ID=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create: $out"
        TOK=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])')
        H=(-H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: $TOK")
}

# up PATH-QUERY FILE [curl args...]: an octet-stream upload; its body in OUT, its status in CODE
up() {
        local q=$1 f=$2
        shift 2
        OUT=$(curl -sS -m 120 "${H[@]}" -H 'Content-Type: application/octet-stream' --data-binary "@$f" -w '\n%{http_code}' "$@" "$URL/files?$q")
        CODE=${OUT##*$'\n'}
        OUT=${OUT%$'\n'*}
}

# down PATH-QUERY FILE: a download into FILE; its status in CODE
down() {
        CODE=$(curl -sS -m 120 "${H[@]}" -o "$2" -w '%{http_code}' "$URL/files?$1")
}

# ls_a DIR: the names in DIR inside the sandbox, one a line
ls_a() {
        "$NSBOX" call "$ID" list_dir "{\"path\": \"$1\"}" 2> /dev/null |
                python3 -c 'import json, sys; print("\n".join(e["name"] for e in json.load(sys.stdin)["entries"]))'
}

# json EXPR: EXPR of the JSON in OUT (as j)
json() { printf '%s' "$OUT" | python3 -c "import json, sys; j = json.load(sys.stdin); print($1)"; }

test_octet_stream_round_trip_64mib() {
        new_sandbox
        head -c $((64 << 20)) /dev/urandom > big
        local t0 t1 t2
        t0=$(date +%s.%N)
        up "path=/home/user/big.bin" big
        t1=$(date +%s.%N)
        assert_eq 200 "$CODE" "the upload ($OUT)"
        assert_eq '/home/user/big.bin big.bin file' "$(json 'j[0]["path"], j[0]["name"], j[0]["type"]')" "the upload's answer"
        assert_eq 1 "$(json 'len(j)')" "entries"
        down "path=/home/user/big.bin" big.out
        t2=$(date +%s.%N)
        assert_eq 200 "$CODE" "the download"
        cmp big big.out || fail "the file came back different"
        python3 -c "import sys; t0, t1, t2 = map(float, sys.argv[1:]); print('    64 MiB: upload %.0f MB/s, download %.0f MB/s' % (67.108864 / (t1 - t0), 67.108864 / (t2 - t1)), file=sys.stderr)" "$t0" "$t1" "$t2"
        # chunked, as the SDK streams it
        OUT=$(head -c 3000000 big | curl -sS -m 60 "${H[@]}" -H 'Content-Type: application/octet-stream' -H 'Transfer-Encoding: chunked' --data-binary @- "$URL/files?path=chunked.bin")
        down "path=chunked.bin" c.out
        head -c 3000000 big | cmp - c.out || fail "a chunked upload came back different ($OUT)"
        # an empty file
        : > empty
        up "path=empty.txt" empty
        assert_eq 200 "$CODE" "an empty upload ($OUT)"
        down "path=empty.txt" e.out
        assert_eq "200 0" "$CODE $(stat -c %s e.out)" "an empty download"
}

# hdr NAME: a header's value in the headers curl dumped into hdrs
hdr() { tr -d '\r' < hdrs | sed -n "s/^$1: //Ip" | tail -n 1; }

test_download_has_the_files_length() {
        new_sandbox
        head -c 3000001 /dev/urandom > odd
        up "path=odd.bin" odd
        assert_eq 200 "$CODE" "the upload ($OUT)"
        CODE=$(curl -sS -m 60 "${H[@]}" -D hdrs -o odd.out -w '%{http_code}' "$URL/files?path=odd.bin")
        assert_eq "200 3000001 " "$CODE $(hdr Content-Length) $(hdr Transfer-Encoding)" "a download's status, Content-Length, Transfer-Encoding"
        cmp odd odd.out || fail "the file came back different"
        : > empty
        up "path=empty.bin" empty
        CODE=$(curl -sS -m 60 "${H[@]}" -D hdrs -o e.out -w '%{http_code}' "$URL/files?path=empty.bin")
        assert_eq "200 0 0" "$CODE $(hdr Content-Length) $(stat -c %s e.out)" "an empty file's download"
        # a file of /proc says it has 0 bytes: its length is what was read
        CODE=$(curl -sS -m 60 "${H[@]}" -D hdrs -o p.out -w '%{http_code}' "$URL/files?path=/proc/cpuinfo")
        assert_eq "200 $(stat -c %s p.out)" "$CODE $(hdr Content-Length)" "/proc/cpuinfo's download"
        assert_contains "$(cat p.out)" "processor" "/proc/cpuinfo's bytes"
        # one of more than a read_file call's 1 MiB (a command line of 1.5 MB) comes whole, chunked
        local pid
        pid=$(big_cmdline_process "$ID") || fail "the process with a long command line did not start"
        CODE=$(curl -sS -m 60 "${H[@]}" -D hdrs -o c.out -w '%{http_code}' "$URL/files?path=/proc/$pid/cmdline")
        assert_eq "200 chunked" "$CODE $(hdr Transfer-Encoding)" "a long /proc file's download"
        big_cmdline > c.want
        cmp c.want c.out || fail "/proc/$pid/cmdline came back different ($(stat -c %s c.out) bytes of $(stat -c %s c.want))"
}

test_download_of_a_file_that_shrinks_is_cut_short() {
        new_sandbox
        head -c $((64 << 20)) /dev/zero > big
        up "path=big.bin" big
        assert_eq 200 "$CODE" "the upload ($OUT)"
        curl -sS -m 120 "${H[@]}" --limit-rate 2M -D hdrs -o big.out "$URL/files?path=big.bin" 2> curl.err &
        local cpid=$! rc=0
        sleep 1
        "$NSBOX" call "$ID" write_file '{"path": "/home/user/big.bin", "content": "x"}' > /dev/null || fail "write_file"
        wait "$cpid" || rc=$?
        assert_eq "18 67108864" "$rc $(hdr Content-Length)" "curl's exit (18: the body ended short) and the length told"
        [ "$(stat -c %s big.out)" -lt $((64 << 20)) ] || fail "the whole file came"
}

test_multipart_two_files_relative_path_and_parents() {
        new_sandbox
        printf 'one\n' > one
        printf 'two\000bytes' > two
        OUT=$(curl -sS -m 60 "${H[@]}" -F "file=@one;filename=/tmp/deep/er/one.txt" -F "file=@two;filename=rel/two.bin" "$URL/files")
        assert_eq "/tmp/deep/er/one.txt one.txt file /home/user/rel/two.bin two.bin file" \
                "$(json '" ".join(" ".join((e["path"], e["name"], e["type"])) for e in j)')" "the multipart answer ($OUT)"
        down "path=/tmp/deep/er/one.txt" o.out
        cmp one o.out || fail "one.txt differs"
        down "path=rel/two.bin" t.out
        cmp two t.out || fail "two.bin differs"
        # a single part, the path parameter naming it (what the SDK sends)
        OUT=$(curl -sS -m 60 "${H[@]}" -F "file=@one;filename=ignored" "$URL/files?path=a/b/c.txt")
        assert_eq "/home/user/a/b/c.txt" "$(json 'j[0]["path"]')" "the path parameter ($OUT)"
        # the same path twice is refused
        OUT=$(curl -sS -m 60 "${H[@]}" -w '\n%{http_code}' -F "file=@one;filename=x.txt" -F "file=@two;filename=x.txt" "$URL/files")
        assert_eq 400 "${OUT##*$'\n'}" "the same path twice"
        assert_eq "" "$(ls_a /home/user | grep '^\.x\.txt\.upload-')" "a temporary left"
}

test_gzip_upload() {
        new_sandbox
        head -c 5000000 /dev/urandom > r
        { cat r; head -c 20000000 /dev/zero; } > rz
        gzip -c rz > rz.gz
        up "path=z/rz" rz.gz -H 'Content-Encoding: gzip'
        assert_eq 200 "$CODE" "the gzip upload ($OUT)"
        down "path=z/rz" rz.out
        cmp rz rz.out || fail "the gzip upload came back different"
        # gzip that is not: 400, nothing written
        up "path=notgz" r -H 'Content-Encoding: gzip'
        assert_eq 400 "$CODE" "a body that is not gzip ($OUT)"
        head -c 1000 rz.gz > cut.gz
        up "path=cutgz" cut.gz -H 'Content-Encoding: gzip'
        assert_eq 400 "$CODE" "a cut gzip body ($OUT)"
        up "path=br" r -H 'Content-Encoding: br'
        assert_eq 400 "$CODE" "Content-Encoding br ($OUT)"
        assert_eq "" "$(ls_a /home/user | grep -E 'notgz|cutgz|^br$|upload-')" "files left by refused uploads"
}

test_errors() {
        new_sandbox
        printf 'x' > x
        down "path=/home/user/missing.txt" m.out
        assert_eq 404 "$CODE" "a missing file"
        assert_contains "$(cat m.out)" '"code":404' "a missing file's answer"
        down "path=/home/user" d.out
        assert_eq 400 "$CODE" "a directory"
        up "path=/home/user/adir/f" x
        up "path=/home/user/adir" x
        assert_eq 400 "$CODE" "an upload onto a directory ($OUT)"
        assert_eq "cannot write '/home/user/adir': Is a directory" "$(echo "$OUT" | python3 -c 'import json, sys; print(json.load(sys.stdin)["message"])')" \
                "its message, which names the file (not its temporary)"
        assert_eq "f" "$(ls_a /home/user/adir)" "the directory after"
        assert_eq "" "$(ls_a /home/user | grep upload-)" "a temporary left"
        down "path=x&username=root" u.out
        assert_eq 401 "$CODE" "username=root"
        up "path=x&username=nobody" x
        assert_eq 401 "$CODE" "an upload as nobody"
        down "path=x&username=user" u.out
        assert_eq 404 "$CODE" "username=user (the file is not there)"
        up "" x
        assert_eq 400 "$CODE" "an octet-stream upload without a path ($OUT)"
        assert_contains "$OUT" "path" "its message"
        OUT=$(curl -sS -m 10 "${H[@]}" -X DELETE -w '\n%{http_code}' "$URL/files?path=x")
        assert_eq 405 "${OUT##*$'\n'}" "DELETE /files"
        CODE=$(curl -sS -m 10 -H "E2b-Sandbox-Id: $ID" -H "X-Access-Token: nope" -o /dev/null -w '%{http_code}' "$URL/files?path=x")
        assert_eq 401 "$CODE" "a wrong access token"
}

# envd 0.6.2's file metadata: X-Metadata-KEY headers become the file's user.e2b.KEY attributes
# (KEY lowercased, the first of a repeated one); a bad one is a 400 that changes nothing
test_metadata_headers() {
        new_sandbox
        printf 'one' > one
        printf 'two' > two
        up "path=/home/user/m" one -H 'X-Metadata-Mixed: first' -H 'x-metadata-mixed: second' -H 'X-Metadata-: no key' \
                -H 'X-Metadata-other: a b'
        assert_eq 200 "$CODE" "an upload with metadata ($OUT)"
        assert_eq "{'mixed': 'first', 'other': 'a b'}" "$(json 'dict(sorted(j[0]["metadata"].items()))')" "its answer's metadata"
        local xattrs="import os; print(sorted((k, os.getxattr('/home/user/m', k).decode()) for k in os.listxattr('/home/user/m')))"
        local want="[('user.e2b.mixed', 'first'), ('user.e2b.other', 'a b')]"
        assert_eq "$want" "$("$NSBOX" exec "$ID" -- python3 -c "$xattrs" 2>&1)" "the file's attributes"
        local bad
        for bad in "X-Metadata-k: caf$(printf '\303\251')" "X-Metadata-$(printf 'k%.0s' $(seq 247)): v" \
                "X-Metadata-big: $(printf 'v%.0s' $(seq 4090))"; do
                up "path=/home/user/m" two -H "$bad"
                assert_eq 400 "$CODE" "metadata header ${bad:0:30}...: $OUT"
                assert_contains "$OUT" "invalid metadata" "its message"
        done
        assert_eq "one" "$("$NSBOX" exec "$ID" -- cat /home/user/m)" "the file after the refused uploads"
        assert_eq "$want" "$("$NSBOX" exec "$ID" -- python3 -c "$xattrs" 2>&1)" "its attributes after them"
        up "path=/home/user/m" two
        assert_eq "200 None" "$CODE $(json 'j[0].get("metadata")')" "an upload without metadata ($OUT)"
        assert_eq "[]" "$("$NSBOX" exec "$ID" -- python3 -c "$xattrs" 2>&1)" "the attributes it cleared"
}

test_interrupted_upload_leaves_nothing() {
        new_sandbox
        head -c $((16 << 20)) /dev/urandom > big
        curl -sS -m 60 "${H[@]}" -H 'Content-Type: application/octet-stream' --limit-rate 2M --data-binary @big \
                "$URL/files?path=/home/user/half/cut.bin" > /dev/null 2>&1 &
        local cpid=$! i names
        sleep 3
        kill -KILL "$cpid"
        wait "$cpid" 2> /dev/null
        for i in $(seq 100); do
                names=$(ls_a /home/user/half)
                [ -z "$names" ] && break
                sleep 0.1
        done
        assert_eq "" "$names" "what the interrupted upload left in /home/user/half"
}

# ---- the real e2b SDK ------------------------------------------------------------------------

# e2b@2.51.0, installed once per machine (root: /var/cache/nsbox-test/npm-e2b) or per user
# (unless root's is there to read); echoes its directory.
sdk_dir() {
        local shared=/var/cache/nsbox-test/npm-e2b dir want=node_modules/e2b/package.json
        if [ "$(id -u)" = 0 ]; then
                dir=$shared
        elif [ -r "$shared/$want" ]; then
                echo "$shared"
                return 0
        else
                dir=${XDG_CACHE_HOME:-$HOME/.cache}/nsbox-test/npm-e2b
        fi
        mkdir -p "$dir" || return 1
        local global; global=$(npm config get globalconfig 2> /dev/null)
        (
                flock 9
                [ -r "$dir/$want" ] ||
                        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --cache "$dir/.npm-cache" \
                                ${global:+--globalconfig "$global"} 'e2b@2.51.0' >&2
        ) 9> "$dir/.lock" || return 1
        echo "$dir"
}

# sign PATH OPERATION USER [EXPIRATION]: envd's signature of a /files URL for this sandbox (TOK),
# URL-encoded (base64 has + and /)
sign() {
        python3 -c 'import base64, hashlib, sys, urllib.parse
raw = ":".join(sys.argv[1:])
sig = "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")
print(urllib.parse.quote(sig, safe=""))' "$1" "$2" "$3" "$TOK" ${4:+"$4"}
}

# signed QUERY [curl args...]: /files with only the routing header, no token; status in CODE, body in OUT
signed() {
        unrouted "$1" -H "E2b-Sandbox-Id: $ID" "${@:2}"
}

# unrouted QUERY [curl args...]: the same with no header at all (one URL for every sandbox)
unrouted() {
        local q=$1
        shift
        OUT=$(curl -sS -m 30 -w '\n%{http_code}' "$@" "$URL/files?$q")
        CODE=${OUT##*$'\n'}
        OUT=${OUT%$'\n'*}
}

test_signed_urls() {
        new_sandbox
        printf 'signed' > s.txt
        up "path=/home/user/s.txt" s.txt
        assert_eq 200 "$CODE" "the upload ($OUT)"
        local later=$(($(date +%s) + 300)) before=$(($(date +%s) - 120))
        signed "path=/home/user/s.txt&username=user&signature=$(sign /home/user/s.txt read user)"
        assert_eq "200 signed" "$CODE $OUT" "a signed download"
        signed "path=/home/user/s.txt&signature=$(sign /home/user/s.txt read "" "$later")&signature_expiration=$later"
        assert_eq "200 signed" "$CODE $OUT" "a signed download, no username, expiring later"
        signed "path=/home/user/s.txt&signature=$(sign /home/user/s.txt read "" "$before")&signature_expiration=$before"
        assert_eq '401 {"code":401,"message":"signature is already expired"}' "$CODE $OUT" "an expired signature (envd's answer)"
        signed "path=/home/user/s.txt&signature=$(sign /home/user/s.txt read "" "$before")&signature_expiration=$later"
        assert_eq 401 "$CODE" "an expiration moved later"
        assert_contains "$OUT" "invalid signature" "its message"
        signed "path=/home/user/other.txt&signature=$(sign /home/user/s.txt read "")"
        assert_eq 401 "$CODE" "one file's signature for another"
        printf 'pwned' > p.txt
        signed "path=/home/user/s.txt&signature=$(sign /home/user/s.txt read "")" -H 'Content-Type: application/octet-stream' --data-binary @p.txt
        assert_eq 401 "$CODE" "a read signature used to write"
        down "path=/home/user/s.txt" back.txt
        assert_eq signed "$(cat back.txt)" "the file after the refused write"
        signed "path=/home/user/s.txt&signature=$(sign /home/user/s.txt write "")" -H 'Content-Type: application/octet-stream' --data-binary @p.txt
        assert_eq 200 "$CODE" "a signed upload ($OUT)"
        down "path=/home/user/s.txt" back.txt
        assert_eq pwned "$(cat back.txt)" "the file after the signed upload"
        signed "path=/home/user/s.txt"
        assert_eq 401 "$CODE" "no signature and no token"
        signed "path=/home/user/s.txt&signature=v1_nope"
        assert_eq 401 "$CODE" "a made-up signature"
        # one URL for every sandbox, no header (the SDKs' URLs under E2B_SANDBOX_URL): the
        # signature finds its sandbox, and only a right one does
        unrouted "path=/home/user/s.txt&signature=$(sign /home/user/s.txt read "")"
        assert_eq "200 pwned" "$CODE $OUT" "a signed download with no sandbox named"
        unrouted "path=/home/user/s.txt&signature=$(sign /home/user/s.txt read "" "$before")&signature_expiration=$before"
        assert_eq '401 {"code":401,"message":"signature is already expired"}' "$CODE $OUT" "an expired one with no sandbox named"
        unrouted "path=/home/user/other.txt&signature=$(sign /home/user/s.txt read "")"
        assert_eq '401 {"code":401,"message":"invalid signature: no sandbox of this nsboxd signed it"}' "$CODE $OUT" \
                "another file's signature with no sandbox named"
        printf 'again' > p.txt
        unrouted "path=/home/user/s.txt&signature=$(sign /home/user/s.txt write "")" -H 'Content-Type: application/octet-stream' --data-binary @p.txt
        assert_eq 200 "$CODE" "a signed upload with no sandbox named ($OUT)"
        down "path=/home/user/s.txt" back.txt
        assert_eq again "$(cat back.txt)" "the file after it"
}

test_e2b_sdk_files() {
        command -v node > /dev/null || fail "node is missing (apt-get install nodejs npm)"
        command -v npm > /dev/null || fail "npm is missing (apt-get install nodejs npm)"
        local dir
        dir=$(sdk_dir) || fail "npm install e2b@2.51.0 failed"
        mkdir -p sdk
        ln -sfn "$dir/node_modules" sdk/node_modules
        cat > sdk/files.mjs <<'JS'
import { Sandbox } from "e2b";
import { randomBytes } from "node:crypto";
import assert from "node:assert/strict";

const sbx = await Sandbox.create("base", { timeoutMs: 300_000 });
try {
        const info = await sbx.files.write("notes/hello.txt", "héllo\n");
        assert.equal(info.path, "/home/user/notes/hello.txt");
        assert.equal(info.name, "hello.txt");
        assert.equal(await sbx.files.read("notes/hello.txt"), "héllo\n");
        assert.equal(await sbx.files.read("/home/user/notes/hello.txt", { user: "user" }), "héllo\n");

        const small = Uint8Array.from([0, 1, 2, 255, 254, 10, 13]);
        await sbx.files.write("/tmp/bytes.bin", small);
        assert.deepEqual(await sbx.files.read("/tmp/bytes.bin", { format: "bytes" }), small);
        await sbx.files.write("/tmp/ab.bin", small.buffer);
        assert.deepEqual(await sbx.files.read("/tmp/ab.bin", { format: "bytes" }), small);

        const big = randomBytes(64 << 20);
        let t = performance.now();
        await sbx.files.write("big.bin", new Uint8Array(big));
        const up = performance.now() - t;
        t = performance.now();
        const back = await sbx.files.read("big.bin", { format: "bytes" });
        const down = performance.now() - t;
        assert.equal(Buffer.compare(Buffer.from(back), big), 0, "64 MiB came back different");
        console.error(`    SDK 64 MiB: write ${(67.108864 / up * 1000).toFixed(0)} MB/s, read ${(67.108864 / down * 1000).toFixed(0)} MB/s`);

        // gzip: octet-stream, streamed
        await sbx.files.write("gz.txt", "zipped ".repeat(1000), { gzip: true });
        assert.equal(await sbx.files.read("gz.txt"), "zipped ".repeat(1000));

        const many = await sbx.files.writeFiles([
                { path: "many/a.txt", data: "A" },
                { path: "/tmp/many/b.bin", data: new Uint8Array([66, 0]) },
                { path: "many/c.txt", data: new Blob(["C"]) },
        ]);
        assert.deepEqual(many.map((e) => e.path), ["/home/user/many/a.txt", "/tmp/many/b.bin", "/home/user/many/c.txt"]);
        assert.equal(await sbx.files.read("many/a.txt"), "A");
        assert.deepEqual(await sbx.files.read("/tmp/many/b.bin", { format: "bytes" }), new Uint8Array([66, 0]));
        assert.equal(await sbx.files.read("many/c.txt"), "C");

        // the SDK's signed URLs: fetched with nothing but the routing header (a domain's host
        // name carries the id instead)
        const route = { headers: { "E2b-Sandbox-Id": sbx.sandboxId } };
        let res = await fetch(await sbx.downloadUrl("/home/user/notes/hello.txt"), route);
        assert.equal(res.status, 200, "downloadUrl");
        assert.equal(await res.text(), "héllo\n");
        res = await fetch(await sbx.uploadUrl("/home/user/up.txt", { useSignatureExpiration: 60 }), { ...route, method: "POST", body: "via url" });
        assert.equal(res.status, 200, "uploadUrl");
        assert.equal(await sbx.files.read("up.txt"), "via url");
        res = await fetch(await sbx.downloadUrl("/home/user/up.txt", { useSignatureExpiration: -120 }), route);
        assert.equal(res.status, 401, "an expired downloadUrl");
        await assert.rejects(sbx.files.read("nope.txt"), (e) => e.name === "NotFoundError" || /not.*found|404/i.test(String(e)));
        await assert.rejects(sbx.files.read("x", { user: "root" }), (e) => /401|user/i.test(String(e)));
        console.log("ok");
} finally {
        await sbx.kill();
}
JS
        OUT=$(cd sdk && E2B_API_KEY="$KEY" E2B_API_URL="$URL" E2B_SANDBOX_URL="$URL" timeout 240 node files.mjs 2>&1)
        local st=$?
        [ $st = 0 ] || fail "node files.mjs: status $st: $OUT"
        printf '%s\n' "$OUT" | grep 'MB/s' >&2
        assert_contains "$OUT" "ok" "the SDK script"
}

# Last: no nsboxd of this file's is left once it is stopped.
test_zz_no_daemon_left() {
        kill -TERM "$DPID"
        wait_pids_gone 30 "$DPID" > /dev/null || fail "nsboxd $DPID did not stop"
        assert_no_nsboxd_of "$SESSION_DIR"
}

start_daemon || { cleanup; rm -rf "$SESSION_DIR"; echo "nsboxd did not start" >&2; exit 1; }
run_tests
st=$?
cleanup
rm -rf "$SESSION_DIR"
exit $st
