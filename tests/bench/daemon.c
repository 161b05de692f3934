/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* make bench, through nsboxd's socket (JSON-RPC lines, what nsbox create/exec/call and the Python
 * client see), against an nsboxd this harness starts on a private socket:
 *   warm         pool acquire to first exec result, exec [true] round trip, read_file 4 KiB,
 *                write_file then read_file 64 MiB (16 MiB calls): median and p99
 *   concurrency  exec [true] round trip with 1, 2, 4, 8, 16 clients at once, each on its own
 *                connection and sandbox: median, p99 and calls/s
 *   density      sandboxes started until N (or the first failure), each with a shell waiting in
 *                `read x`: memory per sandbox (PSS of its processes plus nsboxd's growth,
 *                cgroup memory.current where the sandbox has one, MemAvailable's drop), the time
 *                to start and to destroy them all, and what is left after (must be nothing)
 *   churn        create + exec [true] + destroy cycles/s for S seconds from 2 clients; nsboxd's
 *                RSS and open fds before and after
 * Prints a table and writes every figure as JSON.
 *
 *   bench-daemon NSBOXD [--user NAME] [--runs N] [--big-runs N] [--density N]
 *                [--churn-seconds S] [--only warm,concurrency,density,churn] [--json FILE]
 *
 * Run by root with --user, nsboxd and every connection belong to that user (the connections are
 * made with it as the effective uid: SO_PEERCRED records that) while /proc is read as root, so
 * the agents' PSS can be read (an agent is not dumpable: its smaps_rollup is root's). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/base64.h"
#include "../../runtime/proto.h"
#include "../../runtime/util.h"
#include "floor.h"

#define BIG (64u << 20)
#define CHUNK (16u << 20)
#define POOL 4
#define MAX_CLIENTS 16

extern char **environ;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("bench-daemon: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

/* ---- who we are: root reading /proc, the bench's user talking to nsboxd --------------------- */

static uid_t user_uid;
static gid_t user_gid;
static bool dropped; /* root with --user: euid is the user's except in as_root() sections */

static void as_user(void)
{
        if (dropped && (setegid(user_gid) < 0 || seteuid(user_uid) < 0))
                die("seteuid %u: %s", (unsigned)user_uid, strerror(errno));
}

static void as_root(void)
{
        if (dropped && (seteuid(0) < 0 || setegid(0) < 0))
                die("seteuid 0: %s", strerror(errno));
}

/* ---- statistics -------------------------------------------------------------------------- */

typedef struct {
        uint64_t *v;
        size_t n, cap;
} samples;

static void add(samples *s, uint64_t ns)
{
        if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 256;
                if (!(s->v = realloc(s->v, s->cap * sizeof(*s->v))))
                        die("out of memory");
        }
        s->v[s->n++] = ns;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return (x > y) - (x < y);
}

/* nearest rank, as tests/bench/coldstart.c */
static double pct_us(samples *s, double p)
{
        if (!s->n)
                return 0;
        qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
        size_t i = (size_t)(p * (double)(s->n - 1) + 0.5);
        return (double)s->v[i < s->n ? i : s->n - 1] / 1000.0;
}

static json_t *figures;

static json_t *dist(samples *s)
{
        return json_pack("{si sf sf sf}", "n", (int)s->n, "median_us", pct_us(s, 0.5), "p90_us", pct_us(s, 0.9), "p99_us", pct_us(s, 0.99));
}

static void row(const char *what, samples *s, const char *extra)
{
        printf("   %-46s %10.1f %10.1f %10.1f %6zu  %s\n", what, pct_us(s, 0.5), pct_us(s, 0.9), pct_us(s, 0.99), s->n, extra ? extra : "");
}

/* ---- nsboxd connections ------------------------------------------------------------------- */

static char sock_path[108];

typedef struct {
        int fd;
        strbuf in;
        json_int_t id;
} conn;

static int connect_sock(void)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* Root with --user: nsboxd checks a client's namespaces (runtime/peer.c), which it cannot read
 * of a process whose real uid is root; the connection is made by a child that is the user
 * through and through, kept until nsboxd has answered a ping on it (the check is done), then
 * handed to us. */
static int connect_as_user(void)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* the ids change in the child only: the parent's threads connect at once (concurrency),
         * and an euid switched in one thread is switched in all */
        pid_t pid = fork();
        if (pid == 0) {
                close(sv[0]);
                if (seteuid(0) < 0 || setgroups(1, &user_gid) < 0 || setresgid(user_gid, user_gid, user_gid) < 0 || setresuid(user_uid, user_uid, user_uid) < 0)
                        _exit(126);
                prctl(PR_SET_DUMPABLE, 1); /* a change of ids clears it: nsboxd could not read our /proc */
                int fd = connect_sock();
                if (fd < 0)
                        _exit(1);
                static const char ping[] = "{\"jsonrpc\": \"2.0\", \"id\": 0, \"method\": \"ping\"}\n";
                char ch = 0;
                if (write(fd, ping, sizeof(ping) - 1) != (ssize_t)sizeof(ping) - 1)
                        _exit(1);
                while (ch != '\n')
                        if (read(fd, &ch, 1) != 1)
                                _exit(1);
                char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
                struct iovec iov = { .iov_base = &ch, .iov_len = 1 };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
                _exit(sendmsg(sv[1], &mh, 0) == 1 ? 0 : 1);
        }
        close(sv[1]);
        int fd = -ECONNREFUSED;
        if (pid > 0) {
                char ch, cbuf[CMSG_SPACE(sizeof(int))];
                struct iovec iov = { .iov_base = &ch, .iov_len = 1 };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
                struct cmsghdr *cm = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC) == 1 ? CMSG_FIRSTHDR(&mh) : NULL;
                if (cm && cm->cmsg_type == SCM_RIGHTS)
                        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
                waitpid(pid, NULL, 0);
        }
        close(sv[0]);
        return pid < 0 ? -errno : fd;
}

static int conn_try_open(conn *c)
{
        c->fd = dropped ? connect_as_user() : connect_sock();
        if (c->fd < 0)
                return c->fd;
        sb_init(&c->in, 0);
        c->id = 0;
        return 0;
}

static void conn_open(conn *c)
{
        int r = conn_try_open(c);
        if (r < 0)
                die("connect to '%s': %s", sock_path, strerror(-r));
}

static void conn_close(conn *c)
{
        close(c->fd);
        sb_release(&c->in);
}

/* One request, its reply: the result (the caller's reference), or NULL with *ret_error set to
 * "CODE: message" (malloc'd) when nsboxd answered with an error. */
