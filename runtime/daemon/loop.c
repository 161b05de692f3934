/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: the event loop (nsbox_daemon_run).  Its setup, the epoll loop and its dispatch,
 * deadlines and expiry, signals, the drain and the stop. */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "../agentexec.h"
#include "../dlog.h"
#include "../keeper.h"
#include "../paths.h"
#include "../systemd.h"

static bool update_interest(daemon_state *d)
{
        for (client *c = d->clients; c; c = c->next) {
                if (c->http) /* an HTTP request's: http_pump takes its replies */
                        continue;
                if (c->out.len > CLIENT_HARD && !c->eof) {
                        dlog(LOG_WARNING, "client.dropped", NULL, "disconnecting a client of uid %u: %zu bytes of replies unread", (unsigned)c->uid, c->out.len);
                        c->eof = true;
                }
                if (c->out.len >= CLIENT_HIGH && c->partial_since_ns) /* not read meanwhile: its time does not run */
                        c->partial_since_ns = now_ns();
                nsbox_epoll_set(d->epfd, c->fd, KEY(c->serial, K_CLIENT), &c->events,
                       (c->out.len < CLIENT_HIGH ? EPOLLIN : 0) | (c->out.len ? EPOLLOUT : 0));
        }
        return agents_update_interest(d);
}

/* A timeout or an idle timeout came: destroy, or pause (freeze) and keep it, or pause it keeping
 * only its files (on_expiry pause_files: its processes killed, nothing frozen). */
static void expire(daemon_state *d, sandbox *s, const char *what)
{
        if (s->expiry_pause) {
                nsbox_error err = { 0 };
                if (sandbox_pause(s, true, !s->expiry_files, NULL, &err) == 0) {
                        s->expires_ns = 0;
                        dlog(LOG_INFO, "sandbox.expired", s->sup.id, "sandbox %s expired (%s): paused%s", s->sup.id, what,
                             s->paused_files ? ", its files kept, its processes killed" : "");
                        return;
                }
                dlog(LOG_WARNING, "sandbox.expired", s->sup.id, "sandbox %s expired (%s): cannot pause it (%s), destroyed instead", s->sup.id, what, err.msg ? err.msg : "no cgroup");
                nsbox_error_clear(&err);
        } else {
                dlog(LOG_INFO, "sandbox.expired", s->sup.id, "sandbox %s expired (%s): destroyed", s->sup.id, what);
        }
        char why[64];
        snprintf(why, sizeof(why), "expired (%s) and was destroyed", what);
        sandbox_remove(d, s, "timeout", why);
}

/* Timeouts, idle timeouts, starts that take too long, creates waiting for capacity: handled
 * when due; returns the epoll timeout until the next one (-1: none). */
static int deadlines(daemon_state *d)
{
        uint64_t now = now_ns(), next = 0;
        for (sandbox *s = d->sandboxes, *nx; s; s = nx) {
                nx = s->next;
                if (!s->ready && now >= s->ready_deadline_ns) {
                        sandbox_remove(d, s, "timeout", "did not become ready");
                        continue;
                }
                if (!s->ready) {
                        if (!next || s->ready_deadline_ns < next)
                                next = s->ready_deadline_ns;
                        continue;
                }
                if (s->pooled)
                        continue;
                if (s->expires_ns && now >= s->expires_ns) {
                        expire(d, s, "timeout");
                        continue;
                }
                uint64_t idle_at = s->idle_ms && !s->paused && s->sup.n_calls == 0 && !s->job && !s->resetting
                                           ? s->last_active_ns + s->idle_ms * 1000000 : 0;
                if (idle_at && now >= idle_at) {
                        expire(d, s, "idle");
                        continue;
                }
                uint64_t t = s->expires_ns && (!idle_at || s->expires_ns < idle_at) ? s->expires_ns : idle_at;
                if (t && (!next || t < next))
                        next = t;
        }
        bool due = false;
        for (waiting *w = d->waitq; w; w = w->next) {
                due |= now >= w->deadline_ns;
                if (!next || w->deadline_ns < next)
                        next = w->deadline_ns;
        }
        if (due || d->capacity_freed) {
                d->capacity_freed = false;
                serve_waiting(d);
        }
        uint64_t cnext = client_deadlines(d, now);
        if (cnext && (!next || cnext < next))
                next = cnext;
        if (d->stopping && (!next || d->drain_deadline_ns < next))
                next = d->drain_deadline_ns;
        if (!next)
                return -1;
        return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

static int listen_on(const char *path, mode_t mode, nsbox_error *err)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return nsbox_err(err, errno, "socket");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        unlink(path); /* stale: we hold the lock, so no daemon serves it */
        mode_t old = umask(0077);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || chmod(path, mode) < 0 || listen(fd, 128) < 0) {
                int e = errno;
                close(fd);
                return nsbox_err(err, e, "listen on '%s'", path);
        }
        return fd;
}

