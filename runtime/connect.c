/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "connect.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

int connect_envelope(nsbox_queue *q, unsigned flags, const char *json, size_t len)
{
        if (len > UINT32_MAX)
                return -E2BIG;
        unsigned char h[5] = { (unsigned char)flags, (unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                               (unsigned char)len };
        int r = nsbox_queue_append(q, h, sizeof(h));
        return r < 0 ? r : nsbox_queue_append(q, json, len);
}

int connect_unwrap(const char *buf, size_t len, const char **msg, size_t *msg_len)
{
        if (len < 5)
                return -EINVAL;
        const unsigned char *u = (const unsigned char *)buf;
        size_t n = (size_t)u[1] << 24 | (size_t)u[2] << 16 | (size_t)u[3] << 8 | (size_t)u[4];
        if (u[0] & CONNECT_COMPRESSED)
                return -EOPNOTSUPP;
        if (u[0] & ~(unsigned)CONNECT_COMPRESSED)
                return -EINVAL;
        if (n > CONNECT_MESSAGE_MAX)
                return -E2BIG;
        if (n != len - 5)
                return -EINVAL;
        *msg = buf + 5;
        *msg_len = n;
        return 0;
}

static const struct {
        const char *code;
        unsigned status;
} statuses[] = {
        { "canceled", 408 },         { "unknown", 500 },        { "invalid_argument", 400 }, { "deadline_exceeded", 408 },
        { "not_found", 404 },        { "already_exists", 409 }, { "permission_denied", 403 }, { "resource_exhausted", 429 },
        { "failed_precondition", 400 }, { "aborted", 409 },     { "out_of_range", 400 },     { "unimplemented", 501 },
        { "internal", 500 },         { "unavailable", 503 },    { "data_loss", 500 },        { "unauthenticated", 401 },
};

unsigned connect_http_status(const char *code)
{
        for (size_t i = 0; code && i < sizeof(statuses) / sizeof(statuses[0]); i++)
                if (!strcmp(statuses[i].code, code))
                        return statuses[i].status;
        return 500;
}

const char *connect_code_of(const char *c)
{
        static const char *const map[][2] = {
                { "invalid_argument", "invalid_argument" }, { "invalid_path", "invalid_argument" }, { "file_not_found", "not_found" },
                { "not_found", "not_found" },               { "permission_denied", "permission_denied" },
                { "is_directory", "invalid_argument" },     { "not_a_directory", "invalid_argument" },
                { "too_large", "resource_exhausted" },      { "capacity", "resource_exhausted" }, { "timeout", "deadline_exceeded" },
                { "unavailable", "unavailable" },           { "conflict", "failed_precondition" },
        };
        for (size_t i = 0; c && i < sizeof(map) / sizeof(map[0]); i++)
                if (!strcmp(map[i][0], c))
                        return map[i][1];
        return "internal";
}

int e2b_host_route(const char *host, const char *domain, unsigned *port, char id[NSBOX_ID_SIZE])
{
        if (!host || !domain || !*domain)
                return 0;
        size_t hl = strcspn(host, ":"), dl = strcspn(domain, ":"); /* a domain's :PORT is the clients' (TLS in front) */
        if (hl <= dl + 1 || host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, domain, dl))
                return 0;
        size_t label = hl - dl - 1, digits = strspn(host, "0123456789");
        if (digits == 0 || digits > 5 || host[0] == '0' || digits + 1 >= label || host[digits] != '-')
                return 0;
        size_t idl = label - digits - 1;
        if (idl > NSBOX_ID_MAX || strspn(host + digits + 1, "0123456789abcdefghijklmnopqrstuvwxyz-") < idl)
                return 0;
        unsigned p = 0;
        for (size_t i = 0; i < digits; i++)
                p = p * 10 + (unsigned)(host[i] - '0');
        if (p == 0 || p > 65535)
                return 0;
        *port = p;
        memcpy(id, host + digits + 1, idl);
        id[idl] = 0;
        return 1;
}
