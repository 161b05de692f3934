/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Repositories for sandboxes (repo.h).  nsboxd runs this on the host, so what the user names is
 * checked before libgit2 sees it: a relative path or an unknown scheme could make libgit2 clone
 * whatever nsboxd's working directory holds, or pick a transport nobody asked for. */
#include "repo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <git2.h>

#include "util.h"

#define COMMIT_SPEC_MAX 1024 /* bytes of a --commit argument */
#define SHOWN_MAX 256        /* bytes of a user's string quoted in a message */
#define GIT_MESSAGE_MAX 512

#define DEFINE_FREEP(type, fn) \
        static inline void fn##p(type **p) { fn(*p); }
DEFINE_FREEP(git_repository, git_repository_free)
DEFINE_FREEP(git_object, git_object_free)
DEFINE_FREEP(git_tree, git_tree_free)
DEFINE_FREEP(git_odb, git_odb_free)

/* Initialized once and never shut down, as in tools/git.c: nsboxd keeps libgit2's global state
 * for its whole life, and a test's own init and shutdown stay balanced around it. */
static pthread_once_t libgit2_once = PTHREAD_ONCE_INIT;
static void libgit2_init_once(void) { git_libgit2_init(); }
static void libgit2_setup(void) { pthread_once(&libgit2_once, libgit2_init_once); }

static const char *const network_schemes[] = { "https://", "http://", "git://", "ssh://", "git+ssh://", "ssh+git://" };

/* ---- errors ---- */

/* A message without errno text (nsbox_err would add "Invalid argument"), returning ret. */
static int failf(nsbox_error *err, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(nsbox_error *err, int ret, const char *fmt, ...)
{
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&msg, fmt, ap);
        va_end(ap);
        nsbox_err(err, 0, "%s", n >= 0 ? msg : "out of memory while reporting an error");
        return ret;
}

/* libgit2's last error on one line, without its final full stop. */
static void git_message(char *buf, size_t size)
{
        const git_error *ge = git_error_last();
        snprintf(buf, size, "%s", ge && ge->message ? ge->message : "unknown libgit2 error");
        for (char *p = buf; *p; p++)
                if (*p == '\n' || *p == '\r' || *p == '\t')
                        *p = ' ';
        size_t n = strlen(buf);
        while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '.'))
                buf[--n] = '\0';
}

static int git_errno(int gerr)
{
        switch (gerr) {
        case GIT_ENOTFOUND:
                return ENOENT;
        case GIT_EEXISTS:
                return EEXIST;
        case GIT_EINVALIDSPEC:
        case GIT_EAMBIGUOUS:
                return EINVAL;
        case GIT_EAUTH:
        case GIT_ECERTIFICATE:
        case GIT_EOWNER:
                return EACCES;
        case GIT_EUSER:
                return ECANCELED;
        default:
                return EIO;
        }
}

/* "clone 'URL': <libgit2 message>" and a negative errno for gerr. */
static int fail_git(nsbox_error *err, int gerr, const char *url)
{
        char msg[GIT_MESSAGE_MAX];
        git_message(msg, sizeof(msg));
        return failf(err, -git_errno(gerr), "clone '%s': %s", url, msg);
}

/* Add to err's message that the partial clone is still there: the next attempt would find it. */
static void note_leftover(nsbox_error *err, const char *name, int r)
{
        char *full = NULL;
        if (!err || !err->msg)
                return;
        if (asprintf(&full, "%s; could not remove '%s': %s", err->msg, name, strerror(-r)) < 0)
                return;
        free(err->msg);
        err->msg = full;
}

/* ---- classification ---- */

static bool has_control(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return true;
        return false;
}

