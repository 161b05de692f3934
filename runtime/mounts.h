/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "error.h"
#include "policy.h"
#include "util.h"

/* What the sandbox takes from the host, opened before anything is mounted and, for a
 * root-started sandbox, while the child still has host root's owner rights (the namespace's root
 * is an unprivileged host uid that may not traverse /root). */
typedef struct prepared_tree prepared_tree;
typedef struct hide_point hide_point;
typedef struct nsbox_sources {
        prepared_tree *trees; /* one per policy mount; detached clones for binds */
        int rootfs_fd;        /* O_PATH of the root filesystem directory, or -1 */
        int *layer_fds;       /* O_PATH of each store layer, topmost first */
        size_t n_layers;
        hide_point *hides;    /* where a bind shows one of the hidden directories */
        size_t n_hides;
} nsbox_sources;

/* Step 3 (private propagation), then the bind sources cloned and flagged while detached.
 * hidden: host directories (real paths) that a bind must not show, nsbox's runtime directories
 * (paths.h): where a bind's source is one of them or above one, it is covered by an empty
 * read-only tmpfs inside; a source below one is replaced by an empty one itself. */
/* bind_fds: NULL, or one fd per mount from nsbox_idmapped_binds() (idmapped.h), each bind's
 * taken over (set to -1) in place of a clone of its own. */
int nsbox_prepare_sources(const nsbox_policy *p, char *const *hidden, int *bind_fds, nsbox_sources *ret, nsbox_error *err);
void nsbox_sources_release(nsbox_sources *s);

/* Serve mode carries step 3's sources across the exec of nsbox-agent: their fds, in the order
 * of *ret_fds (malloc'ed, to land at consecutive numbers from some base), and the rest as bytes
 * appended to out.  -ENOMEM. */
int nsbox_sources_encode(const nsbox_sources *s, size_t n_mounts, strbuf *out, int **ret_fds, size_t *ret_n);
/* The reverse in nsbox-agent, strictly: the n_fds fds are at fd_base and up, each named once.
 * 0, or -errno with a one-line err; *ret is set either way (release it, which closes what it
 * names). */
int nsbox_sources_decode(const void *data, size_t len, size_t n_mounts, int fd_base, size_t n_fds, nsbox_sources *ret,
                         nsbox_error *err);

/* Steps 3 to 5 of docs/security.md's setup order, run inside the new mount namespace by a process
 * that holds CAP_SYS_ADMIN in the sandbox's user namespace: private propagation, the overlay
 * root with its binds, /proc, /dev, /tmp, pivot_root, and chdir into the workdir.  ret_stage_fd
 * (when not NULL) gets an O_PATH fd of the staging tmpfs, whose upper/ is the writable layer:
 * the supervisor reads it for snapshots. */
int nsbox_setup_root(const nsbox_policy *p, const nsbox_sources *src, int *ret_stage_fd, nsbox_error *err);

/* The sandbox's own boot_id (nsbox_setup_root binds it read-only over
 * /proc/sys/kernel/random/boot_id): its file, open for writing in the process that set the root
 * up (the agent; CLOEXEC, never in a command), and a new random one written to it, as a reboot
 * gives: 0 or -errno. */
extern int nsbox_boot_id_fd;
int nsbox_boot_id_renew(void);
