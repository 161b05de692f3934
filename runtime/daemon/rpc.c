/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: JSON-RPC requests.  A client's line is checked (nsbox_rpc_parse, fuzzed by
 * tests/fuzz/rpc.c) and dispatched to its method. */
#include "internal.h"

#include <errno.h>
#include <string.h>

#include "../../tools/registry.h"

int nsbox_rpc_parse(const char *line, size_t len, nsbox_rpc_request *ret)
{
        *ret = (nsbox_rpc_request){ .id = NULL };
        json_error_t je;
        json_t *msg = nsbox_json_loadb(line, len, &je);
        if (!msg) {
                ret->rpc_code = RPC_PARSE_ERROR;
                snprintf(ret->why, sizeof(ret->why), "malformed JSON: %s", je.text);
                return -EINVAL;
        }
        json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method"), *params = json_object_get(msg, "params");
        if (!json_is_object(msg) || !json_is_string(method) || (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id)) ||
            strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ? json_string_value(json_object_get(msg, "jsonrpc")) : "", "2.0")) {
                ret->rpc_code = RPC_INVALID_REQUEST;
                ret->id = json_incref(json_is_string(id) || json_is_integer(id) ? id : NULL);
                snprintf(ret->why, sizeof(ret->why), "%s",
                         "not a JSON-RPC 2.0 request (expected {\"jsonrpc\": \"2.0\", \"id\": ..., \"method\": ..., \"params\": {...}})");
                json_decref(msg);
                return -EINVAL;
        }
        if (params && !json_is_object(params)) {
                ret->rpc_code = RPC_INVALID_PARAMS;
                ret->id = json_incref(id);
                snprintf(ret->why, sizeof(ret->why), "'params' must be an object");
                json_decref(msg);
                return -EINVAL;
        }
        ret->msg = msg;
        ret->id = json_incref(id);
        ret->method = json_string_value(method);
        ret->params = params ? json_incref(params) : json_object();
        if (!ret->params) {
                nsbox_rpc_request_release(ret);
                ret->rpc_code = RPC_SERVER_ERROR;
                snprintf(ret->why, sizeof(ret->why), "out of memory");
                return -ENOMEM;
        }
        return 0;
}

void nsbox_rpc_request_release(nsbox_rpc_request *rq)
{
        json_decref(rq->params);
        json_decref(rq->id);
        json_decref(rq->msg);
        rq->msg = rq->id = rq->params = NULL;
        rq->method = NULL;
}

void handle_request(daemon_state *d, client *c, const char *line, size_t len)
{
        nsbox_rpc_request rq;
        if (nsbox_rpc_parse(line, len, &rq) < 0) {
                /* a request that is not one is answered with its id when it has a usable one */
                reply_error(c, rq.rpc_code == RPC_PARSE_ERROR ? json_null() : rq.id, rq.rpc_code, "invalid_argument", "%s", rq.why);
                json_decref(rq.id);
                return;
        }
        json_t *id = rq.id, *params = rq.params;
        const char *m = rq.method;
        if (d->stopping && strcmp(m, "ping") && strcmp(m, "list") && strcmp(m, "stats") && strcmp(m, "tools") && strcmp(m, "shutdown"))
                reply_error(c, id, RPC_SERVER_ERROR, "unavailable", "nsboxd is stopping: '%.100s' refused", m);
        else if (!strcmp(m, "create") || !strcmp(m, "get_or_create"))
                method_create(d, c, id, params, !strcmp(m, "get_or_create"));
        else if (!strcmp(m, "call"))
                method_call(d, c, id, params);
        else if (!strcmp(m, "list"))
                method_list(d, c, id, params);
        else if (!strcmp(m, "set_timeout"))
                method_set_timeout(d, c, id, params);
        else if (!strcmp(m, "stats"))
                method_stats(d, c, id);
        else if (!strcmp(m, "destroy"))
                method_destroy(d, c, id, params);
        else if (!strcmp(m, "pause") || !strcmp(m, "resume"))
                method_pause(d, c, id, params, !strcmp(m, "pause"));
        else if (!strcmp(m, "snapshot"))
                method_snapshot(d, c, id, params);
        else if (!strcmp(m, "reset"))
                method_reset(d, c, id, params);
        else if (!strcmp(m, "snapshot_list") || !strcmp(m, "snapshot_delete"))
                method_snapshots(d, c, id, params, !strcmp(m, "snapshot_delete"));
        else if (!strcmp(m, "api_key_create"))
                method_api_key_create(d, c, id, params);
        else if (!strcmp(m, "api_key_list"))
                method_api_key_list(d, c, id, params);
        else if (!strcmp(m, "api_key_delete"))
                method_api_key_delete(d, c, id, params);
        else if (!strcmp(m, "shutdown"))
                method_shutdown(d, c, id);
        else if (!strcmp(m, "ping"))
                reply_result(c, id, json_pack("{ss si si}", "version", NSBOX_VERSION, "pid", (int)getpid(), "uid", (int)geteuid()));
        else if (!strcmp(m, "tools")) {
                const char *fmt = json_string_value(json_object_get(params, "format"));
                json_t *t = tool_schemas(fmt ? fmt : "json");
                if (t)
                        reply_result(c, id, json_pack("{so}", "tools", t));
                else
                        reply_error(c, id, RPC_INVALID_PARAMS, "invalid_argument", "tools: 'format' must be json, openai or mcp");
        } else
                reply_error(c, id, RPC_METHOD_NOT_FOUND, "not_found", "unknown method '%.100s'", m);
        nsbox_rpc_request_release(&rq);
}
