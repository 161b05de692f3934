/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file tools: read, write (atomically, or appending for chunked uploads), edit, list, stat,
 * mkdir, remove and rename.  Each handler validates every parameter first and then acts through
 * fds resolved inside the root (tools/path.c); what crosses a directory boundary after that is
 * done relative to a directory fd with O_NOFOLLOW, so a link planted mid-call cannot lead out. */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../runtime/base64.h"

#define READ_DEFAULT_LIMIT 2000u
#define READ_MAX_LIMIT 100000u
#define WRITE_FILES_MAX 1000u
#define LIST_MAX_DEPTH 32u
#define SYMLINK_MAX_FOLLOW 40 /* the kernel's MAXSYMLINKS */
#define READ_CHUNK (64u << 10)
#define READ_SIZELESS_MAX (64u << 20) /* bytes read as text of a file whose size says 0 (/proc) */

static int oom(tool_error *e)
{
        return tool_fail(e, TOOL_INTERNAL, "out of memory");
}

static const char *type_name(mode_t m)
{
        if (S_ISREG(m))
                return "file";
        if (S_ISDIR(m))
                return "directory";
        if (S_ISLNK(m))
                return "symlink";
        return "other";
}

/* Paths built from names on disk need not be UTF-8. */
static json_t *path_json(const char *path)
{
        return nsbox_json_text(path, strlen(path), NULL);
}


/* {type, size, mode, mtime[, target]}, and uid/gid (stat, list_dir: envd's owner and group). */
static json_t *stat_json(const struct stat *st, const char *target, size_t target_len, bool owner)
{
        json_t *o = json_pack("{s:s, s:I, s:i, s:f}", "type", type_name(st->st_mode), "size",
                              (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777), "mtime",
                              (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9);
        if (!o)
                return NULL;
        if (owner && (json_object_set_new(o, "uid", json_integer(st->st_uid)) < 0 ||
                      json_object_set_new(o, "gid", json_integer(st->st_gid)) < 0)) {
                json_decref(o);
                return NULL;
        }
        if (target && json_object_set_new(o, "target", nsbox_json_text(target, target_len, NULL)) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* A symlink's "resolved": where it leads, every link on the way followed inside the root, as a
 * path of the root (envd's symlinkTarget); the link's own path when it leads nowhere. */
static int add_resolved(const tool_ctx *ctx, json_t *o, const char *abs)
{
        const char *res = abs;
        char real[PATH_MAX];
        tool_error ignored;
        _cleanup_close_ int fd = -1;
        if (tool_open(ctx, abs, O_PATH, 0, &fd, &ignored) == 0) {
                char link[32];
                snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
                ssize_t n = readlink(link, real, sizeof(real) - 1);
                size_t rl = strlen(ctx->root_path);
                if (n > 0) {
                        real[n] = '\0';
                        if (!strcmp(ctx->root_path, "/"))
                                res = real;
                        else if (!strncmp(real, ctx->root_path, rl) && (real[rl] == '/' || !real[rl]))
                                res = real[rl] ? real + rl : "/";
                }
        }
        return json_object_set_new(o, "resolved", path_json(res));
}

/* ---- metadata: a file's user.e2b.* extended attributes (envd's file metadata) ---- */

#define META_PREFIX "user.e2b."
#define META_PREFIX_LEN (sizeof(META_PREFIX) - 1)

static bool printable_ascii(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
                        return false;
        return true;
}

int tool_metadata_check(const json_t *m, char *why, size_t n)
{
        const char *k;
        json_t *v;
        size_t total = 0;
        if (!json_is_object(m)) {
                snprintf(why, n, "metadata must be an object of strings");
                return -EINVAL;
        }
        json_object_foreach((json_t *)m, k, v) {
                size_t kl = strlen(k);
                if (!kl || kl > TOOL_METADATA_KEY_MAX || !printable_ascii(k, kl)) {
                        snprintf(why, n, "metadata key '%.64s': 1 to %u printable ASCII bytes", k, TOOL_METADATA_KEY_MAX);
                        return -EINVAL;
                }
                if (!json_is_string(v) || !printable_ascii(json_string_value(v), json_string_length(v))) {
                        snprintf(why, n, "metadata value of '%.64s' must be printable ASCII", k);
                        return -EINVAL;
                }
                total += META_PREFIX_LEN + kl + json_string_length(v);
        }
        if (total > TOOL_METADATA_MAX) {
                snprintf(why, n, "metadata of %zu bytes is over %u (keys with their 'user.e2b.' and values)", total,
                         TOOL_METADATA_MAX);
                return -EINVAL;
        }
        return 0;
}

/* The attribute names of fd (an O_PATH descriptor), through its /proc/self/fd link: a buffer to
 * free and its length, or -errno. */
static ssize_t xattr_names(const char *proc, char **ret)
{
        for (int tries = 0; tries < 4; tries++) {
                ssize_t n = listxattr(proc, NULL, 0);
                if (n <= 0)
                        return n < 0 ? -errno : 0;
                char *buf = malloc((size_t)n);
                if (!buf)
                        return -ENOMEM;
                ssize_t got = listxattr(proc, buf, (size_t)n);
                if (got >= 0) {
                        *ret = buf;
                        return got;
                }
                free(buf);
                if (errno != ERANGE) /* ERANGE: one was added meanwhile */
                        return -errno;
        }
        return -ERANGE;
}

/* The metadata of fd (O_PATH, a regular file or a directory): {key: value} of its user.e2b.*
 * attributes, the prefix left out; NULL when it has none or they cannot be read.  Attributes set
 * by other means than an upload are shown when their name and value are UTF-8 and the value at
 * most TOOL_METADATA_MAX bytes; past TOOL_METADATA_MAX bytes in all, the rest are left out. */
static json_t *metadata_read(int fd)
{
        char proc[32], *names = NULL, val[TOOL_METADATA_MAX];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t n = xattr_names(proc, &names);
        json_t *m = NULL;
        size_t total = 0;
        for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
                const char *name = names + off;
                if (strncmp(name, META_PREFIX, META_PREFIX_LEN) || !name[META_PREFIX_LEN])
                        continue;
                ssize_t vl = getxattr(proc, name, val, sizeof(val));
                if (vl < 0)
                        continue; /* removed meanwhile, or too long */
                bool lossy = false;
                json_t *v = nsbox_json_text(val, (size_t)vl, &lossy);
                json_t *k = v && !lossy ? nsbox_json_text(name + META_PREFIX_LEN, strlen(name + META_PREFIX_LEN), &lossy) : NULL;
                total += strlen(name) + (size_t)vl;
                if (k && !lossy && total <= TOOL_METADATA_MAX && (m || (m = json_object())))
                        json_object_set(m, json_string_value(k), v);
                json_decref(k);
                json_decref(v);
        }
        free(names);
        return m;
}

/* Make fd's metadata m (checked: tool_metadata_check): its other user.e2b.* attributes removed.
 * A file system without user attributes (proc, sys) keeps none, as envd. 0 or -errno. */
static int metadata_write(int fd, const json_t *m)
{
        char proc[32], *names = NULL, full[XATTR_NAME_MAX + 1];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t n = xattr_names(proc, &names);
        if (n == -ENOTSUP)
                return 0;
        if (n < 0)
                return (int)n;
        int r = 0;
        for (ssize_t off = 0; r == 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
                const char *name = names + off;
                if (!strncmp(name, META_PREFIX, META_PREFIX_LEN) && !json_object_get(m, name + META_PREFIX_LEN) &&
                    removexattr(proc, name) < 0 && errno != ENODATA)
                        r = -errno;
        }
        free(names);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)m, k, v) {
                snprintf(full, sizeof(full), META_PREFIX "%s", k);
                if (r == 0 && setxattr(proc, full, json_string_value(v), json_string_length(v), 0) < 0)
                        r = errno == ENOTSUP ? 0 : -errno;
        }
        return r;
}

/* An O_PATH descriptor of name in dirfd, and its stat, if it is a regular file or a directory
 * (-1 otherwise, errno EINVAL): only those go through /proc/self/fd, where a symbolic link
 * swapped in meanwhile would be followed, maybe out of the root. */
static int open_metadata_at(int dirfd, const char *name, struct stat *st)
{
        int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -1;
        int err = fstat(fd, st) < 0 ? errno : S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) ? 0 : EINVAL;
        if (err) {
                close(fd);
                errno = err;
                return -1;
        }
        return fd;
}

