/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox set-timeout and nsbox stats: nsboxd as a service (nsboxd(8)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_session.h"
#include "util.h"

static bool is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

static const char usage_set_timeout[] =
        "usage: nsbox set-timeout ID SECONDS [--idle SECONDS] [--json]\n"
        "\n"
        "Sandbox ID now lives SECONDS more (0: no timeout); --idle sets its idle timeout too (0: none).\n"
        "What expiry does (destroy or pause) was chosen at create (--on-expiry).\n";

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
                        return nsbox_cli_usage_error("set-timeout", "unknown option '%s'", argv[i]);
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
                              "(acquire, from the request to the reply), memory committed against the budget.\n",
                              stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--json"))
                        return nsbox_cli_usage_error("stats", "unknown argument '%s'", argv[i]);
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
        const char *name;
        json_t *t;
        json_object_foreach(json_object_get(res, "templates"), name, t)
                printf("template %s: pool %lld, %lld ready, %lld starting, %lld live; %lld from the pool, %lld started cold\n", name, I(t, "pool"),
                       I(t, "ready"), I(t, "starting"), I(t, "live"), I(t, "hits"), I(t, "misses"));
#undef I
#undef R
        json_decref(res);
        return 0;
}
