/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One tar (a layer, or the outer archive of a docker-archive) extracted under a directory fd,
 * safely (image_import.h): every path walked one component at a time with O_NOFOLLOW from the
 * top, nothing absolute, no "..", links only to what is already extracted inside. */
#include "image_extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "treecopy.h"
#include "userns.h"
#include "util.h"

#define READ_BUF (256 * 1024)

/* libarchive is opened when an image is imported, not linked: every other nsbox command starts
 * without loading it and the libraries it needs (about 1.5 ms of each start, measured). */
#define AR_FUNCS(X) X(archive_entry_filetype) X(archive_entry_gid) X(archive_entry_hardlink) X(archive_entry_mtime) X(archive_entry_mtime_nsec) X(archive_entry_pathname) X(archive_entry_perm) X(archive_entry_rdev) X(archive_entry_size) X(archive_entry_symlink) X(archive_entry_uid) X(archive_error_string) X(archive_read_data_block) X(archive_read_free) X(archive_read_new) X(archive_read_next_header) X(archive_read_open) X(archive_read_support_filter_gzip) X(archive_read_support_filter_none) X(archive_read_support_filter_zstd) X(archive_read_support_format_tar) X(archive_set_error)
static struct {
#define AR_MEMBER(f) __typeof__(f) *f;
        AR_FUNCS(AR_MEMBER)
#undef AR_MEMBER
} ar_;
#define AR(f) (ar_.f)

