/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tool list a client loads: every tool with the exact params the handlers read, schemas that
 * parse and are consistent, names and aliases that resolve, and each client format's shape. */
#include <check.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../../runtime/util.h"
#include "../../tools/registry.h"
#include "unit.h"

/* Every tool, its params and its required params, as nsbox-agent(1) documents them. */
static const struct {
        const char *name;
        const char *params;   /* space-separated, exact */
        const char *required; /* space-separated, in order */
} documented[] = {
        { "exec", "cmd shell cwd env stdin stdin_open timeout background max_output stream tag detach pty", "" },
        { "process_list", "", "" },
        { "process_wait", "pid tag timeout", "" },
        { "process_kill", "pid tag signal", "" },
        { "process_write_stdin", "pid tag data data_b64", "" },
        { "process_close_stdin", "pid tag", "" },
        { "process_resize", "pid tag cols rows", "cols rows" },
        { "process_connect", "pid tag follow", "" },
        { "watch", "path recursive entries network_mounts", "path" },
        { "read_file", "path offset limit encoding byte_offset byte_limit skip_holes", "path" },
        { "write_file", "path content content_b64 data mode append parents", "path" },
        { "write_files", "files", "files" },
        { "edit_file", "path old_string new_string replace_all", "path old_string new_string" },
        { "list_dir", "path depth metadata", "" },
        { "stat", "path follow metadata", "path" },
        { "exists", "path", "path" },
        { "mkdir", "path parents mode", "path" },
        { "remove", "path recursive", "path" },
        { "rename", "from to overwrite write metadata", "from to" },
        { "glob", "pattern path", "pattern" },
        { "grep", "pattern path glob fixed ignore_case max_count context", "pattern" },
        { "git_init", "path initial_branch bare", "" },
        { "git_status", "path untracked", "" },
        { "git_diff", "path staged paths context", "" },
        { "git_log", "path max_count ref", "" },
        { "git_commit", "path message all paths author_name author_email allow_empty", "message" },
        { "run_code", "code language context timeout", "code" },
        { "create_code_context", "language cwd", "" },
        { "list_code_contexts", "", "" },
        { "restart_code_context", "context", "context" },
        { "remove_code_context", "context", "context" },
};

/* The helpers return why a value is wrong (NULL if it is right), so that the assertion, and the
 * name a failure is reported under, stays in the test. */
static char why[1024];

/* obj's keys are exactly the space-separated names in want. */
static const char *keys_differ(const json_t *obj, const char *want, const char *where)
{
        if (!json_is_object(obj))
                return snprintf(why, sizeof(why), "%s: not an object", where), why;
        size_t n_want = 0;
        char copy[512];
        snprintf(copy, sizeof(copy), "%s", want);
        for (char *save = NULL, *k = strtok_r(copy, " ", &save); k; k = strtok_r(NULL, " ", &save), n_want++)
                if (!json_object_get(obj, k))
                        return snprintf(why, sizeof(why), "%s: no '%s'", where, k), why;
        if (json_object_size(obj) != n_want) {
                _cleanup_free_ char *text = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
                snprintf(why, sizeof(why), "%s: has other keys than '%s': %s", where, want, text ? text : "?");
                return why;
        }
        return NULL;
}

/* arr is an array of exactly the strings in want, in that order. */
static const char *strings_differ(const json_t *arr, const char *want, const char *where)
{
        if (!json_is_array(arr))
                return snprintf(why, sizeof(why), "%s: not an array", where), why;
        size_t i = 0;
        char copy[512];
        snprintf(copy, sizeof(copy), "%s", want);
        for (char *save = NULL, *k = strtok_r(copy, " ", &save); k; k = strtok_r(NULL, " ", &save), i++) {
                const char *got = json_string_value(json_array_get(arr, i));
                if (!got || strcmp(got, k))
                        return snprintf(why, sizeof(why), "%s[%zu] is '%s', expected '%s'", where, i,
                                        got ? got : "(not a string)", k), why;
        }
        if (json_array_size(arr) != i)
                return snprintf(why, sizeof(why), "%s has %zu items, expected %zu", where, json_array_size(arr), i), why;
        return NULL;
}

/* An object schema a model and a validator can use: "type": "object", a "properties" object whose
 * every entry has a type and a description, "required" naming only existing properties, extra
 * properties not forbidden; nested object schemas (array items) likewise. */
