/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_tcp: TCP streams between two nodes (sock_test.h says how to run it).
 *
 *   echo      a listener on the wildcard address (OS and cluster); echo of 1 .. 1 MiB + 1
 *             bytes written whole and read in pieces, writev/readv, MSG_PEEK, MSG_WAITALL,
 *             addresses, options
 *   many      a listener bound to the cluster address; 64 connections open at once, then
 *             200 one after the other, each with its own data and EOF
 *   eof       shutdown(SHUT_WR) -> EOF, the peer's close -> EPIPE and SIGPIPE, dup
 *   nonblock  non-blocking connect, EAGAIN on read and on a full send buffer, poll and
 *             select time limits, 8 MiB through a slow reader
 *   mixed     the same process also talks over the OS's TCP on 127.0.0.1: those sockets stay
 *             the OS's, poll and select over a mixed set report each side right
 *   refused   ECONNREFUSED for a port nobody listens on; a connection to the node's own
 *             cluster address
 *   noport    node 1 opens no socket at all: a connect to it is refused (after the ports
 *             layer's connect timeout, PARANIC_PORT_TIMEOUT_MS)
 *   cross     both write 4 MiB before either reads (the library takes data in while a
 *             write waits, as the kernel's socket buffers would), then both read and check
 *   reset     node 1 is killed (SIGKILL) while node 0 waits in read: ECONNRESET
 *   os        (one process, not under pn_launch) outside a job every socket is the OS's:
 *             a 127.0.0.1 exchange with poll and select, nothing tracked by the library
 */
#include "sock_test.h"

/* ---- echo ------------------------------------------------------------------------------------ */

static const size_t sizes[] = {1, 2, 3, 7, 8, 100, 255, 256, 257, 1000, 1023, 1024, 1025, 2048, 4096, 8191,
			       16383, 16384, 16385, 32768, 65535, 65536, 100000, 262144, 1048575, 1048576,
			       1048577};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int echo_server(void)
{
	int l = listener(port0, 1), c, r;
	struct sockaddr_in pa;
	socklen_t pl = sizeof(pa);
	uint8_t *buf = malloc(2 << 20);
	size_t total = 0;

	CHECK(l >= 0 && buf, "listen: %s", strerror(errno));
	CHECK(kind(l) == K_LISTEN, "the wildcard listener is kind %d", kind(l));
	c = accept(l, (struct sockaddr *)&pa, &pl);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	CHECK(kind(c) == K_CONN, "accepted socket is kind %d", kind(c));
	CHECK(pl == sizeof(pa) && check_addr(&pa, sk_node_addr(&net, 0), 0), "accept gave the peer %s",
	      inet_ntoa(pa.sin_addr));
	for (size_t i = 0; i < NSIZES; i++) {
		size_t n = sizes[i];
		EXPECT_RC(read_full(c, buf, n, i % 3 == 1 ? 1000 : n), 0);
		EXPECT_RC(write_full(c, buf, n), 0);
		total += n;
	}
	/* writev and readv, MSG_PEEK, MSG_WAITALL */
	{
		char a[10], b[20], d[30];
		struct iovec iv[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {d, sizeof(d)}};
		EXPECT_RC(recv(c, a, 5, MSG_PEEK | MSG_WAITALL), 5);
		CHECK(!memcmp(a, "0123456789", 5), "MSG_PEEK saw %.5s", a);
		EXPECT_RC(recv(c, buf, 60, MSG_WAITALL), 60);
		memcpy(a, buf, 10);
		memcpy(b, buf + 10, 20);
		memcpy(d, buf + 30, 30);
		EXPECT_RC(writev(c, iv, 3), 60);
		EXPECT_RC(read_full(c, buf, 70000, 70000), 0);
		iv[0] = (struct iovec){buf, 30000};
		iv[1] = (struct iovec){buf + 30000, 40000};
		EXPECT_RC(writev(c, iv, 2), 70000);
	}
	r = (int)read(c, buf, 1);
	CHECK(r == 0, "after the client closed, read gave %d (%s)", r, r < 0 ? strerror(errno) : "data");
	close(c);
	close(l);
	free(buf);
	say("ok echo server bytes=%zu", total);
	return 0;
}

static int echo_client(void)
{
	int c = connect_to(1, port0, 0), one = 1, v;
	uint8_t *out = malloc(2 << 20), *in = malloc(2 << 20);
	struct sockaddr_in a;
	socklen_t al = sizeof(a), vl = sizeof(v);
	uint64_t t0;

	CHECK(c >= 0 && out && in, "connect: %s", strerror(errno));
	CHECK(kind(c) == K_CONN, "the connected socket is kind %d", kind(c));
	EXPECT_RC(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
	EXPECT_RC(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &vl), 0);
	CHECK(v == 1, "TCP_NODELAY reads back %d", v);
	vl = sizeof(v);
	EXPECT_RC(getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &vl), 0);
	CHECK(v == SOCK_STREAM, "SO_TYPE %d", v);
	EXPECT_RC(getpeername(c, (struct sockaddr *)&a, &al), 0);
	CHECK(check_addr(&a, sk_node_addr(&net, 1), port0), "getpeername %s:%u", inet_ntoa(a.sin_addr),
	      ntohs(a.sin_port));
	al = sizeof(a);
	EXPECT_RC(getsockname(c, (struct sockaddr *)&a, &al), 0);
	CHECK(check_addr(&a, sk_node_addr(&net, 0), 0) && ntohs(a.sin_port), "getsockname %s:%u",
	      inet_ntoa(a.sin_addr), ntohs(a.sin_port));
	t0 = t_now_ns();
	for (size_t i = 0; i < NSIZES; i++) {
		size_t n = sizes[i], bad;
		pat_fill(out, n, (uint32_t)n, 0);
		memset(in, 0, n);
		EXPECT_RC(write(c, out, n), (long)n);
		EXPECT_RC(read_full(c, in, n, i % 3 == 2 ? 4096 : n), 0);
		bad = pat_check(in, n, (uint32_t)n, 0);
		CHECK(bad == (size_t)-1, "size %zu: byte %zu wrong", n, bad);
	}
	{
		struct iovec iv[2] = {{(void *)"0123456789abcdefghij", 20}, {(void *)"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn", 40}};
		char got[60];
		EXPECT_RC(writev(c, iv, 2), 60);
		EXPECT_RC(recv(c, got, 60, MSG_WAITALL), 60);
		CHECK(!memcmp(got, "0123456789abcdefghijABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn", 60), "writev/readv");
		pat_fill(out, 70000, 7, 0);
		EXPECT_RC(write(c, out, 70000), 70000);
		EXPECT_RC(read_full(c, in, 70000, 70000), 0);
		CHECK(pat_check(in, 70000, 7, 0) == (size_t)-1, "70000 bytes through a two-part writev");
	}
	say("ok echo client sizes=%zu ms=%.1f", NSIZES, (double)(t_now_ns() - t0) / 1e6);
	close(c);
	free(out);
	free(in);
	return 0;
}

/* ---- many ------------------------------------------------------------------------------------ */

#define NOPEN 64
#define NSEQ 200

static int many_server(void)
{
	int l = listener((uint16_t)(port0 + 1), 0);
	uint32_t v;
	CHECK(l >= 0, "listen on the cluster address: %s", strerror(errno));
	CHECK(kind(l) == K_LISTEN, "cluster listener is kind %d", kind(l));
	for (int i = 0; i < NOPEN + NSEQ; i++) {
		int c = accept(l, NULL, NULL);
		char x;
		CHECK(c >= 0, "accept %d: %s", i, strerror(errno));
		EXPECT_RC(read_full(c, &v, sizeof(v), 4), 0);
		v = v * 2 + 1;
		EXPECT_RC(write(c, &v, sizeof(v)), 4);
		if (i >= NOPEN) {   /* one at a time: the client closes after our answer */
			EXPECT_RC(read(c, &x, 1), 0);
			close(c);
		} else {
			static int open_fds[NOPEN];
			open_fds[i] = c;
			if (i == NOPEN - 1)
				for (int j = 0; j < NOPEN; j++) {
					EXPECT_RC(read(open_fds[j], &x, 1), 0);
					close(open_fds[j]);
				}
		}
	}
	close(l);
	say("ok many server accepted=%d", NOPEN + NSEQ);
	return 0;
}

static int many_client(void)
{
	int fds[NOPEN];
	uint64_t t0;
	for (int i = 0; i < NOPEN; i++) {
		uint32_t v = (uint32_t)i;
		fds[i] = connect_to(1, (uint16_t)(port0 + 1), 0);
		CHECK(fds[i] >= 0, "connection %d: %s", i, strerror(errno));
		EXPECT_RC(write(fds[i], &v, 4), 4);
	}
	for (int i = NOPEN - 1; i >= 0; i--) {
		uint32_t v;
		EXPECT_RC(read_full(fds[i], &v, 4, 4), 0);
		CHECK(v == (uint32_t)(2 * i + 1), "connection %d got %u", i, v);
	}
	for (int i = 0; i < NOPEN; i++)
		close(fds[i]);
	t0 = t_now_ns();
	for (int i = 0; i < NSEQ; i++) {
		uint32_t v = (uint32_t)(1000 + i);
		int c = connect_to(1, (uint16_t)(port0 + 1), 0);
		CHECK(c >= 0, "sequential connection %d: %s", i, strerror(errno));
		EXPECT_RC(write(c, &v, 4), 4);
		EXPECT_RC(read_full(c, &v, 4, 4), 0);
		CHECK(v == (uint32_t)(2 * (1000 + i) + 1), "sequential connection %d got %u", i, v);
		close(c);
	}
	say("ok many client open=%d sequential=%d us_per_connection=%.1f", NOPEN, NSEQ,
	    (double)(t_now_ns() - t0) / 1e3 / NSEQ);
	return 0;
}

/* ---- eof ------------------------------------------------------------------------------------- */

static int eof_server(void)
{
	int l = listener((uint16_t)(port0 + 2), 0), c;
	uint8_t buf[5000];
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c = accept(l, NULL, NULL);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read_full(c, buf, sizeof(buf), 777), 0);
	CHECK(pat_check(buf, sizeof(buf), 5, 0) == (size_t)-1, "data before the FIN");
	EXPECT_RC(read(c, buf, sizeof(buf)), 0);
	EXPECT_RC(read(c, buf, sizeof(buf)), 0);   /* EOF stays */
	EXPECT_RC(write(c, "bye", 3), 3);
	close(c);
	close(l);
	return 0;
}

