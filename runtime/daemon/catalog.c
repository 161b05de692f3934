/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cluster catalog (nsboxd(8), CLUSTER): each node records its sandboxes in Redis, so that an
 * E2B list answers for every node, and a dead node's sandboxes leave it within the TTL.
 *
 *   nsbox:sb:ID     the sandbox's E2B record (no secret), with "node" and "owner"; expires
 *   nsbox:uid:UID   a sorted set of the owner's ids, scored by when each record expires
 *
 * Every node writes its own records at once when they change, and all of them again every third
 * of the TTL (heartbeat), which also rebuilds the catalog after Redis lost it.  Nothing on a
 * sandbox's path waits for Redis: writes are queued (bounded), lists fall back to the node's own
 * sandboxes when Redis is down or slow, and stats say so.  hiredis's asynchronous context runs
 * on nsboxd's epoll; a host name is resolved in a thread, never in the loop. */
#include "http.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include "../dlog.h"
#include "../sha256.h"

#define CATALOG_CONNECT_MS 3000
#define CATALOG_ANSWER_MS 2000
#define CATALOG_RETRY_MIN_MS 500
#define CATALOG_RETRY_MAX_MS 30000
#define CATALOG_QUEUE_MAX (8u << 20) /* bytes waiting for Redis: past it, writes wait for the heartbeat */
#define CATALOG_QUERIES_MAX 256      /* lists in flight */
#define CATALOG_LIST_MAX 10000       /* ids read for one list */
#define CATALOG_CLAIMS_MAX 256       /* get_or_create claims in flight */
#define CATALOG_CLAIM_PENDING_MS 30000 /* a claim whose sandbox is being made: that long at most */
#define CATALOG_CLAIM_TRIES 100      /* asked again every 100 ms while it is being made elsewhere */
#define KEY_REDIS KEY(2, K_LISTEN)
#define KEY_RESOLVED KEY(3, K_LISTEN)

struct resolve_job {
        char host[256], port[8], ip[INET6_ADDRSTRLEN];
        int efd, err;
};

struct catalog {
        daemon_state *d;
        char host[256];
        int port;
        bool unix_path;
        redisAsyncContext *ac;
        uint32_t events;
        bool up;
        uint64_t connect_deadline_ns, retry_ns, heartbeat_ns;
        unsigned retry_ms;
        char last_error[256];
        uint64_t down_since_ns;
        unsigned queries;
        uint64_t asked_ns[CATALOG_QUERIES_MAX]; /* when each list in flight was asked: Redis answers in order */
        unsigned head;
        struct resolve_job *job; /* a resolution in flight */
        int job_efd;
        struct claim *claims;    /* get_or_create claims that wait to ask again */
        unsigned n_claims;
};

struct claim {
        struct claim *next;
        struct catalog *k;
        catalog_claim_fn fn;
        void *ctx;
        char key[CATALOG_CLAIM_KEY];
        unsigned tries;
        uint64_t due_ns;
};

static uint64_t ms_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Down (or still): said in the log when it went down or the reason changed, retried later. */
static void down(struct catalog *k, const char *what, const char *detail)
{
        char why[sizeof(k->last_error)];
        snprintf(why, sizeof(why), "%s: %s", what, detail ? detail : "");
        bool said = !k->up && !strcmp(why, k->last_error);
        k->up = false;
        k->events = 0;
        snprintf(k->last_error, sizeof(k->last_error), "%s", why);
        if (!k->down_since_ns)
                k->down_since_ns = now_ns();
        k->retry_ns = now_ns() + (uint64_t)k->retry_ms * 1000000;
        k->retry_ms = k->retry_ms * 2 > CATALOG_RETRY_MAX_MS ? CATALOG_RETRY_MAX_MS : k->retry_ms * 2;
        if (!said)
                dlog(LOG_WARNING, "catalog.down", NULL, "cluster catalog %s: %s; serving this node's sandboxes alone, trying again",
                     k->d->conf->redis, k->last_error);
}

/* ---- hiredis on nsboxd's epoll ---------------------------------------------------------------- */

