/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox image import|ls|inspect|rm (cli_session.h): on the caller's store directly, with or
 * without a daemon (store.h, image_import.h). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_session.h"
#include "image_import.h"
#include "store.h"
#include "util.h"

static const char usage_image[] =
        "usage: nsbox image import PATH [NAME] [--json]  import an OCI image layout (a directory or a tar of\n"
        "                                                one) or a docker-archive tar (docker save) as NAME\n"
        "       nsbox image ls [--json]                  list images\n"
        "       nsbox image inspect NAME                 print image NAME's record (JSON)\n"
        "       nsbox image rm NAME...                   remove images no sandbox uses, and their layers\n"
        "\n"
        "NAME defaults to the name the archive gives (its ref annotation, or RepoTags[0]).  NAME:\n"
        "1-200 of [A-Za-z0-9._-:/], starting with a letter or digit, without '..' or '//'.\n"
        "Start sandboxes on an image with nsbox run --image NAME or nsbox create --image NAME.\n";

static int failed(int r, nsbox_error *err)
{
        _cleanup_free_ char *safe = nsbox_escape_controls(err->msg ? err->msg : strerror(-r));
        fprintf(stderr, "nsbox: image: %s\n", safe ? safe : strerror(-r));
        nsbox_error_clear(err);
        return EXIT_NSBOX;
}

/* The positional arguments after the subcommand, and --json. */
static int args(int argc, char **argv, const char **pos, int max, int *n, bool *json)
{
        *n = 0;
        for (int i = 2; i < argc; i++) {
                if (!strcmp(argv[i], "--json"))
                        *json = true;
                else if (argv[i][0] == '-')
                        return nsbox_cli_unknown_option("image", argv[i]);
                else if (*n >= max)
                        return nsbox_cli_usage_error("image", "%s: unexpected argument '%s'", argv[1], argv[i]);
                else
                        pos[(*n)++] = argv[i];
        }
        return -1;
}

static void human_size(uint64_t b, char *buf, size_t n)
{
        if (b < (10ull << 20))
                snprintf(buf, n, "%.1fK", (double)b / 1024);
        else if (b < (10ull << 30))
                snprintf(buf, n, "%.1fM", (double)b / (1 << 20));
        else
                snprintf(buf, n, "%.1fG", (double)b / (1 << 30));
}

/* The import's counts on the progress line, five times a second at most: this is called for
 * each entry and each block of a file. */
typedef struct import_line {
        nsbox_cli_progress pr;
        struct timespec last;
} import_line;

static void import_progress(uint64_t entries, uint64_t bytes, void *ud)
{
        import_line *l = ud;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - l->last.tv_sec) * 1000000000ll + (now.tv_nsec - l->last.tv_nsec) < 200000000ll)
                return;
        l->last = now;
        char size[32];
        nsbox_cli_human_bytes(bytes, size, sizeof(size));
        nsbox_cli_progress_detail(&l->pr, "%llu entries (%s)", (unsigned long long)entries, size);
}

static int image_import(nsbox_store *st, int argc, char **argv)
{
        const char *pos[2];
        int n;
        bool json = false;
        int a = args(argc, argv, pos, 2, &n, &json);
        if (a >= 0)
                return a;
        if (n < 1)
                return nsbox_cli_usage_error("image", "import: expected PATH [NAME]");
        nsbox_error err = { 0 };
        json_t *meta = NULL;
        import_line line = { 0 };
        nsbox_cli_progress_start(&line.pr, "importing %s", pos[0]);
        int r = nsbox_image_import_progress(st, pos[0], n > 1 ? pos[1] : NULL, line.pr.running ? import_progress : NULL, &line, &meta, &err);
        nsbox_cli_progress_stop(&line.pr);
        if (r < 0)
                return failed(r, &err);
        if (json)
                nsbox_cli_print_json(stdout, meta);
        else
                printf("%s\n", json_string_value(json_object_get(meta, "name")));
        json_decref(meta);
        return 0;
}

