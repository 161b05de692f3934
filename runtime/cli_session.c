/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox create, watch, call, ls, inspect, rm and tools (cli_session.h; exec is cli_exec.c, cp
 * cli_cp.c): option parsing and output; the work is one or a few nsboxd calls through client.h. */
#include "cli_session.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../tools/registry.h"
#include "client.h"
#include "options.h"
#include "params.h"
#include "json.h"
#include "supervisor.h"
#include "util.h"



/* nsboxd's messages may echo what a client chose (labels, names): escaped (nsbox_escape_controls) */
static int say(const char *cmd, int status, const char *code, const nsbox_error *err)
{
        nsbox_cli_progress_stop(NULL); /* the error on a line of its own */
        _cleanup_free_ char *safe = nsbox_escape_controls(err->msg ? err->msg : "failed");
        _cleanup_free_ char *safe_code = code ? nsbox_escape_controls(code) : NULL;
        if (safe_code && strcmp(code, "internal"))
                fprintf(stderr, "nsbox: %s: %s: %s\n", cmd, safe_code, safe ? safe : "failed");
        else
                fprintf(stderr, "nsbox: %s: %s\n", cmd, safe ? safe : "failed");
        return status;
}

#define usage_error nsbox_cli_usage_error
int nsbox_cli_usage_error(const char *cmd, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "nsbox: %s: ", cmd);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, " (see nsbox %s --help)\n", cmd);
        va_end(ap);
        return EXIT_NSBOX;
}

#define call_once nsbox_cli_call
/* Connect (starting the daemon when needed) and make one call; 0 or the exit status to use. */
int nsbox_cli_call(const char *cmd, nsbox_client *cl, const char *method, json_t *params, nsbox_client_event_fn ev, void *ud,
                     json_t **ret, int refused_status)
{
        nsbox_error err = { 0 };
        const char *code = NULL;
        if (cl->fd < 0 && nsbox_client_connect(true, cl, &err) < 0) {
                json_decref(params);
                int st = say(cmd, EXIT_NSBOX, NULL, &err);
                nsbox_error_clear(&err);
                return st;
        }
        int r = nsbox_client_call(cl, method, params, ev, ud, ret, &code, &err);
        if (r < 0) {
                if (r == -ECANCELED && !code) { /* the callback gave up: it says why */
                        nsbox_error_clear(&err);
                        return EXIT_NSBOX;
                }
                int st = say(cmd, code ? refused_status : EXIT_NSBOX, code, &err);
                nsbox_error_clear(&err);
                return st;
        }
        return 0;
}

/* Durations and seconds are the only reals nsboxd sends: to the microsecond's thousandth of a
 * millisecond, printed with 15 digits, 3008.253 and not 3008.2534850000002. */
static void round_reals(json_t *v, int depth)
{
        const char *k;
        json_t *e;
        size_t i;
        if (depth > 64)
                return;
        double x = json_is_real(v) ? json_real_value(v) * 1000.0 : 0; /* no libm: by hand */
        if (json_is_real(v) && x > -1e15 && x < 1e15)
                json_real_set(v, (double)(long long)(x < 0 ? x - 0.5 : x + 0.5) / 1000.0);
        else if (json_is_object(v))
                json_object_foreach(v, k, e) round_reals(e, depth + 1);
        else if (json_is_array(v))
                json_array_foreach(v, i, e) round_reals(e, depth + 1);
}

char *nsbox_cli_dumps(json_t *v, size_t flags)
{
        round_reals(v, 0);
        return json_dumps(v, flags | JSON_REAL_PRECISION(15));
}

#define print_json nsbox_cli_print_json
void nsbox_cli_print_json(FILE *f, json_t *v)
{
        _cleanup_free_ char *text = nsbox_cli_dumps(v, JSON_INDENT(2));
        _cleanup_free_ char *safe = text ? nsbox_json_escape_c1(text) : NULL; /* the same JSON, nothing a terminal acts on */
        if (safe)
                fprintf(f, "%s\n", safe);
}

