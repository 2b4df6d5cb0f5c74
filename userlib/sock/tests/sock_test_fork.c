/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_fork: fork and exec of a process with ParaNIC sockets (sock_test.h says how
 * to run it).
 *
 *   fork      two connections shared over fork (fork_paused 2): the child's first write
 *             takes one over (moved to its port, fork_moved 1; getpeername before it
 *             takes nothing), it talks and closes it (the server reads EOF), then the
 *             parent's write on it fails with EBADF (kind -1); the child lets the other
 *             go, and the parent goes on with it; the inherited INADDR_ANY UDP socket is
 *             the OS's and works, a new connection of the child's own works; an exec'd
 *             program sees the placeholder as a plain eventfd (execchild); the parent's
 *             close after the exec'd child exited closes the connection (EOF)
 *   forksrv   an accept-then-fork echo server (node 1: the parent closes each accepted
 *             fd at once, a child serves it) and four clients, two of which write their
 *             100000 bytes before the server has forked: every byte back, + 1
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
	int l = listener((uint16_t)(port0 + 70), 0), c1, c2, c3;
	char buf[8];
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c1 = accept(l, NULL, NULL);
	CHECK(c1 >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read_full(c1, buf, 1, 1), 0);
	EXPECT_RC(write(c1, "A", 1), 1);
	c2 = accept(l, NULL, NULL);   /* the parent's second connection */
	CHECK(c2 >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read_full(c1, buf, 1, 1), 0);   /* from the child, which took c1 over */
	CHECK(buf[0] == 'z', "the child on the inherited connection: %c", buf[0]);
	EXPECT_RC(write(c1, "Z", 1), 1);
	c3 = accept(l, NULL, NULL);   /* the child's own connection */
	CHECK(c3 >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read_full(c3, buf, 5, 5), 0);
	CHECK(!memcmp(buf, "child", 5), "the child's data");
	EXPECT_RC(write(c3, "C", 1), 1);
	EXPECT_RC(read(c3, buf, 1), 0);
	EXPECT_RC(read(c1, buf, 1), 0);   /* the child closed the connection it took */
	EXPECT_RC(read_full(c2, buf, 1, 1), 0);   /* the parent's other connection still works */
	CHECK(buf[0] == 'b', "parent after the child: %c", buf[0]);
	EXPECT_RC(write(c2, "B", 1), 1);
	EXPECT_RC(read(c2, buf, 1), 0);
	close(c1);
	close(c2);
	close(c3);
	close(l);
	say("ok fork server");
	return 0;
}

static int fork_child(int c, int d, int u, uint16_t oport)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(oport)};
	struct sockaddr_in pa;
	socklen_t pl = sizeof(pa);
	char x;
	int n;
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(kind(c) == K_CONN && kind(d) == K_CONN, "the inherited connections are kind %d, %d", kind(c), kind(d));
	EXPECT_RC(getpeername(c, (struct sockaddr *)&pa, &pl), 0);   /* from the copy: takes nothing */
	CHECK(check_addr(&pa, sk_node_addr(&net, 1), (uint16_t)(port0 + 70)), "getpeername");
	/* the first use takes the connection over: it moves to the child's own port */
	EXPECT_RC(write(c, "z", 1), 1);
	EXPECT_RC(read_full(c, &x, 1, 1), 0);
	CHECK(x == 'Z', "reply on the inherited connection: %c", x);
	CHECK(sock_stat && sock_stat("fork_moved") == 1, "fork_moved %lld", sock_stat ? sock_stat("fork_moved") : -1);
	/* OS sockets keep working; a wildcard UDP socket is the OS's in the child */
	CHECK(kind(u) == K_OS, "the inherited wildcard UDP socket is kind %d", kind(u));
	EXPECT_RC(sendto(u, "os", 2, 0, (struct sockaddr *)&lo, sizeof(lo)), 2);
	/* a new connection of its own */
	n = connect_to(1, (uint16_t)(port0 + 70), 0);
	CHECK(n >= 0 && kind(n) == K_CONN, "the child's connect: %s", strerror(errno));
	EXPECT_RC(write(n, "child", 5), 5);
	EXPECT_RC(read_full(n, &x, 1, 1), 0);
	CHECK(x == 'C', "reply to the child %c", x);
	close(n);
	close(c);   /* it took c: its close is the connection's */
	close(d);   /* never used here: let go, the parent goes on with it */
	return 0;
}