/* name's (in dirfd) metadata made m, unless it is the file of *unless (the same inode: set
 * already); 0, or -1 with errno set. */
static int write_metadata_at(int dirfd, const char *name, const struct stat *unless, const json_t *m)
{
        struct stat st;
        _cleanup_close_ int fd = open_metadata_at(dirfd, name, &st);
        if (fd < 0)
                return -1;
        if (unless && st.st_dev == unless->st_dev && st.st_ino == unless->st_ino)
                return 0;
        int r = metadata_write(fd, m);
        errno = -r;
        return r < 0 ? -1 : 0;
}

static json_t *read_metadata_at(int dirfd, const char *name)
{
        struct stat st;
        _cleanup_close_ int fd = open_metadata_at(dirfd, name, &st);
        return fd < 0 ? NULL : metadata_read(fd);
}

/* Add fd's metadata to o as "metadata" (none: nothing added); -1 only when out of memory. */
static int add_metadata(json_t *o, int fd, const struct stat *st)
{
        json_t *m = S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) ? metadata_read(fd) : NULL;
        return m ? json_object_set_new(o, "metadata", m) : 0;
}

/* ---- parameters shared by the writing tools ---- */

/* 'mode': an integer (420) or a string of octal digits ("0644", "755"), at most 07777. */
static int param_mode(const tool_in *in, const char *tool, bool *ret_given, mode_t *ret, tool_error *e)
{
        json_t *v = json_object_get(in->params, "mode");
        if (!v || json_is_null(v))
                return 0;
        long long m = -1;
        if (json_is_integer(v)) {
                m = json_integer_value(v);
        } else if (json_is_string(v)) {
                const char *s = json_string_value(v);
                size_t n = json_string_length(v);
                if (n > 0 && n <= 5 && strspn(s, "01234567") == n)
                        m = strtoll(s, NULL, 8);
        }
        if (m < 0 || m > 07777)
                return tool_fail(e, TOOL_INVALID_ARGUMENT,
                                 "%s: 'mode' must be an integer or a string of octal digits, at most 07777", tool);
        *ret_given = true;
        *ret = (mode_t)m;
        return 0;
}

/* The bytes to write: the request's payload when there is one, else exactly one of 'content',
 * 'data' (text) or 'content_b64' (decoded into *b64). */
static int param_content(const tool_in *in, const char *tool, strbuf *b64, const char **ret_data, size_t *ret_len,
                         tool_error *e)
{
        if (in->payload) {
                if (in->payload_len > TOOL_MAX_CONTENT)
                        return tool_fail(e, TOOL_TOO_LARGE, "%s: content of %zu bytes is more than %u", tool,
                                         in->payload_len, TOOL_MAX_CONTENT);
                *ret_data = in->payload;
                *ret_len = in->payload_len;
                return 0;
        }
        static const char *const keys[] = { "content", "content_b64", "data" };
        const char *key = NULL;
        json_t *v = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                json_t *k = json_object_get(in->params, keys[i]);
                if (!k || json_is_null(k))
                        continue;
                if (key)
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: give only one of 'content', 'content_b64' and 'data'",
                                         tool);
                key = keys[i];
                v = k;
        }
        if (!key)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: one of 'content', 'content_b64' and 'data' is required",
                                 tool);
        if (!json_is_string(v))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must be a string", tool, key);
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (strcmp(key, "content_b64")) {
                if (n > TOOL_MAX_CONTENT)
                        return tool_fail(e, TOOL_TOO_LARGE, "%s: content of %zu bytes is more than %u", tool, n,
                                         TOOL_MAX_CONTENT);
                *ret_data = s;
                *ret_len = n;
                return 0;
        }
        sb_init(b64, TOOL_MAX_CONTENT);
        int r = b64_decode(s, n, b64);
        if (r == -E2BIG)
                return tool_fail(e, TOOL_TOO_LARGE, "%s: 'content_b64' decodes to more than %u bytes", tool,
                                 TOOL_MAX_CONTENT);
        if (r < 0)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'content_b64' is not valid base64", tool);
        *ret_data = b64->buf ? b64->buf : "";
        *ret_len = b64->len;
        return 0;
}

/* ---- helpers that change the tree ---- */

/* Where writing abs lands: abs, or when its last component is a symlink, the link's target
 * (lexically, inside the root), so that an edit goes through a link instead of replacing it. */
static int follow_final_symlinks(const tool_ctx *ctx, const char *abs, char **ret, tool_error *e)
{
        _cleanup_free_ char *cur = strdup(abs);
        if (!cur)
                return oom(e);
        for (int i = 0;; i++) {
                if (i == SYMLINK_MAX_FOLLOW)
                        return tool_fail(e, TOOL_INVALID_PATH, "'%s': too many levels of symbolic links", abs);
                _cleanup_close_ int dirfd = -1;
                const char *name;
                tool_error ignored;
                /* A missing parent or the root: the write itself reports (or creates) it. */
                if (tool_open_parent(ctx, cur, &dirfd, &name, &ignored) < 0)
                        break;
                char target[PATH_MAX];
                ssize_t n = readlinkat(dirfd, name, target, sizeof(target));
                if (n < 0)
                        break; /* not a symlink, or missing */
                if ((size_t)n >= sizeof(target))
                        return tool_fail(e, TOOL_INVALID_PATH, "symlink '%s' has a target that is too long", cur);
                target[n] = '\0';
                if (!n || memchr(target, '\0', (size_t)n))
                        break;
                /* A relative target starts from the link's directory, cur up to its last '/'. */
                _cleanup_free_ char *joined = NULL;
                if (target[0] == '/')
                        joined = strdup(target);
                else if (asprintf(&joined, "%.*s%s", (int)(name - cur), cur, target) < 0)
                        joined = NULL;
                if (!joined)
                        return oom(e);
                free(cur);
                cur = NULL;
                if (tool_path_normalize(ctx, joined, &cur, e) < 0)
                        return -1;
        }
        *ret = steal_pointer(&cur);
        return 0;
}

/* Create abs and its missing parents (mkdir -p); parents get 0755, abs itself mode exactly (not
 * masked by the umask).  A dangling symlink on the way has its target made, inside the root, as a
 * lookup through it would resolve; links counts those followed.  *ret_created: abs was made. */
static int mkdir_parents_links(const tool_ctx *ctx, const char *abs, mode_t mode, unsigned links, bool *ret_created,
                               tool_error *e)
{
        size_t len = strlen(abs);
        bool created = false;
        for (size_t end = 1; end <= len; end++) {
                if (end < len && abs[end] != '/')
                        continue;
                bool last = end == len;
                _cleanup_free_ char *prefix = strndup(abs, end);
                if (!prefix)
                        return oom(e);
                int fd;
                if (tool_open(ctx, prefix, O_PATH | O_DIRECTORY, 0, &fd, e) == 0) {
                        close(fd);
                        continue;
                }
                if (e->code == TOOL_NOT_A_DIRECTORY && last)
                        return tool_fail(e, TOOL_CONFLICT, "'%s' exists and is not a directory", abs);
                if (e->code != TOOL_FILE_NOT_FOUND)
                        return -1;
                _cleanup_close_ int dirfd = -1;
                const char *name;
                if (tool_open_parent(ctx, prefix, &dirfd, &name, e) < 0)
                        return -1;
                if (mkdirat(dirfd, name, last ? 0700 : 0755) == 0) {
                        if (last) {
                                /* Made 0700 so that nothing else enters it before its mode is set. */
                                _cleanup_close_ int fd2 = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                if (fd2 < 0 || fchmod(fd2, mode) < 0)
                                        return tool_fail_errno(e, errno, "set the mode of '%s'", abs);
                                created = true;
                        }
                        continue;
                }
                if (errno != EEXIST)
                        return tool_fail_errno(e, errno, "create directory '%s'", prefix);
                _cleanup_free_ char *target = NULL;
                if (follow_final_symlinks(ctx, prefix, &target, e) < 0)
                        return -1;
                if (!strcmp(target, prefix))
                        continue; /* made meanwhile: the next lookup checks it */
                if (links >= SYMLINK_MAX_FOLLOW)
                        return tool_fail(e, TOOL_INVALID_PATH, "'%s': too many levels of symbolic links", abs);
                bool made = false;
                if (mkdir_parents_links(ctx, target, last ? mode : 0755, links + 1, &made, e) < 0)
                        return -1;
                created = last && made;
        }
        if (ret_created)
                *ret_created = created;
        return 0;
}