/* ---- create ----------------------------------------------------------------------------------- */

static const char usage_create[] =
        "usage: nsbox create [OPTIONS]\n"
        "\n"
        "Start a persistent sandbox, served by nsboxd (started for you when none runs), and print\n"
        "its id.  Options are those of nsbox run, plus:\n"
        "  --label K=V            a label, shown by nsbox ls (repeatable)\n"
        "  --from SNAPSHOT        start on a snapshot's filesystem (nsbox snapshot)\n"
        "  --count N              start N sandboxes (with --from: N forks), print N ids\n"
        "  --repo PATH|URL        clone a git repository into the workdir (local paths and file:// URLs)\n"
        "  --commit REV           ... checked out at REV (a commit id, branch or tag), detached\n"
        "  --record FILE          record every tool call as a trajectory (nsbox replay FILE)\n"
        "  --timeout SECONDS      destroy the sandbox after SECONDS (or pause it: --on-expiry)\n"
        "  --idle-timeout SECONDS destroy it after SECONDS without a call (or pause it)\n"
        "  --on-expiry destroy|pause|pause_files\n"
        "                         what a timeout does (default: nsboxd's configuration, destroy);\n"
        "                         pause_files keeps only the files (its processes are killed)\n"
        "  --template NAME        one of nsboxd's templates, from its warm pool when one is ready\n"
        "                         (only --label, the timeouts and --wait go with it)\n"
        "  --reuse                the sandbox of yours with every --label given, if there is one\n"
        "                         (created otherwise): one sandbox per conversation thread\n"
        "  --wait SECONDS         when nsboxd is at capacity, wait up to SECONDS for room\n"
        "  --json                 print the sandbox as a JSON object instead of its id\n";

/* The params object of the table (params.h); a path that does not resolve is said on stderr. */
int nsbox_cli_create_params(const char *cmd, const nsbox_run_options *o, json_t **ret)
{
        nsbox_error err = { 0 };
        if (nsbox_params_to_json(o, ret, &err) < 0) {
                fprintf(stderr, "nsbox: %s: %s\n", cmd, err.msg ? err.msg : "out of memory");
                nsbox_error_clear(&err);
                return -1;
        }
        return 0;
}

int nsbox_cmd_create(int argc, char **argv)
{
        nsbox_error err = { 0 };
        nsbox_run_options o;
        int status = 0;
        if (nsbox_run_options_parse(argc, argv, &o, &err) < 0) {
                fprintf(stderr, "nsbox: %s\n", err.msg); /* it names the subcommand already */
                status = EXIT_NSBOX;
                nsbox_error_clear(&err);
                goto out;
        }
        if (o.help) {
                fputs(usage_create, stdout);
                goto out;
        }
        json_t *params = NULL, *res = NULL;
        if (nsbox_cli_create_params("create", &o, &params) < 0) {
                status = EXIT_NSBOX;
                goto out;
        }
        if (o.record && o.count > 1) {
                json_decref(params);
                status = usage_error("create", "--record names one file: it goes with one sandbox, not --count %llu", (unsigned long long)o.count);
                goto out;
        }
        /* --count: one connection, one sandbox after the other; each id as soon as it exists */
        nsbox_client cl = { .fd = -1 };
        const char *repo = json_string_value(json_object_get(params, "repo"));
        if (repo && isatty(2)) /* how far the clone is, for the line on the terminal */
                json_object_set_new(params, "progress", json_true());
        for (uint64_t i = 0; i < o.count && status == 0; i++) {
                nsbox_cli_progress pr = { 0 };
                if (repo)
                        nsbox_cli_progress_start(&pr, "cloning %s", repo);
                status = call_once("create", &cl, o.reuse ? "get_or_create" : "create", json_incref(params),
                                   pr.running ? nsbox_cli_progress_event : NULL, &pr, &res, EXIT_NSBOX);
                nsbox_cli_progress_stop(&pr);
                if (status == 0) {
                        size_t k;
                        json_t *w;
                        json_array_foreach(json_object_get(res, "warnings"), k, w) /* once, not --count times */
                                if (i == 0 && json_is_string(w))
                                        fprintf(stderr, "nsbox: warning: %s\n", json_string_value(w));
                        if (o.json)
                                print_json(stdout, res);
                        else
                                printf("%s\n", json_string_value(json_object_get(res, "id")));
                        fflush(stdout);
                }
                json_decref(res);
                res = NULL;
        }
        json_decref(params);
        nsbox_client_close(&cl);
out:
        nsbox_run_options_release(&o);
        return status;
}

