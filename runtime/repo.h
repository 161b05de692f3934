/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The repository behind `nsbox create --repo URL|PATH --commit SHA`: which kind of source the user
 * named, and its clone, checked out at one commit with a detached HEAD, into a new directory of
 * nsboxd's store (later an overlayfs lower layer).  libgit2 does the work on the host: no hooks,
 * no submodules, no hard links into someone else's repository. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define NSBOX_REPO_SPEC_MAX 4096 /* bytes of a --repo argument */
#define NSBOX_REPO_WORKER_ROOM (512ull << 20) /* address space of a clone worker beyond a checkout's bound */

typedef enum { NSBOX_REPO_LOCAL, NSBOX_REPO_NETWORK, _NSBOX_REPO_KIND_MAX } nsbox_repo_kind;

/* Classify and normalize what the user gave.  An absolute path to a directory holding a
 * repository (work tree or bare; a subdirectory of one is not searched upward) or a file:// URL
 * ("file:///p", "file://localhost/p", %XX decoded) is LOCAL, and *ret_url is the repository's
 * real absolute path: one name per repository, whatever symlinks or URL the user went through.
 * http://, https://, git://, ssh://, git+ssh://, ssh+git:// with a host, and user@host:path, are
 * NETWORK, *ret_url the spec as given (nothing is contacted).  Anything else (relative, empty,
 * longer than NSBOX_REPO_SPEC_MAX, control characters, another scheme) is -EINVAL "repository
 * 'x': expected an absolute path, a file:// URL or a network URL".  A local path that does not
 * exist, is not a directory or holds no repository fails naming it; so does one that libgit2
 * refuses because another user owns it (its safe.directory check).  *ret_url is untouched on
 * failure; free it. */
int nsbox_repo_classify(const char *spec, nsbox_repo_kind *ret_kind, char **ret_url, nsbox_error *err);

/* A --commit: 1 to 1024 bytes, no control character, not starting with '-'; else -EINVAL
 * "commit 'x': expected a commit id, a branch or a tag". */
int nsbox_repo_commit_check(const char *commit, nsbox_error *err);

/* Clone url (anything nsbox_repo_classify accepts) into the new directory dst_name (one path
 * component) under dst_parent_fd, check out commit (any revspec libgit2 resolves to a commit:
 * full or abbreviated id, tag, branch - the remote's other branches too; NULL = the remote's
 * HEAD) as a detached HEAD with a clean work tree, and put its full 40-hex id in ret_commit.
 * dst_name must not exist: it is created here, and removed again, with anything in it, if the
 * clone fails.  A network url is only fetched when allow_network, else -EPERM "repository 'URL'
 * needs network access; the sandbox's network is 'none'".  Errors are one line: "clone 'URL':
 * <libgit2 message>", "commit 'abc': not found in 'URL'", "commit 'x': is not a commit".
 * With max_bytes (0: no bound), a commit whose files would take more than max_bytes on disk (each
 * file as often as its trees name it, a block per entry) is refused before anything is checked
 * out, from the objects' headers (no file is inflated): -EFBIG "clone 'URL': the files of commit
 * abc take more than 16.0 MiB, the sandbox's disk limit (--disk); nothing was checked out".
 * ret_commit is untouched on failure. */
int nsbox_repo_clone(const char *url, const char *commit, bool allow_network, uint64_t max_bytes, int dst_parent_fd,
                     const char *dst_name, char ret_commit[41], nsbox_error *err);

/* How far a clone is: the objects received (a local clone copies its source's object directory
 * whole first, which reports none) and the files checked out. */
typedef enum { NSBOX_REPO_FETCH, NSBOX_REPO_CHECKOUT } nsbox_repo_phase;
typedef struct nsbox_repo_progress {
        nsbox_repo_phase phase;
        uint64_t done, total; /* objects or files */
        uint64_t bytes;       /* received, the fetch only */
} nsbox_repo_progress;
typedef void (*nsbox_repo_progress_fn)(const nsbox_repo_progress *p, void *userdata);

/* nsbox_repo_clone, calling progress (when not NULL) at most every NSBOX_REPO_PROGRESS_MS, and
 * once more when a phase is complete. */
#define NSBOX_REPO_PROGRESS_MS 250
int nsbox_repo_clone_progress(const char *url, const char *commit, bool allow_network, uint64_t max_bytes, int dst_parent_fd,
                              const char *dst_name, nsbox_repo_progress_fn progress, void *userdata, char ret_commit[41],
                              nsbox_error *err);

/* In a process that only clones (nsboxd's worker): bound libgit2's pack windows and object cache,
 * and the address space to what it uses now + max_bytes + NSBOX_REPO_WORKER_ROOM, so that a blob
 * the size check missed cannot take the host's memory.  0 or -errno. */
int nsbox_repo_worker_limits(uint64_t max_bytes, nsbox_error *err);
