/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd's filesystem.Filesystem on nsbox's file tools: Stat (stat), ListDir (list_dir), MakeDir
 * (mkdir, then stat), Move (rename, then stat), Remove (remove), WatchDir (a streamed watch),
 * and the polling watchers of the synchronous Python SDK (CreateWatcher, GetWatcherEvents,
 * RemoveWatcher), each a watch call on an internal request of its own that outlives the HTTP
 * requests (http_internal_new), kept per sandbox until removed or until its sandbox goes. */
#include "http.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "../connect.h"

#define FS_PATH_MAX 4096
#define FS_MAX_DEPTH 32            /* list_dir's own bound; its entries are capped too */
#define FS_WATCHERS_PER_SANDBOX 16
#define FS_WATCHER_EVENTS 4096      /* buffered per watcher; the oldest are dropped and counted */

enum { FS_STAT, FS_LIST, FS_MKDIR, FS_MOVE, FS_REMOVE, FS_WATCH, FS_CREATE_WATCHER };

/* What becomes of a watch's events: names relative to base; nsbox's own temporaries hidden. */
typedef struct fs_watchview {
        char *base;    /* the watched directory, absolute */
        char *pending; /* a temporary of write_file was renamed: the final name's create is its write */
        char *created; /* the last event's name if it was a create: mkdir's chmod after is not shown */
} fs_watchview;

typedef struct fs_watcher fs_watcher;

typedef struct fs_op {
        int kind;
        uint64_t call;       /* the JSON-RPC id waited for */
        bool second;         /* Move, MakeDir: the stat after */
        char *path;          /* what the second step stats */
        fs_watchview view;   /* WatchDir */
        fs_watcher *watcher; /* CreateWatcher: the one it waits to start */
} fs_op;

struct fs_watcher {
        fs_watcher *next;
        hreq *ir; /* its internal request; its state is this watcher */
        uint64_t sandbox, call;
        char id[NSBOX_ID_SIZE];
        fs_watchview view;
        json_t *events; /* FilesystemEvent messages not yet fetched */
        uint64_t dropped;
        bool started, ended;
        char *why;      /* how it ended, if with an error */
        hreq *creating; /* CreateWatcher's request, until answered */
};

static fs_watcher *watchers; /* nsboxd runs one daemon_state, in one thread */
static bool reap_pending;

/* ---- the request message --------------------------------------------------------------------- */

/* The snake_case spelling of a camelCase name. */
static void snake_of(const char *camel, char *out, size_t n)
{
        size_t j = 0;
        for (const char *p = camel; *p && j + 2 < n; p++) {
                if (*p >= 'A' && *p <= 'Z') {
                        out[j++] = '_';
                        out[j++] = (char)(*p - 'A' + 'a');
                } else
                        out[j++] = *p;
        }
        out[j] = 0;
}

/* The field by its camelCase or snake_case name (both given: invalid). */
static int field(hreq *r, json_t *m, const char *camel, json_t **ret)
{
        char snake[64];
        snake_of(camel, snake, sizeof(snake));
        json_t *a = json_object_get(m, camel), *b = strcmp(camel, snake) ? json_object_get(m, snake) : NULL;
        if (a && b) {
                envd_error(r, "invalid_argument", "'%s' is given twice (as %s and %s)", camel, camel, snake);
                return -EINVAL;
        }
        *ret = a ? a : b;
        if (*ret && json_is_null(*ret))
                *ret = NULL; /* proto3 JSON: null is the default */
        return 0;
}

/* Every field of m is one of known (camelCase, or its snake_case). */
static int known_fields(hreq *r, json_t *m, const char *const *known)
{
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v) {
                bool ok = false;
                for (const char *const *p = known; *p && !ok; p++) {
                        char snake[64];
                        snake_of(*p, snake, sizeof(snake));
                        ok = !strcmp(k, *p) || !strcmp(k, snake);
                }
                if (!ok) {
                        envd_error(r, "invalid_argument", "unknown field '%.64s'", k);
                        return -EINVAL;
                }
        }
        return 0;
}

/* A path field, absolute: relative ones (and ~) resolve in the home (envd_home); empty is the home when
 * allowed.  *ret is malloc'd. */
