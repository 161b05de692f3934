/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The git tools on real repositories in a temporary root: what an agent sees from git_init,
 * git_status, git_diff, git_log and git_commit, and that no path leads to a repository outside
 * the root. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <git2.h>
#include <jansson.h>

#include "../../runtime/util.h"
#include "../../tools/path.h"
#include "../../tools/tool.h"
#include "unit.h"

/* Helpers return what failed and the assertions are macros, so that each result names the test
 * it is in (a result is named by the location of its last assertion). */

/* A temporary directory holding the root the tools see and, beside it, an empty home: libgit2's
 * global and system configuration are looked up there, so the host's ~/.gitconfig changes
 * nothing (an author default, a global ignore file). */
typedef struct box {
        char base[64];
        char root[80];
        char home[80];
        int root_fd;
        tool_ctx ctx;
} box;

static const int config_levels[] = { GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_GLOBAL,
                                     GIT_CONFIG_LEVEL_PROGRAMDATA };

/* 0 or an errno. */
static int box_open(box *b)
{
        snprintf(b->base, sizeof(b->base), "/tmp/nsbox-git-test-XXXXXX");
        if (!mkdtemp(b->base))
                return errno;
        snprintf(b->root, sizeof(b->root), "%s/root", b->base);
        snprintf(b->home, sizeof(b->home), "%s/home", b->base);
        if (mkdir(b->root, 0755) < 0 || mkdir(b->home, 0755) < 0)
                return errno;
        b->root_fd = open(b->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (b->root_fd < 0)
                return errno;
        b->ctx = (tool_ctx){ .root_fd = b->root_fd, .root_path = b->root, .cwd = "/" };
        git_libgit2_init();
        for (size_t i = 0; i < ARRAY_SIZE(config_levels); i++)
                if (git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, config_levels[i], b->home) < 0)
                        return EINVAL;
        return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)st;
        (void)ftw;
        return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* 0 or an errno. */
static int box_close(box *b)
{
        for (size_t i = 0; i < ARRAY_SIZE(config_levels); i++)
                git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, config_levels[i], NULL);
        git_libgit2_shutdown(); /* balances box_open's init; the tools keep their own */
        close(b->root_fd);
        return nftw(b->base, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : errno;
}

#define BOX_OPEN(b)                                                                          \
        do {                                                                                 \
                int _bo = box_open(b);                                                       \
                ck_assert_msg(_bo == 0, "set up '%s': %s", (b)->base, strerror(_bo));        \
        } while (0)

#define BOX_CLOSE(b)                                                                         \
        do {                                                                                 \
                int _bc = box_close(b);                                                      \
                ck_assert_msg(_bc == 0, "remove '%s': %s", (b)->base, strerror(_bc));        \
        } while (0)

/* Run a tool with params written as JSON with single quotes (none may appear in a value); the
 * result in *ret, NULL on failure. */
static int call(tool_fn fn, const tool_ctx *ctx, const char *params, json_t **ret, tool_error *e)
{
        *ret = NULL;
        *e = (tool_error){ .code = TOOL_INTERNAL, .message = "test params are not JSON" };
        _cleanup_free_ char *text = strdup(params);
        if (!text)
                return -1;
        for (char *p = text; *p; p++)
                if (*p == '\'')
                        *p = '"';
        json_t *p = json_loads(text, 0, NULL);
        if (!p)
                return -1;
        tool_in in = { .params = p };
        tool_out out = { 0 };
        sb_init(&out.payload, 0);
        *e = (tool_error){ 0 };
        int r = fn(ctx, &in, &out, e);
        json_decref(p);
        sb_release(&out.payload);
        if (r < 0) {
                json_decref(out.result);
                return r;
        }
        *ret = out.result;
        return r;
}

/* The tool succeeds: its result (to json_decref). */
#define TOOL_OK(fn, ctx, params)                                                                     \
        ({                                                                                           \
                tool_error _e;                                                                       \
                json_t *_res;                                                                        \
                int _r = call((fn), (ctx), (params), &_res, &_e);                                    \
                ck_assert_msg(_r == 0 && _res, "%s %s failed: %s: %s", #fn, (params),                \
                              tool_code_name(_e.code), _e.message);                                  \
                _res;                                                                                \
        })

/* The tool fails with code, and a one-line message containing needle. */
#define TOOL_FAILS(fn, ctx, params, want, needle)                                                    \
        do {                                                                                         \
                tool_error _e;                                                                       \
                json_t *_res;                                                                        \
                int _r = call((fn), (ctx), (params), &_res, &_e);                                    \
                ck_assert_msg(_r == -1, "%s %s succeeded", #fn, (params));                           \
                ck_assert_msg(_e.code == (want), "%s %s: %s instead of %s: %s", #fn, (params),       \
                              tool_code_name(_e.code), tool_code_name(want), _e.message);            \
                UNIT_ASSERT_ONE_LINE(_e.message);                                                    \
                UNIT_ASSERT_CONTAINS(_e.message, (needle));                                          \
        } while (0)

/* Members of a result, of the type the test expects (each macro's own names: they nest). */
#define JSTR(o, key)                                                                                 \
        ({                                                                                           \
                json_t *_js = json_object_get((o), (key));                                           \
                ck_assert_msg(json_is_string(_js), "'%s' is not a string", (key));                   \
                json_string_value(_js);                                                              \
        })
#define JINT(o, key)                                                                                 \
        ({                                                                                           \
                json_t *_ji = json_object_get((o), (key));                                           \
                ck_assert_msg(json_is_integer(_ji), "'%s' is not an integer", (key));                \
                json_integer_value(_ji);                                                             \
        })
#define JBOOL(o, key)                                                                                \
        ({                                                                                           \
                json_t *_jb = json_object_get((o), (key));                                           \
                ck_assert_msg(json_is_boolean(_jb), "'%s' is not a boolean", (key));                 \
                json_is_true(_jb);                                                                   \
        })
#define JARR(o, key)                                                                                 \
        ({                                                                                           \
                json_t *_ja = json_object_get((o), (key));                                           \
                ck_assert_msg(json_is_array(_ja), "'%s' is not an array", (key));                    \
                _ja;                                                                                 \
        })
#define JNULL(o, key) json_is_null(json_object_get((o), (key))) /* present and null */

/* Write a file inside the root: 0 or an errno. */
static int put(box *b, const char *path, const char *data)
{
        return -write_file_at(b->root_fd, path, data, 0644);
}

#define PUT(b, path, data)                                                                   \
        do {                                                                                 \
                int _pu = put((b), (path), (data));                                          \
                ck_assert_msg(_pu == 0, "write '%s': %s", (path), strerror(_pu));            \
        } while (0)

/* mkdir -p inside the root: 0 or an errno. */
static int mkdirs(box *b, const char *path)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s", path);
        for (char *s = p;; s++) {
                if (*s != '/' && *s != '\0')
                        continue;
                char c = *s;
                *s = '\0';
                if (mkdirat(b->root_fd, p, 0755) < 0 && errno != EEXIST)
                        return errno;
                *s = c;
                if (!c)
                        return 0;
        }
}

