/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The layer store (store.h). */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy.h"
#include "json.h"
#include "treecopy.h"
#include "util.h"

#define META_MAX (1u << 20)
#define MAX_LAYERS 128 /* overlayfs takes 500 lower layers; a chain this deep is a mistake */

static const char *const subdirs[] = { "layers", "snapshots", "repos", "tmp", "images" };

static bool name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

int nsbox_snapshot_name_check(const char *name, nsbox_error *err)
{
        size_t n = name ? strlen(name) : 0;
        bool ok = n >= 1 && n <= NSBOX_SNAPSHOT_NAME_MAX && name_char(name[0]);
        for (size_t i = 0; ok && i < n; i++)
                ok = name_char(name[i]) || name[i] == '.' || name[i] == '_' || name[i] == '-';
        if (!ok)
                return nsbox_err(err, 0, "invalid snapshot name '%.200s': expected 1-%d of [A-Za-z0-9._-], starting with a letter or digit",
                                 name ? name : "", NSBOX_SNAPSHOT_NAME_MAX);
        return 0;
}

static bool layer_id_ok(const char *id)
{
        if (!id || strlen(id) != NSBOX_LAYER_ID_LEN)
                return false;
        for (const char *p = id; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

static int random_hex(char *out, size_t bytes)
{
        unsigned char rnd[32];
        if (bytes > sizeof(rnd) || getrandom(rnd, bytes, 0) != (ssize_t)bytes)
                return -EIO;
        for (size_t i = 0; i < bytes; i++)
                snprintf(out + 2 * i, 3, "%02x", rnd[i]);
        return 0;
}

/* ---- opening ------------------------------------------------------------------------------ */

static int mkdir_p(const char *path, mode_t mode)
{
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static int store_path(char **ret, nsbox_error *err)
{
        const char *env = getenv("NSBOX_STORE");
        if (env && *env) {
                if (env[0] != '/')
                        return nsbox_err(err, 0, "NSBOX_STORE '%s': expected an absolute path", env);
                *ret = strdup(env);
        } else if (nsbox_host_root()) {
                *ret = strdup("/var/lib/nsbox");
        } else {
                const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
                if (xdg && xdg[0] == '/')
                        return asprintf(ret, "%s/nsbox", xdg) < 0 ? -ENOMEM : 0;
                if (!home || home[0] != '/')
                        return nsbox_err(err, 0, "no store directory: set NSBOX_STORE, XDG_DATA_HOME or HOME");
                return asprintf(ret, "%s/.local/share/nsbox", home) < 0 ? -ENOMEM : 0;
        }
        return *ret ? 0 : -ENOMEM;
}

int nsbox_store_open(bool create, nsbox_store *ret, nsbox_error *err)
{
        _cleanup_free_ char *dir = NULL;
        int r = store_path(&dir, err);
        if (r < 0)
                return r == -ENOMEM ? nsbox_err(err, ENOMEM, "store path") : r;
        if (create && (r = mkdir_p(dir, 0700)) < 0)
                return nsbox_err(err, -r, "create the store '%s'", dir);
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "open the store '%s'", dir);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "stat the store '%s'", dir);
        /* another user who can write here could plant layers that sandboxes then mount */
        if (st.st_uid != geteuid() || (st.st_mode & 0022))
                return nsbox_err(err, 0, "store '%s' is not a directory of uid %u writable only by it, refusing to use it", dir,
                                 (unsigned)geteuid());
        for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++)
                if (mkdirat(fd, subdirs[i], 0700) < 0 && errno != EEXIST)
                        return nsbox_err(err, errno, "create '%s/%s'", dir, subdirs[i]);
        *ret = (nsbox_store){ .dir = steal_pointer(&dir), .dirfd = steal_fd(&fd) };
        return 0;
}

void nsbox_store_close(nsbox_store *s)
{
        free(s->dir);
        if (s->dirfd >= 0)
                close(s->dirfd);
        *s = (nsbox_store)NSBOX_STORE_INIT;
}

/* The store-wide lock: shared while reading names and taking holds, exclusive while binding or
 * removing them. */
static int store_lock(nsbox_store *s, int how, nsbox_error *err)
{
        int fd = openat(s->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return nsbox_err(err, errno, "open '%s/lock'", s->dir);
        while (flock(fd, how) < 0) {
                if (errno == EINTR)
                        continue;
                int e = errno;
                close(fd);
                return nsbox_err(err, e, "lock the store '%s'", s->dir);
        }
        return fd;
}

static int sub_fd(nsbox_store *s, const char *sub, nsbox_error *err)
{
        int fd = openat(s->dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "open '%s/%s'", s->dir, sub);
        return fd;
}

/* ---- holding layers ------------------------------------------------------------------------- */

void nsbox_layers_release(nsbox_layers *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->ids[i]);
                free(l->paths[i]);
                if (l->fds[i] >= 0)
                        close(l->fds[i]);
        }
        free(l->ids);
        free(l->paths);
        free(l->fds);
        if (l->snapshot_fd >= 0)
                close(l->snapshot_fd);
        free(l->snapshot);
        free(l->root);
        free(l->workdir);
        *l = (nsbox_layers)NSBOX_LAYERS_INIT;
}

static int layers_grow(nsbox_layers *l)
{
        char **ids = realloc(l->ids, (l->n + 1) * sizeof(*ids));
        if (ids)
                l->ids = ids;
        char **paths = realloc(l->paths, (l->n + 2) * sizeof(*paths)); /* NULL-terminated */
        if (paths)
                l->paths = paths;
        int *fds = realloc(l->fds, (l->n + 1) * sizeof(*fds));
        if (fds)
                l->fds = fds;
        return ids && paths && fds ? 0 : -ENOMEM;
}

