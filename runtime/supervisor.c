/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One running sandbox's host side (supervisor.h). */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include "../tools/registry.h"
#include "base64.h"
#include "cgroup.h"
#include "codes.h"

void nsbox_sup_init(nsbox_supervisor *s, const char *id, const nsbox_sup_ops *ops, void *ctx)
{
        *s = (nsbox_supervisor){ .sb = NSBOX_SANDBOX_INIT, .ops = ops, .ctx = ctx };
        snprintf(s->id, sizeof(s->id), "%s", id ? id : "");
}

static void release_link(nsbox_supervisor *s)
{
        for (unsigned i = 0; i < s->n_out_fds; i++)
                close(s->out_fds[i].fd);
        s->n_out_fds = 0;
        s->out_sent = 0;
        nsbox_frame_reader_release(&s->rd);
        nsbox_queue_release(&s->out);
}

int nsbox_sup_start(nsbox_supervisor *s, const nsbox_policy *p, nsbox_error *err)
{
        release_link(s); /* a restart: what the old agent left half-read or unsent goes with it */
        s->sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
        s->memory_limit = p->limits.memory;
        int r = nsbox_sandbox_start(p, NULL, NULL, s->id, &s->sb, err);
        if (r < 0)
                return r;
        int fl = fcntl(s->sb.agentfd, F_GETFL);
        if (fl < 0 || fcntl(s->sb.agentfd, F_SETFL, fl | O_NONBLOCK) < 0) {
                r = nsbox_err(err, errno, "the agent's socket");
                nsbox_sandbox_destroy(&s->sb);
        }
        return r;
}

/* Unlink c, give it to done, free it. */
static void finish(nsbox_supervisor *s, nsbox_sup_call *c, json_t *result, const char *code, const char *msg)
{
        for (nsbox_sup_call **pp = &s->calls; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        s->n_calls--;
                        break;
                }
        s->ops->done(s->ctx, c, result, code, msg);
        free(c->payload);
        free(c);
}

void nsbox_sup_fail_all(nsbox_supervisor *s, const char *code, const char *why)
{
        char msg[256];
        snprintf(msg, sizeof(msg), "sandbox %s %s", s->id, why);
        while (s->calls)
                finish(s, s->calls, NULL, code, msg);
}

void nsbox_sup_stop(nsbox_supervisor *s, const char *code, const char *why)
{
        nsbox_sup_fail_all(s, code, why);
        nsbox_sandbox_destroy(&s->sb);
        release_link(s);
}

/* ---- calls out ------------------------------------------------------------------------------ */

/* The call as a client gives it made into the agent's request, in place: write_file's
 * "content_b64" decoded into payload (bytes travel as the frame's payload, not as JSON), exec's
 * "stream" set to what the caller forwards.  given: the caller's own bytes (given_len of them)
 * are the payload (no content_b64 then).  0, or -errno with a code and why. */
static int to_agent(nsbox_sup_call *c, json_t *p, bool given, size_t given_len, strbuf *payload, const char **ret_code, strbuf *why)
{
        const char *enc = json_string_value(json_object_get(p, "encoding"));
        c->b64 = !c->raw && !strcmp(c->tool, "read_file") && enc && !strcmp(enc, "base64");
        /* the agent streams output chunks as events exactly when the caller forwards them (and
         * refuses a watch that would not be forwarded) */
        if ((c->exec || !strcmp(c->tool, "watch") || !strcmp(c->tool, "run_code")) && json_object_set_new(p, "stream", json_boolean(c->stream)) < 0)
                goto nomem;
        bool write = !strcmp(c->tool, "write_file");
        json_t *b64 = json_object_get(p, "content_b64");
        if (!write || (!given && !json_is_string(b64)))
                return 0;
        if (given && (b64 || json_object_get(p, "content") || json_object_get(p, "data"))) {
                *ret_code = "invalid_argument";
                sb_appendf(why, "write_file: its bytes are given: no 'content', 'content_b64' or 'data'");
                return -EINVAL;
        }
        int r = given ? 0 : b64_decode(json_string_value(b64), json_string_length(b64), payload);
        if (r == -E2BIG) {
                *ret_code = "too_large";
                sb_appendf(why, "write_file: content larger than %u bytes", NSBOX_FRAME_MAX_PAYLOAD);
                return r;
        }
        if (r < 0) {
                *ret_code = "invalid_argument";
                sb_appendf(why, "write_file: 'content_b64' is not valid base64");
                return -EINVAL;
        }
        if (!given)
                json_object_del(p, "content_b64");
        if ((given ? given_len : payload->len) == 0) /* an empty file: no payload to carry it */
                return json_object_set_new(p, "content", json_string("")) < 0 ? (*ret_code = "internal", -ENOMEM) : 0;
        if (!given && (json_object_get(p, "content") || json_object_get(p, "data"))) {
                *ret_code = "invalid_argument";
                sb_appendf(why, "write_file: give one of 'content', 'content_b64' and 'data'");
                return -EINVAL;
        }
        return 0;
nomem:
        *ret_code = "internal";
        sb_appendf(why, "out of memory");
        return -ENOMEM;
}

