/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One error convention (crun error.h, systemd): functions that can fail return a negative
 * errno-style int and, when given one, fill an error object with a human message.  Only main()
 * turns an error into output and an exit status. */
#pragma once

#include <stdarg.h>

typedef struct nsbox_error {
        int errnum;       /* positive errno, 0 when the failure has no errno */
        int exit_status;  /* suggested exit status for a CLI (125 setup, 126, 127) */
        char *msg;        /* "what failed: errno text", lowercase, no final full stop */
} nsbox_error;

/* Set *err (if err and not already set) to fmt plus ": strerror(errnum)" when errnum > 0.
 * Returns -errnum, or -EINVAL when errnum is 0, so callers can `return nsbox_err(...)`. */
int nsbox_err(nsbox_error *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same without the errno text: for a refusal the message explains whole ("no snapshot 'x'"),
 * returning -errnum so callers can tell the cases apart. */
int nsbox_err_as(nsbox_error *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefix an already set message with context: "create sandbox: " + old message. */
int nsbox_err_wrap(nsbox_error *err, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void nsbox_error_clear(nsbox_error *err);
