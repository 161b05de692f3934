/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's internals, shared by the files of runtime/daemon/ (the public header is ../daemon.h).
 * The rooms, each calling only the ones below it: loop.c (the event loop) -> http.c (the HTTP
 * API) -> http_control.c, http_envd.c (-> http_process.c, http_fs.c), http_files.c,
 * http_proxy.c -> clients.c (connections, tenants) -> rpc.c (requests) -> methods.c, create.c,
 * keep.c, apikeys.c (the HTTP API's keys) -> jobs.c (workers), calls.c (the agents' calls and
 * frames) -> record.c (trajectories), sandboxes.c -> reply.c.
 * Removing a sandbox (sandboxes.c) ends its worker and its calls (through its supervisor,
 * ../supervisor.h, which every room may use).
 *
 * Memory is bounded the same way as in the agent: a client whose replies pile up above
 * CLIENT_HIGH is not read from, and the agents streaming to it are told to pause those streams
 * (a stream nobody reads stops in the command's pipe, and other calls to the same sandbox go
 * on); a client CLIENT_HARD behind is disconnected. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "../daemon.h"
#include "../codes.h"
#include "../dconfig.h"
#include "../options.h"
#include "../policy.h"
#include "../proto.h"
#include "../sandbox.h"
#include "../store.h"
#include "../supervisor.h"
#include "../util.h"

#define MAX_LINE NSBOX_FRAME_MAX_JSON
#define CLIENT_HIGH (16u << 20)  /* streams to the client are paused in their agents above this */
#define HTTP_CLIENT_HIGH (1u << 20) /* the same for an HTTP request, whose stream holds 1 MiB more */
#define CLIENT_HARD (64u << 20)  /* a client this far behind on its replies is disconnected */
#define MAX_CLIENTS NSBOX_DCONFIG_MAX_CONNECTIONS
#define CLIENTS_KEPT_FOR_OPERATOR 64 /* of MAX_CLIENTS: only root and nsboxd's own uid take these */
#define NGROUPS_MAX_PEER 1024 /* a client's groups looked at (SO_PEERGROUPS) */
#define MAX_SANDBOXES NSBOX_DCONFIG_MAX_SANDBOXES
#define MAX_CALLS_PER_SANDBOX 1024
#define SANDBOX_LOG_MAX 128      /* a sandbox's log lines kept (sandbox_log_add) */
#define SANDBOX_LOG_CMD_MAX 200  /* bytes of a command's line in it */
#define SANDBOX_LOG_MSG_MAX 400  /* bytes of any line in it: 128 lines stay under 64 KiB */
#define READY_TIMEOUT_NS (30ull * 1000000000)
#define WARMUP_TIMEOUT_NS (10ull * 1000000000) /* a pooled sandbox's warm-up (create.c, pool_warm) */
#define PAUSE_TIMEOUT_MS 5000
#define REPO_TIMEOUT_NS (600ull * 1000000000) /* a clone, before the sandbox starts */
#define JOB_OUT_MAX 65536
#define MAX_WAIT_S 600                      /* create's wait for capacity */
#define MAX_WAITING 1024                    /* creates waiting for capacity at once; more: capacity at once */
#define LAT_RING 4096                       /* acquire latencies kept for stats */
#define POOL_STARTING_MAX 4                 /* pooled sandboxes of a template starting at once */
#define POOL_RETRY_MAX_NS (60ull * 1000000000) /* a template that fails to start is retried at most this late */
/* A handed-over sandbox's refill waits until its first calls are answered, or this long: on a
 * small machine a replacement starting meanwhile takes the cores the first call needs. */
#define POOL_REFILL_DELAY_NS (20ull * 1000000)
/* A pool's start holds the loop for a sandbox's start (a few milliseconds): it waits for a
 * moment with no client request for POOL_QUIET_NS, at most POOL_QUIET_MAX_NS, so that a client's
 * run of calls is not cut by it. */
#define POOL_QUIET_NS (2ull * 1000000)
#define POOL_QUIET_MAX_NS (50ull * 1000000)
#define NO_OWNER ((uid_t)-1)                /* a pooled sandbox, not handed out yet */

/* JSON-RPC error codes; the stable nsbox code is in error.data.code */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_SERVER_ERROR -32000

