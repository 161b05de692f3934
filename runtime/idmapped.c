/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Id-mapped binds for a root-started sandbox (docs/security.md, step 1).
 *
 * A root-started sandbox runs as host ids of an unprivileged range, so a bind of root's own
 * tree would show every file as nobody's and let nothing be written.  Each bind is instead
 * cloned with a mount idmapping that has exactly two entries: the caller's uid (and gid) shown
 * as the sandbox user's host uid (and gid).  Inside, the caller's files belong to the sandbox
 * user and what it creates lands on the host owned by the caller; every other host id stays
 * unmapped, so its files show as the overflow id and the kernel refuses to write them.
 *
 * Setting an idmapping needs CAP_SYS_ADMIN over the filesystem (the host's user namespace), so
 * the launcher does it before the clone, and the child attaches the detached trees.  The
 * mapping comes from a throwaway user namespace whose uid_map and gid_map are the idmapping
 * (crun's maybe_get_idmapped_mount does the same). */
#include "idmapped.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define ATTR_BIND_COMMON (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

static int write_map(pid_t pid, const char *file, unsigned from, unsigned to, nsbox_error *err)
{
        char path[64], line[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        snprintf(line, sizeof(line), "%u %u 1\n", from, to);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "id-mapped binds: open '%s'", path);
        ssize_t n = write(fd, line, strlen(line));
        if (n != (ssize_t)strlen(line))
                return nsbox_err(err, n < 0 ? errno : EIO, "id-mapped binds: write '%s'", path);
        return 0;
}

/* A user namespace whose maps are "FROM TO 1" for uids and gids, as an fd; the process that
 * made it is gone when this returns. */
static int make_userns(uid_t from_uid, uid_t to_uid, gid_t from_gid, gid_t to_gid, int *ret, nsbox_error *err)
{
        int pidfd = -1;
        /* fork semantics, no exit signal: reaped through its pidfd, never by a caller's wait */
        pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_PIDFD, NULL, &pidfd, NULL, 0);
        if (pid < 0)
                return nsbox_err(err, errno, "id-mapped binds: create a user namespace");
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                for (;;)
                        pause(); /* only its namespace is wanted; killed below */
        }
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        int r = write_map(pid, "uid_map", from_uid, to_uid, err);
        if (r == 0)
                r = write_map(pid, "gid_map", from_gid, to_gid, err);
        int fd = r == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (r == 0 && fd < 0)
                r = nsbox_err(err, errno, "id-mapped binds: open '%s'", path);
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
                ;
        close(pidfd);
        if (r < 0)
                return r;
        *ret = fd;
        return 0;
}

/* Clone SRC with its submounts, id-mapped, flagged and private while still detached. */
static int idmapped_tree(const nsbox_mount *m, int userns_fd, int *ret, nsbox_error *err)
{
        _cleanup_close_ int t = open_tree(AT_FDCWD, m->source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (t < 0)
                return nsbox_err(err, errno, "bind '%s'", m->source);
        /* private: a mount the child makes below it later (a hidden directory) must not
         * propagate to the host's peers of the tree */
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | ATTR_BIND_COMMON | (m->readonly ? MOUNT_ATTR_RDONLY : 0),
                                   .propagation = MS_PRIVATE, .userns_fd = (uint64_t)userns_fd };
        if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) == 0) {
                *ret = steal_fd(&t);
                return 0;
        }
        int e = errno;
        struct statfs sf;
        char type[32] = "";
        if (fstatfs(t, &sf) == 0)
                snprintf(type, sizeof(type), " (type 0x%lx)", (unsigned long)sf.f_type);
        if (e == EINVAL || e == EOPNOTSUPP)
                return nsbox_err(err, e, "bind '%s': its filesystem%s or one mounted below it cannot be id-mapped, which a "
                                         "root-started sandbox needs to show root's files as the sandbox user's "
                                         "(bind it with 'noidmap' to see them as nobody's)",
                                 m->source, type);
        if (e == EPERM)
                return nsbox_err(err, e, "bind '%s': it, or a mount below it, is id-mapped already", m->source);
        return nsbox_err(err, e, "bind '%s': id-map it", m->source);
}

int nsbox_idmapped_binds(const nsbox_policy *p, const nsbox_idmap *map, int **ret_fds, nsbox_error *err)
{
        *ret_fds = NULL;
        size_t n = 0;
        for (size_t i = 0; i < p->n_mounts; i++)
                n += p->mounts[i].type == MOUNT_BIND && !p->mounts[i].no_idmap;
        if (!map->privileged || n == 0)
                return 0;
        if (p->uid < map->inside_uid || p->uid - map->inside_uid >= map->count || p->gid < map->inside_gid ||
            p->gid - map->inside_gid >= map->count)
                return nsbox_err(err, ERANGE, "id-mapped binds: the sandbox user %u:%u is outside its id range", p->uid, p->gid);
        /* the caller's ids, shown as the sandbox user's (host ids of the sandbox's range) */
        _cleanup_close_ int userns_fd = -1;
        int r = make_userns(geteuid(), map->host_uid + (p->uid - map->inside_uid), getegid(),
                            map->host_gid + (p->gid - map->inside_gid), &userns_fd, err);
        if (r < 0)
                return r;
        int *fds = malloc((p->n_mounts + 1) * sizeof(*fds));
        if (!fds)
                return nsbox_err(err, ENOMEM, "id-mapped binds");
        for (size_t i = 0; i <= p->n_mounts; i++)
                fds[i] = -1;
        for (size_t i = 0; i < p->n_mounts; i++)
                if (p->mounts[i].type == MOUNT_BIND && !p->mounts[i].no_idmap &&
                    (r = idmapped_tree(&p->mounts[i], userns_fd, &fds[i], err)) < 0) {
                        nsbox_idmapped_binds_close(fds, p->n_mounts);
                        return r;
                }
        *ret_fds = fds;
        return 0;
}

void nsbox_idmapped_binds_close(int *fds, size_t n)
{
        for (size_t i = 0; fds && i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(fds);
}
