/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox mcp: a Model Context Protocol server on stdio (JSON-RPC 2.0, one message per line).  It
 * serves nsbox's tools, made in sandboxes of nsboxd (started when none runs), plus tools that
 * create, list, snapshot and destroy sandboxes.  The default sandbox is created on the first tool
 * call that names none; every sandbox the session created is destroyed when it ends (end of
 * stdin, SIGTERM, SIGINT, SIGHUP).  Requests are served one at a time, in order. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../tools/registry.h"
#include "cli_session.h"
#include "client.h"
#include "options.h"
#include "json.h"
#include "util.h"

#ifndef NSBOX_VERSION
#define NSBOX_VERSION "0.1.0"
#endif

#define MCP_MAX_LINE (64u << 20) /* a write_file of 16 MiB, base64-encoded, fits */
#define MCP_READ_CHUNK 65536

/* JSON-RPC error codes (JSON-RPC 2.0, used as they are by MCP) */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602

/* Protocol revisions this server implements, latest first: a client asking for one of them gets
 * it; any other gets the latest (the client then decides whether it can go on). */
static const char *const mcp_versions[] = { "2025-06-18", "2025-03-26", "2024-11-05" };

static const char usage_mcp[] =
        "usage: nsbox mcp [OPTIONS]\n"
        "\n"
        "Serve the Model Context Protocol on standard input and output, for an MCP client such as\n"
        "Claude Code or Claude Desktop: nsbox's tools (exec, read_file, write_file, edit_file, grep,\n"
        "git_commit, ...) run in a sandbox of nsboxd (started when none runs), plus create_sandbox,\n"
        "list_sandboxes, snapshot_sandbox and destroy_sandbox.  A default sandbox is created on the\n"
        "first tool call that names none; every sandbox the session created is destroyed when it\n"
        "ends (end of input, SIGTERM, SIGINT or SIGHUP).\n"
        "\n"
        "OPTIONS are those of nsbox create, for the default sandbox (--policy, --template, --memory,\n"
        "--net, --bind, --from, --label, --timeout, ...).  Diagnostics go to standard error.\n";

/* Tools of the session itself, not of a sandbox.  Their params are those of nsboxd's methods. */
static const struct {
        const char *name, *description, *schema;
} lifecycle_tools[] = {
        { "create_sandbox",
          "Start a new sandbox: an isolated Linux machine of its own (files, processes, no network by default). "
          "Returns the sandbox object {id, state, policy, labels, ...}; pass its id as 'sandbox' to the other tools. "
          "Without one they use this session's default sandbox. Sandboxes made here are destroyed when the session ends.",
          "{\"type\":\"object\",\"properties\":{"
          "\"policy\":{\"type\":\"string\",\"description\":\"Policy name, e.g. default or strict (default: default).\"},"
          "\"template\":{\"type\":\"string\",\"description\":\"A template of nsboxd's configuration (from its warm pool).\"},"
          "\"from\":{\"type\":\"string\",\"description\":\"Start on this snapshot's files (see snapshot_sandbox).\"},"
          "\"memory\":{\"type\":\"string\",\"description\":\"Memory limit, e.g. 512M.\"},"
          "\"limits\":{\"type\":\"string\",\"enum\":[\"required\",\"best-effort\"],\"description\":\"required (the default): a memory limit "
          "this host cannot enforce refuses the create; best-effort: the sandbox runs without it and its warnings say so.\"},"
          "\"net\":{\"type\":\"string\",\"enum\":[\"none\",\"nat\"],\"description\":\"Network: loopback only (none, the default) or outbound NAT (only when the session was started with --net nat).\"},"
          "\"timeout\":{\"type\":\"number\",\"minimum\":0,\"description\":\"Seconds after which the sandbox is destroyed.\"},"
          "\"env\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"Environment, as K=V strings.\"},"
          "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},\"description\":\"Labels, shown by list_sandboxes.\"}"
          "}}" },
        { "list_sandboxes",
          "List the sandboxes this user has in nsboxd. Returns {sandboxes: [{id, state, policy, labels, created, ...}], "
          "default: the id of this session's default sandbox or null}.",
          "{\"type\":\"object\",\"properties\":{"
          "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},\"description\":\"Only sandboxes with all these labels.\"}"
          "}}" },
        { "snapshot_sandbox",
          "Save a sandbox's files as a named snapshot, to start new sandboxes from later (create_sandbox with from). "
          "Returns {name, sandbox, files, dirs, bytes, duration_ms}.",
          "{\"type\":\"object\",\"properties\":{"
          "\"name\":{\"type\":\"string\",\"description\":\"Snapshot name: letters, digits, '.', '_', '-', starting with a letter or digit.\"},"
          "\"sandbox\":{\"type\":\"string\",\"description\":\"Sandbox id (default: this session's default sandbox).\"}"
          "},\"required\":[\"name\"]}" },
        { "reset_sandbox",
          "Put a sandbox back as it was: every process is killed and every change to its files discarded, back to a "
          "snapshot (see snapshot_sandbox) or to how it was created (its repository checked out again). Its id stays. "
          "Returns the sandbox object {id, state, ...}.",
          "{\"type\":\"object\",\"properties\":{"
          "\"snapshot\":{\"type\":\"string\",\"description\":\"Snapshot to go back to (default: the sandbox's creation state).\"},"
          "\"sandbox\":{\"type\":\"string\",\"description\":\"Sandbox id (default: this session's default sandbox).\"}"
          "}}" },
        { "destroy_sandbox",
          "Destroy a sandbox: its processes are killed and its files discarded. Returns {destroyed: id}. "
          "Destroying the default sandbox makes the next tool call start a fresh one.",
          "{\"type\":\"object\",\"properties\":{"
          "\"sandbox\":{\"type\":\"string\",\"description\":\"Sandbox id (default: this session's default sandbox).\"}"
          "}}" },
};

