/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* glob and grep as an agent meets them: what matches, in which order, what is skipped (.git,
 * binary files, symlinks), the limits that truncate, bad parameters, and patterns and paths that
 * try to leave the root.  Each test gets a directory holding root/ (the sandbox's "/") and
 * outside/ (a host directory next to it that must never show up). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/path.h"
#include "../../tools/tool.h"
#include "tool_fixture.h"
#include "unit.h"

/* ---- fixture (tool_fixture.h), with a file outside the root a search must never find ---- */

static void base_setup(void) { fixture_base_setup("search"); }

static void test_setup(void)
{
        fixture_test_setup();
        char secret[PATH_MAX];
        snprintf(secret, sizeof(secret), "%s/secret.txt", outside_dir);
        ck_assert_int_eq(write_file_at(AT_FDCWD, secret, "needle outside\n", 0644), 0);
}

static void fallback_setup(void)
{
        test_setup();
        tool_path_force_fallback(true);
}

static void fallback_teardown(void)
{
        tool_path_force_fallback(false);
        test_teardown();
}

static void put_bytes(const char *path, const char *content, size_t n)
{
        int fd = open(H(path), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_msg(fd >= 0, "create '%s': %s", path, strerror(errno));
        ck_assert_int_eq(write_full(fd, content, n), 0);
        close(fd);
}

static void put(const char *path, const char *content)
{
        put_bytes(path, content, strlen(content));
}

static void mkd(const char *path)
{
        ck_assert_msg(mkdir(H(path), 0755) == 0, "mkdir '%s': %s", path, strerror(errno));
}

static void lnk(const char *target, const char *path)
{
        ck_assert_msg(symlink(target, H(path)) == 0, "symlink '%s': %s", path, strerror(errno));
}

static int call(tool_fn fn, json_t *params)
{
        ck_assert_msg(params != NULL, "bad json_pack format in the test");
        json_decref(res);
        res = NULL;
        err = (tool_error){ 0 };
        tool_in in = { .params = params };
        int r = fn(&ctx, &in, &out, &err);
        json_decref(params);
        res = steal_pointer(&out.result);
        if (r == 0) {
                ck_assert_msg(json_is_object(res), "success without a result object");
        } else {
                ck_assert_int_eq(r, -1);
                ck_assert_msg(res == NULL, "failure with a result");
                UNIT_ASSERT_ONE_LINE(err.message);
        }
        return r;
}

#define ASSERT_OK(fn, ...)                                                                      \
        do {                                                                                    \
                int _r = call((fn), json_pack(__VA_ARGS__));                                    \
                ck_assert_msg(_r == 0, "%s failed: %s: %s", #fn, tool_code_name(err.code), err.message); \
        } while (0)

/* The call fails with code want and a message containing needle. */
#define ASSERT_FAILS(want, needle, fn, ...)                                                      \
        do {                                                                                     \
                int _r = call((fn), json_pack(__VA_ARGS__));                                     \
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

/* The result's "matches" of glob, joined with spaces, for one comparison that shows it all. */
static const char *glob_matches(void)
{
        static char buf[4096];
        buf[0] = '\0';
        size_t i;
        json_t *v;
        json_array_foreach(field(res, "matches"), i, v) {
                if (i)
                        strncat(buf, " ", sizeof(buf) - strlen(buf) - 1);
                strncat(buf, json_string_value(v), sizeof(buf) - strlen(buf) - 1);
        }
        return buf;
}

/* grep's matches as "path:line:text" joined with spaces. */
static const char *grep_matches(void)
{
        static char buf[8192];
        buf[0] = '\0';
        size_t i;
        json_t *v;
        json_array_foreach(field(res, "matches"), i, v) {
                char one[512];
                snprintf(one, sizeof(one), "%s%s:%lld:%.300s", i ? " " : "", S(v, "path"), I(v, "line"), S(v, "text"));
                strncat(buf, one, sizeof(buf) - strlen(buf) - 1);
        }
        return buf;
}

static void tree(void)
{
        mkd("w");
        put("w/a.c", "int main(void)\n{\n        return 0;\n}\n");
        put("w/b.py", "print('hello')\n");
        put("w/.hidden", "hidden needle\n");
        mkd("w/src");
        put("w/src/x.c", "/* needle */\n");
        mkd("w/src/deep");
        put("w/src/deep/y.c", "needle\nNEEDLE\n");
        mkd("w/.git");
        put("w/.git/config", "needle in git\n");
}

/* ---- glob ---- */

START_TEST(test_glob_star_matches_names_in_one_directory_sorted)
{
        tree();
        ASSERT_OK(tool_glob, "{s:s, s:s}", "pattern", "*.c", "path", "/w");
        ck_assert_str_eq(glob_matches(), "/w/a.c");
        ck_assert_str_eq(S(res, "pattern"), "*.c");
        ck_assert_str_eq(S(res, "path"), "/w");
        ck_assert(!B(res, "truncated"));
        ASSERT_OK(tool_glob, "{s:s, s:s}", "pattern", "*", "path", "/w");
        ck_assert_str_eq(glob_matches(), "/w/.git /w/.hidden /w/a.c /w/b.py /w/src");
        ASSERT_OK(tool_glob, "{s:s, s:s}", "pattern", "src/*/?.[ch]", "path", "/w");
        ck_assert_str_eq(glob_matches(), "/w/src/deep/y.c");
}
END_TEST

START_TEST(test_glob_double_star_spans_directories_but_not_git)
{
        tree();
        ctx.cwd = "/w";
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "**/*.c");
        ck_assert_str_eq(S(res, "path"), "/w");
        ck_assert_str_eq(glob_matches(), "/w/a.c /w/src/deep/y.c /w/src/x.c");
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "**/config");
        ck_assert_str_eq(glob_matches(), "");
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "src/**/**/*.c");
        ck_assert_str_eq(glob_matches(), "/w/src/deep/y.c /w/src/x.c");
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "src/**");
        ck_assert_str_eq(glob_matches(), "/w/src/deep /w/src/deep/y.c /w/src/x.c");
        ASSERT_OK(tool_glob, "{s:s}", "pattern", ".git/*");
        ck_assert_str_eq(glob_matches(), "/w/.git/config");
}
END_TEST

