/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The watch engine (runtime/watch.c) on a temporary root: each op, recursive watches of new
 * directories, planted symlinks, the bounds and the end when the watched directory goes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/watch.h"
#include "tool_fixture.h"
#include "unit.h"

static void base_setup(void) { fixture_base_setup("watch"); }
static void test_setup(void) { fixture_test_setup(); }

static strbuf seen; /* "op type path\n" per event */

static void collect(void *ud, const char *op, const char *path, const char *type)
{
        (void)ud;
        sb_appendf(&seen, "%s %s %s\n", op, type ? type : "-", path);
}

/* Read every event there is (until 200 ms pass without one); the last read's return. */
static int drain(nsbox_watch *w)
{
        int r = 0;
        struct pollfd p = { .fd = nsbox_watch_fd(w), .events = POLLIN };
        while (r == 0 && poll(&p, 1, 200) == 1)
                r = nsbox_watch_read(w, collect, NULL);
        return r;
}

static nsbox_watch *open_ok(const char *path, bool recursive)
{
        nsbox_watch *w = NULL;
        int r = nsbox_watch_open(&ctx, path, recursive, &w, &err);
        ck_assert_msg(r == 0, "watch '%s': %s", path, err.message);
        sb_release(&seen);
        sb_init(&seen, 1 << 20);
        return w;
}

