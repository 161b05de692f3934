/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "json.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

size_t nsbox_utf8_seq(const unsigned char *s, size_t n)
{
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        if (c < 0xc2)
                return 0;
        if (c < 0xe0)
                return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
        if (c < 0xf0) {
                if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
                        return 0;
                if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))
                        return 0;
                return 3;
        }
        if (c < 0xf5) {
                if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
                        return 0;
                if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
                        return 0;
                return 4;
        }
        return 0;
}

/* True when the 8 bytes at s are ASCII and none is NUL: the common case, checked a word at a time. */
static inline bool plain_ascii8(const unsigned char *s)
{
        uint64_t w;
        memcpy(&w, s, sizeof(w));
        const uint64_t high = 0x8080808080808080ull, ones = 0x0101010101010101ull;
        return !(w & high) && !((w - ones) & ~w & high);
}

json_t *nsbox_json_text(const char *s, size_t n, bool *ret_lossy)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t i = 0;
        if (ret_lossy)
                *ret_lossy = false;
        /* Most text is valid: find the first byte that is not, without copying. */
        while (i < n) {
                if (n - i >= 8 && plain_ascii8(u + i)) {
                        i += 8;
                        continue;
                }
                size_t k = u[i] ? nsbox_utf8_seq(u + i, n - i) : 0;
                if (k == 0)
                        break;
                i += k;
        }
        if (i == n)
                return json_stringn_nocheck(s, n);

        if (ret_lossy)
                *ret_lossy = true;
        _cleanup_sb_ strbuf sb;
        sb_init(&sb, 0);
        /* Copy runs of valid text, each invalid byte replaced by U+FFFD. */
        size_t run = 0;
        while (i < n) {
                size_t k = u[i] ? nsbox_utf8_seq(u + i, n - i) : 0;
                if (k) {
                        i += k;
                        continue;
                }
                if (sb_append(&sb, s + run, i - run) < 0 || sb_append(&sb, "\xef\xbf\xbd", 3) < 0)
                        return NULL;
                run = ++i;
        }
        if (sb_append(&sb, s + run, n - run) < 0)
                return NULL;
        return json_stringn_nocheck(sb.buf, sb.len);
}

/* ---- large strings -------------------------------------------------------------------------- */

#define MAX_BLOBS 16

typedef struct blob {
        const char *p;
        size_t len;
} blob;

/* A placeholder no client can forge: a per-process random tag, as a JSON string "\u0001<tag>N". */
static const char *blob_tag(void)
{
        static char tag[40];
        if (!tag[0]) {
                unsigned char r[8] = { 0 };
                int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                        (void)!read(fd, r, sizeof(r));
                        close(fd);
                }
                snprintf(tag, sizeof(tag), "nsbox-blob-%02x%02x%02x%02x%02x%02x%02x%02x-", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
        }
        return tag;
}

static int blob_index(const char *s, size_t n)
{
        const char *tag = blob_tag();
        size_t tl = strlen(tag);
        if (n < tl + 2 || n > tl + 3 || s[0] != '\x01' || memcmp(s + 1, tag, tl))
                return -1;
        int idx = 0;
        for (size_t i = tl + 1; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                idx = idx * 10 + (s[i] - '0');
        }
        return idx < MAX_BLOBS ? idx : -1;
}

/* Every string of j (objects and arrays, at any depth) for which fn returns a replacement gets
 * it (fn's reference is taken).  -1 when a replacement could not be made or set. */
typedef json_t *(*string_map_fn)(json_t *s, void *userdata, bool *ret_failed);

static int map_strings(json_t *j, string_map_fn fn, void *userdata)
{
        bool failed = false;
        if (json_is_object(j)) {
                const char *k;
                json_t *v;
                void *tmp;
                json_object_foreach_safe(j, tmp, k, v) {
                        json_t *r = json_is_string(v) ? fn(v, userdata, &failed) : NULL;
                        if (failed || (r && json_object_set_new(j, k, r) < 0) || (!r && map_strings(v, fn, userdata) < 0))
                                return -1;
                }
        } else if (json_is_array(j)) {
                size_t i;
                json_t *v;
                json_array_foreach(j, i, v) {
                        json_t *r = json_is_string(v) ? fn(v, userdata, &failed) : NULL;
                        if (failed || (r && json_array_set_new(j, i, r) < 0) || (!r && map_strings(v, fn, userdata) < 0))
                                return -1;
                }
        }
        return 0;
}

typedef struct blob_set {
        blob *b;
        size_t n;
} blob_set;

