/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: create and get_or_create.  Their params, templates, capacity and admission, creates
 * waiting for room, pools, lifetimes; a sandbox prepared, started, and ready (sync_readable). */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/random.h>

#include "../dlog.h"
#include "../image.h"
#include "../params.h"
#include "../repo.h"

int check_labels(json_t *labels, strbuf *why)
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

/* create --image: the image's layers and config (image.h). */
static int create_image(sandbox *s, const nsbox_run_options *o, nsbox_error *err)
{
        int r = nsbox_image_use(s->policy, o, &s->base_layers, NULL, err);
        if (r < 0)
                return r;
        return nsbox_layers_dup(&s->base_layers, &s->layers) < 0 ? nsbox_err(err, ENOMEM, "layers") : 0;
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
                s->job_progress = s->create_progress;
                int r = job_spawn(d, s, JOB_REPO, NULL, NULL, &err);
                if (r < 0) {
                        create_failed(d, s, nsbox_code_for_errno(r), err.msg ? err.msg : "cannot start a worker");
                        nsbox_error_clear(&err);
                        return -1;
                }
                return 0;
        }
        int r = sandbox_launch(d, s, &err);
        if (r < 0) {
                create_failed(d, s, nsbox_code_for_errno(r), err.msg ? err.msg : "cannot start the sandbox");
                nsbox_error_clear(&err);
                return -1;
        }
        return 0;
}

/* create's params that shape no sandbox go with a template too (params.h) */
static bool is_lifecycle(const char *k) { return nsbox_param_is(k, NSBOX_PARAM_LIFECYCLE); }

typedef struct create_req {
        json_t *labels; /* owned */
        int tpl;        /* index in conf->templates, or -1 */
        bool has_timeout, has_idle;
        uint64_t timeout_ms, idle_ms;
        int expiry; /* -1: the configuration's; 0 destroy; 1 pause; 2 pause keeping only its files */
        uint64_t wait_ms;
        bool close_with_client;
        bool progress; /* progress events while its repository is cloned */
} create_req;

