/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The launcher.  nsbox_run() is docs/security.md's setup order read top to bottom: validate (done by
 * the caller and nsbox_policy_check_host), compile the seccomp filter, clone into new
 * namespaces, write the id maps from outside, then the child builds its root, drops every
 * privilege and becomes the sandbox's pid 1, which starts the command and reports its status.
 * In serve mode (nsboxd, libnsbox in process) the child first executes nsbox-agent, which does
 * the same from step 3 on (agentexec.h): it holds nothing of the launcher's memory. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "agent.h"
#include "agentexec.h"
#include "caps.h"
#include "mounts.h"
#include "net.h"
#include "paths.h"
#include "seccomp.h"
#include "sync.h"
#include "userns.h"
#include "util.h"

#define SANDBOX_CLONE_FLAGS \
        (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

extern char **environ;

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

/* ---- inside the sandbox ------------------------------------------------------------------ */

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

static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define TIMEOUT_GRACE_MS 2000 /* after the agent was told to kill the command: kill the agent */

static void forwarded_set(sigset_t *set)
{
        sigemptyset(set);
        for (size_t i = 0; i < ARRAY_SIZE(forwarded_signals); i++)
                sigaddset(set, forwarded_signals[i]);
}

int nsbox_sandbox_child_prepare(const nsbox_policy *p, char *const *hidden, int syncfd, int agentfd, bool close_fds,
                                nsbox_sources *ret, nsbox_error *err)
{
        static nsbox_sync_msg m; /* 32 KiB: not on the stack */
        *ret = (nsbox_sources){ .trees = NULL, .rootfs_fd = -1, .hides = NULL };
        /* The parent's death kills us; if it already died, the channel says so (EOF). */
        if (!p->outlive_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return nsbox_err(err, errno, "set parent-death signal");
        /* No fd of the caller's may reach the sandbox (runc CVE-2024-21626); in serve mode the
         * exec of nsbox-agent closes them. */
        if (close_fds) {
                int keep[2] = { syncfd < agentfd || agentfd < 0 ? syncfd : agentfd, syncfd < agentfd || agentfd < 0 ? agentfd : syncfd };
                nsbox_close_all_but(keep, 2);
        }
        if (nsbox_sync_recv(syncfd, &m) != 1 || m.type != SYNC_GO)
                _exit(125); /* the launcher went away or gave up: nothing to report to */
        /* 3. Private propagation, and what we take from the host, opened while a root-started
         * child still has host uid 0's rights on files (its fsuid: an exec would lose it). */
        return nsbox_prepare_sources(p, hidden, ret, err);
}

int nsbox_sandbox_child_setup(const nsbox_policy *p, const nsbox_idmap *map, const nsbox_egress_set *eg, nsbox_sources *src,
                              int syncfd, int agentfd, nsbox_error *err)
{
        static nsbox_sync_msg m; /* 32 KiB: not on the stack */
        int r = 0;
        /* Root-started: we still carry host uid 0, which the map does not contain; become the
         * namespace's root (a host id of the unprivileged range) before creating any file. */
        if (map->privileged && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
                r = nsbox_err(err, errno, "become root of the user namespace");
        /* 4-5. Mounts, the new root, pivot_root, the workdir. */
        /* serve mode: the supervisor gets the writable layer, for snapshots */
        _cleanup_close_ int stage_fd = -1;
        if (r == 0)
                r = nsbox_setup_root(p, src, agentfd >= 0 ? &stage_fd : NULL, err);
        nsbox_sources_release(src);
        if (r < 0)
                return nsbox_err_wrap(err, r, "set up the sandbox root");
        if (stage_fd >= 0 && (r = nsbox_sync_send_fd(syncfd, SYNC_STAGE, stage_fd)) < 0)
                return nsbox_err(err, -r, "pass the writable layer to the supervisor");
        /* 6. Host name, loopback and the egress rules (while we hold CAP_NET_ADMIN over our
         * network namespace, which the sandbox never has), rlimits. */
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

/* ---- outside: the supervisor ------------------------------------------------------------- */

/* A file given as standard input or output (`< file`, `> file`) could be reopened through
 * /proc/self/fd by the sandbox user, who owns it when nsbox runs unprivileged: read-only would
 * become read-write.  Such an fd is replaced by a pipe, fed or drained outside the sandbox by a
 * copier process.  Terminals, pipes and sockets are passed as they are. */
typedef struct stdio_proxy {
        pid_t copier[3];
        int sandbox_end[3]; /* the pipe end the sandbox gets as fd 0, 1 or 2, or -1 */
} stdio_proxy;

/* Standard input: splice from the file.  Standard output and error: read and write, never
 * splice: splice(2) takes the file's offset before it waits for the pipe and stores it back after,
 * undoing what nsbox itself wrote to the same open file meanwhile (its warnings, --json). */
static void copy_until_eof(int in, int out, bool use_splice)
{
        for (;;) {
                ssize_t n = use_splice ? splice(in, NULL, out, NULL, 1 << 20, SPLICE_F_MOVE) : -1;
                if (n < 0 && use_splice && errno == EINVAL)
                        use_splice = false; /* a file system without splice */
                else if (n < 0 && use_splice && errno == EINTR)
                        continue;
                else if (use_splice) {
                        if (n <= 0)
                                return;
                        continue;
                }
                if (!use_splice) {
                        char buf[65536];
                        n = read(in, buf, sizeof(buf));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0 || write_full(out, buf, (size_t)n) < 0)
                                return;
                }
        }
}

/* `> file 2>&1`: fds 1 and 2 share one open file (and its offset). */
static bool same_open_file(int a, int b)
{
        long r = syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, a, b);
        if (r >= 0)
                return r == 0;
        struct stat sa, sb;
        return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
               lseek(a, 0, SEEK_CUR) == lseek(b, 0, SEEK_CUR) && fcntl(a, F_GETFL) == fcntl(b, F_GETFL);
}

static int proxy_stdio(stdio_proxy *px, nsbox_error *err)
{
        for (int fd = 0; fd <= 2; fd++) {
                px->copier[fd] = 0;
                px->sandbox_end[fd] = -1;
                struct stat st;
                if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode)))
                        continue;
                /* one pipe and one copier for both: two copiers would race on the shared offset
                 * and overwrite each other's output */
                if (fd == 2 && px->sandbox_end[1] >= 0 && same_open_file(1, 2)) {
                        if ((px->sandbox_end[2] = fcntl(px->sandbox_end[1], F_DUPFD_CLOEXEC, 3)) < 0)
                                return nsbox_err(err, errno, "pipe for standard error");
                        continue;
                }
                int p[2];
                if (pipe2(p, O_CLOEXEC) < 0)
                        return nsbox_err(err, errno, "pipe for standard %s", fd ? "output" : "input");
                pid_t pid = fork();
                if (pid < 0) {
                        close(p[0]);
                        close(p[1]);
                        return nsbox_err(err, errno, "fork a copier for standard %s", fd ? "output" : "input");
                }
                if (pid == 0) {
                        /* only its two ends: another copy of a pipe end would keep EOF away */
                        int in = fd == 0 ? 0 : p[0], out = fd == 0 ? p[1] : fd;
                        int keep_lo = in < out ? in : out, keep_hi = in < out ? out : in;
                        for (int i = 0; i <= 2; i++)
                                if (i != in && i != out)
                                        close(i);
                        syscall(SYS_close_range, 3, keep_lo - 1 >= 3 ? keep_lo - 1 : 2, 0);
                        if (keep_hi - keep_lo > 1)
                                syscall(SYS_close_range, keep_lo + 1, keep_hi - 1, 0);
                        syscall(SYS_close_range, keep_hi + 1, ~0u, 0);
                        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                        signal(SIGPIPE, SIG_DFL);
                        copy_until_eof(in, out, fd == 0);
                        _exit(0);
                }
                px->copier[fd] = pid;
                close(p[fd == 0 ? 1 : 0]);
                px->sandbox_end[fd] = p[fd == 0 ? 0 : 1];
        }
        return 0;
}