static int ar_load(nsbox_error *err)
{
        static bool loaded;
        if (loaded)
                return 0;
        void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return nsbox_err(err, 0, "image import needs libarchive (Debian: apt-get install libarchive13): %s", dlerror());
#define AR_SYM(f)                                                                             \
        if (!(*(void **)&ar_.f = dlsym(h, #f)))                                               \
                return nsbox_err(err, 0, "libarchive.so.13 has no %s: too old for nsbox", #f);
        AR_FUNCS(AR_SYM)
#undef AR_SYM
        loaded = true;
        return 0;
}

typedef struct blob {
        int fd;
        nsbox_sha256 *hash;
        uint64_t read;
        uint8_t buf[READ_BUF];
} blob;

static la_ssize_t blob_read(struct archive *a, void *ud, const void **buf)
{
        blob *b = ud;
        ssize_t n;
        do
                n = read(b->fd, b->buf, sizeof(b->buf));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                AR(archive_set_error)(a, errno, "read: %s", strerror(errno));
                return -1;
        }
        if (b->hash)
                nsbox_sha256_update(b->hash, b->buf, (size_t)n);
        b->read += (uint64_t)n;
        *buf = b->buf;
        return n;
}

/* A name from the archive: "./" prefixes dropped; refused when absolute, with "..", empty
 * components or too long.  Returns NULL (and err) when refused; "" for the top itself. */
static const char *clean_name(const char *raw, const char *what, nsbox_error *err)
{
        if (!raw) {
                nsbox_err(err, 0, "%s: an entry without a name", what);
                return NULL;
        }
        const char *p = raw;
        while (p[0] == '.' && p[1] == '/')
                p += 2;
        if (!strcmp(p, "."))
                return "";
        size_t len = strlen(p);
        if (raw[0] == '/' || len >= PATH_MAX) {
                nsbox_err(err, 0, "%s: refused entry '%.200s': %s", what, raw, raw[0] == '/' ? "an absolute path" : "name too long");
                return NULL;
        }
        for (const char *c = p; *c;) {
                const char *e = strchrnul(c, '/');
                size_t n = (size_t)(e - c);
                bool last_slash = *e == '/' && e[1] == '\0'; /* "dir/" */
                if ((n == 0 && c != p + len) || (n == 2 && c[0] == '.' && c[1] == '.') || (n == 1 && c[0] == '.') || n > NAME_MAX) {
                        nsbox_err(err, 0, "%s: refused entry '%.200s': %s", what, raw,
                                  n > NAME_MAX ? "a component longer than 255 bytes" : "an empty, '.' or '..' component");
                        return NULL;
                }
                c = *e && !last_slash ? e + 1 : e + strlen(e);
        }
        return p;
}

/* The directory holding NAME's last component, walked from top without following anything;
 * missing directories are made (0755) when create is set.  *ret_base points into name. */
static int walk_parent(int top, const char *name, bool create, const char **ret_base, const char *what, nsbox_error *err)
{
        int cur = fcntl(top, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return nsbox_err(err, errno, "%s", what);
        const char *c = name;
        char comp[NAME_MAX + 1];
        for (;;) {
                const char *e = strchr(c, '/');
                if (!e || e[1] == '\0')
                        break;
                size_t n = (size_t)(e - c);
                memcpy(comp, c, n);
                comp[n] = '\0';
                int fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT && create && mkdirat(cur, comp, 0755) == 0)
                        fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        int e2 = errno;
                        close(cur);
                        return nsbox_err(err, e2 == ELOOP ? 0 : e2, "%s: refused entry '%.200s': '%s' is %s", what, name, comp,
                                         e2 == ELOOP || e2 == ENOTDIR ? "a link or not a directory" : "not there");
                }
                close(cur);
                cur = fd;
                c = e + 1;
        }
        *ret_base = c;
        return cur;
}

void extract_forget(extract_ctx *x)
{
        if (x->cache_fd >= 0)
                close(x->cache_fd);
        x->cache_fd = -1;
        x->cache_len = 0;
}

/* walk_parent with the last parent remembered: a tar lists a directory's entries together, so
 * most entries skip the walk.  Forgotten whenever anything is removed. */
static int parent_of(extract_ctx *x, const char *name, bool create, const char **ret_base, nsbox_error *err)
{
        const char *slash = NULL;
        for (const char *c = name; *c; c++)
                if (*c == '/' && c[1])
                        slash = c;
        size_t plen = slash ? (size_t)(slash - name) : 0;
        if (x->cache_fd >= 0 && x->cache_len == plen && !strncmp(x->cache_path, name, plen)) {
                *ret_base = slash ? slash + 1 : name;
                int fd = fcntl(x->cache_fd, F_DUPFD_CLOEXEC, 3);
                return fd >= 0 ? fd : nsbox_err(err, errno, "%s", x->what);
        }
        int fd = walk_parent(x->top, name, create, ret_base, x->what, err);
        if (fd < 0 || plen >= sizeof(x->cache_path))
                return fd;
        extract_forget(x);
        if ((x->cache_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) >= 0) {
                memcpy(x->cache_path, name, plen);
                x->cache_len = plen;
        }
        return fd;
}

static int set_owner_mode(extract_ctx *x, int fd, const char *base, struct archive_entry *e, bool is_link)
{
        if (x->shift_owners) {
                int64_t u = AR(archive_entry_uid)(e), g = AR(archive_entry_gid)(e);
                uid_t hu = NSBOX_ROOT_ID_BASE + (uid_t)(u >= 0 && u < NSBOX_ROOT_ID_COUNT ? u : 65534);
                gid_t hg = NSBOX_ROOT_ID_BASE + (gid_t)(g >= 0 && g < NSBOX_ROOT_ID_COUNT ? g : 65534);
                if (fchownat(fd, base, hu, hg, AT_SYMLINK_NOFOLLOW | (base[0] ? 0 : AT_EMPTY_PATH)) < 0)
                        return -errno;
        }
        if (is_link)
                return 0;
        mode_t m = AR(archive_entry_perm)(e) & 07777;
        if (!x->keep_setid && (m & (S_ISUID | S_ISGID)))
                m &= ~(mode_t)(S_ISUID | S_ISGID), x->stats.setid_stripped++;
        return (base[0] ? fchmodat(fd, base, m, 0) : fchmod(fd, m)) < 0 ? -errno : 0;
}

static int extract_file(extract_ctx *x, struct archive *a, int dir, const char *base, struct archive_entry *e, nsbox_error *err)
{
        int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
        _cleanup_close_ int fd = openat(dir, base, flags, 0600);
        if (fd < 0 && errno == EEXIST && unlinkat(dir, base, 0) == 0) /* a later entry of the same name wins */
                fd = openat(dir, base, flags, 0600);
        if (fd < 0)
                return nsbox_err(err, errno, "%s: create '%s'", x->what, AR(archive_entry_pathname)(e));
        const void *buf;
        size_t size;
        la_int64_t off;
        int r;
        while ((r = AR(archive_read_data_block)(a, &buf, &size, &off)) == ARCHIVE_OK) {
                x->stats.bytes += size;
                if (x->progress)
                        x->progress(x->stats.entries, x->stats.bytes, x->progress_ud);
                if (x->stats.bytes > x->max_bytes)
                        return nsbox_err_as(err, EFBIG, "%s: more than %llu bytes of files: refused", x->what, (unsigned long long)x->max_bytes);
                for (size_t done = 0; done < size;) {
                        ssize_t w = pwrite(fd, (const char *)buf + done, size - done, off + (off_t)done);
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0)
                                return nsbox_err(err, w < 0 ? errno : EIO, "%s: write '%s'", x->what, AR(archive_entry_pathname)(e));
                        done += (size_t)w;
                }
        }
        if (r != ARCHIVE_EOF)
                return nsbox_err(err, 0, "%s: corrupt archive: %s", x->what, AR(archive_error_string)(a));
        if (ftruncate(fd, AR(archive_entry_size)(e)) < 0) /* a sparse file's trailing hole */
                return nsbox_err(err, errno, "%s: write '%s'", x->what, AR(archive_entry_pathname)(e));
        if (x->outer)
                return 0;
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { AR(archive_entry_mtime)(e), AR(archive_entry_mtime_nsec)(e) } };
        futimens(fd, ts);
        if ((r = set_owner_mode(x, fd, "", e, false)) < 0)
                return nsbox_err(err, -r, "%s: owner or mode of '%s'", x->what, AR(archive_entry_pathname)(e));
        x->stats.files++;
        return 0;
}

