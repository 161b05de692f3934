/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: API keys for the HTTP API (nsbox api-key, nsboxd(8) http.keys).  A key acts as the
 * uid (and gid) it was made for.  Only sha256(key) is kept, in memory sorted by it and on disk
 * in one JSON file (0600, written atomically); the key itself is shown once, by api_key_create.
 * A lookup checks the form first, then finds the hash by binary search (its timing tells about
 * the hash of the guess only, not about a stored key) and compares it in constant time. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../dlog.h"
#include "../json.h"
#include "../sha256.h"

#define APIKEYS_FILE_MAX (4u << 20) /* 4096 entries of about 300 bytes, with room */
#define APIKEYS_VERSION 1

static bool is_lower_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

bool apikey_well_formed(const char *key, size_t len)
{
        return key && len == APIKEY_LEN && !memcmp(key, "e2b_", 4) && is_lower_hex(key + 4, APIKEY_LEN - 4);
}

static bool good_key_name(const char *s)
{
        size_t n = strlen(s);
        if (n < 1 || n > APIKEY_NAME_MAX || !strncmp(s, "e2b_", 4)) /* a name never reads as a prefix */
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-", *s)))
                        return false;
        return true;
}

static bool good_time(const char *s)
{
        static const char pat[] = "dddd-dd-ddTdd:dd:ddZ";
        if (strlen(s) != sizeof(pat) - 1)
                return false;
        for (size_t i = 0; pat[i]; i++)
                if (pat[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != pat[i])
                        return false;
        return true;
}

static void hash_of(const char *key, size_t len, uint8_t out[32])
{
        nsbox_sha256 c;
        nsbox_sha256_init(&c);
        nsbox_sha256_update(&c, key, len);
        nsbox_sha256_final(&c, out);
}

/* Index of the first key whose hash is >= h. */
static size_t lower_bound(const apikey_table *t, const uint8_t h[32])
{
        size_t lo = 0, hi = t->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (memcmp(t->keys[mid].hash, h, 32) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static bool same_hash(const uint8_t a[32], const uint8_t b[32])
{
        volatile uint8_t diff = 0;
        for (size_t i = 0; i < 32; i++)
                diff |= a[i] ^ b[i];
        return diff == 0;
}

static apikey *find_hash(apikey_table *t, const uint8_t h[32])
{
        size_t i = lower_bound(t, h);
        return i < t->n && same_hash(t->keys[i].hash, h) ? &t->keys[i] : NULL;
}

bool apikey_lookup(daemon_state *d, const char *key, size_t len, uid_t *uid, gid_t *gid)
{
        if (!apikey_well_formed(key, len))
                return false;
        uint8_t h[32];
        hash_of(key, len, h);
        apikey *k = find_hash(&d->apikeys, h);
        if (!k && apikeys_refresh(d, false) > 0) /* made on another node since */
                k = find_hash(&d->apikeys, h);
        if (!k)
                return false;
        k->last_used = time(NULL);
        if (uid)
                *uid = k->uid;
        if (gid)
                *gid = k->gid;
        return true;
}

int apikey_table_add(apikey_table *t, const apikey *k)
{
        size_t i = lower_bound(t, k->hash);
        if (i < t->n && !memcmp(t->keys[i].hash, k->hash, 32))
                return -EEXIST;
        apikey *n = realloc(t->keys, (t->n + 1) * sizeof(*n));
        if (!n)
                return -ENOMEM;
        t->keys = n;
        memmove(&n[i + 1], &n[i], (t->n - i) * sizeof(*n));
        n[i] = *k;
        t->n++;
        return 0;
}

void apikey_table_release(apikey_table *t)
{
        free(t->keys);
        free(t->path);
        *t = (apikey_table){ .keys = NULL };
}

static unsigned count_of(const apikey_table *t, uid_t uid)
{
        unsigned n = 0;
        for (size_t i = 0; i < t->n; i++)
                n += t->keys[i].uid == uid;
        return n;
}

static const apikey *by_name(const apikey_table *t, uid_t uid, const char *name)
{
        for (size_t i = 0; i < t->n; i++)
                if (t->keys[i].uid == uid && !strcmp(t->keys[i].name, name))
                        return &t->keys[i];
        return NULL;
}

/* ---- the file ------------------------------------------------------------------------------- */

static int parse_entry(json_t *e, size_t i, const char *source, apikey *k, nsbox_error *err)
{
        static const char *const known[] = { "name", "prefix", "sha256", "uid", "gid", "created_at", NULL };
        if (!json_is_object(e))
                return nsbox_err(err, 0, "%s: keys[%zu]: expected an object", source, i);
        const char *unknown = nsbox_json_unknown_key(e, known);
        if (unknown)
                return nsbox_err(err, 0, "%s: keys[%zu]: unknown key '%.64s'", source, i, unknown);
        const char *name = json_string_value(json_object_get(e, "name")), *prefix = json_string_value(json_object_get(e, "prefix")),
                   *hash = json_string_value(json_object_get(e, "sha256")), *when = json_string_value(json_object_get(e, "created_at"));
        json_t *uid = json_object_get(e, "uid"), *gid = json_object_get(e, "gid");
        if (!name || !good_key_name(name))
                return nsbox_err(err, 0, "%s: keys[%zu]: 'name': expected 1-%d of [A-Za-z0-9._-]", source, i, APIKEY_NAME_MAX);
        if (!prefix || strlen(prefix) != APIKEY_PREFIX_LEN || strncmp(prefix, "e2b_", 4) || !is_lower_hex(prefix + 4, APIKEY_PREFIX_LEN - 4))
                return nsbox_err(err, 0, "%s: keys[%zu]: 'prefix': expected e2b_ and 8 lowercase hex digits", source, i);
        if (!hash || strlen(hash) != 64 || !is_lower_hex(hash, 64))
                return nsbox_err(err, 0, "%s: keys[%zu]: 'sha256': expected 64 lowercase hex digits", source, i);
        if (!json_is_integer(uid) || json_integer_value(uid) < 0 || json_integer_value(uid) >= 0xffffffffLL || !json_is_integer(gid) ||
            json_integer_value(gid) < 0 || json_integer_value(gid) >= 0xffffffffLL)
                return nsbox_err(err, 0, "%s: keys[%zu]: 'uid' and 'gid': expected user and group ids", source, i);
        if (!when || !good_time(when))
                return nsbox_err(err, 0, "%s: keys[%zu]: 'created_at': expected a UTC time, 2026-01-02T03:04:05Z", source, i);
        *k = (apikey){ .uid = (uid_t)json_integer_value(uid), .gid = (gid_t)json_integer_value(gid) };
        snprintf(k->name, sizeof(k->name), "%s", name);
        snprintf(k->prefix, sizeof(k->prefix), "%s", prefix);
        snprintf(k->created_at, sizeof(k->created_at), "%s", when);
        for (size_t j = 0; j < 32; j++) {
                unsigned b;
                sscanf(hash + 2 * j, "%2x", &b);
                k->hash[j] = (uint8_t)b;
        }
        return 0;
}

int apikeys_parse(const char *text, size_t len, const char *source, apikey_table *t, nsbox_error *err)
{
        static const char *const known[] = { "version", "keys", NULL };
        *t = (apikey_table){ .keys = NULL };
        if (len > APIKEYS_FILE_MAX)
                return nsbox_err(err, 0, "%s: larger than %u bytes", source, APIKEYS_FILE_MAX);
        json_error_t je;
        json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!root)
                return nsbox_err(err, 0, "%s: line %d column %d: %s", source, je.line, je.column, je.text);
        json_t *keys = json_object_get(root, "keys"), *e;
        const char *unknown = json_is_object(root) ? nsbox_json_unknown_key(root, known) : NULL;
        int r = 0;
        size_t i;
        if (!json_is_object(root) || !json_is_array(keys) || json_integer_value(json_object_get(root, "version")) != APIKEYS_VERSION ||
            !json_is_integer(json_object_get(root, "version")))
                r = nsbox_err(err, 0, "%s: expected {\"version\": %d, \"keys\": [...]}", source, APIKEYS_VERSION);
        else if (unknown)
                r = nsbox_err(err, 0, "%s: unknown key '%.64s'", source, unknown);
        else if (json_array_size(keys) > APIKEYS_MAX)
                r = nsbox_err(err, 0, "%s: %zu keys, at most %u", source, json_array_size(keys), APIKEYS_MAX);
        else
                json_array_foreach(keys, i, e) {
                        apikey k;
                        if ((r = parse_entry(e, i, source, &k, err)) < 0)
                                break;
                        if (by_name(t, k.uid, k.name)) {
                                r = nsbox_err(err, 0, "%s: keys[%zu]: uid %u has two keys named '%s'", source, i, (unsigned)k.uid, k.name);
                                break;
                        }
                        if (count_of(t, k.uid) >= APIKEYS_PER_UID) {
                                r = nsbox_err(err, 0, "%s: keys[%zu]: uid %u has more than %u keys", source, i, (unsigned)k.uid, APIKEYS_PER_UID);
                                break;
                        }
                        if ((r = apikey_table_add(t, &k)) < 0) {
                                r = r == -EEXIST ? nsbox_err(err, 0, "%s: keys[%zu]: the same key twice", source, i) : nsbox_err(err, -r, "%s", source);
                                break;
                        }
                }
        json_decref(root);
        if (r < 0)
                apikey_table_release(t);
        return r;
}

char *apikeys_dump(const apikey_table *t)
{
        json_t *keys = json_array(), *root = json_pack("{si so}", "version", APIKEYS_VERSION, "keys", keys);
        if (!root)
                return NULL;
        for (size_t i = 0; i < t->n; i++) {
                const apikey *k = &t->keys[i];
                char hex[65];
                for (size_t j = 0; j < 32; j++)
                        snprintf(hex + 2 * j, 3, "%02x", k->hash[j]);
                if (json_array_append_new(keys, json_pack("{ss ss ss sI sI ss}", "name", k->name, "prefix", k->prefix, "sha256", hex, "uid",
                                                          (json_int_t)k->uid, "gid", (json_int_t)k->gid, "created_at", k->created_at)) < 0) {
                        json_decref(root);
                        return NULL;
                }
        }
        char *text = json_dumps(root, JSON_INDENT(2));
        json_decref(root);
        return text;
}

/* mkdir -p for the file's directory: missing ones made 0700. */
static int make_parents(const char *path)
{
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                if (mkdir(p, 0700) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        return 0;
}

static void remember(apikey_table *t, const struct stat *st)
{
        t->dev = st->st_dev;
        t->ino = st->st_ino;
        t->size = st->st_size;
        t->mtime = st->st_mtim;
}

static bool changed(const apikey_table *t, const struct stat *st)
{
        return st->st_dev != t->dev || st->st_ino != t->ino || st->st_size != t->size || st->st_mtim.tv_sec != t->mtime.tv_sec ||
               st->st_mtim.tv_nsec != t->mtime.tv_nsec;
}

/* The table to its file: a temporary file in the same directory, fsync'd, renamed over it. */
static int apikeys_save(apikey_table *t, nsbox_error *err)
{
        _cleanup_free_ char *text = apikeys_dump(t), *tmp = NULL;
        if (!text || asprintf(&tmp, "%s.XXXXXX", t->path) < 0)
                return nsbox_err(err, ENOMEM, "api keys");
        int r = make_parents(t->path);
        if (r < 0)
                return nsbox_err(err, -r, "api keys: make the directory of '%s'", t->path);
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "api keys: create a file next to '%s'", t->path);
        if (fchmod(fd, 0600) < 0 || (r = write_full(fd, text, strlen(text))) < 0 || (r = write_full(fd, "\n", 1)) < 0 || fsync(fd) < 0) {
                r = r < 0 ? -r : errno;
                close(fd);
                unlink(tmp);
                return nsbox_err(err, r, "api keys: write '%s'", tmp);
        }
        close(fd);
        if (rename(tmp, t->path) < 0) {
                r = errno;
                unlink(tmp);
                return nsbox_err(err, r, "api keys: rename to '%s'", t->path);
        }
        /* the rename itself durable: the directory synced */
        _cleanup_free_ char *dir = strdup(t->path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        if (slash) {
                *slash = '\0';
                _cleanup_close_ int dfd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0)
                        (void)fsync(dfd);
        }
        struct stat st;
        if (stat(t->path, &st) == 0) /* our own write is no change to read again */
                remember(t, &st);
        return 0;
}

/* The file read, its owner and mode checked, parsed into t (t->path unset). */
static int load_table(const char *path, apikey_table *t, struct stat *st, nsbox_error *err)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        /* O_NOFOLLOW: the operator's file itself, not where a link points */
        int r = read_file_strict(AT_FDCWD, path, O_NOFOLLOW, APIKEYS_FILE_MAX, path, &text, &len, err);
        if (r < 0)
                return r;
        if (stat(path, st) == 0 && (st->st_uid != geteuid() || (st->st_mode & 022)))
                return nsbox_err(err, 0, "%s: expected a file of uid %u that no one else may write (mode 0600)", path, (unsigned)geteuid());
        return apikeys_parse(text, len, path, t, err);
}

/* Nodes sharing one key file (nsboxd(8), CLUSTER) see each other's keys: read again when it
 * changed, at most once a second unless forced (before a change of ours, so none is lost).
 * 1: read anew; 0: unchanged; <0: unreadable or bad, the table kept (logged). */
int apikeys_refresh(daemon_state *d, bool force)
{
        apikey_table *t = &d->apikeys;
        uint64_t now = now_ns();
        if (!t->path || (!force && now - t->checked_ns < 1000000000ull))
                return 0;
        t->checked_ns = now;
        struct stat st;
        if (stat(t->path, &st) < 0 || !changed(t, &st))
                return 0;
        apikey_table fresh = { 0 };
        nsbox_error e = { 0 };
        int r = load_table(t->path, &fresh, &st, &e);
        if (r < 0) {
                remember(t, &st); /* logged once for this version of the file */
                dlog(LOG_WARNING, "apikeys.reload_failed", NULL, "api keys: %s; the keys read before stay", e.msg ? e.msg : t->path);
                nsbox_error_clear(&e);
                apikey_table_release(&fresh);
                return r;
        }
        for (size_t i = 0; i < fresh.n; i++) { /* what this node knows of their use */
                apikey *old = find_hash(t, fresh.keys[i].hash);
                fresh.keys[i].last_used = old ? old->last_used : 0;
        }
        fresh.path = t->path;
        fresh.checked_ns = now;
        t->path = NULL;
        apikey_table_release(t);
        *t = fresh;
        remember(t, &st);
        dlog(LOG_INFO, "apikeys.loaded", NULL, "%zu API keys from %s (changed)", t->n, t->path);
        return 1;
}

static char *default_path(void)
{
        char *p = NULL;
        if (nsbox_host_root())
                return strdup("/var/lib/nsbox/api-keys.json");
        const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/')
                return asprintf(&p, "%s/nsbox/api-keys.json", xdg) < 0 ? NULL : p;
        if (!home || home[0] != '/') {
                struct passwd *pw = getpwuid(geteuid());
                home = pw ? pw->pw_dir : NULL;
        }
        if (!home || home[0] != '/')
                return NULL;
        return asprintf(&p, "%s/.local/state/nsbox/api-keys.json", home) < 0 ? NULL : p;
}

int apikeys_open(daemon_state *d, nsbox_error *err)
{
        bool named = d->conf->http_keys != NULL;
        _cleanup_free_ char *path = named ? strdup(d->conf->http_keys) : default_path();
        if (!path) { /* no home: no keys, and creates say why */
                dlog(LOG_WARNING, "apikeys.no_file", NULL, "no API key file (no home directory): set http.keys to make keys");
                return 0;
        }
        nsbox_error e = { 0 };
        struct stat st;
        /* the default place out of reach (a HOME of another user's): no keys yet, as before keys
         * existed; a file that is there, or the one configured, is read or nothing starts */
        if (!named && lstat(path, &st) < 0) {
                if (errno != ENOENT)
                        dlog(LOG_WARNING, "apikeys.no_file", NULL, "API key file %s: %s; set http.keys to make keys", path, strerror(errno));
                d->apikeys = (apikey_table){ .path = errno == ENOENT ? steal_pointer(&path) : NULL };
                return 0;
        }
        int r = load_table(path, &d->apikeys, &st, &e);
        if (r == -ENOENT) { /* none yet: made by the first api_key_create */
                nsbox_error_clear(&e);
                d->apikeys = (apikey_table){ .path = steal_pointer(&path) };
                return 0;
        }
        if (r < 0) {
                nsbox_err_as(err, -r, "api keys: %s; fix or remove the file (nsboxd(8), http.keys)", e.msg ? e.msg : path);
                nsbox_error_clear(&e);
                return r;
        }
        remember(&d->apikeys, &st);
        d->apikeys.path = steal_pointer(&path);
        dlog(LOG_INFO, "apikeys.loaded", NULL, "%zu API keys from %s", d->apikeys.n, d->apikeys.path);
        return 0;
}

void apikeys_close(daemon_state *d) { apikey_table_release(&d->apikeys); }

/* ---- the methods ---------------------------------------------------------------------------- */

static json_t *key_json(const apikey *k)
{
        json_t *o = json_pack("{ss ss sI ss}", "name", k->name, "prefix", k->prefix, "uid", (json_int_t)k->uid, "created_at", k->created_at);
        if (o && k->last_used) {
                char when[32];
                struct tm tm;
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&k->last_used, &tm));
                json_object_set_new(o, "last_used_at", json_string(when));
        }
        return o;
}

