/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_fork: fork and exec of a process with ParaNIC sockets (sock_test.h says how
 * to run it).
 *
 *   fork      the child: the parent's connection fails with EBADF (poll: POLLERR|POLLHUP),
 *             the inherited INADDR_ANY UDP socket is the OS's and works, a new connection
 *             of its own works; the parent's connection works after the child; an exec'd
 *             program sees the placeholder as a plain eventfd (execchild)
 *   fork_udp  node 0 binds two UDP sockets to its cluster address (as pvmd: netsock,
 *             ppnetsock) and forks: the child's first touch (a poll) of the inherited one
 *             takes its port over (udp_taken), it sends to the parent's other socket on the
 *             same node and gets the answer, and the server's; its exit gives the port back
 *             (the server's datagram reaches the parent, which did not have to take it
 *             back); a second child takes it by sending, the parent's send takes it back,
 *             the child's receive and send take it again, the child dies holding it (_exit):
 *             the parent gets the datagrams
 */
#include "sock_test.h"

/* ---- fork and exec ------------------------------------------------------------------------ */

static int fork_server(void)
{
	int l = listener((uint16_t)(port0 + 70), 0), c1, c2;
	char buf[8];
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c1 = accept(l, NULL, NULL);
	CHECK(c1 >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read_full(c1, buf, 1, 1), 0);
	EXPECT_RC(write(c1, "A", 1), 1);
	c2 = accept(l, NULL, NULL);   /* the child's own connection */
	CHECK(c2 >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read_full(c2, buf, 5, 5), 0);
	CHECK(!memcmp(buf, "child", 5), "the child's data");
	EXPECT_RC(write(c2, "C", 1), 1);
	EXPECT_RC(read(c2, buf, 1), 0);
	EXPECT_RC(read_full(c1, buf, 1, 1), 0);   /* the parent's connection still works */
	CHECK(buf[0] == 'b', "parent after the child: %c", buf[0]);
	EXPECT_RC(write(c1, "B", 1), 1);
	EXPECT_RC(read(c1, buf, 1), 0);
	close(c1);
	close(c2);
	close(l);
	say("ok fork server");
	return 0;
}

static int fork_child(int c, int u, int o, uint16_t oport)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(oport)};
	struct pollfd p = {.fd = c, .events = POLLIN | POLLOUT};
	char x;
	int n;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(kind(c) == K_STALE, "the inherited connection is kind %d", kind(c));
	CHECK(write(c, "z", 1) < 0 && errno == EBADF, "write on the parent's connection: %s", strerror(errno));
	CHECK(read(c, &x, 1) < 0 && errno == EBADF, "read on the parent's connection: %s", strerror(errno));
	EXPECT_RC(poll(&p, 1, 0), 1);
	CHECK(p.revents & (POLLERR | POLLHUP), "poll on the parent's connection: 0x%x", p.revents);
	/* OS sockets keep working; a wildcard UDP socket is the OS's in the child */
	CHECK(kind(u) == K_OS, "the inherited wildcard UDP socket is kind %d", kind(u));
	EXPECT_RC(sendto(u, "os", 2, 0, (struct sockaddr *)&lo, sizeof(lo)), 2);
	(void)o;
	/* a new connection: the child opens a port of its own */
	n = connect_to(1, (uint16_t)(port0 + 70), 0);
	CHECK(n >= 0 && kind(n) == K_CONN, "the child's connect: %s", strerror(errno));
	EXPECT_RC(write(n, "child", 5), 5);
	EXPECT_RC(read_full(n, &x, 1, 1), 0);
	CHECK(x == 'C', "reply to the child %c", x);
	close(n);
	close(c);   /* nothing on the wire: the parent's connection stays */
	return 0;
}