/* A lifted string put back: json_stringn checks its UTF-8 as jansson would have. */
static json_t *restore_one(json_t *s, void *userdata, bool *ret_failed)
{
        const blob_set *set = userdata;
        int i = blob_index(json_string_value(s), json_string_length(s));
        if (i < 0 || (size_t)i >= set->n)
                return NULL;
        json_t *r = json_stringn(set->b[i].p, set->b[i].len);
        *ret_failed = !r;
        return r;
}

/* Only values are put back (map_strings): a key stays as it is, for jansson to read. */
static bool is_key(const char *after, const char *end)
{
        while (after < end && (*after == ' ' || *after == '\t' || *after == '\n' || *after == '\r'))
                after++;
        return after < end && *after == ':';
}

/* jansson refuses a control character in a string; a lifted string must be refused alike. */
static bool has_control(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20)
                        return true;
        return false;
}

json_t *nsbox_json_loadb(const char *text, size_t len, json_error_t *je)
{
        if (len < NSBOX_JSON_BIG)
                return json_loadb(text, len, JSON_REJECT_DUPLICATES, je);
        blob b[MAX_BLOBS];
        size_t nb = 0;
        strbuf small;
        sb_init(&small, 0);
        const char *p = text, *end = text + len, *copied = text;
        const char *tag = blob_tag();
        while (p < end) {
                const char *q = memchr(p, '"', (size_t)(end - p)); /* a string starts */
                if (!q)
                        break;
                const char *s = q + 1, *e = s;
                bool escapes = false;
                for (;;) { /* its end: the next quote not escaped */
                        const char *quote = memchr(e, '"', (size_t)(end - e));
                        if (!quote) {
                                e = end;
                                break;
                        }
                        const char *bs = memchr(e, '\\', (size_t)(quote - e));
                        if (!bs) {
                                e = quote;
                                break;
                        }
                        escapes = true;
                        e = bs + 2 <= end ? bs + 2 : end;
                }
                if (e >= end)
                        break; /* unterminated: jansson reports it */
                if (!escapes && (size_t)(e - s) >= NSBOX_JSON_BIG && nb < MAX_BLOBS && !is_key(e + 1, end) &&
                    !has_control(s, (size_t)(e - s))) {
                        if (sb_append(&small, copied, (size_t)(s - copied)) < 0 || sb_appendf(&small, "\\u0001%s%zu", tag, nb) < 0) {
                                sb_release(&small);
                                return NULL;
                        }
                        b[nb++] = (blob){ s, (size_t)(e - s) };
                        copied = e;
                }
                p = e + 1;
        }
        if (nb == 0) {
                sb_release(&small);
                return json_loadb(text, len, JSON_REJECT_DUPLICATES, je);
        }
        if (sb_append(&small, copied, (size_t)(end - copied)) < 0) {
                sb_release(&small);
                return NULL;
        }
        json_t *j = json_loadb(small.buf, small.len, JSON_REJECT_DUPLICATES, je);
        sb_release(&small);
        blob_set set = { b, nb };
        if (j && map_strings(j, restore_one, &set) < 0) {
                json_decref(j);
                if (je)
                        snprintf(je->text, sizeof(je->text), "invalid UTF-8 in a string");
                return NULL;
        }
        return j;
}

/* True when none of the 8 bytes at s needs a look: no control character, '"', '\\', DEL or
 * non-ASCII byte (a word at a time: base64 is all such bytes). */
static inline bool plain_json8(const unsigned char *s)
{
        uint64_t w;
        memcpy(&w, s, sizeof(w));
        const uint64_t high = 0x8080808080808080ull, ones = 0x0101010101010101ull;
#define HAS_ZERO(v) (((v) - ones) & ~(v) & high)
        uint64_t bad = (w & high) | ((w - 0x20 * ones) & ~w & high) | HAS_ZERO(w ^ ('"' * ones)) | HAS_ZERO(w ^ ('\\' * ones)) |
                       HAS_ZERO(w ^ (0x7f * ones));
#undef HAS_ZERO
        return !bad;
}

/* A string jansson would write as it is (JSON_COMPACT, no JSON_ENSURE_ASCII): nothing to escape
 * and valid UTF-8 (invalid UTF-8 is left to jansson, which refuses to dump it). */
static bool needs_no_escape(const char *s, size_t n)
{
        const unsigned char *u = (const unsigned char *)s;
        for (size_t i = 0; i < n;) {
                if (n - i >= 8 && plain_json8(u + i)) {
                        i += 8;
                        continue;
                }
                unsigned char c = u[i];
                if (c < 0x80) {
                        if (c < 0x20 || c == '"' || c == '\\' || c == 0x7f)
                                return false;
                        i++;
                        continue;
                }
                size_t k = nsbox_utf8_seq(u + i, n - i);
                if (k == 0)
                        return false;
                i += k;
        }
        return true;
}

