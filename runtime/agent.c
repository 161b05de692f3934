/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent (agent.h).  One thread, one epoll loop.  What it holds is bounded: requests are not
 * read while the outgoing queue is above its high-water mark, and command output is either
 * captured up to max_output (the rest is read and dropped, so the command never blocks) or
 * streamed, in which case the pipes are not read while the queue is high: a command printing
 * endlessly to a slow reader is paused by its pipe, not buffered. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/registry.h"
#include "mounts.h"
#include "serve.h"
#include "proto.h"
#include "sync.h"
#include "util.h"
#include "watch.h"

extern char **environ;

bool nsbox_agent_run_tty;

static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* Blocking signals for a signalfd lifts the kernel's protection of a pid namespace's init
 * (signals it has no handler for are dropped when sent from inside): so a signal counts only
 * when kill(2) or tgkill(2) sent it from an ancestor pid namespace, where the kernel shows its
 * sender as pid 0.  Code inside sees its own pid there; sigqueue(2) from another process cannot
 * claim SI_USER or SI_TKILL, and F_SETSIG or exit signals carry kernel codes. */
static bool from_outside(const struct signalfd_siginfo *si)
{
        return si->ssi_pid == 0 && (si->ssi_code == SI_USER || si->ssi_code == SI_TKILL);
}

/* /proc/1/cmdline is readable by every process of the sandbox: replace the launcher's command
 * line (host paths of nsbox and of bind sources) with a name, as setproctitle does. */
static void scrub_cmdline(void)
{
        char buf[1024];
        int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return;
        buf[n] = '\0';
        /* fields 48 and 49 (arg_start, arg_end), counted after the ")" that ends comm */
        char *p = strrchr(buf, ')');
        unsigned long start = 0, end = 0;
        for (int field = 2; p && field <= 49; field++) {
                p = strchr(p + 1, ' ');
                if (p && field == 47)
                        start = strtoul(p + 1, NULL, 10);
                if (p && field == 48)
                        end = strtoul(p + 1, NULL, 10);
        }
        if (!start || end <= start || end - start > (1ul << 24))
                return;
        static const char name[] = "nsbox-init";
        memset((void *)start, 0, end - start);
        memcpy((void *)start, name, end - start < sizeof(name) ? end - start - 1 : sizeof(name) - 1);
}

/* ---- run mode: one command with the caller's standard streams ----------------------------- */

/* The command's terminal output, what there is now, to our fd 1; false once the pty is done. */
static bool relay_out(int master)
{
        char buf[16384];
        ssize_t n = read(master, buf, sizeof(buf));
        if (n > 0)
                return write_full(1, buf, (size_t)n) == 0;
        return n < 0 && (errno == EAGAIN || errno == EINTR);
}

static void copy_winsize(int master)
{
        struct winsize ws;
        if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row)
                ioctl(master, TIOCSWINSZ, &ws);
}

/* nsbox run -t: the command runs on a pty of the sandbox's own devpts, as a new session's
 * controlling terminal (job control); its bytes are relayed between the pty and the caller's
 * terminal (fds 0 and 1, in raw mode), SIGWINCH from outside resizes it.  Returns with *ret the
 * command's wait status and usage; -1 if it could not be started (then *spawn_error). */
