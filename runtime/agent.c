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
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tools/registry.h"
#include "consts.h"
#include "proto.h"
#include "sync.h"
#include "util.h"
#include "watch.h"

extern char **environ;

#define OUTQ_HIGH (8u << 20)           /* stop reading requests and streamed output above this */
#define DEFAULT_MAX_OUTPUT (1u << 20)  /* bytes kept per stream of a command when not streamed */
#define MAX_MAX_OUTPUT (16u << 20)
#define MAX_PROCS 256                  /* commands alive or finished-but-not-waited-for */
#define MAX_STDIN_PENDING (16u << 20)
#define EXIT_GRACE_NS (100ull * 1000000) /* a command's pipes may stay open in its leftovers */
#define CHUNK 65536
#define TAIL_MAX (64u << 10)           /* a background command's recent output kept per stream */
#define TAG_MAX 64

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

static void usage_from(const struct rusage *ru, nsbox_sync_usage *u)
{
        u->user_us = (uint64_t)ru->ru_utime.tv_sec * 1000000 + (uint64_t)ru->ru_utime.tv_usec;
        u->sys_us = (uint64_t)ru->ru_stime.tv_sec * 1000000 + (uint64_t)ru->ru_stime.tv_usec;
        u->maxrss_kb = (uint64_t)ru->ru_maxrss;
}

/* Spawn attributes every command gets: a session (and process group) of its own, so that no
 * terminal of the caller's is its controlling tty (bwrap CVE-2017-5226) and a timeout or a kill
 * reaches the whole group; default dispositions and an empty mask, whatever the agent has. */
