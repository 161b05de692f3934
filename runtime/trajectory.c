/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "trajectory.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sha256.h"

/* Result keys whose values differ from one run to the next; keep in step with the man page. */
static const char *const volatile_keys[] = {
        "duration_ms", "cpu_time_ms", "peak_memory_bytes", "mtime", "atime", "ctime", "modified_time", "pid", "time", "id",
        "short_id", "parents", "head",
};

static const char *const summary_keys[] = {
        "exit_code", "signal", "reason", "timed_out", "size", "total_lines", "occurrences",
};

static const char *const header_keys[] = { "nsbox_trajectory", "sandbox", "created", "create" };
static const char *const outcome_keys[] = { "step", "op", "duration_ms", "error", "result_sha256", "summary" };
static const char *const call_keys[] = { "tool", "params" };
static const char *const named_keys[] = { "name" };

#define CHUNK_SIZE 65536

static bool in_list(const char *key, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(key, list[i]))
                        return true;
        return false;
}

/* A copy of v's objects and arrays, sharing its strings and numbers (a big string is not copied);
 * with strip, the volatile keys are left out of every object. */
static json_t *copy_containers(json_t *v, bool strip)
{
        if (json_is_object(v)) {
                json_t *o = json_object();
                const char *key;
                json_t *child;
                json_object_foreach(v, key, child) {
                        if (strip && in_list(key, volatile_keys, ARRAY_SIZE(volatile_keys)))
                                continue;
                        if (!o || json_object_set_new(o, key, copy_containers(child, strip)) < 0) {
                                json_decref(o);
                                return NULL;
                        }
                }
                return o;
        }
        if (json_is_array(v)) {
                json_t *a = json_array();
                size_t i;
                json_t *child;
                json_array_foreach(v, i, child) {
                        if (!a || json_array_append_new(a, copy_containers(child, strip)) < 0) {
                                json_decref(a);
                                return NULL;
                        }
                }
                return a;
        }
        return json_incref(v);
}

static int feed_sha256(const char *buffer, size_t size, void *data)
{
        nsbox_sha256_update(data, buffer, size);
        return 0;
}

int nsbox_traj_digest(json_t *result, char ret_hex[65])
{
        if (!result)
                return -EINVAL;
        json_t *stripped = copy_containers(result, true);
        if (!stripped)
                return -ENOMEM;
        /* streamed into the hash: a result holding a 16 MiB file is not serialized whole */
        nsbox_sha256 c;
        nsbox_sha256_init(&c);
        int r = json_dump_callback(stripped, feed_sha256, &c,
                                   JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(17) |
                                           JSON_ENCODE_ANY);
        json_decref(stripped);
        if (r < 0)
                return -ENOMEM;
        nsbox_sha256_final_hex(&c, ret_hex);
        return 0;
}

json_t *nsbox_traj_summary(json_t *result)
{
        json_t *s = json_object();
        if (!s || !json_is_object(result))
                return s;
        for (size_t i = 0; i < ARRAY_SIZE(summary_keys); i++) {
                json_t *v = json_object_get(result, summary_keys[i]);
                if (v && json_object_set_new(s, summary_keys[i], json_deep_copy(v)) < 0) {
                        json_decref(s);
                        return NULL;
                }
        }
        return s;
}

/* Names kept in a trajectory end up in messages: non-empty UTF-8, no control characters. */
static bool text_ok(const char *s, size_t len)
{
        if (!s || len == 0 || strlen(s) != len)
                return false;
        for (size_t i = 0; i < len;) {
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
                size_t n = nsbox_utf8_seq((const unsigned char *)s + i, len - i);
                if (n == 0)
                        return false;
                i += n;
        }
        return true;
}

/* Error codes are identifiers like file_not_found. */
static bool error_code_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '_' || s[i] == '-' || s[i] == '.'))
                        return false;
        return true;
}

