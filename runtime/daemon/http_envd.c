/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd, the data plane of a sandbox: the Connect protocol (JSON codec, unary and server
 * streaming) of process.Process (http_process.c) and filesystem.Filesystem (http_fs.c), and
 * /health.  What both services share is here: reading the request message, answering, the
 * stream's envelopes and its end, keepalives, and the user a request acts as. */
#include "http.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "../base64.h"
#include "../connect.h"

bool envd_streaming(hreq *r)
{
        const char *t = http_header(r, "Content-Type");
        return t && !strncmp(t, "application/connect+json", 24);
}

void envd_error(hreq *r, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (r->streaming) { /* the stream has begun: the error is its end */
                envd_end(r, code, msg);
                return;
        }
        json_t *body = json_pack("{ss ss}", "code", code, "message", msg);
        if (envd_streaming(r)) { /* a stream that fails before its first message: one end envelope */
                if (http_stream_begin(r, 200, "application/connect+json") == 0) {
                        envd_end(r, code, msg);
                        json_decref(body);
                        return;
                }
        }
        http_answer_json(r, connect_http_status(code), body);
}

json_t *envd_message(hreq *r)
{
        const char *p = r->body.buf ? r->body.buf : "{}";
        size_t n = r->body.buf ? r->body.len : 2;
        if (envd_streaming(r) && r->body.len) {
                int e = connect_unwrap(r->body.buf, r->body.len, &p, &n);
                if (e < 0) {
                        envd_error(r, e == -EOPNOTSUPP ? "unimplemented" : "invalid_argument", "%s",
                                   e == -EOPNOTSUPP ? "compressed messages are not supported" : "the request is not one Connect envelope");
                        return NULL;
                }
        }
        json_error_t je;
        json_t *m = n ? nsbox_json_loadb(p, n, &je) : json_object();
        if (!json_is_object(m)) {
                json_decref(m);
                envd_error(r, "invalid_argument", "the request message must be a JSON object%s%s", m ? "" : ": ", m ? "" : je.text);
                return NULL;
        }
        return m;
}

int envd_send(hreq *r, json_t *msg)
{
        size_t len = 0;
        char *text = msg ? nsbox_json_dumps(msg, &len) : NULL;
        json_decref(msg);
        if (!text)
                return -ENOMEM;
        int e = connect_envelope(&r->sout, 0, text, len);
        free(text);
        http_wake(r);
        return e;
}

void envd_end(hreq *r, const char *code, const char *message)
{
        if (r->stream_end)
                return;
        if (code && !strcmp(code, "unavailable") && !http_sandbox(r)) {
                /* its sandbox went (killed, or past its timeout): the stream stops as it does when
                 * E2B's VM goes, the connection dropped with no end message, and the SDKs ask
                 * /health (502), then raise their TimeoutError "the sandbox was killed or reached
                 * its end of life while the request was in flight" */
                http_stream_abort(r);
                return;
        }
        json_t *end = code ? json_pack("{s{ss ss}}", "error", "code", code, "message", message ? message : code) : json_object();
        size_t len = 0;
        char *text = end ? nsbox_json_dumps(end, &len) : NULL;
        json_decref(end);
        if (text)
                (void)connect_envelope(&r->sout, CONNECT_END_STREAM, text, len);
        free(text);
        http_stream_end(r);
}

/* A call's error as Connect's code; a call cut short because its sandbox went (killed, or
 * past its timeout) is "unavailable", as a request to a sandbox that is gone is on E2B: the
 * SDKs raise their TimeoutError, whose hint is the sandbox's timeout (a stream under way is
 * dropped instead: envd_end). */
const char *envd_code(hreq *r, const char *nsbox_code)
{
        return http_sandbox(r) ? connect_code_of(nsbox_code) : "unavailable";
}

void envd_answer(hreq *r, json_t *msg)
{
        if (envd_streaming(r)) { /* a unary method asked as a stream: one message, then the end */
                if (http_stream_begin(r, 200, "application/connect+json") < 0) {
                        json_decref(msg);
                        envd_error(r, "resource_exhausted", "too many streams");
                        return;
                }
                envd_send(r, msg);
                envd_end(r, NULL, NULL);
                return;
        }
        http_answer_json(r, 200, msg);
}

