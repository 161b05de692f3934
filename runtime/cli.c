/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nsbox command: each subcommand parses its options and calls one library function; only
 * here does an error become a message on stderr and an exit status. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>

#include "error.h"
#include "options.h"
#include "policy.h"
#include "run.h"
#include "sandbox.h"
#include "cli_session.h"
#include "image.h"
#include "store.h"

#include "params.h"

static int cmd_run(int argc, char **argv);
static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int unknown_command(const char *cmd);

#ifndef NSBOX_VERSION
#define NSBOX_VERSION "0.1.0"
#endif

static const char usage_main[] =
        "usage: nsbox COMMAND [OPTIONS]\n"
        "\n"
        "Commands:\n"
        "  run [OPTIONS] [--] CMD [ARG...]   run CMD in a new sandbox; exit status is CMD's\n"
        "  create [OPTIONS] [--label K=V]    start a persistent sandbox (served by nsboxd); prints its id\n"
        "  exec [OPTIONS] ID [--] CMD [ARG...]\n"
        "                                    run CMD in sandbox ID, streaming its output; exit status is CMD's\n"
        "  exec -d [--tag TAG] ID [--] CMD   start CMD in the background; prints its pid (and tag)\n"
        "  logs [-f] ID PID|TAG              a background process's recent (-f: and live) output\n"
        "  attach ID PID|TAG                 follow a background process's output; exit status is its\n"
        "  call ID TOOL [JSON]               one tool call (read_file, write_file, grep, git_commit, ...)\n"
        "  cp [-r] SRC DST                   copy a file (-r: a directory) in or out of a sandbox (ID:PATH)\n"
        "  watch [-r] ID PATH                print the changes under directory PATH until Ctrl-C\n"
        "  ls [-q] [--json] [--label K=V] [--state S]\n"
        "                                    list your sandboxes (with these labels, in this state)\n"
        "  inspect ID...                     the sandboxes as JSON, as ls --json has them\n"
        "  set-timeout ID SECONDS [--idle S] the sandbox lives SECONDS more (E2B's setTimeout)\n"
        "  stats [--json]                    nsboxd's sandboxes, pools, acquire latency, memory\n"
        "  api-key create|ls|rm              keys for nsboxd's HTTP API (create prints the key once)\n"
        "  rm [-f] ID... | rm --all [--label K=V]\n"
        "                                    destroy sandboxes (--all: every one of yours)\n"
        "  pause ID... | resume ID...        freeze and thaw sandboxes (cgroup.freeze, else SIGSTOP)\n"
        "  snapshot ID NAME                  capture a sandbox's filesystem as snapshot NAME\n"
        "  snapshot ls | snapshot rm NAME... list and remove snapshots\n"
        "  image import PATH [NAME]          import an OCI layout or docker-archive (image ls|inspect|rm)\n"
        "  reset ID [NAME]                   restart a sandbox on snapshot NAME, or as it was created\n"
        "  replay [--from NAME] FILE         re-run a recorded trajectory, report where it diverges\n"
        "  gc                                remove store layers nothing uses\n"
        "  daemon status|stop|restart        your own nsboxd: its pid, uptime, ...; stop it cleanly\n"
        "  tools [--format json|openai|mcp]  the tool schemas, for an LLM's tool list\n"
        "  mcp [OPTIONS]                     Model Context Protocol server on stdio (Claude Code, ...)\n"
        "  completion bash|zsh|fish          a completion script for the shell\n"
        "  version                           nsbox's version\n"
        "  help [COMMAND]                    this help, or COMMAND's (as nsbox COMMAND --help)\n"
        "\n"
        "  nsbox --help | nsbox --version | nsbox COMMAND --help\n"
        "Exit status: 0; 125 when nsbox refused or failed (a bad option, no such sandbox, ...); the\n"
        "command's own for run, exec, logs and attach; 1 when a tool call (call) or a replay failed.\n"
        "See nsbox(1), nsboxd(8), nsbox-policy(5) and nsbox-protocol(7).\n";

