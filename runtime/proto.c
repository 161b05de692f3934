/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base64.h"
#include "util.h"

int nsbox_queue_append(nsbox_queue *q, const void *p, size_t n)
{
        if (n == 0)
                return 0;
        if (q->start > 0 && q->start + q->len + n > q->alloc) { /* reclaim what was written */
                memmove(q->data, q->data + q->start, q->len);
                q->start = 0;
        }
        if (q->start + q->len + n > q->alloc) {
                size_t want = q->alloc ? q->alloc : 65536;
                while (want < q->len + n)
                        want *= 2;
                char *nd = realloc(q->data, want);
                if (!nd)
                        return -ENOMEM;
                q->data = nd;
                q->alloc = want;
        }
        memcpy(q->data + q->start + q->len, p, n);
        q->len += n;
        return 0;
}

int nsbox_queue_flush(nsbox_queue *q, int fd)
{
        while (q->len > 0) {
                ssize_t n = write(fd, q->data + q->start, q->len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : -errno;
                }
                q->start += (size_t)n;
                q->len -= (size_t)n;
        }
        q->start = 0;
        /* an idle queue does not keep a multi-megabyte buffer from one large result */
        if (q->alloc > (1u << 20)) {
                free(q->data);
                q->data = NULL;
                q->alloc = 0;
        }
        return 1;
}

void nsbox_queue_release(nsbox_queue *q)
{
        free(q->data);
        *q = (nsbox_queue){ 0 };
}

static void put_le32(unsigned char *p, uint32_t v)
{
        p[0] = v & 0xff;
        p[1] = (v >> 8) & 0xff;
        p[2] = (v >> 16) & 0xff;
        p[3] = (v >> 24) & 0xff;
}

