/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sandbox cgroups (nsbox(1), RESOURCE LIMITS and HOST SETUP).
 *
 * Where they go, decided once per process:
 *   1. $NSBOX_CGROUP_PARENT, a cgroup path (e.g. /nsbox.slice), created if missing ("none": no
 *      cgroups at all);
 *   2. our own cgroup when we are its only process (a systemd service or scope with Delegate=yes):
 *      we move ourselves into its leaf "supervisor" (cgroup v2 forbids processes in a cgroup whose
 *      children have controllers) and sandboxes go beside it;
 *   3. otherwise "nsbox" under the topmost ancestor of our cgroup that is ours: the root cgroup for
 *      root, the delegated subtree (user@UID.service) for a user.
 * Sandbox cgroups are named sb-PID-STARTTIME-TAG after their supervisor, so that the next nsbox
 * to use the parent can remove the ones a killed supervisor left behind. */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define LEAF "supervisor"
#define GC_WAIT_MS 200

static struct {
        bool warned;
        char *mnt;    /* the cgroup2 mount point */
        char *parent; /* where sandbox cgroups go, or NULL */
        int parent_fd;
        char why[768]; /* why there is no parent */
        bool memory, pids, cpu;
        unsigned long long start; /* our start time, in clock ticks since boot */
        /* cgroup v1 (root on a hybrid host): "nsbox" under the hierarchy of each controller the
         * cgroup2 parent lacks; -1: not used */
        int v1_fd[NSBOX_CG_V1_N];
        char *v1_path[NSBOX_CG_V1_N];
} G = { .parent_fd = -1, .v1_fd = { -1, -1, -1, -1 } };

static const char *const V1_NAMES[NSBOX_CG_V1_N] = { "memory", "pids", "cpu", "freezer" };

/* ---- small file helpers ----------------------------------------------------------------------- */

static ssize_t read_at(int dirfd, const char *name, char *buf, size_t size)
{
        int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int e = errno;
        close(fd);
        if (n < 0)
                return -e;
        buf[n] = '\0';
        return n;
}

static int write_at(int dirfd, const char *name, const char *value)
{
        int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, value, strlen(value));
        int e = errno;
        close(fd);
        return n < 0 ? -e : 0;
}

/* "key value" lines (cpu.stat, memory.events, cgroup.events): the value of key, or 0 */
static uint64_t keyed(const char *text, const char *key)
{
        size_t k = strlen(key);
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (!strncmp(l, key, k) && l[k] == ' ')
                        return strtoull(l + k + 1, NULL, 10);
        return 0;
}

static bool has_word(const char *list, const char *word)
{
        size_t n = strlen(word);
        for (const char *p = list; (p = strstr(p, word)); p += n)
                if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
                        return true;
        return false;
}

unsigned long long nsbox_pid_start_time(pid_t pid)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (read_at(AT_FDCWD, path, buf, sizeof(buf)) < 0)
                return 0;
        char *p = strrchr(buf, ')'); /* the command name may hold anything but ends here */
        if (!p || !p[1] || !p[2] || strchr("ZXx", p[2]))
                return 0; /* exited: a zombie its parent has not reaped yet is no supervisor */
        /* fields from 3 on; start time is field 22 */
        for (int field = 2; field < 22 && p; field++)
                p = strchr(p + 1, ' ');
        return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* ---- finding the parent ----------------------------------------------------------------------- */

static char *unescape_octal(const char *s)
{
        char *out = malloc(strlen(s) + 1), *o = out;
        if (!out)
                return NULL;
        for (; *s; s++) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
                        *o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
                        s += 3;
                } else
                        *o++ = *s;
        }
        *o = '\0';
        return out;
}

/* /proc/self/mountinfo, read once for every lookup of resolve_once() (the kernel formats it
 * anew at each read: three reads were a tenth of the parent's own work before clone); NULL when
 * unreadable (mountinfo_err says why), then no cgroup is used. */
#define MOUNTINFO_MAX (16u << 20)
static char *mountinfo;
static int mountinfo_err;

/* The mount point of the cgroup2 hierarchy (controller NULL), or of the cgroup v1 hierarchy that
 * holds controller (its super options name it): its root mounted, not a subtree. */
static char *cgroup_mount(const char *controller)
{
        const char *type = controller ? " - cgroup " : " - cgroup2 ";
        char *found = NULL;
        size_t tl = strlen(type);
        for (const char *line = mountinfo; line && *line && !found; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                char root[4096], mnt[4096], opts[1024];
                const char *end = strchr(line, '\n'), *dash = strstr(line, " - ");
                if (!dash || (end && dash > end) || strncmp(dash, type, tl) ||
                    sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 || strcmp(root, "/"))
                        continue;
                if (!controller) {
                        found = unescape_octal(mnt);
                        continue;
                }
                if (sscanf(dash + tl, "%*s %1023s", opts) != 1)
                        continue;
                for (char *save = NULL, *o = strtok_r(opts, ",", &save); o && !found; o = strtok_r(NULL, ",", &save))
                        if (!strcmp(o, controller))
                                found = unescape_octal(mnt);
        }
        return found;
}

