/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: client connections, accepted, read line by line and removed; and the tenants, what
 * one uid may hold of connections and request bytes (nsboxd(8), LIMITS). */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "../dlog.h"
#include "../peer.h"

static uid_use *use_of(daemon_state *d, uid_t uid)
{
        for (unsigned i = 0; i < d->n_uses; i++)
                if (d->uses[i].uid == uid)
                        return &d->uses[i];
        return NULL;
}

/* One connection more (+1) or less (-1) for c's uid; the bytes it buffered go with it. */
static void use_connection(daemon_state *d, client *c, int delta)
{
        uid_use *u = use_of(d, c->uid);
        if (!u && delta > 0 && d->n_uses < MAX_CLIENTS) {
                u = &d->uses[d->n_uses++];
                *u = (uid_use){ .uid = c->uid };
        }
        if (!u)
                return;
        if (delta > 0) {
                u->conns++;
                return;
        }
        u->buffered -= c->counted;
        c->counted = 0;
        if (--u->conns == 0)
                *u = d->uses[--d->n_uses];
}

/* The uid's count of buffered request bytes follows what c holds now. */
static void use_buffered(daemon_state *d, client *c)
{
        uid_use *u = use_of(d, c->uid);
        if (u)
                u->buffered = u->buffered - c->counted + c->in.len;
        c->counted = c->in.len;
}

/* Near its cap (three quarters), a uid's connections that say nothing are closed. */
static bool near_connection_cap(daemon_state *d, uid_t uid)
{
        const uid_use *u = use_of(d, uid);
        return u && u->conns * 4 >= d->conf->max_connections_per_uid * 3;
}

/* Is a new connection of uid one too many?  Its uid is at max_connections_per_uid, or nsboxd is
 * full; tenants never take the last CLIENTS_KEPT_FOR_OPERATOR, kept for root and nsboxd's uid. */
static bool connection_refused(daemon_state *d, uid_t uid, char *why, size_t n)
{
        const uid_use *u = use_of(d, uid);
        unsigned mine = u ? u->conns : 0, cap = d->conf->max_connections_per_uid;
        if (mine >= cap)
                snprintf(why, n, "too many connections: uid %u has %u open, max_connections_per_uid is %u", (unsigned)uid, mine, cap);
        else if (d->n_clients >= (is_operator(uid) ? MAX_CLIENTS : MAX_CLIENTS - CLIENTS_KEPT_FOR_OPERATOR))
                snprintf(why, n, "too many connections: nsboxd has %u open%s", d->n_clients,
                         is_operator(uid) ? "" : ", the rest are kept for root and nsboxd's own uid");
        else
                return false;
        return true;
}

