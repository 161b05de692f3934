/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox snapshot, reset, gc and replay (cli_session.h).  Taking a snapshot and resetting go
 * through nsboxd, which holds the sandboxes; listing, removing and collecting work on the store
 * directly, with or without a daemon (store.h). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_session.h"
#include "options.h"
#include "client.h"
#include "store.h"
#include "trajectory.h"
#include "util.h"


static bool is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

static int store_failed(const char *cmd, int r, nsbox_error *err)
{
        _cleanup_free_ char *safe = nsbox_escape_controls(err->msg ? err->msg : strerror(-r));
        fprintf(stderr, "nsbox: %s: %s\n", cmd, safe ? safe : strerror(-r));
        nsbox_error_clear(err);
        return r == -ENOENT || r == -EBUSY || r == -EEXIST || r == -EINVAL ? EXIT_REFUSED : EXIT_NSBOX;
}

static void human_size(uint64_t b, char *buf, size_t n)
{
        if (b < 10240)
                snprintf(buf, n, "%" PRIu64 "B", b);
        else if (b < (10ull << 20))
                snprintf(buf, n, "%.1fK", (double)b / 1024);
        else if (b < (10ull << 30))
                snprintf(buf, n, "%.1fM", (double)b / (1 << 20));
        else
                snprintf(buf, n, "%.1fG", (double)b / (1 << 30));
}

static const char usage_snapshot[] =
        "usage: nsbox snapshot ID NAME [--json]   capture sandbox ID's filesystem as snapshot NAME\n"
        "       nsbox snapshot ls [--json]        list snapshots\n"
        "       nsbox snapshot rm NAME...         remove snapshots no sandbox uses, and their layers\n"
        "\n"
        "The sandbox is frozen while its writable layer is copied into the store, then goes on.\n"
        "Start sandboxes on a snapshot with nsbox create --from NAME, return one to it with\n"
        "nsbox reset ID NAME.  NAME: 1-128 of [A-Za-z0-9._-], starting with a letter or digit.\n";

static int snapshot_ls(int argc, char **argv)
{
        bool json = false;
        for (int i = 2; i < argc; i++) {
                if (!strcmp(argv[i], "--json"))
                        json = true;
                else
                        return argv[i][0] == '-' ? nsbox_cli_unknown_option("snapshot", argv[i])
                                                  : nsbox_cli_usage_error("snapshot", "ls: unknown argument '%s'", argv[i]);
        }
        nsbox_error err = { 0 };
        nsbox_store st = NSBOX_STORE_INIT;
        json_t *list = NULL;
        int r = nsbox_store_open(true, &st, &err);
        if (r == 0)
                r = nsbox_store_list(&st, &list, &err);
        nsbox_store_close(&st);
        if (r < 0)
                return store_failed("snapshot", r, &err);
        if (json) {
                nsbox_cli_print_json(stdout, list);
        } else {
                printf("%-24s  %-6s  %-8s  %-19s  %-6s  %s\n", "NAME", "LAYERS", "SIZE", "CREATED", "IN USE", "FROM SANDBOX");
                size_t i;
                json_t *s;
                json_array_foreach(list, i, s) {
                        char size[32], when[32] = "";
                        human_size((uint64_t)json_integer_value(json_object_get(s, "size")), size, sizeof(size));
                        time_t t = (time_t)json_integer_value(json_object_get(s, "created"));
                        struct tm tm;
                        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
                        const char *src = json_string_value(json_object_get(s, "source"));
                        _cleanup_free_ char *safe_name = nsbox_escape_controls(json_string_value(json_object_get(s, "name")) ?: "");
                        _cleanup_free_ char *safe_src = nsbox_escape_controls(src ? src : "");
                        printf("%-24s  %-6zu  %-8s  %-19s  %-6s  %s\n", safe_name ? safe_name : "",
                               json_array_size(json_object_get(s, "layers")), size, when,
                               json_is_true(json_object_get(s, "in_use")) ? "yes" : "no", safe_src ? safe_src : "");
                }
        }
        json_decref(list);
        return 0;
}

