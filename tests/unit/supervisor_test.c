/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The supervisor (runtime/supervisor.h) against a fake agent on a socketpair: what a client of
 * nsboxd or libnsbox gets for each thing an agent may do (answer, stream, answer out of order,
 * die, be OOM-killed, send garbage or an oversized frame), and the sandbox id lookup. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/codes.h"
#include "../../runtime/supervisor.h"
#include "unit.h"

#define MAX_DONE 8

/* What the callbacks saw. */
typedef struct seen {
        int n_done;
        struct {
                void *data;
                json_t *result;
                char code[32];
                char msg[256];
                char payload[32]; /* a raw call's answer's bytes (c->payload) */
                size_t payload_len;
        } done[MAX_DONE];
        int n_events;
        char events[256]; /* "stdout:abc;stderr:x;" */
        int n_warn;
        char warn[256];
} seen;

static void on_event(void *ctx, nsbox_sup_call *c, const char *event, json_t *frame, const void *data, size_t len)
{
        (void)c, (void)frame;
        seen *s = ctx;
        s->n_events++;
        size_t at = strlen(s->events);
        snprintf(s->events + at, sizeof(s->events) - at, "%s:%.*s;", event, (int)len, (const char *)data);
}

static void on_done(void *ctx, nsbox_sup_call *c, json_t *result, const char *code, const char *msg)
{
        seen *s = ctx;
        ck_assert_msg((result != NULL) != (code != NULL), "a call ends with a result or a code, not both or neither");
        if (s->n_done >= MAX_DONE) { /* counted, not kept */
                s->n_done++;
                return;
        }
        s->done[s->n_done].data = c->data;
        s->done[s->n_done].result = json_incref(result);
        snprintf(s->done[s->n_done].code, sizeof(s->done[0].code), "%s", code ? code : "");
        snprintf(s->done[s->n_done].msg, sizeof(s->done[0].msg), "%s", msg ? msg : "");
        s->done[s->n_done].payload_len = c->payload_len;
        if (c->payload)
                memcpy(s->done[s->n_done].payload, c->payload, c->payload_len < 32 ? c->payload_len : 32);
        s->n_done++;
}

static void on_warn(void *ctx, const char *msg)
{
        seen *s = ctx;
        s->n_warn++;
        snprintf(s->warn, sizeof(s->warn), "%s", msg);
}

static const nsbox_sup_ops ops = { .event = on_event, .done = on_done, .warn = on_warn };

typedef struct fixture {
        nsbox_supervisor sup;
        seen seen;
        int agent; /* the fake agent's end, blocking */
} fixture;

static void fixture_init(fixture *f)
{
        memset(f, 0, sizeof(*f));
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        nsbox_sup_init(&f->sup, "0123456789abcdef0123456789abcdef", &ops, &f->seen);
        ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
        f->sup.sb.agentfd = sv[0];
        f->agent = sv[1];
}

static void fixture_release(fixture *f)
{
        nsbox_sup_stop(&f->sup, "internal", "was destroyed"); /* closes the supervisor's end */
        if (f->agent >= 0)
                close(f->agent);
        for (int i = 0; i < f->seen.n_done && i < MAX_DONE; i++)
                json_decref(f->seen.done[i].result);
}

static nsbox_sup_call *send_call(fixture *f, const char *tool, const char *params_json, bool stream, void *data)
{
        json_t *p = params_json ? json_loads(params_json, 0, NULL) : NULL;
        nsbox_sup_call *c = NULL;
        const char *code = NULL;
        strbuf why;
        sb_init(&why, 256);
        int r = nsbox_sup_send(&f->sup, tool, p, stream, data, &c, &code, &why);
        ck_assert_msg(r == 0, "%s refused: %s", tool, why.buf ? why.buf : "");
        sb_release(&why);
        json_decref(p);
        ck_assert_int_eq(nsbox_sup_flush(&f->sup), 1);
        return c;
}

/* The fake agent reads one request; its JSON is returned (the caller json_decref's it). */
static json_t *agent_recv(fixture *f, strbuf *payload)
{
        nsbox_frame fr = { 0 };
        ck_assert_int_eq(nsbox_frame_recv(f->agent, &fr), 0);
        ck_assert_ptr_nonnull(fr.json);
        if (payload)
                sb_append(payload, fr.payload ? fr.payload : "", fr.payload_len);
        json_t *j = json_incref(fr.json);
        nsbox_frame_release(&fr);
        return j;
}

static void agent_send(fixture *f, const char *json, const char *payload)
{
        json_t *j = json_loads(json, 0, NULL);
        ck_assert_ptr_nonnull(j);
        ck_assert_int_eq(nsbox_frame_send(f->agent, j, payload, payload ? strlen(payload) : 0), 0);
        json_decref(j);
}

