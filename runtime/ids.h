/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sandbox ids: 32 lowercase hex digits (128 random bits), then "-NODE" when nsboxd has a node name
 * (cluster.node), so a router finds a sandbox's node from its id alone.  The whole id fits a DNS
 * label together with a port ("49999-ID.DOMAIN": 6 + 57 <= 63). */
#pragma once

#define NSBOX_ID_HEX 32
#define NSBOX_NODE_MAX 24
#define NSBOX_ID_MAX (NSBOX_ID_HEX + 1 + NSBOX_NODE_MAX)
#define NSBOX_ID_SIZE (NSBOX_ID_MAX + 1) /* with its NUL */

#include <stdbool.h>

/* name is a node name: [a-z0-9], then [a-z0-9-], at most NSBOX_NODE_MAX, not ending in '-'. */
bool nsbox_node_ok(const char *name);
/* id is a whole sandbox id: NSBOX_ID_HEX lowercase hex digits, then nothing or "-" and a node. */
bool nsbox_id_ok(const char *id);
/* The node an id names ("" for none); id need not be valid: a prefix of hex digits, '-', the rest. */
const char *nsbox_id_node(const char *id);
