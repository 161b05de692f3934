/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd (daemon.h).  Memory is bounded the same way as in the agent: a client whose replies
 * pile up above CLIENT_HIGH is not read from, and the agents streaming to it are told to pause
 * those streams (a stream nobody reads stops in the command's pipe, and other calls to the same
 * sandbox go on); a client CLIENT_HARD behind is disconnected. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "../tools/registry.h"
#include "agentexec.h"
#include "base64.h"
#include "cgroup.h"
#include "dconfig.h"
#include "dlog.h"
#include "keeper.h"
#include "options.h"
#include "params.h"
#include "paths.h"
#include "peer.h"
#include "proto.h"
#include "repo.h"
#include "sandbox.h"
#include "sha256.h"
#include "store.h"
#include "systemd.h"
#include "trajectory.h"
#include "treecopy.h"
#include "userns.h"
#include "util.h"

#define MAX_LINE NSBOX_FRAME_MAX_JSON
#define CLIENT_HIGH (16u << 20)  /* streams to the client are paused in their agents above this */
#define CLIENT_HARD (64u << 20)  /* a client this far behind on its replies is disconnected */
#define MAX_CLIENTS NSBOX_DCONFIG_MAX_CONNECTIONS
#define CLIENTS_KEPT_FOR_OPERATOR 64 /* of MAX_CLIENTS: only root and nsboxd's own uid take these */
#define NGROUPS_MAX_PEER 1024 /* a client's groups looked at (SO_PEERGROUPS) */
#define MAX_SANDBOXES NSBOX_DCONFIG_MAX_SANDBOXES
#define MAX_CALLS_PER_SANDBOX 1024
#define READY_TIMEOUT_NS (30ull * 1000000000)
#define PAUSE_TIMEOUT_MS 5000
#define REPO_TIMEOUT_NS (600ull * 1000000000) /* a clone, before the sandbox starts */
#define JOB_OUT_MAX 65536
#define MAX_WAIT_S 600                      /* create's wait for capacity */
#define MAX_WAITING 1024                    /* creates waiting for capacity at once; more: capacity at once */
#define LAT_RING 4096                       /* acquire latencies kept for stats */
#define POOL_STARTING_MAX 4                 /* pooled sandboxes of a template starting at once */
#define POOL_RETRY_MAX_NS (60ull * 1000000000) /* a template that fails to start is retried at most this late */
/* A handed-over sandbox's refill waits for its first call to be answered, or this long: on a
 * small machine a replacement starting meanwhile takes the cores the first call needs. */
#define POOL_REFILL_DELAY_NS (20ull * 1000000)
#define NO_OWNER ((uid_t)-1)                /* a pooled sandbox, not handed out yet */

/* JSON-RPC error codes; the stable nsbox code is in error.data.code */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_SERVER_ERROR -32000

enum { K_LISTEN, K_SIGNAL, K_CLIENT, K_SYNC, K_AGENT, K_PIDFD, K_JOB };
#define RPC_CAPACITY "capacity"

/* Work that would stall the loop runs in a forked worker, which reports one JSON line on a pipe. */
enum { JOB_NONE, JOB_SNAPSHOT, JOB_REPO };
#define KEY(serial, kind) ((uint64_t)(serial) << 3 | (uint64_t)(kind))

typedef struct client {
        struct client *next;
        uint64_t serial;
        int fd;
        uid_t uid;
        strbuf in;
        gid_t gid;
        bool discarding; /* the rest of an oversized line */
        nsbox_queue out;
        bool eof;
        uint32_t events;
        bool spoke;                /* sent a byte: the handshake window is over */
        uint64_t accepted_ns;
        uint64_t partial_since_ns; /* the first byte of an unfinished request line came then; 0: none */
        size_t counted;            /* of its uid's buffered request bytes (uid_use) */
} client;

/* What one uid holds of the connections and of the request bytes buffered (nsboxd(8), LIMITS). */
typedef struct uid_use {
        uid_t uid;
        unsigned conns;
        size_t buffered;
} uid_use;

typedef struct pending {
        struct pending *next;
        json_int_t agent_id;
        uint64_t client; /* serial; 0 once the client went away */
        json_t *rpc_id;
        bool stream, b64_payload, exec, paused;
        uint64_t pids_limited; /* exec: pids.events max when it started */
        uint64_t step, start_ns; /* recording: the step number and when it was asked */
        json_t *rec_params;      /* recording: the params as the client sent them */
        char tool[32];
} pending;

typedef struct sandbox {
        struct sandbox *next;
        uint64_t serial;
        char id[33];
        uid_t owner;
        nsbox_sandbox sb;
        char *policy_name;
        json_t *labels;
        nsbox_limits limits;
        bool ready, paused;
        bool fresh;               /* handed over from a pool; its refill waits for its first reply */
        uint64_t bound_client;    /* close_with_client: destroyed when this client (serial) goes */
        time_t created;
        uint64_t expires_ns, ready_deadline_ns;
        uint64_t create_client;
        json_t *create_rpc_id;
        nsbox_frame_reader rd;
        nsbox_queue out;
        json_int_t next_agent_id;
        pending *calls;
        unsigned n_calls;
        uint32_t agent_events, sync_events, pid_events;
        /* snapshots and resets */
        nsbox_policy *policy;     /* kept to start it again */
        nsbox_layers base_layers; /* what it was created on: a snapshot, a repository; held */
        nsbox_layers layers;      /* what it runs on now (a reset may change it); held */
        json_t *create_params;    /* as the client gave them */
        bool resetting;
        char *repo_url, *repo_commit;
        uid_t host_uid;           /* the sandbox user's host ids, owner of a repository layer */
        gid_t host_gid;
        /* the worker running for it */
        int job;
        pid_t job_pid;
        int job_fd;
        strbuf job_out;
        uint32_t job_events;
        uint64_t job_client, job_start_ns;
        json_t *job_rpc_id;
        char job_name[NSBOX_SNAPSHOT_NAME_MAX + 1];
        bool job_thaw;
        /* trajectory recording */
        int record_fd;
        char *record_path;
        uint64_t record_steps;
        /* service: templates, pools, lifetimes, capacity */
        int tpl;                 /* index of its template in the configuration, or -1 */
        bool pooled;             /* started for its template's pool, not handed out yet (owner NO_OWNER) */
        uint64_t idle_ms, last_active_ns;
        bool expiry_pause;
        uint64_t mem_commit;     /* its memory limit, counted against memory_budget */
        uint64_t req_start_ns;   /* when the create waiting for it came, for the acquire latency */
        bool goc;                /* that create was get_or_create: its result says "created" */
        json_t *waiters;         /* get_or_create calls waiting for it: [[client serial, id, start ns]...] */
        unsigned id_slot;        /* root: its own host id range (userns.h); 0: the shared one */
        int id_lock_fd;
} sandbox;

/* A create waiting for capacity (its 'wait'). */
typedef struct waiting {
        struct waiting *next;
        uint64_t client, deadline_ns, start_ns;
        json_t *rpc_id, *params;
        bool goc;
} waiting;

typedef struct tpl_state {
        uint64_t hits, misses;
        unsigned fails;     /* pooled starts failed in a row */
        uint64_t retry_ns;  /* no pooled start before this */
} tpl_state;

typedef struct daemon_state {
        int epfd, listen_fd, sig_fd;
        uint64_t next_serial;
        client *clients;
        unsigned n_clients;
        sandbox *sandboxes;
        unsigned n_sandboxes;
        bool stop;
        const nsbox_dconfig *conf;
        tpl_state *tpl;
        waiting *waitq;
        bool capacity_freed;     /* since the wait queue was last looked at */
        bool pool_dirty;         /* a pool may be short: look (pool_fill) */
        uint64_t pool_retry_ns;  /* a short pool waits for its template's retry time */
        uint32_t lat_us[LAT_RING];
        unsigned lat_n;
        uint64_t lat_total;
        bool stopping, activated;
        uint64_t drain_deadline_ns, start_ns;
        int state_dirfd;         /* <socket>.state: one file per live sandbox */
        uid_use uses[MAX_CLIENTS]; /* one per uid with a connection */
        unsigned n_uses;
        uint64_t refused_log_ns; /* refused connections are logged once a second at most */
        unsigned refused_quiet;  /* refused since, not logged */
} daemon_state;

static void state_write(daemon_state *d, const sandbox *s);
static void state_remove(daemon_state *d, const sandbox *s);

static client *client_by_serial(daemon_state *d, uint64_t serial)
{
        for (client *c = d->clients; c && serial; c = c->next)
                if (c->serial == serial)
                        return c;
        return NULL;
}

static sandbox *sandbox_by_serial(daemon_state *d, uint64_t serial)
{
        for (sandbox *s = d->sandboxes; s; s = s->next)
                if (s->serial == serial)
                        return s;
        return NULL;
}

/* ---- replies ------------------------------------------------------------------------------ */

static void send_line(client *c, json_t *msg)
{
        if (!c || !msg) {
                json_decref(msg);
                return;
        }
        size_t len = 0;
        char *text = nsbox_json_dumps(msg, &len);
        json_decref(msg);
        if (!text || nsbox_queue_append(&c->out, text, len) < 0 || nsbox_queue_append(&c->out, "\n", 1) < 0)
                c->eof = true; /* out of memory for this client: drop it */
        free(text);
}

static void reply_result(client *c, json_t *id, json_t *result)
{
        if (!id) { /* a notification: no reply */
                json_decref(result);
                return;
        }
        send_line(c, json_pack("{ss sO so}", "jsonrpc", "2.0", "id", id, "result", result ? result : json_object()));
}

static void reply_error(client *c, json_t *id, int rpc_code, const char *code, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void reply_error(client *c, json_t *id, int rpc_code, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        send_line(c, json_pack("{ss sO s{si ss s{ss}}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code", rpc_code,
                               "message", msg, "data", "code", code));
}

/* ---- sandboxes ------------------------------------------------------------------------------ */

static void pending_free(pending *p)
{
        json_decref(p->rpc_id);
        json_decref(p->rec_params);
        free(p);
}

/* ---- trajectories (nsbox-protocol(7), TRAJECTORIES) ---------------------------------------- */

static void record_line(sandbox *s, json_t *line)
{
        if (s->record_fd >= 0 && line && nsbox_traj_write(s->record_fd, line) < 0) {
                dlog(LOG_ERR, "record.failed", s->id, "sandbox %s: cannot write its trajectory '%s': %s; recording stopped", s->id, s->record_path, strerror(errno));
                close(s->record_fd);
                s->record_fd = -1;
        }
        json_decref(line);
}

static void record_call(sandbox *s, const pending *p, json_t *result, const char *code)
{
        if (s->record_fd < 0 || !p->step)
                return;
        record_line(s, nsbox_traj_step_line(p->step, "call", p->tool, p->rec_params, (double)(now_ns() - p->start_ns) / 1e6, result, code));
}

static void record_op(sandbox *s, const char *op, const char *name, uint64_t start_ns, const char *code)
{
        if (s->record_fd < 0)
                return;
        record_line(s, nsbox_traj_step_line(++s->record_steps, op, name, NULL, (double)(now_ns() - start_ns) / 1e6, NULL, code));
}

static void fail_calls(daemon_state *d, sandbox *s, const char *code, const char *why)
{
        while (s->calls) {
                pending *p = s->calls;
                s->calls = p->next;
                record_call(s, p, NULL, code);
                reply_error(client_by_serial(d, p->client), p->rpc_id, RPC_SERVER_ERROR, code, "sandbox %s %s", s->id, why);
                pending_free(p);
        }
        s->n_calls = 0;
}

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
                            s->job_name, s->id, why);
        json_decref(s->job_rpc_id);
        s->job_rpc_id = NULL;
        s->job = JOB_NONE;
}

/* slirp4netns processes told to exit, reaped as they finish: their exit takes the kernel some
 * 20 ms (the tap device goes with the sandbox's network namespace), too long to wait for in the
 * event loop. */
static pid_t *exiting;
static size_t n_exiting;

static void reap_later(pid_t pid)
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

static void reap_exited(bool block)
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

static void sandbox_free(sandbox *s)
{
        reap_later(nsbox_net_detach(&s->sb.net));
        nsbox_sandbox_destroy(&s->sb);
        nsbox_frame_reader_release(&s->rd);
        nsbox_queue_release(&s->out);
        json_decref(s->labels);
        json_decref(s->waiters);
        json_decref(s->create_rpc_id);
        json_decref(s->create_params);
        free(s->policy_name);
        nsbox_policy_free(s->policy);
        nsbox_layers_release(&s->layers);
        nsbox_layers_release(&s->base_layers);
        free(s->repo_url);
        free(s->repo_commit);
        if (s->record_fd >= 0)
                close(s->record_fd);
        free(s->record_path);
        if (s->id_lock_fd >= 0)
                close(s->id_lock_fd); /* its id range is free again */
        free(s);
}

static void unwatch_sandbox(daemon_state *d, sandbox *s)
{
        int fds[3] = { s->sb.syncfd, s->sb.agentfd, s->sb.pidfd };
        for (int i = 0; i < 3; i++)
                if (fds[i] >= 0)
                        epoll_ctl(d->epfd, EPOLL_CTL_DEL, fds[i], NULL);
}

static void sandbox_remove(daemon_state *d, sandbox *s, const char *code, const char *why)
{
        for (sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        d->n_sandboxes--;
        d->capacity_freed = true;
        d->pool_dirty = true;
        job_stop(d, s, why);
        fail_calls(d, s, code, why);
        if (s->create_rpc_id)
                reply_error(client_by_serial(d, s->create_client), s->create_rpc_id, RPC_SERVER_ERROR, "internal",
                            "sandbox %s %s before it was ready", s->id, why);
        size_t i;
        json_t *w;
        json_array_foreach(s->waiters, i, w)
                reply_error(client_by_serial(d, (uint64_t)json_integer_value(json_array_get(w, 0))), json_array_get(w, 1), RPC_SERVER_ERROR,
                            "internal", "sandbox %s %s before it was ready", s->id, why);
        if (s->pooled && !s->ready && s->tpl >= 0 && !d->stop) { /* a template that does not start: try again later */
                tpl_state *t = &d->tpl[s->tpl];
                t->fails++;
                t->retry_ns = now_ns() + (t->fails >= 10 ? POOL_RETRY_MAX_NS : (100000000ull << t->fails));
        }
        unwatch_sandbox(d, s);
        state_remove(d, s);
        if (s->pooled)
                dlog(LOG_INFO, "sandbox.removed", s->id, "pooled sandbox %s of template '%s' removed: %s", s->id, d->conf->templates[s->tpl].name, why);
        else
                dlog(LOG_INFO, "sandbox.removed", s->id, "sandbox %s removed: %s", s->id, why);
        sandbox_free(s);
}

static bool visible(const client *c, const sandbox *s) { return !s->pooled && (c->uid == 0 || c->uid == s->owner); }

/* By full id or a unique prefix of at least 4 characters, among what the client may see. */
static sandbox *find_sandbox(daemon_state *d, client *c, json_t *id, json_t *params)
{
        json_t *v = json_object_get(params, "sandbox");
        if (!json_is_string(v)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "'sandbox' (the sandbox id) must be a string");
                return NULL;
        }
        const char *want = json_string_value(v);
        size_t n = strlen(want);
        sandbox *found = NULL;
        unsigned matches = 0;
        for (sandbox *s = d->sandboxes; s && n >= 4 && n <= 32; s = s->next)
                if (visible(c, s) && strncmp(s->id, want, n) == 0) {
                        found = s;
                        matches += 1 + (n == 32) * 1000; /* an exact match wins */
                }
        if (!found) {
                reply_error(c, id, RPC_SERVER_ERROR, "not_found", "no sandbox '%.64s'", want);
                return NULL;
        }
        if (matches > 1 && matches < 1000) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "'%.64s' matches %u sandboxes; give more of the id", want, matches);
                return NULL;
        }
        return found;
}

static json_t *sandbox_json(const daemon_state *d, const sandbox *s)
{
        json_t *o = json_pack("{ss ss sI si ss sO sI sI}", "id", s->id,
                              "state", !s->ready ? "starting" : s->job == JOB_SNAPSHOT ? "snapshotting" : s->paused ? "paused" : "running",
                              "created", (json_int_t)s->created, "uid", (int)s->owner, "policy", s->policy_name ? s->policy_name : "",
                              "labels", s->labels ? s->labels : json_object(), "pid", (json_int_t)s->sb.pid, "calls",
                              (json_int_t)s->n_calls);
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
                if (!s->paused && s->n_calls == 0)
                        json_object_set_new(o, "idle_expires_in", json_real(at > now ? (double)(at - now) / 1e9 : 0));
        }
        json_object_set_new(o, "on_expiry", json_string(s->expiry_pause ? "pause" : "destroy"));
        const nsbox_limits *l = &s->limits;
        json_t *lim = json_object();
        if (l->memory)
                json_object_set_new(lim, "memory", json_integer((json_int_t)l->memory));
        if (l->pids)
                json_object_set_new(lim, "pids", json_integer((json_int_t)l->pids));
        if (l->cpus > 0)
                json_object_set_new(lim, "cpus", json_real(l->cpus));
        json_object_set_new(lim, "disk", json_integer((json_int_t)(l->disk ? l->disk : NSBOX_DEFAULT_DISK)));
        json_object_set_new(o, "limits", lim);
        json_object_set_new(o, "snapshot", s->layers.snapshot ? json_string(s->layers.snapshot) : json_null());
        if (s->repo_url) {
                json_object_set_new(o, "repo", json_string(s->repo_url));
                json_object_set_new(o, "commit", s->repo_commit ? json_string(s->repo_commit) : json_null());
        }
        if (s->record_path)
                json_object_set_new(o, "record", json_string(s->record_path));
        json_object_set_new(o, "layers", json_integer((json_int_t)s->layers.n));
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&s->sb.cg, &cs) < 0) {
                json_object_set_new(o, "cgroup", json_null());
                return o;
        }
        json_object_set_new(o, "cgroup", json_string(s->sb.cg.path));
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