enum { K_LISTEN, K_SIGNAL, K_CLIENT, K_SYNC, K_AGENT, K_PIDFD, K_JOB, K_HTTP }; /* 3 bits of an epoll key */
#define RPC_CAPACITY "capacity"

/* Work that would stall the loop runs in a forked worker, which reports one JSON line on a pipe. */
enum { JOB_NONE, JOB_SNAPSHOT, JOB_REPO };
#define CATALOG_CLAIM_KEY 96 /* "nsbox:claim:UID:SHA256" (catalog.c) */
#define KEY(serial, kind) ((uint64_t)(serial) << 3 | (uint64_t)(kind))

/* A raw call's answer bytes, beside its reply line until the caller takes them (calls.c). */
typedef struct call_bytes {
        struct call_bytes *next;
        json_int_t rpc_id;
        char *data;
        size_t len;
} call_bytes;

#define CLIENT_MAX_FDS 4 /* descriptors a client may have queued for its requests */

typedef struct client {
        struct client *next;
        uint64_t serial;
        int fd;
        uid_t uid;
        strbuf in;
        gid_t gid;
        bool discarding; /* the rest of an oversized line */
        nsbox_queue out;
        bool eof;
        uint32_t events;
        bool spoke;                /* sent a byte: the handshake window is over */
        bool crowded;              /* silent while its uid was near its connection cap */
        uint64_t accepted_ns;
        uint64_t partial_since_ns; /* the first byte of an unfinished request line came then; 0: none */
        size_t counted;            /* of its uid's buffered request bytes (uid_use) */
        struct hreq *http;         /* an HTTP request's client: no socket (fd -1), http.h */
        call_bytes *bytes;         /* its raw calls' answers' bytes (calls.c, method_call_bytes) */
        int fds[CLIENT_MAX_FDS];   /* descriptors received (SCM_RIGHTS), oldest first, for "fd": true calls */
        unsigned n_fds;
} client;

/* What one uid holds of the connections and of the request bytes buffered (nsboxd(8), LIMITS). */
typedef struct uid_use {
        uid_t uid;
        unsigned conns;
        size_t buffered;
} uid_use;

/* nsboxd's part of a call in flight (the supervisor's call->data): who asked, and the recording. */
typedef struct pending {
        uint64_t client; /* serial; 0 once the client went away */
        json_t *rpc_id;
        uint64_t step, start_ns; /* recording: the step number and when it was asked */
        json_t *rec_params;      /* recording: the params as the client sent them */
        char tool[32];
        int internal;            /* nsboxd's own call, no client: what its answer is for (PENDING_*) */
} pending;
enum { PENDING_CLIENT, PENDING_INTERP_START, PENDING_REPO_CLONE, PENDING_WARMUP };

