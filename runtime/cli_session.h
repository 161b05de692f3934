/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nsbox subcommands that are clients of nsboxd, and `nsbox tools`.  Each takes its argv
 * (argv[0] the subcommand) and returns the process exit status. */
#pragma once

int nsbox_cmd_create(int argc, char **argv);
int nsbox_cmd_exec(int argc, char **argv);
int nsbox_cmd_watch(int argc, char **argv);
int nsbox_cmd_call(int argc, char **argv);
int nsbox_cmd_cp(int argc, char **argv);
int nsbox_cmd_ls(int argc, char **argv);
int nsbox_cmd_rm(int argc, char **argv);
int nsbox_cmd_pause(int argc, char **argv);
int nsbox_cmd_resume(int argc, char **argv);
int nsbox_cmd_tools(int argc, char **argv);
/* cli_snapshot.c: snapshot, reset, gc, replay */
int nsbox_cmd_snapshot(int argc, char **argv);
int nsbox_cmd_reset(int argc, char **argv);
int nsbox_cmd_gc(int argc, char **argv);
int nsbox_cmd_replay(int argc, char **argv);
/* cli_image.c: image import|ls|inspect|rm */
int nsbox_cmd_image(int argc, char **argv);

/* cli_service.c: set-timeout, stats, api-key */
int nsbox_cmd_set_timeout(int argc, char **argv);
int nsbox_cmd_stats(int argc, char **argv);
int nsbox_cmd_api_key(int argc, char **argv);

/* Shared by the client commands. */
/* One rule (nsbox(1), EXIT STATUS): 125 when nothing was done, for any reason: a usage error,
 * nsbox failing, or nsboxd saying no (not found, conflict, capacity, bad params); else the
 * status of what ran: exec's command, or 1 for a call that returned an error or a replay that
 * diverged. */
#define EXIT_NSBOX 125
#define EXIT_REFUSED EXIT_NSBOX
#define EXIT_FAILED 1 /* call: the call returned an error; replay: it diverged */
#include <jansson.h>
#include <stdio.h>

#include "client.h"
/* "nsbox: CMD: message (see nsbox CMD --help)"; returns 125. */
int nsbox_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An event callback for nsbox_cli_call: a streamed command's stdout and stderr chunks written
 * to ours (exec, logs, attach). */
void nsbox_cli_output_event(json_t *params, void *ud);
/* Connect when cl is not (starting nsboxd if needed) and make one call; 0, or the exit status to
 * use (refused_status when the daemon said no, 125 when nsbox failed) after printing why. */
int nsbox_cli_call(const char *cmd, nsbox_client *cl, const char *method, json_t *params, nsbox_client_event_fn ev, void *ud,
                   json_t **ret, int refused_status);
void nsbox_cli_print_json(FILE *f, json_t *v);
/* cp of one regular file through a pipe passed to nsboxd (cli_cp_fd.c): in, size bytes of fd to
 * target (written whole or not at all); out, src's first size bytes to fd (0: all of it, as a
 * pseudo file's size says 0; sparse: fd is a file of the full size already, blocks of zeros left
 * as holes).  0 or an exit status, said. */
int nsbox_cp_in_fd(nsbox_client *cl, int fd, uint64_t size, mode_t mode, const char *id, const char *target);
int nsbox_cp_out_fd(nsbox_client *cl, const char *id, const char *src, uint64_t size, int fd, bool sparse, uint64_t *ret_bytes);
/* json_dumps with reals rounded to 3 decimals and no float noise (they are durations) */
char *nsbox_cli_dumps(json_t *v, size_t flags);
/* The params of nsboxd's create for parsed create options (host paths made absolute); 0, or -1
 * after printing why, as "nsbox: CMD: ...". */
struct nsbox_run_options;
int nsbox_cli_create_params(const char *cmd, const struct nsbox_run_options *o, json_t **ret);

/* cp -r's stream: CMD (taken) runs in sandbox id through cl (connected if not), streamed; in_fd (-1: none) is forwarded to its
 * stdin, at most in_max bytes (0: no bound; *ret_over set when more came and stdin was closed
 * early); its stdout events go to out, its stderr to ours.  0 with *ret_code (-1 if none), or
 * the exit status after printing why. */
#include <stdint.h>
int nsbox_cli_exec_stream(const char *name, nsbox_client *cl, const char *id, json_t *cmd, int in_fd, uint64_t in_max, bool *ret_over,
                          nsbox_client_event_fn out, void *ud, int *ret_code);

/* cli_procs.c: logs, attach */
int nsbox_cmd_logs(int argc, char **argv);
int nsbox_cmd_attach(int argc, char **argv);
/* exec -it: exec's params (taken) run on a pty with our terminal raw; the command's status */
int nsbox_cli_exec_tty(const char *id, json_t *tparams);
/* The method "call" of tool on sandbox (takes tparams), its result dropped: 0, or <0 with *code. */
int nsbox_cli_quiet_call(nsbox_client *c, const char *sandbox, const char *tool, json_t *tparams, const char **code);

/* cli.c: the command table */
typedef struct nsbox_cli_command {
        const char *name;
        int (*fn)(int argc, char **argv);
        unsigned params;  /* NSBOX_CMD_*: it takes the options table's flags for that command */
        const char *opts; /* its other options, space-separated (--help is everyone's) */
        const char *subs; /* its subcommands, space-separated, or NULL */
} nsbox_cli_command;
extern const nsbox_cli_command nsbox_cli_commands[];
extern const size_t nsbox_cli_n_commands;
const nsbox_cli_command *nsbox_cli_command_find(const char *name);

/* cli_complete.c: nsbox completion; "did you mean" for a command's options */
int nsbox_cmd_completion(int argc, char **argv);
/* "nsbox: CMD: unknown option 'ARG' (did you mean --X? see nsbox CMD --help)"; returns 125 */
int nsbox_cli_unknown_option(const char *cmd, const char *arg);

int nsbox_cmd_inspect(int argc, char **argv);

/* cli_progress.c: "nsbox: WHAT... [HOW FAR, ]Ns" redrawn on stderr each second (and when how far
 * changes) until stop, then erased; nothing when stderr is not a terminal */
#include <pthread.h>
typedef struct nsbox_cli_progress {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool running, done, changed;
        char what[256];
        char detail[128];
} nsbox_cli_progress;
void nsbox_cli_progress_start(nsbox_cli_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* how far it is, e.g. "objects 12/40 (1.2 MiB)"; nothing when the line is not running */
void nsbox_cli_progress_detail(nsbox_cli_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "812 KiB", "12.3 MiB", "1.5 GiB" */
void nsbox_cli_human_bytes(unsigned long long n, char *buf, size_t size);
/* a create's "progress" event (nsbox-protocol(7)) as the line's detail; ud is the line */
void nsbox_cli_progress_event(json_t *params, void *ud);
void nsbox_cli_progress_stop(nsbox_cli_progress *p); /* NULL: the one running, if any */

/* cli_daemon.c: nsbox daemon status|stop|restart */
int nsbox_cmd_daemon(int argc, char **argv);

/* cli_mcp.c: nsbox mcp */
int nsbox_cmd_mcp(int argc, char **argv);
