/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file tools as an agent meets them: results and error codes of read, write, edit, list,
 * stat, mkdir, remove and rename; bad parameters; and "..", absolute paths and planted symlinks
 * that must stay inside the root.  Each test gets a directory holding root/ (the sandbox's "/")
 * and outside/ (a host directory next to it that must never change).  Also base64 and paths. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/xattr.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../runtime/base64.h"
#include "../../tools/path.h"
#include "../../tools/tool.h"
#include "tool_fixture.h"
#include "unit.h"

/* ---- fixture (tool_fixture.h) ---- */

static void base_setup(void) { fixture_base_setup("files"); }
static void test_setup(void) { fixture_test_setup(); }
/* The same tests with tool_open's user-space resolver (the one used without openat2). */
static void fallback_setup(void)
{
        fixture_test_setup();
        tool_path_force_fallback(true);
}
static void fallback_teardown(void)
{
        tool_path_force_fallback(false);
        test_teardown();
}

static void put_host(const char *host, const char *content, mode_t mode)
{
        int fd = open(host, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        ck_assert_msg(fd >= 0, "create '%s': %s", host, strerror(errno));
        ck_assert_int_eq(write_full(fd, content, strlen(content)), 0);
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
}

static void put(const char *path, const char *content)
{
        put_host(H(path), content, 0644);
}

static void mkd(const char *path)
{
        ck_assert_msg(mkdir(H(path), 0755) == 0, "mkdir '%s': %s", path, strerror(errno));
}

static void lnk(const char *target, const char *path)
{
        ck_assert_msg(symlink(target, H(path)) == 0, "symlink '%s': %s", path, strerror(errno));
}

/* A host file's content (NUL-terminated), or NULL when it cannot be read. */
static char *slurp(const char *host)
{
        char *s = NULL;
        size_t n;
        if (read_file_at(AT_FDCWD, host, O_NOFOLLOW, 64u << 20, &s, &n) < 0)
                return NULL;
        return s;
}

#define ASSERT_CONTENT(host, want)                                                        \
        do {                                                                              \
                char *_s = slurp(host);                                                   \
                ck_assert_msg(_s != NULL, "'%s' cannot be read", (host));                 \
                ck_assert_msg(!strcmp(_s, (want)), "'%s' holds '%s', not '%s'", (host), _s, (want)); \
                free(_s);                                                                 \
        } while (0)

static bool exists_host(const char *host)
{
        struct stat st;
        return lstat(host, &st) == 0;
}

static mode_t mode_of(const char *host)
{
        struct stat st;
        ck_assert_msg(lstat(host, &st) == 0, "stat '%s': %s", host, strerror(errno));
        return st.st_mode & 07777;
}

/* Call a tool with params (owned) and an optional payload; the result lands in res, an error in err. */
static int call_with(tool_fn fn, json_t *params, const void *data, size_t len)
{
        ck_assert_msg(params != NULL, "bad json_pack format in the test");
        json_decref(res);
        res = NULL;
        err = (tool_error){ 0 };
        out.payload.len = 0;
        tool_in in = { .params = params, .payload = data, .payload_len = len };
        int r = fn(&ctx, &in, &out, &err);
        json_decref(params);
        res = steal_pointer(&out.result);
        if (r == 0) {
                ck_assert_msg(json_is_object(res), "success without a result object");
        } else {
                ck_assert_int_eq(r, -1);
                ck_assert_msg(res == NULL, "failure with a result");
                ck_assert_msg(err.message[0], "failure without a message");
                UNIT_ASSERT_ONE_LINE(err.message);
        }
        return r;
}

#define CALL(fn, ...) call_with((fn), json_pack(__VA_ARGS__), NULL, 0)

#define ASSERT_OK(fn, ...)                                                                      \
        do {                                                                                    \
                int _r = CALL(fn, __VA_ARGS__);                                                 \
                ck_assert_msg(_r == 0, "%s failed: %s: %s", #fn, tool_code_name(err.code), err.message); \
        } while (0)

/* The call fails with code and a message containing needle. */
#define ASSERT_FAILS(want, needle, fn, ...)                                                      \
        do {                                                                                     \
                int _r = CALL(fn, __VA_ARGS__);                                                  \
                ck_assert_msg(_r == -1, "%s succeeded", #fn);                                    \
                ck_assert_msg(err.code == (want), "%s gave %s (%s), expected %s", #fn,           \
                              tool_code_name(err.code), err.message, tool_code_name(want));      \
                UNIT_ASSERT_CONTAINS(err.message, needle);                                       \
        } while (0)

static json_t *field(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        ck_assert_msg(v != NULL, "no '%s' in the result", key);
        return v;
}

static const char *S(json_t *o, const char *key)
{
        json_t *v = field(o, key);
        ck_assert_msg(json_is_string(v), "'%s' is not a string", key);
        return json_string_value(v);
}

static long long I(json_t *o, const char *key)
{
        json_t *v = field(o, key);
        ck_assert_msg(json_is_integer(v), "'%s' is not an integer", key);
        return json_integer_value(v);
}

static bool B(json_t *o, const char *key)
{
        json_t *v = field(o, key);
        ck_assert_msg(json_is_boolean(v), "'%s' is not a boolean", key);
        return json_is_true(v);
}

/* The outside directory still holds exactly the one file the test put there. */
static void assert_outside_untouched(void)
{
        char host[PATH_MAX];
        snprintf(host, sizeof(host), "%s/secret", outside_dir);
        ASSERT_CONTENT(host, "host secret\n");
        int fd = open(outside_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        char **names = NULL;
        ck_assert_int_eq(tool_read_dir(fd, &names), 0);
        close(fd);
        ck_assert_uint_eq(strv_length(names), 1);
        strv_free(names);
}

static void put_outside_secret(void)
{
        char host[PATH_MAX];
        snprintf(host, sizeof(host), "%s/secret", outside_dir);
        put_host(host, "host secret\n", 0644);
}

/* ---- base64 ---- */

static char *encode(const void *data, size_t n)
{
        char *s = malloc(b64_encoded_len(n) + 1);
        ck_assert_ptr_nonnull(s);
        b64_encode(data, n, s);
        return s;
}

START_TEST(test_base64_encodes_rfc4648_vectors)
{
        static const char *const vectors[][2] = {
                { "", "" },         { "f", "Zg==" },         { "fo", "Zm8=" },         { "foo", "Zm9v" },
                { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(vectors); i++) {
                char *s = encode(vectors[i][0], strlen(vectors[i][0]));
                ck_assert_str_eq(s, vectors[i][1]);
                ck_assert_uint_eq(strlen(s), b64_encoded_len(strlen(vectors[i][0])));
                free(s);
                strbuf sb;
                sb_init(&sb, 0);
                ck_assert_int_eq(b64_decode(vectors[i][1], strlen(vectors[i][1]), &sb), 0);
                ck_assert_uint_eq(sb.len, strlen(vectors[i][0]));
                ck_assert(sb.len == 0 || !memcmp(sb.buf, vectors[i][0], sb.len));
                sb_release(&sb);
        }
}
END_TEST

START_TEST(test_base64_round_trips_every_byte_and_length)
{
        unsigned char data[1000];
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char)(i * 131 + 7);
        for (size_t n = 0; n <= sizeof(data); n += (n < 20 ? 1 : 97)) {
                char *s = encode(data, n);
                strbuf sb;
                sb_init(&sb, 0);
                ck_assert_int_eq(sb_append(&sb, "prefix", 6), 0);
                ck_assert_int_eq(b64_decode(s, strlen(s), &sb), 0);
                ck_assert_uint_eq(sb.len, 6 + n);
                ck_assert(!memcmp(sb.buf, "prefix", 6) && !memcmp(sb.buf + 6, data, n));
                sb_release(&sb);
                free(s);
        }
}
END_TEST

START_TEST(test_base64_decodes_megabytes_across_slices)
{
        size_t n = (3u << 20) + 2;
        unsigned char *data = malloc(n);
        ck_assert_ptr_nonnull(data);
        for (size_t i = 0; i < n; i++)
                data[i] = (unsigned char)(i ^ (i >> 8));
        char *s = encode(data, n);
        strbuf sb;
        sb_init(&sb, 0);
        ck_assert_int_eq(b64_decode(s, strlen(s), &sb), 0);
        ck_assert_uint_eq(sb.len, n);
        ck_assert(!memcmp(sb.buf, data, n));
        sb_release(&sb);
        free(s);
        free(data);
}
END_TEST

START_TEST(test_base64_refuses_malformed_input_and_leaves_output_alone)
{
        static const char *const bad[] = { "Zg=",  "Zm9v\n", "Zm 9", "Zm9!", "Z===", "====", "Zg==Zm8=",
                                           "Z=g=", "Zm9vY", "Zm-_", "Zg=a" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                strbuf sb;
                sb_init(&sb, 0);
                ck_assert_int_eq(sb_append(&sb, "kept", 4), 0);
                ck_assert_msg(b64_decode(bad[i], strlen(bad[i]), &sb) == -EINVAL, "'%s' was accepted", bad[i]);
                ck_assert_uint_eq(sb.len, 4);
                ck_assert_str_eq(sb.buf, "kept");
                sb_release(&sb);
        }
}
END_TEST

START_TEST(test_base64_decode_past_the_limit_is_e2big)
{
        strbuf sb;
        sb_init(&sb, 5);
        ck_assert_int_eq(sb_append(&sb, "ab", 2), 0);
        ck_assert_int_eq(b64_decode("Zm9vYg==", 8, &sb), -E2BIG); /* 4 more bytes: 6 > 5 */
        ck_assert_uint_eq(sb.len, 2);
        ck_assert_int_eq(b64_decode("Zm8=", 4, &sb), 0); /* 2 more: 4 <= 5 */
        ck_assert_uint_eq(sb.len, 4);
        sb_release(&sb);
}
END_TEST

/* ---- paths ---- */

#define ASSERT_NORMALIZED(cwd_, path, want)                                                   \
        do {                                                                                  \
                tool_ctx _c = { .root_fd = -1, .cwd = (cwd_) };                               \
                char *_abs = NULL;                                                            \
                tool_error _e = { 0 };                                                        \
                ck_assert_msg(tool_path_normalize(&_c, (path), &_abs, &_e) == 0, "'%s': %s", (path), _e.message); \
                ck_assert_msg(!strcmp(_abs, (want)), "'%s' from '%s' gave '%s', not '%s'", (path), (cwd_), _abs, (want)); \
                free(_abs);                                                                   \
        } while (0)

START_TEST(test_path_normalize_joins_cwd_and_collapses_dots)
{
        ASSERT_NORMALIZED("/w", "a/../b", "/w/b");
        ASSERT_NORMALIZED("/w", "a.txt", "/w/a.txt");
        ASSERT_NORMALIZED("/w", "./a//b/./c/", "/w/a/b/c");
        ASSERT_NORMALIZED("/w", "/etc/passwd", "/etc/passwd");
        ASSERT_NORMALIZED("/w", "../../../../etc/shadow", "/etc/shadow");
        ASSERT_NORMALIZED("/w", "..", "/");
        ASSERT_NORMALIZED("/", "/..", "/");
        ASSERT_NORMALIZED("/", "//", "/");
        ASSERT_NORMALIZED("/w/x/", ".", "/w/x");
        ASSERT_NORMALIZED("/w", "...", "/w/...");
        ASSERT_NORMALIZED("/w", "a/.hidden/..x", "/w/a/.hidden/..x");
}
END_TEST

START_TEST(test_path_empty_too_long_or_with_nul_is_invalid_path)
{
        tool_error e = { 0 };
        char *abs = NULL;
        ck_assert_int_eq(tool_path_normalize(&ctx, "", &abs, &e), -1);
        ck_assert_int_eq(e.code, TOOL_INVALID_PATH);
        char *longp = malloc(5000);
        ck_assert_ptr_nonnull(longp);
        memset(longp, 'a', 4999);
        longp[4999] = '\0';
        for (int i = 100; i < 4999; i += 100)
                longp[i] = '/';
        ck_assert_int_eq(tool_path_normalize(&ctx, longp, &abs, &e), -1);
        ck_assert_int_eq(e.code, TOOL_INVALID_PATH);
        UNIT_ASSERT_CONTAINS(e.message, "longer than 4096");
        ck_assert_ptr_null(abs);
        /* a long path that collapses is fine */
        for (int i = 0; i < 999; i++)
                memcpy(longp + 5 * i, "a/../", 5);
        strcpy(longp + 4995, "x");
        ck_assert_int_eq(tool_path_normalize(&ctx, longp, &abs, &e), 0);
        ck_assert_str_eq(abs, "/x");
        free(abs);
        free(longp);

        ASSERT_FAILS(TOOL_INVALID_PATH, "'path' is empty", tool_read_file, "{s:s}", "path", "");
        ASSERT_FAILS(TOOL_INVALID_PATH, "NUL", tool_read_file, "{s:s%}", "path", "a\0b", (size_t)3);
}
END_TEST

START_TEST(test_path_root_has_no_parent)
{
        int fd = -1;
        const char *name = NULL;
        tool_error e = { 0 };
        ck_assert_int_eq(tool_open_parent(&ctx, "/", &fd, &name, &e), -1);
        ck_assert_int_eq(e.code, TOOL_INVALID_PATH);
        UNIT_ASSERT_CONTAINS(e.message, "the root has no parent");
        mkd("d");
        ck_assert_int_eq(tool_open_parent(&ctx, "/d/x", &fd, &name, &e), 0);
        ck_assert_str_eq(name, "x");
        struct stat st, want;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert_int_eq(stat(H("d"), &want), 0);
        ck_assert(st.st_ino == want.st_ino);
        close(fd);
}
END_TEST

START_TEST(test_path_open_resolves_dotdot_and_absolute_links_inside_root)
{
        mkd("etc");
        put("etc/hostname", "inside\n");
        lnk("/etc", "hostetc");
        lnk("../../../../../etc/hostname", "rel");
        const char *paths[] = { "/../../etc/hostname", "/hostetc/hostname", "/rel" };
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
                int fd = -1;
                tool_error e = { 0 };
                ck_assert_msg(tool_open(&ctx, paths[i], O_RDONLY, 0, &fd, &e) == 0, "%s: %s", paths[i], e.message);
                char buf[32] = { 0 };
                ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
                ck_assert_str_eq(buf, "inside\n");
                close(fd);
        }
}
END_TEST

/* tool_open(abs, flags) fails with errno want (through the error's code and message). */
#define ASSERT_OPEN_FAILS(abs, flags, want)                                                          \
        do {                                                                                         \
                int _fd = -1;                                                                        \
                tool_error _e = { 0 };                                                               \
                int _r = tool_open(&ctx, (abs), (flags), 0644, &_fd, &_e);                           \
                if (_r == 0)                                                                         \
                        close(_fd);                                                                  \
                ck_assert_msg(_r == -1, "open '%s' succeeded", (abs));                               \
                UNIT_ASSERT_CONTAINS(_e.message, strerror(want));                                    \
        } while (0)

/* tool_open(abs, O_RDONLY) succeeds and reads want (a macro: a failure names the test). */
#define ASSERT_READS(abs, want)                                                                      \
        do {                                                                                         \
                char _buf[64] = { 0 };                                                               \
                int _fd = -1;                                                                        \
                tool_error _e = { 0 };                                                               \
                ck_assert_msg(tool_open(&ctx, (abs), O_RDONLY, 0, &_fd, &_e) == 0, "open '%s': %s", (abs), _e.message); \
                ssize_t _n = read(_fd, _buf, sizeof(_buf) - 1);                                      \
                close(_fd);                                                                          \
                ck_assert_msg(_n >= 0 && !strcmp(_buf, (want)), "'%s' read '%s', not '%s'", (abs), _buf, (want)); \
        } while (0)

START_TEST(test_path_open_counts_links_as_the_kernel_does)
{
        /* 40 links in a row are followed, the 41st is ELOOP: MAXSYMLINKS on both resolvers */
        put("file", "end\n");
        char name[16], target[16];
        for (int i = 1; i <= 41; i++) {
                snprintf(name, sizeof(name), "l%d", i);
                snprintf(target, sizeof(target), i == 41 ? "file" : "l%d", i + 1);
                lnk(target, name);
        }
        ASSERT_READS("/l2", "end\n");
        ASSERT_OPEN_FAILS("/l1", O_RDONLY, ELOOP);
        lnk("self", "self");
        lnk("b", "a");
        lnk("a", "b");
        ASSERT_OPEN_FAILS("/self", O_RDONLY, ELOOP);
        ASSERT_OPEN_FAILS("/a/x", O_RDONLY, ELOOP);
        ASSERT_FAILS(TOOL_INVALID_PATH, "Too many levels of symbolic links", tool_read_file, "{s:s}", "path", "/a");
}
END_TEST

START_TEST(test_path_open_deep_dotdot_in_links_stops_at_the_root)
{
        mkd("etc");
        put("etc/hostname", "inside\n");
        put_outside_secret();
        /* 60 levels down, a link climbing 100 levels, and one naming the outside directory */
        char rel[512] = "";
        for (int i = 0; i < 60; i++) {
                strcat(rel, i ? "/d" : "d");
                mkd(rel);
        }
        char up[512] = "";
        for (int i = 0; i < 100; i++)
                strcat(up, "../");
        strcat(up, "etc/hostname");
        char at[600];
        snprintf(at, sizeof(at), "%s/up", rel);
        lnk(up, at);
        snprintf(at, sizeof(at), "/%s/up", rel);
        ASSERT_READS(at, "inside\n");
        snprintf(at, sizeof(at), "%s/out", rel);
        lnk("../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../outside/secret", at);
        snprintf(at, sizeof(at), "/%s/out", rel);
        ASSERT_OPEN_FAILS(at, O_RDONLY, ENOENT);
        lnk(outside_dir, "abs-out");
        ASSERT_OPEN_FAILS("/abs-out/secret", O_RDONLY, ENOENT);
        /* ".." out of a link's directory, then down again */
        lnk("d/d/../../etc/../etc/hostname", "zigzag");
        assert_outside_untouched();
        ASSERT_READS("/zigzag", "inside\n");
}
END_TEST

START_TEST(test_path_open_keeps_the_flags_of_the_last_component)
{
        mkd("d");
        put("f", "file\n");
        lnk("f", "lf");
        lnk("d/", "ld");
        lnk("f/", "lf-slash");
        lnk("/made", "dangling");
        int fd = -1;
        tool_error e = { 0 };
        /* O_NOFOLLOW: a link is ELOOP, or the link itself with O_PATH */
        ASSERT_OPEN_FAILS("/lf", O_RDONLY | O_NOFOLLOW, ELOOP);
        ck_assert_int_eq(tool_open(&ctx, "/lf", O_PATH | O_NOFOLLOW, 0, &fd, &e), 0);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        close(fd);
        /* O_DIRECTORY, and a link's trailing slash that asks for a directory */
        ASSERT_OPEN_FAILS("/f", O_RDONLY | O_DIRECTORY, ENOTDIR);
        ASSERT_OPEN_FAILS("/lf-slash", O_RDONLY, ENOTDIR);
        ck_assert_int_eq(tool_open(&ctx, "/ld", O_RDONLY | O_DIRECTORY, 0, &fd, &e), 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        struct stat want;
        ck_assert_int_eq(stat(H("d"), &want), 0);
        ck_assert(st.st_ino == want.st_ino);
        close(fd);
        /* O_CREAT|O_EXCL never follows a link and refuses what exists */
        ASSERT_OPEN_FAILS("/dangling", O_WRONLY | O_CREAT | O_EXCL, EEXIST);
        ASSERT_OPEN_FAILS("/f", O_WRONLY | O_CREAT | O_EXCL, EEXIST);
        ck_assert(!exists_host(H("made")));
        ck_assert_int_eq(tool_open(&ctx, "/new", O_WRONLY | O_CREAT | O_EXCL, 0600, &fd, &e), 0);
        close(fd);
        ck_assert_uint_eq(mode_of(H("new")) & 0077, 0);
        /* O_CREAT follows a dangling link and makes its target, inside the root */
        ck_assert_int_eq(tool_open(&ctx, "/dangling", O_WRONLY | O_CREAT, 0644, &fd, &e), 0);
        close(fd);
        ck_assert(exists_host(H("made")));
        ASSERT_OPEN_FAILS("/d", O_WRONLY | O_CREAT, EISDIR);
        ASSERT_OPEN_FAILS("/missing/x", O_RDONLY, ENOENT);
        ASSERT_OPEN_FAILS("/f/x", O_RDONLY, ENOTDIR);
        /* the root itself */
        ck_assert_int_eq(tool_open(&ctx, "/", O_RDONLY | O_DIRECTORY, 0, &fd, &e), 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert_int_eq(stat(root_dir, &want), 0);
        ck_assert(st.st_ino == want.st_ino);
        close(fd);
}
END_TEST

/* With the host's "/" as the root, /proc's magic links (fd/N, cwd, root, exe) are refused as
 * openat2's RESOLVE_NO_MAGICLINKS refuses them, directly or through a planted link; /proc's plain
 * links (self, mounts) are followed. */
START_TEST(test_path_open_refuses_proc_magic_links)
{
        struct statfs sfs;
        ck_assert_msg(statfs("/proc", &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC, "this test needs /proc mounted");
        char planted[PATH_MAX];
        snprintf(planted, sizeof(planted), "%s/to-proc-root", root_dir);
        ck_assert_int_eq(symlink("/proc/self/root/etc", planted), 0);
        tool_ctx host = { .root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), .root_path = "/", .cwd = "/" };
        ck_assert_int_ge(host.root_fd, 0);
        const char *refused[] = { "/proc/self/root/etc/hostname", "/proc/self/cwd", "/proc/self/exe",
                                  "/proc/self/fd/0", "/proc/thread-self/root", planted };
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
                int fd = -1;
                tool_error e = { 0 };
                int r = tool_open(&host, refused[i], O_RDONLY, 0, &fd, &e);
                if (r == 0)
                        close(fd);
                ck_assert_msg(r == -1, "'%s' was opened through a magic link", refused[i]);
                ck_assert_msg(e.code == TOOL_INVALID_PATH && strstr(e.message, strerror(ELOOP)), "'%s': %s (%s)",
                              refused[i], e.message, tool_code_name(e.code));
        }
        /* plain links are followed: into this process's own entries, which are then refused
         * (the agent's layout, fds and environment are no tool's to show) */
        const char *plain[] = { "/proc/self/status", "/proc/mounts", "/proc/thread-self/stat", "/proc/self" };
        for (size_t i = 0; i < ARRAY_SIZE(plain); i++) {
                int fd = -1;
                tool_error e = { 0 };
                int r = tool_open(&host, plain[i], O_RDONLY, 0, &fd, &e);
                if (r == 0)
                        close(fd);
                ck_assert_msg(r == -1 && e.code == TOOL_PERMISSION_DENIED && strstr(e.message, "the agent's own /proc entry"),
                              "'%s': %s (%s)", plain[i], r == 0 ? "opened" : e.message, tool_code_name(e.code));
        }
        char other[64];
        snprintf(other, sizeof(other), "/proc/%d/status", (int)getppid());
        const char *others[] = { other, "/proc/cpuinfo", "/proc" };
        for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
                int fd = -1;
                tool_error e = { 0 };
                ck_assert_msg(tool_open(&host, others[i], O_RDONLY, 0, &fd, &e) == 0, "'%s': %s", others[i], e.message);
                close(fd);
        }
        /* O_NOFOLLOW opens the magic link itself, as with openat2 */
        int fd = -1;
        tool_error e = { 0 };
        snprintf(other, sizeof(other), "/proc/%d/exe", (int)getppid());
        ck_assert_msg(tool_open(&host, other, O_PATH | O_NOFOLLOW, 0, &fd, &e) == 0, "'%s': %s", other, e.message);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        close(fd);
        close(host.root_fd);
}
END_TEST

struct swapper {
        const char *a, *b;
        bool stop;
};

static void *swap_loop(void *arg)
{
        struct swapper *s = arg;
        while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
                renameat2(AT_FDCWD, s->a, AT_FDCWD, s->b, RENAME_EXCHANGE);
                /* under valgrind, one thread runs at a time and renameat2 does not hand over:
                 * without a yield this loop can keep the other thread from ever running */
                sched_yield();
        }
        return NULL;
}

/* A directory swapped back and forth with a link climbing out of the root while tool_open runs:
 * each open finds the file inside or fails, never the host file the link names. */
START_TEST(test_path_open_races_with_a_link_swap_stay_inside)
{
        put_outside_secret();
        mkd("d");
        put("d/secret", "inside\n");
        lnk("../outside", "x");
        struct swapper s = { .a = strdup(H("d")), .b = strdup(H("x")) };
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, swap_loop, &s), 0);
        unsigned opened = 0, host_seen = 0;
        for (int i = 0; i < 2000; i++) {
                int fd = -1;
                tool_error e = { 0 };
                if (tool_open(&ctx, i % 2 ? "/d/secret" : "/x/secret", O_RDONLY, 0, &fd, &e) < 0)
                        continue;
                char buf[32] = { 0 };
                if (read(fd, buf, sizeof(buf) - 1) > 0 && strstr(buf, "host"))
                        host_seen++;
                opened++;
                close(fd);
        }
        __atomic_store_n(&s.stop, true, __ATOMIC_RELAXED);
        pthread_join(t, NULL);
        free((char *)s.a);
        free((char *)s.b);
        assert_outside_untouched();
        ck_assert_msg(host_seen == 0, "%u opens of %u read the host's file", host_seen, opened);
        ck_assert_msg(opened > 0, "no open succeeded while the link was swapped");
}
END_TEST

/* Decided once per process: the fallback is in use exactly where openat2 is missing (valgrind
 * 3.19, kernels before 5.6) unless a test forces it. */
START_TEST(test_path_fallback_is_used_only_without_openat2)
{
        int fd = -1;
        tool_error e = { 0 };
        ck_assert_int_eq(tool_open(&ctx, "/", O_PATH | O_DIRECTORY, 0, &fd, &e), 0);
        close(fd);
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
        long r = syscall(SYS_openat2, ctx.root_fd, ".", &how, sizeof(how));
        bool missing = r < 0 && errno == ENOSYS;
        if (r >= 0)
                close((int)r);
        ck_assert_msg(tool_path_uses_fallback() == missing, "openat2 %s, fallback %s", missing ? "missing" : "works",
                      tool_path_uses_fallback() ? "used" : "not used");
        tool_path_force_fallback(true);
        ck_assert(tool_path_uses_fallback());
        tool_path_force_fallback(false);
        ck_assert(tool_path_uses_fallback() == missing);
}
END_TEST

/* ---- common ---- */

START_TEST(test_errno_maps_to_protocol_codes)
{
        static const struct { int errnum; tool_code code; const char *name; } map[] = {
                { ENOENT, TOOL_FILE_NOT_FOUND, "file_not_found" },   { EACCES, TOOL_PERMISSION_DENIED, "permission_denied" },
                { EROFS, TOOL_PERMISSION_DENIED, "permission_denied" }, { EISDIR, TOOL_IS_DIRECTORY, "is_directory" },
                { ENOTDIR, TOOL_NOT_A_DIRECTORY, "not_a_directory" }, { ELOOP, TOOL_INVALID_PATH, "invalid_path" },
                { ENOTEMPTY, TOOL_CONFLICT, "conflict" },            { ENOSPC, TOOL_TOO_LARGE, "too_large" },
                { EINVAL, TOOL_INVALID_ARGUMENT, "invalid_argument" }, { EIO, TOOL_INTERNAL, "internal" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
                tool_error e = { 0 };
                ck_assert_int_eq(tool_fail_errno(&e, map[i].errnum, "open '%s'", "/a"), -1);
                ck_assert_int_eq(e.code, map[i].code);
                ck_assert_str_eq(tool_code_name(e.code), map[i].name);
                UNIT_ASSERT_CONTAINS(e.message, "open '/a': ");
                UNIT_ASSERT_CONTAINS(e.message, strerror(map[i].errnum));
        }
        ck_assert_str_eq(tool_code_name(TOOL_TIMEOUT), "timeout");
        ck_assert_str_eq(tool_code_name(TOOL_NOT_FOUND), "not_found");
}
END_TEST

START_TEST(test_error_messages_stay_one_line_and_utf8)
{
        tool_error e = { 0 };
        tool_fail(&e, TOOL_INVALID_PATH, "bad '%s'", "a\nb\x1b[31m\xff");
        ck_assert_str_eq(e.message, "bad 'a?b?[31m?'");
        tool_fail_wrap(&e, "read_file");
        ck_assert_str_eq(e.message, "read_file: bad 'a?b?[31m?'");
        ck_assert_int_eq(e.code, TOOL_INVALID_PATH);
        char big[2000];
        memset(big, 'x', sizeof(big));
        memcpy(big + 500, "\xc3\xa9\xc3\xa9\xc3\xa9", 6);
        big[sizeof(big) - 1] = '\0';
        tool_fail(&e, TOOL_INTERNAL, "%s", big);
        json_t *j = json_string(e.message);
        ck_assert_msg(j != NULL, "a cut message is not valid UTF-8");
        json_decref(j);
}
END_TEST

START_TEST(test_json_text_replaces_invalid_utf8_and_nul)
{
        bool lossy = false;
        json_t *j = nsbox_json_text("caf\xc3\xa9 \xe2\x82\xac", 9, &lossy);
        ck_assert_str_eq(json_string_value(j), "caf\xc3\xa9 \xe2\x82\xac");
        ck_assert(!lossy);
        json_decref(j);
        static const char bad[] = "a\xff" "b\0c\xc3" "d\xed\xa0\x80" "e\xc0\xaf";
        j = nsbox_json_text(bad, sizeof(bad) - 1, &lossy);
        ck_assert(lossy);
        ck_assert_str_eq(json_string_value(j), "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd"
                                              "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "e\xef\xbf\xbd\xef\xbf\xbd");
        json_decref(j);
}
END_TEST

START_TEST(test_params_of_the_wrong_type_are_invalid_argument)
{
        put("a.txt", "x\n");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "read_file: 'path' is required", tool_read_file, "{}");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'path' must be a string", tool_read_file, "{s:i}", "path", 3);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'offset' must be a non-negative integer", tool_read_file, "{s:s, s:i}",
                     "path", "a.txt", "offset", -1);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'offset' must be a non-negative integer", tool_read_file, "{s:s, s:s}",
                     "path", "a.txt", "offset", "2");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'offset' must be a non-negative integer", tool_read_file, "{s:s, s:f}",
                     "path", "a.txt", "offset", 1.0);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'limit' must be at least 1", tool_read_file, "{s:s, s:i}", "path",
                     "a.txt", "limit", 0);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'limit' must be at most 100000", tool_read_file, "{s:s, s:i}", "path",
                     "a.txt", "limit", 100001);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'encoding'", tool_read_file, "{s:s, s:s}", "path", "a.txt", "encoding",
                     "hex");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'byte_limit'", tool_read_file, "{s:s, s:s}", "path", "a.txt",
                     "byte_limit", "10");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'follow' must be a boolean", tool_stat, "{s:s, s:i}", "path", "a.txt",
                     "follow", 1);
        /* unknown keys are ignored; null means the default */
        ASSERT_OK(tool_read_file, "{s:s, s:i, s:n}", "path", "a.txt", "colour", 3, "limit");
        ck_assert_str_eq(S(res, "content"), "x\n");
}
END_TEST

