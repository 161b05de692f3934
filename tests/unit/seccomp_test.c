/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Compiling a policy's seccomp rules to BPF.  Nothing here installs a filter in the test process. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <seccomp.h>

#include "../../runtime/policy.h"
#include "../../runtime/seccomp.h"
#include "unit.h"

/* Compile the policy in JSON; 0 or the failure, with the filter in *bpf. */
static int compile_json(const char *json, nsbox_bpf *bpf, nsbox_error *err)
{
        nsbox_policy *p = NULL;
        int r = nsbox_policy_parse(json, strlen(json), "test.json", &p, err);
        if (r < 0)
                return r;
        r = nsbox_seccomp_compile(p, bpf, err);
        nsbox_policy_free(p);
        return r;
}

START_TEST(test_default_policy_compiles_to_a_small_filter)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/policy/default.json", unit_src());
        nsbox_error err = { 0 };
        nsbox_policy *p = NULL;
        UNIT_ASSERT_OK(nsbox_policy_load(path, &p, &err), &err);
        nsbox_bpf bpf = { 0 };
        int r = nsbox_seccomp_compile(p, &bpf, &err);
        nsbox_policy_free(p);
        UNIT_ASSERT_OK(r, &err);
        ck_assert_ptr_nonnull(bpf.insns);
        ck_assert_uint_gt(bpf.len, 0);
        ck_assert_uint_lt(bpf.len, 4096);
        nsbox_bpf_release(&bpf);
}
END_TEST

/* The default policy's own text is parsed once (not merged onto a second parse of itself): its
 * filter is byte for byte the one of "{}", which is the built-in default merged the long way. */
START_TEST(test_default_text_gives_the_filter_of_an_empty_policy)
{
        nsbox_error err = { 0 };
        nsbox_bpf own = { 0 }, merged = { 0 };
        UNIT_ASSERT_OK(compile_json(nsbox_default_policy_json, &own, &err), &err);
        UNIT_ASSERT_OK(compile_json("{}", &merged, &err), &err);
        ck_assert_uint_gt(own.len, 0);
        ck_assert_uint_eq(own.len, merged.len);
        ck_assert(memcmp(own.insns, merged.insns, own.len * sizeof(*own.insns)) == 0);
        nsbox_bpf_release(&own);
        nsbox_bpf_release(&merged);
}
END_TEST

START_TEST(test_policy_without_rules_compiles)
{
        nsbox_error err = { 0 };
        nsbox_bpf bpf = { 0 };
        int r = compile_json("{\"seccomp\": {\"rules\": []}}", &bpf, &err);
        UNIT_ASSERT_OK(r, &err);
        ck_assert_ptr_nonnull(bpf.insns);
        ck_assert_uint_gt(bpf.len, 0);
        nsbox_bpf_release(&bpf);
}
END_TEST

START_TEST(test_policy_without_seccomp_section_compiles)
{
        nsbox_error err = { 0 };
        nsbox_bpf bpf = { 0 };
        int r = compile_json("{}", &bpf, &err);
        UNIT_ASSERT_OK(r, &err);
        ck_assert_uint_gt(bpf.len, 0);
        nsbox_bpf_release(&bpf);
}
END_TEST

START_TEST(test_deny_by_default_policy_compiles)
{
        nsbox_error err = { 0 };
        nsbox_bpf bpf = { 0 };
        int r = compile_json("{\"seccomp\": {\"default_action\": \"errno\", \"default_errno\": \"ENOSYS\", "
                             "\"foreign_arch\": \"errno\", \"rules\": [{\"syscalls\": [\"read\", \"write\", "
                             "\"exit_group\"], \"action\": \"allow\"}, {\"syscalls\": [\"mount\"], \"action\": "
                             "\"errno\", \"errno\": \"ENOSYS\"}]}}",
                             &bpf, &err);
        UNIT_ASSERT_OK(r, &err);
        ck_assert_uint_gt(bpf.len, 0);
        nsbox_bpf_release(&bpf);
}
END_TEST

START_TEST(test_more_rules_give_a_longer_filter)
{
        nsbox_error err = { 0 };
        nsbox_bpf none = { 0 }, some = { 0 };
        /* (not the default's rules, which a policy inherits unless it says "inherit": false) */
        UNIT_ASSERT_OK(compile_json("{\"inherit\": false}", &none, &err), &err);
        UNIT_ASSERT_OK(compile_json("{\"inherit\": false, \"seccomp\": {\"rules\": [{\"syscalls\": [\"mount\", \"ptrace\", \"bpf\"]}]}}",
                                    &some, &err),
                       &err);
        ck_assert_uint_gt(some.len, none.len);
        nsbox_bpf_release(&none);
        nsbox_bpf_release(&some);
}
END_TEST

START_TEST(test_release_leaves_no_filter)
{
        nsbox_error err = { 0 };
        nsbox_bpf bpf = { 0 };
        UNIT_ASSERT_OK(compile_json("{}", &bpf, &err), &err);
        nsbox_bpf_release(&bpf);
        ck_assert_ptr_null(bpf.insns);
        ck_assert_uint_eq(bpf.len, 0);
        nsbox_bpf_release(&bpf); /* twice is harmless */
        ck_assert_ptr_null(bpf.insns);
}
END_TEST

/* libseccomp asks the running kernel which actions it supports and refuses the kill-process
 * action (the default foreign_arch) below API level 3.  Valgrind does not implement seccomp(2),
 * so under it the level reads 1 and every compile would fail: compile as for a kernel of level 3
 * (Linux 4.14), which changes nothing on a real kernel, where the level is already 3 or more.
 * Nothing here installs a filter, so the kernel's real support is not at stake. */
static void seccomp_api_setup(void)
{
        if (seccomp_api_get() < 3)
                seccomp_api_set(3);
}

Suite *seccomp_suite(void)
{
        Suite *s = suite_create("seccomp");
        TCase *tc = unit_tcase(s, "seccomp_compile");
        tcase_add_unchecked_fixture(tc, seccomp_api_setup, NULL);
        unit_add(tc, test_default_policy_compiles_to_a_small_filter);
        unit_add(tc, test_default_text_gives_the_filter_of_an_empty_policy);
        unit_add(tc, test_policy_without_rules_compiles);
        unit_add(tc, test_policy_without_seccomp_section_compiles);
        unit_add(tc, test_deny_by_default_policy_compiles);
        unit_add(tc, test_more_rules_give_a_longer_filter);
        unit_add(tc, test_release_leaves_no_filter);
        return s;
}
