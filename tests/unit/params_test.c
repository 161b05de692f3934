/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* create's parameter table (runtime/params.c): one row per key and flag, each documented where a
 * user looks for it, and nothing a client sends that the table does not know. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../runtime/params.h"
#include "unit.h"

/* A file of the source tree, whole, NUL-terminated (to free). */
static char *source_file(const char *rel)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", unit_src(), rel);
        FILE *f = fopen(path, "re");
        ck_assert_msg(f, "cannot open %s (set NSBOX_SRC)", path);
        char *buf = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&buf, &n);
        char chunk[4096];
        size_t got;
        while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, got, m);
        fclose(f);
        fclose(m);
        return buf;
}

START_TEST(test_table_has_no_duplicate_key_or_flag)
{
        for (size_t i = 0; i < nsbox_n_params; i++) {
                const nsbox_param *a = &nsbox_params[i];
                ck_assert_msg(a->key || a->flag, "row %zu has neither a key nor a flag", i);
                ck_assert_msg(a->doc && *a->doc, "row %zu (%s) has no doc", i, a->key ? a->key : a->flag);
                ck_assert_msg(a->flag || a->commands == 0, "'%s' is taken by commands but has no flag", a->key);
                for (size_t j = i + 1; j < nsbox_n_params; j++) {
                        const nsbox_param *b = &nsbox_params[j];
                        ck_assert_msg(!a->key || !b->key || strcmp(a->key, b->key), "key '%s' twice", a->key);
                        ck_assert_msg(!a->flag || !b->flag || strcmp(a->flag, b->flag), "flag '--%s' twice", a->flag);
                        ck_assert_msg(!a->short_flag || a->short_flag != b->short_flag, "flag '-%c' twice", a->short_flag);
                }
        }
}
END_TEST

/* What needs nsboxd is refused in-process; lifetimes are nsboxd's. */
START_TEST(test_lifecycle_params_need_nsboxd)
{
        for (size_t i = 0; i < nsbox_n_params; i++)
                if (nsbox_params[i].who & NSBOX_PARAM_LIFECYCLE)
                        ck_assert_msg(nsbox_params[i].who & NSBOX_PARAM_DAEMON_ONLY, "'%s' is lifecycle but not daemon-only", nsbox_params[i].key);
        ck_assert(nsbox_param_is("labels", NSBOX_PARAM_LIFECYCLE));
        ck_assert(nsbox_param_is("repo", NSBOX_PARAM_DAEMON_ONLY));
        ck_assert(!nsbox_param_is("repo", NSBOX_PARAM_LIFECYCLE));
        ck_assert(!nsbox_param_is("memory", NSBOX_PARAM_DAEMON_ONLY));
        ck_assert(!nsbox_param_is("no_such_key", ~0u));
}
END_TEST

/* null, [] and {} give nothing; false and 0 are given (nsboxd's create reads them so) */
START_TEST(test_given_is_nsboxds)
{
        json_t *v = json_pack("[n [] {} b i s]", 0, 0, "");
        ck_assert(!nsbox_param_given(json_array_get(v, 0)));
        ck_assert(!nsbox_param_given(json_array_get(v, 1)));
        ck_assert(!nsbox_param_given(json_array_get(v, 2)));
        ck_assert(nsbox_param_given(json_array_get(v, 3)));
        ck_assert(nsbox_param_given(json_array_get(v, 4)));
        ck_assert(nsbox_param_given(json_array_get(v, 5)));
        ck_assert(!nsbox_param_given(NULL));
        json_decref(v);
}
END_TEST

/* Every key in nsbox-protocol(7)'s create: as the bold name of an entry (.TP) of its section. */
START_TEST(test_every_key_is_in_the_protocol_page)
{
        char *page = source_file("man/nsbox-protocol.7");
        char *start = strstr(page, "\n.SS create\n");
        ck_assert_ptr_nonnull(start);
        char *end = strstr(start + 1, "\n.SS ");
        if (end)
                *end = '\0';
        for (size_t i = 0; i < nsbox_n_params; i++) {
                const char *key = nsbox_params[i].key;
                bool found = false;
                for (char *tp = strstr(start, "\n.TP\n"); key && tp && !found; tp = strstr(tp + 1, "\n.TP\n")) {
                        char *line = tp + 5, *nl = strchr(line, '\n');
                        size_t n = nl ? (size_t)(nl - line) : strlen(line), k = strlen(key);
                        for (char *at = line; (at = memmem(at, n - (size_t)(at - line), key, k)) && !found; at++)
                                found = (at[-1] == ' ' || at[-1] == '"') && (at[k] == ' ' || at[k] == '"' || at[k] == '\n');
                }
                ck_assert_msg(!key || found, "create's '%s' is not an entry of man/nsbox-protocol.7, create", key);
        }
        free(page);
}
END_TEST

