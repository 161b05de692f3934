/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "options.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "pyvenv.h"
#include "store.h"
#include "util.h"

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
        if (o->writable_root) /* the sandbox's own upper layer takes the writes, within its disk limit */
                p->root_readonly = false;
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
        /* a limit asked for here holds or the start is refused, unless the caller says otherwise;
         * the policy's own limits follow its limits.enforce */
        if (o->limits_mode)
                p->limits.enforce = strcmp(o->limits_mode, "best-effort") ? ENFORCE_REQUIRED : ENFORCE_BEST_EFFORT;
        else if (!o->limits_as_policy && (o->has_memory || o->has_pids || o->has_cpus))
                p->limits.enforce = ENFORCE_REQUIRED;
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
                if ((r = nsbox_policy_env_default(p, defaults[i][0], defaults[i][1], err)) < 0)
                        return r;
        /* python and pip of the host view (pyvenv.h): PATH and the environment's variables */
        return nsbox_pyvenv_settle(p, err);
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