static int mkdir_parents(const tool_ctx *ctx, const char *abs, mode_t mode, bool *ret_created, tool_error *e)
{
        return mkdir_parents_links(ctx, abs, mode, 0, ret_created, e);
}

/* The parent of abs opened, creating it first when allowed and missing. */
static int open_parent(const tool_ctx *ctx, const char *abs, bool parents, int *ret_dirfd, const char **ret_name,
                       tool_error *e)
{
        if (tool_open_parent(ctx, abs, ret_dirfd, ret_name, e) == 0)
                return 0;
        if (!parents || e->code != TOOL_FILE_NOT_FOUND)
                return -1;
        _cleanup_free_ char *parent = strndup(abs, (size_t)(strrchr(abs, '/') - abs));
        if (!parent)
                return oom(e);
        if (mkdir_parents(ctx, parent, 0755, NULL, e) < 0)
                return -1;
        return tool_open_parent(ctx, abs, ret_dirfd, ret_name, e);
}

/* A new file ".<name>.nsbox-XXXXXX" in dirfd, created exclusively, its name in tmp. */
static int create_temp(int dirfd, const char *name, char tmp[static NAME_MAX + 1])
{
        static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for (int attempt = 0; attempt < 128; attempt++) {
                uint64_t v;
                if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
                        v = now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)attempt;
                char suffix[7];
                for (int i = 0; i < 6; i++, v /= 62)
                        suffix[i] = chars[v % 62];
                suffix[6] = '\0';
                /* Cut long names: the temporary must fit in NAME_MAX too. */
                snprintf(tmp, NAME_MAX + 1, ".%.200s.nsbox-%s", name, suffix);
                int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0 || errno != EEXIST)
                        return fd < 0 ? -errno : fd;
        }
        return -EEXIST;
}

/* The bytes of src (from its start) to dst: copy_file_range, or read and write where the
 * kernel cannot (another file system type). 0 or -errno. */
static int copy_fd(int src, int dst)
{
        for (loff_t in = 0, out = 0;;) {
                ssize_t n = copy_file_range(src, &in, dst, &out, 1 << 30, 0);
                if (n == 0)
                        return 0;
                if (n > 0)
                        continue;
                if (in || (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP))
                        return -errno;
                if (lseek(src, 0, SEEK_SET) < 0 || lseek(dst, 0, SEEK_SET) < 0)
                        return -errno;
                char buf[65536];
                for (;;) {
                        ssize_t r = read(src, buf, sizeof(buf));
                        if (r <= 0)
                                return r < 0 ? -errno : 0;
                        int w = write_full(dst, buf, (size_t)r);
                        if (w < 0)
                                return w;
                }
        }
}

/* The written temporary tmp (in tmp_dir) becomes name (in dir), as a write of name would leave
 * it: renamed over it, atomically (readers see the old or the new file, never half), except
 * when name has other hard links, or the two are on different file systems (a symlink
 * followed there): then its contents are copied into name, which keeps its inode and links.
 * tmp is gone after, either way. 0, or -1 with e set. */
static int commit_temp(int tmp_dir, const char *tmp, int dir, const char *name, const char *shown, tool_error *e)
{
        struct stat st;
        bool linked = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1;
        int r = 0;
        if (linked || renameat(tmp_dir, tmp, dir, name) < 0) {
                r = linked || errno == EXDEV ? 0 : -errno;
                _cleanup_close_ int src = r == 0 ? openat(tmp_dir, tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
                _cleanup_close_ int dst = -1;
                if (r == 0 && src < 0)
                        r = -errno;
                /* in place when linked; across file systems, a temporary of the target's own */
                char dtmp[NAME_MAX + 1] = "";
                struct stat sst;
                if (r == 0 && fstat(src, &sst) < 0)
                        r = -errno;
                if (r == 0)
                        dst = linked ? openat(dir, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC) : create_temp(dir, name, dtmp);
                if (r == 0 && dst < 0)
                        r = dst == -1 ? -errno : dst;
                if (r == 0 && !linked && fchmod(dst, sst.st_mode & 07777) < 0)
                        r = -errno;
                if (r == 0)
                        r = copy_fd(src, dst);
                if (r == 0 && close(steal_fd(&dst)) < 0)
                        r = -errno;
                if (r == 0 && !linked && renameat(dir, dtmp, dir, name) < 0)
                        r = -errno;
                if (r < 0 && dtmp[0])
                        unlinkat(dir, dtmp, 0);
                if (r == 0)
                        unlinkat(tmp_dir, tmp, 0);
        }
        if (r < 0) {
                unlinkat(tmp_dir, tmp, 0);
                return tool_fail_errno(e, r, "write '%s'", shown);
        }
        return 0;
}

/* Replace name in dirfd with data (commit_temp: atomically, or in place for a hard-linked file). */
static int replace_at(int dirfd, const char *name, const char *shown, const void *data, size_t len, mode_t mode,
                      tool_error *e)
{
        char tmp[NAME_MAX + 1];
        _cleanup_close_ int fd = create_temp(dirfd, name, tmp);
        if (fd < 0)
                return tool_fail_errno(e, fd, "create a temporary file next to '%s'", shown);
        int r = fchmod(fd, mode) < 0 ? -errno : write_full(fd, data, len);
        if (r == 0 && close(steal_fd(&fd)) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dirfd, tmp, 0);
                return tool_fail_errno(e, r, "write '%s'", shown);
        }
        return commit_temp(dirfd, tmp, dirfd, name, shown, e);
}

typedef struct write_opts {
        bool mode_given;
        mode_t mode;
        bool append;
        bool parents;
} write_opts;

static int append_at(int dirfd, const char *name, const char *shown, const void *data, size_t len,
                     const write_opts *o, bool *ret_created, tool_error *e)
{
        mode_t mode = o->mode_given ? o->mode : 0644;
        bool created = true;
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0 && errno == EEXIST) {
                created = false;
                /* O_NONBLOCK: a FIFO must not hang the agent; it is refused below. */
                fd = openat(dirfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        }
        if (fd < 0) {
                if (errno == ELOOP)
                        return tool_fail(e, TOOL_INVALID_PATH, "'%s' is a symlink: append does not follow symlinks",
                                         shown);
                return tool_fail_errno(e, errno, "open '%s'", shown);
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return tool_fail_errno(e, errno, "stat '%s'", shown);
        if (!S_ISREG(st.st_mode))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "'%s' is not a regular file", shown);
        /* The umask must not change the mode asked for. */
        if ((created || o->mode_given) && fchmod(fd, mode) < 0)
                return tool_fail_errno(e, errno, "set the mode of '%s'", shown);
        int r = write_full(fd, data, len);
        if (r < 0)
                return tool_fail_errno(e, r, "write '%s'", shown);
        *ret_created = created;
        return 0;
}

