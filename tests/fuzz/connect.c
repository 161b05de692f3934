/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The HTTP API's parsers of what a client sends (runtime/connect.c): the Connect envelope of a
 * streaming request (the first byte of the input is 0) and the PORT-ID.DOMAIN host name that
 * routes a request to a sandbox's port (first byte 1; the host is the rest, up to a NUL).  An
 * envelope accepted re-encodes to the same bytes; a host accepted names a port 1-65535 and an
 * id of lowercase letters and digits, and is exactly PORT-ID.DOMAIN. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../../runtime/connect.h"
#include "fuzz.h"

static void envelope(const uint8_t *data, size_t size)
{
        const char *msg = NULL;
        size_t n = 0;
        if (connect_unwrap((const char *)data, size, &msg, &n) < 0)
                return;
        FUZZ_CHECK(msg == (const char *)data + 5 && n == size - 5 && n <= CONNECT_MESSAGE_MAX, "an accepted envelope's message");
        nsbox_queue q = { 0 };
        FUZZ_CHECK(connect_envelope(&q, data[0], msg, n) == 0, "re-encoding");
        FUZZ_CHECK(q.len == size && !memcmp(q.data + q.start, data, size), "re-encoded differently");
        nsbox_queue_release(&q);
}

static void host(const uint8_t *data, size_t size)
{
        char h[512], id[NSBOX_ID_SIZE];
        if (size >= sizeof(h))
                size = sizeof(h) - 1;
        memcpy(h, data, size);
        h[size] = 0;
        unsigned port = 0;
        static const char *const domains[] = { "sandbox.example.com", "sandbox.example.com:8443" };
        const char *domain = domains[size & 1], *bare = "sandbox.example.com";
        if (!e2b_host_route(h, domain, &port, id))
                return;
        FUZZ_CHECK(port >= 1 && port <= 65535, "port %u", port);
        size_t idl = strlen(id);
        FUZZ_CHECK(idl >= 1 && idl <= NSBOX_ID_MAX && strspn(id, "0123456789abcdefghijklmnopqrstuvwxyz-") == idl, "id '%s'", id);
        char want[512];
        snprintf(want, sizeof(want), "%u-%s.%s", port, id, bare);
        size_t hl = strcspn(h, ":");
        FUZZ_CHECK(hl == strlen(want) && !strncasecmp(h, want, hl), "'%s' is not '%s'", h, want);
}

FUZZ_ENTRY(connect)
{
        if (size < 1)
                return 0;
        if (data[0] == 0)
                envelope(data + 1, size - 1);
        else if (data[0] == 1)
                host(data + 1, size - 1);
        return 0;
}
