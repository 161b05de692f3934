/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Trajectories: the SHA-256 behind result digests, what a digest ignores, the lines nsboxd writes,
 * the strict loader `nsbox replay` reads them with, and how a replayed step is judged. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/proto.h"
#include "../../runtime/sha256.h"
#include "../../runtime/trajectory.h"
#include "unit.h"

/* trajectory.h does not include the protocol's header; its line limit must still fit a call's
 * params and result, each up to one frame's JSON */
_Static_assert(NSBOX_TRAJ_MAX_LINE == 2 * NSBOX_FRAME_MAX_JSON, "a trajectory line holds two frames' JSON");

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEADER "{\"nsbox_trajectory\":1,\"sandbox\":\"sb1\",\"created\":1700000000,\"create\":{\"network\":\"none\"}}\n"
/* a successful call, step N */
#define CALL(n) "{\"step\":" #n ",\"op\":\"call\",\"tool\":\"exec\",\"params\":{\"cmd\":\"true\"},\"duration_ms\":1.5," \
                "\"error\":null,\"result_sha256\":\"" HEX64 "\",\"summary\":{\"exit_code\":0}}\n"

static char base_dir[64]; /* per test case, made and removed by the parent (survives a failed test) */
static char dir[128];     /* per test, inside base_dir */
static char path[192];

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        remove(p);
        return 0;
}

static void base_setup(void)
{
        snprintf(base_dir, sizeof(base_dir), "/tmp/nsbox-unit-traj.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(base_dir));
}

static void base_teardown(void)
{
        nftw(base_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "%s/t.XXXXXX", base_dir);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/run.jsonl", dir);
}

static void teardown(void)
{
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_text(const char *text)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write_full(fd, text, strlen(text)), 0);
}

/* Loading text fails; *t is left alone. */
static int load_text(const char *text, nsbox_trajectory *t, nsbox_error *err)
{
        write_text(text);
        return nsbox_traj_load(path, t, err);
}

#define ASSERT_LOAD_FAILS(text, ...)                                                      \
        do {                                                                              \
                nsbox_trajectory _t = { .n_steps = 77 };                                  \
                nsbox_error _e = { 0 };                                                   \
                ck_assert_int_lt(load_text((text), &_t, &_e), 0);                         \
                ck_assert_uint_eq(_t.n_steps, 77);                                        \
                UNIT_ASSERT_ERROR(&_e, "trajectory '", path, __VA_ARGS__);                \
        } while (0)

static json_t *parse(const char *text)
{
        json_error_t je;
        json_t *j = json_loads(text, 0, &je);
        ck_assert_msg(j != NULL, "bad test JSON: %s", je.text);
        return j;
}

static void digest_of(const char *text, char out[65])
{
        json_t *j = parse(text);
        ck_assert_int_eq(nsbox_traj_digest(j, out), 0);
        json_decref(j);
}

/* ---- sha256 ---- */