static uint32_t get_le32(const unsigned char *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static char *dump_json(const json_t *json, size_t *ret_len)
{
        return nsbox_json_dumps((json_t *)json, ret_len);
}

int nsbox_frame_append(nsbox_queue *q, const json_t *json, const void *payload, size_t payload_len)
{
        size_t json_len = 0;
        _cleanup_free_ char *text = dump_json(json, &json_len);
        if (!text)
                return -ENOMEM;
        if (json_len > NSBOX_FRAME_MAX_JSON || payload_len > NSBOX_FRAME_MAX_PAYLOAD)
                return -E2BIG;
        unsigned char h[NSBOX_FRAME_HEADER];
        put_le32(h, (uint32_t)json_len);
        put_le32(h + 4, (uint32_t)payload_len);
        int r;
        if ((r = nsbox_queue_append(q, h, sizeof(h))) < 0 || (r = nsbox_queue_append(q, text, json_len)) < 0 ||
            (r = nsbox_queue_append(q, payload, payload_len)) < 0)
                return r;
        return 0;
}

void nsbox_frame_release(nsbox_frame *f)
{
        json_decref(f->json);
        free(f->payload);
        f->json = NULL;
        f->payload = NULL;
        f->payload_len = 0;
}

void nsbox_frame_reader_release(nsbox_frame_reader *r)
{
        free(r->body);
        *r = (nsbox_frame_reader){ 0 };
}

static ssize_t read_some(int fd, void *buf, size_t n)
{
        for (;;) {
                ssize_t k = read(fd, buf, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (k == 0)
                        return -EPIPE;
                return k;
        }
}

/* Hand the complete body over as a frame; the reader is ready for the next header. */
static void take_frame(nsbox_frame_reader *r, nsbox_frame *ret)
{
        *ret = (nsbox_frame){ 0 };
        json_error_t je;
        r->body[r->json_len] = '\0';
        json_t *j = nsbox_json_loadb(r->body, r->json_len, &je);
        if (j && !json_is_object(j)) {
                json_decref(j);
                j = NULL;
                snprintf(ret->json_error, sizeof(ret->json_error), "a frame must carry a JSON object");
        } else if (!j) {
                snprintf(ret->json_error, sizeof(ret->json_error), "malformed JSON: %.120s", je.text);
        }
        ret->json = j;
        if (r->payload_len) {
                /* the payload is moved to its own buffer so the caller can keep it */
                ret->payload = malloc(r->payload_len);
                if (ret->payload) {
                        memcpy(ret->payload, r->body + r->json_len + 1, r->payload_len);
                        ret->payload_len = r->payload_len;
                }
        }
        free(r->body);
        r->body = NULL;
        r->header_got = r->body_got = r->json_len = r->payload_len = 0;
}

int nsbox_frame_read(nsbox_frame_reader *r, int fd, nsbox_frame *ret)
{
        for (;;) {
                if (r->skip > 0) {
                        char sink[65536];
                        ssize_t k = read_some(fd, sink, r->skip < sizeof(sink) ? (size_t)r->skip : sizeof(sink));
                        if (k <= 0)
                                return (int)k;
                        r->skip -= (uint64_t)k;
                        if (r->skip == 0 && r->oversized) {
                                r->oversized = false;
                                r->header_got = 0;
                                return -E2BIG;
                        }
                        continue;
                }
                if (r->header_got < NSBOX_FRAME_HEADER) {
                        ssize_t k = read_some(fd, r->header + r->header_got, NSBOX_FRAME_HEADER - r->header_got);
                        if (k <= 0)
                                return (int)k;
                        r->header_got += (size_t)k;
                        if (r->header_got < NSBOX_FRAME_HEADER)
                                continue;
                        uint32_t jl = get_le32(r->header), pl = get_le32(r->header + 4);
                        if (jl > NSBOX_FRAME_MAX_JSON || pl > NSBOX_FRAME_MAX_PAYLOAD) {
                                r->skip = (uint64_t)jl + pl;
                                r->oversized = true;
                                if (r->skip == 0) /* cannot happen: kept for clarity */
                                        return -E2BIG;
                                continue;
                        }
                        r->json_len = jl;
                        r->payload_len = pl;
                        r->body_got = 0;
                        r->body = malloc(r->json_len + 1 + r->payload_len);
                        if (!r->body)
                                return -ENOMEM;
                }
                size_t total = r->json_len + r->payload_len;
                while (r->body_got < total) {
                        /* the NUL slot after the JSON is skipped over */
                        size_t at = r->body_got < r->json_len ? r->body_got : r->body_got + 1;
                        size_t want = r->body_got < r->json_len ? r->json_len - r->body_got : total - r->body_got;
                        ssize_t k = read_some(fd, r->body + at, want);
                        if (k <= 0)
                                return (int)k;
                        r->body_got += (size_t)k;
                }
                take_frame(r, ret);
                return 1;
        }
}

int nsbox_frame_send(int fd, const json_t *json, const void *payload, size_t payload_len)
{
        nsbox_queue q = { 0 };
        int r = nsbox_frame_append(&q, json, payload, payload_len);
        if (r == 0)
                r = write_full(fd, q.data + q.start, q.len);
        nsbox_queue_release(&q);
        return r;
}

int nsbox_frame_recv(int fd, nsbox_frame *ret)
{
        nsbox_frame_reader r = { 0 };
        for (;;) {
                int k = nsbox_frame_read(&r, fd, ret);
                if (k == 0) { /* a non-blocking fd given to the blocking helper */
                        struct pollfd p = { .fd = fd, .events = POLLIN };
                        poll(&p, 1, -1);
                        continue;
                }
                nsbox_frame_reader_release(&r);
                return k < 0 ? k : 0;
        }
}

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

/* ---- event loops -------------------------------------------------------------------------- */

int nsbox_epoll_add(int epfd, int fd, uint64_t key, uint32_t *cur, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.u64 = key };
        if (cur)
                *cur = events;
        return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

void nsbox_epoll_set(int epfd, int fd, uint64_t key, uint32_t *cur, uint32_t events)
{
        if (fd < 0 || *cur == events)
                return;
        struct epoll_event ev = { .events = events, .data.u64 = key };
        epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
        *cur = events;
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

/* A string jansson would write as it is (JSON_COMPACT, no JSON_ENSURE_ASCII). */
static bool needs_no_escape(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x20 || c == '"' || c == '\\' || c == 0x7f)
                        return false;
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

char *nsbox_json_dumps(json_t *json, size_t *ret_len)
{
        swap_state st = { .n = 0 };
        char *text = NULL;
        if (map_strings(json, swap_out, &st) == 0)
                text = json_dumps(json, JSON_COMPACT | JSON_REAL_PRECISION(17));
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

int nsbox_tool_request_to_agent(const char *canon, json_t *p, bool stream, strbuf *payload, bool *ret_b64, const char **ret_code,
                                strbuf *why)
{
        const char *enc = json_string_value(json_object_get(p, "encoding"));
        *ret_b64 = !strcmp(canon, "read_file") && enc && !strcmp(enc, "base64");
        /* the agent streams output chunks as events exactly when the caller forwards them */
        if (!strcmp(canon, "exec") && json_object_set_new(p, "stream", json_boolean(stream)) < 0)
                goto nomem;
        json_t *b64 = json_object_get(p, "content_b64");
        if (strcmp(canon, "write_file") || !json_is_string(b64))
                return 0;
        /* file contents travel as bytes on the agent link: decoded here, once */
        int r = b64_decode(json_string_value(b64), json_string_length(b64), payload);
        if (r == -E2BIG) {
                *ret_code = "too_large";
                sb_appendf(why, "write_file: content larger than %u bytes", NSBOX_FRAME_MAX_PAYLOAD);
                return r;
        }
        if (r < 0) {
                *ret_code = "invalid_argument";
                sb_appendf(why, "write_file: 'content_b64' is not valid base64");
                return -EINVAL;
        }
        json_object_del(p, "content_b64");
        if (payload->len == 0) { /* an empty file: no payload to carry it */
                if (json_object_set_new(p, "content", json_string("")) < 0)
                        goto nomem;
                return 0;
        }
        if (json_object_get(p, "content") || json_object_get(p, "data")) {
                *ret_code = "invalid_argument";
                sb_appendf(why, "write_file: give one of 'content', 'content_b64' and 'data'");
                return -EINVAL;
        }
        return 0;
nomem:
        *ret_code = "internal";
        sb_appendf(why, "out of memory");
        return -ENOMEM;
}

int nsbox_tool_result_from_agent(json_t *result, const nsbox_frame *f, bool b64)
{
        if (!b64)
                return 0;
        size_t n = b64_encoded_len(f->payload_len);
        char *enc = malloc(n + 1);
        if (!enc)
                return -ENOMEM;
        b64_encode(f->payload ? f->payload : "", f->payload_len, enc);
        int r = json_object_set_new(result, "content", json_stringn_nocheck(enc, n));
        free(enc);
        return r < 0 ? -ENOMEM : 0;
}
