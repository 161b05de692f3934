/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* make bench, persistent sandboxes: tool-call latency and throughput on a warm sandbox, at the
 * two APIs a caller can use:
 *   agent  - the library (sandbox.h + proto.h): frames on the sandbox's socket, what libnsbox,
 *            nsboxd and embedders see;
 *   nsboxd - JSON-RPC over nsboxd's unix socket (base64 for file contents), what nsbox
 *            create/exec/call and the Python client see.
 * Prints medians (and p90) per operation, and MB/s for 64 MiB written then read.
 *   session NSBOXD RUNS [--json FILE] */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/base64.h"
#include "../../runtime/options.h"
#include "../../runtime/proto.h"
#include "../../runtime/sandbox.h"
#include "../../runtime/util.h"

#define BIG (64u << 20)
#define CHUNK (16u << 20)

static void die(const char *what)
{
        fprintf(stderr, "bench: %s\n", what);
        exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static json_t *figures;

static void report(const char *api, const char *op, uint64_t *ns, size_t n)
{
        qsort(ns, n, sizeof(*ns), cmp_u64);
        double med = (double)ns[n / 2] / 1000.0, p90 = (double)ns[n * 9 / 10] / 1000.0;
        printf("  %-7s %-34s median %9.1f us   p90 %9.1f us   (n=%zu)\n", api, op, med, p90, n);
        json_array_append_new(figures, json_pack("{ss ss sf sf si}", "api", api, "op", op, "median_us", med, "p90_us", p90, "n", (int)n));
}

static void report_rate(const char *api, const char *op, uint64_t bytes, uint64_t ns)
{
        double mbs = (double)bytes / 1e6 / ((double)ns / 1e9);
        printf("  %-7s %-34s %9.0f MB/s\n", api, op, mbs);
        json_array_append_new(figures, json_pack("{ss ss sf}", "api", api, "op", op, "mb_per_s", mbs));
}

/* ---- the library: frames on the agent socket ---------------------------------------------- */

static nsbox_policy *policy;

static json_t *agent_call(int fd, const char *tool, json_t *params, const void *payload, size_t len, nsbox_frame *ret)
{
        static json_int_t id;
        json_t *req = json_pack("{sI ss so}", "id", ++id, "tool", tool, "params", params);
        if (nsbox_frame_send(fd, req, payload, len) < 0)
                die("send to the agent");
        json_decref(req);
        for (;;) {
                nsbox_frame f = { 0 };
                if (nsbox_frame_recv(fd, &f) < 0 || !f.json)
                        die("receive from the agent");
                if (json_object_get(f.json, "event")) {
                        nsbox_frame_release(&f);
                        continue;
                }
                if (json_object_get(f.json, "error")) {
                        fprintf(stderr, "bench: %s: %s\n", tool, json_dumps(f.json, 0));
                        exit(1);
                }
                json_t *r = json_incref(json_object_get(f.json, "result"));
                if (ret)
                        *ret = f;
                else
                        nsbox_frame_release(&f);
                return r;
        }
}

static void start_direct(nsbox_sandbox *sb)
{
        nsbox_error err = { 0 };
        if (nsbox_sandbox_start(policy, NULL, nsbox_tool_handlers, NULL, NULL, sb, &err) < 0 || nsbox_sandbox_wait_ready(sb, 10000, &err) < 0)
                die(err.msg ? err.msg : "start a sandbox");
}

/* Freeze and thaw (nsbox pause/resume without the daemon hop): cgroup.freeze until
 * cgroup.events says so, with one sleeping command in the sandbox besides the agent. */
static void bench_freeze(nsbox_sandbox *sb, int runs)
{
        if (sb->cg.dirfd < 0) {
                printf("  cgroup  freeze/thaw: not measured (this user gets no cgroup here)\n");
                return;
        }
        uint64_t *fr = calloc((size_t)runs, sizeof(*fr)), *th = calloc((size_t)runs, sizeof(*th));
        nsbox_error err = { 0 };
        json_decref(agent_call(sb->agentfd, "exec", json_pack("{ss sb}", "shell", "sleep 1000", "background", 1), NULL, 0, NULL));
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_ns();
                if (nsbox_cgroup_freeze(&sb->cg, true, 5000, &err) < 0)
                        die(err.msg);
                uint64_t t1 = now_ns();
                if (nsbox_cgroup_freeze(&sb->cg, false, 5000, &err) < 0)
                        die(err.msg);
                fr[i] = t1 - t0;
                th[i] = now_ns() - t1;
        }
        report("cgroup", "freeze (pause)", fr, (size_t)runs);
        report("cgroup", "thaw (resume)", th, (size_t)runs);
        free(fr);
        free(th);
}

