/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox-agent's libgit2 is linked statically (Makefile, STATIC_DEPS=1) without libssh2 and
 * GSSAPI: these entry points stand in for them and fail.  The agent's git tools (tools/git.c:
 * status, diff, log, commit, init) are local and never open a transport, and libssh2 brings
 * libcrypto, whose relocated tables (about 400 KiB of dirty pages, ld.so's relocations under
 * ASLR) would be a private copy in every sandbox's agent: docs/benchmarks.md, density.
 * libgit2 calls libssh2_init() at git_libgit2_init(); an SSH remote would fail at
 * libssh2_session_init_ex() (NULL: "failed to initialize SSH session"), an HTTP Negotiate
 * authentication at gss_indicate_mechs(); what follows them is never reached.  nsboxd and
 * libnsbox keep the real libraries (nsbox_repo_clone, runtime/repo.c). */
#include <stdint.h>
#include <libssh2.h>

/* ---- libssh2: nothing initialised, every session refused ---------------------------------- */

int libssh2_init(int flags)
{
        (void)flags;
        return 0;
}

void libssh2_exit(void)
{
}

LIBSSH2_SESSION *libssh2_session_init_ex(LIBSSH2_ALLOC_FUNC((*a)), LIBSSH2_FREE_FUNC((*f)), LIBSSH2_REALLOC_FUNC((*r)), void *abstract)
{
        (void)a, (void)f, (void)r, (void)abstract;
        return NULL;
}

int libssh2_session_last_error(LIBSSH2_SESSION *s, char **errmsg, int *errmsg_len, int want_buf)
{
        static char msg[] = "SSH is not available in the sandbox's agent";
        (void)s, (void)want_buf;
        if (errmsg)
                *errmsg = msg;
        if (errmsg_len)
                *errmsg_len = (int)sizeof(msg) - 1;
        return LIBSSH2_ERROR_SOCKET_NONE;
}

/* with no session, the rest is unreachable: each fails as libssh2 does on a bad argument */
#define FAIL LIBSSH2_ERROR_INVAL
int libssh2_session_free(LIBSSH2_SESSION *s) { (void)s; return FAIL; }
void libssh2_session_set_blocking(LIBSSH2_SESSION *s, int b) { (void)s, (void)b; }
int libssh2_session_method_pref(LIBSSH2_SESSION *s, int t, const char *p) { (void)s, (void)t, (void)p; return FAIL; }
int libssh2_session_handshake(LIBSSH2_SESSION *s, libssh2_socket_t sock) { (void)s, (void)sock; return FAIL; }
void **libssh2_session_abstract(LIBSSH2_SESSION *s) { (void)s; return NULL; }
int libssh2_session_disconnect_ex(LIBSSH2_SESSION *s, int r, const char *d, const char *l) { (void)s, (void)r, (void)d, (void)l; return FAIL; }
const char *libssh2_session_hostkey(LIBSSH2_SESSION *s, size_t *len, int *type) { (void)s, (void)len, (void)type; return NULL; }
const char *libssh2_hostkey_hash(LIBSSH2_SESSION *s, int t) { (void)s, (void)t; return NULL; }
LIBSSH2_KNOWNHOSTS *libssh2_knownhost_init(LIBSSH2_SESSION *s) { (void)s; return NULL; }
void libssh2_knownhost_free(LIBSSH2_KNOWNHOSTS *h) { (void)h; }
int libssh2_knownhost_readfile(LIBSSH2_KNOWNHOSTS *h, const char *f, int t) { (void)h, (void)f, (void)t; return FAIL; }
int libssh2_knownhost_checkp(LIBSSH2_KNOWNHOSTS *h, const char *host, int port, const char *key, size_t keylen, int typemask,
                             struct libssh2_knownhost **k)
{
        (void)h, (void)host, (void)port, (void)key, (void)keylen, (void)typemask, (void)k;
        return LIBSSH2_KNOWNHOST_CHECK_FAILURE;
}
LIBSSH2_AGENT *libssh2_agent_init(LIBSSH2_SESSION *s) { (void)s; return NULL; }
void libssh2_agent_free(LIBSSH2_AGENT *a) { (void)a; }
int libssh2_agent_connect(LIBSSH2_AGENT *a) { (void)a; return FAIL; }
int libssh2_agent_disconnect(LIBSSH2_AGENT *a) { (void)a; return FAIL; }
int libssh2_agent_list_identities(LIBSSH2_AGENT *a) { (void)a; return FAIL; }
int libssh2_agent_get_identity(LIBSSH2_AGENT *a, struct libssh2_agent_publickey **store, struct libssh2_agent_publickey *prev)
{
        (void)a, (void)store, (void)prev;
        return FAIL;
}
int libssh2_agent_userauth(LIBSSH2_AGENT *a, const char *u, struct libssh2_agent_publickey *i) { (void)a, (void)u, (void)i; return FAIL; }
char *libssh2_userauth_list(LIBSSH2_SESSION *s, const char *u, unsigned int ul) { (void)s, (void)u, (void)ul; return NULL; }
int libssh2_userauth_authenticated(LIBSSH2_SESSION *s) { (void)s; return 0; }
int libssh2_userauth_password_ex(LIBSSH2_SESSION *s, const char *u, unsigned int ul, const char *p, unsigned int pl,
                                 LIBSSH2_PASSWD_CHANGEREQ_FUNC((*cb)))
{
        (void)s, (void)u, (void)ul, (void)p, (void)pl, (void)cb;
        return FAIL;
}
int libssh2_userauth_publickey(LIBSSH2_SESSION *s, const char *u, const unsigned char *k, size_t kl,
                               LIBSSH2_USERAUTH_PUBLICKEY_SIGN_FUNC((*sign)), void **abstract)
{
        (void)s, (void)u, (void)k, (void)kl, (void)sign, (void)abstract;
        return FAIL;
}
int libssh2_userauth_publickey_fromfile_ex(LIBSSH2_SESSION *s, const char *u, unsigned int ul, const char *pub, const char *priv,
                                           const char *pass)
{
        (void)s, (void)u, (void)ul, (void)pub, (void)priv, (void)pass;
        return FAIL;
}
int libssh2_userauth_publickey_frommemory(LIBSSH2_SESSION *s, const char *u, size_t ul, const char *pub, size_t publ, const char *priv,
                                          size_t privl, const char *pass)
{
        (void)s, (void)u, (void)ul, (void)pub, (void)publ, (void)priv, (void)privl, (void)pass;
        return FAIL;
}
int libssh2_userauth_keyboard_interactive_ex(LIBSSH2_SESSION *s, const char *u, unsigned int ul,
                                             LIBSSH2_USERAUTH_KBDINT_RESPONSE_FUNC((*cb)))
{
        (void)s, (void)u, (void)ul, (void)cb;
        return FAIL;
}
LIBSSH2_CHANNEL *libssh2_channel_open_ex(LIBSSH2_SESSION *s, const char *t, unsigned int tl, unsigned int w, unsigned int p,
                                         const char *m, unsigned int ml)
{
        (void)s, (void)t, (void)tl, (void)w, (void)p, (void)m, (void)ml;
        return NULL;
}
int libssh2_channel_process_startup(LIBSSH2_CHANNEL *c, const char *r, unsigned int rl, const char *m, unsigned int ml)
{
        (void)c, (void)r, (void)rl, (void)m, (void)ml;
        return FAIL;
}
ssize_t libssh2_channel_read_ex(LIBSSH2_CHANNEL *c, int id, char *b, size_t n) { (void)c, (void)id, (void)b, (void)n; return FAIL; }
ssize_t libssh2_channel_write_ex(LIBSSH2_CHANNEL *c, int id, const char *b, size_t n) { (void)c, (void)id, (void)b, (void)n; return FAIL; }
void libssh2_channel_set_blocking(LIBSSH2_CHANNEL *c, int b) { (void)c, (void)b; }
int libssh2_channel_close(LIBSSH2_CHANNEL *c) { (void)c; return FAIL; }
int libssh2_channel_free(LIBSSH2_CHANNEL *c) { (void)c; return FAIL; }

