/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "util.h"

void nsbox_paths_release(nsbox_paths *p)
{
        free(p->dir);
        free(p->socket);
        free(p->lock);
        free(p->log);
        free(p->warning);
        *p = (nsbox_paths){ 0 };
}

/* A directory another user controls could hold a planted socket or log symlink. */
static int check_private_dir(const char *dir, bool create, nsbox_error *err)
{
        if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "create runtime directory '%s'", dir);
        struct stat st;
        if (lstat(dir, &st) < 0)
                return nsbox_err(err, errno, "runtime directory '%s'", dir);
        /* others may search it (a root nsboxd serving other users), never list or write it */
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0066))
                return nsbox_err(err, 0, "runtime directory '%s' is not a private directory of uid %u (mode 0700 or 0711), refusing to use it",
                                 dir, (unsigned)geteuid());
        return 0;
}

/* PATH exists and is not a directory of ours: another user made it first (or a symlink). */
static bool squatted(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != geteuid());
}

/* The user's home directory, from the password database (the same for a client and the daemon it
 * starts, whatever their environments). */
static bool usable_base(const char *base);

static int home_of(uid_t uid, char **ret)
{
        /* uid 0 of a user namespace: the passwd entry is the host's root's (/root, not ours) */
        const char *env = getenv("HOME");
        if (uid == 0 && !nsbox_host_root() && usable_base(env)) {
                *ret = strdup(env);
                return *ret ? 0 : -ENOMEM;
        }
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res || !pw.pw_dir || pw.pw_dir[0] != '/')
                return -ENOENT;
        *ret = strdup(pw.pw_dir);
        return *ret ? 0 : -ENOMEM;
}

int nsbox_paths_fallback(uid_t uid, char **ret)
{
        _cleanup_free_ char *home = NULL;
        int r = home_of(uid, &home);
        if (r < 0)
                return r;
        return asprintf(ret, "%s/.cache/nsbox-run", strcmp(home, "/") ? home : "") < 0 ? -ENOMEM : 0;
}

/* The fallback's parent (~/.cache) must be the user's, a real directory: made 0700 if missing. */
static int fallback_parent(const char *dir, bool create, nsbox_error *err)
{
        _cleanup_free_ char *parent = strdup(dir);
        if (!parent)
                return -ENOMEM;
        *strrchr(parent, '/') = '\0';
        if (create && mkdir(parent, 0700) < 0 && errno != EEXIST)
                return nsbox_err(err, errno, "create '%s'", parent);
        struct stat st;
        if (lstat(parent, &st) < 0)
                return nsbox_err(err, errno, "'%s'", parent);
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022))
                return nsbox_err(err, 0, "'%s' is not a directory of uid %u that only it may write", parent, (unsigned)geteuid());
        return 0;
}

