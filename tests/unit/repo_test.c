/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox create --repo ... --commit ...`: which sources a user may name, and the clone nsboxd
 * builds from one - the files of that commit, a detached HEAD, a clean tree, objects of its own,
 * and nothing left behind when it fails. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2.h>

#include "../../runtime/repo.h"
#include "../../runtime/util.h"
#include "unit.h"

/* Helpers return what failed and the assertions are macros, so that each result names the test
 * it is in (a result is named by the location of its last assertion). */

/* A temporary directory holding an empty home (libgit2's global and system configuration are
 * looked up there, so the host's ~/.gitconfig changes nothing), a source repository "src" with
 * three commits on master, a branch "feature" at the first and an annotated tag "v2" at the
 * second, and room for clones. */
typedef struct fixture {
        char base[64];
        char home[96];
        char src[96];
        int base_fd;
        char ids[3][GIT_OID_HEXSZ + 1]; /* oldest first */
        char tree2[GIT_OID_HEXSZ + 1];  /* the second commit's tree */
        char blob_a[GIT_OID_HEXSZ + 1]; /* a.txt */
} fixture;

static const int config_levels[] = { GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_GLOBAL,
                                     GIT_CONFIG_LEVEL_PROGRAMDATA };

/* path, content pairs, NULL-terminated: each commit holds the files of the one before it and one more */
static const char *const commit_files[3][9] = {
        { "a.txt", "one\n", "dir/inner.txt", "inner\n", NULL },
        { "a.txt", "one\n", "dir/inner.txt", "inner\n", "b.txt", "two\n", NULL },
        { "a.txt", "one\n", "dir/inner.txt", "inner\n", "b.txt", "two\n", "c.txt", "three\n", NULL },
};

/* Commit files (path, content pairs, NULL-terminated; a content of NULL is a blob id that exists
 * nowhere, given in missing) on HEAD's branch. */
static int commit_tree(git_repository *repo, const char *const *files, const git_oid *missing, git_oid *ret,
                       git_oid *ret_tree)
{
        git_index *index = NULL;
        git_signature *sig = NULL;
        git_tree *tree = NULL;
        git_commit *parent = NULL;
        git_oid tree_id;
        int g = git_index_new(&index);
        for (size_t i = 0; g == 0 && files[i]; i += 2) {
                git_index_entry e = { .mode = GIT_FILEMODE_BLOB, .path = files[i] };
                if (files[i + 1])
                        g = git_blob_create_from_buffer(&e.id, repo, files[i + 1], strlen(files[i + 1]));
                else
                        e.id = *missing;
                if (g == 0)
                        g = git_index_add(index, &e);
        }
        if (g == 0)
                g = git_index_write_tree_to(&tree_id, index, repo);
        if (g == 0)
                g = git_tree_lookup(&tree, repo, &tree_id);
        if (g == 0)
                g = git_signature_new(&sig, "Test", "test@example.com", 1700000000, 0);
        git_oid head;
        bool has_parent = g == 0 && git_reference_name_to_id(&head, repo, "HEAD") == 0;
        if (g == 0 && has_parent)
                g = git_commit_lookup(&parent, repo, &head);
        if (g == 0) {
                const git_commit *parents[] = { parent };
                g = git_commit_create(ret, repo, "HEAD", sig, sig, NULL, "commit\n", tree, has_parent ? 1 : 0, parents);
        }
        if (g == 0 && ret_tree)
                *ret_tree = tree_id;
        git_commit_free(parent);
        git_tree_free(tree);
        git_signature_free(sig);
        git_index_free(index);
        return g;
}

/* The source repository at path: three commits, a branch and a tag; its work tree (unless bare)
 * at the last commit.  0 or a libgit2 error. */
static int make_source(fixture *f, const char *path, bool bare)
{
        git_repository *repo = NULL;
        git_object *first = NULL, *second = NULL;
        git_reference *branch = NULL;
        git_signature *sig = NULL;
        git_oid id, tree, tag;
        int g = git_repository_init(&repo, path, bare);
        for (size_t i = 0; g == 0 && i < 3; i++) {
                g = commit_tree(repo, commit_files[i], NULL, &id, &tree);
                git_oid_tostr(f->ids[i], sizeof(f->ids[i]), &id);
                if (i == 1)
                        git_oid_tostr(f->tree2, sizeof(f->tree2), &tree);
        }
        if (g == 0)
                g = git_revparse_single(&first, repo, f->ids[0]);
        if (g == 0)
                g = git_revparse_single(&second, repo, f->ids[1]);
        if (g == 0)
                g = git_branch_create(&branch, repo, "feature", (git_commit *)first, 0);
        if (g == 0)
                g = git_signature_new(&sig, "Test", "test@example.com", 1700000000, 0);
        if (g == 0)
                g = git_tag_create(&tag, repo, "v2", second, sig, "second\n", 0);
        if (g == 0)
                g = git_blob_create_from_buffer(&id, repo, "one\n", 4);
        if (g == 0)
                git_oid_tostr(f->blob_a, sizeof(f->blob_a), &id);
        if (g == 0 && !bare) {
                git_checkout_options co;
                git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
                co.checkout_strategy = GIT_CHECKOUT_FORCE;
                g = git_checkout_head(repo, &co);
        }
        git_signature_free(sig);
        git_reference_free(branch);
        git_object_free(second);
        git_object_free(first);
        git_repository_free(repo);
        return g;
}

/* 0 or a message of what failed. */
static const char *fixture_open(fixture *f)
{
        snprintf(f->base, sizeof(f->base), "/tmp/nsbox-repo-test-XXXXXX");
        if (!mkdtemp(f->base))
                return "mkdtemp";
        f->base_fd = open(f->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
        snprintf(f->home, sizeof(f->home), "%s/home", f->base);
        snprintf(f->src, sizeof(f->src), "%s/src", f->base);
        if (f->base_fd < 0 || mkdir(f->home, 0755) < 0)
                return "home";
        git_libgit2_init();
        for (size_t i = 0; i < ARRAY_SIZE(config_levels); i++)
                if (git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, config_levels[i], f->home) < 0)
                        return "libgit2 search path";
        return make_source(f, f->src, false) == 0 ? NULL : git_error_last()->message;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)st;
        (void)ftw;
        return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* 0 or an errno. */
static int fixture_close(fixture *f)
{
        for (size_t i = 0; i < ARRAY_SIZE(config_levels); i++)
                git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, config_levels[i], NULL);
        git_libgit2_shutdown();
        close(f->base_fd);
        return nftw(f->base, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : errno;
}

#define FIXTURE_OPEN(f)                                                                      \
        do {                                                                                 \
                const char *_fo = fixture_open(f);                                           \
                ck_assert_msg(_fo == NULL, "set up '%s': %s", (f)->base, _fo);               \
        } while (0)

#define FIXTURE_CLOSE(f)                                                                     \
        do {                                                                                 \
                int _fc = fixture_close(f);                                                  \
                ck_assert_msg(_fc == 0, "remove '%s': %s", (f)->base, strerror(_fc));        \
        } while (0)

static bool exists_at(int dirfd, const char *name)
{
        struct stat st;
        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The contents of base/rel, at most 255 bytes, "" if unreadable. */
static const char *file_text(const fixture *f, const char *rel, char buf[256])
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", f->base, rel);
        buf[0] = '\0';
        FILE *fp = fopen(path, "re");
        if (!fp)
                return buf;
        size_t n = fread(buf, 1, 255, fp);
        buf[n] = '\0';
        fclose(fp);
        return buf;
}

/* The clone base/name has each of the commit's files with its content and no other top-level
 * file of the source's history, HEAD detached at want, and git status shows nothing. */
#define ASSERT_CHECKED_OUT(f, name, commit_index)                                                  \
        do {                                                                                       \
                const char *const *_files = commit_files[(commit_index)];                          \
                char _buf[256], _rel[PATH_MAX];                                                    \
                for (size_t _i = 0; _files[_i]; _i += 2) {                                         \
                        snprintf(_rel, sizeof(_rel), "%s/%s", (name), _files[_i]);                 \
                        ck_assert_str_eq(file_text((f), _rel, _buf), _files[_i + 1]);              \
                }                                                                                  \
                for (size_t _c = (commit_index) + 1; _c < 3; _c++) {                               \
                        snprintf(_rel, sizeof(_rel), "%s/%s", (name), commit_files[_c][2 * _c + 2]); \
                        ck_assert_msg(!exists_at((f)->base_fd, _rel), "'%s' is there", _rel);      \
                }                                                                                  \
                char _path[PATH_MAX];                                                              \
                snprintf(_path, sizeof(_path), "%s/%s", (f)->base, (name));                        \
                git_repository *_repo = NULL;                                                      \
                ck_assert_int_eq(git_repository_open(&_repo, _path), 0);                           \
                ck_assert_int_eq(git_repository_head_detached(_repo), 1);                          \
                git_oid _head;                                                                     \
                ck_assert_int_eq(git_reference_name_to_id(&_head, _repo, "HEAD"), 0);              \
                char _hex[GIT_OID_HEXSZ + 1];                                                      \
                ck_assert_str_eq(git_oid_tostr(_hex, sizeof(_hex), &_head), (f)->ids[(commit_index)]); \
                git_status_options _so;                                                            \
                git_status_options_init(&_so, GIT_STATUS_OPTIONS_VERSION);                         \
                _so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED | GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS; \
                git_status_list *_st = NULL;                                                       \
                ck_assert_int_eq(git_status_list_new(&_st, _repo, &_so), 0);                       \
                size_t _changes = git_status_list_entrycount(_st);                                 \
                git_status_list_free(_st);                                                         \
                git_repository_free(_repo);                                                        \
                ck_assert_uint_eq(_changes, 0);                                                    \
        } while (0)

/* The same commit fits a bound of max bytes. */
#define ASSERT_CLONE_WITHIN(f, max)                                                                \
        do {                                                                                       \
                nsbox_error _e = { 0 };                                                            \
                char _id[41] = "untouched";                                                        \
                UNIT_ASSERT_OK(nsbox_repo_clone((f)->src, (f)->ids[2], false, (max), (f)->base_fd, "fits", _id, &_e), &_e); \
                ASSERT_CHECKED_OUT((f), "fits", 2);                                                \
        } while (0)

/* Clone url at commit into base/name, without network, expecting success and want's id. */
#define ASSERT_CLONED(f, url, commit, name, commit_index)                                         \
        do {                                                                                       \
                nsbox_error _e = { 0 };                                                            \
                char _id[41] = "untouched";                                                        \
                UNIT_ASSERT_OK(nsbox_repo_clone((url), (commit), false, 0, (f)->base_fd, (name), _id, &_e), &_e); \
                ck_assert_str_eq(_id, (f)->ids[(commit_index)]);                                   \
                ASSERT_CHECKED_OUT((f), (name), (commit_index));                                   \
        } while (0)

/* The clone fails with ret and a message holding each needle, and leaves no base/name. */
#define ASSERT_CLONE_FAILS(f, url, commit, name, ret, ...)                                         \
        do {                                                                                       \
                nsbox_error _e = { 0 };                                                            \
                char _id[41] = "untouched";                                                        \
                int _r = nsbox_repo_clone((url), (commit), false, 0, (f)->base_fd, (name), _id, &_e); \
                ck_assert_int_eq(_r, (ret));                                                       \
                UNIT_ASSERT_ERROR(&_e, __VA_ARGS__);                                               \
                ck_assert_str_eq(_id, "untouched");                                                \
                ck_assert_msg(!exists_at((f)->base_fd, (name)), "'%s' was left behind", (name));   \
        } while (0)

/* classify(spec) fails with ret and a message holding each needle; its results are untouched. */
#define ASSERT_CLASSIFY_FAILS(spec, ret, ...)                                                      \
        do {                                                                                       \
                nsbox_error _e = { 0 };                                                            \
                nsbox_repo_kind _k = _NSBOX_REPO_KIND_MAX;                                         \
                char *_u = (char *)"untouched";                                                    \
                ck_assert_int_eq(nsbox_repo_classify((spec), &_k, &_u, &_e), (ret));               \
                UNIT_ASSERT_ERROR(&_e, __VA_ARGS__);                                               \
                ck_assert_int_eq(_k, _NSBOX_REPO_KIND_MAX);                                        \
                ck_assert_str_eq(_u, "untouched");                                                 \
        } while (0)

#define BAD_SPEC "expected an absolute path, a file:// URL or a network URL"

/* ---- what a user may name ---- */

START_TEST(test_local_path_is_local_under_its_real_path)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char link[128], slashed[128];
        snprintf(link, sizeof(link), "%s/link", f.base);
        snprintf(slashed, sizeof(slashed), "%s/./src/", f.base);
        ck_assert_int_eq(symlink("src", link), 0);
        const char *specs[] = { f.src, link, slashed };
        for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
                nsbox_error e = { 0 };
                nsbox_repo_kind kind = _NSBOX_REPO_KIND_MAX;
                char *url = NULL;
                UNIT_ASSERT_OK(nsbox_repo_classify(specs[i], &kind, &url, &e), &e);
                ck_assert_int_eq(kind, NSBOX_REPO_LOCAL);
                ck_assert_str_eq(url, f.src);
                free(url);
        }
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_file_url_is_local_and_decoded)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char spaced[128], url1[160], url2[160];
        snprintf(spaced, sizeof(spaced), "%s/my repo", f.base);
        ck_assert_int_eq(rename(f.src, spaced), 0);
        snprintf(url1, sizeof(url1), "file://%s/my%%20repo", f.base);
        snprintf(url2, sizeof(url2), "file://localhost%s/my%%20repo", f.base);
        const char *specs[] = { url1, url2 };
        for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
                nsbox_error e = { 0 };
                nsbox_repo_kind kind = _NSBOX_REPO_KIND_MAX;
                char *url = NULL;
                UNIT_ASSERT_OK(nsbox_repo_classify(specs[i], &kind, &url, &e), &e);
                ck_assert_int_eq(kind, NSBOX_REPO_LOCAL);
                ck_assert_str_eq(url, spaced);
                free(url);
        }
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_bare_repository_is_local)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char bare[128];
        snprintf(bare, sizeof(bare), "%s/bare.git", f.base);
        ck_assert_int_eq(make_source(&f, bare, true), 0);
        nsbox_error e = { 0 };
        nsbox_repo_kind kind = _NSBOX_REPO_KIND_MAX;
        char *url = NULL;
        UNIT_ASSERT_OK(nsbox_repo_classify(bare, &kind, &url, &e), &e);
        ck_assert_int_eq(kind, NSBOX_REPO_LOCAL);
        ck_assert_str_eq(url, bare);
        free(url);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_network_urls_are_kept_as_given)
{
        static const char *const specs[] = {
                "https://example.invalid/x.git", "http://example.invalid:8080/x", "git://example.invalid/x",
                "ssh://git@example.invalid/x.git", "git+ssh://example.invalid/x", "ssh+git://example.invalid/x",
                "git@example.invalid:owner/x.git", "me@host:x",
        };
        for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
                nsbox_error e = { 0 };
                nsbox_repo_kind kind = _NSBOX_REPO_KIND_MAX;
                char *url = NULL;
                UNIT_ASSERT_OK(nsbox_repo_classify(specs[i], &kind, &url, &e), &e);
                ck_assert_int_eq(kind, NSBOX_REPO_NETWORK);
                ck_assert_str_eq(url, specs[i]);
                free(url);
        }
}
END_TEST

START_TEST(test_relative_empty_and_unknown_forms_are_refused)
{
        static const char *const specs[] = {
                "repo", "./repo", "../repo", "~/repo", "ftp://x", "HTTPS://example.invalid/x", "https://", "https:///x",
                "ssh://-oProxyCommand=x/y", "file://otherhost/x", "file://relative", "file:///a%zz", "file:///a%0a",
                "host:path", "@host:path", "user@:path", "user@host:", "a/b@host:path", "user@-host:path",
                "a:b@host:path",
        };
        for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
                char want[128];
                snprintf(want, sizeof(want), "repository '%s': " BAD_SPEC, specs[i]);
                ASSERT_CLASSIFY_FAILS(specs[i], -EINVAL, want);
        }
        ASSERT_CLASSIFY_FAILS("", -EINVAL, "repository '': " BAD_SPEC);
        ASSERT_CLASSIFY_FAILS(NULL, -EINVAL, "repository '': " BAD_SPEC);
}
END_TEST

START_TEST(test_control_characters_and_long_specs_are_refused)
{
        ASSERT_CLASSIFY_FAILS("/tmp/a\nb", -EINVAL, "repository '/tmp/a?b': " BAD_SPEC);
        ASSERT_CLASSIFY_FAILS("https://example.invalid/\x1b[31mx", -EINVAL, BAD_SPEC);
        ASSERT_CLASSIFY_FAILS("/tmp/\x7f", -EINVAL, BAD_SPEC);

        char *spec = malloc(NSBOX_REPO_SPEC_MAX + 2);
        ck_assert_ptr_nonnull(spec);
        memset(spec, 'a', NSBOX_REPO_SPEC_MAX + 1);
        spec[0] = '/';
        spec[NSBOX_REPO_SPEC_MAX + 1] = '\0';
        nsbox_error e = { 0 };
        nsbox_repo_kind kind = _NSBOX_REPO_KIND_MAX;
        char *url = NULL;
        int r = nsbox_repo_classify(spec, &kind, &url, &e);
        free(spec);
        ck_assert_int_eq(r, -EINVAL);
        ck_assert_ptr_null(url);
        ck_assert_ptr_nonnull(e.msg);
        size_t shown = strlen(e.msg);
        UNIT_ASSERT_ERROR(&e, "aaa...': " BAD_SPEC);
        ck_assert_uint_lt(shown, 400);
}
END_TEST

START_TEST(test_missing_path_and_non_repository_are_named)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char missing[128], plain[128], inner[128], file[128], want[192];
        snprintf(missing, sizeof(missing), "%s/missing", f.base);
        snprintf(plain, sizeof(plain), "%s/plain", f.base);
        snprintf(inner, sizeof(inner), "%s/dir", f.src);
        snprintf(file, sizeof(file), "%s/a.txt", f.src);
        ck_assert_int_eq(mkdir(plain, 0755), 0);

        snprintf(want, sizeof(want), "repository '%s': No such file or directory", missing);
        ASSERT_CLASSIFY_FAILS(missing, -ENOENT, want);
        snprintf(want, sizeof(want), "repository 'file://%s': No such file or directory", missing);
        char url[160];
        snprintf(url, sizeof(url), "file://%s", missing);
        ASSERT_CLASSIFY_FAILS(url, -ENOENT, want);
        snprintf(want, sizeof(want), "repository '%s': not a git repository", plain);
        ASSERT_CLASSIFY_FAILS(plain, -EINVAL, want);
        /* a directory inside a work tree is not searched upward */
        snprintf(want, sizeof(want), "repository '%s': not a git repository", inner);
        ASSERT_CLASSIFY_FAILS(inner, -EINVAL, want);
        snprintf(want, sizeof(want), "repository '%s': Not a directory", file);
        ASSERT_CLASSIFY_FAILS(file, -ENOTDIR, want);
        FIXTURE_CLOSE(&f);
}
END_TEST

static int chown_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)st;
        (void)type;
        (void)ftw;
        return lchown(path, 4242, 4242);
}

/* libgit2 refuses a repository another user owns; nsboxd runs as the user it serves. */
START_TEST(test_repository_of_another_user_is_refused_by_name)
{
        fixture f;
        FIXTURE_OPEN(&f);
        nsbox_error e = { 0 };
        nsbox_repo_kind kind = _NSBOX_REPO_KIND_MAX;
        char *url = NULL;
        if (geteuid() == 0) {
                ck_assert_int_eq(nftw(f.src, chown_entry, 16, FTW_PHYS), 0);
                char want[192];
                snprintf(want, sizeof(want), "repository '%s': owned by uid 4242, and libgit2 opens only", f.src);
                ASSERT_CLASSIFY_FAILS(f.src, -EACCES, want, "(uid 0)");
                ASSERT_CLONE_FAILS(&f, f.src, NULL, "clone", -EACCES, want);
        } else {
                /* unprivileged: the user's own repository is the one that opens */
                UNIT_ASSERT_OK(nsbox_repo_classify(f.src, &kind, &url, &e), &e);
                ck_assert_int_eq(kind, NSBOX_REPO_LOCAL);
                free(url);
        }
        FIXTURE_CLOSE(&f);
}
END_TEST

/* ---- the clone ---- */

START_TEST(test_clone_at_middle_commit_by_full_id)
{
        fixture f;
        FIXTURE_OPEN(&f);
        ASSERT_CLONED(&f, f.src, f.ids[1], "clone", 1);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_clone_at_abbreviated_id)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char prefix[8];
        snprintf(prefix, sizeof(prefix), "%.7s", f.ids[1]);
        ASSERT_CLONED(&f, f.src, prefix, "clone", 1);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_clone_without_commit_gives_the_tip)
{
        fixture f;
        FIXTURE_OPEN(&f);
        ASSERT_CLONED(&f, f.src, NULL, "clone", 2);
        FIXTURE_CLOSE(&f);
}
END_TEST

typedef struct seen_progress {
        unsigned calls, checkouts;
        uint64_t last_done, last_total;
        bool phase_back; /* a fetch after the checkout began */
} seen_progress;

static void count_progress(const nsbox_repo_progress *p, void *ud)
{
        seen_progress *s = ud;
        s->calls++;
        if (p->phase == NSBOX_REPO_CHECKOUT) {
                s->checkouts++;
                s->last_done = p->done;
                s->last_total = p->total;
        } else if (s->checkouts) {
                s->phase_back = true;
        }
}

/* The checkout's files are counted to the last one, and the phases come in order. */
START_TEST(test_clone_reports_its_progress)
{
        fixture f;
        FIXTURE_OPEN(&f);
        seen_progress seen = { 0 };
        nsbox_error e = { 0 };
        char id[41];
        UNIT_ASSERT_OK(nsbox_repo_clone_progress(f.src, NULL, false, 0, f.base_fd, "clone", count_progress, &seen, id, &e), &e);
        ck_assert_str_eq(id, f.ids[2]);
        ck_assert_uint_ge(seen.checkouts, 1);
        ck_assert_uint_gt(seen.last_total, 0);
        ck_assert_uint_eq(seen.last_done, seen.last_total);
        ck_assert(!seen.phase_back);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_clone_at_tag_and_at_other_branch)
{
        fixture f;
        FIXTURE_OPEN(&f);
        ASSERT_CLONED(&f, f.src, "v2", "by-tag", 1);
        ASSERT_CLONED(&f, f.src, "feature", "by-branch", 0);
        ASSERT_CLONED(&f, f.src, "master~2", "by-revspec", 0);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_clone_from_file_url)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char url[128];
        snprintf(url, sizeof(url), "file://%s", f.src);
        ASSERT_CLONED(&f, url, f.ids[1], "clone", 1);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_clone_from_bare_repository)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char bare[128];
        snprintf(bare, sizeof(bare), "%s/bare.git", f.base);
        ck_assert_int_eq(make_source(&f, bare, true), 0);
        ASSERT_CLONED(&f, bare, f.ids[1], "clone", 1);
        FIXTURE_CLOSE(&f);
}
END_TEST

/* nsboxd's own git configuration cannot send the clone elsewhere than the source it checked. */
START_TEST(test_configured_url_rewrite_is_not_applied)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char gitconfig[128], text[512];
        snprintf(gitconfig, sizeof(gitconfig), "%s/.gitconfig", f.home);
        snprintf(text, sizeof(text), "[url \"%s\"]\n\tinsteadOf = %s\n", f.home, f.src);
        FILE *fp = fopen(gitconfig, "we");
        ck_assert_ptr_nonnull(fp);
        fputs(text, fp);
        ck_assert_int_eq(fclose(fp), 0);
        ASSERT_CLONED(&f, f.src, f.ids[1], "clone", 1);
        char path[128];
        snprintf(path, sizeof(path), "%s/clone", f.base);
        git_repository *repo = NULL;
        git_config *config = NULL;
        const char *url = NULL;
        ck_assert_int_eq(git_repository_open(&repo, path), 0);
        ck_assert_int_eq(git_repository_config_snapshot(&config, repo), 0);
        ck_assert_int_eq(git_config_get_string(&url, config, "remote.origin.url"), 0);
        snprintf(text, sizeof(text), "%s", url);
        git_config_free(config);
        git_repository_free(repo);
        ck_assert_str_eq(text, f.src);
        FIXTURE_CLOSE(&f);
}
END_TEST

/* Every loose object of the source is in the clone as a file of its own. */
START_TEST(test_clone_copies_objects_instead_of_hard_linking)
{
        fixture f;
        FIXTURE_OPEN(&f);
        ASSERT_CLONED(&f, f.src, NULL, "clone", 2);
        char objects[128];
        snprintf(objects, sizeof(objects), "%s/.git/objects", f.src);
        size_t compared = 0;
        for (int hi = 0; hi < 256; hi++) {
                char dir[160];
                snprintf(dir, sizeof(dir), "%s/%02x", objects, hi);
                DIR *d = opendir(dir);
                if (!d)
                        continue;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char src[PATH_MAX], dst[PATH_MAX];
                        snprintf(src, sizeof(src), "%s/%s", dir, de->d_name);
                        snprintf(dst, sizeof(dst), "%s/clone/.git/objects/%02x/%s", f.base, hi, de->d_name);
                        struct stat s, c;
                        ck_assert_int_eq(stat(src, &s), 0);
                        ck_assert_msg(stat(dst, &c) == 0, "'%s' is not in the clone", dst);
                        ck_assert_msg(c.st_ino != s.st_ino, "'%s' is the source's inode", dst);
                        ck_assert_uint_eq(c.st_nlink, 1);
                        ck_assert_uint_eq(s.st_nlink, 1);
                        compared++;
                }
                closedir(d);
        }
        ck_assert_uint_ge(compared, 10);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_unknown_commit_is_not_found_and_leaves_nothing)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char want[192];
        snprintf(want, sizeof(want), "commit 'deadbeef': not found in '%s'", f.src);
        ASSERT_CLONE_FAILS(&f, f.src, "deadbeef", "clone", -ENOENT, want);
        snprintf(want, sizeof(want), "commit 'no-such-branch': not found in '%s'", f.src);
        ASSERT_CLONE_FAILS(&f, f.src, "no-such-branch", "clone", -ENOENT, want);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_tree_or_blob_id_is_not_a_commit)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char want[192];
        snprintf(want, sizeof(want), "commit '%s': is not a commit", f.tree2);
        ASSERT_CLONE_FAILS(&f, f.src, f.tree2, "clone", -EINVAL, want);
        snprintf(want, sizeof(want), "commit '%s': is not a commit", f.blob_a);
        ASSERT_CLONE_FAILS(&f, f.src, f.blob_a, "clone", -EINVAL, want);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_bad_commit_specs_are_refused)
{
        fixture f;
        FIXTURE_OPEN(&f);
        ASSERT_CLONE_FAILS(&f, f.src, "", "clone", -EINVAL, "commit '': expected a commit id, a branch or a tag");
        ASSERT_CLONE_FAILS(&f, f.src, "ab\ncd", "clone", -EINVAL, "commit 'ab?cd': expected a commit id");
        ASSERT_CLONE_FAILS(&f, f.src, "--output=x", "clone", -EINVAL, "commit '--output=x': expected a commit id");
        FIXTURE_CLOSE(&f);
}
END_TEST

/* Refused before anything is resolved, created or contacted. */
START_TEST(test_network_url_without_network_is_refused)
{
        fixture f;
        FIXTURE_OPEN(&f);
        ASSERT_CLONE_FAILS(&f, "https://example.invalid/x.git", NULL, "clone", -EPERM,
                           "repository 'https://example.invalid/x.git' needs network access; the sandbox's network is 'none'");
        ASSERT_CLONE_FAILS(&f, "git@example.invalid:x.git", "abc1234", "clone", -EPERM,
                           "repository 'git@example.invalid:x.git' needs network access");
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_bad_sources_leave_nothing)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char missing[128], want[192];
        snprintf(missing, sizeof(missing), "%s/missing", f.base);
        ASSERT_CLONE_FAILS(&f, "src", NULL, "clone", -EINVAL, "repository 'src': " BAD_SPEC);
        ASSERT_CLONE_FAILS(&f, "ftp://x", NULL, "clone", -EINVAL, "repository 'ftp://x': " BAD_SPEC);
        ASSERT_CLONE_FAILS(&f, NULL, NULL, "clone", -EINVAL, BAD_SPEC);
        snprintf(want, sizeof(want), "repository '%s': No such file or directory", missing);
        ASSERT_CLONE_FAILS(&f, missing, NULL, "clone", -ENOENT, want);
        snprintf(want, sizeof(want), "repository '%s': not a git repository", f.home);
        ASSERT_CLONE_FAILS(&f, f.home, NULL, "clone", -EINVAL, want);
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_existing_destination_is_left_untouched)
{
        fixture f;
        FIXTURE_OPEN(&f);
        int fd = openat(f.base_fd, "home/keep", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "mine\n", 5), 5);
        close(fd);
        ck_assert_int_eq(symlinkat("home", f.base_fd, "link"), 0);
        ck_assert_int_eq(mkdirat(f.base_fd, "empty", 0700), 0);

        static const char *const names[] = { "home", "link", "empty" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                nsbox_error e = { 0 };
                char id[41] = "untouched", want[192];
                ck_assert_int_eq(nsbox_repo_clone(f.src, NULL, false, 0, f.base_fd, names[i], id, &e), -EEXIST);
                snprintf(want, sizeof(want), "clone '%s': create '%s': File exists", f.src, names[i]);
                UNIT_ASSERT_ERROR(&e, want);
                ck_assert_str_eq(id, "untouched");
        }
        char buf[256];
        ck_assert_str_eq(file_text(&f, "home/keep", buf), "mine\n");
        ck_assert_str_eq(file_text(&f, "link/keep", buf), "mine\n");
        struct stat st;
        ck_assert_int_eq(fstatat(f.base_fd, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
        ck_assert(S_ISLNK(st.st_mode));
        ck_assert_int_eq(fstatat(f.base_fd, "empty", &st, AT_SYMLINK_NOFOLLOW), 0);
        ck_assert(S_ISDIR(st.st_mode));
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert(!exists_at(f.base_fd, "empty/.git"));
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_destination_must_be_one_component)
{
        fixture f;
        FIXTURE_OPEN(&f);
        static const char *const names[] = { "", ".", "..", "home/clone", "a\nb", NULL };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                nsbox_error e = { 0 };
                char id[41] = "untouched", want[192];
                ck_assert_int_eq(nsbox_repo_clone(f.src, NULL, false, 0, f.base_fd, names[i], id, &e), -EINVAL);
                snprintf(want, sizeof(want), "clone '%s': the destination must be one path component", f.src);
                UNIT_ASSERT_ERROR(&e, want);
                ck_assert_str_eq(id, "untouched");
        }
        ck_assert(!exists_at(f.base_fd, "home/clone"));
        ck_assert(!exists_at(f.base_fd, "a\nb"));
        ck_assert(!exists_at(f.base_fd, "home/.git"));
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_empty_repository_has_no_commit_to_check_out)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char empty[128], want[192];
        snprintf(empty, sizeof(empty), "%s/empty", f.base);
        git_repository *repo = NULL;
        ck_assert_int_eq(git_repository_init(&repo, empty, false), 0);
        git_repository_free(repo);
        snprintf(want, sizeof(want), "clone '%s': the repository's HEAD names no commit", empty);
        ASSERT_CLONE_FAILS(&f, empty, NULL, "clone", -ENOENT, want);
        snprintf(want, sizeof(want), "commit 'master': not found in '%s'", empty);
        ASSERT_CLONE_FAILS(&f, empty, "master", "clone", -ENOENT, want);
        FIXTURE_CLOSE(&f);
}
END_TEST

/* The source opens but its branch names an object it lacks: the fetch fails, and nothing of the
 * clone stays. */
START_TEST(test_failed_fetch_leaves_nothing)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char ref[128], want[192];
        snprintf(ref, sizeof(ref), "%s/.git/refs/heads/master", f.src);
        FILE *fp = fopen(ref, "we");
        ck_assert_ptr_nonnull(fp);
        fputs("0123456789abcdef0123456789abcdef01234567\n", fp);
        ck_assert_int_eq(fclose(fp), 0);
        snprintf(want, sizeof(want), "clone '%s': ", f.src);
        nsbox_error e = { 0 };
        char id[41] = "untouched";
        ck_assert_int_lt(nsbox_repo_clone(f.src, f.ids[0], false, 0, f.base_fd, "clone", id, &e), 0);
        UNIT_ASSERT_ERROR(&e, want);
        ck_assert_str_eq(id, "untouched");
        ck_assert(!exists_at(f.base_fd, "clone"));
        FIXTURE_CLOSE(&f);
}
END_TEST

START_TEST(test_checkout_larger_than_the_bound_is_refused_before_writing)
{
        fixture f;
        FIXTURE_OPEN(&f);
        char want[192];
        snprintf(want, sizeof(want), "clone '%s': the files of commit ", f.src);
        nsbox_error e = { 0 };
        char id[41] = "untouched";
        /* two blocks: the root tree and one file fit, the rest does not */
        ck_assert_int_eq(nsbox_repo_clone(f.src, f.ids[2], false, 8192, f.base_fd, "clone", id, &e), -EFBIG);
        UNIT_ASSERT_ERROR(&e, want, " take more than 8 KiB, the sandbox's disk limit (--disk); nothing was checked out");
        ck_assert_str_eq(id, "untouched");
        ck_assert(!exists_at(f.base_fd, "clone"));
        ASSERT_CLONE_WITHIN(&f, 1 << 20);
        FIXTURE_CLOSE(&f);
}
END_TEST

/* A checkout that fails after writing a deep tree is removed whole, even with few fds to spare:
 * each level holds a file and the next level, and a blob missing from the source comes last. */
START_TEST(test_failed_checkout_of_deep_tree_leaves_nothing)
{
        enum { DEPTH = 300 };
        fixture f;
        FIXTURE_OPEN(&f);
        char broken[128];
        snprintf(broken, sizeof(broken), "%s/broken", f.base);
        git_repository *repo = NULL;
        ck_assert_int_eq(git_repository_init(&repo, broken, false), 0);

        char **files = calloc(2 * DEPTH + 3, sizeof(char *));
        ck_assert_ptr_nonnull(files);
        strbuf path;
        sb_init(&path, 0);
        for (size_t i = 0; i < DEPTH; i++) {
                ck_assert_int_eq(sb_append(&path, "d/", 2), 0);
                ck_assert_int_ge(asprintf(&files[2 * i], "%sf", path.buf), 0);
                files[2 * i + 1] = (char *)"level\n";
        }
        files[2 * DEPTH] = (char *)"zz-missing";
        sb_release(&path);
        git_oid missing, commit;
        ck_assert_int_eq(git_oid_fromstr(&missing, "0123456789abcdef0123456789abcdef01234567"), 0);
        ck_assert_int_eq(git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0), 0);
        int g = commit_tree(repo, (const char *const *)files, &missing, &commit, NULL);
        git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 1);
        for (size_t i = 0; i < DEPTH; i++)
                free(files[2 * i]);
        free(files);
        git_repository_free(repo);
        ck_assert_msg(g == 0, "commit: %s", git_error_last()->message);

        struct rlimit old, few;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
        few = old;
        few.rlim_cur = 64;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &few), 0);
        nsbox_error e = { 0 };
        char id[41] = "untouched";
        int r = nsbox_repo_clone(broken, NULL, false, 0, f.base_fd, "clone", id, &e);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        char want[192];
        snprintf(want, sizeof(want), "clone '%s': ", broken);
        ck_assert_int_lt(r, 0);
        UNIT_ASSERT_ERROR(&e, want, "0123456789abcdef0123456789abcdef01234567");
        ck_assert_str_eq(id, "untouched");
        ck_assert(!exists_at(f.base_fd, "clone"));
        FIXTURE_CLOSE(&f);
}
END_TEST

Suite *repo_suite(void)
{
        Suite *s = suite_create("repo");
        TCase *tc = unit_tcase(s, "repo_classify");
        unit_add(tc, test_local_path_is_local_under_its_real_path);
        unit_add(tc, test_file_url_is_local_and_decoded);
        unit_add(tc, test_bare_repository_is_local);
        unit_add(tc, test_network_urls_are_kept_as_given);
        unit_add(tc, test_relative_empty_and_unknown_forms_are_refused);
        unit_add(tc, test_control_characters_and_long_specs_are_refused);
        unit_add(tc, test_missing_path_and_non_repository_are_named);
        unit_add(tc, test_repository_of_another_user_is_refused_by_name);

        tc = unit_tcase(s, "repo_clone");
        /* clones of a small repository take milliseconds; the margin is for sanitizer builds */
        tcase_set_timeout(tc, 60);
        unit_add(tc, test_clone_at_middle_commit_by_full_id);
        unit_add(tc, test_clone_at_abbreviated_id);
        unit_add(tc, test_clone_without_commit_gives_the_tip);
        unit_add(tc, test_clone_reports_its_progress);
        unit_add(tc, test_clone_at_tag_and_at_other_branch);
        unit_add(tc, test_clone_from_file_url);
        unit_add(tc, test_clone_from_bare_repository);
        unit_add(tc, test_clone_copies_objects_instead_of_hard_linking);
        unit_add(tc, test_configured_url_rewrite_is_not_applied);
        unit_add(tc, test_unknown_commit_is_not_found_and_leaves_nothing);
        unit_add(tc, test_tree_or_blob_id_is_not_a_commit);
        unit_add(tc, test_bad_commit_specs_are_refused);
        unit_add(tc, test_network_url_without_network_is_refused);
        unit_add(tc, test_bad_sources_leave_nothing);
        unit_add(tc, test_existing_destination_is_left_untouched);
        unit_add(tc, test_destination_must_be_one_component);
        unit_add(tc, test_empty_repository_has_no_commit_to_check_out);
        unit_add(tc, test_failed_fetch_leaves_nothing);
        unit_add(tc, test_failed_checkout_of_deep_tree_leaves_nothing);
        unit_add(tc, test_checkout_larger_than_the_bound_is_refused_before_writing);
        return s;
}
