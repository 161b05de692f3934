/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgroup v2 for sandboxes: where their cgroups go (a delegated subtree), the limits, written
 * before any sandbox code runs (the launcher clones straight into the cgroup), accounting read
 * from the controllers' files, freeze and thaw, and teardown with cgroup.kill.  On a hybrid host,
 * for root, a controller the cgroup2 hierarchy lacks (memory, pids, cpu) is taken from its cgroup
 * v1 hierarchy: NSBOX's own "nsbox" cgroup there, a child of the same name per sandbox, which the
 * launcher joins the child to before it may go on. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "policy.h"

enum { NSBOX_CG_V1_MEMORY, NSBOX_CG_V1_PIDS, NSBOX_CG_V1_CPU, NSBOX_CG_V1_FREEZER, NSBOX_CG_V1_N };

typedef struct nsbox_cgroup {
        int dirfd;  /* the sandbox's cgroup directory; -1: the sandbox has none */
        char *path; /* absolute, under the cgroup2 mount */
        bool memory, pids, cpu; /* controllers enabled for it (v2, or v1 below) */
        /* the controllers it has in cgroup v1 (bit NSBOX_CG_V1_*): their directories in v1fd */
        unsigned v1;
        int v1fd[NSBOX_CG_V1_N];
        char *v1name; /* their name under each hierarchy's nsbox cgroup */
} nsbox_cgroup;
#define NSBOX_CGROUP_INIT { .dirfd = -1, .path = NULL, .memory = false, .pids = false, .cpu = false, .v1 = 0, .v1name = NULL }

typedef struct nsbox_cgroup_stats {
        uint64_t cpu_usage_us, cpu_user_us, cpu_system_us; /* cpu.stat: always there */
        bool has_memory;
        uint64_t memory_current, memory_peak; /* bytes */
        uint64_t oom_kills;                   /* memory.events oom_kill, or oom_group_kill if larger */
        bool has_pids;
        uint64_t pids_current, pids_limited; /* pids.events max: forks refused */
        bool frozen, populated;
} nsbox_cgroup_stats;

/* Before anything is created: can the limits in l be enforced here?  Finds (once per process)
 * the parent cgroup sandboxes go under, enabling the controllers it needs.  Missing controllers:
 * -EOPNOTSUPP with err naming them when l->enforce is required; one warning on stderr per
 * process (and 0) when best-effort.  policy_name is for messages. */
int nsbox_cgroup_check(const nsbox_limits *l, const char *policy_name, nsbox_error *err);

/* Create the sandbox's cgroup (named from tag: [A-Za-z0-9_-], at most 64) under the parent and
 * write l's limits into it.  Without a usable parent, returns 0 with cg->dirfd == -1 (the check
 * decided that is acceptable).  pausable: a sandbox that may be paused (serve mode) gets the v1
 * freezer where there is no cgroup2 (root on a v1-only host).  Also removes cgroups orphaned by
 * supervisors that were killed. */
int nsbox_cgroup_create(const nsbox_limits *l, const char *tag, bool pausable, nsbox_cgroup *cg, nsbox_error *err);
/* The child the launcher just cloned (it waits for the launcher's go) into cg's cgroup v1
 * directories, if it has any: before it runs anything of the sandbox's. */
int nsbox_cgroup_attach(const nsbox_cgroup *cg, pid_t pid, nsbox_error *err);
/* A sandbox adopted from a previous supervisor (cg->path set): its cgroup v1 directories of the
 * same name, opened again. */
void nsbox_cgroup_reopen_v1(nsbox_cgroup *cg);
/* cgroup.kill, wait until it is empty (at most timeout_ms), rmdir.  Safe on an empty cg. */
void nsbox_cgroup_destroy(nsbox_cgroup *cg, int timeout_ms);
int nsbox_cgroup_stats_read(const nsbox_cgroup *cg, nsbox_cgroup_stats *st);
/* pids.events max (forks refused at the limit so far), 0 without the pids controller: one read. */
uint64_t nsbox_cgroup_pids_limited(const nsbox_cgroup *cg);
/* Of the limits l asked for, those cg does not hold (memory, pids, cpus: where its cgroup lacks
 * the controller): 0, or 1 with msg set to one line naming them and why, for a reply's
 * "warnings" (nsbox run --json, nsboxd's sandbox objects). */
int nsbox_cgroup_unheld(const nsbox_limits *l, const nsbox_cgroup *cg, char *msg, size_t size);
/* Whether cg holds a memory (NSBOX_CG_V1_MEMORY), pids or cpu limit. */
bool nsbox_cgroup_holds(const nsbox_cgroup *cg, int controller);
/* Of l's memory, pids and cpu limits, those cg holds: a mask of 1 << NSBOX_CG_V1_MEMORY... */
unsigned nsbox_cgroup_held(const nsbox_limits *l, const nsbox_cgroup *cg);
/* Into o, as replies and results show them: "limits" (asked for) and "limits_enforced" (those
 * in held, and the disk, which the overlay's tmpfs always holds). */
void nsbox_limits_json(json_t *o, const nsbox_limits *l, unsigned held);

/* cgroup.kill: every process in it, frozen or not. */
void nsbox_cgroup_kill(const nsbox_cgroup *cg);
/* cgroup.freeze, then wait for cgroup.events to say so; in cgroup v1, freezer.state. */
int nsbox_cgroup_freeze(const nsbox_cgroup *cg, bool freeze, int timeout_ms, nsbox_error *err);
/* Whether nsbox_cgroup_freeze can freeze cg. */
bool nsbox_cgroup_can_freeze(const nsbox_cgroup *cg);
/* The parent sandboxes' cgroups are created under, or NULL with *why set. */
const char *nsbox_cgroup_parent(const char **why);
/* A sandbox handed to another supervisor (nsboxd's keeper, then the next nsboxd): its cgroup
 * (named after the one that made it) is marked as owner's (a live process) with an xattr, so
 * that collecting orphans leaves it while owner lives.  0 for a sandbox without a cgroup. */
int nsbox_cgroup_hand_over(nsbox_cgroup *cg, pid_t owner, nsbox_error *err);
/* Remove the sandbox cgroups of supervisors that are gone (done once by the first create too). */
void nsbox_cgroup_collect_orphans(void);
/* The start time of pid (field 22 of /proc/PID/stat), 0 if there is no such process or it has
 * exited (a zombie): with the pid, it names a live process across pid reuse. */
unsigned long long nsbox_pid_start_time(pid_t pid);
