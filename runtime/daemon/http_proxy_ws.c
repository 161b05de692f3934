/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The port proxy's WebSockets: the upgrade request goes to the port on a raw socket made in the
 * sandbox's network namespace; its answer's head is read up to "\r\n\r\n" (at most
 * PROXY_HEAD_MAX) and must be "HTTP/1.x 101"; its headers go on libmicrohttpd's 101
 * (MHD_create_response_for_upgrade); then the bytes are spliced both ways on the proxy's epoll,
 * PROXY_WS_BUF held at most each way.  A WebSocket lives on after its HTTP request completes:
 * it is the proxy's (proxy_state.pipes), not the request's. */
#include "http_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { WS_SEND, WS_HEAD, WS_UPGRADE, WS_PIPE };

typedef struct wsconn {
        struct wsconn *next, **pprev;
        proxy_state *p;
        hreq *r;                 /* until its request completes */
        uint64_t sandbox;
        unsigned port;
        int phase;
        int up, fd6, cl;         /* the port's socket, the [::1] one for a retry, the client's */
        bool v6, connected;
        uint32_t up_ev, cl_ev;
        struct MHD_UpgradeResponseHandle *urh;
        strbuf head;             /* the upgrade request, then the port's answer's head */
        size_t sent;
        char *target;
        nsbox_queue to_up, to_cl;
        bool up_eof, cl_eof, up_shut, cl_shut;
        uint64_t deadline_ns;
} wsconn;

bool proxy_is_upgrade(hreq *r)
{
        const char *up = http_header(r, "Upgrade"), *conn = http_header(r, "Connection");
        return up && conn && strcasestr(up, "websocket") && strcasestr(conn, "upgrade") && !strcmp(r->method, "GET");
}

unsigned ws_count(proxy_state *p, uint64_t sandbox)
{
        unsigned n = 0;
        for (wsconn *w = p->pipes; w; w = w->next)
                n += w->sandbox == sandbox;
        return n;
}

static void ws_free(wsconn *w)
{
        if (w->up >= 0) {
                epoll_ctl(w->p->epfd, EPOLL_CTL_DEL, w->up, NULL);
                close(w->up);
        }
        if (w->fd6 >= 0)
                close(w->fd6);
        if (w->cl >= 0)
                epoll_ctl(w->p->epfd, EPOLL_CTL_DEL, w->cl, NULL);
        if (w->urh) { /* libmicrohttpd closes the client's socket */
                MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
                http_kick(w->p->d);
        }
        if (w->r) {
                w->r->state = NULL;
                w->r->state_free = NULL;
        }
        *w->pprev = w->next;
        if (w->next)
                w->next->pprev = w->pprev;
        sb_release(&w->head);
        nsbox_queue_release(&w->to_up);
        nsbox_queue_release(&w->to_cl);
        free(w->target);
        free(w);
}

/* The request completed: before its 101 was sent, the WebSocket goes with it; after, the
 * upgrade handler (or ws_tick, if it never comes) takes it over. */
static void ws_request_gone(void *state)
{
        wsconn *w = state;
        w->r = NULL;
        if (w->phase < WS_UPGRADE)
                ws_free(w);
}

static void ws_fail(wsconn *w, unsigned status, const char *what)
{
        hreq *r = w->r;
        unsigned port = w->port;
        ws_free(w);
        if (r && !what)
                control_error(r, status, "nothing listens on port %u of sandbox %s", port, r->sandbox_id);
        else if (r)
                control_error(r, status, "port %u of sandbox %s: %s", port, r->sandbox_id, what);
}

static void ws_interest(wsconn *w)
{
        uint32_t up = 0, cl = 0;
        if (w->phase == WS_SEND)
                up = EPOLLOUT;
        else if (w->phase == WS_HEAD)
                up = EPOLLIN;
        else if (w->phase == WS_PIPE) {
                up = (!w->up_eof && w->to_cl.len < PROXY_WS_BUF ? EPOLLIN : 0) | (w->to_up.len ? EPOLLOUT : 0);
                cl = (!w->cl_eof && w->to_up.len < PROXY_WS_BUF ? EPOLLIN : 0) | (w->to_cl.len ? EPOLLOUT : 0);
        }
        nsbox_epoll_set(w->p->epfd, w->up, (uint64_t)(uintptr_t)w | PX_TAG_WS_UP, &w->up_ev, up);
        nsbox_epoll_set(w->p->epfd, w->cl, (uint64_t)(uintptr_t)w | PX_TAG_WS_CLIENT, &w->cl_ev, cl);
}

static int ws_connect(wsconn *w)
{
        struct sockaddr_in in4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)w->port) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)w->port) };
        in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        in6.sin6_addr = in6addr_loopback;
        int ret = w->v6 ? connect(w->up, (struct sockaddr *)&in6, sizeof(in6)) : connect(w->up, (struct sockaddr *)&in4, sizeof(in4));
        if (ret < 0 && errno != EINPROGRESS)
                return -errno;
        w->up_ev = 0;
        epoll_ctl(w->p->epfd, EPOLL_CTL_DEL, w->up, NULL);
        if (nsbox_epoll_add(w->p->epfd, w->up, (uint64_t)(uintptr_t)w | PX_TAG_WS_UP, &w->up_ev, EPOLLOUT) < 0)
                return -errno;
        return 0;
}