#define MKDIRS(b, path)                                                                      \
        do {                                                                                 \
                int _md = mkdirs((b), (path));                                               \
                ck_assert_msg(_md == 0, "mkdir '%s': %s", (path), strerror(_md));            \
        } while (0)

static bool exists(box *b, const char *path)
{
        struct stat st;
        return fstatat(b->root_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The repository at root/dir for libgit2 itself, or NULL. */
static git_repository *repo_at(box *b, const char *dir)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", b->root, dir);
        git_repository *repo = NULL;
        return git_repository_open(&repo, path) == 0 ? repo : NULL;
}

/* git add, behind the tools' back: 0 or a libgit2 error. */
static int stage(box *b, const char *dir, const char *file)
{
        git_repository *repo = repo_at(b, dir);
        git_index *index = NULL;
        int r = repo ? git_repository_index(&index, repo) : GIT_ENOTFOUND;
        if (r == 0)
                r = git_index_add_bypath(index, file);
        if (r == 0)
                r = git_index_write(index);
        git_index_free(index);
        git_repository_free(repo);
        return r;
}

#define STAGE(b, dir, file) ck_assert_msg(stage((b), (dir), (file)) == 0, "stage '%s' in '%s'", (file), (dir))

/* 1 when HEAD's tree has file, 0 when not, else a libgit2 error. */
static int in_head(box *b, const char *dir, const char *file)
{
        git_repository *repo = repo_at(b, dir);
        char spec[PATH_MAX];
        snprintf(spec, sizeof(spec), "HEAD:%s", file);
        git_object *obj = NULL;
        int r = repo ? git_revparse_single(&obj, repo, spec) : GIT_ERROR;
        git_object_free(obj);
        git_repository_free(repo);
        return r == 0 ? 1 : r == GIT_ENOTFOUND ? 0 : r;
}

/* A repository at root/dir with files a.txt, b.txt and sub/c.txt committed, its id in ret_id
 * (if given): 0, or -1 with e saying what failed. */
static int repo_with_commit(box *b, const char *dir, char *ret_id, tool_error *e)
{
        char path[PATH_MAX], params[PATH_MAX + 64];
        json_t *res = NULL;
        snprintf(params, sizeof(params), "{'path': '%s'}", dir);
        if (call(tool_git_init, &b->ctx, params, &res, e) < 0)
                return -1;
        json_decref(res);
        static const char *const files[][2] = {
                { "a.txt", "one\ntwo\nthree\n" },
                { "b.txt", "bee\n" },
                { "sub/c.txt", "sea\n" },
        };
        snprintf(path, sizeof(path), "%s/sub", dir);
        int r = mkdirs(b, path);
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(files); i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, files[i][0]);
                r = put(b, path, files[i][1]);
        }
        if (r != 0)
                return tool_fail_errno(e, r, "write '%s'", path);
        snprintf(params, sizeof(params), "{'path': '%s', 'message': 'first'}", dir);
        if (call(tool_git_commit, &b->ctx, params, &res, e) < 0)
                return -1;
        if (ret_id)
                snprintf(ret_id, GIT_OID_HEXSZ + 1, "%s", json_string_value(json_object_get(res, "id")));
        json_decref(res);
        return 0;
}

#define REPO_WITH_COMMIT(b, dir, ret_id)                                                     \
        do {                                                                                 \
                tool_error _rc;                                                              \
                ck_assert_msg(repo_with_commit((b), (dir), (ret_id), &_rc) == 0,             \
                              "make a repository at '%s': %s", (dir), _rc.message);          \
        } while (0)

/* A git repository around the base directory, so the root lies inside a repository's working
 * tree that discovery must never reach: 0, or -1 with e saying what failed. */
