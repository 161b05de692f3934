/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The seccomp filter: the policy's rules, the socket family restriction and the refusal of
 * foreign architectures (docs/security.md, The default seccomp filter), compiled with libseccomp. */
#include "seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "consts.h"
#include "util.h"

static uint32_t to_scmp_action(nsbox_sc_action a, int errnum)
{
        switch (a) {
        case SC_ALLOW: return SCMP_ACT_ALLOW;
        case SC_ERRNO: return SCMP_ACT_ERRNO((uint16_t)errnum);
        case SC_KILL: return SCMP_ACT_KILL_PROCESS;
        case SC_TRAP: return SCMP_ACT_TRAP;
        case SC_LOG: return SCMP_ACT_LOG;
        default: return SCMP_ACT_KILL_PROCESS;
        }
}

static enum scmp_compare to_scmp_op(nsbox_sc_op op)
{
        static const enum scmp_compare map[_SC_OP_MAX] = {
                [SC_OP_EQ] = SCMP_CMP_EQ, [SC_OP_NE] = SCMP_CMP_NE, [SC_OP_LT] = SCMP_CMP_LT,
                [SC_OP_LE] = SCMP_CMP_LE, [SC_OP_GT] = SCMP_CMP_GT, [SC_OP_GE] = SCMP_CMP_GE,
                [SC_OP_MASKED_EQ] = SCMP_CMP_MASKED_EQ,
        };
        return map[op];
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, uint32_t def, int nr, unsigned n, const struct scmp_arg_cmp *cmp,
                    nsbox_error *err)
{
        if (action == def)
                return 0; /* same as the default: nothing to add (libseccomp refuses it) */
        int r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
        if (r < 0) {
                char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
                r = nsbox_err(err, -r, "seccomp: cannot add rule for '%s'", name ? name : "?");
                free(name);
        }
        return r;
}

/* Refuse ARG (with `pre` comparisons ANDed, e.g. the family) unless it is in ALLOWED (bits
 * 0..nbits-1).  libseccomp takes one comparison per argument, so "not in the set" becomes one
 * equality rule per refused value below the highest allowed one, and a single >= rule above. */
static int add_not_in_set(scmp_filter_ctx ctx, uint32_t action, uint32_t def, int nr, unsigned arg, uint64_t allowed,
                          unsigned nbits, const struct scmp_arg_cmp *pre, unsigned npre, nsbox_error *err)
{
        unsigned top = 0; /* one past the highest allowed value */
        for (unsigned v = 0; v < nbits; v++)
                if (allowed & (1ull << v))
                        top = v + 1;
        struct scmp_arg_cmp c[2];
        if (npre)
                c[0] = pre[0];
        for (unsigned v = 0; v <= top; v++) {
                if (v < top && (allowed & (1ull << v)))
                        continue;
                c[npre] = (struct scmp_arg_cmp){ .arg = arg, .op = v == top ? SCMP_CMP_GE : SCMP_CMP_EQ, .datum_a = v };
                int r = add_rule(ctx, action, def, nr, npre + 1, c, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* socket(2) only for the listed families, and AF_NETLINK only for the listed protocols. */
static int add_socket_rules(scmp_filter_ctx ctx, const nsbox_policy *p, uint32_t def, nsbox_error *err)
{
        uint32_t deny = SCMP_ACT_ERRNO(EAFNOSUPPORT);
        int r = add_not_in_set(ctx, deny, def, SCMP_SYS(socket), 0, p->sc_socket_families, NSBOX_AF_MAX, NULL, 0, err);
        /* No raw IP sockets, whatever capabilities the policy keeps: a raw socket writes packets
         * that no connection tracking saw (SOCK_PACKET is the old AF_INET spelling of a packet
         * socket; AF_PACKET is refused by family).  Netlink sockets are SOCK_RAW too, so the
         * family is part of the rule.  The type is the low bits; the rest are flags. */
        static const int families[] = { AF_INET, AF_INET6 }, raw_types[] = { SOCK_RAW, SOCK_PACKET };
        for (size_t f = 0; f < ARRAY_SIZE(families) && r == 0; f++)
                for (size_t i = 0; i < ARRAY_SIZE(raw_types) && r == 0; i++) {
                        struct scmp_arg_cmp c[2] = { SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[f]),
                                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)raw_types[i]) };
                        r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), def, SCMP_SYS(socket), 2, c, err);
                }
        if (r < 0 || !(p->sc_socket_families & (1ull << AF_NETLINK)))
                return r;
        struct scmp_arg_cmp netlink = SCMP_A0(SCMP_CMP_EQ, AF_NETLINK);
        return add_not_in_set(ctx, deny, def, SCMP_SYS(socket), 2, p->sc_netlink_protocols, NSBOX_NETLINK_MAX, &netlink, 1, err);
}

