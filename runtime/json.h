/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* JSON helpers over jansson shared by every part that reads or writes JSON (the agent's protocol,
 * policies, nsboxd's configuration, the store's manifests, trajectories): text from bytes that
 * need not be UTF-8, fast load and dump of texts with multi-megabyte strings, strict key checks. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (n > 0 bytes left; NUL counts as one), or 0 when none
 * starts there (overlong forms, surrogates, code points past U+10FFFF). */
size_t nsbox_utf8_seq(const unsigned char *s, size_t n);
/* A JSON string from bytes that need not be UTF-8 (command output, file contents, names on disk,
 * git output): each invalid byte and each NUL becomes U+FFFD and sets *ret_lossy (if given) to
 * true.  NULL only when out of memory. */
json_t *nsbox_json_text(const char *s, size_t n, bool *ret_lossy);

/* JSON texts with multi-megabyte strings (base64 file contents) for jansson, which lexes and
 * escapes strings a byte at a time: strings of at least NSBOX_JSON_BIG bytes without escapes are
 * lifted out of the text with memchr before parsing and put back afterwards, and spliced in
 * after dumping.  Same results as json_loadb / json_dumps(JSON_COMPACT), several times faster;
 * from 1 KiB on already (a 4 KiB file read as base64 is a 5.5 KiB string on every hop). */
#define NSBOX_JSON_BIG 1024
json_t *nsbox_json_loadb(const char *text, size_t len, json_error_t *je);
char *nsbox_json_dumps(json_t *json, size_t *ret_len);
/* the same with reals to 15 digits: for text a person or a model reads (nsbox mcp) */
char *nsbox_json_dumps_read(json_t *json, size_t *ret_len);
/* The first key of obj that is not in known (NULL-terminated), or NULL: strict parsers (policies,
 * nsboxd's configuration) refuse it, since a typo must not silently weaken what it configures. */
const char *nsbox_json_unknown_key(json_t *obj, const char *const *known);

/* JSON text with DEL and C1 controls inside its strings written as \u escapes: the same value,
 * nothing a terminal acts on (jansson escapes C0 only).  Allocated; NULL when out of memory. */
char *nsbox_json_escape_c1(const char *json);
