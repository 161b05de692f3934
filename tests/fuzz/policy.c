/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy parser (runtime/policy.c, nsbox-policy(5)): the input is a policy file's text.
 * A policy either parses whole or is refused with one line in err and nothing allocated; the
 * helpers the command line shares with it (mounts, env, egress) get each string field too.
 * Every input goes through the merge onto the built-in default (INHERITANCE), and one that
 * leaves seccomp out keeps the default's rules.  Parsing reads the host (bind sources are
 * resolved) but never changes it. */
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "../../runtime/policy.h"
#include "fuzz.h"

/* How many seccomp rules the built-in default has (parsed once). */
static size_t default_rules(void)
{
        static size_t n = (size_t)-1;
        if (n == (size_t)-1) {
                nsbox_policy *d = NULL;
                FUZZ_CHECK(nsbox_policy_parse("{}", 2, "empty.json", &d, NULL) == 0, "the empty policy is refused");
                n = d->n_sc_rules;
                nsbox_policy_free(d);
                FUZZ_CHECK(n > 0, "the default policy has no seccomp rule");
        }
        return n;
}

/* The input leaves seccomp out and inherits: the merge must keep the default's rules. */
static bool inherits_seccomp(const uint8_t *data, size_t size)
{
        json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
        bool yes = json_is_object(doc) && !json_object_get(doc, "seccomp") && !json_is_false(json_object_get(doc, "inherit"));
        json_decref(doc);
        return yes;
}

static void check_refused(int r, nsbox_error *err, const char *what)
{
        FUZZ_CHECK(r < 0, "%s: r=%d", what, r);
        FUZZ_CHECK(err->msg && err->msg[0] && !strchr(err->msg, '\n'), "%s refused without a one-line message", what);
        nsbox_error_clear(err);
}

FUZZ_ENTRY(policy)
{
        nsbox_error err = { 0 };
        nsbox_policy *p = NULL;
        int r = nsbox_policy_parse((const char *)data, size, "fuzz.json", &p, &err);
        if (r < 0) {
                FUZZ_CHECK(p == NULL, "a refused policy was returned");
                check_refused(r, &err, "policy");
        } else {
                FUZZ_CHECK(p != NULL && !err.msg, "a parsed policy with an error");
                for (size_t i = 0; i < p->n_mounts; i++)
                        FUZZ_CHECK(p->mounts[i].target && p->mounts[i].target[0] == '/', "mount target not absolute");
                if (inherits_seccomp(data, size))
                        FUZZ_CHECK(p->n_sc_rules == default_rules() && p->sc_socket_restricted,
                                   "a policy without seccomp has %zu rules, not the default's %zu", p->n_sc_rules, default_rules());
                nsbox_policy_free(p);
        }

        /* the same input as the command line's strings: --bind, --tmpfs, -e, --allow */
        char *s = strndup((const char *)data, size);
        FUZZ_CHECK(s != NULL, "out of memory");
        nsbox_mount m = { 0 };
        if ((r = nsbox_parse_mount_bind(s, &m, &err)) == 0)
                nsbox_mount_release(&m);
        else
                check_refused(r, &err, "--bind");
        m = (nsbox_mount){ 0 };
        if ((r = nsbox_parse_mount_tmpfs(s, &m, &err)) == 0)
                nsbox_mount_release(&m);
        else
                check_refused(r, &err, "--tmpfs");
        char *norm = NULL;
        if (nsbox_normalize_sandbox_path(s, &norm) == 0) {
                FUZZ_CHECK(norm[0] == '/' && !strstr(norm, "//") && !strstr(norm, "/./") && !strstr(norm, "/../"),
                           "normalized '%s' to '%s'", s, norm);
                free(norm);
        }
        free(s);
        return 0;
}
