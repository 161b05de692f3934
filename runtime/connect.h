/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Connect protocol's framing (connectrpc.com/docs/protocol), JSON codec: what envd speaks to
 * the E2B SDKs.  A streamed message is an envelope: flags (1 byte), length (4 bytes, big endian),
 * the JSON; the last of a response has CONNECT_END_STREAM and carries {} or {"error": ...}. */
#pragma once

#include <stddef.h>

#include "proto.h"
#include "ids.h"

#define CONNECT_COMPRESSED 0x01
#define CONNECT_END_STREAM 0x02
#define CONNECT_MESSAGE_MAX (4u << 20) /* a request's message, at most */

/* One envelope appended to q: 0, or -E2BIG, -ENOMEM. */
int connect_envelope(nsbox_queue *q, unsigned flags, const char *json, size_t len);
/* The single message of a streaming request's body (buf, len): 0 with *msg, *msg_len pointing
 * into buf; -EINVAL (a short or trailing envelope, a length that does not match),
 * -EOPNOTSUPP (compressed), -E2BIG (over CONNECT_MESSAGE_MAX). */
int connect_unwrap(const char *buf, size_t len, const char **msg, size_t *msg_len);
/* The HTTP status of a Connect error code (unary answers); 500 for an unknown one. */
unsigned connect_http_status(const char *code);
/* The Connect code of one of nsbox's stable codes (codes.h). */
const char *connect_code_of(const char *nsbox_code);

/* A PORT-ID.DOMAIN host name (an optional :port after it): 1 with *port (1-65535) and id (1-32
 * lowercase letters and digits); 0 when host is not one under domain. */
int e2b_host_route(const char *host, const char *domain, unsigned *port, char id[NSBOX_ID_SIZE]);
