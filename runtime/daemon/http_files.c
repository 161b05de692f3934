/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd's GET and POST /files: a download is read_file calls (FILES_CHUNK bytes each,
 * FILES_INFLIGHT in flight) streamed out as raw bytes of a known length; an upload
 * (application/octet-stream, or multipart/form-data parsed by libmicrohttpd's post processor;
 * either may be gzip) is write_file calls of FILES_CHUNK bytes each to a hidden temporary beside
 * the file (the first creates it and its parents, the next append), then a rename onto the file,
 * so that a failed or interrupted upload leaves no half file.  Neither holds a whole file in
 * memory: an upload takes the body's bytes only while its buffer has room (http.h, on_body).
 * The bytes are never base64 or JSON in nsboxd: they travel beside the calls (http_call_bytes). */
#include "http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <zlib.h>


/* Measured (tests/bench/e2b.sh, curl): 1 MiB chunks, 4 in flight, and MHD taking 1 MiB of a
 * download at a time keep the client, nsboxd and the agent busy at once, where 4 MiB chunks
 * two at a time made each wait for the others' whole chunk. */
#define FILES_CHUNK (1u << 20)   /* bytes of one read_file or write_file call */
#define FILES_INFLIGHT 4         /* calls in flight: the agent works while nsboxd and the client do */
#define FILES_BLOCK (1u << 20)   /* a download's bytes MHD takes at a time (http.h, stream_block) */
#define FILES_STEP (64u << 10)   /* decoded bytes made at a time from the body */
#define FILES_MAX 1000u          /* files in one multipart upload */
#define FILES_PATH_MAX 4096u

typedef struct upfile {
        char *path, *tmp;  /* the file, and its temporary */
        char *name;        /* as the part named it (multipart) */
        char *buf;         /* bytes not yet written */
        size_t len, cap;
        uint64_t got;      /* bytes of it so far */
        bool complete;     /* all of its bytes are in buf or written */
        bool started;      /* a write_file was sent for tmp */
        bool done;         /* renamed onto path */
        json_t *meta;      /* its metadata after (the rename's answer), or NULL */
} upfile;

typedef struct files_state {
        hreq *r;
        /* download */
        uint64_t offset, asked;      /* bytes sent, and asked for */
        /* upload */
        upfile *files;
        size_t n_files, cur;         /* cur: the first file not done */
        size_t buffered;             /* bytes in every file's buf */
        uint64_t total, max_total;   /* decoded bytes so far, and the bound (the disk limit) */
        unsigned inflight;           /* calls in flight */
        bool failed, eof, ended, answered;
        bool gzip, zend;
        z_stream z;
        struct MHD_PostProcessor *pp;
        const char *path_arg;        /* the path query parameter (MHD's) */
        json_t *meta;                /* X-Metadata-* headers: every file's metadata (envd 0.6.2) */
        bool meta_bad;               /* one is not printable ASCII */
        char step[FILES_STEP];
} files_state;