static bool digest_ok(const char *s, size_t len)
{
        if (len != 64)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* Sets key to value, which it owns; false (value released) when out of memory. */
static bool put(json_t *o, const char *key, json_t *value)
{
        return value && json_object_set_new(o, key, value) == 0;
}

json_t *nsbox_traj_header(const char *sandbox_id, time_t created, json_t *create_params)
{
        if (!sandbox_id || !text_ok(sandbox_id, strlen(sandbox_id)) || created < 0 ||
            (create_params && !json_is_object(create_params))) {
                errno = EINVAL;
                return NULL;
        }
        json_t *h = json_object();
        if (!h || !put(h, "nsbox_trajectory", json_integer(NSBOX_TRAJ_VERSION)) ||
            !put(h, "sandbox", json_string(sandbox_id)) || !put(h, "created", json_integer((json_int_t)created)) ||
            !put(h, "create", create_params ? copy_containers(create_params, false) : json_object())) {
                json_decref(h);
                errno = ENOMEM;
                return NULL;
        }
        return h;
}

typedef enum traj_op {
        TRAJ_OP_CALL,
        TRAJ_OP_SNAPSHOT,
        TRAJ_OP_RESET,
        _TRAJ_OP_MAX,
        _TRAJ_OP_INVALID = -1,
} traj_op;

static const char *const op_names[_TRAJ_OP_MAX] = { "call", "snapshot", "reset" };

static traj_op op_from_string(const char *s)
{
        for (int i = 0; s && i < _TRAJ_OP_MAX; i++)
                if (!strcmp(s, op_names[i]))
                        return (traj_op)i;
        return _TRAJ_OP_INVALID;
}

json_t *nsbox_traj_step_line(uint64_t step, const char *op, const char *tool_or_name, json_t *params,
                             double duration_ms, json_t *result, const char *error_code)
{
        traj_op o = op_from_string(op);
        bool name_ok = tool_or_name ? text_ok(tool_or_name, strlen(tool_or_name)) : o == TRAJ_OP_RESET;
        if (o == _TRAJ_OP_INVALID || step == 0 || step > (uint64_t)LLONG_MAX || !name_ok ||
            (o == TRAJ_OP_CALL && params && !json_is_object(params)) || !isfinite(duration_ms) || duration_ms < 0 ||
            (error_code && !error_code_ok(error_code))) {
                errno = EINVAL;
                return NULL;
        }
        bool digested = !error_code && result;
        char digest[65];
        if (digested) {
                int r = nsbox_traj_digest(result, digest);
                if (r < 0) {
                        errno = -r;
                        return NULL;
                }
        }
        /* the arguments are valid from here on: a failure is a lack of memory */
        json_t *l = json_object();
        bool ok = l && put(l, "step", json_integer((json_int_t)step)) && put(l, "op", json_string(op_names[o]));
        if (ok && o == TRAJ_OP_CALL)
                ok = put(l, "tool", json_string(tool_or_name)) &&
                     put(l, "params", params ? copy_containers(params, false) : json_object());
        else if (ok)
                ok = put(l, "name", tool_or_name ? json_string(tool_or_name) : json_null());
        ok = ok && put(l, "duration_ms", json_real(duration_ms)) &&
             put(l, "error", error_code ? json_string(error_code) : json_null()) &&
             put(l, "result_sha256", digested ? json_string(digest) : json_null()) &&
             put(l, "summary", digested ? nsbox_traj_summary(result) : json_object());
        if (!ok) {
                json_decref(l);
                errno = ENOMEM;
                return NULL;
        }
        return l;
}

int nsbox_traj_write(int fd, json_t *line)
{
        if (!json_is_object(line))
                return -(errno = EINVAL);
        size_t len = 0;
        _cleanup_free_ char *text = nsbox_json_dumps(line, &len);
        if (!text)
                return -(errno = ENOMEM);
        if (len > NSBOX_TRAJ_MAX_LINE)
                return -(errno = E2BIG); /* the loader would refuse it */
        char *nt = realloc(text, len + 1);
        if (!nt)
                return -(errno = ENOMEM);
        text = nt;
        text[len++] = '\n';
        ssize_t k;
        int r;
        do
                k = write(fd, text, len);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        /* A short write (disk full, a signal): finishing the line is the best left to do, a
         * truncated one would make the whole file unreadable. */
        if ((size_t)k < len && (r = write_full(fd, text + k, len - (size_t)k)) < 0)
                return -(errno = -r);
        return 0;
}

void nsbox_traj_release(nsbox_trajectory *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_steps; i++) {
                nsbox_traj_step *s = &t->steps[i];
                free(s->tool);
                free(s->name);
                free(s->error);
                json_decref(s->params);
                json_decref(s->summary);
        }
        free(t->steps);
        free(t->sandbox);
        json_decref(t->create);
        *t = (nsbox_trajectory){ 0 };
}

