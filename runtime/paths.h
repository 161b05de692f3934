/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where nsboxd listens and logs, for the calling user: $NSBOX_SOCKET when set; as root
 * /run/nsbox/; else $XDG_RUNTIME_DIR/nsbox/, /run/user/UID/nsbox/ when that is the user's, or
 * /tmp/nsbox-UID/, or ~/.cache/nsbox-run/ when another user made /tmp/nsbox-UID first.  The
 * directory is created 0700 and must be the user's own and private. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

typedef struct nsbox_paths {
        char *dir;    /* the runtime directory */
        char *socket; /* dir/nsboxd.sock, or $NSBOX_SOCKET */
        char *lock;   /* socket + ".lock": one daemon per socket */
        char *log;    /* dir/nsboxd.log, where an auto-started daemon writes */
        char *warning; /* set when /tmp/nsbox-UID was taken and dir is the fallback: say it */
} nsbox_paths;

/* create: make the directory if missing (the daemon, and a client about to start one). */
int nsbox_paths_get(bool create, nsbox_paths *ret, nsbox_error *err);
void nsbox_paths_release(nsbox_paths *p);
/* The fallback runtime directory of uid (~/.cache/nsbox-run, home from the password database). */
int nsbox_paths_fallback(uid_t uid, char **ret);
/* Every runtime directory of nsbox a sandbox started by us must not see through a bind: root's
 * (/run/nsbox) and, for another user, each of the places above that exists, as real paths.  A
 * socket given by $NSBOX_SOCKET or nsboxd --socket elsewhere is not among them. */
int nsbox_paths_runtime_dirs(char ***ret);
