/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Host ids a root-started sandbox's ids map to: inside 0..65535 -> host BASE..BASE+65535, never
 * host root.  That range (slot 0) is shared by `nsbox run` and by sandboxes started on stored
 * layers (snapshots, repositories: their files are owned in it).  A root nsboxd gives every other
 * sandbox a range of its own, slot N of NSBOX_ID_SLOTS: BASE + N * 65536, taken with an flock of
 * NSBOX_ID_LOCKDIR/N held as long as the sandbox lives.  All of them stay below 2^31. */
#define NSBOX_ROOT_ID_BASE 0x70000000u
#define NSBOX_ROOT_ID_COUNT 65536u
#define NSBOX_ID_SLOTS 4096u
#define NSBOX_ID_LOCKDIR "/run/nsbox/ids"

typedef struct nsbox_idmap {
        bool privileged; /* written by host root: a full range */
        uid_t inside_uid, host_uid;
        gid_t inside_gid, host_gid;
        unsigned count;
} nsbox_idmap;

/* Decide the mapping for the caller: unprivileged callers map their own uid and gid to the
 * policy user's, root maps a whole unprivileged range. */
void nsbox_idmap_for_caller(uid_t policy_uid, gid_t policy_gid, nsbox_idmap *ret);
/* Step 2, from the parent: uid_map, setgroups=deny (unprivileged), gid_map. */
int nsbox_write_idmap(pid_t pid, const nsbox_idmap *m, nsbox_error *err);
/* Root-started sandboxes: the kernel charges per-user counters (inotify instances and watches,
 * user namespaces, mqueue bytes...) at every level up to the owner of each user namespace, so a
 * namespace owned by root lets one tenant exhaust root's.  Around the clone that creates it, the
 * calling thread (only it: raw system calls, not glibc's, which change every thread) takes the
 * sandbox's host id as its effective uid, making that id the owner; its fsuid stays 0, so the
 * child keeps host root's owner rights to open the bind sources and CLONE_INTO_CGROUP's write
 * check on cgroup.procs passes, as before.  Leave restores the euid, the effective capabilities
 * and the dumpable flag that the change of euid cleared.  Unprivileged: nothing to do. */
typedef struct nsbox_userns_owner {
        bool entered;
        int dumpable;
        uint32_t effective[2];
} nsbox_userns_owner;
int nsbox_userns_owner_enter(const nsbox_idmap *m, nsbox_userns_owner *ret);
void nsbox_userns_owner_leave(nsbox_userns_owner *o);
/* So that one sandbox leaves its owner (the host user, or a host id range of root's that
 * sandboxes share) room to work, each sandbox takes at most half of each per-user counter.
 * Child, holding CAP_SYS_RESOURCE in its user namespace, through its fresh /proc (PROCFD) before
 * /proc/sys turns read-only: user.max_inotify_{instances,watches} of its namespace become half of
 * the host's fs.inotify.max_user_* (a kernel without these entries is left as it is).  And with
 * the other rlimits: RLIMIT_MSGQUEUE, RLIMIT_SIGPENDING and RLIMIT_MEMLOCK, half of ours. */
int nsbox_userns_limit_inotify(int procfd, nsbox_error *err);
void nsbox_userns_limit_rlimits(void);
/* Explain why a user namespace could not be created, for the error message: the sysctls of
 * /proc/sys (of sysdir, for tests) that forbid it, each with its fix. */
const char *nsbox_userns_hint(int errnum);
const char *nsbox_userns_hint_at(const char *sysdir, int errnum);
