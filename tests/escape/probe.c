/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The escape probe: `probe ATTACK [ARG...]` performs one attack from inside a sandbox with raw
 * system calls and prints one line, `attack ATTACK: refused: ...` or `attack ATTACK: SUCCEEDED:
 * ...` (every attempt it made, with the kernel's answer).  Exit status: 0 the sandbox held (every
 * attempt failed), 1 the attack succeeded (an escape, or a protection that docs/security.md requires
 * is missing), 2 bad usage or an attack this probe refuses to run here.  `probe list` prints the
 * attack names.
 *
 * Some attacks change host state when they succeed (mount, kexec, module loading, writes under /
 * and /proc/sys, signals to pid 1...).  They are marked DESTRUCTIVE and the probe refuses them
 * (status 2) when it holds capabilities in the initial user namespace, i.e. when it was started
 * as root on the host rather than in a sandbox; in a user namespace of its own (`unshare -Urm`)
 * they only touch that namespace.  The rest are harmless anywhere: they either only query, or
 * change nothing but the probe's own process (its keyrings, personality, credentials), or use
 * arguments that the kernel rejects right after its permission check (kexec_load with too many
 * segments, init_module of an empty image, process_vm_readv of an unmapped address), so that
 * "got past the permission check" is seen without doing anything. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/if_alg.h>
#include <linux/if_ether.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/tiocl.h>
#include <linux/userfaultfd.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#define X32_SYSCALL_BIT 0x40000000L
#define HIGH_BITS 0xffffffff00000000UL
#define ONE_HIGH_BIT 0x100000000UL

/* ---- the result line ---------------------------------------------------------------------- */

static char line[16384];
static size_t line_len;
static bool escaped;

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
        if (line_len + 3 >= sizeof(line))
                return;
        if (line_len) {
                memcpy(line + line_len, "; ", 3);
                line_len += 2;
        }
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(line + line_len, sizeof(line) - line_len, fmt, ap);
        va_end(ap);
        if (n > 0)
                line_len = line_len + (size_t)n < sizeof(line) ? line_len + (size_t)n : sizeof(line) - 1;
}

