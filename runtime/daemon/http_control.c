/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* E2B's control plane (the SDKs' OpenAPI, spec/openapi.yml): sandboxes created, listed,
 * described, connected to, paused, given a timeout, measured, snapshotted and killed, as
 * nsboxd's own methods do it for the key's user.  What E2B keeps and nsbox has no place for
 * (metadata, free strings; envVars; the access token) is kept in the sandbox's http object. */
#include "http.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>
#include <time.h>

#define CONTROL_DEFAULT_TIMEOUT_S 300 /* the SDKs' own default */
#define CONTROL_MAX_TIMEOUT_S 86400
#define CONTROL_MAX_METADATA 64
#define CONTROL_MAX_STRING 4096
#define CONTROL_MAX_ENVS 256
#define CONTROL_LIST_MAX 1000
#define CONTROL_FORKS_MAX 100 /* the OpenAPI's maximum count */
#define CONTROL_METRICS_IDS_MAX 100 /* the OpenAPI's sandbox_ids maxItems */
#define CONTROL_METRICS_BUCKET_S 5  /* E2B's metrics are 5 s apart */

/* OP_INTERP_*: the code-interpreter template's steps after create (http_interp.c) */
enum { OP_NONE, OP_CREATE, OP_KILL, OP_PAUSE, OP_CONNECT, OP_TIMEOUT, OP_SNAPSHOT, OP_INTERP_START, OP_INTERP_ENVS, OP_INTERP_WAIT,
       OP_INTERP_FAILED, OP_SNAPSHOTS, OP_DELETE_SNAPSHOT, OP_FORK_SNAPSHOT, OP_FORK };

typedef struct control {
        int op;
        uint64_t step_id;   /* the JSON-RPC request answered next */
        bool resumed;       /* connect: it was paused, its resume is answered next */
        bool was_paused;    /* connect: answered 201 (resumed), not 200 */
        json_t *meta, *envs;
        char template_id[128];
        uint64_t timeout_s;
        bool auto_pause, internet;
        bool auto_pause_memory; /* autoPauseMemory: false, its timeout's pause keeps only its files */
        bool auto_resume;    /* autoResume.enabled: traffic resumes it once paused (http.c) */
        bool memory;         /* pause, connect: false, its processes go (a pause keeping only files, a reboot) */
        bool reconnect;      /* connect: a rebooted code interpreter's server starts again, then connected */
        bool public_traffic; /* network.allowPublicTraffic */
        bool interp;        /* the code-interpreter template: its server started before the answer */
        char sandbox_id[NSBOX_ID_SIZE];
        char why[512];      /* why the code interpreter did not start, said once it is destroyed */
        char snapshot[64];  /* fork: the snapshot the forks start on */
        unsigned forks;     /* fork: how many are asked; forked: the results so far */
        json_t *forked;
} control;

static void control_free(void *p)
{
        control *k = p;
        if (!k)
                return;
        json_decref(k->meta);
        json_decref(k->envs);
        json_decref(k->forked);
        free(k);
}

void control_error(hreq *r, unsigned status, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        http_answer_json(r, status, json_pack("{si ss}", "code", (int)status, "message", msg));
}

void control_rfc3339(char *buf, size_t n, time_t t)
{
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *template_of(daemon_state *d, sandbox *s)
{
        const char *t = json_string_value(json_object_get(s->http, "template"));
        if (t)
                return t;
        return s->tpl >= 0 ? d->conf->templates[s->tpl].name : "base";
}

/* What reaches the sandbox: its tokens (envd's; its ports' when they are private), its domain. */
static void with_access(daemon_state *d, sandbox *s, json_t *o)
{
        if (!o)
                return;
        if (json_object_get(s->http, "token"))
                json_object_set(o, "envdAccessToken", json_object_get(s->http, "token"));
        json_t *traffic = json_object_get(s->http, "traffic_token");
        json_object_set_new(o, "trafficAccessToken", traffic && !http_public_traffic(s) ? json_incref(traffic) : json_null());
        json_object_set_new(o, "domain", d->conf->http_domain ? json_string(d->conf->http_domain) : json_null());
}

/* cpuCount, memoryMB and diskSizeMB of a sandbox with these limits: the host's where none */
void control_figures(json_t *o, const nsbox_limits *l)
{
        long cpus = l->cpus > 0 ? (long)(l->cpus + 0.999) : sysconf(_SC_NPROCESSORS_ONLN);
        uint64_t mem = l->memory ? l->memory : (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
        json_object_set_new(o, "cpuCount", json_integer(cpus > 0 ? cpus : 1));
        json_object_set_new(o, "memoryMB", json_integer((json_int_t)(mem >> 20)));
        json_object_set_new(o, "diskSizeMB", json_integer((json_int_t)((l->disk ? l->disk : NSBOX_DEFAULT_DISK) >> 20)));
}

/* SandboxDetail / ListedSandbox of the OpenAPI */
json_t *control_sandbox_json(daemon_state *d, sandbox *s)
{
        char started[32], end[32];
        control_rfc3339(started, sizeof(started), s->created);
        /* the wall clock's time of the monotonic deadline, to the ns before it is cut to seconds:
         * adding whole seconds left to time(NULL) made endAt move by a second between two reads */
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        uint64_t now = now_ns(), left = s->expires_ns > now ? s->expires_ns - now : 0;
        time_t end_t = s->expires_ns ? wall.tv_sec + (time_t)(((uint64_t)wall.tv_nsec + left) / 1000000000ull)
                                     : s->created + CONTROL_MAX_TIMEOUT_S;
        control_rfc3339(end, sizeof(end), end_t);
        json_t *meta = json_object_get(s->http, "metadata");
        json_t *o = json_pack("{ss ss ss ss ss ss ss sO}", "templateID", template_of(d, s), "sandboxID", s->sup.id, "clientID", "nsbox",
                              "startedAt", started, "endAt", end, "state", s->paused ? "paused" : "running", "envdVersion",
                              HTTP_ENVD_VERSION, "metadata", meta ? meta : s->labels ? s->labels : json_object());
        control_figures(o, &s->limits);
        with_access(d, s, o);
        if (o) {
                json_object_set_new(o, "network", json_pack("{sb}", "allowPublicTraffic", http_public_traffic(s)));
                json_object_set_new(o, "lifecycle", json_pack("{ss sb}", "onTimeout", s->expiry_pause ? "pause" : "kill", "autoResume",
                                                              json_object_get(s->http, "auto_resume") != NULL));
        }
        return o;
}

/* A create of template_id made its sandbox: counted for E2B's spawnCount where nsboxd's
 * configuration has no template of the name (create.c counts those, whoever asks). */
void control_spawned(daemon_state *d, const char *template_id)
{
        if (interp_config_template(d->conf, template_id))
                return;
        int i = !strcmp(template_id, "base") ? 0 : interp_template(template_id) ? 1 : -1;
        if (i >= 0) {
                d->builtin[i].hits++;
                d->builtin[i].used_at = time(NULL);
        }
}

/* Sandbox: create's and connect's answer */
static json_t *created_json(hreq *r, sandbox *s)
{
        json_t *o = json_pack("{ss ss ss ss}", "templateID", template_of(r->d, s), "sandboxID", s->sup.id, "clientID", "nsbox",
                              "envdVersion", HTTP_ENVD_VERSION);
        with_access(r->d, s, o);
        return o;
}

/* ---- request bodies, strictly ------------------------------------------------------------------ */

static json_t *body_json(hreq *r)
{
        if (!r->body.len)
                return json_object();
        json_error_t je;
        json_t *b = nsbox_json_loadb(r->body.buf, r->body.len, &je);
        if (!json_is_object(b)) {
                json_decref(b);
                control_error(r, 400, "the body must be a JSON object%s%s", b ? "" : ": ", b ? "" : je.text);
                return NULL;
        }
        return b;
}

/* An object of strings, at most max of them, each at most CONTROL_MAX_STRING bytes: metadata, or
 * envVars, whose keys are variable names (no '='). */
static int string_map(hreq *r, json_t *v, const char *name, size_t max, bool env, json_t **ret)
{
        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v) || json_object_size(v) > max) {
                control_error(r, 400, "'%s' must be an object of at most %zu strings", name, max);
                return -EINVAL;
        }
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
                if (!json_is_string(x) || strlen(k) > CONTROL_MAX_STRING || json_string_length(x) > CONTROL_MAX_STRING || !*k) {
                        control_error(r, 400, "'%s': every key and value must be a string of 1-%d bytes", name, CONTROL_MAX_STRING);
                        return -EINVAL;
                }
                if (env && strchr(k, '=')) {
                        control_error(r, 400, "'%s': '%.50s' is not a variable name: it has a '='", name, k);
                        return -EINVAL;
                }
        }
        *ret = json_incref(v);
        return 0;
}