/* A sandbox with a read-write bind writes host files: none may be made setuid or setgid (as
 * systemd's RestrictSUIDSGID), or a host user running it would gain the bind owner's ids (the
 * caller's, or root's through a root caller's id-mapped bind).  Elsewhere such bits are inert
 * (nosuid mounts, no_new_privs) and kept, for the sandbox's own files and snapshots. */
static bool has_rw_bind(const nsbox_policy *p)
{
        for (size_t i = 0; i < p->n_mounts; i++)
                if (p->mounts[i].type == MOUNT_BIND && !p->mounts[i].readonly)
                        return true;
        return false;
}

/* Linux 6.6; unknown to libseccomp 2.5, its number is the same on every architecture */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif

static int add_suid_rules(scmp_filter_ctx ctx, uint32_t def, nsbox_error *err)
{
        static const struct {
                int nr;
                unsigned mode, flags; /* argument indexes; flags 0: none */
        } calls[] = {
                { SCMP_SYS(chmod), 1, 0 },    { SCMP_SYS(fchmod), 1, 0 },  { SCMP_SYS(fchmodat), 2, 0 },
                { __NR_fchmodat2, 2, 0 }, { SCMP_SYS(creat), 1, 0 },   { SCMP_SYS(mknod), 1, 0 },
                { SCMP_SYS(mknodat), 2, 0 },  { SCMP_SYS(mkdir), 1, 0 },   { SCMP_SYS(mkdirat), 2, 0 },
                { SCMP_SYS(open), 2, 1 },     { SCMP_SYS(openat), 3, 2 },
        };
        /* O_TMPFILE is __O_TMPFILE | O_DIRECTORY: its own bit tells it */
        static const scmp_datum_t bits[] = { S_ISUID, S_ISGID }, creating[] = { O_CREAT, 020000000 };
        uint32_t deny = SCMP_ACT_ERRNO(EPERM);
        int r = 0;
        for (size_t i = 0; i < ARRAY_SIZE(calls) && r == 0; i++)
                for (size_t b = 0; b < ARRAY_SIZE(bits) && r == 0; b++) {
                        struct scmp_arg_cmp c[2] = { { .arg = calls[i].mode, .op = SCMP_CMP_MASKED_EQ, .datum_a = bits[b], .datum_b = bits[b] } };
                        if (!calls[i].flags) {
                                r = add_rule(ctx, deny, def, calls[i].nr, 1, c, err);
                                continue;
                        }
                        for (size_t f = 0; f < ARRAY_SIZE(creating) && r == 0; f++) {
                                c[1] = (struct scmp_arg_cmp){ .arg = calls[i].flags, .op = SCMP_CMP_MASKED_EQ, .datum_a = creating[f],
                                                              .datum_b = creating[f] };
                                r = add_rule(ctx, deny, def, calls[i].nr, 2, c, err);
                        }
                }
        /* openat2's mode is in memory, out of the filter's reach: ENOSYS, libcs fall back to openat */
        return r ? r : add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), def, SCMP_SYS(openat2), 0, NULL, err);
}