static int outer_repo(box *b, tool_error *e)
{
        _cleanup_close_ int fd = open(b->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return tool_fail_errno(e, errno, "open '%s'", b->base);
        tool_ctx outer = { .root_fd = fd, .root_path = b->base, .cwd = "/" };
        json_t *res = NULL;
        if (call(tool_git_init, &outer, "{}", &res, e) < 0)
                return -1;
        json_decref(res);
        /* seen from its own root, the root directory is inside it */
        if (call(tool_git_status, &outer, "{'path': 'root'}", &res, e) < 0)
                return -1;
        bool found = json_is_string(json_object_get(res, "path")) &&
                     strcmp(json_string_value(json_object_get(res, "path")), "/") == 0;
        json_decref(res);
        return found ? 0 : tool_fail(e, TOOL_INTERNAL, "the outer repository does not contain the root");
}

#define OUTER_REPO(b)                                                                        \
        do {                                                                                 \
                tool_error _or;                                                              \
                ck_assert_msg(outer_repo(b, &_or) == 0, "outer repository: %s", _or.message); \
        } while (0)

/* The status entry for path, or NULL. */
static json_t *entry_for(json_t *status, const char *path)
{
        size_t i;
        json_t *entry;
        json_array_foreach(json_object_get(status, "entries"), i, entry) {
                const char *p = json_string_value(json_object_get(entry, "path"));
                if (p && strcmp(p, path) == 0)
                        return entry;
        }
        return NULL;
}

/* The entry for path has these states (NULL: null). */
#define ASSERT_ENTRY(status, path, want_staged, want_unstaged)                                       \
        do {                                                                                         \
                json_t *_en = entry_for((status), (path));                                           \
                const char *_ws = (want_staged), *_wu = (want_unstaged);                             \
                ck_assert_msg(_en != NULL, "no status entry for '%s'", (path));                      \
                if (_ws)                                                                             \
                        ck_assert_str_eq(JSTR(_en, "staged"), _ws);                                  \
                else                                                                                 \
                        ck_assert_msg(JNULL(_en, "staged"), "'%s' is staged", (path));               \
                if (_wu)                                                                             \
                        ck_assert_str_eq(JSTR(_en, "unstaged"), _wu);                                \
                else                                                                                 \
                        ck_assert_msg(JNULL(_en, "unstaged"), "'%s' has unstaged changes", (path));  \
        } while (0)

/* ---- git_init ---- */

START_TEST(test_init_then_commit_then_log_shows_the_commit)
{
        box b;
        BOX_OPEN(&b);
        json_t *res = TOOL_OK(tool_git_init, &b.ctx, "{'path': 'repo'}");
        ck_assert_str_eq(JSTR(res, "path"), "/repo");
        ck_assert(JBOOL(res, "created"));
        json_decref(res);
        _cleanup_free_ char *head = NULL;
        ck_assert_int_eq(read_file_at(b.root_fd, "repo/.git/HEAD", 0, 4096, &head, NULL), 0);
        ck_assert_str_eq(head, "ref: refs/heads/main\n");

        PUT(&b, "repo/a.txt", "hello\n");
        res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'add a\\n\\nwith a body  \\n\\n'}");
        char id[GIT_OID_HEXSZ + 1];
        snprintf(id, sizeof(id), "%s", JSTR(res, "id"));
        ck_assert_uint_eq(strlen(id), 40);
        ck_assert_uint_eq(strspn(id, "0123456789abcdef"), 40);
        ck_assert_uint_eq(strlen(JSTR(res, "short_id")), 7);
        ck_assert_int_eq(strncmp(JSTR(res, "short_id"), id, 7), 0);
        ck_assert_str_eq(JSTR(res, "branch"), "main");
        ck_assert_str_eq(JSTR(res, "summary"), "add a");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);

        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo'}");
        json_t *commits = JARR(res, "commits");
        ck_assert_uint_eq(json_array_size(commits), 1);
        json_t *c = json_array_get(commits, 0);
        ck_assert_str_eq(JSTR(c, "id"), id);
        ck_assert_str_eq(JSTR(c, "summary"), "add a");
        ck_assert_str_eq(JSTR(c, "message"), "add a\n\nwith a body\n");
        ck_assert_str_eq(JSTR(c, "author"), "nsbox");
        ck_assert_str_eq(JSTR(c, "email"), "nsbox@localhost");
        ck_assert_int_le(llabs((long long)JINT(c, "time") - (long long)time(NULL)), 60);
        ck_assert_uint_eq(json_array_size(JARR(c, "parents")), 0);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_init_creates_missing_directories_and_reports_existing_repository)
{
        box b;
        BOX_OPEN(&b);
        json_t *res = TOOL_OK(tool_git_init, &b.ctx, "{'path': 'a/b/c'}");
        ck_assert_str_eq(JSTR(res, "path"), "/a/b/c");
        ck_assert(JBOOL(res, "created"));
        json_decref(res);
        ck_assert(exists(&b, "a/b/c/.git/HEAD"));

        res = TOOL_OK(tool_git_init, &b.ctx, "{'path': '/a/b/c', 'initial_branch': 'other'}");
        ck_assert(!JBOOL(res, "created"));
        json_decref(res);
        _cleanup_free_ char *head = NULL;
        ck_assert_int_eq(read_file_at(b.root_fd, "a/b/c/.git/HEAD", 0, 4096, &head, NULL), 0);
        ck_assert_str_eq(head, "ref: refs/heads/main\n");

        /* a new repository inside another one's working tree is a repository of its own */
        res = TOOL_OK(tool_git_init, &b.ctx, "{'path': 'a/b/c/nested'}");
        ck_assert(JBOOL(res, "created"));
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_init_bare_with_initial_branch)
{
        box b;
        BOX_OPEN(&b);
        json_t *res = TOOL_OK(tool_git_init, &b.ctx, "{'path': 'srv/r.git', 'bare': true, 'initial_branch': 'trunk'}");
        ck_assert(JBOOL(res, "created"));
        ck_assert_str_eq(JSTR(res, "path"), "/srv/r.git");
        json_decref(res);
        _cleanup_free_ char *head = NULL;
        ck_assert_int_eq(read_file_at(b.root_fd, "srv/r.git/HEAD", 0, 4096, &head, NULL), 0);
        ck_assert_str_eq(head, "ref: refs/heads/trunk\n");
        ck_assert(!exists(&b, "srv/r.git/.git"));

        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'srv/r.git'}");
        ck_assert_uint_eq(json_array_size(JARR(res, "commits")), 0);
        json_decref(res);
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'srv/r.git'}", TOOL_INVALID_ARGUMENT, "bare");
        TOOL_FAILS(tool_git_commit, &b.ctx, "{'path': 'srv/r.git', 'message': 'm'}", TOOL_INVALID_ARGUMENT,
                   "bare");
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_init_refuses_bad_params_before_creating_anything)
{
        box b;
        BOX_OPEN(&b);
        TOOL_FAILS(tool_git_init, &b.ctx, "{'path': 'x', 'initial_branch': 'bad..name'}", TOOL_INVALID_ARGUMENT,
                   "'bad..name' is not a valid branch name");
        TOOL_FAILS(tool_git_init, &b.ctx, "{'path': 'x', 'initial_branch': ''}", TOOL_INVALID_ARGUMENT, "branch");
        TOOL_FAILS(tool_git_init, &b.ctx, "{'path': 'x', 'initial_branch': 5}", TOOL_INVALID_ARGUMENT,
                   "'initial_branch' must be a string");
        TOOL_FAILS(tool_git_init, &b.ctx, "{'path': 'x', 'bare': 'yes'}", TOOL_INVALID_ARGUMENT,
                   "'bare' must be a boolean");
        TOOL_FAILS(tool_git_init, &b.ctx, "{'path': 7}", TOOL_INVALID_ARGUMENT, "'path' must be a string");
        TOOL_FAILS(tool_git_init, &b.ctx, "{'path': ''}", TOOL_INVALID_PATH, "git_init");
        ck_assert(!exists(&b, "x"));

        /* a file where a directory would be created */
        PUT(&b, "file", "x");
        TOOL_FAILS(tool_git_init, &b.ctx, "{'path': 'file/repo'}", TOOL_NOT_A_DIRECTORY, "git_init");
        BOX_CLOSE(&b);
}
END_TEST

/* ---- git_status ---- */

