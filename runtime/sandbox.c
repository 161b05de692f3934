/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The launcher: docs/security.md's setup order, read top to bottom, with its step numbers.
 * nsbox_sandbox_start() is the launcher's side (steps 1 and 2, and 9's filter, compiled while
 * the child mounts); the clone()d child's side is nsbox_sandbox_child_prepare() (8, the end of
 * 2, 3's sources) then nsbox_sandbox_child_setup() (the end of 3, then 4 to 7 and 9).  In serve
 * mode (nsboxd, libnsbox in process) the child executes nsbox-agent between the two
 * (agentexec.c, agent_main.c), so that the agent holds nothing of the launcher's memory.
 * Step 10 is nsbox_sandbox_destroy().  The supervisors of what it starts: run.c (`nsbox run`),
 * daemon.c (nsboxd) and inproc.c (libnsbox). */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "agentexec.h"
#include "caps.h"
#include "idmapped.h"
#include "mounts.h"
#include "net.h"
#include "paths.h"
#include "seccomp.h"
#include "sync.h"
#include "userns.h"
#include "util.h"

#define SANDBOX_CLONE_FLAGS \
        (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

/* 1. The checks that need the host, run by the caller with the policy's own checks, before
 * anything exists: a mistake costs nothing to undo. */
int nsbox_policy_check_host(nsbox_policy *p, nsbox_error *err)
{
        if (p->root == ROOT_DIR) {
                struct stat st;
                if (stat(p->root_path, &st) < 0)
                        return nsbox_err(err, errno, "rootfs '%s'", p->root_path);
                if (!S_ISDIR(st.st_mode))
                        return nsbox_err(err, ENOTDIR, "rootfs '%s'", p->root_path);
        }
        int r = nsbox_net_check_host(p, err);
        if (r < 0)
                return r;
        const char *name = p->source ? p->source : "default";
        const char *slash = strrchr(name, '/');
        return nsbox_cgroup_check(&p->limits, slash ? slash + 1 : name, err);
}

/* ---- outside: the launcher ------------------------------------------------------------------ */

/* What step 1 works out for one start; the child takes its own copy across the clone. */
typedef struct launch {
        const nsbox_policy *p;
        char *const *argv;            /* run mode; NULL in serve mode */
        const int *stdio;
        nsbox_idmap map;
        nsbox_egress_set eg;
        nsbox_egress_rule *rules;     /* eg.v */
        char **hidden;                /* nsbox's runtime directories */
        int *bind_fds;                /* root-started: the id-mapped binds, one per mount, or NULL */
        int child_syncfd, child_protofd; /* the child's ends of sb's syncfd and agentfd */
        int specfd;                   /* serve mode: the agent's spec */
} launch;
#define LAUNCH_INIT(p_, argv_, stdio_) \
        { .p = (p_), .argv = (argv_), .stdio = (stdio_), .child_syncfd = -1, .child_protofd = -1, .specfd = -1 }

/* The launcher's copies of the child's ends: the child sees EOF when the launcher goes. */
static void launch_close_child_ends(launch *l)
{
        if (l->child_syncfd >= 0)
                close(l->child_syncfd);
        if (l->child_protofd >= 0)
                close(l->child_protofd);
        if (l->specfd >= 0)
                close(l->specfd);
        l->child_syncfd = l->child_protofd = l->specfd = -1;
        nsbox_idmapped_binds_close(l->bind_fds, l->p->n_mounts);
        l->bind_fds = NULL;
}

static void launch_release(launch *l)
{
        launch_close_child_ends(l);
        free(l->rules);
        strv_free(l->hidden);
}

/* fork semantics (no new stack), with a pidfd, and straight into the cgroup when there is one:
 * the limits hold from the child's first instruction, and its new cgroup namespace is rooted
 * there (so /proc/self/cgroup says 0::/ inside). */
static pid_t raw_clone(unsigned long flags, int exit_signal, int cgroupfd, int *pidfd)
{
        struct clone_args a = { .flags = flags | CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)pidfd, .exit_signal = (uint64_t)exit_signal };
        if (cgroupfd >= 0) {
                a.flags |= CLONE_INTO_CGROUP;
                a.cgroup = (uint64_t)cgroupfd;
        }
        pid_t pid = (pid_t)syscall(SYS_clone3, &a, sizeof(a));
        if (pid < 0 && errno == ENOSYS && cgroupfd < 0) /* clone3 filtered (some container runtimes) */
                pid = (pid_t)syscall(SYS_clone, flags | CLONE_PIDFD | (unsigned long)exit_signal, NULL, pidfd, NULL, 0);
        return pid;
}

