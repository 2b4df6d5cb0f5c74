/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_udp: UDP datagrams between two nodes (sock_test.h says how to run it).
 *
 *   udp       datagrams 0 .. 65507 bytes (boundaries, source address), EMSGSIZE above,
 *             truncation (MSG_TRUNC in msg_flags and as a flag), MSG_PEEK, EAGAIN,
 *             poll/select/FIONREAD, a socket bound to INADDR_ANY receiving from the cluster
 *             and from 127.0.0.1, connect + send/getpeername, sendmsg/recvmsg with iovecs,
 *             a send to a port nobody bound (dropped, counted)
 */
#include "sock_test.h"

/* ---- udp: datagrams between two nodes --------------------------------------------------------- */

static const size_t usizes[] = {0, 1, 100, 1472, 16384, 16385, 40000, 65507};
#define NUSIZES (sizeof(usizes) / sizeof(usizes[0]))

static int wait_byte(int c, char want)
{
	char x = 0;
	CHECK(read(c, &x, 1) == 1 && x == want, "control: read '%c', wanted '%c'", x, want);
	return 0;
}

static int udp_server(void)
{
	uint16_t up = (uint16_t)(port0 + 41);
	struct sockaddr_in a = any_sa(up), from, lo = {.sin_family = AF_INET};
	socklen_t fl = sizeof(from), al = sizeof(a), ll = sizeof(lo);
	int u = socket(AF_INET, SOCK_DGRAM, 0), l, c, o, v;
	uint8_t *buf = malloc(70000);
	char small[16];
	struct iovec iv[2];
	struct msghdr m;
	struct pollfd p;
	fd_set rs;
	struct timeval tv;
	uint64_t t0;
	uint16_t cport;
	ssize_t r;

	CHECK(u >= 0 && buf && kind(u) == K_CAND, "socket: kind %d", kind(u));
	EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK(kind(u) == K_UDP, "a UDP socket bound to INADDR_ANY is kind %d", kind(u));
	EXPECT_RC(getsockname(u, (struct sockaddr *)&a, &al), 0);
	CHECK(check_addr(&a, INADDR_ANY, up), "getsockname: %s:%u", inet_ntoa(a.sin_addr), ntohs(a.sin_port));
	{
		socklen_t vl = sizeof(v);
		EXPECT_RC(getsockopt(u, SOL_SOCKET, SO_TYPE, &v, &vl), 0);
		CHECK(v == SOCK_DGRAM, "SO_TYPE %d", v);
	}
	l = listener((uint16_t)(port0 + 40), 0);
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c = accept(l, NULL, NULL);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(write(c, "R", 1), 1);
	/* message boundaries, sizes 0 .. 65507, source address */
	for (size_t i = 0; i < NUSIZES; i++) {
		fl = sizeof(from);
		r = recvfrom(u, buf, 70000, 0, (struct sockaddr *)&from, &fl);
		CHECK(r == (ssize_t)usizes[i], "datagram %zu: %zd bytes, wanted %zu (%s)", i, r, usizes[i],
		      r < 0 ? strerror(errno) : "");
		CHECK(pat_check(buf, usizes[i], 100 + (uint32_t)i, 0) == (size_t)-1, "datagram %zu content", i);
		CHECK(fl == sizeof(from) && check_addr(&from, sk_node_addr(&net, 0), 0), "source %s",
		      inet_ntoa(from.sin_addr));
	}
	cport = ntohs(from.sin_port);
	EXPECT_RC(write(c, &cport, 2), 2);
	/* truncation: recv into 10 bytes takes the datagram; MSG_TRUNC in msg_flags; the
	 * MSG_TRUNC flag returns the real length */
	EXPECT_RC(recv(u, small, 10, 0), 10);
	CHECK(pat_check(small, 10, 7, 0) == (size_t)-1, "the head of a truncated datagram");
	iv[0] = (struct iovec){small, 4};
	iv[1] = (struct iovec){small + 4, 6};
	memset(&m, 0, sizeof(m));
	m.msg_iov = iv;
	m.msg_iovlen = 2;
	m.msg_name = &from;
	m.msg_namelen = sizeof(from);
	EXPECT_RC(recvmsg(u, &m, 0), 10);
	CHECK(m.msg_flags & MSG_TRUNC, "msg_flags 0x%x lacks MSG_TRUNC", m.msg_flags);
	CHECK(pat_check(small, 10, 8, 0) == (size_t)-1, "second truncated datagram (next boundary)");
	EXPECT_RC(recv(u, small, 10, MSG_TRUNC), 1000);
	/* peek */
	EXPECT_RC(recv(u, small, sizeof(small), MSG_PEEK), 5);
	EXPECT_RC(recv(u, small, sizeof(small), MSG_PEEK), 5);
	EXPECT_RC(recv(u, small, sizeof(small), 0), 5);
	CHECK(!memcmp(small, "peek1", 5), "peeked datagram %.5s", small);
	EXPECT_RC(recv(u, small, sizeof(small), 0), 5);
	CHECK(!memcmp(small, "peek2", 5), "the next one %.5s", small);
	/* nothing there: EAGAIN, poll and select time out */
	r = recv(u, small, sizeof(small), MSG_DONTWAIT);
	CHECK(r < 0 && errno == EAGAIN, "empty MSG_DONTWAIT recv: %zd %s", r, strerror(errno));
	v = fcntl(u, F_GETFL);
	EXPECT_RC(fcntl(u, F_SETFL, v | O_NONBLOCK), 0);
	r = recvfrom(u, small, sizeof(small), 0, NULL, NULL);
	CHECK(r < 0 && errno == EAGAIN, "empty non-blocking recv: %zd %s", r, strerror(errno));
	EXPECT_RC(fcntl(u, F_SETFL, v), 0);
	p = (struct pollfd){.fd = u, .events = POLLIN | POLLOUT};
	EXPECT_RC(poll(&p, 1, 100), 1);
	CHECK(p.revents == POLLOUT, "an empty UDP socket polls 0x%x", p.revents);
	p.events = POLLIN;
	t0 = t_now_ns();
	EXPECT_RC(poll(&p, 1, 100), 0);
	CHECK(t_now_ns() - t0 >= 90000000ull, "poll returned early");
	EXPECT_RC(write(c, "N", 1), 1);
	EXPECT_RC(poll(&p, 1, 5000), 1);
	CHECK(p.revents == POLLIN, "revents 0x%x", p.revents);
	FD_ZERO(&rs);
	FD_SET(u, &rs);
	tv = (struct timeval){5, 0};
	EXPECT_RC(select(u + 1, &rs, NULL, NULL, &tv), 1);
	EXPECT_RC(ioctl(u, FIONREAD, &v), 0);
	CHECK(v == 1, "FIONREAD %d", v);
	fl = sizeof(from);
	EXPECT_RC(recvfrom(u, small, sizeof(small), 0, (struct sockaddr *)&from, &fl), 1);
	CHECK(small[0] == 'x' && check_addr(&from, sk_node_addr(&net, 0), cport), "'x' from %s:%u",
	      inet_ntoa(from.sin_addr), ntohs(from.sin_port));
	/* the OS side of the wildcard socket: a datagram from 127.0.0.1 */
	o = socket(AF_INET, SOCK_DGRAM, 0);
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(o >= 0 && bind(o, (struct sockaddr *)&lo, sizeof(lo)) == 0 && kind(o) == K_OS, "OS socket: kind %d",
	      kind(o));
	EXPECT_RC(getsockname(o, (struct sockaddr *)&lo, &ll), 0);
	a = any_sa(up);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_RC(sendto(o, "os!", 3, 0, (struct sockaddr *)&a, sizeof(a)), 3);
	fl = sizeof(from);
	EXPECT_RC(recvfrom(u, small, sizeof(small), 0, (struct sockaddr *)&from, &fl), 3);
	CHECK(!memcmp(small, "os!", 3) && check_addr(&from, INADDR_LOOPBACK, ntohs(lo.sin_port)),
	      "the OS's datagram from %s", inet_ntoa(from.sin_addr));
	close(o);
	/* connect: a default peer for send; getpeername */
	a = node_sa(0, cport);
	EXPECT_RC(connect(u, (struct sockaddr *)&a, sizeof(a)), 0);
	fl = sizeof(from);
	EXPECT_RC(getpeername(u, (struct sockaddr *)&from, &fl), 0);
	CHECK(check_addr(&from, sk_node_addr(&net, 0), cport), "getpeername %s", inet_ntoa(from.sin_addr));
	EXPECT_RC(send(u, "hello", 5, 0), 5);
	/* sendmsg from the client, gathered: three parts into two */
	iv[0] = (struct iovec){buf, 3};
	iv[1] = (struct iovec){buf + 3, 100};
	memset(&m, 0, sizeof(m));
	m.msg_iov = iv;
	m.msg_iovlen = 2;
	EXPECT_RC(recvmsg(u, &m, 0), 12);
	CHECK(!memcmp(buf, "abcdefghijkl", 12) && !(m.msg_flags & MSG_TRUNC), "sendmsg's datagram");
	EXPECT_RC(wait_byte(c, 'E'), 0);
	close(c);
	close(l);
	close(u);
	free(buf);
	say("ok udp server");
	return 0;
}

