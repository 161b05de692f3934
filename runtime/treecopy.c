/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The source of a copy is a sandbox's own tmpfs: every name is opened relative to a directory fd
 * with O_NOFOLLOW, every opened file is checked to be the one listed, and nothing that is not a
 * regular file or directory is ever opened.  Directories are read with getdents64 into a buffer
 * per level, so a walk keeps one fd per level of the tree it reads (and the copy two or three
 * more for the destination it writes). */
#include "treecopy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/limits.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util.h"

#define DIRENT_BUF_SIZE (16 * 1024)
#define COPY_BUF_SIZE (256 * 1024)
/* A directory that is not empty after we emptied it is emptied again: up to REMOVE_RETRIES times
 * without progress (someone still writing), REMOVE_MAX_PASSES times in all (each pass over the
 * top of a very deep tree takes NSBOX_TREE_MAX_DEPTH levels off it). */
#define REMOVE_RETRIES 3
#define REMOVE_MAX_PASSES 4096
#define CROSSES_MOUNT "on another file system (a mount point), refusing to cross into it"

/* ---- walking ---- */

typedef struct dir_reader {
        int fd;
        char *buf;
        size_t len, pos;
} dir_reader;

static int dir_reader_init(dir_reader *r, int fd)
{
        *r = (dir_reader){ .fd = fd, .buf = malloc(DIRENT_BUF_SIZE) };
        return r->buf ? 0 : -ENOMEM;
}

static void dir_reader_release(dir_reader *r)
{
        free(r->buf);
        r->buf = NULL;
}
#define _cleanup_dir_reader_ _cleanup_(dir_reader_release)

/* The next entry but "." and "..", or *ret = NULL at the end. */
static int dir_next(dir_reader *r, struct dirent64 **ret)
{
        for (;;) {
                if (r->pos >= r->len) {
                        ssize_t n = getdents64(r->fd, r->buf, DIRENT_BUF_SIZE);
                        if (n < 0)
                                return -errno;
                        if (n == 0) {
                                *ret = NULL;
                                return 0;
                        }
                        r->len = (size_t)n;
                        r->pos = 0;
                }
                struct dirent64 *de = (struct dirent64 *)(r->buf + r->pos);
                r->pos += de->d_reclen;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                *ret = de;
                return 0;
        }
}

/* Restart at the first entry (the directory was emptied and someone added more). */
static int dir_rewind(dir_reader *r)
{
        r->len = r->pos = 0;
        return lseek(r->fd, 0, SEEK_SET) < 0 ? -errno : 0;
}

/* The path of the entry at hand, relative to the tree, for messages and for hard links; the top
 * is "" internally and "." when shown. */
static int path_push(strbuf *p, const char *name, size_t *ret_mark)
{
        *ret_mark = p->len;
        return p->len ? sb_appendf(p, "/%s", name) : sb_append(p, name, strlen(name));
}

static void path_pop(strbuf *p, size_t mark)
{
        p->len = mark;
        if (p->buf)
                p->buf[mark] = '\0';
}

static const char *path_shown(const strbuf *p)
{
        return p->len ? p->buf : ".";
}

