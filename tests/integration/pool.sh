#!/usr/bin/env bash
# nsboxd as a production service, as a user of it sees it (issue 6): a configuration file
# (nsboxd --config, --check-config), templates with warm pools, get_or_create by labels, timeouts
# and idle timeouts with on_expiry, set_timeout, capacity limits (max_sandboxes, max_per_uid,
# memory_budget, wait), clients of other uids, restart after kill -9, SIGTERM draining calls in
# flight, and stats.  Every test starts nsboxd daemons of its own, each on its own socket with its
# own config file and log under a directory of its own, and stops them when it ends.
# Runs as root and as an unprivileged user (tests/run does both).
# The shell scripts run in sandboxes are in single quotes on purpose: they expand inside.
# shellcheck disable=SC2016
. "$(dirname "$0")/../lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
# Every daemon's directory is below this one (short: a unix socket path is < 108 bytes); every
# daemon has a store below it in its environment, which is how the last test finds them.
SESSION_DIR=$(mktemp -d /tmp/nsbox-pool.XXXXXX) || exit 1
export NSBOX_STORE="$SESSION_DIR/store"

# ---- helpers -------------------------------------------------------------------------------

# A JSON-RPC client for the python snippets below (the snippet follows this text): Conn(path)
# connects (to $NSBOX_SOCKET by default); send() sends a request and returns its id, reply(id)
# waits for that reply (skipping notifications, keeping the others), call() does both, ok() also
# checks it is a result and returns it.  code(reply) is the error data code or None, sh(...) the
# params of a call of exec with a shell command line, listed(conn) the visible sandboxes by id,
# check(cond, message) exits with the message when cond is false.
PYLIB='import json, os, signal, socket, sys, time
SOCK = os.environ.get("NSBOX_SOCKET", "")
def check(cond, msg):
    if not cond:
        sys.exit(msg)
class Conn:
    def __init__(self, path=None, timeout=120):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(timeout)
        self.s.connect(path or SOCK)
        self.f = self.s.makefile("rb")
        self.n = 0
        self.got = {}
    def send(self, method, params=None):
        self.n += 1
        m = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            m["params"] = params
        self.s.sendall(json.dumps(m).encode() + b"\n")
        return self.n
    def reply(self, i):
        while i not in self.got:
            line = self.f.readline()
            if not line:
                raise EOFError("nsboxd closed the connection")
            d = json.loads(line)
            if "id" in d:
                self.got[d["id"]] = d
        return self.got.pop(i)
    def call(self, method, params=None):
        return self.reply(self.send(method, params))
    def ok(self, method, params=None):
        return ok(self.call(method, params), "%s %s" % (method, json.dumps(params)))
def ok(d, what):
    check("result" in d, "%s: %s" % (what, json.dumps(d.get("error"))))
    return d["result"]
def code(d):
    return ((d.get("error") or {}).get("data") or {}).get("code")
def sh(sid, cmd, **kw):
    p = dict(kw)
    p["shell"] = cmd
    return {"sandbox": sid, "tool": "exec", "params": p}
def listed(c, **params):
    return {s["id"]: s for s in c.ok("list", params)["sandboxes"]}