static int path_field(hreq *r, json_t *m, const char *name, bool empty_ok, char **ret)
{
        json_t *v;
        if (field(r, m, name, &v) < 0)
                return -EINVAL;
        if (v && !json_is_string(v)) {
                envd_error(r, "invalid_argument", "'%s' must be a string", name);
                return -EINVAL;
        }
        const char *p = v ? json_string_value(v) : "";
        size_t len = v ? json_string_length(v) : 0;
        if (len != strlen(p) || len > FS_PATH_MAX) {
                envd_error(r, "invalid_argument", "'%s' must be a path of at most %d bytes, without NUL", name, FS_PATH_MAX);
                return -EINVAL;
        }
        if (!len && !empty_ok) {
                envd_error(r, "invalid_argument", "'%s' is required", name);
                return -EINVAL;
        }
        int n;
        if (p[0] == '/')
                n = asprintf(ret, "%s", p);
        else if (!len || !strcmp(p, "~"))
                n = asprintf(ret, "%s", envd_home(r));
        else
                n = asprintf(ret, "%s/%s", envd_home(r), !strncmp(p, "~/", 2) ? p + 2 : p);
        if (n < 0) {
                *ret = NULL;
                envd_error(r, "internal", "out of memory");
                return -ENOMEM;
        }
        return 0;
}

static int bool_field(hreq *r, json_t *m, const char *name, bool *ret)
{
        json_t *v;
        if (field(r, m, name, &v) < 0)
                return -EINVAL;
        if (v && !json_is_boolean(v)) {
                envd_error(r, "invalid_argument", "'%s' must be true or false", name);
                return -EINVAL;
        }
        *ret = v && json_is_true(v);
        return 0;
}

/* ListDir's depth: uint32 as a number or a decimal string; 0 (unset) is 1. */
static int depth_field(hreq *r, json_t *m, unsigned *ret)
{
        json_t *v;
        if (field(r, m, "depth", &v) < 0)
                return -EINVAL;
        long long d = 0;
        char *end = NULL;
        const char *s = json_string_value(v);
        if (json_is_integer(v))
                d = json_integer_value(v);
        else if (s && *s >= '0' && *s <= '9' && strlen(s) <= 10)
                d = strtoll(s, &end, 10);
        if ((v && !json_is_integer(v) && (!end || *end)) || d < 0 || d > FS_MAX_DEPTH) {
                envd_error(r, "invalid_argument", "'depth' must be an integer from 1 to %d", FS_MAX_DEPTH);
                return -EINVAL;
        }
        *ret = d ? (unsigned)d : 1;
        return 0;
}

/* ---- EntryInfo ----------------------------------------------------------------------------- */

/* nsbox's sandboxes have root (0), user (1000) and nobody; other ids are shown as numbers. */
static json_t *owner_name(json_t *id)
{
        json_int_t v = json_integer_value(id);
        if (!json_is_integer(id))
                return json_string("");
        if (v == 0)
                return json_string("root");
        if (v == 1000)
                return json_string("user");
        if (v == 65534)
                return json_string("nobody");
        char buf[24];
        snprintf(buf, sizeof(buf), "%lld", (long long)v);
        return json_string(buf);
}

/* Go's os.FileMode.String(), which envd sends: "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx",
 * "dtrwxrwxrwx" (sticky). */
static void permissions(const char *type, unsigned mode, char out[16])
{
        size_t j = 0;
        if (!strcmp(type, "directory"))
                out[j++] = 'd';
        else if (!strcmp(type, "symlink"))
                out[j++] = 'L';
        else if (strcmp(type, "file"))
                out[j++] = '?';
        if (mode & 04000)
                out[j++] = 'u';
        if (mode & 02000)
                out[j++] = 'g';
        if (mode & 01000)
                out[j++] = 't';
        if (!j)
                out[j++] = '-';
        for (int i = 8; i >= 0; i--)
                out[j++] = (mode & (1u << i)) ? "xwr"[i % 3] : '-';
        out[j] = 0;
}

static json_t *rfc3339(double t)
{
        time_t sec = (time_t)t;
        long usec = (long)((t - (double)sec) * 1e6 + 0.5);
        if (usec >= 1000000) {
                sec++;
                usec -= 1000000;
        }
        struct tm tm;
        char buf[64], out[96];
        gmtime_r(&sec, &tm);
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(out, sizeof(out), "%s.%06ldZ", buf, usec);
        return json_string(out);
}

