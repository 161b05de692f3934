/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "error.h"

/* Step 6 for --net none: the new network namespace's loopback up, and nothing else. */
int nsbox_net_loopback_up(nsbox_error *err);