static json_t *try_rpc(conn *c, const char *method, json_t *params, char **ret_error)
{
        json_t *req = json_pack("{ss sI ss so}", "jsonrpc", "2.0", "id", ++c->id, "method", method, "params", params);
        size_t len = 0;
        char *text = nsbox_json_dumps(req, &len);
        json_decref(req);
        if (!text || write_full(c->fd, text, len) < 0 || write_full(c->fd, "\n", 1) < 0)
                die("send %s to nsboxd: %s", method, strerror(errno));
        free(text);
        for (;;) {
                char *nl = c->in.buf ? memchr(c->in.buf, '\n', c->in.len) : NULL;
                while (!nl) { /* only the new bytes are searched: replies are megabytes long */
                        char buf[1 << 16];
                        ssize_t n = read(c->fd, buf, sizeof(buf));
                        if (n <= 0 || sb_append(&c->in, buf, (size_t)n) < 0)
                                die("receive %s from nsboxd: %s", method, n < 0 ? strerror(errno) : "connection closed");
                        nl = memchr(c->in.buf + c->in.len - (size_t)n, '\n', (size_t)n);
                }
                size_t linelen = (size_t)(nl - c->in.buf);
                json_t *msg = nsbox_json_loadb(c->in.buf, linelen, NULL);
                memmove(c->in.buf, nl + 1, c->in.len - linelen - 1);
                c->in.len -= linelen + 1;
                if (!msg)
                        die("malformed reply from nsboxd");
                json_t *id = json_object_get(msg, "id");
                if (!json_is_integer(id) || json_integer_value(id) != c->id) { /* a notification */
                        json_decref(msg);
                        continue;
                }
                json_t *e = json_object_get(msg, "error");
                if (e) {
                        json_t *data = json_object_get(e, "data");
                        const char *code = json_string_value(json_object_get(data, "code"));
                        if (asprintf(ret_error, "%s: %s: %s", method, code ? code : "error",
                                     json_string_value(json_object_get(e, "message")) ?: "?") < 0)
                                die("out of memory");
                        json_decref(msg);
                        return NULL;
                }
                json_t *r = json_incref(json_object_get(msg, "result"));
                json_decref(msg);
                return r;
        }
}

static json_t *rpc(conn *c, const char *method, json_t *params)
{
        char *e = NULL;
        json_t *r = try_rpc(c, method, params, &e);
        if (!r)
                die("%s", e);
        return r;
}

static json_t *call(conn *c, const char *sandbox, const char *tool, json_t *params, char **ret_error)
{
        return try_rpc(c, "call", json_pack("{ss ss so}", "sandbox", sandbox, "tool", tool, "params", params), ret_error);
}

/* create, returning the id (malloc'd) or NULL with *ret_error */
static char *create(conn *c, json_t *params, char **ret_error)
{
        json_t *r = try_rpc(c, "create", params, ret_error);
        if (!r)
                return NULL;
        char *id = strdup(json_string_value(json_object_get(r, "id")) ?: "");
        json_decref(r);
        return id;
}

static void destroy(conn *c, const char *id)
{
        json_decref(rpc(c, "destroy", json_pack("{ss}", "sandbox", id)));
}

/* exec [true] and check it ran: the round trip every latency figure is made of */
static bool exec_true(conn *c, const char *id, char **ret_error)
{
        json_t *r = call(c, id, "exec", json_pack("{s[s]}", "cmd", "true"), ret_error);
        if (!r)
                return false;
        bool ok = json_integer_value(json_object_get(r, "exit_code")) == 0 && json_is_integer(json_object_get(r, "exit_code"));
        json_decref(r);
        if (!ok && asprintf(ret_error, "exec [true] did not exit 0") < 0)
                die("out of memory");
        return ok;
}

/* ---- nsboxd, started and stopped here ----------------------------------------------------- */

static char run_dir[64];
static pid_t daemon_pid;

static void start_daemon(const char *nsboxd, const char *name, const char *config)
{
        char cfg[128];
        snprintf(sock_path, sizeof(sock_path), "%s/%s.sock", run_dir, name);
        snprintf(cfg, sizeof(cfg), "%s/%s.json", run_dir, name);
        FILE *f = fopen(cfg, "we");
        if (!f || fputs(config, f) < 0 || fclose(f) != 0)
                die("write '%s': %s", cfg, strerror(errno));
        char log[128];
        snprintf(log, sizeof(log), "%s/nsboxd.log", run_dir);
        daemon_pid = fork();
        if (daemon_pid < 0)
                die("fork: %s", strerror(errno));
        if (daemon_pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (fd >= 0)
                        dup2(fd, 2);
                if (dropped && (seteuid(0) < 0 || setgroups(1, &user_gid) < 0 || setresgid(user_gid, user_gid, user_gid) < 0 ||
                                setresuid(user_uid, user_uid, user_uid) < 0))
                        _exit(126);
                setenv("XDG_RUNTIME_DIR", run_dir, 1);
                execl(nsboxd, "nsboxd", "--config", cfg, "--socket", sock_path, (char *)NULL);
                _exit(127);
        }
        /* the socket exists a moment before nsboxd listens on it: connect until it answers */
        conn c;
        for (int i = 0; conn_try_open(&c) < 0; i++) {
                if (i > 1000 || waitpid(daemon_pid, NULL, WNOHANG) == daemon_pid)
                        die("nsboxd did not start (see %s)", log);
                usleep(10000);
        }
        json_t *p = rpc(&c, "ping", json_object());
        if (json_integer_value(json_object_get(p, "pid")) != daemon_pid)
                die("'%s' is answered by another nsboxd", sock_path);
        json_decref(p);
        conn_close(&c);
}

static void stop_daemon(void)
{
        if (daemon_pid <= 0)
                return;
        as_root();
        kill(daemon_pid, SIGTERM);
        for (int i = 0; i < 300 && waitpid(daemon_pid, NULL, WNOHANG) == 0; i++)
                usleep(50000);
        if (kill(daemon_pid, 0) == 0) {
                fprintf(stderr, "bench-daemon: nsboxd %d did not stop on SIGTERM: killed\n", (int)daemon_pid);
                kill(daemon_pid, SIGKILL);
                waitpid(daemon_pid, NULL, 0);
        }
        daemon_pid = 0;
        as_user();
}

/* ---- what the host holds: /proc, mounts, cgroups, nsboxd's state directory ---------------- */