static const char *object_schema_problem(const json_t *schema, const char *where)
{
        if (!json_is_object(schema))
                return snprintf(why, sizeof(why), "%s: schema is not an object", where), why;
        const char *type = json_string_value(json_object_get(schema, "type"));
        if (!type || strcmp(type, "object"))
                return snprintf(why, sizeof(why), "%s: type is not \"object\"", where), why;
        json_t *props = json_object_get(schema, "properties");
        if (!json_is_object(props))
                return snprintf(why, sizeof(why), "%s: properties is not an object", where), why;
        if (json_is_false(json_object_get(schema, "additionalProperties")))
                return snprintf(why, sizeof(why), "%s: forbids additional properties", where), why;
        json_t *required = json_object_get(schema, "required");
        if (required && !json_is_array(required))
                return snprintf(why, sizeof(why), "%s: required is not an array", where), why;
        size_t i;
        json_t *r;
        json_array_foreach(required, i, r) {
                if (!json_is_string(r) || !json_object_get(props, json_string_value(r)))
                        return snprintf(why, sizeof(why), "%s: required[%zu] is not a property", where, i), why;
        }
        const char *key;
        json_t *p;
        json_object_foreach(props, key, p) {
                json_t *t = json_object_get(p, "type");
                if (!json_is_string(t) && !json_is_array(t))
                        return snprintf(why, sizeof(why), "%s.%s: no type", where, key), why;
                const char *d = json_string_value(json_object_get(p, "description"));
                if (!d || strlen(d) < 8)
                        return snprintf(why, sizeof(why), "%s.%s: no description", where, key), why;
                json_t *items = json_object_get(p, "items");
                if (json_is_string(t) && !strcmp(json_string_value(t), "array") && !json_is_object(items))
                        return snprintf(why, sizeof(why), "%s.%s: an array without items", where, key), why;
                const char *item_type = json_string_value(json_object_get(items, "type"));
                if (item_type && !strcmp(item_type, "object")) {
                        char inner[256];
                        snprintf(inner, sizeof(inner), "%s.%s[]", where, key);
                        const char *problem = object_schema_problem(items, inner);
                        if (problem)
                                return problem;
                }
        }
        return NULL;
}

/* The entry of a format's list with that name (under "function" for openai), or NULL. */
static json_t *entry_named(json_t *list, const char *name)
{
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
                json_t *f = json_object_get(e, "function");
                const char *n = json_string_value(json_object_get(f ? f : e, "name"));
                if (n && !strcmp(n, name))
                        return e;
        }
        return NULL;
}

static json_t *openai_params(json_t *list, const char *name)
{
        return json_object_get(json_object_get(entry_named(list, name), "function"), "parameters");
}

/* ---- the specs ---- */

START_TEST(test_every_schema_parses_as_an_object_schema)
{
        size_t n;
        const tool_spec *specs = tool_specs(&n);
        for (size_t i = 0; i < n; i++) {
                json_error_t jerr;
                json_auto_t *schema = json_loads(specs[i].schema, JSON_REJECT_DUPLICATES, &jerr);
                ck_assert_msg(schema, "%s: schema does not parse: %s (column %d)", specs[i].name, jerr.text, jerr.column);
                const char *problem = object_schema_problem(schema, specs[i].name);
                ck_assert_msg(!problem, "%s", problem);
        }
}
END_TEST

START_TEST(test_every_documented_tool_is_listed_with_exact_params)
{
        size_t n;
        const tool_spec *specs = tool_specs(&n);
        ck_assert_uint_eq(n, ARRAY_SIZE(documented));
        for (size_t i = 0; i < ARRAY_SIZE(documented); i++) {
                const tool_spec *s = tool_spec_find(documented[i].name);
                ck_assert_msg(s, "%s is missing", documented[i].name);
                ck_assert_str_eq(s->name, documented[i].name);
                /* the list's order is stable: the documented one */
                ck_assert_str_eq(specs[i].name, documented[i].name);

                json_auto_t *schema = json_loads(s->schema, 0, NULL);
                ck_assert_ptr_nonnull(schema);
                const char *problem = keys_differ(json_object_get(schema, "properties"), documented[i].params, s->name);
                ck_assert_msg(!problem, "%s", problem);
                json_t *required = json_object_get(schema, "required");
                if (required || *documented[i].required) {
                        problem = strings_differ(required, documented[i].required, s->name);
                        ck_assert_msg(!problem, "%s required: %s", s->name, problem);
                }
        }
}
END_TEST

