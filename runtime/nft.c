/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The egress allow-list as one nf_tables transaction, spoken directly over NETLINK_NETFILTER:
 * no libnftables, no nft(8) and no libnl, so the nsbox binary links nothing more for it and a
 * sandbox start pays one socket and one round trip.  Message layout: nf_tables.h, and what
 * libnftnl's expr/{meta,cmp,payload,bitwise,ct,immediate,reject}.c put in each expression. */
#include "nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "util.h"

#define TABLE "nsbox"
#define CHAIN "egress"
#define HOST_TABLE "nsbox-host" /* the host's, for the veth backend */
#define BATCH_MAX (200 * 1024) /* below the default netlink send buffer (sk_sndbuf - 32) */
#define ICMPV6_ND_FIRST 133    /* router solicitation */
#define ICMPV6_ND_LAST 136     /* neighbour advertisement */

/* Sequence numbers of the batch's messages; the rules follow, then the batch end. */
enum {
        SEQ_BEGIN = 1,
        SEQ_TABLE,
        SEQ_CHAIN,
        SEQ_FIRST_RULE,
};
#define FIXED_HEAD_RULES 3 /* lo, established, neighbour discovery */

/* A batch of netlink messages being built.  Invariant: sb.len is a multiple of 4 (the alignment of
 * messages and attributes alike); after a failed append nothing more is written and failed holds
 * the -errno, checked once when the batch is complete. */
typedef struct batch {
        strbuf sb;
        int failed;
        uint32_t seq;      /* of the last message started */
        const char *table; /* what put_table, put_chain and rule_start name */
        const char *chain;
} batch;

static void batch_release(batch *b)
{
        sb_release(&b->sb);
}

static void put_raw(batch *b, const void *data, size_t len)
{
        static const uint8_t zeros[NLA_ALIGNTO];
        if (b->failed)
                return;
        int r = sb_append(&b->sb, data, len);
        if (r >= 0)
                r = sb_append(&b->sb, zeros, NLA_ALIGN(len) - len);
        if (r < 0)
                b->failed = r;
}

static void attr(batch *b, uint16_t type, const void *data, size_t len)
{
        struct nlattr nla = { .nla_len = NLA_HDRLEN + len, .nla_type = type };
        put_raw(b, &nla, sizeof(nla));
        put_raw(b, data, len);
}

static void attr_be32(batch *b, uint16_t type, uint32_t value)
{
        value = htonl(value);
        attr(b, type, &value, sizeof(value));
}

static void attr_str(batch *b, uint16_t type, const char *s)
{
        attr(b, type, s, strlen(s) + 1);
}

static size_t nest_start(batch *b, uint16_t type)
{
        size_t off = b->sb.len;
        struct nlattr nla = { .nla_type = type | NLA_F_NESTED };
        put_raw(b, &nla, sizeof(nla));
        return off;
}

/* Lengths of nests and messages are known at their end: patch the header's first field. */
static void nest_end(batch *b, size_t off)
{
        size_t len = b->sb.len - off;
        if (!b->failed && len > UINT16_MAX)
                b->failed = -E2BIG;
        if (!b->failed)
                memcpy(b->sb.buf + off, &(uint16_t){ len }, sizeof(uint16_t));
}

static size_t msg_start(batch *b, uint16_t type, uint16_t flags, uint8_t family, uint16_t res_id)
{
        size_t off = b->sb.len;
        struct {
                struct nlmsghdr nlh;
                struct nfgenmsg nfg;
        } hdr = {
                .nlh = { .nlmsg_type = type, .nlmsg_flags = NLM_F_REQUEST | flags, .nlmsg_seq = ++b->seq },
                .nfg = { .nfgen_family = family, .version = NFNETLINK_V0, .res_id = htons(res_id) },
        };
        put_raw(b, &hdr, sizeof(hdr));
        return off;
}

static void msg_end(batch *b, size_t off)
{
        if (!b->failed)
                memcpy(b->sb.buf + off, &(uint32_t){ b->sb.len - off }, sizeof(uint32_t));
}

static size_t nft_msg_start(batch *b, uint16_t cmd, uint16_t flags)
{
        return msg_start(b, NFNL_SUBSYS_NFTABLES << 8 | cmd, flags, NFPROTO_INET, 0);
}

