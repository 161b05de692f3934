/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd(8): parse the options, run the daemon; only here does an error become a message. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "util.h"

static const char usage[] =
        "usage: nsboxd [--config FILE] [--socket PATH] [--http ADDR:PORT] [--node NAME] [--check-config]\n"
        "\n"
        "Serve nsbox sandboxes to clients (nsbox create, exec, call, cp, ls, rm) over a unix socket.\n"
        "\n"
        "  --socket PATH   listen on PATH (default: /run/nsbox/nsboxd.sock as root,\n"
        "                  $XDG_RUNTIME_DIR/nsbox/nsboxd.sock otherwise; or $NSBOX_SOCKET)\n"
        "  --config FILE   the configuration: capacity, lifetimes, clients, templates and\n"
        "                  their warm pools (default: /etc/nsbox/nsboxd.json as root,\n"
        "                  ~/.config/nsbox/nsboxd.json otherwise, if it exists)\n"
        "  --http ADDR:PORT\n"
        "                  serve the HTTP API there too (127.0.0.1:49982, [::1]:49982;\n"
        "                  clients use API keys: nsbox api-key); wins over http.listen\n"
        "  --node NAME     this node's name in a cluster, the suffix of its sandboxes' ids\n"
        "                  (a-z, 0-9, '-', at most 24); wins over cluster.node\n"
        "  --check-config  check the configuration and its templates, then exit\n"
        "  -h, --help      this help\n"
        "  --version       the version\n"
        "\n"
        "See nsboxd(8) and nsbox-protocol(7).\n";

/* NSBOX_POLICY_PATH with each relative directory made absolute against the starting directory,
 * which nsboxd leaves (its clients' policy names must not resolve against where it happened to
 * start).  0, or -1 with a message printed. */
static int absolute_policy_path(const char *cwd)
{
        const char *env = getenv("NSBOX_POLICY_PATH");
        if (!env || !*env)
                return 0;
        _cleanup_sb_ strbuf sb;
        sb_init(&sb, 0);
        _cleanup_free_ char *copy = strdup(env);
        char *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
                if (sb_appendf(&sb, "%s%s%s%s", sb.len ? ":" : "", d[0] == '/' ? "" : cwd, d[0] == '/' ? "" : "/", d) < 0)
                        break;
        if (!copy || !sb.buf || setenv("NSBOX_POLICY_PATH", sb.buf, 1) < 0) {
                fprintf(stderr, "nsboxd: NSBOX_POLICY_PATH: out of memory\n");
                return -1;
        }
        return 0;
}

/* The command line: -1 to go on, or the exit status (help, version, a bad option: said). */
typedef struct args {
        nsbox_daemon_config cfg;
        const char *config, *http, *node;
        bool check;
} args;