static int snapshot_rm(int argc, char **argv)
{
        if (argc < 3)
                return nsbox_cli_usage_error("snapshot", "rm: expected at least one snapshot NAME");
        nsbox_error err = { 0 };
        for (int i = 2; i < argc; i++) /* every name checked before anything is removed */
                if (nsbox_snapshot_name_check(argv[i], &err) < 0) {
                        int st = nsbox_cli_usage_error("snapshot", "rm: %s", err.msg);
                        nsbox_error_clear(&err);
                        return st;
                }
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, &err);
        if (r < 0)
                return store_failed("snapshot", r, &err);
        for (int i = 2; i < argc; i++) /* an unknown name removes nothing */
                if (!nsbox_store_has_snapshot(&st, argv[i])) {
                        nsbox_store_close(&st);
                        fprintf(stderr, "nsbox: snapshot: no snapshot '%s' (see nsbox snapshot ls)\n", argv[i]);
                        return EXIT_REFUSED;
                }
        int status = 0;
        for (int i = 2; i < argc; i++)
                if ((r = nsbox_store_delete_snapshot(&st, argv[i], &err)) < 0)
                        status = store_failed("snapshot", r, &err);
        /* the layers only they used go now */
        if ((r = nsbox_store_gc(&st, NULL, &err)) < 0)
                status = store_failed("snapshot", r, &err);
        nsbox_store_close(&st);
        return status;
}

/* "ID [NAME] [--json]" of snapshot and reset: -1 to go on with pos and *json set, else the exit
 * status (after the help, or a usage error; NAME is checked here). */