/* The batch delimiters carry the subsystem in res_id; the kernel applies what is between them
 * as one transaction. */
static void put_batch_marker(batch *b, uint16_t type)
{
        msg_end(b, msg_start(b, type, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES));
}

static void put_table(batch *b, uint16_t cmd, uint16_t flags)
{
        size_t m = nft_msg_start(b, cmd, flags);
        attr_str(b, NFTA_TABLE_NAME, b->table);
        msg_end(b, m);
}

/* A base chain; it becomes the one rule_start() appends to. */
static void put_chain(batch *b, const char *name, uint32_t hooknum, int32_t priority, const char *type)
{
        b->chain = name;
        size_t m = nft_msg_start(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
        attr_str(b, NFTA_CHAIN_TABLE, b->table);
        attr_str(b, NFTA_CHAIN_NAME, name);
        size_t hook = nest_start(b, NFTA_CHAIN_HOOK);
        attr_be32(b, NFTA_HOOK_HOOKNUM, hooknum);
        attr_be32(b, NFTA_HOOK_PRIORITY, (uint32_t)priority);
        nest_end(b, hook);
        attr_be32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
        attr_str(b, NFTA_CHAIN_TYPE, type);
        msg_end(b, m);
}

/* An expression: a list element holding its name and its own attributes. */
typedef struct expr {
        size_t elem, data;
} expr;

static expr expr_start(batch *b, const char *name)
{
        expr e = { .elem = nest_start(b, NFTA_LIST_ELEM) };
        attr_str(b, NFTA_EXPR_NAME, name);
        e.data = nest_start(b, NFTA_EXPR_DATA);
        return e;
}

static void expr_end(batch *b, expr e)
{
        nest_end(b, e.data);
        nest_end(b, e.elem);
}

/* A constant (cmp data, bitwise mask and xor): a nest holding NFTA_DATA_VALUE. */
static void put_data(batch *b, uint16_t type, const void *value, size_t len)
{
        size_t nest = nest_start(b, type);
        attr(b, NFTA_DATA_VALUE, value, len);
        nest_end(b, nest);
}

/* Every load goes to register 1, which every cmp then reads: one match at a time.  meta and ct
 * loads differ only in their attribute numbers. */
static void put_expr_key_load(batch *b, const char *name, uint16_t key_attr, uint32_t key, uint16_t dreg_attr)
{
        expr e = expr_start(b, name);
        attr_be32(b, key_attr, key);
        attr_be32(b, dreg_attr, NFT_REG_1);
        expr_end(b, e);
}

static void put_expr_meta(batch *b, uint32_t key)
{
        put_expr_key_load(b, "meta", NFTA_META_KEY, key, NFTA_META_DREG);
}

static void put_expr_payload(batch *b, uint32_t base, uint32_t offset, uint32_t len)
{
        expr e = expr_start(b, "payload");
        attr_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
        attr_be32(b, NFTA_PAYLOAD_BASE, base);
        attr_be32(b, NFTA_PAYLOAD_OFFSET, offset);
        attr_be32(b, NFTA_PAYLOAD_LEN, len);
        expr_end(b, e);
}

/* reg1 = reg1 & mask (xor zero) */
static void put_expr_bitwise(batch *b, const void *mask, uint32_t len)
{
        static const uint8_t zeros[16];
        expr e = expr_start(b, "bitwise");
        attr_be32(b, NFTA_BITWISE_SREG, NFT_REG_1);
        attr_be32(b, NFTA_BITWISE_DREG, NFT_REG_1);
        attr_be32(b, NFTA_BITWISE_LEN, len);
        put_data(b, NFTA_BITWISE_MASK, mask, len);
        put_data(b, NFTA_BITWISE_XOR, zeros, len);
        expr_end(b, e);
}

/* Compares reg1 with value bytewise (memcmp): big-endian numbers order correctly. */
static void put_expr_cmp(batch *b, uint32_t op, const void *value, uint32_t len)
{
        expr e = expr_start(b, "cmp");
        attr_be32(b, NFTA_CMP_SREG, NFT_REG_1);
        attr_be32(b, NFTA_CMP_OP, op);
        put_data(b, NFTA_CMP_DATA, value, len);
        expr_end(b, e);
}

static void put_match_meta(batch *b, uint32_t key, const void *value, uint32_t len)
{
        put_expr_meta(b, key);
        put_expr_cmp(b, NFT_CMP_EQ, value, len);
}

static void put_verdict(batch *b, uint32_t verdict)
{
        expr e = expr_start(b, "immediate");
        attr_be32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
        size_t data = nest_start(b, NFTA_IMMEDIATE_DATA);
        size_t v = nest_start(b, NFTA_DATA_VERDICT);
        attr_be32(b, NFTA_VERDICT_CODE, verdict);
        nest_end(b, v);
        nest_end(b, data);
        expr_end(b, e);
}

static void put_verdict_accept(batch *b)
{
        put_verdict(b, NF_ACCEPT);
}

static void put_expr_reject(batch *b, uint32_t type, const uint8_t *icmp_code)
{
        expr e = expr_start(b, "reject");
        attr_be32(b, NFTA_REJECT_TYPE, type);
        if (icmp_code)
                attr(b, NFTA_REJECT_ICMP_CODE, icmp_code, 1);
        expr_end(b, e);
}

/* A rule appended to the chain; its expressions go between rule_start() and rule_end(). */
typedef struct rule {
        size_t msg, exprs;
} rule;

static rule rule_start(batch *b, uint16_t flags)
{
        rule r = { .msg = nft_msg_start(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND | flags) };
        attr_str(b, NFTA_RULE_TABLE, b->table);
        attr_str(b, NFTA_RULE_CHAIN, b->chain);
        r.exprs = nest_start(b, NFTA_RULE_EXPRESSIONS);
        return r;
}

static void rule_end(batch *b, rule r)
{
        nest_end(b, r.exprs);
        msg_end(b, r.msg);
}

static void put_head_rules(batch *b)
{
        const uint32_t lo_ifindex = 1;
        const uint32_t ct_mask = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED);
        const uint32_t zero = 0;
        const uint8_t ipv6 = NFPROTO_IPV6, icmpv6 = IPPROTO_ICMPV6;
        const uint8_t nd_first = ICMPV6_ND_FIRST, nd_last = ICMPV6_ND_LAST;

        rule r = rule_start(b, 0);
        put_match_meta(b, NFT_META_OIF, &lo_ifindex, sizeof(lo_ifindex));
        put_verdict_accept(b);
        rule_end(b, r);

        /* ct state is a host-order bitmask: established or related is "state & mask != 0". */
        r = rule_start(b, 0);
        put_expr_key_load(b, "ct", NFTA_CT_KEY, NFT_CT_STATE, NFTA_CT_DREG);
        put_expr_bitwise(b, &ct_mask, sizeof(ct_mask));
        put_expr_cmp(b, NFT_CMP_NEQ, &zero, sizeof(zero));
        put_verdict_accept(b);
        rule_end(b, r);

        /* Neighbour discovery is untracked by conntrack: without this rule the reject below would
         * stop the solicitations that reach even an allowed address on the link. */
        r = rule_start(b, 0);
        put_match_meta(b, NFT_META_NFPROTO, &ipv6, 1);
        put_match_meta(b, NFT_META_L4PROTO, &icmpv6, 1);
        put_expr_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1);
        put_expr_cmp(b, NFT_CMP_GTE, &nd_first, 1);
        put_expr_cmp(b, NFT_CMP_LTE, &nd_last, 1);
        put_verdict_accept(b);
        rule_end(b, r);
}

