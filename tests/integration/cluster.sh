#!/usr/bin/env bash
# Many nsboxd nodes behind HAProxy (issue 29; nsboxd(8) CLUSTER; contrib/haproxy): three nodes
# a, b, c (--node, cluster.agent_check, one shared key file), each in a network namespace of its own
# as root (veth pairs and 10.231.X.Y addresses of this test), on loopback ports as a user; HAProxy
# from contrib/haproxy/nsbox-haproxy-config in front; the unmodified e2b SDK pointed at it
# (tests/e2b/cluster.mjs), and a Redis of the test's as the cluster catalog.  Checks: 60 creates
# placed by free capacity (a: 100 slots, b: 20, c: full, so a gets most, b some, c none), every
# call reaching the node its id names, Sandbox.list with a metadata filter answering for every
# node, a key made on one node taking on all, eight concurrent get_or_create calls on two nodes
# giving one sandbox, kill -9 of a node (its sandboxes answer not found at once and leave the
# lists within the TTL, creates go elsewhere, the restarted node takes creates again), Redis
# stopped (each node serves its own) and restarted (the catalog rebuilt), TLS and HTTP/2 at the
# router, bad ids and keys refused in JSON, and nothing left.  Needs haproxy and redis-server (Debian's; ./quickstart.sh
# --deps) and the e2b npm package (tests/e2b, as integration/e2b.sh).
. "$(dirname "$0")/../lib.sh"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
NSBOX_SRC=${NSBOX_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)} # in sbin: not on a user's PATH
REDIS=${REDIS:-$(command -v redis-server || echo /usr/bin/redis-server)}
TTL=3 # cluster.catalog_ttl: a dead node's records go within it
SESSION_DIR=$(mktemp -d /tmp/nsbox-cluster.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"
mounts() { grep -vc ' /run/netns' /proc/self/mountinfo; } # ip netns's own mounts aside
mounts > "$SESSION_DIR/mounts-before"
NET=$(( $$ % 200 + 20 )) # 10.231.NET.0/24: this run's addresses (root)
exec 3>&1

setup_failed() { printf '%s\n' "$*" > "$SESSION_DIR/setup.err"; return 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
netns_of() { echo "nsbt-cl$$-$1"; }
node_index() { case $1 in a) echo 1 ;; b) echo 2 ;; c) echo 3 ;; esac; }

# stop NODE's nsboxd (TERM, then KILL) and whatever agents it had
stop_node() {
        local n=$1 pid agents
        pid=$(cat "$SESSION_DIR/$n/pid" 2> /dev/null) || return 0
        # only a node that answers is asked: nsbox would start a daemon on a dead node's socket
        [ -n "$(NSBOX_SOCKET="$SESSION_DIR/$n/d.sock" daemon_pid)" ] &&
                agents=$(NSBOX_SOCKET="$SESSION_DIR/$n/d.sock" "$NSBOX" ls --json 2> /dev/null |
                        python3 -c 'import json, sys; print(" ".join(str(s["pid"]) for s in json.load(sys.stdin)))' 2> /dev/null)
        kill -TERM "$pid" 2> /dev/null
        # shellcheck disable=SC2086
        wait_pids_gone 10 "$pid" $agents > /dev/null || kill -KILL "$pid" $agents 2> /dev/null
        rm -f "$SESSION_DIR/$n/pid"
}

stop_all() {
        local st=$? n
        [ -s "$SESSION_DIR/haproxy.pid" ] && kill -TERM "$(cat "$SESSION_DIR/haproxy.pid")" 2> /dev/null
        [ -s "$SESSION_DIR/redis.pid" ] && kill -TERM "$(cat "$SESSION_DIR/redis.pid")" 2> /dev/null
        for n in a b c; do stop_node "$n"; done
        if [ "$TEST_AS" = root ]; then
                for n in a b c; do ip netns del "$(netns_of "$n")" 2> /dev/null; done
        fi
        chmod -R u+rwX "$SESSION_DIR" 2> /dev/null
        rm -rf "$SESSION_DIR"
        return $st
}
trap stop_all EXIT

# NODE's address and ports, chosen once: ADDR, PORT (HTTP), APORT (agent-check)
node_net() {
        local n=$1 i
        i=$(node_index "$n")
        if [ "$TEST_AS" = root ]; then
                echo "10.231.$NET.$((4 * i + 2)) 49982 49981"
        else
                echo "127.0.0.1 $(free_port) $(free_port)"
        fi
}

