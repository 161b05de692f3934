/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paths.h"
#include "json.h"
#include "util.h"

#define AUTOSTART_TIMEOUT_MS 10000
#define RBUF_SIZE 65536

static int connect_to(const char *path)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

/* nsboxd next to this nsbox (a build tree, or the same bin directory); for a program linked with
 * libnsbox, the one installed with it; else from PATH. */
static void find_daemon(char *buf, size_t size)
{
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = '\0';
                char *slash = strrchr(self, '/');
                if (slash) {
                        *slash = '\0';
                        snprintf(buf, size, "%s/nsboxd", self);
                        if (access(buf, X_OK) == 0)
                                return;
                }
        }
#ifdef NSBOX_BINDIR
        snprintf(buf, size, "%s/nsboxd", NSBOX_BINDIR);
        if (access(buf, X_OK) == 0)
                return;
#endif
        snprintf(buf, size, "nsboxd");
}

/* Start a daemon detached from us (its own session, stdio to the log), and wait until it
 * listens.  Losing a race to another client's daemon is fine: the caller connects again. */
static int start_daemon(const nsbox_paths *paths, nsbox_error *err)
{
        char exe[PATH_MAX + 16];
        find_daemon(exe, sizeof(exe));
        int ready[2];
        if (pipe2(ready, O_CLOEXEC) < 0)
                return nsbox_err(err, errno, "start nsboxd: pipe");
        pid_t pid = fork();
        if (pid < 0) {
                close(ready[0]);
                close(ready[1]);
                return nsbox_err(err, errno, "start nsboxd: fork");
        }
        if (pid == 0) {
                close(ready[0]);
                if (setsid() < 0 || fork() != 0)
                        _exit(0); /* the daemon is re-parented to init, never our zombie */
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                int log = open(paths->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
                        _exit(1);
                if (chdir("/") < 0)
                        _exit(1);
                int keep = fcntl(ready[1], F_DUPFD, 3); /* without O_CLOEXEC: nsboxd writes to it */
                /* none of the caller's other fds: a daemon outlives its client, and would hold
                 * them open (a pipe the caller waits on, its files, its locks) as long as it runs */
                nsbox_close_all_but(&keep, 1);
                char fdarg[32];
                snprintf(fdarg, sizeof(fdarg), "--ready-fd=%d", keep);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                /* a client run by systemd: its service manager's sockets are not the daemon's */
                static const char *const sd_vars[] = { "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES" };
                for (size_t i = 0; i < sizeof(sd_vars) / sizeof(sd_vars[0]); i++)
                        unsetenv(sd_vars[i]);
                execlp(exe, "nsboxd", fdarg, (char *)NULL);
                dprintf(2, "nsbox: cannot execute '%s': %s\n", exe, strerror(errno));
                _exit(127);
        }
        close(ready[1]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        struct pollfd p = { .fd = ready[0], .events = POLLIN };
        int n = poll(&p, 1, AUTOSTART_TIMEOUT_MS);
        char c = 0;
        bool ok = n > 0 && read(ready[0], &c, 1) == 1;
        close(ready[0]);
        (void)ok; /* not ready may mean another daemon won the lock: the caller tries again */
        return 0;
}

int nsbox_client_connect(bool autostart, nsbox_client *ret, nsbox_error *err)
{
        nsbox_paths paths = { 0 };
        int r = nsbox_paths_get(autostart, &paths, err);
        if (r < 0)
                return r;
        static bool warned; /* once per process, not per connection */
        if (paths.warning && !warned) {
                fprintf(stderr, "nsbox: warning: %s\n", paths.warning);
                warned = true;
        }
        int fd = connect_to(paths.socket);
        if (fd < 0 && autostart && (fd == -ENOENT || fd == -ECONNREFUSED)) {
                if ((r = start_daemon(&paths, err)) < 0) {
                        nsbox_paths_release(&paths);
                        return r;
                }
                fd = connect_to(paths.socket);
        }
        if (fd < 0) {
                if (autostart)
                        r = nsbox_err(err, -fd, "connect to nsboxd at '%s' (its log: '%s')", paths.socket, paths.log);
                else
                        r = nsbox_err(err, -fd, "connect to nsboxd at '%s'", paths.socket);
                nsbox_paths_release(&paths);
                return r;
        }
        nsbox_paths_release(&paths);
        *ret = (nsbox_client){ .fd = fd, .next_id = 1 };
        sb_init(&ret->in, 0);
        return 0;
}

void nsbox_client_close(nsbox_client *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        sb_release(&c->in);
        free(c->rbuf);
        c->rbuf = NULL;
        c->rhave = c->rat = 0;
}

/* send(2) with MSG_NOSIGNAL: a daemon gone away is an error to report, never SIGPIPE in a
 * program that links libnsbox. */
static int send_full(int fd, const char *buf, size_t n)
{
        while (n > 0) {
                ssize_t k = send(fd, buf, n, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                buf += k;
                n -= (size_t)k;
        }
        return 0;
}

/* One line from the daemon into c->in (without the newline). */
static int read_line(nsbox_client *c)
{
        c->in.len = 0;
        if (!c->rbuf && !(c->rbuf = malloc(RBUF_SIZE)))
                return -ENOMEM;
        for (;;) {
                while (c->rat < c->rhave) {
                        char *nl = memchr(c->rbuf + c->rat, '\n', c->rhave - c->rat);
                        size_t n = nl ? (size_t)(nl - (c->rbuf + c->rat)) : c->rhave - c->rat;
                        if (sb_append(&c->in, c->rbuf + c->rat, n) < 0)
                                return -ENOMEM;
                        c->rat += n + (nl ? 1 : 0);
                        if (nl)
                                return 0;
                }
                ssize_t k = read(c->fd, c->rbuf, RBUF_SIZE);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EPIPE;
                c->rhave = (size_t)k;
                c->rat = 0;
        }
}

/* An error reply: err gets its message, *ret_code (when not NULL) its stable code. */
static int error_reply(nsbox_client *c, json_t *e, const char **ret_code, nsbox_error *err)
{
        snprintf(c->code, sizeof(c->code), "%s", json_string_value(json_object_get(json_object_get(e, "data"), "code")) ?: "internal");
        if (ret_code)
                *ret_code = c->code;
        return nsbox_err(err, 0, "%s", json_string_value(json_object_get(e, "message")) ?: "nsboxd reported an error");
}

/* The send failed: nsboxd may have closed the connection after saying why (a refusal, id null). */
static int send_failed(nsbox_client *c, int r, nsbox_error *err)
{
        if (read_line(c) == 0) {
                json_error_t je;
                json_t *msg = nsbox_json_loadb(c->in.buf ? c->in.buf : "", c->in.len, &je);
                json_t *e = json_object_get(msg, "error");
                if (json_is_null(json_object_get(msg, "id")) && json_is_object(e)) {
                        r = error_reply(c, e, NULL, err); /* no code: the connection is gone */
                        json_decref(msg);
                        return r;
                }
                json_decref(msg);
        }
        return nsbox_err(err, -r, "send to nsboxd");
}

/* The request's first bytes with fd attached (SCM_RIGHTS): nsboxd queues it for the request. */
static int send_with_fd(int sock, const char *buf, size_t n, int fd)
{
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u = { 0 };
        struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        *cm = (struct cmsghdr){ .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS, .cmsg_len = CMSG_LEN(sizeof(int)) };
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        ssize_t k;
        while ((k = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
                ;
        if (k < 0)
                return -errno;
        return send_full(sock, buf + k, n - (size_t)k);
}

static int call_impl(nsbox_client *c, const char *method, json_t *params, int pass_fd, nsbox_client_event_fn on_event, void *userdata,
                     json_t **ret_result, const char **ret_code, nsbox_error *err);

int nsbox_client_call(nsbox_client *c, const char *method, json_t *params, nsbox_client_event_fn on_event, void *userdata,
                      json_t **ret_result, const char **ret_code, nsbox_error *err)
{
        return call_impl(c, method, params, -1, on_event, userdata, ret_result, ret_code, err);
}

int nsbox_client_call_fd(nsbox_client *c, const char *method, json_t *params, int fd, json_t **ret_result, const char **ret_code,
                         nsbox_error *err)
{
        return call_impl(c, method, params, fd, NULL, NULL, ret_result, ret_code, err);
}

static int call_impl(nsbox_client *c, const char *method, json_t *params, int pass_fd, nsbox_client_event_fn on_event, void *userdata,
                     json_t **ret_result, const char **ret_code, nsbox_error *err)
{
        long long id = c->next_id++;
        json_t *req = json_pack("{ss sI ss so}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method, "params",
                                params ? params : json_object());
        size_t len = 0;
        char *text = req ? nsbox_json_dumps(req, &len) : NULL;
        json_decref(req);
        if (!text)
                return nsbox_err(err, ENOMEM, "%s", method);
        int r = pass_fd >= 0 ? send_with_fd(c->fd, text, len, pass_fd) : send_full(c->fd, text, len);
        if (r == 0)
                r = send_full(c->fd, "\n", 1);
        free(text);
        if (r < 0)
                return send_failed(c, r, err);
        for (;;) {
                if ((r = read_line(c)) < 0)
                        return nsbox_err(err, r == -EPIPE ? 0 : -r, "nsboxd closed the connection");
                json_error_t je;
                json_t *msg = nsbox_json_loadb(c->in.buf ? c->in.buf : "", c->in.len, &je);
                if (!json_is_object(msg)) {
                        json_decref(msg);
                        return nsbox_err(err, 0, "nsboxd sent malformed JSON: %s", je.text);
                }
                json_t *mid = json_object_get(msg, "id");
                if (json_is_null(mid) && json_is_object(json_object_get(msg, "error"))) {
                        /* about the connection, not a request: nsboxd refused it, and the
                         * caller sees a connection gone (no code), as when connect() fails */
                        r = error_reply(c, json_object_get(msg, "error"), NULL, err);
                        json_decref(msg);
                        return r;
                }
                if (!mid) { /* a notification */
                        if (on_event && json_is_object(json_object_get(msg, "params")))
                                on_event(json_object_get(msg, "params"), userdata);
                        json_decref(msg);
                        if (c->stop) {
                                c->stop = false;
                                return nsbox_err(err, ECANCELED, "%s: stopped by its caller", method);
                        }
                        continue;
                }
                if (!json_is_integer(mid) || json_integer_value(mid) != id) {
                        json_decref(msg);
                        continue;
                }
                json_t *e = json_object_get(msg, "error");
                if (e) {
                        r = error_reply(c, e, ret_code, err);
                        json_decref(msg);
                        return r;
                }
                *ret_result = json_incref(json_object_get(msg, "result"));
                json_decref(msg);
                return *ret_result ? 0 : nsbox_err(err, 0, "nsboxd sent a reply without a result");
        }
}