static size_t addr_len(int family)
{
        return family == AF_INET ? 4 : 16;
}

static void prefix_mask(uint8_t *mask, size_t len, unsigned prefix)
{
        for (size_t i = 0; i < len; i++) {
                unsigned bits = prefix > 8 * i ? prefix - 8 * i : 0;
                mask[i] = bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);
        }
}

/* One accept rule for entry e; l4proto 0 matches any protocol (then e has no ports). */
static void put_allow_rule(batch *b, const nsbox_egress_rule *e, uint8_t l4proto)
{
        const uint8_t nfproto = e->family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
        const size_t alen = addr_len(e->family);

        rule r = rule_start(b, 0);
        put_match_meta(b, NFT_META_NFPROTO, &nfproto, 1);
        if (e->prefix > 0) {
                put_expr_payload(b, NFT_PAYLOAD_NETWORK_HEADER, e->family == AF_INET ? 16 : 24, alen);
                if (e->prefix < 8 * alen) {
                        uint8_t mask[16];
                        prefix_mask(mask, alen, e->prefix);
                        put_expr_bitwise(b, mask, alen);
                }
                put_expr_cmp(b, NFT_CMP_EQ, e->addr, alen);
        }
        if (l4proto)
                put_match_meta(b, NFT_META_L4PROTO, &l4proto, 1);
        if (e->port_lo) {
                /* th dport: the l4proto match above makes the transport header known */
                const uint16_t lo = htons(e->port_lo), hi = htons(e->port_hi);
                put_expr_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
                if (e->port_lo == e->port_hi) {
                        put_expr_cmp(b, NFT_CMP_EQ, &lo, 2);
                } else {
                        put_expr_cmp(b, NFT_CMP_GTE, &lo, 2);
                        put_expr_cmp(b, NFT_CMP_LTE, &hi, 2);
                }
        }
        put_verdict_accept(b);
        rule_end(b, r);
}