static const char usage_run[] =
        "usage: nsbox run [OPTIONS] [--] CMD [ARG...]\n"
        "\n"
        "Run CMD in a new sandbox: new user, mount, pid, net, ipc, uts and cgroup namespaces, an\n"
        "overlay root discarded at exit, no capabilities, no_new_privs and a seccomp filter.\n"
        "\n"
        "  --policy NAME|FILE     policy to start from (default: default)\n"
        "  --rootfs host|DIR      root: the host's /usr view (default), or DIR as read-only lower layer\n"
        "  -w, --workdir DIR      writable working directory, the command's cwd (default: /workspace)\n"
        "  --bind SRC:DST[:rw]    bind host SRC at DST, read-only unless :rw\n"
        "  --tmpfs DST[:SIZE]     a private tmpfs at DST\n"
        "  -e, --env K=V | K      set K, or pass the caller's K through\n"
        "  --env-file FILE        K=V (or K) lines, # comments and blank lines, as docker's\n"
        "  --hostname NAME        host name inside (default: nsbox)\n"
        "  --timeout SECONDS      kill every process of the sandbox after SECONDS; exit status 124\n"
        "  --disk SIZE            size of the writable layer and /tmp together (default: 1G)\n"
        "  --memory SIZE          memory limit of the whole sandbox (cgroup memory.max; no swap)\n"
        "  --pids N               at most N processes and threads in the sandbox (pids.max)\n"
        "  --cpus F               at most F CPUs' worth of time, e.g. 0.5 (cpu.max)\n"
        "  --limits required|best-effort\n"
        "                         limits that cannot hold refuse the start (the default with\n"
        "                         --memory, --pids or --cpus), or run without, with a warning\n"
        "  --net none|nat         network: loopback only (the default), or outbound NAT (slirp4netns)\n"
        "  --allow SPEC           egress allow-list entry: ADDR[/PREFIX][:PORT[-PORT]] or HOST[:PORT];\n"
        "                         with a list, everything else is refused (needs --net nat)\n"
        "  --publish [127.0.0.1:]HOSTPORT[:PORT]\n"
        "                         forward a host loopback port to PORT inside (needs --net nat)\n"
        "  --from SNAPSHOT        start on a snapshot's filesystem (nsbox snapshot)\n"
        "  --image NAME           start on an imported image (nsbox image); CMD defaults to its own\n"
        "  -t, --tty              when stdin is a terminal: CMD on a terminal of its own (job control),\n"
        "                         ours in raw mode until it ends\n"
        "  -i, --interactive      accepted, for -it as in docker (stdin is always CMD's)\n"
        "  --rm                   accepted, as in docker (the sandbox is always removed at the end)\n"
        "  --json                 print a result object on stderr after the run\n"
        "  -h, --help             this help\n"
        "\n"
        "Exit status: CMD's; 128+N if killed by signal N; 124 on timeout; 125 if nsbox failed;\n"
        "126 if CMD cannot be executed; 127 if CMD is not found.\n";

/* The --json result object, on stderr, for every outcome: a script never has to guess what an
 * exit status meant.  err is set when the command did not run (125, 126, 127). */
static void print_json_result(const nsbox_result *r, const nsbox_error *err)
{
        json_t *o;
        if (err && err->msg) {
                int status = err->exit_status ? err->exit_status : 125;
                const char *reason = status == 127 ? "not_found" : status == 126 ? "not_executable" : "setup_failed";
                o = json_pack("{si sn si ss sb sb sb ss}", "exit_code", -1, "signal", "status", status, "reason", reason,
                              "timed_out", 0, "oom_killed", 0, "pids_limited", 0, "error", err->msg);
        } else {
                const char *reason = r->timed_out      ? "timed_out"
                                     : r->oom_killed   ? "oom_killed"
                                     : r->pids_limited ? "pids_limited"
                                     : r->signal       ? "signaled"
                                                       : "exited";
                o = json_pack("{si si ss sb sb sb sf sf sf sf sI si ss?}", "exit_code", r->exit_code, "signal", r->signal, "reason",
                              reason, "timed_out", r->timed_out, "oom_killed", r->oom_killed, "pids_limited", r->pids_limited,
                              "wall_time_ms", (double)r->wall_us / 1000.0, "cpu_time_ms", (double)(r->user_us + r->sys_us) / 1000.0,
                              "user_time_ms", (double)r->user_us / 1000.0, "system_time_ms", (double)r->sys_us / 1000.0,
                              "peak_memory_bytes", (json_int_t)r->max_rss_bytes, "status", r->status, "cgroup",
                              r->cgroup[0] ? r->cgroup : NULL);
                if (o)
                        nsbox_limits_json(o, &r->limits, r->held);
                if (o && r->warning[0])
                        json_object_set_new(o, "warnings", json_pack("[s]", r->warning));
        }
        char *text = o ? nsbox_cli_dumps(o, JSON_COMPACT) : NULL;
        if (text)
                fprintf(stderr, "%s\n", text);
        free(text);
        json_decref(o);
}

/* The one place an error becomes output: the message, the --json object, the exit status. */
static int fail(nsbox_error *err, bool json)
{
        _cleanup_free_ char *safe = nsbox_escape_controls(err->msg ? err->msg : "failed");
        fprintf(stderr, "nsbox: %s\n", safe ? safe : "failed");
        if (json)
                print_json_result(NULL, err);
        int status = err->exit_status ? err->exit_status : 125;
        nsbox_error_clear(err);
        return status;
}

