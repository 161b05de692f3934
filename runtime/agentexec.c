/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Starting nsbox-agent (agentexec.h). */
#include "agentexec.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps.h"
#include "sync.h"
#include "util.h"

#ifndef NSBOX_AGENTDIR
#define NSBOX_AGENTDIR "/usr/local/libexec/nsbox"
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

static int agent_fd = -1;

/* The directory of the running program, or of libnsbox.so (-fPIC without -fPIE), whose program
 * is anywhere. */
static int self_dir(char *buf, size_t size)
{
#if defined(__PIC__) && !defined(__PIE__)
        Dl_info info;
        char path[PATH_MAX];
        if (!dladdr((void *)self_dir, &info) || !info.dli_fname || !strchr(info.dli_fname, '/') || !realpath(info.dli_fname, path))
                return -ENOENT;
        snprintf(buf, size, "%s", path);
#else
        ssize_t n = readlink("/proc/self/exe", buf, size - 1);
        if (n <= 0)
                return -ENOENT;
        buf[n] = '\0';
#endif
        char *slash = strrchr(buf, '/');
        if (!slash)
                return -ENOENT;
        *slash = '\0';
        return 0;
}

/* A regular executable file. */
static int open_program(const char *path)
{
        int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        int e = 0;
        if (fstat(fd, &st) < 0)
                e = errno;
        else if (!S_ISREG(st.st_mode))
                e = S_ISDIR(st.st_mode) ? EISDIR : EACCES;
        else if (!(st.st_mode & 0111))
                e = EACCES;
        if (e) {
                close(fd);
                return -e;
        }
        return fd;
}