static void spawn_attr_init(posix_spawnattr_t *attr)
{
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_init(attr);
        posix_spawnattr_setsigmask(attr, &none);
        posix_spawnattr_setsigdefault(attr, &all);
        posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

static int exec_failure_status(int e) { return e == ENOENT ? 127 : 126; }

static void exec_failure_message(char *buf, size_t size, const char *cmd, int e)
{
        if (e == ENOENT && !strchr(cmd, '/'))
                snprintf(buf, size, "'%.500s': command not found", cmd);
        else
                snprintf(buf, size, "cannot execute '%.500s': %s", cmd, strerror(e));
}

/* ---- run mode: one command with the caller's standard streams ----------------------------- */

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

/* ---- serve mode ---------------------------------------------------------------------------- */

typedef struct proc proc;
typedef struct attach attach;

/* A process_connect call attached to a background command: its output goes there as events. */
struct attach {
        attach *next;
        json_int_t call_id;
        bool paused;    /* its reader is slow: live chunks are dropped for it */
        bool truncated; /* it missed some of the output */
};

/* epoll data: a process's serial number and which of its fds (0-2), never a pointer, since an
 * event of a batch may refer to a process an earlier event of the same batch freed.  Serial 0
 * is the agent's own: fd 1 the protocol socket, fd 2 the signalfd. */
#define WATCH(serial, i) ((uint64_t)(serial) << 2 | (uint64_t)(i))
#define WATCH_PROTO WATCH(0, 1)
#define WATCH_SIGNAL WATCH(0, 2)

struct proc {
        proc *next;
        json_int_t call_id;   /* the exec request waiting for this result; -1 once answered */
        json_int_t wait_id;   /* a process_wait request waiting, or -1 */
        uint64_t wait_deadline;
        pid_t pid;
        uint64_t serial;
        int fd[3];            /* stdin (write end), stdout, stderr (read ends); -1 when closed */
        uint32_t events[3];   /* what epoll has for each fd now */
        strbuf out, err;
        size_t max_output;
        bool truncated, stream, background, exited, timed_out, close_stdin_when_done;
        bool paused;          /* stream paused by the supervisor: its reader is slow */
        nsbox_queue stdin_q;
        int wstatus;
        struct rusage ru;
        uint64_t start_ns, exit_ns, deadline_ns;
        char *command;        /* for process_list */
        json_t *result;       /* background: kept once finished, until waited for */
        char tag[TAG_MAX + 1]; /* "" when none */
        bool detached;
        time_t started_at;    /* wall clock, for process_list */
        char *tail[3];        /* background: the last TAIL_MAX bytes of stdout [1] and stderr [2] */
        size_t tail_len[3];
        bool tail_lost;       /* the tails no longer hold the output from its start */
        attach *attached;     /* process_connect calls waiting for its output and end */
};

typedef struct agent {
        const nsbox_agent_config *c;
        int epfd;
        uint32_t proto_events;
        uint64_t next_serial;
        nsbox_frame_reader rd;
        nsbox_queue outq;
        bool proto_eof;
        proc *procs;
        unsigned n_procs;
        struct watch_call *watches; /* watch calls streaming (watch_* below) */
        unsigned n_watches;
        tool_ctx tctx;
} agent;

static void agent_exit(agent *a, int status)
{
        /* everything else in the pid namespace dies with pid 1 */
        (void)a;
        _exit(status);
}

static void send_frame(agent *a, json_t *msg, const void *payload, size_t len)
{
        if (!msg)
                agent_exit(a, 125); /* out of memory: the supervisor sees the agent go */
        int r = nsbox_frame_append(&a->outq, msg, payload, len);
        if (r == -E2BIG) {
                json_t *id = json_incref(json_object_get(msg, "id"));
                json_decref(msg);
                msg = json_pack("{so s{ss ss}}", "id", id ? id : json_null(), "error", "code", "too_large", "message",
                                "the result is larger than the protocol's maximum frame");
                r = msg ? nsbox_frame_append(&a->outq, msg, NULL, 0) : -ENOMEM;
        }
        json_decref(msg);
        if (r < 0)
                agent_exit(a, 125);
}

static void send_error(agent *a, json_t *id, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void send_error(agent *a, json_t *id, const char *code, const char *fmt, ...)
{
        char msg[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        send_frame(a, json_pack("{sO s{ss ss}}", "id", id ? id : json_null(), "error", "code", code, "message", msg), NULL, 0);
}

static void send_tool_error(agent *a, json_int_t id, const tool_error *e)
{
        json_t *jid = json_integer(id);
        send_error(a, jid, tool_code_name(e->code), "%s", e->message);
        json_decref(jid);
}

static void send_result(agent *a, json_int_t id, json_t *result, const void *payload, size_t len)
{
        send_frame(a, json_pack("{sI so}", "id", (json_int_t)id, "result", result), payload, len);
}

static void proc_close_fd(agent *a, proc *p, int i)
{
        if (p->fd[i] < 0)
                return;
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->fd[i], NULL);
        close(p->fd[i]);
        p->fd[i] = -1;
}

static void proc_free(agent *a, proc *p)
{
        for (proc **pp = &a->procs; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        for (int i = 0; i < 3; i++)
                proc_close_fd(a, p, i);
        sb_release(&p->out);
        sb_release(&p->err);
        nsbox_queue_release(&p->stdin_q);
        json_decref(p->result);
        free(p->command);
        free(p->tail[1]);
        free(p->tail[2]);
        while (p->attached) {
                attach *t = p->attached;
                p->attached = t->next;
                free(t);
        }
        free(p);
        a->n_procs--;
}

static proc *proc_by_pid(agent *a, json_int_t pid)
{
        for (proc *p = a->procs; p; p = p->next)
                if (p->pid == pid)
                        return p;
        return NULL;
}

/* The newest process tagged tag: the running one if there is one (tags are unique among those). */
static proc *proc_by_tag(agent *a, const char *tag, bool running_only)
{
        proc *found = NULL;
        for (proc *p = a->procs; p; p = p->next) /* newest first */
                if (!strcmp(p->tag, tag) && (!p->exited || !running_only)) {
                        if (!p->exited)
                                return p;
                        if (!found)
                                found = p;
                }
        return found;
}

static bool valid_tag(const char *t)
{
        size_t n = strlen(t);
        if (n < 1 || n > TAG_MAX)
                return false;
        for (; *t; t++)
                if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') || strchr("._-", *t)))
                        return false;
        return true;
}

static json_t *proc_result(proc *p, uint64_t now)
{
        int code = -1, sig = 0;
        if (p->timed_out) {
                code = 124;
                sig = SIGKILL;
        } else if (WIFEXITED(p->wstatus)) {
                code = WEXITSTATUS(p->wstatus);
        } else if (WIFSIGNALED(p->wstatus)) {
                sig = WTERMSIG(p->wstatus);
                code = 128 + sig;
        }
        nsbox_sync_usage u;
        usage_from(&p->ru, &u);
        const char *reason = p->timed_out ? "timed_out" : sig ? "signaled" : "exited";
        json_t *o = json_pack("{sI si si ss sb sb sf sf sI}", "pid", (json_int_t)p->pid, "exit_code", code, "signal", sig, "reason",
                              reason, "timed_out", p->timed_out, "truncated", p->truncated, "duration_ms",
                              (double)((p->exit_ns ? p->exit_ns : now) - p->start_ns) / 1e6, "cpu_time_ms",
                              (double)(u.user_us + u.sys_us) / 1000.0, "peak_memory_bytes", (json_int_t)(u.maxrss_kb * 1024));
        if (o && !p->stream) {
                json_object_set_new(o, "stdout", nsbox_json_text(p->out.buf ? p->out.buf : "", p->out.len, NULL));
                json_object_set_new(o, "stderr", nsbox_json_text(p->err.buf ? p->err.buf : "", p->err.len, NULL));
        }
        return o;
}

static void send_output(agent *a, json_int_t id, pid_t pid, int i, const void *buf, size_t n)
{
        send_frame(a, json_pack("{sI ss sI}", "id", id, "event", i == 1 ? "stdout" : "stderr", "pid", (json_int_t)pid), buf, n);
}

/* Keep the last TAIL_MAX bytes of stream i, for process_connect calls to come. */
static void tail_append(agent *a, proc *p, int i, const char *buf, size_t n)
{
        if (!p->tail[i] && !(p->tail[i] = malloc(TAIL_MAX)))
                agent_exit(a, 125);
        if (n >= TAIL_MAX) {
                p->tail_lost |= p->tail_len[i] > 0 || n > TAIL_MAX;
                memcpy(p->tail[i], buf + n - TAIL_MAX, TAIL_MAX);
                p->tail_len[i] = TAIL_MAX;
                return;
        }
        size_t keep = p->tail_len[i] + n > TAIL_MAX ? TAIL_MAX - n : p->tail_len[i];
        if (keep < p->tail_len[i]) {
                memmove(p->tail[i], p->tail[i] + p->tail_len[i] - keep, keep);
                p->tail_lost = true;
        }
        memcpy(p->tail[i] + keep, buf, n);
        p->tail_len[i] = keep + n;
}

/* A background command's output: into its tail, and to each attached reader that keeps up (a
 * paused one, or any while the outgoing queue is high, misses the chunk and is told so at the
 * end: the command is never held for a reader). */
static void proc_fan_out(agent *a, proc *p, int i, const char *buf, size_t n)
{
        tail_append(a, p, i, buf, n);
        for (attach *t = p->attached; t; t = t->next) {
                if (t->paused || a->outq.len >= OUTQ_HIGH)
                        t->truncated = true;
                else
                        send_output(a, t->call_id, p->pid, i, buf, n);
        }
}

/* Answer the attached readers with the command's result (its output went to them as events). */
static void answer_attached(agent *a, proc *p, json_t *res)
{
        while (p->attached) {
                attach *t = p->attached;
                p->attached = t->next;
                json_t *r = json_copy(res);
                if (r) {
                        json_object_del(r, "stdout");
                        json_object_del(r, "stderr");
                        json_object_set_new(r, "truncated", json_boolean(t->truncated));
                }
                send_result(a, t->call_id, r, NULL, 0);
                free(t);
        }
}

/* Take what the pipe has (one chunk): streamed as an event, or captured up to max_output. */
static void proc_read(agent *a, proc *p, int i)
{
        char buf[CHUNK];
        ssize_t n = read(p->fd[i], buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                proc_close_fd(a, p, i);
                return;
        }
        if (p->stream && p->call_id >= 0) {
                send_frame(a, json_pack("{sI ss sI}", "id", p->call_id, "event", i == 1 ? "stdout" : "stderr", "pid", (json_int_t)p->pid),
                           buf, (size_t)n);
                return;
        }
        if (p->background)
                proc_fan_out(a, p, i, buf, (size_t)n);
        strbuf *sb = i == 1 ? &p->out : &p->err;
        size_t room = sb->len < p->max_output ? p->max_output - sb->len : 0;
        if ((size_t)n > room)
                p->truncated = true;
        if (room && sb_append(sb, buf, (size_t)n < room ? (size_t)n : room) < 0)
                agent_exit(a, 125);
}

static void proc_write_stdin(agent *a, proc *p)
{
        if (p->fd[0] < 0)
                return;
        int r = nsbox_queue_flush(&p->stdin_q, p->fd[0]);
        if (r < 0) { /* the command closed its stdin or exited: what is left is of no use */
                nsbox_queue_release(&p->stdin_q);
                proc_close_fd(a, p, 0);
                return;
        }
        if (r == 1 && p->close_stdin_when_done)
                proc_close_fd(a, p, 0);
}

/* A streamed command whose output cannot be sent now: its pipes wait, however long. */
static bool proc_held(const agent *a, const proc *p)
{
        return p->stream && (p->paused || a->outq.len >= OUTQ_HIGH) && (p->fd[1] >= 0 || p->fd[2] >= 0);
}

/* A command is done when it exited and its pipes reached EOF, or EXIT_GRACE after it exited
 * (a daemon it left behind may hold them open forever). */
static void proc_maybe_finish(agent *a, proc *p, uint64_t now)
{
        if (!p->exited || p->result || proc_held(a, p))
                return;
        if ((p->fd[1] >= 0 || p->fd[2] >= 0) && now < p->exit_ns + EXIT_GRACE_NS)
                return;
        for (int i = 1; i <= 2; i++) {
                if (p->fd[i] >= 0)
                        proc_read(a, p, i); /* what is already there */
                proc_close_fd(a, p, i);
        }
        proc_close_fd(a, p, 0);
        json_t *res = proc_result(p, now);
        if (!res)
                agent_exit(a, 125);
        if (!p->background) {
                if (p->call_id >= 0)
                        send_result(a, p->call_id, res, NULL, 0);
                else
                        json_decref(res);
                proc_free(a, p);
                return;
        }
        answer_attached(a, p, res);
        if (p->wait_id >= 0) { /* someone is waiting: answer, and forget the process */
                send_result(a, p->wait_id, res, NULL, 0);
                proc_free(a, p);
                return;
        }
        p->result = res;
}

static void reap(agent *a)
{
        int st;
        pid_t w;
        struct rusage ru;
        uint64_t now = now_ns();
        while ((w = wait4(-1, &st, WNOHANG, &ru)) > 0) {
                proc *p = proc_by_pid(a, w);
                if (!p || p->exited)
                        continue; /* an orphan re-parented to us */
                p->exited = true;
                p->wstatus = st;
                p->ru = ru;
                p->exit_ns = now;
                proc_maybe_finish(a, p, now);
        }
}

/* ---- requests ------------------------------------------------------------------------------- */

typedef struct request {
        json_int_t id;
        const char *tool; /* canonical */
        tool_in in;
} request;

static int parse_signal(json_t *v, int *ret)
{
        if (!v) {
                *ret = SIGKILL;
                return 0;
        }
        if (json_is_integer(v)) {
                json_int_t n = json_integer_value(v);
                if (n < 1 || n >= NSIG)
                        return -EINVAL;
                *ret = (int)n;
                return 0;
        }
        if (!json_is_string(v))
                return -EINVAL;
        const char *s = json_string_value(v);
        if (strncmp(s, "SIG", 3) == 0)
                s += 3;
        static const struct { const char *name; int sig; } names[] = {
                { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL }, { "USR1", SIGUSR1 },
                { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "ALRM", SIGALRM },
        };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strcmp(s, names[i].name) == 0) {
                        *ret = names[i].sig;
                        return 0;
                }
        return -EINVAL;
}

static bool is_clean_string(json_t *v) { return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v); }

/* The command's environment: the policy's, then the request's on top. */
static int build_env(agent *a, json_t *env, char ***ret, tool_error *e)
{
        _cleanup_strv_ char **v = NULL;
        for (char **p = a->c->policy->env; p && *p; p++) {
                const char *eq = strchr(*p, '=');
                if (env && eq) {
                        _cleanup_free_ char *k = strndup(*p, (size_t)(eq - *p));
                        if (k && json_object_get(env, k))
                                continue; /* overridden */
                }
                char *d = strdup(*p);
                if (!d || strv_push(&v, d) < 0)
                        return tool_fail(e, TOOL_INTERNAL, "out of memory");
        }
        const char *k;
        json_t *val;
        json_object_foreach(env, k, val) {
                if (!*k || strchr(k, '=') || !is_clean_string(val))
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: 'env' must map names (without '=') to strings");
                char *d = NULL;
                if (asprintf(&d, "%s=%s", k, json_string_value(val)) < 0 || strv_push(&v, d) < 0)
                        return tool_fail(e, TOOL_INTERNAL, "out of memory");
        }
        if (!v && strv_push(&v, NULL) < 0) /* an empty, NULL-terminated vector */
                return tool_fail(e, TOOL_INTERNAL, "out of memory");
        *ret = steal_pointer(&v);
        return 0;
}

typedef struct exec_params {
        char **argv, **env;
        char *cwd;
        const char *stdin_data;
        size_t stdin_len;
        double timeout_s;
        const char *tag;
        bool background, stream, detach;
        uint64_t max_output;
} exec_params;

static void exec_params_release(exec_params *x)
{
        strv_free(x->argv);
        strv_free(x->env);
        free(x->cwd);
}

static int parse_exec(agent *a, const request *rq, exec_params *x, tool_error *e)
{
        json_t *params = rq->in.params;
        json_t *cmd = json_object_get(params, "cmd"), *shell = json_object_get(params, "shell");
        if (!shell)
                shell = json_object_get(params, "command"); /* run_commands {command} */
        if ((cmd && shell) || (!cmd && !shell))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: give exactly one of 'cmd' (an argv array) and 'shell' (a string)");
        if (shell) {
                if (!is_clean_string(shell))
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: 'shell' must be a string without NUL bytes");
                const char *sv[] = { "/bin/sh", "-c", json_string_value(shell) };
                for (size_t i = 0; i < 3; i++) {
                        char *d = strdup(sv[i]);
                        if (!d || strv_push(&x->argv, d) < 0)
                                return tool_fail(e, TOOL_INTERNAL, "out of memory");
                }
        } else {
                if (!json_is_array(cmd) || json_array_size(cmd) == 0 || json_array_size(cmd) > 65536)
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: 'cmd' must be a non-empty array of strings");
                size_t i;
                json_t *v;
                json_array_foreach(cmd, i, v) {
                        if (!is_clean_string(v) || (i == 0 && !*json_string_value(v)))
                                return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: 'cmd' must be a non-empty array of strings without NUL bytes");
                        char *d = strdup(json_string_value(v));
                        if (!d || strv_push(&x->argv, d) < 0)
                                return tool_fail(e, TOOL_INTERNAL, "out of memory");
                }
        }
        const char *cwd = a->c->policy->workdir;
        if (tool_param_string(&rq->in, "exec", "cwd", false, &cwd, e) < 0 ||
            tool_param_string(&rq->in, "exec", "stdin", false, &x->stdin_data, e) < 0 ||
            tool_param_bool(&rq->in, "exec", "background", &x->background, e) < 0 ||
            tool_param_bool(&rq->in, "exec", "stream", &x->stream, e) < 0 ||
            tool_param_bool(&rq->in, "exec", "detach", &x->detach, e) < 0 || tool_param_string(&rq->in, "exec", "tag", false, &x->tag, e) < 0)
                return -1;
        x->background |= x->detach;
        if (x->tag && !valid_tag(x->tag))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: 'tag' must be 1 to %d characters of A-Z a-z 0-9 . _ -", TAG_MAX);
        if (x->tag && proc_by_tag(a, x->tag, true))
                return tool_fail(e, TOOL_CONFLICT, "exec: a process tagged '%s' is running already", x->tag);
        if (x->stdin_data)
                x->stdin_len = json_string_length(json_object_get(params, "stdin"));
        /* the policy's cap is a default, bounded like the parameter */
        x->max_output = a->c->policy->limits.output ? a->c->policy->limits.output : DEFAULT_MAX_OUTPUT;
        if (x->max_output > MAX_MAX_OUTPUT)
                x->max_output = MAX_MAX_OUTPUT;
        if (tool_param_uint(&rq->in, "exec", "max_output", MAX_MAX_OUTPUT, &x->max_output, e) < 0)
                return -1;
        json_t *t = json_object_get(params, "timeout");
        if (t && !json_is_null(t)) {
                if (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 1e7)
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: 'timeout' must be a number of seconds (0 for none)");
                x->timeout_s = json_number_value(t);
        }
        json_t *env = json_object_get(params, "env");
        if (env && !json_is_null(env) && !json_is_object(env))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "exec: 'env' must be an object of strings");
        if (build_env(a, json_is_object(env) ? env : NULL, &x->env, e) < 0)
                return -1;
        /* the cwd must be a directory: posix_spawn would report a missing one as ENOENT, which
         * reads as "command not found" */
        if (tool_path_normalize(&a->tctx, cwd, &x->cwd, e) < 0)
                return -1;
        int dfd;
        if (tool_open(&a->tctx, x->cwd, O_PATH | O_DIRECTORY, 0, &dfd, e) < 0)
                return -1;
        close(dfd);
        return 0;
}

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static char *join_argv(char *const *argv)
{
        strbuf sb;
        sb_init(&sb, 4096);
        for (size_t i = 0; argv[i]; i++)
                if (sb_appendf(&sb, "%s%s", i ? " " : "", argv[i]) < 0)
                        break;
        return sb.buf ? sb.buf : strdup("");
}

