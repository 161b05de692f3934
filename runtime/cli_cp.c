/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox cp: a file (read_file/write_file chunks) or, with -r, a directory (a tar stream through
 * exec, extracted on the host under the target directory only) into or out of a sandbox. */
#include "cli_session.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base64.h"
#include "client.h"
#include "ids.h"
#include "util.h"

#define CP_CHUNK (4u << 20) /* bytes per call: large files are streamed, never held whole */
#define usage_error nsbox_cli_usage_error
#define call_once nsbox_cli_call

static const char usage_cp[] =
        "usage: nsbox cp [-r] [--max-size SIZE] SRC DST\n"
        "\n"
        "Copy a regular file into or out of a sandbox: one of SRC and DST is ID:PATH (PATH\n"
        "relative to the sandbox's workdir or absolute inside it), the other a host path (- for\n"
        "standard input or output).  Binary-safe and streamed in chunks; the destination is\n"
        "replaced only once the whole file is there.  A directory as DST receives SRC's name.\n"
        "  -r, -R, --recursive    copy a directory: a tar stream (tar on both sides), modes and\n"
        "                         symlinks kept (as links, never followed); the new directory\n"
        "                         (DST, or DST/NAME when DST is a directory) must not exist and\n"
        "                         appears only once complete; out of a sandbox, absolute names,\n"
        "                         '..' and paths through links are refused\n"
        "  --max-size SIZE        cp -r: refuse a tar stream larger than SIZE (default: 1G)\n";

/* "ID:PATH" with ID a (prefix of a) sandbox id: hex digits, at least 4, then for a whole id of
 * a cluster's node "-NODE" (ids.h). */
static bool split_remote(const char *arg, char **ret_id, const char **ret_path)
{
        const char *colon = strchr(arg, ':');
        if (!colon || colon - arg < 4 || colon - arg > NSBOX_ID_MAX)
                return false;
        size_t hex = strspn(arg, "0123456789abcdef"), n = (size_t)(colon - arg);
        char id[NSBOX_ID_SIZE];
        snprintf(id, sizeof(id), "%.*s", (int)n, arg);
        if (hex != n && !(hex == NSBOX_ID_HEX && nsbox_id_ok(id)))
                return false;
        *ret_id = strndup(arg, (size_t)(colon - arg));
        *ret_path = colon + 1;
        return *ret_id != NULL;
}

static const char *base_name(const char *p)
{
        const char *s = strrchr(p, '/');
        return s ? s + 1 : p;
}

/* One tool call in a copy; prints the error itself.  0 or an exit status. */
static int cp_call(nsbox_client *cl, const char *id, const char *tool, json_t *tparams, json_t **ret)
{
        json_t *params = json_pack("{ss ss so}", "sandbox", id, "tool", tool, "params", tparams);
        json_t *res = NULL;
        int st = call_once("cp", cl, "call", params, NULL, NULL, &res, EXIT_REFUSED);
        if (ret)
                *ret = res;
        else
                json_decref(res);
        return st;
}

static int cp_out_dir(const char *id, const char *src, const char *dst, uint64_t max);
static int cp_in_dir(const char *id, const char *src, const char *dst, uint64_t max);

