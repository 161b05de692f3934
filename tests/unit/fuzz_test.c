/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The fuzz harnesses (tests/fuzz/, one file each) built without libFuzzer: every seed of
 * tests/fuzz/corpus/<target>/ and every input that once crashed a target,
 * tests/fuzz/regress/<target>/, goes through the same entry point libFuzzer calls.  A crash or
 * a broken promise aborts the test (each runs forked); a missing corpus fails it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include "../../runtime/util.h"
#include "unit.h"

typedef int (*fuzz_entry)(const uint8_t *data, size_t size);
int nsbox_fuzz_frame(const uint8_t *data, size_t size);
int nsbox_fuzz_tool(const uint8_t *data, size_t size);
int nsbox_fuzz_policy(const uint8_t *data, size_t size);
int nsbox_fuzz_rpc(const uint8_t *data, size_t size);
int nsbox_fuzz_dconfig(const uint8_t *data, size_t size);
int nsbox_fuzz_apikeys(const uint8_t *data, size_t size);
int nsbox_fuzz_connect(const uint8_t *data, size_t size);
int nsbox_fuzz_path(const uint8_t *data, size_t size);
int nsbox_fuzz_spec(const uint8_t *data, size_t size);

/* Every file of tests/fuzz/<kind>/<target>/ through fn; how many.  -1 when the directory is
 * missing, unless it may be (regress/ of a target that never crashed). */
static int replay_dir(const char *kind, const char *target, fuzz_entry fn, bool required)
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/tests/fuzz/%s/%s", unit_src(), kind, target);
        DIR *d = opendir(dir);
        /* no assertion on the way when all is well: a crash is then reported at the test's own
         * mark_point, under the test's name */
        if (!d) {
                if (required || errno != ENOENT)
                        ck_abort_msg("cannot open '%s': %s", dir, strerror(errno));
                return 0;
        }
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char *text = NULL;
                size_t len = 0;
                int r = read_file_at(dirfd(d), de->d_name, 0, 16u << 20, &text, &len);
                if (r < 0)
                        ck_abort_msg("cannot read '%s/%s': %s", dir, de->d_name, strerror(-r));
                fn((const uint8_t *)text, len);
                free(text);
                n++;
        }
        closedir(d);
        return n;
}

/* How many inputs went through fn without a crash; the seeds must exist. */
static int replay(const char *target, fuzz_entry fn)
{
        int seeds = replay_dir("corpus", target, fn, true);
        if (seeds == 0)
                return 0;
        return seeds + replay_dir("regress", target, fn, false);
}

/* One test per target: its seeds and regression inputs, replayed. */
#define REPLAY_TEST(target)                                                                                   \
        START_TEST(fuzz_##target##_seeds_and_regressions_replay_cleanly)                                      \
        {                                                                                                     \
                mark_point();                                                                                 \
                ck_assert_msg(replay(#target, nsbox_fuzz_##target) > 0, "no seeds in tests/fuzz/corpus/" #target); \
        }                                                                                                     \
        END_TEST

REPLAY_TEST(frame)
REPLAY_TEST(tool)
REPLAY_TEST(policy)
REPLAY_TEST(rpc)
REPLAY_TEST(dconfig)
REPLAY_TEST(apikeys)
REPLAY_TEST(connect)
REPLAY_TEST(path)
REPLAY_TEST(spec)

Suite *fuzz_suite(void)
{
        Suite *s = suite_create("fuzz");
        TCase *tc = unit_tcase(s, "fuzz");
        tcase_set_timeout(tc, 60);
        unit_add(tc, fuzz_frame_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_tool_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_policy_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_rpc_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_dconfig_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_apikeys_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_connect_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_path_seeds_and_regressions_replay_cleanly);
        unit_add(tc, fuzz_spec_seeds_and_regressions_replay_cleanly);
        return s;
}