/* ---- read_file ---- */

START_TEST(test_read_file_returns_lines_with_counts)
{
        put("a.txt", "one\ntwo\nthree\n");
        ASSERT_OK(tool_read_file, "{s:s}", "path", "a.txt");
        ck_assert_str_eq(S(res, "path"), "/a.txt");
        ck_assert_str_eq(S(res, "content"), "one\ntwo\nthree\n");
        ck_assert_str_eq(S(res, "encoding"), "text");
        ck_assert_int_eq(I(res, "total_lines"), 3);
        ck_assert_int_eq(I(res, "start_line"), 0);
        ck_assert_int_eq(I(res, "end_line"), 3);
        ck_assert(json_is_null(field(res, "next_offset")));
        ck_assert_int_eq(I(res, "size"), 14);
        ck_assert(!B(res, "truncated"));
        ck_assert(!B(res, "lossy"));
}
END_TEST

START_TEST(test_read_file_offset_and_limit_page_through_lines)
{
        put("p.txt", "a\nb\nc\nd\ne");
        ASSERT_OK(tool_read_file, "{s:s, s:i, s:i}", "path", "/p.txt", "offset", 1, "limit", 2);
        ck_assert_str_eq(S(res, "content"), "b\nc\n");
        ck_assert_int_eq(I(res, "start_line"), 1);
        ck_assert_int_eq(I(res, "end_line"), 3);
        ck_assert_int_eq(I(res, "next_offset"), 3);
        ck_assert_int_eq(I(res, "total_lines"), 5);

        ASSERT_OK(tool_read_file, "{s:s, s:i, s:i}", "path", "/p.txt", "offset", 3, "limit", 2);
        ck_assert_str_eq(S(res, "content"), "d\ne");
        ck_assert_int_eq(I(res, "end_line"), 5);
        ck_assert(json_is_null(field(res, "next_offset")));

        ASSERT_OK(tool_read_file, "{s:s, s:i}", "path", "/p.txt", "offset", 10);
        ck_assert_str_eq(S(res, "content"), "");
        ck_assert_int_eq(I(res, "start_line"), 10);
        ck_assert_int_eq(I(res, "end_line"), 10);
        ck_assert(json_is_null(field(res, "next_offset")));
}
END_TEST

