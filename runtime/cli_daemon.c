/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox daemon status|stop|restart: the caller's own nsboxd, the one its socket leads to
 * (nsbox_paths: $NSBOX_SOCKET, or the user's runtime directory).  Stopping asks it on that
 * socket (the shutdown method, its own uid only) and waits for it to be gone: no signal by name,
 * which would reach every user's daemon. */
#include "cli_session.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "paths.h"
#include "util.h"

#define STOP_WAIT_S 120 /* longer than any drain timeout a daemon is likely to have */

static const char usage_daemon[] =
        "usage: nsbox daemon status|stop|restart [--json]\n"
        "\n"
        "Your own nsboxd, the one your socket leads to ($NSBOX_SOCKET, or your runtime directory).\n"
        "  status                 its pid, socket, uptime, sandboxes and version; exit status 3\n"
        "                         when none runs\n"
        "  stop                   ask it to stop cleanly (as SIGTERM: calls in flight finish, then its\n"
        "                         sandboxes go, or stay for the next one with keep_on_stop) and wait\n"
        "                         until it is gone\n"
        "  restart                stop, then start a new one as any nsbox command would\n"
        "  --json                 status: print it as a JSON object\n";

/* ping + stats of the daemon at the socket: 0, 3 (none runs), or 125 after printing why */
static int daemon_info(nsbox_client *cl, const char *sock, json_t **ret_ping, json_t **ret_stats)
{
        nsbox_error err = { 0 };
        if (nsbox_client_connect(false, cl, &err) < 0) {
                bool none = err.errnum == ENOENT || err.errnum == ECONNREFUSED;
                if (!none)
                        fprintf(stderr, "nsbox: daemon: %s\n", err.msg ? err.msg : "connect failed");
                nsbox_error_clear(&err);
                return none ? 3 : EXIT_NSBOX;
        }
        int st = nsbox_cli_call("daemon", cl, "ping", json_object(), NULL, NULL, ret_ping, EXIT_NSBOX);
        if (st == 0 && ret_stats)
                st = nsbox_cli_call("daemon", cl, "stats", json_object(), NULL, NULL, ret_stats, EXIT_NSBOX);
        if (st == 0 && json_integer_value(json_object_get(*ret_ping, "uid")) != (json_int_t)geteuid()) {
                fprintf(stderr, "nsbox: daemon: the nsboxd at '%s' is uid %lld's, not yours: nsbox daemon acts on your own only\n", sock,
                        (long long)json_integer_value(json_object_get(*ret_ping, "uid")));
                st = EXIT_NSBOX;
        }
        return st;
}

static int status(const char *sock, bool json)
{
        nsbox_client cl = { .fd = -1 };
        json_t *ping = NULL, *stats = NULL;
        int st = daemon_info(&cl, sock, &ping, &stats);
        nsbox_client_close(&cl);
        if (st == 3) {
                if (json)
                        printf("{\"running\":false,\"socket\":\"%s\"}\n", sock);
                else
                        printf("nsboxd: not running (socket %s)\n", sock);
        } else if (st == 0) {
                json_t *sb = json_object_get(stats, "sandboxes");
                json_int_t pid = json_integer_value(json_object_get(ping, "pid"));
                double up = json_number_value(json_object_get(stats, "uptime_s"));
                const char *ver = json_string_value(json_object_get(ping, "version"));
                if (json) {
                        json_t *o = json_pack("{sb sI ss sf si si ss* sb}", "running", 1, "pid", pid, "socket", sock, "uptime_s", up, "sandboxes",
                                              (int)json_integer_value(json_object_get(sb, "total")), "pooled",
                                              (int)json_integer_value(json_object_get(sb, "pooled")), "version", ver, "stopping",
                                              json_is_true(json_object_get(stats, "stopping")));
                        nsbox_cli_print_json(stdout, o);
                        json_decref(o);
                } else {
                        printf("nsboxd: running%s\n  pid        %lld\n  socket     %s\n  uptime     %.0f s\n  sandboxes  %lld (%lld pooled)\n  version    %s\n",
                               json_is_true(json_object_get(stats, "stopping")) ? " (stopping)" : "", (long long)pid, sock, up,
                               (long long)json_integer_value(json_object_get(sb, "total")), (long long)json_integer_value(json_object_get(sb, "pooled")),
                               ver ? ver : "?");
                }
        }
        json_decref(ping);
        json_decref(stats);
        return st;
}

/* Wait until the process is gone (a pidfd: no mistake on a reused pid) and its socket too. */
static int wait_gone(pid_t pid, const char *sock)
{
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                struct stat stt;
                bool alive = pfd >= 0 ? poll(&(struct pollfd){ .fd = pfd, .events = POLLIN }, 1, 0) == 0 : kill(pid, 0) == 0 || errno != ESRCH;
                if (!alive && stat(sock, &stt) < 0)
                        break;
                if (!alive) { /* a socket kept for systemd's next activation: no listener behind it */
                        nsbox_client probe = { .fd = -1 };
                        nsbox_error err = { 0 };
                        bool answered = nsbox_client_connect(false, &probe, &err) == 0;
                        nsbox_client_close(&probe);
                        nsbox_error_clear(&err);
                        if (!answered)
                                break;
                }
                struct timespec t;
                clock_gettime(CLOCK_MONOTONIC, &t);
                if (t.tv_sec - t0.tv_sec > STOP_WAIT_S) {
                        fprintf(stderr, "nsbox: daemon: nsboxd %d has not stopped after %d s\n", (int)pid, STOP_WAIT_S);
                        if (pfd >= 0)
                                close(pfd);
                        return EXIT_NSBOX;
                }
                usleep(20000);
        }
        if (pfd >= 0)
                close(pfd);
        return 0;
}

