/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The port proxy: E2b-Sandbox-Port N (or an N-ID host) to port N inside the sandbox's own
 * network namespace, at 127.0.0.1 (then [::1] when v4 is refused).
 *
 * The sockets: a short-lived child of nsboxd joins the sandbox's network namespace (and, for a
 * user's nsboxd, its user namespace, which the kernel asks for first) through the sandbox's
 * pidfd, makes one v4 and one v6 socket there and hands them back; a socket keeps the namespace
 * it was made in.  nsboxd itself never leaves its own namespaces (docs/security.md).
 *
 * HTTP goes through libcurl's multi interface on an epoll of the proxy's own, nested in
 * nsboxd's: the request's body streams to the port (on_body), the port's answer streams back
 * (http_stream_*).  Every transfer has a fresh connection and none is ever reused, since
 * 127.0.0.1:N is another place in every sandbox.  A WebSocket upgrade is sent on a raw socket
 * (http_proxy_ws.c). */
#include "http_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../dlog.h"

/* A request's upstream transfer (r->state). */
typedef struct pxreq {
        struct pxreq *next, **pprev;
        proxy_state *p;
        hreq *r;
        uint64_t sandbox;
        CURL *easy;
        int sock, fd6;          /* the socket curl takes next; the [::1] one kept for a retry */
        bool v6, upload, headers_done, write_paused, read_paused, body_read;
        unsigned fail_status;   /* answered so instead of a curl error */
        struct curl_slist *hdrs;
        strbuf resp;            /* the answer's headers: name NUL value NUL ... */
        char *ctype;
        nsbox_queue up;         /* request body bytes curl has not taken yet */
        uint64_t deadline_ns;
        char url[48];           /* scheme, host and port: the path follows in full_url */
        char *full_url;
} pxreq;

/* ---- sockets in the sandbox's network namespace ---------------------------------------------- */

static void child_make_sockets(int chan, int pidfd)
{
        int e = 0, fds[2] = { -1, -1 }, n = 0;
        /* not dumpable: nothing inside may trace or read it while it is in the sandbox's namespaces */
        prctl(PR_SET_DUMPABLE, 0);
        int lo = chan < pidfd ? chan : pidfd, hi = chan < pidfd ? pidfd : chan;
        if (lo > 0)
                close_range(0, (unsigned)lo - 1, 0);
        if (hi > lo + 1)
                close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
        close_range((unsigned)hi + 1, ~0u, 0);
        /* root has every capability over the sandbox's user namespace; a user must join it */
        if (setns(pidfd, CLONE_NEWNET | (geteuid() ? CLONE_NEWUSER : 0)) < 0)
                e = errno;
        else {
                fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                fds[1] = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fds[0] < 0)
                        e = errno;
                else
                        n = fds[1] < 0 ? 1 : 2;
        }
        char cbuf[CMSG_SPACE(sizeof(fds))] = { 0 };
        struct iovec iov = { .iov_base = &e, .iov_len = sizeof(e) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n) {
                msg.msg_control = cbuf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
        }
        _exit(sendmsg(chan, &msg, MSG_NOSIGNAL) < 0);
}

/* A v4 and (if the sandbox has v6) a v6 TCP socket of s's network namespace, non-blocking:
 * 0, or -errno with why. */