/* write_file's work for one path, after validation.  e's message is without the tool's name. */
static int write_one(const tool_ctx *ctx, const char *abs, const void *data, size_t len, const write_opts *o,
                     bool *ret_created, tool_error *e)
{
        _cleanup_free_ char *target = NULL;
        if (o->append)
                target = strdup(abs);
        else if (follow_final_symlinks(ctx, abs, &target, e) < 0)
                return -1;
        if (!target)
                return oom(e);
        _cleanup_close_ int dirfd = -1;
        const char *name;
        if (open_parent(ctx, target, o->parents, &dirfd, &name, e) < 0)
                return -1;
        if (o->append)
                return append_at(dirfd, name, abs, data, len, o, ret_created, e);

        struct stat st;
        bool existed = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!existed && errno != ENOENT)
                return tool_fail_errno(e, errno, "stat '%s'", target);
        if (existed && S_ISDIR(st.st_mode))
                return tool_fail(e, TOOL_IS_DIRECTORY, "'%s' is a directory", target);
        if (existed && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "'%s' is not a regular file", target);
        mode_t mode = o->mode_given ? o->mode : existed && S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0644;
        if (replace_at(dirfd, name, target, data, len, mode, e) < 0)
                return -1;
        *ret_created = !existed;
        return 0;
}

/* ---- read_file ---- */

/* Collects the lines [first, first + count) of a file streamed through it in chunks. */
typedef struct line_window {
        uint64_t first, count;
        uint64_t line;        /* the line the next byte belongs to */
        uint64_t returned;    /* complete lines put in content */
        strbuf content;       /* the returned lines, valid UTF-8 */
        strbuf cur;           /* the current line's first TOOL_MAX_LINE_CHARS + 1 bytes */
        bool full;            /* content reached TOOL_MAX_CONTENT: stop collecting */
        bool truncated, lossy;
} line_window;

/* The current line is complete (ended by "\n" when newline): convert it and add it. */
static int window_finish_line(line_window *w, bool newline)
{
        size_t n = w->cur.len;
        if (n > TOOL_MAX_LINE_CHARS) {
                n = tool_utf8_cut(w->cur.buf, n, TOOL_MAX_LINE_CHARS);
                w->truncated = true;
        }
        bool lossy = false;
        json_t *text = nsbox_json_text(w->cur.buf ? w->cur.buf : "", n, &lossy);
        if (!text)
                return -ENOMEM;
        w->lossy |= lossy;
        size_t tlen = json_string_length(text);
        if (w->content.len + tlen + newline > TOOL_MAX_CONTENT) {
                w->full = w->truncated = true;
        } else {
                int r = sb_append(&w->content, json_string_value(text), tlen);
                if (r == 0 && newline)
                        r = sb_append(&w->content, "\n", 1);
                if (r < 0) {
                        json_decref(text);
                        return r;
                }
                w->returned++;
        }
        json_decref(text);
        w->cur.len = 0;
        return 0;
}

static bool window_wants(const line_window *w)
{
        return !w->full && w->line >= w->first && w->line - w->first < w->count;
}

/* Feed a chunk: counts every line, keeps those in the window. */
static int window_feed(line_window *w, const char *p, size_t n)
{
        while (n > 0) {
                const char *nl = memchr(p, '\n', n);
                size_t part = nl ? (size_t)(nl - p) : n;
                if (window_wants(w)) {
                        /* One byte past the cut tells whether the cut splits a character. */
                        size_t room = TOOL_MAX_LINE_CHARS + 1 - w->cur.len;
                        if (sb_append(&w->cur, p, part < room ? part : room) < 0)
                                return -ENOMEM;
                        if (nl) {
                                int r = window_finish_line(w, true);
                                if (r < 0)
                                        return r;
                        }
                }
                if (!nl)
                        break;
                w->line++;
                p = nl + 1;
                n -= part + 1;
        }
        return 0;
}

static int read_text(int fd, const char *abs, const struct stat *st, uint64_t offset, uint64_t limit, tool_out *out,
                     tool_error *e)
{
        line_window w = { .first = offset, .count = limit };
        sb_init(&w.content, 0);
        sb_init(&w.cur, 0);
        _cleanup_free_ char *chunk = malloc(READ_CHUNK);
        int r = chunk ? 0 : -ENOMEM;
        bool ends_with_newline = true; /* an empty file has no unfinished line */
        /* the size seen at open: a file growing while it is read would keep the loop going (a
         * /proc file says 0 and is read up to a bound) */
        uint64_t left = st->st_size > 0 ? (uint64_t)st->st_size : READ_SIZELESS_MAX;
        while (r == 0 && left > 0) {
                ssize_t k = read(fd, chunk, left < READ_CHUNK ? (size_t)left : READ_CHUNK);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = -errno;
                        break;
                }
                if (k == 0)
                        break;
                left -= (uint64_t)k;
                ends_with_newline = chunk[k - 1] == '\n';
                r = window_feed(&w, chunk, (size_t)k);
        }
        /* A last line without "\n" is a line too. */
        if (r == 0 && !ends_with_newline) {
                if (window_wants(&w))
                        r = window_finish_line(&w, false);
                w.line++;
        }
        json_t *content = NULL;
        if (r == 0)
                content = json_stringn_nocheck(w.content.buf ? w.content.buf : "", w.content.len);
        sb_release(&w.content);
        sb_release(&w.cur);
        if (r < 0)
                return tool_fail_errno(e, r, "read '%s'", abs);
        if (!content)
                return oom(e);

        uint64_t total = w.line, end = offset + w.returned;
        out->result = json_pack("{s:o, s:o, s:s, s:I, s:I, s:I, s:o, s:I, s:b, s:b}", "path", path_json(abs),
                                "content", content, "encoding", "text", "total_lines", (json_int_t)total,
                                "start_line", (json_int_t)offset, "end_line", (json_int_t)end, "next_offset",
                                end < total ? json_integer((json_int_t)end) : json_null(), "size",
                                (json_int_t)st->st_size, "truncated", w.truncated, "lossy", w.lossy);
        return out->result ? 0 : oom(e);
}

/* The reply's payload back to its first 'len' bytes: what a failed read added goes. */
static void payload_cut(tool_out *out, size_t len)
{
        out->payload.len = len;
        if (out->payload.buf)
                out->payload.buf[len] = '\0';
}

