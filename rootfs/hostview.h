/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host view (`--rootfs host`): which host paths a sandbox sees, read-only.  Everything not
 * listed here (home directories, /root, /var, /run, /tmp, /etc/shadow, /sys) is absent. */
#pragma once

#include <stddef.h>

enum {
        HV_BIND = 1 << 0,     /* bind the host path read-only (recursively) */
        HV_LINK = 1 << 1,     /* if the host path is a symlink, recreate the symlink instead */
        HV_OPTIONAL = 1 << 2, /* absent on the host: skip silently */
};

typedef struct nsbox_hostview_entry {
        const char *path;
        unsigned flags;
} nsbox_hostview_entry;

extern const nsbox_hostview_entry nsbox_hostview[];
extern const size_t nsbox_hostview_len;
