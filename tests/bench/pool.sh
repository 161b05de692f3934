#!/usr/bin/env bash
# Warm pools (part of make bench): what a pooled sandbox saves against a cold create, what nsboxd
# sustains under create/destroy churn (and whether it leaks), and what an idle sandbox costs in
# memory.  As whoever runs it (root or not), against an nsboxd of its own on a private socket.
#   tests/bench/pool.sh [N [CHURN_SECONDS [K]]]
#     N              acquires per latency run (default 200)
#     CHURN_SECONDS  seconds of churn (default 60; also from the environment)
#     K              idle sandboxes for the memory figures (default 100)
#     MAXLIVE=1      also create sandboxes until one fails (or 4096), then destroy them all (slow)
#   (NSBOXD: the nsboxd binary, default build/nsboxd; NSBOX_POLICY_PATH: default policy/)
# Prints a table, then one JSON line with every figure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$(dirname "$here")")
NSBOXD=${NSBOXD:-${NSBOX_BUILD:-$src/build}/nsboxd}
export NSBOX_POLICY_PATH=${NSBOX_POLICY_PATH:-$src/policy}
N=${1:-200}
CHURN=${2:-${CHURN_SECONDS:-60}}
K=${3:-100}
MAXLIVE=${MAXLIVE:-0}
POOL=8
[ -x "$NSBOXD" ] || { echo "bench: $NSBOXD is missing (make)"; exit 1; }
dir=$(mktemp -d /tmp/nsbox-bench-pool.XXXXXX)
started=$(date +%s%N)

