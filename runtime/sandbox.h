/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The launcher (sandbox.c): docs/security.md's setup order, from the host's checks to the
 * teardown.  `nsbox run`'s supervisor is run.h. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "cgroup.h"
#include "error.h"
#include "net.h"
#include "mounts.h"
#include "policy.h"
#include "spec.h"
#include "userns.h"

/* Checks that need the host (the rootfs exists, limits can be enforced), after the policy is
 * parsed and merged and before any namespace exists.  May print one warning for best-effort. */
int nsbox_policy_check_host(nsbox_policy *p, nsbox_error *err);

/* A started sandbox, as the launcher hands it to its supervisor. */
typedef struct nsbox_sandbox {
        pid_t pid;        /* the agent, pid 1 inside; 0 once reaped */
        int pidfd;
        int syncfd;       /* setup channel: SYNC_READY / SYNC_ERROR (serve mode), SYNC_EXIT (run mode) */
        int agentfd;      /* serve mode: the protocol stream socket (proto.h) */
        int stagefd;      /* serve mode, once ready: O_PATH of the staging tmpfs (upper/ = the writable layer) */
        uint64_t start_ns;
        nsbox_cgroup cg;  /* cg.dirfd -1 when the host offers no cgroup (cgroup.h) */
        nsbox_net net;    /* mode nat: its slirp4netns (net.h) */
} nsbox_sandbox;
#define NSBOX_SANDBOX_INIT                                                                                  \
        { .pid = 0, .pidfd = -1, .syncfd = -1, .agentfd = -1, .stagefd = -1, .start_ns = 0, .cg = NSBOX_CGROUP_INIT, \
          .net = NSBOX_NET_INIT }

/* Build a sandbox from p, in a cgroup of its own named after tag (cgroup.h) when the host has
 * one to give, with p's limits written before its first instruction.  Run mode (argv set): the
 * agent, a clone of the caller, runs argv with stdio[i] (or the caller's fd i when stdio is NULL
 * or stdio[i] < 0) and reports on syncfd.  Serve mode (argv NULL): the agent, a fresh exec of
 * nsbox-agent (agentexec.h), serves exec, process_* and the file, search and git tools on
 * agentfd.  Returns once the child has its id maps and its seccomp program; in serve mode,
 * readiness comes later as SYNC_READY on syncfd (nsbox_sandbox_read_ready / _wait_ready). */
int nsbox_sandbox_start(const nsbox_policy *p, char *const argv[], const int stdio[3], const char *tag, nsbox_sandbox *ret,
                        nsbox_error *err);
/* The child's first steps (docs/security.md): the parent-death signal, step 8 (every fd but 0-2,
 * syncfd and agentfd closed) when close_fds (serve mode: the exec of nsbox-agent closes them),
 * the end of step 2 (the wait for its id maps, SYNC_GO on syncfd), then step 3 (nsbox_prepare_sources into *ret, with
 * hidden: nsbox's runtime directories); cgroupns: the cgroup namespace is made after the go (the
 * clone made none: cgroup v1, joined after the clone).  In serve mode this runs before the exec of nsbox-agent,
 * while a root-started child still has host root's rights on files.  0, or -errno with err set
 * for the parent; *ret is set either way (release it).  bind_fds: the launcher's id-mapped binds
 * (idmapped.h) or NULL. */
int nsbox_sandbox_child_prepare(const nsbox_policy *p, char *const *hidden, int *bind_fds, int syncfd, int agentfd, bool close_fds,
                                bool cgroupns, nsbox_sources *ret, nsbox_error *err);
/* Steps 3 (the rest) to 9, with src from nsbox_sandbox_child_prepare (released here): in the
 * clone()d child in run mode, in nsbox-agent in serve mode (agentfd >= 0).  0, or -errno with
 * err set for the parent. */
int nsbox_sandbox_child_setup(const nsbox_policy *p, const nsbox_idmap *map, const nsbox_egress_set *eg, nsbox_sources *src,
                              int syncfd, int agentfd, nsbox_error *err);
/* Serve mode: take one message from syncfd (readable): 1 ready (syncfd is closed), 0 not yet,
 * negative with err set (the setup failed: its message). */
int nsbox_sandbox_read_ready(nsbox_sandbox *sb, nsbox_error *err);
int nsbox_sandbox_wait_ready(nsbox_sandbox *sb, int timeout_ms, nsbox_error *err);
/* Stop or continue every process of the sandbox and return once they are: with the cgroup
 * freezer when the sandbox has a cgroup, else with SIGSTOP/SIGCONT to each process (found
 * through /proc/PID/task/TID/children from the agent down, until no process is left running).
 * The signal fallback is visible to the sandbox: a parent waiting with WUNTRACED sees its
 * child stop, and a process stopped on purpose is continued too. */
int nsbox_sandbox_freeze(nsbox_sandbox *sb, bool freeze, int timeout_ms, nsbox_error *err);
/* Where no cgroup counts them: the anonymous resident bytes (statm's resident less shared) and
 * the CPU time so far of the sandbox's processes (its init and its descendants, at most 256 of
 * them, /proc/PID/statm and stat, reaped ones included); and the bytes used of its staging tmpfs
 * (its writable layer).  0 what cannot be read. */
void nsbox_sandbox_usage(const nsbox_sandbox *sb, uint64_t *rss_bytes, uint64_t *cpu_us);
uint64_t nsbox_sandbox_disk_used(const nsbox_sandbox *sb);
/* SIGKILL the agent (and so everything in the sandbox), reap it, close every fd, remove the
 * cgroup. */
void nsbox_sandbox_destroy(nsbox_sandbox *sb);