START_TEST(test_sha256_matches_the_standard_vectors)
{
        char hex[65];
        nsbox_sha256_hex("", 0, hex);
        ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        nsbox_sha256_hex("abc", 3, hex);
        ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        nsbox_sha256_hex(m, strlen(m), hex);
        ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

START_TEST(test_sha256_of_a_million_a_fed_in_odd_chunks)
{
        static char a[1000];
        memset(a, 'a', sizeof(a));
        nsbox_sha256 c;
        nsbox_sha256_init(&c);
        size_t left = 1000000, sizes[] = { 1, 63, 64, 65, 127, 7, 999, 3 };
        for (size_t i = 0; left > 0; i++) {
                size_t n = sizes[i % ARRAY_SIZE(sizes)];
                if (n > left)
                        n = left;
                nsbox_sha256_update(&c, a, n);
                left -= n;
        }
        char hex[65];
        nsbox_sha256_final_hex(&c, hex);
        ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

START_TEST(test_sha256_is_the_same_whole_or_byte_by_byte_around_block_edges)
{
        unsigned char data[200];
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char)(i * 7 + 1);
        for (size_t n = 0; n <= sizeof(data); n++) {
                char whole[65], bytes[65];
                nsbox_sha256_hex(data, n, whole);
                nsbox_sha256 c;
                nsbox_sha256_init(&c);
                for (size_t i = 0; i < n; i++)
                        nsbox_sha256_update(&c, data + i, 1);
                nsbox_sha256_final_hex(&c, bytes);
                ck_assert_msg(!strcmp(whole, bytes), "length %zu: %s vs %s", n, whole, bytes);
        }
}
END_TEST

/* ---- digest and summary ---- */

START_TEST(test_digest_ignores_volatile_keys_at_any_depth)
{
        char a[65], b[65];
        digest_of("{\"path\":\"/w\",\"duration_ms\":3,\"entries\":[{\"name\":\"x\",\"size\":1,\"mtime\":100,"
                  "\"meta\":{\"atime\":5,\"ctime\":6,\"mode\":\"0644\"}},[{\"pid\":9,\"k\":1}]]}",
                  a);
        digest_of("{\"path\":\"/w\",\"duration_ms\":90,\"entries\":[{\"name\":\"x\",\"size\":1,\"mtime\":200,"
                  "\"meta\":{\"atime\":7,\"ctime\":8,\"mode\":\"0644\"}},[{\"pid\":10,\"k\":1}]]}",
                  b);
        ck_assert_str_eq(a, b);
        /* a git result: ids, parents and head change with every commit's time */
        digest_of("{\"commit\":{\"id\":\"aa\",\"short_id\":\"a\",\"parents\":[\"p\"],\"message\":\"m\",\"time\":1},\"head\":\"aa\"}", a);
        digest_of("{\"commit\":{\"id\":\"bb\",\"short_id\":\"b\",\"parents\":[\"q\"],\"message\":\"m\",\"time\":2},\"head\":\"bb\"}", b);
        ck_assert_str_eq(a, b);
        ck_assert_uint_eq(strlen(a), 64);
}
END_TEST

START_TEST(test_digest_ignores_key_order)
{
        char a[65], b[65];
        digest_of("{\"a\":1,\"b\":{\"x\":[1,2],\"y\":\"z\"}}", a);
        digest_of("{\"b\":{\"y\":\"z\",\"x\":[1,2]},\"a\":1}", b);
        ck_assert_str_eq(a, b);
}
END_TEST

START_TEST(test_digest_differs_when_content_differs)
{
        char a[65], b[65], c[65];
        digest_of("{\"entries\":[{\"name\":\"x\",\"size\":1,\"mtime\":1}]}", a);
        digest_of("{\"entries\":[{\"name\":\"x\",\"size\":2,\"mtime\":1}]}", b);
        digest_of("{\"entries\":[{\"name\":\"y\",\"size\":1,\"mtime\":1}]}", c);
        ck_assert_str_ne(a, b);
        ck_assert_str_ne(a, c);
        digest_of("{\"exit_code\":1}", a);
        digest_of("{\"exit_code\":1.0}", b);
        ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_digest_is_sha256_of_the_canonical_text)
{
        char got[65], want[65];
        digest_of("{\"b\":0.1,\"a\":\"caf\\u00e9\",\"pid\":3}", got);
        const char *canonical = "{\"a\":\"caf\\u00E9\",\"b\":0.10000000000000001}";
        nsbox_sha256_hex(canonical, strlen(canonical), want);
        ck_assert_str_eq(got, want);
}
END_TEST

START_TEST(test_digest_leaves_the_result_alone_and_refuses_null)
{
        json_t *r = parse("{\"pid\":3,\"out\":{\"mtime\":1}}");
        char hex[65] = "untouched";
        ck_assert_int_eq(nsbox_traj_digest(r, hex), 0);
        ck_assert_ptr_nonnull(json_object_get(r, "pid"));
        ck_assert_ptr_nonnull(json_object_get(json_object_get(r, "out"), "mtime"));
        json_decref(r);
        ck_assert_int_eq(nsbox_traj_digest(NULL, hex), -EINVAL);
}
END_TEST

START_TEST(test_summary_keeps_the_named_top_level_fields)
{
        json_t *r = parse("{\"exit_code\":2,\"signal\":null,\"timed_out\":false,\"stdout\":\"lots\",\"size\":10,"
                          "\"nested\":{\"reason\":\"no\"},\"occurrences\":3}");
        json_t *s = nsbox_traj_summary(r);
        json_t *want = parse("{\"exit_code\":2,\"signal\":null,\"timed_out\":false,\"size\":10,\"occurrences\":3}");
        ck_assert_msg(json_equal(s, want), "summary %s", json_dumps(s, JSON_COMPACT));
        json_decref(want);
        json_decref(s);
        json_decref(r);
        s = nsbox_traj_summary(NULL);
        ck_assert(json_is_object(s) && json_object_size(s) == 0);
        json_decref(s);
}
END_TEST

/* ---- writing lines and loading them ---- */

static void append_line(int fd, json_t *line)
{
        ck_assert_ptr_nonnull(line);
        ck_assert_int_eq(nsbox_traj_write(fd, line), 0);
        json_decref(line);
}

START_TEST(test_lines_written_out_of_order_load_sorted_by_step)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        json_t *create = parse("{\"network\":\"none\",\"memory\":\"1G\"}");
        append_line(fd, nsbox_traj_header("sb-42", 1700000000, create));
        json_t *params = parse("{\"cmd\":\"ls\"}");
        json_t *result = parse("{\"exit_code\":0,\"stdout\":\"a\\n\",\"duration_ms\":4}");
        append_line(fd, nsbox_traj_step_line(3, "call", "exec", params, 4.25, result, NULL));
        append_line(fd, nsbox_traj_step_line(1, "snapshot", "clean", NULL, 10, NULL, NULL)); /* no result */
        append_line(fd, nsbox_traj_step_line(2, "reset", NULL, NULL, 2, NULL, "no_snapshot"));
        append_line(fd, nsbox_traj_step_line(4, "reset", "clean", NULL, 2, result, NULL));
        char want_digest[65];
        ck_assert_int_eq(nsbox_traj_digest(result, want_digest), 0);

        nsbox_trajectory t = { 0 };
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_traj_load(path, &t, &err), &err);
        ck_assert_str_eq(t.sandbox, "sb-42");
        ck_assert_int_eq(t.created, 1700000000);
        ck_assert(json_equal(t.create, create));
        ck_assert_uint_eq(t.n_steps, 4);
        for (size_t i = 0; i < 4; i++)
                ck_assert_uint_eq(t.steps[i].step, i + 1);

        ck_assert_str_eq(t.steps[0].op, "snapshot");
        ck_assert_str_eq(t.steps[0].name, "clean");
        ck_assert_ptr_null(t.steps[0].tool);
        ck_assert_ptr_null(t.steps[0].params);
        ck_assert_ptr_null(t.steps[0].error);
        ck_assert(!t.steps[0].has_digest);
        ck_assert_uint_eq(json_object_size(t.steps[0].summary), 0);

        ck_assert_str_eq(t.steps[1].op, "reset");
        ck_assert_ptr_null(t.steps[1].name);
        ck_assert_str_eq(t.steps[1].error, "no_snapshot");
        ck_assert(!t.steps[1].has_digest);
        ck_assert_uint_eq(json_object_size(t.steps[1].summary), 0);

        ck_assert_str_eq(t.steps[2].op, "call");
        ck_assert_str_eq(t.steps[2].tool, "exec");
        ck_assert(json_equal(t.steps[2].params, params));
        ck_assert(t.steps[2].has_digest);
        ck_assert_str_eq(t.steps[2].digest, want_digest);
        ck_assert_ptr_null(t.steps[2].error);
        ck_assert(t.steps[2].duration_ms == 4.25);
        ck_assert_int_eq(json_integer_value(json_object_get(t.steps[2].summary, "exit_code")), 0);

        ck_assert_str_eq(t.steps[3].op, "reset");
        ck_assert_str_eq(t.steps[3].name, "clean");
        nsbox_traj_release(&t);
        ck_assert_ptr_null(t.steps);
        json_decref(result);
        json_decref(params);
        json_decref(create);
}
END_TEST

