/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A progress line on a terminal for work done at length (a repository's clone, a snapshot, an
 * image import): what is being done and for how long, redrawn each second on stderr and erased
 * when the work ends.  Nothing at all when stderr is not a terminal, so logs and pipes stay clean.
 * Clones and snapshots run in nsboxd (a worker process for clones), which reports no byte counts
 * on the way: the line says what and how long, not how much. */
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
        char line[320];
        int n = snprintf(line, sizeof(line), "\r\033[Knsbox: %s... %lds", p->what, secs);
        if (n > 0)
                write_full(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void *progress_main(void *ud)
{
        nsbox_cli_progress *p = ud;
        struct timespec start, at;
        clock_gettime(CLOCK_MONOTONIC, &start);
        pthread_mutex_lock(&p->lock);
        for (long secs = 0; !p->done; secs++) {
                draw(p, secs);
                clock_gettime(CLOCK_REALTIME, &at);
                at.tv_sec += 1;
                while (!p->done && pthread_cond_timedwait(&p->cond, &p->lock, &at) == 0)
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