START_TEST(test_params_have_the_documented_types)
{
        struct {
                const char *tool, *param, *type;
        } want[] = {
                { "exec", "cmd", "array" },           { "exec", "shell", "string" },
                { "exec", "env", "object" },          { "exec", "timeout", "number" },
                { "exec", "background", "boolean" },  { "exec", "max_output", "integer" },
                { "process_wait", "pid", "integer" }, { "process_write_stdin", "data", "string" },
                { "read_file", "offset", "integer" }, { "read_file", "limit", "integer" },
                { "write_file", "append", "boolean" }, { "write_files", "files", "array" },
                { "edit_file", "replace_all", "boolean" }, { "list_dir", "depth", "integer" },
                { "grep", "max_count", "integer" },   { "git_diff", "paths", "array" },
                { "git_commit", "message", "string" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                json_auto_t *schema = json_loads(tool_spec_find(want[i].tool)->schema, 0, NULL);
                json_t *p = json_object_get(json_object_get(schema, "properties"), want[i].param);
                const char *type = json_string_value(json_object_get(p, "type"));
                ck_assert_msg(type && !strcmp(type, want[i].type), "%s.%s is %s, expected %s", want[i].tool,
                              want[i].param, type ? type : "(none)", want[i].type);
        }

        /* exec.cmd is argv, env maps names to strings */
        json_auto_t *exec = json_loads(tool_spec_find("exec")->schema, 0, NULL);
        json_t *props = json_object_get(exec, "properties");
        json_t *cmd_items = json_object_get(json_object_get(props, "cmd"), "items");
        ck_assert_str_eq(json_string_value(json_object_get(cmd_items, "type")), "string");
        json_t *env_values = json_object_get(json_object_get(props, "env"), "additionalProperties");
        ck_assert_str_eq(json_string_value(json_object_get(env_values, "type")), "string");

        /* mode and signal take a number or a string */
        const char *either[][2] = { { "write_file", "mode" }, { "mkdir", "mode" }, { "process_kill", "signal" } };
        for (size_t i = 0; i < ARRAY_SIZE(either); i++) {
                json_auto_t *schema = json_loads(tool_spec_find(either[i][0])->schema, 0, NULL);
                json_t *t = json_object_get(json_object_get(json_object_get(schema, "properties"), either[i][1]), "type");
                ck_assert_msg(json_array_size(t) == 2, "%s.%s is not number or string", either[i][0], either[i][1]);
        }

        /* read_file.encoding is one of two words */
        json_auto_t *rf = json_loads(tool_spec_find("read_file")->schema, 0, NULL);
        json_t *encoding = json_object_get(json_object_get(rf, "properties"), "encoding");
        const char *problem = strings_differ(json_object_get(encoding, "enum"), "text base64", "read_file.encoding");
        ck_assert_msg(!problem, "%s", problem);
}
END_TEST

START_TEST(test_descriptions_say_what_each_tool_returns_and_its_defaults)
{
        size_t n;
        const tool_spec *specs = tool_specs(&n);
        for (size_t i = 0; i < n; i++) {
                ck_assert_msg(strcasestr(specs[i].description, "returns"), "%s: description does not say what it returns",
                              specs[i].name);
                /* one paragraph, no trailing blank */
                ck_assert_msg(!strchr(specs[i].description, '\n'), "%s: description has a newline", specs[i].name);
                size_t len = strlen(specs[i].description);
                ck_assert_msg(len > 20 && specs[i].description[len - 1] == '.', "%s: description '%s'",
                              specs[i].name, specs[i].description);
        }
        /* defaults a model needs are in the param descriptions */
        const char *defaults[][3] = {
                { "exec", "max_output", "1048576" }, { "read_file", "limit", "2000" },
                { "read_file", "offset", "default 0" }, { "process_kill", "signal", "KILL" },
                { "write_file", "parents", "default true" }, { "grep", "max_count", "1000" },
                { "git_log", "max_count", "20" },   { "git_init", "initial_branch", "main" },
                { "git_diff", "context", "3" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(defaults); i++) {
                json_auto_t *schema = json_loads(tool_spec_find(defaults[i][0])->schema, 0, NULL);
                json_t *p = json_object_get(json_object_get(schema, "properties"), defaults[i][1]);
                UNIT_ASSERT_CONTAINS(json_string_value(json_object_get(p, "description")), defaults[i][2]);
        }
}
END_TEST

START_TEST(test_names_and_aliases_are_unique_function_names)
{
        size_t n;
        const tool_spec *specs = tool_specs(&n);
        const char *all[64];
        size_t n_all = 0;
        for (size_t i = 0; i < n; i++) {
                ck_assert_ptr_nonnull(specs[i].aliases);
                all[n_all++] = specs[i].name;
                for (const char *const *a = specs[i].aliases; *a; a++)
                        all[n_all++] = *a;
                ck_assert_uint_lt(n_all, ARRAY_SIZE(all) - 4);
        }
        for (size_t i = 0; i < n_all; i++) {
                /* what OpenAI and MCP accept as a tool name */
                ck_assert_msg(strlen(all[i]) >= 1 && strlen(all[i]) <= 64, "'%s' has a bad length", all[i]);
                ck_assert_msg(strspn(all[i], "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(all[i]),
                              "'%s' is not lowercase letters, digits and _", all[i]);
                for (size_t j = i + 1; j < n_all; j++)
                        ck_assert_msg(strcmp(all[i], all[j]), "'%s' is listed twice", all[i]);
        }
}
END_TEST

/* ---- lookup ---- */

START_TEST(test_canonical_names_find_their_own_tool)
{
        size_t n;
        const tool_spec *specs = tool_specs(&n);
        for (size_t i = 0; i < n; i++) {
                ck_assert_ptr_eq(tool_spec_find(specs[i].name), &specs[i]);
                ck_assert_str_eq(tool_canonical_name(specs[i].name), specs[i].name);
        }
}
END_TEST

START_TEST(test_ls_resolves_to_list_dir)
{
        const tool_spec *s = tool_spec_find("ls");
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s->name, "list_dir");
        ck_assert_str_eq(tool_canonical_name("ls"), "list_dir");
}
END_TEST

START_TEST(test_run_commands_resolves_to_exec)
{
        const tool_spec *s = tool_spec_find("run_commands");
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s->name, "exec");
        ck_assert_ptr_eq(s, tool_spec_find("exec"));
        ck_assert_str_eq(tool_canonical_name("run_commands"), "exec");
}
END_TEST

START_TEST(test_unknown_names_are_not_found)
{
        const char *unknown[] = { "", "nope", "LS", "Read_File", "read_file ", " exec", "run_command",
                                  "read", "list_dir\n", "Git", "process" };
        for (size_t i = 0; i < ARRAY_SIZE(unknown); i++) {
                ck_assert_msg(!tool_spec_find(unknown[i]), "'%s' was found", unknown[i]);
                ck_assert_msg(!tool_canonical_name(unknown[i]), "'%s' has a canonical name", unknown[i]);
        }
        ck_assert_ptr_null(tool_spec_find(NULL));
        ck_assert_ptr_null(tool_canonical_name(NULL));
}
END_TEST

START_TEST(test_tool_specs_count_is_optional)
{
        size_t n = 0;
        ck_assert_ptr_eq(tool_specs(NULL), tool_specs(&n));
        ck_assert_uint_eq(n, ARRAY_SIZE(documented));
}
END_TEST

/* ---- formats ---- */

START_TEST(test_json_format_lists_every_tool_with_params_and_aliases)
{
        size_t n;
        const tool_spec *specs = tool_specs(&n);
        json_auto_t *list = tool_schemas("json");
        ck_assert_ptr_nonnull(list);
        ck_assert(json_is_array(list));
        ck_assert_uint_eq(json_array_size(list), n);
        for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(list, i);
                const char *problem = keys_differ(e, "name description parameters aliases", specs[i].name);
                ck_assert_msg(!problem, "%s", problem);
                ck_assert_str_eq(json_string_value(json_object_get(e, "name")), specs[i].name);
                ck_assert_str_eq(json_string_value(json_object_get(e, "description")), specs[i].description);
                problem = object_schema_problem(json_object_get(e, "parameters"), specs[i].name);
                ck_assert_msg(!problem, "%s", problem);
                ck_assert(json_is_array(json_object_get(e, "aliases")));
        }
        const char *problem = strings_differ(json_object_get(entry_named(list, "list_dir"), "aliases"), "ls", "list_dir aliases");
        ck_assert_msg(!problem, "%s", problem);
        problem = strings_differ(json_object_get(entry_named(list, "exec"), "aliases"), "run_commands shell git", "exec aliases");
        ck_assert_msg(!problem, "%s", problem);
        problem = strings_differ(json_object_get(entry_named(list, "grep"), "aliases"), "search", "grep aliases");
        ck_assert_msg(!problem, "%s", problem);
        /* aliases are not tools of their own here */
        ck_assert_ptr_null(entry_named(list, "run_commands"));
        ck_assert_ptr_null(entry_named(list, "ls"));
        /* write_file keeps every way to give content */
        problem = keys_differ(json_object_get(json_object_get(entry_named(list, "write_file"), "parameters"), "properties"),
                              "path content content_b64 data mode append parents", "write_file");
        ck_assert_msg(!problem, "%s", problem);
}
END_TEST

