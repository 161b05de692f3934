/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* make bench, persistent sandboxes: tool-call latency and throughput on a warm sandbox through
 * the library (sandbox.h + proto.h): frames on the sandbox's socket, what libnsbox, nsboxd and
 * embedders see.  The same operations through nsboxd's socket are tests/bench/daemon.c's.
 * Prints medians (and p90) per operation, and MB/s for 64 MiB written then read.
 *   session --agent RUNS [--json FILE] | session --freeze RUNS */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        if (nsbox_sandbox_start(policy, NULL, NULL, NULL, sb, &err) < 0 || nsbox_sandbox_wait_ready(sb, 10000, &err) < 0)
                die(err.msg ? err.msg : "start a sandbox");
}

/* Freeze and thaw (nsbox pause/resume without the daemon hop): cgroup.freeze until
 * cgroup.events says so, or, without cgroup2 (root on a cgroup v1 host), the v1 freezer's
 * freezer.state until FROZEN; one sleeping command in the sandbox besides the agent. */
static void bench_freeze(nsbox_sandbox *sb, int runs)
{
        if (!nsbox_cgroup_can_freeze(&sb->cg)) {
                printf("  cgroup  freeze/thaw: not measured (this user gets no cgroup here)\n");
                return;
        }
        const char *group = sb->cg.dirfd >= 0 ? "cgroup" : "cg-v1";
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
        report(group, "freeze (pause)", fr, (size_t)runs);
        report(group, "thaw (resume)", th, (size_t)runs);
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

int main(int argc, char **argv)
{
        if (argc < 3 || (strcmp(argv[1], "--agent") && strcmp(argv[1], "--freeze")))
                die("usage: session --agent RUNS [--json FILE] | session --freeze RUNS");
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
        if (argc >= 5 && !strcmp(argv[3], "--json"))
                json_dump_file(figures, argv[4], JSON_INDENT(2));
        free(big);
        return 0;
}