/* run --from: the snapshot's layers under the writable one, held while the sandbox runs. */
static int run_from(const nsbox_run_options *o, nsbox_policy *p, nsbox_layers *l, nsbox_error *err)
{
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, err);
        if (r == 0)
                r = nsbox_store_acquire_snapshot(&st, o->from, l, err);
        nsbox_store_close(&st);
        if (r == 0)
                r = nsbox_policy_use_layers(p, l, o->rootfs != NULL, err);
        return r;
}

/* run --image: the image's layers and config; its Entrypoint and Cmd when no command is given. */
static int run_image(nsbox_run_options *o, nsbox_policy *p, nsbox_layers *l, char ***argv, nsbox_error *err)
{
        int r = nsbox_image_use(p, o, l, argv, err);
        if (r == 0 && *argv)
                o->argv = *argv;
        return r;
}

/* run -t: our terminal raw while the command has its own (the sandbox's init relays the bytes
 * and the window size); restored when nsbox_run returns, whatever happened. */
static struct termios tty_saved;
static bool tty_raw;

static void tty_restore(void)
{
        if (tty_raw)
                tcsetattr(0, TCSADRAIN, &tty_saved);
        tty_raw = false;
}

static unsigned tty_begin(const nsbox_run_options *o)
{
        if (!o->tty || !isatty(0) || tcgetattr(0, &tty_saved) < 0)
                return 0;
        struct termios raw = tty_saved;
        cfmakeraw(&raw);
        tty_raw = tcsetattr(0, TCSADRAIN, &raw) == 0;
        atexit(tty_restore);
        return NSBOX_RUN_TTY;
}

static int cmd_run(int argc, char **argv)
{
        nsbox_layers layers = NSBOX_LAYERS_INIT;
        nsbox_error err = { 0 };
        char **image_argv = NULL;
        nsbox_run_options o;
        nsbox_policy *p = NULL;
        nsbox_result res;
        int status;
        if (nsbox_run_options_parse(argc, argv, &o, &err) < 0) {
                status = fail(&err, o.json);
                goto out;
        }
        if (o.help) {
                fputs(usage_run, stdout);
                status = 0;
                goto out;
        }
        if (nsbox_run_options_policy(&o, &p, &err) < 0 || (o.from && run_from(&o, p, &layers, &err) < 0) ||
            (o.image && run_image(&o, p, &layers, &image_argv, &err) < 0) ||
            nsbox_policy_check_host(p, &err) < 0) {
                status = fail(&err, o.json);
                goto out;
        }
        unsigned tty = tty_begin(&o);
        int r = nsbox_run(p, o.argv, NSBOX_RUN_RETURN_AT_EXIT | tty, &res, &err);
        tty_restore();
        if (r < 0) {
                status = fail(&err, o.json);
                goto out;
        }
        if (o.json)
                print_json_result(&res, NULL);
        status = res.status;
out:
        nsbox_policy_free(p);
        nsbox_layers_release(&layers);
        nsbox_run_options_release(&o);
        strv_free(image_argv);
        return status;
}

/* A closed standard fd would be reused by the next open(): point it at /dev/null first. */
static void ensure_std_fds(void)
{
        for (int fd = 0; fd <= 2; fd++)
                if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
                        int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
                        if (n >= 0 && n != fd) {
                                dup2(n, fd);
                                close(n);
                        }
                }
}

/* Every command, its options (those of the options table it takes, params.h, and its own) and
 * subcommands: what main dispatches, "did you mean" suggests and nsbox completion prints. */
const nsbox_cli_command nsbox_cli_commands[] = {
        { "run", cmd_run, NSBOX_CMD_RUN, "", NULL },
        { "create", nsbox_cmd_create, NSBOX_CMD_CREATE, "", NULL },
        { "exec", nsbox_cmd_exec, 0, "--timeout -w --workdir --cwd -e --env --env-file -d --detach -i --interactive -t --tty --tag --json", NULL },
        { "logs", nsbox_cmd_logs, 0, "-f --follow", NULL },
        { "attach", nsbox_cmd_attach, 0, "", NULL },
        { "call", nsbox_cmd_call, 0, "", NULL },
        { "cp", nsbox_cmd_cp, 0, "-r -R --recursive --max-size", NULL },
        { "watch", nsbox_cmd_watch, 0, "-r --recursive", NULL },
        { "ls", nsbox_cmd_ls, 0, "-q --quiet --json --label --state", NULL },
        { "inspect", nsbox_cmd_inspect, 0, "", NULL },
        { "set-timeout", nsbox_cmd_set_timeout, 0, "--idle --json", NULL },
        { "stats", nsbox_cmd_stats, 0, "--json", NULL },
        { "api-key", nsbox_cmd_api_key, 0, "--name --uid --json", "create ls rm" },
        { "rm", nsbox_cmd_rm, 0, "-f --force --all --label", NULL },
        { "pause", nsbox_cmd_pause, 0, "--no-memory", NULL },
        { "resume", nsbox_cmd_resume, 0, "--reboot", NULL },
        { "snapshot", nsbox_cmd_snapshot, 0, "--json", "ls rm" },
        { "image", nsbox_cmd_image, 0, "--json", "import ls inspect rm" },
        { "reset", nsbox_cmd_reset, 0, "--json", NULL },
        { "replay", nsbox_cmd_replay, NSBOX_CMD_REPLAY, "", NULL },
        { "gc", nsbox_cmd_gc, 0, "--json", NULL },
        { "daemon", nsbox_cmd_daemon, 0, "--json", "status stop restart" },
        { "tools", nsbox_cmd_tools, 0, "--format", NULL },
        { "mcp", nsbox_cmd_mcp, NSBOX_CMD_MCP, "", NULL },
        { "version", cmd_version, 0, "", NULL },
        { "help", cmd_help, 0, "", NULL },
        { "completion", nsbox_cmd_completion, 0, "", "bash zsh fish" },
};
const size_t nsbox_cli_n_commands = sizeof(nsbox_cli_commands) / sizeof(nsbox_cli_commands[0]);

