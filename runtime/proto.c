/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "proto.h"

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

int nsbox_queue_append(nsbox_queue *q, const void *p, size_t n)
{
        if (n == 0)
                return 0;
        if (q->start > 0 && q->start + q->len + n > q->alloc) { /* reclaim what was written */
                memmove(q->data, q->data + q->start, q->len);
                q->start = 0;
        }
        if (q->start + q->len + n > q->alloc) {
                size_t want = q->alloc ? q->alloc : 65536;
                while (want < q->len + n)
                        want *= 2;
                char *nd = realloc(q->data, want);
                if (!nd)
                        return -ENOMEM;
                q->data = nd;
                q->alloc = want;
        }
        memcpy(q->data + q->start + q->len, p, n);
        q->len += n;
        return 0;
}

int nsbox_queue_flush(nsbox_queue *q, int fd)
{
        while (q->len > 0) {
                ssize_t n = write(fd, q->data + q->start, q->len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : -errno;
                }
                q->start += (size_t)n;
                q->len -= (size_t)n;
        }
        q->start = 0;
        /* an idle queue does not keep a multi-megabyte buffer from one large result */
        if (q->alloc > (1u << 20)) {
                free(q->data);
                q->data = NULL;
                q->alloc = 0;
        }
        return 1;
}

void nsbox_queue_release(nsbox_queue *q)
{
        free(q->data);
        *q = (nsbox_queue){ 0 };
}

static void put_le32(unsigned char *p, uint32_t v)
{
        p[0] = v & 0xff;
        p[1] = (v >> 8) & 0xff;
        p[2] = (v >> 16) & 0xff;
        p[3] = (v >> 24) & 0xff;
}

