/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's code tools (serve.h): run_code, create_code_context, list_code_contexts,
 * restart_code_context and remove_code_context.  Each call is one HTTP/1.1 request to the code
 * interpreter's server (rootfs/code-interpreter/server.py) on the sandbox's 127.0.0.1:49999, a
 * non-blocking socket in the agent's epoll loop, so a long cell holds no other call.  When
 * nothing listens there, the agent starts the server (built in: interp_source.c) as a detached
 * exec tagged "code-interpreter", as nsboxd's code-interpreter template does, and connects again
 * every 50 ms until it answers or exits.
 *
 * Whatever listens on that port is the sandbox's and may be hostile: every size and every wait
 * is bounded, its answer is parsed strictly, and what it says only goes back to the caller. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "interp_source.h"
#include "serve.h"

#define MAX_CODE_CALLS 32                    /* code calls at once, per sandbox */
#define CODE_MAX (1u << 20)                  /* bytes of a cell, the server's own limit */
#define HEAD_MAX (16u << 10)                 /* status line and headers of an answer */
#define BODY_MAX (1u << 20)                  /* an answer that is not a cell's stream */
#define LINE_MAX_BYTES (16u << 20)           /* one line of a cell's stream (a picture) */
#define EXEC_MAX (16u << 20)                 /* results and logs kept for the result */
#define SEC_NS 1000000000ull
#define START_WAIT_S 90                      /* the server starting (its default kernel) */
#define CONTEXT_WAIT_S 90                    /* a context's kernel starting or restarting */
#define RETRY_NS (50ull * 1000000)
#define DEFAULT_TIMEOUT_S 300
#define TIMEOUT_GRACE_S 15                   /* the server interrupts at the timeout, restarts 5 s later */

typedef enum { CC_WAIT, CC_CONNECTING, CC_SENDING, CC_HEAD, CC_BODY } cc_state;
typedef enum { BODY_TO_EOF, BODY_LENGTH, BODY_CHUNK_SIZE, BODY_CHUNK_DATA, BODY_CHUNK_END, BODY_TRAILER } body_mode;

typedef struct code_call {
        struct code_call *next;
        json_int_t call_id;
        uint64_t serial;
        const char *tool;      /* canonical name */
        char context[65];      /* restart/remove: the context named */
        int fd;
        uint32_t events;
        cc_state st;
        bool stream, paused;
        pid_t server;          /* the server this call started or waits for; 0: none yet */
        uint64_t retry_ns, start_deadline_ns, deadline_ns, wait_ns;
        strbuf req;            /* the request, sent from req_off */
        size_t req_off;
        strbuf in;             /* bytes read and not yet parsed */
        int status;
        body_mode mode;
        uint64_t left;         /* bytes of the body (BODY_LENGTH) or of the chunk left */
        strbuf body;           /* a plain answer, or the cell's line so far */
        json_t *exec;          /* run_code: the Execution so far */
        size_t exec_bytes;
        bool ended, truncated;
} code_call;

/* A parse step: more bytes needed, the answer complete, or a failure (e set). */
enum { NEED_MORE = 0, COMPLETE = 1, FAILED = -1 };

bool code_tool(const char *tool)
{
        return !strcmp(tool, "run_code") || !strcmp(tool, "create_code_context") || !strcmp(tool, "list_code_contexts") ||
               !strcmp(tool, "restart_code_context") || !strcmp(tool, "remove_code_context");
}

static void cc_free(agent *a, code_call *cc)
{
        for (code_call **pp = &a->codes; *pp; pp = &(*pp)->next)
                if (*pp == cc) {
                        *pp = cc->next;
                        break;
                }
        a->n_codes--;
        if (cc->fd >= 0) {
                epoll_ctl(a->epfd, EPOLL_CTL_DEL, cc->fd, NULL);
                close(cc->fd); /* the server sees its client gone: it interrupts the cell */
        }
        sb_release(&cc->req);
        sb_release(&cc->in);
        sb_release(&cc->body);
        json_decref(cc->exec);
        free(cc);
}

static void cc_fail(agent *a, code_call *cc, const tool_error *e)
{
        send_tool_error(a, cc->call_id, e);
        cc_free(a, cc);
}

static void cc_answer(agent *a, code_call *cc, json_t *result)
{
        send_result(a, cc->call_id, result, NULL, 0);
        cc_free(a, cc);
}

