/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libnsbox's public API (include/nsbox.h) on top of the nsboxd client (client.c), or, for a
 * handle opened with NSBOX_IN_PROCESS, of sandboxes of the calling process (inproc.c): JSON
 * texts in and out, so that the header names no jansson type; errors kept on the handle as a
 * stable code and a message.  Only the functions marked NSBOX_API are exported from
 * libnsbox.so. */
#include "../include/nsbox.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base64.h"
#include "client.h"
#include "codes.h"
#include "agentexec.h"
#include "inproc.h"
#include "json.h"
#include "../tools/registry.h"
#include "util.h"

#ifndef NSBOX_VERSION
#define NSBOX_VERSION "0.1.0"
#endif

struct nsbox {
        bool in_process; /* the sandboxes are ours (local), not nsboxd's (cl) */
        bool autostart;  /* for the connection made again after a stopped call */
        nsbox_local local;
        nsbox_client cl;
        char code[64]; /* "" after a success */
        char *msg;
        /* nsbox_cancel, from another thread: under lock, whether a streamed call is in flight
         * and whether it was cancelled; it wakes the call by shutting the connection down, or
         * in process through wakefd (an eventfd) */
        pthread_mutex_t lock;
        bool streaming, cancelled;
        int wakefd;
};


static void clear_error(nsbox *nb)
{
        nb->code[0] = '\0';
        free(nb->msg);
        nb->msg = NULL;
}

static int fail(nsbox *nb, int errnum, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(nsbox *nb, int errnum, const char *code, const char *fmt, ...)
{
        clear_error(nb);
        snprintf(nb->code, sizeof(nb->code), "%s", code);
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&nb->msg, fmt, ap) < 0)
                nb->msg = NULL;
        va_end(ap);
        return -errnum;
}

/* params text -> object ({} for NULL): bad JSON fails before anything is sent. */
static int parse_object(nsbox *nb, const char *what, const char *text, json_t **ret)
{
        if (!text) {
                *ret = json_object();
                return *ret ? 0 : fail(nb, ENOMEM, "internal", "%s: out of memory", what);
        }
        json_error_t je;
        json_t *j = nsbox_json_loadb(text, strlen(text), &je);
        if (!j)
                return fail(nb, EINVAL, "invalid_argument", "%s: not JSON: %s at line %d column %d", what, je.text, je.line,
                            je.column);
        if (!json_is_object(j)) {
                json_decref(j);
                return fail(nb, EINVAL, "invalid_argument", "%s: expected a JSON object", what);
        }
        *ret = j;
        return 0;
}

/* A call to nsboxd that failed (r < 0): with a code, the tool's or the method's error; without,
 * the connection is lost, and closed. */
static int call_failed(nsbox *nb, const char *method, int r, const char *code, nsbox_error *err)
{
        if (code) {
                r = fail(nb, nsbox_code_errno(code), code, "%s", err->msg ? err->msg : "failed");
        } else {
                /* the connection is unusable now: later calls say so at once */
                r = fail(nb, err->errnum ? err->errnum : EPIPE, "internal", "%s: %s", method, err->msg ? err->msg : "failed");
                nsbox_client_close(&nb->cl);
        }
        nsbox_error_clear(err);
        return r;
}

static int not_connected(nsbox *nb, const char *method)
{
        return fail(nb, ENOTCONN, "internal", "%s: not connected to nsboxd (the connection was lost)", method);
}

/* One call to nsboxd; params is taken. */
static int call(nsbox *nb, const char *method, json_t *params, nsbox_client_event_fn ev, void *ud, json_t **ret)
{
        if (nb->cl.fd < 0) {
                json_decref(params);
                return not_connected(nb, method);
        }
        nsbox_error err = { 0 };
        const char *code = NULL;
        int r = nsbox_client_call(&nb->cl, method, params, ev, ud, ret, &code, &err);
        if (r < 0)
                return call_failed(nb, method, r, code, &err);
        clear_error(nb);
        return 0;
}

/* A failure of the in-process mode: the errno of its code, as nsboxd's would get, but for what
 * only nsboxd can do (EOPNOTSUPP). */
static int local_failed(nsbox *nb, int r, const char *code, nsbox_error *err)
{
        code = code ? code : "internal";
        r = fail(nb, r == -EOPNOTSUPP ? EOPNOTSUPP : nsbox_code_errno(code), code, "%s", err->msg ? err->msg : "failed");
        nsbox_error_clear(err);
        return r;
}

