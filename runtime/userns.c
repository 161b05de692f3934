/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "userns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Root of the initial user namespace (full identity map): it may map a range of host ids.
 * uid 0 inside a user namespace (unshare -r, a rootless container) may map only itself. */
static bool initial_root(void)
{
        if (geteuid() != 0)
                return false;
        char buf[128] = "";
        _cleanup_close_ int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
                return false;
        unsigned long inside, outside, count;
        return sscanf(buf, "%lu %lu %lu", &inside, &outside, &count) == 3 && inside == 0 && outside == 0 && count == 4294967295ul;
}

void nsbox_idmap_for_caller(uid_t policy_uid, gid_t policy_gid, nsbox_idmap *ret)
{
        if (initial_root()) {
                *ret = (nsbox_idmap){ .privileged = true, .inside_uid = 0, .host_uid = NSBOX_ROOT_ID_BASE,
                                      .inside_gid = 0, .host_gid = NSBOX_ROOT_ID_BASE, .count = NSBOX_ROOT_ID_COUNT };
                return;
        }
        *ret = (nsbox_idmap){ .privileged = false, .inside_uid = policy_uid, .host_uid = geteuid(),
                              .inside_gid = policy_gid, .host_gid = getegid(), .count = 1 };
}

static int write_proc(pid_t pid, const char *file, const char *content, nsbox_error *err)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "open '%s'", path);
        /* the kernel takes a map in a single write */
        ssize_t n = write(fd, content, strlen(content));
        if (n < 0 || (size_t)n != strlen(content))
                return nsbox_err(err, n < 0 ? errno : EIO, "write '%s'", path);
        return 0;
}

int nsbox_write_idmap(pid_t pid, const nsbox_idmap *m, nsbox_error *err)
{
        char line[96];
        int r;
        snprintf(line, sizeof(line), "%u %u %u\n", m->inside_uid, m->host_uid, m->count);
        if ((r = write_proc(pid, "uid_map", line, err)) < 0)
                return r;
        /* Unprivileged: setgroups must be denied before a gid_map can be written, so that no
         * process can drop a group that a negative ACL relies on. */
        if (!m->privileged && (r = write_proc(pid, "setgroups", "deny", err)) < 0)
                return r;
        snprintf(line, sizeof(line), "%u %u %u\n", m->inside_gid, m->host_gid, m->count);
        return write_proc(pid, "gid_map", line, err);
}

static int read_int_file(const char *path, long *ret)
{
        char buf[32] = "";
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
                return -1;
        *ret = strtol(buf, NULL, 10);
        return 0;
}

const char *nsbox_userns_hint(int errnum)
{
        long v;
        if (read_int_file("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0 && v == 1)
                return "kernel.apparmor_restrict_unprivileged_userns=1: install the nsbox AppArmor profile, see nsbox(1) HOST SETUP";
        if (read_int_file("/proc/sys/kernel/unprivileged_userns_clone", &v) == 0 && v == 0)
                return "kernel.unprivileged_userns_clone=0: set it to 1, see nsbox(1) HOST SETUP";
        if (read_int_file("/proc/sys/user/max_user_namespaces", &v) == 0 && v == 0)
                return "user.max_user_namespaces=0: raise it, see nsbox(1) HOST SETUP";
        if (errnum == ENOSPC)
                return "the user namespace limit (user.max_user_namespaces, or nesting deeper than 32) is reached, see nsbox(1) HOST SETUP";
        if (errnum == EPERM)
                return "unprivileged user namespaces are not allowed here (seccomp, a container, or a sysctl), see nsbox(1) HOST SETUP";
        return "see nsbox(1) HOST SETUP";
}