static int eof_client(void)
{
	int c = connect_to(1, (uint16_t)(port0 + 2), 0), d;
	uint8_t buf[5000];
	char bye[4] = {0};
	uint64_t t0;
	ssize_t r;

	CHECK(c >= 0, "connect: %s", strerror(errno));
	pat_fill(buf, sizeof(buf), 5, 0);
	/* the data goes through a duplicate; the original is closed first: the socket lives on */
	d = dup(c);
	CHECK(d >= 0 && kind(d) == K_CONN, "dup gave %d of kind %d", d, kind(d));
	close(c);
	CHECK(kind(c) == K_OS, "closed fd still known");
	EXPECT_RC(write(d, buf, sizeof(buf)), (long)sizeof(buf));
	EXPECT_RC(shutdown(d, SHUT_WR), 0);
	r = write(d, buf, 1);
	CHECK(r < 0 && errno == EPIPE, "write after SHUT_WR: %zd %s", r, strerror(errno));
	CHECK(sigpipes == 1, "SIGPIPE count %d", (int)sigpipes);
	EXPECT_RC(read_full(d, bye, 3, 3), 0);
	CHECK(!strcmp(bye, "bye"), "got %s", bye);
	EXPECT_RC(read(d, buf, 10), 0);
	close(d);

	/* the peer closed: EPIPE (after its CLOSE has arrived) */
	c = connect_to(1, (uint16_t)(port0 + 3), 0);
	CHECK(c >= 0, "second connect: %s", strerror(errno));
	EXPECT_RC(read(c, bye, 1), 0);   /* the server closed at once */
	t0 = t_now_ns();
	do {
		r = send(c, "x", 1, MSG_NOSIGNAL);
	} while (r == 1 && t_now_ns() - t0 < 2000000000ull);
	CHECK(r < 0 && errno == EPIPE, "send to a closed peer: %zd %s", r, strerror(errno));
	CHECK(sigpipes == 1, "MSG_NOSIGNAL raised SIGPIPE");
	r = write(c, "x", 1);
	CHECK(r < 0 && errno == EPIPE && sigpipes == 2, "write to a closed peer: %zd %s, %d SIGPIPEs", r,
	      strerror(errno), (int)sigpipes);
	close(c);
	say("ok eof client");
	return 0;
}