/* Read until n calls in all have ended (or the agent is gone: -EPIPE), for 30 s at most (an
 * oversized frame is 32 MiB to skip, in as many rounds as the writer's pace makes). */
static int pump(fixture *f, int n)
{
        uint64_t end = now_ns() + 30ull * 1000000000;
        while (f->seen.n_done < n && now_ns() < end) {
                int r = nsbox_sup_poll(&f->sup, 50);
                if (r < 0)
                        return r;
        }
        return f->seen.n_done >= n ? 0 : -ETIMEDOUT;
}

START_TEST(call_and_result_by_alias_resolved_once)
{
        fixture f;
        fixture_init(&f);
        int tag;
        nsbox_sup_call *c = send_call(&f, "ls", "{\"path\": \"src\"}", false, &tag);
        ck_assert_str_eq(c->tool, "list_dir");
        json_t *rq = agent_recv(&f, NULL);
        ck_assert_str_eq(json_string_value(json_object_get(rq, "tool")), "list_dir");
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(rq, "params"), "path")), "src");
        char reply[128];
        snprintf(reply, sizeof(reply), "{\"id\": %lld, \"result\": {\"content\": \"hi\\n\"}}", (long long)json_integer_value(json_object_get(rq, "id")));
        json_decref(rq);
        agent_send(&f, reply, NULL);
        ck_assert_int_eq(pump(&f, 1), 0);
        ck_assert_ptr_eq(f.seen.done[0].data, &tag);
        ck_assert_str_eq(json_string_value(json_object_get(f.seen.done[0].result, "content")), "hi\n");
        ck_assert_uint_eq(f.sup.n_calls, 0);
        fixture_release(&f);
}
END_TEST

START_TEST(unknown_tool_and_bad_params_are_refused_before_sending)
{
        fixture f;
        fixture_init(&f);
        const char *code = NULL;
        strbuf why;
        sb_init(&why, 256);
        ck_assert_int_eq(nsbox_sup_send(&f.sup, "rm_rf", NULL, false, NULL, NULL, &code, &why), -ESRCH);
        ck_assert_str_eq(code, "not_found");
        ck_assert_str_eq(why.buf, "unknown tool 'rm_rf' (see nsbox tools)");
        sb_release(&why);
        sb_init(&why, 256);
        json_t *p = json_pack("{ss ss}", "path", "x", "content_b64", "!!!not base64");
        ck_assert_int_eq(nsbox_sup_send(&f.sup, "write_file", p, false, NULL, NULL, &code, &why), -EINVAL);
        ck_assert_str_eq(code, "invalid_argument");
        UNIT_ASSERT_CONTAINS(why.buf, "not valid base64");
        json_decref(p);
        sb_release(&why);
        ck_assert_uint_eq(f.sup.n_calls, 0);
        ck_assert_uint_eq(f.sup.out.len, 0); /* nothing went to the agent */
        fixture_release(&f);
}
END_TEST

START_TEST(write_file_base64_travels_as_payload_and_read_file_base64_comes_back)
{
        fixture f;
        fixture_init(&f);
        send_call(&f, "write_file", "{\"path\": \"b\", \"content_b64\": \"AAEC/w==\"}", false, NULL);
        strbuf payload;
        sb_init(&payload, 1024);
        json_t *rq = agent_recv(&f, &payload);
        ck_assert_uint_eq(payload.len, 4);
        ck_assert_int_eq(memcmp(payload.buf, "\x00\x01\x02\xff", 4), 0);
        ck_assert_ptr_null(json_object_get(json_object_get(rq, "params"), "content_b64"));
        sb_release(&payload);
        char reply[128];
        snprintf(reply, sizeof(reply), "{\"id\": %lld, \"result\": {\"bytes\": 4}}", (long long)json_integer_value(json_object_get(rq, "id")));
        json_decref(rq);
        agent_send(&f, reply, NULL);
        ck_assert_int_eq(pump(&f, 1), 0);
        send_call(&f, "read_file", "{\"path\": \"b\", \"encoding\": \"base64\"}", false, NULL);
        rq = agent_recv(&f, NULL);
        snprintf(reply, sizeof(reply), "{\"id\": %lld, \"result\": {\"size\": 3}}", (long long)json_integer_value(json_object_get(rq, "id")));
        json_decref(rq);
        agent_send(&f, reply, "abc");
        ck_assert_int_eq(pump(&f, 2), 0);
        ck_assert_str_eq(json_string_value(json_object_get(f.seen.done[1].result, "content")), "YWJj");
        fixture_release(&f);
}
END_TEST

