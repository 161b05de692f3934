/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's configuration file (runtime/dconfig.c, nsboxd(8)): the input is the file's text,
 * parsed as nsbox_dconfig_load parses it.  Either it is taken whole, with every value in its
 * documented range, or refused in one line and nothing is kept. */
#include <string.h>

#include "../../runtime/dconfig.h"
#include "fuzz.h"

FUZZ_ENTRY(dconfig)
{
        json_error_t je;
        json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
        if (!root)
                return 0;
        nsbox_dconfig c;
        nsbox_error err = { 0 };
        if (nsbox_dconfig_parse(root, "fuzz.json", &c, &err) == 0) {
                FUZZ_CHECK(!err.msg, "taken with an error");
                FUZZ_CHECK(c.max_sandboxes >= 1 && c.max_sandboxes <= NSBOX_DCONFIG_MAX_SANDBOXES, "max_sandboxes %u", c.max_sandboxes);
                FUZZ_CHECK(c.n_templates <= NSBOX_DCONFIG_MAX_TEMPLATES, "%zu templates", c.n_templates);
                FUZZ_CHECK(!c.memory_budget || c.default_memory <= c.memory_budget, "default_memory over the budget");
                for (size_t i = 0; i < c.n_templates; i++) {
                        const nsbox_template *t = &c.templates[i];
                        FUZZ_CHECK(t->name[0] && strlen(t->name) <= NSBOX_TEMPLATE_NAME_MAX, "template name '%s'", t->name);
                        FUZZ_CHECK(t->pool <= NSBOX_DCONFIG_MAX_POOL, "template '%s': pool %u", t->name, t->pool);
                        FUZZ_CHECK(nsbox_dconfig_template(&c, t->name) == t, "template '%s' is not found by its name", t->name);
                }
                nsbox_dconfig_release(&c);
        } else {
                FUZZ_CHECK(err.msg && err.msg[0] && !strchr(err.msg, '\n'), "refused without a one-line message");
                FUZZ_CHECK(c.n_templates == 0 && c.templates == NULL && c.source == NULL, "a refused configuration kept something");
        }
        nsbox_error_clear(&err);
        json_decref(root);
        return 0;
}
