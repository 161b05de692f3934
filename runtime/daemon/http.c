/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's HTTP listener (nsboxd --http, http.listen): libmicrohttpd on nsboxd's epoll, the
 * routing of a request to its plane (E2B's control plane, a sandbox's envd, a port inside a
 * sandbox), its authentication (an API key, or a sandbox's access token), and the bridge from
 * an HTTP request to nsboxd's own methods (http.h says how). */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "../base64.h"
#include "../connect.h"
#include "../dlog.h"
#include "../sha256.h"

struct http_state {
        struct MHD_Daemon *mhd;
        int listen_fd;
        hreq *reqs;
        unsigned n_reqs;
        bool dirty; /* replies wait in a client for room in its request's stream */
        bool woke;  /* a request was resumed: MHD_run must see it */
        struct proxy_state *proxy; /* the port proxy (http_proxy.c) */
        uint64_t serial;           /* the last request's */
        uint64_t sig_second_ns;    /* signer(): the second its tries are counted in, and */
        unsigned sig_tries;        /* the signatures computed in it */
};

/* ---- what the services use ------------------------------------------------------------------ */

const char *http_header(hreq *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_arg(hreq *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct proxy_state *http_proxy(daemon_state *d)
{
        return d->http ? d->http->proxy : NULL;
}

void http_kick(daemon_state *d)
{
        if (d->http)
                d->http->woke = true;
}

void http_wake(hreq *r)
{
        if (r->suspended) {
                r->suspended = false;
                r->d->http->woke = true;
                MHD_resume_connection(r->conn);
        }
}

/* The request's client: no socket, acting as the request's user (internal.h, struct client). */
static client *req_client(hreq *r)
{
        if (r->c)
                return r->c;
        client *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->fd = -1;
        c->http = r;
        c->uid = r->uid;
        c->gid = r->gid;
        c->spoke = true;
        c->serial = ++r->d->next_serial;
        c->accepted_ns = now_ns();
        sb_init(&c->in, MAX_LINE);
        c->next = r->d->clients;
        r->d->clients = c;
        r->c = c;
        return c;
}

uint64_t http_rpc(hreq *r, const char *method, json_t *params)
{
        client *c = req_client(r);
        uint64_t id = ++r->next_id;
        json_t *msg = json_pack("{ss sI ss so}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method, "params",
                                params ? params : json_object());
        size_t len = 0;
        char *line = msg ? nsbox_json_dumps(msg, &len) : NULL;
        json_decref(msg);
        if (!c || !line) {
                free(line);
                if (c) /* answered as nsboxd answers what it cannot take */
                        reply_error(c, json_integer((json_int_t)id), RPC_SERVER_ERROR, "internal", "out of memory");
                return id;
        }
        handle_request(r->d, c, line, len);
        free(line);
        r->d->http->dirty = true;
        return id;
}

uint64_t http_call(hreq *r, const char *tool, json_t *tparams, bool stream)
{
        return http_rpc(r, "call", json_pack("{ss ss so sb}", "sandbox", r->sandbox_id, "tool", tool, "params",
                                             tparams ? tparams : json_object(), "stream", stream));
}

uint64_t http_call_bytes(hreq *r, const char *tool, json_t *tparams, const void *bytes, size_t len, bool raw)
{
        client *c = req_client(r);
        uint64_t id = ++r->next_id;
        json_t *jid = json_integer((json_int_t)id);
        json_t *params = json_pack("{ss ss so sb}", "sandbox", r->sandbox_id, "tool", tool, "params", tparams ? tparams : json_object(),
                                   "stream", false);
        if (c && jid && params && r->d->stopping) /* as handle_request refuses it */
                reply_error(c, jid, RPC_SERVER_ERROR, "unavailable", "nsboxd is stopping: 'call' refused");
        else if (c && jid && params)
                method_call_bytes(r->d, c, jid, params, bytes, len, raw);
        else if (c && jid)
                reply_error(c, jid, RPC_SERVER_ERROR, "internal", "out of memory");
        json_decref(params);
        json_decref(jid);
        r->d->http->dirty = true;
        return id;
}

char *http_take_bytes(hreq *r, json_t *msg, size_t *len)
{
        return calls_take_bytes(r->c, json_object_get(msg, "id"), len);
}

void http_answer(hreq *r, unsigned status, const char *type, char *body, size_t len)
{
        free(r->answer);
        r->status = status;
        r->answer = body;
        r->answer_len = body ? len : 0;
        r->answer_type = type;
        http_wake(r);
}

void http_answer_json(hreq *r, unsigned status, json_t *body)
{
        size_t len = 0;
        char *text = body ? nsbox_json_dumps(body, &len) : NULL;
        json_decref(body);
        if (body && !text) {
                http_answer(r, 500, "application/json", strdup("{\"code\":500,\"message\":\"out of memory\"}"), 38);
                return;
        }
        http_answer(r, status, "application/json", text, len);
}

static unsigned count_streams(daemon_state *d, uid_t uid)
{
        unsigned n = 0;
        for (hreq *r = d->http->reqs; r; r = r->next)
                n += r->counted_stream && r->uid == uid;
        return n;
}

int http_stream_begin(hreq *r, unsigned status, const char *type)
{
        if (!r->counted_stream && count_streams(r->d, r->uid) >= HTTP_STREAMS_PER_UID)
                return -EAGAIN;
        r->counted_stream = true;
        r->status = status;
        r->streaming = true;
        r->stream_type = type;
        http_wake(r);
        return 0;
}

int http_stream_write(hreq *r, const void *data, size_t len)
{
        if (r->stream_end)
                return -EPIPE;
        int ret = nsbox_queue_append(&r->sout, data, len);
        http_wake(r);
        return ret;
}

void http_stream_end(hreq *r)
{
        r->stream_end = true;
        http_wake(r);
}

void http_stream_abort(hreq *r)
{
        r->stream_abort = true;
        http_stream_end(r);
}

sandbox *http_sandbox(hreq *r)
{
        for (sandbox *s = r->d->sandboxes; s; s = s->next)
                if (s->serial == r->sandbox)
                        return s;
        return NULL;
}

const char *rpc_error_code(json_t *msg, const char **message)
{
        json_t *e = json_object_get(msg, "error");
        if (!e)
                return NULL;
        if (message)
                *message = json_string_value(json_object_get(e, "message")) ?: "error";
        return json_string_value(json_object_get(json_object_get(e, "data"), "code")) ?: "internal";
}

/* nsbox's stable codes as HTTP statuses */
unsigned http_status_of(const char *code)
{
        static const struct {
                const char *code;
                unsigned status;
        } map[] = {
                { "invalid_argument", 400 }, { "invalid_path", 400 }, { "file_not_found", 404 }, { "not_found", 404 },
                { "permission_denied", 403 }, { "is_directory", 400 }, { "not_a_directory", 400 }, { "too_large", 413 },
                { "timeout", 504 },          { "conflict", 409 },      { "capacity", 429 },       { "unavailable", 503 },
        };
        for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
                if (!strcmp(map[i].code, code))
                        return map[i].status;
        return 500;
}

/* A request with no HTTP connection, for state that outlives HTTP requests (envd's polling
 * watchers): like's sandbox and user, its replies pumped to its on_msg like any request's. */
hreq *http_internal_new(hreq *like)
{
        hreq *r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->d = like->d;
        r->plane = like->plane;
        r->uid = like->uid;
        r->gid = like->gid;
        r->sandbox = like->sandbox;
        memcpy(r->sandbox_id, like->sandbox_id, sizeof(r->sandbox_id));
        r->serial = ++r->d->http->serial;
        r->next = r->d->http->reqs;
        if (r->next)
                r->next->pprev = &r->next;
        r->pprev = &r->d->http->reqs;
        r->d->http->reqs = r;
        return r;
}

hreq *http_req_by_serial(daemon_state *d, uint64_t serial)
{
        for (hreq *r = d->http ? d->http->reqs : NULL; r; r = r->next)
                if (r->serial == serial)
                        return r;
        return NULL;
}

/* Its calls cancelled, as a closed request's.  Not from its own on_msg (http_pump walks the
 * requests): envd's watchers free theirs from fs_reap, after the walk. */
void http_internal_free(hreq *r)
{
        if (!r)
                return;
        *r->pprev = r->next;
        if (r->next)
                r->next->pprev = r->pprev;
        if (r->state_free)
                r->state_free(r->state);
        if (r->c) {
                r->c->http = NULL;
                client_remove(r->d, r->c);
        }
        nsbox_queue_release(&r->sout);
        free(r);
}

/* ---- routing and authentication -------------------------------------------------------------- */

static bool same_secret(const char *a, const char *b, size_t n)
{
        unsigned char diff = 0;
        for (size_t i = 0; i < n; i++)
                diff |= (unsigned char)(a[i] ^ b[i]);
        return diff == 0;
}

/* An API key (X-API-KEY, or Authorization: Bearer) makes r act as the key's user. */
static bool key_auth(hreq *r)
{
        const char *key = http_header(r, "X-API-KEY");
        const char *auth = http_header(r, "Authorization");
        if (!key && auth && !strncasecmp(auth, "Bearer ", 7))
                key = auth + 7;
        if (!key || !apikey_lookup(r->d, key, strlen(key), &r->uid, &r->gid))
                return false;
        r->by_key = true;
        return true;
}

/* envd's signed /files URLs (the SDKs' uploadUrl and downloadUrl): signature is "v1_" and the
 * unpadded base64 of SHA-256("PATH:OPERATION:USERNAME:TOKEN[:EXPIRATION]"), operation "read"
 * for a GET and "write" for a POST, as envd checks them.  1: it opens the request; 0: none
 * given; -EACCES: a wrong one; -ETIME: a right one past its expiration (Unix seconds). */
static int signed_url(hreq *r, sandbox *s)
{
        const char *sig = http_arg(r, "signature"), *exp = http_arg(r, "signature_expiration");
        const char *token = json_string_value(json_object_get(s->http, "token"));
        bool get = !strcmp(r->method, "GET");
        if (!sig || r->port != HTTP_ENVD_PORT || strcmp(r->url, "/files") || (!get && strcmp(r->method, "POST")) || !token ||
            http_header(r, "X-Access-Token"))
                return 0;
        char *end = NULL;
        errno = 0;
        long long until = exp ? strtoll(exp, &end, 10) : 0;
        if (exp && (!*exp || *end || errno))
                return -EACCES;
        const char *path = http_arg(r, "path"), *user = http_arg(r, "username");
        nsbox_sha256 h;
        nsbox_sha256_init(&h);
        const char *parts[] = { path ? path : "", get ? "read" : "write", user ? user : "", token, exp };
        for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]) && parts[i]; i++) {
                if (i)
                        nsbox_sha256_update(&h, ":", 1);
                nsbox_sha256_update(&h, parts[i], strlen(parts[i]));
        }
        uint8_t digest[NSBOX_SHA256_SIZE];
        nsbox_sha256_final(&h, digest);
        char want[3 + 48] = "v1_";
        b64_encode(digest, sizeof(digest), want + 3);
        size_t n = strcspn(want, "="); /* unpadded */
        if (strlen(sig) != n || !same_secret(sig, want, n))
                return -EACCES;
        return exp && until < (long long)time(NULL) ? -ETIME : 1;
}