static int seconds(hreq *r, json_t *v, const char *name, uint64_t *ret)
{
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > CONTROL_MAX_TIMEOUT_S) {
                control_error(r, 400, "'%s' must be an integer number of seconds, 0-%d", name, CONTROL_MAX_TIMEOUT_S);
                return -EINVAL;
        }
        *ret = (uint64_t)json_integer_value(v);
        return 0;
}

static int boolean(hreq *r, json_t *v, const char *name, bool *ret)
{
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_boolean(v)) {
                control_error(r, 400, "'%s' must be true or false", name);
                return -EINVAL;
        }
        *ret = json_is_true(v);
        return 0;
}

/* autoResume: {"enabled": bool}, or null */
static int auto_resume(hreq *r, json_t *v, bool *ret)
{
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_boolean(json_object_get(v, "enabled"))) {
                control_error(r, 400, "'autoResume' must be {\"enabled\": true or false}");
                return -EINVAL;
        }
        *ret = json_is_true(json_object_get(v, "enabled"));
        return 0;
}

/* A pause that keeps no memory cannot be resumed by traffic (E2B refuses the pair; the SDKs check
 * it before they send) */
static int lifecycle_ok(hreq *r, const control *k)
{
        if (k->auto_pause && !k->auto_pause_memory && k->auto_resume) {
                control_error(r, 400, "'autoResume' cannot wake a sandbox whose pause keeps no memory (autoPauseMemory false): connect resumes it");
                return -EINVAL;
        }
        return 0;
}

/* network: allowPublicTraffic is kept (http.c port_open); egress rules, an egress proxy and a
 * host mask are refused, never ignored: a sandbox asked to be closed must not be left open. */
/* A key of a network object that nsbox does not act on: empty egress lists pass; rules are
 * refused (400) rather than taken and not enforced. 0 for an empty list, else -EINVAL. */
static int network_rule(hreq *r, const char *what, const char *key, json_t *x)
{
        if ((!strcmp(key, "allowOut") || !strcmp(key, "denyOut")) && json_is_array(x) && !json_array_size(x))
                return 0;
        if (!strcmp(key, "allowOut") || !strcmp(key, "denyOut") || !strcmp(key, "rules") || !strcmp(key, "egressProxy") ||
            !strcmp(key, "maskRequestHost") || !strcmp(key, "httpsPorts"))
                control_error(r, 400, "'%s.%s' is not supported by nsbox (allow_internet_access turns the internet off)", what, key);
        else
                control_error(r, 400, "'%s' has an unknown key '%.64s'", what, key);
        return -EINVAL;
}

static int network(hreq *r, json_t *v, bool *public_traffic)
{
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v)) {
                control_error(r, 400, "'network' must be an object");
                return -EINVAL;
        }
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x) {
                if (strcmp(key, "allowPublicTraffic") && network_rule(r, "network", key, x) < 0)
                        return -EINVAL;
        }
        return boolean(r, json_object_get(v, "allowPublicTraffic"), "network.allowPublicTraffic", public_traffic);
}

/* PUT /sandboxes/ID/network (the SDKs' updateNetwork): nsbox sets a sandbox's network when it
 * starts it, so an update may only ask for what it has (204); another setting is refused,
 * naming why, rather than taken and not done. */
static void network_update(hreq *r, sandbox *s, json_t *b)
{
        bool online = s->policy && s->policy->net == NET_NAT;
        const char *key;
        json_t *x;
        json_object_foreach(b, key, x) {
                if (!strcmp(key, "allow_internet_access")) {
                        if (!json_is_boolean(x)) {
                                control_error(r, 400, "'allow_internet_access' must be true or false");
                                return;
                        }
                        if (json_is_true(x) != online) {
                                control_error(r, 409, "nsbox cannot turn a running sandbox's internet %s: give allow_internet_access at create",
                                              online ? "off" : "on");
                                return;
                        }
                } else if (network_rule(r, "network", key, x) < 0) {
                        return;
                }
        }
        http_answer(r, 204, NULL, NULL, 0);
}

/* ---- the operations ---------------------------------------------------------------------------- */

static sandbox *find_visible(hreq *r, const char *id)
{
        for (sandbox *s = r->d->sandboxes; s; s = s->next)
                if (!s->pooled && r->uid == s->owner && !strcmp(s->sup.id, id))
                        return s;
        return NULL;
}

/* E2B's base image as nsbox has it: the user's home as the working directory, a writable root,
 * the internet unless asked not; a name that is no template is a snapshot of the user's (createSnapshot's
 * snapshotID), the base sandbox started on it. */
static void base_params(daemon_state *d, control *k, json_t *p)
{
        if (strcmp(k->template_id, "base") && !k->interp)
                json_object_set_new(p, "from", json_string(k->template_id));
        json_object_set_new(p, "workdir", json_string("/home/user"));
        /* E2B's files API writes anywhere (envd is root): here the root is the sandbox's own */
        json_object_set_new(p, "writable_root", json_true());
        if (k->internet && d->conf->http_internet)
                json_object_set_new(p, "net", json_string("nat"));
}

static void create_start(hreq *r, control *k)
{
        json_t *b = body_json(r);
        if (!b)
                return;
        json_t *t = json_object_get(b, "templateID");
        k->timeout_s = CONTROL_DEFAULT_TIMEOUT_S;
        k->internet = true;
        k->auto_pause_memory = true;
        k->public_traffic = r->d->conf->http_public_traffic;
        json_t *vols = json_object_get(b, "volumeMounts"), *iam = json_object_get(b, "iam");
        if (t && (!json_is_string(t) || json_string_length(t) == 0 || json_string_length(t) >= sizeof(k->template_id))) {
                control_error(r, 400, "'templateID' must be a template name");
        } else if (vols && !json_is_null(vols) && !(json_is_array(vols) && json_array_size(vols) == 0)) {
                /* not taken and forgotten: what the program writes there would not persist */
                control_error(r, 400, "'volumeMounts': nsbox has no E2B volumes (a template's mounts bind host directories: nsboxd(8), TEMPLATES)");
        } else if (iam && !json_is_null(iam)) {
                control_error(r, 400, "'iam': nsbox issues no workload identity tokens");
        } else if (seconds(r, json_object_get(b, "timeout"), "timeout", &k->timeout_s) == 0 &&
                   boolean(r, json_object_get(b, "autoPause"), "autoPause", &k->auto_pause) == 0 &&
                   boolean(r, json_object_get(b, "autoPauseMemory"), "autoPauseMemory", &k->auto_pause_memory) == 0 &&
                   auto_resume(r, json_object_get(b, "autoResume"), &k->auto_resume) == 0 &&
                   lifecycle_ok(r, k) == 0 &&
                   boolean(r, json_object_get(b, "allow_internet_access"), "allow_internet_access", &k->internet) == 0 &&
                   network(r, json_object_get(b, "network"), &k->public_traffic) == 0 &&
                   string_map(r, json_object_get(b, "metadata"), "metadata", CONTROL_MAX_METADATA, false, &k->meta) == 0 &&
                   string_map(r, json_object_get(b, "envVars"), "envVars", CONTROL_MAX_ENVS, true, &k->envs) == 0) {
                snprintf(k->template_id, sizeof(k->template_id), "%s", t ? json_string_value(t) : "base");
                /* a template of nsboxd's configuration by that name (its pool serves it), or E2B's
                 * base image as nsbox has it: the user's home as the working directory */
                json_t *p = json_pack("{sI ss}", "timeout", (json_int_t)(k->timeout_s ? k->timeout_s : CONTROL_MAX_TIMEOUT_S), "on_expiry",
                                      !k->auto_pause ? "destroy" : k->auto_pause_memory ? "pause" : "pause_files");
                k->interp = interp_template(k->template_id);
                const char *tpl = interp_config_template(r->d->conf, k->template_id);
                if (tpl)
                        json_object_set_new(p, "template", json_string(tpl));
                else if (strcmp(k->template_id, "base") && !k->interp && nsbox_snapshot_name_check(k->template_id, NULL) < 0) {
                        control_error(r, 404, "template '%.100s' not found (templates are nsboxd's: nsboxd(8), TEMPLATES)", k->template_id);
                        json_decref(p);
                        json_decref(b);
                        return;
                } else {
                        base_params(r->d, k, p);
                }
                k->op = OP_CREATE;
                k->step_id = http_rpc(r, "create", p);
        }
        json_decref(b);
}

