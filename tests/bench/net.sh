#!/usr/bin/env bash
# Network figures (part of make bench): what --net nat costs at start against --net none, and TCP
# throughput on the host's loopback through slirp4netns (a host server read from inside with
# network.host_loopback, and a server inside read from the host through --publish) against the
# host's own loopback.  Medians of RUNS; every server is on 127.0.0.1.
#   tests/bench/net.sh [RUNS]      (NSBOX: the nsbox binary; NSBOX_BUILD: for coldstart)
set -euo pipefail
NSBOX=${NSBOX:?NSBOX must point at the nsbox binary}
RUNS=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$(dirname "$here")")
out=${NSBOX_BENCH_OUT:-$src/build/bench}
MIB=${NET_BENCH_MIB:-256}
dir=$(mktemp -d /tmp/nsbox-bench-net.XXXXXX)
chmod 0755 "$dir"
trap 'rm -rf "$dir"' EXIT
command -v slirp4netns > /dev/null || { echo "bench: slirp4netns is missing (./quickstart.sh --deps)"; exit 1; }

python3 - "$src/policy/default.json" "$dir/loop.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["network"] = {"mode": "nat", "host_loopback": True}
json.dump(p, open(sys.argv[2], "w"))
PY
chmod 0644 "$dir/loop.json"

[ -x "$out/coldstart" ] || cc -O2 -Wall -Wextra -Werror -o "$out/coldstart" "$here/coldstart.c"
echo "== network at start: $((RUNS * 10)) runs each, interleaved, as $(id -un)"
"$out/coldstart" --json "$out/net-start.json" $((RUNS * 10)) \
        net-none "$NSBOX run -- /bin/true" \
        net-nat "$NSBOX run --net nat -- /bin/true" \
        nat+allow "$NSBOX run --net nat --allow 192.0.2.1:443 -- /bin/true"

# sink/source: SEND MiB to the first connection on 127.0.0.1:PORT (0: pick one, print it)
cat > "$dir/source.py" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
buf = b"x" * (1 << 20)
for _ in range(int(sys.argv[3])):
    c.sendall(buf)
c.close()
PY
# reader: connect to HOST:PORT, read to EOF, print MiB/s; retried while the server starts (a
# published port accepts at once and closes when nothing listens inside yet)
cat > "$dir/sink.py" <<'PY'
import socket, sys, time
for _ in range(400):
    try:
        c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
        first = c.recv(1 << 20)
        if first:
            break
    except OSError:
        pass
    time.sleep(0.05)
t = time.monotonic()
n = len(first)
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    n += len(b)
dt = time.monotonic() - t
print("%.0f" % (n / (1 << 20) / dt))
PY
chmod 0644 "$dir"/*.py
median() { sort -g | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.0f", m}'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

: > "$dir/host"; : > "$dir/nat"; : > "$dir/pub"
for i in $(seq "$RUNS"); do
        # the host's loopback
        python3 "$dir/source.py" 127.0.0.1 0 "$MIB" > "$dir/port" & sp=$!
        while [ ! -s "$dir/port" ]; do sleep 0.02; done
        python3 "$dir/sink.py" 127.0.0.1 "$(cat "$dir/port")" >> "$dir/host"
        wait "$sp"; rm -f "$dir/port"
        # out of the sandbox: a host server through slirp4netns (10.0.2.2 = the host's 127.0.0.1)
        python3 "$dir/source.py" 127.0.0.1 0 "$MIB" > "$dir/port" & sp=$!
        while [ ! -s "$dir/port" ]; do sleep 0.02; done
        "$NSBOX" run --policy "$dir/loop.json" --bind "$dir:$dir" -- python3 "$dir/sink.py" 10.0.2.2 "$(cat "$dir/port")" >> "$dir/nat"
        wait "$sp"; rm -f "$dir/port"
        # into the sandbox: a server inside through a published port
        hp=$(free_port)
        "$NSBOX" run --net nat --publish "$hp:9000" --bind "$dir:$dir" -- python3 "$dir/source.py" 0.0.0.0 9000 "$MIB" > /dev/null & sp=$!
        python3 "$dir/sink.py" 127.0.0.1 "$hp" >> "$dir/pub"
        wait "$sp"
done
h=$(median < "$dir/host"); n=$(median < "$dir/nat"); p=$(median < "$dir/pub")
echo
echo "== TCP throughput, $MIB MiB per run, medians of $RUNS (MiB/s)"
printf '   %-48s %8s %8s\n' "" "MiB/s" "x host"
printf '   %-48s %8s %8s\n' "host loopback (python to python)" "$h" "1.00"
printf '   %-48s %8s %8s\n' "sandbox -> host server (--net nat, 10.0.2.2)" "$n" "$(awk -v a="$n" -v b="$h" 'BEGIN{printf "%.2f", a/b}')"
printf '   %-48s %8s %8s\n' "host -> sandbox server (--publish)" "$p" "$(awk -v a="$p" -v b="$h" 'BEGIN{printf "%.2f", a/b}')"
