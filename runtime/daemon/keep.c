/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: the state directory (what a next nsboxd must clean up) and on_stop "keep", the
 * hand-over to the next nsboxd and its adoption of what was kept (keeper.h; nsboxd(8), RESTARTS). */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../dlog.h"
#include "../image.h"
#include "../keeper.h"

/* <socket>.state: made 0700 if missing; must be a directory of ours, not a link. */
int state_dir_open(const char *sock, nsbox_error *err)
{
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s.state", sock) >= sizeof(path))
                return nsbox_err(err, ENAMETOOLONG, "state directory");
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "create state directory '%s'", path);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "open state directory '%s'", path);
        if (st.st_uid != geteuid() || (st.st_mode & 0077)) {
                close(fd);
                return nsbox_err(err, EPERM, "state directory '%s' is not ours alone (owner %u, mode %03o)", path, (unsigned)st.st_uid,
                                 (unsigned)(st.st_mode & 0777));
        }
        return fd;
}

/* Sandboxes a killed nsboxd left (or a keeper that nobody reached): they died with it (their
 * init has PDEATHSIG, or sees its channel close), but make sure, then take their cgroups and
 * state files.  Adopted ones are d's now.  Returns how many. */
unsigned state_cleanup(const daemon_state *d)
{
        int dirfd = d->state_dirfd;
        int fd = dup(dirfd);
        DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
        if (!dir) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        unsigned n = 0;
        struct dirent *e;
        while ((e = readdir(dir))) {
                size_t len = strlen(e->d_name);
                if (e->d_name[0] == '.' && len > 4 && !strcmp(e->d_name + len - 4, ".tmp")) {
                        unlinkat(dirfd, e->d_name, 0);
                        continue;
                }
                char id[NSBOX_ID_SIZE];
                if (len <= 5 || len - 5 > NSBOX_ID_MAX || strcmp(e->d_name + len - 5, ".json"))
                        continue;
                snprintf(id, sizeof(id), "%.*s", (int)(len - 5), e->d_name);
                if (!nsbox_id_ok(id))
                        continue;
                bool adopted = false;
                for (const sandbox *s = d->sandboxes; s && !adopted; s = s->next)
                        adopted = !strcmp(s->sup.id, id);
                if (adopted)
                        continue;
                _cleanup_free_ char *text = NULL;
                size_t tlen = 0;
                json_t *o = NULL;
                json_error_t je;
                if (read_file_at(dirfd, e->d_name, O_NOFOLLOW, 65536, &text, &tlen) == 0)
                        o = json_loadb(text, tlen, 0, &je);
                pid_t pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
                unsigned long long start = (unsigned long long)json_integer_value(json_object_get(o, "start"));
                int killed = 0;
                if (pid > 0 && start && nsbox_pid_start_time(pid) == start) {
                        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
                        if (pfd >= 0 && nsbox_pid_start_time(pid) == start && syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
                                struct pollfd p = { .fd = pfd, .events = POLLIN };
                                killed = poll(&p, 1, 5000) == 1 ? 1 : -1;
                        }
                        if (pfd >= 0)
                                close(pfd);
                }
                dlog(LOG_NOTICE, "sandbox.cleaned_up", NULL, "cleaned up sandbox %s left by nsboxd %d%s", id, (int)json_integer_value(json_object_get(o, "nsboxd")),
                      killed > 0 ? " (its agent was still alive: killed)" : killed < 0 ? " (its agent would not die)" : "");
                json_decref(o);
                unlinkat(dirfd, e->d_name, 0);
                n++;
        }
        closedir(dir);
        nsbox_cgroup_collect_orphans(); /* their cgroups: named after the dead nsboxd */
        return n;
}

/* Kept: a client's sandbox that is running (or paused), with nothing in flight.  Pooled ones,
 * ones bound to a client (gone with it), ones starting, resetting or snapshotting are destroyed. */
static bool keepable(const sandbox *s)
{
        return s->ready && !s->pooled && !s->bound_client && !s->job && !s->resetting && !s->sup.n_calls && !s->create_rpc_id && !s->waiters &&
               nsbox_sup_link_idle(&s->sup) && s->sup.sb.pidfd >= 0 && s->sup.sb.agentfd >= 0;
}

