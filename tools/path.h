/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to tools/path.c and its unit tests: the switch that makes tool_open resolve in user
 * space (the fallback used where openat2(2) is missing) even where openat2 works, so that the
 * path tests can check both resolvers on one machine. */
#pragma once

#include <stdbool.h>

/* Resolve every later tool_open with the user-space fallback (true) or as detected (false). */
void tool_path_force_fallback(bool on);
/* True when tool_open uses the fallback in this process (forced, or openat2 gave ENOSYS). */
bool tool_path_uses_fallback(void);