static void interp_fail(hreq *r, control *k);

/* PREFIX-<16 hex>[-NODE]: a snapshot name of nsboxd's making; with the node's name, a router
 * sends a create from it to the node that holds it (contrib/haproxy), as it does an id. */
static void new_name(hreq *r, char *buf, size_t n, const char *prefix)
{
        unsigned char raw[8] = { 0 };
        const char *node = r->d->conf->node;
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                snprintf((char *)raw, sizeof(raw), "%07llx", (unsigned long long)now_ns());
        snprintf(buf, n, "%s-%02x%02x%02x%02x%02x%02x%02x%02x%s%s", prefix, raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                 *node ? "-" : "", node);
}

/* The node a snapshot name of nsboxd's making names, when it is not this one: "" otherwise. */
static const char *snapshot_elsewhere(hreq *r, const char *name)
{
        const char *node = r->d->conf->node;
        if (strncmp(name, "snapshot-", 9) || strspn(name + 9, "0123456789abcdef") != 16 || name[25] != '-' || !nsbox_node_ok(name + 26))
                return "";
        return strcmp(name + 26, node) ? name + 26 : "";
}

/* A node of a cluster that is full says 503, which a router tries on another node (contrib/haproxy);
 * a tenant's own limit stays E2B's 429 (the SDKs' RateLimitError), as does a lone nsboxd's. */
static unsigned create_status(const hreq *r, const char *code)
{
        if (!strcmp(code, "capacity"))
                return r->d->conf->node[0] && !cluster_free(r->d) ? 503 : 429;
        return !strcmp(code, "not_found") ? 404 : !strcmp(code, "invalid_argument") ? 400 : 500;
}

/* The sandbox a create answered made E2B's: its tokens, template, metadata, envs and network. */
static sandbox *created(hreq *r, control *k, json_t *msg)
{
        const char *id = json_string_value(json_object_get(json_object_get(msg, "result"), "id"));
        sandbox *s = id ? find_visible(r, id) : NULL;
        if (!s || http_sandbox_token(s) < 0 || (!k->public_traffic && http_sandbox_secret(s, "traffic_token") < 0))
                return NULL;
        json_object_set_new(s->http, "template", json_string(k->template_id));
        json_object_set_new(s->http, "metadata", k->meta ? json_incref(k->meta) : json_object());
        json_object_set_new(s->http, "envs", k->envs ? json_incref(k->envs) : json_object());
        json_object_set_new(s->http, "internet", json_boolean(k->internet));
        json_object_set_new(s->http, "public", json_boolean(k->public_traffic));
        if (k->auto_resume) /* and the timeout it gets again then */
                json_object_set_new(s->http, "auto_resume", json_integer((json_int_t)(k->timeout_s ? k->timeout_s : CONTROL_MAX_TIMEOUT_S)));
        CATALOG_TOLD(r->d, s, false); /* its E2B metadata in the cluster's lists */
        return s;
}

static json_t *interp_call(const char *sid, const char *tool, json_t *params)
{
        return json_pack("{ss ss so sb}", "sandbox", sid, "tool", tool, "params", params, "stream", 0);
}

/* A pooled sandbox's server, started before this create took it: the create's envVars go to a
 * file the server reads before each cell (server.py, sandbox_envs), then its ready file is
 * waited for (there already, as a rule). */
static void interp_prestarted(hreq *r, control *k, sandbox *s)
{
        json_int_t pid = s->interp_pid > 0 ? (json_int_t)s->interp_pid : 0; /* 0: its start is in flight */
        if (json_object_size(k->envs)) {
                char path[96], *text = json_dumps(k->envs, JSON_COMPACT);
                snprintf(path, sizeof(path), "/tmp/.nsbox-code-interpreter-%llu.envs", (unsigned long long)interp_ident(s));
                k->op = OP_INTERP_ENVS;
                k->step_id = http_rpc(r, "call", interp_call(s->sup.id, "write_file", json_pack("{ss ss}", "path", path, "content", text ? text : "{}")));
                free(text);
                return;
        }
        k->op = OP_INTERP_WAIT;
        k->step_id = http_rpc(r, "call", interp_call(s->sup.id, "exec", interp_wait_params(interp_ident(s), pid)));
}

static void create_done(hreq *r, control *k, json_t *msg)
{
        const char *why, *code = rpc_error_code(msg, &why);
        if (code && !strcmp(code, "not_found") && strcmp(k->template_id, "base") && !k->interp &&
            !nsbox_dconfig_template(r->d->conf, k->template_id)) {
                const char *there = snapshot_elsewhere(r, k->template_id);
                if (*there)
                        control_error(r, 404, "snapshot '%.100s' was taken on node '%s', not on this node '%s': snapshots stay on their node, and a"
                                              " router sends a create from one there (nsboxd(8), CLUSTER)", k->template_id, there, r->d->conf->node);
                else
                        control_error(r, 404, "template '%.100s' not found: neither a template of nsboxd's (nsboxd(8), TEMPLATES) nor a snapshot",
                                      k->template_id);
                return;
        }
        if (code) {
                control_error(r, create_status(r, code), "%s", why);
                return;
        }
        sandbox *s = created(r, k, msg);
        if (!s) {
                control_error(r, 500, "the sandbox went away as it was made");
                return;
        }
        control_spawned(r->d, k->template_id);
        if (k->interp) {
                snprintf(k->sandbox_id, sizeof(k->sandbox_id), "%s", s->sup.id);
                if (s->interp_pid > 0 || s->interp_starting) { /* from a warm pool: started already */
                        interp_prestarted(r, k, s);
                        return;
                }
                json_t *p = interp_start_params(interp_ident(s), k->envs, k->why, sizeof(k->why));
                if (!p) {
                        interp_fail(r, k);
                        return;
                }
                k->op = OP_INTERP_START;
                k->step_id = http_rpc(r, "call", json_pack("{ss ss so sb}", "sandbox", s->sup.id, "tool", "exec", "params", p, "stream", 0));
                return;
        }
        http_answer_json(r, 201, created_json(r, s));
}

/* The code interpreter did not start: its sandbox is destroyed, then the why said; after a
 * reboot (connect) the sandbox stays, and the why is said at once. */
