/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Path handling: how a tool request's path becomes a file under the root (tools/path.c), the
 * sandbox paths of policies (runtime/policy.c) and the socket path from $NSBOX_SOCKET
 * (runtime/paths.c).  The input is a cwd, a newline, and a path.  A normalized path is
 * canonical and stable; whatever it names, what tool_open and tool_open_parent open is inside
 * the root, a temporary directory with links that point out of it (made once, never changed). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/paths.h"
#include "../../runtime/policy.h"
#include "../../tools/path.h"
#include "../../tools/tool.h"
#include "fuzz.h"

static char base_dir[64], root_dir[128];
static int root_fd = -1;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        remove(path);
        return 0;
}

static void cleanup_base(void)
{
        nftw(base_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void at_root(const char *name, const char *target, bool dir)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", root_dir, name);
        int r = target ? symlink(target, path) : dir ? mkdir(path, 0755) : close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
        FUZZ_CHECK(r == 0, "create '%s': %s", path, strerror(errno));
}

static void setup_once(void)
{
        if (root_fd >= 0)
                return;
        snprintf(base_dir, sizeof(base_dir), "/tmp/nsbox-fuzz-path.XXXXXX");
        FUZZ_CHECK(mkdtemp(base_dir) != NULL, "mkdtemp: %s", strerror(errno));
        atexit(cleanup_base);
        snprintf(root_dir, sizeof(root_dir), "%s/root", base_dir);
        FUZZ_CHECK(mkdir(root_dir, 0755) == 0, "mkdir: %s", strerror(errno));
        at_root("d", NULL, true);
        at_root("d/e", NULL, true);
        at_root("f", NULL, false);
        at_root("up", "../..", false);
        at_root("abs", "/etc", false);
        at_root("d/back", "../../../../..", false);
        at_root("d/proc", "/proc/self/root", false);
        at_root("loop", "loop", false);
        root_fd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        FUZZ_CHECK(root_fd >= 0, "open '%s': %s", root_dir, strerror(errno));
}

/* fd is the root or under it */
static void check_inside(int fd, const char *what, const char *abs)
{
        char link[64], target[PATH_MAX + 1];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, PATH_MAX);
        FUZZ_CHECK(n > 0, "readlink: %s", strerror(errno));
        target[n] = '\0';
        size_t rl = strlen(root_dir);
        FUZZ_CHECK(!strncmp(target, root_dir, rl) && (target[rl] == '\0' || target[rl] == '/'),
                   "%s '%s' opened '%s', outside the root '%s'", what, abs, target, root_dir);
}

/* One tool_open, forced through the fallback or not: 0 with *ret_fd, or -1 with e. */
static int open_with(bool fallback, const tool_ctx *ctx, const char *abs, int flags, int *ret_fd, tool_error *e)
{
        tool_path_force_fallback(fallback);
        int r = tool_open(ctx, abs, flags, 0, ret_fd, e);
        tool_path_force_fallback(false);
        return r;
}