/* ---- loading ---- */

/* Lines of a file, one at a time: at most CHUNK_SIZE bytes read ahead plus the current line, which
 * is bounded by the limit of `line`. */
typedef struct line_reader {
        int fd;
        char *chunk;
        size_t start, end; /* chunk[start, end) is read and not yet consumed */
        bool eof;
        uint64_t left;     /* bytes still to read: a file growing while it is read ends here */
        strbuf line;       /* the current line without its '\n' */
} line_reader;

/* 1: a line is in r->line; 0: end of file; -E2BIG: the line is longer than the limit; -errno. */
static int next_line(line_reader *r)
{
        r->line.len = 0;
        if (r->line.buf)
                r->line.buf[0] = '\0';
        for (;;) {
                if (r->start == r->end) {
                        if (r->eof) /* a last line without '\n' still counts */
                                return r->line.len > 0 ? 1 : 0;
                        size_t want = r->left < CHUNK_SIZE ? (size_t)r->left : CHUNK_SIZE;
                        ssize_t k = want ? read(r->fd, r->chunk, want) : 0;
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                return -errno;
                        r->eof = k == 0;
                        r->left -= (uint64_t)k;
                        r->start = 0;
                        r->end = (size_t)k;
                        continue;
                }
                char *from = r->chunk + r->start;
                char *nl = memchr(from, '\n', r->end - r->start);
                size_t n = nl ? (size_t)(nl - from) : r->end - r->start;
                int k = sb_append(&r->line, from, n);
                if (k < 0)
                        return k;
                r->start += n + (nl ? 1 : 0);
                if (nl)
                        return 1;
        }
}

static void cleanup_line_readerp(line_reader *r)
{
        sb_release(&r->line);
}

typedef struct loader {
        const char *name;
        size_t lineno;
        nsbox_error *err;
} loader;

static int line_err(loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int line_err(loader *l, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *what = NULL;
        if (vasprintf(&what, fmt, ap) < 0)
                what = NULL;
        va_end(ap);
        return nsbox_err(l->err, 0, "trajectory '%s' line %zu: %s", l->name, l->lineno, what ? what : "out of memory");
}

static int check_keys(loader *l, json_t *o, const char *const *a, size_t na, const char *const *b, size_t nb)
{
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
                if (!in_list(key, a, na) && !in_list(key, b, nb))
                        return line_err(l, "unknown key '%.64s'", key);
        }
        return 0;
}

/* A copy of the string at key: a name (non-empty, no control characters), or NULL when the value
 * is null and null is allowed. */
static int get_text(loader *l, json_t *o, const char *key, bool nullable, char **ret)
{
        json_t *v = json_object_get(o, key);
        if (!v)
                return line_err(l, "'%s' is missing", key);
        if (nullable && json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v) || !text_ok(json_string_value(v), json_string_length(v)))
                return line_err(l, "'%s' must be a non-empty string without control characters%s", key,
                                nullable ? " or null" : "");
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

static int get_object(loader *l, json_t *o, const char *key, json_t **ret)
{
        json_t *v = json_object_get(o, key);
        if (!v)
                return line_err(l, "'%s' is missing", key);
        if (!json_is_object(v))
                return line_err(l, "'%s' must be an object", key);
        *ret = json_incref(v);
        return 0;
}

