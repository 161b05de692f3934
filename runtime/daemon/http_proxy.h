/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The port proxy's two files: http_proxy.c (the sockets in a sandbox's network namespace, HTTP
 * through libcurl) and http_proxy_ws.c (WebSocket upgrades, spliced both ways). */
#pragma once

#include <curl/curl.h>

#include "http.h"

#define PROXY_PER_SANDBOX 256                           /* proxied requests and WebSockets of one sandbox */
#define PROXY_CONNECT_TIMEOUT_MS 5000
#define PROXY_HEADERS_TIMEOUT_NS (60ull * 1000000000)   /* no answer's head by then: 504 */
#define PROXY_IDLE_TIMEOUT_NS (600ull * 1000000000)     /* not one byte either way: closed */
#define PROXY_UPLOAD_BUF (256u * 1024)                  /* request body bytes held for the port */
#define PROXY_HEAD_MAX (64u * 1024)                     /* an answer's head from the port */
#define PROXY_WS_BUF (64u * 1024)                       /* a WebSocket's bytes held each way */

/* the proxy's epoll keys: a curl socket (fd << 3), or a WebSocket's side (its pointer | tag) */
enum { PX_TAG_CURL = 0, PX_TAG_WS_UP = 1, PX_TAG_WS_CLIENT = 2 };

typedef struct proxy_state {
        daemon_state *d;
        int epfd;
        CURLM *multi;
        uint64_t timer_ns;       /* curl's timer: 0 none, else when (1: now) */
        struct pxreq *reqs;      /* HTTP transfers */
        struct wsconn *pipes;    /* WebSockets */
        unsigned paused;         /* transfers waiting for room in their streams */
} proxy_state;

/* http_proxy.c */
int proxy_sockets(sandbox *s, int ret[2], char *why, size_t n);
bool proxy_header_dropped(hreq *r, const char *name, bool upgrade);
char *proxy_target(hreq *r);
unsigned proxy_count(proxy_state *p, uint64_t sandbox);

/* http_proxy_ws.c */
bool proxy_is_upgrade(hreq *r);
void ws_start(proxy_state *p, hreq *r, sandbox *s, int fds[2], const char *target); /* takes fds */
void ws_event(proxy_state *p, uint64_t key, uint32_t events);
uint64_t ws_tick(proxy_state *p, uint64_t now); /* its deadlines; the next one */
unsigned ws_count(proxy_state *p, uint64_t sandbox);
