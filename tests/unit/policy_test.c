/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy files (nsbox-policy(5)): the shipped default, every refusal a user can meet with its
 * one-line message, the values a policy can set, and how a policy is found by name. */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/policy.h"
#include "../../runtime/util.h"
#include "unit.h"

/* A failed call must not write its result: tests set the result to this first and check it. */
#define SENTINEL ((nsbox_policy *)(uintptr_t)0x5e5e5e5e)

static int load_default(nsbox_policy **p, nsbox_error *err)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/policy/default.json", unit_src());
        return nsbox_policy_load(path, p, err);
}

static int parse(const char *json, const char *source, nsbox_policy **p, nsbox_error *err)
{
        *p = SENTINEL;
        return nsbox_policy_parse(json, strlen(json), source, p, err);
}

/* Parsing JSON fails, leaves the result alone, and says, on one line, the source and every needle. */
#define ASSERT_REFUSED(json, ...)                                                        \
        do {                                                                             \
                nsbox_error _err = { 0 };                                                \
                nsbox_policy *_p;                                                        \
                int _r = parse((json), "test.json", &_p, &_err);                        \
                if (_r == 0 || _p != SENTINEL) {                                         \
                        if (_r == 0 && _p != SENTINEL)                                   \
                                nsbox_policy_free(_p);                                   \
                        nsbox_error_clear(&_err);                                        \
                }                                                                        \
                ck_assert_msg(_r < 0, "policy was accepted: %s", (json));               \
                ck_assert_msg(_p == SENTINEL, "the result was written on failure");     \
                UNIT_ASSERT_ERROR(&_err, "test.json", __VA_ARGS__);                      \
        } while (0)

/* Parsing JSON succeeds; the policy is left in *p for the test to check and free. */
#define ASSERT_PARSES(json, p)                                                           \
        do {                                                                             \
                nsbox_error _err = { 0 };                                                \
                UNIT_ASSERT_OK(parse((json), "test.json", (p), &_err), &_err);           \
        } while (0)

/* The shipped default policy, in *p for the test to check and free. */
#define LOAD_DEFAULT(p)                                                                  \
        do {                                                                             \
                nsbox_error _err = { 0 };                                                \
                UNIT_ASSERT_OK(load_default((p), &_err), &_err);                         \
        } while (0)

/* ---- the shipped default policy ---- */

START_TEST(test_default_policy_loads)
{
        nsbox_policy *p = SENTINEL;
        LOAD_DEFAULT(&p);
        ck_assert_ptr_ne(p, SENTINEL);
        UNIT_ASSERT_CONTAINS(p->source, "policy/default.json");
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_default_policy_runs_as_user_1000)
{
        nsbox_policy *p = NULL;
        LOAD_DEFAULT(&p);
        ck_assert_uint_eq(p->uid, 1000);
        ck_assert_uint_eq(p->gid, 1000);
        ck_assert_str_eq(p->user_name, "user");
        ck_assert_str_eq(p->home, "/workspace");
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_default_policy_works_in_workspace)
{
        nsbox_policy *p = NULL;
        LOAD_DEFAULT(&p);
        ck_assert_str_eq(p->workdir, "/workspace");
        ck_assert_str_eq(p->hostname, "nsbox");
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_default_policy_shows_host_root_readonly)
{
        nsbox_policy *p = NULL;
        LOAD_DEFAULT(&p);
        ck_assert_int_eq(p->root, ROOT_HOST);
        ck_assert(p->root_readonly);
        ck_assert(p->python_venv);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bind_idmap_false_is_kept_and_refused_for_tmpfs)
{
        nsbox_policy *p = NULL;
        ASSERT_PARSES("{\"mounts\": [{\"source\": \"/tmp\", \"target\": \"/t\", \"idmap\": false}]}", &p);
        ck_assert(p->mounts[0].no_idmap);
        nsbox_policy_free(p);
        ASSERT_REFUSED("{\"mounts\": [{\"type\": \"tmpfs\", \"target\": \"/t\", \"idmap\": false}]}", "mounts[0]", "'idmap'");
}
END_TEST

START_TEST(test_python_venv_can_be_turned_off)
{
        nsbox_policy *p = NULL;
        ASSERT_PARSES("{\"root\": {\"python_venv\": false}}", &p);
        ck_assert(!p->python_venv);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_default_policy_has_no_network_and_no_capabilities)
{
        nsbox_policy *p = NULL;
        LOAD_DEFAULT(&p);
        ck_assert_int_eq(p->net, NET_NONE);
        ck_assert_uint_eq(p->caps, 0);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_default_policy_has_seccomp_rules)
{
        nsbox_policy *p = NULL;
        LOAD_DEFAULT(&p);
        ck_assert_uint_gt(p->n_sc_rules, 0);
        for (size_t i = 0; i < p->n_sc_rules; i++)
                ck_assert_ptr_nonnull(p->sc_rules[i].syscalls);
        ck_assert(p->sc_socket_restricted);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_missing_policy_file_names_path)
{
        nsbox_error err = { 0 };
        nsbox_policy *p = SENTINEL;
        ck_assert_int_lt(nsbox_policy_load("/nonexistent-nsbox-unit/x.json", &p, &err), 0);
        ck_assert_ptr_eq(p, SENTINEL);
        UNIT_ASSERT_ERROR(&err, "'/nonexistent-nsbox-unit/x.json'");
}
END_TEST