static int queue_request(nsbox_supervisor *s, nsbox_sup_call *c, json_t *p, const void *payload, size_t len, int fd, const char **ret_code,
                         strbuf *why)
{
        json_t *req = json_pack("{sI ss sO}", "id", c->agent_id, "tool", c->tool, "params", p);
        if (req && fd >= 0 && json_object_set_new(req, "fd", json_true()) < 0) {
                json_decref(req);
                req = NULL;
        }
        uint64_t at = s->out_sent + s->out.len;
        int r = req ? nsbox_frame_append(&s->out, req, payload ? payload : "", len) : -ENOMEM;
        if (r == 0 && fd >= 0) /* room checked by the caller */
                s->out_fds[s->n_out_fds++] = (typeof(s->out_fds[0])){ .at = at, .fd = fd };
        json_decref(req);
        if (r == -E2BIG) {
                *ret_code = "too_large";
                sb_appendf(why, "%s: request larger than the protocol's maximum frame", c->tool);
                r = -EMSGSIZE; /* the frame's size, not a param's value: no fault of the params' shape */
        } else if (r < 0) {
                *ret_code = "internal";
                sb_appendf(why, "%s: out of memory", c->tool);
        }
        return r;
}

/* nsbox_sup_send and nsbox_sup_send_bytes: bytes non-NULL are the payload as given. */
static int send_call(nsbox_supervisor *s, const char *tool, json_t *params, bool stream, const void *bytes, size_t len, bool raw,
                     int fd, void *data, nsbox_sup_call **ret, const char **ret_code, strbuf *why)
{
        const char *canon = tool_canonical_name(tool);
        if (!canon) {
                *ret_code = "not_found";
                sb_appendf(why, "unknown tool '%.100s' (see nsbox tools)", tool ? tool : "");
                return -ESRCH;
        }
        if (s->n_calls >= NSBOX_SUP_MAX_CALLS) {
                *ret_code = "conflict";
                sb_appendf(why, "sandbox %s has %d calls in flight", s->id, NSBOX_SUP_MAX_CALLS);
                return -EBUSY;
        }
        if (fd >= 0 && s->n_out_fds >= NSBOX_SUP_MAX_FDS) {
                *ret_code = "conflict";
                sb_appendf(why, "sandbox %s has %d descriptors waiting to be sent", s->id, NSBOX_SUP_MAX_FDS);
                return -EBUSY;
        }
        nsbox_sup_call *c = calloc(1, sizeof(*c));
        json_t *p = params ? json_copy(params) : json_object();
        strbuf payload;
        sb_init(&payload, NSBOX_FRAME_MAX_PAYLOAD);
        int r = c && p ? 0 : -ENOMEM;
        if (r < 0) {
                *ret_code = "internal";
                sb_appendf(why, "%s: out of memory", canon);
        } else {
                *c = (nsbox_sup_call){ .agent_id = s->next_id + 1, .tool = canon, .stream = stream, .exec = !strcmp(canon, "exec"),
                                       .raw = raw, .data = data, .fd = fd >= 0 };
                r = fd >= 0 ? 0 : to_agent(c, p, bytes != NULL, len, &payload, ret_code, why);
        }
        if (r == 0)
                r = bytes ? queue_request(s, c, p, bytes, len, -1, ret_code, why)
                          : queue_request(s, c, p, payload.buf, payload.len, fd, ret_code, why);
        json_decref(p);
        sb_release(&payload);
        if (r < 0) {
                free(c);
                return r;
        }
        s->next_id++;
        c->pids_before = c->exec ? nsbox_cgroup_pids_limited(&s->sb.cg) : 0;
        c->next = s->calls;
        s->calls = c;
        s->n_calls++;
        if (ret)
                *ret = c;
        return 0;
}