static int check_labels(json_t *labels, strbuf *why)
{
        if (!labels || json_is_null(labels))
                return 0;
        if (!json_is_object(labels) || json_object_size(labels) > 64) {
                sb_appendf(why, "'labels' must be an object of at most 64 string values");
                return -EINVAL;
        }
        const char *k;
        json_t *v;
        json_object_foreach(labels, k, v) {
                size_t kl = strlen(k);
                bool ok = kl >= 1 && kl <= 63 && json_is_string(v) && json_string_length(v) <= 256;
                for (const char *p = k; ok && *p; p++)
                        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._-/", *p);
                if (!ok) {
                        sb_appendf(why, "label '%.63s': keys are 1-63 of [A-Za-z0-9._-/], values strings of at most 256 bytes", k);
                        return -EINVAL;
                }
        }
        return 0;
}

/* The stable code for an error of the store or the launcher. */
static const char *code_for(int r)
{
        switch (-r) {
        case ENOENT: return "not_found";
        case EEXIST:
        case EBUSY: return "conflict";
        case EINVAL:
        case EPERM: return "invalid_argument";
        case ETIMEDOUT: return "timeout";
        case EFBIG: return "too_large";
        case EMFILE:
        case ENFILE:
        case EAGAIN: return "capacity"; /* out of file descriptors, or of host id ranges */
        default: return "internal";
        }
}

static const char *root_name(const nsbox_policy *p) { return p->root == ROOT_HOST ? "host" : p->root_path; }

/* Start (or start again) the sandbox's agent on its current layers; ready comes on syncfd. */
static int sandbox_launch(daemon_state *d, sandbox *s, nsbox_error *err)
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
        s->sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
        int r = nsbox_sandbox_start(s->policy, NULL, NULL, s->id, &s->sb, err);
        s->policy->layers = NULL;
        if (r < 0)
                return r;
        s->ready = false;
        s->ready_deadline_ns = now_ns() + READY_TIMEOUT_NS;
        int fl = fcntl(s->sb.agentfd, F_GETFL);
        fcntl(s->sb.agentfd, F_SETFL, fl | O_NONBLOCK);
        if (nsbox_epoll_add(d->epfd, s->sb.syncfd, KEY(s->serial, K_SYNC), &s->sync_events, EPOLLIN) < 0 ||
            nsbox_epoll_add(d->epfd, s->sb.pidfd, KEY(s->serial, K_PIDFD), &s->pid_events, EPOLLIN) < 0 ||
            nsbox_epoll_add(d->epfd, s->sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events, 0) < 0)
                return nsbox_err(err, errno, "watch the sandbox");
        state_write(d, s);
        return 0;
}

/* create --from: the snapshot's layers, and its root unless the client chose one. */
static int create_from(sandbox *s, const char *name, bool root_given, nsbox_policy *p, nsbox_error *err)
{
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, err);
        if (r == 0)
                r = nsbox_store_acquire_snapshot(&st, name, &s->base_layers, err);
        nsbox_store_close(&st);
        if (r < 0)
                return r;
        if ((r = nsbox_policy_use_layers(p, &s->base_layers, root_given, err)) < 0)
                return r;
        return nsbox_layers_dup(&s->base_layers, &s->layers) < 0 ? nsbox_err(err, ENOMEM, "layers") : 0;
}

static void repo_key(const sandbox *s, const char *commit, char ret[65])
{
        _cleanup_free_ char *k = NULL;
        int n = asprintf(&k, "%s%c%s%c%u:%u%c%s", s->repo_url, 0, commit, 0, (unsigned)s->host_uid, (unsigned)s->host_gid, 0,
                         s->policy->workdir);
        nsbox_sha256_hex(n > 0 ? k : "", n > 0 ? (size_t)n : 0, ret);
}

