/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd (daemon.h).  Memory is bounded the same way as in the agent: a client whose replies
 * pile up above CLIENT_HIGH is not read from, and the agents streaming to it are told to pause
 * those streams (a stream nobody reads stops in the command's pipe, and other calls to the same
 * sandbox go on); a client CLIENT_HARD behind is disconnected. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../tools/registry.h"
#include "base64.h"
#include "options.h"
#include "paths.h"
#include "proto.h"
#include "sandbox.h"
#include "util.h"

#define MAX_LINE NSBOX_FRAME_MAX_JSON
#define CLIENT_HIGH (16u << 20)  /* streams to the client are paused in their agents above this */
#define CLIENT_HARD (64u << 20)  /* a client this far behind on its replies is disconnected */
#define MAX_CLIENTS 1024
#define MAX_SANDBOXES 1024
#define MAX_CALLS_PER_SANDBOX 1024
#define READY_TIMEOUT_NS (30ull * 1000000000)
#define PAUSE_TIMEOUT_MS 5000

/* JSON-RPC error codes; the stable nsbox code is in error.data.code */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_SERVER_ERROR -32000

enum { K_LISTEN, K_SIGNAL, K_CLIENT, K_SYNC, K_AGENT, K_PIDFD };
#define KEY(serial, kind) ((uint64_t)(serial) << 3 | (uint64_t)(kind))

typedef struct client {
        struct client *next;
        uint64_t serial;
        int fd;
        uid_t uid;
        strbuf in;
        bool discarding; /* the rest of an oversized line */
        nsbox_queue out;
        bool eof;
        uint32_t events;
} client;

typedef struct pending {
        struct pending *next;
        json_int_t agent_id;
        uint64_t client; /* serial; 0 once the client went away */
        json_t *rpc_id;
        bool stream, b64_payload, exec, paused;
        uint64_t pids_limited; /* exec: pids.events max when it started */
} pending;

typedef struct sandbox {
        struct sandbox *next;
        uint64_t serial;
        char id[33];
        uid_t owner;
        nsbox_sandbox sb;
        char *policy_name;
        json_t *labels;
        nsbox_limits limits;
        bool ready, paused;
        time_t created;
        uint64_t expires_ns, ready_deadline_ns;
        uint64_t create_client;
        json_t *create_rpc_id;
        nsbox_frame_reader rd;
        nsbox_queue out;
        json_int_t next_agent_id;
        pending *calls;
        unsigned n_calls;
        uint32_t agent_events, sync_events, pid_events;
} sandbox;

typedef struct daemon_state {
        int epfd, listen_fd, sig_fd;
        uint64_t next_serial;
        client *clients;
        unsigned n_clients;
        sandbox *sandboxes;
        unsigned n_sandboxes;
        bool stop;
} daemon_state;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
        char ts[32];
        time_t t = time(NULL);
        struct tm tm;
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", localtime_r(&t, &tm));
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s nsboxd[%d]: ", ts, (int)getpid());
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        fflush(stderr);
}

static client *client_by_serial(daemon_state *d, uint64_t serial)
{
        for (client *c = d->clients; c && serial; c = c->next)
                if (c->serial == serial)
                        return c;
        return NULL;
}

static sandbox *sandbox_by_serial(daemon_state *d, uint64_t serial)
{
        for (sandbox *s = d->sandboxes; s; s = s->next)
                if (s->serial == serial)
                        return s;
        return NULL;
}

/* ---- replies ------------------------------------------------------------------------------ */

static void send_line(client *c, json_t *msg)
{
        if (!c || !msg) {
                json_decref(msg);
                return;
        }
        size_t len = 0;
        char *text = nsbox_json_dumps(msg, &len);
        json_decref(msg);
        if (!text || nsbox_queue_append(&c->out, text, len) < 0 || nsbox_queue_append(&c->out, "\n", 1) < 0)
                c->eof = true; /* out of memory for this client: drop it */
        free(text);
}

static void reply_result(client *c, json_t *id, json_t *result)
{
        if (!id) { /* a notification: no reply */
                json_decref(result);
                return;
        }
        send_line(c, json_pack("{ss sO so}", "jsonrpc", "2.0", "id", id, "result", result ? result : json_object()));
}

