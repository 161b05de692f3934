/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsboxd's built-in `code-interpreter` template (E2B's `code-interpreter-v1`): a base sandbox in
 * which the code interpreter's server (rootfs/code-interpreter/server.py, installed next to
 * nsbox-agent) is started as a detached exec tagged "code-interpreter", listening on the
 * sandbox's 127.0.0.1:49999, which the port proxy reaches.  Create answers once the server's
 * default context (a Jupyter kernel) is ready: the server writes a ready file, a short exec waits
 * for it.  The server's source goes in on the exec's standard input, so it needs no path inside
 * the sandbox (a build tree, or a policy whose root is not the host's /usr, works alike): it is
 * built into nsboxd (runtime/interp_source.c). */
#include "http.h"
#include "../dlog.h"
#include "../interp_source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INTERP_NAME NSBOX_INTERP_TAG
#define INTERP_SOURCE_MAX (256 * 1024)
#define INTERP_WAIT_S 60
#define INTERP_PYTHON NSBOX_INTERP_PYTHON

bool interp_template(const char *name)
{
        return !strcmp(name, INTERP_NAME) || !strcmp(name, INTERP_NAME "-v1");
}

/* The configuration's template for an E2B create of NAME, or NULL: NAME's own, else for either
 * of the code interpreter's names the other's, so that a pool configured as code-interpreter
 * serves @e2b/code-interpreter's default, code-interpreter-v1 (and the other way round). */
const char *interp_config_template(const nsbox_dconfig *c, const char *name)
{
        if (nsbox_dconfig_template(c, name))
                return name;
        if (!interp_template(name))
                return NULL;
        const char *other = strcmp(name, INTERP_NAME) ? INTERP_NAME : INTERP_NAME "-v1";
        return nsbox_dconfig_template(c, other) ? other : NULL;
}

static int read_small(const char *path, char **buf, size_t *len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        char *b = malloc(INTERP_SOURCE_MAX + 1);
        size_t n = 0;
        ssize_t k = 0;
        while (b && n < INTERP_SOURCE_MAX && (k = read(fd, b + n, INTERP_SOURCE_MAX - n)) > 0)
                n += (size_t)k;
        int e = !b ? -ENOMEM : k < 0 ? -errno : n >= INTERP_SOURCE_MAX || n == 0 ? -EFBIG : 0;
        close(fd);
        if (e) {
                free(b);
                return e;
        }
        b[n] = 0;
        *buf = b;
        *len = n;
        return 0;
}

/* The server's source: $NSBOX_CODE_INTERPRETER (a file, for trying out a changed server), else
 * the copy built into nsboxd (runtime/interp_source.c), which the agent's code tools start too. */
static int interp_source(char **buf, size_t *len, char *why, size_t whylen)
{
        const char *env = secure_getenv("NSBOX_CODE_INTERPRETER");
        if (!env || !*env) {
                *len = nsbox_interp_source_len();
                *buf = malloc(*len + 1);
                if (!*buf) {
                        snprintf(why, whylen, "out of memory");
                        return -ENOMEM;
                }
                memcpy(*buf, nsbox_interp_source, *len + 1);
                return 0;
        }
        int r = read_small(env, buf, len);
        if (r < 0)
                snprintf(why, whylen, "the code interpreter's server '%s': %s", env, strerror(-r));
        return r;
}

/* The exec that starts the server: detached (it outlives create's request), tagged, its source
 * on standard input, read by size so the pipe may stay open. */
uint64_t interp_ident(const sandbox *s) { return s->serial | (uint64_t)s->boots << 40; }

json_t *interp_start_params(uint64_t ident, json_t *envs, char *why, size_t whylen)
{
        char *src = NULL, boot[160], ready[96];
        size_t len = 0;
        if (interp_source(&src, &len, why, whylen) < 0)
                return NULL;
        snprintf(boot, sizeof(boot), NSBOX_INTERP_BOOT, len);
        snprintf(ready, sizeof(ready), "/tmp/.nsbox-code-interpreter-%llu", (unsigned long long)ident);
        json_t *env = json_pack("{ss ss}", "HOME", "/home/user", "USER", "user");
        const char *k;
        json_t *v;
        _cleanup_sb_ strbuf names; /* which of its variables are the create's envVars (server.py) */
        sb_init(&names, 0);
        json_object_foreach(envs, k, v)
        {
                if (json_is_string(v)) {
                        json_object_set(env, k, v);
                        sb_appendf(&names, "%s%s", names.len ? " " : "", k);
                }
        }
        if (names.len)
                json_object_set_new(env, "NSBOX_CI_ENVS", json_string(names.buf));
        json_t *p = json_pack("{s[sssss] sb ss ss so}", "cmd", INTERP_PYTHON, "-c", boot, "--ready-file", ready, "detach", 1, "tag",
                              INTERP_NAME, "stdin", src, "env", env);
        free(src);
        if (!p)
                snprintf(why, whylen, "out of memory");
        return p;
}

/* The exec that waits for the server's ready file, or says why it will not come (pid 0: not known
 * yet, a pooled start in flight: its failed file and the time limit still tell). */
json_t *interp_wait_params(uint64_t ident, json_int_t pid)
{
        char sh[1024];
        snprintf(sh, sizeof(sh),
                 "r=/tmp/.nsbox-code-interpreter-%llu; p=%lld; i=0\n"
                 "while [ ! -e $r ]; do\n"
                 "  if [ -e $r.failed ] || { [ $p != 0 ] && [ ! -e /proc/$p ]; }; then\n"
                 "    cat $r.failed 2>/dev/null || echo 'the code interpreter exited before it was ready'; exit 1\n"
                 "  fi\n"
                 "  i=$((i + 1)); [ $i -le %d ] || { echo 'the code interpreter was not ready in %d s'; exit 1; }\n"
                 "  sleep 0.02\n"
                 "done\n",
                 (unsigned long long)ident, (long long)pid, INTERP_WAIT_S * 50, INTERP_WAIT_S);
        return json_pack("{ss si}", "shell", sh, "timeout", INTERP_WAIT_S + 10);
}

/* A pooled sandbox of a template named code-interpreter (nsboxd.json's templates) is ready: its
 * server starts now, so a create that takes it finds its kernel up.  Its envVars come later,
 * through a file (http_control.c, interp_prestarted). */
void interp_pool_ready(daemon_state *d, sandbox *s)
{
        if (s->tpl < 0 || !interp_template(d->conf->templates[s->tpl].name) || s->interp_pid || s->interp_starting)
                return;
        char why[512];
        json_t *p = interp_start_params(interp_ident(s), NULL, why, sizeof(why));
        s->interp_starting = p && calls_internal(d, s, "exec", p, PENDING_INTERP_START) == 0;
        if (!s->interp_starting) {
                s->interp_pid = -1;
                dlog(LOG_WARNING, "pool.interp_failed", s->sup.id, "sandbox %s: its code interpreter did not start: %s", s->sup.id,
                     p ? "the call was refused" : why);
        }
}