START_TEST(bytes_given_travel_as_payload_and_a_raw_answer_comes_back_as_bytes)
{
        fixture f;
        fixture_init(&f);
        const char *code = NULL;
        strbuf why;
        sb_init(&why, 256);
        json_t *p = json_pack("{ss sb}", "path", "b", "append", 1);
        ck_assert_int_eq(nsbox_sup_send_bytes(&f.sup, "write_file", p, "\x00\x01\xff", 3, false, NULL, NULL, &code, &why), 0);
        ck_assert_int_eq(nsbox_sup_send_bytes(&f.sup, "write_file", p, "", 0, false, NULL, NULL, &code, &why), 0);
        json_object_set_new(p, "content_b64", json_string("AAEC"));
        ck_assert_int_eq(nsbox_sup_send_bytes(&f.sup, "write_file", p, "x", 1, false, NULL, NULL, &code, &why), -EINVAL);
        ck_assert_str_eq(code, "invalid_argument");
        json_decref(p);
        ck_assert_int_eq(nsbox_sup_flush(&f.sup), 1);
        strbuf payload;
        sb_init(&payload, 1024);
        json_t *rq = agent_recv(&f, &payload);
        ck_assert_uint_eq(payload.len, 3);
        ck_assert_int_eq(memcmp(payload.buf, "\x00\x01\xff", 3), 0);
        ck_assert(json_is_true(json_object_get(json_object_get(rq, "params"), "append")));
        ck_assert_ptr_null(json_object_get(json_object_get(rq, "params"), "content"));
        json_decref(rq);
        payload.len = 0;
        rq = agent_recv(&f, &payload); /* an empty file: "content" says so, no payload */
        ck_assert_uint_eq(payload.len, 0);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(rq, "params"), "content")), "");
        json_decref(rq);
        sb_release(&payload);

        p = json_pack("{ss ss}", "path", "b", "encoding", "base64");
        ck_assert_int_eq(nsbox_sup_send_bytes(&f.sup, "read_file", p, NULL, 0, true, NULL, NULL, &code, &why), 0);
        json_decref(p);
        ck_assert_int_eq(nsbox_sup_flush(&f.sup), 1);
        rq = agent_recv(&f, NULL);
        char reply[128];
        snprintf(reply, sizeof(reply), "{\"id\": %lld, \"result\": {\"bytes\": 3}}", (long long)json_integer_value(json_object_get(rq, "id")));
        json_decref(rq);
        agent_send(&f, reply, "abc");
        ck_assert_int_eq(pump(&f, 1), 0);
        ck_assert_ptr_null(json_object_get(f.seen.done[0].result, "content")); /* no base64 */
        ck_assert_uint_eq(f.seen.done[0].payload_len, 3);
        ck_assert_int_eq(memcmp(f.seen.done[0].payload, "abc", 3), 0);
        sb_release(&why);
        fixture_release(&f);
}
END_TEST

START_TEST(streamed_exec_events_reach_the_caller_and_unstreamed_do_not)
{
        fixture f;
        fixture_init(&f);
        send_call(&f, "exec", "{\"cmd\": [\"sh\", \"-c\", \"echo abc\"]}", true, NULL);
        json_t *rq = agent_recv(&f, NULL);
        ck_assert(json_is_true(json_object_get(json_object_get(rq, "params"), "stream")));
        long long id = (long long)json_integer_value(json_object_get(rq, "id"));
        json_decref(rq);
        char buf[160];
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"event\": \"stdout\", \"pid\": 7}", id);
        agent_send(&f, buf, "abc");
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"event\": \"stderr\", \"pid\": 7}", id);
        agent_send(&f, buf, "x");
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"result\": {\"exit_code\": 0, \"reason\": \"exited\"}}", id);
        agent_send(&f, buf, NULL);
        ck_assert_int_eq(pump(&f, 1), 0);
        ck_assert_str_eq(f.seen.events, "stdout:abc;stderr:x;");
        ck_assert_int_eq(json_integer_value(json_object_get(f.seen.done[0].result, "exit_code")), 0);

        send_call(&f, "exec", "{\"cmd\": [\"true\"]}", false, NULL);
        rq = agent_recv(&f, NULL);
        ck_assert(json_is_false(json_object_get(json_object_get(rq, "params"), "stream")));
        id = (long long)json_integer_value(json_object_get(rq, "id"));
        json_decref(rq);
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"event\": \"stdout\"}", id);
        agent_send(&f, buf, "zzz");
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"result\": {\"exit_code\": 1}}", id);
        agent_send(&f, buf, NULL);
        ck_assert_int_eq(pump(&f, 2), 0);
        ck_assert_int_eq(f.seen.n_events, 2); /* none for the call that did not stream */
        fixture_release(&f);
}
END_TEST