/* A socketpair whose ends are above the standard fds even if the caller closed some: the
 * child closes everything from 3 up but its own ends. */
static int socketpair_above_stdio(int type, int sv[2])
{
        if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        for (int i = 0; i < 2; i++)
                if (sv[i] <= 2) {
                        int moved = fcntl(sv[i], F_DUPFD_CLOEXEC, 3);
                        if (moved < 0) {
                                int e = errno;
                                close(sv[0]);
                                close(sv[1]);
                                return -e;
                        }
                        close(sv[i]);
                        sv[i] = moved;
                }
        return 0;
}

/* 1, the launcher's part: what the child will need, worked out while nothing exists that would
 * need undoing, and with the launcher's own view of the host. */
static int launch_prepare(launch *l, nsbox_sandbox *sb, nsbox_error *err)
{
        const nsbox_policy *p = l->p;
        int r;
        /* Serve mode: the agent program (opened once, normally when the caller started). */
        if (!l->argv && (r = nsbox_agent_program_open(err)) < 0)
                return r;
        nsbox_idmap_for_caller(p->uid, p->gid, &l->map);
        if (l->map.privileged && p->host_id_base)
                l->map.host_uid = l->map.host_gid = p->host_id_base;
        l->eg.restricted = p->net == NET_NAT && p->egress_set;
        if (l->eg.restricted && (r = nsbox_egress_resolve(p, &l->rules, &l->eg.n, err)) < 0)
                return r;
        l->eg.v = l->rules;
        /* nsbox's sockets, which no bind may show: looked up by the launcher, with its rights */
        if ((r = nsbox_paths_runtime_dirs(&l->hidden)) < 0)
                return nsbox_err(err, -r, "nsbox's runtime directories");
        /* root-started: the binds id-mapped, which needs host root's CAP_SYS_ADMIN (a bind whose
         * filesystem cannot be id-mapped fails here, before anything exists) */
        if ((r = nsbox_idmapped_binds(p, &l->map, &l->bind_fds, err)) < 0)
                return r;
        int sv[2] = { -1, -1 }, av[2] = { -1, -1 };
        if ((r = socketpair_above_stdio(SOCK_SEQPACKET, sv)) < 0)
                return nsbox_err(err, -r, "create the sandbox's control channel");
        if (!l->argv && (r = socketpair_above_stdio(SOCK_STREAM, av)) < 0) {
                close(sv[0]);
                close(sv[1]);
                return nsbox_err(err, -r, "create the sandbox's protocol socket");
        }
        sb->syncfd = sv[0];
        sb->agentfd = av[0];
        l->child_syncfd = sv[1];
        l->child_protofd = av[1];
        sb->start_ns = now_ns();
        /* backend veth: the sandbox's addresses, before the clone, so that its init knows them */
        if (p->net == NET_NAT && p->net_backend == NET_BACKEND_VETH) {
                if ((r = nsbox_veth_reserve(&sb->net.veth, err)) < 0)
                        return r;
                l->eg.veth = &sb->net.veth;
        }
        /* Serve mode: what the agent program needs, for it to read after its exec. */
        if (!l->argv && (l->specfd = nsbox_agent_spec_memfd(p, &l->map, &l->eg, err)) < 0)
                return l->specfd;
        return 0;
}

/* 2, its first half: the cgroup and its limits, then the child cloned into it with new
 * namespaces, so that not one instruction of it runs outside its limits.  sb->pid is 0 in the
 * child. */