START_TEST(test_mcp_format_lists_every_tool_with_input_schema)
{
        size_t n;
        tool_specs(&n);
        json_auto_t *list = tool_schemas("mcp");
        ck_assert_ptr_nonnull(list);
        ck_assert(json_is_array(list));
        ck_assert_uint_eq(json_array_size(list), n - 1); /* all but watch, which streams until cancelled */
        ck_assert_ptr_null(entry_named(list, "watch"));
        for (size_t i = 0; i < ARRAY_SIZE(documented); i++) {
                if (!strcmp(documented[i].name, "watch"))
                        continue;
                json_t *e = entry_named(list, documented[i].name);
                ck_assert_msg(e, "%s is missing", documented[i].name);
                const char *problem = keys_differ(e, "name description inputSchema", documented[i].name);
                ck_assert_msg(!problem, "%s", problem);
                problem = object_schema_problem(json_object_get(e, "inputSchema"), documented[i].name);
                ck_assert_msg(!problem, "%s", problem);
                problem = keys_differ(json_object_get(json_object_get(e, "inputSchema"), "properties"),
                                      documented[i].params, documented[i].name);
                ck_assert_msg(!problem, "%s", problem);
        }
        ck_assert_ptr_null(entry_named(list, "run_commands"));
        json_t *schema = json_object_get(entry_named(list, "write_files"), "inputSchema");
        json_t *files = json_object_get(json_object_get(schema, "properties"), "files");
        const char *problem = keys_differ(json_object_get(json_object_get(files, "items"), "properties"),
                                          "path content content_b64 data mode", "write_files.files[]");
        ck_assert_msg(!problem, "%s", problem);
}
END_TEST

