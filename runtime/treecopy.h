/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Snapshots of a sandbox's writable overlay layer: copy a directory tree that its sandbox controls
 * (hostile, perhaps changing while we read it) into a layer directory on the host that overlayfs
 * later mounts as a lower layer (option userxattr: "user.overlay.*" attributes, whiteouts as
 * character devices 0:0); remove such a tree safely; give a whole tree one owner. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Directories below the top one that a walk enters; deeper trees are refused. */
#define NSBOX_TREE_MAX_DEPTH 256

typedef struct nsbox_copy_stats {
        uint64_t files;     /* regular files copied (of a hard-linked file, the first name) */
        uint64_t dirs;      /* directories created, the top one included */
        uint64_t symlinks;
        uint64_t hardlinks; /* further names of an already copied inode, made with linkat */
        uint64_t specials;  /* whiteouts (character devices 0:0), fifos and sockets */
        uint64_t bytes;     /* file data copied; holes are not counted */
} nsbox_copy_stats;

/* Copy the directory src_dirfd (its contents; the directory itself is created as dst_name under
 * dst_parent_fd with src's mode, owner, xattrs and times) preserving: regular file contents (holes
 * kept: SEEK_DATA/SEEK_HOLE; try ioctl FICLONE first once per copy and remember if it fails, then
 * copy_file_range, then read/write), modes incl. setuid/setgid/sticky, owner (lchown/fchown only
 * when the process may: if geteuid()!=0 and the owner differs from ours, fail with a clear message
 * naming the file), xattrs (all that listxattr returns; llistxattr/lgetxattr on symlinks; a failure
 * to set one is an error naming the file and attribute), atime/mtime (utimensat, nanoseconds),
 * symlinks (readlinkat, symlinkat; never followed), hard links (files with st_nlink > 1 recreated
 * as links with linkat to the first copy, keyed by st_dev/st_ino), whiteouts (char device 0:0 ->
 * mknodat(S_IFCHR, makedev(0,0)), which the kernel allows unprivileged), fifos (mkfifoat), unix
 * sockets (mknodat S_IFSOCK). Any other device node: error "... device node 'path' cannot be
 * copied". Empty directories and opaque-directory xattrs are preserved.
 * max_bytes (0 = none) bounds the total file bytes copied (-EFBIG with a message). max_depth 256
 * directories deep. Directory modes/times are applied AFTER their contents are written (so a 0555
 * directory can be filled).
 *
 * Also: the source is never followed out of (symlinks, mounts: -EXDEV); an entry that changes
 * between being listed and being opened fails with -ESTALE; on any failure the partly made
 * dst_name is removed again.  dst_name is one file name and must not exist yet.  ret_stats
 * (optional) is filled on success only. */
int nsbox_tree_copy(int src_dirfd, int dst_parent_fd, const char *dst_name, uint64_t max_bytes,
                    nsbox_copy_stats *ret_stats, nsbox_error *err);

/* Host ids [from, from+count) become [to, to+count) in a copy: a root sandbox's own id range
 * (userns.h) moved to the shared one its snapshot is started in.  Other ids stay. */
typedef struct nsbox_idshift {
        uint32_t from, to, count;
} nsbox_idshift;
/* nsbox_tree_copy, owners shifted by shift (NULL: none). */
int nsbox_tree_copy_shifted(int src_dirfd, int dst_parent_fd, const char *dst_name, uint64_t max_bytes, const nsbox_idshift *shift,
                            nsbox_copy_stats *ret_stats, nsbox_error *err);
/* Told the counts so far after each file and each extent of a file's data: often, so cheap. */
typedef struct nsbox_copy_progress {
        void (*fn)(const nsbox_copy_stats *so_far, void *userdata);
        void *userdata;
} nsbox_copy_progress;
/* nsbox_tree_copy_shifted, telling progress (NULL: nothing) how far it is. */
int nsbox_tree_copy_progress(int src_dirfd, int dst_parent_fd, const char *dst_name, uint64_t max_bytes, const nsbox_idshift *shift,
                             const nsbox_copy_progress *progress, nsbox_copy_stats *ret_stats, nsbox_error *err);

/* Remove name under parent_fd recursively: never follows symlinks, works on 0000/0555 directories
 * we own (chmod u+rwx before descending), does not cross into other mounts (st_dev differs ->
 * error), ENOENT is success.  name is one file name (no '/').  Any depth: a directory deeper than
 * NSBOX_TREE_MAX_DEPTH is first moved up into the top one (as ".nsbox-remove.N"). */
int nsbox_tree_remove(int parent_fd, const char *name, nsbox_error *err);

/* lchown every entry of the tree at dirfd (including dirfd itself) to uid:gid, never following
 * symlinks.  The setuid/setgid bits that chown clears on regular files are put back; file
 * capabilities (security.capability) are not.  Does not cross into other mounts (-EXDEV), nor
 * deeper than NSBOX_TREE_MAX_DEPTH (-ELOOP). */
int nsbox_tree_chown(int dirfd, uid_t uid, gid_t gid, nsbox_error *err);