int nsbox_seccomp_compile(const nsbox_policy *p, nsbox_bpf *ret, nsbox_error *err)
{
        uint32_t def = to_scmp_action(p->sc_default, p->sc_default_errno);
        _cleanup_close_ int fd = -1;
        scmp_filter_ctx ctx = seccomp_init(def);
        if (!ctx)
                return nsbox_err(err, ENOMEM, "seccomp: cannot create filter");
        int r = 0;
        /* A syscall made through another ABI (int 0x80, x32) would bypass every rule below:
         * the native-only filter answers it with the bad-arch action. */
        uint32_t badarch = p->sc_foreign_arch == SC_KILL ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(ENOSYS);
        if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, badarch)) < 0) {
                r = nsbox_err(err, -r, "seccomp: cannot set the foreign-architecture action");
                goto out;
        }
        /* A binary tree over syscall numbers: every syscall of the sandbox pays a few
         * comparisons, not one per rule (libseccomp >= 2.5). */
        if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) {
                r = nsbox_err(err, -r, "seccomp: cannot request an optimized filter");
                goto out;
        }
        /* no_new_privs is set by the launcher itself, in its place in the setup order. */
        if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0) {
                r = nsbox_err(err, -r, "seccomp: cannot configure filter");
                goto out;
        }
        for (size_t i = 0; i < p->n_sc_rules; i++) {
                const nsbox_sc_rule *rule = &p->sc_rules[i];
                struct scmp_arg_cmp cmp[6];
                for (unsigned j = 0; j < rule->n_args; j++) {
                        const nsbox_sc_arg *a = &rule->args[j];
                        cmp[j] = (struct scmp_arg_cmp){ .arg = a->index, .op = to_scmp_op(a->op),
                                                        .datum_a = a->op == SC_OP_MASKED_EQ ? a->mask : a->value,
                                                        .datum_b = a->op == SC_OP_MASKED_EQ ? a->value : 0 };
                }
                uint32_t action = to_scmp_action(rule->action, rule->errnum);
                for (size_t k = 0; k < rule->n_syscalls; k++)
                        if ((r = add_rule(ctx, action, def, rule->syscalls[k], rule->n_args, cmp, err)) < 0) {
                                nsbox_err_wrap(err, r, "policy '%s': seccomp.rules[%zu]", p->source, i);
                                goto out;
                        }
        }
        if (p->sc_socket_restricted && (r = add_socket_rules(ctx, p, def, err)) < 0)
                goto out;
        if (has_rw_bind(p) && (r = add_suid_rules(ctx, def, err)) < 0)
                goto out;

        /* libseccomp 2.5 exports to a file descriptor only: go through a memfd. */
        fd = memfd_create("nsbox-seccomp", MFD_CLOEXEC);
        if (fd < 0) {
                r = nsbox_err(err, errno, "seccomp: memfd_create");
                goto out;
        }
        if ((r = seccomp_export_bpf(ctx, fd)) < 0) {
                r = nsbox_err(err, -r, "seccomp: cannot compile filter");
                goto out;
        }
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % (off_t)sizeof(struct sock_filter) || size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
                r = nsbox_err(err, 0, "seccomp: compiled filter has a bad size (%lld bytes)", (long long)size);
                goto out;
        }
        struct sock_filter *insns = malloc((size_t)size);
        if (!insns) {
                r = -ENOMEM;
                goto out;
        }
        if (pread(fd, insns, (size_t)size, 0) != size) {
                free(insns);
                r = nsbox_err(err, errno ? errno : EIO, "seccomp: cannot read compiled filter");
                goto out;
        }
        ret->insns = insns;
        ret->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
        r = 0;
out:
        seccomp_release(ctx);
        return r;
}

int nsbox_seccomp_install(const nsbox_bpf *bpf)
{
        struct sock_fprog prog = { .len = bpf->len, .filter = bpf->insns };
        /* TSYNC is not needed: the sandbox's processes are single-threaded when they install it. */
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return -errno;
        return 0;
}

void nsbox_bpf_release(nsbox_bpf *bpf)
{
        free(bpf->insns);
        bpf->insns = NULL;
        bpf->len = 0;
}
