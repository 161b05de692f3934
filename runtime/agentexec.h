/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Serve-mode agents are a fresh exec of nsbox-agent (runtime/agent_main.c), never a copy of the
 * process that starts them: an nsboxd serving many tenants, or a program embedding libnsbox,
 * holds other sandboxes' environments and file contents that a clone would carry into the new
 * sandbox's agent.  The launcher opens the program once (a later replacement of the file, an
 * upgrade, changes nothing for a running nsboxd), and its clone()d child executes it once it has
 * its id maps and has opened step 3's sources (with host root's rights on files, for a root-started
 * child, which an exec would take away), still in a copy of the host's mount namespace, with its
 * fds at fixed numbers: the setup channel, the protocol socket, a sealed memfd holding the agent
 * spec (spec.h), and the sources (mounts.h).  `nsbox run`'s init is not
 * exec'd: it holds only its own caller's memory, and its cold start stays one clone. */
#pragma once

#include "error.h"
#include "mounts.h"
#include "spec.h"

#define NSBOX_AGENT_SYNC_FD 3
#define NSBOX_AGENT_PROTO_FD 4
#define NSBOX_AGENT_SPEC_FD 5
/* 6: the program itself, closed by the exec; then the sources (mounts.h): a memfd, and their fds */
#define NSBOX_AGENT_SOURCES_FD 7
#define NSBOX_AGENT_NAME "nsbox-agent"

/* Find and open nsbox-agent (O_PATH), once per process: $NSBOX_AGENT (tests), else next to the
 * running program (libnsbox.so: next to the library), which is the build tree, else the libexec
 * directory it was built for.  0, or -errno with err naming where it looked. */
int nsbox_agent_program_open(nsbox_error *err);
/* The spec in a sealed memfd (O_CLOEXEC), or -errno with err set. */
int nsbox_agent_spec_memfd(const nsbox_policy *p, const nsbox_idmap *map, const nsbox_egress_set *eg, nsbox_error *err);
/* In the clone()d child, after step 3 (nsbox_sandbox_child_prepare): execute nsbox-agent with
 * syncfd, protofd and specfd at their fixed numbers, the sources' memfd at
 * NSBOX_AGENT_SOURCES_FD and their fds after it (their count as argv[1]), fds 0-2 as they are
 * and every other fd closed, an empty environment and the namespace's capabilities kept
 * (caps.h).  Reports a failure on syncfd and exits 125; never returns. */
_Noreturn void nsbox_agent_exec(int syncfd, int protofd, int specfd, const nsbox_sources *src, size_t n_mounts, bool outlive_parent);
