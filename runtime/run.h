/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox run`: one foreground sandbox, supervised until its command ends (run.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "policy.h"

/* What a one-shot sandbox run ended with, as `nsbox run --json` reports it. */
typedef struct nsbox_result {
        int status;         /* the CLI's exit status: the command's, 128+N, 124 on timeout */
        int exit_code;      /* the command's exit code when it exited, else -1 */
        int signal;         /* the signal that killed it, else 0 */
        bool timed_out;
        bool oom_killed;    /* memory.events: the OOM killer took the sandbox */
        bool pids_limited;  /* pids.events: a fork was refused at the pids limit */
        uint64_t wall_us;
        /* cpu time: of the whole sandbox from its cgroup's cpu.stat; without a cgroup, of the
         * command and the descendants it waited for */
        uint64_t user_us, sys_us;
        /* memory.peak of the sandbox's cgroup; without one, the largest resident set of any one
         * process */
        uint64_t max_rss_bytes;
        char cgroup[512];   /* the sandbox's cgroup while it ran, or "" */
        char warning[1200]; /* limits asked for that did not hold (cgroup.h), or "" */
        nsbox_limits limits;                      /* asked for (the policy's and the options') */
        unsigned held;                            /* of those, what its cgroups held (nsbox_cgroup_held) */
} nsbox_result;

/* Return as soon as init reports the command's status, without waiting for the kernel to finish
 * tearing down the namespaces (init is exiting and every process left is being SIGKILLed); the
 * caller must not need to reap.  For a command-line tool that exits right after. */
#define NSBOX_RUN_RETURN_AT_EXIT 1u
/* The command on a pty of the sandbox's devpts, relayed to and from our fds 0 and 1 (a
 * terminal, put in raw mode by the caller), its size following SIGWINCH. */
#define NSBOX_RUN_TTY 2u

/* Run argv in a new sandbox built from p (checked by nsbox_policy_check_host, sandbox.h), with
 * the caller's stdin, stdout and stderr, and wait for it.  Returns 0 with *res filled when the
 * command ran (whatever its status), or a negative errno with err set (err->exit_status 125, or
 * 126/127 when the command could not be executed). */
int nsbox_run(const nsbox_policy *p, char *const argv[], unsigned flags, nsbox_result *res, nsbox_error *err);
