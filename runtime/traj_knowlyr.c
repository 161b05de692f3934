/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* knowlyr AgentSandbox's trajectories, {"steps": [{tool_name, params, expected_output}]}: one
 * JSON document, told apart from nsbox's JSON lines by its shape, and judged as knowlyr judges a
 * replay: a step whose command failed is not a success, whatever it printed. */
#include "trajectory.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/registry.h"

static const char *const doc_keys[] = { "steps", "metadata" };
static const char *const step_keys[] = { "tool_name", "params", "expected_output" };

static bool known(const char *key, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(key, list[i]))
                        return true;
        return false;
}

void nsbox_knowlyr_release(nsbox_knowlyr_traj *t)
{
        for (size_t i = 0; i < t->n_steps; i++) {
                free(t->steps[i].tool);
                json_decref(t->steps[i].params);
                free(t->steps[i].expected);
        }
        free(t->steps);
        *t = (nsbox_knowlyr_traj){ 0 };
}

static int step_err(nsbox_error *err, const char *name, size_t i, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int step_err(nsbox_error *err, const char *name, size_t i, const char *fmt, ...)
{
        char what[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return nsbox_err(err, 0, "trajectory '%s' step %zu: %s", name, i + 1, what);
}

static int parse_step(json_t *j, const char *name, size_t i, nsbox_knowlyr_step *s, nsbox_error *err)
{
        if (!json_is_object(j))
                return step_err(err, name, i, "must be an object {tool_name, params, expected_output}");
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v) {
                if (!known(key, step_keys, ARRAY_SIZE(step_keys)))
                        return step_err(err, name, i, "unknown key '%.64s'", key);
        }
        v = json_object_get(j, "tool_name");
        if (!json_is_string(v))
                return step_err(err, name, i, "'tool_name' must be a string");
        if (!tool_canonical_name(json_string_value(v)))
                return step_err(err, name, i, "unknown tool '%.64s' (see nsbox tools)", json_string_value(v));
        json_t *params = json_object_get(j, "params");
        if (!json_is_object(params))
                return step_err(err, name, i, "'params' must be an object");
        json_t *want = json_object_get(j, "expected_output");
        if (want && !json_is_null(want) && !json_is_string(want))
                return step_err(err, name, i, "'expected_output' must be a string or null");
        s->tool = strdup(json_string_value(v));
        s->params = json_incref(params);
        if (json_is_string(want)) {
                s->expected_len = json_string_length(want);
                s->expected = malloc(s->expected_len + 1);
                if (s->expected)
                        memcpy(s->expected, json_string_value(want), s->expected_len + 1);
        }
        return !s->tool || (want && json_is_string(want) && !s->expected) ? -ENOMEM : 0;
}

static int parse_doc(json_t *doc, const char *name, nsbox_knowlyr_traj *ret, nsbox_error *err)
{
        const char *key;
        json_t *v;
        json_object_foreach(doc, key, v) {
                if (!known(key, doc_keys, ARRAY_SIZE(doc_keys)))
                        return nsbox_err(err, 0, "trajectory '%s': unknown key '%.64s' (a knowlyr trajectory has steps and metadata)", name, key);
        }
        json_t *steps = json_object_get(doc, "steps");
        if (!json_is_array(steps) || json_array_size(steps) == 0)
                return nsbox_err(err, 0, "trajectory '%s': 'steps' must be a non-empty array", name);
        if (json_array_size(steps) > NSBOX_KNOWLYR_MAX_STEPS)
                return nsbox_err(err, 0, "trajectory '%s': %zu steps, more than %d", name, json_array_size(steps), NSBOX_KNOWLYR_MAX_STEPS);
        nsbox_knowlyr_traj t = { .steps = calloc(json_array_size(steps), sizeof(nsbox_knowlyr_step)) };
        if (!t.steps)
                return nsbox_err(err, ENOMEM, "read trajectory '%s'", name);
        size_t i;
        json_array_foreach(steps, i, v) {
                t.n_steps = i + 1; /* counted first: release frees what a failed parse filled */
                int r = parse_step(v, name, i, &t.steps[i], err);
                if (r < 0) {
                        nsbox_knowlyr_release(&t);
                        return r == -ENOMEM ? nsbox_err(err, ENOMEM, "read trajectory '%s'", name) : r;
                }
        }
        *ret = t;
        return 1;
}

/* What a whole-file parse says about the shape: 1 a knowlyr document (loaded), 0 not one. */
static int from_text(const char *buf, size_t len, const char *name, nsbox_knowlyr_traj *ret, nsbox_error *err)
{
        json_error_t je;
        json_auto_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
        if (doc)
                return json_is_object(doc) && json_object_get(doc, "steps") && !json_object_get(doc, "nsbox_trajectory")
                               ? parse_doc(doc, name, ret, err)
                               : 0;
        /* not one document: nsbox's JSON lines, or a broken knowlyr document, which is told by
         * its first value (an object with steps) or by an error past the first line */
        json_auto_t *first = json_loadb(buf, len, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &je);
        if (first && json_is_object(first) && json_object_get(first, "steps") && !json_object_get(first, "nsbox_trajectory"))
                return nsbox_err(err, 0, "trajectory '%s': text after the JSON document (line %d)", name, je.line);
        if (!first && je.line > 1)
                return nsbox_err(err, 0, "trajectory '%s': malformed JSON at line %d column %d: %s", name, je.line, je.column, je.text);
        return 0;
}

int nsbox_knowlyr_load(const char *path, nsbox_knowlyr_traj *ret, nsbox_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return 0; /* nsbox_traj_load says what is wrong with it */
        /* nsbox's header comes first, alone on its line: no need to read on */
        char head[4096];
        ssize_t n = pread(fd, head, sizeof(head) - 1, 0);
        if (n <= 0)
                return 0;
        head[n] = '\0';
        char *nl = strchr(head, '\n');
        if (nl)
                *nl = '\0';
        if (strstr(head, "\"nsbox_trajectory\""))
                return 0;
        if ((uint64_t)st.st_size > NSBOX_KNOWLYR_MAX_BYTES)
                return nsbox_err(err, 0, "trajectory '%s': %llu bytes, more than the %llu a JSON document trajectory may have", path,
                                 (unsigned long long)st.st_size, (unsigned long long)NSBOX_KNOWLYR_MAX_BYTES);
        size_t size = (size_t)st.st_size, got = 0;
        _cleanup_free_ char *buf = malloc(size ? size : 1);
        if (!buf)
                return nsbox_err(err, ENOMEM, "read trajectory '%s'", path);
        while (got < size) {
                ssize_t k = pread(fd, buf + got, size - got, (off_t)got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return nsbox_err(err, errno, "read trajectory '%s'", path);
                if (k == 0)
                        break;
                got += (size_t)k;
        }
        return from_text(buf, got, path, ret, err);
}

int nsbox_knowlyr_load_text(const char *text, size_t len, const char *name, nsbox_knowlyr_traj *ret, nsbox_error *err)
{
        if (len > NSBOX_KNOWLYR_MAX_BYTES)
                return nsbox_err(err, 0, "trajectory '%s': more than %llu bytes", name, (unsigned long long)NSBOX_KNOWLYR_MAX_BYTES);
        return from_text(text, len, name, ret, err);
}

/* ---- judging a replayed step ---- */

char *nsbox_knowlyr_output(const char *tool, json_t *result, size_t *ret_len)
{
        const char *canon = tool_canonical_name(tool);
        const char *key = !canon ? NULL : !strcmp(canon, "exec") ? "stdout" : !strcmp(canon, "read_file") ? "content" : NULL;
        char *out = NULL;
        if (key) {
                json_t *v = json_object_get(result, key);
                size_t n = json_is_string(v) ? json_string_length(v) : 0;
                out = malloc(n + 1);
                if (out) {
                        memcpy(out, n ? json_string_value(v) : "", n);
                        out[n] = '\0';
                        *ret_len = n;
                }
                return out;
        }
        if (canon && !strcmp(canon, "grep")) { /* as grep -n prints: path:line:text */
                strbuf sb;
                sb_init(&sb, 0);
                size_t i;
                json_t *m;
                int r = sb_append(&sb, "", 0);
                json_array_foreach(json_object_get(result, "matches"), i, m) {
                        if (r >= 0)
                                r = sb_appendf(&sb, "%s:%lld:%s\n", json_string_value(json_object_get(m, "path")) ?: "",
                                               (long long)json_integer_value(json_object_get(m, "line")),
                                               json_string_value(json_object_get(m, "text")) ?: "");
                }
                if (r < 0 || !sb.buf) {
                        sb_release(&sb);
                        return NULL;
                }
                *ret_len = sb.len;
                return sb.buf;
        }
        out = result ? json_dumps(result, JSON_COMPACT | JSON_SORT_KEYS) : strdup("");
        if (out)
                *ret_len = strlen(out);
        return out;
}

bool nsbox_knowlyr_success(const char *tool, json_t *result, const char *error_code, strbuf *why)
{
        const char *canon = tool_canonical_name(tool);
        if (error_code) {
                sb_appendf(why, "failed: error %s", error_code);
                return false;
        }
        if (!canon || strcmp(canon, "exec"))
                return true;
        json_t *code = json_object_get(result, "exit_code"), *sig = json_object_get(result, "signal");
        if (json_is_true(json_object_get(result, "timed_out"))) {
                sb_appendf(why, "failed: timed out");
                return false;
        }
        if (json_is_integer(sig) && json_integer_value(sig) != 0) {
                sb_appendf(why, "failed: killed by signal %lld", (long long)json_integer_value(sig));
                return false;
        }
        if (!json_is_integer(code) || json_integer_value(code) != 0) {
                sb_appendf(why, "failed: exit_code %lld", json_is_integer(code) ? (long long)json_integer_value(code) : -1LL);
                return false;
        }
        return true;
}

/* A string as a short JSON-ish quote for a one-line message. */
static void quote(strbuf *sb, const char *s, size_t n)
{
        sb_append(sb, "\"", 1);
        for (size_t i = 0; i < n && i < 60; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '\n')
                        sb_append(sb, "\\n", 2);
                else if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
                        sb_appendf(sb, "\\x%02x", c);
                else
                        sb_append(sb, s + i, 1);
        }
        sb_append(sb, n > 60 ? "\"..." : "\"", n > 60 ? 4 : 1);
}

int nsbox_knowlyr_judge(const nsbox_knowlyr_step *st, json_t *result, const char *error_code, bool *ret_success, strbuf *why)
{
        *ret_success = nsbox_knowlyr_success(st->tool, result, error_code, why);
        if (!*ret_success)
                return 0;
        if (!st->expected)
                return 1; /* nothing to compare: success decides */
        size_t n = 0;
        _cleanup_free_ char *out = nsbox_knowlyr_output(st->tool, result, &n);
        if (!out)
                return -ENOMEM;
        if (n == st->expected_len && !memcmp(out, st->expected, n))
                return 1;
        sb_appendf(why, "output ");
        quote(why, out, n);
        sb_appendf(why, ", expected ");
        quote(why, st->expected, st->expected_len);
        return 0;
}