/* len lowercase hex digits, as in a commit id (40) or a sandbox id (32) */
static bool is_hex(const char *c, size_t len)
{
        if (!c || strlen(c) != len)
                return false;
        for (; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}

static bool full_sha(const char *c) { return is_hex(c, 40); }

/* ---- workers --------------------------------------------------------------------------------- */

/* In the worker: the snapshot's copy and commit. */
static int job_snapshot(sandbox *s, json_t **ret, nsbox_error *err)
{
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, err);
        if (r < 0)
                return r;
        _cleanup_close_ int upper = openat(s->sb.stagefd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        nsbox_snapshot_stats stats = { 0 };
        /* its files, owned in its own id range, go to the shared one its forks will run in */
        nsbox_idshift shift = { .from = NSBOX_ROOT_ID_BASE + s->id_slot * NSBOX_ROOT_ID_COUNT, .to = NSBOX_ROOT_ID_BASE,
                                .count = NSBOX_ROOT_ID_COUNT };
        st.shift = s->id_slot ? &shift : NULL;
        if (upper < 0)
                r = nsbox_err(err, errno, "open the sandbox's writable layer");
        else
                r = nsbox_store_snapshot(&st, s->job_name, upper, &s->layers, root_name(s->policy), s->policy->workdir, s->id,
                                         s->limits.disk ? s->limits.disk : NSBOX_DEFAULT_DISK, &stats, err);
        nsbox_store_close(&st);
        if (r < 0)
                return r;
        *ret = json_pack("{ss ss sI sI sI sf sf}", "name", s->job_name, "sandbox", s->id, "files", (json_int_t)stats.files, "dirs",
                         (json_int_t)stats.dirs, "bytes", (json_int_t)stats.bytes, "copy_ms", stats.copy_ms, "sync_ms", stats.sync_ms);
        return 0;
}

/* In the worker: clone the repository into a new layer (workdir/ inside it), owned by the
 * sandbox user, and bind it under its key. */
static int job_repo(sandbox *s, json_t **ret, nsbox_error *err)
{
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, err);
        if (r < 0)
                return r;
        char tmpname[64];
        int tmpfd = nsbox_store_tmp(&st, tmpname, err);
        if (tmpfd < 0) {
                nsbox_store_close(&st);
                return tmpfd;
        }
        /* layer/ + the workdir's components, the last one made by the clone */
        _cleanup_free_ char *rel = strdup(s->policy->workdir);
        _cleanup_close_ int dir = -1;
        const char *last = NULL;
        r = rel ? 0 : -ENOMEM;
        if (r == 0 && (mkdirat(tmpfd, "layer", 0755) < 0 || (dir = openat(tmpfd, "layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
                r = nsbox_err(err, errno, "create the repository layer");
        char *save = NULL;
        for (char *comp = r == 0 ? strtok_r(rel, "/", &save) : NULL; comp;) {
                char *next = strtok_r(NULL, "/", &save);
                if (!next) {
                        last = comp;
                        break;
                }
                int sub;
                if (mkdirat(dir, comp, 0755) < 0 || (sub = openat(dir, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                        r = nsbox_err(err, errno, "create '%s' in the repository layer", comp);
                        break;
                }
                close(dir);
                dir = sub;
                comp = next;
        }
        if (r == 0 && !last)
                r = nsbox_err_as(err, EINVAL, "workdir '%s': a repository cannot be the root", s->policy->workdir);
        char sha[41] = "";
        /* the checkout is bounded by the sandbox's disk: a small repository of one big blob named
         * many times (a git bomb) must not fill the host's store, nor the worker the host's memory */
        uint64_t checkout_max = s->limits.disk ? s->limits.disk : NSBOX_DEFAULT_DISK;
        if (r == 0)
                r = nsbox_repo_worker_limits(checkout_max, err);
        if (r == 0)
                r = nsbox_repo_clone(s->repo_url, s->repo_commit, false, checkout_max, dir, last, sha, err);
        _cleanup_close_ int layer = r == 0 ? openat(tmpfd, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (r == 0)
                r = layer < 0 ? nsbox_err(err, errno, "open the repository layer") : nsbox_tree_chown(layer, s->host_uid, s->host_gid, err);
        char key[65];
        nsbox_layers held = NSBOX_LAYERS_INIT;
        if (r == 0) {
                repo_key(s, sha, key);
                json_t *meta = json_pack("{ss ss si si ss}", "url", s->repo_url, "commit", sha, "uid", (int)s->host_uid, "gid",
                                         (int)s->host_gid, "workdir", s->policy->workdir);
                r = meta ? nsbox_store_bind_repo(&st, key, tmpfd, "layer", meta, &held, err) : -ENOMEM;
                json_decref(meta);
        }
        nsbox_layers_release(&held);
        nsbox_store_tmp_done(&st, tmpname, tmpfd);
        nsbox_store_close(&st);
        if (r < 0)
                return r;
        *ret = json_pack("{ss ss}", "key", key, "commit", sha);
        return 0;
}

static int job_spawn(daemon_state *d, sandbox *s, int kind, client *c, json_t *rpc_id, nsbox_error *err)
{
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return nsbox_err(err, errno, "pipe");
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(pfd[0]);
                close(pfd[1]);
                return nsbox_err(err, e, "fork a worker");
        }
        if (pid == 0) {
                /* the daemon's death ends the work: what it leaves under tmp/ is collected later */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                        _exit(1);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                int keep[2] = { pfd[1] < s->sb.stagefd ? pfd[1] : s->sb.stagefd, pfd[1] < s->sb.stagefd ? s->sb.stagefd : pfd[1] };
                nsbox_close_all_but(keep, 2);
                s->job = kind;
                json_t *res = NULL;
                nsbox_error e = { 0 };
                int r = kind == JOB_SNAPSHOT ? job_snapshot(s, &res, &e) : job_repo(s, &res, &e);
                json_t *line = r < 0 ? json_pack("{sb ss ss}", "ok", 0, "code", code_for(r), "message", e.msg ? e.msg : strerror(-r))
                                     : json_pack("{sb so}", "ok", 1, "result", res ? res : json_object());
                char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
                _exit(text && write_full(pfd[1], text, strlen(text)) == 0 ? 0 : 1);
        }
        close(pfd[1]);
        s->job = kind;
        s->job_pid = pid;
        s->job_fd = pfd[0];
        s->job_client = c ? c->serial : 0;
        s->job_rpc_id = rpc_id ? json_incref(rpc_id) : NULL;
        s->job_start_ns = now_ns();
        sb_init(&s->job_out, JOB_OUT_MAX);
        if (nsbox_epoll_add(d->epfd, s->job_fd, KEY(s->serial, K_JOB), &s->job_events, EPOLLIN) < 0)
                return nsbox_err(err, errno, "watch a worker");
        return 0;
}

static void create_failed(daemon_state *d, sandbox *s, const char *code, const char *msg)
{
        reply_error(client_by_serial(d, s->create_client), s->create_rpc_id, RPC_SERVER_ERROR, code, "%s", msg);
        json_decref(s->create_rpc_id);
        s->create_rpc_id = NULL;
        sandbox_remove(d, s, code, "failed to start");
}

/* The repository layer exists now (or did already): hold it and start. */
static int repo_ready(daemon_state *d, sandbox *s, const char *key)
{
        nsbox_error err = { 0 };
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, &err);
        if (r == 0 && (r = nsbox_store_acquire_repo(&st, key, &s->base_layers, &err)) == 0)
                r = nsbox_err_as(&err, ENOENT, "the repository layer was collected before the sandbox started; try again");
        nsbox_store_close(&st);
        if (r >= 0)
                r = nsbox_layers_dup(&s->base_layers, &s->layers) < 0 ? nsbox_err(&err, ENOMEM, "layers") : 0;
        if (r >= 0)
                r = sandbox_launch(d, s, &err);
        if (r < 0) {
                create_failed(d, s, code_for(r), err.msg ? err.msg : "cannot start the sandbox");
                nsbox_error_clear(&err);
                return -1;
        }
        return 0;
}

static void job_done(daemon_state *d, sandbox *s)
{
        int kind = s->job;
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, s->job_fd, NULL);
        close(s->job_fd);
        s->job_fd = -1;
        int status = 0;
        struct rusage ru = { 0 };
        while (wait4(s->job_pid, &status, 0, &ru) < 0 && errno == EINTR)
                ;
        dlog(LOG_INFO, "job.done", s->id, "sandbox %s: %s worker done in %.1f ms, peak memory %ld KiB", s->id,
             kind == JOB_SNAPSHOT ? "snapshot" : "repository", (double)(now_ns() - s->job_start_ns) / 1e6, ru.ru_maxrss);
        s->job = JOB_NONE;
        json_error_t je;
        json_t *line = s->job_out.buf ? json_loadb(s->job_out.buf, s->job_out.len, 0, &je) : NULL;
        sb_release(&s->job_out);
        json_t *rpc_id = steal_pointer(&s->job_rpc_id);
        client *c = client_by_serial(d, s->job_client);
        bool ok = json_is_true(json_object_get(line, "ok"));
        const char *code = json_string_value(json_object_get(line, "code"));
        const char *msg = json_string_value(json_object_get(line, "message"));
        json_t *result = json_object_get(line, "result");
        if (!line && !msg)
                msg = WIFSIGNALED(status) ? "the worker was killed" : "the worker failed";
        if (kind == JOB_SNAPSHOT) {
                nsbox_error err = { 0 };
                if (s->job_thaw && nsbox_sandbox_freeze(&s->sb, false, PAUSE_TIMEOUT_MS, &err) < 0) {
                        dlog(LOG_ERR, "snapshot.thaw_failed", s->id, "sandbox %s: cannot thaw it after the snapshot: %s", s->id, err.msg);
                        nsbox_error_clear(&err);
                }
                record_op(s, "snapshot", s->job_name, s->job_start_ns, ok ? NULL : code ? code : "internal");
                if (ok) {
                        json_object_set_new(result, "duration_ms", json_real((double)(now_ns() - s->job_start_ns) / 1e6));
                        dlog(LOG_INFO, "snapshot.taken", s->id, "sandbox %s: snapshot '%s' taken in %.1f ms", s->id, s->job_name, (double)(now_ns() - s->job_start_ns) / 1e6);
                        reply_result(c, rpc_id, json_incref(result));
                } else {
                        reply_error(c, rpc_id, RPC_SERVER_ERROR, code ? code : "internal", "%s", msg ? msg : "failed");
                }
        } else if (ok) {
                const char *commit = json_string_value(json_object_get(result, "commit"));
                if (commit) {
                        free(s->repo_commit);
                        s->repo_commit = strdup(commit);
                }
                repo_ready(d, s, json_string_value(json_object_get(result, "key")) ?: "");
        } else {
                create_failed(d, s, code ? code : "internal", msg ? msg : "failed");
        }
        json_decref(rpc_id);
        json_decref(line);
}

static void job_readable(daemon_state *d, sandbox *s)
{
        char buf[4096];
        for (;;) {
                ssize_t n = read(s->job_fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n > 0) {
                        if (sb_append(&s->job_out, buf, (size_t)n) < 0)
                                s->job_out.len = 0; /* nonsense: reported as a failure */
                        continue;
                }
                job_done(d, s);
                return;
        }
}

/* ---- lifecycle methods --------------------------------------------------------------------- */

static int open_recording(sandbox *s, const char *path, nsbox_error *err)
{
        s->record_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (s->record_fd < 0)
                return nsbox_err(err, errno, "record '%s'", path);
        if (!(s->record_path = strdup(path)))
                return -ENOMEM;
        json_t *cp = json_deep_copy(s->create_params);
        json_object_del(cp, "record");
        json_object_del(cp, "labels");
        json_t *h = nsbox_traj_header(s->id, time(NULL), cp);
        json_decref(cp);
        if (!h || nsbox_traj_write(s->record_fd, h) < 0) {
                json_decref(h);
                return nsbox_err(err, errno ? errno : ENOMEM, "record '%s'", path);
        }
        json_decref(h);
        return 0;
}

/* Link s and start it: at once, or after its repository layer is built.  The client c (NULL for a
 * pool) is answered when it is ready; on failure it is answered and s is gone (-1). */
static int sandbox_start(daemon_state *d, sandbox *s, client *c, json_t *id)
{
        nsbox_error err = { 0 };
        s->serial = ++d->next_serial;
        s->created = time(NULL);
        s->ready_deadline_ns = now_ns() + (s->repo_url ? REPO_TIMEOUT_NS : READY_TIMEOUT_NS);
        s->create_client = c ? c->serial : 0;
        s->create_rpc_id = c ? json_incref(id ? id : json_null()) : NULL;
        s->next = d->sandboxes;
        d->sandboxes = s;
        d->n_sandboxes++;
        if (s->repo_url) {
                /* a commit named by its full id may be built already */
                char key[65];
                nsbox_store st = NSBOX_STORE_INIT;
                int hit = 0;
                if (full_sha(s->repo_commit)) {
                        repo_key(s, s->repo_commit, key);
                        if (nsbox_store_open(true, &st, &err) == 0)
                                hit = nsbox_store_acquire_repo(&st, key, &s->base_layers, &err);
                        nsbox_store_close(&st);
                        nsbox_error_clear(&err);
                }
                if (hit > 0) {
                        nsbox_layers_release(&s->base_layers);
                        return repo_ready(d, s, key);
                }
                int r = job_spawn(d, s, JOB_REPO, NULL, NULL, &err);
                if (r < 0) {
                        create_failed(d, s, code_for(r), err.msg ? err.msg : "cannot start a worker");
                        nsbox_error_clear(&err);
                        return -1;
                }
                return 0;
        }
        int r = sandbox_launch(d, s, &err);
        if (r < 0) {
                create_failed(d, s, code_for(r), err.msg ? err.msg : "cannot start the sandbox");
                nsbox_error_clear(&err);
                return -1;
        }
        return 0;
}

/* ---- create: templates, pools, capacity, lifetimes -------------------------------------------- */

/* create's params that shape no sandbox go with a template too (params.h) */
static bool is_lifecycle(const char *k) { return nsbox_param_is(k, NSBOX_PARAM_LIFECYCLE); }

typedef struct create_req {
        json_t *labels; /* owned */
        int tpl;        /* index in conf->templates, or -1 */
        bool has_timeout, has_idle;
        uint64_t timeout_ms, idle_ms;
        int expiry; /* -1: the configuration's; 0 destroy; 1 pause */
        uint64_t wait_ms;
        bool close_with_client;
} create_req;

static int seconds_param(json_t *params, const char *key, double max, bool *has, uint64_t *ret_ms, strbuf *why)
{
        json_t *v = json_object_get(params, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > max) {
                sb_appendf(why, "'%s' must be a number of seconds from 0 to %.0f", key, max);
                return -EINVAL;
        }
        if (has)
                *has = true;
        if (ret_ms)
                *ret_ms = (uint64_t)(json_number_value(v) * 1000.0 + 0.5);
        return 0;
}

/* labels, timeout, idle_timeout, on_expiry of params over what rq holds (a template's) */
static int lifecycle_params(json_t *params, create_req *rq, strbuf *why)
{
        json_t *labels = json_object_get(params, "labels");
        if (check_labels(labels, why) < 0)
                return -EINVAL;
        if (json_is_object(labels)) {
                if (!rq->labels && !(rq->labels = json_object()))
                        return -ENOMEM;
                json_object_update(rq->labels, labels);
                if (json_object_size(rq->labels) > 64) {
                        sb_appendf(why, "'labels': at most 64, the template's included");
                        return -EINVAL;
                }
        }
        if (seconds_param(params, "timeout", 1e8, &rq->has_timeout, &rq->timeout_ms, why) < 0 ||
            seconds_param(params, "idle_timeout", 1e8, &rq->has_idle, &rq->idle_ms, why) < 0)
                return -EINVAL;
        json_t *e = json_object_get(params, "on_expiry");
        if (e && !json_is_null(e)) {
                const char *v = json_string_value(e);
                if (!v || (strcmp(v, "destroy") && strcmp(v, "pause"))) {
                        sb_appendf(why, "'on_expiry' must be \"destroy\" or \"pause\"");
                        return -EINVAL;
                }
                rq->expiry = !strcmp(v, "pause");
        }
        json_t *cwc = json_object_get(params, "close_with_client");
        if (cwc && !json_is_null(cwc)) {
                if (!json_is_boolean(cwc)) {
                        sb_appendf(why, "'close_with_client' must be true or false");
                        return -EINVAL;
                }
                rq->close_with_client = json_is_true(cwc);
        }
        return 0;
}

static void create_req_release(create_req *rq)
{
        json_decref(rq->labels);
        rq->labels = NULL;
}

/* Which template, and the lifecycle params; -EINVAL or -ENOENT (no such template) with why. */
static int parse_req(daemon_state *d, json_t *params, create_req *rq, strbuf *why)
{
        *rq = (create_req){ .tpl = -1, .expiry = -1 };
        json_t *t = json_object_get(params, "template");
        bool shaped = false;
        const char *k;
        json_t *v;
        json_object_foreach(params, k, v)
                if (!is_lifecycle(k) && nsbox_param_given(v))
                        shaped = true;
        if (t && !json_is_null(t)) {
                if (!json_is_string(t)) {
                        sb_appendf(why, "'template' must be a string");
                        return -EINVAL;
                }
                const nsbox_template *tp = nsbox_dconfig_template(d->conf, json_string_value(t));
                if (!tp) {
                        sb_appendf(why, "no template '%.64s' in nsboxd's configuration%s%s", json_string_value(t),
                                   d->conf->source ? " " : "", d->conf->source ? d->conf->source : "");
                        return -ENOENT;
                }
                json_object_foreach(params, k, v)
                        if (!is_lifecycle(k) && nsbox_param_given(v)) {
                                sb_appendf(why, "'%.64s' cannot be given with a template (only labels, timeout, idle_timeout, on_expiry, close_with_client, wait)", k);
                                return -EINVAL;
                        }
                rq->tpl = (int)(tp - d->conf->templates);
        } else if (!shaped && nsbox_dconfig_template(d->conf, "default")) {
                rq->tpl = (int)(nsbox_dconfig_template(d->conf, "default") - d->conf->templates);
        }
        if (rq->tpl >= 0 && lifecycle_params(d->conf->templates[rq->tpl].create, rq, why) < 0)
                return -EINVAL;
        if (lifecycle_params(params, rq, why) < 0)
                return -EINVAL;
        return seconds_param(params, "wait", MAX_WAIT_S, NULL, &rq->wait_ms, why) < 0 ? -EINVAL : 0;
}

/* A root nsboxd opens what a create names as root: a client of another uid names no host path. */
static int check_client_paths(const client *c, json_t *shape, strbuf *why)
{
        if (!c || c->uid == 0 || geteuid() != 0)
                return 0;
        const char *key = nsbox_params_operator_only(shape);
        if (!key)
                return 0;
        sb_appendf(why, "'%s' names host paths or state of root, which a client of uid %u may not ask of a root nsboxd (use a template, or a per-user nsboxd)",
                   key, (unsigned)c->uid);
        return -EPERM;
}

/* The options create's shaping params ask for (o to release; it points into shape, to keep
 * while o is used). */
static int shape_options(const client *c, json_t *shape, nsbox_run_options *o, nsbox_error *err)
{
        _cleanup_sb_ strbuf why;
        sb_init(&why, 1024);
        int r = c ? check_client_paths(c, shape, &why) : 0;
        if (r < 0)
                return nsbox_err_as(err, r == -ENOMEM ? ENOMEM : EINVAL, "create: %s", why.buf ? why.buf : "out of memory");
        r = nsbox_params_from_json(shape, NSBOX_PARAM_LIFECYCLE, o, err);
        if (r < 0)
                nsbox_run_options_release(o);
        return r;
}

/* Root and nsboxd's own uid run nsboxd; other uids are its tenants (a root nsboxd's clients). */
static bool is_operator(uid_t uid) { return uid == 0 || uid == geteuid(); }

/* Sandboxes one uid may hold: max_per_uid when the configuration sets it; by default a fair share
 * for tenants, and no cap of its own (0) for root and nsboxd's own uid: max_sandboxes holds. */
static unsigned max_per_uid(const daemon_state *d, uid_t uid)
{
        return d->conf->max_per_uid_given || !is_operator(uid) ? d->conf->max_per_uid : 0;
}

static uint64_t disk_of(const sandbox *s) { return s->limits.disk ? s->limits.disk : NSBOX_DEFAULT_DISK; }

static void size_text(uint64_t b, char *buf, size_t n)
{
        if (b && b % (1ull << 30) == 0)
                snprintf(buf, n, "%" PRIu64 "G", b >> 30);
        else if (b && b % (1ull << 20) == 0)
                snprintf(buf, n, "%" PRIu64 "M", b >> 20);
        else
                snprintf(buf, n, "%" PRIu64 " bytes", b);
}

/* Room for disk more of uid's sandboxes under max_disk_per_uid?  0, or -EAGAIN with why. */
static int disk_room(const daemon_state *d, uid_t uid, uint64_t disk, strbuf *why)
{
        uint64_t held = 0, cap = d->conf->max_disk_per_uid;
        if (!cap)
                return 0;
        for (const sandbox *s = d->sandboxes; s; s = s->next)
                if (!s->pooled && s->owner == uid)
                        held += disk_of(s);
        if (held + disk <= cap)
                return 0;
        char h[32], a[32], c[32];
        size_text(held, h, sizeof(h));
        size_text(disk, a, sizeof(a));
        size_text(cap, c, sizeof(c));
        sb_appendf(why, "uid %u holds %s of disk, %s more would pass max_disk_per_uid %s", (unsigned)uid, h, a, c);
        return -EAGAIN;
}

/* A client's sandbox gets at most max_disk of writable layer and /tmp (a tmpfs: host memory): a
 * create asking for more is refused; one asking for none (its policy's or the default) gets
 * max_disk when that is less. */
static int disk_allowed(const daemon_state *d, json_t *shape, nsbox_policy *p, nsbox_error *err)
{
        uint64_t cap = d->conf->max_disk;
        if (!p->limits.disk)
                p->limits.disk = NSBOX_DEFAULT_DISK;
        if (p->limits.disk <= cap)
                return 0;
        json_t *asked = json_object_get(shape, "disk");
        if (!asked || !nsbox_param_given(asked)) {
                p->limits.disk = cap;
                return 0;
        }
        char want[32], max[32];
        size_text(p->limits.disk, want, sizeof(want));
        size_text(cap, max, sizeof(max));
        return nsbox_err_as(err, EINVAL, "create: disk %s is more than max_disk %s of nsboxd's configuration%s%s", want, max,
                            d->conf->source ? " " : "", d->conf->source ? d->conf->source : "");
}

static sandbox *sandbox_new(void)
{
        sandbox *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
        s->layers = (nsbox_layers)NSBOX_LAYERS_INIT;
        s->base_layers = (nsbox_layers)NSBOX_LAYERS_INIT;
        s->record_fd = s->job_fd = s->id_lock_fd = -1;
        s->tpl = -1;
        return s;
}

/* A sandbox from create's shaping params (or a template's), not linked nor started. */
static int sandbox_prepare(daemon_state *d, const client *c, json_t *params, sandbox **ret, nsbox_error *err)
{
        json_t *shape = json_deep_copy(params);
        nsbox_params_strip(shape, NSBOX_PARAM_LIFECYCLE);
        nsbox_run_options o;
        int r = !shape ? nsbox_err(err, ENOMEM, "create: out of memory") : shape_options(c, shape, &o, err);
        if (r < 0) {
                json_decref(shape);
                return r;
        }
        sandbox *s = sandbox_new();
        unsigned char rnd[16];
        if (!s || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                free(s);
                json_decref(shape);
                nsbox_run_options_release(&o);
                return nsbox_err(err, ENOMEM, "create: out of memory or randomness");
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
        s->create_params = shape;
        r = nsbox_run_options_policy(&o, &s->policy, err);
        if (r == 0 && o.from)
                r = create_from(s, o.from, o.rootfs != NULL, s->policy, err);
        if (r == 0 && d->conf->memory_budget && !s->policy->limits.memory)
                s->policy->limits.memory = d->conf->default_memory; /* a budget counts every sandbox */
        if (r == 0 && c) /* a template's disk is the operator's */
                r = disk_allowed(d, shape, s->policy, err);
        if (r == 0)
                r = nsbox_policy_check_host(s->policy, err);
        if (r == 0 && o.repo) {
                nsbox_repo_kind kind;
                r = nsbox_repo_classify(o.repo, &kind, &s->repo_url, err);
                if (r == 0 && kind == NSBOX_REPO_NETWORK)
                        r = nsbox_err_as(err, EPERM, "repository '%s' needs network access; the sandbox's network is 'none'", o.repo);
                if (r == 0 && o.commit && !(s->repo_commit = strdup(o.commit)))
                        r = -ENOMEM;
                nsbox_idmap map;
                nsbox_idmap_for_caller(s->policy->uid, s->policy->gid, &map);
                s->host_uid = map.host_uid + (s->policy->uid - map.inside_uid);
                s->host_gid = map.host_gid + (s->policy->gid - map.inside_gid);
        }
        if (r == 0 && o.record)
                r = open_recording(s, o.record, err);
        nsbox_run_options_release(&o);
        if (r < 0) {
                if (s->record_path)
                        unlink(s->record_path);
                sandbox_free(s);
                return r;
        }
        s->limits = s->policy->limits;
        s->mem_commit = d->conf->memory_budget ? s->limits.memory : 0;
        s->policy_name = strdup(s->policy->source ? s->policy->source : "");
        s->labels = json_object();
        *ret = s;
        return 0;
}

static unsigned owned_by(const daemon_state *d, uid_t uid)
{
        unsigned n = 0;
        for (const sandbox *s = d->sandboxes; s; s = s->next)
                n += !s->pooled && s->owner == uid;
        return n;
}

static unsigned of_template(const daemon_state *d, int tpl, unsigned *pooled, unsigned *ready, unsigned *starting)
{
        unsigned n = 0, p = 0, r = 0, st = 0;
        for (const sandbox *s = d->sandboxes; s; s = s->next)
                if (s->tpl == tpl && tpl >= 0) {
                        n++;
                        if (s->pooled) {
                                p++;
                                r += s->ready;
                                st += !s->ready;
                        }
                }
        if (pooled)
                *pooled = p;
        if (ready)
                *ready = r;
        if (starting)
                *starting = st;
        return n;
}

static uint64_t committed(const daemon_state *d)
{
        uint64_t m = 0;
        for (const sandbox *s = d->sandboxes; s; s = s->next)
                m += s->mem_commit;
        return m;
}

/* A pooled sandbox another request may have the room of: one of another template. */
static sandbox *evictable(daemon_state *d, int tpl)
{
        for (sandbox *s = d->sandboxes; s; s = s->next)
                if (s->pooled && s->tpl != tpl)
                        return s;
        return NULL;
}

/* Room for one more sandbox of template tpl holding mem for uid (NO_OWNER: for a pool, which
 * takes no room from others)?  0, or -EAGAIN with why. */
static int capacity_check(daemon_state *d, uid_t uid, int tpl, uint64_t mem, strbuf *why)
{
        const nsbox_dconfig *cf = d->conf;
        if (uid != NO_OWNER && max_per_uid(d, uid) && owned_by(d, uid) >= max_per_uid(d, uid)) {
                sb_appendf(why, "uid %u holds %u sandboxes, max_per_uid is %u", (unsigned)uid, owned_by(d, uid), max_per_uid(d, uid));
                return -EAGAIN;
        }
        if (tpl >= 0 && of_template(d, tpl, NULL, NULL, NULL) >= cf->templates[tpl].max) {
                sb_appendf(why, "template '%s' has %u sandboxes, its max is %u", cf->templates[tpl].name,
                           of_template(d, tpl, NULL, NULL, NULL), cf->templates[tpl].max);
                return -EAGAIN;
        }
        /* pooled sandboxes of other templates make room for a client's, if they can make enough */
        unsigned n_evictable = 0;
        uint64_t mem_evictable = 0;
        for (sandbox *s = d->sandboxes; s && uid != NO_OWNER; s = s->next)
                if (s->pooled && s->tpl != tpl) {
                        n_evictable++;
                        mem_evictable += s->mem_commit;
                }
        uint64_t com = committed(d);
        bool full = d->n_sandboxes >= cf->max_sandboxes || d->n_sandboxes >= MAX_SANDBOXES;
        bool over = cf->memory_budget && com + mem > cf->memory_budget;
        if ((full && n_evictable == 0) || (over && com - mem_evictable + mem > cf->memory_budget)) {
                if (full)
                        sb_appendf(why, "%u sandboxes, max_sandboxes is %u", d->n_sandboxes, cf->max_sandboxes);
                else
                        sb_appendf(why, "%" PRIu64 " bytes of memory limits committed, %" PRIu64 " more would pass memory_budget %" PRIu64, com, mem,
                                   cf->memory_budget);
                return -EAGAIN;
        }
        while ((d->n_sandboxes >= cf->max_sandboxes || d->n_sandboxes >= MAX_SANDBOXES) ||
               (cf->memory_budget && committed(d) + mem > cf->memory_budget)) {
                sandbox *victim = evictable(d, tpl);
                if (!victim)
                        break; /* cannot happen: counted above */
                sandbox_remove(d, victim, "capacity", "was taken out of its pool to make room");
        }
        return 0;
}

static void record_latency(daemon_state *d, uint64_t start_ns)
{
        uint64_t us = (now_ns() - start_ns) / 1000;
        d->lat_us[d->lat_total++ % LAT_RING] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
        if (d->lat_n < LAT_RING)
                d->lat_n++;
}

/* The state file of a live sandbox (restart safety: what a next nsboxd must clean up). */
static void state_write(daemon_state *d, const sandbox *s)
{
        if (d->state_dirfd < 0 || s->sb.pid <= 0)
                return;
        json_t *o = json_pack("{ss si sI si ss}", "id", s->id, "pid", (int)s->sb.pid, "start", (json_int_t)nsbox_pid_start_time(s->sb.pid),
                              "nsboxd", (int)getpid(), "cgroup", s->sb.cg.dirfd >= 0 ? s->sb.cg.path : "");
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        char tmp[64], name[48];
        snprintf(tmp, sizeof(tmp), ".%s.tmp", s->id);
        snprintf(name, sizeof(name), "%s.json", s->id);
        if (!text || write_file_at(d->state_dirfd, tmp, text, 0600) < 0 || renameat(d->state_dirfd, tmp, d->state_dirfd, name) < 0) {
                dlog(LOG_ERR, "state.write_failed", s->id, "sandbox %s: cannot write its state file: %s", s->id, strerror(errno ? errno : ENOMEM));
                unlinkat(d->state_dirfd, tmp, 0);
        }
        free(text);
}

static void state_remove(daemon_state *d, const sandbox *s)
{
        char name[48];
        snprintf(name, sizeof(name), "%s.json", s->id);
        if (d->state_dirfd >= 0)
                unlinkat(d->state_dirfd, name, 0);
}

static void set_lifetimes(daemon_state *d, sandbox *s, const create_req *rq)
{
        uint64_t now = now_ns();
        uint64_t t = rq->has_timeout ? rq->timeout_ms : s->limits.timeout_ms ? s->limits.timeout_ms : d->conf->timeout_ms;
        s->expires_ns = t ? now + t * 1000000 : 0;
        s->idle_ms = rq->has_idle ? rq->idle_ms : d->conf->idle_timeout_ms;
        s->expiry_pause = rq->expiry < 0 ? d->conf->expiry_pause : rq->expiry == 1;
        s->last_active_ns = now;
        json_decref(s->labels);
        s->labels = rq->labels ? json_deep_copy(rq->labels) : json_object();
}

static void reply_sandbox(daemon_state *d, client *c, json_t *id, sandbox *s, bool pooled, int created, uint64_t start_ns)
{
        json_t *o = sandbox_json(d, s);
        json_object_set_new(o, "pooled", json_boolean(pooled));
        if (created >= 0)
                json_object_set_new(o, "created", json_boolean(created));
        if (start_ns)
                record_latency(d, start_ns);
        reply_result(c, id, o);
}

/* A sandbox of the client's with every label of want, the oldest; starting ones included. */
static sandbox *find_labelled(daemon_state *d, uid_t uid, json_t *want)
{
        sandbox *found = NULL;
        for (sandbox *s = d->sandboxes; s; s = s->next) {
                if (s->pooled || s->owner != uid)
                        continue;
                bool all = true;
                const char *k;
                json_t *v;
                json_object_foreach(want, k, v) {
                        json_t *have = json_object_get(s->labels, k);
                        if (!have || !json_equal(have, v))
                                all = false;
                }
                if (all && (!found || s->serial < found->serial))
                        found = s;
        }
        return found;
}

static void pool_fill(daemon_state *d);

/* look at the pools again at `at` at the latest */
static void pool_later(daemon_state *d, uint64_t at)
{
        if (!d->pool_retry_ns || at < d->pool_retry_ns)
                d->pool_retry_ns = at;
}

static unsigned n_waiting(const daemon_state *d)
{
        unsigned n = 0;
        for (const waiting *w = d->waitq; w; w = w->next)
                n++;
        return n;
}

/* create and get_or_create.  Returns 1 when it must wait for capacity (nothing was replied; the
 * caller queues it until *deadline_ns, from 'wait' on the first try), else 0 (replied). */
static int admit(daemon_state *d, client *c, json_t *id, json_t *params, bool goc, uint64_t start_ns, uint64_t *deadline_ns)
{
        if (d->stopping) {
                reply_error(c, id, RPC_SERVER_ERROR, "unavailable", "nsboxd is stopping");
                return 0;
        }
        strbuf why;
        sb_init(&why, 1024);
        create_req rq;
        int r = parse_req(d, params, &rq, &why);
        if (r == 0 && goc && (!rq.labels || json_object_size(json_object_get(params, "labels")) == 0)) {
                sb_appendf(&why, "'labels' must name the sandbox to get or create (e.g. {\"thread_id\": \"...\"})");
                r = -EINVAL;
        }
        if (r < 0) {
                reply_error(c, id, r == -ENOENT ? RPC_SERVER_ERROR : RPC_INVALID_PARAMS, r == -ENOENT ? "not_found" : "invalid_argument",
                            "%s: %s", goc ? "get_or_create" : "create", why.buf ? why.buf : "out of memory");
                goto out;
        }
        if (goc) {
                sandbox *s = find_labelled(d, c->uid, json_object_get(params, "labels"));
                if (s && s->ready) {
                        s->last_active_ns = now_ns();
                        reply_sandbox(d, c, id, s, false, 0, start_ns);
                        goto out;
                }
                if (s && json_array_size(s->waiters) >= MAX_CALLS_PER_SANDBOX) {
                        reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is starting with %d get_or_create calls waiting for it", s->id,
                                    MAX_CALLS_PER_SANDBOX);
                        goto out;
                }
                if (s) { /* starting: answered with it when it is ready */
                        json_t *w = json_pack("[IOI]", (json_int_t)c->serial, id ? id : json_null(), (json_int_t)start_ns);
                        if (!s->waiters)
                                s->waiters = json_array();
                        json_array_append_new(s->waiters, w);
                        goto out;
                }
        }
        /* a pooled one, at once */
        if (rq.tpl >= 0) {
                sandbox *p = NULL;
                for (sandbox *s = d->sandboxes; s; s = s->next)
                        if (s->pooled && s->tpl == rq.tpl && s->ready && (!p || s->serial < p->serial))
                                p = s;
                if (p) {
                        if ((max_per_uid(d, c->uid) && owned_by(d, c->uid) >= max_per_uid(d, c->uid)) || disk_room(d, c->uid, disk_of(p), &why) < 0) {
                                if (!why.len)
                                        capacity_check(d, c->uid, rq.tpl, 0, &why);
                        } else {
                                p->pooled = false;
                                p->owner = c->uid;
                                p->created = time(NULL);
                                set_lifetimes(d, p, &rq);
                                p->bound_client = rq.close_with_client ? c->serial : 0;
                                d->tpl[rq.tpl].hits++;
                                p->fresh = true;
                                pool_later(d, now_ns() + POOL_REFILL_DELAY_NS);
                                dlog(LOG_INFO, "pool.handover", p->id, "sandbox %s handed over from the pool of template '%s' to uid %u", p->id, d->conf->templates[rq.tpl].name,
                                      (unsigned)c->uid);
                                reply_sandbox(d, c, id, p, true, goc ? 1 : -1, start_ns);
                                goto out; /* refilled by the loop, once the reply is out */
                        }
                }
        }
        sandbox *s = NULL;
        nsbox_error err = { 0 };
        if (why.len == 0) {
                /* a template's paths are the operator's: only the client's own are checked */
                r = sandbox_prepare(d, rq.tpl >= 0 ? NULL : c, rq.tpl >= 0 ? d->conf->templates[rq.tpl].create : params, &s, &err);
                if (r < 0) {
                        reply_error(c, id, r == -ENOENT ? RPC_SERVER_ERROR : RPC_INVALID_PARAMS, r == -ENOENT ? "not_found" : "invalid_argument", "%s",
                                    err.msg ? err.msg : "invalid options");
                        nsbox_error_clear(&err);
                        goto out;
                }
                s->tpl = rq.tpl;
                if (disk_room(d, c->uid, disk_of(s), &why) == 0)
                        capacity_check(d, c->uid, rq.tpl, s->mem_commit, &why);
        }
        if (why.len) {
                if (s)
                        sandbox_free(s);
                bool queued = *deadline_ns != 0;
                if (!queued && rq.wait_ms)
                        *deadline_ns = start_ns + rq.wait_ms * 1000000;
                if (!d->stopping && (queued || n_waiting(d) < MAX_WAITING) && now_ns() < *deadline_ns) {
                        sb_release(&why);
                        create_req_release(&rq);
                        return 1;
                }
                reply_error(c, id, RPC_SERVER_ERROR, RPC_CAPACITY, "%s", why.buf);
                goto out;
        }
        if (rq.tpl >= 0)
                d->tpl[rq.tpl].misses++;
        s->owner = c->uid;
        s->goc = goc;
        s->req_start_ns = start_ns;
        set_lifetimes(d, s, &rq);
        s->bound_client = rq.close_with_client ? c->serial : 0;
        sandbox_start(d, s, c, id);
out:
        sb_release(&why);
        create_req_release(&rq);
        return 0;
}

static void method_create(daemon_state *d, client *c, json_t *id, json_t *params, bool goc)
{
        uint64_t now = now_ns(), deadline = 0;
        if (admit(d, c, id, params, goc, now, &deadline) == 0)
                return;
        waiting *w = calloc(1, sizeof(*w)), **tail = &d->waitq;
        if (!w) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "create: out of memory");
                return;
        }
        *w = (waiting){ .client = c->serial, .deadline_ns = deadline, .start_ns = now, .rpc_id = json_incref(id ? id : json_null()),
                        .params = json_deep_copy(params), .goc = goc };
        while (*tail)
                tail = &(*tail)->next;
        *tail = w;
}

/* Creates waiting for capacity, in the order they came: tried again when room was freed, and
 * answered 'capacity' at their deadline. */
static void serve_waiting(daemon_state *d)
{
        for (waiting **pp = &d->waitq; *pp;) {
                waiting *w = *pp;
                client *c = client_by_serial(d, w->client);
                /* stopping: admit answers unavailable */
                if (c && admit(d, c, w->rpc_id, w->params, w->goc, w->start_ns, &w->deadline_ns) == 1) {
                        pp = &w->next;
                        continue;
                }
                *pp = w->next;
                json_decref(w->rpc_id);
                json_decref(w->params);
                free(w);
        }
}

/* Keep each template's pool full: started in the background, a few at a time, later and later
 * while a template fails to start. */
static void pool_fill(daemon_state *d)
{
        uint64_t now = now_ns();
        if (!d->pool_dirty && (!d->pool_retry_ns || now < d->pool_retry_ns))
                return;
        d->pool_dirty = false;
        d->pool_retry_ns = 0;
        for (size_t t = 0; t < d->conf->n_templates && !d->stopping; t++) {
                const nsbox_template *tp = &d->conf->templates[t];
                unsigned pooled, starting;
                of_template(d, (int)t, &pooled, NULL, &starting);
                if (pooled < tp->pool && now < d->tpl[t].retry_ns && (!d->pool_retry_ns || d->tpl[t].retry_ns < d->pool_retry_ns))
                        d->pool_retry_ns = d->tpl[t].retry_ns;
                while (pooled < tp->pool && starting < POOL_STARTING_MAX && now >= d->tpl[t].retry_ns) {
                        strbuf why;
                        sb_init(&why, 1024);
                        sandbox *s = NULL;
                        nsbox_error err = { 0 };
                        int r = sandbox_prepare(d, NULL, tp->create, &s, &err);
                        if (r == 0 && capacity_check(d, NO_OWNER, (int)t, s->mem_commit, &why) < 0) {
                                sandbox_free(s); /* no room: the pool stays short until there is */
                                sb_release(&why);
                                break;
                        }
                        sb_release(&why);
                        if (r < 0) {
                                d->tpl[t].fails++;
                                d->tpl[t].retry_ns = now + (d->tpl[t].fails >= 10 ? POOL_RETRY_MAX_NS : (100000000ull << d->tpl[t].fails));
                                if (!d->pool_retry_ns || d->tpl[t].retry_ns < d->pool_retry_ns)
                                        d->pool_retry_ns = d->tpl[t].retry_ns;
                                dlog(LOG_WARNING, "pool.start_failed", NULL, "template '%s': cannot prepare a pooled sandbox: %s", tp->name, err.msg ? err.msg : strerror(-r));
                                nsbox_error_clear(&err);
                                break;
                        }
                        s->tpl = (int)t;
                        s->pooled = true;
                        s->owner = NO_OWNER;
                        create_req none = { .tpl = (int)t, .expiry = -1 };
                        set_lifetimes(d, s, &none);
                        s->expires_ns = 0; /* lifetimes start when it is handed out */
                        if (sandbox_start(d, s, NULL, NULL) < 0)
                                break;
                        /* one start per pass: a start holds the loop for a clone (most of a
                         * millisecond, a network namespace), and clients' requests go between */
                        d->pool_dirty = true;
                        return;
                }
        }
}

/* A root nsboxd's store is root's: its snapshots are not shared with clients of other uids. */
static bool refuse_store(client *c, json_t *id, const char *method)
{
        if (c->uid == 0 || geteuid() != 0)
                return false;
        reply_error(c, id, RPC_SERVER_ERROR, "invalid_argument",
                    "%s: the snapshots of a root nsboxd are root's; a client of uid %u keeps its own with a per-user nsboxd", method, (unsigned)c->uid);
        return true;
}

/* Capture the writable layer as snapshot NAME, frozen meanwhile; the sandbox keeps running. */
static void method_snapshot(daemon_state *d, client *c, json_t *id, json_t *params)
{
        if (refuse_store(c, id, "snapshot"))
                return;
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        const char *name = json_string_value(json_object_get(params, "name"));
        nsbox_error err = { 0 };
        nsbox_store st = NSBOX_STORE_INIT;
        if (nsbox_snapshot_name_check(name, &err) < 0) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "%s", err.msg);
                nsbox_error_clear(&err);
                return;
        }
        if (!s->ready || s->job) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is %s", s->id, s->job ? "busy with a snapshot" : "still starting");
                return;
        }
        if (s->sb.stagefd < 0) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "sandbox %s has no writable layer to capture", s->id);
                return;
        }
        int r = nsbox_store_open(true, &st, &err);
        if (r == 0 && nsbox_store_has_snapshot(&st, name))
                r = nsbox_err_as(&err, EEXIST, "snapshot '%s' exists (nsbox snapshot rm %s first)", name, name);
        nsbox_store_close(&st);
        s->job_thaw = !s->paused;
        if (r == 0 && s->job_thaw && (r = nsbox_sandbox_freeze(&s->sb, true, PAUSE_TIMEOUT_MS, &err)) < 0) {
                nsbox_error e2 = { 0 }; /* never leave it half frozen */
                nsbox_sandbox_freeze(&s->sb, false, PAUSE_TIMEOUT_MS, &e2);
                nsbox_error_clear(&e2);
        }
        snprintf(s->job_name, sizeof(s->job_name), "%s", name);
        if (r == 0 && (r = job_spawn(d, s, JOB_SNAPSHOT, c, id ? id : json_null(), &err)) < 0 && s->job_thaw) {
                nsbox_error e2 = { 0 };
                nsbox_sandbox_freeze(&s->sb, false, PAUSE_TIMEOUT_MS, &e2);
                nsbox_error_clear(&e2);
        }
        if (r < 0) {
                reply_error(c, id, RPC_SERVER_ERROR, code_for(r), "%s", err.msg ? err.msg : strerror(-r));
                nsbox_error_clear(&err);
        }
}

