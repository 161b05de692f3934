/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The peer of a host-side socket (peer.h). */
#include "peer.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

__attribute__((format(printf, 4, 5))) static int refuse(int r, char *why, size_t size, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, size, fmt, ap);
        va_end(ap);
        return r;
}

/* The pid a pidfd stands for, in our pid namespace (fdinfo's Pid: 0 when not visible to us, -1
 * once it has exited). */
static int pidfd_pid(int pidfd, pid_t *ret)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        _cleanup_free_ char *text = NULL;
        int r = read_file_at(AT_FDCWD, path, 0, 4096, &text, NULL);
        if (r < 0)
                return r;
        const char *p = !strncmp(text, "Pid:", 4) ? text : strstr(text, "\nPid:");
        if (!p)
                return -ENOENT;
        *ret = (pid_t)strtol(p + (*p == '\n' ? 5 : 4), NULL, 10);
        return 0;
}

static int same_ns(int procfd, const char *name, char *why, size_t size)
{
        char self[32];
        snprintf(self, sizeof(self), "/proc/self/ns/%s", name);
        struct stat ours, theirs;
        if (stat(self, &ours) < 0)
                return refuse(-errno, why, size, "cannot read our own %s namespace: %s", name, strerror(errno));
        char rel[16];
        snprintf(rel, sizeof(rel), "ns/%s", name);
        /* ptrace read access is needed: a peer of another user or not dumpable cannot be checked */
        if (fstatat(procfd, rel, &theirs, 0) < 0) {
                if (errno == ESRCH || errno == ENOENT)
                        return refuse(-ESRCH, why, size, "it has exited");
                return refuse(-errno, why, size, "cannot read its %s namespace: %s", name, strerror(errno));
        }
        if (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino)
                return refuse(-EPERM, why, size, "it runs in another %s namespace (inside a sandbox)", name);
        return 0;
}

/* Root as the client of a user's nsboxd, which may not read root's namespaces: root can do all
 * that the user can anyway, so its pid namespace is enough, read from its world-readable status
 * (NSpid lists its pid in each pid namespace from ours down: one entry, ours).  Only nsbox's
 * sandboxes are refused this way; none of them is root on the host. */
static int root_in_our_pid_ns(int procfd, char *why, size_t size)
{
        _cleanup_free_ char *status = NULL;
        int r = read_file_at(procfd, "status", 0, 1 << 16, &status, NULL);
        if (r < 0)
                return refuse(r == -ESRCH || r == -ENOENT ? -ESRCH : r, why, size, "cannot read its status: %s", strerror(-r));
        const char *line = strstr(status, "\nNSpid:");
        if (!line)
                return refuse(-EPERM, why, size, "cannot tell its pid namespace (no NSpid in its status)");
        line += 7;
        unsigned n = 0;
        for (const char *c = line; *c && *c != '\n';) {
                while (*c == ' ' || *c == '\t')
                        c++;
                if (*c >= '0' && *c <= '9')
                        n++;
                while (*c && *c != ' ' && *c != '\t' && *c != '\n')
                        c++;
        }
        if (n != 1)
                return refuse(-EPERM, why, size, "it runs in another pid namespace (inside a sandbox)");
        return 0;
}

static int peer_check(int fd, bool peerpidfd, char *why, size_t size)
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return refuse(-errno, why, size, "no credentials: %s", strerror(errno));
        /* 0: an ancestor's pid namespace, or another one than ours: not a host process */
        if (cred.pid <= 0)
                return refuse(-EPERM, why, size, "its process is not visible in our pid namespace (inside a sandbox)");
        _cleanup_close_ int pidfd = -1;
        len = sizeof(pidfd);
        if (!peerpidfd)
                errno = ENOPROTOOPT;
        if (peerpidfd && getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0) {
                /* the same process as SO_PEERCRED's pid, which /proc below is read by */
                pid_t pid = 0;
                int r = pidfd_pid(pidfd, &pid);
                if (r < 0)
                        return refuse(r, why, size, "cannot read its pidfd: %s", strerror(-r));
                if (pid < 0)
                        return refuse(-ESRCH, why, size, "it has exited");
                if (pid != cred.pid)
                        return refuse(-EPERM, why, size, "its pidfd names pid %d, not %d", (int)pid, (int)cred.pid);
        } else if (errno == ENOPROTOOPT) {
                pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
                if (pidfd < 0 && errno == ESRCH)
                        return refuse(-ESRCH, why, size, "it has exited");
                if (pidfd < 0)
                        return refuse(-errno, why, size, "pidfd_open: %s", strerror(errno));
        } else if (errno == EINVAL || errno == ESRCH) {
                return refuse(-ESRCH, why, size, "it has exited"); /* no task left for a pidfd */
        } else {
                return refuse(-errno, why, size, "SO_PEERPIDFD: %s", strerror(errno));
        }
        char path[32];
        snprintf(path, sizeof(path), "/proc/%d", (int)cred.pid);
        _cleanup_close_ int procfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (procfd < 0)
                return refuse(-ESRCH, why, size, "it has exited");
        int r = same_ns(procfd, "user", why, size);
        if (r == -EACCES && cred.uid == 0 && geteuid() != 0)
                r = root_in_our_pid_ns(procfd, why, size);
        else if (r == 0)
                r = same_ns(procfd, "pid", why, size);
        if (r < 0)
                return r;
        /* alive now: so /proc/PID above was this very process (a pid is not reused while its
         * process lives).  A pidfd polls readable once its process has exited. */
        struct pollfd pf = { .fd = pidfd, .events = POLLIN };
        if (poll(&pf, 1, 0) != 0)
                return refuse(-ESRCH, why, size, "it has exited");
        return 0;
}

int nsbox_peer_check(int fd, char *why, size_t size) { return peer_check(fd, true, why, size); }
int nsbox_peer_check_without_peerpidfd(int fd, char *why, size_t size) { return peer_check(fd, false, why, size); }
