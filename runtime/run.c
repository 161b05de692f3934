/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox run`'s supervisor of one foreground sandbox: starts it through the launcher
 * (nsbox_sandbox_start, sandbox.c, which is docs/security.md's setup order), proxies the stdio
 * that must not reach the sandbox as it is, forwards the caller's signals, enforces the timeout
 * and collects the command's result.  nsboxd's and libnsbox's sandboxes have their own
 * supervisors (daemon.c, inproc.c). */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "sandbox.h"
#include "sync.h"
#include "util.h"

/* The caller's signals that reach the sandbox's init (a second SIGINT or SIGTERM: SIGKILL). */
static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define TIMEOUT_GRACE_MS 2000 /* after the agent was told to kill the command: kill the agent */

static void forwarded_set(sigset_t *set, bool tty)
{
        sigemptyset(set);
        for (size_t i = 0; i < ARRAY_SIZE(forwarded_signals); i++)
                sigaddset(set, forwarded_signals[i]);
        if (tty) /* our window's size: init sets its pty's */
                sigaddset(set, SIGWINCH);
}

/* A file given as standard input or output (`< file`, `> file`) could be reopened through
 * /proc/self/fd by the sandbox user, who owns it when nsbox runs unprivileged: read-only would
 * become read-write.  Such an fd is replaced by a pipe.  The output pipes are drained into their
 * files by the supervisor itself, in its poll loop; standard input is fed from its file by a
 * copier process (a fork costs a start some 0.3 ms, so the common `> file 2>&1` has none).
 * Terminals, pipes and sockets are passed as they are. */
typedef struct stdio_proxy {
        pid_t copier;       /* standard input's, or 0 */
        int sandbox_end[3]; /* the pipe end the sandbox gets as fd 0, 1 or 2, or -1 */
        int drain[3];       /* for 1 and 2: our end, non-blocking, read into that fd; or -1 */
} stdio_proxy;

/* Standard input: splice from the file.  (Output is never spliced: splice(2) takes the file's
 * offset before it waits for the pipe and stores it back after, undoing what nsbox itself wrote
 * to the same open file meanwhile: its warnings, --json.) */
static void copy_until_eof(int in, int out)
{
        bool use_splice = true;
        for (;;) {
                ssize_t n = use_splice ? splice(in, NULL, out, NULL, 1 << 20, SPLICE_F_MOVE) : -1;
                if (n < 0 && use_splice && errno == EINVAL)
                        use_splice = false; /* a file system without splice */
                else if (n < 0 && use_splice && errno == EINTR)
                        continue;
                else if (use_splice) {
                        if (n <= 0)
                                return;
                        continue;
                }
                if (!use_splice) {
                        char buf[65536];
                        n = read(in, buf, sizeof(buf));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0 || write_full(out, buf, (size_t)n) < 0)
                                return;
                }
        }
}

/* `> file 2>&1`: fds 1 and 2 share one open file (and its offset). */
static bool same_open_file(int a, int b)
{
        long r = syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, a, b);
        if (r >= 0)
                return r == 0;
        struct stat sa, sb;
        return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
               lseek(a, 0, SEEK_CUR) == lseek(b, 0, SEEK_CUR) && fcntl(a, F_GETFL) == fcntl(b, F_GETFL);
}

/* Standard input's copier: a process holding only the file and the pipe's write end. */
static int stdin_copier(stdio_proxy *px, int p[2], nsbox_error *err)
{
        pid_t pid = fork();
        if (pid < 0)
                return nsbox_err(err, errno, "fork a copier for standard input");
        if (pid == 0) {
                /* only its two ends: another copy of a pipe end would keep EOF away */
                int out = p[1];
                for (int i = 1; i <= 2; i++)
                        if (i != out)
                                close(i);
                syscall(SYS_close_range, 3, out - 1 >= 3 ? out - 1 : 2, 0);
                syscall(SYS_close_range, out + 1, ~0u, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                signal(SIGPIPE, SIG_DFL);
                copy_until_eof(0, out);
                _exit(0);
        }
        px->copier = pid;
        close(p[1]);
        px->sandbox_end[0] = p[0];
        return 0;
}

static int proxy_stdio(stdio_proxy *px, nsbox_error *err)
{
        for (int fd = 0; fd <= 2; fd++) {
                struct stat st;
                if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode)))
                        continue;
                /* one pipe for both: two drains would race on the shared offset and overwrite each
                 * other's output */
                if (fd == 2 && px->drain[1] >= 0 && same_open_file(1, 2)) {
                        if ((px->sandbox_end[2] = fcntl(px->sandbox_end[1], F_DUPFD_CLOEXEC, 3)) < 0)
                                return nsbox_err(err, errno, "pipe for standard error");
                        continue;
                }
                int p[2];
                if (pipe2(p, O_CLOEXEC) < 0)
                        return nsbox_err(err, errno, "pipe for standard %s", fd ? "output" : "input");
                if (fd == 0) {
                        if (stdin_copier(px, p, err) < 0) {
                                close(p[0]);
                                close(p[1]);
                                return -1;
                        }
                        continue;
                }
                if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                        close(p[0]);
                        close(p[1]);
                        return nsbox_err(err, errno, "pipe for standard output");
                }
                px->drain[fd] = p[0];
                px->sandbox_end[fd] = p[1];
        }
        return 0;
}

/* What the output pipes hold, into their files, 1 MiB each at most a call (a command that
 * writes without end must not keep the supervisor from its signals and deadlines: poll says
 * when there is more); a pipe at its end (or whose file takes no more: then the sandbox's next
 * write fails with EPIPE, as it would into a closed pipe) is closed. */
static void proxy_drain(stdio_proxy *px)
{
        for (int fd = 1; fd <= 2; fd++) {
                for (int round = 0; round < 16 && px->drain[fd] >= 0; round++) {
                        char buf[65536];
                        ssize_t n = read(px->drain[fd], buf, sizeof(buf));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                break;
                        if (n <= 0 || write_full(fd, buf, (size_t)n) < 0) {
                                close(px->drain[fd]);
                                px->drain[fd] = -1;
                        }
                }
        }
}

/* Close our ends; drain the output pipes until their end (the sandbox is gone or going, so it
 * comes); the copier is stopped: input left unread is of no use to anyone. */
static void proxy_finish(stdio_proxy *px)
{
        for (int fd = 0; fd <= 2; fd++) {
                if (px->sandbox_end[fd] >= 0)
                        close(px->sandbox_end[fd]);
                px->sandbox_end[fd] = -1;
        }
        if (px->copier > 0) {
                kill(px->copier, SIGKILL);
                while (waitpid(px->copier, NULL, 0) < 0 && errno == EINTR)
                        ;
                px->copier = 0;
        }
        while (px->drain[1] >= 0 || px->drain[2] >= 0) {
                struct pollfd pfd[2] = { { .fd = px->drain[1], .events = POLLIN }, { .fd = px->drain[2], .events = POLLIN } };
                if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                        break;
                proxy_drain(px);
        }
        for (int fd = 1; fd <= 2; fd++)
                if (px->drain[fd] >= 0) {
                        close(px->drain[fd]);
                        px->drain[fd] = -1;
                }
}

typedef struct supervise_state {
        int status_msg;  /* SYNC_EXIT value, when has_exit */
        bool has_exit;
        bool has_error;
        int error_status;
        char error_text[1024];
        nsbox_sync_usage usage;
        bool timed_out;
        bool sync_open;       /* the setup channel, until init closes it */
        bool reaped;          /* init was waited for; then: */
        int wstatus;
        struct rusage init_ru;
} supervise_state;

static void take_message(supervise_state *s, const nsbox_sync_msg *m)
{
        if (m->type == SYNC_EXIT) {
                s->has_exit = true;
                s->status_msg = m->value;
                if (m->len == sizeof(s->usage))
                        memcpy(&s->usage, m->payload, sizeof(s->usage));
        } else if (m->type == SYNC_ERROR && !s->has_error) {
                s->has_error = true;
                s->error_status = m->value >= 1 && m->value <= 255 ? m->value : 125;
                snprintf(s->error_text, sizeof(s->error_text), "%.1000s", (const char *)m->payload);
        }
}

/* Forward signals, enforce the timeout, collect the init's messages; until init exits, or has
 * reported when the caller returns at exit. */
static int supervise(const nsbox_policy *p, const nsbox_sandbox *sb, int sigfd, unsigned flags, stdio_proxy *px,
                     supervise_state *st, nsbox_error *err)
{
        unsigned terminate_requests = 0;
        uint64_t deadline = p->limits.timeout_ms ? sb->start_ns + p->limits.timeout_ms * 1000000ull : 0;
        uint64_t hard_deadline = 0;
        for (;;) {
                struct pollfd pfd[5] = { { .fd = sb->pidfd, .events = POLLIN },
                                         { .fd = sigfd, .events = POLLIN },
                                         { .fd = st->sync_open ? sb->syncfd : -1, .events = POLLIN },
                                         { .fd = px->drain[1], .events = POLLIN },
                                         { .fd = px->drain[2], .events = POLLIN } };
                int wait_ms = -1;
                uint64_t next = !st->timed_out ? deadline : hard_deadline;
                if (next) {
                        uint64_t now = now_ns();
                        wait_ms = now >= next ? 0 : (int)((next - now + 999999) / 1000000);
                }
                int n = poll(pfd, 5, wait_ms);
                if (n < 0 && errno != EINTR)
                        return nsbox_err(err, errno, "poll");
                if ((pfd[3].revents | pfd[4].revents) & (POLLIN | POLLHUP | POLLERR))
                        proxy_drain(px);
                if (deadline && !st->timed_out && now_ns() >= deadline) {
                        /* init kills the command's group and reports its usage; when init exits
                         * the kernel kills everything else in the pid namespace */
                        st->timed_out = true;
                        hard_deadline = now_ns() + TIMEOUT_GRACE_MS * 1000000ull;
                        syscall(SYS_pidfd_send_signal, sb->pidfd, NSBOX_SIG_KILL_COMMAND, NULL, 0);
                } else if (hard_deadline && now_ns() >= hard_deadline) {
                        hard_deadline = 0;
                        syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
                }
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                                bool terminating = si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM;
                                /* the first is the command's to handle; a second one means the
                                 * caller wants it gone, even if it (or a broken policy) ignores it */
                                int sig = terminating && ++terminate_requests > 1 ? SIGKILL : (int)si.ssi_signo;
                                syscall(SYS_pidfd_send_signal, sb->pidfd, sig, NULL, 0);
                        }
                }
                if (st->sync_open && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                        static nsbox_sync_msg m;
                        if (nsbox_sync_recv(sb->syncfd, &m) == 1)
                                take_message(st, &m);
                        else
                                st->sync_open = false;
                }
                /* init has reported and is exiting; the kernel is already killing whatever else
                 * is left in its pid namespace.  bwrap returns here too. */
                if ((st->has_exit || st->has_error) && (flags & NSBOX_RUN_RETURN_AT_EXIT))
                        return 0;
                if (pfd[0].revents & POLLIN)
                        return 0;
        }
}

/* Init has exited or is exiting: its network helper and init itself, unless the caller returns
 * at once; then what init said just before it exited. */
static void collect(const nsbox_policy *p, nsbox_sandbox *sb, unsigned flags, supervise_state *st)
{
        /* slirp4netns: told to exit now.  Its exit takes the kernel some 20 ms; with published
         * ports (or for a caller that stays, which must not collect zombies), destroy waits for
         * it, so that the ports are free when we return; else it finishes on its own and the
         * orphan is reaped by whoever adopts it. */
        if (sb->net.pid > 0 && p->n_publish == 0 && (flags & NSBOX_RUN_RETURN_AT_EXIT))
                nsbox_net_detach(&sb->net);
        else if (sb->net.exitfd >= 0) {
                close(sb->net.exitfd);
                sb->net.exitfd = -1;
        }
        if (!((st->has_exit || st->has_error) && (flags & NSBOX_RUN_RETURN_AT_EXIT))) {
                while (wait4(sb->pid, &st->wstatus, 0, &st->init_ru) < 0 && errno == EINTR)
                        ;
                st->reaped = true;
        }
        sb->pid = 0; /* reaped, or exiting and not to be waited for */
        while (st->sync_open && st->reaped) { /* what init said just before it exited */
                static nsbox_sync_msg m;
                struct pollfd one = { .fd = sb->syncfd, .events = POLLIN };
                if (poll(&one, 1, 0) <= 0 || nsbox_sync_recv(sb->syncfd, &m) != 1)
                        break;
                take_message(st, &m);
        }
}

/* *res from what init reported, or from how it ended when it could not. */
static int result(const nsbox_policy *p, const nsbox_sandbox *sb, supervise_state *st, nsbox_result *res, nsbox_error *err)
{
        *res = (nsbox_result){ .exit_code = -1 };
        nsbox_cgroup_unheld(&p->limits, &sb->cg, res->warning, sizeof(res->warning));
        res->limits = p->limits;
        res->held = nsbox_cgroup_held(&p->limits, &sb->cg);
        res->wall_us = (now_ns() - sb->start_ns) / 1000;
        if (!st->has_exit && st->reaped) {
                /* killed before it could report (timeout, kill): init's own and reaped children's */
                const struct rusage *ru = &st->init_ru;
                st->usage.user_us = (uint64_t)ru->ru_utime.tv_sec * 1000000 + (uint64_t)ru->ru_utime.tv_usec;
                st->usage.sys_us = (uint64_t)ru->ru_stime.tv_sec * 1000000 + (uint64_t)ru->ru_stime.tv_usec;
                st->usage.maxrss_kb = (uint64_t)ru->ru_maxrss;
        }
        res->user_us = st->usage.user_us;
        res->sys_us = st->usage.sys_us;
        res->max_rss_bytes = st->usage.maxrss_kb * 1024;
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&sb->cg, &cs) == 0) {
                /* the whole sandbox, orphans and the agent included */
                snprintf(res->cgroup, sizeof(res->cgroup), "%s", sb->cg.path ? sb->cg.path : ""); /* none: v1 only */
                if (cs.cpu_user_us + cs.cpu_system_us > 0) {
                        res->user_us = cs.cpu_user_us;
                        res->sys_us = cs.cpu_system_us;
                }
                if (cs.has_memory)
                        res->max_rss_bytes = cs.memory_peak;
                res->oom_killed = cs.oom_kills > 0;
                res->pids_limited = cs.pids_limited > 0;
        }
        if (st->timed_out) {
                res->timed_out = true;
                res->signal = SIGKILL;
                res->status = 124;
        } else if (st->has_error) {
                err->exit_status = st->error_status;
                return nsbox_err(err, 0, "%s", st->error_text);
        } else if (st->has_exit) {
                if (WIFEXITED(st->status_msg)) {
                        res->exit_code = WEXITSTATUS(st->status_msg);
                        res->status = res->exit_code;
                } else {
                        res->signal = WTERMSIG(st->status_msg);
                        res->status = 128 + res->signal;
                }
        } else if (WIFSIGNALED(st->wstatus)) {
                /* init itself was killed from outside (kill -9 of the sandbox, or the OOM killer) */
                res->signal = WTERMSIG(st->wstatus);
                res->status = 128 + res->signal;
        } else {
                return nsbox_err(err, 0, "sandbox init exited with status %d without reporting the command's",
                                 WEXITSTATUS(st->wstatus));
        }
        return 0;
}

int nsbox_run(const nsbox_policy *p, char *const argv[], unsigned flags, nsbox_result *res, nsbox_error *err)
{
        int r;
        sigset_t fwd, old;
        nsbox_agent_run_tty = flags & NSBOX_RUN_TTY;
        forwarded_set(&fwd, nsbox_agent_run_tty);
        sigprocmask(SIG_BLOCK, &fwd, &old);
        _cleanup_close_ int sigfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
        stdio_proxy proxy = { .sandbox_end = { -1, -1, -1 }, .drain = { -1, -1, -1 } };
        nsbox_sandbox sb = NSBOX_SANDBOX_INIT;
        supervise_state st = { .sync_open = true };
        if (sigfd < 0) {
                r = nsbox_err(err, errno, "signalfd");
                goto out;
        }
        if ((r = proxy_stdio(&proxy, err)) < 0)
                goto out;
        if ((r = nsbox_sandbox_start(p, argv, proxy.sandbox_end, NULL, &sb, err)) < 0)
                goto out;
        for (int fd = 0; fd <= 2; fd++)
                if (proxy.sandbox_end[fd] >= 0) {
                        close(proxy.sandbox_end[fd]);
                        proxy.sandbox_end[fd] = -1;
                }
        if ((r = supervise(p, &sb, sigfd, flags, &proxy, &st, err)) < 0)
                goto out;
        collect(p, &sb, flags, &st);
        r = result(p, &sb, &st, res, err);
out:
        nsbox_sandbox_destroy(&sb);
        proxy_finish(&proxy);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}