static const char *file_type(const char *t)
{
        if (!strcmp(t, "file"))
                return "FILE_TYPE_FILE";
        if (!strcmp(t, "directory"))
                return "FILE_TYPE_DIRECTORY";
        if (!strcmp(t, "symlink"))
                return "FILE_TYPE_SYMLINK";
        return "FILE_TYPE_UNSPECIFIED";
}

/* An EntryInfo of a stat result or a list_dir entry ({path, type, size, mode, mtime, uid, gid,
 * target}). */
static json_t *entry_info(json_t *t)
{
        const char *path = json_string_value(json_object_get(t, "path")) ?: "";
        const char *type = json_string_value(json_object_get(t, "type")) ?: "other";
        const char *slash = strrchr(path, '/');
        const char *name = slash && slash[1] ? slash + 1 : path;
        unsigned mode = (unsigned)json_integer_value(json_object_get(t, "mode"));
        char perm[16], size[24];
        permissions(type, mode, perm);
        snprintf(size, sizeof(size), "%lld", (long long)json_integer_value(json_object_get(t, "size")));
        json_t *e = json_pack("{ss ss ss ss si ss so so so}", "name", name, "type", file_type(type), "path", path, "size", size,
                              "mode", (int)(mode & 0777), "permissions", perm, "owner", owner_name(json_object_get(t, "uid")), "group",
                              owner_name(json_object_get(t, "gid")), "modifiedTime", rfc3339(json_real_value(json_object_get(t, "mtime"))));
        /* envd's symlinkTarget is where the link leads, resolved (the link's own path when it
         * leads nowhere); the link's text is the agent's fallback */
        json_t *target = json_object_get(t, "resolved");
        if (!json_is_string(target))
                target = json_object_get(t, "target");
        if (e && json_is_string(target))
                json_object_set(e, "symlinkTarget", target);
        json_t *meta = json_object_get(t, "metadata"); /* envd 0.6.2: user.e2b.* attributes */
        if (e && json_object_size(meta))
                json_object_set(e, "metadata", meta);
        return e;
}

/* ---- watch events ---------------------------------------------------------------------------- */

/* The temporaries nsbox writes a file through: ".NAME.nsbox-XXXXXX" (write_file's, six letters or
 * digits) and ".NAME.upload-XXXXXXXX" (an upload to /files, http_files.c: eight hex digits).
 * NAME's length, or 0 if base is neither. */
static bool chars_in(const char *s, size_t n, bool hex)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= (hex ? 'f' : 'z')) || (!hex && s[i] >= 'A' && s[i] <= 'Z')))
                        return false;
        return true;
}

static size_t temp_of(const char *base)
{
        size_t n = strlen(base);
        if (base[0] != '.')
                return 0;
        if (n >= 15 && !strncmp(base + n - 13, ".nsbox-", 7) && chars_in(base + n - 6, 6, false))
                return n - 14;
        if (n >= 18 && !strncmp(base + n - 16, ".upload-", 8) && chars_in(base + n - 8, 8, true))
                return n - 17;
        return 0;
}

static void view_free(fs_watchview *v)
{
        free(v->base);
        free(v->pending);
        free(v->created);
        v->base = v->pending = v->created = NULL;
}

/* A FilesystemEvent; with the entry the agent stat'ed when it read the event (a watch with
 * includeEntry: envd 0.6.3), for a create, write or chmod. */
static json_t *fs_event(const char *name, const char *type, json_t *entry)
{
        json_t *ev = json_pack("{ss ss}", "name", name, "type", type);
        if (ev && json_is_object(entry))
                json_object_set_new(ev, "entry", entry_info(entry));
        return ev;
}

/* One event of nsbox's watch ({op, path, type}) as envd's FilesystemEvents, appended to out:
 * none for nsbox's temporaries (their rename into place is a create and a write of the final
 * name, as envd reports a written file) and for an overflow (*overflow set). */