static int parse_header(loader *l, json_t *j, nsbox_trajectory *t)
{
        json_t *v = json_object_get(j, "nsbox_trajectory");
        if (!v)
                return line_err(l, "the header must come first ('nsbox_trajectory' is missing)");
        if (!json_is_integer(v))
                return line_err(l, "'nsbox_trajectory' must be an integer");
        if (json_integer_value(v) != NSBOX_TRAJ_VERSION)
                return nsbox_err(l->err, 0,
                                 "trajectory '%s': version %" JSON_INTEGER_FORMAT " is not supported (this nsbox reads %d)",
                                 l->name, json_integer_value(v), NSBOX_TRAJ_VERSION);
        int r = check_keys(l, j, header_keys, ARRAY_SIZE(header_keys), NULL, 0);
        if (r < 0)
                return r;
        if ((r = get_text(l, j, "sandbox", false, &t->sandbox)) < 0)
                return r;
        v = json_object_get(j, "created");
        if (!v)
                return line_err(l, "'created' is missing");
        if (!json_is_integer(v) || json_integer_value(v) < 0 || (time_t)json_integer_value(v) != json_integer_value(v))
                return line_err(l, "'created' must be a time in seconds since 1970");
        t->created = (time_t)json_integer_value(v);
        return get_object(l, j, "create", &t->create);
}

static int parse_step(loader *l, json_t *j, nsbox_traj_step *s)
{
        if (json_object_get(j, "nsbox_trajectory"))
                return line_err(l, "a header is only allowed on line 1");
        json_t *v = json_object_get(j, "step");
        if (!json_is_integer(v) || json_integer_value(v) < 1)
                return line_err(l, "'step' must be a positive integer");
        s->step = (uint64_t)json_integer_value(v);
        v = json_object_get(j, "op");
        traj_op o = op_from_string(json_string_value(v));
        if (o == _TRAJ_OP_INVALID)
                return line_err(l, "'op' must be \"call\", \"snapshot\" or \"reset\"");
        snprintf(s->op, sizeof(s->op), "%s", op_names[o]);
        int r;
        if (o == TRAJ_OP_CALL)
                r = check_keys(l, j, outcome_keys, ARRAY_SIZE(outcome_keys), call_keys, ARRAY_SIZE(call_keys));
        else
                r = check_keys(l, j, outcome_keys, ARRAY_SIZE(outcome_keys), named_keys, ARRAY_SIZE(named_keys));
        if (r < 0)
                return r;
        if (o == TRAJ_OP_CALL) {
                if ((r = get_text(l, j, "tool", false, &s->tool)) < 0 || (r = get_object(l, j, "params", &s->params)) < 0)
                        return r;
        } else if ((r = get_text(l, j, "name", o == TRAJ_OP_RESET, &s->name)) < 0) {
                return r;
        }

        v = json_object_get(j, "duration_ms");
        if (!v)
                return line_err(l, "'duration_ms' is missing");
        if (!json_is_number(v) || json_number_value(v) < 0)
                return line_err(l, "'duration_ms' must be a number >= 0");
        s->duration_ms = json_number_value(v);

        v = json_object_get(j, "error");
        if (!v)
                return line_err(l, "'error' is missing");
        if (!json_is_null(v) && !error_code_ok(json_string_value(v)))
                return line_err(l, "'error' must be an error code (letters, digits, '_', '-', '.') or null");
        if (!json_is_null(v) && !(s->error = strdup(json_string_value(v))))
                return -ENOMEM;

        v = json_object_get(j, "result_sha256");
        if (!v)
                return line_err(l, "'result_sha256' is missing");
        if (!json_is_null(v) && !(json_is_string(v) && digest_ok(json_string_value(v), json_string_length(v))))
                return line_err(l, "'result_sha256' must be 64 lowercase hex digits or null");
        if (s->error && !json_is_null(v))
                return line_err(l, "'result_sha256' must be null when 'error' is set");
        if (json_is_string(v)) {
                memcpy(s->digest, json_string_value(v), 65);
                s->has_digest = true;
        }
        return get_object(l, j, "summary", &s->summary);
}

typedef struct step_key {
        uint64_t step;
        size_t lineno;
        size_t index;
} step_key;

static int compare_keys(const void *a, const void *b)
{
        const step_key *x = a, *y = b;
        if (x->step != y->step)
                return x->step < y->step ? -1 : 1;
        return x->lineno < y->lineno ? -1 : x->lineno > y->lineno;
}

