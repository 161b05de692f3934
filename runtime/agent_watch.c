/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's watch calls (serve.h, watch.h): a directory's changes as events until
 * cancelled, each call an inotify fd in the agent's epoll loop. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "serve.h"
#include "proto.h"
#include "util.h"
#include "watch.h"

#define MAX_WATCHES 64  /* watch calls at once, per sandbox */

typedef struct watch_call {
        struct watch_call *next;
        json_int_t call_id;
        uint64_t serial;
        nsbox_watch *w;
        uint32_t events;
        bool paused;
        bool entries; /* an event of what is there carries its stat (with metadata) */
        json_int_t n_events;
} watch_call;

typedef struct watch_send {
        agent *a;
        watch_call *wc;
} watch_send;

static void watch_send_event(void *ud, const char *op, const char *path, const char *type)
{
        watch_send *ws = ud;
        json_t *m = json_pack("{sI ss ss so}", "id", ws->wc->call_id, "event", "fs", "op", op, "path",
                              nsbox_json_text(path, strlen(path), NULL));
        if (m && type)
                json_object_set_new(m, "type", json_string(type));
        if (m && ws->wc->entries && (!strcmp(op, "create") || !strcmp(op, "write") || !strcmp(op, "chmod"))) {
                /* as at the time it is read: an entry gone meanwhile has none (envd) */
                tool_error e = { 0 };
                char *abs = NULL;
                json_t *entry = NULL;
                if (tool_path_normalize(&ws->a->tctx, path, &abs, &e) == 0 && tool_entry(&ws->a->tctx, "watch", abs, false, true, &entry, &e) == 0)
                        json_object_set_new(m, "entry", entry);
                free(abs);
        }
        send_frame(ws->a, m, NULL, 0);
        ws->wc->n_events++;
}

/* Answer the call and forget it: cancelled, or ended ("removed"/"renamed": the directory went). */
static void watch_end(agent *a, watch_call *wc, bool cancelled, const char *ended)
{
        for (watch_call **pp = &a->watches; *pp; pp = &(*pp)->next)
                if (*pp == wc) {
                        *pp = wc->next;
                        break;
                }
        a->n_watches--;
        json_t *r = json_pack("{sI sb}", "events", wc->n_events, "cancelled", cancelled);
        if (r && ended)
                json_object_set_new(r, "ended", json_string(ended));
        if (wc->call_id >= 0)
                send_result(a, wc->call_id, r, NULL, 0);
        else
                json_decref(r);
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, nsbox_watch_fd(wc->w), NULL);
        nsbox_watch_free(wc->w);
        free(wc);
}

/* Whether path is a directory on a network file system (NFS, CIFS, SMB, FUSE: envd's list), whose
 * events may never come. */
static bool on_network_fs(const tool_ctx *ctx, const char *path)
{
        tool_error ignored;
        char *abs = NULL;
        int fd = -1;
        struct statfs sf;
        bool net = false;
        if (tool_path_normalize(ctx, path, &abs, &ignored) == 0 && tool_open(ctx, abs, O_PATH | O_DIRECTORY, 0, &fd, &ignored) == 0 &&
            fstatfs(fd, &sf) == 0)
                net = sf.f_type == NFS_SUPER_MAGIC || sf.f_type == (typeof(sf.f_type))CIFS_SUPER_MAGIC || sf.f_type == SMB_SUPER_MAGIC ||
                      sf.f_type == (typeof(sf.f_type))SMB2_SUPER_MAGIC || sf.f_type == FUSE_SUPER_MAGIC;
        if (fd >= 0)
                close(fd);
        free(abs);
        return net;
}

