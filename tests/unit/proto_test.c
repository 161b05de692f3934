/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The frame protocol and the JSON helpers on the path of every tool call. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/base64.h"
#include "../../runtime/proto.h"
#include "../../runtime/sync.h"
#include "unit.h"

static void pair(int sv[2])
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

START_TEST(test_frame_round_trip_carries_json_and_binary_payload)
{
        int sv[2];
        pair(sv);
        unsigned char bytes[300];
        for (size_t i = 0; i < sizeof(bytes); i++)
                bytes[i] = (unsigned char)i; /* NULs and bytes invalid as UTF-8 */
        json_t *j = json_pack("{si ss}", "id", 7, "tool", "write_file");
        ck_assert_int_eq(nsbox_frame_send(sv[0], j, bytes, sizeof(bytes)), 0);
        json_decref(j);
        nsbox_frame f;
        ck_assert_int_eq(nsbox_frame_recv(sv[1], &f), 0);
        ck_assert_ptr_nonnull(f.json);
        ck_assert_int_eq(json_integer_value(json_object_get(f.json, "id")), 7);
        ck_assert_uint_eq(f.payload_len, sizeof(bytes));
        ck_assert_mem_eq(f.payload, bytes, sizeof(bytes));
        nsbox_frame_release(&f);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_frames_split_into_single_bytes_are_reassembled)
{
        int sv[2];
        pair(sv);
        nsbox_queue q = { 0 };
        json_t *j = json_pack("{si}", "id", 1);
        ck_assert_int_eq(nsbox_frame_append(&q, j, "xyz", 3), 0);
        ck_assert_int_eq(nsbox_frame_append(&q, j, NULL, 0), 0);
        json_decref(j);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);
        nsbox_frame_reader r = { 0 };
        int got = 0;
        for (size_t i = 0; i < q.len; i++) {
                ck_assert_int_eq(write(sv[0], q.data + q.start + i, 1), 1);
                nsbox_frame f;
                int k = nsbox_frame_read(&r, sv[1], &f);
                ck_assert_int_ge(k, 0);
                if (k == 1) {
                        got++;
                        ck_assert_uint_eq(f.payload_len, got == 1 ? 3 : 0);
                        nsbox_frame_release(&f);
                }
        }
        ck_assert_int_eq(got, 2);
        nsbox_frame_reader_release(&r);
        nsbox_queue_release(&q);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_oversized_frame_is_skipped_whole_and_the_next_one_read)
{
        int sv[2];
        pair(sv);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);
        if (fork() == 0) { /* a writer: the frame is larger than the socket buffer */
                unsigned char h[8] = { 0 };
                uint32_t jl = NSBOX_FRAME_MAX_JSON + 1;
                memcpy(h, &jl, 4); /* little-endian host */
                write_full(sv[0], h, 8);
                static char junk[1 << 16];
                memset(junk, '{', sizeof(junk));
                for (uint32_t left = jl; left;) {
                        uint32_t n = left < sizeof(junk) ? left : sizeof(junk);
                        write_full(sv[0], junk, n);
                        left -= n;
                }
                json_t *j = json_pack("{si}", "id", 9);
                nsbox_frame_send(sv[0], j, NULL, 0);
                json_decref(j); /* the child's leaks count under valgrind too */
                _exit(0);
        }
        close(sv[0]);
        nsbox_frame_reader r = { 0 };
        bool skipped = false;
        for (;;) {
                nsbox_frame f;
                int k = nsbox_frame_read(&r, sv[1], &f);
                if (k == -E2BIG) {
                        skipped = true;
                        continue;
                }
                if (k == 0) {
                        usleep(1000);
                        continue;
                }
                ck_assert_int_eq(k, 1);
                ck_assert(skipped);
                ck_assert_int_eq(json_integer_value(json_object_get(f.json, "id")), 9);
                nsbox_frame_release(&f);
                break;
        }
        nsbox_frame_reader_release(&r);
        close(sv[1]);
}
END_TEST

