/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox exec (cli_session.h): a command in a sandbox, its output streamed, our stdin forwarded
 * with -i; and the same stream for cp -r's tar (nsbox_cli_exec_stream). */
#include "cli_session.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base64.h"
#include "client.h"
#include "params.h"
#include "util.h"

#define usage_error nsbox_cli_usage_error
#define call_once nsbox_cli_call

static const char usage_exec[] =
        "usage: nsbox exec [OPTIONS] ID [--] CMD [ARG...]\n"
        "\n"
        "Run CMD in sandbox ID, its output streamed to ours; the exit status is CMD's (128+N when\n"
        "killed by signal N, 124 on timeout, 126/127 when it cannot be run, 125 if nsbox failed).\n"
        "Options go before ID (as docker's): what follows ID is the command; one that starts\n"
        "with '-' is refused unless after --.\n"
        "  --timeout SECONDS      kill CMD's process group after SECONDS\n"
        "  -w, --workdir DIR      working directory (default: the sandbox's workdir; --cwd DIR too)\n"
        "  -e, --env K=V | K      set K for CMD, or pass the caller's K through (repeatable)\n"
        "  --env-file FILE        K=V (or K) lines, # comments and blank lines, as docker's\n"
        "  -d, --detach           start CMD in the background, print its pid (and tag) and return;\n"
        "                         it runs on after nsbox exits (see nsbox logs, nsbox attach)\n"
        "  -i, --interactive      forward our standard input to CMD's (default: /dev/null)\n"
        "  -t, --tty              run CMD on a terminal (a pty of the sandbox's) of our window's size;\n"
        "                         its output is one stream.  -it: our terminal raw, keys and window\n"
        "                         size forwarded; Ctrl-P Ctrl-Q detaches and leaves CMD running\n"
        "  --tag TAG              name the process (1-64 of A-Z a-z 0-9 . _ -), unique among the\n"
        "                         sandbox's running processes\n"
        "  --json                 print the result object on stderr afterwards\n";

void nsbox_cli_output_event(json_t *params, void *ud)
{
        (void)ud;
        const char *ev = json_string_value(json_object_get(params, "event"));
        json_t *data = json_object_get(params, "data_b64");
        if (!ev || !json_is_string(data))
                return;
        strbuf sb;
        sb_init(&sb, 0);
        if (b64_decode(json_string_value(data), json_string_length(data), &sb) == 0 && sb.len)
                write_full(strcmp(ev, "stderr") ? 1 : 2, sb.buf, sb.len);
        sb_release(&sb);
}

/* exec -i: our stdin goes to the command's, as process_write_stdin calls on a second
 * connection (the first carries the streamed output), from a thread started by the "started"
 * event.  A command that stops reading ends the forwarding quietly. */
#define STDIN_CHUNK (256u << 10)

typedef struct stdin_fwd {
        const char *sandbox;
        json_int_t pid;
        pthread_t thread;
        bool started;
        int fd;                  /* what is forwarded: 0, or cp -r's tar */
        uint64_t max, sent;      /* cp -r: at most max bytes (0: no bound) */
        bool over;               /* more than max came: stdin was closed early */
        nsbox_client_event_fn out; /* cp -r: stdout chunks go here, not to our stdout */
        void *ud;
} stdin_fwd;

int nsbox_cli_quiet_call(nsbox_client *c, const char *sandbox, const char *tool, json_t *tparams, const char **code)
{
        json_t *params = json_pack("{ss ss so}", "sandbox", sandbox, "tool", tool, "params", tparams);
        json_t *res = NULL;
        nsbox_error err = { 0 };
        *code = NULL;
        int r = params ? nsbox_client_call(c, "call", params, NULL, NULL, &res, code, &err) : -ENOMEM;
        json_decref(res);
        nsbox_error_clear(&err);
        return r;
}

/* What stdin has now, up to STDIN_CHUNK, blocking only for the first bytes: 0 at end of file. */
static ssize_t read_some(int fd, char *buf)
{
        size_t have = 0;
        for (;;) {
                ssize_t n = read(fd, buf + have, STDIN_CHUNK - have);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return have ? (ssize_t)have : n;
                have += (size_t)n;
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (have == STDIN_CHUNK || poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLIN | POLLHUP)))
                        return (ssize_t)have;
        }
}