static bool is_file_name(const char *name)
{
        return name && *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

/* Open a directory listed as *listed in parent: O_NOFOLLOW, and it must still be that inode.
 * Returns the fd, -ESTALE when it changed, or another -errno. */
static int open_listed_dir(int parent, const char *name, const struct stat *listed, struct stat *ret_st)
{
        _cleanup_close_ int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -ESTALE : -errno;
        if (fstat(fd, ret_st) < 0)
                return -errno;
        if (ret_st->st_dev != listed->st_dev || ret_st->st_ino != listed->st_ino)
                return -ESTALE;
        return steal_fd(&fd);
}

/* ---- copy ---- */

/* A file whose attributes are read or set: an open fd, or else a name in a directory (symlinks,
 * fifos, sockets, whiteouts: never opened), reached for xattrs through /proc/self/fd/DIRFD/NAME
 * with the l*xattr calls, which do not follow the last name. */
typedef struct node {
        int fd;
        int dirfd;
        const char *name;
        char proc[sizeof("/proc/self/fd//") + 11 + NAME_MAX];
} node;

static void node_by_fd(node *n, int fd)
{
        n->fd = fd;
        n->dirfd = -1;
        n->name = NULL;
        n->proc[0] = '\0';
}

static void node_by_name(node *n, int dirfd, const char *name)
{
        n->fd = -1;
        n->dirfd = dirfd;
        n->name = name;
        snprintf(n->proc, sizeof(n->proc), "/proc/self/fd/%d/%s", dirfd, name);
}

static ssize_t node_listxattr(const node *n, char *buf, size_t size)
{
        return n->fd >= 0 ? flistxattr(n->fd, buf, size) : llistxattr(n->proc, buf, size);
}

static ssize_t node_getxattr(const node *n, const char *attr, void *buf, size_t size)
{
        return n->fd >= 0 ? fgetxattr(n->fd, attr, buf, size) : lgetxattr(n->proc, attr, buf, size);
}

static int node_setxattr(const node *n, const char *attr, const void *value, size_t size)
{
        return n->fd >= 0 ? fsetxattr(n->fd, attr, value, size, 0) : lsetxattr(n->proc, attr, value, size, 0);
}

static int node_chown(const node *n, uid_t uid, gid_t gid)
{
        return n->fd >= 0 ? fchown(n->fd, uid, gid) : fchownat(n->dirfd, n->name, uid, gid, AT_SYMLINK_NOFOLLOW);
}

/* Never called for a symlink; a name here is one we just made in our own destination. */
static int node_chmod(const node *n, mode_t mode)
{
        return n->fd >= 0 ? fchmod(n->fd, mode) : fchmodat(n->dirfd, n->name, mode, 0);
}

static int node_utimes(const node *n, const struct stat *st)
{
        const struct timespec ts[2] = { st->st_atim, st->st_mtim };
        return n->fd >= 0 ? futimens(n->fd, ts) : utimensat(n->dirfd, n->name, ts, AT_SYMLINK_NOFOLLOW);
}

typedef struct link_entry {
        dev_t dev;
        ino_t ino;
        char *path; /* the first copy, relative to the destination's top */
} link_entry;

static int link_compare(const void *a, const void *b)
{
        const link_entry *x = a, *y = b;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        if (x->ino != y->ino)
                return x->ino < y->ino ? -1 : 1;
        return 0;
}

static void link_free(void *p)
{
        link_entry *e = p;
        free(e->path);
        free(e);
}

typedef struct copy_ctx {
        int dst_top_fd;
        dev_t dev;                       /* the source's file system: any other is a mount */
        dev_t dst_dev;                   /* the destination's top, which must not be in the source */
        ino_t dst_ino;
        uid_t euid;
        uint64_t max_bytes;
        nsbox_copy_stats stats;
        strbuf path;
        bool no_clone, no_copy_range;
        char *buf;                       /* read/write fallback */
        char *xlist, *xvalue, *xcheck;   /* XATTR_LIST_MAX, XATTR_SIZE_MAX, XATTR_SIZE_MAX */
        void *links;                     /* tsearch tree of link_entry */
        const nsbox_idshift *shift;      /* owners moved to another id range, or NULL */
        const nsbox_copy_progress *progress; /* or NULL */
} copy_ctx;

static void copy_ctx_release(copy_ctx *c)
{
        sb_release(&c->path);
        free(c->buf);
        free(c->xlist);
        free(c->xvalue);
        free(c->xcheck);
        tdestroy(c->links, link_free);
        *c = (copy_ctx){ 0 };
}

static const char *shown(const copy_ctx *c)
{
        return path_shown(&c->path);
}

static int copy_fail(copy_ctx *c, nsbox_error *err, int errnum, const char *what)
{
        if (what)
                return nsbox_err(err, errnum, "copy '%s': %s", shown(c), what);
        return nsbox_err(err, errnum, "copy '%s'", shown(c));
}

static int changed(copy_ctx *c, nsbox_error *err)
{
        return copy_fail(c, err, ESTALE, "changed while copying");
}

/* An unprivileged copy can only make files we own: say so before making anything. */
static int check_owner(copy_ctx *c, const struct stat *st, nsbox_error *err)
{
        if (c->euid == 0 || st->st_uid == c->euid)
                return 0;
        nsbox_err(err, 0, "copy '%s': owned by uid %u, and only root can give a copy another owner (running as uid %u)",
                  shown(c), (unsigned)st->st_uid, (unsigned)c->euid);
        return -EPERM;
}

static int copy_xattrs(copy_ctx *c, const node *src, const node *dst, nsbox_error *err)
{
        ssize_t n = node_listxattr(src, c->xlist, XATTR_LIST_MAX);
        if (n < 0) {
                if (errno == EOPNOTSUPP)
                        return 0;
                return copy_fail(c, err, errno, "list extended attributes");
        }
        if (n > 0 && c->xlist[n - 1] != '\0')
                return copy_fail(c, err, EINVAL, "list extended attributes");
        for (const char *attr = c->xlist; attr < c->xlist + n; attr += strlen(attr) + 1) {
                ssize_t len = node_getxattr(src, attr, c->xvalue, XATTR_SIZE_MAX);
                if (len < 0 && errno == ENODATA)
                        continue; /* removed since it was listed */
                if (len < 0)
                        return nsbox_err(err, errno, "copy '%s': read extended attribute '%s'", shown(c), attr);
                if (node_setxattr(dst, attr, c->xvalue, (size_t)len) == 0)
                        continue;
                int e = errno;
                /* A file system may set some itself (a security label): the same value is no failure. */
                ssize_t have = node_getxattr(dst, attr, c->xcheck, XATTR_SIZE_MAX);
                if (have == len && !memcmp(c->xcheck, c->xvalue, (size_t)len))
                        continue;
                return nsbox_err(err, e, "copy '%s': set extended attribute '%s'", shown(c), attr);
        }
        return 0;
}

/* In this order: chown clears setuid bits and file capabilities; user.* attributes need write
 * permission, which the final mode may lack; none of them changes atime or mtime.  A directory's
 * final mode may lack u+x: nothing is looked up through it afterwards except by a hard link, and
 * we could read its source, so either the mode has u+x or we override permissions anyway. */
static uint32_t shifted(const nsbox_idshift *sh, uint32_t id)
{
        return sh && id >= sh->from && id - sh->from < sh->count ? sh->to + (id - sh->from) : id;
}

static int copy_metadata(copy_ctx *c, const node *src, const node *dst, const struct stat *st, nsbox_error *err)
{
        uid_t uid = shifted(c->shift, st->st_uid);
        gid_t gid = shifted(c->shift, st->st_gid);
        if (node_chown(dst, uid, gid) < 0)
                return nsbox_err(err, errno, "copy '%s': set owner %u:%u", shown(c), (unsigned)uid, (unsigned)gid);
        int r = copy_xattrs(c, src, dst, err);
        if (r < 0)
                return r;
        mode_t mode = st->st_mode & 07777;
        if (!S_ISLNK(st->st_mode) && node_chmod(dst, mode) < 0)
                return nsbox_err(err, errno, "copy '%s': set mode %04o", shown(c), (unsigned)mode);
        if (node_utimes(dst, st) < 0)
                return copy_fail(c, err, errno, "set times");
        return 0;
}

static int pwrite_full(int fd, const char *buf, size_t n, off_t off)
{
        while (n > 0) {
                ssize_t w = pwrite(fd, buf, n, off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                buf += w;
                n -= (size_t)w;
                off += w;
        }
        return 0;
}

/* Copy len bytes at off; *ret_copied is short only at the source's end of file. */
static int copy_range(copy_ctx *c, int src, int dst, off_t off, uint64_t len, uint64_t *ret_copied,
                      nsbox_error *err)
{
        uint64_t done = 0;
        while (done < len && !c->no_copy_range) {
                loff_t in = off + (off_t)done, out = in;
                size_t want = len - done > SSIZE_MAX ? SSIZE_MAX : (size_t)(len - done);
                ssize_t n = copy_file_range(src, &in, dst, &out, want, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        /* Across file systems (tmpfs to disk) or not supported: read and write. */
                        if (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) {
                                c->no_copy_range = true;
                                break;
                        }
                        return copy_fail(c, err, errno, NULL);
                }
                if (n == 0) {
                        *ret_copied = done;
                        return 0;
                }
                done += (uint64_t)n;
        }
        if (done < len && !c->buf && !(c->buf = malloc(COPY_BUF_SIZE)))
                return copy_fail(c, err, ENOMEM, NULL);
        while (done < len) {
                size_t want = len - done > COPY_BUF_SIZE ? COPY_BUF_SIZE : (size_t)(len - done);
                ssize_t n = pread(src, c->buf, want, off + (off_t)done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return copy_fail(c, err, errno, "read");
                }
                if (n == 0)
                        break;
                int r = pwrite_full(dst, c->buf, (size_t)n, off + (off_t)done);
                if (r < 0)
                        return copy_fail(c, err, r, "write");
                done += (uint64_t)n;
        }
        *ret_copied = done;
        return 0;
}

/* Go over the data (not the holes) of the first size bytes of src, counting it against the limit
 * and, unless it was cloned already, copying it to the same offsets of dst. */
static int copy_data_segments(copy_ctx *c, int src, int dst, off_t size, bool copy, nsbox_error *err)
{
        off_t off = 0, data_end = 0;
        while (off < size) {
                off_t data = lseek(src, off, SEEK_DATA), hole;
                if (data < 0 && errno == ENXIO)
                        break; /* a hole up to the end */
                if (data < 0 && errno == EINVAL) {
                        data = off; /* no SEEK_DATA here: all of it is data */
                        hole = size;
                } else if (data < 0) {
                        return copy_fail(c, err, errno, "find data");
                } else {
                        if (data >= size)
                                break;
                        hole = lseek(src, data, SEEK_HOLE);
                        if (hole < 0)
                                return errno == ENXIO ? changed(c, err) : copy_fail(c, err, errno, "find holes");
                        if (hole > size)
                                hole = size;
                }
                uint64_t len = (uint64_t)(hole - data);
                if (c->max_bytes && len > c->max_bytes - c->stats.bytes)
                        return nsbox_err(err, EFBIG,
                                         "copy '%s': the copy would exceed its limit of %" PRIu64 " bytes of file data",
                                         shown(c), c->max_bytes);
                if (copy) {
                        uint64_t copied = 0;
                        int r = copy_range(c, src, dst, data, len, &copied, err);
                        if (r < 0)
                                return r;
                        if (copied < len)
                                return changed(c, err); /* it shrank */
                }
                c->stats.bytes += len;
                if (c->progress)
                        c->progress->fn(&c->stats, c->progress->userdata);
                off = data_end = hole;
        }
        /* A hole at the end has no data to write: only the size makes it. */
        if (copy && data_end < size && ftruncate(dst, size) < 0)
                return copy_fail(c, err, errno, "set size");
        return 0;
}

/* noinline: their buffers stay out of the frames the directory recursion stacks up. */
#define NOINLINE __attribute__((noinline))

static NOINLINE int copy_file(copy_ctx *c, int src_dir, int dst_dir, const char *name, const struct stat *listed,
                              nsbox_error *err)
{
        /* O_NONBLOCK: should the name have become a fifo after all, opening it does not wait. */
        _cleanup_close_ int src = openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (src < 0)
                return errno == ENOENT || errno == ELOOP ? changed(c, err) : copy_fail(c, err, errno, NULL);
        struct stat st;
        if (fstat(src, &st) < 0)
                return copy_fail(c, err, errno, NULL);
        if (!S_ISREG(st.st_mode) || st.st_dev != listed->st_dev || st.st_ino != listed->st_ino)
                return changed(c, err);
        _cleanup_close_ int dst = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (dst < 0)
                return copy_fail(c, err, errno, "create");
        c->stats.files++;
        if (c->progress)
                c->progress->fn(&c->stats, c->progress->userdata);

        bool cloned = false;
        if (st.st_size > 0 && !c->no_clone) {
                cloned = ioctl(dst, FICLONE, src) == 0;
                c->no_clone = !cloned; /* across file systems, or not supported: no use asking again */
        }
        int r = copy_data_segments(c, src, dst, st.st_size, !cloned, err);
        if (r < 0)
                return r;
        node s, d;
        node_by_fd(&s, src);
        node_by_fd(&d, dst);
        return copy_metadata(c, &s, &d, &st, err);
}

static NOINLINE int copy_symlink(copy_ctx *c, int src_dir, int dst_dir, const char *name, const struct stat *st,
                                 nsbox_error *err)
{
        char target[PATH_MAX + 1];
        ssize_t n = readlinkat(src_dir, name, target, sizeof(target));
        if (n < 0)
                return errno == ENOENT || errno == EINVAL ? changed(c, err) : copy_fail(c, err, errno, "read link");
        if ((size_t)n >= sizeof(target))
                return copy_fail(c, err, ENAMETOOLONG, "read link");
        target[n] = '\0';
        if (symlinkat(target, dst_dir, name) < 0)
                return copy_fail(c, err, errno, "create");
        c->stats.symlinks++;
        node s, d;
        node_by_name(&s, src_dir, name);
        node_by_name(&d, dst_dir, name);
        return copy_metadata(c, &s, &d, st, err);
}

/* Whiteouts, fifos and sockets: made anew, never opened. */
static NOINLINE int copy_special(copy_ctx *c, int src_dir, int dst_dir, const char *name, const struct stat *st,
                                 nsbox_error *err)
{
        int r;
        if (S_ISFIFO(st->st_mode))
                r = mkfifoat(dst_dir, name, 0600);
        else if (S_ISSOCK(st->st_mode))
                r = mknodat(dst_dir, name, S_IFSOCK | 0600, 0);
        else
                r = mknodat(dst_dir, name, S_IFCHR | 0600, makedev(0, 0));
        if (r < 0)
                return copy_fail(c, err, errno, "create");
        c->stats.specials++;
        node s, d;
        node_by_name(&s, src_dir, name);
        node_by_name(&d, dst_dir, name);
        return copy_metadata(c, &s, &d, st, err);
}

static int copy_dir_contents(copy_ctx *c, int src, int *dst, unsigned depth, nsbox_error *err);

/* mkdir 0700 so we can fill it whatever its mode; the real mode and times come last.
 * The source side keeps an fd per level (its ".." cannot be trusted); the destination is ours, so
 * its walk hands one fd down (*dst_dir is closed meanwhile) and climbs back up through "..". */
static int copy_dir(copy_ctx *c, int src_dir, int *dst_dir, const char *name, const struct stat *listed,
                    unsigned depth, nsbox_error *err)
{
        if (depth > NSBOX_TREE_MAX_DEPTH) {
                nsbox_err(err, 0, "copy '%s': more than %d directories deep", shown(c), NSBOX_TREE_MAX_DEPTH);
                return -ELOOP;
        }
        if (listed->st_dev == c->dst_dev && listed->st_ino == c->dst_ino)
                return nsbox_err(err, EINVAL, "copy '%s': the destination is inside the source", shown(c));
        struct stat st;
        _cleanup_close_ int src = open_listed_dir(src_dir, name, listed, &st);
        if (src < 0)
                return src == -ESTALE ? changed(c, err) : copy_fail(c, err, src, NULL);
        if (mkdirat(*dst_dir, name, 0700) < 0)
                return copy_fail(c, err, errno, "create");
        _cleanup_close_ int dst = openat(*dst_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dst < 0)
                return copy_fail(c, err, errno, "open the copy");
        c->stats.dirs++;
        close(*dst_dir);
        *dst_dir = -1;
        int r = copy_dir_contents(c, src, &dst, depth, err);
        if (r < 0)
                return r;
        node s, d;
        node_by_fd(&s, src);
        node_by_fd(&d, dst);
        if ((r = copy_metadata(c, &s, &d, &st, err)) < 0)
                return r;
        *dst_dir = openat(dst, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (*dst_dir < 0)
                return copy_fail(c, err, errno, "reopen the directory holding the copy");
        return 0;
}

static int copy_entry(copy_ctx *c, int src_dir, int *dst, const char *name, unsigned depth, nsbox_error *err)
{
        struct stat st;
        if (fstatat(src_dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? changed(c, err) : copy_fail(c, err, errno, NULL);
        if (st.st_dev != c->dev)
                return copy_fail(c, err, EXDEV, "on another file system (a mount point), refusing to copy it");
        if ((S_ISCHR(st.st_mode) && st.st_rdev != makedev(0, 0)) || S_ISBLK(st.st_mode)) {
                nsbox_err(err, 0, "copy: device node '%s' cannot be copied", shown(c));
                return -EPERM;
        }
        int r = check_owner(c, &st, err);
        if (r < 0)
                return r;
        if (S_ISDIR(st.st_mode))
                return copy_dir(c, src_dir, dst, name, &st, depth + 1, err);
        int dst_dir = *dst;

        bool linked = st.st_nlink > 1;
        if (linked) {
                link_entry key = { .dev = st.st_dev, .ino = st.st_ino };
                void *found = tfind(&key, &c->links, link_compare);
                if (found) {
                        const link_entry *first = *(link_entry **)found;
                        if (linkat(c->dst_top_fd, first->path, dst_dir, name, 0) < 0)
                                return nsbox_err(err, errno, "copy '%s': link to '%s'", shown(c), first->path);
                        c->stats.hardlinks++;
                        return 0;
                }
        }
        if (S_ISREG(st.st_mode))
                r = copy_file(c, src_dir, dst_dir, name, &st, err);
        else if (S_ISLNK(st.st_mode))
                r = copy_symlink(c, src_dir, dst_dir, name, &st, err);
        else
                r = copy_special(c, src_dir, dst_dir, name, &st, err);
        if (r < 0 || !linked)
                return r;

        link_entry *e = malloc(sizeof(*e));
        if (!e || !(e->path = strdup(c->path.buf))) {
                free(e);
                return copy_fail(c, err, ENOMEM, NULL);
        }
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        if (!tsearch(e, &c->links, link_compare)) {
                link_free(e);
                return copy_fail(c, err, ENOMEM, NULL);
        }
        return 0;
}

static int copy_dir_contents(copy_ctx *c, int src, int *dst, unsigned depth, nsbox_error *err)
{
        _cleanup_dir_reader_ dir_reader rd;
        if (dir_reader_init(&rd, src) < 0)
                return copy_fail(c, err, ENOMEM, NULL);
        for (;;) {
                struct dirent64 *de;
                int r = dir_next(&rd, &de);
                if (r < 0)
                        return copy_fail(c, err, r, "read directory");
                if (!de)
                        return 0;
                size_t mark;
                if ((r = path_push(&c->path, de->d_name, &mark)) < 0)
                        return copy_fail(c, err, r, NULL);
                r = copy_entry(c, src, dst, de->d_name, depth, err);
                path_pop(&c->path, mark);
                if (r < 0)
                        return r;
        }
}

static int copy_top(copy_ctx *c, int src, const struct stat *st, nsbox_error *err)
{
        /* The walk's own fd: c->dst_top_fd stays open for hard links. */
        _cleanup_close_ int dst = openat(c->dst_top_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst < 0)
                return copy_fail(c, err, errno, "open the copy");
        int r = copy_dir_contents(c, src, &dst, 0, err);
        if (r < 0)
                return r;
        node s, d;
        node_by_fd(&s, src);
        node_by_fd(&d, c->dst_top_fd);
        return copy_metadata(c, &s, &d, st, err);
}

int nsbox_tree_copy(int src_dirfd, int dst_parent_fd, const char *dst_name, uint64_t max_bytes,
                    nsbox_copy_stats *ret_stats, nsbox_error *err)
{
        return nsbox_tree_copy_shifted(src_dirfd, dst_parent_fd, dst_name, max_bytes, NULL, ret_stats, err);
}

int nsbox_tree_copy_shifted(int src_dirfd, int dst_parent_fd, const char *dst_name, uint64_t max_bytes, const nsbox_idshift *shift,
                            nsbox_copy_stats *ret_stats, nsbox_error *err)
{
        return nsbox_tree_copy_progress(src_dirfd, dst_parent_fd, dst_name, max_bytes, shift, NULL, ret_stats, err);
}

int nsbox_tree_copy_progress(int src_dirfd, int dst_parent_fd, const char *dst_name, uint64_t max_bytes, const nsbox_idshift *shift,
                             const nsbox_copy_progress *progress, nsbox_copy_stats *ret_stats, nsbox_error *err)
{
        if (!is_file_name(dst_name))
                return nsbox_err(err, EINVAL, "copy: destination '%s' is not a file name", dst_name ? dst_name : "");
        /* Our own open file description: reading must not move the caller's offset, and an O_PATH
         * fd cannot be read at all. */
        _cleanup_close_ int src = openat(src_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (src < 0)
                return nsbox_err(err, errno, "copy: open the source directory");
        struct stat st;
        if (fstat(src, &st) < 0)
                return nsbox_err(err, errno, "copy: open the source directory");

        copy_ctx c = { .dev = st.st_dev, .euid = geteuid(), .max_bytes = max_bytes, .dst_top_fd = -1, .shift = shift,
                       .progress = progress && progress->fn ? progress : NULL };
        sb_init(&c.path, 0);
        int r = check_owner(&c, &st, err);
        if (r < 0)
                return r;
        if (!(c.xlist = malloc(XATTR_LIST_MAX)) || !(c.xvalue = malloc(XATTR_SIZE_MAX)) ||
            !(c.xcheck = malloc(XATTR_SIZE_MAX))) {
                copy_ctx_release(&c);
                return nsbox_err(err, ENOMEM, "copy");
        }
        if (mkdirat(dst_parent_fd, dst_name, 0700) < 0) {
                copy_ctx_release(&c);
                return nsbox_err(err, errno, "copy: create '%s'", dst_name);
        }
        _cleanup_close_ int dst = openat(dst_parent_fd, dst_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat dst_st;
        if (dst < 0 || fstat(dst, &dst_st) < 0) {
                r = nsbox_err(err, errno, "copy: open '%s'", dst_name);
        } else {
                c.dst_top_fd = dst;
                c.dst_dev = dst_st.st_dev;
                c.dst_ino = dst_st.st_ino;
                c.stats.dirs++;
                r = copy_top(&c, src, &st, err);
        }
        nsbox_copy_stats stats = c.stats;
        copy_ctx_release(&c);
        if (r < 0) {
                /* No half a layer left behind; the first error is the one reported. */
                (void)nsbox_tree_remove(dst_parent_fd, dst_name, NULL);
                return r;
        }
        if (ret_stats)
                *ret_stats = stats;
        return 0;
}

/* ---- remove ---- */

typedef struct walk_ctx {
        dev_t dev;
        strbuf path;
        int top_fd;        /* remove: where directories too deep to enter are moved up to */
        uint64_t progress; /* remove: entries removed or moved up */
        unsigned moved;    /* remove: names made for directories moved up */
        uid_t uid;         /* chown */
        gid_t gid;
} walk_ctx;

static int remove_dir(walk_ctx *w, int parent, const char *name, unsigned depth, nsbox_error *err);

/* Deeper than we keep fds open for: move it into the top directory, where the next pass over the
 * top finds it again, NSBOX_TREE_MAX_DEPTH levels higher.  Any depth is removed that way. */
static int move_up(walk_ctx *w, int dirfd, const char *name, nsbox_error *err)
{
        /* Moving a directory to another parent rewrites its "..", which needs write permission. */
        if (fchmodat(dirfd, name, 0700, AT_SYMLINK_NOFOLLOW) < 0) {
                /* not ours: the rename says why */
        }
        for (;;) {
                char fresh[64];
                snprintf(fresh, sizeof(fresh), ".nsbox-remove.%u", w->moved++);
                if (renameat2(dirfd, name, w->top_fd, fresh, RENAME_NOREPLACE) == 0) {
                        w->progress++;
                        return 0;
                }
                if (errno == ENOENT)
                        return 0;
                if (errno != EEXIST)
                        return nsbox_err(err, errno, "remove '%s': move it up out of the depth limit",
                                         path_shown(&w->path));
        }
}

static int remove_entry(walk_ctx *w, int dirfd, const char *name, unsigned char type, unsigned depth,
                        nsbox_error *err)
{
        if (type != DT_DIR && type != DT_UNKNOWN) {
                if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) {
                        w->progress++;
                        return 0;
                }
                if (errno != EISDIR)
                        return nsbox_err(err, errno, "remove '%s'", path_shown(&w->path));
        }
        if (depth + 1 > NSBOX_TREE_MAX_DEPTH)
                return move_up(w, dirfd, name, err);
        return remove_dir(w, dirfd, name, depth + 1, err);
}

/* Open a directory to empty it, making a 0000 one of ours readable; 1 when it is no directory. */
static int open_for_removal(int parent, const char *name, int *ret_fd)
{
        for (int tries = 0;; tries++) {
                int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0) {
                        *ret_fd = fd;
                        return 0;
                }
                if (errno == ENOTDIR || errno == ELOOP)
                        return 1;
                if (errno != EACCES || tries > 0)
                        return -errno;
                /* AT_SYMLINK_NOFOLLOW: should it have become a symlink, its target stays as it is. */
                if (fchmodat(parent, name, 0700, AT_SYMLINK_NOFOLLOW) < 0)
                        return errno == EOPNOTSUPP ? 1 : -EACCES;
        }
}

static int remove_dir(walk_ctx *w, int parent, const char *name, unsigned depth, nsbox_error *err)
{
        const char *p = path_shown(&w->path);
        _cleanup_close_ int fd = -1;
        int r = open_for_removal(parent, name, &fd);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return nsbox_err(err, r, "remove '%s'", p);
        if (r > 0) {
                if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
                        return 0;
                return nsbox_err(err, errno, "remove '%s'", p);
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "remove '%s'", p);
        if (st.st_dev != w->dev)
                return nsbox_err(err, EXDEV, "remove '%s': " CROSSES_MOUNT, p);
        /* Entries of a 0555 directory cannot be unlinked, nor those of a 0000 one listed. */
        if ((st.st_mode & 0700) != 0700 && fchmod(fd, (st.st_mode & 07777) | 0700) < 0) {
                /* not ours: the unlinks say why */
        }
        if (depth == 0)
                w->top_fd = fd;

        _cleanup_dir_reader_ dir_reader rd;
        if (dir_reader_init(&rd, fd) < 0)
                return nsbox_err(err, ENOMEM, "remove '%s'", p);
        for (unsigned pass = 0;; pass++) {
                uint64_t before = w->progress;
                for (;;) {
                        struct dirent64 *de;
                        if ((r = dir_next(&rd, &de)) < 0)
                                return nsbox_err(err, r, "remove '%s': read directory", path_shown(&w->path));
                        if (!de)
                                break;
                        size_t mark;
                        if ((r = path_push(&w->path, de->d_name, &mark)) < 0)
                                return nsbox_err(err, r, "remove '%s'", path_shown(&w->path));
                        r = remove_entry(w, fd, de->d_name, de->d_type, depth, err);
                        path_pop(&w->path, mark);
                        if (r < 0)
                                return r;
                }
                if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
                        w->progress++;
                        return 0;
                }
                /* New entries: directories moved up into the top, or the tree's owner still
                 * writing.  Go again while that gets somewhere, within bounds. */
                if (errno != ENOTEMPTY || pass >= REMOVE_MAX_PASSES ||
                    (w->progress == before && pass >= REMOVE_RETRIES))
                        return nsbox_err(err, errno, "remove '%s'", path_shown(&w->path));
                if ((r = dir_rewind(&rd)) < 0)
                        return nsbox_err(err, r, "remove '%s'", path_shown(&w->path));
        }
}

static int parent_dev(int parent_fd, dev_t *ret)
{
        struct stat st;
        if (fstatat(parent_fd, ".", &st, 0) < 0)
                return -errno;
        *ret = st.st_dev;
        return 0;
}

int nsbox_tree_remove(int parent_fd, const char *name, nsbox_error *err)
{
        if (!is_file_name(name))
                return nsbox_err(err, EINVAL, "remove '%s': not a file name", name ? name : "");
        struct stat st;
        if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : nsbox_err(err, errno, "remove '%s'", name);
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT)
                        return 0;
                return nsbox_err(err, errno, "remove '%s'", name);
        }
        dev_t dev = 0;
        int r = parent_dev(parent_fd, &dev);
        if (r < 0)
                return nsbox_err(err, r, "remove '%s': the directory holding it", name);
        if (dev != st.st_dev)
                return nsbox_err(err, EXDEV, "remove '%s': " CROSSES_MOUNT, name);

        walk_ctx w = { .dev = st.st_dev, .top_fd = -1 };
        sb_init(&w.path, 0);
        if (sb_append(&w.path, name, strlen(name)) < 0)
                return nsbox_err(err, ENOMEM, "remove '%s'", name);
        r = remove_dir(&w, parent_fd, name, 0, err);
        sb_release(&w.path);
        return r;
}

/* ---- chown ---- */

static int chown_contents(walk_ctx *w, int fd, unsigned depth, nsbox_error *err);

static int chown_entry(walk_ctx *w, int dirfd, const char *name, unsigned depth, nsbox_error *err)
{
        const char *p = path_shown(&w->path);
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : nsbox_err(err, errno, "chown '%s'", p);
        if (st.st_dev != w->dev)
                return nsbox_err(err, EXDEV, "chown '%s': " CROSSES_MOUNT, p);
        if (fchownat(dirfd, name, w->uid, w->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return nsbox_err(err, errno, "chown '%s' to %u:%u", p, (unsigned)w->uid, (unsigned)w->gid);
        /* chown clears them from a regular file; a layer's setuid programs must keep them. */
        if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)) &&
            fchmodat(dirfd, name, st.st_mode & 07777, AT_SYMLINK_NOFOLLOW) < 0)
                return nsbox_err(err, errno, "chown '%s': restore mode %04o", p, (unsigned)(st.st_mode & 07777));
        if (!S_ISDIR(st.st_mode))
                return 0;
        if (depth + 1 > NSBOX_TREE_MAX_DEPTH) {
                nsbox_err(err, 0, "chown '%s': more than %d directories deep", p, NSBOX_TREE_MAX_DEPTH);
                return -ELOOP;
        }
        struct stat now;
        _cleanup_close_ int fd = open_listed_dir(dirfd, name, &st, &now);
        if (fd < 0)
                return nsbox_err(err, fd, "chown '%s'", p);
        return chown_contents(w, fd, depth + 1, err);
}

static int chown_contents(walk_ctx *w, int fd, unsigned depth, nsbox_error *err)
{
        _cleanup_dir_reader_ dir_reader rd;
        if (dir_reader_init(&rd, fd) < 0)
                return nsbox_err(err, ENOMEM, "chown '%s'", path_shown(&w->path));
        for (;;) {
                struct dirent64 *de;
                int r = dir_next(&rd, &de);
                if (r < 0)
                        return nsbox_err(err, r, "chown '%s': read directory", path_shown(&w->path));
                if (!de)
                        return 0;
                size_t mark;
                if ((r = path_push(&w->path, de->d_name, &mark)) < 0)
                        return nsbox_err(err, r, "chown '%s'", path_shown(&w->path));
                r = chown_entry(w, fd, de->d_name, depth, err);
                path_pop(&w->path, mark);
                if (r < 0)
                        return r;
        }
}

int nsbox_tree_chown(int dirfd, uid_t uid, gid_t gid, nsbox_error *err)
{
        _cleanup_close_ int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "chown '.'");
        if (fchown(fd, uid, gid) < 0)
                return nsbox_err(err, errno, "chown '.' to %u:%u", (unsigned)uid, (unsigned)gid);
        walk_ctx w = { .dev = st.st_dev, .top_fd = -1, .uid = uid, .gid = gid };
        sb_init(&w.path, 0);
        int r = chown_contents(&w, fd, 0, err);
        sb_release(&w.path);
        return r;
}