static json_int_t keep_fd(int fd, nsbox_kept *k, bool *full)
{
        if (fd < 0)
                return -1;
        if (k->n_fds >= NSBOX_KEEPER_MAX_FDS) {
                *full = true;
                return -1;
        }
        k->fds[k->n_fds] = fd;
        return (json_int_t)k->n_fds++;
}

#define SET(o, key, v) json_object_set_new(o, key, v)
#define STR_OR_NULL(x) ((x) ? json_string(x) : json_null())

/* What the next nsboxd needs to serve s as it was (its fds by index in k->fds). */
/* A kept sandbox's HTTP state as http_control.c makes it: its token (hex), strings in its
 * metadata and envs, a template name; anything else is dropped (the sandbox stays, unreachable
 * by token, as one made through the socket). */
static bool kept_http_ok(json_t *h)
{
        const char *tok = json_string_value(json_object_get(h, "token"));
        if (!json_is_object(h) || !tok || strlen(tok) != 32 || !is_hex(tok, 32) || !json_is_string(json_object_get(h, "template")))
                return false;
        static const char *const maps[] = { "metadata", "envs" };
        for (size_t i = 0; i < 2; i++) {
                json_t *m = json_object_get(h, maps[i]), *v;
                const char *k;
                if (m && !json_is_object(m))
                        return false;
                json_object_foreach(m, k, v)
                        if (!json_is_string(v))
                                return false;
        }
        return true;
}

static int keep_record(const daemon_state *d, const sandbox *s, nsbox_kept *k)
{
        bool full = false;
        k->n_fds = 0;
        k->record = NULL;
        snprintf(k->id, sizeof(k->id), "%s", s->sup.id);
        json_t *o = json_object(), *fd = json_object(), *net = json_object();
        SET(o, "id", json_string(s->sup.id));
        SET(o, "pid", json_integer(s->sup.sb.pid));
        SET(o, "start", json_integer((json_int_t)nsbox_pid_start_time(s->sup.sb.pid)));
        SET(o, "nsboxd", json_integer(getpid()));
        SET(o, "cgroup", json_string(s->sup.sb.cg.dirfd >= 0 ? s->sup.sb.cg.path : ""));
        SET(o, "kept", json_true());
        SET(o, "owner", json_integer((json_int_t)s->owner));
        SET(o, "policy_name", STR_OR_NULL(s->policy_name));
        SET(o, "labels", json_incref(s->labels));
        SET(o, "http", s->http ? json_incref(s->http) : json_null());
        SET(o, "create_params", json_incref(s->create_params));
        SET(o, "created", json_integer((json_int_t)s->created));
        /* CLOCK_MONOTONIC is the machine's: the next nsboxd counts from the same time */
        SET(o, "expires_ns", json_integer((json_int_t)s->expires_ns));
        SET(o, "last_active_ns", json_integer((json_int_t)s->last_active_ns));
        SET(o, "start_ns", json_integer((json_int_t)s->sup.sb.start_ns));
        SET(o, "idle_ms", json_integer((json_int_t)s->idle_ms));
        SET(o, "expiry_pause", json_boolean(s->expiry_pause));
        SET(o, "paused", json_boolean(s->paused));
        SET(o, "expiry_files", json_boolean(s->expiry_files));
        SET(o, "paused_files", json_boolean(s->paused_files));
        SET(o, "rebooted", json_boolean(s->rebooted));
        SET(o, "boots", json_integer(s->boots));
        SET(o, "memory", json_integer((json_int_t)s->limits.memory));
        SET(o, "mem_commit", json_integer((json_int_t)s->mem_commit));
        SET(o, "template", s->tpl >= 0 ? json_string(d->conf->templates[s->tpl].name) : json_null());
        SET(o, "id_slot", json_integer(s->id_slot));
        SET(o, "host_uid", json_integer(s->host_uid));
        SET(o, "host_gid", json_integer(s->host_gid));
        SET(o, "repo_url", STR_OR_NULL(s->repo_url));
        SET(o, "repo_commit", STR_OR_NULL(s->repo_commit));
        SET(o, "clone_url", STR_OR_NULL(s->clone_url)); /* a network repository, cloned again by a reset */
        SET(o, "clone_commit", STR_OR_NULL(s->clone_commit));
        SET(o, "record_path", STR_OR_NULL(s->record_path));
        SET(o, "record_steps", json_integer((json_int_t)s->record_steps));
        SET(o, "next_agent_id", json_integer(s->sup.next_id));
        SET(o, "cg_memory", json_boolean(s->sup.sb.cg.memory));
        SET(o, "cg_pids", json_boolean(s->sup.sb.cg.pids));
        SET(o, "cg_cpu", json_boolean(s->sup.sb.cg.cpu));
        SET(fd, "agent", json_integer(keep_fd(s->sup.sb.agentfd, k, &full)));
        SET(fd, "pid", json_integer(keep_fd(s->sup.sb.pidfd, k, &full)));
        SET(fd, "stage", json_integer(keep_fd(s->sup.sb.stagefd, k, &full)));
        SET(fd, "cgroup", json_integer(keep_fd(s->sup.sb.cg.dirfd, k, &full)));
        SET(fd, "id_lock", json_integer(keep_fd(s->id_lock_fd, k, &full)));
        SET(fd, "record", json_integer(keep_fd(s->record_fd, k, &full)));
        SET(fd, "net_pid", json_integer(keep_fd(s->sup.sb.net.pidfd, k, &full)));
        SET(fd, "net_exit", json_integer(keep_fd(s->sup.sb.net.exitfd, k, &full)));
        SET(fd, "veth_lock", json_integer(keep_fd(s->sup.sb.net.veth.lockfd, k, &full)));
        const nsbox_veth *v = &s->sup.sb.net.veth;
        SET(net, "pid", json_integer(s->sup.sb.net.pid));
        SET(net, "veth_index", json_integer(v->index));
        SET(net, "veth_ifname", json_string(v->ifname));
        SET(net, "veth_host", json_pack("[iiii]", v->host[0], v->host[1], v->host[2], v->host[3]));
        SET(net, "veth_addr", json_pack("[iiii]", v->addr[0], v->addr[1], v->addr[2], v->addr[3]));
        SET(o, "fds", fd);
        SET(o, "net", net);
        json_t *bl = nsbox_layers_save(&s->base_layers, k->fds, &k->n_fds, NSBOX_KEEPER_MAX_FDS);
        json_t *ll = nsbox_layers_save(&s->layers, k->fds, &k->n_fds, NSBOX_KEEPER_MAX_FDS);
        full |= !bl || !ll;
        SET(o, "base_layers", bl ? bl : json_null());
        SET(o, "layers", ll ? ll : json_null());
        k->pidfd = s->sup.sb.pidfd;
        k->cgroupfd = s->sup.sb.cg.dirfd;
        k->record = o;
        return full ? -EMFILE : 0;
}