/* ---- the server: started when nothing listens ---------------------------------------------- */

/* The last line of what the server said on stderr before it exited ("the code interpreter did
 * not start: ... (the host needs python3-ipykernel ...)"). */
static void last_line(const strbuf *sb, char *buf, size_t size)
{
        size_t end = sb->len;
        while (end > 0 && (sb->buf[end - 1] == '\n' || sb->buf[end - 1] == '\r'))
                end--;
        size_t start = end;
        while (start > 0 && sb->buf[start - 1] != '\n')
                start--;
        snprintf(buf, size, "%.*s", (int)(end - start), end > start ? sb->buf + start : "");
}

/* Nothing listens: wait for the running server, or start one; fails once the one it waited for
 * has exited, saying why. */
static int need_server(agent *a, code_call *cc, tool_error *e)
{
        proc *p = proc_tagged(a, NSBOX_INTERP_TAG);
        if (p && !p->exited) {
                cc->server = p->pid;
        } else if (cc->server) {
                char why[400] = "";
                if (p && p->pid == cc->server)
                        last_line(&p->err, why, sizeof(why));
                return tool_fail(e, TOOL_INTERNAL, "%s: %s", cc->tool, *why ? why : "the code interpreter exited before it was ready");
        } else if (!strcmp(cc->tool, "list_code_contexts")) {
                return COMPLETE; /* no server, no contexts: none is started to say so */
        } else if (cc->context[0]) { /* nothing to start a server for */
                return tool_fail(e, TOOL_NOT_FOUND, "%s: context '%s' not found (the code interpreter is not running)", cc->tool,
                                 cc->context);
        } else {
                char boot[160];
                snprintf(boot, sizeof(boot), NSBOX_INTERP_BOOT, nsbox_interp_source_len());
                json_t *params = json_pack("{s[sss] sb ss so}", "cmd", NSBOX_INTERP_PYTHON, "-c", boot, "detach", 1, "tag",
                                           NSBOX_INTERP_TAG, "stdin", json_stringn(nsbox_interp_source, nsbox_interp_source_len()));
                if (!params)
                        return tool_fail(e, TOOL_INTERNAL, "%s: out of memory", cc->tool);
                int r = proc_start_detached(a, params, &cc->server, e);
                json_decref(params);
                if (r < 0)
                        return tool_fail_wrap(e, "%s: start the code interpreter", cc->tool);
                if (!cc->server) { /* no python3: the message exec gives */
                        p = proc_tagged(a, NSBOX_INTERP_TAG);
                        char why[400] = "";
                        if (p)
                                last_line(&p->err, why, sizeof(why));
                        return tool_fail(e, TOOL_INTERNAL, "%s: the code interpreter: %s", cc->tool, *why ? why : "could not start");
                }
        }
        uint64_t now = now_ns();
        if (!cc->start_deadline_ns)
                cc->start_deadline_ns = now + START_WAIT_S * SEC_NS;
        cc->retry_ns = now + RETRY_NS;
        cc->st = CC_WAIT;
        return NEED_MORE;
}

/* ---- the connection ------------------------------------------------------------------------- */

static void cc_close(agent *a, code_call *cc)
{
        if (cc->fd < 0)
                return;
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, cc->fd, NULL);
        close(cc->fd);
        cc->fd = -1;
        cc->events = 0;
}

static void cc_connected(code_call *cc)
{
        cc->st = CC_SENDING;
        if (cc->wait_ns)
                cc->deadline_ns = now_ns() + cc->wait_ns;
}

static void list_empty(agent *a, code_call *cc)
{
        cc_answer(a, cc, json_pack("{s[]}", "contexts"));
}

/* Refused: the server is not listening (yet). */
static void refused(agent *a, code_call *cc)
{
        tool_error e = { 0 };
        cc_close(a, cc);
        int s = need_server(a, cc, &e);
        if (s == FAILED)
                cc_fail(a, cc, &e);
        else if (s == COMPLETE)
                list_empty(a, cc);
}