/* Every flag in nsbox(1), as roff writes it (\-\-idle\-timeout, \-e). */
START_TEST(test_every_flag_is_in_the_nsbox_page)
{
        char *page = source_file("man/nsbox.1");
        for (size_t i = 0; i < nsbox_n_params; i++) {
                const nsbox_param *p = &nsbox_params[i];
                char want[64] = "\\-\\-";
                for (const char *c = p->flag; c && *c; c++)
                        snprintf(want + strlen(want), sizeof(want) - strlen(want), *c == '-' ? "\\-" : "%c", *c);
                ck_assert_msg(!p->flag || strstr(page, want), "flag '--%s' (%s) is not in man/nsbox.1", p->flag, want);
                snprintf(want, sizeof(want), ".BR \\-%c", p->short_flag);
                ck_assert_msg(!p->short_flag || strstr(page, want), "flag '-%c' is not in man/nsbox.1", p->short_flag);
        }
        free(page);
}
END_TEST

/* The Python client's Sandbox(...) sends only keys of the table. */
START_TEST(test_python_client_sends_only_table_keys)
{
        char *src = source_file("clients/python/nsbox/sandbox.py");
        char *start = strstr(src, "\nclass Sandbox:");
        ck_assert_ptr_nonnull(start);
        char *end = strstr(start, "self._conn.call(\"create\", params)");
        ck_assert_ptr_nonnull(end);
        *end = '\0';
        unsigned n = 0;
        for (char *at = strstr(start, "params[\""); at; at = strstr(at + 1, "params[\"")) {
                char key[64];
                ck_assert_int_eq(sscanf(at, "params[\"%63[^\"]\"]", key), 1);
                ck_assert_msg(nsbox_param_by_key(key), "the Python client's create sends '%s', which create does not take", key);
                n++;
        }
        ck_assert_uint_ge(n, 4); /* policy, template, timeout, labels, env */
        free(src);
}
END_TEST

/* The MCP tool create_sandbox (runtime/cli_mcp.c) offers only keys of the table. */
START_TEST(test_mcp_create_sandbox_names_only_table_keys)
{
        char *src = source_file("runtime/cli_mcp.c");
        char *start = strstr(src, "{ \"create_sandbox\",");
        ck_assert_ptr_nonnull(start);
        char *end = strstr(start, "}}\" }");
        ck_assert_ptr_nonnull(end);
        end[2] = '\0';
        /* the C string literals of the entry, joined and unescaped */
        char *text = calloc(1, strlen(start) + 1), *t = text;
        bool in = false;
        for (char *c = start; *c; c++) {
                if (*c == '"' && (!in || c[-1] != '\\'))
                        in = !in;
                else if (in && *c == '\\' && c[1])
                        *t++ = *++c;
                else if (in)
                        *t++ = *c;
        }
        char *schema = strstr(text, "{\"type\":\"object\"");
        ck_assert_ptr_nonnull(schema);
        json_error_t jerr;
        json_t *s = json_loads(schema, 0, &jerr);
        ck_assert_msg(s, "create_sandbox's schema: %s", jerr.text);
        json_t *props = json_object_get(s, "properties");
        ck_assert_uint_ge(json_object_size(props), 4);
        const char *key;
        json_t *v;
        json_object_foreach(props, key, v)
                ck_assert_msg(nsbox_param_by_key(key), "create_sandbox offers '%s', which create does not take", key);
        json_decref(s);
        free(text);
        /* and what a model may set there (create_sandbox's allowed keys) */
        char *allowed = strstr(end + 3, "allowed[] = {");
        ck_assert_ptr_nonnull(allowed);
        char *close = strchr(allowed, '}');
        ck_assert_ptr_nonnull(close);
        *close = '\0';
        unsigned n = 0;
        for (char *q = strchr(allowed, '"'); q; q = strchr(q + 1, '"')) {
                char name[64];
                ck_assert_int_eq(sscanf(q, "\"%63[^\"]\"", name), 1);
                ck_assert_msg(nsbox_param_by_key(name), "create_sandbox allows '%s', which create does not take", name);
                q = strchr(q + 1, '"');
                n++;
        }
        ck_assert_uint_ge(n, 4);
        free(src);
}
END_TEST

