#!/usr/bin/env python3
"""Build small OCI layouts and docker-archive tars offline, for tests/integration/images.sh.

usage: mkimage.py KIND OUT [NAME]
  KIND: oci (a layout directory), oci-tar, docker (docker-archive tar), shared (a second
  image on the same base layer: OUT an OCI layout), debian (one layer: apt, dpkg and what
  they need, as this host's dpkg installed them, its package lists and sources), or a hostile
  variant: abs, dotdot,
  symlink-write, hardlink-out, device, digest, corrupt-gzip, many.
The base layer: /bin/busybox (the host's) with sh/cat/ls/env/pwd/id links, /etc/os-release,
/etc/gone, /opt/dir/{a,b}; the second layer deletes /etc/gone (.wh.) and makes /opt/dir opaque
with only c in it.  The config: Env, WorkingDir /srv, Cmd ["cat", "/etc/os-release"].
"""
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile

BUSYBOX = "/bin/busybox"


def tar_bytes(entries, gz=False):
    """entries: list of (TarInfo, data bytes or None)"""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    b = raw.getvalue()
    return gzip.compress(b, mtime=0) if gz else b


def f(name, data, mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = mode
    ti.mtime = 1700000000
    return (ti, data)


def d(name, mode=0o755):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    ti.mode = mode
    return (ti, None)


def link(name, target, hard=False):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    ti.linkname = target
    return (ti, None)


def dev(name):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.CHRTYPE
    ti.devmajor, ti.devminor = 1, 3
    return (ti, None)


def base_layer(extra=""):
    bb = open(BUSYBOX, "rb").read()
    es = [d("bin/"), f("bin/busybox", bb, 0o755)]
    es += [link("bin/" + n, "busybox") for n in ("sh", "cat", "ls", "env", "pwd", "id", "echo", "stat")]
    es += [d("etc/"), f("etc/os-release", b'PRETTY_NAME="nsbox test image"\nID=nsboxtest\n' + extra.encode()),
           f("etc/gone", b"deleted above\n"), d("opt/"), d("opt/dir/"), f("opt/dir/a", b"a\n"), f("opt/dir/b", b"b\n"),
           d("srv/", 0o777)]
    return tar_bytes(es, gz=True)


# Debian from the host's own packages: apt's closure, as dpkg installed it here (offline).
DEBIAN_ROOTS = ["apt", "bash", "dash", "libc-bin", "coreutils", "dpkg", "base-files", "base-passwd", "debianutils", "sed", "grep",
                "tar", "gzip", "findutils", "diffutils", "mawk", "debconf"]


def installed(pkg):
    out = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}", pkg], capture_output=True, text=True).stdout
    return out.startswith("ii")


def closure(roots):
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Pre-Depends}, ${Depends}", p], capture_output=True, text=True).stdout
        for alt in filter(None, (a.strip() for a in out.split(","))):
            for a in alt.split("|"):
                n = re.split(r"[ (:]", a.strip())[0]
                if installed(n):
                    todo.append(n)
                    break
    return sorted(seen)


def debian_layer():
    pkgs = closure(DEBIAN_ROOTS)
    names = set()
    for p in pkgs:
        for line in subprocess.run(["dpkg", "-L", p], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("/") and os.path.lexists(line) and not os.path.isdir(line):
                # merged /usr: /bin/x is usr/bin/x; the top-level links are added below
                names.add(os.path.join(os.path.realpath(os.path.dirname(line)), os.path.basename(line)).lstrip("/"))
    info = "/var/lib/dpkg/info"
    for n in os.listdir(info):
        if n.split(".")[0].split(":")[0] in pkgs:
            names.add(os.path.join(info, n).lstrip("/"))
    for n in os.listdir("/var/lib/apt/lists"):
        p = os.path.join("/var/lib/apt/lists", n)
        if os.path.isfile(p) and n != "lock":
            names.add(p.lstrip("/"))
    status = subprocess.run(["dpkg-query", "-s"] + pkgs, capture_output=True, text=True).stdout.encode()
    raw = io.BytesIO()
    dirs = set()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for top in ("bin", "sbin", "lib", "lib64"):
            if os.path.islink("/" + top):
                t.addfile(link(top, os.readlink("/" + top))[0])
        for n in sorted(names):
            parts = n.split("/")
            for i in range(1, len(parts)):
                dname = "/".join(parts[:i])
                if dname not in dirs and not os.path.islink("/" + dname):
                    dirs.add(dname)
                    t.addfile(d(dname + "/")[0])
            t.add("/" + n, arcname=n, recursive=False)
        for dname in ("tmp", "root", "var/cache/apt/archives/partial", "var/lib/apt/lists/partial", "var/lib/dpkg/updates",
                      "var/lib/dpkg/triggers", "var/lib/dpkg/alternatives", "var/log/apt", "etc/apt/apt.conf.d",
                      "etc/apt/preferences.d", "etc/apt/trusted.gpg.d", "etc/apt/sources.list.d", "etc/dpkg/dpkg.cfg.d"):
            for i in range(1, dname.count("/") + 2):
                sub = "/".join(dname.split("/")[:i])
                if sub not in dirs:
                    dirs.add(sub)
                    t.addfile(d(sub + "/", 0o1777 if sub == "tmp" else 0o755)[0])
        for name, data in (("var/lib/dpkg/status", status), ("var/lib/dpkg/available", b""),
                           ("etc/apt/sources.list.d/debian.sources", open("/etc/apt/sources.list.d/debian.sources", "rb").read()),
                           ("etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n"),
                           ("etc/group", b"root:x:0:\nnogroup:x:65534:\n")):
            ti, data = f(name, data)
            t.addfile(ti, io.BytesIO(data))
    return raw.getvalue()


def upper_layer():
    es = [d("etc/"), f("etc/.wh.gone", b""), d("opt/"), d("opt/dir/"), f("opt/dir/.wh..wh..opq", b""),
          f("opt/dir/c", b"c\n")]
    return tar_bytes(es, gz=True)


def shared_upper():
    return tar_bytes([d("etc/"), f("etc/second", b"second image\n")], gz=True)


def config(layers_plain):
    return {"architecture": "amd64", "os": "linux", "created": "2024-01-01T00:00:00Z",
            "config": {"Env": ["PATH=/bin", "IMGVAR=from-image", "OVERRIDE=image"], "WorkingDir": "/srv",
                       "Cmd": ["cat", "/etc/os-release"]},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(x).hexdigest() for x in layers_plain]}}


