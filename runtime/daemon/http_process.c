/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd's process.Process on nsbox's tools: Start, Connect, List, SendInput, CloseStdin,
 * SendSignal, Update (StreamInput, which the SDKs do not use, is not served).
 *
 * E2B's processes outlive the request that started them, so Start runs a detached exec and
 * follows it with process_connect; both name the process by a tag of nsboxd's own ("e2b.*"),
 * so that the three calls (exec, process_close_stdin unless stdin is wanted, process_connect)
 * go to the agent together and the reader is attached before the command's first output.
 * The reader holds the process (process_connect's hold): a slow client makes the command wait
 * for it, as envd's fan-out does, rather than lose output.
 * The E2B side of a process (its config and its tag, a free string) is kept in the sandbox's
 * s->http "procs", by pid, for List and for selectors by tag; an entry goes when its process
 * is seen to end. */
#include "http.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "../../tools/registry.h"
#include "../connect.h"

#define PROCS_MAX 1024    /* E2B records a sandbox keeps */
#define E2B_TAG_MAX 256
#define PATH_MAX_LEN 4096

enum { M_START, M_CONNECT, M_LIST, M_INPUT, M_CLOSE, M_SIGNAL, M_UPDATE };

typedef struct {
        int method;
        uint64_t exec_id, connect_id, list_id, op_id, wait_id;
        long pid;
        bool pty, begun;
        bool waited;    /* process_wait answered: the process is reaped */
        json_t *record; /* Start: {config, tag?, agent_tag}, recorded once the pid is known */
        json_t *end;    /* the end event, sent once the finished process is reaped */
} pstate;

static uint64_t next_tag;

static void pstate_free(void *p)
{
        pstate *st = p;
        json_decref(st->record);
        json_decref(st->end);
        free(st);
}

static json_t *procs_of(sandbox *s, bool make)
{
        if (!s)
                return NULL;
        if (!s->http && (!make || !(s->http = json_object())))
                return NULL;
        json_t *p = json_object_get(s->http, "procs");
        if (!p && make) {
                p = json_object();
                json_object_set_new(s->http, "procs", p);
        }
        return p;
}

static void forget(hreq *r, long pid)
{
        char key[24];
        snprintf(key, sizeof(key), "%ld", pid);
        json_object_del(procs_of(http_sandbox(r), false), key);
}

/* ---- reading the request ------------------------------------------------------------------------ */

/* A ProcessSelector: {pid} (a number or a decimal string) or {tag}; the pid, or 0 answered. */
static long selector_pid(hreq *r, json_t *m)
{
        json_t *sel = json_object_get(m, "process");
        json_t *pid = json_object_get(sel, "pid"), *tag = json_object_get(sel, "tag");
        if (!json_is_object(sel) || !pid == !tag) {
                envd_error(r, "invalid_argument", "'process' must be {\"pid\": N} or {\"tag\": \"...\"}");
                return 0;
        }
        if (pid) {
                json_int_t v = -1;
                char *end;
                if (json_is_integer(pid))
                        v = json_integer_value(pid);
                else if (json_is_string(pid) && *json_string_value(pid)) {
                        v = strtoll(json_string_value(pid), &end, 10);
                        if (*end)
                                v = -1;
                }
                if (v < 1 || v > INT32_MAX) {
                        envd_error(r, "invalid_argument", "'process.pid' must be a process id (1 to 2147483647)");
                        return 0;
                }
                return (long)v;
        }
        const char *t = json_string_value(tag);
        if (!t) {
                envd_error(r, "invalid_argument", "'process.tag' must be a string");
                return 0;
        }
        const char *k;
        json_t *v;
        json_object_foreach(procs_of(http_sandbox(r), false), k, v) {
                const char *vt = json_string_value(json_object_get(v, "tag"));
                if (vt && !strcmp(vt, t))
                        return strtol(k, NULL, 10);
        }
        envd_error(r, "not_found", "process with tag '%.256s' not found", t);
        return 0;
}

/* PTY {size: {cols, rows}} as exec's pty {cols, rows}; NULL with *bad when it is not one. */
static json_t *pty_size(json_t *pty, bool *bad)
{
        json_t *size = json_object_get(pty, "size");
        json_int_t cols = 80, rows = 24;
        *bad = !json_is_object(pty) || (size && !json_is_object(size));
        json_t *c = json_object_get(size, "cols"), *w = json_object_get(size, "rows");
        if (c)
                cols = json_is_integer(c) ? json_integer_value(c) : -1;
        if (w)
                rows = json_is_integer(w) ? json_integer_value(w) : -1;
        if (*bad || cols < 1 || cols > 1000 || rows < 1 || rows > 1000) {
                *bad = true;
                return NULL;
        }
        return json_pack("{sI sI}", "cols", cols, "rows", rows);
}

static bool string_map(json_t *o)
{
        const char *k;
        json_t *v;
        if (!json_is_object(o))
                return false;
        json_object_foreach(o, k, v) {
                if (!json_is_string(v) || !*k || strchr(k, '='))
                        return false;
        }
        return true;
}

/* ProcessConfig: checked, and kept as E2B gave it ({cmd, args, envs, cwd}). */
static json_t *read_config(hreq *r, json_t *m)
{
        json_t *p = json_object_get(m, "process");
        json_t *cmd = json_object_get(p, "cmd"), *args = json_object_get(p, "args"), *envs = json_object_get(p, "envs"),
               *cwd = json_object_get(p, "cwd");
        if (!json_is_object(p) || !json_is_string(cmd) || !*json_string_value(cmd)) {
                envd_error(r, "invalid_argument", "'process.cmd' must be a non-empty string");
                return NULL;
        }
        size_t i;
        json_t *v;
        if (args && !json_is_array(args)) {
                envd_error(r, "invalid_argument", "'process.args' must be an array of strings");
                return NULL;
        }
        json_array_foreach(args, i, v) {
                if (!json_is_string(v)) {
                        envd_error(r, "invalid_argument", "'process.args' must be an array of strings");
                        return NULL;
                }
        }
        if (envs && !json_is_null(envs) && !string_map(envs)) {
                envd_error(r, "invalid_argument", "'process.envs' must be an object of strings (names without '=')");
                return NULL;
        }
        if (cwd && !json_is_null(cwd) && (!json_is_string(cwd) || json_string_length(cwd) > PATH_MAX_LEN)) {
                envd_error(r, "invalid_argument", "'process.cwd' must be a path");
                return NULL;
        }
        json_t *c = json_pack("{sO so so}", "cmd", cmd, "args", args ? json_incref(args) : json_array(), "envs",
                              json_is_object(envs) ? json_incref(envs) : json_object());
        if (c && json_is_string(cwd) && *json_string_value(cwd))
                json_object_set(c, "cwd", cwd);
        return c;
}

/* exec's params for a Start: argv, the environment (the sandbox's envVars, HOME and USER, then
 * the request's), the cwd (relative ones in the home), detached, by our tag. */
static json_t *exec_params(hreq *r, json_t *config, json_t *pty, const char *agent_tag)
{
        sandbox *s = http_sandbox(r);
        json_t *argv = json_array(), *env = json_object();
        json_array_append(argv, json_object_get(config, "cmd"));
        json_array_extend(argv, json_object_get(config, "args"));
        json_t *senv = s ? json_object_get(s->http, "envs") : NULL;
        if (string_map(senv))
                json_object_update(env, senv);
        const char *home = envd_home(r);
        json_object_set_new(env, "HOME", json_string(home));
        json_object_set_new(env, "USER", json_string(envd_user_name(r)));
        json_object_update(env, json_object_get(config, "envs"));
        const char *cwd = json_string_value(json_object_get(config, "cwd"));
        char *path = NULL;
        if (asprintf(&path, "%s%s%s", !cwd || *cwd != '/' ? home : "", cwd && *cwd != '/' ? "/" : "", cwd ? cwd : "") < 0)
                path = NULL;
        json_t *x = json_pack("{so so ss sb ss}", "cmd", argv, "env", env, "cwd", path ? path : home, "detach", 1, "tag",
                              agent_tag);
        free(path);
        if (x && pty)
                json_object_set(x, "pty", pty);
        /* Connect-Timeout-Ms is the command's timeout: it is killed then, as envd does */
        const char *to = http_header(r, "Connect-Timeout-Ms");
        char *end;
        unsigned long ms;
        if (x && to && (ms = strtoul(to, &end, 10)) > 0 && !*end && ms <= 86400000ul)
                json_object_set_new(x, "timeout", json_real((double)ms / 1000.0));
        return x;
}

/* ---- events out --------------------------------------------------------------------------------- */

static void send_event(hreq *r, const char *kind, json_t *body)
{
        envd_send(r, json_pack("{s{so}}", "event", kind, body ? body : json_object()));
}

static void begin(hreq *r, pstate *st)
{
        if (st->begun)
                return;
        if (http_stream_begin(r, 200, "application/connect+json") < 0) {
                envd_error(r, "resource_exhausted", "too many streams: %u at once per user", HTTP_STREAMS_PER_UID);
                return;
        }
        st->begun = true;
        send_event(r, "start", json_pack("{sI}", "pid", (json_int_t)st->pid));
}

/* Go's os.ProcessState.String(), which envd reports: "exit status 1", "signal: killed". */
static json_t *end_event(json_t *res)
{
        json_int_t code = json_integer_value(json_object_get(res, "exit_code"));
        json_int_t sig = json_integer_value(json_object_get(res, "signal"));
        char status[96];
        if (sig > 0) {
                const char *name = strsignal((int)sig);
                snprintf(status, sizeof(status), "signal: %s", name ? name : "unknown");
                status[8] = (char)(status[8] >= 'A' && status[8] <= 'Z' ? status[8] + 32 : status[8]);
                code = -1;
        } else {
                snprintf(status, sizeof(status), "exit status %lld", (long long)code);
        }
        json_t *e = json_pack("{sI sb ss}", "exitCode", code, "exited", sig <= 0, "status", status);
        if (e && (code != 0 || sig > 0))
                json_object_set_new(e, "error", json_string(status));
        return e;
}

/* A data event of process_connect: stdout, stderr, or a pty's output (its "pty" events, or
 * stdout for a pty process). */
static void data_event(hreq *r, pstate *st, json_t *params)
{
        const char *ev = json_string_value(json_object_get(params, "event"));
        json_t *b64 = json_object_get(params, "data_b64");
        if (!ev || !json_is_string(b64))
                return;
        const char *kind = !strcmp(ev, "pty") || (st->pty && !strcmp(ev, "stdout")) ? "pty" : !strcmp(ev, "stdout") ? "stdout" : !strcmp(ev, "stderr") ? "stderr" : NULL;
        if (kind)
                send_event(r, "data", json_pack("{sO}", kind, b64));
}

static void finish(hreq *r, pstate *st)
{
        if (st->end)
                send_event(r, "end", json_incref(st->end));
        envd_end(r, NULL, NULL);
}

/* ---- Start and Connect -------------------------------------------------------------------------- */

static void record_start(hreq *r, pstate *st)
{
        json_t *procs = procs_of(http_sandbox(r), true);
        if (!procs || !st->record || json_object_size(procs) >= PROCS_MAX)
                return;
        char key[24];
        snprintf(key, sizeof(key), "%ld", st->pid);
        json_object_set(procs, key, st->record);
}

static void stream_msg(hreq *r, json_t *msg)
{
        pstate *st = r->state;
        json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
        uint64_t call = (uint64_t)json_integer_value(id ? id : json_object_get(params, "call"));
        const char *why, *code = rpc_error_code(msg, &why);
        if (r->stream_end || (r->status && !r->streaming))
                return; /* answered already (an error): the other calls' replies are of no use */
        if (call == st->exec_id) {
                json_t *res = json_object_get(msg, "result");
                if (code) {
                        envd_error(r, envd_code(r, code), "%s", why);
                } else if (!json_is_true(json_object_get(res, "background"))) { /* it could not start */
                        json_t *err = json_object_get(res, "stderr");
                        envd_error(r, "internal", "error starting process: %.400s", json_is_string(err) ? json_string_value(err) : "?");
                } else {
                        st->pid = (long)json_integer_value(json_object_get(res, "pid"));
                        record_start(r, st);
                        begin(r, st);
                }
        } else if (call == st->list_id) { /* Connect: is it there and running? */
                json_t *p, *found = NULL;
                size_t i;
                json_array_foreach(json_object_get(json_object_get(msg, "result"), "processes"), i, p) {
                        if (json_integer_value(json_object_get(p, "pid")) == st->pid && json_is_true(json_object_get(p, "running")))
                                found = p;
                }
                if (code) {
                        envd_error(r, envd_code(r, code), "%s", why);
                } else if (!found) {
                        envd_error(r, "not_found", "process with pid %ld not found", st->pid);
                } else {
                        st->pty = json_is_true(json_object_get(found, "pty"));
                        begin(r, st);
                        json_t *cp = json_pack("{sI sb sb}", "pid", (json_int_t)st->pid, "follow", 1, "hold", 1);
                        st->connect_id = http_call(r, "process_connect", cp, true);
                }
        } else if (call == st->connect_id && params && !id) {
                if (st->begun)
                        data_event(r, st, params);
        } else if (call == st->connect_id) {
                if (!st->begun)
                        return; /* the exec failed: answered already */
                if (code) {
                        envd_end(r, envd_code(r, code), why);
                        return;
                }
                json_t *res = json_object_get(msg, "result");
                if (json_is_true(json_object_get(res, "detached")) && !json_object_get(res, "exit_code")) {
                        envd_end(r, NULL, NULL);
                        return;
                }
                st->end = end_event(res);
                forget(r, st->pid);
                /* reap it (process_list shows it no more), then the end; Start asked already */
                if (!st->wait_id)
                        st->wait_id = http_call(r, "process_wait", json_pack("{sI}", "pid", (json_int_t)st->pid), false);
                else if (st->waited)
                        finish(r, st);
        } else if (call == st->wait_id) {
                st->waited = true;
                if (st->end)
                        finish(r, st);
        }
}

static void stream_tick(hreq *r, uint64_t now)
{
        pstate *st = r->state;
        if (r->deadline_ns && now >= r->deadline_ns) {
                r->deadline_ns = 0;
                r->keepalive_ns = 0;
                envd_error(r, "deadline_exceeded", "the request's deadline (Connect-Timeout-Ms) passed");
                return;
        }
        if (r->keepalive_ns && now >= r->keepalive_ns) {
                r->keepalive_ns = now + r->keepalive_every_ns;
                if (st->begun && !r->stream_end)
                        send_event(r, "keepalive", NULL);
        }
}

static void start(hreq *r, pstate *st, json_t *m)
{
        json_t *config = read_config(r, m);
        if (!config)
                return;
        json_t *pty = json_object_get(m, "pty"), *tag = json_object_get(m, "tag"), *in = json_object_get(m, "stdin");
        json_t *size = NULL;
        bool bad = false;
        if (pty && !json_is_null(pty) && !(size = pty_size(pty, &bad))) {
                json_decref(config);
                envd_error(r, "invalid_argument", "'pty' must be {\"size\": {\"cols\": 1-1000, \"rows\": 1-1000}}");
                return;
        }
        if (size && !tool_spec_find("process_resize")) { /* an agent without ptys would run it without one */
                json_decref(config);
                json_decref(size);
                envd_error(r, "unimplemented", "ptys are not supported by this nsbox (its exec has no pty)");
                return;
        }
        if ((tag && !json_is_null(tag) && (!json_is_string(tag) || json_string_length(tag) > E2B_TAG_MAX)) ||
            (in && !json_is_null(in) && !json_is_boolean(in))) {
                json_decref(config);
                json_decref(size);
                envd_error(r, "invalid_argument", "'tag' must be a string of at most %d bytes and 'stdin' a boolean", E2B_TAG_MAX);
                return;
        }
        /* unique across nsboxd restarts too (a kept sandbox's processes keep their tags) */
        char agent_tag[48];
        snprintf(agent_tag, sizeof(agent_tag), "e2b.%llx.%llu", (unsigned long long)now_ns(), (unsigned long long)++next_tag);
        st->pty = size != NULL;
        st->record = json_pack("{so ss}", "config", config, "agent_tag", agent_tag);
        if (st->record && json_is_string(tag))
                json_object_set(st->record, "tag", tag);
        json_t *x = exec_params(r, json_object_get(st->record, "config"), size, agent_tag);
        json_decref(size);
        envd_stream_timers(r);
        r->on_tick = stream_tick;
        st->exec_id = http_call(r, "exec", x, false);
        /* stdin is on unless asked off (the proto's default); a pty's input is its terminal */
        if (!st->pty && json_is_false(in))
                http_call(r, "process_close_stdin", json_pack("{ss}", "tag", agent_tag), false);
        st->connect_id = http_call(r, "process_connect", json_pack("{ss sb sb}", "tag", agent_tag, "follow", 1, "hold", 1), true);
        /* the reaping wait goes with them: the agent answers it right after the connect's end,
         * saving a round trip; a request that goes first cancels it (the process lives on) */
        st->wait_id = http_call(r, "process_wait", json_pack("{ss}", "tag", agent_tag), false);
}

/* ---- the unary methods -------------------------------------------------------------------------- */

static json_t *list_entry(hreq *r, json_t *p)
{
        json_t *procs = procs_of(http_sandbox(r), false);
        char key[24];
        snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(json_object_get(p, "pid")));
        json_t *rec = json_object_get(procs, key);
        const char *atag = json_string_value(json_object_get(p, "tag"));
        if (rec && (!atag || strcmp(atag, json_string_value(json_object_get(rec, "agent_tag")) ?: ""))) {
                json_object_del(procs, key); /* the pid is another process's now */
                rec = NULL;
        }
        json_t *o = json_pack("{sO}", "pid", json_object_get(p, "pid"));
        if (o && rec)
                json_object_set(o, "config", json_object_get(rec, "config"));
        if (o && rec && json_object_get(rec, "tag"))
                json_object_set(o, "tag", json_object_get(rec, "tag"));
        else if (o && atag && strncmp(atag, "e2b.", 4))
                json_object_set_new(o, "tag", json_string(atag));
        if (o && !rec) { /* one nsbox started otherwise: its command line, split at spaces */
                const char *cmd = json_string_value(json_object_get(p, "command")) ?: "";
                json_t *args = json_array();
                size_t n = strcspn(cmd, " ");
                for (const char *q = cmd + n; *q;) {
                        q += strspn(q, " ");
                        size_t w = strcspn(q, " ");
                        if (w)
                                json_array_append_new(args, json_stringn(q, w));
                        q += w;
                }
                json_object_set_new(o, "config", json_pack("{ss# so s{}}", "cmd", cmd, (int)n, "args", args, "envs"));
        }
        return o;
}