typedef struct sandbox {
        struct sandbox *next;
        uint64_t serial;
        uid_t owner;
        nsbox_supervisor sup;     /* its launcher handle, its agent and the calls in flight (supervisor.h) */
        struct daemon_state *d;   /* for the supervisor's callbacks */
        char *policy_name;
        json_t *labels;
        nsbox_limits limits;
        bool ready, paused;
        /* paused keeping only its files (paused too): its processes were killed, nothing is
         * frozen, and its resume is a reboot (methods.c, sandbox_pause) */
        bool paused_files;
        /* its processes were killed by such a pause or a resume that reboots: a code interpreter
         * starts again at its connect; boots counts them (the server's ready file is per boot) */
        bool rebooted;
        unsigned boots;
        bool fresh;               /* handed over from a pool; its refill waits for its first reply */
        /* a pooled code-interpreter sandbox's server, started before a create takes it: its pid;
         * 0 none yet (or its start still in flight), -1 its start failed (http_interp.c) */
        long long interp_pid;
        bool interp_starting;
        uint64_t bound_client;    /* close_with_client: destroyed when this client (serial) goes */
        time_t created;
        uint64_t expires_ns, ready_deadline_ns;
        uint64_t create_client;
        json_t *create_rpc_id;
        bool create_progress;     /* its client asked for the clone's progress events */
        uint32_t agent_events, sync_events, pid_events;
        /* snapshots and resets */
        nsbox_policy *policy;     /* kept to start it again */
        nsbox_layers base_layers; /* what it was created on: a snapshot, a repository; held */
        nsbox_layers layers;      /* what it runs on now (a reset may change it); held */
        json_t *create_params;    /* as the client gave them */
        bool resetting;
        char *repo_url, *repo_commit;
        /* --repo of a network URL: cloned inside, through the sandbox's own network, once it
         * is ready and before create is answered (create.c); then the commit checked out */
        char *clone_url, *clone_commit;
        bool cloning, clone_reset; /* its clone runs (not ready yet); for a reset */
        bool warming;              /* pooled, its warm-up runs (not ready yet): create.c, pool_warm */
        /* E2B's metrics without a cgroup: its processes' usage, walked at most once a second */
        uint64_t usage_ns, usage_rss, usage_cpu_us;
        uid_t host_uid;           /* the sandbox user's host ids, owner of a repository layer */
        gid_t host_gid;
        /* the worker running for it */
        int job;
        pid_t job_pid;
        int job_fd;
        strbuf job_out;
        uint32_t job_events;
        uint64_t job_client, job_start_ns;
        json_t *job_rpc_id;
        char job_name[NSBOX_SNAPSHOT_NAME_MAX + 1];
        bool job_thaw;
        bool job_progress;        /* its client asked for progress events (create's clone, a snapshot) */
        uint64_t progress_ns;     /* when the last one was sent */
        /* trajectory recording */
        int record_fd;
        char *record_path;
        uint64_t record_steps;
        /* service: templates, pools, lifetimes, capacity */
        int tpl;                 /* index of its template in the configuration, or -1 */
        bool pooled;             /* started for its template's pool, not handed out yet (owner NO_OWNER) */
        uint64_t idle_ms, last_active_ns;
        bool expiry_pause;
        bool expiry_files;       /* its timeout pauses it keeping only its files (on_expiry pause_files) */
        uint64_t mem_commit;     /* its memory limit, counted against memory_budget */
        uint64_t req_start_ns;   /* when the create waiting for it came, for the acquire latency */
        bool goc;                /* that create was get_or_create: its result says "created" */
        char claim[CATALOG_CLAIM_KEY]; /* get_or_create's claim across nodes, kept while it lives (catalog.c) */
        json_t *waiters;         /* get_or_create calls waiting for it: [[client serial, id, start ns]...] */
        unsigned id_slot;        /* root: its own host id range (userns.h); 0: the shared one */
        int id_lock_fd;
        json_t *http;            /* made over HTTP: its access token, E2B metadata (http_control.c) */
        json_t *log;             /* its last log lines, oldest first: [{ms, prio, event, msg}] */
} sandbox;

/* A create waiting for capacity (its 'wait'). */
typedef struct waiting {
        struct waiting *next;
        uint64_t client, deadline_ns, start_ns;
        json_t *rpc_id, *params;
        bool goc;
        char claim[CATALOG_CLAIM_KEY]; /* a get_or_create's claim across nodes, won */
} waiting;

typedef struct tpl_state {
        uint64_t hits, misses;
        time_t used_at;     /* the last create of it (E2B's lastSpawnedAt) */
        unsigned fails;     /* pooled starts failed in a row */
        uint64_t retry_ns;  /* no pooled start before this */
        uint64_t failures;  /* pooled starts failed in all */
        time_t failed_at;   /* the last one: when, and why (nsbox stats) */
        char failed_why[256];
} tpl_state;

/* API keys (apikeys.c): only each key's sha256 is kept, sorted by it. */
#define APIKEY_LEN 44        /* "e2b_" and 40 lowercase hex digits */
#define APIKEY_PREFIX_LEN 12 /* shown to tell keys apart: "e2b_" and 8 hex digits */
#define APIKEY_NAME_MAX 64
#define APIKEYS_PER_UID 64
#define APIKEYS_MAX 4096
typedef struct apikey {
        uint8_t hash[32];
        uid_t uid;
        gid_t gid;
        char name[APIKEY_NAME_MAX + 1];
        char prefix[APIKEY_PREFIX_LEN + 1];
        char created_at[21]; /* RFC 3339, UTC: 2026-01-02T03:04:05Z */
        time_t last_used;    /* this nsboxd's memory only: 0 never */
} apikey;

typedef struct apikey_table {
        apikey *keys; /* sorted by hash */
        size_t n;
        char *path;
        /* the file as last read or written: another node's write to a shared file shows as a change */
        uint64_t checked_ns;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
} apikey_table;