static int cp_in(nsbox_client *cl, const char *src, const char *id, const char *dst, bool recursive, uint64_t max)
{
        /* O_NONBLOCK: a FIFO must not hang the copy (it is refused below; - is for pipes) */
        bool from_stdin = !strcmp(src, "-");
        _cleanup_close_ int fd = from_stdin ? dup(0) : open(src, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "nsbox: cp: '%s': %s\n", src, strerror(errno));
                return EXIT_REFUSED;
        }
        if (S_ISDIR(st.st_mode) && recursive)
                return cp_in_dir(id, src, dst, max);
        if (S_ISDIR(st.st_mode)) {
                fprintf(stderr, "nsbox: cp: '%s' is a directory (use -r)\n", src);
                return EXIT_REFUSED;
        }
        if (!from_stdin && !S_ISREG(st.st_mode)) {
                fprintf(stderr, "nsbox: cp: '%s' is not a regular file: nsbox cp copies regular files only (- reads standard input)\n", src);
                return EXIT_REFUSED;
        }
        /* into a directory: under SRC's name */
        _cleanup_free_ char *target = strdup(dst);
        json_t *sres = NULL;
        int r = cp_call(cl, id, "exists", json_pack("{ss}", "path", dst), &sres);
        if (r)
                return r;
        const char *type = json_string_value(json_object_get(sres, "type"));
        if ((type && !strcmp(type, "directory")) || (dst[0] && dst[strlen(dst) - 1] == '/')) {
                free(target);
                target = NULL;
                if (!strcmp(src, "-") || asprintf(&target, "%s/%s", dst, base_name(src)) < 0) {
                        json_decref(sres);
                        fprintf(stderr, "nsbox: cp: '%s' is a directory: give the file name\n", dst);
                        return EXIT_REFUSED;
                }
        }
        json_decref(sres);
        if (!target)
                return EXIT_NSBOX;
        /* a regular file goes through a pipe, straight to the agent (NSBOX_CP_NO_FD: as chunks) */
        if (!from_stdin && !getenv("NSBOX_CP_NO_FD"))
                return nsbox_cp_in_fd(cl, fd, (uint64_t)st.st_size, st.st_mode, id, target);
        /* chunks go to a temporary name next to the target, renamed over it at the end */
        _cleanup_free_ char *tmp = NULL;
        const char *slash = strrchr(target, '/');
        if (asprintf(&tmp, "%.*s.%s.nsbox-cp-%d", slash ? (int)(slash - target + 1) : 0, target, slash ? slash + 1 : target,
                     (int)getpid()) < 0)
                return EXIT_NSBOX;
        char *buf = malloc(CP_CHUNK), *enc = malloc(b64_encoded_len(CP_CHUNK) + 1);
        if (!buf || !enc) {
                free(buf);
                free(enc);
                return EXIT_NSBOX;
        }
        bool first = true;
        for (;;) {
                ssize_t n = read_full(fd, buf, CP_CHUNK);
                if (n < 0) {
                        fprintf(stderr, "nsbox: cp: read '%s': %s\n", src, strerror(errno));
                        r = EXIT_REFUSED;
                        break;
                }
                if (n == 0 && !first)
                        break;
                b64_encode(buf, (size_t)n, enc);
                json_t *tp = json_pack("{ss ss sb}", "path", tmp, "content_b64", enc, "append", !first);
                if (first && S_ISREG(st.st_mode))
                        json_object_set_new(tp, "mode", json_integer(st.st_mode & 0777));
                if ((r = cp_call(cl, id, "write_file", tp, NULL)))
                        break;
                first = false;
                if ((size_t)n < CP_CHUNK)
                        break;
        }
        free(buf);
        free(enc);
        if (r == 0)
                r = cp_call(cl, id, "rename", json_pack("{ss ss}", "from", tmp, "to", target), NULL);
        if (r && !first)
                cp_call(cl, id, "remove", json_pack("{ss}", "path", tmp), NULL);
        return r;
}

/* Write n zero bytes to fd: a hole of the file, for an output that cannot seek (standard output). */
static int write_zeros(int fd, uint64_t n)
{
        static const char zeros[65536];
        while (n > 0) {
                size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
                int r = write_full(fd, zeros, k);
                if (r < 0)
                        return r;
                n -= k;
        }
        return 0;
}

static int pwrite_full(int fd, const char *buf, size_t n, uint64_t at)
{
        while (n > 0) {
                ssize_t k = pwrite(fd, buf, n, (off_t)at);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                buf += k;
                n -= (size_t)k;
                at += (uint64_t)k;
        }
        return 0;
}

static mode_t caller_umask(void)
{
        mode_t m = umask(0);
        umask(m);
        return m;
}

/* The file as it was when cp began: its size then bounds the copy (a file growing inside would
 * keep a copy going for ever), its holes stay holes (a sparse file of 512 MiB holding nothing is
 * not sent, nor written out, as 512 MiB of zeros), and only a regular file is copied. */