START_TEST(several_calls_in_flight_each_get_their_own_answer)
{
        fixture f;
        fixture_init(&f);
        int tags[3];
        long long ids[3];
        for (int i = 0; i < 3; i++) {
                send_call(&f, "list_dir", "{\"path\": \".\"}", false, &tags[i]);
                json_t *rq = agent_recv(&f, NULL);
                ids[i] = (long long)json_integer_value(json_object_get(rq, "id"));
                json_decref(rq);
        }
        ck_assert_uint_eq(f.sup.n_calls, 3);
        for (int i = 2; i >= 0; i--) { /* answered in the reverse order */
                char buf[128];
                snprintf(buf, sizeof(buf), "{\"id\": %lld, \"result\": {\"n\": %d}}", ids[i], i);
                agent_send(&f, buf, NULL);
        }
        /* an answer to nothing asked is dropped */
        agent_send(&f, "{\"id\": 999, \"result\": {}}", NULL);
        ck_assert_int_eq(pump(&f, 3), 0);
        for (int k = 0; k < 3; k++) {
                int i = 2 - k;
                ck_assert_ptr_eq(f.seen.done[k].data, &tags[i]);
                ck_assert_int_eq(json_integer_value(json_object_get(f.seen.done[k].result, "n")), i);
        }
        ck_assert_uint_eq(f.sup.n_calls, 0);
        fixture_release(&f);
}
END_TEST

/* Pipes passed with calls (nsbox_sup_send_fd), several queued at once: each arrives with its
 * own frame (the agent's reader, take_fds, has it once the frame is complete), in order; and
 * what is not a pipe of the call's direction is refused before anything is sent. */
START_TEST(descriptors_travel_each_with_its_own_frame)
{
        fixture f;
        fixture_init(&f);
        int pipes[3][2], ino[3];
        for (int i = 0; i < 3; i++) {
                ck_assert_int_eq(pipe2(pipes[i], O_CLOEXEC), 0);
                struct stat st;
                ck_assert_int_eq(fstat(pipes[i][0], &st), 0);
                ino[i] = (int)st.st_ino;
                json_t *p = json_pack("{ss sI sb}", "path", "f", "size", (json_int_t)i, "fd", 1), *clean = NULL;
                const char *code = NULL;
                strbuf why;
                sb_init(&why, 256);
                ck_assert_int_eq(nsbox_sup_check_fd("write_file", p, pipes[i][0], &clean, &code, &why), 0);
                ck_assert_ptr_null(json_object_get(clean, "fd"));
                ck_assert_int_eq(nsbox_sup_send_fd(&f.sup, "write_file", clean, dup(pipes[i][0]), NULL, NULL, &code, &why), 0);
                json_decref(clean);
                json_decref(p);
                sb_release(&why);
        }
        ck_assert_int_eq(nsbox_sup_flush(&f.sup), 1);
        nsbox_frame_reader rd = { .take_fds = true };
        for (int i = 0; i < 3; i++) {
                nsbox_frame fr = { 0 };
                int r;
                while ((r = nsbox_frame_read(&rd, f.agent, &fr)) == 0)
                        ;
                ck_assert_int_eq(r, 1);
                ck_assert(json_is_true(json_object_get(fr.json, "fd")));
                ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(fr.json, "params"), "size")), i);
                int fd = nsbox_frame_reader_take_fd(&rd);
                ck_assert_int_ge(fd, 0);
                struct stat st;
                ck_assert_int_eq(fstat(fd, &st), 0);
                ck_assert_int_eq((int)st.st_ino, ino[i]);
                ck_assert_int_eq(nsbox_frame_reader_take_fd(&rd), -1);
                close(fd);
                nsbox_frame_release(&fr);
        }
        nsbox_frame_reader_release(&rd);
        /* a wrong direction, a regular file, none: refused */
        json_t *p = json_pack("{ss sI sb}", "path", "f", "size", 1, "fd", 1), *clean = NULL;
        const char *code = NULL;
        strbuf why;
        sb_init(&why, 256);
        ck_assert_int_eq(nsbox_sup_check_fd("write_file", p, pipes[0][1], &clean, &code, &why), -EINVAL);
        ck_assert_str_eq(code, "invalid_argument");
        int reg = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(nsbox_sup_check_fd("write_file", p, reg, &clean, &code, &why), -EINVAL);
        ck_assert_int_eq(nsbox_sup_check_fd("write_file", p, -1, &clean, &code, &why), -EINVAL);
        ck_assert_int_eq(nsbox_sup_check_fd("exec", p, pipes[0][0], &clean, &code, &why), -EINVAL);
        ck_assert_int_eq(nsbox_sup_check_fd("read_file", p, pipes[0][1], &clean, &code, &why), 0);
        json_decref(clean);
        close(reg);
        json_decref(p);
        sb_release(&why);
        for (int i = 0; i < 3; i++) {
                close(pipes[i][0]);
                close(pipes[i][1]);
        }
        fixture_release(&f);
}
END_TEST

