/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The egress allow-list (nft.h) as a sandboxed program sees it.  Each test runs in a child inside a
 * fresh user and network namespace with lo up and a veth link v0 (10.77.0.1/24, fd77::1/64) whose
 * peer v1 has no address: no one answers there, so a TCP connect the rules allow stays in progress,
 * and one they refuse fails at once.  The child reports why it failed through a pipe. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/net.h"
#include "../../runtime/nft.h"
#include "../../runtime/util.h"
#include "unit.h"

#define ALLOWED_WAIT_MS 300  /* an allowed connect must still be waiting for an answer after this */
#define REFUSED_WAIT_MS 1000 /* a refused one must have failed within this */
#define UDP_WAIT_MS 100      /* for the ICMP error to come back to a datagram socket */

/* A child's check: on failure write why into msg and return false. */
typedef bool (*netns_story)(char *msg, size_t size);

#define EXPECT(cond, ...)                                  \
        do {                                               \
                if (!(cond)) {                             \
                        snprintf(msg, size, __VA_ARGS__);  \
                        return false;                      \
                }                                          \
        } while (0)

static const char *errname(int e)
{
        if (e == 0)
                return "success";
        const char *name = strerrorname_np(e);
        return name ? name : strerror(e);
}

static int write_proc(const char *path, const char *data)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        return fd < 0 ? -errno : write_full(fd, data, strlen(data));
}

/* Root of a new user namespace (works unprivileged as well as root) with a new network
 * namespace: lo up, and v0 <-> v1 up with v0's addresses. */
static bool enter_sandbox_netns(char *msg, size_t size)
{
        char map[64];
        uid_t uid = getuid();
        gid_t gid = getgid();
        EXPECT(unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0, "unshare user+net: %s", strerror(errno));
        snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
        EXPECT(write_proc("/proc/self/uid_map", map) == 0, "uid_map: %s", strerror(errno));
        EXPECT(write_proc("/proc/self/setgroups", "deny") == 0, "setgroups: %s", strerror(errno));
        snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
        EXPECT(write_proc("/proc/self/gid_map", map) == 0, "gid_map: %s", strerror(errno));
        nsbox_error err = { 0 };
        char why[256];
        int r = nsbox_net_loopback_up(&err);
        unit_take_error(&err, why, sizeof(why));
        EXPECT(r == 0, "%s", why);
        /* ip(8) rather than rtnetlink by hand: the unit binary does not link libnl-route */
        r = system("PATH=\"$PATH:/usr/sbin:/sbin\"; exec >/dev/null; "
                   "ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up && "
                   "ip addr add 10.77.0.1/24 dev v0 && ip -6 addr add fd77::1/64 dev v0 nodad");
        EXPECT(r == 0, "setting up veth v0/v1 with ip(8) failed (status %d)", r);
        return true;
}

