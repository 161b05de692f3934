/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

void strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

size_t strv_length(char *const *v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

int strv_push(char ***v, char *s)
{
        if (!s)
                return -ENOMEM;
        size_t n = strv_length(*v);
        char **nv = realloc(*v, (n + 2) * sizeof(char *));
        if (!nv) {
                free(s);
                return -ENOMEM;
        }
        nv[n] = s;
        nv[n + 1] = NULL;
        *v = nv;
        return 0;
}

void sb_init(strbuf *sb, size_t limit)
{
        *sb = (strbuf){ .limit = limit };
}

void sb_release(strbuf *sb)
{
        free(sb->buf);
        sb_init(sb, sb->limit);
}

static int sb_grow(strbuf *sb, size_t extra)
{
        if (sb->limit && (extra > sb->limit || sb->len > sb->limit - extra))
                return -E2BIG;
        size_t need = sb->len + extra + 1;
        if (need <= sb->alloc)
                return 0;
        size_t alloc = sb->alloc ? sb->alloc : 64;
        while (alloc < need)
                alloc *= 2;
        char *nb = realloc(sb->buf, alloc);
        if (!nb)
                return -ENOMEM;
        sb->buf = nb;
        sb->alloc = alloc;
        return 0;
}

int sb_append(strbuf *sb, const void *data, size_t n)
{
        int r = sb_grow(sb, n);
        if (r < 0)
                return r;
        if (n)
                memcpy(sb->buf + sb->len, data, n);
        sb->len += n;
        sb->buf[sb->len] = '\0';
        return 0;
}

int sb_appendf(strbuf *sb, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        int r = sb_grow(sb, (size_t)n);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        sb->len += (size_t)n;
        return 0;
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end)
                return -EINVAL;
        if (v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* A non-negative decimal with an optional fraction; stops at the first other character. */
static int parse_decimal(const char *s, double *ret, const char **ret_end)
{
        if (!s || !((*s >= '0' && *s <= '9') || *s == '.'))
                return -EINVAL;
        errno = 0;
        char *end;
        double v = strtod(s, &end);
        if (errno == ERANGE || end == s || !isfinite(v) || v < 0)
                return -ERANGE;
        /* strtod accepts hex, exponents and "inf": refuse anything but digits and one dot. */
        for (const char *p = s; p < end; p++)
                if (!((*p >= '0' && *p <= '9') || *p == '.'))
                        return -EINVAL;
        *ret = v;
        *ret_end = end;
        return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
        double v;
        const char *end;
        int r = parse_decimal(s, &v, &end);
        if (r < 0)
                return r;
        double mult = 1;
        switch (*end) {
        case '\0': break;
        case 'k': case 'K': mult = 1024.0; end++; break;
        case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
        case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
        case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
        default: return -EINVAL;
        }
        if (*end == 'i' && mult > 1) /* accept "64Mi" */
                end++;
        if (*end == 'B' || *end == 'b')
                end++;
        if (*end)
                return -EINVAL;
        double bytes = v * mult;
        if (bytes >= 9.2e18)
                return -ERANGE;
        *ret = (uint64_t)bytes;
        return 0;
}

int parse_duration_ms(const char *s, uint64_t *ret)
{
        double v;
        const char *end;
        int r = parse_decimal(s, &v, &end);
        if (r < 0)
                return r;
        double mult = 1000;
        if (!strcmp(end, "") || !strcmp(end, "s"))
                mult = 1000;
        else if (!strcmp(end, "ms"))
                mult = 1;
        else if (!strcmp(end, "m"))
                mult = 60 * 1000;
        else if (!strcmp(end, "h"))
                mult = 3600 * 1000;
        else
                return -EINVAL;
        double ms = v * mult;
        if (ms > 1e15)
                return -ERANGE;
        *ret = (uint64_t)(ms + 0.5);
        return 0;
}

ssize_t read_full(int fd, void *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t k = read(fd, (char *)buf + got, n - got);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                got += (size_t)k;
        }
        return (ssize_t)got;
}

int write_full(int fd, const void *buf, size_t n)
{
        while (n > 0) {
                ssize_t k = write(fd, buf, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                buf = (const char *)buf + k;
                n -= (size_t)k;
        }
        return 0;
}

/* What a file that is not a regular one is, for messages. */
static const char *file_kind(mode_t m)
{
        return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
               : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int read_file_strict(int dirfd, const char *path, int flags, size_t max, const char *shown, char **ret, size_t *ret_len,
                     nsbox_error *err)
{
        if (!shown)
                shown = path;
        /* O_NONBLOCK: opening a FIFO must not wait for a writer (a regular file reads the same) */
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
        if (fd < 0)
                return nsbox_err(err, errno, "%s", shown);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "%s", shown);
        if (!S_ISREG(st.st_mode))
                return nsbox_err_as(err, EINVAL, "%s: %s, not a regular file", shown, file_kind(st.st_mode));
        if ((uint64_t)st.st_size > max)
                return nsbox_err_as(err, EFBIG, "%s: larger than %zu bytes", shown, max);
        _cleanup_sb_ strbuf sb;
        sb_init(&sb, max);
        char chunk[4096];
        for (;;) {
                ssize_t k = read(fd, chunk, sizeof(chunk));
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return nsbox_err(err, errno, "%s", shown);
                }
                if (k == 0)
                        break;
                int r = sb_append(&sb, chunk, (size_t)k);
                if (r == -E2BIG) /* it grew while we read */
                        return nsbox_err_as(err, EFBIG, "%s: larger than %zu bytes", shown, max);
                if (r < 0)
                        return nsbox_err(err, -r, "%s", shown);
        }
        if (sb_append(&sb, "", 0) < 0)
                return nsbox_err(err, ENOMEM, "%s", shown);
        if (ret_len)
                *ret_len = sb.len;
        *ret = steal_pointer(&sb.buf);
        return 0;
}

int read_file_at(int dirfd, const char *path, int flags, size_t max, char **ret, size_t *ret_len)
{
        return read_file_strict(dirfd, path, flags, max, NULL, ret, ret_len, NULL);
}

int write_file_at(int dirfd, const char *path, const char *data, mode_t mode)
{
        _cleanup_close_ int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        return write_full(fd, data, strlen(data));
}

void nsbox_block_stop_signals(sigset_t *ret)
{
        signal(SIGPIPE, SIG_IGN);
        sigemptyset(ret);
        sigaddset(ret, SIGTERM);
        sigaddset(ret, SIGINT);
        sigaddset(ret, SIGHUP);
        sigprocmask(SIG_BLOCK, ret, NULL);
}

uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int timeout_until(int timeout, uint64_t when, uint64_t now)
{
        if (!when)
                return timeout;
        uint64_t ms = when <= now ? 0 : (when - now + 999999) / 1000000;
        int t = ms > INT_MAX ? INT_MAX : (int)ms;
        return timeout < 0 || t < timeout ? t : timeout;
}

void nsbox_close_all_but(const int *keep, size_t n)
{
        unsigned from = 3;
        for (size_t i = 0; i < n; i++) {
                if (keep[i] < 0 || (unsigned)keep[i] < from)
                        continue;
                if ((unsigned)keep[i] > from)
                        syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
                from = (unsigned)keep[i] + 1;
        }
        syscall(SYS_close_range, from, ~0u, 0);
}

void nsbox_close_pair(int fds[2])
{
        for (int i = 0; i < 2; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

int nsbox_slot_take(const char *dir, unsigned count, const char *what, unsigned *ret, int *ret_fd, nsbox_error *err)
{
        if (mkdir("/run/nsbox", 0700) < 0 && errno != EEXIST) /* nsboxd's runtime directory too (paths.h) */
                return nsbox_err(err, errno, "%s: create /run/nsbox", what);
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "%s: create %s", what, dir);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return nsbox_err(err, errno, "%s: open %s", what, dir);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned start = (unsigned)((unsigned long)ts.tv_nsec ^ (unsigned long)getpid()) % count;
        for (unsigned k = 0; k < count; k++) {
                unsigned i = (start + k) % count;
                char name[16];
                snprintf(name, sizeof(name), "%u", i);
                int fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return nsbox_err(err, errno, "%s: lock file %s/%s", what, dir, name);
                if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
                        *ret = i;
                        *ret_fd = fd;
                        return 0;
                }
                close(fd);
        }
        return nsbox_err(err, EAGAIN, "%s: all %u are taken", what, count);
}

/* The length of the UTF-8 sequence at p (1 to 4) and its code point, or 0 when it is not one
 * (overlong, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_char(const unsigned char *p, uint32_t *ret)
{
        size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
        if (p[0] < 0x80) {
                *ret = p[0];
                return 1;
        }
        if (n == 0 || p[0] > 0xf4)
                return 0;
        uint32_t c = p[0] & (0x7f >> n);
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                c = c << 6 | (p[i] & 0x3f);
        }
        static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (c < least[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
                return 0;
        *ret = c;
        return n;
}

char *nsbox_escape_controls(const char *s)
{
        strbuf out;
        sb_init(&out, 0);
        int r = sb_append(&out, "", 0);
        for (const unsigned char *p = (const unsigned char *)s; r == 0 && *p;) {
                uint32_t c;
                size_t n = utf8_char(p, &c);
                if (n == 0) {
                        r = sb_appendf(&out, "\\x%02x", *p++);
                        continue;
                }
                if (c == '\\')
                        r = sb_append(&out, "\\\\", 2);
                else if (c == '\n' || c == '\t' || c == '\r')
                        r = sb_appendf(&out, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
                else if (c < 0x20 || c == 0x7f)
                        r = sb_appendf(&out, "\\x%02x", (unsigned)c);
                else if (c >= 0x80 && c <= 0x9f)
                        r = sb_appendf(&out, "\\u%04x", (unsigned)c);
                else
                        r = sb_append(&out, p, n);
                p += n;
        }
        if (r < 0) {
                sb_release(&out);
                return NULL;
        }
        return out.buf;
}

/* The first line of our uid map: inside, outside (in the parent namespace) and count. */
static bool uid_map_first(unsigned long *inside, unsigned long *outside, unsigned long *count)
{
        char buf[128] = "";
        _cleanup_close_ int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
                return false;
        return sscanf(buf, "%lu %lu %lu", inside, outside, count) == 3;
}

bool nsbox_host_root(void)
{
        unsigned long inside, outside, count;
        return geteuid() == 0 && uid_map_first(&inside, &outside, &count) && inside == 0 && outside == 0 && count == 4294967295ul;
}

unsigned long nsbox_outside_uid(void)
{
        unsigned long inside, outside, count, uid = geteuid();
        if (uid_map_first(&inside, &outside, &count) && uid >= inside && uid - inside < count)
                return outside + (uid - inside);
        return uid;
}
