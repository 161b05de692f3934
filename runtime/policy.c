/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy files (nsbox-policy(5)): strict JSON, every key known, every value checked, and each
 * error naming the file, the key and the reason.  Nothing here touches the system except the
 * realpath() of bind sources, which is how a missing path is refused before any namespace. */
#include "policy.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/stat.h>

#include "consts.h"
#include "net.h"
#include "json.h"
#include "util.h"

#ifndef NSBOX_POLICYDIR
#define NSBOX_POLICYDIR "/usr/local/share/nsbox/policy"
#endif

const char *nsbox_policy_dir_default(void) { return NSBOX_POLICYDIR; }

typedef struct pctx {
        const char *source;
        nsbox_error *err;
} pctx;

static int bad(pctx *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(pctx *c, const char *key, const char *fmt, ...)
{
        char why[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return nsbox_err(c->err, 0, "policy '%s': key '%s': %s", c->source, key, why);
}

/* Refuse keys a section does not know: a typo must not silently weaken a policy. */
static int check_keys(pctx *c, json_t *obj, const char *section, const char *const *known)
{
        const char *key = nsbox_json_unknown_key(obj, known);
        if (!key)
                return 0;
        char full[256];
        snprintf(full, sizeof(full), "%s%s%s", section, *section ? "." : "", key);
        return bad(c, full, "unknown key");
}

static int get_string(pctx *c, json_t *obj, const char *key, const char *full, const char **ret)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        if (!json_is_string(v))
                return bad(c, full, "expected a string");
        if (strlen(json_string_value(v)) != json_string_length(v))
                return bad(c, full, "contains a NUL character");
        if (json_string_length(v) > PATH_MAX)
                return bad(c, full, "longer than %d bytes", PATH_MAX);
        *ret = json_string_value(v);
        return 1;
}

static int get_bool(pctx *c, json_t *obj, const char *key, const char *full, bool *ret)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        if (!json_is_boolean(v))
                return bad(c, full, "expected true or false");
        *ret = json_is_true(v);
        return 1;
}

static int get_uint(pctx *c, json_t *obj, const char *key, const char *full, uint64_t max, uint64_t *ret)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
                return bad(c, full, "expected a whole number from 0 to %llu", (unsigned long long)max);
        *ret = (uint64_t)json_integer_value(v);
        return 1;
}

/* A size is a number of bytes or a string like "64M". */
static int get_size(pctx *c, json_t *obj, const char *key, const char *full, uint64_t *ret)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
                *ret = (uint64_t)json_integer_value(v);
                return 1;
        }
        if (json_is_string(v) && parse_size(json_string_value(v), ret) == 0)
                return 1;
        return bad(c, full, "expected a size such as 67108864 or \"64M\"");
}

static bool valid_user_name(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 32 || !(islower((unsigned char)s[0]) || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_' || s[i] == '-'))
                        return false;
        return true;
}

int nsbox_check_hostname(const char *h)
{
        size_t n = strlen(h);
        if (n == 0 || n > 64 || h[0] == '-' || h[0] == '.')
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!(isalnum((unsigned char)h[i]) || h[i] == '-' || h[i] == '.'))
                        return -EINVAL;
        return 0;
}

