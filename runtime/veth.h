/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Root's NAT backend (network.backend "veth"): a veth pair per sandbox, configured with
 * libnl-route.  The host side gets the first address of a /30 of the pool 10.213.0.0/16, the
 * sandbox side is eth0 with the second and a default route through the first; nftables on the
 * host masquerades the pool and keeps sandboxes apart.  A /30 is taken with an flock(2) on
 * /run/nsbox/veth/INDEX, which dies with its holder. */
#pragma once

#include <net/if.h>
#include <stdint.h>

#include "error.h"

#define NSBOX_VETH_POOL "10.213.0.0/16"
#define NSBOX_VETH_LOCKDIR "/run/nsbox/veth"

typedef struct nsbox_veth {
        int index;        /* -1: none */
        int lockfd;
        uint8_t host[4];  /* the sandbox's gateway */
        uint8_t addr[4];  /* the sandbox's eth0 */
        char ifname[IF_NAMESIZE]; /* host side: nsbvINDEX */
} nsbox_veth;
#define NSBOX_VETH_INIT { .index = -1, .lockfd = -1 }

/* Before the clone: take a free /30 (the child learns its addresses from this). */
int nsbox_veth_reserve(nsbox_veth *v, nsbox_error *err);
/* The launcher, with the child's network namespace open: the pair, the host side's address,
 * up; the peer named eth0 in the sandbox; the host's masquerade table and IPv4 forwarding. */
int nsbox_veth_create(nsbox_veth *v, int netns_fd, nsbox_error *err);
/* Step 6 inside: eth0 up with its address and the default route. */
int nsbox_veth_setup_inside(const nsbox_veth *v, nsbox_error *err);
/* Free the /30; the pair goes with the sandbox's network namespace. */
void nsbox_veth_release(nsbox_veth *v);
