/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "params.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "policy.h"
#include "store.h"
#include "util.h"

/* ---- checks of one value ---------------------------------------------------------------------- */

static int publish_check(const char *v, nsbox_error *err)
{
        nsbox_publish pub;
        return nsbox_publish_parse(v, &pub, err);
}

static int limits_mode_check(const char *v, nsbox_error *err)
{
        (void)err;
        return strcmp(v, "required") && strcmp(v, "best-effort") ? -EINVAL : 0;
}

static int expiry_check(const char *v, nsbox_error *err)
{
        (void)err;
        return strcmp(v, "destroy") && strcmp(v, "pause") && strcmp(v, "pause_files") ? -EINVAL : 0;
}

static int label_check(const char *v, nsbox_error *err)
{
        (void)err;
        return !strchr(v, '=') || v[0] == '=' ? -EINVAL : 0;
}

/* What a client may not send nsboxd: nsboxd's directory is not the client's. */

/* A name is looked up only in the policy directories; anything else must be an absolute path: a
 * relative one ("x.json", "../x") would be relative to the daemon's directory. */
static int policy_client(const nsbox_param *p, const char *v, strbuf *why)
{
        (void)p;
        if (v[0] != '/' && !nsbox_policy_name_valid(v)) {
                sb_appendf(why, "policy '%.300s': neither a policy name (1 to 64 letters, digits, '.', '_', '-', without .json) nor the absolute path of a policy file",
                           v);
                return -EINVAL;
        }
        return 0;
}

static int record_client(const nsbox_param *p, const char *v, strbuf *why)
{
        (void)p;
        if (v[0] != '/') {
                sb_appendf(why, "record '%s': the trajectory file must be given as an absolute path", v);
                return -EINVAL;
        }
        return 0;
}

static int rootfs_client(const nsbox_param *p, const char *v, strbuf *why)
{
        (void)p;
        if (strcmp(v, "host") && v[0] != '/') {
                sb_appendf(why, "rootfs '%s': expected 'host' or an absolute path", v);
                return -EINVAL;
        }
        return 0;
}

static int bind_client(const nsbox_param *p, const char *v, strbuf *why)
{
        (void)p;
        if (v[0] != '/') { /* relative to what? the daemon's cwd is not the client's */
                sb_appendf(why, "bind '%s': the source must be an absolute path", v);
                return -EINVAL;
        }
        return 0;
}

static int env_client(const nsbox_param *p, const char *v, strbuf *why)
{
        (void)p;
        if (!strchr(v, '=')) {
                sb_appendf(why, "env '%s': expected K=V (the daemon does not pass its own environment)", v);
                return -EINVAL;
        }
        return 0;
}

/* ---- did you mean, and --env-file ------------------------------------------------------------- */

/* Edit distance with adjacent transpositions ("tiemout" is one edit from "timeout"). */
static size_t edit_distance(const char *a, const char *b)
{
        size_t n = strlen(a), m = strlen(b);
        if (n > 64 || m > 64)
                return SIZE_MAX;
        size_t d[65][65];
        for (size_t i = 0; i <= n; i++)
                d[i][0] = i;
        for (size_t j = 0; j <= m; j++)
                d[0][j] = j;
        for (size_t i = 1; i <= n; i++)
                for (size_t j = 1; j <= m; j++) {
                        size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
                        if (d[i - 1][j] + 1 < best)
                                best = d[i - 1][j] + 1;
                        if (d[i][j - 1] + 1 < best)
                                best = d[i][j - 1] + 1;
                        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                                best = d[i - 2][j - 2] + 1;
                        d[i][j] = best;
                }
        return d[n][m];
}

const char *nsbox_closest_word(const char *word, const char *const *candidates, size_t n)
{
        const char *best = NULL;
        size_t best_d = SIZE_MAX, len = strlen(word);
        /* close enough to be a typo: one edit in a short word, two in a longer one */
        size_t limit = len <= 4 ? 1 : 2;
        for (size_t i = 0; i < n; i++) {
                if (!candidates[i] || !*candidates[i])
                        continue;
                size_t d = edit_distance(word, candidates[i]), cl = strlen(candidates[i]);
                /* "network" for "net": one word the start of the other */
                if (d > limit && cl >= 3 && len >= 3 && !strncmp(word, candidates[i], len < cl ? len : cl))
                        d = limit;
                if (d <= limit && d < best_d) {
                        best = candidates[i];
                        best_d = d;
                }
        }
        return best;
}

/* The long flag closest to NAME among those COMMAND takes, or NULL. */
static const char *closest_flag(const char *name, unsigned command)
{
        const char *flags[64];
        size_t n = 0;
        for (size_t i = 0; i < nsbox_n_params && n < ARRAY_SIZE(flags); i++)
                if (nsbox_params[i].flag && (nsbox_params[i].commands & command))
                        flags[n++] = nsbox_params[i].flag;
        return nsbox_closest_word(name, flags, n);
}

static void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

