/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The search tools: glob (names matching a pattern) and grep (lines matching a regular
 * expression or a fixed string).  Both walk the tree from an fd resolved inside the root and go
 * down with O_NOFOLLOW: symlinks are reported or skipped, never entered. */
#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_MAX_DEPTH 256u         /* deeper trees are not searched: each level holds an fd */
#define GREP_DEFAULT_COUNT 1000u
#define GREP_MAX_CONTEXT 20u
#define GREP_BINARY_PROBE 8192u     /* a NUL in this many first bytes: a binary file, skipped */
#define GREP_LINE_MAX (64u << 10)   /* a longer line is matched on its first GREP_LINE_MAX bytes */
#define GREP_REGEX_MAX_PARTS 65536u /* what a pattern's repetitions may expand to in regcomp */

static int oom(tool_error *e)
{
        return tool_fail(e, TOOL_INTERNAL, "out of memory");
}


static bool is_magic(const char *component)
{
        return strpbrk(component, "*?[\\") != NULL;
}

/* Split an absolute path into its components ("/a/b" -> "a", "b"); NULL when out of memory. */
static char **split_path(const char *abs)
{
        char **v = calloc(1, sizeof(char *));
        for (const char *p = abs; v && *p;) {
                p += strspn(p, "/");
                size_t n = strcspn(p, "/");
                if (n && strv_push(&v, strndup(p, n)) < 0) {
                        strv_free(v);
                        return NULL;
                }
                p += n;
        }
        return v;
}

/* ---- glob ---- */

typedef struct globber {
        char **comps; /* the pattern's components after the literal base */
        size_t n;
        char **matches;
        size_t n_matches;
        bool truncated;
} globber;

static int glob_add(globber *g, const char *dir, const char *name)
{
        if (g->n_matches >= TOOL_MAX_ENTRIES) {
                g->truncated = true;
                return 0;
        }
        char *path = name ? tool_path_join(dir, name) : strdup(dir);
        int r = strv_push(&g->matches, path);
        if (r == 0)
                g->n_matches++;
        return r;
}

