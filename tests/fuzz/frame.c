/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent protocol's frame decoder (runtime/proto.c), on what a sandbox or a client sends:
 * the input is a byte stream read with nsbox_frame_read until its end.  Every frame decoded
 * must be re-encodable and decode to the same thing; nsbox_json_loadb must agree with
 * json_loadb and nsbox_json_dumps with json_dumps (json.h promises the same results), also on
 * strings long enough for the fast path: each byte 0x01 of the input (never valid inside JSON
 * text) stands for NSBOX_JSON_BIG bytes of 'x'. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../runtime/proto.h"
#include "fuzz.h"

#define MAX_EXPANSIONS 20 /* more than json.c lifts out (16), so its limit is crossed too */

static int stream_fd(void)
{
        static int fd = -1;
        if (fd < 0)
                fd = memfd_create("nsbox-fuzz-frame", MFD_CLOEXEC);
        FUZZ_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
        return fd;
}

/* The stream's content is data; reads start at its beginning and end at its end (-EPIPE). */
static int load_stream(const uint8_t *data, size_t size)
{
        int fd = stream_fd();
        FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate: %s", strerror(errno));
        FUZZ_CHECK(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size, "pwrite: %s", strerror(errno));
        FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0, "lseek: %s", strerror(errno));
        return fd;
}

static void check_dumps(json_t *j)
{
        size_t len = 0;
        char *ours = nsbox_json_dumps(j, &len);
        char *theirs = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
        FUZZ_CHECK((ours == NULL) == (theirs == NULL), "nsbox_json_dumps and json_dumps disagree on failing");
        if (ours) {
                FUZZ_CHECK(len == strlen(theirs) && memcmp(ours, theirs, len) == 0,
                           "nsbox_json_dumps differs from json_dumps (%zu vs %zu bytes)", len, strlen(theirs));
        }
        free(ours);
        free(theirs);
}

static void check_loadb(const char *text, size_t len)
{
        json_error_t je;
        json_t *ours = nsbox_json_loadb(text, len, &je);
        json_t *theirs = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        FUZZ_CHECK((ours == NULL) == (theirs == NULL), "nsbox_json_loadb %s what json_loadb %s (%zu bytes)",
                   ours ? "accepts" : "refuses", theirs ? "accepts" : "refuses", len);
        if (ours) {
                FUZZ_CHECK(json_equal(ours, theirs), "nsbox_json_loadb and json_loadb parse to different values");
                check_dumps(ours);
        }
        json_decref(ours);
        json_decref(theirs);
}

/* The input with each 0x01 byte replaced by NSBOX_JSON_BIG bytes of 'x' (at most MAX_EXPANSIONS). */
static char *expand(const uint8_t *data, size_t size, size_t *ret_len)
{
        size_t n = 0;
        for (size_t i = 0; i < size && n < MAX_EXPANSIONS; i++)
                n += data[i] == 1;
        if (n == 0)
                return NULL;
        char *out = malloc(size + n * NSBOX_JSON_BIG);
        FUZZ_CHECK(out != NULL, "out of memory");
        size_t len = 0, done = 0;
        for (size_t i = 0; i < size; i++) {
                if (data[i] == 1 && done < n) {
                        memset(out + len, 'x', NSBOX_JSON_BIG);
                        len += NSBOX_JSON_BIG;
                        done++;
                } else {
                        out[len++] = (char)data[i];
                }
        }
        *ret_len = len;
        return out;
}

/* A decoded frame encodes again, and that decodes to the same object and payload. */
static void check_roundtrip(const nsbox_frame *f)
{
        nsbox_queue q = { 0 };
        int r = nsbox_frame_append(&q, f->json, f->payload, f->payload_len);
        FUZZ_CHECK(r == 0, "re-encoding a decoded frame: %s", strerror(-r));
        int fd = load_stream((const uint8_t *)q.data + q.start, q.len);
        nsbox_frame_reader rd = { 0 };
        nsbox_frame g = { 0 };
        r = nsbox_frame_read(&rd, fd, &g);
        FUZZ_CHECK(r == 1, "decoding a re-encoded frame: %d", r);
        FUZZ_CHECK(g.json && json_equal(g.json, f->json), "a re-encoded frame decodes to another object");
        FUZZ_CHECK(g.payload_len == f->payload_len && (!g.payload_len || !memcmp(g.payload, f->payload, g.payload_len)),
                   "a re-encoded frame decodes to another payload");
        nsbox_frame_release(&g);
        nsbox_frame_reader_release(&rd);
        nsbox_queue_release(&q);
}

FUZZ_ENTRY(frame)
{
        /* the stream, frame by frame, as the agent's and nsboxd's loops read it */
        int fd = load_stream(data, size);
        nsbox_frame_reader rd = { 0 };
        size_t n_frames = 0;
        for (;;) {
                nsbox_frame f = { 0 };
                int r = nsbox_frame_read(&rd, fd, &f);
                if (r == -E2BIG)
                        continue; /* an oversized frame skipped whole: the stream goes on */
                if (r == 0)
                        continue; /* a short read was taken to empty fd: the next one finds the end */
                if (r != 1) {
                        FUZZ_CHECK(r == -EPIPE, "a stream that ends gives -EPIPE, not %d", r);
                        break;
                }
                n_frames++;
                FUZZ_CHECK(f.payload_len <= NSBOX_FRAME_MAX_PAYLOAD, "payload of %zu bytes", f.payload_len);
                FUZZ_CHECK(f.json || (f.json_error[0] && !strchr(f.json_error, '\n')), "no object and no one-line reason");
                FUZZ_CHECK(!f.json || json_is_object(f.json), "a frame's JSON is not an object");
                if (f.json) {
                        /* the rest of the stream is where load_stream puts it back */
                        off_t at = lseek(fd, 0, SEEK_CUR);
                        check_roundtrip(&f);
                        fd = load_stream(data, size);
                        FUZZ_CHECK(lseek(fd, at, SEEK_SET) == at, "lseek: %s", strerror(errno));
                }
                nsbox_frame_release(&f);
        }
        nsbox_frame_reader_release(&rd);

        /* the whole input as one JSON text, as a client's line or a frame's JSON */
        check_loadb((const char *)data, size);
        size_t big_len = 0;
        char *big = expand(data, size, &big_len);
        if (big)
                check_loadb(big, big_len);
        free(big);
        /* and as text from a command's output or a file (nsbox_json_text) */
        bool lossy = false;
        json_t *t = nsbox_json_text((const char *)data, size, &lossy);
        FUZZ_CHECK(t != NULL, "nsbox_json_text failed");
        FUZZ_CHECK(lossy || (json_string_length(t) == size && !memcmp(json_string_value(t), data, size)),
                   "text not marked lossy was changed");
        check_dumps(t);
        json_decref(t);
        (void)n_frames;
        return 0;
}