/* One tool call of the in-process mode; params is taken.  1: on_event stopped it. */
static int local_call(nsbox *nb, const char *id, const char *tool, json_t *params, bool stream, nsbox_local_event_fn on_event,
                      void *userdata, int wakefd, json_t **ret)
{
        nsbox_error err = { 0 };
        const char *code = NULL;
        int r = nsbox_local_call(&nb->local, id, tool, params, stream, on_event, userdata, wakefd, ret, &code, &err);
        json_decref(params);
        if (r < 0)
                return local_failed(nb, r, code, &err);
        clear_error(nb);
        return r;
}

static int dump(nsbox *nb, json_t *result, char **ret)
{
        char *text = json_dumps(result, JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_ENCODE_ANY);
        if (!text)
                return fail(nb, ENOMEM, "internal", "out of memory");
        *ret = text;
        return 0;
}

#define CHECK_ARG(nb, cond, what)                                                                       \
        do {                                                                                            \
                if (!(cond))                                                                            \
                        return fail(nb, EINVAL, "invalid_argument", "%s: %s must not be NULL", __func__, what); \
        } while (0)

NSBOX_API const char *nsbox_version(void)
{
        return NSBOX_VERSION;
}

NSBOX_API int nsbox_connect(unsigned flags, nsbox **ret)
{
        if (!ret)
                return -EINVAL;
        nsbox *nb = calloc(1, sizeof(*nb));
        *ret = nb;
        if (!nb)
                return -ENOMEM;
        nb->cl.fd = -1;
        nb->wakefd = -1;
        pthread_mutex_init(&nb->lock, NULL);
        nb->autostart = !(flags & NSBOX_CONNECT_NO_AUTOSTART);
        if (flags & ~(NSBOX_CONNECT_NO_AUTOSTART | NSBOX_IN_PROCESS))
                return fail(nb, EINVAL, "invalid_argument", "nsbox_connect: unknown flags 0x%x", flags);
        nsbox_error err = { 0 };
        if (flags & NSBOX_IN_PROCESS) { /* nothing to reach: sandboxes start at nsbox_create */
                nb->in_process = true;
                /* their agent program, opened once for the process (agentexec.h) */
                int r = nsbox_agent_program_open(&err);
                if (r < 0) {
                        r = fail(nb, -r, "unavailable", "%s", err.msg);
                        nsbox_error_clear(&err);
                        return r;
                }
                nb->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (nb->wakefd < 0) {
                        int e = errno;
                        return fail(nb, e, "internal", "nsbox_connect: eventfd: %s", strerror(e));
                }
                return 0;
        }
        int r = nsbox_client_connect(!(flags & NSBOX_CONNECT_NO_AUTOSTART), &nb->cl, &err);
        if (r < 0) {
                nb->cl.fd = -1;
                r = fail(nb, err.errnum ? err.errnum : -r, "unavailable", "%s", err.msg ? err.msg : "connect to nsboxd");
                nsbox_error_clear(&err);
                return r;
        }
        return 0;
}

NSBOX_API void nsbox_close(nsbox *nb)
{
        if (!nb)
                return;
        nsbox_local_close(&nb->local);
        nsbox_client_close(&nb->cl);
        if (nb->wakefd >= 0)
                close(nb->wakefd);
        pthread_mutex_destroy(&nb->lock);
        clear_error(nb);
        free(nb);
}

NSBOX_API const char *nsbox_error_code(const nsbox *nb)
{
        return nb && nb->code[0] ? nb->code : NULL;
}

NSBOX_API const char *nsbox_error_message(const nsbox *nb)
{
        return nb && nb->code[0] ? (nb->msg ? nb->msg : nb->code) : NULL;
}

NSBOX_API int nsbox_request(nsbox *nb, const char *method, const char *params_json, char **ret_result)
{
        if (!nb)
                return -EINVAL;
        CHECK_ARG(nb, method, "method");
        CHECK_ARG(nb, ret_result, "ret_result");
        json_t *params = NULL, *res = NULL;
        int r = parse_object(nb, method, params_json, &params);
        if (r == 0 && nb->in_process && !strcmp(method, "tools")) { /* the schemas are data of the library's own */
                const char *fmt = json_string_value(json_object_get(params, "format"));
                json_t *t = tool_schemas(fmt ? fmt : "json");
                json_decref(params);
                if (!t)
                        return fail(nb, EINVAL, "invalid_argument", "tools: 'format' must be json, openai or mcp");
                res = json_pack("{so}", "tools", t);
                r = res ? 0 : fail(nb, ENOMEM, "internal", "tools: out of memory");
                if (r == 0)
                        clear_error(nb);
        } else if (r == 0 && nb->in_process) {
                json_decref(params);
                r = fail(nb, EOPNOTSUPP, "unavailable", "%.100s: a method of nsboxd; an in-process handle has none but tools (see libnsbox(3))",
                         method);
        } else if (r == 0) {
                r = call(nb, method, params, NULL, NULL, &res);
        }
        if (r == 0)
                r = dump(nb, res, ret_result);
        json_decref(res);
        return r;
}

