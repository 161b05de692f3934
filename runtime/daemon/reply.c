/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: replies to clients, one JSON line each, queued on the client. */
#include "internal.h"

client *client_by_serial(daemon_state *d, uint64_t serial)
{
        for (client *c = d->clients; c && serial; c = c->next)
                if (c->serial == serial)
                        return c;
        return NULL;
}

void send_line(client *c, json_t *msg)
{
        if (!c || !msg) {
                json_decref(msg);
                return;
        }
        size_t len = 0;
        char *text = nsbox_json_dumps(msg, &len);
        json_decref(msg);
        if (!text || nsbox_queue_append(&c->out, text, len) < 0 || nsbox_queue_append(&c->out, "\n", 1) < 0)
                c->eof = true; /* out of memory for this client: drop it */
        free(text);
}

void reply_result(client *c, json_t *id, json_t *result)
{
        if (!id) { /* a notification: no reply */
                json_decref(result);
                return;
        }
        send_line(c, json_pack("{ss sO so}", "jsonrpc", "2.0", "id", id, "result", result ? result : json_object()));
}

void reply_error(client *c, json_t *id, int rpc_code, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        send_line(c, json_pack("{ss sO s{si ss s{ss}}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code", rpc_code,
                               "message", msg, "data", "code", code));
}
