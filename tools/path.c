/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Every path a request names is resolved here: lexically made absolute inside the root, then
 * opened with openat2(2) RESOLVE_IN_ROOT so that "..", absolute symlinks and planted links all
 * stay inside ctx->root_fd, whatever the tree looks like when the call happens.  Where openat2
 * gives ENOSYS (kernels before 5.6, seccomp filters that refuse it, valgrind 3.19) the same
 * resolution is done in user space, one component at a time (resolve_in_root below). */
#include "tool.h"
#include "path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TOOL_PATH_MAX 4096

int tool_path_normalize(const tool_ctx *ctx, const char *path, char **ret_abs, tool_error *e)
{
        if (!path || !*path)
                return tool_fail(e, TOOL_INVALID_PATH, "empty path");
        const char *cwd = ctx->cwd && ctx->cwd[0] == '/' ? ctx->cwd : "/";
        const char *sources[2] = { path[0] == '/' ? "" : cwd, path };

        /* The result is never longer than cwd + "/" + path. */
        size_t cap = strlen(sources[0]) + strlen(path) + 2;
        _cleanup_free_ char *out = malloc(cap);
        if (!out)
                return tool_fail(e, TOOL_INTERNAL, "out of memory");
        size_t len = 0; /* out[0..len) is "/c1/c2..." without a trailing slash; "" is the root */
        for (size_t s = 0; s < ARRAY_SIZE(sources); s++) {
                for (const char *p = sources[s]; *p;) {
                        size_t n = strcspn(p, "/");
                        if (n == 0 || (n == 1 && p[0] == '.')) {
                                /* "//" and "." name the same directory */
                        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
                                /* ".." at the root stays at the root, as the kernel does */
                                while (len > 0 && out[len - 1] != '/')
                                        len--;
                                if (len > 0)
                                        len--;
                        } else {
                                out[len++] = '/';
                                memcpy(out + len, p, n);
                                len += n;
                        }
                        p += n;
                        if (*p == '/')
                                p++;
                }
        }
        if (len == 0)
                out[len++] = '/';
        out[len] = '\0';
        if (len > TOOL_PATH_MAX)
                return tool_fail(e, TOOL_INVALID_PATH, "path '%.64s...' is longer than %d bytes", out,
                                 TOOL_PATH_MAX);
        *ret_abs = steal_pointer(&out);
        return 0;
}

/* The kernel's MAXSYMLINKS: a lookup that follows more links fails with ELOOP, as openat2 does. */
#define TOOL_MAX_LINKS 40
/* procfs's root directory inode (PROC_ROOT_INO in the kernel's fs/proc). */
#define TOOL_PROC_ROOT_INO 1

/* Whether openat2 exists for this process: decided by the first call, then fixed (the kernel
 * and the seccomp filter do not change under a running process). */
enum { OPENAT2_UNKNOWN, OPENAT2_WORKS, OPENAT2_MISSING };
static int openat2_state = OPENAT2_UNKNOWN;
static bool fallback_forced;

void tool_path_force_fallback(bool on)
{
        __atomic_store_n(&fallback_forced, on, __ATOMIC_RELAXED);
}

bool tool_path_uses_fallback(void)
{
        return __atomic_load_n(&fallback_forced, __ATOMIC_RELAXED) ||
               __atomic_load_n(&openat2_state, __ATOMIC_RELAXED) == OPENAT2_MISSING;
}

/* The directories from the root down to where the walk is: ".." pops one (never below the
 * root), so the walk never looks ".." up on the filesystem and cannot climb out of the root.
 * fds[0] is the root (borrowed); the others are owned O_PATH fds. */
typedef struct dir_stack {
        int *fds;
        size_t n, alloc;
} dir_stack;

static void dir_stack_pop_to(dir_stack *st, size_t n)
{
        while (st->n > n)
                close(st->fds[--st->n]);
}

static void cleanup_dir_stack(dir_stack *st)
{
        dir_stack_pop_to(st, 1);
        free(st->fds);
}

/* Takes fd (closed on failure). */
static int dir_stack_push(dir_stack *st, int fd)
{
        if (st->n == st->alloc) {
                size_t na = st->alloc ? st->alloc * 2 : 16;
                int *nf = realloc(st->fds, na * sizeof(int));
                if (!nf) {
                        close(fd);
                        return -ENOMEM;
                }
                st->fds = nf;
                st->alloc = na;
        }
        st->fds[st->n++] = fd;
        return 0;
}

/* A magic link (/proc/PID/{fd/N,cwd,root,exe,ns/...}) jumps to an object, not to its text;
 * openat2's RESOLVE_NO_MAGICLINKS refuses them with ELOOP and so does the fallback.  Every
 * procfs symlink except those directly in procfs's root ("self", "thread-self", "mounts",
 * "net": plain text links) is one.  A magic link taken for a plain one would still only have its
 * text resolved inside the root: the test decides fidelity, not containment. */