static int start_command(agent *a, const request *rq, exec_params *x, proc **ret, tool_error *e)
{
        if (a->n_procs >= MAX_PROCS) {
                /* make room: forget the oldest finished background process nobody waited for */
                proc *old = NULL;
                for (proc *p = a->procs; p; p = p->next)
                        if (p->result)
                                old = p;
                if (!old)
                        return tool_fail(e, TOOL_CONFLICT, "exec: %d commands are running already", MAX_PROCS);
                proc_free(a, old);
        }
        int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
        bool want_stdin = x->stdin_data || x->background;
        if ((want_stdin && pipe2(in, O_CLOEXEC) < 0) || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
                int saved = errno;
                nsbox_close_pair(in);
                nsbox_close_pair(out);
                nsbox_close_pair(err);
                return tool_fail_errno(e, saved, "exec: pipe");
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        if (want_stdin)
                posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        else
                posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err[1], 2);
        posix_spawn_file_actions_addchdir_np(&fa, x->cwd);
        posix_spawnattr_t attr;
        spawn_attr_init(&attr);
        /* posix_spawnp searches the PATH of environ: the command's own environment */
        char **saved_environ = environ;
        environ = x->env;
        pid_t pid;
        int r = posix_spawnp(&pid, x->argv[0], &fa, &attr, x->argv, x->env);
        environ = saved_environ;
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        if (in[0] >= 0)
                close(in[0]);
        close(out[1]);
        close(err[1]);
        proc *p = calloc(1, sizeof(*p));
        if (!p) {
                if (in[1] >= 0)
                        close(in[1]);
                close(out[0]);
                close(err[0]);
                if (r == 0)
                        kill(-pid, SIGKILL);
                return tool_fail(e, TOOL_INTERNAL, "out of memory");
        }
        uint64_t now = now_ns();
        p->call_id = x->background ? -1 : rq->id;
        p->wait_id = -1;
        p->max_output = x->max_output;
        p->stream = x->stream && !x->background;
        p->background = x->background;
        p->start_ns = now;
        p->started_at = time(NULL);
        p->detached = x->detach;
        if (x->tag)
                snprintf(p->tag, sizeof(p->tag), "%s", x->tag);
        p->deadline_ns = x->timeout_s > 0 ? now + (uint64_t)(x->timeout_s * 1e9) : 0;
        p->command = join_argv(x->argv);
        sb_init(&p->out, 0);
        sb_init(&p->err, 0);
        p->fd[0] = in[1];
        p->fd[1] = out[0];
        p->fd[2] = err[0];
        p->next = a->procs;
        a->procs = p;
        a->n_procs++;
        if (r != 0) {
                /* as a shell reports it: status 127 or 126 and a message on stderr */
                char msg[600];
                exec_failure_message(msg, sizeof(msg), x->argv[0], r);
                sb_appendf(&p->err, "nsbox: %s\n", msg);
                p->pid = 0;
                p->exited = true;
                p->exit_ns = now;
                p->wstatus = exec_failure_status(r) << 8;
                for (int i = 0; i < 3; i++)
                        proc_close_fd(a, p, i);
                *ret = p;
                return 0;
        }
        p->pid = pid;
        p->serial = ++a->next_serial;
        for (int i = 0; i < 3; i++) {
                if (p->fd[i] < 0)
                        continue;
                set_nonblock(p->fd[i]);
                if (nsbox_epoll_add(a->epfd, p->fd[i], WATCH(p->serial, i), &p->events[i], i == 0 ? 0 : EPOLLIN) < 0) {
                        kill(-pid, SIGKILL);
                        return tool_fail_errno(e, errno, "exec: epoll");
                }
        }
        if (x->stdin_data) {
                if (nsbox_queue_append(&p->stdin_q, x->stdin_data, x->stdin_len) < 0)
                        agent_exit(a, 125);
                p->close_stdin_when_done = !x->background;
                proc_write_stdin(a, p);
        }
        *ret = p;
        return 0;
}

