/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libnsbox: nsbox sandboxes from C.
 *
 * A handle creates sandboxes, makes tool calls in them (exec, read_file, write_file,
 * edit_file, grep, git_commit, ... : nsbox-protocol(7)) and destroys them.  It is either a
 * connection to the calling user's nsboxd (started for you when none runs, as the nsbox
 * command does), or, with NSBOX_IN_PROCESS, the library itself: sandboxes are then children
 * of the calling process, driven directly, and die with it.  Parameters and results are JSON
 * texts, the same in both modes, so this header is all a program needs:
 *
 *     cc prog.c $(pkg-config --cflags --libs nsbox)
 *
 * Errors: every function that can fail returns 0 or a negative errno-style value, and leaves
 * its output parameters untouched on failure.  The connection then holds the stable code of
 * the failure (nsbox_error_code: "file_not_found", "not_found", "invalid_argument", ...) and
 * a one-line message (nsbox_error_message), until its next call.  Bad input (a NULL argument,
 * a params text that is not a JSON object) fails with -EINVAL and "invalid_argument" before
 * anything is sent.  See libnsbox(3) for the codes and the errno each maps to.
 *
 * Threads: a connection is used by one thread at a time (but for nsbox_cancel); use one
 * connection per thread.  A callback (nsbox_output_fn, nsbox_event_fn) must not call the
 * library on the same handle.
 * Strings returned through char ** are the caller's, to release with free(3). */
#ifndef NSBOX_H
#define NSBOX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NSBOX_API __attribute__((visibility("default")))

/* A connection to nsboxd, or an in-process handle.  Opaque. */
typedef struct nsbox nsbox;

/* Flags of nsbox_connect. */
#define NSBOX_CONNECT_NO_AUTOSTART 1u /* fail with -ECONNREFUSED/-ENOENT when no nsboxd listens */
/* No nsboxd: nsbox_create starts each sandbox as a child of the calling thread (it dies with
 * that thread, and with the handle: nsbox_close destroys them all).  nsbox_request then knows
 * only "tools"; other methods, and create params that need nsboxd (timeout, labels, template,
 * from, repo, record, ...), fail with -EOPNOTSUPP and code "unavailable".  See libnsbox(3),
 * IN-PROCESS MODE, for what this means for the calling program (signals, children, threads). */
#define NSBOX_IN_PROCESS 2u

/* The library's version, e.g. "0.1.0". */
NSBOX_API const char *nsbox_version(void);

/* Connect to nsboxd at $NSBOX_SOCKET, else the user's socket (nsbox-protocol(7), CONNECTION),
 * starting nsboxd when none listens (unless NSBOX_CONNECT_NO_AUTOSTART).  The one exception to
 * "untouched on failure": *ret is set even then (to NULL only when out of memory), so that
 * nsbox_error_message can say why; nsbox_close it all the same. */
NSBOX_API int nsbox_connect(unsigned flags, nsbox **ret);
/* Close the handle (NULL is a no-op).  nsboxd's sandboxes live on until destroyed or their
 * timeout; an in-process handle's are destroyed. */
NSBOX_API void nsbox_close(nsbox *nb);

/* The stable code and the message of the connection's last failure; NULL after a success. */
NSBOX_API const char *nsbox_error_code(const nsbox *nb);
NSBOX_API const char *nsbox_error_message(const nsbox *nb);

/* Create a sandbox.  options_json: NULL, or a JSON object of nsboxd's create params, e.g.
 * {"policy": "strict", "memory": "512M", "timeout": 600, "labels": {"job": "42"}}.
 * *ret_id gets its id (32 hex digits). */
NSBOX_API int nsbox_create(nsbox *nb, const char *options_json, char **ret_id);
/* Destroy sandbox id (or a unique prefix of at least 4 characters): its processes are killed
 * and its files discarded. */
NSBOX_API int nsbox_destroy(nsbox *nb, const char *id);