START_TEST(test_read_file_counts_lines_of_empty_and_unterminated_files)
{
        put("empty", "");
        ASSERT_OK(tool_read_file, "{s:s}", "path", "empty");
        ck_assert_int_eq(I(res, "total_lines"), 0);
        ck_assert_str_eq(S(res, "content"), "");
        put("one", "no newline");
        ASSERT_OK(tool_read_file, "{s:s}", "path", "one");
        ck_assert_int_eq(I(res, "total_lines"), 1);
        ck_assert_str_eq(S(res, "content"), "no newline");
        put("blank", "\n\n");
        ASSERT_OK(tool_read_file, "{s:s}", "path", "blank");
        ck_assert_int_eq(I(res, "total_lines"), 2);
        ck_assert_str_eq(S(res, "content"), "\n\n");
}
END_TEST

START_TEST(test_read_file_streams_a_large_file_and_counts_every_line)
{
        int fd = open(H("big"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        FILE *f = fdopen(fd, "w");
        for (int i = 0; i < 200000; i++)
                fprintf(f, "line %d\n", i);
        fclose(f);
        ASSERT_OK(tool_read_file, "{s:s, s:i, s:i}", "path", "big", "offset", 150000, "limit", 3);
        ck_assert_str_eq(S(res, "content"), "line 150000\nline 150001\nline 150002\n");
        ck_assert_int_eq(I(res, "total_lines"), 200000);
        ck_assert_int_eq(I(res, "next_offset"), 150003);
        ASSERT_OK(tool_read_file, "{s:s}", "path", "big");
        ck_assert_int_eq(I(res, "end_line"), 2000);
        /* "line N\n" for N < 2000: 6 bytes and the digits */
        ck_assert_uint_eq(strlen(S(res, "content")), 2000 * 6 + 10 * 1 + 90 * 2 + 900 * 3 + 1000 * 4);
}
END_TEST

START_TEST(test_read_file_cuts_long_lines_on_a_character_boundary)
{
        /* 1999 bytes, then a 2-byte "é" that would straddle byte 2000 */
        char line[4000];
        memset(line, 'a', 1999);
        memcpy(line + 1999, "\xc3\xa9zzz\nshort\n", 12);
        line[1999 + 12] = '\0';
        put("long", line);
        ASSERT_OK(tool_read_file, "{s:s}", "path", "long");
        const char *c = S(res, "content");
        ck_assert_uint_eq(strlen(c), 1999 + 1 + 6);
        ck_assert(c[1998] == 'a' && c[1999] == '\n');
        ck_assert_str_eq(c + 2000, "short\n");
        ck_assert(B(res, "truncated"));
        ck_assert(!B(res, "lossy"));
        ck_assert_int_eq(I(res, "total_lines"), 2);

        memset(line, 'b', 2000);
        strcpy(line + 2000, "\n");
        put("exact", line);
        ASSERT_OK(tool_read_file, "{s:s}", "path", "exact");
        ck_assert_uint_eq(strlen(S(res, "content")), 2001);
        ck_assert(!B(res, "truncated"));
}
END_TEST

START_TEST(test_read_file_replaces_invalid_utf8_and_nul_bytes)
{
        int fd = open(H("bin"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write_full(fd, "ok\n\xff\x00x\n", 7), 0);
        close(fd);
        ASSERT_OK(tool_read_file, "{s:s}", "path", "bin");
        ck_assert_str_eq(S(res, "content"), "ok\n\xef\xbf\xbd\xef\xbf\xbdx\n");
        ck_assert(B(res, "lossy"));
        ck_assert_int_eq(I(res, "size"), 7);
}
END_TEST

START_TEST(test_read_file_refuses_directories_fifos_and_missing_files)
{
        mkd("dir");
        ck_assert_int_eq(mkfifo(H("fifo"), 0644), 0);
        ASSERT_FAILS(TOOL_IS_DIRECTORY, "'/dir' is a directory", tool_read_file, "{s:s}", "path", "dir");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "not a regular file", tool_read_file, "{s:s}", "path", "fifo");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "read_file: open '/nope'", tool_read_file, "{s:s}", "path", "nope");
        put("f", "x");
        ASSERT_FAILS(TOOL_NOT_A_DIRECTORY, "'/f/x'", tool_read_file, "{s:s}", "path", "f/x");
}
END_TEST

START_TEST(test_read_file_base64_returns_raw_ranges_in_the_payload)
{
        int fd = open(H("raw"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write_full(fd, "\x00\x01\x02\x03\xff\xfe", 6), 0);
        close(fd);
        ASSERT_OK(tool_read_file, "{s:s, s:s}", "path", "raw", "encoding", "base64");
        ck_assert_uint_eq(out.payload.len, 6);
        ck_assert(!memcmp(out.payload.buf, "\x00\x01\x02\x03\xff\xfe", 6));
        ck_assert_str_eq(S(res, "encoding"), "base64");
        ck_assert_int_eq(I(res, "bytes"), 6);
        ck_assert_int_eq(I(res, "size"), 6);
        ck_assert_int_eq(I(res, "byte_offset"), 0);
        ck_assert(B(res, "eof"));
        ck_assert_ptr_null(json_object_get(res, "content"));

        ASSERT_OK(tool_read_file, "{s:s, s:s, s:i, s:i}", "path", "raw", "encoding", "base64", "byte_offset", 2,
                  "byte_limit", 2);
        ck_assert_uint_eq(out.payload.len, 2);
        ck_assert(!memcmp(out.payload.buf, "\x02\x03", 2));
        ck_assert(!B(res, "eof"));

        ASSERT_OK(tool_read_file, "{s:s, s:s, s:i, s:i}", "path", "raw", "encoding", "base64", "byte_offset", 4,
                  "byte_limit", 100);
        ck_assert_int_eq(I(res, "bytes"), 2);
        ck_assert(B(res, "eof"));

        ASSERT_OK(tool_read_file, "{s:s, s:s, s:i}", "path", "raw", "encoding", "base64", "byte_offset", 50);
        ck_assert_int_eq(I(res, "bytes"), 0);
        ck_assert(B(res, "eof"));
}
END_TEST

START_TEST(test_read_file_skip_holes_sends_only_the_data_of_a_sparse_file)
{
        int fd = open(H("sparse"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 8 << 20), 0);
        ck_assert_int_eq(pwrite(fd, "abc", 3, 4 << 20), 3);
        ck_assert_int_eq(pwrite(fd, "z", 1, (8 << 20) - 1), 1);
        close(fd);
        /* from 0: the first data, at 4 MiB, up to the hole after it (a block, not the 4 MiB of zeros before) */
        ASSERT_OK(tool_read_file, "{s:s, s:s, s:i, s:i, s:b}", "path", "sparse", "encoding", "base64", "byte_offset", 0,
                  "byte_limit", 16 << 20, "skip_holes", 1);
        ck_assert_int_eq(I(res, "byte_offset"), 4 << 20);
        ck_assert_int_ge(I(res, "bytes"), 3);
        ck_assert_int_le(I(res, "bytes"), 1 << 20);
        ck_assert(!memcmp(out.payload.buf, "abc", 3));
        ck_assert(!B(res, "eof"));
        /* on: the last block, ending the file */
        long long next = I(res, "byte_offset") + I(res, "bytes");
        ASSERT_OK(tool_read_file, "{s:s, s:s, s:I, s:b}", "path", "sparse", "encoding", "base64", "byte_offset", next,
                  "skip_holes", 1);
        ck_assert_int_gt(I(res, "byte_offset"), next);
        ck_assert_int_eq(I(res, "byte_offset") + I(res, "bytes"), 8 << 20);
        ck_assert_int_eq(out.payload.buf[out.payload.len - 1], 'z');
        ck_assert(B(res, "eof"));
        /* only text has no holes to skip */
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'skip_holes' goes with encoding", tool_read_file, "{s:s, s:b}", "path", "sparse",
                     "skip_holes", 1);
}
END_TEST

START_TEST(test_read_file_base64_of_a_big_file_asks_for_ranges)
{
        int fd = open(H("huge"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)TOOL_MAX_CONTENT + 10), 0); /* sparse */
        close(fd);
        ASSERT_FAILS(TOOL_TOO_LARGE, "read it in ranges with byte_offset and byte_limit", tool_read_file,
                     "{s:s, s:s}", "path", "huge", "encoding", "base64");
        ASSERT_FAILS(TOOL_TOO_LARGE, "'byte_limit'", tool_read_file, "{s:s, s:s, s:I}", "path", "huge", "encoding",
                     "base64", "byte_limit", (json_int_t)TOOL_MAX_CONTENT + 1);
        ASSERT_OK(tool_read_file, "{s:s, s:s, s:I}", "path", "huge", "encoding", "base64", "byte_offset", (json_int_t)20);
        ck_assert_int_eq(I(res, "bytes"), (long long)TOOL_MAX_CONTENT - 10);
        ck_assert(B(res, "eof"));
        ASSERT_OK(tool_read_file, "{s:s, s:s, s:i, s:i}", "path", "huge", "encoding", "base64", "byte_offset",
                  1000, "byte_limit", 10);
        ck_assert_uint_eq(out.payload.len, 10);
        ck_assert(!B(res, "eof"));
}
END_TEST