static char *own_cgroup(void)
{
        char buf[8192];
        if (read_at(AT_FDCWD, "/proc/self/cgroup", buf, sizeof(buf)) < 0)
                return NULL;
        for (char *l = buf; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (!strncmp(l, "0::", 3)) {
                        char *end = strchr(l, '\n');
                        return strndup(l + 3, end ? (size_t)(end - l - 3) : strlen(l + 3));
                }
        return NULL;
}

/* The controllers sandboxes use, enabled for dir's children when dir offers them: one at a time,
 * so one that cannot be enabled does not keep the others out. */
static void enable_controllers(const char *dir)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char avail[512], on[512];
        if (fd < 0)
                return;
        if (read_at(fd, "cgroup.controllers", avail, sizeof(avail)) >= 0 && read_at(fd, "cgroup.subtree_control", on, sizeof(on)) >= 0) {
                static const char *const want[] = { "memory", "pids", "cpu" };
                for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                        if (has_word(avail, want[i]) && !has_word(on, want[i])) {
                                char w[16];
                                snprintf(w, sizeof(w), "+%s", want[i]);
                                write_at(fd, "cgroup.subtree_control", w);
                        }
        }
        close(fd);
}

/* Ours: a cgroup directory we own whose cgroup.procs we may write (delegation, cgroups(7)). */
static bool owned(const char *dir)
{
        struct stat st;
        char procs[4200];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
        return stat(dir, &st) == 0 && st.st_uid == geteuid() && faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) == 0 &&
               faccessat(AT_FDCWD, procs, W_OK, AT_EACCESS) == 0;
}

static ssize_t read_procs(const char *dir, char *buf, size_t size)
{
        char path[4200];
        snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
        return read_at(AT_FDCWD, path, buf, size);
}