/* ---- refusals ---- */

START_TEST(test_unknown_key_names_file_and_key)
{
        nsbox_error err = { 0 };
        nsbox_policy *p;
        ck_assert_int_lt(parse("{\"hostnme\": \"x\"}", "typo.json", &p, &err), 0);
        ck_assert_ptr_eq(p, SENTINEL);
        UNIT_ASSERT_ERROR(&err, "policy 'typo.json'", "key 'hostnme'", "unknown key");
}
END_TEST

START_TEST(test_unknown_nested_key_names_full_path)
{
        ASSERT_REFUSED("{\"limits\": {\"memroy\": \"1G\"}}", "'limits.memroy'", "unknown key");
}
END_TEST

START_TEST(test_unknown_key_in_seccomp_arg_names_full_path)
{
        ASSERT_REFUSED("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"clone\"], \"args\": "
                       "[{\"index\": 0, \"op\": \"eq\", \"value\": 1, \"vlaue\": 2}]}]}}",
                       "seccomp.rules[0].args[0].vlaue");
}
END_TEST

START_TEST(test_uid_as_string_is_refused)
{
        ASSERT_REFUSED("{\"user\": {\"uid\": \"1000\"}}", "user.uid");
}
END_TEST

START_TEST(test_readonly_as_number_is_refused)
{
        ASSERT_REFUSED("{\"root\": {\"readonly\": 1}}", "root.readonly", "true or false");
}
END_TEST

START_TEST(test_uid_above_65534_is_refused)
{
        ASSERT_REFUSED("{\"user\": {\"uid\": 70000}}", "user.uid");
}
END_TEST

START_TEST(test_zero_cpus_is_refused)
{
        ASSERT_REFUSED("{\"limits\": {\"cpus\": 0}}", "limits.cpus");
}
END_TEST

START_TEST(test_nofile_below_16_is_refused)
{
        ASSERT_REFUSED("{\"limits\": {\"nofile\": 5}}", "limits.nofile");
}
END_TEST

START_TEST(test_bad_size_is_refused)
{
        ASSERT_REFUSED("{\"limits\": {\"memory\": \"lots\"}}", "limits.memory");
}
END_TEST

START_TEST(test_bad_user_name_is_refused)
{
        ASSERT_REFUSED("{\"user\": {\"name\": \"Root!\"}}", "user.name", "Root!");
}
END_TEST

START_TEST(test_bad_hostname_is_refused)
{
        ASSERT_REFUSED("{\"hostname\": \"bad!\"}", "'hostname'", "bad!");
}
END_TEST

START_TEST(test_relative_workdir_is_refused)
{
        ASSERT_REFUSED("{\"workdir\": \"work\"}", "'workdir'");
}
END_TEST

START_TEST(test_root_workdir_is_refused)
{
        ASSERT_REFUSED("{\"workdir\": \"/\"}", "'workdir'");
}
END_TEST

START_TEST(test_workdir_with_dotdot_is_refused)
{
        ASSERT_REFUSED("{\"workdir\": \"/a/../b\"}", "'workdir'");
}
END_TEST

START_TEST(test_dir_root_without_path_is_refused)
{
        ASSERT_REFUSED("{\"root\": {\"type\": \"dir\"}}", "root.path");
}
END_TEST

START_TEST(test_bad_network_mode_is_refused)
{
        ASSERT_REFUSED("{\"network\": {\"mode\": \"bridge\"}}", "network.mode", "bridge");
}
END_TEST

START_TEST(test_bad_network_entries_are_refused)
{
        ASSERT_REFUSED("{\"network\": {\"mode\": \"nat\", \"egress\": [\"10.0.0.0/8\", \"10.0.0.0/33\"]}}",
                       "network.egress[1]", "10.0.0.0/33", "prefix /33 is out of range");
        ASSERT_REFUSED("{\"network\": {\"egress\": [\"300.1.2.3:80\"]}}", "network.egress[0]", "not an IPv4 or IPv6 address");
        ASSERT_REFUSED("{\"network\": {\"egress\": [\"10.0.0.1:65536\"]}}", "port 65536 is out of range");
        ASSERT_REFUSED("{\"network\": {\"egress\": [\"10.0.0.1:90-80\"]}}", "range 90-80 is empty");
        ASSERT_REFUSED("{\"network\": {\"egress\": [\"[fd00::1]80\"]}}", "expected [IPV6ADDRESS]:PORT");
        ASSERT_REFUSED("{\"network\": {\"egress\": [\"fd00::/129\"]}}", "prefix /129 is out of range for IPv6");
        ASSERT_REFUSED("{\"network\": {\"egress\": [\"bad_name.example\"]}}", "not an IPv4 or IPv6 address or a host name");
        ASSERT_REFUSED("{\"network\": {\"egress\": \"10.0.0.0/8\"}}", "network.egress", "expected an array");
        ASSERT_REFUSED("{\"network\": {\"egress\": [8]}}", "network.egress[0]", "expected a string");
        ASSERT_REFUSED("{\"network\": {\"publish\": [\"8080:0\"]}}", "network.publish[0]", "port 0 is out of range");
        ASSERT_REFUSED("{\"network\": {\"publish\": [\"8080:80\", \"8080:81\"]}}", "network.publish[1]", "published twice");
        ASSERT_REFUSED("{\"network\": {\"publish\": [\"0.0.0.0:8080:80\"]}}", "only host loopback ports");
        ASSERT_REFUSED("{\"network\": {\"dns\": \"yes\"}}", "network.dns", "true or false");
        ASSERT_REFUSED("{\"network\": {\"host_loopback\": 1}}", "network.host_loopback", "true or false");
        ASSERT_REFUSED("{\"network\": {\"backend\": \"pasta\"}}", "network.backend", "'pasta' is not 'slirp4netns' or 'veth'");
}
END_TEST

