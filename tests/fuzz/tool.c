/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A tool request as the agent takes it (runtime/agent.c, handle_frame): the input is a frame's
 * JSON text, then optionally a NUL byte and the frame's binary payload.  The request is checked
 * as the agent checks it and served by the file, search and git handlers (tools/) in a root that
 * is a temporary directory, reset before each input.  exec and process_* are left out: they start
 * processes.  Next to the root, outside/ holds a file that no request may change, whatever
 * symlinks or ".." it uses; every error is one line with a stable code. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/proto.h"
#include "../../tools/registry.h"
#include "../../tools/tool.h"
#include "fuzz.h"

static char base_dir[64], root_dir[128], outside_dir[128], secret[160];
static struct timespec base_mtime, outside_mtime, secret_mtime;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag;
        if (ftw->level > 0) /* not the root itself */
                remove(path);
        return 0;
}

static void write_text(const char *dir, const char *name, const char *text)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        FUZZ_CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write '%s': %s", path, strerror(errno));
        close(fd);
}

static void cleanup_base(void)
{
        nftw(base_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        rmdir(base_dir);
}

static void setup_once(void)
{
        if (base_dir[0])
                return;
        snprintf(base_dir, sizeof(base_dir), "/tmp/nsbox-fuzz-tool.XXXXXX");
        FUZZ_CHECK(mkdtemp(base_dir) != NULL, "mkdtemp: %s", strerror(errno));
        atexit(cleanup_base);
        snprintf(root_dir, sizeof(root_dir), "%s/root", base_dir);
        snprintf(outside_dir, sizeof(outside_dir), "%s/outside", base_dir);
        FUZZ_CHECK(mkdir(root_dir, 0755) == 0 && mkdir(outside_dir, 0755) == 0, "mkdir: %s", strerror(errno));
        write_text(outside_dir, "secret", "outside the root\n");
        snprintf(secret, sizeof(secret), "%s/secret", outside_dir);
        struct stat st;
        FUZZ_CHECK(stat(base_dir, &st) == 0, "stat: %s", strerror(errno));
        base_mtime = st.st_mtim;
        FUZZ_CHECK(stat(outside_dir, &st) == 0, "stat: %s", strerror(errno));
        outside_mtime = st.st_mtim;
        FUZZ_CHECK(stat(secret, &st) == 0, "stat: %s", strerror(errno));
        secret_mtime = st.st_mtim;
}

/* A small tree with the links an attacker would plant: relative and absolute, to outside/. */
static void reset_root(void)
{
        nftw(root_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        char path[256];
        write_text(root_dir, "a.txt", "hello\nworld\n");
        snprintf(path, sizeof(path), "%s/dir", root_dir);
        FUZZ_CHECK(mkdir(path, 0755) == 0, "mkdir '%s': %s", path, strerror(errno));
        write_text(path, "b.c", "int main(void) { return 0; }\n");
        snprintf(path, sizeof(path), "%s/up", root_dir);
        FUZZ_CHECK(symlink("../outside", path) == 0, "symlink: %s", strerror(errno));
        snprintf(path, sizeof(path), "%s/abs", root_dir);
        FUZZ_CHECK(symlink(outside_dir, path) == 0, "symlink: %s", strerror(errno));
        snprintf(path, sizeof(path), "%s/dir/loop", root_dir);
        FUZZ_CHECK(symlink("loop", path) == 0, "symlink: %s", strerror(errno));
}

static void check_outside_unchanged(void)
{
        struct stat st;
        FUZZ_CHECK(stat(base_dir, &st) == 0 && st.st_mtim.tv_sec == base_mtime.tv_sec && st.st_mtim.tv_nsec == base_mtime.tv_nsec,
                   "a request changed '%s', the root's parent", base_dir);
        FUZZ_CHECK(stat(outside_dir, &st) == 0 && st.st_nlink == 2 && st.st_mtim.tv_sec == outside_mtime.tv_sec &&
                           st.st_mtim.tv_nsec == outside_mtime.tv_nsec,
                   "a request changed '%s'", outside_dir);
        FUZZ_CHECK(stat(secret, &st) == 0 && st.st_size == 17 && st.st_mtim.tv_sec == secret_mtime.tv_sec &&
                           st.st_mtim.tv_nsec == secret_mtime.tv_nsec && (st.st_mode & 07777) == 0644,
                   "a request changed '%s'", secret);
}

static bool is_clean_string(json_t *v) { return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v); }

FUZZ_ENTRY(tool)
{
        setup_once();
        const uint8_t *nul = memchr(data, 0, size);
        size_t json_len = nul ? (size_t)(nul - data) : size;
        const void *payload = nul ? nul + 1 : NULL;
        size_t payload_len = nul ? size - json_len - 1 : 0;

        /* the agent's checks, in its order */
        json_error_t je;
        json_t *msg = nsbox_json_loadb((const char *)data, json_len, &je);
        if (!msg)
                return 0;
        json_t *id = json_object_get(msg, "id"), *tool = json_object_get(msg, "tool"), *params = json_object_get(msg, "params");
        const char *name = is_clean_string(tool) ? json_string_value(tool) : NULL;
        const char *canonical = name ? tool_canonical_name(name) : NULL;
        if (!json_is_object(msg) || !json_is_integer(id) || json_integer_value(id) < 0 || !canonical ||
            (params && !json_is_null(params) && !json_is_object(params))) {
                json_decref(msg);
                return 0;
        }
        const nsbox_tool_entry *t = NULL;
        for (const nsbox_tool_entry *it = nsbox_tool_handlers; it->name; it++)
                if (!strcmp(it->name, canonical))
                        t = it;
        if (!t) { /* exec, process_*: not here */
                json_decref(msg);
                return 0;
        }
        json_t *empty = json_is_object(params) ? NULL : json_object();
        tool_in in = { .params = empty ? empty : params, .payload = payload, .payload_len = payload_len };

        reset_root();
        tool_ctx ctx = { .root_fd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC), .root_path = root_dir, .cwd = "/" };
        FUZZ_CHECK(ctx.root_fd >= 0, "open '%s': %s", root_dir, strerror(errno));
        tool_error e = { 0 };
        tool_out out = { .result = NULL };
        sb_init(&out.payload, NSBOX_FRAME_MAX_PAYLOAD);
        int r = t->fn(&ctx, &in, &out, &e);
        if (r == 0) {
                FUZZ_CHECK(out.result != NULL, "%s succeeded without a result", canonical);
                size_t len = 0;
                char *text = nsbox_json_dumps(out.result, &len); /* what the agent sends */
                FUZZ_CHECK(text != NULL, "%s's result cannot be serialized", canonical);
                free(text);
        } else {
                FUZZ_CHECK(r == -1, "%s returned %d", canonical, r);
                FUZZ_CHECK(e.code > TOOL_OK && e.code <= TOOL_INTERNAL, "%s failed with code %d", canonical, (int)e.code);
                FUZZ_CHECK(e.message[0] && !strchr(e.message, '\n'), "%s failed without a one-line message: '%s'", canonical,
                           e.message);
        }
        FUZZ_CHECK(out.payload.len <= TOOL_MAX_CONTENT, "%s: payload of %zu bytes", canonical, out.payload.len);
        check_outside_unchanged();
        json_decref(out.result);
        sb_release(&out.payload);
        close(ctx.root_fd);
        json_decref(empty);
        json_decref(msg);
        return 0;
}