static long status_kib(pid_t pid, const char *key)
{
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        FILE *f = fopen(path, "re");
        long v = -1;
        size_t kl = strlen(key);
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, key, kl) && line[kl] == ':')
                        v = atol(line + kl + 1);
        if (f)
                fclose(f);
        return v;
}

/* PSS in KiB, -1 when unreadable (as root everything is readable) */
static long pss_kib(pid_t pid)
{
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
        as_root();
        FILE *f = fopen(path, "re");
        as_user();
        long v = -1;
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "Pss:", 4))
                        v = atol(line + 4);
        if (f)
                fclose(f);
        return v;
}

static int count_dir(const char *path, const char *prefix)
{
        DIR *d = opendir(path);
        if (!d)
                return -1;
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
                if (e->d_name[0] != '.' && (!prefix || !strncmp(e->d_name, prefix, strlen(prefix))))
                        n++;
        closedir(d);
        return n;
}

static int nfds(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        as_root();
        int n = count_dir(path, NULL);
        as_user();
        return n;
}

/* the children of pid (all threads), into kids (up to max); their number */
static int children_of(pid_t pid, pid_t *kids, int max)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *d = opendir(path);
        int n = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                char p2[320];
                snprintf(p2, sizeof(p2), "/proc/%d/task/%s/children", (int)pid, e->d_name);
                FILE *f = fopen(p2, "re");
                int k;
                while (f && fscanf(f, "%d", &k) == 1) {
                        if (kids && n < max)
                                kids[n] = k;
                        n++;
                }
                if (f)
                        fclose(f);
        }
        if (d)
                closedir(d);
        return n;
}

/* PSS (KiB) of pid and every process under it; *ret_procs and *ret_unreadable counted */
static long tree_pss(pid_t pid, int depth, int *ret_procs, int *ret_unreadable)
{
        long p = pss_kib(pid);
        (*ret_procs)++;
        if (p < 0) {
                (*ret_unreadable)++;
                p = 0;
        }
        pid_t kids[64];
        int n = children_of(pid, kids, 64);
        for (int i = 0; i < n && i < 64 && depth < 16; i++)
                p += tree_pss(kids[i], depth + 1, ret_procs, ret_unreadable);
        return p;
}

static long mem_available_kib(void)
{
        char line[256];
        FILE *f = fopen("/proc/meminfo", "re");
        long v = -1;
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "MemAvailable:", 13))
                        v = atol(line + 13);
        if (f)
                fclose(f);
        return v;
}

/* MemAvailable once it stops moving (under 1 MiB in 0.5 s, at most 20 s): the kernel frees a
 * destroyed sandbox's namespaces late */
static long mem_available_settled(void)
{
        long prev = mem_available_kib();
        for (int i = 0; i < 40; i++) {
                usleep(500000);
                long now = mem_available_kib();
                if (labs(now - prev) < 1024)
                        return now;
                prev = now;
        }
        return prev;
}

static strbuf mountinfo_text(void)
{
        strbuf sb;
        sb_init(&sb, 0);
        int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        char buf[65536];
        ssize_t n;
        while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
                sb_append(&sb, buf, (size_t)n);
        if (fd >= 0)
                close(fd);
        sb_append(&sb, "", 1);
        return sb;
}

static int count_lines(const char *s)
{
        int n = 0;
        for (; *s; s++)
                n += *s == '\n';
        return n;
}

static int tree_entries;
static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        (void)path, (void)st, (void)flag, (void)f;
        tree_entries++;
        return 0;
}

/* files and directories under nsboxd's runtime directory (its XDG_RUNTIME_DIR here), the
 * directory itself included */
static int run_dir_entries(void)
{
        tree_entries = 0;
        as_root();
        int r = nftw(run_dir, count_entry, 16, FTW_PHYS);
        as_user();
        return r < 0 ? -1 : tree_entries;
}

static char cg_parent[4096]; /* where nsboxd puts its sandboxes' cgroups, when it has any */

typedef struct {
        int children, fds, mounts, cgroups, state_files, run_dir_entries;
        long rss_kib;
} census;

static census take_census(void)
{
        census c;
        c.children = children_of(daemon_pid, NULL, 0);
        c.fds = nfds(daemon_pid);
        strbuf m = mountinfo_text();
        c.mounts = count_lines(m.buf);
        sb_release(&m);
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "sb-%d-", (int)daemon_pid);
        c.cgroups = cg_parent[0] ? count_dir(cg_parent, prefix) : 0;
        char state[160];
        snprintf(state, sizeof(state), "%s.state", sock_path);
        as_root();
        c.state_files = count_dir(state, NULL);
        as_user();
        c.rss_kib = status_kib(daemon_pid, "VmRSS");
        c.run_dir_entries = run_dir_entries();
        return c;
}

static json_t *census_json(const census *c)
{
        return json_pack("{si si si si si sI si}", "nsboxd_children", c->children, "nsboxd_fds", c->fds, "host_mounts", c->mounts, "cgroups",
                         c->cgroups, "state_files", c->state_files, "nsboxd_rss_kib", (json_int_t)c->rss_kib, "run_dir_entries",
                         c->run_dir_entries);
}

/* wait (up to limit s) until nsboxd holds no more than base: it reaps and removes after replying */
static census settle(const census *base, int limit)
{
        census now = take_census();
        for (int i = 0; i < limit * 10; i++) {
                if (now.children <= base->children && now.fds <= base->fds && now.cgroups <= base->cgroups &&
                    now.state_files <= base->state_files && now.mounts <= base->mounts && now.run_dir_entries <= base->run_dir_entries)
                        break;
                usleep(100000);
                now = take_census();
        }
        return now;
}

static void note_cgroup(conn *c, const char *id)
{
        if (cg_parent[0])
                return;
        json_t *l = rpc(c, "list", json_object());
        json_t *sb;
        size_t i;
        json_array_foreach(json_object_get(l, "sandboxes"), i, sb) {
                const char *cg = json_string_value(json_object_get(sb, "cgroup"));
                if (cg && *cg && !strcmp(json_string_value(json_object_get(sb, "id")) ?: "", id)) {
                        snprintf(cg_parent, sizeof(cg_parent), "%s", cg);
                        char *slash = strrchr(cg_parent, '/');
                        if (slash)
                                *slash = '\0';
                }
        }
        json_decref(l);
}

/* ---- warm --------------------------------------------------------------------------------- */

static int template_ready(conn *c)
{
        json_t *s = rpc(c, "stats", json_object());
        int n = (int)json_integer_value(json_object_get(json_object_get(json_object_get(s, "templates"), "default"), "ready"));
        json_decref(s);
        return n;
}

