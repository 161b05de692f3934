/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host side of one running sandbox: its launcher handle and the link to its agent
 * (nsbox-protocol(7)).  A call goes out as a frame, the tool's name resolved here and only here,
 * write_file's base64 decoded once into the frame's payload (or an in-process caller's bytes
 * sent as they are, nsbox_sup_send_bytes); what comes back goes to the caller's callbacks: a
 * streamed command's output as events, then the call's result or error, with what nsbox adds to
 * an exec's result (pids_limited, oom_killed).  When the agent dies or the sandbox is stopped,
 * every call in flight is answered.
 *
 * Nothing here blocks, waits or installs anything: nsboxd drives a supervisor from its epoll loop
 * (flush on EPOLLOUT, read on EPOLLIN), libnsbox in process from a poll loop (nsbox_sup_poll),
 * and the unit test (supervisor_test.c) against a fake agent on a socketpair. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "policy.h"
#include "proto.h"
#include "sandbox.h"
#include "util.h"
#include "ids.h"

#define NSBOX_SUP_MAX_CALLS 1024 /* calls in flight to one sandbox */
#define NSBOX_SUP_MAX_FDS 64     /* descriptors queued for the agent, not yet sent */

typedef struct nsbox_sup_call {
        struct nsbox_sup_call *next;
        json_int_t agent_id;
        const char *tool;     /* canonical name (the registry's string) */
        bool stream;          /* the caller wants the output as events; false once cancelled */
        bool b64;             /* read_file with "encoding": "base64": the payload goes back as base64 */
        bool raw;             /* the answer's payload goes to done as bytes (payload), not as base64 */
        bool exec;
        bool paused;          /* its output is held in the agent (nsbox_sup_pause_stream) */
        bool fd;              /* a descriptor went with it (nsbox_sup_send_fd): cancelled when its caller goes */
        uint64_t pids_before; /* exec: the cgroup's pids.events max when it was sent */
        void *data;           /* the caller's */
        char *payload;        /* raw: the answer's payload, during done (done may take it: set NULL) */
        size_t payload_len;
} nsbox_sup_call;

typedef struct nsbox_sup_ops {
        /* An event of a call that streams ("stdout", "stderr", ...): frame is the agent's JSON
         * (its "pid"), data/len its payload.  Borrowed. */
        void (*event)(void *ctx, nsbox_sup_call *c, const char *event, json_t *frame, const void *data, size_t len);
        /* The end of a call: its result (borrowed: json_incref to keep it), or NULL with a stable
         * code (a static string) and a one-line message.  The call is freed afterwards; the
         * callback frees what c->data holds. */
        void (*done)(void *ctx, nsbox_sup_call *c, json_t *result, const char *code, const char *msg);
        /* A frame that answers nothing (no id, oversized): for the log.  May be NULL. */
        void (*warn)(void *ctx, const char *msg);
} nsbox_sup_ops;

typedef struct nsbox_supervisor {
        char id[NSBOX_ID_SIZE];
        nsbox_sandbox sb;      /* the launcher's handle: agentfd is the link */
        uint64_t memory_limit; /* for the message when the OOM killer took the sandbox */
        nsbox_frame_reader rd; /* the agent's frames; kept between reads, a frame may span them */
        nsbox_queue out;       /* requests not yet taken by the socket */
        uint64_t out_sent;     /* bytes of out sent so far, for out_fds' positions */
        struct { uint64_t at; int fd; } out_fds[NSBOX_SUP_MAX_FDS]; /* to send with the frame starting at byte at */
        unsigned n_out_fds;
        json_int_t next_id;
        nsbox_sup_call *calls;
        unsigned n_calls;
        const nsbox_sup_ops *ops;
        void *ctx;
} nsbox_supervisor;

/* No sandbox yet (sb is NSBOX_SANDBOX_INIT); id is copied (up to 32 characters). */
void nsbox_sup_init(nsbox_supervisor *s, const char *id, const nsbox_sup_ops *ops, void *ctx);
/* Start the sandbox of policy p in serve mode (the agent is its pid 1 and our child), its link
 * non-blocking.  Ready is reported on sb.syncfd (nsbox_sandbox_read_ready / wait_ready). */
int nsbox_sup_start(nsbox_supervisor *s, const nsbox_policy *p, nsbox_error *err);
/* Answer every call in flight with code and "sandbox ID why". */
void nsbox_sup_fail_all(nsbox_supervisor *s, const char *code, const char *why);
/* The same, then kill the sandbox and forget the link.  The supervisor may be started again (a reset) or dropped. */
void nsbox_sup_stop(nsbox_supervisor *s, const char *code, const char *why);

