/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "error.h"
#include "policy.h"

/* Where the host view's generated Python environment lives: outside the workdir and the home
 * (it must not show in the user's project), writable by the sandbox user. */
#define NSBOX_VENV_DIR "/opt/venv"

/* With the options applied: keep p->python_venv only for the host view on a host with
 * /usr/bin/python3, and then put NSBOX_VENV_DIR/bin first on PATH and set VIRTUAL_ENV and
 * PYTHONUSERBASE (unless the policy set them). */
int nsbox_pyvenv_settle(nsbox_policy *p, nsbox_error *err);
/* Step 4, in the host view's skeleton (LOWERFD): pyvenv.cfg (home /usr/bin, the system's
 * packages visible), bin/python and bin/python3 linked to /usr/bin/python3, bin/pip running
 * pip's main, and an empty site-packages; the directories belong to the sandbox user. */
int nsbox_pyvenv_write(int lowerfd, const nsbox_policy *p, nsbox_error *err);