START_TEST(test_openai_format_is_chat_completions_tools)
{
        size_t n;
        tool_specs(&n);
        json_auto_t *list = tool_schemas("openai");
        ck_assert_ptr_nonnull(list);
        ck_assert(json_is_array(list));
        ck_assert_uint_eq(json_array_size(list), n + 1 - 1); /* + run_commands, - watch */
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
                char where[32];
                snprintf(where, sizeof(where), "openai[%zu]", i);
                const char *problem = keys_differ(e, "type function", where);
                ck_assert_msg(!problem, "%s", problem);
                ck_assert_str_eq(json_string_value(json_object_get(e, "type")), "function");
                json_t *f = json_object_get(e, "function");
                problem = keys_differ(f, "name description parameters", where);
                ck_assert_msg(!problem, "%s", problem);
                problem = object_schema_problem(json_object_get(f, "parameters"), where);
                ck_assert_msg(!problem, "%s", problem);
                ck_assert_uint_gt(json_string_length(json_object_get(f, "description")), 20);
        }
        for (size_t k = 0; k < ARRAY_SIZE(documented); k++)
                ck_assert_msg(!strcmp(documented[k].name, "watch") == !entry_named(list, documented[k].name), "%s is %s",
                              documented[k].name, strcmp(documented[k].name, "watch") ? "missing" : "listed (it streams until cancelled)");
        /* run_commands is a function of its own, right after exec */
        json_t *exec = entry_named(list, "exec"), *run = entry_named(list, "run_commands");
        ck_assert_ptr_nonnull(run);
        size_t exec_at = json_array_size(list), run_at = exec_at;
        json_array_foreach(list, i, e) {
                if (e == exec)
                        exec_at = i;
                if (e == run)
                        run_at = i;
        }
        ck_assert_uint_eq(run_at, exec_at + 1);
}
END_TEST