static void wait_pool_full(conn *c)
{
        for (int i = 0; template_ready(c) < POOL; i++) {
                if (i > 60000)
                        die("the warm pool did not refill to %d in 60 s", POOL);
                usleep(1000);
        }
}

/* posix_spawn + waitpid of /bin/true from this process, in ns: the floor of an exec round trip */
static uint64_t native_true(void)
{
        char *argv[] = { "true", NULL };
        pid_t pid;
        uint64_t t0 = now_ns();
        int r = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);
        if (r != 0)
                die("posix_spawn /bin/true: %s", strerror(r));
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                die("/bin/true did not exit 0");
        return now_ns() - t0;
}

/* exec [true] interleaved with a native spawn and its floors; read_file 4 KiB with its floors */
static void warm_small_calls(conn *c, const char *id, int runs, const char *big, char *enc, json_t *w)
{
        samples ex = { 0 }, nat = { 0 }, rd = { 0 }, xd = { 0 }, xr = { 0 }, rdd = { 0 }, rdr = { 0 };
        char *e = NULL, extra[64];
        /* the sizes of the lines an exec [true] and a read_file 4 KiB call exchange with nsboxd */
        const size_t call_req = 128, exec_reply = 256, read_reply = b64_encoded_len(4096) + 128;
        floor_rig fx, fr;
        floor_open(&fx, call_req, exec_reply);
        floor_open(&fr, call_req, read_reply);
        for (int i = 0; i < runs; i++) { /* interleaved with the native spawn and the floors it is compared to */
                uint64_t t0 = now_ns();
                if (!exec_true(c, id, &e))
                        die("%s", e);
                add(&ex, now_ns() - t0);
                add(&nat, native_true());
                add(&xd, floor_call(fx.direct, call_req, exec_reply));
                add(&xr, floor_call(fx.relayed, call_req, exec_reply));
        }
        row("exec [true] round trip", &ex, NULL);
        double ratio = pct_us(&ex, 0.5) / pct_us(&nat, 0.5);
        snprintf(extra, sizeof(extra), "exec round trip / this: %.2fx", ratio);
        row("  native posix_spawn + waitpid of /bin/true", &nat, extra);
        json_object_set_new(w, "exec_true", dist(&ex));
        json_object_set_new(w, "native_spawn_true", dist(&nat));
        json_object_set_new(w, "exec_true_vs_native", json_real(ratio));
        double floor_ratio = (pct_us(&nat, 0.5) + pct_us(&xr, 0.5)) / pct_us(&nat, 0.5);
        snprintf(extra, sizeof(extra), "(native + this) / native: %.2fx", floor_ratio);
        row("  floor: exec's bytes, socket, no work", &xd, NULL);
        row("  floor: exec's bytes, do-nothing relay", &xr, extra);
        json_object_set_new(w, "floor_exec_direct", dist(&xd));
        json_object_set_new(w, "floor_exec_relay", dist(&xr));
        json_object_set_new(w, "floor_exec_vs_native", json_real(floor_ratio));
        b64_encode(big, 4096, enc);
        json_decref(rpc(c, "call", json_pack("{ss ss s{ss ss}}", "sandbox", id, "tool", "write_file", "params", "path", "small",
                                               "content_b64", enc)));
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_ns();
                json_t *r = call(c, id, "read_file", json_pack("{ss ss}", "path", "small", "encoding", "base64"), &e);
                if (!r)
                        die("%s", e);
                add(&rd, now_ns() - t0);
                if (json_string_length(json_object_get(r, "content")) != b64_encoded_len(4096))
                        die("read_file 4 KiB: a reply of another size");
                json_decref(r);
                add(&rdd, floor_call(fr.direct, call_req, read_reply));
                add(&rdr, floor_call(fr.relayed, call_req, read_reply));
        }
        floor_close(&fx);
        floor_close(&fr);
        row("read_file 4 KiB", &rd, NULL);
        row("  floor: its bytes, socket, no work", &rdd, NULL);
        row("  floor: its bytes, do-nothing relay", &rdr, "(what nsboxd's hop costs at best)");
        json_object_set_new(w, "read_file_4k", dist(&rd));
        json_object_set_new(w, "floor_read_direct", dist(&rdd));
        json_object_set_new(w, "floor_read_relay", dist(&rdr));
        samples *all[] = { &ex, &nat, &rd, &xd, &xr, &rdd, &rdr };
        for (size_t k = 0; k < sizeof(all) / sizeof(*all); k++)
                free(all[k]->v);
}

/* 64 MiB written then read back in 16 MiB calls (base64 in JSON), verified */
static void warm_big(conn *c, const char *id, int big_runs, const char *big, char *enc, json_t *w)
{
        samples wb = { 0 }, rb = { 0 };
        char *e = NULL, extra[64];
        strbuf back;
        sb_init(&back, 0);
        for (int k = 0; k < big_runs; k++) {
                uint64_t t0 = now_ns();
                for (size_t off = 0; off < BIG; off += CHUNK) {
                        b64_encode(big + off, CHUNK, enc);
                        json_t *r = call(c, id, "write_file", json_pack("{ss ss sb}", "path", "big", "content_b64", enc, "append", off > 0), &e);
                        if (!r)
                                die("%s", e);
                        json_decref(r);
                }
                add(&wb, now_ns() - t0);
                t0 = now_ns();
                for (size_t off = 0; off < BIG; off += CHUNK) {
                        json_t *r = call(c, id, "read_file",
                                         json_pack("{ss ss sI sI}", "path", "big", "encoding", "base64", "byte_offset", (json_int_t)off,
                                                   "byte_limit", (json_int_t)CHUNK),
                                         &e);
                        if (!r)
                                die("%s", e);
                        json_t *ct = json_object_get(r, "content");
                        back.len = 0;
                        if (b64_decode(json_string_value(ct), json_string_length(ct), &back) < 0 || back.len != CHUNK ||
                            memcmp(back.buf, big + off, CHUNK))
                                die("read back different bytes through nsboxd");
                        json_decref(r);
                }
                add(&rb, now_ns() - t0);
        }
        sb_release(&back);
        double wmed = pct_us(&wb, 0.5), rmed = pct_us(&rb, 0.5);
        snprintf(extra, sizeof(extra), "%.0f MB/s at the median", (double)BIG / wmed);
        row("write_file 64 MiB (16 MiB calls)", &wb, extra);
        snprintf(extra, sizeof(extra), "%.0f MB/s at the median", (double)BIG / rmed);
        row("read_file 64 MiB (16 MiB calls)", &rb, extra);
        json_t *wj = dist(&wb), *rj = dist(&rb);
        json_object_set_new(wj, "mb_per_s", json_real((double)BIG / wmed));
        json_object_set_new(rj, "mb_per_s", json_real((double)BIG / rmed));
        json_object_set_new(w, "write_file_64m", wj);
        json_object_set_new(w, "read_file_64m", rj);
        free(wb.v);
        free(rb.v);
}