/* ---- watch ------------------------------------------------------------------------------------ */

static const char usage_watch[] =
        "usage: nsbox watch [-r] ID PATH\n"
        "\n"
        "Print the changes under directory PATH of sandbox ID, one line each (\"create file dir/a.txt\";\n"
        "ops: create write remove rename chmod overflow), until Ctrl-C or SIGTERM, or until PATH goes.\n"
        "  -r, --recursive        watch every directory under PATH too, new ones included\n";

static void watch_event(json_t *params, void *ud)
{
        (void)ud;
        const char *op = json_string_value(json_object_get(params, "op"));
        const char *path = json_string_value(json_object_get(params, "path"));
        const char *type = json_string_value(json_object_get(params, "type"));
        if (!op)
                return;
        _cleanup_free_ char *safe = nsbox_escape_controls(path ? path : "");
        printf("%s %s %s\n", op, type ? type : "-", safe ? safe : "?");
        fflush(stdout);
}

/* Ctrl-C, SIGTERM: the connection closes with the process, and nsboxd cancels the watch */
static void watch_stop(int sig)
{
        (void)sig;
        _exit(0);
}

int nsbox_cmd_watch(int argc, char **argv)
{
        static const struct option opts[] = {
                { "recursive", no_argument, NULL, 'r' }, { "help", no_argument, NULL, 'h' }, {},
        };
        bool recursive = false;
        int c;
        optind = 0;
        opterr = 0; /* our one-line error, not getopt's */
        while ((c = getopt_long(argc, argv, "+rh", opts, NULL)) != -1) {
                switch (c) {
                case 'r': recursive = true; break;
                case 'h': fputs(usage_watch, stdout); return 0;
                default: return nsbox_cli_unknown_option("watch", argv[optind - 1]);
                }
        }
        if (argc - optind != 2)
                return usage_error("watch", "expected a sandbox ID and a PATH");
        struct sigaction sa = { .sa_handler = watch_stop };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        json_t *tparams = json_pack("{ss sb}", "path", argv[optind + 1], "recursive", recursive);
        json_t *params = json_pack("{ss ss so sb}", "sandbox", argv[optind], "tool", "watch", "params", tparams, "stream", 1);
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = call_once("watch", &cl, "call", params, watch_event, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        json_decref(res);
        return status;
}

/* ---- call ------------------------------------------------------------------------------------- */

static const char usage_call[] =
        "usage: nsbox call ID TOOL [JSON]\n"
        "\n"
        "Make one tool call in sandbox ID and print its JSON result.  JSON is the params object\n"
        "(default {}; - reads it from standard input).  Exit status 1 when the tool reports an\n"
        "error (its code and message on stderr), 125 if nsbox failed.  See nsbox tools.\n";

int nsbox_cmd_call(int argc, char **argv)
{
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                fputs(usage_call, stdout);
                return 0;
        }
        if (argc < 3 || argc > 4)
                return usage_error("call", "expected ID TOOL [JSON]");
        json_t *tparams;
        json_error_t je;
        if (argc == 4 && !strcmp(argv[3], "-"))
                tparams = json_loadf(stdin, 0, &je);
        else
                tparams = json_loads(argc == 4 ? argv[3] : "{}", 0, &je);
        if (!json_is_object(tparams)) {
                json_decref(tparams);
                return usage_error("call", "JSON params: %s", tparams ? "expected an object" : je.text);
        }
        json_t *params = json_pack("{ss ss so}", "sandbox", argv[1], "tool", argv[2], "params", tparams);
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = call_once("call", &cl, "call", params, NULL, NULL, &res, EXIT_FAILED);
        nsbox_client_close(&cl);
        if (status == 0)
                print_json(stdout, res);
        json_decref(res);
        return status;
}

