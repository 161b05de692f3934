/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A progress line on a terminal for work done at length (a repository's clone, a snapshot, an
 * image import): what is being done, how far when it is known, and for how long, redrawn each
 * second on stderr and erased when the work ends.  Nothing at all when stderr is not a terminal,
 * so logs and pipes stay clean.  How far: a clone of a host repository and a snapshot's copy from
 * nsboxd's "progress" events (asked for only here, on a terminal), an image import from its own
 * extraction. */
#include "cli_session.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static void draw(const nsbox_cli_progress *p, long secs)
{
        char line[420];
        int n = snprintf(line, sizeof(line), "\r\033[Knsbox: %s... %s%s%lds", p->what, p->detail, p->detail[0] ? ", " : "", secs);
        if (n > 0)
                write_full(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static long long elapsed_ns(const struct timespec *start)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (long long)(now.tv_sec - start->tv_sec) * 1000000000ll + (now.tv_nsec - start->tv_nsec);
}

static void *progress_main(void *ud)
{
        nsbox_cli_progress *p = ud;
        struct timespec start, at;
        clock_gettime(CLOCK_MONOTONIC, &start);
        pthread_mutex_lock(&p->lock);
        while (!p->done) {
                long long el = elapsed_ns(&start);
                draw(p, (long)(el / 1000000000ll));
                p->changed = false;
                /* until the next whole second, or a new detail */
                long long wait = 1000000000ll - el % 1000000000ll;
                clock_gettime(CLOCK_REALTIME, &at);
                at.tv_sec += (time_t)(wait / 1000000000ll);
                at.tv_nsec += (long)(wait % 1000000000ll);
                if (at.tv_nsec >= 1000000000l) {
                        at.tv_sec++;
                        at.tv_nsec -= 1000000000l;
                }
                while (!p->done && !p->changed && pthread_cond_timedwait(&p->cond, &p->lock, &at) == 0)
                        ;
        }
        pthread_mutex_unlock(&p->lock);
        write_full(2, "\r\033[K", 4);
        return NULL;
}

static nsbox_cli_progress *active; /* the one line on the terminal: an error stops it first */

void nsbox_cli_progress_start(nsbox_cli_progress *p, const char *fmt, ...)
{
        *p = (nsbox_cli_progress){ .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
        if (!isatty(2) || active)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->what, sizeof(p->what), fmt, ap);
        va_end(ap);
        _cleanup_free_ char *safe = nsbox_escape_controls(p->what); /* a URL or name the caller gave */
        if (safe)
                snprintf(p->what, sizeof(p->what), "%s", safe);
        p->running = pthread_create(&p->thread, NULL, progress_main, p) == 0;
        if (p->running)
                active = p;
}

void nsbox_cli_progress_stop(nsbox_cli_progress *p)
{
        if (!p)
                p = active;
        if (!p || !p->running)
                return;
        active = NULL;
        pthread_mutex_lock(&p->lock);
        p->done = true;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
        p->running = false;
}

void nsbox_cli_progress_detail(nsbox_cli_progress *p, const char *fmt, ...)
{
        if (!p || !p->running)
                return;
        char buf[sizeof(p->detail)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&p->lock);
        if (strcmp(buf, p->detail)) {
                memcpy(p->detail, buf, sizeof(buf));
                p->changed = true;
                pthread_cond_signal(&p->cond);
        }
        pthread_mutex_unlock(&p->lock);
}

void nsbox_cli_human_bytes(unsigned long long n, char *buf, size_t size)
{
        if (n >= (1ull << 30))
                snprintf(buf, size, "%.1f GiB", (double)n / (double)(1ull << 30));
        else if (n >= (1ull << 20))
                snprintf(buf, size, "%.1f MiB", (double)n / (double)(1ull << 20));
        else
                snprintf(buf, size, "%llu KiB", n >> 10);
}

void nsbox_cli_progress_event(json_t *params, void *ud)
{
        const char *ev = json_string_value(json_object_get(params, "event"));
        const char *phase = json_string_value(json_object_get(params, "phase"));
        json_t *done = json_object_get(params, "done"), *total = json_object_get(params, "total");
        if (!ev || strcmp(ev, "progress") || !phase || json_integer_value(done) < 0 || json_integer_value(total) < 0)
                return;
        unsigned long long d = (unsigned long long)json_integer_value(done), t = (unsigned long long)json_integer_value(total);
        if (!strcmp(phase, "fetch")) {
                char size[32];
                json_int_t b = json_integer_value(json_object_get(params, "bytes"));
                nsbox_cli_human_bytes(b > 0 ? (unsigned long long)b : 0, size, sizeof(size));
                nsbox_cli_progress_detail(ud, "objects %llu/%llu (%s)", d, t, size);
        } else if (!strcmp(phase, "checkout")) {
                nsbox_cli_progress_detail(ud, "checking out %llu/%llu files", d, t);
        } else if (!strcmp(phase, "copy")) {
                char size[32];
                json_int_t b = json_integer_value(json_object_get(params, "bytes"));
                nsbox_cli_human_bytes(b > 0 ? (unsigned long long)b : 0, size, sizeof(size));
                nsbox_cli_progress_detail(ud, "copied %llu files (%s)", d, size);
        }
}