/* SIGTERM: accept no more clients and no more requests; calls in flight may finish. */
static void begin_stop(daemon_state *d, const char *sock)
{
        if (d->stopping)
                return;
        d->stopping = true;
        d->drain_deadline_ns = now_ns() + d->conf->drain_timeout_ms * 1000000;
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->listen_fd, NULL);
        close(d->listen_fd);
        d->listen_fd = -1;
        if (!d->activated) /* systemd's socket stays, for the next activation */
                unlink(sock);
        dlog(LOG_NOTICE, "daemon.stopping", NULL, "stopping: no new requests; waiting up to %.1f s for calls in flight", (double)d->conf->drain_timeout_ms / 1000.0);
        nsbox_sd_notify(d->conf->keep_on_stop ? "STOPPING=1\nSTATUS=stopping: draining calls in flight, then keeping its sandboxes for the next nsboxd"
                                              : "STOPPING=1\nSTATUS=stopping: draining calls in flight, then destroying its sandboxes");
        serve_waiting(d); /* creates waiting for room: refused */
        for (sandbox *s = d->sandboxes, *nx; s; s = nx) { /* nobody will take these */
                nx = s->next;
                if (s->pooled)
                        sandbox_remove(d, s, "unavailable", "was stopped with nsboxd");
        }
}

/* Nothing in flight: no call, no create or reset waiting for its sandbox, no worker. */
static bool drained(const daemon_state *d)
{
        for (const sandbox *s = d->sandboxes; s; s = s->next)
                if (s->sup.n_calls || s->create_rpc_id || s->job || s->waiters)
                        return false;
        for (const client *c = d->clients; c; c = c->next)
                if (c->out.len)
                        return false;
        return true;
}

/* <socket>.lock, held while we serve the socket: its fd, or a negative errno (-EADDRINUSE: another
 * nsboxd has it). */
static int lock_socket(const char *sock, nsbox_error *err)
{
        _cleanup_free_ char *lock = NULL;
        if (asprintf(&lock, "%s.lock", sock) < 0)
                return nsbox_err(err, ENOMEM, "lock path");
        int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock_fd < 0)
                return nsbox_err(err, errno, "open lock file '%s'", lock);
        if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
                int r = nsbox_err(err, errno == EWOULDBLOCK ? 0 : errno, "another nsboxd is already serving '%s'", sock);
                close(lock_fd);
                return r == -EINVAL ? -EADDRINUSE : r;
        }
        return lock_fd;
}

/* The templates' state, the state directory, the loop; the sandboxes a previous nsboxd kept or
 * left; the socket and the signals.  Then ready is said (ready_fd, systemd). */