static int stop(const char *sock, bool quiet_if_none)
{
        nsbox_client cl = { .fd = -1 };
        json_t *ping = NULL, *res = NULL;
        int st = daemon_info(&cl, sock, &ping, NULL);
        if (st == 3) {
                if (!quiet_if_none)
                        printf("nsboxd: not running (socket %s)\n", sock);
                nsbox_client_close(&cl);
                return 0;
        }
        pid_t pid = (pid_t)json_integer_value(json_object_get(ping, "pid"));
        json_decref(ping);
        if (st == 0)
                st = nsbox_cli_call("daemon", &cl, "shutdown", json_object(), NULL, NULL, &res, EXIT_NSBOX);
        json_decref(res);
        nsbox_client_close(&cl);
        if (st == 0)
                st = wait_gone(pid, sock);
        if (st == 0)
                printf("nsboxd: stopped (pid %d)\n", (int)pid);
        return st;
}

int nsbox_cmd_daemon(int argc, char **argv)
{
        bool json = false;
        const char *sub = NULL;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        fputs(usage_daemon, stdout);
                        return 0;
                } else if (!strcmp(argv[i], "--json")) {
                        json = true;
                } else if (argv[i][0] == '-') {
                        return nsbox_cli_unknown_option("daemon", argv[i]);
                } else if (sub) {
                        return nsbox_cli_usage_error("daemon", "unexpected argument '%s'", argv[i]);
                } else {
                        sub = argv[i];
                }
        }
        if (!sub || (strcmp(sub, "status") && strcmp(sub, "stop") && strcmp(sub, "restart")))
                return nsbox_cli_usage_error("daemon", sub ? "unknown subcommand '%s': expected status, stop or restart" : "expected status, stop or restart%s",
                                             sub ? sub : "");
        if (json && strcmp(sub, "status"))
                return nsbox_cli_usage_error("daemon", "--json goes with status");
        nsbox_paths paths = { 0 };
        nsbox_error err = { 0 };
        if (nsbox_paths_get(false, &paths, &err) < 0) {
                fprintf(stderr, "nsbox: daemon: %s\n", err.msg ? err.msg : "no runtime directory");
                nsbox_error_clear(&err);
                return EXIT_NSBOX;
        }
        int st;
        if (!strcmp(sub, "status")) {
                st = status(paths.socket, json);
        } else {
                st = stop(paths.socket, !strcmp(sub, "restart"));
                if (st == 0 && !strcmp(sub, "restart")) {
                        nsbox_client cl = { .fd = -1 };
                        json_t *ping = NULL;
                        st = nsbox_cli_call("daemon", &cl, "ping", json_object(), NULL, NULL, &ping, EXIT_NSBOX);
                        nsbox_client_close(&cl);
                        if (st == 0)
                                printf("nsboxd: started (pid %lld)\n", (long long)json_integer_value(json_object_get(ping, "pid")));
                        json_decref(ping);
                }
        }
        nsbox_paths_release(&paths);
        return st;
}
