/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent spec (spec.h): one writer and one strict reader, field by field in the same order.
 * A field added to nsbox_policy must be added to both: the size check below fails until then. */
#include "spec.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>

#include "util.h"

#define SPEC_MAGIC "NSBXSPEC"
#define SPEC_VERSION 1u
#define SPEC_MAX_STRING (1u << 20)

#if __SIZEOF_POINTER__ == 8
_Static_assert(sizeof(nsbox_policy) == 296, "nsbox_policy changed: carry the new field in spec.c (both ways) and in tests/unit/spec_test.c");
#endif

/* ---- writing ---------------------------------------------------------------------------------- */

typedef struct writer {
        strbuf *out;
        int r;
} writer;

static void put(writer *w, const void *data, size_t n)
{
        if (w->r == 0)
                w->r = sb_append(w->out, data, n);
}

static void put_u8(writer *w, uint8_t v) { put(w, &v, 1); }

static void put_u16(writer *w, uint16_t v)
{
        uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
        put(w, b, 2);
}

static void put_u32(writer *w, uint32_t v)
{
        uint8_t b[4];
        for (int i = 0; i < 4; i++)
                b[i] = (uint8_t)(v >> (8 * i));
        put(w, b, 4);
}

static void put_u64(writer *w, uint64_t v)
{
        uint8_t b[8];
        for (int i = 0; i < 8; i++)
                b[i] = (uint8_t)(v >> (8 * i));
        put(w, b, 8);
}

static void put_bool(writer *w, bool v) { put_u8(w, v ? 1 : 0); }

static void put_str(writer *w, const char *s)
{
        put_bool(w, s != NULL);
        if (!s)
                return;
        size_t n = strlen(s);
        if (n > SPEC_MAX_STRING && w->r == 0)
                w->r = -E2BIG;
        put_u32(w, (uint32_t)n);
        put(w, s, n);
}

static void put_count(writer *w, size_t n, size_t max)
{
        if (n > max && w->r == 0)
                w->r = -E2BIG;
        put_u32(w, (uint32_t)n);
}

static void put_strv(writer *w, char *const *v, size_t max)
{
        put_bool(w, v != NULL);
        if (!v)
                return;
        size_t n = strv_length(v);
        put_count(w, n, max);
        for (size_t i = 0; i < n; i++)
                put_str(w, v[i]);
}