START_TEST(test_network_entries_are_kept)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"network\": {\"mode\": \"nat\", \"egress\": [\"10.1.2.3/8:443\", \"tcp:[2001:db8::1]:22-23\", "
                      "\"udp:pypi.org:53\"], \"dns\": false, \"host_loopback\": true, \"publish\": [\"127.0.0.1:8080:80\", \"9000\"]}}",
                      &p);
        ck_assert_int_eq(p->net, NET_NAT);
        ck_assert_int_eq(p->net_backend, NET_BACKEND_SLIRP4NETNS);
        ck_assert(p->egress_set);
        ck_assert_str_eq(p->egress[0], "10.1.2.3/8:443");
        ck_assert_str_eq(p->egress[2], "udp:pypi.org:53");
        ck_assert_ptr_null(p->egress[3]);
        ck_assert(!p->dns);
        ck_assert(p->host_loopback);
        ck_assert_uint_eq(p->n_publish, 2);
        ck_assert_uint_eq(p->publish[0].host_port, 8080);
        ck_assert_uint_eq(p->publish[0].port, 80);
        ck_assert_uint_eq(p->publish[1].host_port, 9000);
        ck_assert_uint_eq(p->publish[1].port, 9000);
        nsbox_policy_free(p);
        /* an empty list is a list: default deny */
        ASSERT_PARSES("{\"network\": {\"mode\": \"nat\", \"backend\": \"veth\", \"egress\": []}}", &p);
        ck_assert_int_eq(p->net_backend, NET_BACKEND_VETH);
        ck_assert(p->egress_set);
        ck_assert(p->dns);
        ck_assert(!p->host_loopback);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bad_capability_name_is_refused)
{
        ASSERT_REFUSED("{\"capabilities\": [\"CAP_NOPE\"]}", "capabilities[0]");
}
END_TEST

START_TEST(test_unknown_syscall_is_refused)
{
        ASSERT_REFUSED("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"nosuchcall\"]}]}}", "seccomp.rules[0]",
                       "nosuchcall");
}
END_TEST

START_TEST(test_bad_errno_name_is_refused)
{
        ASSERT_REFUSED("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"mount\"], \"errno\": \"EWHAT\"}]}}",
                       "seccomp.rules[0]", "errno");
}
END_TEST

START_TEST(test_masked_eq_without_mask_is_refused)
{
        ASSERT_REFUSED("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"clone\"], \"args\": "
                       "[{\"index\": 0, \"op\": \"masked_eq\", \"value\": \"CLONE_NEWUSER\"}]}]}}",
                       "seccomp.rules[0].args[0]", "mask");
}
END_TEST

START_TEST(test_mask_with_eq_is_refused)
{
        ASSERT_REFUSED("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"clone\"], \"args\": "
                       "[{\"index\": 0, \"op\": \"eq\", \"value\": 1, \"mask\": 1}]}]}}",
                       "seccomp.rules[0].args[0]", "mask");
}
END_TEST

START_TEST(test_same_argument_compared_twice_is_refused)
{
        ASSERT_REFUSED("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"personality\"], \"args\": "
                       "[{\"index\": 0, \"op\": \"gt\", \"value\": 1}, {\"index\": 0, \"op\": \"lt\", \"value\": 9}]}]}}",
                       "seccomp.rules[0].args[1]", "twice");
}
END_TEST

START_TEST(test_argument_index_6_is_refused)
{
        ASSERT_REFUSED("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"clone\"], \"args\": "
                       "[{\"index\": 6, \"op\": \"eq\", \"value\": 1}]}]}}",
                       "seccomp.rules[0].args[0]");
}
END_TEST

START_TEST(test_invalid_json_names_line_and_column)
{
        ASSERT_REFUSED("{\n  \"hostname\": \"a\",\n  \"workdir\": \n}", "line 4", "column");
}
END_TEST

START_TEST(test_duplicate_key_is_refused)
{
        ASSERT_REFUSED("{\"hostname\": \"a\", \"hostname\": \"b\"}", "duplicate");
}
END_TEST

START_TEST(test_string_with_nul_is_refused)
{
        ASSERT_REFUSED("{\"hostname\": \"a\\u0000b\"}", "line 1");
}
END_TEST