START_TEST(test_glob_literal_patterns_match_what_exists)
{
        tree();
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "/w/src/x.c");
        ck_assert_str_eq(glob_matches(), "/w/src/x.c");
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "/w/src/none.c");
        ck_assert_str_eq(glob_matches(), "");
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "/nowhere/*/x");
        ck_assert_str_eq(glob_matches(), "");
        ASSERT_OK(tool_glob, "{s:s, s:s}", "pattern", "./src/../b.py", "path", "w");
        ck_assert_str_eq(glob_matches(), "/w/b.py");
}
END_TEST

START_TEST(test_glob_matches_symlinks_but_never_descends_them)
{
        tree();
        lnk("/w/src", "w/linkdir");
        lnk(outside_dir, "w/out");
        ASSERT_OK(tool_glob, "{s:s, s:s}", "pattern", "**/*", "path", "/w");
        const char *m = glob_matches();
        ck_assert_msg(strstr(m, "/w/linkdir") && strstr(m, "/w/out"), "%s", m);
        ck_assert_msg(!strstr(m, "/w/linkdir/") && !strstr(m, "secret"), "%s", m);
        ASSERT_OK(tool_glob, "{s:s, s:s}", "pattern", "out/*", "path", "/w");
        ck_assert_str_eq(glob_matches(), "");
}
END_TEST

START_TEST(test_glob_patterns_leaving_the_root_stay_in_it)
{
        tree();
        ctx.cwd = "/w/src";
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "../../../../*");
        ck_assert_str_eq(glob_matches(), "/w");
        ASSERT_OK(tool_glob, "{s:s}", "pattern", "/../*/b.py");
        ck_assert_str_eq(glob_matches(), "/w/b.py");
        char pattern[PATH_MAX];
        snprintf(pattern, sizeof(pattern), "%s/*", outside_dir);
        ASSERT_OK(tool_glob, "{s:s}", "pattern", pattern);
        ck_assert_str_eq(glob_matches(), "");
}
END_TEST

START_TEST(test_glob_refuses_bad_parameters)
{
        put("file", "x");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "glob: 'pattern' is required", tool_glob, "{}");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'pattern' must be a string", tool_glob, "{s:i}", "pattern", 1);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'pattern' must not be empty", tool_glob, "{s:s}", "pattern", "");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/missing'", tool_glob, "{s:s, s:s}", "pattern", "*", "path", "missing");
        ASSERT_FAILS(TOOL_NOT_A_DIRECTORY, "'/file'", tool_glob, "{s:s, s:s}", "pattern", "*", "path", "file");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'path' must be a string", tool_glob, "{s:s, s:b}", "pattern", "*",
                     "path", true);
}
END_TEST

/* ---- grep ---- */

