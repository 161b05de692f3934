/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's API keys (runtime/daemon/apikeys.c): the lookup every HTTP request makes, and the
 * strict reading of the key file. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../runtime/daemon/internal.h"
#include "../../runtime/sha256.h"
#include "unit.h"

static const char KEY[] = "e2b_0123456789abcdef0123456789abcdef01234567";

static void add_key(daemon_state *d, const char *key, uid_t uid, gid_t gid, const char *name)
{
        apikey k = { .uid = uid, .gid = gid };
        nsbox_sha256 c;
        nsbox_sha256_init(&c);
        nsbox_sha256_update(&c, key, strlen(key));
        nsbox_sha256_final(&c, k.hash);
        snprintf(k.name, sizeof(k.name), "%s", name);
        snprintf(k.prefix, sizeof(k.prefix), "%.12s", key);
        snprintf(k.created_at, sizeof(k.created_at), "2026-01-02T03:04:05Z");
        ck_assert_int_eq(apikey_table_add(&d->apikeys, &k), 0);
}

START_TEST(lookup_finds_a_key_and_its_user)
{
        static daemon_state d;
        char other[] = "e2b_ffffffffffffffffffffffffffffffffffffff00";
        add_key(&d, other, 2000, 2001, "other");
        add_key(&d, KEY, 1000, 1001, "mine");
        uid_t uid = 0;
        gid_t gid = 0;
        ck_assert(apikey_lookup(&d, KEY, strlen(KEY), &uid, &gid));
        ck_assert_uint_eq(uid, 1000);
        ck_assert_uint_eq(gid, 1001);
        ck_assert(apikey_lookup(&d, other, strlen(other), &uid, &gid));
        ck_assert_uint_eq(uid, 2000);
        ck_assert(d.apikeys.keys[0].last_used || d.apikeys.keys[1].last_used);
        /* the same key twice is refused by the table */
        apikey dup = d.apikeys.keys[0];
        ck_assert_int_eq(apikey_table_add(&d.apikeys, &dup), -EEXIST);
        apikey_table_release(&d.apikeys);
}
END_TEST

START_TEST(lookup_refuses_every_near_miss)
{
        static daemon_state d;
        add_key(&d, KEY, 1000, 1000, "mine");
        uid_t uid = 77;
        char buf[64];
        /* wrong lengths: one short, one long (the key is a prefix of it), empty */
        ck_assert(!apikey_lookup(&d, KEY, strlen(KEY) - 1, &uid, NULL));
        snprintf(buf, sizeof(buf), "%s0", KEY);
        ck_assert(!apikey_lookup(&d, buf, strlen(buf), &uid, NULL));
        ck_assert(!apikey_lookup(&d, "", 0, &uid, NULL));
        ck_assert(!apikey_lookup(&d, NULL, 0, &uid, NULL));
        /* uppercase hex is not the same key */
        snprintf(buf, sizeof(buf), "%s", KEY);
        for (char *p = buf + 4; *p; p++)
                if (*p >= 'a' && *p <= 'f')
                        *p = (char)(*p - 'a' + 'A');
        ck_assert(!apikey_lookup(&d, buf, strlen(buf), &uid, NULL));
        /* one digit off, at the start and at the end */
        snprintf(buf, sizeof(buf), "%s", KEY);
        buf[4] = '1';
        ck_assert(!apikey_lookup(&d, buf, strlen(buf), &uid, NULL));
        snprintf(buf, sizeof(buf), "%s", KEY);
        buf[strlen(buf) - 1] = '8';
        ck_assert(!apikey_lookup(&d, buf, strlen(buf), &uid, NULL));
        /* another scheme's prefix, a non-hex digit, a NUL inside */
        snprintf(buf, sizeof(buf), "E2B_%s", KEY + 4);
        ck_assert(!apikey_lookup(&d, buf, strlen(buf), &uid, NULL));
        snprintf(buf, sizeof(buf), "%s", KEY);
        buf[10] = 'g';
        ck_assert(!apikey_lookup(&d, buf, strlen(buf), &uid, NULL));
        snprintf(buf, sizeof(buf), "%s", KEY);
        buf[10] = '\0';
        ck_assert(!apikey_lookup(&d, buf, strlen(KEY), &uid, NULL));
        ck_assert_uint_eq(uid, 77); /* untouched by a refusal */
        ck_assert(!apikey_well_formed(KEY, strlen(KEY) - 1));
        ck_assert(apikey_well_formed(KEY, strlen(KEY)));
        /* an empty table says no to a good-looking key */
        apikey_table_release(&d.apikeys);
        ck_assert(!apikey_lookup(&d, KEY, strlen(KEY), &uid, NULL));
}
END_TEST

