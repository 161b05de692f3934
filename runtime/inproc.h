/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libnsbox's in-process mode (nsbox_connect(NSBOX_IN_PROCESS)): sandboxes started as children
 * of the calling process from the same create params as nsboxd's (options.c), and tool calls
 * made as frames on their agents' sockets (proto.h), one at a time: the supervisor half of
 * nsboxd without its event loop, its store or its lifetimes.
 *
 * Every function that can fail returns a negative errno with err set and *ret_code the stable
 * code of nsbox-protocol(7), ERRORS ("not_found", "invalid_argument", ...). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "ids.h"

typedef struct nsbox_local_sandbox nsbox_local_sandbox;

typedef struct nsbox_local {
        nsbox_local_sandbox *sandboxes; /* newest first */
        json_int_t next_call;           /* request ids on the agent sockets */
} nsbox_local;

/* An event of a streamed call ("started", "stdout", "pty", "fs", ...): frame is the agent's
 * JSON (borrowed), data/len its payload.  Returns true to stop the call. */
typedef bool (*nsbox_local_event_fn)(const char *event, json_t *frame, const void *data, size_t len, void *userdata);

/* Start a sandbox from create's params (NULL: {}), wait until its agent serves; *ret_id (33
 * bytes) gets its id.  Params that only nsboxd can honour (lifetimes, labels, templates,
 * snapshots, repositories, recordings) fail with -EOPNOTSUPP, code "unavailable". */
int nsbox_local_create(nsbox_local *l, json_t *params, char ret_id[NSBOX_ID_SIZE], const char **ret_code, nsbox_error *err);
/* One tool call in sandbox id (or a unique prefix of at least 4 characters), with nsboxd's
 * params and results (content_b64 for write_file, read_file's base64 content in the result).
 * stream: its events go to on_event as they come (exec's output then is not in the result).
 * Returns 1 when on_event asked to stop: the call is cancelled (as when nsboxd's client goes:
 * a command killed, a watch ended, a process_connect detached) and its result not waited for.
 * wakefd (-1: none): readable means stop too (another thread's nsbox_cancel). */
int nsbox_local_call(nsbox_local *l, const char *id, const char *tool, json_t *params, bool stream, nsbox_local_event_fn on_event,
                     void *userdata, int wakefd, json_t **ret, const char **ret_code, nsbox_error *err);
/* The same for write_file or read_file with "fd": true in params and fd the pipe its bytes go
 * through (nsbox_sup_check_fd; the caller keeps fd: a copy goes to the agent). */
int nsbox_local_call_fd(nsbox_local *l, const char *id, const char *tool, json_t *params, int fd, json_t **ret, const char **ret_code,
                        nsbox_error *err);
/* Kill everything in the sandbox, reap its agent, remove its cgroup; *ret_id gets its full id. */
int nsbox_local_destroy(nsbox_local *l, const char *id, char ret_id[NSBOX_ID_SIZE], const char **ret_code, nsbox_error *err);
/* Destroy every sandbox of l. */
void nsbox_local_close(nsbox_local *l);