int proxy_sockets(sandbox *s, int ret[2], char *why, size_t n)
{
        ret[0] = ret[1] = -1;
        int pidfd = s->sup.sb.pidfd;
        if (pidfd < 0 || !s->sup.sb.pid) {
                snprintf(why, n, "sandbox %s is not running", s->sup.id);
                return -ESRCH;
        }
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                snprintf(why, n, "socketpair: %s", strerror(errno));
                return -errno;
        }
        pid_t pid = fork();
        if (pid == 0)
                child_make_sockets(sp[1], pidfd);
        int e = errno;
        close(sp[1]);
        if (pid < 0) {
                close(sp[0]);
                snprintf(why, n, "fork: %s", strerror(e));
                return -e;
        }
        struct timeval tv = { .tv_sec = 5 }; /* it only makes two sockets: never wait longer */
        setsockopt(sp[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        int err = 0;
        char cbuf[CMSG_SPACE(sizeof(int) * 2)];
        struct iovec iov = { .iov_base = &err, .iov_len = sizeof(err) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
        ssize_t got;
        while ((got = recvmsg(sp[0], &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
                ;
        e = got < 0 ? errno : 0;
        close(sp[0]);
        if (got <= 0)
                kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        for (struct cmsghdr *cm = got > 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm; cm = CMSG_NXTHDR(&msg, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        memcpy(ret, CMSG_DATA(cm), sizeof(int) * (k > 2 ? 2 : k));
                }
        if (got != (ssize_t)sizeof(err) || err || ret[0] < 0) {
                e = err ? err : e ? e : EIO;
                for (int i = 0; i < 2; i++)
                        if (ret[i] >= 0)
                                close(ret[i]);
                ret[0] = ret[1] = -1;
                snprintf(why, n, "cannot enter the network of sandbox %s: %s", s->sup.id, strerror(e));
                return -e;
        }
        return 0;
}

/* ---- what the request may carry to the port ------------------------------------------------- */

/* Hop-by-hop headers (RFC 9110 7.6.1) and nsbox's own credentials and routing, which the
 * sandbox must never see: an API key opens every sandbox of its user. */
bool proxy_header_dropped(hreq *r, const char *name, bool upgrade)
{
        static const char *const hop[] = { "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate",
                                           "TE", "Trailer", "Transfer-Encoding", "X-Access-Token", "X-API-KEY",
                                           "E2B-Traffic-Access-Token", "E2b-Sandbox-Id", "E2b-Sandbox-Port" };
        for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
                if (!strcasecmp(name, hop[i]))
                        return true;
        if (!upgrade && (!strcasecmp(name, "Connection") || !strcasecmp(name, "Upgrade")))
                return true;
        if (!strcasecmp(name, "Authorization") && r->by_key && !http_header(r, "X-API-KEY"))
                return true; /* it was the key (Bearer) */
        return false;
}

static void url_escape(strbuf *u, const char *s, const char *keep)
{
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr(keep, c))
                        sb_append(u, s, 1);
                else
                        sb_appendf(u, "%%%02X", c);
        }
}

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        (void)kind;
        strbuf *u = cls;
        sb_append(u, strchr(u->buf, '?') ? "&" : "?", 1);
        url_escape(u, key, "-._~!$'()*,;:@/?");
        if (value) {
                sb_append(u, "=", 1);
                url_escape(u, value, "-._~!$'()*,;:@/?");
        }
        return MHD_YES;
}

/* The request's path and query, escaped again (libmicrohttpd hands them over decoded). */
char *proxy_target(hreq *r)
{
        strbuf u;
        sb_init(&u, 64 * 1024);
        url_escape(&u, r->url, "-._~!$&'()*+,;=:@/");
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &u);
        if (!u.buf || u.len >= 64 * 1024 - 1) {
                sb_release(&u);
                return NULL;
        }
        return u.buf;
}

unsigned proxy_count(proxy_state *p, uint64_t sandbox)
{
        unsigned n = 0;
        for (pxreq *x = p->reqs; x; x = x->next)
                n += x->sandbox == sandbox;
        return n + ws_count(p, sandbox);
}

/* ---- libcurl's callbacks ------------------------------------------------------------------- */

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
        (void)easy;
        (void)socketp;
        proxy_state *p = userp;
        struct epoll_event ev = { .data.u64 = (uint64_t)s << 3 | PX_TAG_CURL };
        if (what == CURL_POLL_REMOVE) {
                epoll_ctl(p->epfd, EPOLL_CTL_DEL, s, NULL);
                return 0;
        }
        ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
        if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, s, &ev) < 0 && errno == ENOENT)
                epoll_ctl(p->epfd, EPOLL_CTL_ADD, s, &ev);
        return 0;
}

