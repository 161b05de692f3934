/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tool list: names, aliases, descriptions and parameter schemas, and their rendering in the
 * formats clients load.  The descriptions are what a model reads before calling a tool, so each
 * says what the tool does, its defaults and what it returns; the man page says the same. */
#include "registry.h"

#include <string.h>

#include "../runtime/util.h"

/* Schemas are written as JSON in the source and turned into a string by the preprocessor, so
 * they read as the JSON they are (no escaped quotes).  Each JSON string must be one C literal. */
#define SCHEMA(...) #__VA_ARGS__

static const char *const no_aliases[] = { NULL };
/* run_commands is what agents following OpenAI's coding-agent tutorial call their shell tool. */
/* shell {command, timeout}, git {subcommand}, file_read {path, start_line, end_line}, file_write
 * and search {pattern, file_pattern} are knowlyr AgentSandbox's names (params: tools/alias.c). */
static const char *const exec_aliases[] = { "run_commands", "shell", "git", NULL };
static const char *const list_dir_aliases[] = { "ls", NULL };
static const char *const read_file_aliases[] = { "file_read", NULL };
static const char *const write_file_aliases[] = { "file_write", NULL };
static const char *const grep_aliases[] = { "search", NULL };

static const tool_spec specs[] = {
        /* ---- processes ---- */
        {
                "exec",
                "Run a command in the sandbox: cmd is an argv array run without a shell, shell is a command line "
                "run with /bin/sh -c; give one of them. Returns {pid, exit_code, signal, stdout, stderr, timed_out, "
                "truncated, duration_ms, cpu_time_ms, peak_memory_bytes} when it ends; with background: true, "
                "{pid, tag} at once (see process_wait, process_connect).",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "cmd": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Program and arguments, run without a shell, e.g. [\"ls\", \"-l\"]. Give cmd or shell."},
                                "shell": {"type": "string", "description": "Command line run with /bin/sh -c, e.g. \"make test 2>&1 | tail -n 50\". Give cmd or shell."},
                                "cwd": {"type": "string", "description": "Working directory (default: the sandbox's working directory)."},
                                "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment variables to set, e.g. {\"CI\": \"1\"}."},
                                "stdin": {"type": "string", "description": "Text written to the command's standard input, which then reads end of file; a background command's stays open for process_write_stdin (default: no input)."},
                                "stdin_open": {"type": "boolean", "description": "Keep the standard input open as a pipe, for a foreground command too, for process_write_stdin and process_close_stdin; the \"started\" event gives the pid (default false)."},
                                "timeout": {"type": "number", "minimum": 0, "description": "Seconds after which the command and its children are killed and timed_out is true; 0 means no limit (default 0)."},
                                "background": {"type": "boolean", "description": "Start the command and return its pid at once instead of waiting for it (default false)."},
                                "max_output": {"type": "integer", "minimum": 0, "maximum": 16777216, "description": "Bytes of stdout and of stderr kept each; the rest is dropped and truncated is true (default 1048576, or the policy's output limit)."},
                                "stream": {"type": "boolean", "description": "Send stdout and stderr as events while the command runs, instead of in the result (default false)."},
                                "tag": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$", "description": "A name for the process, unique among the sandbox's running ones; process_* tools take it instead of pid."},
                                "detach": {"type": "boolean", "description": "Background, and meant to outlive the connection that started it; re-attach with process_connect (default false)."},
                                "pty": {"type": ["boolean", "object"], "properties": {"cols": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Columns (default 80)."}, "rows": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Rows (default 24)."}}, "description": "Run the command on a terminal of its own, {cols, rows} (true: 80x24): its output is one stream, \"pty\" events or stdout; input goes through process_write_stdin; see process_resize (default false)."}
                        },
                        "required": []
                }),
                exec_aliases,
                false,
        },
        {
                "process_list",
                "List the processes started with exec that are running or not yet waited for. Returns "
                "{processes: [{pid, command, tag, running, background, detached, pty, started_at, exit_code}]} "
                "(exit_code once it has ended; started_at in RFC 3339, UTC).",
                SCHEMA({
                        "type": "object",
                        "properties": {},
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "process_wait",
                "Wait for a background process started with exec to end. Returns its result like exec's: {pid, "
                "exit_code, signal, stdout, stderr, timed_out, truncated, duration_ms}; if timeout passes first, "
                "a timeout error, and the process keeps running.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pid": {"type": "integer", "minimum": 1, "description": "Process id returned by exec with background: true."},
                                "tag": {"type": "string", "description": "The process's tag (exec's tag), instead of pid."},
                                "timeout": {"type": "number", "minimum": 0, "description": "Seconds to wait at most; 0 waits until it ends (default 0)."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "process_kill",
                "Send a signal to a process started with exec and its children (default KILL). Returns {pid, "
                "signaled} (signaled is false if it had already ended).",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pid": {"type": "integer", "minimum": 1, "description": "Process id returned by exec."},
                                "tag": {"type": "string", "description": "The process's tag (exec's tag), instead of pid."},
                                "signal": {"type": ["string", "integer"], "description": "Signal name (HUP, INT, QUIT, KILL, USR1, USR2, TERM, CONT, STOP, ALRM, with or without SIG) or number (default \"KILL\")."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "process_write_stdin",
                "Write data to the standard input of a process started with exec (background, or with "
                "stdin_open). Returns {pid, bytes}; too_large while more than 16 MiB wait to be read: retry "
                "later.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pid": {"type": "integer", "minimum": 1, "description": "Process id returned by exec with background: true."},
                                "tag": {"type": "string", "description": "The process's tag (exec's tag), instead of pid."},
                                "data": {"type": "string", "description": "Text to write. Give data or data_b64."},
                                "data_b64": {"type": "string", "description": "Bytes to write, in base64. Give data or data_b64."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "process_close_stdin",
                "Close the standard input of a background process started with exec, once what was written is "
                "read, so that it reads end of file; on a pty, write ^D (end of file at the start of a line) instead. "
                "Returns {pid}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pid": {"type": "integer", "minimum": 1, "description": "Process id returned by exec with background: true."},
                                "tag": {"type": "string", "description": "The process's tag (exec's tag), instead of pid."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "process_resize",
                "Set the terminal size of a process started with exec with pty; it gets SIGWINCH. Returns {pid, "
                "cols, rows}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pid": {"type": "integer", "minimum": 1, "description": "Process id returned by exec."},
                                "tag": {"type": "string", "description": "The process's tag (exec's tag), instead of pid."},
                                "cols": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Columns, 1 to 1000."},
                                "rows": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Rows, 1 to 1000."}
                        },
                        "required": ["cols", "rows"]
                }),
                no_aliases,
                false,
        },
        {
                "process_connect",
                "Attach to a background process started with exec (by pid or tag): its recent output (the "
                "last 64 KiB of stdout and of stderr) and then its live output come as stdout and stderr "
                "events of this call, which ends when it does (at once if it has ended). Returns {pid, exit_code, signal, timed_out, truncated, duration_ms}. Cancelling the call "
                "detaches; the process goes on.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pid": {"type": "integer", "minimum": 1, "description": "Process id returned by exec with background: true."},
                                "tag": {"type": "string", "description": "The process's tag (exec's tag), instead of pid."},
                                "follow": {"type": "boolean", "description": "false: only the recent output, then {pid, running: true} at once if it is still running (default true)."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },

        {
                "watch",
                "Watch a directory for changes (inotify) until cancelled; needs a streamed call. Each change is "
                "an event {event: \"fs\", op: create|write|remove|rename|chmod|overflow, path, type}. Returns "
                "{events, cancelled} once cancelled.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "Directory to watch, absolute or relative to the working directory."},
                                "recursive": {"type": "boolean", "description": "Watch every directory under it too, new ones included (default false)."},
                                "entries": {"type": "boolean", "description": "Each create, write and chmod event also carries entry: what stat with metadata answers of the path when the event is read, if it is still there (default false)."},
                                "network_mounts": {"type": "boolean", "description": "false: a directory on a network file system (NFS, CIFS, SMB, FUSE), whose changes may never be reported, is refused (default true)."}
                        },
                        "required": ["path"]
                }),
                no_aliases,
                true,
        },

        /* ---- files ---- */
        {
                "read_file",
                "Read a file. As text (default) returns {path, content, total_lines, start_line, end_line, "
                "next_offset, size, truncated, lossy}: limit lines from line offset, lines over 2000 bytes cut; "
                "read on from next_offset while it is not null. With encoding \"base64\" returns raw bytes "
                "(byte_offset, byte_limit), for binary files.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "File to read, absolute or relative to the working directory."},
                                "offset": {"type": "integer", "minimum": 0, "description": "First line to return, counting from 0 (default 0)."},
                                "limit": {"type": "integer", "minimum": 1, "maximum": 100000, "description": "Number of lines to return (default 2000)."},
                                "encoding": {"type": "string", "enum": ["text", "base64"], "description": "\"text\" (default): lines as a string; \"base64\": the raw bytes, for binary files."},
                                "byte_offset": {"type": "integer", "minimum": 0, "description": "With encoding \"base64\": first byte to return (default 0)."},
                                "byte_limit": {"type": "integer", "minimum": 0, "maximum": 16777216, "description": "With encoding \"base64\": number of bytes to return (default: to the end of the file; at most 16 MiB per call)."},
                                "skip_holes": {"type": "boolean", "description": "With encoding \"base64\": start at the first data at or after byte_offset and stop at the next hole of a sparse file; the result's byte_offset says where the bytes start (default false)."}
                        },
                        "required": ["path"]
                }),
                read_file_aliases,
                false,
        },
        {
                "write_file",
                "Create or replace a file atomically, or append to it; missing parent directories are created. "
                "Give the bytes as content (text), data (the same as content) or content_b64 (base64). "
                "Returns {path, bytes_written, created}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "File to write, absolute or relative to the working directory."},
                                "content": {"type": "string", "description": "Text to write."},
                                "content_b64": {"type": "string", "description": "Bytes to write, base64-encoded (for binary files)."},
                                "data": {"type": "string", "description": "Text to write (the same as content)."},
                                "mode": {"type": ["integer", "string"], "description": "Permission bits, as a number (420) or an octal string (\"0644\"); default 0644 for a new file, an existing file keeps its mode."},
                                "append": {"type": "boolean", "description": "Append to the file instead of replacing it (default false)."},
                                "parents": {"type": "boolean", "description": "Create missing parent directories (default true)."}
                        },
                        "required": ["path"]
                }),
                write_file_aliases,
                false,
        },
        {
                "write_files",
                "Write several files in one call (at most 1000), each like write_file; a failure does not stop "
                "the others. Returns {results: [{path, ok, bytes_written} or {path, ok: false, error: {code, "
                "message}}], written, failed}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "files": {
                                        "type": "array",
                                        "minItems": 1,
                                        "maxItems": 1000,
                                        "description": "Files to write, in order.",
                                        "items": {
                                                "type": "object",
                                                "properties": {
                                                        "path": {"type": "string", "description": "File to write, absolute or relative to the working directory."},
                                                        "content": {"type": "string", "description": "Text to write."},
                                                        "content_b64": {"type": "string", "description": "Bytes to write, base64-encoded (for binary files)."},
                                                        "data": {"type": "string", "description": "Text to write (the same as content)."},
                                                        "mode": {"type": ["integer", "string"], "description": "Permission bits, as a number (420) or an octal string (\"0644\"); default 0644 for a new file."}
                                                },
                                                "required": ["path"]
                                        }
                                }
                        },
                        "required": ["files"]
                }),
                no_aliases,
                false,
        },
        {
                "edit_file",
                "Replace old_string with new_string in a file. old_string must occur exactly once unless "
                "replace_all is true: include enough surrounding lines to make it unique. Returns {path, "
                "occurrences} (the number replaced).",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "File to edit, absolute or relative to the working directory."},
                                "old_string": {"type": "string", "minLength": 1, "description": "Exact text to replace, with its whitespace and indentation."},
                                "new_string": {"type": "string", "description": "Text to put in its place."},
                                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                        },
                        "required": ["path", "old_string", "new_string"]
                }),
                no_aliases,
                false,
        },
        {
                "list_dir",
                "List a directory's entries down to depth levels, sorted by path; symbolic links are not "
                "followed. Returns {path, entries: [{name, path, type, size, mode, mtime, uid, gid, target}], truncated}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "Directory to list (default \".\", the working directory)."},
                                "depth": {"type": "integer", "minimum": 1, "maximum": 32, "description": "Levels to descend; 1 lists the directory itself (default 1)."},
                                "metadata": {"type": "boolean", "description": "Each file's and directory's metadata too, as stat gives it (default false)."}
                        },
                        "required": []
                }),
                list_dir_aliases,
                false,
        },
        {
                "stat",
                "Describe a file. Returns {path, type, size, mode, mtime, uid, gid, target}; type is \"file\", "
                "\"directory\", \"symlink\" or \"other\", target only for a symbolic link.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "File to describe, absolute or relative to the working directory."},
                                "follow": {"type": "boolean", "description": "Describe what a symbolic link points to instead of the link (default false)."},
                                "metadata": {"type": "boolean", "description": "Add metadata: the user.e2b.* extended attributes of a file or directory as {key: value}, the prefix left out (E2B's file metadata; left out when there are none) (default false)."}
                        },
                        "required": ["path"]
                }),
                no_aliases,
                false,
        },
        {
                "exists",
                "Check whether a path exists (a symbolic link is not followed). Returns {path, exists, type}, "
                "type null when it does not exist; a missing path is not an error.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "Path to check, absolute or relative to the working directory."}
                        },
                        "required": ["path"]
                }),
                no_aliases,
                false,
        },
        {
                "mkdir",
                "Create a directory. Returns {path, created}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "Directory to create, absolute or relative to the working directory."},
                                "parents": {"type": "boolean", "description": "Create missing parent directories too, and accept an existing directory (default false)."},
                                "mode": {"type": ["integer", "string"], "description": "Permission bits, as a number (493) or an octal string (\"0755\"); default 0755."}
                        },
                        "required": ["path"]
                }),
                no_aliases,
                false,
        },
        {
                "remove",
                "Delete a file, a symbolic link (never what it points to) or a directory. Returns {path, "
                "removed}, the number of entries deleted.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "Path to delete, absolute or relative to the working directory."},
                                "recursive": {"type": "boolean", "description": "Delete a directory with everything in it (default false: only an empty directory)."}
                        },
                        "required": ["path"]
                }),
                no_aliases,
                false,
        },
        {
                "rename",
                "Move or rename a file or directory; missing parent directories of to are created. Returns "
                "{from, to}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "from": {"type": "string", "description": "Path to move, absolute or relative to the working directory."},
                                "to": {"type": "string", "description": "New path, absolute or relative to the working directory."},
                                "overwrite": {"type": "boolean", "description": "Replace to if it exists (default true; false makes an existing to an error)."},
                                "write": {"type": "boolean", "description": "Finish a write staged in from (a regular file): to is followed through its symlinks and keeps its mode, and a to with other hard links keeps them (its contents replaced in place), as write_file does; from is removed if that fails."},
                                "metadata": {"type": "object", "additionalProperties": {"type": "string"}, "description": "With write: the file's metadata after, {key: value} set as user.e2b.KEY extended attributes, its other user.e2b.* ones removed; keys of 1 to 246 and values of printable ASCII, 4096 bytes in all counting each key's prefix. The result then carries the file's metadata."}
                        },
                        "required": ["from", "to"]
                }),
                no_aliases,
                false,
        },

        /* ---- search ---- */
        {
                "glob",
                "Find paths matching a shell pattern such as \"src/**/*.c\" (** matches any number of "
                "directories). Returns {pattern, path, matches: [absolute paths, sorted], truncated}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pattern": {"type": "string", "description": "Pattern with *, ?, [...] in each component and ** for any number of directories."},
                                "path": {"type": "string", "description": "Directory the pattern is relative to (default \".\")."}
                        },
                        "required": ["pattern"]
                }),
                no_aliases,
                false,
        },
        {
                "grep",
                "Search file contents for a POSIX extended regular expression (or plain text) in a file or, "
                "recursively, a directory; binary files and .git are skipped. Returns {pattern, matches: [{path, "
                "line, text, before, after}], truncated, files_searched}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "pattern": {"type": "string", "description": "POSIX extended regular expression, or plain text with fixed: true."},
                                "path": {"type": "string", "description": "File or directory to search (default \".\")."},
                                "glob": {"type": "string", "description": "Only search files whose name matches, e.g. \"*.py\"; a pattern with / is matched against the path relative to path."},
                                "fixed": {"type": "boolean", "description": "Take pattern as plain text (default false)."},
                                "ignore_case": {"type": "boolean", "description": "Match without regard to case (default false)."},
                                "max_count": {"type": "integer", "minimum": 1, "maximum": 100000, "description": "Stop after this many matches in all (default 1000)."},
                                "context": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Lines to show before and after each match (default 0)."}
                        },
                        "required": ["pattern"]
                }),
                grep_aliases,
                false,
        },

        /* ---- git ---- */
        {
                "git_init",
                "Create a git repository, and its directory if missing. Returns {path, created} (created is false "
                "if it already was a repository).",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "Directory of the repository (default \".\")."},
                                "initial_branch": {"type": "string", "description": "Name of the first branch (default \"main\")."},
                                "bare": {"type": "boolean", "description": "Create a bare repository, without a working tree (default false)."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "git_status",
                "Show a repository's branch and changed files, like git status. Returns {path, branch, head, "
                "clean, entries: [{path, staged, unstaged}], truncated}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "A directory in the repository (default \".\")."},
                                "untracked": {"type": "boolean", "description": "List untracked files (default true)."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "git_diff",
                "Show changes as a unified diff, like git diff: the working tree against the index, or with "
                "staged the index against HEAD. Returns {diff, files_changed, insertions, deletions, truncated}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "A directory in the repository (default \".\")."},
                                "staged": {"type": "boolean", "description": "Show staged changes, the index against HEAD (default false)."},
                                "paths": {"type": "array", "items": {"type": "string"}, "description": "Only these paths (git pathspecs)."},
                                "context": {"type": "integer", "minimum": 0, "maximum": 1000, "description": "Lines of context around each change (default 3)."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "git_log",
                "List commits, newest first, like git log. Returns {commits: [{id, short_id, author, email, "
                "time, message, summary}]}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "A directory in the repository (default \".\")."},
                                "max_count": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Number of commits to list at most (default 20)."},
                                "ref": {"type": "string", "description": "Branch, tag or commit to start from (default \"HEAD\")."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "git_commit",
                "Stage changes (all of them like git add -A, or only paths) and commit them on the current "
                "branch. Returns {id, short_id, branch, summary, files_changed}; nothing to commit is an error "
                "unless allow_empty.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "A directory in the repository (default \".\")."},
                                "message": {"type": "string", "minLength": 1, "description": "Commit message."},
                                "all": {"type": "boolean", "description": "Stage every change first, new and deleted files included (default true; ignored when paths is given)."},
                                "paths": {"type": "array", "items": {"type": "string"}, "description": "Stage only these paths (git pathspecs) instead of every change."},
                                "author_name": {"type": "string", "description": "Author name (default: the repository's user.name, else \"nsbox\")."},
                                "author_email": {"type": "string", "description": "Author email (default: the repository's user.email, else \"nsbox@localhost\")."},
                                "allow_empty": {"type": "boolean", "description": "Commit even when nothing changed (default false)."}
                        },
                        "required": ["message"]
                }),
                no_aliases,
                false,
        },

        /* ---- code interpreter (runtime/agent_code.c) ---- */
        {
                "run_code",
                "Run code in a live Jupyter-style context of the sandbox's code interpreter, which keeps its "
                "variables, imports and working directory between calls (default: the default Python context; "
                "the interpreter starts on first use, which needs python3-ipykernel). Returns E2B's Execution: "
                "{results: [{text, html, markdown, png, jpeg, svg, json, latex, is_main_result, ...}], logs: "
                "{stdout: [], stderr: []}, error: {name, value, traceback} or null, execution_count, text} "
                "(text: the main result's, e.g. the value of the last expression).",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "code": {"type": "string", "description": "The code to run, e.g. \"import pandas as pd\\npd.DataFrame({'a': [1, 2]})\" (at most 1 MiB)."},
                                "language": {"type": "string", "enum": ["python", "r", "javascript", "typescript", "java", "bash"], "description": "Runs in that language's default context (default \"python\"); give language or context."},
                                "context": {"type": "string", "description": "A context id from create_code_context, for state of its own."},
                                "timeout": {"type": "number", "minimum": 0, "description": "Seconds after which the cell is interrupted (KeyboardInterrupt) and the context kept; 0 means no limit (default 300)."}
                        },
                        "required": ["code"]
                }),
                no_aliases,
                false,
        },
        {
                "create_code_context",
                "Create a code context: a new live kernel (python, r: Jupyter; javascript: node; typescript: node, its types stripped; java: JShell; bash) whose state "
                "is its own, for run_code's context. Returns {id, language, cwd}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "language": {"type": "string", "enum": ["python", "r", "javascript", "typescript", "java", "bash"], "description": "The kernel's language (default \"python\")."},
                                "cwd": {"type": "string", "description": "Its working directory, absolute or relative to the working directory (default: the interpreter's, /home/user when it exists)."}
                        },
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "list_code_contexts",
                "List the code interpreter's contexts, the default ones included. Returns {contexts: [{id, "
                "language, cwd}]} (empty when the interpreter has not started).",
                SCHEMA({
                        "type": "object",
                        "properties": {},
                        "required": []
                }),
                no_aliases,
                false,
        },
        {
                "restart_code_context",
                "Restart a code context's kernel: its state (variables, imports) is lost, its id stays. "
                "Returns {context, restarted}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "context": {"type": "string", "description": "The context's id (create_code_context, list_code_contexts)."}
                        },
                        "required": ["context"]
                }),
                no_aliases,
                false,
        },
        {
                "remove_code_context",
                "Shut a code context's kernel down and forget it. Returns {context, removed}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "context": {"type": "string", "description": "The context's id (create_code_context, list_code_contexts)."}
                        },
                        "required": ["context"]
                }),
                no_aliases,
                false,
        },
};