static void want(struct catalog *k, uint32_t add, uint32_t del)
{
        uint32_t ev = (k->events | add) & ~del;
        if (k->ac && k->ac->c.fd >= 0)
                nsbox_epoll_set(k->d->epfd, k->ac->c.fd, KEY_REDIS, &k->events, ev);
}
static void add_read(void *p) { want(p, EPOLLIN, 0); }
static void del_read(void *p) { want(p, 0, EPOLLIN); }
static void add_write(void *p) { want(p, EPOLLOUT, 0); }
static void del_write(void *p) { want(p, 0, EPOLLOUT); }
static void cleanup(void *p)
{
        struct catalog *k = p;
        if (k->ac && k->ac->c.fd >= 0)
                epoll_ctl(k->d->epfd, EPOLL_CTL_DEL, k->ac->c.fd, NULL);
        k->events = 0;
}

static void publish_all(struct catalog *k);

static void on_connect(const redisAsyncContext *ac, int status)
{
        struct catalog *k = ac->data;
        if (status != REDIS_OK) { /* hiredis frees the context after this */
                k->ac = NULL;
                down(k, "cannot connect", ac->errstr);
                return;
        }
        k->up = true;
        k->connect_deadline_ns = 0;
        k->retry_ms = CATALOG_RETRY_MIN_MS;
        dlog(LOG_NOTICE, "catalog.up", NULL, "cluster catalog %s: connected%s", k->d->conf->redis,
             k->down_since_ns ? "; this node's sandboxes written again" : "");
        k->down_since_ns = 0;
        publish_all(k); /* a restarted Redis has nothing: rebuilt at once */
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
        (void)status;
        struct catalog *k = ac->data;
        k->ac = NULL;
        down(k, "disconnected", ac->errstr[0] ? ac->errstr : "closed by Redis");
}

static void connect_ip(struct catalog *k, const char *ip)
{
        redisAsyncContext *ac = k->unix_path ? redisAsyncConnectUnix(k->host) : redisAsyncConnect(ip, k->port);
        if (!ac || ac->err) {
                down(k, "cannot connect", ac ? ac->errstr : "out of memory");
                if (ac)
                        redisAsyncFree(ac);
                return;
        }
        fcntl(ac->c.fd, F_SETFD, FD_CLOEXEC); /* hiredis's socket: not for what nsboxd starts */
        k->ac = ac;
        ac->data = k;
        ac->ev.data = k;
        ac->ev.addRead = add_read;
        ac->ev.delRead = del_read;
        ac->ev.addWrite = add_write;
        ac->ev.delWrite = del_write;
        ac->ev.cleanup = cleanup;
        k->events = 0;
        if (nsbox_epoll_add(k->d->epfd, ac->c.fd, KEY_REDIS, &k->events, EPOLLOUT) < 0) {
                k->ac = NULL;
                redisAsyncFree(ac);
                down(k, "cannot connect", "epoll");
                return;
        }
        redisAsyncSetConnectCallback(ac, on_connect);
        redisAsyncSetDisconnectCallback(ac, on_disconnect);
        k->connect_deadline_ns = now_ns() + (uint64_t)CATALOG_CONNECT_MS * 1000000;
}

static void *resolve_thread(void *arg)
{
        struct resolve_job *j = arg;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
        j->err = getaddrinfo(j->host, j->port, &hints, &res);
        if (j->err == 0 && res) {
                const void *a = res->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr
                                                          : (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
                if (!inet_ntop(res->ai_family, a, j->ip, sizeof(j->ip)))
                        j->err = EAI_FAIL;
        }
        if (res)
                freeaddrinfo(res);
        uint64_t one = 1;
        (void)!write(j->efd, &one, sizeof(one));
        return NULL;
}

static void start_connect(struct catalog *k)
{
        unsigned char buf[sizeof(struct in6_addr)];
        if (k->unix_path || inet_pton(AF_INET, k->host, buf) == 1 || inet_pton(AF_INET6, k->host, buf) == 1) {
                connect_ip(k, k->host);
                return;
        }
        if (k->job) /* resolving already */
                return;
        struct resolve_job *j = calloc(1, sizeof(*j));
        pthread_t t;
        pthread_attr_t attr;
        if (!j) {
                down(k, "cannot resolve", "out of memory");
                return;
        }
        snprintf(j->host, sizeof(j->host), "%s", k->host);
        snprintf(j->port, sizeof(j->port), "%d", k->port);
        j->efd = k->job_efd;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, resolve_thread, j) != 0) {
                free(j);
                down(k, "cannot resolve", "no thread");
        } else {
                k->job = j;
        }
        pthread_attr_destroy(&attr);
}

