/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's HTTP rooms (http.c and the services under it: http_control.c for E2B's control
 * plane, http_envd.c for the envd data plane, http_files.c for /files, http_proxy.c for the
 * port proxy).  An HTTP request drives nsboxd's own methods: it gets a client of its own, with
 * no socket (client.http), acting as the request's user; its JSON-RPC requests go through
 * handle_request like any client's, so ownership, limits and backpressure are the same, and
 * the replies and events that come back are handed to the request's on_msg.
 *
 * libmicrohttpd runs in nsboxd's thread, on its epoll (MHD_USE_EPOLL, external polling): a
 * request waiting for a sandbox is suspended, and resumed when its answer or stream data
 * comes. */
#pragma once

#include <microhttpd.h>

#include "internal.h"

#define HTTP_BODY_MAX (1u << 20)       /* a JSON request body */
#define HTTP_DISCARD_MAX (64u << 20)   /* of a refused upload, read and dropped before closing */
#define HTTP_STREAM_HIGH (1u << 20)    /* a stream's unsent bytes above which its replies wait */
#define HTTP_MAX_CONNECTIONS 1024
#define HTTP_MAX_PER_IP 512
#define HTTP_IDLE_TIMEOUT_S 120         /* a connection with no request in progress */
#define HTTP_STREAMS_PER_UID 256        /* streamed requests one user holds at once */
#define HTTP_ENVD_PORT 49983
#define HTTP_ENVD_VERSION "0.6.4"       /* the envd features served (E2B-PROTOCOL.md) */
#define HTTP_TOKEN_HEX 32              /* a sandbox's data-plane access token */

typedef struct hreq hreq;
/* A reply (result or error) or an event of r's client, as JSON-RPC; the callee keeps nothing. */
typedef void (*hreq_msg_fn)(hreq *r, json_t *msg);

enum { HR_CONTROL, HR_ENVD, HR_PROXY };

struct hreq {
        struct hreq *next, **pprev;     /* the daemon's live requests */
        uint64_t serial;                /* names it to an answer that comes later (http_req_by_serial) */
        daemon_state *d;
        struct MHD_Connection *conn;
        const char *method, *url;       /* MHD's, for the request's lifetime */
        int plane;                      /* HR_* */
        uid_t uid;                      /* who it acts as (a key's user, or the sandbox's owner) */
        gid_t gid;
        bool by_key;                    /* authenticated with an API key (not a sandbox token) */
        uint64_t sandbox;               /* data plane: the sandbox's serial */
        char sandbox_id[NSBOX_ID_SIZE];
        unsigned port;                  /* data plane: E2b-Sandbox-Port */
        strbuf body;                    /* the request body, up to body_max */
        size_t body_max;
        size_t discarded;               /* of a refused request's body, read and dropped */
        bool body_too_large, started, suspended, queued, done;
        client *c;                      /* its client, made at its first JSON-RPC request */
        uint64_t next_id;               /* JSON-RPC ids of its requests */
        hreq_msg_fn on_msg;
        /* a streamed upload: the body's bytes as they come; what it does not take (it returns
         * less than len) waits, the request suspended until http_wake */
        size_t (*on_body)(hreq *r, const char *data, size_t len);
        bool body_complete;
        /* a whole answer, queued when the request is resumed */
        unsigned status;
        char *answer;
        size_t answer_len;
        const char *answer_type;
        char *location, *next_token;    /* extra headers: X-Next-Token */
        /* a stream */
        bool streaming, stream_end;
        bool stream_abort;              /* its end is the connection's close, with no end of its own */
        const char *stream_type;
        size_t stream_block;            /* bytes MHD takes from sout at a time (0: 64 KiB) */
        /* its length, when known before it begins (Content-Length, not chunked: MHD sends from
         * a stream_block buffer of its own rather than its connection's memory); ended short,
         * the connection is closed */
        bool stream_sized;
        uint64_t stream_size;
        nsbox_queue sout;               /* bytes not yet taken by MHD */
        bool counted_stream;
        uint64_t deadline_ns;           /* Connect-Timeout-Ms: the call is cancelled then */
        uint64_t keepalive_ns, keepalive_every_ns;
        /* the service's own state */
        void *state;
        void (*state_free)(void *state);
        void (*on_tick)(hreq *r, uint64_t now); /* deadlines and keepalives, when due */
        /* the port proxy's answers: more headers on the response, a WebSocket upgrade (a
         * status 101 answered with MHD_create_response_for_upgrade(upgrade, upgrade_cls)) */
        void (*on_response)(hreq *r, struct MHD_Response *resp);
        MHD_UpgradeHandler upgrade;
        void *upgrade_cls;
};

/* http.c: what the services use */
const char *http_header(hreq *r, const char *name);
const char *http_arg(hreq *r, const char *name);
uint64_t http_rpc(hreq *r, const char *method, json_t *params);   /* takes params; its JSON-RPC id */
uint64_t http_call(hreq *r, const char *tool, json_t *tparams, bool stream); /* the method "call" on r's sandbox */
/* The same with bytes beside the JSON (never base64'd): bytes (NULL: none) are the frame's
 * payload (write_file's content); raw: the answer's payload is taken with http_take_bytes. */