/* Order t's steps by number, refusing a number seen twice. */
static int sort_steps(loader *l, nsbox_trajectory *t, const size_t *linenos)
{
        if (t->n_steps == 0)
                return 0;
        _cleanup_free_ step_key *keys = calloc(t->n_steps, sizeof(*keys));
        _cleanup_free_ nsbox_traj_step *sorted = calloc(t->n_steps, sizeof(*sorted));
        if (!keys || !sorted)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_steps; i++)
                keys[i] = (step_key){ t->steps[i].step, linenos[i], i };
        qsort(keys, t->n_steps, sizeof(*keys), compare_keys);
        for (size_t i = 1; i < t->n_steps; i++)
                if (keys[i].step == keys[i - 1].step) {
                        l->lineno = keys[i].lineno;
                        return line_err(l, "step %" PRIu64 " is recorded twice (also on line %zu)", keys[i].step,
                                        keys[i - 1].lineno);
                }
        for (size_t i = 0; i < t->n_steps; i++)
                sorted[i] = t->steps[keys[i].index];
        free(t->steps);
        t->steps = steal_pointer(&sorted);
        return 0;
}

static void cleanup_trajp(nsbox_trajectory *t)
{
        nsbox_traj_release(t);
}

static void cleanup_jsonp(json_t **j)
{
        json_decref(*j);
}

static int load_fd(int fd, const char *name, size_t max_line, uint64_t max_bytes, nsbox_trajectory *ret, nsbox_error *err)
{
        loader l = { .name = name, .err = err };
        _cleanup_(cleanup_trajp) nsbox_trajectory t = { 0 };
        _cleanup_free_ size_t *linenos = NULL; /* the line of each step, for messages */
        size_t alloc = 0, first_empty = 0;
        bool have_header = false;
        _cleanup_free_ char *chunk = malloc(CHUNK_SIZE);
        _cleanup_(cleanup_line_readerp) line_reader lr = { .fd = fd, .chunk = chunk, .left = max_bytes };
        sb_init(&lr.line, max_line);
        if (!chunk)
                return nsbox_err(err, ENOMEM, "read trajectory '%s'", name);

        for (;;) {
                int r = next_line(&lr);
                if (r == 0)
                        break;
                l.lineno++;
                if (r == -E2BIG)
                        return line_err(&l, "longer than %zu bytes", max_line);
                if (r < 0)
                        return nsbox_err(err, -r, "read trajectory '%s'", name);
                if (lr.line.len == 0) {
                        if (!first_empty)
                                first_empty = l.lineno;
                        continue;
                }
                if (first_empty) {
                        l.lineno = first_empty;
                        return line_err(&l, "empty lines are only allowed at the end of the file");
                }

                json_error_t je;
                _cleanup_(cleanup_jsonp) json_t *j = nsbox_json_loadb(lr.line.buf, lr.line.len, &je);
                if (!j)
                        return line_err(&l, "malformed JSON at column %d: %s", je.column, je.text);
                if (!json_is_object(j))
                        return line_err(&l, "must be a JSON object");
                if (!have_header) {
                        if ((r = parse_header(&l, j, &t)) < 0)
                                return r == -ENOMEM ? nsbox_err(err, ENOMEM, "read trajectory '%s'", name) : r;
                        have_header = true;
                        continue;
                }

                if (t.n_steps == NSBOX_TRAJ_MAX_STEPS)
                        return line_err(&l, "more than %d steps", NSBOX_TRAJ_MAX_STEPS);
                if (t.n_steps == alloc) {
                        size_t n = alloc ? 2 * alloc : 64;
                        nsbox_traj_step *ns = realloc(t.steps, n * sizeof(*ns));
                        if (!ns)
                                return nsbox_err(err, ENOMEM, "read trajectory '%s'", name);
                        t.steps = ns;
                        size_t *nl = realloc(linenos, n * sizeof(*nl));
                        if (!nl)
                                return nsbox_err(err, ENOMEM, "read trajectory '%s'", name);
                        linenos = nl;
                        alloc = n;
                }
                /* counted before it is parsed, so that release frees what a failed parse filled */
                nsbox_traj_step *s = &t.steps[t.n_steps];
                *s = (nsbox_traj_step){ 0 };
                linenos[t.n_steps++] = l.lineno;
                if ((r = parse_step(&l, j, s)) < 0)
                        return r == -ENOMEM ? nsbox_err(err, ENOMEM, "read trajectory '%s'", name) : r;
        }
        if (!have_header)
                return nsbox_err(err, 0, "trajectory '%s' is empty", name);
        int r = sort_steps(&l, &t, linenos);
        if (r < 0)
                return r == -ENOMEM ? nsbox_err(err, ENOMEM, "read trajectory '%s'", name) : r;
        *ret = t;
        t = (nsbox_trajectory){ 0 };
        return 0;
}

