/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: calls to a sandbox's agent, through its supervisor (supervisor.h), which sends them
 * and reads the agent's frames; here a client's call becomes one, its events and its end go
 * back to the client and to the trajectory, streams are paused while their client lags, and
 * the agent's death ends the sandbox. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
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

/* ---- the supervisor's callbacks -------------------------------------------------------------- */

static void on_event(void *ctx, nsbox_sup_call *call, const char *event, json_t *frame, const void *data, size_t len)
{
        sandbox *s = ctx;
        pending *p = call->data;
        client *c = client_by_serial(s->d, p->client);
        if (!c)
                return;
        /* every field of the agent's event ("event", "pid", a watch's "op", "path", "type") but
         * its id, which is the agent's, not the client's */
        json_t *params = json_pack("{sO ss}", "call", p->rpc_id, "event", event);
        const char *k;
        json_t *v;
        json_object_foreach(frame, k, v) {
                if (params && strcmp(k, "id") && strcmp(k, "call") && strcmp(k, "data_b64"))
                        json_object_set(params, k, v);
        }
        if (params && len) {
                char *enc = malloc(b64_encoded_len(len) + 1);
                if (enc) {
                        b64_encode(data, len, enc);
                        json_object_set_new(params, "data_b64", json_stringn_nocheck(enc, b64_encoded_len(len)));
                        free(enc);
                }
        }
        send_line(c, json_pack("{ss ss so}", "jsonrpc", "2.0", "method", "event", "params", params));
}

/* What a recording keeps of a call whose bytes came beside its JSON: them as base64, as a
 * client's call would have carried them. */
static void record_bytes(json_t *obj, const char *key, const void *bytes, size_t len)
{
        char *enc = malloc(b64_encoded_len(len) + 1);
        if (enc) {
                b64_encode(bytes ? bytes : "", len, enc);
                json_object_set_new(obj, key, json_stringn_nocheck(enc, b64_encoded_len(len)));
                free(enc);
        }
}

/* A raw call's answer bytes wait beside its reply line, for calls_take_bytes.  Its client
 * may be gone (c NULL): dropped. */
static int keep_bytes(client *c, const pending *p, nsbox_sup_call *call)
{
        if (!c || !json_is_integer(p->rpc_id) || !call->payload_len)
                return 0;
        call_bytes *b = malloc(sizeof(*b));
        if (!b)
                return -ENOMEM;
        *b = (call_bytes){ .next = c->bytes, .rpc_id = json_integer_value(p->rpc_id), .data = call->payload, .len = call->payload_len };
        c->bytes = b;
        call->payload = NULL; /* taken */
        return 0;
}

static void on_done(void *ctx, nsbox_sup_call *call, json_t *result, const char *code, const char *msg)
{
        sandbox *s = ctx;
        pending *p = call->data;
        s->last_active_ns = now_ns();
        /* its first calls are answered (none left in flight, as when an HTTP Start's exec,
         * connect and wait are pipelined): the pool it came from refills now */
        if (s->fresh && !s->sup.n_calls) {
                s->fresh = false;
                s->d->pool_dirty = true;
        }
        if (p->internal == PENDING_INTERP_START) { /* a pooled sandbox's code interpreter */
                s->interp_starting = false;
                json_t *pid = json_object_get(result, "pid");
                s->interp_pid = json_is_integer(pid) && json_integer_value(pid) > 0 ? (long long)json_integer_value(pid) : -1;
                if (s->interp_pid < 0)
                        dlog(LOG_WARNING, "pool.interp_failed", s->sup.id, "sandbox %s: its code interpreter did not start: %s", s->sup.id,
                             msg ? msg : "no pid");
                pending_free(p);
                return;
        }
        if (p->internal == PENDING_WARMUP) {
                pending_free(p);
                json_t *ec = json_object_get(result, "exit_code");
                char why[64];
                snprintf(why, sizeof(why), "exit code %lld", (long long)json_integer_value(ec));
                pool_warmed(s->d, s, !result ? (msg ? msg : code ? code : "failed") : json_is_integer(ec) && json_integer_value(ec) == 0 ? NULL : why);
                return;
        }
        if (p->internal == PENDING_REPO_CLONE) {
                pending_free(p);
                repo_clone_done(s->d, s, result, code, msg);
                return;
        }
        json_t *rec = NULL;
        if (call->raw && result && p->step && (rec = json_copy(result))) /* recorded as a client's base64 read is */
                record_bytes(rec, "content", call->payload, call->payload_len);
        record_call(s, p, rec ? rec : result, code);
        json_decref(rec);
        client *c = client_by_serial(s->d, p->client);
        if (call->raw && result && keep_bytes(c, p, call) < 0) {
                result = NULL;
                code = "internal";
                msg = "out of memory for the answer";
        }
        if (result)
                reply_result(c, p->rpc_id, json_incref(result));
        else
                reply_error(c, p->rpc_id, RPC_SERVER_ERROR, code, "%s", msg);
        pending_free(p);
}