static void reply_error(client *c, json_t *id, int rpc_code, const char *code, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void reply_error(client *c, json_t *id, int rpc_code, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        send_line(c, json_pack("{ss sO s{si ss s{ss}}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code", rpc_code,
                               "message", msg, "data", "code", code));
}

/* ---- sandboxes ------------------------------------------------------------------------------ */

static void fail_calls(daemon_state *d, sandbox *s, const char *code, const char *why)
{
        while (s->calls) {
                pending *p = s->calls;
                s->calls = p->next;
                reply_error(client_by_serial(d, p->client), p->rpc_id, RPC_SERVER_ERROR, code, "sandbox %s %s", s->id, why);
                json_decref(p->rpc_id);
                free(p);
        }
        s->n_calls = 0;
}

static void sandbox_remove(daemon_state *d, sandbox *s, const char *code, const char *why)
{
        for (sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        d->n_sandboxes--;
        fail_calls(d, s, code, why);
        if (s->create_rpc_id)
                reply_error(client_by_serial(d, s->create_client), s->create_rpc_id, RPC_SERVER_ERROR, "internal",
                            "sandbox %s %s before it was ready", s->id, why);
        int fds[3] = { s->sb.syncfd, s->sb.agentfd, s->sb.pidfd };
        for (int i = 0; i < 3; i++)
                if (fds[i] >= 0)
                        epoll_ctl(d->epfd, EPOLL_CTL_DEL, fds[i], NULL);
        nsbox_sandbox_destroy(&s->sb);
        nsbox_frame_reader_release(&s->rd);
        nsbox_queue_release(&s->out);
        json_decref(s->labels);
        json_decref(s->create_rpc_id);
        free(s->policy_name);
        logf_("sandbox %s removed: %s", s->id, why);
        free(s);
}

static bool visible(const client *c, const sandbox *s) { return c->uid == 0 || c->uid == s->owner; }

/* By full id or a unique prefix of at least 4 characters, among what the client may see. */
static sandbox *find_sandbox(daemon_state *d, client *c, json_t *id, json_t *params)
{
        json_t *v = json_object_get(params, "sandbox");
        if (!json_is_string(v)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "'sandbox' (the sandbox id) must be a string");
                return NULL;
        }
        const char *want = json_string_value(v);
        size_t n = strlen(want);
        sandbox *found = NULL;
        unsigned matches = 0;
        for (sandbox *s = d->sandboxes; s && n >= 4 && n <= 32; s = s->next)
                if (visible(c, s) && strncmp(s->id, want, n) == 0) {
                        found = s;
                        matches += 1 + (n == 32) * 1000; /* an exact match wins */
                }
        if (!found) {
                reply_error(c, id, RPC_SERVER_ERROR, "not_found", "no sandbox '%.64s'", want);
                return NULL;
        }
        if (matches > 1 && matches < 1000) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "'%.64s' matches %u sandboxes; give more of the id", want, matches);
                return NULL;
        }
        return found;
}

static json_t *sandbox_json(const sandbox *s)
{
        json_t *o = json_pack("{ss ss sI si ss sO sI sI}", "id", s->id, "state", !s->ready ? "starting" : s->paused ? "paused" : "running",
                              "created", (json_int_t)s->created, "uid", (int)s->owner, "policy", s->policy_name ? s->policy_name : "",
                              "labels", s->labels ? s->labels : json_object(), "pid", (json_int_t)s->sb.pid, "calls",
                              (json_int_t)s->n_calls);
        if (!o)
                return NULL;
        if (s->expires_ns) {
                uint64_t now = now_ns();
                json_object_set_new(o, "expires_in", json_real(s->expires_ns > now ? (double)(s->expires_ns - now) / 1e9 : 0));
        }
        const nsbox_limits *l = &s->limits;
        json_t *lim = json_object();
        if (l->memory)
                json_object_set_new(lim, "memory", json_integer((json_int_t)l->memory));
        if (l->pids)
                json_object_set_new(lim, "pids", json_integer((json_int_t)l->pids));
        if (l->cpus > 0)
                json_object_set_new(lim, "cpus", json_real(l->cpus));
        json_object_set_new(lim, "disk", json_integer((json_int_t)(l->disk ? l->disk : NSBOX_DEFAULT_DISK)));
        json_object_set_new(o, "limits", lim);
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&s->sb.cg, &cs) < 0) {
                json_object_set_new(o, "cgroup", json_null());
                return o;
        }
        json_object_set_new(o, "cgroup", json_string(s->sb.cg.path));
        json_object_set_new(o, "cpu_time_ms", json_real((double)cs.cpu_usage_us / 1000.0));
        if (cs.has_memory) {
                json_object_set_new(o, "memory_bytes", json_integer((json_int_t)cs.memory_current));
                json_object_set_new(o, "peak_memory_bytes", json_integer((json_int_t)cs.memory_peak));
                json_object_set_new(o, "oom_kills", json_integer((json_int_t)cs.oom_kills));
        }
        if (cs.has_pids) {
                json_object_set_new(o, "pids", json_integer((json_int_t)cs.pids_current));
                json_object_set_new(o, "pids_limited", json_integer((json_int_t)cs.pids_limited));
        }
        return o;
}