static int daemon_open(daemon_state *d, const nsbox_daemon_config *cfg, const char *sock, const nsbox_paths *paths, int activated_fd,
                       nsbox_error *err)
{
        d->tpl = calloc(d->conf->n_templates + 1, sizeof(*d->tpl));
        if (!d->tpl)
                return nsbox_err(err, ENOMEM, "templates");
        d->pool_dirty = true; /* fill the pools */
        sandbox_log_init(d);
        int r = apikeys_open(d, err); /* the operator's file, bad: nothing starts */
        if (r < 0)
                return r;
        /* what a killed nsboxd left of its sandboxes goes before this one makes any */
        d->state_dirfd = state_dir_open(sock, err);
        if (d->state_dirfd < 0)
                return d->state_dirfd;
        d->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (d->epfd < 0)
                return nsbox_err(err, errno, "epoll");
        /* sandboxes kept by the previous nsboxd (on_stop "keep"), then what is left of others */
        nsbox_error kerr = { 0 };
        int adopted = nsbox_keeper_collect(d->state_dirfd, adopt_one, d, &kerr);
        if (adopted < 0)
                dlog(LOG_ERR, "keeper.failed", NULL, "%s", kerr.msg ? kerr.msg : strerror(-adopted));
        nsbox_error_clear(&kerr);
        unsigned cleaned = state_cleanup(d);
        bool shared = d->conf->n_client_uids || d->conf->n_client_gids;
        d->listen_fd = activated_fd >= 0 ? activated_fd : listen_on(sock, shared ? 0666 : 0600, err);
        if (d->listen_fd < 0)
                return d->listen_fd;
        /* other users reach the socket through the runtime directory: they may search it */
        size_t dl = strlen(paths->dir);
        if (shared && !strncmp(sock, paths->dir, dl) && sock[dl] == '/' && !strchr(sock + dl + 1, '/') && chmod(paths->dir, 0711) < 0)
                dlog(LOG_ERR, "daemon.chmod_failed", NULL, "cannot open %s to the configured clients (chmod 0711): %s", paths->dir, strerror(errno));
        sigset_t mask;
        nsbox_block_stop_signals(&mask);
        d->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (d->sig_fd < 0 || nsbox_epoll_add(d->epfd, d->listen_fd, KEY(0, K_LISTEN), NULL, EPOLLIN) < 0 ||
            nsbox_epoll_add(d->epfd, d->sig_fd, KEY(0, K_SIGNAL), NULL, EPOLLIN) < 0)
                return nsbox_err(err, errno, "set up the event loop");
        r = http_open(d, err);
        if (r == 0)
                r = cluster_open(d, err);
        if (r == 0)
                r = catalog_open(d, err);
        if (r < 0)
                return r;
        if (cfg->ready_fd >= 0) {
                (void)!write(cfg->ready_fd, "1", 1);
                close(cfg->ready_fd);
        }
        dlog(LOG_NOTICE, "daemon.listening", NULL, "listening on %s%s; configuration %s: %zu templates, max_sandboxes %u; %u sandboxes adopted, %u of a previous nsboxd cleaned up",
             sock, activated_fd >= 0 ? " (socket activation)" : "", d->conf->source ? d->conf->source : "(defaults)", d->conf->n_templates,
             d->conf->max_sandboxes, d->n_sandboxes, cleaned);
        {
                char state[700];
                snprintf(state, sizeof(state), "READY=1\nSTATUS=listening on %s; %u sandboxes adopted, %u of a previous nsboxd cleaned up\nMAINPID=%d",
                         sock, d->n_sandboxes, cleaned, (int)getpid());
                nsbox_sd_notify(state);
        }
        /* where sandbox cgroups go, found now: alone in a delegated cgroup, nsboxd moves itself
         * into its leaf before any sandbox exists */
        const char *cg_why = NULL, *cg_parent = nsbox_cgroup_parent(&cg_why);
        if (cg_parent)
                dlog(LOG_INFO, "daemon.cgroups", NULL, "sandbox cgroups under %s", cg_parent);
        else
                dlog(LOG_WARNING, "daemon.cgroups", NULL, "sandboxes get no cgroup (no limits; pause stops their processes): %s", cg_why);
        return 0;
}