static bool same_outcome(int r0, int fd0, const tool_error *e0, int r1, int fd1, const tool_error *e1)
{
        if (r0 != r1)
                return false;
        if (r0)
                return e0->code == e1->code && !strcmp(e0->message, e1->message);
        struct stat a, b;
        FUZZ_CHECK(fstat(fd0, &a) == 0 && fstat(fd1, &b) == 0, "fstat: %s", strerror(errno));
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* openat2 and the user-space resolver used without it (tools/path.c) open the same file, or fail
 * with the same message.  openat2 is asked again when they differ: under load it gives EAGAIN
 * when renames anywhere on the machine race a walk's ".." checks, and ELOOP when a walk through
 * more than 20 links is redone after an RCU walk failed (the link count is not reset); this
 * tree never changes, so one answer that agrees is openat2's own. */
static void check_both_resolvers(const tool_ctx *ctx, const char *abs, int flags)
{
        int fd1 = -1;
        tool_error e1 = { 0 };
        int r1 = open_with(true, ctx, abs, flags, &fd1, &e1);
        if (r1 == 0)
                check_inside(fd1, "tool_open (fallback)", abs);
        int r0 = -1, fd0 = -1;
        tool_error e0 = { 0 };
        bool same = false;
        for (int tries = 0; tries < 8 && !same; tries++) {
                if (fd0 >= 0)
                        close(fd0);
                fd0 = -1;
                e0 = (tool_error){ 0 };
                r0 = open_with(false, ctx, abs, flags, &fd0, &e0);
                same = same_outcome(r0, fd0, &e0, r1, fd1, &e1);
        }
        FUZZ_CHECK(same, "'%s' (flags %#x): openat2 %s, the fallback %s", abs, (unsigned)flags,
                   r0 ? e0.message : "opened a file", r1 ? e1.message : "opened a file");
        if (fd0 >= 0)
                close(fd0);
        if (fd1 >= 0)
                close(fd1);
}

static void check_canonical(const char *abs, const char *from)
{
        size_t n = strlen(abs);
        FUZZ_CHECK(abs[0] == '/', "'%s' -> '%s': not absolute", from, abs);
        FUZZ_CHECK(!strstr(abs, "//") && !strstr(abs, "/./") && !strstr(abs, "/../"), "'%s' -> '%s'", from, abs);
        FUZZ_CHECK(n == 1 || (abs[n - 1] != '/' && strcmp(abs + n - 2, "/.") && (n < 3 || strcmp(abs + n - 3, "/.."))),
                   "'%s' -> '%s'", from, abs);
}

FUZZ_ENTRY(path)
{
        setup_once();
        char *in = strndup((const char *)data, size); /* a NUL ends a C string early, as it would the agent's */
        FUZZ_CHECK(in != NULL, "out of memory");
        char *nl = strchr(in, '\n');
        const char *cwd = nl ? in : "/", *path = nl ? nl + 1 : in;
        if (nl)
                *nl = '\0';

        tool_ctx ctx = { .root_fd = root_fd, .root_path = root_dir, .cwd = cwd };
        tool_error e = { 0 };
        char *abs = NULL;
        if (tool_path_normalize(&ctx, path, &abs, &e) == 0) {
                check_canonical(abs, path);
                /* stable: normalizing it again, from any cwd, changes nothing */
                char *again = NULL;
                tool_ctx other = { .root_fd = root_fd, .root_path = root_dir, .cwd = "/d/e" };
                FUZZ_CHECK(tool_path_normalize(&other, abs, &again, &e) == 0 && !strcmp(again, abs), "'%s' is not stable", abs);
                free(again);

                int fd = -1;
                if (tool_open(&ctx, abs, O_PATH, 0, &fd, &e) == 0) {
                        check_inside(fd, "tool_open", abs);
                        close(fd);
                } else {
                        FUZZ_CHECK(e.message[0] && !strchr(e.message, '\n'), "tool_open failed without a one-line message");
                }
                check_both_resolvers(&ctx, abs, O_PATH);
                check_both_resolvers(&ctx, abs, O_PATH | O_NOFOLLOW);
                check_both_resolvers(&ctx, abs, O_RDONLY | O_DIRECTORY);
                const char *name = NULL;
                if (tool_open_parent(&ctx, abs, &fd, &name, &e) == 0) {
                        check_inside(fd, "tool_open_parent", abs);
                        FUZZ_CHECK(*name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, ".."), "last component '%s'", name);
                        close(fd);
                }
                free(abs);
        } else {
                FUZZ_CHECK(e.code == TOOL_INVALID_PATH && !strchr(e.message, '\n'), "normalize failed: %d '%s'", (int)e.code, e.message);
        }

        /* a sandbox path in a policy or on the command line */
        char *norm = NULL;
        if (nsbox_normalize_sandbox_path(path, &norm) == 0) {
                check_canonical(norm, path);
                FUZZ_CHECK(!strstr(path, "/../") && strcmp(path, ".."), "'%s' has '..' and was accepted", path);
                free(norm);
        }
        if (nsbox_check_writable_dir(path, &norm) == 0) {
                check_canonical(norm, path);
                static const char *const api[] = { "/proc", "/sys", "/dev" };
                FUZZ_CHECK(strcmp(norm, "/") != 0, "'/' is a writable directory");
                for (size_t i = 0; i < 3; i++) {
                        size_t l = strlen(api[i]);
                        FUZZ_CHECK(strncmp(norm, api[i], l) || (norm[l] && norm[l] != '/'), "'%s' is a writable directory", norm);
                }
                free(norm);
        }

        /* $NSBOX_SOCKET: never created here (create is false), only looked at */
        nsbox_paths p = { 0 };
        nsbox_error err = { 0 };
        setenv("NSBOX_SOCKET", path, 1);
        if (nsbox_paths_get(false, &p, &err) == 0) {
                FUZZ_CHECK(p.socket && p.socket[0] == '/' && strlen(p.socket) < 108, "socket path '%s'", p.socket);
                nsbox_paths_release(&p);
        } else {
                FUZZ_CHECK(err.msg && !strchr(err.msg, '\n'), "paths refused without a one-line message");
        }
        nsbox_error_clear(&err);
        unsetenv("NSBOX_SOCKET");
        free(in);
        return 0;
}