int nsbox_env_file_read(const char *path, char ***env, nsbox_error *err)
{
        __attribute__((cleanup(fclosep))) FILE *f = fopen(path, "re");
        if (!f)
                return nsbox_err(err, errno, "--env-file '%s'", path);
        _cleanup_free_ char *line = malloc(ENV_FILE_LINE_MAX + 2);
        size_t total = 0;
        if (!line)
                return nsbox_err(err, ENOMEM, "--env-file '%s'", path);
        for (unsigned no = 1; fgets(line, ENV_FILE_LINE_MAX + 2, f); no++) {
                size_t n = strlen(line);
                total += n;
                if (total > ENV_FILE_MAX)
                        return nsbox_err(err, 0, "--env-file '%s': larger than %u bytes", path, ENV_FILE_MAX);
                if (n && line[n - 1] == '\n')
                        line[--n] = '\0';
                else if (n > ENV_FILE_LINE_MAX)
                        return nsbox_err(err, 0, "--env-file '%s': line %u: longer than %u bytes", path, no, ENV_FILE_LINE_MAX);
                if (n && line[n - 1] == '\r')
                        line[--n] = '\0';
                const char *s = line + strspn(line, " \t");
                if (!*s || *s == '#') /* blank lines and comments, as docker reads them */
                        continue;
                size_t klen = strcspn(s, "=");
                bool key_ok = klen > 0 && strcspn(s, " \t") >= klen;
                for (size_t i = 0; key_ok && i < klen; i++)
                        key_ok = s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
                                 (i && s[i] >= '0' && s[i] <= '9');
                if (!key_ok)
                        return nsbox_err(err, 0, "--env-file '%s': line %u: expected NAME=VALUE or NAME (a name of letters, digits and '_')",
                                         path, no);
                int r = strv_push(env, strdup(s));
                if (r < 0)
                        return nsbox_err(err, -r, "--env-file '%s'", path);
        }
        if (ferror(f))
                return nsbox_err(err, EIO, "--env-file '%s'", path);
        return 0;
}

/* ---- the table -------------------------------------------------------------------------------- */

#define ALL (NSBOX_CMD_RUN | NSBOX_CMD_CREATE | NSBOX_CMD_MCP | NSBOX_CMD_REPLAY)
#define CREATES (NSBOX_CMD_CREATE | NSBOX_CMD_MCP | NSBOX_CMD_REPLAY)
#define LIFE (NSBOX_PARAM_LIFECYCLE | NSBOX_PARAM_DAEMON_ONLY)
#define F(x) offsetof(nsbox_run_options, x)
#define SECS "expected seconds"

