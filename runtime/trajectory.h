/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Trajectories: nsboxd records every operation on a sandbox as JSON lines, and `nsbox replay`
 * runs them again in a fresh sandbox and compares, step by step.  This is what both sides share:
 * the line format, the result digest, a strict loader and the comparison.
 *
 * Format version 1, one compact JSON object per line:
 *   line 1, the header:
 *     {"nsbox_trajectory": 1, "sandbox": "<id>", "created": <unix seconds>, "create": {<create params>}}
 *   then one line per step, in any order (calls complete out of order; the loader sorts by step):
 *     {"step": N, "op": "call", "tool": "<tool>", "params": {...}, <outcome>}
 *     {"step": N, "op": "snapshot", "name": "<snapshot>", <outcome>}
 *     {"step": N, "op": "reset", "name": "<snapshot>" or null, <outcome>}   (null: the creation state)
 *   where <outcome> is
 *     "duration_ms": <number>, "error": "<error code>" or null,
 *     "result_sha256": "<64 lowercase hex>" or null (when error is set, or the operation has no
 *     result: a snapshot, a reset), "summary": {...}
 *   Steps are unique integers >= 1, gaps allowed.  Empty lines may only end the file.
 *
 * The result digest is the SHA-256 of the result serialized compact, with sorted keys, ASCII only
 * (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(17)), after removing the
 * keys whose values change from run to run from every object at any depth (including objects inside
 * arrays):
 *   duration_ms, cpu_time_ms, peak_memory_bytes, mtime, atime, ctime, modified_time, pid, time, id,
 *   short_id, parents, head
 * The summary keeps these top-level result fields, when present, so that a mismatch can be named:
 *   exit_code, signal, reason, timed_out, size, total_lines, occurrences */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "error.h"
#include "json.h"
#include "util.h"

#define NSBOX_TRAJ_VERSION 1
/* a step line holds a call's params and its result, each at most a protocol frame's JSON
 * (NSBOX_FRAME_MAX_JSON, 32 MiB; tests/unit/trajectory_test.c checks the two agree) */
#define NSBOX_TRAJ_MAX_LINE (64u << 20)
#define NSBOX_TRAJ_MAX_STEPS 1000000
#define NSBOX_TRAJ_MAX_BYTES (4ull << 30) /* of a trajectory file */

/* The digest of a result as described above, 64 lowercase hex digits.  0, -EINVAL for a NULL
 * result, -ENOMEM. */
int nsbox_traj_digest(json_t *result, char ret_hex[65]);
/* A new object with the summary fields of result (an empty one when result is not an object);
 * NULL only when out of memory. */
json_t *nsbox_traj_summary(json_t *result);
/* Parameters given to the builders are borrowed and copied: their objects and arrays are, the
 * strings and numbers inside (immutable in practice) are shared, so a 16 MiB write_file content
 * is not duplicated for its record. */
/* The header line.  create_params is copied (NULL: {}).  NULL when sandbox_id is NULL or not
 * UTF-8, create_params is not an object, or out of memory. */
json_t *nsbox_traj_header(const char *sandbox_id, time_t created, json_t *create_params);
/* A step line.  op: "call", "snapshot" or "reset".  tool_or_name: the tool of a call, the name of
 * a snapshot or of the snapshot a reset goes back to (NULL for the creation state).  params: a
 * call's parameters, copied (NULL: {}); ignored for the other ops.  error_code NULL when the
 * operation succeeded; result is then digested and summarized.  With an error_code, or without a
 * result, result_sha256 is null and summary {}.  NULL (errno EINVAL) on arguments the loader would
 * refuse, or out of memory (ENOMEM). */
json_t *nsbox_traj_step_line(uint64_t step, const char *op, const char *tool_or_name, json_t *params,
                             double duration_ms, json_t *result, const char *error_code);
/* Append line and '\n' to fd (opened O_APPEND: several writers may share it) in one write(2), so
 * lines never interleave.  0, -E2BIG past NSBOX_TRAJ_MAX_LINE, -ENOMEM or -errno of the write
 * (errno is set too). */
int nsbox_traj_write(int fd, json_t *line);

typedef struct nsbox_traj_step {
        uint64_t step;
        char op[16];          /* call, snapshot, reset */
        char *tool;           /* op call */
        char *name;           /* snapshot/reset; NULL for a reset to the creation state */
        json_t *params;       /* op call: object (owned) */
        bool has_digest;
        char digest[65];
        char *error;          /* NULL when the call succeeded */
        json_t *summary;      /* object (owned) */
        double duration_ms;
} nsbox_traj_step;

typedef struct nsbox_trajectory {
        char *sandbox;
        time_t created;
        json_t *create;          /* object (owned) */
        nsbox_traj_step *steps;  /* sorted by step */
        size_t n_steps;
} nsbox_trajectory;

/* Load and check a trajectory file strictly (a regular file of at most NSBOX_TRAJ_MAX_BYTES, read
 * up to the size it had when opened; the format above, no unknown keys, at most
 * NSBOX_TRAJ_MAX_STEPS steps of at most NSBOX_TRAJ_MAX_LINE bytes each).  Errors name the file
 * and the line: "trajectory 'F' line 7: 'step' must be a positive integer".  *ret is untouched on
 * failure; release it with nsbox_traj_release. */