/* ---- what goes in -------------------------------------------------------------------------------- */

static bool room(const struct catalog *k)
{
        return k->up && k->ac && sdslen(k->ac->c.obuf) < CATALOG_QUEUE_MAX;
}

/* The record others read: E2B's listed sandbox, no secret, with its node and owner. */
static json_t *record(daemon_state *d, sandbox *s)
{
        json_t *o = control_sandbox_json(d, s);
        if (!o)
                return NULL;
        json_object_del(o, "envdAccessToken");
        json_object_del(o, "trafficAccessToken");
        json_object_set_new(o, "node", json_string(d->conf->node));
        json_object_set_new(o, "owner", json_integer((json_int_t)s->owner));
        return o;
}

static bool listed(const sandbox *s) { return !s->pooled && s->ready; }

static void put(struct catalog *k, sandbox *s, uint64_t until_ms)
{
        json_t *o = listed(s) && room(k) ? record(k->d, s) : NULL;
        size_t len = 0;
        char *text = o ? nsbox_json_dumps(o, &len) : NULL;
        json_decref(o);
        if (!text)
                return;
        uint64_t ttl = k->d->conf->catalog_ttl_ms;
        redisAsyncCommand(k->ac, NULL, NULL, "SET nsbox:sb:%s %b PX %llu", s->sup.id, text, len, (unsigned long long)ttl);
        redisAsyncCommand(k->ac, NULL, NULL, "ZADD nsbox:uid:%u %llu %s", (unsigned)s->owner, (unsigned long long)until_ms, s->sup.id);
        if (s->claim[0]) /* get_or_create's: its labels name it on every node while it lives */
                redisAsyncCommand(k->ac, NULL, NULL, "SET %s %s PX %llu", s->claim, s->sup.id, (unsigned long long)ttl);
        free(text);
}

/* Redis deletes key only if it still names value (another node may have claimed it since). */
static void del_if(struct catalog *k, const char *key, const char *value)
{
        redisAsyncCommand(k->ac, NULL, NULL, "EVAL %s 1 %s %s", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
                          key, value);
}

static void publish_all(struct catalog *k)
{
        uint64_t now = ms_now(), until = now + k->d->conf->catalog_ttl_ms;
        uid_t seen[64];
        size_t n = 0;
        for (sandbox *s = k->d->sandboxes; s && room(k); s = s->next) {
                put(k, s, until);
                bool known = false;
                for (size_t i = 0; i < n && !known; i++)
                        known = seen[i] == s->owner;
                if (!known && listed(s) && n < sizeof(seen) / sizeof(seen[0])) {
                        seen[n++] = s->owner;
                        /* the ids of records gone (a dead node's): out of the owner's set */
                        redisAsyncCommand(k->ac, NULL, NULL, "ZREMRANGEBYSCORE nsbox:uid:%u -inf %llu", (unsigned)s->owner,
                                          (unsigned long long)now);
                }
        }
        k->heartbeat_ns = now_ns() + k->d->conf->catalog_ttl_ms * 1000000 / 3;
}

/* d->catalog_hook: a sandbox was made, changed (paused, resumed, its metadata) or is gone. */
static void hook(daemon_state *d, sandbox *s, bool gone)
{
        struct catalog *k = d->catalog;
        if (!k || !room(k))
                return;
        if (!gone) {
                put(k, s, ms_now() + d->conf->catalog_ttl_ms);
                return;
        }
        redisAsyncCommand(k->ac, NULL, NULL, "DEL nsbox:sb:%s", s->sup.id);
        redisAsyncCommand(k->ac, NULL, NULL, "ZREM nsbox:uid:%u %s", (unsigned)s->owner, s->sup.id);
        if (s->claim[0])
                del_if(k, s->claim, s->sup.id);
}

/* ---- get_or_create across nodes --------------------------------------------------------------------- */

static void claim_done(struct claim *c, int outcome, const char *value)
{
        c->k->n_claims--;
        c->fn(c->k->d, c->ctx, outcome, value);
        free(c);
}

