/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's configuration file: what is accepted, the defaults, and a one-line error naming the
 * key for every kind of bad value. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/dconfig.h"
#include "../../runtime/util.h"
#include "unit.h"

static int parse(const char *text, nsbox_dconfig *c, nsbox_error *err)
{
        json_error_t je;
        json_t *root = json_loads(text, 0, &je);
        ck_assert_msg(root != NULL, "bad test JSON: %s", je.text);
        int r = nsbox_dconfig_parse(root, "test.json", c, err);
        json_decref(root);
        return r;
}

START_TEST(test_dconfig_full_file_is_read_with_every_value)
{
        nsbox_dconfig c;
        nsbox_error err = { 0 };
        const char *good = "{\"max_sandboxes\": 300, \"max_per_uid\": 20, \"memory_budget\": \"16G\", \"default_memory\": 268435456,"
                           " \"timeout\": 3600, \"idle_timeout\": 1.5, \"on_expiry\": \"pause\", \"drain_timeout\": 3,"
                           " \"clients\": {\"uids\": [4242], \"groups\": [4243]},"
                           " \"max_connections_per_uid\": 32, \"max_request_bytes_per_uid\": \"8M\", \"request_timeout\": 5,"
                           " \"handshake_timeout\": 0, \"max_disk\": \"4G\", \"max_disk_per_uid\": \"16G\","
                           " \"templates\": {\"py\": {\"create\": {\"memory\": \"1G\"}, \"pool\": 8, \"max\": 100}, \"sh\": {}}}";
        UNIT_ASSERT_OK(parse(good, &c, &err), &err);
        ck_assert_uint_eq(c.max_sandboxes, 300);
        ck_assert_uint_eq(c.max_per_uid, 20);
        ck_assert(c.max_per_uid_given);
        ck_assert_uint_eq(c.max_connections_per_uid, 32);
        ck_assert_uint_eq(c.max_request_bytes_per_uid, 8ull << 20);
        ck_assert_uint_eq(c.request_timeout_ms, 5000);
        ck_assert_uint_eq(c.handshake_timeout_ms, 0);
        ck_assert_uint_eq(c.max_disk, 4ull << 30);
        ck_assert_uint_eq(c.max_disk_per_uid, 16ull << 30);
        ck_assert_uint_eq(c.memory_budget, 16ull << 30);
        ck_assert_uint_eq(c.default_memory, 256ull << 20);
        ck_assert_uint_eq(c.timeout_ms, 3600000);
        ck_assert_uint_eq(c.idle_timeout_ms, 1500);
        ck_assert(c.expiry_pause);
        ck_assert_uint_eq(c.drain_timeout_ms, 3000);
        ck_assert_uint_eq(c.n_client_uids, 1);
        ck_assert_uint_eq(c.client_uids[0], 4242);
        ck_assert_uint_eq(c.n_client_gids, 1);
        ck_assert_uint_eq(c.n_templates, 2);
        const nsbox_template *t = nsbox_dconfig_template(&c, "py");
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(t->pool, 8);
        ck_assert_uint_eq(t->max, 100);
        ck_assert_str_eq(json_string_value(json_object_get(t->create, "memory")), "1G");
        t = nsbox_dconfig_template(&c, "sh");
        ck_assert_uint_eq(t->pool, 0);
        ck_assert_uint_eq(t->max, 300); /* max_sandboxes */
        ck_assert_ptr_null(nsbox_dconfig_template(&c, "nope"));
        nsbox_dconfig_release(&c);
}
END_TEST

START_TEST(test_dconfig_empty_object_gives_the_defaults)
{
        nsbox_dconfig c;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(parse("{}", &c, &err), &err);
        ck_assert_uint_eq(c.max_sandboxes, 1024);
        ck_assert_uint_eq(c.max_per_uid, 256); /* for tenants: a quarter of max_sandboxes */
        ck_assert(!c.max_per_uid_given);
        ck_assert_uint_eq(c.max_connections_per_uid, 256);
        ck_assert_uint_eq(c.max_request_bytes_per_uid, 64ull << 20);
        ck_assert_uint_eq(c.request_timeout_ms, 30000);
        ck_assert_uint_eq(c.handshake_timeout_ms, 10000);
        ck_assert_uint_ge(c.max_disk, 1ull << 30);
        ck_assert_uint_eq(c.max_disk_per_uid, 0);
        ck_assert_uint_eq(c.memory_budget, 0);
        ck_assert_uint_eq(c.drain_timeout_ms, 10000);
        ck_assert(!c.expiry_pause);
        ck_assert_uint_eq(c.n_templates, 0);
        nsbox_dconfig_release(&c);
        UNIT_ASSERT_OK(parse("{\"max_sandboxes\": 3}", &c, &err), &err);
        ck_assert_uint_eq(c.max_per_uid, 1); /* at least one */
        nsbox_dconfig_release(&c);
}
END_TEST

