/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's frames out (serve.h): results, errors and events onto its outgoing
 * queue, and its exit.  The bottom layer: agent.c, agent_procs.c and agent_watch.c call it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "serve.h"
#include "proto.h"

void agent_exit(agent *a, int status)
{
        /* everything else in the pid namespace dies with pid 1 */
        (void)a;
        _exit(status);
}

void send_frame(agent *a, json_t *msg, const void *payload, size_t len)
{
        if (!msg)
                agent_exit(a, 125); /* out of memory: the supervisor sees the agent go */
        int r = nsbox_frame_append(&a->outq, msg, payload, len);
        if (r == -E2BIG) {
                json_t *id = json_incref(json_object_get(msg, "id"));
                json_decref(msg);
                msg = json_pack("{so s{ss ss}}", "id", id ? id : json_null(), "error", "code", "too_large", "message",
                                "the result is larger than the protocol's maximum frame");
                r = msg ? nsbox_frame_append(&a->outq, msg, NULL, 0) : -ENOMEM;
        }
        json_decref(msg);
        if (r < 0)
                agent_exit(a, 125);
}

void send_error(agent *a, json_t *id, const char *code, const char *fmt, ...)
{
        char msg[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        send_frame(a, json_pack("{sO s{ss ss}}", "id", id ? id : json_null(), "error", "code", code, "message", msg), NULL, 0);
}

void send_tool_error(agent *a, json_int_t id, const tool_error *e)
{
        json_t *jid = json_integer(id);
        send_error(a, jid, tool_code_name(e->code), "%s", e->message);
        json_decref(jid);
}

void send_result(agent *a, json_int_t id, json_t *result, const void *payload, size_t len)
{
        send_frame(a, json_pack("{sI so}", "id", (json_int_t)id, "result", result), payload, len);
}
