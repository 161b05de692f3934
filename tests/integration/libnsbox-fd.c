/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tests/integration/fdpass.sh: nsbox_call_fd in either mode (--in-process, else through
 * nsboxd): 16 MiB + 1 random bytes written through a pipe and read back through another, byte
 * for byte; a regular file's descriptor refused.  Prints one "what: observation" line per step. */
#include <nsbox.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE ((16u << 20) + 1)

struct pump {
        int fd;
        unsigned char *buf;
        size_t len, done;
};

static void *feed(void *arg)
{
        struct pump *p = arg;
        while (p->done < p->len) {
                ssize_t k = write(p->fd, p->buf + p->done, p->len - p->done);
                if (k <= 0)
                        break;
                p->done += (size_t)k;
        }
        close(p->fd);
        return NULL;
}

static void *drain(void *arg)
{
        struct pump *p = arg;
        for (;;) {
                ssize_t k = read(p->fd, p->buf + p->done, p->len - p->done);
                if (k <= 0)
                        break;
                p->done += (size_t)k;
        }
        return NULL;
}

int main(int argc, char **argv)
{
        nsbox *nb = NULL;
        bool in_process = argc > 1 && !strcmp(argv[1], "--in-process");
        if (nsbox_connect(in_process ? NSBOX_IN_PROCESS : 0, &nb) < 0) {
                printf("connect: %s\n", nb ? nsbox_error_message(nb) : "out of memory");
                return 1;
        }
        char *id = NULL, *res = NULL;
        if (nsbox_create(nb, NULL, &id) < 0) {
                printf("create: %s\n", nsbox_error_message(nb));
                return 1;
        }
        unsigned char *data = malloc(SIZE), *back = calloc(1, SIZE + 16);
        int rnd = open("/dev/urandom", O_RDONLY);
        if (!data || !back || rnd < 0 || read(rnd, data, SIZE) != (ssize_t)SIZE)
                return 1;
        close(rnd);

        int p[2];
        pthread_t th;
        if (pipe(p) < 0)
                return 1;
        struct pump w = { .fd = p[1], .buf = data, .len = SIZE };
        pthread_create(&th, NULL, feed, &w);
        char params[128];
        snprintf(params, sizeof(params), "{\"path\": \"/workspace/fd.bin\", \"size\": %u}", SIZE);
        int r = nsbox_call_fd(nb, id, "write_file", params, p[0], &res);
        close(p[0]);
        pthread_join(th, NULL);
        printf("write: %d %s\n", r, r == 0 && strstr(res, "\"bytes_written\":16777217") ? "bytes_written ok" : r ? nsbox_error_message(nb) : res);
        free(res);
        res = NULL;

        if (pipe(p) < 0)
                return 1;
        struct pump rd = { .fd = p[0], .buf = back, .len = SIZE + 16 };
        pthread_create(&th, NULL, drain, &rd);
        r = nsbox_call_fd(nb, id, "read_file", "{\"path\": \"/workspace/fd.bin\"}", p[1], &res);
        close(p[1]);
        pthread_join(th, NULL);
        close(p[0]);
        printf("read: %d %zu bytes %s\n", r, rd.done, rd.done == SIZE && !memcmp(data, back, SIZE) ? "same" : "DIFFERENT");
        free(res);
        res = NULL;

        int f = open("/etc/passwd", O_RDONLY);
        r = nsbox_call_fd(nb, id, "write_file", "{\"path\": \"/workspace/x\", \"size\": 1}", f, &res);
        printf("regular file: %d %s\n", r, nsbox_error_code(nb) ? nsbox_error_code(nb) : "-");
        close(f);
        free(res);
        nsbox_destroy(nb, id);
        free(id);
        free(data);
        free(back);
        nsbox_close(nb);
        return 0;
}