static int fork_client(const char *self)
{
	int c = connect_to(1, (uint16_t)(port0 + 70), 0), u = socket(AF_INET, SOCK_DGRAM, 0),
	    o = socket(AF_INET, SOCK_DGRAM, 0), st;
	struct sockaddr_in any = any_sa(0), lo = {.sin_family = AF_INET};
	socklen_t ll = sizeof(lo);
	char x, path[64], link[128];
	ssize_t n;
	pid_t pid;

	CHECK(c >= 0 && u >= 0 && o >= 0, "connect: %s", strerror(errno));
	EXPECT_RC(write(c, "a", 1), 1);
	EXPECT_RC(read_full(c, &x, 1, 1), 0);
	EXPECT_RC(bind(u, (struct sockaddr *)&any, sizeof(any)), 0);
	CHECK(kind(u) == K_UDP, "kind %d", kind(u));
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_RC(bind(o, (struct sockaddr *)&lo, sizeof(lo)), 0);
	EXPECT_RC(getsockname(o, (struct sockaddr *)&lo, &ll), 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(fork_child(c, u, o, ntohs(lo.sin_port)) == 0 ? 0 : 1);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (0x%x)", st);
	EXPECT_RC(recv(o, &x, 1, MSG_DONTWAIT), 1);   /* the child's datagram over the OS */
	CHECK(kind(c) == K_CONN, "the parent's connection is kind %d", kind(c));
	EXPECT_RC(write(c, "b", 1), 1);
	EXPECT_RC(read_full(c, &x, 1, 1), 0);
	CHECK(x == 'B', "reply %c", x);
	/* exec: ParaNIC sockets do not survive; the fd is a plain eventfd in the new program */
	snprintf(path, sizeof(path), "%d", c);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		execl(self, self, "execchild", path, (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the exec'd child failed (0x%x)",
	      st);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", c);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	CHECK(strstr(link, "eventfd"), "the placeholder is %s", link);
	close(c);
	close(u);
	close(o);
	say("ok fork client");
	return 0;
}

/* exec'd by fork_client: after exec the inherited ParaNIC fd is nothing to the library */
static int exec_child(int fd)
{
	char x = 0;
	CHECK(kind(fd) == K_OS, "the inherited fd is kind %d after exec", kind(fd));
	CHECK(send(fd, &x, 1, 0) < 0 && errno == ENOTSOCK, "send on it: %s", strerror(errno));
	say("ok execchild");
	return 0;
}

/* ---- fork_udp: a UDP socket on the cluster shared by parent and child (pvmd's pvmd') --------- */

/* Wait up to ms for a datagram on fd and take it: its length (text, NUL-terminated), -1
 * on timeout. Stray answers to the first pings ("re:ping") are skipped. */
static int fu_recv(int fd, char *buf, size_t n, struct sockaddr_in *from, int ms)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		socklen_t fl = sizeof(*from);
		ssize_t r;
		if (poll(&p, 1, ms) != 1)
			return -1;
		r = recvfrom(fd, buf, n - 1, 0, (struct sockaddr *)from, &fl);
		if (r < 0)
			return -1;
		buf[r] = 0;
		if (strcmp(buf, "re:ping"))
			return (int)r;
	}
}

#define FU_EXPECT(fd, want)                                                                            \
	do {                                                                                           \
		char b_[64];                                                                           \
		struct sockaddr_in f_;                                                                 \
		CHECK(fu_recv(fd, b_, sizeof(b_), &f_, 5000) >= 0 && !strcmp(b_, want), "wanted %s, got %s", \
		      want, b_);                                                                       \
	} while (0)

/* waitpid while staying in the library (poll on the socket fd): a datagram this
 * process sent just before may still need its port's progress to leave (the first
 * message to a new port waits for the peer's accept); a process blocked in the kernel
 * makes none. 0 when the child exited with status 0. */
static int fu_wait(pid_t pid, int fd)
{
	int st = 0;
	for (int i = 0; i < 1000; i++) {
		struct pollfd p = {.fd = fd, .events = 0};
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
		if (r < 0)
			return -1;
		poll(&p, 1, 10);
	}
	return -1;
}

/* node 1: answers "re:MSG" to the source, "to:PORT" with "hi" to (source address, PORT),
 * until "quit". */