NSBOX_API int nsbox_create(nsbox *nb, const char *options_json, char **ret_id)
{
        if (!nb)
                return -EINVAL;
        CHECK_ARG(nb, ret_id, "ret_id");
        json_t *params = NULL, *res = NULL;
        int r = parse_object(nb, "create", options_json, &params);
        if (r == 0 && nb->in_process) {
                char id[NSBOX_ID_SIZE];
                nsbox_error err = { 0 };
                const char *code = NULL;
                r = nsbox_local_create(&nb->local, params, id, &code, &err);
                json_decref(params);
                if (r < 0)
                        return local_failed(nb, r, code, &err);
                char *copy = strdup(id);
                if (!copy) {
                        nsbox_local_destroy(&nb->local, id, id, &code, NULL);
                        return fail(nb, ENOMEM, "internal", "create: out of memory");
                }
                clear_error(nb);
                *ret_id = copy;
                return 0;
        }
        if (r == 0)
                r = call(nb, "create", params, NULL, NULL, &res);
        if (r == 0) {
                const char *id = json_string_value(json_object_get(res, "id"));
                char *copy = id ? strdup(id) : NULL;
                if (copy)
                        *ret_id = copy;
                else
                        r = fail(nb, id ? ENOMEM : EIO, "internal", "create: %s", id ? "out of memory" : "nsboxd's reply has no id");
        }
        json_decref(res);
        return r;
}

NSBOX_API int nsbox_destroy(nsbox *nb, const char *id)
{
        if (!nb)
                return -EINVAL;
        CHECK_ARG(nb, id, "id");
        if (nb->in_process) {
                char full[NSBOX_ID_SIZE];
                nsbox_error err = { 0 };
                const char *code = NULL;
                int r = nsbox_local_destroy(&nb->local, id, full, &code, &err);
                if (r < 0)
                        return local_failed(nb, r, code, &err);
                clear_error(nb);
                return 0;
        }
        json_t *res = NULL;
        int r = call(nb, "destroy", json_pack("{ss}", "sandbox", id), NULL, NULL, &res);
        json_decref(res);
        return r;
}

NSBOX_API int nsbox_call(nsbox *nb, const char *id, const char *tool, const char *params_json, char **ret_result)
{
        if (!nb)
                return -EINVAL;
        CHECK_ARG(nb, id, "id");
        CHECK_ARG(nb, tool, "tool");
        CHECK_ARG(nb, ret_result, "ret_result");
        json_t *params = NULL, *res = NULL;
        int r = parse_object(nb, tool, params_json, &params);
        if (r == 0 && nb->in_process)
                r = local_call(nb, id, tool, params, false, NULL, NULL, -1, &res);
        else if (r == 0)
                r = call(nb, "call", json_pack("{ss ss so}", "sandbox", id, "tool", tool, "params", params), NULL, NULL, &res);
        if (r == 0)
                r = dump(nb, res, ret_result);
        json_decref(res);
        return r;
}

NSBOX_API int nsbox_call_fd(nsbox *nb, const char *id, const char *tool, const char *params_json, int fd, char **ret_result)
{
        if (!nb)
                return -EINVAL;
        CHECK_ARG(nb, id, "id");
        CHECK_ARG(nb, tool, "tool");
        CHECK_ARG(nb, ret_result, "ret_result");
        if (fd < 0)
                return fail(nb, EINVAL, "invalid_argument", "%s: fd must be a pipe", tool);
        json_t *params = NULL, *res = NULL;
        int r = parse_object(nb, tool, params_json, &params);
        if (r == 0 && json_object_set_new(params, "fd", json_true()) < 0)
                r = fail(nb, ENOMEM, "internal", "%s: out of memory", tool);
        if (r == 0 && nb->in_process) {
                nsbox_error err = { 0 };
                const char *code = NULL;
                r = nsbox_local_call_fd(&nb->local, id, tool, params, fd, &res, &code, &err);
                r = r < 0 ? local_failed(nb, r, code, &err) : (clear_error(nb), 0);
        } else if (r == 0 && nb->cl.fd < 0) {
                r = not_connected(nb, "call");
        } else if (r == 0) {
                nsbox_error err = { 0 };
                const char *code = NULL;
                r = nsbox_client_call_fd(&nb->cl, "call", json_pack("{ss ss sO}", "sandbox", id, "tool", tool, "params", params), fd, &res,
                                         &code, &err);
                r = r < 0 ? call_failed(nb, "call", r, code, &err) : (clear_error(nb), 0);
        }
        json_decref(params);
        if (r == 0)
                r = dump(nb, res, ret_result);
        json_decref(res);
        return r;
}

