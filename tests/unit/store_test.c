/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The layer store: names, snapshots bound atomically, holds that keep a snapshot and its layers,
 * and collection of what nothing uses (store.h). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/store.h"
#include "../../runtime/treecopy.h"
#include "../../runtime/util.h"
#include "unit.h"

typedef struct fixture {
        char dir[64];
        char store[96];
        char upper[96];
        int upper_fd;
        nsbox_store st;
} fixture;

static void fx_open(fixture *f)
{
        snprintf(f->dir, sizeof(f->dir), "/tmp/nsbox-store-test.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(f->dir));
        snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
        snprintf(f->upper, sizeof(f->upper), "%s/upper", f->dir);
        ck_assert_int_eq(mkdir(f->upper, 0755), 0);
        char path[160];
        snprintf(path, sizeof(path), "%s/a", f->upper);
        ck_assert_int_eq(write_file_at(AT_FDCWD, path, "one\n", 0644), 0);
        f->upper_fd = open(f->upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(f->upper_fd, 0);
        setenv("NSBOX_STORE", f->store, 1);
        nsbox_error err = { 0 };
        f->st = (nsbox_store)NSBOX_STORE_INIT;
        UNIT_ASSERT_OK(nsbox_store_open(true, &f->st, &err), &err);
}

static void fx_close(fixture *f)
{
        nsbox_store_close(&f->st);
        close(f->upper_fd);
        _cleanup_close_ int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        nsbox_tree_remove(tmp, f->dir + strlen("/tmp/"), NULL);
        unsetenv("NSBOX_STORE");
}

static size_t count_entries(const char *dir)
{
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
        FILE *p = popen(cmd, "r");
        size_t n = 0;
        ck_assert_int_eq(fscanf(p, "%zu", &n), 1);
        pclose(p);
        return n;
}

START_TEST(test_snapshot_names_refuse_paths_and_dots)
{
        nsbox_error err = { 0 };
        const char *good[] = { "a", "base-1.0_x", "0", NULL };
        const char *bad[] = { "", "../x", ".hidden", "a/b", "a b", "-x", "é", NULL };
        for (const char **g = good; *g; g++)
                UNIT_ASSERT_OK(nsbox_snapshot_name_check(*g, &err), &err);
        for (const char **b = bad; *b; b++) {
                ck_assert_int_eq(nsbox_snapshot_name_check(*b, &err), -EINVAL);
                UNIT_ASSERT_ERROR(&err, "invalid snapshot name");
        }
        char longname[130];
        memset(longname, 'a', 129);
        longname[129] = '\0';
        ck_assert_int_eq(nsbox_snapshot_name_check(longname, &err), -EINVAL);
        UNIT_ASSERT_ERROR(&err, "1-128");
        longname[128] = '\0';
        UNIT_ASSERT_OK(nsbox_snapshot_name_check(longname, &err), &err);
}
END_TEST

START_TEST(test_snapshot_is_listed_with_its_layer_and_refuses_a_second_of_the_same_name)
{
        fixture f;
        fx_open(&f);
        nsbox_error err = { 0 };
        nsbox_snapshot_stats stats;
        UNIT_ASSERT_OK(nsbox_store_snapshot(&f.st, "s1", f.upper_fd, NULL, "host", "/workspace", "sb1", 0, &stats, &err), &err);
        ck_assert_uint_eq(stats.files, 1);
        ck_assert_uint_eq(stats.bytes, 4);
        ck_assert(nsbox_store_has_snapshot(&f.st, "s1"));
        ck_assert_int_eq(nsbox_store_snapshot(&f.st, "s1", f.upper_fd, NULL, "host", "/workspace", "sb1", 0, NULL, &err), -EEXIST);
        UNIT_ASSERT_ERROR(&err, "snapshot 's1' exists");
        json_t *list = NULL;
        UNIT_ASSERT_OK(nsbox_store_list(&f.st, &list, &err), &err);
        ck_assert_uint_eq(json_array_size(list), 1);
        json_t *s = json_array_get(list, 0);
        ck_assert_str_eq(json_string_value(json_object_get(s, "name")), "s1");
        ck_assert_str_eq(json_string_value(json_object_get(s, "root")), "host");
        ck_assert(json_is_false(json_object_get(s, "in_use")));
        const char *id = json_string_value(json_array_get(json_object_get(s, "layers"), 0));
        char path[256];
        snprintf(path, sizeof(path), "%s/layers/%s/a", f.store, id);
        _cleanup_free_ char *text = NULL;
        size_t len;
        ck_assert_int_eq(read_file_at(AT_FDCWD, path, 0, 100, &text, &len), 0);
        ck_assert_str_eq(text, "one\n");
        json_decref(list);
        /* nothing unfinished remains, one layer */
        snprintf(path, sizeof(path), "%s/tmp", f.store);
        ck_assert_uint_eq(count_entries(path), 0);
        snprintf(path, sizeof(path), "%s/layers", f.store);
        ck_assert_uint_eq(count_entries(path), 1);
        fx_close(&f);
}
END_TEST

START_TEST(test_a_snapshot_on_a_snapshot_lists_both_layers_topmost_first)
{
        fixture f;
        fx_open(&f);
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_store_snapshot(&f.st, "base", f.upper_fd, NULL, "host", "/workspace", "sb1", 0, NULL, &err), &err);
        nsbox_layers l = NSBOX_LAYERS_INIT;
        UNIT_ASSERT_OK(nsbox_store_acquire_snapshot(&f.st, "base", &l, &err), &err);
        ck_assert_uint_eq(l.n, 1);
        ck_assert_str_eq(l.snapshot, "base");
        ck_assert_ptr_null(l.paths[1]); /* NULL-terminated for the overlay's lowerdir */
        UNIT_ASSERT_OK(nsbox_store_snapshot(&f.st, "child", f.upper_fd, &l, "host", "/workspace", "sb2", 0, NULL, &err), &err);
        nsbox_layers c = NSBOX_LAYERS_INIT;
        UNIT_ASSERT_OK(nsbox_store_acquire_snapshot(&f.st, "child", &c, &err), &err);
        ck_assert_uint_eq(c.n, 2);
        ck_assert_str_eq(c.ids[1], l.ids[0]);
        ck_assert_str_ne(c.ids[0], l.ids[0]);
        nsbox_layers_release(&c);
        nsbox_layers_release(&l);
        fx_close(&f);
}
END_TEST

START_TEST(test_a_snapshot_in_use_cannot_be_deleted_and_its_layers_survive_gc)
{
        fixture f;
        fx_open(&f);
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_store_snapshot(&f.st, "s", f.upper_fd, NULL, "host", "/workspace", "sb", 0, NULL, &err), &err);
        nsbox_layers l = NSBOX_LAYERS_INIT;
        UNIT_ASSERT_OK(nsbox_store_acquire_snapshot(&f.st, "s", &l, &err), &err);
        /* the hold is a lock another process sees: delete from a child, as nsbox snapshot rm would */
        pid_t pid = fork();
        if (pid == 0) {
                nsbox_store st2 = NSBOX_STORE_INIT;
                nsbox_error e = { 0 };
                int r = nsbox_store_open(false, &st2, &e);
                if (r == 0)
                        r = nsbox_store_delete_snapshot(&st2, "s", &e);
                bool refused = r == -EBUSY && e.msg && strstr(e.msg, "in use");
                /* freed before _exit: the child's leaks count under valgrind too */
                nsbox_error_clear(&e);
                nsbox_store_close(&st2);
                _exit(refused ? 0 : 1);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a snapshot held by another process was deleted");
        ck_assert(nsbox_store_has_snapshot(&f.st, "s"));
        json_t *list = NULL;
        UNIT_ASSERT_OK(nsbox_store_list(&f.st, &list, &err), &err);
        ck_assert(json_is_true(json_object_get(json_array_get(list, 0), "in_use")));
        json_decref(list);
        nsbox_layers_release(&l);
        UNIT_ASSERT_OK(nsbox_store_delete_snapshot(&f.st, "s", &err), &err);
        ck_assert(!nsbox_store_has_snapshot(&f.st, "s"));
        ck_assert_int_eq(nsbox_store_delete_snapshot(&f.st, "s", &err), -ENOENT);
        UNIT_ASSERT_ERROR(&err, "no snapshot 's'");
        nsbox_gc_stats gs;
        UNIT_ASSERT_OK(nsbox_store_gc(&f.st, &gs, &err), &err);
        ck_assert_uint_eq(gs.layers_removed, 1);
        char path[160];
        snprintf(path, sizeof(path), "%s/layers", f.store);
        ck_assert_uint_eq(count_entries(path), 0);
        fx_close(&f);
}
END_TEST

START_TEST(test_gc_keeps_layers_a_sandbox_holds_and_removes_unfinished_ones)
{
        fixture f;
        fx_open(&f);
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_store_snapshot(&f.st, "s", f.upper_fd, NULL, "host", "/workspace", "sb", 0, NULL, &err), &err);
        nsbox_layers l = NSBOX_LAYERS_INIT;
        UNIT_ASSERT_OK(nsbox_store_acquire_snapshot(&f.st, "s", &l, &err), &err);
        /* the name goes (by hand, as a crash between bind and name would leave it), the hold stays */
        char path[200];
        snprintf(path, sizeof(path), "%s/snapshots/s.json", f.store);
        ck_assert_int_eq(unlink(path), 0);
        /* an unfinished layer whose writer died, and one whose writer lives (we hold it) */
        char dead[64], live[64];
        int fd = nsbox_store_tmp(&f.st, dead, &err);
        ck_assert_int_ge(fd, 0);
        close(fd);
        int live_fd = nsbox_store_tmp(&f.st, live, &err);
        ck_assert_int_ge(live_fd, 0);
        nsbox_gc_stats gs;
        UNIT_ASSERT_OK(nsbox_store_gc(&f.st, &gs, &err), &err);
        ck_assert_uint_eq(gs.layers_removed, 0);
        ck_assert_uint_eq(gs.layers_kept, 1);
        ck_assert_uint_eq(gs.tmp_removed, 1);
        snprintf(path, sizeof(path), "%s/tmp/%s", f.store, live);
        ck_assert_int_eq(access(path, F_OK), 0);
        nsbox_store_tmp_done(&f.st, live, live_fd);
        nsbox_layers_release(&l);
        UNIT_ASSERT_OK(nsbox_store_gc(&f.st, &gs, &err), &err);
        ck_assert_uint_eq(gs.layers_removed, 1);
        fx_close(&f);
}
END_TEST