/* A signed /files URL that names no sandbox (the SDKs' uploadUrl and downloadUrl where one URL
 * serves every sandbox: E2B_SANDBOX_URL): the sandbox whose token signed it, found by trying
 * each, since a signature is only its own sandbox's to make.  Anyone may ask, so the tries are
 * bounded: SIGNER_TRIES a second for the whole nsboxd (one SHA-256 each, about 0.5 us here: a
 * tenth of a CPU at most), past which such requests wait for the next second (-EBUSY).  Its id,
 * with the request on envd's port; NULL and -EACCES when none signed it. */
#define SIGNER_TRIES 200000u
static const char *signer(hreq *r, int *ret)
{
        *ret = 0;
        if (!http_arg(r, "signature") || http_header(r, "X-API-KEY") || strcmp(r->url, "/files"))
                return NULL;
        struct http_state *h = r->d->http;
        uint64_t now = now_ns();
        if (now - h->sig_second_ns >= 1000000000ull) {
                h->sig_second_ns = now;
                h->sig_tries = 0;
        }
        if (h->sig_tries + r->d->n_sandboxes > SIGNER_TRIES) {
                *ret = -EBUSY;
                return NULL;
        }
        r->port = HTTP_ENVD_PORT;
        for (sandbox *s = r->d->sandboxes; s; s = s->next) {
                h->sig_tries++;
                int sig = s->pooled ? 0 : signed_url(r, s);
                if (sig > 0 || sig == -ETIME)
                        return s->sup.id;
        }
        r->port = 0;
        *ret = -EACCES;
        return NULL;
}

