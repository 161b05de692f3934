/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's commands (serve.h): how one is spawned (both modes), and in serve mode
 * exec and the process_* tools: each command's pipes, output (captured, streamed, or kept as a
 * background command's tail for process_connect), stdin, deadline and result. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "serve.h"
#include "proto.h"
#include "sync.h"
#include "util.h"

extern char **environ;

#define DEFAULT_MAX_OUTPUT (1u << 20)  /* bytes kept per stream of a command when not streamed */
#define MAX_MAX_OUTPUT (16u << 20)
#define MAX_PROCS 256                  /* commands alive or finished-but-not-waited-for */
#define MAX_STDIN_PENDING (16u << 20)
#define CHUNK 65536
#define TAIL_MAX (64u << 10)           /* a background command's recent output kept per stream */

/* ---- spawning, for both modes ------------------------------------------------------------- */

void usage_from(const struct rusage *ru, nsbox_sync_usage *u)
{
        u->user_us = (uint64_t)ru->ru_utime.tv_sec * 1000000 + (uint64_t)ru->ru_utime.tv_usec;
        u->sys_us = (uint64_t)ru->ru_stime.tv_sec * 1000000 + (uint64_t)ru->ru_stime.tv_usec;
        u->maxrss_kb = (uint64_t)ru->ru_maxrss;
}

/* Spawn attributes every command gets: a session (and process group) of its own, so that no
 * terminal of the caller's is its controlling tty (bwrap CVE-2017-5226) and a timeout or a kill
 * reaches the whole group; default dispositions and an empty mask, whatever the agent has. */