/* Close our ends; wait until the output copiers have written everything (the sandbox is gone
 * or going, so they reach EOF); input left unread is of no use to anyone. */
static void proxy_finish(stdio_proxy *px)
{
        for (int fd = 0; fd <= 2; fd++) {
                if (px->sandbox_end[fd] >= 0)
                        close(px->sandbox_end[fd]);
                px->sandbox_end[fd] = -1;
        }
        for (int fd = 0; fd <= 2; fd++) {
                if (px->copier[fd] <= 0)
                        continue;
                if (fd == 0)
                        kill(px->copier[fd], SIGKILL);
                while (waitpid(px->copier[fd], NULL, 0) < 0 && errno == EINTR)
                        ;
                px->copier[fd] = 0;
        }
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

int nsbox_sandbox_start(const nsbox_policy *p, char *const argv[], const int stdio[3], const char *tag, nsbox_sandbox *ret,
                        nsbox_error *err)
{
        int r;
        _cleanup_(nsbox_bpf_release) nsbox_bpf bpf = { 0 };
        /* 1. The policy and options were validated whole by the caller, before this point.
         * Serve mode: the agent program (opened once, normally when the caller started). */
        if (!argv && (r = nsbox_agent_program_open(err)) < 0)
                return r;
        nsbox_idmap map;
        nsbox_idmap_for_caller(p->uid, p->gid, &map);
        if (map.privileged && p->host_id_base)
                map.host_uid = map.host_gid = p->host_id_base;
        _cleanup_free_ nsbox_egress_rule *rules = NULL;
        nsbox_egress_set eg = { .restricted = p->net == NET_NAT && p->egress_set };
        if (eg.restricted && (r = nsbox_egress_resolve(p, &rules, &eg.n, err)) < 0)
                return r;
        eg.v = rules;
        /* nsbox's sockets, which no bind may show: looked up by the launcher, with its rights */
        _cleanup_strv_ char **hidden = NULL;
        if ((r = nsbox_paths_runtime_dirs(&hidden)) < 0)
                return nsbox_err(err, -r, "nsbox's runtime directories");
        int sv[2] = { -1, -1 }, av[2] = { -1, -1 };
        if ((r = socketpair_above_stdio(SOCK_SEQPACKET, sv)) < 0)
                return nsbox_err(err, -r, "create the sandbox's control channel");
        if (!argv && (r = socketpair_above_stdio(SOCK_STREAM, av)) < 0) {
                close(sv[0]);
                close(sv[1]);
                return nsbox_err(err, -r, "create the sandbox's protocol socket");
        }
        nsbox_sandbox sb = NSBOX_SANDBOX_INIT;
        sb.syncfd = sv[0];
        sb.agentfd = av[0];
        sb.start_ns = now_ns();
        /* backend veth: the sandbox's addresses, before the clone, so that its init knows them */
        if (p->net == NET_NAT && p->net_backend == NET_BACKEND_VETH) {
                if ((r = nsbox_veth_reserve(&sb.net.veth, err)) < 0) {
                        close(sv[1]);
                        if (av[1] >= 0)
                                close(av[1]);
                        nsbox_sandbox_destroy(&sb);
                        return r;
                }
                eg.veth = &sb.net.veth;
        }
        /* Serve mode: what the agent program needs, for it to read after its exec. */
        _cleanup_close_ int specfd = -1;
        if (!argv && (specfd = nsbox_agent_spec_memfd(p, &map, &eg, err)) < 0) {
                r = specfd;
                close(sv[1]);
                close(av[1]);
                nsbox_sandbox_destroy(&sb);
                return r;
        }
        /* 2. The cgroup and its limits, then new namespaces in it; the child waits for its id maps. */
        char tagbuf[32];
        static unsigned serial; /* atomic: starts may overlap, in threads */
        if (!tag) {
                snprintf(tagbuf, sizeof(tagbuf), "%u", __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
                tag = tagbuf;
        }
        if ((r = nsbox_cgroup_create(&p->limits, tag, &sb.cg, err)) < 0) {
                close(sv[1]);
                if (av[1] >= 0)
                        close(av[1]);
                nsbox_sandbox_destroy(&sb);
                return r;
        }
        nsbox_userns_owner owner;
        if ((r = nsbox_userns_owner_enter(&map, &owner)) < 0) {
                close(sv[1]);
                if (av[1] >= 0)
                        close(av[1]);
                nsbox_sandbox_destroy(&sb);
                return nsbox_err(err, -r, "make host id %u the owner of the sandbox's user namespace", (unsigned)map.host_uid);
        }
        /* Serve mode: the agent is watched through its pidfd, not by its exit signal: none until
         * it executes nsbox-agent, and SIGCHLD after (the kernel's for every exec'd child). */
        sb.pid = raw_clone(SANDBOX_CLONE_FLAGS, argv ? SIGCHLD : 0, sb.cg.dirfd, &sb.pidfd);
        if (sb.pid != 0) /* the child has its own credentials, in its own user namespace */
                nsbox_userns_owner_leave(&owner);
        if (sb.pid < 0) {
                int e = errno;
                bool in_cg = sb.cg.dirfd >= 0;
                close(sv[1]);
                if (av[1] >= 0)
                        close(av[1]);
                sb.pid = 0;
                if (in_cg && (e == EACCES || e == ENOSYS || e == E2BIG || e == EBUSY || e == EOPNOTSUPP))
                        nsbox_err(err, e, "start the sandbox in cgroup %s (clone3 CLONE_INTO_CGROUP needs Linux 5.7)", sb.cg.path);
                nsbox_sandbox_destroy(&sb);
                if (err && err->msg)
                        return -e;
                return nsbox_err(err, 0, "cannot create user namespace: %s (%s)", strerror(e), nsbox_userns_hint(e));
        }
        if (sb.pid == 0) {
                /* The caller's handlers and mask (a program embedding libnsbox may have any) are
                 * not the agent's: pid 1 would run a handler for a signal sent from inside. */
                for (int sig = 1; sig < NSIG; sig++)
                        if (sig != SIGKILL && sig != SIGSTOP)
                                signal(sig, SIG_DFL);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                close(sv[0]);
                if (av[0] >= 0)
                        close(av[0]);
                if (argv) {
                        for (int fd = 0; fd <= 2; fd++)
                                if (stdio && stdio[fd] >= 0 && dup2(stdio[fd], fd) < 0)
                                        _exit(125);
                        nsbox_error cerr = { 0 };
                        nsbox_sources src;
                        if (nsbox_sandbox_child_prepare(p, hidden, sv[1], -1, true, &src, &cerr) < 0 ||
                            nsbox_sandbox_child_setup(p, &map, &eg, &src, sv[1], -1, &cerr) < 0) {
                                nsbox_sync_send_error(sv[1], &cerr, "sandbox setup failed");
                                _exit(125);
                        }
                        nsbox_agent_config c = { .policy = p, .argv = argv, .syncfd = sv[1], .protofd = -1 };
                        nsbox_agent_main(&c);
                }
                /* Serve mode: the agent's own streams lead nowhere (not to the daemon's log), and
                 * it starts afresh from nsbox-agent, holding nothing of ours but step 3's sources. */
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                for (int fd = 0; fd <= 2; fd++)
                        if (null < 0 || dup2(null, fd) < 0)
                                _exit(125);
                /* Step 3's sources are opened here, before the exec: a root-started child has
                 * host root's rights on files (fsuid 0) only until it executes anything. */
                nsbox_error cerr = { 0 };
                nsbox_sources src;
                if (nsbox_sandbox_child_prepare(p, hidden, sv[1], av[1], false, &src, &cerr) < 0) {
                        nsbox_sync_send_error(sv[1], &cerr, "sandbox setup failed");
                        _exit(125);
                }
                nsbox_agent_exec(sv[1], av[1], specfd, &src, p->n_mounts, p->outlive_parent);
        }
        close(sv[1]);
        if (av[1] >= 0)
                close(av[1]);
        if (specfd >= 0)
                close(steal_fd(&specfd));
        /* mode nat: the namespaces slirp4netns joins, opened while the child waits (it turns
         * non-dumpable during its setup, which closes its /proc/PID/ns to us) */
        _cleanup_close_ int userns_fd = -1, netns_fd = -1;
        if (p->net == NET_NAT) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)sb.pid);
                userns_fd = open(path, O_RDONLY | O_CLOEXEC);
                snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb.pid);
                netns_fd = open(path, O_RDONLY | O_CLOEXEC);
                if (userns_fd < 0 || netns_fd < 0) {
                        r = nsbox_err(err, errno, "open the sandbox's namespaces for its network");
                        nsbox_sandbox_destroy(&sb);
                        return r;
                }
        }
        /* backend veth: the pair exists before the child configures its end at step 6 */
        if (eg.veth && (r = nsbox_veth_create(&sb.net.veth, netns_fd, err)) < 0) {
                nsbox_sandbox_destroy(&sb);
                return r;
        }
        if ((r = nsbox_write_idmap(sb.pid, &map, err)) < 0 || (r = nsbox_sync_send(sb.syncfd, SYNC_GO, 0, NULL, 0)) < 0) {
                nsbox_err(err, -r, "start the sandbox");
                return start_failed(&sb, r, err); /* an agent that could not start says why */
        }
        /* 9, prepared here: the filter compiles while the child builds its root (the rules were
         * resolved and checked when the policy was parsed, so this fails only on exhaustion). */
        if ((r = nsbox_seccomp_compile(p, &bpf, err)) < 0)
                return start_failed(&sb, r, err);
        /* Mode nat: slirp4netns joins the child's namespaces and configures its tap device while
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

/* ---- freezing without a cgroup ---------------------------------------------------------------- */

