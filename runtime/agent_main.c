/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox-agent: the agent of every serve-mode sandbox (nsboxd's, libnsbox's in-process ones),
 * executed by the launcher's clone()d child after step 3's first part (agentexec.h), so that it holds its
 * own sandbox's data and nothing of the process that started it.  It reads its spec from the
 * sealed memfd at NSBOX_AGENT_SPEC_FD, then does what the child did before: the setup of
 * docs/security.md from step 3 (nsbox_sandbox_child_setup, with the sources its launcher's
 * child opened before the exec), then serves the protocol socket.  Errors
 * reach the launcher over the setup channel, as they did from the child. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "agentexec.h"
#include "sandbox.h"
#include "spec.h"
#include "sync.h"
#include "util.h"

static _Noreturn void setup_failed(nsbox_error *err)
{
        nsbox_sync_send_error(NSBOX_AGENT_SYNC_FD, err, "sandbox setup failed");
        _exit(125);
}

/* The whole of a sealed memfd at fd (closed after), at most NSBOX_SPEC_MAX_BYTES, into *ret. */
static int read_memfd(int fd, const char *what, char **ret, size_t *ret_len, nsbox_error *err)
{
        struct stat st;
        int seals = fcntl(fd, F_GET_SEALS);
        if (fstat(fd, &st) < 0 || seals < 0 || !(seals & F_SEAL_WRITE) || st.st_size < 0 || (uint64_t)st.st_size > NSBOX_SPEC_MAX_BYTES)
                return nsbox_err(err, EINVAL, "%s: not a sealed memfd of at most %u bytes", what, NSBOX_SPEC_MAX_BYTES);
        _cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return nsbox_err(err, ENOMEM, "%s", what);
        ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
        if (n != st.st_size)
                return nsbox_err(err, n < 0 ? errno : EIO, "read %s", what);
        close(fd);
        *ret = steal_pointer(&buf);
        *ret_len = (size_t)n;
        return 0;
}

static int read_spec(nsbox_agent_spec *ret, nsbox_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = read_memfd(NSBOX_AGENT_SPEC_FD, "the agent spec", &buf, &len, err);
        return r < 0 ? r : nsbox_spec_decode(buf, len, ret, err);
}

/* Step 3's sources, opened by the child before its exec (nsbox_sandbox_child_prepare). */
static int read_sources(size_t n_fds, size_t n_mounts, nsbox_sources *ret, nsbox_error *err)
{
        *ret = (nsbox_sources){ .trees = NULL, .rootfs_fd = -1, .hides = NULL };
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = read_memfd(NSBOX_AGENT_SOURCES_FD, "the sandbox's sources", &buf, &len, err);
        return r < 0 ? r : nsbox_sources_decode(buf, len, n_mounts, NSBOX_AGENT_SOURCES_FD + 1, n_fds, ret, err);
}

/* Pid 1 of a namespace gets a signal from inside only when it has a handler for it (the kernel's
 * init protection drops the rest): the agent keeps none.  An exec clears the launcher's handlers,
 * but a sanitizer's runtime installs its own (SIGSEGV, SIGBUS, SIGFPE...) before main, and its
 * sigaction() interceptor ignores a reset: the raw system call, which it does not see. */
static void no_signal_handlers(void)
{
        struct {
                void *handler;
                unsigned long flags;
                void *restorer;
                uint64_t mask;
        } dfl = { .handler = SIG_DFL };
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
}

int main(int argc, char **argv)
{
        no_signal_handlers();
        /* Started by hand, not by a launcher: no sealed spec at its fixed fd. */
        int seals = fcntl(NSBOX_AGENT_SPEC_FD, F_GET_SEALS);
        char *end = NULL;
        unsigned long n_fds = argc == 2 ? strtoul(argv[1], &end, 10) : 0;
        if (argc != 2 || !end || *end || end == argv[1] || n_fds > 4096 || seals < 0 || !(seals & F_SEAL_WRITE)) {
                fputs("nsbox-agent: the agent of nsbox's sandboxes, started by nsboxd and libnsbox, not by hand\n", stderr);
                return 2;
        }
        static nsbox_agent_spec spec; /* lives as long as the agent */
        nsbox_error err = { 0 };
        /* 8. They came without close-on-exec, to survive our own exec: no command the agent
         * starts may inherit the setup channel, the protocol socket or a source. */
        for (int fd = NSBOX_AGENT_SYNC_FD; fd <= NSBOX_AGENT_SOURCES_FD + (int)n_fds; fd++)
                if (fd != NSBOX_AGENT_SOURCES_FD - 1 && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
                        nsbox_err(&err, errno, "close-on-exec for fd %d", fd);
                        setup_failed(&err);
                }
        if (read_spec(&spec, &err) < 0)
                setup_failed(&err);
        nsbox_sources src;
        if (read_sources(n_fds, spec.policy->n_mounts, &src, &err) < 0) {
                nsbox_sources_release(&src);
                setup_failed(&err);
        }
        nsbox_egress_set eg = { .v = spec.rules, .n = spec.n_rules, .restricted = spec.restricted, .veth = spec.veth };
        /* The end of 3, then 4 to 7 and 9, as the launcher's child does them in run mode. */
        if (nsbox_sandbox_child_setup(spec.policy, &spec.map, &eg, &src, NSBOX_AGENT_SYNC_FD, NSBOX_AGENT_PROTO_FD, &err) < 0)
                setup_failed(&err);
        nsbox_agent_config c = { .policy = spec.policy,
                                 .argv = NULL,
                                 .syncfd = NSBOX_AGENT_SYNC_FD,
                                 .protofd = NSBOX_AGENT_PROTO_FD,
                                 .tools = nsbox_tool_handlers };
        nsbox_agent_main(&c);
}