/* The uid a request acts on: the caller's, or (an operator's) params.uid. */
static int target_uid(client *c, json_t *id, json_t *params, const char *m, uid_t *ret)
{
        json_t *u = json_object_get(params, "uid");
        *ret = c->uid;
        if (!u)
                return 0;
        if (!json_is_integer(u) || json_integer_value(u) < 0 || json_integer_value(u) >= 0xffffffffLL) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "%s: 'uid' must be a user id", m);
                return -1;
        }
        *ret = (uid_t)json_integer_value(u);
        /* another uid's key only from root, and only on a root nsboxd: a user's nsboxd serves its
         * own user alone, so a key of another uid there would act as nobody it serves */
        if (*ret != c->uid && (!is_operator(c->uid) || geteuid() != 0)) {
                reply_error(c, id, RPC_SERVER_ERROR, "permission_denied", "%s: only root, on a root nsboxd, makes keys for another uid", m);
                return -1;
        }
        return 0;
}

static bool known_params(client *c, json_t *id, json_t *params, const char *m, const char *const *known)
{
        const char *k = nsbox_json_unknown_key(params, known);
        if (k)
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "%s: unknown parameter '%.64s'", m, k);
        return !k;
}

void method_api_key_create(daemon_state *d, client *c, json_t *id, json_t *params)
{
        static const char *const known[] = { "name", "uid", NULL };
        const char *m = "api_key_create";
        uid_t uid;
        if (!known_params(c, id, params, m, known) || target_uid(c, id, params, m, &uid) < 0)
                return;
        if (!d->apikeys.path) {
                reply_error(c, id, RPC_SERVER_ERROR, "unavailable", "%s: nsboxd has no API key file: set http.keys (nsboxd(8))", m);
                return;
        }
        apikeys_refresh(d, true); /* another node's keys stay in the file */
        json_t *n = json_object_get(params, "name");
        apikey k = { .uid = uid, .gid = uid == c->uid ? c->gid : (gid_t)uid };
        if (n && (!json_is_string(n) || !good_key_name(json_string_value(n)))) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument",
                            "%s: a key's name is 1-%d of [A-Za-z0-9._-], not starting with e2b_", m, APIKEY_NAME_MAX);
                return;
        }
        if (count_of(&d->apikeys, uid) >= APIKEYS_PER_UID) {
                reply_error(c, id, RPC_SERVER_ERROR, "capacity", "%s: uid %u has %u keys, the most it may have", m, (unsigned)uid,
                            APIKEYS_PER_UID);
                return;
        }
        if (d->apikeys.n >= APIKEYS_MAX) {
                reply_error(c, id, RPC_SERVER_ERROR, "capacity", "%s: nsboxd holds %u keys, the most it may", m, APIKEYS_MAX);
                return;
        }
        if (n)
                snprintf(k.name, sizeof(k.name), "%s", json_string_value(n));
        else /* key-N: the first N free */
                for (unsigned i = count_of(&d->apikeys, uid) + 1; !k.name[0] || by_name(&d->apikeys, uid, k.name); i++)
                        snprintf(k.name, sizeof(k.name), "key-%u", i);
        if (by_name(&d->apikeys, uid, k.name)) {
                reply_error(c, id, RPC_SERVER_ERROR, "conflict", "%s: uid %u already has a key named '%s'", m, (unsigned)uid, k.name);
                return;
        }
        if (uid != c->uid) {
                struct passwd *pw = getpwuid(uid);
                if (pw)
                        k.gid = pw->pw_gid;
        }
        uint8_t rnd[20];
        char key[APIKEY_LEN + 1] = "e2b_";
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "%s: getrandom: %s", m, strerror(errno));
                return;
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(key + 4 + 2 * i, 3, "%02x", rnd[i]);
        explicit_bzero(rnd, sizeof(rnd));
        hash_of(key, APIKEY_LEN, k.hash);
        snprintf(k.prefix, sizeof(k.prefix), "%.*s", APIKEY_PREFIX_LEN, key);
        time_t now = time(NULL);
        struct tm tm;
        strftime(k.created_at, sizeof(k.created_at), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        int r = apikey_table_add(&d->apikeys, &k);
        nsbox_error err = { 0 };
        if (r < 0) {
                explicit_bzero(key, sizeof(key));
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "%s: %s", m, strerror(-r));
                return;
        }
        if (apikeys_save(&d->apikeys, &err) < 0) {
                size_t i = lower_bound(&d->apikeys, k.hash); /* taken back: the file is the truth */
                memmove(&d->apikeys.keys[i], &d->apikeys.keys[i + 1], (d->apikeys.n - i - 1) * sizeof(apikey));
                d->apikeys.n--;
                explicit_bzero(key, sizeof(key));
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "%s: %s", m, err.msg ? err.msg : "save failed");
                nsbox_error_clear(&err);
                return;
        }
        dlog(LOG_NOTICE, "apikeys.created", NULL, "API key %s (%s) created for uid %u by uid %u", k.prefix, k.name, (unsigned)uid,
             (unsigned)c->uid);
        reply_result(c, id, json_pack("{ss ss ss sI ss}", "key", key, "name", k.name, "prefix", k.prefix, "uid", (json_int_t)uid, "created_at",
                                      k.created_at));
        explicit_bzero(key, sizeof(key));
}