int nsbox_normalize_sandbox_path(const char *in, char **ret)
{
        if (!in || in[0] != '/')
                return -EINVAL;
        if (strlen(in) >= PATH_MAX)
                return -ENAMETOOLONG;
        char *out = malloc(strlen(in) + 2);
        if (!out)
                return -ENOMEM;
        size_t o = 0;
        const char *p = in;
        while (*p) {
                while (*p == '/')
                        p++;
                const char *s = p;
                while (*p && *p != '/')
                        p++;
                size_t len = (size_t)(p - s);
                if (len == 0 || (len == 1 && s[0] == '.'))
                        continue;
                if (len == 2 && s[0] == '.' && s[1] == '.') {
                        free(out);
                        return -EINVAL;
                }
                out[o++] = '/';
                memcpy(out + o, s, len);
                o += len;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = '\0';
        *ret = out;
        return 0;
}

void nsbox_mount_release(nsbox_mount *m)
{
        free(m->source);
        free(m->target);
        m->source = m->target = NULL;
}

/* Targets that nsbox itself owns: binding over them would undo the masking it sets up. */
static bool reserved_target(const char *t)
{
        static const char *const reserved[] = { "/", "/proc", "/dev", "/sys" };
        for (size_t i = 0; i < ARRAY_SIZE(reserved); i++) {
                size_t n = strlen(reserved[i]);
                if (!strcmp(t, reserved[i]) || (n > 1 && !strncmp(t, reserved[i], n) && t[n] == '/'))
                        return true;
        }
        return false;
}

int nsbox_check_writable_dir(const char *path, char **ret)
{
        char *norm = NULL;
        int r = nsbox_normalize_sandbox_path(path, &norm);
        if (r < 0)
                return r;
        if (!strcmp(norm, "/") || reserved_target(norm)) {
                free(norm);
                return -EINVAL;
        }
        *ret = norm;
        return 0;
}

int nsbox_validate_mount(nsbox_mount *m, const char *what, nsbox_error *err)
{
        char *norm = NULL;
        int r = nsbox_normalize_sandbox_path(m->target, &norm);
        if (r < 0)
                return nsbox_err(err, 0, "%s: destination '%s' must be an absolute path without '..'", what, m->target);
        free(m->target);
        m->target = norm;
        if (reserved_target(m->target))
                return nsbox_err(err, 0, "%s: destination '%s' is reserved (/, /proc, /dev, /sys)", what, m->target);
        if (m->type == MOUNT_BIND) {
                char *real = realpath(m->source, NULL);
                if (!real)
                        return nsbox_err(err, errno, "%s: source '%s'", what, m->source);
                free(m->source);
                m->source = real;
        }
        return 0;
}

int nsbox_parse_mount_bind(const char *spec, nsbox_mount *ret, nsbox_error *err)
{
        /* SRC:DST[:OPT[,OPT]], OPT rw, ro or noidmap.  Paths with ':' cannot be given this way;
         * the policy file can. */
        _cleanup_free_ char *copy = strdup(spec);
        if (!copy)
                return -ENOMEM;
        char *dst = strchr(copy, ':');
        if (!dst || dst == copy || !dst[1])
                return nsbox_err(err, 0, "--bind '%s': expected SRC:DST[:rw]", spec);
        *dst++ = '\0';
        bool ro = true, no_idmap = false;
        char *mode = strchr(dst, ':');
        if (mode) {
                *mode++ = '\0';
                char *save = NULL;
                for (char *o = strtok_r(mode, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
                        if (!strcmp(o, "rw") || !strcmp(o, "ro"))
                                ro = !strcmp(o, "ro");
                        else if (!strcmp(o, "noidmap"))
                                no_idmap = true;
                        else
                                return nsbox_err(err, 0, "--bind '%s': mode must be 'rw' or 'ro', optionally with ',noidmap'", spec);
                }
        }
        *ret = (nsbox_mount){ .type = MOUNT_BIND, .source = strdup(copy), .target = strdup(dst), .readonly = ro, .no_idmap = no_idmap };
        if (!ret->source || !ret->target) {
                nsbox_mount_release(ret);
                return -ENOMEM;
        }
        return 0;
}

int nsbox_parse_mount_tmpfs(const char *spec, nsbox_mount *ret, nsbox_error *err)
{
        _cleanup_free_ char *copy = strdup(spec);
        if (!copy)
                return -ENOMEM;
        uint64_t size = 0;
        char *sz = strchr(copy, ':');
        if (sz) {
                *sz++ = '\0';
                if (parse_size(sz, &size) < 0 || size < 4096)
                        return nsbox_err(err, 0, "--tmpfs '%s': bad size '%s' (e.g. 64M, at least 4K)", spec, sz);
        }
        *ret = (nsbox_mount){ .type = MOUNT_TMPFS, .target = strdup(copy), .size = size };
        return ret->target ? 0 : -ENOMEM;
}

int nsbox_policy_add_mount(nsbox_policy *p, nsbox_mount *m, nsbox_error *err)
{
        if (p->n_mounts >= NSBOX_MAX_MOUNTS) {
                nsbox_mount_release(m);
                return nsbox_err(err, 0, "too many mounts (at most %d)", NSBOX_MAX_MOUNTS);
        }
        nsbox_mount *nm = realloc(p->mounts, (p->n_mounts + 1) * sizeof(*nm));
        if (!nm) {
                nsbox_mount_release(m);
                return -ENOMEM;
        }
        p->mounts = nm;
        p->mounts[p->n_mounts++] = *m;
        *m = (nsbox_mount){ 0 };
        return 0;
}

static bool valid_env_key(const char *k, size_t n)
{
        if (n == 0 || !(isalpha((unsigned char)k[0]) || k[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!(isalnum((unsigned char)k[i]) || k[i] == '_'))
                        return false;
        return true;
}

int nsbox_policy_set_env(nsbox_policy *p, const char *kv, nsbox_error *err)
{
        const char *eq = strchr(kv, '=');
        size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
        if (!valid_env_key(kv, klen))
                return nsbox_err(err, 0, "environment variable '%s': name must match [A-Za-z_][A-Za-z0-9_]*", kv);
        char *entry;
        if (eq)
                entry = strdup(kv);
        else {
                /* "-e NAME" passes the caller's value through, as docker does; unset means absent. */
                const char *v = getenv(kv);
                if (!v)
                        return 0;
                if (asprintf(&entry, "%s=%s", kv, v) < 0)
                        entry = NULL;
        }
        if (!entry)
                return -ENOMEM;
        for (char **e = p->env; e && *e; e++)
                if (!strncmp(*e, entry, klen + 1)) {
                        free(*e);
                        *e = entry;
                        return 0;
                }
        if (strv_length(p->env) >= NSBOX_MAX_ENV) {
                free(entry);
                return nsbox_err(err, 0, "too many environment variables (at most %d)", NSBOX_MAX_ENV);
        }
        return strv_push(&p->env, entry);
}

static int parse_user(pctx *c, json_t *o, nsbox_policy *p)
{
        static const char *const keys[] = { "name", "uid", "gid", "home", NULL };
        if (!json_is_object(o))
                return bad(c, "user", "expected an object");
        int r = check_keys(c, o, "user", keys);
        if (r < 0)
                return r;
        const char *s;
        if ((r = get_string(c, o, "name", "user.name", &s)) < 0)
                return r;
        if (r) {
                if (!valid_user_name(s))
                        return bad(c, "user.name", "'%s' is not a valid user name", s);
                free(p->user_name);
                if (!(p->user_name = strdup(s)))
                        return -ENOMEM;
        }
        uint64_t v;
        if ((r = get_uint(c, o, "uid", "user.uid", 65534, &v)) < 0)
                return r;
        if (r)
                p->uid = (uint32_t)v;
        if ((r = get_uint(c, o, "gid", "user.gid", 65534, &v)) < 0)
                return r;
        if (r)
                p->gid = (uint32_t)v;
        if ((r = get_string(c, o, "home", "user.home", &s)) < 0)
                return r;
        if (r) {
                char *h;
                if (nsbox_check_writable_dir(s, &h) < 0)
                        return bad(c, "user.home", "must be an absolute path without '..', other than / and outside /proc, /dev, /sys");
                free(p->home);
                p->home = h;
        }
        return 0;
}

static int parse_root(pctx *c, json_t *o, nsbox_policy *p)
{
        static const char *const keys[] = { "type", "path", "readonly", "python_venv", NULL };
        if (!json_is_object(o))
                return bad(c, "root", "expected an object");
        int r = check_keys(c, o, "root", keys);
        if (r < 0)
                return r;
        const char *s;
        if ((r = get_string(c, o, "type", "root.type", &s)) < 0)
                return r;
        if (r) {
                if (!strcmp(s, "host"))
                        p->root = ROOT_HOST;
                else if (!strcmp(s, "dir"))
                        p->root = ROOT_DIR;
                else
                        return bad(c, "root.type", "'%s' is not 'host' or 'dir'", s);
        }
        if ((r = get_string(c, o, "path", "root.path", &s)) < 0)
                return r;
        if (r) {
                if (s[0] != '/')
                        return bad(c, "root.path", "must be an absolute path");
                free(p->root_path);
                if (!(p->root_path = strdup(s)))
                        return -ENOMEM;
        }
        if (p->root == ROOT_DIR && !p->root_path)
                return bad(c, "root.path", "required when root.type is 'dir'");
        if (p->root == ROOT_HOST && p->root_path)
                return bad(c, "root.path", "goes with root.type 'dir' only");
        if ((r = get_bool(c, o, "readonly", "root.readonly", &p->root_readonly)) < 0)
                return r;
        if ((r = get_bool(c, o, "python_venv", "root.python_venv", &p->python_venv)) < 0)
                return r;
        return 0;
}

static int parse_mounts(pctx *c, json_t *a, nsbox_policy *p)
{
        static const char *const keys[] = { "type", "source", "target", "readonly", "idmap", "size", NULL };
        if (!json_is_array(a))
                return bad(c, "mounts", "expected an array");
        size_t i;
        json_t *o;
        json_array_foreach(a, i, o) {
                char key[64];
                snprintf(key, sizeof(key), "mounts[%zu]", i);
                if (!json_is_object(o))
                        return bad(c, key, "expected an object");
                int r = check_keys(c, o, key, keys);
                if (r < 0)
                        return r;
                const char *type = "bind", *src = NULL, *dst = NULL;
                char k_type[80], k_src[80], k_dst[80], k_ro[80], k_size[80], k_idmap[80];
                snprintf(k_type, sizeof(k_type), "%s.type", key);
                snprintf(k_src, sizeof(k_src), "%s.source", key);
                snprintf(k_dst, sizeof(k_dst), "%s.target", key);
                snprintf(k_ro, sizeof(k_ro), "%s.readonly", key);
                snprintf(k_size, sizeof(k_size), "%s.size", key);
                snprintf(k_idmap, sizeof(k_idmap), "%s.idmap", key);
                if (get_string(c, o, "type", k_type, &type) < 0 || get_string(c, o, "source", k_src, &src) < 0 ||
                    get_string(c, o, "target", k_dst, &dst) < 0)
                        return -EINVAL;
                nsbox_mount m = { .readonly = true };
                if (!strcmp(type, "bind"))
                        m.type = MOUNT_BIND;
                else if (!strcmp(type, "tmpfs"))
                        m.type = MOUNT_TMPFS;
                else
                        return bad(c, key, "type '%s' is not 'bind' or 'tmpfs'", type);
                if (!dst)
                        return bad(c, key, "'target' is required");
                if (m.type == MOUNT_BIND && (!src || src[0] != '/'))
                        return bad(c, key, "'source' must be an absolute host path");
                if (m.type == MOUNT_TMPFS && (src || json_object_get(o, "readonly") || json_object_get(o, "idmap")))
                        return bad(c, key, "'source', 'readonly' and 'idmap' do not go with type 'tmpfs'");
                if (m.type == MOUNT_BIND && json_object_get(o, "size"))
                        return bad(c, key, "'size' goes with type 'tmpfs' only");
                bool idmap = true;
                if ((r = get_bool(c, o, "idmap", k_idmap, &idmap)) < 0)
                        return r;
                m.no_idmap = !idmap;
                if ((r = get_bool(c, o, "readonly", k_ro, &m.readonly)) < 0 || (r = get_size(c, o, "size", k_size, &m.size)) < 0)
                        return r;
                if (r && m.size < 4096)
                        return bad(c, k_size, "at least 4K");
                m.source = src ? strdup(src) : NULL;
                m.target = strdup(dst);
                if ((src && !m.source) || !m.target) {
                        nsbox_mount_release(&m);
                        return -ENOMEM;
                }
                nsbox_error sub = { 0 };
                r = nsbox_validate_mount(&m, key, &sub);
                if (r < 0) {
                        nsbox_mount_release(&m);
                        r = nsbox_err(c->err, 0, "policy '%s': %s", c->source, sub.msg ? sub.msg : "invalid mount");
                        nsbox_error_clear(&sub);
                        return r;
                }
                if ((r = nsbox_policy_add_mount(p, &m, c->err)) < 0)
                        return r;
        }
        return 0;
}

static int parse_env(pctx *c, json_t *o, nsbox_policy *p)
{
        if (!json_is_object(o))
                return bad(c, "env", "expected an object of strings");
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
                char key[300];
                snprintf(key, sizeof(key), "env.%s", k);
                if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                        return bad(c, key, "expected a string without NUL characters");
                if (!valid_env_key(k, strlen(k)))
                        return bad(c, key, "name must match [A-Za-z_][A-Za-z0-9_]*");
                _cleanup_free_ char *kv = NULL;
                if (asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0)
                        return -ENOMEM;
                int r = nsbox_policy_set_env(p, kv, c->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_limits(pctx *c, json_t *o, nsbox_policy *p)
{
        static const char *const keys[] = { "memory", "swap", "pids", "cpus", "disk", "timeout", "output",
                                            "nofile", "fsize", "enforce", NULL };
        if (!json_is_object(o))
                return bad(c, "limits", "expected an object");
        int r = check_keys(c, o, "limits", keys);
        if (r < 0)
                return r;
        nsbox_limits *l = &p->limits;
        if ((r = get_size(c, o, "memory", "limits.memory", &l->memory)) < 0)
                return r;
        if (r && l->memory < (1 << 20))
                return bad(c, "limits.memory", "at least 1M");
        if ((r = get_size(c, o, "swap", "limits.swap", &l->swap)) < 0)
                return r;
        l->swap_set = r;
        if ((r = get_uint(c, o, "pids", "limits.pids", 4194304, &l->pids)) < 0)
                return r;
        if (r && l->pids < 1)
                return bad(c, "limits.pids", "at least 1");
        json_t *v = json_object_get(o, "cpus");
        if (v) {
                if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 1024)
                        return bad(c, "limits.cpus", "expected a number above 0 and at most 1024");
                l->cpus = json_number_value(v);
        }
        if ((r = get_size(c, o, "disk", "limits.disk", &l->disk)) < 0)
                return r;
        if (r && l->disk < (1 << 20))
                return bad(c, "limits.disk", "at least 1M");
        v = json_object_get(o, "timeout");
        if (v) {
                if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e9)
                        return bad(c, "limits.timeout", "expected seconds from 0 (none) to 1e9");
                l->timeout_ms = (uint64_t)(json_number_value(v) * 1000 + 0.5);
        }
        if ((r = get_size(c, o, "output", "limits.output", &l->output)) < 0)
                return r;
        if ((r = get_uint(c, o, "nofile", "limits.nofile", 1048576, &l->nofile)) < 0)
                return r;
        if (r && l->nofile < 16)
                return bad(c, "limits.nofile", "at least 16");
        if ((r = get_size(c, o, "fsize", "limits.fsize", &l->fsize)) < 0)
                return r;
        const char *s;
        if ((r = get_string(c, o, "enforce", "limits.enforce", &s)) < 0)
                return r;
        if (r) {
                if (!strcmp(s, "best-effort"))
                        l->enforce = ENFORCE_BEST_EFFORT;
                else if (!strcmp(s, "required"))
                        l->enforce = ENFORCE_REQUIRED;
                else
                        return bad(c, "limits.enforce", "'%s' is not 'best-effort' or 'required'", s);
        }
        return 0;
}

static int parse_network(pctx *c, json_t *o, nsbox_policy *p)
{
        static const char *const keys[] = { "mode", "backend", "egress", "dns", "host_loopback", "publish", NULL };
        if (!json_is_object(o))
                return bad(c, "network", "expected an object");
        int r = check_keys(c, o, "network", keys);
        if (r < 0)
                return r;
        const char *s;
        if ((r = get_string(c, o, "mode", "network.mode", &s)) < 0)
                return r;
        if (r) {
                if (!strcmp(s, "none"))
                        p->net = NET_NONE;
                else if (!strcmp(s, "nat"))
                        p->net = NET_NAT;
                else
                        return bad(c, "network.mode", "'%s' is not 'none' or 'nat'", s);
        }
        if ((r = get_string(c, o, "backend", "network.backend", &s)) < 0)
                return r;
        if (r) {
                if (!strcmp(s, "slirp4netns"))
                        p->net_backend = NET_BACKEND_SLIRP4NETNS;
                else if (!strcmp(s, "veth"))
                        p->net_backend = NET_BACKEND_VETH;
                else
                        return bad(c, "network.backend", "'%s' is not 'slirp4netns' or 'veth'", s);
        }
        static const char *const flags[] = { "dns", "host_loopback" };
        bool *dst[] = { &p->dns, &p->host_loopback };
        for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
                json_t *v = json_object_get(o, flags[i]);
                if (!v)
                        continue;
                if (!json_is_boolean(v))
                        return bad(c, flags[i][0] == 'd' ? "network.dns" : "network.host_loopback", "expected true or false");
                *dst[i] = json_is_true(v);
        }
        static const char *const lists[] = { "egress", "publish" };
        for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
                json_t *a = json_object_get(o, lists[l]);
                if (!a)
                        continue;
                char key[64];
                snprintf(key, sizeof(key), "network.%s", lists[l]);
                if (!json_is_array(a))
                        return bad(c, key, l == 0 ? "expected an array such as [\"10.0.0.0/8\", \"192.0.2.1:443\"]"
                                                  : "expected an array such as [\"8080:80\"]");
                if (l == 0)
                        p->egress_set = true;
                size_t i;
                json_t *v;
                json_array_foreach(a, i, v) {
                        snprintf(key, sizeof(key), "network.%s[%zu]", lists[l], i);
                        if (!json_is_string(v))
                                return bad(c, key, "expected a string");
                        nsbox_error e = { 0 };
                        nsbox_publish pub;
                        if (l == 0)
                                r = nsbox_policy_add_egress(p, json_string_value(v), &e);
                        else if ((r = nsbox_publish_parse(json_string_value(v), &pub, &e)) == 0)
                                r = nsbox_policy_add_publish(p, &pub, &e);
                        if (r < 0) {
                                r = bad(c, key, "%s", e.msg ? e.msg : "invalid");
                                nsbox_error_clear(&e);
                                return r;
                        }
                }
        }
        return 0;
}

int nsbox_policy_add_egress(nsbox_policy *p, const char *spec, nsbox_error *err)
{
        int r = nsbox_egress_check(spec, err);
        if (r < 0)
                return r;
        size_t n = 0;
        while (p->egress && p->egress[n])
                n++;
        if (n >= NSBOX_MAX_EGRESS)
                return nsbox_err(err, 0, "more than %d egress entries", NSBOX_MAX_EGRESS);
        char *d = strdup(spec);
        if (!d || strv_push(&p->egress, d) < 0)
                return nsbox_err(err, ENOMEM, "egress");
        p->egress_set = true;
        return 0;
}

int nsbox_policy_add_publish(nsbox_policy *p, const nsbox_publish *pub, nsbox_error *err)
{
        for (size_t i = 0; i < p->n_publish; i++)
                if (p->publish[i].host_port == pub->host_port)
                        return nsbox_err(err, 0, "host port %u is published twice", pub->host_port);
        if (p->n_publish >= NSBOX_MAX_PUBLISH)
                return nsbox_err(err, 0, "more than %d published ports", NSBOX_MAX_PUBLISH);
        nsbox_publish *v = realloc(p->publish, (p->n_publish + 1) * sizeof(*v));
        if (!v)
                return nsbox_err(err, ENOMEM, "publish");
        p->publish = v;
        p->publish[p->n_publish++] = *pub;
        return 0;
}

static int parse_caps(pctx *c, json_t *a, nsbox_policy *p)
{
        if (!json_is_array(a))
                return bad(c, "capabilities", "expected an array of names such as \"CAP_NET_BIND_SERVICE\"");
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v) {
                cap_value_t cap;
                char key[64];
                snprintf(key, sizeof(key), "capabilities[%zu]", i);
                if (!json_is_string(v) || cap_from_name(json_string_value(v), &cap) < 0 || cap < 0 || cap > 63)
                        return bad(c, key, "not a capability name");
                p->caps |= 1ull << cap;
        }
        return 0;
}

/* What a container's root gets by default (Docker's, Podman's and containerd's set), for a
 * policy whose user is uid 0 and that names no capabilities itself.  They act in the sandbox's
 * user namespace only; the seccomp filter still refuses chroot and raw sockets, and the kernel
 * makes no device node in a user namespace, so CAP_SYS_CHROOT, CAP_NET_RAW and CAP_MKNOD are
 * kept only so that programs probing for them see the set they expect. */
#define C(x) (1ull << (x))
const uint64_t nsbox_container_caps = C(CAP_CHOWN) | C(CAP_DAC_OVERRIDE) | C(CAP_FSETID) | C(CAP_FOWNER) |
                                      C(CAP_MKNOD) | C(CAP_NET_RAW) | C(CAP_SETGID) | C(CAP_SETUID) | C(CAP_SETFCAP) |
                                      C(CAP_SETPCAP) | C(CAP_NET_BIND_SERVICE) | C(CAP_SYS_CHROOT) | C(CAP_KILL) |
                                      C(CAP_AUDIT_WRITE);
#undef C

static int parse_action(pctx *c, const char *key, const char *s, nsbox_sc_action *ret)
{
        static const char *const names[_SC_ACTION_MAX] = {
                [SC_ALLOW] = "allow", [SC_ERRNO] = "errno", [SC_KILL] = "kill", [SC_TRAP] = "trap", [SC_LOG] = "log",
        };
        for (int i = 0; i < _SC_ACTION_MAX; i++)
                if (!strcmp(s, names[i])) {
                        *ret = (nsbox_sc_action)i;
                        return 0;
                }
        return bad(c, key, "'%s' is not one of allow, errno, kill, trap, log", s);
}

static int get_errno(pctx *c, json_t *o, const char *key, int *ret)
{
        json_t *v = json_object_get(o, "errno");
        if (!v)
                return 0;
        if (json_is_string(v) && nsbox_errno_from_name(json_string_value(v), ret))
                return 1;
        if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < 4096) {
                *ret = (int)json_integer_value(v);
                return 1;
        }
        return bad(c, key, "'errno' must be a name such as \"EPERM\" or a number below 4096");
}

