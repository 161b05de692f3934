/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libnsbox in one page: create a sandbox, write a file into it, run a command with its output
 * streamed back, read a file, see three errors, destroy the sandbox.
 *
 *     cc nsbox-example.c $(pkg-config --cflags --libs nsbox) -o nsbox-example && ./nsbox-example
 *
 * With --in-process, the same without nsboxd: the sandbox is a child of this program.
 *
 * Exit status: 0 when every step went as expected, 1 otherwise (the message says which). */
#include <nsbox.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(nsbox *nb, const char *what, int r)
{
        fprintf(stderr, "nsbox-example: %s: %s (%s, %d)\n", what, nsbox_error_message(nb), nsbox_error_code(nb), r);
        nsbox_close(nb);
        return 1;
}

/* Each chunk of the command's output as it arrives, prefixed with its stream's name. */
static void on_output(int stream, const char *data, size_t len, void *userdata)
{
        int *chunks = userdata;
        (*chunks)++;
        printf("%s: %.*s", stream == 1 ? "stdout" : "stderr", (int)len, data);
        if (len == 0 || data[len - 1] != '\n')
                putchar('\n');
        fflush(stdout);
}

/* A call that must fail: print its errno and stable code. */
static void expect_error(nsbox *nb, const char *what, int r)
{
        if (r == 0)
                printf("%s: no error\n", what);
        else
                printf("%s: %d %s: %s\n", what, r, nsbox_error_code(nb), nsbox_error_message(nb));
}

int main(int argc, char **argv)
{
        nsbox *nb = NULL;
        char *id = NULL, *result = NULL;
        unsigned flags = argc > 1 && !strcmp(argv[1], "--in-process") ? NSBOX_IN_PROCESS : 0;
        int r = nsbox_connect(flags, &nb);
        if (r < 0)
                return die(nb, "connect", r);
        printf("libnsbox %s%s\n", nsbox_version(), flags ? ", in process" : "");

        /* the options of nsboxd's create (nsbox-protocol(7)), in either mode */
        if ((r = nsbox_create(nb, "{\"env\": {\"EXAMPLE\": \"libnsbox\"}}", &id)) < 0)
                return die(nb, "create", r);
        printf("sandbox: %s\n", id);

        r = nsbox_call(nb, id, "write_file", "{\"path\": \"hello.sh\", \"content\": \"echo hello from $(id -un)\\necho to stderr >&2\\nexit 3\\n\"}",
                       &result);
        if (r < 0)
                return die(nb, "write_file", r);
        free(result);

        int chunks = 0, exit_code = -1;
        r = nsbox_exec(nb, id, "{\"cmd\": [\"sh\", \"hello.sh\"]}", on_output, &chunks, &exit_code, &result);
        if (r < 0)
                return die(nb, "exec", r);
        printf("exit: %d (in %d streamed chunks)\n", exit_code, chunks);
        free(result);

        if ((r = nsbox_call(nb, id, "read_file", "{\"path\": \"hello.sh\", \"limit\": 1}", &result)) < 0)
                return die(nb, "read_file", r);
        printf("read_file: %s\n", result);
        free(result);

        expect_error(nb, "bad json", nsbox_call(nb, id, "read_file", "{\"path\": ", &result));
        expect_error(nb, "unknown tool", nsbox_call(nb, id, "no_such_tool", NULL, &result));
        expect_error(nb, "unknown sandbox", nsbox_call(nb, "ffffffffffffffffffffffffffffffff", "read_file", "{\"path\": \"a\"}", &result));
        expect_error(nb, "missing file", nsbox_call(nb, id, "read_file", "{\"path\": \"/no/such/file\"}", &result));

        if ((r = nsbox_destroy(nb, id)) < 0)
                return die(nb, "destroy", r);
        printf("destroyed: %s\n", id);
        expect_error(nb, "after destroy", nsbox_call(nb, id, "read_file", "{\"path\": \"hello.sh\"}", &result));
        free(id);
        nsbox_close(nb);
        return 0;
}