/* The "openai" format declares these exactly as agents built on OpenAI's function-calling
 * coding-agent tutorial do, so that their dispatch code works unchanged.  An entry named like a
 * canonical tool replaces it; one named like an alias follows its tool as a function of its own. */
static const struct {
        const char *name;
        const char *description;
        const char *schema;
} openai_tutorial_tools[] = {
        {
                "run_commands",
                "Run a command line with /bin/sh -c in the sandbox. Returns {exit_code, signal, stdout, stderr, "
                "timed_out, truncated, duration_ms} when it ends.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "command": {"type": "string", "description": "Command line to run, e.g. \"ls -la && make test\"."}
                        },
                        "required": ["command"]
                }),
        },
        {
                "read_file",
                "Read a text file. Returns {path, content, total_lines, next_offset, truncated, ...}: content "
                "holds its first 2000 lines.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "File to read, absolute or relative to the working directory."}
                        },
                        "required": ["path"]
                }),
        },
        {
                "write_file",
                "Create or replace a file with data, creating missing parent directories. Returns {path, "
                "bytes_written, created}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "path": {"type": "string", "description": "File to write, absolute or relative to the working directory."},
                                "data": {"type": "string", "description": "Text to write."}
                        },
                        "required": ["path", "data"]
                }),
        },
        {
                "write_files",
                "Write several files in one call; a failure does not stop the others. Returns {results: [{path, "
                "ok, bytes_written} or {path, ok: false, error}], written, failed}.",
                SCHEMA({
                        "type": "object",
                        "properties": {
                                "files": {
                                        "type": "array",
                                        "description": "Files to write, in order.",
                                        "items": {
                                                "type": "object",
                                                "properties": {
                                                        "path": {"type": "string", "description": "File to write, absolute or relative to the working directory."},
                                                        "data": {"type": "string", "description": "Text to write."}
                                                },
                                                "required": ["path", "data"]
                                        }
                                }
                        },
                        "required": ["files"]
                }),
        },
};