static void interp_fail(hreq *r, control *k)
{
        if (k->reconnect) {
                control_error(r, 500, "%s", k->why);
                return;
        }
        k->op = OP_INTERP_FAILED;
        k->step_id = http_rpc(r, "destroy", json_pack("{ss}", "sandbox", k->sandbox_id));
}

/* The server started (OP_INTERP_START: its pid), then ready (OP_INTERP_WAIT: the wait's exit). */
static void interp_step(hreq *r, control *k, json_t *msg)
{
        const char *why, *code = rpc_error_code(msg, &why);
        json_t *res = json_object_get(msg, "result");
        sandbox *s = find_visible(r, k->sandbox_id);
        if (k->op == OP_INTERP_FAILED) {
                control_error(r, 500, "%s", k->why);
                return;
        }
        if (!s) {
                control_error(r, 500, "the sandbox went away as its code interpreter started");
                return;
        }
        if (code) {
                snprintf(k->why, sizeof(k->why), "the code interpreter did not start: %s", why);
                interp_fail(r, k);
        } else if (k->op == OP_INTERP_ENVS) {
                k->op = OP_INTERP_WAIT;
                k->step_id = http_rpc(r, "call", interp_call(k->sandbox_id, "exec", interp_wait_params(interp_ident(s), s->interp_pid > 0 ? s->interp_pid : 0)));
        } else if (k->op == OP_INTERP_START) {
                k->op = OP_INTERP_WAIT;
                k->step_id = http_rpc(r, "call", json_pack("{ss ss so sb}", "sandbox", k->sandbox_id, "tool", "exec", "params",
                                                           interp_wait_params(interp_ident(s), json_integer_value(json_object_get(res, "pid"))),
                                                           "stream", 0));
        } else if (json_integer_value(json_object_get(res, "exit_code")) != 0 || json_is_true(json_object_get(res, "timed_out"))) {
                const char *out = json_string_value(json_object_get(res, "stdout"));
                snprintf(k->why, sizeof(k->why), "%.*s", (int)strcspn(out && *out ? out : "the code interpreter did not start", "\n"),
                         out && *out ? out : "the code interpreter did not start");
                interp_fail(r, k);
        } else if (k->reconnect) {
                http_answer_json(r, k->was_paused ? 201 : 200, created_json(r, s));
        } else {
                http_answer_json(r, 201, created_json(r, s));
        }
}

/* One form-encoded key or value: '+' is a space, then %XX undone (MHD_http_unescape). */
static void form_decode(char *v)
{
        for (char *p = v; *p; p++)
                if (*p == '+')
                        *p = ' ';
        MHD_http_unescape(v);
}

/* The SDKs' metadata filter: the query value (undone by MHD) is a form, k=v&k2=v2, whose keys
 * and values are each URI-encoded once more (encodeURIComponent, then URLSearchParams). A filter
 * is checked once, before any sandbox is matched: each pair has a key and a '='. */
static bool metadata_filter_ok(const char *filter)
{
        if (strlen(filter) >= 4096)
                return false;
        for (const char *p = filter; *p;) {
                size_t n = strcspn(p, "&"), k = strcspn(p, "=");
                if (n && (k == 0 || k >= n))
                        return false;
                p += n + (p[n] == '&');
        }
        return true;
}

static bool metadata_match(const char *filter, json_t *meta)
{
        char buf[4096];
        if (strlen(filter) >= sizeof(buf))
                return false;
        snprintf(buf, sizeof(buf), "%s", filter);
        char *save = NULL;
        for (char *kv = strtok_r(buf, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
                char *eq = strchr(kv, '=');
                if (!eq)
                        return false;
                *eq = 0;
                char *k = kv, *v = eq + 1;
                form_decode(k);
                form_decode(v);
                MHD_http_unescape(k);
                MHD_http_unescape(v);
                const char *have = json_string_value(json_object_get(meta, k));
                if (!have || strcmp(have, v))
                        return false;
        }
        return true;
}

/* GET /sandboxes, /v2/sandboxes: the arguments, checked once */
typedef struct list_args {
        char *filter;
        char *tpl;                /* template: its ID or another name of it */
        double started_after;     /* startedAfter, Unix seconds (0: none) */
        bool asc;                 /* order=asc: oldest first */
        bool v2, running, paused;
        unsigned long max, from; /* from: a serial (this node's pages) or an offset (the catalog's: "c" tokens) */
        bool from_catalog;
        uint64_t req; /* the request's serial: it may be gone when the catalog answers */
} list_args;

static void list_args_free(list_args *a)
{
        free(a->filter);
        free(a->tpl);
        free(a);
}

/* An RFC 3339 date-time (2026-01-02T03:04:05[.123]Z, or an offset for Z) as Unix seconds;
 * false when it is not one. */
static bool rfc3339_parse(const char *v, double *ret)
{
        struct tm tm = { 0 };
        const char *p = v ? strptime(v, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
        if (!p || strlen(v) < 19 || v[4] != '-' || v[10] != 'T')
                return false;
        double frac = 0, scale = 0.1;
        if (*p == '.') {
                if (!(p[1] >= '0' && p[1] <= '9'))
                        return false;
                for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
                        frac += (*p - '0') * scale;
        }
        long off = 0;
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':' && strspn(p + 1, "0123456789") == 2 &&
                   strspn(p + 4, "0123456789") == 2) {
                off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
                off = *p == '-' ? -off : off;
                p += 6;
        } else {
                return false;
        }
        time_t t = timegm(&tm);
        if (*p || t == (time_t)-1)
                return false;
        *ret = (double)t - (double)off + frac;
        return true;
}

/* Is the listed sandbox o (a ListedSandbox) one the query asks for? */
static bool list_keeps(const list_args *a, json_t *o)
{
        const char *st = json_string_value(json_object_get(o, "state")), *tpl = json_string_value(json_object_get(o, "templateID"));
        double started = 0;
        if (!(st && !strcmp(st, "paused") ? a->paused : a->running))
                return false;
        if (a->filter && !metadata_match(a->filter, json_object_get(o, "metadata")))
                return false;
        if (a->tpl && !(tpl && (!strcmp(tpl, a->tpl) || (interp_template(tpl) && interp_template(a->tpl)))))
                return false;
        return !a->started_after ||
               (rfc3339_parse(json_string_value(json_object_get(o, "startedAt")), &started) && started >= a->started_after);
}

/* This node's sandboxes alone: newest first (or oldest, order=asc), paged by serial. */
static void list_local(hreq *r, const list_args *a)
{
        json_t *arr = json_array();
        unsigned long n = 0, more = 0;
        sandbox **v = calloc(r->d->n_sandboxes + 1, sizeof(*v));
        size_t nv = 0;
        for (sandbox *s = r->d->sandboxes; s && v && nv < r->d->n_sandboxes; s = s->next)
                if (!s->pooled && s->ready && r->uid == s->owner && (!a->from || (a->asc ? s->serial >= a->from : s->serial < a->from)))
                        v[nv++] = s;
        /* the list holds the newest first */
        for (size_t i = 0; a->asc && i < nv / 2; i++) {
                sandbox *t = v[i];
                v[i] = v[nv - 1 - i];
                v[nv - 1 - i] = t;
        }
        for (size_t i = 0; i < nv && arr; i++) {
                json_t *o = control_sandbox_json(r->d, v[i]);
                if (!o || !list_keeps(a, o)) {
                        json_decref(o);
                        continue;
                }
                if (n == a->max) {
                        json_decref(o);
                        more = a->asc ? v[i]->serial : v[i]->serial + 1;
                        break;
                }
                json_array_append_new(arr, o);
                n++;
        }
        free(v);
        if (more && asprintf(&r->next_token, "%lu", more) < 0)
                r->next_token = NULL;
        http_answer_json(r, 200, arr);
}

static int newest_first(const void *x, const void *y)
{
        json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
        int c = strcmp(json_string_value(json_object_get(b, "startedAt")) ?: "", json_string_value(json_object_get(a, "startedAt")) ?: "");
        return c ? c : strcmp(json_string_value(json_object_get(a, "sandboxID")) ?: "", json_string_value(json_object_get(b, "sandboxID")) ?: "");
}

static int oldest_first(const void *x, const void *y) { return newest_first(y, x); }

/* The catalog's answer: every node's records of the owner, this node's own taken fresh. */
static void list_catalog(daemon_state *d, void *ctx, json_t *records)
{
        list_args *a = ctx;
        hreq *r = http_req_by_serial(d, a->req);
        if (r && !records && a->from_catalog)
                control_error(r, 503, "the cluster catalog that gave this nextToken is down: list again from the start");
        else if (r && !records)
                list_local(r, a); /* Redis did not answer: this node's own */
        if (!r || !records) {
                list_args_free(a);
                return;
        }
        size_t n = 0, i;
        json_t *o, *all = json_array();
        for (sandbox *s = d->sandboxes; s && all; s = s->next)
                if (!s->pooled && s->ready && s->owner == r->uid)
                        json_array_append_new(all, control_sandbox_json(d, s));
        json_array_foreach(records, i, o) {
                const char *node = json_string_value(json_object_get(o, "node"));
                if (!node || !strcmp(node, d->conf->node))
                        continue; /* ours: listed fresh above */
                json_object_del(o, "owner");
                json_array_append(all, o);
        }
        json_t **v = calloc(json_array_size(all) + 1, sizeof(*v));
        json_array_foreach(all, i, o)
                if (v && list_keeps(a, o))
                        v[n++] = o;
        if (!v) {
                json_decref(all);
                list_args_free(a);
                control_error(r, 500, "out of memory");
                return;
        }
        qsort(v, n, sizeof(*v), a->asc ? oldest_first : newest_first);
        json_t *page = json_array();
        for (size_t k = a->from; k < n && k < a->from + a->max; k++)
                json_array_append(page, v[k]);
        if (a->from + a->max < n && asprintf(&r->next_token, "c%lu", a->from + a->max) < 0)
                r->next_token = NULL;
        free(v);
        json_decref(all);
        list_args_free(a);
        http_answer_json(r, 200, page);
}

/* The state filter: state=running,paused (the JS SDK's form) or state=running&state=paused (the
 * Python SDK's); none means both. */
typedef struct states {
        bool running, paused, bad;
} states;

static enum MHD_Result state_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        states *st = cls;
        (void)kind;
        if (strcmp(key, "state"))
                return MHD_YES;
        for (const char *p = value ? value : ""; !st->bad;) {
                size_t n = strcspn(p, ",");
                if (n == 7 && !strncmp(p, "running", 7))
                        st->running = true;
                else if (n == 6 && !strncmp(p, "paused", 6))
                        st->paused = true;
                else
                        st->bad = true;
                if (!p[n])
                        break;
                p += n + 1;
        }
        return MHD_YES;
}

