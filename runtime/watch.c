/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The watch engine (watch.h).  The watched directory is opened once with tool_open (resolved
 * inside the root, whatever links lie on the way) and kept open; inotify is given
 * /proc/self/fd/N of an open directory, never a path a planted symlink could redirect.  The
 * directories under it are opened from it one component at a time with O_NOFOLLOW, their
 * names being what inotify or readdir reported (never "." or ".."). */
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCH_MASK                                                                                                                 \
        (IN_CREATE | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |        \
         IN_ONLYDIR | IN_EXCL_UNLINK)

typedef struct watch_dir {
        int wd;
        char *rel; /* "" for the watched directory, else "a/b" under it */
} watch_dir;

struct nsbox_watch {
        const tool_ctx *ctx; /* borrowed: outlives the watch */
        char *abs;           /* the watched directory, normalized (tool_open re-resolves it) */
        int ifd;
        bool recursive, ended;
        char *shown; /* the client's path, trailing slashes off */
        watch_dir *dirs;
        unsigned n, alloc;
};

int nsbox_watch_fd(const nsbox_watch *w) { return w->ifd; }
unsigned nsbox_watch_dirs(const nsbox_watch *w) { return w->n; }

void nsbox_watch_free(nsbox_watch *w)
{
        if (!w)
                return;
        for (unsigned i = 0; i < w->n; i++)
                free(w->dirs[i].rel);
        free(w->dirs);
        free(w->shown);
        free(w->abs);
        if (w->ifd >= 0)
                close(w->ifd);
        free(w);
}

static const char *type_of(mode_t m)
{
        switch (m & S_IFMT) {
        case S_IFDIR: return "dir";
        case S_IFLNK: return "symlink";
        case S_IFIFO: return "fifo";
        case S_IFSOCK: return "socket";
        case S_IFCHR: return "char";
        case S_IFBLK: return "block";
        default: return "file";
        }
}

static watch_dir *dir_by_wd(nsbox_watch *w, int wd)
{
        for (unsigned i = 0; i < w->n; i++)
                if (w->dirs[i].wd == wd)
                        return &w->dirs[i];
        return NULL;
}

/* rel + "/" + name, or name when rel is the watched directory (malloc'd) */
static char *rel_join(const char *rel, const char *name)
{
        char *s = NULL;
        if (asprintf(&s, "%s%s%s", rel, *rel ? "/" : "", name) < 0)
                return NULL;
        return s;
}

/* The directory rel under the watched one: the watched one resolved again inside the root (no fd
 * of it is kept: an open directory is never reported deleted), then rel without following any
 * link; fd or -errno. */
static int open_rel(const nsbox_watch *w, const char *rel)
{
        tool_error e;
        int fd;
        if (tool_open(w->ctx, w->abs, O_RDONLY | O_DIRECTORY, 0, &fd, &e) < 0)
                return -ENOENT;
        for (const char *p = rel; *p;) {
                size_t n = strcspn(p, "/");
                char name[256];
                if (n == 0 || n >= sizeof(name)) {
                        close(fd);
                        return -EINVAL;
                }
                memcpy(name, p, n);
                name[n] = '\0';
                int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int err = errno;
                close(fd);
                if (nfd < 0)
                        return -err;
                fd = nfd;
                p += n + (p[n] == '/');
        }
        return fd;
}

static int add_fail(tool_error *e, int err, const char *shown)
{
        if (err == ENOSPC)
                return tool_fail(e, TOOL_TOO_LARGE, "'%s': the kernel's limit of inotify watches is reached (fs.inotify.max_user_watches)",
                                 shown);
        return tool_fail_errno(e, err, "inotify_add_watch '%s'", shown);
}

/* Watch directory fd (rel under the watched one) and, recursive, every directory under it.
 * emit: report what is already in it as created (a directory made just now may have been
 * filled before its watch was added).  Past the cap: too_large, or when emitting, one overflow. */
