/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The supervisor <-> agent protocol (nsbox-protocol(7)): a stream of frames, each an 8-byte
 * header (JSON length, payload length; 32-bit little-endian), a JSON object, and an optional
 * binary payload (file contents, output chunks) so bytes never pay for base64 on this link.
 * Both sides enforce the same maximum sizes; an oversized frame is skipped whole and answered
 * with a "too_large" error, so one bad frame never desynchronises the stream.
 *
 * Also here: the byte queue both the agent and nsboxd write through, non-blocking, with a
 * high-water mark at which they stop reading what would make it grow. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "json.h"

#define NSBOX_FRAME_HEADER 8u
#define NSBOX_FRAME_MAX_JSON (32u << 20)    /* base64 of a 16 MiB file fits, with room */
#define NSBOX_FRAME_MAX_PAYLOAD (16u << 20) /* = TOOL_MAX_CONTENT */
#define NSBOX_FRAME_MAX_FDS 32u /* descriptors received ahead of their frames; more are closed */

/* A byte queue: data[start, start+len) is pending.  Appends never fail for lack of a limit:
 * callers bound it by not producing (not reading requests or output) above their high-water
 * mark, which keeps memory below mark + one frame. */
typedef struct nsbox_queue {
        char *data;
        size_t start, len, alloc;
} nsbox_queue;

int nsbox_queue_append(nsbox_queue *q, const void *p, size_t n);
/* Write as much as fd takes without blocking: 1 when the queue is empty afterwards, 0 when data
 * is left (EAGAIN), -errno on a write error (EPIPE when the peer is gone). */
int nsbox_queue_flush(nsbox_queue *q, int fd);
void nsbox_queue_release(nsbox_queue *q);

/* Append one frame: json (serialized compact) and payload (may be NULL/0).  -E2BIG past the
 * maximum sizes, -ENOMEM. */
int nsbox_frame_append(nsbox_queue *q, const json_t *json, const void *payload, size_t payload_len);

/* epoll registration for the agent's and nsboxd's loops: key is the caller's (data.u64), *cur
 * the events epoll has now, so that a set to the same events costs no system call. */
int nsbox_epoll_add(int epfd, int fd, uint64_t key, uint32_t *cur, uint32_t events);
void nsbox_epoll_set(int epfd, int fd, uint64_t key, uint32_t *cur, uint32_t events);

/* recvmsg(2) of up to n bytes into buf, the descriptors passed with them (SCM_RIGHTS, opened
 * O_CLOEXEC) appended to fds[*n_fds] while there is room for max, the rest closed.  *ret_got:
 * how many came; *ret_lost: some were closed for lack of room, or the control message was cut
 * (MSG_CTRUNC).  Returns what recvmsg returns (-1 with errno on error). */
ssize_t nsbox_recv_fds(int fd, void *buf, size_t n, int *fds, unsigned *n_fds, unsigned max, unsigned *ret_got, bool *ret_lost);

/* Incremental frame reader for a non-blocking stream fd: what is there is read whole, in one
 * read where the frame fits (a small frame: with what follows it), into a buffer that frames
 * are taken from one at a time.  The buffer exists only while it holds bytes; it grows to one
 * frame at most (NSBOX_FRAME_HEADER + the maximum sizes). */
typedef struct nsbox_frame_reader {
        char *buf;         /* buf[start, start + len): read, not yet taken */
        size_t start, len, alloc;
        uint64_t skip;     /* bytes of an oversized frame still to discard */
        bool oversized;    /* the frame being skipped was too large: report it once skipped */
        bool drained;      /* the last read was short and brought no descriptor: fd was empty */
        bool take_fds;     /* read with recvmsg: descriptors passed (SCM_RIGHTS) are queued in fds */
        bool exact;        /* read no byte past the frame: a reader that lives for one frame */
        int fds[NSBOX_FRAME_MAX_FDS];
        unsigned n_fds;
} nsbox_frame_reader;

/* Does the buffer hold a frame (or the end of an oversized one) that nsbox_frame_read returns
 * without reading?  The socket may be empty then: a loop that stops taking frames before
 * nsbox_frame_read returns 0 must come back without waiting for fd to be readable. */
bool nsbox_frame_reader_ready(const nsbox_frame_reader *r);

/* The oldest descriptor received and not yet taken, or -1.  A request frame with "fd": true
 * takes one: the sender attaches it to the sendmsg that starts that frame, so it has always
 * arrived once the frame is complete. */
int nsbox_frame_reader_take_fd(nsbox_frame_reader *r);

typedef struct nsbox_frame {
        json_t *json;          /* parsed object (owned), or NULL when the text was not a JSON object */
        char json_error[160];  /* why json is NULL */
        char *payload;         /* owned; NULL when payload_len is 0 */
        size_t payload_len;
} nsbox_frame;

/* Read from fd until one frame is complete.  1: *ret filled (release with nsbox_frame_release);
 * 0: need more data: call again once fd is readable (a read that was short is taken to have
 * emptied fd: the call after it returns 0 without trying another read); -E2BIG: an oversized frame was skipped whole; -EPIPE: end of
 * stream (mid-frame or not); other -errno: read error. */
int nsbox_frame_read(nsbox_frame_reader *r, int fd, nsbox_frame *ret);
void nsbox_frame_release(nsbox_frame *f);
void nsbox_frame_reader_release(nsbox_frame_reader *r);

/* Blocking helpers for simple clients (tests, the benchmark, libnsbox users with their own fd):
 * write one frame / read one frame, over a blocking fd. */
int nsbox_frame_send(int fd, const json_t *json, const void *payload, size_t payload_len);
int nsbox_frame_recv(int fd, nsbox_frame *ret);
