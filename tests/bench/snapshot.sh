#!/usr/bin/env bash
# Snapshot, fork and reset times (part of make bench): a snapshot copies what the sandbox changed,
# so its time should follow the size of the change, not of the root; a fork copies nothing.
#   tests/bench/snapshot.sh [RUNS]      (NSBOX: the nsbox binary)
set -euo pipefail
NSBOX=${NSBOX:?NSBOX must point at the nsbox binary}
RUNS=${1:-5}
dir=$(mktemp -d /tmp/nsbox-bench-snap.XXXXXX)
export NSBOX_SOCKET=$dir/d.sock NSBOX_STORE=$dir/store
cleanup() {
        local pid
        pid=$(python3 -c 'import json,socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
print(json.loads(s.makefile().readline())["result"]["pid"])' "$NSBOX_SOCKET" 2>/dev/null || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null
        sleep 0.5
        rm -rf "$dir"
}
trap cleanup EXIT

ms() { echo $(( ($(date +%s%N) - $1) / 1000 ))e-3; }
median() { sort -g | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.1f", m}'; }
jfield() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

root_size=$(du -sx --block-size=1M /usr 2>/dev/null | cut -f1 || echo "?")
echo "== snapshots: the host view root (/usr, ${root_size} MiB) under every sandbox; $RUNS runs each, medians"
printf '   %-34s %10s %10s %10s\n' "" "total ms" "copy ms" "sync ms"
for mib in 1 100; do
        : > "$dir/total"; : > "$dir/copy"; : > "$dir/sync"
        for i in $(seq "$RUNS"); do
                id=$("$NSBOX" create --disk 1G)
                # the change: 1 MiB in 16 files, or 100 MiB in 100 files
                n=$(( mib == 1 ? 16 : 100 )); kib=$(( mib * 1024 / n ))
                "$NSBOX" exec "$id" -- sh -c "for f in \$(seq $n); do head -c ${kib}K /dev/urandom > f\$f; done"
                out=$("$NSBOX" snapshot --json "$id" "b$mib-$i")
                echo "$out" | jfield duration_ms >> "$dir/total"
                echo "$out" | jfield copy_ms >> "$dir/copy"
                echo "$out" | jfield sync_ms >> "$dir/sync"
                "$NSBOX" rm "$id"
                [ "$i" = "$RUNS" ] || "$NSBOX" snapshot rm "b$mib-$i"
        done
        printf '   %-34s %10s %10s %10s\n' "snapshot, ${mib} MiB changed" "$(median < "$dir/total")" "$(median < "$dir/copy")" "$(median < "$dir/sync")"
done

: > "$dir/fork"; : > "$dir/one"; : > "$dir/reset"; : > "$dir/plain"
for i in $(seq "$RUNS"); do
        t=$(date +%s%N); ids=$("$NSBOX" create --from "b100-$RUNS" --count 10); ms "$t" >> "$dir/fork"
        # shellcheck disable=SC2086
        "$NSBOX" rm $ids
        t=$(date +%s%N); id=$("$NSBOX" create --from "b100-$RUNS"); ms "$t" >> "$dir/one"
        t=$(date +%s%N); "$NSBOX" reset "$id" "b1-$RUNS"; ms "$t" >> "$dir/reset"
        "$NSBOX" rm "$id"
        t=$(date +%s%N); id=$("$NSBOX" create); ms "$t" >> "$dir/plain"
        "$NSBOX" rm "$id"
done
printf '   %-34s %10s\n' "create (no snapshot)" "$(median < "$dir/plain")"
printf '   %-34s %10s\n' "create --from (100 MiB snapshot)" "$(median < "$dir/one")"
printf '   %-34s %10s\n' "create --from --count 10" "$(median < "$dir/fork")"
printf '   %-34s %10s\n' "reset ID to a snapshot" "$(median < "$dir/reset")"
echo "   (times through the nsbox command line: each includes one nsbox process start and a daemon round trip)"