/* create's params become the same command line `nsbox run` takes, checked by the same parser. */
static int create_argv(json_t *params, strbuf *why, char ***ret)
{
        _cleanup_strv_ char **v = NULL;
        int r = 0;
#define PUSH(s) do { char *_d = strdup(s); if (!_d || strv_push(&v, _d) < 0) return -ENOMEM; } while (0)
        PUSH("create");
        /* sizes may be given as strings ("512M") or numbers of bytes */
        static const char *const strings[] = { "policy", "rootfs", "workdir", "hostname", "net", "disk", "memory" };
        for (size_t i = 0; i < ARRAY_SIZE(strings); i++) {
                json_t *x = json_object_get(params, strings[i]);
                if (!x || json_is_null(x))
                        continue;
                bool size = i >= 5;
                char num[32];
                if (size && json_is_integer(x) && json_integer_value(x) >= 0)
                        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(x));
                else if (!json_is_string(x)) {
                        sb_appendf(why, size ? "'%s' must be a size such as \"512M\" or a number of bytes" : "'%s' must be a string", strings[i]);
                        return -EINVAL;
                }
                char opt[32];
                snprintf(opt, sizeof(opt), "--%s", strings[i]);
                PUSH(opt);
                PUSH(json_is_string(x) ? json_string_value(x) : num);
        }
        static const char *const numbers[] = { "pids", "cpus" };
        for (size_t i = 0; i < ARRAY_SIZE(numbers); i++) {
                json_t *x = json_object_get(params, numbers[i]);
                if (!x || json_is_null(x))
                        continue;
                if (!json_is_number(x) || (i == 0 && !json_is_integer(x))) {
                        sb_appendf(why, i == 0 ? "'pids' must be an integer" : "'cpus' must be a number");
                        return -EINVAL;
                }
                char opt[32], num[64];
                snprintf(opt, sizeof(opt), "--%s", numbers[i]);
                if (i == 0)
                        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(x));
                else
                        snprintf(num, sizeof(num), "%.6g", json_number_value(x));
                PUSH(opt);
                PUSH(num);
        }
        json_t *t = json_object_get(params, "timeout");
        if (t && !json_is_null(t)) {
                if (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 1e9) {
                        sb_appendf(why, "'timeout' must be a number of seconds");
                        return -EINVAL;
                }
                char num[64];
                snprintf(num, sizeof(num), "%.3f", json_number_value(t));
                PUSH("--timeout");
                PUSH(num);
        }
        static const char *const lists[][2] = { { "bind", "--bind" }, { "tmpfs", "--tmpfs" }, { "env", "-e" } };
        for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
                json_t *x = json_object_get(params, lists[i][0]);
                if (!x || json_is_null(x))
                        continue;
                if (i == 2 && json_is_object(x)) { /* env as {"K": "V"} */
                        const char *k;
                        json_t *val;
                        json_object_foreach(x, k, val) {
                                _cleanup_free_ char *kv = NULL;
                                if (!json_is_string(val) || asprintf(&kv, "%s=%s", k, json_string_value(val)) < 0) {
                                        sb_appendf(why, "'env' must map names to strings");
                                        return -EINVAL;
                                }
                                PUSH("-e");
                                PUSH(kv);
                        }
                        continue;
                }
                if (!json_is_array(x)) {
                        sb_appendf(why, "'%s' must be an array of strings", lists[i][0]);
                        return -EINVAL;
                }
                size_t j;
                json_t *e;
                json_array_foreach(x, j, e) {
                        if (!json_is_string(e)) {
                                sb_appendf(why, "'%s' must be an array of strings", lists[i][0]);
                                return -EINVAL;
                        }
                        const char *s = json_string_value(e);
                        /* relative to what? the daemon's cwd is not the client's */
                        if (i == 0 && s[0] != '/') {
                                sb_appendf(why, "bind '%s': the source must be an absolute path", s);
                                return -EINVAL;
                        }
                        if (i == 2 && !strchr(s, '=')) {
                                sb_appendf(why, "env '%s': expected K=V (the daemon does not pass its own environment)", s);
                                return -EINVAL;
                        }
                        PUSH(lists[i][1]);
                        PUSH(s);
                }
        }
        const char *pol = json_string_value(json_object_get(params, "policy"));
        if (pol && strchr(pol, '/') && pol[0] != '/') {
                sb_appendf(why, "policy '%s': a policy file must be given as an absolute path", pol);
                return -EINVAL;
        }
        const char *rootfs = json_string_value(json_object_get(params, "rootfs"));
        if (rootfs && strcmp(rootfs, "host") && rootfs[0] != '/') {
                sb_appendf(why, "rootfs '%s': expected 'host' or an absolute path", rootfs);
                return -EINVAL;
        }
#undef PUSH
        *ret = steal_pointer(&v);
        return r;
}

