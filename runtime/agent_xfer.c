/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's transfers (serve.h): write_file and read_file with a pipe passed along with the
 * request ("fd": true).  The bytes move between the pipe and the file with splice(2), never
 * through the agent's memory, a round at a time from the event loop: a pipe that is empty (a
 * writer) or full (a reader that stops reading) only waits.  A transfer idle XFER_IDLE_NS is
 * cancelled; a write lands only complete (exactly 'size' bytes, then end of file). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve.h"

#define XFER_MAX 16                              /* transfers at once in one sandbox */
#define XFER_IDLE_NS (60ull * 1000000000)        /* no progress this long: cancelled with timeout */
#define XFER_CHUNK (1u << 20)                    /* one splice */
#define XFER_ROUND (16u << 20)                   /* bytes moved per wake-up, so that others are served */

struct xfer {
        struct xfer *next;
        json_int_t call_id;
        uint64_t serial;
        bool write;           /* write_file: pipe -> file; else read_file: file -> pipe */
        int pipe;
        uint32_t events;
        tool_fd_write w;      /* write_file's temporary file */
        int file;             /* read_file's file */
        char *abs;
        uint64_t off, done, total, size;
        uint64_t last_ns;     /* the last progress */
};

static unsigned n_xfers(agent *a)
{
        unsigned n = 0;
        for (struct xfer *x = a->xfers; x; x = x->next)
                n++;
        return n;
}

static void xfer_free(agent *a, struct xfer *x)
{
        for (struct xfer **pp = &a->xfers; *pp; pp = &(*pp)->next)
                if (*pp == x) {
                        *pp = x->next;
                        break;
                }
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, x->pipe, NULL);
        close(x->pipe);
        if (x->write)
                tool_write_fd_abort(&x->w); /* after a commit: nothing left to remove */
        else
                close(x->file);
        free(x->abs);
        free(x);
}

static void xfer_fail(agent *a, struct xfer *x, tool_code code, const char *msg)
{
        tool_error e = { 0 };
        tool_fail(&e, code, "%s: %s", x->write ? "write_file" : "read_file", msg);
        send_tool_error(a, x->call_id, &e);
        xfer_free(a, x);
}

static void xfer_fail_errno(agent *a, struct xfer *x, int err)
{
        tool_error e = { 0 };
        tool_fail_errno(&e, err, "%s: '%s'", x->write ? "write_file" : "read_file", x->abs);
        send_tool_error(a, x->call_id, &e);
        xfer_free(a, x);
}

/* A pseudo file (tool_size_unknown; some refuse splice) read whole into a memfd, TOOL_MAX_CONTENT
 * bytes at most: what the transfer sends, and its size.  An empty one stays as it is. */
static int pseudo_snapshot(int *fd, const char *abs, uint64_t *ret_size, tool_error *e)
{
        _cleanup_free_ char *buf = malloc(XFER_CHUNK);
        _cleanup_close_ int mfd = -1;
        uint64_t size = 0;
        for (;;) {
                ssize_t k = read(*fd, buf, XFER_CHUNK);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return tool_fail_errno(e, errno, "read_file: read '%s'", abs);
                if (k == 0)
                        break;
                if (size + (uint64_t)k > TOOL_MAX_CONTENT)
                        return tool_fail(e, TOOL_TOO_LARGE, "read_file: '%s' says its size is 0 and has more than %u bytes", abs,
                                         TOOL_MAX_CONTENT);
                if (mfd < 0 && (mfd = memfd_create("nsbox-read", MFD_CLOEXEC)) < 0)
                        return tool_fail_errno(e, errno, "read_file: memfd_create");
                int w = write_full(mfd, buf, (size_t)k);
                if (w < 0)
                        return tool_fail_errno(e, -w, "read_file: '%s' into a memfd", abs);
                size += (uint64_t)k;
        }
        if (mfd >= 0) {
                close(*fd);
                *fd = steal_fd(&mfd);
        }
        *ret_size = size;
        return 0;
}

/* read_file's file opened for a transfer: the range [*ret_offset, + *ret_len) of a file of
 * *ret_size bytes ('byte_offset', 'byte_limit'; no size limit); *ret_abs the path as asked. */
