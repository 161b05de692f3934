#!/usr/bin/env bash
# contrib/nginx/nsboxd-e2b.conf in front of nsboxd's HTTP API, as E2B's own hosts look with
# E2B_DOMAIN set: TLS and HTTP/2 from nginx, api.DOMAIN for the control plane and PORT-ID.DOMAIN
# for a sandbox's envd and ports, routed by nsboxd from the Host header (http.domain).  nginx
# (Debian's nginx-light) runs unprivileged from a directory of its own, with a certificate made
# here; curl resolves the names to the loopback, and so does node for the real SDKs, which are
# given nothing but E2B_DOMAIN (tests/e2b/domain.mjs).
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
NSBOX_SRC=${NSBOX_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
SESSION_DIR=$(mktemp -d /tmp/nsbox-tls.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"
DOMAIN=sandbox.test
MY_DAEMONS=""
MY_PIDS=""

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# nsboxd (http.domain), nginx with the contrib file; sets URL (https, api host), KEY, TLS, RESOLVE
setup() {
        local d=$SESSION_DIR i port
        NGINX=$(PATH=$PATH:/usr/sbin:/sbin command -v nginx) || fail "nginx is missing (apt-get install nginx-light, or ./quickstart.sh --deps)"
        port=$(free_port)
        TLS=$(free_port)
        # the domain with the port the clients use (nginx's, not 443): the SDKs build their URLs from it
        printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json", "domain": "%s:%s"}}\n' "$port" "$d" "$DOMAIN" "$TLS" > "$d/config.json"
        "$NSBOXD" --config "$d/config.json" --socket "$d/d.sock" >> "$d/log" 2>&1 < /dev/null &
        MY_DAEMONS="$MY_DAEMONS $!"
        export NSBOX_SOCKET=$d/d.sock
        for i in $(seq 100); do [ -S "$d/d.sock" ] && daemon_pid > /dev/null && break; sleep 0.1; done
        KEY=$("$NSBOX" api-key create 2> /dev/null) || fail "api-key create: $(tail -n 3 "$d/log")"
        openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=api.$DOMAIN" \
                -addext "subjectAltName=DNS:api.$DOMAIN,DNS:*.$DOMAIN" -keyout "$d/key.pem" -out "$d/cert.pem" 2> /dev/null ||
                fail "openssl could not make a certificate"
        mkdir -p "$d/nginx/logs"
        # the contrib file, with this test's ports, certificate and domain
        sed -e "s|127.0.0.1:49982|127.0.0.1:$port|; s|listen 443|listen 127.0.0.1:$TLS|; /listen \[::\]:443/d" \
            -e "s|/etc/nsbox/tls/fullchain.pem|$d/cert.pem|; s|/etc/nsbox/tls/privkey.pem|$d/key.pem|; s|sandbox.example.com|$DOMAIN|g" \
            "$NSBOX_SRC/contrib/nginx/nsboxd-e2b.conf" > "$d/nginx/site.conf"
        cat > "$d/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $d/nginx/nginx.pid;
error_log $d/nginx/logs/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $d/nginx/body;
    proxy_temp_path $d/nginx/proxy;
    include $d/nginx/site.conf;
}
CONF
        "$NGINX" -e "$d/nginx/logs/error.log" -p "$d/nginx" -c "$d/nginx/nginx.conf" > /dev/null 2>&1 &
        MY_PIDS="$MY_PIDS $!"
        for i in $(seq 50); do
                curl -s -o /dev/null --cacert "$d/cert.pem" --resolve "api.$DOMAIN:$TLS:127.0.0.1" "https://api.$DOMAIN:$TLS/health" && break
                sleep 0.1
        done
        URL=https://api.$DOMAIN:$TLS
}

# tcurl HOST ARGS...: curl over TLS to HOST (resolved to the loopback), HTTP/2 where it can;
# stdout is the body, the status and HTTP version go to $TEST_TMP/w
tcurl() {
        local host=$1
        shift
        curl -s --http2 --cacert "$SESSION_DIR/cert.pem" --resolve "$host:$TLS:127.0.0.1" -w '%{http_code} %{http_version}' \
                -o "$TEST_TMP/body" "$@" > "$TEST_TMP/w"
        cat "$TEST_TMP/body"
}

test_tls_http2_and_host_routing() {
        trap cleanup EXIT
        setup
        local b id tok h
        b=$(tcurl "api.$DOMAIN" -H "X-API-KEY: $KEY" -d '{"templateID": "base", "timeout": 120}' "$URL/v2/sandboxes")
        assert_eq "201 2" "$(cat "$TEST_TMP/w")" "create over TLS and HTTP/2: $b"
        id=$(printf '%s' "$b" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])')
        tok=$(printf '%s' "$b" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])')
        assert_eq "$DOMAIN:$TLS" "$(printf '%s' "$b" | python3 -c 'import json, sys; print(json.load(sys.stdin)["domain"])')" "the domain create gives"
        h=49983-$id.$DOMAIN
        tcurl "$h" -H "X-Access-Token: $tok" "https://$h:$TLS/health" > /dev/null
        assert_eq "204 2" "$(cat "$TEST_TMP/w")" "envd's /health by host name"
        head -c 3000000 /dev/urandom > "$TEST_TMP/up"
        tcurl "$h" -H "X-Access-Token: $tok" -H 'Content-Type: application/octet-stream' --data-binary @"$TEST_TMP/up" \
                "https://$h:$TLS/files?path=up.bin" > /dev/null
        assert_eq "200 2" "$(cat "$TEST_TMP/w")" "an upload through nginx"
        tcurl "$h" -H "X-Access-Token: $tok" "https://$h:$TLS/files?path=up.bin" > "$TEST_TMP/down"
        assert_eq "200 2" "$(cat "$TEST_TMP/w")" "the download"
        cmp -s "$TEST_TMP/up" "$TEST_TMP/down" || fail "3 MB through nginx came back different"
        # another sandbox's host with this one's token; a port nothing listens on
        tcurl "49983-0123456789abcdef0123456789abcdef.$DOMAIN" -H "X-Access-Token: $tok" \
                "https://49983-0123456789abcdef0123456789abcdef.$DOMAIN:$TLS/health" > /dev/null
        assert_eq "502 2" "$(cat "$TEST_TMP/w")" "an unknown sandbox's host"
        tcurl "8000-$id.$DOMAIN" -H "X-Access-Token: $tok" "https://8000-$id.$DOMAIN:$TLS/" > /dev/null
        assert_eq "502 2" "$(cat "$TEST_TMP/w")" "a port nothing listens on"
        tcurl "api.$DOMAIN" -X DELETE -H "X-API-KEY: $KEY" "$URL/sandboxes/$id" > /dev/null
        assert_eq "204 2" "$(cat "$TEST_TMP/w")" "kill"
}