/* v4 refused: [::1], else 502. */
static void ws_refused(wsconn *w)
{
        if (!w->v6 && w->fd6 >= 0) {
                epoll_ctl(w->p->epfd, EPOLL_CTL_DEL, w->up, NULL);
                close(w->up);
                w->up = steal_fd(&w->fd6);
                w->v6 = true;
                w->sent = 0;
                if (ws_connect(w) == 0)
                        return;
        }
        ws_fail(w, 502, NULL); /* as HTTP says it */
}

static void add_101_headers(hreq *r, struct MHD_Response *resp)
{
        wsconn *w = r->state;
        char *line = w ? strstr(w->head.buf, "\r\n") : NULL; /* after the status line */
        while (line && (line += 2) && *line && strncmp(line, "\r\n", 2)) {
                char *end = strstr(line, "\r\n"), *colon = memchr(line, ':', (size_t)(end - line));
                if (colon && colon != line) {
                        *colon = 0;
                        *end = 0;
                        const char *v = colon + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        if (strcasecmp(line, "Connection") && strcasecmp(line, "Content-Length") &&
                            strcasecmp(line, "Transfer-Encoding"))
                                MHD_add_response_header(resp, line, v);
                        *colon = ':';
                        *end = '\r';
                }
                line = end;
        }
}

static void ws_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra, size_t extra_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh)
{
        (void)conn;
        (void)con_cls;
        wsconn *w = cls;
        int fl = fcntl(sock, F_GETFL);
        if (fl >= 0 && !(fl & O_NONBLOCK)) /* spliced on the proxy's epoll: never a blocking read */
                fcntl(sock, F_SETFL, fl | O_NONBLOCK);
        w->cl = sock;
        w->urh = urh;
        w->phase = WS_PIPE;
        w->deadline_ns = now_ns() + PROXY_IDLE_TIMEOUT_NS;
        if (w->r) { /* the WebSocket is the proxy's now */
                w->r->state = NULL;
                w->r->state_free = NULL;
                w->r = NULL;
        }
        if ((extra_size && nsbox_queue_append(&w->to_up, extra, extra_size) < 0) ||
            nsbox_epoll_add(w->p->epfd, w->cl, (uint64_t)(uintptr_t)w | PX_TAG_WS_CLIENT, &w->cl_ev, 0) < 0) {
                ws_free(w);
                return;
        }
        ws_interest(w);
}

/* The port's head is in: a 101 is passed on, anything else is a 502. */
static void ws_head_done(wsconn *w, size_t end)
{
        unsigned status = 0;
        if (sscanf(w->head.buf, "HTTP/1.%*1[01] %3u", &status) != 1 || status != 101) {
                ws_fail(w, 502, status ? "refused the WebSocket upgrade" : "did not answer HTTP");
                return;
        }
        if (w->head.len > end && nsbox_queue_append(&w->to_cl, w->head.buf + end, w->head.len - end) < 0) {
                ws_fail(w, 500, "out of memory");
                return;
        }
        w->head.len = end;
        w->head.buf[end] = 0;
        w->phase = WS_UPGRADE;
        w->deadline_ns = now_ns() + PROXY_HEADERS_TIMEOUT_NS; /* for the client to take its 101 */
        hreq *r = w->r;
        r->upgrade = ws_upgraded;
        r->upgrade_cls = w;
        r->on_response = add_101_headers;
        http_answer(r, 101, NULL, NULL, 0);
}

static void ws_handshake(wsconn *w, uint32_t events)
{
        if (w->phase == WS_SEND) {
                int soerr = 0;
                socklen_t sl = sizeof(soerr);
                if (!w->connected) {
                        getsockopt(w->up, SOL_SOCKET, SO_ERROR, &soerr, &sl);
                        if (soerr == ECONNREFUSED || (!soerr && events & (EPOLLERR | EPOLLHUP))) {
                                ws_refused(w);
                                return;
                        }
                        if (soerr) {
                                ws_fail(w, 502, "cannot be reached");
                                return;
                        }
                        w->connected = true;
                }
                ssize_t n = send(w->up, w->head.buf + w->sent, w->head.len - w->sent, MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN) {
                        ws_fail(w, 502, "closed the connection");
                        return;
                }
                w->sent += n > 0 ? (size_t)n : 0;
                if (w->sent == w->head.len) {
                        w->phase = WS_HEAD;
                        w->head.len = 0;
                }
                return;
        }
        char buf[4096];
        size_t room = PROXY_HEAD_MAX - w->head.len;
        ssize_t n = recv(w->up, buf, room < sizeof(buf) ? room : sizeof(buf), 0);
        if (n < 0 && errno == EAGAIN)
                return;
        if (n <= 0 || sb_append(&w->head, buf, (size_t)n) < 0) {
                ws_fail(w, 502, n <= 0 ? "closed the connection" : "sent too long a head");
                return;
        }
        char *end = strstr(w->head.buf, "\r\n\r\n");
        if (end)
                ws_head_done(w, (size_t)(end - w->head.buf) + 4);
        else if (w->head.len >= PROXY_HEAD_MAX)
                ws_fail(w, 502, "sent too long a head");
}