def wait_for(pred, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()
'

# py SCRIPT [ARG...]: run the python SCRIPT with the client above; its argv[1:] are the ARGs.
py() { python3 -c "$PYLIB$1" "${@:2}"; }

# rpc SOCKET METHOD [JSON-PARAMS]: one request on a connection of its own; prints the whole reply
# line, or "NO REPLY: why" when the connection fails or closes first.
rpc() {
        py 'try:
    print(json.dumps(Conn(sys.argv[1], 30).call(sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)))
except (OSError, EOFError) as e:
    print("NO REPLY: %s" % e)' "$@"
}

# Evaluate a Python expression over the JSON document d read from standard input: a string is
# printed as it is, anything else as JSON (true, null, [1, 2]).
jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

# The stats of the daemon on $NSBOX_SOCKET, as a python expression over them (d).
stats() { rpc "$NSBOX_SOCKET" stats | jget "(lambda d: $1)(d['result'])"; }

# Wait until template NAME of the daemon on $NSBOX_SOCKET has N sandboxes ready (30 s at most).
wait_ready() { # NAME N
        py 'c = Conn()
full = wait_for(lambda: c.ok("stats")["templates"][sys.argv[1]]["ready"] >= int(sys.argv[2]), 30)
check(full, "template %s: %s ready after 30 s, not %s: %s" % (sys.argv[1], c.ok("stats")["templates"][sys.argv[1]]["ready"],
      sys.argv[2], json.dumps(c.ok("stats")["templates"])))' "$1" "$2" || fail "the pool of template $1 did not fill"
}

# Every process below PID (not PID itself), one per line.
descendants() {
        ps -e -o pid=,ppid= | awk -v root="$1" '{ parent[$1] = $2 }
                END { mark[root] = 1; do { more = 0; for (p in parent) if (!(p in mark) && (parent[p] in mark)) { mark[p] = 1; more = 1 } } while (more)
                      for (p in mark) if (p != root) print p }'
}

# A fresh directory for one daemon.
new_dir() { mktemp -d "$SESSION_DIR/t.XXXXXX"; }

# What each test started, stopped by lib.sh's cleanup (every test sets `trap cleanup EXIT`).
MY_DAEMONS=""
MY_PIDS=""

# start_daemon DIR [CONFIG-JSON [LOG]]: write DIR/config.json, start nsboxd with it on DIR/d.sock,
# its store DIR/store, its log appended to LOG (DIR/log by default), and wait until it answers
# ping (before that a client would start a daemon of its own).  Sets DPID and NSBOX_SOCKET.
start_daemon() {
        local dir=$1 conf=${2:-'{}'} log=${3:-$1/log} i
        printf '%s\n' "$conf" > "$dir/config.json"
        NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" >> "$log" 2>&1 < /dev/null &
        DPID=$!
        MY_DAEMONS="$MY_DAEMONS $DPID"
        export NSBOX_SOCKET="$dir/d.sock"
        for i in $(seq 300); do
                [ "$(daemon_pid)" = "$DPID" ] && return 0
                pid_alive "$DPID" || fail "nsboxd --config $conf exited at start: $(tail -n 5 "$log")"
                sleep 0.1
        done
        fail "nsboxd did not answer ping within 30 s: $(tail -n 5 "$log")"
}

# Stop the daemon DPID with SIGTERM and check it exits with status 0 within 30 s.
stop_daemon() {
        local left st
        kill -TERM "$DPID"
        left=$(wait_pids_gone 30 "$DPID") || fail "nsboxd $DPID still runs 30 s after SIGTERM"
        wait "$DPID"
        st=$?
        # shellcheck disable=SC2086
        MY_DAEMONS=$(printf '%s\n' $MY_DAEMONS | grep -vx "$DPID" | tr '\n' ' ')
        assert_eq 0 "$st" "exit status of nsboxd after SIGTERM"
}

# The sandbox cgroup directories of nsboxd PID below the parent of cgroup path CG (none: "").
cgroups_of() { # PID CG
        [ -n "$2" ] && [ "$2" != null ] || return 0
        find "$(dirname "$2")" -mindepth 1 -maxdepth 1 -name "sb-$1-*" -printf '%f\n' 2> /dev/null
}

# ---- tests ---------------------------------------------------------------------------------

test_pool_serves_sequential_creates() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" '{"templates": {"default": {"create": {"policy": "default"}, "pool": 8}}}'
        wait_ready default 8
        # pooled sandboxes are not anybody's yet: nobody lists them
        assert_eq "[]" "$(rpc "$NSBOX_SOCKET" list | jget 'd["result"]["sandboxes"]')" "list with a full pool"
        OUT=$(py 'c = Conn()
seen = set()
for i in range(100):
    # a hit is due whenever the pool has a sandbox ready: wait for one when the refill lags
    check(wait_for(lambda: c.ok("stats")["templates"]["default"]["ready"] >= 1, 30), "create %d: the pool stays empty" % i)
    s = c.ok("create", {"template": "default"})
    check(s.get("pooled") is True, "create %d: pooled is %s, not true" % (i, json.dumps(s.get("pooled"))))
    check(s.get("template") == "default", "create %d: template is %s" % (i, json.dumps(s.get("template"))))
    check(s["state"] == "running", "create %d: state %s" % (i, s["state"]))
    check(s["id"] not in seen, "create %d: id %s handed out twice" % (i, s["id"]))
    seen.add(s["id"])
    if i < 3:
        # a pooled sandbox is a fresh one: nothing of the one before it
        r = c.ok("call", sh(s["id"], "ls -A /workspace; touch /workspace/used-before"))
        check(r["exit_code"] == 0 and r["stdout"] == "", "create %d: /workspace of a pooled sandbox: %s" % (i, json.dumps(r)))
    check(c.ok("destroy", {"sandbox": s["id"]})["destroyed"] == s["id"], "destroy %d" % i)
print("ok")' 2>&1) || fail "100 creates from the pool: $OUT"
        # the CLI: no options at all is the default template; --template names it
        local id opt
        for opt in "" "--template default"; do
                wait_ready default 1
                # shellcheck disable=SC2086
                assert_status 0 "$NSBOX" create $opt --json
                assert_eq "true default" "$(printf '%s' "$OUT" | jget '"%s %s" % (json.dumps(d.get("pooled")), d.get("template"))')" "nsbox create $opt --json: pooled, template"
                id=$(printf '%s' "$OUT" | jget 'd["id"]')
                assert_status 0 "$NSBOX" rm "$id"
        done
        assert_eq "102 0" "$(stats '"%s %s" % (d["templates"]["default"]["hits"], d["templates"]["default"]["misses"])')" "hits and misses of template default"
        # and the pool is full again
        py 'c = Conn()
check(wait_for(lambda: c.ok("stats")["templates"]["default"]["ready"] == 8, 20),
      "pool of 8 not refilled 20 s after the creates: %s" % json.dumps(c.ok("stats")["templates"]["default"]))' ||
                fail "the pool did not refill"
        assert_eq "[]" "$(rpc "$NSBOX_SOCKET" list | jget 'd["result"]["sandboxes"]')" "list after the creates, with a full pool"
}

# Each pooled sandbox runs its template's warm-up once before it is handed out (nsboxd(8), POOLS):
# the default one leaves nothing a user sees (processes, process_list, files in the home,
# /workspace and /tmp: as in a sandbox started for the create); the template's own one ran
# before the first call (its file is there); one that fails does not keep the pool from filling.
test_pool_warmup_leaves_no_trace() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" '{"templates": {"default": {"create": {}, "pool": 2},
                "own": {"create": {}, "pool": 1, "warmup": ["/bin/sh", "-c", "echo warmed > /workspace/warm"]},
                "broken": {"create": {}, "pool": 1, "warmup": ["/no/such/command"]}}}'
        wait_ready default 2
        wait_ready own 1
        wait_ready broken 1
        OUT=$(py 'c = Conn()
look = "ps -e -o comm= | sort; ls -A ~ /workspace /tmp"
def seen(params):
    s = c.ok("create", params)
    r = c.ok("call", sh(s["id"], look))
    check(r["exit_code"] == 0, "%s: %s" % (look, json.dumps(r)))
    procs = c.ok("call", {"sandbox": s["id"], "tool": "process_list", "params": {}})["processes"]
    c.ok("destroy", {"sandbox": s["id"]})
    return s.get("pooled"), r["stdout"], procs
pooled, warm, procs = seen({"template": "default"})
check(pooled is True, "create from the pool: pooled is %s" % json.dumps(pooled))
check(procs == [], "process_list of a warmed pooled sandbox: %s" % json.dumps(procs))
_, cold, procs = seen({})
check(warm == cold, "a warmed pooled sandbox shows %r, one started for the create %r" % (warm, cold))
check(procs == [], "process_list of a cold sandbox: %s" % json.dumps(procs))
s = c.ok("create", {"template": "own"})
r = c.ok("call", sh(s["id"], "cat /workspace/warm"))
check(s.get("pooled") is True and r["stdout"] == "warmed\n", "the template own warm-up: pooled %s, %s" % (s.get("pooled"), json.dumps(r)))
s = c.ok("create", {"template": "broken"})
r = c.ok("call", sh(s["id"], "echo ok"))
check(s.get("pooled") is True and r["stdout"] == "ok\n", "a sandbox of a failing warm-up: pooled %s, %s" % (s.get("pooled"), json.dumps(r)))
st = c.ok("stats")["templates"]["broken"]
check("last_start_failure" not in st, "stats of the template whose warm-up fails: %s" % json.dumps(st))
print("ok")' 2>&1) || fail "warm-up: $OUT"
        assert_eq "ok" "$OUT" "the warmed pools"
}