# A network namespace for NODE, joined to the host by a veth pair (root only)
make_netns() {
        local n=$1 ns i host
        ns=$(netns_of "$n") i=$(node_index "$n") host="nsbcl$$$n"
        host=${host:0:15}
        ip netns add "$ns" && ip -n "$ns" link set lo up &&
                ip link add "$host" type veth peer name eth0 netns "$ns" &&
                ip addr add "10.231.$NET.$((4 * i + 1))/30" dev "$host" && ip link set "$host" up &&
                ip -n "$ns" addr add "10.231.$NET.$((4 * i + 2))/30" dev eth0 && ip -n "$ns" link set eth0 up
}

# Where NODE reaches Redis: the host's end of its veth (root), or the loopback
redis_addr() { if [ "$TEST_AS" = root ]; then echo "10.231.$NET.$((4 * $(node_index "$1") + 1))"; else echo 127.0.0.1; fi; }

# Redis for the catalog, on REDIS_PORT, reachable from every node; nothing kept on disk
start_redis() {
        local binds="127.0.0.1" n
        [ "$TEST_AS" = root ] && for n in a b c; do binds="$binds $(redis_addr "$n")"; done
        # shellcheck disable=SC2086
        "$REDIS" --port "$REDIS_PORT" --bind $binds --protected-mode no --save '' --appendonly no --dir "$SESSION_DIR" \
                >> "$SESSION_DIR/redis.log" 2>&1 < /dev/null 3>&- &
        echo $! > "$SESSION_DIR/redis.pid"
        for _ in $(seq 100); do (exec 4<> "/dev/tcp/127.0.0.1/$REDIS_PORT") 2> /dev/null && return 0; sleep 0.05; done
        setup_failed "redis-server did not answer: $(tail -n 3 "$SESSION_DIR/redis.log")"
}

# start NODE with MAX sandboxes; waits until its socket and its HTTP port answer
start_node() {
        local n=$1 max=$2 dir="$SESSION_DIR/$1" addr port aport pid
        mkdir -p "$dir" && chmod 0711 "$dir"
        [ -s "$dir/net" ] || node_net "$n" > "$dir/net"
        read -r addr port aport < "$dir/net"
        printf '{"max_sandboxes": %s, "http": {"listen": "%s:%s", "keys": "%s/keys.json", "internet": false, "domain": "sandbox.test"},
 "cluster": {"node": "%s", "agent_check": "%s:%s", "redis": "%s:%s", "catalog_ttl": %s}}\n' "$max" "$addr" "$port" "$SESSION_DIR" "$n" \
                "$addr" "$aport" "$(redis_addr "$n")" "$REDIS_PORT" "$TTL" > "$dir/config.json"
        local run=()
        [ "$TEST_AS" = root ] && run=(nsenter "--net=/run/netns/$(netns_of "$n")")
        NSBOX_STORE="$dir/store" "${run[@]}" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" >> "$dir/log" 2>&1 < /dev/null 3>&- &
        pid=$!
        echo "$pid" > "$dir/pid"
        for _ in $(seq 300); do
                pid_alive "$pid" || { setup_failed "node $n exited at start: $(tail -n 5 "$dir/log")"; return 1; }
                if [ "$(NSBOX_SOCKET="$dir/d.sock" daemon_pid)" = "$pid" ] && (exec 4<> "/dev/tcp/$addr/$port") 2> /dev/null; then
                        return 0
                fi
                sleep 0.1
        done
        setup_failed "node $n: no answer within 30 s: $(tail -n 5 "$dir/log")"
}

# the router's weight for each node of the placing backend, from HAProxy's stats CSV: "a=W b=W c=W"
weights() {
        curl -s "http://127.0.0.1:$STATS_PORT/;csv" | awk -F, '$1 == "place" && $2 != "BACKEND" { printf "%s=%s ", $2, ($18 ~ /^UP/ ? $19 : 0) }'
}