static void bench_warm(const char *nsboxd, int runs, int big_runs, char *big)
{
        char cfg[256];
        snprintf(cfg, sizeof(cfg), "{\"max_sandboxes\": 4096, \"max_per_uid\": 4096, \"drain_timeout\": 2, "
                                   "\"templates\": {\"default\": {\"create\": {}, \"pool\": %d}}}\n", POOL);
        start_daemon(nsboxd, "warm", cfg);
        conn c;
        conn_open(&c);
        json_t *w = json_object();
        samples acq = { 0 }, acq_create = { 0 }, cold = { 0 };
        int pooled = 0;
        char *e = NULL;
        printf("\n== warm, through nsboxd's socket: %d runs (64 MiB: %d), medians and percentiles in us\n", runs, big_runs);
        printf("   %-46s %10s %10s %10s %6s\n", "", "median", "p90", "p99", "n");
        /* the pool full before each acquire: what a caller gets when the pool keeps up; the
         * replacement it starts runs after the reply, and is not measured here */
        for (int i = 0; i < runs; i++) {
                wait_pool_full(&c);
                uint64_t t0 = now_ns();
                json_t *r = try_rpc(&c, "create", json_pack("{ss}", "template", "default"), &e);
                if (!r)
                        die("%s", e);
                uint64_t t1 = now_ns();
                char *id = strdup(json_string_value(json_object_get(r, "id")));
                pooled += json_is_true(json_object_get(r, "pooled"));
                json_decref(r);
                if (!exec_true(&c, id, &e))
                        die("%s", e);
                add(&acq, now_ns() - t0);
                add(&acq_create, t1 - t0);
                destroy(&c, id);
                free(id);
        }
        char extra[64];
        snprintf(extra, sizeof(extra), "%d/%d from the pool", pooled, runs);
        row("pool acquire to first exec result", &acq, extra);
        row("  of which create (acquire) alone", &acq_create, NULL);
        json_object_set_new(w, "pool_acquire_to_first_exec", dist(&acq));
        json_object_set_new(w, "pool_acquire_only", dist(&acq_create));
        json_object_set_new(w, "pooled", json_integer(pooled));
        for (int i = 0; i < runs; i++) { /* the same, without the pool: a sandbox started for the create */
                wait_pool_full(&c);
                uint64_t t0 = now_ns();
                char *id = create(&c, json_object(), &e);
                if (!id || !exec_true(&c, id, &e))
                        die("%s", e);
                add(&cold, now_ns() - t0);
                destroy(&c, id);
                free(id);
        }
        row("cold create to first exec result", &cold, "(no pool)");
        json_object_set_new(w, "cold_create_to_first_exec", dist(&cold));
        /* where the acquire-to-result time goes: the same first exec once the pool has refilled
         * (no sandbox starting beside it) */
        samples quiet = { 0 };
        for (int i = 0; i < runs; i++) {
                wait_pool_full(&c);
                char *pid = create(&c, json_pack("{ss}", "template", "default"), &e);
                if (!pid)
                        die("%s", e);
                wait_pool_full(&c);
                uint64_t t0 = now_ns();
                if (!exec_true(&c, pid, &e))
                        die("%s", e);
                add(&quiet, now_ns() - t0);
                destroy(&c, pid);
                free(pid);
        }
        row("first exec in a pooled sandbox, pool refilled", &quiet, "(diagnostic)");
        json_object_set_new(w, "pooled_first_exec_after_refill", dist(&quiet));

        char *id = create(&c, json_object(), &e);
        if (!id)
                die("%s", e);
        char *enc = malloc(b64_encoded_len(CHUNK) + 1);
        if (!enc)
                die("out of memory");
        warm_small_calls(&c, id, runs, big, enc, w);
        warm_big(&c, id, big_runs, big, enc, w);
        destroy(&c, id);
        free(id);
        free(enc);
        samples *all[] = { &acq, &acq_create, &cold, &quiet };
        for (size_t k = 0; k < sizeof(all) / sizeof(*all); k++)
                free(all[k]->v);
        conn_close(&c);
        stop_daemon();
        json_object_set_new(figures, "warm", w);
}

/* ---- concurrency --------------------------------------------------------------------------- */

typedef struct {
        const char *id;
        int runs;
        samples lat;
        pthread_barrier_t *go;
        char *error;
} client;

static void *client_main(void *arg)
{
        client *cl = arg;
        conn c;
        conn_open(&c);
        pthread_barrier_wait(cl->go);
        for (int i = 0; i < cl->runs; i++) {
                uint64_t t0 = now_ns();
                if (!exec_true(&c, cl->id, &cl->error))
                        break;
                add(&cl->lat, now_ns() - t0);
        }
        conn_close(&c);
        return NULL;
}

static void bench_concurrency(const char *nsboxd, int runs)
{
        start_daemon(nsboxd, "concurrency", "{\"max_sandboxes\": 4096, \"max_per_uid\": 4096, \"drain_timeout\": 2}\n");
        conn c;
        conn_open(&c);
        char *ids[MAX_CLIENTS], *e = NULL;
        for (int i = 0; i < MAX_CLIENTS; i++)
                if (!(ids[i] = create(&c, json_object(), &e)))
                        die("%s", e);
        json_t *arr = json_array();
        printf("\n== exec [true] round trip against concurrent clients (each its own connection and sandbox), us\n");
        printf("   %-46s %10s %10s %10s %6s  %s\n", "", "median", "p90", "p99", "n", "calls/s, all clients");
        for (int n = 1; n <= MAX_CLIENTS; n *= 2) {
                client cl[MAX_CLIENTS] = { 0 };
                pthread_t th[MAX_CLIENTS];
                pthread_barrier_t go;
                pthread_barrier_init(&go, NULL, (unsigned)n + 1);
                for (int i = 0; i < n; i++) {
                        cl[i] = (client){ .id = ids[i], .runs = runs, .go = &go };
                        if (pthread_create(&th[i], NULL, client_main, &cl[i]) != 0)
                                die("pthread_create");
                }
                pthread_barrier_wait(&go);
                uint64_t t0 = now_ns();
                samples all = { 0 };
                for (int i = 0; i < n; i++) {
                        pthread_join(th[i], NULL);
                        if (cl[i].error)
                                die("client %d: %s", i, cl[i].error);
                        for (size_t k = 0; k < cl[i].lat.n; k++)
                                add(&all, cl[i].lat.v[k]);
                        free(cl[i].lat.v);
                }
                double secs = (double)(now_ns() - t0) / 1e9, rate = (double)all.n / secs;
                pthread_barrier_destroy(&go);
                char what[64], extra[64];
                snprintf(what, sizeof(what), "%d client%s", n, n > 1 ? "s" : "");
                snprintf(extra, sizeof(extra), "%.0f", rate);
                row(what, &all, extra);
                json_t *o = dist(&all);
                json_object_set_new(o, "clients", json_integer(n));
                json_object_set_new(o, "calls_per_s", json_real(rate));
                json_array_append_new(arr, o);
                free(all.v);
        }
        for (int i = 0; i < MAX_CLIENTS; i++) {
                destroy(&c, ids[i]);
                free(ids[i]);
        }
        conn_close(&c);
        stop_daemon();
        json_object_set_new(figures, "concurrency", arr);
}

