/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox logs and attach (cli_session.h): a background process's recent output, and with
 * --follow its live output and exit status, through one process_connect call. */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli_session.h"
#include "client.h"
#include "util.h"

static const char usage_logs[] =
        "usage: nsbox logs [-f] ID PID|TAG\n"
        "\n"
        "Print the recent output (the last 64 KiB of stdout and of stderr) of a background process\n"
        "of sandbox ID, started with nsbox exec -d, named by its pid or its tag.  With -f, then its\n"
        "output as it comes until it exits.  The exit status is the process's once it has ended\n"
        "(0 while it runs), 1 when there is no such process, 125 if nsbox failed.\n"
        "  -f, --follow           follow its output until it exits (nsbox attach does the same)\n";

static const char usage_attach[] =
        "usage: nsbox attach ID PID|TAG\n"
        "\n"
        "Attach to a background process of sandbox ID (nsbox exec -d): its recent output, then its\n"
        "output as it comes; exits with its status when it ends.  Interrupting nsbox attach detaches\n"
        "and leaves the process running.  Standard input is not forwarded.\n";

/* PID|TAG as process_connect's params: all digits is a pid. */
static json_t *proc_ref(const char *arg)
{
        size_t n = strspn(arg, "0123456789");
        if (n && !arg[n] && n < 10)
                return json_pack("{sI}", "pid", (json_int_t)strtoll(arg, NULL, 10));
        return json_pack("{ss}", "tag", arg);
}

static int logs(const char *cmd, const char *id, const char *which, bool follow)
{
        json_t *tparams = proc_ref(which);
        json_object_set_new(tparams, "follow", json_boolean(follow));
        json_t *params = json_pack("{ss ss so sb}", "sandbox", id, "tool", "process_connect", "params", tparams, "stream", 1);
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = nsbox_cli_call(cmd, &cl, "call", params, nsbox_cli_output_event, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        if (status)
                return status;
        json_t *code = json_object_get(res, "exit_code");
        if (json_is_true(json_object_get(res, "running")))
                status = 0;
        else if (json_is_integer(code) && json_integer_value(code) >= 0 && json_integer_value(code) <= 255)
                status = (int)json_integer_value(code);
        else
                status = EXIT_NSBOX;
        json_decref(res);
        return status;
}

int nsbox_cmd_logs(int argc, char **argv)
{
        static const struct option opts[] = {
                { "follow", no_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        bool follow = false;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "+:fh", opts, NULL)) != -1) {
                switch (c) {
                case 'f': follow = true; break;
                case 'h': fputs(usage_logs, stdout); return 0;
                default: return nsbox_cli_usage_error("logs", "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (argc - optind != 2)
                return nsbox_cli_usage_error("logs", "expected a sandbox ID and a PID or TAG");
        return logs("logs", argv[optind], argv[optind + 1], follow);
}

int nsbox_cmd_attach(int argc, char **argv)
{
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                fputs(usage_attach, stdout);
                return 0;
        }
        if (argc != 3)
                return nsbox_cli_usage_error("attach", "expected a sandbox ID and a PID or TAG");
        return logs("attach", argv[1], argv[2], true);
}