static int get_const(pctx *c, json_t *o, const char *name, const char *key, uint64_t *ret)
{
        json_t *v = json_object_get(o, name);
        if (!v)
                return 0;
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
                *ret = (uint64_t)json_integer_value(v);
                return 1;
        }
        if (json_is_string(v) && nsbox_const_from_name(json_string_value(v), ret))
                return 1;
        return bad(c, key, "'%s' must be a non-negative number or a known constant name", name);
}

static int parse_sc_args(pctx *c, json_t *a, const char *key, nsbox_sc_rule *rule)
{
        static const char *const keys[] = { "index", "op", "value", "mask", NULL };
        static const char *const ops[_SC_OP_MAX] = {
                [SC_OP_EQ] = "eq", [SC_OP_NE] = "ne", [SC_OP_LT] = "lt", [SC_OP_LE] = "le",
                [SC_OP_GT] = "gt", [SC_OP_GE] = "ge", [SC_OP_MASKED_EQ] = "masked_eq",
        };
        if (!json_is_array(a) || json_array_size(a) > 6)
                return bad(c, key, "'args' must be an array of at most 6 comparisons");
        size_t i;
        json_t *o;
        unsigned seen = 0;
        json_array_foreach(a, i, o) {
                char k[96];
                snprintf(k, sizeof(k), "%s.args[%zu]", key, i);
                if (!json_is_object(o))
                        return bad(c, k, "expected an object");
                int r = check_keys(c, o, k, keys);
                if (r < 0)
                        return r;
                nsbox_sc_arg *arg = &rule->args[i];
                uint64_t idx;
                if ((r = get_uint(c, o, "index", k, 5, &idx)) <= 0)
                        return r < 0 ? r : bad(c, k, "'index' (0 to 5) is required");
                if (seen & (1u << idx))
                        return bad(c, k, "argument %llu is compared twice; use two rules", (unsigned long long)idx);
                seen |= 1u << idx;
                arg->index = (unsigned)idx;
                const char *op = NULL;
                if ((r = get_string(c, o, "op", k, &op)) <= 0)
                        return r < 0 ? r : bad(c, k, "'op' is required");
                int found = -1;
                for (int j = 0; j < _SC_OP_MAX; j++)
                        if (!strcmp(op, ops[j]))
                                found = j;
                if (found < 0)
                        return bad(c, k, "op '%s' is not one of eq, ne, lt, le, gt, ge, masked_eq", op);
                arg->op = (nsbox_sc_op)found;
                if ((r = get_const(c, o, "value", k, &arg->value)) <= 0)
                        return r < 0 ? r : bad(c, k, "'value' is required");
                if ((r = get_const(c, o, "mask", k, &arg->mask)) < 0)
                        return r;
                if ((arg->op == SC_OP_MASKED_EQ) != (r == 1))
                        return bad(c, k, "'mask' goes with op masked_eq, and only with it");
                rule->n_args++;
        }
        return 0;
}

