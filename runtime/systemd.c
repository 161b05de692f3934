/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The two systemd protocols nsboxd speaks, without libsystemd: sd_notify(3) datagrams to
 * $NOTIFY_SOCKET, and sd_listen_fds(3) socket activation ($LISTEN_PID, $LISTEN_FDS, fd 3). */
#include "systemd.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

#define LISTEN_FDS_START 3

int nsbox_sd_notify(const char *state)
{
        const char *path = getenv("NOTIFY_SOCKET");
        if (!path || !*path)
                return 0;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(path);
        /* a path, or '@' for the abstract namespace */
        if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
                return -EINVAL;
        memcpy(sa.sun_path, path, len);
        if (path[0] == '@')
                sa.sun_path[0] = '\0';
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
        if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
                return -errno;
        return 1;
}

int nsbox_sd_listen_fd(int *ret, nsbox_error *err)
{
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        *ret = -1;
        if (!pid || !fds)
                return 0;
        uint64_t p, n;
        /* for us, not for a process we were started by */
        if (parse_u64(pid, 1, UINT64_MAX, &p) < 0 || p != (uint64_t)getpid())
                return 0;
        /* ours: not to be passed on to the sandboxes' helpers */
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        if (parse_u64(fds, 0, UINT64_MAX, &n) < 0)
                return nsbox_err(err, 0, "socket activation: LISTEN_FDS='%s' is not a number", fds);
        if (n == 0)
                return 0;
        if (n != 1)
                return nsbox_err(err, 0, "socket activation: %s sockets passed (LISTEN_FDS), nsboxd serves exactly one", fds);
        int fd = LISTEN_FDS_START, type = 0, domain = 0, listening = 0;
        socklen_t l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &(socklen_t){ sizeof(int) }) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &(socklen_t){ sizeof(int) }) < 0) {
                if (errno != ENOTSOCK)
                        return nsbox_err(err, errno, "socket activation: fd %d", fd);
                listening = 0; /* a file, a pipe: refused below */
        }
        if (domain != AF_UNIX || type != SOCK_STREAM || !listening)
                return nsbox_err(err, 0, "socket activation: fd %d is not a listening unix stream socket (ListenStream= a path)", fd);
        int flags = fcntl(fd, F_GETFD);
        int fl = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0 || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return nsbox_err(err, errno, "socket activation: fd %d", fd);
        *ret = fd;
        return 1;
}
