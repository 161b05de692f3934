/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: trajectory recording (nsbox-protocol(7), TRAJECTORIES). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "../dlog.h"
#include "../trajectory.h"

static void record_line(sandbox *s, json_t *line)
{
        if (s->record_fd >= 0 && line && nsbox_traj_write(s->record_fd, line) < 0) {
                dlog(LOG_ERR, "record.failed", s->sup.id, "sandbox %s: cannot write its trajectory '%s': %s; recording stopped", s->sup.id, s->record_path, strerror(errno));
                close(s->record_fd);
                s->record_fd = -1;
        }
        json_decref(line);
}

void record_call(sandbox *s, const pending *p, json_t *result, const char *code)
{
        if (s->record_fd < 0 || !p->step)
                return;
        record_line(s, nsbox_traj_step_line(p->step, "call", p->tool, p->rec_params, (double)(now_ns() - p->start_ns) / 1e6, result, code));
}

void record_op(sandbox *s, const char *op, const char *name, uint64_t start_ns, const char *code)
{
        if (s->record_fd < 0)
                return;
        record_line(s, nsbox_traj_step_line(++s->record_steps, op, name, NULL, (double)(now_ns() - start_ns) / 1e6, NULL, code));
}

int open_recording(sandbox *s, const char *path, nsbox_error *err)
{
        s->record_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (s->record_fd < 0)
                return nsbox_err(err, errno, "record '%s'", path);
        if (!(s->record_path = strdup(path)))
                return -ENOMEM;
        json_t *cp = json_deep_copy(s->create_params);
        json_object_del(cp, "record");
        json_object_del(cp, "labels");
        json_t *h = nsbox_traj_header(s->sup.id, time(NULL), cp);
        json_decref(cp);
        if (!h || nsbox_traj_write(s->record_fd, h) < 0) {
                json_decref(h);
                return nsbox_err(err, errno ? errno : ENOMEM, "record '%s'", path);
        }
        json_decref(h);
        return 0;
}