static int parse_args(int argc, char **argv, args *a)
{
        enum { OPT_SOCKET = 0x100, OPT_READY_FD, OPT_VERSION, OPT_CONFIG, OPT_CHECK, OPT_HTTP, OPT_NODE };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, OPT_SOCKET },
                { "ready-fd", required_argument, NULL, OPT_READY_FD },
                { "config", required_argument, NULL, OPT_CONFIG },
                { "check-config", no_argument, NULL, OPT_CHECK },
                { "http", required_argument, NULL, OPT_HTTP },
                { "node", required_argument, NULL, OPT_NODE },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, OPT_VERSION },
                {},
        };
        int c;
        while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
                uint64_t v;
                switch (c) {
                case OPT_SOCKET:
                        if (optarg[0] != '/' || strlen(optarg) >= 108) {
                                fprintf(stderr, "nsboxd: --socket '%s': expected an absolute path shorter than 108 bytes\n", optarg);
                                return 2;
                        }
                        a->cfg.socket_path = optarg;
                        break;
                case OPT_READY_FD:
                        if (parse_u64(optarg, 3, 65535, &v) < 0) {
                                fprintf(stderr, "nsboxd: --ready-fd '%s': expected a file descriptor number\n", optarg);
                                return 2;
                        }
                        a->cfg.ready_fd = (int)v;
                        break;
                case OPT_CONFIG:
                        a->config = optarg;
                        break;
                case OPT_HTTP:
                        if (nsbox_dconfig_check_listen(optarg) < 0) {
                                fprintf(stderr, "nsboxd: --http '%s': expected ADDR:PORT, an IPv4 address or a bracketed IPv6 one and a port"
                                                " from 1 to 65535\n", optarg);
                                return 2;
                        }
                        a->http = optarg;
                        break;
                case OPT_NODE:
                        if (!nsbox_node_ok(optarg)) {
                                fprintf(stderr, "nsboxd: --node '%s': expected 1 to 24 of a-z, 0-9 and '-', starting and ending with a letter or digit\n",
                                        optarg);
                                return 2;
                        }
                        a->node = optarg;
                        break;
                case OPT_CHECK:
                        a->check = true;
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return 0;
                case OPT_VERSION:
                        printf("nsboxd %s\n", NSBOX_VERSION);
                        return 0;
                case ':':
                        fprintf(stderr, "nsboxd: option '%s' needs a value\n", argv[optind - 1]);
                        return 2;
                default:
                        fprintf(stderr, "nsboxd: unknown option '%s' (see nsboxd --help)\n", argv[optind - 1]);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "nsboxd: unexpected argument '%s' (see nsboxd --help)\n", argv[optind]);
                return 2;
        }
        return -1;
}

int main(int argc, char **argv)
{
        args a = { .cfg = { .socket_path = NULL, .ready_fd = -1 } };
        int done = parse_args(argc, argv, &a);
        if (done >= 0)
                return done;
        nsbox_daemon_config cfg = a.cfg;
        const char *config = a.config, *http = a.http, *node = a.node;
        bool check = a.check;
        nsbox_error err = { 0 };
        _cleanup_free_ char *def = config ? NULL : nsbox_dconfig_default_path();
        const char *path = config ? config : def;
        nsbox_dconfig conf;
        nsbox_dconfig_defaults(&conf);
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        int r = path ? nsbox_dconfig_load(path, config != NULL, &conf, &err) : 0;
        if (r == 0 && http) /* the command line wins over http.listen */
                snprintf(conf.http_listen, sizeof(conf.http_listen), "%s", http);
        if (r == 0 && node)
                snprintf(conf.node, sizeof(conf.node), "%s", node);
        /* Everything relative is resolved (the socket is absolute, the configuration read): from
         * here on nothing depends on the directory nsboxd was started in, which may be one its
         * clients can write. */
        if (r == 0 && absolute_policy_path(cwd ? cwd : "/") < 0) {
                nsbox_dconfig_release(&conf);
                return 2;
        }
        if (r == 0 && chdir("/") < 0) {
                fprintf(stderr, "nsboxd: chdir '/': %s\n", strerror(errno));
                nsbox_dconfig_release(&conf);
                return 2;
        }
        if (r < 0 || nsbox_daemon_check_config(&conf, &err) < 0) {
                fprintf(stderr, "nsboxd: %s\n", err.msg ? err.msg : "bad configuration");
                nsbox_error_clear(&err);
                nsbox_dconfig_release(&conf);
                return 2;
        }
        if (check && nsbox_daemon_check_templates_start(&conf, &err) < 0) {
                fprintf(stderr, "nsboxd: %s\n", err.msg ? err.msg : "a template does not start");
                nsbox_error_clear(&err);
                nsbox_dconfig_release(&conf);
                return 2;
        }
        if (check) {
                printf("nsboxd: %s: ok (%zu templates)\n", conf.source ? conf.source : "no configuration file, the defaults", conf.n_templates);
                nsbox_dconfig_release(&conf);
                return 0;
        }
        cfg.conf = &conf;
        int st = 0;
        if (nsbox_daemon_run(&cfg, &err) < 0) {
                fprintf(stderr, "nsboxd: %s\n", err.msg ? err.msg : "failed");
                nsbox_error_clear(&err);
                st = 1;
        }
        nsbox_dconfig_release(&conf);
        return st;
}