START_TEST(test_each_write_appends_one_whole_line)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        json_t *r = parse("{\"content\":\"two\\nlines\"}");
        append_line(fd, nsbox_traj_header("sb", 0, NULL));
        append_line(fd, nsbox_traj_step_line(1, "call", "read_file", NULL, 0, r, NULL));
        json_decref(r);
        char *text = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file_at(AT_FDCWD, path, 0, 1 << 20, &text, &len), 0);
        ck_assert_uint_gt(len, 0);
        ck_assert_int_eq(text[len - 1], '\n');
        size_t lines = 0;
        for (size_t i = 0; i < len; i++)
                lines += text[i] == '\n';
        ck_assert_uint_eq(lines, 2);
        UNIT_ASSERT_CONTAINS(text, "{\"nsbox_trajectory\":1,\"sandbox\":\"sb\",\"created\":0,\"create\":{}}\n");
        UNIT_ASSERT_CONTAINS(text, "\"params\":{}");
        free(text);
        ck_assert_int_eq(nsbox_traj_write(fd, NULL), -EINVAL);
}
END_TEST

START_TEST(test_builders_refuse_what_the_loader_would_refuse)
{
        json_t *r = parse("{}"), *arr = parse("[]");
        errno = 0;
        ck_assert_ptr_null(nsbox_traj_step_line(1, "exec", "x", NULL, 0, r, NULL));
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_ptr_null(nsbox_traj_step_line(0, "call", "exec", NULL, 0, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "call", NULL, NULL, 0, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "call", "", NULL, 0, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "call", "ex\033ec", NULL, 0, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "call", "ex\xffzz", NULL, 0, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "call", "exec", arr, 0, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "snapshot", NULL, NULL, 0, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "call", "exec", NULL, -1, r, NULL));
        ck_assert_ptr_null(nsbox_traj_step_line(1, "call", "exec", NULL, 0, NULL, "not a code"));
        ck_assert_ptr_null(nsbox_traj_header(NULL, 0, NULL));
        ck_assert_ptr_null(nsbox_traj_header("sb", 0, arr));
        ck_assert_ptr_null(nsbox_traj_header("sb", -1, NULL));

        /* an error wins over a result: no digest, an empty summary */
        json_t *l = nsbox_traj_step_line(5, "call", "exec", NULL, 1, r, "timeout");
        ck_assert_ptr_nonnull(l);
        ck_assert(json_is_null(json_object_get(l, "result_sha256")));
        ck_assert_uint_eq(json_object_size(json_object_get(l, "summary")), 0);
        ck_assert_str_eq(json_string_value(json_object_get(l, "error")), "timeout");
        json_decref(l);
        json_decref(arr);
        json_decref(r);
}
END_TEST

START_TEST(test_empty_lines_at_the_end_and_a_missing_last_newline_are_accepted)
{
        nsbox_trajectory t = { 0 };
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(load_text(HEADER CALL(1) "\n\n", &t, &err), &err);
        ck_assert_uint_eq(t.n_steps, 1);
        nsbox_traj_release(&t);
        char text[1024];
        snprintf(text, sizeof(text), "%s%s", HEADER, CALL(1));
        text[strlen(text) - 1] = '\0';
        UNIT_ASSERT_OK(load_text(text, &t, &err), &err);
        ck_assert_uint_eq(t.n_steps, 1);
        nsbox_traj_release(&t);
        UNIT_ASSERT_OK(load_text(HEADER, &t, &err), &err);
        ck_assert_uint_eq(t.n_steps, 0);
        nsbox_traj_release(&t);
}
END_TEST

/* ---- what the loader refuses ---- */

START_TEST(test_load_missing_file_names_it)
{
        nsbox_trajectory t = { .n_steps = 77 };
        nsbox_error err = { 0 };
        ck_assert_int_eq(nsbox_traj_load(path, &t, &err), -ENOENT);
        ck_assert_uint_eq(t.n_steps, 77);
        UNIT_ASSERT_ERROR(&err, "open trajectory '", path, "': No such file or directory");
}
END_TEST

START_TEST(test_load_refuses_a_fifo_and_a_directory_at_once)
{
        nsbox_trajectory t = { .n_steps = 77 };
        nsbox_error err = { 0 };
        ck_assert_int_eq(mkfifo(path, 0600), 0); /* no writer: a blocking open would hang */
        ck_assert_int_eq(nsbox_traj_load(path, &t, &err), -EINVAL);
        UNIT_ASSERT_ERROR(&err, "trajectory '", path, "': not a regular file");
        ck_assert_int_eq(nsbox_traj_load(dir, &t, &err), -EINVAL);
        UNIT_ASSERT_ERROR(&err, "trajectory '", dir, "': not a regular file");
        ck_assert_uint_eq(t.n_steps, 77);
}
END_TEST

