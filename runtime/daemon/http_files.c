/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd's GET and POST /files. */
#include "http.h"

void files_request(hreq *r)
{
        control_error(r, 501, "/files is not served yet");
}