/* The data plane's sandbox: E2b-Sandbox-Id and E2b-Sandbox-Port, a PORT-ID.DOMAIN host, or a
 * signed /files URL's signer.  1: found; 0: the control plane; -EINVAL: a bad port; -EACCES:
 * a signature no sandbox made; -EBUSY: too many signers looked for this second. */
static int data_target(hreq *r)
{
        /* Novita's SDK names them Novita-Sandbox-Id and -Port */
        const char *id = http_header(r, "E2b-Sandbox-Id") ?: http_header(r, "Novita-Sandbox-Id");
        if (id && !*id)
                id = NULL; /* an empty header, as a proxy may send: none */
        const char *port = http_header(r, "E2b-Sandbox-Port") ?: http_header(r, "Novita-Sandbox-Port");
        const char *domain = r->d->conf->http_domain, *host = http_header(r, "Host");
        char hostid[NSBOX_ID_SIZE] = "";
        unsigned hostport = 0;
        if (!id && e2b_host_route(host, domain, &hostport, hostid)) {
                id = hostid;
                r->port = hostport;
        }
        int busy;
        if (!id && !(id = signer(r, &busy)))
                return busy;
        if (port) {
                char *end;
                unsigned long p = strtoul(port, &end, 10);
                if (*port < '0' || *port > '9' || *end || p == 0 || p > 65535)
                        return -EINVAL;
                r->port = (unsigned)p;
        } else if (!r->port) {
                r->port = HTTP_ENVD_PORT;
        }
        if (strlen(id) >= sizeof(r->sandbox_id))
                return -ENOENT;
        snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", id);
        return 1;
}