static void put_policy(writer *w, const nsbox_policy *p)
{
        put_str(w, p->source);
        put_str(w, p->user_name);
        put_str(w, p->home);
        put_u32(w, p->uid);
        put_u32(w, p->gid);
        put_u8(w, (uint8_t)p->root);
        put_str(w, p->root_path);
        put_bool(w, p->root_readonly);
        put_bool(w, p->python_venv);
        put_str(w, p->workdir);
        put_str(w, p->hostname);
        put_count(w, p->n_mounts, NSBOX_MAX_MOUNTS);
        for (size_t i = 0; i < p->n_mounts; i++) {
                const nsbox_mount *m = &p->mounts[i];
                put_u8(w, (uint8_t)m->type);
                put_str(w, m->source);
                put_str(w, m->target);
                put_bool(w, m->readonly);
                put_bool(w, m->no_idmap);
                put_u64(w, m->size);
        }
        put_strv(w, p->env, NSBOX_MAX_ENV);
        const nsbox_limits *l = &p->limits;
        put_u64(w, l->memory);
        put_u64(w, l->swap);
        put_u64(w, l->pids);
        put_u64(w, l->disk);
        put_u64(w, l->output);
        put_u64(w, l->nofile);
        put_u64(w, l->fsize);
        put_bool(w, l->swap_set);
        uint64_t cpus;
        memcpy(&cpus, &l->cpus, sizeof(cpus));
        put_u64(w, cpus);
        put_u64(w, l->timeout_ms);
        put_u8(w, (uint8_t)l->enforce);
        put_strv(w, p->layers, NSBOX_SPEC_MAX_LAYERS);
        put_u32(w, p->host_id_base);
        put_bool(w, p->outlive_parent);
        put_u8(w, (uint8_t)p->net);
        put_u8(w, (uint8_t)p->net_backend);
        put_strv(w, p->egress, NSBOX_MAX_EGRESS);
        put_bool(w, p->egress_set);
        put_bool(w, p->dns);
        put_bool(w, p->host_loopback);
        put_count(w, p->n_publish, NSBOX_MAX_PUBLISH);
        for (size_t i = 0; i < p->n_publish; i++) {
                put_u16(w, p->publish[i].host_port);
                put_u16(w, p->publish[i].port);
        }
        put_u64(w, p->caps);
        put_u8(w, (uint8_t)p->sc_default);
        put_u32(w, (uint32_t)p->sc_default_errno);
        put_count(w, p->n_sc_rules, NSBOX_MAX_SECCOMP_RULES);
        for (size_t i = 0; i < p->n_sc_rules; i++) {
                const nsbox_sc_rule *rule = &p->sc_rules[i];
                put_count(w, rule->n_syscalls, NSBOX_SPEC_MAX_SYSCALLS);
                for (size_t k = 0; k < rule->n_syscalls; k++)
                        put_u32(w, (uint32_t)rule->syscalls[k]);
                put_u8(w, (uint8_t)rule->action);
                put_u32(w, (uint32_t)rule->errnum);
                put_count(w, rule->n_args, 6);
                for (unsigned k = 0; k < rule->n_args && k < 6; k++) {
                        put_u32(w, rule->args[k].index);
                        put_u8(w, (uint8_t)rule->args[k].op);
                        put_u64(w, rule->args[k].value);
                        put_u64(w, rule->args[k].mask);
                }
        }
        put_u64(w, p->sc_socket_families);
        put_u32(w, p->sc_netlink_protocols);
        put_bool(w, p->sc_socket_restricted);
        put_u8(w, (uint8_t)p->sc_foreign_arch);
}

int nsbox_spec_encode(const nsbox_policy *p, const nsbox_idmap *map, const nsbox_egress_set *eg, strbuf *out, nsbox_error *err)
{
        writer w = { .out = out };
        put(&w, SPEC_MAGIC, strlen(SPEC_MAGIC));
        put_u32(&w, SPEC_VERSION);
        put_policy(&w, p);
        put_bool(&w, map->privileged);
        put_u32(&w, map->inside_uid);
        put_u32(&w, map->host_uid);
        put_u32(&w, map->inside_gid);
        put_u32(&w, map->host_gid);
        put_u32(&w, map->count);
        put_bool(&w, eg->restricted);
        put_count(&w, eg->n, NSBOX_NFT_MAX_RULES);
        for (size_t i = 0; i < eg->n; i++) {
                const nsbox_egress_rule *e = &eg->v[i];
                put_u8(&w, e->family == AF_INET6 ? 6 : e->family == AF_INET ? 4 : 0);
                put(&w, e->addr, sizeof(e->addr));
                put_u32(&w, e->prefix);
                put_u8(&w, e->proto);
                put_u16(&w, e->port_lo);
                put_u16(&w, e->port_hi);
        }
        put_bool(&w, eg->veth != NULL);
        if (eg->veth) {
                put_u32(&w, (uint32_t)eg->veth->index);
                put(&w, eg->veth->host, 4);
                put(&w, eg->veth->addr, 4);
                put_str(&w, eg->veth->ifname);
        }
        if (w.r == 0 && out->len > NSBOX_SPEC_MAX_BYTES)
                w.r = -E2BIG;
        if (w.r < 0)
                return nsbox_err(err, -w.r, "write the agent's spec");
        return 0;
}

/* ---- reading ---------------------------------------------------------------------------------- */

/* Sticky: after the first failure every read yields zero and nothing more is allocated. */
typedef struct reader {
        const uint8_t *p;
        size_t left, len;
        nsbox_error *err;
        int r;
} reader;

static void bad(reader *rd, const char *what)
{
        if (rd->r == 0)
                rd->r = nsbox_err(rd->err, 0, "agent spec: %s at byte %zu", what, rd->len - rd->left);
}