/* Kill everything in the sandbox, drop its writable layer and start it again, with the same id,
 * on snapshot NAME or on what it was created on. */
static void method_reset(daemon_state *d, client *c, json_t *id, json_t *params)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        json_t *jn = json_object_get(params, "snapshot");
        const char *name = json_string_value(jn);
        if (name && refuse_store(c, id, "reset"))
                return;
        if (jn && !json_is_null(jn) && !name) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "reset: 'snapshot' must be a string");
                return;
        }
        if (!s->ready || s->job || s->resetting) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is %s", s->id, s->job ? "busy with a snapshot" : "still starting");
                return;
        }
        uint64_t t0 = now_ns();
        nsbox_error err = { 0 };
        nsbox_layers nl = NSBOX_LAYERS_INIT;
        int r = 0;
        if (name) {
                nsbox_store st = NSBOX_STORE_INIT;
                r = nsbox_store_open(true, &st, &err);
                if (r == 0)
                        r = nsbox_store_acquire_snapshot(&st, name, &nl, &err);
                nsbox_store_close(&st);
                if (r == 0 && nl.root && strcmp(nl.root, root_name(s->policy)))
                        r = nsbox_err_as(&err, EINVAL, "snapshot '%s' was taken on the root '%s', not this sandbox's '%s'", name, nl.root,
                                      root_name(s->policy));
        } else if (nsbox_layers_dup(&s->base_layers, &nl) < 0) {
                r = nsbox_err(&err, ENOMEM, "layers");
        }
        if (r < 0) {
                reply_error(c, id, r == -EINVAL ? RPC_INVALID_PARAMS : RPC_SERVER_ERROR, code_for(r), "%s", err.msg ? err.msg : strerror(-r));
                nsbox_error_clear(&err);
                nsbox_layers_release(&nl);
                return;
        }
        fail_calls(d, s, "conflict", "was reset");
        unwatch_sandbox(d, s);
        reap_later(nsbox_net_detach(&s->sb.net));
        nsbox_sandbox_destroy(&s->sb);
        nsbox_frame_reader_release(&s->rd);
        nsbox_queue_release(&s->out);
        s->paused = false;
        nsbox_layers_release(&s->layers);
        s->layers = nl;
        s->resetting = true;
        s->job_start_ns = t0;
        s->create_client = c->serial;
        s->create_rpc_id = json_incref(id ? id : json_null());
        snprintf(s->job_name, sizeof(s->job_name), "%s", name ? name : "");
        if ((r = sandbox_launch(d, s, &err)) < 0) {
                record_op(s, "reset", name, t0, "internal");
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "%s", err.msg ? err.msg : strerror(-r));
                json_decref(steal_pointer(&s->create_rpc_id));
                nsbox_error_clear(&err);
                sandbox_remove(d, s, "internal", "failed to restart");
                return;
        }
        dlog(LOG_INFO, "sandbox.reset", s->id, "sandbox %s reset to %s%s%s", s->id, name ? "snapshot '" : "its creation state", name ? name : "", name ? "'" : "");
}

static void method_snapshots(daemon_state *d, client *c, json_t *id, json_t *params, bool delete)
{
        (void)d;
        if (refuse_store(c, id, delete ? "snapshot_delete" : "snapshot_list"))
                return;
        nsbox_error err = { 0 };
        nsbox_store st = NSBOX_STORE_INIT;
        json_t *list = NULL;
        const char *name = json_string_value(json_object_get(params, "name"));
        int r = nsbox_store_open(true, &st, &err);
        if (r == 0)
                r = delete ? nsbox_store_delete_snapshot(&st, name, &err) : nsbox_store_list(&st, &list, &err);
        nsbox_store_close(&st);
        if (r < 0) {
                reply_error(c, id, RPC_SERVER_ERROR, code_for(r), "%s", err.msg ? err.msg : strerror(-r));
                nsbox_error_clear(&err);
                return;
        }
        reply_result(c, id, delete ? json_pack("{ss}", "deleted", name) : json_pack("{so}", "snapshots", list));
}

static const char *state_name(const sandbox *s)
{
        return !s->ready ? "starting" : s->job == JOB_SNAPSHOT ? "snapshotting" : s->paused ? "paused" : "running";
}

