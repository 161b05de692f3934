/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libnsbox's in-process mode: what nsboxd does for one client's sandboxes, done in the caller's
 * own process, blocking, one call at a time.  The create params go through the parser nsboxd
 * uses (params.h's table, then the policy), the sandbox
 * is started by the launcher (sandbox.h) as a child of the calling thread, and calls are frames
 * on its agent socket, translated as nsboxd translates them (base64 file contents, streamed
 * exec output).  Nothing is installed in the caller: no signal handler, no thread.  The agent,
 * an exec of nsbox-agent, exits with SIGCHLD like any exec'd child, and is reaped through its
 * pidfd (sandbox.c): never another child of the caller's, and a caller that collected it first
 * does no harm. */
#include "inproc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "../tools/registry.h"
#include "agent.h"
#include "cgroup.h"
#include "options.h"
#include "params.h"
#include "proto.h"
#include "sandbox.h"
#include "util.h"

#define READY_TIMEOUT_MS 30000 /* as nsboxd: a sandbox that is not serving by then never will */

struct nsbox_local_sandbox {
        nsbox_local_sandbox *next;
        char id[33];
        nsbox_sandbox sb;
        nsbox_frame_reader rd; /* the agent's replies; kept across calls, frames may span them */
        uint64_t memory_limit; /* for the message when the OOM killer took the sandbox */
};

/* The stable codes (nsbox-protocol(7), ERRORS), as static strings: an agent's code comes from
 * a frame that is freed before the caller reads it. */
static const char *const codes[] = { "file_not_found", "permission_denied", "is_directory", "not_a_directory", "invalid_path",
                                     "invalid_argument", "too_large", "timeout", "not_found", "conflict", "capacity", "unavailable",
                                     "internal", NULL };

static const char *static_code(const char *code)
{
        for (const char *const *c = codes; code && *c; c++)
                if (!strcmp(*c, code))
                        return *c;
        return "internal";
}

/* The stable code of a setup failure, as nsboxd gives it. */
static const char *setup_code(int r)
{
        switch (-r) {
        case ENOENT: return "not_found";
        case EEXIST:
        case EBUSY: return "conflict";
        case EINVAL:
        case EPERM:
        case EOPNOTSUPP: return "invalid_argument";
        case ETIMEDOUT: return "timeout";
        case EMFILE:
        case ENFILE:
        case EAGAIN: return "capacity";
        default: return "internal";
        }
}

static void sandbox_free(nsbox_local_sandbox *s)
{
        nsbox_sandbox_destroy(&s->sb);
        nsbox_frame_reader_release(&s->rd);
        free(s);
}

static void unlink_sandbox(nsbox_local *l, nsbox_local_sandbox *s)
{
        for (nsbox_local_sandbox **pp = &l->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        return;
                }
}

int nsbox_local_create(nsbox_local *l, json_t *params, char ret_id[33], const char **ret_code, nsbox_error *err)
{
        *ret_code = "invalid_argument";
        /* Create params only nsboxd can honour (params.h): they need its event loop (lifetimes),
         * its list (labels), its configuration (templates, wait) or its store (snapshots,
         * repositories, trajectories). */
        const char *k = nsbox_params_first(params, NSBOX_PARAM_DAEMON_ONLY);
        if (k) {
                *ret_code = "unavailable";
                return nsbox_err_as(err, EOPNOTSUPP, "create: '%s' needs nsboxd; an in-process sandbox has none (see libnsbox(3))", k);
        }
        /* 1. Every param checked, the policy loaded and merged, before anything exists. */
        nsbox_run_options o;
        nsbox_policy *policy = NULL;
        int r = nsbox_params_from_json(params, NSBOX_PARAM_DAEMON_ONLY, &o, err);
        if (r == 0)
                r = nsbox_run_options_policy(&o, &policy, err);
        nsbox_run_options_release(&o);
        if (r == 0)
                r = nsbox_policy_check_host(policy, err);
        unsigned char rnd[16];
        if (r == 0 && getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                r = nsbox_err(err, errno, "create: getrandom");
        nsbox_local_sandbox *s = r == 0 ? calloc(1, sizeof(*s)) : NULL;
        if (r == 0 && !s)
                r = nsbox_err(err, ENOMEM, "create");
        if (r < 0) {
                nsbox_policy_free(policy);
                *ret_code = setup_code(r);
                return r;
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
        s->sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
        s->memory_limit = policy->limits.memory;
        /* 2. The launcher, in serve mode: the agent is the sandbox's pid 1 and our child. */
        r = nsbox_sandbox_start(policy, NULL, NULL, s->id, &s->sb, err);
        nsbox_policy_free(policy); /* the agent has its own copy, in its own address space */
        if (r == 0)
                r = nsbox_sandbox_wait_ready(&s->sb, READY_TIMEOUT_MS, err);
        if (r == 0 && fcntl(s->sb.agentfd, F_SETFL, fcntl(s->sb.agentfd, F_GETFL) | O_NONBLOCK) < 0)
                r = nsbox_err(err, errno, "create: agent socket");
        if (r < 0) {
                nsbox_err_wrap(err, r, "create");
                *ret_code = r == -ETIMEDOUT ? "timeout" : setup_code(r);
                sandbox_free(s);
                return r;
        }
        /* the staging tmpfs is nsboxd's, for snapshots: not needed here */
        if (s->sb.stagefd >= 0) {
                close(s->sb.stagefd);
                s->sb.stagefd = -1;
        }
        s->next = l->sandboxes;
        l->sandboxes = s;
        memcpy(ret_id, s->id, sizeof(s->id));
        *ret_code = NULL;
        return 0;
}

/* By id or unique prefix (4 to 32 characters; an exact match wins), as nsboxd finds them. */
static nsbox_local_sandbox *find(nsbox_local *l, const char *want, const char **ret_code, nsbox_error *err)
{
        size_t n = strlen(want);
        nsbox_local_sandbox *found = NULL;
        unsigned matches = 0;
        for (nsbox_local_sandbox *s = l->sandboxes; s && n >= 4 && n <= 32; s = s->next)
                if (strncmp(s->id, want, n) == 0) {
                        found = s;
                        matches += 1 + (n == 32) * 1000;
                }
        if (!found) {
                *ret_code = "not_found";
                nsbox_err_as(err, ESRCH, "no sandbox '%.64s'", want);
                return NULL;
        }
        if (matches > 1 && matches < 1000) {
                *ret_code = "conflict";
                nsbox_err_as(err, EBUSY, "'%.64s' matches %u sandboxes; give more of the id", want, matches);
                return NULL;
        }
        return found;
}

/* The agent is gone (killed from outside, or the OOM killer took the sandbox: memory.oom.group):
 * the sandbox is destroyed, as nsboxd does; an exec then gets the result nsboxd gives it. */
static int agent_gone(nsbox_local *l, nsbox_local_sandbox *s, bool exec, json_t **ret, const char **ret_code, nsbox_error *err)
{
        nsbox_cgroup_stats cs;
        bool oom = nsbox_cgroup_stats_read(&s->sb.cg, &cs) == 0 && cs.oom_kills > 0;
        char id[33];
        memcpy(id, s->id, sizeof(id));
        uint64_t limit = s->memory_limit;
        unlink_sandbox(l, s);
        sandbox_free(s);
        if (oom && exec) {
                *ret = json_pack("{si si ss sb sb sb ss ss}", "exit_code", 128 + SIGKILL, "signal", SIGKILL, "reason", "oom_killed",
                                 "oom_killed", 1, "timed_out", 0, "truncated", 0, "stdout", "", "stderr", "");
                if (*ret)
                        return 0;
        }
        *ret_code = "internal";
        if (oom)
                return nsbox_err_as(err, EIO, "sandbox %s was killed by the OOM killer (memory limit %" PRIu64 " bytes)", id, limit);
        return nsbox_err_as(err, EIO, "sandbox %s exited", id);
}

/* Send what q holds without SIGPIPE (the caller's disposition is its own): 1 when all is sent,
 * 0 when the socket is full, -errno (EPIPE: the agent is gone). */
static int send_some(nsbox_queue *q, int fd)
{
        while (q->len > 0) {
                ssize_t k = send(fd, q->data + q->start, q->len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return errno == EAGAIN ? 0 : -errno;
                q->start += (size_t)k;
                q->len -= (size_t)k;
        }
        q->start = 0;
        return 1;
}

/* The agent's reply to our request: the result as nsboxd gives it, or its error. */
static int take_reply(nsbox_frame *f, bool b64_content, uint64_t pids_before, const nsbox_local_sandbox *s, bool exec, json_t **ret,
                      const char **ret_code, nsbox_error *err)
{
        json_t *result = json_object_get(f->json, "result"), *error = json_object_get(f->json, "error");
        if (!json_is_object(result)) {
                const char *msg = json_string_value(json_object_get(error, "message"));
                *ret_code = static_code(json_string_value(json_object_get(error, "code")));
                return nsbox_err_as(err, EIO, "%.900s", msg ? msg : "the agent gave no result");
        }
        /* a fork refused at the sandbox's pids limit while the command ran: say so, as nsboxd */
        const char *reason = json_string_value(json_object_get(result, "reason"));
        if (exec && reason && strcmp(reason, "timed_out") && nsbox_cgroup_pids_limited(&s->sb.cg) > pids_before)
                json_object_set_new(result, "reason", json_string("pids_limited"));
        if (nsbox_tool_result_from_agent(result, f, b64_content) < 0) {
                *ret_code = "internal";
                return nsbox_err(err, ENOMEM, "read_file");
        }
        *ret = json_incref(result);
        return 0;
}

int nsbox_local_call(nsbox_local *l, const char *id, const char *tool, json_t *params, bool stream, nsbox_local_output_fn on_output,
                     void *userdata, json_t **ret, const char **ret_code, nsbox_error *err)
{
        nsbox_local_sandbox *s = find(l, id, ret_code, err);
        if (!s)
                return -ESRCH;
        const char *canon = tool_canonical_name(tool);
        if (!canon) {
                *ret_code = "not_found";
                return nsbox_err_as(err, ESRCH, "unknown tool '%.100s' (see nsbox tools)", tool);
        }
        json_t *p = params ? json_copy(params) : json_object();
        strbuf payload;
        sb_init(&payload, NSBOX_FRAME_MAX_PAYLOAD);
        bool exec = !strcmp(canon, "exec"), b64_content = false;
        int r;
        if (!p) {
                *ret_code = "internal";
                r = nsbox_err(err, ENOMEM, "call");
        } else {
                strbuf why;
                sb_init(&why, 256);
                r = nsbox_tool_request_to_agent(canon, p, stream, &payload, &b64_content, ret_code, &why);
                if (r < 0)
                        r = nsbox_err_as(err, -r, "%s", why.buf ? why.buf : "out of memory");
                sb_release(&why);
        }
        json_int_t call_id = ++l->next_call;
        nsbox_queue q = { 0 };
        if (r == 0) {
                json_t *req = json_pack("{sI ss sO}", "id", call_id, "tool", canon, "params", p);
                r = req ? nsbox_frame_append(&q, req, payload.buf ? payload.buf : "", payload.len) : -ENOMEM;
                json_decref(req);
                if (r < 0) {
                        *ret_code = r == -E2BIG ? "too_large" : "internal";
                        r = r == -E2BIG ? nsbox_err_as(err, E2BIG, "%s: request larger than the protocol's maximum frame", canon)
                                        : nsbox_err(err, -r, "%s", canon);
                }
        }
        json_decref(p);
        sb_release(&payload);
        if (r < 0) {
                nsbox_queue_release(&q);
                return r;
        }
        uint64_t pids_before = exec ? nsbox_cgroup_pids_limited(&s->sb.cg) : 0;
        int fd = s->sb.agentfd;
        bool gone = false;
        r = 1; /* no reply yet */
        while (r == 1 && !gone) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN | (q.len ? POLLOUT : 0) };
                if (poll(&pfd, 1, -1) < 0) {
                        if (errno == EINTR) /* a signal of the caller's: its handler ran, we go on */
                                continue;
                        r = nsbox_err(err, errno, "%s: poll", canon);
                        *ret_code = "internal";
                        break;
                }
                if (q.len && (pfd.revents & (POLLOUT | POLLERR | POLLHUP)) && send_some(&q, fd) < 0)
                        gone = true; /* EPIPE, ECONNRESET: the agent died; its exit is what to report */
                while (r == 1 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
                        nsbox_frame f = { 0 };
                        int k = nsbox_frame_read(&s->rd, fd, &f);
                        if (k == 0)
                                break;
                        if (k == -E2BIG) /* an oversized frame from the agent, skipped whole */
                                continue;
                        if (k < 0) {
                                gone = true;
                                break;
                        }
                        json_t *jid = f.json ? json_object_get(f.json, "id") : NULL;
                        if (!json_is_integer(jid) || json_integer_value(jid) != call_id) {
                                nsbox_frame_release(&f); /* an answer to nothing we asked */
                                continue;
                        }
                        const char *event = json_string_value(json_object_get(f.json, "event"));
                        if (event) {
                                int which = !strcmp(event, "stdout") ? 1 : !strcmp(event, "stderr") ? 2 : 0;
                                if (stream && on_output && which && f.payload_len)
                                        on_output(which, f.payload, f.payload_len, userdata);
                                nsbox_frame_release(&f);
                                continue;
                        }
                        r = take_reply(&f, b64_content, pids_before, s, exec, ret, ret_code, err);
                        nsbox_frame_release(&f);
                }
        }
        nsbox_queue_release(&q);
        if (r == 1 && gone)
                return agent_gone(l, s, exec, ret, ret_code, err);
        if (r == 0)
                *ret_code = NULL;
        return r;
}

int nsbox_local_destroy(nsbox_local *l, const char *id, char ret_id[33], const char **ret_code, nsbox_error *err)
{
        nsbox_local_sandbox *s = find(l, id, ret_code, err);
        if (!s)
                return -ESRCH;
        memcpy(ret_id, s->id, sizeof(s->id));
        unlink_sandbox(l, s);
        sandbox_free(s);
        *ret_code = NULL;
        return 0;
}

void nsbox_local_close(nsbox_local *l)
{
        while (l->sandboxes) {
                nsbox_local_sandbox *s = l->sandboxes;
                l->sandboxes = s->next;
                sandbox_free(s);
        }
}