static int cp_out(nsbox_client *cl, const char *id, const char *src, const char *dst, bool recursive, uint64_t max)
{
        json_t *sres = NULL;
        int r = cp_call(cl, id, "stat", json_pack("{ss sb}", "path", src, "follow", 1), &sres);
        if (r)
                return r;
        const char *type = json_string_value(json_object_get(sres, "type"));
        bool regular = type && !strcmp(type, "file");
        json_int_t mode = json_integer_value(json_object_get(sres, "mode"));
        json_int_t size = json_integer_value(json_object_get(sres, "size"));
        if (type && !strcmp(type, "directory")) {
                json_decref(sres);
                if (recursive)
                        return cp_out_dir(id, src, dst, max);
                _cleanup_free_ char *safe = nsbox_escape_controls(src);
                fprintf(stderr, "nsbox: cp: '%s' in sandbox %s is a directory (use -r)\n", safe ? safe : "?", id);
                return EXIT_REFUSED;
        }
        if (!regular || size < 0) {
                fprintf(stderr, "nsbox: cp: '%s' in sandbox %s is not a regular file (%.32s): nsbox cp copies regular files only\n", src, id,
                        type ? type : "unknown");
                json_decref(sres);
                return EXIT_REFUSED;
        }
        json_decref(sres);
        bool to_stdout = !strcmp(dst, "-");
        _cleanup_free_ char *target = strdup(dst), *tmp = NULL;
        struct stat st;
        if (!to_stdout && stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
                free(target);
                if (asprintf(&target, "%s/%s", dst, base_name(src)) < 0)
                        return EXIT_NSBOX;
        }
        if (!target || (!to_stdout && asprintf(&tmp, "%s.nsbox-cp-%d", target, (int)getpid()) < 0))
                return EXIT_NSBOX;
        _cleanup_close_ int fd = to_stdout ? dup(1) : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                fprintf(stderr, "nsbox: cp: '%s': %s\n", to_stdout ? "-" : tmp, strerror(errno));
                return EXIT_REFUSED;
        }
        /* the holes, as the caller's own cp makes them: a file of that size, data written into it */
        if (!to_stdout && ftruncate(fd, (off_t)size) < 0) {
                fprintf(stderr, "nsbox: cp: '%s': %s\n", tmp, strerror(errno));
                unlink(tmp);
                return EXIT_REFUSED;
        }
        strbuf bytes;
        sb_init(&bytes, 0);
        /* a size of 0 is not a bound: a pseudo file's (procfs, sysfs) is copied to its end, holes
         * and all; the agent bounds any other file by its size when it opens it */
        bool unsized = size == 0;
        uint64_t end = unsized ? UINT64_MAX : (uint64_t)size, off = 0;
        if (!getenv("NSBOX_CP_NO_FD")) { /* through a pipe, straight from the agent */
                r = nsbox_cp_out_fd(cl, id, src, (uint64_t)size, fd, !to_stdout && !unsized, &off);
        }
        while (off < end && getenv("NSBOX_CP_NO_FD")) {
                json_t *res = NULL;
                uint64_t want = end - off < CP_CHUNK ? end - off : CP_CHUNK;
                r = cp_call(cl, id, "read_file",
                            json_pack("{ss ss sI sI sb}", "path", src, "encoding", "base64", "byte_offset", (json_int_t)off, "byte_limit",
                                      (json_int_t)want, "skip_holes", 1),
                            &res);
                if (r)
                        break;
                json_t *content = json_object_get(res, "content");
                json_int_t at = json_integer_value(json_object_get(res, "byte_offset"));
                bytes.len = 0;
                if (!json_is_string(content) || b64_decode(json_string_value(content), json_string_length(content), &bytes) < 0 ||
                    at < (json_int_t)off) {
                        json_decref(res);
                        fprintf(stderr, "nsbox: cp: nsboxd sent a malformed chunk\n");
                        r = EXIT_NSBOX;
                        break;
                }
                bool eof = json_is_true(json_object_get(res, "eof"));
                json_decref(res);
                /* what lies past the size seen at first is not copied */
                uint64_t from = (uint64_t)at < end ? (uint64_t)at : end;
                size_t n = bytes.len < end - from ? bytes.len : (size_t)(end - from);
                int w = 0;
                if (to_stdout) {
                        w = write_zeros(fd, from - off);
                        if (w == 0 && n)
                                w = write_full(fd, bytes.buf, n);
                } else if (n) {
                        w = pwrite_full(fd, bytes.buf, n, from);
                }
                if (w < 0) {
                        fprintf(stderr, "nsbox: cp: write '%s': %s\n", to_stdout ? "-" : tmp, strerror(-w));
                        r = EXIT_REFUSED;
                        break;
                }
                off = from + n;
                if (eof || n == 0)
                        break;
        }
        sb_release(&bytes);
        if (unsized)
                end = off;
        if (to_stdout) /* a file that shrank meanwhile still gives the size seen at first */
                return r ? r : write_zeros(fd, end - off) < 0 ? EXIT_REFUSED : 0;
        /* the caller's umask applies, as to any file it makes; no setuid, setgid or sticky bit */
        if (r == 0 && (fchmod(fd, (mode_t)(mode & 0777) & ~caller_umask()) < 0 || rename(tmp, target) < 0)) {
                fprintf(stderr, "nsbox: cp: '%s': %s\n", target, strerror(errno));
                r = EXIT_REFUSED;
        }
        if (r)
                unlink(tmp);
        return r;
}