static void on_warn(void *ctx, const char *msg)
{
        sandbox *s = ctx;
        dlog(LOG_WARNING, "agent.bad_frame", s->sup.id, "%s", msg);
}

static const nsbox_sup_ops sup_ops = { .event = on_event, .done = on_done, .warn = on_warn };

void calls_attach(daemon_state *d, sandbox *s, const char *id)
{
        s->d = d;
        nsbox_sup_init(&s->sup, id, &sup_ops, s);
}

/* ---- the method ------------------------------------------------------------------------------ */

/* Why s takes no call now, or NULL. */
static const char *busy(const sandbox *s, char *buf, size_t n)
{
        if (!s->ready)
                snprintf(buf, n, "sandbox %s is still starting", s->sup.id);
        else if (s->paused)
                snprintf(buf, n, "sandbox %s is paused; resume it first (nsbox resume)", s->sup.id);
        else if (s->resetting)
                snprintf(buf, n, "sandbox %s is being reset", s->sup.id);
        else
                return NULL;
        return buf;
}

/* A call with "fd": true: fd, the oldest descriptor the client passed (-1: none), checked
 * (nsbox_sup_check_fd); *ret: the tool's params without "fd".  fd, or -errno (fd closed). */
static int check_call_fd(int fd, const char *tool, json_t *tp, json_t **ret, const char **code, strbuf *why)
{
        int r = nsbox_sup_check_fd(tool, tp, fd, ret, code, why);
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                return r;
        }
        return fd;
}

static void call_send(daemon_state *d, client *c, json_t *id, json_t *params, const void *bytes, size_t len, bool raw)
{
        /* taken at once: a call refused early must not leave its pipe to the next one */
        bool wants_fd = !bytes && !raw && json_is_true(json_object_get(json_object_get(params, "params"), "fd"));
        _cleanup_close_ int fd = wants_fd ? client_take_fd(c) : -1;
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
        char why_busy[160];
        if (busy(s, why_busy, sizeof(why_busy))) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "%s", why_busy);
                return;
        }
        pending *p = calloc(1, sizeof(*p));
        if (!p) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "call: out of memory");
                return;
        }
        nsbox_sup_call *call = NULL;
        const char *code = "internal";
        _cleanup_sb_ strbuf why;
        sb_init(&why, 256);
        /* an alias's params made into its tool's (knowlyr's file_read...): recorded so too */
        char alias_why[256] = "";
        json_auto_t *mapped = NULL;
        int am = tool_alias_params(json_string_value(tool), json_is_object(tparams) ? tparams : NULL, &mapped, alias_why, sizeof(alias_why));
        if (am < 0 && tool_canonical_name(json_string_value(tool))) { /* unknown: sup_send's not_found */
                free(p);
                reply_error(c, id, am == -ENOMEM ? RPC_SERVER_ERROR : RPC_INVALID_PARAMS, am == -ENOMEM ? "internal" : "invalid_argument",
                            "%s", alias_why);
                return;
        }
        tparams = am == 0 ? mapped : tparams;
        json_t *tp = json_is_object(tparams) ? tparams : NULL;
        json_auto_t *fdp = NULL;
        int r;
        if (wants_fd) {
                int mine = check_call_fd(steal_fd(&fd), json_string_value(tool), tp, &fdp, &code, &why);
                r = mine < 0 ? mine : nsbox_sup_send_fd(&s->sup, json_string_value(tool), fdp, mine, p, &call, &code, &why);
        } else if (bytes || raw) {
                r = nsbox_sup_send_bytes(&s->sup, json_string_value(tool), tp, bytes, len, raw, p, &call, &code, &why);
        } else {
                r = nsbox_sup_send(&s->sup, json_string_value(tool), tp, json_is_true(stream), p, &call, &code, &why);
        }
        if (r < 0) {
                free(p);
                reply_error(c, id, r == -EINVAL || r == -E2BIG ? RPC_INVALID_PARAMS : RPC_SERVER_ERROR, code, "%s",
                            why.buf ? why.buf : "out of memory");
                return;
        }
        if (call->exec)
                sandbox_log_exec(s, tp);
        p->client = c->serial;
        p->rpc_id = json_incref(id ? id : json_null());
        if (s->record_fd >= 0) {
                p->step = ++s->record_steps;
                p->start_ns = now_ns();
                p->rec_params = json_is_object(tparams) ? json_deep_copy(tparams) : json_object();
                /* a streamed exec's result differs (its output went as events): replay streams it too */
                if (call->exec)
                        json_object_set_new(p->rec_params, "stream", json_boolean(json_is_true(stream)));
                if (bytes && p->rec_params)
                        record_bytes(p->rec_params, "content_b64", bytes, len);
                snprintf(p->tool, sizeof(p->tool), "%s", call->tool);
        }
        s->last_active_ns = now_ns();
}

void method_call(daemon_state *d, client *c, json_t *id, json_t *params) { call_send(d, c, id, params, NULL, 0, false); }

