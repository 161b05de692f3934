/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <linux/filter.h>

#include "error.h"
#include "policy.h"

/* Compile the policy's rules to a BPF program before any namespace exists, so a bad rule is
 * reported up front and the sandbox's last step is a single seccomp(2) call. */
typedef struct nsbox_bpf {
        struct sock_filter *insns;
        unsigned short len;
} nsbox_bpf;

int nsbox_seccomp_compile(const nsbox_policy *p, nsbox_bpf *ret, nsbox_error *err);
int nsbox_seccomp_install(const nsbox_bpf *bpf); /* 0 or -errno; needs no_new_privs set */
void nsbox_bpf_release(nsbox_bpf *bpf);
