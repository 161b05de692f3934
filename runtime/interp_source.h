/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The code interpreter's server (rootfs/code-interpreter/server.py) as built into the program,
 * and how a sandbox starts it: python3 reading its source from standard input. */
#pragma once

#include <stddef.h>

extern const char nsbox_interp_source[], nsbox_interp_source_end[];

static inline size_t nsbox_interp_source_len(void) { return (size_t)(nsbox_interp_source_end - nsbox_interp_source); }

#define NSBOX_INTERP_TAG "code-interpreter"       /* the detached exec's tag */
#define NSBOX_INTERP_PYTHON "/usr/bin/python3"    /* Debian's, where python3-ipykernel is */
#define NSBOX_INTERP_PORT 49999
/* python3 -c this, with the source's length: the source is read by size from standard input, so
 * the pipe may stay open */
#define NSBOX_INTERP_BOOT "import sys; exec(compile(sys.stdin.buffer.read(%zu), 'nsbox-code-interpreter', 'exec'))"