/* The policy of a sandbox whose one user is uid 0 (named and with a home), or NULL. */
static const nsbox_policy *root_policy(const sandbox *s)
{
        const nsbox_policy *p = s ? s->policy : NULL;
        return p && p->uid == 0 && p->user_name && p->home ? p : NULL;
}

/* The sandbox's user as E2B names it, and its home (the working directory, where relative paths
 * resolve): "user" and /home/user, or for a sandbox whose user is root, its policy's. */
const char *envd_user_name(hreq *r)
{
        const nsbox_policy *p = root_policy(http_sandbox(r));
        return p ? p->user_name : "user";
}

const char *envd_home(hreq *r)
{
        const nsbox_policy *p = root_policy(http_sandbox(r));
        return p ? p->home : "/home/user";
}

/* A sandbox has one user, its policy's: the name a request gives (none: that user) must be it.
 * "user" is also the E2B SDKs' name for the unprivileged default, so a sandbox whose user is not
 * root answers to it, and one whose user is uid 0 answers to "root" whatever its name.
 * 0, or -EPERM with why written (one line). */
int envd_user_check(hreq *r, const char *who, char *why, size_t n)
{
        const sandbox *s = http_sandbox(r);
        const char *own = s && s->policy && s->policy->user_name ? s->policy->user_name : "user";
        bool root = root_policy(s) != NULL;
        if (!who || !*who || !strcmp(who, own) || !strcmp(who, root ? "root" : "user"))
                return 0;
        if (!strcmp(who, "root"))
                snprintf(why, n,
                         "user 'root': this sandbox's one user is '%s' (a template whose policy's user is uid 0, "
                         "such as nsbox's root policy, runs everything as root: nsbox-policy(5))",
                         own);
        else
                snprintf(why, n, "user '%.64s': this sandbox's one user is '%s'", who, own);
        return -EPERM;
}

/* Authorization: Basic base64("user:") names the user (envd_user_check). */
int envd_user(hreq *r, const char *name)
{
        char who[64] = "";
        const char *auth = http_header(r, "Authorization");
        if (!name && auth && !strncasecmp(auth, "Basic ", 6)) {
                strbuf dec;
                sb_init(&dec, 96);
                size_t n = strlen(auth + 6);
                if (n > 128 || b64_decode(auth + 6, n, &dec) < 0) {
                        sb_release(&dec);
                        envd_error(r, "unauthenticated", "Authorization: Basic must carry base64 of \"user:\"");
                        return -EINVAL;
                }
                snprintf(who, sizeof(who), "%.*s", (int)strcspn(dec.buf ? dec.buf : "", ":"), dec.buf ? dec.buf : "");
                sb_release(&dec);
        } else if (name && *name) {
                snprintf(who, sizeof(who), "%s", name);
        }
        char why[512];
        if (envd_user_check(r, who, why, sizeof(why)) == 0)
                return 0;
        envd_error(r, "unauthenticated", "%s", why);
        return -EPERM;
}

/* The keepalive events of a stream (Keepalive-Ping-Interval, seconds) and its deadline
 * (Connect-Timeout-Ms). */
void envd_stream_timers(hreq *r)
{
        const char *ka = http_header(r, "Keepalive-Ping-Interval"), *to = http_header(r, "Connect-Timeout-Ms");
        uint64_t now = now_ns();
        char *end;
        unsigned long v;
        if (ka && (v = strtoul(ka, &end, 10)) > 0 && !*end && v <= 3600) {
                r->keepalive_every_ns = v * 1000000000ull;
                r->keepalive_ns = now + r->keepalive_every_ns;
        }
        if (to && (v = strtoul(to, &end, 10)) > 0 && !*end && v <= 86400000ul)
                r->deadline_ns = now + v * 1000000ull;
}

void envd_request(hreq *r)
{
        const char *u = r->url;
        if (!strcmp(u, "/health")) {
                http_answer(r, 204, NULL, NULL, 0);
        } else if (strcmp(r->method, "POST")) {
                envd_error(r, "unimplemented", "%s %s: envd's methods are POST", r->method, u);
        } else if (!strncmp(u, "/process.Process/", 17)) {
                process_request(r, u + 17);
        } else if (!strncmp(u, "/filesystem.Filesystem/", 23)) {
                fs_request(r, u + 23);
        } else {
                envd_error(r, "unimplemented", "%s is not a method envd serves", u);
        }
}
