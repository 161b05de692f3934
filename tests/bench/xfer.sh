#!/usr/bin/env bash
# Transfer throughput against size (issue 26; part of make bench): a file of 4 KiB to 1 GiB
# written into a sandbox and read back through every path of nsboxd, medians, interleaved:
# `nsbox cp` (the descriptor path), `nsbox cp` with NSBOX_CP_NO_FD=1 (base64 JSON calls, to
# 64 MiB only: slow), a pipe passed on the raw socket (the fd path's floor), the Python client
# (clients/python, fd path) and HTTP /files (curl).  Every round trip is compared byte for byte
# before a figure is kept.  As whoever runs it; the engine is tests/bench/xfer.py.
#   tests/bench/xfer.sh [N]        N runs per size (default 5; at most 3 from 256 MiB)
#   tests/bench/xfer.sh --quick    a sanity run: one run per path, sizes to 1 MiB
# BENCH_XFER_MAX   the largest size (default 1G; e.g. 64M for a shorter run)
# NSBOX_BENCH_OUT  where xfer.json and xfer.png go (default build/bench)
# BENCH_XFER_DIR   the host directory of the files sent and received (default /tmp: the disk)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$(dirname "$here")")
NSBOX=${NSBOX:-$src/build/nsbox}
NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
export NSBOX_POLICY_PATH=${NSBOX_POLICY_PATH:-$src/policy}
N=${1:-5} MAX=${BENCH_XFER_MAX:-1G}
if [ "$N" = --quick ]; then
        N=1 MAX=1M
fi
out=${NSBOX_BENCH_OUT:-$src/build/bench}
mkdir -p "$out"
dir=$(mktemp -d "${BENCH_XFER_DIR:-/tmp}/nsbox-bench-xfer.XXXXXX")
chmod 0711 "$dir"
dpid=""
trap '[ -z "$dpid" ] || { kill -TERM $dpid 2>/dev/null; wait $dpid 2>/dev/null; }; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$dir/config.json" <<JSON
{"http": {"listen": "127.0.0.1:$port", "keys": "$dir/keys.json", "internet": false},
 "templates": {"base": {"create": {"workdir": "/home/user", "disk": "3G"}}}}
JSON
NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" > "$dir/log" 2>&1 &
dpid=$!
export NSBOX_SOCKET=$dir/d.sock
for _ in $(seq 100); do [ -S "$dir/d.sock" ] && break; sleep 0.1; done
key=$("$NSBOX" api-key create 2>/dev/null)
body=$(curl -s -H "X-API-KEY: $key" -d '{"templateID": "base", "timeout": 3600}' "http://127.0.0.1:$port/v2/sandboxes")
sid=$("$NSBOX" create --disk 3G)
PYTHONPATH="$src/clients/python" python3 "$here/xfer.py" --dir "$dir" --nsbox "$NSBOX" --sandbox "$sid" \
        --http "http://127.0.0.1:$port" --http-sandbox "$body" --runs "$N" --max "$MAX" --out "$out"
"$NSBOX" rm -f "$sid" > /dev/null
hsid=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])')
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $key" "http://127.0.0.1:$port/sandboxes/$hsid"
