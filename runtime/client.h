/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A client of nsboxd (the nsbox create/exec/call/cp/ls/rm commands): connects to the calling
 * user's daemon, starting one when none runs, and makes JSON-RPC calls, passing the
 * notifications that arrive meanwhile (streamed output) to a callback. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "util.h"

typedef struct nsbox_client {
        int fd;
        strbuf in;      /* bytes of the reply line being read */
        long long next_id;
        /* per connection, not static: a library user may hold several at once */
        char *rbuf;     /* bytes read from fd, not yet consumed (RBUF_SIZE, made on first read) */
        size_t rhave, rat;
        char code[64];  /* the stable code of the last error reply */
        bool stop;      /* set by an event callback: the call gives up at once (-ECANCELED, no
                         * code), leaving its reply unread: the connection is then unusable */
} nsbox_client;

/* autostart: start nsboxd when nothing listens: the one next to this executable, else the
 * installed one (NSBOX_BINDIR), else from PATH. */
int nsbox_client_connect(bool autostart, nsbox_client *ret, nsbox_error *err);
void nsbox_client_close(nsbox_client *c);

typedef void (*nsbox_client_event_fn)(json_t *params, void *userdata);

/* One call: params is taken (json_decref'd).  Returns 0 with *ret_result (the caller's), or a
 * negative errno with err set to the daemon's message and *ret_code (storage of c, valid until
 * the next call) to its stable code ("file_not_found", ...). */
int nsbox_client_call(nsbox_client *c, const char *method, json_t *params, nsbox_client_event_fn on_event, void *userdata,
                      json_t **ret_result, const char **ret_code, nsbox_error *err);
/* The same with fd passed along with the request (SCM_RIGHTS; the caller keeps its copy): for a
 * "call" of write_file or read_file with "fd": true, whose bytes go through that pipe. */
int nsbox_client_call_fd(nsbox_client *c, const char *method, json_t *params, int fd, json_t **ret_result, const char **ret_code,
                         nsbox_error *err);