def write_blob(out, data):
    h = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(out, "blobs", "sha256", h), "wb") as fh:
        fh.write(data)
    return "sha256:" + h


def oci_layout(out, layers, name, cfg=None, digest_override=None):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "oci-layout"), "w") as fh:
        json.dump({"imageLayoutVersion": "1.0.0"}, fh)
    descs = []
    for i, l in enumerate(layers):
        dg = write_blob(out, l)
        if digest_override is not None and i == digest_override:
            dg = "sha256:" + "0" * 64
            os.rename(os.path.join(out, "blobs/sha256", hashlib.sha256(l).hexdigest()), os.path.join(out, "blobs/sha256", "0" * 64))
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": dg, "size": len(l)})
    cfg = cfg or config([gzip.decompress(l) for l in layers])
    cb = json.dumps(cfg).encode()
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": write_blob(out, cb), "size": len(cb)},
           "layers": descs}
    mb = json.dumps(man).encode()
    idx = {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                              "digest": write_blob(out, mb), "size": len(mb),
                                              "annotations": {"org.opencontainers.image.ref.name": name}}]}
    with open(os.path.join(out, "index.json"), "w") as fh:
        json.dump(idx, fh)


def tar_dir(src, out):
    with tarfile.open(out, "w") as t:
        for n in sorted(os.listdir(src)):
            t.add(os.path.join(src, n), arcname=n)


def docker_archive(out, layers, tag):
    plain = [gzip.decompress(l) for l in layers]
    entries = []
    paths = []
    for p in plain:
        h = hashlib.sha256(p).hexdigest()
        entries.append(f(h + "/layer.tar", p))
        paths.append(h + "/layer.tar")
    cb = json.dumps(config(plain)).encode()
    ch = hashlib.sha256(cb).hexdigest()
    entries.append(f(ch + ".json", cb))
    entries.append(f("manifest.json", json.dumps([{"Config": ch + ".json", "RepoTags": [tag], "Layers": paths}]).encode()))
    with open(out, "wb") as fh:
        fh.write(tar_bytes(entries))


def hostile(kind, out):
    bad = {
        "abs": [f("/etc/abs", b"x")],
        "dotdot": [d("etc/"), f("etc/../../x", b"x")],
        "symlink-write": [link("esc", "/tmp"), f("esc/pwned", b"x")],
        # a directory written to, deleted, made a symlink, written through again
        "symlink-swap": [d("a/"), f("a/x", b"x"), f(".wh.a", b""), link("a", "/tmp"), f("a/pwned", b"x")],
        "hardlink-out": [link("etc-shadow", "../../../etc/shadow", hard=True)],
        "device": [dev("null")],
        "many": [f("f%d" % i, b"") for i in range(60)],
    }
    if kind in bad:
        oci_layout(out, [base_layer(), tar_bytes(bad[kind], gz=True)], "hostile")
    elif kind == "digest":
        oci_layout(out, [base_layer("digest")], "hostile")
        # one byte of the layer changed after its digest was taken
        idx = json.load(open(os.path.join(out, "index.json")))
        man = json.load(open(os.path.join(out, "blobs/sha256", idx["manifests"][0]["digest"][7:])))
        p = os.path.join(out, "blobs/sha256", man["layers"][0]["digest"][7:])
        b = bytearray(open(p, "rb").read())
        b[len(b) // 2] ^= 0xff
        open(p, "wb").write(bytes(b))
    elif kind == "corrupt-gzip":
        oci_layout(out, [base_layer(), b"\x1f\x8b\x08\x00" + b"garbage" * 100], "hostile", cfg=config([]))
    else:
        sys.exit("unknown kind " + kind)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else "test/image:1"
    if kind == "oci":
        oci_layout(out, [base_layer(), upper_layer()], name)
    elif kind == "oci-tar":
        oci_layout(out + ".d", [base_layer(), upper_layer()], name)
        tar_dir(out + ".d", out)
    elif kind == "docker":
        docker_archive(out, [base_layer(), upper_layer()], name)
    elif kind == "debian":
        layer = debian_layer()
        oci_layout(out, [gzip.compress(layer, compresslevel=1, mtime=0)], name,
                   cfg={"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["bash"]},
                        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}})
    elif kind == "shared":
        oci_layout(out, [base_layer(), shared_upper()], name)
    else:
        hostile(kind, out)


main()
