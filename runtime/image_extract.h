/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tar extractor of nsbox image import (image_import.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "sha256.h"

typedef struct extract_stats {
        uint64_t entries, bytes, files, dirs, symlinks, hardlinks, whiteouts, opaque;
        uint64_t devices_skipped, other_skipped, setid_stripped;
} extract_stats;

typedef struct extract_ctx {
        int top;            /* the directory extracted into */
        const char *what;   /* for messages: "layer sha256:..." */
        bool outer;         /* the outer archive: files and directories only, no owners or modes */
        bool shift_owners;  /* root: archive ids moved into the shared range (userns.h) */
        bool keep_setid;    /* root: setuid/setgid kept; else stripped */
        bool skip_devices;  /* root: device nodes skipped with a warning; else refused */
        uint64_t max_entries, max_bytes; /* across the whole import */
        extract_stats stats;             /* likewise */
        /* told stats.entries and stats.bytes as they grow (each entry, each block of a file) */
        void (*progress)(uint64_t entries, uint64_t bytes, void *userdata);
        void *progress_ud;
        char **dir_modes;                /* "MODE NAME" to apply last */
        int cache_fd;                    /* the last parent directory: -1, or cache_path's */
        size_t cache_len;
        char cache_path[512];
} extract_ctx;

#define EXTRACT_GZIP 1u
#define EXTRACT_ZSTD 2u

/* Close the remembered parent directory (set cache_fd to -1 before the first use). */
void extract_forget(extract_ctx *x);
/* Extract the tar read from fd (filters: what compression may be there) into x->top; hash (if
 * set) is fed every byte read from fd, to its end. */
int nsbox_extract_tar(extract_ctx *x, int fd, unsigned filters, nsbox_sha256 *hash, nsbox_error *err);
