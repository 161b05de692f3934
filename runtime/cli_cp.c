/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox cp: a file (read_file/write_file chunks) or, with -r, a directory (a tar stream through
 * exec, extracted on the host under the target directory only) into or out of a sandbox. */
#include "cli_session.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base64.h"
#include "client.h"
#include "util.h"

#define CP_CHUNK (4u << 20) /* bytes per call: large files are streamed, never held whole */
#define usage_error nsbox_cli_usage_error
#define call_once nsbox_cli_call

static const char usage_cp[] =
        "usage: nsbox cp SRC DST\n"
        "\n"
        "Copy one regular file into or out of a sandbox: one of SRC and DST is ID:PATH (PATH\n"
        "relative to the sandbox's workdir or absolute inside it), the other a host path (- for\n"
        "standard input or output).  Binary-safe and streamed in chunks; the destination is\n"
        "replaced only once the whole file is there.  A directory as DST receives SRC's name.\n";

/* "ID:PATH" with ID a (prefix of a) sandbox id: hex digits, at least 4. */
static bool split_remote(const char *arg, char **ret_id, const char **ret_path)
{
        const char *colon = strchr(arg, ':');
        if (!colon || colon - arg < 4 || colon - arg > 32)
                return false;
        for (const char *p = arg; p < colon; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
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

static int cp_in(nsbox_client *cl, const char *src, const char *id, const char *dst)
{
        /* O_NONBLOCK: a FIFO must not hang the copy (it is refused below; - is for pipes) */
        bool from_stdin = !strcmp(src, "-");
        _cleanup_close_ int fd = from_stdin ? dup(0) : open(src, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "nsbox: cp: '%s': %s\n", src, strerror(errno));
                return EXIT_REFUSED;
        }
        if (S_ISDIR(st.st_mode)) {
                fprintf(stderr, "nsbox: cp: '%s': is a directory (nsbox cp copies one file)\n", src);
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
static int cp_out(nsbox_client *cl, const char *id, const char *src, const char *dst)
{
        json_t *sres = NULL;
        int r = cp_call(cl, id, "stat", json_pack("{ss sb}", "path", src, "follow", 1), &sres);
        if (r)
                return r;
        const char *type = json_string_value(json_object_get(sres, "type"));
        bool regular = type && !strcmp(type, "file");
        json_int_t mode = json_integer_value(json_object_get(sres, "mode"));
        json_int_t size = json_integer_value(json_object_get(sres, "size"));
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
        uint64_t end = (uint64_t)size, off = 0;
        while (off < end) {
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

int nsbox_cmd_cp(int argc, char **argv)
{
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                fputs(usage_cp, stdout);
                return 0;
        }
        if (argc >= 2 && (!strcmp(argv[1], "-r") || !strcmp(argv[1], "-R") || !strcmp(argv[1], "--recursive")))
                return usage_error("cp", "%s: nsbox cp copies one file; for a directory: tar c DIR | nsbox exec -i ID -- tar x -C PATH",
                                   argv[1]);
        if (argc >= 2 && argv[1][0] == '-' && argv[1][1])
                return nsbox_cli_unknown_option("cp", argv[1]);
        if (argc != 3)
                return usage_error("cp", "expected SRC DST");
        _cleanup_free_ char *sid = NULL, *did = NULL;
        const char *spath = NULL, *dpath = NULL;
        bool sremote = split_remote(argv[1], &sid, &spath), dremote = split_remote(argv[2], &did, &dpath);
        if (sremote == dremote)
                return usage_error("cp", "exactly one of SRC and DST must be ID:PATH");
        if ((sremote && !*spath) || (dremote && !*dpath))
                return usage_error("cp", "ID:PATH needs a PATH");
        nsbox_client cl = { .fd = -1 };
        int r = sremote ? cp_out(&cl, sid, spath, argv[2]) : cp_in(&cl, argv[1], did, dpath);
        nsbox_client_close(&cl);
        return r;
}