/* ---- cp -r: a tar stream ----------------------------------------------------------------------- */

/* Out of a sandbox, the stream is untrusted: every entry is made under the target directory
 * only (parents opened O_NOFOLLOW one by one, files created O_EXCL|O_NOFOLLOW), absolute names
 * and ".." refused, symlinks made as links and never followed, setuid/setgid bits dropped. */
#define CP_MAX_DEFAULT (1ull << 30) /* a tar stream's bytes, either way: --max-size */
#define META_MAX (64u << 10)        /* a long name or a pax header */

typedef struct untar {
        nsbox_client *cl;       /* to stop the call on the first error */
        int root;               /* the directory everything is made under */
        unsigned char hdr[512];
        size_t hhave;
        uint64_t left, pad;     /* the current entry's data bytes to come, then its padding */
        int fd;                 /* the regular file being written, or -1 */
        char kind;              /* of the data: 'L', 'K', 'x' (kept in meta), else written or skipped */
        strbuf meta;
        char *long_name, *long_link;
        uint64_t total, max;
        char **dirs;            /* "MODE PATH" of each directory: modes set at the end */
        mode_t umask;
        char *err;              /* the first error; what follows it is ignored */
        bool end;
} untar;

static void untar_fail(untar *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void untar_fail(untar *u, const char *fmt, ...)
{
        if (u->err)
                return;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&u->err, fmt, ap) < 0)
                u->err = NULL;
        va_end(ap);
        if (!u->err)
                u->err = strdup("out of memory");
        u->cl->stop = true;
}

static uint64_t tar_num(const unsigned char *p, size_t n)
{
        uint64_t v = 0;
        if (p[0] & 0x80) { /* base-256, GNU's for large sizes */
                for (size_t i = 1; i < n; i++)
                        v = v << 8 | p[i];
                return v;
        }
        for (size_t i = 0; i < n && p[i] == ' '; i++)
                p++, n--;
        for (size_t i = 0; i < n && p[i] >= '0' && p[i] <= '7'; i++)
                v = v << 3 | (uint64_t)(p[i] - '0');
        return v;
}

/* name made relative and checked: NULL when it must be refused; "" is the target itself */
static const char *safe_rel(const char *name)
{
        if (name[0] == '/')
                return NULL;
        while (name[0] == '.' && (name[1] == '/' || !name[1]))
                name += name[1] ? 2 : 1;
        for (const char *c = name; *c;) {
                size_t l = strcspn(c, "/");
                if (l == 2 && c[0] == '.' && c[1] == '.')
                        return NULL;
                c += l;
                while (*c == '/')
                        c++;
        }
        return name;
}

/* The directory holding rel's last component, opened without following any link (missing
 * ones made); *ret_last points into rel.  -1 after untar_fail. */
static int open_parent(untar *u, const char *rel, char *last, size_t lastsz)
{
        int cur = dup(u->root);
        const char *c = rel;
        for (;;) {
                size_t l = strcspn(c, "/");
                const char *next = c + l;
                while (*next == '/')
                        next++;
                if (l >= lastsz || l == 0) {
                        close(cur);
                        untar_fail(u, "'%s': a bad name", rel);
                        return -1;
                }
                memcpy(last, c, l);
                last[l] = 0;
                if (!*next)
                        return cur;
                if (strcmp(last, ".")) {
                        int fd = openat(cur, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0 && errno == ENOENT && mkdirat(cur, last, 0700) == 0)
                                fd = openat(cur, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0) {
                                untar_fail(u, "'%s': %s", rel, errno == ELOOP || errno == ENOTDIR ? "goes through a link or a file: refused" : strerror(errno));
                                close(cur);
                                return -1;
                        }
                        close(cur);
                        cur = fd;
                }
                c = next;
        }
}