# The real SDKs with nothing but E2B_DOMAIN (NOVITA_DOMAIN) and a key: tests/e2b/domain.mjs.
test_real_sdks_by_domain_name() {
        trap cleanup EXIT
        command -v node > /dev/null && command -v npm > /dev/null || fail "node and npm are needed for the SDKs (./quickstart.sh --deps)"
        /usr/bin/python3 -c 'import ipykernel, jupyter_client' 2> /dev/null || fail "no Jupyter kernel in Debian's python3 (the code interpreter's): ./quickstart.sh --deps installs it"
        setup
        local dir out st
        dir=$(npm_cache_dir e2b node_modules/.package-lock.json "$NSBOX_SRC/tests/e2b" 2> "$TEST_TMP/npm.err") ||
                fail "npm ci of tests/e2b: $(tail -n 5 "$TEST_TMP/npm.err")"
        mkdir -p "$TEST_TMP/e2b" && cp "$NSBOX_SRC"/tests/e2b/lib.mjs "$NSBOX_SRC"/tests/e2b/domain.mjs "$NSBOX_SRC"/tests/e2b/dns-hook.mjs "$TEST_TMP/e2b/" &&
                ln -s "$dir/node_modules" "$TEST_TMP/e2b/node_modules" || fail "lay out $TEST_TMP/e2b"
        out=$(cd "$TEST_TMP/e2b" && env -u E2B_API_URL -u E2B_SANDBOX_URL -u NOVITA_API_URL -u NOVITA_SANDBOX_URL \
                E2B_DOMAIN="$DOMAIN:$TLS" E2B_API_KEY="$KEY" NOVITA_DOMAIN="$DOMAIN:$TLS" NOVITA_API_KEY="$KEY" \
                NSBOX_TEST_DOMAIN=$DOMAIN NODE_EXTRA_CA_CERTS="$SESSION_DIR/cert.pem" NO_UPDATE_NOTIFIER=1 \
                timeout -k 10 400 node --import ./dns-hook.mjs domain.mjs 2> "$TEST_TMP/node.err")
        st=$?
        printf '%s\n' "$out" "$(tail -n 20 "$TEST_TMP/node.err")" | sed 's/^/    /' >&2
        assert_not_contains "$out" "not ok" "the SDKs' checks"
        assert_not_contains "$out" "skip " "the SDKs' checks"
        local c
        for c in create_run_and_files_by_domain web_preview_at_get_host_with_no_header signed_download_url_with_no_header \
                code_interpreter_by_domain novita_code_interpreter_by_domain; do
                assert_contains "$out" "ok $c" "the check $c"
        done
        assert_eq 0 "$st" "node's exit status"
}

test_zz_no_daemon_left() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
st=$?
chmod -R u+rwX "$SESSION_DIR" 2> /dev/null
rm -rf "$SESSION_DIR"
exit $st
