#!/usr/bin/env bash
# Tenants of one nsboxd (issue 19, findings 5, 6, 10 and 12): one uid cannot take every
# connection, fill nsboxd's memory with unfinished request lines, ask for a writable layer (host
# RAM) without bound or all the sandboxes; and what clients chose (labels) reaches a terminal
# escaped.  Every test starts an nsboxd of its own with a configuration of its own.
# As root, the tenant is $NSBOX_TEST_USER (nsboxtest), a configured client of root's nsboxd, and
# root and a second client (uid 65534) are the others who must still be served: the tests that
# need a second uid are root-only there (only root can switch uids and only a root nsboxd serves
# other users).  As a user, the tenant is the user itself against its own nsboxd: the per-uid
# caps hold for nsboxd's own uid too.
# shellcheck disable=SC2016
. "$(dirname "$0")/../lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
SESSION_DIR=$(mktemp -d /tmp/nsbox-ten.XXXXXX) || exit 1
chmod 0711 "$SESSION_DIR"
export NSBOX_STORE="$SESSION_DIR/store"
TENANT=${NSBOX_TEST_USER:-nsboxtest}

# ---- helpers -------------------------------------------------------------------------------

# A JSON-RPC client for the python snippets: Conn(path) connects to $NSBOX_SOCKET; call() sends a
# request and returns its reply, ok() checks it is a result; code(reply) is the error's data code;
# line(sock) reads one line (b"" at EOF); check(cond, msg) exits with msg when cond is false.
PYLIB='import json, os, socket, sys, time
SOCK = os.environ["NSBOX_SOCKET"]
def check(cond, msg):
    if not cond:
        sys.exit(msg)
class Conn:
    def __init__(self, timeout=60):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(timeout)
        self.s.connect(SOCK)
        self.f = self.s.makefile("rb")
        self.n = 0
    def call(self, method, params=None):
        self.n += 1
        m = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            m["params"] = params
        self.s.sendall(json.dumps(m).encode() + b"\n")
        while True:
            l = self.f.readline()
            if not l:
                raise EOFError("nsboxd closed the connection")
            d = json.loads(l)
            if d.get("id") == self.n:
                return d
    def ok(self, method, params=None):
        d = self.call(method, params)
        check("result" in d, "%s %s: %s" % (method, json.dumps(params), json.dumps(d.get("error"))))
        return d["result"]
def code(d):
    return ((d.get("error") or {}).get("data") or {}).get("code")
def line(s):
    b = b""
    while not b.endswith(b"\n"):
        try:
            c = s.recv(1)
        except ConnectionResetError:
            c = b""
        if not c:
            break
        b += c
    return b