static void bench_agent(int runs, char *big)
{
        uint64_t *ns = calloc((size_t)runs, sizeof(*ns));
        for (int i = 0; i < runs; i++) { /* create to first exec result */
                nsbox_sandbox sb = NSBOX_SANDBOX_INIT;
                uint64_t t0 = now_ns();
                start_direct(&sb);
                json_decref(agent_call(sb.agentfd, "exec", json_pack("{s[s]}", "cmd", "true"), NULL, 0, NULL));
                ns[i] = now_ns() - t0;
                nsbox_sandbox_destroy(&sb);
        }
        report("agent", "create + first exec [true]", ns, (size_t)runs);
        nsbox_sandbox sb = NSBOX_SANDBOX_INIT;
        start_direct(&sb);
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_ns();
                json_decref(agent_call(sb.agentfd, "exec", json_pack("{s[s]}", "cmd", "true"), NULL, 0, NULL));
                ns[i] = now_ns() - t0;
        }
        report("agent", "exec [true] round trip", ns, (size_t)runs);
        bench_freeze(&sb, runs);
        json_decref(agent_call(sb.agentfd, "write_file", json_pack("{ss}", "path", "small"), big, 4096, NULL));
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_ns();
                json_decref(agent_call(sb.agentfd, "read_file", json_pack("{ss ss}", "path", "small", "encoding", "base64"), NULL, 0, NULL));
                ns[i] = now_ns() - t0;
        }
        report("agent", "read_file 4 KiB", ns, (size_t)runs);
        uint64_t t0 = now_ns();
        for (size_t off = 0; off < BIG; off += CHUNK)
                json_decref(agent_call(sb.agentfd, "write_file", json_pack("{ss sb}", "path", "big", "append", off > 0), big + off, CHUNK, NULL));
        report_rate("agent", "write_file 64 MiB (16 MiB calls)", BIG, now_ns() - t0);
        t0 = now_ns();
        for (size_t off = 0; off < BIG; off += CHUNK) {
                nsbox_frame f;
                json_decref(agent_call(sb.agentfd, "read_file",
                                       json_pack("{ss ss sI sI}", "path", "big", "encoding", "base64", "byte_offset", (json_int_t)off,
                                                 "byte_limit", (json_int_t)CHUNK),
                                       NULL, 0, &f));
                if (f.payload_len != CHUNK || memcmp(f.payload, big + off, CHUNK))
                        die("read back different bytes");
                nsbox_frame_release(&f);
        }
        report_rate("agent", "read_file 64 MiB (16 MiB calls)", BIG, now_ns() - t0);
        nsbox_sandbox_destroy(&sb);
        free(ns);
}

/* ---- nsboxd: JSON-RPC lines ---------------------------------------------------------------- */

static int rpc_fd;
static strbuf rpc_in;

static json_t *rpc(const char *method, json_t *params)
{
        static json_int_t id;
        json_t *req = json_pack("{ss sI ss so}", "jsonrpc", "2.0", "id", ++id, "method", method, "params", params);
        size_t len = 0;
        char *text = nsbox_json_dumps(req, &len);
        json_decref(req);
        if (!text || write_full(rpc_fd, text, len) < 0 || write_full(rpc_fd, "\n", 1) < 0)
                die("send to nsboxd");
        free(text);
        for (;;) {
                char *nl = rpc_in.buf ? memchr(rpc_in.buf, '\n', rpc_in.len) : NULL;
                while (!nl) { /* only the new bytes are searched: replies are megabytes long */
                        char buf[1 << 16];
                        ssize_t n = read(rpc_fd, buf, sizeof(buf));
                        if (n <= 0 || sb_append(&rpc_in, buf, (size_t)n) < 0)
                                die("receive from nsboxd");
                        nl = memchr(rpc_in.buf + rpc_in.len - (size_t)n, '\n', (size_t)n);
                }
                size_t linelen = (size_t)(nl - rpc_in.buf);
                json_t *msg = nsbox_json_loadb(rpc_in.buf, linelen, NULL);
                memmove(rpc_in.buf, nl + 1, rpc_in.len - linelen - 1);
                rpc_in.len -= linelen + 1;
                if (!msg)
                        die("malformed reply from nsboxd");
                if (!json_object_get(msg, "id")) {
                        json_decref(msg);
                        continue;
                }
                if (json_object_get(msg, "error")) {
                        fprintf(stderr, "bench: %s: %s\n", method, json_dumps(msg, 0));
                        exit(1);
                }
                json_t *r = json_incref(json_object_get(msg, "result"));
                json_decref(msg);
                return r;
        }
}

static json_t *rpc_call(const char *sandbox, const char *tool, json_t *params)
{
        return rpc("call", json_pack("{ss ss so}", "sandbox", sandbox, "tool", tool, "params", params));
}