static int eof_server2(void)
{
	int l = listener((uint16_t)(port0 + 3), 0), c;
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c = accept(l, NULL, NULL);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	close(c);
	close(l);
	say("ok eof server");
	return 0;
}

/* ---- nonblock -------------------------------------------------------------------------------- */

#define NB_BYTES (8u << 20)

static int nb_server(void)
{
	int l = listener((uint16_t)(port0 + 4), 1), c, fl;
	uint8_t *buf = malloc(NB_BYTES);
	uint32_t sum = 0;
	CHECK(l >= 0 && buf, "listen: %s", strerror(errno));
	fl = fcntl(l, F_GETFL);
	EXPECT_RC(fcntl(l, F_SETFL, fl | O_NONBLOCK), 0);
	for (;;) {   /* a non-blocking accept, woken by poll */
		struct pollfd p = {.fd = l, .events = POLLIN};
		c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			break;
		CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "accept: %s", strerror(errno));
		CHECK(poll(&p, 1, 10000) == 1, "poll on the listener");
	}
	CHECK(kind(c) == K_CONN, "kind %d", kind(c));
	CHECK(fcntl(c, F_GETFD) & FD_CLOEXEC, "SOCK_CLOEXEC lost");
	t_sleep_us(300000);   /* the client's send buffer fills meanwhile */
	EXPECT_RC(read_full(c, buf, NB_BYTES, 65536), 0);
	CHECK(pat_check(buf, NB_BYTES, 9, 0) == (size_t)-1, "8 MiB stream");
	for (size_t i = 0; i < NB_BYTES; i++)
		sum = sum * 31 + buf[i];
	t_sleep_us(100000);
	EXPECT_RC(write(c, &sum, 4), 4);
	EXPECT_RC(read(c, buf, 1), 0);
	close(c);
	close(l);
	free(buf);
	say("ok nonblock server");
	return 0;
}

