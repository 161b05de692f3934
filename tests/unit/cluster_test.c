/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a node tells HAProxy's agent-check (runtime/daemon/cluster.c): its free capacity as a
 * share of the router's weight, "drain" when full or stopping. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../../runtime/daemon/internal.h"
#include "unit.h"

#define MIB (1024ull * 1024)

static const char *reply(const daemon_state *d)
{
        static char buf[32];
        ck_assert_int_gt(cluster_agent_reply(d, buf, sizeof(buf)), 0);
        return buf;
}

START_TEST(free_slots_are_a_share_of_the_weight)
{
        static nsbox_dconfig cf;
        static daemon_state d;
        static sandbox s[3];
        d.conf = &cf;
        cf.max_sandboxes = 100; /* 100 of 256: 40% */
        ck_assert_str_eq(reply(&d), "up ready 40%\n");
        cf.max_sandboxes = 20;
        ck_assert_str_eq(reply(&d), "up ready 8%\n");
        cf.max_sandboxes = 1000; /* 256 free and more: the whole weight */
        ck_assert_str_eq(reply(&d), "up ready 100%\n");
        /* sandboxes in use take slots; a pooled one is free for a create */
        cf.max_sandboxes = 3;
        s[0].next = &s[1];
        s[1].next = &s[2];
        s[2].pooled = true;
        d.sandboxes = &s[0];
        ck_assert_uint_eq(cluster_free(&d), 1);
        ck_assert_str_eq(reply(&d), "up ready 1%\n");
        /* the memory budget at the default memory limits it too */
        cf.max_sandboxes = 100;
        cf.memory_budget = 1024 * MIB;
        cf.default_memory = 256 * MIB;
        s[0].mem_commit = s[1].mem_commit = 256 * MIB;
        ck_assert_uint_eq(cluster_free(&d), 2);
}
END_TEST

START_TEST(a_full_or_stopping_node_drains)
{
        static nsbox_dconfig cf;
        static daemon_state d;
        static sandbox s;
        d.conf = &cf;
        cf.max_sandboxes = 1;
        d.sandboxes = &s;
        ck_assert_uint_eq(cluster_free(&d), 0);
        ck_assert_str_eq(reply(&d), "drain\n");
        d.sandboxes = NULL;
        ck_assert_str_eq(reply(&d), "up ready 1%\n");
        d.stopping = true; /* room, but no new creates while it stops */
        ck_assert_str_eq(reply(&d), "drain\n");
}
END_TEST

Suite *cluster_suite(void)
{
        Suite *s = suite_create("cluster");
        TCase *tc = unit_tcase(s, "cluster");
        unit_add(tc, free_slots_are_a_share_of_the_weight);
        unit_add(tc, a_full_or_stopping_node_drains);
        return s;
}