static bool starts_with(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int bad_spec(const char *spec, nsbox_error *err)
{
        size_t n = strnlen(spec, SHOWN_MAX + 1);
        return failf(err, -EINVAL, "repository '%.*s%s': expected an absolute path, a file:// URL or a network URL",
                     (int)(n > SHOWN_MAX ? SHOWN_MAX : n), spec, n > SHOWN_MAX ? "..." : "");
}

static int hex_value(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* The path of "file:///p" or "file://localhost/p", %XX decoded as libgit2 decodes it; -EINVAL
 * for another host, a bad escape, or a decoded NUL or control character. */
static int file_url_path(const char *url, char **ret)
{
        const char *p = url + strlen("file://");
        if (starts_with(p, "localhost/"))
                p += strlen("localhost");
        if (*p != '/')
                return -EINVAL;
        _cleanup_free_ char *path = malloc(strlen(p) + 1);
        if (!path)
                return -ENOMEM;
        size_t n = 0;
        while (*p) {
                unsigned char c = (unsigned char)*p++;
                if (c == '%') {
                        int hi = hex_value(p[0]), lo = hi < 0 ? -1 : hex_value(p[1]);
                        if (lo < 0)
                                return -EINVAL;
                        c = (unsigned char)(hi << 4 | lo);
                        p += 2;
                        if (c < 0x20 || c == 0x7f)
                                return -EINVAL;
                }
                path[n++] = (char)c;
        }
        path[n] = '\0';
        *ret = steal_pointer(&path);
        return 0;
}

/* scheme://host... with a host that is there and cannot be read as an option. */
static bool is_network_url(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(network_schemes); i++) {
                if (!starts_with(s, network_schemes[i]))
                        continue;
                const char *host = s + strlen(network_schemes[i]);
                return *host && *host != '/' && *host != '-';
        }
        return false;
}

/* user@host:path as git and ssh read it: no slash before the colon, none of the parts empty. */
static bool is_scp_like(const char *s)
{
        const char *at = strchr(s, '@');
        if (!at || at == s || at[1] == '-' || memchr(s, ':', (size_t)(at - s)))
                return false;
        const char *colon = strchr(at + 1, ':');
        if (!colon || colon == at + 1 || colon[1] == '\0' || memchr(s, '/', (size_t)(colon - s)))
                return false;
        for (const char *p = s; p < colon; p++)
                if (*p == ' ')
                        return false;
        return true;
}

/* The real path of a directory holding a repository that libgit2 opens, or an error naming spec. */
static int local_repository(const char *spec, const char *path, char **ret, nsbox_error *err)
{
        _cleanup_free_ char *real = realpath(path, NULL);
        if (!real)
                return nsbox_err(err, errno, "repository '%s'", spec);
        struct stat st;
        if (stat(real, &st) < 0)
                return nsbox_err(err, errno, "repository '%s'", spec);
        if (!S_ISDIR(st.st_mode))
                return nsbox_err(err, ENOTDIR, "repository '%s'", spec);

        libgit2_setup();
        git_repository *repo = NULL;
        int g = git_repository_open_ext(&repo, real, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL);
        if (g == 0) {
                git_repository_free(repo);
                *ret = steal_pointer(&real);
                return 0;
        }
        /* libgit2 1.5 reports its ownership check as a missing safe.directory setting. */
        const git_error *ge = git_error_last();
        if (g == GIT_EOWNER || (ge && ge->klass == GIT_ERROR_CONFIG && st.st_uid != geteuid()))
                return failf(err, -EACCES,
                             "repository '%s': owned by uid %u, and libgit2 opens only repositories of the user it runs as (uid %u)",
                             spec, (unsigned)st.st_uid, (unsigned)geteuid());
        if (g == GIT_ENOTFOUND)
                return failf(err, -EINVAL, "repository '%s': not a git repository", spec);
        char msg[GIT_MESSAGE_MAX];
        git_message(msg, sizeof(msg));
        return failf(err, -git_errno(g), "repository '%s': %s", spec, msg);
}

int nsbox_repo_classify(const char *spec, nsbox_repo_kind *ret_kind, char **ret_url, nsbox_error *err)
{
        if (!spec)
                return bad_spec("", err);
        if (!*spec || strnlen(spec, NSBOX_REPO_SPEC_MAX + 1) > NSBOX_REPO_SPEC_MAX || has_control(spec))
                return bad_spec(spec, err);

        if (spec[0] == '/' || starts_with(spec, "file://")) {
                _cleanup_free_ char *decoded = NULL;
                if (spec[0] != '/') {
                        int r = file_url_path(spec, &decoded);
                        if (r == -ENOMEM)
                                return nsbox_err(err, ENOMEM, "repository '%s'", spec);
                        if (r < 0)
                                return bad_spec(spec, err);
                }
                char *real = NULL;
                int r = local_repository(spec, decoded ? decoded : spec, &real, err);
                if (r < 0)
                        return r;
                *ret_kind = NSBOX_REPO_LOCAL;
                *ret_url = real;
                return 0;
        }

        if (!is_network_url(spec) && !is_scp_like(spec))
                return bad_spec(spec, err);
        char *url = strdup(spec);
        if (!url)
                return nsbox_err(err, ENOMEM, "repository '%s'", spec);
        *ret_kind = NSBOX_REPO_NETWORK;
        *ret_url = url;
        return 0;
}

/* ---- removing a failed clone ---- */

/* One directory on the way down: how to recognize it from below, and its subdirectories. */
typedef struct rm_level {
        dev_t dev;
        ino_t ino;
        char **subdirs; /* still to remove, from next on */
        size_t next;
} rm_level;

/* Unlink everything in fd but directories, and collect those. */
static int rm_level_enter(int fd, rm_level *level)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        *level = (rm_level){ .dev = st.st_dev, .ino = st.st_ino };

        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        DIR *d = fdopendir(dfd);
        if (!d) {
                int r = -errno;
                close(dfd);
                return r;
        }
        int r = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        r = -errno;
                        break;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                bool is_dir = de->d_type == DT_DIR;
                if (de->d_type == DT_UNKNOWN) {
                        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                r = -errno;
                                break;
                        }
                        is_dir = S_ISDIR(st.st_mode);
                }
                if (is_dir)
                        r = strv_push(&level->subdirs, strdup(de->d_name));
                else if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT)
                        r = -errno;
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