static int nb_client(void)
{
	int c = connect_to(1, (uint16_t)(port0 + 4), SOCK_NONBLOCK), v, eagain = 0, n;
	socklen_t vl = sizeof(v);
	struct pollfd p;
	uint8_t *buf = malloc(NB_BYTES);
	size_t off = 0;
	uint32_t sum = 0, got;
	uint64_t t0;
	fd_set rs;
	struct timeval tv;

	CHECK(c >= 0 && buf, "connect: %s", strerror(errno));
	CHECK(kind(c) == K_CONN, "kind %d", kind(c));
	CHECK(fcntl(c, F_GETFL) & O_NONBLOCK, "O_NONBLOCK not reported");
	p = (struct pollfd){.fd = c, .events = POLLOUT};
	EXPECT_RC(poll(&p, 1, 10000), 1);
	CHECK(p.revents & POLLOUT, "revents %#x", p.revents);
	EXPECT_RC(getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl), 0);
	CHECK(v == 0, "SO_ERROR %d", v);
	CHECK(read(c, buf, 10) < 0 && errno == EAGAIN, "read with nothing there: %s", strerror(errno));
	p = (struct pollfd){.fd = c, .events = POLLIN};
	t0 = t_now_ns();
	EXPECT_RC(poll(&p, 1, 100), 0);
	CHECK(t_now_ns() - t0 >= 95000000ull, "poll returned after %.1f ms", (double)(t_now_ns() - t0) / 1e6);
	pat_fill(buf, NB_BYTES, 9, 0);
	for (size_t i = 0; i < NB_BYTES; i++)
		sum = sum * 31 + buf[i];
	while (off < NB_BYTES) {
		ssize_t r = write(c, buf + off, NB_BYTES - off);
		if (r < 0) {
			CHECK(errno == EAGAIN, "write: %s", strerror(errno));
			eagain++;
			p = (struct pollfd){.fd = c, .events = POLLOUT};
			CHECK(poll(&p, 1, 10000) == 1, "poll POLLOUT");
			continue;
		}
		off += (size_t)r;
	}
	memset(buf, 0, NB_BYTES);   /* the library copied what it took */
	CHECK(eagain > 0, "the send buffer never filled");
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	tv = (struct timeval){10, 0};
	n = select(c + 1, &rs, NULL, NULL, &tv);
	CHECK(n == 1 && FD_ISSET(c, &rs), "select: %d", n);
	CHECK(tv.tv_sec < 10 || tv.tv_usec < 1000000, "select's time left");
	EXPECT_RC(read(c, &got, 4), 4);
	CHECK(got == sum, "checksum %08x, expected %08x", got, sum);
	close(c);
	free(buf);
	say("ok nonblock client eagain=%d", eagain);
	return 0;
}

