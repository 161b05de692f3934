/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The launcher <-> sandbox init channel: a SOCK_SEQPACKET socketpair carrying one message per
 * packet (header + bounded payload), so that a failure inside the clone()d child reaches the user
 * as a precise message (crun's sync_socket_write_error), the seccomp program reaches the child,
 * and the command's wait status and resource usage reach the supervisor. */
#pragma once

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef enum {
        SYNC_GO = 1,  /* parent -> child: id maps written, carry on */
        SYNC_SECCOMP, /* parent -> child: payload = the compiled filter (struct sock_filter[]) */
        SYNC_ERROR,   /* child -> parent: setup or exec failed; value = exit status, payload = message */
        SYNC_EXIT,    /* child -> parent: the command ended; value = wait status, payload = nsbox_sync_usage */
        SYNC_READY,   /* child -> parent (serve mode): set up, serving the protocol socket */
        SYNC_STAGE,   /* child -> parent (serve mode): an fd of the staging tmpfs (the writable layer) */
        _SYNC_MAX,
} nsbox_sync_type;

#define NSBOX_SYNC_MAX_PAYLOAD (BPF_MAXINSNS * sizeof(struct sock_filter))

typedef struct nsbox_sync_usage {
        uint64_t user_us, sys_us, maxrss_kb;
} nsbox_sync_usage;

typedef struct nsbox_sync_msg {
        uint32_t type;
        int32_t value;
        uint32_t len; /* payload bytes */
        uint32_t reserved;
        /* one more byte than the largest payload: text payloads are NUL-terminated on receipt */
        unsigned char payload[NSBOX_SYNC_MAX_PAYLOAD + 1];
} nsbox_sync_msg;

int nsbox_sync_send(int fd, nsbox_sync_type type, int value, const void *payload, size_t len);
int nsbox_sync_send_text(int fd, nsbox_sync_type type, int value, const char *text);
/* 1 on a message, 0 on EOF, -errno on error; a malformed message is -EBADMSG. */
int nsbox_sync_recv(int fd, nsbox_sync_msg *ret);
/* The same, taking a file descriptor that came with the message (*ret_fd, -1 when none). */
int nsbox_sync_recv_fd(int fd, nsbox_sync_msg *ret, int *ret_fd);
/* A message of type with no payload, carrying passfd (SCM_RIGHTS). */
int nsbox_sync_send_fd(int fd, nsbox_sync_type type, int passfd);
/* Report err (or a generic message) to the parent; used by the child before _exit(). */
void nsbox_sync_send_error(int fd, const nsbox_error *err, const char *fallback);