static void write_file(const char *host, const char *text)
{
        int fd = open(host, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static const char *seen_text(void) { return seen.buf ? seen.buf : ""; }

START_TEST(test_watch_reports_each_op_in_order_with_the_callers_path)
{
        ck_assert_int_eq(mkdir(H("d"), 0755), 0);
        nsbox_watch *w = open_ok("d/", false);
        write_file(H("d/a.txt"), "hi\n");
        ck_assert_int_eq(chmod(H("d/a.txt"), 0600), 0);
        ck_assert_int_eq(rename(H("d/a.txt"), H("d/b.txt")), 0);
        ck_assert_int_eq(symlink("b.txt", H("d/l")), 0);
        ck_assert_int_eq(mkdir(H("d/sub"), 0755), 0);
        ck_assert_int_eq(drain(w), 0);
        ck_assert_int_eq(unlink(H("d/b.txt")), 0);
        ck_assert_int_eq(drain(w), 0);
        ck_assert_str_eq(seen_text(), "create file d/a.txt\n"
                                      "write file d/a.txt\n"
                                      "chmod file d/a.txt\n"
                                      "rename file d/a.txt\n"
                                      "create file d/b.txt\n"
                                      "create symlink d/l\n"
                                      "create dir d/sub\n"
                                      "remove file d/b.txt\n");
        /* not recursive: what happens in d/sub is not seen */
        sb_release(&seen);
        sb_init(&seen, 1 << 20);
        write_file(H("d/sub/x"), "x");
        ck_assert_int_eq(drain(w), 0);
        ck_assert_str_eq(seen_text(), "");
        ck_assert_uint_eq(nsbox_watch_dirs(w), 1);
        nsbox_watch_free(w);
}
END_TEST

START_TEST(test_watch_recursive_follows_old_and_new_subdirectories)
{
        ck_assert_int_eq(mkdir(H("d"), 0755), 0);
        ck_assert_int_eq(mkdir(H("d/old"), 0755), 0);
        nsbox_watch *w = open_ok("/d", true);
        ck_assert_uint_eq(nsbox_watch_dirs(w), 2);
        write_file(H("d/old/x"), "x");
        ck_assert_int_eq(mkdir(H("d/new"), 0755), 0);
        ck_assert_int_eq(drain(w), 0);
        write_file(H("d/new/y"), "y");
        ck_assert_int_eq(drain(w), 0);
        ck_assert_str_eq(seen_text(), "create file /d/old/x\n"
                                      "write file /d/old/x\n"
                                      "create dir /d/new\n"
                                      "create file /d/new/y\n"
                                      "write file /d/new/y\n");
        ck_assert_uint_eq(nsbox_watch_dirs(w), 3);
        /* a tree made at once: what was in it before its watch counts as created */
        sb_release(&seen);
        sb_init(&seen, 1 << 20);
        ck_assert_int_eq(mkdir(H("d/t"), 0755), 0);
        ck_assert_int_eq(mkdir(H("d/t/u"), 0755), 0);
        write_file(H("d/t/u/z"), "z");
        ck_assert_int_eq(drain(w), 0);
        ck_assert_msg(strstr(seen_text(), "create dir /d/t\n") == seen.buf, "%s", seen_text());
        ck_assert_msg(strstr(seen_text(), "create dir /d/t/u\n"), "%s", seen_text());
        ck_assert_msg(strstr(seen_text(), "create file /d/t/u/z\n"), "%s", seen_text());
        /* moved away: its watches go */
        ck_assert_int_eq(rename(H("d/t"), H("gone")), 0);
        ck_assert_int_eq(drain(w), 0);
        ck_assert_uint_eq(nsbox_watch_dirs(w), 3);
        nsbox_watch_free(w);
}
END_TEST

START_TEST(test_watch_ends_when_the_directory_goes)
{
        ck_assert_int_eq(mkdir(H("d"), 0755), 0);
        nsbox_watch *w = open_ok("d", false);
        ck_assert_int_eq(rmdir(H("d")), 0);
        ck_assert_int_eq(drain(w), 1);
        ck_assert_msg(strstr(seen_text(), "remove dir d\n"), "%s", seen_text());
        ck_assert_int_eq(nsbox_watch_read(w, collect, NULL), 1);
        nsbox_watch_free(w);

        ck_assert_int_eq(mkdir(H("e"), 0755), 0);
        w = open_ok("e", false);
        ck_assert_int_eq(rename(H("e"), H("f")), 0);
        ck_assert_int_eq(drain(w), 1);
        ck_assert_str_eq(seen_text(), "rename dir e\n");
        nsbox_watch_free(w);
}
END_TEST

START_TEST(test_watch_planted_symlinks_resolve_inside_the_root)
{
        /* the host's outside/ is next to root/: links to it resolve inside the root instead */
        ck_assert_int_eq(symlink(outside_dir, H("abs")), 0);
        ck_assert_int_eq(symlink("../outside", H("rel")), 0);
        nsbox_watch *w = NULL;
        ck_assert_int_eq(nsbox_watch_open(&ctx, "abs", false, &w, &err), -1);
        ck_assert_int_eq(err.code, TOOL_FILE_NOT_FOUND);
        ck_assert_int_eq(nsbox_watch_open(&ctx, "rel", false, &w, &err), -1);
        ck_assert_int_eq(err.code, TOOL_FILE_NOT_FOUND);
        ck_assert_ptr_null(strchr(err.message, '\n'));
        /* a link to a directory inside the root is followed there */
        ck_assert_int_eq(mkdir(H("outside"), 0755), 0);
        w = open_ok("rel", false);
        write_file(H("outside/in"), "i");
        char host[PATH_MAX];
        snprintf(host, sizeof(host), "%s/out", outside_dir);
        write_file(host, "o");
        ck_assert_int_eq(drain(w), 0);
        ck_assert_str_eq(seen_text(), "create file rel/in\nwrite file rel/in\n");
        nsbox_watch_free(w);
}
END_TEST

START_TEST(test_watch_refuses_a_file_a_missing_path_and_too_many_directories)
{
        nsbox_watch *w = NULL;
        write_file(H("f"), "f");
        ck_assert_int_eq(nsbox_watch_open(&ctx, "f", false, &w, &err), -1);
        ck_assert_int_eq(err.code, TOOL_NOT_A_DIRECTORY);
        ck_assert_msg(!strncmp(err.message, "watch: ", 7), "%s", err.message);
        ck_assert_int_eq(nsbox_watch_open(&ctx, "/nope", false, &w, &err), -1);
        ck_assert_int_eq(err.code, TOOL_FILE_NOT_FOUND);
        ck_assert_int_eq(nsbox_watch_open(&ctx, "", false, &w, &err), -1);
        ck_assert_int_eq(err.code, TOOL_INVALID_PATH);
        ck_assert_ptr_null(w);
        /* one directory more than the cap */
        ck_assert_int_eq(mkdir(H("big"), 0755), 0);
        char p[64];
        for (unsigned i = 0; i < NSBOX_WATCH_MAX_DIRS; i++) {
                snprintf(p, sizeof(p), "big/%u", i);
                ck_assert_int_eq(mkdir(H(p), 0755), 0);
        }
        ck_assert_int_eq(nsbox_watch_open(&ctx, "big", true, &w, &err), -1);
        ck_assert_int_eq(err.code, TOOL_TOO_LARGE);
        ck_assert_msg(strstr(err.message, "4096"), "%s", err.message);
        ck_assert_ptr_null(strchr(err.message, '\n'));
        /* not recursive: one directory */
        w = open_ok("big", false);
        ck_assert_uint_eq(nsbox_watch_dirs(w), 1);
        nsbox_watch_free(w);
}
END_TEST

START_TEST(test_watch_reports_an_overflowing_queue)
{
        /* the kernel queues max_queued_events events per inotify instance, then one overflow */
        long max = 0;
        FILE *f = fopen("/proc/sys/fs/inotify/max_queued_events", "re");
        if (f) {
                if (fscanf(f, "%ld", &max) != 1)
                        max = 0;
                fclose(f);
        }
        if (max <= 0 || max > 200000)
                return; /* nothing sensible to fill */
        ck_assert_int_eq(mkdir(H("d"), 0755), 0);
        nsbox_watch *w = open_ok("d", false);
        char p[64];
        for (long i = 0; i <= max / 2; i++) { /* two events each: create, write */
                snprintf(p, sizeof(p), "d/%ld", i);
                write_file(H(p), "");
        }
        ck_assert_int_eq(drain(w), 0);
        ck_assert_msg(strstr(seen_text(), "\noverflow - d\n"), "no overflow after %ld events", max);
        nsbox_watch_free(w);
}
END_TEST

Suite *watch_suite(void)
{
        Suite *s = suite_create("watch");
        TCase *tc = unit_tcase(s, "watch");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, test_setup, test_teardown);
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_watch_reports_each_op_in_order_with_the_callers_path);
        unit_add(tc, test_watch_recursive_follows_old_and_new_subdirectories);
        unit_add(tc, test_watch_ends_when_the_directory_goes);
        unit_add(tc, test_watch_planted_symlinks_resolve_inside_the_root);
        unit_add(tc, test_watch_refuses_a_file_a_missing_path_and_too_many_directories);
        unit_add(tc, test_watch_reports_an_overflowing_queue);
        return s;
}
