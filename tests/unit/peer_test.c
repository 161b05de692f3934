/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox_peer_check (runtime/peer.h): a peer of our own namespaces is served; one in another user
 * namespace (a sandbox's), or one that has exited, is not. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/peer.h"
#include "unit.h"

/* A listening socket at a fresh path; the path is written to buf. */
static int listener(char *buf, size_t size)
{
        snprintf(buf, size, "/tmp/nsbox-peer-test.%d.sock", (int)getpid());
        unlink(buf);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", buf);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(fd, 4), 0);
        return fd;
}

/* A child that connects to path (after unshare(flags) when flags), then waits for a byte on
 * its end of sync, or exits at once when exit_now. */
static pid_t connecting_child(const char *path, int flags, bool exit_now, int sync[2])
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (flags && unshare(flags) < 0)
                        _exit(3);
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_un a = { .sun_family = AF_UNIX };
                snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
                if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                        _exit(4);
                if (exit_now)
                        _exit(0);
                char c;
                (void)!read(sync[1], &c, 1);
                _exit(0);
        }
        return pid;
}

/* Both ways of holding the peer (SO_PEERPIDFD, and pidfd_open before Linux 6.5) agree. */
static int accept_and_check(int lfd, char *why, size_t size)
{
        int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        ck_assert_int_ge(conn, 0);
        char why2[160] = "";
        int r = nsbox_peer_check(conn, why, size);
        int r2 = nsbox_peer_check_without_peerpidfd(conn, why2, sizeof(why2));
        close(conn);
        /* valgrind 3.19 knows no pidfd_open (ENOSYS): that way is checked by the plain unit tier */
        if (r2 == -ENOSYS && strstr(why2, "pidfd_open"))
                return r;
        ck_assert_msg((r < 0) == (r2 < 0) && !strcmp(why, why2), "with SO_PEERPIDFD: %d '%s'; without: %d '%s'", r, why, r2, why2);
        return r;
}

static void end_child(pid_t pid, int sync[2])
{
        (void)!write(sync[0], "x", 1);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (status %d)", st);
        close(sync[0]);
        close(sync[1]);
}

START_TEST(test_peer_of_our_namespaces_is_served)
{
        char path[108], why[160] = "";
        int lfd = listener(path, sizeof(path)), sync[2];
        pid_t pid = connecting_child(path, 0, false, sync);
        int r = accept_and_check(lfd, why, sizeof(why));
        end_child(pid, sync);
        close(lfd);
        unlink(path);
        ck_assert_msg(r == 0, "refused: %s", why);
}
END_TEST

START_TEST(test_peer_in_another_user_namespace_is_refused)
{
        char path[108], why[160] = "";
        int lfd = listener(path, sizeof(path)), sync[2];
        pid_t pid = connecting_child(path, CLONE_NEWUSER, false, sync);
        int r = accept_and_check(lfd, why, sizeof(why));
        end_child(pid, sync);
        close(lfd);
        unlink(path);
        ck_assert_int_lt(r, 0);
        UNIT_ASSERT_CONTAINS(why, "it runs in another user namespace (inside a sandbox)");
}
END_TEST

START_TEST(test_peer_that_has_exited_is_refused)
{
        char path[108], why[160] = "";
        int lfd = listener(path, sizeof(path)), sync[2];
        pid_t pid = connecting_child(path, 0, true, sync);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid); /* reaped: its pid may be anyone's now */
        int r = accept_and_check(lfd, why, sizeof(why));
        close(sync[0]);
        close(sync[1]);
        close(lfd);
        unlink(path);
        ck_assert_int_lt(r, 0);
        UNIT_ASSERT_CONTAINS(why, "exited");
}
END_TEST

Suite *peer_suite(void)
{
        Suite *s = suite_create("peer");
        TCase *tc = unit_tcase(s, "peer_check");
        unit_add(tc, test_peer_of_our_namespaces_is_served);
        unit_add(tc, test_peer_in_another_user_namespace_is_refused);
        unit_add(tc, test_peer_that_has_exited_is_refused);
        return s;
}