/* Send a call: tool by name or alias, params borrowed (copied), stream: its output as events.
 * 0 with *ret (may be NULL) the call, answered later through ops->done; or -errno with a stable
 * code and a one-line message in why: -ESRCH unknown tool, -EINVAL or -E2BIG bad params (the
 * content_b64 of write_file), -EBUSY too many calls, -EMSGSIZE over the frame maximum, -ENOMEM. */
int nsbox_sup_send(nsbox_supervisor *s, const char *tool, json_t *params, bool stream, void *data, nsbox_sup_call **ret,
                   const char **ret_code, strbuf *why);
/* The same for an in-process caller with the bytes at hand: bytes (len, may be 0) go as the frame's
 * payload (write_file's content: params have no content_b64), and raw: the answer's payload is
 * handed to ops->done as c->payload rather than base64 in the result.  bytes NULL: none. */
int nsbox_sup_send_bytes(nsbox_supervisor *s, const char *tool, json_t *params, const void *bytes, size_t len, bool raw, void *data,
                         nsbox_sup_call **ret, const char **ret_code, strbuf *why);
/* The same with a descriptor (a pipe, file bytes: read_file, write_file) that goes with the call's
 * frame over the link (SCM_RIGHTS); fd is taken (closed here, on failure too).  -EBUSY past
 * NSBOX_SUP_MAX_FDS descriptors not yet sent. */
int nsbox_sup_send_fd(nsbox_supervisor *s, const char *tool, json_t *params, int fd, void *data, nsbox_sup_call **ret,
                      const char **ret_code, strbuf *why);
/* A call with "fd": true in params checked, as nsboxd and libnsbox in process both do: tool is
 * write_file or read_file and fd (-1: none came) a pipe of its direction, its read end for
 * write_file, its write end for read_file.  Only pipes cross into a sandbox: a regular file's
 * descriptor could be reopened read-write through /proc/self/fd by the sandbox's user, who maps
 * to the caller's uid.  0 with *ret the params without "fd" (the caller's), or -EINVAL/-ENOMEM
 * with a code and why.  fd is left open either way. */
int nsbox_sup_check_fd(const char *tool, json_t *params, int fd, json_t **ret, const char **ret_code, strbuf *why);
/* Whoever asked is gone: no more events, and a command is killed (its result still comes). */
void nsbox_sup_cancel(nsbox_supervisor *s, nsbox_sup_call *c);
/* Hold or release a streaming call's output in the agent (its reader is behind). */
void nsbox_sup_pause_stream(nsbox_supervisor *s, nsbox_sup_call *c, bool pause);
/* Every process of the sandbox but its agent is killed: a pause that keeps only its files. */
void nsbox_sup_reboot(nsbox_supervisor *s);

/* Write what is queued: 1 when all is sent, 0 when the socket is full, -errno when the agent is
 * gone.  Never raises SIGPIPE. */
int nsbox_sup_flush(nsbox_supervisor *s);
/* Read and dispatch up to max frames: 0, or -EPIPE when the agent is gone (then
 * nsbox_sup_died, and nsbox_sup_stop). */
int nsbox_sup_read(nsbox_supervisor *s, unsigned max);
/* The agent is gone.  When the OOM killer took the sandbox, the commands running get their
 * result (oom_killed) now; why gets what happened, for nsbox_sup_stop's answer to the rest:
 * "exited" or "was killed by the OOM killer (memory limit N bytes)". */
void nsbox_sup_died(nsbox_supervisor *s, char *why, size_t n);
/* One round for a blocking caller: wait up to timeout_ms (-1: no limit) for the link, then flush
 * and read.  0, -EPIPE when the agent is gone, or another -errno of poll. */
int nsbox_sup_poll(nsbox_supervisor *s, int timeout_ms);
/* Nothing queued and no frame half read: the link can be handed over (nsboxd's keep). */
bool nsbox_sup_link_idle(const nsbox_supervisor *s);

/* A sandbox by full id or unique prefix (4 characters or more; an exact match or its 32 hex digits win), over the
 * caller's own list: init, offer each candidate, then result. */
typedef struct nsbox_id_match {
        const char *want;
        size_t n;
        void *found;
        unsigned matches;
} nsbox_id_match;

void nsbox_id_match_init(nsbox_id_match *m, const char *want);
void nsbox_id_match_offer(nsbox_id_match *m, const char *id, void *obj);
/* The match, or NULL with *ret_code "not_found" or "conflict" and a message in msg. */
void *nsbox_id_match_result(const nsbox_id_match *m, const char **ret_code, char *msg, size_t n);
