/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "error.h"
#include "policy.h"

/* Steps 3 to 5 of SECURITY.md's setup order, run inside the new mount namespace by a process
 * that holds CAP_SYS_ADMIN in the sandbox's user namespace: private propagation, the overlay
 * root with its binds, /proc, /dev, /tmp, pivot_root, and chdir into the workdir. */
int nsbox_setup_root(const nsbox_policy *p, nsbox_error *err);