START_TEST(test_status_of_new_repository_is_clean_on_unborn_branch)
{
        box b;
        BOX_OPEN(&b);
        json_decref(TOOL_OK(tool_git_init, &b.ctx, "{'path': 'repo'}"));
        json_t *res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert_str_eq(JSTR(res, "path"), "/repo");
        ck_assert_str_eq(JSTR(res, "branch"), "main");
        ck_assert(JNULL(res, "head"));
        ck_assert(JBOOL(res, "clean"));
        ck_assert(!JBOOL(res, "truncated"));
        ck_assert_uint_eq(json_array_size(JARR(res, "entries")), 0);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_status_lists_untracked_modified_deleted_and_staged)
{
        box b;
        BOX_OPEN(&b);
        char id[GIT_OID_HEXSZ + 1];
        REPO_WITH_COMMIT(&b, "repo", id);
        PUT(&b, "repo/a.txt", "one\nTWO\nthree\n");      /* modified, not staged */
        ck_assert_int_eq(unlinkat(b.root_fd, "repo/b.txt", 0), 0); /* deleted, not staged */
        PUT(&b, "repo/sub/c.txt", "staged\n");             /* modified and staged ... */
        STAGE(&b, "repo", "sub/c.txt");
        PUT(&b, "repo/sub/c.txt", "staged, then changed\n"); /* ... then modified again */
        PUT(&b, "repo/new.txt", "new\n");                  /* added */
        STAGE(&b, "repo", "new.txt");
        MKDIRS(&b, "repo/dir/deeper");
        PUT(&b, "repo/dir/deeper/u.txt", "u\n");           /* untracked, in a new directory */
        PUT(&b, "repo/u.txt", "u\n");                      /* untracked */

        json_t *res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert_str_eq(JSTR(res, "branch"), "main");
        ck_assert_str_eq(JSTR(res, "head"), id);
        ck_assert(!JBOOL(res, "clean"));
        ck_assert(!JBOOL(res, "truncated"));
        json_t *entries = JARR(res, "entries");
        ck_assert_uint_eq(json_array_size(entries), 6);
        ASSERT_ENTRY(res, "a.txt", NULL, "modified");
        ASSERT_ENTRY(res, "b.txt", NULL, "deleted");
        ASSERT_ENTRY(res, "sub/c.txt", "modified", "modified");
        ASSERT_ENTRY(res, "new.txt", "added", NULL);
        ASSERT_ENTRY(res, "dir/deeper/u.txt", NULL, "untracked");
        ASSERT_ENTRY(res, "u.txt", NULL, "untracked");
        /* sorted by path */
        for (size_t i = 1; i < json_array_size(entries); i++)
                ck_assert_str_lt(JSTR(json_array_get(entries, i - 1), "path"), JSTR(json_array_get(entries, i), "path"));
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_status_without_untracked_and_never_ignored)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/.gitignore", "*.log\n");
        STAGE(&b, "repo", ".gitignore");
        json_decref(TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'ignore logs'}"));
        PUT(&b, "repo/debug.log", "noise\n");
        PUT(&b, "repo/u.txt", "u\n");

        json_t *res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert_uint_eq(json_array_size(JARR(res, "entries")), 1);
        ASSERT_ENTRY(res, "u.txt", NULL, "untracked");
        ck_assert_ptr_null(entry_for(res, "debug.log"));
        json_decref(res);

        res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo', 'untracked': false}");
        ck_assert_uint_eq(json_array_size(JARR(res, "entries")), 0);
        ck_assert(JBOOL(res, "clean"));
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_status_shows_staged_rename)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        git_repository *repo = repo_at(&b, "repo");
        ck_assert_ptr_nonnull(repo);
        git_index *index = NULL;
        ck_assert_int_eq(renameat(b.root_fd, "repo/a.txt", b.root_fd, "repo/moved.txt"), 0);
        ck_assert_int_eq(git_repository_index(&index, repo), 0);
        ck_assert_int_eq(git_index_remove_bypath(index, "a.txt"), 0);
        ck_assert_int_eq(git_index_add_bypath(index, "moved.txt"), 0);
        ck_assert_int_eq(git_index_write(index), 0);
        git_index_free(index);
        git_repository_free(repo);

        json_t *res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert_uint_eq(json_array_size(JARR(res, "entries")), 1);
        ASSERT_ENTRY(res, "moved.txt", "renamed", NULL);
        ck_assert_str_eq(JSTR(entry_for(res, "moved.txt"), "old_path"), "a.txt");
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_status_on_detached_head_has_null_branch)
{
        box b;
        BOX_OPEN(&b);
        char id[GIT_OID_HEXSZ + 1];
        REPO_WITH_COMMIT(&b, "repo", id);
        git_repository *repo = repo_at(&b, "repo");
        ck_assert_ptr_nonnull(repo);
        git_oid oid;
        ck_assert_int_eq(git_oid_fromstr(&oid, id), 0);
        ck_assert_int_eq(git_repository_set_head_detached(repo, &oid), 0);
        git_repository_free(repo);

        json_t *res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert(JNULL(res, "branch"));
        ck_assert_str_eq(JSTR(res, "head"), id);
        ck_assert(JBOOL(res, "clean"));
        json_decref(res);

        /* a commit on a detached HEAD moves HEAD and says it is on no branch */
        PUT(&b, "repo/a.txt", "detached\n");
        res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'detached'}");
        ck_assert(JNULL(res, "branch"));
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

/* ---- git_diff ---- */