START_TEST(test_mount_with_relative_source_is_refused)
{
        ASSERT_REFUSED("{\"mounts\": [{\"source\": \"tmp\", \"target\": \"/data\"}]}", "mounts[0]", "source");
}
END_TEST

START_TEST(test_mount_under_proc_is_refused)
{
        ASSERT_REFUSED("{\"mounts\": [{\"type\": \"tmpfs\", \"target\": \"/proc/sys\"}]}", "mounts[0]", "/proc/sys",
                       "reserved");
}
END_TEST

START_TEST(test_mount_on_root_is_refused)
{
        ASSERT_REFUSED("{\"mounts\": [{\"type\": \"tmpfs\", \"target\": \"//\"}]}", "mounts[0]", "reserved");
}
END_TEST

START_TEST(test_bind_of_missing_path_names_it)
{
        ASSERT_REFUSED("{\"mounts\": [{\"source\": \"/nonexistent-nsbox-unit\", \"target\": \"/data\"}]}", "mounts[0]",
                       "/nonexistent-nsbox-unit");
}
END_TEST

START_TEST(test_mount_field_of_wrong_type_names_full_key)
{
        ASSERT_REFUSED("{\"mounts\": [{\"source\": 1, \"target\": \"/data\"}]}", "mounts[0].source");
}
END_TEST

START_TEST(test_error_for_key_with_newline_is_one_line)
{
        ASSERT_REFUSED("{\"limits\": {\"mem\\nory\": 1}}", "limits.mem");
}
END_TEST

START_TEST(test_error_for_value_with_newline_is_one_line)
{
        ASSERT_REFUSED("{\"hostname\": \"a\\nb\"}", "'hostname'");
}
END_TEST

START_TEST(test_bad_env_name_is_refused)
{
        ASSERT_REFUSED("{\"env\": {\"1BAD\": \"x\"}}", "env.1BAD");
}
END_TEST

START_TEST(test_unknown_socket_family_is_refused)
{
        ASSERT_REFUSED("{\"seccomp\": {\"socket_families\": [\"AF_NOPE\"]}}", "seccomp.socket_families");
}
END_TEST

/* ---- values a policy sets ---- */

START_TEST(test_empty_policy_gets_defaults)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"inherit\": false}", &p);
        ck_assert_str_eq(p->source, "test.json");
        ck_assert_uint_eq(p->uid, 1000);
        ck_assert_str_eq(p->workdir, "/workspace");
        ck_assert_str_eq(p->hostname, "nsbox");
        ck_assert(!p->sc_socket_restricted);
        ck_assert_uint_eq(p->n_mounts, 0);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_sizes_accept_suffixes_and_bytes)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"limits\": {\"memory\": \"64M\", \"disk\": 1048576, \"fsize\": \"1.5K\"}}", &p);
        ck_assert_uint_eq(p->limits.memory, 64ull << 20);
        ck_assert_uint_eq(p->limits.disk, 1048576);
        ck_assert_uint_eq(p->limits.fsize, 1536);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_timeout_is_in_seconds)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"limits\": {\"timeout\": 2.5}}", &p);
        ck_assert_uint_eq(p->limits.timeout_ms, 2500);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_env_object_sets_variables)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"inherit\": false, \"env\": {\"FOO\": \"bar\", \"EMPTY\": \"\"}}", &p);
        ck_assert_ptr_nonnull(p->env);
        ck_assert_str_eq(p->env[0], "FOO=bar");
        ck_assert_str_eq(p->env[1], "EMPTY=");
        ck_assert_ptr_null(p->env[2]);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_capability_name_sets_its_bit)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"capabilities\": [\"CAP_NET_BIND_SERVICE\"]}", &p);
        ck_assert_uint_eq(p->caps, 1ull << 10);
        nsbox_policy_free(p);
}
END_TEST