static void sc_rule_release(nsbox_sc_rule *r) { free(r->syscalls); }

static int parse_sc_rule(pctx *c, json_t *o, const char *key, nsbox_sc_rule *rule)
{
        static const char *const keys[] = { "syscalls", "action", "errno", "args", "comment", NULL };
        if (!json_is_object(o))
                return bad(c, key, "expected an object");
        int r = check_keys(c, o, key, keys);
        if (r < 0)
                return r;
        json_t *names = json_object_get(o, "syscalls");
        if (!json_is_array(names) || json_array_size(names) == 0 || json_array_size(names) > 512)
                return bad(c, key, "'syscalls' must be a non-empty array of names");
        rule->syscalls = calloc(json_array_size(names), sizeof(int));
        if (!rule->syscalls)
                return -ENOMEM;
        size_t i;
        json_t *n;
        json_array_foreach(names, i, n) {
                if (!json_is_string(n))
                        return bad(c, key, "'syscalls' entries must be strings");
                int nr = seccomp_syscall_resolve_name(json_string_value(n));
                if (nr == __NR_SCMP_ERROR)
                        return bad(c, key, "unknown system call '%s'", json_string_value(n));
                /* Negative numbers are calls this architecture does not have (socketcall on
                 * x86-64): nothing to filter. */
                if (nr >= 0)
                        rule->syscalls[rule->n_syscalls++] = nr;
        }
        const char *act = "errno";
        if ((r = get_string(c, o, "action", key, &act)) < 0)
                return r;
        if ((r = parse_action(c, key, act, &rule->action)) < 0)
                return r;
        json_t *comment = json_object_get(o, "comment");
        if (comment && !json_is_string(comment))
                return bad(c, key, "'comment' must be a string");
        rule->errnum = EPERM;
        if ((r = get_errno(c, o, key, &rule->errnum)) < 0)
                return r;
        if (r && rule->action != SC_ERRNO)
                return bad(c, key, "'errno' goes with action 'errno' only");
        json_t *args = json_object_get(o, "args");
        if (args && (r = parse_sc_args(c, args, key, rule)) < 0)
                return r;
        return 0;
}