/* ---- density ------------------------------------------------------------------------------- */

/* what is left of a destroyed sandbox, printed one per line: its processes, the host mounts that
 * were not there before, its cgroup, its state file */
static json_t *leftovers(const char *mounts_before, json_t *pids, const census *base, const census *now)
{
        json_t *out = json_array();
        size_t i;
        json_t *p;
        json_array_foreach(pids, i, p) {
                pid_t pid = (pid_t)json_integer_value(p);
                char path[64], comm[64] = "";
                snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                if (!fgets(comm, sizeof(comm), f))
                        comm[0] = '\0';
                fclose(f);
                comm[strcspn(comm, "\n")] = '\0';
                json_array_append_new(out, json_sprintf("process %d (%s), a sandbox's agent", (int)pid, comm));
        }
        pid_t kids[64];
        int n = children_of(daemon_pid, kids, 64);
        for (int k = base->children; k < n && k < 64; k++)
                json_array_append_new(out, json_sprintf("process %d, a child of nsboxd", (int)kids[k]));
        strbuf m = mountinfo_text();
        for (char *line = m.buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                /* mount ids are never reused soon: a line not in the old table is a new mount */
                char key[64];
                snprintf(key, sizeof(key), "\n%.*s ", (int)strcspn(line, " "), line);
                if (!strstr(mounts_before, key) && strncmp(mounts_before, key + 1, strlen(key + 1)))
                        json_array_append_new(out, json_sprintf("mount %s", line));
        }
        sb_release(&m);
        if (now->cgroups > base->cgroups)
                json_array_append_new(out, json_sprintf("%d cgroups %s/sb-%d-*", now->cgroups - base->cgroups, cg_parent, (int)daemon_pid));
        if (now->state_files > base->state_files)
                json_array_append_new(out, json_sprintf("%d files in %s.state", now->state_files - base->state_files, sock_path));
        if (now->run_dir_entries > base->run_dir_entries)
                json_array_append_new(out, json_sprintf("%d more files or directories under %s (nsboxd's runtime directory)",
                                                        now->run_dir_entries - base->run_dir_entries, run_dir));
        if (now->fds > base->fds)
                json_array_append_new(out, json_sprintf("%d more fds open in nsboxd", now->fds - base->fds));
        return out;
}

