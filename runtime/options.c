/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "store.h"
#include "util.h"

enum {
        OPT_POLICY = 0x100, OPT_ROOTFS, OPT_WORKDIR, OPT_BIND, OPT_TMPFS, OPT_HOSTNAME, OPT_TIMEOUT,
        OPT_JSON, OPT_DISK, OPT_NET, OPT_LABEL, OPT_MEMORY, OPT_PIDS, OPT_CPUS, OPT_FROM, OPT_REPO, OPT_COMMIT,
        OPT_RECORD, OPT_COUNT, OPT_ALLOW, OPT_PUBLISH, OPT_TEMPLATE, OPT_IDLE, OPT_EXPIRY, OPT_WAIT, OPT_REUSE,
};

static const struct option run_options[] = {
        { "policy", required_argument, NULL, OPT_POLICY },
        { "rootfs", required_argument, NULL, OPT_ROOTFS },
        { "workdir", required_argument, NULL, OPT_WORKDIR },
        { "bind", required_argument, NULL, OPT_BIND },
        { "tmpfs", required_argument, NULL, OPT_TMPFS },
        { "env", required_argument, NULL, 'e' },
        { "hostname", required_argument, NULL, OPT_HOSTNAME },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        { "disk", required_argument, NULL, OPT_DISK },
        { "memory", required_argument, NULL, OPT_MEMORY },
        { "pids", required_argument, NULL, OPT_PIDS },
        { "cpus", required_argument, NULL, OPT_CPUS },
        { "net", required_argument, NULL, OPT_NET },
        { "allow", required_argument, NULL, OPT_ALLOW },
        { "publish", required_argument, NULL, OPT_PUBLISH },
        { "json", no_argument, NULL, OPT_JSON },
        { "label", required_argument, NULL, OPT_LABEL },
        { "from", required_argument, NULL, OPT_FROM },
        { "repo", required_argument, NULL, OPT_REPO },
        { "commit", required_argument, NULL, OPT_COMMIT },
        { "record", required_argument, NULL, OPT_RECORD },
        { "count", required_argument, NULL, OPT_COUNT },
        { "template", required_argument, NULL, OPT_TEMPLATE },
        { "idle-timeout", required_argument, NULL, OPT_IDLE },
        { "on-expiry", required_argument, NULL, OPT_EXPIRY },
        { "wait", required_argument, NULL, OPT_WAIT },
        { "reuse", no_argument, NULL, OPT_REUSE },
        { "help", no_argument, NULL, 'h' },
        {},
};

/* The long name of option value c (argv[optind - 1] is its value when given apart) */
static const char *option_name(int c)
{
        for (const struct option *o = run_options; o->name; o++)
                if (o->val == c)
                        return o->name;
        return "?";
}

