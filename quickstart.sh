#!/usr/bin/env bash
# Quick start: install what nsbox needs (Debian/Ubuntu packages, only the missing ones), build,
# and run a first sandbox that shows what it isolates.  `./quickstart.sh --deps` installs only.
set -euo pipefail
cd "$(dirname "$0")"

# build: compiler and libraries; test: Check, busybox for a rootfs and the VM tier's initramfs,
# keyutils/python3/git/iproute2/nftables used by the tests, qemu and Debian's kernel for the VM
# tier (cgroup v2 limits); slirp4netns for --net nat; peers for `make bench`; nodejs and npm for
# the MCP test's official TypeScript SDK client; valgrind for the unit tier under valgrind.
# tmux drives nsbox exec -it in the pty test; nginx-light runs contrib/nginx's TLS front of the
# HTTP API in its test.  The code interpreter (nsboxd's built-in code-interpreter template) runs
# Jupyter kernels: ipykernel, jupyter-client, zmq, matplotlib, pandas, and R's IRkernel; its
# TypeScript contexts strip types with node-typescript, its Java contexts run the JDK's JShell.  haproxy routes many nsboxd
# nodes in the cluster test (contrib/haproxy) and checks contrib/kubernetes's router in its test;
# the nodes' catalog is Redis (hiredis; redis-server for the test).  bindfs makes the FUSE directory
# of the watch test (a watch refuses FUSE and network file systems unless asked).
PACKAGES="build-essential pkg-config libseccomp-dev libcap-dev libnl-3-dev libnl-route-3-dev
libjansson-dev libgit2-dev libmicrohttpd-dev libcurl4-openssl-dev zlib1g-dev libhiredis-dev libarchive-dev check python3 git busybox-static
keyutils util-linux bubblewrap cpio qemu-system-x86 linux-image-amd64 slirp4netns iproute2 nftables systemd
valgrind tmux nginx-light python3-ipykernel python3-jupyter-client python3-zmq python3-matplotlib python3-pandas r-cran-irkernel node-typescript openjdk-17-jdk-headless haproxy redis-server bindfs"

missing=$(for p in $PACKAGES; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"; done)
# node and npm by command, not by package: a node of another origin (NodeSource's nodejs bundles
# npm and conflicts with Debian's npm package) serves as well
command -v npm > /dev/null && command -v node > /dev/null || missing="$missing nodejs npm"
if [ -n "$missing" ]; then
        echo "quickstart: installing:" $missing
        sudo=""
        [ "$(id -u)" = 0 ] || sudo=sudo
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
[ "${1:-}" = --deps ] && exit 0

make -j"$(nproc)"

echo
echo "== a first sandbox: build/nsbox run -- sh -c '...'"
build/nsbox run --json -- sh -c '
echo "whoami:   $(id)"
echo "hostname: $(hostname)"
echo "processes visible: $(ls /proc | grep -c "^[0-9]")"
echo "network interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " ")"
grep -E "CapEff|NoNewPrivs|^Seccomp:" /proc/self/status | tr "\t" " "
echo "host home dirs visible: $(ls /home /root 2>/dev/null | grep -vc :)"
touch /usr/x 2>/dev/null || echo "/usr is read-only"
echo hello > /workspace/hello && echo "wrote /workspace/hello (gone after the run)"
python3 -c "print(\"python works:\", 6 * 7)"
'
echo
echo "Next: make check   (every test tier)"
