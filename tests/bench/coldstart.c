/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Cold-start benchmark: runs each command N times, interleaved (a, b, c, a, b, c, ...) so that
 * machine noise hits every command alike, and prints median, p90 and p99 wall time and the ratio
 * of each median to the first command's.
 *
 *   coldstart N NAME1 'CMD1' NAME2 'CMD2' ...      (commands are run with /bin/sh -c)
 *   --json FILE  also writes the figures as JSON, with every run's time (samples_ms) */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static double pct(const double *sorted, int n, double p)
{
        int i = (int)(p * (n - 1) + 0.5);
        return sorted[i < n ? i : n - 1];
}

int main(int argc, char **argv)
{
        const char *json = NULL;
        if (argc > 2 && !strcmp(argv[1], "--json")) {
                json = argv[2];
                argv += 2;
                argc -= 2;
        }
        if (argc < 4 || (argc - 2) % 2) {
                fprintf(stderr, "usage: coldstart [--json FILE] N NAME CMD [NAME CMD...]\n");
                return 2;
        }
        int n = atoi(argv[1]);
        int k = (argc - 2) / 2;
        if (n < 1 || n > 100000) {
                fprintf(stderr, "coldstart: N must be 1..100000\n");
                return 2;
        }
        double *t = calloc((size_t)n * (size_t)k, sizeof(double));
        int *failures = calloc((size_t)k, sizeof(int));
        if (!t || !failures)
                return 1;
        for (int i = 0; i < n; i++)
                for (int c = 0; c < k; c++) {
                        char *cmd = argv[3 + 2 * c];
                        char *args[] = { "/bin/sh", "-c", cmd, NULL };
                        double t0 = now_us();
                        pid_t pid;
                        if (posix_spawn(&pid, "/bin/sh", NULL, NULL, args, environ) != 0) {
                                perror("posix_spawn");
                                return 1;
                        }
                        int st;
                        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                                ;
                        t[(size_t)c * (size_t)n + (size_t)i] = now_us() - t0;
                        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                                failures[c]++;
                }
        FILE *jf = json ? fopen(json, "w") : NULL;
        if (jf)
                fprintf(jf, "{\"runs\": %d, \"results\": [", n);
        printf("%-12s %10s %10s %10s %8s %s\n", "command", "median_ms", "p90_ms", "p99_ms", "ratio", "failures");
        double base = 0;
        for (int c = 0; c < k; c++) {
                double *s = t + (size_t)c * (size_t)n;
                qsort(s, (size_t)n, sizeof(double), cmp_double);
                double med = pct(s, n, 0.5);
                if (c == 0)
                        base = med;
                printf("%-12s %10.3f %10.3f %10.3f %7.2fx %d\n", argv[2 + 2 * c], med / 1000, pct(s, n, 0.9) / 1000,
                       pct(s, n, 0.99) / 1000, med / base, failures[c]);
                if (jf)
                        fprintf(jf, "%s{\"name\": \"%s\", \"median_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, \"ratio\": %.3f, \"failures\": %d",
                                c ? ", " : "", argv[2 + 2 * c], med / 1000, pct(s, n, 0.9) / 1000, pct(s, n, 0.99) / 1000, med / base,
                                failures[c]);
                if (jf) { /* every run, sorted: the distribution plots of make bench */
                        fprintf(jf, ", \"samples_ms\": [");
                        for (int i = 0; i < n; i++)
                                fprintf(jf, "%s%.3f", i ? ", " : "", s[i] / 1000);
                        fprintf(jf, "]}");
                }
        }
        if (jf) {
                fprintf(jf, "]}\n");
                fclose(jf);
        }
        int bad = 0;
        for (int c = 0; c < k; c++)
                bad |= failures[c] != 0;
        free(t);
        free(failures);
        return bad;
}
