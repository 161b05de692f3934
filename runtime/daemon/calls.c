/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: calls to a sandbox's agent.  A client's call becomes a frame to the agent, whose
 * frames come back as events and results; streams are paused while their client lags; the
 * agent's death ends its calls. */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/epoll.h>

#include "../../tools/registry.h"
#include "../base64.h"
#include "../dlog.h"

static void pending_free(pending *p)
{
        json_decref(p->rpc_id);
        json_decref(p->rec_params);
        free(p);
}

void fail_calls(daemon_state *d, sandbox *s, const char *code, const char *why)
{
        while (s->calls) {
                pending *p = s->calls;
                s->calls = p->next;
                record_call(s, p, NULL, code);
                reply_error(client_by_serial(d, p->client), p->rpc_id, RPC_SERVER_ERROR, code, "sandbox %s %s", s->id, why);
                pending_free(p);
        }
        s->n_calls = 0;
}

void method_call(daemon_state *d, client *c, json_t *id, json_t *params)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        json_t *tool = json_object_get(params, "tool"), *tparams = json_object_get(params, "params");
        json_t *stream = json_object_get(params, "stream");
        if (!json_is_string(tool)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "call: 'tool' must be a string");
                return;
        }
        if (tparams && !json_is_null(tparams) && !json_is_object(tparams)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "call: 'params' must be an object");
                return;
        }
        if (stream && !json_is_boolean(stream)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "call: 'stream' must be a boolean");
                return;
        }
        const char *canon = tool_canonical_name(json_string_value(tool));
        if (!canon) {
                reply_error(c, id, RPC_SERVER_ERROR, "not_found", "unknown tool '%.100s' (see nsbox tools)", json_string_value(tool));
                return;
        }
        if (!s->ready) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is still starting", s->id);
                return;
        }
        if (s->paused) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is paused; resume it first (nsbox resume)", s->id);
                return;
        }
        if (s->resetting) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is being reset", s->id);
                return;
        }
        if (s->n_calls >= MAX_CALLS_PER_SANDBOX) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s has %d calls in flight", s->id, MAX_CALLS_PER_SANDBOX);
                return;
        }
        json_t *p = json_is_object(tparams) ? json_copy(tparams) : json_object();
        strbuf payload;
        sb_init(&payload, NSBOX_FRAME_MAX_PAYLOAD);
        bool b64_payload = false;
        const char *code = NULL;
        strbuf why;
        sb_init(&why, 256);
        int tr = nsbox_tool_request_to_agent(canon, p, json_is_true(stream), &payload, &b64_payload, &code, &why);
        if (tr < 0) {
                json_decref(p);
                sb_release(&payload);
                reply_error(c, id, tr == -ENOMEM ? RPC_SERVER_ERROR : RPC_INVALID_PARAMS, code, "%s", why.buf ? why.buf : "out of memory");
                sb_release(&why);
                return;
        }
        sb_release(&why);
        bool is_exec = !strcmp(canon, "exec");
        pending *pc = calloc(1, sizeof(*pc));
        json_int_t aid = ++s->next_agent_id;
        json_t *req = json_pack("{sI ss so}", "id", aid, "tool", canon, "params", p);
        int r = pc && req ? nsbox_frame_append(&s->out, req, payload.buf ? payload.buf : "", payload.buf ? payload.len : 0) : -ENOMEM;
        json_decref(req);
        sb_release(&payload);
        if (r < 0) {
                free(pc);
                reply_error(c, id, RPC_SERVER_ERROR, r == -E2BIG ? "too_large" : "internal", "call: %s",
                            r == -E2BIG ? "request larger than the protocol's maximum frame" : strerror(-r));
                return;
        }
        pc->agent_id = aid;
        pc->client = c->serial;
        if (s->record_fd >= 0) {
                pc->step = ++s->record_steps;
                pc->start_ns = now_ns();
                pc->rec_params = json_is_object(tparams) ? json_deep_copy(tparams) : json_object();
                /* a streamed exec's result differs (its output went as events): replay streams it too */
                if (is_exec)
                        json_object_set_new(pc->rec_params, "stream", json_boolean(json_is_true(stream)));
                snprintf(pc->tool, sizeof(pc->tool), "%s", canon);
        }
        pc->rpc_id = json_incref(id ? id : json_null());
        pc->stream = json_is_true(stream);
        pc->exec = is_exec;
        pc->pids_limited = is_exec ? nsbox_cgroup_pids_limited(&s->sb.cg) : 0;
        pc->b64_payload = b64_payload;
        pc->next = s->calls;
        s->calls = pc;
        s->n_calls++;
        s->last_active_ns = now_ns();
}