/* The attack worked: say so (and why it matters). */
__attribute__((format(printf, 1, 2))) static void breach(const char *fmt, ...)
{
        char buf[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        escaped = true;
        note("%s", buf);
}

/* r < 0 (errno e): refused, whatever the reason; otherwise the operation succeeded. */
static void expect_fail(const char *what, long r, int e)
{
        if (r < 0)
                note("%s: %s", what, strerror(e));
        else
                breach("%s SUCCEEDED (returned %ld)", what, r);
}

/* Refused at the permission check (EPERM/EACCES) or absent from this kernel (ENOSYS); any other
 * error means the arguments were looked at, i.e. the caller was allowed. */
static void expect_denied(const char *what, long r, int e)
{
        if (r < 0 && (e == EPERM || e == EACCES || e == ENOSYS))
                note("%s: %s", what, strerror(e));
        else if (r < 0)
                breach("%s got past the permission check (%s)", what, strerror(e));
        else
                breach("%s SUCCEEDED (returned %ld)", what, r);
}

/* The policy answers ENOSYS (so that libcs fall back); any other answer reached the kernel. */
static void expect_enosys(const char *what, long r, int e)
{
        if (r < 0 && e == ENOSYS)
                note("%s: %s", what, strerror(e));
        else if (r < 0)
                breach("%s reached the kernel (%s, expected ENOSYS from the filter)", what, strerror(e));
        else
                breach("%s SUCCEEDED (returned %ld, expected ENOSYS from the filter)", what, r);
}

/* Refused by the seccomp filter: EPERM.  Any other error means the call reached the kernel. */
static void expect_eperm(const char *what, long r, int e)
{
        if (r < 0 && e == EPERM)
                note("%s: %s", what, strerror(e));
        else if (r < 0)
                breach("%s was not filtered (reached the kernel: %s)", what, strerror(e));
        else
                breach("%s SUCCEEDED (returned %ld)", what, r);
}

#define CALL(expr) ({ errno = 0; long r_ = (long)(expr); e = errno; r_; })

/* ---- helpers ------------------------------------------------------------------------------ */

static int read_small(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int e = errno;
        close(fd);
        if (n < 0)
                return -e;
        buf[n] = '\0';
        return (int)n;
}

/* The value of KEY in /proc/self/status, or NULL. */
static const char *status_field(const char *key, char *out, size_t size)
{
        static char st[8192];
        if (read_small("/proc/self/status", st, sizeof(st)) < 0)
                return NULL;
        size_t klen = strlen(key);
        for (char *l = st; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                if (!strncmp(l, key, klen) && l[klen] == ':') {
                        const char *v = l + klen + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        size_t n = strcspn(v, "\n");
                        if (n >= size)
                                n = size - 1;
                        memcpy(out, v, n);
                        out[n] = '\0';
                        return out;
                }
        }
        return NULL;
}

/* Destructive attacks are not run by a process that is, or acts with the rights of, the host's
 * root: one with capabilities in the initial user namespace (the identity uid map), or one whose
 * uid is host uid 0 seen through its user namespace's map (`unshare -Ur` started by root). */
static bool host_privileged(void)
{
        char map[4096], capeff[64];
        if (read_small("/proc/self/uid_map", map, sizeof(map)) < 0)
                return true; /* cannot tell: assume the worst */
        uid_t uid = getuid();
        bool identity = false;
        for (char *l = map; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                unsigned long in, out, count;
                if (sscanf(l, "%lu %lu %lu", &in, &out, &count) != 3)
                        return true;
                if (in == 0 && out == 0 && count == 4294967295ul)
                        identity = true;
                if (uid >= in && uid - in < count && out + (uid - in) == 0)
                        return true;
        }
        if (!identity)
                return false;
        if (!status_field("CapEff", capeff, sizeof(capeff)))
                return true;
        return strtoull(capeff, NULL, 16) != 0;
}

typedef struct {
        bool ran;    /* the child reported */
        long ret;
        int err;
        int sig;     /* killed by this signal */
        int code;    /* exit code, if it exited */
} child_result;

/* Run fn in a forked child (so that what it does, or a kill, stays there) and collect its return
 * value and errno.  fn must leave errno as the value that goes with its return value. */
static child_result in_child(long (*fn)(long), long arg)
{
        child_result res = { .ret = -1, .code = -1 };
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                res.err = errno;
                return res;
        }
        pid_t pid = fork();
        if (pid < 0) {
                res.err = errno;
                close(p[0]);
                close(p[1]);
                return res;
        }
        if (pid == 0) {
                close(p[0]);
                errno = 0;
                long r = fn(arg);
                long buf[2] = { r, errno };
                (void)!write(p[1], buf, sizeof(buf));
                _exit(0);
        }
        close(p[1]);
        long buf[2];
        ssize_t n = read(p[0], buf, sizeof(buf));
        close(p[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (n == (ssize_t)sizeof(buf)) {
                res.ran = true;
                res.ret = buf[0];
                res.err = (int)buf[1];
        }
        if (WIFSIGNALED(st))
                res.sig = WTERMSIG(st);
        else if (WIFEXITED(st))
                res.code = WEXITSTATUS(st);
        return res;
}

static const char *dir_arg(int argc, char **argv, const char *def)
{
        return argc > 2 ? argv[2] : def;
}

/* ---- kernel attack surface ------------------------------------------------------------------ */

static void atk_keyctl(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
        expect_fail("keyctl(GET_KEYRING_ID, session)", r, e);
        r = CALL(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0));
        expect_fail("keyctl(GET_KEYRING_ID, user)", r, e);
}

static void atk_add_key(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        /* the process keyring dies with the probe */
        long r = CALL(syscall(SYS_add_key, "user", "nsbox-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
        expect_fail("add_key(user, process keyring)", r, e);
        r = CALL(syscall(SYS_request_key, "user", "nsbox-probe-absent", NULL, 0));
        expect_denied("request_key(user)", r, e);
}

static void atk_bpf(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        union bpf_attr a;
        memset(&a, 0, sizeof(a));
        a.map_type = BPF_MAP_TYPE_ARRAY;
        a.key_size = 4;
        a.value_size = 4;
        a.max_entries = 1;
        long r = CALL(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
        expect_fail("bpf(MAP_CREATE, array)", r, e);
        if (r >= 0)
                close((int)r);
        struct bpf_insn insns[] = {
                { .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
                { .code = BPF_JMP | BPF_EXIT },
        };
        static char license[] = "GPL";
        memset(&a, 0, sizeof(a));
        a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
        a.insn_cnt = 2;
        a.insns = (uint64_t)(uintptr_t)insns;
        a.license = (uint64_t)(uintptr_t)license;
        r = CALL(syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a)));
        expect_fail("bpf(PROG_LOAD, socket filter)", r, e);
        if (r >= 0)
                close((int)r);
}

static void atk_perf_event_open(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        struct perf_event_attr a;
        memset(&a, 0, sizeof(a));
        a.type = PERF_TYPE_SOFTWARE;
        a.size = sizeof(a);
        a.config = PERF_COUNT_SW_TASK_CLOCK;
        a.disabled = 1;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        long r = CALL(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
        expect_fail("perf_event_open(software task clock, self)", r, e);
        if (r >= 0)
                close((int)r);
}

static void atk_userfaultfd(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
        expect_fail("userfaultfd(USER_MODE_ONLY)", r, e);
        if (r >= 0)
                close((int)r);
        r = CALL(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
        expect_fail("userfaultfd()", r, e);
        if (r >= 0)
                close((int)r);
}

static void atk_io_uring_setup(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        long r = CALL(syscall(SYS_io_uring_setup, 1, &p));
        expect_enosys("io_uring_setup(1)", r, e);
        if (r >= 0)
                close((int)r);
        r = CALL(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
        expect_enosys("io_uring_enter(-1)", r, e);
        r = CALL(syscall(SYS_io_uring_register, -1, 0, NULL, 0));
        expect_enosys("io_uring_register(-1)", r, e);
}

static void atk_kexec_load(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        /* 17 segments (KEXEC_SEGMENT_MAX + 1): EINVAL right after the permission check, so that
         * nothing is ever loaded or unloaded */
        long r = CALL(syscall(SYS_kexec_load, 0UL, 17UL, NULL, 0UL));
        expect_denied("kexec_load(17 segments)", r, e);
        /* an undefined flag: EINVAL right after the permission check */
        r = CALL(syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 1UL << 40));
        expect_denied("kexec_file_load(bad flag)", r, e);
}

static void atk_init_module(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        /* an empty image: ENOEXEC right after the permission check */
        long r = CALL(syscall(SYS_init_module, NULL, 0UL, ""));
        expect_denied("init_module(empty image)", r, e);
        r = CALL(syscall(SYS_finit_module, -1, "", 0));
        expect_denied("finit_module(-1)", r, e);
        r = CALL(syscall(SYS_delete_module, "nsbox_probe_absent", O_NONBLOCK));
        expect_denied("delete_module(absent)", r, e);
}

/* ---- processes ---------------------------------------------------------------------------- */

static long do_traceme(long unused)
{
        (void)unused;
        return syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0);
}

static void atk_ptrace(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        child_result c = in_child(do_traceme, 0);
        if (!c.ran)
                note("PTRACE_TRACEME: the child did not report (%s, signal %d)", strerror(c.err), c.sig);
        else
                expect_fail("PTRACE_TRACEME", c.ret, c.err);
        long r = CALL(syscall(SYS_ptrace, PTRACE_ATTACH, 1, 0, 0));
        expect_fail("PTRACE_ATTACH pid 1", r, e);
        if (r == 0) {
                waitpid(1, NULL, __WALL);
                syscall(SYS_ptrace, PTRACE_DETACH, 1, 0, 0);
        }
        r = CALL(syscall(SYS_ptrace, PTRACE_SEIZE, 1, 0, 0));
        expect_fail("PTRACE_SEIZE pid 1", r, e);
        if (r == 0)
                syscall(SYS_ptrace, PTRACE_DETACH, 1, 0, 0);
}

static void atk_process_vm_readv(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        char buf[16];
        struct iovec local = { buf, sizeof(buf) };
        /* below mmap_min_addr: never mapped, so a permitted call fails with EFAULT */
        struct iovec remote = { (void *)0x1000, sizeof(buf) };
        long r = CALL(syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0));
        expect_denied("process_vm_readv(pid 1, unmapped address)", r, e);
        r = CALL(syscall(SYS_process_vm_writev, 1, &local, 1, &remote, 1, 0));
        expect_denied("process_vm_writev(pid 1, unmapped address)", r, e);
}

static void atk_kill_pid1(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(kill(1, SIGKILL));
        note("kill(1, SIGKILL): %s", r < 0 ? strerror(e) : "returned 0");
        r = CALL(kill(1, SIGSTOP));
        note("kill(1, SIGSTOP): %s", r < 0 ? strerror(e) : "returned 0");
        usleep(200 * 1000);
        char st[512];
        int n = read_small("/proc/1/stat", st, sizeof(st));
        const char *paren = n > 0 ? strrchr(st, ')') : NULL;
        char state = paren && paren[1] == ' ' ? paren[2] : '?';
        if (state == 'T' || state == 't') {
                kill(1, SIGCONT);
                breach("pid 1 was stopped (state %c)", state);
        }
        r = CALL(kill(1, 0));
        if (r < 0 && e == ESRCH)
                breach("pid 1 is gone after SIGKILL");
        else if (state == 'Z' || state == 'X')
                breach("pid 1 is dying (state %c)", state);
        else
                note("pid 1 still alive (state %c), and so are we", state);
}

/* ---- mounts and namespaces ---------------------------------------------------------------- */

static void atk_mount(int argc, char **argv)
{
        int e;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/nsbox-probe-mnt.%d", dir_arg(argc, argv, "/tmp"), (int)getpid());
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                note("cannot create the mount point '%s': %s (nothing to mount on)", path, strerror(errno));
                return;
        }
        long r = CALL(mount("tmpfs", path, "tmpfs", 0, "size=16k"));
        expect_fail("mount(tmpfs)", r, e);
        if (r == 0)
                umount2(path, MNT_DETACH);
        r = CALL(mount("/", path, NULL, MS_BIND | MS_REC, NULL));
        expect_fail("mount(bind /)", r, e);
        if (r == 0)
                umount2(path, MNT_DETACH);
        r = CALL(mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
        expect_fail("mount(proc)", r, e);
        if (r == 0)
                umount2(path, MNT_DETACH);
        r = CALL(mount("sysfs", path, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
        expect_fail("mount(sysfs)", r, e);
        if (r == 0)
                umount2(path, MNT_DETACH);
        rmdir(path);
}

static void atk_remount_rw(int argc, char **argv)
{
        static char *defaults[] = { "/", "/usr" };
        char **targets = argc > 2 ? argv + 2 : defaults;
        int n = argc > 2 ? argc - 2 : 2;
        for (int i = 0; i < n; i++) {
                const char *t = targets[i];
                char what[PATH_MAX + 64];
                int e;
                snprintf(what, sizeof(what), "remount '%s' rw (bind)", t);
                long r = CALL(mount(NULL, t, NULL, MS_REMOUNT | MS_BIND, NULL));
                expect_fail(what, r, e);
                snprintf(what, sizeof(what), "remount '%s' rw (superblock)", t);
                r = CALL(mount(NULL, t, NULL, MS_REMOUNT, NULL));
                expect_fail(what, r, e);
                struct statvfs sv;
                if (statvfs(t, &sv) < 0)
                        note("statvfs '%s': %s", t, strerror(errno));
                else if (!(sv.f_flag & ST_RDONLY))
                        breach("'%s' is a writable mount", t);
                else
                        note("'%s' still read-only", t);
        }
}

static void atk_umount(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        /* under the read-only /proc/sys is the writable one of the sandbox's proc */
        long r = CALL(umount2("/proc/sys", MNT_DETACH));
        expect_fail("umount2(/proc/sys)", r, e);
        r = CALL(umount2("/proc", MNT_DETACH));
        expect_fail("umount2(/proc)", r, e);
        r = CALL(umount2("/", MNT_DETACH));
        expect_fail("umount2(/)", r, e);
}

static void atk_pivot_root(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(syscall(SYS_pivot_root, ".", "."));
        expect_fail("pivot_root(., .)", r, e);
        r = CALL(syscall(SYS_pivot_root, "/tmp", "/tmp"));
        expect_fail("pivot_root(/tmp, /tmp)", r, e);
}

static void atk_chroot(int argc, char **argv)
{
        int e;
        long r = CALL(chroot(dir_arg(argc, argv, "/tmp")));
        expect_fail("chroot", r, e);
}

static void atk_setns(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const struct {
                const char *path;
                int type;
        } targets[] = {
                { "/proc/1/ns/mnt", CLONE_NEWNS }, { "/proc/1/ns/user", CLONE_NEWUSER }, { "/proc/1/ns/pid", CLONE_NEWPID },
                { "/proc/self/ns/mnt", CLONE_NEWNS }, { "/proc/self/ns/net", CLONE_NEWNET }, { "/proc/self/ns/uts", CLONE_NEWUTS },
        };
        for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
                int e;
                char what[96];
                int fd = open(targets[i].path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        note("open %s: %s", targets[i].path, strerror(errno));
                        continue;
                }
                snprintf(what, sizeof(what), "setns(%s)", targets[i].path);
                long r = CALL(setns(fd, targets[i].type));
                expect_fail(what, r, e);
                close(fd);
        }
}

static long do_unshare(long flags)
{
        return syscall(SYS_unshare, (unsigned long)flags);
}

static void atk_unshare_user(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const struct {
                long flags;
                const char *name;
        } tries[] = {
                { CLONE_NEWUSER, "unshare(CLONE_NEWUSER)" },
                { CLONE_NEWUSER | CLONE_NEWNS, "unshare(CLONE_NEWUSER|CLONE_NEWNS)" },
                { CLONE_NEWNS, "unshare(CLONE_NEWNS)" },
                { CLONE_NEWNET, "unshare(CLONE_NEWNET)" },
        };
        for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
                child_result c = in_child(do_unshare, tries[i].flags);
                if (!c.ran)
                        note("%s: the child did not report (signal %d)", tries[i].name, c.sig);
                else
                        expect_fail(tries[i].name, c.ret, c.err);
        }
}

static void atk_clone_newns(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const struct {
                unsigned long flags;
                const char *name;
        } tries[] = {
                { CLONE_NEWNS, "clone(CLONE_NEWNS)" },
                { CLONE_NEWUSER, "clone(CLONE_NEWUSER)" },
                { CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID, "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)" },
                { CLONE_NEWNET, "clone(CLONE_NEWNET)" },
                { CLONE_NEWUSER | HIGH_BITS, "clone(CLONE_NEWUSER | high 32 bits set)" },
        };
        for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
                int e;
                long r = CALL(syscall(SYS_clone, tries[i].flags | SIGCHLD, NULL, NULL, NULL, 0));
                if (r == 0)
                        _exit(0);
                expect_fail(tries[i].name, r, e);
                if (r > 0)
                        waitpid((pid_t)r, NULL, 0);
        }
}

static void atk_clone3(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const struct {
                unsigned long long flags;
                const char *name;
        } tries[] = {
                { 0, "clone3(plain fork)" },
                { CLONE_NEWUSER | CLONE_NEWNS, "clone3(CLONE_NEWUSER|CLONE_NEWNS)" },
        };
        for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
                struct clone_args ca;
                memset(&ca, 0, sizeof(ca));
                ca.flags = tries[i].flags;
                ca.exit_signal = SIGCHLD;
                int e;
                long r = CALL(syscall(SYS_clone3, &ca, CLONE_ARGS_SIZE_VER0));
                if (r == 0)
                        _exit(0);
                expect_enosys(tries[i].name, r, e);
                if (r > 0)
                        waitpid((pid_t)r, NULL, 0);
        }
}

static void atk_open_tree(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLOEXEC));
        expect_enosys("open_tree(/)", r, e);
        if (r >= 0)
                close((int)r);
        r = CALL(syscall(SYS_open_tree, AT_FDCWD, "/usr", OPEN_TREE_CLOEXEC | OPEN_TREE_CLONE | AT_RECURSIVE));
        expect_enosys("open_tree(/usr, CLONE)", r, e);
        if (r >= 0)
                close((int)r);
}