START_TEST(test_malformed_json_frame_reports_why_and_stream_continues)
{
        int sv[2];
        pair(sv);
        unsigned char h[8] = { 5, 0, 0, 0, 0, 0, 0, 0 };
        write_full(sv[0], h, 8);
        write_full(sv[0], "{nope", 5);
        json_t *j = json_pack("[i]", 1); /* JSON, but not an object */
        nsbox_frame_send(sv[0], j, NULL, 0);
        json_decref(j);
        nsbox_frame f;
        ck_assert_int_eq(nsbox_frame_recv(sv[1], &f), 0);
        ck_assert_ptr_null(f.json);
        UNIT_ASSERT_CONTAINS(f.json_error, "malformed JSON");
        nsbox_frame_release(&f);
        ck_assert_int_eq(nsbox_frame_recv(sv[1], &f), 0);
        ck_assert_ptr_null(f.json);
        UNIT_ASSERT_CONTAINS(f.json_error, "object");
        nsbox_frame_release(&f);
        close(sv[0]);
        ck_assert_int_eq(nsbox_frame_recv(sv[1], &f), -EPIPE);
        close(sv[1]);
}
END_TEST

/* Frames written together come in with one read: the second and third are taken from the
 * reader's buffer, with no read (the socket holds nothing then), and the next call says "more". */
START_TEST(test_several_frames_in_one_read_are_taken_one_by_one)
{
        int sv[2];
        pair(sv);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);
        nsbox_queue q = { 0 };
        for (int i = 1; i <= 3; i++) {
                json_t *j = json_pack("{si}", "id", i);
                ck_assert_int_eq(nsbox_frame_append(&q, j, i == 2 ? "payload" : NULL, i == 2 ? 7 : 0), 0);
                json_decref(j);
        }
        ck_assert_int_eq(write_full(sv[0], q.data + q.start, q.len), 0);
        nsbox_frame_reader r = { 0 };
        for (int i = 1; i <= 3; i++) {
                nsbox_frame f;
                ck_assert_int_eq(nsbox_frame_read(&r, sv[1], &f), 1);
                ck_assert_int_eq(json_integer_value(json_object_get(f.json, "id")), i);
                ck_assert_uint_eq(f.payload_len, i == 2 ? 7 : 0);
                if (i == 2)
                        ck_assert_mem_eq(f.payload, "payload", 7);
                nsbox_frame_release(&f);
                ck_assert(nsbox_frame_reader_ready(&r) == (i < 3));
                char c;
                ck_assert_int_eq(recv(sv[1], &c, 1, MSG_PEEK | MSG_DONTWAIT), -1); /* all of it was read at once */
        }
        nsbox_frame f;
        ck_assert_int_eq(nsbox_frame_read(&r, sv[1], &f), 0);
        ck_assert_ptr_null(r.buf); /* an idle reader holds no buffer */
        nsbox_frame_reader_release(&r);
        nsbox_queue_release(&q);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* A frame larger than the reader's first buffer, written in pieces by another process. */
START_TEST(test_large_frame_in_pieces_is_read_whole)
{
        int sv[2];
        pair(sv);
        size_t n = 4u << 20;
        unsigned char *big = malloc(n);
        for (size_t i = 0; i < n; i++)
                big[i] = (unsigned char)(i * 2654435761u >> 13);
        if (fork() == 0) {
                json_t *j = json_pack("{si}", "id", 5);
                nsbox_frame_send(sv[0], j, big, n);
                nsbox_frame_send(sv[0], j, "z", 1);
                json_decref(j);
                free(big);
                _exit(0);
        }
        close(sv[0]);
        nsbox_frame f;
        ck_assert_int_eq(nsbox_frame_recv(sv[1], &f), 0);
        ck_assert_uint_eq(f.payload_len, n);
        ck_assert(memcmp(f.payload, big, n) == 0);
        nsbox_frame_release(&f);
        ck_assert_int_eq(nsbox_frame_recv(sv[1], &f), 0);
        ck_assert_uint_eq(f.payload_len, 1);
        nsbox_frame_release(&f);
        ck_assert_int_eq(nsbox_frame_recv(sv[1], &f), -EPIPE);
        free(big);
        close(sv[1]);
}
END_TEST