/* Connect (again); on loopback a refusal comes at once or, non-blocking, as SO_ERROR. */
static void cc_connect(agent *a, code_call *cc)
{
        tool_error e = { 0 };
        cc_close(a, cc);
        cc->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (cc->fd < 0) {
                tool_fail_errno(&e, errno, "%s: socket", cc->tool);
                cc_fail(a, cc, &e);
                return;
        }
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(NSBOX_INTERP_PORT), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int r = connect(cc->fd, (struct sockaddr *)&sin, sizeof(sin));
        int err = r < 0 ? errno : 0;
        if (err == ECONNREFUSED) {
                refused(a, cc);
                return;
        }
        if (err && err != EINPROGRESS) {
                tool_fail_errno(&e, err, "%s: connect to 127.0.0.1:%d", cc->tool, NSBOX_INTERP_PORT);
                cc_fail(a, cc, &e);
                return;
        }
        if (err)
                cc->st = CC_CONNECTING;
        else
                cc_connected(cc);
        if (nsbox_epoll_add(a->epfd, cc->fd, WATCH(cc->serial, WATCH_INOTIFY), &cc->events, EPOLLOUT) < 0) {
                tool_fail_errno(&e, errno, "%s: epoll", cc->tool);
                cc_fail(a, cc, &e);
        }
}

/* ---- the answer: status, headers, a body by length, chunked or to EOF ---------------------- */

static tool_code code_of_status(int status)
{
        switch (status) {
        case 400:
                return TOOL_INVALID_ARGUMENT;
        case 404:
                return TOOL_NOT_FOUND;
        case 409:
        case 429:
                return TOOL_CONFLICT;
        case 413:
                return TOOL_TOO_LARGE;
        default:
                return TOOL_INTERNAL;
        }
}

static int bad_answer(code_call *cc, tool_error *e, const char *what)
{
        return tool_fail(e, TOOL_INTERNAL, "%s: the code interpreter's answer is not valid HTTP: %s", cc->tool, what);
}

static int parse_head(code_call *cc, tool_error *e)
{
        char *end = cc->in.len ? memmem(cc->in.buf, cc->in.len, "\r\n\r\n", 4) : NULL;
        if (!end)
                return cc->in.len > HEAD_MAX ? bad_answer(cc, e, "headers too long") : NEED_MORE;
        size_t head_len = (size_t)(end - cc->in.buf) + 4;
        if (head_len > HEAD_MAX)
                return bad_answer(cc, e, "headers too long");
        *end = '\0';
        const char *s = cc->in.buf;
        if (strncmp(s, "HTTP/1.", 7) || (s[7] != '0' && s[7] != '1') || s[8] != ' ' || s[9] < '1' || s[9] > '5' || s[10] < '0' ||
            s[10] > '9' || s[11] < '0' || s[11] > '9' || (s[12] != ' ' && s[12] != '\r' && s[12] != '\0'))
                return bad_answer(cc, e, "status line");
        cc->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
        bool chunked = false, has_length = false;
        uint64_t length = 0;
        for (const char *line = strstr(s, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
                const char *h = line + 2;
                const char *eol = strstr(h, "\r\n");
                size_t n = eol ? (size_t)(eol - h) : strlen(h);
                char hdr[256];
                snprintf(hdr, sizeof(hdr), "%.*s", (int)(n < sizeof(hdr) - 1 ? n : sizeof(hdr) - 1), h);
                if (!strncasecmp(hdr, "content-length:", 15)) {
                        char *num = hdr + 15, *rest;
                        while (*num == ' ')
                                num++;
                        errno = 0;
                        unsigned long long v = strtoull(num, &rest, 10);
                        if (*num < '0' || *num > '9' || errno || (*rest && *rest != ' ') || (has_length && v != length))
                                return bad_answer(cc, e, "Content-Length");
                        has_length = true;
                        length = v;
                } else if (!strncasecmp(hdr, "transfer-encoding:", 18)) {
                        chunked = strcasestr(hdr + 18, "chunked") != NULL;
                }
        }
        memmove(cc->in.buf, cc->in.buf + head_len, cc->in.len - head_len);
        cc->in.len -= head_len;
        cc->in.buf[cc->in.len] = '\0';
        cc->mode = chunked ? BODY_CHUNK_SIZE : has_length ? BODY_LENGTH : BODY_TO_EOF;
        cc->left = length;
        cc->st = CC_BODY;
        /* an empty body by length (204, DELETE's answer): complete with the headers */
        return cc->mode == BODY_LENGTH && !length ? COMPLETE : NEED_MORE;
}

static const char *const languages[] = { "python", "python3", "py", "ipython", "javascript", "js", "node", "typescript", "ts", "r", "java", "bash", "sh", "shell", NULL };

/* A line of a cell's stream (server.py's Execution.line) into the Execution, and to the caller
 * as an event when streamed. */
static int cell_line(agent *a, code_call *cc, const char *line, size_t len, tool_error *e)
{
        if (len == 0)
                return NEED_MORE;
        json_t *m = json_loadb(line, len, 0, NULL);
        const char *type = json_string_value(json_object_get(m, "type"));
        if (!json_is_object(m) || !type) {
                json_decref(m);
                return bad_answer(cc, e, "a line of the cell's output is not a JSON object with a type");
        }
        bool keep = cc->exec_bytes + len <= EXEC_MAX;
        if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
                json_t *text = json_object_get(m, "text");
                if (json_is_string(text)) {
                        if (keep)
                                json_array_append(json_object_get(json_object_get(cc->exec, "logs"), type), text);
                        if (cc->stream)
                                send_frame(a, json_pack("{sI ss}", "id", cc->call_id, "event", type), json_string_value(text),
                                           json_string_length(text));
                }
        } else if (!strcmp(type, "result")) {
                json_object_del(m, "type");
                if (keep)
                        json_array_append(json_object_get(cc->exec, "results"), m);
                if (cc->stream)
                        send_frame(a, json_pack("{sI ss sO}", "id", cc->call_id, "event", "result", "result", m), NULL, 0);
        } else if (!strcmp(type, "error")) {
                json_object_del(m, "type");
                json_t *err = json_pack("{sO sO sO}", "name", json_object_get(m, "name") ?: json_null(), "value",
                                        json_object_get(m, "value") ?: json_null(), "traceback", json_object_get(m, "traceback") ?: json_null());
                if (err && cc->stream)
                        send_frame(a, json_pack("{sI ss sO}", "id", cc->call_id, "event", "error", "error", err), NULL, 0);
                json_object_set_new(cc->exec, "error", err ? err : json_null());
        } else if (!strcmp(type, "number_of_executions")) {
                json_t *n = json_object_get(m, "execution_count");
                if (json_is_integer(n))
                        json_object_set(cc->exec, "execution_count", n);
        } else if (!strcmp(type, "end_of_execution")) {
                cc->ended = true;
        }
        if (keep)
                cc->exec_bytes += len;
        else if (!strcmp(type, "stdout") || !strcmp(type, "stderr") || !strcmp(type, "result"))
                cc->truncated = true;
        json_decref(m);
        return NEED_MORE;
}