static void untar_entry(untar *u, const char *name, const char *link, char type, mode_t mode)
{
        const char *rel = safe_rel(name);
        if (!rel) {
                _cleanup_free_ char *safe = nsbox_escape_controls(name);
                untar_fail(u, "'%s': an absolute name or one with '..': refused", safe ? safe : "?");
                return;
        }
        char *d;
        if (!*rel) { /* the target itself: its mode only */
                if (type == '5' && asprintf(&d, "%o ", (unsigned)mode) >= 0 && strv_push(&u->dirs, d) < 0)
                        free(d);
                return;
        }
        char last[NAME_MAX + 1];
        _cleanup_close_ int parent = open_parent(u, rel, last, sizeof(last));
        if (parent < 0)
                return;
        int r = 0;
        for (int again = 0; again < 2; again++) {
                if (type == '5') {
                        struct stat st;
                        r = mkdirat(parent, last, 0700);
                        if (r < 0 && errno == EEXIST && fstatat(parent, last, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                                r = 0;
                        if (r == 0 && asprintf(&d, "%o %s", (unsigned)mode, rel) >= 0 && strv_push(&u->dirs, d) < 0)
                                free(d);
                } else if (type == '2') {
                        r = symlinkat(link, parent, last);
                } else {
                        u->fd = openat(parent, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                        r = u->fd < 0 ? -1 : fchmod(u->fd, mode & 0777 & ~u->umask);
                }
                if (r == 0 || errno != EEXIST || type == '5' || unlinkat(parent, last, 0) < 0)
                        break;
        }
        if (r < 0) {
                _cleanup_free_ char *safe = nsbox_escape_controls(rel);
                untar_fail(u, "'%s': %s", safe ? safe : "?", strerror(errno));
        }
}

/* a pax header's path and linkpath ("LEN KEY=VALUE\n" records) */
static void untar_pax(untar *u)
{
        const char *p = u->meta.buf, *end = u->meta.buf + u->meta.len;
        while (p && p < end) {
                char *sp;
                unsigned long len = strtoul(p, &sp, 10);
                if (*sp != ' ' || len == 0 || len > (size_t)(end - p) || p[len - 1] != '\n')
                        break;
                const char *kv = sp + 1, *eq = memchr(kv, '=', (size_t)(p + len - kv));
                if (eq) {
                        char **slot = !strncmp(kv, "path=", 5) ? &u->long_name : !strncmp(kv, "linkpath=", 9) ? &u->long_link : NULL;
                        if (slot) {
                                free(*slot);
                                *slot = strndup(eq + 1, (size_t)(p + len - 1 - eq - 1));
                        }
                }
                p += len;
        }
}

static void untar_header(untar *u)
{
        const unsigned char *h = u->hdr;
        bool zero = true;
        for (size_t i = 0; i < 512 && zero; i++)
                zero = !h[i];
        if (zero) {
                u->end = true;
                return;
        }
        unsigned sum = 0;
        for (size_t i = 0; i < 512; i++)
                sum += i >= 148 && i < 156 ? ' ' : h[i];
        if (sum != tar_num(h + 148, 8)) {
                untar_fail(u, "not a tar stream (bad header checksum)");
                return;
        }
        uint64_t size = tar_num(h + 124, 12);
        char type = (char)h[156];
        u->left = size;
        u->pad = (512 - size % 512) % 512;
        u->kind = 0;
        if (type == 'L' || type == 'K' || type == 'x') {
                u->kind = type;
                u->meta.len = 0;
                if (size > META_MAX)
                        untar_fail(u, "a name or pax header of %" PRIu64 " bytes: refused", size);
                return;
        }
        if (type == 'g')
                return;
        char name[257], link[101];
        if (!memcmp(h + 257, "ustar", 5) && h[345])
                snprintf(name, sizeof(name), "%.155s/%.100s", (const char *)h + 345, (const char *)h);
        else
                snprintf(name, sizeof(name), "%.100s", (const char *)h);
        snprintf(link, sizeof(link), "%.100s", (const char *)h + 157);
        const char *n = u->long_name ? u->long_name : name, *l = u->long_link ? u->long_link : link;
        mode_t mode = (mode_t)tar_num(h + 100, 8) & 0777;
        if (type == '0' || type == '\0' || type == '7' || type == '5' || type == '2') {
                untar_entry(u, n, l, type == '5' || type == '2' ? type : '0', mode);
        } else {
                _cleanup_free_ char *safe = nsbox_escape_controls(n);
                fprintf(stderr, "nsbox: cp: '%s': %s not copied\n", safe ? safe : "?", type == '1' ? "a hard link" : "a special file");
        }
        free(u->long_name);
        free(u->long_link);
        u->long_name = u->long_link = NULL;
}

static void untar_data_end(untar *u)
{
        if (u->fd >= 0) {
                close(u->fd);
                u->fd = -1;
        }
        if (u->kind == 'x') {
                untar_pax(u);
        } else if (u->kind == 'L' || u->kind == 'K') {
                char **slot = u->kind == 'L' ? &u->long_name : &u->long_link;
                free(*slot);
                *slot = strndup(u->meta.buf ? u->meta.buf : "", u->meta.len);
        }
        u->kind = 0;
}

static void untar_feed(untar *u, const char *p, size_t n)
{
        if (u->err || u->end)
                return;
        u->total += n;
        if (u->total > u->max) {
                untar_fail(u, "larger than %" PRIu64 " bytes as a tar stream (see --max-size)", u->max);
                return;
        }
        while (n && !u->err && !u->end) {
                size_t k;
                if (u->left) {
                        k = u->left < n ? (size_t)u->left : n;
                        if (u->fd >= 0 && write_full(u->fd, p, k) < 0)
                                untar_fail(u, "write: %s", strerror(errno));
                        if (u->kind)
                                sb_append(&u->meta, p, k);
                        u->left -= k;
                        if (!u->left)
                                untar_data_end(u);
                } else if (u->pad) {
                        k = u->pad < n ? (size_t)u->pad : n;
                        u->pad -= k;
                } else {
                        k = 512 - u->hhave < n ? 512 - u->hhave : n;
                        memcpy(u->hdr + u->hhave, p, k);
                        u->hhave += k;
                        if (u->hhave == 512) {
                                u->hhave = 0;
                                untar_header(u);
                                if (!u->left && !u->err)
                                        untar_data_end(u);
                        }
                }
                p += k;
                n -= k;
        }
}

static void untar_event(json_t *params, void *ud)
{
        untar *u = ud;
        json_t *data = json_object_get(params, "data_b64");
        if (!json_is_string(data))
                return;
        strbuf sb;
        sb_init(&sb, 0);
        if (b64_decode(json_string_value(data), json_string_length(data), &sb) == 0)
                untar_feed(u, sb.buf ? sb.buf : "", sb.len);
        else
                untar_fail(u, "nsboxd sent a malformed chunk");
        sb_release(&sb);
}

/* the directory modes, deepest first (a directory without write permission is filled first) */
static void untar_dir_modes(untar *u)
{
        size_t n = 0;
        while (u->dirs && u->dirs[n])
                n++;
        while (n-- > 0) {
                char *sp = strchr(u->dirs[n], ' '), last[NAME_MAX + 1];
                mode_t mode = (mode_t)strtoul(u->dirs[n], NULL, 8) & 0777 & ~u->umask;
                if (!sp[1]) {
                        fchmod(u->root, mode);
                        continue;
                }
                _cleanup_close_ int parent = open_parent(u, sp + 1, last, sizeof(last));
                _cleanup_close_ int fd = parent < 0 ? -1 : openat(parent, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0)
                        fchmod(fd, mode);
        }
}

/* Remove what an unfinished copy made under dirfd/name, following no link. */
static void rm_tree(int dirfd, const char *name)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
                fchmod(fd, 0700);
                DIR *d = fdopendir(fd);
                struct dirent *e;
                while (d && (e = readdir(d)))
                        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                                rm_tree(fd, e->d_name);
                if (d)
                        closedir(d);
                else
                        close(fd);
        }
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
                unlinkat(dirfd, name, 0);
}

/* src's last component, trailing slashes left out; NULL for "/", "." or ".." */
static char *last_name(const char *src)
{
        size_t l = strlen(src);
        while (l > 1 && src[l - 1] == '/')
                l--;
        const char *s = src + l;
        while (s > src && s[-1] != '/')
                s--;
        char *n = strndup(s, (size_t)(src + l - s));
        if (n && (!*n || !strcmp(n, "/") || !strcmp(n, ".") || !strcmp(n, ".."))) {
                free(n);
                return NULL;
        }
        return n;
}

/* DIR's tar, cut after max+1 bytes, exiting with tar's status (not head's): a file tar could not
 * read fails the copy */
static const char tar_out_sh[] = "cd -- \"$1\" || exit 1\n"
                                 "exec 3>&1\n"
                                 "st=$( { { tar -cf - . 3>&- 4>&-; echo $? >&4; } | head -c \"$2\" >&3 3>&- 4>&-; } 4>&1 )\n"
                                 "exit \"${st:-1}\"\n";

/* cp -r ID:DIR DST: DIR's tar (made inside, cut at max+1 bytes) extracted into a new directory
 * next to the target, renamed to it once complete */
static int cp_out_dir(const char *id, const char *src, const char *dst, uint64_t max)
{
        _cleanup_free_ char *name = last_name(src), *target = NULL, *tmp = NULL, *cap = NULL;
        struct stat st;
        bool into = stat(dst, &st) == 0 && S_ISDIR(st.st_mode);
        if (into && !name)
                return usage_error("cp", "'%s': give DST as a new directory's name", src);
        if ((into ? asprintf(&target, "%s/%s", dst, name) : asprintf(&target, "%s", dst)) < 0 ||
            asprintf(&tmp, "%s.nsbox-cp-%d", target, (int)getpid()) < 0 || asprintf(&cap, "%" PRIu64, max + 1) < 0)
                return EXIT_NSBOX;
        if (lstat(target, &st) == 0) {
                fprintf(stderr, "nsbox: cp: '%s' exists: nsbox cp -r makes a new directory\n", target);
                return EXIT_REFUSED;
        }
        if (mkdir(tmp, 0700) < 0) {
                fprintf(stderr, "nsbox: cp: '%s': %s\n", tmp, strerror(errno));
                return EXIT_REFUSED;
        }
        nsbox_client cl = { .fd = -1 };
        untar u = { .cl = &cl, .fd = -1, .max = max, .umask = caller_umask() };
        sb_init(&u.meta, 0);
        u.root = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        json_t *cmd = json_pack("[ssssss]", "sh", "-c", tar_out_sh, "sh", src, cap);
        int code = -1, r = u.root < 0 ? EXIT_NSBOX : nsbox_cli_exec_stream("cp", &cl, id, cmd, -1, 0, NULL, untar_event, &u, &code);
        if (u.fd >= 0)
                close(u.fd);
        if (r == 0 && !u.err && code != 0)
                untar_fail(&u, "could not read '%s' in sandbox %s (exit status %d)", src, id, code);
        if (r == 0 && !u.err && !u.end)
                untar_fail(&u, "the tar stream ended early");
        if (u.err) {
                _cleanup_free_ char *safe = nsbox_escape_controls(src);
                fprintf(stderr, "nsbox: cp: '%s': %s\n", safe ? safe : "?", u.err);
                r = EXIT_REFUSED;
        }
        if (r == 0)
                untar_dir_modes(&u);
        if (r == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, target, RENAME_NOREPLACE) < 0) {
                fprintf(stderr, "nsbox: cp: '%s': %s\n", target, strerror(errno));
                r = EXIT_REFUSED;
        }
        if (r)
                rm_tree(AT_FDCWD, tmp);
        if (u.root >= 0)
                close(u.root);
        nsbox_client_close(&cl);
        sb_release(&u.meta);
        strv_free(u.dirs);
        free(u.err);
        free(u.long_name);
        free(u.long_link);
        return r;
}