static void on_claim_get(redisAsyncContext *ac, void *reply, void *priv);

static void claim_ask(struct claim *c)
{
        if (!room(c->k) || redisAsyncCommand(c->k->ac, on_claim_get, c, "GET %s", c->key) != REDIS_OK)
                claim_done(c, CATALOG_CLAIM_NONE, NULL);
}

static void on_claim_get(redisAsyncContext *ac, void *reply, void *priv)
{
        (void)ac;
        struct claim *c = priv;
        redisReply *r = reply;
        if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
                claim_done(c, CATALOG_CLAIM_NONE, NULL);
                return;
        }
        char value[NSBOX_ID_SIZE + 16] = "";
        if (r->type == REDIS_REPLY_STRING && r->len < sizeof(value))
                memcpy(value, r->str, r->len);
        if (r->type == REDIS_REPLY_NIL) { /* gone meanwhile (its sandbox, or a claim given up): claim it anew */
                claim_done(c, CATALOG_CLAIM_GONE, NULL);
        } else if (!strncmp(value, "pending:", 8) && ++c->tries < CATALOG_CLAIM_TRIES) {
                c->due_ns = now_ns() + 100000000; /* being made on that node: asked again */
                c->next = c->k->claims;
                c->k->claims = c;
        } else {
                claim_done(c, CATALOG_CLAIM_THEIRS, value);
        }
}

static void on_claim_set(redisAsyncContext *ac, void *reply, void *priv)
{
        (void)ac;
        struct claim *c = priv;
        redisReply *r = reply;
        if (r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK"))
                claim_done(c, CATALOG_CLAIM_MINE, c->key);
        else if (r && r->type == REDIS_REPLY_NIL)
                claim_ask(c); /* someone's: whose */
        else
                claim_done(c, CATALOG_CLAIM_NONE, NULL);
}

int catalog_claim(daemon_state *d, uid_t uid, json_t *labels, catalog_claim_fn fn, void *ctx)
{
        struct catalog *k = d->catalog;
        char *text = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS), hex[2 * NSBOX_SHA256_SIZE + 1];
        struct claim *c = text && k && room(k) && k->n_claims < CATALOG_CLAIMS_MAX ? calloc(1, sizeof(*c)) : NULL;
        if (!c) {
                free(text);
                return -EAGAIN;
        }
        nsbox_sha256_hex(text, strlen(text), hex);
        free(text);
        *c = (struct claim){ .k = k, .fn = fn, .ctx = ctx };
        snprintf(c->key, sizeof(c->key), "nsbox:claim:%u:%s", (unsigned)uid, hex);
        if (redisAsyncCommand(k->ac, on_claim_set, c, "SET %s pending:%s NX PX %d", c->key, d->conf->node, CATALOG_CLAIM_PENDING_MS) != REDIS_OK) {
                free(c);
                return -EIO;
        }
        k->n_claims++;
        return 0;
}

void catalog_claim_release(daemon_state *d, const char *key)
{
        struct catalog *k = d->catalog;
        char pending[64];
        snprintf(pending, sizeof(pending), "pending:%s", d->conf->node);
        if (k && room(k))
                del_if(k, key, pending);
}

/* Claims waiting to ask again: asked when due; all answered NONE when Redis is gone. */
static void claims_run(struct catalog *k, bool gone)
{
        uint64_t now = now_ns();
        for (struct claim **pp = &k->claims; *pp;) {
                struct claim *c = *pp;
                if (!gone && c->due_ns > now) {
                        pp = &c->next;
                        continue;
                }
                *pp = c->next;
                if (gone)
                        claim_done(c, CATALOG_CLAIM_NONE, NULL);
                else
                        claim_ask(c);
        }
}

/* ---- lists ------------------------------------------------------------------------------------------ */

struct query {
        struct catalog *k;
        uid_t uid;
        catalog_list_fn fn;
        void *ctx;
};

static void query_done(struct query *q, json_t *records)
{
        q->k->queries--;
        q->k->head = (q->k->head + 1) % CATALOG_QUERIES_MAX;
        q->fn(q->k->d, q->ctx, records);
        json_decref(records);
        free(q);
}