const nsbox_cli_command *nsbox_cli_command_find(const char *name)
{
        for (size_t i = 0; i < nsbox_cli_n_commands; i++)
                if (!strcmp(name, nsbox_cli_commands[i].name))
                        return &nsbox_cli_commands[i];
        return NULL;
}

static int cmd_version(int argc, char **argv)
{
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                fputs("usage: nsbox version\n\nPrint nsbox's version (as nsbox --version).\n", stdout);
                return 0;
        }
        if (argc > 1)
                return nsbox_cli_usage_error("version", "unexpected argument '%s'", argv[1]);
        printf("nsbox %s\n", NSBOX_VERSION);
        return 0;
}

/* nsbox help CMD: CMD's own --help, so that the two cannot differ */
static int cmd_help(int argc, char **argv)
{
        if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
                fputs(usage_main, stdout);
                return 0;
        }
        if (argc > 2)
                return nsbox_cli_usage_error("help", "expected one COMMAND");
        const nsbox_cli_command *c = nsbox_cli_command_find(argv[1]);
        if (!c)
                return unknown_command(argv[1]);
        char help_flag[] = "--help";
        char *args[] = { argv[1], help_flag, NULL };
        return c->fn(2, args);
}

/* docker's commands that nsbox spells otherwise: a docker user's first guess, named by what it
 * does here rather than by the closest spelling ("start" is not "stats") */
static const char *docker_word(const char *cmd)
{
        static const char *const map[][2] = {
                { "ps", "ls" }, { "stop", "rm or pause" }, { "kill", "rm -f" }, { "start", "resume" },
                { "unpause", "resume" }, { "restart", "reset" }, { "commit", "snapshot" },
                { "images", "image ls" }, { "rmi", "image rm" }, { "load", "image import" },
                { "pull", "image import" }, { "info", "stats or daemon status" },
        };
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
                if (!strcmp(cmd, map[i][0]))
                        return map[i][1];
        return NULL;
}

/* "nsbox exce", "nsbox --versoin": the closest command, or option of nsbox's own */
static int unknown_command(const char *cmd)
{
        static const char *const own[] = { "help", "version" };
        const char *names[64], *near;
        size_t n = 0;
        bool option = cmd[0] == '-';
        for (size_t i = 0; i < nsbox_cli_n_commands && n < 64; i++)
                names[n++] = nsbox_cli_commands[i].name;
        if (option)
                near = cmd[1] == '-' ? nsbox_closest_word(cmd + 2, own, 2) : NULL;
        else if (!(near = docker_word(cmd)))
                near = nsbox_closest_word(cmd, names, n);
        _cleanup_free_ char *safe = nsbox_escape_controls(cmd);
        fprintf(stderr, "nsbox: unknown %s '%s' (%s%s%s%ssee nsbox --help)\n", option ? "option" : "command", safe ? safe : "?",
                near ? "did you mean " : "", near && option ? "--" : "", near ? near : "", near ? "? " : "");
        return 125;
}

int main(int argc, char **argv)
{
        ensure_std_fds();
        if (argc < 2) {
                fputs(usage_main, stderr);
                return 125;
        }
        const char *cmd = argv[1];
        if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
                fputs(usage_main, stdout);
                return 0;
        }
        if (!strcmp(cmd, "--version"))
                return cmd_version(1, argv + 1);
        const nsbox_cli_command *c = nsbox_cli_command_find(cmd);
        if (c)
                return c->fn(argc - 1, argv + 1);
        return unknown_command(cmd);
}