static void view_event(fs_watchview *v, json_t *ev, json_t *out, bool *overflow)
{
        const char *op = json_string_value(json_object_get(ev, "op")) ?: "";
        const char *path = json_string_value(json_object_get(ev, "path")) ?: "";
        size_t bl = strlen(v->base);
        const char *name = path;
        if (!strcmp(path, v->base))
                name = "";
        else if (!strncmp(path, v->base, bl) && (path[bl] == '/' || (bl == 1 && v->base[0] == '/')))
                name = path + (bl == 1 ? 1 : bl + 1);
        if (!strcmp(op, "overflow")) {
                *overflow = true;
                return;
        }
        const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
        size_t tl = temp_of(base);
        if (tl) {
                if (!strcmp(op, "rename")) { /* moved into place next: remember its final name */
                        free(v->pending);
                        v->pending = NULL;
                        if (asprintf(&v->pending, "%.*s%.*s", (int)(base - name), name, (int)tl, base + 1) < 0)
                                v->pending = NULL;
                }
                return;
        }
        bool just_created = v->created && !strcmp(v->created, name);
        free(v->created);
        const char *type = json_string_value(json_object_get(ev, "type")) ?: "";
        v->created = !strcmp(op, "create") && !strcmp(type, "dir") ? strdup(name) : NULL;
        if (just_created && !strcmp(op, "chmod")) /* mkdir makes 0700, then sets the mode */
                return;
        static const char *const ops[][2] = {
                { "create", "EVENT_TYPE_CREATE" }, { "write", "EVENT_TYPE_WRITE" }, { "remove", "EVENT_TYPE_REMOVE" },
                { "rename", "EVENT_TYPE_RENAME" }, { "chmod", "EVENT_TYPE_CHMOD" },
        };
        json_t *entry = json_object_get(ev, "entry");
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
                if (!strcmp(op, ops[i][0]))
                        json_array_append_new(out, fs_event(name, ops[i][1], entry));
        if (v->pending && !strcmp(op, "create") && !strcmp(name, v->pending))
                json_array_append_new(out, fs_event(name, "EVENT_TYPE_WRITE", entry));
        if (v->pending && strcmp(op, "rename")) {
                free(v->pending);
                v->pending = NULL;
        }
}

/* ---- unary methods ---------------------------------------------------------------------------- */

static void op_free(void *p)
{
        fs_op *o = p;
        if (!o)
                return;
        if (o->watcher) { /* CreateWatcher's client went before the watch started: it goes too */
                o->watcher->creating = NULL;
                o->watcher->ended = true;
                reap_pending = true;
        }
        free(o->path);
        view_free(&o->view);
        free(o);
}

/* A tool's failure as envd's error. */
static void tool_failed(hreq *r, fs_op *o, const char *code, const char *why)
{
        const char *cc = envd_code(r, code);
        if (o->kind == FS_MKDIR && (!strcmp(code, "conflict") || !strcmp(code, "not_a_directory")))
                cc = "invalid_argument"; /* a file is in the way (envd: "path already exists but it is not a directory") */
        envd_error(r, cc, "%s", why);
}

static void unary_msg(hreq *r, json_t *msg)
{
        fs_op *o = r->state;
        if ((uint64_t)json_integer_value(json_object_get(msg, "id")) != o->call || r->status || r->streaming)
                return;
        const char *why, *code = rpc_error_code(msg, &why);
        if (code && o->kind == FS_REMOVE && !strcmp(connect_code_of(code), "not_found") && http_sandbox(r)) {
                envd_answer(r, json_object()); /* envd's RemoveAll: nothing there is nothing to remove */
                return;
        }
        if (code) {
                tool_failed(r, o, code, why);
                return;
        }
        json_t *res = json_object_get(msg, "result");
        if ((o->kind == FS_MKDIR || o->kind == FS_MOVE) && !o->second) {
                if (o->kind == FS_MKDIR && !json_is_true(json_object_get(res, "created"))) {
                        envd_error(r, "already_exists", "directory already exists: %s", o->path);
                        return;
                }
                o->second = true;
                o->call = http_call(r, "stat", json_pack("{ss sb}", "path", o->path, "metadata", true), false);
                return;
        }
        json_t *answer = NULL;
        if (o->kind == FS_REMOVE) {
                answer = json_object();
        } else if (o->kind == FS_LIST) {
                json_t *entries = json_array(), *e;
                size_t i;
                json_array_foreach(json_object_get(res, "entries"), i, e)
                        json_array_append_new(entries, entry_info(e));
                answer = json_pack("{so}", "entries", entries);
        } else {
                answer = json_pack("{so}", "entry", entry_info(res));
        }
        envd_answer(r, answer);
}

static fs_op *op_new(hreq *r, int kind)
{
        fs_op *o = calloc(1, sizeof(*o));
        if (!o) {
                envd_error(r, "internal", "out of memory");
                return NULL;
        }
        o->kind = kind;
        r->state = o;
        r->state_free = op_free;
        r->on_msg = unary_msg;
        return o;
}