START_TEST(test_diff_shows_added_and_removed_lines_with_counts)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/a.txt", "one\n2\nthree\nfour\n");

        json_t *res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo'}");
        const char *diff = JSTR(res, "diff");
        UNIT_ASSERT_CONTAINS(diff, "diff --git a/a.txt b/a.txt\n");
        UNIT_ASSERT_CONTAINS(diff, "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        ck_assert_int_eq(JINT(res, "insertions"), 2);
        ck_assert_int_eq(JINT(res, "deletions"), 1);
        ck_assert(!JBOOL(res, "truncated"));
        json_decref(res);

        /* without context only the changed lines remain */
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo', 'context': 0}");
        diff = JSTR(res, "diff");
        UNIT_ASSERT_CONTAINS(diff, "-two\n+2\n");
        ck_assert_ptr_null(strstr(diff, "\n one\n"));
        ck_assert_ptr_null(strstr(diff, "\n three\n"));
        json_decref(res);

        /* a deleted file */
        ck_assert_int_eq(unlinkat(b.root_fd, "repo/b.txt", 0), 0);
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo'}");
        UNIT_ASSERT_CONTAINS(JSTR(res, "diff"), "deleted file mode 100644\n");
        UNIT_ASSERT_CONTAINS(JSTR(res, "diff"), "-bee\n");
        ck_assert_int_eq(JINT(res, "files_changed"), 2);
        ck_assert_int_eq(JINT(res, "deletions"), 2);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_diff_staged_and_unstaged_are_separate)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/a.txt", "one\ntwo\nthree\nstaged\n");
        STAGE(&b, "repo", "a.txt");
        PUT(&b, "repo/b.txt", "bee\nunstaged\n");
        PUT(&b, "repo/untracked.txt", "not in any diff\n");

        json_t *res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo'}");
        const char *diff = JSTR(res, "diff");
        UNIT_ASSERT_CONTAINS(diff, "+unstaged\n");
        ck_assert_ptr_null(strstr(diff, "+staged\n"));
        ck_assert_ptr_null(strstr(diff, "a.txt"));
        ck_assert_ptr_null(strstr(diff, "untracked.txt"));
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);

        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo', 'staged': true}");
        diff = JSTR(res, "diff");
        UNIT_ASSERT_CONTAINS(diff, "+staged\n");
        ck_assert_ptr_null(strstr(diff, "b.txt"));
        ck_assert_ptr_null(strstr(diff, "untracked.txt"));
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        ck_assert_int_eq(JINT(res, "insertions"), 1);
        ck_assert_int_eq(JINT(res, "deletions"), 0);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_diff_staged_on_unborn_branch_shows_new_files)
{
        box b;
        BOX_OPEN(&b);
        json_decref(TOOL_OK(tool_git_init, &b.ctx, "{'path': 'repo'}"));
        PUT(&b, "repo/hello.txt", "hello\n");
        STAGE(&b, "repo", "hello.txt");
        json_t *res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo', 'staged': true}");
        UNIT_ASSERT_CONTAINS(JSTR(res, "diff"), "new file mode 100644\n");
        UNIT_ASSERT_CONTAINS(JSTR(res, "diff"), "+hello\n");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);

        /* nothing differs between the index and the working tree */
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo'}");
        ck_assert_str_eq(JSTR(res, "diff"), "");
        ck_assert_int_eq(JINT(res, "files_changed"), 0);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_diff_paths_limit_the_files_relative_to_the_directory)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/a.txt", "changed a\n");
        PUT(&b, "repo/sub/c.txt", "changed c\n");

        json_t *res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo', 'paths': ['sub']}");
        UNIT_ASSERT_CONTAINS(JSTR(res, "diff"), "sub/c.txt");
        ck_assert_ptr_null(strstr(JSTR(res, "diff"), "a.txt"));
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);

        /* relative to the directory named, as git's pathspecs are relative to where it runs */
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo/sub', 'paths': ['c.txt']}");
        UNIT_ASSERT_CONTAINS(JSTR(res, "diff"), "sub/c.txt");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo/sub', 'paths': ['../a.txt', '/repo/sub/c.txt']}");
        ck_assert_int_eq(JINT(res, "files_changed"), 2);
        json_decref(res);
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo/sub', 'paths': ['..']}");
        ck_assert_int_eq(JINT(res, "files_changed"), 2);
        json_decref(res);
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo', 'paths': ['*.txt']}");
        ck_assert_int_eq(JINT(res, "files_changed"), 2);
        json_decref(res);
        res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo', 'paths': []}");
        ck_assert_int_eq(JINT(res, "files_changed"), 2);
        json_decref(res);

        TOOL_FAILS(tool_git_diff, &b.ctx, "{'path': 'repo', 'paths': ['../elsewhere']}", TOOL_INVALID_ARGUMENT,
                   "outside the repository");
        TOOL_FAILS(tool_git_diff, &b.ctx, "{'path': 'repo', 'paths': ['/']}", TOOL_INVALID_ARGUMENT,
                   "outside the repository");
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_diff_replaces_invalid_utf8)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/b.txt", "bee\nlatin1 caf\xe9\n");
        json_t *res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo'}");
        UNIT_ASSERT_CONTAINS(JSTR(res, "diff"), "+latin1 caf\xef\xbf\xbd\n");
        ck_assert_int_eq(JINT(res, "insertions"), 1);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_diff_larger_than_the_cap_is_truncated_at_a_line)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        /* 5 MiB of new lines */
        const size_t line_len = 64, lines = (5u << 20) / line_len;
        _cleanup_free_ char *big = malloc(lines * line_len + 1);
        ck_assert_ptr_nonnull(big);
        for (size_t i = 0; i < lines; i++) {
                memset(big + i * line_len, 'x', line_len - 1);
                snprintf(big + i * line_len, 16, "%010zu", i);
                big[i * line_len + 10] = 'x';
                big[i * line_len + line_len - 1] = '\n';
        }
        big[lines * line_len] = '\0';
        PUT(&b, "repo/b.txt", big);

        json_t *res = TOOL_OK(tool_git_diff, &b.ctx, "{'path': 'repo'}");
        const char *diff = JSTR(res, "diff");
        size_t len = strlen(diff);
        ck_assert(JBOOL(res, "truncated"));
        ck_assert_uint_le(len, 4u << 20);
        ck_assert_uint_gt(len, (4u << 20) - 2 * line_len);
        ck_assert_int_eq(diff[len - 1], '\n');
        /* the counts are of the whole diff */
        ck_assert_int_eq(JINT(res, "insertions"), (json_int_t)lines);
        ck_assert_int_eq(JINT(res, "deletions"), 1);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

/* ---- git_commit and git_log ---- */