START_TEST(test_grep_finds_regex_matches_with_line_numbers)
{
        tree();
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "ne+dle", "path", "/w");
        ck_assert_str_eq(grep_matches(), "/w/.hidden:1:hidden needle /w/src/deep/y.c:1:needle /w/src/x.c:1:/* needle */");
        ck_assert_str_eq(S(res, "pattern"), "ne+dle");
        ck_assert(!B(res, "truncated"));
        ck_assert_int_eq(I(res, "files_searched"), 5);
        json_t *first = json_array_get(field(res, "matches"), 0);
        ck_assert_ptr_null(json_object_get(first, "before"));
        ck_assert_ptr_null(json_object_get(first, "after"));
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "^[{}]$", "path", "w/a.c");
        ck_assert_str_eq(grep_matches(), "/w/a.c:2:{ /w/a.c:4:}");
        ck_assert_int_eq(I(res, "files_searched"), 1);
}
END_TEST

START_TEST(test_grep_fixed_strings_and_ignore_case)
{
        tree();
        put("w/re.txt", "a.b\naxb\n");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:b}", "pattern", "a.b", "path", "w/re.txt", "fixed", true);
        ck_assert_str_eq(grep_matches(), "/w/re.txt:1:a.b");
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "a.b", "path", "w/re.txt");
        ck_assert_str_eq(grep_matches(), "/w/re.txt:1:a.b /w/re.txt:2:axb");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:b, s:b}", "pattern", "NeEdLe", "path", "w/src/deep", "fixed", true,
                  "ignore_case", true);
        ck_assert_str_eq(grep_matches(), "/w/src/deep/y.c:1:needle /w/src/deep/y.c:2:NEEDLE");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:b}", "pattern", "^needle$", "path", "w/src/deep", "ignore_case", true);
        ck_assert_str_eq(grep_matches(), "/w/src/deep/y.c:1:needle /w/src/deep/y.c:2:NEEDLE");
}
END_TEST

START_TEST(test_grep_context_gives_lines_before_and_after)
{
        put("c.txt", "1\n2\nhit\n4\nhit\n6\n7\n");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:i}", "pattern", "hit", "path", "c.txt", "context", 2);
        json_t *m = field(res, "matches");
        ck_assert_uint_eq(json_array_size(m), 2);
        json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
        ck_assert_int_eq(I(a, "line"), 3);
        ck_assert_uint_eq(json_array_size(field(a, "before")), 2);
        ck_assert_str_eq(json_string_value(json_array_get(field(a, "before"), 0)), "1");
        ck_assert_str_eq(json_string_value(json_array_get(field(a, "before"), 1)), "2");
        ck_assert_str_eq(json_string_value(json_array_get(field(a, "after"), 0)), "4");
        ck_assert_str_eq(json_string_value(json_array_get(field(a, "after"), 1)), "hit");
        ck_assert_int_eq(I(b, "line"), 5);
        ck_assert_str_eq(json_string_value(json_array_get(field(b, "before"), 0)), "hit");
        ck_assert_str_eq(json_string_value(json_array_get(field(b, "after"), 1)), "7");
        put("edge.txt", "hit\n");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:i}", "pattern", "hit", "path", "edge.txt", "context", 20);
        json_t *e = json_array_get(field(res, "matches"), 0);
        ck_assert_uint_eq(json_array_size(field(e, "before")), 0);
        ck_assert_uint_eq(json_array_size(field(e, "after")), 0);
}
END_TEST

START_TEST(test_grep_max_count_truncates_the_matches)
{
        char text[4096] = "";
        for (int i = 0; i < 50; i++)
                strcat(text, "match\n");
        put("m1", text);
        put("m2", text);
        ASSERT_OK(tool_grep, "{s:s, s:i}", "pattern", "match", "max_count", 60);
        ck_assert_uint_eq(json_array_size(field(res, "matches")), 60);
        ck_assert(B(res, "truncated"));
        ck_assert_str_eq(S(json_array_get(field(res, "matches"), 59), "path"), "/m2");
        ASSERT_OK(tool_grep, "{s:s, s:i, s:i}", "pattern", "match", "max_count", 1, "context", 2);
        json_t *only = json_array_get(field(res, "matches"), 0);
        ck_assert_uint_eq(json_array_size(field(res, "matches")), 1);
        ck_assert_uint_eq(json_array_size(field(only, "after")), 2); /* filled after the limit too */
}
END_TEST

