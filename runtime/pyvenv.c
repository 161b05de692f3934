/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host view's Python environment: a tiny virtual environment generated per sandbox, as the
 * identity files are, so that `python` exists where the host has only python3 and `pip install`
 * works for the sandbox user.  PEP 668 stays respected: the host's interpreter is still
 * externally managed, and pip installs into the sandbox's own environment, which a venv is by
 * definition (pip skips the EXTERNALLY-MANAGED check inside one).  The system's packages stay
 * visible (include-system-site-packages).  PYTHONUSERBASE names the same directory, so that
 * `pip install --user` lands there too instead of in the workspace, and the host's
 * /usr/bin/python3 (the code interpreter's) sees what was installed. */
#include "pyvenv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define HOST_PYTHON "/usr/bin/python3"

int nsbox_pyvenv_settle(nsbox_policy *p, nsbox_error *err)
{
        if (p->root != ROOT_HOST || access(HOST_PYTHON, X_OK) < 0)
                p->python_venv = false;
        if (!p->python_venv)
                return 0;
        const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        for (char **e = p->env; e && *e; e++)
                if (!strncmp(*e, "PATH=", 5))
                        path = *e + 5;
        int r;
        /* first on PATH, once */
        if (strncmp(path, NSBOX_VENV_DIR "/bin:", strlen(NSBOX_VENV_DIR) + 5) && strcmp(path, NSBOX_VENV_DIR "/bin")) {
                _cleanup_free_ char *kv = NULL;
                if (asprintf(&kv, "PATH=%s/bin%s%s", NSBOX_VENV_DIR, *path ? ":" : "", path) < 0)
                        return -ENOMEM;
                if ((r = nsbox_policy_set_env(p, kv, err)) < 0)
                        return r;
        }
        if ((r = nsbox_policy_env_default(p, "VIRTUAL_ENV", NSBOX_VENV_DIR, err)) < 0 ||
            (r = nsbox_policy_env_default(p, "PYTHONUSERBASE", NSBOX_VENV_DIR, err)) < 0)
                return r;
        return 0;
}

/* A directory of the environment, the sandbox user's: pip writes into it. */
static int venv_dir(int dfd, const char *rel, const nsbox_policy *p, nsbox_error *err)
{
        if (mkdirat(dfd, rel, 0755) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "create '%s/%s'", NSBOX_VENV_DIR, rel);
        if (fchownat(dfd, rel, p->uid, p->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return nsbox_err(err, errno, "chown '%s/%s'", NSBOX_VENV_DIR, rel);
        return 0;
}

static int venv_file(int dfd, const char *rel, const char *content, mode_t mode, nsbox_error *err)
{
        int r = write_file_at(dfd, rel, content, mode);
        if (r < 0)
                return nsbox_err(err, -r, "write '%s/%s'", NSBOX_VENV_DIR, rel);
        return 0;
}

int nsbox_pyvenv_write(int lowerfd, const nsbox_policy *p, nsbox_error *err)
{
        /* the version the host's python3 is, from its real name (python3.11): the directory
         * of site-packages; without it pip creates that directory itself */
        char real[PATH_MAX], version[16] = "";
        if (realpath(HOST_PYTHON, real)) {
                const char *base = strrchr(real, '/') + 1;
                unsigned minor;
                char end;
                if (sscanf(base, "python3.%u%c", &minor, &end) == 1)
                        snprintf(version, sizeof(version), "3.%u", minor);
        }
        int r;
        if ((r = venv_dir(lowerfd, NSBOX_VENV_DIR + 1, p, err)) < 0)
                return r;
        _cleanup_close_ int dfd = openat(lowerfd, NSBOX_VENV_DIR + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return nsbox_err(err, errno, "open '%s'", NSBOX_VENV_DIR);
        char cfg[256], site[64];
        snprintf(cfg, sizeof(cfg), "home = /usr/bin\ninclude-system-site-packages = true\n%s%s%sexecutable = %s\n",
                 *version ? "version = " : "", version, *version ? "\n" : "", HOST_PYTHON);
        static const char pip[] = "#!" NSBOX_VENV_DIR "/bin/python\n"
                                  "import sys\n"
                                  "from pip._internal.cli.main import main\n"
                                  "sys.exit(main())\n";
        if ((r = venv_dir(dfd, "bin", p, err)) < 0 || (r = venv_dir(dfd, "lib", p, err)) < 0 ||
            (r = venv_file(dfd, "pyvenv.cfg", cfg, 0644, err)) < 0 || (r = venv_file(dfd, "bin/pip", pip, 0755, err)) < 0 ||
            (r = venv_file(dfd, "bin/pip3", pip, 0755, err)) < 0)
                return r;
        const char *links[] = { "bin/python", "bin/python3" };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                if (symlinkat(HOST_PYTHON, dfd, links[i]) < 0)
                        return nsbox_err(err, errno, "create '%s/%s'", NSBOX_VENV_DIR, links[i]);
        if (!*version)
                return 0;
        snprintf(site, sizeof(site), "lib/python%s", version);
        if ((r = venv_dir(dfd, site, p, err)) < 0)
                return r;
        snprintf(site, sizeof(site), "lib/python%s/site-packages", version);
        return venv_dir(dfd, site, p, err);
}