static void on_records(redisAsyncContext *ac, void *reply, void *priv)
{
        (void)ac;
        struct query *q = priv;
        redisReply *r = reply;
        json_t *out = r && r->type == REDIS_REPLY_ARRAY ? json_array() : NULL;
        for (size_t i = 0; out && i < r->elements; i++) {
                redisReply *e = r->element[i];
                json_t *o = e->type == REDIS_REPLY_STRING ? json_loadb(e->str, e->len, 0, NULL) : NULL;
                /* a record of this owner's, well formed: anything else in Redis is not trusted */
                if (json_is_object(o) && json_integer_value(json_object_get(o, "owner")) == (json_int_t)q->uid &&
                    json_is_string(json_object_get(o, "sandboxID")))
                        json_array_append_new(out, o);
                else
                        json_decref(o);
        }
        query_done(q, out);
}

static void on_ids(redisAsyncContext *ac, void *reply, void *priv)
{
        struct query *q = priv;
        redisReply *r = reply;
        if (!r || r->type != REDIS_REPLY_ARRAY) {
                query_done(q, NULL);
                return;
        }
        if (r->elements == 0) {
                query_done(q, json_array());
                return;
        }
        size_t n = r->elements < CATALOG_LIST_MAX ? r->elements : CATALOG_LIST_MAX;
        const char **argv = calloc(n + 1, sizeof(*argv));
        size_t *lens = calloc(n + 1, sizeof(*lens));
        char (*keys)[NSBOX_ID_SIZE + 16] = calloc(n, sizeof(*keys));
        size_t m = 1;
        for (size_t i = 0; argv && lens && keys && i < n; i++) {
                redisReply *e = r->element[i];
                if (e->type != REDIS_REPLY_STRING || e->len > NSBOX_ID_MAX)
                        continue;
                lens[m] = (size_t)snprintf(keys[i], sizeof(keys[i]), "nsbox:sb:%.*s", (int)e->len, e->str);
                argv[m++] = keys[i];
        }
        int ok = argv && lens && keys && m > 1;
        if (ok) {
                argv[0] = "MGET";
                lens[0] = 4;
                ok = redisAsyncCommandArgv(ac, on_records, q, (int)m, argv, lens) == REDIS_OK;
        }
        free(argv);
        free(lens);
        free(keys);
        if (!ok)
                query_done(q, m > 1 ? NULL : json_array());
}

int catalog_list(daemon_state *d, uid_t uid, catalog_list_fn fn, void *ctx)
{
        struct catalog *k = d->catalog;
        if (!k || !room(k) || k->queries >= CATALOG_QUERIES_MAX)
                return -EAGAIN;
        struct query *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (struct query){ .k = k, .uid = uid, .fn = fn, .ctx = ctx };
        if (redisAsyncCommand(k->ac, on_ids, q, "ZRANGEBYSCORE nsbox:uid:%u %llu +inf LIMIT 0 %d", (unsigned)uid,
                              (unsigned long long)ms_now(), CATALOG_LIST_MAX) != REDIS_OK) {
                free(q);
                return -EIO;
        }
        k->asked_ns[(k->head + k->queries) % CATALOG_QUERIES_MAX] = now_ns();
        k->queries++;
        return 0;
}

/* ---- what the loop calls ------------------------------------------------------------------------------ */

int catalog_open(daemon_state *d, nsbox_error *err)
{
        const char *spec = d->conf->redis;
        if (!spec || !*spec)
                return 0;
        struct catalog *k = calloc(1, sizeof(*k));
        if (!k)
                return nsbox_err(err, ENOMEM, "cluster.redis");
        k->d = d;
        k->retry_ms = CATALOG_RETRY_MIN_MS;
        k->job_efd = -1;
        if (!strncmp(spec, "unix:", 5)) {
                k->unix_path = true;
                snprintf(k->host, sizeof(k->host), "%s", spec + 5);
        } else {
                const char *colon = strrchr(spec, ':');
                size_t hl = (size_t)(colon - spec);
                if (spec[0] == '[') /* [v6]:port */
                        snprintf(k->host, sizeof(k->host), "%.*s", (int)(hl - 2), spec + 1);
                else
                        snprintf(k->host, sizeof(k->host), "%.*s", (int)hl, spec);
                k->port = atoi(colon + 1);
                k->job_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (k->job_efd < 0 || nsbox_epoll_add(d->epfd, k->job_efd, KEY_RESOLVED, NULL, EPOLLIN) < 0) {
                        if (k->job_efd >= 0)
                                close(k->job_efd);
                        free(k);
                        return nsbox_err(err, errno, "cluster.redis: eventfd");
                }
        }
        d->catalog = k;
        d->catalog_hook = hook;
        snprintf(k->last_error, sizeof(k->last_error), "connecting");
        k->down_since_ns = now_ns();
        start_connect(k);
        dlog(LOG_NOTICE, "catalog.open", NULL, "cluster catalog in Redis at %s, records kept %.1f s", spec,
             (double)d->conf->catalog_ttl_ms / 1000.0);
        return 0;
}