static void bench_density(const char *nsboxd, int target)
{
        char cfg[256];
        snprintf(cfg, sizeof(cfg), "{\"max_sandboxes\": %d, \"max_per_uid\": %d, \"drain_timeout\": 5}\n", target + 16, target + 16);
        start_daemon(nsboxd, "density", cfg);
        conn c;
        conn_open(&c);
        char *e = NULL, *stopped_by = NULL;
        /* one sandbox first: nsboxd opens what it keeps open for its lifetime, and we learn where
         * its cgroups are */
        char *first = create(&c, json_object(), &e);
        if (!first)
                die("%s", e);
        note_cgroup(&c, first);
        destroy(&c, first);
        free(first);
        census base0 = take_census();
        census base = settle(&base0, 10);
        strbuf mounts_before = mountinfo_text();
        sb_append(&mounts_before, "", 0);
        long d_pss0 = pss_kib(daemon_pid), avail0 = mem_available_settled();
        char **ids = calloc((size_t)target, sizeof(*ids));
        int n = 0;
        printf("\n== density: sandboxes started through nsboxd until %d or the first failure, each with `sh -c 'read x'` waiting\n", target);
        uint64_t t0 = now_ns();
        while (n < target) {
                char *id = create(&c, json_object(), &e);
                if (!id) {
                        stopped_by = e;
                        break;
                }
                ids[n++] = id;
                json_t *r = call(&c, id, "exec", json_pack("{ss sb}", "shell", "read x", "background", 1), &e);
                if (!r) {
                        stopped_by = e;
                        break;
                }
                json_decref(r);
                if (n % 100 == 0)
                        fprintf(stderr, "   density: %d live\n", n);
        }
        double start_s = (double)(now_ns() - t0) / 1e9;
        long avail1 = mem_available_settled();
        /* each sandbox still there, its shell still waiting */
        int waiting = 0, procs = 0, unreadable = 0, with_memcg = 0;
        long pss = 0, memcg = 0, first_kib = 0, last_kib = 0;
        samples per_sb = { 0 }; /* PSS of each sandbox's processes: it grows with nsboxd's heap, which
                                 * a sandbox started later inherits more of (copy on write) */
        json_t *pids = json_array();
        json_t *l = rpc(&c, "list", json_object());
        json_t *sb;
        size_t i;
        json_array_foreach(json_object_get(l, "sandboxes"), i, sb) {
                pid_t pid = (pid_t)json_integer_value(json_object_get(sb, "pid"));
                json_array_append_new(pids, json_integer(pid));
                long one = tree_pss(pid, 0, &procs, &unreadable);
                pss += one;
                add(&per_sb, (uint64_t)one * 1000); /* KiB, kept as "us" by the percentile helpers */
                if (i == 0)
                        first_kib = one;
                last_kib = one;
                const char *cg = json_string_value(json_object_get(sb, "cgroup"));
                char path[4200], val[64];
                snprintf(path, sizeof(path), "%s/memory.current", cg ? cg : "");
                int fd = cg ? open(path, O_RDONLY | O_CLOEXEC) : -1;
                ssize_t k = fd >= 0 ? read(fd, val, sizeof(val) - 1) : -1;
                if (fd >= 0)
                        close(fd);
                if (k > 0) {
                        val[k] = '\0';
                        memcg += atol(val) / 1024;
                        with_memcg++;
                }
                json_t *pl = call(&c, json_string_value(json_object_get(sb, "id")), "process_list", json_object(), &e);
                json_t *pr;
                size_t j;
                json_array_foreach(json_object_get(pl, "processes"), j, pr) waiting += json_is_true(json_object_get(pr, "running"));
                json_decref(pl);
        }
        size_t listed = json_array_size(json_object_get(l, "sandboxes"));
        json_decref(l);
        long d_pss1 = pss_kib(daemon_pid);
        census held = take_census();
        t0 = now_ns();
        for (int k = 0; k < n; k++) {
                destroy(&c, ids[k]);
                free(ids[k]);
        }
        double destroy_s = (double)(now_ns() - t0) / 1e9;
        census after = settle(&base, 30);
        json_t *left = leftovers(mounts_before.buf, pids, &base, &after);
        long avail2 = mem_available_settled();
        conn_close(&c);
        stop_daemon();
        int live = (int)listed;
        double per_pss = unreadable || !live ? -1 : (double)(pss + (d_pss1 - d_pss0)) / live / 1024;
        printf("   %d started in %.2f s (%d listed, %d shells waiting)%s%s\n", n, start_s, live, waiting, stopped_by ? "; stopped by: " : "",
               stopped_by ? stopped_by : "");
        if (per_pss >= 0)
                printf("   memory per sandbox: PSS %.2f MiB (%ld KiB in %d processes, nsboxd %+ld KiB)\n", per_pss, pss, procs, d_pss1 - d_pss0);
        else
                printf("   memory per sandbox: PSS unreadable for %d of %d processes (run make bench as root to read it)\n", unreadable, procs);
        if (per_pss >= 0)
                printf("   PSS of one sandbox's processes: min %.0f, median %.0f, max %.0f KiB; the first started %ld KiB, the last %ld KiB\n",
                       pct_us(&per_sb, 0), pct_us(&per_sb, 0.5), pct_us(&per_sb, 1), first_kib, last_kib);
        if (with_memcg)
                printf("   cgroup memory.current per sandbox: %.2f MiB (%d sandboxes with one)\n", (double)memcg / with_memcg / 1024, with_memcg);
        else
                printf("   cgroup memory.current: none (no sandbox has a memory controller in its cgroup on this host)\n");
        printf("   MemAvailable drop per sandbox: %.2f MiB; %.2f MiB came back after destroying them\n",
               live ? (double)(avail0 - avail1) / live / 1024 : 0.0, (double)(avail2 - avail1) / 1024);
        printf("   all destroyed in %.2f s; nsboxd held %d fds, %d children, %ld KiB RSS at the peak\n", destroy_s, held.fds, held.children,
               held.rss_kib);
        printf("   left after destroying them all: %s\n", json_array_size(left) ? "" : "nothing (processes, mounts, cgroups, state files, runtime directory entries, fds)");
        json_array_foreach(left, i, sb) printf("     %s\n", json_string_value(sb));
        json_t *o = json_pack("{si si si si sf sf s{sI sI si si} sI sI so so so so}", "target", target, "started", n, "listed", live,
                              "shells_waiting", waiting, "start_all_s", start_s, "destroy_all_s", destroy_s, "pss", "sandboxes_kib",
                              (json_int_t)pss, "nsboxd_growth_kib", (json_int_t)(d_pss1 - d_pss0), "processes", procs, "unreadable",
                              unreadable, "memavailable_drop_kib", (json_int_t)(avail0 - avail1), "memavailable_back_kib",
                              (json_int_t)(avail2 - avail1), "before", census_json(&base), "peak", census_json(&held), "after",
                              census_json(&after), "leftovers", left);
        json_object_set_new(o, "pss_mib_per_sandbox", per_pss >= 0 ? json_real(per_pss) : json_null());
        json_object_set_new(o, "pss_kib_one_sandbox",
                            json_pack("{sf sf sf sI sI}", "min", pct_us(&per_sb, 0), "median", pct_us(&per_sb, 0.5), "max",
                                      pct_us(&per_sb, 1), "first_started", (json_int_t)first_kib, "last_started", (json_int_t)last_kib));
        free(per_sb.v);
        json_object_set_new(o, "memory_current_mib_per_sandbox", with_memcg ? json_real((double)memcg / with_memcg / 1024) : json_null());
        json_object_set_new(o, "memavailable_mib_per_sandbox", json_real(live ? (double)(avail0 - avail1) / live / 1024 : 0));
        json_object_set_new(o, "stopped_by", stopped_by ? json_string(stopped_by) : json_null());
        json_object_set_new(figures, "density", o);
        json_decref(pids);
        sb_release(&mounts_before);
        free(ids);
}

/* ---- churn --------------------------------------------------------------------------------- */

typedef struct {
        uint64_t end;
        int cycles, failed;
        samples lat;
        char *first_error;
} churner;

static void *churn_main(void *arg)
{
        churner *ch = arg;
        conn c;
        conn_open(&c);
        while (now_ns() < ch->end) {
                char *e = NULL;
                uint64_t t0 = now_ns();
                char *id = create(&c, json_object(), &e);
                if (id && exec_true(&c, id, &e)) {
                        destroy(&c, id);
                        add(&ch->lat, now_ns() - t0);
                        ch->cycles++;
                } else {
                        if (id)
                                destroy(&c, id);
                        ch->failed++;
                        if (!ch->first_error)
                                ch->first_error = e;
                        else
                                free(e);
                }
                free(id);
        }
        conn_close(&c);
        return NULL;
}