const tool_spec *tool_specs(size_t *ret_n)
{
        if (ret_n)
                *ret_n = ARRAY_SIZE(specs);
        return specs;
}

const tool_spec *tool_spec_find(const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
                if (strcmp(specs[i].name, name) == 0)
                        return &specs[i];
                for (const char *const *a = specs[i].aliases; a && *a; a++)
                        if (strcmp(*a, name) == 0)
                                return &specs[i];
        }
        return NULL;
}

const char *tool_canonical_name(const char *name)
{
        const tool_spec *s = tool_spec_find(name);
        return s ? s->name : NULL;
}

typedef enum {
        FORMAT_JSON,
        FORMAT_OPENAI,
        FORMAT_MCP,
        _FORMAT_MAX,
        _FORMAT_INVALID = -1,
} schema_format;

static const char *const format_names[_FORMAT_MAX] = {
        [FORMAT_JSON] = "json",
        [FORMAT_OPENAI] = "openai",
        [FORMAT_MCP] = "mcp",
};

static schema_format format_from_name(const char *name)
{
        for (size_t i = 0; name && i < ARRAY_SIZE(format_names); i++)
                if (strcmp(format_names[i], name) == 0)
                        return (schema_format)i;
        return _FORMAT_INVALID;
}

/* One entry of the list in format f; NULL only if out of memory (the schema texts are constants
 * the unit tests parse). */