/* ---- mixed: the OS's TCP in the same program --------------------------------------------------- */

static int mixed_server(void)
{
	int l = listener((uint16_t)(port0 + 5), 0), c;
	char buf[16];
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c = accept(l, NULL, NULL);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read_full(c, buf, 5, 5), 0);   /* "ready" */
	t_sleep_us(50000);
	EXPECT_RC(write(c, "cluster", 7), 7);
	EXPECT_RC(read(c, buf, 1), 0);
	close(c);
	close(l);
	say("ok mixed server");
	return 0;
}

static int mixed_client(void)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t ll = sizeof(lo);
	int l = socket(AF_INET, SOCK_STREAM, 0), o, a, c;
	struct pollfd p[2];
	char buf[16] = {0};
	fd_set rs;
	struct timeval tv = {5, 0};

	CHECK(l >= 0 && bind(l, (struct sockaddr *)&lo, sizeof(lo)) == 0 && listen(l, 4) == 0, "OS listener: %s",
	      strerror(errno));
	CHECK(kind(l) == K_OS, "a 127.0.0.1 listener is kind %d", kind(l));
	EXPECT_RC(getsockname(l, (struct sockaddr *)&lo, &ll), 0);
	o = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(o >= 0 && connect(o, (struct sockaddr *)&lo, sizeof(lo)) == 0, "OS connect: %s", strerror(errno));
	a = accept(l, NULL, NULL);
	CHECK(a >= 0, "OS accept: %s", strerror(errno));
	CHECK(kind(o) == K_OS && kind(a) == K_OS, "OS sockets of kind %d, %d", kind(o), kind(a));
	c = connect_to(1, (uint16_t)(port0 + 5), 0);
	CHECK(c >= 0 && kind(c) == K_CONN, "cluster connect: %s", strerror(errno));
	EXPECT_RC(write(c, "ready", 5), 5);

	/* the cluster side becomes readable (after 50 ms), the OS side not */
	p[0] = (struct pollfd){.fd = a, .events = POLLIN};
	p[1] = (struct pollfd){.fd = c, .events = POLLIN};
	EXPECT_RC(poll(p, 2, 5000), 1);
	CHECK(!p[0].revents && (p[1].revents & POLLIN), "revents %#x %#x", p[0].revents, p[1].revents);
	EXPECT_RC(read_full(c, buf, 7, 7), 0);
	CHECK(!memcmp(buf, "cluster", 7), "got %s", buf);

	/* then the OS side only */
	EXPECT_RC(write(o, "kernel", 6), 6);
	p[0].revents = p[1].revents = 0;
	EXPECT_RC(poll(p, 2, 5000), 1);
	CHECK((p[0].revents & POLLIN) && !p[1].revents, "revents %#x %#x", p[0].revents, p[1].revents);
	FD_ZERO(&rs);
	FD_SET(a, &rs);
	FD_SET(c, &rs);
	EXPECT_RC(select((a > c ? a : c) + 1, &rs, NULL, NULL, &tv), 1);
	CHECK(FD_ISSET(a, &rs) && !FD_ISSET(c, &rs), "select over the mixed set");
	EXPECT_RC(read_full(a, buf, 6, 6), 0);
	CHECK(!memcmp(buf, "kernel", 6), "OS data %s", buf);
	EXPECT_RC(write(a, "back", 4), 4);
	EXPECT_RC(read_full(o, buf, 4, 4), 0);
	CHECK(!memcmp(buf, "back", 4), "OS data back %s", buf);
	close(o);
	close(a);
	close(l);
	close(c);
	say("ok mixed client");
	return 0;
}

