/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox logs and attach (cli_session.h): a background process's recent output, and with
 * --follow its live output and exit status, through one process_connect call; and nsbox exec
 * -it, which is a detached pty command attached to. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base64.h"
#include "cli_session.h"
#include "client.h"
#include "util.h"

static const char usage_logs[] =
        "usage: nsbox logs [-f] ID PID|TAG\n"
        "\n"
        "Print the recent output (the last 64 KiB of stdout and of stderr) of a background process\n"
        "of sandbox ID, started with nsbox exec -d, named by its pid or its tag.  With -f, then its\n"
        "output as it comes until it exits.  The exit status is the process's once it has ended\n"
        "(0 while it runs), 125 when there is no such process or nsbox failed.\n"
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
                default: return nsbox_cli_unknown_option("logs", argv[optind - 1]);
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

/* ---- exec -it: a pty, our terminal raw ------------------------------------------------------ */

/* The command starts detached (so that the detach keys can leave it running) and is followed by
 * a process_connect call; our stdin goes to it from one thread, SIGWINCH and the signals that end
 * us are handled in another, each on a connection of its own.  Ctrl-P Ctrl-Q detaches, as in
 * docker. */
#define TTY_CHUNK 4096
#define KEY_CTRL_P 0x10
#define KEY_CTRL_Q 0x11

static struct termios tty_saved;
static volatile sig_atomic_t tty_raw;

/* async-signal-safe: on every way out, our terminal as it was */
static void tty_restore(void)
{
        if (tty_raw) {
                tcsetattr(0, TCSADRAIN, &tty_saved);
                tty_raw = 0;
        }
}

typedef struct tty_session {
        const char *sandbox, *tag;
        json_int_t pid;
        sigset_t sigs;
} tty_session;

static int tty_call(nsbox_client *c, const tty_session *s, const char *tool, json_t *tparams, const char **code)
{
        json_object_set_new(tparams, "pid", json_integer(s->pid));
        return nsbox_cli_quiet_call(c, s->sandbox, tool, tparams, code);
}

static _Noreturn void tty_detach(const tty_session *s)
{
        tty_restore();
        fprintf(stderr, "\nnsbox: detached; process %lld runs on (nsbox attach %s %s)\n", (long long)s->pid, s->sandbox,
                s->tag ? s->tag : "PID");
        _exit(0);
}

/* Our keys to the command's pty, Ctrl-P held back until the next key says whether it detaches. */
static void *tty_input(void *ud)
{
        const tty_session *s = ud;
        nsbox_client c = { .fd = -1 };
        nsbox_error err = { 0 };
        const char *code;
        unsigned char in[TTY_CHUNK], out[TTY_CHUNK + 1];
        char enc[((TTY_CHUNK + 3) / 3) * 4 + 8];
        bool held = false;
        if (nsbox_client_connect(false, &c, &err) < 0)
                goto done;
        for (;;) {
                ssize_t n = read(0, in, sizeof(in));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break; /* our terminal went: SIGHUP follows */
                size_t m = 0;
                bool detach = false;
                for (ssize_t i = 0; i < n && !detach; i++) {
                        if ((detach = held && in[i] == KEY_CTRL_Q))
                                break;
                        if (held)
                                out[m++] = KEY_CTRL_P;
                        held = in[i] == KEY_CTRL_P;
                        if (!held)
                                out[m++] = in[i];
                }
                b64_encode(out, m, enc); /* the keys before the detach keys too */
                while (m && tty_call(&c, s, "process_write_stdin", json_pack("{ss}", "data_b64", enc), &code) < 0)
                        if (!code || strcmp(code, "too_large") || usleep(10000) < 0)
                                goto done;
                if (detach)
                        tty_detach(s);
        }
done:
        nsbox_error_clear(&err);
        nsbox_client_close(&c);
        return NULL;
}

/* SIGWINCH: the pty follows our window; SIGHUP, SIGTERM, SIGINT, SIGQUIT: the command is
 * signalled (HUP, or KILL as a foreground exec is when its caller goes) and we exit. */
static void *tty_signals(void *ud)
{
        const tty_session *s = ud;
        nsbox_client c = { .fd = -1 };
        nsbox_error err = { 0 };
        const char *code;
        bool connected = nsbox_client_connect(false, &c, &err) == 0;
        for (;;) {
                int sig;
                if (sigwait(&s->sigs, &sig) != 0)
                        continue;
                struct winsize ws;
                if (sig == SIGWINCH) {
                        if (connected && ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row)
                                tty_call(&c, s, "process_resize",
                                         json_pack("{si si}", "cols", ws.ws_col > 1000 ? 1000 : ws.ws_col, "rows",
                                                   ws.ws_row > 1000 ? 1000 : ws.ws_row),
                                         &code);
                        continue;
                }
                if (connected)
                        tty_call(&c, s, "process_kill", json_pack("{ss}", "signal", sig == SIGHUP ? "HUP" : "KILL"), &code);
                tty_restore();
                _exit(128 + sig);
        }
        return NULL;
}