/* One event of epoll, to whom it is for. */
static void dispatch(daemon_state *d, const struct epoll_event *ev, const char *sock)
{
        uint64_t key = ev->data.u64, serial = key >> 3;
        unsigned kind = key & 7;
        if (kind == K_LISTEN || kind == K_CLIENT || kind == K_HTTP)
                d->client_ns = now_ns();
        switch (kind) {
        case K_LISTEN:
                if (serial == 1)
                        cluster_accept(d);
                else if (serial >= 2)
                        catalog_event(d, key, ev->events);
                else
                        accept_clients(d);
                break;
        case K_SIGNAL: {
                struct signalfd_siginfo si;
                while (read(d->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                        if (si.ssi_signo != SIGHUP && d->stopping)
                                d->stop = true; /* a second one: now */
                        else if (si.ssi_signo != SIGHUP)
                                begin_stop(d, sock);
                break;
        }
        case K_CLIENT: {
                client *c = client_by_serial(d, serial);
                if (!c)
                        break;
                if (ev->events & EPOLLOUT && nsbox_queue_flush(&c->out, c->fd) < 0)
                        c->eof = true;
                if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                        client_readable(d, c);
                break;
        }
        case K_HTTP:
                http_run(d);
                break;
        case K_JOB: {
                sandbox *s = sandbox_by_serial(d, serial);
                if (s && s->job)
                        job_readable(d, s);
                break;
        }
        case K_SYNC:
        case K_AGENT:
        case K_PIDFD: {
                sandbox *s = sandbox_by_serial(d, serial);
                if (!s)
                        break;
                if ((key & 7) == K_SYNC)
                        sync_readable(d, s);
                else if ((key & 7) == K_PIDFD)
                        sandbox_died(d, s);
                else
                        agent_event(d, s, ev->events);
                break;
        }
        }
}

/* When pool work may be done (0: there is none): once no client has made a request or been
 * answered for POOL_QUIET_NS, at most POOL_QUIET_MAX_NS after it became due (at once when a
 * pool is empty), and not before a template's retry time. */
static uint64_t pool_quiet_at(daemon_state *d, uint64_t now)
{
        if (!d->pool_dirty && (!d->pool_retry_ns || now < d->pool_retry_ns)) {
                d->pool_due_ns = 0;
                return d->pool_retry_ns; /* a short pool waits for its template's retry time */
        }
        if (!d->pool_due_ns)
                d->pool_due_ns = now;
        uint64_t at = d->client_ns + POOL_QUIET_NS, latest = d->pool_due_ns + POOL_QUIET_MAX_NS;
        if (at > latest)
                at = latest;
        if (at <= now)
                return at;
        /* no wait for an empty pool, where a create now would start cold (counted only when
         * there would be a wait) */
        for (size_t t = 0; t < d->conf->n_templates; t++) {
                unsigned pooled;
                of_template(d, (int)t, &pooled, NULL, NULL);
                if (d->conf->templates[t].pool && !pooled)
                        return now;
        }
        return at;
}

/* Until a stop (a second signal, or the end of the drain): 0, or the error of epoll_wait. */
static int serve(daemon_state *d, const char *sock, nsbox_error *err)
{
        while (!d->stop) {
                int timeout = deadlines(d);
                /* replies out first: a pool's refill holds the loop for a sandbox's start, and the
                 * handed-over sandbox's first answer (the refill's trigger) must not wait for it */
                http_pump(d);
                uint64_t now = now_ns(), quiet = pool_quiet_at(d, now);
                if (quiet && now >= quiet) {
                        pool_fill(d);
                        d->pool_due_ns = 0;
                        quiet = pool_quiet_at(d, now); /* more to start: after what is ready now */
                }
                if (quiet) /* a pool to fill once clients are quiet, or to refill later */
                        timeout = timeout_until(timeout, quiet, now);
                if (d->stopping && (drained(d) || now_ns() >= d->drain_deadline_ns))
                        break;
                reap_exited(false);
                if (reaping() && (timeout < 0 || timeout > 20))
                        timeout = 20;
                timeout = http_timeout(d, timeout);
                timeout = catalog_run(d, timeout);
                bool buffered = update_interest(d); /* agents' frames read ahead: taken without a wait */
                struct epoll_event ev[64];
                int n = epoll_wait(d->epfd, ev, 64, buffered ? 0 : timeout);
                if (n < 0 && errno != EINTR)
                        return nsbox_err(err, errno, "epoll_wait");
                for (int i = 0; i < n; i++)
                        dispatch(d, &ev[i], sock);
                if (buffered)
                        agents_read_buffered(d);
                /* write what is queued now rather than on the next round */
                agents_flush(d);
                http_pump(d);
                for (client *c = d->clients, *nx; c; c = nx) {
                        nx = c->next;
                        if (c->http)
                                continue;
                        if (c->out.len) /* a reply: its client's next request may come now */
                                d->client_ns = now_ns();
                        if (c->out.len && nsbox_queue_flush(&c->out, c->fd) < 0)
                                c->eof = true;
                        if (c->eof)
                                client_remove(d, c);
                }
        }
        return 0;
}

/* The end: kept sandboxes go to a keeper (on_stop "keep"), the others are destroyed; the last
 * replies go out if they can. */
static void daemon_close(daemon_state *d, const char *sock)
{
        begin_stop(d, sock);
        d->stop = true;
        if (d->conf->keep_on_stop)
                keep_sandboxes(d);
        dlog(LOG_NOTICE, "daemon.stopping", NULL, "stopping: destroying %u sandboxes", d->n_sandboxes);
        while (d->sandboxes)
                sandbox_remove(d, d->sandboxes, "unavailable", "was stopped with nsboxd");
        reap_exited(true);
        http_close(d); /* its requests end, and their clients */
        catalog_close(d);
        cluster_close(d);
        for (client *c = d->clients; c; c = c->next) /* the last replies, if they can go now */
                (void)nsbox_queue_flush(&c->out, c->fd);
        while (d->clients)
                client_remove(d, d->clients);
        close(d->state_dirfd);
        free(d->tpl);
        apikeys_close(d);
        dlog_set_sink(NULL);
}

int nsbox_daemon_run(const nsbox_daemon_config *cfg, nsbox_error *err)
{
        nsbox_paths paths = { 0 };
        /* Every agent is an exec of this nsbox-agent, opened first (without it, nothing is made):
         * replacing the file later (an upgrade) changes nothing for this daemon's sandboxes. */
        int r = nsbox_agent_program_open(err);
        if (r < 0)
                return r;
        /* socket activation: systemd made and bound the socket; its path is the one we serve */
        int activated_fd = -1;
        struct sockaddr_un activated = { 0 };
        r = nsbox_sd_listen_fd(&activated_fd, err);
        if (r < 0)
                return r;
        if (activated_fd >= 0) {
                socklen_t len = sizeof(activated);
                if (getsockname(activated_fd, (struct sockaddr *)&activated, &len) < 0 || activated.sun_path[0] != '/')
                        return nsbox_err(err, errno ? errno : EINVAL, "socket activation: the socket is not bound to a path");
        }
        r = nsbox_paths_get(true, &paths, err);
        if (r < 0)
                return r;
        if (paths.warning)
                dlog(LOG_WARNING, "daemon.runtime_dir", NULL, "%s", paths.warning);
        const char *sock = activated_fd >= 0 ? activated.sun_path : cfg->socket_path ? cfg->socket_path : paths.socket;
        _cleanup_close_ int lock_fd = lock_socket(sock, err);
        if (lock_fd < 0) {
                nsbox_paths_release(&paths);
                return lock_fd;
        }
        /* five descriptors per sandbox: as many as the hard limit allows (sandboxes get their
         * policy's limits.nofile) */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        static daemon_state d;
        nsbox_dconfig defaults;
        nsbox_dconfig_defaults(&defaults);
        d.conf = cfg->conf ? cfg->conf : &defaults;
        d.start_ns = now_ns();
        d.started_at = time(NULL);
        d.activated = activated_fd >= 0;
        d.agent_fd = -1;
        r = daemon_open(&d, cfg, sock, &paths, activated_fd, err);
        if (r < 0) {
                nsbox_paths_release(&paths);
                return r;
        }
        r = serve(&d, sock, err);
        daemon_close(&d, sock);
        nsbox_paths_release(&paths);
        return r < 0 ? r : 0;
}
