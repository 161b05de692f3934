/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Options of `nsbox run`, create, mcp and replay, and create's params: parsed into data first
 * (params.h, one table for the command line and JSON), applied onto the policy second, so every
 * option is checked before anything happens. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "util.h"
#include "policy.h"

typedef struct nsbox_run_options {
        const char *policy;  /* NAME or FILE, default "default" */
        const char *rootfs;  /* "host" or a directory */
        const char *workdir;
        const char *hostname;
        const char *net;
        const char *limits_mode; /* required or best-effort: how the limits given must hold */
        bool limits_as_policy;   /* limits from configuration (a template): the policy's enforce */
        char **binds;  /* SRC:DST[:rw] as given */
        char **tmpfs;  /* DST[:SIZE] as given */
        char **env;    /* K=V or K */
        char **labels; /* create: K=V */
        char **allow;  /* egress entries, as given */
        char **publish; /* [127.0.0.1:]HOSTPORT[:PORT], as given */
        const char *from;   /* a snapshot to start from */
        const char *image;  /* an imported image to start from (nsbox image) */
        const char *repo;   /* create: a repository for the workdir, and its commit */
        const char *commit;
        const char *record; /* create: a trajectory file */
        uint64_t count;     /* create: how many sandboxes (default 1) */
        const char *template_name; /* create: a template of nsboxd's configuration */
        const char *on_expiry;     /* create: destroy, pause or pause_files */
        bool reuse;                /* create: get_or_create by the labels */
        bool close_with_client;    /* create's JSON only */
        bool progress;             /* create's JSON only: progress events while a repository is cloned */
        bool writable_root;        /* create's JSON only: the root writable (the policy's root.readonly false) */
        bool has_idle, has_wait;
        uint64_t idle_ms, wait_ms;
        bool has_timeout, has_disk, has_memory, has_pids, has_cpus;
        uint64_t timeout_ms, disk, memory, pids;
        double cpus;
        bool json;
        bool tty, interactive, rm; /* run: -t, -i, --rm (the last two change nothing) */
        bool help;
        char **argv; /* the command: points into the caller's argv, NULL-terminated */
        /* Strings point into the argv or the JSON params parsed (kept alive by the caller while
         * the options are used); the lists are the options' own (nsbox_run_options_release). */
} nsbox_run_options;

/* argv[0] is the subcommand name ("run" needs a command; "create" takes none, and --label).
 * Returns 0, or -EINVAL with a one-line message in err; o is to be released either way.  The
 * parser is params.c's, by the table: no getopt state, none of its own. */
int nsbox_run_options_parse(int argc, char **argv, nsbox_run_options *ret, nsbox_error *err);
/* Load the policy the options name and merge the options into it. */
int nsbox_run_options_policy(const nsbox_run_options *o, nsbox_policy **ret, nsbox_error *err);
void nsbox_run_options_release(nsbox_run_options *o);