static void handle_exec(agent *a, const request *rq)
{
        tool_error e = { 0 };
        exec_params x = { 0 };
        proc *p = NULL;
        if (parse_exec(a, rq, &x, &e) < 0 || start_command(a, rq, &x, &p, &e) < 0) {
                exec_params_release(&x);
                send_tool_error(a, rq->id, &e);
                return;
        }
        exec_params_release(&x);
        if (p->background && p->pid) {
                json_t *res = json_pack("{sI sb sb}", "pid", (json_int_t)p->pid, "background", 1, "detached", p->detached);
                if (res && p->tag[0])
                        json_object_set_new(res, "tag", json_string(p->tag));
                send_result(a, rq->id, res, NULL, 0);
                return;
        }
        if (!p->pid) { /* could not start: answered now, like a foreground command, with 127/126 */
                p->background = false;
                p->call_id = rq->id;
                if (p->stream) /* the message goes where the command's stderr would have gone */
                        send_frame(a, json_pack("{sI ss sI}", "id", rq->id, "event", "stderr", "pid", (json_int_t)0), p->err.buf,
                                   p->err.len);
        }
        if (p->stream)
                send_frame(a, json_pack("{sI ss sI}", "id", rq->id, "event", "started", "pid", (json_int_t)p->pid), NULL, 0);
        proc_maybe_finish(a, p, now_ns());
}

