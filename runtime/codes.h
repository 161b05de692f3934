/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The stable error codes of nsbox-protocol(7), ERRORS: the one list.  The tools' tool_code
 * (tools/tool.h), nsboxd's and libnsbox's replies, libnsbox's errno values, the protocol man
 * page and the Python client's exceptions all come from or are checked against it (unit test
 * codes_test.c).  Append only: a code's name never changes once a client may test for it. */
#pragma once

/* X(ENUM, "name", errno libnsbox returns for it) */
#define NSBOX_CODES(X)                                               \
        X(FILE_NOT_FOUND, "file_not_found", ENOENT)                  \
        X(PERMISSION_DENIED, "permission_denied", EACCES)            \
        X(IS_DIRECTORY, "is_directory", EISDIR)                      \
        X(NOT_A_DIRECTORY, "not_a_directory", ENOTDIR)               \
        X(INVALID_PATH, "invalid_path", EINVAL)                      \
        X(INVALID_ARGUMENT, "invalid_argument", EINVAL)              \
        X(TOO_LARGE, "too_large", E2BIG)                             \
        X(TIMEOUT, "timeout", ETIMEDOUT)                             \
        X(NOT_FOUND, "not_found", ESRCH)                             \
        X(CONFLICT, "conflict", EBUSY)                               \
        X(INTERNAL, "internal", EIO)                                 \
        X(CAPACITY, "capacity", EAGAIN)                              \
        X(UNAVAILABLE, "unavailable", ESHUTDOWN)

typedef enum nsbox_code {
        NSBOX_CODE_OK = 0,
#define NSBOX_CODE_ENUM(e, name, errnum) NSBOX_CODE_##e,
        NSBOX_CODES(NSBOX_CODE_ENUM)
#undef NSBOX_CODE_ENUM
        _NSBOX_CODE_MAX,
} nsbox_code;

/* "file_not_found", ...; "internal" for a value out of range (and "ok" for NSBOX_CODE_OK). */
const char *nsbox_code_name(nsbox_code code);
/* The list's own string for a code given by name (an agent's, a peer's), so that it outlives
 * the message it came in; "internal" for NULL or a name not in the list. */
const char *nsbox_code_static(const char *name);
/* The positive errno libnsbox returns for a code given by name; EIO for one it does not know. */
int nsbox_code_errno(const char *name);
/* The code for a failure of the launcher, the store or a worker, by its errno (negative or
 * positive): ENOENT not_found, EEXIST/EBUSY conflict, EINVAL/EPERM/EOPNOTSUPP invalid_argument,
 * ETIMEDOUT timeout, EFBIG too_large, EMFILE/ENFILE/EAGAIN capacity, else internal. */
const char *nsbox_code_for_errno(int r);