/* Body bytes: a cell's stream line by line, or any other answer whole (bounded). */
static int deliver(agent *a, code_call *cc, const char *data, size_t n, tool_error *e)
{
        bool lines = cc->exec && cc->status == 200;
        if (!lines) {
                if (sb_append(&cc->body, data, n) < 0)
                        return tool_fail(e, TOOL_TOO_LARGE, "%s: the code interpreter's answer is over %u bytes", cc->tool, BODY_MAX);
                return NEED_MORE;
        }
        while (n) {
                const char *nl = memchr(data, '\n', n);
                size_t k = nl ? (size_t)(nl - data) : n;
                if (sb_append(&cc->body, data, k) < 0)
                        return tool_fail(e, TOOL_TOO_LARGE, "%s: a line of the cell's output is over %u bytes", cc->tool, LINE_MAX_BYTES);
                if (!nl)
                        break;
                if (cell_line(a, cc, cc->body.buf ? cc->body.buf : "", cc->body.len, e) < 0)
                        return FAILED;
                cc->body.len = 0;
                data += k + 1;
                n -= k + 1;
        }
        return NEED_MORE;
}

/* What a line of the chunked body starts at p: its length up to CRLF, or -1 if none yet. */
static ssize_t crlf_line(const char *p, size_t avail)
{
        const char *c = avail >= 2 ? memmem(p, avail, "\r\n", 2) : NULL;
        return c ? c - p : -1;
}