static void agent_frame(daemon_state *d, sandbox *s, nsbox_frame *f)
{
        json_t *jid = f->json ? json_object_get(f->json, "id") : NULL;
        if (!json_is_integer(jid)) {
                dlog(LOG_WARNING, "agent.bad_frame", s->id, "sandbox %s: agent sent a frame without an id: %s", s->id,
                      f->json ? json_string_value(json_object_get(json_object_get(f->json, "error"), "message")) ?: "" : f->json_error);
                return;
        }
        pending **pp = &s->calls, *p = NULL;
        for (; *pp; pp = &(*pp)->next)
                if ((*pp)->agent_id == json_integer_value(jid)) {
                        p = *pp;
                        break;
                }
        if (!p)
                return; /* an answer to nothing we asked: ignored */
        client *c = client_by_serial(d, p->client);
        json_t *event = json_object_get(f->json, "event");
        if (json_is_string(event)) {
                if (!c || !p->stream)
                        return;
                json_t *params = json_pack("{sO sO}", "call", p->rpc_id, "event", event);
                json_t *pid = json_object_get(f->json, "pid");
                if (params && json_is_integer(pid))
                        json_object_set(params, "pid", pid);
                if (params && f->payload_len) {
                        char *enc = malloc(b64_encoded_len(f->payload_len) + 1);
                        if (enc) {
                                b64_encode(f->payload, f->payload_len, enc);
                                json_object_set_new(params, "data_b64", json_stringn_nocheck(enc, b64_encoded_len(f->payload_len)));
                                free(enc);
                        }
                }
                send_line(c, json_pack("{ss ss so}", "jsonrpc", "2.0", "method", "event", "params", params));
                return;
        }
        *pp = p->next;
        s->n_calls--;
        s->last_active_ns = now_ns();
        if (s->fresh) { /* its first call is answered: the pool it came from refills now */
                s->fresh = false;
                d->pool_dirty = true;
        }
        json_t *result = json_object_get(f->json, "result"), *error = json_object_get(f->json, "error");
        /* a fork refused at the sandbox's pids limit while the command ran: say so */
        const char *reason = json_string_value(json_object_get(result, "reason"));
        if (p->exec && reason && strcmp(reason, "timed_out") && nsbox_cgroup_pids_limited(&s->sb.cg) > p->pids_limited)
                json_object_set_new(result, "reason", json_string("pids_limited"));
        if (json_is_object(result)) {
                if (nsbox_tool_result_from_agent(result, f, p->b64_payload) < 0) {
                        record_call(s, p, NULL, "internal");
                        reply_error(c, p->rpc_id, RPC_SERVER_ERROR, "internal", "%s: out of memory for the reply", p->tool);
                } else {
                        record_call(s, p, result, NULL);
                        reply_result(c, p->rpc_id, json_incref(result));
                }
        } else {
                const char *code = json_string_value(json_object_get(error, "code"));
                const char *msg = json_string_value(json_object_get(error, "message"));
                record_call(s, p, NULL, code ? code : "internal");
                reply_error(c, p->rpc_id, RPC_SERVER_ERROR, code ? code : "internal", "%.900s", msg ? msg : "the agent gave no result");
        }
        pending_free(p);
}

/* The agent is gone: destroyed from inside (the OOM killer takes the whole sandbox, memory.oom.group)
 * or killed.  The commands running get their result, the other calls an error. */
