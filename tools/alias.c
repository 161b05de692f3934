/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Aliases whose params differ from their tool's: knowlyr AgentSandbox's tool names (file_read,
 * file_write, shell, search, git) made into calls of nsbox's own tools, so that a trajectory or
 * an agent written for it runs unchanged.  The params a mapping does not know go through as
 * given, so the target tool judges them exactly as when called by its own name. */
#include "registry.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../runtime/util.h"

#define GIT_MAX_ARGS 256

static int fail(char *why, size_t n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        if (why && n)
                vsnprintf(why, n, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* Moves params[from] to params[to]; both given is an error (which one would win is a guess). */
static int rename_key(json_t *p, const char *alias, const char *from, const char *to, char *why, size_t n)
{
        json_t *v = json_object_get(p, from);
        if (!v)
                return 0;
        if (json_object_get(p, to))
                return fail(why, n, "%s: give '%s' or '%s', not both", alias, from, to);
        if (json_object_set(p, to, v) < 0 || json_object_del(p, from) < 0)
                return -ENOMEM;
        return 0;
}

/* A 1-based line number, or 0 when absent. */
static int line_param(json_t *p, const char *key, json_int_t *ret, char *why, size_t n)
{
        json_t *v = json_object_get(p, key);
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
                return fail(why, n, "file_read: '%s' must be a line number, 1 or more", key);
        *ret = json_integer_value(v);
        return 0;
}

/* file_read {path, start_line, end_line}: lines start_line to end_line, both counted from 1 and
 * included, are read_file's offset start_line - 1 and limit end_line - start_line + 1. */
static int map_file_read(json_t *p, char *why, size_t n)
{
        json_int_t start, end;
        if (line_param(p, "start_line", &start, why, n) < 0 || line_param(p, "end_line", &end, why, n) < 0)
                return -EINVAL;
        if ((start || end) && (json_object_get(p, "offset") || json_object_get(p, "limit")))
                return fail(why, n, "file_read: give 'start_line'/'end_line' or 'offset'/'limit', not both");
        if (start && end && end < start)
                return fail(why, n, "file_read: 'end_line' (%lld) is before 'start_line' (%lld)", (long long)end, (long long)start);
        json_int_t first = start ? start : 1;
        if (start && json_object_set_new(p, "offset", json_integer(first - 1)) < 0)
                return -ENOMEM;
        if (end && json_object_set_new(p, "limit", json_integer(end - first + 1)) < 0)
                return -ENOMEM;
        json_object_del(p, "start_line");
        json_object_del(p, "end_line");
        return 0;
}

/* Appends the argument of `git <subcommand>` that starts at s, quotes removed, to w. */
static int git_word(const char *s, const char **ret_end, strbuf *w, char *why, size_t n)
{
        int full = 0; /* an append past the limit: -E2BIG */
        for (; *s && *s != ' ' && *s != '\t' && *s != '\n'; s++) {
                if (*s == '\'') {
                        const char *q = strchr(s + 1, '\'');
                        if (!q)
                                return fail(why, n, "git: unterminated ' in 'subcommand'");
                        full |= sb_append(w, s + 1, (size_t)(q - s - 1));
                        s = q;
                } else if (*s == '"') {
                        for (s++; *s && *s != '"'; s++) {
                                if (*s == '\\' && s[1] && strchr("\"\\$`", s[1]))
                                        s++;
                                full |= sb_append(w, s, 1);
                        }
                        if (!*s)
                                return fail(why, n, "git: unterminated \" in 'subcommand'");
                } else if (*s == '\\' && s[1]) {
                        full |= sb_append(w, ++s, 1);
                } else {
                        full |= sb_append(w, s, 1);
                }
        }
        if (full < 0)
                return fail(why, n, "git: an argument of 'subcommand' is longer than 64 KiB");
        *ret_end = s;
        return 0;
}

/* git {subcommand}: "log --oneline -n 3" is exec's cmd ["git", "log", "--oneline", "-n", "3"],
 * split as a shell splits words and quotes, with nothing else of a shell: no variables, globs
 * or pipes, since no shell runs. */
static int map_git(json_t *p, char *why, size_t n)
{
        json_t *sub = json_object_get(p, "subcommand");
        if (!json_is_string(sub) || strlen(json_string_value(sub)) != json_string_length(sub))
                return fail(why, n, "git: 'subcommand' must be a string without NUL bytes, e.g. \"log --oneline\"");
        if (json_object_get(p, "cmd") || json_object_get(p, "shell") || json_object_get(p, "command"))
                return fail(why, n, "git: give 'subcommand' only, not 'cmd', 'shell' or 'command'");
        json_auto_t *argv = json_pack("[s]", "git");
        if (!argv)
                return -ENOMEM;
        const char *s = json_string_value(sub);
        for (;;) {
                s += strspn(s, " \t\n");
                if (!*s)
                        break;
                if (json_array_size(argv) > GIT_MAX_ARGS)
                        return fail(why, n, "git: 'subcommand' has more than %d arguments", GIT_MAX_ARGS);
                _cleanup_sb_ strbuf w;
                sb_init(&w, 65536);
                if (git_word(s, &s, &w, why, n) < 0)
                        return -EINVAL;
                if (json_array_append_new(argv, json_stringn(w.buf ? w.buf : "", w.len)) < 0)
                        return -ENOMEM;
        }
        if (json_array_size(argv) == 1)
                return fail(why, n, "git: 'subcommand' is empty: give e.g. \"status\"");
        if (json_object_set(p, "cmd", argv) < 0)
                return -ENOMEM;
        json_object_del(p, "subcommand");
        return 0;
}

int tool_alias_params(const char *name, json_t *params, json_t **ret, char *why, size_t n)
{
        const char *canon = tool_canonical_name(name);
        if (!canon)
                return fail(why, n, "unknown tool '%.100s'", name ? name : "");
        bool file_read = !strcmp(name, "file_read"), shell = !strcmp(name, "shell"), search = !strcmp(name, "search"),
             git = !strcmp(name, "git");
        if (!file_read && !shell && !search && !git) {
                *ret = json_incref(params);
                return 0;
        }
        json_auto_t *p = json_is_object(params) ? json_deep_copy(params) : json_object();
        if (!p)
                return -ENOMEM;
        int r = file_read ? map_file_read(p, why, n)
                : shell   ? rename_key(p, name, "command", "shell", why, n)
                : search  ? rename_key(p, name, "file_pattern", "glob", why, n)
                          : map_git(p, why, n);
        if (r == -ENOMEM)
                fail(why, n, "%s: out of memory", name);
        if (r < 0)
                return r;
        *ret = json_incref(p);
        return 0;
}