static bool usable_base(const char *base)
{
        struct stat st;
        return base && base[0] == '/' && stat(base, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

/* /tmp/nsbox-UID, or in a user namespace that shares the host's /tmp (unshare -r),
 * /tmp/nsbox-UID.OUTSIDE: uid 0 of every user's namespace is not one user */
static char *tmp_dir(uid_t uid)
{
        char *s = NULL;
        unsigned long outside = nsbox_outside_uid();
        int n = outside == uid ? asprintf(&s, "/tmp/nsbox-%u", (unsigned)uid) : asprintf(&s, "/tmp/nsbox-%u.%lu", (unsigned)uid, outside);
        return n < 0 ? NULL : s;
}

int nsbox_paths_get(bool create, nsbox_paths *ret, nsbox_error *err)
{
        nsbox_paths p = { 0 };
        int r = -ENOMEM;
        uid_t uid = geteuid();
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        char user_run[64];
        snprintf(user_run, sizeof(user_run), "/run/user/%u", (unsigned)uid);
        bool host_root = nsbox_host_root();
        if (host_root)
                p.dir = strdup("/run/nsbox");
        else if (usable_base(xdg))
                r = asprintf(&p.dir, "%s/nsbox", xdg) < 0 ? -ENOMEM : 0;
        else if (usable_base(user_run))
                r = asprintf(&p.dir, "%s/nsbox", user_run) < 0 ? -ENOMEM : 0;
        else
                p.dir = tmp_dir(uid);
        if (!p.dir)
                return nsbox_err(err, ENOMEM, "runtime directory");
        /* /tmp is everyone's: another user may have taken our name first.  Then a private place in
         * our home, which both a client and the daemon it starts find the same way. */
        if (!host_root && !strncmp(p.dir, "/tmp/", 5) && squatted(p.dir)) {
                _cleanup_free_ char *taken = steal_pointer(&p.dir);
                if ((r = nsbox_paths_fallback(uid, &p.dir)) < 0)
                        return nsbox_err(err, -r, "runtime directory '%s' belongs to another user, and uid %u has no home directory to use instead",
                                         taken, (unsigned)uid);
                if (asprintf(&p.warning, "runtime directory '%s' is not ours (another user made it first): using '%s' instead", taken,
                             p.dir) < 0) {
                        nsbox_paths_release(&p);
                        return nsbox_err(err, ENOMEM, "runtime directory");
                }
                if ((r = fallback_parent(p.dir, create, err)) < 0 && (create || r != -ENOENT)) {
                        nsbox_paths_release(&p);
                        return r;
                }
        }
        if ((r = check_private_dir(p.dir, create, err)) < 0 && (create || r != -ENOENT)) {
                nsbox_paths_release(&p);
                return r;
        }
        nsbox_error_clear(err);
        const char *sock = getenv("NSBOX_SOCKET");
        if (sock && *sock && sock[0] != '/') {
                nsbox_paths_release(&p);
                return nsbox_err(err, 0, "NSBOX_SOCKET '%s': expected an absolute path", sock);
        }
        if ((sock && *sock ? !(p.socket = strdup(sock)) : asprintf(&p.socket, "%s/nsboxd.sock", p.dir) < 0) ||
            asprintf(&p.lock, "%s.lock", p.socket) < 0 ||
            (sock && *sock ? asprintf(&p.log, "%s.log", sock) : asprintf(&p.log, "%s/nsboxd.log", p.dir)) < 0) {
                nsbox_paths_release(&p);
                return nsbox_err(err, ENOMEM, "runtime paths");
        }
        if (strlen(p.socket) >= 108) {
                nsbox_err(err, 0, "socket path '%s' is longer than a unix socket address allows (107 bytes)", p.socket);
                nsbox_paths_release(&p);
                return -ENAMETOOLONG;
        }
        *ret = p;
        return 0;
}

/* Push the real path of the directory candidate (freed here) onto *v, once; gone ones skipped. */
static int push_dir(char ***v, char *candidate)
{
        _cleanup_free_ char *c = candidate;
        if (!c)
                return -ENOMEM;
        char *real = realpath(c, NULL);
        struct stat st;
        if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
                free(real);
                return 0;
        }
        for (char **e = *v; e && *e; e++)
                if (!strcmp(*e, real)) {
                        free(real);
                        return 0;
                }
        return strv_push(v, real);
}

static char *printed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *printed(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        return s;
}

int nsbox_paths_runtime_dirs(char ***ret)
{
        _cleanup_strv_ char **v = NULL;
        uid_t uid = geteuid();
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        char *fallback = NULL;
        int r;
        if ((r = push_dir(&v, strdup("/run/nsbox"))) < 0)
                return r;
        if (!nsbox_host_root()) {
                if (xdg && xdg[0] == '/' && (r = push_dir(&v, printed("%s/nsbox", xdg))) < 0)
                        return r;
                if ((r = push_dir(&v, printed("/run/user/%u/nsbox", (unsigned)uid))) < 0 ||
                    (r = push_dir(&v, tmp_dir(uid))) < 0)
                        return r;
                if (nsbox_paths_fallback(uid, &fallback) == 0 && (r = push_dir(&v, fallback)) < 0)
                        return r;
        }
        *ret = steal_pointer(&v);
        return 0;
}
