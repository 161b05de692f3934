/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Snapshot copies of a sandbox's writable layer as the store sees them: contents with their holes,
 * modes, owners, xattrs, times, symlinks, hard links, whiteouts, fifos and sockets come out the
 * same; limits, mounts, device nodes and foreign owners are refused with a message naming the
 * file; and the safe removal and ownership walk.  Each test works in a directory of its own,
 * holding src/ (the tree copied) and the copy next to it.  Tests that mount a tmpfs do it in a
 * child with a mount namespace of its own (as non-root, inside a user namespace). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../runtime/treecopy.h"
#include "../../runtime/util.h"
#include "unit.h"

/* ---- fixture ---- */

static char base_dir[64];      /* per test case, made and removed by the parent (survives crashes) */
static char test_dir[128];     /* per test, inside base_dir */
static int test_fd = -1;       /* test_dir, where copies are made */
static nsbox_error err;

static void base_setup(void)
{
        snprintf(base_dir, sizeof(base_dir), "/tmp/nsbox-unit-treecopy.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(base_dir));
        /* As root, a test hands its directory to an unprivileged child: let it reach it. */
        ck_assert_int_eq(chmod(base_dir, 0755), 0);
}

static void base_teardown(void)
{
        int tmp = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
        nsbox_error e = { 0 };
        if (tmp >= 0 && nsbox_tree_remove(tmp, base_dir + strlen("/tmp/"), &e) < 0)
                fprintf(stderr, "treecopy: cannot remove '%s': %s\n", base_dir, e.msg);
        nsbox_error_clear(&e);
        if (tmp >= 0)
                close(tmp);
}

static void test_setup(void)
{
        snprintf(test_dir, sizeof(test_dir), "%s/t.XXXXXX", base_dir);
        ck_assert_ptr_nonnull(mkdtemp(test_dir));
        test_fd = open(test_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(test_fd, 0);
        ck_assert_int_eq(mkdirat(test_fd, "src", 0755), 0);
        err = (nsbox_error){ 0 };
}

/* Removing the test's directory is part of every test: 0000 directories and all. */
static void test_teardown(void)
{
        int base = open(base_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(base, 0);
        close(test_fd);
        test_fd = -1;
        UNIT_ASSERT_OK(nsbox_tree_remove(base, test_dir + strlen(base_dir) + 1, &err), &err);
        struct stat st;
        ck_assert_msg(fstatat(base, test_dir + strlen(base_dir) + 1, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT,
                      "'%s' is still there", test_dir);
        close(base);
}

/* The path of rel inside the test's directory (a few buffers, so several fit in one call). */
static const char *P(const char *rel)
{
        static char bufs[8][PATH_MAX];
        static unsigned i;
        char *b = bufs[i++ % 8];
        snprintf(b, PATH_MAX, "%s/%s", test_dir, rel);
        return b;
}

static void put_bytes(const char *rel, const void *data, size_t len, mode_t mode)
{
        int fd = open(P(rel), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_msg(fd >= 0, "create '%s': %s", rel, strerror(errno));
        ck_assert_int_eq(write_full(fd, data, len), 0);
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
}

static void put(const char *rel, const char *content)
{
        put_bytes(rel, content, strlen(content), 0644);
}

static void mkd(const char *rel, mode_t mode)
{
        ck_assert_msg(mkdir(P(rel), mode) == 0, "mkdir '%s': %s", rel, strerror(errno));
        ck_assert_int_eq(chmod(P(rel), mode), 0);
}

static void lnk(const char *target, const char *rel)
{
        ck_assert_msg(symlink(target, P(rel)) == 0, "symlink '%s': %s", rel, strerror(errno));
}

static void make_socket(const char *rel)
{
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(s, 0);
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        ck_assert_uint_lt(strlen(P(rel)), sizeof(a.sun_path));
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", P(rel));
        ck_assert_msg(bind(s, (struct sockaddr *)&a, sizeof(a)) == 0, "bind '%s': %s", rel, strerror(errno));
        close(s);
}

static struct stat lst(const char *rel)
{
        struct stat st;
        ck_assert_msg(lstat(P(rel), &st) == 0, "stat '%s': %s", rel, strerror(errno));
        return st;
}

static bool exists(const char *rel)
{
        struct stat st;
        return lstat(P(rel), &st) == 0;
}

/* A file's whole content; *ret_len its length. */
static char *slurp(const char *rel, size_t *ret_len)
{
        char *s = NULL;
        size_t n = 0;
        int r = read_file_at(AT_FDCWD, P(rel), O_NOFOLLOW, 256u << 20, &s, &n);
        ck_assert_msg(r == 0, "read '%s': %s", rel, strerror(-r));
        *ret_len = n;
        return s;
}

#define ASSERT_CONTENT(rel, want)                                                                  \
        do {                                                                                       \
                size_t _n;                                                                         \
                char *_s = slurp((rel), &_n);                                                      \
                ck_assert_msg(_n == strlen(want) && !memcmp(_s, (want), _n), "'%s' holds '%s', not '%s'", \
                              (rel), _s, (want));                                                  \
                free(_s);                                                                          \
        } while (0)

#define ASSERT_MODE(rel, want)                                                                    \
        do {                                                                                      \
                mode_t _m = lst(rel).st_mode & 07777;                                             \
                ck_assert_msg(_m == (want), "'%s' has mode %04o, not %04o", (rel), (unsigned)_m,  \
                              (unsigned)(want));                                                  \
        } while (0)

static void set_xattr(const char *rel, const char *name, const void *value, size_t len)
{
        ck_assert_msg(lsetxattr(P(rel), name, value, len, 0) == 0, "set '%s' on '%s': %s", name, rel,
                      strerror(errno));
}

#define ASSERT_XATTR(rel, name, value, len)                                                        \
        do {                                                                                       \
                char _v[256];                                                                      \
                ssize_t _n = lgetxattr(P(rel), (name), _v, sizeof(_v));                            \
                ck_assert_msg(_n >= 0, "'%s' has no attribute '%s': %s", (rel), (name), strerror(errno)); \
                ck_assert_msg((size_t)_n == (len) && !memcmp(_v, (value), (len)),                 \
                              "'%s': attribute '%s' differs", (rel), (name));                      \
        } while (0)

static void set_times(const char *rel, time_t a_sec, long a_ns, time_t m_sec, long m_ns)
{
        struct timespec ts[2] = { { a_sec, a_ns }, { m_sec, m_ns } };
        ck_assert_msg(utimensat(AT_FDCWD, P(rel), ts, AT_SYMLINK_NOFOLLOW) == 0, "utimensat '%s': %s", rel,
                      strerror(errno));
}

#define ASSERT_TIMES(rel, a_sec, a_ns, m_sec, m_ns)                                                   \
        do {                                                                                          \
                struct stat _st = lst(rel);                                                           \
                ck_assert_msg(_st.st_mtim.tv_sec == (m_sec) && _st.st_mtim.tv_nsec == (m_ns),         \
                              "'%s' mtime is %lld.%09ld", (rel), (long long)_st.st_mtim.tv_sec,       \
                              _st.st_mtim.tv_nsec);                                                   \
                ck_assert_msg(_st.st_atim.tv_sec == (a_sec) && _st.st_atim.tv_nsec == (a_ns),         \
                              "'%s' atime is %lld.%09ld", (rel), (long long)_st.st_atim.tv_sec,       \
                              _st.st_atim.tv_nsec);                                                   \
        } while (0)

/* Copy test_dir/src_rel to test_dir/dst_name (from an O_PATH fd, which the copy reopens). */
static int copy_tree(const char *src_rel, const char *dst_name, uint64_t max_bytes, nsbox_copy_stats *stats)
{
        int fd = open(P(src_rel), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open '%s': %s", src_rel, strerror(errno));
        int r = nsbox_tree_copy(fd, test_fd, dst_name, max_bytes, stats, &err);
        close(fd);
        return r;
}

#define COPY_OK(stats) UNIT_ASSERT_OK(copy_tree("src", "copy", 0, (stats)), &err)

/* ---- a child with mounts of its own ---- */

/* What goes wrong in a child is reported with these and the child's result, not ck_assert. */
#define CHILD_CHECK(cond, msg, size, ...)                     \
        do {                                                  \
                if (!(cond)) {                                \
                        snprintf((msg), (size), __VA_ARGS__); \
                        return -1;                            \
                }                                             \
        } while (0)

static int write_proc(const char *file, const char *text)
{
        int fd = open(file, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = write_full(fd, text, strlen(text));
        close(fd);
        return r;
}

/* Root gets a mount namespace; anyone else a user namespace in which they are root, as a
 * sandbox's supervisor is: mounting a tmpfs is possible either way and leaves no trace. */
static int enter_mount_ns(char *msg, size_t size)
{
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (uid == 0) {
                CHILD_CHECK(unshare(CLONE_NEWNS) == 0, msg, size, "unshare(CLONE_NEWNS): %s", strerror(errno));
        } else {
                CHILD_CHECK(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0, msg, size,
                            "this test needs an unprivileged user namespace: unshare: %s", strerror(errno));
                char map[64];
                CHILD_CHECK(write_proc("/proc/self/setgroups", "deny") == 0, msg, size, "setgroups deny");
                snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
                CHILD_CHECK(write_proc("/proc/self/uid_map", map) == 0, msg, size, "uid_map");
                snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
                CHILD_CHECK(write_proc("/proc/self/gid_map", map) == 0, msg, size, "gid_map");
        }
        /* "none", not NULL: a propagation change ignores both, and valgrind 3.19 reads a NULL type */
        CHILD_CHECK(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0, msg, size, "make mounts private: %s",
                    strerror(errno));
        return 0;
}

/* put() for a child: no ck_assert there. */
static bool child_put(const char *rel, const char *content)
{
        int fd = open(P(rel), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
                return false;
        bool ok = write_full(fd, content, strlen(content)) == 0;
        close(fd);
        return ok;
}

static int mount_tmpfs(const char *rel, char *msg, size_t size)
{
        CHILD_CHECK(mount("tmpfs", P(rel), "tmpfs", 0, "mode=0755,size=64m") == 0, msg, size, "mount tmpfs on '%s': %s",
                    rel, strerror(errno));
        return 0;
}

typedef int (*child_fn)(char *msg, size_t size);

/* Run fn in a child (enter_mount_ns first when mount_ns); false with the child's message in msg
 * when it failed. */
static bool run_child(child_fn fn, bool mount_ns, char *msg, size_t size)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                snprintf(msg, size, "pipe: %s", strerror(errno));
                return false;
        }
        pid_t pid = fork();
        if (pid < 0) {
                snprintf(msg, size, "fork: %s", strerror(errno));
                return false;
        }
        if (pid == 0) {
                close(p[0]);
                char cmsg[2048] = "";
                int r = mount_ns ? enter_mount_ns(cmsg, sizeof(cmsg)) : 0;
                /* An fd opened before unshare() still looks names up in the old mount namespace. */
                if (r == 0 && mount_ns) {
                        close(test_fd);
                        test_fd = open(test_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                }
                if (r == 0)
                        r = fn(cmsg, sizeof(cmsg));
                if (r != 0 && !cmsg[0])
                        snprintf(cmsg, sizeof(cmsg), "failed without a message");
                (void)!write(p[1], cmsg, strlen(cmsg));
                _exit(r == 0 ? 0 : 1);
        }
        close(p[1]);
        ssize_t n = read_full(p[0], msg, size - 1);
        close(p[0]);
        msg[n > 0 ? n : 0] = '\0';
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (!msg[0])
                        snprintf(msg, size, "the child died");
                return false;
        }
        return true;
}

/* A macro, so that the test's own line is the last one checked. */
#define RUN_CHILD(fn, mount_ns)                                                           \
        do {                                                                              \
                char _msg[2048] = "";                                                     \
                ck_assert_msg(run_child((fn), (mount_ns), _msg, sizeof(_msg)), "in the child: %s", _msg); \
        } while (0)

/* ---- copy: contents ---- */

START_TEST(test_copy_keeps_contents_and_holes)
{
        put("src/small", "hello\n");
        put("src/empty", "");
        size_t big_len = (3u << 20) + 12345;
        char *big = malloc(big_len);
        ck_assert_ptr_nonnull(big);
        for (size_t i = 0; i < big_len; i++)
                big[i] = (char)(i * 2654435761u >> 13);
        put_bytes("src/big", big, big_len, 0644);
        /* 64 MiB of which only the last byte was ever written. */
        int fd = open(P("src/sparse"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, "Z", 1, (64 << 20) - 1), 1);
        close(fd);
        /* Data, a hole, data, and a hole to the end. */
        fd = open(P("src/middle"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, "head", 4, 0), 4);
        ck_assert_int_eq(pwrite(fd, "tail", 4, 16 << 20), 4);
        ck_assert_int_eq(ftruncate(fd, 32 << 20), 0);
        close(fd);

        nsbox_copy_stats stats;
        COPY_OK(&stats);

        ASSERT_CONTENT("copy/small", "hello\n");
        ASSERT_CONTENT("copy/empty", "");
        size_t n;
        char *got = slurp("copy/big", &n);
        ck_assert_uint_eq(n, big_len);
        ck_assert_msg(!memcmp(got, big, big_len), "the big file's copy differs");
        free(got);
        free(big);

        struct stat st = lst("copy/sparse");
        ck_assert_int_eq(st.st_size, 64 << 20);
        ck_assert_msg(st.st_blocks * 512 < (1 << 20), "the sparse copy takes %lld bytes",
                      (long long)st.st_blocks * 512);
        fd = open(P("copy/sparse"), O_RDONLY | O_CLOEXEC);
        char c = 0;
        ck_assert_int_eq(pread(fd, &c, 1, (64 << 20) - 1), 1);
        ck_assert_int_eq(c, 'Z');
        ck_assert_int_ge(lseek(fd, 0, SEEK_DATA), 60 << 20);
        close(fd);

        st = lst("copy/middle");
        ck_assert_int_eq(st.st_size, 32 << 20);
        ck_assert_msg(st.st_blocks * 512 < (1 << 20), "the copy with holes takes %lld bytes",
                      (long long)st.st_blocks * 512);
        fd = open(P("copy/middle"), O_RDONLY | O_CLOEXEC);
        char four[5] = "";
        ck_assert_int_eq(pread(fd, four, 4, 0), 4);
        ck_assert_str_eq(four, "head");
        ck_assert_int_eq(pread(fd, four, 4, 16 << 20), 4);
        ck_assert_str_eq(four, "tail");
        close(fd);

        ck_assert_uint_eq(stats.files, 5);
        /* The data, not the holes: a little more than what was written (whole blocks). */
        uint64_t written = 6 + big_len + 1 + 8;
        ck_assert_msg(stats.bytes >= written && stats.bytes < written + (1 << 20), "bytes %llu for %llu written",
                      (unsigned long long)stats.bytes, (unsigned long long)written);
}
END_TEST

START_TEST(test_copy_keeps_modes_setuid_and_sticky)
{
        put("src/private", "p");
        ck_assert_int_eq(chmod(P("src/private"), 0640), 0);
        put("src/setuid", "#!/bin/sh\n");
        ck_assert_int_eq(chmod(P("src/setuid"), 04755), 0);
        put("src/setgid", "g");
        ck_assert_int_eq(chmod(P("src/setgid"), 02711), 0);
        mkd("src/tmp", 01777);
        mkd("src/shared", 02775);
        /* Read-only directories are filled before their mode is set. */
        mkd("src/ro", 0755);
        mkd("src/ro/inner", 0755);
        put("src/ro/inner/file", "deep");
        put("src/ro/file", "in a read-only directory");
        ck_assert_int_eq(chmod(P("src/ro/inner"), 0555), 0);
        ck_assert_int_eq(chmod(P("src/ro"), 0500), 0);
        ck_assert_int_eq(chmod(P("src"), 0751), 0);

        COPY_OK(NULL);

        ASSERT_MODE("copy", 0751);
        ASSERT_MODE("copy/private", 0640);
        ASSERT_MODE("copy/setuid", 04755);
        ASSERT_MODE("copy/setgid", 02711);
        ASSERT_MODE("copy/tmp", 01777);
        ASSERT_MODE("copy/shared", 02775);
        ASSERT_MODE("copy/ro", 0500);
        ASSERT_MODE("copy/ro/inner", 0555);
        ASSERT_CONTENT("copy/ro/file", "in a read-only directory");
        ASSERT_CONTENT("copy/ro/inner/file", "deep");
        ck_assert(S_ISDIR(lst("copy/tmp").st_mode));
}
END_TEST

START_TEST(test_copy_of_unreadable_entries)
{
        mkd("src/sub", 0755);
        put("src/sub/secret", "s");
        ck_assert_int_eq(chmod(P("src/sub/secret"), 0000), 0);
        if (geteuid() == 0) {
                /* Root reads it anyway and the copy keeps its mode. */
                COPY_OK(NULL);
                ASSERT_MODE("copy/sub/secret", 0000);
                ASSERT_CONTENT("copy/sub/secret", "s");
        } else {
                ck_assert_int_eq(copy_tree("src", "copy", 0, NULL), -EACCES);
                UNIT_ASSERT_ERROR(&err, "copy 'sub/secret'", "Permission denied");
                ck_assert(!exists("copy"));
        }
}
END_TEST

START_TEST(test_copy_keeps_symlinks_without_following_them)
{
        mkd("src/sub", 0755);
        put("src/sub/file", "x");
        lnk("no/such/target", "src/dangling");
        lnk("/etc/passwd", "src/passwd");
        lnk("sub", "src/dirlink");
        lnk("../../outside", "src/sub/up");

        nsbox_copy_stats stats;
        COPY_OK(&stats);

        static const char *const links[][2] = { { "copy/dangling", "no/such/target" },
                                                 { "copy/passwd", "/etc/passwd" },
                                                 { "copy/dirlink", "sub" },
                                                 { "copy/sub/up", "../../outside" } };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
                ck_assert_msg(S_ISLNK(lst(links[i][0]).st_mode), "'%s' is not a symlink", links[i][0]);
                char target[PATH_MAX];
                ssize_t n = readlink(P(links[i][0]), target, sizeof(target) - 1);
                ck_assert_int_gt(n, 0);
                target[n] = '\0';
                ck_assert_str_eq(target, links[i][1]);
        }
        ck_assert_uint_eq(stats.symlinks, 4);
        ck_assert_uint_eq(stats.files, 1);
        ck_assert_uint_eq(stats.bytes, 1); /* /etc/passwd was not read */
        ck_assert_uint_eq(stats.dirs, 2);
}
END_TEST

START_TEST(test_copy_keeps_hard_links)
{
        mkd("src/sub", 0755);
        put("src/a", "shared content");
        ck_assert_int_eq(link(P("src/a"), P("src/sub/b")), 0);
        put("src/c", "alone");
        lnk("somewhere", "src/s");
        ck_assert_int_eq(linkat(AT_FDCWD, P("src/s"), AT_FDCWD, P("src/sub/s2"), 0), 0);

        nsbox_copy_stats stats;
        COPY_OK(&stats);

        struct stat a = lst("copy/a"), b = lst("copy/sub/b"), c = lst("copy/c");
        ck_assert_uint_eq(a.st_ino, b.st_ino);
        ck_assert_uint_eq(a.st_nlink, 2);
        ck_assert_uint_eq(c.st_nlink, 1);
        ck_assert_uint_ne(a.st_ino, lst("src/a").st_ino);
        ASSERT_CONTENT("copy/sub/b", "shared content");
        struct stat s = lst("copy/s"), s2 = lst("copy/sub/s2");
        ck_assert(S_ISLNK(s2.st_mode));
        ck_assert_uint_eq(s.st_ino, s2.st_ino);
        ck_assert_uint_eq(s.st_nlink, 2);

        ck_assert_uint_eq(stats.files, 2);
        ck_assert_uint_eq(stats.symlinks, 1);
        ck_assert_uint_eq(stats.hardlinks, 2);
        ck_assert_uint_eq(stats.bytes, strlen("shared content") + strlen("alone"));
}
END_TEST

START_TEST(test_copy_keeps_whiteouts_fifos_and_sockets)
{
        /* The kernel lets anyone make a 0:0 whiteout: this works as any user. */
        ck_assert_msg(mknod(P("src/deleted"), S_IFCHR | 0600, makedev(0, 0)) == 0, "mknod whiteout: %s",
                      strerror(errno));
        ck_assert_int_eq(mkfifo(P("src/fifo"), 0640), 0);
        ck_assert_int_eq(chmod(P("src/fifo"), 0640), 0);
        make_socket("src/sock");

        nsbox_copy_stats stats;
        COPY_OK(&stats); /* would hang on opening the fifo */

        struct stat st = lst("copy/deleted");
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_uint_eq(st.st_rdev, makedev(0, 0));
        ASSERT_MODE("copy/deleted", 0600);
        ck_assert(S_ISFIFO(lst("copy/fifo").st_mode));
        ASSERT_MODE("copy/fifo", 0640);
        ck_assert(S_ISSOCK(lst("copy/sock").st_mode));
        ck_assert_uint_eq(lst("copy/sock").st_mode & 07777, lst("src/sock").st_mode & 07777);
        ck_assert_uint_eq(stats.specials, 3);
        ck_assert_uint_eq(stats.files, 0);
}
END_TEST

START_TEST(test_copy_refuses_device_nodes)
{
        mkd("src/dev", 0755);
        if (geteuid() != 0) {
                /* Not root: no such node can be made, so no tree of ours holds one. */
                ck_assert_int_eq(mknod(P("src/dev/null"), S_IFCHR | 0666, makedev(1, 3)), -1);
                ck_assert_int_eq(errno, EPERM);
                return;
        }
        ck_assert_int_eq(mknod(P("src/dev/null"), S_IFCHR | 0666, makedev(1, 3)), 0);
        ck_assert_int_eq(copy_tree("src", "copy", 0, NULL), -EPERM);
        UNIT_ASSERT_ERROR(&err, "device node 'dev/null' cannot be copied");
        ck_assert(!exists("copy"));

        ck_assert_int_eq(unlink(P("src/dev/null")), 0);
        ck_assert_int_eq(mknod(P("src/dev/sda"), S_IFBLK | 0660, makedev(8, 0)), 0);
        ck_assert_int_eq(copy_tree("src", "copy", 0, NULL), -EPERM);
        UNIT_ASSERT_ERROR(&err, "device node 'dev/sda' cannot be copied");
        ck_assert(!exists("copy"));
}
END_TEST

/* ---- copy: attributes ---- */

START_TEST(test_copy_keeps_xattrs)
{
        put("src/file", "x");
        set_xattr("src/file", "user.a", "1", 1);
        set_xattr("src/file", "user.bin", "a\0b", 3);
        set_xattr("src/file", "user.empty", "", 0);
        mkd("src/opaque", 0755);
        put("src/opaque/kept", "k");
        set_xattr("src/opaque", "user.overlay.opaque", "y", 1);
        set_xattr("src", "user.top", "t", 1);
        lnk("target", "src/link");
        /* Only trusted.* (root) may sit on a symlink; the kernel refuses user.* there. */
        bool link_attr = geteuid() == 0;
        if (link_attr)
                set_xattr("src/link", "trusted.nsbox", "L", 1);
        else
                ck_assert_int_eq(lsetxattr(P("src/link"), "user.x", "1", 1, 0), -1);
        /* Not writable: the attributes still go on before the mode does. */
        ck_assert_int_eq(chmod(P("src/file"), 0444), 0);

        COPY_OK(NULL);

        ASSERT_XATTR("copy/file", "user.a", "1", 1);
        ASSERT_XATTR("copy/file", "user.bin", "a\0b", 3);
        ASSERT_XATTR("copy/file", "user.empty", "", 0);
        ASSERT_XATTR("copy/opaque", "user.overlay.opaque", "y", 1);
        ASSERT_XATTR("copy", "user.top", "t", 1);
        ASSERT_MODE("copy/file", 0444);
        char names[1024];
        ssize_t n = llistxattr(P("copy/link"), names, sizeof(names));
        if (link_attr)
                ASSERT_XATTR("copy/link", "trusted.nsbox", "L", 1);
        else
                ck_assert_int_eq(n, 0);
        ck_assert_int_eq(llistxattr(P("copy/opaque/kept"), names, sizeof(names)), 0);
}
END_TEST

START_TEST(test_copy_keeps_times_to_the_nanosecond)
{
        mkd("src/dir", 0755);
        put("src/dir/file", "f");
        lnk("nowhere", "src/dir/link");
        ck_assert_int_eq(mkfifo(P("src/dir/fifo"), 0600), 0);
        mkd("src/ro", 0755);
        put("src/ro/inside", "i");
        set_times("src/dir/file", 1000000000, 111111111, 1100000000, 123456789);
        set_times("src/dir/link", 1000000001, 222222222, 1100000001, 987654321);
        set_times("src/dir/fifo", 1000000002, 1, 1100000002, 999999999);
        /* Directories last: filling them above changed their times. */
        set_times("src/dir", 1000000003, 333333333, 1100000003, 444444444);
        ck_assert_int_eq(chmod(P("src/ro"), 0555), 0);
        set_times("src/ro", 1000000004, 5, 1100000004, 6);
        set_times("src", 1000000005, 7, 1100000005, 8);

        COPY_OK(NULL);

        ASSERT_TIMES("copy/dir/file", 1000000000, 111111111, 1100000000, 123456789);
        ASSERT_TIMES("copy/dir/link", 1000000001, 222222222, 1100000001, 987654321);
        ASSERT_TIMES("copy/dir/fifo", 1000000002, 1, 1100000002, 999999999);
        ASSERT_TIMES("copy/dir", 1000000003, 333333333, 1100000003, 444444444);
        ASSERT_TIMES("copy/ro", 1000000004, 5, 1100000004, 6);
        ASSERT_TIMES("copy", 1000000005, 7, 1100000005, 8);
}
END_TEST

START_TEST(test_copy_keeps_owners)
{
        put("src/file", "f");
        mkd("src/dir", 0755);
        lnk("/etc/passwd", "src/link");
        if (geteuid() == 0) {
                ck_assert_int_eq(lchown(P("src/file"), 1234, 5678), 0);
                ck_assert_int_eq(chmod(P("src/file"), 04750), 0); /* chown cleared it */
                ck_assert_int_eq(lchown(P("src/dir"), 2345, 2345), 0);
                ck_assert_int_eq(lchown(P("src/link"), 3456, 4567), 0);
                ck_assert_int_eq(lchown(P("src"), 42, 43), 0);
        }
        struct stat passwd;
        ck_assert_int_eq(stat("/etc/passwd", &passwd), 0);

        COPY_OK(NULL);

        static const char *const names[] = { "", "/file", "/dir", "/link" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                char src[64], dst[64];
                snprintf(src, sizeof(src), "src%s", names[i]);
                snprintf(dst, sizeof(dst), "copy%s", names[i]);
                struct stat s = lst(src), d = lst(dst);
                ck_assert_msg(s.st_uid == d.st_uid && s.st_gid == d.st_gid, "'%s' is %u:%u, its source %u:%u", dst,
                              (unsigned)d.st_uid, (unsigned)d.st_gid, (unsigned)s.st_uid, (unsigned)s.st_gid);
                if (geteuid() != 0)
                        ck_assert_uint_eq(d.st_uid, geteuid());
        }
        if (geteuid() == 0)
                ASSERT_MODE("copy/file", 04750);
        struct stat after;
        ck_assert_int_eq(stat("/etc/passwd", &after), 0);
        ck_assert_uint_eq(after.st_uid, passwd.st_uid); /* the symlink, not its target */
}
END_TEST

/* As root: the tree is handed to uid 4242 with one file of uid 1234 inside, and 4242 copies it. */
static int copy_as_unprivileged(char *msg, size_t size)
{
        CHILD_CHECK(setgroups(0, NULL) == 0 && setresgid(4242, 4242, 4242) == 0 && setresuid(4242, 4242, 4242) == 0,
                    msg, size, "become uid 4242: %s", strerror(errno));
        int src = open(P("src"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHILD_CHECK(src >= 0, msg, size, "open src: %s", strerror(errno));
        nsbox_error e = { 0 };
        int r = nsbox_tree_copy(src, test_fd, "copy", 0, NULL, &e);
        CHILD_CHECK(r == -EPERM, msg, size, "copy gave %d (%s)", r, e.msg ? e.msg : "");
        CHILD_CHECK(e.msg && strstr(e.msg, "copy 'sub/theirs'") && strstr(e.msg, "uid 1234"), msg, size,
                    "message: %s", e.msg ? e.msg : "");
        CHILD_CHECK(!exists("copy"), msg, size, "the failed copy was left behind");
        nsbox_error_clear(&e);
        return 0;
}

START_TEST(test_copy_of_files_owned_by_others_fails_without_root)
{
        if (geteuid() != 0) {
                /* /etc/skel is root's: an unprivileged copy stops before making anything. */
                int src = open("/etc/skel", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(src, 0);
                ck_assert_int_eq(nsbox_tree_copy(src, test_fd, "copy", 0, NULL, &err), -EPERM);
                close(src);
                UNIT_ASSERT_ERROR(&err, "copy '.': owned by uid 0", "only root");
                ck_assert(!exists("copy"));
                return;
        }
        mkd("src/sub", 0755);
        put("src/mine", "m");
        put("src/sub/theirs", "t");
        const char *mine[] = { "", "src", "src/sub", "src/mine" };
        for (size_t i = 0; i < ARRAY_SIZE(mine); i++)
                ck_assert_int_eq(lchown(P(mine[i]), 4242, 4242), 0);
        ck_assert_int_eq(lchown(P("src/sub/theirs"), 1234, 1234), 0);
        RUN_CHILD(copy_as_unprivileged, false);
}
END_TEST

START_TEST(test_copy_keeps_empty_dirs_and_odd_names)
{
        mkd("src/empty", 0755);
        mkd("src/a", 0755);
        mkd("src/a/b", 0755);
        mkd("src/a/b/c", 0700);
        char longname[256];
        memset(longname, 'n', 255);
        longname[255] = '\0';
        const char *odd[] = { "new\nline", "\xff\xfe bytes", " space", "-dash", "..dots", longname };
        char rel[PATH_MAX];
        for (size_t i = 0; i < ARRAY_SIZE(odd); i++) {
                snprintf(rel, sizeof(rel), "src/%s", odd[i]);
                put(rel, odd[i]);
        }

        nsbox_copy_stats stats;
        COPY_OK(&stats);

        ck_assert(S_ISDIR(lst("copy/empty").st_mode));
        ck_assert(S_ISDIR(lst("copy/a/b/c").st_mode));
        ASSERT_MODE("copy/a/b/c", 0700);
        for (size_t i = 0; i < ARRAY_SIZE(odd); i++) {
                snprintf(rel, sizeof(rel), "copy/%s", odd[i]);
                ASSERT_CONTENT(rel, odd[i]);
        }
        ck_assert_uint_eq(stats.dirs, 5);
        ck_assert_uint_eq(stats.files, ARRAY_SIZE(odd));
}
END_TEST

START_TEST(test_copy_stats_count_every_kind)
{
        mkd("src/d1", 0755);
        mkd("src/d1/d2", 0755);
        put_bytes("src/ten", "0123456789", 10, 0644);
        put_bytes("src/d1/twenty", "01234567890123456789", 20, 0600);
        ck_assert_int_eq(link(P("src/ten"), P("src/d1/d2/ten-again")), 0);
        lnk("ten", "src/link");
        ck_assert_int_eq(mkfifo(P("src/d1/fifo"), 0600), 0);
        ck_assert_int_eq(mknod(P("src/d1/d2/wh"), S_IFCHR | 0600, makedev(0, 0)), 0);

        nsbox_copy_stats stats;
        memset(&stats, 0x5e, sizeof(stats));
        COPY_OK(&stats);

        ck_assert_uint_eq(stats.files, 2);
        ck_assert_uint_eq(stats.dirs, 3);
        ck_assert_uint_eq(stats.symlinks, 1);
        ck_assert_uint_eq(stats.hardlinks, 1);
        ck_assert_uint_eq(stats.specials, 2);
        ck_assert_uint_eq(stats.bytes, 30);
}
END_TEST

/* ---- copy: limits and refusals ---- */

START_TEST(test_copy_over_max_bytes_fails_and_leaves_nothing)
{
        char block[600];
        memset(block, 'b', sizeof(block));
        mkd("src/sub", 0755);
        put_bytes("src/one", block, sizeof(block), 0644);
        put_bytes("src/sub/two", block, sizeof(block), 0644);

        nsbox_copy_stats stats;
        memset(&stats, 0x5e, sizeof(stats));
        ck_assert_int_eq(copy_tree("src", "copy", 1000, &stats), -EFBIG);
        UNIT_ASSERT_ERROR(&err, "limit of 1000 bytes", "File too large");
        ck_assert(!exists("copy"));
        ck_assert_uint_eq(stats.files, 0x5e5e5e5e5e5e5e5eull); /* untouched on failure */

        /* Exactly at the limit is within it. */
        UNIT_ASSERT_OK(copy_tree("src", "copy", 1200, &stats), &err);
        ck_assert_uint_eq(stats.bytes, 1200);
}
END_TEST

START_TEST(test_copy_refuses_bad_arguments)
{
        int src = open(P("src"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(src, 0);
        static const char *const bad[] = { "a/b", "", ".", "..", "/abs" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                ck_assert_int_eq(nsbox_tree_copy(src, test_fd, bad[i], 0, NULL, &err), -EINVAL);
                UNIT_ASSERT_ERROR(&err, "is not a file name");
        }
        ck_assert_int_eq(nsbox_tree_copy(src, test_fd, NULL, 0, NULL, &err), -EINVAL);
        UNIT_ASSERT_ERROR(&err, "is not a file name");

        /* An existing destination is neither merged into nor removed. */
        mkd("copy", 0755);
        put("copy/keep", "k");
        ck_assert_int_eq(nsbox_tree_copy(src, test_fd, "copy", 0, NULL, &err), -EEXIST);
        UNIT_ASSERT_ERROR(&err, "create 'copy'", "File exists");
        ASSERT_CONTENT("copy/keep", "k");
        close(src);

        put("file", "not a directory");
        int file = open(P("file"), O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(nsbox_tree_copy(file, test_fd, "copy2", 0, NULL, &err), -ENOTDIR);
        UNIT_ASSERT_ERROR(&err, "source directory", "Not a directory");
        close(file);
        ck_assert(!exists("copy2"));
}
END_TEST

/* src/d/d/.../d, levels deep below src. */
static void make_deep(const char *top, unsigned levels)
{
        int fd = open(P(top), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        for (unsigned i = 0; i < levels; i++) {
                ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
                int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(next, 0);
                close(fd);
                fd = next;
        }
        close(fd);
}

START_TEST(test_copy_refuses_trees_deeper_than_256)
{
        make_deep("src", NSBOX_TREE_MAX_DEPTH);
        nsbox_copy_stats stats;
        UNIT_ASSERT_OK(copy_tree("src", "copy", 0, &stats), &err);
        ck_assert_uint_eq(stats.dirs, NSBOX_TREE_MAX_DEPTH + 1);

        mkd("deeper", 0755);
        make_deep("deeper", NSBOX_TREE_MAX_DEPTH + 1);
        ck_assert_int_eq(copy_tree("deeper", "copy2", 0, NULL), -ELOOP);
        UNIT_ASSERT_ERROR(&err, "more than 256 directories deep", "copy 'd/d/d/");
        ck_assert(!exists("copy2"));
}
END_TEST

START_TEST(test_copy_refuses_destination_inside_source)
{
        mkd("src/sub", 0755);
        int src = open(P("src"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int sub = open(P("src/sub"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(nsbox_tree_copy(src, sub, "copy", 0, NULL, &err), -EINVAL);
        UNIT_ASSERT_ERROR(&err, "copy 'sub/copy': the destination is inside the source");
        ck_assert(!exists("src/sub/copy"));
        close(src);
        close(sub);
}
END_TEST

static int copy_with_mount_inside(char *msg, size_t size)
{
        int r = mount_tmpfs("src/mnt", msg, size);
        if (r < 0)
                return r;
        CHILD_CHECK(child_put("src/mnt/hidden", "h"), msg, size, "put: %s", strerror(errno));
        nsbox_error e = { 0 };
        int src = open(P("src"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = nsbox_tree_copy(src, test_fd, "copy", 0, NULL, &e);
        close(src);
        CHILD_CHECK(r == -EXDEV, msg, size, "copy gave %d (%s)", r, e.msg ? e.msg : "");
        CHILD_CHECK(e.msg && strstr(e.msg, "copy 'mnt'") && strstr(e.msg, "mount point") && !strchr(e.msg, '\n'),
                    msg, size, "message: %s", e.msg);
        CHILD_CHECK(!exists("copy"), msg, size, "the failed copy was left behind");
        nsbox_error_clear(&e);
        return 0;
}

START_TEST(test_copy_refuses_a_mount_inside_the_source)
{
        put("src/file", "f");
        mkd("src/mnt", 0755);
        RUN_CHILD(copy_with_mount_inside, true);
        ck_assert(!exists("copy"));
}
END_TEST

/* What a snapshot is for: the sandbox's upper directory on its tmpfs, into the store on disk. */
static int copy_tmpfs_upper(char *msg, size_t size)
{
        int r = mount_tmpfs("upper", msg, size);
        if (r < 0)
                return r;
        size_t len = 300000; /* more than one read/write buffer */
        char *data = malloc(len);
        CHILD_CHECK(data != NULL, msg, size, "out of memory");
        for (size_t i = 0; i < len; i++)
                data[i] = (char)(i % 251);
        int fd = open(P("upper/data"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        CHILD_CHECK(fd >= 0 && write_full(fd, data, len) == 0, msg, size, "write data");
        CHILD_CHECK(fsetxattr(fd, "user.k", "v", 1, 0) == 0, msg, size, "user.k on tmpfs: %s", strerror(errno));
        close(fd);
        free(data);
        fd = open(P("upper/sparse"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        CHILD_CHECK(fd >= 0 && pwrite(fd, "Z", 1, (8 << 20) - 1) == 1, msg, size, "write sparse");
        close(fd);
        CHILD_CHECK(mknod(P("upper/gone"), S_IFCHR | 0000, makedev(0, 0)) == 0, msg, size, "whiteout: %s",
                    strerror(errno));
        CHILD_CHECK(mkdir(P("upper/opaque"), 0755) == 0, msg, size, "mkdir");
        CHILD_CHECK(lsetxattr(P("upper/opaque"), "user.overlay.opaque", "y", 1, 0) == 0, msg, size, "opaque: %s",
                    strerror(errno));

        nsbox_error e = { 0 };
        nsbox_copy_stats stats = { 0 };
        int src = open(P("upper"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = nsbox_tree_copy(src, test_fd, "layer", 0, &stats, &e);
        close(src);
        CHILD_CHECK(r == 0, msg, size, "copy: %s", e.msg ? e.msg : "");
        CHILD_CHECK(stats.files == 2 && stats.specials == 1 && stats.dirs == 2, msg, size,
                    "stats: %llu files, %llu specials, %llu dirs", (unsigned long long)stats.files,
                    (unsigned long long)stats.specials, (unsigned long long)stats.dirs);
        return 0;
}

START_TEST(test_copy_from_a_tmpfs_upper_to_disk)
{
        mkd("upper", 0755);
        RUN_CHILD(copy_tmpfs_upper, true);
        /* The tmpfs went with the child; its copy is on disk. */
        size_t n;
        char *data = slurp("layer/data", &n);
        ck_assert_uint_eq(n, 300000);
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(data[i] == (char)(i % 251), "byte %zu differs", i);
        free(data);
        ASSERT_XATTR("layer/data", "user.k", "v", 1);
        struct stat st = lst("layer/sparse");
        ck_assert_int_eq(st.st_size, 8 << 20);
        ck_assert_int_lt(st.st_blocks * 512, 1 << 20);
        st = lst("layer/gone");
        ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
        ASSERT_XATTR("layer/opaque", "user.overlay.opaque", "y", 1);
        ASSERT_MODE("layer", 0755);
}
END_TEST

/* ---- remove ---- */

START_TEST(test_remove_deletes_locked_dirs_and_keeps_symlink_targets)
{
        mkd("outside", 0755);
        put("outside/keep", "kept");
        mkd("src/locked", 0755);
        put("src/locked/file", "f");
        mkd("src/locked/inner", 0755);
        ck_assert_int_eq(chmod(P("src/locked/inner"), 0000), 0);
        ck_assert_int_eq(chmod(P("src/locked"), 0000), 0);
        mkd("src/ro", 0755);
        put("src/ro/file", "f");
        mkd("src/ro/sub", 0755);
        put("src/ro/sub/file", "f");
        ck_assert_int_eq(chmod(P("src/ro/sub"), 0555), 0);
        ck_assert_int_eq(chmod(P("src/ro"), 0555), 0);
        lnk(P("outside"), "src/to-dir");
        lnk(P("outside/keep"), "src/to-file");
        ck_assert_int_eq(mkfifo(P("src/fifo"), 0600), 0);

        UNIT_ASSERT_OK(nsbox_tree_remove(test_fd, "src", &err), &err);

        ck_assert(!exists("src"));
        ASSERT_CONTENT("outside/keep", "kept");
        ASSERT_MODE("outside", 0755);
        ASSERT_MODE("outside/keep", 0644);
}
END_TEST

START_TEST(test_remove_of_missing_name_succeeds)
{
        ck_assert_int_eq(nsbox_tree_remove(test_fd, "no-such-entry", &err), 0);
        ck_assert_ptr_null(err.msg);
        int src = open(P("src"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        UNIT_ASSERT_OK(nsbox_tree_remove(src, "missing", &err), &err);
        close(src);
}
END_TEST

START_TEST(test_remove_of_a_symlink_removes_only_the_link)
{
        mkd("target", 0755);
        put("target/keep", "k");
        lnk("target", "link");
        put("plain", "p");

        UNIT_ASSERT_OK(nsbox_tree_remove(test_fd, "link", &err), &err);
        UNIT_ASSERT_OK(nsbox_tree_remove(test_fd, "plain", &err), &err);

        ck_assert(!exists("link"));
        ck_assert(!exists("plain"));
        ASSERT_CONTENT("target/keep", "k");
}
END_TEST

START_TEST(test_remove_refuses_bad_names)
{
        static const char *const bad[] = { "src/x", "", ".", "..", "/tmp" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                ck_assert_int_eq(nsbox_tree_remove(test_fd, bad[i], &err), -EINVAL);
                UNIT_ASSERT_ERROR(&err, "not a file name");
        }
        ck_assert(exists("src"));
}
END_TEST

START_TEST(test_remove_deletes_trees_of_any_depth)
{
        /* Deeper than a walk keeps fds for: the bottom is moved up and removed from there. */
        make_deep("src", 3 * NSBOX_TREE_MAX_DEPTH + 10);
        UNIT_ASSERT_OK(nsbox_tree_remove(test_fd, "src", &err), &err);
        ck_assert(!exists("src"));
}
END_TEST

static int remove_with_mount_inside(char *msg, size_t size)
{
        int r = mount_tmpfs("src/mnt", msg, size);
        if (r < 0)
                return r;
        CHILD_CHECK(child_put("src/mnt/precious", "p"), msg, size, "put: %s", strerror(errno));
        nsbox_error e = { 0 };
        r = nsbox_tree_remove(test_fd, "src", &e);
        CHILD_CHECK(r == -EXDEV, msg, size, "remove gave %d (%s)", r, e.msg ? e.msg : "");
        CHILD_CHECK(e.msg && strstr(e.msg, "remove 'src/mnt'") && strstr(e.msg, "mount point"), msg, size,
                    "message: %s", e.msg);
        nsbox_error_clear(&e);
        CHILD_CHECK(exists("src/mnt/precious"), msg, size, "the mount's file was removed");

        /* Nor the mount point itself, named directly. */
        int src = open(P("src"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = nsbox_tree_remove(src, "mnt", &e);
        close(src);
        CHILD_CHECK(r == -EXDEV, msg, size, "remove mnt gave %d (%s)", r, e.msg ? e.msg : "");
        CHILD_CHECK(e.msg && strstr(e.msg, "remove 'mnt'"), msg, size, "message: %s", e.msg);
        nsbox_error_clear(&e);
        CHILD_CHECK(exists("src/mnt/precious"), msg, size, "the mount's file was removed");
        return 0;
}

START_TEST(test_remove_refuses_to_cross_a_mount)
{
        mkd("src/mnt", 0755);
        put("src/before", "b");
        RUN_CHILD(remove_with_mount_inside, true);
}
END_TEST

/* ---- chown ---- */

START_TEST(test_chown_gives_every_entry_the_owner)
{
        mkd("outside", 0755);
        put("outside/target", "t");
        struct stat target = lst("outside/target");
        mkd("src/dir", 0700);
        mkd("src/dir/deeper", 0755);
        put("src/dir/deeper/file", "f");
        put("src/setuid", "s");
        ck_assert_int_eq(chmod(P("src/setuid"), 04755), 0);
        lnk(P("outside/target"), "src/link");
        ck_assert_int_eq(mkfifo(P("src/dir/fifo"), 0600), 0);
        ck_assert_int_eq(mknod(P("src/wh"), S_IFCHR | 0600, makedev(0, 0)), 0);
        static const char *const all[] = { "src", "src/dir", "src/dir/deeper", "src/dir/deeper/file", "src/setuid",
                                           "src/link", "src/dir/fifo", "src/wh" };
        int src = open(P("src"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(src, 0);

        uid_t uid = geteuid() == 0 ? 1234 : geteuid();
        gid_t gid = geteuid() == 0 ? 1234 : getegid();
        UNIT_ASSERT_OK(nsbox_tree_chown(src, uid, gid, &err), &err);
        for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
                struct stat st = lst(all[i]);
                ck_assert_msg(st.st_uid == uid && st.st_gid == gid, "'%s' is %u:%u", all[i], (unsigned)st.st_uid,
                              (unsigned)st.st_gid);
        }
        ASSERT_MODE("src/setuid", 04755);
        struct stat after = lst("outside/target");
        ck_assert_uint_eq(after.st_uid, target.st_uid);
        ck_assert_uint_eq(after.st_gid, target.st_gid);

        if (geteuid() != 0) {
                /* Not root: giving files away is refused, naming where. */
                ck_assert_int_eq(nsbox_tree_chown(src, 1234, 1234, &err), -EPERM);
                UNIT_ASSERT_ERROR(&err, "chown '.' to 1234:1234", "Operation not permitted");
        }
        close(src);
}
END_TEST

static int chown_with_mount_inside(char *msg, size_t size)
{
        int r = mount_tmpfs("src/mnt", msg, size);
        if (r < 0)
                return r;
        nsbox_error e = { 0 };
        int src = open(P("src"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = nsbox_tree_chown(src, geteuid(), getegid(), &e);
        close(src);
        CHILD_CHECK(r == -EXDEV, msg, size, "chown gave %d (%s)", r, e.msg ? e.msg : "");
        CHILD_CHECK(e.msg && strstr(e.msg, "chown 'mnt'") && strstr(e.msg, "mount point"), msg, size, "message: %s",
                    e.msg);
        nsbox_error_clear(&e);
        return 0;
}

START_TEST(test_chown_refuses_to_cross_a_mount)
{
        mkd("src/mnt", 0755);
        RUN_CHILD(chown_with_mount_inside, true);
}
END_TEST

START_TEST(test_chown_refuses_trees_deeper_than_256)
{
        make_deep("src", NSBOX_TREE_MAX_DEPTH + 1);
        int src = open(P("src"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(nsbox_tree_chown(src, geteuid(), getegid(), &err), -ELOOP);
        UNIT_ASSERT_ERROR(&err, "more than 256 directories deep", "chown 'd/d/d/");
        close(src);
}
END_TEST

Suite *treecopy_suite(void)
{
        Suite *s = suite_create("treecopy");
        TCase *tc = unit_tcase(s, "tree_copy");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, test_setup, test_teardown);
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_copy_keeps_contents_and_holes);
        unit_add(tc, test_copy_keeps_modes_setuid_and_sticky);
        unit_add(tc, test_copy_of_unreadable_entries);
        unit_add(tc, test_copy_keeps_symlinks_without_following_them);
        unit_add(tc, test_copy_keeps_hard_links);
        unit_add(tc, test_copy_keeps_whiteouts_fifos_and_sockets);
        unit_add(tc, test_copy_refuses_device_nodes);
        unit_add(tc, test_copy_keeps_xattrs);
        unit_add(tc, test_copy_keeps_times_to_the_nanosecond);
        unit_add(tc, test_copy_keeps_owners);
        unit_add(tc, test_copy_of_files_owned_by_others_fails_without_root);
        unit_add(tc, test_copy_keeps_empty_dirs_and_odd_names);
        unit_add(tc, test_copy_stats_count_every_kind);
        unit_add(tc, test_copy_over_max_bytes_fails_and_leaves_nothing);
        unit_add(tc, test_copy_refuses_bad_arguments);
        unit_add(tc, test_copy_refuses_trees_deeper_than_256);
        unit_add(tc, test_copy_refuses_destination_inside_source);
        unit_add(tc, test_copy_refuses_a_mount_inside_the_source);
        unit_add(tc, test_copy_from_a_tmpfs_upper_to_disk);

        tc = unit_tcase(s, "tree_remove");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, test_setup, test_teardown);
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_remove_deletes_locked_dirs_and_keeps_symlink_targets);
        unit_add(tc, test_remove_of_missing_name_succeeds);
        unit_add(tc, test_remove_of_a_symlink_removes_only_the_link);
        unit_add(tc, test_remove_refuses_bad_names);
        unit_add(tc, test_remove_deletes_trees_of_any_depth);
        unit_add(tc, test_remove_refuses_to_cross_a_mount);

        tc = unit_tcase(s, "tree_chown");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, test_setup, test_teardown);
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_chown_gives_every_entry_the_owner);
        unit_add(tc, test_chown_refuses_to_cross_a_mount);
        unit_add(tc, test_chown_refuses_trees_deeper_than_256);
        return s;
}