static bool token_is(hreq *r, const char *header, sandbox *s, const char *key)
{
        const char *token = http_header(r, header);
        const char *want = s ? json_string_value(json_object_get(s->http, key)) : NULL;
        return token && want && strlen(token) == strlen(want) && same_secret(token, want, strlen(want));
}

/* Public: made by an E2B create that did not say otherwise (http.public_traffic the default).
 * A sandbox made on nsboxd's socket never asked for E2B's rule: its ports stay private. */
bool http_public_traffic(const sandbox *s)
{
        return json_is_true(json_object_get(s->http, "public"));
}

/* A port other than envd's is public (E2B's allowPublicTraffic, on unless the sandbox or the
 * operator said otherwise): the sandbox's id is what reaches it, as a browser asks for
 * PORT-ID.DOMAIN with no header at all.  Otherwise its traffic token opens it. */
static bool port_open(hreq *r, sandbox *s)
{
        if (r->port == HTTP_ENVD_PORT)
                return false;
        if (http_public_traffic(s))
                return true;
        return token_is(r, "E2B-Traffic-Access-Token", s, "traffic_token");
}

/* A paused sandbox made with autoResume is resumed by the traffic that reaches it, and given
 * its timeout again (its "auto_resume": seconds), as E2B does; without it the traffic gets
 * E2B's answer for a sandbox that is not running, a 502 (the SDKs' isRunning() is false, a
 * call raises their TimeoutError), until Sandbox.connect resumes it.  One paused keeping only
 * its files is never woken by traffic (E2B: its resume is a reboot, asked for by a connect). */
static int wake(hreq *r, sandbox *s)
{
        json_t *again = json_object_get(s->http, "auto_resume");
        if (!s->paused)
                return 0;
        if (!json_is_integer(again) || s->paused_files) {
                control_error(r, 502, "The sandbox %s is paused%s: Sandbox.connect() resumes it", s->sup.id,
                              s->paused_files ? " without its memory" : "");
                return -EAGAIN;
        }
        nsbox_error err = { 0 };
        if (sandbox_pause(s, false, true, " by traffic", &err) < 0) {
                control_error(r, 500, "cannot resume sandbox %s: %s", s->sup.id, err.msg ? err.msg : "");
                nsbox_error_clear(&err);
                return -EIO;
        }
        s->expires_ns = now_ns() + (uint64_t)json_integer_value(again) * 1000000000ull;
        return 0;
}

const char *http_elsewhere(const hreq *r, const char *id, char *buf, size_t n)
{
        const char *node = nsbox_id_node(id), *self = r->d->conf->node;
        if (!nsbox_id_ok(id) || !strcmp(node, self))
                return "";
        if (!*node)
                snprintf(buf, n, ": its id names no node, and this is node '%s'", self);
        else
                snprintf(buf, n, ": its id names node '%s', and this is %s%s%s", node, *self ? "node '" : "a node without a name", self,
                         *self ? "'" : "");
        return buf;
}

/* The data plane: the sandbox's own token (X-Access-Token), or a key of its owner; a port
 * other than envd's: see port_open; /files: a signed URL (signed_url). */