int nsbox_traj_load_fd(int fd, const char *name, size_t max_line, nsbox_trajectory *ret, nsbox_error *err)
{
        return load_fd(fd, name, max_line, UINT64_MAX, ret, err);
}

int nsbox_traj_load(const char *path, nsbox_trajectory *ret, nsbox_error *err)
{
        /* O_NONBLOCK: a FIFO named as the trajectory must not hang the replay (refused below) */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return nsbox_err(err, errno, "open trajectory '%s'", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "stat trajectory '%s'", path);
        if (!S_ISREG(st.st_mode))
                return nsbox_err(err, 0, "trajectory '%s': not a regular file", path);
        if ((uint64_t)st.st_size > NSBOX_TRAJ_MAX_BYTES)
                return nsbox_err(err, 0, "trajectory '%s': %llu bytes, more than the %llu a trajectory may have", path,
                                 (unsigned long long)st.st_size, (unsigned long long)NSBOX_TRAJ_MAX_BYTES);
        /* what is appended while it is read is not part of it */
        return load_fd(fd, path, NSBOX_TRAJ_MAX_LINE, (uint64_t)st.st_size, ret, err);
}

/* ---- the create parameters of a replay ---- */

/* What a trajectory may choose alone: limits and shapes inside the sandbox, and the caller's own
 * snapshot (a name in nsboxd, no host path).  Every other key names a host path or resource. */
static const char *const replay_inside_keys[] = {
        "workdir", "hostname", "disk", "memory", "pids", "cpus", "timeout", "idle_timeout", "on_expiry", "wait",
        "env", "tmpfs", "labels", "from", "commit", "close_with_client",
        "progress",
};

/* Absent, null, empty, or a value that reaches nothing of the host: "default" policy, no network. */
static bool replay_value_inside(const char *key, json_t *v)
{
        if (!v || json_is_null(v) || ((json_is_array(v) || json_is_object(v)) && json_object_size(v) + json_array_size(v) == 0))
                return true;
        const char *s = json_string_value(v);
        return s && ((!strcmp(key, "policy") && !strcmp(s, "default")) || (!strcmp(key, "net") && !strcmp(s, "none")));
}

/* "--key value" for a message: the value cut short, control characters escaped (it is read from a
 * file and goes to a terminal). */
static void append_refused(strbuf *sb, const char *key, json_t *v)
{
        if (sb->len)
                sb_append(sb, ", ", 2);
        sb_append(sb, "--", 2);
        for (const char *k = key; *k && k - key < 64; k++)
                sb_appendf(sb, "%c", *k == '_' ? '-' : (unsigned char)*k < 0x20 || *k == 0x7f ? '?' : *k);
        _cleanup_free_ char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        const char *t = json_is_string(v) ? json_string_value(v) : text ? text : "?";
        sb_append(sb, " ", 1);
        size_t n = strlen(t);
        for (size_t i = 0; i < n && i < 256; i++) {
                unsigned char c = (unsigned char)t[i];
                if (c < 0x20 || c == 0x7f)
                        sb_appendf(sb, "\\x%02x", c);
                else
                        sb_append(sb, &t[i], 1);
        }
        if (n > 256)
                sb_append(sb, "...", 3);
}

static bool array_has(json_t *a, json_t *v)
{
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e)
                if (json_equal(e, v))
                        return true;
        return false;
}