START_TEST(test_unknown_snapshot_and_foreign_store_are_refused)
{
        fixture f;
        fx_open(&f);
        nsbox_error err = { 0 };
        nsbox_layers l = NSBOX_LAYERS_INIT;
        ck_assert_int_eq(nsbox_store_acquire_snapshot(&f.st, "nope", &l, &err), -ENOENT);
        UNIT_ASSERT_ERROR(&err, "no snapshot 'nope'");
        ck_assert_int_eq(nsbox_store_acquire_snapshot(&f.st, "../x", &l, &err), -EINVAL);
        UNIT_ASSERT_ERROR(&err, "invalid snapshot name");
        /* a store others may write to could hold planted layers */
        ck_assert_int_eq(chmod(f.store, 0777), 0);
        nsbox_store st2 = NSBOX_STORE_INIT;
        ck_assert_int_lt(nsbox_store_open(false, &st2, &err), 0);
        UNIT_ASSERT_ERROR(&err, "refusing to use it");
        ck_assert_int_eq(chmod(f.store, 0700), 0);
        setenv("NSBOX_STORE", "relative/dir", 1);
        ck_assert_int_lt(nsbox_store_open(true, &st2, &err), 0);
        UNIT_ASSERT_ERROR(&err, "expected an absolute path");
        fx_close(&f);
}
END_TEST

Suite *store_suite(void)
{
        Suite *s = suite_create("store");
        TCase *tc = unit_tcase(s, "store");
        unit_add(tc, test_snapshot_names_refuse_paths_and_dots);
        unit_add(tc, test_snapshot_is_listed_with_its_layer_and_refuses_a_second_of_the_same_name);
        unit_add(tc, test_a_snapshot_on_a_snapshot_lists_both_layers_topmost_first);
        unit_add(tc, test_a_snapshot_in_use_cannot_be_deleted_and_its_layers_survive_gc);
        unit_add(tc, test_gc_keeps_layers_a_sandbox_holds_and_removes_unfinished_ones);
        unit_add(tc, test_unknown_snapshot_and_foreign_store_are_refused);
        return s;
}