static int data_auth(hreq *r)
{
        sandbox *found = NULL;
        for (sandbox *s = r->d->sandboxes; s; s = s->next)
                if (!s->pooled && !strcmp(s->sup.id, r->sandbox_id)) {
                        found = s;
                        break;
                }
        const char *token = http_header(r, "X-Access-Token");
        int sig = found ? signed_url(r, found) : 0;
        if (sig < 0) {
                control_error(r, 401, sig == -ETIME ? "signature is already expired" : "invalid signature");
                return -EACCES;
        }
        if (found && (sig > 0 || token_is(r, "X-Access-Token", found, "token") || port_open(r, found))) {
                r->uid = found->owner;
                r->gid = found->host_gid;
        } else if (key_auth(r)) {
                if (found && r->uid != found->owner)
                        found = NULL; /* another user's (root's key too): as if it did not exist */
        } else if (found) {
                if (r->port != HTTP_ENVD_PORT)
                        control_error(r, 401, "the sandbox's ports are private: its traffic token (E2B-Traffic-Access-Token) is needed");
                else
                        control_error(r, 401, token ? "the access token is not this sandbox's" : "an access token (X-Access-Token) or an API key (X-API-KEY) is needed");
                return -EACCES;
        }
        if (!found) {
                char why[128];
                control_error(r, 502, "The sandbox %s was not found%s", r->sandbox_id, http_elsewhere(r, r->sandbox_id, why, sizeof(why)));
                return -ENOENT;
        }
        r->sandbox = found->serial;
        return wake(r, found);
}

/* Request framing that could smuggle a second request past a front proxy is refused. */
static bool bad_framing(hreq *r)
{
        const char *te = http_header(r, "Transfer-Encoding"), *cl = http_header(r, "Content-Length");
        return te && cl;
}

/* The request's headers are in: which plane, who, and may it. */
static void route(hreq *r)
{
        if (bad_framing(r)) {
                control_error(r, 400, "Content-Length with Transfer-Encoding is refused");
                return;
        }
        int t = data_target(r);
        if (t == -EBUSY) {
                control_error(r, 429, "too many signed URLs that name no sandbox this second: retry, or send E2b-Sandbox-Id");
                return;
        }
        if (t == -EACCES) {
                control_error(r, 401, "invalid signature: no sandbox of this nsboxd signed it");
                return;
        }
        if (t < 0) {
                control_error(r, 400, "E2b-Sandbox-Port must be a port number (1-65535)");
                return;
        }
        if (t == 0) {
                r->plane = HR_CONTROL;
                if (!strcmp(r->url, "/health") && !strcmp(r->method, "GET")) {
                        http_answer(r, 200, "application/json", strdup("{\"status\":\"ok\"}"), 15);
                        return;
                }
                if (!key_auth(r)) {
                        control_error(r, 401, http_header(r, "X-API-KEY") ? "Invalid API key" : "An API key is needed (X-API-KEY)");
                        return;
                }
                return;
        }
        if (data_auth(r) < 0)
                return;
        r->plane = r->port == HTTP_ENVD_PORT ? HR_ENVD : HR_PROXY;
        if (r->plane == HR_ENVD && !strcmp(r->url, "/files"))
                files_request(r); /* sets on_body for an upload before its body comes */
        else if (r->plane == HR_PROXY)
                proxy_request(r); /* the same: the body streams to the port */
}

/* The body is in (or streamed): the service answers, now or later. */
static void start(hreq *r)
{
        r->started = true;
        if (r->body_too_large) {
                control_error(r, 413, "the request body is larger than %zu bytes", r->body_max);
                return;
        }
        if (r->plane == HR_CONTROL)
                control_request(r);
        else if (r->plane == HR_ENVD && strcmp(r->url, "/files"))
                envd_request(r);
}

/* ---- libmicrohttpd's callbacks -------------------------------------------------------------- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        (void)pos;
        hreq *r = cls;
        if (r->sout.len) {
                size_t n = r->sout.len < max ? r->sout.len : max;
                memcpy(buf, r->sout.data + r->sout.start, n);
                r->sout.start += n;
                r->sout.len -= n;
                if (!r->sout.len)
                        r->sout.start = 0;
                r->d->http->dirty = true; /* room again for replies waiting in its client */
                return (ssize_t)n;
        }
        if (r->stream_end)
                return r->stream_abort ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
        r->suspended = true;
        MHD_suspend_connection(r->conn);
        return 0;
}

