#!/usr/bin/env bash
# make bench, setup step: the peers nsbox is measured against, and what they need.
#   tests/bench/setup.sh OUTDIR USER
# As root, installs the missing ones from apt (bubblewrap, firejail, crun, systemd-container,
# podman, gnuplot-nox); as anyone else, names what is missing and how to get it (the bench then skips that
# peer with the same reason).  Writes an OCI bundle for crun equivalent to nsbox's default policy
# into OUTDIR/crun-bundle, and OUTDIR/peers.env: one line PEER_<name>="command" or
# SKIP_<name>="reason" per peer, read by tests/bench/run.
set -euo pipefail
out=${1:?usage: setup.sh OUTDIR USER}
user=${2:?usage: setup.sh OUTDIR USER}
mkdir -p "$out"
out=$(cd "$out" && pwd)

pkgs=""
command -v bwrap >/dev/null || pkgs="$pkgs bubblewrap"
command -v firejail >/dev/null || pkgs="$pkgs firejail"
command -v crun >/dev/null || pkgs="$pkgs crun"
command -v systemd-nspawn >/dev/null || pkgs="$pkgs systemd-container"
command -v podman >/dev/null || pkgs="$pkgs podman uidmap"
command -v gnuplot >/dev/null || pkgs="$pkgs gnuplot-nox"
if [ -n "$pkgs" ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
                echo "bench setup: installing$pkgs"
                # shellcheck disable=SC2086  # one word per package
                DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs > "$out/apt.log" 2>&1 ||
                        echo "bench setup: apt-get install$pkgs failed (see $out/apt.log): those peers are skipped"
        else
                echo "bench setup: missing$pkgs: not root, so not installed (sudo apt-get install$pkgs); those peers are skipped"
        fi
fi

run_as() {
        if [ "$(id -u)" = 0 ] && [ "$user" != root ]; then
                setpriv --reuid="$user" --regid="$user" --init-groups --reset-env "$@"
        else
                "$@"
        fi
}

env_file=$out/peers.env
: > "$env_file"
peer() { printf 'PEER_%s=%q\n' "$1" "$2" >> "$env_file"; }
skip() { printf 'SKIP_%s=%q\n' "$1" "$2" >> "$env_file"; echo "bench setup: $1 skipped: $2"; }
# try NAME CMD: the peer is kept only if CMD runs /bin/true successfully here as the bench's user
try() {
        local err
        if err=$(run_as /bin/sh -c "$2" 2>&1 </dev/null); then
                peer "$1" "$2"
        else
                skip "$1" "'$2' fails here as $user: $(printf '%s' "$err" | tr '\n' ' ' | cut -c1-300)"
        fi
}

# bwrap with the same isolation as `nsbox run`: every namespace, /usr read-only, the merged-/usr
# symlinks, a fresh /proc, a minimal /dev and a private /tmp.
links=""
for l in bin sbin lib lib64; do
        [ -L /$l ] && links="$links --symlink $(readlink /$l) /$l"
done
if command -v bwrap >/dev/null; then
        try bwrap "bwrap --unshare-all --die-with-parent --ro-bind /usr /usr$links --proc /proc --dev /dev --tmpfs /tmp /bin/true"
else
        skip bwrap "bubblewrap is not installed"
fi

# firejail (setuid root) without a profile, with the namespaces it offers: user (--noroot), net,
# ipc, uts (--hostname), its own pid and mount namespaces, a private /tmp, /dev and home.
if command -v firejail >/dev/null; then
        try firejail "firejail --noprofile --quiet --noroot --net=none --ipc-namespace --hostname=sb --private --private-tmp --private-dev /bin/true"
else
        skip firejail "firejail is not installed"
fi

# crun: an OCI bundle equivalent to nsbox's default: user, pid, net, ipc, uts, mount and cgroup
# namespaces, a read-only root holding only the host's /usr (read-only) and the merged-/usr
# symlinks, /proc, a tmpfs /dev and /tmp, no capabilities, no_new_privs.  Rootless (the user's
# uid mapped to root inside, as `crun spec --rootless` makes it); its state under OUTDIR.
if command -v crun >/dev/null; then
        b=$out/crun-bundle
        rm -rf "$b"
        mkdir -p "$b/rootfs/usr" "$b/rootfs/proc" "$b/rootfs/dev" "$b/rootfs/tmp" "$b/rootfs/workspace" "$out/crun-state"
        for l in bin sbin lib lib64; do
                [ -L /$l ] && ln -s "$(readlink /$l)" "$b/rootfs/$l"
        done
        uid=$(id -u "$user") gid=$(id -g "$user")
        python3 - "$b/config.json" "$uid" "$gid" <<'PY'
import json, sys
path, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ns = ["user", "pid", "network", "ipc", "uts", "mount", "cgroup"]
cfg = {
    "ociVersion": "1.0.0",
    "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["/bin/true"],
                "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "cwd": "/workspace",
                "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")},
                "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}], "noNewPrivileges": True},
    "root": {"path": "rootfs", "readonly": True},
    "hostname": "sb",
    "mounts": [
        {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro", "nosuid", "nodev"]},
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]},
        {"destination": "/workspace", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=755"]},
    ],
    "linux": {
        "uidMappings": [{"containerID": 0, "hostID": uid, "size": 1}],
        "gidMappings": [{"containerID": 0, "hostID": gid, "size": 1}],
        "namespaces": [{"type": t} for t in ns],
        "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"],
        "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs", "/proc/irq"],
    },
}
json.dump(cfg, open(path, "w"), indent=1)
PY
        chown -R "$user" "$out/crun-state" 2>/dev/null || true
        chmod -R a+rX "$b"
        # crun refuses a hybrid cgroup layout whose v2 hierarchy holds a controller ("cgroups in
        # hybrid mode not supported"), as this host's does (hugetlb).  Root can give the bench a
        # mount namespace without /sys/fs/cgroup/unified: crun then sees cgroup v1 and, rootless,
        # makes no cgroup; nsbox run as a user gets no cgroup either way (none is delegated).
        view=""
        if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
                [ -n "$(tr -d ' \n' < /sys/fs/cgroup/unified/cgroup.controllers)" ]; then
                view="unshare -m --propagation private sh -c 'umount -l /sys/fs/cgroup/unified && exec \"\$@\"' sh"
        fi
        # the container's name must be new at each run: the shell's pid
        c="crun --root $out/crun-state run --bundle $b nsbox-bench-\$\$"
        if [ -z "$view" ]; then
                try crun "$c"
        elif [ "$(id -u)" != 0 ]; then
                skip crun "crun refuses this host's hybrid cgroup layout (controllers $(cat /sys/fs/cgroup/unified/cgroup.controllers) in v2); as root the bench runs it in a mount namespace without /sys/fs/cgroup/unified"
        elif err=$(eval "$view" setpriv --reuid="$user" --regid="$user" --init-groups --reset-env /bin/sh -c "'$c'" 2>&1 </dev/null); then
                peer crun "$c"
                printf 'CRUN_VIEW=%q\n' "$view" >> "$env_file"
                echo "bench setup: crun runs in a mount namespace without /sys/fs/cgroup/unified (hybrid cgroups here): so do the other tools of the same cold-start run"
        else
                skip crun "'$c' fails here as $user, even without /sys/fs/cgroup/unified: $(printf '%s' "$err" | tr '\n' ' ' | cut -c1-300)"
        fi