/* What one uid can cause many of is logged once a second at most, with a count of the rest. */
static void log_limited(daemon_state *d, const char *event, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_limited(daemon_state *d, const char *event, const char *fmt, ...)
{
        uint64_t now = now_ns();
        if (d->refused_log_ns && now - d->refused_log_ns < 1000000000ull) {
                d->refused_quiet++;
                return;
        }
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (d->refused_quiet)
                dlog(LOG_WARNING, event, NULL, "%s (and %u more connections refused or closed in the last second)", msg, d->refused_quiet);
        else
                dlog(LOG_WARNING, event, NULL, "%s", msg);
        d->refused_log_ns = now;
        d->refused_quiet = 0;
}

/* A refused connection is told why in one JSON-RPC error line (its socket buffer is empty: the
 * line fits), then closed. */
static void refuse_connection(daemon_state *d, int fd, uid_t uid, const char *why)
{
        json_t *msg = json_pack("{ss sn s{si ss s{ss}}}", "jsonrpc", "2.0", "id", "error", "code", RPC_SERVER_ERROR, "message", why, "data",
                                "code", RPC_CAPACITY);
        size_t len = 0;
        char *text = msg ? nsbox_json_dumps(msg, &len) : NULL;
        json_decref(msg);
        if (text) {
                text[len] = '\n'; /* in place of the terminating NUL */
                (void)!send(fd, text, len + 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        free(text);
        log_limited(d, "client.too_many", "refused a connection of uid %u: %s", (unsigned)uid, why);
}

/* Connections holding an unfinished request line longer than request_timeout, and new ones that
 * said nothing within handshake_timeout while their uid is near its cap, are closed (after an
 * error line).  Others may stay idle as long as they like: they hold sandboxes and streams.
 * Returns when to look again (0: no need). */
uint64_t client_deadlines(daemon_state *d, uint64_t now)
{
        const nsbox_dconfig *cf = d->conf;
        uint64_t next = 0;
        for (client *c = d->clients; c; c = c->next) {
                uint64_t at = 0;
                if (c->eof)
                        continue;
                if (c->partial_since_ns && cf->request_timeout_ms) {
                        at = c->partial_since_ns + cf->request_timeout_ms * 1000000;
                        if (now >= at) {
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "timeout",
                                            "request line not finished within %.3g s (request_timeout): closing the connection",
                                            (double)cf->request_timeout_ms / 1000.0);
                                log_limited(d, "client.timeout", "closed a connection of uid %u: a request line not finished within %.3g s",
                                            (unsigned)c->uid, (double)cf->request_timeout_ms / 1000.0);
                                c->eof = true;
                        }
                } else if (!c->spoke && cf->handshake_timeout_ms && (c->crowded || near_connection_cap(d, c->uid))) {
                        /* once seen in a crowd near the cap, closed at its time even if others of
                         * the crowd, closed first, took the uid below it */
                        c->crowded = true;
                        at = c->accepted_ns + cf->handshake_timeout_ms * 1000000;
                        if (now >= at) {
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "timeout",
                                            "nothing sent within %.3g s (handshake_timeout) while uid %u is near max_connections_per_uid: closing the connection",
                                            (double)cf->handshake_timeout_ms / 1000.0, (unsigned)c->uid);
                                log_limited(d, "client.timeout", "closed a connection of uid %u: nothing sent within %.3g s near max_connections_per_uid",
                                            (unsigned)c->uid, (double)cf->handshake_timeout_ms / 1000.0);
                                c->eof = true;
                        }
                }
                if (c->eof)
                        at = now; /* removed once its error line is out, at the end of this round */
                if (at && (!next || at < next))
                        next = at;
        }
        return next;
}

static void drop_fds(client *c)
{
        while (c->n_fds)
                close(c->fds[--c->n_fds]);
}

int client_take_fd(client *c)
{
        if (!c->n_fds)
                return -1;
        int fd = c->fds[0];
        memmove(c->fds, c->fds + 1, --c->n_fds * sizeof(int));
        return fd;
}

/* read(2), with the descriptors a client passes (SCM_RIGHTS) queued for its "fd": true calls.
 * More than one with one message, more than CLIENT_MAX_FDS queued, or a truncated control
 * message: which request they were for cannot be told: -EPROTO (the connection is closed). */
static ssize_t client_recv(client *c, char *buf, size_t n)
{
        unsigned got;
        bool lost;
        ssize_t k = nsbox_recv_fds(c->fd, buf, n, c->fds, &c->n_fds, CLIENT_MAX_FDS, &got, &lost);
        if (k >= 0 && (lost || got > 1)) {
                drop_fds(c);
                errno = EPROTO;
                return -1;
        }
        return k;
}

void client_remove(daemon_state *d, client *c)
{
        for (client **pp = &d->clients; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        if (c->fd >= 0) { /* an HTTP request's client holds no connection of its own */
                d->n_clients--;
                use_connection(d, c, -1);
        }
        calls_client_gone(d, c);
        /* sandboxes created with close_with_client go with their client: a session (nsbox mcp,
         * a library user) killed with SIGKILL leaves nothing behind */
        for (sandbox *s = d->sandboxes, *next; s; s = next) {
                next = s->next;
                if (s->bound_client == c->serial)
                        sandbox_remove(d, s, "not_found", "was destroyed: the client it was created with (close_with_client) disconnected");
        }
        if (c->fd >= 0) {
                epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
        }
        drop_fds(c);
        sb_release(&c->in);
        nsbox_queue_release(&c->out);
        free(c);
}

void client_readable(daemon_state *d, client *c)
{
        char buf[65536];
        for (int round = 0; round < 64 && c->out.len < CLIENT_HIGH; round++) {
                ssize_t n = client_recv(c, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0 && errno == EPROTO) {
                        reply_error(c, json_null(), RPC_INVALID_REQUEST, "invalid_argument",
                                    "descriptors: one at most with each request, %u at most queued: closing the connection", CLIENT_MAX_FDS);
                        c->eof = true;
                        return;
                }
                if (n <= 0) {
                        c->eof = true;
                        return;
                }
                c->spoke = true;
                size_t at = 0;
                while (at < (size_t)n) {
                        char *nl = memchr(buf + at, '\n', (size_t)n - at);
                        size_t piece = nl ? (size_t)(nl - (buf + at)) : (size_t)n - at;
                        const uid_use *u = use_of(d, c->uid);
                        if (!c->discarding && u && u->buffered + piece > d->conf->max_request_bytes_per_uid) {
                                /* the uid's unfinished lines together: bounded, whatever the number of connections */
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "too_large",
                                            "requests of uid %u buffered in nsboxd would pass max_request_bytes_per_uid (%zu bytes): closing the connection",
                                            (unsigned)c->uid, (size_t)d->conf->max_request_bytes_per_uid);
                                log_limited(d, "client.too_large", "closed a connection of uid %u: its requests buffered would pass max_request_bytes_per_uid",
                                            (unsigned)c->uid);
                                sb_release(&c->in);
                                use_buffered(d, c);
                                c->partial_since_ns = 0;
                                c->eof = true;
                                return;
                        }
                        if (nl && !c->discarding && !c->in.len) { /* a whole line read: taken where it is */
                                if (piece)
                                        handle_request(d, c, buf + at, piece);
                                at += piece + 1;
                                c->partial_since_ns = 0;
                                continue;
                        }
                        if (!c->discarding && sb_append(&c->in, buf + at, piece) < 0) {
                                c->discarding = true;
                                sb_release(&c->in);
                        }
                        use_buffered(d, c);
                        at += piece + (nl ? 1 : 0);
                        if (!nl)
                                break;
                        c->partial_since_ns = 0;
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
                        use_buffered(d, c);
                }
                if ((c->in.len || c->discarding) && !c->partial_since_ns)
                        c->partial_since_ns = now_ns();
                if (c->n_fds && !c->in.len && !c->discarding) { /* sent with requests that did not ask for them */
                        drop_fds(c);
                        reply_error(c, json_null(), RPC_INVALID_REQUEST, "invalid_argument",
                                    "a descriptor came with a request without \"fd\": true: closed");
                }
                /* a short read emptied the socket: epoll (level-triggered) says when more comes,
                 * without a read that fails with EAGAIN on every call */
                if ((size_t)n < sizeof(buf))
                        return;
        }
}

/* nsboxd's own uid, root, and the configuration's clients (by uid, or by any of their groups) */
static bool client_allowed(const daemon_state *d, int fd, const struct ucred *cred)
{
        const nsbox_dconfig *cf = d->conf;
        if (cred->uid == geteuid() || cred->uid == 0)
                return true;
        for (size_t i = 0; i < cf->n_client_uids; i++)
                if (cf->client_uids[i] == cred->uid)
                        return true;
        if (!cf->n_client_gids)
                return false;
        gid_t groups[NGROUPS_MAX_PEER];
        socklen_t len = sizeof(groups);
        int n = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0 ? (int)(len / sizeof(gid_t)) : 0;
        for (size_t i = 0; i < cf->n_client_gids; i++) {
                if (cf->client_gids[i] == cred->gid)
                        return true;
                for (int j = 0; j < n; j++)
                        if (groups[j] == cf->client_gids[i])
                                return true;
        }
        return false;
}

void accept_clients(daemon_state *d)
{
        for (;;) {
                int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                struct ucred cred;
                socklen_t len = sizeof(cred);
                client *c = NULL;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
                    !(c = calloc(1, sizeof(*c)))) {
                        close(fd);
                        continue;
                }
                /* a sandbox reaches the socket through a bind that shows its directory, as a uid
                 * that maps to its owner's: only processes of our own namespaces are clients */
                char why[160];
                if (nsbox_peer_check(fd, why, sizeof(why)) < 0) {
                        dlog(LOG_WARNING, "client.refused", NULL, "refused a client of uid %u pid %d: %s", (unsigned)cred.uid, (int)cred.pid, why);
                        static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":\""
                                NSBOX_PEER_REFUSED_MSG "\",\"data\":{\"code\":\"permission_denied\"}}}\n";
                        (void)!send(fd, line, sizeof(line) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                        close(fd);
                        free(c);
                        continue;
                }
                /* the socket is 0600 (0666 with clients configured), the directory or a bind could be
                 * shared: check each connection */
                if (!client_allowed(d, fd, &cred)) {
                        dlog(LOG_WARNING, "client.refused", NULL, "refused a client of uid %u", (unsigned)cred.uid);
                        close(fd);
                        free(c);
                        continue;
                }
                if (connection_refused(d, cred.uid, why, sizeof(why))) {
                        refuse_connection(d, fd, cred.uid, why);
                        close(fd);
                        free(c);
                        continue;
                }
                c->fd = fd;
                c->uid = cred.uid;
                c->gid = cred.gid;
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
                c->accepted_ns = now_ns();
                use_connection(d, c, +1);
        }
}