START_TEST(test_grep_glob_filters_by_name_or_relative_path)
{
        tree();
        ASSERT_OK(tool_grep, "{s:s, s:s, s:s}", "pattern", ".", "path", "/w", "glob", "*.py");
        ck_assert_str_eq(grep_matches(), "/w/b.py:1:print('hello')");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:s}", "pattern", "needle", "path", "/w", "glob", "src/**/*.c");
        ck_assert_str_eq(grep_matches(), "/w/src/deep/y.c:1:needle /w/src/x.c:1:/* needle */");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:s}", "pattern", "needle", "path", "/w", "glob", "src/*.c");
        ck_assert_str_eq(grep_matches(), "/w/src/x.c:1:/* needle */");
        ASSERT_OK(tool_grep, "{s:s, s:s, s:s}", "pattern", "needle", "path", "/w", "glob", "**/y.c");
        ck_assert_str_eq(grep_matches(), "/w/src/deep/y.c:1:needle");
}
END_TEST

START_TEST(test_grep_skips_binary_files_git_and_symlinks)
{
        tree();
        put_bytes("w/bin", "needle\0binary\n", 14);
        lnk("/w/src/x.c", "w/link.c");
        lnk(outside_dir, "w/out");
        char secret[PATH_MAX];
        snprintf(secret, sizeof(secret), "%s/secret.txt", outside_dir);
        lnk(secret, "w/secret-link");
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "needle", "path", "/w");
        const char *m = grep_matches();
        ck_assert_msg(!strstr(m, "/w/bin") && !strstr(m, ".git") && !strstr(m, "link") && !strstr(m, "outside"),
                      "%s", m);
        ck_assert_int_eq(I(res, "files_searched"), 5);
}
END_TEST

START_TEST(test_grep_long_lines_are_cut_and_matched_on_their_start)
{
        size_t n = 100000;
        char *big = malloc(n + 2);
        ck_assert_ptr_nonnull(big);
        memset(big, 'x', n);
        memcpy(big + 10, "early", 5);
        memcpy(big + 70000, "late", 4);
        memcpy(big + n, "\n", 2);
        put("long", big);
        free(big);
        put("after", "short late\n");
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "early", "path", "long");
        json_t *m = json_array_get(field(res, "matches"), 0);
        ck_assert_uint_eq(strlen(S(m, "text")), TOOL_MAX_LINE_CHARS);
        ASSERT_OK(tool_grep, "{s:s, s:s, s:b}", "pattern", "late", "path", "long", "fixed", true);
        ck_assert_uint_eq(json_array_size(field(res, "matches")), 0);
        /* the rest of a cut line is not taken for new lines */
        put("two", "");
        FILE *f = fopen(H("two"), "w");
        for (int i = 0; i < 70000; i++)
                fputc('y', f);
        fputs("\nlate\n", f);
        fclose(f);
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "late|^y", "path", "two");
        ck_assert_uint_eq(json_array_size(field(res, "matches")), 2);
        ck_assert_int_eq(I(json_array_get(field(res, "matches"), 1), "line"), 2);
}
END_TEST

START_TEST(test_grep_text_that_is_not_utf8_is_replaced)
{
        put_bytes("latin1", "caf\xe9 needle\n", 12);
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "needle", "path", "latin1");
        ck_assert_str_eq(S(json_array_get(field(res, "matches"), 0), "text"), "caf\xef\xbf\xbd needle");
}
END_TEST

START_TEST(test_grep_paths_through_links_and_dotdot_stay_in_root)
{
        tree();
        mkd("etc");
        put("etc/passwd", "root-inside\n");
        lnk("/etc", "w/etc-link");
        ctx.cwd = "/w/src";
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "root", "path", "../../../../etc/passwd");
        ck_assert_str_eq(grep_matches(), "/etc/passwd:1:root-inside");
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "root", "path", "/w/etc-link/passwd");
        ck_assert_str_eq(grep_matches(), "/w/etc-link/passwd:1:root-inside");
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "outside", tool_grep, "{s:s, s:s}", "pattern", "needle", "path",
                     "/../outside");
}
END_TEST