static int read_raw(int fd, const char *abs, const struct stat *st, uint64_t byte_offset, bool limit_given,
                    uint64_t byte_limit, bool skip_holes, tool_out *out, tool_error *e)
{
        uint64_t size = (uint64_t)st->st_size;
        if (skip_holes && byte_offset < size) {
                /* a sparse file's holes are not sent as zeros: the caller keeps them as holes */
                off_t data = lseek(fd, (off_t)byte_offset, SEEK_DATA);
                if (data < 0 && errno != ENXIO && errno != EINVAL)
                        return tool_fail_errno(e, errno, "seek '%s'", abs);
                /* ENXIO: only a hole is left; EINVAL: a file system without holes, all data */
                uint64_t from = data >= 0 ? (uint64_t)data : errno == ENXIO ? size : byte_offset;
                byte_offset = from < size ? from : size;
                off_t hole = byte_offset < size ? lseek(fd, (off_t)byte_offset, SEEK_HOLE) : -1;
                uint64_t run = size - byte_offset; /* what grew after the fstat is not read */
                if (hole > (off_t)byte_offset && (uint64_t)hole - byte_offset < run)
                        run = (uint64_t)hole - byte_offset;
                if (!limit_given || byte_limit > run)
                        byte_limit = run < TOOL_MAX_CONTENT ? run : TOOL_MAX_CONTENT;
                limit_given = true;
        }
        /* a file is read up to the size it had when opened (one that grows meanwhile does not
         * keep a copy going), a pseudo file to its end */
        bool unsized = tool_size_unknown(fd, st);
        uint64_t rest = size > byte_offset ? size - byte_offset : 0;
        if (!limit_given && unsized) {
                byte_limit = TOOL_MAX_CONTENT + 1; /* a byte more is too large */
        } else if (!limit_given) {
                if (rest > TOOL_MAX_CONTENT)
                        return tool_fail(e, TOOL_TOO_LARGE,
                                         "file is %llu bytes; read it in ranges with byte_offset and byte_limit",
                                         (unsigned long long)size);
                byte_limit = rest;
        } else if (!unsized && byte_limit > rest) {
                byte_limit = rest;
        }
        _cleanup_free_ char *chunk = malloc(READ_CHUNK);
        if (!chunk)
                return oom(e);
        size_t start = out->payload.len;
        uint64_t got = 0;
        bool eof = false;
        while (got < byte_limit) {
                size_t want = byte_limit - got < READ_CHUNK ? (size_t)(byte_limit - got) : READ_CHUNK;
                ssize_t k = pread(fd, chunk, want, (off_t)(byte_offset + got));
                if (k < 0 && errno == EINTR)
                        continue;
                int r = k < 0 ? -errno : k > 0 ? sb_append(&out->payload, chunk, (size_t)k) : 0;
                if (r < 0) {
                        payload_cut(out, start);
                        if (r == -E2BIG)
                                return tool_fail(e, TOOL_TOO_LARGE, "'%s': the range is more than a reply carries (%zu bytes)",
                                                 abs, out->payload.limit);
                        return tool_fail_errno(e, r, "read '%s'", abs);
                }
                if (k == 0) {
                        eof = true; /* the file shrank, or the range starts past its end */
                        break;
                }
                got += (uint64_t)k;
        }
        if (!unsized && byte_offset + got >= size)
                eof = true;
        if (got > TOOL_MAX_CONTENT) {
                payload_cut(out, start);
                return tool_fail(e, TOOL_TOO_LARGE, "'%s' is more than %u bytes; read it in ranges with byte_offset and byte_limit",
                                 abs, TOOL_MAX_CONTENT);
        }
        out->result = json_pack("{s:o, s:s, s:I, s:I, s:I, s:b}", "path", path_json(abs), "encoding", "base64",
                                "size", (json_int_t)size, "byte_offset", (json_int_t)byte_offset, "bytes",
                                (json_int_t)got, "eof", eof);
        return out->result ? 0 : oom(e);
}

int tool_read_file(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "read_file";
        _cleanup_free_ char *abs = NULL;
        uint64_t offset = 0, limit = READ_DEFAULT_LIMIT, byte_offset = 0, byte_limit = 0;
        const char *encoding = "text";
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0 ||
            tool_param_uint(in, tool, "offset", INT64_MAX, &offset, e) < 0 ||
            tool_param_uint(in, tool, "limit", READ_MAX_LIMIT, &limit, e) < 0 ||
            tool_param_string(in, tool, "encoding", false, &encoding, e) < 0 ||
            tool_param_uint(in, tool, "byte_offset", INT64_MAX, &byte_offset, e) < 0 ||
            tool_param_uint(in, tool, "byte_limit", UINT64_MAX, &byte_limit, e) < 0)
                return -1;
        if (limit < 1)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'limit' must be at least 1", tool);
        bool raw = !strcmp(encoding, "base64");
        if (!raw && strcmp(encoding, "text"))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'encoding' must be \"text\" or \"base64\"", tool);
        json_t *bl = json_object_get(in->params, "byte_limit");
        bool limit_given = bl && !json_is_null(bl);
        bool skip_holes = false;
        if (tool_param_bool(in, tool, "skip_holes", &skip_holes, e) < 0)
                return -1;
        if (skip_holes && !raw)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'skip_holes' goes with encoding \"base64\"", tool);
        if (limit_given && byte_limit > TOOL_MAX_CONTENT)
                return tool_fail(e, TOOL_TOO_LARGE, "%s: 'byte_limit' is more than %u bytes", tool, TOOL_MAX_CONTENT);

        _cleanup_close_ int fd = -1;
        struct stat st;
        if (tool_open_regular(ctx, tool, abs, &fd, &st, e) < 0)
                return -1;
        int r = raw ? read_raw(fd, abs, &st, byte_offset, limit_given, byte_limit, skip_holes, out, e)
                    : read_text(fd, abs, &st, offset, limit, out, e);
        return r < 0 ? tool_fail_wrap(e, tool) : 0;
}

/* ---- write_file, write_files ---- */

int tool_write_file(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "write_file";
        _cleanup_free_ char *abs = NULL;
        _cleanup_sb_ strbuf b64;
        sb_init(&b64, TOOL_MAX_CONTENT);
        const char *data;
        size_t len;
        write_opts o = { .parents = true };
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0 ||
            param_content(in, tool, &b64, &data, &len, e) < 0 || param_mode(in, tool, &o.mode_given, &o.mode, e) < 0 ||
            tool_param_bool(in, tool, "append", &o.append, e) < 0 ||
            tool_param_bool(in, tool, "parents", &o.parents, e) < 0)
                return -1;

        bool created = false;
        if (write_one(ctx, abs, data, len, &o, &created, e) < 0)
                return tool_fail_wrap(e, tool);
        out->result = json_pack("{s:o, s:I, s:b}", "path", path_json(abs), "bytes_written", (json_int_t)len,
                                "created", created);
        return out->result ? 0 : oom(e);
}

/* ---- write_file and read_file with a pipe (tool.h) ---- */

int tool_write_fd_begin(const tool_ctx *ctx, const tool_in *in, tool_fd_write *w, tool_error *e)
{
        static const char tool[] = "write_file";
        *w = (tool_fd_write){ .dirfd = -1, .fd = -1 };
        write_opts o = { .parents = true };
        static const char *const refused[] = { "content", "content_b64", "data" };
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
                if (json_object_get(in->params, refused[i]))
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: the bytes come through the descriptor: no '%s'", tool, refused[i]);
        json_t *sz = json_object_get(in->params, "size");
        if (!sz || json_is_null(sz))
                return tool_fail(e, TOOL_INVALID_ARGUMENT,
                                 "%s: 'size' is required with a descriptor (a transfer cut short must not look complete)", tool);
        if (tool_param_path(ctx, in, tool, "path", NULL, &w->abs, e) < 0 || tool_param_uint(in, tool, "size", INT64_MAX, &w->size, e) < 0 ||
            param_mode(in, tool, &o.mode_given, &o.mode, e) < 0 || tool_param_bool(in, tool, "append", &o.append, e) < 0 ||
            tool_param_bool(in, tool, "parents", &o.parents, e) < 0)
                goto fail;
        if (o.append) {
                tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'append' does not go with a descriptor", tool);
                goto fail;
        }
        if (follow_final_symlinks(ctx, w->abs, &w->target, e) < 0 || open_parent(ctx, w->target, o.parents, &w->dirfd, &w->name, e) < 0)
                goto wrap;
        struct stat st;
        bool existed = fstatat(w->dirfd, w->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!existed && errno != ENOENT) {
                tool_fail_errno(e, errno, "stat '%s'", w->target);
                goto wrap;
        }
        if (existed && S_ISDIR(st.st_mode)) {
                tool_fail(e, TOOL_IS_DIRECTORY, "'%s' is a directory", w->target);
                goto wrap;
        }
        if (existed && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
                tool_fail(e, TOOL_INVALID_ARGUMENT, "'%s' is not a regular file", w->target);
                goto wrap;
        }
        mode_t mode = o.mode_given ? o.mode : existed && S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0644;
        w->created = !existed;
        w->fd = create_temp(w->dirfd, w->name, w->tmp);
        if (w->fd < 0) {
                tool_fail_errno(e, w->fd, "create a temporary file next to '%s'", w->target);
                w->fd = -1;
                goto wrap;
        }
        if (fchmod(w->fd, mode) < 0) {
                tool_fail_errno(e, errno, "set the mode of a temporary file next to '%s'", w->target);
                goto wrap;
        }
        return 0;
wrap:
        tool_fail_wrap(e, tool);
fail:
        tool_write_fd_abort(w);
        return -1;
}