static int check_labels(json_t *labels, strbuf *why)
{
        if (!labels || json_is_null(labels))
                return 0;
        if (!json_is_object(labels) || json_object_size(labels) > 64) {
                sb_appendf(why, "'labels' must be an object of at most 64 string values");
                return -EINVAL;
        }
        const char *k;
        json_t *v;
        json_object_foreach(labels, k, v) {
                size_t kl = strlen(k);
                bool ok = kl >= 1 && kl <= 63 && json_is_string(v) && json_string_length(v) <= 256;
                for (const char *p = k; ok && *p; p++)
                        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._-/", *p);
                if (!ok) {
                        sb_appendf(why, "label '%.63s': keys are 1-63 of [A-Za-z0-9._-/], values strings of at most 256 bytes", k);
                        return -EINVAL;
                }
        }
        return 0;
}

static void method_create(daemon_state *d, client *c, json_t *id, json_t *params)
{
        if (d->n_sandboxes >= MAX_SANDBOXES) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "this nsboxd already holds %d sandboxes", MAX_SANDBOXES);
                return;
        }
        strbuf why;
        sb_init(&why, 1024);
        _cleanup_strv_ char **argv = NULL;
        json_t *labels = json_object_get(params, "labels");
        if (check_labels(labels, &why) < 0 || create_argv(params, &why, &argv) < 0) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "create: %s", why.buf ? why.buf : "out of memory");
                sb_release(&why);
                return;
        }
        sb_release(&why);
        nsbox_run_options o;
        nsbox_error err = { 0 };
        nsbox_policy *p = NULL;
        int r = nsbox_run_options_parse((int)strv_length(argv), argv, &o, &err);
        if (r == 0)
                r = nsbox_run_options_policy(&o, &p, &err);
        if (r == 0)
                r = nsbox_policy_check_host(p, &err);
        nsbox_run_options_release(&o);
        if (r < 0) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "%s", err.msg ? err.msg : "invalid options");
                nsbox_error_clear(&err);
                nsbox_policy_free(p);
                return;
        }
        sandbox *s = calloc(1, sizeof(*s));
        unsigned char rnd[16];
        if (!s || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                free(s);
                nsbox_policy_free(p);
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "create: out of memory or randomness");
                return;
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
        s->sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
        r = nsbox_sandbox_start(p, NULL, nsbox_tool_handlers, NULL, s->id, &s->sb, &err);
        uint64_t lifetime = p->limits.timeout_ms;
        s->limits = p->limits;
        s->policy_name = strdup(p->source ? p->source : "");
        nsbox_policy_free(p);
        if (r < 0) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "create: %s", err.msg ? err.msg : "cannot start the sandbox");
                nsbox_error_clear(&err);
                free(s->policy_name);
                free(s);
                return;
        }
        s->serial = ++d->next_serial;
        s->owner = c->uid;
        s->labels = json_is_object(labels) ? json_deep_copy(labels) : json_object();
        s->created = time(NULL);
        uint64_t now = now_ns();
        s->expires_ns = lifetime ? now + lifetime * 1000000 : 0;
        s->ready_deadline_ns = now + READY_TIMEOUT_NS;
        s->create_client = c->serial;
        s->create_rpc_id = json_incref(id ? id : json_null());
        s->next = d->sandboxes;
        d->sandboxes = s;
        d->n_sandboxes++;
        int fl = fcntl(s->sb.agentfd, F_GETFL);
        fcntl(s->sb.agentfd, F_SETFL, fl | O_NONBLOCK);
        if (nsbox_epoll_add(d->epfd, s->sb.syncfd, KEY(s->serial, K_SYNC), &s->sync_events, EPOLLIN) < 0 ||
            nsbox_epoll_add(d->epfd, s->sb.pidfd, KEY(s->serial, K_PIDFD), &s->pid_events, EPOLLIN) < 0 ||
            nsbox_epoll_add(d->epfd, s->sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events, 0) < 0)
                sandbox_remove(d, s, "internal", "could not be watched");
}

static void method_list(daemon_state *d, client *c, json_t *id)
{
        json_t *arr = json_array();
        for (sandbox *s = d->sandboxes; s; s = s->next)
                if (visible(c, s))
                        json_array_append_new(arr, sandbox_json(s));
        reply_result(c, id, json_pack("{so}", "sandboxes", arr));
}

static void method_destroy(daemon_state *d, client *c, json_t *id, json_t *params)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        char sid[33];
        memcpy(sid, s->id, sizeof(sid));
        sandbox_remove(d, s, "not_found", "was destroyed");
        reply_result(c, id, json_pack("{ss}", "destroyed", sid));
}

