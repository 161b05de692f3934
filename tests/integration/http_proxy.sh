#!/usr/bin/env bash
# nsboxd's port proxy (nsboxd(8), HTTP API): E2b-Sandbox-Port N, or an N-ID.DOMAIN host, reaches
# port N inside that sandbox's own network namespace, with no --publish: a file listing, a body
# round trip, a WebSocket echo; never a port of the host.  Ports are public by default (E2B's
# allowPublicTraffic: the id reaches them, as a browser's PORT-ID.DOMAIN does); a sandbox made with
# allowPublicTraffic false opens its ports to its trafficAccessToken only, never to another
# sandbox's tokens; nothing listening is a 502 JSON.  One nsboxd for the file, run by the test's user
# (root or the unprivileged one); the servers inside are python3's standard library.
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
DIR=$(mktemp -d /tmp/nsbox-proxy.XXXXXX) || exit 1
chmod 0711 "$DIR"
export NSBOX_STORE="$DIR/store"
export NSBOX_SOCKET="$DIR/d.sock"
DOMAIN=nsbox.test

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
BASE="http://127.0.0.1:$PORT"

printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json", "domain": "%s"}}\n' "$PORT" "$DIR" "$DOMAIN" > "$DIR/config.json"
"$NSBOXD" --config "$DIR/config.json" --socket "$NSBOX_SOCKET" >> "$DIR/log" 2>&1 < /dev/null &
trap 'stop_file_daemon "$DIR"' EXIT
for _ in $(seq 300); do
        "$NSBOX" ping > /dev/null 2>&1 && break
        sleep 0.1
done
KEY=$("$NSBOX" api-key create 2> /dev/null)

# A small echo server: the body back with 201, and what it saw of the request in headers.
ECHO_PY='
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(201)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("X-Seen-Token", self.headers.get("X-Access-Token") or "none")
        self.send_header("X-Seen-Key", self.headers.get("X-API-KEY") or "none")
        self.send_header("X-Seen-Traffic", self.headers.get("E2B-Traffic-Access-Token") or "none")
        self.send_header("X-Seen-Path", self.path)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'

# A minimal WebSocket server (RFC 6455): the handshake, then each frame back as "echo:TEXT".
WS_PY='
import socketserver, hashlib, base64, sys, struct
class H(socketserver.StreamRequestHandler):
    def handle(self):
        head = b""
        while b"\r\n\r\n" not in head:
            c = self.request.recv(4096)
            if not c: return
            head += c
        key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")][0]
        acc = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        self.request.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        f = self.request.makefile("rb")
        while True:
            h = f.read(2)
            if len(h) < 2: return
            op, n = h[0] & 15, h[1] & 127
            if n == 126: n = struct.unpack(">H", f.read(2))[0]
            mask = f.read(4) if h[1] & 128 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(f.read(n)))
            if op == 8: self.request.sendall(b"\x88\x00"); return
            out = b"echo:" + data
            self.request.sendall(bytes([0x80 | op, len(out)]) + out)
socketserver.ThreadingTCPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'

# The client: upgrade through nsboxd (HOST: a Host header instead of the E2B headers), check
# Sec-WebSocket-Accept, send one masked text frame, print the answer.
WS_CLIENT_PY='
import socket, os, base64, hashlib, sys
port, sid, tok, wsport, host = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
key = base64.b64encode(os.urandom(16))
route = "" if host != "-" else "E2b-Sandbox-Id: %s\r\nE2b-Sandbox-Port: %s\r\n" % (sid, wsport)
s.sendall(("GET /ws?x=1 HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
           "Sec-WebSocket-Version: 13\r\n%sX-Access-Token: %s\r\n\r\n" % (host if host != "-" else "127.0.0.1", key.decode(), route, tok)).encode())
head = b""
while b"\r\n\r\n" not in head:
    c = s.recv(1)
    if not c: break
    head += c
