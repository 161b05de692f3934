/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox run` options: how the command line is split between nsbox and the command, and how the
 * options change the policy the sandbox gets. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../runtime/options.h"
#include "../../runtime/params.h"
#include "unit.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)
#define SENTINEL ((nsbox_policy *)(uintptr_t)0x5e5e5e5e)
#define INHERITED "NSBOX_UNIT_INHERITED"

/* The value of KEY in a "K=V" list, or NULL; *count says how many entries set KEY. */
static const char *env_value(char **env, const char *key, int *count)
{
        const char *v = NULL;
        size_t n = strlen(key);
        *count = 0;
        for (char **e = env; e && *e; e++)
                if (!strncmp(*e, key, n) && (*e)[n] == '=') {
                        v = *e + n + 1;
                        (*count)++;
                }
        return v;
}

/* Parse argv (NULL-terminated) as `nsbox run` would, then build the policy.  Returns the first
 * failure; *p is left as SENTINEL unless the policy is built. */
static int run_policy(char **argv, nsbox_policy **p, nsbox_error *err)
{
        int argc = 0;
        while (argv[argc])
                argc++;
        nsbox_run_options o;
        *p = SENTINEL;
        int r = nsbox_run_options_parse(argc, argv, &o, err);
        if (r == 0)
                r = nsbox_run_options_policy(&o, p, err);
        nsbox_run_options_release(&o);
        return r;
}

/* "default" is the repository's policy/default.json, and the variable -e NAME tests use is unset. */
static void policy_path_setup(void)
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/policy", unit_src());
        setenv("NSBOX_POLICY_PATH", dir, 1);
        unsetenv(INHERITED);
}

static void policy_path_teardown(void)
{
        unsetenv("NSBOX_POLICY_PATH");
        unsetenv(INHERITED);
}

/* The policy the options give is built, in *p for the test to check and free. */
#define ASSERT_POLICY(argv, p)                                                       \
        do {                                                                         \
                nsbox_error _err = { 0 };                                            \
                UNIT_ASSERT_OK(run_policy((argv), (p), &_err), &_err);               \
                ck_assert_ptr_ne(*(p), SENTINEL);                                    \
        } while (0)

/* The options are refused, on one line naming each needle, and no policy comes out. */
#define ASSERT_POLICY_REFUSED(argv, ...)                                             \
        do {                                                                         \
                nsbox_error _err = { 0 };                                            \
                nsbox_policy *_p;                                                    \
                int _r = run_policy((argv), &_p, &_err);                             \
                if (_r == 0 || _p != SENTINEL) {                                     \
                        if (_r == 0 && _p != SENTINEL)                               \
                                nsbox_policy_free(_p);                               \
                        nsbox_error_clear(&_err);                                    \
                }                                                                    \
                ck_assert_msg(_r < 0, "options were accepted");                      \
                ck_assert_msg(_p == SENTINEL, "the result was written on failure"); \
                UNIT_ASSERT_ERROR(&_err, __VA_ARGS__);                               \
        } while (0)

/* argv parses; the options are in *o for the test to check and release. */
#define ASSERT_PARSES(argv, o)                                                       \
        do {                                                                         \
                nsbox_error _err = { 0 };                                            \
                int _r = nsbox_run_options_parse(ARGC(argv), (argv), (o), &_err);    \
                if (_r < 0)                                                          \
                        nsbox_run_options_release(o);                                \
                UNIT_ASSERT_OK(_r, &_err);                                           \
        } while (0)

/* Parsing argv fails, on one line naming each needle. */
#define ASSERT_PARSE_REFUSED(argv, ...)                                              \
        do {                                                                         \
                nsbox_error _err = { 0 };                                            \
                nsbox_run_options _o;                                                \
                int _r = nsbox_run_options_parse(ARGC(argv), (argv), &_o, &_err);    \
                nsbox_run_options_release(&_o);                                      \
                if (_r == 0)                                                         \
                        nsbox_error_clear(&_err);                                    \
                ck_assert_msg(_r < 0, "options were accepted");                      \
                UNIT_ASSERT_ERROR(&_err, __VA_ARGS__);                               \
        } while (0)

/* ---- parsing the command line ---- */

START_TEST(test_command_follows_options)
{
        char *argv[] = { "run", "--workdir", "/w", "--json", "ls", "/", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(argv, &o);
        ck_assert_str_eq(o.workdir, "/w");
        ck_assert(o.json);
        ck_assert_str_eq(o.policy, "default");
        ck_assert_str_eq(o.argv[0], "ls");
        ck_assert_str_eq(o.argv[1], "/");
        ck_assert_ptr_null(o.argv[2]);
        nsbox_run_options_release(&o);
}
END_TEST

START_TEST(test_command_follows_double_dash)
{
        char *argv[] = { "run", "--policy", "strict", "--", "--json", "x", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(argv, &o);
        ck_assert_str_eq(o.policy, "strict");
        ck_assert(!o.json);
        ck_assert_str_eq(o.argv[0], "--json");
        ck_assert_str_eq(o.argv[1], "x");
        ck_assert_ptr_null(o.argv[2]);
        nsbox_run_options_release(&o);
}
END_TEST

START_TEST(test_options_after_command_belong_to_command)
{
        char *argv[] = { "run", "ls", "-la", "--timeout", "abc", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(argv, &o);
        ck_assert(!o.has_timeout);
        ck_assert_str_eq(o.argv[0], "ls");
        ck_assert_str_eq(o.argv[1], "-la");
        ck_assert_str_eq(o.argv[2], "--timeout");
        ck_assert_str_eq(o.argv[3], "abc");
        ck_assert_ptr_null(o.argv[4]);
        nsbox_run_options_release(&o);
}
END_TEST

START_TEST(test_unknown_long_option_is_named)
{
        char *argv[] = { "run", "--nope", "ls", NULL };
        ASSERT_PARSE_REFUSED(argv, "'--nope'", "unknown option");
}
END_TEST

START_TEST(test_unknown_short_option_is_named)
{
        char *argv[] = { "run", "-x", "ls", NULL };
        ASSERT_PARSE_REFUSED(argv, "'-x'", "unknown option");
}
END_TEST

START_TEST(test_option_without_value_says_it_needs_one)
{
        char *argv[] = { "run", "--timeout", NULL };
        ASSERT_PARSE_REFUSED(argv, "--timeout", "needs a value");
}
END_TEST

START_TEST(test_missing_command_is_refused)
{
        char *argv[] = { "run", "--json", NULL };
        ASSERT_PARSE_REFUSED(argv, "no command");
}
END_TEST

START_TEST(test_missing_command_after_double_dash_is_refused)
{
        char *argv[] = { "run", "--", NULL };
        ASSERT_PARSE_REFUSED(argv, "no command");
}
END_TEST

START_TEST(test_help_needs_no_command)
{
        char *argv[] = { "run", "--help", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(argv, &o);
        ck_assert(o.help);
        nsbox_run_options_release(&o);
}
END_TEST

START_TEST(test_timeout_in_seconds_gives_milliseconds)
{
        char *argv[] = { "run", "--timeout", "0.5", "true", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(argv, &o);
        ck_assert(o.has_timeout);
        ck_assert_uint_eq(o.timeout_ms, 500);
        nsbox_run_options_release(&o);
}
END_TEST

START_TEST(test_bad_timeout_is_refused)
{
        char *argv[] = { "run", "--timeout", "abc", "true", NULL };
        ASSERT_PARSE_REFUSED(argv, "--timeout", "'abc'");
}
END_TEST

START_TEST(test_disk_size_is_parsed)
{
        char *argv[] = { "run", "--disk", "512M", "true", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(argv, &o);
        ck_assert(o.has_disk);
        ck_assert_uint_eq(o.disk, 512ull << 20);
        nsbox_run_options_release(&o);
}
END_TEST

START_TEST(test_disk_below_1M_is_refused)
{
        char *argv[] = { "run", "--disk", "10", "true", NULL };
        ASSERT_PARSE_REFUSED(argv, "--disk", "'10'");
}
END_TEST

START_TEST(test_limit_options_set_the_policy_limits)
{
        char *argv[] = { "run", "--memory", "64M", "--pids", "64", "--cpus", "0.5", "true", NULL };
        nsbox_policy *p;
        nsbox_error err = { 0 };
        ck_assert_int_eq(run_policy(argv, &p, &err), 0);
        ck_assert_uint_eq(p->limits.memory, 64ull << 20);
        ck_assert_uint_eq(p->limits.pids, 64);
        ck_assert(p->limits.cpus > 0.499 && p->limits.cpus < 0.501);
        ck_assert(!p->limits.swap_set); /* no swap unless the policy says so */
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bad_limit_values_are_refused)
{
        char *mem[] = { "run", "--memory", "512K", "true", NULL };
        ASSERT_PARSE_REFUSED(mem, "--memory", "'512K'", "at least 1M");
        char *pids[] = { "run", "--pids", "0", "true", NULL };
        ASSERT_PARSE_REFUSED(pids, "--pids", "'0'", "1 to 4194304");
        char *pids2[] = { "run", "--pids", "12x", "true", NULL };
        ASSERT_PARSE_REFUSED(pids2, "--pids", "'12x'");
        char *cpus[] = { "run", "--cpus", "0", "true", NULL };
        ASSERT_PARSE_REFUSED(cpus, "--cpus", "'0'", "above 0");
        char *cpus2[] = { "run", "--cpus", "1e9", "true", NULL };
        ASSERT_PARSE_REFUSED(cpus2, "--cpus", "'1e9'", "at most 1024");
        char *cpus3[] = { "run", "--cpus", "nan", "true", NULL };
        ASSERT_PARSE_REFUSED(cpus3, "--cpus", "'nan'");
}
END_TEST

START_TEST(test_env_option_repeats)
{
        char *argv[] = { "run", "-e", "A=1", "--env", "B=2", "-eC=3", "true", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(argv, &o);
        ck_assert_ptr_nonnull(o.env);
        ck_assert_str_eq(o.env[0], "A=1");
        ck_assert_str_eq(o.env[1], "B=2");
        ck_assert_str_eq(o.env[2], "C=3");
        ck_assert_ptr_null(o.env[3]);
        nsbox_run_options_release(&o);
}
END_TEST

START_TEST(test_parsing_twice_in_one_process_works)
{
        char *a1[] = { "run", "-e", "A=1", "x", NULL };
        char *a2[] = { "run", "--json", "y", NULL };
        nsbox_run_options o;
        ASSERT_PARSES(a1, &o);
        nsbox_run_options_release(&o);
        ASSERT_PARSES(a2, &o);
        ck_assert(o.json);
        ck_assert_ptr_null(o.env);
        ck_assert_str_eq(o.argv[0], "y");
        nsbox_run_options_release(&o);
}
END_TEST

/* ---- options applied to the policy ---- */

START_TEST(test_no_options_give_the_default_policy)
{
        char *argv[] = { "run", "true", NULL };
        nsbox_policy *p;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(p->workdir, "/workspace");
        ck_assert_uint_eq(p->uid, 1000);
        ck_assert_uint_eq(p->n_mounts, 0);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_missing_policy_is_named)
{
        char *argv[] = { "run", "--policy", "nsbox-unit-no-such-policy", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "nsbox-unit-no-such-policy");
}
END_TEST

START_TEST(test_workdir_moves_workdir_and_home)
{
        char *argv[] = { "run", "--workdir", "/w//x/", "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(p->workdir, "/w/x");
        ck_assert_str_eq(p->home, "/w/x");
        ck_assert_str_eq(env_value(p->env, "HOME", &n), "/w/x");
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_relative_workdir_is_refused)
{
        char *argv[] = { "run", "--workdir", "w", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--workdir", "'w'");
}
END_TEST

START_TEST(test_root_workdir_is_refused)
{
        char *argv[] = { "run", "--workdir", "/", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--workdir", "'/'");
}
END_TEST

START_TEST(test_bad_hostname_is_refused)
{
        char *argv[] = { "run", "--hostname", "bad!", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--hostname", "'bad!'");
}
END_TEST

START_TEST(test_hostname_is_set)
{
        char *argv[] = { "run", "--hostname", "box-1", "true", NULL };
        nsbox_policy *p;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(p->hostname, "box-1");
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bad_net_is_refused)
{
        char *argv[] = { "run", "--net", "host", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--net", "'host'");
}
END_TEST

START_TEST(test_timeout_and_disk_reach_the_limits)
{
        char *argv[] = { "run", "--timeout", "2m", "--disk", "2G", "true", NULL };
        nsbox_policy *p;
        ASSERT_POLICY(argv, &p);
        ck_assert_uint_eq(p->limits.timeout_ms, 120000);
        ck_assert_uint_eq(p->limits.disk, 2ull << 30);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bind_of_missing_path_names_it)
{
        char *argv[] = { "run", "--bind", "/nonexistent-nsbox-unit:/data", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--bind", "'/nonexistent-nsbox-unit'");
}
END_TEST

START_TEST(test_bind_is_readonly_by_default)
{
        char *argv[] = { "run", "--bind", "/tmp:/data", "true", NULL };
        nsbox_policy *p;
        ASSERT_POLICY(argv, &p);
        ck_assert_uint_eq(p->n_mounts, 1);
        char *real = realpath("/tmp", NULL);
        ck_assert_int_eq(p->mounts[0].type, MOUNT_BIND);
        ck_assert_str_eq(p->mounts[0].source, real);
        free(real);
        ck_assert_str_eq(p->mounts[0].target, "/data");
        ck_assert(p->mounts[0].readonly);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bind_rw_is_writable)
{
        char *argv[] = { "run", "--bind", "/tmp:/data:rw", "true", NULL };
        nsbox_policy *p;
        ASSERT_POLICY(argv, &p);
        ck_assert_uint_eq(p->n_mounts, 1);
        ck_assert(!p->mounts[0].readonly);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bind_noidmap_is_parsed_with_the_mode)
{
        char *argv[] = { "run", "--bind", "/tmp:/a:rw,noidmap", "--bind", "/tmp:/b:noidmap", "--bind", "/tmp:/c:ro", "true", NULL };
        nsbox_policy *p;
        ASSERT_POLICY(argv, &p);
        ck_assert_int_eq(p->n_mounts, 3);
        ck_assert(!p->mounts[0].readonly && p->mounts[0].no_idmap);
        ck_assert(p->mounts[1].readonly && p->mounts[1].no_idmap);
        ck_assert(p->mounts[2].readonly && !p->mounts[2].no_idmap);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bind_with_bad_mode_is_refused)
{
        char *argv[] = { "run", "--bind", "x:y:zz", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--bind", "'x:y:zz'", "mode");
}
END_TEST

START_TEST(test_bind_without_destination_is_refused)
{
        char *argv[] = { "run", "--bind", "/tmp", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--bind", "'/tmp'");
}
END_TEST

START_TEST(test_bind_over_proc_is_refused)
{
        char *argv[] = { "run", "--bind", "/tmp:/proc", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--bind", "reserved");
}
END_TEST

START_TEST(test_tmpfs_with_size)
{
        char *argv[] = { "run", "--tmpfs", "/scratch:64M", "true", NULL };
        nsbox_policy *p;
        ASSERT_POLICY(argv, &p);
        ck_assert_uint_eq(p->n_mounts, 1);
        ck_assert_int_eq(p->mounts[0].type, MOUNT_TMPFS);
        ck_assert_str_eq(p->mounts[0].target, "/scratch");
        ck_assert_uint_eq(p->mounts[0].size, 64ull << 20);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_tmpfs_too_small_is_refused)
{
        char *argv[] = { "run", "--tmpfs", "/x:1", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "--tmpfs", "'/x:1'");
}
END_TEST

START_TEST(test_env_sets_variable)
{
        char *argv[] = { "run", "-e", "FOO=bar", "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(env_value(p->env, "FOO", &n), "bar");
        ck_assert_int_eq(n, 1);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_env_overrides_policy_value)
{
        char *argv[] = { "run", "-e", "LANG=fr_FR.UTF-8", "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(env_value(p->env, "LANG", &n), "fr_FR.UTF-8");
        ck_assert_int_eq(n, 1);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_env_name_alone_inherits_value)
{
        setenv(INHERITED, "from host", 1);
        char *argv[] = { "run", "-e", INHERITED, "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(env_value(p->env, INHERITED, &n), "from host");
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_env_name_alone_unset_is_absent)
{
        char *argv[] = { "run", "-e", INHERITED, "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_ptr_null(env_value(p->env, INHERITED, &n));
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_env_bad_name_is_refused)
{
        char *argv[] = { "run", "-e", "1BAD=x", "true", NULL };
        ASSERT_POLICY_REFUSED(argv, "'1BAD=x'");
}
END_TEST

START_TEST(test_caller_environment_is_not_passed)
{
        setenv(INHERITED, "secret", 1);
        char *argv[] = { "run", "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_ptr_null(env_value(p->env, INHERITED, &n));
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_home_user_logname_path_are_filled_in)
{
        char *argv[] = { "run", "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(env_value(p->env, "HOME", &n), "/workspace");
        ck_assert_int_eq(n, 1);
        ck_assert_str_eq(env_value(p->env, "USER", &n), "user");
        ck_assert_int_eq(n, 1);
        ck_assert_str_eq(env_value(p->env, "LOGNAME", &n), "user");
        ck_assert_int_eq(n, 1);
        /* the host view's Python environment comes first where the host has python3 (issue 24) */
        const char *venv = access("/usr/bin/python3", X_OK) == 0 ? "/opt/venv/bin:" : "";
        char want[256];
        snprintf(want, sizeof(want), "%s/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", venv);
        ck_assert_str_eq(env_value(p->env, "PATH", &n), want);
        ck_assert_int_eq(n, 1);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_python_environment_only_for_the_host_view)
{
        if (access("/usr/bin/python3", X_OK) < 0)
                return; /* nothing to show without a host python3 */
        char *host[] = { "run", "-e", "PATH=/bin", "true", NULL };
        char *dir[] = { "run", "--rootfs", "/", "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(host, &p);
        ck_assert(p->python_venv);
        ck_assert_str_eq(env_value(p->env, "PATH", &n), "/opt/venv/bin:/bin");
        ck_assert_str_eq(env_value(p->env, "VIRTUAL_ENV", &n), "/opt/venv");
        ck_assert_str_eq(env_value(p->env, "PYTHONUSERBASE", &n), "/opt/venv");
        nsbox_policy_free(p);
        ASSERT_POLICY(dir, &p);
        ck_assert(!p->python_venv);
        ck_assert_ptr_null(env_value(p->env, "VIRTUAL_ENV", &n));
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_env_option_wins_over_filled_in_home)
{
        char *argv[] = { "run", "-e", "HOME=/home/me", "true", NULL };
        nsbox_policy *p;
        int n;
        ASSERT_POLICY(argv, &p);
        ck_assert_str_eq(env_value(p->env, "HOME", &n), "/home/me");
        ck_assert_int_eq(n, 1);
        nsbox_policy_free(p);
}
END_TEST

/* create's params from a client: a policy is a name of the policy directories or an absolute
 * path, never a path relative to wherever nsboxd runs. */
START_TEST(test_client_policy_is_a_name_or_an_absolute_path)
{
        static const char *const good[] = { "default", "strict", "py3.11", "/etc/nsbox/policy/x.json", "/x" };
        static const char *const bad[] = { "rt-evil.json", "x.json", "../x", "./x", "a/b", ".hidden", "-x", "", "a b" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                json_t *params = json_pack("{ss}", "policy", good[i]);
                nsbox_run_options o;
                nsbox_error err = { 0 };
                ck_assert_msg(nsbox_params_from_json(params, NSBOX_PARAM_LIFECYCLE, &o, &err) == 0, "'%s' refused: %s", good[i], err.msg);
                ck_assert_str_eq(o.policy, good[i]);
                nsbox_run_options_release(&o);
                json_decref(params);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *params = json_pack("{ss}", "policy", bad[i]);
                nsbox_run_options o;
                nsbox_error err = { 0 };
                ck_assert_msg(nsbox_params_from_json(params, NSBOX_PARAM_LIFECYCLE, &o, &err) == -EINVAL, "'%s' accepted", bad[i]);
                nsbox_run_options_release(&o);
                UNIT_ASSERT_CONTAINS(err.msg, "neither a policy name");
                UNIT_ASSERT_CONTAINS(err.msg, bad[i]);
                nsbox_error_clear(&err);
                json_decref(params);
        }
}
END_TEST

Suite *options_suite(void)
{
        Suite *s = suite_create("options");
        TCase *tc = unit_tcase(s, "run_options");
        unit_add(tc, test_command_follows_options);
        unit_add(tc, test_command_follows_double_dash);
        unit_add(tc, test_options_after_command_belong_to_command);
        unit_add(tc, test_unknown_long_option_is_named);
        unit_add(tc, test_unknown_short_option_is_named);
        unit_add(tc, test_option_without_value_says_it_needs_one);
        unit_add(tc, test_missing_command_is_refused);
        unit_add(tc, test_missing_command_after_double_dash_is_refused);
        unit_add(tc, test_help_needs_no_command);
        unit_add(tc, test_timeout_in_seconds_gives_milliseconds);
        unit_add(tc, test_bad_timeout_is_refused);
        unit_add(tc, test_disk_size_is_parsed);
        unit_add(tc, test_disk_below_1M_is_refused);
        unit_add(tc, test_bad_limit_values_are_refused);
        unit_add(tc, test_env_option_repeats);
        unit_add(tc, test_parsing_twice_in_one_process_works);
        unit_add(tc, test_client_policy_is_a_name_or_an_absolute_path);

        tc = unit_tcase(s, "run_policy");
        tcase_add_checked_fixture(tc, policy_path_setup, policy_path_teardown);
        unit_add(tc, test_no_options_give_the_default_policy);
        unit_add(tc, test_missing_policy_is_named);
        unit_add(tc, test_workdir_moves_workdir_and_home);
        unit_add(tc, test_relative_workdir_is_refused);
        unit_add(tc, test_root_workdir_is_refused);
        unit_add(tc, test_bad_hostname_is_refused);
        unit_add(tc, test_hostname_is_set);
        unit_add(tc, test_bad_net_is_refused);
        unit_add(tc, test_timeout_and_disk_reach_the_limits);
        unit_add(tc, test_limit_options_set_the_policy_limits);
        unit_add(tc, test_bind_of_missing_path_names_it);
        unit_add(tc, test_bind_is_readonly_by_default);
        unit_add(tc, test_bind_rw_is_writable);
        unit_add(tc, test_bind_noidmap_is_parsed_with_the_mode);
        unit_add(tc, test_bind_with_bad_mode_is_refused);
        unit_add(tc, test_bind_without_destination_is_refused);
        unit_add(tc, test_bind_over_proc_is_refused);
        unit_add(tc, test_tmpfs_with_size);
        unit_add(tc, test_tmpfs_too_small_is_refused);
        unit_add(tc, test_env_sets_variable);
        unit_add(tc, test_env_overrides_policy_value);
        unit_add(tc, test_env_name_alone_inherits_value);
        unit_add(tc, test_env_name_alone_unset_is_absent);
        unit_add(tc, test_env_bad_name_is_refused);
        unit_add(tc, test_caller_environment_is_not_passed);
        unit_add(tc, test_home_user_logname_path_are_filled_in);
        unit_add(tc, test_python_environment_only_for_the_host_view);
        unit_add(tc, test_env_option_wins_over_filled_in_home);
        return s;
}