/* A port match needs a protocol: "any protocol" with ports is one rule for tcp, one for udp. */
static size_t kernel_rules_of(const nsbox_egress_rule *e)
{
        return e->proto == 0 && e->port_lo ? 2 : 1;
}

static void put_allow_rules(batch *b, const nsbox_egress_rule *e)
{
        if (kernel_rules_of(e) == 2) {
                put_allow_rule(b, e, IPPROTO_TCP);
                put_allow_rule(b, e, IPPROTO_UDP);
        } else {
                put_allow_rule(b, e, e->proto);
        }
}

/* The whole transaction; returns the sequence number of its last rule, the one acknowledged. */
static uint32_t build_batch(batch *b, const nsbox_egress_rule *rules, size_t n)
{
        const uint8_t tcp = IPPROTO_TCP, admin_prohibited = NFT_REJECT_ICMPX_ADMIN_PROHIBITED;

        put_batch_marker(b, NFNL_MSG_BATCH_BEGIN);
        /* A new table, never a replacement (EEXIST if one is there): deleting anything in the
         * transaction would make closing the socket wait for an RCU grace period, some 13 ms of
         * every sandbox start.  Within the transaction no packet sees the chain half built. */
        put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL);
        put_chain(b, CHAIN, NF_INET_LOCAL_OUT, 0, "filter");
        put_head_rules(b);
        for (size_t i = 0; i < n; i++)
                put_allow_rules(b, &rules[i]);

        rule r = rule_start(b, 0);
        put_match_meta(b, NFT_META_L4PROTO, &tcp, 1);
        put_expr_reject(b, NFT_REJECT_TCP_RST, NULL);
        rule_end(b, r);

        /* The kernel answers failed messages anyway; this ack says the batch reached its end. */
        r = rule_start(b, NLM_F_ACK);
        put_expr_reject(b, NFT_REJECT_ICMPX_UNREACH, &admin_prohibited);
        rule_end(b, r);
        uint32_t last = b->seq;

        put_batch_marker(b, NFNL_MSG_BATCH_END);
        return last;
}

static int check_rule(const nsbox_egress_rule *e, size_t idx, nsbox_error *err)
{
        if (e->family != AF_INET && e->family != AF_INET6)
                return nsbox_err_as(err, EINVAL, "egress rules: entry %zu: address family %d is neither AF_INET nor AF_INET6",
                                    idx, e->family);
        const size_t alen = addr_len(e->family);
        if (e->prefix > 8 * alen)
                return nsbox_err_as(err, EINVAL, "egress rules: entry %zu: prefix /%u is longer than the address", idx,
                                    e->prefix);
        uint8_t mask[16];
        prefix_mask(mask, alen, e->prefix);
        for (size_t i = 0; i < alen; i++)
                if (e->addr[i] & ~mask[i])
                        return nsbox_err_as(err, EINVAL, "egress rules: entry %zu: address has bits set beyond its /%u prefix",
                                            idx, e->prefix);
        if (e->proto != 0 && e->proto != IPPROTO_TCP && e->proto != IPPROTO_UDP)
                return nsbox_err_as(err, EINVAL, "egress rules: entry %zu: protocol %u is neither tcp nor udp", idx, e->proto);
        if ((e->port_lo || e->port_hi) && (e->port_lo == 0 || e->port_lo > e->port_hi))
                return nsbox_err_as(err, EINVAL, "egress rules: entry %zu: invalid port range %u-%u", idx, e->port_lo,
                                    e->port_hi);
        return 0;
}