struct exec_stream {
        nsbox_output_fn fn;
        void *userdata;
        strbuf bytes;
};

/* exec's stream of an output event: 1 stdout (or a terminal's one stream), 2 stderr, else 0 */
static int output_stream(const char *event)
{
        return !strcmp(event, "stdout") || !strcmp(event, "pty") ? 1 : !strcmp(event, "stderr") ? 2 : 0;
}

/* An event of the running exec, in process: its payload is the chunk already. */
static bool on_local_output(const char *event, json_t *frame, const void *data, size_t len, void *userdata)
{
        (void)frame;
        struct exec_stream *st = userdata;
        int stream = output_stream(event);
        if (st->fn && stream && len)
                st->fn(stream, data, len, st->userdata);
        return false;
}

/* An event notification of the running exec: decode its chunk and hand it on. */
static void on_event(json_t *params, void *userdata)
{
        struct exec_stream *st = userdata;
        const char *event = json_string_value(json_object_get(params, "event"));
        json_t *data = json_object_get(params, "data_b64");
        if (!st->fn || !event || !json_is_string(data))
                return;
        int stream = output_stream(event);
        if (!stream)
                return;
        st->bytes.len = 0;
        if (b64_decode(json_string_value(data), json_string_length(data), &st->bytes) < 0)
                return; /* nsboxd sends valid base64; a chunk that is not is not the command's output */
        if (st->bytes.len)
                st->fn(stream, st->bytes.buf, st->bytes.len, st->userdata);
}

NSBOX_API int nsbox_exec(nsbox *nb, const char *id, const char *params_json, nsbox_output_fn on_output, void *userdata,
                         int *ret_exit_code, char **ret_result)
{
        if (!nb)
                return -EINVAL;
        CHECK_ARG(nb, id, "id");
        CHECK_ARG(nb, params_json, "params_json");
        json_t *params = NULL, *res = NULL;
        int r = parse_object(nb, "exec", params_json, &params);
        if (r < 0)
                return r;
        struct exec_stream st = { .fn = on_output, .userdata = userdata };
        if (nb->in_process) {
                r = local_call(nb, id, "exec", params, true, on_local_output, &st, -1, &res);
        } else {
                sb_init(&st.bytes, 0);
                r = call(nb, "call", json_pack("{ss ss so sb}", "sandbox", id, "tool", "exec", "params", params, "stream", 1), on_event,
                         &st, &res);
                sb_release(&st.bytes);
        }
        json_t *code = json_object_get(res, "exit_code");
        if (r == 0 && !json_is_integer(code))
                r = fail(nb, EIO, "internal", "exec: the result has no exit_code");
        char *text = NULL;
        if (r == 0 && ret_result)
                r = dump(nb, res, &text);
        if (r == 0) {
                if (ret_exit_code)
                        *ret_exit_code = (int)json_integer_value(code);
                if (ret_result)
                        *ret_result = text;
        }
        json_decref(res);
        return r;
}

struct call_stream {
        nsbox *nb;
        nsbox_event_fn fn;
        void *userdata;
        bool stop; /* fn asked for it */
};

/* One event to the caller as JSON text, the same in both modes: nsboxd's event params without
 * "call".  An event that cannot be written (out of memory) is not passed on. */
static void deliver(struct call_stream *st, json_t *ev)
{
        size_t len = 0;
        char *text = ev ? nsbox_json_dumps(ev, &len) : NULL;
        json_decref(ev);
        if (!text)
                return;
        if (st->fn(text, len, st->userdata) != 0) {
                st->stop = true;
                st->nb->cl.stop = true; /* nsboxd's mode: the client gives up on the reply */
        }
        free(text);
}

/* An event notification from nsboxd: params is borrowed. */
static void on_remote_event(json_t *params, void *userdata)
{
        struct call_stream *st = userdata;
        if (!st->fn || st->stop)
                return;
        json_t *ev = json_copy(params);
        if (ev)
                json_object_del(ev, "call");
        deliver(st, ev);
}