static void *fwd_main(void *ud)
{
        stdin_fwd *f = ud;
        nsbox_client c = { .fd = -1 };
        nsbox_error err = { 0 };
        const char *code;
        char *buf = malloc(STDIN_CHUNK), *enc = malloc(b64_encoded_len(STDIN_CHUNK) + 1);
        if (!buf || !enc || nsbox_client_connect(false, &c, &err) < 0)
                goto out;
        ssize_t n;
        while ((n = read_some(f->fd, buf)) > 0) {
                f->sent += (uint64_t)n;
                if (f->max && f->sent > f->max) {
                        f->over = true; /* the command sees a truncated stream and fails */
                        break;
                }
                b64_encode(buf, (size_t)n, enc);
                /* too_large: the command has not read what is queued yet; anything else (its
                 * stdin closed, it ended) means nothing more is wanted */
                while (nsbox_cli_quiet_call(&c, f->sandbox, "process_write_stdin", json_pack("{sI ss}", "pid", f->pid, "data_b64", enc), &code) < 0)
                        if (!code || strcmp(code, "too_large") || usleep(10000) < 0)
                                goto out;
        }
        nsbox_cli_quiet_call(&c, f->sandbox, "process_close_stdin", json_pack("{sI}", "pid", f->pid), &code);
out:
        nsbox_error_clear(&err);
        nsbox_client_close(&c);
        free(buf);
        free(enc);
        return NULL;
}

static void exec_event(json_t *params, void *ud)
{
        stdin_fwd *f = ud;
        const char *ev = json_string_value(json_object_get(params, "event"));
        if (f && !f->started && ev && !strcmp(ev, "started")) {
                f->pid = json_integer_value(json_object_get(params, "pid"));
                f->started = f->fd >= 0 && f->pid > 0 && pthread_create(&f->thread, NULL, fwd_main, f) == 0;
                if (f->started && f->fd == 0)
                        pthread_detach(f->thread); /* it may sit in read(2) after the command ended */
        }
        if (f && f->out && ev && !strcmp(ev, "stdout"))
                f->out(params, f->ud);
        else
                nsbox_cli_output_event(params, NULL);
}

int nsbox_cli_exec_stream(const char *name, nsbox_client *cl, const char *id, json_t *cmd, int in_fd, uint64_t in_max, bool *ret_over,
                          nsbox_client_event_fn out, void *ud, int *ret_code)
{
        json_t *tparams = json_pack("{so}", "cmd", cmd);
        if (in_fd >= 0)
                json_object_set_new(tparams, "stdin_open", json_true());
        json_t *params = json_pack("{ss ss so sb}", "sandbox", id, "tool", "exec", "params", tparams, "stream", 1);
        stdin_fwd f = { .sandbox = id, .fd = in_fd, .max = in_max, .out = out, .ud = ud };
        json_t *res = NULL;
        int status = call_once(name, cl, "call", params, exec_event, &f, &res, EXIT_NSBOX);
        if (f.started)
                pthread_join(f.thread, NULL);
        if (ret_over)
                *ret_over = f.over;
        json_t *code = json_object_get(res, "exit_code");
        *ret_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
        json_decref(res);
        return status;
}

/* exec -t's pty param: our terminal's size (stdout's, else stdin's), or 80x24 */
static json_t *tty_size(void)
{
        struct winsize ws;
        for (int fd = 1; fd >= 0; fd--)
                if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row)
                        return json_pack("{si si}", "cols", ws.ws_col > 1000 ? 1000 : ws.ws_col, "rows", ws.ws_row > 1000 ? 1000 : ws.ws_row);
        return json_pack("{si si}", "cols", 80, "rows", 24);
}

/* -e K=V, or -e K: the caller's K, as nsbox run passes it (nothing when it has none) */
static int exec_env(json_t *env, const char *kv)
{
        const char *eq = strchr(kv, '=');
        if (eq == kv || !kv[0])
                return usage_error("exec", "-e '%s': expected K=V or K", kv);
        if (!eq) {
                const char *v = getenv(kv);
                return v ? json_object_set_new(env, kv, json_string(v)) < 0 ? EXIT_NSBOX : 0 : 0;
        }
        _cleanup_free_ char *k = strndup(kv, (size_t)(eq - kv));
        return k && json_object_set_new(env, k, json_string(eq + 1)) == 0 ? 0 : EXIT_NSBOX;
}

static int exec_env_file(json_t *env, const char *path)
{
        nsbox_error err = { 0 };
        _cleanup_strv_ char **lines = NULL;
        if (nsbox_env_file_read(path, &lines, &err) < 0) {
                int st = usage_error("exec", "%s", err.msg ? err.msg : "--env-file: out of memory");
                nsbox_error_clear(&err);
                return st;
        }
        for (char **l = lines; l && *l; l++) {
                int st = exec_env(env, *l);
                if (st)
                        return st;
        }
        return 0;
}