START_TEST(test_load_empty_file_is_refused)
{
        ASSERT_LOAD_FAILS("", "' is empty");
        ASSERT_LOAD_FAILS("\n\n", "' is empty");
}
END_TEST

START_TEST(test_load_needs_the_header_first)
{
        ASSERT_LOAD_FAILS(CALL(1), "' line 1: the header must come first");
        ASSERT_LOAD_FAILS(HEADER CALL(1) HEADER, "' line 3: a header is only allowed on line 1");
        ASSERT_LOAD_FAILS("\n" HEADER, "' line 1: empty lines are only allowed at the end of the file");
}
END_TEST

START_TEST(test_load_refuses_another_version)
{
        nsbox_trajectory t = { 0 };
        nsbox_error err = { 0 };
        ck_assert_int_lt(load_text("{\"nsbox_trajectory\":2,\"whatever\":true}\n", &t, &err), 0);
        char want[256];
        snprintf(want, sizeof(want), "trajectory '%s': version 2 is not supported (this nsbox reads 1)", path);
        ck_assert_str_eq(err.msg, want);
        nsbox_error_clear(&err);
}
END_TEST

START_TEST(test_load_refuses_unknown_keys)
{
        ASSERT_LOAD_FAILS("{\"nsbox_trajectory\":1,\"sandbox\":\"s\",\"created\":1,\"create\":{},\"x\":1}\n",
                          "' line 1: unknown key 'x'");
        ASSERT_LOAD_FAILS(HEADER "{\"step\":1,\"op\":\"snapshot\",\"name\":\"a\",\"tool\":\"exec\",\"duration_ms\":0,"
                                 "\"error\":null,\"result_sha256\":\"" HEX64 "\",\"summary\":{}}\n",
                          "' line 2: unknown key 'tool'");
}
END_TEST

START_TEST(test_load_refuses_a_bad_digest)
{
#define RESET_FMT HEADER "{\"step\":1,\"op\":\"reset\",\"name\":null,\"duration_ms\":0,\"error\":%s," \
                          "\"result_sha256\":%s,\"summary\":{}}\n"
        char text[1024];
        snprintf(text, sizeof(text), RESET_FMT, "null", "\"0123ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef012345\"");
        ASSERT_LOAD_FAILS(text, "' line 2: 'result_sha256' must be 64 lowercase hex digits");
        snprintf(text, sizeof(text), RESET_FMT, "null", "\"0123\"");
        ASSERT_LOAD_FAILS(text, "' line 2: 'result_sha256' must be 64 lowercase hex digits");
        snprintf(text, sizeof(text), RESET_FMT, "\"timeout\"", "\"" HEX64 "\"");
        ASSERT_LOAD_FAILS(text, "' line 2: 'result_sha256' must be null when 'error' is set");
#undef RESET_FMT
}
END_TEST

START_TEST(test_load_refuses_a_step_recorded_twice)
{
        ASSERT_LOAD_FAILS(HEADER CALL(2) CALL(1) CALL(2), "' line 4: step 2 is recorded twice (also on line 2)");
}
END_TEST

START_TEST(test_load_refuses_step_zero_and_non_integers)
{
        ASSERT_LOAD_FAILS(HEADER CALL(0), "' line 2: 'step' must be a positive integer");
        ASSERT_LOAD_FAILS(HEADER CALL(-3), "' line 2: 'step' must be a positive integer");
        ASSERT_LOAD_FAILS(HEADER CALL("1"), "' line 2: 'step' must be a positive integer");
        ASSERT_LOAD_FAILS(HEADER CALL(1.0), "' line 2: 'step' must be a positive integer");
}
END_TEST

START_TEST(test_load_refuses_a_call_without_tool_or_params)
{
        ASSERT_LOAD_FAILS(HEADER "{\"step\":1,\"op\":\"call\",\"params\":{},\"duration_ms\":0,\"error\":\"x\","
                                 "\"result_sha256\":null,\"summary\":{}}\n",
                          "' line 2: 'tool' is missing");
        ASSERT_LOAD_FAILS(HEADER "{\"step\":1,\"op\":\"call\",\"tool\":\"exec\",\"params\":[],\"duration_ms\":0,"
                                 "\"error\":\"x\",\"result_sha256\":null,\"summary\":{}}\n",
                          "' line 2: 'params' must be an object");
        ASSERT_LOAD_FAILS(HEADER "{\"step\":1,\"op\":\"run\",\"duration_ms\":0}\n",
                          "' line 2: 'op' must be \"call\", \"snapshot\" or \"reset\"");
        ASSERT_LOAD_FAILS(HEADER "{\"step\":1,\"op\":\"snapshot\",\"name\":null,\"duration_ms\":0,\"error\":\"x\","
                                 "\"result_sha256\":null,\"summary\":{}}\n",
                          "' line 2: 'name' must be a non-empty string");
        ASSERT_LOAD_FAILS(HEADER "{\"step\":1,\"op\":\"reset\",\"name\":null,\"error\":\"x\","
                                 "\"result_sha256\":null,\"summary\":{}}\n",
                          "' line 2: 'duration_ms' is missing");
}
END_TEST

START_TEST(test_load_reports_malformed_json_with_its_line)
{
        ASSERT_LOAD_FAILS(HEADER CALL(1) "{\"step\":2,\n", "' line 3: malformed JSON");
        ASSERT_LOAD_FAILS(HEADER "[1,2]\n", "' line 2: must be a JSON object");
        ASSERT_LOAD_FAILS(HEADER "{\"step\":1,\"step\":2}\n", "' line 2: malformed JSON");
        ASSERT_LOAD_FAILS(HEADER CALL(1) "\n" CALL(2), "' line 3: empty lines are only allowed at the end of the file");
}
END_TEST

