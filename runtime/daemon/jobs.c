/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd: workers.  Work that would stall the loop (a snapshot's copy, a repository's clone)
 * runs in a forked worker, which reports one JSON line on a pipe. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../dlog.h"
#include "../repo.h"
#include "../sha256.h"

const char *root_name(const nsbox_policy *p) { return p->root == ROOT_HOST ? "host" : p->root_path; }

void repo_key(const sandbox *s, const char *commit, char ret[65])
{
        _cleanup_free_ char *k = NULL;
        int n = asprintf(&k, "%s%c%s%c%u:%u%c%s", s->repo_url, 0, commit, 0, (unsigned)s->host_uid, (unsigned)s->host_gid, 0,
                         s->policy->workdir);
        nsbox_sha256_hex(n > 0 ? k : "", n > 0 ? (size_t)n : 0, ret);
}

/* len lowercase hex digits, as in a commit id (40) or a sandbox id (32) */
bool is_hex(const char *c, size_t len)
{
        if (!c || strlen(c) != len)
                return false;
        for (; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}

bool full_sha(const char *c) { return is_hex(c, 40); }

/* A worker's progress, to nsboxd on the pipe its result goes on: lines
 * "progress fetch|checkout|copy DONE TOTAL BYTES\n" (at most every NSBOX_REPO_PROGRESS_MS), each
 * one write of less than PIPE_BUF, before the result's JSON. */
#define PROGRESS_LINE_MAX 96

static void progress_line(int fd, const char *phase, uint64_t done, uint64_t total, uint64_t bytes)
{
        char line[PROGRESS_LINE_MAX];
        int n = snprintf(line, sizeof(line), "progress %s %llu %llu %llu\n", phase, (unsigned long long)done, (unsigned long long)total,
                         (unsigned long long)bytes);
        if (n > 0 && (size_t)n < sizeof(line))
                (void)!write_full(fd, line, (size_t)n);
}

static void worker_progress(const nsbox_repo_progress *p, void *ud)
{
        progress_line(*(int *)ud, p->phase == NSBOX_REPO_FETCH ? "fetch" : "checkout", p->done, p->total, p->bytes);
}

/* The snapshot's copy: files and bytes so far (no total: the tree is not counted first), the
 * first at once and then every NSBOX_REPO_PROGRESS_MS at most. */
typedef struct copy_line {
        int fd;
        uint64_t last_ns;
} copy_line;

static void worker_copy_progress(const nsbox_copy_stats *so_far, void *ud)
{
        copy_line *l = ud;
        uint64_t now = now_ns();
        if (l->last_ns && now - l->last_ns < (uint64_t)NSBOX_REPO_PROGRESS_MS * 1000000)
                return;
        l->last_ns = now;
        progress_line(l->fd, "copy", so_far->files, 0, so_far->bytes);
}

/* In the worker: the snapshot's copy and commit. */
static int job_snapshot(sandbox *s, int out_fd, json_t **ret, nsbox_error *err)
{
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, err);
        if (r < 0)
                return r;
        copy_line line = { .fd = out_fd };
        nsbox_copy_progress progress = { .fn = worker_copy_progress, .userdata = &line };
        st.progress = s->job_progress ? &progress : NULL;
        _cleanup_close_ int upper = openat(s->sup.sb.stagefd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        nsbox_snapshot_stats stats = { 0 };
        /* its files, owned in its own id range, go to the shared one its forks will run in */
        nsbox_idshift shift = { .from = NSBOX_ROOT_ID_BASE + s->id_slot * NSBOX_ROOT_ID_COUNT, .to = NSBOX_ROOT_ID_BASE,
                                .count = NSBOX_ROOT_ID_COUNT };
        st.shift = s->id_slot ? &shift : NULL;
        if (upper < 0)
                r = nsbox_err(err, errno, "open the sandbox's writable layer");
        else
                r = nsbox_store_snapshot(&st, s->job_name, upper, &s->layers, root_name(s->policy), s->policy->workdir, s->sup.id,
                                         s->limits.disk ? s->limits.disk : NSBOX_DEFAULT_DISK, &stats, err);
        nsbox_store_close(&st);
        if (r < 0)
                return r;
        *ret = json_pack("{ss ss sI sI sI sf sf}", "name", s->job_name, "sandbox", s->sup.id, "files", (json_int_t)stats.files, "dirs",
                         (json_int_t)stats.dirs, "bytes", (json_int_t)stats.bytes, "copy_ms", stats.copy_ms, "sync_ms", stats.sync_ms);
        return 0;
}

/* In the worker: clone the repository into a new layer (workdir/ inside it), owned by the
 * sandbox user, and bind it under its key; its progress on out_fd. */
static int job_repo(sandbox *s, int out_fd, json_t **ret, nsbox_error *err)
{
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, err);
        if (r < 0)
                return r;
        char tmpname[64];
        int tmpfd = nsbox_store_tmp(&st, tmpname, err);
        if (tmpfd < 0) {
                nsbox_store_close(&st);
                return tmpfd;
        }
        /* layer/ + the workdir's components, the last one made by the clone */
        _cleanup_free_ char *rel = strdup(s->policy->workdir);
        _cleanup_close_ int dir = -1;
        const char *last = NULL;
        r = rel ? 0 : -ENOMEM;
        if (r == 0 && (mkdirat(tmpfd, "layer", 0755) < 0 || (dir = openat(tmpfd, "layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
                r = nsbox_err(err, errno, "create the repository layer");
        char *save = NULL;
        for (char *comp = r == 0 ? strtok_r(rel, "/", &save) : NULL; comp;) {
                char *next = strtok_r(NULL, "/", &save);
                if (!next) {
                        last = comp;
                        break;
                }
                int sub;
                if (mkdirat(dir, comp, 0755) < 0 || (sub = openat(dir, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                        r = nsbox_err(err, errno, "create '%s' in the repository layer", comp);
                        break;
                }
                close(dir);
                dir = sub;
                comp = next;
        }
        if (r == 0 && !last)
                r = nsbox_err_as(err, EINVAL, "workdir '%s': a repository cannot be the root", s->policy->workdir);
        char sha[41] = "";
        /* the checkout is bounded by the sandbox's disk: a small repository of one big blob named
         * many times (a git bomb) must not fill the host's store, nor the worker the host's memory */
        uint64_t checkout_max = s->limits.disk ? s->limits.disk : NSBOX_DEFAULT_DISK;
        if (r == 0)
                r = nsbox_repo_worker_limits(checkout_max, err);
        if (r == 0)
                r = nsbox_repo_clone_progress(s->repo_url, s->repo_commit, false, checkout_max, dir, last,
                                              s->job_progress ? worker_progress : NULL, &out_fd, sha, err);
        _cleanup_close_ int layer = r == 0 ? openat(tmpfd, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (r == 0)
                r = layer < 0 ? nsbox_err(err, errno, "open the repository layer") : nsbox_tree_chown(layer, s->host_uid, s->host_gid, err);
        char key[65];
        nsbox_layers held = NSBOX_LAYERS_INIT;
        if (r == 0) {
                repo_key(s, sha, key);
                json_t *meta = json_pack("{ss ss si si ss}", "url", s->repo_url, "commit", sha, "uid", (int)s->host_uid, "gid",
                                         (int)s->host_gid, "workdir", s->policy->workdir);
                r = meta ? nsbox_store_bind_repo(&st, key, tmpfd, "layer", meta, &held, err) : -ENOMEM;
                json_decref(meta);
        }
        nsbox_layers_release(&held);
        nsbox_store_tmp_done(&st, tmpname, tmpfd);
        nsbox_store_close(&st);
        if (r < 0)
                return r;
        *ret = json_pack("{ss ss}", "key", key, "commit", sha);
        return 0;
}

int job_spawn(daemon_state *d, sandbox *s, int kind, client *c, json_t *rpc_id, nsbox_error *err)
{
        int pfd[2];
        /* non-blocking: progress lines come before the result, and reading them must not wait
         * for the rest (the loop would stall for the whole clone or copy) */
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return nsbox_err(err, errno, "pipe");
        if (fcntl(pfd[0], F_SETFL, O_NONBLOCK) < 0) {
                int e = errno;
                close(pfd[0]);
                close(pfd[1]);
                return nsbox_err(err, e, "pipe");
        }
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(pfd[0]);
                close(pfd[1]);
                return nsbox_err(err, e, "fork a worker");
        }
        if (pid == 0) {
                /* the daemon's death ends the work: what it leaves under tmp/ is collected later */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                        _exit(1);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                int keep[2] = { pfd[1] < s->sup.sb.stagefd ? pfd[1] : s->sup.sb.stagefd, pfd[1] < s->sup.sb.stagefd ? s->sup.sb.stagefd : pfd[1] };
                nsbox_close_all_but(keep, 2);
                s->job = kind;
                json_t *res = NULL;
                nsbox_error e = { 0 };
                int r = kind == JOB_SNAPSHOT ? job_snapshot(s, pfd[1], &res, &e) : job_repo(s, pfd[1], &res, &e);
                json_t *line = r < 0 ? json_pack("{sb ss ss}", "ok", 0, "code", nsbox_code_for_errno(r), "message", e.msg ? e.msg : strerror(-r))
                                     : json_pack("{sb so}", "ok", 1, "result", res ? res : json_object());
                char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
                _exit(text && write_full(pfd[1], text, strlen(text)) == 0 ? 0 : 1);
        }
        close(pfd[1]);
        s->job = kind;
        s->job_pid = pid;
        s->job_fd = pfd[0];
        s->job_client = c ? c->serial : 0;
        s->job_rpc_id = rpc_id ? json_incref(rpc_id) : NULL;
        s->job_start_ns = now_ns();
        s->progress_ns = 0;
        sb_init(&s->job_out, JOB_OUT_MAX);
        if (nsbox_epoll_add(d->epfd, s->job_fd, KEY(s->serial, K_JOB), &s->job_events, EPOLLIN) < 0)
                return nsbox_err(err, errno, "watch a worker");
        return 0;
}

/* The repository layer exists now (or did already): hold it and start. */
int repo_ready(daemon_state *d, sandbox *s, const char *key)
{
        nsbox_error err = { 0 };
        nsbox_store st = NSBOX_STORE_INIT;
        int r = nsbox_store_open(true, &st, &err);
        if (r == 0 && (r = nsbox_store_acquire_repo(&st, key, &s->base_layers, &err)) == 0)
                r = nsbox_err_as(&err, ENOENT, "the repository layer was collected before the sandbox started; try again");
        nsbox_store_close(&st);
        if (r >= 0)
                r = nsbox_layers_dup(&s->base_layers, &s->layers) < 0 ? nsbox_err(&err, ENOMEM, "layers") : 0;
        if (r >= 0)
                r = sandbox_launch(d, s, &err);
        if (r < 0) {
                create_failed(d, s, nsbox_code_for_errno(r), err.msg ? err.msg : "cannot start the sandbox");
                nsbox_error_clear(&err);
                return -1;
        }
        return 0;
}

static void job_done(daemon_state *d, sandbox *s)
{
        int kind = s->job;
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, s->job_fd, NULL);
        close(s->job_fd);
        s->job_fd = -1;
        int status = 0;
        struct rusage ru = { 0 };
        while (wait4(s->job_pid, &status, 0, &ru) < 0 && errno == EINTR)
                ;
        dlog(LOG_INFO, "job.done", s->sup.id, "sandbox %s: %s worker done in %.1f ms, peak memory %ld KiB", s->sup.id,
             kind == JOB_SNAPSHOT ? "snapshot" : "repository", (double)(now_ns() - s->job_start_ns) / 1e6, ru.ru_maxrss);
        s->job = JOB_NONE;
        s->job_progress = false;
        json_error_t je;
        json_t *line = s->job_out.buf ? json_loadb(s->job_out.buf, s->job_out.len, 0, &je) : NULL;
        sb_release(&s->job_out);
        json_t *rpc_id = steal_pointer(&s->job_rpc_id);
        client *c = client_by_serial(d, s->job_client);
        bool ok = json_is_true(json_object_get(line, "ok"));
        const char *code = json_string_value(json_object_get(line, "code"));
        const char *msg = json_string_value(json_object_get(line, "message"));
        json_t *result = json_object_get(line, "result");
        if (!line && !msg)
                msg = WIFSIGNALED(status) ? "the worker was killed" : "the worker failed";
        if (kind == JOB_SNAPSHOT) {
                nsbox_error err = { 0 };
                if (s->job_thaw && nsbox_sandbox_freeze(&s->sup.sb, false, PAUSE_TIMEOUT_MS, &err) < 0) {
                        dlog(LOG_ERR, "snapshot.thaw_failed", s->sup.id, "sandbox %s: cannot thaw it after the snapshot: %s", s->sup.id, err.msg);
                        nsbox_error_clear(&err);
                }
                record_op(s, "snapshot", s->job_name, s->job_start_ns, ok ? NULL : code ? code : "internal");
                if (ok) {
                        json_object_set_new(result, "duration_ms", json_real((double)(now_ns() - s->job_start_ns) / 1e6));
                        dlog(LOG_INFO, "snapshot.taken", s->sup.id, "sandbox %s: snapshot '%s' taken in %.1f ms", s->sup.id, s->job_name, (double)(now_ns() - s->job_start_ns) / 1e6);
                        reply_result(c, rpc_id, json_incref(result));
                } else {
                        reply_error(c, rpc_id, RPC_SERVER_ERROR, code ? code : "internal", "%s", msg ? msg : "failed");
                }
        } else if (ok) {
                const char *commit = json_string_value(json_object_get(result, "commit"));
                if (commit) {
                        free(s->repo_commit);
                        s->repo_commit = strdup(commit);
                }
                repo_ready(d, s, json_string_value(json_object_get(result, "key")) ?: "");
        } else {
                create_failed(d, s, code ? code : "internal", msg ? msg : "failed");
        }
        json_decref(rpc_id);
        json_decref(line);
}

/* A number of the worker's progress line: digits only, at most 19 of them (no overflow). */
static bool parse_count(const char *tok, uint64_t *ret)
{
        size_t n = strspn(tok, "0123456789");
        if (n == 0 || n > 19 || tok[n])
                return false;
        *ret = strtoull(tok, NULL, 10);
        return true;
}

/* One progress line of the worker, without its newline: to the create's client as an event, if
 * it asked and one went out more than NSBOX_REPO_PROGRESS_MS ago (a phase's end goes always).
 * The worker is nsboxd's own, but its line is read as data: a malformed one is dropped. */
static void job_progress(daemon_state *d, sandbox *s, char *line)
{
        char *save = NULL, *tok[5] = { 0 };
        for (size_t i = 0; i < 5; i++)
                tok[i] = strtok_r(i ? NULL : line, " ", &save);
        uint64_t done, total, bytes;
        if (!tok[4] || strtok_r(NULL, " ", &save) || strcmp(tok[0], "progress") || !parse_count(tok[2], &done) ||
            !parse_count(tok[3], &total) || !parse_count(tok[4], &bytes))
                return;
        /* a clone's phases go to the create's client, a snapshot's copy to the snapshot's */
        bool repo = s->job == JOB_REPO;
        if (repo ? strcmp(tok[1], "fetch") && strcmp(tok[1], "checkout") : strcmp(tok[1], "copy"))
                return;
        json_t *call = repo ? s->create_rpc_id : s->job_rpc_id;
        client *c = s->job_progress && call ? client_by_serial(d, repo ? s->create_client : s->job_client) : NULL;
        uint64_t now = now_ns();
        if (!c || (now - s->progress_ns < (uint64_t)NSBOX_REPO_PROGRESS_MS * 1000000 && (!total || done != total)))
                return;
        s->progress_ns = now;
        json_t *params = json_pack("{sO ss ss sI sI sI}", "call", call, "event", "progress", "phase", tok[1], "done",
                                   (json_int_t)(done > INT64_MAX ? INT64_MAX : done), "total", (json_int_t)(total > INT64_MAX ? INT64_MAX : total),
                                   "bytes", (json_int_t)(bytes > INT64_MAX ? INT64_MAX : bytes));
        if (params)
                send_line(c, json_pack("{ss ss so}", "jsonrpc", "2.0", "method", "event", "params", params));
}

/* The worker's progress lines at the front of its output, taken out as they complete; what is
 * left is the result's JSON (or the start of a line still coming). */
static void job_lines(daemon_state *d, sandbox *s)
{
        static const char prefix[] = "progress ";
        strbuf *o = &s->job_out;
        while (o->len && o->buf[0] == 'p') {
                char *nl = memchr(o->buf, '\n', o->len < PROGRESS_LINE_MAX ? o->len : PROGRESS_LINE_MAX);
                if (!nl) {
                        if (o->len >= PROGRESS_LINE_MAX || strncmp(o->buf, prefix, o->len < sizeof(prefix) - 1 ? o->len : sizeof(prefix) - 1))
                                o->len = 0; /* nonsense: reported as a failure */
                        return;
                }
                *nl = '\0';
                job_progress(d, s, o->buf);
                size_t used = (size_t)(nl + 1 - o->buf);
                memmove(o->buf, nl + 1, o->len - used);
                o->len -= used;
                o->buf[o->len] = '\0';
        }
}

void job_readable(daemon_state *d, sandbox *s)
{
        char buf[4096];
        for (;;) {
                ssize_t n = read(s->job_fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n > 0) {
                        if (sb_append(&s->job_out, buf, (size_t)n) < 0)
                                s->job_out.len = 0; /* nonsense: reported as a failure */
                        else
                                job_lines(d, s);
                        continue;
                }
                job_done(d, s);
                return;
        }
}