/* A params object is parsed as the command line: same values, same messages, no argv. */
START_TEST(test_json_params_parse_as_the_command_line)
{
        json_t *params = json_pack("{ss sI si sf ss s[s] s{ss} s[s]}", "memory", "64M", "disk", (json_int_t)(2 << 20), "pids", 64, "cpus", 0.5,
                                   "net", "nat", "tmpfs", "/t:1M", "env", "A", "1", "bind", "/etc:/e");
        nsbox_run_options o;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_params_from_json(params, NSBOX_PARAM_LIFECYCLE, &o, &err), &err);
        ck_assert(o.has_memory && o.memory == 64ull << 20);
        ck_assert(o.has_disk && o.disk == 2ull << 20);
        ck_assert(o.has_pids && o.pids == 64);
        ck_assert(o.has_cpus && o.cpus > 0.49 && o.cpus < 0.51);
        ck_assert_str_eq(o.net, "nat");
        ck_assert_str_eq(o.tmpfs[0], "/t:1M");
        ck_assert_str_eq(o.env[0], "A=1");
        ck_assert_str_eq(o.binds[0], "/etc:/e");
        ck_assert_str_eq(o.policy, "default");
        nsbox_run_options_release(&o);
        json_decref(params);

        static const char *const bad[][2] = {
                { "{\"memroy\": 1}", "create: unknown parameter 'memroy' (see nsbox-protocol(7), create)" },
                { "{\"net\": 1}", "create: 'net' must be a string" },
                { "{\"memory\": \"lots\"}", "create: --memory 'lots': expected a size of at least 1M, e.g. 512M" },
                { "{\"memory\": true}", "create: 'memory' must be a size such as \"512M\" or a number of bytes" },
                { "{\"pids\": 1.5}", "create: 'pids' must be an integer" },
                { "{\"pids\": 0}", "create: --pids '0': expected a number of processes from 1 to 4194304" },
                { "{\"cpus\": \"x\"}", "create: 'cpus' must be a number" },
                { "{\"bind\": [\"rel:/x\"]}", "create: bind 'rel:/x': the source must be an absolute path" },
                { "{\"bind\": \"/x\"}", "create: 'bind' must be an array of strings" },
                { "{\"env\": [\"NOVALUE\"]}", "create: env 'NOVALUE': expected K=V (the daemon does not pass its own environment)" },
                { "{\"env\": {\"A\": 1}}", "create: 'env' must map names to strings" },
                { "{\"record\": \"t.jsonl\"}", "create: record 't.jsonl': the trajectory file must be given as an absolute path" },
                { "{\"rootfs\": \"r\"}", "create: rootfs 'r': expected 'host' or an absolute path" },
                { "{\"commit\": \"main\"}", "create: --commit needs --repo" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *p = json_loads(bad[i][0], 0, NULL);
                ck_assert_msg(nsbox_params_from_json(p, NSBOX_PARAM_LIFECYCLE, &o, &err) == -EINVAL, "%s accepted", bad[i][0]);
                nsbox_run_options_release(&o);
                ck_assert_msg(err.msg && !strcmp(err.msg, bad[i][1]), "%s: '%s', not '%s'", bad[i][0], err.msg, bad[i][1]);
                nsbox_error_clear(&err);
                json_decref(p);
        }
}
END_TEST

/* The CLI's params object, parsed back, gives the options it came from. */
START_TEST(test_options_to_json_and_back)
{
        char *argv[] = { "create", "--memory=64M", "--pids", "9", "-e", "A=1", "--tmpfs", "/t", "--label", "k=v", "--idle-timeout", "5", NULL };
        nsbox_run_options o, back;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_run_options_parse(12, argv, &o, &err), &err);
        json_t *p = NULL;
        UNIT_ASSERT_OK(nsbox_params_to_json(&o, &p, &err), &err);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "labels"), "k")), "v");
        ck_assert(json_number_value(json_object_get(p, "idle_timeout")) == 5.0);
        ck_assert_ptr_null(json_object_get(p, "policy")); /* the default is nsboxd's */
        UNIT_ASSERT_OK(nsbox_params_from_json(p, NSBOX_PARAM_LIFECYCLE, &back, &err), &err);
        ck_assert_uint_eq(back.memory, o.memory);
        ck_assert_uint_eq(back.pids, o.pids);
        ck_assert_str_eq(back.env[0], "A=1");
        ck_assert_str_eq(back.tmpfs[0], "/t");
        ck_assert_ptr_null(back.labels); /* lifecycle: nsboxd's own */
        nsbox_run_options_release(&back);
        nsbox_run_options_release(&o);
        json_decref(p);
}
END_TEST