static int extract_dir(extract_ctx *x, int dir, const char *base, const char *name, struct archive_entry *e, nsbox_error *err)
{
        if (mkdirat(dir, base, 0700) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "%s: create '%s'", x->what, name);
        _cleanup_close_ int fd = openat(dir, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "%s: refused entry '%.200s': not a directory", x->what, name);
        if (x->outer)
                return 0;
        /* owner rights until the end: a 0555 directory must still be filled; its mode comes last */
        int r = set_owner_mode(x, fd, "", e, false);
        if (r == 0 && fchmod(fd, (AR(archive_entry_perm)(e) & 07777) | 0700) < 0)
                r = -errno;
        if (r < 0)
                return nsbox_err(err, -r, "%s: owner or mode of '%s'", x->what, name);
        x->stats.dirs++;
        mode_t m = AR(archive_entry_perm)(e) & 07777;
        if (!x->keep_setid)
                m &= ~(mode_t)(S_ISUID | S_ISGID);
        if ((m & 0700) != 0700) {
                char *kv = NULL;
                if (asprintf(&kv, "%04o %s", m, name) < 0 || strv_push(&x->dir_modes, kv) < 0)
                        return nsbox_err(err, ENOMEM, "%s", x->what);
        }
        return 0;
}

static int extract_whiteout_node(extract_ctx *x, int dir, const char *target, const char *name, nsbox_error *err)
{
        extract_forget(x);
        int r = nsbox_tree_remove(dir, target, err);
        if (r < 0)
                return r;
        if (mknodat(dir, target, S_IFCHR | 0000, makedev(0, 0)) < 0)
                return nsbox_err(err, errno,
                                 "%s: cannot make the overlay whiteout for '%s' (character device 0:0; Linux >= 5.8 allows it "
                                 "unprivileged)",
                                 x->what, name);
        x->stats.whiteouts++;
        return 0;
}