static void files_fail(files_state *st, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void advance(files_state *st);

/* ---- paths ----------------------------------------------------------------------------------- */

/* Absolute, or relative to the home (envd_home, and ~/): a new string, or NULL with why in msg. */
static char *resolve_path(hreq *r, const char *p, const char **why)
{
        if (!p || !*p) {
                *why = "a path is needed (the path query parameter, or a part's filename)";
                return NULL;
        }
        if (strlen(p) > FILES_PATH_MAX) {
                *why = "the path is too long";
                return NULL;
        }
        char *out = NULL;
        if (p[0] == '/')
                out = strdup(p);
        else if (!strcmp(p, "~"))
                out = strdup(envd_home(r));
        else if (asprintf(&out, "%s/%s", envd_home(r), !strncmp(p, "~/", 2) ? p + 2 : p) < 0)
                out = NULL;
        if (!out)
                *why = "out of memory";
        return out;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* DIR/.NAME.upload-RANDOM: hidden, in the same directory (the rename stays in one file system) */
static char *temp_path(const char *path)
{
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                rnd = (uint32_t)now_ns();
        const char *base = base_name(path);
        char *out = NULL;
        if (asprintf(&out, "%.*s.%.200s.upload-%08x", (int)(base - path), path, base, rnd) < 0)
                return NULL;
        return out;
}

/* ---- answers ---------------------------------------------------------------------------------- */

/* An error of a call: nsbox's code as envd's status; out of space (too_large) is 507.  One
 * about an upload's temporary, or its file (its rename), names the file, with the reason (the
 * message's end). */
static void fail_msg(files_state *st, json_t *msg, bool upload)
{
        const char *why = NULL, *code = rpc_error_code(msg, &why);
        unsigned status = http_status_of(code);
        if (upload && !strcmp(code, "too_large"))
                status = 507;
        const upfile *f = upload && st->cur < st->n_files ? &st->files[st->cur] : NULL;
        const char *reason = f && f->tmp && (strstr(why, f->tmp) || strstr(why, f->path)) ? strrchr(why, ':') : NULL;
        if (reason)
                files_fail(st, status, "cannot write '%s':%s", f->path, reason + 1);
        else
                files_fail(st, status, "%s", why);
}

static void remove_temps(files_state *st)
{
        for (size_t i = 0; i < st->n_files; i++)
                if (st->files[i].started && !st->files[i].done) {
                        (void)http_call(st->r, "remove", json_pack("{ss}", "path", st->files[i].tmp), false);
                        st->files[i].started = false;
                }
}

static void files_fail(files_state *st, unsigned status, const char *fmt, ...)
{
        if (st->failed || st->answered)
                return;
        st->failed = true;
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* the agent does calls in order: the temporaries are gone before anything asked later */
        remove_temps(st);
        if (st->r->streaming) { /* a download that failed after its first bytes: cut short */
                http_stream_end(st->r);
                return;
        }
        st->answered = true;
        http_answer_json(st->r, status, json_pack("{si ss}", "code", (int)status, "message", msg));
}

static void files_free(void *p)
{
        files_state *st = p;
        if (!st)
                return;
        if (!st->answered && !st->failed && st->r->c)
                remove_temps(st); /* interrupted: the client went away */
        for (size_t i = 0; i < st->n_files; i++) {
                free(st->files[i].path);
                free(st->files[i].name);
                free(st->files[i].tmp);
                free(st->files[i].buf);
                json_decref(st->files[i].meta);
        }
        free(st->files);
        json_decref(st->meta);
        if (st->gzip)
                inflateEnd(&st->z);
        if (st->pp)
                MHD_destroy_post_processor(st->pp);
        free(st);
}

/* ---- download --------------------------------------------------------------------------------- */

static void read_next(files_state *st)
{
        uint64_t limit = FILES_CHUNK;
        if (st->r->stream_sized && st->r->stream_size - st->asked < limit)
                limit = st->r->stream_size - st->asked;
        st->inflight++;
        (void)http_call_bytes(st->r, "read_file",
                              json_pack("{ss ss sI sI}", "path", st->files[0].path, "encoding", "base64", "byte_offset",
                                        (json_int_t)st->asked, "byte_limit", (json_int_t)limit),
                              NULL, 0, true);
        st->asked += limit;
}

/* A chunk came: out it goes, and the next are asked, FILES_INFLIGHT at most (the agent answers
 * in order; on_msg is called only while the stream has room below HTTP_STREAM_HIGH: that is the
 * backpressure).  The first fixes the length (Content-Length, as envd's): the file's size at
 * that read, or the chunk's own length when it was the whole file (a file of /proc's says 0).
 * What grows after is not sent; a file that shrinks under it cuts the answer short (the
 * connection is closed: the client sees an incomplete body, never a short file as whole). */
static void download_msg(hreq *r, json_t *msg)
{
        files_state *st = r->state;
        size_t len = 0;
        _cleanup_free_ char *bytes = http_take_bytes(r, msg, &len); /* the chunk's, beside msg */
        st->inflight--;
        if (st->failed || st->answered)
                return;
        if (rpc_error_code(msg, NULL)) {
                fail_msg(st, msg, false);
                return;
        }
        json_t *res = json_object_get(msg, "result");
        json_t *got = json_object_get(res, "bytes");
        if (!json_is_integer(got) || (uint64_t)json_integer_value(got) != len) {
                files_fail(st, 500, "read_file answered without its bytes");
                return;
        }
        bool eof = json_is_true(json_object_get(res, "eof"));
        if (!r->streaming) {
                uint64_t size = (uint64_t)json_integer_value(json_object_get(res, "size"));
                r->stream_sized = eof || size >= len; /* else its size says 0 (procfs): chunked, to its end */
                r->stream_size = eof ? len : size;
                if (http_stream_begin(r, 200, "application/octet-stream") < 0) {
                        files_fail(st, 429, "too many streams of this user");
                        return;
                }
        }
        if (!r->stream_sized) {
                int e = len ? http_stream_write(r, bytes, len) : 0;
                st->offset += len;
                if (e < 0 || eof || !len) {
                        st->answered = true;
                        http_stream_end(r);
                        return;
                }
                while (st->inflight < FILES_INFLIGHT)
                        read_next(st);
                return;
        }
        uint64_t want = r->stream_size - st->offset < FILES_CHUNK ? r->stream_size - st->offset : FILES_CHUNK;
        if (len > want)
                len = (size_t)want; /* never past the length told */
        int e = len ? http_stream_write(r, bytes, len) : 0;
        st->offset += len;
        if (e < 0 || st->offset >= r->stream_size || len < want) { /* the end, or cut short */
                st->answered = true;
                http_stream_end(r);
                return;
        }
        while (st->inflight < FILES_INFLIGHT && st->asked < r->stream_size)
                read_next(st);
}

static void download(hreq *r, files_state *st)
{
        const char *why = NULL;
        char *path = resolve_path(r, http_arg(r, "path"), &why);
        if (!path) {
                files_fail(st, 400, "%s", why);
                return;
        }
        st->files = calloc(1, sizeof(*st->files));
        if (!st->files) {
                free(path);
                files_fail(st, 500, "out of memory");
                return;
        }
        st->files[0].path = path;
        st->n_files = 1;
        r->on_msg = download_msg;
        r->stream_block = FILES_BLOCK;
        read_next(st);
}

/* ---- upload: the files' bytes ----------------------------------------------------------------- */

static upfile *new_file(files_state *st, const char *name)
{
        if (st->n_files >= FILES_MAX) {
                files_fail(st, 400, "at most %u files in one upload", FILES_MAX);
                return NULL;
        }
        const char *why = NULL;
        char *path = resolve_path(st->r, name, &why);
        if (!path) {
                files_fail(st, 400, "%s", why);
                return NULL;
        }
        if (!*base_name(path)) {
                files_fail(st, 400, "path '%s' is a directory", path);
                free(path);
                return NULL;
        }
        for (size_t i = 0; i < st->n_files; i++)
                if (!strcmp(st->files[i].path, path)) {
                        files_fail(st, 400, "you cannot upload multiple files to the same path '%s'", path);
                        free(path);
                        return NULL;
                }
        upfile *v = realloc(st->files, (st->n_files + 1) * sizeof(*v));
        char *tmp = v ? temp_path(path) : NULL;
        if (v)
                st->files = v;
        if (!tmp) {
                free(path);
                files_fail(st, 500, "out of memory");
                return NULL;
        }
        upfile *f = &st->files[st->n_files++];
        *f = (upfile){ .path = path, .tmp = tmp };
        return f;
}

/* The last file's next bytes. */
static void add_bytes(files_state *st, const char *data, size_t n)
{
        upfile *f = st->n_files ? &st->files[st->n_files - 1] : NULL;
        if (!f || f->complete || !n)
                return;
        st->total += n;
        f->got += n;
        if (st->total > st->max_total) {
                files_fail(st, 507, "not enough disk space: the upload is more than the sandbox's disk (%llu bytes)",
                           (unsigned long long)st->max_total);
                return;
        }
        if (f->len + n > f->cap) {
                size_t cap = f->cap ? f->cap : FILES_STEP;
                while (cap < f->len + n)
                        cap *= 2;
                char *b = realloc(f->buf, cap);
                if (!b) {
                        files_fail(st, 500, "out of memory");
                        return;
                }
                f->buf = b;
                f->cap = cap;
        }
        memcpy(f->buf + f->len, data, n);
        f->len += n;
        st->buffered += n;
}

/* multipart: each "file" part is a file, named by the path parameter or its filename */
static enum MHD_Result part_data(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                 const char *content_type, const char *transfer_encoding, const char *data,
                                 uint64_t off, size_t size)
{
        (void)kind;
        (void)content_type;
        (void)transfer_encoding;
        files_state *st = cls;
        if (st->failed)
                return MHD_NO;
        if (!key || strcmp(key, "file"))
                return MHD_YES; /* other fields are not files */
        /* a new part starts at offset 0 (an empty one may be called once with no bytes) */
        const char *name = st->path_arg && *st->path_arg ? st->path_arg : filename ? filename : "";
        upfile *last = st->n_files ? &st->files[st->n_files - 1] : NULL;
        if (off == 0 && (!last || last->got || strcmp(last->name, name))) {
                if (last)
                        last->complete = true;
                if (!(last = new_file(st, name)))
                        return MHD_NO;
                if (!(last->name = strdup(name))) {
                        files_fail(st, 500, "out of memory");
                        return MHD_NO;
                }
        }
        add_bytes(st, data, size);
        return st->failed ? MHD_NO : MHD_YES;
}

/* Decoded bytes (after gzip) of the body. */
static void body_bytes(files_state *st, const char *data, size_t n)
{
        if (!st->pp) {
                add_bytes(st, data, n);
                return;
        }
        if (MHD_post_process(st->pp, data, n) != MHD_YES)
                files_fail(st, 400, "the multipart/form-data body is malformed");
}

/* Takes body bytes while the buffers have room; at the end (data NULL), drains gzip. */
static size_t feed(files_state *st, const char *data, size_t len)
{
        size_t used = 0;
        while (!st->failed && st->buffered < FILES_CHUNK) {
                if (!st->gzip) {
                        size_t n = len - used < FILES_STEP ? len - used : FILES_STEP;
                        if (!n)
                                break;
                        body_bytes(st, data + used, n);
                        used += n;
                        continue;
                }
                if (st->zend) {
                        if (used < len)
                                files_fail(st, 400, "bytes after the end of the gzip stream");
                        break;
                }
                st->z.next_in = (Bytef *)(uintptr_t)(data ? data + used : "");
                st->z.avail_in = (uInt)(len - used);
                st->z.next_out = (Bytef *)st->step;
                st->z.avail_out = FILES_STEP;
                int rc = inflate(&st->z, Z_NO_FLUSH);
                used = len - st->z.avail_in;
                size_t made = FILES_STEP - st->z.avail_out;
                if (rc == Z_STREAM_END)
                        st->zend = true;
                else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                        files_fail(st, 400, "the gzip body is malformed: %s", st->z.msg ? st->z.msg : "error");
                        break;
                }
                if (made)
                        body_bytes(st, st->step, made);
                if (!made && !st->zend && used == len)
                        break; /* more input is needed */
        }
        return used;
}

/* The body is all in and decoded: the last file is complete. */
static void body_done(files_state *st)
{
        st->ended = true;
        if (st->gzip && !st->zend) {
                files_fail(st, 400, "the gzip body ends early");
                return;
        }
        if (st->pp && MHD_destroy_post_processor(st->pp) != MHD_YES) {
                st->pp = NULL;
                files_fail(st, 400, "the multipart/form-data body ends early");
                return;
        }
        st->pp = NULL;
        if (!st->n_files) {
                files_fail(st, 400, "no file in the upload (multipart parts named \"file\")");
                return;
        }
        st->files[st->n_files - 1].complete = true;
}

/* ---- upload: the calls ------------------------------------------------------------------------ */

static void write_chunk(files_state *st, upfile *f)
{
        size_t n = f->len < FILES_CHUNK ? f->len : FILES_CHUNK;
        json_t *p = json_pack("{ss sb sb}", "path", f->tmp, "append", f->started, "parents", true);
        if (!p) {
                files_fail(st, 500, "out of memory");
                return;
        }
        st->inflight++;
        /* the bytes go to the agent as they are (the frame's payload): no base64 */
        (void)http_call_bytes(st->r, "write_file", p, f->buf ? f->buf : "", n, false);
        if (f->len > n) /* an empty file has no buffer at all */
                memmove(f->buf, f->buf + n, f->len - n);
        f->len -= n;
        st->buffered -= n;
        f->started = true;
        if (st->buffered < FILES_CHUNK)
                http_wake(st->r); /* room again for the body */
}

static void answer_files(files_state *st)
{
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < st->n_files; i++) {
                json_t *info = json_pack("{ss ss ss}", "path", st->files[i].path, "name", base_name(st->files[i].path), "type", "file");
                if (info && st->files[i].meta)
                        json_object_set(info, "metadata", st->files[i].meta);
                json_array_append_new(arr, info);
        }
        st->answered = true;
        http_answer_json(st->r, 200, arr);
}