void catalog_event(daemon_state *d, uint64_t key, uint32_t events)
{
        struct catalog *k = d->catalog;
        if (!k)
                return;
        if (key == KEY_RESOLVED) {
                uint64_t v;
                (void)!read(k->job_efd, &v, sizeof(v));
                struct resolve_job *j = k->job;
                k->job = NULL;
                if (!j)
                        return;
                if (j->err)
                        down(k, "cannot resolve its host", gai_strerror(j->err));
                else
                        connect_ip(k, j->ip);
                free(j);
                return;
        }
        if (!k->ac)
                return;
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                redisAsyncHandleRead(k->ac);
        if (k->ac && (events & EPOLLOUT))
                redisAsyncHandleWrite(k->ac);
}

int catalog_run(daemon_state *d, int timeout)
{
        struct catalog *k = d->catalog;
        if (!k)
                return timeout;
        uint64_t now = now_ns();
        if (k->ac && !k->up && k->connect_deadline_ns && now >= k->connect_deadline_ns) {
                redisAsyncContext *ac = k->ac;
                k->ac = NULL;
                k->connect_deadline_ns = 0;
                ac->onDisconnect = NULL;
                redisAsyncFree(ac); /* its cleanup takes the fd out of epoll */
                down(k, "cannot connect", "no answer within 3 s");
        }
        if (k->ac && k->queries && now - k->asked_ns[k->head] > (uint64_t)CATALOG_ANSWER_MS * 1000000) {
                /* a Redis that does not answer is down: the lists waiting get this node's own */
                redisAsyncContext *ac = k->ac;
                k->ac = NULL;
                ac->onDisconnect = NULL;
                redisAsyncFree(ac);
                down(k, "no answer", "within 2 s");
        }
        if (k->claims)
                claims_run(k, !k->up);
        if (!k->ac && !k->job && now >= k->retry_ns)
                start_connect(k);
        if (k->up && now >= k->heartbeat_ns)
                publish_all(k);
        uint64_t next = k->up ? k->heartbeat_ns : !k->ac && !k->job ? k->retry_ns : k->connect_deadline_ns;
        if (k->queries) {
                uint64_t due = k->asked_ns[k->head] + (uint64_t)CATALOG_ANSWER_MS * 1000000;
                next = !next || due < next ? due : next;
        }
        for (struct claim *c = k->claims; c; c = c->next)
                next = !next || c->due_ns < next ? c->due_ns : next;
        return next ? timeout_until(timeout, next, now) : timeout;
}

json_t *catalog_stats(const daemon_state *d)
{
        const struct catalog *k = d->catalog;
        if (!k)
                return json_null();
        return json_pack("{ss ss sf ss*}", "redis", d->conf->redis, "state", k->up ? "up" : "down", "ttl_s",
                         (double)d->conf->catalog_ttl_ms / 1000.0, "error", k->up ? NULL : k->last_error);
}

void catalog_close(daemon_state *d)
{
        struct catalog *k = d->catalog;
        if (!k)
                return;
        d->catalog_hook = NULL;
        claims_run(k, true);
        if (k->ac) {
                redisAsyncContext *ac = k->ac;
                k->ac = NULL;
                ac->onDisconnect = NULL;
                redisAsyncFree(ac); /* lists in flight are answered (NULL replies): from the node alone */
        }
        if (k->job_efd >= 0 && !k->job) /* a resolution in flight still writes to it: left open, at exit */
                close(k->job_efd);
        free(k);
        d->catalog = NULL;
}