static void send_with_fd(int sock, const void *bytes, size_t n, int fd)
{
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof(u)); /* CMSG_SPACE's padding too: valgrind reads all of it */
        struct iovec iov = { .iov_base = (void *)bytes, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        ck_assert_int_eq(sendmsg(sock, &mh, 0), (ssize_t)n);
}

/* Descriptors sent with the bytes that start their frames are there, oldest first, once each
 * frame is complete, though the frames around them were read ahead. */
START_TEST(test_frames_with_descriptors_get_theirs_in_order)
{
        int sv[2], p1[2], p2[2];
        pair(sv);
        ck_assert_int_eq(pipe2(p1, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(p2, O_CLOEXEC), 0);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);
        nsbox_queue a = { 0 }, b = { 0 }, c = { 0 };
        json_t *j = json_pack("{si}", "id", 1);
        ck_assert_int_eq(nsbox_frame_append(&a, j, NULL, 0), 0);
        ck_assert_int_eq(nsbox_frame_append(&b, j, "bb", 2), 0);
        ck_assert_int_eq(nsbox_frame_append(&c, j, "c", 1), 0);
        json_decref(j);
        ck_assert_int_eq(write_full(sv[0], a.data, a.len), 0);
        send_with_fd(sv[0], b.data, b.len, p1[1]);
        send_with_fd(sv[0], c.data, c.len, p2[1]);
        ck_assert_int_eq(write_full(sv[0], a.data, a.len), 0);
        nsbox_frame_reader r = { .take_fds = true };
        size_t want[] = { 0, 2, 1, 0 };
        int *ends[] = { NULL, &p1[1], &p2[1], NULL };
        for (int i = 0; i < 4; i++) {
                nsbox_frame f;
                int k;
                while ((k = nsbox_frame_read(&r, sv[1], &f)) == 0)
                        ;
                ck_assert_int_eq(k, 1);
                ck_assert_uint_eq(f.payload_len, want[i]);
                nsbox_frame_release(&f);
                if (!ends[i])
                        continue;
                int fd = nsbox_frame_reader_take_fd(&r);
                ck_assert_int_ge(fd, 0);
                ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
                struct stat x, y;
                ck_assert_int_eq(fstat(fd, &x), 0);
                ck_assert_int_eq(fstat(*ends[i], &y), 0);
                ck_assert(x.st_ino == y.st_ino);
                close(fd);
        }
        ck_assert_int_eq(nsbox_frame_reader_take_fd(&r), -1);
        nsbox_frame_reader_release(&r);
        nsbox_queue_release(&a);
        nsbox_queue_release(&b);
        nsbox_queue_release(&c);
        for (int i = 0; i < 2; i++) {
                close(p1[i]);
                close(p2[i]);
                close(sv[i]);
        }
}
END_TEST

/* The stream ends in the middle of a frame's header, of its body, of an oversized frame being
 * skipped: -EPIPE, after the frames that were whole. */
START_TEST(test_end_of_stream_mid_frame_is_epipe)
{
        for (int cut = 0; cut < 3; cut++) {
                int sv[2];
                pair(sv);
                nsbox_queue q = { 0 };
                json_t *j = json_pack("{si}", "id", 3);
                ck_assert_int_eq(nsbox_frame_append(&q, j, "abc", 3), 0);
                json_decref(j);
                ck_assert_int_eq(write_full(sv[0], q.data, q.len), 0);
                if (cut < 2) {
                        ck_assert_int_eq(write_full(sv[0], q.data, cut == 0 ? 5 : q.len - 1), 0);
                } else {
                        unsigned char over[16] = { 0 };
                        uint32_t pl = NSBOX_FRAME_MAX_PAYLOAD + 1;
                        memcpy(over + 4, &pl, 4); /* little-endian host */
                        ck_assert_int_eq(write_full(sv[0], over, sizeof(over)), 0);
                }
                close(sv[0]);
                nsbox_frame_reader r = { 0 };
                nsbox_frame f;
                int k;
                while ((k = nsbox_frame_read(&r, sv[1], &f)) == 0)
                        ;
                ck_assert_int_eq(k, 1);
                ck_assert_int_eq(json_integer_value(json_object_get(f.json, "id")), 3);
                nsbox_frame_release(&f);
                while ((k = nsbox_frame_read(&r, sv[1], &f)) == 0)
                        ;
                ck_assert_int_eq(k, -EPIPE);
                nsbox_frame_reader_release(&r);
                nsbox_queue_release(&q);
                close(sv[1]);
        }
}
END_TEST

