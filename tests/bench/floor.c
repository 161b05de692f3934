/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* make bench: the machine's floor for a call through a relay.  What a round trip costs with no
 * work at all: the bench and an echo child over a unix socket, directly, and through a third
 * process that only relays the bytes (epoll, read, write: what nsboxd does for a call to an
 * agent, without parsing or the agent's work).  Messages of a call's sizes; tests/bench/daemon.c
 * measures them interleaved with the calls they are the floor of. */
#include "floor.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../runtime/util.h"

static void die(const char *what)
{
        fprintf(stderr, "bench-daemon: floor: %s: %s\n", what, strerror(errno));
        exit(1);
}

static void floor_echo(int fd, size_t req, size_t reply)
{
        char *in = malloc(req), *out = malloc(reply);
        if (!in || !out)
                _exit(1);
        memset(out, 'x', reply);
        for (;;) {
                size_t got = 0;
                while (got < req) {
                        ssize_t n = read(fd, in + got, req - got);
                        if (n <= 0)
                                _exit(0);
                        got += (size_t)n;
                }
                if (write_full(fd, out, reply) < 0)
                        _exit(0);
        }
}

static void floor_relay(int a, int b)
{
        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN };
        ev.data.fd = a;
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) < 0)
                _exit(1);
        ev.data.fd = b;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) < 0)
                _exit(1);
        static char buf[65536];
        for (;;) {
                struct epoll_event got[2];
                int n = epoll_wait(ep, got, 2, -1);
                for (int i = 0; i < n; i++) {
                        int from = got[i].data.fd;
                        ssize_t k = read(from, buf, sizeof(buf));
                        if (k <= 0 || write_full(from == a ? b : a, buf, (size_t)k) < 0)
                                _exit(0);
                }
        }
}

/* A child that keeps only the given fds (at 1000 and 1001 after the call): a copy of any other end
 * would keep an end of file from its reader. */
static pid_t floor_fork(int *fd0, int *fd1)
{
        pid_t pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (dup2(*fd0, 1000) < 0 || (fd1 && dup2(*fd1, 1001) < 0))
                        _exit(1);
                syscall(SYS_close_range, 3, 999, 0);
                syscall(SYS_close_range, 1002, ~0u, 0);
                *fd0 = 1000;
                if (fd1)
                        *fd1 = 1001;
        }
        return pid;
}

void floor_open(floor_rig *r, size_t req, size_t reply)
{
        int d[2], a[2], b[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, d) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b) < 0)
                die("socketpair");
        if ((r->kids[0] = floor_fork(&d[1], NULL)) == 0)
                floor_echo(d[1], req, reply);
        if ((r->kids[1] = floor_fork(&b[1], NULL)) == 0)
                floor_echo(b[1], req, reply);
        if ((r->kids[2] = floor_fork(&a[1], &b[0])) == 0)
                floor_relay(a[1], b[0]);
        close(d[1]);
        close(a[1]);
        close(b[0]);
        close(b[1]);
        r->direct = d[0];
        r->relayed = a[0];
}

uint64_t floor_call(int fd, size_t req, size_t reply)
{
        static char buf[65536];
        memset(buf, 'q', req < sizeof(buf) ? req : sizeof(buf));
        uint64_t t0 = now_ns();
        if (write_full(fd, buf, req) < 0)
                die("write");
        for (size_t got = 0; got < reply;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        die("the echo process went away");
                got += (size_t)n;
        }
        return now_ns() - t0;
}

void floor_close(floor_rig *r)
{
        close(r->direct);
        close(r->relayed);
        for (int i = 0; i < 3; i++)
                while (waitpid(r->kids[i], NULL, 0) < 0 && errno == EINTR)
                        ;
}