/* Remove the directory name under parent_fd with everything in it, never following a symlink.
 * Two fds at most whatever the depth (a checkout nests as deep as PATH_MAX lets it, past
 * RLIMIT_NOFILE): it climbs back through "..", checked to be the directory it came down from. */
static int remove_tree_at(int parent_fd, const char *name)
{
        _cleanup_close_ int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                if (errno != ENOTDIR && errno != ELOOP)
                        return -errno;
                return unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        }

        rm_level *levels = NULL;
        size_t depth = 0;
        bool enter = true; /* fd is a directory not yet entered */
        int r = 0;
        for (;;) {
                if (enter) {
                        rm_level *nl = realloc(levels, (depth + 1) * sizeof(*levels));
                        if (!nl) {
                                r = -ENOMEM;
                                break;
                        }
                        levels = nl;
                        r = rm_level_enter(fd, &levels[depth++]);
                        if (r < 0)
                                break;
                        enter = false;
                }
                rm_level *top = &levels[depth - 1];
                if (top->subdirs && top->subdirs[top->next]) {
                        int child = openat(fd, top->subdirs[top->next++], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (child < 0) {
                                r = -errno;
                                break;
                        }
                        close(fd);
                        fd = child;
                        enter = true;
                        continue;
                }
                /* top is empty now: remove it from its parent */
                if (depth == 1) {
                        r = unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
                        break;
                }
                int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (up < 0) {
                        r = -errno;
                        break;
                }
                close(fd);
                fd = up;
                strv_free(top->subdirs);
                depth--;
                top = &levels[depth - 1];
                struct stat st;
                if (fstat(fd, &st) < 0) {
                        r = -errno;
                        break;
                }
                if (st.st_dev != top->dev || st.st_ino != top->ino) {
                        r = -ESTALE; /* moved meanwhile: never remove from elsewhere */
                        break;
                }
                if (unlinkat(fd, top->subdirs[top->next - 1], AT_REMOVEDIR) < 0) {
                        r = -errno;
                        break;
                }
        }
        for (size_t i = 0; i < depth; i++)
                strv_free(levels[i].subdirs);
        free(levels);
        return r;
}

/* ---- the clone ---- */

/* The commit spec names in repo: as libgit2 resolves it, else as one of origin's branches (a
 * clone makes a local branch for the remote's HEAD only). */