/* The process a request names by 'pid' or by 'tag'. */
static int find_proc_param(agent *a, const request *rq, const char *tool, proc **ret, tool_error *e)
{
        uint64_t pid = 0;
        const char *tag = NULL;
        bool has_pid = json_object_get(rq->in.params, "pid") != NULL;
        if (tool_param_string(&rq->in, tool, "tag", false, &tag, e) < 0)
                return -1;
        if (has_pid == (tag != NULL))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: give one of 'pid' and 'tag'", tool);
        if (has_pid && tool_param_uint(&rq->in, tool, "pid", INT32_MAX, &pid, e) < 0)
                return -1;
        if (tag && !valid_tag(tag))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'tag' must be 1 to %d characters of A-Z a-z 0-9 . _ -", tool, TAG_MAX);
        proc *p = tag ? proc_by_tag(a, tag, false) : pid ? proc_by_pid(a, (json_int_t)pid) : NULL;
        if (!p && tag)
                return tool_fail(e, TOOL_NOT_FOUND, "%s: no process tagged '%s'", tool, tag);
        if (!p)
                return tool_fail(e, TOOL_NOT_FOUND, "%s: no process %llu started by exec", tool, (unsigned long long)pid);
        *ret = p;
        return 0;
}

/* process_connect: the tail of p's output as events, then (follow) its output as it comes,
 * then its result; at once when it has ended. */