static enum MHD_Result respond(hreq *r)
{
        if (r->queued)
                return MHD_YES;
        struct MHD_Response *resp = NULL;
        if (r->answer || r->status) {
                if (r->upgrade)
                        resp = MHD_create_response_for_upgrade(r->upgrade, r->upgrade_cls);
                else if (r->streaming)
                        resp = MHD_create_response_from_callback(r->stream_sized ? r->stream_size : MHD_SIZE_UNKNOWN, r->stream_block ? r->stream_block : 64 * 1024,
                                                                 stream_read, r, NULL);
                else {
                        resp = MHD_create_response_from_buffer(r->answer_len, r->answer, MHD_RESPMEM_MUST_FREE);
                        if (resp)
                                r->answer = NULL;
                }
        }
        if (!resp) {
                if (r->status)
                        return MHD_NO; /* out of memory: the connection is closed */
                r->suspended = true;
                MHD_suspend_connection(r->conn);
                return MHD_YES;
        }
        const char *type = r->streaming ? r->stream_type : r->answer_type;
        if (type)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (r->next_token)
                MHD_add_response_header(resp, "X-Next-Token", r->next_token);
        if (r->on_response)
                r->on_response(r, resp);
        enum MHD_Result ret = MHD_queue_response(r->conn, r->status, resp);
        MHD_destroy_response(resp);
        r->queued = ret == MHD_YES;
        return ret;
}

/* The request's headers are in: routed, and refused at once where it can be (before a body
 * that would only be thrown away is read). */
static enum MHD_Result first_call(daemon_state *d, struct MHD_Connection *conn, const char *url, const char *method, void **con_cls)
{
        hreq *r = calloc(1, sizeof(*r));
        if (!r)
                return MHD_NO;
        r->d = d;
        r->conn = conn;
        r->url = url;
        r->method = method;
        r->body_max = HTTP_BODY_MAX;
        sb_init(&r->body, 0);
        r->serial = ++d->http->serial;
        r->next = d->http->reqs;
        if (r->next)
                r->next->pprev = &r->next;
        r->pprev = &d->http->reqs;
        d->http->reqs = r;
        d->http->n_reqs++;
        *con_cls = r;
        route(r);
        const char *cl = http_header(r, "Content-Length"), *te = http_header(r, "Transfer-Encoding");
        unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
        if (!r->status && !r->on_body && len > r->body_max) {
                r->body_too_large = true;
                start(r);
                return respond(r); /* before the body: curl's 100-continue gets it at once */
        }
        /* refused with a body coming: read (and drop) it first, as long as it is small, so that
         * a client that does not wait for an answer before sending gets it rather than EPIPE */
        if (r->status && (te || len) && len <= HTTP_BODY_MAX)
                return MHD_YES;
        return r->status ? respond(r) : MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method, const char *version,
                                 const char *upload, size_t *upload_size, void **con_cls)
{
        (void)version;
        hreq *r = *con_cls;
        if (!r)
                return first_call(cls, conn, url, method, con_cls);
        if (*upload_size) {
                if (r->status) { /* answered already (refused): the rest is read and dropped, up to a bound */
                        r->discarded += *upload_size;
                        *upload_size = 0;
                        /* an upload refused half-way may be large: it is read and dropped (bytes
                         * in, nothing kept) up to HTTP_DISCARD_MAX, then the connection closed */
                        return r->discarded > (r->on_body ? HTTP_DISCARD_MAX : HTTP_BODY_MAX) ? MHD_NO : MHD_YES;
                }
                if (r->on_body) {
                        size_t took = r->on_body(r, upload, *upload_size);
                        *upload_size -= took;
                        if (*upload_size && !r->status) {
                                r->suspended = true;
                                MHD_suspend_connection(conn);
                        }
                        /* an answer (a refusal) goes once the body is read: MHD sends none
                         * queued in the middle of it (the rest is read and dropped, above) */
                        return MHD_YES;
                }
                if (r->body.len + *upload_size > r->body_max) {
                        r->body_too_large = true;
                        start(r); /* answered once the body is in: MHD queues nothing in the middle of one */
                        r->discarded = *upload_size;
                        *upload_size = 0;
                        return MHD_YES;
                }
                if (sb_append(&r->body, upload, *upload_size) < 0)
                        return MHD_NO;
                *upload_size = 0;
                return MHD_YES;
        }
        if (!r->body_complete) {
                r->body_complete = true;
                if (r->on_body && !r->status)
                        (void)r->on_body(r, NULL, 0); /* the end of the upload */
        }
        if (!r->started && !r->status)
                start(r);
        return respond(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode why)
{
        (void)cls;
        (void)conn;
        (void)why;
        hreq *r = *con_cls;
        if (!r)
                return;
        *con_cls = NULL;
        daemon_state *d = r->d;
        d->client_ns = now_ns(); /* its client's next request may come now: no pool start (loop.c) */
        *r->pprev = r->next;
        if (r->next)
                r->next->pprev = r->pprev;
        d->http->n_reqs--;
        if (r->state_free)
                r->state_free(r->state);
        if (r->c) { /* its calls are cancelled as a closed connection's are; detached processes go on */
                r->c->http = NULL;
                client_remove(d, r->c);
        }
        sb_release(&r->body);
        nsbox_queue_release(&r->sout);
        free(r->answer);
        free(r->next_token);
        free(r->location);
        free(r);
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
        (void)cls;
        char msg[512];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        msg[strcspn(msg, "\n")] = 0;
        dlog(LOG_INFO, "http.log", NULL, "%s", msg);
}

/* ---- what the loop calls ---------------------------------------------------------------------- */

/* ADDR:PORT, [ADDR6]:PORT: bound and listening, or -errno with why (what: the setting's name). */
int tcp_listen_on(const char *what, const char *spec, nsbox_error *err)
{
        char host[64];
        unsigned port;
        struct sockaddr_storage ss = { 0 };
        socklen_t sl;
        int n = 0;
        if (spec[0] == '[' ? sscanf(spec, "[%63[0-9a-fA-F:.]]:%5u%n", host, &port, &n) != 2
                           : sscanf(spec, "%63[0-9.]:%5u%n", host, &port, &n) != 2)
                return nsbox_err(err, EINVAL, "%s '%s': expected ADDR:PORT or [ADDR6]:PORT", what, spec);
        if (spec[n] || port > 65535)
                return nsbox_err(err, EINVAL, "%s '%s': expected ADDR:PORT with a port 0-65535", what, spec);
        struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t)port);
                sl = sizeof(*in4);
        } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t)port);
                sl = sizeof(*in6);
        } else
                return nsbox_err(err, EINVAL, "%s '%s': '%s' is not an IP address", what, spec, host);
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return nsbox_err(err, errno, "%s: socket", what);
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ss.ss_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 512) < 0) {
                int e = errno;
                close(fd);
                return nsbox_err(err, e, "%s: cannot listen on %s", what, spec);
        }
        return fd;
}

