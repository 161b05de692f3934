/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent spec (runtime/spec.h): what nsbox-agent receives from its launcher.  A policy with
 * every field set comes back equal, field by field, and encodes again to the same bytes; every
 * truncation and every out-of-range value is refused with one line and nothing allocated. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../runtime/mounts.h"
#include "../../runtime/spec.h"
#include "unit.h"

static char **strv(const char *a, const char *b)
{
        char **v = calloc(3, sizeof(char *));
        v[0] = strdup(a);
        v[1] = strdup(b);
        return v;
}

/* Every field set, none to its zero value. */
static nsbox_policy *full_policy(void)
{
        nsbox_policy *p = calloc(1, sizeof(*p));
        p->source = strdup("/etc/nsbox/full.json");
        p->user_name = strdup("agent");
        p->home = strdup("/home/agent");
        p->uid = 1234;
        p->gid = 5678;
        p->root = ROOT_DIR;
        p->root_path = strdup("/srv/rootfs");
        p->root_readonly = true;
        p->python_venv = true;
        p->workdir = strdup("/workspace");
        p->hostname = strdup("full");
        p->n_mounts = 2;
        p->mounts = calloc(2, sizeof(nsbox_mount));
        p->mounts[0] = (nsbox_mount){ .type = MOUNT_BIND, .source = strdup("/data"), .target = strdup("/mnt/data"), .readonly = true, .no_idmap = true, .size = 0 };
        p->mounts[1] = (nsbox_mount){ .type = MOUNT_TMPFS, .source = NULL, .target = strdup("/scratch"), .readonly = false, .size = 1 << 20 };
        p->env = strv("PATH=/usr/bin:/bin", "SECRET=s3cr\xc3\xa9t with spaces");
        p->limits = (nsbox_limits){ .memory = 1u << 30, .swap = 2, .pids = 3, .disk = 4, .output = 5, .nofile = 6, .fsize = 7,
                                    .swap_set = true, .cpus = 1.5, .timeout_ms = 8, .enforce = ENFORCE_REQUIRED };
        p->host_id_base = 0x70010000u;
        p->outlive_parent = true;
        p->net = NET_NAT;
        p->net_backend = NET_BACKEND_VETH;
        p->egress = strv("tcp:example.com:443", "10.0.0.0/8");
        p->egress_set = true;
        p->dns = true;
        p->host_loopback = true;
        p->n_publish = 1;
        p->publish = calloc(1, sizeof(nsbox_publish));
        p->publish[0] = (nsbox_publish){ .host_port = 8080, .port = 80 };
        p->caps = 1ull << 10;
        p->sc_default = SC_ERRNO;
        p->sc_default_errno = 38;
        p->n_sc_rules = 2;
        p->sc_rules = calloc(2, sizeof(nsbox_sc_rule));
        p->sc_rules[0].n_syscalls = 2;
        p->sc_rules[0].syscalls = calloc(2, sizeof(int));
        p->sc_rules[0].syscalls[0] = 101;
        p->sc_rules[0].syscalls[1] = 250;
        p->sc_rules[0].action = SC_KILL;
        p->sc_rules[0].errnum = 1;
        p->sc_rules[0].n_args = 2;
        p->sc_rules[0].args[0] = (nsbox_sc_arg){ .index = 1, .op = SC_OP_MASKED_EQ, .value = 0x10, .mask = 0xff };
        p->sc_rules[0].args[1] = (nsbox_sc_arg){ .index = 5, .op = SC_OP_GE, .value = UINT64_MAX, .mask = 0 };
        p->sc_rules[1].n_syscalls = 1;
        p->sc_rules[1].syscalls = calloc(1, sizeof(int));
        p->sc_rules[1].syscalls[0] = 16;
        p->sc_rules[1].action = SC_ERRNO;
        p->sc_rules[1].errnum = 13;
        p->sc_socket_families = 0x1234;
        p->sc_netlink_protocols = 0x5;
        p->sc_socket_restricted = true;
        p->sc_foreign_arch = SC_ERRNO;
        return p;
}

static void assert_str_eq(const char *a, const char *b)
{
        ck_assert_msg((a == NULL) == (b == NULL), "'%s' vs '%s'", a ? a : "(null)", b ? b : "(null)");
        if (a)
                ck_assert_str_eq(a, b);
}