static void atk_fsopen(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC));
        expect_enosys("fsopen(tmpfs)", r, e);
        if (r >= 0)
                close((int)r);
        r = CALL(syscall(SYS_fsconfig, -1, FSCONFIG_CMD_CREATE, NULL, NULL, 0));
        expect_enosys("fsconfig(-1)", r, e);
        r = CALL(syscall(SYS_fsmount, -1, FSMOUNT_CLOEXEC, 0));
        expect_enosys("fsmount(-1)", r, e);
        r = CALL(syscall(SYS_fspick, AT_FDCWD, "/", FSPICK_CLOEXEC));
        expect_enosys("fspick(/)", r, e);
        if (r >= 0)
                close((int)r);
}

static void atk_move_mount(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        /* invalid fds: a permitted call fails with EBADF and moves nothing */
        long r = CALL(syscall(SYS_move_mount, -1, "", -1, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
        expect_enosys("move_mount(-1, -1)", r, e);
        struct mount_attr attr = { .attr_clr = MOUNT_ATTR_RDONLY };
        r = CALL(syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, &attr, sizeof(attr)));
        expect_enosys("mount_setattr(-1, clear RDONLY)", r, e);
}

static void atk_name_to_handle_at(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e, mount_id;
        struct {
                struct file_handle fh;
                unsigned char buf[MAX_HANDLE_SZ];
        } h;
        h.fh.handle_bytes = MAX_HANDLE_SZ;
        long r = CALL(syscall(SYS_name_to_handle_at, AT_FDCWD, "/usr", &h.fh, &mount_id, 0));
        expect_fail("name_to_handle_at(/usr)", r, e);
}

static void atk_open_by_handle_at(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        /* "shocker": the root directory (inode 2, generation 0) of the file system /usr lives on,
         * reached without any path: the host's whole root file system on most hosts */
        int mfd = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (mfd < 0) {
                note("open /usr: %s", strerror(errno));
                mfd = AT_FDCWD;
        }
        struct {
                struct file_handle fh;
                uint32_t ino[2];
        } h = { .fh = { .handle_bytes = 8, .handle_type = 1 /* FILEID_INO32_GEN */ }, .ino = { 2, 0 } };
        long r = CALL(syscall(SYS_open_by_handle_at, mfd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (r >= 0) {
                char names[256] = "";
                DIR *d = fdopendir((int)r);
                size_t len = 0;
                for (struct dirent *de; d && (de = readdir(d)) && len < 200;)
                        if (de->d_name[0] != '.')
                                len += (size_t)snprintf(names + len, sizeof(names) - len, " %.40s", de->d_name);
                breach("open_by_handle_at(inode 2 of /usr's file system) SUCCEEDED: the host root directory:%s", names);
                if (d)
                        closedir(d);
        } else
                expect_fail("open_by_handle_at(inode 2 of /usr's file system)", r, e);
        if (mfd >= 0)
                close(mfd);
}

/* ---- terminals ---------------------------------------------------------------------------- */

static void tiocsti_on(int fd, const char *name)
{
        int e;
        char c = '#', what[96]; /* '#': should it ever land in a shell, it starts a comment */
        snprintf(what, sizeof(what), "TIOCSTI on %s", name);
        long r = CALL(syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI, &c));
        expect_eperm(what, r, e);
        snprintf(what, sizeof(what), "TIOCSTI|0xffffffff00000000 on %s", name);
        r = CALL(syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI | HIGH_BITS, &c));
        expect_eperm(what, r, e);
        /* CVE-2019-10063: the kernel takes the command as 32 bits, a filter that compares all 64
         * lets 0x100005412 through */
        snprintf(what, sizeof(what), "ioctl 0x%lx (TIOCSTI|1<<32) on %s", (unsigned long)TIOCSTI | ONE_HIGH_BIT, name);
        r = CALL(syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI | ONE_HIGH_BIT, &c));
        expect_eperm(what, r, e);
}

/* In a child: a new pty as the controlling terminal of a new session, where TIOCSTI is allowed
 * by the kernel (dev.tty.legacy_tiocsti=1): only the filter stands in the way.  Returns the
 * ioctl's result, or -2 with errno if the pty could not be set up. */
static long pty_tiocsti(long high)
{
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
                return -2;
        const char *sn = ptsname(m);
        if (!sn || setsid() < 0)
                return -2;
        int s = open(sn, O_RDWR | O_CLOEXEC);
        if (s < 0)
                return -2;
        ioctl(s, TIOCSCTTY, 0);
        if (tcgetsid(s) != getsid(0)) {
                errno = ENOTTY;
                return -2;
        }
        char c = '#';
        unsigned long cmd = (unsigned long)TIOCSTI | (high == 1 ? HIGH_BITS : high == 2 ? ONE_HIGH_BIT : 0);
        return syscall(SYS_ioctl, s, cmd, &c);
}

