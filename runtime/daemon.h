/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: one process, one epoll loop, many sandboxes (nsboxd(8)).  Clients speak JSON-RPC 2.0,
 * one object per line, on a unix stream socket; each sandbox's agent speaks the frame protocol
 * (proto.h) on its socketpair.  Everything either side sends is untrusted: sizes are bounded,
 * parsing is strict, and a bad client or a dead sandbox affects nothing else. */
#pragma once

#include "dconfig.h"
#include "error.h"

typedef struct nsbox_daemon_config {
        const char *socket_path; /* NULL: nsbox_paths_get's */
        int ready_fd;            /* written to and closed once listening, or -1 */
        const nsbox_dconfig *conf; /* checked by nsbox_daemon_check_config */
} nsbox_daemon_config;

/* Check what the daemon would do with conf: each template's create params as create would take
 * them (options, policy, the host's support).  One line in err naming the template. */
int nsbox_daemon_check_config(const nsbox_dconfig *conf, nsbox_error *err);

/* Runs until SIGTERM or SIGINT; then lets calls in flight finish (drain_timeout), destroys every
 * sandbox and returns 0. */
int nsbox_daemon_run(const nsbox_daemon_config *cfg, nsbox_error *err);