/* ---- refused, self -------------------------------------------------------------------------- */

static int refused_server(void)
{
	int l = listener((uint16_t)(port0 + 6), 0), c;
	char x;
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c = accept(l, NULL, NULL);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read(c, &x, 1), 0);
	close(c);
	close(l);
	say("ok refused server");
	return 0;
}

static int refused_client(void)
{
	struct sockaddr_in a = node_sa(1, (uint16_t)(port0 + 7));
	int c = connect_to(1, (uint16_t)(port0 + 6), 0), s, l, x;
	uint64_t t0;
	CHECK(c >= 0, "connect: %s", strerror(errno));   /* node 1 is up */
	s = socket(AF_INET, SOCK_STREAM, 0);
	t0 = t_now_ns();
	CHECK(connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == ECONNREFUSED, "connect to a closed port: %s",
	      strerror(errno));
	CHECK(t_now_ns() - t0 < 1000000000ull, "refusal took %.0f ms", (double)(t_now_ns() - t0) / 1e6);
	close(s);
	close(c);

	/* this node's own address: a listener and a connection in one process */
	l = listener((uint16_t)(port0 + 8), 0);
	CHECK(l >= 0, "own listener: %s", strerror(errno));
	s = connect_to(0, (uint16_t)(port0 + 8), 0);
	CHECK(s >= 0 && kind(s) == K_CONN, "connect to self: %s", strerror(errno));
	c = accept(l, NULL, NULL);
	CHECK(c >= 0, "accept from self: %s", strerror(errno));
	x = 12345;
	EXPECT_RC(write(s, &x, 4), 4);
	x = 0;
	EXPECT_RC(read_full(c, &x, 4, 4), 0);
	CHECK(x == 12345, "self got %d", x);
	close(s);
	EXPECT_RC(read(c, &x, 4), 0);
	close(c);
	close(l);
	say("ok refused client");
	return 0;
}

/* ---- noport: nobody at the node's socket context ------------------------------------------------ */

static int noport_server(void)
{
	say("ok noport server");
	return 0;
}

static int noport_client(void)
{
	struct sockaddr_in a = node_sa(1, port0);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	uint64_t t0 = t_now_ns();
	CHECK(s >= 0, "socket: %s", strerror(errno));
	CHECK(connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == ECONNREFUSED, "connect: %s",
	      strerror(errno));
	CHECK(kind(s) == K_CONN, "kind %d", kind(s));
	close(s);
	say("ok noport client ms=%.0f", (double)(t_now_ns() - t0) / 1e6);
	return 0;
}

/* ---- cross: both write before reading ---------------------------------------------------------- */

#define CROSS_BYTES (4u << 20)

static int cross(void)
{
	int c, l = -1;
	uint8_t *out = malloc(CROSS_BYTES), *in = malloc(CROSS_BYTES);
	CHECK(out && in, "memory");
	if (me) {
		l = listener((uint16_t)(port0 + 10), 0);
		CHECK(l >= 0, "listen: %s", strerror(errno));
		c = accept(l, NULL, NULL);
	} else {
		c = connect_to(1, (uint16_t)(port0 + 10), 0);
	}
	CHECK(c >= 0, "connection: %s", strerror(errno));
	pat_fill(out, CROSS_BYTES, 11 + me, 0);
	EXPECT_RC(write(c, out, 1 << 20), 1 << 20);                           /* one rendezvous message */
	EXPECT_RC(write(c, out + (1 << 20), CROSS_BYTES - (1 << 20)), CROSS_BYTES - (1 << 20));   /* three */
	EXPECT_RC(read_full(c, in, CROSS_BYTES, 100000), 0);
	CHECK(pat_check(in, CROSS_BYTES, 12 - me, 0) == (size_t)-1, "data from the peer");
	close(c);
	if (l >= 0)
		close(l);
	free(out);
	free(in);
	say("ok cross %s", me ? "server" : "client");
	return 0;
}

