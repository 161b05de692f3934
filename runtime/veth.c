/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "veth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nft.h"
#include "util.h"

#define POOL_SLOTS 16384 /* /30s in the /16 */
#define VETH_PEER "eth0"

static const uint8_t pool[4] = { 10, 213, 0, 0 };

static void slot_addr(int index, unsigned host, uint8_t out[4])
{
        unsigned off = (unsigned)index * 4 + host;
        out[0] = pool[0];
        out[1] = pool[1];
        out[2] = (uint8_t)(off >> 8);
        out[3] = (uint8_t)(off & 0xff);
}

int nsbox_veth_reserve(nsbox_veth *v, nsbox_error *err)
{
        *v = (nsbox_veth)NSBOX_VETH_INIT;
        unsigned i;
        int r = nsbox_slot_take(NSBOX_VETH_LOCKDIR, POOL_SLOTS, "veth: the addresses of " NSBOX_VETH_POOL, &i, &v->lockfd, err);
        if (r < 0)
                return r;
        v->index = (int)i;
        slot_addr(v->index, 1, v->host);
        slot_addr(v->index, 2, v->addr);
        snprintf(v->ifname, sizeof(v->ifname), "nsbv%d", v->index);
        return 0;
}

static int nl_fail(nsbox_error *err, int nlerr, const char *what)
{
        return nsbox_err_as(err, EIO, "veth: %s: %s", what, nl_geterror(nlerr));
}

static struct nl_sock *route_socket(nsbox_error *err)
{
        struct nl_sock *sk = nl_socket_alloc();
        if (!sk) {
                nsbox_err(err, ENOMEM, "veth: netlink socket");
                return NULL;
        }
        int r = nl_connect(sk, NETLINK_ROUTE);
        if (r < 0) {
                nl_fail(err, r, "connect to rtnetlink");
                nl_socket_free(sk);
                return NULL;
        }
        return sk;
}

/* IFNAME up with ADDR/PREFIX, in the namespace of sk. */
static int link_up_with_addr(struct nl_sock *sk, const char *ifname, const uint8_t addr[4], unsigned prefix, int *ret_index,
                             nsbox_error *err)
{
        struct rtnl_link *link = NULL, *change = NULL;
        struct rtnl_addr *a = NULL;
        struct nl_addr *local = NULL;
        int r = rtnl_link_get_kernel(sk, 0, ifname, &link);
        if (r < 0) {
                r = nl_fail(err, r, ifname);
                goto out;
        }
        int index = rtnl_link_get_ifindex(link);
        a = rtnl_addr_alloc();
        local = nl_addr_build(AF_INET, addr, 4);
        change = rtnl_link_alloc();
        if (!a || !local || !change) {
                r = nsbox_err(err, ENOMEM, "veth: %s", ifname);
                goto out;
        }
        nl_addr_set_prefixlen(local, (int)prefix);
        rtnl_addr_set_ifindex(a, index);
        rtnl_addr_set_local(a, local);
        if ((r = rtnl_addr_add(sk, a, 0)) < 0) {
                r = nl_fail(err, r, "add the address");
                goto out;
        }
        rtnl_link_set_flags(change, IFF_UP);
        if ((r = rtnl_link_change(sk, link, change, 0)) < 0) {
                r = nl_fail(err, r, "bring the link up");
                goto out;
        }
        if (ret_index)
                *ret_index = index;
        r = 0;
out:
        nl_addr_put(local);
        rtnl_addr_put(a);
        rtnl_link_put(change);
        rtnl_link_put(link);
        return r;
}

static int delete_link(struct nl_sock *sk, const char *ifname)
{
        struct rtnl_link *link = rtnl_link_alloc();
        if (!link)
                return -ENOMEM;
        rtnl_link_set_name(link, ifname);
        int r = rtnl_link_delete(sk, link);
        rtnl_link_put(link);
        return r;
}