int nsbox_sup_send(nsbox_supervisor *s, const char *tool, json_t *params, bool stream, void *data, nsbox_sup_call **ret,
                   const char **ret_code, strbuf *why)
{
        return send_call(s, tool, params, stream, NULL, 0, false, -1, data, ret, ret_code, why);
}

int nsbox_sup_send_fd(nsbox_supervisor *s, const char *tool, json_t *params, int fd, void *data, nsbox_sup_call **ret,
                      const char **ret_code, strbuf *why)
{
        int r = send_call(s, tool, params, false, NULL, 0, false, fd, data, ret, ret_code, why);
        if (r < 0)
                close(fd);
        return r;
}

int nsbox_sup_send_bytes(nsbox_supervisor *s, const char *tool, json_t *params, const void *bytes, size_t len, bool raw, void *data,
                         nsbox_sup_call **ret, const char **ret_code, strbuf *why)
{
        return send_call(s, tool, params, false, bytes, len, raw, -1, data, ret, ret_code, why);
}

int nsbox_sup_check_fd(const char *tool, json_t *params, int fd, json_t **ret, const char **ret_code, strbuf *why)
{
        const char *canon = tool_canonical_name(tool);
        bool write = canon && !strcmp(canon, "write_file"), read = canon && !strcmp(canon, "read_file");
        *ret_code = "invalid_argument";
        if (!json_is_true(json_object_get(params, "fd"))) {
                sb_appendf(why, "%.100s: 'fd' must be true", tool ? tool : "");
                return -EINVAL;
        }
        if (!write && !read) {
                sb_appendf(why, "%.100s: 'fd' goes with write_file and read_file only", tool ? tool : "");
                return -EINVAL;
        }
        if (fd < 0) {
                sb_appendf(why, "%s: 'fd' is true but no descriptor came with the request (SCM_RIGHTS)", canon);
                return -EINVAL;
        }
        /* an anonymous pipe (pipefs): a named FIFO is S_ISFIFO too, but an inode of a host file
         * system, which the sandbox's user (the caller's uid) could fchmod or reopen */
        struct stat st;
        struct statfs sfs;
        int fl = fcntl(fd, F_GETFL);
        if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) || fstatfs(fd, &sfs) < 0 || sfs.f_type != PIPEFS_MAGIC || fl < 0 ||
            (fl & O_ACCMODE) != (write ? O_RDONLY : O_WRONLY)) {
                sb_appendf(why, "%s: the descriptor must be a pipe's %s end (pipe(2), not a named FIFO)", canon, write ? "read" : "write");
                return -EINVAL;
        }
        if (!(*ret = json_copy(params)) || json_object_del(*ret, "fd") < 0) {
                json_decref(*ret);
                *ret = NULL;
                *ret_code = "internal";
                sb_appendf(why, "%s: out of memory", canon);
                return -ENOMEM;
        }
        fcntl(fd, F_SETPIPE_SZ, 1 << 20); /* fewer rounds; a caller past its pipe quota keeps the default */
        return 0;
}

/* A request of nsbox's own about call c ("cancel", "pause"), which the agent does not answer
 * by id: no call is made for it. */
static void control(nsbox_supervisor *s, const char *tool, json_t *params)
{
        json_t *req = params ? json_pack("{sI ss so}", "id", ++s->next_id, "tool", tool, "params", params) : NULL;
        if (req)
                nsbox_frame_append(&s->out, req, NULL, 0);
        json_decref(req);
}

void nsbox_sup_cancel(nsbox_supervisor *s, nsbox_sup_call *c)
{
        c->stream = false;
        /* a command the caller waits for is killed, a watch ends, a cell is interrupted; a
         * process_connect or process_wait call only lets go of the process */
        if (c->exec || !strcmp(c->tool, "watch") || !strcmp(c->tool, "process_connect") || !strcmp(c->tool, "process_wait") ||
            !strcmp(c->tool, "run_code") || c->fd)
                control(s, "cancel", json_pack("{sI}", "id", c->agent_id));
}

void nsbox_sup_reboot(nsbox_supervisor *s) { control(s, "reboot", json_object()); }

void nsbox_sup_pause_stream(nsbox_supervisor *s, nsbox_sup_call *c, bool pause)
{
        if (c->paused == pause)
                return;
        control(s, "pause", json_pack("{sI sb}", "id", c->agent_id, "pause", pause));
        c->paused = pause;
}