START_TEST(the_file_round_trips_and_holds_no_key)
{
        static daemon_state d;
        add_key(&d, KEY, 1000, 1000, "a");
        add_key(&d, "e2b_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, 0, "b");
        char *text = apikeys_dump(&d.apikeys);
        ck_assert_ptr_nonnull(text);
        ck_assert_ptr_null(strstr(text, KEY + 4));
        apikey_table t;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(apikeys_parse(text, strlen(text), "k.json", &t, &err), &err);
        ck_assert_uint_eq(t.n, 2);
        ck_assert_int_eq(memcmp(t.keys, d.apikeys.keys, 2 * sizeof(apikey)), 0);
        free(text);
        apikey_table_release(&t);
        apikey_table_release(&d.apikeys);
}
END_TEST

START_TEST(a_bad_file_is_refused_in_one_line)
{
        static const char *const entry = "{\"name\": \"a\", \"prefix\": \"e2b_01234567\", \"sha256\": "
                                         "\"0000000000000000000000000000000000000000000000000000000000000000\", \"uid\": 1, \"gid\": 1, "
                                         "\"created_at\": \"2026-01-02T03:04:05Z\"";
        static const struct {
                const char *tail, *why;
        } bad[] = {
                { "}", NULL }, /* the good one */
                { ", \"extra\": 1}", "unknown key 'extra'" },
                { "} , 1", "keys[1]: expected an object" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[1024];
                snprintf(text, sizeof(text), "{\"version\": 1, \"keys\": [%s%s]}", entry, bad[i].tail);
                apikey_table t;
                nsbox_error err = { 0 };
                int r = apikeys_parse(text, strlen(text), "k.json", &t, &err);
                if (!bad[i].why) {
                        UNIT_ASSERT_OK(r, &err);
                        ck_assert_uint_eq(t.n, 1);
                        apikey_table_release(&t);
                        continue;
                }
                ck_assert_int_lt(r, 0);
                ck_assert_ptr_null(t.keys);
                UNIT_ASSERT_ERROR(&err, "k.json", bad[i].why);
        }
        static const struct {
                const char *text, *why;
        } whole[] = {
                { "", "k.json: line" },
                { "[]", "expected {\"version\": 1" },
                { "{\"version\": 2, \"keys\": []}", "expected {\"version\": 1" },
                { "{\"version\": 1, \"keys\": [], \"more\": 0}", "unknown key 'more'" },
                { "{\"version\": 1, \"version\": 1, \"keys\": []}", "duplicate" },
                { "{\"version\": 1, \"keys\": [{\"name\": \"e2b_x\"}]}", "'name'" },
                { "{\"version\": 1, \"keys\": [{\"name\": \"a\", \"prefix\": \"e2b_0123456\"}]}", "'prefix'" },
                { "{\"version\": 1, \"keys\": [{\"name\": \"a\", \"prefix\": \"e2b_01234567\", \"sha256\": \"AB\"}]}", "'sha256'" },
        };
        for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
                apikey_table t;
                nsbox_error err = { 0 };
                ck_assert_int_lt(apikeys_parse(whole[i].text, strlen(whole[i].text), "k.json", &t, &err), 0);
                UNIT_ASSERT_ERROR(&err, "k.json", whole[i].why);
        }
        /* the same name twice for one uid, the same hash twice */
        char text[2048];
        snprintf(text, sizeof(text), "{\"version\": 1, \"keys\": [%s}, %s}]}", entry, entry);
        apikey_table t;
        nsbox_error err = { 0 };
        ck_assert_int_lt(apikeys_parse(text, strlen(text), "k.json", &t, &err), 0);
        UNIT_ASSERT_ERROR(&err, "two keys named 'a'");
}
END_TEST

Suite *apikeys_suite(void)
{
        Suite *s = suite_create("apikeys");
        TCase *tc = unit_tcase(s, "apikeys");
        unit_add(tc, lookup_finds_a_key_and_its_user);
        unit_add(tc, lookup_refuses_every_near_miss);
        unit_add(tc, the_file_round_trips_and_holds_no_key);
        unit_add(tc, a_bad_file_is_refused_in_one_line);
        return s;
}