/* The order is the order of checks: type first, client's paths second, values last. */
const nsbox_param nsbox_params[] = {
        { "policy", "policy", 0, NSBOX_PARAM_PATH, ALL, NSBOX_PARAM_OPERATOR_ONLY, F(policy), 0, 0, 0, NULL, NULL, policy_client,
          "a policy name of the policy directories or a policy file (default: default)" },
        { "rootfs", "rootfs", 0, NSBOX_PARAM_PATH, ALL, NSBOX_PARAM_OPERATOR_ONLY, F(rootfs), 0, 0, 0, NULL, NULL, rootfs_client,
          "the root filesystem: host (read-only) or a directory" },
        { "workdir", "workdir", 'w', NSBOX_PARAM_STRING, ALL, 0, F(workdir), 0, 0, 0, NULL, NULL, NULL, "the working directory inside" },
        { "hostname", "hostname", 0, NSBOX_PARAM_STRING, ALL, 0, F(hostname), 0, 0, 0, NULL, NULL, NULL, "the sandbox's host name" },
        { "net", "net", 0, NSBOX_PARAM_STRING, ALL, 0, F(net), 0, 0, 0, NULL, NULL, NULL, "network: none or nat" },
        { "from", "from", 0, NSBOX_PARAM_STRING, ALL, NSBOX_PARAM_DAEMON_ONLY | NSBOX_PARAM_OPERATOR_ONLY, F(from), 0, 0, 0, NULL,
          nsbox_snapshot_name_check, NULL, "start on a snapshot's filesystem" },
        { "image", "image", 0, NSBOX_PARAM_STRING, NSBOX_CMD_RUN | NSBOX_CMD_CREATE, NSBOX_PARAM_DAEMON_ONLY | NSBOX_PARAM_OPERATOR_ONLY,
          F(image), 0, 0, 0, NULL, nsbox_image_name_check, NULL, "start on an imported image (nsbox image import)" },
        { "repo", "repo", 0, NSBOX_PARAM_PATH, CREATES, NSBOX_PARAM_DAEMON_ONLY | NSBOX_PARAM_OPERATOR_ONLY, F(repo), 0, 0, 0, NULL, NULL,
          NULL, "a git repository cloned into the workdir" },
        { "commit", "commit", 0, NSBOX_PARAM_STRING, CREATES, NSBOX_PARAM_DAEMON_ONLY, F(commit), 0, 0, 0, NULL, NULL, NULL,
          "the repository's revision to check out" },
        { "record", "record", 0, NSBOX_PARAM_PATH, CREATES, NSBOX_PARAM_DAEMON_ONLY | NSBOX_PARAM_OPERATOR_ONLY, F(record), 0, 0, 0, NULL,
          NULL, record_client, "a trajectory file recording every tool call" },
        { "disk", "disk", 0, NSBOX_PARAM_SIZE, ALL, 0, F(disk), F(has_disk), 1 << 20, 0, "expected a size of at least 1M, e.g. 512M", NULL,
          NULL, "the writable layer's and /tmp's size" },
        { "memory", "memory", 0, NSBOX_PARAM_SIZE, ALL, 0, F(memory), F(has_memory), 1 << 20, 0, "expected a size of at least 1M, e.g. 512M",
          NULL, NULL, "the memory limit" },
        { "pids", "pids", 0, NSBOX_PARAM_COUNT, ALL, 0, F(pids), F(has_pids), 1, 4194304, "expected a number of processes from 1 to 4194304",
          NULL, NULL, "the number of processes" },
        { "cpus", "cpus", 0, NSBOX_PARAM_NUMBER, ALL, 0, F(cpus), F(has_cpus), 0, 1024,
          "expected a number above 0 and at most 1024, e.g. 0.5", NULL, NULL, "the CPU limit, in CPUs" },
        { "limits", "limits", 0, NSBOX_PARAM_STRING, ALL, 0, F(limits_mode), 0, 0, 0, "expected required or best-effort",
          limits_mode_check, NULL,
          "required or best-effort: limits that cannot hold here refuse the start, or run without (default: required for "
          "--memory, --pids and --cpus, the policy's limits.enforce otherwise)" },
        { "timeout", "timeout", 0, NSBOX_PARAM_SECONDS, ALL, LIFE, F(timeout_ms), F(has_timeout), 0, 0, SECS ", e.g. 30 or 0.5", NULL, NULL,
          "run: the command's time; create: the sandbox's lifetime" },
        { "bind", "bind", 0, NSBOX_PARAM_LIST, ALL, NSBOX_PARAM_OPERATOR_ONLY, F(binds), 0, 0, 0, NULL, NULL, bind_client,
          "SRC:DST[:rw], a host path mounted inside" },
        { "tmpfs", "tmpfs", 0, NSBOX_PARAM_LIST, ALL, 0, F(tmpfs), 0, 0, 0, NULL, NULL, NULL, "DST[:SIZE], a tmpfs inside" },
        { "env", "env", 'e', NSBOX_PARAM_ENV, ALL, 0, F(env), 0, 0, 0, NULL, NULL, env_client, "K=V, a variable of the environment" },
        { NULL, "env-file", 0, NSBOX_PARAM_ENV_FILE, NSBOX_CMD_RUN | NSBOX_CMD_CREATE | NSBOX_CMD_MCP, 0, F(env), 0, 0, 0, NULL, NULL, NULL,
          "FILE of K=V lines, as docker's --env-file" },
        { "allow", "allow", 0, NSBOX_PARAM_LIST, ALL, 0, F(allow), 0, 0, 0, NULL, nsbox_egress_check, NULL, "an egress the network allows" },
        { "publish", "publish", 0, NSBOX_PARAM_LIST, ALL, NSBOX_PARAM_OPERATOR_ONLY, F(publish), 0, 0, 0, NULL, publish_check, NULL,
          "[127.0.0.1:]HOSTPORT[:PORT], a port forwarded from the host" },
        { "labels", "label", 0, NSBOX_PARAM_LABELS, NSBOX_CMD_CREATE | NSBOX_CMD_MCP, LIFE, F(labels), 0, 0, 0, "expected KEY=VALUE", label_check,
          NULL, "K=V, a label shown by ls" },
        { "template", "template", 0, NSBOX_PARAM_STRING, CREATES, LIFE, F(template_name), 0, 0, 0, NULL, NULL, NULL,
          "a template of nsboxd's configuration" },
        { "idle_timeout", "idle-timeout", 0, NSBOX_PARAM_SECONDS, CREATES, LIFE, F(idle_ms), F(has_idle), 0, 0, SECS ", e.g. 300", NULL, NULL,
          "expire after seconds without a call" },
        { "on_expiry", "on-expiry", 0, NSBOX_PARAM_STRING, CREATES, LIFE, F(on_expiry), 0, 0, 0, "expected destroy, pause or pause_files", expiry_check,
          NULL, "what expiry does: destroy, pause or pause_files" },
        { "wait", "wait", 0, NSBOX_PARAM_SECONDS, CREATES, LIFE, F(wait_ms), F(has_wait), 0, 600000, SECS " from 0 to 600", NULL, NULL,
          "wait up to seconds for room when nsboxd is at capacity" },
        { "close_with_client", NULL, 0, NSBOX_PARAM_FLAG, 0, LIFE, F(close_with_client), 0, 0, 0, NULL, NULL, NULL,
          "destroyed when the client's connection closes" },
        { "progress", NULL, 0, NSBOX_PARAM_FLAG, 0, LIFE, F(progress), 0, 0, 0, NULL, NULL, NULL,
          "progress events while a repository is cloned" },
        { "writable_root", NULL, 0, NSBOX_PARAM_FLAG, 0, 0, F(writable_root), 0, 0, 0, NULL, NULL, NULL,
          "a writable root: what is written outside the policy's writable places goes to the sandbox's own layer" },
        { NULL, "count", 0, NSBOX_PARAM_COUNT, NSBOX_CMD_CREATE | NSBOX_CMD_MCP, 0, F(count), 0, 1, 256, "expected a number from 1 to 256", NULL,
          NULL, "create N sandboxes" },
        { NULL, "reuse", 0, NSBOX_PARAM_FLAG, NSBOX_CMD_CREATE | NSBOX_CMD_MCP, 0, F(reuse), 0, 0, 0, NULL, NULL, NULL,
          "get or create the sandbox with the labels" },
        { NULL, "tty", 't', NSBOX_PARAM_FLAG, NSBOX_CMD_RUN, 0, F(tty), 0, 0, 0, NULL, NULL, NULL,
          "run the command on a terminal of its own when stdin is one" },
        { NULL, "interactive", 'i', NSBOX_PARAM_FLAG, NSBOX_CMD_RUN, 0, F(interactive), 0, 0, 0, NULL, NULL, NULL,
          "keep stdin (always so: for -it as in docker)" },
        { NULL, "rm", 0, NSBOX_PARAM_FLAG, NSBOX_CMD_RUN, 0, F(rm), 0, 0, 0, NULL, NULL, NULL,
          "remove the sandbox at the end (always so: as in docker)" },
        { NULL, "json", 0, NSBOX_PARAM_FLAG, ALL, 0, F(json), 0, 0, 0, NULL, NULL, NULL, "print JSON" },
        { NULL, "help", 'h', NSBOX_PARAM_FLAG, ALL, 0, F(help), 0, 0, 0, NULL, NULL, NULL, "print the usage" },
};
const size_t nsbox_n_params = ARRAY_SIZE(nsbox_params);