static int parse_seccomp(pctx *c, json_t *o, nsbox_policy *p)
{
        static const char *const keys[] = { "default_action", "default_errno", "rules", "socket_families",
                                            "netlink_protocols", "foreign_arch", NULL };
        if (!json_is_object(o))
                return bad(c, "seccomp", "expected an object");
        int r = check_keys(c, o, "seccomp", keys);
        if (r < 0)
                return r;
        const char *s;
        if ((r = get_string(c, o, "default_action", "seccomp.default_action", &s)) < 0)
                return r;
        if (r && (r = parse_action(c, "seccomp.default_action", s, &p->sc_default)) < 0)
                return r;
        json_t *de = json_object_get(o, "default_errno");
        if (de) {
                json_t *tmp = json_pack("{sO}", "errno", de);
                r = get_errno(c, tmp, "seccomp.default_errno", &p->sc_default_errno);
                json_decref(tmp);
                if (r < 0)
                        return r;
                if (p->sc_default != SC_ERRNO)
                        return bad(c, "seccomp.default_errno", "goes with default_action 'errno' only");
        }
        json_t *rules = json_object_get(o, "rules");
        if (rules) {
                if (!json_is_array(rules) || json_array_size(rules) > NSBOX_MAX_SECCOMP_RULES)
                        return bad(c, "seccomp.rules", "expected an array of at most %d rules", NSBOX_MAX_SECCOMP_RULES);
                p->sc_rules = calloc(json_array_size(rules) + 1, sizeof(nsbox_sc_rule));
                if (!p->sc_rules)
                        return -ENOMEM;
                size_t i;
                json_t *rule;
                json_array_foreach(rules, i, rule) {
                        char key[64];
                        snprintf(key, sizeof(key), "seccomp.rules[%zu]", i);
                        p->n_sc_rules++;
                        if ((r = parse_sc_rule(c, rule, key, &p->sc_rules[i])) < 0)
                                return r;
                }
        }
        json_t *fam = json_object_get(o, "socket_families");
        if (fam) {
                if (!json_is_array(fam))
                        return bad(c, "seccomp.socket_families", "expected an array of names such as \"AF_UNIX\"");
                p->sc_socket_restricted = true;
                p->sc_socket_families = 0;
                size_t i;
                json_t *v;
                json_array_foreach(fam, i, v) {
                        int af;
                        if (!json_is_string(v) || !nsbox_af_from_name(json_string_value(v), &af))
                                return bad(c, "seccomp.socket_families", "unknown address family at index %zu", i);
                        p->sc_socket_families |= 1ull << af;
                }
        }
        json_t *nl = json_object_get(o, "netlink_protocols");
        if (nl) {
                if (!json_is_array(nl))
                        return bad(c, "seccomp.netlink_protocols", "expected an array of names such as \"NETLINK_ROUTE\"");
                p->sc_netlink_protocols = 0;
                size_t i;
                json_t *v;
                json_array_foreach(nl, i, v) {
                        int proto;
                        if (!json_is_string(v) || !nsbox_netlink_from_name(json_string_value(v), &proto))
                                return bad(c, "seccomp.netlink_protocols", "unknown netlink protocol at index %zu", i);
                        p->sc_netlink_protocols |= 1u << proto;
                }
        }
        if ((r = get_string(c, o, "foreign_arch", "seccomp.foreign_arch", &s)) < 0)
                return r;
        if (r) {
                if (!strcmp(s, "kill"))
                        p->sc_foreign_arch = SC_KILL;
                else if (!strcmp(s, "errno"))
                        p->sc_foreign_arch = SC_ERRNO;
                else
                        return bad(c, "seccomp.foreign_arch", "'%s' is not 'kill' or 'errno'", s);
        }
        return 0;
}

