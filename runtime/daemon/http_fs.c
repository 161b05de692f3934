/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd's filesystem.Filesystem: Stat, ListDir, MakeDir, Move, Remove, WatchDir and the polling
 * watchers. */
#include "http.h"

void fs_request(hreq *r, const char *method)
{
        envd_error(r, "unimplemented", "filesystem.Filesystem/%s is not served yet", method);
}
