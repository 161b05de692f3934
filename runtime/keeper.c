/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's keeper (keeper.h). */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgroup.h"
#include "dlog.h"
#include "peer.h"
#include "util.h"

#define RECORD_MAX (1u << 20)

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Nobody came (or the keeper was told to stop): SIGKILL every sandbox, wait for its agent, remove
 * its cgroup and its state file. */
static void destroy_all(int state_dirfd, const nsbox_kept *kept, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (kept[i].cgroupfd >= 0)
                        nsbox_cgroup_kill(&(nsbox_cgroup){ .dirfd = kept[i].cgroupfd });
                if (kept[i].pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, kept[i].pidfd, SIGKILL, NULL, 0);
        }
        for (size_t i = 0; i < n; i++) {
                struct pollfd p = { .fd = kept[i].pidfd, .events = POLLIN };
                if (kept[i].pidfd >= 0)
                        poll(&p, 1, 5000);
                char fdpath[64], path[PATH_MAX];
                snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", kept[i].cgroupfd);
                ssize_t len = kept[i].cgroupfd >= 0 ? readlink(fdpath, path, sizeof(path) - 1) : -1;
                if (len > 0) {
                        path[len] = '\0';
                        /* empty once its last process is reaped: a moment after the agent's exit */
                        for (int tries = 0; tries < 200 && rmdir(path) < 0 && errno == EBUSY; tries++)
                                usleep(10000);
                }
                char name[NSBOX_ID_SIZE + 8];
                snprintf(name, sizeof(name), "%s.json", kept[i].id);
                unlinkat(state_dirfd, name, 0);
                dlog(LOG_NOTICE, "keeper.destroyed", kept[i].id, "keeper: sandbox %s destroyed: no nsboxd took it over in time", kept[i].id);
        }
}