START_TEST(test_read_file_symlink_to_etc_reads_inside_the_root)
{
        put_outside_secret();
        mkd("etc");
        put("etc/passwd", "root-inside:x:0:0\n");
        lnk("/etc/passwd", "passwd-link");
        lnk("/etc", "etc-link");
        lnk("/etc/shadow", "shadow-link");
        char host_secret[PATH_MAX];
        snprintf(host_secret, sizeof(host_secret), "%s/secret", outside_dir);
        lnk(host_secret, "host-link");

        ASSERT_OK(tool_read_file, "{s:s}", "path", "passwd-link");
        ck_assert_str_eq(S(res, "content"), "root-inside:x:0:0\n");
        ASSERT_OK(tool_read_file, "{s:s}", "path", "etc-link/passwd");
        ck_assert_str_eq(S(res, "content"), "root-inside:x:0:0\n");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "shadow-link", tool_read_file, "{s:s}", "path", "shadow-link");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "host-link", tool_read_file, "{s:s}", "path", "host-link");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "secret", tool_read_file, "{s:s}", "path", "../outside/secret");
        ctx.cwd = "/work/deep";
        ASSERT_OK(tool_read_file, "{s:s}", "path", "../../../../etc/passwd");
        ck_assert_str_eq(S(res, "path"), "/etc/passwd");
        ck_assert_str_eq(S(res, "content"), "root-inside:x:0:0\n");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "/etc/shadow", tool_read_file, "{s:s}", "path", "../../etc/shadow");
        assert_outside_untouched();
}
END_TEST

