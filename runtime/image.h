/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox on an imported image (nsbox image import; store.h): its layers on an empty root
 * instead of the host's, its config as the defaults the caller did not give. */
#pragma once

#include "options.h"
#include "policy.h"
#include "store.h"

/* Take image o->image's layers into l (held while the sandbox lives) and apply its config to p:
 * Env under the caller's -e (over the policy's), WorkingDir unless --workdir, User only when it
 * is the policy's user (else a warning on stderr).  ret_argv (NULL: not wanted): Entrypoint +
 * Cmd when o->argv is empty, else NULL; the caller frees it.  --rootfs and --from are refused. */
int nsbox_image_use(nsbox_policy *p, const nsbox_run_options *o, nsbox_layers *l, char ***ret_argv, nsbox_error *err);
/* The config part alone, for a sandbox handed over with its layers held already (keep.c). */
int nsbox_image_reapply(nsbox_policy *p, const nsbox_run_options *o, nsbox_error *err);
