/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs every unit suite and prints one line per test, as tests/run expects:
 *   PASS unit:<tcase>:<test>
 *   FAIL unit:<tcase>:<test>: <message>
 * Exits 1 if any test failed.  Tests run in forked children unless CK_FORK=no (for valgrind). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

Suite *policy_suite(void);
Suite *options_suite(void);
Suite *params_suite(void);
Suite *util_suite(void);
Suite *seccomp_suite(void);
Suite *files_suite(void);
Suite *search_suite(void);
Suite *git_suite(void);
Suite *registry_suite(void);
Suite *proto_suite(void);
Suite *trajectory_suite(void);
Suite *treecopy_suite(void);
Suite *repo_suite(void);
Suite *store_suite(void);
Suite *nft_suite(void);
Suite *dconfig_suite(void);
Suite *fuzz_suite(void);
Suite *spec_suite(void);
Suite *peer_suite(void);
Suite *supervisor_suite(void);
Suite *codes_suite(void);
Suite *watch_suite(void);
Suite *apikeys_suite(void);
Suite *cluster_suite(void);

/* Check reports a result's test case, file and line but not its test function: remember which
 * test functions each test case has, and name a result by the last test that starts, in the
 * result's file, at or before the result's line. */
struct unit_tc {
        TCase *tc;
        const char *name;
};
struct unit_test {
        const char *tcname;
        const TTest *t;
};
static struct unit_tc *tcases;
static size_t n_tcases;
static struct unit_test *tests;
static size_t n_tests;

static void *grow(void *v, size_t n, size_t size)
{
        void *nv = realloc(v, (n + 1) * size);
        if (!nv) {
                fputs("unit: out of memory\n", stderr);
                exit(2);
        }
        return nv;
}

TCase *unit_tcase(Suite *s, const char *name)
{
        TCase *tc = tcase_create(name);
        suite_add_tcase(s, tc);
        tcases = grow(tcases, n_tcases, sizeof(*tcases));
        tcases[n_tcases++] = (struct unit_tc){ tc, name };
        return tc;
}

void unit_add(TCase *tc, const TTest *t)
{
        const char *name = NULL;
        for (size_t i = 0; i < n_tcases; i++)
                if (tcases[i].tc == tc)
                        name = tcases[i].name;
        tcase_add_test(tc, t);
        if (!name)
                return; /* not created with unit_tcase: reported by file and line */
        tests = grow(tests, n_tests, sizeof(*tests));
        tests[n_tests++] = (struct unit_test){ name, t };
}

static const char *test_name(TestResult *tr)
{
        const TTest *best = NULL;
        const char *file = tr_lfile(tr);
        int line = tr_lno(tr);
        for (size_t i = 0; file && i < n_tests; i++) {
                const TTest *t = tests[i].t;
                if (strcmp(tests[i].tcname, tr_tcname(tr)) || strcmp(t->file, file) || t->line > line)
                        continue;
                if (!best || t->line > best->line)
                        best = t;
        }
        if (best)
                return best->name;
        static char where[512];
        snprintf(where, sizeof(where), "%s:%d", file ? file : "?", line);
        return where;
}

/* A failure message on one line, whatever the test put in it. */
static void print_one_line(const char *s)
{
        for (; s && *s; s++) {
                if (*s == '\n')
                        fputs("\\n", stdout);
                else if (*s == '\r')
                        fputs("\\r", stdout);
                else
                        putchar(*s);
        }
}

int main(void)
{
        SRunner *sr = srunner_create(policy_suite());
        srunner_add_suite(sr, options_suite());
        srunner_add_suite(sr, params_suite());
        srunner_add_suite(sr, util_suite());
        srunner_add_suite(sr, seccomp_suite());
        srunner_add_suite(sr, files_suite());
        srunner_add_suite(sr, search_suite());
        srunner_add_suite(sr, git_suite());
        srunner_add_suite(sr, registry_suite());
        srunner_add_suite(sr, proto_suite());
        srunner_add_suite(sr, trajectory_suite());
        srunner_add_suite(sr, treecopy_suite());
        srunner_add_suite(sr, repo_suite());
        srunner_add_suite(sr, store_suite());
        srunner_add_suite(sr, nft_suite());
        srunner_add_suite(sr, dconfig_suite());
        srunner_add_suite(sr, spec_suite());
        srunner_add_suite(sr, fuzz_suite());
        srunner_add_suite(sr, peer_suite());
        srunner_add_suite(sr, supervisor_suite());
        srunner_add_suite(sr, codes_suite());
        srunner_add_suite(sr, watch_suite());
        srunner_add_suite(sr, apikeys_suite());
        srunner_add_suite(sr, cluster_suite());
        /* Forked by default, so a crash is one failed test; CK_FORK=no runs in-process (valgrind). */
        if (!getenv("CK_FORK"))
                srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_SILENT);

        int n = srunner_ntests_run(sr);
        TestResult **results = srunner_results(sr);
        int failed = 0;
        for (int i = 0; i < n; i++) {
                TestResult *tr = results[i];
                if (tr_rtype(tr) == CK_PASS) {
                        printf("PASS unit:%s:%s\n", tr_tcname(tr), test_name(tr));
                        continue;
                }
                failed++;
                printf("FAIL unit:%s:%s: ", tr_tcname(tr), test_name(tr));
                print_one_line(tr_msg(tr));
                if (tr_ctx(tr) != CK_CTX_TEST)
                        fputs(" (in a fixture)", stdout);
                putchar('\n');
        }
        fflush(stdout);
        free(results);
        srunner_free(sr);
        free(tcases);
        free(tests);
        return failed ? 1 : 0;
}