static int parse_body(agent *a, code_call *cc, tool_error *e)
{
        size_t off = 0;
        int r = NEED_MORE;
        while (r == NEED_MORE && off < cc->in.len) {
                const char *p = cc->in.buf + off;
                size_t avail = cc->in.len - off, n;
                ssize_t ln;
                switch (cc->mode) {
                case BODY_TO_EOF:
                        r = deliver(a, cc, p, avail, e);
                        off += avail;
                        break;
                case BODY_LENGTH:
                case BODY_CHUNK_DATA:
                        n = avail < cc->left ? avail : (size_t)cc->left;
                        r = deliver(a, cc, p, n, e);
                        off += n;
                        cc->left -= n;
                        if (!cc->left && r == NEED_MORE) {
                                if (cc->mode == BODY_LENGTH)
                                        r = COMPLETE;
                                cc->mode = BODY_CHUNK_END;
                        }
                        break;
                case BODY_CHUNK_END:
                        if (avail < 2)
                                goto more;
                        if (p[0] != '\r' || p[1] != '\n')
                                return bad_answer(cc, e, "chunk");
                        off += 2;
                        cc->mode = BODY_CHUNK_SIZE;
                        break;
                case BODY_CHUNK_SIZE:
                case BODY_TRAILER:
                        ln = crlf_line(p, avail < 1024 ? avail : 1024);
                        if (ln < 0) {
                                if (avail >= 1024)
                                        return bad_answer(cc, e, "chunk size");
                                goto more;
                        }
                        off += (size_t)ln + 2;
                        if (cc->mode == BODY_TRAILER) {
                                if (ln == 0)
                                        r = COMPLETE;
                                break;
                        }
                        char hex[32], *rest;
                        snprintf(hex, sizeof(hex), "%.*s", (int)(ln < 31 ? ln : 31), p);
                        errno = 0;
                        unsigned long long size = strtoull(hex, &rest, 16);
                        if (!ln || errno || rest == hex || (*rest && *rest != ';' && *rest != ' ') || size > (1ull << 31))
                                return bad_answer(cc, e, "chunk size");
                        cc->left = size;
                        cc->mode = size ? BODY_CHUNK_DATA : BODY_TRAILER;
                        break;
                }
        }
more:
        if (r == FAILED)
                return r;
        memmove(cc->in.buf, cc->in.buf + off, cc->in.len - off);
        cc->in.len -= off;
        if (cc->in.buf)
                cc->in.buf[cc->in.len] = '\0';
        return r;
}

/* ---- the result ----------------------------------------------------------------------------- */

/* The Execution: E2B's shape, with the main result's text as "text" too. */
static json_t *execution_result(code_call *cc)
{
        json_t *x = json_incref(cc->exec);
        json_t *text = json_null();
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(x, "results"), i, r) {
                if (json_is_true(json_object_get(r, "is_main_result")) && json_is_string(json_object_get(r, "text")))
                        text = json_object_get(r, "text");
        }
        json_object_set(x, "text", text);
        json_object_set_new(x, "truncated", json_boolean(cc->truncated));
        return x;
}

static void cc_complete(agent *a, code_call *cc)
{
        tool_error e = { 0 };
        json_t *body = NULL;
        if (cc->status < 200 || cc->status > 299) {
                body = json_loadb(cc->body.buf ? cc->body.buf : "", cc->body.len, 0, NULL);
                const char *msg = json_string_value(json_object_get(body, "message"));
                if (!msg)
                        msg = json_string_value(json_object_get(body, "error"));
                char m[400];
                snprintf(m, sizeof(m), "%s", msg ? msg : "");
                json_decref(body);
                if (*m)
                        tool_fail(&e, code_of_status(cc->status), "%s: %s", cc->tool, m);
                else
                        tool_fail(&e, code_of_status(cc->status), "%s: the code interpreter answered with HTTP status %d", cc->tool, cc->status);
                cc_fail(a, cc, &e);
                return;
        }
        if (cc->exec) {
                if (!cc->ended) {
                        tool_fail(&e, TOOL_INTERNAL, "%s: the code interpreter's answer ended before the cell did", cc->tool);
                        cc_fail(a, cc, &e);
                        return;
                }
                cc_answer(a, cc, execution_result(cc));
                return;
        }
        if (strcmp(cc->tool, "restart_code_context") == 0 || strcmp(cc->tool, "remove_code_context") == 0) {
                bool restart = !strcmp(cc->tool, "restart_code_context");
                cc_answer(a, cc, json_pack("{ss sb}", "context", cc->context, restart ? "restarted" : "removed", 1));
                return;
        }
        body = json_loadb(cc->body.buf ? cc->body.buf : "", cc->body.len, 0, NULL);
        if (!strcmp(cc->tool, "list_code_contexts") && json_is_array(body)) {
                cc_answer(a, cc, json_pack("{so}", "contexts", body));
                return;
        }
        if (!strcmp(cc->tool, "create_code_context") && json_is_string(json_object_get(body, "id"))) {
                cc_answer(a, cc, body);
                return;
        }
        json_decref(body);
        tool_fail(&e, TOOL_INTERNAL, "%s: the code interpreter's answer is not what it should be", cc->tool);
        cc_fail(a, cc, &e);
}