static int on_timer(CURLM *multi, long ms, void *userp)
{
        (void)multi;
        proxy_state *p = userp;
        p->timer_ns = ms < 0 ? 0 : now_ns() + (uint64_t)ms * 1000000;
        if (ms == 0)
                p->timer_ns = 1; /* due now */
        return 0;
}

static curl_socket_t open_socket(void *cls, curlsocktype purpose, struct curl_sockaddr *addr)
{
        (void)purpose;
        (void)addr;
        pxreq *x = cls;
        return x->sock >= 0 ? steal_fd(&x->sock) : CURL_SOCKET_BAD; /* one attempt per socket */
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *cls)
{
        pxreq *x = cls;
        size_t len = size * nitems, n = len;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                n--;
        if (len >= 5 && !strncmp(buf, "HTTP/", 5)) { /* a new head (after a 1xx) */
                x->resp.len = 0;
                if (x->resp.buf)
                        x->resp.buf[0] = 0;
                free(steal_pointer(&x->ctype));
                return len;
        }
        if (n == 0) { /* the end of a head */
                long status = 0;
                curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
                if (status < 200)
                        return len;
                if (status > 599) {
                        x->fail_status = 502;
                        return 0;
                }
                if (http_stream_begin(x->r, (unsigned)status, x->ctype) < 0) {
                        x->fail_status = 429;
                        return 0;
                }
                x->headers_done = true;
                x->deadline_ns = now_ns() + PROXY_IDLE_TIMEOUT_NS;
                return len;
        }
        if (buf[0] == ' ' || buf[0] == '\t')
                return len; /* an obsolete folded line */
        char *colon = memchr(buf, ':', n);
        if (!colon || colon == buf)
                return len;
        size_t nl = (size_t)(colon - buf);
        const char *v = colon + 1;
        while (v < buf + n && (*v == ' ' || *v == '\t'))
                v++;
        char name[128];
        if (nl >= sizeof(name))
                return len;
        memcpy(name, buf, nl);
        name[nl] = 0;
        if (!strcasecmp(name, "Content-Type")) {
                free(x->ctype);
                x->ctype = strndup(v, (size_t)(buf + n - v));
                return len;
        }
        /* libmicrohttpd frames the answer itself */
        if (!strcasecmp(name, "Content-Length") || !strcasecmp(name, "Connection") || proxy_header_dropped(x->r, name, false))
                return len;
        if (sb_append(&x->resp, name, nl + 1) < 0 || sb_append(&x->resp, v, (size_t)(buf + n - v)) < 0 ||
            sb_append(&x->resp, "", 1) < 0) {
                x->fail_status = 502; /* more than PROXY_HEAD_MAX of headers */
                return 0;
        }
        return len;
}

static void add_headers(hreq *r, struct MHD_Response *resp)
{
        pxreq *x = r->state;
        for (size_t i = 0; x && i < x->resp.len;) {
                const char *name = x->resp.buf + i, *value = name + strlen(name) + 1;
                MHD_add_response_header(resp, name, value);
                i = (size_t)(value - x->resp.buf) + strlen(value) + 1;
        }
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *cls)
{
        pxreq *x = cls;
        size_t len = size * nmemb;
        if (x->r->sout.len >= HTTP_STREAM_HIGH) { /* its reader is behind: wait (proxy_pump) */
                if (!x->write_paused)
                        x->p->paused++;
                x->write_paused = true;
                return CURL_WRITEFUNC_PAUSE;
        }
        x->deadline_ns = now_ns() + PROXY_IDLE_TIMEOUT_NS;
        return http_stream_write(x->r, data, len) < 0 ? 0 : len;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *cls)
{
        pxreq *x = cls;
        size_t max = size * nitems;
        if (!x->up.len) {
                if (x->r->body_complete)
                        return 0;
                x->read_paused = true;
                return CURL_READFUNC_PAUSE;
        }
        size_t n = x->up.len < max ? x->up.len : max;
        memcpy(buf, x->up.data + x->up.start, n);
        x->up.start += n;
        x->up.len -= n;
        if (!x->up.len)
                x->up.start = 0;
        x->body_read = true;
        x->deadline_ns = now_ns() + PROXY_HEADERS_TIMEOUT_NS;
        http_wake(x->r); /* room again: libmicrohttpd reads on */
        return n;
}