static void bench_churn(const char *nsboxd, double seconds)
{
        start_daemon(nsboxd, "churn", "{\"max_sandboxes\": 4096, \"max_per_uid\": 4096, \"drain_timeout\": 2}\n");
        conn c;
        conn_open(&c);
        char *e = NULL;
        for (int i = 0; i < 3; i++) { /* what nsboxd keeps open for its lifetime opens at the first ones */
                char *id = create(&c, json_object(), &e);
                if (!id || !exec_true(&c, id, &e))
                        die("%s", e);
                note_cgroup(&c, id);
                destroy(&c, id);
                free(id);
        }
        census b0 = take_census();
        census before = settle(&b0, 10);
        churner ch[2] = { 0 };
        pthread_t th[2];
        uint64_t t0 = now_ns();
        for (int i = 0; i < 2; i++) {
                ch[i].end = t0 + (uint64_t)(seconds * 1e9);
                if (pthread_create(&th[i], NULL, churn_main, &ch[i]) != 0)
                        die("pthread_create");
        }
        samples all = { 0 };
        int cycles = 0, failed = 0;
        for (int i = 0; i < 2; i++) {
                pthread_join(th[i], NULL);
                cycles += ch[i].cycles;
                failed += ch[i].failed;
                for (size_t k = 0; k < ch[i].lat.n; k++)
                        add(&all, ch[i].lat.v[k]);
                free(ch[i].lat.v);
        }
        double el = (double)(now_ns() - t0) / 1e9;
        census after = settle(&before, 10);
        json_t *l = rpc(&c, "list", json_object());
        size_t listed = json_array_size(json_object_get(l, "sandboxes"));
        json_decref(l);
        conn_close(&c);
        stop_daemon();
        printf("\n== churn: create + exec [true] + destroy from 2 clients for %.0f s\n", el);
        const char *first_error = ch[0].first_error ? ch[0].first_error : ch[1].first_error;
        printf("   %d cycles, %.1f/s, %d failed; cycle median %.2f ms, p99 %.2f ms\n", cycles, cycles / el, failed, pct_us(&all, 0.5) / 1000,
               pct_us(&all, 0.99) / 1000);
        if (first_error)
                printf("   first failure: %s\n", first_error);
        printf("   nsboxd before -> after: RSS %ld -> %ld KiB, fds %d -> %d, children %d -> %d; cgroups %d -> %d, state files %d -> %d, "
               "runtime directory entries %d -> %d, sandboxes listed after %zu\n",
               before.rss_kib, after.rss_kib, before.fds, after.fds, before.children, after.children, before.cgroups, after.cgroups,
               before.state_files, after.state_files, before.run_dir_entries, after.run_dir_entries, listed);
        json_t *o = json_pack("{sf si sf si so so so si}", "seconds", el, "cycles", cycles, "per_second", cycles / el, "failed", failed,
                              "cycle", dist(&all), "before", census_json(&before), "after", census_json(&after), "listed_after", (int)listed);
        json_object_set_new(o, "first_error", first_error ? json_string(first_error) : json_null());
        json_object_set_new(figures, "churn", o);
        free(all.v);
}

/* ---- main ---------------------------------------------------------------------------------- */

static void cleanup_run_dir(void)
{
        if (daemon_pid > 0)
                stop_daemon();
        if (!run_dir[0])
                return;
        as_root();
        char cmd[128]; /* the sockets, configurations, state directories and the log */
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", run_dir);
        if (system(cmd) != 0)
                fprintf(stderr, "bench-daemon: could not remove %s\n", run_dir);
}

int main(int argc, char **argv)
{
        const char *nsboxd = NULL, *json = NULL, *user = NULL, *only = "warm,concurrency,density,churn";
        int runs = 200, big_runs = 5, density = 500;
        double churn_s = 60;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (a[0] != '-') {
                        nsboxd = a;
                        continue;
                }
                if (!v)
                        die("%s: a value is expected", a);
                i++;
                if (!strcmp(a, "--json"))
                        json = v;
                else if (!strcmp(a, "--user"))
                        user = v;
                else if (!strcmp(a, "--only"))
                        only = v;
                else if (!strcmp(a, "--runs") && (runs = atoi(v)) >= 1)
                        ;
                else if (!strcmp(a, "--big-runs") && (big_runs = atoi(v)) >= 1)
                        ;
                else if (!strcmp(a, "--density") && (density = atoi(v)) >= 1)
                        ;
                else if (!strcmp(a, "--churn-seconds") && (churn_s = atof(v)) > 0)
                        ;
                else
                        die("%s '%s': unknown option or bad value", a, v);
        }
        if (!nsboxd)
                die("usage: bench-daemon NSBOXD [--user NAME] [--runs N] [--big-runs N] [--density N] [--churn-seconds S] [--only LIST] [--json FILE]");
        if (access(nsboxd, X_OK) < 0)
                die("'%s': %s", nsboxd, strerror(errno));
        /* everything checked before anything is made */
        bool drop = false;
        {
                _cleanup_free_ char *list = strdup(only);
                char *save = NULL;
                for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save))
                        if (strcmp(w, "warm") && strcmp(w, "concurrency") && strcmp(w, "density") && strcmp(w, "churn"))
                                die("--only '%s': expected some of warm,concurrency,density,churn", w);
        }
        if (user) {
                struct passwd *pw = getpwnam(user);
                if (!pw)
                        die("--user '%s': no such user", user);
                if (geteuid() != 0 && pw->pw_uid != geteuid())
                        die("--user %s: only root can run the bench as another user", user);
                user_uid = pw->pw_uid;
                user_gid = pw->pw_gid;
                drop = geteuid() == 0 && user_uid != 0;
        }
        signal(SIGPIPE, SIG_IGN);
        snprintf(run_dir, sizeof(run_dir), "/tmp/nsbox-bench-d.XXXXXX");
        if (!mkdtemp(run_dir))
                die("mkdtemp: %s", strerror(errno));
        atexit(cleanup_run_dir);
        if (drop) {
                if (chown(run_dir, user_uid, user_gid) < 0 || setgroups(1, &user_gid) < 0)
                        die("'%s': %s", run_dir, strerror(errno));
                dropped = true;
                as_user();
        }
        figures = json_pack("{si si si sf}", "runs", runs, "big_runs", big_runs, "density_target", density, "churn_seconds", churn_s);
        json_object_set_new(figures, "uid", json_integer(dropped ? (json_int_t)user_uid : (json_int_t)geteuid()));
        char *big = malloc(BIG);
        if (!big)
                die("out of memory");
        for (size_t i = 0; i < BIG; i++)
                big[i] = (char)(i * 2654435761u >> 13);
        if (strstr(only, "warm"))
                bench_warm(nsboxd, runs, big_runs, big);
        if (strstr(only, "concurrency"))
                bench_concurrency(nsboxd, runs);
        if (strstr(only, "density"))
                bench_density(nsboxd, density);
        if (strstr(only, "churn"))
                bench_churn(nsboxd, churn_s);
        free(big);
        if (json) {
                as_root();
                if (json_dump_file(figures, json, JSON_INDENT(1)) < 0)
                        die("write '%s'", json);
                as_user();
        }
        json_decref(figures);
        return 0;
}