/* Every visible sandbox, or those with all the labels given and in the state given. */
static void method_list(daemon_state *d, client *c, json_t *id, json_t *params)
{
        json_t *labels = json_object_get(params, "labels"), *state = json_object_get(params, "state");
        strbuf why;
        sb_init(&why, 1024);
        const char *st = json_string_value(state);
        if (labels && !json_is_null(labels) && check_labels(labels, &why) < 0) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "list: %s", why.buf ? why.buf : "bad labels");
                sb_release(&why);
                return;
        }
        sb_release(&why);
        if (state && !json_is_null(state) &&
            (!st || (strcmp(st, "starting") && strcmp(st, "running") && strcmp(st, "paused") && strcmp(st, "snapshotting")))) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "list: 'state' must be starting, running, paused or snapshotting");
                return;
        }
        json_t *arr = json_array();
        for (sandbox *s = d->sandboxes; s; s = s->next) {
                if (!visible(c, s) || (st && strcmp(st, state_name(s))))
                        continue;
                bool all = true;
                const char *k;
                json_t *v;
                json_object_foreach(json_is_object(labels) ? labels : NULL, k, v)
                        if (!json_equal(json_object_get(s->labels, k), v))
                                all = false;
                if (all)
                        json_array_append_new(arr, sandbox_json(d, s));
        }
        reply_result(c, id, json_pack("{so}", "sandboxes", arr));
}

/* E2B's setTimeout: the sandbox now lives `timeout` seconds more (0: no limit); idle_timeout too. */
static void method_set_timeout(daemon_state *d, client *c, json_t *id, json_t *params)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        strbuf why;
        sb_init(&why, 256);
        bool has_t = false, has_i = false;
        uint64_t t = 0, i = 0;
        if (seconds_param(params, "timeout", 1e8, &has_t, &t, &why) < 0 || seconds_param(params, "idle_timeout", 1e8, &has_i, &i, &why) < 0 ||
            (!has_t && !has_i && sb_appendf(&why, "give 'timeout' or 'idle_timeout' (seconds from now; 0: none)") >= 0)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "set_timeout: %s", why.buf ? why.buf : "bad params");
                sb_release(&why);
                return;
        }
        sb_release(&why);
        uint64_t now = now_ns();
        if (has_t)
                s->expires_ns = t ? now + t * 1000000 : 0;
        if (has_i) {
                s->idle_ms = i;
                s->last_active_ns = now;
        }
        dlog(LOG_INFO, "sandbox.timeout_set", s->id, "sandbox %s: timeout %s%.3f s, idle timeout %.3f s", s->id, s->expires_ns ? "in " : "none, was ",
              s->expires_ns ? (double)(s->expires_ns - now) / 1e9 : 0.0, (double)s->idle_ms / 1000.0);
        reply_result(c, id, sandbox_json(d, s));
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

static void method_stats(daemon_state *d, client *c, json_t *id)
{
        unsigned total = 0, starting = 0, running = 0, paused = 0, pooled = 0;
        uint64_t mem_now = 0;
        for (sandbox *s = d->sandboxes; s; s = s->next) {
                nsbox_cgroup_stats cs;
                if (s->pooled) {
                        pooled++;
                } else if (visible(c, s)) {
                        total++;
                        starting += !s->ready;
                        paused += s->ready && s->paused;
                        running += s->ready && !s->paused;
                } else {
                        continue;
                }
                if (nsbox_cgroup_stats_read(&s->sb.cg, &cs) == 0 && cs.has_memory)
                        mem_now += cs.memory_current;
        }
        json_t *tpls = json_object();
        for (size_t t = 0; t < d->conf->n_templates; t++) {
                unsigned pl, rd, st, live = of_template(d, (int)t, &pl, &rd, &st);
                json_object_set_new(tpls, d->conf->templates[t].name,
                                    json_pack("{si si si si sI sI}", "pool", (int)d->conf->templates[t].pool, "ready", (int)rd, "starting", (int)st,
                                              "live", (int)live, "hits", (json_int_t)d->tpl[t].hits, "misses", (json_int_t)d->tpl[t].misses));
        }
        json_t *lat = json_pack("{sI}", "count", (json_int_t)d->lat_total);
        if (d->lat_n) {
                uint32_t *v = malloc(d->lat_n * sizeof(*v));
                if (v) {
                        memcpy(v, d->lat_us, d->lat_n * sizeof(*v));
                        qsort(v, d->lat_n, sizeof(*v), cmp_u32);
                        static const struct { const char *name; double q; } qs[] = { { "p50", .5 }, { "p90", .9 }, { "p99", .99 }, { "max", 1 } };
                        for (size_t i = 0; i < ARRAY_SIZE(qs); i++) {
                                size_t at = (size_t)(qs[i].q * (d->lat_n - 1) + 0.5);
                                json_object_set_new(lat, qs[i].name, json_real((double)v[at] / 1000.0));
                        }
                        free(v);
                }
        }
        unsigned clients = 0;
        for (client *x = d->clients; x; x = x->next)
                clients++;
        reply_result(c, id, json_pack("{s{si si si si si} so so s{sI sI sI} s{si si} sf si sb}", "sandboxes", "total", (int)total, "starting",
                                      (int)starting, "running", (int)running, "paused", (int)paused, "pooled", (int)pooled, "templates", tpls,
                                      "acquire_ms", lat, "memory", "budget", (json_int_t)d->conf->memory_budget, "committed",
                                      (json_int_t)committed(d), "current_bytes", (json_int_t)mem_now, "capacity", "max_sandboxes",
                                      (int)d->conf->max_sandboxes, "max_per_uid", (int)d->conf->max_per_uid, "uptime_s",
                                      (double)(now_ns() - d->start_ns) / 1e9, "clients", (int)clients, "stopping", d->stopping));
}

static void method_destroy(daemon_state *d, client *c, json_t *id, json_t *params)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        char sid[33];
        memcpy(sid, s->id, sizeof(sid));
        sandbox_remove(d, s, "not_found", "was destroyed");
        reply_result(c, id, json_pack("{ss}", "destroyed", sid));
}

/* Freeze or thaw the sandbox's cgroup; the sandbox's calls are refused while it is frozen. */
static void method_pause(daemon_state *d, client *c, json_t *id, json_t *params, bool pause)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        if (!s->ready) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is still starting", s->id);
                return;
        }
        nsbox_error err = { 0 };
        if (s->paused != pause) {
                uint64_t t0 = now_ns();
                if (nsbox_cgroup_freeze(&s->sb.cg, pause, PAUSE_TIMEOUT_MS, &err) < 0) {
                        reply_error(c, id, RPC_SERVER_ERROR, err.errnum == ETIMEDOUT ? "timeout" : s->sb.cg.dirfd < 0 ? "conflict" : "internal",
                                    "cannot %s sandbox %s: %s", pause ? "pause" : "resume", s->id, err.msg ? err.msg : "");
                        nsbox_error_clear(&err);
                        return;
                }
                s->paused = pause;
                s->last_active_ns = now_ns();
                dlog(LOG_INFO, pause ? "sandbox.paused" : "sandbox.resumed", s->id, "sandbox %s %s in %.2f ms", s->id, pause ? "paused" : "resumed", (double)(now_ns() - t0) / 1e6);
        }
        reply_result(c, id, sandbox_json(d, s));
}

static void method_call(daemon_state *d, client *c, json_t *id, json_t *params)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        json_t *tool = json_object_get(params, "tool"), *tparams = json_object_get(params, "params");
        json_t *stream = json_object_get(params, "stream");
        if (!json_is_string(tool)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "call: 'tool' must be a string");
                return;
        }
        if (tparams && !json_is_null(tparams) && !json_is_object(tparams)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "call: 'params' must be an object");
                return;
        }
        if (stream && !json_is_boolean(stream)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "call: 'stream' must be a boolean");
                return;
        }
        const char *canon = tool_canonical_name(json_string_value(tool));
        if (!canon) {
                reply_error(c, id, RPC_SERVER_ERROR, "not_found", "unknown tool '%.100s' (see nsbox tools)", json_string_value(tool));
                return;
        }
        if (!s->ready) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is still starting", s->id);
                return;
        }
        if (s->paused) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is paused; resume it first (nsbox resume)", s->id);
                return;
        }
        if (s->resetting) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is being reset", s->id);
                return;
        }
        if (s->n_calls >= MAX_CALLS_PER_SANDBOX) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s has %d calls in flight", s->id, MAX_CALLS_PER_SANDBOX);
                return;
        }
        json_t *p = json_is_object(tparams) ? json_copy(tparams) : json_object();
        strbuf payload;
        sb_init(&payload, NSBOX_FRAME_MAX_PAYLOAD);
        bool b64_payload = false;
        const char *code = NULL;
        strbuf why;
        sb_init(&why, 256);
        int tr = nsbox_tool_request_to_agent(canon, p, json_is_true(stream), &payload, &b64_payload, &code, &why);
        if (tr < 0) {
                json_decref(p);
                sb_release(&payload);
                reply_error(c, id, tr == -ENOMEM ? RPC_SERVER_ERROR : RPC_INVALID_PARAMS, code, "%s", why.buf ? why.buf : "out of memory");
                sb_release(&why);
                return;
        }
        sb_release(&why);
        bool is_exec = !strcmp(canon, "exec");
        pending *pc = calloc(1, sizeof(*pc));
        json_int_t aid = ++s->next_agent_id;
        json_t *req = json_pack("{sI ss so}", "id", aid, "tool", canon, "params", p);
        int r = pc && req ? nsbox_frame_append(&s->out, req, payload.buf ? payload.buf : "", payload.buf ? payload.len : 0) : -ENOMEM;
        json_decref(req);
        sb_release(&payload);
        if (r < 0) {
                free(pc);
                reply_error(c, id, RPC_SERVER_ERROR, r == -E2BIG ? "too_large" : "internal", "call: %s",
                            r == -E2BIG ? "request larger than the protocol's maximum frame" : strerror(-r));
                return;
        }
        pc->agent_id = aid;
        pc->client = c->serial;
        if (s->record_fd >= 0) {
                pc->step = ++s->record_steps;
                pc->start_ns = now_ns();
                pc->rec_params = json_is_object(tparams) ? json_deep_copy(tparams) : json_object();
                /* a streamed exec's result differs (its output went as events): replay streams it too */
                if (is_exec)
                        json_object_set_new(pc->rec_params, "stream", json_boolean(json_is_true(stream)));
                snprintf(pc->tool, sizeof(pc->tool), "%s", canon);
        }
        pc->rpc_id = json_incref(id ? id : json_null());
        pc->stream = json_is_true(stream);
        pc->exec = is_exec;
        pc->pids_limited = is_exec ? nsbox_cgroup_pids_limited(&s->sb.cg) : 0;
        pc->b64_payload = b64_payload;
        pc->next = s->calls;
        s->calls = pc;
        s->n_calls++;
        s->last_active_ns = now_ns();
}

int nsbox_rpc_parse(const char *line, size_t len, nsbox_rpc_request *ret)
{
        *ret = (nsbox_rpc_request){ .id = NULL };
        json_error_t je;
        json_t *msg = nsbox_json_loadb(line, len, &je);
        if (!msg) {
                ret->rpc_code = RPC_PARSE_ERROR;
                snprintf(ret->why, sizeof(ret->why), "malformed JSON: %s", je.text);
                return -EINVAL;
        }
        json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method"), *params = json_object_get(msg, "params");
        if (!json_is_object(msg) || !json_is_string(method) || (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id)) ||
            strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ? json_string_value(json_object_get(msg, "jsonrpc")) : "", "2.0")) {
                ret->rpc_code = RPC_INVALID_REQUEST;
                ret->id = json_incref(json_is_string(id) || json_is_integer(id) ? id : NULL);
                snprintf(ret->why, sizeof(ret->why), "%s",
                         "not a JSON-RPC 2.0 request (expected {\"jsonrpc\": \"2.0\", \"id\": ..., \"method\": ..., \"params\": {...}})");
                json_decref(msg);
                return -EINVAL;
        }
        if (params && !json_is_object(params)) {
                ret->rpc_code = RPC_INVALID_PARAMS;
                ret->id = json_incref(id);
                snprintf(ret->why, sizeof(ret->why), "'params' must be an object");
                json_decref(msg);
                return -EINVAL;
        }
        ret->msg = msg;
        ret->id = json_incref(id);
        ret->method = json_string_value(method);
        ret->params = params ? json_incref(params) : json_object();
        if (!ret->params) {
                nsbox_rpc_request_release(ret);
                ret->rpc_code = RPC_SERVER_ERROR;
                snprintf(ret->why, sizeof(ret->why), "out of memory");
                return -ENOMEM;
        }
        return 0;
}

void nsbox_rpc_request_release(nsbox_rpc_request *rq)
{
        json_decref(rq->params);
        json_decref(rq->id);
        json_decref(rq->msg);
        rq->msg = rq->id = rq->params = NULL;
        rq->method = NULL;
}

static void handle_request(daemon_state *d, client *c, const char *line, size_t len)
{
        nsbox_rpc_request rq;
        if (nsbox_rpc_parse(line, len, &rq) < 0) {
                /* a request that is not one is answered with its id when it has a usable one */
                reply_error(c, rq.rpc_code == RPC_PARSE_ERROR ? json_null() : rq.id, rq.rpc_code, "invalid_argument", "%s", rq.why);
                json_decref(rq.id);
                return;
        }
        json_t *id = rq.id, *params = rq.params;
        const char *m = rq.method;
        if (d->stopping && strcmp(m, "ping") && strcmp(m, "list") && strcmp(m, "stats") && strcmp(m, "tools"))
                reply_error(c, id, RPC_SERVER_ERROR, "unavailable", "nsboxd is stopping: '%.100s' refused", m);
        else if (!strcmp(m, "create") || !strcmp(m, "get_or_create"))
                method_create(d, c, id, params, !strcmp(m, "get_or_create"));
        else if (!strcmp(m, "call"))
                method_call(d, c, id, params);
        else if (!strcmp(m, "list"))
                method_list(d, c, id, params);
        else if (!strcmp(m, "set_timeout"))
                method_set_timeout(d, c, id, params);
        else if (!strcmp(m, "stats"))
                method_stats(d, c, id);
        else if (!strcmp(m, "destroy"))
                method_destroy(d, c, id, params);
        else if (!strcmp(m, "pause") || !strcmp(m, "resume"))
                method_pause(d, c, id, params, !strcmp(m, "pause"));
        else if (!strcmp(m, "snapshot"))
                method_snapshot(d, c, id, params);
        else if (!strcmp(m, "reset"))
                method_reset(d, c, id, params);
        else if (!strcmp(m, "snapshot_list") || !strcmp(m, "snapshot_delete"))
                method_snapshots(d, c, id, params, !strcmp(m, "snapshot_delete"));
        else if (!strcmp(m, "ping"))
                reply_result(c, id, json_pack("{ss si si}", "version", NSBOX_VERSION, "pid", (int)getpid(), "uid", (int)geteuid()));
        else if (!strcmp(m, "tools")) {
                const char *fmt = json_string_value(json_object_get(params, "format"));
                json_t *t = tool_schemas(fmt ? fmt : "json");
                if (t)
                        reply_result(c, id, json_pack("{so}", "tools", t));
                else
                        reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "tools: 'format' must be json, openai or mcp");
        } else
                reply_error(c, id, RPC_METHOD_NOT_FOUND, "not_found", "unknown method '%.100s'", m);
        nsbox_rpc_request_release(&rq);
}

/* ---- agent frames ----------------------------------------------------------------------------- */

static void agent_frame(daemon_state *d, sandbox *s, nsbox_frame *f)
{
        json_t *jid = f->json ? json_object_get(f->json, "id") : NULL;
        if (!json_is_integer(jid)) {
                dlog(LOG_WARNING, "agent.bad_frame", s->id, "sandbox %s: agent sent a frame without an id: %s", s->id,
                      f->json ? json_string_value(json_object_get(json_object_get(f->json, "error"), "message")) ?: "" : f->json_error);
                return;
        }
        pending **pp = &s->calls, *p = NULL;
        for (; *pp; pp = &(*pp)->next)
                if ((*pp)->agent_id == json_integer_value(jid)) {
                        p = *pp;
                        break;
                }
        if (!p)
                return; /* an answer to nothing we asked: ignored */
        client *c = client_by_serial(d, p->client);
        json_t *event = json_object_get(f->json, "event");
        if (json_is_string(event)) {
                if (!c || !p->stream)
                        return;
                json_t *params = json_pack("{sO sO}", "call", p->rpc_id, "event", event);
                json_t *pid = json_object_get(f->json, "pid");
                if (params && json_is_integer(pid))
                        json_object_set(params, "pid", pid);
                if (params && f->payload_len) {
                        char *enc = malloc(b64_encoded_len(f->payload_len) + 1);
                        if (enc) {
                                b64_encode(f->payload, f->payload_len, enc);
                                json_object_set_new(params, "data_b64", json_stringn_nocheck(enc, b64_encoded_len(f->payload_len)));
                                free(enc);
                        }
                }
                send_line(c, json_pack("{ss ss so}", "jsonrpc", "2.0", "method", "event", "params", params));
                return;
        }
        *pp = p->next;
        s->n_calls--;
        s->last_active_ns = now_ns();
        if (s->fresh) { /* its first call is answered: the pool it came from refills now */
                s->fresh = false;
                d->pool_dirty = true;
        }
        json_t *result = json_object_get(f->json, "result"), *error = json_object_get(f->json, "error");
        /* a fork refused at the sandbox's pids limit while the command ran: say so */
        const char *reason = json_string_value(json_object_get(result, "reason"));
        if (p->exec && reason && strcmp(reason, "timed_out") && nsbox_cgroup_pids_limited(&s->sb.cg) > p->pids_limited)
                json_object_set_new(result, "reason", json_string("pids_limited"));
        if (json_is_object(result)) {
                if (nsbox_tool_result_from_agent(result, f, p->b64_payload) < 0) {
                        record_call(s, p, NULL, "internal");
                        reply_error(c, p->rpc_id, RPC_SERVER_ERROR, "internal", "%s: out of memory for the reply", p->tool);
                } else {
                        record_call(s, p, result, NULL);
                        reply_result(c, p->rpc_id, json_incref(result));
                }
        } else {
                const char *code = json_string_value(json_object_get(error, "code"));
                const char *msg = json_string_value(json_object_get(error, "message"));
                record_call(s, p, NULL, code ? code : "internal");
                reply_error(c, p->rpc_id, RPC_SERVER_ERROR, code ? code : "internal", "%.900s", msg ? msg : "the agent gave no result");
        }
        pending_free(p);
}