START_TEST(test_load_refuses_a_line_over_the_bound)
{
        char text[2048];
        snprintf(text, sizeof(text), "%s%s", HEADER, CALL(1));
        size_t call_len = strlen(CALL(1)) - 1; /* the longer line, without its '\n' */
        write_text(text);

        nsbox_trajectory t = { .n_steps = 77 };
        nsbox_error err = { 0 };
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_lt(nsbox_traj_load_fd(fd, "mem", call_len - 1, &t, &err), 0);
        ck_assert_uint_eq(t.n_steps, 77);
        char want[64];
        snprintf(want, sizeof(want), "longer than %zu bytes", call_len - 1);
        UNIT_ASSERT_ERROR(&err, "trajectory 'mem' line 2: ", want);

        /* exactly at the bound is fine */
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        UNIT_ASSERT_OK(nsbox_traj_load_fd(fd, "mem", call_len, &t, &err), &err);
        ck_assert_uint_eq(t.n_steps, 1);
        nsbox_traj_release(&t);
}
END_TEST

START_TEST(test_load_reads_many_steps_across_read_chunks)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        append_line(fd, nsbox_traj_header("sb", 1, NULL));
        json_t *r = parse("{\"exit_code\":0}");
        for (uint64_t i = 3000; i >= 1; i--) {
                json_t *p = json_pack("{sI}", "n", (json_int_t)i);
                append_line(fd, nsbox_traj_step_line(i, "call", "exec", p, 1, r, NULL));
                json_decref(p);
        }
        json_decref(r);
        nsbox_trajectory t = { 0 };
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_traj_load(path, &t, &err), &err);
        ck_assert_uint_eq(t.n_steps, 3000);
        for (size_t i = 0; i < t.n_steps; i++) {
                ck_assert_uint_eq(t.steps[i].step, i + 1);
                ck_assert_int_eq(json_integer_value(json_object_get(t.steps[i].params, "n")), (json_int_t)i + 1);
        }
        nsbox_traj_release(&t);
}
END_TEST

/* ---- comparing a replayed step ---- */

/* The step recorded for result (or error). */
static void recorded(nsbox_traj_step *s, const char *result_text, const char *error)
{
        *s = (nsbox_traj_step){ .step = 1, .op = "call" };
        if (error) {
                s->error = strdup(error);
                s->summary = json_object();
                return;
        }
        json_t *r = parse(result_text);
        ck_assert_int_eq(nsbox_traj_digest(r, s->digest), 0);
        s->has_digest = true;
        s->summary = nsbox_traj_summary(r);
        json_decref(r);
}

static void forget(nsbox_traj_step *s)
{
        free(s->error);
        json_decref(s->summary);
}

/* Compare the replayed result_text (or error) with want; returns compare's answer, why in buf. */
static int replay(const nsbox_traj_step *want, const char *result_text, const char *error, char *buf, size_t size)
{
        json_t *r = result_text ? parse(result_text) : NULL;
        strbuf why;
        sb_init(&why, 0);
        int k = nsbox_traj_compare(want, r, error, &why);
        snprintf(buf, size, "%s", why.buf ? why.buf : "");
        sb_release(&why);
        json_decref(r);
        return k;
}

START_TEST(test_compare_matches_a_result_that_differs_only_in_volatile_keys)
{
        nsbox_traj_step s;
        char why[256];
        recorded(&s, "{\"exit_code\":0,\"stdout\":\"hi\",\"duration_ms\":5,\"pid\":100}", NULL);
        ck_assert_int_eq(replay(&s, "{\"pid\":200,\"stdout\":\"hi\",\"exit_code\":0,\"duration_ms\":9}", NULL, why, sizeof(why)), 1);
        ck_assert_str_eq(why, "");
        forget(&s);
        recorded(&s, NULL, "file_not_found");
        ck_assert_int_eq(replay(&s, NULL, "file_not_found", why, sizeof(why)), 1);
        forget(&s);
}
END_TEST

START_TEST(test_compare_names_an_error_that_differs_either_way)
{
        nsbox_traj_step s;
        char why[256];
        recorded(&s, "{\"content\":\"x\"}", NULL);
        ck_assert_int_eq(replay(&s, NULL, "file_not_found", why, sizeof(why)), 0);
        ck_assert_str_eq(why, "error file_not_found, expected none");
        forget(&s);
        recorded(&s, NULL, "file_not_found");
        ck_assert_int_eq(replay(&s, "{\"content\":\"x\"}", NULL, why, sizeof(why)), 0);
        ck_assert_str_eq(why, "error none, expected file_not_found");
        ck_assert_int_eq(replay(&s, NULL, "permission_denied", why, sizeof(why)), 0);
        ck_assert_str_eq(why, "error permission_denied, expected file_not_found");
        forget(&s);
}
END_TEST

START_TEST(test_compare_of_a_step_recorded_without_result_compares_errors_only)
{
        nsbox_traj_step s = { .step = 1, .op = "snapshot", .summary = json_object() };
        char why[256];
        ck_assert_int_eq(replay(&s, NULL, NULL, why, sizeof(why)), 1);
        ck_assert_int_eq(replay(&s, "{\"exit_code\":3}", NULL, why, sizeof(why)), 1);
        ck_assert_int_eq(replay(&s, NULL, "no_snapshot", why, sizeof(why)), 0);
        ck_assert_str_eq(why, "error no_snapshot, expected none");
        forget(&s);
}
END_TEST

