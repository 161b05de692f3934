#!/usr/bin/env bash
# contrib/nginx/nsboxd-e2b.conf in front of nsboxd's HTTP API, as E2B's own hosts look with
# E2B_DOMAIN set: TLS and HTTP/2 from nginx, api.DOMAIN for the control plane and PORT-ID.DOMAIN
# for a sandbox's envd and ports, routed by nsboxd from the Host header (http.domain).  nginx
# (Debian's nginx-light) runs unprivileged from a directory of its own, with a certificate made
# here; curl resolves the names to the loopback.
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
        printf '{"http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json", "domain": "%s"}}\n' "$port" "$d" "$DOMAIN" > "$d/config.json"
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
        assert_eq "$DOMAIN" "$(printf '%s' "$b" | python3 -c 'import json, sys; print(json.load(sys.stdin)["domain"])')" "the domain create gives"
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

test_zz_no_daemon_left() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
st=$?
chmod -R u+rwX "$SESSION_DIR" 2> /dev/null
rm -rf "$SESSION_DIR"
exit $st