int nsbox_traj_load(const char *path, nsbox_trajectory *ret, nsbox_error *err);
/* The same from an open fd, read incrementally (one line in memory at a time), with name in
 * messages and lines longer than max_line bytes refused (0: no bound). */
int nsbox_traj_load_fd(int fd, const char *name, size_t max_line, nsbox_trajectory *ret, nsbox_error *err);
void nsbox_traj_release(nsbox_trajectory *t);

/* The create parameters of a replay of a trajectory recorded with recorded, the command line of
 * `nsbox replay` giving given (both create parameters, nsbox-protocol(7)).  A trajectory is a file
 * anyone may have written: of its parameters, only those that stay inside the sandbox are used as
 * recorded (workdir, hostname, disk, memory, pids, cpus, the timeouts, env, tmpfs, labels, from,
 * commit); the others (bind, rootfs, policy other than "default", net other than "none", allow,
 * publish, record, repo, template, any unknown key) name host paths or resources and must be in
 * given, each list element included.  Given values (non-empty) are used over recorded ones; a
 * given "from" drops the recorded repo and commit.  0 and *ret (new object); -EPERM with the
 * missing ones in refused ("--bind /a:/b:rw, --net nat", values escaped for a terminal); -ENOMEM. */
int nsbox_traj_replay_params(json_t *recorded, json_t *given, json_t **ret, strbuf *refused);

/* Compare a replayed outcome with the recorded step: result is the replayed result, NULL when the
 * replayed operation failed with error_code or has no result.  The errors are compared first, then,
 * when a result was recorded, its summary fields and its digest.  1: match; 0: mismatch, and why
 * (if given) holds one line saying what differs, naming a summary field when one differs
 * ("exit_code 1, expected 0", "error file_not_found, expected none", "result differs (sha256
 * 1a2b3c4d.., expected 9f8e7d6c..)"); -ENOMEM. */
int nsbox_traj_compare(const nsbox_traj_step *want, json_t *result, const char *error_code, strbuf *why);

/* ---- knowlyr AgentSandbox's trajectories (runtime/traj_knowlyr.c) ----
 * One JSON document: {"steps": [{"tool_name": T, "params": {...}, "expected_output": S}, ...],
 * "metadata": <anything, ignored>}; tool_name is any tool name or alias of nsbox tools (knowlyr's
 * file_read, shell... included), expected_output a string, or null or absent for none.  A step
 * is a success when its call returned no error and, for an exec-family tool, the command exited
 * 0 (not signalled, not timed out); it matches when it is a success and its main output equals
 * expected_output byte for byte: stdout for exec (shell, git, run_commands), content for
 * read_file (file_read), "path:line:text\n" per match for grep (search), and the result as
 * compact JSON with sorted keys for the others. */
#define NSBOX_KNOWLYR_MAX_STEPS 100000
#define NSBOX_KNOWLYR_MAX_BYTES (64ull << 20)

typedef struct nsbox_knowlyr_step {
        char *tool;         /* as written (an alias stays one: nsboxd maps its params) */
        json_t *params;     /* object (owned) */
        char *expected;     /* NULL: none; may hold NUL bytes */
        size_t expected_len;
} nsbox_knowlyr_step;

typedef struct nsbox_knowlyr_traj {
        nsbox_knowlyr_step *steps;
        size_t n_steps;
} nsbox_knowlyr_traj;

/* 1 and *ret when path holds a knowlyr document; 0 when it is not one by its shape (its first
 * line is nsbox's header, it is not one JSON object with "steps", it cannot be opened: then
 * nsbox_traj_load reads it); -errno with a one-line error for a knowlyr document that is not
 * valid ("trajectory 'F' step 3: unknown tool 'x'", bounds, text after the document). */
int nsbox_knowlyr_load(const char *path, nsbox_knowlyr_traj *ret, nsbox_error *err);
/* The same from text (name for messages). */
int nsbox_knowlyr_load_text(const char *text, size_t len, const char *name, nsbox_knowlyr_traj *ret, nsbox_error *err);
void nsbox_knowlyr_release(nsbox_knowlyr_traj *t);
/* The main output of tool's result as described above (malloc'd, *ret_len bytes); NULL: ENOMEM. */
char *nsbox_knowlyr_output(const char *tool, json_t *result, size_t *ret_len);
/* Whether a step succeeded (see above); if not, why gets "failed: exit_code 127". */
bool nsbox_knowlyr_success(const char *tool, json_t *result, const char *error_code, strbuf *why);
/* 1: the step matches; 0: it does not, and why says how ("failed: exit_code 127", "output
 * \"a\", expected \"b\""); -ENOMEM.  *ret_success: whether it succeeded. */
int nsbox_knowlyr_judge(const nsbox_knowlyr_step *st, json_t *result, const char *error_code, bool *ret_success, strbuf *why);