/* uid 0 is a container's root: Docker's default set, unless the policy names its own */
START_TEST(test_root_user_gets_container_caps_unless_named)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"user\": {\"uid\": 0, \"gid\": 0, \"name\": \"root\"}}", &p);
        ck_assert_uint_eq(p->caps, 0xa80425fbull);
        ck_assert_uint_eq(p->caps, nsbox_container_caps);
        nsbox_policy_free(p);
        ASSERT_PARSES("{\"user\": {\"uid\": 0, \"gid\": 0, \"name\": \"root\"}, \"capabilities\": []}", &p);
        ck_assert_uint_eq(p->caps, 0);
        nsbox_policy_free(p);
        ASSERT_PARSES("{\"user\": {\"uid\": 0, \"gid\": 0, \"name\": \"root\"}, \"capabilities\": [\"CAP_KILL\"]}", &p);
        ck_assert_uint_eq(p->caps, 1ull << 5);
        nsbox_policy_free(p);
        ASSERT_PARSES("{\"user\": {\"uid\": 1000, \"gid\": 0, \"name\": \"u\"}}", &p);
        ck_assert_uint_eq(p->caps, 0);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_socket_families_restrict_socket)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"seccomp\": {\"socket_families\": [\"AF_UNIX\", \"AF_INET\"]}}", &p);
        ck_assert(p->sc_socket_restricted);
        ck_assert_uint_eq(p->sc_socket_families, (1ull << 1) | (1ull << 2));
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bind_mount_is_readonly_and_resolved)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"mounts\": [{\"source\": \"/tmp/\", \"target\": \"//data/./x/\"}]}", &p);
        ck_assert_uint_eq(p->n_mounts, 1);
        char *real = realpath("/tmp", NULL);
        ck_assert_str_eq(p->mounts[0].source, real);
        free(real);
        ck_assert_str_eq(p->mounts[0].target, "/data/x");
        ck_assert_int_eq(p->mounts[0].type, MOUNT_BIND);
        ck_assert(p->mounts[0].readonly);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_seccomp_rule_args_are_kept)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"clone\"], \"action\": \"errno\", \"errno\": \"EPERM\", "
                      "\"args\": [{\"index\": 0, \"op\": \"masked_eq\", \"mask\": \"CLONE_NEWUSER\", \"value\": "
                      "\"CLONE_NEWUSER\"}]}]}}",
                      &p);
        ck_assert_uint_eq(p->n_sc_rules, 1);
        ck_assert_uint_eq(p->sc_rules[0].n_syscalls, 1);
        ck_assert_uint_eq(p->sc_rules[0].n_args, 1);
        ck_assert_int_eq(p->sc_rules[0].args[0].op, SC_OP_MASKED_EQ);
        ck_assert_uint_eq(p->sc_rules[0].args[0].mask, 0x10000000);
        ck_assert_uint_eq(p->sc_rules[0].args[0].value, 0x10000000);
        nsbox_policy_free(p);
}
END_TEST

/* ---- inheritance from the built-in default (nsbox-policy(5), INHERITANCE) ---- */

/* The variable NAME=... of p's environment, or NULL. */
static const char *env_of(const nsbox_policy *p, const char *name)
{
        size_t n = strlen(name);
        for (char **e = p->env; e && *e; e++)
                if (!strncmp(*e, name, n) && (*e)[n] == '=')
                        return *e + n + 1;
        return NULL;
}

START_TEST(test_builtin_default_is_the_shipped_default_json)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/policy/default.json", unit_src());
        char *text = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file_at(AT_FDCWD, path, 0, NSBOX_MAX_POLICY_BYTES, &text, &len), 0);
        ck_assert_uint_eq(strlen(nsbox_default_policy_json), len);
        ck_assert(memcmp(nsbox_default_policy_json, text, len) == 0);
        free(text);
}
END_TEST

START_TEST(test_empty_policy_is_the_default_policy)
{
        nsbox_policy *d = NULL, *p;
        LOAD_DEFAULT(&d);
        ASSERT_PARSES("{}", &p);
        ck_assert_uint_eq(p->n_sc_rules, d->n_sc_rules);
        ck_assert(p->sc_socket_restricted);
        ck_assert_uint_eq(p->sc_socket_families, d->sc_socket_families);
        ck_assert_uint_eq(p->limits.disk, 1ull << 30);
        ck_assert_uint_eq(p->limits.nofile, 1024);
        ck_assert_str_eq(env_of(p, "LANG"), "C.UTF-8");
        ck_assert_str_eq(p->user_name, "user");
        ck_assert_int_eq(p->net, NET_NONE);
        nsbox_policy_free(p);
        nsbox_policy_free(d);
}
END_TEST

START_TEST(test_short_policy_keeps_the_default_seccomp_filter)
{
        nsbox_policy *d = NULL, *p;
        LOAD_DEFAULT(&d);
        ASSERT_PARSES("{\"limits\": {\"timeout\": 300}}", &p);
        ck_assert_uint_eq(p->limits.timeout_ms, 300000);
        ck_assert_uint_gt(d->n_sc_rules, 0);
        ck_assert_uint_eq(p->n_sc_rules, d->n_sc_rules);
        for (size_t i = 0; i < p->n_sc_rules; i++) {
                ck_assert_uint_eq(p->sc_rules[i].n_syscalls, d->sc_rules[i].n_syscalls);
                ck_assert(memcmp(p->sc_rules[i].syscalls, d->sc_rules[i].syscalls, p->sc_rules[i].n_syscalls * sizeof(int)) == 0);
        }
        ck_assert(p->sc_socket_restricted);
        ck_assert_int_eq(p->sc_foreign_arch, SC_KILL);
        /* and the rest of limits too */
        ck_assert_uint_eq(p->limits.disk, 1ull << 30);
        ck_assert_uint_eq(p->limits.nofile, 1024);
        nsbox_policy_free(p);
        nsbox_policy_free(d);
}
END_TEST

