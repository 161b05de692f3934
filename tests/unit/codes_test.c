/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The stable codes (runtime/codes.h) are one list: the protocol man page, libnsbox's man page
 * and the Python client's exceptions say the same codes as the C list, no more and no fewer. */
#include <errno.h>

#include "../../runtime/codes.h"
#include "../../tools/tool.h"
#include "unit.h"

static char *slurp(const char *rel)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", unit_src(), rel);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "cannot open %s (set NSBOX_SRC to the source tree)", path);
        strbuf b;
        sb_init(&b, 1 << 22);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                ck_assert_int_eq(sb_append(&b, buf, n), 0);
        fclose(f);
        ck_assert_ptr_nonnull(b.buf);
        return b.buf;
}

/* A character of a code's name. */
static bool is_code_char(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }

START_TEST(the_list_has_unique_names_and_each_maps_back)
{
        for (int i = NSBOX_CODE_OK + 1; i < _NSBOX_CODE_MAX; i++) {
                const char *n = nsbox_code_name((nsbox_code)i);
                ck_assert_ptr_eq(nsbox_code_static(n), n);
                for (int k = i + 1; k < _NSBOX_CODE_MAX; k++)
                        ck_assert_str_ne(n, nsbox_code_name((nsbox_code)k));
        }
        char copy[] = "file_not_found";
        ck_assert_ptr_eq(nsbox_code_static(copy), nsbox_code_name(NSBOX_CODE_FILE_NOT_FOUND));
        ck_assert_str_eq(nsbox_code_static("no_such_code"), "internal");
        ck_assert_str_eq(nsbox_code_static(NULL), "internal");
        ck_assert_str_eq(nsbox_code_name((nsbox_code)999), "internal");
        ck_assert_str_eq(tool_code_name(TOOL_INVALID_PATH), "invalid_path");
        ck_assert_int_eq(nsbox_code_errno("not_found"), ESRCH);
        ck_assert_int_eq(nsbox_code_errno("newer_code"), EIO);
        ck_assert_str_eq(nsbox_code_for_errno(-ENOENT), "not_found");
        ck_assert_str_eq(nsbox_code_for_errno(-EOPNOTSUPP), "invalid_argument");
        ck_assert_str_eq(nsbox_code_for_errno(EFBIG), "too_large");
        ck_assert_str_eq(nsbox_code_for_errno(-EMFILE), "capacity");
        ck_assert_str_eq(nsbox_code_for_errno(-EIO), "internal");
}
END_TEST

START_TEST(the_protocol_man_page_lists_exactly_these_codes)
{
        char *man = slurp("man/nsbox-protocol.7");
        char *start = strstr(man, "\nThe stable codes:\n");
        ck_assert_msg(start != NULL, "nsbox-protocol(7) has no 'The stable codes:' list");
        char *end = strstr(start, "\n.SH ");
        if (end)
                *end = '\0';
        int listed = 0;
        for (char *l = strstr(start, "\n.TP\n.B "); l; l = strstr(l + 1, "\n.TP\n.B ")) {
                char word[64] = "";
                sscanf(l + strlen("\n.TP\n.B "), "%63[a-z_]", word);
                ck_assert_msg(strcmp(nsbox_code_static(word), word) == 0 || !strcmp(word, "internal"),
                              "nsbox-protocol(7) lists '%s', which runtime/codes.h does not have", word);
                listed++;
        }
        for (int i = NSBOX_CODE_OK + 1; i < _NSBOX_CODE_MAX; i++) {
                char want[80];
                snprintf(want, sizeof(want), "\n.TP\n.B %s\n", nsbox_code_name((nsbox_code)i));
                ck_assert_msg(strstr(start, want) != NULL, "nsbox-protocol(7) does not describe the code '%s'", nsbox_code_name((nsbox_code)i));
        }
        ck_assert_int_eq(listed, _NSBOX_CODE_MAX - 1);
        free(man);
}
END_TEST

