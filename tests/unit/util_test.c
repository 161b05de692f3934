/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parsers behind every size, duration and number a user types, the bounded buffer, sandbox
 * path normalization and host name checks. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/json.h"
#include "../../runtime/policy.h"
#include "../../runtime/userns.h"
#include "../../runtime/util.h"
#include "unit.h"

#define UNTOUCHED 0x5e5e5e5eull

/* parse(s) gives want. */
#define ASSERT_PARSED(fn, s, want)                                                           \
        do {                                                                                 \
                uint64_t _v = UNTOUCHED;                                                     \
                int _r = fn((s), &_v);                                                       \
                ck_assert_msg(_r == 0, "%s(\"%s\") failed: %s", #fn, (s), strerror(-_r));    \
                ck_assert_msg(_v == (want), "%s(\"%s\") gave %llu, expected %llu", #fn, (s), \
                              (unsigned long long)_v, (unsigned long long)(want));           \
        } while (0)

/* parse(s) fails and leaves the result alone. */
#define ASSERT_NOT_PARSED(fn, s)                                                             \
        do {                                                                                 \
                uint64_t _v = UNTOUCHED;                                                     \
                int _r = fn((s), &_v);                                                       \
                ck_assert_msg(_r < 0, "%s(\"%s\") accepted it as %llu", #fn, (s),            \
                              (unsigned long long)_v);                                       \
                ck_assert_uint_eq(_v, UNTOUCHED);                                            \
        } while (0)

/* ---- sizes ---- */

START_TEST(test_size_plain_bytes)
{
        ASSERT_PARSED(parse_size, "4096", 4096);
        ASSERT_PARSED(parse_size, "0", 0);
}
END_TEST

START_TEST(test_size_binary_suffixes)
{
        ASSERT_PARSED(parse_size, "512k", 512ull << 10);
        ASSERT_PARSED(parse_size, "64M", 64ull << 20);
        ASSERT_PARSED(parse_size, "2G", 2ull << 30);
        ASSERT_PARSED(parse_size, "1T", 1ull << 40);
}
END_TEST

START_TEST(test_size_fraction)
{
        ASSERT_PARSED(parse_size, "1.5G", 3ull << 29);
}
END_TEST

START_TEST(test_size_with_i_and_b)
{
        ASSERT_PARSED(parse_size, "64Mi", 64ull << 20);
        ASSERT_PARSED(parse_size, "1KB", 1024);
        ASSERT_PARSED(parse_size, "1KiB", 1024);
}
END_TEST

START_TEST(test_size_refuses_empty_negative_and_junk)
{
        ASSERT_NOT_PARSED(parse_size, "");
        ASSERT_NOT_PARSED(parse_size, "-1");
        ASSERT_NOT_PARSED(parse_size, "1X");
        ASSERT_NOT_PARSED(parse_size, "M");
        ASSERT_NOT_PARSED(parse_size, " 1");
        ASSERT_NOT_PARSED(parse_size, "1M ");
}
END_TEST

START_TEST(test_size_refuses_hex_inf_and_exponent)
{
        ASSERT_NOT_PARSED(parse_size, "0x10");
        ASSERT_NOT_PARSED(parse_size, "inf");
        ASSERT_NOT_PARSED(parse_size, "1e3");
        ASSERT_NOT_PARSED(parse_size, "nan");
}
END_TEST

START_TEST(test_size_too_large_is_refused)
{
        ASSERT_NOT_PARSED(parse_size, "100000000T");
        ASSERT_NOT_PARSED(parse_size, "99999999999999999999");
}
END_TEST

/* ---- durations ---- */

START_TEST(test_duration_plain_number_is_seconds)
{
        ASSERT_PARSED(parse_duration_ms, "30", 30000);
        ASSERT_PARSED(parse_duration_ms, "1.5", 1500);
        ASSERT_PARSED(parse_duration_ms, "0", 0);
        ASSERT_PARSED(parse_duration_ms, "10s", 10000);
}
END_TEST

START_TEST(test_duration_units)
{
        ASSERT_PARSED(parse_duration_ms, "250ms", 250);
        ASSERT_PARSED(parse_duration_ms, "2m", 120000);
        ASSERT_PARSED(parse_duration_ms, "1h", 3600000);
}
END_TEST

START_TEST(test_duration_refuses_junk)
{
        ASSERT_NOT_PARSED(parse_duration_ms, "abc");
        ASSERT_NOT_PARSED(parse_duration_ms, "-1");
        ASSERT_NOT_PARSED(parse_duration_ms, "1d");
        ASSERT_NOT_PARSED(parse_duration_ms, "");
        ASSERT_NOT_PARSED(parse_duration_ms, "1e3");
        ASSERT_NOT_PARSED(parse_duration_ms, "inf");
}
END_TEST

/* ---- whole numbers ---- */

START_TEST(test_u64_within_range)
{
        uint64_t v = 0;
        ck_assert_int_eq(parse_u64("42", 0, 100, &v), 0);
        ck_assert_uint_eq(v, 42);
        ck_assert_int_eq(parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
        ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

START_TEST(test_u64_out_of_range_is_erange)
{
        uint64_t v = UNTOUCHED;
        ck_assert_int_eq(parse_u64("5", 10, 20, &v), -ERANGE);
        ck_assert_int_eq(parse_u64("21", 10, 20, &v), -ERANGE);
        ck_assert_int_eq(parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
        ck_assert_uint_eq(v, UNTOUCHED);
}
END_TEST

START_TEST(test_u64_not_a_number_is_einval)
{
        uint64_t v = UNTOUCHED;
        ck_assert_int_eq(parse_u64("", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(parse_u64("-1", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(parse_u64(" 1", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(parse_u64("12a", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(parse_u64(NULL, 0, 100, &v), -EINVAL);
        ck_assert_uint_eq(v, UNTOUCHED);
}
END_TEST

/* ---- strbuf ---- */

START_TEST(test_strbuf_appends)
{
        strbuf sb;
        sb_init(&sb, 0);
        ck_assert_int_eq(sb_append(&sb, "ab", 2), 0);
        ck_assert_int_eq(sb_appendf(&sb, "%d-%s", 12, "x"), 0);
        ck_assert_uint_eq(sb.len, 6);
        ck_assert_str_eq(sb.buf, "ab12-x");
        sb_release(&sb);
        ck_assert_ptr_null(sb.buf);
        ck_assert_uint_eq(sb.len, 0);
}
END_TEST

START_TEST(test_strbuf_empty_append_gives_empty_string)
{
        strbuf sb;
        sb_init(&sb, 4);
        ck_assert_int_eq(sb_append(&sb, "", 0), 0);
        ck_assert_ptr_nonnull(sb.buf);
        ck_assert_str_eq(sb.buf, "");
        sb_release(&sb);
}
END_TEST

START_TEST(test_strbuf_fills_up_to_limit)
{
        strbuf sb;
        sb_init(&sb, 8);
        ck_assert_int_eq(sb_append(&sb, "1234", 4), 0);
        ck_assert_int_eq(sb_appendf(&sb, "%s", "5678"), 0);
        ck_assert_uint_eq(sb.len, 8);
        ck_assert_str_eq(sb.buf, "12345678");
        sb_release(&sb);
}
END_TEST

START_TEST(test_strbuf_append_past_limit_fails_unchanged)
{
        strbuf sb;
        sb_init(&sb, 8);
        ck_assert_int_eq(sb_append(&sb, "123456", 6), 0);
        ck_assert_int_eq(sb_append(&sb, "789", 3), -E2BIG);
        ck_assert_uint_eq(sb.len, 6);
        ck_assert_str_eq(sb.buf, "123456");
        ck_assert_int_eq(sb_appendf(&sb, "%s", "789"), -E2BIG);
        ck_assert_uint_eq(sb.len, 6);
        ck_assert_str_eq(sb.buf, "123456");
        ck_assert_int_eq(sb_append(&sb, "78", 2), 0);
        ck_assert_str_eq(sb.buf, "12345678");
        sb_release(&sb);
}
END_TEST

START_TEST(test_strbuf_huge_append_fails)
{
        strbuf sb;
        sb_init(&sb, 8);
        ck_assert_int_eq(sb_append(&sb, "1", 1), 0);
        ck_assert_int_eq(sb_append(&sb, "x", SIZE_MAX), -E2BIG);
        ck_assert_uint_eq(sb.len, 1);
        ck_assert_str_eq(sb.buf, "1");
        sb_release(&sb);
}
END_TEST

/* ---- sandbox paths ---- */

START_TEST(test_sandbox_path_is_normalized)
{
        char *out = NULL;
        ck_assert_int_eq(nsbox_normalize_sandbox_path("//a/./b/", &out), 0);
        ck_assert_str_eq(out, "/a/b");
        free(out);
        ck_assert_int_eq(nsbox_normalize_sandbox_path("/a/.b/..c", &out), 0);
        ck_assert_str_eq(out, "/a/.b/..c");
        free(out);
}
END_TEST

START_TEST(test_sandbox_root_stays_root)
{
        char *out = NULL;
        ck_assert_int_eq(nsbox_normalize_sandbox_path("/", &out), 0);
        ck_assert_str_eq(out, "/");
        free(out);
        ck_assert_int_eq(nsbox_normalize_sandbox_path("//./", &out), 0);
        ck_assert_str_eq(out, "/");
        free(out);
}
END_TEST

START_TEST(test_sandbox_path_relative_is_refused)
{
        char *out = (char *)"untouched";
        ck_assert_int_eq(nsbox_normalize_sandbox_path("a/b", &out), -EINVAL);
        ck_assert_int_eq(nsbox_normalize_sandbox_path("", &out), -EINVAL);
        ck_assert_int_eq(nsbox_normalize_sandbox_path(NULL, &out), -EINVAL);
        ck_assert_str_eq(out, "untouched");
}
END_TEST

START_TEST(test_sandbox_path_dotdot_is_refused)
{
        char *out = (char *)"untouched";
        ck_assert_int_eq(nsbox_normalize_sandbox_path("/a/../b", &out), -EINVAL);
        ck_assert_int_eq(nsbox_normalize_sandbox_path("/..", &out), -EINVAL);
        ck_assert_int_eq(nsbox_normalize_sandbox_path("/a/..", &out), -EINVAL);
        ck_assert_str_eq(out, "untouched");
}
END_TEST

/* ---- host names ---- */

START_TEST(test_hostname_valid)
{
        ck_assert_int_eq(nsbox_check_hostname("nsbox"), 0);
        ck_assert_int_eq(nsbox_check_hostname("box-1.example"), 0);
        ck_assert_int_eq(nsbox_check_hostname("A1"), 0);
        char max[65];
        memset(max, 'a', 64);
        max[64] = '\0';
        ck_assert_int_eq(nsbox_check_hostname(max), 0);
}
END_TEST

START_TEST(test_hostname_invalid)
{
        static const char *const bad[] = { "", "bad!", "-x", ".x", "a b", "a_b", "a/b", "a\nb" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(nsbox_check_hostname(bad[i]) < 0, "'%s' was accepted", bad[i]);
        char long_name[66];
        memset(long_name, 'a', 65);
        long_name[65] = '\0';
        ck_assert_int_lt(nsbox_check_hostname(long_name), 0);
}
END_TEST

/* ---- terminal escaping ---- */

static void assert_escaped(const char *in, const char *want)
{
        char *got = nsbox_escape_controls(in);
        ck_assert_ptr_nonnull(got);
        ck_assert_msg(!strcmp(got, want), "escaped '%s', expected '%s'", got, want);
        free(got);
}

START_TEST(test_escape_controls_c0_del_c1_and_bad_utf8)
{
        assert_escaped("plain text, ünïcödé and 中文", "plain text, ünïcödé and 中文");
        assert_escaped("\x1b]0;t\x07\x1b[2J", "\\x1b]0;t\\x07\\x1b[2J");
        assert_escaped("a\nb\tc\rd\\e", "a\\nb\\tc\\rd\\\\e");
        assert_escaped("\x7f", "\\x7f");
        assert_escaped("\xc2\x9b" "31m\xc2\x85", "\\u009b31m\\u0085");
        assert_escaped("\xc2\xa0", "\xc2\xa0"); /* U+00A0 is printable */
        assert_escaped("\xff\xc0\xafx\xe2\x82", "\\xff\\xc0\\xafx\\xe2\\x82"); /* invalid, overlong, cut short */
        assert_escaped("\xed\xa0\x80", "\\xed\\xa0\\x80"); /* a surrogate */
        assert_escaped("", "");
}
END_TEST

START_TEST(test_json_escape_c1_keeps_the_value)
{
        char *got = nsbox_json_escape_c1("{\"x\": \"a\x7f\xc2\x9b\xc2\xa0\xe4\xb8\xad\"}");
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(got, "{\"x\": \"a\\u007f\\u009b\xc2\xa0\xe4\xb8\xad\"}");
        free(got);
}
END_TEST

static void thread_ids(uid_t *euid, uid_t *fsuid, uint32_t eff[2])
{
        uid_t r, s;
        ck_assert_int_eq(syscall(SYS_getresuid, &r, euid, &s), 0);
        *fsuid = (uid_t)syscall(SYS_setfsuid, -1);
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = { { 0 } }; /* valgrind 3.19 marks only d[0] written */
        ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
        eff[0] = d[0].effective, eff[1] = d[1].effective;
}

/* Root: between enter and leave a user namespace made by this thread is owned by the sandbox's
 * host id (fsuid 0 stays); afterwards euid, effective capabilities and dumpable are as before.
 * A user: nothing changes. */
START_TEST(test_userns_owner_is_the_sandboxes_host_id_only_around_the_clone)
{
        bool root = geteuid() == 0;
        nsbox_idmap map = { .privileged = root, .host_uid = 0x70000000u, .host_gid = 0x70000000u, .count = 65536 };
        uid_t euid, fsuid, euid0, fsuid0;
        uint32_t eff[2], eff0[2];
        int dumpable0 = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
        thread_ids(&euid0, &fsuid0, eff0);
        nsbox_userns_owner o;
        ck_assert_int_eq(nsbox_userns_owner_enter(&map, &o), 0);
        thread_ids(&euid, &fsuid, eff);
        ck_assert_uint_eq(euid, root ? 0x70000000u : euid0);
        ck_assert_uint_eq(fsuid, fsuid0);
        if (root) {
                /* a child's new user namespace, looked at from here: its owner is the host id */
                int up[2], down[2];
                ck_assert_int_eq(pipe(up), 0);
                ck_assert_int_eq(pipe(down), 0);
                pid_t pid = fork();
                ck_assert_int_ge(pid, 0);
                if (pid == 0) {
                        close(down[1]);
                        char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
                        if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) < 0)
                                _exit(1);
                        _exit(0);
                }
                nsbox_userns_owner_leave(&o);
                char c = 0;
                ck_assert_int_eq(read(up[0], &c, 1), 1);
                ck_assert_int_eq(c, 'y');
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                uid_t owner = (uid_t)-1;
                int r = fd >= 0 ? ioctl(fd, 0xb704 /* NS_GET_OWNER_UID */, &owner) : -1;
                if (fd >= 0)
                        close(fd);
                close(down[1]);
                int st;
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
                close(up[0]), close(up[1]), close(down[0]);
                ck_assert_int_eq(r, 0);
                ck_assert_uint_eq(owner, 0x70000000u);
        }
        nsbox_userns_owner_leave(&o); /* a second leave does nothing */
        thread_ids(&euid, &fsuid, eff);
        ck_assert_uint_eq(euid, euid0);
        ck_assert_uint_eq(fsuid, fsuid0);
        ck_assert_uint_eq(eff[0], eff0[0]);
        ck_assert_uint_eq(eff[1], eff0[1]);
        ck_assert_int_eq(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), dumpable0);
}
END_TEST

/* A refused user namespace: the sysctl that forbids it, named with its fix; Ubuntu's AppArmor
 * restriction with the profile make install ships and the commands that load it (issue 25). */
static void write_sysctl(const char *dir, const char *name, const char *value)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(value, f);
        fclose(f);
}

START_TEST(test_userns_hint_names_the_sysctl_and_its_fix)
{
        char dir[] = "/tmp/nsbox-unit-sysctl.XXXXXX", sub[128];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(sub, sizeof(sub), "%s/kernel", dir);
        ck_assert_int_eq(mkdir(sub, 0700), 0);
        snprintf(sub, sizeof(sub), "%s/user", dir);
        ck_assert_int_eq(mkdir(sub, 0700), 0);
        UNIT_ASSERT_CONTAINS(nsbox_userns_hint_at(dir, EPERM), "not allowed here");
        UNIT_ASSERT_CONTAINS(nsbox_userns_hint_at(dir, ENOSPC), "user.max_user_namespaces");
        write_sysctl(dir, "user/max_user_namespaces", "0\n");
        UNIT_ASSERT_CONTAINS(nsbox_userns_hint_at(dir, EPERM), "user.max_user_namespaces=0: raise it");
        write_sysctl(dir, "kernel/unprivileged_userns_clone", "0\n");
        UNIT_ASSERT_CONTAINS(nsbox_userns_hint_at(dir, EPERM), "kernel.unprivileged_userns_clone=0: set it to 1");
        write_sysctl(dir, "kernel/apparmor_restrict_unprivileged_userns", "0\n");
        UNIT_ASSERT_CONTAINS(nsbox_userns_hint_at(dir, EPERM), "kernel.unprivileged_userns_clone=0");
        write_sysctl(dir, "kernel/apparmor_restrict_unprivileged_userns", "1\n");
        const char *h = nsbox_userns_hint_at(dir, EPERM);
        UNIT_ASSERT_CONTAINS(h, "kernel.apparmor_restrict_unprivileged_userns=1: install the nsbox AppArmor profile: ");
        UNIT_ASSERT_CONTAINS(h, "sudo cp " NSBOX_DATADIR "/nsbox/apparmor/nsbox /etc/apparmor.d/nsbox");
        UNIT_ASSERT_CONTAINS(h, " && sudo apparmor_parser -r /etc/apparmor.d/nsbox");
        UNIT_ASSERT_ONE_LINE(h);
        const char *names[] = { "kernel/apparmor_restrict_unprivileged_userns", "kernel/unprivileged_userns_clone",
                                "user/max_user_namespaces", "kernel", "user", "" };
        for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
                snprintf(sub, sizeof(sub), "%s/%s", dir, names[i]);
                ck_assert_int_eq(i < 3 ? unlink(sub) : rmdir(sub), 0);
        }
}
END_TEST

Suite *util_suite(void)
{
        Suite *s = suite_create("util");
        TCase *tc = unit_tcase(s, "parse_size");
        unit_add(tc, test_size_plain_bytes);
        unit_add(tc, test_size_binary_suffixes);
        unit_add(tc, test_size_fraction);
        unit_add(tc, test_size_with_i_and_b);
        unit_add(tc, test_size_refuses_empty_negative_and_junk);
        unit_add(tc, test_size_refuses_hex_inf_and_exponent);
        unit_add(tc, test_size_too_large_is_refused);

        tc = unit_tcase(s, "parse_duration");
        unit_add(tc, test_duration_plain_number_is_seconds);
        unit_add(tc, test_duration_units);
        unit_add(tc, test_duration_refuses_junk);

        tc = unit_tcase(s, "parse_u64");
        unit_add(tc, test_u64_within_range);
        unit_add(tc, test_u64_out_of_range_is_erange);
        unit_add(tc, test_u64_not_a_number_is_einval);

        tc = unit_tcase(s, "strbuf");
        unit_add(tc, test_strbuf_appends);
        unit_add(tc, test_strbuf_empty_append_gives_empty_string);
        unit_add(tc, test_strbuf_fills_up_to_limit);
        unit_add(tc, test_strbuf_append_past_limit_fails_unchanged);
        unit_add(tc, test_strbuf_huge_append_fails);

        tc = unit_tcase(s, "sandbox_path");
        unit_add(tc, test_sandbox_path_is_normalized);
        unit_add(tc, test_sandbox_root_stays_root);
        unit_add(tc, test_sandbox_path_relative_is_refused);
        unit_add(tc, test_sandbox_path_dotdot_is_refused);

        tc = unit_tcase(s, "hostname");
        unit_add(tc, test_hostname_valid);
        unit_add(tc, test_hostname_invalid);

        tc = unit_tcase(s, "escape");
        unit_add(tc, test_escape_controls_c0_del_c1_and_bad_utf8);
        unit_add(tc, test_json_escape_c1_keeps_the_value);
        tc = unit_tcase(s, "userns");
        unit_add(tc, test_userns_owner_is_the_sandboxes_host_id_only_around_the_clone);
        unit_add(tc, test_userns_hint_names_the_sysctl_and_its_fix);
        return s;
}
