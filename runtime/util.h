/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by every part of nsbox: cleanup attributes, ownership hand-off, a
 * growable buffer, bounded parsers for sizes and durations, and full reads and writes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "error.h"

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(cleanup_freep)
#define _cleanup_close_ _cleanup_(cleanup_closep)
#define _cleanup_strv_ _cleanup_(cleanup_strvp)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void cleanup_freep(void *p) { free(*(void **)p); }
static inline void cleanup_closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
void strv_free(char **v);
static inline void cleanup_strvp(char ***v) { strv_free(*v); }

/* Hand ownership over: returns the value and resets the variable so cleanup does nothing. */
#define steal_pointer(pp) ({ __typeof__(*(pp)) _p = *(pp); *(pp) = NULL; _p; })
#define steal_fd(fdp) ({ int _fd = *(fdp); *(fdp) = -1; _fd; })

/* Growable buffer.  Invariant: buf is NUL-terminated at len whenever it is non-NULL, and len is
 * never larger than the limit given to sb_init (0 = unlimited); appends past it fail with -E2BIG. */
typedef struct strbuf {
        char *buf;
        size_t len, alloc, limit;
} strbuf;
void sb_init(strbuf *sb, size_t limit);
void sb_release(strbuf *sb);
int sb_append(strbuf *sb, const void *data, size_t n);
int sb_appendf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void cleanup_sbp(strbuf *sb) { sb_release(sb); }
#define _cleanup_sb_ _cleanup_(cleanup_sbp)

/* s as a terminal may show it: C0 controls, DEL, C1 controls (U+0080-U+009F) and bytes that are
 * not UTF-8 become \n, \t, \r, \xHH or \u00HH, and a backslash \\; printable text, other
 * characters included, is kept.  Allocated; NULL when out of memory (strings from clients, nsboxd's
 * messages). */
char *nsbox_escape_controls(const char *s);

/* "64M", "1G", "4096", "512k": binary units.  Returns 0 or -EINVAL/-ERANGE. */
int parse_size(const char *s, uint64_t *ret);
/* "30", "1.5", "250ms", "2m", "1h": returns milliseconds. */
int parse_duration_ms(const char *s, uint64_t *ret);
/* A whole decimal number within [min, max]. */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

ssize_t read_full(int fd, void *buf, size_t n);   /* loops over EINTR and short reads */
int write_full(int fd, const void *buf, size_t n); /* 0 or -errno */
/* Read a whole small file the host acts on (a policy, nsboxd's configuration or state, a root
 * filesystem's /etc/passwd) into a NUL-terminated buffer, strictly: opened without blocking, a
 * regular file only (a FIFO, a directory or /dev/zero is refused at once, never waited on), at
 * most max bytes.  flags are added to open(2)'s (O_NOFOLLOW for a path inside a sandbox).  On
 * failure -errno (-EINVAL: not a regular file; -EFBIG: larger than max) and, with err, one line
 * starting with shown (the path when NULL): "SHOWN: a FIFO, not a regular file". */
int read_file_strict(int dirfd, const char *path, int flags, size_t max, const char *shown, char **ret, size_t *ret_len,
                     nsbox_error *err);
/* The same without a message. */
int read_file_at(int dirfd, const char *path, int flags, size_t max, char **ret, size_t *ret_len);
int write_file_at(int dirfd, const char *path, const char *data, mode_t mode);

size_t strv_length(char *const *v);
int strv_push(char ***v, char *s); /* takes ownership of s */
uint64_t now_ns(void); /* CLOCK_MONOTONIC */
/* An epoll timeout (ms, -1: none) that also wakes at when (ns of now_ns; 0: no such deadline),
 * rounded up so that the deadline has passed on waking. */
int timeout_until(int timeout, uint64_t when, uint64_t now);
/* A daemon's signals: SIGPIPE ignored; SIGTERM, SIGINT and SIGHUP blocked, to be read from a
 * signalfd made of *ret (the three of them). */
void nsbox_block_stop_signals(sigset_t *ret);
/* Close every fd from 3 up except those of keep (ascending; -1 entries ignored), after fork. */
void nsbox_close_all_but(const int *keep, size_t n);
/* Close both ends of a pipe or socketpair that are open (>= 0) and mark them -1. */
void nsbox_close_pair(int fds[2]);
/* Take one of count numbered slots under dir (made 0700 under /run/nsbox if missing): the flock
 * of dir/N, held by *ret_fd until it is closed (or its holder dies).  Starts anywhere, so that
 * a slot just freed is the last to be taken again.  what names the pool in messages. */
int nsbox_slot_take(const char *dir, unsigned count, const char *what, unsigned *ret, int *ret_fd, nsbox_error *err);
/* Root of the initial user namespace (a full identity map): the host's root, whose places are
 * /run/nsbox, /var/lib/nsbox and /etc/nsbox and who may map ranges of host ids.  uid 0 inside a
 * user namespace (unshare -r, a rootless or CI container) is a user: its own home and runtime
 * directory, one id to map. */
bool nsbox_host_root(void);
/* Our uid as the parent user namespace sees it (geteuid() in the initial one). */
unsigned long nsbox_outside_uid(void);
