/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's keeper (nsboxd(8), RESTARTS).  With on_stop "keep", a stopping nsboxd hands the
 * sandboxes it keeps to a small process of its own: it holds what makes each sandbox reachable
 * and alive (the agent's socket, its pidfd, the writable layer, the cgroup, the layer and id
 * locks) until the next nsboxd takes them over, and destroys them if none comes in time.  If
 * the keeper itself dies, the agents see their sockets close and exit, as with a killed nsboxd.
 *
 * The channel is a SOCK_SEQPACKET socket in nsboxd's state directory (0700): one message per
 * sandbox, its record (JSON, which names its fds by their index) with the fds attached, then
 * {"end":true}; the next nsboxd answers "ok" once it serves them, and the keeper exits. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "ids.h"

#define NSBOX_KEEPER_SOCKET "keeper"   /* in the state directory */
#define NSBOX_KEEPER_MAX_FDS 250       /* per sandbox: one SCM_RIGHTS message */

typedef struct nsbox_kept {
        char id[NSBOX_ID_SIZE];
        json_t *record; /* owned */
        int fds[NSBOX_KEEPER_MAX_FDS];
        size_t n_fds;
        int pidfd, cgroupfd; /* among fds (-1: none): what the keeper destroys it with */
} nsbox_kept;

/* Bind the keeper's socket in the state directory and fork the keeper, which holds copies of
 * every kept[i].fds and waits for go: the caller renames what must carry the keeper's pid
 * (cgroups), then calls nsbox_keeper_go (true: serve them; false: exit and hold nothing).
 * Returns the keeper's pid, with *ctl the control pipe. */
pid_t nsbox_keeper_fork(int state_dirfd, const nsbox_kept *kept, size_t n, uint64_t timeout_ms, int *ctl, nsbox_error *err);
/* 0 when the keeper took over (and the caller may close its copies), else negative. */
int nsbox_keeper_go(int ctl, bool go);

/* The next nsboxd, before it makes any sandbox: take what a keeper in the state directory holds.
 * take() gets each record with its fds; it keeps the fds it uses (setting them to -1 in fds), the
 * rest are closed.  Returns how many records were handed over (0: no keeper), or negative. */
int nsbox_keeper_collect(int state_dirfd, int (*take)(void *ctx, json_t *record, int *fds, size_t n), void *ctx, nsbox_error *err);
