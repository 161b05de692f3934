/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox cp of one regular file through a pipe passed to nsboxd (write_file / read_file with
 * "fd": true): the bytes go between this process and the sandbox's agent directly, spliced,
 * with no base64 and no JSON; a thread moves them while the call waits for its answer. */
#include "cli_session.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "util.h"

#define FD_CHUNK (1u << 20)
#define ZERO_BLOCK 4096u /* cp out: a block of zeros becomes a hole */

typedef struct pump {
        int from, to;     /* file -> pipe (in), pipe -> file (out) */
        uint64_t want;    /* in: the bytes to send */
        uint64_t moved;
        bool sparse;      /* out: blocks of zeros skipped (the file is already its full size) */
        int err;          /* errno, 0 */
} pump;

static void *feed(void *arg)
{
        pump *p = arg;
        while (p->moved < p->want) {
                uint64_t left = p->want - p->moved;
                loff_t at = (loff_t)p->moved;
                ssize_t k = splice(p->from, &at, p->to, NULL, left < FD_CHUNK ? (size_t)left : FD_CHUNK, SPLICE_F_MOVE);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) { /* EPIPE: the other side gave up (its error is the answer) */
                        p->err = k < 0 ? errno : EIO;
                        break;
                }
                p->moved += (uint64_t)k;
        }
        close(p->to); /* the end of file the agent waits for */
        p->to = -1;
        return NULL;
}

static bool all_zero(const char *b, size_t n)
{
        return n == 0 || (b[0] == 0 && !memcmp(b, b + 1, n - 1));
}

/* buf's bytes at offset off of fd, its blocks of zeros left as holes (the file already has its
 * full size): each run of non-zero blocks is one pwrite, not one per block.  0 or -errno. */
static int pwrite_nonzero(int fd, const char *buf, size_t n, uint64_t off)
{
        for (size_t at = 0; at < n;) {
                size_t end = at;
                while (end < n) { /* the run of non-zero blocks from at */
                        size_t b = n - end < ZERO_BLOCK ? n - end : ZERO_BLOCK;
                        if (all_zero(buf + end, b))
                                break;
                        end += b;
                }
                while (at < end) {
                        ssize_t q = pwrite(fd, buf + at, end - at, (off_t)(off + at));
                        if (q < 0 && errno != EINTR)
                                return -errno;
                        at += q > 0 ? (size_t)q : 0;
                }
                if (at < n) /* skip the block of zeros that ended the run */
                        at += n - at < ZERO_BLOCK ? n - at : ZERO_BLOCK;
        }
        return 0;
}

static void *drain(void *arg)
{
        pump *p = arg;
        char *buf = malloc(FD_CHUNK);
        if (!buf) {
                p->err = ENOMEM;
                return NULL;
        }
        for (;;) {
                ssize_t k = read(p->from, buf, FD_CHUNK);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        p->err = k < 0 ? errno : 0;
                        break;
                }
                int r = p->sparse ? pwrite_nonzero(p->to, buf, (size_t)k, p->moved) : write_full(p->to, buf, (size_t)k);
                if (r < 0)
                        p->err = -r;
                p->moved += (uint64_t)k;
                if (p->err)
                        break;
        }
        free(buf);
        return NULL;
}

/* One call of tool with the pipe's end theirs passed; the pump runs meanwhile.  0 or an exit status. */
static int call_with_pipe(nsbox_client *cl, const char *id, const char *tool, json_t *tparams, int theirs, pump *p, void *(*fn)(void *),
                          json_t **ret)
{
        signal(SIGPIPE, SIG_IGN); /* the other side gone: EPIPE, and its error says why */
        pthread_t th;
        if (pthread_create(&th, NULL, fn, p) != 0) {
                json_decref(tparams);
                fprintf(stderr, "nsbox: cp: cannot start a thread\n");
                return EXIT_NSBOX;
        }
        json_object_set_new(tparams, "fd", json_true());
        json_t *params = json_pack("{ss ss so}", "sandbox", id, "tool", tool, "params", tparams);
        nsbox_error err = { 0 };
        const char *code = NULL;
        int st = 0;
        if (!params || nsbox_client_call_fd(cl, "call", params, theirs, ret, &code, &err) < 0) {
                _cleanup_free_ char *safe = nsbox_escape_controls(err.msg ? err.msg : "out of memory");
                if (code && strcmp(code, "internal"))
                        fprintf(stderr, "nsbox: cp: %s: %s\n", code, safe ? safe : "failed");
                else
                        fprintf(stderr, "nsbox: cp: %s\n", safe ? safe : "failed");
                st = EXIT_NSBOX;
        }
        nsbox_error_clear(&err);
        close(theirs); /* the pump sees the end (or EPIPE) once the agent has let go too */
        pthread_join(th, NULL);
        return st;
}

int nsbox_cp_in_fd(nsbox_client *cl, int fd, uint64_t size, mode_t mode, const char *id, const char *target)
{
        int pp[2];
        if (pipe2(pp, O_CLOEXEC) < 0) {
                fprintf(stderr, "nsbox: cp: pipe: %s\n", strerror(errno));
                return EXIT_NSBOX;
        }
        fcntl(pp[1], F_SETPIPE_SZ, FD_CHUNK);
        pump p = { .from = fd, .to = pp[1], .want = size };
        json_t *res = NULL;
        int st = call_with_pipe(cl, id, "write_file", json_pack("{ss sI si}", "path", target, "size", (json_int_t)size, "mode", (int)(mode & 0777)),
                                pp[0], &p, feed, &res);
        json_decref(res);
        if (p.to >= 0)
                close(p.to);
        if (st == 0 && p.err) {
                fprintf(stderr, "nsbox: cp: read the source: %s\n", strerror(p.err));
                st = EXIT_NSBOX;
        }
        return st;
}

int nsbox_cp_out_fd(nsbox_client *cl, const char *id, const char *src, uint64_t size, int fd, bool sparse, uint64_t *ret_bytes)
{
        int pp[2];
        if (pipe2(pp, O_CLOEXEC) < 0) {
                fprintf(stderr, "nsbox: cp: pipe: %s\n", strerror(errno));
                return EXIT_NSBOX;
        }
        fcntl(pp[1], F_SETPIPE_SZ, FD_CHUNK);
        pump p = { .from = pp[0], .to = fd, .sparse = sparse };
        json_t *res = NULL;
        json_t *tparams = size ? json_pack("{ss sI}", "path", src, "byte_limit", (json_int_t)size) : json_pack("{ss}", "path", src);
        int st = call_with_pipe(cl, id, "read_file", tparams, pp[1], &p, drain, &res);
        close(pp[0]);
        uint64_t bytes = (uint64_t)json_integer_value(json_object_get(res, "bytes"));
        json_decref(res);
        if (st == 0 && p.err) {
                fprintf(stderr, "nsbox: cp: write: %s\n", strerror(p.err));
                st = EXIT_NSBOX;
        } else if (st == 0 && p.moved != bytes) {
                fprintf(stderr, "nsbox: cp: %llu bytes came of %llu\n", (unsigned long long)p.moved, (unsigned long long)bytes);
                st = EXIT_NSBOX;
        }
        *ret_bytes = p.moved;
        return st;
}