static int add_tree(nsbox_watch *w, int fd, const char *rel, nsbox_watch_fn emit, void *ud, tool_error *e)
{
        if (w->n >= NSBOX_WATCH_MAX_DIRS) {
                if (emit) {
                        _cleanup_free_ char *shown = *rel ? tool_path_join(w->shown, rel) : strdup(w->shown);
                        emit(ud, "overflow", shown ? shown : w->shown, NULL);
                        return 0;
                }
                return tool_fail(e, TOOL_TOO_LARGE, "'%s': more than %u directories to watch (the limit of one watch)", w->shown,
                                 NSBOX_WATCH_MAX_DIRS);
        }
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        int wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
        if (wd < 0)
                return emit ? 0 : add_fail(e, errno, w->shown); /* a new directory may be gone already */
        watch_dir *d = dir_by_wd(w, wd);
        char *copy = strdup(rel);
        if (!copy)
                return tool_fail(e, TOOL_INTERNAL, "out of memory");
        if (d) { /* the same directory again (a bind mount, a move): its newest name */
                free(d->rel);
                d->rel = copy;
        } else {
                if (w->n == w->alloc) {
                        unsigned na = w->alloc ? w->alloc * 2 : 16;
                        watch_dir *nd = realloc(w->dirs, na * sizeof(*nd));
                        if (!nd) {
                                free(copy);
                                return tool_fail(e, TOOL_INTERNAL, "out of memory");
                        }
                        w->dirs = nd;
                        w->alloc = na;
                }
                w->dirs[w->n++] = (watch_dir){ .wd = wd, .rel = copy };
        }
        if (!w->recursive)
                return 0;
        _cleanup_strv_ char **names = NULL;
        if (tool_read_dir(fd, &names) < 0)
                return 0; /* gone or unreadable: its watch says what happens next */
        for (char **np = names; *np; np++) {
                struct stat st;
                if (fstatat(fd, *np, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                _cleanup_free_ char *sub = rel_join(rel, *np);
                if (!sub)
                        return tool_fail(e, TOOL_INTERNAL, "out of memory");
                if (emit) {
                        _cleanup_free_ char *shown = tool_path_join(w->shown, sub);
                        if (shown)
                                emit(ud, "create", shown, type_of(st.st_mode));
                }
                if (!S_ISDIR(st.st_mode))
                        continue;
                int cfd = openat(fd, *np, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd < 0)
                        continue;
                int r = add_tree(w, cfd, sub, emit, ud, e);
                close(cfd);
                if (r < 0)
                        return r;
        }
        return 0;
}

int nsbox_watch_open(const tool_ctx *ctx, const char *path, bool recursive, nsbox_watch **ret, tool_error *e)
{
        _cleanup_free_ char *abs = NULL;
        if (tool_path_normalize(ctx, path, &abs, e) < 0)
                return tool_fail_wrap(e, "watch");
        nsbox_watch *w = calloc(1, sizeof(*w));
        if (!w)
                return tool_fail(e, TOOL_INTERNAL, "out of memory");
        *w = (nsbox_watch){ .ctx = ctx, .abs = steal_pointer(&abs), .ifd = -1, .recursive = recursive };
        size_t len = strlen(path);
        while (len > 1 && path[len - 1] == '/')
                len--;
        w->shown = strndup(path, len);
        if (!w->shown) {
                nsbox_watch_free(w);
                return tool_fail(e, TOOL_INTERNAL, "out of memory");
        }
        int rootfd;
        if (tool_open(ctx, w->abs, O_RDONLY | O_DIRECTORY, 0, &rootfd, e) < 0) {
                nsbox_watch_free(w);
                return tool_fail_wrap(e, "watch");
        }
        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->ifd < 0) {
                int err = errno;
                close(rootfd);
                nsbox_watch_free(w);
                if (err == EMFILE)
                        return tool_fail(e, TOOL_TOO_LARGE, "watch: the kernel's limit of inotify instances is reached "
                                                            "(fs.inotify.max_user_instances)");
                return tool_fail_errno(e, err, "watch: inotify_init1");
        }
        int r = add_tree(w, rootfd, "", NULL, NULL, e);
        close(rootfd);
        if (r < 0) {
                nsbox_watch_free(w);
                return tool_fail_wrap(e, "watch");
        }
        *ret = w;
        return 0;
}

/* The directory rel and every one under it are no longer where they were (moved away). */
static void forget_tree(nsbox_watch *w, const char *rel)
{
        size_t n = strlen(rel);
        for (unsigned i = 0; i < w->n;) {
                const char *r = w->dirs[i].rel;
                if (!strncmp(r, rel, n) && (r[n] == '\0' || r[n] == '/')) {
                        inotify_rm_watch(w->ifd, w->dirs[i].wd);
                        free(w->dirs[i].rel);
                        w->dirs[i] = w->dirs[--w->n];
                } else {
                        i++;
                }
        }
}

static void forget_wd(nsbox_watch *w, int wd)
{
        for (unsigned i = 0; i < w->n; i++)
                if (w->dirs[i].wd == wd) {
                        free(w->dirs[i].rel);
                        w->dirs[i] = w->dirs[--w->n];
                        return;
                }
}

/* A non-directory's type, looked up now (lstat): "file" when it is gone already. */
static const char *entry_type(const nsbox_watch *w, const char *rel, const char *name)
{
        int fd = open_rel(w, rel);
        if (fd < 0)
                return "file";
        struct stat st;
        int r = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
        close(fd);
        return r < 0 ? "file" : type_of(st.st_mode);
}

/* One event of directory d (copied: the table may change under it); 1 when the watch ends. */
static int one_event(nsbox_watch *w, const struct inotify_event *ev, nsbox_watch_fn fn, void *ud)
{
        watch_dir *d = dir_by_wd(w, ev->wd);
        if (!d)
                return 0;
        bool is_root = !*d->rel;
        if (!ev->len || !ev->name[0]) {
                if (ev->mask & IN_IGNORED)
                        forget_wd(w, ev->wd);
                if (!is_root)
                        return 0; /* a subdirectory's own events: its parent reports them */
                if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
                        fn(ud, ev->mask & IN_MOVE_SELF ? "rename" : "remove", w->shown, "dir");
                        return 1;
                }
                if (ev->mask & IN_ATTRIB)
                        fn(ud, "chmod", w->shown, "dir");
                return 0;
        }
        _cleanup_free_ char *rel = rel_join(d->rel, ev->name);
        _cleanup_free_ char *shown = rel ? tool_path_join(w->shown, rel) : NULL;
        if (!shown)
                return -ENOMEM;
        bool dir = ev->mask & IN_ISDIR;
        const char *type = dir ? "dir" : entry_type(w, d->rel, ev->name);
        if (ev->mask & IN_CREATE)
                fn(ud, "create", shown, type);
        else if (ev->mask & IN_MOVED_TO)
                fn(ud, "create", shown, type);
        else if (ev->mask & IN_CLOSE_WRITE)
                fn(ud, "write", shown, type);
        else if (ev->mask & IN_DELETE)
                fn(ud, "remove", shown, type);
        else if (ev->mask & IN_MOVED_FROM)
                fn(ud, "rename", shown, type);
        else if (ev->mask & IN_ATTRIB)
                fn(ud, "chmod", shown, type);
        if (!w->recursive || !dir)
                return 0;
        if (ev->mask & (IN_MOVED_FROM | IN_DELETE))
                forget_tree(w, rel);
        if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                int fd = open_rel(w, rel);
                if (fd >= 0) {
                        tool_error e = { 0 };
                        /* made here: what is in it already counts as created; moved in: as it was */
                        add_tree(w, fd, rel, (ev->mask & IN_CREATE) ? fn : NULL, ud, &e);
                        close(fd);
                }
        }
        return 0;
}

int nsbox_watch_read(nsbox_watch *w, nsbox_watch_fn fn, void *ud)
{
        if (w->ended)
                return 1;
        char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n = read(w->ifd, buf, sizeof(buf));
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)p;
                p += sizeof(*ev) + ev->len;
                if (ev->mask & IN_Q_OVERFLOW) {
                        fn(ud, "overflow", w->shown, NULL);
                        continue;
                }
                int r = one_event(w, ev, fn, ud);
                if (r < 0)
                        return r;
                if (r == 1) {
                        w->ended = true;
                        return 1;
                }
        }
        return 0;
}
