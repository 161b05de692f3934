/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sync.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

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

int nsbox_sync_recv(int fd, nsbox_sync_msg *ret)
{
        ssize_t n;
        do
                n = recv(fd, ret, offsetof(nsbox_sync_msg, payload) + NSBOX_SYNC_MAX_PAYLOAD, 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n == 0)
                return 0;
        if ((size_t)n < offsetof(nsbox_sync_msg, payload) || ret->type == 0 || ret->type >= _SYNC_MAX ||
            (size_t)n != offsetof(nsbox_sync_msg, payload) + ret->len)
                return -EBADMSG;
        ret->payload[ret->len] = '\0';
        return 1;
}

void nsbox_sync_send_error(int fd, const nsbox_error *err, const char *fallback)
{
        int status = err && err->exit_status ? err->exit_status : 125;
        nsbox_sync_send_text(fd, SYNC_ERROR, status, err && err->msg ? err->msg : fallback);
}
