/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Step 7: become the policy user and keep only the capabilities in `keep` (a bit mask, normally
 * 0): bounding set, ambient, inheritable, permitted and effective sets, then verify the result
 * from the kernel's own view.  `change_ids` is false when the id map already made us the user. */
int nsbox_drop_privileges(uid_t uid, gid_t gid, bool change_ids, uint64_t keep, nsbox_error *err);
/* Before a serve-mode child executes nsbox-agent: its capabilities over its new user namespace
 * (every one) made ambient, so that they survive the exec of an unprivileged program, which
 * otherwise clears them (the child's uid is not yet mapped, or is host root's, never the
 * namespace's root).  Steps 3 to 7 need them; step 7 clears the ambient set again. */
int nsbox_caps_keep_across_exec(nsbox_error *err);
