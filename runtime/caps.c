/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "caps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <sys/capability.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool kept(uint64_t keep, cap_value_t c) { return c < 64 && (keep & (1ull << c)); }

static int verify_sets(uint64_t keep, nsbox_error *err)
{
        static const char *const sets[] = { "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:" };
        char buf[4096];
        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "verify capabilities: open /proc/self/status");
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return nsbox_err(err, n < 0 ? errno : EIO, "verify capabilities: read /proc/self/status");
        buf[n] = '\0';
        for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
                const char *line = strstr(buf, sets[i]);
                if (!line)
                        return nsbox_err(err, 0, "verify capabilities: no %s in /proc/self/status", sets[i]);
                unsigned long long v = strtoull(line + strlen(sets[i]), NULL, 16);
                if (v != keep)
                        return nsbox_err(err, 0, "%.6s is %llx after the drop, expected %llx", sets[i], v, (unsigned long long)keep);
        }
        return 0;
}

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
        /* Verify from the kernel's view, never from what we meant to do: every set in
         * /proc/self/status (one read, rather than a prctl per capability and set). */
        if (r == 0)
                r = verify_sets(keep, err);
        if (r == 0 && change_ids && (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid))
                r = nsbox_err(err, 0, "uid/gid are not %u/%u after the change", uid, gid);
        cap_free(caps);
        return r;
}

/* Raw system calls, no libcap: this runs in a clone()d child of a program that may have other
 * threads, where malloc could wait for a lock that no thread will release. */
int nsbox_caps_keep_across_exec(nsbox_error *err)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2];
        if (syscall(SYS_capget, &hdr, data) < 0)
                return nsbox_err(err, errno, "read capabilities");
        for (int i = 0; i < 2; i++)
                data[i].inheritable = data[i].permitted;
        if (syscall(SYS_capset, &hdr, data) < 0)
                return nsbox_err(err, errno, "set inheritable capabilities");
        for (int c = 0; c < 64 && prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
                if ((data[c / 32].permitted & (1u << (c % 32))) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
                        return nsbox_err(err, errno, "raise ambient capability %d", c);
        return 0;
}