/* Append layer id (checked) with a shared lock on its directory. */
static int hold_layer(nsbox_store *s, int layers_fd, const char *id, nsbox_layers *l, nsbox_error *err)
{
        if (!layer_id_ok(id))
                return nsbox_err(err, 0, "store '%s': malformed layer id '%.64s'", s->dir, id ? id : "");
        if (l->n >= MAX_LAYERS)
                return nsbox_err(err, 0, "more than %d layers: snapshot a fresh sandbox instead of a chain this deep", MAX_LAYERS);
        if (layers_grow(l) < 0)
                return nsbox_err(err, ENOMEM, "layers");
        int fd = openat(layers_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return nsbox_err(err, errno, "store '%s': layer %s", s->dir, id);
        if (flock(fd, LOCK_SH) < 0) {
                int e = errno;
                close(fd);
                return nsbox_err(err, e, "lock layer %s", id);
        }
        char *cid = strdup(id), *path = NULL;
        if (!cid || asprintf(&path, "%s/layers/%s", s->dir, id) < 0) {
                free(cid);
                close(fd);
                return nsbox_err(err, ENOMEM, "layers");
        }
        l->ids[l->n] = cid;
        l->paths[l->n] = path;
        l->fds[l->n] = fd;
        l->n++;
        l->paths[l->n] = NULL;
        return 0;
}

int nsbox_layers_dup(const nsbox_layers *l, nsbox_layers *ret)
{
        nsbox_layers c = NSBOX_LAYERS_INIT;
        for (size_t i = 0; i < l->n; i++) {
                if (layers_grow(&c) < 0)
                        goto fail;
                c.ids[i] = strdup(l->ids[i]);
                c.paths[i] = strdup(l->paths[i]);
                c.fds[i] = fcntl(l->fds[i], F_DUPFD_CLOEXEC, 3);
                c.n++;
                c.paths[c.n] = NULL;
                if (!c.ids[i] || !c.paths[i] || c.fds[i] < 0)
                        goto fail;
        }
        if (l->snapshot_fd >= 0 && (c.snapshot_fd = fcntl(l->snapshot_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                goto fail;
        if ((l->snapshot && !(c.snapshot = strdup(l->snapshot))) || (l->root && !(c.root = strdup(l->root))) ||
            (l->workdir && !(c.workdir = strdup(l->workdir))))
                goto fail;
        *ret = c;
        return 0;
fail:
        nsbox_layers_release(&c);
        return -ENOMEM;
}

static json_int_t save_fd(int fd, int *fds, size_t *n, size_t max, bool *full)
{
        if (fd < 0)
                return -1;
        if (*n >= max) {
                *full = true;
                return -1;
        }
        fds[*n] = fd;
        return (json_int_t)(*n)++;
}

json_t *nsbox_layers_save(const nsbox_layers *l, int *fds, size_t *n, size_t max)
{
        bool full = false;
        json_t *ids = json_array(), *paths = json_array(), *fdx = json_array();
        for (size_t i = 0; i < l->n; i++) {
                json_array_append_new(ids, json_string(l->ids[i]));
                json_array_append_new(paths, json_string(l->paths[i]));
                json_array_append_new(fdx, json_integer(save_fd(l->fds[i], fds, n, max, &full)));
        }
        json_int_t sfd = save_fd(l->snapshot_fd, fds, n, max, &full);
        json_t *o = json_pack("{so so so sI so so so}", "ids", ids, "paths", paths, "fds", fdx, "snapshot_fd", sfd, "snapshot",
                              l->snapshot ? json_string(l->snapshot) : json_null(), "root", l->root ? json_string(l->root) : json_null(),
                              "workdir", l->workdir ? json_string(l->workdir) : json_null());
        if (full) {
                json_decref(o);
                return NULL;
        }
        return o;
}

static int load_fd(json_t *v, int *fds, size_t n)
{
        json_int_t i = json_integer_value(v);
        if (!json_is_integer(v) || i < 0)
                return -1;
        if ((size_t)i >= n || fds[i] < 0)
                return -2;
        int fd = fds[i];
        fds[i] = -1;
        return fd;
}

int nsbox_layers_load(json_t *o, int *fds, size_t n, nsbox_layers *ret)
{
        nsbox_layers l = NSBOX_LAYERS_INIT;
        json_t *ids = json_object_get(o, "ids"), *paths = json_object_get(o, "paths"), *fdx = json_object_get(o, "fds");
        size_t count = json_array_size(ids);
        if (!json_is_object(o) || json_array_size(paths) != count || json_array_size(fdx) != count)
                return -EINVAL;
        for (size_t i = 0; i < count; i++) {
                const char *id = json_string_value(json_array_get(ids, i)), *path = json_string_value(json_array_get(paths, i));
                if (layers_grow(&l) < 0)
                        goto fail;
                l.fds[i] = load_fd(json_array_get(fdx, i), fds, n);
                l.ids[i] = id ? strdup(id) : NULL;
                l.paths[i] = path ? strdup(path) : NULL;
                l.n++;
                l.paths[l.n] = NULL;
                if (!l.ids[i] || !l.paths[i] || l.fds[i] < 0)
                        goto fail;
        }
        json_t *v = json_object_get(o, "snapshot_fd");
        l.snapshot_fd = load_fd(v, fds, n);
        if (l.snapshot_fd == -2)
                goto fail;
        const char *snap = json_string_value(json_object_get(o, "snapshot")), *root = json_string_value(json_object_get(o, "root")),
                   *wd = json_string_value(json_object_get(o, "workdir"));
        if ((snap && !(l.snapshot = strdup(snap))) || (root && !(l.root = strdup(root))) || (wd && !(l.workdir = strdup(wd))))
                goto fail;
        *ret = l;
        return 0;
fail:
        nsbox_layers_release(&l); /* closes the fds it took (missing ones are negative) */
        return -EINVAL;
}

/* Read a small JSON file through an open fd. */
static json_t *read_meta(int fd, const char *shown, nsbox_error *err)
{
        _cleanup_free_ char *text = malloc(META_MAX + 1);
        ssize_t len = text ? pread(fd, text, META_MAX + 1, 0) : -1;
        if (len < 0 || len > META_MAX) {
                nsbox_err(err, len < 0 ? errno : EFBIG, "read '%s'", shown);
                return NULL;
        }
        json_error_t je;
        json_t *j = nsbox_json_loadb(text, (size_t)len, &je);
        if (!json_is_object(j)) {
                json_decref(j);
                nsbox_err(err, 0, "'%s' is not a valid store record: %s", shown, j ? "not an object" : je.text);
                return NULL;
        }
        return j;
}

/* Open a record (snapshots/NAME.json, repos/KEY.json) still bound to its name, locked with how;
 * -ENOENT when there is none. */
static int open_record(nsbox_store *s, const char *sub, const char *file, int how, nsbox_error *err)
{
        _cleanup_close_ int dfd = sub_fd(s, sub, err);
        if (dfd < 0)
                return dfd;
        int fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ENOENT : nsbox_err(err, errno, "open '%s/%s/%s'", s->dir, sub, file);
        struct stat st;
        if (flock(fd, how) < 0 || fstat(fd, &st) < 0) {
                int e = errno;
                close(fd);
                return e == EWOULDBLOCK ? -EBUSY : nsbox_err(err, e, "lock '%s/%s/%s'", s->dir, sub, file);
        }
        if (st.st_nlink == 0) { /* removed while we waited for the lock */
                close(fd);
                return -ENOENT;
        }
        return fd;
}

/* What snapshots and images share: record FILE of SUB (a WHAT named NAME) held shared, its
 * parsed content in *ret_meta, and each layer it lists held in *ret. */
static int acquire_record(nsbox_store *s, const char *sub, const char *file, const char *what, const char *name, nsbox_layers *ret,
                          json_t **ret_meta, nsbox_error *err)
{
        _cleanup_close_ int lock = store_lock(s, LOCK_SH, err);
        if (lock < 0)
                return lock;
        nsbox_layers l = NSBOX_LAYERS_INIT;
        l.snapshot_fd = open_record(s, sub, file, LOCK_SH, err);
        if (l.snapshot_fd == -ENOENT)
                return nsbox_err_as(err, ENOENT, "no %s '%s' (see nsbox %s ls)", what, name, what);
        if (l.snapshot_fd < 0)
                return l.snapshot_fd;
        char shown[PATH_MAX];
        snprintf(shown, sizeof(shown), "%s/%s/%s", s->dir, sub, file);
        json_t *meta = read_meta(l.snapshot_fd, shown, err);
        _cleanup_close_ int layers_fd = sub_fd(s, "layers", err);
        int r = !meta ? -EBADMSG : layers_fd < 0 ? layers_fd : 0;
        json_t *arr = json_object_get(meta, "layers");
        if (r == 0 && (!json_is_array(arr) || json_array_size(arr) == 0))
                r = nsbox_err(err, 0, "'%s': 'layers' must be a non-empty array", shown);
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) {
                if (r < 0)
                        break;
                r = hold_layer(s, layers_fd, json_string_value(v), &l, err);
        }
        if (r < 0) {
                json_decref(meta);
                nsbox_layers_release(&l);
                return r;
        }
        *ret = l;
        *ret_meta = meta;
        return 0;
}

int nsbox_store_acquire_snapshot(nsbox_store *s, const char *name, nsbox_layers *ret, nsbox_error *err)
{
        int r = nsbox_snapshot_name_check(name, err);
        if (r < 0)
                return r;
        char file[NSBOX_SNAPSHOT_NAME_MAX + 8];
        snprintf(file, sizeof(file), "%s.json", name);
        nsbox_layers l;
        json_t *meta;
        if ((r = acquire_record(s, "snapshots", file, "snapshot", name, &l, &meta, err)) < 0)
                return r;
        const char *root = json_string_value(json_object_get(meta, "root"));
        const char *workdir = json_string_value(json_object_get(meta, "workdir"));
        if (!(l.snapshot = strdup(name)) || (root && !(l.root = strdup(root))) || (workdir && !(l.workdir = strdup(workdir))))
                r = nsbox_err(err, ENOMEM, "snapshot");
        json_decref(meta);
        if (r < 0) {
                nsbox_layers_release(&l);
                return r;
        }
        *ret = l;
        return 0;
}

int nsbox_store_acquire_layer(nsbox_store *s, const char *id, nsbox_layers *l, nsbox_error *err)
{
        _cleanup_close_ int lock = store_lock(s, LOCK_SH, err);
        if (lock < 0)
                return lock;
        _cleanup_close_ int layers_fd = sub_fd(s, "layers", err);
        if (layers_fd < 0)
                return layers_fd;
        return hold_layer(s, layers_fd, id, l, err);
}

int nsbox_policy_use_layers(nsbox_policy *p, const nsbox_layers *l, bool root_given, nsbox_error *err)
{
        const char *have = p->root == ROOT_HOST ? "host" : p->root_path;
        if (l->root && strcmp(l->root, have)) {
                if (root_given)
                        return nsbox_err_as(err, EINVAL, "snapshot '%s' was taken on the root '%s', not '%s'", l->snapshot ? l->snapshot : "",
                                         l->root, have);
                char *path = NULL;
                if (strcmp(l->root, "host") && !(path = strdup(l->root)))
                        return nsbox_err(err, ENOMEM, "root");
                free(p->root_path);
                p->root_path = path;
                p->root = path ? ROOT_DIR : ROOT_HOST;
        }
        p->layers = l->n ? l->paths : NULL;
        return 0;
}

/* ---- writing -------------------------------------------------------------------------------- */

int nsbox_store_tmp(nsbox_store *s, char ret_name[64], nsbox_error *err)
{
        _cleanup_close_ int tmp_fd = sub_fd(s, "tmp", err);
        if (tmp_fd < 0)
                return tmp_fd;
        char name[64] = "w-";
        if (random_hex(name + 2, 12) < 0)
                return nsbox_err(err, EIO, "random name");
        if (mkdirat(tmp_fd, name, 0700) < 0)
                return nsbox_err(err, errno, "create '%s/tmp/%s'", s->dir, name);
        int fd = openat(tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* held until the layer is bound: gc leaves a tmp directory alone while its writer lives */
        if (fd < 0 || flock(fd, LOCK_EX) < 0) {
                int e = errno;
                if (fd >= 0)
                        close(fd);
                unlinkat(tmp_fd, name, AT_REMOVEDIR);
                return nsbox_err(err, e, "create '%s/tmp/%s'", s->dir, name);
        }
        memcpy(ret_name, name, sizeof(name));
        return fd;
}

void nsbox_store_tmp_done(nsbox_store *s, const char *name, int fd)
{
        _cleanup_close_ int tmp_fd = openat(s->dirfd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tmp_fd >= 0)
                nsbox_tree_remove(tmp_fd, name, NULL);
        if (fd >= 0)
                close(fd);
}

/* Write dir/NAME atomically and durably, refusing to replace an existing NAME (-EEXIST). */
static int write_record(int dirfd, const char *name, json_t *meta, nsbox_error *err)
{
        _cleanup_free_ char *text = json_dumps(meta, JSON_INDENT(2) | JSON_SORT_KEYS);
        char tmp[96] = ".new-";
        if (!text || random_hex(tmp + 5, 12) < 0)
                return nsbox_err(err, ENOMEM, "record '%s'", name);
        _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return nsbox_err(err, errno, "write '%s'", name);
        size_t len = strlen(text);
        int r = write_full(fd, text, len);
        if (r == 0)
                r = write_full(fd, "\n", 1);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dirfd, tmp, 0);
                return r == -EEXIST ? -EEXIST : nsbox_err(err, -r, "write '%s'", name);
        }
        fsync(dirfd);
        return 0;
}

/* tmp/TMPNAME/SUB becomes layers/ID (under the exclusive store lock). */
static int bind_layer(nsbox_store *s, int tmpfd, const char *sub, char id[NSBOX_LAYER_ID_LEN + 1], nsbox_error *err)
{
        _cleanup_close_ int layers_fd = sub_fd(s, "layers", err);
        if (layers_fd < 0)
                return layers_fd;
        if (random_hex(id, NSBOX_LAYER_ID_LEN / 2) < 0)
                return nsbox_err(err, EIO, "random layer id");
        if (renameat2(tmpfd, sub, layers_fd, id, RENAME_NOREPLACE) < 0)
                return nsbox_err(err, errno, "move the new layer into '%s/layers'", s->dir);
        fsync(layers_fd);
        return 0;
}

static void unbind_layer(nsbox_store *s, const char *id)
{
        _cleanup_close_ int layers_fd = openat(s->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (layers_fd >= 0)
                nsbox_tree_remove(layers_fd, id, NULL);
}

static bool record_exists(nsbox_store *s, const char *sub, const char *file)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", sub, file);
        return faccessat(s->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

bool nsbox_store_has_snapshot(nsbox_store *s, const char *name)
{
        char file[NSBOX_SNAPSHOT_NAME_MAX + 8];
        snprintf(file, sizeof(file), "%s.json", name);
        return record_exists(s, "snapshots", file);
}

int nsbox_store_snapshot(nsbox_store *s, const char *name, int upper_fd, const nsbox_layers *below, const char *root,
                         const char *workdir, const char *source, uint64_t max_bytes, nsbox_snapshot_stats *ret_stats,
                         nsbox_error *err)
{
        int r = nsbox_snapshot_name_check(name, err);
        if (r < 0)
                return r;
        char file[NSBOX_SNAPSHOT_NAME_MAX + 8];
        snprintf(file, sizeof(file), "%s.json", name);
        if (record_exists(s, "snapshots", file))
                return nsbox_err_as(err, EEXIST, "snapshot '%s' exists (nsbox snapshot rm %s first)", name, name);
        if (below && below->n + 1 > MAX_LAYERS)
                return nsbox_err(err, 0, "more than %d layers: snapshot a fresh sandbox instead of a chain this deep", MAX_LAYERS);
        char tmpname[64];
        int tmpfd = nsbox_store_tmp(s, tmpname, err);
        if (tmpfd < 0)
                return tmpfd;
        nsbox_copy_stats cs = { 0 };
        uint64_t t0 = now_ns();
        r = nsbox_tree_copy_progress(upper_fd, tmpfd, "layer", max_bytes, s->shift, s->progress, &cs, err);
        uint64_t t1 = now_ns();
        /* durable before it has a name: a crash after the rename must not find it half written */
        if (r == 0 && syncfs(tmpfd) < 0)
                r = nsbox_err(err, errno, "sync the store '%s'", s->dir);
        uint64_t t2 = now_ns();
        char id[NSBOX_LAYER_ID_LEN + 1];
        json_t *layers = json_array();
        json_t *meta = NULL;
        int lock = -1;
        if (r == 0 && (lock = store_lock(s, LOCK_EX, err)) < 0)
                r = lock;
        if (r == 0)
                r = bind_layer(s, tmpfd, "layer", id, err);
        if (r == 0) {
                json_array_append_new(layers, json_string(id));
                for (size_t i = 0; below && i < below->n; i++)
                        json_array_append_new(layers, json_string(below->ids[i]));
                meta = json_pack("{ss sO ss* ss* sI ss* sI}", "name", name, "layers", layers, "root", root, "workdir", workdir, "created",
                                 (json_int_t)time(NULL), "source", source, "size", (json_int_t)cs.bytes);
                _cleanup_close_ int snaps = meta ? sub_fd(s, "snapshots", err) : -ENOMEM;
                r = snaps < 0 ? snaps : write_record(snaps, file, meta, err);
                if (r == -EEXIST)
                        nsbox_err_as(err, EEXIST, "snapshot '%s' exists (nsbox snapshot rm %s first)", name, name);
                if (r < 0)
                        unbind_layer(s, id);
        }
        if (lock >= 0)
                close(lock);
        json_decref(layers);
        json_decref(meta);
        nsbox_store_tmp_done(s, tmpname, tmpfd);
        if (r < 0)
                return r;
        if (ret_stats)
                *ret_stats = (nsbox_snapshot_stats){ .files = cs.files, .dirs = cs.dirs, .bytes = cs.bytes,
                                                     .copy_ms = (double)(t1 - t0) / 1e6, .sync_ms = (double)(t2 - t1) / 1e6 };
        return 0;
}

int nsbox_store_delete_snapshot(nsbox_store *s, const char *name, nsbox_error *err)
{
        int r = nsbox_snapshot_name_check(name, err);
        if (r < 0)
                return r;
        _cleanup_close_ int lock = store_lock(s, LOCK_EX, err);
        if (lock < 0)
                return lock;
        char file[NSBOX_SNAPSHOT_NAME_MAX + 8];
        snprintf(file, sizeof(file), "%s.json", name);
        _cleanup_close_ int fd = open_record(s, "snapshots", file, LOCK_EX | LOCK_NB, err);
        if (fd == -ENOENT)
                return nsbox_err_as(err, ENOENT, "no snapshot '%s' (see nsbox snapshot ls)", name);
        if (fd == -EBUSY)
                return nsbox_err_as(err, EBUSY, "snapshot '%s' is in use by a sandbox (nsbox ls; remove or reset it first)", name);
        if (fd < 0)
                return fd;
        _cleanup_close_ int snaps = sub_fd(s, "snapshots", err);
        if (snaps < 0)
                return snaps;
        if (unlinkat(snaps, file, 0) < 0)
                return nsbox_err(err, errno, "remove snapshot '%s'", name);
        fsync(snaps);
        return 0;
}

/* ---- reading and collecting ----------------------------------------------------------------- */

/* Calls fn for each NAME.json record of sub, with its parsed content. */
static int each_record(nsbox_store *s, const char *sub, int (*fn)(nsbox_store *, const char *, int, json_t *, void *), void *ud,
                       nsbox_error *err)
{
        int dfd = sub_fd(s, sub, err);
        if (dfd < 0)
                return dfd;
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return nsbox_err(err, errno, "read '%s/%s'", s->dir, sub);
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                size_t n = strlen(de->d_name);
                if (de->d_name[0] == '.' || n < 6 || strcmp(de->d_name + n - 5, ".json"))
                        continue;
                _cleanup_close_ int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;
                char shown[PATH_MAX];
                snprintf(shown, sizeof(shown), "%s/%s/%s", s->dir, sub, de->d_name);
                json_t *meta = read_meta(fd, shown, err);
                if (!meta) {
                        r = -EBADMSG;
                        break;
                }
                r = fn(s, de->d_name, fd, meta, ud);
                json_decref(meta);
        }
        closedir(d);
        return r;
}

static int list_one(nsbox_store *s, const char *file, int fd, json_t *meta, void *ud)
{
        (void)s;
        (void)file;
        /* in use: some sandbox holds it shared; try without waiting and give it straight back */
        bool in_use = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
        if (!in_use)
                flock(fd, LOCK_UN);
        json_object_set_new(meta, "in_use", json_boolean(in_use));
        return json_array_append(ud, meta);
}

static int cmp_names(const void *a, const void *b)
{
        const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
        const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));
        return strcmp(x ? x : "", y ? y : "");
}

static int list_sub(nsbox_store *s, const char *sub, json_t **ret, nsbox_error *err)
{
        json_t *arr = json_array();
        int r = arr ? each_record(s, sub, list_one, arr, err) : -ENOMEM;
        if (r < 0) {
                json_decref(arr);
                return r;
        }
        size_t n = json_array_size(arr);
        json_t **v = calloc(n + 1, sizeof(*v));
        json_t *sorted = json_array();
        if (!v || !sorted) {
                free(v);
                json_decref(arr);
                json_decref(sorted);
                return nsbox_err(err, ENOMEM, "list snapshots");
        }
        for (size_t i = 0; i < n; i++)
                v[i] = json_array_get(arr, i);
        qsort(v, n, sizeof(*v), cmp_names);
        for (size_t i = 0; i < n; i++)
                json_array_append(sorted, v[i]);
        free(v);
        json_decref(arr);
        *ret = sorted;
        return 0;
}

int nsbox_store_list(nsbox_store *s, json_t **ret, nsbox_error *err) { return list_sub(s, "snapshots", ret, err); }

typedef struct gc_state {
        json_t *referenced; /* layer id -> true: a snapshot lists it, or a repository record kept names it */
        nsbox_gc_stats st;
} gc_state;

static int mark_snapshot(nsbox_store *s, const char *file, int fd, json_t *meta, void *ud)
{
        (void)s;
        (void)file;
        (void)fd;
        gc_state *g = ud;
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(meta, "layers"), i, v)
                if (json_is_string(v))
                        json_object_set_new(g->referenced, json_string_value(v), json_true());
        return 0;
}