/* RFC 7396 JSON merge patch: an object merges key by key, null removes a key, any other value
 * replaces (arrays whole).  A new reference, or NULL without memory. */
static json_t *merge_patch(json_t *base, json_t *patch)
{
        if (!json_is_object(patch))
                return json_incref(patch);
        /* a shallow copy: values are shared, never changed; merged objects are new ones */
        json_t *out = json_is_object(base) ? json_copy(base) : json_object();
        const char *k;
        json_t *v;
        json_object_foreach(patch, k, v) {
                if (!out)
                        break;
                if (json_is_null(v)) {
                        json_object_del(out, k);
                        continue;
                }
                json_t *m = merge_patch(json_object_get(out, k), v);
                if (!m || json_object_set_new(out, k, m) < 0) {
                        json_decref(out);
                        out = NULL;
                }
        }
        return out;
}

/* What a policy document says once inheritance is applied: the built-in default with the policy
 * merged onto it, or, with "inherit": false, the policy alone (its nulls dropped the same way).
 * The built-in default's own text is merged onto nothing: onto itself it gives itself without
 * its nulls, as onto nothing, and parsing it twice was a third of `nsbox run`'s own work. */
static int inherit_default(pctx *c, json_t *policy, bool is_default, json_t **ret)
{
        json_t *inherit = json_object_get(policy, "inherit");
        if (inherit && !json_is_boolean(inherit))
                return bad(c, "inherit", "expected true or false");
        json_t *base = NULL;
        if ((!inherit || json_is_true(inherit)) && !is_default) {
                json_error_t jerr;
                base = json_loads(nsbox_default_policy_json, JSON_REJECT_DUPLICATES, &jerr);
                if (!json_is_object(base)) {
                        json_decref(base);
                        return nsbox_err(c->err, 0, "policy '%s': the built-in default policy: line %d column %d: %s", c->source,
                                         jerr.line, jerr.column, base ? "not an object" : jerr.text);
                }
        }
        json_t *merged = merge_patch(base, policy);
        json_decref(base);
        if (!merged)
                return nsbox_err(c->err, ENOMEM, "policy '%s'", c->source);
        json_object_del(merged, "inherit");
        *ret = merged;
        return 0;
}