#undef F

const nsbox_param *nsbox_param_by_key(const char *key)
{
        for (size_t i = 0; key && i < nsbox_n_params; i++)
                if (nsbox_params[i].key && !strcmp(nsbox_params[i].key, key))
                        return &nsbox_params[i];
        return NULL;
}

const nsbox_param *nsbox_param_by_flag(const char *flag)
{
        for (size_t i = 0; flag && i < nsbox_n_params; i++)
                if (nsbox_params[i].flag && !strcmp(nsbox_params[i].flag, flag))
                        return &nsbox_params[i];
        return NULL;
}

bool nsbox_param_is(const char *key, unsigned who)
{
        const nsbox_param *p = nsbox_param_by_key(key);
        return p && (p->who & who);
}

bool nsbox_param_given(json_t *v)
{
        return v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0) && !(json_is_object(v) && json_object_size(v) == 0);
}

const char *nsbox_params_first(json_t *params, unsigned who)
{
        for (size_t i = 0; json_is_object(params) && i < nsbox_n_params; i++)
                if (nsbox_params[i].key && (nsbox_params[i].who & who) && nsbox_param_given(json_object_get(params, nsbox_params[i].key)))
                        return nsbox_params[i].key;
        return NULL;
}

void nsbox_params_strip(json_t *params, unsigned who)
{
        for (size_t i = 0; json_is_object(params) && i < nsbox_n_params; i++)
                if (nsbox_params[i].key && (nsbox_params[i].who & who))
                        json_object_del(params, nsbox_params[i].key);
}

const char *nsbox_params_operator_only(json_t *params)
{
        for (size_t i = 0; json_is_object(params) && i < nsbox_n_params; i++) {
                const nsbox_param *p = &nsbox_params[i];
                json_t *v = p->key && (p->who & NSBOX_PARAM_OPERATOR_ONLY) ? json_object_get(params, p->key) : NULL;
                if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
                        continue;
                const char *s = json_string_value(v);
                if (!strcmp(p->key, "rootfs") && s && !strcmp(s, "host"))
                        continue;
                if (!strcmp(p->key, "policy") && s && s[0] != '/')
                        continue; /* not a path: a policy name, held to its grammar by policy_client */
                return p->key;
        }
        return NULL;
}

/* ---- one value, from the command line or JSON ------------------------------------------------- */

#define FIELD(o, p, type) ((type *)(void *)((char *)(o) + (p)->off))

/* Check value v of p and store it in o; messages as "CMD: --FLAG 'V': expected ..." */
static int set_value(const nsbox_param *p, const char *cmd, const char *v, nsbox_run_options *o, nsbox_error *err)
{
        int r = 0;
        if (p->check && p->expect && p->check(v, NULL) < 0)
                return nsbox_err(err, 0, "%s: --%s '%s': %s", cmd, p->flag, v, p->expect);
        if (p->check && !p->expect && (r = p->check(v, err)) < 0)
                return nsbox_err_wrap(err, r, "%s: --%s", cmd, p->flag);
        switch (p->type) {
        case NSBOX_PARAM_STRING:
        case NSBOX_PARAM_PATH:
                *FIELD(o, p, const char *) = v;
                break;
        case NSBOX_PARAM_SIZE:
                if (parse_size(v, FIELD(o, p, uint64_t)) < 0 || *FIELD(o, p, uint64_t) < p->min)
                        return nsbox_err(err, 0, "%s: --%s '%s': %s", cmd, p->flag, v, p->expect);
                break;
        case NSBOX_PARAM_COUNT:
                if (parse_u64(v, p->min, p->max, FIELD(o, p, uint64_t)) < 0)
                        return nsbox_err(err, 0, "%s: --%s '%s': %s", cmd, p->flag, v, p->expect);
                break;
        case NSBOX_PARAM_NUMBER: {
                char *end = NULL;
                errno = 0;
                double d = strtod(v, &end);
                *FIELD(o, p, double) = d;
                if (errno || end == v || *end || !(d > 0 && d <= (double)p->max))
                        return nsbox_err(err, 0, "%s: --%s '%s': %s", cmd, p->flag, v, p->expect);
                break;
        }
        case NSBOX_PARAM_SECONDS:
                if (parse_duration_ms(v, FIELD(o, p, uint64_t)) < 0 || (p->max && *FIELD(o, p, uint64_t) > p->max))
                        return nsbox_err(err, 0, "%s: --%s '%s': %s", cmd, p->flag, v, p->expect);
                break;
        case NSBOX_PARAM_LIST:
        case NSBOX_PARAM_ENV:
        case NSBOX_PARAM_LABELS:
                if ((r = strv_push(FIELD(o, p, char **), strdup(v))) < 0)
                        return nsbox_err(err, -r, "%s", cmd);
                break;
        case NSBOX_PARAM_ENV_FILE:
                if ((r = nsbox_env_file_read(v, FIELD(o, p, char **), err)) < 0)
                        return nsbox_err_wrap(err, r, "%s", cmd);
                break;
        case NSBOX_PARAM_FLAG:
        case NSBOX_PARAM_TYPE_MAX:
                *FIELD(o, p, bool) = true;
                break;
        }
        if (p->has_off)
                *(bool *)((char *)o + p->has_off) = true;
        return 0;
}

