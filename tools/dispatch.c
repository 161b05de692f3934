/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The handlers the agent runs itself, by canonical name (tools/registry.c has the schemas and
 * aliases; exec and process_* live in the agent's event loop, runtime/agent.c). */
#include "tool.h"

const nsbox_tool_entry nsbox_tool_handlers[] = {
        { "read_file", tool_read_file },   { "write_file", tool_write_file }, { "write_files", tool_write_files },
        { "edit_file", tool_edit_file },   { "list_dir", tool_list_dir },     { "stat", tool_stat },
        { "exists", tool_exists },         { "mkdir", tool_mkdir },           { "remove", tool_remove },
        { "rename", tool_rename },         { "glob", tool_glob },             { "grep", tool_grep },
        { "git_init", tool_git_init },     { "git_status", tool_git_status }, { "git_diff", tool_git_diff },
        { "git_log", tool_git_log },       { "git_commit", tool_git_commit }, { NULL, NULL },
};
