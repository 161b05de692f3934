/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tests/integration/libnsbox.sh: libnsbox's in-process mode as a host program sees it.  Built
 * against the installed library with pkg-config; prints one "what: observation" line per
 * step, which the test asserts on.  The program has a child of its own and a SIGCHLD handler
 * of its own, as a host program may: the library must leave both alone. */
#include <nsbox.h>

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every agent is an exec of nsbox-agent, and the kernel gives an exec'd child SIGCHLD as its exit
 * signal: the program gets SIGCHLDs for agents too, and its own child's among them. */
static volatile sig_atomic_t sigchld_count, sigchld_from_own_child;
static pid_t mine;
static void on_sigchld(int sig, siginfo_t *si, void *ctx)
{
        (void)sig;
        (void)ctx;
        sigchld_count++;
        if (si->si_pid == mine)
                sigchld_from_own_child = 1;
}

static void show(nsbox *nb, const char *what, int r)
{
        const char *m = nsbox_error_message(nb);
        printf("%s: %d %s %s\n", what, r, nsbox_error_code(nb) ? nsbox_error_code(nb) : "-",
               m && *m && !strchr(m, '\n') ? m : "NO-MESSAGE");
}

static int count_lines(const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        int n = 0, c;
        while ((c = getc(f)) != EOF)
                n += c == '\n';
        fclose(f);
        return n;
}

/* The pids of this process's children, over all its threads, space-separated. */
static void children(char *buf, size_t size)
{
        buf[0] = '\0';
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                char path[300], line[4096];
                snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
                FILE *f = fopen(path, "re");
                if (f && fgets(line, sizeof(line), f))
                        strncat(buf, line, size - strlen(buf) - 1);
                if (f)
                        fclose(f);
        }
        if (d)
                closedir(d);
        size_t n = strlen(buf);
        while (n && buf[n - 1] == ' ')
                buf[--n] = '\0';
}

/* Entries of /tmp the launcher could leave (its nat helper's directories). */
static int tmp_entries(void)
{
        int n = 0;
        DIR *d = opendir("/tmp");
        struct dirent *e;
        while (d && (e = readdir(d)))
                n += !strncmp(e->d_name, "nsbox-net-", 10);
        if (d)
                closedir(d);
        return n;
}

/* The cgroup of pid, as a directory under the cgroup2 mount ("" when it has none). */
static void cgroup_of(pid_t pid, char *buf, size_t size)
{
        char path[64], line[4096], mnt[1024] = "";
        buf[0] = '\0';
        FILE *f = fopen("/proc/self/mountinfo", "re");
        while (f && fgets(line, sizeof(line), f)) {
                char *dash = strstr(line, " - cgroup2 ");
                char point[1024];
                if (dash && sscanf(line, "%*s %*s %*s %*s %1023s", point) == 1) {
                        snprintf(mnt, sizeof(mnt), "%s", point);
                        break;
                }
        }
        if (f)
                fclose(f);
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        f = mnt[0] ? fopen(path, "re") : NULL;
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "0::", 3)) {
                        line[strcspn(line, "\n")] = '\0';
                        snprintf(buf, size, "%s%s", mnt, line + 3);
                }
        if (f)
                fclose(f);
}

struct output {
        char out[256], err[256];
        int chunks;
};

static void on_output(int stream, const char *data, size_t len, void *userdata)
{
        struct output *o = userdata;
        char *to = stream == 1 ? o->out : o->err;
        strncat(to, data, len < 255 - strlen(to) ? len : 255 - strlen(to));
        o->chunks++;
}

/* One thread's sandbox, created at the same moment as another thread's (a handle per thread):
 * its own options, a command, destroyed before the thread ends (the agent dies with it). */
struct worker {
        pthread_barrier_t *go;
        int n;
        char said[512];
};

