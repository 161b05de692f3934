/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd, the data plane of a sandbox: the Connect protocol (JSON codec) of process.Process and
 * filesystem.Filesystem, and /health. */
#include "http.h"

#include <string.h>

void envd_request(hreq *r)
{
        if (!strcmp(r->url, "/health")) {
                http_answer(r, 204, NULL, NULL, 0);
                return;
        }
        control_error(r, 501, "%s is not served yet", r->url);
}
