/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* make bench: what a round trip costs on this machine with no work at all (tests/bench/floor.c). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
        int direct, relayed; /* our ends */
        pid_t kids[3];
} floor_rig;

/* Echo processes answering each req bytes with reply bytes: one on r->direct, one behind a
 * relay process on r->relayed. */
void floor_open(floor_rig *r, size_t req, size_t reply);
/* One round trip on fd (r->direct or r->relayed), in ns. */
uint64_t floor_call(int fd, size_t req, size_t reply);
/* Ends closed, the processes reaped. */
void floor_close(floor_rig *r);