START_TEST(test_openai_tutorial_tools_have_exactly_its_params)
{
        json_auto_t *list = tool_schemas("openai");
        ck_assert_ptr_nonnull(list);
        struct {
                const char *name, *params, *required;
        } want[] = {
                { "read_file", "path", "path" },
                { "write_file", "path data", "path data" },
                { "write_files", "files", "files" },
                { "run_commands", "command", "command" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                json_t *params = openai_params(list, want[i].name);
                ck_assert_msg(params, "%s is missing", want[i].name);
                const char *problem = keys_differ(params, "type properties required", want[i].name);
                ck_assert_msg(!problem, "%s", problem);
                json_t *props = json_object_get(params, "properties");
                problem = keys_differ(props, want[i].params, want[i].name);
                ck_assert_msg(!problem, "%s", problem);
                problem = strings_differ(json_object_get(params, "required"), want[i].required, want[i].name);
                ck_assert_msg(!problem, "%s", problem);
        }
        /* the strings are strings */
        const char *strings[][2] = { { "read_file", "path" }, { "write_file", "path" }, { "write_file", "data" },
                                     { "run_commands", "command" } };
        for (size_t i = 0; i < ARRAY_SIZE(strings); i++) {
                json_t *p = json_object_get(json_object_get(openai_params(list, strings[i][0]), "properties"), strings[i][1]);
                ck_assert_str_eq(json_string_value(json_object_get(p, "type")), "string");
        }
        /* write_files: files is an array of {path: string, data: string}, both required */
        json_t *files = json_object_get(json_object_get(openai_params(list, "write_files"), "properties"), "files");
        ck_assert_str_eq(json_string_value(json_object_get(files, "type")), "array");
        json_t *items = json_object_get(files, "items");
        ck_assert_str_eq(json_string_value(json_object_get(items, "type")), "object");
        const char *problem = keys_differ(json_object_get(items, "properties"), "path data", "write_files.files[]");
        ck_assert_msg(!problem, "%s", problem);
        problem = strings_differ(json_object_get(items, "required"), "path data", "write_files.files[] required");
        ck_assert_msg(!problem, "%s", problem);
        const char *item_strings[] = { "path", "data" };
        for (size_t i = 0; i < ARRAY_SIZE(item_strings); i++) {
                json_t *p = json_object_get(json_object_get(items, "properties"), item_strings[i]);
                ck_assert_str_eq(json_string_value(json_object_get(p, "type")), "string");
        }
}
END_TEST

START_TEST(test_openai_other_tools_keep_their_full_schemas)
{
        json_auto_t *openai = tool_schemas("openai");
        json_auto_t *json = tool_schemas("json");
        ck_assert_ptr_nonnull(openai);
        ck_assert_ptr_nonnull(json);
        const char *minimal[] = { "read_file", "write_file", "write_files" };
        ck_assert_ptr_null(openai_params(openai, "watch")); /* one request, one result: no stream */
        for (size_t i = 0; i < ARRAY_SIZE(documented); i++) {
                const char *name = documented[i].name;
                if (!strcmp(name, "watch"))
                        continue;
                bool is_minimal = false;
                for (size_t j = 0; j < ARRAY_SIZE(minimal); j++)
                        is_minimal |= !strcmp(name, minimal[j]);
                json_t *full = json_object_get(entry_named(json, name), "parameters");
                ck_assert_msg(is_minimal != json_equal(openai_params(openai, name), full),
                              "%s: openai parameters %s the full ones", name, is_minimal ? "are" : "differ from");
        }
}
END_TEST

START_TEST(test_unknown_format_gives_null)
{
        const char *unknown[] = { "", "JSON", "OpenAI", "openai ", "anthropic", "xml", "mcp\n" };
        for (size_t i = 0; i < ARRAY_SIZE(unknown); i++) {
                json_t *list = tool_schemas(unknown[i]);
                json_decref(list);
                ck_assert_msg(list == NULL, "format '%s' gave a list", unknown[i]);
        }
        ck_assert_ptr_null(tool_schemas(NULL));
}
END_TEST

START_TEST(test_every_format_round_trips_as_json_text)
{
        const char *formats[] = { "json", "openai", "mcp" };
        for (size_t i = 0; i < ARRAY_SIZE(formats); i++) {
                json_auto_t *list = tool_schemas(formats[i]);
                ck_assert_ptr_nonnull(list);
                _cleanup_free_ char *text = json_dumps(list, JSON_COMPACT);
                ck_assert_ptr_nonnull(text);
                json_error_t jerr;
                json_auto_t *again = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
                ck_assert_msg(again, "%s: %s", formats[i], jerr.text);
                ck_assert(json_equal(list, again));
        }
}
END_TEST

START_TEST(test_each_call_returns_a_value_the_caller_owns)
{
        json_auto_t *first = tool_schemas("mcp");
        ck_assert_ptr_nonnull(first);
        ck_assert_int_eq(first->refcount, 1);
        /* changing one list does not change the next */
        json_object_set_new(json_array_get(first, 0), "name", json_string("changed"));
        json_array_clear(json_object_get(json_object_get(json_array_get(first, 0), "inputSchema"), "required"));
        json_auto_t *second = tool_schemas("mcp");
        ck_assert_ptr_nonnull(second);
        ck_assert_ptr_ne(first, second);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(second, 0), "name")), tool_specs(NULL)[0].name);
        ck_assert(!json_equal(first, second));
}
END_TEST

/* ---- knowlyr's names: aliases whose params are mapped (tools/alias.c) ---- */

/* The params a call of name with params_json becomes, as compact JSON with sorted keys, or
 * "error: <why>". */
static char *mapped(const char *name, const char *params_json)
{
        static char out[1024];
        json_auto_t *in = json_loads(params_json, JSON_ALLOW_NUL, NULL);
        ck_assert_msg(in, "bad test JSON %s", params_json);
        json_t *got = NULL;
        char why[256] = "";
        if (tool_alias_params(name, in, &got, why, sizeof(why)) < 0) {
                snprintf(out, sizeof(out), "error: %s", why);
                return out;
        }
        char *d = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
        snprintf(out, sizeof(out), "%s", d);
        free(d);
        json_decref(got);
        return out;
}