static const uint8_t *take(reader *rd, size_t n)
{
        if (rd->r < 0)
                return NULL;
        if (n > rd->left) {
                bad(rd, "truncated");
                return NULL;
        }
        const uint8_t *p = rd->p;
        rd->p += n;
        rd->left -= n;
        return p;
}

static uint8_t get_u8(reader *rd)
{
        const uint8_t *b = take(rd, 1);
        return b ? b[0] : 0;
}

static uint16_t get_u16(reader *rd)
{
        const uint8_t *b = take(rd, 2);
        return b ? (uint16_t)(b[0] | b[1] << 8) : 0;
}

static uint32_t get_u32(reader *rd)
{
        const uint8_t *b = take(rd, 4);
        uint32_t v = 0;
        for (int i = 0; b && i < 4; i++)
                v |= (uint32_t)b[i] << (8 * i);
        return v;
}

static uint64_t get_u64(reader *rd)
{
        const uint8_t *b = take(rd, 8);
        uint64_t v = 0;
        for (int i = 0; b && i < 8; i++)
                v |= (uint64_t)b[i] << (8 * i);
        return v;
}

static bool get_bool(reader *rd)
{
        uint8_t v = get_u8(rd);
        if (v > 1)
                bad(rd, "a flag other than 0 or 1");
        return v == 1;
}

/* An enum below max. */
static unsigned get_enum(reader *rd, unsigned max)
{
        uint8_t v = get_u8(rd);
        if (v >= max) {
                bad(rd, "a value out of range");
                return 0;
        }
        return v;
}

static size_t get_count(reader *rd, size_t max)
{
        uint32_t n = get_u32(rd);
        if (n > max) {
                bad(rd, "a list longer than allowed");
                return 0;
        }
        return n;
}

static void get_str(reader *rd, char **ret)
{
        *ret = NULL;
        if (!get_bool(rd))
                return;
        uint32_t n = get_u32(rd);
        if (rd->r == 0 && n > SPEC_MAX_STRING) {
                bad(rd, "a string longer than allowed");
                return;
        }
        const uint8_t *s = take(rd, n);
        if (!s)
                return;
        if (memchr(s, '\0', n)) {
                bad(rd, "a string with a NUL byte");
                return;
        }
        *ret = strndup((const char *)s, n);
        if (!*ret && rd->r == 0)
                rd->r = nsbox_err(rd->err, ENOMEM, "agent spec");
}

static void get_strv(reader *rd, size_t max, char ***ret)
{
        *ret = NULL;
        if (!get_bool(rd))
                return;
        size_t n = get_count(rd, max);
        if (rd->r < 0)
                return;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v) {
                rd->r = nsbox_err(rd->err, ENOMEM, "agent spec");
                return;
        }
        *ret = v;
        for (size_t i = 0; i < n && rd->r == 0; i++) {
                get_str(rd, &v[i]);
                if (rd->r == 0 && !v[i])
                        bad(rd, "a missing string in a list");
        }
}

/* n elements of size each, or NULL for none. */
static void *get_array(reader *rd, size_t n, size_t size)
{
        if (rd->r < 0 || n == 0)
                return NULL;
        void *v = calloc(n, size);
        if (!v)
                rd->r = nsbox_err(rd->err, ENOMEM, "agent spec");
        return v;
}

