/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "error.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *vformat(const char *fmt, va_list ap)
{
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0)
                return NULL;
        return s;
}

/* Messages quote names from outside (policy keys, arguments, paths): keep them to one line and
 * free of terminal escapes. */
static void one_line(char *s)
{
        for (; s && *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        *s = '?';
}

/* Set err from fmt, with the errno text appended when with_errno; returns -errnum (-EINVAL for 0). */
static int set_error(nsbox_error *err, int errnum, bool with_errno, const char *fmt, va_list ap)
{
        if (errnum < 0)
                errnum = -errnum;
        if (err && !err->msg) {
                char *base = vformat(fmt, ap);
                if (base && with_errno && errnum > 0) {
                        char *full = NULL;
                        if (asprintf(&full, "%s: %s", base, strerror(errnum)) >= 0) {
                                free(base);
                                base = full;
                        }
                }
                one_line(base);
                err->msg = base ? base : strdup("out of memory while reporting an error");
                err->errnum = errnum;
                if (!err->exit_status)
                        err->exit_status = 125;
        }
        return errnum > 0 ? -errnum : -EINVAL;
}

int nsbox_err(nsbox_error *err, int errnum, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = set_error(err, errnum, true, fmt, ap);
        va_end(ap);
        return r;
}

int nsbox_err_as(nsbox_error *err, int errnum, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = set_error(err, errnum, false, fmt, ap);
        va_end(ap);
        return r;
}

int nsbox_err_wrap(nsbox_error *err, int ret, const char *fmt, ...)
{
        if (!err || !err->msg)
                return ret;
        va_list ap;
        va_start(ap, fmt);
        char *prefix = vformat(fmt, ap);
        va_end(ap);
        char *full = NULL;
        one_line(prefix);
        if (prefix && asprintf(&full, "%s: %s", prefix, err->msg) >= 0) {
                free(err->msg);
                err->msg = full;
        }
        free(prefix);
        return ret;
}

void nsbox_error_clear(nsbox_error *err)
{
        if (!err)
                return;
        free(err->msg);
        err->msg = NULL;
        err->errnum = 0;
        err->exit_status = 0;
}