/* One side is readable or writable: move what can be moved, half-close, or end. */
static void ws_pipe(wsconn *w, bool from_up, uint32_t events)
{
        int in = from_up ? w->up : w->cl;
        nsbox_queue *q = from_up ? &w->to_cl : &w->to_up;
        bool *eof = from_up ? &w->up_eof : &w->cl_eof;
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR) && !*eof && q->len < PROXY_WS_BUF) {
                char buf[16384];
                ssize_t n = recv(in, buf, sizeof(buf), 0);
                if (n > 0) {
                        if (nsbox_queue_append(q, buf, (size_t)n) < 0) {
                                ws_free(w);
                                return;
                        }
                        w->deadline_ns = now_ns() + PROXY_IDLE_TIMEOUT_NS;
                } else if (n == 0 || errno != EAGAIN)
                        *eof = true;
        }
        if ((w->to_up.len && nsbox_queue_flush(&w->to_up, w->up) < 0) || (w->to_cl.len && nsbox_queue_flush(&w->to_cl, w->cl) < 0)) {
                ws_free(w);
                return;
        }
        if (w->up_eof && !w->to_cl.len && !w->cl_shut) {
                shutdown(w->cl, SHUT_WR);
                w->cl_shut = true;
        }
        if (w->cl_eof && !w->to_up.len && !w->up_shut) {
                shutdown(w->up, SHUT_WR);
                w->up_shut = true;
        }
        if (w->cl_shut && w->up_shut) {
                ws_free(w);
                return;
        }
        ws_interest(w);
}

void ws_event(proxy_state *p, uint64_t key, uint32_t events)
{
        wsconn *w = (wsconn *)(uintptr_t)(key & ~(uint64_t)7);
        bool found = false; /* an event of this round for a WebSocket already ended */
        for (wsconn *x = p->pipes; x && !found; x = x->next)
                found = x == w;
        if (!found)
                return;
        if (w->phase == WS_SEND || w->phase == WS_HEAD)
                ws_handshake(w, events);
        else if (w->phase == WS_PIPE)
                ws_pipe(w, (key & 7) == PX_TAG_WS_UP, events);
}

uint64_t ws_tick(proxy_state *p, uint64_t now)
{
        uint64_t next = 0;
        for (wsconn *w = p->pipes, *nx; w; w = nx) {
                nx = w->next;
                if (w->deadline_ns <= now) {
                        if (w->phase < WS_UPGRADE)
                                ws_fail(w, 504, "did not answer in time");
                        else
                                ws_free(w); /* idle, or a 101 nobody took */
                        continue;
                }
                if (!next || w->deadline_ns < next)
                        next = w->deadline_ns;
        }
        return next;
}

static enum MHD_Result add_ws_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
        (void)kind;
        wsconn *w = cls;
        if (!proxy_header_dropped(w->r, name, true) && strcasecmp(name, "Content-Length"))
                sb_appendf(&w->head, "%s: %s\r\n", name, value ? value : "");
        return MHD_YES;
}

void ws_start(proxy_state *p, hreq *r, sandbox *s, int fds[2], const char *target)
{
        wsconn *w = calloc(1, sizeof(*w));
        if (!w) {
                close(fds[0]);
                if (fds[1] >= 0)
                        close(fds[1]);
                control_error(r, 500, "out of memory");
                return;
        }
        w->p = p;
        w->r = r;
        w->sandbox = s->serial;
        w->port = r->port;
        w->up = fds[0];
        w->fd6 = fds[1];
        w->cl = -1;
        sb_init(&w->head, PROXY_HEAD_MAX);
        w->next = p->pipes;
        if (w->next)
                w->next->pprev = &w->next;
        w->pprev = &p->pipes;
        p->pipes = w;
        r->state = w;
        r->state_free = ws_request_gone;
        sb_appendf(&w->head, "GET %s HTTP/1.1\r\n", target);
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_ws_header, w);
        if (sb_append(&w->head, "\r\n", 2) < 0) {
                ws_fail(w, 431, "the upgrade request is too large");
                return;
        }
        w->deadline_ns = now_ns() + PROXY_HEADERS_TIMEOUT_NS;
        int ret = ws_connect(w);
        if (ret < 0) {
                if (ret == -ECONNREFUSED)
                        ws_refused(w);
                else
                        ws_fail(w, 502, "cannot be reached");
        }
}

void proxy_close_pipes(proxy_state *p)
{
        while (p && p->pipes) {
                wsconn *w = p->pipes;
                hreq *r = w->r;
                ws_free(w);
                if (r) /* its request is answered as MHD stops */
                        control_error(r, 503, "nsboxd is stopping");
        }
}