typedef struct daemon_state {
        int epfd, listen_fd, sig_fd;
        int agent_fd; /* cluster.agent_check's listener, or -1 (cluster.c) */
        uint64_t next_serial;
        client *clients;
        unsigned n_clients;
        sandbox *sandboxes;
        unsigned n_sandboxes;
        bool stop;
        const nsbox_dconfig *conf;
        tpl_state *tpl;
        tpl_state builtin[2]; /* E2B creates of base and of the built-in code interpreter (hits only) */
        waiting *waitq;
        bool capacity_freed;     /* since the wait queue was last looked at */
        bool pool_dirty;         /* a pool may be short: look (pool_fill) */
        uint64_t pool_retry_ns;  /* a short pool waits for its template's retry time */
        uint64_t pool_due_ns;    /* since when pool work waits for a quiet moment (0: none) */
        uint64_t client_ns;      /* the last event of a client (a request, a connection) */
        uint32_t lat_us[LAT_RING];
        unsigned lat_n;
        uint64_t lat_total;
        bool stopping, activated;
        uint64_t drain_deadline_ns, start_ns;
        time_t started_at; /* the wall clock's at start_ns: the configuration's load (E2B templates) */
        int state_dirfd;         /* <socket>.state: one file per live sandbox */
        uid_use uses[MAX_CLIENTS]; /* one per uid with a connection */
        unsigned n_uses;
        uint64_t refused_log_ns; /* refused connections are logged once a second at most */
        unsigned refused_quiet;  /* refused since, not logged */
        apikey_table apikeys;
        struct http_state *http; /* the HTTP listener (http.c); NULL: off */
        /* a pooled sandbox is ready: what the HTTP API starts in it beforehand (http_interp.c) */
        void (*pool_ready)(struct daemon_state *d, sandbox *s);
        /* the cluster catalog (catalog.c): NULL without cluster.redis; its hook, told of each
         * sandbox made, changed or gone */
        struct catalog *catalog;
        void (*catalog_hook)(struct daemon_state *d, sandbox *s, bool gone);
} daemon_state;

/* ---- what each room offers the others -------------------------------------------------------- */

/* http.c (and the HTTP rooms under it, http.h) */
int http_open(daemon_state *d, nsbox_error *err);
void http_run(daemon_state *d);                 /* its epoll fd is readable */
void http_pump(daemon_state *d);                /* replies to HTTP requests' clients, to them */
int http_timeout(daemon_state *d, int timeout); /* its deadlines, and the loop's timeout */
void http_close(daemon_state *d);
size_t http_held(const client *c); /* bytes of c's HTTP request's stream that MHD has not taken */

/* clients.c */
uint64_t client_deadlines(daemon_state *d, uint64_t now);
void client_remove(daemon_state *d, client *c);
void client_readable(daemon_state *d, client *c);
void accept_clients(daemon_state *d);

/* rpc.c */
void handle_request(daemon_state *d, client *c, const char *line, size_t len);

/* methods.c */
void method_snapshot(daemon_state *d, client *c, json_t *id, json_t *params);
void method_reset(daemon_state *d, client *c, json_t *id, json_t *params);
void method_snapshots(daemon_state *d, client *c, json_t *id, json_t *params, bool delete);
void method_list(daemon_state *d, client *c, json_t *id, json_t *params);
void method_set_timeout(daemon_state *d, client *c, json_t *id, json_t *params);
void method_stats(daemon_state *d, client *c, json_t *id);
void method_shutdown(daemon_state *d, client *c, json_t *id);
void method_destroy(daemon_state *d, client *c, json_t *id, json_t *params);
void method_pause(daemon_state *d, client *c, json_t *id, json_t *params, bool pause);
/* pause (memory true: frozen; false: its processes killed, its files kept) or resume it (memory
 * false: rebooted); logged with why */
int sandbox_pause(sandbox *s, bool pause, bool memory, const char *why, nsbox_error *err);