#define FREEZE_MAX_PIDS 65536

typedef struct pidset {
        pid_t *v;
        size_t n, alloc;
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
        if (s->n >= FREEZE_MAX_PIDS)
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

/* The state letter of /proc/PID/stat, '?' when the process is gone. */
static char proc_state(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read_full(fd, buf, sizeof(buf) - 1) : -1;
        if (n <= 0)
                return '?';
        buf[n] = '\0';
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
        if (sb->cg.dirfd >= 0)
                return nsbox_cgroup_freeze(&sb->cg, freeze, timeout_ms, err);
        if (sb->pid <= 0)
                return nsbox_err(err, ESRCH, "the sandbox is not running");
        return signal_freeze(sb, freeze, timeout_ms, err);
}

typedef struct supervise_state {
        int status_msg;  /* SYNC_EXIT value, when has_exit */
        bool has_exit;
        bool has_error;
        int error_status;
        char error_text[1024];
        nsbox_sync_usage usage;
} supervise_state;

static void take_message(supervise_state *s, const nsbox_sync_msg *m)
{
        if (m->type == SYNC_EXIT) {
                s->has_exit = true;
                s->status_msg = m->value;
                if (m->len == sizeof(s->usage))
                        memcpy(&s->usage, m->payload, sizeof(s->usage));
        } else if (m->type == SYNC_ERROR && !s->has_error) {
                s->has_error = true;
                s->error_status = m->value >= 1 && m->value <= 255 ? m->value : 125;
                snprintf(s->error_text, sizeof(s->error_text), "%.1000s", (const char *)m->payload);
        }
}


int nsbox_run(const nsbox_policy *p, char *const argv[], unsigned flags, nsbox_result *res, nsbox_error *err)
{
        int r;
        sigset_t fwd, old;
        forwarded_set(&fwd);
        sigprocmask(SIG_BLOCK, &fwd, &old);
        _cleanup_close_ int sigfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
        stdio_proxy proxy = { .sandbox_end = { -1, -1, -1 } };
        nsbox_sandbox sb = NSBOX_SANDBOX_INIT;
        if (sigfd < 0) {
                r = nsbox_err(err, errno, "signalfd");
                goto out;
        }
        if ((r = proxy_stdio(&proxy, err)) < 0)
                goto out;
        if ((r = nsbox_sandbox_start(p, argv, proxy.sandbox_end, NULL, &sb, err)) < 0)
                goto out;
        for (int fd = 0; fd <= 2; fd++)
                if (proxy.sandbox_end[fd] >= 0) {
                        close(proxy.sandbox_end[fd]);
                        proxy.sandbox_end[fd] = -1;
                }
        uint64_t start = sb.start_ns;
        int pidfd = sb.pidfd, syncfd = sb.syncfd;
        pid_t pid = sb.pid;

        /* Supervise: forward signals, enforce the timeout, collect the init's messages. */
        supervise_state st = { 0 };
        bool timed_out = false, sync_open = true;
        unsigned terminate_requests = 0;
        uint64_t deadline = p->limits.timeout_ms ? start + p->limits.timeout_ms * 1000000ull : 0;
        uint64_t hard_deadline = 0;
        for (;;) {
                struct pollfd pfd[3] = { { .fd = pidfd, .events = POLLIN },
                                         { .fd = sigfd, .events = POLLIN },
                                         { .fd = sync_open ? syncfd : -1, .events = POLLIN } };
                int wait_ms = -1;
                uint64_t next = !timed_out ? deadline : hard_deadline;
                if (next) {
                        uint64_t now = now_ns();
                        wait_ms = now >= next ? 0 : (int)((next - now + 999999) / 1000000);
                }
                int n = poll(pfd, 3, wait_ms);
                if (n < 0 && errno != EINTR) {
                        r = nsbox_err(err, errno, "poll");
                        goto out;
                }
                if (deadline && !timed_out && now_ns() >= deadline) {
                        /* init kills the command's group and reports its usage; when init exits
                         * the kernel kills everything else in the pid namespace */
                        timed_out = true;
                        hard_deadline = now_ns() + TIMEOUT_GRACE_MS * 1000000ull;
                        syscall(SYS_pidfd_send_signal, pidfd, NSBOX_SIG_KILL_COMMAND, NULL, 0);
                } else if (hard_deadline && now_ns() >= hard_deadline) {
                        hard_deadline = 0;
                        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                }
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                                bool terminating = si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM;
                                /* the first is the command's to handle; a second one means the
                                 * caller wants it gone, even if it (or a broken policy) ignores it */
                                int sig = terminating && ++terminate_requests > 1 ? SIGKILL : (int)si.ssi_signo;
                                syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
                        }
                }
                if (sync_open && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                        static nsbox_sync_msg m;
                        if (nsbox_sync_recv(syncfd, &m) == 1)
                                take_message(&st, &m);
                        else
                                sync_open = false;
                }
                /* init has reported and is exiting; the kernel is already killing whatever else
                 * is left in its pid namespace.  bwrap returns here too. */
                if ((st.has_exit || st.has_error) && (flags & NSBOX_RUN_RETURN_AT_EXIT))
                        break;
                if (pfd[0].revents & POLLIN)
                        break;
        }
        /* slirp4netns: told to exit now.  Its exit takes the kernel some 20 ms; with published
         * ports (or for a caller that stays, which must not collect zombies), destroy waits for
         * it, so that the ports are free when we return; else it finishes on its own and the
         * orphan is reaped by whoever adopts it. */
        if (sb.net.pid > 0 && p->n_publish == 0 && (flags & NSBOX_RUN_RETURN_AT_EXIT))
                nsbox_net_detach(&sb.net);
        else if (sb.net.exitfd >= 0) {
                close(sb.net.exitfd);
                sb.net.exitfd = -1;
        }
        bool reaped = false;
        int wstatus = 0;
        struct rusage init_ru = { 0 };
        if (!((st.has_exit || st.has_error) && (flags & NSBOX_RUN_RETURN_AT_EXIT))) {
                while (wait4(pid, &wstatus, 0, &init_ru) < 0 && errno == EINTR)
                        ;
                reaped = true;
        }
        sb.pid = 0; /* reaped, or exiting and not to be waited for */
        while (sync_open && reaped) { /* what init said just before it exited */
                static nsbox_sync_msg m;
                struct pollfd one = { .fd = syncfd, .events = POLLIN };
                if (poll(&one, 1, 0) <= 0 || nsbox_sync_recv(syncfd, &m) != 1)
                        break;
                take_message(&st, &m);
        }

        *res = (nsbox_result){ .exit_code = -1 };
        res->wall_us = (now_ns() - start) / 1000;
        if (!st.has_exit && reaped) {
                /* killed before it could report (timeout, kill): init's own and reaped children's */
                st.usage.user_us = (uint64_t)init_ru.ru_utime.tv_sec * 1000000 + (uint64_t)init_ru.ru_utime.tv_usec;
                st.usage.sys_us = (uint64_t)init_ru.ru_stime.tv_sec * 1000000 + (uint64_t)init_ru.ru_stime.tv_usec;
                st.usage.maxrss_kb = (uint64_t)init_ru.ru_maxrss;
        }
        res->user_us = st.usage.user_us;
        res->sys_us = st.usage.sys_us;
        res->max_rss_bytes = st.usage.maxrss_kb * 1024;
        nsbox_cgroup_stats cs;
        if (nsbox_cgroup_stats_read(&sb.cg, &cs) == 0) {
                /* the whole sandbox, orphans and the agent included */
                snprintf(res->cgroup, sizeof(res->cgroup), "%s", sb.cg.path);
                if (cs.cpu_user_us + cs.cpu_system_us > 0) {
                        res->user_us = cs.cpu_user_us;
                        res->sys_us = cs.cpu_system_us;
                }
                if (cs.has_memory)
                        res->max_rss_bytes = cs.memory_peak;
                res->oom_killed = cs.oom_kills > 0;
                res->pids_limited = cs.pids_limited > 0;
        }
        if (timed_out) {
                res->timed_out = true;
                res->signal = SIGKILL;
                res->status = 124;
        } else if (st.has_error) {
                err->exit_status = st.error_status;
                r = nsbox_err(err, 0, "%s", st.error_text);
                goto out;
        } else if (st.has_exit) {
                if (WIFEXITED(st.status_msg)) {
                        res->exit_code = WEXITSTATUS(st.status_msg);
                        res->status = res->exit_code;
                } else {
                        res->signal = WTERMSIG(st.status_msg);
                        res->status = 128 + res->signal;
                }
        } else if (WIFSIGNALED(wstatus)) {
                /* init itself was killed from outside (kill -9 of the sandbox, or the OOM killer) */
                res->signal = WTERMSIG(wstatus);
                res->status = 128 + res->signal;
        } else {
                r = nsbox_err(err, 0, "sandbox init exited with status %d without reporting the command's", WEXITSTATUS(wstatus));
                goto out;
        }
        r = 0;
out:
        nsbox_sandbox_destroy(&sb);
        proxy_finish(&proxy);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}