def closed(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
'
py() { python3 -c "$PYLIB$1" "${@:2}"; }

# as_tenant CMD...: as root, CMD runs as the tenant (with a PATH of the system's: root's may lead
# to programs of root's home); as a user, as the user itself.
as_tenant() {
        if [ "$TEST_AS" = root ]; then
                (cd / && PATH=/usr/local/bin:/usr/bin:/bin setpriv --reuid="$TENANT" --regid="$TENANT" --init-groups "$@")
        else
                "$@"
        fi
}
tpy() { as_tenant env NSBOX_SOCKET="$NSBOX_SOCKET" python3 -c "$PYLIB$1" "${@:2}"; }

# tenant_conf FIELDS: a configuration of FIELDS ("\"key\": value, ..."), with the tenant and uid
# 65534 as clients when root runs it.
tenant_conf() {
        local uid
        if [ "$TEST_AS" = root ]; then
                uid=$(id -u "$TENANT") || fail "no user $TENANT"
                printf '{%s"clients": {"uids": [%s, 65534]}}' "${1:+$1, }" "$uid"
        else
                printf '{%s}' "$1"
        fi
}

new_dir() { local d; d=$(mktemp -d "$SESSION_DIR/t.XXXXXX") && chmod 0711 "$d" && echo "$d"; }

MY_DAEMONS=""
MY_PIDS=""

# start_daemon DIR CONFIG-JSON: nsboxd with CONFIG-JSON on DIR/d.sock, its store DIR/store, its log
# DIR/log; waits until it answers ping.  Sets DPID and NSBOX_SOCKET.
start_daemon() {
        local dir=$1 i
        printf '%s\n' "$2" > "$dir/config.json"
        NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" >> "$dir/log" 2>&1 < /dev/null &
        DPID=$!
        MY_DAEMONS="$MY_DAEMONS $DPID"
        export NSBOX_SOCKET="$dir/d.sock"
        for i in $(seq 300); do
                [ "$(daemon_pid)" = "$DPID" ] && return 0
                pid_alive "$DPID" || fail "nsboxd --config '$2' exited at start: $(tail -n 5 "$dir/log")"
                sleep 0.1
        done
        fail "nsboxd did not answer ping within 30 s: $(tail -n 5 "$dir/log")"
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# ---- connections (finding 5) ------------------------------------------------------------------

test_one_uid_with_many_idle_connections_leaves_room_for_others() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '')"
        # The tenant opens 300 connections and says ping on each (then holds them idle, as a
        # client holding sandboxes does): 256 (max_connections_per_uid by default) are served,
        # the others get one error line and are closed.  It holds them until $d/release exists.
        tpy 'held, refused = [], []
for i in range(300):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(SOCK)
    try:
        s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
    except OSError:
        pass
    d = json.loads(line(s))
    if "result" in d:
        held.append(s)
        continue
    check(code(d) == "capacity" and "max_connections_per_uid is 256" in d["error"]["message"] and d["id"] is None,
          "connection %d: %s" % (i, json.dumps(d)))
    check(closed(s), "connection %d: not closed after its error line" % i)
    refused.append(s)
print("held %d refused %d" % (len(held), len(refused)), flush=True)
end = time.monotonic() + 120
while not os.path.exists(sys.argv[1]) and time.monotonic() < end:
    time.sleep(0.1)
for i, s in enumerate(held):  # still served after the others came and went
    s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
    d = json.loads(line(s))
    check("result" in d, "held connection %d after the others: %s" % (i, json.dumps(d)))
print("all held ok", flush=True)' "$d/release" > "$d/tenant.out" 2>&1 &
        MY_PIDS="$!"
        local i
        for i in $(seq 600); do
                grep -q "held" "$d/tenant.out" && break
                pid_alive "$MY_PIDS" || break
                sleep 0.1
        done
        assert_eq "held 256 refused 44" "$(head -n 1 "$d/tenant.out")" "the tenant's connections (served, refused)"
        grep -q "refused a connection of uid $(id -u "$(as_tenant id -un)"): too many connections" "$d/log" ||
                fail "no 'refused a connection of uid ...: too many connections' in the log: $(tail -n 3 "$d/log")"
        # others connect while the tenant holds its 256
        if [ "$TEST_AS" = root ]; then
                OUT=$(py 'c = Conn(); c.ok("ping"); s = c.ok("create", {}); c.ok("destroy", {"sandbox": s["id"]}); print("root ok")' 2>&1)
                assert_eq "root ok" "$OUT" "root while the tenant holds its connections"
                OUT=$(cd / && PATH=/usr/local/bin:/usr/bin:/bin setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c "$PYLIB"'Conn().ok("ping"); print("other ok")' 2>&1)
                assert_eq "other ok" "$OUT" "uid 65534 (another client) while the tenant holds its connections"
        else
                # the user's own uid is the tenant: one connection more is refused, one closed makes room
                OUT=$(py 'try:
    print(json.dumps(Conn().call("ping")))
except (OSError, EOFError) as e:
    print("NO REPLY: %s" % e)' 2>&1)
                assert_contains "$OUT" "NO REPLY" "a 257th connection of the same uid"
        fi
        touch "$d/release"
        wait "$MY_PIDS"
        assert_eq "all held ok" "$(tail -n 1 "$d/tenant.out")" "the tenant's held connections after the others"
        MY_PIDS=""
}

test_half_sent_requests_and_silent_connections_near_the_cap_are_closed_idle_ones_stay() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '"max_connections_per_uid": 8, "request_timeout": 1, "handshake_timeout": 1')"
        OUT=$(tpy 'a = Conn()
a.ok("ping")                 # an idle connection that spoke: kept however long it idles
half = Conn()
half.s.sendall(b"{\"jsonrpc\": \"2.0\", \"id\": 1,")
d = json.loads(line(half.s))  # request_timeout (1 s) later
check(code(d) == "timeout" and "request_timeout" in d["error"]["message"], "a half-sent request: %s" % json.dumps(d))
check(closed(half.s), "the connection with a half-sent request is open after its error line")
quiet = Conn()               # silent, but its uid is far from its cap (2 of 8): kept
time.sleep(3)
quiet.ok("ping")
a.ok("ping")
# six silent ones: with a and quiet, the uid is at its cap (8); each is closed after
# handshake_timeout, the later ones too when the first ones closed took the uid below 3/4 of it
silent = []
for i in range(6):
    silent.append(Conn())
    time.sleep(0.1)
for i, c in enumerate(silent):
    d = json.loads(line(c.s))
    check(code(d) == "timeout" and "handshake_timeout" in d["error"]["message"], "silent connection %d: %s" % (i, json.dumps(d)))
    check(closed(c.s), "silent connection %d is open after its error line" % i)
a.ok("ping")
quiet.ok("ping")
Conn().ok("ping")
print("ok")' 2>&1)
        assert_eq ok "$OUT" "half-sent, silent and idle connections"
        grep -q "a request line not finished within 1 s" "$d/log" || fail "no 'a request line not finished within 1 s' in the log: $(tail -n 3 "$d/log")"
}