static int id_and_name(const char *cmd, const char *help, int argc, char **argv, const char *pos[2], bool *json)
{
        int n = 0;
        for (int i = 1; i < argc; i++) {
                if (is_help(argv[i])) {
                        fputs(help, stdout);
                        return 0;
                }
                if (!strcmp(argv[i], "--json"))
                        *json = true;
                else if (argv[i][0] == '-')
                        return nsbox_cli_unknown_option(cmd, argv[i]);
                else if (n < 2)
                        pos[n++] = argv[i];
                else
                        return nsbox_cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
        if (n < 1)
                return nsbox_cli_usage_error(cmd, "expected a sandbox ID%s", strcmp(cmd, "snapshot") ? "" : " and a snapshot NAME");
        nsbox_error err = { 0 };
        if (pos[1] && nsbox_snapshot_name_check(pos[1], &err) < 0) {
                int st = nsbox_cli_usage_error(cmd, "%s", err.msg);
                nsbox_error_clear(&err);
                return st;
        }
        return -1;
}

int nsbox_cmd_snapshot(int argc, char **argv)
{
        if (argc >= 2 && is_help(argv[1])) {
                fputs(usage_snapshot, stdout);
                return 0;
        }
        if (argc >= 2 && !strcmp(argv[1], "ls"))
                return snapshot_ls(argc, argv);
        if (argc >= 2 && !strcmp(argv[1], "rm"))
                return snapshot_rm(argc, argv);
        bool json = false;
        const char *pos[2] = { NULL, NULL };
        int st = id_and_name("snapshot", usage_snapshot, argc, argv, pos, &json);
        if (st >= 0)
                return st;
        if (!pos[1])
                return nsbox_cli_usage_error("snapshot", "expected a sandbox ID and a snapshot NAME");
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        nsbox_cli_progress pr;
        nsbox_cli_progress_start(&pr, "snapshotting %s as %s", pos[0], pos[1]);
        json_t *params = json_pack("{ss ss}", "sandbox", pos[0], "name", pos[1]);
        if (params && pr.running) /* how far the copy is, for the line on the terminal */
                json_object_set_new(params, "progress", json_true());
        int status = nsbox_cli_call("snapshot", &cl, "snapshot", params, pr.running ? nsbox_cli_progress_event : NULL, &pr, &res, EXIT_REFUSED);
        nsbox_cli_progress_stop(&pr);
        nsbox_client_close(&cl);
        if (status == 0) {
                if (json)
                        nsbox_cli_print_json(stdout, res);
                else
                        printf("%s\n", json_string_value(json_object_get(res, "name")));
        }
        json_decref(res);
        return status;
}

static const char usage_reset[] =
        "usage: nsbox reset ID [NAME] [--json]\n\nKill every process of sandbox ID, discard its writable layer and start it again,\n"
        "keeping its id: on snapshot NAME, or as it was created (its --from snapshot,\nits --repo at its commit).\n";

int nsbox_cmd_reset(int argc, char **argv)
{
        bool json = false;
        const char *pos[2] = { NULL, NULL };
        int st = id_and_name("reset", usage_reset, argc, argv, pos, &json);
        if (st >= 0)
                return st;
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        json_t *params = json_pack("{ss}", "sandbox", pos[0]);
        if (pos[1])
                json_object_set_new(params, "snapshot", json_string(pos[1]));
        int status = nsbox_cli_call("reset", &cl, "reset", params, NULL, NULL, &res, EXIT_REFUSED);
        nsbox_client_close(&cl);
        if (status == 0 && json)
                nsbox_cli_print_json(stdout, res);
        json_decref(res);
        return status;
}

int nsbox_cmd_gc(int argc, char **argv)
{
        bool json = false;
        for (int i = 1; i < argc; i++) {
                if (is_help(argv[i])) {
                        fputs("usage: nsbox gc [--json]\n\nRemove from the store what nothing uses: layers no snapshot lists and no sandbox\n"
                              "runs on, repository clones no sandbox uses, and unfinished layers whose writer\nis gone.\n",
                              stdout);
                        return 0;
                }
                if (!strcmp(argv[i], "--json"))
                        json = true;
                else
                        return argv[i][0] == '-' ? nsbox_cli_unknown_option("gc", argv[i]) : nsbox_cli_usage_error("gc", "unknown argument '%s'", argv[i]);
        }
        nsbox_error err = { 0 };
        nsbox_store st = NSBOX_STORE_INIT;
        nsbox_gc_stats gs = { 0 };
        int r = nsbox_store_open(true, &st, &err);
        if (r == 0)
                r = nsbox_store_gc(&st, &gs, &err);
        nsbox_store_close(&st);
        if (r < 0)
                return store_failed("gc", r, &err);
        if (json) {
                json_t *o = json_pack("{si si si si sI}", "layers_removed", gs.layers_removed, "tmp_removed", gs.tmp_removed, "repos_removed",
                                      gs.repos_removed, "layers_kept", gs.layers_kept, "bytes_freed", (json_int_t)gs.bytes_freed);
                nsbox_cli_print_json(stdout, o);
                json_decref(o);
        } else {
                char size[32];
                human_size(gs.bytes_freed, size, sizeof(size));
                printf("removed %u layers, %u unfinished layers and %u repository clones (%s); %u layers kept\n", gs.layers_removed,
                       gs.tmp_removed, gs.repos_removed, size, gs.layers_kept);
        }
        return 0;
}

/* ---- replay ----------------------------------------------------------------------------------- */

static const char usage_replay[] =
        "usage: nsbox replay [--from SNAPSHOT] [--json] [CREATE OPTIONS] FILE\n"
        "\n"
        "Re-run the tool calls of a trajectory recorded with nsbox create --record FILE in a fresh\n"
        "sandbox made the same way (or on SNAPSHOT), compare each result with the recorded one, and\n"
        "report the first step that diverged.  Exit status: 0 when nothing diverged, 1 when a step\n"
        "did, 125 when the replay itself failed.\n"
        "\n"
        "The recorded limits, timeouts, environment, workdir, hostname and tmpfs are used as they\n"
        "are; what reaches the host (--bind, --rootfs, --policy, --net, --allow, --publish, --record,\n"
        "--repo, --template) only when given again here, the same: a trajectory is a file anyone may\n"
        "have written.  Options of nsbox create given here are used over the recorded ones.\n"
        "\n"
        "FILE may also be a knowlyr trajectory, {\"steps\": [{\"tool_name\", \"params\",\n"
        "\"expected_output\"}]}, run in a sandbox made from the options given (e.g. --net nat\n"
        "--repo URL --commit SHA): a step whose command fails is no success and diverges, even\n"
        "when its output is the expected one.\n";

typedef struct replay {
        nsbox_client cl;
        const char *sid;
        json_t *names; /* snapshot names taken during the replay -> their replay names */
} replay;

/* One step: 1 it ran (result/code set), negative when the replay itself failed. */
static int replay_step(replay *rp, const nsbox_traj_step *st, json_t **ret_result, char *code, size_t code_size, nsbox_error *err)
{
        json_t *params;
        const char *method;
        if (!strcmp(st->op, "call")) {
                method = "call";
                params = json_pack("{ss ss sO}", "sandbox", rp->sid, "tool", st->tool, "params", st->params);
                /* streamed as it was recorded: a streamed exec's result leaves its output to the events */
                if (json_is_true(json_object_get(st->params, "stream")))
                        json_object_set_new(params, "stream", json_true());
        } else if (!strcmp(st->op, "snapshot")) {
                char mapped[NSBOX_SNAPSHOT_NAME_MAX + 1];
                snprintf(mapped, sizeof(mapped), "replay-%d-%.100s", (int)getpid(), st->name);
                json_object_set_new(rp->names, st->name, json_string(mapped));
                method = "snapshot";
                params = json_pack("{ss ss}", "sandbox", rp->sid, "name", mapped);
        } else {
                method = "reset";
                params = json_pack("{ss}", "sandbox", rp->sid);
                json_t *m = st->name ? json_object_get(rp->names, st->name) : NULL;
                if (st->name)
                        json_object_set_new(params, "snapshot", m ? json_incref(m) : json_string(st->name));
        }
        json_t *res = NULL;
        const char *c = NULL;
        code[0] = '\0';
        if (nsbox_client_call(&rp->cl, method, params, NULL, NULL, &res, &c, err) < 0) {
                if (!c)
                        return -EIO; /* the daemon is gone */
                snprintf(code, code_size, "%s", c);
                nsbox_error_clear(err);
        }
        /* a snapshot or reset has no result to compare: only whether it worked */
        if (strcmp(st->op, "call")) {
                json_decref(res);
                res = NULL;
        }
        *ret_result = res;
        return 1;
}

/* The create parameters of the replay: the recorded ones, those reaching the host only when
 * given again.  0 or an exit status (the refusal said). */
static int replay_create_params(const nsbox_run_options *o, json_t *recorded, json_t **ret)
{
        json_t *given = NULL;
        if (nsbox_cli_create_params("replay", o, &given) < 0)
                return EXIT_NSBOX;
        _cleanup_sb_ strbuf refused;
        sb_init(&refused, 4096);
        int r = nsbox_traj_replay_params(recorded, given, ret, &refused);
        json_decref(given);
        if (r == -EPERM)
                fprintf(stderr, "nsbox: replay: the trajectory asks for host-facing parameters not given on the command line: %s; pass them again to allow\n",
                        refused.buf);
        else if (r < 0)
                fprintf(stderr, "nsbox: replay: %s\n", strerror(-r));
        return r < 0 ? EXIT_NSBOX : 0;
}

static void replay_destroy(replay *rp)
{
        nsbox_error err = { 0 };
        json_t *r2 = NULL;
        const char *c = NULL;
        if (rp->sid && *rp->sid && nsbox_client_call(&rp->cl, "destroy", json_pack("{ss}", "sandbox", rp->sid), NULL, NULL, &r2, &c, &err) < 0)
                nsbox_error_clear(&err);
        json_decref(r2);
}

/* One knowlyr step run and judged: 1 match, 0 not, negative when the replay itself failed. */
static int knowlyr_step(replay *rp, const nsbox_knowlyr_step *st, size_t i, json_t *report, bool json)
{
        nsbox_error err = { 0 };
        json_t *res = NULL;
        const char *c = NULL;
        if (nsbox_client_call(&rp->cl, "call", json_pack("{ss ss sO}", "sandbox", rp->sid, "tool", st->tool, "params", st->params), NULL,
                              NULL, &res, &c, &err) < 0) {
                if (!c) {
                        fprintf(stderr, "nsbox: replay: step %zu: %s\n", i + 1, err.msg ? err.msg : "the daemon went away");
                        nsbox_error_clear(&err);
                        return -EIO;
                }
                nsbox_error_clear(&err);
        }
        _cleanup_sb_ strbuf why;
        sb_init(&why, 4096);
        bool success = false;
        int m = nsbox_knowlyr_judge(st, res, c, &success, &why);
        size_t n = 0;
        _cleanup_free_ char *out = m < 0 ? NULL : nsbox_knowlyr_output(st->tool, c ? NULL : res, &n);
        json_decref(res);
        if (m < 0 || !out) {
                fprintf(stderr, "nsbox: replay: out of memory\n");
                return -ENOMEM;
        }
        if (!json)
                printf("step %zu %s: %s%s%s\n", i + 1, st->tool, m == 1 ? "match" : "MISMATCH", m == 1 ? "" : ": ",
                       m == 1 ? "" : why.buf ? why.buf : "");
        json_t *r = json_pack("{sI ss sb sb ss? ss%}", "step", (json_int_t)(i + 1), "tool", st->tool, "success", success, "match", m == 1,
                              "why", m == 1 ? NULL : why.buf ? why.buf : "", "output", out, n);
        if (!r || json_object_set_new(r, "expected_output", st->expected ? json_stringn(st->expected, st->expected_len) : json_null()) < 0 ||
            json_array_append_new(report, r) < 0) {
                fprintf(stderr, "nsbox: replay: out of memory\n");
                return -ENOMEM;
        }
        return m;
}

/* A knowlyr trajectory: a sandbox made from the command line's options (the document has none),
 * each step through the tool registry, judged with knowlyr's success semantics. */
static int replay_knowlyr(const char *file, const nsbox_run_options *o, const nsbox_knowlyr_traj *t)
{
        json_t *cp = NULL;
        if (nsbox_cli_create_params("replay", o, &cp) < 0)
                return EXIT_NSBOX;
        replay rp = { .cl = { .fd = -1 } };
        json_t *res = NULL;
        int status = nsbox_cli_call("replay", &rp.cl, "create", cp, NULL, NULL, &res, EXIT_NSBOX);
        _cleanup_free_ char *sid = status == 0 ? strdup(json_string_value(json_object_get(res, "id")) ?: "") : NULL;
        json_decref(res);
        rp.sid = sid;
        size_t matched = 0, succeeded = 0, first = 0;
        json_t *report = json_array();
        for (size_t i = 0; status == 0 && i < t->n_steps; i++) {
                int m = knowlyr_step(&rp, &t->steps[i], i, report, o->json);
                if (m < 0) {
                        status = EXIT_NSBOX;
                        break;
                }
                succeeded += json_is_true(json_object_get(json_array_get(report, i), "success")); /* knowlyr_step added it */
                matched += m == 1;
                if (m != 1 && !first)
                        first = i + 1;
        }
        replay_destroy(&rp);
        nsbox_client_close(&rp.cl);
        if (status == 0) {
                if (o->json) {
                        json_t *doc = json_pack("{ss ss sI sI sI sI so sO}", "trajectory", file, "format", "knowlyr", "steps", (json_int_t)t->n_steps,
                                              "matched", (json_int_t)matched, "mismatched", (json_int_t)(t->n_steps - matched), "succeeded",
                                              (json_int_t)succeeded, "first_divergent_step", first ? json_integer((json_int_t)first) : json_null(),
                                              "results", report);
                        nsbox_cli_print_json(stdout, doc);
                        json_decref(doc);
                } else if (first) {
                        printf("replay: %zu step%s, %zu matched, %zu diverged (%zu failed); first divergent step: %zu (%s)\n", t->n_steps,
                               t->n_steps == 1 ? "" : "s", matched, t->n_steps - matched, t->n_steps - succeeded, first, t->steps[first - 1].tool);
                } else {
                        printf("replay: %zu step%s, all matched: no divergence\n", t->n_steps, t->n_steps == 1 ? "" : "s");
                }
                status = first ? EXIT_FAILED : 0;
        }
        json_decref(report);
        return status;
}

int nsbox_cmd_replay(int argc, char **argv)
{
        for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
                if (is_help(argv[i])) {
                        fputs(usage_replay, stdout);
                        return 0;
                }
        nsbox_error err = { 0 };
        nsbox_run_options o;
        if (nsbox_run_options_parse(argc, argv, &o, &err) < 0) {
                fprintf(stderr, "nsbox: %s\n", err.msg); /* it names the subcommand already */
                nsbox_error_clear(&err);
                nsbox_run_options_release(&o);
                return EXIT_NSBOX;
        }
        const char *file = o.argv[0];
        bool json = o.json;
        /* knowlyr's JSON document, told by its shape; else nsbox's own JSON lines */
        nsbox_knowlyr_traj kt = { 0 };
        int kr = nsbox_knowlyr_load(file, &kt, &err);
        if (kr != 0) {
                int st = kr < 0 ? EXIT_NSBOX : replay_knowlyr(file, &o, &kt);
                if (kr < 0)
                        fprintf(stderr, "nsbox: replay: %s\n", err.msg);
                nsbox_error_clear(&err);
                nsbox_knowlyr_release(&kt);
                nsbox_run_options_release(&o);
                return st;
        }
        nsbox_trajectory t = { 0 };
        if (nsbox_traj_load(file, &t, &err) < 0) {
                fprintf(stderr, "nsbox: replay: %s\n", err.msg);
                nsbox_error_clear(&err);
                nsbox_run_options_release(&o);
                return EXIT_NSBOX;
        }
        json_t *cp = NULL;
        int st0 = replay_create_params(&o, t.create, &cp);
        nsbox_run_options_release(&o);
        if (st0) {
                nsbox_traj_release(&t);
                return st0;
        }
        replay rp = { .cl = { .fd = -1 }, .names = json_object() };
        json_t *res = NULL;
        int status = nsbox_cli_call("replay", &rp.cl, "create", cp, NULL, NULL, &res, EXIT_NSBOX);
        _cleanup_free_ char *sid = status == 0 ? strdup(json_string_value(json_object_get(res, "id")) ?: "") : NULL;
        json_decref(res);
        rp.sid = sid;
        size_t matched = 0, mismatched = 0;
        const nsbox_traj_step *first = NULL;
        json_t *report = json_array();
        for (size_t i = 0; status == 0 && i < t.n_steps; i++) {
                const nsbox_traj_step *st = &t.steps[i];
                json_t *result = NULL;
                char code[64];
                if (replay_step(&rp, st, &result, code, sizeof(code), &err) < 0) {
                        fprintf(stderr, "nsbox: replay: step %" PRIu64 ": %s\n", st->step, err.msg ? err.msg : "the daemon went away");
                        nsbox_error_clear(&err);
                        status = EXIT_NSBOX;
                        break;
                }
                strbuf why;
                sb_init(&why, 4096);
                int m = nsbox_traj_compare(st, result, code[0] ? code : NULL, &why);
                const char *what = !strcmp(st->op, "call") ? st->tool : st->op;
                if (m == 1) {
                        matched++;
                } else {
                        mismatched++;
                        if (!first)
                                first = st;
                }
                if (!json)
                        printf("step %" PRIu64 " %s: %s%s%s\n", st->step, what, m == 1 ? "match" : "MISMATCH", m == 1 ? "" : ": ",
                               m == 1 ? "" : why.buf ? why.buf : "");
                json_array_append_new(report, json_pack("{sI ss ss sb ss?}", "step", (json_int_t)st->step, "op", st->op, "tool", what, "match",
                                                        m == 1, "why", m == 1 ? NULL : why.buf ? why.buf : ""));
                sb_release(&why);
                json_decref(result);
        }
        if (sid && *sid) {
                json_t *r2 = NULL;
                const char *c = NULL;
                if (nsbox_client_call(&rp.cl, "destroy", json_pack("{ss}", "sandbox", sid), NULL, NULL, &r2, &c, &err) < 0)
                        nsbox_error_clear(&err);
                json_decref(r2);
        }
        /* the snapshots the replay took are its own: gone with it */
        const char *k;
        json_t *v;
        json_object_foreach(rp.names, k, v) {
                json_t *r2 = NULL;
                const char *c = NULL;
                if (nsbox_client_call(&rp.cl, "snapshot_delete", json_pack("{sO}", "name", v), NULL, NULL, &r2, &c, &err) < 0)
                        nsbox_error_clear(&err);
                json_decref(r2);
        }
        nsbox_client_close(&rp.cl);
        if (status == 0) {
                if (json) {
                        json_t *doc = json_pack("{ss sI sI sI so so}", "trajectory", file, "steps", (json_int_t)t.n_steps, "matched",
                                              (json_int_t)matched, "mismatched", (json_int_t)mismatched, "first_divergent_step",
                                              first ? json_integer((json_int_t)first->step) : json_null(), "results", report);
                        report = NULL;
                        nsbox_cli_print_json(stdout, doc);
                        json_decref(doc);
                } else if (first) {
                        printf("replay: %zu step%s, %zu matched, %zu diverged; first divergent step: %" PRIu64 " (%s)\n", t.n_steps,
                               t.n_steps == 1 ? "" : "s", matched,
                               mismatched, first->step, !strcmp(first->op, "call") ? first->tool : first->op);
                } else {
                        printf("replay: %zu step%s, all matched: no divergence\n", t.n_steps, t.n_steps == 1 ? "" : "s");
                }
                status = first ? EXIT_FAILED : 0;
        }
        json_decref(report);
        json_decref(rp.names);
        nsbox_traj_release(&t);
        return status;
}