static nsbox_policy *policy_new_defaults(const char *source)
{
        nsbox_policy *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->source = strdup(source);
        p->user_name = strdup("user");
        p->home = strdup("/workspace");
        p->uid = p->gid = 1000;
        p->root = ROOT_HOST;
        p->root_readonly = true;
        p->python_venv = true;
        p->workdir = strdup("/workspace");
        p->hostname = strdup("nsbox");
        p->net = NET_NONE;
        p->dns = true;
        p->sc_default = SC_ALLOW;
        p->sc_default_errno = EPERM;
        p->sc_socket_families = ~0ull;
        p->sc_netlink_protocols = 1u << 0; /* NETLINK_ROUTE */
        p->sc_foreign_arch = SC_KILL;
        if (!p->source || !p->user_name || !p->home || !p->workdir || !p->hostname) {
                nsbox_policy_free(p);
                return NULL;
        }
        return p;
}

int nsbox_policy_parse(const char *text, size_t len, const char *source, nsbox_policy **ret, nsbox_error *err)
{
        static const char *const keys[] = { "description", "inherit", "user", "root", "workdir", "hostname", "mounts",
                                            "env", "limits", "network", "capabilities", "seccomp", NULL };
        pctx c = { .source = source, .err = err };
        json_error_t jerr;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc)
                return nsbox_err(err, 0, "policy '%s': line %d column %d: %s", source, jerr.line, jerr.column, jerr.text);
        json_t *root = NULL;
        nsbox_policy *p = policy_new_defaults(source);
        int r = p ? 0 : -ENOMEM;
        if (r == 0 && !json_is_object(doc))
                r = nsbox_err(err, 0, "policy '%s': the top level must be an object", source);
        /* unknown keys first: a typo of "inherit" must not pass as a key the default fills */
        if (r == 0)
                r = check_keys(&c, doc, "", keys);
        if (r == 0)
                r = inherit_default(&c, doc, len == strlen(nsbox_default_policy_json) && !memcmp(text, nsbox_default_policy_json, len),
                                    &root);
        /* asked here, before the default's "capabilities": [] is merged in */
        bool caps_given = json_is_object(doc) && json_object_get(doc, "capabilities");
        json_decref(doc);

        json_t *v;
        const char *s;
        if (r == 0 && (v = json_object_get(root, "description")) && !json_is_string(v))
                r = bad(&c, "description", "expected a string");
        if (r == 0 && (v = json_object_get(root, "user")))
                r = parse_user(&c, v, p);
        if (r == 0 && (v = json_object_get(root, "root")))
                r = parse_root(&c, v, p);
        if (r == 0 && (r = get_string(&c, root, "workdir", "workdir", &s)) > 0) {
                char *w = NULL;
                r = nsbox_check_writable_dir(s, &w);
                if (r < 0)
                        r = bad(&c, "workdir", "must be an absolute path without '..', other than / and outside /proc, /dev, /sys");
                else {
                        free(p->workdir);
                        p->workdir = w;
                        w = NULL;
                }
                free(w);
        }
        if (r >= 0 && (r = get_string(&c, root, "hostname", "hostname", &s)) > 0) {
                if (nsbox_check_hostname(s) < 0)
                        r = bad(&c, "hostname", "'%s' is not a valid host name", s);
                else {
                        free(p->hostname);
                        p->hostname = strdup(s);
                        r = p->hostname ? 0 : -ENOMEM;
                }
        }
        if (r >= 0 && (v = json_object_get(root, "mounts")))
                r = parse_mounts(&c, v, p);
        if (r >= 0 && (v = json_object_get(root, "env")))
                r = parse_env(&c, v, p);
        if (r >= 0 && (v = json_object_get(root, "limits")))
                r = parse_limits(&c, v, p);
        if (r >= 0 && (v = json_object_get(root, "network")))
                r = parse_network(&c, v, p);
        if (r >= 0 && (v = json_object_get(root, "capabilities")))
                r = parse_caps(&c, v, p);
        if (r >= 0 && p->uid == 0 && !caps_given)
                p->caps = nsbox_container_caps;
        if (r >= 0 && (v = json_object_get(root, "seccomp")))
                r = parse_seccomp(&c, v, p);
        json_decref(root);
        if (r < 0) {
                nsbox_policy_free(p);
                if (err && !err->msg)
                        nsbox_err(err, -r, "policy '%s'", source);
                return r;
        }
        *ret = p;
        return 0;
}