/* The result's exit status: its exit_code, or 125. */
static int exit_status_of(json_t *res)
{
        json_t *code = json_object_get(res, "exit_code");
        return json_is_integer(code) && json_integer_value(code) >= 0 && json_integer_value(code) <= 255 ? (int)json_integer_value(code)
                                                                                                         : EXIT_NSBOX;
}

int nsbox_cli_exec_tty(const char *id, json_t *tparams)
{
        static tty_session s; /* the threads may outlive this call */
        if (!isatty(0)) {
                json_decref(tparams);
                return nsbox_cli_usage_error("exec", "-it needs a terminal on standard input (-i alone forwards a pipe)");
        }
        struct winsize ws = { .ws_col = 80, .ws_row = 24 };
        if (ioctl(0, TIOCGWINSZ, &ws) < 0 || !ws.ws_col || !ws.ws_row)
                ws = (struct winsize){ .ws_col = 80, .ws_row = 24 };
        json_object_set_new(tparams, "pty",
                            json_pack("{si si}", "cols", ws.ws_col > 1000 ? 1000 : ws.ws_col, "rows", ws.ws_row > 1000 ? 1000 : ws.ws_row));
        json_object_set_new(tparams, "detach", json_true());
        s.sandbox = id;
        s.tag = json_string_value(json_object_get(tparams, "tag")) ? strdup(json_string_value(json_object_get(tparams, "tag"))) : NULL;
        nsbox_client cl = { .fd = -1 };
        json_t *res = NULL;
        int status = nsbox_cli_call("exec", &cl, "call", json_pack("{ss ss so}", "sandbox", id, "tool", "exec", "params", tparams), NULL,
                                    NULL, &res, EXIT_NSBOX);
        if (status) {
                nsbox_client_close(&cl);
                return status;
        }
        if (!json_is_true(json_object_get(res, "background"))) { /* it could not start: why, and 126/127 */
                const char *t = json_string_value(json_object_get(res, "stderr"));
                if (t)
                        fputs(t, stderr);
                status = exit_status_of(res);
                json_decref(res);
                nsbox_client_close(&cl);
                return status;
        }
        s.pid = json_integer_value(json_object_get(res, "pid"));
        json_decref(res);
        res = NULL;
        sigemptyset(&s.sigs);
        int sigs[] = { SIGWINCH, SIGHUP, SIGTERM, SIGINT, SIGQUIT };
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
                sigaddset(&s.sigs, sigs[i]);
        pthread_sigmask(SIG_BLOCK, &s.sigs, NULL); /* before the threads: only sigwait takes them */
        if (tcgetattr(0, &tty_saved) == 0) {
                struct termios raw = tty_saved;
                cfmakeraw(&raw);
                tty_raw = tcsetattr(0, TCSADRAIN, &raw) == 0;
                atexit(tty_restore);
        }
        pthread_t t;
        if (pthread_create(&t, NULL, tty_signals, &s) == 0)
                pthread_detach(t);
        if (pthread_create(&t, NULL, tty_input, &s) == 0)
                pthread_detach(t);
        const char *code = NULL;
        nsbox_error err = { 0 };
        json_t *cp = json_pack("{ss ss s{sI} sb}", "sandbox", id, "tool", "process_connect", "params", "pid", s.pid, "stream", 1);
        int r = nsbox_client_call(&cl, "call", cp, nsbox_cli_output_event, NULL, &res, &code, &err);
        tty_restore();
        if (r < 0) {
                fprintf(stderr, "nsbox: exec: %s\n", err.msg ? err.msg : "failed");
                nsbox_error_clear(&err);
                nsbox_client_close(&cl);
                return EXIT_NSBOX;
        }
        status = exit_status_of(res);
        json_decref(res);
        res = NULL;
        /* ended and reported: nothing is left for process_list */
        nsbox_client_call(&cl, "call", json_pack("{ss ss s{sI}}", "sandbox", id, "tool", "process_wait", "params", "pid", s.pid), NULL, NULL,
                          &res, &code, &err);
        json_decref(res);
        nsbox_error_clear(&err);
        nsbox_client_close(&cl);
        return status;
}