static int write_sysctl(const char *path, const char *value)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, value, strlen(value));
        return n == (ssize_t)strlen(value) ? 0 : -errno;
}

int nsbox_veth_create(nsbox_veth *v, int netns_fd, nsbox_error *err)
{
        int r = nsbox_nft_host_nat(pool, 16, err);
        if (r < 0)
                return r;
        /* routing between the pool and the world: what every router needs */
        if ((r = write_sysctl("/proc/sys/net/ipv4/ip_forward", "1")) < 0)
                return nsbox_err(err, -r, "veth: enable IPv4 forwarding (/proc/sys/net/ipv4/ip_forward)");
        struct nl_sock *sk = route_socket(err);
        if (!sk)
                return -EIO;
        struct rtnl_link *link = rtnl_link_veth_alloc();
        if (!link) {
                nl_socket_free(sk);
                return nsbox_err(err, ENOMEM, "veth");
        }
        struct rtnl_link *peer = rtnl_link_veth_get_peer(link);
        rtnl_link_set_name(link, v->ifname);
        rtnl_link_set_name(peer, VETH_PEER);
        rtnl_link_set_ns_fd(peer, netns_fd);
        r = rtnl_link_add(sk, link, NLM_F_CREATE | NLM_F_EXCL);
        if (r == -NLE_EXIST) {
                /* a pair whose sandbox died with its holder (kill -9): its namespace is being
                 * torn down; we hold the slot's lock, so the name is ours to take back */
                delete_link(sk, v->ifname);
                r = rtnl_link_add(sk, link, NLM_F_CREATE | NLM_F_EXCL);
        }
        rtnl_link_put(peer);
        rtnl_link_veth_release(link);
        if (r < 0) {
                nl_socket_free(sk);
                return nl_fail(err, r, "create the pair");
        }
        r = link_up_with_addr(sk, v->ifname, v->host, 30, NULL, err);
        nl_socket_free(sk);
        return r;
}

int nsbox_veth_setup_inside(const nsbox_veth *v, nsbox_error *err)
{
        struct nl_sock *sk = route_socket(err);
        if (!sk)
                return -EIO;
        struct rtnl_route *route = rtnl_route_alloc();
        struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
        struct nl_addr *dst = nl_addr_build(AF_INET, (const uint8_t[4]){ 0 }, 4), *gw = nl_addr_build(AF_INET, v->host, 4);
        int index = 0, r;
        if (!route || !nh || !dst || !gw) {
                r = nsbox_err(err, ENOMEM, "veth: route");
                goto out;
        }
        if ((r = link_up_with_addr(sk, VETH_PEER, v->addr, 30, &index, err)) < 0)
                goto out;
        nl_addr_set_prefixlen(dst, 0);
        rtnl_route_set_family(route, AF_INET);
        rtnl_route_set_dst(route, dst);
        rtnl_route_nh_set_gateway(nh, gw);
        rtnl_route_nh_set_ifindex(nh, index);
        rtnl_route_add_nexthop(route, nh);
        nh = NULL; /* the route owns it */
        if ((r = rtnl_route_add(sk, route, NLM_F_CREATE)) < 0)
                r = nl_fail(err, r, "add the default route");
out:
        if (nh)
                rtnl_route_nh_free(nh);
        nl_addr_put(dst);
        nl_addr_put(gw);
        rtnl_route_put(route);
        nl_socket_free(sk);
        return r < 0 ? r : 0;
}

void nsbox_veth_release(nsbox_veth *v)
{
        /* The pair goes with the sandbox's network namespace, which the kernel tears down in the
         * background; deleting it here would cost the caller some 30 ms of RCU waits.  The slot
         * is free at once: a new pair under a name still being torn down is handled by
         * nsbox_veth_create. */
        if (v->lockfd >= 0)
                close(v->lockfd);
        *v = (nsbox_veth)NSBOX_VETH_INIT;
}