static int run_on_pty(const nsbox_agent_config *c, int sfd, char **argv, int *ret, struct rusage *ru, int *spawn_error)
{
        struct winsize ws = { .ws_col = 80, .ws_row = 24 };
        ioctl(0, TIOCGWINSZ, &ws);
        tool_error te = { 0 };
        char slave[64];
        int master;
        if (pty_open(ws.ws_col ? ws.ws_col : 80, ws.ws_row ? ws.ws_row : 24, &master, slave, sizeof(slave), &te) < 0) {
                nsbox_sync_send_text(c->syncfd, SYNC_ERROR, 125, te.message);
                _exit(0);
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, slave, O_RDWR, 0); /* after setsid: the controlling tty */
        posix_spawn_file_actions_adddup2(&fa, 0, 1);
        posix_spawn_file_actions_adddup2(&fa, 0, 2);
        posix_spawnattr_t attr;
        spawn_attr_init(&attr);
        pid_t cmd;
        int e = posix_spawnp(&cmd, argv[0], &fa, &attr, argv, c->policy->env);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        if (e != 0) {
                close(master);
                *spawn_error = e;
                return -1;
        }
        /* fd 0 stays blocking: its open file is the caller's terminal's, shared with its shell */
        bool in_open = true, out_open = true;
        for (;;) {
                struct pollfd pfd[3] = { { .fd = in_open ? 0 : -1, .events = POLLIN },
                                         { .fd = out_open ? master : -1, .events = POLLIN },
                                         { .fd = sfd, .events = POLLIN } };
                if (poll(pfd, 3, -1) < 0 && errno != EINTR)
                        _exit(125);
                if (pfd[0].revents) {
                        char buf[4096];
                        ssize_t n = read(0, buf, sizeof(buf));
                        if (n > 0)
                                write_full(master, buf, (size_t)n); /* the keys, as typed */
                        else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                                in_open = false;
                }
                if (pfd[1].revents)
                        out_open = relay_out(master);
                struct signalfd_siginfo si;
                if (!(pfd[2].revents & POLLIN) || read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
                        continue;
                if (si.ssi_signo == SIGWINCH && from_outside(&si)) {
                        copy_winsize(master);
                } else if (si.ssi_signo != SIGCHLD) {
                        if (from_outside(&si))
                                kill(-cmd, (int)si.ssi_signo == NSBOX_SIG_KILL_COMMAND ? SIGKILL : (int)si.ssi_signo);
                } else {
                        pid_t w;
                        while ((w = wait4(-1, ret, WNOHANG, ru)) > 0)
                                if (w == cmd) {
                                        /* what it wrote last; processes it left may hold the pty */
                                        while (out_open && relay_out(master))
                                                if (poll(&(struct pollfd){ .fd = master, .events = POLLIN }, 1, 0) <= 0)
                                                        break;
                                        return 0;
                                }
                }
        }
}

static _Noreturn void agent_run_command(const nsbox_agent_config *c, int sfd)
{
        /* the command's argv may lie in the launcher's command line: copied, then the command
         * line scrubbed before the command can read /proc/1/cmdline */
        size_t argc = 0;
        while (c->argv[argc])
                argc++;
        char **argv = calloc(argc + 1, sizeof(*argv));
        for (size_t i = 0; argv && i < argc; i++)
                if (!(argv[i] = strdup(c->argv[i])))
                        argv = NULL; /* the process exits soon either way: no free needed */
        if (!argv) {
                nsbox_sync_send_text(c->syncfd, SYNC_ERROR, 125, "out of memory");
                _exit(0);
        }
        scrub_cmdline();
        if (nsbox_agent_run_tty && isatty(0)) {
                int st, e = 0;
                struct rusage ru;
                if (run_on_pty(c, sfd, argv, &st, &ru, &e) == 0) {
                        nsbox_sync_usage u;
                        usage_from(&ru, &u);
                        nsbox_sync_send(c->syncfd, SYNC_EXIT, st, &u, sizeof(u));
                        _exit(0);
                }
                char msg[600];
                exec_failure_message(msg, sizeof(msg), argv[0], e);
                nsbox_sync_send_text(c->syncfd, SYNC_ERROR, exec_failure_status(e), msg);
                _exit(0);
        }
        posix_spawnattr_t attr;
        spawn_attr_init(&attr);
        pid_t cmd;
        int e = posix_spawnp(&cmd, argv[0], NULL, &attr, argv, c->policy->env);
        posix_spawnattr_destroy(&attr);
        if (e != 0) {
                char msg[600];
                exec_failure_message(msg, sizeof(msg), argv[0], e);
                nsbox_sync_send_text(c->syncfd, SYNC_ERROR, exec_failure_status(e), msg);
                _exit(0);
        }
        for (;;) {
                struct signalfd_siginfo si;
                ssize_t n = read(sfd, &si, sizeof(si));
                if (n != (ssize_t)sizeof(si)) {
                        if (n < 0 && errno == EINTR)
                                continue;
                        _exit(125);
                }
                if (si.ssi_signo != SIGCHLD) {
                        /* the caller's signals, forwarded by nsbox run; never the command's own */
                        if (from_outside(&si))
                                kill(-cmd, (int)si.ssi_signo == NSBOX_SIG_KILL_COMMAND ? SIGKILL : (int)si.ssi_signo);
                        continue;
                }
                int st;
                pid_t w;
                struct rusage ru;
                while ((w = wait4(-1, &st, WNOHANG, &ru)) > 0)
                        if (w == cmd) {
                                /* the command's usage, with every descendant it reaped */
                                nsbox_sync_usage u;
                                usage_from(&ru, &u);
                                nsbox_sync_send(c->syncfd, SYNC_EXIT, st, &u, sizeof(u));
                                _exit(0);
                        }
        }
}

/* ---- serve mode: requests and the loop (commands: agent_procs.c, watch: agent_watch.c) ---- */

static void handle_cancel(agent *a, const request *rq)
{
        tool_error e = { 0 };
        uint64_t id = 0;
        if (tool_param_uint(&rq->in, "cancel", "id", INT64_MAX, &id, &e) < 0) {
                send_tool_error(a, rq->id, &e);
                return;
        }
        bool found = false;
        for (proc *p = a->procs; p; p = p->next) {
                if (p->call_id == (json_int_t)id && !p->exited && p->pid > 0) {
                        kill(-p->pid, SIGKILL);
                        found = true;
                }
                /* a process_wait call: answered now, and the process may be waited for again */
                if (p->wait_id == (json_int_t)id) {
                        p->wait_id = -1;
                        send_result(a, (json_int_t)id, json_pack("{sI sb}", "pid", (json_int_t)p->pid, "cancelled", 1), NULL, 0);
                        found = true;
                }
                /* a process_connect call: its reader goes, the process stays */
                for (attach **tp = &p->attached; *tp; tp = &(*tp)->next)
                        if ((*tp)->call_id == (json_int_t)id) {
                                attach *t = *tp;
                                *tp = t->next;
                                send_result(a, t->call_id, json_pack("{sI sb}", "pid", (json_int_t)p->pid, "detached", 1), NULL, 0);
                                free(t);
                                found = true;
                                break;
                        }
        }
        if (watch_cancel(a, (json_int_t)id) || code_cancel(a, (json_int_t)id) || xfer_cancel(a, (json_int_t)id))
                found = true;
        send_result(a, rq->id, json_pack("{sb}", "cancelled", found), NULL, 0);
}

/* Supervisor flow control: {id, pause}: stop or resume reading a streamed command's output. */
static void handle_pause(agent *a, const request *rq)
{
        tool_error e = { 0 };
        uint64_t id = 0;
        bool pause = true;
        if (tool_param_uint(&rq->in, "pause", "id", INT64_MAX, &id, &e) < 0 || tool_param_bool(&rq->in, "pause", "pause", &pause, &e) < 0) {
                send_tool_error(a, rq->id, &e);
                return;
        }
        for (proc *p = a->procs; p; p = p->next) {
                if (p->call_id == (json_int_t)id)
                        p->paused = pause;
                for (attach *t = p->attached; t; t = t->next)
                        if (t->call_id == (json_int_t)id)
                                t->paused = pause;
        }
        watch_pause(a, (json_int_t)id, pause);
        code_pause(a, (json_int_t)id, pause);
        send_result(a, rq->id, json_pack("{sb}", "paused", pause), NULL, 0);
}

/* Supervisor: {}: a pause that keeps no memory (or a resume that reboots): every other process of
 * the sandbox is killed.  The agent is pid 1 of the sandbox's pid namespace, which kill(-1)
 * spares; what it ran is reaped and answered as any killed command is.  The sandbox's boot_id
 * changes, as a machine's does when it boots. */
static void handle_reboot(agent *a, const request *rq)
{
        bool killed = kill(-1, SIGKILL) == 0;
        nsbox_boot_id_renew(); /* none in a kernel without the entry */
        for (proc *p = a->procs; p; p = p->next) /* a server started again may take its tag now */
                p->doomed = !p->exited;
        send_result(a, rq->id, json_pack("{sb}", "killed", killed), NULL, 0);
}

static void handle_tool(agent *a, const request *rq)
{
        const nsbox_tool_entry *t = NULL;
        for (const nsbox_tool_entry *it = a->c->tools; it && it->name; it++)
                if (strcmp(it->name, rq->tool) == 0)
                        t = it;
        if (!t) {
                json_t *jid = json_integer(rq->id);
                send_error(a, jid, "not_found", "tool '%s' is not served by this agent", rq->tool);
                json_decref(jid);
                return;
        }
        tool_error e = { 0 };
        tool_out out = { .result = NULL };
        sb_init(&out.payload, NSBOX_FRAME_MAX_PAYLOAD);
        if (t->fn(&a->tctx, &rq->in, &out, &e) < 0 || !out.result) {
                json_decref(out.result);
                if (e.code == TOOL_OK)
                        tool_fail(&e, TOOL_INTERNAL, "%s failed", rq->tool);
                send_tool_error(a, rq->id, &e);
        } else {
                send_result(a, rq->id, out.result, out.payload.buf, out.payload.len);
        }
        sb_release(&out.payload);
}

static void handle_frame(agent *a, nsbox_frame *f)
{
        if (!f->json) {
                send_error(a, NULL, "invalid_argument", "%s", f->json_error);
                return;
        }
        json_t *id = json_object_get(f->json, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0) {
                send_error(a, NULL, "invalid_argument", "a request needs an 'id': a non-negative integer");
                return;
        }
        request rq = { .id = json_integer_value(id) };
        json_t *tool = json_object_get(f->json, "tool"), *params = json_object_get(f->json, "params");
        if (!is_clean_string(tool)) {
                send_error(a, id, "invalid_argument", "a request needs a 'tool': a string");
                return;
        }
        if (params && !json_is_null(params) && !json_is_object(params)) {
                send_error(a, id, "invalid_argument", "'params' must be an object");
                return;
        }
        json_t *empty = NULL;
        if (!json_is_object(params))
                params = empty = json_object();
        rq.in = (tool_in){ .params = params, .payload = f->payload, .payload_len = f->payload_len };
        if (f->payload == NULL && f->payload_len == 0)
                rq.in.payload = NULL;
        const char *name = json_string_value(tool);
        rq.tool = !strcmp(name, "cancel") || !strcmp(name, "pause") || !strcmp(name, "reboot") ? name : tool_canonical_name(name);
        bool with_fd = json_is_true(json_object_get(f->json, "fd"));
        int pipefd = with_fd ? nsbox_frame_reader_take_fd(&a->rd) : -1;
        if (!rq.tool) {
                send_error(a, id, "not_found", "unknown tool '%.100s'", name);
        } else if (with_fd && (pipefd < 0 || (strcmp(rq.tool, "write_file") && strcmp(rq.tool, "read_file")))) {
                send_error(a, id, "invalid_argument", "%s: a descriptor goes with write_file and read_file, and must come with the frame", rq.tool);
        } else if (with_fd) {
                handle_xfer(a, &rq, steal_fd(&pipefd));
        } else if (strcmp(rq.tool, "exec") == 0) {
                handle_exec(a, &rq);
        } else if (strncmp(rq.tool, "process_", 8) == 0) {
                handle_process(a, &rq);
        } else if (strcmp(rq.tool, "watch") == 0) {
                handle_watch(a, &rq);
        } else if (code_tool(rq.tool)) {
                handle_code(a, &rq);
        } else if (strcmp(rq.tool, "cancel") == 0) {
                handle_cancel(a, &rq);
        } else if (strcmp(rq.tool, "pause") == 0) {
                handle_pause(a, &rq);
        } else if (strcmp(rq.tool, "reboot") == 0) {
                handle_reboot(a, &rq);
        } else {
                handle_tool(a, &rq);
        }
        if (pipefd >= 0)
                close(pipefd);
        json_decref(empty);
}

static void read_requests(agent *a)
{
        /* a batch at most, so that output and exits are served between requests */
        for (int i = 0; i < 64 && a->outq.len < OUTQ_HIGH; i++) {
                nsbox_frame f = { 0 };
                int r = nsbox_frame_read(&a->rd, a->c->protofd, &f);
                if (r == 0)
                        return;
                if (r == -E2BIG) {
                        send_error(a, NULL, "too_large", "frame larger than the maximum (%u bytes of JSON, %u of payload)",
                                   NSBOX_FRAME_MAX_JSON, NSBOX_FRAME_MAX_PAYLOAD);
                        continue;
                }
                if (r < 0) {
                        a->proto_eof = true;
                        return;
                }
                handle_frame(a, &f);
                nsbox_frame_release(&f);
        }
}

/* Deadlines: command timeouts, process_wait timeouts, exit grace.  Returns the epoll timeout. */
static int run_deadlines(agent *a)
{
        uint64_t now = now_ns(), next = 0;
        for (proc *p = a->procs, *nx; p; p = nx) {
                nx = p->next;
                if (!p->exited && p->deadline_ns && now >= p->deadline_ns) {
                        p->timed_out = true;
                        p->deadline_ns = 0;
                        kill(-p->pid, SIGKILL);
                }
                if (p->wait_id >= 0 && p->wait_deadline && now >= p->wait_deadline) {
                        json_t *jid = json_integer(p->wait_id);
                        send_error(a, jid, "timeout", "process %d is still running", (int)p->pid);
                        json_decref(jid);
                        p->wait_id = -1;
                        p->wait_deadline = 0;
                }
                if (p->exited && !p->result) {
                        proc_maybe_finish(a, p, now); /* may free p */
                        continue;
                }
                uint64_t cand[2] = { !p->exited ? p->deadline_ns : 0, p->wait_id >= 0 ? p->wait_deadline : 0 };
                for (int i = 0; i < 2; i++)
                        if (cand[i] && (!next || cand[i] < next))
                                next = cand[i];
        }
        uint64_t xfer_next = xfer_deadlines(a, now);
        if (xfer_next && (!next || xfer_next < next))
                next = xfer_next;
        uint64_t code_next = code_deadlines(a, now);
        if (code_next && (!next || code_next < next))
                next = code_next;
        for (proc *p = a->procs; p; p = p->next)
                if (p->exited && !p->result && !proc_held(a, p)) {
                        uint64_t g = p->exit_ns + EXIT_GRACE_NS;
                        if (!next || g < next)
                                next = g;
                }
        if (!next)
                return -1;
        now = now_ns();
        return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/* What epoll should tell us, given how full the outgoing queue is. */
static void update_interest(agent *a)
{
        bool high = a->outq.len >= OUTQ_HIGH;
        nsbox_epoll_set(a->epfd, a->c->protofd, WATCH_PROTO, &a->proto_events, (high || a->proto_eof ? 0 : EPOLLIN) | (a->outq.len ? EPOLLOUT : 0));
        for (proc *p = a->procs; p; p = p->next) {
                for (int i = 1; i <= 2; i++)
                        nsbox_epoll_set(a->epfd, p->fd[i], WATCH(p->serial, i), &p->events[i], proc_held(a, p) ? 0 : EPOLLIN);
                nsbox_epoll_set(a->epfd, p->fd[0], WATCH(p->serial, 0), &p->events[0], p->stdin_q.len ? EPOLLOUT : 0);
        }
        watch_update_interest(a, high);
        code_update_interest(a, high);
        xfer_update_interest(a, high);
}

static void handle_signals(agent *a, int sfd)
{
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                        reap(a);
                else if (from_outside(&si)) /* SIGTERM & co. from the supervisor: the sandbox is going away */
                        agent_exit(a, 0);
        }
}

static _Noreturn void agent_serve(const nsbox_agent_config *c, int sfd)
{
        static agent a; /* static: large, and there is exactly one */
        a.c = c;
        a.rd.take_fds = true; /* write_file's and read_file's pipes come with their frames */
        a.tctx.root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        a.tctx.root_path = "/";
        a.tctx.cwd = c->policy->workdir;
        a.epfd = epoll_create1(EPOLL_CLOEXEC);
        set_nonblock(c->protofd);
        set_nonblock(sfd);
        signal(SIGPIPE, SIG_IGN); /* a command that closed its stdin is EPIPE, not death */
        uint32_t sig_events;
        if (a.tctx.root_fd < 0 || a.epfd < 0 || nsbox_epoll_add(a.epfd, c->protofd, WATCH_PROTO, &a.proto_events, EPOLLIN) < 0 ||
            nsbox_epoll_add(a.epfd, sfd, WATCH_SIGNAL, &sig_events, EPOLLIN) < 0) {
                nsbox_error e = { 0 };
                nsbox_err(&e, errno, "agent: set up its event loop");
                nsbox_sync_send_error(c->syncfd, &e, NULL);
                _exit(125);
        }
        scrub_cmdline();
        /* ready: the launcher hands the sandbox to its caller */
        nsbox_sync_send(c->syncfd, SYNC_READY, 0, NULL, 0);
        close(c->syncfd);
        for (;;) {
                int timeout = run_deadlines(&a);
                if (a.proto_eof && a.outq.len == 0)
                        agent_exit(&a, 0); /* the supervisor is gone: so is the sandbox */
                update_interest(&a);
                /* requests read ahead with one read wait in the reader, not in the socket */
                bool buffered = !a.proto_eof && a.outq.len < OUTQ_HIGH && nsbox_frame_reader_ready(&a.rd);
                struct epoll_event ev[64];
                int n = epoll_wait(a.epfd, ev, 64, buffered ? 0 : timeout);
                if (n < 0 && errno != EINTR)
                        agent_exit(&a, 125);
                for (int i = 0; i < n; i++) {
                        uint64_t key = ev[i].data.u64;
                        if (key == WATCH_SIGNAL) {
                                handle_signals(&a, sfd);
                                continue;
                        }
                        if (key == WATCH_PROTO) {
                                if ((ev[i].events & EPOLLOUT) && nsbox_queue_flush(&a.outq, c->protofd) < 0)
                                        agent_exit(&a, 0);
                                if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                                        read_requests(&a);
                                continue;
                        }
                        if ((key & 3) == WATCH_INOTIFY) {
                                watch_ready(&a, key >> 2);
                                code_ready(&a, key >> 2, ev[i].events);
                                xfer_ready(&a, key >> 2, ev[i].events);
                                continue;
                        }
                        proc *p = NULL;
                        for (proc *q = a.procs; q; q = q->next)
                                if (q->serial == key >> 2)
                                        p = q;
                        int fdi = (int)(key & 3);
                        if (!p || p->fd[fdi] < 0)
                                continue; /* freed or closed by an earlier event of this batch */
                        if (fdi == 0)
                                proc_write_stdin(&a, p);
                        else
                                proc_read(&a, p, fdi);
                        if (p->exited)
                                proc_maybe_finish(&a, p, now_ns());
                }
                if (buffered)
                        read_requests(&a);
                if (a.outq.len && nsbox_queue_flush(&a.outq, c->protofd) < 0)
                        agent_exit(&a, 0);
        }
}

_Noreturn void nsbox_agent_main(const nsbox_agent_config *c)
{
        sigset_t mask;
        sigemptyset(&mask);
        for (size_t i = 0; i < ARRAY_SIZE(forwarded_signals); i++)
                sigaddset(&mask, forwarded_signals[i]);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, NSBOX_SIG_KILL_COMMAND);
        if (c->argv && nsbox_agent_run_tty)
                sigaddset(&mask, SIGWINCH);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0) {
                nsbox_error e = { 0 };
                nsbox_err(&e, errno, "sandbox init: signalfd");
                nsbox_sync_send_error(c->syncfd, &e, NULL);
                _exit(125);
        }
        environ = c->policy->env; /* posix_spawnp searches the policy's PATH, not the caller's */
        if (c->argv)
                agent_run_command(c, sfd);
        agent_serve(c, sfd);
}