START_TEST(test_dconfig_http_listen_and_keys)
{
        nsbox_dconfig c;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(parse("{}", &c, &err), &err);
        ck_assert_str_eq(c.http_listen, "");
        ck_assert_ptr_null(c.http_keys);
        ck_assert(c.http_internet && c.http_public_traffic); /* E2B's defaults */
        nsbox_dconfig_release(&c);
        UNIT_ASSERT_OK(parse("{\"http\": {\"public_traffic\": false, \"internet\": false}}", &c, &err), &err);
        ck_assert(!c.http_internet && !c.http_public_traffic);
        nsbox_dconfig_release(&c);
        UNIT_ASSERT_OK(parse("{\"http\": {\"domain\": \"sandbox.example.com:8443\"}}", &c, &err), &err);
        ck_assert_str_eq(c.http_domain, "sandbox.example.com:8443");
        nsbox_dconfig_release(&c);
        UNIT_ASSERT_OK(parse("{\"http\": {\"listen\": \"127.0.0.1:49982\", \"keys\": \"/srv/keys.json\"}}", &c, &err), &err);
        ck_assert_str_eq(c.http_listen, "127.0.0.1:49982");
        ck_assert_str_eq(c.http_keys, "/srv/keys.json");
        nsbox_dconfig_release(&c);
        UNIT_ASSERT_OK(parse("{\"http\": {\"listen\": \"[::1]:65535\"}}", &c, &err), &err);
        ck_assert_str_eq(c.http_listen, "[::1]:65535");
        nsbox_dconfig_release(&c);
        ck_assert_int_eq(nsbox_dconfig_check_listen("0.0.0.0:1"), 0);
        ck_assert_int_eq(nsbox_dconfig_check_listen("[fe80::1]:8080"), 0);
        ck_assert_int_lt(nsbox_dconfig_check_listen("0.0.0.0:01"), 0);
        ck_assert_int_lt(nsbox_dconfig_check_listen(":80"), 0);
        ck_assert_int_lt(nsbox_dconfig_check_listen("[]:80"), 0);
}
END_TEST