static void assert_strv_eq(char *const *a, char *const *b)
{
        ck_assert_msg((a == NULL) == (b == NULL), "a list came back %s", a ? "missing" : "present");
        for (size_t i = 0; a && (a[i] || b[i]); i++)
                assert_str_eq(a[i], b[i]);
}

static void assert_policy_eq(const nsbox_policy *a, const nsbox_policy *b)
{
        assert_str_eq(a->source, b->source);
        assert_str_eq(a->user_name, b->user_name);
        assert_str_eq(a->home, b->home);
        ck_assert_uint_eq(a->uid, b->uid);
        ck_assert_uint_eq(a->gid, b->gid);
        ck_assert_int_eq(a->root, b->root);
        assert_str_eq(a->root_path, b->root_path);
        ck_assert_int_eq(a->root_readonly, b->root_readonly);
        ck_assert_int_eq(a->python_venv, b->python_venv);
        assert_str_eq(a->workdir, b->workdir);
        assert_str_eq(a->hostname, b->hostname);
        ck_assert_uint_eq(a->n_mounts, b->n_mounts);
        for (size_t i = 0; i < a->n_mounts; i++) {
                ck_assert_int_eq(a->mounts[i].type, b->mounts[i].type);
                assert_str_eq(a->mounts[i].source, b->mounts[i].source);
                assert_str_eq(a->mounts[i].target, b->mounts[i].target);
                ck_assert_int_eq(a->mounts[i].readonly, b->mounts[i].readonly);
                ck_assert_int_eq(a->mounts[i].no_idmap, b->mounts[i].no_idmap);
                ck_assert_uint_eq(a->mounts[i].size, b->mounts[i].size);
        }
        assert_strv_eq(a->env, b->env);
        ck_assert_mem_eq(&a->limits.memory, &b->limits.memory, 7 * sizeof(uint64_t));
        ck_assert_int_eq(a->limits.swap_set, b->limits.swap_set);
        ck_assert_double_eq(a->limits.cpus, b->limits.cpus);
        ck_assert_uint_eq(a->limits.timeout_ms, b->limits.timeout_ms);
        ck_assert_int_eq(a->limits.enforce, b->limits.enforce);
        assert_strv_eq(a->layers, b->layers);
        ck_assert_uint_eq(a->host_id_base, b->host_id_base);
        ck_assert_int_eq(a->outlive_parent, b->outlive_parent);
        ck_assert_int_eq(a->net, b->net);
        ck_assert_int_eq(a->net_backend, b->net_backend);
        assert_strv_eq(a->egress, b->egress);
        ck_assert_int_eq(a->egress_set, b->egress_set);
        ck_assert_int_eq(a->dns, b->dns);
        ck_assert_int_eq(a->host_loopback, b->host_loopback);
        ck_assert_uint_eq(a->n_publish, b->n_publish);
        for (size_t i = 0; i < a->n_publish; i++) {
                ck_assert_uint_eq(a->publish[i].host_port, b->publish[i].host_port);
                ck_assert_uint_eq(a->publish[i].port, b->publish[i].port);
        }
        ck_assert_uint_eq(a->caps, b->caps);
        ck_assert_int_eq(a->sc_default, b->sc_default);
        ck_assert_int_eq(a->sc_default_errno, b->sc_default_errno);
        ck_assert_uint_eq(a->n_sc_rules, b->n_sc_rules);
        for (size_t i = 0; i < a->n_sc_rules; i++) {
                const nsbox_sc_rule *x = &a->sc_rules[i], *y = &b->sc_rules[i];
                ck_assert_uint_eq(x->n_syscalls, y->n_syscalls);
                ck_assert_mem_eq(x->syscalls, y->syscalls, x->n_syscalls * sizeof(int));
                ck_assert_int_eq(x->action, y->action);
                ck_assert_int_eq(x->errnum, y->errnum);
                ck_assert_uint_eq(x->n_args, y->n_args);
                for (unsigned k = 0; k < x->n_args; k++) {
                        ck_assert_uint_eq(x->args[k].index, y->args[k].index);
                        ck_assert_int_eq(x->args[k].op, y->args[k].op);
                        ck_assert_uint_eq(x->args[k].value, y->args[k].value);
                        ck_assert_uint_eq(x->args[k].mask, y->args[k].mask);
                }
        }
        ck_assert_uint_eq(a->sc_socket_families, b->sc_socket_families);
        ck_assert_uint_eq(a->sc_netlink_protocols, b->sc_netlink_protocols);
        ck_assert_int_eq(a->sc_socket_restricted, b->sc_socket_restricted);
        ck_assert_int_eq(a->sc_foreign_arch, b->sc_foreign_arch);
}