/* ---- the loop's side ------------------------------------------------------------------------ */

static void cc_io(agent *a, code_call *cc, uint32_t events)
{
        tool_error e = { 0 };
        if (cc->st == CC_CONNECTING) {
                int err = 0;
                socklen_t l = sizeof(err);
                if (getsockopt(cc->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
                        err = errno;
                if (err == ECONNREFUSED) {
                        refused(a, cc);
                        return;
                }
                if (err) {
                        tool_fail_errno(&e, err, "%s: connect to 127.0.0.1:%d", cc->tool, NSBOX_INTERP_PORT);
                        cc_fail(a, cc, &e);
                        return;
                }
                cc_connected(cc);
        }
        if (cc->st == CC_SENDING) {
                ssize_t n = send(cc->fd, cc->req.buf + cc->req_off, cc->req.len - cc->req_off, MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        tool_fail_errno(&e, errno, "%s: send to the code interpreter", cc->tool);
                        cc_fail(a, cc, &e);
                        return;
                }
                cc->req_off += n > 0 ? (size_t)n : 0;
                if (cc->req_off == cc->req.len)
                        cc->st = CC_HEAD; /* no half-close: the server would take it for a client gone */
                return;
        }
        if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || cc->st < CC_HEAD)
                return;
        char buf[65536];
        ssize_t n = recv(cc->fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n < 0) {
                tool_fail_errno(&e, errno, "%s: read from the code interpreter", cc->tool);
                cc_fail(a, cc, &e);
                return;
        }
        if (n == 0) {
                if (cc->st == CC_BODY && cc->mode == BODY_TO_EOF) {
                        cc_complete(a, cc); /* parse_body took every byte already */
                        return;
                }
                tool_fail(&e, TOOL_INTERNAL, "%s: the code interpreter closed the connection before its answer was complete", cc->tool);
                cc_fail(a, cc, &e);
                return;
        }
        if (sb_append(&cc->in, buf, (size_t)n) < 0) {
                tool_fail(&e, TOOL_INTERNAL, "%s: out of memory", cc->tool);
                cc_fail(a, cc, &e);
                return;
        }
        int r = NEED_MORE;
        if (cc->st == CC_HEAD)
                r = parse_head(cc, &e);
        if (r == NEED_MORE && cc->st == CC_BODY && cc->in.len)
                r = parse_body(a, cc, &e);
        if (r == FAILED)
                cc_fail(a, cc, &e);
        else if (r == COMPLETE)
                cc_complete(a, cc);
}

void code_ready(agent *a, uint64_t serial, uint32_t events)
{
        code_call *cc = a->codes;
        while (cc && cc->serial != serial)
                cc = cc->next;
        if (cc && cc->fd >= 0)
                cc_io(a, cc, events);
}

void code_update_interest(agent *a, bool high)
{
        for (code_call *cc = a->codes; cc; cc = cc->next) {
                if (cc->fd < 0)
                        continue;
                uint32_t want = cc->st == CC_CONNECTING || cc->st == CC_SENDING ? EPOLLOUT : high || cc->paused ? 0 : EPOLLIN;
                nsbox_epoll_set(a->epfd, cc->fd, WATCH(cc->serial, WATCH_INOTIFY), &cc->events, want);
        }
}

/* Connections to try again, calls out of time; returns the next deadline (0: none). */
uint64_t code_deadlines(agent *a, uint64_t now)
{
        uint64_t next = 0;
        for (code_call *cc = a->codes, *nx; cc; cc = nx) {
                nx = cc->next;
                tool_error e = { 0 };
                if (cc->st == CC_WAIT && cc->start_deadline_ns && now >= cc->start_deadline_ns) {
                        tool_fail(&e, TOOL_TIMEOUT, "%s: the code interpreter did not answer on 127.0.0.1:%d in %d s", cc->tool,
                                  NSBOX_INTERP_PORT, START_WAIT_S);
                        cc_fail(a, cc, &e);
                        continue;
                }
                if (cc->st > CC_WAIT && cc->deadline_ns && now >= cc->deadline_ns) {
                        tool_fail(&e, TOOL_TIMEOUT, "%s: the code interpreter did not answer in time", cc->tool);
                        cc_fail(a, cc, &e);
                        continue;
                }
                if (cc->st == CC_WAIT && now >= cc->retry_ns) {
                        cc_connect(a, cc); /* may answer and free cc */
                        continue;
                }
                uint64_t cand[3] = { cc->st == CC_WAIT ? cc->retry_ns : 0, cc->st == CC_WAIT ? cc->start_deadline_ns : 0,
                                     cc->st > CC_WAIT ? cc->deadline_ns : 0 };
                for (int i = 0; i < 3; i++)
                        if (cand[i] && (!next || cand[i] < next))
                                next = cand[i];
        }
        /* a call just (re)connecting has no deadline yet: look again soon */
        for (code_call *cc = a->codes; cc; cc = cc->next)
                if (cc->st == CC_WAIT && (!next || cc->retry_ns < next))
                        next = cc->retry_ns;
        return next;
}

/* A cancelled call: the connection closes, which the server takes as an interrupt; a cell's
 * result is what came so far, with "cancelled": true. */
bool code_cancel(agent *a, json_int_t id)
{
        for (code_call *cc = a->codes; cc; cc = cc->next)
                if (cc->call_id == id) {
                        if (cc->exec) {
                                json_t *x = execution_result(cc);
                                json_object_set_new(x, "cancelled", json_true());
                                cc_answer(a, cc, x);
                        } else {
                                tool_error e = { 0 };
                                tool_fail(&e, TOOL_CONFLICT, "%s: cancelled", cc->tool);
                                cc_fail(a, cc, &e);
                        }
                        return true;
                }
        return false;
}

void code_pause(agent *a, json_int_t id, bool pause)
{
        for (code_call *cc = a->codes; cc; cc = cc->next)
                if (cc->call_id == id)
                        cc->paused = pause;
}

/* ---- requests ------------------------------------------------------------------------------- */

static bool valid_context_id(const char *s)
{
        size_t n = strlen(s);
        if (n < 1 || n > 64)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-", *s)))
                        return false;
        return true;
}

static int param_language(const request *rq, const char **ret, tool_error *e)
{
        if (tool_param_string(&rq->in, rq->tool, "language", false, ret, e) < 0)
                return -1;
        if (!*ret || !**ret)
                return 0;
        for (size_t i = 0; languages[i]; i++)
                if (!strcasecmp(*ret, languages[i]))
                        return 0;
        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: language '%.50s' is not supported: python, r, javascript, typescript, java or bash", rq->tool, *ret);
}

static int param_context(const request *rq, bool required, const char **ret, tool_error *e)
{
        if (tool_param_string(&rq->in, rq->tool, "context", required, ret, e) < 0)
                return -1;
        if (*ret && !valid_context_id(*ret))
                return tool_fail(e, TOOL_NOT_FOUND, "%s: context '%.64s' not found", rq->tool, *ret);
        return 0;
}

static int http_request(code_call *cc, const char *method, const char *path, json_t *body, tool_error *e)
{
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        if (body && !text)
                return tool_fail(e, TOOL_INTERNAL, "%s: out of memory", cc->tool);
        size_t n = text ? strlen(text) : 0;
        int r = sb_appendf(&cc->req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                                     "Connection: close\r\n\r\n",
                           method, path, NSBOX_INTERP_PORT, n);
        if (r >= 0 && n)
                r = sb_append(&cc->req, text, n);
        free(text);
        return r < 0 ? tool_fail(e, TOOL_INTERNAL, "%s: out of memory", cc->tool) : 0;
}

/* run_code's params: the request to /execute; the call's deadline from its timeout. */
static int run_code_request(agent *a, const request *rq, code_call *cc, tool_error *e)
{
        const char *code = NULL, *language = NULL, *context = NULL;
        bool stream = false;
        if (tool_param_string(&rq->in, "run_code", "code", true, &code, e) < 0 || param_language(rq, &language, e) < 0 ||
            param_context(rq, false, &context, e) < 0 || tool_param_bool(&rq->in, "run_code", "stream", &stream, e) < 0)
                return -1;
        if (json_string_length(json_object_get(rq->in.params, "code")) > CODE_MAX)
                return tool_fail(e, TOOL_TOO_LARGE, "run_code: 'code' is over %u bytes", CODE_MAX);
        if (language && *language && context)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "run_code: give 'context' or 'language', not both");
        double timeout = DEFAULT_TIMEOUT_S;
        json_t *t = json_object_get(rq->in.params, "timeout");
        if (t && !json_is_null(t)) {
                if (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 1e7)
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "run_code: 'timeout' must be a number of seconds (0 for none)");
                timeout = json_number_value(t);
        }
        (void)a;
        cc->stream = stream;
        cc->wait_ns = timeout > 0 ? (uint64_t)((timeout + TIMEOUT_GRACE_S) * 1e9) : 0;
        cc->exec = json_pack("{s[] s{s[] s[]} sn sn}", "results", "logs", "stdout", "stderr", "error", "execution_count");
        json_t *body = json_pack("{ss sf}", "code", code, "timeout", timeout);
        if (body && context)
                json_object_set_new(body, "context_id", json_string(context));
        if (body && language && *language)
                json_object_set_new(body, "language", json_string(language));
        if (context)
                snprintf(cc->context, sizeof(cc->context), "%s", context);
        int r = cc->exec && body ? http_request(cc, "POST", "/execute", body, e) : tool_fail(e, TOOL_INTERNAL, "run_code: out of memory");
        json_decref(body);
        return r;
}

