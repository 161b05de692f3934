/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's configuration file (nsboxd(8), CONFIGURATION): capacity, lifetimes, who may connect,
 * and templates with their warm pools.  Parsed strictly: an unknown key, a wrong type or a value
 * out of range is refused in one line naming the key, and nothing starts. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "ids.h"

#define NSBOX_DCONFIG_MAX_SANDBOXES 4096u
#define NSBOX_DCONFIG_MAX_POOL 1024u
#define NSBOX_DCONFIG_MAX_TEMPLATES 64u
#define NSBOX_DCONFIG_MAX_WARMUP_ARGS 16u /* a template's warmup: strings of at most 1024 bytes */
#define NSBOX_DCONFIG_MAX_CLIENTS 256u
#define NSBOX_TEMPLATE_NAME_MAX 64
#define NSBOX_DCONFIG_MAX_CONNECTIONS 1024u /* connections at once, every uid together */
#define NSBOX_HTTP_LISTEN_MAX 64 /* "[IPv6]:PORT" fits */

typedef struct nsbox_template {
        char name[NSBOX_TEMPLATE_NAME_MAX + 1];
        json_t *create; /* create's params, checked by the daemon (nsbox_daemon_load_config) */
        unsigned pool;  /* kept started and idle */
        unsigned max;   /* of this template at once, pooled ones included */
        json_t *warmup; /* argv run once in each new pooled sandbox before it is handed out; NULL: the default, []: none */
} nsbox_template;

typedef struct nsbox_dconfig {
        char *source;          /* the file, or NULL for the built-in defaults */
        unsigned max_sandboxes, max_per_uid;
        bool max_per_uid_given;  /* else it holds for tenants only (max_sandboxes/4, at least 1) */
        /* tenants (nsboxd(8), LIMITS): connections and buffered request bytes per uid, timeouts
         * of connections that send half a request or nothing, disk per sandbox and per uid */
        unsigned max_connections_per_uid;
        uint64_t max_request_bytes_per_uid;
        uint64_t request_timeout_ms, handshake_timeout_ms; /* 0: none */
        uint64_t max_disk;         /* the disk a client's create may ask for */
        uint64_t max_disk_per_uid; /* the disk of one uid's sandboxes together; 0: none */
        uint64_t memory_budget;  /* 0: none */
        uint64_t default_memory; /* with a budget, for sandboxes that name no limit */
        uint64_t timeout_ms, idle_timeout_ms, drain_timeout_ms;
        bool expiry_pause;
        bool expiry_files;   /* on_expiry "pause_files": the pause keeps only its files */
        bool keep_on_stop;       /* on_stop "keep": SIGTERM hands the sandboxes to the next nsboxd */
        uint64_t keep_timeout_ms; /* how long kept sandboxes wait for it before they are destroyed */
        uid_t *client_uids;
        size_t n_client_uids;
        gid_t *client_gids;
        size_t n_client_gids;
        nsbox_template *templates;
        size_t n_templates;
        /* the HTTP API (http.listen, or nsboxd --http): "ADDR:PORT" or "[ADDR6]:PORT"; "": off */
        char http_listen[NSBOX_HTTP_LISTEN_MAX];
        char *http_keys; /* http.keys: the API key file, absolute; NULL: the default (apikeys.c) */
        char *http_domain;       /* http.domain: PORT-ID.DOMAIN hosts reach sandboxes' ports */
        bool http_internet;      /* http.internet: E2B sandboxes reach the internet unless they say not */
        bool http_public_traffic; /* http.public_traffic: their ports need no token unless they say so */
        /* cluster.node (or nsboxd --node): this node's name, the suffix of its sandboxes' ids; "": none */
        char node[NSBOX_NODE_MAX + 1];
        /* cluster.agent_check: "ADDR:PORT" answering HAProxy's agent-check with the free capacity; "": off */
        char agent_check[NSBOX_HTTP_LISTEN_MAX];
        char *redis;             /* cluster.redis: "HOST:PORT", "[ADDR6]:PORT" or "unix:PATH"; NULL: none */
        uint64_t catalog_ttl_ms; /* cluster.catalog_ttl: how long a node's records outlive its last heartbeat */
} nsbox_dconfig;

/* The default path for this user: /etc/nsbox/nsboxd.json for root, else
 * $XDG_CONFIG_HOME/nsbox/nsboxd.json (~/.config/...).  Allocated. */
char *nsbox_dconfig_default_path(void);
/* Load path; a missing file is an error when required, the defaults otherwise. */
int nsbox_dconfig_load(const char *path, bool required, nsbox_dconfig *ret, nsbox_error *err);
/* Parse a configuration given as JSON (source names it in messages). */
int nsbox_dconfig_parse(json_t *root, const char *source, nsbox_dconfig *ret, nsbox_error *err);
void nsbox_dconfig_defaults(nsbox_dconfig *ret);
void nsbox_dconfig_release(nsbox_dconfig *c);
/* 0 when s is "IPV4:PORT" or "[IPV6]:PORT" (port 1-65535) and fits http_listen; else -EINVAL. */
int nsbox_dconfig_check_listen(const char *s);
/* The template named name, or NULL. */
const nsbox_template *nsbox_dconfig_template(const nsbox_dconfig *c, const char *name);
