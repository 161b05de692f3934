#!/usr/bin/env python3
# make bench, last step: gathers the figures of this run (coldstart-*.json, daemon.json,
# peers.env) into results.json, prints the summary against the project's targets (issues 10 and
# 26), and writes the gnuplot script and data files of the plots (plots.gp, *.dat).
#   report.py OUTDIR RUNS USER
import json
import os
import platform
import shlex
import sys

out, runs, user = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def machine():
    info = {"kernel": platform.release(), "cores": os.cpu_count(), "arch": platform.machine()}
    with open("/proc/meminfo") as f:
        info["mem_gib"] = round(int(f.readline().split()[1]) / 1048576, 1)
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    info["os"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    info["load_1min_at_end"] = os.getloadavg()[0]
    return info


peers, skipped = {}, {}
try:
    with open(os.path.join(out, "peers.env")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            v = " ".join(shlex.split(v))
            if k.startswith("PEER_"):
                peers[k[5:]] = v
            elif k.startswith("SKIP_"):
                skipped[k[5:]] = v
except OSError:
    pass

cold_user, cold_root, daemon = load("coldstart-user.json"), load("coldstart-root.json"), load("daemon.json")
res = {"machine": machine(), "runs": runs, "user": user, "peers": peers, "skipped": skipped,
       "cold_start": {"as_user": cold_user, "as_root": cold_root}, "daemon": daemon}

# the targets of issue 10, each with the measured figure and whether it is met
targets = []


def target(what, goal, value, unit, ok, note=None, into=targets, floor=None):
    t = {"target": what, "goal": goal, "measured": None if value is None else round(value, 3), "unit": unit,
         "met": None if value is None else bool(ok)}
    if note:
        t["note"] = note
    if floor:
        t["floor"] = floor
    into.append(t)


def cold(results, name):
    for r in (results or {}).get("results", []):
        if r["name"] == name:
            return r
    return None


ns, bw = cold(cold_user, "nsbox"), cold(cold_user, "bwrap")
target("cold start vs bwrap (median ratio)", "<= 1.0x", ns["median_ms"] / bw["median_ms"] if ns and bw else None, "x",
       ns and bw and ns["median_ms"] <= bw["median_ms"])
w = (daemon or {}).get("warm") or {}


def med_ms(key):
    d = w.get(key)
    return d["median_us"] / 1000 if d else None


v = med_ms("pool_acquire_to_first_exec")
target("warm pool acquire to first exec result (median)", "<= 1 ms", v, "ms", v is not None and v <= 1)
v = med_ms("exec_true")
target("exec [true] round trip (median)", "<= 1 ms", v, "ms", v is not None and v <= 1)
v = w.get("read_file_4k", {}).get("median_us")
target("read_file 4 KiB (median)", "<= 100 us", v, "us", v is not None and v <= 100)
den = (daemon or {}).get("density")
v = den["listed"] if den else None
target("live sandboxes at once", ">= 500", v, "sandboxes", v is not None and v >= 500)
if den:
    target("leftovers after destroying them all", "none", len(den["leftovers"]), "items", not den["leftovers"])
ch = (daemon or {}).get("churn")
v = ch["per_second"] if ch else None
target("churn: create+exec+destroy cycles", ">= 100/s", v, "per s", v is not None and v >= 100)
if ch:
    b, a = ch["before"], ch["after"]
    target("churn: nsboxd fds growth", "0", a["nsboxd_fds"] - b["nsboxd_fds"], "fds", a["nsboxd_fds"] <= b["nsboxd_fds"])
    target("churn: nsboxd RSS growth", "0 (within 1 MiB: malloc's arenas)", a["nsboxd_rss_kib"] - b["nsboxd_rss_kib"], "KiB",
           a["nsboxd_rss_kib"] - b["nsboxd_rss_kib"] <= 1024)
res["targets"] = targets

# the targets of issue 26, from this same run
targets26 = []


def target26(*args, **kw):
    target(*args, into=targets26, **kw)


def floor_us(key):
    d = w.get(key)
    return "%.0f us" % d["median_us"] if d else "-"


v = w.get("read_file_4k", {}).get("median_us")
target26("read_file 4 KiB through nsboxd (median)", "<= 50 us", v, "us", v is not None and v <= 50,
         floor="its bytes with no work: %s over a socket, %s through a do-nothing relay"
         % (floor_us("floor_read_direct"), floor_us("floor_read_relay")) if w.get("floor_read_relay") else None)
target26("64 MiB write and read, fd path", ">= 1 GB/s each", None, "MB/s", False,
         note="in the transfer section that follows (tests/bench/xfer.sh, xfer.json), not this summary")
v = w.get("exec_true_vs_native")
fr = w.get("floor_exec_vs_native")
target26("exec [true] round trip / native posix_spawn+wait", "<= 1.2x", v, "x", v is not None and v <= 1.2,
         floor="native + a do-nothing relay of its bytes (%s): %.2fx" % (floor_us("floor_exec_relay"), fr) if fr else None)
v = med_ms("pool_acquire_to_first_exec")
nat = med_ms("native_spawn_true")
target26("pool acquire to first exec result (median)", "<= 0.7 ms", v, "ms", v is not None and v <= 0.7,
         floor="a native posix_spawn + wait of /bin/true alone: %.2f ms" % nat if nat else None)
v = ns["median_ms"] / bw["median_ms"] if ns and bw else None
target26("cold nsbox run / bwrap, same binds (median ratio)", "<= 0.95x", v, "x", v is not None and v <= 0.95)
v = den["listed"] if den else None
target26("live sandboxes at once", ">= 1000 (BENCH_DENSITY=1000)", v, "sandboxes", v is not None and v >= 1000)
if den and den["target"] < 1000 and v == den["target"]:  # a run asked for fewer cannot show it
    targets26[-1]["met"] = None
v = den.get("pss_mib_per_sandbox") if den else None
target26("PSS per live sandbox (with nsboxd's share)", "<= 1.2 MiB", v, "MiB", v is not None and v <= 1.2)
res["targets_issue26"] = targets26
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(res, f, indent=1)

print("== summary against the targets of issue 10 (%s, %d cores, %s GiB, load %.2f at the end)"
      % (res["machine"]["kernel"], res["machine"]["cores"], res["machine"]["mem_gib"], res["machine"]["load_1min_at_end"]))
for name, r in (("as " + user, cold_user), ("as root", cold_root)):
    if not r:
        continue
    print("   cold start %s, %d runs each: %s" % (name, r["runs"], ", ".join(
        "%s %.2f ms (%.2fx)" % (x["name"], x["median_ms"], x["ratio"]) for x in r["results"])))


def print_targets(ts):
    for t in ts:
        m = "-" if t["measured"] is None else "%g %s" % (t["measured"], t["unit"])
        verdict = t.get("note") or ("not measured" if t["met"] is None else ("met" if t["met"] else "MISSED"))
        print("   %-50s %-36s %-22s %s" % (t["target"], t["goal"], m, verdict))
        if t.get("floor"):
            print("      floor on this machine, same run: %s" % t["floor"])


print_targets(targets)

print("== summary against the targets of issue 26, same run")
print_targets(targets26)

# gnuplot: cold-start distributions (one CDF per tool and user) and latency against concurrency
plots = []
series = []
for tag, r in (("user", cold_user), ("root", cold_root)):
    for x in (r or {}).get("results", []):
        s = x.get("samples_ms") or []
        if not s:
            continue
        dat = os.path.join(out, "cold-%s-%s.dat" % (tag, x["name"]))
        with open(dat, "w") as f:
            for i, v in enumerate(s):
                f.write("%.3f %.5f\n" % (v, (i + 1) / len(s)))
        series.append((tag, x["name"], dat))
if series:
    for tag in ("user", "root"):
        mine = [s for s in series if s[0] == tag]
        if not mine:
            continue
        who = user if tag == "user" else "root"
        plots.append('set output "%s"' % os.path.join(out, "coldstart-%s.png" % tag))
        plots.append('set title "cold start of /bin/true as %s: distribution of %d runs per tool (interleaved)"' % (who, runs))
        plots.append('set xlabel "wall time, ms (log)"; set ylabel "fraction of runs at most"; set logscale x; set yrange [0:1]; set key bottom right; set grid')
        plots.append("plot " + ", ".join('"%s" using 1:2 with steps lw 2 title "%s"' % (d, n) for _, n, d in mine))
        plots.append("unset logscale x; set autoscale y")
conc = (daemon or {}).get("concurrency")
if conc:
    dat = os.path.join(out, "concurrency.dat")
    with open(dat, "w") as f:
        for c in conc:
            f.write("%d %.1f %.1f %.1f %.0f\n" % (c["clients"], c["median_us"], c["p90_us"], c["p99_us"], c["calls_per_s"]))
    plots.append('set output "%s"' % os.path.join(out, "concurrency.png"))
    plots.append('set title "exec [true] round trip through nsboxd against concurrent clients"')
    plots.append('set xlabel "clients (each its own connection and sandbox)"; set ylabel "round trip, us (log)"; set logscale xy 2; set logscale y 10')
    plots.append('set y2label "calls/s, all clients"; set y2tics; set ytics nomirror; set key top left; set grid; set xtics (1, 2, 4, 8, 16); set xrange [0.8:20]')
    plots.append('plot "{0}" using 1:2 with linespoints lw 2 title "median", "{0}" using 1:3 with linespoints title "p90", '
                 '"{0}" using 1:4 with linespoints title "p99", "{0}" using 1:5 axes x1y2 with linespoints dt 2 title "calls/s (right)"'.format(dat))
with open(os.path.join(out, "plots.gp"), "w") as f:
    f.write('set terminal pngcairo size 1000,600 noenhanced\n')
    f.write("\n".join(plots) + "\n")