START_TEST(an_agent_error_keeps_its_code_and_an_unknown_code_is_internal)
{
        fixture f;
        fixture_init(&f);
        for (int i = 0; i < 2; i++) {
                send_call(&f, "read_file", "{\"path\": \"nope\"}", false, NULL);
                json_t *rq = agent_recv(&f, NULL);
                char buf[200];
                snprintf(buf, sizeof(buf), "{\"id\": %lld, \"error\": {\"code\": \"%s\", \"message\": \"read_file 'nope': no such file\"}}",
                         (long long)json_integer_value(json_object_get(rq, "id")), i == 0 ? "file_not_found" : "made_up");
                json_decref(rq);
                agent_send(&f, buf, NULL);
                ck_assert_int_eq(pump(&f, i + 1), 0);
        }
        ck_assert_str_eq(f.seen.done[0].code, "file_not_found");
        ck_assert_str_eq(f.seen.done[0].msg, "read_file 'nope': no such file");
        ck_assert_str_eq(f.seen.done[1].code, "internal");
        fixture_release(&f);
}
END_TEST

START_TEST(the_agent_dying_mid_call_answers_every_call)
{
        fixture f;
        fixture_init(&f);
        int tags[3];
        for (int i = 0; i < 3; i++)
                send_call(&f, i ? "exec" : "grep", i ? "{\"cmd\": [\"sleep\", \"9\"]}" : "{\"pattern\": \"x\"}", false, &tags[i]);
        close(f.agent);
        f.agent = -1;
        ck_assert_int_eq(pump(&f, 3), -EPIPE);
        ck_assert_int_eq(f.seen.n_done, 0);
        char why[128];
        nsbox_sup_died(&f.sup, why, sizeof(why));
        ck_assert_str_eq(why, "exited"); /* no cgroup, so no OOM kill */
        nsbox_sup_stop(&f.sup, "internal", why);
        ck_assert_int_eq(f.seen.n_done, 3);
        for (int i = 0; i < 3; i++) {
                ck_assert_str_eq(f.seen.done[i].code, "internal");
                ck_assert_str_eq(f.seen.done[i].msg, "sandbox 0123456789abcdef0123456789abcdef exited");
        }
        ck_assert_uint_eq(f.sup.n_calls, 0);
        ck_assert_int_eq(f.sup.sb.agentfd, -1);
        fixture_release(&f);
}
END_TEST

/* A directory standing in for the sandbox's cgroup: the files the supervisor reads. */
static int fake_cgroup(char *dir, size_t n, const char *memory_events, const char *pids_events)
{
        snprintf(dir, n, "/tmp/nsbox-sup-test.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        const char *names[] = { "memory.events", "pids.events" }, *texts[] = { memory_events, pids_events };
        for (int i = 0; i < 2; i++) {
                char p[128];
                snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
                FILE *fp = fopen(p, "w");
                ck_assert_ptr_nonnull(fp);
                fputs(texts[i], fp);
                fclose(fp);
        }
        return fd;
}

static void fake_cgroup_remove(fixture *f, const char *dir)
{
        close(f->sup.sb.cg.dirfd); /* before nsbox_sup_stop: no cgroup to kill or remove */
        f->sup.sb.cg = (nsbox_cgroup)NSBOX_CGROUP_INIT;
        char p[128];
        const char *names[] = { "memory.events", "pids.events" };
        for (int i = 0; i < 2; i++) {
                snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
                unlink(p);
        }
        rmdir(dir);
}

START_TEST(an_oom_kill_gives_running_commands_their_result_and_the_rest_an_error)
{
        fixture f;
        fixture_init(&f);
        char dir[64];
        f.sup.sb.cg.dirfd = fake_cgroup(dir, sizeof(dir), "oom 1\noom_kill 1\n", "max 0\n");
        f.sup.sb.cg.memory = f.sup.sb.cg.pids = true;
        f.sup.memory_limit = 64 << 20;
        int tags[2];
        send_call(&f, "exec", "{\"cmd\": [\"python3\", \"-c\", \"x = ' ' * 10**9\"]}", false, &tags[0]);
        send_call(&f, "read_file", "{\"path\": \"a\"}", false, &tags[1]);
        close(f.agent);
        f.agent = -1;
        ck_assert_int_eq(pump(&f, 2), -EPIPE);
        char why[128];
        nsbox_sup_died(&f.sup, why, sizeof(why));
        ck_assert_str_eq(why, "was killed by the OOM killer (memory limit 67108864 bytes)");
        ck_assert_int_eq(f.seen.n_done, 1);
        ck_assert_ptr_eq(f.seen.done[0].data, &tags[0]);
        json_t *res = f.seen.done[0].result;
        ck_assert_str_eq(json_string_value(json_object_get(res, "reason")), "oom_killed");
        ck_assert_int_eq(json_integer_value(json_object_get(res, "exit_code")), 128 + SIGKILL);
        ck_assert(json_is_true(json_object_get(res, "oom_killed")));
        fake_cgroup_remove(&f, dir);
        nsbox_sup_stop(&f.sup, "internal", why);
        ck_assert_int_eq(f.seen.n_done, 2);
        ck_assert_ptr_eq(f.seen.done[1].data, &tags[1]);
        ck_assert_str_eq(f.seen.done[1].msg, "sandbox 0123456789abcdef0123456789abcdef was killed by the OOM killer (memory limit 67108864 bytes)");
        fixture_release(&f);
}
END_TEST

START_TEST(a_fork_refused_at_the_pids_limit_is_the_reason)
{
        fixture f;
        fixture_init(&f);
        char dir[64];
        f.sup.sb.cg.dirfd = fake_cgroup(dir, sizeof(dir), "oom_kill 0\n", "max 2\n");
        f.sup.sb.cg.pids = true;
        send_call(&f, "exec", "{\"cmd\": [\"sh\", \"-c\", \"fork bomb\"]}", false, NULL);
        char p[128];
        snprintf(p, sizeof(p), "%s/pids.events", dir);
        FILE *fp = fopen(p, "w");
        ck_assert_ptr_nonnull(fp);
        fputs("max 3\n", fp); /* a fork was refused while it ran */
        fclose(fp);
        json_t *rq = agent_recv(&f, NULL);
        char buf[160];
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"result\": {\"exit_code\": 2, \"reason\": \"exited\"}}", (long long)json_integer_value(json_object_get(rq, "id")));
        json_decref(rq);
        agent_send(&f, buf, NULL);
        ck_assert_int_eq(pump(&f, 1), 0);
        ck_assert_str_eq(json_string_value(json_object_get(f.seen.done[0].result, "reason")), "pids_limited");
        fake_cgroup_remove(&f, dir);
        fixture_release(&f);
}
END_TEST