START_TEST(test_commit_with_nothing_to_commit_is_conflict)
{
        box b;
        BOX_OPEN(&b);
        json_decref(TOOL_OK(tool_git_init, &b.ctx, "{'path': 'repo'}"));
        TOOL_FAILS(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'empty'}", TOOL_CONFLICT,
                   "nothing to commit");
        PUT(&b, "repo/a.txt", "a\n");
        json_decref(TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'first'}"));
        TOOL_FAILS(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'again'}", TOOL_CONFLICT,
                   "git_commit '/repo': nothing to commit");
        /* an unstaged change with all: false is nothing to commit either */
        PUT(&b, "repo/a.txt", "changed\n");
        TOOL_FAILS(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'again', 'all': false}", TOOL_CONFLICT,
                   "nothing to commit");

        json_t *res = TOOL_OK(tool_git_commit, &b.ctx,
                              "{'path': 'repo', 'message': 'empty on purpose', 'all': false, 'allow_empty': true}");
        ck_assert_int_eq(JINT(res, "files_changed"), 0);
        json_decref(res);
        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo'}");
        ck_assert_uint_eq(json_array_size(JARR(res, "commits")), 2);
        ck_assert_str_eq(JSTR(json_array_get(JARR(res, "commits"), 0), "summary"), "empty on purpose");
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_second_commit_has_first_as_parent_and_log_is_newest_first)
{
        box b;
        BOX_OPEN(&b);
        char first[GIT_OID_HEXSZ + 1], second[GIT_OID_HEXSZ + 1];
        REPO_WITH_COMMIT(&b, "repo", first);
        PUT(&b, "repo/a.txt", "second version\n");
        json_t *res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'second'}");
        snprintf(second, sizeof(second), "%s", JSTR(res, "id"));
        json_decref(res);

        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo'}");
        json_t *commits = JARR(res, "commits");
        ck_assert_uint_eq(json_array_size(commits), 2);
        json_t *newest = json_array_get(commits, 0), *oldest = json_array_get(commits, 1);
        ck_assert_str_eq(JSTR(newest, "id"), second);
        ck_assert_str_eq(JSTR(newest, "summary"), "second");
        ck_assert_uint_eq(json_array_size(JARR(newest, "parents")), 1);
        ck_assert_str_eq(json_string_value(json_array_get(JARR(newest, "parents"), 0)), first);
        ck_assert_str_eq(JSTR(oldest, "id"), first);
        json_decref(res);

        /* and libgit2 itself agrees */
        git_repository *repo = repo_at(&b, "repo");
        ck_assert_ptr_nonnull(repo);
        git_oid oid;
        git_commit *c = NULL;
        ck_assert_int_eq(git_oid_fromstr(&oid, second), 0);
        ck_assert_int_eq(git_commit_lookup(&c, repo, &oid), 0);
        ck_assert_uint_eq(git_commit_parentcount(c), 1);
        char parent[GIT_OID_HEXSZ + 1];
        git_oid_tostr(parent, sizeof(parent), git_commit_parent_id(c, 0));
        ck_assert_str_eq(parent, first);
        git_commit_free(c);
        git_repository_free(repo);

        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo', 'max_count': 1}");
        ck_assert_uint_eq(json_array_size(JARR(res, "commits")), 1);
        ck_assert_str_eq(JSTR(json_array_get(JARR(res, "commits"), 0), "id"), second);
        json_decref(res);
        char params[128];
        snprintf(params, sizeof(params), "{'path': 'repo', 'ref': '%s'}", first);
        res = TOOL_OK(tool_git_log, &b.ctx, params);
        ck_assert_uint_eq(json_array_size(JARR(res, "commits")), 1);
        ck_assert_str_eq(JSTR(json_array_get(JARR(res, "commits"), 0), "id"), first);
        json_decref(res);
        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo', 'ref': 'main~1'}");
        ck_assert_str_eq(JSTR(json_array_get(JARR(res, "commits"), 0), "id"), first);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_log_of_unborn_branch_is_empty_and_unknown_ref_not_found)
{
        box b;
        BOX_OPEN(&b);
        json_decref(TOOL_OK(tool_git_init, &b.ctx, "{'path': 'repo'}"));
        json_t *res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo'}");
        ck_assert_uint_eq(json_array_size(JARR(res, "commits")), 0);
        json_decref(res);
        TOOL_FAILS(tool_git_log, &b.ctx, "{'path': 'repo', 'ref': 'main'}", TOOL_NOT_FOUND, "git_log '/repo'");

        REPO_WITH_COMMIT(&b, "other", NULL);
        TOOL_FAILS(tool_git_log, &b.ctx, "{'path': 'other', 'ref': 'no-such-branch'}", TOOL_NOT_FOUND,
                   "no-such-branch");
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_commit_all_stages_new_and_deleted_files_but_not_ignored)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/.gitignore", "*.log\n");
        ck_assert_int_eq(unlinkat(b.root_fd, "repo/b.txt", 0), 0);
        MKDIRS(&b, "repo/new/dir");
        PUT(&b, "repo/new/dir/n.txt", "n\n");
        PUT(&b, "repo/debug.log", "noise\n");

        json_t *res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'everything'}");
        ck_assert_int_eq(JINT(res, "files_changed"), 3); /* .gitignore, b.txt, new/dir/n.txt */
        json_decref(res);
        ck_assert_int_eq(1, in_head(&b, "repo", ".gitignore"));
        ck_assert_int_eq(1, in_head(&b, "repo", "new/dir/n.txt"));
        ck_assert_int_eq(0, in_head(&b, "repo", "b.txt"));
        ck_assert_int_eq(0, in_head(&b, "repo", "debug.log"));
        ck_assert(exists(&b, "repo/debug.log"));

        res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert(JBOOL(res, "clean"));
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_commit_paths_stage_only_those)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/a.txt", "changed a\n");
        PUT(&b, "repo/sub/c.txt", "changed c\n");
        PUT(&b, "repo/sub/d.txt", "new d\n");
        ck_assert_int_eq(unlinkat(b.root_fd, "repo/b.txt", 0), 0);

        json_t *res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'only a', 'paths': ['a.txt']}");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);
        res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert_ptr_null(entry_for(res, "a.txt"));
        ASSERT_ENTRY(res, "b.txt", NULL, "deleted");
        ASSERT_ENTRY(res, "sub/c.txt", NULL, "modified");
        ASSERT_ENTRY(res, "sub/d.txt", NULL, "untracked");
        json_decref(res);

        /* a deleted file by name, and a directory from inside it */
        res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'drop b', 'paths': ['b.txt']}");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);
        ck_assert_int_eq(0, in_head(&b, "repo", "b.txt"));
        res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo/sub', 'message': 'sub', 'paths': ['.'], 'all': false}");
        ck_assert_int_eq(JINT(res, "files_changed"), 2);
        json_decref(res);
        ck_assert_int_eq(1, in_head(&b, "repo", "sub/d.txt"));

        /* a path matching nothing is an error, and nothing is committed */
        PUT(&b, "repo/a.txt", "changed again\n");
        TOOL_FAILS(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'typo', 'paths': ['a.txt', 'no-such.txt']}",
                   TOOL_NOT_FOUND, "'no-such.txt' did not match any files");
        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo'}");
        ck_assert_str_eq(JSTR(json_array_get(JARR(res, "commits"), 0), "summary"), "sub");
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_commit_with_all_false_commits_only_the_index)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/a.txt", "staged a\n");
        STAGE(&b, "repo", "a.txt");
        PUT(&b, "repo/b.txt", "unstaged b\n");
        json_t *res = TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'index only', 'all': false}");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);
        res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo'}");
        ck_assert_uint_eq(json_array_size(JARR(res, "entries")), 1);
        ASSERT_ENTRY(res, "b.txt", NULL, "modified");
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_commit_author_from_params_else_repository_config)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/a.txt", "by ada\n");
        json_decref(TOOL_OK(tool_git_commit, &b.ctx,
                            "{'path': 'repo', 'message': 'm', 'author_name': 'Ada L', 'author_email': 'ada@example.org'}"));
        json_t *res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo', 'max_count': 1}");
        json_t *c = json_array_get(JARR(res, "commits"), 0);
        ck_assert_str_eq(JSTR(c, "author"), "Ada L");
        ck_assert_str_eq(JSTR(c, "email"), "ada@example.org");
        json_decref(res);

        git_repository *repo = repo_at(&b, "repo");
        ck_assert_ptr_nonnull(repo);
        git_config *cfg = NULL;
        ck_assert_int_eq(git_repository_config(&cfg, repo), 0);
        ck_assert_int_eq(git_config_set_string(cfg, "user.name", "Configured Name"), 0);
        ck_assert_int_eq(git_config_set_string(cfg, "user.email", "configured@example.org"), 0);
        git_config_free(cfg);
        git_repository_free(repo);

        PUT(&b, "repo/a.txt", "by config\n");
        json_decref(TOOL_OK(tool_git_commit, &b.ctx, "{'path': 'repo', 'message': 'm2', 'author_name': 'Only Name'}"));
        res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo', 'max_count': 1}");
        c = json_array_get(JARR(res, "commits"), 0);
        ck_assert_str_eq(JSTR(c, "author"), "Only Name");
        ck_assert_str_eq(JSTR(c, "email"), "configured@example.org");
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_not_a_repository_is_not_found)
{
        box b;
        BOX_OPEN(&b);
        MKDIRS(&b, "plain");
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'plain'}", TOOL_NOT_FOUND, "'/plain' is not a git repository");
        TOOL_FAILS(tool_git_diff, &b.ctx, "{'path': 'plain'}", TOOL_NOT_FOUND, "'/plain' is not a git repository");
        TOOL_FAILS(tool_git_log, &b.ctx, "{'path': 'plain'}", TOOL_NOT_FOUND, "'/plain' is not a git repository");
        TOOL_FAILS(tool_git_commit, &b.ctx, "{'path': 'plain', 'message': 'm'}", TOOL_NOT_FOUND,
                   "'/plain' is not a git repository");
        TOOL_FAILS(tool_git_status, &b.ctx, "{}", TOOL_NOT_FOUND, "'/' is not a git repository");
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'missing'}", TOOL_FILE_NOT_FOUND, "git_status");
        PUT(&b, "file", "x");
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'file'}", TOOL_NOT_A_DIRECTORY, "git_status");
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_bad_params_are_invalid_argument)
{
        box b;
        BOX_OPEN(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        PUT(&b, "repo/a.txt", "uncommitted\n");
        static const struct {
                tool_fn fn;
                const char *params, *needle;
        } bad[] = {
                { tool_git_status, "{'path': 5}", "'path' must be a string" },
                { tool_git_status, "{'path': 'repo', 'untracked': 'yes'}", "'untracked' must be a boolean" },
                { tool_git_diff, "{'path': 'repo', 'staged': 1}", "'staged' must be a boolean" },
                { tool_git_diff, "{'path': 'repo', 'context': 1001}", "'context' must be at most 1000" },
                { tool_git_diff, "{'path': 'repo', 'context': -1}", "'context'" },
                { tool_git_diff, "{'path': 'repo', 'context': '3'}", "'context'" },
                { tool_git_diff, "{'path': 'repo', 'paths': 'a.txt'}", "'paths' must be an array of strings" },
                { tool_git_diff, "{'path': 'repo', 'paths': [1]}", "'paths' must be an array of strings" },
                { tool_git_diff, "{'path': 'repo', 'paths': ['']}", "'paths'" },
                { tool_git_log, "{'path': 'repo', 'max_count': 0}", "'max_count' must be between 1 and 1000" },
                { tool_git_log, "{'path': 'repo', 'max_count': 1001}", "'max_count'" },
                { tool_git_log, "{'path': 'repo', 'max_count': 1.5}", "'max_count'" },
                { tool_git_log, "{'path': 'repo', 'ref': ''}", "'ref' must not be empty" },
                { tool_git_log, "{'path': 'repo', 'ref': 3}", "'ref' must be a string" },
                { tool_git_log, "{'path': 'repo', 'ref': 'a..b..c'}", "git_log" },
                { tool_git_commit, "{'path': 'repo'}", "'message' is required" },
                { tool_git_commit, "{'path': 'repo', 'message': ''}", "'message' must not be empty" },
                { tool_git_commit, "{'path': 'repo', 'message': ' \\n\\n  '}", "'message' must not be empty" },
                { tool_git_commit, "{'path': 'repo', 'message': 5}", "'message' must be a string" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'all': 'x'}", "'all' must be a boolean" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'allow_empty': 0}", "'allow_empty'" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'paths': []}", "'paths' must not be empty" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'paths': {}}", "'paths'" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'author_name': ''}", "'author_name'" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'author_email': 'a<b>'}", "'author_email'" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'author_name': 'a\\nb'}", "'author_name'" },
                { tool_git_commit, "{'path': 'repo', 'message': 'm', 'author_name': 7}", "'author_name'" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                TOOL_FAILS(bad[i].fn, &b.ctx, bad[i].params, TOOL_INVALID_ARGUMENT, bad[i].needle);
        /* none of the refused commits happened */
        json_t *res = TOOL_OK(tool_git_log, &b.ctx, "{'path': 'repo'}");
        ck_assert_uint_eq(json_array_size(JARR(res, "commits")), 1);
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

/* ---- finding the repository ---- */

START_TEST(test_repository_is_discovered_from_a_subdirectory)
{
        box b;
        BOX_OPEN(&b);
        char id[GIT_OID_HEXSZ + 1];
        REPO_WITH_COMMIT(&b, "repo", id);
        MKDIRS(&b, "repo/sub/deeper");
        json_t *res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'repo/sub/deeper'}");
        ck_assert_str_eq(JSTR(res, "path"), "/repo");
        ck_assert_str_eq(JSTR(res, "head"), id);
        json_decref(res);

        /* from the working directory, with relative and absolute paths */
        tool_ctx in_sub = b.ctx;
        in_sub.cwd = "/repo/sub";
        res = TOOL_OK(tool_git_log, &in_sub, "{}");
        ck_assert_str_eq(JSTR(json_array_get(JARR(res, "commits"), 0), "id"), id);
        json_decref(res);
        PUT(&b, "repo/sub/c.txt", "from sub\n");
        res = TOOL_OK(tool_git_commit, &in_sub, "{'message': 'from sub', 'paths': ['c.txt']}");
        ck_assert_int_eq(JINT(res, "files_changed"), 1);
        json_decref(res);
        res = TOOL_OK(tool_git_status, &in_sub, "{'path': '/repo'}");
        ck_assert(JBOOL(res, "clean"));
        json_decref(res);

        /* the root itself may be the repository */
        json_decref(TOOL_OK(tool_git_init, &b.ctx, "{}"));
        MKDIRS(&b, "elsewhere");
        res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'elsewhere', 'untracked': false}");
        ck_assert_str_eq(JSTR(res, "path"), "/");
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_dotdot_never_leaves_the_root)
{
        box b;
        BOX_OPEN(&b);
        OUTER_REPO(&b);
        MKDIRS(&b, "sub/dir");
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': '../../..'}", TOOL_NOT_FOUND, "'/' is not a git repository");
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'sub/dir/../../../..'}", TOOL_NOT_FOUND,
                   "is not a git repository");
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'sub/dir'}", TOOL_NOT_FOUND, "'/sub/dir' is not a git repository");
        tool_ctx deep = b.ctx;
        deep.cwd = "/sub/dir";
        TOOL_FAILS(tool_git_log, &deep, "{'path': '..'}", TOOL_NOT_FOUND, "'/sub' is not a git repository");
        TOOL_FAILS(tool_git_commit, &deep, "{'message': 'm', 'allow_empty': true}", TOOL_NOT_FOUND,
                   "is not a git repository");
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_planted_symlinks_stay_inside_the_root)
{
        box b;
        BOX_OPEN(&b);
        OUTER_REPO(&b);
        REPO_WITH_COMMIT(&b, "repo", NULL);
        /* an absolute link means the same path inside the root, where there is none */
        ck_assert_int_eq(symlinkat(b.base, b.root_fd, "escape"), 0);
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'escape'}", TOOL_FILE_NOT_FOUND, "git_status");
        /* a relative link climbing out stops at the root, which is no repository */
        ck_assert_int_eq(symlinkat("../../../..", b.root_fd, "up"), 0);
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'up'}", TOOL_NOT_FOUND, "is not a git repository");
        /* one to a repository inside the root works, reported where it really is */
        ck_assert_int_eq(symlinkat("repo/sub", b.root_fd, "link"), 0);
        json_t *res = TOOL_OK(tool_git_status, &b.ctx, "{'path': 'link'}");
        ck_assert_str_eq(JSTR(res, "path"), "/repo");
        json_decref(res);
        BOX_CLOSE(&b);
}
END_TEST