static int image_ls(nsbox_store *st, int argc, char **argv)
{
        const char *pos[1];
        int n;
        bool json = false;
        int a = args(argc, argv, pos, 0, &n, &json);
        if (a >= 0)
                return a;
        nsbox_error err = { 0 };
        json_t *list = NULL;
        int r = nsbox_store_list_images(st, &list, &err);
        if (r < 0)
                return failed(r, &err);
        if (json) {
                nsbox_cli_print_json(stdout, list);
                json_decref(list);
                return 0;
        }
        printf("%-32s  %-6s  %-8s  %-19s  %-6s  %s\n", "NAME", "LAYERS", "SIZE", "IMPORTED", "IN USE", "ID");
        size_t i;
        json_t *s;
        json_array_foreach(list, i, s) {
                char size[32], when[32] = "";
                human_size((uint64_t)json_integer_value(json_object_get(s, "size")), size, sizeof(size));
                time_t t = (time_t)json_integer_value(json_object_get(s, "imported"));
                struct tm tm;
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
                const char *id = json_string_value(json_object_get(s, "id"));
                _cleanup_free_ char *safe = nsbox_escape_controls(json_string_value(json_object_get(s, "name")) ?: "");
                printf("%-32s  %-6zu  %-8s  %-19s  %-6s  %.19s\n", safe ? safe : "", json_array_size(json_object_get(s, "layers")), size,
                       when, json_is_true(json_object_get(s, "in_use")) ? "yes" : "no", id ? id : "");
        }
        json_decref(list);
        return 0;
}

static int image_inspect(nsbox_store *st, int argc, char **argv)
{
        const char *pos[1];
        int n;
        bool json = false;
        int a = args(argc, argv, pos, 1, &n, &json);
        if (a >= 0)
                return a;
        if (n < 1)
                return nsbox_cli_usage_error("image", "inspect: expected NAME");
        nsbox_error err = { 0 };
        json_t *list = NULL;
        if (nsbox_image_name_check(pos[0], &err) < 0 || nsbox_store_list_images(st, &list, &err) < 0)
                return failed(-EINVAL, &err);
        size_t i;
        json_t *s, *found = NULL;
        json_array_foreach(list, i, s) if (!found && !strcmp(json_string_value(json_object_get(s, "name")) ?: "", pos[0])) found = s;
        if (found)
                nsbox_cli_print_json(stdout, found);
        else
                fprintf(stderr, "nsbox: image: no image '%s' (see nsbox image ls)\n", pos[0]);
        json_decref(list);
        return found ? 0 : EXIT_REFUSED;
}

static int image_rm(nsbox_store *st, int argc, char **argv)
{
        if (argc < 3)
                return nsbox_cli_usage_error("image", "rm: expected at least one image NAME");
        nsbox_error err = { 0 };
        for (int i = 2; i < argc; i++) /* every name checked before anything is removed */
                if (nsbox_image_name_check(argv[i], &err) < 0)
                        return failed(-EINVAL, &err);
        for (int i = 2; i < argc; i++)
                if (!nsbox_store_has_image(st, argv[i])) {
                        fprintf(stderr, "nsbox: image: no image '%s' (see nsbox image ls)\n", argv[i]);
                        return EXIT_REFUSED;
                }
        int status = 0;
        for (int i = 2; i < argc; i++) {
                int r = nsbox_store_delete_image(st, argv[i], &err);
                if (r < 0)
                        status = failed(r, &err);
        }
        return status;
}

int nsbox_cmd_image(int argc, char **argv)
{
        if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
                fputs(usage_image, argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_NSBOX : 0;
        }
        static const char *const subs[] = { "import", "ls", "inspect", "rm" };
        int k = -1;
        for (int i = 0; i < 4; i++)
                if (!strcmp(argv[1], subs[i]))
                        k = i;
        if (k < 0)
                return nsbox_cli_usage_error("image", "unknown subcommand '%s'", argv[1]);
        for (int i = 2; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        fputs(usage_image, stdout);
                        return 0;
                }
        nsbox_error err = { 0 };
        nsbox_store st = NSBOX_STORE_INIT;
        if (nsbox_store_open(true, &st, &err) < 0)
                return failed(-EIO, &err);
        int r = k == 0 ? image_import(&st, argc, argv) : k == 1 ? image_ls(&st, argc, argv) : k == 2 ? image_inspect(&st, argc, argv) : image_rm(&st, argc, argv);
        nsbox_store_close(&st);
        return r;
}
