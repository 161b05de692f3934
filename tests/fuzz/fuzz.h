/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by the fuzz harnesses.  Each harness is one file with one entry point, built twice:
 * with libFuzzer by `make fuzz` (the entry is LLVMFuzzerTestOneInput), and into the unit tier
 * with -DNSBOX_FUZZ_REPLAY (the entry is nsbox_fuzz_<target>), which replays every file of
 * tests/fuzz/corpus/<target>/ and tests/fuzz/regress/<target>/ through it (fuzz_test.c).
 * A harness never touches the host outside a temporary directory of its own. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef NSBOX_FUZZ_REPLAY
#define FUZZ_ENTRY(target) int nsbox_fuzz_##target(const uint8_t *data, size_t size)
#else
#define FUZZ_ENTRY(target) int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
#endif

/* A property the code promises does not hold: report it and abort, which both libFuzzer and the
 * unit tier (a forked test) count as a crash with this message. */
#define FUZZ_CHECK(cond, ...)                                                      \
        do {                                                                       \
                if (!(cond)) {                                                     \
                        fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
                        fprintf(stderr, __VA_ARGS__);                              \
                        fputc('\n', stderr);                                       \
                        abort();                                                   \
                }                                                                  \
        } while (0)