static int context_request(agent *a, const request *rq, code_call *cc, tool_error *e)
{
        cc->wait_ns = CONTEXT_WAIT_S * SEC_NS;
        if (!strcmp(rq->tool, "list_code_contexts"))
                return http_request(cc, "GET", "/contexts", NULL, e);
        if (!strcmp(rq->tool, "create_code_context")) {
                const char *language = NULL;
                char *cwd = NULL;
                if (param_language(rq, &language, e) < 0)
                        return -1;
                if (json_object_get(rq->in.params, "cwd") && !json_is_null(json_object_get(rq->in.params, "cwd")) &&
                    tool_param_path(&a->tctx, &rq->in, rq->tool, "cwd", NULL, &cwd, e) < 0)
                        return -1;
                json_t *body = json_pack("{ss}", "language", language && *language ? language : "python");
                if (body && cwd)
                        json_object_set_new(body, "cwd", json_string(cwd));
                free(cwd);
                int r = body ? http_request(cc, "POST", "/contexts", body, e) : tool_fail(e, TOOL_INTERNAL, "out of memory");
                json_decref(body);
                return r;
        }
        const char *context = NULL;
        if (param_context(rq, true, &context, e) < 0)
                return -1;
        snprintf(cc->context, sizeof(cc->context), "%s", context);
        char path[128];
        bool restart = !strcmp(rq->tool, "restart_code_context");
        snprintf(path, sizeof(path), "/contexts/%s%s", context, restart ? "/restart" : "");
        return http_request(cc, restart ? "POST" : "DELETE", path, NULL, e);
}

