/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: one process, one epoll loop, many sandboxes (nsboxd(8)).  Clients speak JSON-RPC 2.0,
 * one object per line, on a unix stream socket; each sandbox's agent speaks the frame protocol
 * (proto.h) on its socketpair.  Everything either side sends is untrusted: sizes are bounded,
 * parsing is strict, and a bad client or a dead sandbox affects nothing else. */
#pragma once

#include "dconfig.h"
#include "error.h"
#include "util.h"

typedef struct nsbox_daemon_config {
        const char *socket_path; /* NULL: nsbox_paths_get's */
        int ready_fd;            /* written to and closed once listening, or -1 */
        const nsbox_dconfig *conf; /* checked by nsbox_daemon_check_config */
} nsbox_daemon_config;

/* Check what the daemon would do with conf: each template's create params as create would take
 * them (options, policy, the host's support).  One line in err naming the template. */
int nsbox_daemon_check_config(const nsbox_dconfig *conf, nsbox_error *err);
/* nsboxd --check-config: start one sandbox of each template and destroy it; the first that
 * does not start fails, its name and the reason in err. */
int nsbox_daemon_check_templates_start(const nsbox_dconfig *conf, nsbox_error *err);

/* Runs until SIGTERM or SIGINT; then lets calls in flight finish (drain_timeout), destroys every
 * sandbox and returns 0. */
int nsbox_daemon_run(const nsbox_daemon_config *cfg, nsbox_error *err);

/* One line a client sent, checked as a JSON-RPC 2.0 request before anything acts on it (pure:
 * no daemon state, no I/O; factored out so that it can be fuzzed, tests/fuzz/rpc.c). */
typedef struct nsbox_rpc_request {
        json_t *msg;        /* the whole request (owned) */
        json_t *id;         /* owned reference; NULL when absent (a notification) */
        const char *method; /* inside msg */
        json_t *params;     /* owned reference: the request's object, or a new empty one */
        int rpc_code;       /* on failure: the JSON-RPC error code to answer with */
        char why[256];      /* on failure: the one-line message */
} nsbox_rpc_request;

/* 0 with ret filled (release with nsbox_rpc_request_release); -EINVAL (or -ENOMEM) with
 * ret->rpc_code, ret->why and ret->id (the id to answer with, or NULL; the caller releases it). */
int nsbox_rpc_parse(const char *line, size_t len, nsbox_rpc_request *ret);
void nsbox_rpc_request_release(nsbox_rpc_request *rq);
