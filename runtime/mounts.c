/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Building the sandbox root.
 *
 * Everything is staged on one tmpfs mounted over /tmp in the new mount namespace (invisible to
 * the host, and gone when the namespace is): the overlay's upper and work directories, the
 * skeleton lower layer of the host view, and the sandbox's /tmp.  Its size is the sandbox's disk
 * limit.  Mount targets inside the new root are walked component by component with O_NOFOLLOW
 * and mounted through /proc/self/fd/N, so a symlink in a root filesystem cannot redirect a mount
 * or a mkdir onto the host (crun's safe_openat, runc CVE-2021-30465). */
#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../rootfs/hostview.h"
#include "net.h"
#include "pyvenv.h"
#include "userns.h"
#include "util.h"

#define STAGE "/tmp"
#define STAGE_ROOT STAGE "/root"
#define FD_PATH_MAX 32

typedef struct fdpath {
        char s[FD_PATH_MAX];
} fdpath;

static fdpath fd_path(int fd)
{
        fdpath p;
        snprintf(p.s, sizeof(p.s), "/proc/self/fd/%d", fd);
        return p;
}

static int do_mount(const char *src, const char *dst, const char *shown, const char *type, unsigned long flags,
                    const char *data, nsbox_error *err)
{
        if (mount(src, dst, type, flags, data) < 0)
                return nsbox_err(err, errno, "mount %s on '%s'", type ? type : (src ? src : "bind"), shown);
        return 0;
}

static int set_attr(int fd, const char *shown, bool recursive, uint64_t set, uint64_t clr, nsbox_error *err)
{
        struct mount_attr attr = { .attr_set = set, .attr_clr = clr };
        unsigned flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
        if (syscall(SYS_mount_setattr, fd, "", flags, &attr, sizeof(attr)) < 0)
                return nsbox_err(err, errno, "set mount flags on '%s'", shown);
        return 0;
}

/* Open PATH (absolute, normalized) below rootfd, creating missing components: directories, and
 * the last one as a file when want_file.  No symlink is followed, not even in the middle. */
static int open_in_root(int rootfd, const char *path, bool want_file, int *ret, nsbox_error *err)
{
        _cleanup_close_ int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return nsbox_err(err, errno, "dup");
        char comp[NAME_MAX + 1];
        const char *p = path;
        while (*p == '/')
                p++;
        while (*p) {
                const char *s = p;
                while (*p && *p != '/')
                        p++;
                size_t len = (size_t)(p - s);
                while (*p == '/')
                        p++;
                if (len > NAME_MAX)
                        return nsbox_err(err, ENAMETOOLONG, "'%s'", path);
                memcpy(comp, s, len);
                comp[len] = '\0';
                bool last = !*p;
                int fd;
                if (last && want_file) {
                        fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0 && errno == ENOENT) {
                                int c = openat(cur, comp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                                if (c < 0)
                                        return nsbox_err(err, errno, "create mount point '%s' in the sandbox root", path);
                                close(c);
                                fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                        }
                        if (fd >= 0) {
                                struct stat st;
                                if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)) {
                                        close(fd);
                                        return nsbox_err(err, 0, "'%s' in the sandbox root is a %s, not a file; refusing to mount over it",
                                                         path, S_ISDIR(st.st_mode) ? "directory" : "symlink");
                                }
                        }
                } else {
                        fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
                        if (fd < 0 && errno == ENOENT) {
                                if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                                        return nsbox_err(err, errno, "create directory '%s' in the sandbox root", path);
                                fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
                        }
                        if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
                                return nsbox_err(err, 0, "'%s' in the sandbox root is not a directory (a symlink?); refusing to mount over it", path);
                }
                if (fd < 0)
                        return nsbox_err(err, errno, "open '%s' in the sandbox root", path);
                close(cur);
                cur = fd;
        }
        *ret = steal_fd(&cur);
        return 0;
}

/* Clone a tree (MS_REC: nothing below it is uncovered), set its flags while it is still detached
 * and attach it: a read-only bind is never visible writable, and nothing is looked up twice.
 * An empty FROM or TO means the fd itself. */
static int clone_tree(int from_dfd, const char *from, uint64_t attrs, const char *shown, int *ret, nsbox_error *err)
{
        _cleanup_close_ int t = open_tree(from_dfd, from, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                                                   (*from ? 0 : AT_EMPTY_PATH));
        if (t < 0)
                return nsbox_err(err, errno, "bind '%s'", *from ? from : shown);
        int r = set_attr(t, shown, true, attrs, 0, err);
        if (r < 0)
                return r;
        *ret = steal_fd(&t);
        return 0;
}

static int attach_tree(int from_dfd, const char *from, int to_dfd, const char *to, uint64_t attrs, const char *shown,
                       nsbox_error *err)
{
        _cleanup_close_ int t = -1;
        int r = clone_tree(from_dfd, from, attrs, shown, &t, err);
        if (r < 0)
                return r;
        if (move_mount(t, "", to_dfd, to, MOVE_MOUNT_F_EMPTY_PATH | (*to ? 0 : MOVE_MOUNT_T_EMPTY_PATH)) < 0)
                return nsbox_err(err, errno, "bind onto '%s'", shown);
        return 0;
}

#define ATTR_BIND_RO (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
#define ATTR_BIND_RW (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

/* A host tree cloned and flagged while still detached, to be attached at TARGET later. */
struct prepared_tree {
        int fd; /* -1: not a bind; -2 ends the array */
        bool is_dir;
};

static int prepare_tree(const char *src, bool readonly, prepared_tree *ret, nsbox_error *err)
{
        _cleanup_close_ int t = -1;
        int r = clone_tree(AT_FDCWD, src, readonly ? ATTR_BIND_RO : ATTR_BIND_RW, src, &t, err);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(t, &st) < 0)
                return nsbox_err(err, errno, "bind '%s'", src);
        ret->fd = steal_fd(&t);
        ret->is_dir = S_ISDIR(st.st_mode);
        return 0;
}

/* A tree the launcher cloned and flagged (an id-mapped bind): taken over from *fd. */
static int adopt_tree(int *fd, const char *src, prepared_tree *ret, nsbox_error *err)
{
        struct stat st;
        if (fstat(*fd, &st) < 0)
                return nsbox_err(err, errno, "bind '%s'", src);
        ret->fd = steal_fd(fd);
        ret->is_dir = S_ISDIR(st.st_mode);
        return 0;
}

