/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rootfs/code-interpreter/server.py, built into the programs: the agent's code tools start it in
 * the sandbox (runtime/agent_code.c) and nsboxd's code-interpreter template does the same
 * (runtime/daemon/http_interp.c), from this one copy, so neither needs a path to it inside the
 * sandbox.  The Makefile makes this object depend on the script, which .incbin reads relative to
 * the top of the source tree, where make runs the compiler. */
#include "interp_source.h"

__asm__(".pushsection .rodata\n"
        ".globl nsbox_interp_source\n"
        ".hidden nsbox_interp_source\n"
        "nsbox_interp_source:\n"
        ".incbin \"rootfs/code-interpreter/server.py\"\n"
        ".globl nsbox_interp_source_end\n"
        ".hidden nsbox_interp_source_end\n"
        "nsbox_interp_source_end:\n"
        ".byte 0\n"
        ".popsection\n");