int nsbox_traj_replay_params(json_t *recorded, json_t *given, json_t **ret, strbuf *refused)
{
        json_t *p = json_object();
        if (!p)
                return -ENOMEM;
        /* a snapshot given again has its own workspace: the recorded repository is not needed */
        bool from_given = !replay_value_inside("from", json_object_get(given, "from"));
        const char *key;
        json_t *v;
        json_object_foreach(recorded, key, v) {
                if (from_given && (!strcmp(key, "repo") || !strcmp(key, "commit") || !strcmp(key, "from")))
                        continue;
                bool inside = false;
                for (size_t i = 0; i < ARRAY_SIZE(replay_inside_keys) && !inside; i++)
                        inside = !strcmp(key, replay_inside_keys[i]);
                if (inside) {
                        if (json_object_set(p, key, v) < 0)
                                goto oom;
                        continue;
                }
                if (replay_value_inside(key, v))
                        continue;
                /* host-facing: used only as given again on the command line */
                json_t *g = json_object_get(given, key);
                if (json_is_array(v)) {
                        size_t i;
                        json_t *e;
                        json_array_foreach(v, i, e)
                                if (!json_is_array(g) || !array_has(g, e))
                                        append_refused(refused, key, e);
                } else if (!g || !json_equal(g, v)) {
                        append_refused(refused, key, v);
                }
        }
        if (refused->len) {
                json_decref(p);
                return -EPERM;
        }
        json_object_foreach(given, key, v)
                if (!replay_value_inside("", v) && json_object_set(p, key, v) < 0)
                        goto oom;
        *ret = p;
        return 0;
oom:
        json_decref(p);
        return -ENOMEM;
}

/* ---- comparing ---- */

/* A value for a message: compact JSON, cut short. */
static void append_value(strbuf *sb, json_t *v)
{
        _cleanup_free_ char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        if (!text) {
                sb_appendf(sb, "none");
                return;
        }
        size_t n = strlen(text);
        if (n <= 48) {
                sb_appendf(sb, "%s", text);
                return;
        }
        n = 44;
        while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
                n--; /* not inside a UTF-8 sequence */
        sb_appendf(sb, "%.*s..", (int)n, text);
}

static void reset_why(strbuf *why)
{
        why->len = 0;
        if (why->buf)
                why->buf[0] = '\0';
}

static void set_why(strbuf *why, const char *key, json_t *got, json_t *want)
{
        if (!why)
                return;
        reset_why(why);
        if (!got)
                sb_appendf(why, "no %s", key);
        else {
                sb_appendf(why, "%s ", key);
                append_value(why, got);
        }
        sb_appendf(why, ", expected ");
        append_value(why, want);
}

/* 1 when field key is the same in the recorded summary and the replayed result, else 0 with why. */
static int compare_field(const nsbox_traj_step *want, json_t *result, const char *key, strbuf *why)
{
        json_t *w = json_object_get(want->summary, key), *g = json_object_get(result, key);
        if ((!w && !g) || (w && g && json_equal(w, g)))
                return 1;
        set_why(why, key, g, w);
        return 0;
}

int nsbox_traj_compare(const nsbox_traj_step *want, json_t *result, const char *error_code, strbuf *why)
{
        if (error_code || want->error) {
                if (error_code && want->error && !strcmp(error_code, want->error))
                        return 1; /* failed the same way: the result is not compared */
                if (why) {
                        reset_why(why);
                        sb_appendf(why, "error %s, expected %s", error_code ? error_code : "none",
                                   want->error ? want->error : "none");
                }
                return 0;
        }

        if (!want->has_digest)
                return 1; /* no result was recorded (a snapshot, a reset): nothing more to compare */
        if (!result) {
                if (why) {
                        reset_why(why);
                        sb_appendf(why, "no result, expected sha256 %.8s..", want->digest);
                }
                return 0;
        }
        /* the summary first: "exit_code 1, expected 0" says more than two digests.  Only the keys
         * nsbox puts there: others in a file are not nsbox's, and their names are not checked. */
        for (size_t i = 0; i < ARRAY_SIZE(summary_keys); i++)
                if (!compare_field(want, result, summary_keys[i], why))
                        return 0;

        char got[65];
        int r = nsbox_traj_digest(result, got);
        if (r < 0)
                return r;
        if (!strcmp(got, want->digest))
                return 1;
        if (why) {
                reset_why(why);
                sb_appendf(why, "result differs (sha256 %.8s.., expected %.8s..)", got, want->digest);
        }
        return 0;
}