/* Freeze or thaw the sandbox's cgroup; the sandbox's calls are refused while it is frozen. */
static void method_pause(daemon_state *d, client *c, json_t *id, json_t *params, bool pause)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        if (!s->ready) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is still starting", s->id);
                return;
        }
        nsbox_error err = { 0 };
        if (s->paused != pause) {
                uint64_t t0 = now_ns();
                if (nsbox_cgroup_freeze(&s->sb.cg, pause, PAUSE_TIMEOUT_MS, &err) < 0) {
                        reply_error(c, id, RPC_SERVER_ERROR, err.errnum == ETIMEDOUT ? "timeout" : s->sb.cg.dirfd < 0 ? "conflict" : "internal",
                                    "cannot %s sandbox %s: %s", pause ? "pause" : "resume", s->id, err.msg ? err.msg : "");
                        nsbox_error_clear(&err);
                        return;
                }
                s->paused = pause;
                logf_("sandbox %s %s in %.2f ms", s->id, pause ? "paused" : "resumed", (double)(now_ns() - t0) / 1e6);
        }
        reply_result(c, id, sandbox_json(s));
}

static void method_call(daemon_state *d, client *c, json_t *id, json_t *params)
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
        if (s->n_calls >= MAX_CALLS_PER_SANDBOX) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s has %d calls in flight", s->id, MAX_CALLS_PER_SANDBOX);
                return;
        }
        json_t *p = json_is_object(tparams) ? json_copy(tparams) : json_object();
        strbuf payload;
        sb_init(&payload, NSBOX_FRAME_MAX_PAYLOAD);
        /* file contents travel as bytes on the agent link: decode here, once */
        json_t *b64 = json_object_get(p, "content_b64");
        if (!strcmp(canon, "write_file") && json_is_string(b64)) {
                int r = b64_decode(json_string_value(b64), json_string_length(b64), &payload);
                if (r < 0) {
                        json_decref(p);
                        sb_release(&payload);
                        reply_error(c, id, RPC_INVALID_PARAMS, r == -E2BIG ? "too_large" : "invalid_argument",
                                    r == -E2BIG ? "write_file: content larger than %u bytes" : "write_file: 'content_b64' is not valid base64%.0u",
                                    NSBOX_FRAME_MAX_PAYLOAD);
                        return;
                }
                json_object_del(p, "content_b64");
                if (payload.len == 0) /* an empty file: no payload to carry it */
                        json_object_set_new(p, "content", json_string(""));
                else if (json_object_get(p, "content") || json_object_get(p, "data")) {
                        json_decref(p);
                        sb_release(&payload);
                        reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "write_file: give one of 'content', 'content_b64' and 'data'");
                        return;
                }
        }
        bool is_exec = !strcmp(canon, "exec");
        /* the agent streams output chunks as events exactly when this call forwards them */
        if (is_exec)
                json_object_set_new(p, "stream", json_boolean(json_is_true(stream)));
        const char *enc = json_string_value(json_object_get(p, "encoding"));
        bool b64_payload = !strcmp(canon, "read_file") && enc && !strcmp(enc, "base64");
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
        pc->rpc_id = json_incref(id ? id : json_null());
        pc->stream = json_is_true(stream);
        pc->exec = is_exec;
        pc->pids_limited = is_exec ? nsbox_cgroup_pids_limited(&s->sb.cg) : 0;
        pc->b64_payload = b64_payload;
        pc->next = s->calls;
        s->calls = pc;
        s->n_calls++;
}

static void handle_request(daemon_state *d, client *c, const char *line, size_t len)
{
        json_error_t je;
        json_t *msg = nsbox_json_loadb(line, len, &je);
        if (!msg) {
                reply_error(c, json_null(), RPC_PARSE_ERROR, "invalid_argument", "malformed JSON: %s", je.text);
                return;
        }
        json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method"), *params = json_object_get(msg, "params");
        if (!json_is_object(msg) || !json_is_string(method) || (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id)) ||
            strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ? json_string_value(json_object_get(msg, "jsonrpc")) : "", "2.0")) {
                reply_error(c, json_is_string(id) || json_is_integer(id) ? id : json_null(), RPC_INVALID_REQUEST, "invalid_argument",
                            "not a JSON-RPC 2.0 request (expected {\"jsonrpc\": \"2.0\", \"id\": ..., \"method\": ..., \"params\": {...}})");
                json_decref(msg);
                return;
        }
        if (params && !json_is_object(params)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "'params' must be an object");
                json_decref(msg);
                return;
        }
        json_t *empty = json_object();
        if (!params)
                params = empty;
        const char *m = json_string_value(method);
        if (!strcmp(m, "create"))
                method_create(d, c, id, params);
        else if (!strcmp(m, "call"))
                method_call(d, c, id, params);
        else if (!strcmp(m, "list"))
                method_list(d, c, id);
        else if (!strcmp(m, "destroy"))
                method_destroy(d, c, id, params);
        else if (!strcmp(m, "pause") || !strcmp(m, "resume"))
                method_pause(d, c, id, params, !strcmp(m, "pause"));
        else if (!strcmp(m, "ping"))
                reply_result(c, id, json_pack("{ss si si}", "version", NSBOX_VERSION, "pid", (int)getpid(), "uid", (int)geteuid()));
        else if (!strcmp(m, "tools")) {
                const char *fmt = json_string_value(json_object_get(params, "format"));
                json_t *t = tool_schemas(fmt ? fmt : "json");
                if (t)
                        reply_result(c, id, json_pack("{so}", "tools", t));
                else
                        reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "tools: 'format' must be json, openai or mcp");
        } else
                reply_error(c, id, RPC_METHOD_NOT_FOUND, "not_found", "unknown method '%.100s'", m);
        json_decref(empty);
        json_decref(msg);
}