void handle_watch(agent *a, const request *rq)
{
        tool_error e = { 0 };
        const char *path = NULL;
        bool recursive = false, stream = false, entries = false, network = true;
        if (tool_param_string(&rq->in, "watch", "path", true, &path, &e) < 0 || tool_param_bool(&rq->in, "watch", "recursive", &recursive, &e) < 0 ||
            tool_param_bool(&rq->in, "watch", "stream", &stream, &e) < 0 || tool_param_bool(&rq->in, "watch", "entries", &entries, &e) < 0 ||
            tool_param_bool(&rq->in, "watch", "network_mounts", &network, &e) < 0) {
                send_tool_error(a, rq->id, &e);
                return;
        }
        if (!stream) {
                tool_fail(&e, TOOL_INVALID_ARGUMENT, "watch needs stream: true (its changes come as events until cancelled)");
        } else if (!network && on_network_fs(&a->tctx, path)) {
                tool_fail(&e, TOOL_INVALID_ARGUMENT, "watch: '%s' is on a network file system, whose changes may never be reported "
                          "(network_mounts: true watches it anyway)", path);
        } else if (a->n_watches >= MAX_WATCHES) {
                tool_fail(&e, TOOL_CONFLICT, "watch: %d watches are active in this sandbox (the limit); cancel one first", MAX_WATCHES);
        } else {
                watch_call *wc = calloc(1, sizeof(*wc));
                if (!wc)
                        agent_exit(a, 125);
                if (nsbox_watch_open(&a->tctx, path, recursive, &wc->w, &e) == 0) {
                        wc->call_id = rq->id;
                        wc->entries = entries;
                        wc->serial = ++a->next_serial;
                        if (nsbox_epoll_add(a->epfd, nsbox_watch_fd(wc->w), WATCH(wc->serial, WATCH_INOTIFY), &wc->events, EPOLLIN) == 0) {
                                wc->next = a->watches;
                                a->watches = wc;
                                a->n_watches++;
                                /* watching from now on: a client may act on that */
                                send_frame(a, json_pack("{sI ss}", "id", rq->id, "event", "started"), NULL, 0);
                                return; /* answered when cancelled or ended */
                        }
                        tool_fail_errno(&e, errno, "watch: epoll");
                        nsbox_watch_free(wc->w);
                }
                free(wc);
        }
        send_tool_error(a, rq->id, &e);
}

void watch_ready(agent *a, uint64_t serial)
{
        watch_call *wc = a->watches;
        while (wc && wc->serial != serial)
                wc = wc->next;
        if (!wc || wc->paused || a->outq.len >= OUTQ_HIGH)
                return; /* ended by an earlier event of this batch, or held */
        watch_send ws = { a, wc };
        int r = nsbox_watch_read(wc->w, watch_send_event, &ws);
        if (r == 1) {
                watch_end(a, wc, false, "removed");
        } else if (r < 0) {
                json_t *jid = json_integer(wc->call_id);
                send_error(a, jid, "internal", "watch: read inotify events: %s", strerror(-r));
                json_decref(jid);
                wc->call_id = -1; /* answered: watch_end's result goes to nothing */
                watch_end(a, wc, false, NULL);
        }
}

bool watch_cancel(agent *a, json_int_t id)
{
        for (watch_call *wc = a->watches; wc; wc = wc->next)
                if (wc->call_id == id) {
                        watch_end(a, wc, true, NULL);
                        return true;
                }
        return false;
}

/* Paused (a slow reader) or the outgoing queue high: the inotify fd is not read; the kernel's
 * queue holds what comes, and says overflow past its own bound. */
void watch_pause(agent *a, json_int_t id, bool pause)
{
        for (watch_call *wc = a->watches; wc; wc = wc->next)
                if (wc->call_id == id)
                        wc->paused = pause;
}

void watch_update_interest(agent *a, bool high)
{
        for (watch_call *wc = a->watches; wc; wc = wc->next)
                nsbox_epoll_set(a->epfd, nsbox_watch_fd(wc->w), WATCH(wc->serial, WATCH_INOTIFY), &wc->events,
                                high || wc->paused ? 0 : EPOLLIN);
}