START_TEST(test_knowlyr_names_resolve_to_their_tools)
{
        ck_assert_str_eq(tool_canonical_name("file_read"), "read_file");
        ck_assert_str_eq(tool_canonical_name("file_write"), "write_file");
        ck_assert_str_eq(tool_canonical_name("shell"), "exec");
        ck_assert_str_eq(tool_canonical_name("git"), "exec");
        ck_assert_str_eq(tool_canonical_name("search"), "grep");
}
END_TEST

START_TEST(test_file_read_lines_become_offset_and_limit)
{
        ck_assert_str_eq(mapped("file_read", "{\"path\": \"a\", \"start_line\": 3, \"end_line\": 5}"),
                         "{\"limit\":3,\"offset\":2,\"path\":\"a\"}");
        ck_assert_str_eq(mapped("file_read", "{\"path\": \"a\", \"start_line\": 1, \"end_line\": 1}"),
                         "{\"limit\":1,\"offset\":0,\"path\":\"a\"}");
        ck_assert_str_eq(mapped("file_read", "{\"path\": \"a\", \"start_line\": 10}"), "{\"offset\":9,\"path\":\"a\"}");
        ck_assert_str_eq(mapped("file_read", "{\"path\": \"a\", \"end_line\": 4}"), "{\"limit\":4,\"path\":\"a\"}");
        ck_assert_str_eq(mapped("file_read", "{\"path\": \"a\", \"start_line\": null}"), "{\"path\":\"a\"}");
        ck_assert_str_eq(mapped("file_read", "{\"path\": \"a\"}"), "{\"path\":\"a\"}");
        /* what the mapping does not know goes to read_file as given, for it to judge */
        ck_assert_str_eq(mapped("file_read", "{\"path\": \"a\", \"encoding\": \"base64\"}"), "{\"encoding\":\"base64\",\"path\":\"a\"}");
}
END_TEST