if b" 101 " not in head.split(b"\r\n")[0] + b" ":
    print("no upgrade:", head.decode(errors="replace"), s.recv(65536).decode(errors="replace")); sys.exit(1)
want = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
if b"sec-websocket-accept: " + want.lower() not in head.lower():
    print("bad accept:", head.decode()); sys.exit(1)
msg, mask = b"hello through nsbox", os.urandom(4)
s.sendall(bytes([0x81, 0x80 | len(msg)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
h = s.recv(2)
data = b""
while len(data) < h[1] & 127: data += s.recv(128)
print(data.decode())
s.sendall(bytes([0x88, 0x80]) + mask)
'

# new_sandbox [NETWORK-JSON]: an E2B create; sets ID, TOK and TRAFFIC (its trafficAccessToken or None)
new_sandbox() {
        local out
        out=$(curl -s -H "X-API-KEY: $KEY" -d '{"templateID":"base","timeout":300,"network":'"${1:-null}"'}' "$BASE/v2/sandboxes")
        ID=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])') || fail "create: $out"
        TOK=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])')
        TRAFFIC=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["trafficAccessToken"])')
}

# pcurl ID TOKEN PORT CURL-ARGS... PATH: through the proxy; the status in CODE, the body in BODY
pcurl() {
        local id=$1 tok=$2 port=$3
        shift 3
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $id" -H "E2b-Sandbox-Port: $port" \
                -H "X-Access-Token: $tok" "$@")
        BODY=$(head -c 4096 "$TEST_TMP/body" | tr -d '\0')
}

# serve ID PORT CMD...: CMD in the background inside ID, then wait until PORT answers
serve() {
        local id=$1 port=$2 i
        shift 2
        "$NSBOX" exec -d "$id" -- "$@" < /dev/null > /dev/null || fail "exec -d $*"
        for i in $(seq 100); do
                pcurl "$id" "$TOK" "$port" "$BASE/"
                case $BODY in *"nothing listens"*) ;; *) return 0 ;; esac
                sleep 0.1
        done
        fail "port $port of $id never answered: $BODY"
}