START_TEST(test_compare_names_the_summary_field_that_differs)
{
        nsbox_traj_step s;
        char why[256];
        recorded(&s, "{\"exit_code\":0,\"stdout\":\"hi\",\"timed_out\":false}", NULL);
        ck_assert_int_eq(replay(&s, "{\"exit_code\":1,\"stdout\":\"no\",\"timed_out\":false}", NULL, why, sizeof(why)), 0);
        ck_assert_str_eq(why, "exit_code 1, expected 0");
        ck_assert_int_eq(replay(&s, "{\"stdout\":\"hi\",\"timed_out\":false}", NULL, why, sizeof(why)), 0);
        ck_assert_str_eq(why, "no exit_code, expected 0");
        ck_assert_int_eq(replay(&s, "{\"exit_code\":0,\"stdout\":\"hi\",\"timed_out\":false,\"signal\":9}", NULL, why,
                                sizeof(why)),
                         0);
        ck_assert_str_eq(why, "signal 9, expected none");
        forget(&s);
        /* a long value is cut short, the message stays one short line */
        recorded(&s, "{\"reason\":\"oom\"}", NULL);
        ck_assert_int_eq(replay(&s, "{\"reason\":\"" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" "\"}", NULL, why,
                                sizeof(why)),
                         0);
        ck_assert_str_eq(why, "reason \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.., expected \"oom\"");
        forget(&s);
}
END_TEST

START_TEST(test_compare_names_both_digests_when_the_result_differs)
{
        nsbox_traj_step s;
        char why[256], got[65];
        recorded(&s, "{\"exit_code\":0,\"stdout\":\"hi\"}", NULL);
        digest_of("{\"exit_code\":0,\"stdout\":\"ho\"}", got);
        ck_assert_int_eq(replay(&s, "{\"exit_code\":0,\"stdout\":\"ho\"}", NULL, why, sizeof(why)), 0);
        char want[128];
        snprintf(want, sizeof(want), "result differs (sha256 %.8s.., expected %.8s..)", got, s.digest);
        ck_assert_str_eq(why, want);
        ck_assert_int_eq(replay(&s, NULL, NULL, why, sizeof(why)), 0);
        snprintf(want, sizeof(want), "no result, expected sha256 %.8s..", s.digest);
        ck_assert_str_eq(why, want);
        forget(&s);
}
END_TEST

/* ---- the create parameters of a replay ---- */

static json_t *replay_params(const char *recorded, const char *given, int want, const char *want_refused)
{
        json_t *rec = json_loads(recorded, 0, NULL), *giv = json_loads(given, 0, NULL), *ret = NULL;
        ck_assert_ptr_nonnull(rec);
        ck_assert_ptr_nonnull(giv);
        _cleanup_sb_ strbuf refused;
        sb_init(&refused, 4096);
        ck_assert_int_eq(nsbox_traj_replay_params(rec, giv, &ret, &refused), want);
        ck_assert_str_eq(refused.buf ? refused.buf : "", want_refused);
        json_decref(rec);
        json_decref(giv);
        return ret;
}

START_TEST(test_replay_params_refuse_what_reaches_the_host_unless_given_again)
{
        /* each host-facing parameter, listed; control characters escaped */
        json_t *none = replay_params("{\"bind\": [\"/home/u:/h:rw\", \"/a:/a\"], \"net\": \"nat\", \"rootfs\": \"host\", \"policy\": \"/p.json\","
                      " \"publish\": [\"80\"], \"allow\": [\"1.2.3.4:443\"], \"record\": \"/r\", \"repo\": \"/x\\u001b\","
                      " \"template\": \"t\", \"idle_timeout\": 3, \"weird_key\": 1, \"memory\": \"64M\"}",
                      "{\"bind\": [\"/a:/a\"]}", -EPERM,
                      "--bind /home/u:/h:rw, --net nat, --rootfs host, --policy /p.json, --publish 80, --allow 1.2.3.4:443,"
                      " --record /r, --repo /x\\x1b, --template t, --weird-key 1");
        ck_assert_ptr_null(none);
        /* given again but not the same */
        none = replay_params("{\"bind\": [\"/h:/h:rw\"], \"net\": \"nat\"}", "{\"bind\": [\"/h:/h\"], \"net\": \"nat\"}", -EPERM,
                      "--bind /h:/h:rw");
        ck_assert_ptr_null(none);
}
END_TEST

START_TEST(test_replay_params_use_what_stays_inside_and_what_is_given)
{
        json_t *p = replay_params("{\"bind\": [\"/h:/h:rw\"], \"net\": \"none\", \"policy\": \"default\", \"publish\": [],"
                                  " \"memory\": \"64M\", \"timeout\": 60, \"env\": [\"A=1\"], \"workdir\": \"/w\", \"repo\": \"/r\","
                                  " \"commit\": \"main\"}",
                                  "{\"bind\": [\"/h:/h:rw\", \"/more:/more\"], \"repo\": \"/r\", \"memory\": \"128M\", \"env\": [],"
                                  " \"labels\": {}}",
                                  0, "");
        char *text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
        ck_assert_str_eq(text, "{\"bind\":[\"/h:/h:rw\",\"/more:/more\"],\"commit\":\"main\",\"env\":[\"A=1\"],\"memory\":\"128M\","
                               "\"repo\":\"/r\",\"timeout\":60,\"workdir\":\"/w\"}");
        free(text);
        json_decref(p);
        /* a snapshot given again replaces the recorded repository */
        p = replay_params("{\"repo\": \"/r\", \"commit\": \"main\", \"from\": \"a\"}", "{\"from\": \"b\"}", 0, "");
        text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
        ck_assert_str_eq(text, "{\"from\":\"b\"}");
        free(text);
        json_decref(p);
}
END_TEST

/* ---- knowlyr's JSON document ---- */