static void atk_tiocsti(int argc, char **argv)
{
        (void)argc, (void)argv;
        note("fd 0 is %sa terminal", isatty(0) ? "" : "not ");
        tiocsti_on(0, "fd 0");
        int t = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (t < 0)
                note("open /dev/tty: %s", strerror(errno));
        else {
                tiocsti_on(t, "/dev/tty");
                close(t);
        }
        for (long high = 0; high < 3; high++) {
                const char *what = high == 1   ? "TIOCSTI|0xffffffff00000000 on an own pty (controlling tty)"
                                   : high == 2 ? "ioctl 0x100005412 (TIOCSTI|1<<32) on an own pty (controlling tty)"
                                               : "TIOCSTI on an own pty (controlling tty)";
                child_result c = in_child(pty_tiocsti, high);
                if (!c.ran)
                        note("%s: the child did not report (signal %d)", what, c.sig);
                else if (c.ret == -2)
                        note("%s: no pty to try it on (%s)", what, strerror(c.err));
                else
                        expect_eperm(what, c.ret, c.err);
        }
}

static void tioclinux_on(int fd, const char *name)
{
        int e;
        char sub[2] = { TIOCL_GETSHIFTSTATE, 0 }, what[96];
        snprintf(what, sizeof(what), "TIOCLINUX on %s", name);
        long r = CALL(syscall(SYS_ioctl, fd, (unsigned long)TIOCLINUX, sub));
        expect_eperm(what, r, e);
        snprintf(what, sizeof(what), "TIOCLINUX|0xffffffff00000000 on %s", name);
        r = CALL(syscall(SYS_ioctl, fd, (unsigned long)TIOCLINUX | HIGH_BITS, sub));
        expect_eperm(what, r, e);
}

static void atk_tioclinux(int argc, char **argv)
{
        (void)argc, (void)argv;
        tioclinux_on(0, "fd 0");
        tioclinux_on(1, "fd 1");
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                note("no pty: %s", strerror(errno));
        else {
                tioclinux_on(m, "an own pty");
                close(m);
        }
}

/* ---- sockets ------------------------------------------------------------------------------ */

static void atk_socket_families(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const struct {
                unsigned long family;
                int type;
                unsigned long proto;
                const char *name;
        } tries[] = {
                { AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */, "AF_PACKET raw" },
                { AF_PACKET, SOCK_DGRAM, 0, "AF_PACKET dgram" },
                { AF_VSOCK, SOCK_STREAM, 0, "AF_VSOCK" },
                { AF_VSOCK | HIGH_BITS, SOCK_STREAM, 0, "AF_VSOCK | high 32 bits" },
                { AF_ALG, SOCK_SEQPACKET, 0, "AF_ALG" },
                { AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */, "AF_KEY" },
                { AF_NETLINK, SOCK_RAW, NETLINK_AUDIT, "NETLINK_AUDIT" },
                { AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT, "NETLINK_KOBJECT_UEVENT" },
                { AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT | HIGH_BITS, "NETLINK_KOBJECT_UEVENT | high 32 bits" },
                { AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG, "NETLINK_SOCK_DIAG" },
                { AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER, "NETLINK_NETFILTER" },
                { AF_NETLINK, SOCK_RAW, NETLINK_GENERIC, "NETLINK_GENERIC" },
                { AF_XDP, SOCK_RAW, 0, "AF_XDP" },
                { AF_TIPC, SOCK_RDM, 0, "AF_TIPC" },
                { AF_BLUETOOTH, SOCK_RAW, 0, "AF_BLUETOOTH" },
                { AF_CAN, SOCK_RAW, 1, "AF_CAN" },
        };
        for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
                int e;
                long r = CALL(syscall(SYS_socket, tries[i].family, tries[i].type | SOCK_CLOEXEC, tries[i].proto));
                expect_fail(tries[i].name, r, e);
                if (r >= 0)
                        close((int)r);
        }
}

/* The inverse: the families the policy allows must keep working. */
static bool allowed_failed;

static void must_work(const char *what, long r, int e)
{
        if (r < 0) {
                allowed_failed = true;
                note("%s FAILED: %s", what, strerror(e));
        } else
                note("%s: ok", what);
}