void sandbox_died(daemon_state *d, sandbox *s)
{
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&s->sb.cg, &cs) < 0 || cs.oom_kills == 0) {
                sandbox_remove(d, s, "internal", "exited");
                return;
        }
        for (pending **pp = &s->calls; *pp;) {
                pending *p = *pp;
                if (!p->exec) {
                        pp = &p->next;
                        continue;
                }
                *pp = p->next;
                s->n_calls--;
                json_t *res = json_pack("{si si ss sb sb sb ss ss}", "exit_code", 128 + SIGKILL, "signal", SIGKILL, "reason", "oom_killed",
                                        "oom_killed", 1, "timed_out", 0, "truncated", 0, "stdout", "", "stderr", "");
                record_call(s, p, res, NULL);
                reply_result(client_by_serial(d, p->client), p->rpc_id, res);
                pending_free(p);
        }
        char why[128];
        snprintf(why, sizeof(why), "was killed by the OOM killer (memory limit %" PRIu64 " bytes)", s->limits.memory);
        sandbox_remove(d, s, "internal", why);
}

static void agent_readable(daemon_state *d, sandbox *s)
{
        for (int i = 0; i < 16; i++) {
                nsbox_frame f = { 0 };
                int r = nsbox_frame_read(&s->rd, s->sb.agentfd, &f);
                if (r == 0)
                        return;
                if (r == -E2BIG) {
                        dlog(LOG_WARNING, "agent.bad_frame", s->id, "sandbox %s: agent sent an oversized frame, ignored", s->id);
                        continue;
                }
                if (r < 0) {
                        sandbox_died(d, s);
                        return;
                }
                agent_frame(d, s, &f);
                nsbox_frame_release(&f);
        }
}

static void send_pause(sandbox *s, pending *p, bool pause)
{
        json_t *req = json_pack("{sI ss s{sI sb}}", "id", ++s->next_agent_id, "tool", "pause", "params", "id", p->agent_id, "pause", pause);
        if (req && nsbox_frame_append(&s->out, req, NULL, 0) == 0)
                p->paused = pause;
        json_decref(req);
}

/* Streams paused in their agents while their client lags (CLIENT_HIGH), resumed below half of
 * it; each agent's socket watched for what there is to read and to write. */
void agents_update_interest(daemon_state *d)
{
        for (sandbox *s = d->sandboxes; s; s = s->next) {
                for (pending *p = s->calls; p; p = p->next) {
                        if (!p->stream)
                                continue;
                        client *c = client_by_serial(d, p->client);
                        size_t q = c ? c->out.len : 0;
                        if (!p->paused && q >= CLIENT_HIGH)
                                send_pause(s, p, true);
                        else if (p->paused && q < CLIENT_HIGH / 2)
                                send_pause(s, p, false);
                }
                nsbox_epoll_set(d->epfd, s->sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events, (s->ready ? EPOLLIN : 0) | (s->out.len ? EPOLLOUT : 0));
        }
}

/* c is gone: its calls in flight: answers are dropped; commands it was waiting for are stopped */
void calls_client_gone(daemon_state *d, const client *c)
{
        for (sandbox *s = d->sandboxes; s; s = s->next)
                for (pending *p = s->calls; p; p = p->next) {
                        if (p->client != c->serial)
                                continue;
                        p->client = 0;
                        if (p->exec) {
                                json_t *req = json_pack("{sI ss s{sI}}", "id", ++s->next_agent_id, "tool", "cancel", "params", "id",
                                                        p->agent_id);
                                if (req)
                                        nsbox_frame_append(&s->out, req, NULL, 0);
                                json_decref(req);
                        }
                }
}

/* The agent's socket is writable or readable (events of epoll). */
void agent_event(daemon_state *d, sandbox *s, uint32_t events)
{
        if (events & EPOLLOUT && nsbox_queue_flush(&s->out, s->sb.agentfd) < 0) {
                sandbox_died(d, s);
                return;
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                agent_readable(d, s);
}

/* write what is queued now rather than on the next round */
void agents_flush(daemon_state *d)
{
        for (sandbox *s = d->sandboxes, *nx; s; s = nx) {
                nx = s->next;
                if (s->out.len && nsbox_queue_flush(&s->out, s->sb.agentfd) < 0)
                        sandbox_remove(d, s, "internal", "exited");
        }
}
