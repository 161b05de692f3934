/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "caps.h"

#include <errno.h>
#include <grp.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

static bool kept(uint64_t keep, cap_value_t c) { return c < 64 && (keep & (1ull << c)); }

int nsbox_drop_privileges(uid_t uid, gid_t gid, bool change_ids, uint64_t keep, nsbox_error *err)
{
        cap_value_t last = (cap_value_t)cap_max_bits() - 1;
        /* The bounding set first: dropping it needs CAP_SETPCAP, which goes with the uid change. */
        for (cap_value_t c = 0; c <= last; c++)
                if (!kept(keep, c) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return nsbox_err(err, errno, "drop capability %d from the bounding set", c);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return nsbox_err(err, errno, "clear ambient capabilities");
        if (change_ids) {
                if (keep && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                        return nsbox_err(err, errno, "keep capabilities across the uid change");
                if (setgroups(0, NULL) < 0)
                        return nsbox_err(err, errno, "clear supplementary groups");
                if (setresgid(gid, gid, gid) < 0)
                        return nsbox_err(err, errno, "set gid %u", gid);
                if (setresuid(uid, uid, uid) < 0)
                        return nsbox_err(err, errno, "set uid %u", uid);
                if (keep && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
                        return nsbox_err(err, errno, "reset keep-capabilities");
        }
        cap_t caps = cap_init();
        if (!caps)
                return nsbox_err(err, errno, "cap_init");
        for (cap_value_t c = 0; c <= last; c++)
                if (kept(keep, c)) {
                        cap_set_flag(caps, CAP_EFFECTIVE, 1, &c, CAP_SET);
                        cap_set_flag(caps, CAP_PERMITTED, 1, &c, CAP_SET);
                        cap_set_flag(caps, CAP_INHERITABLE, 1, &c, CAP_SET);
                }
        int r = 0;
        if (cap_set_proc(caps) < 0)
                r = nsbox_err(err, errno, "set capabilities");
        /* Kept capabilities must survive execve of a non-root program: ambient. */
        for (cap_value_t c = 0; r == 0 && c <= last; c++)
                if (kept(keep, c) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
                        r = nsbox_err(err, errno, "raise ambient capability %d", c);
        /* Verify from the kernel's view, never from what we meant to do. */
        if (r == 0) {
                cap_t now = cap_get_proc();
                if (!now || cap_compare(now, caps) != 0)
                        r = nsbox_err(err, 0, "capabilities are not what was asked for after the drop");
                cap_free(now);
        }
        for (cap_value_t c = 0; r == 0 && c <= last; c++) {
                int in_bset = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
                int in_amb = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0);
                if (in_bset < 0 || in_amb < 0 || (bool)in_bset != kept(keep, c) || (bool)in_amb != kept(keep, c))
                        r = nsbox_err(err, 0, "capability %d is still held after the drop", c);
        }
        if (r == 0 && change_ids && (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid))
                r = nsbox_err(err, 0, "uid/gid are not %u/%u after the change", uid, gid);
        cap_free(caps);
        return r;
}
