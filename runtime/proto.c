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
        free(r->buf);
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

ssize_t nsbox_recv_fds(int fd, void *buf, size_t n, int *fds, unsigned *n_fds, unsigned max, unsigned *ret_got, bool *ret_lost)
{
        union {
                char b[CMSG_SPACE(8 * sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = buf, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
        *ret_got = 0;
        *ret_lost = false;
        ssize_t k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (k < 0)
                return k;
        *ret_lost = mh.msg_flags & MSG_CTRUNC;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < nfd; i++, (*ret_got)++) {
                        int got;
                        memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (*n_fds < max) {
                                fds[(*n_fds)++] = got;
                        } else {
                                close(got);
                                *ret_lost = true;
                        }
                }
        }
        return k;
}

/* One read into the buffer's room (made for want bytes from the oldest unread: the frame being
 * read).  >0: bytes read; 0: nothing there (EAGAIN, or the last read emptied fd); -EPIPE: end of
 * stream; -ENOMEM; other -errno. */
static ssize_t fill(nsbox_frame_reader *r, int fd, size_t want)
{
        if (r->drained) { /* a short read emptied fd: epoll says when more comes */
                r->drained = false;
                return 0;
        }
        /* room for the whole frame (want > len) from its start, and for what follows a small one */
        size_t cap = want > 16384 ? want : 16384;
        if (r->start > 0 && r->start + cap > r->alloc) { /* reclaim what was taken */
                memmove(r->buf, r->buf + r->start, r->len);
                r->start = 0;
        }
        if (r->alloc < cap) {
                char *nb = realloc(r->buf, cap);
                if (!nb)
                        return -ENOMEM;
                r->buf = nb;
                r->alloc = cap;
        }
        size_t room = r->exact ? want - r->len : r->alloc - r->start - r->len;
        for (;;) {
                unsigned got = 0;
                bool lost = false;
                ssize_t k = r->take_fds ? nsbox_recv_fds(fd, r->buf + r->start + r->len, room, r->fds, &r->n_fds, NSBOX_FRAME_MAX_FDS, &got, &lost)
                                        : read(fd, r->buf + r->start + r->len, room);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (k == 0)
                        return -EPIPE;
                /* recvmsg ends at a message that brings descriptors: more may be there */
                r->drained = (size_t)k < room && !got;
                r->len += (size_t)k;
                return k;
        }
}

/* n bytes of the buffer taken; an empty buffer is freed (an idle link holds none). */
static void consume(nsbox_frame_reader *r, size_t n)
{
        r->start += n;
        r->len -= n;
        if (r->len == 0) {
                free(r->buf);
                r->buf = NULL;
                r->start = r->alloc = 0;
        }
}

/* The frame at the head of the buffer (json_len, then payload_len bytes after the header). */
static void take_frame(nsbox_frame_reader *r, size_t json_len, size_t payload_len, nsbox_frame *ret)
{
        *ret = (nsbox_frame){ 0 };
        const char *at = r->buf + r->start + NSBOX_FRAME_HEADER;
        json_error_t je;
        json_t *j = nsbox_json_loadb(at, json_len, &je);
        if (j && !json_is_object(j)) {
                json_decref(j);
                j = NULL;
                snprintf(ret->json_error, sizeof(ret->json_error), "a frame must carry a JSON object");
        } else if (!j) {
                snprintf(ret->json_error, sizeof(ret->json_error), "malformed JSON: %.120s", je.text);
        }
        ret->json = j;
        if (payload_len) {
                /* the payload is moved to its own buffer so the caller can keep it */
                ret->payload = malloc(payload_len);
                if (ret->payload) {
                        memcpy(ret->payload, at + json_len, payload_len);
                        ret->payload_len = payload_len;
                }
        }
        consume(r, NSBOX_FRAME_HEADER + json_len + payload_len);
}

/* The bytes the head of the buffer needs to be a whole frame, 0 when it is one; an oversized
 * frame's header is taken and its bytes are to be skipped. */
static size_t frame_needs(nsbox_frame_reader *r, size_t *json_len, size_t *payload_len)
{
        if (r->len < NSBOX_FRAME_HEADER)
                return NSBOX_FRAME_HEADER;
        const unsigned char *h = (const unsigned char *)r->buf + r->start;
        uint32_t jl = get_le32(h), pl = get_le32(h + 4);
        if (jl > NSBOX_FRAME_MAX_JSON || pl > NSBOX_FRAME_MAX_PAYLOAD) {
                consume(r, NSBOX_FRAME_HEADER);
                r->skip = (uint64_t)jl + pl;
                r->oversized = true;
                return 0;
        }
        *json_len = jl;
        *payload_len = pl;
        size_t total = NSBOX_FRAME_HEADER + (size_t)jl + pl;
        return r->len >= total ? 0 : total;
}

bool nsbox_frame_reader_ready(const nsbox_frame_reader *r)
{
        if (r->oversized)
                return r->len >= r->skip;
        if (r->len < NSBOX_FRAME_HEADER)
                return false;
        const unsigned char *h = (const unsigned char *)r->buf + r->start;
        uint32_t jl = get_le32(h), pl = get_le32(h + 4);
        return jl > NSBOX_FRAME_MAX_JSON || pl > NSBOX_FRAME_MAX_PAYLOAD || r->len >= NSBOX_FRAME_HEADER + (size_t)jl + pl;
}

int nsbox_frame_read(nsbox_frame_reader *r, int fd, nsbox_frame *ret)
{
        for (;;) {
                size_t want;
                if (r->oversized) {
                        size_t k = r->skip < r->len ? (size_t)r->skip : r->len;
                        if (k)
                                consume(r, k);
                        r->skip -= k;
                        if (r->skip == 0) {
                                r->oversized = false;
                                return -E2BIG;
                        }
                        want = r->skip < 65536 ? (size_t)r->skip : 65536; /* read, then dropped */
                } else {
                        size_t jl = 0, pl = 0;
                        want = frame_needs(r, &jl, &pl);
                        if (r->oversized)
                                continue;
                        if (want == 0) {
                                take_frame(r, jl, pl, ret);
                                return 1;
                        }
                }
                ssize_t k = fill(r, fd, want);
                if (k <= 0)
                        return (int)k;
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
        nsbox_frame_reader r = { .exact = true }; /* what follows the frame stays in fd */
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