static void handle_connect(agent *a, const request *rq, proc *p)
{
        tool_error e = { 0 };
        bool follow = true;
        if (tool_param_bool(&rq->in, "process_connect", "follow", &follow, &e) < 0) {
                send_tool_error(a, rq->id, &e);
                return;
        }
        if (!p->background) {
                json_t *jid = json_integer(rq->id);
                send_error(a, jid, "invalid_argument", "process_connect: process %d is not a background process", (int)p->pid);
                json_decref(jid);
                return;
        }
        attach *t = calloc(1, sizeof(*t));
        if (!t)
                agent_exit(a, 125);
        t->call_id = rq->id;
        t->truncated = p->tail_lost;
        for (int i = 1; i <= 2; i++)
                if (p->tail_len[i])
                        send_output(a, rq->id, p->pid, i, p->tail[i], p->tail_len[i]);
        if (!follow && !p->result) {
                send_result(a, rq->id, json_pack("{sI sb sb}", "pid", (json_int_t)p->pid, "running", 1, "truncated", t->truncated), NULL, 0);
                free(t);
                return;
        }
        t->next = p->attached;
        p->attached = t;
        if (p->result)
                answer_attached(a, p, p->result);
}

static void handle_process(agent *a, const request *rq)
{
        tool_error e = { 0 };
        proc *p = NULL;
        const char *t = rq->tool;
        if (strcmp(t, "process_list") == 0) {
                json_t *list = json_array();
                for (proc *q = a->procs; q; q = q->next) {
                        char started[32];
                        struct tm tm;
                        strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&q->started_at, &tm));
                        json_t *o = json_pack("{sI ss sb sb so ss sb sb}", "pid", (json_int_t)q->pid, "command", q->command ? q->command : "",
                                              "running", !q->exited, "background", q->background, "tag",
                                              q->tag[0] ? json_string(q->tag) : json_null(), "started_at", started, "pty", 0,
                                              "detached", q->detached);
                        if (o && q->result)
                                json_object_set(o, "exit_code", json_object_get(q->result, "exit_code"));
                        json_array_append_new(list, o);
                }
                send_result(a, rq->id, json_pack("{so}", "processes", list), NULL, 0);
                return;
        }
        if (find_proc_param(a, rq, t, &p, &e) < 0) {
                send_tool_error(a, rq->id, &e);
                return;
        }
        if (strcmp(t, "process_connect") == 0) {
                handle_connect(a, rq, p);
                return;
        }
        if (strcmp(t, "process_wait") == 0) {
                json_t *to = json_object_get(rq->in.params, "timeout");
                if (to && !json_is_null(to) && (!json_is_number(to) || json_number_value(to) < 0 || json_number_value(to) > 1e7)) {
                        tool_fail(&e, TOOL_INVALID_ARGUMENT, "process_wait: 'timeout' must be a number of seconds");
                } else if (!p->background) {
                        tool_fail(&e, TOOL_INVALID_ARGUMENT, "process_wait: process %d is not a background process", (int)p->pid);
                } else if (p->wait_id >= 0) {
                        tool_fail(&e, TOOL_CONFLICT, "process_wait: process %d is already being waited for", (int)p->pid);
                } else if (p->result) {
                        send_result(a, rq->id, json_incref(p->result), NULL, 0);
                        proc_free(a, p);
                        return;
                } else {
                        p->wait_id = rq->id;
                        double s = to && json_is_number(to) ? json_number_value(to) : 0;
                        p->wait_deadline = s > 0 ? now_ns() + (uint64_t)(s * 1e9) : 0;
                        return;
                }
        } else if (strcmp(t, "process_kill") == 0) {
                int sig;
                if (parse_signal(json_object_get(rq->in.params, "signal"), &sig) < 0) {
                        tool_fail(&e, TOOL_INVALID_ARGUMENT, "process_kill: 'signal' must be a signal name (\"TERM\") or number");
                } else {
                        bool alive = !p->exited && p->pid > 0;
                        if (alive)
                                kill(-p->pid, sig);
                        send_result(a, rq->id, json_pack("{sI sb}", "pid", (json_int_t)p->pid, "signaled", alive), NULL, 0);
                        return;
                }
        } else if (strcmp(t, "process_write_stdin") == 0) {
                const char *data = NULL;
                if (tool_param_string(&rq->in, t, "data", true, &data, &e) == 0) {
                        size_t n = json_string_length(json_object_get(rq->in.params, "data"));
                        if (p->fd[0] < 0 || p->close_stdin_when_done) {
                                tool_fail(&e, TOOL_CONFLICT, "process_write_stdin: the standard input of process %d is closed", (int)p->pid);
                        } else if (p->stdin_q.len + n > MAX_STDIN_PENDING) {
                                tool_fail(&e, TOOL_TOO_LARGE, "process_write_stdin: more than %u bytes waiting for process %d to read them",
                                          MAX_STDIN_PENDING, (int)p->pid);
                        } else {
                                if (nsbox_queue_append(&p->stdin_q, data, n) < 0)
                                        agent_exit(a, 125);
                                proc_write_stdin(a, p);
                                send_result(a, rq->id, json_pack("{sI sI}", "pid", (json_int_t)p->pid, "bytes", (json_int_t)n), NULL, 0);
                                return;
                        }
                }
        } else { /* process_close_stdin */
                p->close_stdin_when_done = true;
                proc_write_stdin(a, p);
                if (p->stdin_q.len == 0)
                        proc_close_fd(a, p, 0);
                send_result(a, rq->id, json_pack("{sI}", "pid", (json_int_t)p->pid), NULL, 0);
                return;
        }
        send_tool_error(a, rq->id, &e);
}

