/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent: pid 1 of every sandbox.  It reaps every orphan and either runs one command with
 * the caller's standard streams (nsbox run) or serves tool calls over the protocol socket
 * (nsboxd, libnsbox): commands it starts as its children, in process groups of their own, and
 * file, search and git tools it runs itself, inside the sandbox's mount namespace. */
#pragma once

#include "../tools/tool.h"
#include "policy.h"

typedef struct nsbox_agent_config {
        const nsbox_policy *policy;
        char *const *argv;              /* run mode: the command, with the inherited fds 0-2 */
        int syncfd;                     /* the launcher's setup channel */
        int protofd;                    /* serve mode: the protocol stream socket, else -1 */
        const nsbox_tool_entry *tools;  /* serve mode: handlers besides exec and process_*; may be NULL */
} nsbox_agent_config;

/* Run mode: give the command a pty (nsbox run -t).  Set by nsbox_run before the clone, which
 * carries it into the sandbox's init (run mode's init is a clone, not an exec). */
extern bool nsbox_agent_run_tty;

/* Never returns; called in the sandbox once it is fully set up (seccomp installed). */
_Noreturn void nsbox_agent_main(const nsbox_agent_config *c);

/* supervisor -> agent in run mode: SIGKILL the command's process group, report as usual */
#define NSBOX_SIG_KILL_COMMAND (SIGRTMIN + 1)