/* The agent is gone: destroyed from inside (the OOM killer takes the whole sandbox, memory.oom.group)
 * or killed.  The commands running get their result, the other calls an error. */
static void sandbox_died(daemon_state *d, sandbox *s)
{
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&s->sb.cg, &cs) < 0 || cs.oom_kills == 0) {
                sandbox_remove(d, s, "internal", "exited");
                return;
        }
        for (pending **pp = &s->calls; *pp;) {
                pending *p = *pp;
                if (!p->exec) {
                        pp = &p->next;
                        continue;
                }
                *pp = p->next;
                s->n_calls--;
                json_t *res = json_pack("{si si ss sb sb sb ss ss}", "exit_code", 128 + SIGKILL, "signal", SIGKILL, "reason", "oom_killed",
                                        "oom_killed", 1, "timed_out", 0, "truncated", 0, "stdout", "", "stderr", "");
                record_call(s, p, res, NULL);
                reply_result(client_by_serial(d, p->client), p->rpc_id, res);
                pending_free(p);
        }
        char why[128];
        snprintf(why, sizeof(why), "was killed by the OOM killer (memory limit %" PRIu64 " bytes)", s->limits.memory);
        sandbox_remove(d, s, "internal", why);
}

static void agent_readable(daemon_state *d, sandbox *s)
{
        for (int i = 0; i < 16; i++) {
                nsbox_frame f = { 0 };
                int r = nsbox_frame_read(&s->rd, s->sb.agentfd, &f);
                if (r == 0)
                        return;
                if (r == -E2BIG) {
                        dlog(LOG_WARNING, "agent.bad_frame", s->id, "sandbox %s: agent sent an oversized frame, ignored", s->id);
                        continue;
                }
                if (r < 0) {
                        sandbox_died(d, s);
                        return;
                }
                agent_frame(d, s, &f);
                nsbox_frame_release(&f);
        }
}

static void sync_readable(daemon_state *d, sandbox *s)
{
        /* read_ready closed syncfd; a child forked meanwhile (another sandbox's, a worker) may
         * still hold the socket, and epoll then reports it until that child closes it */
        if (s->sb.syncfd < 0)
                return;
        nsbox_error err = { 0 };
        int r = nsbox_sandbox_read_ready(&s->sb, &err);
        if (r == 0)
                return;
        bool reset = s->resetting;
        s->resetting = false;
        if (r < 0) {
                char msg[1024];
                snprintf(msg, sizeof(msg), "failed to start: %s", err.msg ? err.msg : "unknown error");
                nsbox_error_clear(&err);
                if (reset)
                        record_op(s, "reset", s->job_name[0] ? s->job_name : NULL, s->job_start_ns, "internal");
                json_t *rid = steal_pointer(&s->create_rpc_id);
                client *c = client_by_serial(d, s->create_client);
                reply_error(c, rid, RPC_SERVER_ERROR, "internal", "%s%s", reset ? "" : "create: ", msg + strlen("failed to start: "));
                json_decref(rid);
                sandbox_remove(d, s, "internal", msg);
                return;
        }
        /* syncfd was closed by read_ready (epoll forgets a closed fd by itself) */
        s->ready = true;
        s->last_active_ns = now_ns();
        if (s->pooled) { /* waits in its pool for a create; another may start */
                d->tpl[s->tpl].fails = 0;
                d->pool_dirty = true;
                return;
        }
        client *c = client_by_serial(d, s->create_client);
        size_t n_waiting = 0, i;
        json_t *w;
        json_array_foreach(s->waiters, i, w)
                n_waiting += client_by_serial(d, (uint64_t)json_integer_value(json_array_get(w, 0))) != NULL;
        if (reset) { /* it stays, whether or not whoever asked is still there */
                record_op(s, "reset", s->job_name[0] ? s->job_name : NULL, s->job_start_ns, NULL);
                dlog(LOG_INFO, "sandbox.restarted", s->id, "sandbox %s restarted in %.1f ms (agent pid %d)", s->id, (double)(now_ns() - s->job_start_ns) / 1e6, (int)s->sb.pid);
        } else if (!c && !n_waiting) { /* whoever asked for it is gone: nobody would ever destroy it */
                sandbox_remove(d, s, "not_found", "was abandoned by its creator");
                return;
        } else {
                dlog(LOG_INFO, "sandbox.created", s->id, "sandbox %s created for uid %u (agent pid %d)", s->id, (unsigned)s->owner, (int)s->sb.pid);
        }
        if (reset)
                reply_result(c, s->create_rpc_id, sandbox_json(d, s));
        else
                reply_sandbox(d, c, s->create_rpc_id, s, false, s->goc ? 1 : -1, s->req_start_ns);
        json_decref(s->create_rpc_id);
        s->create_rpc_id = NULL;
        json_array_foreach(s->waiters, i, w)
                reply_sandbox(d, client_by_serial(d, (uint64_t)json_integer_value(json_array_get(w, 0))), json_array_get(w, 1), s, false, 0,
                              (uint64_t)json_integer_value(json_array_get(w, 2)));
        json_decref(s->waiters);
        s->waiters = NULL;
}

/* ---- tenants: what one uid may hold of connections and request bytes (nsboxd(8), LIMITS) ------ */

static uid_use *use_of(daemon_state *d, uid_t uid)
{
        for (unsigned i = 0; i < d->n_uses; i++)
                if (d->uses[i].uid == uid)
                        return &d->uses[i];
        return NULL;
}

/* One connection more (+1) or less (-1) for c's uid; the bytes it buffered go with it. */
static void use_connection(daemon_state *d, client *c, int delta)
{
        uid_use *u = use_of(d, c->uid);
        if (!u && delta > 0 && d->n_uses < MAX_CLIENTS) {
                u = &d->uses[d->n_uses++];
                *u = (uid_use){ .uid = c->uid };
        }
        if (!u)
                return;
        if (delta > 0) {
                u->conns++;
                return;
        }
        u->buffered -= c->counted;
        c->counted = 0;
        if (--u->conns == 0)
                *u = d->uses[--d->n_uses];
}

/* The uid's count of buffered request bytes follows what c holds now. */
static void use_buffered(daemon_state *d, client *c)
{
        uid_use *u = use_of(d, c->uid);
        if (u)
                u->buffered = u->buffered - c->counted + c->in.len;
        c->counted = c->in.len;
}

/* Near its cap (three quarters), a uid's connections that say nothing are closed. */
static bool near_connection_cap(daemon_state *d, uid_t uid)
{
        const uid_use *u = use_of(d, uid);
        return u && u->conns * 4 >= d->conf->max_connections_per_uid * 3;
}

/* Is a new connection of uid one too many?  Its uid is at max_connections_per_uid, or nsboxd is
 * full; tenants never take the last CLIENTS_KEPT_FOR_OPERATOR, kept for root and nsboxd's uid. */
static bool connection_refused(daemon_state *d, uid_t uid, char *why, size_t n)
{
        const uid_use *u = use_of(d, uid);
        unsigned mine = u ? u->conns : 0, cap = d->conf->max_connections_per_uid;
        if (mine >= cap)
                snprintf(why, n, "too many connections: uid %u has %u open, max_connections_per_uid is %u", (unsigned)uid, mine, cap);
        else if (d->n_clients >= (is_operator(uid) ? MAX_CLIENTS : MAX_CLIENTS - CLIENTS_KEPT_FOR_OPERATOR))
                snprintf(why, n, "too many connections: nsboxd has %u open%s", d->n_clients,
                         is_operator(uid) ? "" : ", the rest are kept for root and nsboxd's own uid");
        else
                return false;
        return true;
}