/* Match comps[i..] below directory dirfd (at dir). */
static int glob_walk(globber *g, int dirfd, const char *dir, size_t i, unsigned depth)
{
        if (g->truncated)
                return 0;
        if (i == g->n)
                return glob_add(g, dir, NULL);
        if (depth >= WALK_MAX_DEPTH)
                return 0;
        const char *comp = g->comps[i];
        bool last = i + 1 == g->n, globstar = !strcmp(comp, "**");

        /* A literal component needs no listing. */
        if (!globstar && !is_magic(comp)) {
                struct stat st;
                if (fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return 0;
                if (last)
                        return glob_add(g, dir, comp);
                if (!S_ISDIR(st.st_mode))
                        return 0;
                _cleanup_close_ int sub = openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_free_ char *path = tool_path_join(dir, comp);
                if (!path)
                        return -ENOMEM;
                return sub < 0 || tool_is_agent_proc(sub) ? 0 : glob_walk(g, sub, path, i + 1, depth + 1);
        }

        /* "**" matches no directory at all, too. */
        if (globstar) {
                int r = glob_walk(g, dirfd, dir, i + 1, depth);
                if (r < 0)
                        return r;
        }
        _cleanup_strv_ char **names = NULL;
        if (tool_read_dir(dirfd, &names) < 0)
                return 0; /* unreadable: nothing matches in it */
        for (char **np = names; *np && !g->truncated; np++) {
                if (globstar ? !strcmp(*np, ".git") : fnmatch(comp, *np, 0) != 0)
                        continue;
                if (last && !globstar) {
                        if (glob_add(g, dir, *np) < 0)
                                return -ENOMEM;
                        continue;
                }
                struct stat st;
                if (fstatat(dirfd, *np, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                _cleanup_close_ int sub = openat(dirfd, *np, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_free_ char *path = tool_path_join(dir, *np);
                if (!path)
                        return -ENOMEM;
                /* "**" stays on its component to go down any number of directories. */
                if (sub >= 0 && !tool_is_agent_proc(sub) && glob_walk(g, sub, path, globstar ? i : i + 1, depth + 1) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int compare_strings(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int tool_glob(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "glob";
        const char *pattern = NULL;
        _cleanup_free_ char *abs = NULL;
        if (tool_param_string(in, tool, "pattern", true, &pattern, e) < 0 ||
            tool_param_path(ctx, in, tool, "path", ".", &abs, e) < 0)
                return -1;
        if (!*pattern)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'pattern' must not be empty", tool);

        /* The directory searched must exist, even when the pattern matches nothing in it. */
        if (pattern[0] != '/') {
                _cleanup_close_ int fd = -1;
                if (tool_open(ctx, abs, O_PATH | O_DIRECTORY, 0, &fd, e) < 0)
                        return tool_fail_wrap(e, tool);
        }
        /* One absolute pattern: path + pattern, "." and ".." resolved lexically like any path. */
        _cleanup_free_ char *joined = pattern[0] == '/' ? strdup(pattern) : tool_path_join(abs, pattern);
        _cleanup_free_ char *full = NULL;
        if (!joined)
                return oom(e);
        if (tool_path_normalize(ctx, joined, &full, e) < 0)
                return tool_fail_wrap(e, tool);
        _cleanup_strv_ char **comps = split_path(full);
        if (!comps)
                return oom(e);
        size_t n = strv_length(comps);
        /* A final "**" lists everything below, as "**" + "*" (bash's globstar). */
        if (n > 0 && !strcmp(comps[n - 1], "**")) {
                if (strv_push(&comps, strdup("*")) < 0)
                        return oom(e);
                n++;
        }
        /* Consecutive "**" match what one does; several would only multiply the walk. */
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
                if (w > 0 && !strcmp(comps[i], "**") && !strcmp(comps[w - 1], "**"))
                        free(comps[i]);
                else
                        comps[w++] = comps[i];
        }
        comps[n = w] = NULL;

        /* The literal components before the first wildcard are opened inside the root (following
         * symlinks there, like any path); the rest is matched by listing directories. */
        size_t base = 0;
        while (base + 1 < n && !is_magic(comps[base]) && strcmp(comps[base], "**"))
                base++;
        _cleanup_free_ char *base_path = strdup("/");
        for (size_t i = 0; i < base && base_path; i++) {
                char *next = tool_path_join(base_path, comps[i]);
                free(base_path);
                base_path = next;
        }
        if (!base_path)
                return oom(e);

        globber g = { .comps = comps + base, .n = n - base };
        _cleanup_close_ int fd = -1;
        int r = 0;
        if (tool_open(ctx, base_path, O_RDONLY | O_DIRECTORY, 0, &fd, e) == 0)
                r = glob_walk(&g, fd, base_path, 0, 0);
        else if (e->code != TOOL_FILE_NOT_FOUND && e->code != TOOL_NOT_A_DIRECTORY)
                return tool_fail_wrap(e, tool);
        _cleanup_strv_ char **matches = steal_pointer(&g.matches);
        if (r < 0)
                return oom(e);

        json_t *arr = json_array();
        if (matches)
                qsort(matches, g.n_matches, sizeof(char *), compare_strings);
        for (size_t i = 0; arr && i < g.n_matches; i++) {
                /* "**" can reach one name by several routes. */
                if (i > 0 && !strcmp(matches[i], matches[i - 1]))
                        continue;
                if (json_array_append_new(arr, nsbox_json_text(matches[i], strlen(matches[i]), NULL)) < 0) {
                        json_decref(arr);
                        arr = NULL;
                }
        }
        if (!arr)
                return oom(e);
        out->result = json_pack("{s:s, s:o, s:o, s:b}", "pattern", pattern, "path",
                                nsbox_json_text(abs, strlen(abs), NULL), "matches", arr, "truncated", g.truncated);
        return out->result ? 0 : oom(e);
}

/* ---- grep ---- */

typedef struct grepper {
        /* what is searched for */
        bool fixed, ignore_case;
        const char *needle;   /* fixed: the string, lowercased when ignore_case */
        size_t needle_len;
        regex_t re;
        char **filter;        /* 'glob' with a '/': components matched against the relative path */
        const char *name_filter; /* 'glob' without one: matched against the base name */
        uint64_t max_count;
        unsigned context;

        /* what is found */
        json_t *matches;
        uint64_t n_matches;
        uint64_t text_bytes;  /* of line texts in matches: bounded like a file read */
        uint64_t files_searched;
        bool truncated;       /* stop: max_count reached, or too much text */
        char *folded;         /* ignore_case with fixed: the line lowercased */
        char *buf;            /* the line reader's buffer, 2 * GREP_LINE_MAX */
} grepper;

/* Does glob pattern comps[0..n) match the relative path rel ("**" spans directories)? */
static bool match_relative(char *const *comps, size_t n, const char *rel)
{
        if (n == 0)
                return !*rel;
        const char *slash = strchr(rel, '/');
        if (!strcmp(comps[0], "**")) {
                if (n == 1 || match_relative(comps + 1, n - 1, rel))
                        return true;
                return slash && match_relative(comps, n, slash + 1);
        }
        char name[NAME_MAX + 1];
        size_t len = slash ? (size_t)(slash - rel) : strlen(rel);
        if (len >= sizeof(name))
                return false;
        memcpy(name, rel, len);
        name[len] = '\0';
        if (fnmatch(comps[0], name, 0) != 0)
                return false;
        return slash ? match_relative(comps + 1, n - 1, slash + 1) : n == 1;
}

static bool line_matches(grepper *g, const char *line, size_t len)
{
        if (!g->fixed) {
                /* REG_STARTEND: the line is not NUL-terminated and may contain NULs. */
                regmatch_t m = { .rm_so = 0, .rm_eo = (regoff_t)len };
                return regexec(&g->re, line, 1, &m, REG_STARTEND) == 0;
        }
        if (g->ignore_case) {
                for (size_t i = 0; i < len; i++)
                        g->folded[i] = (char)((line[i] >= 'A' && line[i] <= 'Z') ? line[i] + 32 : line[i]);
                line = g->folded;
        }
        return memmem(line, len, g->needle, g->needle_len) != NULL;
}

/* A line as JSON text: cut at TOOL_MAX_LINE_CHARS, bytes that are not UTF-8 replaced. */
static json_t *line_json(const char *line, size_t len)
{
        return nsbox_json_text(line, tool_utf8_cut(line, len, TOOL_MAX_LINE_CHARS), NULL);
}

/* Put a line's text in a match's array, counting it against the reply's size. */
static void add_text(grepper *g, json_t *arr, json_t *text)
{
        if (json_array_append(arr, text) == 0)
                g->text_bytes += json_string_length(text);
}

/* Reads a file line by line through g->buf; a line longer than GREP_LINE_MAX is given as its first
 * GREP_LINE_MAX bytes and the rest skipped. */
typedef struct line_reader {
        int fd;
        char *buf;
        size_t start, end;
        bool eof, skipping;
} line_reader;

/* 1 with the next line (valid until the next call), 0 at the end, or -errno. */
static int next_line(line_reader *lr, const char **ret, size_t *ret_len)
{
        for (;;) {
                char *p = lr->buf + lr->start;
                size_t avail = lr->end - lr->start;
                char *nl = memchr(p, '\n', avail);
                if (lr->skipping) {
                        lr->start = nl ? (size_t)(nl - lr->buf) + 1 : lr->end;
                        lr->skipping = !nl;
                } else if (nl || avail >= GREP_LINE_MAX || (lr->eof && avail)) {
                        size_t len = nl ? (size_t)(nl - p) : avail;
                        if (len >= GREP_LINE_MAX) {
                                len = GREP_LINE_MAX;
                                lr->skipping = !nl || (size_t)(nl - p) > GREP_LINE_MAX;
                        }
                        lr->start += nl && !lr->skipping ? len + 1 : len;
                        *ret = p;
                        *ret_len = len;
                        return 1;
                }
                if (lr->eof)
                        return 0;
                /* Keep the unfinished line and fill the rest of the buffer. */
                memmove(lr->buf, lr->buf + lr->start, lr->end - lr->start);
                lr->end -= lr->start;
                lr->start = 0;
                ssize_t k = read(lr->fd, lr->buf + lr->end, 2 * GREP_LINE_MAX - lr->end);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        lr->eof = true;
                lr->end += (size_t)k;
        }
}

/* A match still collecting the lines after it. */
typedef struct pending {
        json_t *after;
        unsigned left;
} pending;

static int grep_file(grepper *g, int fd, const char *path)
{
        /* Binary files are skipped before they count as searched. */
        ssize_t got = read_full(fd, g->buf, GREP_BINARY_PROBE);
        if (got < 0 || memchr(g->buf, '\0', (size_t)got))
                return 0;
        g->files_searched++;
        line_reader lr = { .fd = fd, .buf = g->buf, .end = (size_t)got, .eof = (size_t)got < GREP_BINARY_PROBE };

        unsigned ctx = g->context;
        json_t *before[GREP_MAX_CONTEXT] = { 0 }; /* ring of the last ctx lines */
        pending after[GREP_MAX_CONTEXT + 1];
        unsigned n_after = 0;
        uint64_t lineno = 0;
        int r = 0;
        const char *line = NULL;
        size_t len = 0;
        while ((r = next_line(&lr, &line, &len)) > 0) {
                lineno++;
                bool stop = g->truncated;
                bool hit = !stop && line_matches(g, line, len);
                if (stop && n_after == 0)
                        break;
                json_t *text = (hit || ctx) ? line_json(line, len) : NULL;
                if ((hit || ctx) && !text) {
                        r = -ENOMEM;
                        break;
                }
                /* This line follows earlier matches. */
                unsigned keep = 0;
                for (unsigned i = 0; i < n_after; i++) {
                        add_text(g, after[i].after, text);
                        if (--after[i].left > 0)
                                after[keep++] = after[i];
                }
                n_after = keep;
                if (hit) {
                        json_t *m = json_pack("{s:o, s:I, s:O}", "path", nsbox_json_text(path, strlen(path), NULL),
                                              "line", (json_int_t)lineno, "text", text);
                        if (m && ctx) {
                                json_t *b = json_array(), *a = json_array();
                                for (unsigned k = ctx; k > 0; k--) {
                                        json_t *t = lineno > k ? before[(lineno - 1 - k) % ctx] : NULL;
                                        if (t)
                                                add_text(g, b, t);
                                }
                                if (json_object_set_new(m, "before", b) < 0 || json_object_set_new(m, "after", a) < 0) {
                                        json_decref(m);
                                        m = NULL;
                                } else {
                                        after[n_after++] = (pending){ a, ctx };
                                }
                        }
                        if (!m || json_array_append_new(g->matches, m) < 0) {
                                json_decref(text);
                                r = -ENOMEM;
                                break;
                        }
                        g->text_bytes += json_string_length(text);
                        if (++g->n_matches >= g->max_count || g->text_bytes > TOOL_MAX_CONTENT)
                                g->truncated = true;
                }
                if (ctx) {
                        json_t **slot = &before[(lineno - 1) % ctx];
                        json_decref(*slot);
                        *slot = text;
                } else {
                        json_decref(text);
                }
        }
        for (unsigned i = 0; i < ctx; i++)
                json_decref(before[i]);
        return r == -ENOMEM ? r : 0; /* a file that fails to read mid-way keeps what it gave */
}

static int grep_dir(grepper *g, int dirfd, const char *dir, const char *rel, unsigned depth)
{
        if (depth >= WALK_MAX_DEPTH)
                return 0;
        _cleanup_strv_ char **names = NULL;
        if (tool_read_dir(dirfd, &names) < 0)
                return 0; /* an unreadable directory is skipped like grep -s */
        for (char **np = names; *np && !g->truncated; np++) {
                struct stat st;
                if (fstatat(dirfd, *np, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                _cleanup_free_ char *path = tool_path_join(dir, *np);
                _cleanup_free_ char *sub_rel = *rel ? tool_path_join(rel, *np) : strdup(*np);
                if (!path || !sub_rel)
                        return -ENOMEM;
                if (S_ISDIR(st.st_mode)) {
                        if (!strcmp(*np, ".git"))
                                continue;
                        _cleanup_close_ int sub = openat(dirfd, *np, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0 && !tool_is_agent_proc(sub) && grep_dir(g, sub, path, sub_rel, depth + 1) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (!S_ISREG(st.st_mode))
                        continue; /* symlinks are not followed; devices and FIFOs not read */
                if (g->name_filter && fnmatch(g->name_filter, *np, 0) != 0)
                        continue;
                if (g->filter && !match_relative(g->filter, strv_length(g->filter), sub_rel))
                        continue;
                _cleanup_close_ int fd = openat(dirfd, *np, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                if (fd >= 0 && grep_file(g, fd, path) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void grepper_release(grepper *g, bool compiled)
{
        if (compiled)
                regfree(&g->re);
        strv_free(g->filter);
        json_decref(g->matches);
        free(g->folded);
        free(g->buf);
        free((char *)(g->fixed && g->ignore_case ? g->needle : NULL));
}

/* glibc's regcomp copies a repeated subexpression once per repetition it must count ("x{5}" is
 * five copies of x, "x+" two), and copies copies when repetitions stack or nest: "x++++..." or
 * "((x{99}){99}){99}" took gigabytes before it returned.  An upper bound of the copies, in parts
 * (each character, bracket expression or anchor one), checked before regcomp; it saturates just
 * above max.  A pattern regcomp would refuse anyway may be counted loosely. */
static uint64_t regex_parts(const char *p, uint64_t max)
{
        enum { DEPTH = 64 };
        uint64_t sum[DEPTH + 1] = { 0 }, last[DEPTH + 1] = { 0 };
        unsigned depth = 0;
#define CAP(x) ((x) > max ? max + 1 : (x))
        while (*p) {
                uint64_t f = 0; /* a repetition's factor, 0 when *p is no repetition */
                const char *next = p + 1;
                if (*p == '*' || *p == '?')
                        f = 1;
                else if (*p == '+')
                        f = 2;
                else if (*p == '{') {
                        /* {m}, {m,}, {m,n}, {,n}: the copies are n, else m + 1 */
                        char *end;
                        uint64_t m = strtoull(p + 1, &end, 10), n = m;
                        bool comma = *end == ',';
                        if (comma) {
                                const char *ns = end + 1;
                                n = isdigit((unsigned char)*ns) ? strtoull(ns, &end, 10) : m + 1;
                                if (!isdigit((unsigned char)*ns))
                                        end = (char *)ns;
                        }
                        if (*end == '}') {
                                f = n ? n : 1;
                                next = end + 1;
                        }
                }
                if (f) {
                        sum[depth] -= last[depth];
                        last[depth] = CAP(last[depth] * (f > max ? max + 1 : f));
                        sum[depth] = CAP(sum[depth] + last[depth]);
                        p = next;
                        continue;
                }
                uint64_t atom = 1;
                if (*p == '\\') {
                        next = p[1] ? p + 2 : p + 1;
                } else if (*p == '[') {
                        /* to the ']' that closes it: one first ']' is a member; so are [:x:] [=x=] [.x.] */
                        const char *q = p + 1;
                        if (*q == '^')
                                q++;
                        if (*q == ']')
                                q++;
                        while (*q && *q != ']') {
                                if (*q == '[' && (q[1] == ':' || q[1] == '=' || q[1] == '.')) {
                                        const char *close = strchr(q + 2, q[1]);
                                        while (close && close[1] != ']')
                                                close = strchr(close + 1, q[1]);
                                        q = close ? close + 2 : q + 1;
                                } else {
                                        q++;
                                }
                        }
                        next = *q ? q + 1 : q;
                } else if (*p == '(') {
                        if (depth < DEPTH) {
                                depth++;
                                sum[depth] = last[depth] = 0;
                                p = next;
                                continue;
                        }
                        return max + 1; /* deeper than anyone needs */
                } else if (*p == ')' && depth > 0) {
                        atom = sum[depth] ? sum[depth] : 1;
                        depth--;
                }
                last[depth] = atom;
                sum[depth] = CAP(sum[depth] + atom);
                p = next;
        }
        /* an unclosed group counts in full */
        while (depth > 0) {
                sum[depth - 1] = CAP(sum[depth - 1] + sum[depth]);
                depth--;
        }
#undef CAP
        return sum[0];
}

int tool_grep(const tool_ctx *ctx, const tool_in *in, tool_out *out, tool_error *e)
{
        static const char tool[] = "grep";
        const char *pattern = NULL, *glob = NULL;
        _cleanup_free_ char *abs = NULL;
        bool fixed = false, ignore_case = false;
        uint64_t max_count = GREP_DEFAULT_COUNT, context = 0;
        if (tool_param_string(in, tool, "pattern", true, &pattern, e) < 0 ||
            tool_param_path(ctx, in, tool, "path", ".", &abs, e) < 0 ||
            tool_param_string(in, tool, "glob", false, &glob, e) < 0 ||
            tool_param_bool(in, tool, "fixed", &fixed, e) < 0 ||
            tool_param_bool(in, tool, "ignore_case", &ignore_case, e) < 0 ||
            tool_param_uint(in, tool, "max_count", TOOL_MAX_ENTRIES, &max_count, e) < 0 ||
            tool_param_uint(in, tool, "context", GREP_MAX_CONTEXT, &context, e) < 0)
                return -1;
        if (!*pattern)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'pattern' must not be empty", tool);
        if (!fixed && regex_parts(pattern, GREP_REGEX_MAX_PARTS) > GREP_REGEX_MAX_PARTS)
                return tool_fail(e, TOOL_INVALID_ARGUMENT,
                                 "%s: regular expression '%.100s' is too complex: its repetitions expand to more than %u parts",
                                 tool, pattern, GREP_REGEX_MAX_PARTS);
        if (max_count < 1)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'max_count' must be at least 1", tool);
        if (glob && !*glob)
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'glob' must not be empty", tool);

        grepper g = {
                .fixed = fixed,
                .ignore_case = ignore_case,
                .max_count = max_count,
                .context = (unsigned)context,
                .matches = json_array(),
                .buf = malloc(2 * GREP_LINE_MAX),
        };
        bool compiled = false;
        if (!fixed) {
                int r = regcomp(&g.re, pattern, REG_EXTENDED | REG_NEWLINE | REG_NOSUB | (ignore_case ? REG_ICASE : 0));
                if (r != 0) {
                        char msg[256];
                        regerror(r, &g.re, msg, sizeof(msg));
                        grepper_release(&g, false);
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: bad regular expression '%s': %s", tool,
                                         pattern, msg);
                }
                compiled = true;
        } else if (ignore_case) {
                char *lower = strdup(pattern);
                for (char *p = lower; p && *p; p++)
                        if (*p >= 'A' && *p <= 'Z')
                                *p += 32;
                g.needle = lower;
                g.folded = malloc(GREP_LINE_MAX);
                if (!lower || !g.folded) {
                        grepper_release(&g, compiled);
                        return oom(e);
                }
        } else {
                g.needle = pattern;
        }
        g.needle_len = g.needle ? strlen(g.needle) : 0;
        if (glob && strchr(glob, '/')) {
                g.filter = split_path(glob);
                if (!g.filter) {
                        grepper_release(&g, compiled);
                        return oom(e);
                }
        } else {
                g.name_filter = glob;
        }
        if (!g.matches || !g.buf) {
                grepper_release(&g, compiled);
                return oom(e);
        }

        /* O_NONBLOCK: a FIFO named by the caller must not hang the agent. */
        _cleanup_close_ int fd = -1;
        if (tool_open(ctx, abs, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd, e) < 0) {
                grepper_release(&g, compiled);
                return tool_fail_wrap(e, tool);
        }
        struct stat st;
        int r = fstat(fd, &st) < 0 ? -errno : 0;
        if (r == 0 && S_ISDIR(st.st_mode))
                r = grep_dir(&g, fd, abs, "", 0);
        else if (r == 0 && S_ISREG(st.st_mode))
                r = grep_file(&g, fd, abs); /* a file named explicitly is searched whatever 'glob' says */
        else if (r == 0)
                r = -EINVAL;
        if (r < 0) {
                grepper_release(&g, compiled);
                if (r == -EINVAL)
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' is not a regular file or directory", tool,
                                         abs);
                return tool_fail_errno(e, r, "%s: search '%s'", tool, abs);
        }
        out->result = json_pack("{s:s, s:O, s:b, s:I}", "pattern", pattern, "matches", g.matches, "truncated",
                                g.truncated, "files_searched", (json_int_t)g.files_searched);
        grepper_release(&g, compiled);
        return out->result ? 0 : oom(e);
}