static int clone_child(const launch *l, const char *tag, nsbox_sandbox *sb, nsbox_error *err)
{
        int r;
        char tagbuf[32];
        static unsigned serial; /* atomic: starts may overlap, in threads */
        if (!tag) {
                snprintf(tagbuf, sizeof(tagbuf), "%u", __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
                tag = tagbuf;
        }
        if ((r = nsbox_cgroup_create(&l->p->limits, tag, !l->argv, &sb->cg, err)) < 0)
                return r;
        /* a root-started sandbox's user namespace is owned by its first host id: the per-user
         * counters are charged to it, not to root */
        nsbox_userns_owner owner;
        if ((r = nsbox_userns_owner_enter(&l->map, &owner)) < 0)
                return nsbox_err(err, -r, "make host id %u the owner of the sandbox's user namespace", (unsigned)l->map.host_uid);
        /* Serve mode: the agent is watched through its pidfd, not by its exit signal: none until
         * it executes nsbox-agent, and SIGCHLD after (the kernel's for every exec'd child). */
        /* in cgroup v1 the child joins its cgroups after the clone: its cgroup namespace, made
         * after step 2's go, then has them as its root, as cgroup2's has with CLONE_INTO_CGROUP */
        sb->pid = raw_clone(SANDBOX_CLONE_FLAGS & ~(sb->cg.v1 ? CLONE_NEWCGROUP : 0), l->argv ? SIGCHLD : 0, sb->cg.dirfd, &sb->pidfd);
        if (sb->pid != 0) /* the child has its own credentials, in its own user namespace */
                nsbox_userns_owner_leave(&owner);
        if (sb->pid < 0) {
                int e = errno;
                sb->pid = 0;
                if (sb->cg.dirfd >= 0 && (e == EACCES || e == ENOSYS || e == E2BIG || e == EBUSY || e == EOPNOTSUPP))
                        nsbox_err(err, e, "start the sandbox in cgroup %s (clone3 CLONE_INTO_CGROUP needs Linux 5.7)", sb->cg.path);
                if (err && err->msg)
                        return -e;
                return nsbox_err(err, 0, "cannot create user namespace: %s (%s)", strerror(e), nsbox_userns_hint(e));
        }
        /* cgroup v1's controllers (root on a hybrid host) have no CLONE_INTO_CGROUP: the child
         * joins them now, while it waits for the go of step 2 */
        if (sb->pid > 0 && (r = nsbox_cgroup_attach(&sb->cg, sb->pid, err)) < 0)
                return r;
        return 0;
}

/* Mode nat, outside: the namespaces slirp4netns joins, opened while the child waits (it turns
 * non-dumpable during its setup, which closes its /proc/PID/ns to us); backend veth: the pair
 * exists before the child configures its end at step 6. */
static int net_outside(const nsbox_policy *p, const launch *l, nsbox_sandbox *sb, int *userns_fd, int *netns_fd,
                       nsbox_error *err)
{
        if (p->net == NET_NAT) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)sb->pid);
                *userns_fd = open(path, O_RDONLY | O_CLOEXEC);
                snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->pid);
                *netns_fd = open(path, O_RDONLY | O_CLOEXEC);
                if (*userns_fd < 0 || *netns_fd < 0)
                        return nsbox_err(err, errno, "open the sandbox's namespaces for its network");
        }
        if (l->eg.veth)
                return nsbox_veth_create(&sb->net.veth, *netns_fd, err);
        return 0;
}

/* A start that failed before the child began its setup. */
static int launch_failed(launch *l, nsbox_sandbox *sb, int r)
{
        launch_close_child_ends(l);
        if (sb->syncfd >= 0)
                nsbox_sandbox_destroy(sb);
        return r;
}

/* A start that failed after the child began its setup: when the child failed first (its
 * error is on the channel, and our own failure, a broken pipe or slirp4netns losing its
 * namespaces, only follows from it), report the child's. */
static int start_failed(nsbox_sandbox *sb, int r, nsbox_error *err)
{
        /* 32 KiB: not on the stack, nor static: in-process creates may overlap, in threads */
        _cleanup_free_ nsbox_sync_msg *m = malloc(sizeof(*m));
        struct pollfd pfd = { .fd = sb->syncfd, .events = POLLIN };
        while (m && sb->syncfd >= 0 && poll(&pfd, 1, 0) == 1) {
                int fd = -1;
                if (nsbox_sync_recv_fd(sb->syncfd, m, &fd) != 1)
                        break;
                if (fd >= 0)
                        close(fd);
                if (m->type == SYNC_ERROR) {
                        nsbox_error_clear(err);
                        nsbox_err(err, 0, "%.1000s", (const char *)m->payload);
                        break;
                }
        }
        nsbox_sandbox_destroy(sb);
        return r;
}

static _Noreturn void child_main(const launch *l, const nsbox_sandbox *sb);

