/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* systemd's service protocols, spoken directly (no libsystemd): see systemd.c. */
#pragma once

#include "error.h"

/* Send STATE ("READY=1\nSTATUS=...") to $NOTIFY_SOCKET: 1 sent, 0 not run by systemd, or -errno. */
int nsbox_sd_notify(const char *state);
/* The socket systemd passed (socket activation) in *ret: 1, or 0 when none was passed to this
 * process, or -errno with err set when what was passed is not one listening unix stream socket.
 * Clears LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES either way when they were for us. */
int nsbox_sd_listen_fd(int *ret, nsbox_error *err);
