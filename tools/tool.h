/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tool handlers the agent serves (files, search, git) share this interface.  A handler takes
 * the request's params (a JSON object, already known to be one) and an optional binary payload,
 * and returns 0 with a JSON result (and optionally a binary payload), or -1 with a tool error
 * carrying one of the protocol's stable codes (nsbox-protocol(7)).
 *
 * Paths: every path a request names is resolved inside ctx->root_fd with openat2(2)
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS (or, where openat2 gives ENOSYS, the same resolution
 * in user space: tools/path.c), relative paths from ctx->cwd.  In a sandbox the root is the
 * sandbox's own "/" (the host is not in its mount namespace at all); unit tests point it at a
 * temporary directory, and "..", absolute paths and planted symlinks stay inside it. */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stddef.h>
#include <sys/types.h>

#include "../runtime/codes.h"
#include "../runtime/json.h" /* nsbox_json_text: bytes that may not be UTF-8 as a JSON string */
#include "../runtime/util.h"

/* The protocol's stable codes (runtime/codes.h, the one list), by the names handlers use. */
typedef enum {
        TOOL_OK = NSBOX_CODE_OK,
        TOOL_FILE_NOT_FOUND = NSBOX_CODE_FILE_NOT_FOUND,
        TOOL_PERMISSION_DENIED = NSBOX_CODE_PERMISSION_DENIED,
        TOOL_IS_DIRECTORY = NSBOX_CODE_IS_DIRECTORY,
        TOOL_NOT_A_DIRECTORY = NSBOX_CODE_NOT_A_DIRECTORY,
        TOOL_INVALID_PATH = NSBOX_CODE_INVALID_PATH,
        TOOL_INVALID_ARGUMENT = NSBOX_CODE_INVALID_ARGUMENT,
        TOOL_TOO_LARGE = NSBOX_CODE_TOO_LARGE,
        TOOL_TIMEOUT = NSBOX_CODE_TIMEOUT,
        TOOL_NOT_FOUND = NSBOX_CODE_NOT_FOUND, /* unknown tool, process, revision... */
        TOOL_CONFLICT = NSBOX_CODE_CONFLICT,   /* exists, not unique, busy */
        TOOL_INTERNAL = NSBOX_CODE_INTERNAL,
} tool_code;

typedef struct tool_error {
        tool_code code;
        char message[512]; /* one line, lowercase, paths quoted: "read_file 'a.txt': no such file" */
} tool_error;

typedef struct tool_ctx {
        int root_fd;           /* O_PATH|O_DIRECTORY fd of the root every path resolves in */
        const char *root_path; /* the same directory as a path ("/" in a sandbox), for libgit2 */
        const char *cwd;       /* absolute, inside the root: where relative paths start */
} tool_ctx;

/* Output of a handler besides its JSON result: bytes sent as the frame's binary payload (file
 * contents read in raw mode).  Handlers append to it; limit is set by the caller. */
typedef struct tool_out {
        json_t *result;  /* set by the handler on success (owned by the caller afterwards) */
        strbuf payload;  /* optional raw bytes */
} tool_out;

typedef struct tool_in {
        json_t *params;        /* borrowed; a JSON object */
        const void *payload;   /* borrowed raw bytes sent with the request, or NULL */
        size_t payload_len;
} tool_in;

typedef int (*tool_fn)(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e);

/* Limits every handler respects (a request asking for more gets too_large or is clamped and says
 * "truncated": true, as each tool documents). */
#define TOOL_MAX_CONTENT (16u << 20)   /* bytes of a file read or written in one call */
#define TOOL_MAX_ENTRIES 100000u       /* entries of list_dir / glob, matches of grep */
#define TOOL_MAX_LINE_CHARS 2000u      /* read_file truncates longer lines in text mode (says so) */