else
        skip crun "crun is not installed"
fi

# systemd-nspawn: needs root (it refuses anyone else) and a directory tree; the same minimal root
# as crun's, the host's /usr bound read-only, a private network, no registration with machined.
if ! command -v systemd-nspawn >/dev/null; then
        skip nspawn "systemd-container is not installed"
elif [ "$(id -u)" != 0 ]; then
        skip nspawn "systemd-nspawn runs only as root (the bench runs as $(id -un))"
elif [ -d "$out/crun-bundle/rootfs" ]; then
        # nspawn runs as root whoever the others run as: said in the table
        # (its stderr is dropped: at each exit it says it 'Attempted to remove disk file system under
        # "/run/systemd/nspawn/propagate/rootfs"' here, and exits 0; a failure still counts by status)
        n="SYSTEMD_NSPAWN_TMPFS_TMP=1 systemd-nspawn --quiet --register=no --keep-unit --private-network -U --as-pid2 -D $out/crun-bundle/rootfs --bind-ro=/usr /bin/true 2>/dev/null"
        if err=$(/bin/sh -c "${n% 2>/dev/null}" 2>&1 </dev/null); then
                peer nspawn "$n"
        else
                skip nspawn "'$n' fails here: $(printf '%s' "$err" | tr '\n' ' ' | cut -c1-300)"
        fi