/* ---- write_file ---- */

START_TEST(test_write_file_creates_the_file_and_its_parents)
{
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "new/dir/a.txt", "content", "hello\n");
        ck_assert_str_eq(S(res, "path"), "/new/dir/a.txt");
        ck_assert_int_eq(I(res, "bytes_written"), 6);
        ck_assert(B(res, "created"));
        ASSERT_CONTENT(H("new/dir/a.txt"), "hello\n");
        ck_assert_uint_eq(mode_of(H("new/dir/a.txt")), 0644);
        ck_assert_uint_eq(mode_of(H("new/dir")), 0755);

        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/other'", tool_write_file, "{s:s, s:s, s:b}", "path", "other/a.txt",
                     "content", "x", "parents", false);
        ck_assert(!exists_host(H("other")));
}
END_TEST

/* the root directory has exactly n entries (a temporary left over would be one more) */
static void assert_root_holds(size_t n)
{
        char **names = NULL;
        int fd = open(root_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(tool_read_dir(fd, &names), 0);
        close(fd);
        ck_assert_uint_eq(strv_length(names), n);
        strv_free(names);
}

START_TEST(test_write_file_replaces_atomically_and_keeps_the_mode)
{
        put_host(H("s.sh"), "old\n", 0751);
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "s.sh", "content", "new content\n");
        ck_assert(!B(res, "created"));
        ASSERT_CONTENT(H("s.sh"), "new content\n");
        ck_assert_uint_eq(mode_of(H("s.sh")), 0751);
        ASSERT_OK(tool_write_file, "{s:s, s:s, s:s}", "path", "s.sh", "content", "", "mode", "0600");
        ASSERT_CONTENT(H("s.sh"), "");
        ck_assert_uint_eq(mode_of(H("s.sh")), 0600);
        ASSERT_OK(tool_write_file, "{s:s, s:s, s:i}", "path", "n", "content", "x", "mode", 0755);
        ck_assert_uint_eq(mode_of(H("n")), 0755);
        ASSERT_OK(tool_write_file, "{s:s, s:s, s:s}", "path", "m", "content", "x", "mode", "640");
        ck_assert_uint_eq(mode_of(H("m")), 0640);
        assert_root_holds(3); /* no temporary file is left behind */
}
END_TEST

START_TEST(test_write_file_bad_mode_or_content_changes_nothing)
{
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'mode'", tool_write_file, "{s:s, s:s, s:s}", "path", "a", "content", "x",
                     "mode", "9");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'mode'", tool_write_file, "{s:s, s:s, s:i}", "path", "a", "content", "x",
                     "mode", 010000);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'mode'", tool_write_file, "{s:s, s:s, s:b}", "path", "a", "content", "x",
                     "mode", true);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'mode'", tool_write_file, "{s:s, s:s, s:s}", "path", "a", "content", "x",
                     "mode", "");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "one of 'content', 'content_b64' and 'data' is required",
                     tool_write_file, "{s:s}", "path", "a");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "give only one", tool_write_file, "{s:s, s:s, s:s}", "path", "a",
                     "content", "x", "data", "y");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'content' must be a string", tool_write_file, "{s:s, s:i}", "path", "a",
                     "content", 5);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "not valid base64", tool_write_file, "{s:s, s:s}", "path", "a",
                     "content_b64", "Zm9v!");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'append' must be a boolean", tool_write_file, "{s:s, s:s, s:s}", "path",
                     "a", "content", "x", "append", "yes");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'parents'", tool_write_file, "{s:s, s:s, s:i}", "path", "d/a", "content",
                     "x", "parents", 1);
        ck_assert(!exists_host(H("a")));
        ck_assert(!exists_host(H("d")));
}
END_TEST

START_TEST(test_write_file_takes_base64_data_and_payloads)
{
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "b64", "content_b64", "AAEC/w==");
        ck_assert_int_eq(I(res, "bytes_written"), 4);
        char *s = slurp(H("b64"));
        ck_assert(s && !memcmp(s, "\x00\x01\x02\xff", 4));
        free(s);
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "alias", "data", "via data");
        ASSERT_CONTENT(H("alias"), "via data");

        int r = call_with(tool_write_file, json_pack("{s:s}", "path", "payload"), "raw\0bytes", 9);
        ck_assert_msg(r == 0, "%s", err.message);
        ck_assert_int_eq(I(res, "bytes_written"), 9);
        struct stat st;
        ck_assert_int_eq(stat(H("payload"), &st), 0);
        ck_assert_int_eq(st.st_size, 9);

        char *big = calloc(1, TOOL_MAX_CONTENT + 1);
        ck_assert_ptr_nonnull(big);
        r = call_with(tool_write_file, json_pack("{s:s}", "path", "big"), big, TOOL_MAX_CONTENT + 1);
        ck_assert_int_eq(r, -1);
        ck_assert_int_eq(err.code, TOOL_TOO_LARGE);
        char *enc = encode(big, TOOL_MAX_CONTENT + 1);
        r = call_with(tool_write_file, json_pack("{s:s, s:s}", "path", "big", "content_b64", enc), NULL, 0);
        ck_assert_int_eq(r, -1);
        ck_assert_int_eq(err.code, TOOL_TOO_LARGE);
        free(enc);
        free(big);
        ck_assert(!exists_host(H("big")));
}
END_TEST

START_TEST(test_write_file_append_uploads_in_chunks)
{
        ASSERT_OK(tool_write_file, "{s:s, s:s, s:b}", "path", "up/part", "content", "abc", "append", true);
        ck_assert(B(res, "created"));
        ASSERT_OK(tool_write_file, "{s:s, s:s, s:b}", "path", "up/part", "content_b64", "ZGVm", "append", true);
        ck_assert(!B(res, "created"));
        ck_assert_int_eq(I(res, "bytes_written"), 3);
        ASSERT_CONTENT(H("up/part"), "abcdef");
        ck_assert_uint_eq(mode_of(H("up/part")), 0644);

        put("target", "keep");
        lnk("target", "link");
        ASSERT_FAILS(TOOL_INVALID_PATH, "symlink", tool_write_file, "{s:s, s:s, s:b}", "path", "link", "content", "x",
                     "append", true);
        ASSERT_CONTENT(H("target"), "keep");
        mkd("dir");
        ASSERT_FAILS(TOOL_IS_DIRECTORY, "'/dir'", tool_write_file, "{s:s, s:s, s:b}", "path", "dir", "content", "x",
                     "append", true);
}
END_TEST

START_TEST(test_write_file_on_a_directory_is_is_directory)
{
        mkd("dir");
        ASSERT_FAILS(TOOL_IS_DIRECTORY, "'/dir' is a directory", tool_write_file, "{s:s, s:s}", "path", "dir",
                     "content", "x");
        ASSERT_FAILS(TOOL_INVALID_PATH, "root", tool_write_file, "{s:s, s:s}", "path", "/", "content", "x");
        put("file", "x");
        ASSERT_FAILS(TOOL_NOT_A_DIRECTORY, "'/file", tool_write_file, "{s:s, s:s}", "path", "file/sub", "content",
                     "x");
}
END_TEST

START_TEST(test_write_file_through_a_parent_symlink_to_outside_stays_in_root)
{
        put_outside_secret();
        lnk(outside_dir, "out");          /* a host absolute path */
        lnk("/", "slash");
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "out/secret", "content", "overwritten?");
        char inside[PATH_MAX];
        snprintf(inside, sizeof(inside), "%s%s/secret", root_dir, outside_dir);
        ASSERT_CONTENT(inside, "overwritten?");
        ctx.cwd = "/a/b";
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "../../../../outside/secret", "content", "no");
        ck_assert_str_eq(S(res, "path"), "/outside/secret");
        ASSERT_CONTENT(H("outside/secret"), "no");
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "/slash/../../x", "content", "x");
        ASSERT_CONTENT(H("x"), "x");
        assert_outside_untouched();
}
END_TEST

START_TEST(test_write_file_through_a_final_symlink_writes_its_target_inside_root)
{
        put_outside_secret();
        char host_secret[PATH_MAX];
        snprintf(host_secret, sizeof(host_secret), "%s/secret", outside_dir);
        lnk(host_secret, "cfg");
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "cfg", "content", "inside");
        ck_assert_str_eq(S(res, "path"), "/cfg");
        char inside[PATH_MAX];
        snprintf(inside, sizeof(inside), "%s%s/secret", root_dir, outside_dir);
        ASSERT_CONTENT(inside, "inside");
        struct stat st;
        ck_assert_int_eq(lstat(H("cfg"), &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        mkd("d");
        lnk("../d/real", "rel");
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "rel", "content", "r");
        ASSERT_CONTENT(H("d/real"), "r");
        lnk("loop1", "loop2");
        lnk("loop2", "loop1");
        ASSERT_FAILS(TOOL_INVALID_PATH, "too many levels", tool_write_file, "{s:s, s:s}", "path", "loop1", "content",
                     "x");
        assert_outside_untouched();
}
END_TEST

/* ---- write_files ---- */

START_TEST(test_write_files_writes_each_and_reports_failures)
{
        put("blocker", "x");
        ASSERT_OK(tool_write_files, "{s:[{s:s, s:s}, {s:s, s:s}, {s:s, s:s, s:s}]}", "files", "path", "a/one",
                  "content", "1", "path", "blocker/two", "content", "2", "path", "three", "content_b64", "Mw==", "mode",
                  "0600");
        ck_assert_int_eq(I(res, "written"), 2);
        ck_assert_int_eq(I(res, "failed"), 1);
        json_t *results = field(res, "results");
        ck_assert_uint_eq(json_array_size(results), 3);
        json_t *r0 = json_array_get(results, 0), *r1 = json_array_get(results, 1);
        ck_assert_str_eq(S(r0, "path"), "/a/one");
        ck_assert(B(r0, "ok"));
        ck_assert_int_eq(I(r0, "bytes_written"), 1);
        ck_assert_str_eq(S(r1, "path"), "/blocker/two");
        ck_assert(!B(r1, "ok"));
        json_t *e1 = field(r1, "error");
        ck_assert_str_eq(S(e1, "code"), "not_a_directory");
        UNIT_ASSERT_CONTAINS(S(e1, "message"), "/blocker");
        ASSERT_CONTENT(H("a/one"), "1");
        ASSERT_CONTENT(H("three"), "3");
        ck_assert_uint_eq(mode_of(H("three")), 0600);
}
END_TEST

START_TEST(test_write_files_validates_every_entry_before_writing)
{
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "files[1]: 'path' is required", tool_write_files,
                     "{s:[{s:s, s:s}, {s:s}]}", "files", "path", "first", "content", "1", "content", "2");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "files[1]: 'content_b64' is not valid base64", tool_write_files,
                     "{s:[{s:s, s:s}, {s:s, s:s}]}", "files", "path", "first", "content", "1", "path", "b",
                     "content_b64", "@@@@");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "files[0] must be an object", tool_write_files, "{s:[s]}", "files", "x");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'files'", tool_write_files, "{s:[]}", "files");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'files'", tool_write_files, "{s:s}", "files", "a");
        ASSERT_FAILS(TOOL_INVALID_PATH, "files[0]: 'path' is empty", tool_write_files, "{s:[{s:s, s:s}]}", "files",
                     "path", "", "content", "1");
        json_t *many = json_array();
        for (int i = 0; i < 1001; i++)
                json_array_append_new(many, json_pack("{s:s, s:s}", "path", "f", "content", "x"));
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "1 to 1000", tool_write_files, "{s:o}", "files", many);
        ck_assert(!exists_host(H("first")));
        ck_assert(!exists_host(H("f")));
}
END_TEST