/* An event of the agent, in process: what nsboxd would send (runtime/daemon/calls.c). */
static bool on_local_event(const char *event, json_t *frame, const void *data, size_t len, void *userdata)
{
        struct call_stream *st = userdata;
        if (!st->fn || st->stop)
                return st->stop;
        json_t *ev = json_pack("{ss}", "event", event);
        const char *k;
        json_t *v;
        json_object_foreach(frame, k, v) {
                if (ev && strcmp(k, "id") && strcmp(k, "call") && strcmp(k, "data_b64"))
                        json_object_set(ev, k, v);
        }
        char *enc = ev && len ? malloc(b64_encoded_len(len) + 1) : NULL;
        if (enc) {
                b64_encode(data, len, enc);
                json_object_set_new(ev, "data_b64", json_stringn_nocheck(enc, b64_encoded_len(len)));
                free(enc);
        }
        deliver(st, ev);
        return st->stop;
}

/* A stopped call in nsboxd's mode left its reply unread: the connection is closed (nsboxd then
 * cancels the call, as for any client that goes) and made again for the handle's next call. */
static void reconnect(nsbox *nb)
{
        nsbox_client_close(&nb->cl);
        nsbox_error err = { 0 };
        if (nsbox_client_connect(nb->autostart, &nb->cl, &err) < 0)
                nb->cl.fd = -1; /* the next call says the connection was lost */
        nsbox_error_clear(&err);
}

/* The start and the end of a streamed call, for nsbox_cancel: at the end, whether it came. */
static void stream_begin(nsbox *nb)
{
        pthread_mutex_lock(&nb->lock);
        nb->streaming = true;
        nb->cancelled = false;
        uint64_t v;
        if (nb->wakefd >= 0)
                (void)!read(nb->wakefd, &v, sizeof(v)); /* a late cancel of the last call is not this one's */
        pthread_mutex_unlock(&nb->lock);
}

static bool stream_end(nsbox *nb)
{
        pthread_mutex_lock(&nb->lock);
        nb->streaming = false;
        bool c = nb->cancelled;
        pthread_mutex_unlock(&nb->lock);
        return c;
}

NSBOX_API void nsbox_cancel(nsbox *nb)
{
        if (!nb)
                return;
        pthread_mutex_lock(&nb->lock);
        if (nb->streaming && !nb->cancelled) {
                nb->cancelled = true;
                uint64_t one = 1;
                if (nb->in_process)
                        (void)!write(nb->wakefd, &one, sizeof(one)); /* a full counter wakes it all the same */
                else if (nb->cl.fd >= 0)
                        shutdown(nb->cl.fd, SHUT_RDWR); /* its read ends; nsboxd cancels the call as for a client gone */
        }
        pthread_mutex_unlock(&nb->lock);
}

/* The nsboxd half of nsbox_call_stream: params is taken.  The connection stays open until the
 * call is over (call_failed closes it only after stream_end), so that nsbox_cancel never shuts
 * down a descriptor reused meanwhile. */
static int remote_stream(nsbox *nb, const char *id, const char *tool, json_t *params, struct call_stream *st, json_t **ret)
{
        if (nb->cl.fd < 0) {
                json_decref(params);
                return not_connected(nb, "call");
        }
        nsbox_error err = { 0 };
        const char *code = NULL;
        stream_begin(nb);
        int r = nsbox_client_call(&nb->cl, "call", json_pack("{ss ss so sb}", "sandbox", id, "tool", tool, "params", params, "stream", 1),
                                  on_remote_event, st, ret, &code, &err);
        bool cancelled = stream_end(nb);
        nb->cl.stop = false;
        if (st->stop || cancelled) {
                nsbox_error_clear(&err);
                if (r == 0)
                        json_decref(*ret);
                *ret = NULL;
                reconnect(nb);
                clear_error(nb);
                return 1;
        }
        if (r < 0)
                return call_failed(nb, "call", r, code, &err);
        clear_error(nb);
        return 0;
}

NSBOX_API int nsbox_call_stream(nsbox *nb, const char *id, const char *tool, const char *params_json, nsbox_event_fn on_event,
                                void *userdata, char **ret_result)
{
        if (!nb)
                return -EINVAL;
        CHECK_ARG(nb, id, "id");
        CHECK_ARG(nb, tool, "tool");
        json_t *params = NULL, *res = NULL;
        int r = parse_object(nb, tool, params_json, &params);
        if (r < 0)
                return r;
        struct call_stream st = { .nb = nb, .fn = on_event, .userdata = userdata };
        if (nb->in_process) {
                stream_begin(nb);
                r = local_call(nb, id, tool, params, true, on_local_event, &st, nb->wakefd, &res);
                stream_end(nb);
        } else {
                r = remote_stream(nb, id, tool, params, &st, &res);
        }
        if (r == 0 && ret_result)
                r = dump(nb, res, ret_result);
        json_decref(res);
        return r;
}