/* What one uid can cause many of is logged once a second at most, with a count of the rest. */
static void log_limited(daemon_state *d, const char *event, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_limited(daemon_state *d, const char *event, const char *fmt, ...)
{
        uint64_t now = now_ns();
        if (d->refused_log_ns && now - d->refused_log_ns < 1000000000ull) {
                d->refused_quiet++;
                return;
        }
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (d->refused_quiet)
                dlog(LOG_WARNING, event, NULL, "%s (and %u more connections refused or closed in the last second)", msg, d->refused_quiet);
        else
                dlog(LOG_WARNING, event, NULL, "%s", msg);
        d->refused_log_ns = now;
        d->refused_quiet = 0;
}

/* A refused connection is told why in one JSON-RPC error line (its socket buffer is empty: the
 * line fits), then closed. */
static void refuse_connection(daemon_state *d, int fd, uid_t uid, const char *why)
{
        json_t *msg = json_pack("{ss sn s{si ss s{ss}}}", "jsonrpc", "2.0", "id", "error", "code", RPC_SERVER_ERROR, "message", why, "data",
                                "code", RPC_CAPACITY);
        size_t len = 0;
        char *text = msg ? nsbox_json_dumps(msg, &len) : NULL;
        json_decref(msg);
        if (text) {
                text[len] = '\n'; /* in place of the terminating NUL */
                (void)!send(fd, text, len + 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        free(text);
        log_limited(d, "client.too_many", "refused a connection of uid %u: %s", (unsigned)uid, why);
}

/* Connections holding an unfinished request line longer than request_timeout, and new ones that
 * said nothing within handshake_timeout while their uid is near its cap, are closed (after an
 * error line).  Others may stay idle as long as they like: they hold sandboxes and streams.
 * Returns when to look again (0: no need). */
static uint64_t client_deadlines(daemon_state *d, uint64_t now)
{
        const nsbox_dconfig *cf = d->conf;
        uint64_t next = 0;
        for (client *c = d->clients; c; c = c->next) {
                uint64_t at = 0;
                if (c->eof)
                        continue;
                if (c->partial_since_ns && cf->request_timeout_ms) {
                        at = c->partial_since_ns + cf->request_timeout_ms * 1000000;
                        if (now >= at) {
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "timeout",
                                            "request line not finished within %.3g s (request_timeout): closing the connection",
                                            (double)cf->request_timeout_ms / 1000.0);
                                log_limited(d, "client.timeout", "closed a connection of uid %u: a request line not finished within %.3g s",
                                            (unsigned)c->uid, (double)cf->request_timeout_ms / 1000.0);
                                c->eof = true;
                        }
                } else if (!c->spoke && cf->handshake_timeout_ms && near_connection_cap(d, c->uid)) {
                        at = c->accepted_ns + cf->handshake_timeout_ms * 1000000;
                        if (now >= at) {
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "timeout",
                                            "nothing sent within %.3g s (handshake_timeout) while uid %u is near max_connections_per_uid: closing the connection",
                                            (double)cf->handshake_timeout_ms / 1000.0, (unsigned)c->uid);
                                log_limited(d, "client.timeout", "closed a connection of uid %u: nothing sent within %.3g s near max_connections_per_uid",
                                            (unsigned)c->uid, (double)cf->handshake_timeout_ms / 1000.0);
                                c->eof = true;
                        }
                }
                if (c->eof)
                        at = now; /* removed once its error line is out, at the end of this round */
                if (at && (!next || at < next))
                        next = at;
        }
        return next;
}

/* ---- clients -------------------------------------------------------------------------------- */

static void client_remove(daemon_state *d, client *c)
{
        for (client **pp = &d->clients; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        d->n_clients--;
        use_connection(d, c, -1);
        /* its calls in flight: answers are dropped; commands it was waiting for are stopped */
        for (sandbox *s = d->sandboxes; s; s = s->next)
                for (pending *p = s->calls; p; p = p->next) {
                        if (p->client != c->serial)
                                continue;
                        p->client = 0;
                        if (p->exec) {
                                json_t *req = json_pack("{sI ss s{sI}}", "id", ++s->next_agent_id, "tool", "cancel", "params", "id",
                                                        p->agent_id);
                                if (req)
                                        nsbox_frame_append(&s->out, req, NULL, 0);
                                json_decref(req);
                        }
                }
        /* sandboxes created with close_with_client go with their client: a session (nsbox mcp,
         * a library user) killed with SIGKILL leaves nothing behind */
        for (sandbox *s = d->sandboxes, *next; s; s = next) {
                next = s->next;
                if (s->bound_client == c->serial)
                        sandbox_remove(d, s, "not_found", "was destroyed: the client it was created with (close_with_client) disconnected");
        }
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        sb_release(&c->in);
        nsbox_queue_release(&c->out);
        free(c);
}

static void client_readable(daemon_state *d, client *c)
{
        char buf[65536];
        for (int round = 0; round < 64 && c->out.len < CLIENT_HIGH; round++) {
                ssize_t n = read(c->fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        c->eof = true;
                        return;
                }
                c->spoke = true;
                size_t at = 0;
                while (at < (size_t)n) {
                        char *nl = memchr(buf + at, '\n', (size_t)n - at);
                        size_t piece = nl ? (size_t)(nl - (buf + at)) : (size_t)n - at;
                        const uid_use *u = use_of(d, c->uid);
                        if (!c->discarding && u && u->buffered + piece > d->conf->max_request_bytes_per_uid) {
                                /* the uid's unfinished lines together: bounded, whatever the number of connections */
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "too_large",
                                            "requests of uid %u buffered in nsboxd would pass max_request_bytes_per_uid (%zu bytes): closing the connection",
                                            (unsigned)c->uid, (size_t)d->conf->max_request_bytes_per_uid);
                                log_limited(d, "client.too_large", "closed a connection of uid %u: its requests buffered would pass max_request_bytes_per_uid",
                                            (unsigned)c->uid);
                                sb_release(&c->in);
                                use_buffered(d, c);
                                c->partial_since_ns = 0;
                                c->eof = true;
                                return;
                        }
                        if (!c->discarding && sb_append(&c->in, buf + at, piece) < 0) {
                                c->discarding = true;
                                sb_release(&c->in);
                        }
                        use_buffered(d, c);
                        at += piece + (nl ? 1 : 0);
                        if (!nl)
                                break;
                        c->partial_since_ns = 0;
                        if (c->discarding) {
                                reply_error(c, json_null(), RPC_INVALID_REQUEST, "too_large", "request larger than %u bytes", MAX_LINE);
                                c->discarding = false;
                        } else if (c->in.len > 0) {
                                handle_request(d, c, c->in.buf, c->in.len);
                        }
                        c->in.len = 0;
                        if (c->in.alloc > (1u << 20)) { /* do not keep a large request's buffer */
                                sb_release(&c->in);
                                sb_init(&c->in, MAX_LINE);
                        }
                        use_buffered(d, c);
                }
                if ((c->in.len || c->discarding) && !c->partial_since_ns)
                        c->partial_since_ns = now_ns();
        }
}

/* nsboxd's own uid, root, and the configuration's clients (by uid, or by any of their groups) */
static bool client_allowed(const daemon_state *d, int fd, const struct ucred *cred)
{
        const nsbox_dconfig *cf = d->conf;
        if (cred->uid == geteuid() || cred->uid == 0)
                return true;
        for (size_t i = 0; i < cf->n_client_uids; i++)
                if (cf->client_uids[i] == cred->uid)
                        return true;
        if (!cf->n_client_gids)
                return false;
        gid_t groups[NGROUPS_MAX_PEER];
        socklen_t len = sizeof(groups);
        int n = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0 ? (int)(len / sizeof(gid_t)) : 0;
        for (size_t i = 0; i < cf->n_client_gids; i++) {
                if (cf->client_gids[i] == cred->gid)
                        return true;
                for (int j = 0; j < n; j++)
                        if (groups[j] == cf->client_gids[i])
                                return true;
        }
        return false;
}

static void accept_clients(daemon_state *d)
{
        for (;;) {
                int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                struct ucred cred;
                socklen_t len = sizeof(cred);
                client *c = NULL;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
                    !(c = calloc(1, sizeof(*c)))) {
                        close(fd);
                        continue;
                }
                /* a sandbox reaches the socket through a bind that shows its directory, as a uid
                 * that maps to its owner's: only processes of our own namespaces are clients */
                char why[160];
                if (nsbox_peer_check(fd, why, sizeof(why)) < 0) {
                        dlog(LOG_WARNING, "client.refused", NULL, "refused a client of uid %u pid %d: %s", (unsigned)cred.uid, (int)cred.pid, why);
                        static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":\""
                                NSBOX_PEER_REFUSED_MSG "\",\"data\":{\"code\":\"permission_denied\"}}}\n";
                        (void)!send(fd, line, sizeof(line) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                        close(fd);
                        free(c);
                        continue;
                }
                /* the socket is 0600 (0666 with clients configured), the directory or a bind could be
                 * shared: check each connection */
                if (!client_allowed(d, fd, &cred)) {
                        dlog(LOG_WARNING, "client.refused", NULL, "refused a client of uid %u", (unsigned)cred.uid);
                        close(fd);
                        free(c);
                        continue;
                }
                if (connection_refused(d, cred.uid, why, sizeof(why))) {
                        refuse_connection(d, fd, cred.uid, why);
                        close(fd);
                        free(c);
                        continue;
                }
                c->fd = fd;
                c->uid = cred.uid;
                c->gid = cred.gid;
                c->serial = ++d->next_serial;
                sb_init(&c->in, MAX_LINE);
                if (nsbox_epoll_add(d->epfd, fd, KEY(c->serial, K_CLIENT), &c->events, EPOLLIN) < 0) {
                        close(fd);
                        sb_release(&c->in);
                        free(c);
                        continue;
                }
                c->next = d->clients;
                d->clients = c;
                d->n_clients++;
                c->accepted_ns = now_ns();
                use_connection(d, c, +1);
        }
}

/* ---- the loop -------------------------------------------------------------------------------- */

static void send_pause(sandbox *s, pending *p, bool pause)
{
        json_t *req = json_pack("{sI ss s{sI sb}}", "id", ++s->next_agent_id, "tool", "pause", "params", "id", p->agent_id, "pause", pause);
        if (req && nsbox_frame_append(&s->out, req, NULL, 0) == 0)
                p->paused = pause;
        json_decref(req);
}

static void update_interest(daemon_state *d)
{
        for (client *c = d->clients; c; c = c->next) {
                if (c->out.len > CLIENT_HARD && !c->eof) {
                        dlog(LOG_WARNING, "client.dropped", NULL, "disconnecting a client of uid %u: %zu bytes of replies unread", (unsigned)c->uid, c->out.len);
                        c->eof = true;
                }
                if (c->out.len >= CLIENT_HIGH && c->partial_since_ns) /* not read meanwhile: its time does not run */
                        c->partial_since_ns = now_ns();
                nsbox_epoll_set(d->epfd, c->fd, KEY(c->serial, K_CLIENT), &c->events,
                       (c->out.len < CLIENT_HIGH ? EPOLLIN : 0) | (c->out.len ? EPOLLOUT : 0));
        }
        for (sandbox *s = d->sandboxes; s; s = s->next) {
                for (pending *p = s->calls; p; p = p->next) {
                        if (!p->stream)
                                continue;
                        client *c = client_by_serial(d, p->client);
                        size_t q = c ? c->out.len : 0;
                        if (!p->paused && q >= CLIENT_HIGH)
                                send_pause(s, p, true);
                        else if (p->paused && q < CLIENT_HIGH / 2)
                                send_pause(s, p, false);
                }
                nsbox_epoll_set(d->epfd, s->sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events, (s->ready ? EPOLLIN : 0) | (s->out.len ? EPOLLOUT : 0));
        }
}

/* A timeout or an idle timeout came: destroy, or pause (freeze) and keep it. */
static void expire(daemon_state *d, sandbox *s, const char *what)
{
        if (s->expiry_pause) {
                nsbox_error err = { 0 };
                if (nsbox_cgroup_freeze(&s->sb.cg, true, PAUSE_TIMEOUT_MS, &err) == 0) {
                        s->paused = true;
                        s->expires_ns = 0;
                        dlog(LOG_INFO, "sandbox.expired", s->id, "sandbox %s expired (%s): paused", s->id, what);
                        return;
                }
                dlog(LOG_WARNING, "sandbox.expired", s->id, "sandbox %s expired (%s): cannot pause it (%s), destroyed instead", s->id, what, err.msg ? err.msg : "no cgroup");
                nsbox_error_clear(&err);
        } else {
                dlog(LOG_INFO, "sandbox.expired", s->id, "sandbox %s expired (%s): destroyed", s->id, what);
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
                uint64_t idle_at = s->idle_ms && !s->paused && s->n_calls == 0 && !s->job && !s->resetting
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

int nsbox_daemon_check_config(const nsbox_dconfig *conf, nsbox_error *err)
{
        daemon_state d = { .conf = conf };
        if (geteuid() != 0 && (conf->n_client_uids || conf->n_client_gids))
                return nsbox_err(err, 0, "%s: key 'clients': only a root nsboxd serves other users (one of yours would let them act as you)",
                                 conf->source ? conf->source : "configuration");
        for (size_t t = 0; t < conf->n_templates; t++) {
                const nsbox_template *tp = &conf->templates[t];
                strbuf why;
                sb_init(&why, 1024);
                create_req rq = { .tpl = -1, .expiry = -1 };
                int r = 0;
                if (json_object_get(tp->create, "template") || json_object_get(tp->create, "wait") || json_object_get(tp->create, "record"))
                        r = nsbox_err(err, 0, "%s: template '%s': 'template', 'wait' and 'record' have no place in a template's create",
                                      conf->source ? conf->source : "configuration", tp->name);
                else if (lifecycle_params(tp->create, &rq, &why) < 0)
                        r = nsbox_err(err, 0, "%s: template '%s': %s", conf->source ? conf->source : "configuration", tp->name,
                                      why.buf ? why.buf : "out of memory");
                create_req_release(&rq);
                sb_release(&why);
                sandbox *s = NULL;
                nsbox_error e = { 0 };
                if (r == 0 && (r = sandbox_prepare(&d, NULL, tp->create, &s, &e)) < 0)
                        nsbox_err(err, 0, "%s: template '%s': %s", conf->source ? conf->source : "configuration", tp->name,
                                  e.msg ? e.msg : strerror(-r));
                nsbox_error_clear(&e);
                if (s)
                        sandbox_free(s);
                if (r < 0)
                        return r;
        }
        return 0;
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
                if (s->n_calls || s->create_rpc_id || s->job || s->waiters)
                        return false;
        for (const client *c = d->clients; c; c = c->next)
                if (c->out.len)
                        return false;
        return true;
}

/* <socket>.state: made 0700 if missing; must be a directory of ours, not a link. */
static int state_dir_open(const char *sock, nsbox_error *err)
{
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s.state", sock) >= sizeof(path))
                return nsbox_err(err, ENAMETOOLONG, "state directory");
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "create state directory '%s'", path);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "open state directory '%s'", path);
        if (st.st_uid != geteuid() || (st.st_mode & 0077)) {
                close(fd);
                return nsbox_err(err, EPERM, "state directory '%s' is not ours alone (owner %u, mode %03o)", path, (unsigned)st.st_uid,
                                 (unsigned)(st.st_mode & 0777));
        }
        return fd;
}

/* Sandboxes a killed nsboxd left (or a keeper that nobody reached): they died with it (their
 * init has PDEATHSIG, or sees its channel close), but make sure, then take their cgroups and
 * state files.  Adopted ones are d's now.  Returns how many. */
static unsigned state_cleanup(const daemon_state *d)
{
        int dirfd = d->state_dirfd;
        int fd = dup(dirfd);
        DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
        if (!dir) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        unsigned n = 0;
        struct dirent *e;
        while ((e = readdir(dir))) {
                size_t len = strlen(e->d_name);
                if (e->d_name[0] == '.' && len > 4 && !strcmp(e->d_name + len - 4, ".tmp")) {
                        unlinkat(dirfd, e->d_name, 0);
                        continue;
                }
                if (len != 32 + 5 || strcmp(e->d_name + 32, ".json"))
                        continue;
                bool adopted = false;
                for (const sandbox *s = d->sandboxes; s && !adopted; s = s->next)
                        adopted = !strncmp(s->id, e->d_name, 32);
                if (adopted)
                        continue;
                _cleanup_free_ char *text = NULL;
                size_t tlen = 0;
                json_t *o = NULL;
                json_error_t je;
                if (read_file_at(dirfd, e->d_name, O_NOFOLLOW, 65536, &text, &tlen) == 0)
                        o = json_loadb(text, tlen, 0, &je);
                pid_t pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
                unsigned long long start = (unsigned long long)json_integer_value(json_object_get(o, "start"));
                int killed = 0;
                if (pid > 0 && start && nsbox_pid_start_time(pid) == start) {
                        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
                        if (pfd >= 0 && nsbox_pid_start_time(pid) == start && syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
                                struct pollfd p = { .fd = pfd, .events = POLLIN };
                                killed = poll(&p, 1, 5000) == 1 ? 1 : -1;
                        }
                        if (pfd >= 0)
                                close(pfd);
                }
                dlog(LOG_NOTICE, "sandbox.cleaned_up", NULL, "cleaned up sandbox %.32s left by nsboxd %d%s", e->d_name, (int)json_integer_value(json_object_get(o, "nsboxd")),
                      killed > 0 ? " (its agent was still alive: killed)" : killed < 0 ? " (its agent would not die)" : "");
                json_decref(o);
                unlinkat(dirfd, e->d_name, 0);
                n++;
        }
        closedir(dir);
        nsbox_cgroup_collect_orphans(); /* their cgroups: named after the dead nsboxd */
        return n;
}


/* ---- on_stop "keep": the hand-over to the next nsboxd (keeper.h; nsboxd(8), RESTARTS) -------- */

/* Kept: a client's sandbox that is running (or paused), with nothing in flight.  Pooled ones,
 * ones bound to a client (gone with it), ones starting, resetting or snapshotting are destroyed. */
static bool keepable(const sandbox *s)
{
        return s->ready && !s->pooled && !s->bound_client && !s->job && !s->resetting && !s->n_calls && !s->create_rpc_id && !s->waiters &&
               !s->out.len && !s->rd.header_got && !s->rd.body && s->sb.pidfd >= 0 && s->sb.agentfd >= 0;
}

static json_int_t keep_fd(int fd, nsbox_kept *k, bool *full)
{
        if (fd < 0)
                return -1;
        if (k->n_fds >= NSBOX_KEEPER_MAX_FDS) {
                *full = true;
                return -1;
        }
        k->fds[k->n_fds] = fd;
        return (json_int_t)k->n_fds++;
}

#define SET(o, key, v) json_object_set_new(o, key, v)
#define STR_OR_NULL(x) ((x) ? json_string(x) : json_null())

/* What the next nsboxd needs to serve s as it was (its fds by index in k->fds). */
static int keep_record(const daemon_state *d, const sandbox *s, nsbox_kept *k)
{
        bool full = false;
        k->n_fds = 0;
        k->record = NULL;
        snprintf(k->id, sizeof(k->id), "%s", s->id);
        json_t *o = json_object(), *fd = json_object(), *net = json_object();
        SET(o, "id", json_string(s->id));
        SET(o, "pid", json_integer(s->sb.pid));
        SET(o, "start", json_integer((json_int_t)nsbox_pid_start_time(s->sb.pid)));
        SET(o, "nsboxd", json_integer(getpid()));
        SET(o, "cgroup", json_string(s->sb.cg.dirfd >= 0 ? s->sb.cg.path : ""));
        SET(o, "kept", json_true());
        SET(o, "owner", json_integer((json_int_t)s->owner));
        SET(o, "policy_name", STR_OR_NULL(s->policy_name));
        SET(o, "labels", json_incref(s->labels));
        SET(o, "create_params", json_incref(s->create_params));
        SET(o, "created", json_integer((json_int_t)s->created));
        /* CLOCK_MONOTONIC is the machine's: the next nsboxd counts from the same time */
        SET(o, "expires_ns", json_integer((json_int_t)s->expires_ns));
        SET(o, "last_active_ns", json_integer((json_int_t)s->last_active_ns));
        SET(o, "start_ns", json_integer((json_int_t)s->sb.start_ns));
        SET(o, "idle_ms", json_integer((json_int_t)s->idle_ms));
        SET(o, "expiry_pause", json_boolean(s->expiry_pause));
        SET(o, "paused", json_boolean(s->paused));
        SET(o, "memory", json_integer((json_int_t)s->limits.memory));
        SET(o, "mem_commit", json_integer((json_int_t)s->mem_commit));
        SET(o, "template", s->tpl >= 0 ? json_string(d->conf->templates[s->tpl].name) : json_null());
        SET(o, "id_slot", json_integer(s->id_slot));
        SET(o, "host_uid", json_integer(s->host_uid));
        SET(o, "host_gid", json_integer(s->host_gid));
        SET(o, "repo_url", STR_OR_NULL(s->repo_url));
        SET(o, "repo_commit", STR_OR_NULL(s->repo_commit));
        SET(o, "record_path", STR_OR_NULL(s->record_path));
        SET(o, "record_steps", json_integer((json_int_t)s->record_steps));
        SET(o, "next_agent_id", json_integer(s->next_agent_id));
        SET(o, "cg_memory", json_boolean(s->sb.cg.memory));
        SET(o, "cg_pids", json_boolean(s->sb.cg.pids));
        SET(o, "cg_cpu", json_boolean(s->sb.cg.cpu));
        SET(fd, "agent", json_integer(keep_fd(s->sb.agentfd, k, &full)));
        SET(fd, "pid", json_integer(keep_fd(s->sb.pidfd, k, &full)));
        SET(fd, "stage", json_integer(keep_fd(s->sb.stagefd, k, &full)));
        SET(fd, "cgroup", json_integer(keep_fd(s->sb.cg.dirfd, k, &full)));
        SET(fd, "id_lock", json_integer(keep_fd(s->id_lock_fd, k, &full)));
        SET(fd, "record", json_integer(keep_fd(s->record_fd, k, &full)));
        SET(fd, "net_pid", json_integer(keep_fd(s->sb.net.pidfd, k, &full)));
        SET(fd, "net_exit", json_integer(keep_fd(s->sb.net.exitfd, k, &full)));
        SET(fd, "veth_lock", json_integer(keep_fd(s->sb.net.veth.lockfd, k, &full)));
        const nsbox_veth *v = &s->sb.net.veth;
        SET(net, "pid", json_integer(s->sb.net.pid));
        SET(net, "veth_index", json_integer(v->index));
        SET(net, "veth_ifname", json_string(v->ifname));
        SET(net, "veth_host", json_pack("[iiii]", v->host[0], v->host[1], v->host[2], v->host[3]));
        SET(net, "veth_addr", json_pack("[iiii]", v->addr[0], v->addr[1], v->addr[2], v->addr[3]));
        SET(o, "fds", fd);
        SET(o, "net", net);
        json_t *bl = nsbox_layers_save(&s->base_layers, k->fds, &k->n_fds, NSBOX_KEEPER_MAX_FDS);
        json_t *ll = nsbox_layers_save(&s->layers, k->fds, &k->n_fds, NSBOX_KEEPER_MAX_FDS);
        full |= !bl || !ll;
        SET(o, "base_layers", bl ? bl : json_null());
        SET(o, "layers", ll ? ll : json_null());
        k->pidfd = s->sb.pidfd;
        k->cgroupfd = s->sb.cg.dirfd;
        k->record = o;
        return full ? -EMFILE : 0;
}

/* Our copies of a kept sandbox's fds go; the keeper holds its own, so nothing of it is destroyed. */
static void sandbox_forget(daemon_state *d, sandbox *s)
{
        for (sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        d->n_sandboxes--;
        unwatch_sandbox(d, s);
        int *fds[] = { &s->sb.pidfd, &s->sb.agentfd, &s->sb.stagefd, &s->sb.syncfd, &s->sb.cg.dirfd, &s->sb.net.pidfd, &s->sb.net.exitfd,
                       &s->sb.net.veth.lockfd };
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (*fds[i] >= 0) {
                        close(*fds[i]);
                        *fds[i] = -1;
                }
        free(s->sb.cg.path);
        s->sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
        sandbox_free(s); /* the rest (layer holds, id lock, recording) is only closed */
}

/* SIGTERM with on_stop "keep", after the drain: the sandboxes that can be kept go to a keeper;
 * the others are destroyed by the caller, as are all of them if the keeper cannot start. */
static void keep_sandboxes(daemon_state *d)
{
        size_t n = 0;
        for (sandbox *s = d->sandboxes; s; s = s->next)
                n += keepable(s);
        if (!n)
                return;
        nsbox_kept *kept = calloc(n, sizeof(*kept));
        sandbox **which = calloc(n, sizeof(*which));
        size_t k = 0;
        for (sandbox *s = d->sandboxes; s && kept && which; s = s->next) {
                if (!keepable(s))
                        continue;
                if (keep_record(d, s, &kept[k]) < 0) {
                        dlog(LOG_WARNING, "sandbox.not_kept", s->id, "sandbox %s: too many descriptors to hand over; destroyed", s->id);
                        json_decref(steal_pointer(&kept[k].record));
                        continue;
                }
                which[k++] = s;
        }
        nsbox_error err = { 0 };
        int ctl = -1;
        pid_t keeper = k ? nsbox_keeper_fork(d->state_dirfd, kept, k, d->conf->keep_timeout_ms, &ctl, &err) : -ENOMEM;
        if (keeper < 0) {
                dlog(LOG_ERR, "keeper.failed", NULL, "cannot keep the sandboxes: %s; destroying them", err.msg ? err.msg : strerror(-keeper));
                nsbox_error_clear(&err);
        } else {
                /* named after the keeper now, so that nobody collects them as a dead nsboxd's */
                bool ok = true;
                for (size_t i = 0; i < k && ok; i++) {
                        if (nsbox_cgroup_hand_over(&which[i]->sb.cg, keeper, &err) < 0) {
                                dlog(LOG_ERR, "keeper.failed", which[i]->id, "cannot hand sandbox %s over: %s; destroying them all", which[i]->id, err.msg);
                                nsbox_error_clear(&err);
                                ok = false;
                                break;
                        }
                        json_object_set_new(kept[i].record, "cgroup", json_string(which[i]->sb.cg.dirfd >= 0 ? which[i]->sb.cg.path : ""));
                        json_object_set_new(kept[i].record, "keeper", json_integer(keeper));
                        char *text = json_dumps(kept[i].record, JSON_COMPACT);
                        char name[48];
                        snprintf(name, sizeof(name), "%s.json", which[i]->id);
                        if (!text || write_file_at(d->state_dirfd, name, text, 0600) < 0)
                                dlog(LOG_ERR, "state.write_failed", which[i]->id, "sandbox %s: cannot write its state file", which[i]->id);
                        free(text);
                }
                if (nsbox_keeper_go(ctl, ok) < 0)
                        ok = false;
                if (ok) {
                        dlog(LOG_NOTICE, "daemon.kept", NULL, "%zu sandboxes kept for the next nsboxd by keeper %d (for at most %.0f s)", k, (int)keeper,
                             (double)d->conf->keep_timeout_ms / 1000.0);
                        for (size_t i = 0; i < k; i++) {
                                dlog(LOG_INFO, "sandbox.kept", which[i]->id, "sandbox %s kept", which[i]->id);
                                sandbox_forget(d, which[i]);
                        }
                } else {
                        while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR)
                                ;
                }
        }
        for (size_t i = 0; kept && i < n; i++)
                json_decref(kept[i].record);
        free(kept);
        free(which);
}

static int take_fd(json_t *fds_o, const char *key, int *fds, size_t n, bool required, bool *bad)
{
        json_t *v = json_object_get(fds_o, key);
        json_int_t i = json_integer_value(v);
        if (!json_is_integer(v) || i < 0 || (size_t)i >= n || fds[i] < 0) {
                if (required || (json_is_integer(v) && i >= 0))
                        *bad = true;
                return -1;
        }
        int fd = fds[i];
        fds[i] = -1;
        return fd;
}

static uint64_t rec_u64(json_t *o, const char *key) { return (uint64_t)json_integer_value(json_object_get(o, key)); }

static char *rec_str(json_t *o, const char *key, bool *bad)
{
        const char *v = json_string_value(json_object_get(o, key));
        char *c = v ? strdup(v) : NULL;
        if (v && !c)
                *bad = true;
        return c;
}


/* The next nsboxd: serve a kept sandbox again, or destroy it (whatever of it we hold). */
static int adopt_one(void *ctx, json_t *rec, int *fds, size_t n)
{
        daemon_state *d = ctx;
        const char *id = json_string_value(json_object_get(rec, "id"));
        nsbox_error err = { 0 };
        bool bad = !is_hex(id, 32);
        sandbox *s = sandbox_new();
        if (!s)
                return -ENOMEM;
        snprintf(s->id, sizeof(s->id), "%s", bad ? "?" : id);
        for (sandbox *o = d->sandboxes; o && !bad; o = o->next)
                bad = !strcmp(o->id, s->id);
        json_t *f = json_object_get(rec, "fds"), *net = json_object_get(rec, "net");
        s->sb.pid = (pid_t)rec_u64(rec, "pid");
        s->sb.pidfd = take_fd(f, "pid", fds, n, true, &bad);
        s->sb.agentfd = take_fd(f, "agent", fds, n, true, &bad);
        s->sb.stagefd = take_fd(f, "stage", fds, n, false, &bad);
        s->sb.cg.dirfd = take_fd(f, "cgroup", fds, n, false, &bad);
        s->sb.cg.path = s->sb.cg.dirfd >= 0 ? rec_str(rec, "cgroup", &bad) : NULL;
        bad |= s->sb.cg.dirfd >= 0 && !s->sb.cg.path;
        s->sb.cg.memory = json_is_true(json_object_get(rec, "cg_memory"));
        s->sb.cg.pids = json_is_true(json_object_get(rec, "cg_pids"));
        s->sb.cg.cpu = json_is_true(json_object_get(rec, "cg_cpu"));
        s->sb.start_ns = rec_u64(rec, "start_ns");
        s->sb.net.pid = (pid_t)json_integer_value(json_object_get(net, "pid"));
        s->sb.net.pidfd = take_fd(f, "net_pid", fds, n, false, &bad);
        s->sb.net.exitfd = take_fd(f, "net_exit", fds, n, false, &bad);
        nsbox_veth *v = &s->sb.net.veth;
        v->lockfd = take_fd(f, "veth_lock", fds, n, false, &bad);
        v->index = (int)json_integer_value(json_object_get(net, "veth_index"));
        snprintf(v->ifname, sizeof(v->ifname), "%s", json_string_value(json_object_get(net, "veth_ifname")) ?: "");
        for (int i = 0; i < 4; i++) {
                v->host[i] = (uint8_t)json_integer_value(json_array_get(json_object_get(net, "veth_host"), i));
                v->addr[i] = (uint8_t)json_integer_value(json_array_get(json_object_get(net, "veth_addr"), i));
        }
        s->id_lock_fd = take_fd(f, "id_lock", fds, n, false, &bad);
        s->record_fd = take_fd(f, "record", fds, n, false, &bad);
        bad |= nsbox_layers_load(json_object_get(rec, "base_layers"), fds, n, &s->base_layers) < 0;
        bad |= nsbox_layers_load(json_object_get(rec, "layers"), fds, n, &s->layers) < 0;
        /* the one we were told of, still: its pidfd names it across pid reuse */
        if (!bad && (s->sb.pid <= 0 || syscall(SYS_pidfd_send_signal, s->sb.pidfd, 0, NULL, 0) < 0 ||
                     nsbox_pid_start_time(s->sb.pid) != (unsigned long long)rec_u64(rec, "start")))
                bad = true;
        s->owner = (uid_t)rec_u64(rec, "owner");
        s->policy_name = rec_str(rec, "policy_name", &bad);
        s->repo_url = rec_str(rec, "repo_url", &bad);
        s->repo_commit = rec_str(rec, "repo_commit", &bad);
        s->record_path = rec_str(rec, "record_path", &bad);
        s->record_steps = rec_u64(rec, "record_steps");
        s->next_agent_id = (json_int_t)rec_u64(rec, "next_agent_id");
        s->created = (time_t)rec_u64(rec, "created");
        s->expires_ns = rec_u64(rec, "expires_ns");
        s->last_active_ns = rec_u64(rec, "last_active_ns");
        s->idle_ms = rec_u64(rec, "idle_ms");
        s->expiry_pause = json_is_true(json_object_get(rec, "expiry_pause"));
        s->paused = json_is_true(json_object_get(rec, "paused"));
        s->mem_commit = rec_u64(rec, "mem_commit");
        s->id_slot = (unsigned)rec_u64(rec, "id_slot");
        s->host_uid = (uid_t)rec_u64(rec, "host_uid");
        s->host_gid = (gid_t)rec_u64(rec, "host_gid");
        json_t *labels = json_object_get(rec, "labels");
        s->labels = json_is_object(labels) ? json_deep_copy(labels) : json_object();
        const char *tpl = json_string_value(json_object_get(rec, "template"));
        const nsbox_template *tp = tpl ? nsbox_dconfig_template(d->conf, tpl) : NULL;
        s->tpl = tp ? (int)(tp - d->conf->templates) : -1;
        /* its policy, as it was made: to start it again on a reset, and to snapshot it */
        json_t *cp = json_object_get(rec, "create_params");
        s->create_params = json_is_object(cp) ? json_deep_copy(cp) : NULL;
        int r = 0;
        if (bad || !s->create_params) {
                r = nsbox_err(&err, EINVAL, "its record or its descriptors are not whole");
        } else {
                /* not checked against the host again: a published port, for one, is its own */
                nsbox_run_options o;
                r = shape_options(NULL, s->create_params, &o, &err);
                if (r == 0) {
                        r = nsbox_run_options_policy(&o, &s->policy, &err);
                        if (r == 0 && o.from)
                                r = nsbox_policy_use_layers(s->policy, &s->base_layers, o.rootfs != NULL, &err);
                        nsbox_run_options_release(&o);
                }
        }
        if (r == 0) {
                s->policy->limits.memory = rec_u64(rec, "memory");
                s->limits = s->policy->limits;
                r = nsbox_cgroup_hand_over(&s->sb.cg, getpid(), &err);
        }
        if (r == 0) {
                s->serial = ++d->next_serial;
                s->ready = true;
                s->next = d->sandboxes;
                d->sandboxes = s;
                d->n_sandboxes++;
                if (nsbox_epoll_add(d->epfd, s->sb.pidfd, KEY(s->serial, K_PIDFD), &s->pid_events, EPOLLIN) < 0 ||
                    nsbox_epoll_add(d->epfd, s->sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events, 0) < 0) {
                        dlog(LOG_ERR, "sandbox.adopt_failed", s->id, "cannot watch kept sandbox %s: %s; destroyed", s->id, strerror(errno));
                        sandbox_remove(d, s, "internal", "could not be adopted");
                        return -1;
                }
                state_write(d, s);
                dlog(LOG_NOTICE, "sandbox.adopted", s->id, "sandbox %s (uid %u) adopted from the previous nsboxd%s", s->id, (unsigned)s->owner,
                     s->paused ? ", paused" : "");
                return 0;
        }
        dlog(LOG_ERR, "sandbox.adopt_failed", bad && !is_hex(id, 32) ? NULL : s->id, "cannot adopt kept sandbox %s: %s; destroyed", s->id,
             err.msg ? err.msg : strerror(-r));
        nsbox_error_clear(&err);
        if (s->sb.cg.dirfd >= 0 && !s->sb.cg.path) { /* no name to remove it by: empty it */
                nsbox_cgroup_kill(&s->sb.cg);
                close(s->sb.cg.dirfd);
                s->sb.cg.dirfd = -1;
        }
        sandbox_free(s);
        return -1;
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
        _cleanup_free_ char *lock = NULL;
        if (asprintf(&lock, "%s.lock", sock) < 0) {
                nsbox_paths_release(&paths);
                return nsbox_err(err, ENOMEM, "lock path");
        }
        _cleanup_close_ int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock_fd < 0) {
                r = nsbox_err(err, errno, "open lock file '%s'", lock);
                nsbox_paths_release(&paths);
                return r;
        }
        if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
                r = nsbox_err(err, errno == EWOULDBLOCK ? 0 : errno, "another nsboxd is already serving '%s'", sock);
                nsbox_paths_release(&paths);
                return r == -EINVAL ? -EADDRINUSE : r;
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
        d.activated = activated_fd >= 0;
        d.tpl = calloc(d.conf->n_templates + 1, sizeof(*d.tpl));
        if (!d.tpl) {
                nsbox_paths_release(&paths);
                return nsbox_err(err, ENOMEM, "templates");
        }
        d.pool_dirty = true; /* fill the pools */
        /* what a killed nsboxd left of its sandboxes goes before this one makes any */
        d.state_dirfd = state_dir_open(sock, err);
        if (d.state_dirfd < 0) {
                nsbox_paths_release(&paths);
                return d.state_dirfd;
        }
        d.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (d.epfd < 0) {
                nsbox_paths_release(&paths);
                return nsbox_err(err, errno, "epoll");
        }
        /* sandboxes kept by the previous nsboxd (on_stop "keep"), then what is left of others */
        nsbox_error kerr = { 0 };
        int adopted = nsbox_keeper_collect(d.state_dirfd, adopt_one, &d, &kerr);
        if (adopted < 0)
                dlog(LOG_ERR, "keeper.failed", NULL, "%s", kerr.msg ? kerr.msg : strerror(-adopted));
        nsbox_error_clear(&kerr);
        unsigned cleaned = state_cleanup(&d);
        bool shared = d.conf->n_client_uids || d.conf->n_client_gids;
        d.listen_fd = activated_fd >= 0 ? activated_fd : listen_on(sock, shared ? 0666 : 0600, err);
        if (d.listen_fd < 0) {
                nsbox_paths_release(&paths);
                return d.listen_fd;
        }
        /* other users reach the socket through the runtime directory: they may search it */
        size_t dl = strlen(paths.dir);
        if (shared && !strncmp(sock, paths.dir, dl) && sock[dl] == '/' && !strchr(sock + dl + 1, '/') && chmod(paths.dir, 0711) < 0)
                dlog(LOG_ERR, "daemon.chmod_failed", NULL, "cannot open %s to the configured clients (chmod 0711): %s", paths.dir, strerror(errno));
        sigset_t mask;
        nsbox_block_stop_signals(&mask);
        d.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (d.sig_fd < 0 || nsbox_epoll_add(d.epfd, d.listen_fd, KEY(0, K_LISTEN), NULL, EPOLLIN) < 0 ||
            nsbox_epoll_add(d.epfd, d.sig_fd, KEY(0, K_SIGNAL), NULL, EPOLLIN) < 0) {
                r = nsbox_err(err, errno, "set up the event loop");
                nsbox_paths_release(&paths);
                return r;
        }
        if (cfg->ready_fd >= 0) {
                (void)!write(cfg->ready_fd, "1", 1);
                close(cfg->ready_fd);
        }
        dlog(LOG_NOTICE, "daemon.listening", NULL, "listening on %s%s; configuration %s: %zu templates, max_sandboxes %u; %u sandboxes adopted, %u of a previous nsboxd cleaned up",
             sock, activated_fd >= 0 ? " (socket activation)" : "", d.conf->source ? d.conf->source : "(defaults)", d.conf->n_templates,
             d.conf->max_sandboxes, d.n_sandboxes, cleaned);
        {
                char state[700];
                snprintf(state, sizeof(state), "READY=1\nSTATUS=listening on %s; %u sandboxes adopted, %u of a previous nsboxd cleaned up\nMAINPID=%d",
                         sock, d.n_sandboxes, cleaned, (int)getpid());
                nsbox_sd_notify(state);
        }
        /* where sandbox cgroups go, found now: alone in a delegated cgroup, nsboxd moves itself
         * into its leaf before any sandbox exists */
        const char *cg_why = NULL, *cg_parent = nsbox_cgroup_parent(&cg_why);
        if (cg_parent)
                dlog(LOG_INFO, "daemon.cgroups", NULL, "sandbox cgroups under %s", cg_parent);
        else
                dlog(LOG_WARNING, "daemon.cgroups", NULL, "sandboxes get no cgroup (no limits, no pause): %s", cg_why);
        while (!d.stop) {
                int timeout = deadlines(&d);
                pool_fill(&d);
                if (d.pool_dirty) /* more to start: after what is ready now */
                        timeout = 0;
                else if (d.pool_retry_ns) { /* a pool to refill later */
                        uint64_t now = now_ns();
                        int t = d.pool_retry_ns <= now ? 0 : (int)((d.pool_retry_ns - now + 999999) / 1000000);
                        if (timeout < 0 || t < timeout)
                                timeout = t;
                }
                if (d.stopping && (drained(&d) || now_ns() >= d.drain_deadline_ns))
                        break;
                reap_exited(false);
                if (n_exiting && (timeout < 0 || timeout > 20))
                        timeout = 20;
                update_interest(&d);
                struct epoll_event ev[64];
                int n = epoll_wait(d.epfd, ev, 64, timeout);
                if (n < 0 && errno != EINTR) {
                        r = nsbox_err(err, errno, "epoll_wait");
                        break;
                }
                for (int i = 0; i < n; i++) {
                        uint64_t key = ev[i].data.u64, serial = key >> 3;
                        switch (key & 7) {
                        case K_LISTEN:
                                accept_clients(&d);
                                break;
                        case K_SIGNAL: {
                                struct signalfd_siginfo si;
                                while (read(d.sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                                        if (si.ssi_signo != SIGHUP && d.stopping)
                                                d.stop = true; /* a second one: now */
                                        else if (si.ssi_signo != SIGHUP)
                                                begin_stop(&d, sock);
                                break;
                        }
                        case K_CLIENT: {
                                client *c = client_by_serial(&d, serial);
                                if (!c)
                                        break;
                                if (ev[i].events & EPOLLOUT && nsbox_queue_flush(&c->out, c->fd) < 0)
                                        c->eof = true;
                                if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                                        client_readable(&d, c);
                                break;
                        }
                        case K_JOB: {
                                sandbox *s = sandbox_by_serial(&d, serial);
                                if (s && s->job)
                                        job_readable(&d, s);
                                break;
                        }
                        case K_SYNC:
                        case K_AGENT:
                        case K_PIDFD: {
                                sandbox *s = sandbox_by_serial(&d, serial);
                                if (!s)
                                        break;
                                if ((key & 7) == K_SYNC)
                                        sync_readable(&d, s);
                                else if ((key & 7) == K_PIDFD)
                                        sandbox_died(&d, s);
                                else {
                                        if (ev[i].events & EPOLLOUT && nsbox_queue_flush(&s->out, s->sb.agentfd) < 0) {
                                                sandbox_died(&d, s);
                                                break;
                                        }
                                        if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                                                agent_readable(&d, s);
                                }
                                break;
                        }
                        }
                }
                /* write what is queued now rather than on the next round */
                for (sandbox *s = d.sandboxes, *nx; s; s = nx) {
                        nx = s->next;
                        if (s->out.len && nsbox_queue_flush(&s->out, s->sb.agentfd) < 0)
                                sandbox_remove(&d, s, "internal", "exited");
                }
                for (client *c = d.clients, *nx; c; c = nx) {
                        nx = c->next;
                        if (c->out.len && nsbox_queue_flush(&c->out, c->fd) < 0)
                                c->eof = true;
                        if (c->eof)
                                client_remove(&d, c);
                }
        }
        begin_stop(&d, sock);
        d.stop = true;
        if (d.conf->keep_on_stop)
                keep_sandboxes(&d);
        dlog(LOG_NOTICE, "daemon.stopping", NULL, "stopping: destroying %u sandboxes", d.n_sandboxes);
        while (d.sandboxes)
                sandbox_remove(&d, d.sandboxes, "unavailable", "was stopped with nsboxd");
        reap_exited(true);
        for (client *c = d.clients; c; c = c->next) /* the last replies, if they can go now */
                (void)nsbox_queue_flush(&c->out, c->fd);
        while (d.clients)
                client_remove(&d, d.clients);
        close(d.state_dirfd);
        free(d.tpl);
        nsbox_paths_release(&paths);
        return r < 0 ? r : 0;
}