START_TEST(libnsbox_man_page_gives_each_code_its_errno)
{
        static const struct {
                const char *name;
                int value;
        } errnos[] = { { "ENOENT", ENOENT }, { "EACCES", EACCES },       { "EISDIR", EISDIR }, { "ENOTDIR", ENOTDIR },
                       { "EINVAL", EINVAL }, { "E2BIG", E2BIG },         { "ETIMEDOUT", ETIMEDOUT }, { "ESRCH", ESRCH },
                       { "EBUSY", EBUSY },   { "EAGAIN", EAGAIN },       { "ESHUTDOWN", ESHUTDOWN }, { "EIO", EIO } };
        char *man = slurp("man/libnsbox.3");
        for (int i = NSBOX_CODE_OK + 1; i < _NSBOX_CODE_MAX; i++) {
                const char *n = nsbox_code_name((nsbox_code)i);
                /* a table row: "name[, name]\t\-EXXX" */
                char *row = NULL;
                for (char *p = strstr(man, n); p && !row; p = strstr(p + 1, n))
                        if (p[-1] == '\n' || (p[-1] == ' ' && p[-2] == ','))
                                if (!is_code_char(p[strlen(n)]))
                                        row = p;
                ck_assert_msg(row != NULL, "libnsbox(3) has no row for the code '%s'", n);
                char *e = strstr(row, "\\-E");
                ck_assert_msg(e && e < strchr(row, '\n') + 1, "libnsbox(3): the row of '%s' names no errno", n);
                char name[32] = "";
                sscanf(e + 2, "%31[A-Z0-9]", name);
                int value = -1;
                for (size_t k = 0; k < sizeof(errnos) / sizeof(errnos[0]); k++)
                        if (!strcmp(errnos[k].name, name))
                                value = errnos[k].value;
                ck_assert_msg(value == nsbox_code_errno(n), "libnsbox(3) gives '%s' -%s; runtime/codes.h gives errno %d", n, name, nsbox_code_errno(n));
        }
        free(man);
}
END_TEST

START_TEST(the_python_client_maps_exactly_these_codes)
{
        char *py = slurp("clients/python/nsbox/exceptions.py");
        char *start = strstr(py, "_BY_CODE = {");
        ck_assert_msg(start != NULL, "exceptions.py has no _BY_CODE table");
        char *end = strstr(start, "\n}");
        ck_assert_ptr_nonnull(end);
        *end = '\0';
        int listed = 0;
        for (char *q = strchr(start, '"'); q; q = strchr(q + 1, '"')) {
                char word[64] = "";
                if (sscanf(q + 1, "%63[a-z_]\":", word) != 1 || q[1 + strlen(word)] != '"' || q[2 + strlen(word)] != ':')
                        continue;
                ck_assert_msg(strcmp(nsbox_code_static(word), word) == 0 && strcmp(word, "internal"),
                              "exceptions.py maps '%s', which runtime/codes.h does not have (or internal, SandboxException's own)", word);
                listed++;
                q += strlen(word) + 1;
        }
        /* internal: SandboxException itself, the class of every code not in the table */
        ck_assert_msg(strstr(py, "class SandboxException(Exception):") && strstr(py, "    code = \"internal\"\n"),
                      "exceptions.py: SandboxException is not the class of 'internal'");
        for (int i = NSBOX_CODE_OK + 1; i < _NSBOX_CODE_MAX; i++) {
                char want[80];
                snprintf(want, sizeof(want), "\"%s\":", nsbox_code_name((nsbox_code)i));
                ck_assert_msg(i == NSBOX_CODE_INTERNAL || strstr(start, want) != NULL, "exceptions.py does not map the code '%s'",
                              nsbox_code_name((nsbox_code)i));
        }
        ck_assert_int_eq(listed, _NSBOX_CODE_MAX - 2);
        free(py);
}
END_TEST

Suite *codes_suite(void)
{
        Suite *s = suite_create("codes");
        TCase *tc = unit_tcase(s, "codes");
        unit_add(tc, the_list_has_unique_names_and_each_maps_back);
        unit_add(tc, the_protocol_man_page_lists_exactly_these_codes);
        unit_add(tc, libnsbox_man_page_gives_each_code_its_errno);
        unit_add(tc, the_python_client_maps_exactly_these_codes);
        return s;
}