int tool_write_fd_commit(tool_fd_write *w, json_t **ret_result, tool_error *e)
{
        int r = close(w->fd) < 0 ? -errno : 0;
        w->fd = -1;
        if (r < 0 || commit_temp(w->dirfd, w->tmp, w->dirfd, w->name, w->target, e) < 0) {
                if (r < 0)
                        tool_fail_errno(e, r, "write '%s'", w->target);
                tool_fail_wrap(e, "write_file");
                tool_write_fd_abort(w);
                return -1;
        }
        w->tmp[0] = '\0';
        *ret_result = json_pack("{s:o, s:I, s:b}", "path", path_json(w->abs), "bytes_written", (json_int_t)w->size, "created", w->created);
        tool_write_fd_abort(w);
        return *ret_result ? 0 : oom(e);
}

void tool_write_fd_abort(tool_fd_write *w)
{
        if (w->fd >= 0)
                close(w->fd);
        if (w->dirfd >= 0 && w->tmp[0])
                unlinkat(w->dirfd, w->tmp, 0);
        if (w->dirfd >= 0)
                close(w->dirfd);
        free(w->target);
        free(w->abs);
        *w = (tool_fd_write){ .dirfd = -1, .fd = -1 };
}

typedef struct file_entry {
        char *abs;
        strbuf b64;
        const char *data;
        size_t len;
        write_opts o;
} file_entry;

static void file_entries_free(file_entry *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].abs);
                sb_release(&v[i].b64);
        }
        free(v);
}

int tool_write_files(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "write_files";
        json_t *files = json_object_get(in->params, "files");
        if (!json_is_array(files) || json_array_size(files) < 1 || json_array_size(files) > WRITE_FILES_MAX)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'files' must be an array of 1 to %u objects", tool,
                                 WRITE_FILES_MAX);
        size_t n = json_array_size(files);
        file_entry *v = calloc(n, sizeof(*v));
        if (!v)
                return oom(e);

        /* Validate every entry before writing any. */
        int r = 0;
        for (size_t i = 0; i < n && r == 0; i++) {
                char label[64];
                snprintf(label, sizeof(label), "%s: files[%zu]", tool, i);
                json_t *entry = json_array_get(files, i);
                sb_init(&v[i].b64, TOOL_MAX_CONTENT);
                v[i].o.parents = true;
                if (!json_is_object(entry)) {
                        r = tool_fail(e, TOOL_INVALID_ARGUMENT, "%s must be an object", label);
                        break;
                }
                /* Entries carry their content in JSON: the frame's payload belongs to no one entry. */
                tool_in sub = { .params = entry };
                r = tool_param_path(ctx, &sub, label, "path", NULL, &v[i].abs, e);
                if (r == 0)
                        r = param_content(&sub, label, &v[i].b64, &v[i].data, &v[i].len, e);
                if (r == 0)
                        r = param_mode(&sub, label, &v[i].o.mode_given, &v[i].o.mode, e);
        }
        if (r < 0) {
                file_entries_free(v, n);
                return -1;
        }

        json_t *results = json_array();
        size_t written = 0, failed = 0;
        for (size_t i = 0; i < n && results; i++) {
                bool created;
                tool_error err = { 0 };
                json_t *res;
                if (write_one(ctx, v[i].abs, v[i].data, v[i].len, &v[i].o, &created, &err) == 0) {
                        written++;
                        res = json_pack("{s:o, s:b, s:I}", "path", path_json(v[i].abs), "ok", true, "bytes_written",
                                        (json_int_t)v[i].len);
                } else {
                        failed++;
                        res = json_pack("{s:o, s:b, s:{s:s, s:s}}", "path", path_json(v[i].abs), "ok", false, "error",
                                        "code", tool_code_name(err.code), "message", err.message);
                }
                if (json_array_append_new(results, res) < 0) {
                        json_decref(results);
                        results = NULL;
                }
        }
        file_entries_free(v, n);
        if (!results)
                return oom(e);
        out->result = json_pack("{s:o, s:I, s:I}", "results", results, "written", (json_int_t)written, "failed",
                                (json_int_t)failed);
        return out->result ? 0 : oom(e);
}

/* ---- edit_file ---- */

static size_t count_occurrences(const char *hay, size_t n, const char *needle, size_t m)
{
        size_t count = 0;
        for (const char *p = hay, *end = hay + n; (p = memmem(p, (size_t)(end - p), needle, m)); p += m)
                count++;
        return count;
}

int tool_edit_file(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "edit_file";
        _cleanup_free_ char *abs = NULL;
        const char *old_string = NULL, *new_string = NULL;
        bool replace_all = false;
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0 ||
            tool_param_string(in, tool, "old_string", true, &old_string, e) < 0 ||
            tool_param_string(in, tool, "new_string", true, &new_string, e) < 0 ||
            tool_param_bool(in, tool, "replace_all", &replace_all, e) < 0)
                return -1;
        if (!*old_string)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'old_string' must not be empty", tool);

        /* Read and write the same name: through a final symlink, its target. */
        _cleanup_free_ char *target = NULL;
        _cleanup_close_ int dirfd = -1;
        const char *name;
        if (follow_final_symlinks(ctx, abs, &target, e) < 0 || tool_open_parent(ctx, target, &dirfd, &name, e) < 0)
                return tool_fail_wrap(e, tool);
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return tool_fail_errno(e, errno, "%s: open '%s'", tool, target);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return tool_fail_errno(e, errno, "%s: stat '%s'", tool, target);
        if (S_ISDIR(st.st_mode))
                return tool_fail(e, TOOL_IS_DIRECTORY, "%s: '%s' is a directory", tool, target);
        if (!S_ISREG(st.st_mode))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' is not a regular file", tool, target);
        if ((uint64_t)st.st_size > TOOL_MAX_CONTENT)
                return tool_fail(e, TOOL_TOO_LARGE, "%s: '%s' is %lld bytes, more than %u", tool, target,
                                 (long long)st.st_size, TOOL_MAX_CONTENT);

        _cleanup_sb_ strbuf text;
        sb_init(&text, TOOL_MAX_CONTENT);
        char chunk[16384];
        for (;;) {
                ssize_t k = read(fd, chunk, sizeof(chunk));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return tool_fail_errno(e, errno, "%s: read '%s'", tool, target);
                if (k == 0)
                        break;
                if (sb_append(&text, chunk, (size_t)k) < 0)
                        return tool_fail(e, TOOL_TOO_LARGE, "%s: '%s' is more than %u bytes", tool, target,
                                         TOOL_MAX_CONTENT);
        }
        const char *buf = text.buf ? text.buf : "";
        size_t old_len = strlen(old_string), new_len = strlen(new_string);
        size_t count = count_occurrences(buf, text.len, old_string, old_len);
        if (count == 0)
                return tool_fail(e, TOOL_NOT_FOUND, "%s: old_string not found in '%s'", tool, abs);
        if (count > 1 && !replace_all)
                return tool_fail(e, TOOL_CONFLICT, "%s: old_string occurs %zu times in '%s'; give more context or set replace_all",
                                 tool, count, abs);

        _cleanup_sb_ strbuf edited;
        sb_init(&edited, TOOL_MAX_CONTENT);
        const char *p = buf, *end = buf + text.len;
        for (const char *hit; (hit = memmem(p, (size_t)(end - p), old_string, old_len)); p = hit + old_len)
                if (sb_append(&edited, p, (size_t)(hit - p)) < 0 || sb_append(&edited, new_string, new_len) < 0)
                        return tool_fail(e, TOOL_TOO_LARGE, "%s: the edited file would be more than %u bytes", tool,
                                         TOOL_MAX_CONTENT);
        if (sb_append(&edited, p, (size_t)(end - p)) < 0)
                return tool_fail(e, TOOL_TOO_LARGE, "%s: the edited file would be more than %u bytes", tool,
                                 TOOL_MAX_CONTENT);
        if (replace_at(dirfd, name, target, edited.buf, edited.len, st.st_mode & 07777, e) < 0)
                return tool_fail_wrap(e, tool);
        out->result = json_pack("{s:o, s:I}", "path", path_json(abs), "occurrences", (json_int_t)count);
        return out->result ? 0 : oom(e);
}