static void atk_socket_allowed(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long u = CALL(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        must_work("AF_UNIX stream", u, e);
        int sv[2];
        long r = CALL(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
        must_work("AF_UNIX socketpair", r, e);
        long s4 = CALL(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        must_work("AF_INET stream", s4, e);
        if (s4 >= 0) {
                struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                socklen_t len = sizeof(a);
                r = CALL(bind((int)s4, (struct sockaddr *)&a, sizeof(a)) < 0 || listen((int)s4, 1) < 0 ||
                                         getsockname((int)s4, (struct sockaddr *)&a, &len) < 0
                                 ? -1
                                 : 0);
                must_work("AF_INET listen on 127.0.0.1", r, e);
                long c = CALL(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
                if (c >= 0 && r == 0) {
                        r = CALL(connect((int)c, (struct sockaddr *)&a, sizeof(a)));
                        must_work("AF_INET connect to 127.0.0.1", r, e);
                }
        }
        long s6 = CALL(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        must_work("AF_INET6 dgram", s6, e);
        long nl = CALL(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
        must_work("NETLINK_ROUTE", nl, e);
        if (nl >= 0) {
                struct sockaddr_nl a = { .nl_family = AF_NETLINK };
                r = CALL(bind((int)nl, (struct sockaddr *)&a, sizeof(a)));
                must_work("NETLINK_ROUTE bind", r, e);
        }
}

/* ---- other ABIs, personality ---------------------------------------------------------------- */

/* A 32-bit system call from 64-bit code: the i386 table (getpid is 20 there, keyctl 288). */
static long int80(long nr)
{
        long ret;
        long a = 0, b = KEY_SPEC_SESSION_KEYRING, c = 0;
        if (nr != 288)
                b = 0;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "r8", "r9", "r10", "r11", "memory", "cc");
        if (ret < 0 && ret > -4096) {
                errno = (int)-ret;
                return -1;
        }
        return ret;
}

static long x32_call(long nr)
{
        return syscall(X32_SYSCALL_BIT | nr, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
}

static void foreign_abi(const char *what, long (*fn)(long), long nr)
{
        child_result c = in_child(fn, nr);
        if (c.sig == SIGSYS)
                note("%s: killed by SIGSYS", what);
        else if (!c.ran)
                breach("%s: the child died otherwise (signal %d, exit %d), not by the filter", what, c.sig, c.code);
        else if (c.ret < 0 && c.err == ENOSYS)
                note("%s: %s", what, strerror(c.err));
        else if (c.ret < 0)
                breach("%s reached the kernel (%s)", what, strerror(c.err));
        else
                breach("%s SUCCEEDED (returned %ld)", what, c.ret);
}

static void atk_int80(int argc, char **argv)
{
        (void)argc, (void)argv;
        foreign_abi("int $0x80 getpid (i386 20)", int80, 20);
        foreign_abi("int $0x80 keyctl (i386 288)", int80, 288);
}

static void atk_x32(int argc, char **argv)
{
        (void)argc, (void)argv;
        foreign_abi("x32 getpid (0x40000000|39)", x32_call, 39);
        foreign_abi("x32 keyctl (0x40000000|250)", x32_call, 250);
}

static void atk_personality(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long before = CALL(syscall(SYS_personality, 0xffffffffUL));
        if (before < 0)
                breach("personality(0xffffffff) query refused: %s (programs need it)", strerror(e));
        else
                note("personality query: 0x%lx", before);
        static const struct {
                unsigned long p;
                const char *name;
        } tries[] = {
                { ADDR_NO_RANDOMIZE, "personality(ADDR_NO_RANDOMIZE)" },
                { READ_IMPLIES_EXEC, "personality(READ_IMPLIES_EXEC)" },
                { PER_LINUX32, "personality(PER_LINUX32)" },
                { ADDR_NO_RANDOMIZE | HIGH_BITS, "personality(ADDR_NO_RANDOMIZE | high 32 bits)" },
        };
        for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
                long r = CALL(syscall(SYS_personality, tries[i].p));
                expect_fail(tries[i].name, r, e);
                if (r >= 0)
                        syscall(SYS_personality, before >= 0 ? (unsigned long)before : 0UL);
        }
        long after = CALL(syscall(SYS_personality, 0xffffffffUL));
        if (after >= 0 && (after & (ADDR_NO_RANDOMIZE | READ_IMPLIES_EXEC)))
                breach("personality is now 0x%lx", after);
}

/* ---- credentials -------------------------------------------------------------------------- */

static void atk_setuid_root(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(syscall(SYS_setuid, 0));
        expect_fail("setuid(0)", r, e);
        r = CALL(syscall(SYS_setresuid, 0, 0, 0));
        expect_fail("setresuid(0, 0, 0)", r, e);
        r = CALL(syscall(SYS_setgid, 0));
        expect_fail("setgid(0)", r, e);
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof(data));
        data[0].effective = data[0].permitted = 1u << CAP_SYS_ADMIN;
        r = CALL(syscall(SYS_capset, &hdr, data));
        expect_fail("capset(+CAP_SYS_ADMIN)", r, e);
        if (geteuid() == 0)
                breach("running as uid 0 now");
}

static void atk_caps(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const char *const zero[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
        char v[64];
        for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++) {
                if (!status_field(zero[i], v, sizeof(v)))
                        breach("%s: missing from /proc/self/status", zero[i]);
                else if (strtoull(v, NULL, 16) != 0)
                        breach("%s=%s (expected 0)", zero[i], v);
                else
                        note("%s=0", zero[i]);
        }
        if (!status_field("NoNewPrivs", v, sizeof(v)) || strcmp(v, "1"))
                breach("NoNewPrivs=%s (expected 1)", status_field("NoNewPrivs", v, sizeof(v)) ? v : "?");
        else
                note("NoNewPrivs=1");
        if (!status_field("Seccomp", v, sizeof(v)) || strcmp(v, "2"))
                breach("Seccomp=%s (expected 2, a filter)", status_field("Seccomp", v, sizeof(v)) ? v : "?");
        else
                note("Seccomp=2");
}

static void atk_chown(int argc, char **argv)
{
        int e;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/nsbox-probe-chown.%d", dir_arg(argc, argv, "/tmp"), (int)getpid());
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                note("cannot create '%s': %s", path, strerror(errno));
                return;
        }
        long r = CALL(fchown(fd, 0, (gid_t)-1));
        expect_fail("fchown(file, uid 0)", r, e);
        r = CALL(fchown(fd, (uid_t)-1, 0));
        expect_fail("fchown(file, gid 0)", r, e);
        r = CALL(fchown(fd, 65534, 65534));
        expect_fail("fchown(file, 65534:65534)", r, e);
        close(fd);
        unlink(path);
}

static void atk_setgroups(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        gid_t g0 = 0;
        long r = CALL(syscall(SYS_setgroups, 1, &g0));
        expect_fail("setgroups([0])", r, e);
        r = CALL(syscall(SYS_setgroups, 0, NULL));
        expect_fail("setgroups([])", r, e);
}

/* Run from a setuid file (the test makes one): nothing may change. */
static void atk_suid(int argc, char **argv)
{
        (void)argc, (void)argv;
        uid_t r, eu, s;
        getresuid(&r, &eu, &s);
        char v[64];
        unsigned long long eff = status_field("CapEff", v, sizeof(v)) ? strtoull(v, NULL, 16) : ~0ull;
        if (eu != r || s != r)
                breach("uids real %u effective %u saved %u: the setuid bit took effect", r, eu, s);
        else
                note("uids %u/%u/%u unchanged", r, eu, s);
        if (eff)
                breach("CapEff=%llx after exec", eff);
        else
                note("CapEff=0");
}

/* ---- files -------------------------------------------------------------------------------- */

static void atk_mknod(int argc, char **argv)
{
        static const struct {
                mode_t type;
                unsigned maj, min;
                const char *name;
        } nodes[] = {
                { S_IFCHR, 1, 3, "char 1:3 (null)" },
                { S_IFCHR, 1, 1, "char 1:1 (mem)" },
                { S_IFBLK, 7, 0, "block 7:0 (loop0)" },
        };
        const char *dirs[] = { dir_arg(argc, argv, "/tmp"), "/dev", "/dev/shm" };
        size_t ndirs = host_privileged() ? 1 : 3; /* the host's /dev is not ours to try */
        for (size_t d = 0; d < ndirs; d++)
                for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
                        char path[PATH_MAX], what[PATH_MAX + 64];
                        int e;
                        snprintf(path, sizeof(path), "%s/nsbox-probe-node.%d", dirs[d], (int)getpid());
                        snprintf(what, sizeof(what), "mknod %s in %s", nodes[i].name, dirs[d]);
                        long r = CALL(mknod(path, nodes[i].type | 0600, makedev(nodes[i].maj, nodes[i].min)));
                        expect_fail(what, r, e);
                        if (r == 0)
                                unlink(path);
                }
}

static void atk_write_outside(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const char *const dirs[] = { "/", "/etc", "/usr", "/usr/bin", "/usr/lib", "/bin", "/home", "/var",
                                            "/root", "/run", "/opt", "/mnt", "/dev", "/proc", "/probe" };
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                char path[PATH_MAX], what[PATH_MAX + 32];
                int e;
                /* permissions alone are not enough: everything but the workdir, /tmp and /dev/shm
                 * is a read-only mount (proc has its own rules) */
                struct statvfs sv;
                if (strcmp(dirs[i], "/proc") && statvfs(dirs[i], &sv) == 0 && !(sv.f_flag & ST_RDONLY))
                        breach("%s is on a writable mount", dirs[i]);
                snprintf(path, sizeof(path), "%s/.nsbox-probe.%d", strcmp(dirs[i], "/") ? dirs[i] : "", (int)getpid());
                snprintf(what, sizeof(what), "create in %s", dirs[i]);
                long r = CALL(open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
                if (r >= 0) {
                        close((int)r);
                        unlink(path);
                }
                /* a missing directory is as good as a refusal: nothing of the host is there */
                expect_fail(what, r, e);
                snprintf(what, sizeof(what), "mkdir in %s", dirs[i]);
                r = CALL(mkdir(path, 0700));
                if (r == 0)
                        rmdir(path);
                expect_fail(what, r, e);
        }
}

static void atk_proc_sys_write(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        struct statvfs sv;
        if (statvfs("/proc/sys", &sv) < 0)
                note("statvfs /proc/sys: %s", strerror(errno));
        else if (!(sv.f_flag & ST_RDONLY))
                breach("/proc/sys is not a read-only mount");
        else
                note("/proc/sys is a read-only mount");
        /* write the current value back: a success changes nothing, but shows it was possible */
        char host[256];
        int n = read_small("/proc/sys/kernel/hostname", host, sizeof(host));
        long fd = CALL(open("/proc/sys/kernel/hostname", O_WRONLY | O_CLOEXEC));
        if (fd >= 0) {
                long w = CALL(n > 0 ? write((int)fd, host, (size_t)n) : -1);
                close((int)fd);
                if (w >= 0)
                        breach("write /proc/sys/kernel/hostname SUCCEEDED");
                else
                        breach("open /proc/sys/kernel/hostname for writing SUCCEEDED (write: %s)", strerror(e));
        } else
                note("open /proc/sys/kernel/hostname for writing: %s", strerror(e));
        /* these are only opened: a writable fd is the breach, nothing is written */
        static const char *const opened[] = { "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
                                              "/proc/sys/kernel/modprobe", "/proc/sysrq-trigger" };
        for (size_t i = 0; i < sizeof(opened) / sizeof(opened[0]); i++) {
                char what[96];
                snprintf(what, sizeof(what), "open %s for writing", opened[i]);
                long r = CALL(open(opened[i], O_WRONLY | O_CLOEXEC));
                expect_fail(what, r, e);
                if (r >= 0)
                        close((int)r);
        }
}

static unsigned sys_seen, sys_writable;

static void walk_sys(int dfd, const char *path, int depth)
{
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return;
        }
        for (struct dirent *de; (de = readdir(d)) && sys_seen < 40000;) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                sys_seen++;
                char sub[PATH_MAX];
                snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
                if (de->d_type == DT_DIR && depth < 6) {
                        int c = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (c >= 0)
                                walk_sys(c, sub, depth + 1);
                } else if (de->d_type == DT_REG) {
                        /* opened, never written: a writable fd is the breach */
                        int w = openat(dirfd(d), de->d_name, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
                        if (w >= 0) {
                                close(w);
                                if (sys_writable++ < 5)
                                        breach("%s is writable", sub);
                        }
                }
        }
        closedir(d);
}

static void atk_sys_write(int argc, char **argv)
{
        (void)argc, (void)argv;
        int d = open("/sys", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0) {
                note("/sys: %s (nothing of the host's sysfs)", strerror(errno));
                return;
        }
        struct statvfs sv;
        if (fstatvfs(d, &sv) == 0 && !(sv.f_flag & ST_RDONLY))
                breach("/sys is a writable mount");
        walk_sys(d, "/sys", 0);
        if (sys_writable > 5)
                breach("... %u writable files under /sys in all", sys_writable);
        if (!sys_writable)
                note("none of %u entries under /sys can be opened for writing", sys_seen);
}

static void atk_proc_exe_write(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        long r = CALL(open("/proc/self/exe", O_WRONLY | O_CLOEXEC));
        expect_fail("open /proc/self/exe O_WRONLY", r, e);
        if (r >= 0)
                close((int)r);
        r = CALL(open("/proc/1/exe", O_WRONLY | O_CLOEXEC));
        expect_fail("open /proc/1/exe O_WRONLY", r, e);
        if (r >= 0)
                close((int)r);
        r = CALL(open("/proc/1/exe", O_RDONLY | O_CLOEXEC));
        expect_fail("open /proc/1/exe O_RDONLY (pid 1 must be non-dumpable)", r, e);
        if (r >= 0)
                close((int)r);
        long p = CALL(open("/proc/1/exe", O_PATH | O_CLOEXEC));
        expect_fail("open /proc/1/exe O_PATH", p, e);
        if (p >= 0) {
                char fdp[64];
                snprintf(fdp, sizeof(fdp), "/proc/self/fd/%ld", p);
                r = CALL(open(fdp, O_WRONLY | O_CLOEXEC));
                expect_fail("reopen it through /proc/self/fd O_WRONLY", r, e);
                if (r >= 0)
                        close((int)r);
                close((int)p);
        }
}

static void atk_proc1_mem(int argc, char **argv)
{
        (void)argc, (void)argv;
        int e;
        static const char *const opened[] = { "/proc/1/mem", "/proc/1/environ", "/proc/1/maps", "/proc/1/auxv" };
        for (size_t i = 0; i < sizeof(opened) / sizeof(opened[0]); i++) {
                char what[64], buf[64];
                snprintf(what, sizeof(what), "read %s", opened[i]);
                long fd = CALL(open(opened[i], O_RDONLY | O_CLOEXEC));
                if (fd < 0) {
                        note("%s: %s", what, strerror(e));
                        continue;
                }
                /* /proc/PID/mem checks again at read time; maps and environ may open but read nothing */
                long n = CALL(!strcmp(opened[i], "/proc/1/mem") ? pread((int)fd, buf, sizeof(buf), 0x400000) : read((int)fd, buf, sizeof(buf)));
                close((int)fd);
                if (n > 0 || (n < 0 && e != EACCES && e != EPERM && !strcmp(opened[i], "/proc/1/mem")))
                        breach("%s: opened and read (%s)", what, n > 0 ? "data" : strerror(e));
                else if (n == 0)
                        note("%s: opened, empty", what);
                else
                        note("%s: opened, read: %s", what, strerror(e));
        }
        char link[PATH_MAX];
        long n = CALL(readlink("/proc/1/cwd", link, sizeof(link) - 1));
        if (n >= 0) {
                link[n] = '\0';
                breach("readlink /proc/1/cwd SUCCEEDED: %s", link);
        } else
                note("readlink /proc/1/cwd: %s", strerror(e));
        static const char *const listed[] = { "/proc/1/root", "/proc/1/fd", "/proc/1/map_files" };
        for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++) {
                errno = 0;
                DIR *d = opendir(listed[i]);
                if (!d) {
                        note("list %s: %s", listed[i], strerror(errno));
                        continue;
                }
                errno = 0;
                struct dirent *de;
                int count = 0;
                while ((de = readdir(d)))
                        count++;
                e = errno;
                closedir(d);
                if (count > 0)
                        breach("list %s SUCCEEDED (%d entries)", listed[i], count);
                else
                        note("list %s: %s", listed[i], e ? strerror(e) : "empty");
        }
}