# ---- request bytes (finding 6) --------------------------------------------------------------------

test_unterminated_request_bytes_are_capped_per_uid() {
        trap cleanup EXIT
        local d before after
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '')"
        before=$(rss_kib "$DPID")
        # 8 connections of one uid, each with 30 MiB of a request line and no newline: at most
        # max_request_bytes_per_uid (64 MiB by default) is held; the others are refused and closed
        tpy 'conns = [Conn() for i in range(8)]
chunk = b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\", \"params\": {\"pad\": \"" + b"a" * ((30 << 20) - 60)
refused = 0
for i, c in enumerate(conns):
    try:
        c.s.sendall(chunk)
    except OSError:
        pass
time.sleep(1)
for i, c in enumerate(conns):
    c.s.setblocking(False)
    try:
        got = c.s.recv(65536)
    except BlockingIOError:
        continue
    except ConnectionResetError:
        got = b""
    c.s.setblocking(True)
    d = json.loads(got.split(b"\n")[0])
    check(code(d) == "too_large" and "max_request_bytes_per_uid" in d["error"]["message"], "connection %d: %s" % (i, json.dumps(d)))
    refused += 1
print(refused, flush=True)
end = time.monotonic() + 120
while not os.path.exists(sys.argv[1]) and time.monotonic() < end:
    time.sleep(0.1)
Conn().ok("ping")
print("ok")' "$d/release" > "$d/tenant.out" 2>&1 &
        MY_PIDS="$!"
        local i
        for i in $(seq 600); do
                [ -s "$d/tenant.out" ] && break
                pid_alive "$MY_PIDS" || break
                sleep 0.1
        done
        after=$(rss_kib "$DPID")
        [ $((after - before)) -lt $((100 << 10)) ] || fail "nsboxd grew from $before KiB to $after KiB with 8 x 30 MiB unfinished lines (bound: 64 MiB and some)"
        [ "$(head -n 1 "$d/tenant.out")" -ge 6 ] 2> /dev/null || fail "connections refused with too_large: $(cat "$d/tenant.out")"
        # others are served meanwhile
        py 'Conn().ok("ping")' || fail "ping while one uid holds its unfinished lines"
        touch "$d/release"
        wait "$MY_PIDS" || fail "the tenant: $(cat "$d/tenant.out")"
        MY_PIDS=""
        assert_eq ok "$(tail -n 1 "$d/tenant.out")" "the tenant's ping after"
        grep -q "its requests buffered would pass max_request_bytes_per_uid" "$d/log" || fail "nothing in the log: $(tail -n 3 "$d/log")"
}

# ---- disk (finding 10) ------------------------------------------------------------------------------

test_tenant_disk_above_cap_is_refused() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '"max_disk": "2G", "max_disk_per_uid": "3G"')"
        OUT=$(tpy 'c = Conn()
e = c.call("create", {"disk": "100G"})
m = (e.get("error") or {}).get("message", "")
check(code(e) == "invalid_argument" and "disk 100G is more than max_disk 2G" in m and "\n" not in m, "create with disk 100G: %s" % json.dumps(e))
check(c.ok("list")["sandboxes"] == [], "a sandbox was left by the refused create")
a = c.ok("create", {"disk": "2G"})
check(a["limits"]["disk"] == 2 << 30, "disk of a create with 2G: %s" % json.dumps(a["limits"]))
b = c.ok("create", {})
check(b["limits"]["disk"] == 1 << 30, "disk of a create naming none: %s" % json.dumps(b["limits"]))
e = c.call("create", {"disk": "1G"})
check(code(e) == "capacity" and "max_disk_per_uid 3G" in e["error"]["message"], "a create past max_disk_per_uid: %s" % json.dumps(e))
c.ok("destroy", {"sandbox": a["id"]})
c.ok("destroy", {"sandbox": b["id"]})
print("ok")' 2>&1)
        assert_eq ok "$OUT" "creates of the tenant under max_disk 2G, max_disk_per_uid 3G"
        # the default: a quarter of the host memory (at least 1G), far below 100T
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '')"
        OUT=$(tpy 'e = Conn().call("create", {"disk": "100T"})
check(code(e) == "invalid_argument" and "more than max_disk" in e["error"]["message"], "create with disk 100T: %s" % json.dumps(e))
print("ok")' 2>&1)
        assert_eq ok "$OUT" "create with disk 100T and the default max_disk"
        # a small max_disk is what a sandbox naming none gets
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '"max_disk": "256M"')"
        OUT=$(tpy 'c = Conn()
s = c.ok("create", {})
check(s["limits"]["disk"] == 256 << 20, "disk of a create naming none under max_disk 256M: %s" % json.dumps(s["limits"]))
c.ok("destroy", {"sandbox": s["id"]})
print("ok")' 2>&1)
        assert_eq ok "$OUT" "create naming no disk under max_disk 256M"
}