static int extract_whiteout(extract_ctx *x, int dir, const char *base, const char *name, nsbox_error *err)
{
        const char *target = base + 4;
        if (!strcmp(target, ".wh..opq")) {
                /* the overlay is mounted with userxattr (mounts.c): user.overlay.opaque */
                if (fsetxattr(dir, "user.overlay.opaque", "y", 1, 0) < 0)
                        return nsbox_err(err, errno, "%s: mark '%s' opaque", x->what, name);
                x->stats.opaque++;
                return 0;
        }
        if (!target[0] || !strcmp(target, ".") || !strcmp(target, ".."))
                return nsbox_err(err, 0, "%s: refused entry '%.200s': a whiteout of nothing", x->what, name);
        return extract_whiteout_node(x, dir, target, name, err);
}

static int extract_hardlink(extract_ctx *x, int dir, const char *base, const char *name, const char *raw_target, nsbox_error *err)
{
        const char *target = clean_name(raw_target, x->what, err);
        if (!target)
                return -EINVAL;
        const char *tbase;
        _cleanup_close_ int tdir = target[0] ? parent_of(x, target, false, &tbase, err) : -1;
        if (tdir < 0)
                return target[0] ? tdir : nsbox_err(err, 0, "%s: refused hard link '%.200s' to the top", x->what, name);
        struct stat st;
        if (fstatat(tdir, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
                return nsbox_err(err, 0, "%s: refused hard link '%.200s' to '%.200s': no file of that name extracted before it", x->what,
                                 name, raw_target);
        unlinkat(dir, base, 0);
        if (linkat(tdir, tbase, dir, base, 0) < 0)
                return nsbox_err(err, errno, "%s: link '%s'", x->what, name);
        x->stats.hardlinks++;
        return 0;
}

static int extract_entry(extract_ctx *x, struct archive *a, struct archive_entry *e, nsbox_error *err)
{
        if (++x->stats.entries > x->max_entries)
                return nsbox_err_as(err, EFBIG, "%s: more than %llu entries: refused", x->what, (unsigned long long)x->max_entries);
        if (x->progress)
                x->progress(x->stats.entries, x->stats.bytes, x->progress_ud);
        const char *name = clean_name(AR(archive_entry_pathname)(e), x->what, err);
        if (!name)
                return -EINVAL;
        mode_t type = AR(archive_entry_filetype)(e);
        const char *hl = AR(archive_entry_hardlink)(e);
        if (!name[0])
                return 0; /* the top: ours, 0755 */
        if (x->outer && !hl && type != AE_IFREG && type != AE_IFDIR)
                return 0; /* only files matter in the outer archive */
        const char *base;
        _cleanup_close_ int dir = parent_of(x, name, true, &base, err);
        if (dir < 0)
                return dir;
        char bn[NAME_MAX + 1];
        snprintf(bn, sizeof(bn), "%.*s", (int)strcspn(base, "/"), base); /* "dir/" */
        if (!x->outer && !strncmp(bn, ".wh.", 4))
                return extract_whiteout(x, dir, bn, name, err);
        if (hl)
                return extract_hardlink(x, dir, bn, name, hl, err);
        int r;
        switch (type) {
        case AE_IFREG:
                return extract_file(x, a, dir, bn, e, err);
        case AE_IFDIR:
                return extract_dir(x, dir, bn, name, e, err);
        case AE_IFLNK: {
                const char *t = AR(archive_entry_symlink)(e);
                if (!t || !t[0] || strlen(t) >= PATH_MAX)
                        return nsbox_err(err, 0, "%s: refused symlink '%.200s': empty or too long target", x->what, name);
                unlinkat(dir, bn, 0);
                if (symlinkat(t, dir, bn) < 0)
                        return nsbox_err(err, errno, "%s: create symlink '%s'", x->what, name);
                if ((r = set_owner_mode(x, dir, bn, e, true)) < 0)
                        return nsbox_err(err, -r, "%s: owner of '%s'", x->what, name);
                x->stats.symlinks++;
                return 0;
        }
        case AE_IFIFO:
                unlinkat(dir, bn, 0);
                if (mkfifoat(dir, bn, 0600) < 0 || (r = set_owner_mode(x, dir, bn, e, false)) < 0)
                        return nsbox_err(err, errno, "%s: create fifo '%s'", x->what, name);
                return 0;
        case AE_IFCHR:
        case AE_IFBLK:
                if (type == AE_IFCHR && AR(archive_entry_rdev)(e) == 0) /* an overlay-style whiteout */
                        return extract_whiteout_node(x, dir, bn, name, err);
                if (!x->skip_devices)
                        return nsbox_err(err, 0, "%s: refused device node '%.200s': an image for an unprivileged store has none", x->what,
                                         name);
                x->stats.devices_skipped++;
                return 0;
        default:
                x->stats.other_skipped++; /* sockets: nothing to extract */
                return 0;
        }
}

/* Directory modes without owner rights, put on last (deepest first: the list is in order). */
static int apply_dir_modes(extract_ctx *x, nsbox_error *err)
{
        size_t n = strv_length(x->dir_modes);
        for (size_t i = n; i-- > 0;) {
                char *sp = strchr(x->dir_modes[i], ' ');
                mode_t m = (mode_t)strtoul(x->dir_modes[i], NULL, 8);
                const char *name = sp + 1, *base;
                _cleanup_close_ int dir = walk_parent(x->top, name, false, &base, x->what, err);
                if (dir < 0)
                        return dir;
                char bn[NAME_MAX + 1];
                snprintf(bn, sizeof(bn), "%.*s", (int)strcspn(base, "/"), base);
                _cleanup_close_ int fd = openat(dir, bn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fchmod(fd, m) < 0)
                        return nsbox_err(err, errno, "%s: mode of '%s'", x->what, name);
        }
        return 0;
}

int nsbox_extract_tar(extract_ctx *x, int fd, unsigned filters, nsbox_sha256 *hash, nsbox_error *err)
{
        if (ar_load(err) < 0)
                return -ENOPKG;
        struct archive *a = AR(archive_read_new)();
        blob *b = malloc(sizeof(*b));
        if (!a || !b) {
                free(b);
                AR(archive_read_free)(a);
                return nsbox_err(err, ENOMEM, "%s", x->what);
        }
        *b = (blob){ .fd = fd, .hash = hash };
        AR(archive_read_support_format_tar)(a);
        AR(archive_read_support_filter_none)(a);
        if (filters & EXTRACT_GZIP)
                AR(archive_read_support_filter_gzip)(a);
        if ((filters & EXTRACT_ZSTD) && AR(archive_read_support_filter_zstd)(a) != ARCHIVE_OK) {
                free(b);
                AR(archive_read_free)(a);
                return nsbox_err(err, 0, "%s: this libarchive reads zstd only through an external program: refused", x->what);
        }
        int r = 0;
        if (AR(archive_read_open)(a, b, NULL, blob_read, NULL) != ARCHIVE_OK)
                r = nsbox_err(err, 0, "%s: not a tar archive: %s", x->what, AR(archive_error_string)(a));
        struct archive_entry *e;
        while (r == 0) {
                int h = AR(archive_read_next_header)(a, &e);
                if (h == ARCHIVE_EOF)
                        break;
                if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
                        r = nsbox_err(err, 0, "%s: corrupt archive: %s", x->what, AR(archive_error_string)(a));
                        break;
                }
                r = extract_entry(x, a, e, err);
        }
        /* the rest of the blob (tar's padding) counts in its digest */
        const void *rest;
        while (r == 0 && hash && blob_read(a, b, &rest) > 0)
                ;
        if (r == 0 && !x->outer)
                r = apply_dir_modes(x, err);
        strv_free(x->dir_modes);
        x->dir_modes = NULL;
        extract_forget(x);
        AR(archive_read_free)(a);
        free(b);
        return r;
}