/* cp -r DIR ID:DST: the host's tar of DIR, extracted inside into a new directory renamed to the
 * target once complete; past max bytes the stream is cut and the copy fails, leaving nothing */
static const char untar_in_sh[] =
        "d=$1; [ -d \"$d\" ] && d=${d%/}/$2\n"
        "if [ -e \"$d\" ] || [ -L \"$d\" ]; then echo \"nsbox: cp: '$d' exists in the sandbox: nsbox cp -r makes a new directory\" >&2; exit 17; fi\n"
        "t=$d.nsbox-cp-$$; mkdir -- \"$t\" || exit 1\n"
        "if tar -xpf - --no-same-owner -C \"$t\"; then mv -- \"$t\" \"$d\" && exit 0; fi\n"
        "rm -rf -- \"$t\"; exit 1\n";

static int cp_in_dir(const char *id, const char *src, const char *dst, uint64_t max)
{
        _cleanup_free_ char *real = realpath(src, NULL);
        _cleanup_free_ char *name = real ? last_name(real) : NULL;
        if (!name)
                return usage_error("cp", "'%s': %s", src, real ? "cannot copy the root directory" : strerror(errno));
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return EXIT_NSBOX;
        pid_t pid = fork();
        if (pid == 0) {
                dup2(pfd[1], 1);
                execlp("tar", "tar", "-C", real, "-cf", "-", ".", (char *)NULL);
                fprintf(stderr, "nsbox: cp: tar: %s\n", strerror(errno));
                _exit(127);
        }
        close(pfd[1]);
        if (pid < 0) {
                close(pfd[0]);
                return EXIT_NSBOX;
        }
        json_t *cmd = json_pack("[ssssss]", "sh", "-c", untar_in_sh, "sh", dst, name);
        bool over = false;
        int code = -1, wst = 0;
        nsbox_client cl = { .fd = -1 };
        int r = nsbox_cli_exec_stream("cp", &cl, id, cmd, pfd[0], max, &over, NULL, NULL, &code);
        nsbox_client_close(&cl);
        close(pfd[0]);
        kill(pid, SIGTERM); /* our own child, if still writing */
        waitpid(pid, &wst, 0);
        if (r)
                return r;
        if (over) {
                fprintf(stderr, "nsbox: cp: '%s': larger than %" PRIu64 " bytes as a tar stream (see --max-size): nothing copied\n", src, max);
                return EXIT_REFUSED;
        }
        if (code != 0 && code != 17)
                fprintf(stderr, "nsbox: cp: '%s': the copy failed in sandbox %s (exit status %d): nothing copied\n", src, id, code);
        else if (code == 0 && (!WIFEXITED(wst) || WEXITSTATUS(wst)))
                fprintf(stderr, "nsbox: cp: warning: tar of '%s' on the host reported errors (above)\n", src);
        return code == 0 ? 0 : EXIT_REFUSED;
}

