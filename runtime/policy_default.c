/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* policy/default.json, built into the program: every policy inherits from it the keys it does
 * not set (nsbox-policy(5), INHERITANCE), and that must not depend on a file that may be missing
 * or edited.  The Makefile makes this object depend on the JSON file, which .incbin reads
 * relative to the top of the source tree, where make runs the compiler. */
#include "policy.h"

__asm__(".pushsection .rodata\n"
        ".globl nsbox_default_policy_json\n"
        ".hidden nsbox_default_policy_json\n"
        "nsbox_default_policy_json:\n"
        ".incbin \"policy/default.json\"\n"
        ".byte 0\n"
        ".popsection\n");