START_TEST(test_objects_merge_key_by_key)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"user\": {\"name\": \"agent\", \"uid\": 2000}, \"limits\": {\"memory\": \"64M\"}, "
                      "\"env\": {\"FOO\": \"bar\", \"LANG\": \"C\"}, \"seccomp\": {\"foreign_arch\": \"errno\"}}",
                      &p);
        ck_assert_str_eq(p->user_name, "agent");
        ck_assert_uint_eq(p->uid, 2000);
        ck_assert_uint_eq(p->gid, 1000); /* the default's */
        ck_assert_str_eq(p->home, "/workspace");
        ck_assert_uint_eq(p->limits.memory, 64ull << 20);
        ck_assert_uint_eq(p->limits.nofile, 1024);
        ck_assert_str_eq(env_of(p, "FOO"), "bar");
        ck_assert_str_eq(env_of(p, "LANG"), "C");
        ck_assert_str_eq(env_of(p, "TERM"), "xterm");
        ck_assert_int_eq(p->sc_foreign_arch, SC_ERRNO);
        ck_assert_uint_gt(p->n_sc_rules, 1);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_arrays_and_scalars_replace_whole)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"seccomp\": {\"rules\": [{\"syscalls\": [\"mount\"]}]}, \"hostname\": \"box\"}", &p);
        ck_assert_uint_eq(p->n_sc_rules, 1); /* an explicit list: the policy's own, not appended */
        ck_assert(p->sc_socket_restricted);  /* the rest of seccomp is still the default's */
        ck_assert_str_eq(p->hostname, "box");
        nsbox_policy_free(p);
        ASSERT_PARSES("{\"seccomp\": {\"socket_families\": [\"AF_UNIX\"]}}", &p);
        ck_assert_uint_eq(p->sc_socket_families, 1ull << 1);
        ck_assert_uint_gt(p->n_sc_rules, 1);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_null_removes_an_inherited_key)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"seccomp\": null}", &p);
        ck_assert_uint_eq(p->n_sc_rules, 0);
        ck_assert(!p->sc_socket_restricted);
        ck_assert_uint_eq(p->limits.nofile, 1024);
        nsbox_policy_free(p);
        ASSERT_PARSES("{\"limits\": {\"nofile\": null}, \"env\": {\"LANG\": null}, "
                      "\"network\": {\"mode\": \"nat\", \"egress\": null}}",
                      &p);
        ck_assert_uint_eq(p->limits.nofile, 0);
        ck_assert_uint_eq(p->limits.disk, 1ull << 30);
        ck_assert_ptr_null(env_of(p, "LANG"));
        ck_assert_str_eq(env_of(p, "TERM"), "xterm");
        ck_assert(!p->egress_set);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_inherit_false_stands_alone)
{
        nsbox_policy *p;
        ASSERT_PARSES("{\"inherit\": false, \"limits\": {\"timeout\": 300}, \"hostname\": null}", &p);
        ck_assert_uint_eq(p->limits.timeout_ms, 300000);
        ck_assert_uint_eq(p->n_sc_rules, 0);
        ck_assert(!p->sc_socket_restricted);
        ck_assert_uint_eq(p->limits.nofile, 0);
        ck_assert_ptr_null(p->env);
        ck_assert_str_eq(p->hostname, "nsbox");
        nsbox_policy_free(p);
        ASSERT_PARSES("{\"inherit\": true}", &p);
        ck_assert_uint_gt(p->n_sc_rules, 0);
        nsbox_policy_free(p);
}
END_TEST

START_TEST(test_bad_inherit_is_refused)
{
        ASSERT_REFUSED("{\"inherit\": \"no\"}", "'inherit'", "true or false");
        ASSERT_REFUSED("{\"inherit\": null}", "'inherit'", "true or false");
        ASSERT_REFUSED("{\"inherits\": false}", "'inherits'", "unknown key");
        ASSERT_REFUSED("{\"limits\": {\"inherit\": false}}", "'limits.inherit'", "unknown key");
        /* a value the policy gives is checked after the merge, under its full key */
        ASSERT_REFUSED("{\"seccomp\": {\"default_errno\": \"EACCES\"}}", "seccomp.default_errno", "default_action 'errno'");
}
END_TEST

/* ---- policy names, and policies read strictly ---- */

