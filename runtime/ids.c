/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ids.h"

#include <string.h>

bool nsbox_node_ok(const char *name)
{
        size_t n = name ? strlen(name) : 0;
        return n >= 1 && n <= NSBOX_NODE_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n && name[0] != '-' &&
               name[n - 1] != '-';
}

bool nsbox_id_ok(const char *id)
{
        if (!id || strspn(id, "0123456789abcdef") != NSBOX_ID_HEX)
                return false;
        return !id[NSBOX_ID_HEX] || (id[NSBOX_ID_HEX] == '-' && nsbox_node_ok(id + NSBOX_ID_HEX + 1));
}

const char *nsbox_id_node(const char *id)
{
        const char *dash = strchr(id, '-');
        return dash ? dash + 1 : "";
}
