/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A sandbox on an imported image (image.h). */
#include "image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static bool user_given(const nsbox_run_options *o, const char *kv)
{
        size_t n = strcspn(kv, "=");
        for (char **e = o->env; e && *e; e++)
                if (!strncmp(*e, kv, n) && ((*e)[n] == '=' || (*e)[n] == '\0'))
                        return true;
        return false;
}

static int apply_config(nsbox_policy *p, const nsbox_run_options *o, json_t *meta, nsbox_error *err)
{
        json_t *c = json_object_get(meta, "config"), *v;
        size_t i;
        int r;
        json_array_foreach(json_object_get(c, "Env"), i, v) {
                const char *kv = json_string_value(v);
                if (kv && strchr(kv, '=') && !user_given(o, kv) && (r = nsbox_policy_set_env(p, kv, err)) < 0)
                        return nsbox_err_wrap(err, r, "image '%s': Env", o->image);
        }
        const char *wd = json_string_value(json_object_get(c, "WorkingDir"));
        if (wd && !o->workdir) {
                char *w = NULL;
                if (nsbox_check_writable_dir(wd, &w) < 0) {
                        fprintf(stderr, "nsbox: warning: image '%s': WorkingDir '%s' ignored (not a directory a sandbox user may write)\n",
                                o->image, wd);
                } else {
                        bool home_was_workdir = !strcmp(p->home, p->workdir);
                        free(p->workdir);
                        p->workdir = w;
                        if (home_was_workdir) {
                                free(p->home);
                                if (!(p->home = strdup(w)))
                                        return nsbox_err(err, ENOMEM, "image");
                        }
                }
        }
        const char *user = json_string_value(json_object_get(c, "User"));
        if (user && user[0]) {
                char *end;
                bool root = !strncmp(user, "root", 4) && (!user[4] || user[4] == ':'); /* not "rootless" */
                unsigned long u = root ? 0 : strtoul(user, &end, 10);
                bool numeric = root || (end != user && (!*end || *end == ':'));
                if (!numeric || u != p->uid)
                        fprintf(stderr, "nsbox: warning: image '%s': User '%s' ignored: the sandbox runs as the policy's user (uid %u)\n",
                                o->image, user, (unsigned)p->uid);
        }
        return 0;
}

static int entry_argv(json_t *meta, char ***ret, nsbox_error *err)
{
        json_t *c = json_object_get(meta, "config"), *v;
        char **argv = NULL;
        static const char *const keys[] = { "Entrypoint", "Cmd" };
        for (size_t k = 0; k < 2; k++) {
                size_t i;
                json_array_foreach(json_object_get(c, keys[k]), i, v) {
                        if (json_is_string(v) && strv_push(&argv, strdup(json_string_value(v))) < 0) {
                                strv_free(argv);
                                return nsbox_err(err, ENOMEM, "image command");
                        }
                }
        }
        if (!argv)
                return nsbox_err(err, 0, "run: no command given, and the image has no Entrypoint or Cmd");
        *ret = argv;
        return 0;
}

int nsbox_image_use(nsbox_policy *p, const nsbox_run_options *o, nsbox_layers *l, char ***ret_argv, nsbox_error *err)
{
        if (o->rootfs || o->from)
                return nsbox_err(err, 0, "--image does not go with --%s: the image is the root", o->rootfs ? "rootfs" : "from");
        nsbox_store st = NSBOX_STORE_INIT;
        json_t *meta = NULL;
        int r = nsbox_store_open(true, &st, err);
        if (r == 0)
                r = nsbox_store_acquire_image(&st, o->image, l, &meta, err);
        nsbox_store_close(&st);
        if (r == 0)
                r = nsbox_policy_use_layers(p, l, false, err);
        if (r == 0)
                r = apply_config(p, o, meta, err);
        if (r == 0 && ret_argv)
                *ret_argv = NULL;
        if (r == 0 && ret_argv && (!o->argv || !o->argv[0]))
                r = entry_argv(meta, ret_argv, err);
        json_decref(meta);
        return r;
}

int nsbox_image_reapply(nsbox_policy *p, const nsbox_run_options *o, nsbox_error *err)
{
        nsbox_store st = NSBOX_STORE_INIT;
        nsbox_layers l = NSBOX_LAYERS_INIT;
        json_t *meta = NULL;
        int r = nsbox_store_open(true, &st, err);
        if (r == 0)
                r = nsbox_store_acquire_image(&st, o->image, &l, &meta, err);
        nsbox_store_close(&st);
        nsbox_layers_release(&l);
        if (r == 0)
                r = apply_config(p, o, meta, err);
        json_decref(meta);
        return r;
}
