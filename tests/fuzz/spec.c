/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent spec (runtime/spec.c): the input is what nsbox-agent reads from its memfd.  It is
 * either refused with one line in err and nothing allocated, or decoded into a spec that
 * encodes again to exactly the input bytes (one encoding per spec: no field is skipped or
 * read loosely). */
#include <string.h>

#include "../../runtime/spec.h"
#include "fuzz.h"

FUZZ_ENTRY(spec)
{
        nsbox_error err = { 0 };
        nsbox_agent_spec s;
        int r = nsbox_spec_decode(data, size, &s, &err);
        if (r < 0) {
                FUZZ_CHECK(err.msg && err.msg[0] && !strchr(err.msg, '\n'), "refused without a one-line message");
                nsbox_error_clear(&err);
                return 0;
        }
        FUZZ_CHECK(!err.msg, "a decoded spec with an error");
        FUZZ_CHECK(s.policy && s.policy->layers == s.layers, "the layers are not the policy's");
        strbuf again;
        sb_init(&again, NSBOX_SPEC_MAX_BYTES);
        nsbox_egress_set eg = { .v = s.rules, .n = s.n_rules, .restricted = s.restricted, .veth = s.veth };
        r = nsbox_spec_encode(s.policy, &s.map, &eg, &again, &err);
        FUZZ_CHECK(r == 0, "a decoded spec does not encode: %s", err.msg ? err.msg : "");
        FUZZ_CHECK(again.len == size && !memcmp(again.buf, data, size), "decoded and encoded again: %zu bytes, not the same %zu",
                   again.len, size);
        sb_release(&again);
        nsbox_spec_release(&s);
        return 0;
}