int nsbox_cmd_cp(int argc, char **argv)
{
        bool recursive = false;
        uint64_t max = CP_MAX_DEFAULT;
        int i = 1;
        for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        fputs(usage_cp, stdout);
                        return 0;
                } else if (!strcmp(argv[i], "-r") || !strcmp(argv[i], "-R") || !strcmp(argv[i], "--recursive")) {
                        recursive = true;
                } else if (!strcmp(argv[i], "--max-size")) {
                        if (i + 1 >= argc)
                                return usage_error("cp", "--max-size needs a value");
                        if (parse_size(argv[++i], &max) < 0 || max == 0)
                                return usage_error("cp", "--max-size '%s': expected a size such as 512M", argv[i]);
                } else if (!strcmp(argv[i], "--")) {
                        i++;
                        break;
                } else {
                        return nsbox_cli_unknown_option("cp", argv[i]);
                }
        }
        if (argc - i != 2)
                return usage_error("cp", "expected SRC DST");
        const char *src = argv[i], *dst = argv[i + 1];
        _cleanup_free_ char *sid = NULL, *did = NULL;
        const char *spath = NULL, *dpath = NULL;
        bool sremote = split_remote(src, &sid, &spath), dremote = split_remote(dst, &did, &dpath);
        if (sremote == dremote)
                return usage_error("cp", "exactly one of SRC and DST must be ID:PATH");
        if ((sremote && !*spath) || (dremote && !*dpath))
                return usage_error("cp", "ID:PATH needs a PATH");
        nsbox_client cl = { .fd = -1 };
        int r = sremote ? cp_out(&cl, sid, spath, dst, recursive, max) : cp_in(&cl, src, did, dpath, recursive, max);
        nsbox_client_close(&cl);
        return r;
}
