/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A policy says, for one kind of sandbox, who runs inside, what root it sees, what it may mount,
 * its limits, its network and its seccomp rules (nsbox-policy(5)).  It is parsed and validated
 * whole, then merged with command-line options, before any namespace exists. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define NSBOX_MAX_MOUNTS 256
#define NSBOX_MAX_ENV 1024
#define NSBOX_MAX_SECCOMP_RULES 512
#define NSBOX_MAX_POLICY_BYTES (1u << 20)
#define NSBOX_DEFAULT_DISK (1ull << 30) /* limits.disk when the policy sets none */

typedef enum { ROOT_HOST, ROOT_DIR, _ROOT_MAX } nsbox_root_type;
typedef enum { MOUNT_BIND, MOUNT_TMPFS, _MOUNT_MAX } nsbox_mount_type;
typedef enum { NET_NONE, NET_NAT, _NET_MAX } nsbox_net_mode;
typedef enum { NET_BACKEND_SLIRP4NETNS, NET_BACKEND_VETH, _NET_BACKEND_MAX } nsbox_net_backend;
typedef enum { ENFORCE_BEST_EFFORT, ENFORCE_REQUIRED, _ENFORCE_MAX } nsbox_enforce;
typedef enum { SC_ALLOW, SC_ERRNO, SC_KILL, SC_TRAP, SC_LOG, _SC_ACTION_MAX } nsbox_sc_action;
typedef enum { SC_OP_EQ, SC_OP_NE, SC_OP_LT, SC_OP_LE, SC_OP_GT, SC_OP_GE, SC_OP_MASKED_EQ, _SC_OP_MAX } nsbox_sc_op;

typedef struct nsbox_mount {
        nsbox_mount_type type;
        char *source; /* bind: host path, absolute, resolved at validation */
        char *target; /* absolute path inside the sandbox, normalized */
        bool readonly;
        bool no_idmap; /* bind, root caller: shown as it is, not id-mapped (idmapped.h) */
        uint64_t size; /* tmpfs: bytes, 0 = the kernel's default */
} nsbox_mount;

typedef struct nsbox_sc_arg {
        unsigned index; /* 0..5 */
        nsbox_sc_op op;
        uint64_t value;
        uint64_t mask; /* masked_eq only */
} nsbox_sc_arg;

typedef struct nsbox_sc_rule {
        int *syscalls; /* resolved numbers for the native architecture */
        size_t n_syscalls;
        nsbox_sc_action action;
        int errnum;
        nsbox_sc_arg args[6];
        unsigned n_args;
} nsbox_sc_rule;

/* A host loopback port published to a port inside the sandbox (network.publish, --publish). */
typedef struct nsbox_publish {
        uint16_t host_port, port;
} nsbox_publish;
#define NSBOX_MAX_PUBLISH 64
#define NSBOX_MAX_EGRESS 64

typedef struct nsbox_limits {
        uint64_t memory, swap, pids, disk, output, nofile, fsize; /* 0 = not set */
        bool swap_set;
        double cpus;               /* 0 = not set */
        uint64_t timeout_ms;       /* 0 = none */
        nsbox_enforce enforce;
} nsbox_limits;

