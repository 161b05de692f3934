/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's log: one structured line on stderr per event (nsboxd(8), LOGGING). */
#pragma once

#include <syslog.h>

/* level=, event=, sandbox= (when sandbox_id is not NULL) and msg="..." (quoted, escaped); with
 * journald's <N> prefix when stderr is the journal, else with the time and nsboxd[pid]. */
void dlog(int prio, const char *event, const char *sandbox_id, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Called with each line about a sandbox (sandbox_id not NULL), its message unescaped: nsboxd
 * keeps them with the sandbox (E2B's sandbox logs). */
typedef void dlog_sink_fn(int prio, const char *event, const char *sandbox_id, const char *msg);
void dlog_set_sink(dlog_sink_fn *sink);
