#!/usr/bin/env bash
# Escape tier, network, with the default policy (`--net none`): no route anywhere, no DNS, no
# reach into the host's loopback (a TCP listener on the host's 127.0.0.1 and ::1) nor into its
# abstract unix sockets, in a sandbox of `nsbox run` and one of nsboxd.  The listeners the test
# starts on the host see no connection, and are reached from the host as a control.
# AF_PACKET and the other refused families: syscalls.sh.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

# Run a shell command in a sandbox of the kind given: run (nsbox run) or daemon (nsboxd).
in_sandbox() { # run|daemon command
        local id
        if [ "$1" = run ]; then
                "$NSBOX" run -- sh -c "$2" </dev/null 2>&1
        else
                id=$("$NSBOX" create 2>&1) || { echo "nsbox create failed: $id"; return 125; }
                "$NSBOX" exec "$id" -- sh -c "$2" </dev/null 2>&1
                "$NSBOX" rm -f "$id" >/dev/null 2>&1
        fi
}

# Connect to each ADDR (host:port, [v6]:port or @abstract) from Python, 2 s each: prints
# "REACHED ADDR" or "refused ADDR: error".
# shellcheck disable=SC2016
CONNECT='import socket, sys
for a in sys.argv[1:]:
    try:
        if a.startswith("@"):
            s = socket.socket(socket.AF_UNIX)
            addr = "\0" + a[1:]
        elif a.startswith("["):
            h, p = a[1:].split("]:")
            s = socket.socket(socket.AF_INET6)
            addr = (h, int(p))
        else:
            h, p = a.rsplit(":", 1)
            s = socket.socket(socket.AF_INET)
            addr = (h, int(p))
        s.settimeout(2)
        s.connect(addr)
        print("REACHED", a, flush=True)
        try:
            s.sendall(b"hello from the sandbox\n")
        except OSError:
            pass  # the listener may have closed it already (EPIPE on a unix socket): it was reached
    except OSError as e:
        print("refused %s: %s" % (a, e.strerror or e), flush=True)'

# Listeners on the host: TCP on 127.0.0.1 and ::1, and an abstract unix socket; every
# connection is logged to $TEST_TMP/listener.log.  Sets LISTEN_PORT and LISTEN_ABSTRACT.
start_host_listeners() {
        LISTEN_ABSTRACT="nsbox-escape-$$-$RANDOM"
        : >"$TEST_TMP/listener.log"
        python3 - "$TEST_TMP/listener.log" "$LISTEN_ABSTRACT" >"$TEST_TMP/listener.port" 2>&1 <<'PY' &
import select, socket, sys
log = open(sys.argv[1], "a")
s4 = socket.socket(socket.AF_INET)
s4.bind(("127.0.0.1", 0))
port = s4.getsockname()[1]
s6 = socket.socket(socket.AF_INET6)
s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s6.bind(("::1", port))
su = socket.socket(socket.AF_UNIX)
su.bind("\0" + sys.argv[2])
for s in (s4, s6, su):
    s.listen(16)
print(port, flush=True)
while True:
    for s in select.select([s4, s6, su], [], [], 60)[0]:
        c, a = s.accept()
        log.write("CONNECTION on %s from %s\n" % (s.getsockname(), a))
        log.flush()
        c.close()
PY
        local pid=$!
        at_exit "kill $pid 2>/dev/null"
        for _ in $(seq 50); do [ -s "$TEST_TMP/listener.port" ] && break; sleep 0.1; done
        LISTEN_PORT=$(head -n 1 "$TEST_TMP/listener.port")
        [[ $LISTEN_PORT =~ ^[0-9]+$ ]] || fail "the host listeners did not start: $(cat "$TEST_TMP/listener.port")"
}

test_no_route_out_and_no_dns() {
        local kind out
        for kind in run daemon; do
                out=$(in_sandbox $kind "ip -o link; { ip route; ip -6 route; } | sed 's/^/ROUTE /'; echo routes-listed
                        python3 -c '$CONNECT' 1.1.1.1:53 8.8.8.8:443 10.0.2.2:22 192.168.1.1:80 [2606:4700:4700::1111]:53
                        getent hosts example.com debian.org && echo RESOLVED || echo 'dns: nothing resolved'")
                echo "    $kind sandbox: $(printf '%s' "$out" | tr '\n' ' ')" >&2
                assert_contains "$out" "routes-listed" "the $kind sandbox's output (did it run?)"
                assert_contains "$out" "refused 1.1.1.1:53: Network is unreachable" "the $kind sandbox"
                assert_contains "$out" "refused [2606:4700:4700::1111]:53: Network is unreachable" "the $kind sandbox"
                assert_not_contains "$out" "REACHED" "connections out of the $kind sandbox"
                assert_not_contains "$out" "RESOLVED" "DNS in the $kind sandbox"
                assert_contains "$out" "dns: nothing resolved" "the $kind sandbox"
                assert_not_contains "$out" "ROUTE default" "the $kind sandbox's routes"
                printf '%s\n' "$out" | grep '^ROUTE ' | grep -v ' dev lo ' && fail "a route through another device than lo in the $kind sandbox"
                assert_eq "1" "$(printf '%s\n' "$out" | grep -c '^[0-9]*: ')" "network interfaces in the $kind sandbox (lo only): $out"
        done
        # control: the host has a route, so the refusals come from the sandbox
        ip route 2>/dev/null | grep -q . || echo "    control: the host has no route either" >&2
}

test_host_loopback_and_abstract_sockets_are_unreachable() {
        local kind out
        start_host_listeners
        for kind in run daemon; do
                out=$(in_sandbox $kind "python3 -c '$CONNECT' 127.0.0.1:$LISTEN_PORT [::1]:$LISTEN_PORT localhost:$LISTEN_PORT @$LISTEN_ABSTRACT; echo tried")
                echo "    $kind sandbox: connect to the host's 127.0.0.1:$LISTEN_PORT, [::1]:$LISTEN_PORT, @$LISTEN_ABSTRACT: $(printf '%s' "$out" | tr '\n' ' ')" >&2
                assert_contains "$out" "tried" "the $kind sandbox's output (did it run?)"
                assert_contains "$out" "refused 127.0.0.1:$LISTEN_PORT: Connection refused" "the $kind sandbox"
                assert_contains "$out" "refused @$LISTEN_ABSTRACT: Connection refused" "the $kind sandbox"
                assert_not_contains "$out" "REACHED" "connections from the $kind sandbox"
        done
        sleep 0.2
        assert_eq "" "$(cat "$TEST_TMP/listener.log")" "connections the host's listeners saw"
        # control: from the host the same connections get through and are logged
        out=$(python3 -c "$CONNECT" "127.0.0.1:$LISTEN_PORT" "[::1]:$LISTEN_PORT" "@$LISTEN_ABSTRACT")
        echo "    control (host): $(printf '%s' "$out" | tr '\n' ' ')" >&2
        assert_contains "$out" "REACHED 127.0.0.1:$LISTEN_PORT" "control"
        assert_contains "$out" "REACHED @$LISTEN_ABSTRACT" "control"
        for _ in $(seq 20); do [ "$(grep -c CONNECTION "$TEST_TMP/listener.log")" -ge 2 ] && break; sleep 0.1; done
        assert_contains "$(cat "$TEST_TMP/listener.log")" "CONNECTION" "control: the listeners' log"
}

run_tests