typedef struct nsbox_policy {
        char *source; /* where it came from, for messages */

        char *user_name, *home;
        uint32_t uid, gid;

        nsbox_root_type root;
        char *root_path; /* ROOT_DIR */
        bool root_readonly;
        bool python_venv; /* root.python_venv: the host view's Python environment (pyvenv.h) */

        char *workdir;
        char *hostname;
        nsbox_mount *mounts;
        size_t n_mounts;
        char **env; /* "K=V", later entries win */

        nsbox_limits limits;
        /* Borrowed, never from a policy file: store layers (store.h) under the writable one,
         * topmost first, host paths; NULL for none. */
        char *const *layers;
        /* Borrowed too: root only, the first host id of the sandbox's own range (userns.h); 0 for
         * the shared one. */
        uint32_t host_id_base;
        /* Set by nsboxd with on_stop "keep", never from a policy file: the agent and its
         * slirp4netns have no parent-death signal, so they can outlive the supervisor while a
         * keeper holds their channels (they still end when their channel or exit fd closes). */
        bool outlive_parent;
        nsbox_net_mode net;
        nsbox_net_backend net_backend; /* mode nat: slirp4netns (default) or veth (root) */
        char **egress;        /* network.egress, then --allow: entries checked by net.h; NULL = none */
        bool egress_set;      /* a list was given, even an empty one: everything not on it is refused */
        bool dns;             /* nat: a resolver in the sandbox (default true) */
        bool host_loopback;   /* nat: the gateway address reaches the host's 127.0.0.1 (default false) */
        nsbox_publish *publish;
        size_t n_publish;
        uint64_t caps; /* bit mask of capabilities kept, default 0; nsbox_container_caps for uid 0 */

        nsbox_sc_action sc_default;
        int sc_default_errno;
        nsbox_sc_rule *sc_rules;
        size_t n_sc_rules;
        uint64_t sc_socket_families; /* allowed AF_* as bits; all bits set = no restriction */
        uint32_t sc_netlink_protocols; /* allowed NETLINK_* as bits */
        bool sc_socket_restricted;
        nsbox_sc_action sc_foreign_arch; /* SC_KILL or SC_ERRNO (ENOSYS) */
} nsbox_policy;

/* The capabilities a policy whose user is uid 0 keeps unless it names its own. */
extern const uint64_t nsbox_container_caps;

/* policy/default.json as nsbox was built with it, NUL-terminated (runtime/policy_default.c). */
extern const char nsbox_default_policy_json[] __attribute__((visibility("hidden")));

/* A policy name: 1 to 64 letters, digits, '.', '_' and '-', starting with a letter, a digit or
 * '_', not ending in ".json".  Found only as NAME.json in the policy directories. */
bool nsbox_policy_name_valid(const char *name);
/* Find a policy by NAME (the policy directories) or by FILE (contains '/' or ends in .json, as
 * the command line takes it; a client of nsboxd gives a name or an absolute path, which
 * params.c checks first). */
int nsbox_policy_find(const char *name_or_file, char **ret_path, nsbox_error *err);
/* Parse and validate; on failure nothing is allocated and err says file, key and reason.  The
 * policy inherits every key it does not set from the built-in default (a JSON merge patch,
 * RFC 7396, onto it) unless it says "inherit": false. */
int nsbox_policy_load(const char *path, nsbox_policy **ret, nsbox_error *err);
int nsbox_policy_parse(const char *text, size_t len, const char *source, nsbox_policy **ret, nsbox_error *err);
void nsbox_policy_free(nsbox_policy *p);

/* Helpers shared by the policy parser and the command line. */
int nsbox_parse_mount_bind(const char *spec, nsbox_mount *ret, nsbox_error *err);  /* SRC:DST[:rw|:ro][,noidmap] */
int nsbox_parse_mount_tmpfs(const char *spec, nsbox_mount *ret, nsbox_error *err); /* DST[:SIZE] */
int nsbox_validate_mount(nsbox_mount *m, const char *what, nsbox_error *err);
int nsbox_policy_add_mount(nsbox_policy *p, nsbox_mount *m, nsbox_error *err); /* takes m's strings */
int nsbox_policy_set_env(nsbox_policy *p, const char *kv, nsbox_error *err);   /* K=V, or K to inherit */
/* KEY=VALUE unless the environment sets KEY already. */
int nsbox_policy_env_default(nsbox_policy *p, const char *key, const char *value, nsbox_error *err);
int nsbox_check_hostname(const char *h);
/* A directory the sandbox user may write (workdir, home): normalized, not /, not under /proc,
 * /dev or /sys.  -EINVAL otherwise. */
int nsbox_check_writable_dir(const char *path, char **ret);
/* Normalize an absolute sandbox path: collapse '//' and '/./', refuse '..' and relative paths. */
int nsbox_normalize_sandbox_path(const char *in, char **ret);
void nsbox_mount_release(nsbox_mount *m);
/* Append a checked egress entry (--allow) or a published port; both set what they imply. */
int nsbox_policy_add_egress(nsbox_policy *p, const char *spec, nsbox_error *err);
int nsbox_policy_add_publish(nsbox_policy *p, const nsbox_publish *pub, nsbox_error *err);
const char *nsbox_policy_dir_default(void);