static void atk_fd_leak(int argc, char **argv)
{
        (void)argc, (void)argv;
        DIR *d = opendir("/proc/self/fd");
        if (!d) {
                breach("cannot list /proc/self/fd: %s", strerror(errno));
                return;
        }
        int self = dirfd(d), extra = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (de->d_name[0] == '.')
                        continue;
                int fd = atoi(de->d_name);
                if (fd <= 2 || fd == self)
                        continue;
                char path[64], target[PATH_MAX];
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                ssize_t n = readlink(path, target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = '\0';
                breach("fd %d is open: %s", fd, target);
                extra++;
        }
        closedir(d);
        if (!extra)
                note("only fds 0, 1, 2 are open");
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
                breach("getcwd: %s (the cwd is outside the sandbox root)", strerror(errno));
        else if (!strncmp(cwd, "(unreachable)", 13))
                breach("cwd is outside the sandbox root: %s", cwd);
        else
                note("cwd %s", cwd);
}

/* CVE-2024-21626 (runc): a directory fd or a cwd that leads out of the root.  Inside the root,
 * ".." stops at "/": 64 of them from any directory of the sandbox end at the sandbox's own "/",
 * from a host directory that leaked in they end at the host's "/", another inode.  Every fd and
 * cwd of every process the probe can see is tried, and through each the host marker (argv[2])
 * is opened the way the exploit does, /proc/PID/fd/N/../../..MARKER (so the marker must not be
 * in the probe's own root: a host file, or one outside a chroot). */
static struct stat root_st;
static int dirs_tried, dirs_unreadable, dirs_out;

/* The first few ways out are enough to show; the rest are counted. */
#define escape_found(...)                         \
        do {                                      \
                if (dirs_out++ < 4)               \
                        breach(__VA_ARGS__);      \
                else                              \
                        escaped = true;           \
        } while (0)

static void try_dir(const char *path, const char *marker)
{
        struct stat st;
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                return; /* a pipe, a socket, a file: nothing to walk up from */
        dirs_tried++;
        char up[PATH_MAX];
        for (int depth = 3; depth <= 64; depth += 61) {
                int n = snprintf(up, sizeof(up), "%s", path);
                for (int i = 0; i < depth && n < (int)sizeof(up) - 8; i++)
                        n += snprintf(up + n, sizeof(up) - (size_t)n, "/..");
                if (depth == 64) {
                        if (stat(up, &st) < 0)
                                note("%s/..(x64): %s", path, strerror(errno));
                        else if (st.st_dev != root_st.st_dev || st.st_ino != root_st.st_ino)
                                escape_found("%s leads out of the root (64 '..' end at device %u:%u inode %lu, not the root)", path,
                                       major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
                }
                if (!marker || n + strlen(marker) >= sizeof(up))
                        continue;
                snprintf(up + n, sizeof(up) - (size_t)n, "%s", marker);
                int fd = open(up, O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                        char buf[128];
                        ssize_t r = read(fd, buf, sizeof(buf) - 1);
                        buf[r > 0 ? r : 0] = '\0';
                        buf[strcspn(buf, "\n")] = '\0';
                        escape_found("opened the host marker as %s: '%s'", up, buf);
                        close(fd);
                }
        }
}

static void atk_fd_escape(int argc, char **argv)
{
        const char *marker = argc > 2 ? argv[2] : NULL;
        if (stat("/", &root_st) < 0) {
                breach("stat /: %s", strerror(errno));
                return;
        }
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
                breach("getcwd: %s (the cwd is outside the root)", strerror(errno));
        else if (cwd[0] != '/')
                breach("the cwd is outside the root: %s", cwd);
        else
                note("cwd %s", cwd);
        try_dir(".", marker);
        DIR *procs = opendir("/proc");
        if (!procs) {
                breach("/proc: %s", strerror(errno));
                return;
        }
        int pids = 0, fds = 0;
        char self[32];
        snprintf(self, sizeof(self), "%d", (int)getpid());
        /* itself first: what it was given is the likeliest leak */
        for (struct dirent *p, self_ent = { .d_name = "self" }; (p = pids ? readdir(procs) : &self_ent);) {
                if (pids && (p->d_name[0] < '0' || p->d_name[0] > '9' || !strcmp(p->d_name, self)))
                        continue;
                pids++;
                char path[PATH_MAX];
                static const char *const links[] = { "cwd", "root" };
                for (size_t i = 0; i < 2; i++) {
                        snprintf(path, sizeof(path), "/proc/%s/%s", p->d_name, links[i]);
                        try_dir(path, marker);
                }
                snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
                DIR *d = opendir(path);
                if (!d) {
                        dirs_unreadable++;
                        continue;
                }
                for (struct dirent *f; (f = readdir(d));) {
                        if (f->d_name[0] == '.')
                                continue;
                        char fdp[PATH_MAX];
                        snprintf(fdp, sizeof(fdp), "/proc/%s/fd/%s", p->d_name, f->d_name);
                        fds++;
                        try_dir(fdp, marker);
                }
                closedir(d);
        }
        closedir(procs);
        if (dirs_out > 4)
                note("... %d ways out in all", dirs_out);
        note("%d processes, %d fds, %d directories (fds, cwds, roots) walked up, %d fd lists unreadable", pids, fds, dirs_tried,
             dirs_unreadable);
        if (!fds)
                breach("no fd could be looked at: the attack was not run");
}

/* A socket family the policy refuses, by name.  The first try is the real socket; the second
 * asks for an invalid type, which the kernel refuses with EINVAL before it looks at the family:
 * EAFNOSUPPORT or EPERM there can only be the filter's, so a kernel without the family (no
 * module) cannot pass for a refusal. */
static void socket_family(int family, int type, int proto, const char *name)
{
        int e;
        char what[96];
        long r = CALL(syscall(SYS_socket, family, type | SOCK_CLOEXEC, proto));
        snprintf(what, sizeof(what), "socket(%s)", name);
        expect_fail(what, r, e);
        if (r >= 0) {
                if (family == AF_ALG) {
                        struct sockaddr_alg sa = { .salg_family = AF_ALG, .salg_type = "hash", .salg_name = "sha256" };
                        long b = CALL(bind((int)r, (struct sockaddr *)&sa, sizeof(sa)));
                        note("bind hash/sha256: %s", b < 0 ? strerror(e) : "ok");
                } else if (family == AF_VSOCK) {
                        struct sockaddr_vm vm = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = 22 };
                        long c = CALL(connect((int)r, (struct sockaddr *)&vm, sizeof(vm)));
                        note("connect to the host's cid port 22: %s", c < 0 ? strerror(e) : "connected");
                }
                close((int)r);
        }
        r = CALL(syscall(SYS_socket, family, 99 | SOCK_CLOEXEC, proto));
        snprintf(what, sizeof(what), "socket(%s, invalid type 99)", name);
        if (r < 0 && (e == EAFNOSUPPORT || e == EPERM))
                note("%s: %s (the filter's answer)", what, strerror(e));
        else if (r < 0)
                breach("%s reached the kernel (%s): no filter rule for %s", what, strerror(e), name);
        else
                breach("%s SUCCEEDED (returned %ld)", what, r);
        if (r >= 0)
                close((int)r);
}