typedef struct swap_state {
        json_t *saved[MAX_BLOBS]; /* the big strings, by placeholder number */
        size_t n;
} swap_state;

/* A big string that needs no escaping, swapped for a placeholder (and remembered). */
static json_t *swap_out(json_t *s, void *userdata, bool *ret_failed)
{
        swap_state *st = userdata;
        if (st->n >= MAX_BLOBS || json_string_length(s) < NSBOX_JSON_BIG || !needs_no_escape(json_string_value(s), json_string_length(s)))
                return NULL;
        char ph[64];
        snprintf(ph, sizeof(ph), "\x01%s%zu", blob_tag(), st->n);
        json_t *r = json_string(ph);
        if (!r) {
                *ret_failed = true;
                return NULL;
        }
        st->saved[st->n++] = json_incref(s);
        return r;
}

/* A placeholder swapped back for its string. */
static json_t *swap_in(json_t *s, void *userdata, bool *ret_failed)
{
        (void)ret_failed;
        swap_state *st = userdata;
        int i = blob_index(json_string_value(s), json_string_length(s));
        return i >= 0 && (size_t)i < st->n ? json_incref(st->saved[i]) : NULL;
}

const char *nsbox_json_unknown_key(json_t *obj, const char *const *known)
{
        const char *key;
        json_t *v;
        json_object_foreach(obj, key, v) {
                const char *const *k = known;
                while (*k && strcmp(*k, key))
                        k++;
                if (!*k)
                        return key;
        }
        return NULL;
}

static char *dumps_with(json_t *json, int precision, size_t *ret_len)
{
        swap_state st = { .n = 0 };
        char *text = NULL;
        if (map_strings(json, swap_out, &st) == 0)
                text = json_dumps(json, JSON_COMPACT | JSON_REAL_PRECISION(precision));
        map_strings(json, swap_in, &st); /* the caller's value is as it was, and holds the strings */
        json_t **orig = st.saved;
        size_t n = st.n;
        for (size_t i = 0; i < n; i++)
                json_decref(orig[i]); /* still alive, borrowed from json from here on */
        if (!text || n == 0) {
                if (text)
                        *ret_len = strlen(text);
                return text;
        }
        /* splice: each placeholder appears once, as "\u0001<tag>N" */
        strbuf out;
        sb_init(&out, 0);
        const char *p = text, *tag = blob_tag();
        char ph[80];
        for (;;) {
                const char *best = NULL;
                size_t which = 0, phlen = 0;
                for (size_t i = 0; i < n; i++) {
                        int l = snprintf(ph, sizeof(ph), "\\u0001%s%zu\"", tag, i);
                        const char *at = strstr(p, ph);
                        if (at && (!best || at < best)) {
                                best = at;
                                which = i;
                                phlen = (size_t)l - 1;
                        }
                }
                if (!best)
                        break;
                if (sb_append(&out, p, (size_t)(best - p)) < 0 ||
                    sb_append(&out, json_string_value(orig[which]), json_string_length(orig[which])) < 0) {
                        sb_release(&out);
                        free(text);
                        return NULL;
                }
                p = best + phlen;
        }
        if (sb_append(&out, p, strlen(p)) < 0) {
                sb_release(&out);
                free(text);
                return NULL;
        }
        free(text);
        *ret_len = out.len;
        return out.buf;
}

char *nsbox_json_escape_c1(const char *json)
{
        strbuf out;
        sb_init(&out, 0);
        int r = sb_append(&out, "", 0);
        for (const unsigned char *p = (const unsigned char *)json; r == 0 && *p; p++) {
                if (*p == 0x7f)
                        r = sb_append(&out, "\\u007f", 6);
                else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
                        r = sb_appendf(&out, "\\u%04x", (unsigned)*++p);
                else
                        r = sb_append(&out, p, 1);
        }
        if (r < 0) {
                sb_release(&out);
                return NULL;
        }
        return out.buf;
}

char *nsbox_json_dumps(json_t *json, size_t *ret_len)
{
        return dumps_with(json, 17, ret_len);
}

/* For a reader, not a parser: 15 digits print the 2.039 a tool measured, where 17 print
 * 2.0390000000000001 (the double nearest 2.039).  Only digits past the 15th are dropped. */
char *nsbox_json_dumps_read(json_t *json, size_t *ret_len)
{
        return dumps_with(json, 15, ret_len);
}
