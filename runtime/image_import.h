/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox image import (nsbox(1), IMAGES): an OCI image layout (a directory or a tar of one) or a
 * docker-archive tar (docker save, podman save) into the layer store, each layer extracted once
 * and keyed by its blob's sha256.  Archives are hostile input (docs/security.md): digests are
 * verified while reading, paths never leave the layer nor follow a link, sizes and counts are
 * bounded, and a failure leaves nothing in the store.  Linked into the nsbox command only: it is
 * the one user of libarchive. */
#pragma once

#include <jansson.h>

#include "error.h"
#include "store.h"

/* Limits, overridable for tests by NSBOX_IMAGE_MAX_ENTRIES and NSBOX_IMAGE_MAX_BYTES. */
#define NSBOX_IMAGE_MAX_ENTRIES 1000000u
#define NSBOX_IMAGE_MAX_BYTES (64ull << 30)
#define NSBOX_IMAGE_JSON_MAX (1u << 20)
#define NSBOX_IMAGE_MAX_LAYERS 128

/* Import PATH as image NAME (NULL: the name the archive gives).  *ret_meta: the image record. */
int nsbox_image_import(nsbox_store *s, const char *path, const char *name, json_t **ret_meta, nsbox_error *err);
/* The same, telling progress (when not NULL) the entries and bytes of files extracted so far,
 * across the image's layers, as they grow: often, so it should be cheap. */
typedef void (*nsbox_image_progress_fn)(uint64_t entries, uint64_t bytes, void *userdata);
int nsbox_image_import_progress(nsbox_store *s, const char *path, const char *name, nsbox_image_progress_fn progress, void *userdata,
                                json_t **ret_meta, nsbox_error *err);
