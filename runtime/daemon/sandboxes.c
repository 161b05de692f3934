/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: a sandbox in the daemon, made, launched, found, described (sandbox_json), removed
 * and freed; its state file; processes reaped later. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>

#include "../dlog.h"
#include "../../tools/tool.h"

sandbox *sandbox_by_serial(daemon_state *d, uint64_t serial)
{
        for (sandbox *s = d->sandboxes; s; s = s->next)
                if (s->serial == serial)
                        return s;
        return NULL;
}

static daemon_state *log_daemon;

/* s cut to at most max bytes, at a character's start */
static size_t utf8_cut(const char *s, size_t max) { return tool_utf8_cut(s, strnlen(s, max + 1), max); }

void sandbox_log_add(sandbox *s, int prio, const char *event, const char *msg)
{
        if (!s->log && !(s->log = json_array()))
                return;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        json_t *m = json_stringn(msg, utf8_cut(msg, SANDBOX_LOG_MSG_MAX));
        json_t *e = json_pack("{sI si ss so}", "ms", (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, "prio", prio & 7, "event", event,
                              "msg", m ? m : json_string("(a message that is not UTF-8)"));
        if (!e || json_array_append_new(s->log, e) < 0)
                return;
        if (json_array_size(s->log) > SANDBOX_LOG_MAX)
                json_array_remove(s->log, 0);
}

/* dlog's lines about a sandbox of this nsboxd */
static void log_sink(int prio, const char *event, const char *sandbox_id, const char *msg)
{
        for (sandbox *s = log_daemon ? log_daemon->sandboxes : NULL; s; s = s->next)
                if (!strcmp(s->sup.id, sandbox_id)) {
                        sandbox_log_add(s, prio, event, msg);
                        return;
                }
}

void sandbox_log_init(daemon_state *d)
{
        log_daemon = d;
        dlog_set_sink(log_sink);
}

/* An exec's command, as the sandbox's log keeps it (not nsboxd's: one a call would flood it):
 * its argv joined by spaces, or its shell line, cut. */
void sandbox_log_exec(sandbox *s, json_t *params)
{
        char line[SANDBOX_LOG_CMD_MAX + 8] = "";
        size_t n = 0, i;
        json_t *shell = json_object_get(params, "shell"), *x;
        if (!shell)
                shell = json_object_get(params, "command");
        if (json_is_string(shell))
                n = (size_t)snprintf(line, sizeof(line), "%s", json_string_value(shell));
        else
                json_array_foreach(json_object_get(params, "cmd"), i, x) {
                        if (n >= SANDBOX_LOG_CMD_MAX)
                                break;
                        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", i ? " " : "", json_is_string(x) ? json_string_value(x) : "?");
                }
        if (n > SANDBOX_LOG_CMD_MAX)
                memcpy(line + utf8_cut(line, SANDBOX_LOG_CMD_MAX - 3), "...", 4);
        char msg[SANDBOX_LOG_CMD_MAX + 32];
        snprintf(msg, sizeof(msg), "exec: %s", line);
        sandbox_log_add(s, LOG_INFO, "process.started", msg);
}

/* slirp4netns processes told to exit, reaped as they finish: their exit takes the kernel some
 * 20 ms (the tap device goes with the sandbox's network namespace), too long to wait for in the
 * event loop. */
static pid_t *exiting;
static size_t n_exiting;

void reap_later(pid_t pid)
{
        if (pid <= 0)
                return;
        pid_t *v = realloc(exiting, (n_exiting + 1) * sizeof(*v));
        if (!v) { /* no memory to remember it: wait for it now */
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return;
        }
        exiting = v;
        exiting[n_exiting++] = pid;
}

void reap_exited(bool block)
{
        for (size_t i = 0; i < n_exiting;) {
                pid_t r;
                while ((r = waitpid(exiting[i], NULL, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
                        ;
                if (r == 0) {
                        i++;
                        continue;
                }
                exiting[i] = exiting[--n_exiting];
        }
        if (n_exiting == 0) {
                free(exiting);
                exiting = NULL;
        }
}

/* Processes told to exit and not reaped yet: the loop looks again soon. */
bool reaping(void) { return n_exiting != 0; }

/* The state file of a live sandbox (restart safety: what a next nsboxd must clean up). */
void state_write(daemon_state *d, const sandbox *s)
{
        if (d->state_dirfd < 0 || s->sup.sb.pid <= 0)
                return;
        json_t *o = json_pack("{ss si sI si ss}", "id", s->sup.id, "pid", (int)s->sup.sb.pid, "start", (json_int_t)nsbox_pid_start_time(s->sup.sb.pid),
                              "nsboxd", (int)getpid(), "cgroup", s->sup.sb.cg.dirfd >= 0 ? s->sup.sb.cg.path : "");
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        char tmp[NSBOX_ID_SIZE + 8], name[NSBOX_ID_SIZE + 8];
        snprintf(tmp, sizeof(tmp), ".%s.tmp", s->sup.id);
        snprintf(name, sizeof(name), "%s.json", s->sup.id);
        if (!text || write_file_at(d->state_dirfd, tmp, text, 0600) < 0 || renameat(d->state_dirfd, tmp, d->state_dirfd, name) < 0) {
                dlog(LOG_ERR, "state.write_failed", s->sup.id, "sandbox %s: cannot write its state file: %s", s->sup.id, strerror(errno ? errno : ENOMEM));
                unlinkat(d->state_dirfd, tmp, 0);
        }
        free(text);
}

static void state_remove(daemon_state *d, const sandbox *s)
{
        char name[NSBOX_ID_SIZE + 8];
        snprintf(name, sizeof(name), "%s.json", s->sup.id);
        if (d->state_dirfd >= 0)
                unlinkat(d->state_dirfd, name, 0);
}

void sandbox_free(sandbox *s)
{
        reap_later(nsbox_net_detach(&s->sup.sb.net));
        nsbox_sup_stop(&s->sup, "internal", "was destroyed"); /* its calls were answered already, with why */
        json_decref(s->labels);
        json_decref(s->http);
        json_decref(s->log);
        json_decref(s->waiters);
        json_decref(s->create_rpc_id);
        json_decref(s->create_params);
        free(s->policy_name);
        nsbox_policy_free(s->policy);
        nsbox_layers_release(&s->layers);
        nsbox_layers_release(&s->base_layers);
        free(s->repo_url);
        free(s->repo_commit);
        free(s->clone_url);
        free(s->clone_commit);
        if (s->record_fd >= 0)
                close(s->record_fd);
        free(s->record_path);
        if (s->id_lock_fd >= 0)
                close(s->id_lock_fd); /* its id range is free again */
        free(s);
}

void unwatch_sandbox(daemon_state *d, sandbox *s)
{
        int fds[3] = { s->sup.sb.syncfd, s->sup.sb.agentfd, s->sup.sb.pidfd };
        for (int i = 0; i < 3; i++)
                if (fds[i] >= 0)
                        epoll_ctl(d->epfd, EPOLL_CTL_DEL, fds[i], NULL);
}

/* Its worker, if any, killed; a snapshot's client told why. */
static void job_stop(daemon_state *d, sandbox *s, const char *why)
{
        if (!s->job)
                return;
        kill(s->job_pid, SIGKILL);
        while (waitpid(s->job_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, s->job_fd, NULL);
        close(s->job_fd);
        s->job_fd = -1;
        sb_release(&s->job_out);
        if (s->job == JOB_SNAPSHOT)
                reply_error(client_by_serial(d, s->job_client), s->job_rpc_id, RPC_SERVER_ERROR, "not_found", "snapshot '%s' of sandbox %s: the sandbox %s",
                            s->job_name, s->sup.id, why);
        json_decref(s->job_rpc_id);
        s->job_rpc_id = NULL;
        s->job = JOB_NONE;
}

void sandbox_remove(daemon_state *d, sandbox *s, const char *code, const char *why)
{
        for (sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        d->n_sandboxes--;
        d->capacity_freed = true;
        d->pool_dirty = true;
        CATALOG_TOLD(d, s, true);
        job_stop(d, s, why);
        nsbox_sup_fail_all(&s->sup, code, why);
        if (s->create_rpc_id)
                reply_error(client_by_serial(d, s->create_client), s->create_rpc_id, RPC_SERVER_ERROR, "internal",
                            "sandbox %s %s before it was ready", s->sup.id, why);
        size_t i;
        json_t *w;
        json_array_foreach(s->waiters, i, w)
                reply_error(client_by_serial(d, (uint64_t)json_integer_value(json_array_get(w, 0))), json_array_get(w, 1), RPC_SERVER_ERROR,
                            "internal", "sandbox %s %s before it was ready", s->sup.id, why);
        if (s->pooled && !s->ready && s->tpl >= 0 && !d->stop) { /* a template that does not start: try again later */
                tpl_state *t = &d->tpl[s->tpl];
                t->fails++;
                t->retry_ns = now_ns() + (t->fails >= 10 ? POOL_RETRY_MAX_NS : (100000000ull << t->fails));
                tpl_start_failed(d, s->tpl, why);
        }
        unwatch_sandbox(d, s);
        state_remove(d, s);
        if (s->pooled)
                dlog(LOG_INFO, "sandbox.removed", s->sup.id, "pooled sandbox %s of template '%s' removed: %s", s->sup.id, d->conf->templates[s->tpl].name, why);
        else
                dlog(LOG_INFO, "sandbox.removed", s->sup.id, "sandbox %s removed: %s", s->sup.id, why);
        sandbox_free(s);
}

bool visible(const client *c, const sandbox *s) { return !s->pooled && (c->uid == 0 || c->uid == s->owner); }

/* By full id or a unique prefix of at least 4 characters, among what the client may see. */
sandbox *find_sandbox(daemon_state *d, client *c, json_t *id, json_t *params)
{
        json_t *v = json_object_get(params, "sandbox");
        if (!json_is_string(v)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "'sandbox' (the sandbox id) must be a string");
                return NULL;
        }
        nsbox_id_match m;
        nsbox_id_match_init(&m, json_string_value(v));
        for (sandbox *s = d->sandboxes; s; s = s->next)
                if (visible(c, s))
                        nsbox_id_match_offer(&m, s->sup.id, s);
        const char *code;
        char msg[160];
        sandbox *found = nsbox_id_match_result(&m, &code, msg, sizeof(msg));
        if (!found)
                reply_error(c, id, RPC_SERVER_ERROR, code, "%s", msg);
        return found;
}

/* Of the limits asked for (l), those that hold ("limits_enforced": the disk always, memory,
 * pids and cpus where the sandbox's cgroup has the controller), and a warning naming the rest:
 * a limit that was asked for and does not hold is never silent. */
static void limits_held(json_t *o, const nsbox_limits *l, const nsbox_cgroup *cg)
{
        nsbox_limits_json(o, l, nsbox_cgroup_held(l, cg));
        char msg[1200];
        if (nsbox_cgroup_unheld(l, cg, msg, sizeof(msg)))
                json_object_set_new(o, "warnings", json_pack("[s]", msg));
}

json_t *sandbox_json(const daemon_state *d, const sandbox *s)
{
        json_t *o = json_pack("{ss ss sI si ss sO sI sI}", "id", s->sup.id,
                              "state", !s->ready ? "starting" : s->job == JOB_SNAPSHOT ? "snapshotting" : s->paused ? "paused" : "running",
                              "created", (json_int_t)s->created, "uid", (int)s->owner, "policy", s->policy_name ? s->policy_name : "",
                              "labels", s->labels ? s->labels : json_object(), "pid", (json_int_t)s->sup.sb.pid, "calls",
                              (json_int_t)s->sup.n_calls);
        if (!o)
                return NULL;
        if (s->bound_client)
                json_object_set_new(o, "close_with_client", json_true());
        uint64_t now = now_ns();
        if (s->expires_ns)
                json_object_set_new(o, "expires_in", json_real(s->expires_ns > now ? (double)(s->expires_ns - now) / 1e9 : 0));
        json_object_set_new(o, "template", s->tpl >= 0 ? json_string(d->conf->templates[s->tpl].name) : json_null());
        if (s->idle_ms) {
                uint64_t at = s->last_active_ns + s->idle_ms * 1000000;
                json_object_set_new(o, "idle_timeout", json_real((double)s->idle_ms / 1000.0));
                if (!s->paused && s->sup.n_calls == 0)
                        json_object_set_new(o, "idle_expires_in", json_real(at > now ? (double)(at - now) / 1e9 : 0));
        }
        json_object_set_new(o, "on_expiry", json_string(!s->expiry_pause ? "destroy" : s->expiry_files ? "pause_files" : "pause"));
        if (s->paused) /* frozen, or its processes killed and its files kept */
                json_object_set_new(o, "paused_memory", json_boolean(!s->paused_files));
        if (s->policy && s->policy->user_name) /* who its commands and files act as, inside */
                json_object_set_new(o, "user", json_pack("{ss si}", "name", s->policy->user_name, "uid", (int)s->policy->uid));
        limits_held(o, &s->limits, &s->sup.sb.cg);
        json_object_set_new(o, "snapshot", s->layers.snapshot ? json_string(s->layers.snapshot) : json_null());
        if (s->repo_url || s->clone_url) {
                json_object_set_new(o, "repo", json_string(s->repo_url ? s->repo_url : s->clone_url));
                const char *commit = s->repo_url ? s->repo_commit : s->clone_commit;
                json_object_set_new(o, "commit", commit ? json_string(commit) : json_null());
        }
        if (s->record_path)
                json_object_set_new(o, "record", json_string(s->record_path));
        json_object_set_new(o, "layers", json_integer((json_int_t)s->layers.n));
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&s->sup.sb.cg, &cs) < 0) {
                json_object_set_new(o, "cgroup", json_null());
                return o;
        }
        json_object_set_new(o, "cgroup", s->sup.sb.cg.path ? json_string(s->sup.sb.cg.path) : json_null()); /* null: v1 only */
        json_object_set_new(o, "cpu_time_ms", json_real((double)cs.cpu_usage_us / 1000.0));
        if (cs.has_memory) {
                json_object_set_new(o, "memory_bytes", json_integer((json_int_t)cs.memory_current));
                json_object_set_new(o, "peak_memory_bytes", json_integer((json_int_t)cs.memory_peak));
                json_object_set_new(o, "oom_kills", json_integer((json_int_t)cs.oom_kills));
        }
        if (cs.has_pids) {
                json_object_set_new(o, "pids", json_integer((json_int_t)cs.pids_current));
                json_object_set_new(o, "pids_limited", json_integer((json_int_t)cs.pids_limited));
        }
        return o;
}

/* Start (or start again) the sandbox's agent on its current layers; ready comes on syncfd. */
int sandbox_launch(daemon_state *d, sandbox *s, nsbox_error *err)
{
        /* root: a host id range of its own, unless its files come from the store, where they
         * are owned in the shared one (userns.h) */
        nsbox_idmap map;
        nsbox_idmap_for_caller(0, 0, &map);
        bool own = map.privileged && s->layers.n == 0 && !s->repo_url;
        if (!own && s->id_lock_fd >= 0) {
                close(s->id_lock_fd);
                s->id_lock_fd = -1;
                s->id_slot = 0;
        }
        if (own && s->id_lock_fd < 0) {
                unsigned slot;
                int r = nsbox_slot_take(NSBOX_ID_LOCKDIR, NSBOX_ID_SLOTS - 1, "host id ranges", &slot, &s->id_lock_fd, err);
                if (r < 0)
                        return r;
                s->id_slot = slot + 1;
        }
        s->policy->host_id_base = s->id_slot ? NSBOX_ROOT_ID_BASE + s->id_slot * NSBOX_ROOT_ID_COUNT : 0;
        s->policy->outlive_parent = d->conf->keep_on_stop;
        s->policy->layers = s->layers.n ? s->layers.paths : NULL;
        int r = nsbox_sup_start(&s->sup, s->policy, err);
        s->policy->layers = NULL;
        if (r < 0)
                return r;
        s->ready = false;
        s->ready_deadline_ns = now_ns() + READY_TIMEOUT_NS;
        if (nsbox_epoll_add(d->epfd, s->sup.sb.syncfd, KEY(s->serial, K_SYNC), &s->sync_events, EPOLLIN) < 0 ||
            nsbox_epoll_add(d->epfd, s->sup.sb.pidfd, KEY(s->serial, K_PIDFD), &s->pid_events, EPOLLIN) < 0 ||
            nsbox_epoll_add(d->epfd, s->sup.sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events, 0) < 0)
                return nsbox_err(err, errno, "watch the sandbox");
        state_write(d, s);
        return 0;
}

void tpl_start_failed(daemon_state *d, int t, const char *why)
{
        tpl_state *ts = &d->tpl[t];
        ts->failures++;
        ts->failed_at = time(NULL);
        snprintf(ts->failed_why, sizeof(ts->failed_why), "%s", why && *why ? why : "unknown error");
        dlog(LOG_WARNING, "pool.start_failed", NULL, "template '%s': a pooled sandbox did not start (%u in a row, retried in %.1f s): %s",
             d->conf->templates[t].name, ts->fails, ts->retry_ns > now_ns() ? (double)(ts->retry_ns - now_ns()) / 1e9 : 0.0, ts->failed_why);
}

void create_failed(daemon_state *d, sandbox *s, const char *code, const char *msg)
{
        reply_error(client_by_serial(d, s->create_client), s->create_rpc_id, RPC_SERVER_ERROR, code, "%s", msg);
        json_decref(s->create_rpc_id);
        s->create_rpc_id = NULL;
        char why[512]; /* the reason goes on to the log and, for a pooled one, to stats */
        snprintf(why, sizeof(why), "failed to start: %s", msg);
        sandbox_remove(d, s, code, why);
}

sandbox *sandbox_new(void)
{
        sandbox *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        nsbox_sup_init(&s->sup, NULL, NULL, NULL); /* calls_attach gives it its id and callbacks, once it has them */
        s->layers = (nsbox_layers)NSBOX_LAYERS_INIT;
        s->base_layers = (nsbox_layers)NSBOX_LAYERS_INIT;
        s->record_fd = s->job_fd = s->id_lock_fd = -1;
        s->tpl = -1;
        return s;
}

/* nsboxd --check-config: one sandbox of each template started, waited for and destroyed, so that
 * a template that cannot start (a missing bind source, a rootfs without what the agent needs) is
 * named with the reason before a pool would retry it for ever. */
int nsbox_daemon_check_templates_start(const nsbox_dconfig *conf, nsbox_error *err)
{
        daemon_state d = { .conf = conf, .state_dirfd = -1 };
        d.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (d.epfd < 0)
                return nsbox_err(err, errno, "epoll");
        int r = 0;
        for (size_t t = 0; t < conf->n_templates && r == 0; t++) {
                const nsbox_template *tp = &conf->templates[t];
                sandbox *s = NULL;
                nsbox_error e = { 0 };
                r = sandbox_prepare(&d, NULL, tp->create, &s, &e);
                if (r == 0)
                        r = sandbox_launch(&d, s, &e);
                if (r == 0)
                        r = nsbox_sandbox_wait_ready(&s->sup.sb, (int)(READY_TIMEOUT_NS / 1000000), &e);
                if (r < 0)
                        nsbox_err(err, 0, "%s: template '%s' does not start: %s", conf->source ? conf->source : "configuration", tp->name,
                                  e.msg ? e.msg : strerror(-r));
                nsbox_error_clear(&e);
                if (s) {
                        unwatch_sandbox(&d, s);
                        sandbox_free(s);
                }
        }
        close(d.epfd);
        return r;
}