static int read_begin(const tool_ctx *ctx, const tool_in *in, int *ret_fd, uint64_t *ret_offset, uint64_t *ret_len, uint64_t *ret_size,
                      char **ret_abs, tool_error *e)
{
        static const char tool[] = "read_file";
        _cleanup_free_ char *abs = NULL;
        const char *encoding = "raw";
        uint64_t off = 0, limit = UINT64_MAX;
        if (tool_param_path(ctx, in, tool, "path", NULL, &abs, e) < 0 || tool_param_string(in, tool, "encoding", false, &encoding, e) < 0 ||
            tool_param_uint(in, tool, "byte_offset", INT64_MAX, &off, e) < 0 ||
            tool_param_uint(in, tool, "byte_limit", UINT64_MAX, &limit, e) < 0)
                return -1;
        if (strcmp(encoding, "raw"))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: with a descriptor, 'encoding' is \"raw\" (or absent)", tool);
        _cleanup_close_ int fd = -1;
        struct stat st;
        if (tool_open_regular(ctx, tool, abs, &fd, &st, e) < 0)
                return -1;
        uint64_t size = (uint64_t)st.st_size;
        if (tool_size_unknown(fd, &st) && pseudo_snapshot(&fd, abs, &size, e) < 0)
                return -1;
        uint64_t rest = size > off ? size - off : 0;
        *ret_offset = off;
        *ret_len = limit < rest ? limit : rest;
        *ret_size = size;
        *ret_abs = steal_pointer(&abs);
        *ret_fd = steal_fd(&fd);
        return 0;
}

void handle_xfer(agent *a, const request *rq, int pipefd)
{
        tool_error e = { 0 };
        if (n_xfers(a) >= XFER_MAX) {
                close(pipefd);
                tool_fail(&e, TOOL_CONFLICT, "%s: %d transfers are running in this sandbox already", rq->tool, XFER_MAX);
                send_tool_error(a, rq->id, &e);
                return;
        }
        struct xfer *x = calloc(1, sizeof(*x));
        if (!x) {
                close(pipefd);
                tool_fail(&e, TOOL_INTERNAL, "%s: out of memory", rq->tool);
                send_tool_error(a, rq->id, &e);
                return;
        }
        *x = (struct xfer){ .call_id = rq->id, .serial = ++a->next_serial, .write = !strcmp(rq->tool, "write_file"), .pipe = pipefd,
                            .file = -1, .last_ns = now_ns() };
        int r = x->write ? tool_write_fd_begin(&a->tctx, &rq->in, &x->w, &e)
                         : read_begin(&a->tctx, &rq->in, &x->file, &x->off, &x->total, &x->size, &x->abs, &e);
        if (r == 0 && x->write) {
                x->total = x->w.size;
                x->abs = strdup(x->w.abs);
        }
        if (r < 0 || !x->abs) {
                if (r == 0)
                        tool_fail(&e, TOOL_INTERNAL, "%s: out of memory", rq->tool);
                if (x->write && r == 0)
                        tool_write_fd_abort(&x->w);
                if (x->file >= 0)
                        close(x->file);
                close(pipefd);
                free(x);
                send_tool_error(a, rq->id, &e);
                return;
        }
        fcntl(pipefd, F_SETPIPE_SZ, XFER_CHUNK); /* where allowed: fewer rounds */
        x->next = a->xfers;
        a->xfers = x;
        if (nsbox_epoll_add(a->epfd, pipefd, WATCH(x->serial, WATCH_INOTIFY), &x->events, x->write ? EPOLLIN : EPOLLOUT) < 0)
                xfer_fail_errno(a, x, errno);
        else
                xfer_ready(a, x->serial, 0); /* a small file may go at once */
}