void handle_code(agent *a, const request *rq)
{
        tool_error e = { 0 };
        if (a->n_codes >= MAX_CODE_CALLS) {
                tool_fail(&e, TOOL_CONFLICT, "%s: %d code calls are running in this sandbox (the limit)", rq->tool, MAX_CODE_CALLS);
                send_tool_error(a, rq->id, &e);
                return;
        }
        code_call *cc = calloc(1, sizeof(*cc));
        if (!cc)
                agent_exit(a, 125);
        cc->call_id = rq->id;
        cc->tool = rq->tool; /* canonical: the registry's static string */
        cc->fd = -1;
        cc->serial = ++a->next_serial;
        sb_init(&cc->req, 0);
        sb_init(&cc->in, LINE_MAX_BYTES + HEAD_MAX);
        sb_init(&cc->body, BODY_MAX);
        cc->next = a->codes;
        a->codes = cc;
        a->n_codes++;
        int r = !strcmp(rq->tool, "run_code") ? run_code_request(a, rq, cc, &e) : context_request(a, rq, cc, &e);
        if (cc->exec)
                cc->body.limit = LINE_MAX_BYTES; /* the cell's line so far */
        if (r < 0) {
                cc_fail(a, cc, &e);
                return;
        }
        cc_connect(a, cc);
}