int nsbox_sandbox_start(const nsbox_policy *p, char *const argv[], const int stdio[3], const char *tag, nsbox_sandbox *ret,
                        nsbox_error *err)
{
        int r;
        _cleanup_(launch_release) launch l = LAUNCH_INIT(p, argv, stdio);
        nsbox_sandbox sb = NSBOX_SANDBOX_INIT;
        /* 1. The policy and options were validated whole by the caller, before this point; what
         * the child needs is worked out now, before anything exists. */
        if ((r = launch_prepare(&l, &sb, err)) < 0)
                return launch_failed(&l, &sb, r);
        /* 2. The cgroup, then new namespaces in it: the limits hold from the child's start. */
        if ((r = clone_child(&l, tag, &sb, err)) < 0)
                return launch_failed(&l, &sb, r);
        if (sb.pid == 0)
                child_main(&l, &sb);
        launch_close_child_ends(&l);
        /* 6, its outside part, while the child waits for its id maps */
        _cleanup_close_ int userns_fd = -1, netns_fd = -1;
        if ((r = net_outside(p, &l, &sb, &userns_fd, &netns_fd, err)) < 0) {
                nsbox_sandbox_destroy(&sb);
                return r;
        }
        /* 2, its end: the id maps, which only a process outside the namespace can write; the
         * child does nothing before this "go". */
        if ((r = nsbox_write_idmap(sb.pid, &l.map, err)) < 0 || (r = nsbox_sync_send(sb.syncfd, SYNC_GO, 0, NULL, 0)) < 0) {
                nsbox_err(err, -r, "start the sandbox");
                return start_failed(&sb, r, err); /* an agent that could not start says why */
        }
        /* 9, prepared here: the filter compiles while the child builds its root (the rules were
         * resolved and checked when the policy was parsed, so this fails only on exhaustion). */
        _cleanup_(nsbox_bpf_release) nsbox_bpf bpf = { 0 };
        if ((r = nsbox_seccomp_compile(p, &bpf, err)) < 0)
                return start_failed(&sb, r, err);
        /* 6, outside.  Mode nat: slirp4netns joins the child's namespaces and configures its tap device while
         * the child builds its root; the child runs nothing of the sandbox's before it has the
         * filter, so nothing runs before the network is up. */
        if ((r = nsbox_net_start(p, userns_fd, netns_fd, &sb.net, err)) < 0)
                return start_failed(&sb, r, err);
        if ((r = nsbox_sync_send(sb.syncfd, SYNC_SECCOMP, 0, bpf.insns, bpf.len * sizeof(struct sock_filter))) < 0) {
                nsbox_err(err, -r, "send the seccomp filter");
                return start_failed(&sb, r, err);
        }
        *ret = sb;
        return 0;
}

/* ---- inside: the child ---------------------------------------------------------------------- */

/* The clone()d child, still a copy of the launcher: in run mode it goes through every step
 * itself and becomes the sandbox's init; in serve mode it executes nsbox-agent after step 3's
 * sources, so that the agent holds nothing of the launcher's memory. */
static _Noreturn void child_main(const launch *l, const nsbox_sandbox *sb)
{
        const nsbox_policy *p = l->p;
        /* The caller's handlers and mask (a program embedding libnsbox may have any) are not the
         * agent's: pid 1 would run a handler for a signal sent from inside. */
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        close(sb->syncfd);
        if (sb->agentfd >= 0)
                close(sb->agentfd);
        nsbox_error cerr = { 0 };
        nsbox_sources src;
        if (l->argv) {
                for (int fd = 0; fd <= 2; fd++)
                        if (l->stdio && l->stdio[fd] >= 0 && dup2(l->stdio[fd], fd) < 0)
                                _exit(125);
                /* 8, the end of 2, 3, then the rest of 3 to 9, all here */
                if (nsbox_sandbox_child_prepare(p, l->hidden, l->bind_fds, l->child_syncfd, -1, true, sb->cg.v1 != 0, &src, &cerr) < 0 ||
                    nsbox_sandbox_child_setup(p, &l->map, &l->eg, &src, l->child_syncfd, -1, &cerr) < 0) {
                        nsbox_sync_send_error(l->child_syncfd, &cerr, "sandbox setup failed");
                        _exit(125);
                }
                nsbox_agent_config c = { .policy = p, .argv = l->argv, .syncfd = l->child_syncfd, .protofd = -1 };
                nsbox_agent_main(&c);
        }
        /* Serve mode: the agent's own streams lead nowhere (not to the daemon's log). */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd <= 2; fd++)
                if (null < 0 || dup2(null, fd) < 0)
                        _exit(125);
        /* The end of 2, then 3's sources, before the exec: a root-started child has host root's
         * rights on files (fsuid 0) only until it executes anything. */
        if (nsbox_sandbox_child_prepare(p, l->hidden, l->bind_fds, l->child_syncfd, l->child_protofd, false, sb->cg.v1 != 0, &src,
                                        &cerr) < 0) {
                nsbox_sync_send_error(l->child_syncfd, &cerr, "sandbox setup failed");
                _exit(125);
        }
        /* 8 (the exec closes every other fd), then nsbox-agent does the rest of 3 to 9 */
        nsbox_agent_exec(l->child_syncfd, l->child_protofd, l->specfd, &src, p->n_mounts, p->outlive_parent);
}

