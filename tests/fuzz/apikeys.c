/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's API key file (runtime/daemon/apikeys.c, nsboxd(8) http.keys): the input is the file's
 * text.  Either it is taken whole, every entry well formed and within the caps, and written
 * back to the same table; or it is refused in one line and nothing is kept. */
#include <string.h>

#include "../../runtime/daemon/internal.h"
#include "fuzz.h"

FUZZ_ENTRY(apikeys)
{
        apikey_table t;
        nsbox_error err = { 0 };
        if (apikeys_parse((const char *)data, size, "fuzz.json", &t, &err) == 0) {
                FUZZ_CHECK(!err.msg, "taken with an error");
                FUZZ_CHECK(t.n <= APIKEYS_MAX, "%zu keys", t.n);
                for (size_t i = 0; i < t.n; i++) {
                        FUZZ_CHECK(t.keys[i].name[0] && strncmp(t.keys[i].name, "e2b_", 4), "name '%s'", t.keys[i].name);
                        FUZZ_CHECK(strlen(t.keys[i].prefix) == APIKEY_PREFIX_LEN, "prefix '%s'", t.keys[i].prefix);
                        FUZZ_CHECK(i == 0 || memcmp(t.keys[i - 1].hash, t.keys[i].hash, 32) < 0, "not sorted at %zu", i);
                }
                char *text = apikeys_dump(&t);
                FUZZ_CHECK(text != NULL, "dump failed");
                apikey_table u;
                FUZZ_CHECK(apikeys_parse(text, strlen(text), "again", &u, &err) == 0, "its own dump refused: %s", err.msg);
                FUZZ_CHECK(u.n == t.n && (t.n == 0 || !memcmp(u.keys, t.keys, t.n * sizeof(apikey))), "the dump reads back different");
                free(text);
                apikey_table_release(&u);
                apikey_table_release(&t);
        } else {
                FUZZ_CHECK(err.msg && err.msg[0] && !strchr(err.msg, '\n'), "refused without a one-line message");
                FUZZ_CHECK(t.keys == NULL && t.n == 0, "a refused file kept something");
        }
        nsbox_error_clear(&err);
        return 0;
}