START_TEST(test_json_text_replaces_invalid_utf8_and_says_so)
{
        bool lossy = false;
        json_t *s = nsbox_json_text("ok \xc3\xa9 \xff\xfe end\0x", 14, &lossy);
        ck_assert(lossy);
        ck_assert_str_eq(json_string_value(s), "ok \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd end\xef\xbf\xbdx");
        json_decref(s);
        s = nsbox_json_text("plain \xe2\x82\xac", 9, &lossy);
        ck_assert(!lossy);
        ck_assert_str_eq(json_string_value(s), "plain \xe2\x82\xac");
        json_decref(s);
        /* an overlong "/" and a UTF-16 surrogate are not valid UTF-8 either */
        s = nsbox_json_text("\xc0\xaf\xed\xa0\x80", 5, &lossy);
        ck_assert(lossy);
        json_decref(s);
}
END_TEST

START_TEST(test_big_strings_load_and_dump_like_jansson)
{
        size_t n = 3 * NSBOX_JSON_BIG;
        char *big = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
                big[i] = "ABCDxyz+/09\xc3\xa9"[i % 13];
        big[n - 1] = 'A'; /* do not end in half a character */
        big[n] = '\0';
        json_t *v = json_pack("{s:s, s:[s, s], s:s}", "content_b64", big, "list", "small", big, "esc", "a\"b\\c");
        size_t len = 0;
        char *fast = nsbox_json_dumps(v, &len);
        char *slow = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(17));
        ck_assert_uint_eq(len, strlen(slow));
        ck_assert(memcmp(fast, slow, len) == 0);
        json_error_t je;
        json_t *back = nsbox_json_loadb(fast, len, &je);
        ck_assert_ptr_nonnull(back);
        ck_assert(json_equal(back, v));
        /* a forged placeholder is just a string */
        const char *text = "{\"a\":\"\\u0001nsbox-blob-0000000000000000-0\"}";
        json_t *forged = nsbox_json_loadb(text, strlen(text), &je);
        ck_assert_ptr_nonnull(forged);
        ck_assert_uint_eq(json_string_length(json_object_get(forged, "a")), 30);
        json_decref(forged);
        json_decref(back);
        json_decref(v);
        free(fast);
        free(slow);
        free(big);
}
END_TEST

/* The splice's check, a word at a time, against jansson's own dump: each byte that needs an
 * escape (or is not UTF-8) at each place in a word, in strings past NSBOX_JSON_BIG. */
START_TEST(test_dump_fast_path_matches_jansson_byte_by_byte)
{
        static const char *odd[] = { "\x01", "\x1f", "\"", "\\", "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xff", "\xc3", " ", "~" };
        size_t n = NSBOX_JSON_BIG + 17;
        char *s = malloc(n + 8);
        for (size_t k = 0; k < sizeof(odd) / sizeof(*odd); k++) {
                for (size_t at = 0; at < 16; at++) {
                        memset(s, 'Q', n);
                        size_t l = strlen(odd[k]);
                        memcpy(s + n - 16 + at - (at + l > 16 ? l : 0), odd[k], l);
                        memcpy(s + at, odd[k], l);
                        json_t *v = json_pack("{s:o}", "content", json_stringn_nocheck(s, n));
                        size_t len = 0;
                        char *fast = nsbox_json_dumps(v, &len);
                        char *slow = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(17));
                        ck_assert_msg(!fast == !slow, "odd %zu at %zu: one dump failed, not the other", k, at);
                        if (slow) {
                                ck_assert_uint_eq(len, strlen(slow));
                                ck_assert_msg(memcmp(fast, slow, len) == 0, "odd %zu at %zu: another text", k, at);
                        }
                        free(fast);
                        free(slow);
                        json_decref(v);
                }
        }
        free(s);
}
END_TEST