START_TEST(test_git_file_pointing_outside_the_root_is_refused)
{
        box b;
        BOX_OPEN(&b);
        OUTER_REPO(&b);
        char gitfile[PATH_MAX + 16];
        snprintf(gitfile, sizeof(gitfile), "gitdir: %s/.git\n", b.base);
        MKDIRS(&b, "evil");
        PUT(&b, "evil/.git", gitfile);
        TOOL_FAILS(tool_git_status, &b.ctx, "{'path': 'evil'}", TOOL_INVALID_PATH, "outside the root");
        TOOL_FAILS(tool_git_log, &b.ctx, "{'path': 'evil'}", TOOL_INVALID_PATH, "outside the root");
        TOOL_FAILS(tool_git_commit, &b.ctx, "{'path': 'evil', 'message': 'm'}", TOOL_INVALID_PATH,
                   "outside the root");
        BOX_CLOSE(&b);
}
END_TEST

static void force_fallback(void) { tool_path_force_fallback(true); }
static void unforce_fallback(void) { tool_path_force_fallback(false); }

Suite *git_suite(void)
{
        Suite *s = suite_create("git");
        TCase *tc = unit_tcase(s, "git_init");
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_init_then_commit_then_log_shows_the_commit);
        unit_add(tc, test_init_creates_missing_directories_and_reports_existing_repository);
        unit_add(tc, test_init_bare_with_initial_branch);
        unit_add(tc, test_init_refuses_bad_params_before_creating_anything);

        tc = unit_tcase(s, "git_status");
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_status_of_new_repository_is_clean_on_unborn_branch);
        unit_add(tc, test_status_lists_untracked_modified_deleted_and_staged);
        unit_add(tc, test_status_without_untracked_and_never_ignored);
        unit_add(tc, test_status_shows_staged_rename);
        unit_add(tc, test_status_on_detached_head_has_null_branch);

        tc = unit_tcase(s, "git_diff");
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_diff_shows_added_and_removed_lines_with_counts);
        unit_add(tc, test_diff_staged_and_unstaged_are_separate);
        unit_add(tc, test_diff_staged_on_unborn_branch_shows_new_files);
        unit_add(tc, test_diff_paths_limit_the_files_relative_to_the_directory);
        unit_add(tc, test_diff_replaces_invalid_utf8);
        unit_add(tc, test_diff_larger_than_the_cap_is_truncated_at_a_line);

        tc = unit_tcase(s, "git_commit");
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_commit_with_nothing_to_commit_is_conflict);
        unit_add(tc, test_second_commit_has_first_as_parent_and_log_is_newest_first);
        unit_add(tc, test_log_of_unborn_branch_is_empty_and_unknown_ref_not_found);
        unit_add(tc, test_commit_all_stages_new_and_deleted_files_but_not_ignored);
        unit_add(tc, test_commit_paths_stage_only_those);
        unit_add(tc, test_commit_with_all_false_commits_only_the_index);
        unit_add(tc, test_commit_author_from_params_else_repository_config);

        tc = unit_tcase(s, "git_errors");
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_not_a_repository_is_not_found);
        unit_add(tc, test_bad_params_are_invalid_argument);

        tc = unit_tcase(s, "git_discovery");
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_repository_is_discovered_from_a_subdirectory);
        unit_add(tc, test_dotdot_never_leaves_the_root);
        unit_add(tc, test_planted_symlinks_stay_inside_the_root);
        unit_add(tc, test_git_file_pointing_outside_the_root_is_refused);

        /* the same through the path resolver used where openat2 is missing */
        tc = unit_tcase(s, "git_discovery_fallback");
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, force_fallback, unforce_fallback);
        unit_add(tc, test_repository_is_discovered_from_a_subdirectory);
        unit_add(tc, test_dotdot_never_leaves_the_root);
        unit_add(tc, test_planted_symlinks_stay_inside_the_root);
        unit_add(tc, test_git_file_pointing_outside_the_root_is_refused);
        return s;
}