static void list(hreq *r, bool v2)
{
        const char *filter = http_arg(r, "metadata"), *limit = http_arg(r, "limit"), *next = http_arg(r, "nextToken");
        const char *order = http_arg(r, "order"), *tpl = http_arg(r, "template"), *after = http_arg(r, "startedAfter");
        double started_after = 0;
        if (order && strcmp(order, "asc") && strcmp(order, "desc")) {
                control_error(r, 400, "'order' must be asc or desc");
                return;
        }
        if (after && (!rfc3339_parse(after, &started_after) || started_after <= 0)) {
                control_error(r, 400, "'startedAfter' must be an RFC 3339 date-time, e.g. 2026-01-02T03:04:05Z");
                return;
        }
        if (tpl && (!*tpl || strlen(tpl) > NSBOX_TEMPLATE_NAME_MAX * 2)) {
                control_error(r, 400, "'template' must be a template's name");
                return;
        }
        states st = { 0 };
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, state_arg, &st);
        if (st.bad) {
                control_error(r, 400, "'state' must be running, paused or both, comma-separated");
                return;
        }
        if (filter && !metadata_filter_ok(filter)) {
                control_error(r, 400, "'metadata' must be key=value pairs joined by '&', under 4096 bytes");
                return;
        }
        list_args *a = calloc(1, sizeof(*a));
        char *end;
        if (!a || (filter && !(a->filter = strdup(filter))) || (tpl && !(a->tpl = strdup(tpl)))) {
                if (a)
                        list_args_free(a);
                control_error(r, 500, "out of memory");
                return;
        }
        a->max = CONTROL_LIST_MAX;
        a->v2 = v2;
        a->asc = order && !strcmp(order, "asc");
        a->started_after = started_after;
        a->req = r->serial;
        if (limit && (!*limit || (a->max = strtoul(limit, &end, 10)) == 0 || *end || a->max > CONTROL_LIST_MAX)) {
                list_args_free(a);
                control_error(r, 400, "'limit' must be 1-%d", CONTROL_LIST_MAX);
                return;
        }
        a->from_catalog = next && next[0] == 'c';
        if (next && (!next[a->from_catalog] || (a->from = strtoul(next + a->from_catalog, &end, 10), *end) ||
                     (a->from_catalog && !r->d->catalog))) {
                list_args_free(a);
                control_error(r, 400, "'nextToken' is not one this server gave");
                return;
        }
        a->running = !(st.running || st.paused) || st.running;
        a->paused = v2 && (!(st.running || st.paused) || st.paused);
        /* with a cluster catalog: every node's; without it, or when it cannot ask now, this node's */
        if (r->d->catalog && (a->from_catalog || !next) && catalog_list(r->d, r->uid, list_catalog, a) == 0)
                return;
        if (a->from_catalog)
                control_error(r, 503, "the cluster catalog that gave this nextToken is down: list again from the start");
        else
                list_local(r, a);
        list_args_free(a);
}

/* SandboxMetric: what s uses now */
static json_t *metric_json(daemon_state *d, sandbox *s)
{
        nsbox_cgroup_stats cs = { 0 };
        bool has = nsbox_cgroup_stats_read(&s->sup.sb.cg, &cs) == 0;
        char ts[32];
        time_t now = time(NULL);
        control_rfc3339(ts, sizeof(ts), now);
        json_t *info = control_sandbox_json(d, s);
        json_int_t cpus = json_integer_value(json_object_get(info, "cpuCount"));
        json_int_t mem_total = json_integer_value(json_object_get(info, "memoryMB")) << 20;
        json_int_t disk_total = json_integer_value(json_object_get(info, "diskSizeMB")) << 20;
        json_decref(info);
        /* without a cgroup's memory or cpu accounting: its processes' (sandbox.h), walked at most
         * once a second */
        uint64_t rss = 0, cpu_us = 0;
        if (!has || !cs.memory_current || !cs.cpu_usage_us) {
                uint64_t t = now_ns();
                if (!s->usage_ns || t - s->usage_ns >= 1000000000ull) {
                        nsbox_sandbox_usage(&s->sup.sb, &s->usage_rss, &s->usage_cpu_us);
                        s->usage_ns = t;
                }
                rss = s->usage_rss;
                cpu_us = s->usage_cpu_us;
        }
        uint64_t mem = has && cs.memory_current ? cs.memory_current : rss;
        uint64_t used_us = has && cs.cpu_usage_us ? cs.cpu_usage_us : cpu_us;
        double pct = 0;
        uint64_t life_us = (uint64_t)(now - s->created) * 1000000ull;
        if (life_us && cpus)
                pct = 100.0 * (double)used_us / (double)life_us / (double)cpus;
        return json_pack("{ss sI si sf sI sI sI sI sI}", "timestamp", ts, "timestampUnix", (json_int_t)now, "cpuCount", (int)cpus, "cpuUsedPct",
                         pct, "memUsed", (json_int_t)mem, "memTotal", mem_total, "memCache", (json_int_t)0, "diskUsed",
                         (json_int_t)nsbox_sandbox_disk_used(&s->sup.sb), "diskTotal", disk_total);
}