/* getopt_long's forms, without getopt: --name=value, an abbreviation, -eVALUE. */
START_TEST(test_command_line_forms)
{
        char *argv[] = { "run", "--mem=8M", "--hostname=h", "-eA=1", "--", "ls", NULL };
        nsbox_run_options o;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_run_options_parse(6, argv, &o, &err), &err);
        ck_assert_uint_eq(o.memory, 8ull << 20);
        ck_assert_str_eq(o.hostname, "h");
        ck_assert_str_eq(o.env[0], "A=1");
        ck_assert_str_eq(o.argv[0], "ls");
        nsbox_run_options_release(&o);
        char *ambiguous[] = { "run", "--t", "1", "ls", NULL };
        ck_assert_int_lt(nsbox_run_options_parse(4, ambiguous, &o, &err), 0);
        nsbox_run_options_release(&o);
        UNIT_ASSERT_ERROR(&err, "unknown option '--t'");
        char *create_only[] = { "run", "--label", "a=b", "ls", NULL };
        ck_assert_int_lt(nsbox_run_options_parse(4, create_only, &o, &err), 0);
        nsbox_run_options_release(&o);
        UNIT_ASSERT_ERROR(&err, "run: --label applies to nsbox create");
        char *flag_value[] = { "create", "--json=yes", NULL };
        ck_assert_int_lt(nsbox_run_options_parse(2, flag_value, &o, &err), 0);
        nsbox_run_options_release(&o);
        UNIT_ASSERT_ERROR(&err, "unknown option '--json=yes'");
}
END_TEST

/* "did you mean": a typo of a letter or two, or one word the start of the other; nothing else */
START_TEST(test_closest_word_is_a_typo_or_a_prefix)
{
        const char *const words[] = { "timeout", "net", "tmpfs", "exec", "ls", "json" };
        const size_t n = sizeof(words) / sizeof(words[0]);
        ck_assert_str_eq(nsbox_closest_word("tiemout", words, n), "timeout");
        ck_assert_str_eq(nsbox_closest_word("network", words, n), "net");
        ck_assert_str_eq(nsbox_closest_word("exce", words, n), "exec");
        ck_assert_str_eq(nsbox_closest_word("ps", words, n), "ls");
        ck_assert_str_eq(nsbox_closest_word("jsno", words, n), "json");
        ck_assert_ptr_null(nsbox_closest_word("frobnicate", words, n));
        ck_assert_ptr_null(nsbox_closest_word("", words, n));
}
END_TEST

static char *write_temp(const char *text)
{
        static char path[] = "/tmp/nsbox-envfile.XXXXXX";
        strcpy(path, "/tmp/nsbox-envfile.XXXXXX");
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        return path;
}

/* docker's --env-file: K=V and K lines, comments and blank lines; a bad line named */
START_TEST(test_env_file_is_dockers_format)
{
        nsbox_error err = { 0 };
        char **env = NULL;
        char *path = write_temp("# comment\n\n  A=1\nB=x=y \"q\"\r\nPASS\n");
        UNIT_ASSERT_OK(nsbox_env_file_read(path, &env, &err), &err);
        ck_assert_str_eq(env[0], "A=1");
        ck_assert_str_eq(env[1], "B=x=y \"q\"");
        ck_assert_str_eq(env[2], "PASS");
        ck_assert_ptr_null(env[3]);
        unlink(path);
        strv_free(env);
        env = NULL;
        const char *bad[] = { "A=1\n=2\n", "A=1\nnot a name=2\n", "A=1\n1A=2\n" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                path = write_temp(bad[i]);
                ck_assert_int_eq(nsbox_env_file_read(path, &env, &err), -EINVAL);
                UNIT_ASSERT_ERROR(&err, "line 2: expected NAME=VALUE or NAME");
                unlink(path);
                strv_free(env);
                env = NULL;
        }
        ck_assert_int_lt(nsbox_env_file_read("/nonexistent/env", &env, &err), 0);
        UNIT_ASSERT_ERROR(&err, "--env-file '/nonexistent/env'");
}
END_TEST

Suite *params_suite(void)
{
        Suite *s = suite_create("params");
        TCase *tc = unit_tcase(s, "table");
        unit_add(tc, test_table_has_no_duplicate_key_or_flag);
        unit_add(tc, test_lifecycle_params_need_nsboxd);
        unit_add(tc, test_given_is_nsboxds);
        unit_add(tc, test_every_key_is_in_the_protocol_page);
        unit_add(tc, test_every_flag_is_in_the_nsbox_page);
        unit_add(tc, test_python_client_sends_only_table_keys);
        unit_add(tc, test_mcp_create_sandbox_names_only_table_keys);
        unit_add(tc, test_json_params_parse_as_the_command_line);
        unit_add(tc, test_options_to_json_and_back);
        unit_add(tc, test_command_line_forms);
        unit_add(tc, test_closest_word_is_a_typo_or_a_prefix);
        unit_add(tc, test_env_file_is_dockers_format);
        return s;
}