static void unpause(pxreq *x)
{
        if (x->easy)
                curl_easy_pause(x->easy, (x->write_paused ? CURLPAUSE_RECV : 0) | (x->read_paused ? CURLPAUSE_SEND : 0));
}

/* The request's body as it comes, PROXY_UPLOAD_BUF at a time. */
static size_t on_body(hreq *r, const char *data, size_t len)
{
        pxreq *x = r->state;
        if (!x || !x->easy)
                return len; /* answered already: the rest is dropped */
        size_t take = 0;
        if (data) {
                size_t room = x->up.len < PROXY_UPLOAD_BUF ? PROXY_UPLOAD_BUF - x->up.len : 0;
                take = len < room ? len : room;
                if (take && nsbox_queue_append(&x->up, data, take) < 0)
                        take = 0;
        }
        if (x->read_paused && (take || !data)) {
                x->read_paused = false;
                unpause(x);
        }
        return take;
}

/* ---- one transfer -------------------------------------------------------------------------- */

static void px_release(pxreq *x)
{
        if (x->easy) {
                curl_multi_remove_handle(x->p->multi, x->easy);
                curl_easy_cleanup(x->easy);
                x->easy = NULL;
        }
        if (x->write_paused)
                x->p->paused--;
        x->write_paused = false;
        if (x->sock >= 0)
                close(steal_fd(&x->sock));
        if (x->fd6 >= 0)
                close(steal_fd(&x->fd6));
}

static void px_free(void *state)
{
        pxreq *x = state;
        px_release(x);
        *x->pprev = x->next;
        if (x->next)
                x->next->pprev = x->pprev;
        curl_slist_free_all(x->hdrs);
        sb_release(&x->resp);
        nsbox_queue_release(&x->up);
        free(x->ctype);
        free(x->full_url);
        free(x);
}

static enum MHD_Result add_req_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
        (void)kind;
        pxreq *x = cls;
        if (proxy_header_dropped(x->r, name, false) || !strcasecmp(name, "Expect") ||
            (x->upload && !strcasecmp(name, "Content-Length")))
                return MHD_YES;
        char *line = NULL;
        if (asprintf(&line, "%s: %s", name, value ? value : "") < 0)
                return MHD_NO;
        struct curl_slist *l = curl_slist_append(x->hdrs, line);
        free(line);
        if (!l)
                return MHD_NO;
        x->hdrs = l;
        return MHD_YES;
}

static int px_configure(pxreq *x, const char *target)
{
        hreq *r = x->r;
        CURL *e = x->easy;
        const char *cl = http_header(r, "Content-Length"), *te = http_header(r, "Transfer-Encoding");
        long long length = -1;
        if (cl) {
                char *end;
                length = strtoll(cl, &end, 10);
                if (*cl < '0' || *cl > '9' || *end || length < 0)
                        return -EINVAL;
        }
        x->upload = length > 0 || te;
        if (asprintf(&x->full_url, "%s%s", x->url, target) < 0)
                return -ENOMEM;
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_req_header, x);
        struct curl_slist *l = curl_slist_append(x->hdrs, "Expect:"); /* no 100-continue round */
        if (l)
                x->hdrs = l;
        curl_easy_setopt(e, CURLOPT_PRIVATE, x);
        curl_easy_setopt(e, CURLOPT_URL, x->full_url);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
        curl_easy_setopt(e, CURLOPT_PROXY, ""); /* never a proxy of nsboxd's environment */
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(e, CURLOPT_HTTP_CONTENT_DECODING, 0L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)PROXY_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
        if (!strcmp(r->method, "HEAD"))
                curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        else if (strcmp(r->method, "GET") || x->upload)
                curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
        if (x->upload) {
                curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(e, CURLOPT_READDATA, x);
                if (length >= 0)
                        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)length);
        }
        return 0;
}