static const nsbox_egress_rule rules[2] = {
        { .family = AF_INET, .addr = { 10, 0, 0, 0 }, .prefix = 8, .proto = 6, .port_lo = 443, .port_hi = 443 },
        { .family = AF_INET6, .addr = { 0x20, 0x01, 0x0d, 0xb8 }, .prefix = 32, .proto = 0, .port_lo = 1, .port_hi = 65535 },
};
static const nsbox_veth veth = { .index = 7, .lockfd = 9, .host = { 10, 213, 0, 29 }, .addr = { 10, 213, 0, 30 }, .ifname = "nsbv7" };
static const nsbox_idmap map = { .privileged = true, .inside_uid = 0, .host_uid = 0x70010000u, .inside_gid = 0, .host_gid = 0x70010000u, .count = 65536 };

/* The full policy with layers, encoded; the policy in *ret_p for the caller to free. */
static void encode_full(strbuf *out, nsbox_policy **ret_p)
{
        nsbox_policy *p = full_policy();
        char *const layers[] = { "/var/lib/nsbox/layers/b", "/var/lib/nsbox/layers/a", NULL };
        p->layers = layers;
        nsbox_egress_set eg = { .v = rules, .n = 2, .restricted = true, .veth = &veth };
        nsbox_error err = { 0 };
        sb_init(out, NSBOX_SPEC_MAX_BYTES);
        UNIT_ASSERT_OK(nsbox_spec_encode(p, &map, &eg, out, &err), &err);
        p->layers = NULL;
        *ret_p = p;
}

START_TEST(spec_round_trips_a_policy_with_every_field_set)
{
        strbuf buf, again;
        nsbox_policy *p;
        encode_full(&buf, &p);
        nsbox_agent_spec s;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_spec_decode(buf.buf, buf.len, &s, &err), &err);
        char *const layers[] = { "/var/lib/nsbox/layers/b", "/var/lib/nsbox/layers/a", NULL };
        p->layers = layers;
        assert_policy_eq(p, s.policy);
        p->layers = NULL;
        ck_assert_mem_eq(&s.map, &map, sizeof(map));
        ck_assert_int_eq(s.restricted, true);
        ck_assert_uint_eq(s.n_rules, 2);
        ck_assert_mem_eq(s.rules, rules, sizeof(rules));
        ck_assert_ptr_nonnull(s.veth);
        ck_assert_int_eq(s.veth->index, 7);
        ck_assert_int_eq(s.veth->lockfd, -1); /* the launcher's lock is not the agent's */
        ck_assert_mem_eq(s.veth->host, veth.host, 4);
        ck_assert_mem_eq(s.veth->addr, veth.addr, 4);
        ck_assert_str_eq(s.veth->ifname, "nsbv7");
        /* and the same bytes again */
        nsbox_egress_set eg = { .v = s.rules, .n = s.n_rules, .restricted = s.restricted, .veth = s.veth };
        sb_init(&again, NSBOX_SPEC_MAX_BYTES);
        UNIT_ASSERT_OK(nsbox_spec_encode(s.policy, &s.map, &eg, &again, &err), &err);
        ck_assert_uint_eq(again.len, buf.len);
        ck_assert_mem_eq(again.buf, buf.buf, buf.len);
        nsbox_spec_release(&s);
        nsbox_policy_free(p);
        sb_release(&buf);
        sb_release(&again);
}
END_TEST

START_TEST(spec_round_trips_an_empty_policy)
{
        nsbox_policy *p = calloc(1, sizeof(*p));
        strbuf buf;
        sb_init(&buf, NSBOX_SPEC_MAX_BYTES);
        nsbox_idmap m = { 0 };
        nsbox_egress_set eg = { 0 };
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_spec_encode(p, &m, &eg, &buf, &err), &err);
        nsbox_agent_spec s;
        UNIT_ASSERT_OK(nsbox_spec_decode(buf.buf, buf.len, &s, &err), &err);
        assert_policy_eq(p, s.policy);
        ck_assert_ptr_null(s.veth);
        ck_assert_ptr_null(s.rules);
        nsbox_spec_release(&s);
        nsbox_policy_free(p);
        sb_release(&buf);
}
END_TEST