# until the router's weights satisfy the shell test given (on $W), or 20 s pass
wait_weights() { # DESCRIPTION TEST...
        local what=$1; shift
        for _ in $(seq 200); do
                W=$(weights)
                eval "$*" && return 0
                sleep 0.1
        done
        fail "router weights never became $what: $W"
}
wt() { printf '%s' "$W" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
server_status() { curl -s "http://127.0.0.1:$STATS_PORT/;csv" | awk -F, -v b="$1" -v s="$2" '$1 == b && $2 == s { print $18 }'; }

setup() {
        [ -x "$HAPROXY" ] || { setup_failed "haproxy is missing (./quickstart.sh --deps installs Debian's)"; return 1; }
        [ -x "$REDIS" ] || { setup_failed "redis-server is missing (./quickstart.sh --deps installs Debian's)"; return 1; }
        command -v node > /dev/null || { setup_failed "node is missing (./quickstart.sh --deps)"; return 1; }
        local dir n
        dir=$(npm_cache_dir e2b node_modules/.package-lock.json "$NSBOX_SRC/tests/e2b" 2> "$SESSION_DIR/npm.err") ||
                { setup_failed "npm ci of tests/e2b failed: $(tail -n 5 "$SESSION_DIR/npm.err")"; return 1; }
        mkdir -p "$SESSION_DIR/e2b" && cp "$NSBOX_SRC"/tests/e2b/*.mjs "$SESSION_DIR/e2b/" && ln -s "$dir/node_modules" "$SESSION_DIR/e2b/node_modules" ||
                { setup_failed "cannot lay out $SESSION_DIR/e2b"; return 1; }
        if [ "$TEST_AS" = root ]; then
                for n in a b c; do make_netns "$n" || { setup_failed "cannot make network namespace for node $n"; return 1; }; done
        fi
        REDIS_PORT=$(free_port)
        echo "$REDIS_PORT" > "$SESSION_DIR/redis.port"
        start_redis && start_node a 100 && start_node b 20 && start_node c 1 || return 1
        # the key is made on a after all three started: b and c read the shared file again
        KEY=$(NSBOX_SOCKET="$SESSION_DIR/a/d.sock" "$NSBOX" api-key create 2> /dev/null | grep -xE 'e2b_[0-9a-f]{40}') ||
                { setup_failed "api-key create on node a gave no key"; return 1; }
        # c is full before the router starts: one sandbox of its one slot
        NSBOX_SOCKET="$SESSION_DIR/c/d.sock" "$NSBOX" create > "$SESSION_DIR/c.first" 2> "$SESSION_DIR/c.err" ||
                { setup_failed "create on node c: $(cat "$SESSION_DIR/c.err")"; return 1; }
        PORT=$(free_port) STATS_PORT=$(free_port)
        local specs=() addr port aport
        for n in a b c; do
                read -r addr port aport < "$SESSION_DIR/$n/net"
                specs+=("$n=$addr:$port/$aport")
        done
        "$NSBOX_SRC/contrib/haproxy/nsbox-haproxy-config" --listen "127.0.0.1:$PORT" --stats "127.0.0.1:$STATS_PORT" "${specs[@]}" \
                > "$SESSION_DIR/haproxy.cfg" 2> "$SESSION_DIR/haproxy.err" &&
                "$HAPROXY" -c -q -f "$SESSION_DIR/haproxy.cfg" >> "$SESSION_DIR/haproxy.err" 2>&1 ||
                { setup_failed "haproxy configuration: $(tail -n 5 "$SESSION_DIR/haproxy.err")"; return 1; }
        "$HAPROXY" -db -f "$SESSION_DIR/haproxy.cfg" >> "$SESSION_DIR/haproxy.log" 2>&1 < /dev/null 3>&- &
        echo $! > "$SESSION_DIR/haproxy.pid"
        printf '%s %s %s\n' "$KEY" "$PORT" "$STATS_PORT" > "$SESSION_DIR/router"
        touch "$SESSION_DIR/setup.ok"
}
setup

ready() {
        [ -e "$SESSION_DIR/setup.ok" ] || fail "$(cat "$SESSION_DIR/setup.err")"
        read -r KEY PORT STATS_PORT < "$SESSION_DIR/router"
        REDIS_PORT=$(cat "$SESSION_DIR/redis.port")
        URL=http://127.0.0.1:$PORT
}

# the ids GET /v2/sandboxes?metadata=cluster=RUN lists through the router (one node answers)
listed_ids() { # METADATA-FILTER
        api GET "/v2/sandboxes?metadata=$1"
        [ "$CODE" = 200 ] || fail "list through the router: $CODE $BODY"
        printf '%s' "$BODY" | python3 -c 'import json, sys; print("\n".join(sorted(s["sandboxID"] for s in json.load(sys.stdin))))'
}

# api METHOD PATH [curl args...] through the router: CODE, BODY, SECS (the time it took)
api() {
        local method=$1 path=$2 t0; shift 2
        t0=$(date +%s%N)
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -X "$method" -H "X-API-KEY: $KEY" "$@" "$URL$path") || CODE=000
        SECS=$(( ($(date +%s%N) - t0) / 1000000000 ))
        BODY=$(cat "$TEST_TMP/body" 2> /dev/null)
}
create_via_router() { # echoes the new sandbox's id
        api POST /v2/sandboxes -H 'Content-Type: application/json' --data-binary '{"templateID": "base", "timeout": 300}'
        [ "$CODE" = 201 ] || fail "create through the router: $CODE $BODY"
        printf '%s' "$BODY" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])'
}
node_ids() { NSBOX_SOCKET="$SESSION_DIR/$1/d.sock" "$NSBOX" ls -q 2> /dev/null | sort; }

test_a_router_weighs_nodes_by_free_capacity() {
        ready
        # a: 100 free of 100, b: 20 of 20, c: full (drain)
        wait_weights "a > b > 0 = c" '[ -n "$(wt a)" ] && [ "$(wt c)" = 0 ] && [ "$(wt b)" -gt 0 ] && [ "$(wt a)" -gt "$(wt b)" ]'
}

test_b_sdk_creates_spread_and_calls_reach_their_node() {
        ready
        local out="$TEST_TMP/cluster.out" st line n
        (cd "$SESSION_DIR/e2b" && E2B_API_URL=$URL E2B_SANDBOX_URL=$URL E2B_API_KEY=$KEY CLUSTER_CREATES=60 CLUSTER_NODES="a b c" \
                CLUSTER_IDS="$SESSION_DIR/ids" NO_UPDATE_NOTIFIER=1 timeout -k 10 600 node cluster.mjs) > "$out" 2> "$TEST_TMP/cluster.err" 3>&-
        st=$?
        while IFS= read -r line; do
                case $line in
                "ok "*) record_result PASS "$TEST_TIER/$TEST_FILE:cluster.${line#ok } [$TEST_AS]" >&3 ;;
                "not ok "*) record_result FAIL "$TEST_TIER/$TEST_FILE:cluster.$(printf '%s' "${line#not ok }" | cut -d: -f1) [$TEST_AS]" "${line#not ok }" >&3 ;;
                esac
        done < "$out"
        [ $st = 0 ] || fail "node cluster.mjs: status $st: $(tail -n 3 "$out") $(tail -n 3 "$TEST_TMP/cluster.err")"
        # every check of cluster.mjs said ok: none went missing from its output
        assert_eq "$(grep -c '^await check(' "$SESSION_DIR/e2b/cluster.mjs")" "$(grep -c '^ok ' "$out")" \
                "checks of cluster.mjs that said ok: $(cat -A "$out" | head -c 2000)"
        local na nb nc
        na=$(grep -c -- '-a$' "$SESSION_DIR/ids") nb=$(grep -c -- '-b$' "$SESSION_DIR/ids") nc=$(grep -c -- '-c$' "$SESSION_DIR/ids")
        [ "$nc" = 0 ] || fail "the full node c got $nc creates"
        [ "$nb" -gt 0 ] && [ "$na" -gt "$nb" ] || fail "placement by free capacity: a $na, b $nb (a has 5 times b's room)"
        # each node holds exactly the sandboxes whose ids name it
        for n in a b; do
                assert_eq "$(grep -- "-$n\$" "$SESSION_DIR/ids" | sort)" "$(node_ids "$n")" "node $n's own list"
        done
        echo "placement: a $na, b $nb, c $nc" >&2
}

test_c_bad_ids_and_keys() {
        ready
        api GET /sandboxes/ffffffffffffffffffffffffffffffff-zz
        assert_eq 404 "$CODE" "an id naming no node: $BODY"
        case $BODY in *'"code":404'*'no node of this cluster'*) ;; *) fail "its JSON: $BODY" ;; esac
        api GET /sandboxes/nosuch
        assert_eq 404 "$CODE" "a malformed id: $BODY"
        case $BODY in *'"code":404'*'no node of this cluster'*) ;; *) fail "a malformed id's JSON: $BODY" ;; esac
        api GET /files?path=/etc/hostname -H "E2b-Sandbox-Id: ffffffffffffffffffffffffffffffff-zz" -H "E2b-Sandbox-Port: 49983"
        assert_eq 502 "$CODE" "a data-plane request naming no node: $BODY"
        api GET /sandboxes/ffffffffffffffffffffffffffffffff-b
        assert_eq 404 "$CODE" "an id of node b that b does not hold: $BODY"
        case $BODY in *"not found"*) ;; *) fail "its JSON: $BODY" ;; esac
        # a snapshot nsboxd named on a node that is not in the cluster: refused, naming the node
        api POST /v2/sandboxes -H 'Content-Type: application/json' --data-binary '{"templateID": "snapshot-0123456789abcdef-zz"}'
        assert_eq 404 "$CODE" "a create from another cluster's snapshot: $BODY"
        assert_contains "$BODY" "was taken on node 'zz', not on this node" "its message"
        KEY=e2b_0000000000000000000000000000000000000000 api GET /v2/sandboxes
        assert_eq 401 "$CODE" "a key of no node: $BODY"
        case $BODY in *'"code"'*401*'Invalid API key'*) ;; *) fail "a key of no node's JSON: $BODY" ;; esac
        # nsboxd itself says when a request reaches the wrong node
        local addr port aport
        read -r addr port aport < "$SESSION_DIR/a/net"
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" "http://$addr:$port/sandboxes/ffffffffffffffffffffffffffffffff-b")
        assert_eq 404 "$CODE" "node a asked for a sandbox of b"
        case $(cat "$TEST_TMP/body") in *"names node 'b', and this is node 'a'"*) ;; *) fail "node a's answer: $(cat "$TEST_TMP/body")" ;; esac
}

# get_or_create across nodes: eight at once on a and b for one thread id give one sandbox; the
# callers of its node get it, the others a conflict that names it
test_cc_get_or_create_across_nodes_gives_one_sandbox() {
        ready
        local i n pids="" made out
        for i in 1 2 3 4 5 6 7 8; do
                n=$([ $((i % 2)) = 0 ] && echo a || echo b)
                (NSBOX_SOCKET="$SESSION_DIR/$n/d.sock" "$NSBOX" create --reuse --label "thread=t$$" > "$TEST_TMP/goc.$i" 2>&1
                        echo "status $?" >> "$TEST_TMP/goc.$i") &
                pids="$pids $!"
        done
        # shellcheck disable=SC2086
        wait $pids
        made=$(for n in a b c; do NSBOX_SOCKET="$SESSION_DIR/$n/d.sock" "$NSBOX" ls --label "thread=t$$" -q 2> /dev/null; done)
        assert_eq 1 "$(printf '%s\n' "$made" | grep -c .)" "sandboxes for one thread id on three nodes: $made"
        for i in 1 2 3 4 5 6 7 8; do
                out=$(cat "$TEST_TMP/goc.$i")
                case $out in
                "$made"*"status 0") ;;
                *"conflict"*"$made"*"status 125") ;;
                *) fail "get_or_create $i: $out" ;;
                esac
        done
        for n in a b c; do NSBOX_SOCKET="$SESSION_DIR/$n/d.sock" "$NSBOX" rm --all --label "thread=t$$" > /dev/null 2>&1; done
}

test_d_kill_9_of_a_node() {
        ready
        local bid pid n id on_b="" t0 gone_ms
        bid=$(node_ids b | head -n 1)
        [ -n "$bid" ] || fail "node b holds no sandbox (test_b did not run?)"
        pid=$(cat "$SESSION_DIR/b/pid")
        t0=$(date +%s%N)
        kill -KILL "$pid"
        wait "$pid" 2> /dev/null # not the shell's "Killed" line
        wait_pids_gone 10 "$pid" > /dev/null || fail "node b's nsboxd did not die"
        # its sandboxes: not found, promptly (once the router's checks see it down, at once)
        api GET "/sandboxes/$bid"
        [ "$CODE" = 404 ] || [ "$CODE" = 502 ] || [ "$CODE" = 503 ] || fail "a sandbox of the killed node: $CODE $BODY"
        [ "$SECS" -le 5 ] || fail "a sandbox of the killed node took $SECS s to answer"
        wait_weights "b down" '[ "$(server_status node_b b)" = DOWN ]'
        api GET "/sandboxes/$bid"
        assert_eq 404 "$CODE" "a sandbox of the node that is down: $BODY"
        # its records leave the catalog's lists within the TTL of the kill (a list's time aside)
        local left=1
        for _ in $(seq $((TTL * 20 + 40))); do
                listed_ids "" > "$TEST_TMP/listed"
                grep -q -- '-b$' "$TEST_TMP/listed" || { left=0; break; }
                sleep 0.1
        done
        gone_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
        assert_eq 0 "$left" "the killed node's sandboxes still listed $gone_ms ms after: $(grep -c -- '-b$' "$TEST_TMP/listed")"
        [ "$gone_ms" -le $(( (TTL + 4) * 1000 )) ] || fail "the killed node's sandboxes left the lists $gone_ms ms after the kill; the TTL is $TTL s"
        echo "the killed node's sandboxes left the lists after $gone_ms ms (TTL $TTL s)" >&2
        grep -q -- '-a$' "$TEST_TMP/listed" || fail "the live node's sandboxes are no longer listed"
        for n in 1 2 3 4 5 6; do
                id=$(create_via_router) || exit 1
                case $id in *-a) ;; *) fail "create $n went to ${id##*-}, not to a: b is down and c is full" ;; esac
        done
        # b again (its killed sandboxes cleaned up at start): weighed, and takes creates
        start_node b 20 || fail "$(cat "$SESSION_DIR/setup.err")"
        wait_weights "b up again" '[ "$(wt b)" -gt 0 ] 2> /dev/null'
        for n in $(seq 40); do
                id=$(create_via_router) || exit 1
                case $id in *-b) on_b=$id; break ;; esac
        done
        [ -n "$on_b" ] || fail "the restarted node b took none of 40 creates"
        api GET "/sandboxes/$on_b"
        assert_eq 200 "$CODE" "a sandbox on the restarted node: $BODY"
}

# Redis stopped: each node serves its own sandboxes (calls work, a node lists its own), stats say
# the catalog is down; Redis started again (empty): the nodes write their records again
test_e_redis_stopped_then_restarted() {
        ready
        local aid addr port aport all
        aid=$(node_ids a | head -n 1)
        [ -n "$aid" ] || fail "node a holds no sandbox"
        all=$(listed_ids "")
        kill -TERM "$(cat "$SESSION_DIR/redis.pid")"
        for _ in $(seq 100); do
                NSBOX_SOCKET="$SESSION_DIR/a/d.sock" "$NSBOX" stats | grep -q "cluster catalog .*: down" && break
                sleep 0.1
        done
        assert_contains "$(NSBOX_SOCKET="$SESSION_DIR/a/d.sock" "$NSBOX" stats)" ": down" "node a's stats with Redis stopped"
        api GET "/sandboxes/$aid"
        assert_eq 200 "$CODE" "a sandbox of node a through the router with Redis stopped: $BODY"
        read -r addr port aport < "$SESSION_DIR/a/net"
        CODE=$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' -H "X-API-KEY: $KEY" "http://$addr:$port/v2/sandboxes")
        assert_eq 200 "$CODE" "node a's list with Redis stopped"
        assert_eq "$(node_ids a)" "$(python3 -c 'import json, sys; print("\n".join(sorted(s["sandboxID"] for s in json.load(open(sys.argv[1])))))' "$TEST_TMP/body")" \
                "node a's list with Redis stopped: its own sandboxes"
        start_redis || fail "$(cat "$SESSION_DIR/setup.err")"
        for _ in $(seq $((TTL * 20 + 60))); do
                [ "$(listed_ids "")" = "$all" ] && break
                sleep 0.1
        done
        assert_eq "$all" "$(listed_ids "")" "the list through the router once Redis is back"
}

# TLS at the router (--tls): a second HAProxy of the same nodes, HTTPS with a certificate of the
# test's, HTTP/2 by ALPN; a create and a call on the new sandbox's envd through it, by its
# E2b-Sandbox-Id and by its PORT-ID.DOMAIN host (--domain) alone
test_f_tls_at_the_router() {
        ready
        local spec=() n addr port aport tport pid out sid
        openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" \
                -keyout "$TEST_TMP/key.pem" -out "$TEST_TMP/cert.pem" > /dev/null 2>&1 || fail "openssl could not make a certificate"
        cat "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem" > "$TEST_TMP/router.pem"
        for n in a b c; do
                read -r addr port aport < "$SESSION_DIR/$n/net"
                spec+=("$n=$addr:$port/$aport")
        done
        tport=$(free_port)
        "$NSBOX_SRC/contrib/haproxy/nsbox-haproxy-config" --listen "127.0.0.1:$tport" --tls "$TEST_TMP/router.pem" --domain sandbox.test "${spec[@]}" \
                > "$TEST_TMP/tls.cfg" ||
                fail "nsbox-haproxy-config --tls"
        "$HAPROXY" -db -f "$TEST_TMP/tls.cfg" > "$TEST_TMP/tls.log" 2>&1 < /dev/null 3>&- &
        pid=$!
        for _ in $(seq 100); do (exec 4<> "/dev/tcp/127.0.0.1/$tport") 2> /dev/null && break; sleep 0.05; done
        sleep 2.5 # the placing servers up (their checks) before a create
        out=$(curl -s --http2 --cacert "$TEST_TMP/cert.pem" -w '\n%{http_code} %{http_version}' -H "X-API-KEY: $KEY" -H 'Content-Type: application/json' \
                --data-binary '{"templateID": "base", "timeout": 120}' "https://127.0.0.1:$tport/v2/sandboxes")
        assert_eq "201 2" "$(printf '%s' "$out" | tail -n 1)" "a create through TLS, HTTP/2: $out $(tail -n 3 "$TEST_TMP/tls.log")"
        sid=$(printf '%s' "$out" | head -n 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])')
        out=$(curl -s --cacert "$TEST_TMP/cert.pem" -w ' %{http_code}' -H "X-API-KEY: $KEY" -H "E2b-Sandbox-Id: $sid" -H "E2b-Sandbox-Port: 49983" \
                "https://127.0.0.1:$tport/health")
        assert_contains "$out" " 20" "the new sandbox's envd through TLS"
        # the same by its host name alone (--domain; the nodes' http.domain): PORT-ID.DOMAIN
        out=$(curl -s --http1.1 --cacert "$TEST_TMP/cert.pem" -w ' %{http_code}' -H "X-API-KEY: $KEY" -H "Host: 49983-$sid.sandbox.test" \
                "https://127.0.0.1:$tport/health")
        assert_contains "$out" " 20" "the new sandbox's envd by its host name through the router"
        out=$(curl -s --http1.1 --cacert "$TEST_TMP/cert.pem" -w ' %{http_code}' -H "X-API-KEY: $KEY" \
                -H "Host: 49983-ffffffffffffffffffffffffffffffff-zz.sandbox.test" "https://127.0.0.1:$tport/health")
        case $out in *'"code":502'*'no node of this cluster'*' 502') ;; *) fail "a host name naming no node: $out" ;; esac
        assert_status 60 curl -s "https://127.0.0.1:$tport/v2/sandboxes"
        kill -TERM "$pid"
        wait "$pid" 2> /dev/null || true
}

# Last: every node's sandboxes removed; no node runs a process; the host's mounts as before
test_zz_nothing_is_left() {
        ready
        local n pid
        for n in a b c; do
                pid=$(cat "$SESSION_DIR/$n/pid")
                # a node that does not answer is not asked: nsbox would start a daemon on its socket
                [ "$(NSBOX_SOCKET="$SESSION_DIR/$n/d.sock" daemon_pid)" = "$pid" ] || fail "node $n's nsboxd (pid $pid) does not answer"
                NSBOX_SOCKET="$SESSION_DIR/$n/d.sock" "$NSBOX" rm --all > /dev/null 2>&1
                assert_eq "" "$(node_ids "$n")" "node $n's sandboxes after rm --all"
                for _ in $(seq 50); do
                        [ -z "$(ps --ppid "$pid" -o pid=)" ] && break
                        sleep 0.1
                done
                assert_eq "" "$(ps --ppid "$pid" -o pid=,args=)" "processes under node $n"
        done
        for n in a b c; do stop_node "$n"; done
        assert_eq "$(cat "$SESSION_DIR/mounts-before")" "$(mounts)" "host mount count"
}

run_tests
