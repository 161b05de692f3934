/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define SLIRP_READY_MS 10000 /* slirp4netns configures the tap device in a few ms */
#define SLIRP_API_MS 5000

/* ---- egress entries ---------------------------------------------------------------------- */

typedef struct egress_spec {
        nsbox_egress_rule rule; /* family 0: a host name, in host */
        char host[256];
} egress_spec;

static int parse_ports(const char *s, nsbox_egress_rule *r, nsbox_error *err)
{
        uint64_t lo, hi;
        const char *dash = strchr(s, '-');
        char a[16];
        if (!*s || strlen(s) >= sizeof(a) * 2)
                return nsbox_err(err, 0, "'%s' is not a port or a range of ports such as 8000-8080", s);
        snprintf(a, sizeof(a), "%.*s", dash ? (int)(dash - s) : (int)strlen(s), s);
        if (parse_u64(a, 0, UINT64_MAX, &lo) < 0 || (dash && parse_u64(dash + 1, 0, UINT64_MAX, &hi) < 0))
                return nsbox_err(err, 0, "'%s' is not a port or a range of ports such as 8000-8080", s);
        if (!dash)
                hi = lo;
        if (lo < 1 || lo > 65535 || hi < 1 || hi > 65535)
                return nsbox_err(err, 0, "port %" PRIu64 " is out of range (1-65535)", lo < 1 || lo > 65535 ? lo : hi);
        if (lo > hi)
                return nsbox_err(err, 0, "port range %s is empty", s);
        r->port_lo = (uint16_t)lo;
        r->port_hi = (uint16_t)hi;
        return 0;
}

static bool host_name_ok(const char *h)
{
        size_t n = strlen(h);
        bool letter = false;
        if (n == 0 || n > 253 || h[0] == '-' || h[0] == '.')
                return false;
        for (const char *c = h; *c; c++) {
                if (isalpha((unsigned char)*c))
                        letter = true;
                else if (!isdigit((unsigned char)*c) && *c != '-' && *c != '.')
                        return false;
        }
        return letter; /* all digits and dots: a malformed address, not a name */
}

/* ADDR[/PREFIX] or a host name, into e. */
static int parse_target(const char *s, egress_spec *e, nsbox_error *err)
{
        nsbox_egress_rule *r = &e->rule;
        char addr[128];
        const char *slash = strchr(s, '/');
        if (strlen(s) >= sizeof(addr))
                return nsbox_err(err, 0, "'%s' is too long for an address", s);
        snprintf(addr, sizeof(addr), "%.*s", slash ? (int)(slash - s) : (int)strlen(s), s);
        if (inet_pton(AF_INET, addr, r->addr) == 1)
                r->family = AF_INET;
        else if (inet_pton(AF_INET6, addr, r->addr) == 1)
                r->family = AF_INET6;
        else if (!slash && host_name_ok(addr)) {
                snprintf(e->host, sizeof(e->host), "%s", addr);
                return 0;
        } else
                return nsbox_err(err, 0, "'%s' is not an IPv4 or IPv6 address%s", addr, slash ? "" : " or a host name");
        unsigned max = r->family == AF_INET ? 32 : 128;
        uint64_t prefix = max;
        if (slash && parse_u64(slash + 1, 0, UINT64_MAX, &prefix) < 0)
                return nsbox_err(err, 0, "'%s' is not a prefix length", slash + 1);
        if (prefix > max)
                return nsbox_err(err, 0, "prefix /%" PRIu64 " is out of range for %s (0-%u)", prefix,
                                 r->family == AF_INET ? "IPv4" : "IPv6", max);
        r->prefix = (unsigned)prefix;
        /* 10.1.2.3/8 means 10.0.0.0/8, as nft reads it */
        for (unsigned bit = r->prefix; bit < max; bit++)
                r->addr[bit / 8] &= (uint8_t)~(0x80u >> (bit % 8));
        return 0;
}