static int by_uid_then_age(const void *a, const void *b)
{
        const apikey *x = *(const apikey *const *)a, *y = *(const apikey *const *)b;
        if (x->uid != y->uid)
                return x->uid < y->uid ? -1 : 1;
        int r = strcmp(x->created_at, y->created_at);
        return r ? r : strcmp(x->name, y->name);
}

void method_api_key_list(daemon_state *d, client *c, json_t *id, json_t *params)
{
        static const char *const known[] = { NULL };
        if (!known_params(c, id, params, "api_key_list", known))
                return;
        apikeys_refresh(d, true);
        bool all = is_operator(c->uid);
        const apikey **seen = calloc(d->apikeys.n + 1, sizeof(*seen));
        json_t *keys = json_array();
        if (!seen || !keys) {
                free(seen);
                json_decref(keys);
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "api_key_list: out of memory");
                return;
        }
        size_t n = 0;
        for (size_t i = 0; i < d->apikeys.n; i++)
                if (all || d->apikeys.keys[i].uid == c->uid)
                        seen[n++] = &d->apikeys.keys[i];
        qsort(seen, n, sizeof(*seen), by_uid_then_age); /* a stable order for people */
        for (size_t i = 0; i < n; i++)
                json_array_append_new(keys, key_json(seen[i]));
        free(seen);
        reply_result(c, id, json_pack("{so}", "keys", keys));
}