static void assert_refused(const char *data, size_t len, const char *needle)
{
        nsbox_agent_spec s = { .policy = (nsbox_policy *)(uintptr_t)0x5e5e };
        nsbox_error err = { 0 };
        ck_assert_int_lt(nsbox_spec_decode(data, len, &s, &err), 0);
        ck_assert_msg(s.policy == (nsbox_policy *)(uintptr_t)0x5e5e, "the result was written on failure");
        UNIT_ASSERT_ERROR(&err, "agent spec: ", needle);
}

START_TEST(spec_refuses_every_truncation)
{
        strbuf buf;
        nsbox_policy *p;
        encode_full(&buf, &p);
        for (size_t n = 0; n < buf.len; n++)
                assert_refused(buf.buf, n, "truncated");
        nsbox_policy_free(p);
        sb_release(&buf);
        mark_point(); /* reported under this test's name, not the helper's */
}
END_TEST

START_TEST(spec_refuses_what_it_would_not_write)
{
        strbuf buf;
        nsbox_policy *p;
        encode_full(&buf, &p);
        char *d = malloc(buf.len + 1);
        memcpy(d, buf.buf, buf.len);
        d[buf.len] = 0;
        assert_refused(d, buf.len + 1, "trailing bytes");
        d[0] = 'X';
        assert_refused(d, buf.len, "not an agent spec");
        memcpy(d, buf.buf, buf.len);
        d[8] = 2; /* version */
        assert_refused(d, buf.len, "another version");
        memcpy(d, buf.buf, buf.len);
        d[12] = 2; /* the source's presence flag */
        assert_refused(d, buf.len, "a flag other than 0 or 1");
        memcpy(d, buf.buf, buf.len);
        d[14] = 0xff; /* the source's length, second byte: longer than the rest */
        assert_refused(d, buf.len, "truncated");
        memcpy(d, buf.buf, buf.len);
        d[17] = '\0'; /* inside the source string */
        assert_refused(d, buf.len, "a string with a NUL byte");
        free(d);
        nsbox_policy_free(p);
        sb_release(&buf);
        mark_point();
}
END_TEST

START_TEST(spec_refuses_lists_longer_than_the_agent_reads)
{
        nsbox_policy *p = calloc(1, sizeof(*p));
        p->n_mounts = NSBOX_MAX_MOUNTS + 1;
        p->mounts = calloc(p->n_mounts, sizeof(nsbox_mount));
        strbuf buf;
        sb_init(&buf, NSBOX_SPEC_MAX_BYTES);
        nsbox_idmap m = { 0 };
        nsbox_egress_set eg = { 0 };
        nsbox_error err = { 0 };
        ck_assert_int_eq(nsbox_spec_encode(p, &m, &eg, &buf, &err), -E2BIG);
        UNIT_ASSERT_ERROR(&err, "write the agent's spec");
        nsbox_policy_free(p);
        sb_release(&buf);
}
END_TEST

/* ---- the sources across the exec (mounts.h) ---- */

static void put64(uint8_t **p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                *(*p)++ = (uint8_t)(v >> (8 * i));
}

/* Two mounts (a directory bind from fd 0, a tmpfs), no rootfs, one layer (fd 1), one hidden
 * point under the bind: the bytes, and two fds at consecutive numbers. */
static size_t sources_bytes(uint8_t *buf, uint64_t tree0, uint64_t layer, uint64_t hide_mount)
{
        uint8_t *p = buf;
        put64(&p, 2);
        put64(&p, tree0), put64(&p, 1);
        put64(&p, UINT64_MAX), put64(&p, 0);
        put64(&p, UINT64_MAX);
        put64(&p, 1), put64(&p, layer);
        put64(&p, 1), put64(&p, hide_mount), put64(&p, 42), put64(&p, 7), put64(&p, 3);
        memcpy(p, "a/b", 3);
        return (size_t)(p - buf) + 3;
}

