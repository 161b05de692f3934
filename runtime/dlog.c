/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's log lines (dlog.h). */
#include "dlog.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* Structured log lines on stderr: key=value fields (logfmt) a collector can parse and a person
 * can read.  Under systemd (stderr is the journal stream named by $JOURNAL_STREAM) each line
 * starts with the <N> priority prefix journald reads, and the journal adds time and pid;
 * elsewhere the line starts with the time and nsboxd[pid]. */
static int log_journal = -1; /* unknown yet */
static bool stderr_is_journal(void)
{
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        return e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
               (unsigned long long)st.st_ino == ino;
}

static dlog_sink_fn *dlog_sink;

void dlog_set_sink(dlog_sink_fn *sink) { dlog_sink = sink; }

void dlog(int prio, const char *event, const char *sandbox_id, const char *fmt, ...)
{
        static const char *const level[] = { "emerg", "alert", "crit", "error", "warning", "notice", "info", "debug" };
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (sandbox_id && dlog_sink)
                dlog_sink(prio, event, sandbox_id, msg);
        if (log_journal < 0)
                log_journal = stderr_is_journal();
        strbuf line;
        sb_init(&line, 8192); /* the message (at most 1023 bytes) escaped, and the fields */
        if (log_journal) {
                sb_appendf(&line, "<%d>", prio & 7);
        } else {
                struct timespec ts;
                struct tm tm;
                char t[32];
                clock_gettime(CLOCK_REALTIME, &ts);
                strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", localtime_r(&ts.tv_sec, &tm));
                sb_appendf(&line, "%s.%03ld nsboxd[%d]: ", t, ts.tv_nsec / 1000000, (int)getpid());
        }
        sb_appendf(&line, "level=%s event=%s", level[prio & 7], event);
        if (sandbox_id)
                sb_appendf(&line, " sandbox=%s", sandbox_id);
        /* the message quoted: a quote, a backslash or a control character in it (a path, an
         * error text) cannot end the field or the line */
        sb_appendf(&line, " msg=\"");
        for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
                if (*p == '"' || *p == '\\')
                        sb_appendf(&line, "\\%c", *p);
                else if (*p < 0x20 || *p == 0x7f)
                        sb_appendf(&line, "\\x%02x", *p);
                else
                        sb_appendf(&line, "%c", *p);
        }
        sb_appendf(&line, "\"\n");
        if (line.buf)
                (void)!write(STDERR_FILENO, line.buf, line.len);
        sb_release(&line);
}