/* Send the batch and read the outcome.  The kernel processes the batch within sendto() and then
 * answers each message it refused, in order, and the acknowledged last rule; or only the batch's
 * first message when it refused the batch as a whole (no CAP_NET_ADMIN, failed commit).  Returns 0,
 * the first refusal as -errno with *ret_seq its message, or a socket error with *ret_seq 0. */
static int exchange(int fd, const batch *b, uint32_t last_seq, uint32_t *ret_seq)
{
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        if (sendto(fd, b->sb.buf, b->sb.len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
                return -errno;

        int first = 0;
        for (;;) {
                union {
                        struct nlmsghdr align;
                        char buf[8192];
                } u;
                ssize_t len = recv(fd, u.buf, sizeof(u.buf), 0);
                if (len < 0 && errno == EINTR)
                        continue;
                if (len < 0)
                        return first ? first : -errno; /* ENOBUFS: answers lost after the first refusal */
                for (struct nlmsghdr *h = &u.align; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
                        if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                                continue;
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        if (e->error < 0 && !first) {
                                first = e->error;
                                *ret_seq = h->nlmsg_seq;
                        }
                        if (h->nlmsg_seq == last_seq || (e->error < 0 && h->nlmsg_seq == SEQ_BEGIN))
                                return first;
                }
        }
}

/* Which message the kernel refused, in the words of the header's description. */
static int report_refusal(int r, uint32_t seq, const nsbox_egress_rule *rules, size_t n, nsbox_error *err)
{
        if (seq == SEQ_BEGIN && r == -EPERM)
                return nsbox_err(err, r, "egress rules: changing nf_tables needs CAP_NET_ADMIN over the network namespace");
        if (seq == SEQ_BEGIN)
                return nsbox_err(err, r, "egress rules: the kernel refused the transaction");
        if (seq == SEQ_TABLE && r == -EEXIST)
                return nsbox_err(err, r, "egress rules: table 'inet " TABLE "' is already there (they are installed once, in a new network namespace)");
        if (seq == SEQ_TABLE)
                return nsbox_err(err, r, "egress rules: cannot create table 'inet " TABLE "'");
        if (seq == SEQ_CHAIN)
                return nsbox_err(err, r, "egress rules: cannot create chain '" CHAIN "'");
        size_t k = seq - SEQ_FIRST_RULE; /* 0-based position in the chain */
        if (k >= FIXED_HEAD_RULES) {
                size_t first = FIXED_HEAD_RULES;
                for (size_t i = 0; i < n; first += kernel_rules_of(&rules[i]), i++)
                        if (k < first + kernel_rules_of(&rules[i]))
                                return nsbox_err(err, r, "egress rules: cannot add rule %zu (entry %zu)", k + 1, i);
        }
        return nsbox_err(err, r, "egress rules: cannot add rule %zu", k + 1);
}

/* Send a complete batch on a new NETLINK_NETFILTER socket; as exchange(). */
static int send_batch(const batch *b, uint32_t last_seq, uint32_t *ret_seq)
{
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return -errno;
        /* Answers without a copy of each refused message; an old kernel without it sends more. */
        int one = 1;
        (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
        /* The answers are queued before sendto() returns; the timeout only guards a kernel that
         * drops a malformed batch without a word. */
        struct timeval timeout = { .tv_sec = 5 };
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) < 0)
                return -errno;
        return exchange(fd, b, last_seq, ret_seq);
}

int nsbox_nft_egress(const nsbox_egress_rule *rules, size_t n, nsbox_error *err)
{
        /* Validate everything before talking to the kernel. */
        if (n > NSBOX_NFT_MAX_RULES)
                return nsbox_err_as(err, E2BIG, "egress rules: %zu entries, at most %d are supported", n, NSBOX_NFT_MAX_RULES);
        if (n && !rules)
                return nsbox_err_as(err, EINVAL, "egress rules: no entries given");
        for (size_t i = 0; i < n; i++) {
                int r = check_rule(&rules[i], i, err);
                if (r < 0)
                        return r;
        }

        _cleanup_(batch_release) batch b = { .seq = 0, .table = TABLE };
        sb_init(&b.sb, BATCH_MAX);
        uint32_t last_seq = build_batch(&b, rules, n);
        if (b.failed)
                return nsbox_err(err, b.failed, "egress rules: build the nf_tables batch");
        uint32_t seq = 0;
        int r = send_batch(&b, last_seq, &seq);
        if (r < 0 && seq == 0)
                return nsbox_err(err, r, "egress rules: netlink exchange with nf_tables");
        if (r < 0)
                return report_refusal(r, seq, rules, n, err);
        return 0;
}

/* ---- the host's side of the veth backend ---- */

/* ipv4, and (offset: 12 saddr, 16 daddr) & mask op net */
static void put_match_ip4(batch *b, uint32_t offset, const uint8_t net[4], const uint8_t mask[4], uint32_t op)
{
        put_expr_payload(b, NFT_PAYLOAD_NETWORK_HEADER, offset, 4);
        put_expr_bitwise(b, mask, 4);
        put_expr_cmp(b, op, net, 4);
}

/* 1 when table NAME (family inet) exists, 0 when not, or -errno: a read, no transaction. */
static int table_exists(const char *name)
{
        _cleanup_(batch_release) batch b = { .seq = 0, .table = name };
        sb_init(&b.sb, 4096);
        size_t m = nft_msg_start(&b, NFT_MSG_GETTABLE, NLM_F_ACK);
        attr_str(&b, NFTA_TABLE_NAME, name);
        msg_end(&b, m);
        if (b.failed)
                return b.failed;
        uint32_t seq = 0;
        int r = send_batch(&b, b.seq, &seq);
        return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

int nsbox_nft_host_nat(const uint8_t pool[4], unsigned prefix, nsbox_error *err)
{
        /* there already (the usual case): an aborted transaction would cost an RCU wait */
        if (table_exists(HOST_TABLE) == 1)
                return 0;
        const uint8_t ipv4 = NFPROTO_IPV4;
        uint8_t mask[4];
        prefix_mask(mask, 4, prefix);
        _cleanup_(batch_release) batch b = { .seq = 0, .table = HOST_TABLE };
        sb_init(&b.sb, BATCH_MAX);
        put_batch_marker(&b, NFNL_MSG_BATCH_BEGIN);
        put_table(&b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL);
        /* out of the pool to anywhere else: the host's address */
        put_chain(&b, "postrouting", NF_INET_POST_ROUTING, 100, "nat");
        rule r = rule_start(&b, 0);
        put_match_meta(&b, NFT_META_NFPROTO, &ipv4, 1);
        put_match_ip4(&b, 12, pool, mask, NFT_CMP_EQ);
        put_match_ip4(&b, 16, pool, mask, NFT_CMP_NEQ);
        expr e = expr_start(&b, "masq");
        expr_end(&b, e);
        rule_end(&b, r);
        /* from one sandbox to another: never */
        put_chain(&b, "forward", NF_INET_FORWARD, 0, "filter");
        r = rule_start(&b, NLM_F_ACK);
        put_match_meta(&b, NFT_META_NFPROTO, &ipv4, 1);
        put_match_ip4(&b, 12, pool, mask, NFT_CMP_EQ);
        put_match_ip4(&b, 16, pool, mask, NFT_CMP_EQ);
        put_verdict(&b, NF_DROP);
        rule_end(&b, r);
        uint32_t last = b.seq;
        put_batch_marker(&b, NFNL_MSG_BATCH_END);
        if (b.failed)
                return nsbox_err(err, b.failed, "host NAT rules: build the nf_tables batch");
        uint32_t seq = 0;
        int rr = send_batch(&b, last, &seq);
        if (rr == -EEXIST && seq == SEQ_TABLE)
                return 0; /* made by an earlier sandbox (or nsboxd): there to stay */
        if (rr < 0)
                return nsbox_err(err, rr, "host NAT rules: table 'inet " HOST_TABLE "'%s", seq ? " refused by nf_tables" : "");
        return 0;
}