/* One call at a time: the current file's next chunk, or its rename once it is complete. */
static void advance(files_state *st)
{
        while (st->inflight < FILES_INFLIGHT && !st->failed && !st->answered) {
                if (st->eof && !st->ended && (!st->gzip || st->zend)) {
                        body_done(st);
                        continue;
                }
                if (st->eof && !st->ended && st->buffered < FILES_CHUNK) {
                        uint64_t before = st->total;
                        feed(st, NULL, 0); /* what inflate still holds */
                        if (!st->zend && st->total == before)
                                body_done(st); /* no progress: the gzip stream is cut short */
                        continue;
                }
                if (st->cur >= st->n_files) {
                        if (st->eof && st->n_files && st->files[st->n_files - 1].done)
                                answer_files(st);
                        return;
                }
                upfile *f = &st->files[st->cur];
                /* a file's writes go in order (the agent does calls in order); the first must
                 * make it, and its rename waits for them all */
                if (f->started ? f->len >= FILES_CHUNK || (f->complete && f->len) : !st->inflight && (f->len >= FILES_CHUNK || f->complete)) {
                        write_chunk(st, f);
                } else if (f->complete && !f->len && !st->inflight) {
                        st->inflight++;
                        (void)http_call(st->r, "rename",
                                        json_pack("{ss ss sb sb sO}", "from", f->tmp, "to", f->path, "overwrite", true, "write", true,
                                                  "metadata", st->meta),
                                        false);
                } else {
                        return; /* more bytes are coming */
                }
        }
}