/* ---- edit_file ---- */

START_TEST(test_edit_file_replaces_a_unique_string_and_keeps_the_mode)
{
        put_host(H("e.py"), "def f():\n    return 1\n", 0751);
        ASSERT_OK(tool_edit_file, "{s:s, s:s, s:s}", "path", "e.py", "old_string", "return 1", "new_string",
                  "return 2");
        ck_assert_int_eq(I(res, "occurrences"), 1);
        ck_assert_str_eq(S(res, "path"), "/e.py");
        ASSERT_CONTENT(H("e.py"), "def f():\n    return 2\n");
        ck_assert_uint_eq(mode_of(H("e.py")), 0751);
}
END_TEST

START_TEST(test_edit_file_missing_or_ambiguous_string_changes_nothing)
{
        put("t", "x = 1\nx = 1\nx = 1\n");
        ASSERT_FAILS(TOOL_NOT_FOUND, "old_string not found in '/t'", tool_edit_file, "{s:s, s:s, s:s}", "path", "t",
                     "old_string", "y", "new_string", "z");
        ASSERT_FAILS(TOOL_CONFLICT, "old_string occurs 3 times in '/t'; give more context or set replace_all",
                     tool_edit_file, "{s:s, s:s, s:s}", "path", "t", "old_string", "x = 1", "new_string", "x = 2");
        ASSERT_CONTENT(H("t"), "x = 1\nx = 1\nx = 1\n");
        ASSERT_OK(tool_edit_file, "{s:s, s:s, s:s, s:b}", "path", "t", "old_string", "x = 1", "new_string", "x",
                  "replace_all", true);
        ck_assert_int_eq(I(res, "occurrences"), 3);
        ASSERT_CONTENT(H("t"), "x\nx\nx\n");
        /* occurrences do not overlap */
        put("aa", "aaaa");
        ASSERT_OK(tool_edit_file, "{s:s, s:s, s:s, s:b}", "path", "aa", "old_string", "aa", "new_string", "b",
                  "replace_all", true);
        ck_assert_int_eq(I(res, "occurrences"), 2);
        ASSERT_CONTENT(H("aa"), "bb");
}
END_TEST

START_TEST(test_edit_file_refuses_bad_parameters_and_non_files)
{
        put("t", "abc");
        mkd("d");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'old_string' must not be empty", tool_edit_file, "{s:s, s:s, s:s}",
                     "path", "t", "old_string", "", "new_string", "z");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'new_string' is required", tool_edit_file, "{s:s, s:s}", "path", "t",
                     "old_string", "a");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'replace_all' must be a boolean", tool_edit_file,
                     "{s:s, s:s, s:s, s:s}", "path", "t", "old_string", "a", "new_string", "b", "replace_all", "true");
        ASSERT_FAILS(TOOL_IS_DIRECTORY, "'/d'", tool_edit_file, "{s:s, s:s, s:s}", "path", "d", "old_string", "a",
                     "new_string", "b");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/missing'", tool_edit_file, "{s:s, s:s, s:s}", "path", "missing",
                     "old_string", "a", "new_string", "b");
        ASSERT_CONTENT(H("t"), "abc");
}
END_TEST

START_TEST(test_edit_file_through_a_symlink_edits_the_target_inside_root)
{
        put_outside_secret();
        mkd("etc");
        put("etc/conf", "key=old\n");
        lnk("/etc/conf", "conf-link");
        char host_secret[PATH_MAX];
        snprintf(host_secret, sizeof(host_secret), "%s/secret", outside_dir);
        lnk(host_secret, "secret-link");
        ASSERT_OK(tool_edit_file, "{s:s, s:s, s:s}", "path", "conf-link", "old_string", "old", "new_string", "new");
        ASSERT_CONTENT(H("etc/conf"), "key=new\n");
        struct stat st;
        ck_assert_int_eq(lstat(H("conf-link"), &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, outside_dir, tool_edit_file, "{s:s, s:s, s:s}", "path", "secret-link",
                     "old_string", "host", "new_string", "pwned");
        assert_outside_untouched();
}
END_TEST

/* ---- list_dir ---- */

static json_t *entry_named(json_t *entries, const char *path)
{
        size_t i;
        json_t *v;
        json_array_foreach(entries, i, v)
                if (!strcmp(json_string_value(json_object_get(v, "path")), path))
                        return v;
        ck_abort_msg("no entry '%s'", path);
        return NULL;
}

START_TEST(test_list_dir_gives_sorted_typed_entries)
{
        mkd("w");
        put("w/b.txt", "12345");
        mkd("w/a");
        put("w/a/inner", "");
        lnk("/etc", "w/link");
        ck_assert_int_eq(mkfifo(H("w/fifo"), 0600), 0);
        ASSERT_OK(tool_list_dir, "{s:s}", "path", "w");
        ck_assert_str_eq(S(res, "path"), "/w");
        ck_assert(!B(res, "truncated"));
        json_t *entries = field(res, "entries");
        ck_assert_uint_eq(json_array_size(entries), 4);
        static const char *const order[] = { "/w/a", "/w/b.txt", "/w/fifo", "/w/link" };
        for (size_t i = 0; i < ARRAY_SIZE(order); i++)
                ck_assert_str_eq(S(json_array_get(entries, i), "path"), order[i]);
        json_t *b = entry_named(entries, "/w/b.txt");
        ck_assert_str_eq(S(b, "name"), "b.txt");
        ck_assert_str_eq(S(b, "type"), "file");
        ck_assert_int_eq(I(b, "size"), 5);
        ck_assert_int_eq(I(b, "mode"), 0644);
        ck_assert(json_is_real(field(b, "mtime")) && json_real_value(field(b, "mtime")) > 1e9);
        ck_assert_ptr_null(json_object_get(b, "target"));
        ck_assert_int_eq(I(b, "uid"), getuid()); /* envd's owner and group come from these */
        ck_assert_int_eq(I(b, "gid"), getgid());
        ck_assert_str_eq(S(entry_named(entries, "/w/a"), "type"), "directory");
        ck_assert_str_eq(S(entry_named(entries, "/w/fifo"), "type"), "other");
        json_t *l = entry_named(entries, "/w/link");
        ck_assert_str_eq(S(l, "type"), "symlink");
        ck_assert_str_eq(S(l, "target"), "/etc");

        ASSERT_OK(tool_list_dir, "{s:s, s:i}", "path", "/w", "depth", 2);
        entries = field(res, "entries");
        ck_assert_uint_eq(json_array_size(entries), 5);
        ck_assert_str_eq(S(json_array_get(entries, 1), "path"), "/w/a/inner");
}
END_TEST

START_TEST(test_list_dir_never_descends_symlinks)
{
        put_outside_secret();
        mkd("d");
        lnk(outside_dir, "d/out");
        lnk("/", "d/root");
        ASSERT_OK(tool_list_dir, "{s:s, s:i}", "path", "/d", "depth", 32);
        ck_assert_uint_eq(json_array_size(field(res, "entries")), 2);
        ctx.cwd = "/d";
        ASSERT_OK(tool_list_dir, "{}");
        ck_assert_str_eq(S(res, "path"), "/d");
        ASSERT_OK(tool_list_dir, "{s:s}", "path", "/");
        ck_assert_str_eq(S(json_array_get(field(res, "entries"), 0), "path"), "/d");
        ASSERT_OK(tool_list_dir, "{s:s}", "path", "../../..");
        ck_assert_str_eq(S(res, "path"), "/");
        assert_outside_untouched();
}
END_TEST

START_TEST(test_list_dir_refuses_files_and_bad_depths)
{
        put("f", "x");
        ASSERT_FAILS(TOOL_NOT_A_DIRECTORY, "'/f'", tool_list_dir, "{s:s}", "path", "f");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/nope'", tool_list_dir, "{s:s}", "path", "nope");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'depth' must be at least 1", tool_list_dir, "{s:i}", "depth", 0);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'depth' must be at most 32", tool_list_dir, "{s:i}", "depth", 33);
}
END_TEST

/* ---- stat, exists ---- */

START_TEST(test_stat_reports_links_without_following_unless_asked)
{
        put_host(H("f"), "abc", 0640);
        lnk("f", "l");
        ASSERT_OK(tool_stat, "{s:s}", "path", "l");
        ck_assert_str_eq(S(res, "type"), "symlink");
        ck_assert_str_eq(S(res, "target"), "f");
        ASSERT_OK(tool_stat, "{s:s, s:b}", "path", "l", "follow", true);
        ck_assert_str_eq(S(res, "path"), "/l");
        ck_assert_str_eq(S(res, "type"), "file");
        ck_assert_int_eq(I(res, "size"), 3);
        ck_assert_int_eq(I(res, "mode"), 0640);
        ck_assert_int_eq(I(res, "uid"), getuid());
        ck_assert_int_eq(I(res, "gid"), getgid());
        ck_assert_ptr_null(json_object_get(res, "target"));
        ASSERT_OK(tool_stat, "{s:s}", "path", "/");
        ck_assert_str_eq(S(res, "type"), "directory");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/missing'", tool_stat, "{s:s}", "path", "missing");
        lnk("/etc/passwd", "hostlink");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "hostlink", tool_stat, "{s:s, s:b}", "path", "hostlink", "follow", true);
}
END_TEST

START_TEST(test_exists_answers_without_failing_for_missing_files)
{
        put("f", "x");
        lnk("/nowhere", "dangling");
        ASSERT_OK(tool_exists, "{s:s}", "path", "f");
        ck_assert(B(res, "exists"));
        ck_assert_str_eq(S(res, "type"), "file");
        ASSERT_OK(tool_exists, "{s:s}", "path", "missing");
        ck_assert(!B(res, "exists"));
        ck_assert(json_is_null(field(res, "type")));
        ASSERT_OK(tool_exists, "{s:s}", "path", "f/below");
        ck_assert(!B(res, "exists"));
        ASSERT_OK(tool_exists, "{s:s}", "path", "dangling");
        ck_assert(B(res, "exists"));
        ck_assert_str_eq(S(res, "type"), "symlink");
        ASSERT_OK(tool_exists, "{s:s}", "path", "../../../tmp");
        ck_assert_str_eq(S(res, "path"), "/tmp");
        ck_assert(!B(res, "exists")); /* the host's /tmp is not in the root */
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'path' must be a string", tool_exists, "{s:b}", "path", true);
}
END_TEST

/* ---- mkdir ---- */