/* What create alone checks once every option is in (and replay, and mcp). */
static int create_checks(const char *cmd, const nsbox_run_options *o, nsbox_error *err)
{
        if (o->commit && !o->repo)
                return nsbox_err(err, 0, "%s: --commit needs --repo", cmd);
        if (o->repo && o->from)
                return nsbox_err(err, 0, "%s: --repo and --from do not go together (a snapshot has its workspace already)", cmd);
        if (o->image && (o->repo || o->from))
                return nsbox_err(err, 0, "%s: --image does not go with --%s", cmd, o->repo ? "repo" : "from");
        if (o->reuse && !o->labels)
                return nsbox_err(err, 0, "%s: --reuse gets or creates the sandbox with the --label given: give at least one", cmd);
        if (o->reuse && o->count > 1)
                return nsbox_err(err, 0, "%s: --reuse gives one sandbox, not --count %llu", cmd, (unsigned long long)o->count);
        return 0;
}

/* ---- the command line ------------------------------------------------------------------------- */

static unsigned command_of(const char *cmd)
{
        if (!strcmp(cmd, "create"))
                return NSBOX_CMD_CREATE;
        if (!strcmp(cmd, "mcp")) /* its default sandbox's */
                return NSBOX_CMD_MCP;
        if (!strcmp(cmd, "replay")) /* given again, what a trajectory may not choose alone */
                return NSBOX_CMD_REPLAY;
        return NSBOX_CMD_RUN;
}

/* The row of "--NAME" (n bytes), or of an unambiguous abbreviation, as getopt_long takes them. */
static const nsbox_param *long_flag(const char *name, size_t n)
{
        const nsbox_param *found = NULL;
        unsigned matches = 0;
        for (size_t i = 0; i < nsbox_n_params; i++) {
                const char *f = nsbox_params[i].flag;
                if (!f || strncmp(f, name, n))
                        continue;
                if (!f[n])
                        return &nsbox_params[i];
                found = &nsbox_params[i];
                matches++;
        }
        return matches == 1 ? found : NULL;
}

/* docker's options that nsbox spells otherwise (or has no need of): what to use instead. */
static const char *docker_hint(const char *a)
{
        static const char *const hints[][2] = {
                { "-v", "docker's volume: use --bind SRC:DST (read-only) or --bind SRC:DST:rw" },
                { "--volume", "docker's volume: use --bind SRC:DST (read-only) or --bind SRC:DST:rw" },
                { "--mount", "docker's mount: use --bind SRC:DST[:rw] or --tmpfs DST[:SIZE]" },
                { "-u", "docker's user: a sandbox runs as its policy's user; --policy root runs as root" },
                { "--user", "docker's user: a sandbox runs as its policy's user; --policy root runs as root" },
                { "-p", "docker's publish: use --publish [127.0.0.1:]HOSTPORT[:PORT], with --net nat" },
                { "-m", "docker's memory: use --memory SIZE" },
                { "--name", "a run's sandbox has no name: nsbox create --label K=V makes one that stays" },
                { "-d", "docker's detach: nsbox create, then nsbox exec -d ID -- CMD" },
                { "--detach", "docker's detach: nsbox create, then nsbox exec -d ID -- CMD" },
                { "--entrypoint", "the command is what follows --: nsbox run [OPTIONS] -- CMD [ARG...]" },
        };
        size_t n = a[1] == '-' ? strcspn(a, "=") : 2;
        for (size_t i = 0; i < ARRAY_SIZE(hints); i++)
                if (strlen(hints[i][0]) == n && !strncmp(a, hints[i][0], n))
                        return hints[i][1];
        return NULL;
}

static const nsbox_param *short_flag(char c)
{
        for (size_t i = 0; c && i < nsbox_n_params; i++)
                if (nsbox_params[i].short_flag == c)
                        return &nsbox_params[i];
        return NULL;
}