static void px_start(proxy_state *p, hreq *r, sandbox *s, int fds[2], const char *target)
{
        pxreq *x = calloc(1, sizeof(*x));
        if (!x) {
                close(fds[0]);
                if (fds[1] >= 0)
                        close(fds[1]);
                control_error(r, 500, "out of memory");
                return;
        }
        x->p = p;
        x->r = r;
        x->sandbox = s->serial;
        x->sock = fds[0];
        x->fd6 = fds[1];
        sb_init(&x->resp, PROXY_HEAD_MAX);
        snprintf(x->url, sizeof(x->url), "http://127.0.0.1:%u", r->port);
        x->next = p->reqs;
        if (x->next)
                x->next->pprev = &x->next;
        x->pprev = &p->reqs;
        p->reqs = x;
        r->state = x;
        r->state_free = px_free;
        r->on_response = add_headers;
        x->easy = curl_easy_init();
        int ret = x->easy ? px_configure(x, target) : -ENOMEM;
        if (ret == 0 && curl_multi_add_handle(p->multi, x->easy) != CURLM_OK)
                ret = -ENOMEM;
        if (ret < 0) {
                px_release(x);
                control_error(r, ret == -EINVAL ? 400 : 500, ret == -EINVAL ? "bad Content-Length" : "out of memory");
                return;
        }
        if (x->upload)
                r->on_body = on_body;
        x->deadline_ns = now_ns() + PROXY_HEADERS_TIMEOUT_NS;
}

/* A transfer ended: a stream's end, a retry on [::1], or the error as JSON. */
static void px_done(pxreq *x, CURLcode res)
{
        hreq *r = x->r;
        if (res == CURLE_COULDNT_CONNECT && !x->headers_done && !x->v6 && x->fd6 >= 0 && !x->body_read) {
                curl_multi_remove_handle(x->p->multi, x->easy);
                x->v6 = true;
                x->sock = steal_fd(&x->fd6);
                snprintf(x->url, sizeof(x->url), "http://[::1]:%u", r->port);
                const char *path = x->full_url + strcspn(x->full_url + 7, "/") + 7;
                char *u = NULL;
                if (asprintf(&u, "%s%s", x->url, path) >= 0) {
                        free(x->full_url);
                        x->full_url = u;
                        curl_easy_setopt(x->easy, CURLOPT_URL, u);
                        if (curl_multi_add_handle(x->p->multi, x->easy) == CURLM_OK)
                                return;
                }
        }
        px_release(x);
        if (x->headers_done) {
                /* cut short (its sandbox went, the server died): the client sees a cut, as the
                 * SDKs do when E2B's VM goes, not a whole answer */
                if (res == CURLE_OK)
                        http_stream_end(r);
                else
                        http_stream_abort(r);
                return;
        }
        if (x->fail_status == 429)
                control_error(r, 429, "too many streams at once for this user");
        else if (x->fail_status)
                control_error(r, 502, "port %u of sandbox %s answered with a malformed head", r->port, r->sandbox_id);
        else if (res == CURLE_COULDNT_CONNECT)
                control_error(r, 502, "nothing listens on port %u of sandbox %s", r->port, r->sandbox_id);
        else if (res == CURLE_OPERATION_TIMEDOUT)
                control_error(r, 504, "port %u of sandbox %s did not answer in time", r->port, r->sandbox_id);
        else
                control_error(r, 502, "port %u of sandbox %s: %s", r->port, r->sandbox_id, curl_easy_strerror(res));
}

static void check_done(proxy_state *p)
{
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(p->multi, &left)))
                if (m->msg == CURLMSG_DONE) {
                        pxreq *x = NULL;
                        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                        if (x)
                                px_done(x, m->data.result);
                }
}

/* ---- the request, and what http.c calls ---------------------------------------------------- */