test_file_listing_from_a_server_inside() {
        new_sandbox
        serve "$ID" 8000 python3 -m http.server 8000
        pcurl "$ID" "$TOK" 8000 "$BASE/"
        assert_eq 200 "$CODE" "GET / through the proxy ($BODY)"
        assert_contains "$BODY" "Directory listing for /" "the listing"
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_post_body_round_trips_without_credentials() {
        new_sandbox
        serve "$ID" 8001 python3 -c "$ECHO_PY" 8001
        head -c 300000 /dev/urandom > "$TEST_TMP/blob"
        pcurl "$ID" "$TOK" 8001 -D "$TEST_TMP/head" -H "X-API-KEY: $KEY" --data-binary "@$TEST_TMP/blob" "$BASE/a%20b/c?q=1&r=x%26y"
        assert_eq 201 "$CODE" "POST through the proxy"
        cmp -s "$TEST_TMP/blob" "$TEST_TMP/body" || fail "the body came back different ($(stat -c %s "$TEST_TMP/body") bytes)"
        local head
        head=$(tr -d '\r' < "$TEST_TMP/head")
        assert_contains "$head" "X-Seen-Token: none" "the access token is not passed to the port"
        assert_contains "$head" "X-Seen-Key: none" "the API key is not passed to the port"
        assert_contains "$head" "X-Seen-Path: /a%20b/c?q=1&r=x%26y" "the path and query as sent"
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_websocket_echo() {
        new_sandbox
        serve "$ID" 8002 python3 -c "$WS_PY" 8002
        OUT=$(timeout 20 python3 -c "$WS_CLIENT_PY" "$PORT" "$ID" "$TOK" 8002 -) || fail "WebSocket: $OUT"
        assert_eq "echo:hello through nsbox" "$OUT" "the WebSocket echo"
        # and by its host name
        OUT=$(timeout 20 python3 -c "$WS_CLIENT_PY" "$PORT" "$ID" "$TOK" 8002 "8002-$ID.$DOMAIN") || fail "WebSocket by host: $OUT"
        assert_eq "echo:hello through nsbox" "$OUT" "the WebSocket echo by host name"
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_port_by_host_name_with_domain() {
        new_sandbox
        serve "$ID" 8000 python3 -m http.server 8000
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "Host: 8000-$ID.$DOMAIN" -H "X-Access-Token: $TOK" "$BASE/")
        assert_eq 200 "$CODE" "GET by host 8000-ID.$DOMAIN"
        assert_contains "$(cat "$TEST_TMP/body")" "Directory listing for /" "the listing by host name"
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_nothing_listening_is_502_json() {
        new_sandbox
        pcurl "$ID" "$TOK" 8009 "$BASE/x"
        assert_eq 502 "$CODE" "a port nobody listens on"
        assert_eq "502 port 8009" "$(printf '%s' "$BODY" | python3 -c 'import json, re, sys; b = json.load(sys.stdin); print(b["code"], re.search("port [0-9]+", b["message"]).group(0))')" "the JSON error ($BODY)"
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_a_port_of_the_host_is_not_reachable() {
        trap cleanup EXIT
        local hport
        hport=$(free_port)
        mkdir -p "$TEST_TMP/www" && echo host-secret > "$TEST_TMP/www/secret.txt"
        python3 -m http.server --bind 127.0.0.1 --directory "$TEST_TMP/www" "$hport" > /dev/null 2>&1 &
        MY_PIDS="$MY_PIDS $!"
        for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$hport/" && break; sleep 0.1; done
        curl -s "http://127.0.0.1:$hport/secret.txt" | grep -q host-secret || fail "the host's server did not start"
        new_sandbox
        pcurl "$ID" "$TOK" "$hport" "$BASE/secret.txt"
        assert_eq 502 "$CODE" "the host's port $hport through the proxy"
        assert_not_contains "$BODY" "host-secret" "the host's file"
        assert_contains "$BODY" "port $hport" "the error"
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_ports_are_public_by_default_as_on_e2b() {
        new_sandbox
        assert_eq None "$TRAFFIC" "a public sandbox's trafficAccessToken"
        serve "$ID" 8000 python3 -m http.server 8000
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 8000" "$BASE/")
        assert_eq 200 "$CODE" "a public port with no credentials"
        assert_contains "$(cat "$TEST_TMP/body")" "Directory listing" "the listing"
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "Host: 8000-$ID.$DOMAIN" "$BASE/")
        assert_eq 200 "$CODE" "a public port by its host name, no credentials"
        # envd's port is never public
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 49983" \
                -H "Content-Type: application/json" -d '{"path":"/"}' "$BASE/filesystem.Filesystem/ListDir")
        assert_eq 401 "$CODE" "envd with no token"
        "$NSBOX" rm -f "$ID" > /dev/null
        # a sandbox made on nsboxd's socket never asked for E2B's rule: its ports stay private
        local own
        own=$("$NSBOX" create) || fail "nsbox create"
        "$NSBOX" exec -d "$own" -- python3 -m http.server 8000 < /dev/null > /dev/null || fail "exec -d"
        for _ in $(seq 50); do
                "$NSBOX" exec "$own" -- python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8000/")' 2> /dev/null && break
                sleep 0.1
        done
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $own" -H "E2b-Sandbox-Port: 8000" "$BASE/")
        assert_eq 401 "$CODE" "a port of a sandbox made on the socket, with no credentials"
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $own" -H "E2b-Sandbox-Port: 8000" -H "X-API-KEY: $KEY" "$BASE/")
        assert_eq 200 "$CODE" "the same with its owner's key"
        "$NSBOX" rm -f "$own" > /dev/null
}

test_a_private_sandbox_port_needs_its_traffic_token() {
        local a atok
        new_sandbox
        a=$ID atok=$TOK
        new_sandbox '{"allowPublicTraffic": false}'
        [[ $TRAFFIC =~ ^[0-9a-f]{32,}$ ]] || fail "trafficAccessToken: $TRAFFIC"
        serve_private() {
                local i
                "$NSBOX" exec -d "$ID" -- python3 -c "$ECHO_PY" 8003 < /dev/null > /dev/null || fail "exec -d"
                for i in $(seq 100); do
                        CODE=$(curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 8003" \
                                -H "E2B-Traffic-Access-Token: $TRAFFIC" -d x "$BASE/")
                        [ "$CODE" = 201 ] && return 0
                        sleep 0.1
                done
                fail "port 8003 never answered: $CODE"
        }
        serve_private
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 8003" -d x "$BASE/")
        assert_eq 401 "$CODE" "a private port with no token"
        assert_contains "$(cat "$TEST_TMP/body")" "traffic token" "the error"
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "Host: 8003-$ID.$DOMAIN" -d x "$BASE/")
        assert_eq 401 "$CODE" "a private port by its host name with no token"
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 8003" \
                -H "E2B-Traffic-Access-Token: $atok" -H "X-Access-Token: $atok" -d x "$BASE/")
        assert_eq 401 "$CODE" "B's private port with A's token"
        CODE=$(curl -s -o "$TEST_TMP/body" -D "$TEST_TMP/head" -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 8003" \
                -H "E2B-Traffic-Access-Token: $TRAFFIC" -d hello "$BASE/")
        assert_eq 201 "$CODE" "B's private port with its traffic token"
        assert_eq hello "$(cat "$TEST_TMP/body")" "the body"
        assert_contains "$(tr -d '\r' < "$TEST_TMP/head")" "X-Seen-Traffic: none" "the traffic token is not passed to the port"
        # the detail says so; a bad network is refused whole
        curl -s -H "X-API-KEY: $KEY" "$BASE/sandboxes/$ID" > "$TEST_TMP/detail"
        assert_eq False "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["network"]["allowPublicTraffic"])' "$TEST_TMP/detail")" "detail"
        local n
        n=$("$NSBOX" ls --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
        for bad in '{"allowPublicTraffic": "no"}' '{"denyOut": ["0.0.0.0/0"]}' '{"maskRequestHost": "x"}' '{"nope": 1}' '[]'; do
                CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" -d '{"templateID":"base","network":'"$bad"'}' "$BASE/v2/sandboxes")
                assert_eq 400 "$CODE" "network $bad"
                assert_contains "$(cat "$TEST_TMP/body")" "network" "the error of network $bad"
        done
        assert_eq "$n" "$("$NSBOX" ls --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" "sandboxes after the refused creates"
        "$NSBOX" rm -f "$a" > /dev/null
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_a_large_answer_streams_whole() {
        new_sandbox
        "$NSBOX" exec "$ID" -- sh -c 'head -c 30000000 /dev/urandom > /tmp/big' > /dev/null || fail "making /tmp/big"
        serve "$ID" 8000 python3 -m http.server --directory /tmp 8000
        local want got
        want=$("$NSBOX" exec "$ID" -- sha256sum /tmp/big | cut -d' ' -f1)
        # a slow reader: the proxy holds the port's answer back rather than buffering it all
        got=$(curl -s --limit-rate 50M -H "E2b-Sandbox-Id: $ID" -H "E2b-Sandbox-Port: 8000" -H "X-Access-Token: $TOK" \
                "$BASE/big" | sha256sum | cut -d' ' -f1)
        assert_eq "$want" "$got" "30 MB through the proxy"
        "$NSBOX" rm -f "$ID" > /dev/null
}

test_zz_nothing_left() {
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(json.dumps([s["id"] for s in json.load(sys.stdin)]))')" "sandboxes left"
        assert_eq "" "$(daemon_children "$(daemon_pid)")" "processes under nsboxd (the socket helpers are reaped)"
}

run_tests