START_TEST(test_mkdir_creates_one_directory_with_its_mode)
{
        ASSERT_OK(tool_mkdir, "{s:s}", "path", "d");
        ck_assert(B(res, "created"));
        ck_assert_str_eq(S(res, "path"), "/d");
        ck_assert_uint_eq(mode_of(H("d")), 0755);
        ASSERT_OK(tool_mkdir, "{s:s, s:s}", "path", "d/private", "mode", "0700");
        ck_assert_uint_eq(mode_of(H("d/private")), 0700);
        ASSERT_OK(tool_mkdir, "{s:s, s:i}", "path", "d/open", "mode", 0777);
        ck_assert_uint_eq(mode_of(H("d/open")), 0777);
        ASSERT_FAILS(TOOL_CONFLICT, "'/d' already exists", tool_mkdir, "{s:s}", "path", "d");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/x'", tool_mkdir, "{s:s}", "path", "x/y");
        ck_assert(!exists_host(H("x")));
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'mode'", tool_mkdir, "{s:s, s:s}", "path", "m", "mode", "rwx");
        ck_assert(!exists_host(H("m")));
}
END_TEST

START_TEST(test_mkdir_parents_creates_the_chain_and_accepts_existing)
{
        ASSERT_OK(tool_mkdir, "{s:s, s:b}", "path", "a/b/c", "parents", true);
        ck_assert(B(res, "created"));
        struct stat st;
        ck_assert_int_eq(stat(H("a/b/c"), &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        ASSERT_OK(tool_mkdir, "{s:s, s:b}", "path", "a/b/c", "parents", true);
        ck_assert(!B(res, "created"));
        ASSERT_OK(tool_mkdir, "{s:s, s:b}", "path", "/", "parents", true);
        ck_assert(!B(res, "created"));
        put("a/file", "x");
        ASSERT_FAILS(TOOL_CONFLICT, "'/a/file' exists and is not a directory", tool_mkdir, "{s:s, s:b}", "path",
                     "a/file", "parents", true);
        ASSERT_FAILS(TOOL_NOT_A_DIRECTORY, "'/a/file'", tool_mkdir, "{s:s, s:b}", "path", "a/file/sub", "parents",
                     true);
}
END_TEST

START_TEST(test_mkdir_through_a_symlink_to_outside_stays_in_root)
{
        put_outside_secret();
        lnk(outside_dir, "out");
        ASSERT_OK(tool_mkdir, "{s:s, s:b}", "path", "out/newdir", "parents", true);
        char inside[PATH_MAX];
        snprintf(inside, sizeof(inside), "%s%s/newdir", root_dir, outside_dir);
        struct stat st;
        ck_assert_int_eq(stat(inside, &st), 0);
        assert_outside_untouched();
}
END_TEST

/* ---- remove ---- */

START_TEST(test_remove_deletes_files_and_links_but_not_link_targets)
{
        put("f", "x");
        put("target", "kept");
        lnk("target", "link");
        ASSERT_OK(tool_remove, "{s:s}", "path", "f");
        ck_assert_int_eq(I(res, "removed"), 1);
        ck_assert(!exists_host(H("f")));
        ASSERT_OK(tool_remove, "{s:s}", "path", "link");
        ck_assert(!exists_host(H("link")));
        ASSERT_CONTENT(H("target"), "kept");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/f'", tool_remove, "{s:s}", "path", "f");
}
END_TEST

START_TEST(test_remove_directory_needs_recursive_when_not_empty)
{
        mkd("empty");
        ASSERT_OK(tool_remove, "{s:s}", "path", "empty");
        ck_assert_int_eq(I(res, "removed"), 1);
        mkd("d");
        mkd("d/sub");
        put("d/sub/a", "a");
        put("d/b", "b");
        ASSERT_FAILS(TOOL_CONFLICT, "directory '/d' is not empty; set recursive", tool_remove, "{s:s}", "path", "d");
        ck_assert(exists_host(H("d/sub/a")));
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'recursive'", tool_remove, "{s:s, s:s}", "path", "d", "recursive", "y");
        ASSERT_OK(tool_remove, "{s:s, s:b}", "path", "d", "recursive", true);
        ck_assert_int_eq(I(res, "removed"), 4);
        ck_assert(!exists_host(H("d")));
}
END_TEST

START_TEST(test_remove_recursive_removes_links_and_leaves_outside_contents)
{
        put_outside_secret();
        mkd("etc");
        put("etc/keep", "k");
        mkd("tree");
        lnk(outside_dir, "tree/out");
        lnk("/etc", "tree/etc");
        lnk("../../..", "tree/up");
        ASSERT_OK(tool_remove, "{s:s, s:b}", "path", "tree", "recursive", true);
        ck_assert_int_eq(I(res, "removed"), 4);
        ck_assert(!exists_host(H("tree")));
        ASSERT_CONTENT(H("etc/keep"), "k");
        assert_outside_untouched();
}
END_TEST

START_TEST(test_remove_refuses_the_root)
{
        put_outside_secret();
        put("f", "x");
        ASSERT_FAILS(TOOL_INVALID_PATH, "root", tool_remove, "{s:s, s:b}", "path", "/", "recursive", true);
        ASSERT_FAILS(TOOL_INVALID_PATH, "root", tool_remove, "{s:s, s:b}", "path", "../..", "recursive", true);
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "outside", tool_remove, "{s:s, s:b}", "path", "../outside", "recursive",
                     true);
        ck_assert(exists_host(H("f")));
        assert_outside_untouched();
}
END_TEST

/* ---- rename ---- */

START_TEST(test_rename_moves_and_creates_destination_parents)
{
        put("a", "A");
        ASSERT_OK(tool_rename, "{s:s, s:s}", "from", "a", "to", "x/y/b");
        ck_assert_str_eq(S(res, "from"), "/a");
        ck_assert_str_eq(S(res, "to"), "/x/y/b");
        ck_assert(!exists_host(H("a")));
        ASSERT_CONTENT(H("x/y/b"), "A");
        put("c", "C");
        ASSERT_OK(tool_rename, "{s:s, s:s}", "from", "c", "to", "x/y/b");
        ASSERT_CONTENT(H("x/y/b"), "C");
}
END_TEST

START_TEST(test_rename_without_overwrite_refuses_an_existing_destination)
{
        put("a", "A");
        put("b", "B");
        ASSERT_FAILS(TOOL_CONFLICT, "'/b' already exists", tool_rename, "{s:s, s:s, s:b}", "from", "a", "to", "b",
                     "overwrite", false);
        ASSERT_CONTENT(H("a"), "A");
        ASSERT_CONTENT(H("b"), "B");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/missing'", tool_rename, "{s:s, s:s}", "from", "missing", "to",
                     "new/dir/z");
        ck_assert(!exists_host(H("new")));
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'to' is required", tool_rename, "{s:s}", "from", "a");
        ASSERT_FAILS(TOOL_INVALID_PATH, "root", tool_rename, "{s:s, s:s}", "from", "/", "to", "z");
}
END_TEST

static ino_t ino_of(const char *host_path)
{
        struct stat st;
        ck_assert_int_eq(lstat(host_path, &st), 0);
        return st.st_ino;
}

/* A file with other hard links is written in place: its inode and links stay (as a shell's > does) */
START_TEST(test_write_file_keeps_the_hard_links_of_a_linked_file)
{
        put_host(H("f"), "old\n", 0750);
        ck_assert_int_eq(link(H("f"), H("g")), 0);
        ino_t ino = ino_of(H("f"));
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "f", "content", "new\n");
        ASSERT_CONTENT(H("g"), "new\n");
        ck_assert_uint_eq(ino_of(H("f")), ino);
        ck_assert_uint_eq(mode_of(H("f")), 0750);
        ck_assert_int_eq(unlink(H("g")), 0);
        ASSERT_OK(tool_write_file, "{s:s, s:s}", "path", "f", "content", "newer\n");
        ASSERT_CONTENT(H("f"), "newer\n");
        ck_assert_uint_eq(mode_of(H("f")), 0750);
        assert_root_holds(1); /* no temporary left */
}
END_TEST

/* rename's write: a staged upload ends as write_file would: through a link, with the mode kept */
START_TEST(test_rename_write_finishes_a_staged_write_as_write_file_does)
{
        put_host(H("s.sh"), "old\n", 0750);
        ck_assert_int_eq(symlink("s.sh", H("link")), 0);
        put("stage1", "one\n");
        ASSERT_OK(tool_rename, "{s:s, s:s, s:b}", "from", "stage1", "to", "link", "write", true);
        ck_assert_str_eq(S(res, "to"), "/link");
        ASSERT_CONTENT(H("s.sh"), "one\n");
        ck_assert_uint_eq(mode_of(H("s.sh")), 0750);
        struct stat st;
        ck_assert(lstat(H("link"), &st) == 0 && S_ISLNK(st.st_mode));
        ck_assert(!exists_host(H("stage1")));
        ck_assert_int_eq(link(H("s.sh"), H("hard")), 0);
        put("stage2", "two\n");
        ASSERT_OK(tool_rename, "{s:s, s:s, s:b}", "from", "stage2", "to", "s.sh", "write", true);
        ASSERT_CONTENT(H("hard"), "two\n");
        ck_assert(!exists_host(H("stage2")));
        put("stage3", "new\n"); /* a new file */
        ASSERT_OK(tool_rename, "{s:s, s:s, s:b}", "from", "stage3", "to", "d/new", "write", true);
        ASSERT_CONTENT(H("d/new"), "new\n");
        /* onto a directory, or from a directory: refused, the directory untouched */
        put("stage4", "x");
        ASSERT_FAILS(TOOL_IS_DIRECTORY, "'/d': Is a directory", tool_rename, "{s:s, s:s, s:b}", "from", "stage4", "to", "d", "write", true);
        ASSERT_CONTENT(H("d/new"), "new\n");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'/d' is not a regular file", tool_rename, "{s:s, s:s, s:b}", "from", "d", "to", "z", "write",
                     true);
}
END_TEST

static char *xattr_of(const char *host, const char *name)
{
        static char v[256];
        ssize_t n = getxattr(host, name, v, sizeof(v) - 1);
        if (n < 0)
                return NULL;
        v[n] = '\0';
        return v;
}

/* rename's write with metadata: the file's user.e2b.* attributes become it (others stay), in
 * place too (a hard-linked file); stat and list_dir show them when asked */
