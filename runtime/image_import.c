/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox image import (image_import.h): the layout's JSON read strictly, then each layer. */
#include "image_import.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "image_extract.h"
#include "json.h"
#include "sha256.h"
#include "treecopy.h"
#include "userns.h"
#include "util.h"

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

typedef struct importer {
        nsbox_store *s;
        extract_ctx x;
        int src;           /* the layout's directory */
        char tmpname[64];  /* tmp/NAME: the outer archive's files, the layer being extracted */
        int tmpfd;
        nsbox_layers held; /* the image's layers, bottom first, held until the record is written */
        char **fresh;      /* layer ids this import bound: dropped again on failure */
        json_t *digests;   /* "sha256:..." bottom first */
        uint64_t size;
} importer;

/* A file of the layout, beneath it and never through a link. */
static int open_in(importer *im, const char *path, nsbox_error *err)
{
        struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = (int)syscall(SYS_openat2, im->src, path, &how, sizeof(how));
        if (fd < 0)
                return nsbox_err(err, errno, "'%.200s'", path);
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return nsbox_err(err, EINVAL, "'%.200s' is not a regular file", path);
        }
        return fd;
}

static bool hex64(const char *h)
{
        if (!h || strlen(h) != 64)
                return false;
        for (; *h; h++)
                if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
                        return false;
        return true;
}

/* "sha256:HEX" -> HEX, or NULL */
static const char *digest_hex(const char *d) { return d && !strncmp(d, "sha256:", 7) && hex64(d + 7) ? d + 7 : NULL; }

/* A JSON document of the layout (at most 1 MiB), its sha256 checked when hex is given. */
static json_t *read_json(importer *im, const char *path, const char *hex, nsbox_error *err)
{
        _cleanup_close_ int fd = open_in(im, path, err);
        if (fd < 0)
                return NULL;
        _cleanup_free_ char *text = malloc(NSBOX_IMAGE_JSON_MAX + 1);
        ssize_t n = text ? read_full(fd, text, NSBOX_IMAGE_JSON_MAX + 1) : -1;
        if (n < 0 || n > NSBOX_IMAGE_JSON_MAX) {
                nsbox_err(err, n < 0 ? errno : EFBIG, "'%.200s'%s", path, n < 0 ? "" : " is larger than 1 MiB");
                return NULL;
        }
        if (hex) {
                char got[65];
                nsbox_sha256_hex(text, (size_t)n, got);
                if (strcmp(got, hex)) {
                        nsbox_err(err, 0, "'%.200s': digest mismatch (sha256:%s expected, sha256:%s read)", path, hex, got);
                        return NULL;
                }
        }
        json_error_t je;
        json_t *j = nsbox_json_loadb(text, (size_t)n, &je);
        if (!j)
                nsbox_err(err, 0, "'%.200s': invalid JSON: %s (line %d)", path, je.text, je.line);
        return j;
}

static json_t *read_blob_json(importer *im, const char *digest, nsbox_error *err)
{
        const char *hex = digest_hex(digest);
        if (!hex) {
                nsbox_err(err, 0, "digest '%.100s': expected sha256:64 hex digits", digest ? digest : "");
                return NULL;
        }
        char path[96];
        snprintf(path, sizeof(path), "blobs/sha256/%s", hex);
        return read_json(im, path, hex, err);
}

static const char *host_arch(void)
{
        struct utsname u;
        if (uname(&u) < 0)
                return "";
        return !strcmp(u.machine, "x86_64") ? "amd64" : !strcmp(u.machine, "aarch64") ? "arm64" : "";
}

