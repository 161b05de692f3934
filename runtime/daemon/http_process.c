/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd's process.Process: Start, Connect, List, SendInput, CloseStdin, SendSignal, Update. */
#include "http.h"

void process_request(hreq *r, const char *method)
{
        envd_error(r, "unimplemented", "process.Process/%s is not served yet", method);
}
