/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every tool handler shares: errors with the protocol's stable codes, typed access to the
 * request's parameters, JSON strings from bytes that need not be UTF-8, and a regular file opened
 * for reading. */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "../runtime/util.h"

/* Messages go to clients as JSON strings and are read as one line: control characters and bytes
 * that are not UTF-8 (names on disk, a cut at the end of the buffer) become '?'. */
static void sanitize_message(char *s)
{
        size_t n = strlen(s);
        for (size_t i = 0; i < n;) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x20 || c == 0x7f) {
                        s[i++] = '?';
                        continue;
                }
                size_t k = nsbox_utf8_seq((const unsigned char *)s + i, n - i);
                if (k == 0) {
                        s[i++] = '?';
                        continue;
                }
                i += k;
        }
}

static int vfail(tool_error *e, tool_code code, int errnum, const char *fmt, va_list ap)
{
        if (!e)
                return -1;
        e->code = code;
        int n = vsnprintf(e->message, sizeof(e->message), fmt, ap);
        if (n >= 0 && errnum > 0 && (size_t)n < sizeof(e->message))
                snprintf(e->message + n, sizeof(e->message) - (size_t)n, ": %s", strerror(errnum));
        sanitize_message(e->message);
        return -1;
}

int tool_fail(tool_error *e, tool_code code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vfail(e, code, 0, fmt, ap);
        va_end(ap);
        return -1;
}

static tool_code code_of_errno(int errnum)
{
        switch (errnum) {
        case ENOENT:
                return TOOL_FILE_NOT_FOUND;
        case EACCES:
        case EPERM:
        case EROFS:
                return TOOL_PERMISSION_DENIED;
        case EISDIR:
                return TOOL_IS_DIRECTORY;
        case ENOTDIR:
                return TOOL_NOT_A_DIRECTORY;
        case EXDEV:
        case ELOOP:
        case ENAMETOOLONG:
                return TOOL_INVALID_PATH;
        case EEXIST:
        case ENOTEMPTY:
        case EBUSY:
                return TOOL_CONFLICT;
        case EFBIG:
        case E2BIG:
        case ENOSPC:
        case EDQUOT:
                return TOOL_TOO_LARGE;
        case EINVAL:
                return TOOL_INVALID_ARGUMENT;
        default:
                return TOOL_INTERNAL;
        }
}

int tool_fail_errno(tool_error *e, int errnum, const char *fmt, ...)
{
        if (errnum < 0)
                errnum = -errnum;
        va_list ap;
        va_start(ap, fmt);
        vfail(e, code_of_errno(errnum), errnum, fmt, ap);
        va_end(ap);
        return -1;
}

int tool_fail_wrap(tool_error *e, const char *fmt, ...)
{
        if (!e)
                return -1;
        char prefix[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        char full[sizeof(prefix) + 2 + sizeof(e->message)];
        int n = snprintf(full, sizeof(full), "%s: %.*s", prefix, (int)sizeof(e->message) - 1, e->message);
        size_t len = n < 0 ? 0 : (size_t)n;
        if (len >= sizeof(e->message))
                len = sizeof(e->message) - 1;
        memcpy(e->message, full, len);
        e->message[len] = '\0';
        sanitize_message(e->message);
        return -1;
}

/* The parameter's value, or NULL when it is absent or null (null means "the default"). */
static json_t *param(const tool_in *in, const char *key)
{
        json_t *v = json_object_get(in->params, key);
        return json_is_null(v) ? NULL : v;
}

int tool_param_string(const tool_in *in, const char *tool, const char *key, bool required, const char **ret,
                      tool_error *e)
{
        json_t *v = param(in, key);
        if (!v) {
                if (required)
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' is required", tool, key);
                return 0;
        }
        if (!json_is_string(v))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must be a string", tool, key);
        /* A C string would silently end at an embedded NUL. */
        if (strlen(json_string_value(v)) != json_string_length(v))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must not contain NUL bytes", tool, key);
        *ret = json_string_value(v);
        return 0;
}

int tool_param_bool(const tool_in *in, const char *tool, const char *key, bool *ret, tool_error *e)
{
        json_t *v = param(in, key);
        if (!v)
                return 0;
        if (!json_is_boolean(v))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must be a boolean", tool, key);
        *ret = json_is_true(v);
        return 0;
}

int tool_param_uint(const tool_in *in, const char *tool, const char *key, uint64_t max, uint64_t *ret,
                    tool_error *e)
{
        json_t *v = param(in, key);
        if (!v)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must be a non-negative integer", tool, key);
        if ((uint64_t)json_integer_value(v) > max)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must be at most %llu", tool, key,
                                 (unsigned long long)max);
        *ret = (uint64_t)json_integer_value(v);
        return 0;
}

int tool_param_path(const tool_ctx *ctx, const tool_in *in, const char *tool, const char *key, const char *def,
                    char **ret_abs, tool_error *e)
{
        json_t *v = param(in, key);
        const char *path = def;
        if (v) {
                if (!json_is_string(v))
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must be a string", tool, key);
                path = json_string_value(v);
                if (strlen(path) != json_string_length(v))
                        return tool_fail(e, TOOL_INVALID_PATH, "%s: '%s' must not contain NUL bytes", tool, key);
        }
        if (!path)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' is required", tool, key);
        if (!*path)
                return tool_fail(e, TOOL_INVALID_PATH, "%s: '%s' is empty", tool, key);
        if (tool_path_normalize(ctx, path, ret_abs, e) < 0)
                return tool_fail_wrap(e, "%s", tool);
        return 0;
}


/* dir + "/" + name, without doubling the root's slash. */
char *tool_path_join(const char *dir, const char *name)
{
        char *s = NULL;
        if (asprintf(&s, "%s/%s", strcmp(dir, "/") ? dir : "", name) < 0)
                return NULL;
        return s;
}

/* The longest prefix of s[0..n) that is at most max bytes and does not split a UTF-8 sequence
 * (s[max] is read when n > max). */
size_t tool_utf8_cut(const char *s, size_t n, size_t max)
{
        if (n <= max)
                return n;
        size_t cut = max;
        /* Back off over continuation bytes: at most 3 of them belong to the cut sequence. */
        while (cut > 0 && max - cut < 3 && ((unsigned char)s[cut] & 0xc0) == 0x80)
                cut--;
        return cut;
}

int tool_open_regular(const tool_ctx *ctx, const char *tool, const char *abs, int *ret_fd, struct stat *ret_st, tool_error *e)
{
        _cleanup_close_ int fd = -1;
        if (tool_open(ctx, abs, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd, e) < 0)
                return tool_fail_wrap(e, "%s", tool);
        if (fstat(fd, ret_st) < 0)
                return tool_fail_errno(e, errno, "%s: stat '%s'", tool, abs);
        if (S_ISDIR(ret_st->st_mode))
                return tool_fail(e, TOOL_IS_DIRECTORY, "%s: '%s' is a directory", tool, abs);
        if (!S_ISREG(ret_st->st_mode))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' is not a regular file", tool, abs);
        *ret_fd = steal_fd(&fd);
        return 0;
}

bool tool_size_unknown(int fd, const struct stat *st)
{
        struct statfs sfs;
        if (st->st_size != 0 || fstatfs(fd, &sfs) < 0)
                return false;
        switch (sfs.f_type) {
        case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case CGROUP_SUPER_MAGIC: case CGROUP2_SUPER_MAGIC:
        case DEBUGFS_MAGIC: case TRACEFS_MAGIC: case SECURITYFS_MAGIC:
                return true;
        default:
                return false;
        }
}