static void upload_msg(hreq *r, json_t *msg)
{
        files_state *st = r->state;
        st->inflight--;
        if (st->failed)
                return;
        if (rpc_error_code(msg, NULL)) {
                fail_msg(st, msg, true);
                return;
        }
        upfile *f = st->cur < st->n_files ? &st->files[st->cur] : NULL;
        json_t *res = json_object_get(msg, "result");
        if (f && json_object_get(res, "to")) { /* the rename */
                f->done = true;
                f->meta = json_incref(json_object_get(res, "metadata"));
                st->cur++;
        }
        advance(st);
        if (st->buffered < FILES_CHUNK)
                http_wake(r);
}

static size_t upload_body(hreq *r, const char *data, size_t len)
{
        files_state *st = r->state;
        if (st->failed || st->answered)
                return len;
        if (!data) {
                st->eof = true;
                advance(st);
                return 0;
        }
        size_t used = feed(st, data, len);
        advance(st);
        return st->failed ? len : used;
}

/* An X-Metadata-KEY header: KEY lowercased is a key of the files' metadata, the first of a
 * repeated one kept (envd). */
static enum MHD_Result metadata_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
        files_state *st = cls;
        (void)kind;
        if (strncasecmp(name, "X-Metadata-", 11) || !name[11])
                return MHD_YES;
        char key[TOOL_METADATA_KEY_MAX + 1];
        size_t n = strlen(name + 11);
        if (n > TOOL_METADATA_KEY_MAX) {
                st->meta_bad = true;
                return MHD_YES;
        }
        for (size_t i = 0; i <= n; i++) {
                unsigned char c = (unsigned char)name[11 + i];
                key[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : (char)c;
                st->meta_bad |= i < n && (c < 0x20 || c > 0x7e);
        }
        for (const char *v = value ? value : ""; *v; v++)
                st->meta_bad |= (unsigned char)*v < 0x20 || (unsigned char)*v > 0x7e;
        if (!st->meta_bad && !json_object_get(st->meta, key))
                json_object_set_new(st->meta, key, json_string(value ? value : ""));
        return MHD_YES;
}

