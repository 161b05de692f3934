/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The launcher <-> sandbox init channel: a SOCK_SEQPACKET socketpair carrying fixed-size
 * messages, so that a failure inside the clone()d child reaches the user as a precise message
 * (crun's sync_socket_write_error) and the command's wait status reaches the supervisor. */
#pragma once

#include <stdint.h>

#include "error.h"

typedef enum {
        SYNC_GO = 1,   /* parent -> child: id maps written, carry on */
        SYNC_ERROR,    /* child -> parent: setup or exec failed; value = exit status, text = message */
        SYNC_EXIT,     /* child -> parent: the command ended; value = its wait status */
        _SYNC_MAX,
} nsbox_sync_type;

typedef struct nsbox_sync_msg {
        uint32_t type;
        int32_t value;
        char text[1024];
} nsbox_sync_msg;

int nsbox_sync_send(int fd, nsbox_sync_type type, int value, const char *text);
/* 1 on a message, 0 on EOF, -errno on error; a message of the wrong size is -EBADMSG. */
int nsbox_sync_recv(int fd, nsbox_sync_msg *ret);
/* Report err (or a generic message) to the parent; used by the child before _exit(). */
void nsbox_sync_send_error(int fd, const nsbox_error *err, const char *fallback);
