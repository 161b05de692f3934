/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sync.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int nsbox_sync_send(int fd, nsbox_sync_type type, int value, const void *payload, size_t len)
{
        if (len > NSBOX_SYNC_MAX_PAYLOAD)
                return -EMSGSIZE;
        nsbox_sync_msg hdr = { .type = type, .value = value, .len = (uint32_t)len };
        struct iovec iov[2] = { { .iov_base = &hdr, .iov_len = offsetof(nsbox_sync_msg, payload) },
                                { .iov_base = (void *)payload, .iov_len = len } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
        ssize_t n;
        do
                n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t)n == iov[0].iov_len + len ? 0 : -EIO;
}

int nsbox_sync_send_text(int fd, nsbox_sync_type type, int value, const char *text)
{
        size_t len = text ? strnlen(text, 4096) : 0;
        return nsbox_sync_send(fd, type, value, text, len);
}

int nsbox_sync_recv_fd(int fd, nsbox_sync_msg *ret, int *ret_fd)
{
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } ctl;
        struct iovec iov = { .iov_base = ret, .iov_len = offsetof(nsbox_sync_msg, payload) + NSBOX_SYNC_MAX_PAYLOAD };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
        ssize_t n;
        bool reset = false;
        for (;;) {
                n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
                if (n >= 0)
                        break;
                if (errno == EINTR)
                        continue;
                /* A peer that exited with our message unread (a child that failed before taking
                 * the seccomp filter) resets the socket, and the reset comes before what it sent
                 * first (its error): the reset is reported once, then comes the queue. */
                if (errno == ECONNRESET && !reset) {
                        reset = true;
                        continue;
                }
                return -errno;
        }
        int passed = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
                        memcpy(&passed, CMSG_DATA(c), sizeof(int));
        if (n == 0)
                return 0;
        if ((size_t)n < offsetof(nsbox_sync_msg, payload) || ret->type == 0 || ret->type >= _SYNC_MAX ||
            (size_t)n != offsetof(nsbox_sync_msg, payload) + ret->len) {
                if (passed >= 0)
                        close(passed);
                return -EBADMSG;
        }
        ret->payload[ret->len] = '\0';
        if (ret_fd)
                *ret_fd = passed;
        else if (passed >= 0)
                close(passed);
        return 1;
}

int nsbox_sync_recv(int fd, nsbox_sync_msg *ret)
{
        return nsbox_sync_recv_fd(fd, ret, NULL);
}

int nsbox_sync_send_fd(int fd, nsbox_sync_type type, int passfd)
{
        nsbox_sync_msg hdr = { .type = type };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } ctl = { 0 };
        struct iovec iov = { .iov_base = &hdr, .iov_len = offsetof(nsbox_sync_msg, payload) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &passfd, sizeof(int));
        ssize_t n;
        do
                n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : 0;
}

void nsbox_sync_send_error(int fd, const nsbox_error *err, const char *fallback)
{
        int status = err && err->exit_status ? err->exit_status : 125;
        nsbox_sync_send_text(fd, SYNC_ERROR, status, err && err->msg ? err->msg : fallback);
}