/* ---- ls, inspect, rm, tools ------------------------------------------------------------------- */

static const char usage_ls[] =
        "usage: nsbox ls [-q] [--json] [--label K=V]... [--state starting|running|paused|snapshotting]\n"
        "\n"
        "List your sandboxes (all of them for root): those with every label given, in the state given.\n"
        "  -q, --quiet            print the ids only, one a line\n"
        "  --json                 print them as a JSON array (as nsbox inspect does)\n";

/* --label K=V into want; 0 or the usage error's status */
static int label_arg(const char *cmd, const char *kv, json_t *want)
{
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
                return usage_error(cmd, "--label '%s': expected KEY=VALUE", kv);
        _cleanup_free_ char *k = strndup(kv, (size_t)(eq - kv));
        json_object_set_new(want, k ? k : "", json_string(eq + 1));
        return 0;
}

/* nsboxd's list, for ls, inspect and rm --all; 0 or the exit status */
static int list_sandboxes(const char *cmd, nsbox_client *cl, json_t *params, json_t **ret_list)
{
        json_t *res = NULL;
        int status = call_once(cmd, cl, "list", params, NULL, NULL, &res, EXIT_REFUSED);
        if (status)
                return status;
        *ret_list = json_incref(json_object_get(res, "sandboxes"));
        json_decref(res);
        if (!json_is_array(*ret_list)) {
                json_decref(*ret_list);
                fprintf(stderr, "nsbox: %s: nsboxd sent a malformed list\n", cmd);
                return EXIT_NSBOX;
        }
        return 0;
}

static const char *base_name(const char *p)
{
        const char *s = strrchr(p, '/');
        return s ? s + 1 : p;
}

/* ls's POLICY: what the sandbox was made from: its template, a named policy of the policy
 * directories ("default", "strict") or the policy file's name */
static char *policy_label(json_t *s)
{
        const char *tpl = json_string_value(json_object_get(s, "template"));
        const char *pol = json_string_value(json_object_get(s, "policy"));
        if (tpl)
                return nsbox_escape_controls(tpl);
        if (!pol || !*pol)
                return strdup("default");
        const char *b = base_name(pol);
        size_t bl = strlen(b), dl = (size_t)(b - pol);
        bool named = bl > 5 && !strcmp(b + bl - 5, ".json") && dl >= 7 && !strncmp(b - 7, "policy/", 7);
        _cleanup_free_ char *n = strndup(b, named ? bl - 5 : bl);
        return n ? nsbox_escape_controls(n) : NULL;
}

static void print_table(json_t *list)
{
        size_t i;
        json_t *s;
        int w = 32; /* ids with a node name are longer */
        json_array_foreach(list, i, s) {
                size_t n = strlen(json_string_value(json_object_get(s, "id")) ?: "");
                w = n > (size_t)w && n <= 64 ? (int)n : w;
        }
        printf("%-*s  %-8s  %-6s  %-14s  %s\n", w, "ID", "STATE", "AGE", "POLICY", "LABELS");
        time_t now = time(NULL);
        json_array_foreach(list, i, s) {
                json_int_t age = now - json_integer_value(json_object_get(s, "created"));
                char agebuf[32];
                snprintf(agebuf, sizeof(agebuf), age < 120 ? "%llds" : age < 7200 ? "%lldm" : "%lldh",
                         (long long)(age < 120 ? age : age < 7200 ? age / 60 : age / 3600));
                strbuf labels;
                sb_init(&labels, 4096);
                const char *k;
                json_t *v;
                json_object_foreach(json_object_get(s, "labels"), k, v)
                        sb_appendf(&labels, "%s%s=%s", labels.len ? "," : "", k, json_string_value(v));
                /* what clients chose (labels, a policy's name) reaches the terminal escaped */
                _cleanup_free_ char *safe_labels = nsbox_escape_controls(labels.buf ? labels.buf : "");
                _cleanup_free_ char *safe_pol = policy_label(s);
                _cleanup_free_ char *safe_id = nsbox_escape_controls(json_string_value(json_object_get(s, "id")) ?: "");
                _cleanup_free_ char *safe_state = nsbox_escape_controls(json_string_value(json_object_get(s, "state")) ?: "");
                printf("%-*s  %-8s  %-6s  %-14s  %s\n", w, safe_id ? safe_id : "", safe_state ? safe_state : "", agebuf,
                       safe_pol ? safe_pol : "", safe_labels ? safe_labels : "");
                sb_release(&labels);
        }
}