/* ---- watch: a directory's changes as events until cancelled (watch.h) --------------------- */

#define MAX_WATCHES 64  /* watch calls at once, per sandbox */
#define WATCH_INOTIFY 3 /* epoll key: WATCH(serial, 3), a watch call's inotify fd (procs use 0-2) */

typedef struct watch_call {
        struct watch_call *next;
        json_int_t call_id;
        uint64_t serial;
        nsbox_watch *w;
        uint32_t events;
        bool paused;
        json_int_t n_events;
} watch_call;

typedef struct watch_send {
        agent *a;
        watch_call *wc;
} watch_send;

static void watch_send_event(void *ud, const char *op, const char *path, const char *type)
{
        watch_send *ws = ud;
        json_t *m = json_pack("{sI ss ss so}", "id", ws->wc->call_id, "event", "fs", "op", op, "path",
                              nsbox_json_text(path, strlen(path), NULL));
        if (m && type)
                json_object_set_new(m, "type", json_string(type));
        send_frame(ws->a, m, NULL, 0);
        ws->wc->n_events++;
}

/* Answer the call and forget it: cancelled, or ended ("removed"/"renamed": the directory went). */
static void watch_end(agent *a, watch_call *wc, bool cancelled, const char *ended)
{
        for (watch_call **pp = &a->watches; *pp; pp = &(*pp)->next)
                if (*pp == wc) {
                        *pp = wc->next;
                        break;
                }
        a->n_watches--;
        json_t *r = json_pack("{sI sb}", "events", wc->n_events, "cancelled", cancelled);
        if (r && ended)
                json_object_set_new(r, "ended", json_string(ended));
        if (wc->call_id >= 0)
                send_result(a, wc->call_id, r, NULL, 0);
        else
                json_decref(r);
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, nsbox_watch_fd(wc->w), NULL);
        nsbox_watch_free(wc->w);
        free(wc);
}

