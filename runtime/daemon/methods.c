/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: the methods on sandboxes that exist: list, stats, destroy, pause and resume,
 * set_timeout, snapshot, reset, snapshot_list and snapshot_delete. */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "../dlog.h"

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
void method_snapshot(daemon_state *d, client *c, json_t *id, json_t *params)
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
        json_t *pg = json_object_get(params, "progress");
        if (pg && !json_is_null(pg) && !json_is_boolean(pg)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "'progress' must be true or false");
                return;
        }
        if (!s->ready || s->job) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is %s", s->sup.id, s->job ? "busy with a snapshot" : "still starting");
                return;
        }
        if (s->sup.sb.stagefd < 0) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "sandbox %s has no writable layer to capture", s->sup.id);
                return;
        }
        int r = nsbox_store_open(true, &st, &err);
        if (r == 0 && nsbox_store_has_snapshot(&st, name))
                r = nsbox_err_as(&err, EEXIST, "snapshot '%s' exists (nsbox snapshot rm %s first)", name, name);
        nsbox_store_close(&st);
        s->job_thaw = !s->paused;
        if (r == 0 && s->job_thaw && (r = nsbox_sandbox_freeze(&s->sup.sb, true, PAUSE_TIMEOUT_MS, &err)) < 0) {
                nsbox_error e2 = { 0 }; /* never leave it half frozen */
                nsbox_sandbox_freeze(&s->sup.sb, false, PAUSE_TIMEOUT_MS, &e2);
                nsbox_error_clear(&e2);
        }
        snprintf(s->job_name, sizeof(s->job_name), "%s", name);
        s->job_progress = json_is_true(pg); /* events while it copies */
        if (r == 0 && (r = job_spawn(d, s, JOB_SNAPSHOT, c, id ? id : json_null(), &err)) < 0 && s->job_thaw) {
                nsbox_error e2 = { 0 };
                nsbox_sandbox_freeze(&s->sup.sb, false, PAUSE_TIMEOUT_MS, &e2);
                nsbox_error_clear(&e2);
        }
        if (r < 0) {
                reply_error(c, id, RPC_SERVER_ERROR, nsbox_code_for_errno(r), "%s", err.msg ? err.msg : strerror(-r));
                nsbox_error_clear(&err);
        }
}

/* Kill everything in the sandbox, drop its writable layer and start it again, with the same id,
 * on snapshot NAME or on what it was created on. */
void method_reset(daemon_state *d, client *c, json_t *id, json_t *params)
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
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is %s", s->sup.id, s->job ? "busy with a snapshot" : "still starting");
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
                reply_error(c, id, r == -EINVAL ? RPC_INVALID_PARAMS : RPC_SERVER_ERROR, nsbox_code_for_errno(r), "%s", err.msg ? err.msg : strerror(-r));
                nsbox_error_clear(&err);
                nsbox_layers_release(&nl);
                return;
        }
        unwatch_sandbox(d, s);
        reap_later(nsbox_net_detach(&s->sup.sb.net));
        nsbox_sup_stop(&s->sup, "conflict", "was reset");
        s->paused = s->paused_files = false;
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
        dlog(LOG_INFO, "sandbox.reset", s->sup.id, "sandbox %s reset to %s%s%s", s->sup.id, name ? "snapshot '" : "its creation state", name ? name : "", name ? "'" : "");
}

void method_snapshots(daemon_state *d, client *c, json_t *id, json_t *params, bool delete)
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
                reply_error(c, id, RPC_SERVER_ERROR, nsbox_code_for_errno(r), "%s", err.msg ? err.msg : strerror(-r));
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
void method_list(daemon_state *d, client *c, json_t *id, json_t *params)
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
void method_set_timeout(daemon_state *d, client *c, json_t *id, json_t *params)
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
        dlog(LOG_INFO, "sandbox.timeout_set", s->sup.id, "sandbox %s: timeout %s%.3f s, idle timeout %.3f s", s->sup.id, s->expires_ns ? "in " : "none, was ",
              s->expires_ns ? (double)(s->expires_ns - now) / 1e9 : 0.0, (double)s->idle_ms / 1000.0);
        reply_result(c, id, sandbox_json(d, s));
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

void method_stats(daemon_state *d, client *c, json_t *id)
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
                if (nsbox_cgroup_stats_read(&s->sup.sb.cg, &cs) == 0 && cs.has_memory)
                        mem_now += cs.memory_current;
        }
        json_t *tpls = json_object();
        for (size_t t = 0; t < d->conf->n_templates; t++) {
                unsigned pl, rd, st, live = of_template(d, (int)t, &pl, &rd, &st);
                json_t *o = json_pack("{si si si si sI sI}", "pool", (int)d->conf->templates[t].pool, "ready", (int)rd, "starting", (int)st, "live",
                                      (int)live, "hits", (json_int_t)d->tpl[t].hits, "misses", (json_int_t)d->tpl[t].misses);
                if (o && d->tpl[t].failures) /* why its pool stays short */
                        json_object_set_new(o, "last_start_failure",
                                            json_pack("{ss sI sI si}", "reason", d->tpl[t].failed_why, "time", (json_int_t)d->tpl[t].failed_at, "count",
                                                      (json_int_t)d->tpl[t].failures, "in_a_row", (int)d->tpl[t].fails));
                json_object_set_new(tpls, d->conf->templates[t].name, o);
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
        /* streamed calls, those paused in their agents because their client lags, and the bytes
         * nsboxd holds for clients that have not read them (the caller's; every client's for root) */
        unsigned clients = 0, streams = 0, streams_paused = 0;
        uint64_t held = 0;
        for (client *x = d->clients; x; x = x->next) {
                clients++;
                if (c->uid == 0 || x->uid == c->uid)
                        held += x->out.len + http_held(x);
        }
        for (sandbox *s = d->sandboxes; s; s = s->next)
                for (nsbox_sup_call *call = visible(c, s) ? s->sup.calls : NULL; call; call = call->next) {
                        streams += call->stream;
                        streams_paused += call->stream && call->paused;
                }
        reply_result(c, id, json_pack("{s{si si si si si} so so s{sI sI sI} s{si si si} sf si s{si si sI} sb ss so}", "sandboxes", "total",
                                      (int)total, "starting", (int)starting, "running", (int)running, "paused", (int)paused, "pooled",
                                      (int)pooled, "templates", tpls, "acquire_ms", lat, "memory", "budget", (json_int_t)d->conf->memory_budget,
                                      "committed", (json_int_t)committed(d), "current_bytes", (json_int_t)mem_now, "capacity", "max_sandboxes",
                                      (int)d->conf->max_sandboxes, "max_per_uid", (int)d->conf->max_per_uid, "free", (int)cluster_free(d),
                                      "uptime_s", (double)(now_ns() - d->start_ns) / 1e9, "clients", (int)clients, "streams", "open",
                                      (int)streams, "paused", (int)streams_paused, "held_bytes", (json_int_t)held, "stopping", d->stopping,
                                      "node", d->conf->node, "catalog", catalog_stats(d)));
}