/* GET /sandboxes/metrics?sandbox_ids=A,B: the key's own among them, by id (unknown ones left
 * out, as E2B does); at most the OpenAPI's 100 ids, each once. */
static void metrics_many(hreq *r)
{
        const char *ids = http_arg(r, "sandbox_ids");
        if (!ids || !*ids) {
                control_error(r, 400, "'sandbox_ids' is needed: sandbox ids separated by commas");
                return;
        }
        json_t *out = json_object();
        unsigned n = 0;
        for (const char *p = ids;; p++) {
                size_t len = strcspn(p, ",");
                char id[NSBOX_ID_SIZE];
                if (!len || len >= sizeof(id) || ++n > CONTROL_METRICS_IDS_MAX) {
                        json_decref(out);
                        control_error(r, 400, n > CONTROL_METRICS_IDS_MAX ? "'sandbox_ids': at most %d ids" : "'sandbox_ids': an id is empty or too long",
                                      CONTROL_METRICS_IDS_MAX);
                        return;
                }
                memcpy(id, p, len);
                id[len] = 0;
                if (json_object_get(out, id)) {
                        json_decref(out);
                        control_error(r, 400, "'sandbox_ids': '%s' is given twice", id);
                        return;
                }
                sandbox *s = find_visible(r, id);
                json_t *m = s ? metric_json(r->d, s) : json_null();
                json_object_set_new(out, id, m ? m : json_null());
                p += len;
                if (!*p)
                        break;
        }
        /* nulls held the unknown ids' places for the check of repeats */
        const char *key;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(out, tmp, key, v)
                if (json_is_null(v))
                        json_object_del(out, key);
        http_answer_json(r, 200, json_pack("{so}", "sandboxes", out));
}

/* A query argument that is a whole number up to max: absent leaves *ret; bad is a 400. */
static int query_uint(hreq *r, const char *name, unsigned long long max, unsigned long long *ret)
{
        const char *v = http_arg(r, name);
        char *end;
        if (!v)
                return 0;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *end || *v == '-' || errno || x > max) {
                control_error(r, 400, "'%s' must be a whole number up to %llu", name, max);
                return -EINVAL;
        }
        *ret = x;
        return 0;
}

/* E2B's log levels for syslog's priorities */
static const char *e2b_level(int prio) { return prio <= LOG_ERR ? "error" : prio == LOG_WARNING ? "warn" : prio == LOG_DEBUG ? "debug" : "info"; }

static int e2b_level_rank(const char *level)
{
        static const char *const names[] = { "debug", "info", "warn", "error" };
        for (int i = 0; i < 4; i++)
                if (!strcmp(level, names[i]))
                        return i;
        return -1;
}

/* GET /sandboxes/ID/logs?start=&limit= (v1, the e2b CLI's `sandbox logs`) and
 * /v2/sandboxes/ID/logs?cursor=&direction=&level=&limit=&search=: the sandbox's own log
 * (sandbox_log_add), oldest first (v2 backward: newest first). A line of v1 is the entry as a
 * JSON object, as envd's are. */
static void logs(hreq *r, sandbox *s, bool v2)
{
        unsigned long long from = 0, limit = 1000;
        const char *dir = http_arg(r, "direction"), *level = http_arg(r, "level"), *search = http_arg(r, "search");
        bool back = v2 && dir && !strcmp(dir, "backward");
        int min = v2 && level ? e2b_level_rank(level) : 0;
        if (query_uint(r, v2 ? "cursor" : "start", 1ull << 53, &from) < 0 || query_uint(r, "limit", 1000, &limit) < 0)
                return;
        if (v2 && dir && !back && strcmp(dir, "forward")) {
                control_error(r, 400, "'direction' must be forward or backward");
                return;
        }
        if (min < 0) {
                control_error(r, 400, "'level' must be debug, info, warn or error");
                return;
        }
        if (back && !http_arg(r, "cursor"))
                from = UINT64_MAX;
        json_t *entries = json_array(), *lines = json_array();
        size_t n = json_array_size(s->log);
        for (size_t j = 0; j < n && json_array_size(entries) < limit; j++) {
                json_t *e = json_array_get(s->log, back ? n - 1 - j : j);
                uint64_t ms = (uint64_t)json_integer_value(json_object_get(e, "ms"));
                const char *lv = e2b_level((int)json_integer_value(json_object_get(e, "prio")));
                const char *msg = json_string_value(json_object_get(e, "msg")), *ev = json_string_value(json_object_get(e, "event"));
                if ((back ? ms > from : ms < from) || e2b_level_rank(lv) < min || (search && !strstr(msg, search)))
                        continue;
                char ts[40], t[32];
                control_rfc3339(t, sizeof(t), (time_t)(ms / 1000));
                snprintf(ts, sizeof(ts), "%.19s.%03uZ", t, (unsigned)(ms % 1000));
                json_t *fields = json_pack("{ss ss}", "logger", "nsboxd", "event", ev);
                if (!v2) {
                        json_t *o = json_pack("{ss ss ss ss}", "level", lv, "logger", "nsboxd", "event", ev, "message", msg);
                        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                        json_decref(o);
                        json_array_append_new(lines, json_pack("{ss ss}", "timestamp", ts, "line", line ? line : "{}"));
                        free(line);
                }
                json_array_append_new(entries, json_pack("{ss ss ss so}", "timestamp", ts, "level", lv, "message", msg, "fields", fields));
        }
        if (v2) {
                json_decref(lines);
                http_answer_json(r, 200, json_pack("{so}", "logs", entries));
        } else
                http_answer_json(r, 200, json_pack("{so so}", "logs", lines, "logEntries", entries));
}

/* ---- snapshots and forks: nsbox's snapshots (a sandbox's files; nsbox-protocol(7), snapshot) -- */

/* POST /sandboxes/ID/fork {timeout, count}: the sandbox's files captured once as a snapshot,
 * then count sandboxes made from it, one after the other; each answer says its own outcome. */
static void fork_start(hreq *r, control *k, sandbox *s, json_t *b)
{
        json_t *count = json_object_get(b, "count");
        k->timeout_s = 15; /* the OpenAPI's default */
        if (count && !json_is_null(count) && (!json_is_integer(count) || json_integer_value(count) < 1 || json_integer_value(count) > CONTROL_FORKS_MAX)) {
                control_error(r, 400, "'count' must be an integer, 1-%d", CONTROL_FORKS_MAX);
                return;
        }
        if (seconds(r, json_object_get(b, "timeout"), "timeout", &k->timeout_s) < 0)
                return;
        k->forks = json_is_integer(count) ? (unsigned)json_integer_value(count) : 1;
        /* the forks are what their source is to E2B: its template, metadata, envs and network */
        snprintf(k->template_id, sizeof(k->template_id), "%s", template_of(r->d, s));
        k->meta = json_incref(json_object_get(s->http, "metadata"));
        k->envs = json_incref(json_object_get(s->http, "envs"));
        json_t *in = json_object_get(s->http, "internet");
        k->internet = !json_is_false(in);
        k->public_traffic = http_public_traffic(s);
        if (interp_template(k->template_id)) { /* its kernels are memory, which a snapshot of files does not carry */
                control_error(r, 400, "a code-interpreter sandbox cannot be forked: nsbox's snapshots carry files, not running kernels");
                return;
        }
        if (!(k->forked = json_array())) {
                control_error(r, 500, "out of memory");
                return;
        }
        new_name(r, k->snapshot, sizeof(k->snapshot), "fork");
        k->op = OP_FORK_SNAPSHOT;
        k->step_id = http_rpc(r, "snapshot", json_pack("{ss ss}", "sandbox", s->sup.id, "name", k->snapshot));
}

