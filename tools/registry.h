/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tools an agent serves, by name: their aliases, their descriptions and the JSON Schema of
 * their params, and the same list in the formats clients load (nsbox's own, OpenAI Chat
 * Completions tools, MCP tools/list).  Data only: no handler is referenced, so the small nsbox
 * binary can print schemas without linking the tools. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct tool_spec {
        const char *name;           /* canonical name, e.g. "list_dir" */
        const char *description;    /* one or two sentences an LLM reads, saying what it returns */
        const char *schema;         /* JSON Schema (draft 2020-12 subset) of the params, as a JSON text */
        const char *const *aliases; /* NULL-terminated, e.g. {"ls", NULL} */
        /* a call that streams events until cancelled (watch): in nsbox's own list only, since an
         * LLM's tool call (openai, mcp) is one request and one result */
        bool streams;
} tool_spec;

/* By canonical name or alias (exact, case-sensitive); NULL if unknown or name is NULL. */
const tool_spec *tool_spec_find(const char *name);
/* All tools, in a stable order (the order of the man page); *ret_n gets their number. */
const tool_spec *tool_specs(size_t *ret_n);
/* Canonical name for a name or alias ("ls" -> "list_dir"), or NULL. */
const char *tool_canonical_name(const char *name);

/* The params of a call by name or alias made into its canonical tool's, as a new reference in
 * *ret: knowlyr's file_read {start_line, end_line}, shell {command}, search {file_pattern} and
 * git {subcommand} become read_file's, exec's and grep's params (tools/alias.c); any other name
 * gives params back as they are.  -EINVAL with why for params the mapping refuses (both an
 * alias's key and its target's, bad line numbers, unbalanced quotes), -ENOMEM. */
int tool_alias_params(const char *name, json_t *params, json_t **ret, char *why, size_t why_len);

/* The schemas in a client's format as one new JSON array (the caller json_decref's it):
 *   "json":   [{name, description, parameters, aliases}]                      (nsbox's own)
 *   "openai": [{type:"function", function:{name, description, parameters}}]   (Chat Completions tools)
 *   "mcp":    [{name, description, inputSchema}]                              (MCP tools/list items)
 * In "openai", read_file, write_file and write_files have the minimal params agents following
 * OpenAI's coding-agent tutorial declare ({path}, {path, data}, {files: [{path, data}]}), and
 * run_commands {command} follows exec as a function of its own; "json" and "mcp" list only the
 * canonical tools with their full params; a tool that streams until cancelled (watch) is in
 * "json" only.  Returns NULL for an unknown format (or out of memory). */
json_t *tool_schemas(const char *format);
