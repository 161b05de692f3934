/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tests/integration/libnsbox.sh: nsbox_call_stream in either mode (--in-process, else through
 * nsboxd), as a C program sees it: a watch sees a file that a second call creates, a
 * process_connect gets a detached command's output then its result, a callback or another
 * thread's nsbox_cancel stops a call and the handle goes on, bad input fails with no event.
 * Prints one "what: observation" line per step, the same in both modes, which the test asserts
 * on. */
#include <nsbox.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct seen {
        int events;
        char first[256]; /* the first event's text */
        char fs[256];    /* the fs event that stopped the watch */
        char out[256];   /* output decoded from data_b64 */
        int stop_at_start;
};

static void show(nsbox *nb, const char *what, int r, const struct seen *s)
{
        const char *m = nsbox_error_message(nb);
        printf("%s: %d %s %s events %d\n", what, r, nsbox_error_code(nb) ? nsbox_error_code(nb) : "-", m && *m && !strchr(m, '\n') ? "one-line" : "NO-MESSAGE",
               s->events);
}

/* base64 of the test's short ASCII output: enough for it */
static void b64_append(char *out, size_t size, const char *in, size_t n)
{
        static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        unsigned v = 0;
        int bits = 0;
        size_t o = strlen(out);
        for (size_t i = 0; i < n && in[i] != '"' && in[i] != '='; i++) {
                const char *p = strchr(abc, in[i]);
                if (!p)
                        break;
                v = (v << 6) | (unsigned)(p - abc);
                bits += 6;
                if (bits >= 8 && o + 1 < size) {
                        bits -= 8;
                        out[o++] = (char)((v >> bits) & 0xff);
                }
        }
        out[o] = '\0';
}

static int on_event(const char *json, size_t len, void *userdata)
{
        struct seen *s = userdata;
        if (strlen(json) != len)
                printf("event length: WRONG\n");
        if (s->events++ == 0)
                snprintf(s->first, sizeof(s->first), "%s", json);
        const char *d = strstr(json, "\"data_b64\":\"");
        if (d)
                b64_append(s->out, sizeof(s->out), d + 12, strlen(d + 12));
        /* the watch stops at the first file the other call made */
        if (strstr(json, "\"event\":\"fs\"") && strstr(json, "\"op\":\"create\"") && strstr(json, "/tmp/w/f")) {
                snprintf(s->fs, sizeof(s->fs), "%s", json);
                return 1;
        }
        return s->stop_at_start && strstr(json, "\"event\":\"started\"") ? 1 : 0; /* a command stopped once it runs */
}

/* Another thread cancels the watch: again and again, since a cancel before it starts does nothing. */
static atomic_int watch_over;
static void *canceller(void *arg)
{
        while (!atomic_load(&watch_over)) {
                usleep(200000);
                nsbox_cancel(arg);
        }
        return NULL;
}

static char *field(const char *json, const char *key, char *buf, size_t size)
{
        char pat[64];
        snprintf(pat, sizeof(pat), "\"%s\":", key);
        const char *p = json ? strstr(json, pat) : NULL;
        snprintf(buf, size, "%.*s", p ? (int)strcspn(p + strlen(pat), ",}") : 4, p ? p + strlen(pat) : "none");
        return buf;
}

