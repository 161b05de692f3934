/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sandbox's egress allow-list as an nf_tables ruleset, installed in one transaction. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Entries per call: the whole batch must fit in one netlink message (the socket's default send
 * buffer, about 208 KiB). */
#define NSBOX_NFT_MAX_RULES 128

typedef struct nsbox_egress_rule {
        int family;                /* AF_INET or AF_INET6 */
        uint8_t addr[16];          /* network byte order; host bits beyond prefix are zero */
        unsigned prefix;           /* 0..32 (AF_INET) or 0..128 (AF_INET6) */
        uint8_t proto;             /* 0 = tcp and udp and anything else, IPPROTO_TCP, IPPROTO_UDP */
        uint16_t port_lo, port_hi; /* host byte order; 0,0 = any port; else 1 <= lo <= hi */
} nsbox_egress_rule;

/* Install in the calling thread's network namespace `table inet nsbox` with one chain
 * `egress` (type filter, hook output, priority 0, policy accept) holding, in order:
 *   oif lo accept                                   (meta oif == 1: lo in a fresh netns)
 *   ct state established,related accept
 *   meta nfproto ipv6 meta l4proto ipv6-icmp icmpv6 type 133-136 accept
 *                                                   (neighbour discovery: without it no IPv6
 *                                                   address on the link, allowed or not, resolves)
 *   for each rule: [nfproto ipv4|ipv6] [ip|ip6 daddr & mask == addr] [l4proto tcp|udp]
 *                  [th dport lo..hi] accept
 *     (proto 0 with ports: two rules, one for tcp and one for udp; prefix 0 = no address match)
 *   meta l4proto tcp reject with tcp reset
 *   reject with icmpx admin-prohibited
 * so that a connection to anything not listed fails at once (ECONNREFUSED for TCP) instead of
 * hanging.  n == 0 means: deny everything but loopback and established.  Atomic (one batch):
 * on failure the namespace keeps whatever it had before.  Once per namespace: when `table inet
 * nsbox` exists already, -EEXIST and nothing changes.  Needs CAP_NET_ADMIN over the netns (nsbox calls it
 * inside the sandbox's fresh user+net namespace before dropping capabilities).
 * Returns 0 or -errno with err set (one line, no trailing newline): -EINVAL for an invalid rule
 * (nothing sent), -EPERM without CAP_NET_ADMIN, else the kernel's error for the first message
 * it refused ("egress rules: cannot add rule 4 (entry 0): Operation not supported"); entry i
 * is rules[i]. */
int nsbox_nft_egress(const nsbox_egress_rule *rules, size_t n, nsbox_error *err);

/* The veth backend, in the host's network namespace: `table inet nsbox-host` masquerading IPv4
 * from POOL/PREFIX to anywhere outside it, and dropping what one address of the pool forwards to
 * another.  Made once and left for later sandboxes: 0 when it is there already. */
int nsbox_nft_host_nat(const uint8_t pool[4], unsigned prefix, nsbox_error *err);
