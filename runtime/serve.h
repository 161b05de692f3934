/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's serve mode, what its files share (agent.h is its interface): its state, its
 * commands' and requests' types, the epoll keys and the limits more than one file uses.  The
 * calls go one way: agent.c (run mode, requests, the loop) -> agent_code.c (code tools) ->
 * agent_procs.c (commands), and agent_watch.c (watch calls) -> agent_send.c (frames out). */
#pragma once

#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#include "agent.h"
#include "proto.h"
#include "sync.h"
#include "util.h"

#define OUTQ_HIGH (8u << 20)           /* stop reading requests and streamed output above this */
#define EXIT_GRACE_NS (100ull * 1000000) /* a command's pipes may stay open in its leftovers */
#define TAG_MAX 64

typedef struct proc proc;
typedef struct attach attach;

/* A process_connect call attached to a background command: its output goes there as events. */
struct attach {
        attach *next;
        json_int_t call_id;
        bool paused;    /* its reader is slow: live chunks are dropped for it, or held */
        bool hold;      /* while it is paused, the process waits for it (its pipes are not read) */
        bool truncated; /* it missed some of the output */
};

/* epoll data: a process's serial number and which of its fds (0-2), never a pointer, since an
 * event of a batch may refer to a process an earlier event of the same batch freed.  Serial 0
 * is the agent's own: fd 1 the protocol socket, fd 2 the signalfd. */
#define WATCH(serial, i) ((uint64_t)(serial) << 2 | (uint64_t)(i))
#define WATCH_PROTO WATCH(0, 1)
#define WATCH_SIGNAL WATCH(0, 2)

struct proc {
        proc *next;
        json_int_t call_id;   /* the exec request waiting for this result; -1 once answered */
        json_int_t wait_id;   /* a process_wait request waiting, or -1 */
        uint64_t wait_deadline;
        pid_t pid;
        uint64_t serial;
        int fd[3];            /* stdin (write end), stdout, stderr (read ends); -1 when closed */
        uint32_t events[3];   /* what epoll has for each fd now */
        strbuf out, err;
        size_t max_output;
        bool truncated, stream, background, exited, timed_out, close_stdin_when_done;
        bool paused;          /* stream paused by the supervisor: its reader is slow */
        nsbox_queue stdin_q;
        int wstatus;
        struct rusage ru;
        uint64_t start_ns, exit_ns, deadline_ns;
        char *command;        /* for process_list */
        json_t *result;       /* background: kept once finished, until waited for */
        char tag[TAG_MAX + 1]; /* "" when none */
        bool detached;
        bool doomed;    /* killed by a reboot, not reaped yet: not running, its tag free for the next one */
        time_t started_at;    /* wall clock, for process_list */
        char *tail[3];        /* background: the last TAIL_MAX bytes of stdout [1] and stderr [2] */
        size_t tail_len[3];
        bool tail_lost;       /* the tails no longer hold the output from its start */
        attach *attached;     /* process_connect calls waiting for its output and end */
        bool pty;             /* a terminal: fd[1] is its master, fd[0] a dup of it, fd[2] unused */
};

typedef struct agent {
        const nsbox_agent_config *c;
        int epfd;
        uint32_t proto_events;
        uint64_t next_serial;
        nsbox_frame_reader rd;
        nsbox_queue outq;
        bool proto_eof;
        proc *procs;
        unsigned n_procs;
        struct watch_call *watches; /* watch calls streaming (agent_watch.c) */
        unsigned n_watches;
        struct code_call *codes;    /* code tools' calls to the code interpreter (agent_code.c) */
        struct xfer *xfers;         /* write_file and read_file through a pipe (agent_xfer.c) */
        unsigned n_codes;
        tool_ctx tctx;
} agent;

typedef struct request {
        json_int_t id;
        const char *tool; /* canonical */
        tool_in in;
} request;

/* epoll key: WATCH(serial, 3), a watch call's inotify fd or a code call's socket (procs use 0-2);
 * serials are unique across all three */
#define WATCH_INOTIFY 3

/* agent_send.c */
void agent_exit(agent *a, int status);
void send_frame(agent *a, json_t *msg, const void *payload, size_t len);
void send_error(agent *a, json_t *id, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void send_tool_error(agent *a, json_int_t id, const tool_error *e);
void send_result(agent *a, json_int_t id, json_t *result, const void *payload, size_t len);

/* agent_procs.c: spawning, for both modes */
void usage_from(const struct rusage *ru, nsbox_sync_usage *u);
void spawn_attr_init(posix_spawnattr_t *attr);
int exec_failure_status(int e);
void exec_failure_message(char *buf, size_t size, const char *cmd, int e);
bool is_clean_string(json_t *v);
void set_nonblock(int fd);

/* agent_procs.c: serve mode's commands */
void proc_read(agent *a, proc *p, int i);
void proc_write_stdin(agent *a, proc *p);
bool proc_held(const agent *a, const proc *p);
void proc_maybe_finish(agent *a, proc *p, uint64_t now);
void reap(agent *a);
void handle_exec(agent *a, const request *rq);
void handle_process(agent *a, const request *rq);
/* agent_code.c's server: the newest process tagged tag (the running one if any), or NULL; a
 * detached command started from exec's params as exec would, answered to no one (*ret_pid 0 if
 * it could not be executed: its message is in its err). */
proc *proc_tagged(agent *a, const char *tag);
int proc_start_detached(agent *a, json_t *params, pid_t *ret_pid, tool_error *e);
/* agent_pty.c: a command's terminal, on the sandbox's own devpts */
#define PTY_MAX_SIZE 1000
int pty_parse_size(json_t *v, const char *tool, unsigned short *cols, unsigned short *rows, tool_error *e);
int pty_open(unsigned short cols, unsigned short rows, int *master, char *slave, size_t slave_size, tool_error *e);
void handle_resize(agent *a, const request *rq, proc *p);

/* agent_watch.c */
void handle_watch(agent *a, const request *rq);
void watch_ready(agent *a, uint64_t serial);
bool watch_cancel(agent *a, json_int_t id);
void watch_pause(agent *a, json_int_t id, bool pause);
void watch_update_interest(agent *a, bool high);

/* agent_xfer.c: write_file and read_file with a pipe passed (SCM_RIGHTS); pipefd is taken */
void handle_xfer(agent *a, const request *rq, int pipefd);
void xfer_ready(agent *a, uint64_t serial, uint32_t events);
bool xfer_cancel(agent *a, json_int_t id);
void xfer_update_interest(agent *a, bool high);
uint64_t xfer_deadlines(agent *a, uint64_t now);

/* agent_code.c: run_code and the *_code_context tools */
bool code_tool(const char *tool);
void handle_code(agent *a, const request *rq);
void code_ready(agent *a, uint64_t serial, uint32_t events);
bool code_cancel(agent *a, json_int_t id);
void code_pause(agent *a, json_int_t id, bool pause);
void code_update_interest(agent *a, bool high);
uint64_t code_deadlines(agent *a, uint64_t now);