static uint32_t get_le32(const unsigned char *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static char *dump_json(const json_t *json, size_t *ret_len)
{
        return nsbox_json_dumps((json_t *)json, ret_len);
}

int nsbox_frame_append(nsbox_queue *q, const json_t *json, const void *payload, size_t payload_len)
{
        size_t json_len = 0;
        _cleanup_free_ char *text = dump_json(json, &json_len);
        if (!text)
                return -ENOMEM;
        if (json_len > NSBOX_FRAME_MAX_JSON || payload_len > NSBOX_FRAME_MAX_PAYLOAD)
                return -E2BIG;
        unsigned char h[NSBOX_FRAME_HEADER];
        put_le32(h, (uint32_t)json_len);
        put_le32(h + 4, (uint32_t)payload_len);
        int r;
        if ((r = nsbox_queue_append(q, h, sizeof(h))) < 0 || (r = nsbox_queue_append(q, text, json_len)) < 0 ||
            (r = nsbox_queue_append(q, payload, payload_len)) < 0)
                return r;
        return 0;
}

void nsbox_frame_release(nsbox_frame *f)
{
        json_decref(f->json);
        free(f->payload);
        f->json = NULL;
        f->payload = NULL;
        f->payload_len = 0;
}

void nsbox_frame_reader_release(nsbox_frame_reader *r)
{
        for (unsigned i = 0; i < r->n_fds; i++)
                close(r->fds[i]);
        free(r->body);
        *r = (nsbox_frame_reader){ 0 };
}

int nsbox_frame_reader_take_fd(nsbox_frame_reader *r)
{
        if (!r->n_fds)
                return -1;
        int fd = r->fds[0];
        memmove(r->fds, r->fds + 1, --r->n_fds * sizeof(int));
        return fd;
}

/* recvmsg: the descriptors that come with the bytes are queued (past the queue's room: closed) */
static ssize_t recv_fds(nsbox_frame_reader *r, int fd, void *buf, size_t n)
{
        union {
                char b[CMSG_SPACE(8 * sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = buf, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
        ssize_t k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (k < 0)
                return k;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < nfd; i++) {
                        int got;
                        memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (r->n_fds < NSBOX_FRAME_MAX_FDS)
                                r->fds[r->n_fds++] = got;
                        else
                                close(got);
                }
        }
        return k;
}

static ssize_t read_some(nsbox_frame_reader *r, int fd, void *buf, size_t n)
{
        for (;;) {
                ssize_t k = r->take_fds ? recv_fds(r, fd, buf, n) : read(fd, buf, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (k == 0)
                        return -EPIPE;
                return k;
        }
}

/* Read and drop up to 64 KiB of an oversized frame.  Its own frame, not inlined: with
 * -fstack-clash-protection a 64 KiB array is probed page by page on every entry to the function
 * that holds it, which left 64 KiB of dirty stack in every sandbox's agent (docs/benchmarks.md). */
static __attribute__((noinline)) ssize_t skip_some(nsbox_frame_reader *r, int fd)
{
        char sink[65536];
        return read_some(r, fd, sink, r->skip < sizeof(sink) ? (size_t)r->skip : sizeof(sink));
}

/* Hand the complete body over as a frame; the reader is ready for the next header. */
static void take_frame(nsbox_frame_reader *r, nsbox_frame *ret)
{
        *ret = (nsbox_frame){ 0 };
        json_error_t je;
        r->body[r->json_len] = '\0';
        json_t *j = nsbox_json_loadb(r->body, r->json_len, &je);
        if (j && !json_is_object(j)) {
                json_decref(j);
                j = NULL;
                snprintf(ret->json_error, sizeof(ret->json_error), "a frame must carry a JSON object");
        } else if (!j) {
                snprintf(ret->json_error, sizeof(ret->json_error), "malformed JSON: %.120s", je.text);
        }
        ret->json = j;
        if (r->payload_len) {
                /* the payload is moved to its own buffer so the caller can keep it */
                ret->payload = malloc(r->payload_len);
                if (ret->payload) {
                        memcpy(ret->payload, r->body + r->json_len + 1, r->payload_len);
                        ret->payload_len = r->payload_len;
                }
        }
        free(r->body);
        r->body = NULL;
        r->header_got = r->body_got = r->json_len = r->payload_len = 0;
}

int nsbox_frame_read(nsbox_frame_reader *r, int fd, nsbox_frame *ret)
{
        for (;;) {
                if (r->skip > 0) {
                        ssize_t k = skip_some(r, fd);
                        if (k <= 0)
                                return (int)k;
                        r->skip -= (uint64_t)k;
                        if (r->skip == 0 && r->oversized) {
                                r->oversized = false;
                                r->header_got = 0;
                                return -E2BIG;
                        }
                        continue;
                }
                if (r->header_got < NSBOX_FRAME_HEADER) {
                        ssize_t k = read_some(r, fd, r->header + r->header_got, NSBOX_FRAME_HEADER - r->header_got);
                        if (k <= 0)
                                return (int)k;
                        r->header_got += (size_t)k;
                        if (r->header_got < NSBOX_FRAME_HEADER)
                                continue;
                        uint32_t jl = get_le32(r->header), pl = get_le32(r->header + 4);
                        if (jl > NSBOX_FRAME_MAX_JSON || pl > NSBOX_FRAME_MAX_PAYLOAD) {
                                r->skip = (uint64_t)jl + pl;
                                r->oversized = true;
                                if (r->skip == 0) /* cannot happen: kept for clarity */
                                        return -E2BIG;
                                continue;
                        }
                        r->json_len = jl;
                        r->payload_len = pl;
                        r->body_got = 0;
                        r->body = malloc(r->json_len + 1 + r->payload_len);
                        if (!r->body)
                                return -ENOMEM;
                }
                size_t total = r->json_len + r->payload_len;
                while (r->body_got < total) {
                        /* the NUL slot after the JSON is skipped over */
                        size_t at = r->body_got < r->json_len ? r->body_got : r->body_got + 1;
                        size_t want = r->body_got < r->json_len ? r->json_len - r->body_got : total - r->body_got;
                        ssize_t k = read_some(r, fd, r->body + at, want);
                        if (k <= 0)
                                return (int)k;
                        r->body_got += (size_t)k;
                }
                take_frame(r, ret);
                return 1;
        }
}

int nsbox_frame_send(int fd, const json_t *json, const void *payload, size_t payload_len)
{
        nsbox_queue q = { 0 };
        int r = nsbox_frame_append(&q, json, payload, payload_len);
        if (r == 0)
                r = write_full(fd, q.data + q.start, q.len);
        nsbox_queue_release(&q);
        return r;
}

int nsbox_frame_recv(int fd, nsbox_frame *ret)
{
        nsbox_frame_reader r = { 0 };
        for (;;) {
                int k = nsbox_frame_read(&r, fd, ret);
                if (k == 0) { /* a non-blocking fd given to the blocking helper */
                        struct pollfd p = { .fd = fd, .events = POLLIN };
                        poll(&p, 1, -1);
                        continue;
                }
                nsbox_frame_reader_release(&r);
                return k < 0 ? k : 0;
        }
}

/* ---- event loops -------------------------------------------------------------------------- */

int nsbox_epoll_add(int epfd, int fd, uint64_t key, uint32_t *cur, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.u64 = key };
        if (cur)
                *cur = events;
        return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

void nsbox_epoll_set(int epfd, int fd, uint64_t key, uint32_t *cur, uint32_t events)
{
        if (fd < 0 || *cur == events)
                return;
        struct epoll_event ev = { .events = events, .data.u64 = key };
        epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
        *cur = events;
}