/* Runs story in a child inside the namespaces; false with the child's message in msg if it failed. */
static bool run_in_sandbox_netns(netns_story story, char *msg, size_t size)
{
        int p[2];
        EXPECT(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                bool ok = enter_sandbox_netns(msg, size) && story(msg, size);
                (void)write_full(p[1], msg, ok ? 0 : strlen(msg));
                _exit(ok ? 0 : 1);
        }
        close(p[1]);
        ssize_t n = pid > 0 ? read_full(p[0], msg, size - 1) : 0;
        msg[n > 0 ? n : 0] = '\0';
        close(p[0]);
        int status = 0;
        EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or wait: %s", strerror(errno));
        if (!msg[0])
                snprintf(msg, size, "the child failed without a message");
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A test whose body, the story, runs in the child: on failure it writes why into msg and returns
 * false, and the test fails with that message under its own name. */
#define NETNS_TEST(name)                                                                \
        static bool name##_story(char *msg, size_t size);                               \
        START_TEST(name)                                                                \
        {                                                                               \
                char _msg[512] = "";                                                    \
                bool _ok = run_in_sandbox_netns(name##_story, _msg, sizeof(_msg));      \
                ck_assert_msg(_ok, "%s", _msg);                                         \
        }                                                                               \
        END_TEST                                                                        \
        static bool name##_story(char *msg, size_t size)

static nsbox_egress_rule allow(const char *addr, unsigned prefix, uint8_t proto, uint16_t port_lo, uint16_t port_hi)
{
        nsbox_egress_rule r = { .prefix = prefix, .proto = proto, .port_lo = port_lo, .port_hi = port_hi };
        r.family = strchr(addr, ':') ? AF_INET6 : AF_INET;
        if (inet_pton(r.family, addr, r.addr) != 1)
                r.family = -1; /* refused by validation */
        return r;
}

static bool install(char *msg, size_t size, const nsbox_egress_rule *rules, size_t n)
{
        nsbox_error err = { 0 };
        char why[512];
        int r = nsbox_nft_egress(rules, n, &err);
        unit_take_error(&err, why, sizeof(why));
        EXPECT(r == 0, "installing the egress rules failed (%d): %s", r, why);
        return true;
}

static socklen_t sockaddr_of(const char *addr, uint16_t port, struct sockaddr_storage *ss)
{
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        if (inet_pton(AF_INET, addr, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                in->sin_port = htons(port);
                return sizeof(*in);
        }
        if (inet_pton(AF_INET6, addr, &in6->sin6_addr) != 1)
                return 0;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        return sizeof(*in6);
}

/* A socket of type (SOCK_STREAM, SOCK_DGRAM, with flags) connecting to addr:port: the fd or -errno,
 * with connect()'s errno, or 0, in *ret_connect_errno. */
static int socket_to(const char *addr, uint16_t port, int type, int *ret_connect_errno)
{
        struct sockaddr_storage ss;
        socklen_t len = sockaddr_of(addr, port, &ss);
        if (!len)
                return -EINVAL;
        int fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        *ret_connect_errno = connect(fd, (struct sockaddr *)&ss, len) < 0 ? errno : 0;
        return fd;
}

/* What a program sees connecting without blocking to addr:port within wait_ms: 0 connected,
 * EINPROGRESS still waiting for an answer, else the errno of the failure. */
static int tcp_connect_outcome(const char *addr, uint16_t port, int wait_ms)
{
        int e = 0;
        _cleanup_close_ int fd = socket_to(addr, port, SOCK_STREAM | SOCK_NONBLOCK, &e);
        if (fd < 0)
                return -fd;
        if (e != EINPROGRESS)
                return e;
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int n = poll(&p, 1, wait_ms);
        if (n <= 0)
                return n < 0 ? errno : EINPROGRESS;
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        return getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ? errno : soerr;
}

/* What a program sees sending datagrams on a UDP socket connected to addr:port: the errno of the
 * first send, else of a second one UDP_WAIT_MS later (an ICMP error is reported on the next call),
 * else 0. */
static int udp_send_outcome(const char *addr, uint16_t port)
{
        int e = 0;
        _cleanup_close_ int fd = socket_to(addr, port, SOCK_DGRAM, &e);
        if (fd < 0)
                return -fd;
        if (e || send(fd, "x", 1, 0) < 0)
                return e ? e : errno;
        usleep(UDP_WAIT_MS * 1000);
        return send(fd, "x", 1, 0) < 0 ? errno : 0;
}

static bool expect_outcome(char *msg, size_t size, const char *what, const char *addr, uint16_t port, int got, int want)
{
        EXPECT(got == want, "%s to %s port %u: got %s, want %s", what, addr, port, errname(got), errname(want));
        return true;
}

static bool expect_tcp(char *msg, size_t size, const char *addr, uint16_t port, int want)
{
        int wait_ms = want == EINPROGRESS ? ALLOWED_WAIT_MS : REFUSED_WAIT_MS;
        return expect_outcome(msg, size, "tcp connect", addr, port, tcp_connect_outcome(addr, port, wait_ms), want);
}

static bool expect_udp(char *msg, size_t size, const char *addr, uint16_t port, int want)
{
        return expect_outcome(msg, size, "udp send", addr, port, udp_send_outcome(addr, port), want);
}

/* Loopback stays open whatever the list: connect to a listener in the namespace. */
static bool expect_loopback_open(char *msg, size_t size)
{
        _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof(a);
        EXPECT(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0 &&
                       getsockname(l, (struct sockaddr *)&a, &alen) == 0,
               "loopback listener: %s", strerror(errno));
        return expect_tcp(msg, size, "127.0.0.1", ntohs(a.sin_port), 0);
}

/* What the kernel answers: a refused TCP connect gets the reset (ECONNREFUSED, connect() itself
 * says EINPROGRESS); a refused datagram is dropped in the output hook, so send() itself fails with
 * EPERM (the next send() reports the ICMP error: EHOSTUNREACH, EACCES over IPv6). */
NETNS_TEST(test_egress_allows_the_listed_tcp_port_and_refuses_everything_else_at_once)
{
        const nsbox_egress_rule rules[] = { allow("10.77.0.5", 32, IPPROTO_TCP, 80, 80) };
        return install(msg, size, rules, ARRAY_SIZE(rules)) &&
               expect_tcp(msg, size, "10.77.0.5", 80, EINPROGRESS) &&
               expect_tcp(msg, size, "10.77.0.5", 81, ECONNREFUSED) &&
               expect_tcp(msg, size, "10.77.0.6", 80, ECONNREFUSED) &&
               expect_udp(msg, size, "10.77.0.5", 80, EPERM) &&
               expect_udp(msg, size, "10.77.0.6", 53, EPERM) &&
               expect_loopback_open(msg, size);
}

NETNS_TEST(test_egress_cidr_entry_allows_addresses_inside_and_refuses_the_next_block)
{
        const nsbox_egress_rule rules[] = { allow("10.77.0.0", 28, 0, 0, 0) };
        return install(msg, size, rules, ARRAY_SIZE(rules)) &&
               expect_tcp(msg, size, "10.77.0.9", 1234, EINPROGRESS) &&
               expect_udp(msg, size, "10.77.0.9", 1234, 0) &&
               expect_tcp(msg, size, "10.77.0.17", 1234, ECONNREFUSED) &&
               expect_udp(msg, size, "10.77.0.17", 1234, EPERM);
}

NETNS_TEST(test_egress_port_range_allows_ports_inside_and_refuses_those_just_outside)
{
        const nsbox_egress_rule rules[] = { allow("10.77.0.5", 32, IPPROTO_TCP, 8000, 8010) };
        return install(msg, size, rules, ARRAY_SIZE(rules)) &&
               expect_tcp(msg, size, "10.77.0.5", 8005, EINPROGRESS) &&
               expect_tcp(msg, size, "10.77.0.5", 8011, ECONNREFUSED) &&
               expect_tcp(msg, size, "10.77.0.5", 7999, ECONNREFUSED);
}

/* A neighbour solicitation arriving on v1 within wait_ms, i.e. leaving the sandbox on v0. */
static bool saw_neighbour_solicitation(int fd, int wait_ms)
{
        uint64_t deadline = now_ns() + (uint64_t)wait_ms * 1000000;
        for (uint64_t now = now_ns(); now < deadline; now = now_ns()) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, (int)((deadline - now) / 1000000) + 1) <= 0)
                        return false;
                uint8_t pkt[256];
                ssize_t n = recv(fd, pkt, sizeof(pkt), 0);
                /* IPv6 header: next header at 6 (58 = ICMPv6); ICMPv6 type at 40 (135 = NS) */
                if (n > 40 && pkt[6] == IPPROTO_ICMPV6 && pkt[40] == 135)
                        return true;
        }
        return false;
}