int nsbox_cmd_ls(int argc, char **argv)
{
        bool json = false, quiet = false;
        json_t *params = json_object(), *want = json_object();
        json_object_set_new(params, "labels", want);
        for (int i = 1; i < argc; i++) {
                int st = 0;
                if (!strcmp(argv[i], "--json")) {
                        json = true;
                } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
                        quiet = true;
                } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        fputs(usage_ls, stdout);
                        json_decref(params);
                        return 0;
                } else if ((!strcmp(argv[i], "--label") || !strcmp(argv[i], "--state")) && i + 1 >= argc) {
                        st = usage_error("ls", "%s needs a value", argv[i]);
                } else if (!strcmp(argv[i], "--label")) {
                        st = label_arg("ls", argv[++i], want);
                } else if (!strcmp(argv[i], "--state")) {
                        json_object_set_new(params, "state", json_string(argv[++i]));
                } else {
                        st = argv[i][0] == '-' ? nsbox_cli_unknown_option("ls", argv[i]) : usage_error("ls", "unexpected argument '%s'", argv[i]);
                }
                if (st) {
                        json_decref(params);
                        return st;
                }
        }
        if (quiet && json) {
                json_decref(params);
                return usage_error("ls", "-q and --json do not go together");
        }
        nsbox_client cl = { .fd = -1 };
        json_t *list = NULL;
        int status = list_sandboxes("ls", &cl, params, &list);
        nsbox_client_close(&cl);
        if (status)
                return status;
        size_t i;
        json_t *s;
        if (json)
                print_json(stdout, list);
        else if (quiet)
                json_array_foreach(list, i, s) {
                        _cleanup_free_ char *safe_id = nsbox_escape_controls(json_string_value(json_object_get(s, "id")) ?: "");
                        printf("%s\n", safe_id ? safe_id : "");
                }
        else
                print_table(list);
        json_decref(list);
        return 0;
}

/* "nsbox rm ID -f": an option after the IDs is refused before any is acted on, never taken
 * for an ID (after a "--", argv[first - 1], all are IDs) */
static int ids_without_options(const char *cmd, int argc, char **argv, int first)
{
        if (first > 1 && !strcmp(argv[first - 1], "--"))
                return 0;
        for (int i = first; i < argc; i++)
                if (argv[i][0] == '-')
                        return usage_error(cmd, "'%s' after a sandbox ID: options go before the IDs", argv[i]);
        return 0;
}

static const char usage_inspect[] =
        "usage: nsbox inspect ID...\n"
        "\n"
        "Print the sandboxes as a JSON array, each object as nsbox ls --json has it.  An ID is a full\n"
        "id or a unique prefix of at least 4 characters.  One that is not found is said on stderr\n"
        "(exit status 125), the others printed (nothing when none is found).\n";