static void unary(hreq *r, json_t *m, int kind)
{
        static const char *const one_path[] = { "path", NULL }, *const list[] = { "path", "depth", NULL },
                                 *const move[] = { "source", "destination", NULL };
        const char *const *known = kind == FS_LIST ? list : kind == FS_MOVE ? move : one_path;
        char *path = NULL, *to = NULL;
        unsigned depth = 1;
        if (known_fields(r, m, known) < 0)
                return;
        if (kind == FS_MOVE ? path_field(r, m, "source", false, &path) < 0 || path_field(r, m, "destination", false, &to) < 0
                            : path_field(r, m, "path", kind == FS_STAT || kind == FS_LIST, &path) < 0)
                goto out;
        if (kind == FS_LIST && depth_field(r, m, &depth) < 0)
                goto out;
        fs_op *o = op_new(r, kind);
        if (!o)
                goto out;
        json_t *p = NULL;
        const char *tool = NULL;
        switch (kind) {
        case FS_STAT: tool = "stat", p = json_pack("{ss sb}", "path", path, "metadata", true); break;
        case FS_LIST: tool = "list_dir", p = json_pack("{ss si sb}", "path", path, "depth", (int)depth, "metadata", true); break;
        case FS_MKDIR: tool = "mkdir", p = json_pack("{ss sb}", "path", path, "parents", true); break;
        case FS_REMOVE: tool = "remove", p = json_pack("{ss sb}", "path", path, "recursive", true); break;
        case FS_MOVE: tool = "rename", p = json_pack("{ss ss}", "from", path, "to", to); break;
        }
        o->path = kind == FS_MOVE ? to : path;
        if (kind == FS_MOVE)
                to = NULL;
        else
                path = NULL;
        o->call = http_call(r, tool, p, false);
out:
        free(path);
        free(to);
}

/* ---- WatchDir ------------------------------------------------------------------------------- */

static void watch_tick(hreq *r, uint64_t now)
{
        if (r->deadline_ns && now >= r->deadline_ns) {
                r->deadline_ns = r->keepalive_ns = 0;
                envd_error(r, "deadline_exceeded", "the watch reached its deadline (Connect-Timeout-Ms)");
                return;
        }
        if (r->keepalive_ns && now >= r->keepalive_ns) {
                if (r->streaming && !r->stream_end)
                        envd_send(r, json_pack("{s{}}", "keepalive"));
                r->keepalive_ns = now + r->keepalive_every_ns;
        }
}

static void watch_msg(hreq *r, json_t *msg)
{
        fs_op *o = r->state;
        if (r->stream_end || (r->status && !r->streaming))
                return;
        json_t *params = json_object_get(msg, "params");
        if (json_object_get(msg, "id")) { /* the watch ended: its directory went, or it failed */
                const char *why, *code = rpc_error_code(msg, &why);
                if (code)
                        envd_error(r, envd_code(r, code), "%s", why);
                else
                        envd_end(r, NULL, NULL);
                return;
        }
        if ((uint64_t)json_integer_value(json_object_get(params, "call")) != o->call)
                return;
        const char *ev = json_string_value(json_object_get(params, "event")) ?: "";
        if (!strcmp(ev, "started")) {
                if (http_stream_begin(r, 200, "application/connect+json") < 0) {
                        envd_error(r, "resource_exhausted", "too many streams");
                        return;
                }
                envd_send(r, json_pack("{s{}}", "start"));
        } else if (!strcmp(ev, "fs") && r->streaming) {
                json_t *out = json_array(), *e;
                bool overflow = false;
                size_t i;
                view_event(&o->view, params, out, &overflow);
                json_array_foreach(out, i, e)
                        envd_send(r, json_pack("{sO}", "filesystem", e));
                json_decref(out);
        }
}

/* WatchDir's and CreateWatcher's request {path, recursive, includeEntry, allowNetworkMounts} as
 * the agent's watch call's parameters; NULL when answered with the error.  *ret_path: the path
 * (to free). */
