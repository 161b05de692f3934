/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host view: programs (sh, python3, git, node, compilers) need /usr and the handful of /etc
 * files the dynamic loader, libc, TLS and time zones read.  Identity files (passwd, group),
 * hostname, hosts and resolv.conf are generated per sandbox instead (runtime/mounts.c). */
#include "hostview.h"

const nsbox_hostview_entry nsbox_hostview[] = {
        { "/usr", HV_BIND },
        /* merged-/usr hosts have these as symlinks into /usr; older ones as directories */
        { "/bin", HV_LINK | HV_BIND | HV_OPTIONAL },
        { "/sbin", HV_LINK | HV_BIND | HV_OPTIONAL },
        { "/lib", HV_LINK | HV_BIND | HV_OPTIONAL },
        { "/lib32", HV_LINK | HV_BIND | HV_OPTIONAL },
        { "/lib64", HV_LINK | HV_BIND | HV_OPTIONAL },
        { "/libx32", HV_LINK | HV_BIND | HV_OPTIONAL },
        /* dynamic loader and libc */
        { "/etc/ld.so.cache", HV_BIND | HV_OPTIONAL },
        { "/etc/ld.so.conf", HV_BIND | HV_OPTIONAL },
        { "/etc/ld.so.conf.d", HV_BIND | HV_OPTIONAL },
        { "/etc/nsswitch.conf", HV_BIND | HV_OPTIONAL },
        { "/etc/protocols", HV_BIND | HV_OPTIONAL },
        { "/etc/services", HV_BIND | HV_OPTIONAL },
        { "/etc/alternatives", HV_BIND | HV_OPTIONAL },
        /* TLS trust store and time */
        { "/etc/ssl", HV_BIND | HV_OPTIONAL },
        { "/etc/ca-certificates", HV_BIND | HV_OPTIONAL },
        { "/etc/localtime", HV_LINK | HV_BIND | HV_OPTIONAL },
        { "/etc/timezone", HV_BIND | HV_OPTIONAL },
        /* what interpreters and tools read at start */
        { "/etc/os-release", HV_LINK | HV_BIND | HV_OPTIONAL },
        { "/etc/debian_version", HV_BIND | HV_OPTIONAL },
        { "/etc/bash.bashrc", HV_BIND | HV_OPTIONAL },
        { "/etc/gitconfig", HV_BIND | HV_OPTIONAL },
        { "/etc/python3", HV_BIND | HV_OPTIONAL },
        { "/etc/python3.11", HV_BIND | HV_OPTIONAL },
        { "/etc/perl", HV_BIND | HV_OPTIONAL },
        { "/etc/magic", HV_BIND | HV_OPTIONAL },
        /* the JDK's conf/security/java.security links here: without it java cannot start a TLS or
         * security provider (run_code java) */
        { "/etc/java-17-openjdk", HV_BIND | HV_OPTIONAL },
        /* R's R_HOME/etc files (Renviron: its library paths) link here: without it R finds none of
         * its packages (code interpreter r contexts, run_code r) */
        { "/etc/R", HV_BIND | HV_OPTIONAL },
};

const size_t nsbox_hostview_len = sizeof(nsbox_hostview) / sizeof(nsbox_hostview[0]);