int nsbox_cmd_inspect(int argc, char **argv)
{
        int first = 1;
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                fputs(usage_inspect, stdout);
                return 0;
        }
        if (argc >= 2 && !strcmp(argv[1], "--"))
                first++;
        else if (argc >= 2 && argv[1][0] == '-')
                return nsbox_cli_unknown_option("inspect", argv[1]);
        if (first >= argc)
                return usage_error("inspect", "expected at least one sandbox ID");
        int st = ids_without_options("inspect", argc, argv, first);
        if (st)
                return st;
        nsbox_client cl = { .fd = -1 };
        json_t *list = NULL, *out = json_array();
        int status = list_sandboxes("inspect", &cl, json_object(), &list);
        nsbox_client_close(&cl);
        for (int a = first; status == 0 && a < argc; a++) {
                nsbox_id_match m;
                nsbox_id_match_init(&m, argv[a]);
                size_t i;
                json_t *s;
                json_array_foreach(list, i, s)
                        if (json_string_value(json_object_get(s, "id")))
                                nsbox_id_match_offer(&m, json_string_value(json_object_get(s, "id")), s);
                const char *code = NULL;
                char msg[160];
                json_t *found = nsbox_id_match_result(&m, &code, msg, sizeof(msg));
                if (found) {
                        json_array_append(out, found);
                        continue;
                }
                _cleanup_free_ char *safe = nsbox_escape_controls(msg);
                fprintf(stderr, "nsbox: inspect: %s: %s\n", code ? code : "not_found", safe ? safe : "");
        }
        if (list && json_array_size(out) < (size_t)(argc - first))
                status = EXIT_NSBOX;
        if (json_array_size(out))
                print_json(stdout, out);
        json_decref(out);
        json_decref(list);
        return status;
}

/* rm --all [--label K=V]...: the ids of the caller's own sandboxes (root's list has everyone's) */
static int own_ids(json_t *labels, json_t **ret_ids)
{
        nsbox_client cl = { .fd = -1 };
        json_t *list = NULL;
        int status = list_sandboxes("rm", &cl, json_pack("{sO}", "labels", labels), &list);
        nsbox_client_close(&cl);
        if (status)
                return status;
        *ret_ids = json_array();
        size_t i;
        json_t *s;
        json_array_foreach(list, i, s)
                if (json_integer_value(json_object_get(s, "uid")) == (json_int_t)getuid() && json_is_string(json_object_get(s, "id")))
                        json_array_append(*ret_ids, json_object_get(s, "id"));
        json_decref(list);
        return 0;
}

/* rm, pause, resume: one daemon method applied to each ID in turn (rm --all: to each of the
 * caller's sandboxes with the labels given). */
static int each_sandbox(const char *cmd, const char *method, const char *help, bool is_rm, int argc, char **argv)
{
        bool force = false, all = false, memory = true;
        /* pause --no-memory: its files kept, its processes killed; resume --reboot: the same as it thaws */
        const char *no_memory = !strcmp(method, "pause") ? "--no-memory" : !strcmp(method, "resume") ? "--reboot" : NULL;
        _cleanup_(json_decrefp) json_t *labels = json_object(), *ids = NULL;
        int first = 1;
        for (; first < argc && argv[first][0] == '-'; first++) {
                int st = 0;
                if (!strcmp(argv[first], "--")) {
                        first++;
                        break;
                }
                if (is_rm && (!strcmp(argv[first], "-f") || !strcmp(argv[first], "--force")))
                        force = true;
                else if (is_rm && !strcmp(argv[first], "--all"))
                        all = true;
                else if (no_memory && !strcmp(argv[first], no_memory))
                        memory = false;
                else if (is_rm && !strcmp(argv[first], "--label"))
                        st = first + 1 < argc ? label_arg(cmd, argv[++first], labels) : usage_error(cmd, "--label needs a value");
                else if (!strcmp(argv[first], "--help") || !strcmp(argv[first], "-h")) {
                        fputs(help, stdout);
                        return 0;
                } else
                        st = nsbox_cli_unknown_option(cmd, argv[first]);
                if (st)
                        return st;
        }
        int st = ids_without_options(cmd, argc, argv, first);
        if (st)
                return st;
        if (all && first < argc)
                return usage_error(cmd, "--all takes no sandbox ID ('%s')", argv[first]);
        if (json_object_size(labels) && !all)
                return usage_error(cmd, "--label goes with --all");
        if (!all && first >= argc)
                return usage_error(cmd, "expected at least one sandbox ID");
        if (all) {
                st = own_ids(labels, &ids);
                if (st)
                        return st;
                force = true; /* one that went meanwhile is gone as asked */
        } else {
                ids = json_array();
                for (int i = first; i < argc; i++)
                        json_array_append_new(ids, json_string(argv[i]));
        }
        nsbox_client cl = { .fd = -1 };
        nsbox_error err = { 0 };
        if (json_array_size(ids) && nsbox_client_connect(true, &cl, &err) < 0) {
                st = say(cmd, EXIT_NSBOX, NULL, &err);
                nsbox_error_clear(&err);
                return st;
        }
        int status = 0;
        size_t i;
        json_t *id;
        json_array_foreach(ids, i, id) {
                json_t *res = NULL;
                const char *code = NULL;
                json_t *params = json_pack("{sO}", "sandbox", id);
                if (!memory)
                        json_object_set_new(params, "memory", json_false());
                if (nsbox_client_call(&cl, method, params, NULL, NULL, &res, &code, &err) < 0) {
                        if (!(force && code && !strcmp(code, "not_found"))) {
                                say(cmd, 0, code, &err);
                                status = EXIT_REFUSED;
                        }
                        nsbox_error_clear(&err);
                        if (!code)
                                break; /* the connection is gone */
                        continue;
                }
                json_decref(res);
        }
        nsbox_client_close(&cl);
        return status;
}