START_TEST(test_grep_refuses_bad_parameters)
{
        ck_assert_int_eq(mkfifo(H("fifo"), 0600), 0);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "bad regular expression '(unclosed'", tool_grep, "{s:s}", "pattern",
                     "(unclosed");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'pattern' is required", tool_grep, "{}");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'pattern' must not be empty", tool_grep, "{s:s}", "pattern", "");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'context' must be at most 20", tool_grep, "{s:s, s:i}", "pattern", "x",
                     "context", 21);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'max_count' must be at least 1", tool_grep, "{s:s, s:i}", "pattern", "x",
                     "max_count", 0);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'max_count' must be at most 100000", tool_grep, "{s:s, s:i}", "pattern",
                     "x", "max_count", 100001);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'fixed' must be a boolean", tool_grep, "{s:s, s:s}", "pattern", "x",
                     "fixed", "no");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "'glob' must be a string", tool_grep, "{s:s, s:i}", "pattern", "x",
                     "glob", 3);
        ASSERT_FAILS(TOOL_FILE_NOT_FOUND, "'/missing'", tool_grep, "{s:s, s:s}", "pattern", "x", "path", "missing");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "not a regular file or directory", tool_grep, "{s:s, s:s}", "pattern",
                     "x", "path", "fifo");
}
END_TEST

/* Found by tests/fuzz/tool: "d++++..." made glibc's regcomp take gigabytes.  Patterns whose
 * repetitions would expand past the limit are refused before regcomp; large but sane ones and
 * brackets holding repetition characters still work. */
START_TEST(test_grep_refuses_regex_repetitions_that_would_explode)
{
        tree();
        char stacked[128];
        snprintf(stacked, sizeof(stacked), "needle%.60s", "++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "is too complex: its repetitions expand to more than 65536 parts", tool_grep,
                     "{s:s}", "pattern", stacked);
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "too complex", tool_grep, "{s:s}", "pattern", "((x{99}){99}){99}");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "too complex", tool_grep, "{s:s}", "pattern", "(a|b{300}){300}");
        ASSERT_FAILS(TOOL_INVALID_ARGUMENT, "too complex", tool_grep, "{s:s, s:b}", "pattern", "x{65537}", "ignore_case", 1);
        /* the same pattern as a fixed string is only text */
        ASSERT_OK(tool_grep, "{s:s, s:b, s:s}", "pattern", stacked, "fixed", 1, "path", "/w");
        ck_assert_str_eq(grep_matches(), "");
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "ne{1,2}dle{1}", "path", "/w/src/x.c");
        ck_assert_str_eq(grep_matches(), "/w/src/x.c:1:/* needle */");
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "[+*{]+x{0,1000}needle", "path", "/w");
        ASSERT_OK(tool_grep, "{s:s, s:s}", "pattern", "(n(e)+){1,200}dle", "path", "/w/src/x.c");
        ck_assert_str_eq(grep_matches(), "/w/src/x.c:1:/* needle */");
}
END_TEST

/* The glob and grep cases; fallback: with tool_open's user-space resolver (tools/path.h). */
static void add_search_cases(Suite *s, bool fallback)
{
        TCase *tc = unit_tcase(s, fallback ? "glob_fallback" : "glob");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, fallback ? fallback_setup : test_setup, fallback ? fallback_teardown : test_teardown);
        unit_add(tc, test_glob_star_matches_names_in_one_directory_sorted);
        unit_add(tc, test_glob_double_star_spans_directories_but_not_git);
        unit_add(tc, test_glob_literal_patterns_match_what_exists);
        unit_add(tc, test_glob_matches_symlinks_but_never_descends_them);
        unit_add(tc, test_glob_patterns_leaving_the_root_stay_in_it);
        unit_add(tc, test_glob_refuses_bad_parameters);

        tc = unit_tcase(s, fallback ? "grep_fallback" : "grep");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, fallback ? fallback_setup : test_setup, fallback ? fallback_teardown : test_teardown);
        unit_add(tc, test_grep_finds_regex_matches_with_line_numbers);
        unit_add(tc, test_grep_fixed_strings_and_ignore_case);
        unit_add(tc, test_grep_context_gives_lines_before_and_after);
        unit_add(tc, test_grep_max_count_truncates_the_matches);
        unit_add(tc, test_grep_glob_filters_by_name_or_relative_path);
        unit_add(tc, test_grep_skips_binary_files_git_and_symlinks);
        unit_add(tc, test_grep_long_lines_are_cut_and_matched_on_their_start);
        unit_add(tc, test_grep_text_that_is_not_utf8_is_replaced);
        unit_add(tc, test_grep_paths_through_links_and_dotdot_stay_in_root);
        unit_add(tc, test_grep_refuses_bad_parameters);
        unit_add(tc, test_grep_refuses_regex_repetitions_that_would_explode);
}

Suite *search_suite(void)
{
        Suite *s = suite_create("search");
        add_search_cases(s, false);
        /* again through the path resolver used where openat2 is missing */
        add_search_cases(s, true);
        return s;
}
