/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libnsbox's in-process mode: what nsboxd does for one client's sandboxes, done in the caller's
 * own process, blocking, one call at a time.  The create params go through the parser nsboxd
 * uses (params.h's table, then the policy); each sandbox
 * is a supervisor (supervisor.h), the host side nsboxd uses too, driven here by a poll loop
 * until the call's answer comes.  Nothing is installed in the caller: no signal handler, no
 * thread.  The agent, an exec of nsbox-agent, exits with SIGCHLD like any exec'd child, and is
 * reaped through its pidfd (sandbox.c): never another child of the caller's, and a caller that
 * collected it first does no harm. */
#include "inproc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../tools/registry.h"
#include "codes.h"
#include "options.h"
#include "params.h"
#include "proto.h"
#include "sandbox.h"
#include "supervisor.h"
#include "util.h"

#define READY_TIMEOUT_MS 30000 /* as nsboxd: a sandbox that is not serving by then never will */

struct nsbox_local_sandbox {
        nsbox_local_sandbox *next;
        nsbox_supervisor sup; /* its id, its launcher handle, the link to its agent */
};

static const nsbox_sup_ops sup_ops;

static void sandbox_free(nsbox_local_sandbox *s, const char *why)
{
        nsbox_sup_stop(&s->sup, "internal", why);
        free(s);
}

static void unlink_sandbox(nsbox_local *l, nsbox_local_sandbox *s)
{
        for (nsbox_local_sandbox **pp = &l->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        return;
                }
}

int nsbox_local_create(nsbox_local *l, json_t *params, char ret_id[NSBOX_ID_SIZE], const char **ret_code, nsbox_error *err)
{
        *ret_code = "invalid_argument";
        /* Create params only nsboxd can honour (params.h): they need its event loop (lifetimes),
         * its list (labels), its configuration (templates, wait) or its store (snapshots,
         * repositories, trajectories). */
        const char *k = nsbox_params_first(params, NSBOX_PARAM_DAEMON_ONLY);
        if (k) {
                *ret_code = "unavailable";
                return nsbox_err_as(err, EOPNOTSUPP, "create: '%s' needs nsboxd; an in-process sandbox has none (see libnsbox(3))", k);
        }
        /* 1. Every param checked, the policy loaded and merged, before anything exists. */
        nsbox_run_options o;
        nsbox_policy *policy = NULL;
        int r = nsbox_params_from_json(params, NSBOX_PARAM_DAEMON_ONLY, &o, err);
        if (r == 0)
                r = nsbox_run_options_policy(&o, &policy, err);
        nsbox_run_options_release(&o);
        if (r == 0)
                r = nsbox_policy_check_host(policy, err);
        unsigned char rnd[16];
        if (r == 0 && getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                r = nsbox_err(err, errno, "create: getrandom");
        nsbox_local_sandbox *s = r == 0 ? calloc(1, sizeof(*s)) : NULL;
        if (r == 0 && !s)
                r = nsbox_err(err, ENOMEM, "create");
        if (r < 0) {
                nsbox_policy_free(policy);
                *ret_code = nsbox_code_for_errno(r);
                return r;
        }
        char id[NSBOX_ID_SIZE];
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(id + 2 * i, 3, "%02x", rnd[i]);
        nsbox_sup_init(&s->sup, id, &sup_ops, NULL);
        /* 2. The launcher, in serve mode: the agent is the sandbox's pid 1 and our child. */
        r = nsbox_sup_start(&s->sup, policy, err);
        nsbox_policy_free(policy); /* the agent has its own copy, in its own address space */
        if (r == 0)
                r = nsbox_sandbox_wait_ready(&s->sup.sb, READY_TIMEOUT_MS, err);
        if (r < 0) {
                nsbox_err_wrap(err, r, "create");
                *ret_code = nsbox_code_for_errno(r);
                sandbox_free(s, "failed to start");
                return r;
        }
        /* the staging tmpfs is nsboxd's, for snapshots: not needed here */
        if (s->sup.sb.stagefd >= 0) {
                close(s->sup.sb.stagefd);
                s->sup.sb.stagefd = -1;
        }
        s->next = l->sandboxes;
        l->sandboxes = s;
        memcpy(ret_id, s->sup.id, sizeof(s->sup.id));
        *ret_code = NULL;
        return 0;
}

/* By id or unique prefix, as nsboxd finds them. */
static nsbox_local_sandbox *find(nsbox_local *l, const char *want, const char **ret_code, nsbox_error *err)
{
        nsbox_id_match m;
        nsbox_id_match_init(&m, want);
        for (nsbox_local_sandbox *s = l->sandboxes; s; s = s->next)
                nsbox_id_match_offer(&m, s->sup.id, s);
        char msg[160];
        nsbox_local_sandbox *found = nsbox_id_match_result(&m, ret_code, msg, sizeof(msg));
        if (!found)
                nsbox_err_as(err, !strcmp(*ret_code, "conflict") ? EBUSY : ESRCH, "%s", msg);
        return found;
}

/* A call's end, for the caller waiting for it in nsbox_local_call (NULL once it gave up). */
typedef struct waiter {
        bool done;
        json_t *result;
        const char *code;
        char *msg;
        bool stop; /* on_event asked for it */
        nsbox_local_event_fn on_event;
        void *userdata;
} waiter;

static void on_event(void *ctx, nsbox_sup_call *c, const char *event, json_t *frame, const void *data, size_t len)
{
        (void)ctx;
        waiter *w = c->data;
        if (w && w->on_event && !w->stop && w->on_event(event, frame, data, len, w->userdata))
                w->stop = true;
}

static void on_done(void *ctx, nsbox_sup_call *c, json_t *result, const char *code, const char *msg)
{
        (void)ctx;
        waiter *w = c->data;
        if (!w)
                return;
        w->done = true;
        w->result = json_incref(result);
        w->code = code;
        w->msg = msg ? strdup(msg) : NULL;
}

static const nsbox_sup_ops sup_ops = { .event = on_event, .done = on_done };

/* The agent is gone (killed from outside, or the OOM killer took the sandbox: memory.oom.group):
 * the sandbox is destroyed, as nsboxd does, and the call answered as nsboxd answers it. */
static void agent_gone(nsbox_local *l, nsbox_local_sandbox *s)
{
        char why[128];
        nsbox_sup_died(&s->sup, why, sizeof(why));
        unlink_sandbox(l, s);
        sandbox_free(s, why);
}

/* One round of the call's wait: nsbox_sup_poll's, but a readable wakefd stops the call. */
static int poll_round(nsbox_supervisor *sup, int wakefd, waiter *w)
{
        if (wakefd < 0)
                return nsbox_sup_poll(sup, -1);
        struct pollfd p[2] = { { .fd = sup->sb.agentfd, .events = POLLIN | (sup->out.len ? POLLOUT : 0) }, { .fd = wakefd, .events = POLLIN } };
        bool buffered = nsbox_frame_reader_ready(&sup->rd); /* frames read ahead: no wait for them */
        if (poll(p, 2, buffered ? 0 : -1) < 0)
                return errno == EINTR ? 0 : -errno;
        uint64_t v;
        if (p[1].revents && read(wakefd, &v, sizeof(v)) >= 0)
                w->stop = true;
        return p[0].revents || buffered ? nsbox_sup_poll(sup, 0) : 0;
}

static int local_call(nsbox_local *l, const char *id, const char *tool, json_t *params, int fd, bool stream, nsbox_local_event_fn on_event,
                      void *userdata, int wakefd, json_t **ret, const char **ret_code, nsbox_error *err);

int nsbox_local_call(nsbox_local *l, const char *id, const char *tool, json_t *params, bool stream, nsbox_local_event_fn on_event,
                     void *userdata, int wakefd, json_t **ret, const char **ret_code, nsbox_error *err)
{
        return local_call(l, id, tool, params, -1, stream, on_event, userdata, wakefd, ret, ret_code, err);
}

int nsbox_local_call_fd(nsbox_local *l, const char *id, const char *tool, json_t *params, int fd, json_t **ret, const char **ret_code,
                        nsbox_error *err)
{
        return local_call(l, id, tool, params, fd < 0 ? -2 : fd, false, NULL, NULL, -1, ret, ret_code, err);
}

/* fd: -1 no descriptor, -2 one was asked for but none given, else the caller's pipe */
static int local_call(nsbox_local *l, const char *id, const char *tool, json_t *params, int fd, bool stream, nsbox_local_event_fn on_event,
                      void *userdata, int wakefd, json_t **ret, const char **ret_code, nsbox_error *err)
{
        nsbox_local_sandbox *s = find(l, id, ret_code, err);
        if (!s)
                return -ESRCH;
        waiter w = { .on_event = on_event, .userdata = userdata };
        nsbox_sup_call *c = NULL;
        /* an alias's params made into its tool's (knowlyr's file_read...), as nsboxd does */
        char alias_why[256] = "";
        json_auto_t *mapped = NULL;
        if (tool_alias_params(tool, params, &mapped, alias_why, sizeof(alias_why)) < 0 && tool_canonical_name(tool)) {
                *ret_code = "invalid_argument";
                return nsbox_err_as(err, EINVAL, "%s", alias_why);
        }
        if (mapped)
                params = mapped;
        strbuf why;
        sb_init(&why, 256);
        int r;
        json_auto_t *fdparams = NULL;
        if (fd != -1) {
                r = nsbox_sup_check_fd(tool, params, fd, &fdparams, ret_code, &why);
                int mine = r == 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
                if (r == 0 && mine < 0) {
                        *ret_code = "internal";
                        sb_appendf(&why, "%s: dup: %s", tool, strerror(errno));
                        r = -EMFILE;
                }
                if (r == 0)
                        r = nsbox_sup_send_fd(&s->sup, tool, fdparams, mine, &w, &c, ret_code, &why);
        } else {
                r = nsbox_sup_send(&s->sup, tool, params, stream, &w, &c, ret_code, &why);
        }
        if (r < 0)
                r = nsbox_err_as(err, -r, "%s", why.buf ? why.buf : "out of memory");
        sb_release(&why);
        while (r == 0 && !w.done) {
                r = poll_round(&s->sup, wakefd, &w);
                if (r == 0 && w.stop && !w.done) {
                        /* as nsboxd when its client goes: the answer, when it comes, is dropped */
                        c->data = NULL;
                        nsbox_sup_cancel(&s->sup, c);
                        nsbox_sup_flush(&s->sup); /* the cancel goes now, not with the next call */
                        *ret_code = NULL;
                        return 1;
                }
                if (r == -EPIPE) {
                        agent_gone(l, s); /* answers the call */
                        r = 0;
                } else if (r < 0) {
                        c->data = NULL;
                        nsbox_sup_cancel(&s->sup, c);
                        *ret_code = "internal";
                        return nsbox_err(err, -r, "%s: poll", tool);
                }
        }
        if (r < 0)
                return r;
        if (w.stop) { /* it ended in the same round: the caller still said stop */
                json_decref(w.result);
                free(w.msg);
                *ret_code = NULL;
                return 1;
        }
        if (w.result) {
                *ret = w.result;
                *ret_code = NULL;
                return 0;
        }
        *ret_code = w.code;
        r = nsbox_err_as(err, EIO, "%s", w.msg ? w.msg : "out of memory");
        free(w.msg);
        return r;
}

int nsbox_local_destroy(nsbox_local *l, const char *id, char ret_id[NSBOX_ID_SIZE], const char **ret_code, nsbox_error *err)
{
        nsbox_local_sandbox *s = find(l, id, ret_code, err);
        if (!s)
                return -ESRCH;
        memcpy(ret_id, s->sup.id, sizeof(s->sup.id));
        unlink_sandbox(l, s);
        sandbox_free(s, "was destroyed");
        *ret_code = NULL;
        return 0;
}

void nsbox_local_close(nsbox_local *l)
{
        while (l->sandboxes) {
                nsbox_local_sandbox *s = l->sandboxes;
                l->sandboxes = s->next;
                sandbox_free(s, "was destroyed");
        }
}