/* write_file: what the pipe has into the file.  0: wait, 1: freed. */
static int write_round(agent *a, struct xfer *x)
{
        for (uint64_t moved = 0; moved < XFER_ROUND;) {
                uint64_t left = x->total - x->done;
                /* past size, one byte more is asked for: end of file, or too many bytes */
                size_t want = left == 0 ? 1 : left < XFER_CHUNK ? (size_t)left : XFER_CHUNK;
                ssize_t k = splice(x->pipe, NULL, x->w.fd, NULL, want, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN)
                        return 0;
                if (k < 0) {
                        xfer_fail_errno(a, x, errno);
                        return 1;
                }
                x->last_ns = now_ns();
                if (k == 0 && left) {
                        char msg[128];
                        snprintf(msg, sizeof(msg), "the pipe ended after %llu of %llu bytes: nothing written", (unsigned long long)x->done,
                                 (unsigned long long)x->total);
                        xfer_fail(a, x, TOOL_INVALID_ARGUMENT, msg);
                        return 1;
                }
                if (k > 0 && !left) {
                        xfer_fail(a, x, TOOL_INVALID_ARGUMENT, "more bytes came than 'size': nothing written");
                        return 1;
                }
                if (k == 0) {
                        tool_error e = { 0 };
                        json_t *res = NULL;
                        if (tool_write_fd_commit(&x->w, &res, &e) < 0)
                                send_tool_error(a, x->call_id, &e);
                        else
                                send_result(a, x->call_id, res, NULL, 0);
                        xfer_free(a, x);
                        return 1;
                }
                x->done += (uint64_t)k;
                moved += (uint64_t)k;
        }
        return 0;
}

/* read_file: the file into the pipe.  0: wait, 1: freed. */
static int read_round(agent *a, struct xfer *x)
{
        bool ended = false;
        for (uint64_t moved = 0; moved < XFER_ROUND && x->done < x->total && !ended;) {
                uint64_t left = x->total - x->done;
                loff_t at = (loff_t)(x->off + x->done);
                ssize_t k = splice(x->file, &at, x->pipe, NULL, left < XFER_CHUNK ? (size_t)left : XFER_CHUNK, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN)
                        return 0;
                if (k < 0) {
                        xfer_fail_errno(a, x, errno);
                        return 1;
                }
                x->last_ns = now_ns();
                ended = k == 0; /* the file shrank: what there was */
                x->done += (uint64_t)k;
                moved += (uint64_t)k;
        }
        if (x->done < x->total && !ended)
                return 0;
        json_t *res = json_pack("{s:s, s:I, s:I, s:I, s:b}", "path", x->abs, "size", (json_int_t)x->size, "byte_offset", (json_int_t)x->off,
                                "bytes", (json_int_t)x->done, "eof", x->off + x->done >= x->size);
        send_result(a, x->call_id, res, NULL, 0);
        xfer_free(a, x); /* closing the pipe: its reader sees the end */
        return 1;
}

void xfer_ready(agent *a, uint64_t serial, uint32_t events)
{
        (void)events;
        for (struct xfer *x = a->xfers; x; x = x->next)
                if (x->serial == serial) {
                        if (x->write)
                                write_round(a, x);
                        else
                                read_round(a, x);
                        return;
                }
}

bool xfer_cancel(agent *a, json_int_t id)
{
        for (struct xfer *x = a->xfers; x; x = x->next)
                if (x->call_id == id) {
                        xfer_fail(a, x, TOOL_CONFLICT, "cancelled");
                        return true;
                }
        return false;
}

/* While the outgoing queue is high the transfers wait too: their answers would add to it. */
void xfer_update_interest(agent *a, bool high)
{
        for (struct xfer *x = a->xfers; x; x = x->next)
                nsbox_epoll_set(a->epfd, x->pipe, WATCH(x->serial, WATCH_INOTIFY), &x->events, high ? 0 : x->write ? EPOLLIN : EPOLLOUT);
}

uint64_t xfer_deadlines(agent *a, uint64_t now)
{
        uint64_t next = 0;
        for (struct xfer *x = a->xfers, *nx; x; x = nx) {
                nx = x->next;
                uint64_t at = x->last_ns + XFER_IDLE_NS;
                if (now >= at) {
                        xfer_fail(a, x, TOOL_TIMEOUT, "no progress for 60 s: cancelled");
                        continue;
                }
                if (!next || at < next)
                        next = at;
        }
        return next;
}
