#!/usr/bin/env bash
# make bench, warm exec against podman: `nsbox exec ID -- /bin/true` into a running sandbox (an
# nsboxd of its own on a private socket) and `podman exec C /bin/true` into a running container
# of setup.sh's offline image, both CLIs, interleaved by coldstart.  As the bench's user, inside
# PODMAN_VIEW when setup.sh wrote one (tests/bench/run does that).  Leaves nothing running:
# the sandbox, the container, nsboxd and podman's pause process are stopped at the end.
#   tests/bench/podman.sh OUTDIR RUNS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$(dirname "$here")")
out=${1:?usage: podman.sh OUTDIR RUNS}
runs=${2:?usage: podman.sh OUTDIR RUNS}
NSBOX=${NSBOX:-$src/build/nsbox}
NSBOXD=${NSBOXD:-${NSBOX_BUILD:-$src/build}/nsboxd}
export NSBOX_POLICY_PATH=${NSBOX_POLICY_PATH:-$src/policy}
dir=$(mktemp -d /tmp/nsbox-bench-podman.XXXXXX)
export NSBOX_SOCKET=$dir/d.sock
daemon_pid="" ctr=""
cleanup() {
        [ -z "$ctr" ] || podman rm -f -t 0 "$ctr" >/dev/null 2>&1 || true
        podman system migrate >/dev/null 2>&1 || true # stops the pause process
        if [ -n "$daemon_pid" ]; then
                kill -TERM "$daemon_pid" 2>/dev/null || true # it destroys its sandboxes
                wait "$daemon_pid" 2>/dev/null || true
        fi
        rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

printf '{"drain_timeout": 2}\n' > "$dir/config.json"
"$NSBOXD" --config "$dir/config.json" --socket "$NSBOX_SOCKET" 2>> "$dir/nsboxd.log" &
daemon_pid=$!
# its socket first: a create before it would start a daemon of its own there (autostart), which
# the cleanup would not know of
for _ in $(seq 500); do
        [ -S "$NSBOX_SOCKET" ] && break
        kill -0 "$daemon_pid" 2>/dev/null || { echo "bench: nsboxd exited: $(tail -n 5 "$dir/nsboxd.log")" >&2; exit 1; }
        sleep 0.02
done
id=""
for _ in $(seq 500); do
        id=$("$NSBOX" create 2>/dev/null) && break
        sleep 0.02
done
[ -n "$id" ] || { echo "bench: nsbox create failed: $(tail -n 5 "$dir/nsboxd.log")" >&2; exit 1; }
# (its stderr is said only on failure: rootless podman warns at each start that / is not shared)
podman import -q "$out/podman-image.tar" nsbox-bench-min >/dev/null 2> "$dir/import.err" || { cat "$dir/import.err" >&2; exit 1; }
ctr=$(podman run -d --rm nsbox-bench-min /bin/sleep infinity 2>/dev/null)
echo "== warm exec, CLI against CLI: $runs runs each, interleaved, as $(id -un)"
echo "   nsbox:  $NSBOX exec SANDBOX -- /bin/true (nsboxd on a private socket)"
echo "   podman: podman exec CONTAINER /bin/true (rootless, crun, a running container)"
"$out/coldstart" --json "$out/warm-exec-cli.json" "$runs" \
        nsbox "$NSBOX exec $id -- /bin/true" \
        podman "podman exec $ctr /bin/true 2>/dev/null"
