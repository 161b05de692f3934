/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's terminal (serve.h): exec's "pty" param and process_resize.  The pty is opened on
 * the agent's /dev/ptmx, which in the sandbox's root is pts/ptmx of the sandbox's own devpts
 * instance (mounts.c: newinstance): the host's /dev/pts is never reachable from here.  The
 * command opens the slave by its /dev/pts/N path after setsid (posix_spawn's SETSID runs before
 * its file actions), which makes it the session's controlling terminal, as TIOCSCTTY would. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "serve.h"
#include "util.h"

/* v: true (80x24), or an object {cols, rows}, each an integer 1..PTY_MAX_SIZE (80, 24 when
 * missing). */
int pty_parse_size(json_t *v, const char *tool, unsigned short *cols, unsigned short *rows, tool_error *e)
{
        *cols = 80;
        *rows = 24;
        if (json_is_true(v))
                return 0;
        if (!json_is_object(v))
                return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: 'pty' must be true or an object {cols, rows}", tool);
        const char *keys[] = { "cols", "rows" };
        unsigned short *out[] = { cols, rows };
        for (int i = 0; i < 2; i++) {
                json_t *n = json_object_get(v, keys[i]);
                if (!n)
                        continue;
                if (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > PTY_MAX_SIZE)
                        return tool_fail(e, TOOL_INVALID_ARGUMENT, "%s: '%s' must be an integer from 1 to %d", tool, keys[i],
                                         PTY_MAX_SIZE);
                *out[i] = (unsigned short)json_integer_value(n);
        }
        return 0;
}

/* A new pty of the sandbox's devpts: its master (O_CLOEXEC, non-blocking) and its slave's path. */
int pty_open(unsigned short cols, unsigned short rows, int *master, char *slave, size_t slave_size, tool_error *e)
{
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return tool_fail_errno(e, errno, "exec: open /dev/ptmx");
        struct winsize ws = { .ws_row = rows, .ws_col = cols };
        if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, slave_size) != 0 || ioctl(m, TIOCSWINSZ, &ws) < 0) {
                int saved = errno;
                close(m);
                return tool_fail_errno(e, saved, "exec: set up the pty");
        }
        set_nonblock(m);
        *master = m;
        return 0;
}

/* process_resize {pid|tag, cols, rows}: the kernel sends SIGWINCH to the terminal's foreground
 * process group when the size changes. */
void handle_resize(agent *a, const request *rq, proc *p)
{
        const char *t = "process_resize";
        tool_error e = { 0 };
        unsigned short cols, rows;
        int fd = p->fd[0] >= 0 ? p->fd[0] : p->fd[1];
        if (!json_object_get(rq->in.params, "cols") || !json_object_get(rq->in.params, "rows")) {
                tool_fail(&e, TOOL_INVALID_ARGUMENT, "%s: give 'cols' and 'rows'", t);
        } else if (pty_parse_size(rq->in.params, t, &cols, &rows, &e) < 0) {
                /* e says which */
        } else if (!p->pty) {
                tool_fail(&e, TOOL_INVALID_ARGUMENT, "%s: process %d has no pty (exec's 'pty')", t, (int)p->pid);
        } else if (p->exited || fd < 0) {
                tool_fail(&e, TOOL_CONFLICT, "%s: process %d has ended", t, (int)p->pid);
        } else {
                struct winsize ws = { .ws_row = rows, .ws_col = cols };
                if (ioctl(fd, TIOCSWINSZ, &ws) < 0) {
                        tool_fail_errno(&e, errno, "%s: TIOCSWINSZ", t);
                } else {
                        send_result(a, rq->id, json_pack("{sI si si}", "pid", (json_int_t)p->pid, "cols", cols, "rows", rows), NULL, 0);
                        return;
                }
        }
        send_tool_error(a, rq->id, &e);
}