int nsbox_run_options_parse(int argc, char **argv, nsbox_run_options *o, nsbox_error *err)
{
        *o = (nsbox_run_options){ .policy = "default", .count = 1 };
        const char *cmd = argv[0];
        /* mcp: its default sandbox's; replay: given again, what a trajectory may not choose alone */
        bool replay = !strcmp(cmd, "replay");
        bool create = !strcmp(cmd, "create") || !strcmp(cmd, "mcp") || replay;
        optind = 0; /* full reset: the parser may run more than once in a process (tests) */
        opterr = 0;
        int c;
        /* '+': stop at the first non-option, so the command's own options stay its own */
        while ((c = getopt_long(argc, argv, "+:e:h", run_options, NULL)) != -1) {
                int r = 0;
                switch (c) {
                case OPT_POLICY: o->policy = optarg; break;
                case OPT_ROOTFS: o->rootfs = optarg; break;
                case OPT_WORKDIR: o->workdir = optarg; break;
                case OPT_HOSTNAME: o->hostname = optarg; break;
                case OPT_NET: o->net = optarg; break;
                case OPT_BIND: r = strv_push(&o->binds, strdup(optarg)); break;
                case OPT_TMPFS: r = strv_push(&o->tmpfs, strdup(optarg)); break;
                case 'e': r = strv_push(&o->env, strdup(optarg)); break;
                case OPT_ALLOW:
                        if ((r = nsbox_egress_check(optarg, err)) < 0)
                                return nsbox_err_wrap(err, r, "%s: --allow", cmd);
                        r = strv_push(&o->allow, strdup(optarg));
                        break;
                case OPT_PUBLISH: {
                        nsbox_publish pub;
                        if ((r = nsbox_publish_parse(optarg, &pub, err)) < 0)
                                return nsbox_err_wrap(err, r, "%s: --publish", cmd);
                        r = strv_push(&o->publish, strdup(optarg));
                        break;
                }
                case OPT_JSON: o->json = true; break;
                case OPT_LABEL:
                        if (!create)
                                return nsbox_err(err, 0, "%s: --label applies to nsbox create", cmd);
                        if (!strchr(optarg, '=') || optarg[0] == '=')
                                return nsbox_err(err, 0, "%s: --label '%s': expected KEY=VALUE", cmd, optarg);
                        r = strv_push(&o->labels, strdup(optarg));
                        break;
                case OPT_FROM:
                        if ((r = nsbox_snapshot_name_check(optarg, err)) < 0)
                                return nsbox_err_wrap(err, r, "%s: --from", cmd);
                        o->from = optarg;
                        break;
                case OPT_TEMPLATE:
                case OPT_IDLE:
                case OPT_EXPIRY:
                case OPT_WAIT:
                case OPT_REUSE:
                        if (!create)
                                return nsbox_err(err, 0, "%s: --%s applies to nsbox create", cmd, option_name(c));
                        if (c == OPT_TEMPLATE)
                                o->template_name = optarg;
                        else if (c == OPT_REUSE)
                                o->reuse = true;
                        else if (c == OPT_EXPIRY && strcmp(optarg, "destroy") && strcmp(optarg, "pause"))
                                return nsbox_err(err, 0, "%s: --on-expiry '%s': expected destroy or pause", cmd, optarg);
                        else if (c == OPT_EXPIRY)
                                o->on_expiry = optarg;
                        else if (parse_duration_ms(optarg, c == OPT_IDLE ? &o->idle_ms : &o->wait_ms) < 0 ||
                                 (c == OPT_WAIT && o->wait_ms > 600000))
                                return nsbox_err(err, 0, "%s: --%s '%s': expected seconds%s", cmd, option_name(c), optarg,
                                                 c == OPT_WAIT ? " from 0 to 600" : ", e.g. 300");
                        else if (c == OPT_IDLE)
                                o->has_idle = true;
                        else
                                o->has_wait = true;
                        break;
                case OPT_REPO:
                case OPT_COMMIT:
                case OPT_RECORD:
                case OPT_COUNT:
                        if (!create)
                                return nsbox_err(err, 0, "%s: --%s applies to nsbox create", cmd, option_name(c));
                        if (c == OPT_REPO)
                                o->repo = optarg;
                        else if (c == OPT_COMMIT)
                                o->commit = optarg;
                        else if (c == OPT_RECORD)
                                o->record = optarg;
                        else if (parse_u64(optarg, 1, 256, &o->count) < 0)
                                return nsbox_err(err, 0, "%s: --count '%s': expected a number from 1 to 256", cmd, optarg);
                        break;
                case 'h': o->help = true; return 0;
                case OPT_TIMEOUT:
                        if (parse_duration_ms(optarg, &o->timeout_ms) < 0)
                                return nsbox_err(err, 0, "%s: --timeout '%s': expected seconds, e.g. 30 or 0.5", cmd, optarg);
                        o->has_timeout = true;
                        break;
                case OPT_DISK:
                        if (parse_size(optarg, &o->disk) < 0 || o->disk < (1 << 20))
                                return nsbox_err(err, 0, "%s: --disk '%s': expected a size of at least 1M, e.g. 512M", cmd, optarg);
                        o->has_disk = true;
                        break;
                case OPT_MEMORY:
                        if (parse_size(optarg, &o->memory) < 0 || o->memory < (1 << 20))
                                return nsbox_err(err, 0, "%s: --memory '%s': expected a size of at least 1M, e.g. 512M", cmd, optarg);
                        o->has_memory = true;
                        break;
                case OPT_PIDS:
                        if (parse_u64(optarg, 1, 4194304, &o->pids) < 0)
                                return nsbox_err(err, 0, "%s: --pids '%s': expected a number of processes from 1 to 4194304", cmd, optarg);
                        o->has_pids = true;
                        break;
                case OPT_CPUS: {
                        char *end = NULL;
                        errno = 0;
                        o->cpus = strtod(optarg, &end);
                        if (errno || end == optarg || *end || !(o->cpus > 0 && o->cpus <= 1024))
                                return nsbox_err(err, 0, "%s: --cpus '%s': expected a number above 0 and at most 1024, e.g. 0.5", cmd, optarg);
                        o->has_cpus = true;
                        break;
                }
                case ':':
                        return nsbox_err(err, 0, "%s: option '%s' needs a value", cmd, argv[optind - 1]);
                default:
                        if (optopt && optopt < 0x100)
                                return nsbox_err(err, 0, "%s: unknown option '-%c' (see nsbox %s --help)", cmd, optopt, cmd);
                        return nsbox_err(err, 0, "%s: unknown option '%s' (see nsbox %s --help)", cmd, argv[optind - 1], cmd);
                }
                if (r < 0)
                        return nsbox_err(err, -r, "%s", cmd);
        }
        if (create) { /* a persistent sandbox: commands come later, with nsbox exec */
                if (o->commit && !o->repo)
                        return nsbox_err(err, 0, "%s: --commit needs --repo", cmd);
                if (o->repo && o->from)
                        return nsbox_err(err, 0, "%s: --repo and --from do not go together (a snapshot has its workspace already)", cmd);
                if (o->reuse && !o->labels)
                        return nsbox_err(err, 0, "%s: --reuse gets or creates the sandbox with the --label given: give at least one", cmd);
                if (o->reuse && o->count > 1)
                        return nsbox_err(err, 0, "%s: --reuse gives one sandbox, not --count %llu", cmd, (unsigned long long)o->count);
                if (replay && (o->labels || o->reuse || o->count > 1))
                        return nsbox_err(err, 0, "%s: --label, --reuse and --count do not apply to nsbox replay", cmd);
                if (replay && optind + 1 != argc)
                        return nsbox_err(err, 0, "%s: expected one trajectory FILE after the options (see nsbox replay --help)", cmd);
                if (replay) {
                        o->argv = argv + optind;
                        return 0;
                }
                if (optind < argc)
                        return nsbox_err(err, 0, "%s: unexpected argument '%s' (commands run with nsbox exec ID -- CMD)", cmd, argv[optind]);
                return 0;
        }
        if (optind >= argc)
                return nsbox_err(err, 0, "%s: no command given (usage: nsbox %s [OPTIONS] [--] CMD [ARG...])", cmd, cmd);
        o->argv = argv + optind;
        return 0;
}