test_two_hundred_sandboxes_alive_then_nothing_left() {
        trap cleanup EXIT
        local d ids pids cgs mounts_before left cg
        d=$(new_dir)
        mounts_before=$(grep -c . /proc/self/mountinfo)
        start_daemon "$d" '{}'
        # 200 creates, 20 at a time on one connection; a loop in the background in each; then
        # every one answers a call
        ids=$(py 'c = Conn()
ids = []
for b in range(0, 200, 20):
    reqs = [c.send("create", {"labels": {"n": str(i)}}) for i in range(b, b + 20)]
    ids += [ok(c.reply(r), "create")["id"] for r in reqs]
check(len(set(ids)) == 200, "%d distinct ids" % len(set(ids)))
reqs = [c.send("call", sh(i, "while :; do sleep 1; done", background=True)) for i in ids]
for r in reqs:
    res = ok(c.reply(r), "exec in the background")
    check(res.get("background") is True and res.get("pid", 0) > 0, "exec in the background: %s" % json.dumps(res))
reqs = [c.send("call", sh(i, "echo ok")) for i in ids]
for i, r in zip(ids, reqs):
    res = ok(c.reply(r), "exec echo ok in %s" % i)
    check(res["exit_code"] == 0 and res["stdout"] == "ok\n", "exec echo ok in %s: %s" % (i, json.dumps(res)))
print(" ".join(ids))' 2>&1) || fail "200 sandboxes: $ids; nsboxd's log: $(grep -v ' created for uid ' "$d/log" | tail -n 3)"
        assert_eq 200 "$(rpc "$NSBOX_SOCKET" list | jget 'len(d["result"]["sandboxes"])')" "sandboxes listed"
        cgs=$(rpc "$NSBOX_SOCKET" list | jget '" ".join(s["cgroup"] or "null" for s in d["result"]["sandboxes"])')
        pids=$(descendants "$DPID")
        [ "$(printf '%s\n' "$pids" | grep -c .)" -ge 400 ] || fail "only $(printf '%s\n' "$pids" | grep -c .) processes under nsboxd for 200 sandboxes running a loop each"
        OUT=$(py 'c = Conn()
ids = sys.argv[1].split()
reqs = [c.send("destroy", {"sandbox": i}) for i in ids]
for i, r in zip(ids, reqs):
    check(ok(c.reply(r), "destroy %s" % i)["destroyed"] == i, "destroy %s" % i)
print("ok")' "$ids" 2>&1) || fail "destroying 200 sandboxes: $OUT"
        # shellcheck disable=SC2086
        left=$(wait_pids_gone 10 $pids) || fail "processes of the sandboxes still running 10 s after destroy: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" | head -n 5)"
        for cg in $cgs; do
                [ "$cg" = null ] || [ ! -e "$cg" ] || fail "cgroup $cg left after destroy"
        done
        assert_eq "" "$(cgroups_of "$DPID" "${cgs%% *}")" "cgroups sb-$DPID-* left"
        assert_daemon_holds_nothing "$mounts_before"
}

test_get_or_create_by_label_then_idle_timeout() {
        trap cleanup EXIT
        local d ids t1 t9 a
        d=$(new_dir)
        start_daemon "$d" '{}'
        ids=$(py 'c = Conn()
p = {"labels": {"thread_id": "t1"}, "idle_timeout": 2}
a = c.ok("get_or_create", p)
b = c.ok("get_or_create", p)
check(a["id"] == b["id"], "two get_or_create of thread_id t1: %s and %s" % (a["id"], b["id"]))
check((a.get("created"), b.get("created")) == (True, False), "created: %s then %s" % (a.get("created"), b.get("created")))
check(a.get("idle_timeout") == 2, "idle_timeout of the sandbox: %s" % json.dumps(a.get("idle_timeout")))
check(a.get("labels") == {"thread_id": "t1"}, "labels: %s" % json.dumps(a.get("labels")))
# two at once, on two connections, both sent before either reply is read
c1, c2 = Conn(), Conn()
p2 = {"labels": {"thread_id": "t2"}, "idle_timeout": 2}
r1, r2 = c1.send("get_or_create", p2), c2.send("get_or_create", p2)
x, y = ok(c1.reply(r1), "get_or_create t2"), ok(c2.reply(r2), "get_or_create t2")
check(x["id"] == y["id"], "concurrent get_or_create of thread_id t2: %s and %s" % (x["id"], y["id"]))
check(sorted([x["created"], y["created"]]) == [False, True], "created: %s and %s" % (x["created"], y["created"]))
check(x["id"] != a["id"], "thread_id t2 got the sandbox of t1")
z = c.ok("get_or_create", {"labels": {"thread_id": "t3"}, "idle_timeout": 2})
check(z["created"] is True and z["id"] not in (a["id"], x["id"]), "thread_id t3: %s" % json.dumps(z))
# labels are required
for bad in ({}, {"labels": {}}):
    e = c.call("get_or_create", bad)
    check(code(e) == "invalid_argument", "get_or_create %s: %s" % (json.dumps(bad), json.dumps(e)))
# a call in flight keeps a sandbox from being idle, however long it runs
w = c.ok("get_or_create", {"labels": {"thread_id": "t4"}, "idle_timeout": 2})
r = c.ok("call", sh(w["id"], "sleep 4; echo woke"))
check(r["stdout"] == "woke\n", "exec in t4: %s" % json.dumps(r))
check(w["id"] in listed(c), "t4 (idle_timeout 2) gone right after a call of 4 s")
print(a["id"], x["id"], z["id"], w["id"])' 2>&1) || fail "get_or_create: $ids"
        # nothing more: each is gone within its idle timeout + 5 s (t1..t3 had 4 s already)
        OUT=$(py 'c = Conn()
ids = sys.argv[1].split()
check(wait_for(lambda: not set(ids) & set(listed(c)), 7), "still listed 7 s after their idle timeout of 2 s: %s" % (set(ids) & set(listed(c))))' "$ids" 2>&1) ||
                fail "idle sandboxes: $OUT"
        for a in $ids; do
                grep -q "sandbox $a expired (idle): destroyed" "$d/log" || fail "no 'sandbox $a expired (idle): destroyed' in the log: $(tail -n 5 "$d/log")"
        done
        # the CLI: --reuse finds the sandbox by its labels
        t1=$("$NSBOX" create --reuse --label thread_id=t9 2>&1) || fail "nsbox create --reuse: $t1"
        [[ $t1 =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create --reuse printed '$t1', not a 32-hex-digit id"
        t9=$("$NSBOX" create --reuse --label thread_id=t9 2>&1) || fail "nsbox create --reuse (again): $t9"
        assert_eq "$t1" "$t9" "the id of the second nsbox create --reuse --label thread_id=t9"
        # list filters by labels: the CLI and the method
        assert_status 0 "$NSBOX" create --label thread_id=other
        assert_status 0 "$NSBOX" ls --json --label thread_id=t9
        assert_eq "[\"$t1\"]" "$(printf '%s' "$OUT" | jget '[s["id"] for s in d]')" "nsbox ls --label thread_id=t9"
        assert_eq "[\"$t1\"]" "$(rpc "$NSBOX_SOCKET" list '{"labels": {"thread_id": "t9"}}' | jget '[s["id"] for s in d["result"]["sandboxes"]]')" \
                "list with labels thread_id t9"
        assert_status 0 "$NSBOX" ls --json
        assert_eq 2 "$(printf '%s' "$OUT" | jget 'len(d)')" "nsbox ls without --label"
        assert_status 125 "$NSBOX" create --reuse
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "--label" "nsbox create --reuse without --label"
}

test_set_timeout_extends_and_pause_on_expiry() {
        trap cleanup EXIT
        local d ids a b c e cg
        d=$(new_dir)
        start_daemon "$d" '{}'
        # A: timeout 2, at once 6 from now; B: timeout 2, removed by the CLI; E: idle timeout 1,
        # removed by the CLI; C: timeout 1, paused when it expires
        ids=$(py 'c = Conn()
a = c.ok("create", {"timeout": 2})
s = c.ok("set_timeout", {"sandbox": a["id"], "timeout": 6})
check(s["id"] == a["id"] and 4.5 < s.get("expires_in", 0) <= 6, "set_timeout 6: %s" % json.dumps(s))
b = c.ok("create", {"timeout": 2})
e = c.ok("create", {"idle_timeout": 1})
p = c.ok("create", {"timeout": 1, "on_expiry": "pause"})
check(p.get("on_expiry") == "pause", "on_expiry of the sandbox: %s" % json.dumps(p.get("on_expiry")))
print(a["id"], b["id"], e["id"], p["id"], p["cgroup"] or "null")' 2>&1) || fail "creates: $ids"
        read -r a b e c cg <<< "$ids"
        assert_status 0 "$NSBOX" set-timeout "$b" 0
        assert_status 0 "$NSBOX" set-timeout "$e" 0 --idle 0
        assert_eq '[false, false]' "$(rpc "$NSBOX_SOCKET" list | jget "[(('expires_in' in s) or ('idle_expires_in' in s)) for s in d['result']['sandboxes'] if s['id'] in ('$b', '$e')]")" \
                "B and E have a timeout after set-timeout 0"
        sleep 4
        OUT=$(py 'c = Conn()
a, b, e, p, cg = sys.argv[1:]
l = listed(c)
for n, i in (("A (timeout 2, set to 6 right away)", a), ("B (timeout removed)", b), ("E (idle timeout removed)", e)):
    check(i in l and l[i]["state"] == "running", "%s, 4 s later: %s" % (n, json.dumps(l.get(i))))
    r = c.ok("call", sh(i, "echo alive"))
    check(r["stdout"] == "alive\n", "%s: %s" % (n, json.dumps(r)))
# C expired after 1 s and stays, paused (its cgroup frozen, or with none its processes stopped)
check(p in l, "C (timeout 1, on_expiry pause) is gone 4 s later")
check(wait_for(lambda: listed(c)[p]["state"] == "paused", 3), "state of C: %s" % listed(c)[p]["state"])
r = c.call("call", sh(p, "echo no"))
check(code(r) == "conflict", "a call in C once paused: %s" % json.dumps(r))
# A goes once its 6 s are up (about 2 s from now)
check(wait_for(lambda: a not in listed(c), 8), "A still listed 12 s after set_timeout 6")
l = listed(c)
check(b in l and e in l and p in l, "B, E and C once A expired: %s" % json.dumps(sorted(l)))
print("ok")' "$a" "$b" "$e" "$c" "$cg" 2>&1) || fail "timeouts: $OUT"
        grep -q "sandbox $a expired (timeout): destroyed" "$d/log" || fail "no 'sandbox $a expired (timeout): destroyed' in the log: $(tail -n 5 "$d/log")"
        grep -q "sandbox $c expired (timeout)" "$d/log" || fail "no 'sandbox $c expired (timeout)' in the log: $(tail -n 5 "$d/log")"
        grep -q "sandbox $c expired (timeout): paused" "$d/log" || fail "no 'sandbox $c expired (timeout): paused' in the log: $(tail -n 5 "$d/log")"
        assert_status 0 "$NSBOX" ls --json --state paused
        assert_eq "[\"$c\"]" "$(printf '%s' "$OUT" | jget '[s["id"] for s in d]')" "nsbox ls --state paused"
        ! grep -q "sandbox \($b\|$e\) expired" "$d/log" || fail "a sandbox without a timeout expired: $(grep expired "$d/log")"
        assert_status 0 "$NSBOX" rm -f "$b" "$e" "$c"
}

test_kill9_nsboxd_with_20_sandboxes_then_restart_cleans_up() {
        trap cleanup EXIT
        local d ids old pids cgs cg i left id
        d=$(new_dir)
        start_daemon "$d" '{}'
        old=$DPID
        ids=$(py 'c = Conn()
reqs = [c.send("create", {}) for i in range(20)]
ids = [ok(c.reply(r), "create")["id"] for r in reqs]
reqs = [c.send("call", sh(i, "while :; do sleep 1; done", background=True)) for i in ids]
for r in reqs:
    ok(c.reply(r), "exec in the background")
c.ok("call", sh(ids[0], "echo kept > /workspace/kept"))
c.ok("snapshot", {"sandbox": ids[0], "name": "before-kill"})
print(" ".join(ids))' 2>&1) || fail "20 sandboxes: $ids"
        cgs=$(rpc "$NSBOX_SOCKET" list | jget '" ".join(s["cgroup"] or "null" for s in d["result"]["sandboxes"])')
        for id in $ids; do
                [ -f "$d/d.sock.state/$id.json" ] || fail "no state file $d/d.sock.state/$id.json: $(find "$d/d.sock.state" 2>&1 | head -n 3)"
        done
        pids=$(descendants "$old")
        [ "$(printf '%s\n' "$pids" | grep -c .)" -ge 40 ] || fail "only $(printf '%s\n' "$pids" | grep -c .) processes under nsboxd for 20 sandboxes"
        kill -KILL "$old"
        # shellcheck disable=SC2086
        left=$(wait_pids_gone 10 "$old" $pids) || fail "still running 10 s after kill -9 of nsboxd: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" | head -n 5)"
        wait "$old" 2> /dev/null
        # a new nsboxd on the same socket removes what the killed one left
        start_daemon "$d" '{}' "$d/log2"
        for i in $(seq 100); do
                [ "$(grep -c "cleaned up sandbox [0-9a-f]* left by nsboxd $old" "$d/log2")" -ge 20 ] && break
                sleep 0.1
        done
        for id in $ids; do
                grep -q "cleaned up sandbox $id left by nsboxd $old" "$d/log2" || fail "no 'cleaned up sandbox $id left by nsboxd $old' in the log: $(tail -n 5 "$d/log2")"
        done
        assert_eq "" "$(find "$d/d.sock.state" -mindepth 1 2> /dev/null)" "the state directory after the restart"
        for cg in $cgs; do
                [ "$cg" = null ] || [ ! -e "$cg" ] || fail "cgroup $cg of the killed nsboxd left after the restart"
        done
        assert_eq "" "$(cgroups_of "$old" "${cgs%% *}")" "cgroups sb-$old-* left after the restart"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | jget '[s["id"] for s in d]')" "nsbox ls after the restart"
        # the store survived: the snapshot is there, and one can start on it
        assert_eq '["before-kill"]' "$(rpc "$NSBOX_SOCKET" snapshot_list | jget '[s["name"] for s in d["result"]["snapshots"]]')" "snapshots after the restart"
        id=$("$NSBOX" create --from before-kill 2>&1) || fail "nsbox create --from before-kill after the restart: $id"
        assert_status 0 "$NSBOX" exec "$id" -- cat /workspace/kept
        assert_eq kept "$OUT" "a file of the snapshot taken before kill -9"
        id=$("$NSBOX" create 2>&1) || fail "nsbox create after the restart: $id"
        assert_status 0 "$NSBOX" exec "$id" -- echo new
        assert_eq new "$OUT" "exec in a sandbox of the new nsboxd"
        # shellcheck disable=SC2046
        assert_status 0 "$NSBOX" rm $("$NSBOX" ls --json | jget '" ".join(s["id"] for s in d)')
        assert_eq before-kill "$(rpc "$NSBOX_SOCKET" snapshot_delete '{"name": "before-kill"}' | jget 'd["result"]["deleted"]')" "snapshot_delete"
}

# The keeper a stopping nsboxd with on_stop "keep" handed its sandboxes to, from its LOG (waits up
# to 10 s for the line); added to what cleanup stops.
keeper_of() { # LOG
        local i k
        for i in $(seq 100); do
                k=$(sed -n 's/.*sandboxes kept for the next nsboxd by keeper \([0-9]*\) .*/\1/p' "$1" | tail -n 1)
                [ -n "$k" ] && break
                sleep 0.1
        done
        [ -n "$k" ] || fail "no 'sandboxes kept ... by keeper' in the log: $(tail -n 5 "$1")"
        MY_PIDS="$MY_PIDS $k"
        echo "$k"
}

# The agent pid of each sandbox, from the state directory of the daemon in DIR.
agent_pids() { # DIR
        cat "$1"/d.sock.state/*.json 2> /dev/null | python3 -c 'import json, sys
for l in sys.stdin.read().replace("}{", "}\n{").splitlines():
    print(json.loads(l)["pid"])'
}

test_sigterm_with_on_stop_keep_then_the_next_nsboxd_adopts() {
        trap cleanup EXIT
        local d conf ids old keeper agents left cg kp
        d=$(new_dir)
        conf='{"on_stop": "keep", "keep_timeout": 120, "templates": {"default": {"create": {}, "pool": 1}}}'
        start_daemon "$d" "$conf"
        old=$DPID
        wait_ready default 1
        # 20 sandboxes of a client: labels, a file, a process in the background (its pid kept),
        # one paused, one with a 10 s timeout
        ids=$(py 'c = Conn()
reqs = [c.send("create", {"template": "default", "labels": {"thread": "t%d" % i}}) for i in range(19)]
ids = [ok(c.reply(r), "create")["id"] for r in reqs]
ids.append(c.ok("create", {"labels": {"thread": "t19"}, "timeout": 10})["id"])
for i, sid in enumerate(ids):
    c.ok("call", sh(sid, "echo file-%d > /workspace/kept; (while :; do sleep 1; done) > /dev/null 2>&1 & echo $! > /tmp/loop" % i))
if listed(c)[ids[1]]["cgroup"]:  # pausing needs one
    c.ok("pause", {"sandbox": ids[1]})
print(" ".join(ids))' 2>&1) || fail "20 sandboxes: $ids"
        cg=$(rpc "$NSBOX_SOCKET" list | jget 'd["result"]["sandboxes"][0]["cgroup"] or "null"')
        wait_ready default 1
        stop_daemon
        keeper=$(keeper_of "$d/log")
        pid_alive "$keeper" || fail "keeper $keeper is not running after nsboxd stopped: $(tail -n 5 "$d/log")"
        assert_eq nsboxd-keeper "$(cat "/proc/$keeper/comm")" "the keeper's name"
        for kp in $agents; do pid_alive "$kp" || fail "agent $kp died with nsboxd"; done
        grep -q "20 sandboxes kept for the next nsboxd by keeper $keeper" "$d/log" || fail "no '20 sandboxes kept' in the log: $(grep kept "$d/log" | tail -n 3)"
        # the pool's is not kept: nobody had it
        grep -q "pooled sandbox [0-9a-f]* of template 'default' removed: was stopped with nsboxd" "$d/log" ||
                fail "the pooled sandbox was not removed: $(grep pooled "$d/log" | tail -n 2)"
        assert_eq "$(printf '%s.json\n' $ids | sort)" "$(ls "$d/d.sock.state" | grep json | sort)" "state files of the kept sandboxes"
        agents=$(agent_pids "$d")
        assert_eq 20 "$(printf '%s\n' $agents | grep -c .)" "agents of the kept sandboxes"
        # the next nsboxd takes them all: the same ids, labels, states, files and processes
        start_daemon "$d" "$conf" "$d/log2"
        left=$(wait_pids_gone 10 "$keeper") || fail "keeper $keeper still runs after the hand-over"
        assert_eq 20 "$(grep -c "sandbox [0-9a-f]* (uid $(id -u)) adopted from the previous nsboxd" "$d/log2")" "sandboxes adopted (log)"
        grep -q "20 sandboxes adopted, 0 of a previous nsboxd cleaned up" "$d/log2" || fail "the listening line: $(grep listening "$d/log2")"
        OUT=$(py 'c = Conn()
ids = sys.argv[1].split()
paused = sys.argv[2] != "null"
l = listed(c)
check(sorted(l) == sorted(ids), "listed after the restart: %s, not %s" % (sorted(l), sorted(ids)))
for i, sid in enumerate(ids):
    check(l[sid]["labels"] == {"thread": "t%d" % i}, "labels of %s: %s" % (sid, l[sid]["labels"]))
    check(l[sid]["state"] == ("paused" if i == 1 and paused else "running"), "state of %s: %s" % (sid, l[sid]["state"]))
    check(l[sid]["cgroup"] == (l[sid]["cgroup"] and sys.argv[2].rsplit("/", 1)[0] + "/" + l[sid]["cgroup"].rsplit("/", 1)[1]),
          "cgroup of %s: %s" % (sid, l[sid]["cgroup"]))
# get_or_create finds them again by label
g = c.ok("get_or_create", {"labels": {"thread": "t7"}})
check(g["id"] == ids[7] and g["created"] is False, "get_or_create thread=t7: %s" % json.dumps(g))
if paused:
    c.ok("resume", {"sandbox": ids[1]})
for i, sid in enumerate(ids):
    r = c.ok("call", sh(sid, "cat /workspace/kept; kill -0 $(cat /tmp/loop) && echo loop-alive"))
    check(r["stdout"] == "file-%d\nloop-alive\n" % i, "sandbox %d after the restart: %s" % (i, json.dumps(r)))
# snapshots and resets work on them as before
c.ok("snapshot", {"sandbox": ids[2], "name": "adopted-snap"})
c.ok("call", sh(ids[2], "echo changed > /workspace/kept"))
c.ok("reset", {"sandbox": ids[2], "snapshot": "adopted-snap"})
r = c.ok("call", sh(ids[2], "cat /workspace/kept"))
check(r["stdout"] == "file-2\n", "reset to a snapshot of an adopted sandbox: %s" % json.dumps(r))
# the timeout it was made with still runs: 10 s from its creation
check(wait_for(lambda: ids[19] not in listed(c), 15), "the sandbox with a 10 s timeout is still there")
print("ok")' "$ids" "$cg" 2>&1) || fail "adopted sandboxes: $OUT"
        grep -q "sandbox ${ids##* } expired (timeout): destroyed" "$d/log2" || fail "no 'expired (timeout)' of the adopted sandbox: $(tail -n 3 "$d/log2")"
        # shellcheck disable=SC2046
        assert_status 0 "$NSBOX" rm $("$NSBOX" ls --json | jget '" ".join(s["id"] for s in d)')
        assert_eq "" "$(rpc "$NSBOX_SOCKET" snapshot_delete '{"name": "adopted-snap"}' | jget 'd.get("error") or ""')" "snapshot_delete"
        # shellcheck disable=SC2086
        left=$(wait_pids_gone 10 $agents) || fail "agents left after rm: $left"
        assert_eq "" "$(cgroups_of "$old" "$cg")" "cgroups of the first nsboxd left"
        # nothing to keep (its pool's is not kept): no keeper, and nothing left
        stop_daemon
        assert_eq "" "$(cgroups_of "$DPID" "$cg")" "cgroups of the second nsboxd left"
        assert_eq "" "$(find "$d/d.sock.state" -mindepth 1 2> /dev/null)" "the state directory at the end"
        ! grep -q "kept for the next nsboxd" <(sed -n '/adopted from/,$p' "$d/log2") || fail "a keeper for no sandbox: $(grep kept "$d/log2")"
}

test_kept_sandboxes_nobody_takes_are_destroyed_after_keep_timeout() {
        trap cleanup EXIT
        local d ids keeper agents cg left
        d=$(new_dir)
        start_daemon "$d" '{"on_stop": "keep", "keep_timeout": 2}'
        ids=$(py 'c = Conn()
ids = [c.ok("create", {})["id"] for i in range(3)]
for sid in ids:
    c.ok("call", sh(sid, "sleep 1000", background=True))
print(" ".join(ids))' 2>&1) || fail "3 sandboxes: $ids"
        cg=$(rpc "$NSBOX_SOCKET" list | jget 'd["result"]["sandboxes"][0]["cgroup"] or "null"')
        agents=$(agent_pids "$d")
        stop_daemon
        keeper=$(keeper_of "$d/log")
        # shellcheck disable=SC2086
        left=$(wait_pids_gone 20 "$keeper" $agents) || fail "still running 20 s after a keep_timeout of 2 s: $left"
        assert_eq 3 "$(grep -c "keeper: sandbox [0-9a-f]* destroyed: no nsboxd took it over in time" "$d/log")" "sandboxes the keeper destroyed (log)"
        assert_eq "" "$(find "$d/d.sock.state" -mindepth 1 2> /dev/null)" "the state directory after the keeper gave up"
        [ "$cg" = null ] || assert_eq "" "$(find "$(dirname "$cg")" -mindepth 1 -maxdepth 1 -name "sb-*-$(echo "$ids" | cut -c1-32)" 2> /dev/null)" "cgroups left by the keeper"
        # a next nsboxd starts clean
        start_daemon "$d" '{"on_stop": "keep", "keep_timeout": 2}' "$d/log2"
        grep -q "0 sandboxes adopted, 0 of a previous nsboxd cleaned up" "$d/log2" || fail "the listening line: $(grep listening "$d/log2")"
}

test_kill9_of_the_keeper_ends_its_sandboxes_and_the_next_nsboxd_cleans_up() {
        trap cleanup EXIT
        local d ids keeper agents cg left id
        d=$(new_dir)
        start_daemon "$d" '{"on_stop": "keep"}'
        ids=$(py 'c = Conn()
print(" ".join(c.ok("create", {})["id"] for i in range(3)))' 2>&1) || fail "3 sandboxes: $ids"
        cg=$(rpc "$NSBOX_SOCKET" list | jget 'd["result"]["sandboxes"][0]["cgroup"] or "null"')
        agents=$(agent_pids "$d")
        stop_daemon
        keeper=$(keeper_of "$d/log")
        kill -KILL "$keeper"
        # their channels closed with the keeper: the agents exit by themselves
        # shellcheck disable=SC2086
        left=$(wait_pids_gone 10 "$keeper" $agents) || fail "still running 10 s after kill -9 of the keeper: $left"
        start_daemon "$d" '{"on_stop": "keep"}' "$d/log2"
        for id in $ids; do
                grep -q "cleaned up sandbox $id left by nsboxd" "$d/log2" || fail "no 'cleaned up sandbox $id' in the log: $(tail -n 5 "$d/log2")"
        done
        assert_eq "" "$(find "$d/d.sock.state" -mindepth 1 2> /dev/null)" "the state directory after the restart"
        [ "$cg" = null ] || assert_eq "" "$(find "$(dirname "$cg")" -mindepth 1 -maxdepth 1 -name "sb-*-${ids%% *}" 2> /dev/null)" "cgroup of a sandbox of the killed keeper"
        assert_status 0 "$NSBOX" ls --json
        assert_eq "[]" "$(printf '%s' "$OUT" | jget '[s["id"] for s in d]')" "nsbox ls after the restart"
}

test_capacity_is_a_clear_error_and_others_unaffected() {
        trap cleanup EXIT
        local d
        # max_sandboxes
        d=$(new_dir)
        start_daemon "$d" '{"max_sandboxes": 3}'
        OUT=$(py 'c = Conn()
ids = [c.ok("create", {})["id"] for i in range(3)]
t = time.monotonic()
e = c.call("create", {})
dt = time.monotonic() - t
check(code(e) == "capacity", "a 4th create with max_sandboxes 3: %s" % json.dumps(e))
check("max_sandboxes" in e["error"]["message"] and "\n" not in e["error"]["message"], "message: %s" % e["error"]["message"])
check(dt < 5, "the 4th create failed after %.1f s" % dt)
for i in ids:
    r = c.ok("call", sh(i, "echo alive"))
    check(r["stdout"] == "alive\n", "exec in %s after a refused create: %s" % (i, json.dumps(r)))
# wait: the create waits for room, which a destroy on another connection makes after 1 s
w = Conn()
t = time.monotonic()
r = w.send("create", {"wait": 10})
time.sleep(1)
Conn().ok("destroy", {"sandbox": ids.pop()})
s = ok(w.reply(r), "create with wait 10 while another client destroys one")
dt = time.monotonic() - t
check(0.8 < dt < 9, "create with wait 10 answered after %.1f s" % dt)
ids.append(s["id"])
# wait 1, and nothing is freed
t = time.monotonic()
e = c.call("create", {"wait": 1})
dt = time.monotonic() - t
check(code(e) == "capacity", "create with wait 1 at capacity: %s" % json.dumps(e))
check(0.8 < dt < 5, "create with wait 1 at capacity failed after %.1f s" % dt)
check(sorted(listed(c)) == sorted(ids), "sandboxes listed: %s, made: %s" % (sorted(listed(c)), sorted(ids)))
for i in ids:
    c.ok("call", sh(i, "true"))
print("ok")' 2>&1) || fail "max_sandboxes 3: $OUT"
        stop_daemon
        # max_per_uid: a pool is nobody's, and does not count
        d=$(new_dir)
        start_daemon "$d" '{"max_per_uid": 2, "templates": {"p": {"create": {}, "pool": 2}}}'
        wait_ready p 2
        OUT=$(py 'c = Conn()
a = c.ok("create", {"template": "p"})
b = c.ok("create", {})
e = c.call("create", {"template": "p"})
check(code(e) == "capacity" and "max_per_uid" in e["error"]["message"], "a 3rd create with max_per_uid 2: %s" % json.dumps(e))
check(c.ok("stats")["capacity"]["max_per_uid"] == 2, "stats capacity: %s" % json.dumps(c.ok("stats")["capacity"]))
c.ok("destroy", {"sandbox": a["id"]})
c.ok("create", {})
print("ok")' 2>&1) || fail "max_per_uid 2: $OUT"
        stop_daemon
        # memory_budget: limits add up; a sandbox naming none gets default_memory
        d=$(new_dir)
        start_daemon "$d" '{"memory_budget": "1G", "default_memory": "400M"}'
        OUT=$(py 'c = Conn()
for i in range(2):
    s = c.ok("create", {})
    check(s["limits"].get("memory") == 400 << 20, "memory limit of a sandbox naming none: %s" % json.dumps(s["limits"]))
e = c.call("create", {})
check(code(e) == "capacity" and "memory_budget" in e["error"]["message"], "a 3rd create of 400M with a budget of 1G: %s" % json.dumps(e))
e = c.call("create", {"memory": "300M", "limits": "best-effort"})  # counted, held or not
check(code(e) == "capacity", "a create of 300M with 224M left: %s" % json.dumps(e))
s = c.ok("create", {"memory": "100M", "limits": "best-effort"})
check(s["limits"].get("memory") == 100 << 20, "memory limit: %s" % json.dumps(s["limits"]))
m = c.ok("stats")["memory"]
check(m["budget"] == 1 << 30 and m["committed"] == 900 << 20, "stats memory: %s" % json.dumps(m))
print("ok")' 2>&1) || fail "memory_budget 1G: $OUT"
}

test_clients_of_another_uid_see_nothing_of_others() {
        trap cleanup EXIT
        if [ "$TEST_AS" = user ]; then
                # only a root nsboxd serves other uids (and then refuses them host paths): a
                # user's would let them act as that user
                local du
                du=$(new_dir)
                printf '{"clients": {"uids": [65534]}}\n' > "$du/config.json"
                assert_status 2 "$NSBOXD" --config "$du/config.json" --socket "$du/d.sock"
                config_error "$du/config.json" "clients in a user nsboxd" "key 'clients': only a root nsboxd serves other users"
                [ ! -e "$du/d.sock" ] || fail "a socket was created for a refused configuration"
                return 0
        fi
        local d user=${NSBOX_TEST_USER:-nsboxtest} uid ids a b pol
        uid=$(id -u "$user" 2> /dev/null) || skip "no user $user"
        d=$(new_dir)
        chmod 0711 "$SESSION_DIR" "$d"
        start_daemon "$d" "{\"clients\": {\"uids\": [$uid]}}"
        assert_eq 666 "$(stat -c %a "$d/d.sock")" "mode of the socket with clients"
        # (with a PATH of the system's: root's may lead to programs of root's home)
        as_test_user() { (cd / && PATH=/usr/local/bin:/usr/bin:/bin setpriv --reuid="$user" --regid="$user" --init-groups "$@"); }
        a=$(py 'print(Conn().ok("create", {"labels": {"owner": "root"}})["id"])' 2>&1) || fail "root's create: $a"
        b=$(as_test_user python3 -c "$PYLIB"'print(Conn().ok("create", {"labels": {"owner": "user"}})["id"])' 2>&1) || fail "$user's create: $b"
        pol=$(cd "$(dirname "$NSBOX")/../policy" 2> /dev/null && pwd)/default.json
        [ -f "$pol" ] || pol=""
        OUT=$(as_test_user python3 -c "$PYLIB"'
a, b, pol = sys.argv[1:4]
c = Conn()
check(list(listed(c)) == [b], "the user lists %s, not only %s" % (sorted(listed(c)), b))
for m, p in (("call", sh(a, "echo mine")), ("destroy", {"sandbox": a}), ("set_timeout", {"sandbox": a, "timeout": 1}),
             ("pause", {"sandbox": a}), ("reset", {"sandbox": a}), ("call", sh(a[:8], "echo mine"))):
    e = c.call(m, p)
    check(code(e) == "not_found", "%s on root sandbox by uid %d: %s" % (m, os.getuid(), json.dumps(e)))
check(list(listed(c, labels={"owner": "root"})) == [], "list by the labels of root sandbox")
g = c.ok("get_or_create", {"labels": {"owner": "root"}})
check(g["created"] is True and g["id"] != a, "get_or_create with the labels of root sandbox: %s" % json.dumps(g))
bad = [{"bind": ["/etc:/mnt/etc"]}, {"record": "/tmp/nsbox-pool-stolen.jsonl"}, {"rootfs": "/"}, {"repo": "/tmp"}]
if pol:
    bad.append({"policy": pol})
for p in bad:
    e = c.call("create", p)
    check(code(e) == "invalid_argument", "create %s by uid %d: %s" % (json.dumps(p), os.getuid(), json.dumps(e)))
    msg = e["error"]["message"]
    key = list(p)[0]
    check(key in msg and "uid %d" % os.getuid() in msg and "root nsboxd" in msg and "\n" not in msg,
          "create %s: the message does not name %s, uid %d and the root nsboxd in one line: %s" % (json.dumps(p), key, os.getuid(), json.dumps(msg)))
check(not os.path.exists("/tmp/nsbox-pool-stolen.jsonl"), "a refused record file was created")
c.ok("destroy", {"sandbox": g["id"]})
print("ok")' "$a" "$b" "$pol" 2>&1) || fail "uid $uid: $OUT"
        assert_status 0 as_test_user "$NSBOX" ls --json
        assert_eq "[\"$b\"]" "$(printf '%s' "$OUT" | jget '[s["id"] for s in d]')" "nsbox ls by $user"
        # root sees and reaches both
        assert_eq "$(printf '%s\n' "$a" "$b" | sort | tr '\n' ' ')" "$(rpc "$NSBOX_SOCKET" list | jget '" ".join(sorted(s["id"] for s in d["result"]["sandboxes"])) + " "')" "root's list"
        assert_status 0 "$NSBOX" exec "$b" -- echo root-in-b
        assert_eq root-in-b "$OUT" "root's exec in the sandbox of $user"
        # each sandbox has a host id range of its own
        local pa pb
        pa=$(rpc "$NSBOX_SOCKET" list | jget "[s['pid'] for s in d['result']['sandboxes'] if s['id'] == '$a'][0]")
        pb=$(rpc "$NSBOX_SOCKET" list | jget "[s['pid'] for s in d['result']['sandboxes'] if s['id'] == '$b'][0]")
        assert_ne "$(awk '/^Uid:/ {print $2}' "/proc/$pa/status")" "$(awk '/^Uid:/ {print $2}' "/proc/$pb/status")" "host uid of the agents of two sandboxes"
        # a uid that is not listed gets no answer
        OUT=$(cd / && PATH=/usr/local/bin:/usr/bin:/bin setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c "$PYLIB"'
try:
    print("answered: %s" % json.dumps(Conn(sys.argv[1], 10).call("list")))
except (OSError, EOFError) as e:
    print("NO REPLY: %s" % e)' "$NSBOX_SOCKET" 2>&1)
        assert_contains "$OUT" "NO REPLY" "a client of uid 65534"
        grep -q "refused a client of uid 65534" "$d/log" || fail "no 'refused a client of uid 65534' in the log: $(tail -n 3 "$d/log")"
        assert_status 0 "$NSBOX" rm "$a" "$b"
}

# The error in $OUT about config file F (holding CONF) is one line "nsboxd: F: ..." naming each
# of the ;-separated NEEDLES.
config_error() { # F CONF NEEDLES
        local needle
        assert_eq 1 "$(printf '%s\n' "$OUT" | grep -c .)" "lines of error for $2: $OUT"
        case $OUT in "nsboxd: $1: "*) ;; *) fail "error for $2 does not start with 'nsboxd: $1: ': $OUT" ;; esac
        local -a needles
        IFS=';' read -ra needles <<< "$3"
        for needle in "${needles[@]}"; do assert_contains "$OUT" "$needle" "error for $2"; done
}

test_bad_config_is_one_line_and_nothing_starts() {
        trap cleanup EXIT
        local d f i conf needles
        d=$(new_dir)
        # each bad config, then what its error must name (;-separated)
        local -a bad=(
                '{"max_sandbox": 3}' 'unknown key;max_sandbox'
                '{"templates": {"x": {"create": {}, "size": 3}}}' 'unknown key;size'
                '{"templates": {"x": {"create": {}, "warmup": "true"}}}' 'templates.x.warmup;array'
                '{"templates": {"x": {"create": {}, "warmup": ["true", ""]}}}' 'templates.x.warmup;entry 1'
                '{"templates": {"default": {"create": {}, "pool": -1}}}' 'pool'
                '{"max_sandboxes": 0}' 'max_sandboxes'
                '{"max_sandboxes": 5000}' 'max_sandboxes'
                '{"max_per_uid": "many"}' 'max_per_uid'
                '{"on_expiry": "explode"}' 'on_expiry'
                '{"on_stop": "maybe"}' 'on_stop;"keep"'
                '{"on_stop": "keep", "keep_timeout": 0}' 'keep_timeout'
                '{"keep_timeout": "long"}' 'keep_timeout'
                '{"idle_timeout": -1}' 'idle_timeout'
                '{"memory_budget": "lots"}' 'memory_budget'
                '{"templates": {"default": {"create": {"memory": "lots"}}}}' 'memory'
                '{"templates": {"bad name!": {"create": {}}}}' 'bad name!'
                '{"templates": {"t": {"create": {"policy": "x.json"}}}}' "template 't';policy 'x.json';neither a policy name"
                '{"clients": {"uids": "everyone"}}' 'uids'
                '{"max_sandboxes": 3' ''
                '[1, 2]' ''
        )
        for ((i = 0; i < ${#bad[@]}; i += 2)); do
                conf=${bad[i]} needles=${bad[i + 1]}
                f="$d/bad$i.json"
                printf '%s\n' "$conf" > "$f"
                assert_status 2 timeout 10 "$NSBOXD" --config "$f" --socket "$d/bad.sock"
                config_error "$f" "$conf" "$needles"
                [ ! -e "$d/bad.sock" ] || fail "nsboxd with $conf made its socket"
                assert_status 2 timeout 10 "$NSBOXD" --check-config --config "$f"
                config_error "$f" "$conf" "$needles"
        done
        # a --config that does not exist
        assert_status 2 timeout 10 "$NSBOXD" --config "$d/missing.json" --socket "$d/bad.sock"
        config_error "$d/missing.json" "a missing config" ""
        [ ! -e "$d/bad.sock" ] || fail "nsboxd with a missing config made its socket"
        # a good one, with every key
        f="$d/good.json"
        printf '%s\n' '{"max_sandboxes": 64, "max_per_uid": 16, "memory_budget": "8G", "default_memory": "256M",
                "timeout": 3600, "idle_timeout": 600, "on_expiry": "pause", "drain_timeout": 5,
                '"$([ "$TEST_AS" = root ] && echo '"clients": {"uids": [4242], "groups": []},')"'
                "templates": {"default": {"create": {"memory": "256M", "env": {"LANG": "C.UTF-8"}, "labels": {"kind": "std"}}, "pool": 2, "max": 8},
                              "py.3-x_Y": {"create": {"policy": "default", "timeout": 60}}}}' > "$f"
        assert_status 0 timeout 10 "$NSBOXD" --check-config --config "$f"
        # (a host without the memory controller adds a warning about the template's memory)
        assert_contains "$OUT" "nsboxd: $f: ok" "nsboxd --check-config with a good config"
        [ -z "$(pgrep -u "$(id -u)" -f "$d/")" ] || fail "processes left by the checks: $(pgrep -af "$d/")"
}

# A template whose rootfs has a file where the sandbox mounts /tmp: it prepares, then fails to
# start.  --check-config starts one of each template and names it; a daemon logs each failed
# pooled start at warning level with the reason, and stats shows the last one.
test_a_template_that_cannot_start_is_named_by_check_config_and_stats() {
        trap cleanup EXIT
        local d f
        d=$(new_dir)
        mkdir "$d/root" && touch "$d/root/tmp"
        f="$d/broken.json"
        printf '{"templates": {"ok": {"create": {}}, "broken": {"create": {"rootfs": "%s"}, "pool": 1}}}\n' "$d/root" > "$f"
        assert_status 2 timeout 60 "$NSBOXD" --check-config --config "$f"
        assert_eq 1 "$(printf '%s\n' "$OUT" | wc -l)" "one line: $OUT"
        assert_contains "$OUT" "nsboxd: $f: template 'broken' does not start: "
        assert_contains "$OUT" "'/tmp' in the sandbox root is not a directory"
        [ -z "$(pgrep -u "$(id -u)" -f "$d/")" ] || fail "processes left by the check: $(pgrep -af "$d/")"
        start_daemon "$d" "$(cat "$f")"
        for _ in $(seq 100); do
                grep -q 'level=warning event=pool.start_failed.*broken.*is not a directory' "$d/log" && break
                sleep 0.1
        done
        grep -q 'level=warning event=pool.start_failed.*broken.*is not a directory' "$d/log" || fail "no warning with the reason: $(tail -n 5 "$d/log")"
        assert_status 0 "$NSBOX" stats
        assert_contains "$OUT" "last start failure"
        assert_contains "$OUT" "is not a directory"
        assert_status 0 "$NSBOX" stats --json
        printf '%s' "$OUT" | python3 -c 'import json, sys
f = json.load(sys.stdin)["templates"]["broken"]["last_start_failure"]
assert "is not a directory" in f["reason"] and f["count"] >= 1 and f["time"] > 0, f' || fail "stats --json: $OUT"
        printf '%s' "$OUT" | python3 -c 'import json, sys; assert "last_start_failure" not in json.load(sys.stdin)["templates"]["ok"]' ||
                fail "a template that starts has a last_start_failure: $OUT"
        stop_daemon
}

test_sigterm_drains_calls_in_flight() {
        trap cleanup EXIT
        local d mounts_before pids cg left st
        d=$(new_dir)
        mounts_before=$(grep -c . /proc/self/mountinfo)
        start_daemon "$d" '{"drain_timeout": 10}'
        local id; id=$(py 'print(Conn().ok("create", {})["id"])' 2>&1) || fail "create: $id"
        cg=$(rpc "$NSBOX_SOCKET" list | jget 'd["result"]["sandboxes"][0]["cgroup"] or "null"')
        pids=$(descendants "$DPID")
        OUT=$(py 'c = Conn()
sid, pid = sys.argv[1], int(sys.argv[2])
r = c.send("call", sh(sid, "sleep 2; echo done"))
time.sleep(0.5)
os.kill(pid, signal.SIGTERM)
time.sleep(0.3)
# new work on a connection already open: refused
for m, p in (("call", sh(sid, "echo late")), ("create", {})):
    e = c.call(m, p)
    check(code(e) == "unavailable", "%s during the drain: %s" % (m, json.dumps(e)))
# a new connection: refused, or its request is
try:
    x = Conn(None, 5).call("create", {})
    got = "error %s" % code(x) if "error" in x else "answered"
except (OSError, EOFError) as err:
    got = "refused"
check(got in ("refused", "error unavailable"), "a create on a new connection during the drain: %s" % got)
# the call in flight ends as it would have
res = ok(c.reply(r), "the exec in flight at SIGTERM")
check(res["stdout"] == "done\n" and res["exit_code"] == 0, "the exec in flight at SIGTERM: %s" % json.dumps(res))
print("ok")' "$id" "$DPID" 2>&1) || fail "draining: $OUT"
        left=$(wait_pids_gone 30 "$DPID") || fail "nsboxd still runs 30 s after SIGTERM"
        wait "$DPID"
        st=$?
        MY_DAEMONS=""
        assert_eq 0 "$st" "exit status of nsboxd after draining"
        # shellcheck disable=SC2086
        left=$(wait_pids_gone 5 $pids) || fail "processes of the sandbox still running after nsboxd exited: $left"
        [ "$cg" = null ] || [ ! -e "$cg" ] || fail "cgroup $cg left after nsboxd exited"
        [ ! -e "$d/d.sock" ] || fail "nsboxd left its socket"
        assert_eq "" "$(find "$d/d.sock.state" -mindepth 1 2> /dev/null)" "the state directory after nsboxd exited"
        assert_eq "$mounts_before" "$(grep -c . /proc/self/mountinfo)" "host mount count"
}

test_stats_reports_pool_and_latency() {
        trap cleanup EXIT
        local d
        d=$(new_dir)
        start_daemon "$d" '{"max_sandboxes": 50, "max_per_uid": 20, "templates": {"default": {"create": {}, "pool": 2}}}'
        wait_ready default 2
        OUT=$(py 'c = Conn()
a = c.ok("create", {"template": "default"})
b = c.ok("create", {"labels": {"k": "v"}})
n = c.ok("create", {"policy": "default"})
for s, t, p in ((a, "default", True), (b, "default", True), (n, None, False)):
    check(s.get("template") == t and s.get("pooled") is p, "create: template %s pooled %s, not %s %s" % (json.dumps(s.get("template")), json.dumps(s.get("pooled")), t, p))
check(b["labels"] == {"k": "v"}, "labels of a pooled sandbox: %s" % json.dumps(b["labels"]))
l = listed(c)
check(l[a["id"]]["template"] == "default" and l[n["id"]]["template"] is None, "template in list")
# once the pool is full again, nothing moves
check(wait_for(lambda: c.ok("stats")["templates"]["default"]["ready"] == 2, 20), "pool not refilled")
st = c.ok("stats")
for k in ("sandboxes", "templates", "acquire_ms", "memory", "capacity", "uptime_s", "clients"):
    check(k in st, "stats has no %s: %s" % (k, json.dumps(st)))
sb, t, acq = st["sandboxes"], st["templates"]["default"], st["acquire_ms"]
check(set(t) >= {"pool", "ready", "starting", "live", "hits", "misses"}, "templates.default: %s" % json.dumps(t))
check(t["pool"] == 2 and t["hits"] == 2 and t["misses"] == 0, "templates.default: %s" % json.dumps(t))
check(set(sb) >= {"total", "starting", "running", "paused", "pooled"}, "sandboxes: %s" % json.dumps(sb))
# total: the sandboxes handed out (those list shows), pooled: those waiting in pools
check(sb["pooled"] == 2 and sb["total"] == len(listed(c)) == 3 and sb["running"] == 3, "sandboxes %s with 3 listed" % json.dumps(sb))
check(acq["count"] == 3, "acquire_ms.count %s after 3 creates" % acq["count"])
check(0 <= acq["p50"] <= acq["p90"] <= acq["p99"] <= acq["max"], "acquire_ms: %s" % json.dumps(acq))
# free: what a create may still take; the 2 pooled count, the 3 handed out do not
check(st["capacity"] == {"max_sandboxes": 50, "max_per_uid": 20, "free": 47}, "capacity: %s" % json.dumps(st["capacity"]))
check(st["uptime_s"] >= 0 and st["clients"] >= 1, "uptime_s %s, clients %s" % (st["uptime_s"], st["clients"]))
check(set(st["memory"]) >= {"budget", "committed", "current_bytes"}, "memory: %s" % json.dumps(st["memory"]))
print("ok")' 2>&1) || fail "stats: $OUT"
        assert_status 0 "$NSBOX" stats --json
        assert_eq "2 3" "$(printf '%s' "$OUT" | jget '"%s %s" % (d["templates"]["default"]["pool"], d["acquire_ms"]["count"])')" "nsbox stats --json"
        assert_status 0 "$NSBOX" stats
        assert_contains "$OUT" "default" "nsbox stats"
}

# Last: no nsboxd of this file's is left (every one has this file's SESSION_DIR in its environment).
test_zz_no_daemon_left() {
        assert_no_nsboxd_of "$SESSION_DIR"
}

run_tests
st=$?
rm -rf "$SESSION_DIR"
exit $st