/* ---- agent frames ----------------------------------------------------------------------------- */

static void agent_frame(daemon_state *d, sandbox *s, nsbox_frame *f)
{
        json_t *jid = f->json ? json_object_get(f->json, "id") : NULL;
        if (!json_is_integer(jid)) {
                logf_("sandbox %s: agent sent a frame without an id: %s", s->id,
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
        json_t *result = json_object_get(f->json, "result"), *error = json_object_get(f->json, "error");
        /* a fork refused at the sandbox's pids limit while the command ran: say so */
        const char *reason = json_string_value(json_object_get(result, "reason"));
        if (p->exec && reason && strcmp(reason, "timed_out") && nsbox_cgroup_pids_limited(&s->sb.cg) > p->pids_limited)
                json_object_set_new(result, "reason", json_string("pids_limited"));
        if (json_is_object(result)) {
                if (p->b64_payload) {
                        size_t n = f->payload_len;
                        char *enc = malloc(b64_encoded_len(n) + 1);
                        if (enc) {
                                b64_encode(f->payload ? f->payload : "", n, enc);
                                json_object_set_new(result, "content", json_stringn_nocheck(enc, b64_encoded_len(n)));
                                free(enc);
                        }
                }
                reply_result(c, p->rpc_id, json_incref(result));
        } else {
                const char *code = json_string_value(json_object_get(error, "code"));
                const char *msg = json_string_value(json_object_get(error, "message"));
                reply_error(c, p->rpc_id, RPC_SERVER_ERROR, code ? code : "internal", "%.900s", msg ? msg : "the agent gave no result");
        }
        json_decref(p->rpc_id);
        free(p);
}

/* The agent is gone: destroyed from inside (the OOM killer takes the whole sandbox, memory.oom.group)
 * or killed.  The commands running get their result, the other calls an error. */
static void sandbox_died(daemon_state *d, sandbox *s)
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
                reply_result(client_by_serial(d, p->client), p->rpc_id,
                             json_pack("{si si ss sb sb sb ss ss}", "exit_code", 128 + SIGKILL, "signal", SIGKILL, "reason", "oom_killed",
                                       "oom_killed", 1, "timed_out", 0, "truncated", 0, "stdout", "", "stderr", ""));
                json_decref(p->rpc_id);
                free(p);
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
                        logf_("sandbox %s: agent sent an oversized frame, ignored", s->id);
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

static void sync_readable(daemon_state *d, sandbox *s)
{
        nsbox_error err = { 0 };
        int r = nsbox_sandbox_read_ready(&s->sb, &err);
        if (r == 0)
                return;
        if (r < 0) {
                char msg[1024];
                snprintf(msg, sizeof(msg), "failed to start: %s", err.msg ? err.msg : "unknown error");
                nsbox_error_clear(&err);
                json_t *rid = steal_pointer(&s->create_rpc_id);
                client *c = client_by_serial(d, s->create_client);
                reply_error(c, rid, RPC_SERVER_ERROR, "internal", "create: %s", msg + strlen("failed to start: "));
                json_decref(rid);
                sandbox_remove(d, s, "internal", msg);
                return;
        }
        /* syncfd was closed by read_ready (epoll forgets a closed fd by itself) */
        s->ready = true;
        client *c = client_by_serial(d, s->create_client);
        if (!c) { /* whoever asked for it is gone: nobody would ever destroy it */
                sandbox_remove(d, s, "not_found", "was abandoned by its creator");
                return;
        }
        logf_("sandbox %s created for uid %u (agent pid %d)", s->id, (unsigned)s->owner, (int)s->sb.pid);
        reply_result(c, s->create_rpc_id, sandbox_json(s));
        json_decref(s->create_rpc_id);
        s->create_rpc_id = NULL;
}

/* ---- clients -------------------------------------------------------------------------------- */

static void client_remove(daemon_state *d, client *c)
{
        for (client **pp = &d->clients; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        d->n_clients--;
        /* its calls in flight: answers are dropped; commands it was waiting for are stopped */
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
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        sb_release(&c->in);
        nsbox_queue_release(&c->out);
        free(c);
}

static void client_readable(daemon_state *d, client *c)
{
        char buf[65536];
        for (int round = 0; round < 64 && c->out.len < CLIENT_HIGH; round++) {
                ssize_t n = read(c->fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        c->eof = true;
                        return;
                }
                size_t at = 0;
                while (at < (size_t)n) {
                        char *nl = memchr(buf + at, '\n', (size_t)n - at);
                        size_t piece = nl ? (size_t)(nl - (buf + at)) : (size_t)n - at;
                        if (!c->discarding && sb_append(&c->in, buf + at, piece) < 0) {
                                c->discarding = true;
                                c->in.len = 0;
                        }
                        at += piece + (nl ? 1 : 0);
                        if (!nl)
                                break;
                        if (c->discarding) {
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "too_large", "request larger than %u bytes", MAX_LINE);
                                c->discarding = false;
                        } else if (c->in.len > 0) {
                                handle_request(d, c, c->in.buf, c->in.len);
                        }
                        c->in.len = 0;
                        if (c->in.alloc > (1u << 20)) { /* do not keep a large request's buffer */
                                sb_release(&c->in);
                                sb_init(&c->in, MAX_LINE);
                        }
                }
        }
}

static void accept_clients(daemon_state *d)
{
        for (;;) {
                int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                struct ucred cred;
                socklen_t len = sizeof(cred);
                client *c = NULL;
                if (d->n_clients >= MAX_CLIENTS || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
                    !(c = calloc(1, sizeof(*c)))) {
                        close(fd);
                        continue;
                }
                /* the socket is 0600, but the directory or a bind could be shared: check anyway */
                if (cred.uid != geteuid() && cred.uid != 0) {
                        logf_("refused a client of uid %u", (unsigned)cred.uid);
                        close(fd);
                        free(c);
                        continue;
                }
                c->fd = fd;
                c->uid = cred.uid;
                c->serial = ++d->next_serial;
                sb_init(&c->in, MAX_LINE);
                if (nsbox_epoll_add(d->epfd, fd, KEY(c->serial, K_CLIENT), &c->events, EPOLLIN) < 0) {
                        close(fd);
                        sb_release(&c->in);
                        free(c);
                        continue;
                }
                c->next = d->clients;
                d->clients = c;
                d->n_clients++;
        }
}

/* ---- the loop -------------------------------------------------------------------------------- */

static void send_pause(sandbox *s, pending *p, bool pause)
{
        json_t *req = json_pack("{sI ss s{sI sb}}", "id", ++s->next_agent_id, "tool", "pause", "params", "id", p->agent_id, "pause", pause);
        if (req && nsbox_frame_append(&s->out, req, NULL, 0) == 0)
                p->paused = pause;
        json_decref(req);
}

static void update_interest(daemon_state *d)
{
        for (client *c = d->clients; c; c = c->next) {
                if (c->out.len > CLIENT_HARD && !c->eof) {
                        logf_("disconnecting a client of uid %u: %zu bytes of replies unread", (unsigned)c->uid, c->out.len);
                        c->eof = true;
                }
                nsbox_epoll_set(d->epfd, c->fd, KEY(c->serial, K_CLIENT), &c->events,
                       (c->out.len < CLIENT_HIGH ? EPOLLIN : 0) | (c->out.len ? EPOLLOUT : 0));
        }
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

static int deadlines(daemon_state *d)
{
        uint64_t now = now_ns(), next = 0;
        for (sandbox *s = d->sandboxes, *nx; s; s = nx) {
                nx = s->next;
                if (s->expires_ns && now >= s->expires_ns) {
                        sandbox_remove(d, s, "timeout", "reached its timeout and was destroyed");
                        continue;
                }
                if (!s->ready && now >= s->ready_deadline_ns) {
                        sandbox_remove(d, s, "timeout", "did not become ready");
                        continue;
                }
                uint64_t t = !s->ready ? s->ready_deadline_ns : s->expires_ns;
                if (t && (!next || t < next))
                        next = t;
        }
        if (!next)
                return -1;
        return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

static int listen_on(const char *path, nsbox_error *err)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return nsbox_err(err, errno, "socket");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        unlink(path); /* stale: we hold the lock, so no daemon serves it */
        mode_t old = umask(0077);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 128) < 0) {
                int e = errno;
                close(fd);
                return nsbox_err(err, e, "listen on '%s'", path);
        }
        return fd;
}

int nsbox_daemon_run(const nsbox_daemon_config *cfg, nsbox_error *err)
{
        nsbox_paths paths = { 0 };
        int r = nsbox_paths_get(true, &paths, err);
        if (r < 0)
                return r;
        const char *sock = cfg->socket_path ? cfg->socket_path : paths.socket;
        _cleanup_free_ char *lock = NULL;
        if (asprintf(&lock, "%s.lock", sock) < 0) {
                nsbox_paths_release(&paths);
                return nsbox_err(err, ENOMEM, "lock path");
        }
        _cleanup_close_ int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock_fd < 0) {
                r = nsbox_err(err, errno, "open lock file '%s'", lock);
                nsbox_paths_release(&paths);
                return r;
        }
        if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
                r = nsbox_err(err, errno == EWOULDBLOCK ? 0 : errno, "another nsboxd is already serving '%s'", sock);
                nsbox_paths_release(&paths);
                return r == -EINVAL ? -EADDRINUSE : r;
        }
        static daemon_state d;
        d.listen_fd = listen_on(sock, err);
        if (d.listen_fd < 0) {
                nsbox_paths_release(&paths);
                return d.listen_fd;
        }
        signal(SIGPIPE, SIG_IGN);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        d.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        d.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (d.sig_fd < 0 || d.epfd < 0 || nsbox_epoll_add(d.epfd, d.listen_fd, KEY(0, K_LISTEN), NULL, EPOLLIN) < 0 ||
            nsbox_epoll_add(d.epfd, d.sig_fd, KEY(0, K_SIGNAL), NULL, EPOLLIN) < 0) {
                r = nsbox_err(err, errno, "set up the event loop");
                nsbox_paths_release(&paths);
                return r;
        }
        if (cfg->ready_fd >= 0) {
                (void)!write(cfg->ready_fd, "1", 1);
                close(cfg->ready_fd);
        }
        logf_("listening on %s", sock);
        /* where sandbox cgroups go, found now: alone in a delegated cgroup, nsboxd moves itself
         * into its leaf before any sandbox exists */
        const char *cg_why = NULL, *cg_parent = nsbox_cgroup_parent(&cg_why);
        if (cg_parent)
                logf_("sandbox cgroups under %s", cg_parent);
        else
                logf_("sandboxes get no cgroup (no limits, no pause): %s", cg_why);
        while (!d.stop) {
                int timeout = deadlines(&d);
                update_interest(&d);
                struct epoll_event ev[64];
                int n = epoll_wait(d.epfd, ev, 64, timeout);
                if (n < 0 && errno != EINTR) {
                        r = nsbox_err(err, errno, "epoll_wait");
                        break;
                }
                for (int i = 0; i < n; i++) {
                        uint64_t key = ev[i].data.u64, serial = key >> 3;
                        switch (key & 7) {
                        case K_LISTEN:
                                accept_clients(&d);
                                break;
                        case K_SIGNAL: {
                                struct signalfd_siginfo si;
                                while (read(d.sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                                        if (si.ssi_signo != SIGHUP)
                                                d.stop = true;
                                break;
                        }
                        case K_CLIENT: {
                                client *c = client_by_serial(&d, serial);
                                if (!c)
                                        break;
                                if (ev[i].events & EPOLLOUT && nsbox_queue_flush(&c->out, c->fd) < 0)
                                        c->eof = true;
                                if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                                        client_readable(&d, c);
                                break;
                        }
                        case K_SYNC:
                        case K_AGENT:
                        case K_PIDFD: {
                                sandbox *s = sandbox_by_serial(&d, serial);
                                if (!s)
                                        break;
                                if ((key & 7) == K_SYNC)
                                        sync_readable(&d, s);
                                else if ((key & 7) == K_PIDFD)
                                        sandbox_died(&d, s);
                                else {
                                        if (ev[i].events & EPOLLOUT && nsbox_queue_flush(&s->out, s->sb.agentfd) < 0) {
                                                sandbox_died(&d, s);
                                                break;
                                        }
                                        if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                                                agent_readable(&d, s);
                                }
                                break;
                        }
                        }
                }
                /* write what is queued now rather than on the next round */
                for (sandbox *s = d.sandboxes, *nx; s; s = nx) {
                        nx = s->next;
                        if (s->out.len && nsbox_queue_flush(&s->out, s->sb.agentfd) < 0)
                                sandbox_remove(&d, s, "internal", "exited");
                }
                for (client *c = d.clients, *nx; c; c = nx) {
                        nx = c->next;
                        if (c->out.len && nsbox_queue_flush(&c->out, c->fd) < 0)
                                c->eof = true;
                        if (c->eof)
                                client_remove(&d, c);
                }
        }
        logf_("stopping: destroying %u sandboxes", d.n_sandboxes);
        while (d.sandboxes)
                sandbox_remove(&d, d.sandboxes, "internal", "was stopped with nsboxd");
        while (d.clients)
                client_remove(&d, d.clients);
        close(d.listen_fd);
        unlink(sock);
        nsbox_paths_release(&paths);
        return r < 0 ? r : 0;
}