START_TEST(an_oversized_frame_is_skipped_whole_and_the_stream_goes_on)
{
        fixture f;
        fixture_init(&f);
        int tag;
        send_call(&f, "list_dir", "{}", false, &tag);
        json_t *rq = agent_recv(&f, NULL);
        long long id = (long long)json_integer_value(json_object_get(rq, "id"));
        json_decref(rq);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) { /* the agent: a frame past the maximum, then the answer */
                uint32_t hdr[2] = { NSBOX_FRAME_MAX_JSON + 1, 0 };
                if (write(f.agent, hdr, sizeof(hdr)) != sizeof(hdr))
                        _exit(1);
                static char junk[1 << 16];
                memset(junk, 'x', sizeof(junk));
                for (size_t left = NSBOX_FRAME_MAX_JSON + 1; left;) {
                        size_t k = left < sizeof(junk) ? left : sizeof(junk);
                        if (write(f.agent, junk, k) != (ssize_t)k)
                                _exit(1);
                        left -= k;
                }
                char buf[128];
                snprintf(buf, sizeof(buf), "{\"id\": %lld, \"result\": {\"entries\": []}}", id);
                json_t *j = json_loads(buf, 0, NULL);
                int r = nsbox_frame_send(f.agent, j, NULL, 0);
                json_decref(j);
                _exit(r == 0 ? 0 : 1);
        }
        ck_assert_int_eq(pump(&f, 1), 0);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_int_eq(st, 0);
        ck_assert_int_eq(f.seen.n_warn, 1);
        UNIT_ASSERT_CONTAINS(f.seen.warn, "oversized frame");
        ck_assert_ptr_eq(f.seen.done[0].data, &tag);
        ck_assert(json_is_array(json_object_get(f.seen.done[0].result, "entries")));
        fixture_release(&f);
}
END_TEST

START_TEST(a_frame_without_an_id_is_reported_and_answers_nothing)
{
        fixture f;
        fixture_init(&f);
        send_call(&f, "list_dir", "{}", false, NULL);
        json_t *rq = agent_recv(&f, NULL);
        json_decref(rq);
        agent_send(&f, "{\"error\": {\"code\": \"invalid_argument\", \"message\": \"bad frame\"}}", NULL);
        ck_assert_int_eq(nsbox_sup_poll(&f.sup, 1000), 0);
        ck_assert_int_eq(f.seen.n_warn, 1);
        UNIT_ASSERT_CONTAINS(f.seen.warn, "without an id: bad frame");
        ck_assert_int_eq(f.seen.n_done, 0);
        ck_assert_uint_eq(f.sup.n_calls, 1);
        fixture_release(&f); /* answers it */
        ck_assert_int_eq(f.seen.n_done, 1);
        ck_assert_str_eq(f.seen.done[0].msg, "sandbox 0123456789abcdef0123456789abcdef was destroyed");
}
END_TEST

