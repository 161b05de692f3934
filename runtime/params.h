/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* create's parameters, one table: each row is a JSON key of create (nsbox-protocol(7)) and/or a
 * flag of nsbox run/create/mcp/replay (nsbox(1)), its type, its check, who may set it.  The
 * command line and a JSON params object are parsed by the table into the same options struct
 * (options.h), with no argument vector in between and no static state: parsers may run at once
 * in several threads. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "options.h"

typedef enum nsbox_param_type {
        NSBOX_PARAM_STRING,  /* a string, as given */
        NSBOX_PARAM_PATH,    /* a host path (or a name): the CLI sends it resolved */
        NSBOX_PARAM_SIZE,    /* "512M" or, in JSON, a number of bytes */
        NSBOX_PARAM_COUNT,   /* a whole number in a range */
        NSBOX_PARAM_NUMBER,  /* a real number in a range */
        NSBOX_PARAM_SECONDS, /* a duration in seconds, held in milliseconds */
        NSBOX_PARAM_LIST,    /* repeatable: a JSON array of strings */
        NSBOX_PARAM_ENV,     /* repeatable K=V (or K on the command line); JSON: array or map */
        NSBOX_PARAM_LABELS,  /* repeatable K=V; JSON: a map */
        NSBOX_PARAM_FLAG,    /* no value; JSON: true or false */
        NSBOX_PARAM_ENV_FILE, /* the command line's --env-file: its lines go to the ENV list */
        NSBOX_PARAM_TYPE_MAX,
} nsbox_param_type;

/* the commands a flag is taken by */
enum {
        NSBOX_CMD_RUN = 1 << 0,
        NSBOX_CMD_CREATE = 1 << 1,
        NSBOX_CMD_MCP = 1 << 2,
        NSBOX_CMD_REPLAY = 1 << 3,
};

/* who may set a JSON key, and what nsboxd does with it */
enum {
        /* shapes no sandbox: nsboxd's create reads it apart, and it goes with a template */
        NSBOX_PARAM_LIFECYCLE = 1 << 0,
        /* needs nsboxd (its loop, list, configuration or store): refused in-process */
        NSBOX_PARAM_DAEMON_ONLY = 1 << 1,
        /* names host paths or state of root: a tenant of a root nsboxd may not set it */
        NSBOX_PARAM_OPERATOR_ONLY = 1 << 2,
};

typedef struct nsbox_param nsbox_param;
struct nsbox_param {
        const char *key;   /* create's JSON key, or NULL: a flag of the command line only */
        const char *flag;  /* the long flag without "--", or NULL: a JSON key only */
        char short_flag;   /* 'e', or 0 */
        nsbox_param_type type;
        unsigned commands; /* NSBOX_CMD_*: where the flag is taken */
        unsigned who;      /* NSBOX_PARAM_LIFECYCLE, ... */
        size_t off;        /* the value in nsbox_run_options */
        size_t has_off;    /* its has_ bool, or 0 for none */
        uint64_t min, max; /* COUNT, SIZE (min), SECONDS (max ms, 0: none) */
        const char *expect; /* the tail of a refusal: "expected ..." */
        /* a further check of one value; its message is wrapped in "CMD: --FLAG" */
        int (*check)(const char *value, nsbox_error *err);
        /* what a client may not send nsboxd (a relative path, ...): why, or 0 */
        int (*client_check)(const nsbox_param *p, const char *value, strbuf *why);
        const char *doc;
};

/* The table, and its length. */
extern const nsbox_param nsbox_params[];
extern const size_t nsbox_n_params;

/* --env-file: docker's format (NAME=VALUE or NAME lines, # comments, blank lines) appended to
 * *env as K=V or K; a bad line is -EINVAL naming it.  At most ENV_FILE_MAX bytes. */
#define ENV_FILE_MAX (1u << 20)
#define ENV_FILE_LINE_MAX 65536u
int nsbox_env_file_read(const char *path, char ***env, nsbox_error *err);

/* The candidate closest to WORD, near enough to be a typo of it (or one the start of the
 * other), or NULL: "did you mean" for commands and options. */
const char *nsbox_closest_word(const char *word, const char *const *candidates, size_t n);

/* The row of JSON key KEY, or of long flag FLAG; NULL when there is none. */
const nsbox_param *nsbox_param_by_key(const char *key);
const nsbox_param *nsbox_param_by_flag(const char *flag);
/* Is KEY a key of the table whose row has one of the WHO bits? */
bool nsbox_param_is(const char *key, unsigned who);

/* null, [] and {} give nothing (the CLI sends its empty lists), as nsboxd's create reads them */
bool nsbox_param_given(json_t *v);

/* The first key of params with one of the WHO bits that is given, or NULL. */
const char *nsbox_params_first(json_t *params, unsigned who);
/* Delete the keys with one of the WHO bits from params. */
void nsbox_params_strip(json_t *params, unsigned who);
/* The first key of params that names a host path, which only an operator may ask of a root
 * nsboxd (rootfs "host" and a policy name name none), or NULL. */
const char *nsbox_params_operator_only(json_t *params);

/* create's params object into o, checked as the command line is, keys with one of the SKIP bits
 * left to the caller.  o's strings point into params, which the caller keeps alive while it
 * uses o; its lists are its own (nsbox_run_options_release).  Unknown keys and bad values:
 * -EINVAL with "create: why" in err; o is to be released either way. */
int nsbox_params_from_json(json_t *params, unsigned skip, nsbox_run_options *o, nsbox_error *err);

/* The create params object the options ask for, host paths resolved against this process's
 * directory, and -e NAME taken from its environment (the CLI's side of the protocol). */
int nsbox_params_to_json(const nsbox_run_options *o, json_t **ret, nsbox_error *err);
