/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sync.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

int nsbox_sync_send(int fd, nsbox_sync_type type, int value, const char *text)
{
        nsbox_sync_msg m = { .type = type, .value = value };
        if (text) {
                strncpy(m.text, text, sizeof(m.text) - 1);
        }
        ssize_t n;
        do
                n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return n == (ssize_t)sizeof(m) ? 0 : -EIO;
}

int nsbox_sync_recv(int fd, nsbox_sync_msg *ret)
{
        ssize_t n;
        do
                n = recv(fd, ret, sizeof(*ret), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n == 0)
                return 0;
        if (n != (ssize_t)sizeof(*ret) || ret->type == 0 || ret->type >= _SYNC_MAX)
                return -EBADMSG;
        ret->text[sizeof(ret->text) - 1] = '\0';
        return 1;
}

void nsbox_sync_send_error(int fd, const nsbox_error *err, const char *fallback)
{
        int status = err && err->exit_status ? err->exit_status : 125;
        nsbox_sync_send(fd, SYNC_ERROR, status, err && err->msg ? err->msg : fallback);
}