/* Send from the queue: up to the next descriptor's frame, or that frame's start with the descriptor. */
static ssize_t send_some(nsbox_supervisor *s)
{
        nsbox_queue *q = &s->out;
        size_t n = q->len;
        if (!s->n_out_fds || s->out_fds[0].at > s->out_sent) {
                if (s->n_out_fds && s->out_fds[0].at - s->out_sent < n)
                        n = (size_t)(s->out_fds[0].at - s->out_sent);
                return send(s->sb.agentfd, q->data + q->start, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (s->n_out_fds > 1 && s->out_fds[1].at - s->out_sent < n) /* the next one goes with its own frame */
                n = (size_t)(s->out_fds[1].at - s->out_sent);
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u = { 0 };
        struct iovec iov = { .iov_base = q->data + q->start, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        *cm = (struct cmsghdr){ .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS, .cmsg_len = CMSG_LEN(sizeof(int)) };
        memcpy(CMSG_DATA(cm), &s->out_fds[0].fd, sizeof(int));
        ssize_t k = sendmsg(s->sb.agentfd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) { /* the agent has its copy */
                close(s->out_fds[0].fd);
                memmove(s->out_fds, s->out_fds + 1, --s->n_out_fds * sizeof(s->out_fds[0]));
        }
        return k;
}

int nsbox_sup_flush(nsbox_supervisor *s)
{
        nsbox_queue *q = &s->out;
        while (q->len > 0) {
                ssize_t k = send_some(s);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return errno == EAGAIN ? 0 : -errno;
                q->start += (size_t)k;
                q->len -= (size_t)k;
                s->out_sent += (uint64_t)k;
        }
        q->start = 0;
        if (q->alloc > (1u << 20)) { /* an idle queue keeps no multi-megabyte buffer of one large call */
                free(q->data);
                *q = (nsbox_queue){ 0 };
        }
        return 1;
}

/* ---- frames in ------------------------------------------------------------------------------ */

static void warn(nsbox_supervisor *s, const char *what, const char *detail)
{
        if (!s->ops->warn)
                return;
        char msg[512];
        snprintf(msg, sizeof(msg), "sandbox %s: agent sent %s%.300s", s->id, what, detail);
        s->ops->warn(s->ctx, msg);
}

/* read_file with "encoding": "base64": the frame's payload as the result's "content". */
static int put_content_b64(json_t *result, const nsbox_frame *f)
{
        size_t n = b64_encoded_len(f->payload_len);
        char *enc = malloc(n + 1);
        if (!enc)
                return -ENOMEM;
        b64_encode(f->payload ? f->payload : "", f->payload_len, enc);
        int r = json_object_set_new(result, "content", json_stringn_nocheck(enc, n));
        free(enc);
        return r < 0 ? -ENOMEM : 0;
}

/* The agent's answer to c: its result as a client gets it, or its error with a code of the
 * list (an agent's code outlives its frame, and a code the list does not have is "internal"). */
static void answer(nsbox_supervisor *s, nsbox_sup_call *c, nsbox_frame *f)
{
        json_t *result = json_object_get(f->json, "result"), *error = json_object_get(f->json, "error");
        if (!json_is_object(result)) {
                const char *msg = json_string_value(json_object_get(error, "message"));
                char line[1024];
                snprintf(line, sizeof(line), "%.900s", msg ? msg : "the agent gave no result");
                finish(s, c, NULL, nsbox_code_static(json_string_value(json_object_get(error, "code"))), line);
                return;
        }
        /* a fork refused at the sandbox's pids limit while the command ran: say so */
        const char *reason = json_string_value(json_object_get(result, "reason"));
        if (c->exec && reason && strcmp(reason, "timed_out") && nsbox_cgroup_pids_limited(&s->sb.cg) > c->pids_before)
                json_object_set_new(result, "reason", json_string("pids_limited"));
        if (c->raw) { /* the bytes go to the caller as they came: no copy, no base64 */
                c->payload = f->payload;
                c->payload_len = f->payload_len;
                f->payload = NULL;
                f->payload_len = 0;
        }
        if (c->b64 && put_content_b64(result, f) < 0) {
                finish(s, c, NULL, "internal", "read_file: out of memory for the reply");
                return;
        }
        finish(s, c, result, NULL, NULL);
}

static void dispatch(nsbox_supervisor *s, nsbox_frame *f)
{
        json_t *jid = f->json ? json_object_get(f->json, "id") : NULL;
        if (!json_is_integer(jid)) {
                const char *why = f->json ? json_string_value(json_object_get(json_object_get(f->json, "error"), "message")) : f->json_error;
                warn(s, "a frame without an id: ", why ? why : "");
                return;
        }
        nsbox_sup_call *c = s->calls;
        while (c && c->agent_id != json_integer_value(jid))
                c = c->next;
        if (!c)
                return; /* an answer to nothing asked (a cancelled process's, a control request's) */
        const char *event = json_string_value(json_object_get(f->json, "event"));
        if (!event)
                answer(s, c, f);
        else if (c->stream)
                s->ops->event(s->ctx, c, event, f->json, f->payload, f->payload_len);
}

int nsbox_sup_read(nsbox_supervisor *s, unsigned max)
{
        for (unsigned i = 0; i < max; i++) {
                nsbox_frame f = { 0 };
                int r = nsbox_frame_read(&s->rd, s->sb.agentfd, &f);
                if (r == 0)
                        return 0;
                if (r == -E2BIG) { /* skipped whole: the stream stays in step */
                        warn(s, "an oversized frame, ignored", "");
                        continue;
                }
                if (r < 0)
                        return -EPIPE;
                dispatch(s, &f);
                nsbox_frame_release(&f);
        }
        return 0;
}

void nsbox_sup_died(nsbox_supervisor *s, char *why, size_t n)
{
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&s->sb.cg, &cs) < 0 || cs.oom_kills == 0) {
                snprintf(why, n, "exited");
                return;
        }
        /* memory.oom.group: the OOM killer took the whole sandbox; a command's result says so */
        for (nsbox_sup_call *c = s->calls, *next; c; c = next) {
                next = c->next;
                if (!c->exec)
                        continue;
                json_t *res = json_pack("{si si ss sb sb sb ss ss}", "exit_code", 128 + SIGKILL, "signal", SIGKILL, "reason", "oom_killed",
                                        "oom_killed", 1, "timed_out", 0, "truncated", 0, "stdout", "", "stderr", "");
                if (res)
                        finish(s, c, res, NULL, NULL);
                json_decref(res);
        }
        snprintf(why, n, "was killed by the OOM killer (memory limit %" PRIu64 " bytes)", s->memory_limit);
}

int nsbox_sup_poll(nsbox_supervisor *s, int timeout_ms)
{
        struct pollfd pfd = { .fd = s->sb.agentfd, .events = POLLIN | (s->out.len ? POLLOUT : 0) };
        bool buffered = nsbox_frame_reader_ready(&s->rd); /* frames read ahead: no wait for them */
        int k = poll(&pfd, 1, buffered ? 0 : timeout_ms);
        if (k < 0)
                return errno == EINTR ? 0 : -errno; /* a signal of the caller's: its handler ran */
        if (k == 0 && !buffered)
                return 0;
        if (s->out.len && (pfd.revents & (POLLOUT | POLLERR | POLLHUP)) && nsbox_sup_flush(s) < 0)
                return -EPIPE; /* EPIPE, ECONNRESET: the agent died */
        if (buffered || (pfd.revents & (POLLIN | POLLHUP | POLLERR)))
                return nsbox_sup_read(s, 16);
        return 0;
}

bool nsbox_sup_link_idle(const nsbox_supervisor *s) { return !s->out.len && !s->n_out_fds && !s->rd.len && !s->rd.oversized; }

/* ---- ids ------------------------------------------------------------------------------------ */

void nsbox_id_match_init(nsbox_id_match *m, const char *want) { *m = (nsbox_id_match){ .want = want, .n = strlen(want) }; }

void nsbox_id_match_offer(nsbox_id_match *m, const char *id, void *obj)
{
        if (m->n < 4 || m->n > NSBOX_ID_MAX || strncmp(id, m->want, m->n))
                return;
        m->found = obj;
        m->matches += 1 + (!id[m->n] || (m->n == NSBOX_ID_HEX && id[m->n] == '-')) * 1000; /* an exact match wins */
}

void *nsbox_id_match_result(const nsbox_id_match *m, const char **ret_code, char *msg, size_t n)
{
        if (m->n < 4) { /* never "no sandbox": what is wrong is the prefix given */
                *ret_code = "invalid_argument";
                snprintf(msg, n, "id prefix '%.64s' is too short: give at least 4 characters", m->want);
                return NULL;
        }
        if (!m->found) {
                *ret_code = "not_found";
                snprintf(msg, n, "no sandbox '%.64s'", m->want);
                return NULL;
        }
        if (m->matches > 1 && m->matches < 1000) {
                *ret_code = "conflict";
                snprintf(msg, n, "'%.64s' matches %u sandboxes; give more of the id", m->want, m->matches);
                return NULL;
        }
        return m->found;
}