static void unary_msg(hreq *r, json_t *msg)
{
        pstate *st = r->state;
        json_t *id = json_object_get(msg, "id");
        if (!id || (uint64_t)json_integer_value(id) != st->op_id)
                return;
        const char *why, *code = rpc_error_code(msg, &why);
        json_t *res = json_object_get(msg, "result");
        if (code) {
                envd_error(r, envd_code(r, code), "%s", why);
                return;
        }
        if (st->method == M_SIGNAL && !json_is_true(json_object_get(res, "signaled"))) {
                envd_error(r, "not_found", "process with pid %ld not found", st->pid);
                return;
        }
        if (st->method != M_LIST) {
                envd_answer(r, json_object());
                return;
        }
        json_t *out = json_array(), *p;
        size_t i;
        json_array_foreach(json_object_get(res, "processes"), i, p) {
                if (json_is_true(json_object_get(p, "running")) && json_integer_value(json_object_get(p, "pid")) > 0)
                        json_array_append_new(out, list_entry(r, p));
        }
        /* records of processes no longer running go */
        json_t *procs = procs_of(http_sandbox(r), false), *v;
        const char *k;
        void *tmp;
        json_object_foreach_safe(procs, tmp, k, v) {
                bool live = false;
                json_array_foreach(out, i, p) live |= json_integer_value(json_object_get(p, "pid")) == strtol(k, NULL, 10);
                if (!live)
                        json_object_del(procs, k);
        }
        envd_answer(r, json_pack("{so}", "processes", out));
}