START_TEST(test_policy_names_follow_the_grammar)
{
        static const char *const good[] = { "default", "strict", "py3.11", "a_b-c", "_x", "A1", "x.jsonx" };
        static const char *const bad[] = { "", ".hidden", "-x", "x.json", "rt-evil.json", "../x", "a/b", "..", "a b",
                                           "x;y", "x\n", "\xc3\xa9" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                ck_assert_msg(nsbox_policy_name_valid(good[i]), "'%s' was refused", good[i]);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(!nsbox_policy_name_valid(bad[i]), "'%s' was accepted", bad[i]);
        char longest[66];
        memset(longest, 'a', 65);
        longest[65] = '\0';
        ck_assert(!nsbox_policy_name_valid(longest));
        longest[64] = '\0';
        ck_assert(nsbox_policy_name_valid(longest));
}
END_TEST

/* A scratch directory for the file tests: created, and removed with what is in it. */
static char scratch[] = "/tmp/nsbox-unit-policy.XXXXXX";
static void scratch_setup(void)
{
        strcpy(scratch, "/tmp/nsbox-unit-policy.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(scratch));
}
static void scratch_teardown(void)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
        ck_assert_int_eq(system(cmd), 0);
}

/* nsbox_policy_load(path) fails at once, leaves its result alone, and says each needle in one line. */
#define ASSERT_LOAD_REFUSED(path, ...)                                                   \
        do {                                                                             \
                nsbox_error _err = { 0 };                                                \
                nsbox_policy *_p = SENTINEL;                                             \
                int _r = nsbox_policy_load((path), &_p, &_err);                          \
                if (_r == 0)                                                             \
                        nsbox_policy_free(_p);                                           \
                ck_assert_msg(_r < 0, "'%s' was loaded", (path));                       \
                ck_assert_ptr_eq(_p, SENTINEL);                                          \
                UNIT_ASSERT_ERROR(&_err, __VA_ARGS__);                                   \
        } while (0)

START_TEST(test_fifo_policy_is_refused_at_once)
{
        /* no writer ever opens it: a blocking open would hang here until check's timeout */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/x.json", scratch);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        ASSERT_LOAD_REFUSED(path, "policy '", "x.json'", "a FIFO, not a regular file");
}
END_TEST

START_TEST(test_directory_and_device_policies_are_refused)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/d.json", scratch);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        ASSERT_LOAD_REFUSED(path, "d.json'", "a directory, not a regular file");
        ASSERT_LOAD_REFUSED("/dev/zero", "policy '/dev/zero'", "a character device, not a regular file");
        /* a symbolic link is followed (policy directories hold links), to the same refusal */
        snprintf(path, sizeof(path), "%s/zero.json", scratch);
        ck_assert_int_eq(symlink("/dev/zero", path), 0);
        ASSERT_LOAD_REFUSED(path, "zero.json'", "a character device");
}
END_TEST

START_TEST(test_oversized_policy_is_refused)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/big.json", scratch);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(ftruncate(fileno(f), NSBOX_MAX_POLICY_BYTES + 1), 0);
        fclose(f);
        ASSERT_LOAD_REFUSED(path, "big.json'", "larger than 1048576 bytes");
        /* at the limit it is read (and refused as JSON: NUL bytes) */
        ck_assert_int_eq(truncate(path, NSBOX_MAX_POLICY_BYTES), 0);
        ASSERT_LOAD_REFUSED(path, "big.json'", "line 1");
}
END_TEST

/* ---- finding a policy ---- */

START_TEST(test_find_path_with_slash_is_returned_as_is)
{
        nsbox_error err = { 0 };
        char *path = NULL;
        UNIT_ASSERT_OK(nsbox_policy_find("dir/mine", &path, &err), &err);
        ck_assert_str_eq(path, "dir/mine");
        free(path);
}
END_TEST

START_TEST(test_find_name_ending_in_json_is_returned_as_is)
{
        nsbox_error err = { 0 };
        char *path = NULL;
        UNIT_ASSERT_OK(nsbox_policy_find("mine.json", &path, &err), &err);
        ck_assert_str_eq(path, "mine.json");
        free(path);
}
END_TEST

START_TEST(test_find_invalid_name_is_refused)
{
        static const char *const names[] = { "..", ".hidden", "a b", "x;y", "" };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                nsbox_error err = { 0 };
                char *path = (char *)SENTINEL;
                int r = nsbox_policy_find(names[i], &path, &err);
                if (r == 0) {
                        free(path);
                        nsbox_error_clear(&err);
                }
                ck_assert_msg(r < 0, "'%s' was accepted", names[i]);
                ck_assert_ptr_eq(path, (char *)SENTINEL);
                UNIT_ASSERT_ERROR(&err, "not valid");
        }
}
END_TEST

START_TEST(test_find_uses_NSBOX_POLICY_PATH)
{
        char dir[] = "/tmp/nsbox-unit.XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char file[sizeof(dir) + 16];
        snprintf(file, sizeof(file), "%s/foo.json", dir);
        FILE *f = fopen(file, "w");
        ck_assert_ptr_nonnull(f);
        fputs("{}\n", f);
        fclose(f);
        char *old = getenv("NSBOX_POLICY_PATH") ? strdup(getenv("NSBOX_POLICY_PATH")) : NULL;
        char search[sizeof(dir) + 32];
        snprintf(search, sizeof(search), "/nonexistent-nsbox-unit:%s", dir);
        setenv("NSBOX_POLICY_PATH", search, 1);

        nsbox_error err = { 0 };
        char *path = NULL;
        int r = nsbox_policy_find("foo", &path, &err);

        if (old)
                setenv("NSBOX_POLICY_PATH", old, 1);
        else
                unsetenv("NSBOX_POLICY_PATH");
        free(old);
        unlink(file);
        rmdir(dir);
        UNIT_ASSERT_OK(r, &err);
        ck_assert_str_eq(path, file);
        free(path);
}
END_TEST

START_TEST(test_find_missing_name_mentions_it)
{
        nsbox_error err = { 0 };
        char *path = (char *)SENTINEL;
        ck_assert_int_lt(nsbox_policy_find("nsbox-unit-no-such-policy", &path, &err), 0);
        ck_assert_ptr_eq(path, (char *)SENTINEL);
        UNIT_ASSERT_ERROR(&err, "'nsbox-unit-no-such-policy' not found");
}
END_TEST

