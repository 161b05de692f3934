/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by the unit test files: registration that lets main() print each test's function name,
 * and assertions about what a user sees in an error. */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/error.h"

/* Create a test case in suite s; tests added with unit_add() are reported by their function name. */
TCase *unit_tcase(Suite *s, const char *name);
void unit_add(TCase *tc, const TTest *t);

/* The source tree: $NSBOX_SRC (tests/run sets it), else the current directory (make check runs
 * from the repository's root). */
static inline const char *unit_src(void)
{
        const char *s = getenv("NSBOX_SRC");
        return s && *s ? s : ".";
}

/* Move err's message into buf (empty if there is none) and clear err, so that a failing assertion
 * after it leaks nothing when tests run in-process (CK_FORK=no under valgrind).  True if err had
 * a message. */
static inline bool unit_take_error(nsbox_error *err, char *buf, size_t size)
{
        bool had = err->msg != NULL;
        snprintf(buf, size, "%s", had ? err->msg : "");
        nsbox_error_clear(err);
        return had;
}

/* Assertions are macros so that their location is inside the test that uses them. */
#define UNIT_ASSERT_CONTAINS(hay, needle)                                                       \
        do {                                                                                    \
                const char *_unit_h = (hay), *_unit_n = (needle);                               \
                ck_assert_msg(_unit_h && strstr(_unit_h, _unit_n), "'%s' does not contain '%s'", \
                              _unit_h ? _unit_h : "(null)", _unit_n);                           \
        } while (0)

/* An error a user reads is on one line. */
#define UNIT_ASSERT_ONE_LINE(msg)                                                                      \
        do {                                                                                           \
                const char *_unit_m = (msg);                                                           \
                ck_assert_msg(_unit_m != NULL, "no error message");                                    \
                ck_assert_msg(strchr(_unit_m, '\n') == NULL, "error message is not one line: %s", _unit_m); \
        } while (0)

/* err holds a one-line message containing each needle; err is cleared. */
#define UNIT_ASSERT_ERROR(err, ...)                                                        \
        do {                                                                               \
                char _unit_buf[2048];                                                      \
                bool _unit_had = unit_take_error((err), _unit_buf, sizeof(_unit_buf));     \
                ck_assert_msg(_unit_had, "no error message");                              \
                UNIT_ASSERT_ONE_LINE(_unit_buf);                                           \
                const char *_unit_needles[] = { __VA_ARGS__, NULL };                       \
                for (const char **_unit_p = _unit_needles; *_unit_p; _unit_p++)            \
                        UNIT_ASSERT_CONTAINS(_unit_buf, *_unit_p);                         \
        } while (0)

/* The call r succeeded, else the test fails with err's message; err is cleared. */
#define UNIT_ASSERT_OK(r, err)                                                             \
        do {                                                                               \
                int _unit_r = (r);                                                         \
                char _unit_buf[2048];                                                      \
                unit_take_error((err), _unit_buf, sizeof(_unit_buf));                      \
                ck_assert_msg(_unit_r == 0, "failed (%d): %s", _unit_r, _unit_buf);        \
        } while (0)