/* ---- list_dir ---- */

typedef struct listed {
        char *path;
        json_t *entry;
} listed;

typedef struct listing {
        const tool_ctx *ctx; /* where its symlinks resolve */
        bool metadata;       /* each entry's (add_metadata) */
        listed *v;
        size_t n, alloc;
        bool truncated;
} listing;

static int list_add(listing *l, char *path, json_t *entry)
{
        if (l->n == l->alloc) {
                size_t na = l->alloc ? l->alloc * 2 : 64;
                listed *nv = realloc(l->v, na * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                l->v = nv;
                l->alloc = na;
        }
        l->v[l->n++] = (listed){ path, entry };
        return 0;
}

static int compare_listed(const void *a, const void *b)
{
        return strcmp(((const listed *)a)->path, ((const listed *)b)->path);
}

static int list_metadata(const listing *l, int dirfd, const char *name, const struct stat *st, json_t *entry)
{
        if (!l->metadata || !(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)))
                return 0;
        struct stat now;
        _cleanup_close_ int fd = open_metadata_at(dirfd, name, &now);
        return fd < 0 ? 0 : add_metadata(entry, fd, &now); /* gone or replaced meanwhile: none */
}

/* The entries of dirfd (at dir) and, depth > 1, of its directories; symlinks never descended. */
static int list_walk(int dirfd, const char *dir, unsigned depth, listing *l)
{
        _cleanup_strv_ char **names = NULL;
        int r = tool_read_dir(dirfd, &names);
        if (r < 0)
                return r;
        for (char **np = names; *np; np++) {
                if (l->n >= TOOL_MAX_ENTRIES) {
                        l->truncated = true;
                        return 0;
                }
                struct stat st;
                if (fstatat(dirfd, *np, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* removed meanwhile */
                char target[PATH_MAX];
                ssize_t tlen = S_ISLNK(st.st_mode) ? readlinkat(dirfd, *np, target, sizeof(target)) : -1;
                if (tlen >= (ssize_t)sizeof(target))
                        tlen = sizeof(target) - 1;
                json_t *entry = stat_json(&st, tlen >= 0 ? target : NULL, tlen >= 0 ? (size_t)tlen : 0, true);
                char *path = tool_path_join(dir, *np);
                if (!entry || !path || json_object_set_new(entry, "name", nsbox_json_text(*np, strlen(*np), NULL)) < 0 ||
                    json_object_set_new(entry, "path", path_json(path)) < 0 ||
                    (S_ISLNK(st.st_mode) && add_resolved(l->ctx, entry, path) < 0) || list_metadata(l, dirfd, *np, &st, entry) < 0 ||
                    list_add(l, path, entry) < 0) {
                        json_decref(entry);
                        free(path);
                        return -ENOMEM;
                }
                if (S_ISDIR(st.st_mode) && depth > 1) {
                        _cleanup_close_ int sub = openat(dirfd, *np, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        /* An unreadable subdirectory is listed, not entered. */
                        if (sub >= 0 && !tool_is_agent_proc(sub) && (r = list_walk(sub, path, depth - 1, l)) == -ENOMEM)
                                return r;
                }
        }
        return 0;
}

int tool_list_dir(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "list_dir";
        _cleanup_free_ char *abs = NULL;
        uint64_t depth = 1;
        bool metadata = false;
        if (tool_param_path(ctx, in, tool, "path", ".", &abs, e) < 0 ||
            tool_param_uint(in, tool, "depth", LIST_MAX_DEPTH, &depth, e) < 0 ||
            tool_param_bool(in, tool, "metadata", &metadata, e) < 0)
                return -1;
        if (depth < 1)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'depth' must be at least 1", tool);

        _cleanup_close_ int fd = -1;
        if (tool_open(ctx, abs, O_RDONLY | O_DIRECTORY, 0, &fd, e) < 0)
                return tool_fail_wrap(e, tool);
        listing l = { .ctx = ctx, .metadata = metadata };
        int r = list_walk(fd, abs, (unsigned)depth, &l);
        json_t *entries = r < 0 ? NULL : json_array();
        if (l.v)
                qsort(l.v, l.n, sizeof(*l.v), compare_listed);
        for (size_t i = 0; i < l.n; i++) {
                if (entries && json_array_append(entries, l.v[i].entry) < 0) {
                        json_decref(entries);
                        entries = NULL;
                }
                json_decref(l.v[i].entry);
                free(l.v[i].path);
        }
        free(l.v);
        if (r < 0)
                return tool_fail_errno(e, r, "%s: read directory '%s'", tool, abs);
        if (!entries)
                return oom(e);
        out->result = json_pack("{s:o, s:o, s:b}", "path", path_json(abs), "entries", entries, "truncated",
                                l.truncated);
        return out->result ? 0 : oom(e);
}

/* ---- stat, exists ---- */

int tool_entry(const tool_ctx *ctx, const char *tool, const char *abs, bool follow, bool metadata, json_t **ret,
               tool_error *e)
{
        _cleanup_close_ int fd = -1;
        if (tool_open(ctx, abs, O_PATH | (follow ? 0 : O_NOFOLLOW), 0, &fd, e) < 0)
                return tool_fail_wrap(e, "%s", tool);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return tool_fail_errno(e, errno, "%s: stat '%s'", tool, abs);
        char target[PATH_MAX];
        ssize_t tlen = -1;
        /* An O_PATH|O_NOFOLLOW fd of a symlink reads the link itself with an empty name. */
        if (S_ISLNK(st.st_mode) && (tlen = readlinkat(fd, "", target, sizeof(target))) < 0)
                return tool_fail_errno(e, errno, "%s: read link '%s'", tool, abs);
        if (tlen >= (ssize_t)sizeof(target))
                tlen = sizeof(target) - 1;
        json_t *o = stat_json(&st, tlen >= 0 ? target : NULL, tlen >= 0 ? (size_t)tlen : 0, true);
        if (!o || json_object_set_new(o, "path", path_json(abs)) < 0 || (S_ISLNK(st.st_mode) && add_resolved(ctx, o, abs) < 0) ||
            (metadata && add_metadata(o, fd, &st) < 0)) {
                json_decref(o);
                return oom(e);
        }
        *ret = o;
        return 0;
}

int tool_stat(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "stat";
        _cleanup_free_ char *abs = NULL;
        bool follow = false, metadata = false;
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0 ||
            tool_param_bool(in, tool, "follow", &follow, e) < 0 || tool_param_bool(in, tool, "metadata", &metadata, e) < 0)
                return -1;
        return tool_entry(ctx, tool, abs, follow, metadata, &out->result, e);
}

int tool_exists(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "exists";
        _cleanup_free_ char *abs = NULL;
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0)
                return -1;

        _cleanup_close_ int fd = -1;
        struct stat st;
        const char *type = NULL;
        if (tool_open(ctx, abs, O_PATH | O_NOFOLLOW, 0, &fd, e) == 0) {
                if (fstat(fd, &st) < 0)
                        return tool_fail_errno(e, errno, "%s: stat '%s'", tool, abs);
                type = type_name(st.st_mode);
        } else if (e->code != TOOL_FILE_NOT_FOUND && e->code != TOOL_NOT_A_DIRECTORY) {
                /* Missing, or below a file: does not exist.  Anything else the caller must see. */
                return tool_fail_wrap(e, tool);
        }
        out->result = json_pack("{s:o, s:b, s:o}", "path", path_json(abs), "exists", type != NULL, "type",
                                type ? json_string(type) : json_null());
        return out->result ? 0 : oom(e);
}

/* ---- mkdir ---- */

int tool_mkdir(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "mkdir";
        _cleanup_free_ char *abs = NULL;
        bool parents = false, mode_given = false;
        mode_t mode = 0755;
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0 ||
            tool_param_bool(in, tool, "parents", &parents, e) < 0 || param_mode(in, tool, &mode_given, &mode, e) < 0)
                return -1;

        bool created = false;
        if (parents) {
                if (mkdir_parents(ctx, abs, mode, &created, e) < 0)
                        return tool_fail_wrap(e, tool);
        } else {
                _cleanup_close_ int dirfd = -1;
                const char *name;
                if (tool_open_parent(ctx, abs, &dirfd, &name, e) < 0)
                        return tool_fail_wrap(e, tool);
                if (mkdirat(dirfd, name, 0700) < 0) {
                        if (errno == EEXIST)
                                return tool_fail(e, TOOL_CONFLICT, "%s: '%s' already exists", tool, abs);
                        return tool_fail_errno(e, errno, "%s: create directory '%s'", tool, abs);
                }
                /* Made 0700 and then given its mode, which the umask must not change. */
                _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fchmod(fd, mode) < 0)
                        return tool_fail_errno(e, errno, "%s: set the mode of '%s'", tool, abs);
                created = true;
        }
        out->result = json_pack("{s:o, s:b}", "path", path_json(abs), "created", created);
        return out->result ? 0 : oom(e);
}