static bool only_me(const char *dir)
{
        char buf[4096];
        ssize_t n = read_procs(dir, buf, sizeof(buf));
        if (n < 0 || (size_t)n >= sizeof(buf) - 1)
                return false;
        for (char *l = buf; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
                if (*l != '\n' && atoi(l) != getpid())
                        return false;
        return true;
}

static bool has_processes(const char *dir)
{
        char buf[64];
        return read_procs(dir, buf, sizeof(buf)) > 0;
}

static int make_dir(const char *path)
{
        if (mkdir(path, 0755) == 0 || errno == EEXIST)
                return 0;
        return -errno;
}

#define WHY(...) snprintf(G.why, sizeof(G.why), __VA_ARGS__)

/* Sets G.parent, or G.why. */
static void find_parent(const char *mnt)
{
        size_t ml = strlen(mnt);
        const char *env = getenv("NSBOX_CGROUP_PARENT");
        _cleanup_free_ char *own = NULL, *parent = NULL;
        int r;
        if (env && !strcmp(env, "none")) {
                WHY("NSBOX_CGROUP_PARENT=none");
                return;
        }
        if (env && *env) {
                const char *rel = !strncmp(env, mnt, ml) && env[ml] == '/' ? env + ml : env;
                if (rel[0] != '/' || strstr(rel, "/..") || strstr(rel, "/./") || strlen(rel) > 1024) {
                        WHY("NSBOX_CGROUP_PARENT '%.200s' is not a cgroup path such as /nsbox.slice", env);
                        return;
                }
                if (asprintf(&parent, "%s%s", mnt, strcmp(rel, "/") ? rel : "") < 0)
                        return;
                bool existed = access(parent, F_OK) == 0;
                if (!existed) {
                        _cleanup_free_ char *up = strdup(parent);
                        if (up && strrchr(up, '/') > up + ml) {
                                *strrchr(up, '/') = '\0';
                                enable_controllers(up);
                        }
                }
                if ((r = make_dir(parent)) < 0) {
                        WHY("cannot create NSBOX_CGROUP_PARENT %s: %s", parent, strerror(-r));
                        return;
                }
                if (strcmp(rel, "/") && has_processes(parent)) {
                        WHY("NSBOX_CGROUP_PARENT %s holds processes; cgroup v2 gives controllers only to the children of a cgroup without processes of its own",
                            parent);
                        return;
                }
                enable_controllers(parent);
                G.parent = steal_pointer(&parent);
                return;
        }
        if (!(own = own_cgroup())) {
                WHY("this process is in no cgroup v2 cgroup (/proc/self/cgroup)");
                return;
        }
        _cleanup_free_ char *mine = NULL;
        if (asprintf(&mine, "%s%s", mnt, strcmp(own, "/") ? own : "") < 0)
                return;
        /* 2. alone in a cgroup of our own: into its leaf, sandboxes beside us */
        if (strcmp(own, "/") && owned(mine) && only_me(mine)) {
                _cleanup_free_ char *leaf = NULL;
                char pid[32];
                snprintf(pid, sizeof(pid), "%d", (int)getpid());
                if (asprintf(&leaf, "%s/" LEAF, mine) < 0)
                        return;
                if ((r = make_dir(leaf)) == 0) {
                        int lfd = open(leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        r = lfd < 0 ? -errno : write_at(lfd, "cgroup.procs", pid);
                        if (lfd >= 0)
                                close(lfd);
                }
                if (r < 0) {
                        WHY("cannot move into the leaf cgroup %s: %s", leaf, strerror(-r));
                        return;
                }
                enable_controllers(mine);
                G.parent = steal_pointer(&mine);
                return;
        }
        /* 3. the topmost ancestor (or self) that is ours */
        _cleanup_free_ char *top = NULL, *cur = strdup(mine);
        if (!cur)
                return;
        for (;;) {
                if (!owned(cur))
                        break;
                free(top);
                if (!(top = strdup(cur)))
                        return;
                if (strlen(cur) <= ml)
                        break;
                *strrchr(cur, '/') = '\0';
        }
        if (!top) {
                WHY("cgroup %s is not delegated to uid %u (see HOST SETUP in nsbox(1), or set NSBOX_CGROUP_PARENT)", own,
                    (unsigned)geteuid());
                return;
        }
        if (strlen(top) > ml && has_processes(top)) {
                WHY("cgroup %s holds processes and has no delegated parent; start nsbox in a delegated scope (systemd-run --user --scope -p Delegate=yes) or set NSBOX_CGROUP_PARENT",
                    top + ml);
                return;
        }
        enable_controllers(top);
        if (asprintf(&parent, "%s/nsbox", top) < 0)
                return;
        if ((r = make_dir(parent)) < 0) {
                WHY("cannot create %s: %s", parent, strerror(-r));
                return;
        }
        enable_controllers(parent);
        G.parent = steal_pointer(&parent);
}

/* Root on a hybrid host: each controller the cgroup2 parent lacks, from its v1 hierarchy's own
 * "nsbox" cgroup (made once; nothing else of the hierarchy is touched). */
static void resolve_v1(void)
{
        const char *env = getenv("NSBOX_CGROUP_PARENT");
        if (geteuid() != 0 || (env && *env && !G.parent)) /* "none", or a place that could not be: said, not worked around */
                return;
        /* cgroup2 freezes any cgroup of its own (cgroup.freeze): the v1 freezer only without it */
        bool v2[NSBOX_CG_V1_N] = { G.parent && G.memory, G.parent && G.pids, G.parent && G.cpu, G.parent };
        for (int i = 0; i < NSBOX_CG_V1_N; i++) {
                _cleanup_free_ char *mnt = v2[i] ? NULL : cgroup_mount(V1_NAMES[i]);
                char *dir = NULL;
                if (!mnt || asprintf(&dir, "%s/nsbox", mnt) < 0)
                        continue;
                int fd = make_dir(dir) == 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
                if (fd < 0 || faccessat(fd, "cgroup.procs", W_OK, AT_EACCESS) < 0) {
                        if (fd >= 0)
                                close(fd);
                        free(dir);
                        continue;
                }
                G.v1_fd[i] = fd;
                G.v1_path[i] = dir;
        }
}

static void resolve_v2(void)
{
        if (!mountinfo) {
                WHY("cannot read /proc/self/mountinfo: %s", strerror(-mountinfo_err));
                return;
        }
        if (!(G.mnt = cgroup_mount(NULL))) {
                WHY("no cgroup v2 hierarchy is mounted");
                return;
        }
        find_parent(G.mnt);
        if (!G.parent) {
                if (!G.why[0])
                        WHY("out of memory");
                return;
        }
        G.parent_fd = open(G.parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char on[512];
        if (G.parent_fd < 0 || read_at(G.parent_fd, "cgroup.subtree_control", on, sizeof(on)) < 0) {
                WHY("cannot open %s: %s", G.parent, strerror(errno));
                free(G.parent);
                G.parent = NULL;
                return;
        }
        G.memory = has_word(on, "memory");
        G.pids = has_word(on, "pids");
        G.cpu = has_word(on, "cpu");
}

static void resolve_once(void)
{
        G.start = nsbox_pid_start_time(getpid()); /* names our sandboxes' cgroups */
        if ((mountinfo_err = read_file_at(AT_FDCWD, "/proc/self/mountinfo", 0, MOUNTINFO_MAX, &mountinfo, NULL)) < 0)
                mountinfo = NULL;
        resolve_v2();
        resolve_v1();
        free(mountinfo);
        mountinfo = NULL;
}

static bool v1_has(int i) { return G.v1_fd[i] >= 0; }

/* once per process, however many threads start sandboxes at once */
static pthread_once_t resolved = PTHREAD_ONCE_INIT;
static void resolve(void) { pthread_once(&resolved, resolve_once); }

const char *nsbox_cgroup_parent(const char **why)
{
        resolve();
        if (why)
                *why = G.why;
        return G.parent;
}

int nsbox_cgroup_check(const nsbox_limits *l, const char *policy_name, nsbox_error *err)
{
        bool need_mem = l->memory || l->swap_set, need_pids = l->pids, need_cpu = l->cpus > 0;
        if (!need_mem && !need_pids && !need_cpu)
                return 0;
        resolve();
        char missing[64] = "";
        if (need_mem && !(G.parent && G.memory) && !v1_has(NSBOX_CG_V1_MEMORY))
                strcat(missing, " memory");
        if (need_pids && !(G.parent && G.pids) && !v1_has(NSBOX_CG_V1_PIDS))
                strcat(missing, " pids");
        if (need_cpu && !(G.parent && G.cpu) && !v1_has(NSBOX_CG_V1_CPU))
                strcat(missing, " cpu");
        if (!missing[0])
                return 0;
        char msg[1200];
        if (!G.parent)
                snprintf(msg, sizeof(msg), "limits of policy '%s' need the cgroup v2 controllers%s: %s", policy_name, missing, G.why);
        else
                snprintf(msg, sizeof(msg),
                         "limits of policy '%s' need the cgroup v2 controllers%s, which %s does not offer (held by cgroup v1, which only root uses, or not delegated: see HOST SETUP in nsbox(1))",
                         policy_name, missing, G.parent);
        if (l->enforce == ENFORCE_REQUIRED) {
                nsbox_err(err, 0, "%s; --limits best-effort runs without them", msg);
                return -EOPNOTSUPP;
        }
        if (!G.warned)
                fprintf(stderr, "nsbox: warning: %s; running without them (limits.enforce is best-effort)\n", msg);
        G.warned = true;
        return 0;
}

/* ---- one sandbox's cgroup ----------------------------------------------------------------------- */

static int wait_events(int dirfd, const char *key, int want, int timeout_ms)
{
        int fd = openat(dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000, step = 20000;
        int r = -ETIMEDOUT;
        for (;;) {
                char buf[256];
                ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
                if (n < 0) {
                        r = -errno;
                        break;
                }
                buf[n] = '\0';
                if ((int)keyed(buf, key) == want) {
                        r = 0;
                        break;
                }
                uint64_t now = now_ns();
                if (now >= deadline)
                        break;
                /* kernfs wakes pollers of cgroup.events with POLLPRI when it changes, but the
                 * cgroup core sends at most one such notification per 10 ms per file: poll with a
                 * timeout growing from 20 us to 2 ms, so a freeze right after a thaw is seen at once */
                struct pollfd pfd = { .fd = fd, .events = POLLPRI };
                uint64_t left = deadline - now, wait = step < left ? step : left;
                struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)wait };
                ppoll(&pfd, 1, &ts, NULL);
                if (step < 2000000)
                        step *= 2;
        }
        close(fd);
        return r;
}

static void kill_all(int dirfd)
{
        if (write_at(dirfd, "cgroup.kill", "1") == 0)
                return;
        /* before 5.14: one by one (they are ours: the cgroup is) */
        char buf[65536];
        if (read_at(dirfd, "cgroup.procs", buf, sizeof(buf)) < 0)
                return;
        for (char *l = buf; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
                if (atoi(l) > 0)
                        kill(atoi(l), SIGKILL);
}

/* Killed, emptied and removed.  cgroup2: cgroup.kill, then wait for cgroup.events to say empty.
 * cgroup v1 (v1 true) has neither: its processes are killed again on each try until it can go. */
static int remove_dir(int parent_fd, const char *name, int dirfd, int timeout_ms, bool v1)
{
        if (!v1) {
                kill_all(dirfd);
                wait_events(dirfd, "populated", 0, timeout_ms);
        }
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
        for (;;) {
                if (v1) {
                        kill_all(dirfd);
                        /* a frozen task of the v1 freezer dies of its SIGKILL only once thawed
                         * (no such file in the other hierarchies) */
                        write_at(dirfd, "freezer.state", "THAWED");
                }
                if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY || now_ns() >= deadline)
                        return -errno;
                struct timespec ts = { 0, 1000000 };
                nanosleep(&ts, NULL);
        }
}

#define SUPERVISOR_XATTR "user.nsbox.supervisor"

int nsbox_cgroup_hand_over(nsbox_cgroup *cg, pid_t owner, nsbox_error *err)
{
        if (cg->dirfd < 0)
                return 0;
        char v[64];
        int n = snprintf(v, sizeof(v), "%d-%llu", (int)owner, nsbox_pid_start_time(owner));
        if (fsetxattr(cg->dirfd, SUPERVISOR_XATTR, v, (size_t)n, 0) < 0)
                return nsbox_err(err, errno, "cgroup %s: set %s", cg->path, SUPERVISOR_XATTR);
        return 0;
}

/* Handed over to a supervisor that is alive (its xattr names it)? */
static bool handed_over(int cfd)
{
        char v[64];
        ssize_t n = fgetxattr(cfd, SUPERVISOR_XATTR, v, sizeof(v) - 1);
        if (n <= 0)
                return false;
        v[n] = '\0';
        int pid;
        unsigned long long start;
        return sscanf(v, "%d-%llu", &pid, &start) == 2 && pid > 0 && (pid == getpid() || nsbox_pid_start_time(pid) == start);
}

/* Cgroups whose supervisor is gone (killed with SIGKILL: nobody removed them). */
static bool orphans_collected;

/* A cgroup v1 directory of a sandbox handed over with its cgroup2 directory of the same name. */
static bool v2_sibling_handed_over(const char *name)
{
        int cfd = G.parent_fd >= 0 ? openat(G.parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        bool yes = cfd >= 0 && handed_over(cfd);
        if (cfd >= 0)
                close(cfd);
        return yes;
}

/* In one parent (cgroup2's, or a v1 hierarchy's nsbox cgroup when v1 is true). */
static void collect_in(int parent_fd, bool v1)
{
        int fd = dup(parent_fd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        struct dirent *e;
        /* one nsboxd may hold a thousand cgroups here: ask /proc about each supervisor once */
        int last_pid = 0;
        unsigned long long last_start = 0;
        bool last_alive = false;
        while ((e = readdir(d))) {
                int pid;
                unsigned long long start;
                if (e->d_type != DT_DIR || sscanf(e->d_name, "sb-%d-%llu-", &pid, &start) != 2 || pid <= 0)
                        continue;
                if (pid != last_pid || start != last_start) {
                        last_pid = pid;
                        last_start = start;
                        last_alive = pid == getpid() || nsbox_pid_start_time(pid) == start;
                }
                if (last_alive)
                        continue; /* a live supervisor's */
                int cfd = openat(parent_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (cfd < 0)
                        continue;
                if (v1 && !v2_sibling_handed_over(e->d_name))
                        remove_dir(parent_fd, e->d_name, cfd, GC_WAIT_MS, true);
                else if (!v1 && !handed_over(cfd))
                        remove_dir(parent_fd, e->d_name, cfd, GC_WAIT_MS, false);
                close(cfd);
        }
        closedir(d);
}

static void collect_orphans(void)
{
        if (G.parent_fd >= 0)
                collect_in(G.parent_fd, false);
        for (int i = 0; i < NSBOX_CG_V1_N; i++)
                if (v1_has(i))
                        collect_in(G.v1_fd[i], true);
}

static int write_limit(nsbox_cgroup *cg, const char *file, const char *value, bool optional, nsbox_error *err)
{
        int r = write_at(cg->dirfd, file, value);
        if (r == -ENOENT && optional)
                return 0;
        if (r < 0)
                return nsbox_err(err, -r, "write %s to %s/%s", value, cg->path, file);
        return 0;
}

void nsbox_cgroup_collect_orphans(void)
{
        resolve();
        if (G.parent || v1_has(NSBOX_CG_V1_MEMORY) || v1_has(NSBOX_CG_V1_PIDS) || v1_has(NSBOX_CG_V1_CPU)) {
                collect_orphans();
                __atomic_store_n(&orphans_collected, true, __ATOMIC_RELEASE);
        }
}

/* The cgroup2 directory name in the parent, with l's limits: 0 also when it could not be made and
 * the limits may go unenforced (then cg->dirfd stays -1). */
static int create_v2(const nsbox_limits *l, const char *name, nsbox_cgroup *cg, nsbox_error *err)
{
        if (mkdirat(G.parent_fd, name, 0755) < 0) {
                /* a parent we may not write after all, or cgroup.max.descendants: without limits
                 * to enforce, the sandbox runs without a cgroup, as on a host that has none */
                int e = errno;
                bool needed = l->memory || l->swap_set || l->pids || l->cpus > 0;
                if (needed && l->enforce == ENFORCE_REQUIRED)
                        return nsbox_err(err, e, "create cgroup %s/%s", G.parent, name);
                if (!G.warned)
                        fprintf(stderr, "nsbox: warning: cannot create cgroup %s/%s: %s; running without one%s\n", G.parent, name,
                                strerror(e), needed ? " (limits.enforce is best-effort)" : "");
                G.warned = true;
                return 0;
        }
        if (asprintf(&cg->path, "%s/%s", G.parent, name) < 0) {
                unlinkat(G.parent_fd, name, AT_REMOVEDIR);
                cg->path = NULL;
                return nsbox_err(err, ENOMEM, "create cgroup");
        }
        cg->dirfd = openat(G.parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg->dirfd < 0) {
                int e = errno;
                unlinkat(G.parent_fd, name, AT_REMOVEDIR);
                free(cg->path);
                cg->path = NULL;
                return nsbox_err(err, e, "open cgroup %s/%s", G.parent, name);
        }
        cg->memory = G.memory;
        cg->pids = G.pids;
        cg->cpu = G.cpu;
        char v[64];
        int r = 0;
        if (cg->memory) {
                /* one OOM kill takes the whole sandbox: no half-dead process tree */
                r = write_limit(cg, "memory.oom.group", "1", true, err);
                if (r == 0 && l->memory) {
                        snprintf(v, sizeof(v), "%" PRIu64, l->memory);
                        r = write_limit(cg, "memory.max", v, false, err);
                }
                if (r == 0 && (l->memory || l->swap_set)) {
                        snprintf(v, sizeof(v), "%" PRIu64, l->swap_set ? l->swap : 0);
                        /* absent when the kernel does not account swap: then there is none to limit */
                        r = write_limit(cg, "memory.swap.max", v, true, err);
                }
        }
        if (r == 0 && cg->pids && l->pids) {
                snprintf(v, sizeof(v), "%" PRIu64, l->pids);
                r = write_limit(cg, "pids.max", v, false, err);
        }
        if (r == 0 && cg->cpu && l->cpus > 0) {
                uint64_t quota = (uint64_t)(l->cpus * 100000.0 + 0.5);
                snprintf(v, sizeof(v), "%" PRIu64 " 100000", quota < 1000 ? 1000 : quota);
                r = write_limit(cg, "cpu.max", v, false, err);
        }
        return r;
}

static int write_v1(const nsbox_cgroup *cg, int i, const char *file, uint64_t value, bool optional, nsbox_error *err)
{
        char v[32];
        snprintf(v, sizeof(v), "%" PRIu64, value);
        int r = write_at(cg->v1fd[i], file, v);
        if (r == -ENOENT && optional)
                return 0;
        return r < 0 ? nsbox_err(err, -r, "write %s to %s/%s/%s", v, G.v1_path[i], cg->v1name, file) : 0;
}

/* The limits whose controllers cgroup2 lacks, in their cgroup v1 hierarchies (root on a hybrid
 * host): a directory named name under each one's nsbox cgroup. */
static int create_v1(const nsbox_limits *l, const char *name, bool freezer, nsbox_cgroup *cg, nsbox_error *err)
{
        bool need[NSBOX_CG_V1_N] = { (l->memory || l->swap_set) && !cg->memory, l->pids && !cg->pids, l->cpus > 0 && !cg->cpu,
                                     freezer && cg->dirfd < 0 };
        for (int i = 0; i < NSBOX_CG_V1_N; i++) {
                if (!need[i] || !v1_has(i))
                        continue;
                if (!cg->v1name && !(cg->v1name = strdup(name)))
                        return nsbox_err(err, ENOMEM, "create cgroup");
                int fd = mkdirat(G.v1_fd[i], name, 0755) == 0 ? openat(G.v1_fd[i], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
                if (fd < 0) {
                        int e = errno;
                        unlinkat(G.v1_fd[i], name, AT_REMOVEDIR);
                        return nsbox_err(err, e, "create cgroup %s/%s", G.v1_path[i], name);
                }
                cg->v1fd[i] = fd;
                cg->v1 |= 1u << i;
        }
        int r = 0;
        if (cg->v1 & (1u << NSBOX_CG_V1_MEMORY)) {
                cg->memory = true;
                if (l->memory) /* then memory and swap together: memsw, absent without swap accounting */
                        r = write_v1(cg, NSBOX_CG_V1_MEMORY, "memory.limit_in_bytes", l->memory, false, err);
                if (r == 0 && l->memory)
                        r = write_v1(cg, NSBOX_CG_V1_MEMORY, "memory.memsw.limit_in_bytes", l->memory + (l->swap_set ? l->swap : 0), true, err);
        }
        if (r == 0 && cg->v1 & (1u << NSBOX_CG_V1_PIDS)) {
                cg->pids = true;
                r = write_v1(cg, NSBOX_CG_V1_PIDS, "pids.max", l->pids, false, err);
        }
        if (r == 0 && cg->v1 & (1u << NSBOX_CG_V1_CPU)) {
                uint64_t quota = (uint64_t)(l->cpus * 100000.0 + 0.5);
                cg->cpu = true;
                r = write_v1(cg, NSBOX_CG_V1_CPU, "cpu.cfs_period_us", 100000, false, err);
                if (r == 0)
                        r = write_v1(cg, NSBOX_CG_V1_CPU, "cpu.cfs_quota_us", quota < 1000 ? 1000 : quota, false, err);
        }
        return r;
}

int nsbox_cgroup_create(const nsbox_limits *l, const char *tag, bool pausable, nsbox_cgroup *cg, nsbox_error *err)
{
        *cg = (nsbox_cgroup)NSBOX_CGROUP_INIT;
        resolve();
        /* the v1 freezer costs a join at start (a cgroup v1 migration waits for an RCU grace
         * period), so only a sandbox that may be paused gets it */
        bool freezer = pausable && !G.parent && v1_has(NSBOX_CG_V1_FREEZER);
        bool v1 = ((l->memory || l->swap_set) && !(G.parent && G.memory) && v1_has(NSBOX_CG_V1_MEMORY)) ||
                  (l->pids && !(G.parent && G.pids) && v1_has(NSBOX_CG_V1_PIDS)) || (l->cpus > 0 && !(G.parent && G.cpu) && v1_has(NSBOX_CG_V1_CPU)) ||
                  freezer;
        if (!G.parent && !v1)
                return 0;
        /* once: starts may overlap, in threads */
        if (!__atomic_exchange_n(&orphans_collected, true, __ATOMIC_ACQ_REL))
                collect_orphans();
        char name[128];
        snprintf(name, sizeof(name), "sb-%d-%llu-%.64s", (int)getpid(), G.start, tag);
        for (char *c = name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
                        *c = '_';
        int r = G.parent ? create_v2(l, name, cg, err) : 0;
        if (r == 0)
                r = create_v1(l, name, freezer, cg, err);
        if (r < 0) {
                nsbox_cgroup_destroy(cg, 100);
                return r;
        }
        return 0;
}

int nsbox_cgroup_attach(const nsbox_cgroup *cg, pid_t pid, nsbox_error *err)
{
        char v[32];
        snprintf(v, sizeof(v), "%d", (int)pid);
        for (int i = 0; i < NSBOX_CG_V1_N; i++) {
                int r = cg->v1 & (1u << i) ? write_at(cg->v1fd[i], "cgroup.procs", v) : 0;
                if (r < 0)
                        return nsbox_err(err, -r, "join cgroup %s/%s", G.v1_path[i], cg->v1name);
        }
        return 0;
}

void nsbox_cgroup_reopen_v1(nsbox_cgroup *cg)
{
        resolve();
        const char *name = cg->path ? strrchr(cg->path, '/') : NULL;
        for (int i = 0; name && i < NSBOX_CG_V1_N; i++) {
                int fd = v1_has(i) ? openat(G.v1_fd[i], name + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
                if (fd < 0 || (!cg->v1name && !(cg->v1name = strdup(name + 1)))) {
                        if (fd >= 0)
                                close(fd);
                        continue;
                }
                cg->v1fd[i] = fd;
                cg->v1 |= 1u << i;
        }
}

void nsbox_cgroup_destroy(nsbox_cgroup *cg, int timeout_ms)
{
        if (cg->dirfd >= 0) {
                const char *name = strrchr(cg->path, '/') + 1;
                remove_dir(G.parent_fd, name, cg->dirfd, timeout_ms, false);
                close(cg->dirfd);
        }
        for (int i = 0; i < NSBOX_CG_V1_N; i++)
                if (cg->v1 & (1u << i)) {
                        remove_dir(G.v1_fd[i], cg->v1name, cg->v1fd[i], timeout_ms, true);
                        close(cg->v1fd[i]);
                }
        free(cg->path);
        free(cg->v1name);
        *cg = (nsbox_cgroup)NSBOX_CGROUP_INIT;
}

int nsbox_cgroup_stats_read(const nsbox_cgroup *cg, nsbox_cgroup_stats *st)
{
        *st = (nsbox_cgroup_stats){ 0 };
        if (cg->dirfd < 0 && !cg->v1)
                return -ENOENT;
        char buf[2048];
        if (cg->v1 & (1u << NSBOX_CG_V1_MEMORY)) {
                int fd = cg->v1fd[NSBOX_CG_V1_MEMORY];
                st->has_memory = true;
                if (read_at(fd, "memory.usage_in_bytes", buf, sizeof(buf)) >= 0)
                        st->memory_current = strtoull(buf, NULL, 10);
                st->memory_peak = read_at(fd, "memory.max_usage_in_bytes", buf, sizeof(buf)) >= 0 ? strtoull(buf, NULL, 10) : st->memory_current;
                if (read_at(fd, "memory.oom_control", buf, sizeof(buf)) >= 0) /* oom_kill: Linux 4.13 and later */
                        st->oom_kills = keyed(buf, "oom_kill");
        }
        if (cg->dirfd >= 0 && read_at(cg->dirfd, "cpu.stat", buf, sizeof(buf)) >= 0) {
                st->cpu_usage_us = keyed(buf, "usage_usec");
                st->cpu_user_us = keyed(buf, "user_usec");
                st->cpu_system_us = keyed(buf, "system_usec");
        }
        if (cg->dirfd >= 0 && read_at(cg->dirfd, "cgroup.events", buf, sizeof(buf)) >= 0) {
                st->populated = keyed(buf, "populated");
                st->frozen = keyed(buf, "frozen");
        } else if ((cg->v1 & 1u << NSBOX_CG_V1_FREEZER) && read_at(cg->v1fd[NSBOX_CG_V1_FREEZER], "freezer.state", buf, sizeof(buf)) >= 0) {
                st->frozen = !strncmp(buf, "FROZEN", 6);
        }
        if (cg->memory && !(cg->v1 & (1u << NSBOX_CG_V1_MEMORY))) {
                st->has_memory = true;
                if (read_at(cg->dirfd, "memory.current", buf, sizeof(buf)) >= 0)
                        st->memory_current = strtoull(buf, NULL, 10);
                /* memory.peak: 5.19 and later */
                st->memory_peak = read_at(cg->dirfd, "memory.peak", buf, sizeof(buf)) >= 0 ? strtoull(buf, NULL, 10) : st->memory_current;
                if (read_at(cg->dirfd, "memory.events", buf, sizeof(buf)) >= 0) {
                        uint64_t k = keyed(buf, "oom_kill"), g = keyed(buf, "oom_group_kill");
                        st->oom_kills = k > g ? k : g;
                }
        }
        if (cg->pids) { /* the same files in cgroup v1 */
                int fd = cg->v1 & (1u << NSBOX_CG_V1_PIDS) ? cg->v1fd[NSBOX_CG_V1_PIDS] : cg->dirfd;
                st->has_pids = true;
                if (read_at(fd, "pids.current", buf, sizeof(buf)) >= 0)
                        st->pids_current = strtoull(buf, NULL, 10);
                if (read_at(fd, "pids.events", buf, sizeof(buf)) >= 0)
                        st->pids_limited = keyed(buf, "max");
        }
        return 0;
}

uint64_t nsbox_cgroup_pids_limited(const nsbox_cgroup *cg)
{
        char buf[256];
        int fd = cg->v1 & (1u << NSBOX_CG_V1_PIDS) ? cg->v1fd[NSBOX_CG_V1_PIDS] : cg->dirfd;
        if (fd < 0 || !cg->pids || read_at(fd, "pids.events", buf, sizeof(buf)) < 0)
                return 0;
        return keyed(buf, "max");
}

void nsbox_cgroup_kill(const nsbox_cgroup *cg)
{
        if (cg->dirfd >= 0)
                kill_all(cg->dirfd);
        for (int i = 0; i < NSBOX_CG_V1_N; i++) /* its processes are in these too: without cgroup2, only there */
                if (cg->v1 & (1u << i))
                        kill_all(cg->v1fd[i]);
        /* a frozen task of the v1 freezer dies of its SIGKILL only once thawed */
        if (cg->v1 & (1u << NSBOX_CG_V1_FREEZER))
                write_at(cg->v1fd[NSBOX_CG_V1_FREEZER], "freezer.state", "THAWED");
}

bool nsbox_cgroup_can_freeze(const nsbox_cgroup *cg)
{
        return cg->dirfd >= 0 || (cg->v1 & 1u << NSBOX_CG_V1_FREEZER);
}

/* freezer.state: FREEZING until every task is stopped, then FROZEN; THAWED at once. */
static int freeze_v1(const nsbox_cgroup *cg, bool freeze, int timeout_ms, nsbox_error *err)
{
        int fd = cg->v1fd[NSBOX_CG_V1_FREEZER];
        const char *want = freeze ? "FROZEN" : "THAWED";
        int r = write_at(fd, "freezer.state", want);
        if (r < 0)
                return nsbox_err(err, -r, "write freezer.state of %s/%s", G.v1_path[NSBOX_CG_V1_FREEZER], cg->v1name);
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
        long wait_us = 20;
        char buf[32];
        for (;;) {
                if ((r = read_at(fd, "freezer.state", buf, sizeof(buf))) < 0)
                        return nsbox_err(err, -r, "read freezer.state of %s/%s", G.v1_path[NSBOX_CG_V1_FREEZER], cg->v1name);
                if (!strncmp(buf, want, strlen(want)))
                        return 0;
                if (now_ns() >= deadline) {
                        if (freeze)
                                write_at(fd, "freezer.state", "THAWED");
                        return nsbox_err(err, ETIMEDOUT, "%s/%s did not %s within %d ms", G.v1_path[NSBOX_CG_V1_FREEZER], cg->v1name,
                                         freeze ? "freeze" : "thaw", timeout_ms);
                }
                struct timespec ts = { 0, wait_us * 1000 };
                nanosleep(&ts, NULL);
                wait_us = wait_us < 2000 ? wait_us * 2 : 2000;
        }
}

int nsbox_cgroup_freeze(const nsbox_cgroup *cg, bool freeze, int timeout_ms, nsbox_error *err)
{
        if (cg->dirfd < 0 && (cg->v1 & 1u << NSBOX_CG_V1_FREEZER))
                return freeze_v1(cg, freeze, timeout_ms, err);
        if (cg->dirfd < 0) {
                resolve();
                nsbox_err(err, 0, "the sandbox has no cgroup to freeze (%s)", G.why[0] ? G.why : "none was created");
                return -EOPNOTSUPP;
        }
        int r = write_at(cg->dirfd, "cgroup.freeze", freeze ? "1" : "0");
        if (r < 0)
                return nsbox_err(err, -r, "write cgroup.freeze of %s", cg->path);
        if ((r = wait_events(cg->dirfd, "frozen", freeze, timeout_ms)) < 0) {
                if (freeze)
                        write_at(cg->dirfd, "cgroup.freeze", "0");
                return nsbox_err(err, -r, "%s did not %s within %d ms", cg->path, freeze ? "freeze" : "thaw", timeout_ms);
        }
        return 0;
}

bool nsbox_cgroup_holds(const nsbox_cgroup *cg, int controller)
{
        bool v2[NSBOX_CG_V1_N] = { cg->memory, cg->pids, cg->cpu };
        return v2[controller] || (cg->v1 & 1u << controller);
}

unsigned nsbox_cgroup_held(const nsbox_limits *l, const nsbox_cgroup *cg)
{
        unsigned held = 0;
        if (l->memory && nsbox_cgroup_holds(cg, NSBOX_CG_V1_MEMORY))
                held |= 1u << NSBOX_CG_V1_MEMORY;
        if (l->pids && nsbox_cgroup_holds(cg, NSBOX_CG_V1_PIDS))
                held |= 1u << NSBOX_CG_V1_PIDS;
        if (l->cpus > 0 && nsbox_cgroup_holds(cg, NSBOX_CG_V1_CPU))
                held |= 1u << NSBOX_CG_V1_CPU;
        return held;
}

void nsbox_limits_json(json_t *o, const nsbox_limits *l, unsigned held)
{
        json_t *asked = json_object(), *enforced = json_object();
        json_t *sets[2] = { asked, enforced };
        for (int k = 0; k < 2; k++) {
                json_t *s = sets[k];
                if (l->memory && (!k || held & 1u << NSBOX_CG_V1_MEMORY))
                        json_object_set_new(s, "memory", json_integer((json_int_t)l->memory));
                if (l->pids && (!k || held & 1u << NSBOX_CG_V1_PIDS))
                        json_object_set_new(s, "pids", json_integer((json_int_t)l->pids));
                if (l->cpus > 0 && (!k || held & 1u << NSBOX_CG_V1_CPU))
                        json_object_set_new(s, "cpus", json_real(l->cpus));
                json_object_set_new(s, "disk", json_integer((json_int_t)(l->disk ? l->disk : NSBOX_DEFAULT_DISK)));
        }
        json_object_set_new(o, "limits", asked);
        json_object_set_new(o, "limits_enforced", enforced);
}

int nsbox_cgroup_unheld(const nsbox_limits *l, const nsbox_cgroup *cg, char *msg, size_t size)
{
        char missing[32] = "";
        if (l->memory && !nsbox_cgroup_holds(cg, NSBOX_CG_V1_MEMORY))
                strcat(missing, ", memory");
        if (l->pids && !nsbox_cgroup_holds(cg, NSBOX_CG_V1_PIDS))
                strcat(missing, ", pids");
        if (l->cpus > 0 && !nsbox_cgroup_holds(cg, NSBOX_CG_V1_CPU))
                strcat(missing, ", cpus");
        if (!missing[0])
                return 0;
        resolve();
        snprintf(msg, size, "limits not enforced: %s: %s", missing + 2,
                 G.why[0] ? G.why
                 : cg->dirfd < 0 && !cg->v1 ? "the sandbox has no cgroup (see HOST SETUP in nsbox(1))"
                                            : "its cgroup lacks the controller (see HOST SETUP in nsbox(1))");
        return 1;
}