static void atk_af_packet(int argc, char **argv)
{
        (void)argc, (void)argv;
        socket_family(AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */, "AF_PACKET, SOCK_RAW, ETH_P_ALL");
        socket_family(AF_PACKET, SOCK_DGRAM, 0, "AF_PACKET, SOCK_DGRAM");
}

static void atk_af_vsock(int argc, char **argv)
{
        (void)argc, (void)argv;
        socket_family(AF_VSOCK, SOCK_STREAM, 0, "AF_VSOCK, SOCK_STREAM");
        socket_family(AF_VSOCK, SOCK_DGRAM, 0, "AF_VSOCK, SOCK_DGRAM");
}

static void atk_af_alg(int argc, char **argv)
{
        (void)argc, (void)argv;
        socket_family(AF_ALG, SOCK_SEQPACKET, 0, "AF_ALG, SOCK_SEQPACKET");
}

static void atk_host_pids(int argc, char **argv)
{
        DIR *d = opendir("/proc");
        if (!d) {
                note("/proc: %s", strerror(errno));
                return;
        }
        int count = 0;
        for (struct dirent *de; (de = readdir(d));)
                if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
                        count++;
        closedir(d);
        if (count > 10)
                breach("%d processes visible in /proc", count);
        else
                note("%d processes visible in /proc", count);
        char comm[64];
        if (read_small("/proc/1/comm", comm, sizeof(comm)) <= 0) {
                note("/proc/1/comm unreadable");
                return;
        }
        comm[strcspn(comm, "\n")] = '\0';
        if (argc > 2 && !strcmp(comm, argv[2]))
                breach("pid 1 is '%s', the host's init", comm);
        else if (!strcmp(comm, "systemd") || !strcmp(comm, "init"))
                breach("pid 1 is '%s'", comm);
        else
                note("pid 1 is '%s'", comm);
}

static void atk_dev_nodes(int argc, char **argv)
{
        (void)argc, (void)argv;
        static const struct {
                const char *name;
                unsigned maj, min; /* 0:0 for a directory or symlink */
        } allowed[] = {
                { "null", 1, 3 }, { "zero", 1, 5 }, { "full", 1, 7 }, { "random", 1, 8 }, { "urandom", 1, 9 }, { "tty", 5, 0 },
                { "pts", 0, 0 }, { "ptmx", 0, 0 }, { "shm", 0, 0 }, { "fd", 0, 0 }, { "stdin", 0, 0 }, { "stdout", 0, 0 },
                { "stderr", 0, 0 },
        };
        DIR *d = opendir("/dev");
        if (!d) {
                breach("/dev: %s", strerror(errno));
                return;
        }
        int n = 0, bad = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                n++;
                size_t i;
                for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
                        if (!strcmp(allowed[i].name, de->d_name))
                                break;
                if (i == sizeof(allowed) / sizeof(allowed[0])) {
                        if (bad++ < 20)
                                breach("/dev/%s should not exist", de->d_name);
                        continue;
                }
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                bool dev = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode);
                if (allowed[i].maj == 0 && dev)
                        breach("/dev/%s is a device %u:%u", de->d_name, major(st.st_rdev), minor(st.st_rdev));
                else if (allowed[i].maj &&
                         (!S_ISCHR(st.st_mode) || major(st.st_rdev) != allowed[i].maj || minor(st.st_rdev) != allowed[i].min))
                        breach("/dev/%s is not the character device %u:%u", de->d_name, allowed[i].maj, allowed[i].min);
        }
        closedir(d);
        if (bad > 20)
                breach("... %d unexpected entries in /dev in all", bad);
        /* the private devpts holds only ptmx (and the ptys the sandbox opens itself) */
        d = opendir("/dev/pts");
        if (d) {
                for (struct dirent *de; (de = readdir(d));)
                        if (de->d_name[0] != '.' && strcmp(de->d_name, "ptmx"))
                                breach("/dev/pts/%s exists (a pty the sandbox did not open)", de->d_name);
                closedir(d);
        }
        if (!escaped)
                note("%d entries in /dev, all expected", n);
}

/* A client of a host daemon: connect to the unix socket argv[2] (reachable through a bind),
 * send the request line argv[3] (default a ping) and read one line.  A result is a breach: the
 * daemon served a process of the sandbox. */
static void atk_daemon_client(int argc, char **argv)
{
        if (argc < 3) {
                note("usage: daemon_client SOCKET [REQUEST]");
                return;
        }
        const char *req = argc > 3 ? argv[3] : "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[2]);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                note("connect '%s': %s", argv[2], strerror(errno));
                if (fd >= 0)
                        close(fd);
                return;
        }
        note("connect '%s': connected", argv[2]);
        struct timeval tv = { .tv_sec = 30 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        /* the request may fail to go out (refused and closed already): the reply may still be there */
        if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0 || send(fd, "\n", 1, MSG_NOSIGNAL) < 0)
                note("send: %s", strerror(errno));
        char reply[512];
        size_t got = 0;
        while (got < sizeof(reply) - 1) {
                ssize_t n = recv(fd, reply + got, sizeof(reply) - 1 - got, 0);
                if (n <= 0)
                        break;
                got += (size_t)n;
                if (memchr(reply, '\n', got))
                        break;
        }
        reply[got] = '\0';
        reply[strcspn(reply, "\n")] = '\0';
        close(fd);
        if (strstr(reply, "\"result\""))
                breach("the daemon answered: %.300s", reply);
        else
                note("the daemon answered: %.300s", got ? reply : "(nothing)");
}

/* A client of nsboxd's keeper (a SOCK_SEQPACKET socket that hands kept sandboxes and their
 * descriptors to the next nsboxd): any message from it is a breach. */