static const char sandbox_param_description[] =
        "Id of the sandbox to run in (from create_sandbox or list_sandboxes); default: this session's default sandbox, "
        "created on first use.";

typedef struct mcp_server {
        nsbox_client cl;       /* to nsboxd; connected on first need, again after it went away */
        json_t *create_params; /* of the default sandbox, from the command line */
        char *default_id;      /* NULL until the first tool call needs it */
        json_t *owned;         /* ids of the sandboxes this session created: destroyed at the end */
        json_t *tools;         /* the tools/list result, made once */
        const char *version;   /* negotiated by initialize (NULL before) */
        bool closing;          /* destroying what it owns: signals stay blocked */
        sigset_t blocked, unblocked;
} mcp_server;

/* The quit signals are blocked except while waiting for input or for nsboxd: then the handler
 * records the signal and cuts the connection to nsboxd, so that a long exec does not keep the
 * session alive (the client's SIGKILL would follow, and the sandboxes would be left behind). */
static volatile sig_atomic_t quit_signal;
static volatile sig_atomic_t call_fd = -1;

static void on_quit_signal(int sig)
{
        int saved = errno;
        quit_signal = sig;
        if (call_fd >= 0)
                shutdown(call_fd, SHUT_RDWR);
        errno = saved;
}

/* ---- output ----------------------------------------------------------------------------------- */

/* stdout carries protocol messages only.  A failed write (the client went away) ends the session. */
static int send_message(json_t *msg)
{
        size_t len = 0;
        char *text = msg ? nsbox_json_dumps_read(msg, &len) : NULL; /* structuredContent's 2.149 */
        json_decref(msg);
        if (!text)
                return -ENOMEM;
        int r = write_full(1, text, len);
        if (r == 0)
                r = write_full(1, "\n", 1);
        free(text);
        return r;
}

static int send_result(json_t *id, json_t *result)
{
        return send_message(json_pack("{ss sO so}", "jsonrpc", "2.0", "id", id, "result", result ? result : json_object()));
}