static int two_fds(void)
{
        int probe = open("/", O_PATH | O_CLOEXEC);
        ck_assert_int_ge(probe, 0);
        int base = fcntl(probe, F_DUPFD_CLOEXEC, 100); /* a free number, and the one after it */
        close(probe);
        ck_assert_int_ge(base, 100);
        ck_assert_int_eq(fcntl(base + 1, F_GETFD), -1);
        for (int fd = base; fd < base + 2; fd++) {
                int o = open("/", O_PATH | O_CLOEXEC);
                ck_assert_int_ge(o, 0);
                ck_assert_int_eq(dup3(o, fd, O_CLOEXEC), fd);
                if (o != fd)
                        close(o);
        }
        return base;
}

START_TEST(sources_round_trip_across_the_exec)
{
        uint8_t buf[256];
        size_t n = sources_bytes(buf, 0, 1, 0);
        int base = two_fds();
        nsbox_sources src;
        nsbox_error err = { 0 };
        ck_assert_int_eq(nsbox_sources_decode(buf, n, 2, base, 2, &src, &err), 0);
        ck_assert_int_eq(src.rootfs_fd, -1);
        ck_assert_uint_eq(src.n_layers, 1);
        ck_assert_int_eq(src.layer_fds[0], base + 1);
        ck_assert_uint_eq(src.n_hides, 1);
        strbuf out;
        sb_init(&out, 1 << 20);
        int *fds = NULL;
        size_t n_fds = 0;
        ck_assert_int_eq(nsbox_sources_encode(&src, 2, &out, &fds, &n_fds), 0);
        ck_assert_uint_eq(out.len, n);
        ck_assert_int_eq(memcmp(out.buf, buf, n), 0);
        ck_assert_uint_eq(n_fds, 2);
        ck_assert_int_eq(fds[0], base);
        ck_assert_int_eq(fds[1], base + 1);
        free(fds);
        sb_release(&out);
        nsbox_sources_release(&src); /* closes both */
        ck_assert_int_eq(fcntl(base, F_GETFD), -1);
        ck_assert_int_eq(fcntl(base + 1, F_GETFD), -1);
}
END_TEST

START_TEST(sources_refuse_truncations_reused_or_unnamed_fds_and_bad_mounts)
{
        uint8_t buf[256];
        size_t n = sources_bytes(buf, 0, 1, 0);
        nsbox_error err = { 0 };
        char msg[256];
        for (size_t len = 0; len < n; len++) {
                nsbox_sources src;
                ck_assert_int_lt(nsbox_sources_decode(buf, len, 2, 1000, 2, &src, &err), 0);
                nsbox_sources_release(&src);
                UNIT_ASSERT_ERROR(&err, "the sandbox's sources");
        }
        struct { uint64_t tree0, layer, hide_mount; size_t n_fds; } bad[] = {
                { 0, 0, 0, 2 }, /* one fd named twice */
                { 0, 1, 0, 3 }, /* an fd named by nothing */
                { 0, 2, 0, 2 }, /* an fd past the ones passed */
                { 0, 1, 2, 2 }, /* a hidden point under no mount */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                nsbox_sources src;
                size_t len = sources_bytes(buf, bad[i].tree0, bad[i].layer, bad[i].hide_mount);
                /* fds that do not exist: nothing may be used or closed before the whole is read */
                ck_assert_int_lt(nsbox_sources_decode(buf, len, 2, 1000, bad[i].n_fds, &src, &err), 0);
                unit_take_error(&err, msg, sizeof(msg));
                ck_assert_msg(strstr(msg, "malformed"), "case %zu: %s", i, msg);
                nsbox_sources_release(&src);
        }
}
END_TEST

Suite *spec_suite(void)
{
        Suite *s = suite_create("spec");
        TCase *tc = unit_tcase(s, "spec");
        unit_add(tc, spec_round_trips_a_policy_with_every_field_set);
        unit_add(tc, spec_round_trips_an_empty_policy);
        unit_add(tc, spec_refuses_every_truncation);
        unit_add(tc, spec_refuses_what_it_would_not_write);
        unit_add(tc, spec_refuses_lists_longer_than_the_agent_reads);
        unit_add(tc, sources_round_trip_across_the_exec);
        unit_add(tc, sources_refuse_truncations_reused_or_unnamed_fds_and_bad_mounts);
        return s;
}