# ---- capacity (finding 12) -------------------------------------------------------------------------

test_tenants_get_a_quarter_of_max_sandboxes_by_default() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '"max_sandboxes": 8')"
        if [ "$TEST_AS" = root ]; then
                # root-only: a tenant exists only for a root nsboxd
                OUT=$(tpy 'c = Conn()
ids = [c.ok("create", {})["id"] for i in range(2)]
e = c.call("create", {})
check(code(e) == "capacity" and "max_per_uid is 2" in e["error"]["message"], "a 3rd create of a tenant with max_sandboxes 8: %s" % json.dumps(e))
print(" ".join(ids))' 2>&1) || fail "the tenant: $OUT"
                local tids=$OUT
                OUT=$(py 'c = Conn()
ids = [c.ok("create", {})["id"] for i in range(6)]
e = c.call("create", {})
check(code(e) == "capacity" and "max_sandboxes" in e["error"]["message"], "a 9th create: %s" % json.dumps(e))
for i in ids + sys.argv[1].split():
    c.ok("destroy", {"sandbox": i})
print("ok")' "$tids" 2>&1)
                assert_eq ok "$OUT" "root's creates beside a tenant's"
        else
                # nsboxd's own uid is its operator: all of max_sandboxes
                OUT=$(py 'c = Conn()
ids = [c.ok("create", {})["id"] for i in range(3)]
for i in ids:
    c.ok("destroy", {"sandbox": i})
print("ok")' 2>&1)
                assert_eq ok "$OUT" "three creates of nsboxd's own uid with max_sandboxes 8"
        fi
}

test_labels_with_escape_sequences_are_shown_escaped_in_ls() {
        trap cleanup EXIT
        local d id evil
        d=$(new_dir)
        start_daemon "$d" "$(tenant_conf '')"
        # a title change, a screen clear, an 8-bit CSI, DEL and a byte that is not UTF-8 (as
        # \udc.. in python: sent raw)
        id=$(tpy 'c = Conn()
evil = "\x1b]0;pwned\x07\x1b[2J\u009b31m\x7fend"
print(c.ok("create", {"labels": {"x": evil}})["id"])' 2>&1) || fail "create with an escape sequence in a label: $id"
        assert_status 0 "$NSBOX" ls
        printf '%s' "$OUT" | LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' && fail "nsbox ls printed control characters: $(printf '%s' "$OUT" | od -c | head -n 5)"
        printf '%s' "$OUT" | LC_ALL=C grep -q $'\xc2[\x80-\x9f]' && fail "nsbox ls printed a C1 control: $(printf '%s' "$OUT" | od -c | head -n 5)"
        assert_contains "$OUT" 'x=\x1b]0;pwned\x07\x1b[2J\u009b31m\x7fend' "nsbox ls"
        # --json keeps them exact (escaped as JSON)
        assert_status 0 "$NSBOX" ls --json
        printf '%s' "$OUT" | LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]\|\xc2[\x80-\x9f]' && fail "nsbox ls --json printed control characters"
        evil=$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(ascii([s["labels"]["x"] for s in json.load(sys.stdin)]))')
        assert_eq "['\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x7fend']" "$evil" "the label in nsbox ls --json"
        # an error echoing what a client typed (an 8-bit CSI: C0 controls were '?' already)
        assert_status 125 "$NSBOX" rm $'\xc2\x9b2Jabcd'
        printf '%s' "$OUT" | LC_ALL=C grep -q $'\xc2[\x80-\x9f]' && fail "nsbox rm printed a C1 control: $OUT"
        assert_contains "$OUT" "no sandbox '\\u009b2Jabcd'" "nsbox rm of an id with an escape sequence"
        assert_status 0 "$NSBOX" rm "$id"
}

run_tests
st=$?
rm -rf "$SESSION_DIR"
exit $st