void proxy_request(hreq *r)
{
        proxy_state *p = http_proxy(r->d);
        sandbox *s = http_sandbox(r);
        if (!p || !s) {
                control_error(r, 502, "sandbox %s is gone", r->sandbox_id);
                return;
        }
        if (!s->ready || s->paused) {
                control_error(r, 502, "sandbox %s is not running", r->sandbox_id);
                return;
        }
        if (proxy_count(p, s->serial) >= PROXY_PER_SANDBOX) {
                control_error(r, 429, "sandbox %s has %u proxied connections already", r->sandbox_id, PROXY_PER_SANDBOX);
                return;
        }
        char *target = proxy_target(r);
        if (!target) {
                control_error(r, 414, "the request's target is too long");
                return;
        }
        char why[256];
        int fds[2];
        if (proxy_sockets(s, fds, why, sizeof(why)) < 0) {
                free(target);
                control_error(r, 502, "%s", why);
                return;
        }
        if (proxy_is_upgrade(r))
                ws_start(p, r, s, fds, target);
        else
                px_start(p, r, s, fds, target);
        free(target);
}

int proxy_open(daemon_state *d, proxy_state **ret, nsbox_error *err)
{
        if (curl_global_init(CURL_GLOBAL_NOTHING) != CURLE_OK)
                return nsbox_err(err, EIO, "http: libcurl");
        proxy_state *p = calloc(1, sizeof(*p));
        if (!p)
                return nsbox_err(err, ENOMEM, "http");
        p->d = d;
        p->epfd = epoll_create1(EPOLL_CLOEXEC);
        p->multi = curl_multi_init();
        if (p->epfd < 0 || !p->multi) {
                int e = p->epfd < 0 ? errno : ENOMEM;
                if (p->epfd >= 0)
                        close(p->epfd);
                if (p->multi)
                        curl_multi_cleanup(p->multi);
                free(p);
                return nsbox_err(err, e, "http: the port proxy");
        }
        curl_multi_setopt(p->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(p->multi, CURLMOPT_SOCKETDATA, p);
        curl_multi_setopt(p->multi, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(p->multi, CURLMOPT_TIMERDATA, p);
        *ret = p;
        return p->epfd;
}

void proxy_run(proxy_state *p)
{
        struct epoll_event ev[64];
        int n = p ? epoll_wait(p->epfd, ev, 64, 0) : 0;
        for (int i = 0; i < n; i++) {
                uint64_t key = ev[i].data.u64;
                if ((key & 7) == PX_TAG_CURL) {
                        int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) | (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                                    (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
                        int running;
                        curl_multi_socket_action(p->multi, (curl_socket_t)(key >> 3), flags, &running);
                } else
                        ws_event(p, key, ev[i].events);
        }
        if (n > 0)
                check_done(p);
}

void proxy_pump(proxy_state *p)
{
        if (!p || !p->paused)
                return;
        for (pxreq *x = p->reqs; x; x = x->next)
                if (x->write_paused && x->r->sout.len < HTTP_STREAM_HIGH / 2) {
                        x->write_paused = false;
                        p->paused--;
                        unpause(x);
                }
        check_done(p);
}

int proxy_timeout(proxy_state *p, int timeout)
{
        if (!p)
                return timeout;
        uint64_t now = now_ns(), next = 0;
        if (p->timer_ns && p->timer_ns <= now) {
                p->timer_ns = 0;
                int running;
                curl_multi_socket_action(p->multi, CURL_SOCKET_TIMEOUT, 0, &running);
                check_done(p);
        }
        for (pxreq *x = p->reqs, *nx; x; x = nx) {
                nx = x->next;
                if (x->easy && x->deadline_ns <= now) { /* no answer, or no byte for too long */
                        if (x->headers_done)
                                px_done(x, CURLE_OK);
                        else
                                px_done(x, CURLE_OPERATION_TIMEDOUT);
                }
                if (x->easy && (!next || x->deadline_ns < next))
                        next = x->deadline_ns;
        }
        uint64_t wnext = ws_tick(p, now);
        if (wnext && (!next || wnext < next))
                next = wnext;
        if (p->timer_ns && (!next || p->timer_ns < next))
                next = p->timer_ns;
        return timeout_until(timeout, next, now);
}

void proxy_close(proxy_state *p)
{
        if (!p)
                return;
        while (p->reqs) /* requests MHD did not complete */
                px_free(p->reqs);
        curl_multi_cleanup(p->multi);
        close(p->epfd);
        free(p);
}