void spawn_attr_init(posix_spawnattr_t *attr)
{
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_init(attr);
        posix_spawnattr_setsigmask(attr, &none);
        posix_spawnattr_setsigdefault(attr, &all);
        posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

int exec_failure_status(int e) { return e == ENOENT ? 127 : 126; }

void exec_failure_message(char *buf, size_t size, const char *cmd, int e)
{
        if (e == ENOENT && !strchr(cmd, '/'))
                snprintf(buf, size, "'%.500s': command not found", cmd);
        else
                snprintf(buf, size, "cannot execute '%.500s': %s", cmd, strerror(e));
}

/* ---- serve mode's commands: pipes, output, results ---------------------------------------- */

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
                if (!strcmp(p->tag, tag) && (!p->exited || !running_only) && !(running_only && p->doomed)) {
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

/* A terminal's output is one stream, "pty" */
static const char *stream_name(const proc *p, int i)
{
        return p->pty ? "pty" : i == 1 ? "stdout" : "stderr";
}

static void send_output(agent *a, json_int_t id, const proc *p, int i, const void *buf, size_t n)
{
        send_frame(a, json_pack("{sI ss sI}", "id", id, "event", stream_name(p, i), "pid", (json_int_t)p->pid), buf, n);
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
 * end), unless the reader holds the command: then the pipes were read only because it can take
 * the chunk (proc_held). */
static void proc_fan_out(agent *a, proc *p, int i, const char *buf, size_t n)
{
        tail_append(a, p, i, buf, n);
        for (attach *t = p->attached; t; t = t->next) {
                if (!t->hold && (t->paused || a->outq.len >= OUTQ_HIGH))
                        t->truncated = true;
                else
                        send_output(a, t->call_id, p, i, buf, n);
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
void proc_read(agent *a, proc *p, int i)
{
        char buf[CHUNK];
        ssize_t n = read(p->fd[i], buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) { /* a pty's master reads EIO once the last slave fd is closed */
                proc_close_fd(a, p, i);
                return;
        }
        if (p->stream && p->call_id >= 0) {
                send_output(a, p->call_id, p, i, buf, (size_t)n);
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

void proc_write_stdin(agent *a, proc *p)
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

/* A command whose output cannot be sent now: its pipes wait, however long.  A streamed
 * command, or a background one with a reader that holds it (process_connect's hold). */
bool proc_held(const agent *a, const proc *p)
{
        if (p->fd[1] < 0 && p->fd[2] < 0)
                return false;
        bool high = a->outq.len >= OUTQ_HIGH;
        if (p->stream)
                return p->paused || high;
        for (const attach *t = p->attached; t; t = t->next)
                if (t->hold && (t->paused || high))
                        return true;
        return false;
}

/* A command is done when it exited and its pipes reached EOF, or EXIT_GRACE after it exited
 * (a daemon it left behind may hold them open forever). */
void proc_maybe_finish(agent *a, proc *p, uint64_t now)
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

void reap(agent *a)
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

/* ---- exec and process_* requests ---------------------------------------------------------- */

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

bool is_clean_string(json_t *v) { return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v); }

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

static bool env_missing(char **env, const char *name)
{
        size_t n = strlen(name);
        for (; env && *env; env++)
                if (!strncmp(*env, name, n) && (*env)[n] == '=')
                        return false;
        return true;
}

typedef struct exec_params {
        char **argv, **env;
        char *cwd;
        const char *stdin_data;
        size_t stdin_len;
        double timeout_s;
        const char *tag;
        bool background, stream, detach, stdin_open, pty;
        unsigned short cols, rows;
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
            tool_param_bool(&rq->in, "exec", "stdin_open", &x->stdin_open, e) < 0 ||
            tool_param_bool(&rq->in, "exec", "stream", &x->stream, e) < 0 ||
            tool_param_bool(&rq->in, "exec", "detach", &x->detach, e) < 0 || tool_param_string(&rq->in, "exec", "tag", false, &x->tag, e) < 0)
                return -1;
        x->background |= x->detach;
        json_t *pty = json_object_get(params, "pty");
        if (pty && !json_is_null(pty) && !json_is_false(pty)) {
                if (pty_parse_size(pty, "exec", &x->cols, &x->rows, e) < 0)
                        return -1;
                x->pty = true;
        }
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
        if (x->pty && env_missing(x->env, "TERM")) {
                char *d = strdup("TERM=xterm-256color");
                if (!d || strv_push(&x->env, d) < 0)
                        return tool_fail(e, TOOL_INTERNAL, "out of memory");
        }
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

void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static char *join_argv(char *const *argv)
{
        strbuf sb;
        sb_init(&sb, 4096);
        for (size_t i = 0; argv[i]; i++)
                if (sb_appendf(&sb, "%s%s", i ? " " : "", argv[i]) < 0)
                        break;
        return sb.buf ? sb.buf : strdup("");
}

/* The command's fds 0-2 as file actions: pipes (ours: in[1], out[0], err[0]), or a pty (ours:
 * in[1] a dup of its master, out[0] the master; it has no stderr of its own). */
static int command_stdio(const exec_params *x, posix_spawn_file_actions_t *fa, int in[2], int out[2], int err[2], tool_error *e)
{
        if (x->pty) {
                char slave[64];
                int m;
                if (pty_open(x->cols, x->rows, &m, slave, sizeof(slave), e) < 0)
                        return -1;
                int d = fcntl(m, F_DUPFD_CLOEXEC, 3);
                if (d < 0) {
                        close(m);
                        return tool_fail_errno(e, errno, "exec: dup");
                }
                in[1] = d;
                out[0] = m;
                posix_spawn_file_actions_init(fa);
                /* after setsid, without O_NOCTTY: the new session's controlling terminal */
                posix_spawn_file_actions_addopen(fa, 0, slave, O_RDWR, 0);
                posix_spawn_file_actions_adddup2(fa, 0, 1);
                posix_spawn_file_actions_adddup2(fa, 0, 2);
                return 0;
        }
        bool want_stdin = x->stdin_data || x->background || x->stdin_open;
        if ((want_stdin && pipe2(in, O_CLOEXEC) < 0) || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
                int saved = errno;
                nsbox_close_pair(in);
                nsbox_close_pair(out);
                nsbox_close_pair(err);
                return tool_fail_errno(e, saved, "exec: pipe");
        }
        posix_spawn_file_actions_init(fa);
        if (want_stdin)
                posix_spawn_file_actions_adddup2(fa, in[0], 0);
        else
                posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(fa, out[1], 1);
        posix_spawn_file_actions_adddup2(fa, err[1], 2);
        return 0;
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
        posix_spawn_file_actions_t fa;
        if (command_stdio(x, &fa, in, out, err, e) < 0)
                return -1;
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
        if (out[1] >= 0)
                close(out[1]);
        if (err[1] >= 0)
                close(err[1]);
        proc *p = calloc(1, sizeof(*p));
        if (!p) {
                if (in[1] >= 0)
                        close(in[1]);
                close(out[0]);
                if (err[0] >= 0)
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
        p->pty = x->pty;
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
                p->close_stdin_when_done = !x->background && !x->stdin_open && !x->pty;
                proc_write_stdin(a, p);
        }
        *ret = p;
        return 0;
}

proc *proc_tagged(agent *a, const char *tag) { return proc_by_tag(a, tag, false); }

int proc_start_detached(agent *a, json_t *params, pid_t *ret_pid, tool_error *e)
{
        request rq = { .id = -1, .tool = "exec", .in = { .params = params } };
        exec_params x = { 0 };
        proc *p = NULL;
        int r = parse_exec(a, &rq, &x, e) < 0 || start_command(a, &rq, &x, &p, e) < 0 ? -1 : 0;
        exec_params_release(&x);
        if (r == 0)
                *ret_pid = p->pid;
        return r;
}

void handle_exec(agent *a, const request *rq)
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

/* process_write_stdin: data (text) or data_b64 (bytes) queued for p's stdin; too_large while
 * more than MAX_STDIN_PENDING bytes wait, so that a caller feeding a slow reader backs off. */
static void write_stdin(agent *a, const request *rq, proc *p)
{
        const char *t = "process_write_stdin";
        tool_error e = { 0 };
        const char *data = NULL, *b64 = NULL;
        strbuf dec;
        sb_init(&dec, MAX_STDIN_PENDING);
        if (tool_param_string(&rq->in, t, "data", false, &data, &e) < 0 || tool_param_string(&rq->in, t, "data_b64", false, &b64, &e) < 0)
                goto fail;
        if (!data == !b64) {
                tool_fail(&e, TOOL_INVALID_ARGUMENT, "%s: give exactly one of 'data' (text) and 'data_b64' (base64)", t);
                goto fail;
        }
        size_t n;
        if (b64) {
                int r = b64_decode(b64, json_string_length(json_object_get(rq->in.params, "data_b64")), &dec);
                if (r == -E2BIG) {
                        tool_fail(&e, TOOL_TOO_LARGE, "%s: more than %u bytes at once", t, MAX_STDIN_PENDING);
                        goto fail;
                }
                if (r < 0) {
                        tool_fail(&e, TOOL_INVALID_ARGUMENT, "%s: 'data_b64' is not valid base64", t);
                        goto fail;
                }
                data = dec.buf ? dec.buf : "";
                n = dec.len;
        } else
                n = json_string_length(json_object_get(rq->in.params, "data"));
        if (p->fd[0] < 0 || p->close_stdin_when_done) {
                tool_fail(&e, TOOL_CONFLICT, "%s: the standard input of process %d is closed", t, (int)p->pid);
        } else if (p->stdin_q.len + n > MAX_STDIN_PENDING) {
                tool_fail(&e, TOOL_TOO_LARGE, "%s: more than %u bytes waiting for process %d to read them", t, MAX_STDIN_PENDING,
                          (int)p->pid);
        } else {
                if (nsbox_queue_append(&p->stdin_q, data, n) < 0)
                        agent_exit(a, 125);
                sb_release(&dec);
                proc_write_stdin(a, p);
                send_result(a, rq->id, json_pack("{sI sI}", "pid", (json_int_t)p->pid, "bytes", (json_int_t)n), NULL, 0);
                return;
        }
fail:
        sb_release(&dec);
        send_tool_error(a, rq->id, &e);
}

/* process_connect: the tail of p's output as events, then (follow) its output as it comes,
 * then its result; at once when it has ended. */
static void handle_connect(agent *a, const request *rq, proc *p)
{
        tool_error e = { 0 };
        bool follow = true, hold = false;
        if (tool_param_bool(&rq->in, "process_connect", "follow", &follow, &e) < 0 ||
            tool_param_bool(&rq->in, "process_connect", "hold", &hold, &e) < 0) {
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
        t->hold = hold;
        t->truncated = p->tail_lost;
        for (int i = 1; i <= 2; i++)
                if (p->tail_len[i])
                        send_output(a, rq->id, p, i, p->tail[i], p->tail_len[i]);
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

void handle_process(agent *a, const request *rq)
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
                                              "running", !q->exited && !q->doomed, "background", q->background, "tag",
                                              q->tag[0] ? json_string(q->tag) : json_null(), "started_at", started, "pty", q->pty,
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
        if (strcmp(t, "process_resize") == 0) {
                handle_resize(a, rq, p);
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
                write_stdin(a, rq, p);
                return;
        } else if (p->pty) { /* process_close_stdin: a terminal's end of file is ^D (VEOF) */
                if (p->fd[0] < 0) {
                        tool_fail(&e, TOOL_CONFLICT, "process_close_stdin: the pty of process %d is closed", (int)p->pid);
                } else {
                        if (nsbox_queue_append(&p->stdin_q, "\x04", 1) < 0)
                                agent_exit(a, 125);
                        proc_write_stdin(a, p);
                        send_result(a, rq->id, json_pack("{sI sb}", "pid", (json_int_t)p->pid, "eot", 1), NULL, 0);
                        return;
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
