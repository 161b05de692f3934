/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox set-timeout, nsbox stats and nsbox api-key: nsboxd as a service (nsboxd(8)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_session.h"
#include "util.h"

static bool is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

static const char usage_set_timeout[] =
        "usage: nsbox set-timeout ID SECONDS [--idle SECONDS] [--json]\n"
        "\n"
        "Sandbox ID now lives SECONDS more (0: no timeout); --idle sets its idle timeout too (0: none).\n"
        "What expiry does (destroy, pause or pause_files) was chosen at create (--on-expiry).\n";

int nsbox_cmd_set_timeout(int argc, char **argv)
{
        const char *pos[2] = { NULL, NULL }, *idle = NULL;
        bool json = false;
        size_t npos = 0;
        for (int i = 1; i < argc; i++) {
                if (is_help(argv[i])) {
                        fputs(usage_set_timeout, stdout);
                        return 0;
                } else if (!strcmp(argv[i], "--json")) {
                        json = true;
                } else if (!strcmp(argv[i], "--idle")) {
                        if (++i >= argc)
                                return nsbox_cli_usage_error("set-timeout", "--idle needs a number of seconds");
                        idle = argv[i];
                } else if (argv[i][0] == '-' && argv[i][1]) {
                        return nsbox_cli_unknown_option("set-timeout", argv[i]);
                } else if (npos < 2) {
                        pos[npos++] = argv[i];
                } else {
                        return nsbox_cli_usage_error("set-timeout", "unexpected argument '%s'", argv[i]);
                }
        }
        if (npos != 2)
                return nsbox_cli_usage_error("set-timeout", "expected a sandbox ID and SECONDS");
        uint64_t t_ms, i_ms = 0;
        if (parse_duration_ms(pos[1], &t_ms) < 0)
                return nsbox_cli_usage_error("set-timeout", "'%s': expected seconds, e.g. 300 (0: no timeout)", pos[1]);
        if (idle && parse_duration_ms(idle, &i_ms) < 0)
                return nsbox_cli_usage_error("set-timeout", "--idle '%s': expected seconds, e.g. 60 (0: none)", idle);
        json_t *params = json_pack("{ss sf}", "sandbox", pos[0], "timeout", (double)t_ms / 1000.0);
        if (idle)
                json_object_set_new(params, "idle_timeout", json_real((double)i_ms / 1000.0));
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = nsbox_cli_call("set-timeout", &cl, "set_timeout", params, NULL, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        if (status == 0 && json)
                nsbox_cli_print_json(stdout, res);
        json_decref(res);
        return status;
}

int nsbox_cmd_stats(int argc, char **argv)
{
        bool json = false;
        for (int i = 1; i < argc; i++) {
                if (is_help(argv[i])) {
                        fputs("usage: nsbox stats [--json]\n\nnsboxd's figures: sandboxes by state, each template's pool, the latency of creates\n"
                              "(acquire, from the request to the reply), memory committed against the budget, streams\n"
                              "and the bytes held for clients that lag.\n",
                              stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--json"))
                        return argv[i][0] == '-' ? nsbox_cli_unknown_option("stats", argv[i]) : nsbox_cli_usage_error("stats", "unknown argument '%s'", argv[i]);
                json = true;
        }
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = nsbox_cli_call("stats", &cl, "stats", json_object(), NULL, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        if (status) {
                json_decref(res);
                return status;
        }
        if (json) {
                nsbox_cli_print_json(stdout, res);
                json_decref(res);
                return 0;
        }
        json_t *sb = json_object_get(res, "sandboxes"), *lat = json_object_get(res, "acquire_ms"), *mem = json_object_get(res, "memory");
#define I(o, k) ((long long)json_integer_value(json_object_get(o, k)))
#define R(o, k) json_number_value(json_object_get(o, k))
        printf("sandboxes: %lld (%lld running, %lld paused, %lld starting), %lld pooled\n", I(sb, "total"), I(sb, "running"), I(sb, "paused"),
               I(sb, "starting"), I(sb, "pooled"));
        if (I(lat, "count"))
                printf("acquire: %lld creates, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n", I(lat, "count"), R(lat, "p50"), R(lat, "p90"),
                       R(lat, "p99"), R(lat, "max"));
        if (I(mem, "budget"))
                printf("memory: %lld MiB of limits committed of a %lld MiB budget; %lld MiB in use\n", I(mem, "committed") >> 20,
                       I(mem, "budget") >> 20, I(mem, "current_bytes") >> 20);
        json_t *streams = json_object_get(res, "streams");
        if (I(streams, "open") || I(streams, "held_bytes"))
                printf("streams: %lld open, %lld paused while their clients lag; %lld KiB held for clients\n", I(streams, "open"),
                       I(streams, "paused"), I(streams, "held_bytes") >> 10);
        json_t *cap = json_object_get(res, "capacity"), *cat = json_object_get(res, "catalog");
        const char *node = json_string_value(json_object_get(res, "node"));
        if (node && *node)
                printf("node %s: %lld creates free of max_sandboxes %lld\n", node, I(cap, "free"), I(cap, "max_sandboxes"));
        if (json_is_object(cat))
                printf("cluster catalog %s: %s%s%s\n", json_string_value(json_object_get(cat, "redis")), json_string_value(json_object_get(cat, "state")),
                       json_is_string(json_object_get(cat, "error")) ? ", " : "", json_string_value(json_object_get(cat, "error")) ?: "");
        const char *name;
        json_t *t;
        json_object_foreach(json_object_get(res, "templates"), name, t) {
                printf("template %s: pool %lld, %lld ready, %lld starting, %lld live; %lld from the pool, %lld started cold\n", name, I(t, "pool"),
                       I(t, "ready"), I(t, "starting"), I(t, "live"), I(t, "hits"), I(t, "misses"));
                json_t *f = json_object_get(t, "last_start_failure");
                if (f) { /* nsboxd's words, escaped: they may quote a client's strings */
                        time_t at = (time_t)I(f, "time");
                        char when[32];
                        struct tm tm;
                        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&at, &tm));
                        _cleanup_free_ char *why = nsbox_escape_controls(json_string_value(json_object_get(f, "reason")) ?: "");
                        printf("  last start failure %s (%lld in all, %lld in a row): %s\n", when, I(f, "count"), I(f, "in_a_row"), why ? why : "");
                }
        }
#undef I
#undef R
        json_decref(res);
        return 0;
}

/* ---- api-key ------------------------------------------------------------------------------------ */

static const char usage_api_key[] =
        "usage: nsbox api-key create [--name NAME] [--uid UID]\n"
        "       nsbox api-key ls [--json]\n"
        "       nsbox api-key rm NAME|PREFIX\n"
        "\n"
        "API keys for nsboxd's HTTP API (nsboxd --http): a key acts as the user it was made for.\n"
        "  create        make a key and print it, alone, on stdout: it is shown this once\n"
        "                (nsboxd keeps only its hash).  --name: 1-64 of [A-Za-z0-9._-]\n"
        "                (default key-N); --uid: root makes it for that user\n"
        "  ls            your keys (every user's for root): name, prefix, uid, created, last used\n"
        "  rm            remove your key named NAME, or the one whose prefix (e2b_ and 8 hex\n"
        "                digits, as ls shows) is PREFIX\n";

static int api_key_create(int argc, char **argv)
{
        json_t *params = json_object();
        for (int i = 2; i < argc; i++) {
                if (is_help(argv[i])) {
                        json_decref(params);
                        fputs(usage_api_key, stdout);
                        return 0;
                }
                if ((!strcmp(argv[i], "--name") || !strcmp(argv[i], "--uid")) && i + 1 >= argc) {
                        json_decref(params);
                        return nsbox_cli_usage_error("api-key", "%s needs a value", argv[i]);
                }
                uint64_t uid;
                if (!strcmp(argv[i], "--name")) {
                        json_object_set_new(params, "name", json_string(argv[++i]));
                } else if (!strcmp(argv[i], "--uid")) {
                        if (parse_u64(argv[++i], 0, 0xfffffffeu, &uid) < 0) {
                                json_decref(params);
                                return nsbox_cli_usage_error("api-key", "--uid '%s': expected a user id", argv[i]);
                        }
                        json_object_set_new(params, "uid", json_integer((json_int_t)uid));
                } else {
                        json_decref(params);
                        return argv[i][0] == '-' ? nsbox_cli_unknown_option("api-key", argv[i])
                                                  : nsbox_cli_usage_error("api-key", "unknown argument '%s'", argv[i]);
                }
        }
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = nsbox_cli_call("api-key", &cl, "api_key_create", params, NULL, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        if (status == 0) {
                /* the key alone on stdout: KEY=$(nsbox api-key create) */
                printf("%s\n", json_string_value(json_object_get(res, "key")) ?: "");
                _cleanup_free_ char *name = nsbox_escape_controls(json_string_value(json_object_get(res, "name")) ?: "");
                fprintf(stderr, "nsbox: api-key %s (%s): shown this once, keep it now\n", name ? name : "",
                        json_string_value(json_object_get(res, "prefix")) ?: "");
        }
        json_decref(res);
        return status;
}

static int api_key_ls(int argc, char **argv)
{
        bool json = false;
        for (int i = 2; i < argc; i++) {
                if (is_help(argv[i])) {
                        fputs(usage_api_key, stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--json"))
                        return argv[i][0] == '-' ? nsbox_cli_unknown_option("api-key", argv[i])
                                                  : nsbox_cli_usage_error("api-key", "unknown argument '%s'", argv[i]);
                json = true;
        }
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = nsbox_cli_call("api-key", &cl, "api_key_list", json_object(), NULL, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        if (status)
                return status;
        json_t *keys = json_object_get(res, "keys"), *k;
        size_t i;
        if (json)
                nsbox_cli_print_json(stdout, keys);
        else {
                printf("%-24s  %-12s  %-6s  %-20s  %s\n", "NAME", "PREFIX", "UID", "CREATED", "LAST USED");
                json_array_foreach(keys, i, k) {
                        /* nsboxd checked the names; escaped all the same on their way to a terminal */
                        _cleanup_free_ char *name = nsbox_escape_controls(json_string_value(json_object_get(k, "name")) ?: "");
                        _cleanup_free_ char *prefix = nsbox_escape_controls(json_string_value(json_object_get(k, "prefix")) ?: "");
                        _cleanup_free_ char *created = nsbox_escape_controls(json_string_value(json_object_get(k, "created_at")) ?: "");
                        _cleanup_free_ char *used = nsbox_escape_controls(json_string_value(json_object_get(k, "last_used_at")) ?: "-");
                        printf("%-24s  %-12s  %-6lld  %-20s  %s\n", name ? name : "", prefix ? prefix : "",
                               (long long)json_integer_value(json_object_get(k, "uid")), created ? created : "", used ? used : "");
                }
        }
        json_decref(res);
        return 0;
}

static bool looks_like_prefix(const char *s)
{
        if (strlen(s) != 12 || strncmp(s, "e2b_", 4))
                return false;
        for (s += 4; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

static int api_key_rm(int argc, char **argv)
{
        const char *what = NULL;
        for (int i = 2; i < argc; i++) {
                if (is_help(argv[i])) {
                        fputs(usage_api_key, stdout);
                        return 0;
                }
                if ((argv[i][0] == '-' && argv[i][1]) || what)
                        return nsbox_cli_usage_error("api-key", "unexpected argument '%s'", argv[i]);
                what = argv[i];
        }
        if (!what)
                return nsbox_cli_usage_error("api-key", "rm: expected a key's NAME or PREFIX");
        /* names never start with e2b_ (nsboxd refuses them): this is a prefix */
        json_t *params = json_pack("{ss}", looks_like_prefix(what) ? "prefix" : "name", what);
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = nsbox_cli_call("api-key", &cl, "api_key_delete", params, NULL, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        json_decref(res);
        return status;
}

int nsbox_cmd_api_key(int argc, char **argv)
{
        const char *sub = argc > 1 ? argv[1] : NULL;
        if (sub && is_help(sub)) {
                fputs(usage_api_key, stdout);
                return 0;
        }
        if (sub && !strcmp(sub, "create"))
                return api_key_create(argc, argv);
        if (sub && (!strcmp(sub, "ls") || !strcmp(sub, "list")))
                return api_key_ls(argc, argv);
        if (sub && (!strcmp(sub, "rm") || !strcmp(sub, "delete")))
                return api_key_rm(argc, argv);
        return nsbox_cli_usage_error("api-key", sub ? "unknown subcommand '%s'" : "expected create, ls or rm%s", sub ? sub : "");
}
