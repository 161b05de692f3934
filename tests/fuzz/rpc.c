/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's client requests (runtime/daemon/rpc.c): the input is what a client writes on the socket,
 * split into lines as the daemon splits it.  Each line is checked as a JSON-RPC 2.0 request
 * (nsbox_rpc_parse, the daemon's own); a create's params are parsed by the table of
 * params.h into the options nsboxd's create uses.  Nothing here
 * starts a sandbox or reads a policy. */
#include <errno.h>
#include <string.h>

#include "../../runtime/daemon.h"
#include "../../runtime/options.h"
#include "../../runtime/params.h"
#include "fuzz.h"

static void one_request(const char *line, size_t len)
{
        nsbox_rpc_request rq;
        if (nsbox_rpc_parse(line, len, &rq) < 0) {
                FUZZ_CHECK(rq.rpc_code <= -32000 && rq.rpc_code >= -32700, "rpc code %d", rq.rpc_code);
                FUZZ_CHECK(rq.why[0] && !strchr(rq.why, '\n'), "refused without a one-line message");
                FUZZ_CHECK(!rq.id || json_is_string(rq.id) || json_is_integer(rq.id) || json_is_null(rq.id), "answered with a bad id");
                json_decref(rq.id);
                return;
        }
        FUZZ_CHECK(rq.method && json_is_object(rq.params), "a parsed request without a method or params object");
        if (!strcmp(rq.method, "create") || !strcmp(rq.method, "get_or_create")) {
                nsbox_run_options o;
                nsbox_error err = { 0 };
                /* released either way, as sandbox_prepare does: a refusal may have parsed lists */
                if (nsbox_params_from_json(rq.params, NSBOX_PARAM_LIFECYCLE, &o, &err) < 0)
                        FUZZ_CHECK(err.msg && !strchr(err.msg, '\n'), "create refused without a one-line message");
                nsbox_run_options_release(&o);
                nsbox_error_clear(&err);
        }
        nsbox_rpc_request_release(&rq);
}

FUZZ_ENTRY(rpc)
{
        /* client_readable: lines end in '\n'; empty lines are skipped; the last may be unfinished */
        const char *p = (const char *)data, *end = p + size;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (len > 0)
                        one_request(p, len);
                p += len + 1;
        }
        return 0;
}