int calls_internal(daemon_state *d, sandbox *s, const char *tool, json_t *params, int kind)
{
        (void)d;
        pending *p = params ? calloc(1, sizeof(*p)) : NULL;
        nsbox_sup_call *call = NULL;
        const char *code = "internal";
        _cleanup_sb_ strbuf why;
        sb_init(&why, 256);
        int r = p ? nsbox_sup_send(&s->sup, tool, params, false, p, &call, &code, &why) : -ENOMEM;
        json_decref(params);
        if (r < 0) {
                free(p);
                dlog(LOG_WARNING, "call.internal_failed", s->sup.id, "sandbox %s: %s: %s", s->sup.id, tool, why.buf ? why.buf : strerror(-r));
                return r;
        }
        p->internal = kind;
        p->rpc_id = json_null();
        return 0;
}

void method_call_bytes(daemon_state *d, client *c, json_t *id, json_t *params, const void *bytes, size_t len, bool raw)
{
        call_send(d, c, id, params, bytes, len, raw);
}

char *calls_take_bytes(client *c, json_t *id, size_t *len)
{
        *len = 0;
        for (call_bytes **pp = c ? &c->bytes : NULL; pp && *pp; pp = &(*pp)->next) {
                call_bytes *b = *pp;
                if (!json_is_integer(id) || b->rpc_id != json_integer_value(id))
                        continue;
                *pp = b->next;
                char *data = b->data;
                *len = b->len;
                free(b);
                return data;
        }
        return NULL;
}

/* ---- the agent's socket ---------------------------------------------------------------------- */

/* The agent is gone: destroyed from inside (the OOM killer takes the whole sandbox, memory.oom.group)
 * or killed.  The commands running get their result, the other calls an error. */
void sandbox_died(daemon_state *d, sandbox *s)
{
        char why[128];
        s->sup.memory_limit = s->limits.memory; /* as nsboxd knows it, an adopted sandbox's too */
        nsbox_sup_died(&s->sup, why, sizeof(why));
        sandbox_remove(d, s, "internal", why);
}

/* Streams paused in their agents while their client lags (CLIENT_HIGH; an HTTP request's, of
 * which a user may hold HTTP_STREAMS_PER_UID, HTTP_CLIENT_HIGH), resumed below half of it; each
 * agent's socket watched for what there is to read and to write.  True when an agent's frames
 * wait, read ahead, in its reader (agents_read_buffered takes them, without a wait). */
bool agents_update_interest(daemon_state *d)
{
        bool buffered = false;
        for (sandbox *s = d->sandboxes; s; s = s->next) {
                for (nsbox_sup_call *call = s->sup.calls; call; call = call->next) {
                        if (!call->stream)
                                continue;
                        client *c = client_by_serial(d, ((pending *)call->data)->client);
                        size_t q = c ? c->out.len : 0, high = c && c->http ? HTTP_CLIENT_HIGH : CLIENT_HIGH;
                        if (!call->paused && q >= high)
                                nsbox_sup_pause_stream(&s->sup, call, true);
                        else if (call->paused && q < high / 2)
                                nsbox_sup_pause_stream(&s->sup, call, false);
                }
                nsbox_epoll_set(d->epfd, s->sup.sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events,
                                (s->ready || s->cloning || s->warming ? EPOLLIN : 0) | (s->sup.out.len ? EPOLLOUT : 0));
                buffered |= (s->ready || s->cloning || s->warming) && nsbox_frame_reader_ready(&s->sup.rd);
        }
        return buffered;
}

void agents_read_buffered(daemon_state *d)
{
        for (sandbox *s = d->sandboxes, *nx; s; s = nx) {
                nx = s->next;
                if ((s->ready || s->cloning || s->warming) && nsbox_frame_reader_ready(&s->sup.rd))
                        agent_event(d, s, EPOLLIN);
        }
}

/* c is gone: its calls in flight: answers are dropped; commands it was waiting for are stopped */
void calls_client_gone(daemon_state *d, client *c)
{
        while (c->bytes) { /* answers it did not take */
                call_bytes *b = c->bytes;
                c->bytes = b->next;
                free(b->data);
                free(b);
        }
        for (sandbox *s = d->sandboxes; s; s = s->next)
                for (nsbox_sup_call *call = s->sup.calls; call; call = call->next) {
                        pending *p = call->data;
                        if (p->client != c->serial)
                                continue;
                        p->client = 0;
                        nsbox_sup_cancel(&s->sup, call);
                }
}

/* The agent's socket is writable or readable (events of epoll). */
void agent_event(daemon_state *d, sandbox *s, uint32_t events)
{
        if (events & EPOLLOUT && nsbox_sup_flush(&s->sup) < 0) {
                sandbox_died(d, s);
                return;
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR) && nsbox_sup_read(&s->sup, 16) < 0)
                sandbox_died(d, s);
}

/* write what is queued now rather than on the next round */
void agents_flush(daemon_state *d)
{
        for (sandbox *s = d->sandboxes, *nx; s; s = nx) {
                nx = s->next;
                if (s->sup.out.len && nsbox_sup_flush(&s->sup) < 0)
                        sandbox_remove(d, s, "internal", "exited");
        }
}
