/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "userns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

void nsbox_idmap_for_caller(uid_t policy_uid, gid_t policy_gid, nsbox_idmap *ret)
{
        if (nsbox_host_root()) {
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

int nsbox_userns_owner_enter(const nsbox_idmap *m, nsbox_userns_owner *ret)
{
        *ret = (nsbox_userns_owner){ .dumpable = -1 };
        uid_t ruid, euid, suid;
        if (!m->privileged)
                return 0;
        /* going back to euid 0 needs a real or saved uid 0 (always so for a root process) */
        if (getresuid(&ruid, &euid, &suid) < 0 || (ruid != 0 && suid != 0))
                return -EPERM;
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = { { 0 } }; /* valgrind 3.19 marks only d[0] written */
        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
        if (syscall(SYS_setresuid, -1, m->host_uid, -1) < 0)
                return -errno;
        *ret = (nsbox_userns_owner){ .entered = true, .dumpable = dumpable, .effective = { d[0].effective, d[1].effective } };
        /* allowed: the real uid is 0; setfsuid reports the id it leaves */
        syscall(SYS_setfsuid, 0);
        if (syscall(SYS_setfsuid, -1) != 0) {
                nsbox_userns_owner_leave(ret);
                return -EPERM;
        }
        return 0;
}

void nsbox_userns_owner_leave(nsbox_userns_owner *o)
{
        if (!o->entered)
                return;
        o->entered = false;
        int saved_errno = errno; /* the caller's, from the clone */
        /* back to euid 0 (allowed: the real and saved uids are 0); the kernel then makes the
         * effective set the permitted one: put back the one we had */
        if (syscall(SYS_setresuid, -1, 0, -1) < 0)
                abort(); /* cannot happen; going on with another uid would be worse */
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = { { 0 } }; /* valgrind 3.19 marks only d[0] written */
        if (syscall(SYS_capget, &h, d) == 0) {
                d[0].effective = o->effective[0];
                d[1].effective = o->effective[1];
                syscall(SYS_capset, &h, d);
        }
        if (o->dumpable >= 0)
                prctl(PR_SET_DUMPABLE, o->dumpable, 0, 0, 0);
        errno = saved_errno;
}

/* Set user.max_inotify_NAME of our user namespace to half of fs.inotify.max_user_GLOBAL (the
 * initial namespace's, whichever namespace reads it). */
static int limit_half(int procfd, const char *global, const char *name, nsbox_error *err)
{
        char from[96], to[96], buf[32] = "";
        snprintf(from, sizeof(from), "sys/fs/inotify/max_user_%s", global);
        snprintf(to, sizeof(to), "sys/user/max_inotify_%s", name);
        _cleanup_close_ int in = openat(procfd, from, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return errno == ENOENT ? 0 : nsbox_err(err, errno, "open '/proc/%s'", from); /* ENOENT: no inotify */
        _cleanup_close_ int out = openat(procfd, to, O_WRONLY | O_CLOEXEC);
        if (out < 0)
                return errno == ENOENT ? 0 : nsbox_err(err, errno, "open '/proc/%s'", to); /* ENOENT: before Linux 4.9 */
        ssize_t n = read(in, buf, sizeof(buf) - 1);
        char *end;
        long v = n > 0 ? strtol(buf, &end, 10) : -1;
        if (n <= 0 || v < 0 || *end != '\n')
                return nsbox_err(err, n < 0 ? errno : EINVAL, "read '/proc/%s'", from);
        snprintf(buf, sizeof(buf), "%ld\n", v / 2 > 0 ? v / 2 : 1);
        n = write(out, buf, strlen(buf));
        if (n != (ssize_t)strlen(buf))
                return nsbox_err(err, n < 0 ? errno : EIO, "write '/proc/%s'", to);
        return 0;
}

int nsbox_userns_limit_inotify(int procfd, nsbox_error *err)
{
        int r = limit_half(procfd, "instances", "instances", err);
        if (r == 0)
                r = limit_half(procfd, "watches", "watches", err);
        return r;
}

/* Counters checked against the process's own rlimit at each level up to the owner (mqueue
 * bytes, queued signals, locked shared memory): with half of it, the sandbox cannot take more
 * than half of the owner's. */
static void halve_rlimit(int res)
{
        struct rlimit rl;
        if (getrlimit(res, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return;
        rl.rlim_cur = rl.rlim_max = rl.rlim_cur / 2;
        setrlimit(res, &rl);
}

void nsbox_userns_limit_rlimits(void)
{
        halve_rlimit(RLIMIT_MSGQUEUE);
        halve_rlimit(RLIMIT_SIGPENDING);
        halve_rlimit(RLIMIT_MEMLOCK);
}

static int read_int_file(const char *dir, const char *name, long *ret)
{
        char buf[32] = "", path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
                return -1;
        *ret = strtol(buf, NULL, 10);
        return 0;
}

#ifndef NSBOX_DATADIR
#define NSBOX_DATADIR "/usr/local/share"
#endif
/* Ubuntu 23.10+: the profile make install ships, and the two commands that load it */
#define APPARMOR_HINT                                                                                                  \
        "kernel.apparmor_restrict_unprivileged_userns=1: install the nsbox AppArmor profile: sudo cp " NSBOX_DATADIR  \
        "/nsbox/apparmor/nsbox /etc/apparmor.d/nsbox && sudo apparmor_parser -r /etc/apparmor.d/nsbox, see nsbox(1) HOST SETUP"

const char *nsbox_userns_hint(int errnum) { return nsbox_userns_hint_at("/proc/sys", errnum); }

const char *nsbox_userns_hint_at(const char *sysdir, int errnum)
{
        long v;
        if (read_int_file(sysdir, "kernel/apparmor_restrict_unprivileged_userns", &v) == 0 && v == 1)
                return APPARMOR_HINT;
        if (read_int_file(sysdir, "kernel/unprivileged_userns_clone", &v) == 0 && v == 0)
                return "kernel.unprivileged_userns_clone=0: set it to 1, see nsbox(1) HOST SETUP";
        if (read_int_file(sysdir, "user/max_user_namespaces", &v) == 0 && v == 0)
                return "user.max_user_namespaces=0: raise it, see nsbox(1) HOST SETUP";
        if (errnum == ENOSPC)
                return "the user namespace limit (user.max_user_namespaces, or nesting deeper than 32) is reached, see nsbox(1) HOST SETUP";
        if (errnum == EPERM)
                return "unprivileged user namespaces are not allowed here (seccomp, a container, or a sysctl), see nsbox(1) HOST SETUP";
        return "see nsbox(1) HOST SETUP";
}
