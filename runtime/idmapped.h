/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include "error.h"
#include "policy.h"
#include "userns.h"

/* Root-started sandboxes (map->privileged): each bind of the policy cloned, detached, with a
 * mount idmapping in which the caller's uid and gid (the owner of what root binds) are the
 * sandbox user's, and nothing else is mapped; flagged read-only or not, nosuid, nodev and
 * private.  *ret_fds: one fd per mount (-1 for a tmpfs or a bind marked no_idmap), or NULL when
 * there is nothing to do
 * (an unprivileged caller's ids map already).  A filesystem that cannot be id-mapped fails,
 * with a one-line error naming the bind. */
int nsbox_idmapped_binds(const nsbox_policy *p, const nsbox_idmap *map, int **ret_fds, nsbox_error *err);
void nsbox_idmapped_binds_close(int *fds, size_t n);