/* Our copies of a kept sandbox's fds go; the keeper holds its own, so nothing of it is destroyed. */
static void sandbox_forget(daemon_state *d, sandbox *s)
{
        for (sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        d->n_sandboxes--;
        unwatch_sandbox(d, s);
        int *fds[] = { &s->sup.sb.pidfd, &s->sup.sb.agentfd, &s->sup.sb.stagefd, &s->sup.sb.syncfd, &s->sup.sb.cg.dirfd, &s->sup.sb.net.pidfd, &s->sup.sb.net.exitfd,
                       &s->sup.sb.net.veth.lockfd };
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (*fds[i] >= 0) {
                        close(*fds[i]);
                        *fds[i] = -1;
                }
        free(s->sup.sb.cg.path);
        s->sup.sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
        sandbox_free(s); /* the rest (layer holds, id lock, recording) is only closed */
}

/* SIGTERM with on_stop "keep", after the drain: the sandboxes that can be kept go to a keeper;
 * the others are destroyed by the caller, as are all of them if the keeper cannot start. */
void keep_sandboxes(daemon_state *d)
{
        size_t n = 0;
        for (sandbox *s = d->sandboxes; s; s = s->next)
                n += keepable(s);
        if (!n)
                return;
        nsbox_kept *kept = calloc(n, sizeof(*kept));
        sandbox **which = calloc(n, sizeof(*which));
        size_t k = 0;
        for (sandbox *s = d->sandboxes; s && kept && which; s = s->next) {
                if (!keepable(s))
                        continue;
                if (keep_record(d, s, &kept[k]) < 0) {
                        dlog(LOG_WARNING, "sandbox.not_kept", s->sup.id, "sandbox %s: too many descriptors to hand over; destroyed", s->sup.id);
                        json_decref(steal_pointer(&kept[k].record));
                        continue;
                }
                which[k++] = s;
        }
        nsbox_error err = { 0 };
        int ctl = -1;
        pid_t keeper = k ? nsbox_keeper_fork(d->state_dirfd, kept, k, d->conf->keep_timeout_ms, &ctl, &err) : -ENOMEM;
        if (keeper < 0) {
                dlog(LOG_ERR, "keeper.failed", NULL, "cannot keep the sandboxes: %s; destroying them", err.msg ? err.msg : strerror(-keeper));
                nsbox_error_clear(&err);
        } else {
                /* named after the keeper now, so that nobody collects them as a dead nsboxd's */
                bool ok = true;
                for (size_t i = 0; i < k && ok; i++) {
                        if (nsbox_cgroup_hand_over(&which[i]->sup.sb.cg, keeper, &err) < 0) {
                                dlog(LOG_ERR, "keeper.failed", which[i]->sup.id, "cannot hand sandbox %s over: %s; destroying them all", which[i]->sup.id, err.msg);
                                nsbox_error_clear(&err);
                                ok = false;
                                break;
                        }
                        json_object_set_new(kept[i].record, "cgroup", json_string(which[i]->sup.sb.cg.dirfd >= 0 ? which[i]->sup.sb.cg.path : ""));
                        json_object_set_new(kept[i].record, "keeper", json_integer(keeper));
                        char *text = json_dumps(kept[i].record, JSON_COMPACT);
                        char name[NSBOX_ID_SIZE + 8];
                        snprintf(name, sizeof(name), "%s.json", which[i]->sup.id);
                        if (!text || write_file_at(d->state_dirfd, name, text, 0600) < 0)
                                dlog(LOG_ERR, "state.write_failed", which[i]->sup.id, "sandbox %s: cannot write its state file", which[i]->sup.id);
                        free(text);
                }
                if (nsbox_keeper_go(ctl, ok) < 0)
                        ok = false;
                if (ok) {
                        dlog(LOG_NOTICE, "daemon.kept", NULL, "%zu sandboxes kept for the next nsboxd by keeper %d (for at most %.0f s)", k, (int)keeper,
                             (double)d->conf->keep_timeout_ms / 1000.0);
                        for (size_t i = 0; i < k; i++) {
                                dlog(LOG_INFO, "sandbox.kept", which[i]->sup.id, "sandbox %s kept", which[i]->sup.id);
                                sandbox_forget(d, which[i]);
                        }
                } else {
                        while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR)
                                ;
                }
        }
        for (size_t i = 0; kept && i < n; i++)
                json_decref(kept[i].record);
        free(kept);
        free(which);
}