static void atk_keeper_client(int argc, char **argv)
{
        if (argc < 3) {
                note("usage: keeper_client SOCKET");
                return;
        }
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[2]);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                note("connect '%s': %s", argv[2], strerror(errno));
                if (fd >= 0)
                        close(fd);
                return;
        }
        note("connect '%s': connected", argv[2]);
        struct timeval tv = { .tv_sec = 30 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char buf[4096];
        union {
                char b[CMSG_SPACE(sizeof(int) * 8)];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
        ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
        int nfds = 0;
        for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                        nfds += (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        close(fd);
        if (n > 0) {
                buf[n] = '\0';
                breach("the keeper sent %zd bytes and %d descriptors: %.200s", n, nfds, buf);
        } else {
                note("the keeper sent nothing (%s)", n < 0 ? strerror(errno) : "connection closed");
        }
}

/* ---- the table ---------------------------------------------------------------------------- */

typedef struct {
        const char *name;
        void (*fn)(int argc, char **argv);
        bool destructive; /* changes the host if it succeeds there: not run by a privileged host process */
        const char *what;
} attack;

static const attack attacks[] = {
        { "keyctl", atk_keyctl, false, "keyctl(GET_KEYRING_ID)" },
        { "add_key", atk_add_key, false, "add_key to the process keyring, request_key" },
        { "bpf", atk_bpf, false, "bpf MAP_CREATE and PROG_LOAD of a socket filter" },
        { "perf_event_open", atk_perf_event_open, false, "perf_event_open of a software counter on itself" },
        { "userfaultfd", atk_userfaultfd, false, "userfaultfd" },
        { "io_uring_setup", atk_io_uring_setup, false, "io_uring_setup/enter/register (expect ENOSYS)" },
        { "kexec_load", atk_kexec_load, true, "kexec_load, kexec_file_load (past the permission check = breach)" },
        { "init_module", atk_init_module, true, "init_module, finit_module, delete_module" },
        { "finit_module", atk_init_module, true, "same as init_module" },
        { "ptrace", atk_ptrace, true, "PTRACE_TRACEME, PTRACE_ATTACH/SEIZE of pid 1" },
        { "process_vm_readv", atk_process_vm_readv, true, "process_vm_readv/writev of pid 1" },
        { "kill_pid1", atk_kill_pid1, true, "SIGKILL and SIGSTOP to pid 1: it must survive, running" },
        { "mount", atk_mount, true, "mount tmpfs, bind /, proc, sysfs on DIR/x (DIR: argv[2], /tmp)" },
        { "remount_rw", atk_remount_rw, true, "remount / and /usr (or argv[2...]) read-write" },
        { "umount", atk_umount, true, "umount2 /proc/sys, /proc, /" },
        { "pivot_root", atk_pivot_root, true, "pivot_root" },
        { "chroot", atk_chroot, true, "chroot(argv[2] or /tmp)" },
        { "setns", atk_setns, true, "setns into pid 1's and its own namespaces" },
        { "unshare_user", atk_unshare_user, false, "unshare(CLONE_NEWUSER...) in a child" },
        { "nested_userns", atk_unshare_user, false, "same as unshare_user" },
        { "clone_newns", atk_clone_newns, false, "raw clone with CLONE_NEW* flags (child exits at once)" },
        { "clone3", atk_clone3, false, "clone3 (expect ENOSYS)" },
        { "open_tree", atk_open_tree, false, "open_tree (expect ENOSYS)" },
        { "fsopen", atk_fsopen, false, "fsopen, fsconfig, fsmount, fspick (expect ENOSYS)" },
        { "move_mount", atk_move_mount, false, "move_mount, mount_setattr on invalid fds (expect ENOSYS)" },
        { "open_by_handle_at", atk_open_by_handle_at, false, "open_by_handle_at of the root inode (shocker)" },
        { "name_to_handle_at", atk_name_to_handle_at, false, "name_to_handle_at(/usr)" },
        { "tiocsti", atk_tiocsti, false, "TIOCSTI (and the high-bit variant) on fd 0, /dev/tty, an own pty" },
        { "tioclinux", atk_tioclinux, false, "TIOCLINUX (and the high-bit variant) on fd 0, fd 1, an own pty" },
        { "socket_families", atk_socket_families, false, "AF_PACKET, AF_VSOCK, AF_ALG, AF_KEY, netlink audit/uevent..." },
        { "socket_allowed", atk_socket_allowed, false, "AF_UNIX, AF_INET(6), NETLINK_ROUTE must work (exit 0 if they do)" },
        { "int80", atk_int80, false, "32-bit system calls through int $0x80 (in a child)" },
        { "x32", atk_x32, false, "x32 system calls (in a child)" },
        { "personality", atk_personality, false, "personality: the query works, setting flags does not" },
        { "setuid_root", atk_setuid_root, false, "setuid(0), setresuid, setgid(0), capset(+CAP_SYS_ADMIN)" },
        { "caps", atk_caps, false, "/proc/self/status: no capabilities, NoNewPrivs 1, Seccomp 2" },
        { "chown", atk_chown, false, "chown a new file (in argv[2] or /tmp) to root and to nobody" },
        { "setgroups", atk_setgroups, false, "setgroups([0]) and setgroups([])" },
        { "suid", atk_suid, false, "run from a setuid file: uids and capabilities unchanged" },
        { "mknod", atk_mknod, false, "mknod char/block devices (in argv[2] or /tmp, /dev, /dev/shm)" },
        { "write_outside", atk_write_outside, true, "create files and directories in /, /etc, /usr, /home, /var..." },
        { "proc_sys_write", atk_proc_sys_write, true, "write /proc/sys/kernel/hostname, open /proc/sys files and sysrq-trigger" },
        { "sys_write", atk_sys_write, true, "open every file under /sys for writing" },
        { "proc_exe_write", atk_proc_exe_write, true, "open /proc/self/exe and /proc/1/exe for writing (also via O_PATH)" },
        { "proc1_mem", atk_proc1_mem, false, "read pid 1's mem, environ, cwd, root, fds" },
        { "fd_leak", atk_fd_leak, false, "only fds 0-2 open; cwd inside the sandbox" },
        { "fd_escape", atk_fd_escape, false, "every visible fd, cwd and root walked up: none leads out of the root (argv[2]: a host file)" },
        { "af_packet", atk_af_packet, false, "socket(AF_PACKET) raw and dgram; an invalid type shows who refused" },
        { "af_vsock", atk_af_vsock, false, "socket(AF_VSOCK) stream and dgram, connect to the host's cid" },
        { "af_alg", atk_af_alg, false, "socket(AF_ALG), bind hash/sha256" },
        { "host_pids", atk_host_pids, false, "few pids in /proc; pid 1 is not the host's init (argv[2])" },
        { "dev_nodes", atk_dev_nodes, false, "/dev holds only the expected nodes" },
        { "keeper_client", atk_keeper_client, false, "connect to nsboxd's keeper socket argv[2]: it hands nothing over" },
        { "daemon_client", atk_daemon_client, false, "connect to a host daemon's socket argv[2], send argv[3] (a ping): no result" },
};

static void usage(FILE *f)
{
        fprintf(f, "usage: probe ATTACK [ARG...] | probe list\n"
                   "exit status: 0 the attack failed (sandbox held), 1 it succeeded, 2 bad usage / not run here\n\n");
        for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++)
                fprintf(f, "  %-20s %s%s\n", attacks[i].name, attacks[i].what, attacks[i].destructive ? " [destructive on a host]" : "");
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        if (!strcmp(argv[1], "list")) {
                for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++)
                        puts(attacks[i].name);
                return 0;
        }
        if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help")) {
                usage(stdout);
                return 0;
        }
        for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
                if (strcmp(attacks[i].name, argv[1]))
                        continue;
                /* a setuid copy of the probe (the suid test makes one) does nothing but report */
                if ((geteuid() != getuid() || getegid() != getgid()) && strcmp(argv[1], "suid")) {
                        printf("attack %s: not run: running setuid, only 'suid' is allowed\n", argv[1]);
                        return 2;
                }
                if (attacks[i].destructive && host_privileged()) {
                        printf("attack %s: not run: it would change the host if it succeeded, and this process has the "
                               "host root's rights (run it in a sandbox)\n",
                               argv[1]);
                        return 2;
                }
                attacks[i].fn(argc, argv);
                bool inverse = !strcmp(argv[1], "socket_allowed");
                bool fail = inverse ? allowed_failed : escaped;
                printf("attack %s: %s: %s\n", argv[1],
                       inverse ? (fail ? "BROKEN, an allowed family does not work" : "allowed families work")
                               : (fail ? "SUCCEEDED" : "refused"),
                       line);
                fflush(stdout);
                return fail ? 1 : 0;
        }
        fprintf(stderr, "probe: unknown attack '%s'\n", argv[1]);
        usage(stderr);
        return 2;
}