static int resolve_commit(git_repository *repo, const char *url, const char *spec, git_object **ret, nsbox_error *err)
{
        _cleanup_(git_object_freep) git_object *obj = NULL;
        int g = git_revparse_single(&obj, repo, spec ? spec : "HEAD");
        if (g == GIT_ENOTFOUND && spec) {
                _cleanup_free_ char *remote = NULL;
                if (asprintf(&remote, "refs/remotes/origin/%s", spec) < 0)
                        return nsbox_err(err, ENOMEM, "clone '%s'", url);
                if (git_revparse_single(&obj, repo, remote) == 0)
                        g = 0;
        }
        if (g < 0 && !spec)
                return failf(err, -ENOENT, "clone '%s': the repository's HEAD names no commit", url);
        if (g == GIT_ENOTFOUND)
                return failf(err, -ENOENT, "commit '%s': not found in '%s'", spec, url);
        if (g < 0) {
                char msg[GIT_MESSAGE_MAX];
                git_message(msg, sizeof(msg));
                return failf(err, -git_errno(g), "commit '%s': %s", spec, msg);
        }
        if (git_object_peel(ret, obj, GIT_OBJECT_COMMIT) < 0)
                return failf(err, -EINVAL, "commit '%s': is not a commit", spec ? spec : "HEAD");
        return 0;
}

/* origin, for exactly the URL that was classified: url.<base>.insteadOf in nsboxd's git
 * configuration could send the clone to another host or to a local path.  (Skipping it also keeps
 * libgit2 1.5 from leaking a PCRE2 match block per configuration entry, libgit2#6382.) */
static int create_origin(git_remote **ret, git_repository *repo, const char *name, const char *url, void *payload)
{
        (void)payload;
        git_remote_create_options o;
        int g = git_remote_create_options_init(&o, GIT_REMOTE_CREATE_OPTIONS_VERSION);
        if (g < 0)
                return g;
        o.repository = repo;
        o.name = name;
        o.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF;
        return git_remote_create_with_opts(ret, url, &o);
}

/* ---- the checkout's size, before it is written ---- */

/* What a checkout costs on disk, counted from the objects' headers: a blob's size without
 * inflating it (a 512 MiB blob of zeros is a few hundred KiB in a pack), each file as often as the
 * trees name it, and a block per entry, so that a tree of millions of empty files counts too. */
#define ENTRY_COST 4096u

typedef struct checkout_budget {
        git_odb *odb;
        uint64_t bytes, max;
        int failed;           /* a libgit2 error reading a header */
        bool over;
} checkout_budget;

static uint64_t round_block(uint64_t n) { return (n + ENTRY_COST - 1) / ENTRY_COST * ENTRY_COST; }

/* Add the object's size (a tree's too: it is inflated whole to be walked) and an entry; false
 * once the budget is spent or a header cannot be read. */
static bool charge(checkout_budget *b, const git_oid *id, bool data)
{
        size_t len = 0;
        git_object_t type;
        int g = git_odb_read_header(&len, &type, b->odb, id);
        if (g < 0) {
                b->failed = g;
                return false;
        }
        b->bytes += ENTRY_COST + (data ? round_block(len) : len);
        if (b->bytes > b->max)
                b->over = true;
        return !b->over;
}

static int charge_entry(const char *root, const git_tree_entry *entry, void *payload)
{
        (void)root;
        checkout_budget *b = payload;
        switch (git_tree_entry_type(entry)) {
        case GIT_OBJECT_BLOB: /* a file or a symbolic link */
                return charge(b, git_tree_entry_id(entry), true) ? 0 : -1;
        case GIT_OBJECT_TREE: /* charged before the walk loads it */
                return charge(b, git_tree_entry_id(entry), false) ? 0 : -1;
        default: /* a submodule: not checked out */
                b->bytes += ENTRY_COST;
                return b->bytes > b->max ? (b->over = true, -1) : 0;
        }
}

static void human(uint64_t n, char *buf, size_t size)
{
        if (n >= (1ull << 30))
                snprintf(buf, size, "%.1f GiB", (double)n / (double)(1ull << 30));
        else if (n >= (1ull << 20))
                snprintf(buf, size, "%.1f MiB", (double)n / (double)(1ull << 20));
        else
                snprintf(buf, size, "%llu KiB", (unsigned long long)(n >> 10));
}