int nsbox_cmd_rm(int argc, char **argv)
{
        return each_sandbox("rm", "destroy",
                            "usage: nsbox rm [-f] ID...\n"
                            "       nsbox rm --all [--label K=V]...\n"
                            "\n"
                            "Destroy sandboxes: every process in them is killed and their writable layer discarded.\n"
                            "  -f, --force            an ID that does not exist is not an error\n"
                            "  --all                  every sandbox of yours (of your user id, even for root)\n"
                            "  --label K=V            with --all: only those with this label (repeatable)\n",
                            true, argc, argv);
}

int nsbox_cmd_pause(int argc, char **argv)
{
        return each_sandbox("pause", "pause",
                            "usage: nsbox pause [--no-memory] ID...\n\nFreeze every process of the sandboxes (cgroup.freeze); their memory stays as\n"
                            "it is.  Calls to a paused sandbox are refused until nsbox resume.\n"
                            "  --no-memory            keep only their files: every process but the agent is\n"
                            "                         killed, nothing is frozen; their resume is a reboot\n",
                            false, argc, argv);
}

int nsbox_cmd_resume(int argc, char **argv)
{
        return each_sandbox("resume", "resume",
                            "usage: nsbox resume [--reboot] ID...\n\nThaw paused sandboxes: their processes go on where they stopped (one paused\n"
                            "with --no-memory resumes rebooted: its files, none of its processes).\n"
                            "  --reboot               kill their processes as they thaw: only their files go on\n",
                            false, argc, argv);
}

int nsbox_cmd_tools(int argc, char **argv)
{
        const char *format = "json";
        for (int i = 1; i < argc; i++) {
                if (!strncmp(argv[i], "--format=", 9))
                        format = argv[i] + 9;
                else if (!strcmp(argv[i], "--format") && i + 1 < argc)
                        format = argv[++i];
                else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        fputs("usage: nsbox tools [--format json|openai|mcp]\n\nPrint the tool schemas: nsbox's own (json), OpenAI Chat "
                              "Completions 'tools' (openai) or MCP tools/list items (mcp).\n",
                              stdout);
                        return 0;
                } else
                        return argv[i][0] == '-' ? nsbox_cli_unknown_option("tools", argv[i]) : usage_error("tools", "unknown argument '%s'", argv[i]);
        }
        json_t *t = tool_schemas(format);
        if (!t)
                return usage_error("tools", "--format '%s': expected json, openai or mcp", format);
        print_json(stdout, t);
        json_decref(t);
        return 0;
}