/* One tool call in sandbox id.  params_json: NULL ({}) or the tool's params as a JSON object,
 * e.g. nsbox_call(nb, id, "read_file", "{\"path\": \"main.c\"}", &result).  *ret_result gets
 * the tool's result object as JSON text.  A tool's own failure (a missing file: -ENOENT,
 * "file_not_found") is an error like any other. */
NSBOX_API int nsbox_call(nsbox *nb, const char *id, const char *tool, const char *params_json, char **ret_result);

/* write_file or read_file with its bytes through a pipe, never as JSON or base64, any size
 * (nsbox-protocol(7), call): fd is a pipe's read end for write_file (params need "size", the
 * bytes that will come; write them, then close your write end) or its write end for read_file
 * (read until the end of the pipe); "fd": true is added to params.  The call returns once the
 * transfer is done, so feed or drain the pipe from another thread.  fd stays yours (close it
 * once this returns).  Anything but a pipe of that direction: -EINVAL, "invalid_argument". */
NSBOX_API int nsbox_call_fd(nsbox *nb, const char *id, const char *tool, const char *params_json, int fd, char **ret_result);

/* Output of a running command: stream is 1 (stdout, or the terminal of a command run with
 * "pty") or 2 (stderr); data is not NUL-terminated. */
typedef void (*nsbox_output_fn)(int stream, const char *data, size_t len, void *userdata);

/* Run a command (the exec tool: params {cmd: [argv] | shell: "...", cwd, env, stdin, timeout}),
 * passing its output to on_output as it comes (may be NULL to drop it).  *ret_result (may be
 * NULL) gets {pid, exit_code, signal, timed_out, duration_ms, ...} without stdout and stderr.
 * Returns 0 when the command ran, whatever its exit status; *ret_exit_code (may be NULL) gets
 * its exit status as a shell reports it (128+N when killed by signal N). */
NSBOX_API int nsbox_exec(nsbox *nb, const char *id, const char *params_json, nsbox_output_fn on_output, void *userdata,
                         int *ret_exit_code, char **ret_result);

/* An event of a streamed call, as one JSON object (len bytes, NUL-terminated): the params of
 * nsboxd's "event" notification without "call" (nsbox-protocol(7), EVENTS), e.g.
 * {"event":"fs","op":"create","path":"/workspace/a","type":"file"} or
 * {"event":"stdout","pid":8,"data_b64":"YQo="}.  The text is the library's: copy what you keep.
 * Return 0 to go on, anything else to stop the call. */
typedef int (*nsbox_event_fn)(const char *event_json, size_t len, void *userdata);

/* Any tool call with its events streamed to on_event (may be NULL to drop them) as they come:
 * exec (its output as events, not in the result), process_connect (a background process's
 * output from then on, then its exit status), watch (file changes; it runs until stopped or
 * its directory goes).  Returns 0 with *ret_result (may be NULL) the tool's result, as
 * nsbox_call; or 1 when on_event stopped the call (or nsbox_cancel did): it is then cancelled as when nsboxd's
 * client goes away (an exec's command killed, a watch ended, a process_connect detached, its
 * process running on), its result not waited for, and *ret_result not set.  A call that fails
 * before it starts (unknown tool or sandbox, bad params) gets no event. */
NSBOX_API int nsbox_call_stream(nsbox *nb, const char *id, const char *tool, const char *params_json, nsbox_event_fn on_event,
                                void *userdata, char **ret_result);
/* Stop the nsbox_call_stream in flight on nb, as its on_event returning non-zero would: it
 * returns 1.  The one function that may be called from another thread while nb is in use (not
 * from a signal handler); with no such call in flight, it does nothing. */
NSBOX_API void nsbox_cancel(nsbox *nb);

/* Any method of nsboxd (nsbox-protocol(7), METHODS: list, pause, resume, snapshot, reset,
 * set_timeout, stats, ...) with params_json (NULL: {}); *ret_result gets its result as JSON text. */
NSBOX_API int nsbox_request(nsbox *nb, const char *method, const char *params_json, char **ret_result);

#ifdef __cplusplus
}
#endif

#endif /* NSBOX_H */
