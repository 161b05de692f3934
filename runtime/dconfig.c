/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "dconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "util.h"

#define CONFIG_MAX_BYTES (1u << 20)

typedef struct cctx {
        const char *source;
        nsbox_error *err;
} cctx;

static int bad(cctx *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(cctx *c, const char *key, const char *fmt, ...)
{
        char why[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return nsbox_err(c->err, 0, "%s: key '%s': %s", c->source, key, why);
}

static int check_keys(cctx *c, json_t *obj, const char *section, const char *const *known)
{
        const char *key = nsbox_json_unknown_key(obj, known);
        if (!key)
                return 0;
        char full[256];
        snprintf(full, sizeof(full), "%s%s%.100s", section, *section ? "." : "", key);
        return bad(c, full, "unknown key");
}

static int get_uint(cctx *c, json_t *obj, const char *key, const char *full, unsigned min, unsigned max, unsigned *ret)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
                return bad(c, full, "expected an integer from %u to %u", min, max);
        *ret = (unsigned)json_integer_value(v);
        return 0;
}

static int get_seconds(cctx *c, json_t *obj, const char *key, uint64_t *ret_ms)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e8)
                return bad(c, key, "expected a number of seconds from 0 to 100000000");
        *ret_ms = (uint64_t)(json_number_value(v) * 1000.0 + 0.5);
        return 0;
}

static int get_size(cctx *c, json_t *obj, const char *key, uint64_t *ret)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
                *ret = (uint64_t)json_integer_value(v);
                return 0;
        }
        if (!json_is_string(v) || parse_size(json_string_value(v), ret) < 0)
                return bad(c, key, "expected a size such as \"16G\" or a number of bytes");
        return 0;
}