static int env_default(nsbox_policy *p, const char *key, const char *value, nsbox_error *err)
{
        size_t n = strlen(key);
        for (char **e = p->env; e && *e; e++)
                if (!strncmp(*e, key, n) && (*e)[n] == '=')
                        return 0;
        _cleanup_free_ char *kv = NULL;
        if (asprintf(&kv, "%s=%s", key, value) < 0)
                return -ENOMEM;
        return nsbox_policy_set_env(p, kv, err);
}

static int apply(const nsbox_run_options *o, nsbox_policy *p, nsbox_error *err)
{
        int r;
        if (o->rootfs) {
                if (!strcmp(o->rootfs, "host"))
                        p->root = ROOT_HOST;
                else {
                        char *real = realpath(o->rootfs, NULL);
                        if (!real)
                                return nsbox_err(err, errno, "--rootfs '%s'", o->rootfs);
                        p->root = ROOT_DIR;
                        free(p->root_path);
                        p->root_path = real;
                }
        }
        if (o->workdir) {
                char *w = NULL;
                if (nsbox_check_writable_dir(o->workdir, &w) < 0)
                        return nsbox_err(err, 0, "--workdir '%s': expected an absolute path without '..', other than / and outside /proc, /dev, /sys",
                                         o->workdir);
                bool home_was_workdir = !strcmp(p->home, p->workdir);
                free(p->workdir);
                p->workdir = w;
                if (home_was_workdir) {
                        free(p->home);
                        p->home = strdup(w);
                        if (!p->home)
                                return -ENOMEM;
                }
        }
        if (o->hostname) {
                if (nsbox_check_hostname(o->hostname) < 0)
                        return nsbox_err(err, 0, "--hostname '%s': expected 1 to 64 letters, digits, '-' or '.'", o->hostname);
                free(p->hostname);
                if (!(p->hostname = strdup(o->hostname)))
                        return -ENOMEM;
        }
        if (o->net) {
                if (!strcmp(o->net, "none"))
                        p->net = NET_NONE;
                else if (!strcmp(o->net, "nat"))
                        p->net = NET_NAT;
                else
                        return nsbox_err(err, 0, "--net '%s': expected 'none' or 'nat'", o->net);
        }
        for (char **a = o->allow; a && *a; a++)
                if ((r = nsbox_policy_add_egress(p, *a, err)) < 0)
                        return nsbox_err_wrap(err, r, "--allow");
        for (char **a = o->publish; a && *a; a++) {
                nsbox_publish pub;
                if ((r = nsbox_publish_parse(*a, &pub, err)) < 0 || (r = nsbox_policy_add_publish(p, &pub, err)) < 0)
                        return nsbox_err_wrap(err, r, "--publish");
        }
        if (o->has_timeout)
                p->limits.timeout_ms = o->timeout_ms;
        if (o->has_disk)
                p->limits.disk = o->disk;
        if (o->has_memory)
                p->limits.memory = o->memory;
        if (o->has_pids)
                p->limits.pids = o->pids;
        if (o->has_cpus)
                p->limits.cpus = o->cpus;
        for (char **b = o->binds; b && *b; b++) {
                nsbox_mount m;
                if ((r = nsbox_parse_mount_bind(*b, &m, err)) < 0)
                        return r;
                if ((r = nsbox_validate_mount(&m, "--bind", err)) < 0) {
                        nsbox_mount_release(&m);
                        return r;
                }
                if ((r = nsbox_policy_add_mount(p, &m, err)) < 0)
                        return r;
        }
        for (char **t = o->tmpfs; t && *t; t++) {
                nsbox_mount m;
                if ((r = nsbox_parse_mount_tmpfs(*t, &m, err)) < 0)
                        return r;
                if ((r = nsbox_validate_mount(&m, "--tmpfs", err)) < 0) {
                        nsbox_mount_release(&m);
                        return r;
                }
                if ((r = nsbox_policy_add_mount(p, &m, err)) < 0)
                        return r;
        }
        /* The environment is the policy's, never the caller's: API keys stay on the host. */
        for (char **e = o->env; e && *e; e++)
                if ((r = nsbox_policy_set_env(p, *e, err)) < 0)
                        return r;
        /* Fill what every program expects if the policy left it out. */
        const char *defaults[][2] = {
                { "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
                { "HOME", p->home }, { "USER", p->user_name }, { "LOGNAME", p->user_name },
        };
        for (size_t i = 0; i < ARRAY_SIZE(defaults); i++)
                if ((r = env_default(p, defaults[i][0], defaults[i][1], err)) < 0)
                        return r;
        return 0;
}

int nsbox_run_options_policy(const nsbox_run_options *o, nsbox_policy **ret, nsbox_error *err)
{
        _cleanup_free_ char *path = NULL;
        nsbox_policy *p = NULL;
        int r = nsbox_policy_find(o->policy, &path, err);
        if (r < 0)
                return r;
        if ((r = nsbox_policy_load(path, &p, err)) < 0)
                return r;
        if ((r = apply(o, p, err)) < 0) {
                nsbox_policy_free(p);
                if (err && !err->msg)
                        nsbox_err(err, -r, "options");
                return r;
        }
        *ret = p;
        return 0;
}

void nsbox_run_options_release(nsbox_run_options *o)
{
        strv_free(o->binds);
        strv_free(o->tmpfs);
        strv_free(o->env);
        strv_free(o->labels);
        strv_free(o->allow);
        strv_free(o->publish);
        o->binds = o->tmpfs = o->env = o->labels = o->allow = o->publish = NULL;
}

int nsbox_create_params_argv(json_t *params, strbuf *why, char ***ret)
{
        _cleanup_strv_ char **v = NULL;
        int r = 0;
#define PUSH(s) do { char *_d = strdup(s); if (!_d || strv_push(&v, _d) < 0) return -ENOMEM; } while (0)
        PUSH("create");
        /* sizes may be given as strings ("512M") or numbers of bytes */
        static const char *const strings[] = { "policy", "rootfs", "workdir", "hostname", "net", "from", "repo", "commit", "record", "disk", "memory" };
        static const char *const others[] = { "pids", "cpus", "timeout", "bind", "tmpfs", "env", "allow", "publish" };
        const char *key;
        json_t *pv;
        json_object_foreach(params, key, pv) { /* a typo must not pass as a default */
                bool known = false;
                for (size_t i = 0; i < ARRAY_SIZE(strings) && !known; i++)
                        known = !strcmp(key, strings[i]);
                for (size_t i = 0; i < ARRAY_SIZE(others) && !known; i++)
                        known = !strcmp(key, others[i]);
                if (!known) {
                        sb_appendf(why, "unknown parameter '%.64s' (see nsbox-protocol(7), create)", key);
                        return -EINVAL;
                }
        }
        for (size_t i = 0; i < ARRAY_SIZE(strings); i++) {
                json_t *x = json_object_get(params, strings[i]);
                if (!x || json_is_null(x))
                        continue;
                bool size = i >= 9;
                char num[32];
                if (size && json_is_integer(x) && json_integer_value(x) >= 0)
                        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(x));
                else if (!json_is_string(x)) {
                        sb_appendf(why, size ? "'%s' must be a size such as \"512M\" or a number of bytes" : "'%s' must be a string", strings[i]);
                        return -EINVAL;
                }
                char opt[32];
                snprintf(opt, sizeof(opt), "--%s", strings[i]);
                PUSH(opt);
                PUSH(json_is_string(x) ? json_string_value(x) : num);
        }
        static const char *const numbers[] = { "pids", "cpus" };
        for (size_t i = 0; i < ARRAY_SIZE(numbers); i++) {
                json_t *x = json_object_get(params, numbers[i]);
                if (!x || json_is_null(x))
                        continue;
                if (!json_is_number(x) || (i == 0 && !json_is_integer(x))) {
                        sb_appendf(why, i == 0 ? "'pids' must be an integer" : "'cpus' must be a number");
                        return -EINVAL;
                }
                char opt[32], num[64];
                snprintf(opt, sizeof(opt), "--%s", numbers[i]);
                if (i == 0)
                        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(x));
                else
                        snprintf(num, sizeof(num), "%.6g", json_number_value(x));
                PUSH(opt);
                PUSH(num);
        }
        json_t *t = json_object_get(params, "timeout");
        if (t && !json_is_null(t)) {
                if (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 1e9) {
                        sb_appendf(why, "'timeout' must be a number of seconds");
                        return -EINVAL;
                }
                char num[64];
                snprintf(num, sizeof(num), "%.3f", json_number_value(t));
                PUSH("--timeout");
                PUSH(num);
        }
        static const char *const lists[][2] = { { "bind", "--bind" }, { "tmpfs", "--tmpfs" }, { "env", "-e" },
                                                 { "allow", "--allow" }, { "publish", "--publish" } };
        for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
                json_t *x = json_object_get(params, lists[i][0]);
                if (!x || json_is_null(x))
                        continue;
                if (i == 2 && json_is_object(x)) { /* env as {"K": "V"} */
                        const char *k;
                        json_t *val;
                        json_object_foreach(x, k, val) {
                                _cleanup_free_ char *kv = NULL;
                                if (!json_is_string(val) || asprintf(&kv, "%s=%s", k, json_string_value(val)) < 0) {
                                        sb_appendf(why, "'env' must map names to strings");
                                        return -EINVAL;
                                }
                                PUSH("-e");
                                PUSH(kv);
                        }
                        continue;
                }
                if (!json_is_array(x)) {
                        sb_appendf(why, "'%s' must be an array of strings", lists[i][0]);
                        return -EINVAL;
                }
                size_t j;
                json_t *e;
                json_array_foreach(x, j, e) {
                        if (!json_is_string(e)) {
                                sb_appendf(why, "'%s' must be an array of strings", lists[i][0]);
                                return -EINVAL;
                        }
                        const char *s = json_string_value(e);
                        /* relative to what? the daemon's cwd is not the client's */
                        if (i == 0 && s[0] != '/') {
                                sb_appendf(why, "bind '%s': the source must be an absolute path", s);
                                return -EINVAL;
                        }
                        if (i == 2 && !strchr(s, '=')) {
                                sb_appendf(why, "env '%s': expected K=V (the daemon does not pass its own environment)", s);
                                return -EINVAL;
                        }
                        PUSH(lists[i][1]);
                        PUSH(s);
                }
        }
        /* A name is looked up only in the policy directories; anything else must be an absolute
         * path: a relative one ("x.json", "../x") would be relative to the daemon's directory. */
        const char *pol = json_string_value(json_object_get(params, "policy"));
        if (pol && pol[0] != '/' && !nsbox_policy_name_valid(pol)) {
                sb_appendf(why, "policy '%.300s': neither a policy name (1 to 64 letters, digits, '.', '_', '-', without .json) nor the absolute path of a policy file",
                           pol);
                return -EINVAL;
        }
        const char *record = json_string_value(json_object_get(params, "record"));
        if (record && record[0] != '/') {
                sb_appendf(why, "record '%s': the trajectory file must be given as an absolute path", record);
                return -EINVAL;
        }
        const char *rootfs = json_string_value(json_object_get(params, "rootfs"));
        if (rootfs && strcmp(rootfs, "host") && rootfs[0] != '/') {
                sb_appendf(why, "rootfs '%s': expected 'host' or an absolute path", rootfs);
                return -EINVAL;
        }
#undef PUSH
        *ret = steal_pointer(&v);
        return r;
}