NETNS_TEST(test_egress_ipv6_allows_the_listed_address_and_refuses_its_neighbour)
{
        const nsbox_egress_rule rules[] = { allow("fd77::5", 128, IPPROTO_TCP, 80, 80) };
        _cleanup_close_ int cap = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IPV6));
        struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IPV6),
                                  .sll_ifindex = (int)if_nametoindex("v1") };
        EXPECT(cap >= 0 && bind(cap, (struct sockaddr *)&ll, sizeof(ll)) == 0, "packet socket on v1: %s", strerror(errno));
        if (!install(msg, size, rules, ARRAY_SIZE(rules)) || !expect_tcp(msg, size, "fd77::5", 80, EINPROGRESS))
                return false;
        /* the allowed connect must get as far as the link: its neighbour solicitation goes out */
        EXPECT(saw_neighbour_solicitation(cap, ALLOWED_WAIT_MS), "no neighbour solicitation for fd77::5 left v0");
        return expect_tcp(msg, size, "fd77::6", 80, ECONNREFUSED) &&
               expect_tcp(msg, size, "fd77::5", 81, ECONNREFUSED) &&
               expect_udp(msg, size, "fd77::6", 53, EPERM);
}

NETNS_TEST(test_egress_empty_list_refuses_everything_but_loopback)
{
        return install(msg, size, NULL, 0) &&
               expect_tcp(msg, size, "10.77.0.5", 80, ECONNREFUSED) &&
               expect_tcp(msg, size, "fd77::5", 80, ECONNREFUSED) &&
               expect_udp(msg, size, "10.77.0.5", 53, EPERM) &&
               expect_loopback_open(msg, size);
}