int main(int argc, char **argv)
{
        nsbox *nb = NULL;
        char *id = NULL, *res = NULL, buf[64];
        int in_process = argc > 1 && !strcmp(argv[1], "--in-process");
        int r = nsbox_connect(in_process ? NSBOX_IN_PROCESS : 0, &nb);
        if (r < 0 || (r = nsbox_create(nb, NULL, &id)) < 0) {
                printf("setup: %d %s\n", r, nsbox_error_message(nb));
                return 1;
        }
        struct seen s = { 0 };
        /* an exec streamed: started, then its output as data_b64, the result without it */
        r = nsbox_call_stream(nb, id, "exec", "{\"shell\": \"mkdir -p /tmp/w; printf hi\"}", on_event, &s, &res);
        show(nb, "exec", r, &s);
        printf("exec first event: %s\n", strncmp(s.first, "{\"event\":\"started\",\"pid\":", 25) ? s.first : "started with pid");
        printf("exec output: [%s] exit %s stdout in result: %s\n", s.out, field(res, "exit_code", buf, sizeof(buf)), res && strstr(res, "\"stdout\"") ? "yes" : "no");
        free(res);
        res = NULL;

        /* a watch, and a second call (a background command) that makes files meanwhile */
        r = nsbox_call(nb, id, "exec",
                       "{\"shell\": \"i=0; while [ $i -lt 100 ]; do mkdir /tmp/w/f$i; i=$((i+1)); sleep 0.1; done\", \"background\": true}", &res);
        printf("background maker: %d\n", r);
        free(res);
        res = NULL;
        memset(&s, 0, sizeof(s));
        r = nsbox_call_stream(nb, id, "watch", "{\"path\": \"/tmp/w\"}", on_event, &s, &res);
        show(nb, "watch stopped", r, &s);
        printf("watch first event: %s\n", s.first);
        printf("watch saw: %s\n", strncmp(s.fs, "{\"event\":\"fs\",\"op\":\"create\",\"path\":\"/tmp/w/f", 44) ? s.fs : "a file the other call made");
        printf("result untouched: %s\n", res ? "no" : "yes");
        r = nsbox_call(nb, id, "exec", "{\"shell\": \"echo still here\"}", &res);
        printf("a call after the stop: %d %s\n", r, res && strstr(res, "still here") ? "answered" : "NOT ANSWERED");
        free(res);
        res = NULL;

        /* a watch that sees nothing, cancelled from another thread; a cancel with no call in
         * flight does nothing to the next one */
        r = nsbox_call(nb, id, "exec", "{\"shell\": \"mkdir /tmp/quiet\"}", &res);
        free(res);
        res = NULL;
        memset(&s, 0, sizeof(s));
        pthread_t th;
        pthread_create(&th, NULL, canceller, nb);
        r = nsbox_call_stream(nb, id, "watch", "{\"path\": \"/tmp/quiet\"}", on_event, &s, &res);
        atomic_store(&watch_over, 1);
        pthread_join(th, NULL);
        show(nb, "watch cancelled by another thread", r, &s);
        nsbox_cancel(nb);
        memset(&s, 0, sizeof(s));
        r = nsbox_call_stream(nb, id, "exec", "{\"shell\": \"printf after\"}", on_event, &s, &res);
        printf("a streamed call after a cancel: %d [%s]\n", r, s.out);
        free(res);
        res = NULL;

        /* a command stopped at its start: killed, the handle goes on */
        memset(&s, 0, sizeof(s));
        s.stop_at_start = 1;
        r = nsbox_call_stream(nb, id, "exec", "{\"shell\": \"sleep 100\"}", on_event, &s, &res);
        show(nb, "exec stopped", r, &s);
        r = nsbox_call(nb, id, "exec",
                       "{\"shell\": \"for i in $(seq 50); do grep -aqs 'sleep[^a-z]100' /proc/[0-9]*/cmdline || exit 0; sleep 0.1; done; exit 1\"}",
                       &res);
        printf("stopped command killed: %s\n", res && strstr(res, "\"exit_code\":0") ? "yes" : "NO");
        free(res);
        res = NULL;

        /* process_connect to a detached command: its output events, then its result */
        r = nsbox_call(nb, id, "exec", "{\"shell\": \"echo a; sleep 0.2; echo b\", \"detach\": true, \"tag\": \"ab\"}", &res);
        printf("detached: %d\n", r);
        free(res);
        res = NULL;
        memset(&s, 0, sizeof(s));
        r = nsbox_call_stream(nb, id, "process_connect", "{\"tag\": \"ab\"}", on_event, &s, &res);
        show(nb, "process_connect", r, &s);
        printf("process_connect output: [%s] exit %s\n", strcmp(s.out, "a\nb\n") ? s.out : "a b", field(res, "exit_code", buf, sizeof(buf)));
        free(res);
        res = NULL;

        /* bad input: the usual errors, no event */
        memset(&s, 0, sizeof(s));
        show(nb, "unknown tool", nsbox_call_stream(nb, id, "no_such_tool", NULL, on_event, &s, &res), &s);
        show(nb, "bad json", nsbox_call_stream(nb, id, "watch", "{", on_event, &s, &res), &s);
        show(nb, "missing directory", nsbox_call_stream(nb, id, "watch", "{\"path\": \"/no/such\"}", on_event, &s, &res), &s);
        show(nb, "unknown process", nsbox_call_stream(nb, id, "process_connect", "{\"tag\": \"nope\"}", on_event, &s, &res), &s);
        show(nb, "unknown sandbox", nsbox_call_stream(nb, "ffffffffffffffffffffffffffffffff", "watch", "{\"path\": \"/tmp\"}", on_event, &s, &res), &s);
        show(nb, "NULL tool", nsbox_call_stream(nb, id, NULL, NULL, on_event, &s, &res), &s);
        printf("result untouched: %s\n", res ? "no" : "yes");
        show(nb, "destroy", nsbox_destroy(nb, id), &s);
        free(id);
        nsbox_close(nb);
        return 0;
}