/* Attach a prepared tree onto TARGET inside the root, whose mount point is walked without
 * following symlinks (it may be in a root filesystem we do not control). */
static int attach_prepared(int rootfd, const prepared_tree *t, const char *target, nsbox_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = open_in_root(rootfd, target, !t->is_dir, &fd, err);
        if (r < 0)
                return r;
        if (move_mount(t->fd, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return nsbox_err(err, errno, "bind onto '%s'", target);
        return 0;
}

static int mount_tmpfs_in_root(int rootfd, const char *target, const char *opts, unsigned long flags, nsbox_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = open_in_root(rootfd, target, false, &fd, err);
        if (r < 0)
                return r;
        fdpath fp = fd_path(fd);
        return do_mount("tmpfs", fp.s, target, "tmpfs", flags, opts, err);
}

/* Replace a file in ETCFD, never through a symlink. */
static int replace_file(int etcfd, const char *name, const char *content, nsbox_error *err)
{
        if (unlinkat(etcfd, name, 0) < 0 && errno != ENOENT)
                return nsbox_err(err, errno, "replace '/etc/%s' in the sandbox root", name);
        int r = write_file_at(etcfd, name, content, 0644);
        if (r < 0)
                return nsbox_err(err, -r, "write '/etc/%s' in the sandbox root", name);
        return 0;
}

/* passwd and group: a root filesystem's own entries, less any that clash with the sandbox user,
 * then the sandbox user. */
static int identity_file(int etcfd, int lower_etcfd, const char *name, const char *ours, const char *key_name, unsigned key_id,
                         nsbox_error *err)
{
        _cleanup_sb_ strbuf sb;
        sb_init(&sb, 1 << 20);
        _cleanup_free_ char *old = NULL;
        if (lower_etcfd >= 0 && read_file_at(lower_etcfd, name, O_NOFOLLOW, 1 << 20, &old, NULL) == 0) {
                char prefix[96], idfield[32];
                snprintf(prefix, sizeof(prefix), "%s:", key_name);
                snprintf(idfield, sizeof(idfield), ":%u:", key_id);
                char *save = NULL;
                for (char *line = strtok_r(old, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                        const char *colon = strchr(line, ':');
                        const char *second = colon ? strchr(colon + 1, ':') : NULL;
                        if (!strncmp(line, prefix, strlen(prefix)) || (second && !strncmp(second, idfield, strlen(idfield))))
                                continue;
                        if (sb_appendf(&sb, "%s\n", line) < 0)
                                return nsbox_err(err, E2BIG, "'/etc/%s' in the root filesystem", name);
                }
        }
        if (sb_appendf(&sb, "%s", ours) < 0)
                return -ENOMEM;
        return replace_file(etcfd, name, sb.buf, err);
}

/* Whose /etc/passwd and group the sandbox's extend: the topmost store layer that has them (an
 * image's, a snapshot's), else the root filesystem's. */
static int identity_source(const nsbox_sources *src)
{
        for (size_t i = 0; i < src->n_layers; i++)
                if (faccessat(src->layer_fds[i], "etc/passwd", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                        return src->layer_fds[i];
        return src->rootfs_fd;
}

/* Write the identity files into ETCFD.  With a root filesystem (rootfs_fd >= 0), ETCFD is /etc
 * of the overlay's upper layer, and the root filesystem's own entries are kept. */
static int write_identity(int etcfd, int rootfs_fd, const nsbox_policy *p, nsbox_error *err)
{
        bool from_rootfs = rootfs_fd >= 0;
        _cleanup_close_ int lower_etcfd = from_rootfs ? openat(rootfs_fd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        const char *shell = (from_rootfs ? faccessat(rootfs_fd, "bin/bash", X_OK, 0) : access("/bin/bash", X_OK)) == 0 ? "/bin/bash" : "/bin/sh";
        char passwd[1024], group[512], hosts[512], hostname[80];
        snprintf(passwd, sizeof(passwd), "%s%s:x:%u:%u::%s:%s\n%s", p->uid == 0 || from_rootfs ? "" : "root:x:0:0:root:/root:/bin/sh\n",
                 p->user_name, p->uid, p->gid, p->home, shell,
                 from_rootfs ? "" : "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
        snprintf(group, sizeof(group), "%s%s:x:%u:\n%s", p->gid == 0 || from_rootfs ? "" : "root:x:0:\n", p->user_name, p->gid,
                 from_rootfs ? "" : "nogroup:x:65534:\n");
        snprintf(hosts, sizeof(hosts), "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n", p->hostname);
        snprintf(hostname, sizeof(hostname), "%s\n", p->hostname);
        int r;
        if ((r = identity_file(etcfd, lower_etcfd, "passwd", passwd, p->user_name, p->uid, err)) < 0 ||
            (r = identity_file(etcfd, lower_etcfd, "group", group, p->user_name, p->gid, err)) < 0 ||
            (r = replace_file(etcfd, "hosts", hosts, err)) < 0 || (r = replace_file(etcfd, "hostname", hostname, err)) < 0)
                return r;
        if (p->net == NET_NONE)
                r = replace_file(etcfd, "resolv.conf", "# nsbox: network mode none, no name server\n", err);
        else if (p->dns && p->net_backend == NET_BACKEND_VETH) {
                uint8_t ns[8][4];
                size_t n = nsbox_host_nameservers(ns, ARRAY_SIZE(ns));
                char conf[512];
                int len = snprintf(conf, sizeof(conf), "# nsbox: network mode nat (veth), the host's name servers%s\n",
                                   n ? "" : ": none that a sandbox can reach (they are on the host's loopback)");
                for (size_t i = 0; i < n; i++)
                        len += snprintf(conf + len, sizeof(conf) - (size_t)len, "nameserver %u.%u.%u.%u\n", ns[i][0], ns[i][1], ns[i][2],
                                        ns[i][3]);
                r = replace_file(etcfd, "resolv.conf", conf, err);
        } else if (p->dns)
                r = replace_file(etcfd, "resolv.conf", "# nsbox: network mode nat, slirp4netns forwards to the host's resolver\nnameserver " NSBOX_NAT_DNS "\n", err);
        else
                r = replace_file(etcfd, "resolv.conf", "# nsbox: network.dns is false, no name server\n", err);
        return r;
}

/* What the host has of each host-view entry, looked up once. */
typedef enum { HV_ABSENT, HV_MADE_LINK, HV_COPIED, HV_BIND_DIR, HV_BIND_FILE } hv_kind;
#define HOSTVIEW_MAX 64
#define HOSTVIEW_COPY_MAX (256 * 1024)

/* Create REL (relative) in our own fresh tmpfs, with its parents: no symlink can be in the way. */
static int skel_create(int dfd, const char *rel, bool dir, nsbox_error *err)
{
        for (int attempt = 0; attempt < 2; attempt++) {
                int r = dir ? mkdirat(dfd, rel, 0755) : openat(dfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (r >= 0 || errno == EEXIST) {
                        if (!dir && r >= 0)
                                close(r);
                        return 0;
                }
                if (errno != ENOENT || attempt)
                        break;
                char parent[PATH_MAX];
                snprintf(parent, sizeof(parent), "%s", rel);
                char *slash = strrchr(parent, '/');
                if (!slash)
                        break;
                *slash = '\0';
                if ((r = skel_create(dfd, parent, true, err)) < 0)
                        return r;
        }
        return nsbox_err(err, errno, "create '/%s' in the sandbox skeleton", rel);
}

static int skel_copy(int lowerfd, const char *path, const struct stat *st, nsbox_error *err)
{
        _cleanup_close_ int in = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
                return nsbox_err(err, errno, "host view: open '%s'", path);
        _cleanup_close_ int out = openat(lowerfd, path + 1, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st->st_mode & 0755);
        if (out < 0)
                return nsbox_err(err, errno, "host view: create '%s'", path);
        for (off_t left = st->st_size; left > 0;) {
                ssize_t n = sendfile(out, in, NULL, (size_t)left);
                if (n <= 0)
                        return nsbox_err(err, n < 0 ? errno : EIO, "host view: copy '%s'", path);
                left -= n;
        }
        return 0;
}

/* Debian's /etc/profile, save that the user id comes from bash's EUID: the stock file runs id(1)
 * at every login shell, and E2B's SDKs run each command as `bash -l -c`, so the fork and exec of
 * id was a third of a command's time.  Other shells still run id.  And the sandbox's Python
 * environment (VIRTUAL_ENV, pyvenv.h) stays first in PATH, as outside a login shell: else
 * `python` is not found and pip is the system's, which PEP 668 stops. */
static const char host_profile[] =
        "# /etc/profile of an nsbox sandbox: Debian's, with the user id from bash's EUID (no id(1) run)\n"
        "nsbox_uid=${EUID:-$(id -u)}\n"
        "if [ \"$nsbox_uid\" -eq 0 ]; then\n"
        "  PATH=\"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\n"
        "else\n"
        "  PATH=\"/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games\"\n"
        "fi\n"
        "if [ -n \"${VIRTUAL_ENV-}\" ] && [ -d \"$VIRTUAL_ENV/bin\" ]; then\n"
        "  PATH=\"$VIRTUAL_ENV/bin:$PATH\"\n"
        "fi\n"
        "export PATH\n"
        "if [ \"${PS1-}\" ]; then\n"
        "  if [ \"${BASH-}\" ] && [ \"$BASH\" != \"/bin/sh\" ]; then\n"
        "    if [ -f /etc/bash.bashrc ]; then\n"
        "      . /etc/bash.bashrc\n"
        "    fi\n"
        "  elif [ \"$nsbox_uid\" -eq 0 ]; then\n"
        "    PS1='# '\n"
        "  else\n"
        "    PS1='$ '\n"
        "  fi\n"
        "fi\n"
        "unset nsbox_uid\n"
        "if [ -d /etc/profile.d ]; then\n"
        "  for i in /etc/profile.d/*.sh; do\n"
        "    if [ -r $i ]; then\n"
        "      . $i\n"
        "    fi\n"
        "  done\n"
        "  unset i\n"
        "fi\n";

/* The host view's lower layer: empty mount points and the host's own symlinks (bin -> usr/bin
 * on merged-/usr hosts), on the staging tmpfs.  The binds go onto the merged root later. */
static int build_host_skeleton(int lowerfd, hv_kind *plan, nsbox_error *err)
{
        static const char *const dirs[] = { "etc", "proc", "dev", "tmp", "run", "var", "home", "mnt", "opt" };
        int r;
        if (nsbox_hostview_len > HOSTVIEW_MAX)
                return nsbox_err(err, 0, "host view has more than %d entries", HOSTVIEW_MAX);
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                if ((r = skel_create(lowerfd, dirs[i], true, err)) < 0)
                        return r;
        if (symlinkat("../tmp", lowerfd, "var/tmp") < 0)
                return nsbox_err(err, errno, "create '/var/tmp'");
        if ((r = write_file_at(lowerfd, "etc/profile", host_profile, 0644)) < 0)
                return nsbox_err(err, -r, "create '/etc/profile'");
        for (size_t i = 0; i < nsbox_hostview_len; i++) {
                const nsbox_hostview_entry *e = &nsbox_hostview[i];
                struct stat st;
                plan[i] = HV_ABSENT;
                if (lstat(e->path, &st) < 0) {
                        if (errno == ENOENT && (e->flags & HV_OPTIONAL))
                                continue;
                        return nsbox_err(err, errno, "host view: '%s'", e->path);
                }
                if (S_ISLNK(st.st_mode) && (e->flags & HV_LINK)) {
                        char target[PATH_MAX];
                        ssize_t n = readlink(e->path, target, sizeof(target) - 1);
                        if (n < 0)
                                return nsbox_err(err, errno, "host view: readlink '%s'", e->path);
                        target[n] = '\0';
                        if (symlinkat(target, lowerfd, e->path + 1) < 0)
                                return nsbox_err(err, errno, "host view: symlink '%s'", e->path);
                        plan[i] = HV_MADE_LINK;
                        continue;
                }
                if (S_ISLNK(st.st_mode) && stat(e->path, &st) < 0) {
                        if (e->flags & HV_OPTIONAL)
                                continue; /* a dangling symlink on the host */
                        return nsbox_err(err, errno, "host view: '%s'", e->path);
                }
                if (S_ISREG(st.st_mode) && st.st_size <= HOSTVIEW_COPY_MAX) {
                        /* a small file is copied: cheaper than a bind and its unmount at exit */
                        if ((r = skel_copy(lowerfd, e->path, &st, err)) < 0)
                                return r;
                        plan[i] = HV_COPIED;
                        continue;
                }
                if ((r = skel_create(lowerfd, e->path + 1, S_ISDIR(st.st_mode), err)) < 0)
                        return r;
                plan[i] = S_ISDIR(st.st_mode) ? HV_BIND_DIR : HV_BIND_FILE;
        }
        return 0;
}

/* A writable root: the host view's own empty directories (/home, /opt...) take the user's
 * files too, as / does (E2B's /home/user, deepagents' /large_tool_results). */
static int open_skeleton_up(int lowerfd, nsbox_error *err)
{
        static const char *const dirs[] = { "home", "mnt", "opt", "run", "var" };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                if (fchmodat(lowerfd, dirs[i], 01777, 0) < 0)
                        return nsbox_err(err, errno, "chmod '/%s' in the sandbox skeleton", dirs[i]);
        return 0;
}

static int bind_host_view(int rootfd, const hv_kind *plan, nsbox_error *err)
{
        for (size_t i = 0; i < nsbox_hostview_len; i++) {
                if (plan[i] != HV_BIND_DIR && plan[i] != HV_BIND_FILE)
                        continue;
                /* the target is our own skeleton entry: relative to the root, no foreign symlink */
                const char *path = nsbox_hostview[i].path;
                int r = attach_tree(AT_FDCWD, path, rootfd, path + 1, ATTR_BIND_RO, path, err);
                if (r < 0)
                        return nsbox_err_wrap(err, r, "host view");
        }
        return 0;
}

/* /dev: a small tmpfs with only the harmless character devices (bound from the host, since a
 * user namespace cannot mknod), a private devpts, /dev/shm, and the usual symlinks. */
static int setup_dev(int rootfd, uint64_t shm_size, nsbox_error *err)
{
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
        static const char *const links[][2] = {
                { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" },
                { "/proc/self/fd/2", "stderr" }, { "pts/ptmx", "ptmx" },
        };
        int r = mount_tmpfs_in_root(rootfd, "/dev", "mode=0755,size=64k,nr_inodes=64", MS_NOSUID | MS_NOEXEC, err);
        if (r < 0)
                return r;
        _cleanup_close_ int dev = -1;
        if ((r = open_in_root(rootfd, "/dev", false, &dev, err)) < 0)
                return r;
        _cleanup_close_ int devd = openat(dev, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (devd < 0)
                return nsbox_err(err, errno, "open /dev");
        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
                /* a plain bind: a device node has nothing below it and no flag matters */
                char host[32], target[64];
                snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
                snprintf(target, sizeof(target), "/proc/self/fd/%d/%s", devd, nodes[i]);
                if ((r = skel_create(devd, nodes[i], false, err)) < 0 || (r = do_mount(host, target, host, NULL, MS_BIND, NULL, err)) < 0)
                        return r;
        }
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                if (symlinkat(links[i][0], devd, links[i][1]) < 0)
                        return nsbox_err(err, errno, "create '/dev/%s'", links[i][1]);
        _cleanup_close_ int pts = -1;
        if ((r = open_in_root(rootfd, "/dev/pts", false, &pts, err)) < 0)
                return r;
        fdpath fp = fd_path(pts);
        /* (devpts and proc are new superblocks, not binds: the classic mount(2) through the fd) */
        /* newinstance: the sandbox's ptys are its own, none of the host's are reachable */
        if ((r = do_mount("devpts", fp.s, "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620", err)) < 0)
                return r;
        char shm_opts[64];
        snprintf(shm_opts, sizeof(shm_opts), "mode=1777,size=%llu", (unsigned long long)shm_size);
        if ((r = mount_tmpfs_in_root(rootfd, "/dev/shm", shm_opts, MS_NOSUID | MS_NODEV, err)) < 0)
                return r;
        /* nothing may be added to /dev afterwards */
        _cleanup_close_ int devm = -1;
        if ((r = open_in_root(rootfd, "/dev", false, &devm, err)) < 0)
                return r;
        return set_attr(devm, "/dev", false, MOUNT_ATTR_RDONLY, 0, err);
}

int nsbox_boot_id_fd = -1;

/* A random version 4 UUID and a newline, as the kernel's boot_id reads: 37 bytes and a NUL */
static int new_boot_id(char id[40])
{
        uint8_t b[16];
        if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
                return -errno;
        b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
        b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
        snprintf(id, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
                 b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        return 0;
}

int nsbox_boot_id_renew(void)
{
        char id[40];
        int r = new_boot_id(id);
        if (r < 0)
                return r;
        if (nsbox_boot_id_fd < 0)
                return -EBADF;
        return pwrite(nsbox_boot_id_fd, id, strlen(id), 0) == (ssize_t)strlen(id) ? 0 : -errno;
}

/* The host's boot_id names the host (and its boot) to whoever reads it: the sandbox gets a
 * random one of its own, as if it had booted, so programs that key state on it still work.
 * The file lives on the staging tmpfs and is bound read-only over the entry; nsbox_boot_id_fd
 * keeps it writable for its agent alone, which gives it a new one when the sandbox reboots. */
static int fake_boot_id(int procfd, nsbox_error *err)
{
        static const char entry[] = "sys/kernel/random/boot_id";
        _cleanup_close_ int e = openat(procfd, entry, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (e < 0)
                return 0; /* not in this kernel */
        char id[40];
        int r = new_boot_id(id);
        if (r < 0)
                return nsbox_err(err, -r, "getrandom for /proc/%s", entry);
        r = write_file_at(AT_FDCWD, STAGE "/boot_id", id, 0444);
        if (r < 0)
                return nsbox_err(err, -r, "write '%s'", STAGE "/boot_id");
        if (nsbox_boot_id_fd < 0 && (nsbox_boot_id_fd = open(STAGE "/boot_id", O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return nsbox_err(err, errno, "open '%s'", STAGE "/boot_id");
        fdpath ep = fd_path(e);
        if ((r = do_mount(STAGE "/boot_id", ep.s, "/proc/sys/kernel/random/boot_id", NULL, MS_BIND, NULL, err)) < 0)
                return r;
        _cleanup_close_ int m = openat(procfd, entry, O_PATH | O_NOFOLLOW | O_CLOEXEC); /* the bind, now */
        if (m < 0)
                return nsbox_err(err, errno, "open /proc/%s", entry);
        return set_attr(m, "/proc/sys/kernel/random/boot_id", false, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, 0, err);
}

/* A fresh /proc for the new pid namespace, with the entries that describe or steer the host
 * kernel made read-only or hidden. */
static int setup_proc(int rootfd, nsbox_error *err)
{
        static const char *const readonly[] = { "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs" };
        /* (entries that are mode 0400 for host root, like kpageflags, are unreadable already) */
        /* (cmdline and interrupts: the host's boot options and devices, which name the host) */
        static const char *const hidden_files[] = { "/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list",
                                                    "/proc/sched_debug", "/proc/latency_stats", "/proc/kallsyms",
                                                    "/proc/cmdline", "/proc/interrupts" };
        static const char *const hidden_dirs[] = { "/proc/acpi", "/proc/scsi", "/proc/driver" };
        _cleanup_close_ int fd = -1;
        int r = open_in_root(rootfd, "/proc", false, &fd, err);
        if (r < 0)
                return r;
        fdpath fp = fd_path(fd);
        if ((r = do_mount("proc", fp.s, "/proc", "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, NULL, err)) < 0)
                return r;
        _cleanup_close_ int procfd = -1;
        if ((r = open_in_root(rootfd, "/proc", false, &procfd, err)) < 0)
                return r;
        /* while /proc/sys is still writable (by us only: we hold CAP_SYS_RESOURCE) */
        if ((r = nsbox_userns_limit_inotify(procfd, err)) < 0)
                return nsbox_err_wrap(err, r, "limit the sandbox's inotify instances and watches");
        for (size_t i = 0; i < ARRAY_SIZE(readonly); i++) {
                if (faccessat(procfd, readonly[i] + 6, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* not in this kernel */
                if ((r = attach_tree(procfd, readonly[i] + 6, procfd, readonly[i] + 6, ATTR_BIND_RO | MOUNT_ATTR_NOEXEC,
                                     readonly[i], err)) < 0)
                        return r;
        }
        for (size_t i = 0; i < ARRAY_SIZE(hidden_files); i++) {
                struct stat st;
                /* absent from this kernel, or readable by host root only: nothing to hide */
                if (fstatat(procfd, hidden_files[i] + 6, &st, AT_SYMLINK_NOFOLLOW) < 0 || !(st.st_mode & (S_IRGRP | S_IROTH)))
                        continue;
                _cleanup_close_ int e = openat(procfd, hidden_files[i] + 6, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (e < 0)
                        continue;
                fdpath ep = fd_path(e);
                if ((r = do_mount("/dev/null", ep.s, hidden_files[i], NULL, MS_BIND, NULL, err)) < 0)
                        return r;
        }
        for (size_t i = 0; i < ARRAY_SIZE(hidden_dirs); i++) {
                _cleanup_close_ int e = openat(procfd, hidden_dirs[i] + 6, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
                if (e < 0)
                        continue;
                fdpath ep = fd_path(e);
                if ((r = do_mount("tmpfs", ep.s, hidden_dirs[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,nr_inodes=1", err)) < 0)
                        return r;
        }
        return fake_boot_id(procfd, err);
}

static int pivot_into(const char *newroot, nsbox_error *err)
{
        if (chdir(newroot) < 0)
                return nsbox_err(err, errno, "chdir '%s'", newroot);
        /* pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves
         * the sandbox with no path to the host's filesystem (the lxc/runc idiom). */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return nsbox_err(err, errno, "pivot_root");
        if (mount(NULL, ".", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return nsbox_err(err, errno, "make old root private");
        if (umount2(".", MNT_DETACH) < 0)
                return nsbox_err(err, errno, "detach old root");
        if (chdir("/") < 0)
                return nsbox_err(err, errno, "chdir /");
        return 0;
}

static void close_trees(struct prepared_tree **trees)
{
        for (prepared_tree *t = *trees; t && t->fd != -2; t++)
                if (t->fd >= 0)
                        close(t->fd);
        free(*trees);
}

/* Give a writable directory to the sandbox user (a root-started sandbox creates it as the
 * namespace's root). */
static int own_dir(int fd, const nsbox_policy *p, const char *shown, nsbox_error *err)
{
        if (fchownat(fd, "", p->uid, p->gid, AT_EMPTY_PATH) < 0)
                return nsbox_err(err, errno, "chown '%s'", shown);
        return 0;
}

/* A hidden directory (or a bind source below one) as a bind shows it: at the mount's target
 * followed by rel, the same inode as on the host unless something was mounted over it since. */
struct hide_point {
        size_t mount;
        char *rel; /* "" (the target itself) or "a/b" */
        dev_t dev;
        ino_t ino;
};

/* Is PATH at or below DIR ("/" is above everything)?  Then *ret_rel is the rest ("" or "a/b"). */
static bool path_under(const char *path, const char *dir, const char **ret_rel)
{
        size_t n = strlen(dir);
        if (!strcmp(dir, "/")) {
                *ret_rel = path + 1;
                return true;
        }
        if (strncmp(path, dir, n) || (path[n] != '/' && path[n] != '\0'))
                return false;
        *ret_rel = path[n] == '/' ? path + n + 1 : path + n;
        return true;
}

static int add_hide(nsbox_sources *s, size_t mount, const char *host_path, const char *rel)
{
        struct stat st;
        if (stat(host_path, &st) < 0)
                return 0; /* gone: nothing to show */
        hide_point *h = realloc(s->hides, (s->n_hides + 1) * sizeof(*h));
        if (!h)
                return -ENOMEM;
        s->hides = h;
        h[s->n_hides] = (hide_point){ .mount = mount, .rel = strdup(rel), .dev = st.st_dev, .ino = st.st_ino };
        if (!h[s->n_hides].rel)
                return -ENOMEM;
        s->n_hides++;
        return 0;
}

static int find_hides(const nsbox_policy *p, char *const *hidden, nsbox_sources *s)
{
        for (size_t i = 0; i < p->n_mounts; i++) {
                const nsbox_mount *m = &p->mounts[i];
                if (m->type != MOUNT_BIND)
                        continue;
                for (char *const *h = hidden; h && *h; h++) {
                        const char *rel;
                        int r = 0;
                        if (path_under(*h, m->source, &rel))
                                r = add_hide(s, i, *h, rel); /* the source shows it, at rel */
                        else if (path_under(m->source, *h, &rel))
                                r = add_hide(s, i, m->source, ""); /* the source is part of it */
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* Cover what a bind shows of a hidden directory: an empty read-only tmpfs over a directory,
 * /dev/null over a file (a socket).  Walked without symlinks; skipped when the inode there is
 * no longer the hidden one (a later mount covers it already). */
static int apply_hides(int rootfd, const nsbox_policy *p, const nsbox_sources *s, nsbox_error *err)
{
        for (size_t i = 0; i < s->n_hides; i++) {
                const hide_point *h = &s->hides[i];
                _cleanup_free_ char *path = NULL;
                const char *target = p->mounts[h->mount].target;
                if (asprintf(&path, "%s%s%s", target + 1, *h->rel && target[1] ? "/" : "", h->rel) < 0)
                        return -ENOMEM;
                struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
                _cleanup_close_ int fd = (int)syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));
                struct stat st;
                /* covered, or out of the sandbox's reach (a directory its root may not search) */
                if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EACCES))
                        continue;
                if (fd < 0 || fstat(fd, &st) < 0)
                        return nsbox_err(err, errno, "hide nsbox's runtime directory at '/%s'", path);
                if (st.st_dev != h->dev || st.st_ino != h->ino)
                        continue;
                fdpath fp = fd_path(fd);
                int r = S_ISDIR(st.st_mode)
                                ? do_mount("tmpfs", fp.s, path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1,mode=0555", err)
                                : do_mount("/dev/null", fp.s, path, NULL, MS_BIND, NULL, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int nsbox_prepare_sources(const nsbox_policy *p, char *const *hidden, int *bind_fds, nsbox_sources *ret, nsbox_error *err)
{
        /* 3. Nothing we mount may propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return nsbox_err(err, errno, "make / private");
        prepared_tree *trees = calloc(p->n_mounts + 1, sizeof(*trees));
        if (!trees)
                return -ENOMEM;
        for (size_t i = 0; i <= p->n_mounts; i++)
                trees[i].fd = i == p->n_mounts ? -2 : -1;
        size_t n_layers = strv_length(p->layers);
        int *layer_fds = calloc(n_layers + 1, sizeof(*layer_fds));
        if (!layer_fds) {
                free(trees);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_layers; i++)
                layer_fds[i] = -1;
        *ret = (nsbox_sources){ .trees = trees, .rootfs_fd = -1, .layer_fds = layer_fds, .n_layers = n_layers };
        int r;
        if ((r = find_hides(p, hidden, ret)) < 0)
                return nsbox_err(err, -r, "hide nsbox's runtime directories");
        for (size_t i = 0; i < p->n_mounts; i++) {
                if (p->mounts[i].type != MOUNT_BIND)
                        continue;
                /* root-started: id-mapped by the launcher already (idmapped.h) */
                r = bind_fds && bind_fds[i] >= 0 ? adopt_tree(&bind_fds[i], p->mounts[i].source, &trees[i], err)
                                                 : prepare_tree(p->mounts[i].source, p->mounts[i].readonly, &trees[i], err);
                if (r < 0)
                        return r;
        }
        if (p->root == ROOT_DIR && (ret->rootfs_fd = open(p->root_path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                return nsbox_err(err, errno, "rootfs '%s'", p->root_path);
        /* store layers: the store is the caller's own and private, named by the supervisor */
        for (size_t i = 0; i < n_layers; i++)
                if ((layer_fds[i] = open(p->layers[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                        return nsbox_err(err, errno, "layer '%s'", p->layers[i]);
        return 0;
}

void nsbox_sources_release(nsbox_sources *s)
{
        close_trees(&s->trees);
        s->trees = NULL;
        if (s->rootfs_fd >= 0)
                close(s->rootfs_fd);
        s->rootfs_fd = -1;
        for (size_t i = 0; i < s->n_layers; i++)
                if (s->layer_fds[i] >= 0)
                        close(s->layer_fds[i]);
        free(s->layer_fds);
        s->layer_fds = NULL;
        s->n_layers = 0;
        for (size_t i = 0; i < s->n_hides; i++)
                free(s->hides[i].rel);
        free(s->hides);
        s->hides = NULL;
        s->n_hides = 0;
}

/* ---- the sources across an exec (serve mode) ------------------------------------------------ */

#define SOURCES_MAX_HIDES 256
#define SOURCES_MAX_REL 4096

static void put_u64(strbuf *out, uint64_t v, int *r)
{
        uint8_t b[8];
        for (int i = 0; i < 8; i++)
                b[i] = (uint8_t)(v >> (8 * i));
        if (*r == 0)
                *r = sb_append(out, (const char *)b, 8);
}

/* An fd's place in the list (-1 for none), appending it. */
static int64_t add_fd(int fd, int *fds, size_t *n)
{
        if (fd < 0)
                return -1;
        fds[*n] = fd;
        return (int64_t)(*n)++;
}

int nsbox_sources_encode(const nsbox_sources *s, size_t n_mounts, strbuf *out, int **ret_fds, size_t *ret_n)
{
        size_t cap = n_mounts + 1 + s->n_layers, n = 0;
        int *fds = calloc(cap ? cap : 1, sizeof(*fds));
        if (!fds)
                return -ENOMEM;
        int r = 0;
        put_u64(out, n_mounts, &r);
        for (size_t i = 0; i < n_mounts; i++) {
                put_u64(out, (uint64_t)add_fd(s->trees[i].fd, fds, &n), &r);
                put_u64(out, s->trees[i].is_dir, &r);
        }
        put_u64(out, (uint64_t)add_fd(s->rootfs_fd, fds, &n), &r);
        put_u64(out, s->n_layers, &r);
        for (size_t i = 0; i < s->n_layers; i++)
                put_u64(out, (uint64_t)add_fd(s->layer_fds[i], fds, &n), &r);
        put_u64(out, s->n_hides, &r);
        for (size_t i = 0; i < s->n_hides; i++) {
                size_t len = strlen(s->hides[i].rel);
                put_u64(out, s->hides[i].mount, &r);
                put_u64(out, (uint64_t)s->hides[i].dev, &r);
                put_u64(out, (uint64_t)s->hides[i].ino, &r);
                put_u64(out, len, &r);
                if (r == 0)
                        r = sb_append(out, s->hides[i].rel, len);
        }
        if (r < 0) {
                free(fds);
                return r;
        }
        *ret_fds = fds;
        *ret_n = n;
        return 0;
}

typedef struct reader {
        const uint8_t *p;
        size_t left;
        bool bad;
} reader;

static uint64_t get_u64(reader *rd)
{
        if (rd->bad || rd->left < 8) {
                rd->bad = true;
                return 0;
        }
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v |= (uint64_t)rd->p[i] << (8 * i);
        rd->p += 8;
        rd->left -= 8;
        return v;
}

/* An fd by its place in the list: each place used once. */
static int get_fd(reader *rd, int fd_base, size_t n_fds, bool *used, bool may_be_none)
{
        uint64_t v = get_u64(rd);
        if (rd->bad)
                return -1;
        if (v == UINT64_MAX && may_be_none)
                return -1;
        if (v >= n_fds || used[v]) {
                rd->bad = true;
                return -1;
        }
        used[v] = true;
        return fd_base + (int)v;
}

int nsbox_sources_decode(const void *data, size_t len, size_t n_mounts, int fd_base, size_t n_fds, nsbox_sources *ret,
                         nsbox_error *err)
{
        *ret = (nsbox_sources){ .trees = NULL, .rootfs_fd = -1, .hides = NULL };
        reader rd = { .p = data, .left = len };
        _cleanup_free_ bool *used = calloc(n_fds ? n_fds : 1, sizeof(*used));
        prepared_tree *trees = calloc(n_mounts + 1, sizeof(*trees));
        if (!used || !trees) {
                free(trees);
                return nsbox_err(err, ENOMEM, "the sandbox's sources");
        }
        trees[n_mounts].fd = -2;
        ret->trees = trees;
        if (get_u64(&rd) != n_mounts)
                rd.bad = true;
        for (size_t i = 0; i < n_mounts && !rd.bad; i++) {
                trees[i].fd = get_fd(&rd, fd_base, n_fds, used, true);
                uint64_t d = get_u64(&rd);
                rd.bad |= d > 1;
                trees[i].is_dir = d == 1;
        }
        ret->rootfs_fd = get_fd(&rd, fd_base, n_fds, used, true);
        uint64_t n_layers = get_u64(&rd);
        rd.bad |= n_layers > n_fds;
        if (!rd.bad && !(ret->layer_fds = calloc(n_layers + 1, sizeof(int))))
                return nsbox_err(err, ENOMEM, "the sandbox's sources");
        for (size_t i = 0; i < n_layers && !rd.bad; i++) {
                ret->layer_fds[i] = get_fd(&rd, fd_base, n_fds, used, false);
                ret->n_layers = i + 1;
        }
        uint64_t n_hides = get_u64(&rd);
        rd.bad |= n_hides > SOURCES_MAX_HIDES;
        if (!rd.bad && n_hides && !(ret->hides = calloc(n_hides, sizeof(*ret->hides))))
                return nsbox_err(err, ENOMEM, "the sandbox's sources");
        for (size_t i = 0; i < n_hides && !rd.bad; i++) {
                hide_point *h = &ret->hides[i];
                h->mount = (size_t)get_u64(&rd);
                h->dev = (dev_t)get_u64(&rd);
                h->ino = (ino_t)get_u64(&rd);
                uint64_t n = get_u64(&rd);
                if (rd.bad || h->mount >= n_mounts || n > SOURCES_MAX_REL || n > rd.left || memchr(rd.p, '\0', (size_t)n)) {
                        rd.bad = true;
                        break;
                }
                if (!(h->rel = strndup((const char *)rd.p, (size_t)n)))
                        return nsbox_err(err, ENOMEM, "the sandbox's sources");
                ret->n_hides = i + 1;
                rd.p += n;
                rd.left -= (size_t)n;
        }
        for (size_t i = 0; i < n_fds && !rd.bad; i++)
                rd.bad = !used[i]; /* every fd passed is named once */
        if (rd.bad || rd.left)
                return nsbox_err(err, EINVAL, "the sandbox's sources: malformed");
        return 0;
}

/* Writable places get mounts of their own, so the root itself can be read-only: the working
 * directory, the home, the host view's Python environment, and /tmp (part of the writable
 * layer, so that snapshots keep it too). */
static int bind_writable(int rootfd, const nsbox_policy *p, nsbox_error *err)
{
        int r;
        const char *writable[3] = { p->workdir };
        size_t n = 1;
        if (strcmp(p->home, p->workdir))
                writable[n++] = p->home;
        if (p->root == ROOT_HOST && p->python_venv)
                writable[n++] = NSBOX_VENV_DIR; /* pip installs there */
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int wd = -1;
                if ((r = open_in_root(rootfd, writable[i], false, &wd, err)) < 0 || (r = own_dir(wd, p, writable[i], err)) < 0 ||
                    (r = attach_tree(wd, "", wd, "", ATTR_BIND_RW, writable[i], err)) < 0)
                        return r;
        }
        _cleanup_close_ int tmpfd = -1;
        if ((r = open_in_root(rootfd, "/tmp", false, &tmpfd, err)) < 0)
                return r;
        /* a root filesystem's own /tmp may belong to an unmapped host root: leave a right one be */
        struct stat st;
        fdpath tp = fd_path(tmpfd);
        if (fstat(tmpfd, &st) < 0 || ((st.st_mode & 07777) != 01777 && chmod(tp.s, 01777) < 0))
                return nsbox_err(err, errno, "chmod '/tmp'");
        return attach_tree(tmpfd, "", tmpfd, "", ATTR_BIND_RW, "/tmp", err);
}

int nsbox_setup_root(const nsbox_policy *p, const nsbox_sources *src, int *ret_stage_fd, nsbox_error *err)
{
        int r;
        const prepared_tree *trees = src->trees;
        int rootfs_fd = src->rootfs_fd;

        /* The staging tmpfs: its size bounds the writable layer and /tmp together. */
        char opts[96];
        uint64_t disk = p->limits.disk ? p->limits.disk : NSBOX_DEFAULT_DISK;
        snprintf(opts, sizeof(opts), "mode=0700,size=%llu", (unsigned long long)disk);
        if ((r = do_mount("tmpfs", STAGE, STAGE, "tmpfs", MS_NOSUID | MS_NODEV, opts, err)) < 0)
                return r;
        static const char *const stage_dirs[] = { STAGE "/upper", STAGE "/work", STAGE "/lower", STAGE_ROOT };
        for (size_t i = 0; i < ARRAY_SIZE(stage_dirs); i++)
                if (mkdir(stage_dirs[i], 0755) < 0)
                        return nsbox_err(err, errno, "create '%s'", stage_dirs[i]);
        /* a writable root is the sandbox's to write, as /tmp is (its upper directory is the
         * overlay's root): sticky, so that nothing is removed by whoever does not own it */
        if (!p->root_readonly && chmod(STAGE "/upper", 01777) < 0)
                return nsbox_err(err, errno, "chmod '%s'", STAGE "/upper");
        _cleanup_close_ int stage_fd = ret_stage_fd ? open(STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (ret_stage_fd && stage_fd < 0)
                return nsbox_err(err, errno, "open '%s'", STAGE);

        /* 4. The root: an overlay whose upper layer lives on the staging tmpfs. */
        const char *lower = STAGE "/lower";
        hv_kind plan[HOSTVIEW_MAX];
        if (p->root == ROOT_HOST) {
                _cleanup_close_ int lowerfd = open(lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (lowerfd < 0)
                        return nsbox_err(err, errno, "open '%s'", lower);
                if ((r = build_host_skeleton(lowerfd, plan, err)) < 0)
                        return r;
                _cleanup_close_ int etcfd = openat(lowerfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (etcfd < 0 || (r = write_identity(etcfd, -1, p, err)) < 0)
                        return etcfd < 0 ? nsbox_err(err, errno, "open skeleton /etc") : r;
                if (p->python_venv && (r = nsbox_pyvenv_write(lowerfd, p, err)) < 0)
                        return nsbox_err_wrap(err, r, "python environment");
                if (!p->root_readonly && (r = open_skeleton_up(lowerfd, err)) < 0)
                        return r;
        } else {
                /* Straight into the upper layer, before the overlay exists: the namespace's root
                 * has no rights over a root filesystem owned by an unmapped host user. */
                if (mkdir(STAGE "/upper/etc", 0755) < 0)
                        return nsbox_err(err, errno, "create '%s'", STAGE "/upper/etc");
                _cleanup_close_ int etcfd = open(STAGE "/upper/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (etcfd < 0 || (r = write_identity(etcfd, identity_source(src), p, err)) < 0)
                        return etcfd < 0 ? nsbox_err(err, errno, "open '%s'", STAGE "/upper/etc") : r;
        }
        fdpath rootfs_path = fd_path(rootfs_fd);
        if (p->root == ROOT_DIR)
                lower = rootfs_path.s; /* overlay resolves the magic link to the directory */
        /* store layers (snapshots, repositories) above the base, topmost first */
        strbuf lowers;
        sb_init(&lowers, 0);
        for (size_t i = 0; i < src->n_layers; i++) {
                fdpath lp = fd_path(src->layer_fds[i]);
                if (sb_appendf(&lowers, "%s:", lp.s) < 0) {
                        sb_release(&lowers);
                        return -ENOMEM;
                }
        }
        _cleanup_free_ char *ovl = NULL;
        r = asprintf(&ovl, "lowerdir=%s%s,upperdir=" STAGE "/upper,workdir=" STAGE "/work,userxattr", lowers.buf ? lowers.buf : "", lower);
        sb_release(&lowers);
        if (r < 0)
                return -ENOMEM;
        if ((r = do_mount("overlay", STAGE_ROOT, "/", "overlay", MS_NOSUID | MS_NODEV, ovl, err)) < 0)
                return r;
        _cleanup_close_ int rootfd = open(STAGE_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return nsbox_err(err, errno, "open the new root");
        if (p->root == ROOT_HOST && (r = bind_host_view(rootfd, plan, err)) < 0)
                return r;

        if ((r = bind_writable(rootfd, p, err)) < 0)
                return r;

        for (size_t i = 0; i < p->n_mounts; i++) {
                const nsbox_mount *m = &p->mounts[i];
                if (m->type == MOUNT_BIND)
                        r = attach_prepared(rootfd, &trees[i], m->target, err);
                else {
                        char topts[64] = "mode=1777";
                        if (m->size)
                                snprintf(topts, sizeof(topts), "mode=1777,size=%llu", (unsigned long long)m->size);
                        r = mount_tmpfs_in_root(rootfd, m->target, topts, MS_NOSUID | MS_NODEV, err);
                }
                if (r < 0)
                        return r;
        }
        /* once every bind is in place: what they show of nsbox's sockets goes (a read-only bind
         * stops no connect()) */
        if ((r = apply_hides(rootfd, p, src, err)) < 0)
                return r;
        if ((r = setup_dev(rootfd, disk < (64u << 20) ? disk : (64u << 20), err)) < 0)
                return r;
        if ((r = setup_proc(rootfd, err)) < 0)
                return r;
        /* Last, once every mount point exists: the root mount itself (not its submounts). */
        if (p->root_readonly && (r = set_attr(rootfd, "/", false, MOUNT_ATTR_RDONLY, 0, err)) < 0)
                return r;

        /* 5. Enter the new root; the host's is detached and unreachable afterwards. */
        if ((r = pivot_into(STAGE_ROOT, err)) < 0)
                return r;
        if (ret_stage_fd)
                *ret_stage_fd = steal_fd(&stage_fd);
        if (chdir(p->workdir) < 0)
                return nsbox_err(err, errno, "chdir '%s'", p->workdir);
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, p->workdir))
                return nsbox_err(err, 0, "working directory is not '%s' after pivot_root", p->workdir);
        return 0;
}