START_TEST(a_cancelled_exec_streams_no_more_and_is_killed)
{
        fixture f;
        fixture_init(&f);
        nsbox_sup_call *c = send_call(&f, "exec", "{\"cmd\": [\"sleep\", \"60\"]}", true, NULL);
        json_t *rq = agent_recv(&f, NULL);
        long long id = (long long)json_integer_value(json_object_get(rq, "id"));
        json_decref(rq);
        nsbox_sup_pause_stream(&f.sup, c, true);
        nsbox_sup_cancel(&f.sup, c);
        ck_assert_int_eq(nsbox_sup_flush(&f.sup), 1);
        rq = agent_recv(&f, NULL);
        ck_assert_str_eq(json_string_value(json_object_get(rq, "tool")), "pause");
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(rq, "params"), "id")), id);
        json_decref(rq);
        rq = agent_recv(&f, NULL);
        ck_assert_str_eq(json_string_value(json_object_get(rq, "tool")), "cancel");
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(rq, "params"), "id")), id);
        json_decref(rq);
        char buf[160];
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"event\": \"stdout\"}", id);
        agent_send(&f, buf, "late");
        snprintf(buf, sizeof(buf), "{\"id\": %lld, \"result\": {\"exit_code\": 137}}", id);
        agent_send(&f, buf, NULL);
        ck_assert_int_eq(pump(&f, 1), 0);
        ck_assert_int_eq(f.seen.n_events, 0);
        fixture_release(&f);
}
END_TEST

START_TEST(too_many_calls_in_flight_are_refused)
{
        fixture f;
        fixture_init(&f);
        const char *code = NULL;
        strbuf why;
        for (int i = 0; i < NSBOX_SUP_MAX_CALLS; i++) {
                sb_init(&why, 64);
                ck_assert_int_eq(nsbox_sup_send(&f.sup, "list_dir", NULL, false, NULL, NULL, &code, &why), 0);
                sb_release(&why);
        }
        sb_init(&why, 256);
        ck_assert_int_eq(nsbox_sup_send(&f.sup, "list_dir", NULL, false, NULL, NULL, &code, &why), -EBUSY);
        ck_assert_str_eq(code, "conflict");
        ck_assert_str_eq(why.buf, "sandbox 0123456789abcdef0123456789abcdef has 1024 calls in flight");
        sb_release(&why);
        close(f.agent); /* nothing read: the supervisor's queue is dropped with it */
        f.agent = -1;
        fixture_release(&f);
        ck_assert_int_eq(f.seen.n_done, NSBOX_SUP_MAX_CALLS);
}
END_TEST

START_TEST(a_request_over_the_frame_maximum_is_too_large)
{
        fixture f;
        fixture_init(&f);
        size_t n = NSBOX_FRAME_MAX_JSON + 16;
        char *big = malloc(n + 1);
        ck_assert_ptr_nonnull(big);
        memset(big, 'a', n);
        big[n] = '\0';
        json_t *p = json_pack("{ss ss}", "path", "x", "content", big);
        free(big);
        const char *code = NULL;
        strbuf why;
        sb_init(&why, 256);
        ck_assert_int_eq(nsbox_sup_send(&f.sup, "write_file", p, false, NULL, NULL, &code, &why), -EMSGSIZE);
        ck_assert_str_eq(code, "too_large");
        ck_assert_str_eq(why.buf, "write_file: request larger than the protocol's maximum frame");
        sb_release(&why);
        json_decref(p);
        ck_assert_uint_eq(f.sup.n_calls, 0);
        fixture_release(&f);
}
END_TEST

