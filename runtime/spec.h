/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent spec: everything a serve-mode sandbox's child needs from its launcher (the checked
 * policy, the id map, the resolved egress rules, the backend veth, the store layers), as bytes.
 * The launcher writes it into a sealed memfd that the freshly executed nsbox-agent reads, so that
 * the agent starts from its own sandbox's data alone, never from a copy of nsboxd's memory.
 * Binary, little-endian, every string and list length-prefixed and bounded; decoding is strict
 * (a canonical encoding: what decodes re-encodes to the same bytes) and all or nothing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "nft.h"
#include "policy.h"
#include "userns.h"
#include "util.h"
#include "veth.h"

#define NSBOX_SPEC_MAX_BYTES (16u << 20)
#define NSBOX_SPEC_MAX_LAYERS 1024
#define NSBOX_SPEC_MAX_SYSCALLS 4096 /* per seccomp rule */

/* The egress rules as the child applies them at step 6 (resolved by the launcher before the
 * clone: host names are looked up with the host's resolver). */
typedef struct nsbox_egress_set {
        const nsbox_egress_rule *v;
        size_t n;
        bool restricted;
        const nsbox_veth *veth; /* backend veth: the addresses reserved for the sandbox, or NULL */
} nsbox_egress_set;

/* A decoded spec; owns everything (policy->layers points at layers). */
typedef struct nsbox_agent_spec {
        nsbox_policy *policy;
        char **layers;
        nsbox_idmap map;
        nsbox_egress_rule *rules;
        size_t n_rules;
        bool restricted;
        nsbox_veth *veth; /* NULL: none; lockfd is -1 */
} nsbox_agent_spec;

/* Append the spec to out (sb_init'ed by the caller).  -E2BIG (err set) when a list is longer
 * than the decoder accepts or the whole is over NSBOX_SPEC_MAX_BYTES. */
int nsbox_spec_encode(const nsbox_policy *p, const nsbox_idmap *map, const nsbox_egress_set *eg, strbuf *out, nsbox_error *err);
/* 0 with *ret filled, or -EINVAL with a one-line err and nothing allocated. */
int nsbox_spec_decode(const void *data, size_t len, nsbox_agent_spec *ret, nsbox_error *err);
void nsbox_spec_release(nsbox_agent_spec *s);
