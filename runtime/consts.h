/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Symbolic names accepted in policies (errno values, seccomp argument constants, socket
 * families, netlink protocols), so policy files read like the man pages they cite. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

bool nsbox_errno_from_name(const char *name, int *ret);
bool nsbox_const_from_name(const char *name, uint64_t *ret);
bool nsbox_af_from_name(const char *name, int *ret);
bool nsbox_netlink_from_name(const char *name, int *ret);
#define NSBOX_AF_MAX 64
#define NSBOX_NETLINK_MAX 32