int http_open(daemon_state *d, nsbox_error *err)
{
        const char *spec = d->conf->http_listen;
        if (!spec || !*spec)
                return 0;
        d->http = calloc(1, sizeof(*d->http));
        if (!d->http)
                return nsbox_err(err, ENOMEM, "http");
        d->pool_ready = interp_pool_ready; /* a pooled code interpreter's kernel, started beforehand */
        int fd = tcp_listen_on("http.listen", spec, err);
        if (fd < 0)
                return fd;
        d->http->listen_fd = fd;
        d->http->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_access, d,
                                        /* the logger first: MHD logs the options after it with its own */
                                        MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                                        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                        (unsigned)HTTP_MAX_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
                                        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024), MHD_OPTION_NOTIFY_COMPLETED,
                                        on_completed, NULL, MHD_OPTION_END);
        if (!d->http->mhd) {
                close(fd);
                return nsbox_err(err, EIO, "http: libmicrohttpd did not start on %s", spec);
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d->http->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info || nsbox_epoll_add(d->epfd, info->epoll_fd, KEY(0, K_HTTP), NULL, EPOLLIN) < 0)
                return nsbox_err(err, errno ? errno : EIO, "http: epoll");
        int pfd = proxy_open(d, &d->http->proxy, err); /* the proxy's own epoll, under the same kind */
        if (pfd < 0)
                return pfd;
        if (nsbox_epoll_add(d->epfd, pfd, KEY(1, K_HTTP), NULL, EPOLLIN) < 0)
                return nsbox_err(err, errno, "http: epoll");
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char addr[INET6_ADDRSTRLEN] = "?";
        unsigned port = 0;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
                if (ss.ss_family == AF_INET) {
                        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr));
                        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
                } else {
                        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, sizeof(addr));
                        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
                }
        }
        dlog(LOG_NOTICE, "http.listening", NULL, "E2B-compatible HTTP API on %s%s%s:%u", strchr(addr, ':') ? "[" : "", addr,
             strchr(addr, ':') ? "]" : "", port);
        return 0;
}

void http_run(daemon_state *d)
{
        if (!d->http)
                return;
        MHD_run(d->http->mhd);
        proxy_run(d->http->proxy);
}

size_t http_held(const client *c) { return c->http ? c->http->sout.len : 0; }

/* Replies and events waiting in the requests' clients go to their requests, as far as their
 * streams have room (what stays in a client counts against it: its streams pause). */