/* Options up to the first non-option or "--"; *ret_next is the index of what follows. */
static int parse_flags(int argc, char **argv, unsigned command, nsbox_run_options *o, int *ret_next, nsbox_error *err)
{
        const char *cmd = argv[0];
        int i = 1;
        for (; i < argc; i++) {
                const char *a = argv[i], *v = NULL;
                const nsbox_param *p;
                if (!strcmp(a, "--")) {
                        i++;
                        break;
                }
                if (a[0] != '-' || !a[1]) /* the command's own options stay its own */
                        break;
                if (a[1] == '-') {
                        const char *eq = strchr(a + 2, '=');
                        p = long_flag(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
                        const char *hint = p ? NULL : docker_hint(a);
                        if (hint)
                                return nsbox_err(err, 0, "%s: unknown option '%s' (%s; see nsbox %s --help)", cmd, a, hint, cmd);
                        if (!p || (eq && p->type == NSBOX_PARAM_FLAG)) {
                                _cleanup_free_ char *name = strndup(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
                                const char *near = p ? NULL : closest_flag(name ? name : "", command);
                                if (near)
                                        return nsbox_err(err, 0, "%s: unknown option '%s' (did you mean --%s? see nsbox %s --help)", cmd, a,
                                                         near, cmd);
                                return nsbox_err(err, 0, "%s: unknown option '%s' (see nsbox %s --help)", cmd, a, cmd);
                        }
                        if (eq)
                                v = eq + 1;
                } else {
                        const char *hint = (p = short_flag(a[1])) ? NULL : docker_hint(a);
                        if (hint)
                                return nsbox_err(err, 0, "%s: unknown option '-%c' (%s; see nsbox %s --help)", cmd, a[1], hint, cmd);
                        if (!p)
                                return nsbox_err(err, 0, "%s: unknown option '-%c' (see nsbox %s --help)", cmd, a[1], cmd);
                        if (a[2] && p->type != NSBOX_PARAM_FLAG)
                                v = a + 2;
                        /* -it: flags together, each a flag of its own (the last one is set below) */
                        for (const char *c = a + 1; p->type == NSBOX_PARAM_FLAG && c[1]; c++) {
                                const nsbox_param *q = short_flag(c[1]);
                                if (!q || q->type != NSBOX_PARAM_FLAG || q->short_flag == 'h')
                                        return nsbox_err(err, 0, "%s: unknown option '%s' (see nsbox %s --help)", cmd, a, cmd);
                                if (!(p->commands & command))
                                        break; /* refused below */
                                int r = set_value(p, cmd, "", o, err);
                                if (r < 0)
                                        return r;
                                p = q;
                        }
                }
                if (p->type != NSBOX_PARAM_FLAG && !v) {
                        if (i + 1 >= argc)
                                return nsbox_err(err, 0, "%s: option '%s' needs a value", cmd, a);
                        v = argv[++i];
                }
                if (p->type == NSBOX_PARAM_FLAG && p->short_flag == 'h') {
                        o->help = true;
                        *ret_next = i + 1;
                        return 0;
                }
                if (!(p->commands & command)) {
                        if (command == NSBOX_CMD_REPLAY)
                                return nsbox_err(err, 0, "%s: --label, --reuse and --count do not apply to nsbox replay", cmd);
                        return nsbox_err(err, 0, "%s: --%s applies to nsbox create", cmd, p->flag);
                }
                int r = set_value(p, cmd, v ? v : "", o, err);
                if (r < 0)
                        return r;
        }
        *ret_next = i;
        return 0;
}

int nsbox_run_options_parse(int argc, char **argv, nsbox_run_options *o, nsbox_error *err)
{
        *o = (nsbox_run_options){ .policy = "default", .count = 1 };
        const char *cmd = argv[0];
        unsigned command = command_of(cmd);
        int next = 1, r = parse_flags(argc, argv, command, o, &next, err);
        if (r < 0 || o->help)
                return r;
        if (command == NSBOX_CMD_RUN) {
                if (next >= argc && o->image) /* the image's Entrypoint and Cmd */
                        return 0;
                if (next >= argc)
                        return nsbox_err(err, 0, "%s: no command given (usage: nsbox %s [OPTIONS] [--] CMD [ARG...])", cmd, cmd);
                o->argv = argv + next;
                return 0;
        }
        /* a persistent sandbox: commands come later, with nsbox exec */
        if ((r = create_checks(cmd, o, err)) < 0)
                return r;
        if (command == NSBOX_CMD_REPLAY) {
                if (next + 1 != argc)
                        return nsbox_err(err, 0, "%s: expected one trajectory FILE after the options (see nsbox replay --help)", cmd);
                o->argv = argv + next;
                return 0;
        }
        if (next < argc)
                return nsbox_err(err, 0, "%s: unexpected argument '%s' (commands run with nsbox exec ID -- CMD)", cmd, argv[next]);
        return 0;
}

/* ---- a JSON params object --------------------------------------------------------------------- */

enum { PASS_TYPE, PASS_CLIENT, PASS_VALUE };

/* One string value of p in pass: its type was checked, then what a client may send, then it is
 * parsed into o. */
static int json_one(const nsbox_param *p, int pass, const char *s, nsbox_run_options *o, strbuf *why, nsbox_error *err)
{
        if (pass == PASS_CLIENT)
                return p->client_check ? p->client_check(p, s, why) : 0;
        if (pass == PASS_VALUE)
                return set_value(p, "create", s, o, err);
        return 0;
}

static int json_list(const nsbox_param *p, int pass, json_t *v, nsbox_run_options *o, strbuf *why, nsbox_error *err)
{
        int r;
        if ((p->type == NSBOX_PARAM_ENV || p->type == NSBOX_PARAM_LABELS) && json_is_object(v)) { /* {"K": "V"} */
                const char *k;
                json_t *val;
                json_object_foreach(v, k, val) {
                        _cleanup_free_ char *kv = NULL;
                        if (!json_is_string(val) || asprintf(&kv, "%s=%s", k, json_string_value(val)) < 0) {
                                sb_appendf(why, "'%s' must map names to strings", p->key);
                                return -EINVAL;
                        }
                        if (pass != PASS_CLIENT && (r = json_one(p, pass, kv, o, why, err)) < 0)
                                return r;
                }
                return 0;
        }
        if (!json_is_array(v) || p->type == NSBOX_PARAM_LABELS) {
                sb_appendf(why, p->type == NSBOX_PARAM_LABELS ? "'%s' must map names to strings" : "'%s' must be an array of strings", p->key);
                return -EINVAL;
        }
        size_t j;
        json_t *e;
        json_array_foreach(v, j, e) {
                if (!json_is_string(e)) {
                        sb_appendf(why, "'%s' must be an array of strings", p->key);
                        return -EINVAL;
                }
                if ((r = json_one(p, pass, json_string_value(e), o, why, err)) < 0)
                        return r;
        }
        return 0;
}

/* The value of p in params, in one pass; sizes may be strings ("512M") or numbers of bytes. */
static int json_param(const nsbox_param *p, int pass, json_t *v, nsbox_run_options *o, strbuf *why, nsbox_error *err)
{
        char num[64];
        switch (p->type) {
        case NSBOX_PARAM_STRING:
        case NSBOX_PARAM_PATH:
                if (!json_is_string(v))
                        break;
                return json_one(p, pass, json_string_value(v), o, why, err);
        case NSBOX_PARAM_SIZE:
                if (json_is_string(v))
                        return json_one(p, pass, json_string_value(v), o, why, err);
                if (!json_is_integer(v) || json_integer_value(v) < 0)
                        break;
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return json_one(p, pass, num, o, why, err);
        case NSBOX_PARAM_COUNT:
                if (!json_is_integer(v))
                        break;
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return json_one(p, pass, num, o, why, err);
        case NSBOX_PARAM_NUMBER:
                if (!json_is_number(v))
                        break;
                snprintf(num, sizeof(num), "%.6g", json_number_value(v));
                return json_one(p, pass, num, o, why, err);
        case NSBOX_PARAM_SECONDS:
                if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e9)
                        break;
                snprintf(num, sizeof(num), "%.3f", json_number_value(v));
                return json_one(p, pass, num, o, why, err);
        case NSBOX_PARAM_LIST:
        case NSBOX_PARAM_ENV:
        case NSBOX_PARAM_LABELS:
                return json_list(p, pass, v, o, why, err);
        case NSBOX_PARAM_ENV_FILE: /* the command line's only: no key */
                break;
        case NSBOX_PARAM_FLAG:
        case NSBOX_PARAM_TYPE_MAX:
                if (!json_is_boolean(v))
                        break;
                if (pass == PASS_VALUE)
                        *FIELD(o, p, bool) = json_is_true(v);
                return 0;
        }
        static const char *const must[NSBOX_PARAM_TYPE_MAX] = {
                [NSBOX_PARAM_STRING] = "a string",
                [NSBOX_PARAM_PATH] = "a string",
                [NSBOX_PARAM_SIZE] = "a size such as \"512M\" or a number of bytes",
                [NSBOX_PARAM_COUNT] = "an integer",
                [NSBOX_PARAM_NUMBER] = "a number",
                [NSBOX_PARAM_SECONDS] = "a number of seconds",
                [NSBOX_PARAM_FLAG] = "true or false",
        };
        sb_appendf(why, "'%s' must be %s", p->key, must[p->type] ? must[p->type] : "of its type");
        return -EINVAL;
}

int nsbox_params_from_json(json_t *params, unsigned skip, nsbox_run_options *o, nsbox_error *err)
{
        *o = (nsbox_run_options){ .policy = "default", .count = 1 };
        if (params && !json_is_object(params))
                return nsbox_err_as(err, EINVAL, "create: params must be an object");
        _cleanup_sb_ strbuf why;
        sb_init(&why, 1024);
        const char *key;
        json_t *v;
        json_object_foreach(params, key, v) /* a typo must not pass as a default */
                if (!nsbox_param_by_key(key))
                        return nsbox_err_as(err, EINVAL, "create: unknown parameter '%.64s' (see nsbox-protocol(7), create)", key);
        for (int pass = PASS_TYPE; pass <= PASS_VALUE; pass++)
                for (size_t i = 0; i < nsbox_n_params; i++) {
                        const nsbox_param *p = &nsbox_params[i];
                        if (!p->key || (p->who & skip) || !(v = json_object_get(params, p->key)) || json_is_null(v))
                                continue;
                        int r = json_param(p, pass, v, o, &why, err);
                        if (r < 0 && pass == PASS_VALUE)
                                return r;
                        if (r < 0)
                                return nsbox_err_as(err, r == -ENOMEM ? ENOMEM : EINVAL, "create: %s", why.buf ? why.buf : "out of memory");
                }
        return create_checks("create", o, err);
}

#undef FIELD

/* ---- the CLI's side: options into a params object --------------------------------------------- */

/* A host path as nsboxd must see it: absolute, symlinks resolved; what is not a host path (a
 * policy name, rootfs "host", a repository URL) as it is.  NULL with err on failure. */
static char *resolve(const nsbox_param *p, const char *v, nsbox_error *err)
{
        char *r = NULL;
        if (!strcmp(p->key, "policy")) { /* as nsbox_policy_find takes it: nsboxd looks a name up in its own directories */
                size_t n = strlen(v);
                bool file = strchr(v, '/') || (n >= 5 && !strcmp(v + n - 5, ".json"));
                r = file ? realpath(v, NULL) : strdup(v);
        } else if (!strcmp(p->key, "rootfs")) {
                r = strcmp(v, "host") ? realpath(v, NULL) : strdup(v);
        } else if (!strcmp(p->key, "repo")) { /* URLs as they are */
                bool url = strstr(v, "://") || (strchr(v, '@') && strchr(v, ':'));
                r = url ? strdup(v) : realpath(v, NULL);
        } else if (!strcmp(p->key, "record")) { /* the file need not exist yet: resolve its directory */
                _cleanup_free_ char *copy = strdup(v);
                char *slash = copy ? strrchr(copy, '/') : NULL;
                const char *base = slash ? slash + 1 : v;
                if (slash)
                        *slash = '\0';
                _cleanup_free_ char *dir = copy ? realpath(slash ? (copy[0] ? copy : "/") : ".", NULL) : NULL;
                if (dir && !*base) {
                        nsbox_err(err, 0, "--record '%s': expected a file name", v);
                        return NULL;
                }
                if (dir && asprintf(&r, "%s/%s", strcmp(dir, "/") ? dir : "", base) < 0)
                        r = NULL;
        } else if (!strcmp(p->key, "bind")) { /* SRC[:DST[:rw]]: the source */
                const char *colon = strchr(v, ':');
                _cleanup_free_ char *src = strndup(v, colon ? (size_t)(colon - v) : strlen(v));
                _cleanup_free_ char *real = src ? realpath(src, NULL) : NULL;
                if (!real) {
                        nsbox_err(err, errno, "--bind '%s': '%s'", v, src ? src : "");
                        return NULL;
                }
                if (asprintf(&r, "%s%s", real, colon ? colon : "") < 0)
                        r = NULL;
        } else {
                r = strdup(v);
        }
        if (!r)
                nsbox_err(err, errno, "--%s '%s'", p->flag, v);
        return r;
}

static int list_to_json(const nsbox_param *p, char **list, json_t *ret, nsbox_error *err)
{
        json_t *a = p->type == NSBOX_PARAM_LABELS ? json_object() : json_array();
        if (!a || json_object_set_new(ret, p->key, a) < 0)
                return nsbox_err(err, ENOMEM, "create params");
        for (char **e = list; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                if (p->type == NSBOX_PARAM_LABELS) {
                        _cleanup_free_ char *k = strndup(*e, (size_t)(eq - *e));
                        if (!k || json_object_set_new(a, k, json_string(eq + 1)) < 0)
                                return nsbox_err(err, ENOMEM, "create params");
                        continue;
                }
                if (p->type == NSBOX_PARAM_ENV && !eq) { /* -e K passes the caller's K, as nsbox run does */
                        if (getenv(*e) && json_array_append_new(a, json_sprintf("%s=%s", *e, getenv(*e))) < 0)
                                return nsbox_err(err, ENOMEM, "create params");
                        continue;
                }
                _cleanup_free_ char *s = resolve(p, *e, err);
                if (!s || json_array_append_new(a, json_string(s)) < 0)
                        return s ? nsbox_err(err, ENOMEM, "create params") : -EINVAL;
        }
        return 0;
}

int nsbox_params_to_json(const nsbox_run_options *o, json_t **ret, nsbox_error *err)
{
        json_t *p = json_object();
        int r = p ? 0 : nsbox_err(err, ENOMEM, "create params");
        for (size_t i = 0; r == 0 && i < nsbox_n_params; i++) {
                const nsbox_param *row = &nsbox_params[i];
                const void *field = (const char *)o + row->off;
                bool has = !row->has_off || *(const bool *)((const char *)o + row->has_off);
                json_t *v = NULL;
                if (!row->key || !has)
                        continue;
                switch (row->type) {
                case NSBOX_PARAM_STRING:
                case NSBOX_PARAM_PATH: {
                        const char *s = *(const char *const *)field;
                        if (!s || (!strcmp(row->key, "policy") && !strcmp(s, "default")))
                                continue;
                        _cleanup_free_ char *res = resolve(row, s, err);
                        if (!res)
                                r = -EINVAL;
                        else
                                v = json_string(res);
                        break;
                }
                case NSBOX_PARAM_SIZE: v = json_sprintf("%" PRIu64, *(const uint64_t *)field); break;
                case NSBOX_PARAM_COUNT: v = json_integer((json_int_t) * (const uint64_t *)field); break;
                case NSBOX_PARAM_NUMBER: v = json_real(*(const double *)field); break;
                case NSBOX_PARAM_SECONDS: v = json_real((double)*(const uint64_t *)field / 1000.0); break;
                case NSBOX_PARAM_LIST:
                case NSBOX_PARAM_ENV:
                case NSBOX_PARAM_LABELS: r = list_to_json(row, *(char **const *)field, p, err); continue;
                case NSBOX_PARAM_ENV_FILE: continue; /* read into env already */
                case NSBOX_PARAM_FLAG:
                case NSBOX_PARAM_TYPE_MAX:
                        if (!*(const bool *)field)
                                continue;
                        v = json_true();
                        break;
                }
                if (r == 0 && (!v || json_object_set_new(p, row->key, v) < 0))
                        r = nsbox_err(err, ENOMEM, "create params");
        }
        if (r < 0) {
                json_decref(p);
                return r;
        }
        *ret = p;
        return 0;
}