START_TEST(test_base64_round_trips_and_rejects_garbage)
{
        unsigned char in[256];
        for (size_t i = 0; i < sizeof(in); i++)
                in[i] = (unsigned char)(255 - i);
        for (size_t n = 0; n <= 5; n++) {
                char enc[400];
                b64_encode(in, n, enc);
                ck_assert_uint_eq(strlen(enc), b64_encoded_len(n));
                strbuf sb;
                sb_init(&sb, 0);
                ck_assert_int_eq(b64_decode(enc, strlen(enc), &sb), 0);
                ck_assert_uint_eq(sb.len, n);
                if (n)
                        ck_assert_mem_eq(sb.buf, in, n);
                sb_release(&sb);
        }
        strbuf sb;
        sb_init(&sb, 0);
        ck_assert_int_eq(b64_decode("ab$=", 4, &sb), -EINVAL);
        ck_assert_int_eq(b64_decode("abc", 3, &sb), -EINVAL);
        ck_assert_int_eq(b64_decode("a=bc", 4, &sb), -EINVAL);
        ck_assert_uint_eq(sb.len, 0);
        sb_release(&sb);
}
END_TEST

/* A child that fails before reading the seccomp filter the launcher sent it exits with that
 * message unread: the launcher still reads the child's error, not "Connection reset by peer". */
START_TEST(test_sync_error_of_a_child_that_left_a_message_unread_is_read)
{
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        unsigned char filter[8] = { 0 };
        ck_assert_int_eq(nsbox_sync_send(sv[0], SYNC_SECCOMP, 0, filter, sizeof(filter)), 0);
        ck_assert_int_eq(nsbox_sync_send_text(sv[1], SYNC_ERROR, 125, "set up the sandbox root: failed"), 0);
        close(sv[1]);
        static nsbox_sync_msg m;
        ck_assert_int_eq(nsbox_sync_recv(sv[0], &m), 1);
        ck_assert_int_eq(m.type, SYNC_ERROR);
        ck_assert_str_eq((const char *)m.payload, "set up the sandbox root: failed");
        ck_assert_int_eq(nsbox_sync_recv(sv[0], &m), 0);
        close(sv[0]);
}
END_TEST

Suite *proto_suite(void)
{
        Suite *s = suite_create("proto");
        TCase *tc = unit_tcase(s, "frames");
        unit_add(tc, test_frame_round_trip_carries_json_and_binary_payload);
        unit_add(tc, test_frames_split_into_single_bytes_are_reassembled);
        unit_add(tc, test_oversized_frame_is_skipped_whole_and_the_next_one_read);
        unit_add(tc, test_malformed_json_frame_reports_why_and_stream_continues);
        unit_add(tc, test_sync_error_of_a_child_that_left_a_message_unread_is_read);
        unit_add(tc, test_several_frames_in_one_read_are_taken_one_by_one);
        unit_add(tc, test_large_frame_in_pieces_is_read_whole);
        unit_add(tc, test_frames_with_descriptors_get_theirs_in_order);
        unit_add(tc, test_end_of_stream_mid_frame_is_epipe);
        tcase_set_timeout(tc, 30);
        tc = unit_tcase(s, "json");
        unit_add(tc, test_json_text_replaces_invalid_utf8_and_says_so);
        unit_add(tc, test_big_strings_load_and_dump_like_jansson);
        unit_add(tc, test_dump_fast_path_matches_jansson_byte_by_byte);
        unit_add(tc, test_base64_round_trips_and_rejects_garbage);
        return s;
}