static void handle_watch(agent *a, const request *rq)
{
        tool_error e = { 0 };
        const char *path = NULL;
        bool recursive = false, stream = false;
        if (tool_param_string(&rq->in, "watch", "path", true, &path, &e) < 0 || tool_param_bool(&rq->in, "watch", "recursive", &recursive, &e) < 0 ||
            tool_param_bool(&rq->in, "watch", "stream", &stream, &e) < 0) {
                send_tool_error(a, rq->id, &e);
                return;
        }
        if (!stream) {
                tool_fail(&e, TOOL_INVALID_ARGUMENT, "watch needs stream: true (its changes come as events until cancelled)");
        } else if (a->n_watches >= MAX_WATCHES) {
                tool_fail(&e, TOOL_CONFLICT, "watch: %d watches are active in this sandbox (the limit); cancel one first", MAX_WATCHES);
        } else {
                watch_call *wc = calloc(1, sizeof(*wc));
                if (!wc)
                        agent_exit(a, 125);
                if (nsbox_watch_open(&a->tctx, path, recursive, &wc->w, &e) == 0) {
                        wc->call_id = rq->id;
                        wc->serial = ++a->next_serial;
                        if (nsbox_epoll_add(a->epfd, nsbox_watch_fd(wc->w), WATCH(wc->serial, WATCH_INOTIFY), &wc->events, EPOLLIN) == 0) {
                                wc->next = a->watches;
                                a->watches = wc;
                                a->n_watches++;
                                /* watching from now on: a client may act on that */
                                send_frame(a, json_pack("{sI ss}", "id", rq->id, "event", "started"), NULL, 0);
                                return; /* answered when cancelled or ended */
                        }
                        tool_fail_errno(&e, errno, "watch: epoll");
                        nsbox_watch_free(wc->w);
                }
                free(wc);
        }
        send_tool_error(a, rq->id, &e);
}

static void watch_ready(agent *a, uint64_t serial)
{
        watch_call *wc = a->watches;
        while (wc && wc->serial != serial)
                wc = wc->next;
        if (!wc || wc->paused || a->outq.len >= OUTQ_HIGH)
                return; /* ended by an earlier event of this batch, or held */
        watch_send ws = { a, wc };
        int r = nsbox_watch_read(wc->w, watch_send_event, &ws);
        if (r == 1) {
                watch_end(a, wc, false, "removed");
        } else if (r < 0) {
                json_t *jid = json_integer(wc->call_id);
                send_error(a, jid, "internal", "watch: read inotify events: %s", strerror(-r));
                json_decref(jid);
                wc->call_id = -1; /* answered: watch_end's result goes to nothing */
                watch_end(a, wc, false, NULL);
        }
}

static bool watch_cancel(agent *a, json_int_t id)
{
        for (watch_call *wc = a->watches; wc; wc = wc->next)
                if (wc->call_id == id) {
                        watch_end(a, wc, true, NULL);
                        return true;
                }
        return false;
}

/* Paused (a slow reader) or the outgoing queue high: the inotify fd is not read; the kernel's
 * queue holds what comes, and says overflow past its own bound. */
static void watch_pause(agent *a, json_int_t id, bool pause)
{
        for (watch_call *wc = a->watches; wc; wc = wc->next)
                if (wc->call_id == id)
                        wc->paused = pause;
}

static void watch_update_interest(agent *a, bool high)
{
        for (watch_call *wc = a->watches; wc; wc = wc->next)
                nsbox_epoll_set(a->epfd, nsbox_watch_fd(wc->w), WATCH(wc->serial, WATCH_INOTIFY), &wc->events,
                                high || wc->paused ? 0 : EPOLLIN);
}

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
        if (watch_cancel(a, (json_int_t)id))
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
        send_result(a, rq->id, json_pack("{sb}", "paused", pause), NULL, 0);
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
        rq.tool = !strcmp(name, "cancel") || !strcmp(name, "pause") ? name : tool_canonical_name(name);
        if (!rq.tool) {
                send_error(a, id, "not_found", "unknown tool '%.100s'", name);
        } else if (strcmp(rq.tool, "exec") == 0) {
                handle_exec(a, &rq);
        } else if (strncmp(rq.tool, "process_", 8) == 0) {
                handle_process(a, &rq);
        } else if (strcmp(rq.tool, "watch") == 0) {
                handle_watch(a, &rq);
        } else if (strcmp(rq.tool, "cancel") == 0) {
                handle_cancel(a, &rq);
        } else if (strcmp(rq.tool, "pause") == 0) {
                handle_pause(a, &rq);
        } else {
                handle_tool(a, &rq);
        }
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
                        nsbox_epoll_set(a->epfd, p->fd[i], WATCH(p->serial, i), &p->events[i], (high || p->paused) && p->stream ? 0 : EPOLLIN);
                nsbox_epoll_set(a->epfd, p->fd[0], WATCH(p->serial, 0), &p->events[0], p->stdin_q.len ? EPOLLOUT : 0);
        }
        watch_update_interest(a, high);
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
                struct epoll_event ev[64];
                int n = epoll_wait(a.epfd, ev, 64, timeout);
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