/* bytes as proto3 JSON gives them (standard or URL-safe base64, padded or not), made standard */
static char *std_base64(const char *in, size_t n)
{
        char *o = malloc(n + 4);
        if (!o)
                return NULL;
        size_t i;
        for (i = 0; i < n; i++)
                o[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
        while (i % 4)
                o[i++] = '=';
        o[i] = 0;
        return o;
}

static int signal_of(json_t *v)
{
        const char *s = json_string_value(v);
        json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
        if ((s && !strcmp(s, "SIGNAL_SIGKILL")) || n == 9)
                return SIGKILL;
        if ((s && !strcmp(s, "SIGNAL_SIGTERM")) || n == 15)
                return SIGTERM;
        return 0;
}

static void unary(hreq *r, pstate *st, json_t *m)
{
        if (st->method == M_LIST) {
                st->op_id = http_call(r, "process_list", NULL, false);
                return;
        }
        if (!(st->pid = selector_pid(r, m)))
                return;
        json_t *p = json_pack("{sI}", "pid", (json_int_t)st->pid);
        const char *tool = NULL;
        if (st->method == M_INPUT) {
                json_t *in = json_object_get(m, "input");
                json_t *b = json_object_get(in, "stdin") ?: json_object_get(in, "pty");
                if (!json_is_object(in) || !json_is_string(b) || (json_object_get(in, "stdin") && json_object_get(in, "pty"))) {
                        json_decref(p);
                        envd_error(r, "invalid_argument", "'input' must be {\"stdin\": BASE64} or {\"pty\": BASE64}");
                        return;
                }
                char *b64 = std_base64(json_string_value(b), json_string_length(b));
                json_object_set_new(p, "data_b64", b64 ? json_string(b64) : json_null());
                free(b64);
                tool = "process_write_stdin";
        } else if (st->method == M_CLOSE) {
                tool = "process_close_stdin";
        } else if (st->method == M_SIGNAL) {
                int sig = signal_of(json_object_get(m, "signal"));
                if (!sig) {
                        json_decref(p);
                        envd_error(r, "invalid_argument", "'signal' must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
                        return;
                }
                json_object_set_new(p, "signal", json_string(sig == SIGKILL ? "KILL" : "TERM"));
                tool = "process_kill";
        } else { /* Update: the pty's size, if any */
                json_t *pty = json_object_get(m, "pty");
                if (!pty || json_is_null(pty)) {
                        json_decref(p);
                        envd_answer(r, json_object());
                        return;
                }
                bool bad;
                json_t *size = pty_size(pty, &bad);
                if (!size) {
                        json_decref(p);
                        envd_error(r, "invalid_argument", "'pty' must be {\"size\": {\"cols\": 1-1000, \"rows\": 1-1000}}");
                        return;
                }
                json_object_update(p, size);
                json_decref(size);
                tool = "process_resize";
        }
        st->op_id = http_call(r, tool, p, false);
}

void process_request(hreq *r, const char *method)
{
        static const struct {
                const char *name;
                int method;
                bool stream;
        } methods[] = {
                { "Start", M_START, true },       { "Connect", M_CONNECT, true },    { "List", M_LIST, false },
                { "SendInput", M_INPUT, false },  { "CloseStdin", M_CLOSE, false },  { "SendSignal", M_SIGNAL, false },
                { "Update", M_UPDATE, false },
        };
        size_t i;
        for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
                if (!strcmp(methods[i].name, method))
                        break;
        if (i == sizeof(methods) / sizeof(methods[0])) {
                envd_error(r, "unimplemented", "process.Process/%.64s is not served%s", method,
                           !strcmp(method, "StreamInput") ? " (client streaming; use SendInput)" : "");
                return;
        }
        if (methods[i].stream != envd_streaming(r)) {
                envd_error(r, "invalid_argument", "process.Process/%s is %s: Content-Type must be %s", method,
                           methods[i].stream ? "server streaming" : "unary", methods[i].stream ? "application/connect+json" : "application/json");
                return;
        }
        json_t *m = envd_message(r);
        if (!m || envd_user(r, NULL) < 0) {
                json_decref(m);
                return;
        }
        pstate *st = calloc(1, sizeof(*st));
        if (!st) {
                json_decref(m);
                envd_error(r, "resource_exhausted", "out of memory");
                return;
        }
        st->method = methods[i].method;
        r->state = st;
        r->state_free = pstate_free;
        r->on_msg = methods[i].stream ? stream_msg : unary_msg;
        if (st->method == M_START) {
                start(r, st, m);
        } else if (st->method == M_CONNECT) {
                if ((st->pid = selector_pid(r, m))) {
                        envd_stream_timers(r);
                        r->on_tick = stream_tick;
                        st->list_id = http_call(r, "process_list", NULL, false);
                }
        } else {
                unary(r, st, m);
        }
        json_decref(m);
}