int nsbox_cmd_exec(int argc, char **argv)
{
        enum { OPT_TIMEOUT = 0x100, OPT_CWD, OPT_JSON, OPT_TAG, OPT_ENV_FILE };
        static const struct option opts[] = {
                { "timeout", required_argument, NULL, OPT_TIMEOUT }, { "cwd", required_argument, NULL, OPT_CWD },
                { "workdir", required_argument, NULL, 'w' },         { "env-file", required_argument, NULL, OPT_ENV_FILE },
                { "env", required_argument, NULL, 'e' },             { "json", no_argument, NULL, OPT_JSON },
                { "detach", no_argument, NULL, 'd' },                { "tag", required_argument, NULL, OPT_TAG },
                { "interactive", no_argument, NULL, 'i' },           { "help", no_argument, NULL, 'h' },
                { "tty", no_argument, NULL, 't' },
                {},
        };
        _cleanup_(json_decrefp) json_t *env = json_object();
        const char *cwd = NULL, *tag = NULL;
        uint64_t timeout_ms = 0;
        bool json = false, detach = false, interactive = false, tty = false;
        int c, st;
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+:de:hitw:", opts, NULL)) != -1) {
                switch (c) {
                case 'd': detach = true; break;
                case 'i': interactive = true; break;
                case 't': tty = true; break;
                case OPT_TAG: tag = optarg; break;
                case OPT_TIMEOUT:
                        if (parse_duration_ms(optarg, &timeout_ms) < 0)
                                return usage_error("exec", "--timeout '%s': expected seconds", optarg);
                        break;
                case 'w':
                case OPT_CWD: cwd = optarg; break;
                case OPT_JSON: json = true; break;
                case 'e':
                        if ((st = exec_env(env, optarg)))
                                return st;
                        break;
                case OPT_ENV_FILE:
                        if ((st = exec_env_file(env, optarg)))
                                return st;
                        break;
                case 'h': fputs(usage_exec, stdout); return 0;
                case ':': return usage_error("exec", "option '%s' needs a value", argv[optind - 1]);
                default:
                        if (optopt && optopt < 0x100)
                                return usage_error("exec", "unknown option '-%c'", optopt);
                        return nsbox_cli_unknown_option("exec", argv[optind - 1]);
                }
        }
        if (argc - optind < 2 || (interactive && detach))
                return usage_error("exec", interactive && detach ? "-i and -d do not go together" : "expected a sandbox ID and a command");
        const char *id = argv[optind++];
        /* docker's rule: options before the ID, the command after it; an option after the ID
         * would otherwise run as the command (127) */
        if (argv[optind][0] == '-' && strcmp(argv[optind], "--")) {
                _cleanup_free_ char *safe = nsbox_escape_controls(argv[optind]);
                return usage_error("exec", "'%s' after the sandbox ID: options go before the ID (nsbox exec [OPTIONS] ID [--] CMD)",
                                   safe ? safe : "?");
        }
        if (!strcmp(argv[optind], "--"))
                optind++;
        if (optind >= argc)
                return usage_error("exec", "no command given");
        json_t *cmd = json_array();
        for (int i = optind; i < argc; i++)
                json_array_append_new(cmd, json_string(argv[i]));
        json_t *tparams = json_pack("{so sO}", "cmd", cmd, "env", env);
        if (cwd)
                json_object_set_new(tparams, "cwd", json_string(cwd));
        if (timeout_ms)
                json_object_set_new(tparams, "timeout", json_real((double)timeout_ms / 1000.0));
        if (tag)
                json_object_set_new(tparams, "tag", json_string(tag));
        if (detach)
                json_object_set_new(tparams, "detach", json_true());
        if (interactive && tty) {
                if (json)
                        fprintf(stderr, "nsbox: exec: --json is ignored with -it\n");
                return nsbox_cli_exec_tty(id, tparams);
        }
        if (tty) /* the size of our window, when there is one */
                json_object_set_new(tparams, "pty", tty_size());
        if (interactive)
                json_object_set_new(tparams, "stdin_open", json_true());
        json_t *params = json_pack("{ss ss so sb}", "sandbox", id, "tool", "exec", "params", tparams, "stream", !detach);
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        static stdin_fwd fwd; /* the thread may outlive this call */
        fwd.sandbox = id;
        fwd.fd = 0;
        int status = call_once("exec", &cl, "call", params, exec_event, interactive ? &fwd : NULL, &res, EXIT_NSBOX);
        nsbox_client_close(&cl);
        if (status)
                return status;
        if (detach && json_is_true(json_object_get(res, "background"))) {
                /* the pid, and the tag when there is one: what nsbox logs and attach take */
                const char *t = json_string_value(json_object_get(res, "tag"));
                printf("%" JSON_INTEGER_FORMAT "%s%s\n", json_integer_value(json_object_get(res, "pid")), t ? "\t" : "", t ? t : "");
                json_decref(res);
                return 0;
        }
        const char *err_text = detach ? json_string_value(json_object_get(res, "stderr")) : NULL;
        if (err_text) /* it could not start: why, as a streamed exec shows it */
                fputs(err_text, stderr);
        if (json) {
                char *text = nsbox_cli_dumps(res, JSON_COMPACT);
                if (text)
                        fprintf(stderr, "%s\n", text);
                free(text);
        }
        json_t *code = json_object_get(res, "exit_code");
        status = json_is_integer(code) && json_integer_value(code) >= 0 && json_integer_value(code) <= 255 ? (int)json_integer_value(code)
                                                                                                         : EXIT_NSBOX;
        json_decref(res);
        return status;
}