int seconds_param(json_t *params, const char *key, double max, bool *has, uint64_t *ret_ms, strbuf *why)
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
                if (!v || (strcmp(v, "destroy") && strcmp(v, "pause") && strcmp(v, "pause_files"))) {
                        sb_appendf(why, "'on_expiry' must be \"destroy\", \"pause\" or \"pause_files\"");
                        return -EINVAL;
                }
                rq->expiry = !strcmp(v, "pause") ? 1 : !strcmp(v, "pause_files") ? 2 : 0;
        }
        json_t *cwc = json_object_get(params, "close_with_client");
        if (cwc && !json_is_null(cwc)) {
                if (!json_is_boolean(cwc)) {
                        sb_appendf(why, "'close_with_client' must be true or false");
                        return -EINVAL;
                }
                rq->close_with_client = json_is_true(cwc);
        }
        json_t *pg = json_object_get(params, "progress");
        if (pg && !json_is_null(pg)) {
                if (!json_is_boolean(pg)) {
                        sb_appendf(why, "'progress' must be true or false");
                        return -EINVAL;
                }
                rq->progress = json_is_true(pg);
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
                                sb_appendf(why, "'%.64s' cannot be given with a template (only labels, timeout, idle_timeout, on_expiry, close_with_client, progress, wait)", k);
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
int shape_options(const client *c, json_t *shape, nsbox_run_options *o, nsbox_error *err)
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
bool is_operator(uid_t uid) { return uid == 0 || uid == geteuid(); }

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

/* A sandbox from create's shaping params (or a template's), not linked nor started. */
int sandbox_prepare(daemon_state *d, const client *c, json_t *params, sandbox **ret, nsbox_error *err)
{
        json_t *shape = json_deep_copy(params);
        nsbox_params_strip(shape, NSBOX_PARAM_LIFECYCLE);
        nsbox_run_options o;
        int r = !shape ? nsbox_err(err, ENOMEM, "create: out of memory") : shape_options(c, shape, &o, err);
        if (r < 0) {
                json_decref(shape);
                return r;
        }
        o.limits_as_policy = !c; /* a template's limits are the operator's configuration, as a policy's */
        sandbox *s = sandbox_new();
        unsigned char rnd[16];
        if (!s || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                free(s);
                json_decref(shape);
                nsbox_run_options_release(&o);
                return nsbox_err(err, ENOMEM, "create: out of memory or randomness");
        }
        char id[NSBOX_ID_SIZE];
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(id + 2 * i, 3, "%02x", rnd[i]);
        if (d->conf->node[0]) /* a router finds the node from the id alone */
                snprintf(id + NSBOX_ID_HEX, sizeof(id) - NSBOX_ID_HEX, "-%s", d->conf->node);
        calls_attach(d, s, id);
        s->create_params = shape;
        r = nsbox_run_options_policy(&o, &s->policy, err);
        if (r == 0 && o.from)
                r = create_from(s, o.from, o.rootfs != NULL, s->policy, err);
        if (r == 0 && o.image)
                r = create_image(s, &o, err);
        if (r == 0 && d->conf->memory_budget && !s->policy->limits.memory)
                s->policy->limits.memory = d->conf->default_memory; /* a budget counts every sandbox */
        if (r == 0 && c) /* a template's disk is the operator's */
                r = disk_allowed(d, shape, s->policy, err);
        if (r == 0)
                r = nsbox_policy_check_host(s->policy, err);
        if (r == 0 && o.repo) {
                nsbox_repo_kind kind;
                r = nsbox_repo_classify(o.repo, &kind, &s->repo_url, err);
                if (r == 0 && kind == NSBOX_REPO_NETWORK && s->policy->net == NET_NONE)
                        r = nsbox_err_as(err, EPERM, "repository '%s' needs network access; the sandbox's network is 'none'", o.repo);
                if (r == 0 && kind == NSBOX_REPO_NETWORK) /* never fetched by the host: cloned inside */
                        s->clone_url = steal_pointer(&s->repo_url);
                if (r == 0 && o.commit)
                        r = nsbox_repo_commit_check(o.commit, err);
                if (r == 0 && o.commit && !(*(s->clone_url ? &s->clone_commit : &s->repo_commit) = strdup(o.commit)))
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

unsigned of_template(const daemon_state *d, int tpl, unsigned *pooled, unsigned *ready, unsigned *starting)
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

uint64_t committed(const daemon_state *d)
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

static void set_lifetimes(daemon_state *d, sandbox *s, const create_req *rq)
{
        uint64_t now = now_ns();
        uint64_t t = rq->has_timeout ? rq->timeout_ms : s->limits.timeout_ms ? s->limits.timeout_ms : d->conf->timeout_ms;
        s->expires_ns = t ? now + t * 1000000 : 0;
        s->idle_ms = rq->has_idle ? rq->idle_ms : d->conf->idle_timeout_ms;
        s->expiry_pause = rq->expiry < 0 ? d->conf->expiry_pause : rq->expiry >= 1;
        s->expiry_files = rq->expiry < 0 ? d->conf->expiry_files : rq->expiry == 2;
        s->last_active_ns = now;
        json_decref(s->labels);
        s->labels = rq->labels ? json_deep_copy(rq->labels) : json_object();
}

static void reply_sandbox(daemon_state *d, client *c, json_t *id, sandbox *s, bool pooled, int created, uint64_t start_ns)
{
        CATALOG_TOLD(d, s, false); /* in the cluster's lists before its creator hears of it */
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
static int admit(daemon_state *d, client *c, json_t *id, json_t *params, bool goc, const char *claim, uint64_t start_ns,
                 uint64_t *deadline_ns)
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
                        reply_error(c, id, RPC_SERVER_ERROR, "conflict", "sandbox %s is starting with %d get_or_create calls waiting for it", s->sup.id,
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
                                d->tpl[rq.tpl].used_at = p->created;
                                p->fresh = true;
                                pool_later(d, now_ns() + POOL_REFILL_DELAY_NS);
                                dlog(LOG_INFO, "pool.handover", p->sup.id, "sandbox %s handed over from the pool of template '%s' to uid %u", p->sup.id, d->conf->templates[rq.tpl].name,
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
        if (rq.tpl >= 0) {
                d->tpl[rq.tpl].misses++;
                d->tpl[rq.tpl].used_at = time(NULL);
        }
        s->owner = c->uid;
        s->goc = goc;
        snprintf(s->claim, sizeof(s->claim), "%s", claim ? claim : "");
        s->req_start_ns = start_ns;
        set_lifetimes(d, s, &rq);
        s->bound_client = rq.close_with_client ? c->serial : 0;
        s->create_progress = rq.progress;
        sandbox_start(d, s, c, id);
out:
        sb_release(&why);
        create_req_release(&rq);
        return 0;
}

/* claim: a won claim of get_or_create across nodes, given to the sandbox it makes (or released). */
static void create_now(daemon_state *d, client *c, json_t *id, json_t *params, bool goc, const char *claim, uint64_t now)
{
        uint64_t deadline = 0;
        if (admit(d, c, id, params, goc, claim, now, &deadline) == 0) {
                bool taken = false;
                for (sandbox *s = d->sandboxes; claim && s && !taken; s = s->next)
                        taken = !strcmp(s->claim, claim);
                if (claim && !taken) /* refused, or one of ours had the labels after all */
                        catalog_claim_release(d, claim);
                return;
        }
        waiting *w = calloc(1, sizeof(*w)), **tail = &d->waitq;
        if (!w) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "create: out of memory");
                if (claim)
                        catalog_claim_release(d, claim);
                return;
        }
        *w = (waiting){ .client = c->serial, .deadline_ns = deadline, .start_ns = now, .rpc_id = json_incref(id ? id : json_null()),
                        .params = json_deep_copy(params), .goc = goc };
        snprintf(w->claim, sizeof(w->claim), "%s", claim ? claim : "");
        while (*tail)
                tail = &(*tail)->next;
        *tail = w;
}

/* A get_or_create waiting for its claim across nodes (catalog.c). */
typedef struct goc_claim {
        uint64_t client, start_ns;
        json_t *rpc_id, *params;
        bool again; /* claimed anew once after its claim was given up */
} goc_claim;

static void claimed(daemon_state *d, void *ctx, int outcome, const char *value)
{
        goc_claim *g = ctx;
        client *c = client_by_serial(d, g->client);
        bool pending = outcome == CATALOG_CLAIM_THEIRS && !strncmp(value, "pending:", 8);
        sandbox *local = NULL;
        for (sandbox *s = d->sandboxes; outcome == CATALOG_CLAIM_THEIRS && s && !local; s = s->next)
                local = !strcmp(s->sup.id, value) ? s : NULL;
        if (!c) {
                if (outcome == CATALOG_CLAIM_MINE)
                        catalog_claim_release(d, value);
        } else if (outcome == CATALOG_CLAIM_GONE && !g->again) {
                g->again = true;
                if (catalog_claim(d, c->uid, json_object_get(g->params, "labels"), claimed, g) == 0)
                        return;
                create_now(d, c, g->rpc_id, g->params, true, NULL, g->start_ns);
        } else if (pending) {
                reply_error(c, g->rpc_id, RPC_SERVER_ERROR, "conflict", "get_or_create: the sandbox with these labels is still being made on node '%s'",
                            value + 8);
        } else if (outcome == CATALOG_CLAIM_THEIRS && !local) {
                reply_error(c, g->rpc_id, RPC_SERVER_ERROR, "conflict",
                            "get_or_create: the sandbox with these labels is %s, on node '%s': reach it there (or through the cluster's router)",
                            value, nsbox_id_node(value));
        } else { /* ours to make, ours already, or Redis did not answer: this node decides */
                create_now(d, c, g->rpc_id, g->params, true, outcome == CATALOG_CLAIM_MINE ? value : NULL, g->start_ns);
        }
        json_decref(g->rpc_id);
        json_decref(g->params);
        free(g);
}

void method_create(daemon_state *d, client *c, json_t *id, json_t *params, bool goc)
{
        uint64_t now = now_ns();
        json_t *labels = json_object_get(params, "labels");
        /* get_or_create with a cluster catalog: one node makes the sandbox for these labels */
        if (goc && d->catalog && json_object_size(labels) && !find_labelled(d, c->uid, labels)) {
                goc_claim *g = calloc(1, sizeof(*g));
                if (g) {
                        *g = (goc_claim){ .client = c->serial, .start_ns = now, .rpc_id = json_incref(id ? id : json_null()),
                                          .params = json_deep_copy(params) };
                        if (g->params && catalog_claim(d, c->uid, labels, claimed, g) == 0)
                                return;
                        json_decref(g->rpc_id);
                        json_decref(g->params);
                        free(g);
                }
        }
        create_now(d, c, id, params, goc, NULL, now);
}

/* Creates waiting for capacity, in the order they came: tried again when room was freed, and
 * answered 'capacity' at their deadline. */
void serve_waiting(daemon_state *d)
{
        for (waiting **pp = &d->waitq; *pp;) {
                waiting *w = *pp;
                client *c = client_by_serial(d, w->client);
                /* stopping: admit answers unavailable */
                if (c && admit(d, c, w->rpc_id, w->params, w->goc, w->claim[0] ? w->claim : NULL, w->start_ns, &w->deadline_ns) == 1) {
                        pp = &w->next;
                        continue;
                }
                bool taken = false;
                for (sandbox *s = d->sandboxes; w->claim[0] && s && !taken; s = s->next)
                        taken = !strcmp(s->claim, w->claim);
                if (w->claim[0] && !taken)
                        catalog_claim_release(d, w->claim);
                *pp = w->next;
                json_decref(w->rpc_id);
                json_decref(w->params);
                free(w);
        }
}

/* Keep each template's pool full: started in the background, a few at a time, later and later
 * while a template fails to start. */
void pool_fill(daemon_state *d)
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
                                tpl_start_failed(d, (int)t, err.msg ? err.msg : strerror(-r));
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

static void reply_created(daemon_state *d, sandbox *s, bool reset);
static int pool_warm(daemon_state *d, sandbox *s);
static bool awaited(daemon_state *d, const sandbox *s);

/* git in the sandbox, as its user, through its own network and allow-list: the host never
 * contacts the URL.  URL and commit are arguments, never part of the script; a commit may name
 * a remote branch.  No prompt for credentials: a private URL fails instead of hanging. */
static const char clone_script[] =
        "git clone -q --no-checkout -- \"$1\" . || exit\n"
        "[ -n \"$2\" ] || { git checkout -q --detach 2> /dev/null || git checkout -q; exit; }\n"
        "c=$(git rev-parse -q --verify \"$2^{commit}\" || git rev-parse -q --verify \"origin/$2^{commit}\") ||\n"
        "        { echo \"commit '$2': not found in '$1'\" >&2; exit 1; }\n"
        "git checkout -q --detach \"$c\"\n";

static void repo_clone_start(daemon_state *d, sandbox *s)
{
        json_t *p = json_pack("{s[ssssss] s{ssss} si}", "cmd", "/bin/sh", "-c", clone_script, "sh", s->clone_url,
                              s->clone_commit ? s->clone_commit : "", "env", "GIT_TERMINAL_PROMPT", "0", "GIT_ALLOW_PROTOCOL",
                              "http:https:git:ssh", "timeout", (int)(REPO_TIMEOUT_NS / 1000000000));
        s->cloning = true;
        s->ready_deadline_ns = now_ns() + REPO_TIMEOUT_NS + READY_TIMEOUT_NS;
        if (!p || calls_internal(d, s, "exec", p, PENDING_REPO_CLONE) < 0)
                create_failed(d, s, "internal", "create: cannot start the repository's clone");
}

void repo_clone_done(daemon_state *d, sandbox *s, json_t *result, const char *code, const char *msg)
{
        json_t *ec = json_object_get(result, "exit_code");
        s->cloning = false;
        if (result && json_is_integer(ec) && json_integer_value(ec) == 0 && !json_is_true(json_object_get(result, "timed_out"))) {
                dlog(LOG_INFO, "sandbox.cloned", s->sup.id, "sandbox %s: cloned '%s' inside", s->sup.id, s->clone_url);
                if (!s->clone_reset && !awaited(d, s)) { /* abandoned: the loop removes it, not the supervisor's callback */
                        s->ready_deadline_ns = now_ns();
                        return;
                }
                s->ready = true;
                s->last_active_ns = now_ns();
                reply_created(d, s, s->clone_reset);
                return;
        }
        /* git's last line says why (fatal: unable to access ...: Could not connect ...) */
        char why[512] = "";
        const char *err = json_string_value(json_object_get(result, "stderr"));
        if (err) {
                size_t n = strlen(err);
                while (n && (err[n - 1] == '\n' || err[n - 1] == ' '))
                        n--;
                const char *start = err + n;
                while (start > err && start[-1] != '\n')
                        start--;
                snprintf(why, sizeof(why), "%.*s", (int)(err + n - start), start);
                for (char *q = why; *q; q++)
                        if ((unsigned char)*q < 0x20 || *q == 0x7f)
                                *q = '?';
        }
        if (!why[0])
                snprintf(why, sizeof(why), "%s", result && json_is_true(json_object_get(result, "timed_out")) ? "timed out"
                                                  : result ? "git failed" : msg ? msg : code ? code : "failed");
        /* answered now; removed by the loop's deadline check, as one that did not become ready
         * (not here: the supervisor that called us goes on with s) */
        json_t *rid = steal_pointer(&s->create_rpc_id);
        reply_error(client_by_serial(d, s->create_client), rid, RPC_SERVER_ERROR, result ? "invalid_argument" : code ? code : "internal",
                    "clone '%s' inside the sandbox: %s", s->clone_url, why);
        json_decref(rid);
        s->ready_deadline_ns = now_ns();
}

void sync_readable(daemon_state *d, sandbox *s)
{
        /* read_ready closed syncfd; a child forked meanwhile (another sandbox's, a worker) may
         * still hold the socket, and epoll then reports it until that child closes it */
        if (s->sup.sb.syncfd < 0)
                return;
        nsbox_error err = { 0 };
        int r = nsbox_sandbox_read_ready(&s->sup.sb, &err);
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
        if (s->clone_url && !s->pooled) { /* ready once its repository is cloned, after a reset too */
                s->clone_reset = reset;
                repo_clone_start(d, s);
                return;
        }
        if (s->pooled && pool_warm(d, s) == 0)
                return; /* ready once its warm-up is done (pool_warmed) */
        s->ready = true;
        s->last_active_ns = now_ns();
        if (s->pooled) { /* waits in its pool for a create; another may start */
                pool_warmed(d, s, NULL);
                return;
        }
        reply_created(d, s, reset);
}

/* A new pooled sandbox runs its template's warm-up once, before it is handed out: the first
 * lookups of ld.so, libc and the command in its fresh overlay, and the agent's first spawn, are
 * then paid at pool-fill time instead of by the first caller.  Foreground, answered to nobody,
 * recorded nowhere: nothing of it stays.  The default: `true` (through PATH, as a client's exec
 * [true]); with the HTTP API, `/bin/bash -l -c true`, as E2B's SDKs run every command. */
static int pool_warm(daemon_state *d, sandbox *s)
{
        const json_t *w = d->conf->templates[s->tpl].warmup;
        json_t *argv = w ? json_deep_copy(w)
                         : d->conf->http_listen[0] ? json_pack("[ssss]", "/bin/bash", "-l", "-c", "true") : json_pack("[s]", "true");
        if (!argv || json_array_size(argv) == 0) {
                json_decref(argv);
                return -ENOENT;
        }
        json_t *p = json_pack("{so si}", "cmd", argv, "timeout", (int)(WARMUP_TIMEOUT_NS / 1000000000));
        s->ready_deadline_ns = now_ns() + WARMUP_TIMEOUT_NS + READY_TIMEOUT_NS;
        s->warming = p && calls_internal(d, s, "exec", p, PENDING_WARMUP) == 0;
        return s->warming ? 0 : -EIO;
}

/* s's warm-up is done (result NULL: none was run, or it failed: only logged, the sandbox is as
 * good as one without): it waits in its pool for a create; another may start. */
void pool_warmed(daemon_state *d, sandbox *s, const char *failed)
{
        const sandbox *in = d->sandboxes;
        while (in && in != s)
                in = in->next;
        s->warming = false;
        if (!in) /* being removed (its calls failed by sandbox_remove): not ready, not warmed */
                return;
        if (failed)
                dlog(LOG_DEBUG, "pool.warmup_failed", s->sup.id, "sandbox %s: its warm-up failed: %s", s->sup.id, failed);
        s->ready = true;
        s->last_active_ns = now_ns();
        d->tpl[s->tpl].fails = 0;
        d->pool_dirty = true;
        if (d->pool_ready)
                d->pool_ready(d, s);
}

/* Whether anyone still waits for s's create: its creator or a waiter. */
static bool awaited(daemon_state *d, const sandbox *s)
{
        size_t i;
        json_t *w;
        json_array_foreach(s->waiters, i, w)
                if (client_by_serial(d, (uint64_t)json_integer_value(json_array_get(w, 0))))
                        return true;
        return client_by_serial(d, s->create_client) != NULL;
}

/* s is ready (started, reset, or its repository cloned): whoever asked is answered. */
static void reply_created(daemon_state *d, sandbox *s, bool reset)
{
        client *c = client_by_serial(d, s->create_client);
        size_t i;
        json_t *w;
        if (reset) { /* it stays, whether or not whoever asked is still there */
                record_op(s, "reset", s->job_name[0] ? s->job_name : NULL, s->job_start_ns, NULL);
                dlog(LOG_INFO, "sandbox.restarted", s->sup.id, "sandbox %s restarted in %.1f ms (agent pid %d)", s->sup.id, (double)(now_ns() - s->job_start_ns) / 1e6, (int)s->sup.sb.pid);
        } else if (!awaited(d, s)) { /* whoever asked for it is gone: nobody would ever destroy it */
                sandbox_remove(d, s, "not_found", "was abandoned by its creator");
                return;
        } else {
                dlog(LOG_INFO, "sandbox.created", s->sup.id, "sandbox %s created for uid %u (agent pid %d)", s->sup.id, (unsigned)s->owner, (int)s->sup.sb.pid);
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