/* The next fork, or the answer once all were tried. */
static void fork_next(hreq *r, control *k)
{
        if (json_array_size(k->forked) >= k->forks) {
                http_answer_json(r, 201, json_incref(k->forked));
                return;
        }
        json_t *p = json_pack("{sI ss ss}", "timeout", (json_int_t)(k->timeout_s ? k->timeout_s : CONTROL_MAX_TIMEOUT_S), "on_expiry", "destroy",
                              "from", k->snapshot);
        if (nsbox_dconfig_template(r->d->conf, k->template_id))
                json_object_set_new(p, "template", json_string(k->template_id));
        json_object_set_new(p, "workdir", json_string("/home/user"));
        if (!nsbox_dconfig_template(r->d->conf, k->template_id))
                json_object_set_new(p, "writable_root", json_true());
        if (k->internet && r->d->conf->http_internet && !nsbox_dconfig_template(r->d->conf, k->template_id))
                json_object_set_new(p, "net", json_string("nat"));
        k->op = OP_FORK;
        k->step_id = http_rpc(r, "create", p);
}

static void fork_done(hreq *r, control *k, json_t *msg)
{
        const char *why, *code = rpc_error_code(msg, &why);
        sandbox *s = code ? NULL : created(r, k, msg);
        if (s)
                json_array_append_new(k->forked, json_pack("{so}", "sandbox", created_json(r, s)));
        else
                json_array_append_new(k->forked, json_pack("{s{si ss}}", "error", "code", code ? (int)create_status(r, code) : 500, "message",
                                                           code ? why : "the sandbox went away as it was made"));
        fork_next(r, k);
}

/* GET /snapshots[?sandboxID=&name=&limit=&nextToken=]: the user's snapshots by name, in pages. */
static void snapshots_list(hreq *r, control *k)
{
        k->op = OP_SNAPSHOTS;
        k->step_id = http_rpc(r, "snapshot_list", json_object());
}

static void snapshots_answer(hreq *r, json_t *res)
{
        const char *sid = http_arg(r, "sandboxID"), *name = http_arg(r, "name"), *limit = http_arg(r, "limit"), *next = http_arg(r, "nextToken");
        unsigned long max = 100;
        char *end;
        if (limit && (!*limit || (max = strtoul(limit, &end, 10)) == 0 || *end || max > CONTROL_LIST_MAX)) {
                control_error(r, 400, "'limit' must be 1-%d", CONTROL_LIST_MAX);
                return;
        }
        json_t *arr = json_array(), *x;
        size_t i;
        const char *last = NULL;
        json_array_foreach(json_object_get(res, "snapshots"), i, x) { /* sorted by name */
                const char *n = json_string_value(json_object_get(x, "name")), *src = json_string_value(json_object_get(x, "source"));
                if (!n || (next && strcmp(n, next) <= 0) || (name && strcmp(n, name)) || (sid && (!src || strcmp(src, sid))))
                        continue;
                if (json_array_size(arr) == max) {
                        if (last && asprintf(&r->next_token, "%s", last) < 0)
                                r->next_token = NULL;
                        break;
                }
                json_array_append_new(arr, json_pack("{ss s[s]}", "snapshotID", n, "names", n));
                last = n;
        }
        http_answer_json(r, 200, arr);
}

/* connect's answer: 201 when it resumed the sandbox, else 200 */
static void connected(hreq *r, control *k, sandbox *s)
{
        if (!s->http && http_sandbox_token(s) < 0) {
                control_error(r, 500, "out of memory");
                return;
        }
        /* rebooted (a pause that kept no memory): a code interpreter's server starts again, with
         * the create's envVars, before the answer, as its create waited for it */
        bool restart = s->rebooted && interp_template(template_of(r->d, s));
        s->rebooted = false;
        if (restart) {
                json_t *p = interp_start_params(interp_ident(s), json_object_get(s->http, "envs"), k->why, sizeof(k->why));
                if (!p) {
                        control_error(r, 500, "the code interpreter did not start again: %s", k->why);
                        return;
                }
                k->reconnect = true;
                snprintf(k->sandbox_id, sizeof(k->sandbox_id), "%s", s->sup.id);
                k->op = OP_INTERP_START;
                k->step_id = http_rpc(r, "call", interp_call(s->sup.id, "exec", p));
                return;
        }
        http_answer_json(r, k->was_paused ? 201 : 200, created_json(r, s));
}

/* GET .../metrics[?start=&end=] (Unix seconds): nsbox samples a sandbox when asked, not on a
 * clock, so the one sample is now's, answered when the range holds now (E2B's samples are 5 s
 * apart: an end up to 5 s before now still holds it) and [] for a range of the past. */
static void metrics(hreq *r, sandbox *s)
{
        unsigned long long start = 0, end = ULLONG_MAX, now = (unsigned long long)time(NULL);
        if (query_uint(r, "start", LLONG_MAX, &start) < 0 || query_uint(r, "end", LLONG_MAX, &end) < 0)
                return;
        if (start > end) {
                control_error(r, 400, "'start' is after 'end'");
                return;
        }
        json_t *arr = json_array();
        if (start <= now && (end == ULLONG_MAX || end + CONTROL_METRICS_BUCKET_S >= now))
                json_array_append_new(arr, metric_json(r->d, s));
        http_answer_json(r, 200, arr);
}

/* /sandboxes/{id}[/what] with a sandbox of the key's user.  A key reaches its own user's
 * sandboxes and no other's, root's key too (root's reach over every sandbox is the socket's). */
static void on_sandbox(hreq *r, control *k, sandbox *s, const char *what)
{
        const char *m = r->method;
        bool post = !strcmp(m, "POST");
        json_t *b = NULL;
        if (post && !(b = body_json(r)))
                return;
        json_t *id = json_string(s->sup.id);
        if (!*what && !strcmp(m, "GET")) {
                http_answer_json(r, 200, control_sandbox_json(r->d, s));
        } else if (!*what && !strcmp(m, "DELETE")) {
                k->op = OP_KILL;
                k->step_id = http_rpc(r, "destroy", json_pack("{sO}", "sandbox", id));
        } else if (!strcmp(what, "/metrics") && !strcmp(m, "GET")) {
                metrics(r, s);
        } else if (!strcmp(what, "/network") && !strcmp(m, "PUT")) {
                if ((b = body_json(r)))
                        network_update(r, s, b);
        } else if (!strcmp(what, "/logs") && !strcmp(m, "GET")) {
                logs(r, s, !strncmp(r->url, "/v2/", 4));
        } else if (!strcmp(what, "/pause") && post) {
                k->memory = true; /* false: its files kept, its processes killed (E2B's filesystem-only pause) */
                if (boolean(r, json_object_get(b, "memory"), "memory", &k->memory) < 0)
                        ;
                else if (s->paused)
                        control_error(r, 409, "Sandbox %s is already paused", s->sup.id);
                else {
                        k->op = OP_PAUSE;
                        k->step_id = http_rpc(r, "pause", json_pack("{sO sb}", "sandbox", id, "memory", k->memory));
                }
        } else if ((!strcmp(what, "/connect") || !strcmp(what, "/resume")) && post) {
                k->timeout_s = CONTROL_DEFAULT_TIMEOUT_S;
                k->memory = true; /* false (the SDKs' onResume "reboot"): a paused sandbox resumes rebooted */
                if (seconds(r, json_object_get(b, "timeout"), "timeout", &k->timeout_s) == 0 &&
                    boolean(r, json_object_get(b, "memory"), "memory", &k->memory) == 0) {
                        k->op = OP_CONNECT;
                        k->resumed = k->was_paused = s->paused;
                        if (!strcmp(what, "/resume") && !s->paused)
                                control_error(r, 409, "Sandbox %s is already running", s->sup.id);
                        else if (s->paused)
                                k->step_id = http_rpc(r, "resume", json_pack("{sO sb}", "sandbox", id, "memory", k->memory));
                        else if (k->timeout_s && (!s->expires_ns || s->expires_ns >= now_ns() + k->timeout_s * 1000000000ull))
                                connected(r, k, s); /* a connect extends a running sandbox's time, never shortens it */
                        else
                                k->step_id = http_rpc(r, "set_timeout", json_pack("{sO sI}", "sandbox", id, "timeout", (json_int_t)k->timeout_s));
                }
        } else if ((!strcmp(what, "/timeout") || !strcmp(what, "/refreshes")) && post) {
                json_t *t = json_object_get(b, !strcmp(what, "/timeout") ? "timeout" : "duration");
                if (seconds(r, t, "timeout", &k->timeout_s) == 0) {
                        k->op = OP_TIMEOUT;
                        k->step_id = http_rpc(r, "set_timeout", json_pack("{sO sI}", "sandbox", id, "timeout", (json_int_t)k->timeout_s));
                }
        } else if (!strcmp(what, "/snapshots") && post) {
                json_t *name = json_object_get(b, "name");
                if (name && !json_is_null(name) && (!json_is_string(name) || nsbox_snapshot_name_check(json_string_value(name), NULL) < 0)) {
                        control_error(r, 400, "'name' must be 1-%d of [A-Za-z0-9._-], starting with a letter or digit", NSBOX_SNAPSHOT_NAME_MAX);
                } else {
                        k->op = OP_SNAPSHOT;
                        if (json_is_string(name))
                                snprintf(k->snapshot, sizeof(k->snapshot), "%s", json_string_value(name));
                        else
                                new_name(r, k->snapshot, sizeof(k->snapshot), "snapshot");
                        k->step_id = http_rpc(r, "snapshot", json_pack("{sO ss}", "sandbox", id, "name", k->snapshot));
                }
        } else if (!strcmp(what, "/fork") && post) {
                fork_start(r, k, s, b);
        } else {
                control_error(r, 404, "%s %s is not part of the API nsbox serves", m, r->url);
        }
        json_decref(id);
        json_decref(b);
}