/* create.c */
int check_labels(json_t *labels, strbuf *why);
int seconds_param(json_t *params, const char *key, double max, bool *has, uint64_t *ret_ms, strbuf *why);
int shape_options(const client *c, json_t *shape, nsbox_run_options *o, nsbox_error *err);
bool is_operator(uid_t uid);
unsigned of_template(const daemon_state *d, int tpl, unsigned *pooled, unsigned *ready, unsigned *starting);
uint64_t committed(const daemon_state *d);
void method_create(daemon_state *d, client *c, json_t *id, json_t *params, bool goc);
void serve_waiting(daemon_state *d);
void pool_fill(daemon_state *d);
void sync_readable(daemon_state *d, sandbox *s);

/* catalog.c: the cluster catalog in Redis (cluster.redis) */
typedef void (*catalog_list_fn)(daemon_state *d, void *ctx, json_t *records); /* records NULL: Redis did not answer */
int catalog_open(daemon_state *d, nsbox_error *err);
void catalog_close(daemon_state *d);
void catalog_event(daemon_state *d, uint64_t key, uint32_t events);
int catalog_run(daemon_state *d, int timeout); /* due work (reconnect, heartbeat); the loop's timeout */
json_t *catalog_stats(const daemon_state *d);
int catalog_list(daemon_state *d, uid_t uid, catalog_list_fn fn, void *ctx); /* the owner's records on every node */
/* get_or_create across nodes: the labels claimed in Redis (atomically: one node wins).  fn gets
 * MINE (value: the claim's key, for the sandbox made here), THEIRS (value: the id of the sandbox
 * made for them, or "pending:NODE" still), GONE (claimed and given up meanwhile: try again) or
 * NONE (no answer from Redis: this node alone decides). */
enum { CATALOG_CLAIM_NONE, CATALOG_CLAIM_MINE, CATALOG_CLAIM_THEIRS, CATALOG_CLAIM_GONE };
typedef void (*catalog_claim_fn)(daemon_state *d, void *ctx, int outcome, const char *value);
int catalog_claim(daemon_state *d, uid_t uid, json_t *labels, catalog_claim_fn fn, void *ctx);
void catalog_claim_release(daemon_state *d, const char *key); /* a claim of ours whose sandbox was not made */
#define CATALOG_TOLD(d, s, gone) ((d)->catalog_hook ? (d)->catalog_hook((d), (s), (gone)) : (void)0)

/* cluster.c */
#define CLUSTER_WEIGHT 256 /* HAProxy's largest server weight: the agent's 100% */
unsigned cluster_free(const daemon_state *d);
int cluster_agent_reply(const daemon_state *d, char *buf, size_t n);
int cluster_open(daemon_state *d, nsbox_error *err);
void cluster_accept(daemon_state *d);
void cluster_close(daemon_state *d);
int tcp_listen_on(const char *what, const char *spec, nsbox_error *err); /* http.c */

/* keep.c */
int state_dir_open(const char *sock, nsbox_error *err);
unsigned state_cleanup(const daemon_state *d);
void keep_sandboxes(daemon_state *d);
int adopt_one(void *ctx, json_t *rec, int *fds, size_t n);

/* apikeys.c */
int apikeys_open(daemon_state *d, nsbox_error *err);   /* the key file, read at start; refused in one line */
void apikeys_close(daemon_state *d);
int apikeys_refresh(daemon_state *d, bool force); /* a shared file another node changed: read again */
/* true with the key's uid and gid when key is one of the table's: cheap, constant-time compare */
bool apikey_lookup(daemon_state *d, const char *key, size_t len, uid_t *uid, gid_t *gid);
void method_api_key_create(daemon_state *d, client *c, json_t *id, json_t *params);
void method_api_key_list(daemon_state *d, client *c, json_t *id, json_t *params);
void method_api_key_delete(daemon_state *d, client *c, json_t *id, json_t *params);
/* pure, for the unit tier and the fuzzer: the file's text into t (source names it in err) */
int apikeys_parse(const char *text, size_t len, const char *source, apikey_table *t, nsbox_error *err);
char *apikeys_dump(const apikey_table *t);
bool apikey_well_formed(const char *key, size_t len);
int apikey_table_add(apikey_table *t, const apikey *k); /* sorted in; -EEXIST for a hash it has */
void apikey_table_release(apikey_table *t);