/* -EFBIG when checking target out would write more than max bytes, before anything is written. */
static int check_checkout_size(git_repository *repo, git_object *target, const char *url, uint64_t max, nsbox_error *err)
{
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        int g = git_repository_odb(&odb, repo);
        if (g < 0)
                return fail_git(err, g, url);
        checkout_budget b = { .odb = odb, .max = max };
        const git_oid *tree_id = git_commit_tree_id((const git_commit *)target);
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        if (charge(&b, tree_id, false)) {
                if ((g = git_tree_lookup(&tree, repo, tree_id)) < 0)
                        return fail_git(err, g, url);
                g = git_tree_walk(tree, GIT_TREEWALK_PRE, charge_entry, &b);
                if (g < 0 && !b.over && !b.failed)
                        return fail_git(err, g, url);
        }
        if (b.failed && !b.over)
                return fail_git(err, b.failed, url);
        if (b.over) {
                char limit[32];
                human(max, limit, sizeof(limit));
                char id[GIT_OID_HEXSZ + 1];
                git_oid_tostr(id, sizeof(id), git_object_id(target));
                return failf(err, -EFBIG,
                             "clone '%s': the files of commit %.12s take more than %s, the sandbox's disk limit (--disk); nothing was checked out",
                             url, id, limit);
        }
        return 0;
}

/* ---- progress ---- */

typedef struct progress_ctx {
        nsbox_repo_progress_fn fn;
        void *ud;
        nsbox_repo_progress last;
        uint64_t last_ns;
        bool any;
} progress_ctx;

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Pass p on: the first of a phase, the last (done == total), else at most every PROGRESS_MS. */
static void progress_report(progress_ctx *pc, nsbox_repo_progress p)
{
        if (!pc->fn)
                return;
        uint64_t now = mono_ns();
        bool first = !pc->any || pc->last.phase != p.phase;
        bool complete = p.total && p.done == p.total && pc->last.done != p.done;
        if (!first && !complete && now - pc->last_ns < (uint64_t)NSBOX_REPO_PROGRESS_MS * 1000000ull)
                return;
        pc->any = true;
        pc->last = p;
        pc->last_ns = now;
        pc->fn(&p, pc->ud);
}

static int on_transfer(const git_indexer_progress *st, void *payload)
{
        progress_report(payload, (nsbox_repo_progress){ .phase = NSBOX_REPO_FETCH, .done = st->received_objects,
                                                        .total = st->total_objects, .bytes = st->received_bytes });
        return 0;
}

static void on_checkout(const char *path, size_t done, size_t total, void *payload)
{
        (void)path;
        progress_report(payload, (nsbox_repo_progress){ .phase = NSBOX_REPO_CHECKOUT, .done = done, .total = total });
}

/* Clone source into the empty directory dir_fd and check commit out. */
static int clone_into(const char *source, const char *url, const char *commit, uint64_t max_bytes, int dir_fd,
                      progress_ctx *pc, char ret_commit[41], nsbox_error *err)
{
        /* libgit2 takes paths; this one is the directory just made, whatever happens to its name. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", dir_fd);

        git_clone_options opts;
        git_clone_options_init(&opts, GIT_CLONE_OPTIONS_VERSION);
        /* Nothing is written to the work tree before the commit is known to be one. */
        opts.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;
        /* The source belongs to someone else: its objects are copied, never shared as inodes. */
        opts.local = GIT_CLONE_LOCAL_NO_LINKS;
        opts.remote_cb = create_origin;
        if (pc->fn) {
                opts.fetch_opts.callbacks.transfer_progress = on_transfer;
                opts.fetch_opts.callbacks.payload = pc;
        }
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        int g = git_clone(&repo, source, path, &opts);
        if (g < 0)
                return fail_git(err, g, url);

        _cleanup_(git_object_freep) git_object *target = NULL;
        int r = resolve_commit(repo, url, commit, &target, err);
        if (r < 0)
                return r;
        if (max_bytes && (r = check_checkout_size(repo, target, url, max_bytes, err)) < 0)
                return r;
        git_checkout_options co;
        git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
        co.checkout_strategy = GIT_CHECKOUT_FORCE;
        if (pc->fn) {
                co.progress_cb = on_checkout;
                co.progress_payload = pc;
        }
        g = git_checkout_tree(repo, target, &co);
        if (g < 0)
                return fail_git(err, g, url);
        const git_oid *id = git_object_id(target);
        g = git_repository_set_head_detached(repo, id);
        if (g < 0)
                return fail_git(err, g, url);
        git_oid_tostr(ret_commit, 41, id);
        return 0;
}