START_TEST(test_rename_write_metadata_replaces_the_user_e2b_attributes)
{
        put("stage1", "one");
        ASSERT_OK(tool_rename, "{s:s, s:s, s:b, s:{s:s, s:s}}", "from", "stage1", "to", "f", "write", true, "metadata", "a", "1", "b", "x y");
        ck_assert_str_eq(S(field(res, "metadata"), "a"), "1");
        ck_assert_str_eq(xattr_of(H("f"), "user.e2b.b"), "x y");
        ck_assert_int_eq(setxattr(H("f"), "user.other", "o", 1, 0), 0);
        ck_assert_int_eq(setxattr(H("f"), "user.e2b.bin", "\xff\xfe", 2, 0), 0); /* not UTF-8: not shown */
        ASSERT_OK(tool_stat, "{s:s, s:b}", "path", "f", "metadata", true);
        char *got = json_dumps(field(res, "metadata"), JSON_SORT_KEYS | JSON_COMPACT);
        ck_assert_str_eq(got, "{\"a\":\"1\",\"b\":\"x y\"}");
        free(got);
        ASSERT_OK(tool_stat, "{s:s}", "path", "f");
        ck_assert_ptr_null(json_object_get(res, "metadata"));
        ASSERT_OK(tool_list_dir, "{s:s, s:b}", "path", "/", "metadata", true);
        ck_assert_str_eq(S(field(json_array_get(field(res, "entries"), 0), "metadata"), "b"), "x y");
        /* replaced, the file's other attributes kept; an empty set clears them */
        ck_assert_int_eq(link(H("f"), H("hard")), 0);
        put("stage2", "two");
        ASSERT_OK(tool_rename, "{s:s, s:s, s:b, s:{s:s}}", "from", "stage2", "to", "f", "write", true, "metadata", "c", "3");
        ASSERT_CONTENT(H("hard"), "two");
        got = json_dumps(field(res, "metadata"), JSON_SORT_KEYS | JSON_COMPACT);
        ck_assert_str_eq(got, "{\"c\":\"3\"}");
        free(got);
        ck_assert_str_eq(xattr_of(H("hard"), "user.other"), "o");
        ck_assert_ptr_null(xattr_of(H("hard"), "user.e2b.a"));
        ck_assert_int_eq(unlink(H("hard")), 0);
        put("stage3", "three");
        ASSERT_OK(tool_rename, "{s:s, s:s, s:b, s:{}}", "from", "stage3", "to", "f", "write", true, "metadata");
        ck_assert_ptr_null(json_object_get(res, "metadata"));
        ck_assert_ptr_null(xattr_of(H("f"), "user.e2b.c"));
        /* bad metadata, or metadata without write: refused, nothing changed */
        put("stage4", "four");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "printable ASCII", tool_rename, "{s:s, s:s, s:b, s:{s:s}}", "from", "stage4", "to", "f",
                     "write", true, "metadata", "k", "caf\xc3\xa9");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "printable ASCII", tool_rename, "{s:s, s:s, s:b, s:{s:s}}", "from", "stage4", "to", "f",
                     "write", true, "metadata", "", "v");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "object of strings", tool_rename, "{s:s, s:s, s:b, s:[]}", "from", "stage4", "to", "f",
                     "write", true, "metadata");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "write: true", tool_rename, "{s:s, s:s, s:{}}", "from", "stage4", "to", "f", "metadata");
        ASSERT_CONTENT(H("f"), "three");
        ASSERT_CONTENT(H("stage4"), "four");
}
END_TEST

/* a symbolic link's metadata is never its target's: one leading out of the root shows nothing
 * of the host file, and rename's metadata never goes through one */
START_TEST(test_metadata_never_follows_a_symlink_out_of_the_root)
{
        char host[PATH_MAX];
        put_outside_secret();
        snprintf(host, sizeof(host), "%s/secret", outside_dir);
        ck_assert_int_eq(setxattr(host, "user.e2b.k", "host", 4, 0), 0);
        ck_assert_int_eq(symlink(host, H("out")), 0);
        ASSERT_OK(tool_stat, "{s:s, s:b}", "path", "out", "metadata", true);
        ck_assert_ptr_null(json_object_get(res, "metadata"));
        ASSERT_OK(tool_list_dir, "{s:s, s:b}", "path", "/", "metadata", true);
        ck_assert_ptr_null(json_object_get(json_array_get(field(res, "entries"), 0), "metadata"));
        put("stage", "x");
        ASSERT_OK(tool_rename, "{s:s, s:s, s:b, s:{s:s}}", "from", "stage", "to", "out", "write", true, "metadata", "k", "mine");
        ck_assert_str_eq(xattr_of(host, "user.e2b.k"), "host");
        assert_outside_untouched();
}
END_TEST

START_TEST(test_metadata_check_bounds_keys_values_and_total)
{
        char why[160], key[248];
        json_t *m = json_object();
        ck_assert_int_eq(tool_metadata_check(m, why, sizeof(why)), 0);
        memset(key, 'k', sizeof(key));
        key[246] = '\0';
        json_object_set_new(m, key, json_string("v"));
        ck_assert_int_eq(tool_metadata_check(m, why, sizeof(why)), 0);
        key[246] = 'k', key[247] = '\0';
        json_object_set_new(m, key, json_string("v"));
        ck_assert_int_eq(tool_metadata_check(m, why, sizeof(why)), -EINVAL);
        json_object_clear(m);
        char big[4096 - 9 - 1 + 1];
        memset(big, 'v', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        json_object_set_new(m, "k", json_string(big)); /* "user.e2b.k" + 4086 bytes: 4096 */
        ck_assert_int_eq(tool_metadata_check(m, why, sizeof(why)), 0);
        json_object_set_new(m, "l", json_string(""));
        ck_assert_int_eq(tool_metadata_check(m, why, sizeof(why)), -EINVAL);
        UNIT_ASSERT_CONTAINS(why, "over 4096");
        json_object_clear(m);
        json_object_set_new(m, "k", json_integer(1));
        ck_assert_int_eq(tool_metadata_check(m, why, sizeof(why)), -EINVAL);
        json_decref(m);
}
END_TEST

/* The test cases of every tool that opens paths; fallback: with tool_open's user-space resolver. */
static void add_tool_cases(Suite *s, bool fallback)
{
        void (*setup)(void) = fallback ? fallback_setup : test_setup;
        void (*teardown)(void) = fallback ? fallback_teardown : test_teardown;
        TCase *tc;
        tc = unit_tcase(s, fallback ? "tool_path_fallback" : "tool_path");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        unit_add(tc, test_path_normalize_joins_cwd_and_collapses_dots);
        unit_add(tc, test_path_empty_too_long_or_with_nul_is_invalid_path);
        unit_add(tc, test_path_root_has_no_parent);
        unit_add(tc, test_path_open_resolves_dotdot_and_absolute_links_inside_root);
        unit_add(tc, test_path_open_counts_links_as_the_kernel_does);
        unit_add(tc, test_path_open_deep_dotdot_in_links_stops_at_the_root);
        unit_add(tc, test_path_open_keeps_the_flags_of_the_last_component);
        unit_add(tc, test_path_open_refuses_proc_magic_links);
        unit_add(tc, test_path_open_races_with_a_link_swap_stay_inside);
        if (!fallback)
                unit_add(tc, test_path_fallback_is_used_only_without_openat2);
        unit_add(tc, test_errno_maps_to_protocol_codes);
        unit_add(tc, test_error_messages_stay_one_line_and_utf8);
        unit_add(tc, test_json_text_replaces_invalid_utf8_and_nul);
        unit_add(tc, test_params_of_the_wrong_type_are_invalid_argument);

        tc = unit_tcase(s, fallback ? "read_file_fallback" : "read_file");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        unit_add(tc, test_read_file_returns_lines_with_counts);
        unit_add(tc, test_read_file_offset_and_limit_page_through_lines);
        unit_add(tc, test_read_file_counts_lines_of_empty_and_unterminated_files);
        unit_add(tc, test_read_file_streams_a_large_file_and_counts_every_line);
        unit_add(tc, test_read_file_cuts_long_lines_on_a_character_boundary);
        unit_add(tc, test_read_file_replaces_invalid_utf8_and_nul_bytes);
        unit_add(tc, test_read_file_refuses_directories_fifos_and_missing_files);
        unit_add(tc, test_read_file_base64_returns_raw_ranges_in_the_payload);
        unit_add(tc, test_read_file_skip_holes_sends_only_the_data_of_a_sparse_file);
        unit_add(tc, test_read_file_base64_of_a_big_file_asks_for_ranges);
        unit_add(tc, test_read_file_symlink_to_etc_reads_inside_the_root);

        tc = unit_tcase(s, fallback ? "write_file_fallback" : "write_file");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        unit_add(tc, test_write_file_creates_the_file_and_its_parents);
        unit_add(tc, test_write_file_replaces_atomically_and_keeps_the_mode);
        unit_add(tc, test_write_file_bad_mode_or_content_changes_nothing);
        unit_add(tc, test_write_file_takes_base64_data_and_payloads);
        unit_add(tc, test_write_file_append_uploads_in_chunks);
        unit_add(tc, test_write_file_on_a_directory_is_is_directory);
        unit_add(tc, test_write_file_through_a_parent_symlink_to_outside_stays_in_root);
        unit_add(tc, test_write_file_through_a_final_symlink_writes_its_target_inside_root);
        unit_add(tc, test_write_files_writes_each_and_reports_failures);
        unit_add(tc, test_write_files_validates_every_entry_before_writing);

        tc = unit_tcase(s, fallback ? "edit_file_fallback" : "edit_file");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        unit_add(tc, test_edit_file_replaces_a_unique_string_and_keeps_the_mode);
        unit_add(tc, test_edit_file_missing_or_ambiguous_string_changes_nothing);
        unit_add(tc, test_edit_file_refuses_bad_parameters_and_non_files);
        unit_add(tc, test_edit_file_through_a_symlink_edits_the_target_inside_root);

        tc = unit_tcase(s, fallback ? "list_stat_fallback" : "list_stat");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        unit_add(tc, test_list_dir_gives_sorted_typed_entries);
        unit_add(tc, test_list_dir_never_descends_symlinks);
        unit_add(tc, test_list_dir_refuses_files_and_bad_depths);
        unit_add(tc, test_stat_reports_links_without_following_unless_asked);
        unit_add(tc, test_exists_answers_without_failing_for_missing_files);

        tc = unit_tcase(s, fallback ? "mkdir_remove_rename_fallback" : "mkdir_remove_rename");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        unit_add(tc, test_mkdir_creates_one_directory_with_its_mode);
        unit_add(tc, test_mkdir_parents_creates_the_chain_and_accepts_existing);
        unit_add(tc, test_mkdir_through_a_symlink_to_outside_stays_in_root);
        unit_add(tc, test_remove_deletes_files_and_links_but_not_link_targets);
        unit_add(tc, test_remove_directory_needs_recursive_when_not_empty);
        unit_add(tc, test_remove_recursive_removes_links_and_leaves_outside_contents);
        unit_add(tc, test_remove_refuses_the_root);
        unit_add(tc, test_rename_moves_and_creates_destination_parents);
        unit_add(tc, test_rename_without_overwrite_refuses_an_existing_destination);
        unit_add(tc, test_rename_write_finishes_a_staged_write_as_write_file_does);
        unit_add(tc, test_rename_write_metadata_replaces_the_user_e2b_attributes);
        unit_add(tc, test_metadata_never_follows_a_symlink_out_of_the_root);
        unit_add(tc, test_write_file_keeps_the_hard_links_of_a_linked_file);
}

Suite *files_suite(void)
{
        Suite *s = suite_create("files");
        TCase *tc = unit_tcase(s, "base64");
        unit_add(tc, test_base64_encodes_rfc4648_vectors);
        unit_add(tc, test_base64_round_trips_every_byte_and_length);
        unit_add(tc, test_base64_decodes_megabytes_across_slices);
        unit_add(tc, test_base64_refuses_malformed_input_and_leaves_output_alone);
        unit_add(tc, test_base64_decode_past_the_limit_is_e2big);
        tc = unit_tcase(s, "metadata");
        unit_add(tc, test_metadata_check_bounds_keys_values_and_total);

        add_tool_cases(s, false);
        /* every path test again through the resolver used where openat2 is missing */
        add_tool_cases(s, true);
        return s;
}