static void on_msg(hreq *r, json_t *msg)
{
        control *k = r->state;
        json_t *mid = json_object_get(msg, "id");
        if (!k || !json_is_integer(mid) || (uint64_t)json_integer_value(mid) != k->step_id)
                return; /* an event, or an answer not waited for */
        const char *why, *code = rpc_error_code(msg, &why);
        json_t *res = json_object_get(msg, "result");
        switch (k->op) {
        case OP_CREATE:
                create_done(r, k, msg);
                return;
        case OP_INTERP_START:
        case OP_INTERP_ENVS:
        case OP_INTERP_WAIT:
        case OP_INTERP_FAILED:
                interp_step(r, k, msg);
                return;
        case OP_KILL:
        case OP_PAUSE:
        case OP_TIMEOUT:
                /* a pause nsboxd cannot do (no cgroup to freeze) is not E2B's 409, which the SDKs
                 * read as "already paused" */
                if (code)
                        control_error(r, !strcmp(code, "not_found") ? 404 : k->op == OP_PAUSE ? 500 : http_status_of(code), "%s", why);
                else
                        http_answer(r, 204, NULL, NULL, 0);
                return;
        case OP_SNAPSHOT:
                if (code)
                        control_error(r, http_status_of(code), "%s", why);
                else
                        http_answer_json(r, 201, json_pack("{ss s[s]}", "snapshotID", k->snapshot, "names", k->snapshot));
                return;
        case OP_FORK_SNAPSHOT:
                if (code)
                        control_error(r, http_status_of(code), "%s", why);
                else
                        fork_next(r, k);
                return;
        case OP_FORK:
                fork_done(r, k, msg);
                return;
        case OP_SNAPSHOTS:
                if (code)
                        control_error(r, http_status_of(code), "%s", why);
                else
                        snapshots_answer(r, res);
                return;
        case OP_DELETE_SNAPSHOT:
                if (code)
                        control_error(r, http_status_of(code), "%s", why);
                else
                        http_answer(r, 204, NULL, NULL, 0);
                return;
        case OP_CONNECT: {
                if (code) {
                        control_error(r, http_status_of(code), "%s", why);
                        return;
                }
                const char *id = json_string_value(json_object_get(res, "id"));
                sandbox *s = id ? find_visible(r, id) : NULL;
                if (!s) {
                        control_error(r, 404, "the sandbox is gone");
                        return;
                }
                if (k->resumed) { /* resumed: now its timeout */
                        k->resumed = false;
                        k->op = OP_CONNECT;
                        k->step_id = http_rpc(r, "set_timeout", json_pack("{ss sI}", "sandbox", id, "timeout", (json_int_t)k->timeout_s));
                        return;
                }
                connected(r, k, s);
                return;
        }
        }
}

void control_request(hreq *r)
{
        control *k = calloc(1, sizeof(*k));
        if (!k) {
                control_error(r, 500, "out of memory");
                return;
        }
        r->state = k;
        r->state_free = control_free;
        r->on_msg = on_msg;
        const char *u = r->url, *m = r->method;
        if (!strcmp(u, "/sandboxes") || !strcmp(u, "/v2/sandboxes")) {
                if (!strcmp(m, "POST"))
                        create_start(r, k);
                else if (!strcmp(m, "GET"))
                        list(r, u[1] == 'v');
                else
                        control_error(r, 405, "%s is not allowed on %s", m, u);
                return;
        }
        if (!strcmp(u, "/snapshots")) {
                if (!strcmp(m, "GET"))
                        snapshots_list(r, k);
                else
                        control_error(r, 405, "%s is not allowed on %s", m, u);
                return;
        }
        if (!strcmp(u, "/sandboxes/metrics")) {
                if (!strcmp(m, "GET"))
                        metrics_many(r);
                else
                        control_error(r, 405, "%s is not allowed on %s", m, u);
                return;
        }
        if ((!strcmp(u, "/templates") || !strncmp(u, "/templates/", 11)) && !strcmp(m, "GET")) {
                templates_request(r);
                return;
        }
        if (!strncmp(u, "/templates/", 11) && !strcmp(m, "DELETE")) { /* deleteSnapshot: a snapshot, not a template */
                if (nsbox_snapshot_name_check(u + 11, NULL) < 0) {
                        control_error(r, 404, "snapshot '%.100s' not found", u + 11);
                        return;
                }
                k->op = OP_DELETE_SNAPSHOT;
                k->step_id = http_rpc(r, "snapshot_delete", json_pack("{ss}", "name", u + 11));
                return;
        }
        const char *rest = !strncmp(u, "/sandboxes/", 11) ? u + 11 : !strncmp(u, "/v2/sandboxes/", 14) ? u + 14 : NULL;
        if (!rest && (!strncmp(u, "/templates", 10) || !strncmp(u, "/v2/templates", 13) || !strncmp(u, "/v3/templates", 13))) {
                control_error(r, 501, "nsbox builds no E2B templates: a template is nsboxd's configuration (nsboxd(8), TEMPLATES), "
                                      "a snapshot (createSnapshot) serves as one too");
                return;
        }
        if (!rest) {
                control_error(r, 404, "%s %s is not part of the API nsbox serves", m, u);
                return;
        }
        char id[NSBOX_ID_SIZE];
        size_t n = strcspn(rest, "/");
        if (n == 0 || n >= sizeof(id)) {
                control_error(r, 404, "Sandbox not found");
                return;
        }
        memcpy(id, rest, n);
        id[n] = 0;
        sandbox *s = find_visible(r, id);
        if (!s) {
                char why[128];
                control_error(r, 404, "Sandbox %s not found%s", id, http_elsewhere(r, id, why, sizeof(why)));
                return;
        }
        on_sandbox(r, k, s, rest + n);
}