/* jobs.c */
const char *root_name(const nsbox_policy *p);
void repo_key(const sandbox *s, const char *commit, char ret[65]);
bool is_hex(const char *c, size_t len);
bool full_sha(const char *c);
int job_spawn(daemon_state *d, sandbox *s, int kind, client *c, json_t *rpc_id, nsbox_error *err);
int repo_ready(daemon_state *d, sandbox *s, const char *key);
void job_readable(daemon_state *d, sandbox *s);

/* calls.c: everything about calls to a sandbox's agent and its frames, behind these */
void calls_attach(daemon_state *d, sandbox *s, const char *id); /* its supervisor: its id and callbacks */
void method_call(daemon_state *d, client *c, json_t *id, json_t *params);        /* the method "call" */
/* The same for an in-daemon caller (http_files.c) with bytes beside the JSON: bytes (may be NULL)
 * go to the agent as the frame's payload (write_file's content), and raw: the answer's payload
 * waits beside its reply line for calls_take_bytes, not base64 in it. */
void method_call_bytes(daemon_state *d, client *c, json_t *id, json_t *params, const void *bytes, size_t len, bool raw);
char *calls_take_bytes(client *c, json_t *id, size_t *len); /* a raw call's answer's bytes (the caller frees) */
/* nsboxd's own call, answered to nobody: its answer goes to what kind says (PENDING_*). */
int calls_internal(daemon_state *d, sandbox *s, const char *tool, json_t *params, int kind); /* takes params */
void sandbox_died(daemon_state *d, sandbox *s);          /* its agent is gone; s is removed */
bool agents_update_interest(daemon_state *d);            /* streams paused or resumed; epoll interest */
void agents_read_buffered(daemon_state *d);             /* frames read ahead in agents' readers, taken */
void calls_client_gone(daemon_state *d, client *c);       /* before c is freed */
void agent_event(daemon_state *d, sandbox *s, uint32_t events); /* epoll events of its agent's socket */
void agents_flush(daemon_state *d);                      /* what is queued to the agents, written now */

/* record.c */
void record_call(sandbox *s, const pending *p, json_t *result, const char *code);
void record_op(sandbox *s, const char *op, const char *name, uint64_t start_ns, const char *code);
int open_recording(sandbox *s, const char *path, nsbox_error *err);

/* sandboxes.c */
sandbox *sandbox_by_serial(daemon_state *d, uint64_t serial);
void reap_later(pid_t pid);
void reap_exited(bool block);
bool reaping(void);
void state_write(daemon_state *d, const sandbox *s);
void sandbox_free(sandbox *s);
/* A sandbox's own log (E2B's sandbox logs): nsboxd's log lines about it, and the commands run in
 * it; the last SANDBOX_LOG_MAX kept. */
void sandbox_log_init(daemon_state *d);
void sandbox_log_add(sandbox *s, int prio, const char *event, const char *msg);
void sandbox_log_exec(sandbox *s, json_t *params);
void unwatch_sandbox(daemon_state *d, sandbox *s);
void sandbox_remove(daemon_state *d, sandbox *s, const char *code, const char *why);
bool visible(const client *c, const sandbox *s);
sandbox *find_sandbox(daemon_state *d, client *c, json_t *id, json_t *params);
json_t *sandbox_json(const daemon_state *d, const sandbox *s);
int sandbox_launch(daemon_state *d, sandbox *s, nsbox_error *err);
/* create.c: a sandbox made from create's params (c NULL: a template's), not yet started */
int sandbox_prepare(daemon_state *d, const client *c, json_t *params, sandbox **ret, nsbox_error *err);
/* A pooled start of template t failed: counted, logged at warning level with why, kept for stats */
void tpl_start_failed(daemon_state *d, int t, const char *why);
void create_failed(daemon_state *d, sandbox *s, const char *code, const char *msg);
/* The clone of s->clone_url inside s ended (calls.c): create is answered, or fails and s goes. */
void repo_clone_done(daemon_state *d, sandbox *s, json_t *result, const char *code, const char *msg);
void pool_warmed(daemon_state *d, sandbox *s, const char *failed);
sandbox *sandbox_new(void);

/* reply.c */
client *client_by_serial(daemon_state *d, uint64_t serial);
void send_line(client *c, json_t *msg);
void reply_result(client *c, json_t *id, json_t *result);
int client_take_fd(client *c); /* the oldest descriptor queued, or -1 (clients.c) */
void reply_error(client *c, json_t *id, int rpc_code, const char *code, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