static int udp_client(void)
{
	int c = connect_to(1, (uint16_t)(port0 + 40), 0), u = socket(AF_INET, SOCK_DGRAM, 0);
	uint16_t up = (uint16_t)(port0 + 41), seen;
	struct sockaddr_in to = node_sa(1, up), me_a, from;
	socklen_t ml = sizeof(me_a), fl = sizeof(from);
	uint8_t *buf = malloc(70000);
	struct iovec iv[3] = {{"abc", 3}, {"defgh", 5}, {"ijkl", 4}};
	struct msghdr m = {.msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = iv, .msg_iovlen = 3};
	char small[16];
	long long nobody0;
	ssize_t r;

	CHECK(c >= 0 && u >= 0 && buf, "connect: %s", strerror(errno));
	CHECK(kind(u) == K_CAND, "an unbound UDP socket is kind %d", kind(u));
	EXPECT_RC(wait_byte(c, 'R'), 0);
	for (size_t i = 0; i < NUSIZES; i++) {
		pat_fill(buf, usizes[i], 100 + (uint32_t)i, 0);
		EXPECT_RC(sendto(u, buf, usizes[i], 0, (struct sockaddr *)&to, sizeof(to)), usizes[i]);
		if (!i)
			CHECK(kind(u) == K_UDP, "after a send to the cluster the socket is kind %d", kind(u));
	}
	r = sendto(u, buf, 65508, 0, (struct sockaddr *)&to, sizeof(to));
	CHECK(r < 0 && errno == EMSGSIZE, "65508 bytes: %zd %s", r, strerror(errno));
	EXPECT_RC(getsockname(u, (struct sockaddr *)&me_a, &ml), 0);
	EXPECT_RC(read(c, &seen, 2), 2);
	CHECK(seen == ntohs(me_a.sin_port) && seen, "the server saw port %u, getsockname says %u", seen,
	      ntohs(me_a.sin_port));
	pat_fill(buf, 1000, 7, 0);
	EXPECT_RC(sendto(u, buf, 1000, 0, (struct sockaddr *)&to, sizeof(to)), 1000);
	pat_fill(buf, 1000, 8, 0);
	EXPECT_RC(sendto(u, buf, 1000, 0, (struct sockaddr *)&to, sizeof(to)), 1000);
	EXPECT_RC(sendto(u, buf, 1000, 0, (struct sockaddr *)&to, sizeof(to)), 1000);
	EXPECT_RC(sendto(u, "peek1", 5, 0, (struct sockaddr *)&to, sizeof(to)), 5);
	EXPECT_RC(sendto(u, "peek2", 5, 0, (struct sockaddr *)&to, sizeof(to)), 5);
	EXPECT_RC(wait_byte(c, 'N'), 0);
	EXPECT_RC(sendto(u, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)), 1);
	r = recvfrom(u, small, sizeof(small), 0, (struct sockaddr *)&from, &fl);
	CHECK(r == 5 && !memcmp(small, "hello", 5) && check_addr(&from, sk_node_addr(&net, 1), up),
	      "the reply: %zd from %s:%u", r, inet_ntoa(from.sin_addr), ntohs(from.sin_port));
	EXPECT_RC(sendmsg(u, &m, 0), 12);
	/* a cluster port nobody has bound: sent (UDP does not know), dropped, counted */
	nobody0 = sock_stat("udp_nobody");
	to.sin_port = htons((uint16_t)(up + 1));
	EXPECT_RC(sendto(u, "lost", 4, 0, (struct sockaddr *)&to, sizeof(to)), 4);
	CHECK(sock_stat("udp_nobody") == nobody0 + 1, "udp_nobody %lld -> %lld", nobody0, sock_stat("udp_nobody"));
	CHECK(sock_stat("udp_sent") >= (long long)NUSIZES + 7, "udp_sent %lld", sock_stat("udp_sent"));
	EXPECT_RC(write(c, "E", 1), 1);
	close(c);
	close(u);
	free(buf);
	say("ok udp client port=%u", seen);
	return 0;
}

SOCK_TEST_MAIN({"udp", udp_client, udp_server})
