/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* E2B's template reads (the SDKs' OpenAPI): GET /templates, /templates/{id} and
 * /templates/aliases/{alias}, so that `e2b template list` and Template.exists() see what a create
 * takes: `base`, each template of nsboxd's configuration (with its warm pool), and the built-in
 * code interpreter.  They are the operator's, usable by every key, so each is public.  nsbox
 * builds none from a Dockerfile: a template's "build" is its configuration, loaded when nsboxd
 * started, and its figures are those of a sandbox made from it. */
#include "http.h"
#include "../interp_source.h"
#include "../sha256.h"

#include <string.h>
#include <time.h>

#define TEMPLATE_ALIASES_MAX 2

typedef struct tpl_view {
        const char *id;
        const char *aliases[TEMPLATE_ALIASES_MAX]; /* the names a create takes, id first */
        int conf;                                  /* its configuration's index, or -1 */
        const tpl_state *use;
} tpl_view;

static const char *INTERP_NAMES[TEMPLATE_ALIASES_MAX] = { NSBOX_INTERP_TAG "-v1", NSBOX_INTERP_TAG };

/* The i-th template a create takes, or false past the last. */
static bool template_at(daemon_state *d, size_t i, tpl_view *v)
{
        const nsbox_dconfig *c = d->conf;
        *v = (tpl_view){ .conf = -1 };
        if (i == 0) {
                *v = (tpl_view){ .id = "base", .aliases = { "base" }, .conf = -1, .use = &d->builtin[0] };
                return true;
        }
        if (i - 1 < c->n_templates) {
                const char *name = c->templates[i - 1].name;
                *v = (tpl_view){ .id = name, .aliases = { name }, .conf = (int)(i - 1), .use = &d->tpl[i - 1] };
                if (interp_template(name)) /* it serves the other name of the code interpreter too */
                        v->aliases[1] = strcmp(name, INTERP_NAMES[0]) ? INTERP_NAMES[0] : INTERP_NAMES[1];
                return true;
        }
        if (i - 1 == c->n_templates && !interp_config_template(c, INTERP_NAMES[0])) {
                *v = (tpl_view){ .id = INTERP_NAMES[0], .aliases = { INTERP_NAMES[0], INTERP_NAMES[1] }, .conf = -1, .use = &d->builtin[1] };
                return true;
        }
        return false;
}

static bool template_named(daemon_state *d, const char *name, tpl_view *v)
{
        for (size_t i = 0; template_at(d, i, v); i++)
                for (size_t a = 0; a < TEMPLATE_ALIASES_MAX && v->aliases[a]; a++)
                        if (!strcmp(v->aliases[a], name))
                                return true;
        return false;
}

/* A build id in the OpenAPI's uuid form, from the template's name and configuration: the same
 * while they are, another once they change. */
static void build_id(daemon_state *d, const tpl_view *v, char out[37])
{
        nsbox_sha256 c;
        uint8_t h[NSBOX_SHA256_SIZE];
        nsbox_sha256_init(&c);
        nsbox_sha256_update(&c, v->id, strlen(v->id) + 1);
        char *conf = v->conf >= 0 ? json_dumps(d->conf->templates[v->conf].create, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (conf)
                nsbox_sha256_update(&c, conf, strlen(conf));
        free(conf);
        nsbox_sha256_final(&c, h);
        h[6] = (uint8_t)((h[6] & 0x0f) | 0x50); /* a name-based (version 5 style) uuid */
        h[8] = (uint8_t)((h[8] & 0x3f) | 0x80);
        snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", h[0], h[1], h[2], h[3], h[4], h[5], h[6],
                 h[7], h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]);
}

/* A sandbox's figures: those of one made from it (a pooled one too), else the defaults'. */
static void figures(daemon_state *d, const tpl_view *v, json_t *o)
{
        static const nsbox_limits none;
        const nsbox_limits *l = &none;
        for (sandbox *s = d->sandboxes; s; s = s->next)
                if (v->conf >= 0 && s->tpl == v->conf) {
                        l = &s->limits;
                        break;
                }
        control_figures(o, l);
}

/* Template (with_builds false) or TemplateWithBuilds of the OpenAPI */
static json_t *template_json(daemon_state *d, const tpl_view *v, bool with_builds)
{
        char since[32], used[32], id[37];
        control_rfc3339(since, sizeof(since), d->started_at);
        if (v->use->used_at)
                control_rfc3339(used, sizeof(used), v->use->used_at);
        build_id(d, v, id);
        json_t *names = json_array();
        for (size_t a = 0; a < TEMPLATE_ALIASES_MAX && v->aliases[a]; a++)
                json_array_append_new(names, json_string(v->aliases[a]));
        json_t *o = json_pack("{ss sb sO so ss ss so sI}", "templateID", v->id, "public", 1, "aliases", names, "names", names, "createdAt",
                              since, "updatedAt", since, "lastSpawnedAt", v->use->used_at ? json_string(used) : json_null(), "spawnCount",
                              (json_int_t)(v->use->hits + v->use->misses));
        json_t *b = json_pack("{ss ss ss}", "buildID", id, "envdVersion", HTTP_ENVD_VERSION, with_builds ? "status" : "buildStatus", "ready");
        figures(d, v, b);
        if (with_builds) {
                json_object_set_new(b, "createdAt", json_string(since));
                json_object_set_new(b, "updatedAt", json_string(since));
                json_object_set_new(b, "finishedAt", json_string(since));
                json_object_set_new(o, "builds", json_pack("[o]", b));
        } else {
                json_object_update(o, b);
                json_decref(b);
                json_object_set_new(o, "createdBy", json_null());
                json_object_set_new(o, "buildCount", json_integer(1));
        }
        return o;
}

void templates_request(hreq *r)
{
        daemon_state *d = r->d;
        const char *u = r->url;
        tpl_view v;
        if (!strcmp(u, "/templates")) {
                json_t *arr = json_array();
                for (size_t i = 0; template_at(d, i, &v); i++)
                        json_array_append_new(arr, template_json(d, &v, false));
                http_answer_json(r, 200, arr);
                return;
        }
        bool alias = !strncmp(u, "/templates/aliases/", 19);
        const char *name = u + (alias ? 19 : 11);
        if (!*name || strchr(name, '/')) {
                control_error(r, 404, "GET %s is not part of the API nsbox serves", u);
        } else if (!template_named(d, name, &v)) {
                control_error(r, 404, "template '%.100s' not found (templates are nsboxd's: nsboxd(8), TEMPLATES)", name);
        } else if (alias) {
                http_answer_json(r, 200, json_pack("{ss sb}", "templateID", v.id, "public", 1));
        } else {
                http_answer_json(r, 200, template_json(d, &v, true));
        }
}
