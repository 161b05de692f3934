/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The watch tool's engine: inotify on one directory (and, recursive, on every directory under
 * it, new ones included), its events turned into {op, path, type}.  No sandbox needed: the
 * directory resolves inside ctx->root_fd like every tool path (tools/path.c), and the agent
 * (agent_watch.c) only polls nsbox_watch_fd and forwards what nsbox_watch_read reports.
 *
 * Ops: create (IN_CREATE, IN_MOVED_TO), write (IN_CLOSE_WRITE: one event per writer that
 * closes the file, not one per write(2)), remove (IN_DELETE), rename (IN_MOVED_FROM: the old
 * name), chmod (IN_ATTRIB), overflow (IN_Q_OVERFLOW, or a new directory past the cap: events
 * were lost).  The watched directory itself removed or moved away: one last remove/rename
 * event, and nsbox_watch_read returns 1. */
#pragma once

#include <stdbool.h>

#include "../tools/tool.h"

#define NSBOX_WATCH_MAX_DIRS 4096u /* directories one recursive watch follows */

typedef struct nsbox_watch nsbox_watch;

/* One event: path is the client's path joined with the entry's (relative) name; type is
 * "file", "dir", "symlink", "fifo", "socket", "char", "block" or NULL (overflow). */
typedef void (*nsbox_watch_fn)(void *ud, const char *op, const char *path, const char *type);

/* Open path (as the client wrote it) inside ctx's root and watch it.  Errors: file_not_found,
 * not_a_directory, too_large (more than NSBOX_WATCH_MAX_DIRS directories; the kernel's inotify
 * limits), permission_denied; messages start "watch: ". */
int nsbox_watch_open(const tool_ctx *ctx, const char *path, bool recursive, nsbox_watch **ret, tool_error *e);
/* The inotify fd to poll (non-blocking). */
int nsbox_watch_fd(const nsbox_watch *w);
/* Read what is there (one read(2)) and report each event: 0, 1 when the watched directory went
 * away (its last event reported), or -errno. */
int nsbox_watch_read(nsbox_watch *w, nsbox_watch_fn fn, void *ud);
/* Directories watched now. */
unsigned nsbox_watch_dirs(const nsbox_watch *w);
void nsbox_watch_free(nsbox_watch *w);