#define KN_DOC "{\"steps\": [{\"tool_name\": \"shell\", \"params\": {\"command\": \"ls\"}, \"expected_output\": \"a\\n\"},\n" \
               " {\"tool_name\": \"file_read\", \"params\": {\"path\": \"a\"}},\n" \
               " {\"tool_name\": \"git\", \"params\": {\"subcommand\": \"log\"}, \"expected_output\": null}], \"metadata\": {\"task\": 1}}\n"

START_TEST(test_knowlyr_document_is_told_by_its_shape_and_loaded)
{
        write_text(KN_DOC);
        nsbox_knowlyr_traj t = { 0 };
        nsbox_error err = { 0 };
        ck_assert_int_eq(nsbox_knowlyr_load(path, &t, &err), 1);
        ck_assert_uint_eq(t.n_steps, 3);
        ck_assert_str_eq(t.steps[0].tool, "shell");
        ck_assert_str_eq(t.steps[0].expected, "a\n");
        ck_assert_uint_eq(t.steps[0].expected_len, 2);
        ck_assert_ptr_null(t.steps[1].expected);
        ck_assert_ptr_null(t.steps[2].expected);
        ck_assert_str_eq(json_string_value(json_object_get(t.steps[2].params, "subcommand")), "log");
        nsbox_knowlyr_release(&t);
        /* nsbox's own lines are not one: nsbox_traj_load reads them */
        write_text(HEADER CALL(1));
        ck_assert_int_eq(nsbox_knowlyr_load(path, &t, &err), 0);
        write_text(HEADER);
        ck_assert_int_eq(nsbox_knowlyr_load(path, &t, &err), 0);
        write_text("garbage\n");
        ck_assert_int_eq(nsbox_knowlyr_load(path, &t, &err), 0);
        write_text("");
        ck_assert_int_eq(nsbox_knowlyr_load(path, &t, &err), 0);
        ck_assert_ptr_null(err.msg);
}
END_TEST