static void get_policy(reader *rd, nsbox_policy *p)
{
        get_str(rd, &p->source);
        get_str(rd, &p->user_name);
        get_str(rd, &p->home);
        p->uid = get_u32(rd);
        p->gid = get_u32(rd);
        p->root = (nsbox_root_type)get_enum(rd, _ROOT_MAX);
        get_str(rd, &p->root_path);
        p->root_readonly = get_bool(rd);
        p->python_venv = get_bool(rd);
        get_str(rd, &p->workdir);
        get_str(rd, &p->hostname);
        size_t n = get_count(rd, NSBOX_MAX_MOUNTS);
        p->mounts = get_array(rd, n, sizeof(nsbox_mount));
        for (size_t i = 0; p->mounts && i < n && rd->r == 0; i++) {
                nsbox_mount *m = &p->mounts[i];
                p->n_mounts = i + 1; /* freed with the policy from here on */
                m->type = (nsbox_mount_type)get_enum(rd, _MOUNT_MAX);
                get_str(rd, &m->source);
                get_str(rd, &m->target);
                m->readonly = get_bool(rd);
                m->no_idmap = get_bool(rd);
                m->size = get_u64(rd);
        }
        get_strv(rd, NSBOX_MAX_ENV, &p->env);
        nsbox_limits *l = &p->limits;
        l->memory = get_u64(rd);
        l->swap = get_u64(rd);
        l->pids = get_u64(rd);
        l->disk = get_u64(rd);
        l->output = get_u64(rd);
        l->nofile = get_u64(rd);
        l->fsize = get_u64(rd);
        l->swap_set = get_bool(rd);
        uint64_t cpus = get_u64(rd);
        memcpy(&l->cpus, &cpus, sizeof(cpus));
        if (!isfinite(l->cpus) || l->cpus < 0)
                bad(rd, "cpus not a finite number >= 0");
        l->timeout_ms = get_u64(rd);
        l->enforce = (nsbox_enforce)get_enum(rd, _ENFORCE_MAX);
}

/* After the layers, which are the caller's and not the policy's (policy.h). */
static void get_policy_rest(reader *rd, nsbox_policy *p)
{
        p->host_id_base = get_u32(rd);
        p->outlive_parent = get_bool(rd);
        p->net = (nsbox_net_mode)get_enum(rd, _NET_MAX);
        p->net_backend = (nsbox_net_backend)get_enum(rd, _NET_BACKEND_MAX);
        get_strv(rd, NSBOX_MAX_EGRESS, &p->egress);
        p->egress_set = get_bool(rd);
        p->dns = get_bool(rd);
        p->host_loopback = get_bool(rd);
        size_t n = get_count(rd, NSBOX_MAX_PUBLISH);
        p->publish = get_array(rd, n, sizeof(nsbox_publish));
        if (p->publish)
                p->n_publish = n;
        for (size_t i = 0; i < p->n_publish && rd->r == 0; i++) {
                p->publish[i].host_port = get_u16(rd);
                p->publish[i].port = get_u16(rd);
        }
        p->caps = get_u64(rd);
        p->sc_default = (nsbox_sc_action)get_enum(rd, _SC_ACTION_MAX);
        p->sc_default_errno = (int)get_u32(rd);
        n = get_count(rd, NSBOX_MAX_SECCOMP_RULES);
        p->sc_rules = get_array(rd, n, sizeof(nsbox_sc_rule));
        for (size_t i = 0; p->sc_rules && i < n && rd->r == 0; i++) {
                nsbox_sc_rule *rule = &p->sc_rules[i];
                p->n_sc_rules = i + 1;
                size_t ns = get_count(rd, NSBOX_SPEC_MAX_SYSCALLS);
                rule->syscalls = get_array(rd, ns, sizeof(int));
                if (rule->syscalls)
                        rule->n_syscalls = ns;
                for (size_t k = 0; k < rule->n_syscalls; k++)
                        rule->syscalls[k] = (int)get_u32(rd);
                rule->action = (nsbox_sc_action)get_enum(rd, _SC_ACTION_MAX);
                rule->errnum = (int)get_u32(rd);
                rule->n_args = (unsigned)get_count(rd, 6);
                for (unsigned k = 0; k < rule->n_args && rd->r == 0; k++) {
                        rule->args[k].index = get_u32(rd);
                        if (rule->args[k].index > 5)
                                bad(rd, "a syscall argument index above 5");
                        rule->args[k].op = (nsbox_sc_op)get_enum(rd, _SC_OP_MAX);
                        rule->args[k].value = get_u64(rd);
                        rule->args[k].mask = get_u64(rd);
                }
        }
        p->sc_socket_families = get_u64(rd);
        p->sc_netlink_protocols = get_u32(rd);
        p->sc_socket_restricted = get_bool(rd);
        p->sc_foreign_arch = (nsbox_sc_action)get_enum(rd, _SC_ACTION_MAX);
}