/* nsbox daemon stop: a clean stop (as SIGTERM: drain, then the sandboxes go or are kept), asked
 * on the socket by the daemon's own uid only, never over HTTP: nobody signals by process name. */
void method_shutdown(daemon_state *d, client *c, json_t *id)
{
        if (c->http || c->uid != geteuid()) {
                reply_error(c, id, RPC_SERVER_ERROR, "permission_denied", "only nsboxd's own uid (%u), on its socket, may stop it",
                            (unsigned)geteuid());
                return;
        }
        dlog(LOG_NOTICE, "daemon.shutdown", NULL, "stop asked by uid %u on the socket", (unsigned)c->uid);
        reply_result(c, id, json_pack("{si sb}", "pid", (int)getpid(), "stopping", 1));
        if (!d->stopping)
                kill(getpid(), SIGTERM); /* our own signalfd: the one way to stop */
}

void method_destroy(daemon_state *d, client *c, json_t *id, json_t *params)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        char sid[NSBOX_ID_SIZE];
        memcpy(sid, s->sup.id, sizeof(sid));
        sandbox_remove(d, s, "not_found", "was destroyed");
        reply_result(c, id, json_pack("{ss}", "destroyed", sid));
}

/* Freeze or thaw s: its cgroup, or with none SIGSTOP/SIGCONT of its processes
 * (nsbox_sandbox_freeze); its calls are refused while it is paused.  Without memory, a pause
 * keeps only its files (E2B's filesystem-only pause): the agent kills every other process and
 * nothing is frozen (no cgroup needed), and a resume reboots (a frozen sandbox is thawed, then
 * its processes are killed); a sandbox paused so resumes rebooted either way.  why says what
 * asked (NULL: not logged here). */
int sandbox_pause(sandbox *s, bool pause, bool memory, const char *why, nsbox_error *err)
{
        if (!pause && !s->paused)
                return 0;
        if (pause && s->paused && (memory || s->paused_files))
                return 0;
        uint64_t t0 = now_ns();
        bool frozen = s->paused && !s->paused_files, reboot = !memory && !s->paused_files;
        int r = 0;
        if (pause && memory)
                r = nsbox_sandbox_freeze(&s->sup.sb, true, PAUSE_TIMEOUT_MS, err);
        else if (frozen)
                r = nsbox_sandbox_freeze(&s->sup.sb, false, PAUSE_TIMEOUT_MS, err);
        if (r < 0)
                return r;
        bool rebooting = !pause && s->paused_files; /* its processes went at its pause */
        if (reboot) {
                nsbox_sup_reboot(&s->sup);
                s->rebooted = true;
                s->boots++;
                s->interp_pid = 0;
        }
        s->paused_files = pause && (s->paused_files || reboot);
        s->paused = pause;
        s->last_active_ns = now_ns();
        if (why) /* else its caller says it */
                dlog(LOG_INFO, pause ? "sandbox.paused" : "sandbox.resumed", s->sup.id, "sandbox %s %s%s%s in %.2f ms", s->sup.id,
                     pause ? "paused" : "resumed", s->paused_files ? ", its files kept, its processes killed" : reboot || rebooting ? ", rebooted" : "",
                     why, (double)(now_ns() - t0) / 1e6);
        CATALOG_TOLD(s->d, s, false);
        return 0;
}

void method_pause(daemon_state *d, client *c, json_t *id, json_t *params, bool pause)
{
        sandbox *s = find_sandbox(d, c, id, params);
        if (!s)
                return;
        if (!s->ready) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is still starting", s->sup.id);
                return;
        }
        json_t *mem = json_object_get(params, "memory");
        if (mem && !json_is_null(mem) && !json_is_boolean(mem)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "%s: 'memory' must be true or false", pause ? "pause" : "resume");
                return;
        }
        nsbox_error err = { 0 };
        if (sandbox_pause(s, pause, !json_is_false(mem), "", &err) < 0) {
                reply_error(c, id, RPC_SERVER_ERROR, err.errnum == ETIMEDOUT ? "timeout" : s->sup.sb.cg.dirfd < 0 ? "conflict" : "internal",
                            "cannot %s sandbox %s: %s", pause ? "pause" : "resume", s->sup.id, err.msg ? err.msg : "");
                nsbox_error_clear(&err);
                return;
        }
        reply_result(c, id, sandbox_json(d, s));
}
