/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "consts.h"

#include <errno.h>
#include <linux/netlink.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "util.h"

struct named { const char *name; uint64_t value; };
#define N(x) { #x, (uint64_t)(x) }

static const struct named errnos[] = {
        N(EPERM), N(ENOENT), N(EACCES), N(EINVAL), N(ENOSYS), N(EAFNOSUPPORT), N(EOPNOTSUPP),
        N(EPROTONOSUPPORT), N(ENOTSUP), N(EBUSY), N(ENOMEM), N(EROFS), N(ENOTTY), N(EFAULT),
};

static const struct named consts[] = {
        N(CLONE_NEWNS), N(CLONE_NEWCGROUP), N(CLONE_NEWUTS), N(CLONE_NEWIPC), N(CLONE_NEWUSER),
        N(CLONE_NEWPID), N(CLONE_NEWNET), { "CLONE_NEWTIME", 0x00000080 },
        N(TIOCSTI), N(TIOCLINUX), { "PERSONALITY_QUERY", 0xffffffffu },
        { "CLONE_NEW_ANY", 0x7e020080u },
};

static const struct named families[] = {
        N(AF_UNIX), N(AF_INET), N(AF_INET6), N(AF_NETLINK), N(AF_PACKET), N(AF_VSOCK), N(AF_ALG),
        N(AF_KEY), N(AF_BLUETOOTH), N(AF_CAN), N(AF_TIPC), N(AF_RDS), N(AF_XDP), N(AF_APPLETALK),
        N(AF_AX25), N(AF_X25), N(AF_NFC), N(AF_PPPOX), N(AF_LLC), N(AF_IB), N(AF_MPLS),
        N(AF_QIPCRTR), N(AF_SMC),
};

static const struct named netlinks[] = {
        N(NETLINK_ROUTE), N(NETLINK_AUDIT), N(NETLINK_SOCK_DIAG), N(NETLINK_NETFILTER),
        N(NETLINK_KOBJECT_UEVENT), N(NETLINK_XFRM), N(NETLINK_SELINUX), N(NETLINK_GENERIC),
        N(NETLINK_CONNECTOR), N(NETLINK_CRYPTO),
};

static bool lookup(const struct named *t, size_t n, const char *name, uint64_t *ret)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(t[i].name, name)) {
                        *ret = t[i].value;
                        return true;
                }
        return false;
}

bool nsbox_errno_from_name(const char *name, int *ret)
{
        uint64_t v;
        if (!lookup(errnos, ARRAY_SIZE(errnos), name, &v))
                return false;
        *ret = (int)v;
        return true;
}

bool nsbox_const_from_name(const char *name, uint64_t *ret)
{
        int v;
        if (lookup(consts, ARRAY_SIZE(consts), name, ret))
                return true;
        if (nsbox_af_from_name(name, &v) || nsbox_errno_from_name(name, &v)) {
                *ret = (uint64_t)v;
                return true;
        }
        return false;
}

bool nsbox_af_from_name(const char *name, int *ret)
{
        uint64_t v;
        if (!lookup(families, ARRAY_SIZE(families), name, &v))
                return false;
        *ret = (int)v;
        return true;
}

bool nsbox_netlink_from_name(const char *name, int *ret)
{
        uint64_t v;
        if (!lookup(netlinks, ARRAY_SIZE(netlinks), name, &v))
                return false;
        *ret = (int)v;
        return true;
}