Suite *policy_suite(void)
{
        Suite *s = suite_create("policy");
        TCase *tc = unit_tcase(s, "default_policy");
        unit_add(tc, test_default_policy_loads);
        unit_add(tc, test_default_policy_runs_as_user_1000);
        unit_add(tc, test_default_policy_works_in_workspace);
        unit_add(tc, test_default_policy_shows_host_root_readonly);
        unit_add(tc, test_python_venv_can_be_turned_off);
        unit_add(tc, test_bind_idmap_false_is_kept_and_refused_for_tmpfs);
        unit_add(tc, test_default_policy_has_no_network_and_no_capabilities);
        unit_add(tc, test_default_policy_has_seccomp_rules);
        unit_add(tc, test_missing_policy_file_names_path);

        tc = unit_tcase(s, "policy_errors");
        unit_add(tc, test_unknown_key_names_file_and_key);
        unit_add(tc, test_unknown_nested_key_names_full_path);
        unit_add(tc, test_unknown_key_in_seccomp_arg_names_full_path);
        unit_add(tc, test_uid_as_string_is_refused);
        unit_add(tc, test_readonly_as_number_is_refused);
        unit_add(tc, test_uid_above_65534_is_refused);
        unit_add(tc, test_zero_cpus_is_refused);
        unit_add(tc, test_nofile_below_16_is_refused);
        unit_add(tc, test_bad_size_is_refused);
        unit_add(tc, test_bad_user_name_is_refused);
        unit_add(tc, test_bad_hostname_is_refused);
        unit_add(tc, test_relative_workdir_is_refused);
        unit_add(tc, test_root_workdir_is_refused);
        unit_add(tc, test_workdir_with_dotdot_is_refused);
        unit_add(tc, test_dir_root_without_path_is_refused);
        unit_add(tc, test_bad_network_mode_is_refused);
        unit_add(tc, test_bad_network_entries_are_refused);
        unit_add(tc, test_network_entries_are_kept);
        unit_add(tc, test_bad_capability_name_is_refused);
        unit_add(tc, test_unknown_syscall_is_refused);
        unit_add(tc, test_bad_errno_name_is_refused);
        unit_add(tc, test_masked_eq_without_mask_is_refused);
        unit_add(tc, test_mask_with_eq_is_refused);
        unit_add(tc, test_same_argument_compared_twice_is_refused);
        unit_add(tc, test_argument_index_6_is_refused);
        unit_add(tc, test_invalid_json_names_line_and_column);
        unit_add(tc, test_duplicate_key_is_refused);
        unit_add(tc, test_string_with_nul_is_refused);
        unit_add(tc, test_mount_with_relative_source_is_refused);
        unit_add(tc, test_mount_under_proc_is_refused);
        unit_add(tc, test_mount_on_root_is_refused);
        unit_add(tc, test_bind_of_missing_path_names_it);
        unit_add(tc, test_mount_field_of_wrong_type_names_full_key);
        unit_add(tc, test_error_for_key_with_newline_is_one_line);
        unit_add(tc, test_error_for_value_with_newline_is_one_line);
        unit_add(tc, test_bad_env_name_is_refused);
        unit_add(tc, test_unknown_socket_family_is_refused);

        tc = unit_tcase(s, "policy_values");
        unit_add(tc, test_empty_policy_gets_defaults);
        unit_add(tc, test_sizes_accept_suffixes_and_bytes);
        unit_add(tc, test_timeout_is_in_seconds);
        unit_add(tc, test_env_object_sets_variables);
        unit_add(tc, test_capability_name_sets_its_bit);
        unit_add(tc, test_root_user_gets_container_caps_unless_named);
        unit_add(tc, test_socket_families_restrict_socket);
        unit_add(tc, test_bind_mount_is_readonly_and_resolved);
        unit_add(tc, test_seccomp_rule_args_are_kept);

        tc = unit_tcase(s, "policy_inherit");
        unit_add(tc, test_builtin_default_is_the_shipped_default_json);
        unit_add(tc, test_empty_policy_is_the_default_policy);
        unit_add(tc, test_short_policy_keeps_the_default_seccomp_filter);
        unit_add(tc, test_objects_merge_key_by_key);
        unit_add(tc, test_arrays_and_scalars_replace_whole);
        unit_add(tc, test_null_removes_an_inherited_key);
        unit_add(tc, test_inherit_false_stands_alone);
        unit_add(tc, test_bad_inherit_is_refused);

        tc = unit_tcase(s, "policy_files");
        tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
        unit_add(tc, test_policy_names_follow_the_grammar);
        unit_add(tc, test_fifo_policy_is_refused_at_once);
        unit_add(tc, test_directory_and_device_policies_are_refused);
        unit_add(tc, test_oversized_policy_is_refused);

        tc = unit_tcase(s, "policy_find");
        unit_add(tc, test_find_path_with_slash_is_returned_as_is);
        unit_add(tc, test_find_name_ending_in_json_is_returned_as_is);
        unit_add(tc, test_find_invalid_name_is_refused);
        unit_add(tc, test_find_uses_NSBOX_POLICY_PATH);
        unit_add(tc, test_find_missing_name_mentions_it);
        return s;
}