else
        skip nspawn "no root directory for it (crun's bundle was not made)"
fi

# podman (Debian's, with crun), rootless as the bench's user, on an image imported offline (no
# registry): the host's true, sleep, libc and loader, nothing else.  Like crun it needs the
# mount namespace without /sys/fs/cgroup/unified here (PODMAN_VIEW).  Its pause process is
# stopped (podman system migrate) by podman.sh after each use.
if ! command -v podman >/dev/null; then
        skip podman "podman is not installed"
else
        pview=""
        if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
                [ -n "$(tr -d ' \n' < /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
                pview="unshare -m --propagation private sh -c 'umount -l /sys/fs/cgroup/unified && exec \"\$@\"' sh"
        fi
        img=$out/podman-image
        rm -rf "$img" && mkdir -p "$img/etc" "$img/proc" "$img/dev" "$img/sys" "$img/tmp"
        for l in bin sbin lib lib64; do
                if [ -L /$l ]; then
                        mkdir -p "$img/$(readlink /$l)" && ln -s "$(readlink /$l)" "$img/$l"
                fi
        done
        for f in /usr/bin/true /usr/bin/sleep $(ldd /usr/bin/sleep | awk '/\// { print $(NF - 1) }'); do
                mkdir -p "$img$(dirname "$f")" && cp -L "$f" "$img$f"
        done
        tar -C "$img" -cf "$out/podman-image.tar" . && chmod 0644 "$out/podman-image.tar"
        p="podman run --rm nsbox-bench-min /bin/true"
        as_user="" # both read through eval below
        # shellcheck disable=SC2034
        [ "$(id -u)" = 0 ] && [ "$user" != root ] && as_user="setpriv --reuid=$user --regid=$user --init-groups --reset-env"
        # shellcheck disable=SC2034  # pcmd is read through eval
        if [ -n "$pview" ] && [ "$(id -u)" != 0 ]; then
                skip podman "crun (under podman) refuses this host's hybrid cgroup layout; as root the bench runs it in a mount namespace without /sys/fs/cgroup/unified"
        elif err=$(pcmd="podman import -q $out/podman-image.tar nsbox-bench-min >/dev/null && $p 2>&1; s=\$?; podman system migrate 2>/dev/null; exit \$s" &&
                eval "$pview"' $as_user /bin/sh -c "$pcmd"' 2>&1 </dev/null); then
                peer podman "$p 2>/dev/null"
                printf 'PODMAN_VIEW=%q\n' "$pview" >> "$env_file"
        else
                skip podman "'$p' fails here as $user: $(printf '%s' "$err" | tr '\n' ' ' | cut -c1-300)"
        fi
fi

if command -v unshare >/dev/null; then
        try unshare "unshare -Urmpnif --mount-proc /bin/true"
else
        skip unshare "unshare (util-linux) is not installed"
fi
command -v gnuplot >/dev/null || echo "bench setup: gnuplot is missing: no PNG plots (apt-get install gnuplot-nox)"
chmod 0644 "$env_file"