uint64_t http_call_bytes(hreq *r, const char *tool, json_t *tparams, const void *bytes, size_t len, bool raw);
char *http_take_bytes(hreq *r, json_t *msg, size_t *len); /* a raw call's answer's bytes (msg's id); the caller frees */
void http_answer(hreq *r, unsigned status, const char *type, char *body, size_t len); /* takes body */
void http_answer_json(hreq *r, unsigned status, json_t *body);                      /* takes body */
int http_stream_begin(hreq *r, unsigned status, const char *type); /* -EAGAIN: the user has HTTP_STREAMS_PER_UID */
int http_stream_write(hreq *r, const void *data, size_t len);
void http_stream_end(hreq *r);
void http_stream_abort(hreq *r); /* what is queued goes, then the connection is closed unended */
void http_wake(hreq *r);
sandbox *http_sandbox(hreq *r);      /* r's sandbox, if it is still there */
hreq *http_req_by_serial(daemon_state *d, uint64_t serial); /* a live request, or NULL */
hreq *http_internal_new(hreq *like); /* no connection: like's sandbox and user (http.c) */
void http_internal_free(hreq *r);
int http_sandbox_token(sandbox *s);  /* its data-plane access token, made anew */
int http_sandbox_secret(sandbox *s, const char *key); /* a new random token in s->http */
bool http_public_traffic(const sandbox *s); /* its ports need no token (allowPublicTraffic) */
/* Why an id is not found here when it names another node (a router sent it astray): ": ...", or "". */
const char *http_elsewhere(const hreq *r, const char *id, char *buf, size_t n);
/* a JSON-RPC error message's stable code and message (NULL: not an error) */
const char *rpc_error_code(json_t *msg, const char **message);
unsigned http_status_of(const char *code);

/* http_control.c: E2B's control plane (OpenAPI) */
void control_request(hreq *r);
json_t *control_sandbox_json(daemon_state *d, sandbox *s);
void control_error(hreq *r, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void control_figures(json_t *o, const nsbox_limits *l); /* cpuCount, memoryMB, diskSizeMB */
void control_rfc3339(char *buf, size_t n, time_t t); /* 2026-01-02T03:04:05Z */
void control_spawned(daemon_state *d, const char *template_id); /* an E2B create of it answered */

/* http_templates.c: GET /templates[/ID], /templates/aliases/NAME: the templates a create takes */
void templates_request(hreq *r);

/* http_interp.c: the built-in code-interpreter template (its server started in a sandbox) */
bool interp_template(const char *name);
const char *interp_config_template(const nsbox_dconfig *c, const char *name); /* NULL: none */
/* the server's files are named by ident: its sandbox and its boot (a reboot starts another) */
uint64_t interp_ident(const sandbox *s);
json_t *interp_start_params(uint64_t ident, json_t *envs, char *why, size_t whylen);
json_t *interp_wait_params(uint64_t ident, json_int_t pid);
void interp_pool_ready(daemon_state *d, sandbox *s); /* daemon_state's pool_ready */

/* http_envd.c: envd (Connect protocol): process.Process, filesystem.Filesystem, /health, and
 * what the two services share */
void envd_request(hreq *r);
bool envd_streaming(hreq *r);          /* Content-Type application/connect+json */
json_t *envd_message(hreq *r);         /* the request's message; NULL: answered with the error */
void envd_answer(hreq *r, json_t *msg); /* a unary method's answer (takes msg) */
void envd_error(hreq *r, const char *connect_code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int envd_send(hreq *r, json_t *msg);   /* a stream's next message (takes msg); begin it first */
void envd_end(hreq *r, const char *connect_code, const char *message); /* its end; NULL code: fine */
const char *envd_code(hreq *r, const char *nsbox_code); /* a call's error code as Connect's */
int envd_user(hreq *r, const char *name); /* the user it acts as (Authorization, or name): 0, or answered */
int envd_user_check(hreq *r, const char *who, char *why, size_t n); /* who is the sandbox's user: 0, or -EPERM and why */
const char *envd_user_name(hreq *r); /* the sandbox's user as E2B names it: "user", or its root's name */
const char *envd_home(hreq *r);      /* its home: /home/user, or its root's */
void envd_stream_timers(hreq *r);      /* Keepalive-Ping-Interval and Connect-Timeout-Ms of a stream */

/* http_process.c: process.Process's methods (after /process.Process/) */
void process_request(hreq *r, const char *method);

/* http_fs.c: filesystem.Filesystem's methods (after /filesystem.Filesystem/) */
void fs_request(hreq *r, const char *method);
void fs_reap(daemon_state *d);  /* polling watchers whose watch ended: freed (http_pump) */
void fs_close(daemon_state *d); /* every polling watcher freed (http_close) */

/* http_files.c: envd's GET and POST /files */
void files_request(hreq *r);

/* http_proxy.c: a port inside the sandbox.  proxy_request is called once the request's head is
 * in (its body streams to the port); the rest is driven from http.c's own calls. */
struct proxy_state;
void proxy_request(hreq *r);
struct proxy_state *http_proxy(daemon_state *d);
void http_kick(daemon_state *d); /* MHD has work of its own (an upgraded socket closed) */
int proxy_open(daemon_state *d, struct proxy_state **ret, nsbox_error *err); /* its epoll fd, for nsboxd's */
void proxy_run(struct proxy_state *p);                 /* its epoll fd is readable */
void proxy_pump(struct proxy_state *p);                /* streams with room again */
int proxy_timeout(struct proxy_state *p, int timeout); /* its timers, and the loop's timeout */
void proxy_close_pipes(struct proxy_state *p);         /* before MHD stops: its upgraded sockets */
void proxy_close(struct proxy_state *p);