START_TEST(test_knowlyr_document_is_parsed_strictly)
{
        const char *bad[][2] = {
                { "{\"steps\": []}", "'steps' must be a non-empty array" },
                { "{\"steps\": {}}", "'steps' must be a non-empty array" },
                { "{\"steps\": [1]}", "step 1: must be an object" },
                { "{\"steps\": [{\"tool_name\": \"shell\", \"params\": {}}, {\"params\": {}}]}", "step 2: 'tool_name' must be a string" },
                { "{\"steps\": [{\"tool_name\": \"nope\", \"params\": {}}]}", "step 1: unknown tool 'nope'" },
                { "{\"steps\": [{\"tool_name\": \"shell\"}]}", "step 1: 'params' must be an object" },
                { "{\"steps\": [{\"tool_name\": \"shell\", \"params\": {}, \"expected_output\": 3}]}", "'expected_output' must be a string or null" },
                { "{\"steps\": [{\"tool_name\": \"shell\", \"params\": {}, \"extra\": 3}]}", "step 1: unknown key 'extra'" },
                { "{\"steps\": [{\"tool_name\": \"shell\", \"params\": {}}], \"other\": 1}", "unknown key 'other'" },
                { "{\"steps\": [{\"tool_name\": \"shell\", \"params\": {}}]} {}", "text after the JSON document" },
                { "{\"steps\": [\n{\"tool_name\": \"shell\",\n \"params\": {}", "malformed JSON at line 3" },
                { "{\"steps\": [{\"tool_name\": \"shell\", \"tool_name\": \"x\", \"params\": {}}]}", "malformed JSON" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                nsbox_knowlyr_traj t = { 0 };
                nsbox_error err = { 0 };
                char msg[512];
                int r = nsbox_knowlyr_load_text(bad[i][0], strlen(bad[i][0]), "k.json", &t, &err);
                if (r == 0 && !strstr(bad[i][1], "malformed")) /* told apart: a line-1 error is nsbox's loader's */
                        ck_abort_msg("'%s' was not taken as a knowlyr document", bad[i][0]);
                if (r == 0)
                        continue;
                ck_assert_int_lt(r, 0);
                ck_assert(unit_take_error(&err, msg, sizeof(msg)));
                UNIT_ASSERT_CONTAINS(msg, bad[i][1]);
                UNIT_ASSERT_CONTAINS(msg, "trajectory 'k.json'");
                ck_assert_ptr_null(t.steps);
        }
}
END_TEST

START_TEST(test_knowlyr_failed_command_is_no_success_even_when_its_output_matches)
{
        nsbox_knowlyr_step st = { .tool = "shell", .expected = "", .expected_len = 0 };
        json_t *r127 = parse("{\"exit_code\": 127, \"signal\": 0, \"stdout\": \"\", \"timed_out\": false}");
        strbuf why;
        sb_init(&why, 0);
        bool ok = true;
        ck_assert_int_eq(nsbox_knowlyr_judge(&st, r127, NULL, &ok, &why), 0);
        ck_assert(!ok);
        ck_assert_str_eq(why.buf, "failed: exit_code 127");
        sb_release(&why);
        json_decref(r127);
        /* exit 0 with the expected stdout matches; another stdout does not, and says both */
        st.expected = "hi\n";
        st.expected_len = 3;
        json_t *r0 = parse("{\"exit_code\": 0, \"signal\": 0, \"stdout\": \"hi\\n\", \"timed_out\": false}");
        sb_init(&why, 0);
        ck_assert_int_eq(nsbox_knowlyr_judge(&st, r0, NULL, &ok, &why), 1);
        ck_assert(ok);
        st.expected = "ho\n";
        ck_assert_int_eq(nsbox_knowlyr_judge(&st, r0, NULL, &ok, &why), 0);
        ck_assert(ok);
        ck_assert_str_eq(why.buf, "output \"hi\\n\", expected \"ho\\n\"");
        sb_release(&why);
        json_decref(r0);
        /* a signal, a timeout, a tool error */
        const char *failed[][2] = {
                { "{\"exit_code\": -1, \"signal\": 9, \"stdout\": \"\"}", "failed: killed by signal 9" },
                { "{\"exit_code\": 0, \"signal\": 0, \"timed_out\": true}", "failed: timed out" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(failed); i++) {
                json_t *r = parse(failed[i][0]);
                sb_init(&why, 0);
                ck_assert_int_eq(nsbox_knowlyr_judge(&st, r, NULL, &ok, &why), 0);
                ck_assert_str_eq(why.buf, failed[i][1]);
                sb_release(&why);
                json_decref(r);
        }
        nsbox_knowlyr_step rd = { .tool = "file_read", .expected = NULL };
        sb_init(&why, 0);
        ck_assert_int_eq(nsbox_knowlyr_judge(&rd, NULL, "file_not_found", &ok, &why), 0);
        ck_assert_str_eq(why.buf, "failed: error file_not_found");
        sb_release(&why);
}
END_TEST

START_TEST(test_knowlyr_main_output_of_each_kind_of_tool)
{
        size_t n;
        json_t *r = parse("{\"content\": \"a\\nb\\n\", \"total_lines\": 2}");
        char *o = nsbox_knowlyr_output("file_read", r, &n);
        ck_assert_str_eq(o, "a\nb\n");
        free(o);
        json_decref(r);
        r = parse("{\"matches\": [{\"path\": \"/w/a.py\", \"line\": 3, \"text\": \"x = 1\"}, {\"path\": \"/w/b.py\", \"line\": 1, \"text\": \"y\"}]}");
        o = nsbox_knowlyr_output("search", r, &n);
        ck_assert_str_eq(o, "/w/a.py:3:x = 1\n/w/b.py:1:y\n");
        free(o);
        json_decref(r);
        r = parse("{\"path\": \"/w/a\", \"created\": true, \"bytes_written\": 2}");
        o = nsbox_knowlyr_output("file_write", r, &n);
        ck_assert_str_eq(o, "{\"bytes_written\":2,\"created\":true,\"path\":\"/w/a\"}");
        free(o);
        json_decref(r);
        r = json_pack("{ss% si}", "stdout", "a\0b", (size_t)3, "exit_code", 0);
        o = nsbox_knowlyr_output("git", r, &n);
        ck_assert_uint_eq(n, 3);
        ck_assert_mem_eq(o, "a\0b", 3);
        free(o);
        json_decref(r);
}
END_TEST

Suite *trajectory_suite(void)
{
        Suite *s = suite_create("trajectory");
        TCase *tc = unit_tcase(s, "sha256");
        unit_add(tc, test_sha256_matches_the_standard_vectors);
        unit_add(tc, test_sha256_of_a_million_a_fed_in_odd_chunks);
        unit_add(tc, test_sha256_is_the_same_whole_or_byte_by_byte_around_block_edges);

        tc = unit_tcase(s, "trajectory");
        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        unit_add(tc, test_digest_ignores_volatile_keys_at_any_depth);
        unit_add(tc, test_digest_ignores_key_order);
        unit_add(tc, test_digest_differs_when_content_differs);
        unit_add(tc, test_digest_is_sha256_of_the_canonical_text);
        unit_add(tc, test_digest_leaves_the_result_alone_and_refuses_null);
        unit_add(tc, test_summary_keeps_the_named_top_level_fields);
        unit_add(tc, test_lines_written_out_of_order_load_sorted_by_step);
        unit_add(tc, test_each_write_appends_one_whole_line);
        unit_add(tc, test_builders_refuse_what_the_loader_would_refuse);
        unit_add(tc, test_empty_lines_at_the_end_and_a_missing_last_newline_are_accepted);
        unit_add(tc, test_load_missing_file_names_it);
        unit_add(tc, test_load_empty_file_is_refused);
        unit_add(tc, test_load_refuses_a_fifo_and_a_directory_at_once);
        unit_add(tc, test_replay_params_refuse_what_reaches_the_host_unless_given_again);
        unit_add(tc, test_replay_params_use_what_stays_inside_and_what_is_given);
        unit_add(tc, test_load_needs_the_header_first);
        unit_add(tc, test_load_refuses_another_version);
        unit_add(tc, test_load_refuses_unknown_keys);
        unit_add(tc, test_load_refuses_a_bad_digest);
        unit_add(tc, test_load_refuses_a_step_recorded_twice);
        unit_add(tc, test_load_refuses_step_zero_and_non_integers);
        unit_add(tc, test_load_refuses_a_call_without_tool_or_params);
        unit_add(tc, test_load_reports_malformed_json_with_its_line);
        unit_add(tc, test_load_refuses_a_line_over_the_bound);
        unit_add(tc, test_load_reads_many_steps_across_read_chunks);
        unit_add(tc, test_compare_matches_a_result_that_differs_only_in_volatile_keys);
        unit_add(tc, test_compare_names_an_error_that_differs_either_way);
        unit_add(tc, test_compare_of_a_step_recorded_without_result_compares_errors_only);
        unit_add(tc, test_compare_names_the_summary_field_that_differs);
        unit_add(tc, test_compare_names_both_digests_when_the_result_differs);
        unit_add(tc, test_knowlyr_document_is_told_by_its_shape_and_loaded);
        unit_add(tc, test_knowlyr_document_is_parsed_strictly);
        unit_add(tc, test_knowlyr_failed_command_is_no_success_even_when_its_output_matches);
        unit_add(tc, test_knowlyr_main_output_of_each_kind_of_tool);
        tcase_set_timeout(tc, 30);
        return s;
}
