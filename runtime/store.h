/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The layer store (nsbox(1), SNAPSHOTS): immutable filesystem layers and the named snapshots
 * made of them, in one directory per user ($NSBOX_STORE; /var/lib/nsbox for root; else
 * $XDG_DATA_HOME/nsbox or ~/.local/share/nsbox):
 *
 *   lock                  flock(2): held exclusively while names are bound or removed
 *   layers/ID/            one layer: the tree an overlayfs lower layer shows (whiteouts kept)
 *   snapshots/NAME.json   a snapshot: its layers, topmost first, and the root they go on
 *   repos/KEY.json        a repository clone at one commit, as a layer (repo workspaces)
 *   tmp/XXXX/             layers being written; never under a real name until complete
 *   images/NAME.json      an imported image ('/' in NAME as '+'): its layers, topmost first,
 *                         each named by the first half of its blob's sha256, and its config
 *   empty/                the (empty) root an image's layers go on
 *
 * Everything becomes visible by rename(2) after syncfs(2), so a crash (kill -9 included) leaves
 * at worst a directory under tmp/ or a layer nothing names, both removed by nsbox gc.  Use is
 * tracked with flock(2), which the kernel drops when the holder dies: every sandbox holds a
 * shared lock on each layer it mounts and on the snapshot it came from; deleting a snapshot or
 * collecting a layer takes an exclusive lock without waiting and refuses when it cannot. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "error.h"
#include "treecopy.h"

#define NSBOX_SNAPSHOT_NAME_MAX 128
#define NSBOX_LAYER_ID_LEN 32

typedef struct nsbox_store {
        char *dir;
        int dirfd;
        const nsbox_idshift *shift; /* snapshots: owners moved from a sandbox's own id range (treecopy.h) */
        const nsbox_copy_progress *progress; /* snapshots: how far the copy is (treecopy.h), or NULL */
} nsbox_store;
#define NSBOX_STORE_INIT { .dir = NULL, .dirfd = -1, .shift = NULL, .progress = NULL }

/* Open the calling user's store, creating it (0700) when create is set.  The directory must be
 * the user's own and not writable by others. */
int nsbox_store_open(bool create, nsbox_store *ret, nsbox_error *err);
void nsbox_store_close(nsbox_store *s);

/* 1-128 of [A-Za-z0-9._-], starting with a letter or digit. */
int nsbox_snapshot_name_check(const char *name, nsbox_error *err);

/* The store layers one sandbox mounts, topmost first, each held with a shared lock. */
typedef struct nsbox_layers {
        char **ids;
        char **paths; /* absolute, for the overlay's lowerdir */
        int *fds;     /* locked directory fds */
        size_t n;
        int snapshot_fd; /* the snapshot it came from, locked shared; -1 */
        char *snapshot;  /* its name, or NULL */
        char *root;      /* the root the layers go on: "host" or a directory; NULL = any */
        char *workdir;   /* the workdir they were made with, or NULL */
} nsbox_layers;
#define NSBOX_LAYERS_INIT { .snapshot_fd = -1 }

/* Take snapshot NAME's layers (errors: -ENOENT "no snapshot 'NAME'"). */
int nsbox_store_acquire_snapshot(nsbox_store *s, const char *name, nsbox_layers *ret, nsbox_error *err);
/* Add layer ID at the bottom of l (a repository layer under nothing else). */
int nsbox_store_acquire_layer(nsbox_store *s, const char *id, nsbox_layers *l, nsbox_error *err);
/* A second hold on the same layers (a sandbox reset keeps the old until the new one runs). */
int nsbox_layers_dup(const nsbox_layers *l, nsbox_layers *ret);
void nsbox_layers_release(nsbox_layers *l);
/* Hand-over between supervisors (keeper.h): l as JSON, its held fds appended to fds (at most max
 * in all; the JSON names their indexes); and back, taking those fds (set to -1 in fds). */
json_t *nsbox_layers_save(const nsbox_layers *l, int *fds, size_t *n, size_t max);
int nsbox_layers_load(json_t *o, int *fds, size_t n, nsbox_layers *ret);

/* Put l under p's writable layer (p->layers borrows l's paths) and take the snapshot's root for
 * p's, unless the caller chose a root (root_given): then they must be the same (-EINVAL). */
typedef struct nsbox_policy nsbox_policy;
int nsbox_policy_use_layers(nsbox_policy *p, const nsbox_layers *l, bool root_given, nsbox_error *err);