static int fork_client(void)
{
	int c = connect_to(1, (uint16_t)(port0 + 70), 0), u = socket(AF_INET, SOCK_DGRAM, 0),
	    o = socket(AF_INET, SOCK_DGRAM, 0), d = -1, st;
	struct sockaddr_in any = any_sa(0), lo = {.sin_family = AF_INET};
	socklen_t ll = sizeof(lo);
	char x, path[64], link[128];
	ssize_t n;
	pid_t pid;

	CHECK(c >= 0 && u >= 0 && o >= 0, "connect: %s", strerror(errno));
	EXPECT_RC(write(c, "a", 1), 1);
	EXPECT_RC(read_full(c, &x, 1, 1), 0);
	d = connect_to(1, (uint16_t)(port0 + 70), 0);
	CHECK(d >= 0, "connect: %s", strerror(errno));
	EXPECT_RC(bind(u, (struct sockaddr *)&any, sizeof(any)), 0);
	CHECK(kind(u) == K_UDP, "kind %d", kind(u));
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_RC(bind(o, (struct sockaddr *)&lo, sizeof(lo)), 0);
	EXPECT_RC(getsockname(o, (struct sockaddr *)&lo, &ll), 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(fork_child(c, d, u, ntohs(lo.sin_port)) == 0 ? 0 : 1);
	CHECK(sock_stat && sock_stat("fork_paused") == 2, "fork_paused %lld", sock_stat ? sock_stat("fork_paused") : -1);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (0x%x)", st);
	EXPECT_RC(recv(o, &x, 1, MSG_DONTWAIT), 1);   /* the child's datagram over the OS */
	/* c is the child's now: unusable here */
	CHECK(write(c, "y", 1) < 0 && errno == EBADF, "write on the child's connection: %s", strerror(errno));
	CHECK(kind(c) == K_STALE, "kind %d", kind(c));
	/* d, which the child let go, is still the parent's */
	EXPECT_RC(write(d, "b", 1), 1);
	EXPECT_RC(read_full(d, &x, 1, 1), 0);
	CHECK(x == 'B', "reply %c", x);
	CHECK(kind(d) == K_CONN, "kind %d", kind(d));
	/* exec: ParaNIC sockets do not survive; the fd is a plain eventfd in the new program */
	snprintf(path, sizeof(path), "%d", d);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		execl(self_path, self_path, "execchild", path, (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the exec'd child failed (0x%x)",
	      st);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", d);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	CHECK(strstr(link, "eventfd"), "the placeholder is %s", link);
	close(c);
	close(d);   /* the exec'd child is gone: the last holder closes it (the server reads EOF) */
	close(u);
	close(o);
	say("ok fork client");
	return 0;
}

/* ---- forksrv: an accept-then-fork echo server (node 1) and four clients (node 0) ------------- */

#define FS_N 4
#define FS_LEN 100000

/* A child that ended: a failed one fails the case at once (its client waits for its
 * bytes, and the server for the client's next connection: the launcher stops both). */
static int fs_reaped(pid_t k, int st, int *ended)
{
	CHECK(k > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "a child (pid %d) failed (0x%x)", (int)k, st);
	(*ended)++;
	return 0;
}

static int forksrv_server(void)
{
	int l = listener((uint16_t)(port0 + 80), 1), ended = 0, st;
	pid_t k;
	CHECK(l >= 0, "listen: %s", strerror(errno));
	for (int i = 0; i < FS_N; i++) {
		struct pollfd p = {.fd = l, .events = POLLIN};
		int a;
		while (poll(&p, 1, 100) != 1)   /* the children that ended meanwhile */
			while ((k = waitpid(-1, &st, WNOHANG)) > 0)
				if (fs_reaped(k, st, &ended) < 0)
					return -1;
		a = accept(l, NULL, NULL);
		CHECK(a >= 0, "accept: %s", strerror(errno));
		fflush(stdout);
		k = fork();
		CHECK(k >= 0, "fork: %s", strerror(errno));
		if (k == 0) {   /* the child serves: echo, each byte + 1, until EOF */
			static uint8_t b[65536];
			ssize_t n;
			close(l);
			while ((n = read(a, b, sizeof(b))) > 0) {
				for (ssize_t j = 0; j < n; j++)
					b[j]++;
				if (write_full(a, b, (size_t)n) < 0) {
					say("FAIL forksrv: child %d: write: %s", i, strerror(errno));
					_exit(2);
				}
			}
			if (n < 0)   /* e.g. EBADF: the inherited connection was not handed over */
				say("FAIL forksrv: child %d: read: %s", i, strerror(errno));
			_exit(n == 0 && close(a) == 0 ? 0 : 3);
		}
		close(a);   /* the parent lets go at once, as forking servers do */
	}
	while (ended < FS_N) {
		k = waitpid(-1, &st, 0);
		if (fs_reaped(k, st, &ended) < 0)
			return -1;
	}
	CHECK(sock_stat("fork_paused") == FS_N, "fork_paused %lld", sock_stat("fork_paused"));
	close(l);
	say("ok forksrv server children=%d", ended);
	return 0;
}

static int forksrv_client(void)
{
	static uint8_t out[FS_LEN], back[FS_LEN];
	int c[FS_N];
	for (int i = 0; i < FS_N; i++) {
		c[i] = connect_to(1, (uint16_t)(port0 + 80), 0);
		CHECK(c[i] >= 0, "connect %d: %s", i, strerror(errno));
		if (i % 2 == 0) {   /* half write at once, before the server has forked */
			for (size_t k = 0; k < FS_LEN; k++)
				out[k] = (uint8_t)t_mix((uint32_t)(k + (size_t)i * 7919u));
			EXPECT_RC(write_full(c[i], out, FS_LEN), 0);
		}
	}
	for (int i = 0; i < FS_N; i++) {
		for (size_t k = 0; k < FS_LEN; k++)
			out[k] = (uint8_t)t_mix((uint32_t)(k + (size_t)i * 7919u));
		if (i % 2)
			EXPECT_RC(write_full(c[i], out, FS_LEN), 0);
		EXPECT_RC(shutdown(c[i], SHUT_WR), 0);
		EXPECT_RC(read_full(c[i], back, FS_LEN, 65536), 0);
		for (size_t k = 0; k < FS_LEN; k++)
			CHECK(back[k] == (uint8_t)(out[k] + 1), "connection %d byte %zu", i, k);
		EXPECT_RC(read(c[i], back, 1), 0);
		close(c[i]);
	}
	say("ok forksrv client connections=%d", FS_N);
	return 0;
}

/* exec'd by fork_client (execchild FD): after exec the inherited ParaNIC fd is nothing to
 * the library */
static int exec_child(void)
{
	int fd = case_arg ? atoi(case_arg) : -1;
	char x = 0;
	CHECK(fd >= 0, "execchild wants the fd");
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

SOCK_TEST_MAIN({"fork", fork_client, fork_server}, {"forksrv", forksrv_client, forksrv_server},
	       {"fork_udp", fork_udp_client, fork_udp_server}, {"execchild", exec_child, exec_child})