static void bench_daemon(const char *nsboxd, int runs, char *big)
{
        char dir[] = "/tmp/nsbox-bench-XXXXXX";
        if (!mkdtemp(dir))
                die("mkdtemp");
        char sock[64];
        snprintf(sock, sizeof(sock), "%s/s", dir);
        pid_t d = fork();
        if (d == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 2);
                execl(nsboxd, "nsboxd", "--socket", sock, (char *)NULL);
                _exit(127);
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
        rpc_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        for (int i = 0; connect(rpc_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0; i++) {
                if (i > 500)
                        die("nsboxd does not listen");
                usleep(10000);
        }
        sb_init(&rpc_in, 0);
        uint64_t *ns = calloc((size_t)runs, sizeof(*ns));
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_ns();
                json_t *s = rpc("create", json_object());
                const char *id = json_string_value(json_object_get(s, "id"));
                json_decref(rpc_call(id, "exec", json_pack("{s[s]}", "cmd", "true")));
                ns[i] = now_ns() - t0;
                json_decref(rpc("destroy", json_pack("{ss}", "sandbox", id)));
                json_decref(s);
        }
        report("nsboxd", "create + first exec [true]", ns, (size_t)runs);
        json_t *s = rpc("create", json_object());
        char id[64];
        snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(s, "id")));
        json_decref(s);
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_ns();
                json_decref(rpc_call(id, "exec", json_pack("{s[s]}", "cmd", "true")));
                ns[i] = now_ns() - t0;
        }
        report("nsboxd", "exec [true] round trip", ns, (size_t)runs);
        char *enc = malloc(b64_encoded_len(CHUNK) + 1);
        b64_encode(big, 4096, enc);
        json_decref(rpc_call(id, "write_file", json_pack("{ss ss}", "path", "small", "content_b64", enc)));
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_ns();
                json_decref(rpc_call(id, "read_file", json_pack("{ss ss}", "path", "small", "encoding", "base64")));
                ns[i] = now_ns() - t0;
        }
        report("nsboxd", "read_file 4 KiB", ns, (size_t)runs);
        uint64_t t0 = now_ns();
        for (size_t off = 0; off < BIG; off += CHUNK) {
                b64_encode(big + off, CHUNK, enc);
                json_decref(rpc_call(id, "write_file", json_pack("{ss ss sb}", "path", "big", "content_b64", enc, "append", off > 0)));
        }
        report_rate("nsboxd", "write_file 64 MiB (16 MiB calls)", BIG, now_ns() - t0);
        t0 = now_ns();
        strbuf back;
        sb_init(&back, 0);
        for (size_t off = 0; off < BIG; off += CHUNK) {
                json_t *r = rpc_call(id, "read_file", json_pack("{ss ss sI sI}", "path", "big", "encoding", "base64", "byte_offset",
                                                                (json_int_t)off, "byte_limit", (json_int_t)CHUNK));
                json_t *c = json_object_get(r, "content");
                back.len = 0;
                if (b64_decode(json_string_value(c), json_string_length(c), &back) < 0 || back.len != CHUNK ||
                    memcmp(back.buf, big + off, CHUNK))
                        die("read back different bytes through nsboxd");
                json_decref(r);
        }
        report_rate("nsboxd", "read_file 64 MiB (16 MiB calls)", BIG, now_ns() - t0);
        sb_release(&back);
        json_decref(rpc("destroy", json_pack("{ss}", "sandbox", id)));
        free(enc);
        free(ns);
        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        unlink(sock);
        char lock[80];
        snprintf(lock, sizeof(lock), "%s.lock", sock);
        unlink(lock);
        rmdir(dir);
}

int main(int argc, char **argv)
{
        if (argc < 3)
                die("usage: session NSBOXD RUNS [--json FILE] | session --freeze RUNS");
        int runs = atoi(argv[2]);
        if (runs < 5)
                runs = 5;
        figures = json_array();
        nsbox_error err = { 0 };
        char *av[] = { "create", NULL };
        nsbox_run_options o;
        if (nsbox_run_options_parse(1, av, &o, &err) < 0 || nsbox_run_options_policy(&o, &policy, &err) < 0)
                die(err.msg ? err.msg : "policy");
        char *big = malloc(BIG);
        for (size_t i = 0; i < BIG; i++)
                big[i] = (char)(i * 2654435761u >> 13);
        if (!strcmp(argv[1], "--freeze")) {
                nsbox_sandbox sb = NSBOX_SANDBOX_INIT;
                start_direct(&sb);
                bench_freeze(&sb, runs);
                nsbox_sandbox_destroy(&sb);
                return 0;
        }
        printf("== persistent sandboxes: %d runs per operation (%ld cores)\n", runs, sysconf(_SC_NPROCESSORS_ONLN));
        bench_agent(runs, big);
        bench_daemon(argv[1], runs, big);
        if (argc >= 5 && !strcmp(argv[3], "--json"))
                json_dump_file(figures, argv[4], JSON_INDENT(2));
        free(big);
        return 0;
}