/* The manifest descriptor of an index meant for this machine (one level of nested index). */
static json_t *pick_manifest(importer *im, json_t *index, int depth, json_t **ret_nested, nsbox_error *err)
{
        json_t *ms = json_object_get(index, "manifests"), *m, *pick = NULL;
        size_t i;
        if (!json_is_array(ms) || json_array_size(ms) == 0 || json_array_size(ms) > 1024) {
                nsbox_err(err, 0, "index.json: 'manifests' must be a non-empty array");
                return NULL;
        }
        json_array_foreach(ms, i, m) {
                const char *arch = json_string_value(json_object_get(json_object_get(m, "platform"), "architecture"));
                if (!arch || !strcmp(arch, host_arch())) {
                        pick = m;
                        break;
                }
        }
        if (!pick) {
                nsbox_err(err, 0, "no manifest for this machine's architecture (%s)", host_arch());
                return NULL;
        }
        const char *mt = json_string_value(json_object_get(pick, "mediaType"));
        if (mt && (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST))) {
                if (depth > 0) {
                        nsbox_err(err, 0, "indexes nested more than one deep");
                        return NULL;
                }
                json_t *nested = read_blob_json(im, json_string_value(json_object_get(pick, "digest")), err);
                json_t *r = nested ? pick_manifest(im, nested, depth + 1, ret_nested, err) : NULL;
                if (r)
                        *ret_nested = nested;
                else
                        json_decref(nested);
                return r;
        }
        if (mt && strcmp(mt, MT_OCI_MANIFEST) && strcmp(mt, MT_DOCKER_MANIFEST)) {
                nsbox_err(err, 0, "manifest media type '%.100s' is not supported", mt);
                return NULL;
        }
        return pick;
}

/* The filters a layer media type allows; 0 with err when it is none we read. */
static int layer_filters(const char *mt, unsigned *ret, nsbox_error *err)
{
        static const struct {
                const char *mt;
                unsigned f;
        } known[] = {
                { "application/vnd.oci.image.layer.v1.tar", 0 },
                { "application/vnd.oci.image.layer.v1.tar+gzip", EXTRACT_GZIP },
                { "application/vnd.oci.image.layer.v1.tar+zstd", EXTRACT_ZSTD },
                { "application/vnd.docker.image.rootfs.diff.tar.gzip", EXTRACT_GZIP },
                { "application/vnd.docker.image.rootfs.diff.tar", 0 },
        };
        for (size_t i = 0; i < ARRAY_SIZE(known); i++)
                if (mt && !strcmp(mt, known[i].mt)) {
                        *ret = known[i].f;
                        return 0;
                }
        return nsbox_err(err, 0, "layer media type '%.100s' is not supported", mt ? mt : "(none)");
}

/* One layer blob at path: extracted into the store unless a layer of its digest is there.
 * hex: the digest it must have (NULL: computed first, docker-archive). */
static int import_layer(importer *im, const char *path, const char *hex, unsigned filters, nsbox_error *err)
{
        char computed[65], what[96];
        _cleanup_close_ int fd = open_in(im, path, err);
        if (fd < 0)
                return fd;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "'%s'", path);
        if (!hex) {
                nsbox_sha256 h;
                nsbox_sha256_init(&h);
                char buf[65536];
                ssize_t n;
                while ((n = read(fd, buf, sizeof(buf))) > 0)
                        nsbox_sha256_update(&h, buf, (size_t)n);
                if (n < 0 || lseek(fd, 0, SEEK_SET) < 0)
                        return nsbox_err(err, errno, "read '%s'", path);
                nsbox_sha256_final_hex(&h, computed);
                hex = computed;
        }
        im->size += (uint64_t)st.st_size;
        json_array_append_new(im->digests, json_sprintf("sha256:%s", hex));
        int r = nsbox_store_hold_digest_layer(im->s, hex, &im->held, err);
        if (r != 0)
                return r < 0 ? r : 0;
        if (mkdirat(im->tmpfd, "layer", 0755) < 0)
                return nsbox_err(err, errno, "create a layer under '%s/tmp'", im->s->dir);
        _cleanup_close_ int top = openat(im->tmpfd, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return nsbox_err(err, errno, "open a layer under '%s/tmp'", im->s->dir);
        if (im->x.shift_owners && fchown(top, NSBOX_ROOT_ID_BASE, NSBOX_ROOT_ID_BASE) < 0)
                return nsbox_err(err, errno, "owner of a new layer");
        snprintf(what, sizeof(what), "layer sha256:%.12s", hex);
        im->x.top = top;
        im->x.what = what;
        nsbox_sha256 h;
        nsbox_sha256_init(&h);
        r = nsbox_extract_tar(&im->x, fd, filters, &h, err);
        char got[65];
        nsbox_sha256_final_hex(&h, got);
        if (r == 0 && strcmp(got, hex))
                r = nsbox_err(err, 0, "%s: digest mismatch (sha256:%s read)", what, got);
        if (r == 0) {
                size_t before = im->held.n;
                r = nsbox_store_bind_digest_layer(im->s, hex, im->tmpfd, "layer", &im->held, err);
                if (r == 0 && im->held.n > before)
                        strv_push(&im->fresh, strdup(im->held.ids[im->held.n - 1]));
        }
        nsbox_tree_remove(im->tmpfd, "layer", NULL);
        return r;
}