static int fork_udp_server(void)
{
	struct sockaddr_in a = node_sa(1, (uint16_t)(port0 + 90)), from;
	int s = socket(AF_INET, SOCK_DGRAM, 0), count = 0;
	char buf[64], out[80];

	CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
	for (;;) {
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&from, &fl);
		CHECK(n >= 0, "recvfrom: %s", strerror(errno));
		buf[n] = 0;
		if (!strcmp(buf, "quit"))
			break;
		count++;
		if (!strncmp(buf, "to:", 3)) {
			struct sockaddr_in t = from;
			t.sin_port = htons((uint16_t)atoi(buf + 3));
			EXPECT_RC(sendto(s, "hi", 2, 0, (struct sockaddr *)&t, sizeof(t)), 2);
		} else {
			snprintf(out, sizeof(out), "re:%s", buf);
			EXPECT_RC(sendto(s, out, strlen(out), 0, (struct sockaddr *)&from, fl), (long)strlen(out));
		}
	}
	close(s);
	say("ok fork_udp server messages=%d", count);
	return 0;
}

/* child 1: its first touch (a poll) takes the inherited socket u over; it talks to the
 * parent's other socket on the same node and to the server; exit() gives u back. */
static int fork_udp_child1(int u, uint16_t uport, uint16_t nport, struct sockaddr_in srv)
{
	struct pollfd p = {.fd = u, .events = POLLOUT};
	struct sockaddr_in me_n = node_sa(me, nport), a;
	socklen_t al = sizeof(a);

	CHECK(kind(u) == K_UDP, "the inherited cluster UDP socket is kind %d", kind(u));
	CHECK(sock_stat("udp_taken") == 0, "taken before use");
	CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLOUT), "poll: 0x%x", p.revents);
	CHECK(sock_stat("udp_taken") == 1, "the first poll did not take the socket over");
	CHECK(getsockname(u, (struct sockaddr *)&a, &al) == 0 && ntohs(a.sin_port) == uport &&
	      ntohl(a.sin_addr.s_addr) == sk_node_addr(&net, me), "getsockname in the child: %s", strerror(errno));
	EXPECT_RC(sendto(u, "child", 5, 0, (struct sockaddr *)&me_n, sizeof(me_n)), 5);
	FU_EXPECT(u, "ack");   /* the parent's answer to u's port reaches the child */
	EXPECT_RC(sendto(u, "c1", 2, 0, (struct sockaddr *)&srv, sizeof(srv)), 2);
	FU_EXPECT(u, "re:c1");
	CHECK(sock_stat("udp_taken") == 1, "udp_taken %lld", sock_stat("udp_taken"));
	return 0;
}

/* child 2: takes u over by sending, loses it to the parent's send, takes it back by
 * sending again, and dies holding it (_exit: no library exit). */