static int take_fd(json_t *fds_o, const char *key, int *fds, size_t n, bool required, bool *bad)
{
        json_t *v = json_object_get(fds_o, key);
        json_int_t i = json_integer_value(v);
        if (!json_is_integer(v) || i < 0 || (size_t)i >= n || fds[i] < 0) {
                if (required || (json_is_integer(v) && i >= 0))
                        *bad = true;
                return -1;
        }
        int fd = fds[i];
        fds[i] = -1;
        return fd;
}

static uint64_t rec_u64(json_t *o, const char *key) { return (uint64_t)json_integer_value(json_object_get(o, key)); }

static char *rec_str(json_t *o, const char *key, bool *bad)
{
        const char *v = json_string_value(json_object_get(o, key));
        char *c = v ? strdup(v) : NULL;
        if (v && !c)
                *bad = true;
        return c;
}

/* The next nsboxd: serve a kept sandbox again, or destroy it (whatever of it we hold). */
int adopt_one(void *ctx, json_t *rec, int *fds, size_t n)
{
        daemon_state *d = ctx;
        const char *id = json_string_value(json_object_get(rec, "id"));
        nsbox_error err = { 0 };
        bool bad = !nsbox_id_ok(id);
        sandbox *s = sandbox_new();
        if (!s)
                return -ENOMEM;
        calls_attach(d, s, bad ? "?" : id);
        for (sandbox *o = d->sandboxes; o && !bad; o = o->next)
                bad = !strcmp(o->sup.id, s->sup.id);
        json_t *f = json_object_get(rec, "fds"), *net = json_object_get(rec, "net");
        s->sup.sb.pid = (pid_t)rec_u64(rec, "pid");
        s->sup.sb.pidfd = take_fd(f, "pid", fds, n, true, &bad);
        s->sup.sb.agentfd = take_fd(f, "agent", fds, n, true, &bad);
        s->sup.sb.stagefd = take_fd(f, "stage", fds, n, false, &bad);
        s->sup.sb.cg.dirfd = take_fd(f, "cgroup", fds, n, false, &bad);
        s->sup.sb.cg.path = s->sup.sb.cg.dirfd >= 0 ? rec_str(rec, "cgroup", &bad) : NULL;
        bad |= s->sup.sb.cg.dirfd >= 0 && !s->sup.sb.cg.path;
        s->sup.sb.cg.memory = json_is_true(json_object_get(rec, "cg_memory"));
        s->sup.sb.cg.pids = json_is_true(json_object_get(rec, "cg_pids"));
        s->sup.sb.cg.cpu = json_is_true(json_object_get(rec, "cg_cpu"));
        if (s->sup.sb.cg.dirfd >= 0 && s->sup.sb.cg.path)
                nsbox_cgroup_reopen_v1(&s->sup.sb.cg); /* its cgroup v1 directories, by the same name */
        s->sup.sb.start_ns = rec_u64(rec, "start_ns");
        s->sup.sb.net.pid = (pid_t)json_integer_value(json_object_get(net, "pid"));
        s->sup.sb.net.pidfd = take_fd(f, "net_pid", fds, n, false, &bad);
        s->sup.sb.net.exitfd = take_fd(f, "net_exit", fds, n, false, &bad);
        nsbox_veth *v = &s->sup.sb.net.veth;
        v->lockfd = take_fd(f, "veth_lock", fds, n, false, &bad);
        v->index = (int)json_integer_value(json_object_get(net, "veth_index"));
        snprintf(v->ifname, sizeof(v->ifname), "%s", json_string_value(json_object_get(net, "veth_ifname")) ?: "");
        for (int i = 0; i < 4; i++) {
                v->host[i] = (uint8_t)json_integer_value(json_array_get(json_object_get(net, "veth_host"), i));
                v->addr[i] = (uint8_t)json_integer_value(json_array_get(json_object_get(net, "veth_addr"), i));
        }
        s->id_lock_fd = take_fd(f, "id_lock", fds, n, false, &bad);
        s->record_fd = take_fd(f, "record", fds, n, false, &bad);
        bad |= nsbox_layers_load(json_object_get(rec, "base_layers"), fds, n, &s->base_layers) < 0;
        bad |= nsbox_layers_load(json_object_get(rec, "layers"), fds, n, &s->layers) < 0;
        /* the one we were told of, still: its pidfd names it across pid reuse */
        if (!bad && (s->sup.sb.pid <= 0 || syscall(SYS_pidfd_send_signal, s->sup.sb.pidfd, 0, NULL, 0) < 0 ||
                     nsbox_pid_start_time(s->sup.sb.pid) != (unsigned long long)rec_u64(rec, "start")))
                bad = true;
        s->owner = (uid_t)rec_u64(rec, "owner");
        s->policy_name = rec_str(rec, "policy_name", &bad);
        s->repo_url = rec_str(rec, "repo_url", &bad);
        s->repo_commit = rec_str(rec, "repo_commit", &bad);
        s->clone_url = rec_str(rec, "clone_url", &bad);
        s->clone_commit = rec_str(rec, "clone_commit", &bad);
        s->record_path = rec_str(rec, "record_path", &bad);
        s->record_steps = rec_u64(rec, "record_steps");
        s->sup.next_id = (json_int_t)rec_u64(rec, "next_agent_id");
        s->created = (time_t)rec_u64(rec, "created");
        s->expires_ns = rec_u64(rec, "expires_ns");
        s->last_active_ns = rec_u64(rec, "last_active_ns");
        s->idle_ms = rec_u64(rec, "idle_ms");
        s->expiry_pause = json_is_true(json_object_get(rec, "expiry_pause"));
        s->paused = json_is_true(json_object_get(rec, "paused"));
        s->expiry_files = json_is_true(json_object_get(rec, "expiry_files"));
        s->paused_files = s->paused && json_is_true(json_object_get(rec, "paused_files"));
        s->rebooted = json_is_true(json_object_get(rec, "rebooted"));
        s->boots = (unsigned)rec_u64(rec, "boots");
        s->mem_commit = rec_u64(rec, "mem_commit");
        s->id_slot = (unsigned)rec_u64(rec, "id_slot");
        s->host_uid = (uid_t)rec_u64(rec, "host_uid");
        s->host_gid = (gid_t)rec_u64(rec, "host_gid");
        json_t *labels = json_object_get(rec, "labels");
        s->labels = json_is_object(labels) ? json_deep_copy(labels) : json_object();
        json_t *http = json_object_get(rec, "http");
        s->http = kept_http_ok(http) ? json_deep_copy(http) : NULL;
        const char *tpl = json_string_value(json_object_get(rec, "template"));
        const nsbox_template *tp = tpl ? nsbox_dconfig_template(d->conf, tpl) : NULL;
        s->tpl = tp ? (int)(tp - d->conf->templates) : -1;
        /* its policy, as it was made: to start it again on a reset, and to snapshot it */
        json_t *cp = json_object_get(rec, "create_params");
        s->create_params = json_is_object(cp) ? json_deep_copy(cp) : NULL;
        int r = 0;
        if (bad || !s->create_params) {
                r = nsbox_err(&err, EINVAL, "its record or its descriptors are not whole");
        } else {
                /* not checked against the host again: a published port, for one, is its own */
                nsbox_run_options o;
                r = shape_options(NULL, s->create_params, &o, &err);
                if (r == 0) {
                        r = nsbox_run_options_policy(&o, &s->policy, &err);
                        if (r == 0 && (o.from || o.image))
                                r = nsbox_policy_use_layers(s->policy, &s->base_layers, o.rootfs != NULL, &err);
                        if (r == 0 && o.image)
                                r = nsbox_image_reapply(s->policy, &o, &err);
                        nsbox_run_options_release(&o);
                }
        }
        if (r == 0) {
                s->policy->limits.memory = rec_u64(rec, "memory");
                s->limits = s->policy->limits;
                r = nsbox_cgroup_hand_over(&s->sup.sb.cg, getpid(), &err);
        }
        if (r == 0) {
                s->serial = ++d->next_serial;
                s->ready = true;
                s->next = d->sandboxes;
                d->sandboxes = s;
                d->n_sandboxes++;
                if (nsbox_epoll_add(d->epfd, s->sup.sb.pidfd, KEY(s->serial, K_PIDFD), &s->pid_events, EPOLLIN) < 0 ||
                    nsbox_epoll_add(d->epfd, s->sup.sb.agentfd, KEY(s->serial, K_AGENT), &s->agent_events, 0) < 0) {
                        dlog(LOG_ERR, "sandbox.adopt_failed", s->sup.id, "cannot watch kept sandbox %s: %s; destroyed", s->sup.id, strerror(errno));
                        sandbox_remove(d, s, "internal", "could not be adopted");
                        return -1;
                }
                state_write(d, s);
                dlog(LOG_NOTICE, "sandbox.adopted", s->sup.id, "sandbox %s (uid %u) adopted from the previous nsboxd%s", s->sup.id, (unsigned)s->owner,
                     s->paused ? ", paused" : "");
                return 0;
        }
        dlog(LOG_ERR, "sandbox.adopt_failed", bad && !nsbox_id_ok(id) ? NULL : s->sup.id, "cannot adopt kept sandbox %s: %s; destroyed", s->sup.id,
             err.msg ? err.msg : strerror(-r));
        nsbox_error_clear(&err);
        if (s->sup.sb.cg.dirfd >= 0 && !s->sup.sb.cg.path) { /* no name to remove it by: empty it */
                nsbox_cgroup_kill(&s->sup.sb.cg);
                close(s->sup.sb.cg.dirfd);
                s->sup.sb.cg.dirfd = -1;
        }
        sandbox_free(s);
        return -1;
}
