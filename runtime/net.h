/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sandbox's network (nsbox-policy(5) "network"): loopback only, or user-mode NAT through
 * slirp4netns attached to the sandbox's namespaces, with an egress allow-list enforced by
 * nf_tables inside the sandbox's own network namespace, and host loopback ports published to
 * ports inside. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "nft.h"
#include "policy.h"
#include "veth.h"

/* What the sandbox sees in mode nat (slirp4netns's fixed layout on 10.0.2.0/24). */
#define NSBOX_NAT_ADDR "10.0.2.100"
#define NSBOX_NAT_GATEWAY "10.0.2.2" /* the host's 127.0.0.1 when network.host_loopback */
#define NSBOX_NAT_DNS "10.0.2.3"     /* forwards to the host's resolver when network.dns */

/* One egress entry: [tcp:|udp:]ADDR[/PREFIX][:PORT[-PORT]], with an IPv6 address in brackets
 * when a port follows, or [tcp:|udp:]HOST[:PORT[-PORT]] for a host name resolved at start.
 * 0, or -EINVAL with err saying what is wrong (the caller prefixes where it came from). */
int nsbox_egress_check(const char *spec, nsbox_error *err);
/* The policy's list as nf_tables rules: host names resolved now, through the host's resolver;
 * with network.dns, the sandbox's resolver is allowed port 53.  *ret is malloc'ed. */
int nsbox_egress_resolve(const nsbox_policy *p, nsbox_egress_rule **ret, size_t *n, nsbox_error *err);
/* [127.0.0.1:]HOSTPORT[:PORT] */
int nsbox_publish_parse(const char *spec, nsbox_publish *ret, nsbox_error *err);

/* Step 6 inside the sandbox: loopback up; backend veth: eth0 (veth, or NULL); with an egress
 * list (restricted), its rules. */
int nsbox_net_setup_inside(const nsbox_veth *veth, const nsbox_egress_rule *rules, size_t n, bool restricted, nsbox_error *err);
/* The host's IPv4 name servers that a sandbox behind the veth backend can reach (not on the
 * host's loopback), from /etc/resolv.conf; at most max. */
size_t nsbox_host_nameservers(uint8_t out[][4], size_t max);
/* Kept for callers that want loopback alone. */
int nsbox_net_loopback_up(nsbox_error *err);

/* Mode nat: the slirp4netns process serving one sandbox.  It exits when exitfd closes: when
 * nsbox_net_stop closes it, or when the supervisor dies, however it dies. */
typedef struct nsbox_net {
        pid_t pid; /* slirp4netns */
        int pidfd;
        int exitfd;
        nsbox_veth veth; /* backend veth */
} nsbox_net;
#define NSBOX_NET_INIT { .pid = 0, .pidfd = -1, .exitfd = -1, .veth = NSBOX_VETH_INIT }

/* Before any namespace exists: mode nat has slirp4netns, a published host port is free, and
 * egress and publish are not asked of mode none. */
int nsbox_net_check_host(const nsbox_policy *p, nsbox_error *err);
/* Backend slirp4netns: attach it to the sandbox's user and network namespaces (open fds, id
 * maps written), wait until the tap device is configured, publish p's ports.  Backend veth:
 * nothing (nsbox_veth_reserve before the clone and nsbox_veth_create before the child goes on
 * did the work). */
int nsbox_net_start(const nsbox_policy *p, int userns_fd, int netns_fd, nsbox_net *ret, nsbox_error *err);
/* Close the exit fd and wait until slirp4netns is gone (its published ports with it). */
void nsbox_net_stop(nsbox_net *n);
/* Close the exit fd and forget the process: it exits on its own, which takes the kernel some
 * 20 ms (its tap device goes with the sandbox's network namespace).  Returns its pid, for a
 * caller that reaps it later, or 0. */
pid_t nsbox_net_detach(nsbox_net *n);