static json_t *watch_request(hreq *r, json_t *m, char **ret_path)
{
        static const char *const known[] = { "path", "recursive", "includeEntry", "allowNetworkMounts", NULL };
        char *path = NULL;
        bool recursive = false, include = false, network = false;
        if (known_fields(r, m, known) < 0 || path_field(r, m, "path", true, &path) < 0 || bool_field(r, m, "recursive", &recursive) < 0 ||
            bool_field(r, m, "includeEntry", &include) < 0 || bool_field(r, m, "allowNetworkMounts", &network) < 0) {
                free(path);
                return NULL;
        }
        json_t *p = json_pack("{ss sb sb sb}", "path", path, "recursive", recursive, "entries", include, "network_mounts", network);
        if (!p) {
                envd_error(r, "internal", "out of memory");
                free(path);
                return NULL;
        }
        *ret_path = path;
        return p;
}

/* WatchDirResponse's oneof is its own: {"start": {}}, {"filesystem": {...}}, {"keepalive": {}}.
 * The first message is start once the watch is set up; a missing directory is an error. */
static void watch_dir(hreq *r, json_t *m)
{
        char *path;
        json_t *p = watch_request(r, m, &path);
        if (!p)
                return;
        fs_op *o = op_new(r, FS_WATCH);
        if (!o) {
                json_decref(p);
                free(path);
                return;
        }
        o->view.base = path;
        r->on_msg = watch_msg;
        r->on_tick = watch_tick;
        envd_stream_timers(r);
        o->call = http_call(r, "watch", p, true);
}

/* ---- the polling watchers ------------------------------------------------------------------- */

static void watcher_free(void *p)
{
        fs_watcher *w = p;
        for (fs_watcher **pp = &watchers; *pp; pp = &(*pp)->next)
                if (*pp == w) {
                        *pp = w->next;
                        break;
                }
        if (w->creating) {
                fs_op *o = w->creating->state;
                o->watcher = NULL;
                envd_error(w->creating, "unavailable", "the watch ended before it started: %s", w->why ? w->why : "its sandbox went");
        }
        view_free(&w->view);
        json_decref(w->events);
        free(w->why);
        free(w);
}

static void watcher_push(fs_watcher *w, json_t *ev)
{
        while (json_array_size(w->events) >= FS_WATCHER_EVENTS) {
                json_array_remove(w->events, 0);
                w->dropped++;
        }
        json_array_append(w->events, ev);
}

static void watcher_msg(hreq *ir, json_t *msg)
{
        fs_watcher *w = ir->state;
        json_t *params = json_object_get(msg, "params");
        if (json_object_get(msg, "id")) { /* ended: its directory or its sandbox went */
                const char *why, *code = rpc_error_code(msg, &why);
                w->ended = true;
                if (code && !w->why)
                        w->why = strdup(why);
                if (w->creating) {
                        hreq *cr = w->creating;
                        ((fs_op *)cr->state)->watcher = NULL;
                        w->creating = NULL;
                        envd_error(cr, code ? envd_code(cr, code) : "not_found", "%s", code ? why : "the directory went");
                }
                reap_pending = true;
                return;
        }
        if ((uint64_t)json_integer_value(json_object_get(params, "call")) != w->call)
                return;
        const char *ev = json_string_value(json_object_get(params, "event")) ?: "";
        if (!strcmp(ev, "started")) {
                w->started = true;
                if (w->creating) {
                        hreq *cr = w->creating;
                        ((fs_op *)cr->state)->watcher = NULL;
                        w->creating = NULL;
                        envd_answer(cr, json_pack("{ss}", "watcherId", w->id));
                }
        } else if (!strcmp(ev, "fs")) {
                json_t *out = json_array(), *e;
                bool overflow = false;
                size_t i;
                view_event(&w->view, params, out, &overflow);
                json_array_foreach(out, i, e)
                        watcher_push(w, e);
                w->dropped += overflow;
                json_decref(out);
        }
}

static fs_watcher *watcher_find(hreq *r, json_t *m)
{
        static const char *const known[] = { "watcherId", NULL };
        json_t *v;
        if (known_fields(r, m, known) < 0 || field(r, m, "watcherId", &v) < 0)
                return NULL;
        if (!json_is_string(v) || json_string_length(v) != 32) {
                envd_error(r, "invalid_argument", "'watcherId' must be a watcher's id");
                return NULL;
        }
        for (fs_watcher *w = watchers; w; w = w->next)
                if (w->sandbox == r->sandbox && !strcmp(w->id, json_string_value(v)) && w->started)
                        return w;
        envd_error(r, "not_found", "watcher %s not found", json_string_value(v));
        return NULL;
}