int nsbox_repo_worker_limits(uint64_t max_bytes, nsbox_error *err)
{
        libgit2_setup();
        /* packs mapped in windows of 32 MiB, at most 256 MiB of them, and a small object cache:
         * what libgit2 holds beyond the object it inflates stays small */
        if (git_libgit2_opts(GIT_OPT_SET_MWINDOW_SIZE, (size_t)32 << 20) < 0 ||
            git_libgit2_opts(GIT_OPT_SET_MWINDOW_MAPPED_LIMIT, (size_t)256 << 20) < 0 ||
            git_libgit2_opts(GIT_OPT_SET_CACHE_MAX_SIZE, (ssize_t)32 << 20) < 0)
                return failf(err, -EIO, "configure libgit2 for the clone");
        /* a blob is inflated whole to be checked out, and none may be larger than max_bytes: the
         * address space of now, that and some room for libgit2 */
        _cleanup_free_ char *statm = NULL;
        unsigned long long pages = 0;
        if (read_file_at(AT_FDCWD, "/proc/self/statm", 0, 4096, &statm, NULL) < 0 || sscanf(statm, "%llu", &pages) != 1)
                return failf(err, -EIO, "read the clone worker's size from /proc/self/statm");
        uint64_t now = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = now + max_bytes + NSBOX_REPO_WORKER_ROOM;
        if (setrlimit(RLIMIT_AS, &rl) < 0)
                return nsbox_err(err, errno, "bound the clone worker's memory");
        return 0;
}

int nsbox_repo_commit_check(const char *commit, nsbox_error *err)
{
        /* no id, branch or tag starts with '-' (git check-ref-format): one that does would be
         * read as an option by the git that clones a network URL inside the sandbox */
        if (*commit && *commit != '-' && strnlen(commit, COMMIT_SPEC_MAX + 1) <= COMMIT_SPEC_MAX && !has_control(commit))
                return 0;
        size_t n = strnlen(commit, SHOWN_MAX + 1);
        return failf(err, -EINVAL, "commit '%.*s%s': expected a commit id, a branch or a tag", (int)(n > SHOWN_MAX ? SHOWN_MAX : n), commit,
                     n > SHOWN_MAX ? "..." : "");
}

int nsbox_repo_clone(const char *url, const char *commit, bool allow_network, uint64_t max_bytes, int dst_parent_fd,
                     const char *dst_name, char ret_commit[41], nsbox_error *err)
{
        return nsbox_repo_clone_progress(url, commit, allow_network, max_bytes, dst_parent_fd, dst_name, NULL, NULL, ret_commit, err);
}

int nsbox_repo_clone_progress(const char *url, const char *commit, bool allow_network, uint64_t max_bytes, int dst_parent_fd,
                              const char *dst_name, nsbox_repo_progress_fn progress, void *userdata, char ret_commit[41],
                              nsbox_error *err)
{
        if (!url)
                return bad_spec("", err);
        if (!dst_name || !*dst_name || strchr(dst_name, '/') || strcmp(dst_name, ".") == 0 ||
            strcmp(dst_name, "..") == 0 || strlen(dst_name) > NAME_MAX || has_control(dst_name))
                return failf(err, -EINVAL, "clone '%s': the destination must be one path component", url);
        int r = commit ? nsbox_repo_commit_check(commit, err) : 0;
        if (r < 0)
                return r;

        nsbox_repo_kind kind;
        _cleanup_free_ char *source = NULL;
        r = nsbox_repo_classify(url, &kind, &source, err);
        if (r < 0)
                return r;
        if (kind == NSBOX_REPO_NETWORK && !allow_network)
                return failf(err, -EPERM, "repository '%s' needs network access; the sandbox's network is 'none'", url);

        /* Made here, so it is ours to remove on failure and a directory already there is never
         * written into or removed. */
        if (mkdirat(dst_parent_fd, dst_name, 0755) < 0)
                return nsbox_err(err, errno, "clone '%s': create '%s'", url, dst_name);
        char id[41];
        _cleanup_close_ int dir_fd = openat(dst_parent_fd, dst_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir_fd < 0)
                r = nsbox_err(err, errno, "clone '%s': open '%s'", url, dst_name);
        else
                r = clone_into(source, url, commit, max_bytes, dir_fd, &(progress_ctx){ .fn = progress, .ud = userdata }, id, err);
        if (r < 0) {
                int rr = remove_tree_at(dst_parent_fd, dst_name);
                if (rr < 0)
                        note_leftover(err, dst_name, rr);
                return r;
        }
        memcpy(ret_commit, id, sizeof(id));
        return 0;
}