static int cmp_int(const void *a, const void *b)
{
        int x = *(const int *)a, y = *(const int *)b;
        return (x > y) - (x < y);
}

static void set_rlimit(int res, uint64_t v)
{
        struct rlimit rl;
        if (getrlimit(res, &rl) < 0)
                return;
        /* a user namespace cannot raise a hard limit: clamp to what the caller has */
        if (rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
                v = rl.rlim_max;
        rl.rlim_cur = rl.rlim_max = v;
        setrlimit(res, &rl);
}

int nsbox_sandbox_child_prepare(const nsbox_policy *p, char *const *hidden, int *bind_fds, int syncfd, int agentfd, bool close_fds,
                                bool cgroupns, nsbox_sources *ret, nsbox_error *err)
{
        static nsbox_sync_msg m; /* 32 KiB: not on the stack */
        *ret = (nsbox_sources){ .trees = NULL, .rootfs_fd = -1, .hides = NULL };
        /* The launcher's death kills us (step 10's promise); if it already died, the channel says
         * so (EOF). */
        if (!p->outlive_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return nsbox_err(err, errno, "set parent-death signal");
        /* 8. No fd of the caller's may reach the sandbox (runc CVE-2024-21626), nor be open while
         * we mount; in serve mode the exec of nsbox-agent closes them. */
        if (close_fds) {
                /* ours: the channels and the launcher's id-mapped binds */
                int keep[2 + NSBOX_MAX_MOUNTS];
                size_t n = 0;
                keep[n++] = syncfd;
                keep[n++] = agentfd;
                for (size_t i = 0; bind_fds && i < p->n_mounts && n < ARRAY_SIZE(keep); i++)
                        keep[n++] = bind_fds[i];
                qsort(keep, n, sizeof(keep[0]), cmp_int);
                nsbox_close_all_but(keep, n);
        }
        /* 2, its end: nothing is done in here before the launcher has written our id maps. */
        if (nsbox_sync_recv(syncfd, &m) != 1 || m.type != SYNC_GO)
                _exit(125); /* the launcher went away or gave up: nothing to report to */
        /* 2, cgroup v1: in our cgroups now, the cgroup namespace rooted at them */
        if (cgroupns && unshare(CLONE_NEWCGROUP) < 0)
                return nsbox_err(err, errno, "new cgroup namespace");
        /* 3. Private propagation, and what we take from the host, opened while a root-started
         * child still has host uid 0's rights on files (its fsuid: an exec would lose it). */
        return nsbox_prepare_sources(p, hidden, bind_fds, ret, err);
}

int nsbox_sandbox_child_setup(const nsbox_policy *p, const nsbox_idmap *map, const nsbox_egress_set *eg, nsbox_sources *src,
                              int syncfd, int agentfd, nsbox_error *err)
{
        static nsbox_sync_msg m; /* 32 KiB: not on the stack */
        int r = 0;
        /* 3, its end.  Root-started: we still carry host uid 0, which the map does not contain;
         * become the namespace's root (a host id of the unprivileged range) before creating any
         * file. */
        if (map->privileged && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
                r = nsbox_err(err, errno, "become root of the user namespace");
        /* 4-5. The new root, built from the sources alone, then entered: the host's is detached.
         * Serve mode: the supervisor gets the writable layer, for snapshots. */
        _cleanup_close_ int stage_fd = -1;
        if (r == 0)
                r = nsbox_setup_root(p, src, agentfd >= 0 ? &stage_fd : NULL, err);
        nsbox_sources_release(src);
        if (r < 0)
                return nsbox_err_wrap(err, r, "set up the sandbox root");
        if (stage_fd >= 0 && (r = nsbox_sync_send_fd(syncfd, SYNC_STAGE, stage_fd)) < 0)
                return nsbox_err(err, -r, "pass the writable layer to the supervisor");
        /* 6. Host name, loopback and the egress rules (while we hold CAP_NET_ADMIN over our
         * network namespace, which the sandbox never has), rlimits, and a session of our own so
         * that no host terminal is shared. */
        if (sethostname(p->hostname, strlen(p->hostname)) < 0)
                return nsbox_err(err, errno, "set host name");
        if ((r = nsbox_net_setup_inside(eg->veth, eg->v, eg->n, eg->restricted, err)) < 0)
                return nsbox_err_wrap(err, r, "set up the network");
        set_rlimit(RLIMIT_CORE, 0);
        nsbox_userns_limit_rlimits(); /* our share of the owner's per-user counters */
        set_rlimit(RLIMIT_NOFILE, p->limits.nofile ? p->limits.nofile : 1024);
        if (p->limits.fsize)
                set_rlimit(RLIMIT_FSIZE, p->limits.fsize);
        if (setsid() < 0)
                return nsbox_err(err, errno, "setsid");
        /* 7. The policy user, no capabilities, no new privileges, not dumpable (so no process of
         * the sandbox can open /proc/1/exe or /proc/1/mem: runc CVE-2019-5736). */
        if ((r = nsbox_drop_privileges(p->uid, p->gid, map->privileged, p->caps, err)) < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return nsbox_err(err, errno, "set no_new_privs");
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return nsbox_err(err, errno, "clear dumpable");
        /* the credential change cleared it */
        if (!p->outlive_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return nsbox_err(err, errno, "set parent-death signal");
        /* 9. seccomp last: init and the command it forks share the filter.  The launcher
         * compiled it while we were mounting. */
        if ((r = nsbox_sync_recv(syncfd, &m)) != 1 || m.type != SYNC_SECCOMP || m.len == 0 ||
            m.len % sizeof(struct sock_filter))
                _exit(125); /* the launcher went away or failed: it reports */
        nsbox_bpf bpf = { .insns = (struct sock_filter *)m.payload, .len = (unsigned short)(m.len / sizeof(struct sock_filter)) };
        if ((r = nsbox_seccomp_install(&bpf)) < 0)
                return nsbox_err(err, -r, "install seccomp filter");
        return 0;
}

/* ---- serve mode: the agent's readiness -------------------------------------------------- */

int nsbox_sandbox_read_ready(nsbox_sandbox *sb, nsbox_error *err)
{
        /* not static: in-process creates may overlap, in threads */
        _cleanup_free_ nsbox_sync_msg *m = malloc(sizeof(*m));
        if (!m)
                return nsbox_err(err, ENOMEM, "sandbox setup");
        int fd = -1;
        int r = nsbox_sync_recv_fd(sb->syncfd, m, &fd);
        if (r == 1 && m->type == SYNC_STAGE && fd >= 0 && sb->stagefd < 0) {
                sb->stagefd = fd;
                return 0;
        }
        if (fd >= 0)
                close(fd);
        if (r == 1 && m->type == SYNC_READY) {
                close(sb->syncfd);
                sb->syncfd = -1;
                return 1;
        }
        if (r == 1 && m->type == SYNC_ERROR)
                return nsbox_err(err, 0, "%.1000s", (const char *)m->payload);
        if (r == -EAGAIN)
                return 0;
        return nsbox_err(err, r < 0 ? -r : 0, "the sandbox's agent exited during setup");
}

int nsbox_sandbox_wait_ready(nsbox_sandbox *sb, int timeout_ms, nsbox_error *err)
{
        int r;
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
        for (;;) {
                uint64_t now = now_ns();
                if (now >= deadline)
                        return nsbox_err(err, ETIMEDOUT, "wait for the sandbox's agent");
                struct pollfd pfd = { .fd = sb->syncfd, .events = POLLIN };
                int n = poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1);
                if (n < 0 && errno != EINTR)
                        return nsbox_err(err, errno, "wait for the sandbox's agent");
                if (n > 0) {
                        r = nsbox_sandbox_read_ready(sb, err);
                        if (r != 0)
                                return r < 0 ? -EIO : 0;
                }
        }
}

/* ---- 10. teardown ------------------------------------------------------------------------ */

/* Reaped through its pidfd: never another child of the caller's, even when the caller (a
 * program using libnsbox) collected ours with waitpid(-1) and its pid was reused.  __WALL: a
 * serve-mode agent that died before its exec has no exit signal. */
static void kill_and_reap(int pidfd, pid_t pid)
{
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        int r;
        while ((r = waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL)) < 0 && errno == EINTR)
                ;
        if (r < 0 && errno == EINVAL) /* Linux before 5.4: no P_PIDFD */
                while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
                        ;
        if (r < 0 && errno == ECHILD) { /* adopted from a keeper: not our child; its parent reaps */
                struct pollfd p = { .fd = pidfd, .events = POLLIN };
                while (poll(&p, 1, 5000) < 0 && errno == EINTR)
                        ;
        }
}

void nsbox_sandbox_destroy(nsbox_sandbox *sb)
{
        nsbox_cgroup_kill(&sb->cg); /* all at once, frozen ones too */
        if (sb->pidfd >= 0 && sb->pid > 0)
                kill_and_reap(sb->pidfd, sb->pid);
        if (sb->pidfd >= 0)
                close(sb->pidfd);
        if (sb->syncfd >= 0)
                close(sb->syncfd);
        if (sb->agentfd >= 0)
                close(sb->agentfd);
        if (sb->stagefd >= 0)
                close(sb->stagefd);
        nsbox_net_stop(&sb->net);
        nsbox_cgroup_destroy(&sb->cg, 2000);
        *sb = (nsbox_sandbox)NSBOX_SANDBOX_INIT;
}

/* ---- freezing without a cgroup ---------------------------------------------------------------- */

#define FREEZE_MAX_PIDS 65536

typedef struct pidset {
        pid_t *v;
        size_t n, alloc;
        size_t max; /* 0: FREEZE_MAX_PIDS */
} pidset;

static bool pidset_has(const pidset *s, pid_t pid)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->v[i] == pid)
                        return true;
        return false;
}

static int pidset_add(pidset *s, pid_t pid)
{
        if (pidset_has(s, pid))
                return 0;
        if (s->n >= (s->max ? s->max : FREEZE_MAX_PIDS))
                return -E2BIG;
        if (s->n == s->alloc) {
                size_t na = s->alloc ? 2 * s->alloc : 64;
                pid_t *v = realloc(s->v, na * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->alloc = na;
        }
        s->v[s->n++] = pid;
        return 1;
}

/* Add the children of every thread of pid; >0 when some were new. */
static int add_children(pidset *s, pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        _cleanup_close_ int tfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tfd < 0)
                return 0; /* gone */
        DIR *d = fdopendir(tfd);
        if (!d)
                return -errno;
        tfd = -1;
        int added = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char rel[300], buf[4096];
                snprintf(rel, sizeof(rel), "%s/children", de->d_name);
                _cleanup_close_ int cfd = openat(dirfd(d), rel, O_RDONLY | O_CLOEXEC);
                ssize_t n = cfd >= 0 ? read_full(cfd, buf, sizeof(buf) - 1) : -1;
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                for (char *p = buf, *end; *p; p = end) {
                        long v = strtol(p, &end, 10);
                        if (end == p)
                                break;
                        int r = v > 0 ? pidset_add(s, (pid_t)v) : 0;
                        if (r < 0) {
                                closedir(d);
                                return r;
                        }
                        added += r;
                }
        }
        closedir(d);
        return added;
}