/* ---- remove ---- */

/* Remove name in dirfd and everything below it, never following a symlink; *count grows by each
 * entry removed.  shown is name's path, for messages. */
static int remove_tree(int dirfd, const char *name, const char *shown, uint64_t *count, tool_error *e)
{
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return tool_fail_errno(e, errno, "stat '%s'", shown);
        if (S_ISDIR(st.st_mode)) {
                _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return tool_fail_errno(e, errno, "open '%s'", shown);
                _cleanup_strv_ char **names = NULL;
                int r = tool_read_dir(fd, &names);
                if (r < 0)
                        return tool_fail_errno(e, r, "read directory '%s'", shown);
                for (char **np = names; *np; np++) {
                        _cleanup_free_ char *sub = tool_path_join(shown, *np);
                        if (!sub)
                                return oom(e);
                        if (remove_tree(fd, *np, sub, count, e) < 0)
                                return -1;
                }
        }
        if (unlinkat(dirfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
                return tool_fail_errno(e, errno, "remove '%s'", shown);
        (*count)++;
        return 0;
}

int tool_remove(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "remove";
        _cleanup_free_ char *abs = NULL;
        bool recursive = false;
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0 ||
            tool_param_bool(in, tool, "recursive", &recursive, e) < 0)
                return -1;
        if (!strcmp(abs, "/"))
                return tool_fail(e, TOOL_INVALID_PATH, "%s: refusing to remove the root '/'", tool);

        _cleanup_close_ int dirfd = -1;
        const char *name;
        if (tool_open_parent(ctx, abs, &dirfd, &name, e) < 0)
                return tool_fail_wrap(e, tool);
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return tool_fail_errno(e, errno, "%s: '%s'", tool, abs);
        uint64_t count = 0;
        if (S_ISDIR(st.st_mode) && !recursive) {
                if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0) {
                        if (errno == ENOTEMPTY || errno == EEXIST)
                                return tool_fail(e, TOOL_CONFLICT, "%s: directory '%s' is not empty; set recursive",
                                                 tool, abs);
                        return tool_fail_errno(e, errno, "%s: remove '%s'", tool, abs);
                }
                count = 1;
        } else if (remove_tree(dirfd, name, abs, &count, e) < 0) {
                return tool_fail_wrap(e, tool);
        }
        out->result = json_pack("{s:o, s:I}", "path", path_json(abs), "removed", (json_int_t)count);
        return out->result ? 0 : oom(e);
}

/* ---- rename ---- */

int tool_rename(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "rename";
        _cleanup_free_ char *from = NULL, *to = NULL, *target = NULL;
        bool overwrite = true, as_write = false;
        if (tool_param_path(ctx, in, tool, "from", NULL, &from, e) < 0 ||
            tool_param_path(ctx, in, tool, "to", NULL, &to, e) < 0 ||
            tool_param_bool(in, tool, "overwrite", &overwrite, e) < 0 || tool_param_bool(in, tool, "write", &as_write, e) < 0)
                return -1;
        json_t *meta = json_object_get(in->params, "metadata");
        char why[160];
        if (json_is_null(meta))
                meta = NULL;
        if (meta && !as_write)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'metadata' is for a write's end (write: true)", tool);
        if (meta && tool_metadata_check(meta, why, sizeof(why)) < 0)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: %s", tool, why);
        json_t *meta_now = NULL; /* to's metadata after (meta given) */

        _cleanup_close_ int from_dir = -1, to_dir = -1;
        const char *from_name, *to_name;
        struct stat st;
        if (tool_open_parent(ctx, from, &from_dir, &from_name, e) < 0)
                return tool_fail_wrap(e, tool);
        /* A missing source must not leave new directories behind for the destination. */
        if (fstatat(from_dir, from_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return tool_fail_errno(e, errno, "%s: '%s'", tool, from);
        if (as_write) { /* a staged write's end: from becomes to as write_file would make it */
                struct stat tst;
                if (!S_ISREG(st.st_mode))
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' is not a regular file", tool, from);
                if (follow_final_symlinks(ctx, to, &target, e) < 0 || open_parent(ctx, target, true, &to_dir, &to_name, e) < 0)
                        return tool_fail_wrap(e, tool);
                bool existed = fstatat(to_dir, to_name, &tst, AT_SYMLINK_NOFOLLOW) == 0;
                if (existed && !overwrite)
                        return tool_fail(e, TOOL_CONFLICT, "%s: '%s' already exists", tool, to);
                if (existed && S_ISDIR(tst.st_mode))
                        return tool_fail_errno(e, EISDIR, "%s: '%s'", tool, target);
                if (existed && !S_ISREG(tst.st_mode))
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s': not a regular file", tool, target);
                /* the metadata goes on the temporary while it is still writable (a read-only file's
                 * mode comes next), and again on to if its contents were copied into it */
                if (meta && write_metadata_at(from_dir, from_name, NULL, meta) < 0) {
                        int err = errno;
                        unlinkat(from_dir, from_name, 0);
                        return tool_fail_errno(e, err, "%s: metadata of '%s'", tool, to);
                }
                if (existed && fchmodat(from_dir, from_name, tst.st_mode & 07777, 0) < 0)
                        return tool_fail_errno(e, errno, "%s: '%s'", tool, from);
                if (commit_temp(from_dir, from_name, to_dir, to_name, target, e) < 0)
                        return tool_fail_wrap(e, tool);
                if (meta && write_metadata_at(to_dir, to_name, &st, meta) < 0)
                        return tool_fail_errno(e, errno, "%s: metadata of '%s'", tool, to);
                if (meta)
                        meta_now = read_metadata_at(to_dir, to_name);
        } else if (open_parent(ctx, to, true, &to_dir, &to_name, e) < 0) {
                return tool_fail_wrap(e, tool);
        } else if (renameat2(from_dir, from_name, to_dir, to_name, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
                if (errno == EEXIST && !overwrite)
                        return tool_fail(e, TOOL_CONFLICT, "%s: '%s' already exists", tool, to);
                return tool_fail_errno(e, errno, "%s: rename '%s' to '%s'", tool, from, to);
        }
        out->result = json_pack("{s:o, s:o}", "from", path_json(from), "to", path_json(to));
        if (out->result && meta_now && json_object_set_new(out->result, "metadata", meta_now) < 0) {
                json_decref(out->result);
                out->result = NULL;
        } else if (!out->result) {
                json_decref(meta_now);
        }
        return out->result ? 0 : oom(e);
}