static void create_watcher(hreq *r, json_t *m)
{
        char *path;
        json_t *p = watch_request(r, m, &path);
        if (!p)
                return;
        unsigned n = 0; /* ended ones count until removed: they may hold events */
        for (fs_watcher *w = watchers; w; w = w->next)
                n += w->sandbox == r->sandbox;
        unsigned char raw[16];
        fs_watcher *w = n < FS_WATCHERS_PER_SANDBOX ? calloc(1, sizeof(*w)) : NULL;
        fs_op *o = w ? op_new(r, FS_CREATE_WATCHER) : NULL;
        if (!o || !(w->events = json_array()) || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw) || !(w->ir = http_internal_new(r))) {
                if (n >= FS_WATCHERS_PER_SANDBOX)
                        envd_error(r, "resource_exhausted", "a sandbox has at most %d watchers: remove one (RemoveWatcher)", FS_WATCHERS_PER_SANDBOX);
                else if (!r->status)
                        envd_error(r, "internal", "out of memory");
                if (w)
                        json_decref(w->events);
                free(w);
                free(path);
                json_decref(p);
                return;
        }
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(w->id + 2 * i, 3, "%02x", raw[i]);
        w->sandbox = r->sandbox;
        w->view.base = path;
        w->creating = r;
        o->watcher = w;
        w->ir->state = w;
        w->ir->state_free = watcher_free;
        w->ir->on_msg = watcher_msg;
        w->next = watchers;
        watchers = w;
        w->call = http_call(w->ir, "watch", p, true);
}

static void get_watcher_events(hreq *r, json_t *m)
{
        fs_watcher *w = watcher_find(r, m);
        if (!w)
                return;
        if (w->ended && !json_array_size(w->events)) {
                envd_error(r, "not_found", "the watcher ended: %s", w->why ? w->why : "its directory went");
                return;
        }
        json_t *answer = json_pack("{so}", "events", w->events);
        if (answer && w->dropped) { /* clients ignore unknown fields: this one says events were lost */
                char n[24];
                snprintf(n, sizeof(n), "%llu", (unsigned long long)w->dropped);
                json_object_set_new(answer, "droppedEvents", json_string(n));
        }
        w->events = json_array();
        w->dropped = 0;
        envd_answer(r, answer);
}

static void remove_watcher(hreq *r, json_t *m)
{
        fs_watcher *w = watcher_find(r, m);
        if (!w)
                return;
        http_internal_free(w->ir); /* frees w (watcher_free); its watch is cancelled */
        envd_answer(r, json_object());
}

void fs_reap(daemon_state *d)
{
        (void)d;
        if (!reap_pending)
                return;
        reap_pending = false;
        for (fs_watcher *w = watchers, *next; w; w = next) {
                next = w->next;
                if (w->ended && (!w->started || !http_sandbox(w->ir)))
                        http_internal_free(w->ir);
        }
}

void fs_close(daemon_state *d)
{
        (void)d;
        while (watchers)
                http_internal_free(watchers->ir);
}

/* ---- the service ---------------------------------------------------------------------------- */

void fs_request(hreq *r, const char *method)
{
        static const struct {
                const char *name;
                int kind;
        } unaries[] = { { "Stat", FS_STAT }, { "ListDir", FS_LIST }, { "MakeDir", FS_MKDIR }, { "Move", FS_MOVE }, { "Remove", FS_REMOVE } };
        if (envd_user(r, NULL) < 0)
                return;
        json_t *m = envd_message(r);
        if (!m)
                return;
        bool done = false;
        for (size_t i = 0; i < sizeof(unaries) / sizeof(unaries[0]) && !done; i++)
                if (!strcmp(method, unaries[i].name)) {
                        unary(r, m, unaries[i].kind);
                        done = true;
                }
        if (done)
                ;
        else if (!strcmp(method, "WatchDir") && !envd_streaming(r))
                envd_error(r, "invalid_argument", "WatchDir streams: its Content-Type is application/connect+json");
        else if (!strcmp(method, "WatchDir"))
                watch_dir(r, m);
        else if (!strcmp(method, "CreateWatcher"))
                create_watcher(r, m);
        else if (!strcmp(method, "GetWatcherEvents"))
                get_watcher_events(r, m);
        else if (!strcmp(method, "RemoveWatcher"))
                remove_watcher(r, m);
        else
                envd_error(r, "unimplemented", "filesystem.Filesystem/%.64s is not a method", method);
        json_decref(m);
}