/* /proc/PID/FILE's text into buf (NUL-terminated); false when the process is gone. */
static bool proc_text(pid_t pid, const char *file, char *buf, size_t size)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read_full(fd, buf, size - 1) : -1;
        if (n <= 0)
                return false;
        buf[n] = '\0';
        return true;
}

/* The state letter of /proc/PID/stat, '?' when the process is gone. */
static char proc_state(pid_t pid)
{
        char buf[512];
        if (!proc_text(pid, "stat", buf, sizeof(buf)))
                return '?';
        const char *rp = strrchr(buf, ')');
        return rp && rp[1] == ' ' ? rp[2] : '?';
}

static bool has_stopped_child(pid_t pid)
{
        pidset c = { 0 };
        bool stopped = false;
        if (add_children(&c, pid) > 0)
                for (size_t i = 0; !stopped && i < c.n; i++) {
                        char st = proc_state(c.v[i]);
                        stopped = st == 'T' || st == 't';
                }
        free(c.v);
        return stopped;
}

static int signal_freeze(nsbox_sandbox *sb, bool freeze, int timeout_ms, nsbox_error *err)
{
        pidset s = { 0 };
        int r = pidset_add(&s, sb->pid);
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
        unsigned wait_us = 20;
        for (;;) {
                /* signal everything found so far, then look for children again until none is new
                 * and, when freezing, every one is stopped (a stopped process cannot fork) */
                for (size_t i = 0; r >= 0 && i < s.n; i++)
                        kill(s.v[i], freeze ? SIGSTOP : SIGCONT);
                int added = 0;
                for (size_t i = 0; r >= 0 && i < s.n; i++) {
                        int a = add_children(&s, s.v[i]);
                        if (a < 0)
                                r = a;
                        else
                                added += a;
                }
                if (r < 0)
                        break;
                bool settled = added == 0;
                for (size_t i = 0; settled && freeze && i < s.n; i++) {
                        char st = proc_state(s.v[i]);
                        /* a vfork parent waits in the kernel (D) for its stopped child: it cannot
                         * run before the child is continued */
                        settled = st == 'T' || st == 't' || st == 'Z' || st == 'X' || st == '?' || (st == 'D' && has_stopped_child(s.v[i]));
                }
                if (settled)
                        break;
                if (now_ns() >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                usleep(wait_us);
                wait_us = wait_us < 2000 ? wait_us * 2 : 2000;
        }
        /* a freeze that did not complete must not leave the sandbox half stopped */
        for (size_t i = 0; r < 0 && freeze && i < s.n; i++)
                kill(s.v[i], SIGCONT);
        free(s.v);
        if (r < 0)
                return nsbox_err(err, -r, "%s the sandbox's processes", freeze ? "stop" : "continue");
        return 0;
}

int nsbox_sandbox_freeze(nsbox_sandbox *sb, bool freeze, int timeout_ms, nsbox_error *err)
{
        if (nsbox_cgroup_can_freeze(&sb->cg))
                return nsbox_cgroup_freeze(&sb->cg, freeze, timeout_ms, err);
        if (sb->pid <= 0)
                return nsbox_err(err, ESRCH, "the sandbox is not running");
        return signal_freeze(sb, freeze, timeout_ms, err);
}

/* ---- usage without a cgroup (E2B's getMetrics) -------------------------------------------------- */

/* The walk reads two files a process and is quadratic in its set: bounded, a sandbox of more
 * processes than that is counted in part (its first ones, breadth first). */
#define USAGE_MAX_PIDS 256

void nsbox_sandbox_usage(const nsbox_sandbox *sb, uint64_t *rss_bytes, uint64_t *cpu_us)
{
        pidset s = { .max = USAGE_MAX_PIDS };
        unsigned long long pages = 0, ticks = 0;
        *rss_bytes = *cpu_us = 0;
        if (sb->pid <= 0 || pidset_add(&s, sb->pid) < 0)
                return;
        /* the init and its descendants, found breadth first (s grows while it is walked) until
         * the bound; then each one's figures: a process's cutime and cstime hold its reaped
         * children's, the init's every orphan's */
        for (size_t i = 0; i < s.n && add_children(&s, s.v[i]) >= 0; i++)
                ;
        for (size_t i = 0; i < s.n; i++) {
                char buf[1024];
                /* resident less file-backed and shared (statm's third): what the process holds of
                 * its own, not libc's pages that every one of them maps */
                unsigned long long size, resident, shared, ut, st, cut, cst;
                if (proc_text(s.v[i], "statm", buf, sizeof(buf)) && sscanf(buf, "%llu %llu %llu", &size, &resident, &shared) == 3 &&
                    resident > shared)
                        pages += resident - shared;
                const char *p = proc_text(s.v[i], "stat", buf, sizeof(buf)) ? strrchr(buf, ')') : NULL;
                if (p && sscanf(p, ") %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut, &st, &cut, &cst) == 4)
                        ticks += ut + st + cut + cst;
        }
        free(s.v);
        long pg = sysconf(_SC_PAGESIZE), hz = sysconf(_SC_CLK_TCK);
        *rss_bytes = pages * (uint64_t)(pg > 0 ? pg : 4096);
        *cpu_us = ticks * 1000000ull / (uint64_t)(hz > 0 ? hz : 100);
}

uint64_t nsbox_sandbox_disk_used(const nsbox_sandbox *sb)
{
        struct statfs sfs;
        if (sb->stagefd < 0 || fstatfs(sb->stagefd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC)
                return 0;
        return (uint64_t)(sfs.f_blocks - sfs.f_bfree) * (uint64_t)sfs.f_bsize;
}
