/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a node tells the layer between nodes (nsboxd(8), CLUSTER): its free capacity, as HAProxy's
 * agent-check reads it, so a router places creates where there is room.  One line per
 * connection, then close: nothing a peer sends is kept, nothing waits on it. */
#include "internal.h"
#include <errno.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../dlog.h"

/* Creates this node can still take: max_sandboxes (and the memory budget at the default memory)
 * less the sandboxes in use; pooled ones count as free, a create takes them. */
unsigned cluster_free(const daemon_state *d)
{
        const nsbox_dconfig *cf = d->conf;
        unsigned used = 0;
        uint64_t mem = 0;
        for (const sandbox *s = d->sandboxes; s; s = s->next)
                if (!s->pooled) {
                        used++;
                        mem += s->mem_commit;
                }
        unsigned max = cf->max_sandboxes < MAX_SANDBOXES ? cf->max_sandboxes : MAX_SANDBOXES;
        unsigned left = used < max ? max - used : 0;
        if (cf->memory_budget && cf->default_memory) {
                uint64_t by_mem = (mem < cf->memory_budget ? cf->memory_budget - mem : 0) / cf->default_memory;
                left = by_mem < left ? (unsigned)by_mem : left;
        }
        return left;
}

/* HAProxy's agent-check: "up ready N%" with N% of the server's weight (256 in contrib/haproxy)
 * standing for one free slot per unit, so a node with twice the room is drawn twice as often;
 * "drain" when full or stopping (no new creates; what it holds is still routed to it). */
int cluster_agent_reply(const daemon_state *d, char *buf, size_t n)
{
        unsigned left = d->stopping ? 0 : cluster_free(d);
        if (!left)
                return snprintf(buf, n, "drain\n");
        unsigned pct = (left * 100 + CLUSTER_WEIGHT - 1) / CLUSTER_WEIGHT;
        return snprintf(buf, n, "up ready %u%%\n", pct > 100 ? 100 : pct);
}

int cluster_open(daemon_state *d, nsbox_error *err)
{
        d->agent_fd = -1;
        if (!d->conf->agent_check[0])
                return 0;
        int fd = tcp_listen_on("cluster.agent_check", d->conf->agent_check, err);
        if (fd < 0)
                return fd;
        d->agent_fd = fd;
        if (nsbox_epoll_add(d->epfd, fd, KEY(1, K_LISTEN), NULL, EPOLLIN) < 0)
                return nsbox_err(err, errno, "cluster.agent_check: epoll");
        dlog(LOG_NOTICE, "cluster.agent_check", NULL, "node '%s': HAProxy agent-check on %s", d->conf->node[0] ? d->conf->node : "(no name)",
             d->conf->agent_check);
        return 0;
}

void cluster_accept(daemon_state *d)
{
        for (int i = 0; i < 64; i++) { /* then back to the loop: others wait their turn */
                int fd = accept4(d->agent_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                char msg[32], junk[256];
                int n = cluster_agent_reply(d, msg, sizeof(msg));
                (void)!send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
                for (int k = 0; k < 4 && recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0; k++) /* agent-send: read, so close sends no reset */
                        ;
                close(fd);
        }
}

void cluster_close(daemon_state *d)
{
        if (d->agent_fd >= 0)
                close(d->agent_fd);
        d->agent_fd = -1;
}