/* ---- GSSAPI (RFC 2744; no header here): no mechanism: GSS_S_FAILURE -------------------------- */

typedef uint32_t OM_uint32;
#define GSS_S_FAILURE (13u << 16)
/* libgit2 passes its address to gss_import_name, which fails first */
void *GSS_C_NT_HOSTBASED_SERVICE;

OM_uint32 gss_indicate_mechs(OM_uint32 *minor, void **mechs);
OM_uint32 gss_import_name(OM_uint32 *minor, void *name, void *type, void **out);
OM_uint32 gss_init_sec_context(OM_uint32 *minor, void *cred, void **ctx, void *target, void *mech, OM_uint32 flags, OM_uint32 time,
                               void *cb, void *in, void **mech_out, void *out, OM_uint32 *flags_out, OM_uint32 *time_out);
OM_uint32 gss_display_status(OM_uint32 *minor, OM_uint32 status, int type, void *mech, OM_uint32 *ctx, void *out);
OM_uint32 gss_delete_sec_context(OM_uint32 *minor, void **ctx, void *out);
OM_uint32 gss_release_buffer(OM_uint32 *minor, void *buf);
OM_uint32 gss_release_name(OM_uint32 *minor, void **name);
OM_uint32 gss_release_oid_set(OM_uint32 *minor, void **set);

static OM_uint32 gss_fail(OM_uint32 *minor)
{
        if (minor)
                *minor = 0;
        return GSS_S_FAILURE;
}
OM_uint32 gss_indicate_mechs(OM_uint32 *minor, void **mechs) { (void)mechs; return gss_fail(minor); }
OM_uint32 gss_import_name(OM_uint32 *minor, void *name, void *type, void **out) { (void)name, (void)type, (void)out; return gss_fail(minor); }
OM_uint32 gss_init_sec_context(OM_uint32 *minor, void *cred, void **ctx, void *target, void *mech, OM_uint32 flags, OM_uint32 time,
                               void *cb, void *in, void **mech_out, void *out, OM_uint32 *flags_out, OM_uint32 *time_out)
{
        (void)cred, (void)ctx, (void)target, (void)mech, (void)flags, (void)time, (void)cb, (void)in, (void)mech_out, (void)out,
                (void)flags_out, (void)time_out;
        return gss_fail(minor);
}
OM_uint32 gss_display_status(OM_uint32 *minor, OM_uint32 status, int type, void *mech, OM_uint32 *ctx, void *out)
{
        (void)status, (void)type, (void)mech, (void)ctx, (void)out;
        return gss_fail(minor);
}
/* nothing was ever made, so nothing to release: GSS_S_COMPLETE */
OM_uint32 gss_delete_sec_context(OM_uint32 *minor, void **ctx, void *out) { (void)ctx, (void)out; return gss_fail(minor) & 0; }
OM_uint32 gss_release_buffer(OM_uint32 *minor, void *buf) { (void)buf; return gss_fail(minor) & 0; }
OM_uint32 gss_release_name(OM_uint32 *minor, void **name) { (void)name; return gss_fail(minor) & 0; }
OM_uint32 gss_release_oid_set(OM_uint32 *minor, void **set) { (void)set; return gss_fail(minor) & 0; }