static void get_rules(reader *rd, nsbox_agent_spec *s)
{
        size_t n = get_count(rd, NSBOX_NFT_MAX_RULES);
        s->rules = get_array(rd, n, sizeof(nsbox_egress_rule));
        if (s->rules)
                s->n_rules = n;
        for (size_t i = 0; i < s->n_rules && rd->r == 0; i++) {
                nsbox_egress_rule *e = &s->rules[i];
                uint8_t family = get_u8(rd);
                if (family != 4 && family != 6)
                        bad(rd, "an address family other than 4 or 6");
                e->family = family == 6 ? AF_INET6 : AF_INET;
                const uint8_t *a = take(rd, sizeof(e->addr));
                if (a)
                        memcpy(e->addr, a, sizeof(e->addr));
                e->prefix = get_u32(rd);
                if (e->prefix > (family == 6 ? 128u : 32u))
                        bad(rd, "a prefix longer than the address");
                e->proto = get_u8(rd);
                e->port_lo = get_u16(rd);
                e->port_hi = get_u16(rd);
        }
}

static void get_veth(reader *rd, nsbox_agent_spec *s)
{
        if (!get_bool(rd) || rd->r < 0)
                return;
        nsbox_veth *v = get_array(rd, 1, sizeof(*v));
        if (!v)
                return;
        s->veth = v;
        v->lockfd = -1;
        v->index = (int)get_u32(rd);
        const uint8_t *b = take(rd, 4);
        if (b)
                memcpy(v->host, b, 4);
        if ((b = take(rd, 4)))
                memcpy(v->addr, b, 4);
        _cleanup_free_ char *name = NULL;
        get_str(rd, &name);
        if (rd->r == 0 && (!name || strlen(name) >= sizeof(v->ifname)))
                bad(rd, "a veth without an interface name that fits");
        else if (name)
                memcpy(v->ifname, name, strlen(name) + 1);
}

int nsbox_spec_decode(const void *data, size_t len, nsbox_agent_spec *ret, nsbox_error *err)
{
        nsbox_agent_spec s = { .policy = calloc(1, sizeof(nsbox_policy)) };
        reader rd = { .p = data, .left = len, .len = len, .err = err };
        if (!s.policy)
                return nsbox_err(err, ENOMEM, "agent spec");
        if (len > NSBOX_SPEC_MAX_BYTES)
                bad(&rd, "larger than allowed");
        const uint8_t *magic = take(&rd, strlen(SPEC_MAGIC));
        if (magic && memcmp(magic, SPEC_MAGIC, strlen(SPEC_MAGIC)))
                bad(&rd, "not an agent spec");
        if (get_u32(&rd) != SPEC_VERSION)
                bad(&rd, "another version (nsbox-agent and its launcher come from different builds)");
        get_policy(&rd, s.policy);
        get_strv(&rd, NSBOX_SPEC_MAX_LAYERS, &s.layers);
        s.policy->layers = s.layers;
        get_policy_rest(&rd, s.policy);
        s.map.privileged = get_bool(&rd);
        s.map.inside_uid = get_u32(&rd);
        s.map.host_uid = get_u32(&rd);
        s.map.inside_gid = get_u32(&rd);
        s.map.host_gid = get_u32(&rd);
        s.map.count = get_u32(&rd);
        s.restricted = get_bool(&rd);
        get_rules(&rd, &s);
        get_veth(&rd, &s);
        if (rd.r == 0 && rd.left)
                bad(&rd, "trailing bytes");
        if (rd.r < 0) {
                nsbox_spec_release(&s);
                return rd.r;
        }
        *ret = s;
        return 0;
}

void nsbox_spec_release(nsbox_agent_spec *s)
{
        if (s->policy)
                s->policy->layers = NULL;
        nsbox_policy_free(s->policy);
        strv_free(s->layers);
        free(s->rules);
        free(s->veth);
        *s = (nsbox_agent_spec){ 0 };
}
