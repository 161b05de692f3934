/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
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
/* Explain why a user namespace could not be created, for the error message. */
const char *nsbox_userns_hint(int errnum);
