#!/usr/bin/env bash
# The E2B SDK against nsboxd's HTTP API (part of make bench): an nsboxd of its own, with a pooled
# "base" template, a pooled "code-interpreter" and an unpooled "code-interpreter-v1" (its cold
# start: without a template of its own it would take code-interpreter's pool), a key, and
# tests/bench/e2b.mjs run with the pinned e2b packages (the E2B tier's npm cache).  As whoever
# runs it.
#   tests/bench/e2b.sh [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$(dirname "$here")")
NSBOX=${NSBOX:-$src/build/nsbox}
NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
export NSBOX_POLICY_PATH=${NSBOX_POLICY_PATH:-$src/policy}
N=${1:-50}
# shellcheck disable=SC1091
. "$src/tests/lib.sh"
dir=$(mktemp -d /tmp/nsbox-bench-e2b.XXXXXX)
chmod 0711 "$dir"
trap 'kill -TERM $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -rf "$dir"' EXIT
mods=$(npm_cache_dir e2b node_modules/.package-lock.json "$src/tests/e2b") || { echo "bench: npm ci of tests/e2b failed" >&2; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$dir/config.json" <<JSON
{"http": {"listen": "127.0.0.1:$port", "keys": "$dir/keys.json", "internet": false},
 "templates": {"base": {"create": {"workdir": "/home/user"}, "pool": 4},
               "code-interpreter": {"create": {"workdir": "/home/user"}, "pool": 2},
               "code-interpreter-v1": {"create": {"workdir": "/home/user"}}}}
JSON
NSBOX_STORE="$dir/store" "$NSBOXD" --config "$dir/config.json" --socket "$dir/d.sock" > "$dir/log" 2>&1 &
dpid=$!
export NSBOX_SOCKET=$dir/d.sock
for _ in $(seq 100); do [ -S "$dir/d.sock" ] && break; sleep 0.1; done
sleep 3 # the pools fill (the code interpreter's kernels take a second or so)
E2B_API_KEY=$("$NSBOX" api-key create 2>/dev/null)
export E2B_API_KEY E2B_API_URL=http://127.0.0.1:$port E2B_SANDBOX_URL=http://127.0.0.1:$port
mkdir -p "$dir/js" && cp "$here/e2b.mjs" "$dir/js/" && ln -s "$mods/node_modules" "$dir/js/node_modules"
node "$dir/js/e2b.mjs" "$N" "$dir/d.sock"
# the floor under those figures: node's own fetch against a trivial node server, same run
node "$here/node_floor.mjs" "$N"

# /files driven by curl: what nsboxd's HTTP API moves when the client is not the limit (node's
# fetch and the SDK's layers take most of the time above)
body=$(curl -s -H "X-API-KEY: $E2B_API_KEY" -d '{"templateID": "base", "timeout": 600}' "$E2B_API_URL/v2/sandboxes")
sid=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sandboxID"])')
tok=$(printf '%s' "$body" | python3 -c 'import json, sys; print(json.load(sys.stdin)["envdAccessToken"])')
head -c 64M /dev/urandom > "$dir/big"
w=() r=()
for _ in 1 2 3 4 5; do
        w+=("$(curl -s -o /dev/null -w '%{time_total}' -H "E2b-Sandbox-Id: $sid" -H "X-Access-Token: $tok" \
                -H 'Content-Type: application/octet-stream' --data-binary @"$dir/big" "$E2B_SANDBOX_URL/files?path=big.bin")")
        r+=("$(curl -s -o "$dir/back" -w '%{time_total}' -H "E2b-Sandbox-Id: $sid" -H "X-Access-Token: $tok" "$E2B_SANDBOX_URL/files?path=big.bin")")
        cmp -s "$dir/big" "$dir/back" || { echo "bench: 64 MiB came back different through curl" >&2; exit 1; }
done
python3 - "${w[*]}" "${r[*]}" <<'PY'
import json, statistics, sys
mbps = lambda ts: statistics.median(64 / 1.048576 / float(t) for t in ts.split())
w, r = mbps(sys.argv[1]), mbps(sys.argv[2])
print("== the same /files through curl (5 runs, medians)")
print("  %-44s %9.2f MB/s" % ("POST /files 64 MiB", w))
print("  %-44s %9.2f MB/s" % ("GET /files 64 MiB", r))
print(json.dumps({"e2b_curl": {"files_write_MBps": w, "files_read_MBps": r}}))
PY
curl -s -o /dev/null -X DELETE -H "X-API-KEY: $E2B_API_KEY" "$E2B_API_URL/sandboxes/$sid"