/* Fill e and return -1. */
int tool_fail(tool_error *e, tool_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fill e from an errno with ": strerror" appended; returns -1.  ENOENT -> file_not_found,
 * EACCES/EPERM/EROFS -> permission_denied, EISDIR -> is_directory, ENOTDIR -> not_a_directory,
 * EXDEV/ELOOP/ENAMETOOLONG -> invalid_path, EEXIST/ENOTEMPTY/EBUSY -> conflict,
 * EFBIG/E2BIG/ENOSPC/EDQUOT -> too_large, EINVAL -> invalid_argument, else internal. */
int tool_fail_errno(tool_error *e, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline const char *tool_code_name(tool_code code) { return nsbox_code_name((nsbox_code)code); }

/* Parameter access: each returns 0, or -1 with e = invalid_argument naming the tool and key
 * ("read_file: 'path' must be a string").  Optional ones leave *ret untouched when absent/null. */
int tool_param_string(const tool_in *in, const char *tool, const char *key, bool required, const char **ret, tool_error *e);
int tool_param_bool(const tool_in *in, const char *tool, const char *key, bool *ret, tool_error *e);
int tool_param_uint(const tool_in *in, const char *tool, const char *key, uint64_t max, uint64_t *ret, tool_error *e);
/* A path parameter made absolute with tool_path_normalize: a string (else invalid_argument)
 * without NUL bytes (else invalid_path); def is used when it is absent or null (NULL: required). */
int tool_param_path(const tool_ctx *ctx, const tool_in *in, const char *tool, const char *key, const char *def,
                    char **ret_abs, tool_error *e);
/* Prefix e's message with context ("read_file: " + "open '/a': ..."), keeping its code; returns -1. */
int tool_fail_wrap(tool_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* dir + "/" + name without doubling the root's slash (malloc'd, NULL on ENOMEM); the longest
 * prefix of s[0..n) of at most max bytes that does not split a UTF-8 sequence. */
char *tool_path_join(const char *dir, const char *name);
size_t tool_utf8_cut(const char *s, size_t n, size_t max);

/* Paths (tools/path.c).  tool_path_normalize makes path absolute inside the root, lexically
 * ("a/../b" from cwd "/w" -> "/w/b"; ".." never goes above "/"); rejects "" and embedded NULs
 * (invalid_path).  tool_open resolves with RESOLVE_IN_ROOT (ELOOP past 40 links or at a /proc
 * magic link); tool_open_parent opens the directory
 * that contains path's last component and returns that component (for mkdirat, unlinkat,
 * renameat, O_CREAT).  *ret_name points into *ret_abs. */
int tool_path_normalize(const tool_ctx *ctx, const char *path, char **ret_abs, tool_error *e);
int tool_open(const tool_ctx *ctx, const char *abs, int flags, mode_t mode, int *ret_fd, tool_error *e);
int tool_open_parent(const tool_ctx *ctx, const char *abs, int *ret_dirfd, const char **ret_name, tool_error *e);
/* A regular file to read, for tool (read_file, by bytes or by descriptor): opened O_NONBLOCK, so
 * that a FIFO cannot hang the agent; a directory is is_directory, anything else not regular
 * invalid_argument.  *ret_st is its stat. */
int tool_open_regular(const tool_ctx *ctx, const char *tool, const char *abs, int *ret_fd, struct stat *ret_st, tool_error *e);
/* A regular file of a pseudo file system (procfs, sysfs, cgroupfs...) whose size says 0: its
 * bytes are made when read, and it is read to its end, not to that size. */
bool tool_size_unknown(int fd, const struct stat *st);
/* Whether fd is a /proc entry of the agent's own process (its pid, pid 1, a thread of its): its
 * memory layout, fds and environment, which no tool shows.  tool_open refuses these with
 * permission_denied; directory walks (grep, glob, list_dir) skip them. */
bool tool_is_agent_proc(int fd);
/* The names in directory dirfd (dirfd itself stays open and unmoved) except "." and "..", sorted
 * bytewise, as a NULL-terminated vector for strv_free; 0 or -errno. */
int tool_read_dir(int dirfd, char ***ret_names);

/* write_file and read_file with a pipe ("fd": true, the agent's transfers): the checks and the
 * files here, the bytes moved by the caller (splice).  Writing goes to the same hidden
 * temporary file as write_file's, renamed into place by commit once all 'size' bytes came;
 * abort removes it, the target unchanged.  (read_file's side: runtime/agent_xfer.c.) */
typedef struct tool_fd_write {
        int dirfd, fd;       /* the target's directory; the temporary file, at offset 0 */
        char tmp[NAME_MAX + 1];
        char *target;        /* symlinks followed: what is replaced */
        const char *name;    /* its last component, in target */
        char *abs;           /* the path as asked, for the result */
        uint64_t size;       /* 'size': the bytes that must come */
        bool created;
} tool_fd_write;
int tool_write_fd_begin(const tool_ctx *ctx, const tool_in *in, tool_fd_write *w, tool_error *e);
int tool_write_fd_commit(tool_fd_write *w, json_t **ret_result, tool_error *e);
void tool_write_fd_abort(tool_fd_write *w);

/* The handlers.  Each validates every parameter before touching anything. */
int tool_read_file(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_write_file(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_write_files(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_edit_file(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_list_dir(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_stat(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
/* What stat answers of abs (follow: through a final symlink), in *ret; metadata: with its
 * "metadata", the user.e2b.* extended attributes of a regular file or a directory as {key: value}.
 * 0, or -1 with e set (prefixed with tool). */
int tool_entry(const tool_ctx *ctx, const char *tool, const char *abs, bool follow, bool metadata, json_t **ret,
               tool_error *e);
/* File metadata (envd's): keys of 1 to TOOL_METADATA_KEY_MAX printable ASCII bytes, stored as
 * "user.e2b.KEY" attributes; values printable ASCII; at most TOOL_METADATA_MAX bytes in all, each
 * key counted with its prefix.  tool_metadata_check: whether m ({key: value}) is such; 0, or
 * -EINVAL with why written (one line). */
#define TOOL_METADATA_KEY_MAX 246u
#define TOOL_METADATA_MAX 4096u
int tool_metadata_check(const json_t *m, char *why, size_t n);
int tool_exists(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_mkdir(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_remove(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_rename(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_glob(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_grep(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_git_init(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_git_status(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_git_diff(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_git_log(const tool_ctx *, const tool_in *, tool_out *, tool_error *);
int tool_git_commit(const tool_ctx *, const tool_in *, tool_out *, tool_error *);

/* The table the agent serves from: a canonical name (tools/registry.c) and its handler. */
typedef struct nsbox_tool_entry {
        const char *name;
        tool_fn fn;
} nsbox_tool_entry;

/* The file, search and git handlers (tools/dispatch.c), { NULL, NULL }-terminated.  Only
 * programs that serve tools link it (and so libgit2). */
extern const nsbox_tool_entry nsbox_tool_handlers[];