START_TEST(a_sandbox_is_found_by_id_or_unique_prefix)
{
        static const char *ids[] = { "aaaa1111bbbb2222cccc3333dddd4444", "aaaa1111ffff2222cccc3333dddd4444", "0000ffff" };
        const char *code = NULL;
        char msg[160];
        struct {
                const char *want;
                int found; /* index into ids, or -1 */
                const char *code;
                const char *msg;
        } cases[] = {
                { "aaaa1111b", 0, NULL, NULL },
                { "aaaa1111ffff2222cccc3333dddd4444", 1, NULL, NULL },
                { "aaaa", -1, "conflict", "'aaaa' matches 2 sandboxes; give more of the id" },
                /* under 4 characters the prefix is what is wrong, not the sandbox (issue 27) */
                { "aaa", -1, "invalid_argument", "id prefix 'aaa' is too short: give at least 4 characters" },
                { "beef", -1, "not_found", "no sandbox 'beef'" },
                { "", -1, "invalid_argument", "id prefix '' is too short: give at least 4 characters" },
                { "aaaa1111bbbb2222cccc3333dddd44445", -1, "not_found", "no sandbox 'aaaa1111bbbb2222cccc3333dddd44445'" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                nsbox_id_match m;
                nsbox_id_match_init(&m, cases[i].want);
                for (int k = 0; k < 2; k++)
                        nsbox_id_match_offer(&m, ids[k], (void *)ids[k]);
                const char *got = nsbox_id_match_result(&m, &code, msg, sizeof(msg));
                if (cases[i].found >= 0) {
                        ck_assert_ptr_eq(got, ids[cases[i].found]);
                        continue;
                }
                ck_assert_ptr_null(got);
                ck_assert_str_eq(code, cases[i].code);
                ck_assert_str_eq(msg, cases[i].msg);
        }
}
END_TEST

START_TEST(ids_with_a_node_name_are_valid_and_found_by_prefix)
{
        ck_assert(nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444"));
        ck_assert(nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444-n1"));
        ck_assert(nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444-10-0-1-23"));
        ck_assert(!nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444-"));
        ck_assert(!nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444-N1"));
        ck_assert(!nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444-n1-"));
        ck_assert(!nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd444-n1"));
        ck_assert(!nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444x"));
        ck_assert(!nsbox_id_ok("aaaa1111bbbb2222cccc3333dddd4444-0123456789012345678901234"));
        ck_assert(nsbox_node_ok("0123456789abcdefghij-xyz"));
        ck_assert(!nsbox_node_ok("") && !nsbox_node_ok("-a") && !nsbox_node_ok("a_b") && !nsbox_node_ok("a.b"));
        ck_assert_str_eq(nsbox_id_node("aaaa1111bbbb2222cccc3333dddd4444-10-0-1-23"), "10-0-1-23");
        ck_assert_str_eq(nsbox_id_node("aaaa1111bbbb2222cccc3333dddd4444"), "");
        static const char *ids[] = { "aaaa1111bbbb2222cccc3333dddd4444-n1", "aaaa1111ffff2222cccc3333dddd4444-n1" };
        const char *wants[] = { "aaaa1111b", "aaaa1111bbbb2222cccc3333dddd4444", "aaaa1111bbbb2222cccc3333dddd4444-n1" };
        for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
                nsbox_id_match m;
                const char *code = NULL;
                char msg[160];
                nsbox_id_match_init(&m, wants[i]);
                for (int k = 0; k < 2; k++)
                        nsbox_id_match_offer(&m, ids[k], (void *)ids[k]);
                ck_assert_ptr_eq(nsbox_id_match_result(&m, &code, msg, sizeof(msg)), ids[0]);
        }
}
END_TEST

Suite *supervisor_suite(void)
{
        signal(SIGPIPE, SIG_IGN); /* the fake agent writes to a closed supervisor in one test */
        Suite *s = suite_create("supervisor");
        TCase *tc = unit_tcase(s, "supervisor");
        tcase_set_timeout(tc, 60);
        unit_add(tc, call_and_result_by_alias_resolved_once);
        unit_add(tc, unknown_tool_and_bad_params_are_refused_before_sending);
        unit_add(tc, write_file_base64_travels_as_payload_and_read_file_base64_comes_back);
        unit_add(tc, bytes_given_travel_as_payload_and_a_raw_answer_comes_back_as_bytes);
        unit_add(tc, streamed_exec_events_reach_the_caller_and_unstreamed_do_not);
        unit_add(tc, several_calls_in_flight_each_get_their_own_answer);
        unit_add(tc, descriptors_travel_each_with_its_own_frame);
        unit_add(tc, an_agent_error_keeps_its_code_and_an_unknown_code_is_internal);
        unit_add(tc, the_agent_dying_mid_call_answers_every_call);
        unit_add(tc, an_oom_kill_gives_running_commands_their_result_and_the_rest_an_error);
        unit_add(tc, a_fork_refused_at_the_pids_limit_is_the_reason);
        unit_add(tc, an_oversized_frame_is_skipped_whole_and_the_stream_goes_on);
        unit_add(tc, a_frame_without_an_id_is_reported_and_answers_nothing);
        unit_add(tc, a_cancelled_exec_streams_no_more_and_is_killed);
        unit_add(tc, too_many_calls_in_flight_are_refused);
        unit_add(tc, a_request_over_the_frame_maximum_is_too_large);
        unit_add(tc, a_sandbox_is_found_by_id_or_unique_prefix);
        unit_add(tc, ids_with_a_node_name_are_valid_and_found_by_prefix);
        return s;
}