/* ---- reset: the peer is killed -------------------------------------------------------------- */

static int reset_server(void)
{
	int l = listener((uint16_t)(port0 + 9), 0), c;
	char x;
	CHECK(l >= 0, "listen: %s", strerror(errno));
	c = accept(l, NULL, NULL);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	EXPECT_RC(read(c, &x, 1), 1);
	say("phase-kill");
	raise(SIGKILL);
	return -1;
}

static int reset_client(void)
{
	int c = connect_to(1, (uint16_t)(port0 + 9), 0);
	char x;
	ssize_t r;
	uint64_t t0;
	CHECK(c >= 0, "connect: %s", strerror(errno));
	EXPECT_RC(write(c, "k", 1), 1);
	t0 = t_now_ns();
	r = read(c, &x, 1);
	CHECK(r < 0 && errno == ECONNRESET, "read from a killed peer: %zd %s", r, r < 0 ? strerror(errno) : "");
	say("ok reset client ms=%.0f", (double)(t_now_ns() - t0) / 1e6);
	close(c);
	return 0;
}

/* ---- os: a process outside a job ------------------------------------------------------------ */

static int os_only(void)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t ll = sizeof(lo);
	int l = socket(AF_INET, SOCK_STREAM, 0), o, a;
	uint8_t *buf = malloc(100000), *in = malloc(100000);
	struct pollfd p;
	fd_set rs;
	struct timeval tv = {5, 0};

	CHECK(buf && in && l >= 0 && kind(l) == K_OS, "socket of kind %d", kind(l));
	CHECK(bind(l, (struct sockaddr *)&lo, sizeof(lo)) == 0 && listen(l, 4) == 0, "listen: %s", strerror(errno));
	EXPECT_RC(getsockname(l, (struct sockaddr *)&lo, &ll), 0);
	o = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(o >= 0 && connect(o, (struct sockaddr *)&lo, sizeof(lo)) == 0, "connect: %s", strerror(errno));
	a = accept(l, NULL, NULL);
	CHECK(a >= 0 && kind(a) == K_OS && kind(o) == K_OS, "accept: %s", strerror(errno));
	pat_fill(buf, 100000, 3, 0);
	EXPECT_RC(write_full(o, buf, 100000), 0);
	p = (struct pollfd){.fd = a, .events = POLLIN};
	EXPECT_RC(poll(&p, 1, 5000), 1);
	EXPECT_RC(read_full(a, in, 100000, 100000), 0);
	CHECK(pat_check(in, 100000, 3, 0) == (size_t)-1, "data over the OS's TCP");
	EXPECT_RC(write(a, "x", 1), 1);
	FD_ZERO(&rs);
	FD_SET(o, &rs);
	EXPECT_RC(select(o + 1, &rs, NULL, NULL, &tv), 1);
	EXPECT_RC(read(o, in, 1), 1);
	close(o);
	EXPECT_RC(read(a, in, 1), 0);
	close(a);
	close(l);
	free(buf);
	free(in);
	say("ok os");
	return 0;
}

/* eof's server part: two connections in turn */
static int eof_servers(void)
{
	return eof_server() || eof_server2();
}

SOCK_TEST_MAIN({"echo", echo_client, echo_server}, {"many", many_client, many_server},
	       {"eof", eof_client, eof_servers}, {"nonblock", nb_client, nb_server}, {"mixed", mixed_client, mixed_server},
	       {"refused", refused_client, refused_server}, {"reset", reset_client, reset_server},
	       {"noport", noport_client, noport_server}, {"cross", cross, NULL}, {"os", os_only, NULL})