int nsbox_policy_load(const char *path, nsbox_policy **ret, nsbox_error *err)
{
        _cleanup_free_ char *text = NULL;
        size_t len;
        _cleanup_free_ char *shown = NULL;
        if (asprintf(&shown, "policy '%s'", path) < 0)
                return nsbox_err(err, ENOMEM, "policy");
        /* a FIFO, a device or a directory is refused at once, never waited on */
        int r = read_file_strict(AT_FDCWD, path, 0, NSBOX_MAX_POLICY_BYTES, shown, &text, &len, err);
        if (r < 0)
                return r;
        return nsbox_policy_parse(text, len, path, ret, err);
}

static bool ends_with_json(const char *s)
{
        size_t n = strlen(s);
        return n >= 5 && !strcmp(s + n - 5, ".json");
}

bool nsbox_policy_name_valid(const char *n)
{
        size_t len = strlen(n);
        if (len == 0 || len > 64 || !(isalnum((unsigned char)n[0]) || n[0] == '_') || ends_with_json(n))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!(isalnum((unsigned char)n[i]) || n[i] == '-' || n[i] == '_' || n[i] == '.'))
                        return false;
        return true;
}

/* The directory of the running binary's source tree, for an uninstalled build: <exe>/../policy,
 * or <library>/../policy in libnsbox.so (-fPIC without -fPIE), whose program is anywhere. */
static char *source_tree_policy_dir(void)
{
        char exe[PATH_MAX];
#if defined(__PIC__) && !defined(__PIE__)
        Dl_info info;
        if (!dladdr((void *)source_tree_policy_dir, &info) || !info.dli_fname || !strchr(info.dli_fname, '/') ||
            !realpath(info.dli_fname, exe))
                return NULL;
#else
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
                return NULL;
        exe[n] = '\0';
#endif
        char *slash = strrchr(exe, '/');
        if (!slash)
                return NULL;
        *slash = '\0';
        char *dir = NULL;
        if (asprintf(&dir, "%s/../policy", exe) < 0)
                return NULL;
        return dir;
}

int nsbox_policy_find(const char *name, char **ret_path, nsbox_error *err)
{
        if (strchr(name, '/') || ends_with_json(name)) {
                *ret_path = strdup(name);
                return *ret_path ? 0 : -ENOMEM;
        }
        if (!nsbox_policy_name_valid(name))
                return nsbox_err(err, 0, "policy name '%s' is not valid (1 to 64 letters, digits, '.', '_', '-', not starting with '.' or '-')",
                                 name);
        _cleanup_strv_ char **dirs = NULL;
        const char *env = getenv("NSBOX_POLICY_PATH");
        if (env && *env) {
                _cleanup_free_ char *copy = strdup(env);
                if (!copy)
                        return -ENOMEM;
                char *save = NULL;
                for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
                        if (strv_push(&dirs, strdup(d)) < 0)
                                return -ENOMEM;
        }
        if (strv_push(&dirs, strdup("/etc/nsbox/policy")) < 0 || strv_push(&dirs, strdup(NSBOX_POLICYDIR)) < 0)
                return -ENOMEM;
        char *src = source_tree_policy_dir();
        if (src && strv_push(&dirs, src) < 0)
                return -ENOMEM;
        for (char **d = dirs; *d; d++) {
                char *path = NULL;
                if (asprintf(&path, "%s/%s.json", *d, name) < 0)
                        return -ENOMEM;
                if (access(path, R_OK) == 0) {
                        *ret_path = path;
                        return 0;
                }
                free(path);
        }
        return nsbox_err(err, 0, "policy '%s' not found (looked in $NSBOX_POLICY_PATH, /etc/nsbox/policy, %s and the source tree)",
                         name, NSBOX_POLICYDIR);
}

void nsbox_policy_free(nsbox_policy *p)
{
        if (!p)
                return;
        free(p->source);
        free(p->user_name);
        free(p->home);
        free(p->root_path);
        free(p->workdir);
        free(p->hostname);
        for (size_t i = 0; i < p->n_mounts; i++)
                nsbox_mount_release(&p->mounts[i]);
        free(p->mounts);
        strv_free(p->env);
        strv_free(p->egress);
        free(p->publish);
        for (size_t i = 0; i < p->n_sc_rules; i++)
                sc_rule_release(&p->sc_rules[i]);
        free(p->sc_rules);
        free(p);
}

int nsbox_policy_env_default(nsbox_policy *p, const char *key, const char *value, nsbox_error *err)
{
        size_t n = strlen(key);
        for (char **e = p->env; e && *e; e++)
                if (!strncmp(*e, key, n) && (*e)[n] == '=')
                        return 0;
        _cleanup_free_ char *kv = NULL;
        if (asprintf(&kv, "%s=%s", key, value) < 0)
                return -ENOMEM;
        return nsbox_policy_set_env(p, kv, err);
}
