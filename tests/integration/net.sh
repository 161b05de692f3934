#!/usr/bin/env bash
# The sandbox's network as a user sees it: --net none (loopback only), --net nat (slirp4netns),
# egress allow-lists (--allow, network.egress), published ports (--publish), what the sandbox
# cannot do to its network, bad input, and that nothing (slirp4netns processes, sockets, ports)
# is left after rm, after the command ends, or after kill -9 of the supervisor.
# Every server is one this file starts on the host's loopback; no other address is contacted.
# Runs as root and as an unprivileged user (tests/run does both).
# shellcheck disable=SC2016
. "$(dirname "$0")/../lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

SESSION_DIR=$(mktemp -d /tmp/nsbox-nettest.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
export NSBOX_STORE="$SESSION_DIR/store"
grep -c . /proc/self/mountinfo > "$SESSION_DIR/mounts-before"

# A policy like the default one with network keys changed: netpolicy FILE python-dict-literal
netpolicy() {
        python3 - "$NSBOX_SRC/policy/default.json" "$1" "$2" <<'PY'
import ast, json, sys
p = json.load(open(sys.argv[1]))
p["network"].update(ast.literal_eval(sys.argv[3]))
json.dump(p, open(sys.argv[2], "w"))
PY
}

# A TCP server on the host's 127.0.0.1: prints its port, appends what each connection sent (one
# line per connection) to FILE, answers "pong".  Killed when the test ends.
# What a test started goes when it ends: each test runs in a subshell of its own, which does not
# run its parent's EXIT trap, so the trap is set in the test's subshell, by what starts things.
MY_PIDS=""
MY_SANDBOXES=""
cleanup_test() {
        # shellcheck disable=SC2086
        [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES > /dev/null 2>&1
        # shellcheck disable=SC2086
        [ -z "$MY_PIDS" ] || kill $MY_PIDS 2> /dev/null
}
start_server() { # VAR FILE
        trap cleanup_test EXIT
        local _port
        python3 -u - "$2" > "$2.port" 2> "$2.err" <<'PY' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(5)
    try:
        data = c.recv(1024)
        with open(sys.argv[1], "ab") as f:
            f.write(data.strip() + b"\n")
        c.sendall(b"pong\n")
    except OSError:
        pass
    c.close()
PY
        local _pid=$!
        MY_PIDS="$MY_PIDS $_pid"
        # 30 s: a loaded machine; a server that died is said at once, with its last words
        for _ in $(seq 300); do [ -s "$2.port" ] || ! kill -0 "$_pid" 2> /dev/null && break; sleep 0.1; done
        _port=$(cat "$2.port")
        [ -n "$_port" ] || fail "the test server did not start ($(kill -0 "$_pid" 2> /dev/null && echo "no port after 30 s" || echo "it exited"): $(tail -n 1 "$2.err" 2> /dev/null))"
        : > "$2"
        printf -v "$1" %s "$_port"
}

# In the sandbox: connect to HOST PORT, send TOKEN, print "ok <reply>" or "error <errno name>
# <seconds>" (a refused connection must fail fast, not hang).
CONNECT='import errno, socket, sys, time
t = time.monotonic()
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
    c.sendall(sys.argv[3].encode() + b"\n")
    print("ok", c.recv(64).decode().strip())
except OSError as e:
    print("error", errno.errorcode.get(e.errno, str(e)), round(time.monotonic() - t, 1))'

# In the sandbox: its network interfaces on one line, sorted.
IFACES='tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | sort | tr "\n" " "'

# A free port on the host's loopback.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# slirp4netns processes of ours (the uid running this file), zombies not counted: after kill -9
# of their supervisor, the init they were reparented to reaps them when it gets to it.
my_slirps() { ps -u "$(id -u)" -o pid=,stat=,comm= | awk '$3 == "slirp4netns" && $2 !~ /^Z/ { printf "%s ", $1 }'; }
# None left within 2 s: told to exit, slirp4netns takes the kernel some 20 ms to go.
assert_no_slirps() { # what
        local i
        for i in $(seq 20); do [ -z "$(my_slirps)" ] && return 0; sleep 0.1; done
        fail "$1: slirp4netns processes still there 2 s later: $(my_slirps)"
}

# (as a server would bind it: a port whose last connection is in TIME_WAIT is free)
port_is_free() {
        python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}

# ---- mode none --------------------------------------------------------------------------------

test_none_has_only_loopback() {
        local port
        start_server port "$TEST_TMP/seen"
        assert_status 0 "$NSBOX" run -- sh -c "$IFACES; echo; cat /etc/resolv.conf"
        assert_eq "lo " "$(printf '%s\n' "$OUT" | head -n 1)" "interfaces"
        assert_not_contains "$OUT" "nameserver" "resolv.conf"
        assert_status 0 "$NSBOX" run -- python3 -c "$CONNECT" 127.0.0.1 "$port" none-lo
        assert_contains "$OUT" "error ECONNREFUSED" "connect to 127.0.0.1:$port inside (its own loopback)"
        assert_status 0 "$NSBOX" run -- python3 -c "$CONNECT" 10.0.2.2 "$port" none-gw
        assert_contains "$OUT" "error ENETUNREACH" "connect to 10.0.2.2 with --net none"
        assert_status 0 "$NSBOX" run -- python3 -c 'import socket
try:
    socket.getaddrinfo("example.com", 80)
    print("resolved")
except OSError as e:
    print("no dns", e)'
        assert_contains "$OUT" "no dns" "name lookup with --net none"
        assert_eq "" "$(cat "$TEST_TMP/seen")" "what the host's server received"
}

# ---- mode nat --------------------------------------------------------------------------------

test_nat_reaches_host_loopback_when_allowed() {
        local port
        start_server port "$TEST_TMP/seen"
        netpolicy "$TEST_TMP/p.json" '{"mode": "nat", "host_loopback": True}'
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/p.json" -- sh -c "$IFACES"'; echo; grep nameserver /etc/resolv.conf; python3 -c "$1" 10.0.2.2 "$2" hello-from-nat' sh "$CONNECT" "$port"
        assert_contains "$OUT" "lo tap0" "interfaces with --net nat"
        assert_contains "$OUT" "nameserver 10.0.2.3" "resolv.conf with --net nat"
        assert_contains "$OUT" "ok pong" "connect to the host's loopback through 10.0.2.2"
        assert_eq "hello-from-nat" "$(cat "$TEST_TMP/seen")" "what the host's server received"
        assert_no_slirps "slirp4netns processes left after nsbox run"
}

test_nat_has_no_host_loopback_by_default() {
        local port
        start_server port "$TEST_TMP/seen"
        assert_status 0 "$NSBOX" run --net nat -- python3 -c "$CONNECT" 10.0.2.2 "$port" should-not-arrive
        assert_contains "$OUT" "error " "connect to 10.0.2.2 without network.host_loopback"
        assert_eq "" "$(cat "$TEST_TMP/seen")" "what the host's server received"
}

test_egress_allow_list_refuses_the_rest_at_once() {
        local a b
        start_server a "$TEST_TMP/a"
        start_server b "$TEST_TMP/b"
        netpolicy "$TEST_TMP/p.json" '{"mode": "nat", "host_loopback": True}'
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/p.json" --allow "10.0.2.2:$a" -- sh -c 'python3 -c "$1" 10.0.2.2 "$2" to-a; python3 -c "$1" 10.0.2.2 "$3" to-b; python3 -c "$1" 10.0.2.3 53 to-dns' sh "$CONNECT" "$a" "$b"
        local first second third
        first=$(printf '%s\n' "$OUT" | sed -n 1p)
        second=$(printf '%s\n' "$OUT" | sed -n 2p)
        third=$(printf '%s\n' "$OUT" | sed -n 3p)
        assert_eq "ok pong" "$first" "connect to the allowed server"
        assert_contains "$second" "error ECONNREFUSED" "connect to the server not on the list"
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 2 else 1)' "${second##* }" ||
                fail "the refused connection took ${second##* } s, not at once"
        assert_not_contains "$third" "ECONNREFUSED" "the sandbox's resolver (allowed with network.dns)"
        assert_eq "to-a" "$(cat "$TEST_TMP/a")" "what the allowed server received"
        assert_eq "" "$(cat "$TEST_TMP/b")" "what the other server received"
        # a CIDR and a port range from the policy file work the same way
        netpolicy "$TEST_TMP/q.json" "{'mode': 'nat', 'host_loopback': True, 'egress': ['10.0.2.0/30:$b-$b']}"
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/q.json" -- sh -c 'python3 -c "$1" 10.0.2.2 "$2" to-a; python3 -c "$1" 10.0.2.2 "$3" to-b' sh "$CONNECT" "$a" "$b"
        assert_eq "error ECONNREFUSED" "$(printf '%s\n' "$OUT" | sed -n 1p | cut -d' ' -f1-2)" "server a with egress 10.0.2.0/30:$b"
        assert_eq "ok pong" "$(printf '%s\n' "$OUT" | sed -n 2p)" "server b with egress 10.0.2.0/30:$b"
}

test_empty_allow_list_lets_nothing_out() {
        local port
        start_server port "$TEST_TMP/seen"
        netpolicy "$TEST_TMP/p.json" '{"mode": "nat", "host_loopback": True, "egress": [], "dns": False}'
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/p.json" -- sh -c 'python3 -c "$1" 10.0.2.2 "$2" x; python3 -c "$1" 127.0.0.1 9 y; grep -c nameserver /etc/resolv.conf || true' sh "$CONNECT" "$port"
        assert_contains "$(printf '%s\n' "$OUT" | sed -n 1p)" "error ECONNREFUSED" "connect with an empty egress list"
        assert_contains "$(printf '%s\n' "$OUT" | sed -n 2p)" "error ECONNREFUSED" "the sandbox's own loopback (nothing listens)"
        assert_eq "0" "$(printf '%s\n' "$OUT" | sed -n 3p)" "name servers with network.dns false"
        assert_eq "" "$(cat "$TEST_TMP/seen")" "what the host's server received"
}

test_sandbox_cannot_change_its_network() {
        local port
        start_server port "$TEST_TMP/seen"
        netpolicy "$TEST_TMP/p.json" '{"mode": "nat", "host_loopback": True}'
        assert_status 0 "$NSBOX" run --policy "$TEST_TMP/p.json" --allow "10.0.2.2:$port" -- sh -c '
                ip link set tap0 down 2>&1 | head -n 1
                ip route del default 2>&1 | head -n 1
                python3 -c "
import socket
for fam, typ, proto, what in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP, \"raw\"),
                              (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_TCP, \"raw6\"),
                              (socket.AF_PACKET, socket.SOCK_RAW, 0, \"packet\"),
                              (socket.AF_NETLINK, socket.SOCK_RAW, 12, \"netfilter\")):
    try:
        socket.socket(fam, typ, proto)
        print(what, \"opened\")
    except OSError as e:
        print(what, \"refused\", e.errno)
"
                python3 -c "$1" 10.0.2.2 "$2" still-works' sh "$CONNECT" "$port"
        assert_contains "$OUT" "Operation not permitted" "ip link set tap0 down / ip route del"
        assert_not_contains "$OUT" "opened" "raw, packet and netfilter sockets"
        assert_contains "$OUT" "raw refused" "a raw socket"
        assert_contains "$OUT" "netfilter refused" "a NETLINK_NETFILTER socket"
        assert_contains "$OUT" "ok pong" "the network after the attempts"
        assert_eq "still-works" "$(cat "$TEST_TMP/seen")" "what the host's server received"
}

# ---- published ports -------------------------------------------------------------------------

# GET / on the host's 127.0.0.1:PORT, retried for a few seconds while the server starts.
http_get() {
        python3 - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:%s/hello.txt" % sys.argv[1], timeout=5).read().decode().strip())
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
print("no answer")
sys.exit(1)
PY
}

test_publish_serves_http_and_frees_the_port() {
        local hp sid
        hp=$(free_port)
        sid=$("$NSBOX" create --net nat --publish "$hp:8000" 2>&1) || fail "nsbox create --net nat --publish $hp:8000: $sid"
        MY_SANDBOXES="$MY_SANDBOXES $sid"
        trap cleanup_test EXIT
        assert_status 0 "$NSBOX" exec "$sid" -- sh -c 'echo served-from-inside > hello.txt; (python3 -m http.server 8000 --bind 0.0.0.0 > /dev/null 2>&1 &)'
        assert_eq "served-from-inside" "$(http_get "$hp")" "GET through the published port"
        port_is_free "$hp" && fail "host port $hp is not bound while the sandbox runs"
        assert_status 0 "$NSBOX" rm "$sid"
        for _ in $(seq 50); do port_is_free "$hp" && break; sleep 0.1; done
        port_is_free "$hp" || fail "host port $hp is still bound after nsbox rm"
        assert_no_slirps "slirp4netns processes left after nsbox rm"
        # and nsboxd reaped it: no zombie under the daemon either
        local dpid i
        dpid=$(daemon_pid) || fail "no nsboxd answers on $NSBOX_SOCKET"
        for i in $(seq 20); do [ -z "$(ps --ppid "$dpid" -o comm= | grep slirp4netns)" ] && break; sleep 0.1; done
        assert_eq "" "$(ps --ppid "$dpid" -o pid=,stat=,comm= | grep slirp4netns)" "slirp4netns children of nsboxd 2 s after nsbox rm"
        # nsbox run: the port lives as long as the command
        hp=$(free_port)
        "$NSBOX" run --net nat --publish "127.0.0.1:$hp:8001" -- sh -c 'echo run-mode > hello.txt; timeout 20 python3 -m http.server 8001 > /dev/null 2>&1' &
        local runpid=$!
        MY_PIDS="$MY_PIDS $runpid"
        trap cleanup_test EXIT
        assert_eq "run-mode" "$(http_get "$hp")" "GET through the port nsbox run published"
        kill -TERM "$runpid"
        wait "$runpid"
        for _ in $(seq 50); do port_is_free "$hp" && break; sleep 0.1; done
        port_is_free "$hp" || fail "host port $hp is still bound after nsbox run ended"
        assert_no_slirps "slirp4netns processes left after nsbox run ended"
}

# ---- nothing left behind ----------------------------------------------------------------------

test_kill9_of_supervisor_leaves_nothing() {
        # nsbox run
        "$NSBOX" run --net nat --publish "$(free_port):80" -- sleep 60 &
        local runpid=$! slirp="" i
        MY_PIDS="$MY_PIDS $runpid"
        trap cleanup_test EXIT
        for i in $(seq 100); do
                slirp=$(pgrep -P "$runpid" -x slirp4netns)
                [ -n "$slirp" ] && break
                sleep 0.1
        done
        [ -n "$slirp" ] || fail "no slirp4netns under nsbox run --net nat"
        kill -KILL "$runpid"
        local left
        left=$(wait_pids_gone 5 "$slirp") || fail "slirp4netns $left still runs 5 s after kill -9 of nsbox run"
        # nsboxd
        local sid dpid
        sid=$("$NSBOX" create --net nat 2>&1) || fail "nsbox create --net nat: $sid"
        dpid=$(daemon_pid) || fail "no nsboxd answers on $NSBOX_SOCKET"
        slirp=$(pgrep -P "$dpid" -x slirp4netns)
        [ -n "$slirp" ] || fail "no slirp4netns under nsboxd ($dpid) for sandbox $sid"
        kill -KILL "$dpid"
        left=$(wait_pids_gone 5 "$slirp") || fail "slirp4netns $left still runs 5 s after kill -9 of nsboxd"
        assert_eq "" "$(ls -d /tmp/nsbox-net-* 2>/dev/null | xargs -r stat -c '%U %n' | grep "^$(id -un) ")" "slirp4netns socket directories left"
}

# ---- bad input -------------------------------------------------------------------------------

test_bad_network_input_is_one_clear_line() {
        local before hp spec
        before=$(my_slirps)
        for spec in "--allow 10.0.0.0/33|prefix /33 is out of range" "--allow 300.1.2.3|is not an IPv4 or IPv6 address" \
                "--allow 10.0.0.1:70000|port 70000 is out of range" "--allow 10.0.0.1:90-80|is empty" \
                "--allow [fd00::1]80|expected [IPV6ADDRESS]:PORT" "--allow fd00::1/129|prefix /129 is out of range" "--publish 8080:0|port 0 is out of range" \
                "--publish 192.0.2.1:80:80|only host loopback ports" "--publish abc|expected [127.0.0.1:]HOSTPORT" \
                "--net bogus|expected 'none' or 'nat'"; do
                # shellcheck disable=SC2086
                assert_status 125 "$NSBOX" run --net nat ${spec%%|*} -- true
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "${spec#*|}" "error for ${spec%%|*}"
        done
        assert_status 125 "$NSBOX" run --allow 10.0.0.1 -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "needs network mode 'nat'" "--allow with --net none"
        assert_status 125 "$NSBOX" run --publish 8080:80 -- true
        assert_contains "$OUT" "needs network mode 'nat'" "--publish with --net none"
        # a host port in use
        start_server hp "$TEST_TMP/seen"
        assert_status 125 "$NSBOX" run --net nat --publish "$hp:80" -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "127.0.0.1:$hp" "error for a port in use"
        assert_contains "$OUT" "Address already in use" "error for a port in use"
        # the policy file: the file, the key, why
        netpolicy "$TEST_TMP/p.json" '{"mode": "nat", "egress": ["10.0.0.0/8", "1.2.3.4/40"]}'
        assert_status 125 "$NSBOX" run --policy "$TEST_TMP/p.json" -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "network.egress[1]" "policy error"
        # and the daemon says the same through create
        assert_status 125 "$NSBOX" create --net nat --allow 10.0.0.0/99
        assert_contains "$OUT" "prefix /99 is out of range" "nsbox create --allow"
        assert_eq "$before" "$(my_slirps)" "slirp4netns processes after refused starts"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "sandboxes after refused creates"
}

# ---- backend veth (root) ----------------------------------------------------------------------

# The veth backend changes the network namespace nsbox runs in (a veth per sandbox, a masquerade
# table, IPv4 forwarding), so the test runs nsbox in one of its own: "host", linked by a veth of
# the test's to "outside", where the test server runs at 192.168.77.2.
VETH_WORLD='set -u
nsbox=$1 policy=$2 port=$3 outside=$4
ip link set lo up
ip link add up0 type veth peer name down0 netns "$outside"
ip addr add 192.168.77.1/24 dev up0
ip link set up0 up
nsenter -t "$outside" -n sh -c "ip link set lo up; ip addr add 192.168.77.2/24 dev down0; ip link set down0 up"
echo "sandbox: $("$nsbox" run --policy "$policy" -- sh -c "ip -4 -br addr show eth0; ip route | head -n 1" | tr -s "\n " "  ")"
echo "connect: $("$nsbox" run --policy "$policy" -- python3 -c "$CONNECT" 192.168.77.2 "$port" through-veth)"
echo "allowed: $("$nsbox" run --policy "$policy" --allow "192.168.77.2:$port" -- python3 -c "$CONNECT" 192.168.77.2 "$port" allowed)"
echo "refused: $("$nsbox" run --policy "$policy" --allow "192.168.77.9:$port" -- python3 -c "$CONNECT" 192.168.77.2 "$port" refused)"
for i in $(seq 50); do ip -o link show | grep -q nsbv || break; sleep 0.1; done
echo "links after: $(ip -o link show | grep -c nsbv)"
echo "nat table: $(nft list table inet nsbox-host > /dev/null 2>&1 && echo yes || echo no)"
"$nsbox" run --policy "$policy" -- sleep 60 &
runpid=$!
for i in $(seq 50); do ip -o link show | grep -q nsbv && break; sleep 0.1; done
echo "link while running: $(ip -o link show | grep -c nsbv)"
kill -KILL "$runpid"
wait "$runpid" 2> /dev/null
for i in $(seq 50); do ip -o link show | grep -q nsbv || break; sleep 0.1; done
echo "links after kill -9: $(ip -o link show | grep -c nsbv)"
echo "again: $("$nsbox" run --policy "$policy" -- python3 -c "$CONNECT" 192.168.77.2 "$port" again)"'

test_veth_backend_routes_masquerades_and_leaves_nothing() {
        netpolicy "$TEST_TMP/veth.json" '{"mode": "nat", "backend": "veth"}'
        if [ "$TEST_AS" != root ]; then
                # a user cannot make veths in the host's namespace: a clear refusal
                assert_status 125 "$NSBOX" run --policy "$TEST_TMP/veth.json" -- true
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "network.backend 'veth' needs nsbox or nsboxd started as root"
                return
        fi
        unshare -n sleep 120 &
        local outside=$! port
        MY_PIDS="$MY_PIDS $outside"
        trap cleanup_test EXIT
        sleep 0.2
        # the server in "outside"; it prints where each connection came from
        nsenter -t "$outside" -n python3 -u -c 'import socket, sys
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(8); print(s.getsockname()[1], flush=True)
while True:
    c, a = s.accept()
    with open(sys.argv[1], "a") as f:
        f.write("%s %s\n" % (a[0], c.recv(64).decode().strip()))
    c.sendall(b"pong\n"); c.close()' "$TEST_TMP/veth-seen" > "$TEST_TMP/veth-port" &
        MY_PIDS="$MY_PIDS $!"
        for _ in $(seq 50); do [ -s "$TEST_TMP/veth-port" ] && break; sleep 0.1; done
        port=$(cat "$TEST_TMP/veth-port")
        [ -n "$port" ] || fail "the server in the outside namespace did not start"
        local out
        out=$(CONNECT="$CONNECT" unshare -n bash -c "$VETH_WORLD" world "$NSBOX" "$TEST_TMP/veth.json" "$port" "$outside" 2>&1)
        printf '%s\n' "$out" | grep -q '^sandbox: eth0[^ ]* UP 10\.213\.[0-9]*\.[0-9]*/30 default via 10\.213\.[0-9]*\.[0-9]* dev eth0' ||
                fail "the sandbox's eth0 and route: $out"
        assert_contains "$out" "connect: ok pong" "a connection out through the veth"
        assert_contains "$out" "allowed: ok pong" "with the server on the allow-list"
        assert_contains "$out" "refused: error ECONNREFUSED" "with another address on the allow-list"
        assert_contains "$out" "links after: 0" "veths 5 s after the runs (they go with the sandboxes' namespaces)"
        assert_contains "$out" "nat table: yes" "the masquerade table"
        assert_contains "$out" "link while running: 1" "the veth of a running sandbox"
        assert_contains "$out" "links after kill -9: 0" "veths 5 s after kill -9 of nsbox run"
        assert_contains "$out" "again: ok pong" "a sandbox after the kill"
        # the server saw the test's "host" address (masqueraded), never the pool's
        assert_eq "192.168.77.1 through-veth|192.168.77.1 allowed|192.168.77.1 again" "$(tr '\n' '|' < "$TEST_TMP/veth-seen" | sed 's/|$//')" \
                "what the outside server saw"
}

# Last: what the tests above started is gone: their servers, slirp4netns, its socket directories,
# and the daemon has no sandbox left.
# slirp4netns's own sandbox (as root) detaches its old root: nothing of that may reach the host.
# As root, a network namespace that ip netns keeps (a mount under the shared /run/netns) was
# unmounted by each nat sandbox; the host's mounts stay as they were, for run and for nsboxd.
test_nat_leaves_the_hosts_mounts_alone() {
        local ns="" before id
        if [ "$TEST_AS" = root ]; then
                ns=nsbt-nat$$
                ip netns add "$ns" || fail "ip netns add $ns"
                # expanded now: the trap runs when the test's subshell exits, where ns is gone
                trap "ip netns del '$ns' 2> /dev/null || rm -f '/run/netns/$ns'; cleanup_test" EXIT
        fi
        before=$(grep -c . /proc/self/mountinfo)
        assert_status 0 "$NSBOX" run --net nat -- true
        id=$("$NSBOX" create --net nat 2>&1) || fail "nsbox create --net nat: $id"
        MY_SANDBOXES=$id
        assert_status 0 "$NSBOX" exec "$id" -- true
        assert_status 0 "$NSBOX" rm -f "$id"
        MY_SANDBOXES=""
        assert_eq "$before" "$(grep -c . /proc/self/mountinfo)" "the host's mount count after nat sandboxes"
        if [ -n "$ns" ]; then
                assert_eq nsfs "$(findmnt -n -o FSTYPE "/run/netns/$ns")" "ip netns's mount of $ns"
                assert_status 0 nsenter "--net=/run/netns/$ns" true
        fi
}

test_zz_nothing_left() {
        local left
        left=$(pgrep -u "$(id -u)" -f "python3 -u - $TEST_TMP/" | tr '\n' ' ')
        assert_eq "" "$left" "test servers left running"
        assert_no_slirps "slirp4netns processes left by the tests"
        assert_eq "" "$(find /tmp -maxdepth 1 -name 'nsbox-net-*' -user "$(id -u)" 2>/dev/null)" "slirp4netns socket directories left"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$OUT" "sandboxes left"
        assert_eq "$(cat "$SESSION_DIR/mounts-before")" "$(grep -c . /proc/self/mountinfo)" "host mount count"
}

run_tests
st=$?
dpid=$(daemon_pid) && kill "$dpid"
rm -rf "$SESSION_DIR"
exit $st