static void *create_at_once(void *arg)
{
        struct worker *w = arg;
        nsbox *nb = NULL;
        char *id = NULL, *res = NULL, opts[128];
        int r = nsbox_connect(NSBOX_IN_PROCESS, &nb);
        snprintf(opts, sizeof(opts), "{\"env\": {\"WORKER\": \"w%d\"}, \"hostname\": \"h%d\"}", w->n, w->n);
        pthread_barrier_wait(w->go);
        if (r == 0)
                r = nsbox_create(nb, opts, &id);
        if (r == 0)
                r = nsbox_call(nb, id, "exec", "{\"shell\": \"echo $WORKER-$(hostname)\"}", &res);
        char want[32];
        snprintf(want, sizeof(want), "w%d-h%d", w->n, w->n);
        if (r == 0)
                snprintf(w->said, sizeof(w->said), "%s", strstr(res, want) ? "ok" : res);
        else
                snprintf(w->said, sizeof(w->said), "%d %s", r, nb && nsbox_error_message(nb) ? nsbox_error_message(nb) : "-");
        free(res);
        if (id && nsbox_destroy(nb, id) < 0)
                snprintf(w->said, sizeof(w->said), "destroy failed");
        free(id);
        nsbox_close(nb);
        return NULL;
}

int main(void)
{
        struct sigaction sa = { .sa_sigaction = on_sigchld, .sa_flags = SA_RESTART | SA_SIGINFO };
        sigaction(SIGCHLD, &sa, NULL);
        sigset_t chld, old;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, &old); /* mine is set before its SIGCHLD is handled */
        mine = fork(); /* the host program's own child: it must be the only one it reaps */
        if (mine == 0)
                _exit(42);
        sigprocmask(SIG_SETMASK, &old, NULL);
        int mounts_before = count_lines("/proc/self/mountinfo"), tmp_before = tmp_entries();
        char own_cgroup[1024];
        cgroup_of(getpid(), own_cgroup, sizeof(own_cgroup));

        /* without its agent program, an in-process handle is refused at once; then found */
        nsbox *nb = NULL;
        setenv("NSBOX_AGENT", "/no/such/nsbox-agent", 1);
        int r = nsbox_connect(NSBOX_IN_PROCESS, &nb);
        show(nb, "connect without the agent", r);
        nsbox_close(nb);
        unsetenv("NSBOX_AGENT");
        nb = NULL;
        char *id = NULL, *res = NULL;
        r = nsbox_connect(NSBOX_IN_PROCESS, &nb);
        show(nb, "connect", r);
        if (r < 0)
                return 1;

        /* bad input: each a clean error, nothing created */
        show(nb, "create bad json", nsbox_create(nb, "{\"memory\": ", &id));
        show(nb, "create not an object", nsbox_create(nb, "[1]", &id));
        show(nb, "create unknown option", nsbox_create(nb, "{\"no_such_option\": 1}", &id));
        show(nb, "create bad value", nsbox_create(nb, "{\"memory\": \"lots\"}", &id));
        show(nb, "create unknown policy", nsbox_create(nb, "{\"policy\": \"no-such-policy\"}", &id));
        show(nb, "create daemon option", nsbox_create(nb, "{\"labels\": {\"a\": \"b\"}}", &id));
        show(nb, "create NULL ret", nsbox_create(nb, NULL, NULL));
        printf("id untouched: %s\n", id ? "no" : "yes");
        show(nb, "request list", nsbox_request(nb, "list", NULL, &res));
        show(nb, "request snapshot", nsbox_request(nb, "snapshot", "{\"sandbox\": \"abcd\", \"name\": \"x\"}", &res));
        r = nsbox_request(nb, "tools", NULL, &res);
        printf("request tools: %d %s\n", r, r == 0 && strstr(res, "\"read_file\"") ? "has read_file" : "NO-TOOLS");
        free(res);
        res = NULL;
        show(nb, "call unknown sandbox", nsbox_call(nb, "ffffffffffffffffffffffffffffffff", "exec", "{\"shell\": \"true\"}", &res));
        show(nb, "destroy unknown", nsbox_destroy(nb, "ffffffffffffffffffffffffffffffff"));
        char kids[4096], agent_cg[1024], want[32];
        snprintf(want, sizeof(want), "%d", (int)mine);
        children(kids, sizeof(kids));
        printf("children after bad input: %s\n", !strcmp(kids, want) ? "only its own" : kids);

        /* a sandbox: files, a streamed command, errors of the tools */
        if ((r = nsbox_create(nb, "{\"env\": {\"GREETING\": \"hi\"}, \"workdir\": \"/work\"}", &id)) < 0) {
                show(nb, "create", r);
                return 1;
        }
        printf("sandbox: %s\n", id);
        children(kids, sizeof(kids));
        pid_t agent = 0;
        for (char *p = kids; *p;) {
                pid_t pid = (pid_t)strtol(p, &p, 10);
                if (pid != mine)
                        agent = pid;
                while (*p == ' ')
                        p++;
        }
        printf("agent is a child: %s\n", agent > 0 ? "yes" : "no");
        char exe_link[64], exe[4096];
        snprintf(exe_link, sizeof(exe_link), "/proc/%d/exe", (int)agent);
        ssize_t exe_len = readlink(exe_link, exe, sizeof(exe) - 1);
        exe[exe_len > 0 ? exe_len : 0] = '\0';
        printf("agent program: %s\n", exe); /* a fresh exec of nsbox-agent, not a copy of this program */
        cgroup_of(agent, agent_cg, sizeof(agent_cg));
        bool own_cg = agent_cg[0] && strcmp(agent_cg, own_cgroup);
        printf("agent cgroup: %s\n", own_cg ? (access(agent_cg, F_OK) == 0 ? "its own" : "NOT-FOUND") : "none (the host gives this user none)");

        show(nb, "write_file", nsbox_call(nb, id, "write_file", "{\"path\": \"notes/a.txt\", \"content\": \"line1\\nline2\\n\"}", &res));
        free(res);
        r = nsbox_call(nb, id, "read_file", "{\"path\": \"notes/a.txt\"}", &res);
        printf("read_file: %d %s\n", r, r == 0 ? res : "-"); /* in the workdir the options gave */
        free(res);
        r = nsbox_call(nb, id, "write_file", "{\"path\": \"bin\", \"content_b64\": \"AAECA/7/\"}", &res);
        free(res);
        r = nsbox_call(nb, id, "read_file", "{\"path\": \"bin\", \"encoding\": \"base64\"}", &res);
        printf("read_file base64: %d %s\n", r, r == 0 ? (strstr(res, "\"content\":\"AAECA/7/\"") ? "same bytes" : res) : "-");
        free(res);

        struct output o = { .chunks = 0 };
        int code = -1;
        r = nsbox_exec(nb, id, "{\"shell\": \"echo out-$GREETING; sleep 0.2; echo err >&2; exit 7\"}", on_output, &o, &code, &res);
        printf("exec: %d exit %d stdout [%s] stderr [%s] chunks %d\n", r, code, strtok(o.out, "\n") ? o.out : "", strtok(o.err, "\n") ? o.err : "",
               o.chunks);
        printf("exec result without output: %s\n", r == 0 && !strstr(res, "\"stdout\"") ? "yes" : "no");
        free(res);
        r = nsbox_call(nb, id, "exec", "{\"cmd\": [\"echo\", \"whole\"]}", &res);
        printf("exec as a call: %d %s\n", r, r == 0 && strstr(res, "\"stdout\":\"whole\\n\"") ? "stdout in the result" : "NO-STDOUT");
        free(res);
        code = -1;
        r = nsbox_exec(nb, id, "{\"cmd\": [\"no-such-command\"]}", NULL, NULL, &code, NULL);
        printf("exec missing command: %d exit %d\n", r, code);
        show(nb, "unknown tool", nsbox_call(nb, id, "no_such_tool", NULL, &res));
        show(nb, "missing file", nsbox_call(nb, id, "read_file", "{\"path\": \"/no/such/file\"}", &res));
        show(nb, "bad params", nsbox_call(nb, id, "read_file", "{\"path\": ", &res));
        show(nb, "bad base64", nsbox_call(nb, id, "write_file", "{\"path\": \"x\", \"content_b64\": \"!!\"}", &res));
        char prefix[9];
        snprintf(prefix, sizeof(prefix), "%.8s", id);
        r = nsbox_call(nb, prefix, "exists", "{\"path\": \"notes/a.txt\"}", &res);
        printf("call by prefix: %d %s\n", r, r == 0 ? res : "-");
        free(res);

        show(nb, "destroy", nsbox_destroy(nb, id));
        show(nb, "after destroy", nsbox_call(nb, id, "exists", "{\"path\": \"a\"}", &res));
        children(kids, sizeof(kids));
        printf("agent gone: %s\n", kill(agent, 0) < 0 && errno == ESRCH ? "yes" : "no");
        if (own_cg)
                printf("cgroup removed: %s\n", access(agent_cg, F_OK) < 0 ? "yes" : "no");
        free(id);

        /* a sandbox whose agent is killed from outside: the next call says so, and it is gone */
        if ((r = nsbox_create(nb, NULL, &id)) < 0) {
                show(nb, "create", r);
                return 1;
        }
        /* and collected by the program, as a handler reaping every child would (the agent
         * exits with SIGCHLD, an exec'd child's exit signal): the library copes */
        children(kids, sizeof(kids));
        int reaped = 0;
        for (char *p = kids; *p;) {
                pid_t pid = (pid_t)strtol(p, &p, 10);
                if (pid != mine && kill(pid, SIGKILL) == 0 && waitpid(pid, NULL, 0) == pid)
                        reaped++;
                while (*p == ' ')
                        p++;
        }
        printf("killed agents the program reaped: %d\n", reaped);
        show(nb, "call after the agent was killed", nsbox_call(nb, id, "exec", "{\"shell\": \"true\"}", &res));
        show(nb, "destroy after the agent was killed", nsbox_destroy(nb, id));
        free(id);

        /* nsbox_close destroys what is left */
        char *a = NULL, *b = NULL;
        if (nsbox_create(nb, NULL, &a) < 0 || nsbox_create(nb, NULL, &b) < 0) {
                show(nb, "create", -1);
                return 1;
        }
        children(kids, sizeof(kids));
        int n = 0;
        for (char *p = kids; *p; n++) {
                strtol(p, &p, 10);
                while (*p == ' ')
                        p++;
        }
        printf("children with two sandboxes: %d\n", n);
        free(a);
        free(b);
        nsbox_close(nb);

        /* in-process creates from two threads at once, each with its own handle, a few times */
        for (int round = 0; round < 3; round++) {
                pthread_barrier_t go;
                pthread_barrier_init(&go, NULL, 2);
                struct worker w[2] = { { .go = &go, .n = 2 * round }, { .go = &go, .n = 2 * round + 1 } };
                pthread_t t[2];
                for (int i = 0; i < 2; i++)
                        pthread_create(&t[i], NULL, create_at_once, &w[i]);
                for (int i = 0; i < 2; i++)
                        pthread_join(t[i], NULL);
                pthread_barrier_destroy(&go);
                printf("two threads create at once, round %d: %s %s\n", round, w[0].said, w[1].said);
        }

        /* what is left: only the program's own child, which it reaps itself */
        children(kids, sizeof(kids));
        printf("children after close: %s\n", !strcmp(kids, want) ? "only its own" : kids);
        int status = 0;
        pid_t w = waitpid(-1, &status, 0);
        printf("wait: %s, status %d\n", w == mine ? "its own child" : "ANOTHER", WEXITSTATUS(status));
        w = waitpid(-1, NULL, WNOHANG);
        printf("wait again: %s\n", w < 0 && errno == ECHILD ? "no children" : "A CHILD");
        printf("SIGCHLD from its own child: %s (%d signals in all)\n", sigchld_from_own_child ? "yes" : "no", (int)sigchld_count);
        struct sigaction now;
        sigaction(SIGCHLD, NULL, &now);
        printf("SIGCHLD handler: %s\n", now.sa_sigaction == on_sigchld ? "its own" : "REPLACED");
        printf("getopt state: %s\n", optind == 1 && opterr == 1 ? "as before" : "CHANGED");
        printf("mounts: %s\n", count_lines("/proc/self/mountinfo") == mounts_before ? "as before" : "CHANGED");
        printf("tmp: %s\n", tmp_entries() == tmp_before ? "as before" : "CHANGED");
        return 0;
}
