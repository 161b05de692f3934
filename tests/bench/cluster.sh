#!/usr/bin/env bash
# Many nodes behind HAProxy (part of make bench): three nsboxd nodes on loopback ports (a pooled
# "base" template each, one shared key file), HAProxy from contrib/haproxy/nsbox-haproxy-config,
# and tests/bench/cluster.mjs with the pinned e2b package.  As whoever runs it.
#   tests/bench/cluster.sh [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$(dirname "$here")")
NSBOX=${NSBOX:-$src/build/nsbox}
NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
export NSBOX_POLICY_PATH=${NSBOX_POLICY_PATH:-$src/policy}
N=${1:-30}
# shellcheck disable=SC1091
. "$src/tests/lib.sh"
[ -x "$HAPROXY" ] || { echo "bench: cluster: haproxy is missing (./quickstart.sh --deps)" >&2; exit 1; }
dir=$(mktemp -d /tmp/nsbox-bench-cluster.XXXXXX)
chmod 0711 "$dir"
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
mods=$(npm_cache_dir e2b node_modules/.package-lock.json "$src/tests/e2b") || { echo "bench: npm ci of tests/e2b failed" >&2; exit 1; }
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
specs=()
for n in a b c; do
        p=$(port) ap=$(port)
        mkdir -p "$dir/$n"
        printf '{"max_sandboxes": 200, "http": {"listen": "127.0.0.1:%s", "keys": "%s/keys.json", "internet": false},
 "cluster": {"node": "%s", "agent_check": "127.0.0.1:%s"}, "templates": {"base": {"create": {"workdir": "/home/user"}, "pool": 4}}}\n' \
                "$p" "$dir" "$n" "$ap" > "$dir/$n/config.json"
        NSBOX_STORE="$dir/$n/store" "$NSBOXD" --config "$dir/$n/config.json" --socket "$dir/$n/d.sock" > "$dir/$n/log" 2>&1 &
        pids+=($!)
        specs+=("$n=127.0.0.1:$p/$ap")
        [ "$n" = a ] && direct=http://127.0.0.1:$p
done
for n in a b c; do for _ in $(seq 100); do [ -S "$dir/$n/d.sock" ] && break; sleep 0.1; done; done
E2B_API_KEY=$(NSBOX_SOCKET="$dir/a/d.sock" "$NSBOX" api-key create 2>/dev/null)
rport=$(port)
"$src/contrib/haproxy/nsbox-haproxy-config" --listen "127.0.0.1:$rport" "${specs[@]}" > "$dir/haproxy.cfg"
"$HAPROXY" -db -f "$dir/haproxy.cfg" > "$dir/haproxy.log" 2>&1 &
pids+=($!)
sleep 3 # the pools fill, the router's agent checks weigh the nodes
mkdir -p "$dir/js" && cp "$here/cluster.mjs" "$dir/js/" && ln -s "$mods/node_modules" "$dir/js/node_modules"
E2B_API_KEY=$E2B_API_KEY ROUTER_URL=http://127.0.0.1:$rport DIRECT_URL=$direct node "$dir/js/cluster.mjs" "$N"