static const char *sget(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* The config's runtime defaults, checked: what run and create use. */
static int config_defaults(json_t *cfg, json_t **ret, nsbox_error *err)
{
        json_t *c = json_object_get(cfg, "config");
        if (!json_is_object(cfg) || (c && !json_is_null(c) && !json_is_object(c)))
                return nsbox_err(err, 0, "the config is not an image configuration object");
        json_t *out = json_object();
        static const char *const lists[] = { "Env", "Entrypoint", "Cmd" };
        for (size_t k = 0; k < ARRAY_SIZE(lists); k++) {
                json_t *v = json_object_get(c, lists[k]), *e;
                size_t i;
                if (!v || json_is_null(v))
                        continue;
                bool ok = json_is_array(v) && json_array_size(v) <= 4096;
                json_array_foreach(v, i, e) ok = ok && json_is_string(e) && (k || strchr(json_string_value(e), '=') != NULL);
                if (!ok) {
                        json_decref(out);
                        return nsbox_err(err, 0, "config '%s' must be an array of strings%s", lists[k], k ? "" : " K=V");
                }
                json_object_set(out, lists[k], v);
        }
        static const char *const strs[] = { "WorkingDir", "User" };
        for (size_t k = 0; k < ARRAY_SIZE(strs); k++) {
                json_t *v = json_object_get(c, strs[k]);
                if (v && !json_is_null(v) && !json_is_string(v)) {
                        json_decref(out);
                        return nsbox_err(err, 0, "config '%s' must be a string", strs[k]);
                }
                if (json_string_length(v))
                        json_object_set(out, strs[k], v);
        }
        *ret = out;
        return 0;
}

/* OCI layout: index.json -> manifest -> config and layers. */
static int import_oci(importer *im, char **name, json_t **cfg, char **id, nsbox_error *err)
{
        json_t *layout = read_json(im, "oci-layout", NULL, err);
        const char *v = sget(layout, "imageLayoutVersion");
        bool ok = v && !strncmp(v, "1.", 2);
        json_decref(layout);
        if (!ok)
                return err->msg ? -EINVAL : nsbox_err(err, 0, "oci-layout: imageLayoutVersion 1.x expected");
        json_t *index = read_json(im, "index.json", NULL, err), *nested = NULL;
        json_t *desc = index ? pick_manifest(im, index, 0, &nested, err) : NULL;
        json_t *ann = json_object_get(desc, "annotations");
        const char *ref = sget(ann, "io.containerd.image.name") ? sget(ann, "io.containerd.image.name")
                                                                : sget(ann, "org.opencontainers.image.ref.name");
        if (ref && !*name)
                *name = strdup(ref);
        const char *mdigest = sget(desc, "digest");
        json_t *man = desc ? read_blob_json(im, mdigest, err) : NULL;
        if (man && !(*id = strdup(mdigest)))
                mdigest = NULL;
        json_decref(nested);
        json_decref(index);
        if (!man)
                return -EINVAL;
        int r = 0;
        json_t *layers = json_object_get(man, "layers"), *l;
        json_t *config = json_object_get(man, "config");
        if (!json_is_array(layers) || json_array_size(layers) == 0 || json_array_size(layers) > NSBOX_IMAGE_MAX_LAYERS)
                r = nsbox_err(err, 0, "manifest: 'layers' must be an array of 1-%d layers", NSBOX_IMAGE_MAX_LAYERS);
        if (r == 0 && !(*cfg = read_blob_json(im, sget(config, "digest"), err)))
                r = -EINVAL;
        size_t i;
        json_array_foreach(layers, i, l) {
                unsigned f = 0;
                const char *hex = digest_hex(sget(l, "digest"));
                char path[96];
                if (r < 0)
                        break;
                if ((r = layer_filters(sget(l, "mediaType"), &f, err)) < 0)
                        break;
                if (!hex) {
                        r = nsbox_err(err, 0, "layer digest '%.100s': expected sha256:64 hex digits", sget(l, "digest") ?: "");
                        break;
                }
                snprintf(path, sizeof(path), "blobs/sha256/%s", hex);
                r = import_layer(im, path, hex, f, err);
        }
        json_decref(man);
        return r;
}

/* docker-archive: manifest.json [ { Config, RepoTags, Layers } ]. */
static int import_docker(importer *im, char **name, json_t **cfg, char **id, nsbox_error *err)
{
        json_t *m = read_json(im, "manifest.json", NULL, err);
        json_t *e = json_array_get(m, 0);
        int r = 0;
        if (!json_is_array(m) || !json_is_object(e))
                r = err->msg ? -EINVAL : nsbox_err(err, 0, "manifest.json: expected an array of one image");
        else if (json_array_size(m) > 1)
                r = nsbox_err(err, 0, "manifest.json lists %zu images: import one at a time", json_array_size(m));
        const char *cpath = sget(e, "Config"), *tag = json_string_value(json_array_get(json_object_get(e, "RepoTags"), 0));
        if (r == 0 && tag && !*name)
                *name = strdup(tag);
        if (r == 0 && !cpath)
                r = nsbox_err(err, 0, "manifest.json: no 'Config'");
        /* "blobs/sha256/HEX" (docker 25+) or "HEX.json": the file name is its digest */
        const char *slash = cpath ? strrchr(cpath, '/') : NULL, *base = slash ? slash + 1 : cpath;
        char hexbuf[65] = "";
        if (base && strlen(base) >= 64)
                snprintf(hexbuf, sizeof(hexbuf), "%.64s", base);
        if (r == 0 && !(*cfg = read_json(im, cpath, hex64(hexbuf) ? hexbuf : NULL, err)))
                r = -EINVAL;
        if (r == 0 && hex64(hexbuf) && asprintf(id, "sha256:%s", hexbuf) < 0)
                r = -ENOMEM;
        json_t *layers = json_object_get(e, "Layers"), *l;
        if (r == 0 && (!json_is_array(layers) || json_array_size(layers) == 0 || json_array_size(layers) > NSBOX_IMAGE_MAX_LAYERS))
                r = nsbox_err(err, 0, "manifest.json: 'Layers' must be an array of 1-%d paths", NSBOX_IMAGE_MAX_LAYERS);
        size_t i;
        json_array_foreach(layers, i, l) {
                if (r < 0)
                        break;
                const char *p = json_string_value(l);
                const char *ls = p ? strrchr(p, '/') : NULL;
                /* a blob named by its digest is checked against it */
                const char *hex = ls && hex64(ls + 1) && !strncmp(p, "blobs/sha256/", 13) ? ls + 1 : NULL;
                r = p ? import_layer(im, p, hex, EXTRACT_GZIP, err) : nsbox_err(err, 0, "manifest.json: a layer is not a path");
        }
        json_decref(m);
        return r;
}

static uint64_t env_limit(const char *name, uint64_t dflt)
{
        const char *v = getenv(name);
        uint64_t n;
        return v && *v && parse_u64(v, 1, UINT64_MAX, &n) == 0 ? n : dflt;
}

/* PATH a file: a tar of a layout (or of a docker-archive), its files extracted under tmp/. */
static int open_source(importer *im, const char *path, nsbox_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return nsbox_err(err, errno, "'%s'", path);
        if (S_ISDIR(st.st_mode)) {
                im->src = steal_fd(&fd);
                return 0;
        }
        if (!S_ISREG(st.st_mode))
                return nsbox_err(err, 0, "'%s' is neither a directory nor an archive file", path);
        if (mkdirat(im->tmpfd, "src", 0700) < 0 || (im->src = openat(im->tmpfd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                return nsbox_err(err, errno, "create a directory under '%s/tmp'", im->s->dir);
        extract_ctx outer = { .cache_fd = -1, .top = im->src, .what = "archive", .outer = true, .max_entries = im->x.max_entries,
                              .max_bytes = im->x.max_bytes };
        int r = nsbox_extract_tar(&outer, fd, EXTRACT_GZIP, NULL, err);
        im->x.stats.entries = outer.stats.entries;
        im->x.stats.bytes = outer.stats.bytes;
        return r;
}

static json_t *make_record(importer *im, const char *name, const char *format, json_t *cfg, const char *id, nsbox_error *err)
{
        json_t *defaults = NULL;
        if (config_defaults(cfg, &defaults, err) < 0)
                return NULL;
        json_t *layers = json_array(), *digests = json_array();
        for (size_t i = im->held.n; i-- > 0;) { /* topmost first */
                json_array_append_new(layers, json_string(im->held.ids[i]));
                json_array_append(digests, json_array_get(im->digests, i));
        }
        json_t *meta = json_pack("{ss so so so ss* ss* sI sI ss}", "name", name, "layers", layers, "digests", digests, "config", defaults,
                                 "created", sget(cfg, "created"), "id", id, "imported", (json_int_t)time(NULL), "size",
                                 (json_int_t)im->size, "format", format);
        if (!meta)
                nsbox_err(err, ENOMEM, "image record");
        return meta;
}

static int import_into(importer *im, const char *path, const char *given, json_t **ret_meta, nsbox_error *err)
{
        int r = open_source(im, path, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *name = given ? strdup(given) : NULL, *id = NULL;
        json_t *cfg = NULL;
        bool oci = faccessat(im->src, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        if (!oci && faccessat(im->src, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return nsbox_err(err, 0, "'%s' is neither an OCI image layout (index.json) nor a docker-archive (manifest.json)",
                                 path);
        if (given && nsbox_store_has_image(im->s, given)) /* before the work; checked again when bound */
                return nsbox_err_as(err, EEXIST, "image '%s' exists (nsbox image rm %s first)", given, given);
        r = oci ? import_oci(im, &name, &cfg, &id, err) : import_docker(im, &name, &cfg, &id, err);
        if (r == 0 && !name)
                r = nsbox_err(err, 0, "the archive names no image: give a NAME (nsbox image import PATH NAME)");
        if (r == 0)
                r = nsbox_image_name_check(name, err);
        json_t *meta = r == 0 ? make_record(im, name, oci ? "oci" : "docker-archive", cfg, id, err) : NULL;
        json_decref(cfg);
        if (r == 0 && !meta)
                r = -EINVAL;
        if (r == 0)
                r = nsbox_store_bind_image(im->s, name, meta, err);
        if (r < 0) {
                json_decref(meta);
                return r;
        }
        *ret_meta = meta;
        return 0;
}

int nsbox_image_import(nsbox_store *s, const char *path, const char *name, json_t **ret_meta, nsbox_error *err)
{
        return nsbox_image_import_progress(s, path, name, NULL, NULL, ret_meta, err);
}

int nsbox_image_import_progress(nsbox_store *s, const char *path, const char *name, nsbox_image_progress_fn progress, void *userdata,
                                json_t **ret_meta, nsbox_error *err)
{
        if (name && nsbox_image_name_check(name, err) < 0)
                return -EINVAL;
        bool root = geteuid() == 0;
        importer im = { .s = s, .src = -1, .held = NSBOX_LAYERS_INIT, .digests = json_array() };
        im.x = (extract_ctx){ .cache_fd = -1, .shift_owners = root, .keep_setid = root, .skip_devices = root,
                              .max_entries = env_limit("NSBOX_IMAGE_MAX_ENTRIES", NSBOX_IMAGE_MAX_ENTRIES),
                              .max_bytes = env_limit("NSBOX_IMAGE_MAX_BYTES", NSBOX_IMAGE_MAX_BYTES),
                              .progress = progress, .progress_ud = userdata };
        im.tmpfd = nsbox_store_tmp(s, im.tmpname, err);
        int r = im.tmpfd < 0 ? im.tmpfd : im.digests ? import_into(&im, path, name, ret_meta, err) : -ENOMEM;
        if (im.src >= 0)
                close(im.src);
        if (im.tmpfd >= 0)
                nsbox_store_tmp_done(s, im.tmpname, im.tmpfd);
        nsbox_layers_release(&im.held);
        if (r < 0 && im.fresh) { /* nothing of a failed import stays */
                nsbox_error e2 = { 0 };
                nsbox_store_drop_layers(s, im.fresh, &e2);
                nsbox_error_clear(&e2);
        }
        if (r == 0 && im.x.stats.devices_skipped)
                fprintf(stderr, "nsbox: warning: image: %llu device node(s) skipped (a sandbox has its own /dev)\n",
                        (unsigned long long)im.x.stats.devices_skipped);
        strv_free(im.fresh);
        json_decref(im.digests);
        return r;
}
