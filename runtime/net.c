/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "net.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "util.h"

int nsbox_net_loopback_up(nsbox_error *err)
{
        /* One ioctl on a throwaway socket: a netlink round trip would cost more on every start. */
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return nsbox_err(err, errno, "loopback: socket");
        struct ifreq ifr = { 0 };
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return nsbox_err(err, errno, "loopback: get flags");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return nsbox_err(err, errno, "loopback: bring up");
        return 0;
}