static uint64_t tree_bytes(int parent, const char *name)
{
        _cleanup_close_ int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        DIR *d = fdopendir(fd);
        if (!d)
                return 0;
        fd = -1;
        uint64_t sum = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                sum += (uint64_t)st.st_blocks * 512;
                if (S_ISDIR(st.st_mode))
                        sum += tree_bytes(dirfd(d), de->d_name);
        }
        closedir(d);
        return sum;
}

/* Remove parent/name if nobody holds it (an exclusive lock taken without waiting). */
static int collect(nsbox_store *s, int parent, const char *name, uint64_t *freed, nsbox_error *err)
{
        (void)s;
        _cleanup_close_ int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : nsbox_err(err, errno, "open '%s'", name);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return 0; /* in use */
        *freed += tree_bytes(parent, name);
        int r = nsbox_tree_remove(parent, name, err);
        return r < 0 ? r : 1;
}

/* A repository record goes when its layer is free (no snapshot is made of it, no sandbox holds
 * it); the layer, then named by nothing, goes with the others.  A kept one keeps its layer. */
static int collect_repo(nsbox_store *s, const char *file, int fd, json_t *meta, void *ud)
{
        (void)fd;
        gc_state *g = ud;
        const char *id = json_string_value(json_object_get(meta, "layer"));
        if (id && json_object_get(g->referenced, id))
                return 0;
        _cleanup_close_ int layers_fd = openat(s->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int lfd = id && layer_id_ok(id) && layers_fd >= 0 ? openat(layers_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        _cleanup_close_ int repos = openat(s->dirfd, "repos", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if ((lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0) || repos < 0 || unlinkat(repos, file, 0) < 0) {
                if (id)
                        json_object_set_new(g->referenced, id, json_true());
                return 0;
        }
        g->st.repos_removed++;
        return 0;
}

int nsbox_store_gc(nsbox_store *s, nsbox_gc_stats *ret, nsbox_error *err)
{
        _cleanup_close_ int lock = store_lock(s, LOCK_EX, err);
        if (lock < 0)
                return lock;
        gc_state g = { .referenced = json_object() };
        int r = g.referenced ? each_record(s, "snapshots", mark_snapshot, &g, err) : -ENOMEM;
        if (r == 0)
                r = each_record(s, "images", mark_snapshot, &g, err);
        if (r == 0)
                r = each_record(s, "repos", collect_repo, &g, err);
        /* records a writer was killed while writing (they are written under the lock we hold) */
        static const char *const recdirs[] = { "snapshots", "repos", "images" };
        for (size_t k = 0; r == 0 && k < ARRAY_SIZE(recdirs); k++) {
                _cleanup_close_ int dfd = sub_fd(s, recdirs[k], err);
                int lfd = dfd >= 0 ? fcntl(dfd, F_DUPFD_CLOEXEC, 3) : -1;
                DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
                if (!d) {
                        if (lfd >= 0)
                                close(lfd);
                        continue;
                }
                struct dirent *de;
                while ((de = readdir(d)))
                        if (!strncmp(de->d_name, ".new-", 5) && unlinkat(dfd, de->d_name, 0) == 0)
                                g.st.tmp_removed++;
                closedir(d);
        }
        static const char *const dirs[] = { "layers", "tmp" };
        for (size_t k = 0; r == 0 && k < ARRAY_SIZE(dirs); k++) {
                _cleanup_close_ int dfd = sub_fd(s, dirs[k], err);
                if (dfd < 0) {
                        r = dfd;
                        break;
                }
                int lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
                DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
                if (!d) {
                        if (lfd >= 0)
                                close(lfd);
                        r = nsbox_err(err, errno, "read '%s/%s'", s->dir, dirs[k]);
                        break;
                }
                struct dirent *de;
                char **names = NULL;
                while ((de = readdir(d)))
                        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strv_push(&names, strdup(de->d_name)) < 0)
                                break;
                closedir(d);
                for (char **n = names; r == 0 && n && *n; n++) {
                        if (k == 0 && json_object_get(g.referenced, *n)) {
                                g.st.layers_kept++;
                                continue;
                        }
                        int c = collect(s, dfd, *n, &g.st.bytes_freed, err);
                        if (c < 0)
                                r = c;
                        else if (c > 0)
                                ++*(k == 0 ? &g.st.layers_removed : &g.st.tmp_removed);
                        else if (k == 0)
                                g.st.layers_kept++;
                }
                strv_free(names);
        }
        json_decref(g.referenced);
        if (r < 0)
                return r;
        if (ret)
                *ret = g.st;
        return 0;
}

/* ---- repository layers ------------------------------------------------------------------------ */

int nsbox_store_acquire_repo(nsbox_store *s, const char *key, nsbox_layers *l, nsbox_error *err)
{
        _cleanup_close_ int lock = store_lock(s, LOCK_SH, err);
        if (lock < 0)
                return lock;
        char file[128];
        snprintf(file, sizeof(file), "%.64s.json", key);
        _cleanup_close_ int fd = open_record(s, "repos", file, LOCK_SH, err);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        json_t *meta = read_meta(fd, file, err);
        if (!meta)
                return -EBADMSG;
        _cleanup_close_ int layers_fd = sub_fd(s, "layers", err);
        const char *id = json_string_value(json_object_get(meta, "layer"));
        int r = layers_fd < 0 ? layers_fd : hold_layer(s, layers_fd, id, l, err);
        json_decref(meta);
        if (r == -ENOENT) { /* the cache entry outlived its layer: build anew */
                nsbox_error_clear(err);
                return 0;
        }
        return r < 0 ? r : 1;
}

int nsbox_store_bind_repo(nsbox_store *s, const char *key, int tmpfd, const char *sub, json_t *meta, nsbox_layers *l,
                          nsbox_error *err)
{
        if (syncfs(tmpfd) < 0)
                return nsbox_err(err, errno, "sync the store '%s'", s->dir);
        _cleanup_close_ int lock = store_lock(s, LOCK_EX, err);
        if (lock < 0)
                return lock;
        char id[NSBOX_LAYER_ID_LEN + 1];
        int r = bind_layer(s, tmpfd, sub, id, err);
        if (r < 0)
                return r;
        char file[128];
        snprintf(file, sizeof(file), "%.64s.json", key);
        json_t *m = json_deep_copy(meta);
        json_object_set_new(m, "layer", json_string(id));
        json_object_set_new(m, "created", json_integer((json_int_t)time(NULL)));
        _cleanup_close_ int repos = sub_fd(s, "repos", err);
        r = repos < 0 ? repos : m ? write_record(repos, file, m, err) : -ENOMEM;
        json_decref(m);
        if (r == -EEXIST) { /* built twice at once: use the one bound first */
                unbind_layer(s, id);
                close(steal_fd(&lock));
                r = nsbox_store_acquire_repo(s, key, l, err);
                return r == 0 ? nsbox_err(err, ENOENT, "repository layer %s vanished", key) : r < 0 ? r : 0;
        }
        if (r < 0) {
                unbind_layer(s, id);
                return r;
        }
        _cleanup_close_ int layers_fd = sub_fd(s, "layers", err);
        return layers_fd < 0 ? layers_fd : hold_layer(s, layers_fd, id, l, err);
}

/* ---- images (nsbox image import) ---------------------------------------------------------------- */

int nsbox_image_name_check(const char *name, nsbox_error *err)
{
        size_t n = name ? strlen(name) : 0;
        bool ok = n >= 1 && n <= NSBOX_IMAGE_NAME_MAX && name_char(name[0]) && name[n - 1] != '/' && !strstr(name, "..") &&
                  !strstr(name, "//");
        for (size_t i = 0; ok && i < n; i++)
                ok = name_char(name[i]) || strchr("._-:/", name[i]);
        if (!ok)
                return nsbox_err(err, 0,
                                 "invalid image name '%.200s': expected 1-%d of [A-Za-z0-9._-:/], starting with a letter or digit, "
                                 "without '..', '//' or a trailing '/'",
                                 name ? name : "", NSBOX_IMAGE_NAME_MAX);
        return 0;
}

/* images/FILE: the name with '/' as '+' (never in a name) */
static void image_file(const char *name, char file[NSBOX_IMAGE_NAME_MAX + 8])
{
        snprintf(file, NSBOX_IMAGE_NAME_MAX + 8, "%s.json", name);
        for (char *p = file; *p; p++)
                if (*p == '/')
                        *p = '+';
}

bool nsbox_store_has_image(nsbox_store *s, const char *name)
{
        char file[NSBOX_IMAGE_NAME_MAX + 8];
        image_file(name, file);
        return record_exists(s, "images", file);
}

/* A layer keyed by a blob digest (64 hex digits): its id is the digest's first half. */
static void digest_layer_id(const char *hex, char id[NSBOX_LAYER_ID_LEN + 1])
{
        memcpy(id, hex, NSBOX_LAYER_ID_LEN);
        id[NSBOX_LAYER_ID_LEN] = '\0';
}

int nsbox_store_hold_digest_layer(nsbox_store *s, const char *hex, nsbox_layers *l, nsbox_error *err)
{
        char id[NSBOX_LAYER_ID_LEN + 1];
        digest_layer_id(hex, id);
        _cleanup_close_ int lock = store_lock(s, LOCK_SH, err);
        if (lock < 0)
                return lock;
        _cleanup_close_ int layers_fd = sub_fd(s, "layers", err);
        if (layers_fd < 0)
                return layers_fd;
        if (faccessat(layers_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        int r = hold_layer(s, layers_fd, id, l, err);
        return r < 0 ? r : 1;
}

int nsbox_store_bind_digest_layer(nsbox_store *s, const char *hex, int tmpfd, const char *sub, nsbox_layers *l, nsbox_error *err)
{
        char id[NSBOX_LAYER_ID_LEN + 1];
        digest_layer_id(hex, id);
        if (syncfs(tmpfd) < 0)
                return nsbox_err(err, errno, "sync the store '%s'", s->dir);
        /* bound and held under one lock: a gc in between would see a layer nothing names */
        _cleanup_close_ int lock = store_lock(s, LOCK_EX, err);
        if (lock < 0)
                return lock;
        _cleanup_close_ int layers_fd = sub_fd(s, "layers", err);
        if (layers_fd < 0)
                return layers_fd;
        if (renameat2(tmpfd, sub, layers_fd, id, RENAME_NOREPLACE) < 0 && errno != EEXIST) /* EEXIST: imported meanwhile */
                return nsbox_err(err, errno, "move the new layer into '%s/layers'", s->dir);
        fsync(layers_fd);
        return hold_layer(s, layers_fd, id, l, err);
}

int nsbox_store_bind_image(nsbox_store *s, const char *name, json_t *meta, nsbox_error *err)
{
        int r = nsbox_image_name_check(name, err);
        if (r < 0)
                return r;
        _cleanup_close_ int lock = store_lock(s, LOCK_EX, err);
        if (lock < 0)
                return lock;
        char file[NSBOX_IMAGE_NAME_MAX + 8];
        image_file(name, file);
        _cleanup_close_ int dfd = sub_fd(s, "images", err);
        if (dfd < 0)
                return dfd;
        r = write_record(dfd, file, meta, err);
        if (r == -EEXIST)
                return nsbox_err_as(err, EEXIST, "image '%s' exists (nsbox image rm %s first)", name, name);
        return r;
}

/* The empty directory an image's layers go on instead of the host's root. */
static int image_root(nsbox_store *s, char **ret, nsbox_error *err)
{
        if (mkdirat(s->dirfd, "empty", 0755) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "create '%s/empty'", s->dir);
        return asprintf(ret, "%s/empty", s->dir) < 0 ? nsbox_err(err, ENOMEM, "image root") : 0;
}

int nsbox_store_acquire_image(nsbox_store *s, const char *name, nsbox_layers *ret, json_t **ret_meta, nsbox_error *err)
{
        int r = nsbox_image_name_check(name, err);
        if (r < 0)
                return r;
        char file[NSBOX_IMAGE_NAME_MAX + 8];
        image_file(name, file);
        nsbox_layers l;
        json_t *meta;
        if ((r = acquire_record(s, "images", file, "image", name, &l, &meta, err)) < 0)
                return r;
        if ((r = image_root(s, &l.root, err)) < 0) {
                json_decref(meta);
                nsbox_layers_release(&l);
                return r;
        }
        *ret = l;
        *ret_meta = meta;
        return 0;
}

int nsbox_store_drop_layers(nsbox_store *s, char *const *ids, nsbox_error *err)
{
        _cleanup_close_ int lock = store_lock(s, LOCK_EX, err);
        if (lock < 0)
                return lock;
        gc_state g = { .referenced = json_object() };
        int r = g.referenced ? each_record(s, "snapshots", mark_snapshot, &g, err) : -ENOMEM;
        if (r == 0)
                r = each_record(s, "images", mark_snapshot, &g, err);
        _cleanup_close_ int layers_fd = r == 0 ? sub_fd(s, "layers", err) : -1;
        for (char *const *id = ids; r == 0 && layers_fd >= 0 && id && *id; id++)
                if (layer_id_ok(*id) && !json_object_get(g.referenced, *id) &&
                    json_object_set_new(g.referenced, *id, json_true()) == 0) /* once */
                        r = collect(s, layers_fd, *id, &g.st.bytes_freed, err) < 0 ? -EIO : 0;
        json_decref(g.referenced);
        return r;
}

int nsbox_store_delete_image(nsbox_store *s, const char *name, nsbox_error *err)
{
        int r = nsbox_image_name_check(name, err);
        if (r < 0)
                return r;
        char file[NSBOX_IMAGE_NAME_MAX + 8];
        image_file(name, file);
        char **ids = NULL;
        {
                _cleanup_close_ int lock = store_lock(s, LOCK_EX, err);
                if (lock < 0)
                        return lock;
                _cleanup_close_ int fd = open_record(s, "images", file, LOCK_EX | LOCK_NB, err);
                if (fd == -ENOENT)
                        return nsbox_err_as(err, ENOENT, "no image '%s' (see nsbox image ls)", name);
                if (fd == -EBUSY)
                        return nsbox_err_as(err, EBUSY, "image '%s' is in use by a sandbox (nsbox ls; remove it first)", name);
                if (fd < 0)
                        return fd;
                json_t *meta = read_meta(fd, file, err);
                size_t i;
                json_t *v;
                json_array_foreach(json_object_get(meta, "layers"), i, v)
                        if (json_is_string(v))
                                strv_push(&ids, strdup(json_string_value(v)));
                json_decref(meta);
                _cleanup_close_ int dfd = sub_fd(s, "images", err);
                if (dfd < 0 || unlinkat(dfd, file, 0) < 0) {
                        strv_free(ids);
                        return dfd < 0 ? dfd : nsbox_err(err, errno, "remove image '%s'", name);
                }
                fsync(dfd);
        }
        /* its layers that no other image or snapshot names and no sandbox holds */
        nsbox_error e2 = { 0 };
        nsbox_store_drop_layers(s, ids, &e2);
        nsbox_error_clear(&e2);
        strv_free(ids);
        return 0;
}

int nsbox_store_list_images(nsbox_store *s, json_t **ret, nsbox_error *err) { return list_sub(s, "images", ret, err); }