static bool good_name(const char *s)
{
        size_t n = strlen(s);
        if (n < 1 || n > NSBOX_TEMPLATE_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-", *s)))
                        return false;
        return true;
}

static int parse_clients(cctx *c, json_t *v, nsbox_dconfig *ret)
{
        static const char *const known[] = { "uids", "groups", NULL };
        if (!json_is_object(v))
                return bad(c, "clients", "expected an object with \"uids\" and \"groups\"");
        int r = check_keys(c, v, "clients", known);
        if (r < 0)
                return r;
        json_t *uids = json_object_get(v, "uids"), *groups = json_object_get(v, "groups");
        if (uids && (!json_is_array(uids) || json_array_size(uids) > NSBOX_DCONFIG_MAX_CLIENTS))
                return bad(c, "clients.uids", "expected an array of at most %u user ids or names", NSBOX_DCONFIG_MAX_CLIENTS);
        if (groups && (!json_is_array(groups) || json_array_size(groups) > NSBOX_DCONFIG_MAX_CLIENTS))
                return bad(c, "clients.groups", "expected an array of at most %u group ids or names", NSBOX_DCONFIG_MAX_CLIENTS);
        ret->client_uids = calloc(json_array_size(uids) + 1, sizeof(uid_t));
        ret->client_gids = calloc(json_array_size(groups) + 1, sizeof(gid_t));
        if (!ret->client_uids || !ret->client_gids)
                return nsbox_err(c->err, ENOMEM, "config");
        size_t i;
        json_t *e;
        json_array_foreach(uids, i, e) {
                if (json_is_integer(e) && json_integer_value(e) > 0 && json_integer_value(e) < 0xffffffffLL) {
                        ret->client_uids[ret->n_client_uids++] = (uid_t)json_integer_value(e);
                        continue;
                }
                struct passwd *pw = json_is_string(e) ? getpwnam(json_string_value(e)) : NULL;
                if (!pw && json_is_string(e) && geteuid() != 0) /* a user given root's example: both reasons */
                        return bad(c, "clients.uids", "entry %zu: no user '%.64s' here, and only a root nsboxd serves other users (one of yours would let them act as you)",
                                   i, json_string_value(e));
                if (!pw || pw->pw_uid == 0)
                        return bad(c, "clients.uids", "entry %zu: expected a user id other than 0, or the name of a user of this host", i);
                ret->client_uids[ret->n_client_uids++] = pw->pw_uid;
        }
        json_array_foreach(groups, i, e) {
                if (json_is_integer(e) && json_integer_value(e) > 0 && json_integer_value(e) < 0xffffffffLL) {
                        ret->client_gids[ret->n_client_gids++] = (gid_t)json_integer_value(e);
                        continue;
                }
                struct group *gr = json_is_string(e) ? getgrnam(json_string_value(e)) : NULL;
                if (!gr && json_is_string(e) && geteuid() != 0)
                        return bad(c, "clients.groups", "entry %zu: no group '%.64s' here, and only a root nsboxd serves other users (one of yours would let them act as you)",
                                   i, json_string_value(e));
                if (!gr || gr->gr_gid == 0)
                        return bad(c, "clients.groups", "entry %zu: expected a group id other than 0, or the name of a group of this host", i);
                ret->client_gids[ret->n_client_gids++] = gr->gr_gid;
        }
        return 0;
}

/* A template's "warmup": the argv run once in each of its pooled sandboxes, [] for none. */
static int parse_warmup(cctx *c, json_t *w, const char *full, nsbox_template *tp)
{
        if (!w)
                return 0;
        char key[160];
        snprintf(key, sizeof(key), "%s.warmup", full);
        if (!json_is_array(w) || json_array_size(w) > NSBOX_DCONFIG_MAX_WARMUP_ARGS)
                return bad(c, key, "expected an array of at most %u strings (a command and its arguments; [] for none)",
                           NSBOX_DCONFIG_MAX_WARMUP_ARGS);
        size_t i;
        json_t *a;
        json_array_foreach(w, i, a)
                if (!json_is_string(a) || json_string_length(a) == 0 || json_string_length(a) > 1024 ||
                    strlen(json_string_value(a)) != json_string_length(a))
                        return bad(c, key, "entry %zu: expected a string of 1-1024 bytes without NUL", i);
        tp->warmup = json_deep_copy(w);
        return tp->warmup ? 0 : nsbox_err(c->err, ENOMEM, "config");
}

static int parse_templates(cctx *c, json_t *v, nsbox_dconfig *ret)
{
        static const char *const known[] = { "create", "pool", "max", "warmup", NULL };
        if (!json_is_object(v) || json_object_size(v) > NSBOX_DCONFIG_MAX_TEMPLATES)
                return bad(c, "templates", "expected an object of at most %u templates", NSBOX_DCONFIG_MAX_TEMPLATES);
        ret->templates = calloc(json_object_size(v) + 1, sizeof(nsbox_template));
        if (!ret->templates)
                return nsbox_err(c->err, ENOMEM, "config");
        const char *name;
        json_t *t;
        unsigned pooled = 0;
        json_object_foreach(v, name, t) {
                char full[128];
                snprintf(full, sizeof(full), "templates.%.64s", name);
                if (!good_name(name))
                        return bad(c, full, "a template name is 1-%d of [A-Za-z0-9._-], not starting with '.' or '-'", NSBOX_TEMPLATE_NAME_MAX);
                if (!json_is_object(t))
                        return bad(c, full, "expected an object with \"create\", \"pool\" and \"max\"");
                int r = check_keys(c, t, full, known);
                if (r < 0)
                        return r;
                nsbox_template *tp = &ret->templates[ret->n_templates++];
                snprintf(tp->name, sizeof(tp->name), "%s", name);
                tp->max = ret->max_sandboxes;
                char key[160];
                snprintf(key, sizeof(key), "%s.pool", full);
                if ((r = get_uint(c, t, "pool", key, 0, NSBOX_DCONFIG_MAX_POOL, &tp->pool)) < 0)
                        return r;
                snprintf(key, sizeof(key), "%s.max", full);
                if ((r = get_uint(c, t, "max", key, 1, NSBOX_DCONFIG_MAX_SANDBOXES, &tp->max)) < 0)
                        return r;
                if (tp->pool > tp->max) {
                        snprintf(key, sizeof(key), "%s.pool", full);
                        return bad(c, key, "a pool of %u is more than the template's max of %u", tp->pool, tp->max);
                }
                json_t *cr = json_object_get(t, "create");
                if (cr && !json_is_object(cr)) {
                        snprintf(key, sizeof(key), "%s.create", full);
                        return bad(c, key, "expected an object: the params of the create method (nsbox-protocol(7))");
                }
                tp->create = cr ? json_deep_copy(cr) : json_object();
                if (!tp->create)
                        return nsbox_err(c->err, ENOMEM, "config");
                if ((r = parse_warmup(c, json_object_get(t, "warmup"), full, tp)) < 0)
                        return r;
                pooled += tp->pool;
        }
        if (pooled > ret->max_sandboxes)
                return bad(c, "templates", "the pools hold %u sandboxes, more than max_sandboxes (%u)", pooled, ret->max_sandboxes);
        return 0;
}

int nsbox_dconfig_check_listen(const char *s)
{
        size_t n = strlen(s);
        const char *colon = strrchr(s, ':');
        if (n >= NSBOX_HTTP_LISTEN_MAX || !colon || colon == s)
                return -EINVAL;
        uint64_t port;
        if (parse_u64(colon + 1, 1, 65535, &port) < 0 || colon[1] < '1' || colon[1] > '9')
                return -EINVAL;
        char addr[NSBOX_HTTP_LISTEN_MAX];
        unsigned char buf[16];
        if (s[0] == '[') {
                if (colon[-1] != ']' || colon - s < 3)
                        return -EINVAL;
                snprintf(addr, sizeof(addr), "%.*s", (int)(colon - s - 2), s + 1);
                return inet_pton(AF_INET6, addr, buf) == 1 ? 0 : -EINVAL;
        }
        snprintf(addr, sizeof(addr), "%.*s", (int)(colon - s), s);
        return inet_pton(AF_INET, addr, buf) == 1 ? 0 : -EINVAL;
}

/* NAME[:PORT]: a lowercase DNS name, and the port of the TLS proxy in front when it is not 443
 * (the SDKs put it in every URL they build from the domain). */
static bool domain_ok(const char *ds)
{
        size_t n = ds ? strcspn(ds, ":") : 0;
        if (!n || n > 253 || strspn(ds, "abcdefghijklmnopqrstuvwxyz0123456789.-") != n || ds[0] == '.' || ds[0] == '-' || ds[n - 1] == '.')
                return false;
        if (!ds[n])
                return true;
        const char *p = ds + n + 1;
        size_t digits = strspn(p, "0123456789");
        return digits >= 1 && digits <= 5 && !p[digits] && p[0] != '0' && atoi(p) <= 65535;
}

static int parse_http(cctx *c, json_t *v, nsbox_dconfig *ret)
{
        static const char *const known[] = { "listen", "keys", "domain", "internet", "public_traffic", NULL };
        if (!json_is_object(v))
                return bad(c, "http", "expected an object with \"listen\", \"keys\", \"domain\", \"internet\", \"public_traffic\"");
        int r = check_keys(c, v, "http", known);
        if (r < 0)
                return r;
        json_t *l = json_object_get(v, "listen"), *k = json_object_get(v, "keys");
        if (l && (!json_is_string(l) || (json_string_value(l)[0] && nsbox_dconfig_check_listen(json_string_value(l)) < 0)))
                return bad(c, "http.listen", "expected \"ADDR:PORT\": an IPv4 address or a bracketed IPv6 one, and a port from 1 to 65535"
                                             " (\"\": off)");
        if (l)
                snprintf(ret->http_listen, sizeof(ret->http_listen), "%s", json_string_value(l));
        const char *ks = json_string_value(k);
        if (k && (!ks || ks[0] != '/' || strlen(ks) >= 4096))
                return bad(c, "http.keys", "expected the absolute path of the API key file");
        if (ks && !(ret->http_keys = strdup(ks)))
                return nsbox_err(c->err, ENOMEM, "config");
        json_t *dm = json_object_get(v, "domain"), *in = json_object_get(v, "internet");
        const char *ds = json_string_value(dm);
        if (dm && !domain_ok(ds))
                return bad(c, "http.domain", "expected a lowercase DNS name, e.g. \"sandbox.example.com\", and the port the clients use when"
                                             " it is not 443, e.g. \"sandbox.example.com:8443\" (PORT-ID.DOMAIN reaches a sandbox's port)");
        if (ds && !(ret->http_domain = strdup(ds)))
                return nsbox_err(c->err, ENOMEM, "config");
        if (in && !json_is_boolean(in))
                return bad(c, "http.internet", "expected true or false (whether E2B sandboxes reach the internet unless they ask not to)");
        if (in)
                ret->http_internet = json_is_true(in);
        json_t *pt = json_object_get(v, "public_traffic");
        if (pt && !json_is_boolean(pt))
                return bad(c, "http.public_traffic", "expected true or false (whether sandboxes' ports are reachable without a traffic token unless they ask not to be)");
        if (pt)
                ret->http_public_traffic = json_is_true(pt);
        return 0;
}

/* HOST:PORT (a DNS name or IPv4), [ADDR6]:PORT, or unix:/PATH */
static bool redis_ok(const char *s)
{
        if (!s || strlen(s) > 300)
                return false;
        if (!strncmp(s, "unix:", 5))
                return s[5] == '/' && strlen(s + 5) < 108;
        const char *colon = strrchr(s, ':');
        if (!colon || colon == s)
                return false;
        const char *p = colon + 1;
        size_t digits = strspn(p, "0123456789"), hl = (size_t)(colon - s);
        if (digits < 1 || digits > 5 || p[digits] || p[0] == '0' || atoi(p) > 65535)
                return false;
        if (s[0] == '[') {
                char a[64];
                unsigned char buf[16];
                if (hl < 3 || s[hl - 1] != ']' || hl - 2 >= sizeof(a))
                        return false;
                snprintf(a, sizeof(a), "%.*s", (int)(hl - 2), s + 1);
                return inet_pton(AF_INET6, a, buf) == 1;
        }
        return hl <= 253 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == hl && s[0] != '.' && s[0] != '-';
}

static int parse_cluster(cctx *c, json_t *v, nsbox_dconfig *ret)
{
        static const char *const known[] = { "node", "agent_check", "redis", "catalog_ttl", NULL };
        if (!json_is_object(v))
                return bad(c, "cluster", "expected an object with \"node\", \"agent_check\", \"redis\", \"catalog_ttl\"");
        int r = check_keys(c, v, "cluster", known);
        if (r < 0)
                return r;
        json_t *n = json_object_get(v, "node"), *a = json_object_get(v, "agent_check");
        if (n && !nsbox_node_ok(json_string_value(n)))
                return bad(c, "cluster.node", "expected a node name: 1 to 24 of a-z, 0-9 and '-', starting and ending with a letter or digit");
        if (n)
                snprintf(ret->node, sizeof(ret->node), "%s", json_string_value(n));
        if (a && (!json_is_string(a) || nsbox_dconfig_check_listen(json_string_value(a)) < 0))
                return bad(c, "cluster.agent_check", "expected \"ADDR:PORT\": an IPv4 address or a bracketed IPv6 one, and a port from 1 to 65535");
        if (a)
                snprintf(ret->agent_check, sizeof(ret->agent_check), "%s", json_string_value(a));
        json_t *rd = json_object_get(v, "redis");
        if (rd && !redis_ok(json_string_value(rd)))
                return bad(c, "cluster.redis", "expected \"HOST:PORT\" (a lowercase DNS name or an IPv4 address), \"[ADDR6]:PORT\" or \"unix:/PATH\"");
        if (rd && !(ret->redis = strdup(json_string_value(rd))))
                return nsbox_err(c->err, ENOMEM, "config");
        json_t *ttl = json_object_get(v, "catalog_ttl");
        if (ttl && (!json_is_number(ttl) || json_number_value(ttl) < 1 || json_number_value(ttl) > 3600))
                return bad(c, "cluster.catalog_ttl", "expected 1 to 3600 seconds (how long a node's records outlive its last heartbeat)");
        if (ttl)
                ret->catalog_ttl_ms = (uint64_t)(json_number_value(ttl) * 1000.0 + 0.5);
        return 0;
}

/* A quarter of the host's memory, at least 1 GiB: a sandbox's writable layer is a tmpfs, host RAM. */
static uint64_t default_max_disk(void)
{
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        uint64_t quarter = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 4 : 0;
        return quarter > (1ull << 30) ? quarter : 1ull << 30;
}

void nsbox_dconfig_defaults(nsbox_dconfig *ret)
{
        *ret = (nsbox_dconfig){ .max_sandboxes = 1024, .max_per_uid = 256, .default_memory = 512ull << 20, .drain_timeout_ms = 10000,
                                .keep_timeout_ms = 600000, .max_connections_per_uid = 256, .max_request_bytes_per_uid = 64ull << 20,
                                .request_timeout_ms = 30000, .handshake_timeout_ms = 10000, .max_disk = default_max_disk(), .http_internet = true,
                                .http_public_traffic = true, .catalog_ttl_ms = 15000 };
}

int nsbox_dconfig_parse(json_t *root, const char *source, nsbox_dconfig *ret, nsbox_error *err)
{
        static const char *const known[] = { "max_sandboxes", "max_per_uid", "memory_budget", "default_memory", "timeout",
                                             "idle_timeout", "on_expiry", "drain_timeout", "on_stop", "keep_timeout", "clients",
                                             "templates", "max_connections_per_uid", "max_request_bytes_per_uid",
                                             "request_timeout", "handshake_timeout", "max_disk", "max_disk_per_uid", "http", "cluster", NULL };
        cctx c = { .source = source, .err = err };
        nsbox_dconfig_defaults(ret);
        if (!(ret->source = strdup(source)))
                return nsbox_err(err, ENOMEM, "config");
        int r;
        if (!json_is_object(root))
                r = nsbox_err(err, 0, "%s: expected a JSON object", source);
        else if ((r = check_keys(&c, root, "", known)) < 0 ||
                 (r = get_uint(&c, root, "max_sandboxes", "max_sandboxes", 1, NSBOX_DCONFIG_MAX_SANDBOXES, &ret->max_sandboxes)) < 0 ||
                 (r = get_uint(&c, root, "max_per_uid", "max_per_uid", 1, NSBOX_DCONFIG_MAX_SANDBOXES, &ret->max_per_uid)) < 0 ||
                 (r = get_size(&c, root, "memory_budget", &ret->memory_budget)) < 0 ||
                 (r = get_size(&c, root, "default_memory", &ret->default_memory)) < 0 ||
                 (r = get_seconds(&c, root, "timeout", &ret->timeout_ms)) < 0 ||
                 (r = get_seconds(&c, root, "idle_timeout", &ret->idle_timeout_ms)) < 0 ||
                 (r = get_seconds(&c, root, "drain_timeout", &ret->drain_timeout_ms)) < 0 ||
                 (r = get_seconds(&c, root, "keep_timeout", &ret->keep_timeout_ms)) < 0 ||
                 (r = get_uint(&c, root, "max_connections_per_uid", "max_connections_per_uid", 1, NSBOX_DCONFIG_MAX_CONNECTIONS,
                               &ret->max_connections_per_uid)) < 0 ||
                 (r = get_size(&c, root, "max_request_bytes_per_uid", &ret->max_request_bytes_per_uid)) < 0 ||
                 (r = get_seconds(&c, root, "request_timeout", &ret->request_timeout_ms)) < 0 ||
                 (r = get_seconds(&c, root, "handshake_timeout", &ret->handshake_timeout_ms)) < 0 ||
                 (r = get_size(&c, root, "max_disk", &ret->max_disk)) < 0 ||
                 (r = get_size(&c, root, "max_disk_per_uid", &ret->max_disk_per_uid)) < 0)
                ;
        else {
                json_t *v = json_object_get(root, "on_expiry");
                const char *s = json_string_value(v);
                if (v && (!s || (strcmp(s, "destroy") && strcmp(s, "pause") && strcmp(s, "pause_files"))))
                        r = bad(&c, "on_expiry", "expected \"destroy\", \"pause\" or \"pause_files\"");
                ret->expiry_pause = s && strcmp(s, "destroy");
                ret->expiry_files = s && !strcmp(s, "pause_files");
                v = json_object_get(root, "on_stop");
                s = json_string_value(v);
                if (r == 0 && v && (!s || (strcmp(s, "destroy") && strcmp(s, "keep"))))
                        r = bad(&c, "on_stop", "expected \"destroy\" or \"keep\"");
                ret->keep_on_stop = s && !strcmp(s, "keep");
                ret->max_per_uid_given = json_object_get(root, "max_per_uid") != NULL;
                if (!ret->max_per_uid_given) /* a fair share for each tenant */
                        ret->max_per_uid = ret->max_sandboxes / 4 ? ret->max_sandboxes / 4 : 1;
                if (r == 0 && ret->max_request_bytes_per_uid < (1u << 20))
                        r = bad(&c, "max_request_bytes_per_uid", "at least 1M");
                if (r == 0 && ret->max_disk < (1u << 20))
                        r = bad(&c, "max_disk", "at least 1M");
                if (r == 0 && json_object_get(root, "max_disk_per_uid") && ret->max_disk_per_uid < (1u << 20))
                        r = bad(&c, "max_disk_per_uid", "at least 1M");
                if (r == 0 && ret->keep_on_stop && ret->keep_timeout_ms == 0)
                        r = bad(&c, "keep_timeout", "kept sandboxes wait this long for the next nsboxd: more than 0 seconds");
                if (r == 0 && ret->memory_budget && ret->default_memory < (1u << 20))
                        r = bad(&c, "default_memory", "with a memory_budget, sandboxes that name no limit get this one: at least 1M");
                if (r == 0 && ret->default_memory > ret->memory_budget && ret->memory_budget)
                        r = bad(&c, "default_memory", "more than the memory_budget");
                if (r == 0 && (v = json_object_get(root, "clients")))
                        r = parse_clients(&c, v, ret);
                if (r == 0 && (v = json_object_get(root, "templates")))
                        r = parse_templates(&c, v, ret);
                if (r == 0 && (v = json_object_get(root, "http")))
                        r = parse_http(&c, v, ret);
                if (r == 0 && (v = json_object_get(root, "cluster")))
                        r = parse_cluster(&c, v, ret);
        }
        if (r < 0)
                nsbox_dconfig_release(ret);
        return r;
}

int nsbox_dconfig_load(const char *path, bool required, nsbox_dconfig *ret, nsbox_error *err)
{
        nsbox_dconfig_defaults(ret);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        nsbox_error e = { 0 };
        int r = read_file_strict(AT_FDCWD, path, 0, CONFIG_MAX_BYTES, path, &text, &len, &e);
        if (r == -ENOENT && !required) {
                nsbox_error_clear(&e);
                return 0;
        }
        if (r < 0) {
                nsbox_err_as(err, -r, "%s", e.msg ? e.msg : path);
                nsbox_error_clear(&e);
                return r;
        }
        json_error_t je;
        json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!root)
                return nsbox_err(err, 0, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
        r = nsbox_dconfig_parse(root, path, ret, err);
        json_decref(root);
        return r;
}

char *nsbox_dconfig_default_path(void)
{
        char *p = NULL;
        if (nsbox_host_root())
                return strdup("/etc/nsbox/nsboxd.json");
        const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/')
                return asprintf(&p, "%s/nsbox/nsboxd.json", xdg) < 0 ? NULL : p;
        if (!home || home[0] != '/') {
                struct passwd *pw = getpwuid(geteuid());
                home = pw ? pw->pw_dir : NULL;
        }
        if (!home || home[0] != '/')
                return NULL;
        return asprintf(&p, "%s/.config/nsbox/nsboxd.json", home) < 0 ? NULL : p;
}

void nsbox_dconfig_release(nsbox_dconfig *c)
{
        for (size_t i = 0; i < c->n_templates; i++) {
                json_decref(c->templates[i].create);
                json_decref(c->templates[i].warmup);
        }
        free(c->templates);
        free(c->client_uids);
        free(c->client_gids);
        free(c->source);
        free(c->http_keys);
        free(c->http_domain);
        free(c->redis);
        nsbox_dconfig_defaults(c);
}

const nsbox_template *nsbox_dconfig_template(const nsbox_dconfig *c, const char *name)
{
        for (size_t i = 0; i < c->n_templates; i++)
                if (!strcmp(c->templates[i].name, name))
                        return &c->templates[i];
        return NULL;
}