/* The files' metadata from the request's X-Metadata-* headers (none: each file's is cleared, as
 * envd); -1 when answered with a 400. */
static int upload_metadata(hreq *r, files_state *st)
{
        char why[192];
        if (!(st->meta = json_object())) {
                files_fail(st, 500, "out of memory");
                return -1;
        }
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, metadata_header, st);
        if (st->meta_bad) {
                files_fail(st, 400, "invalid metadata: X-Metadata-* keys (at most %u bytes) and values must be printable ASCII",
                           TOOL_METADATA_KEY_MAX);
                return -1;
        }
        if (tool_metadata_check(st->meta, why, sizeof(why)) < 0) {
                files_fail(st, 400, "invalid metadata: %s", why);
                return -1;
        }
        return 0;
}

static void upload(hreq *r, files_state *st)
{
        const char *type = http_header(r, "Content-Type"), *enc = http_header(r, "Content-Encoding");
        sandbox *s = http_sandbox(r);
        st->max_total = s && s->limits.disk ? s->limits.disk : NSBOX_DEFAULT_DISK;
        st->path_arg = http_arg(r, "path");
        if (upload_metadata(r, st) < 0)
                return;
        if (enc && *enc && strcasecmp(enc, "identity")) {
                if (strcasecmp(enc, "gzip")) {
                        files_fail(st, 400, "Content-Encoding '%.64s' is not supported (gzip or identity)", enc);
                        return;
                }
                if (inflateInit2(&st->z, 15 + 16) != Z_OK) { /* gzip only */
                        files_fail(st, 500, "out of memory");
                        return;
                }
                st->gzip = true;
        }
        if (type && !strncasecmp(type, "multipart/form-data", 19)) {
                st->pp = MHD_create_post_processor(r->conn, 64 * 1024, part_data, st);
                if (!st->pp) {
                        files_fail(st, 400, "the multipart/form-data Content-Type has no boundary");
                        return;
                }
        } else if (!new_file(st, st->path_arg)) {
                return; /* a raw body is one file: the path parameter names it */
        }
        r->on_msg = upload_msg;
        r->on_body = upload_body;
}

void files_request(hreq *r)
{
        files_state *st = calloc(1, sizeof(*st));
        if (!st) {
                control_error(r, 500, "out of memory");
                return;
        }
        st->r = r;
        r->state = st;
        r->state_free = files_free;
        char why[512];
        if (envd_user_check(r, http_arg(r, "username"), why, sizeof(why)) < 0) {
                files_fail(st, 401, "error looking up %s", why);
                return;
        }
        if (!strcmp(r->method, "GET"))
                download(r, st);
        else if (!strcmp(r->method, "POST"))
                upload(r, st);
        else
                files_fail(st, 405, "%s /files: GET downloads, POST uploads", r->method);
}