/* Installed once per namespace: a second list is refused, and the first stays as it was. */
NETNS_TEST(test_egress_second_call_is_refused_and_changes_nothing)
{
        const nsbox_egress_rule first[] = { allow("10.77.0.5", 32, IPPROTO_TCP, 80, 80) };
        const nsbox_egress_rule second[] = { allow("10.77.0.6", 32, IPPROTO_TCP, 80, 80) };
        if (!install(msg, size, first, ARRAY_SIZE(first)))
                return false;
        nsbox_error err = { 0 };
        char why[512];
        int r = nsbox_nft_egress(second, ARRAY_SIZE(second), &err);
        unit_take_error(&err, why, sizeof(why));
        EXPECT(r == -EEXIST, "a second call returned %d, expected -EEXIST: %s", r, why);
        EXPECT(strstr(why, "already there") && !strchr(why, '\n'), "message: '%s'", why);
        return expect_tcp(msg, size, "10.77.0.5", 80, EINPROGRESS) &&
               expect_tcp(msg, size, "10.77.0.6", 80, ECONNREFUSED);
}

NETNS_TEST(test_egress_without_cap_net_admin_fails_with_eperm_and_changes_nothing)
{
        const nsbox_egress_rule rules[] = { allow("10.77.0.5", 32, IPPROTO_TCP, 80, 80) };
        cap_t caps = cap_get_proc();
        cap_value_t net_admin = CAP_NET_ADMIN;
        bool dropped = caps && cap_set_flag(caps, CAP_EFFECTIVE, 1, &net_admin, CAP_CLEAR) == 0 &&
                       cap_set_proc(caps) == 0;
        cap_free(caps);
        EXPECT(dropped, "dropping CAP_NET_ADMIN: %s", strerror(errno));

        nsbox_error err = { 0 };
        char why[512];
        int r = nsbox_nft_egress(rules, ARRAY_SIZE(rules), &err);
        unit_take_error(&err, why, sizeof(why));
        EXPECT(r == -EPERM, "got %d (%s), want -EPERM", r, why);
        EXPECT(strchr(why, '\n') == NULL && strstr(why, "CAP_NET_ADMIN") && strstr(why, "Operation not permitted"),
               "unexpected message: '%s'", why);
        /* nothing was installed: an unlisted address is not refused */
        return expect_tcp(msg, size, "10.77.0.6", 80, EINPROGRESS);
}

START_TEST(test_egress_invalid_entries_are_refused_before_the_kernel_sees_them)
{
        const struct {
                nsbox_egress_rule rule;
                const char *needle;
        } bad[] = {
                { allow("10.77.0.1", 24, 0, 0, 0), "bits set beyond its /24 prefix" },
                { allow("10.77.0.0", 33, 0, 0, 0), "prefix /33" },
                { allow("fd77::", 129, 0, 0, 0), "prefix /129" },
                { allow("10.77.0.5", 32, IPPROTO_ICMP, 0, 0), "protocol 1 is neither tcp nor udp" },
                { allow("10.77.0.5", 32, IPPROTO_TCP, 81, 80), "invalid port range 81-80" },
                { allow("10.77.0.5", 32, IPPROTO_TCP, 0, 80), "invalid port range 0-80" },
                { { .family = AF_UNIX }, "address family" },
        };
        nsbox_error err = { 0 };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                const nsbox_egress_rule rules[] = { allow("10.0.0.0", 8, 0, 0, 0), bad[i].rule };
                ck_assert_int_eq(nsbox_nft_egress(rules, ARRAY_SIZE(rules), &err), -EINVAL);
                UNIT_ASSERT_ERROR(&err, "egress rules: entry 1: ", bad[i].needle);
        }
        nsbox_egress_rule many[NSBOX_NFT_MAX_RULES + 1] = { 0 };
        ck_assert_int_eq(nsbox_nft_egress(many, ARRAY_SIZE(many), &err), -E2BIG);
        UNIT_ASSERT_ERROR(&err, "at most 128");
}
END_TEST

Suite *nft_suite(void)
{
        Suite *s = suite_create("nft");
        TCase *tc = unit_tcase(s, "nft");
        unit_add(tc, test_egress_allows_the_listed_tcp_port_and_refuses_everything_else_at_once);
        unit_add(tc, test_egress_cidr_entry_allows_addresses_inside_and_refuses_the_next_block);
        unit_add(tc, test_egress_port_range_allows_ports_inside_and_refuses_those_just_outside);
        unit_add(tc, test_egress_ipv6_allows_the_listed_address_and_refuses_its_neighbour);
        unit_add(tc, test_egress_empty_list_refuses_everything_but_loopback);
        unit_add(tc, test_egress_second_call_is_refused_and_changes_nothing);
        unit_add(tc, test_egress_without_cap_net_admin_fails_with_eperm_and_changes_nothing);
        unit_add(tc, test_egress_invalid_entries_are_refused_before_the_kernel_sees_them);
        return s;
}