typedef struct nsbox_snapshot_stats {
        uint64_t files, dirs, bytes;
        double copy_ms, sync_ms;
} nsbox_snapshot_stats;

/* Capture the tree at upper_fd (a sandbox's writable layer: frozen, or hostile and changing,
 * see treecopy.h) as a new layer on top of below and bind it to NAME.  -EEXIST when NAME is
 * taken (checked first and again at the atomic bind). */
int nsbox_store_snapshot(nsbox_store *s, const char *name, int upper_fd, const nsbox_layers *below, const char *root,
                         const char *workdir, const char *source, uint64_t max_bytes, nsbox_snapshot_stats *ret_stats,
                         nsbox_error *err);
bool nsbox_store_has_snapshot(nsbox_store *s, const char *name);
/* -ENOENT when there is none, -EBUSY when a sandbox uses it. */
int nsbox_store_delete_snapshot(nsbox_store *s, const char *name, nsbox_error *err);
/* Snapshots as JSON objects: name, layers, root, workdir, created, source, size, in_use. */
int nsbox_store_list(nsbox_store *s, json_t **ret, nsbox_error *err);

typedef struct nsbox_gc_stats {
        unsigned layers_removed, tmp_removed, repos_removed, layers_kept;
        uint64_t bytes_freed;
} nsbox_gc_stats;
/* Remove what nothing names or holds: layers no snapshot lists and no sandbox mounts,
 * unfinished layers under tmp/ whose writer is gone, repository layers no sandbox uses. */
int nsbox_store_gc(nsbox_store *s, nsbox_gc_stats *ret, nsbox_error *err);

/* Repository layers, cached by KEY (a digest of url, commit and owner).  acquire: 1 with the
 * layer added to l when one exists, 0 when it must be built: in a directory of nsbox_store_tmp
 * (a locked fd of tmp/NAME, closed and removed by nsbox_store_tmp_done), then bound with
 * nsbox_store_bind_repo, which moves tmpfd's SUB into layers/, records meta (borrowed) with it as
 * repos/KEY.json and adds it to l (or the one a concurrent builder bound first). */
int nsbox_store_acquire_repo(nsbox_store *s, const char *key, nsbox_layers *l, nsbox_error *err);
int nsbox_store_tmp(nsbox_store *s, char ret_name[64], nsbox_error *err);
void nsbox_store_tmp_done(nsbox_store *s, const char *name, int fd);
int nsbox_store_bind_repo(nsbox_store *s, const char *key, int tmpfd, const char *sub, json_t *meta, nsbox_layers *l,
                          nsbox_error *err);

/* ---- images (nsbox image import) ---- */
#define NSBOX_IMAGE_NAME_MAX 200
/* 1-200 of [A-Za-z0-9._-:/], starting with a letter or digit, no "..", "//" or trailing '/'. */
int nsbox_image_name_check(const char *name, nsbox_error *err);
bool nsbox_store_has_image(nsbox_store *s, const char *name);
/* The layer of blob digest HEX (64 hex digits): 1 with it held (added to l), 0 when it must be
 * extracted: into tmpfd's SUB (nsbox_store_tmp), then bound (or the one bound meanwhile) and held. */
int nsbox_store_hold_digest_layer(nsbox_store *s, const char *hex, nsbox_layers *l, nsbox_error *err);
int nsbox_store_bind_digest_layer(nsbox_store *s, const char *hex, int tmpfd, const char *sub, nsbox_layers *l, nsbox_error *err);
/* Record image NAME (meta borrowed; -EEXIST when taken). */
int nsbox_store_bind_image(nsbox_store *s, const char *name, json_t *meta, nsbox_error *err);
/* Take image NAME's layers, its record locked shared as a snapshot's is, root the store's empty
 * directory; *ret_meta is its record (the caller's). */
int nsbox_store_acquire_image(nsbox_store *s, const char *name, nsbox_layers *ret, json_t **ret_meta, nsbox_error *err);
/* -ENOENT, -EBUSY while a sandbox uses it; its layers nothing else names go with it. */
int nsbox_store_delete_image(nsbox_store *s, const char *name, nsbox_error *err);
/* Remove the layers ids (NULL-terminated) that no record names and no sandbox holds. */
int nsbox_store_drop_layers(nsbox_store *s, char *const *ids, nsbox_error *err);
/* Images as their records (name, layers, config, ...) plus in_use, by name. */
int nsbox_store_list_images(nsbox_store *s, json_t **ret, nsbox_error *err);