START_TEST(test_dconfig_cluster_node_and_agent_check)
{
        nsbox_dconfig c;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(parse("{}", &c, &err), &err);
        ck_assert_str_eq(c.node, "");
        ck_assert_str_eq(c.agent_check, "");
        nsbox_dconfig_release(&c);
        UNIT_ASSERT_OK(parse("{\"cluster\": {\"node\": \"10-0-1-23\", \"agent_check\": \"0.0.0.0:49981\"}}", &c, &err), &err);
        ck_assert_str_eq(c.node, "10-0-1-23");
        ck_assert_str_eq(c.agent_check, "0.0.0.0:49981");
        ck_assert_ptr_null(c.redis);
        ck_assert_uint_eq(c.catalog_ttl_ms, 15000);
        nsbox_dconfig_release(&c);
        static const char *const good[] = { "redis.nsbox.svc.cluster.local:6379", "10.0.0.5:6380", "[::1]:6379", "unix:/run/redis/redis.sock" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                char text[256];
                snprintf(text, sizeof(text), "{\"cluster\": {\"redis\": \"%s\", \"catalog_ttl\": 4.5}}", good[i]);
                UNIT_ASSERT_OK(parse(text, &c, &err), &err);
                ck_assert_str_eq(c.redis, good[i]);
                ck_assert_uint_eq(c.catalog_ttl_ms, 4500);
                nsbox_dconfig_release(&c);
        }
        static const char *const bad[][2] = {
                { "{\"cluster\": []}", "test.json: key 'cluster': expected an object with \"node\", \"agent_check\", \"redis\", \"catalog_ttl\"" },
                { "{\"cluster\": {\"node\": \"N1\"}}", "test.json: key 'cluster.node': expected a node name: 1 to 24 of a-z, 0-9 and '-', starting and ending with a letter or digit" },
                { "{\"cluster\": {\"node\": \"0123456789012345678901234\"}}", NULL },
                { "{\"cluster\": {\"node\": 1}}", NULL },
                { "{\"cluster\": {\"agent_check\": \"localhost:1\"}}", NULL },
                { "{\"cluster\": {\"redis\": \"127.0.0.1\"}}", "test.json: key 'cluster.redis': expected \"HOST:PORT\" (a lowercase DNS name or an IPv4 address), \"[ADDR6]:PORT\" or \"unix:/PATH\"" },
                { "{\"cluster\": {\"redis\": \"Redis:6379\"}}", NULL },
                { "{\"cluster\": {\"redis\": \"redis:0\"}}", NULL },
                { "{\"cluster\": {\"redis\": \"[::1:6379\"}}", NULL },
                { "{\"cluster\": {\"redis\": \"unix:relative\"}}", NULL },
                { "{\"cluster\": {\"catalog_ttl\": 0.5}}", "test.json: key 'cluster.catalog_ttl': expected 1 to 3600 seconds (how long a node's records outlive its last heartbeat)" },
                { "{\"cluster\": {\"catalog_ttl\": \"15\"}}", NULL },
                { "{\"cluster\": {\"database\": 1}}", "test.json: key 'cluster.database': unknown key" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_lt(parse(bad[i][0], &c, &err), 0);
                ck_assert_ptr_nonnull(err.msg);
                if (bad[i][1])
                        ck_assert_str_eq(err.msg, bad[i][1]);
                nsbox_error_clear(&err);
        }
}
END_TEST

START_TEST(test_dconfig_bad_values_are_one_line_errors_naming_the_key)
{
        static const struct {
                const char *text, *needle;
        } bad[] = {
                { "[]", "expected a JSON object" },
                { "{\"bogus\": 1}", "key 'bogus': unknown key" },
                { "{\"max_sandboxes\": 0}", "key 'max_sandboxes': expected an integer from 1 to 4096" },
                { "{\"max_sandboxes\": 5000}", "key 'max_sandboxes'" },
                { "{\"max_per_uid\": \"ten\"}", "key 'max_per_uid'" },
                { "{\"max_connections_per_uid\": 0}", "key 'max_connections_per_uid': expected an integer from 1 to 1024" },
                { "{\"max_connections_per_uid\": 2000}", "key 'max_connections_per_uid'" },
                { "{\"max_request_bytes_per_uid\": \"4k\"}", "key 'max_request_bytes_per_uid': at least 1M" },
                { "{\"request_timeout\": \"soon\"}", "key 'request_timeout'" },
                { "{\"handshake_timeout\": -2}", "key 'handshake_timeout'" },
                { "{\"max_disk\": \"1k\"}", "key 'max_disk': at least 1M" },
                { "{\"max_disk\": \"big\"}", "key 'max_disk': expected a size" },
                { "{\"max_disk_per_uid\": 0}", "key 'max_disk_per_uid': at least 1M" },
                { "{\"memory_budget\": \"lots\"}", "key 'memory_budget': expected a size" },
                { "{\"memory_budget\": \"1G\", \"default_memory\": \"2G\"}", "key 'default_memory': more than the memory_budget" },
                { "{\"timeout\": -1}", "key 'timeout': expected a number of seconds" },
                { "{\"idle_timeout\": \"1m\"}", "key 'idle_timeout'" },
                { "{\"on_expiry\": \"explode\"}", "key 'on_expiry': expected \"destroy\", \"pause\" or \"pause_files\"" },
                { "{\"clients\": [1]}", "key 'clients'" },
                { "{\"clients\": {\"uids\": [0]}}", "key 'clients.uids': entry 0" },
                { "{\"clients\": {\"uids\": [\"root\"]}}", "key 'clients.uids': entry 0" },
                { "{\"clients\": {\"uids\": [\"no-such-user-here\"]}}", "key 'clients.uids'" },
                { "{\"clients\": {\"groups\": [\"no-such-group-here\"]}}", "key 'clients.groups'" },
                { "{\"clients\": {\"people\": []}}", "key 'clients.people': unknown key" },
                { "{\"templates\": []}", "key 'templates'" },
                { "{\"templates\": {\"bad name\": {}}}", "key 'templates.bad name': a template name" },
                { "{\"templates\": {\".x\": {}}}", "key 'templates..x'" },
                { "{\"templates\": {\"t\": {\"pool\": -1}}}", "key 'templates.t.pool': expected an integer from 0 to 1024" },
                { "{\"templates\": {\"t\": {\"max\": 0}}}", "key 'templates.t.max'" },
                { "{\"templates\": {\"t\": {\"pool\": 5, \"max\": 4}}}", "key 'templates.t.pool': a pool of 5 is more than the template's max of 4" },
                { "{\"templates\": {\"t\": {\"create\": \"x\"}}}", "key 'templates.t.create': expected an object" },
                { "{\"templates\": {\"t\": {\"size\": 1}}}", "key 'templates.t.size': unknown key" },
                { "{\"max_sandboxes\": 10, \"templates\": {\"a\": {\"pool\": 6}, \"b\": {\"pool\": 6}}}", "the pools hold 12 sandboxes, more than max_sandboxes (10)" },
                { "{\"http\": []}", "key 'http'" },
                { "{\"http\": {\"port\": 1}}", "key 'http.port': unknown key" },
                { "{\"http\": {\"listen\": 8080}}", "key 'http.listen': expected \"ADDR:PORT\"" },
                { "{\"http\": {\"listen\": \"localhost:8080\"}}", "key 'http.listen'" },
                { "{\"http\": {\"listen\": \"127.0.0.1:0\"}}", "key 'http.listen'" },
                { "{\"http\": {\"listen\": \"127.0.0.1:65536\"}}", "key 'http.listen'" },
                { "{\"http\": {\"listen\": \"127.0.0.1\"}}", "key 'http.listen'" },
                { "{\"http\": {\"listen\": \"::1:80\"}}", "key 'http.listen'" },
                { "{\"http\": {\"listen\": \"[127.0.0.1]:80\"}}", "key 'http.listen'" },
                { "{\"http\": {\"keys\": \"keys.json\"}}", "key 'http.keys': expected the absolute path" },
                { "{\"http\": {\"public_traffic\": \"yes\"}}", "key 'http.public_traffic': expected true or false" },
                { "{\"http\": {\"domain\": \"Sandbox.example.com\"}}", "key 'http.domain': expected a lowercase DNS name" },
                { "{\"http\": {\"domain\": \"sandbox.example.com:0\"}}", "key 'http.domain'" },
                { "{\"http\": {\"domain\": \"sandbox.example.com:65536\"}}", "key 'http.domain'" },
                { "{\"http\": {\"domain\": \"sandbox.example.com:\"}}", "key 'http.domain'" },
                { "{\"http\": {\"domain\": \"sandbox.example.com:84x3\"}}", "key 'http.domain'" },
                { "{\"http\": {\"domain\": \":8443\"}}", "key 'http.domain'" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                nsbox_dconfig c;
                nsbox_error err = { 0 };
                int r = parse(bad[i].text, &c, &err);
                ck_assert_msg(r < 0, "accepted: %s", bad[i].text);
                UNIT_ASSERT_ERROR(&err, "test.json: ", bad[i].needle);
                ck_assert_uint_eq(c.n_templates, 0); /* released: the defaults again */
        }
}
END_TEST

START_TEST(test_dconfig_load_missing_file_is_an_error_only_when_named)
{
        nsbox_dconfig c;
        nsbox_error err = { 0 };
        UNIT_ASSERT_OK(nsbox_dconfig_load("/nonexistent/nsboxd.json", false, &c, &err), &err);
        ck_assert_ptr_null(c.source);
        ck_assert_int_eq(nsbox_dconfig_load("/nonexistent/nsboxd.json", true, &c, &err), -ENOENT);
        UNIT_ASSERT_ERROR(&err, "/nonexistent/nsboxd.json");
        char path[] = "/tmp/nsbox-dconfig-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "{\"max_sandboxes\": 2,\n \"max_sandboxes\": 3}", 41), 41);
        close(fd);
        ck_assert_int_lt(nsbox_dconfig_load(path, true, &c, &err), 0);
        UNIT_ASSERT_ERROR(&err, path, "line 2"); /* a duplicate key is refused, with where */
        unlink(path);
}
END_TEST

START_TEST(test_dconfig_fifo_directory_and_device_are_refused_at_once)
{
        nsbox_dconfig c;
        nsbox_error err = { 0 };
        char dir[] = "/tmp/nsbox-dconfig-XXXXXX", path[64];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fifo.json", dir);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        /* a FIFO nobody writes: a blocking open would hang here until check's timeout */
        ck_assert_int_lt(nsbox_dconfig_load(path, false, &c, &err), 0);
        UNIT_ASSERT_ERROR(&err, path, "a FIFO, not a regular file");
        unlink(path);
        ck_assert_int_lt(nsbox_dconfig_load(dir, true, &c, &err), 0);
        UNIT_ASSERT_ERROR(&err, dir, "a directory, not a regular file");
        rmdir(dir);
        ck_assert_int_lt(nsbox_dconfig_load("/dev/zero", true, &c, &err), 0);
        UNIT_ASSERT_ERROR(&err, "/dev/zero: a character device, not a regular file");
}
END_TEST

Suite *dconfig_suite(void)
{
        Suite *s = suite_create("dconfig");
        TCase *tc = unit_tcase(s, "dconfig");
        unit_add(tc, test_dconfig_full_file_is_read_with_every_value);
        unit_add(tc, test_dconfig_empty_object_gives_the_defaults);
        unit_add(tc, test_dconfig_bad_values_are_one_line_errors_naming_the_key);
        unit_add(tc, test_dconfig_http_listen_and_keys);
        unit_add(tc, test_dconfig_cluster_node_and_agent_check);
        unit_add(tc, test_dconfig_load_missing_file_is_an_error_only_when_named);
        unit_add(tc, test_dconfig_fifo_directory_and_device_are_refused_at_once);
        return s;
}
