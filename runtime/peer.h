/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who is at the other end of a host-side unix socket (nsboxd's, its keeper's).  A socket is
 * reachable through any bind that shows its directory, read-only included (connect() writes
 * nothing), and a sandbox's uid maps to its owner's: so a peer must also run in our own user
 * and pid namespaces, which no process inside a sandbox does. */
#pragma once

#include <stddef.h>

/* The one-line message a refused client gets (nsbox-protocol(7), ERRORS). */
#define NSBOX_PEER_REFUSED_MSG "nsboxd refused the connection: clients inside a sandbox are not served"

/* 0: the peer of the connected unix socket fd runs in our user and pid namespaces.  Negative
 * errno: it does not, or that cannot be verified (its pid is not visible to us, it has exited,
 * its namespaces cannot be read); why (size bytes) says which, for the log.  The peer is held by
 * a pidfd and must still be alive after its namespaces were read, so its pid cannot have been
 * reused meanwhile.  The pidfd comes from SO_PEERPIDFD (Linux 6.5), else from pidfd_open of
 * SO_PEERCRED's pid: there, a peer that exits between its connect() and our pidfd_open() and
 * whose pid a new host process takes in that moment would be mistaken for it. */
int nsbox_peer_check(int fd, char *why, size_t size);
/* The same as on a kernel without SO_PEERPIDFD (before 6.5), for the tests. */
int nsbox_peer_check_without_peerpidfd(int fd, char *why, size_t size);
