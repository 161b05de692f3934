#!/usr/bin/env bash
# Images (part of make bench): import time per GiB of layer data (tar and tar+gzip), a cold
# start on an image against one on the host view, and what a shared base layer saves.
#   tests/bench/images.sh [RUNS] [DIR]   (NSBOX: the nsbox binary; DIR: the tree made into the
#                                         big layer, default /usr/lib/python3)
set -euo pipefail
NSBOX=${NSBOX:?NSBOX must point at the nsbox binary}
RUNS=${1:-5}
SRC=${2:-/usr/lib/python3}
MK="$(cd "$(dirname "$0")/../integration" && pwd)/mkimage.py"
dir=$(mktemp -d /tmp/nsbox-bench-img.XXXXXX)
export NSBOX_STORE=$dir/store
trap 'rm -rf "$dir"' EXIT

ms() { echo $(( ($(date +%s%N) - $1) / 1000 ))e-3; }
median() { sort -g | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.1f", m}'; }

# An OCI layout: busybox base (mkimage.py) and SRC as a second layer, compressed or not.
python3 - "$MK" "$SRC" "$dir" <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile
mk, src, out = sys.argv[1:4]
sys.argv = ["mkimage.py", "oci", out + "/small", "bench/small:1"]
exec(open(mk).read().replace("\nmain()\n", "\n"))
main()
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w") as t:
    t.add(src, arcname=src.lstrip("/"))
big = raw.getvalue()
open(out + "/big-bytes", "w").write(str(len(big)))
base = base_layer()
for kind, blob, mt in (("tar", big, "application/vnd.oci.image.layer.v1.tar"),
                       ("gzip", gzip.compress(big, compresslevel=1), "application/vnd.oci.image.layer.v1.tar+gzip")):
    d = out + "/" + kind
    oci_layout(d, [base], "bench/" + kind + ":1")
    idx = json.load(open(d + "/index.json"))
    man = json.load(open(d + "/blobs/sha256/" + idx["manifests"][0]["digest"][7:]))
    man["layers"].append({"mediaType": mt, "digest": write_blob(d, blob), "size": len(blob)})
    idx["manifests"][0]["digest"] = write_blob(d, json.dumps(man).encode())
    json.dump(idx, open(d + "/index.json", "w"))
PY
bytes=$(cat "$dir/big-bytes")
gib=$(python3 -c "print($bytes / 2**30)")
echo "== images: a layer of $SRC ($((bytes >> 20)) MiB of tar), $RUNS runs each, medians"
for kind in tar gzip; do
        : > "$dir/t"
        for i in $(seq "$RUNS"); do
                t=$(date +%s%N)
                "$NSBOX" image import "$dir/$kind" "bench/$kind:$i" > /dev/null
                ms "$t" >> "$dir/t"
                "$NSBOX" image rm "bench/$kind:$i"
        done
        m=$(median < "$dir/t")
        printf '   import, %-5s %10s ms   %8.1f s/GiB\n' "$kind" "$m" "$(python3 -c "print($m / 1000 / $gib)")"
done

"$NSBOX" image import "$dir/small" > /dev/null
for what in host image; do
        : > "$dir/t"
        for i in $(seq "$RUNS"); do
                t=$(date +%s%N)
                if [ $what = host ]; then "$NSBOX" run -- true; else "$NSBOX" run --image bench/small:1 -- /bin/busybox true; fi
                ms "$t" >> "$dir/t"
        done
        eval "run_$what=$(median < "$dir/t")"
done
# shellcheck disable=SC2154
printf '   nsbox run true: host view %s ms, image %s ms (ratio %.2f)\n' "$run_host" "$run_image" \
        "$(python3 -c "print($run_image / $run_host)")"

# a second image on the same base: only its own layer is stored
before=$(du -sb "$NSBOX_STORE/layers" | cut -f1)
"$NSBOX" image import "$dir/tar" > /dev/null
after=$(du -sb "$NSBOX_STORE/layers" | cut -f1)
base=$(du -sb "$NSBOX_STORE/layers/$("$NSBOX" image inspect bench/small:1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1])')" | cut -f1)
printf '   sharing: the second image added %s MiB; its base layer (%s MiB) stored once\n' \
        "$(( (after - before) >> 20 ))" "$(( base >> 20 ))"
"$NSBOX" image rm bench/small:1 bench/tar:1 > /dev/null