static int parse_egress(const char *spec, egress_spec *e, nsbox_error *err)
{
        *e = (egress_spec){ 0 };
        const char *s = spec;
        if (!strncmp(s, "tcp:", 4) || !strncmp(s, "udp:", 4)) {
                e->rule.proto = s[0] == 't' ? IPPROTO_TCP : IPPROTO_UDP;
                s += 4;
        }
        char target[160];
        const char *ports = NULL;
        if (s[0] == '[') { /* [IPV6[/PREFIX]][:PORTS] */
                const char *close = strchr(s, ']');
                if (!close || (close[1] && close[1] != ':'))
                        return nsbox_err(err, 0, "expected [IPV6ADDRESS]:PORT");
                if ((size_t)(close - s - 1) >= sizeof(target))
                        return nsbox_err(err, 0, "address too long");
                snprintf(target, sizeof(target), "%.*s", (int)(close - s - 1), s + 1);
                if (close[1])
                        ports = close + 2;
        } else {
                const char *colon = strchr(s, ':');
                /* two colons or more: an IPv6 address without a port */
                if (colon && strchr(colon + 1, ':'))
                        colon = NULL;
                if (strlen(s) >= sizeof(target))
                        return nsbox_err(err, 0, "too long");
                snprintf(target, sizeof(target), "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
                if (colon)
                        ports = colon + 1;
        }
        if (!target[0])
                return nsbox_err(err, 0, "no address");
        int r = parse_target(target, e, err);
        if (r == 0 && ports)
                r = parse_ports(ports, &e->rule, err);
        return r;
}

int nsbox_egress_check(const char *spec, nsbox_error *err)
{
        egress_spec e;
        int r = parse_egress(spec, &e, err);
        if (r < 0)
                return nsbox_err_wrap(err, r, "egress '%s'", spec);
        return 0;
}

static int push_rule(nsbox_egress_rule **v, size_t *n, const nsbox_egress_rule *r, nsbox_error *err)
{
        if (*n >= NSBOX_NFT_MAX_RULES)
                return nsbox_err(err, 0, "egress: more than %d rules after resolving host names", NSBOX_NFT_MAX_RULES);
        nsbox_egress_rule *nv = realloc(*v, (*n + 1) * sizeof(**v));
        if (!nv)
                return nsbox_err(err, ENOMEM, "egress");
        *v = nv;
        nv[(*n)++] = *r;
        return 0;
}

static int resolve_one(const egress_spec *e, nsbox_egress_rule **v, size_t *n, nsbox_error *err)
{
        if (!e->host[0])
                return push_rule(v, n, &e->rule, err);
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
        struct addrinfo *res = NULL;
        int g = getaddrinfo(e->host, NULL, &hints, &res);
        if (g != 0)
                return nsbox_err(err, 0, "egress: cannot resolve '%s': %s", e->host,
                                 g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
        int r = 0;
        for (struct addrinfo *a = res; a && r == 0; a = a->ai_next) {
                nsbox_egress_rule x = e->rule;
                if (a->ai_family == AF_INET) {
                        x.family = AF_INET;
                        x.prefix = 32;
                        memcpy(x.addr, &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4);
                } else if (a->ai_family == AF_INET6) {
                        x.family = AF_INET6;
                        x.prefix = 128;
                        memcpy(x.addr, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, 16);
                } else
                        continue;
                r = push_rule(v, n, &x, err);
        }
        freeaddrinfo(res);
        return r;
}

int nsbox_egress_resolve(const nsbox_policy *p, nsbox_egress_rule **ret, size_t *n, nsbox_error *err)
{
        nsbox_egress_rule *v = NULL;
        size_t count = 0;
        int r = 0;
        for (char *const *s = p->egress; s && *s && r == 0; s++) {
                egress_spec e;
                if ((r = parse_egress(*s, &e, err)) < 0)
                        r = nsbox_err_wrap(err, r, "egress '%s'", *s);
                else
                        r = resolve_one(&e, &v, &count, err);
        }
        if (r == 0 && p->net == NET_NAT && p->dns) {
                /* the sandbox's name servers: slirp4netns's, or the host's */
                uint8_t servers[8][4];
                size_t ns = 1;
                inet_pton(AF_INET, NSBOX_NAT_DNS, servers[0]);
                if (p->net_backend == NET_BACKEND_VETH)
                        ns = nsbox_host_nameservers(servers, ARRAY_SIZE(servers));
                for (size_t i = 0; i < ns && r == 0; i++) {
                        nsbox_egress_rule dns = { .family = AF_INET, .prefix = 32, .port_lo = 53, .port_hi = 53 };
                        memcpy(dns.addr, servers[i], 4);
                        r = push_rule(&v, &count, &dns, err);
                }
        }
        if (r < 0) {
                free(v);
                return r;
        }
        *ret = v;
        *n = count;
        return 0;
}

int nsbox_publish_parse(const char *spec, nsbox_publish *ret, nsbox_error *err)
{
        const char *s = spec;
        if (!strncmp(s, "127.0.0.1:", 10))
                s += 10;
        else if (!strncmp(s, "localhost:", 10))
                s += 10;
        else if (strchr(s, '.') || strchr(s, '['))
                return nsbox_err(err, 0, "publish '%s': only host loopback ports are published (127.0.0.1:HOSTPORT:PORT)", spec);
        char a[16];
        const char *colon = strchr(s, ':');
        snprintf(a, sizeof(a), "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
        uint64_t h, c;
        if (parse_u64(a, 0, UINT64_MAX, &h) < 0 || (colon && parse_u64(colon + 1, 0, UINT64_MAX, &c) < 0))
                return nsbox_err(err, 0, "publish '%s': expected [127.0.0.1:]HOSTPORT[:PORT], e.g. 8080:80", spec);
        if (!colon)
                c = h;
        if (h < 1 || h > 65535 || c < 1 || c > 65535)
                return nsbox_err(err, 0, "publish '%s': port %" PRIu64 " is out of range (1-65535)", spec,
                                 h < 1 || h > 65535 ? h : c);
        ret->host_port = (uint16_t)h;
        ret->port = (uint16_t)c;
        return 0;
}

/* ---- inside ----------------------------------------------------------------------------- */

int nsbox_net_loopback_up(nsbox_error *err)
{
        /* One ioctl on a throwaway socket: a netlink round trip would cost more on every start. */
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return nsbox_err(err, errno, "loopback: socket");
        struct ifreq ifr = { 0 };
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return nsbox_err(err, errno, "loopback: get flags");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return nsbox_err(err, errno, "loopback: bring up");
        return 0;
}

size_t nsbox_host_nameservers(uint8_t out[][4], size_t max)
{
        /* read strictly: a FIFO or a huge file there must not stall the sandbox's start */
        _cleanup_free_ char *text = NULL;
        size_t n = 0;
        if (read_file_at(AT_FDCWD, "/etc/resolv.conf", 0, 64 << 10, &text, NULL) < 0)
                return 0;
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line && n < max; line = strtok_r(NULL, "\n", &save)) {
                char addr[64];
                if (sscanf(line, " nameserver %63s", addr) != 1 || inet_pton(AF_INET, addr, out[n]) != 1)
                        continue;
                if (out[n][0] != 127) /* the host's own loopback is not the sandbox's */
                        n++;
        }
        return n;
}

int nsbox_net_setup_inside(const nsbox_veth *veth, const nsbox_egress_rule *rules, size_t n, bool restricted, nsbox_error *err)
{
        int r = nsbox_net_loopback_up(err);
        if (r == 0 && veth)
                r = nsbox_veth_setup_inside(veth, err);
        if (r == 0 && restricted)
                r = nsbox_nft_egress(rules, n, err);
        return r;
}

/* ---- outside: slirp4netns ------------------------------------------------------------------ */

static const char *slirp_path(void)
{
        const char *env = getenv("NSBOX_SLIRP4NETNS");
        if (env && *env)
                return env;
        static const char *const dirs[] = { "/usr/bin", "/usr/local/bin", "/bin" };
        static __thread char buf[64]; /* per thread: in-process creates may overlap */
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                snprintf(buf, sizeof(buf), "%s/slirp4netns", dirs[i]);
                if (access(buf, X_OK) == 0)
                        return buf;
        }
        return NULL;
}

/* The host port must be free now; a race with another program is still possible and then
 * slirp4netns's refusal is reported. */
static int port_free(uint16_t port, nsbox_error *err)
{
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return nsbox_err(err, errno, "publish: socket");
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        /* as slirp4netns binds it: a port whose last connection is in TIME_WAIT is free */
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                return nsbox_err(err, errno, "publish: host port 127.0.0.1:%u", port);
        return 0;
}

int nsbox_net_check_host(const nsbox_policy *p, nsbox_error *err)
{
        if (p->net == NET_NONE) {
                if (p->n_publish)
                        return nsbox_err(err, 0, "publishing a port needs network mode 'nat' (--net nat): mode 'none' has only loopback");
                if (p->egress && p->egress[0])
                        return nsbox_err(err, 0, "an egress allow-list needs network mode 'nat' (--net nat): mode 'none' lets nothing out");
                return 0;
        }
        if (p->net_backend == NET_BACKEND_VETH) {
                if (geteuid() != 0)
                        return nsbox_err(err, 0, "network.backend 'veth' needs nsbox or nsboxd started as root (unprivileged: 'slirp4netns')");
                if (p->n_publish)
                        return nsbox_err(err, 0, "publishing a port needs network.backend 'slirp4netns' in this version ('veth' has no publish yet)");
                if (p->host_loopback)
                        return nsbox_err(err, 0, "network.host_loopback is for network.backend 'slirp4netns' (with 'veth', the host is the sandbox's gateway)");
                return 0;
        }
        if (!slirp_path())
                return nsbox_err(err, 0, "network mode 'nat' needs slirp4netns (apt-get install slirp4netns, or set NSBOX_SLIRP4NETNS)");
        for (size_t i = 0; i < p->n_publish; i++) {
                int r = port_free(p->publish[i].host_port, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* What slirp4netns said on stderr: its last line, for the error message. */
static void last_line(int fd, char *buf, size_t size)
{
        char tmp[4096];
        off_t end = lseek(fd, 0, SEEK_END);
        off_t from = end > (off_t)sizeof(tmp) - 1 ? end - (off_t)sizeof(tmp) + 1 : 0;
        ssize_t n = pread(fd, tmp, sizeof(tmp) - 1, from);
        buf[0] = '\0';
        if (n <= 0)
                return;
        tmp[n] = '\0';
        while (n > 0 && (tmp[n - 1] == '\n' || tmp[n - 1] == '\r'))
                tmp[--n] = '\0';
        char *nl = strrchr(tmp, '\n');
        size_t len = strlen(nl ? nl + 1 : tmp);
        if (len >= size)
                len = size - 1;
        memcpy(buf, nl ? nl + 1 : tmp, len);
        buf[len] = '\0';
}

static int wait_readable(int fd, int timeout_ms)
{
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
        for (;;) {
                uint64_t now = now_ns();
                if (now >= deadline)
                        return -ETIMEDOUT;
                int n = poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1);
                if (n > 0)
                        return 0;
                if (n < 0 && errno != EINTR)
                        return -errno;
        }
}

/* One request on slirp4netns's API socket: {"execute": "add_hostfwd", ...}. */
static int slirp_publish(const char *sock, const nsbox_publish *pub, nsbox_error *err)
{
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                return nsbox_err(err, errno, "publish %u:%u: connect to slirp4netns", pub->host_port, pub->port);
        char req[256];
        int len = snprintf(req, sizeof(req),
                           "{\"execute\": \"add_hostfwd\", \"arguments\": {\"proto\": \"tcp\", \"host_addr\": \"127.0.0.1\", "
                           "\"host_port\": %u, \"guest_port\": %u}}",
                           pub->host_port, pub->port);
        if (write(fd, req, (size_t)len) != len)
                return nsbox_err(err, errno, "publish %u:%u: write to slirp4netns", pub->host_port, pub->port);
        shutdown(fd, SHUT_WR);
        char reply[1024];
        size_t got = 0;
        while (got < sizeof(reply) - 1) {
                if (wait_readable(fd, SLIRP_API_MS) < 0)
                        return nsbox_err(err, ETIMEDOUT, "publish %u:%u: slirp4netns did not answer", pub->host_port, pub->port);
                ssize_t n = read(fd, reply + got, sizeof(reply) - 1 - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        reply[got] = '\0';
        if (strstr(reply, "\"return\""))
                return 0;
        /* slirp4netns says only "add_hostfwd failed": the likely cause is a port taken since
         * the check */
        return nsbox_err(err, 0, "publish 127.0.0.1:%u: slirp4netns refused it (is the port in use?): %.200s", pub->host_port, reply);
}

static void slirp_exec(const char *bin, const nsbox_policy *p, const int fds[4], const char *api, int errfd)
{
        /* fds 3 to 6, everything else closed: the daemon's sockets must not leak into it */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(errfd, 2) < 0)
                _exit(127);
        /* As root, slirp4netns's sandbox (--enable-sandbox) makes a mount namespace of its own in
         * which only / is made private and /etc and /run slaves; where /run is no mount point
         * (and so stays shared), the detach of its old root propagates to the host and unmounts
         * what is mounted in a shared mount under it there: ip netns's /run/netns/NAME.  It runs
         * in a mount namespace of ours, private, from which nothing propagates back. */
        if (geteuid() == 0 && (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)) {
                dprintf(2, "a mount namespace of its own: %s\n", strerror(errno));
                _exit(127);
        }
        int high[4];
        for (int i = 0; i < 4; i++)
                if ((high[i] = fcntl(fds[i], F_DUPFD, 10)) < 0)
                        _exit(127);
        for (int i = 0; i < 4; i++)
                if (dup2(high[i], 3 + i) < 0)
                        _exit(127);
        int keep[] = { 3, 4, 5, 6 };
        nsbox_close_all_but(keep, 4);
        char ready[] = "--ready-fd=3", exitarg[] = "--exit-fd=4", userns[] = "--userns-path=/proc/self/fd/5",
             pathtype[] = "--netns-type=path", netns[] = "/proc/self/fd/6";
        char apiarg[PATH_MAX + 16];
        snprintf(apiarg, sizeof(apiarg), "--api-socket=%s", api ? api : "");
        const char *argv[20];
        int n = 0;
        argv[n++] = "slirp4netns";
        argv[n++] = "--configure";
        argv[n++] = "--mtu=65520";
        argv[n++] = ready;
        argv[n++] = exitarg;
        /* What it parses comes from the sandbox: a syscall filter always, and when it runs as
         * root its own empty mount namespace and no capabilities.  (Unprivileged, its sandbox
         * mode would become uid 0 of the sandbox's user namespace, which maps no uid 0.) */
        argv[n++] = "--enable-seccomp";
        if (geteuid() == 0)
                argv[n++] = "--enable-sandbox";
        if (!p->host_loopback)
                argv[n++] = "--disable-host-loopback";
        if (!p->dns)
                argv[n++] = "--disable-dns";
        if (api)
                argv[n++] = apiarg;
        /* the namespaces by fd: the sandbox's init turns non-dumpable during its setup, and
         * then its /proc/PID/ns/ is closed to everyone but root */
        argv[n++] = userns;
        argv[n++] = pathtype;
        argv[n++] = netns;
        argv[n++] = "tap0";
        argv[n] = NULL;
        execv(bin, (char **)argv);
        dprintf(2, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
}

int nsbox_net_start(const nsbox_policy *p, int userns_fd, int netns_fd, nsbox_net *ret, nsbox_error *err)
{
        if (p->net != NET_NAT || p->net_backend != NET_BACKEND_SLIRP4NETNS)
                return 0;
        ret->pid = 0;
        ret->pidfd = ret->exitfd = -1;
        const char *bin = slirp_path();
        if (!bin)
                return nsbox_err(err, ENOENT, "network mode 'nat': slirp4netns");
        int readyp[2] = { -1, -1 }, exitp[2] = { -1, -1 };
        /* its stderr: a file, not a pipe, so that what it says later neither blocks it nor
         * kills it with SIGPIPE; read back when it fails to start */
        _cleanup_close_ int errfd = memfd_create("nsbox-slirp4netns-stderr", MFD_CLOEXEC);
        char dir[] = "/tmp/nsbox-net-XXXXXX", api[sizeof(dir) + 16] = "";
        int r = 0;
        if (errfd < 0 || pipe2(readyp, O_CLOEXEC) < 0 || pipe2(exitp, O_CLOEXEC) < 0) {
                r = nsbox_err(err, errno, "network: pipe");
                goto out;
        }
        if (p->n_publish) {
                if (!mkdtemp(dir)) {
                        r = nsbox_err(err, errno, "network: a directory for slirp4netns's socket");
                        goto out;
                }
                snprintf(api, sizeof(api), "%s/api.sock", dir);
        }
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                r = nsbox_err(err, errno, "network: fork");
                goto out;
        }
        if (pid == 0) {
                /* our death (even SIGKILL) closes the exit fd, and slirp4netns exits on that;
                 * the parent-death signal covers the window before exec (and stays after it:
                 * not for a sandbox that may outlive its supervisor, whose exit fd a keeper
                 * holds; before exec its copy of the exit fd is closed, so it exits on EOF) */
                if (!p->outlive_parent)
                        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (getppid() != parent)
                        _exit(127);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL); /* the supervisor's blocked signals are its own */
                int fds[4] = { readyp[1], exitp[0], userns_fd, netns_fd };
                slirp_exec(bin, p, fds, api[0] ? api : NULL, errfd);
        }
        ret->pid = pid;
        ret->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        ret->exitfd = exitp[1];
        exitp[1] = -1;
        close(readyp[1]);
        readyp[1] = -1;
        char c = 0, msg[300];
        if ((r = wait_readable(readyp[0], SLIRP_READY_MS)) < 0 || read(readyp[0], &c, 1) != 1 || c != '1') {
                last_line(errfd, msg, sizeof(msg));
                r = nsbox_err(err, r == -ETIMEDOUT ? ETIMEDOUT : 0, "network mode 'nat': slirp4netns %s%s%s",
                              r == -ETIMEDOUT ? "did not configure the sandbox's network in time" : "failed",
                              msg[0] ? ": " : "", msg);
                goto out;
        }
        for (size_t i = 0; i < p->n_publish && r == 0; i++)
                r = slirp_publish(api, &p->publish[i], err);
out:
        if (api[0])
                unlink(api);
        if (p->n_publish && strcmp(dir, "/tmp/nsbox-net-XXXXXX"))
                rmdir(dir);
        nsbox_close_pair(readyp);
        nsbox_close_pair(exitp);
        if (r < 0)
                nsbox_net_stop(ret);
        return r;
}

pid_t nsbox_net_detach(nsbox_net *n)
{
        nsbox_veth_release(&n->veth);
        pid_t pid = n->pid;
        if (n->exitfd >= 0)
                close(n->exitfd); /* slirp4netns exits on EOF */
        if (n->pidfd >= 0)
                close(n->pidfd);
        *n = (nsbox_net)NSBOX_NET_INIT;
        return pid;
}

void nsbox_net_stop(nsbox_net *n)
{
        nsbox_veth_release(&n->veth);
        if (n->exitfd >= 0)
                close(n->exitfd); /* slirp4netns exits on EOF */
        if (n->pid > 0) {
                /* give it a moment to exit by itself, then make sure */
                struct pollfd pfd = { .fd = n->pidfd, .events = POLLIN };
                if (n->pidfd < 0 || poll(&pfd, 1, 500) <= 0)
                        kill(n->pid, SIGKILL);
                while (waitpid(n->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (n->pidfd >= 0)
                close(n->pidfd);
        *n = (nsbox_net)NSBOX_NET_INIT;
}