static bool is_magic_link(int dirfd, int linkfd)
{
        struct statfs sfs;
        if (fstatfs(linkfd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
                return false;
        struct stat st;
        if (fstat(dirfd, &st) < 0 || fstatfs(dirfd, &sfs) < 0)
                return true;
        return !(sfs.f_type == PROC_SUPER_MAGIC && st.st_ino == TOOL_PROC_ROOT_INO);
}

/* Follow the symlink linkfd (found in directory top) whose lookup left rest (starting with '/'
 * or empty) unresolved: *todo becomes the link's text + rest, and an absolute text restarts
 * at the root.  0 or -errno. */
static int follow_link(dir_stack *st, int linkfd, unsigned *links, char **todo, const char *rest)
{
        if (++*links > TOOL_MAX_LINKS)
                return -ELOOP;
        if (is_magic_link(st->fds[st->n - 1], linkfd))
                return -ELOOP;
        char target[TOOL_PATH_MAX];
        ssize_t n = readlinkat(linkfd, "", target, sizeof(target)); /* the link opened, not a new lookup */
        if (n < 0)
                return -errno;
        if ((size_t)n >= sizeof(target))
                return -ENAMETOOLONG;
        if (n == 0)
                return -ENOENT; /* as the kernel treats an empty link */
        if (target[0] == '/')
                dir_stack_pop_to(st, 1);
        size_t rl = strlen(rest);
        char *t = malloc((size_t)n + rl + 1);
        if (!t)
                return -ENOMEM;
        memcpy(t, target, (size_t)n);
        memcpy(t + n, rest, rl + 1);
        free(*todo);
        *todo = t;
        return 0;
}

/* openat2(root_fd, rel, flags | O_CLOEXEC, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) without
 * openat2: walk rel one component at a time with openat(O_PATH | O_NOFOLLOW) from a stack of
 * directory fds, so the kernel never follows a link by itself: each link is read with readlinkat
 * on the fd of the link that was opened and its text resolved here, inside the root.  The last
 * component is opened with the caller's flags plus O_NOFOLLOW.  Returns an fd or -errno; -EAGAIN
 * when the tree changed between looking at a name and opening it (the caller retries).
 * Where it differs from openat2, it never leaves the root either: a ".." in a link's text goes
 * back to the directory the walk came through (openat2: that directory's parent now, EAGAIN if
 * a rename raced) without checking search permission on the one it leaves; "name/" naming
 * nothing is ENOENT even with O_CREAT (openat2: EISDIR); each directory level holds one fd while
 * the walk is below it (a path deeper than RLIMIT_NOFILE fails with EMFILE). */
static int resolve_in_root(int root_fd, const char *rel, int flags, mode_t mode)
{
        __attribute__((cleanup(cleanup_dir_stack))) dir_stack st = { 0 };
        int r = dir_stack_push(&st, root_fd);
        if (r < 0)
                return r;
        _cleanup_free_ char *todo = strdup(rel);
        if (!todo)
                return -ENOMEM;
        /* O_CREAT|O_EXCL never follows a last link (EEXIST), O_NOFOLLOW asks not to */
        bool follow_last = !(flags & O_NOFOLLOW) && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
        unsigned links = 0;
        const char *p = todo;
        for (;;) {
                int top = st.fds[st.n - 1];
                p += strspn(p, "/");
                if (!*p) /* the walk ends on a directory: the root, "d/", "d/.." */
                        return (r = openat(top, ".", flags | O_CLOEXEC, mode)) < 0 ? -errno : r;
                size_t n = strcspn(p, "/");
                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                char name[NAME_MAX + 1];
                memcpy(name, p, n);
                name[n] = '\0';
                const char *rest = p + n;
                /* a trailing slash makes the name a directory to enter, then "." is opened */
                bool last = !*rest;
                if (!strcmp(name, ".")) {
                        p = rest;
                        continue;
                }
                if (!strcmp(name, "..")) {
                        if (st.n > 1)
                                dir_stack_pop_to(&st, st.n - 1);
                        p = rest;
                        continue;
                }
                if (last && !follow_last) /* one name, not followed: the kernel's own semantics */
                        return (r = openat(top, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)) < 0 ? -errno : r;

                _cleanup_close_ int fd = openat(top, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        if (!last || errno != ENOENT || !(flags & O_CREAT))
                                return -errno;
                        r = openat(top, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
                        if (r < 0)
                                return errno == ELOOP ? -EAGAIN : -errno; /* a link appeared meanwhile */
                        return r;
                }
                struct stat sb;
                if (fstat(fd, &sb) < 0)
                        return -errno;
                if (S_ISLNK(sb.st_mode)) {
                        r = follow_link(&st, fd, &links, &todo, rest);
                        if (r < 0)
                                return r;
                        p = todo;
                        continue;
                }
                if (!last) {
                        if (!S_ISDIR(sb.st_mode))
                                return -ENOTDIR;
                        r = dir_stack_push(&st, steal_fd(&fd));
                        if (r < 0)
                                return r;
                        p = rest;
                        continue;
                }
                /* The last name, not a link a moment ago: open it for real, never following. */
                r = openat(top, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
                if (r < 0)
                        return errno == ELOOP ? -EAGAIN : -errno;
                if (flags & O_PATH) { /* O_PATH|O_NOFOLLOW opens a link that replaced it */
                        if (fstat(r, &sb) < 0 || S_ISLNK(sb.st_mode)) {
                                close(r);
                                return -EAGAIN;
                        }
                }
                return r;
        }
}

bool tool_is_agent_proc(int fd)
{
        struct statfs sfs;
        if (fstatfs(fd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
                return false;
        /* where the entry really is ("/proc/self/x" opens "/proc/PID/x"); code of the sandbox
         * cannot mount, so /proc is where the sandbox's procfs was mounted */
        char link[32], path[TOOL_PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof(path) - 1);
        if (n < 0)
                return true; /* unknown: refused rather than shown */
        path[n] = '\0';
        if (strncmp(path, "/proc/", 6))
                return false;
        const char *num = path + 6;
        size_t len = strspn(num, "0123456789");
        if (len == 0 || len > 10 || (num[len] && num[len] != '/'))
                return false; /* /proc itself, or a file of the kernel's (cpuinfo, sys/...) */
        long pid = strtol(num, NULL, 10);
        if (pid == 1 || pid == (long)getpid())
                return true;
        char task[64];
        snprintf(task, sizeof(task), "/proc/self/task/%ld", pid);
        return access(task, F_OK) == 0; /* one of the agent's threads */
}

int tool_open(const tool_ctx *ctx, const char *abs, int flags, mode_t mode, int *ret_fd, tool_error *e)
{
        bool creates = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .mode = creates ? mode : 0, /* openat2 refuses a mode it would not use */
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        const char *rel = abs + strspn(abs, "/");
        if (!*rel)
                rel = ".";
        for (unsigned tries = 0;; tries++) {
                long fd;
                if (tool_path_uses_fallback()) {
                        fd = resolve_in_root(ctx->root_fd, rel, flags, how.mode);
                        if (fd < 0) {
                                errno = (int)-fd;
                                fd = -1;
                        }
                } else {
                        fd = syscall(SYS_openat2, ctx->root_fd, rel, &how, sizeof(how));
                        if (fd < 0 && errno == ENOSYS) {
                                __atomic_store_n(&openat2_state, OPENAT2_MISSING, __ATOMIC_RELAXED);
                                continue;
                        }
                        if (fd >= 0)
                                __atomic_store_n(&openat2_state, OPENAT2_WORKS, __ATOMIC_RELAXED);
                }
                if (fd >= 0 && tool_is_agent_proc((int)fd)) {
                        close((int)fd);
                        return tool_fail(e, TOOL_PERMISSION_DENIED, "'%s' is the agent's own /proc entry: refused", abs);
                }
                if (fd >= 0) {
                        *ret_fd = (int)fd;
                        return 0;
                }
                /* RESOLVE_IN_ROOT gives EAGAIN when a rename races the lookup's ".." checks; the
                 * fallback when a name changed between looking at it and opening it. */
                if (errno == EINTR || (errno == EAGAIN && tries < 32))
                        continue;
                return tool_fail_errno(e, errno, "open '%s'", abs);
        }
}

int tool_open_parent(const tool_ctx *ctx, const char *abs, int *ret_dirfd, const char **ret_name, tool_error *e)
{
        const char *slash = strrchr(abs, '/');
        if (!abs[strspn(abs, "/")])
                return tool_fail(e, TOOL_INVALID_PATH, "'%s': the root has no parent", abs);
        const char *name = slash ? slash + 1 : abs;
        /* Normalized paths never end so; a caller's own path might. */
        if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
                return tool_fail(e, TOOL_INVALID_PATH, "path '%s' does not end in a name", abs);

        _cleanup_free_ char *parent = slash && slash != abs ? strndup(abs, (size_t)(slash - abs)) : strdup("/");
        if (!parent)
                return tool_fail(e, TOOL_INTERNAL, "out of memory");
        int fd;
        if (tool_open(ctx, parent, O_PATH | O_DIRECTORY, 0, &fd, e) < 0)
                return -1;
        *ret_dirfd = fd;
        *ret_name = name;
        return 0;
}

static int compare_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void cleanup_dirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

int tool_read_dir(int dirfd, char ***ret_names)
{
        /* A new open file description: reading must not move dirfd's offset, and an O_PATH fd
         * cannot be read at all. */
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        __attribute__((cleanup(cleanup_dirp))) DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        _cleanup_strv_ char **names = NULL;
        size_t n = 0, alloc = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        if (errno)
                                return -errno;
                        break;
                }
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (n + 2 > alloc) {
                        size_t na = alloc ? alloc * 2 : 32;
                        char **nv = realloc(names, na * sizeof(char *));
                        if (!nv)
                                return -ENOMEM;
                        names = nv;
                        alloc = na;
                }
                names[n] = strdup(de->d_name);
                if (!names[n])
                        return -ENOMEM;
                names[++n] = NULL;
        }
        if (!names) {
                names = calloc(1, sizeof(char *));
                if (!names)
                        return -ENOMEM;
        }
        qsort(names, n, sizeof(char *), compare_names);
        *ret_names = steal_pointer(&names);
        return 0;
}