void method_api_key_delete(daemon_state *d, client *c, json_t *id, json_t *params)
{
        static const char *const known[] = { "name", "prefix", "uid", NULL };
        const char *m = "api_key_delete";
        uid_t uid;
        if (!known_params(c, id, params, m, known) || target_uid(c, id, params, m, &uid) < 0)
                return;
        apikeys_refresh(d, true);
        const char *name = json_string_value(json_object_get(params, "name")), *prefix = json_string_value(json_object_get(params, "prefix"));
        if (!name == !prefix || (json_object_get(params, "name") && !name) || (json_object_get(params, "prefix") && !prefix)) {
                reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "%s: expected a key's 'name' or its 'prefix'", m);
                return;
        }
        /* a prefix: among the keys the caller sees (all of them for an operator without 'uid');
         * a name: of one uid */
        bool any_uid = prefix && is_operator(c->uid) && !json_object_get(params, "uid");
        apikey_table kept = d->apikeys;
        kept.keys = malloc((d->apikeys.n + 1) * sizeof(apikey));
        if (!kept.keys) {
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "%s: out of memory", m);
                return;
        }
        kept.n = 0;
        for (size_t i = 0; i < d->apikeys.n; i++) {
                const apikey *k = &d->apikeys.keys[i];
                bool hit = (any_uid || k->uid == uid) && (prefix ? !strcmp(k->prefix, prefix) : !strcmp(k->name, name));
                if (!hit)
                        kept.keys[kept.n++] = *k;
        }
        size_t deleted = d->apikeys.n - kept.n;
        if (deleted == 0) {
                free(kept.keys);
                reply_error(c, id, RPC_SERVER_ERROR, "not_found", "%s: no key %s '%.64s'%s", m, prefix ? "with prefix" : "named",
                            prefix ? prefix : name, is_operator(c->uid) && !prefix ? " of this uid" : " of yours");
                return;
        }
        nsbox_error err = { 0 };
        if (apikeys_save(&kept, &err) < 0) {
                free(kept.keys);
                reply_error(c, id, RPC_SERVER_ERROR, "internal", "%s: %s", m, err.msg ? err.msg : "save failed");
                nsbox_error_clear(&err);
                return;
        }
        free(d->apikeys.keys);
        d->apikeys = kept;
        dlog(LOG_NOTICE, "apikeys.deleted", NULL, "%zu API keys (%s) deleted by uid %u", deleted, prefix ? prefix : name, (unsigned)c->uid);
        reply_result(c, id, json_pack("{sI}", "deleted", (json_int_t)deleted));
}