START_TEST(test_file_read_refuses_bad_lines)
{
        const char *bad[][2] = {
                { "{\"path\": \"a\", \"start_line\": 0}", "'start_line' must be a line number" },
                { "{\"path\": \"a\", \"end_line\": -2}", "'end_line' must be a line number" },
                { "{\"path\": \"a\", \"start_line\": \"3\"}", "'start_line' must be a line number" },
                { "{\"path\": \"a\", \"start_line\": 1.5}", "'start_line' must be a line number" },
                { "{\"path\": \"a\", \"start_line\": 5, \"end_line\": 4}", "'end_line' (4) is before 'start_line' (5)" },
                { "{\"path\": \"a\", \"start_line\": 5, \"offset\": 4}", "not both" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                UNIT_ASSERT_CONTAINS(mapped("file_read", bad[i][0]), bad[i][1]);
        ck_assert_str_eq(mapped("file_read", "{\"start_line\": 0}"), "error: file_read: 'start_line' must be a line number, 1 or more");
}
END_TEST

START_TEST(test_shell_and_search_rename_their_params)
{
        ck_assert_str_eq(mapped("shell", "{\"command\": \"ls | wc -l\", \"timeout\": 5}"), "{\"shell\":\"ls | wc -l\",\"timeout\":5}");
        UNIT_ASSERT_CONTAINS(mapped("shell", "{\"command\": \"a\", \"shell\": \"b\"}"), "give 'command' or 'shell', not both");
        ck_assert_str_eq(mapped("search", "{\"pattern\": \"TODO\", \"file_pattern\": \"*.py\"}"), "{\"glob\":\"*.py\",\"pattern\":\"TODO\"}");
        ck_assert_str_eq(mapped("search", "{\"pattern\": \"x\"}"), "{\"pattern\":\"x\"}");
        UNIT_ASSERT_CONTAINS(mapped("search", "{\"pattern\": \"x\", \"file_pattern\": \"a\", \"glob\": \"b\"}"), "not both");
}
END_TEST

START_TEST(test_git_subcommand_is_split_like_shell_words_without_a_shell)
{
        ck_assert_str_eq(mapped("git", "{\"subcommand\": \"log --oneline -n 3\"}"), "{\"cmd\":[\"git\",\"log\",\"--oneline\",\"-n\",\"3\"]}");
        ck_assert_str_eq(mapped("git", "{\"subcommand\": \"  status\\t \"}"), "{\"cmd\":[\"git\",\"status\"]}");
        ck_assert_str_eq(mapped("git", "{\"subcommand\": \"commit -m \\\"two words\\\" --author='A B <a@b>'\"}"),
                         "{\"cmd\":[\"git\",\"commit\",\"-m\",\"two words\",\"--author=A B <a@b>\"]}");
        ck_assert_str_eq(mapped("git", "{\"subcommand\": \"commit -m \\\"say \\\\\\\"hi\\\\\\\"\\\" x\\\\ y ''\"}"),
                         "{\"cmd\":[\"git\",\"commit\",\"-m\",\"say \\\"hi\\\"\",\"x y\",\"\"]}");
        /* no shell: a substitution, a pipe or a variable is a word like any other */
        ck_assert_str_eq(mapped("git", "{\"subcommand\": \"log $(id) | sh; $HOME\"}"),
                         "{\"cmd\":[\"git\",\"log\",\"$(id)\",\"|\",\"sh;\",\"$HOME\"]}");
        /* exec's own params go along */
        ck_assert_str_eq(mapped("git", "{\"subcommand\": \"status\", \"cwd\": \"/w\"}"), "{\"cmd\":[\"git\",\"status\"],\"cwd\":\"/w\"}");
        const char *bad[][2] = {
                { "{}", "'subcommand' must be a string" },
                { "{\"subcommand\": 3}", "'subcommand' must be a string" },
                { "{\"subcommand\": \"a\\u0000b\"}", "without NUL bytes" },
                { "{\"subcommand\": \"   \"}", "'subcommand' is empty" },
                { "{\"subcommand\": \"commit -m \\\"open\"}", "unterminated \"" },
                { "{\"subcommand\": \"commit -m 'open\"}", "unterminated '" },
                { "{\"subcommand\": \"status\", \"shell\": \"id\"}", "not 'cmd', 'shell' or 'command'" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                UNIT_ASSERT_CONTAINS(mapped("git", bad[i][0]), bad[i][1]);
}
END_TEST

START_TEST(test_other_names_keep_their_params)
{
        const char *names[] = { "read_file", "file_write", "write_file", "exec", "run_commands", "ls", "grep" };
        json_auto_t *in = json_pack("{ss si}", "path", "a", "start_line", 3);
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                json_t *got = NULL;
                char why[64];
                ck_assert_int_eq(tool_alias_params(names[i], in, &got, why, sizeof(why)), 0);
                ck_assert_ptr_eq(got, in);
                json_decref(got);
        }
        json_t *got = NULL;
        char why[64];
        ck_assert_int_lt(tool_alias_params("nope", in, &got, why, sizeof(why)), 0);
        ck_assert_ptr_null(got);
}
END_TEST

Suite *registry_suite(void)
{
        Suite *s = suite_create("registry");
        TCase *tc = unit_tcase(s, "registry_specs");
        unit_add(tc, test_every_schema_parses_as_an_object_schema);
        unit_add(tc, test_every_documented_tool_is_listed_with_exact_params);
        unit_add(tc, test_params_have_the_documented_types);
        unit_add(tc, test_descriptions_say_what_each_tool_returns_and_its_defaults);
        unit_add(tc, test_names_and_aliases_are_unique_function_names);

        tc = unit_tcase(s, "registry_lookup");
        unit_add(tc, test_canonical_names_find_their_own_tool);
        unit_add(tc, test_ls_resolves_to_list_dir);
        unit_add(tc, test_run_commands_resolves_to_exec);
        unit_add(tc, test_unknown_names_are_not_found);
        unit_add(tc, test_tool_specs_count_is_optional);

        tc = unit_tcase(s, "registry_aliases");
        unit_add(tc, test_knowlyr_names_resolve_to_their_tools);
        unit_add(tc, test_file_read_lines_become_offset_and_limit);
        unit_add(tc, test_file_read_refuses_bad_lines);
        unit_add(tc, test_shell_and_search_rename_their_params);
        unit_add(tc, test_git_subcommand_is_split_like_shell_words_without_a_shell);
        unit_add(tc, test_other_names_keep_their_params);

        tc = unit_tcase(s, "registry_formats");
        unit_add(tc, test_json_format_lists_every_tool_with_params_and_aliases);
        unit_add(tc, test_mcp_format_lists_every_tool_with_input_schema);
        unit_add(tc, test_openai_format_is_chat_completions_tools);
        unit_add(tc, test_openai_tutorial_tools_have_exactly_its_params);
        unit_add(tc, test_openai_other_tools_keep_their_full_schemas);
        unit_add(tc, test_unknown_format_gives_null);
        unit_add(tc, test_every_format_round_trips_as_json_text);
        unit_add(tc, test_each_call_returns_a_value_the_caller_owns);
        return s;
}
