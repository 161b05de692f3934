/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SHA-256 (FIPS 180-4) for trajectory result digests: small, portable, no dependencies.  Not
 * constant-time and not meant for secrets. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define NSBOX_SHA256_SIZE 32

typedef struct nsbox_sha256 {
        uint32_t state[8];
        uint64_t total;          /* bytes fed so far */
        uint8_t block[64];       /* the partial block: total % 64 bytes of it are pending */
} nsbox_sha256;

void nsbox_sha256_init(nsbox_sha256 *c);
void nsbox_sha256_update(nsbox_sha256 *c, const void *data, size_t len);
/* The digest; c must be initialized again before it is reused. */
void nsbox_sha256_final(nsbox_sha256 *c, uint8_t out[NSBOX_SHA256_SIZE]);
/* nsbox_sha256_final as 64 lowercase hex digits and a NUL. */
void nsbox_sha256_final_hex(nsbox_sha256 *c, char out[2 * NSBOX_SHA256_SIZE + 1]);
/* The digest of one buffer, in lowercase hex. */
void nsbox_sha256_hex(const void *data, size_t len, char out[2 * NSBOX_SHA256_SIZE + 1]);