void http_pump(daemon_state *d)
{
        if (!d->http) /* every request's client is looked at: replies come to them at any time */
                return;
        d->http->dirty = false;
        proxy_pump(d->http->proxy);
        for (hreq *r = d->http->reqs; r; r = r->next) {
                client *c = r->c;
                while (c && c->out.len && r->sout.len < HTTP_STREAM_HIGH) {
                        char *p = c->out.data + c->out.start, *nl = memchr(p, '\n', c->out.len);
                        if (!nl)
                                break;
                        size_t n = (size_t)(nl - p) + 1;
                        json_t *msg = nsbox_json_loadb(p, n - 1, NULL);
                        c->out.start += n;
                        c->out.len -= n;
                        if (!c->out.len)
                                c->out.start = 0;
                        if (msg && r->on_msg)
                                r->on_msg(r, msg);
                        json_decref(msg);
                }
                /* what stays in c waits for room in r's stream: stream_read says when (dirty) */
        }
        fs_reap(d); /* watchers whose sandbox or watch ended, now that the walk is over */
        /* MHD's own work each round: resumed requests, its timeouts (idle connections, a request
         * over its memory), data it has read but not processed; with external polling nothing
         * else would make it look */
        d->http->woke = false;
        MHD_run(d->http->mhd);
        for (int round = 0; round < 8 && d->http->woke; round++) {
                d->http->woke = false;
                MHD_run(d->http->mhd);
        }
        /* MHD's own timers (idle connections, a closed connection to complete, a resumed one
         * still to serve) come due without an event on its epoll fd: its timeout says so */
        MHD_UNSIGNED_LONG_LONG ms;
        if (MHD_get_timeout(d->http->mhd, &ms) == MHD_YES && ms == 0)
                MHD_run(d->http->mhd);
}

/* The sooner of a request's deadline and its next keepalive (0: neither). */
static uint64_t req_due(const hreq *r)
{
        return r->deadline_ns && (!r->keepalive_ns || r->deadline_ns < r->keepalive_ns) ? r->deadline_ns : r->keepalive_ns;
}

/* Requests' deadlines and keepalives; returns the loop's timeout for them and for MHD. */
int http_timeout(daemon_state *d, int timeout)
{
        if (!d->http)
                return timeout;
        uint64_t now = now_ns(), next = 0;
        for (hreq *r = d->http->reqs; r; r = r->next) {
                uint64_t due = req_due(r);
                if (due && due <= now && r->on_tick) {
                        r->on_tick(r, now);
                        due = req_due(r);
                }
                if (due && (!next || due < next))
                        next = due;
        }
        timeout = proxy_timeout(d->http->proxy, timeout);
        if (d->http->dirty || d->http->woke)
                return 0;
        MHD_UNSIGNED_LONG_LONG ms;
        if (MHD_get_timeout(d->http->mhd, &ms) == MHD_YES && (timeout < 0 || ms < (MHD_UNSIGNED_LONG_LONG)timeout))
                timeout = ms > 60000 ? 60000 : (int)ms;
        return timeout_until(timeout, next, now);
}

void http_close(daemon_state *d)
{
        if (!d->http)
                return;
        proxy_close_pipes(d->http->proxy);
        /* MHD aborts when stopped with suspended connections: each request is answered (or its
         * stream ended) and resumed first, and MHD runs once to take them back */
        for (hreq *r = d->http->reqs; r; r = r->next) {
                if (r->streaming)
                        r->stream_end = true;
                else if (!r->status)
                        http_answer(r, 503, "application/json", strdup("{\"code\":503,\"message\":\"nsboxd is stopping\"}"), 43);
                http_wake(r);
        }
        MHD_run(d->http->mhd);
        MHD_stop_daemon(d->http->mhd); /* completes every request: their clients go */
        fs_close(d);                   /* and the internal ones of envd's watchers */
        proxy_close(d->http->proxy);
        close(d->http->listen_fd);
        free(d->http);
        d->http = NULL;
}

/* A new secret of HTTP_TOKEN_HEX hex digits in the sandbox's HTTP state, under key. */
int http_sandbox_secret(sandbox *s, const char *key)
{
        unsigned char raw[HTTP_TOKEN_HEX / 2];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                return -EIO;
        char hex[HTTP_TOKEN_HEX + 1];
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        if (!s->http && !(s->http = json_object()))
                return -ENOMEM;
        return json_object_set_new(s->http, key, json_string(hex));
}

/* A sandbox's HTTP state, made at an HTTP create: its data-plane token. */
int http_sandbox_token(sandbox *s)
{
        return http_sandbox_secret(s, "token");
}