# Stop an nsboxd of ours: SIGTERM (it destroys its sandboxes), SIGKILL if it is still there after
# 15 s; then the cgroups a killed one would have left (sb-PID-*, under the parent it used).
daemon_pid=""
stop_daemon() {
        local pid=$1
        cat /proc/"$pid"/task/*/children > "$dir/pids.$pid" 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 150); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
                echo "bench: nsboxd $pid did not stop on SIGTERM: killed" >&2
                kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
        if [ -s "$dir/cgparent" ]; then
                local cg
                for cg in "$(cat "$dir/cgparent")"/sb-"$pid"-*; do
                        [ -d "$cg" ] || continue
                        echo 1 > "$cg/cgroup.kill" 2>/dev/null || true
                        rmdir "$cg" 2>/dev/null || true
                done
        fi
}
cleanup() {
        local st=$?
        [ -z "$daemon_pid" ] || stop_daemon "$daemon_pid"
        if [ "$st" != 0 ] && [ -s "$dir/nsboxd.log" ]; then
                echo "bench: the end of nsboxd's log:" >&2
                tail -n 20 "$dir/nsboxd.log" >&2
        fi
        rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_daemon NAME CONFIG-JSON: an nsboxd on $dir/NAME.sock (pid in daemon_pid)
start_daemon() {
        printf '%s\n' "$2" > "$dir/$1.json"
        "$NSBOXD" --config "$dir/$1.json" --socket "$dir/$1.sock" 2>> "$dir/nsboxd.log" &
        daemon_pid=$!
}
# after stop_daemon: the cgroups sb-PID-* it left, and the processes still alive of those that
# were its children when it was stopped
left_after_stop() {
        local pid=$1 cgs=0 procs=0 p ps
        if [ -s "$dir/cgparent" ]; then
                cgs=$(find "$(cat "$dir/cgparent")" -maxdepth 1 -name "sb-$pid-*" | wc -l)
        fi
        while read -r -a ps; do
                for p in "${ps[@]}"; do
                        kill -0 "$p" 2>/dev/null && procs=$((procs + 1))
                done
        done < "$dir/pids.$pid"
        printf '{"cgroups": %s, "processes": %s}\n' "$cgs" "$procs"
}

cat > "$dir/pool.py" <<'PY'
import json, os, socket, statistics, sys, threading, time

def ms(ns):
    return ns / 1e6

def pct(v, q):  # nearest rank
    s = sorted(v)
    return s[max(0, min(len(s) - 1, -(-len(s) * q // 100) - 1))]

def dist(v):
    return {"n": len(v), "median_ms": round(statistics.median(v), 3), "p90_ms": round(pct(v, 90), 3),
            "p99_ms": round(pct(v, 99), 3), "max_ms": round(max(v), 3)}

class Rpc:
    def __init__(self, path):
        for _ in range(1000):
            try:
                self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                time.sleep(0.01)
        else:
            sys.exit("bench: nsboxd does not listen on " + path)
        self.f = self.s.makefile("rb")
        self.id = 0

    def close(self):
        self.f.close()
        self.s.close()

    def try_call(self, method, params=None):
        self.id += 1
        self.s.sendall(json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params or {}}).encode() + b"\n")
        while True:
            line = self.f.readline()
            if not line:
                sys.exit("bench: nsboxd closed the connection (%s)" % method)
            m = json.loads(line)
            if m.get("id") == self.id:
                return m.get("result"), m.get("error")

    def call(self, method, params=None):
        r, e = self.try_call(method, params)
        if e:
            sys.exit("bench: %s %s: %s" % (method, json.dumps(params), json.dumps(e)))
        return r

class Failures:
    # cycles that failed (nsboxd's error), counted and not timed; the first few messages kept
    def __init__(self):
        self.n, self.seen = 0, []

    def add(self, what):
        self.n += 1
        if len(self.seen) < 3 and what not in self.seen:
            self.seen.append(what)

    def json(self):
        return {"n": self.n, "messages": self.seen}

def errtext(step, e):
    return "%s: %s: %s" % (step, (e.get("data") or {}).get("code", e.get("code")), e.get("message"))

def children(pid):
    n = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                n += len(f.read().split())
    except OSError:
        pass
    return n

def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))

def mounts():
    with open("/proc/self/mountinfo") as f:
        return sum(1 for _ in f)

def cgroups(parent, dpid):
    if not parent:
        return None
    return sum(1 for e in os.listdir(parent) if e.startswith("sb-%d-" % dpid))

def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None

def rss_anon_kib(pid):  # readable where smaps_rollup is not (a non-root caller)
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return 0

def mem_available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])

def mem_available_settled(limit=30):
    # MemAvailable once it stops moving (under 1 MiB in a second, or after limit s): the kernel
    # frees the namespaces of destroyed sandboxes late, churn leaves seconds of that behind
    t, prev = time.monotonic(), mem_available_kib()
    while time.monotonic() - t < limit:
        time.sleep(1)
        now = mem_available_kib()
        if abs(now - prev) < 1024:
            return now, round(time.monotonic() - t, 1)
        prev = now
    return prev, round(time.monotonic() - t, 1)

def ppid_map():
    m = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open("/proc/%s/stat" % e) as f:
                    m.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(e))
            except (OSError, IndexError, ValueError):
                pass
    return m

def tree(root, kids):
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out

class Daemon:
    def __init__(self, sock, dpid):
        self.sock, self.dpid = sock, dpid
        self.rpc = Rpc(sock)
        got = self.rpc.call("ping")["pid"]
        if got != dpid:
            sys.exit("bench: %s is answered by nsboxd %d, not ours (%d)" % (sock, got, dpid))
        self.cgparent = None

    def note_cgroup(self, sb):
        if not self.cgparent and sb.get("cgroup"):
            self.cgparent = os.path.dirname(sb["cgroup"])
            with open(os.path.join(os.environ["BENCH_DIR"], "cgparent"), "w") as f:
                f.write(self.cgparent)

    def ready(self):
        return self.rpc.call("stats")["templates"]["default"]["ready"]

    def wait_ready(self, want, limit=120):
        end = time.monotonic() + limit
        while self.ready() < want:
            if time.monotonic() > end:
                sys.exit("bench: the pool did not reach %d ready in %d s" % (want, limit))
            time.sleep(0.002)

    def census(self):
        return {"children": children(self.dpid), "mounts": mounts(), "cgroups": cgroups(self.cgparent, self.dpid), "fds": nfds(self.dpid)}

    def settle(self, base, limit=10):
        # what is left once nsboxd has reaped and removed what it destroyed (up to limit s)
        t = time.monotonic()
        while True:
            now = self.census()
            if all((now[k] or 0) <= (base[k] or 0) for k in ("children", "cgroups", "fds")) or time.monotonic() - t > limit:
                now["settle_s"] = round(time.monotonic() - t, 2)
                return now

def cycle(rpc, params, fails, d=None):
    # create + first exec, timed; destroy, not timed.  -> (total ms, create ms, sandbox), or None
    # when a step failed (counted in fails)
    t0 = time.perf_counter_ns()
    sb, e = rpc.try_call("create", params)
    if e:
        fails.add(errtext("create", e))
        return None
    t1 = time.perf_counter_ns()
    r, e = rpc.try_call("call", {"sandbox": sb["id"], "tool": "exec", "params": {"cmd": ["true"]}})
    t2 = time.perf_counter_ns()
    if d:
        d.note_cgroup(sb)
    if e or r.get("exit_code") != 0:
        fails.add(errtext("exec", e) if e else "exec: %s" % json.dumps(r))
        rpc.try_call("destroy", {"sandbox": sb["id"]})
        return None
    _, e = rpc.try_call("destroy", {"sandbox": sb["id"]})
    if e:
        fails.add(errtext("destroy", e))
        return None
    return ms(t2 - t0), ms(t1 - t0), sb

def phase_pool(sock, dpid, n, pool):
    d = Daemon(sock, dpid)
    res = {}
    for name, paced in (("paced", True), ("back_to_back", False)):
        d.wait_ready(pool)
        st0 = d.rpc.call("stats")["templates"]["default"]
        tot, cre, hits, fails = [], [], 0, Failures()
        for _ in range(n):
            if paced:
                d.wait_ready(1)
            c = cycle(d.rpc, {"template": "default"}, fails, d)
            if c:
                tot.append(c[0])
                cre.append(c[1])
                hits += bool(c[2].get("pooled"))
        if not tot:
            sys.exit("bench: every pooled create failed: %s" % fails.seen)
        st1 = d.rpc.call("stats")["templates"]["default"]
        res[name] = dict(dist(tot), create_median_ms=round(statistics.median(cre), 3), pooled=hits, not_pooled=len(tot) - hits,
                         pooled_fraction=round(hits / len(tot), 3), stats_hits=st1["hits"] - st0["hits"],
                         stats_misses=st1["misses"] - st0["misses"], failed=fails.json())
        print("   pool, %-12s done: median %.2f ms, %d/%d pooled, %d failed" % (name, res[name]["median_ms"], hits, len(tot), fails.n),
              file=sys.stderr)
    d.wait_ready(pool)  # no refill in the background of the cold runs
    tot, cre, fails = [], [], Failures()
    for _ in range(n):
        c = cycle(d.rpc, {"policy": "default"}, fails, d)
        if not c:
            continue
        if c[2].get("pooled") or c[2].get("template") is not None:
            sys.exit("bench: a cold create came from a template: %s" % json.dumps(c[2]))
        tot.append(c[0])
        cre.append(c[1])
    if not tot:
        sys.exit("bench: every cold create failed: %s" % fails.seen)
    res["cold"] = dict(dist(tot), create_median_ms=round(statistics.median(cre), 3), failed=fails.json())
    res["ratio_pool_cold"] = round(res["paced"]["median_ms"] / res["cold"]["median_ms"], 3)
    res["ratio_back_to_back_cold"] = round(res["back_to_back"]["median_ms"] / res["cold"]["median_ms"], 3)
    res["daemon_acquire_ms"] = d.rpc.call("stats")["acquire_ms"]
    # what the pool daemon holds now: its pool and nothing else
    d.wait_ready(pool)
    st = d.rpc.call("stats")
    res["after"] = dict(d.census(), listed=len(d.rpc.call("list")["sandboxes"]), pooled=st["sandboxes"]["pooled"])
    print("   cold              done: median %.2f ms" % res["cold"]["median_ms"], file=sys.stderr)
    return res

def phase_churn(sock, dpid, seconds, k, maxlive):
    d = Daemon(sock, dpid)
    cycle(d.rpc, {"policy": "default"}, Failures(), d)  # the first create opens what nsboxd keeps open
    res = {}
    base = d.settle(d.census())
    # 3. churn: two clients, create + exec true + destroy, for `seconds`
    counts, lats, errs, fails = [0, 0], [[], []], [], Failures()
    end = time.monotonic() + seconds

    def worker(i):
        r = Rpc(sock)
        try:
            while time.monotonic() < end:
                c = cycle(r, {"policy": "default"}, fails)
                if c:
                    lats[i].append(c[0])
                    counts[i] += 1
        except SystemExit as e:
            errs.append(str(e))
        r.close()
    t0 = time.monotonic()
    th = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    el = time.monotonic() - t0
    if errs:
        sys.exit("; ".join(errs))
    after = d.settle(base)
    allv = lats[0] + lats[1]
    if not allv:
        sys.exit("bench: every churn cycle failed: %s" % fails.seen)
    res["churn"] = dict(seconds=round(el, 2), clients=2, sandboxes=sum(counts), per_second=round(sum(counts) / el, 1),
                        failed=fails.json(), cycle=dist(allv), before=base, after=after, listed_after=len(d.rpc.call("list")["sandboxes"]))
    print("   churn             done: %d sandboxes in %.1f s, %d failed" % (sum(counts), el, fails.n), file=sys.stderr)
    # 4. memory of K idle sandboxes
    base = d.settle(base)
    d_pss0 = pss_kib(dpid) or 0
    avail0, wait0 = mem_available_settled()
    ids, fails = [], Failures()
    for _ in range(k):
        sb, e = d.rpc.try_call("create", {"policy": "default"})
        if e:
            fails.add(errtext("create", e))
        else:
            ids.append(sb["id"])
    avail1, wait1 = mem_available_settled()
    listed = d.rpc.call("list")["sandboxes"]
    kids = ppid_map()
    pss, anon, nproc, unread = 0, 0, 0, 0
    for sb in listed:
        for p in tree(sb["pid"], kids):
            v = pss_kib(p)
            nproc += 1
            anon += rss_anon_kib(p) or 0
            if v is None:
                unread += 1
            else:
                pss += v
    d_pss1 = pss_kib(dpid) or 0
    growth = d_pss1 - d_pss0
    held = d.census()
    for i in ids:
        d.rpc.try_call("destroy", {"sandbox": i})  # not_found: it died meanwhile (listed says)
    after = d.settle(base)
    avail2, wait2 = mem_available_settled(10)
    if not listed:
        sys.exit("bench: no idle sandbox to measure: %s" % fails.seen)
    k = len(listed)  # per sandbox alive (a create may fail; a sandbox may die: see failed, listed)
    res["memory"] = dict(k=k, created=len(ids), failed=fails.json(), listed=len(listed), processes=nproc, unreadable=unread, sandboxes_pss_kib=pss,
                         nsboxd_pss_kib_before=d_pss0, nsboxd_pss_kib_after=d_pss1,
                         pss_mib_per_sandbox=None if unread else round((pss + growth) / k / 1024, 3),
                         rss_anon_kib=anon, rss_anon_mib_per_sandbox=round(anon / k / 1024, 3),
                         memavailable_drop_kib=avail0 - avail1, memavailable_mib_per_sandbox=round((avail0 - avail1) / k / 1024, 3),
                         memavailable_back_after_destroy_kib=avail2 - avail1, memavailable_settle_s=[wait0, wait1, wait2],
                         nsboxd_fds_per_sandbox=round((held["fds"] - base["fds"]) / k, 2), mounts_held=held["mounts"] - base["mounts"],
                         after_destroy=after)
    print("   memory            done: %d idle sandboxes" % k, file=sys.stderr)
    # 5. how many at once
    if maxlive:
        ids, why, t0 = [], "4096 reached", time.monotonic()
        while len(ids) < 4096:
            sb, e = d.rpc.try_call("create", {"policy": "default"})
            if e:
                why = errtext("create", e)
                break
            ids.append(sb["id"])
            if len(ids) % 256 == 0:
                print("   maxlive: %d live" % len(ids), file=sys.stderr)
        took = time.monotonic() - t0
        held = d.census()
        avail2 = mem_available_kib()
        t1 = time.monotonic()
        for i in ids:
            d.rpc.try_call("destroy", {"sandbox": i})
        after = d.settle(base, 60)
        res["maxlive"] = dict(live=len(ids), stopped_by=why, create_s=round(took, 1), destroy_s=round(time.monotonic() - t1, 1),
                              held=held, memavailable_drop_kib=avail0 - avail2,
                              memavailable_mib_per_sandbox=round((avail0 - avail2) / max(1, len(ids)) / 1024, 3), after_destroy=after,
                              listed_after=len(d.rpc.call("list")["sandboxes"]))
        print("   maxlive           done: %d live (%s)" % (len(ids), why), file=sys.stderr)
    return res

def leaks(before, after):
    out = []
    for key in ("children", "mounts", "cgroups", "fds"):
        b, a = before.get(key), after.get(key)
        out.append("%s %s->%s" % (key, "-" if b is None else b, "-" if a is None else a))
    return ", ".join(out)

def report(bdir, n, seconds, k, took):
    p = json.load(open(os.path.join(bdir, "pool.out")))
    c = json.load(open(os.path.join(bdir, "churn.out")))
    stops = [json.loads(l) for l in open(os.path.join(bdir, "stops"))]
    row = "   %-44s %8s %8s %8s %9s %7s"
    print(row % ("create + first exec [true], ms", "median", "p90", "p99", "pooled", "failed"))
    for key, what in (("paced", "pool (paced: 1+ ready at each acquire)"), ("back_to_back", "pool (back to back)"),
                      ("cold", "cold ({\"policy\": \"default\"})")):
        r = p[key]
        print(row % (what, "%.2f" % r["median_ms"], "%.2f" % r["p90_ms"], "%.2f" % r["p99_ms"],
                     "%d/%d" % (r["pooled"], r["n"]) if "pooled" in r else "-", r["failed"]["n"]))
    print("   pool/cold (medians): paced %.2f, back to back %.2f; of which create alone: pool %.2f ms, cold %.2f ms"
          % (p["ratio_pool_cold"], p["ratio_back_to_back_cold"], p["paced"]["create_median_ms"], p["cold"]["create_median_ms"]))
    ch = c["churn"]
    print("   churn, 2 clients, %.0f s: %d sandboxes, %.1f/s (cycle median %.2f ms, p99 %.2f ms), %d cycles failed"
          % (ch["seconds"], ch["sandboxes"], ch["per_second"], ch["cycle"]["median_ms"], ch["cycle"]["p99_ms"], ch["failed"]["n"]))
    print("      left after (before->after): %s; still listed %d" % (leaks(ch["before"], ch["after"]), ch["listed_after"]))
    m = mem = c["memory"]
    if m["pss_mib_per_sandbox"] is None:  # smaps_rollup needs ptrace access: RssAnon (no sharing counted) instead
        pss = "PSS unreadable (%d of %d processes), RssAnon %.2f MiB" % (m["unreadable"], m["processes"], m["rss_anon_mib_per_sandbox"])
    else:
        pss = "PSS %.2f MiB (sandboxes %d KiB in %d processes, nsboxd %+d KiB)" % (
            m["pss_mib_per_sandbox"], m["sandboxes_pss_kib"], m["processes"], m["nsboxd_pss_kib_after"] - m["nsboxd_pss_kib_before"])
    print("   memory per idle sandbox (%d): %s; MemAvailable drop %.2f MiB (%.2f MiB came back after destroying them)"
          % (m["k"], pss, m["memavailable_mib_per_sandbox"], m["memavailable_back_after_destroy_kib"] / m["k"] / 1024))
    fl = [m for r in (p["paced"], p["back_to_back"], p["cold"], ch, mem) for m in r["failed"]["messages"]]
    if fl:
        print("   failures seen: " + " | ".join(sorted(set(fl))))
    if "maxlive" in c:
        x = c["maxlive"]
        print("   max live sandboxes: %d (stopped by: %s) in %.0f s, MemAvailable drop %.2f MiB each; after destroying all: %s"
              % (x["live"], x["stopped_by"], x["create_s"], x["memavailable_mib_per_sandbox"], leaks(c["churn"]["before"], x["after_destroy"])))
    print("   after SIGTERM: pool nsboxd left %d cgroups, %d processes; churn nsboxd left %d cgroups, %d processes"
          % (stops[0]["cgroups"], stops[0]["processes"], stops[1]["cgroups"], stops[1]["processes"]))
    print("   (took %.0f s)" % took)
    out = {"bench": "pool", "uid": os.geteuid(), "user": os.environ.get("BENCH_USER"), "kernel": os.uname().release,
           "cores": os.cpu_count(), "n": n, "churn_seconds": seconds, "k": k, "pool_size": int(os.environ["BENCH_POOL"]),
           "pool": p, "churn": c["churn"], "memory": c["memory"], "maxlive": c.get("maxlive"),
           "after_sigterm": {"pool_nsboxd": stops[0], "churn_nsboxd": stops[1]}, "took_s": round(took, 1)}
    print(json.dumps(out, separators=(",", ":")))

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "pool":
        r = phase_pool(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif what == "churn":
        r = phase_churn(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1")
    else:
        report(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
        sys.exit(0)
    json.dump(r, sys.stdout)
PY
export BENCH_DIR=$dir BENCH_POOL=$POOL BENCH_USER
BENCH_USER=$(id -un)

echo "== warm pools: nsboxd as $BENCH_USER ($(nproc) cores, $(uname -r)); N=$N, churn ${CHURN}s, K=$K, pool $POOL"
# 1 and 2: a template "default" (create {}) with a pool of 8
start_daemon pool "{\"max_sandboxes\": 4096, \"max_per_uid\": 4096, \"drain_timeout\": 2, \"templates\": {\"default\": {\"create\": {}, \"pool\": $POOL}}}"
python3 "$dir/pool.py" pool "$dir/pool.sock" "$daemon_pid" "$N" "$POOL" > "$dir/pool.out"
pid=$daemon_pid; stop_daemon "$pid"; daemon_pid=""
left_after_stop "$pid" > "$dir/stops"
# 3, 4 (and 5): no template, nothing pooled: the daemon holds nothing before and after
start_daemon churn '{"max_sandboxes": 4096, "max_per_uid": 4096, "drain_timeout": 2}'
python3 "$dir/pool.py" churn "$dir/churn.sock" "$daemon_pid" "$CHURN" "$K" "$MAXLIVE" > "$dir/churn.out"
pid=$daemon_pid; stop_daemon "$pid"; daemon_pid=""
left_after_stop "$pid" >> "$dir/stops"
echo
python3 "$dir/pool.py" report "$dir" "$N" "$CHURN" "$K" "$(( ($(date +%s%N) - started) / 1000000 ))e-3"