int nsbox_agent_program_open(nsbox_error *err)
{
        if (__atomic_load_n(&agent_fd, __ATOMIC_ACQUIRE) >= 0)
                return 0;
        char dir[PATH_MAX], path[PATH_MAX + 32];
        const char *env = secure_getenv("NSBOX_AGENT");
        int fd = -ENOENT;
        if (env && *env) {
                snprintf(path, sizeof(path), "%s", env);
                fd = open_program(path);
        } else {
                if (self_dir(dir, sizeof(dir)) == 0) {
                        snprintf(path, sizeof(path), "%s/" NSBOX_AGENT_NAME, dir);
                        fd = open_program(path);
                }
                if (fd == -ENOENT) {
                        snprintf(path, sizeof(path), "%s/" NSBOX_AGENT_NAME, NSBOX_AGENTDIR);
                        fd = open_program(path);
                }
        }
        if (fd < 0)
                return nsbox_err(err, -fd, "open the sandbox agent '%s'", path);
        int none = -1;
        if (!__atomic_compare_exchange_n(&agent_fd, &none, fd, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                close(fd); /* another thread was first: one fd for the process */
        return 0;
}

int nsbox_agent_spec_memfd(const nsbox_policy *p, const nsbox_idmap *map, const nsbox_egress_set *eg, nsbox_error *err)
{
        _cleanup_sb_ strbuf buf;
        sb_init(&buf, NSBOX_SPEC_MAX_BYTES);
        int r = nsbox_spec_encode(p, map, eg, &buf, err);
        if (r < 0)
                return r;
        /* not executable where the kernel can say so (vm.memfd_noexec); older ones refuse the flag */
        _cleanup_close_ int fd = memfd_create("nsbox-agent-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
        if (fd < 0 && errno == EINVAL)
                fd = memfd_create("nsbox-agent-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return nsbox_err(err, errno, "create the agent's spec");
        if ((r = write_full(fd, buf.buf, buf.len)) < 0)
                return nsbox_err(err, -r, "write the agent's spec");
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return nsbox_err(err, errno, "seal the agent's spec");
        return steal_fd(&fd);
}

static _Noreturn void exec_failed(int syncfd, nsbox_error *err)
{
        nsbox_err_wrap(err, -1, "start the sandbox's agent");
        nsbox_sync_send_error(syncfd, err, "start the sandbox's agent");
        _exit(125);
}

/* The sources in a sealed memfd (no close-on-exec: it crosses the exec), or -errno. */
static int sources_memfd(const nsbox_sources *src, size_t n_mounts, int **ret_fds, size_t *ret_n)
{
        _cleanup_sb_ strbuf buf;
        sb_init(&buf, NSBOX_SPEC_MAX_BYTES);
        int r = nsbox_sources_encode(src, n_mounts, &buf, ret_fds, ret_n);
        if (r < 0)
                return r;
        int fd = memfd_create("nsbox-agent-sources", MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
        if (fd < 0 && errno == EINVAL)
                fd = memfd_create("nsbox-agent-sources", MFD_ALLOW_SEALING);
        if (fd < 0 || (r = write_full(fd, buf.buf, buf.len)) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
                r = fd < 0 || r == 0 ? -errno : r;
                if (fd >= 0)
                        close(fd);
                free(*ret_fds);
                return r;
        }
        return fd;
}

_Noreturn void nsbox_agent_exec(int syncfd, int protofd, int specfd, const nsbox_sources *src, size_t n_mounts, bool outlive_parent)
{
        nsbox_error err = { 0 };
        /* The parent's death kills us from here on, through the exec (which keeps it: the exec
         * neither changes our ids nor gains capabilities); the agent sets it again at step 7. */
        if (!outlive_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
                nsbox_err(&err, errno, "set parent-death signal");
                exec_failed(syncfd, &err);
        }
        if (nsbox_caps_keep_across_exec(&err) < 0)
                exec_failed(syncfd, &err);
        int *srcfds = NULL;
        size_t n_src = 0;
        int memfd = sources_memfd(src, n_mounts, &srcfds, &n_src);
        if (memfd < 0) {
                nsbox_err(&err, -memfd, "pass the sandbox's sources to its agent");
                exec_failed(syncfd, &err);
        }
        /* 8. Each fd to its number: the fixed ones (the program last, close-on-exec), then the
         * sources' memfd and the sources.  First all above the targets, so that no dup2
         * overwrites one still to be moved, then down; everything else is closed, so that no fd
         * of the launcher's crosses the exec (runc CVE-2024-21626). */
        enum { FIXED = 4, FIRST = NSBOX_AGENT_SYNC_FD };
        size_t n = FIXED + 1 + n_src;
        int *from = calloc(n, sizeof(int)), *high = calloc(n, sizeof(int));
        if (!from || !high) {
                nsbox_err(&err, ENOMEM, "pass the sandbox's sources to its agent");
                exec_failed(syncfd, &err);
        }
        from[0] = syncfd, from[1] = protofd, from[2] = specfd, from[3] = __atomic_load_n(&agent_fd, __ATOMIC_ACQUIRE);
        from[FIXED] = memfd;
        for (size_t i = 0; i < n_src; i++)
                from[FIXED + 1 + i] = srcfds[i];
        for (size_t i = 0; i < n; i++)
                if ((high[i] = fcntl(from[i], F_DUPFD_CLOEXEC, FIRST + (int)n)) < 0) {
                        nsbox_err(&err, errno, "move fd %d", from[i]);
                        exec_failed(syncfd, &err);
                }
        for (size_t i = 0; i < n; i++)
                if (dup3(high[i], FIRST + (int)i, i == FIXED - 1 ? O_CLOEXEC : 0) < 0) {
                        nsbox_err(&err, errno, "move fd %d", from[i]);
                        exec_failed(high[0], &err);
                }
        syscall(SYS_close_range, FIRST + (int)n, ~0u, 0);
        char count[24];
        snprintf(count, sizeof(count), "%zu", n_src);
        char *const argv[] = { NSBOX_AGENT_NAME, count, NULL }, *const envp[] = { NULL };
        syscall(SYS_execveat, FIRST + FIXED - 1, "", argv, envp, AT_EMPTY_PATH);
        nsbox_err(&err, errno, "execute " NSBOX_AGENT_NAME);
        exec_failed(NSBOX_AGENT_SYNC_FD, &err);
}