static int fork_udp_child2(int u, struct sockaddr_in srv, int rd, int wr)
{
	char x;
	EXPECT_RC(sendto(u, "c2", 2, 0, (struct sockaddr *)&srv, sizeof(srv)), 2);
	FU_EXPECT(u, "re:c2");
	CHECK(sock_stat("udp_taken") == 1, "udp_taken %lld", sock_stat("udp_taken"));
	EXPECT_RC(write(wr, "1", 1), 1);
	EXPECT_RC(read(rd, &x, 1), 1);   /* the parent has used u meanwhile */
	EXPECT_RC(recv(u, &x, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, 1);
	CHECK(sock_stat("udp_taken") == 2, "the child's receive did not take u back: %lld", sock_stat("udp_taken"));
	EXPECT_RC(sendto(u, "c3", 2, 0, (struct sockaddr *)&srv, sizeof(srv)), 2);
	FU_EXPECT(u, "re:c3");
	EXPECT_RC(write(wr, "2", 1), 1);
	return 0;
}

static int fork_udp_client(void)
{
	struct sockaddr_in a = node_sa(me, 0), srv = node_sa(1, (uint16_t)(port0 + 90)), from;
	int u = socket(AF_INET, SOCK_DGRAM, 0), n = socket(AF_INET, SOCK_DGRAM, 0), c2p[2], p2c[2], got = -1;
	socklen_t al = sizeof(a);
	uint16_t uport, nport;
	char buf[64], msg[32], x;
	pid_t pid;

	CHECK(u >= 0 && n >= 0, "socket: %s", strerror(errno));
	EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);   /* pvmd's ppnetsock */
	EXPECT_RC(getsockname(u, (struct sockaddr *)&a, &al), 0);
	uport = ntohs(a.sin_port);
	a = node_sa(me, 0);
	EXPECT_RC(bind(n, (struct sockaddr *)&a, sizeof(a)), 0);   /* and its netsock */
	al = sizeof(a);
	EXPECT_RC(getsockname(n, (struct sockaddr *)&a, &al), 0);
	nport = ntohs(a.sin_port);
	CHECK(kind(u) == K_UDP && kind(n) == K_UDP, "kinds %d %d", kind(u), kind(n));
	for (int i = 0; i < 200 && got < 0; i++) {   /* until the server is there */
		EXPECT_RC(sendto(u, "ping", 4, 0, (struct sockaddr *)&srv, sizeof(srv)), 4);
		struct pollfd p = {.fd = u, .events = POLLIN};
		if (poll(&p, 1, 50) == 1 && recv(u, buf, sizeof(buf), 0) == 7)
			got = 0;
	}
	CHECK(got == 0, "no answer from the server");

	/* 1: the child's first use takes u over; its exit gives it back */
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(n);
		exit(fork_udp_child1(u, uport, nport, srv) == 0 ? 0 : 1);
	}
	CHECK(fu_recv(n, buf, sizeof(buf), &from, 5000) == 5 && !strcmp(buf, "child"), "the child's datagram: %s", buf);
	CHECK(ntohs(from.sin_port) == uport && ntohl(from.sin_addr.s_addr) == sk_node_addr(&net, me),
	      "the child's datagram came from port %u (u is %u)", ntohs(from.sin_port), uport);
	EXPECT_RC(sendto(n, "ack", 3, 0, (struct sockaddr *)&from, sizeof(from)), 3);
	CHECK(fu_wait(pid, n) == 0, "child 1 failed");
	snprintf(msg, sizeof(msg), "to:%u", uport);
	EXPECT_RC(sendto(n, msg, strlen(msg), 0, (struct sockaddr *)&srv, sizeof(srv)), (long)strlen(msg));
	FU_EXPECT(u, "hi");   /* to u: the parent's again without its using u since the fork */
	CHECK(sock_stat("udp_taken") == 0, "the parent had to take u back: %lld", sock_stat("udp_taken"));

	/* 2: the parent takes u back by using it while the child lives; the child's retake;
	 * the child dies holding it: the parent gets its datagrams */
	CHECK(pipe(c2p) == 0 && pipe(p2c) == 0, "pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(c2p[0]);
		close(p2c[1]);
		_exit(fork_udp_child2(u, srv, p2c[0], c2p[1]) == 0 ? 0 : 1);
	}
	close(c2p[1]);
	close(p2c[0]);
	CHECK(read(c2p[0], &x, 1) == 1 && x == '1', "child 2 failed");
	EXPECT_RC(sendto(u, "p3", 2, 0, (struct sockaddr *)&srv, sizeof(srv)), 2);
	FU_EXPECT(u, "re:p3");
	CHECK(sock_stat("udp_taken") == 1, "the parent's send did not take u back: %lld", sock_stat("udp_taken"));
	EXPECT_RC(write(p2c[1], "x", 1), 1);
	CHECK(read(c2p[0], &x, 1) == 1 && x == '2', "child 2 failed");
	CHECK(fu_wait(pid, n) == 0, "child 2 failed");
	EXPECT_RC(sendto(n, msg, strlen(msg), 0, (struct sockaddr *)&srv, sizeof(srv)), (long)strlen(msg));
	FU_EXPECT(u, "hi");
	CHECK(sock_stat("udp_taken") == 1, "udp_taken %lld", sock_stat("udp_taken"));
	EXPECT_RC(sendto(u, "quit", 4, 0, (struct sockaddr *)&srv, sizeof(srv)), 4);
	close(c2p[0]);
	close(p2c[1]);
	close(u);
	close(n);
	say("ok fork_udp client");
	return 0;
}

int main(int argc, char **argv)
{
	const char *cs;
	int r = -1, rc;

	if (!(cs = sock_test_setup(argc, argv, &rc)))
		return rc;
	if (!strcmp(cs, "fork"))
		r = me ? fork_server() : fork_client(argv[0]);
	else if (!strcmp(cs, "fork_udp"))
		r = me ? fork_udp_server() : fork_udp_client();
	else if (!strcmp(cs, "execchild") && argc > 2)
		r = exec_child(atoi(argv[2]));
	else
		say("FAIL %s: unknown case", cs);
	return r == 0 && !t_failures ? 0 : 1;
}