static int send_error(json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int send_error(json_t *id, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = NULL;
        int n = vasprintf(&msg, fmt, ap);
        va_end(ap);
        json_t *err = json_pack("{si ss}", "code", code, "message", n >= 0 ? msg : "error");
        free(n >= 0 ? msg : NULL);
        return send_message(json_pack("{ss sO so}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err));
}

/* run_code's pictures (results' png, jpeg) as MCP image blocks appended to content, which a model
 * sees as pictures; in the text each becomes a note, not kilobytes of base64.  The text's object:
 * a copy with the notes, or result itself when it has no picture. */
static json_t *with_images(json_t *result, json_t *content)
{
        static const char *const kinds[][2] = { { "png", "image/png" }, { "jpeg", "image/jpeg" } };
        json_t *results = json_object_get(result, "results"), *copy = NULL, *item;
        size_t i;
        json_array_foreach(results, i, item) {
                for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                        json_t *data = json_object_get(item, kinds[k][0]);
                        if (!json_is_string(data))
                                continue;
                        if (!copy && !(copy = json_deep_copy(result)))
                                return result;
                        json_array_append_new(content, json_pack("{ss sO ss}", "type", "image", "data", data, "mimeType", kinds[k][1]));
                        char note[96];
                        snprintf(note, sizeof(note), "(%s, %zu bytes of base64: content[%zu])", kinds[k][1], json_string_length(data),
                                 json_array_size(content)); /* after the text */
                        json_object_set_new(json_array_get(json_object_get(copy, "results"), i), kinds[k][0], json_string(note));
                }
        }
        return copy ? copy : result;
}

/* A tools/call result: the text an LLM reads (and run_code's pictures as images), and for
 * revisions that have it the same object as structuredContent. */
static json_t *tool_result(const mcp_server *s, json_t *result, bool is_error, const char *text)
{
        char *dumped = NULL;
        json_t *images = json_array(), *shown = result;
        if (!text) {
                shown = is_error || !images ? result : with_images(result, images);
                dumped = nsbox_cli_dumps(shown, JSON_COMPACT); /* 2.149, not 2.1493880000000001 */
                text = dumped ? dumped : "";
        }
        json_t *r = json_pack("{s[{ss ss}] sb}", "content", "type", "text", "text", text, "isError", is_error);
        if (r && images)
                json_array_extend(json_object_get(r, "content"), images);
        json_decref(images);
        if (shown != result)
                json_decref(shown);
        free(dumped);
        if (r && result && json_is_object(result) && !is_error && s->version && strcmp(s->version, "2025-06-18") >= 0)
                json_object_set(r, "structuredContent", result);
        return r;
}

static json_t *tool_error(const mcp_server *s, const char *code, const char *message)
{
        char *text = NULL;
        if (asprintf(&text, "%s%s%s", code ? code : "", code ? ": " : "", message ? message : "failed") < 0)
                return tool_result(s, NULL, true, "failed");
        json_t *r = tool_result(s, NULL, true, text);
        free(text);
        return r;
}

/* ---- nsboxd ----------------------------------------------------------------------------------- */

/* One call to nsboxd, connecting first when needed.  0, or -1 with *ret_code (NULL when nsboxd
 * could not be reached or went away) and err. */
static int daemon_call(mcp_server *s, const char *method, json_t *params, json_t **ret, const char **ret_code, nsbox_error *err)
{
        *ret_code = NULL;
        if (s->cl.fd < 0 && nsbox_client_connect(true, &s->cl, err) < 0) {
                json_decref(params);
                return -1;
        }
        call_fd = s->closing ? -1 : s->cl.fd;
        if (!s->closing)
                sigprocmask(SIG_SETMASK, &s->unblocked, NULL);
        int r = nsbox_client_call(&s->cl, method, params, NULL, NULL, ret, ret_code, err);
        sigprocmask(SIG_SETMASK, &s->blocked, NULL);
        call_fd = -1;
        if (r < 0 && !*ret_code)
                nsbox_client_close(&s->cl); /* broken: the next call connects again */
        return r < 0 ? -1 : 0;
}

static int create_sandbox(mcp_server *s, json_t *params, json_t **ret, const char **ret_code, nsbox_error *err)
{
        /* the session's sandboxes end with its connection to nsboxd: killed with SIGKILL, the
         * session still leaves nothing behind */
        if (json_is_object(params))
                json_object_set_new(params, "close_with_client", json_true());
        if (daemon_call(s, "create", params, ret, ret_code, err) < 0)
                return -1;
        const char *id = json_string_value(json_object_get(*ret, "id"));
        if (!id) {
                json_decref(*ret);
                *ret = NULL;
                nsbox_err(err, 0, "nsboxd's create reply has no id");
                return -1;
        }
        json_array_append_new(s->owned, json_string(id));
        return 0;
}

/* create_sandbox's arguments come from the model, not from the person who started the session:
 * they may choose among what the session's own options allow, never a host path (binds, a
 * policy file, a root file system, a recording, a repository, published ports) nor more network
 * than the session was started with. */
static int check_model_create(const mcp_server *s, json_t *args, nsbox_error *err)
{
        static const char *const allowed[] = { "policy", "template", "from", "memory", "limits", "net", "timeout", "env", "labels" };
        const char *key;
        json_t *v;
        json_object_foreach(args, key, v) {
                size_t i = 0;
                while (i < ARRAY_SIZE(allowed) && strcmp(key, allowed[i]))
                        i++;
                if (i == ARRAY_SIZE(allowed))
                        return nsbox_err(err, 0, "create_sandbox: '%.64s' is not an argument a model may set (policy, template, from, memory, limits, net, timeout, env, "
                                         "labels)",
                                         key);
        }
        const char *policy = json_string_value(json_object_get(args, "policy"));
        if (policy && strchr(policy, '/'))
                return nsbox_err(err, 0, "create_sandbox: policy '%.64s' is a file; a model may name only a policy of the policy directories", policy);
        const char *net = json_string_value(json_object_get(args, "net"));
        const char *session_net = json_string_value(json_object_get(s->create_params, "net"));
        if (net && strcmp(net, "none") && !(session_net && !strcmp(net, session_net)))
                return nsbox_err(err, 0, "create_sandbox: net '%.16s' needs the session started with --net %.16s", net, net);
        return 0;
}

static const char *default_sandbox(mcp_server *s, const char **ret_code, nsbox_error *err)
{
        if (s->default_id)
                return s->default_id;
        json_t *res = NULL;
        if (create_sandbox(s, json_deep_copy(s->create_params), &res, ret_code, err) < 0) {
                nsbox_err_wrap(err, -1, "create the default sandbox");
                return NULL;
        }
        s->default_id = strdup(json_string_value(json_object_get(res, "id")));
        json_decref(res);
        if (!s->default_id)
                nsbox_err(err, ENOMEM, "create the default sandbox");
        return s->default_id;
}

static void forget_owned(mcp_server *s, const char *id)
{
        size_t i;
        json_t *v;
        json_array_foreach(s->owned, i, v)
                if (!strcmp(json_string_value(v), id)) {
                        json_array_remove(s->owned, i);
                        break;
                }
        if (s->default_id && !strcmp(s->default_id, id)) {
                free(s->default_id);
                s->default_id = NULL;
        }
}

/* At the end: every sandbox the session created goes, whatever happened to the connection. */
static void destroy_owned(mcp_server *s)
{
        s->closing = true; /* a second signal must not cut the destroys short */
        while (json_array_size(s->owned) > 0) {
                _cleanup_free_ char *id = strdup(json_string_value(json_array_get(s->owned, 0)));
                json_array_remove(s->owned, 0);
                if (!id)
                        continue;
                json_t *res = NULL;
                const char *code = NULL;
                nsbox_error err = { 0 };
                if (daemon_call(s, "destroy", json_pack("{ss}", "sandbox", id), &res, &code, &err) < 0 &&
                    !(code && !strcmp(code, "not_found")))
                        fprintf(stderr, "nsbox: mcp: destroy sandbox %s: %s\n", id, err.msg ? err.msg : "failed");
                nsbox_error_clear(&err);
                json_decref(res);
        }
}

/* ---- methods ---------------------------------------------------------------------------------- */

static json_t *make_tool_list(void)
{
        json_t *tools = tool_schemas("mcp");
        if (!tools)
                return NULL;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
                json_t *schema = json_object_get(t, "inputSchema");
                json_t *props = json_object_get(schema, "properties");
                if (!props) {
                        props = json_object();
                        json_object_set_new(schema, "properties", props);
                }
                json_object_set_new(props, "sandbox", json_pack("{ss ss}", "type", "string", "description", sandbox_param_description));
        }
        for (i = 0; i < ARRAY_SIZE(lifecycle_tools); i++) {
                json_error_t je;
                json_t *schema = json_loads(lifecycle_tools[i].schema, 0, &je);
                if (!schema) { /* a bug in the table above: the unit of this file is its test */
                        json_decref(tools);
                        return NULL;
                }
                json_array_append_new(tools, json_pack("{ss ss so}", "name", lifecycle_tools[i].name, "description",
                                                       lifecycle_tools[i].description, "inputSchema", schema));
        }
        return json_pack("{so}", "tools", tools);
}

static int method_initialize(mcp_server *s, json_t *id, json_t *params)
{
        const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
        if (!json_is_object(params) || !asked)
                return send_error(id, RPC_INVALID_PARAMS, "initialize: 'protocolVersion' must be a string");
        s->version = mcp_versions[0];
        for (size_t i = 0; i < ARRAY_SIZE(mcp_versions); i++)
                if (!strcmp(asked, mcp_versions[i]))
                        s->version = mcp_versions[i];
        return send_result(id, json_pack("{ss s{s{sb}} s{ss ss ss} ss}", "protocolVersion", s->version, "capabilities", "tools",
                                         "listChanged", 0, "serverInfo", "name", "nsbox", "title", "nsbox sandboxes", "version",
                                         NSBOX_VERSION, "instructions",
                                         "Tools run in an isolated Linux sandbox (nsbox): files you write and commands you run stay "
                                         "inside it. Without a 'sandbox' argument, tools use this session's default sandbox."));
}

/* tools/call of a lifecycle tool: the reply (a tools/call result) or NULL for an unknown one. */
static json_t *call_lifecycle(mcp_server *s, const char *name, json_t *args)
{
        json_t *res = NULL;
        const char *code = NULL;
        nsbox_error err = { 0 };
        json_t *reply = NULL;
        int r;
        if (!strcmp(name, "create_sandbox")) {
                r = check_model_create(s, args, &err);
                if (r < 0)
                        code = "permission_denied";
                else
                        r = create_sandbox(s, json_deep_copy(args), &res, &code, &err);
        } else if (!strcmp(name, "list_sandboxes")) {
                r = daemon_call(s, "list", json_deep_copy(args), &res, &code, &err);
                if (r == 0 && json_is_object(res))
                        json_object_set_new(res, "default", s->default_id ? json_string(s->default_id) : json_null());
        } else if (!strcmp(name, "snapshot_sandbox") || !strcmp(name, "destroy_sandbox") || !strcmp(name, "reset_sandbox")) {
                bool destroy = !strcmp(name, "destroy_sandbox"), reset = !strcmp(name, "reset_sandbox");
                json_t *p = json_deep_copy(args);
                const char *sb = json_string_value(json_object_get(args, "sandbox"));
                if (!sb && !(sb = destroy ? s->default_id : default_sandbox(s, &code, &err))) {
                        json_decref(p);
                        if (destroy)
                                return tool_error(s, "not_found", "destroy_sandbox: no 'sandbox' given and no default sandbox yet");
                        reply = tool_error(s, code, err.msg);
                        nsbox_error_clear(&err);
                        return reply;
                }
                json_object_set_new(p, "sandbox", json_string(sb));
                r = daemon_call(s, destroy ? "destroy" : reset ? "reset" : "snapshot", p, &res, &code, &err);
                if (r == 0 && destroy)
                        forget_owned(s, json_string_value(json_object_get(res, "destroyed")) ?: sb);
        } else {
                return NULL;
        }
        reply = r == 0 ? tool_result(s, res, false, NULL) : tool_error(s, code, err.msg);
        json_decref(res);
        nsbox_error_clear(&err);
        return reply;
}

static int method_tools_call(mcp_server *s, json_t *id, json_t *params)
{
        const char *name = json_string_value(json_object_get(params, "name"));
        json_t *args = json_object_get(params, "arguments");
        if (!json_is_object(params) || !name)
                return send_error(id, RPC_INVALID_PARAMS, "tools/call: 'name' must be a string");
        if (args && !json_is_object(args) && !json_is_null(args))
                return send_error(id, RPC_INVALID_PARAMS, "tools/call %s: 'arguments' must be an object", name);
        json_t *sandbox = json_object_get(args, "sandbox");
        if (sandbox && !json_is_string(sandbox) && !json_is_null(sandbox))
                return send_error(id, RPC_INVALID_PARAMS, "tools/call %s: 'sandbox' must be a sandbox id (a string)", name);
        json_t *empty = json_object();
        if (!json_is_object(args))
                args = empty;
        json_t *reply = call_lifecycle(s, name, args);
        if (reply) {
                json_decref(empty);
                return send_result(id, reply);
        }
        const char *tool = tool_canonical_name(name);
        if (!tool) {
                json_decref(empty);
                return send_error(id, RPC_INVALID_PARAMS, "tools/call: unknown tool '%s' (see tools/list)", name);
        }
        const char *code = NULL;
        nsbox_error err = { 0 };
        const char *sb = json_string_value(sandbox);
        if (!sb)
                sb = default_sandbox(s, &code, &err);
        if (!sb) {
                reply = tool_error(s, code, err.msg);
        } else {
                json_t *p = json_deep_copy(args), *res = NULL;
                json_object_del(p, "sandbox");
                /* by the name as called: nsboxd maps an alias's params (tools/alias.c) */
                if (daemon_call(s, "call", json_pack("{ss ss so}", "sandbox", sb, "tool", name, "params", p), &res, &code, &err) == 0)
                        reply = tool_result(s, res, false, NULL);
                else
                        reply = tool_error(s, code, err.msg);
                json_decref(res);
        }
        nsbox_error_clear(&err);
        json_decref(empty);
        return send_result(id, reply);
}

/* One message from the client.  <0 only when stdout failed. */
static int handle_line(mcp_server *s, const char *line, size_t len)
{
        json_error_t je;
        json_t *msg = nsbox_json_loadb(line, len, &je);
        if (!msg) {
                /* valid JSON that is not an object or array is an invalid request, not a parse error */
                json_t *any = json_loadb(line, len, JSON_DECODE_ANY, NULL);
                json_decref(any);
                if (any)
                        return send_error(NULL, RPC_INVALID_REQUEST, "invalid request: expected a JSON-RPC 2.0 object");
                return send_error(NULL, RPC_PARSE_ERROR, "parse error: %s at line %d column %d", je.text, je.line, je.column);
        }
        int r = 0;
        json_t *id = json_object_get(msg, "id");
        const char *method = json_string_value(json_object_get(msg, "method"));
        bool valid_id = json_is_string(id) || json_is_integer(id);
        if (!json_is_object(msg) || strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") || (id && !valid_id)) {
                r = send_error(valid_id ? id : NULL, RPC_INVALID_REQUEST,
                               json_is_array(msg) ? "invalid request: batches are not supported" :
                               id && !valid_id    ? "invalid request: 'id' must be a string or an integer" :
                                                    "invalid request: expected a JSON-RPC 2.0 object");
                json_decref(msg);
                return r;
        }
        if (!method) {
                /* a response to a request of ours (we send none), or garbage */
                if (!id || !(json_object_get(msg, "result") || json_object_get(msg, "error")))
                        r = send_error(id, RPC_INVALID_REQUEST, "invalid request: 'method' must be a string");
                json_decref(msg);
                return r;
        }
        json_t *params = json_object_get(msg, "params");
        if (!id) {
                /* notifications: initialized, cancelled (requests are served in order, so a cancel
                 * arrives after its request is done), and any other is ignored as the spec asks */
                json_decref(msg);
                return 0;
        }
        if (params && !json_is_object(params)) {
                r = send_error(id, RPC_INVALID_PARAMS, "%s: 'params' must be an object", method);
        } else if (!strcmp(method, "initialize")) {
                r = method_initialize(s, id, params);
        } else if (!strcmp(method, "ping")) {
                r = send_result(id, NULL);
        } else if (!strcmp(method, "tools/list")) {
                r = send_result(id, json_deep_copy(s->tools));
        } else if (!strcmp(method, "tools/call")) {
                r = method_tools_call(s, id, params);
        } else {
                r = send_error(id, RPC_METHOD_NOT_FOUND, "method not found: '%s'", method);
        }
        json_decref(msg);
        return r;
}

/* ---- main loop -------------------------------------------------------------------------------- */

static int serve(mcp_server *s)
{
        _cleanup_sb_ strbuf line;
        sb_init(&line, 0);
        _cleanup_free_ char *buf = malloc(MCP_READ_CHUNK);
        bool discarding = false; /* the rest of an over-long line */
        if (!buf)
                return -ENOMEM;
        while (!quit_signal) {
                struct pollfd p = { .fd = 0, .events = POLLIN };
                int n = ppoll(&p, 1, NULL, &s->unblocked);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                ssize_t k = read(0, buf, MCP_READ_CHUNK);
                if (k < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : 0; /* end of input: the client is done */
                for (char *at = buf, *end = buf + k; at < end && !quit_signal;) {
                        char *nl = memchr(at, '\n', (size_t)(end - at));
                        size_t take = nl ? (size_t)(nl - at) : (size_t)(end - at);
                        if (!discarding && line.len + take > MCP_MAX_LINE) {
                                int r = send_error(NULL, RPC_INVALID_REQUEST, "invalid request: a message longer than %u MiB",
                                                   MCP_MAX_LINE >> 20);
                                if (r < 0)
                                        return r;
                                discarding = true;
                                line.len = 0;
                        }
                        if (!discarding && sb_append(&line, at, take) < 0)
                                return -ENOMEM;
                        at += take + (nl ? 1 : 0);
                        if (!nl)
                                break;
                        if (discarding) {
                                discarding = false;
                                continue;
                        }
                        size_t len = line.len;
                        while (len > 0 && strchr(" \t\r", line.buf[len - 1]))
                                len--;
                        if (len > 0) {
                                int r = handle_line(s, line.buf, len);
                                if (r < 0)
                                        return r;
                        }
                        line.len = 0;
                }
        }
        return 0;
}

int nsbox_cmd_mcp(int argc, char **argv)
{
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                fputs(usage_mcp, stdout);
                return 0;
        }
        nsbox_error err = { 0 };
        nsbox_run_options o;
        mcp_server s = { .cl = { .fd = -1 } };
        int status = 0;
        if (nsbox_run_options_parse(argc, argv, &o, &err) < 0) {
                fprintf(stderr, "nsbox: %s\n", err.msg);
                nsbox_error_clear(&err);
                nsbox_run_options_release(&o);
                return EXIT_NSBOX;
        }
        if (o.count != 1 || o.reuse || o.json || o.record) {
                nsbox_run_options_release(&o);
                return nsbox_cli_usage_error("mcp", "--count, --reuse, --json and --record do not apply to nsbox mcp");
        }
        /* the policy and every value checked as run checks them, before initialize is
         * answered: a client must not see a healthy server whose every tool call fails */
        nsbox_policy *p = NULL;
        if (nsbox_run_options_policy(&o, &p, &err) < 0) {
                _cleanup_free_ char *safe = nsbox_escape_controls(err.msg ? err.msg : "options");
                fprintf(stderr, "nsbox: mcp: %s\n", safe ? safe : "options");
                nsbox_error_clear(&err);
                nsbox_run_options_release(&o);
                return EXIT_NSBOX;
        }
        nsbox_policy_free(p);
        if (nsbox_cli_create_params("mcp", &o, &s.create_params) < 0) {
                nsbox_run_options_release(&o);
                return EXIT_NSBOX;
        }
        nsbox_run_options_release(&o);
        s.owned = json_array();
        s.tools = make_tool_list();
        if (!s.owned || !s.tools) {
                fprintf(stderr, "nsbox: mcp: out of memory\n");
                status = EXIT_NSBOX;
                goto out;
        }
        /* a client that goes away must not kill us before the sandboxes are destroyed */
        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&s.blocked);
        sigaddset(&s.blocked, SIGTERM);
        sigaddset(&s.blocked, SIGINT);
        sigaddset(&s.blocked, SIGHUP);
        sigprocmask(SIG_BLOCK, &s.blocked, &s.unblocked);
        sigprocmask(SIG_SETMASK, NULL, &s.blocked);
        struct sigaction sa = { .sa_handler = on_quit_signal };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        int r = serve(&s);
        if (r < 0 && r != -EPIPE)
                fprintf(stderr, "nsbox: mcp: %s\n", strerror(-r));
        destroy_owned(&s);
        status = r < 0 && r != -EPIPE ? EXIT_NSBOX : 0;
out:
        nsbox_client_close(&s.cl);
        json_decref(s.create_params);
        json_decref(s.owned);
        json_decref(s.tools);
        free(s.default_id);
        return status;
}