static int send_record(int fd, const nsbox_kept *k)
{
        char *text = json_dumps(k->record, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        union {
                char buf[CMSG_SPACE(sizeof(int) * NSBOX_KEEPER_MAX_FDS)];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = text, .iov_len = strlen(text) };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (k->n_fds) {
                memset(&u, 0, sizeof(u));
                m.msg_control = u.buf;
                m.msg_controllen = CMSG_SPACE(sizeof(int) * k->n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * k->n_fds);
                memcpy(CMSG_DATA(c), k->fds, sizeof(int) * k->n_fds);
        }
        ssize_t r;
        while ((r = sendmsg(fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
                ;
        int e = errno;
        free(text);
        return r < 0 ? -e : 0;
}

/* One nsboxd connected: hand everything over.  1: it took them; 0: it went away first. */
static int serve_one(int conn, const nsbox_kept *kept, size_t n)
{
        struct ucred cr;
        socklen_t cl = sizeof(cr);
        if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
                return 0;
        /* a sandbox's uid maps to ours, and a bind may show the state directory */
        char why[160];
        if (nsbox_peer_check(conn, why, sizeof(why)) < 0) {
                dlog(LOG_WARNING, "client.refused", NULL, "keeper: refused a client of uid %u pid %d: %s", (unsigned)cr.uid, (int)cr.pid, why);
                return 0;
        }
        if (cr.uid != geteuid()) {
                dlog(LOG_WARNING, "client.refused", NULL, "keeper: refused a client of uid %u pid %d: not our user", (unsigned)cr.uid, (int)cr.pid);
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                if (send_record(conn, &kept[i]) < 0)
                        return 0;
        static const char end[] = "{\"end\":true}";
        if (send(conn, end, sizeof(end) - 1, MSG_NOSIGNAL) < 0)
                return 0;
        char ok[8];
        struct pollfd p = { .fd = conn, .events = POLLIN };
        if (poll(&p, 1, 60000) != 1)
                return 0;
        ssize_t got = recv(conn, ok, sizeof(ok), 0);
        return got == 2 && !memcmp(ok, "ok", 2);
}

static _Noreturn void keeper_main(int listen_fd, int state_dirfd, int ctl, const nsbox_kept *kept, size_t n, uint64_t timeout_ms)
{
        setsid(); /* a terminal's ^C to the old nsboxd's group is not for us */
        prctl(PR_SET_NAME, "nsboxd-keeper", 0, 0, 0);
        sigset_t mask;
        nsbox_block_stop_signals(&mask);
        sigdelset(&mask, SIGHUP); /* blocked, and ignored */
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        char go = 0;
        ssize_t r;
        while ((r = read(ctl, &go, 1)) < 0 && errno == EINTR)
                ;
        close(ctl);
        if (r != 1 || go != 'g') {
                unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
                _exit(0); /* nsboxd kept them after all (or died first): its copies decide */
        }
        dlog(LOG_NOTICE, "keeper.holding", NULL, "keeper: holding %zu sandboxes for the next nsboxd, for at most %.0f s", n, (double)timeout_ms / 1000.0);
        uint64_t deadline = now_ns() + timeout_ms * 1000000ull;
        for (;;) {
                uint64_t now = now_ns();
                if (now >= deadline)
                        break;
                struct pollfd p[2] = { { .fd = listen_fd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
                uint64_t left_ms = (deadline - now + 999999) / 1000000;
                int k = poll(p, 2, left_ms > INT_MAX ? INT_MAX : (int)left_ms);
                if (k < 0 && errno != EINTR)
                        break;
                if (k > 0 && p[1].revents)
                        break; /* told to stop: nobody will take them */
                if (k > 0 && p[0].revents & POLLIN) {
                        int conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
                        if (conn < 0)
                                continue;
                        int done = serve_one(conn, kept, n);
                        close(conn);
                        if (done) {
                                dlog(LOG_NOTICE, "keeper.handed_over", NULL, "keeper: the next nsboxd took the sandboxes over");
                                unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
                                _exit(0);
                        }
                }
        }
        unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
        destroy_all(state_dirfd, kept, n);
        _exit(0);
}

/* The keeper socket's address: the state directory's path (as opened) and its name. */
static int keeper_addr(int state_dirfd, struct sockaddr_un *a)
{
        char fdpath[64], path[PATH_MAX];
        snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", state_dirfd);
        ssize_t dl = readlink(fdpath, path, sizeof(path) - 1);
        size_t nl = strlen(NSBOX_KEEPER_SOCKET);
        *a = (struct sockaddr_un){ .sun_family = AF_UNIX };
        if (dl <= 0 || (size_t)dl + 1 + nl >= sizeof(a->sun_path))
                return -ENAMETOOLONG;
        memcpy(a->sun_path, path, (size_t)dl);
        a->sun_path[dl] = '/';
        memcpy(a->sun_path + dl + 1, NSBOX_KEEPER_SOCKET, nl + 1);
        return 0;
}

pid_t nsbox_keeper_fork(int state_dirfd, const nsbox_kept *kept, size_t n, uint64_t timeout_ms, int *ctl, nsbox_error *err)
{
        /* bound and listening before the old nsboxd exits: the next one may connect at once */
        int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (lfd < 0)
                return nsbox_err(err, errno, "keeper socket");
        struct sockaddr_un a;
        if (keeper_addr(state_dirfd, &a) < 0) {
                close(lfd);
                return nsbox_err(err, ENAMETOOLONG, "keeper socket: the state directory's path is too long for a socket");
        }
        unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
        mode_t old = umask(0077);
        int b = bind(lfd, (struct sockaddr *)&a, sizeof(a));
        umask(old);
        if (b < 0 || listen(lfd, 4) < 0) {
                int e = errno;
                close(lfd);
                return nsbox_err(err, e, "keeper socket '%s'", a.sun_path);
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                int e = errno;
                close(lfd);
                unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
                return nsbox_err(err, e, "pipe");
        }
        size_t total = 3;
        for (size_t i = 0; i < n; i++)
                total += kept[i].n_fds;
        int *keep = malloc(total * sizeof(int));
        if (!keep) {
                close(lfd);
                nsbox_close_pair(p);
                unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
                return nsbox_err(err, ENOMEM, "keeper");
        }
        size_t k = 0;
        keep[k++] = lfd;
        keep[k++] = state_dirfd;
        keep[k++] = p[0];
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < kept[i].n_fds; j++)
                        keep[k++] = kept[i].fds[j];
        qsort(keep, k, sizeof(int), cmp_int);
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                free(keep);
                close(lfd);
                nsbox_close_pair(p);
                unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
                return nsbox_err(err, e, "fork the keeper");
        }
        if (pid == 0) {
                /* nothing else of nsboxd's: not its lock (the next nsboxd takes it), nor its
                 * clients, nor its socket */
                nsbox_close_all_but(keep, k);
                keeper_main(lfd, state_dirfd, p[0], kept, n, timeout_ms);
        }
        free(keep);
        close(lfd);
        close(p[0]);
        *ctl = p[1];
        return pid;
}

int nsbox_keeper_go(int ctl, bool go)
{
        char c = go ? 'g' : 'x';
        ssize_t r;
        while ((r = write(ctl, &c, 1)) < 0 && errno == EINTR)
                ;
        close(ctl);
        return r == 1 ? 0 : -EPIPE;
}

int nsbox_keeper_collect(int state_dirfd, int (*take)(void *ctx, json_t *record, int *fds, size_t n), void *ctx, nsbox_error *err)
{
        struct sockaddr_un a;
        if (keeper_addr(state_dirfd, &a) < 0)
                return 0; /* no keeper could have bound it */
        struct stat st;
        if (fstatat(state_dirfd, NSBOX_KEEPER_SOCKET, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
                unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0);
                return 0;
        }
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return nsbox_err(err, errno, "keeper socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                unlinkat(state_dirfd, NSBOX_KEEPER_SOCKET, 0); /* its keeper is gone */
                return 0;
        }
        struct ucred cr;
        socklen_t cl = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid())
                return nsbox_err(err, EPERM, "keeper socket '%s': not our user's", a.sun_path);
        /* (no nsbox_peer_check of the keeper: its credentials are those of the nsboxd that
         * bound the socket and has exited since; the state directory is hidden from binds) */
        struct timeval tv = { .tv_sec = 30 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char *buf = malloc(RECORD_MAX + 1);
        if (!buf)
                return nsbox_err(err, ENOMEM, "keeper");
        int count = 0, r = 0;
        for (;;) {
                union {
                        char b[CMSG_SPACE(sizeof(int) * NSBOX_KEEPER_MAX_FDS)];
                        struct cmsghdr align;
                } u;
                struct iovec iov = { .iov_base = buf, .iov_len = RECORD_MAX };
                struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
                ssize_t got;
                while ((got = recvmsg(fd, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
                        ;
                int fds[NSBOX_KEEPER_MAX_FDS];
                size_t nfds = 0;
                for (struct cmsghdr *c = got >= 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                for (size_t i = 0; i < k && nfds < NSBOX_KEEPER_MAX_FDS; i++)
                                        memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        }
                if (got <= 0 || m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                        for (size_t i = 0; i < nfds; i++)
                                close(fds[i]);
                        r = nsbox_err(err, got < 0 ? errno : EPROTO, "keeper: the hand-over broke off after %d sandboxes", count);
                        break;
                }
                buf[got] = '\0';
                json_error_t je;
                json_t *rec = json_loadb(buf, (size_t)got, 0, &je);
                bool end = json_is_true(json_object_get(rec, "end"));
                if (rec && !end) {
                        take(ctx, rec, fds, nfds);
                        count++;
                }
                json_decref(rec);
                for (size_t i = 0; i < nfds; i++)
                        if (fds[i] >= 0)
                                close(fds[i]);
                if (end) {
                        (void)!send(fd, "ok", 2, MSG_NOSIGNAL);
                        break;
                }
        }
        free(buf);
        return r < 0 ? r : count;
}