static json_t *render(schema_format f, const char *name, const char *description, const char *schema,
                      const char *const *aliases)
{
        json_t *params = json_loads(schema, JSON_REJECT_DUPLICATES, NULL);
        if (!params)
                return NULL;

        json_t *o = NULL;
        switch (f) {
        case FORMAT_JSON: {
                json_t *a = json_array();
                for (const char *const *p = aliases; a && p && *p; p++)
                        if (json_array_append_new(a, json_string(*p)) < 0) {
                                json_decref(a);
                                a = NULL;
                        }
                o = json_pack("{s:s, s:s, s:o, s:o}", "name", name, "description", description,
                              "parameters", params, "aliases", a);
                break;
        }
        case FORMAT_OPENAI:
                o = json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function", "function", "name", name,
                              "description", description, "parameters", params);
                break;
        case FORMAT_MCP:
                o = json_pack("{s:s, s:s, s:o}", "name", name, "description", description, "inputSchema", params);
                break;
        default:
                json_decref(params);
                break;
        }
        /* json_pack steals its "o" arguments even when it fails (jansson >= 2.11). */
        return o;
}

json_t *tool_schemas(const char *format)
{
        schema_format f = format_from_name(format);
        if (f == _FORMAT_INVALID)
                return NULL;

        json_auto_t *list = json_array();
        if (!list)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
                const tool_spec *s = &specs[i];
                const char *description = s->description, *schema = s->schema;
                if (s->streams && f != FORMAT_JSON)
                        continue;

                /* In openai, the tutorial's shapes replace the full ones or follow their tool. */
                size_t n_follow = 0, follow[ARRAY_SIZE(openai_tutorial_tools)];
                for (size_t j = 0; f == FORMAT_OPENAI && j < ARRAY_SIZE(openai_tutorial_tools); j++) {
                        if (strcmp(openai_tutorial_tools[j].name, s->name) == 0) {
                                description = openai_tutorial_tools[j].description;
                                schema = openai_tutorial_tools[j].schema;
                        } else if (tool_spec_find(openai_tutorial_tools[j].name) == s) {
                                follow[n_follow++] = j;
                        }
                }

                /* json_array_append_new fails on a NULL entry (render out of memory). */
                if (json_array_append_new(list, render(f, s->name, description, schema, s->aliases)) < 0)
                        return NULL;
                for (size_t k = 0; k < n_follow; k++) {
                        size_t j = follow[k];
                        json_t *o = render(f, openai_tutorial_tools[j].name, openai_tutorial_tools[j].description,
                                           openai_tutorial_tools[j].schema, NULL);
                        if (json_array_append_new(list, o) < 0)
                                return NULL;
                }
        }
        return steal_pointer(&list);
}
