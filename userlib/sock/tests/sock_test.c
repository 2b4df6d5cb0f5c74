/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test: a plain BSD-sockets program (it does not link libparanic) for the socket
 * emulation, run as two processes under pn_launch with LD_PRELOAD=libparanic_sock.so:
 *
 *   pn_launch -n 2 [-p 2] -- env LD_PRELOAD=.../libparanic_sock.so sock_test CASE
 *   sock_test addr NODE        the cluster address of NODE (PARANIC_SOCK_NET), no preload needed
 *
 * CASE (node 1 serves, node 0 is the client):
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
 *   udp       datagrams 0 .. 65507 bytes (boundaries, source address), EMSGSIZE above,
 *             truncation (MSG_TRUNC in msg_flags and as a flag), MSG_PEEK, EAGAIN,
 *             poll/select/FIONREAD, a socket bound to INADDR_ANY receiving from the cluster
 *             and from 127.0.0.1, connect + send/getpeername, sendmsg/recvmsg with iovecs,
 *             a send to a port nobody bound (dropped, counted)
 *   epoll     one epoll set: a cluster listener, its accepted connection, a UDP socket
 *             (EPOLLET), a pipe, a UDP socket on both sides; level-triggered repeats, MOD,
 *             DEL, EEXIST, a timed-out epoll_pwait
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
 *   ppn       (pn_launch -p PPN) every process connects to every other's listener (TCP,
 *             intra-node too) and sends datagrams to every other's UDP socket; the two
 *             processes of a node bind one port: one gets it, the other EADDRINUSE
 *   reclaim   (-n 1 -p 2) a killed process's port: EADDRINUSE while it lives, then
 *             datagrams to it are dropped and another process binds it
 * Prints "ok CASE ..." or "FAIL CASE: ..."; exits 0 only on success.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tutil.h"
#include "../sock_wire.h"

static unsigned me;
static struct sk_net net;
static uint16_t port0;             /* this run's first TCP port */
static int (*fd_kind)(int);        /* pn_sock_fd_kind of the preloaded library */
static volatile sig_atomic_t sigpipes;

enum { K_STALE = -1, K_OS = 0, K_CAND = 1, K_BOUND = 2, K_LISTEN = 3, K_CONN = 4, K_UDP = 5 };

static struct sockaddr_in node_sa(unsigned node, uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(sk_node_addr(&net, node));
	return a;
}

static int kind(int fd)
{
	return fd_kind ? fd_kind(fd) : -1;
}

static int read_full(int fd, void *buf, size_t len, size_t piece)
{
	size_t got = 0;
	while (got < len) {
		size_t want = len - got < piece ? len - got : piece;
		ssize_t r = read(fd, (uint8_t *)buf + got, want);
		if (r <= 0)
			return r == 0 ? -EPIPE : -errno;
		got += (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = write(fd, (const uint8_t *)buf + done, len - done);
		if (r < 0)
			return -errno;
		done += (size_t)r;
	}
	return 0;
}

/* A listener: on the wildcard address (any) or on this node's cluster address. */
static int listener(uint16_t port, int any)
{
	struct sockaddr_in a = node_sa(me, port);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (any)
		a.sin_addr.s_addr = htonl(INADDR_ANY);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Connect to a node's port, trying again while nobody listens yet (at most 10 s). */
static int connect_to(unsigned node, uint16_t port, int flags)
{
	struct sockaddr_in a = node_sa(node, port);
	uint64_t t0 = t_now_ns();
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | flags, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EINPROGRESS)
			return fd;
		int e = errno;
		close(fd);
		if (e != ECONNREFUSED || t_now_ns() - t0 > 10000000000ull) {
			errno = e;
			return -1;
		}
		t_sleep_us(10000);
	}
}

static int check_addr(const struct sockaddr_in *a, uint32_t host, uint16_t port)
{
	return a->sin_family == AF_INET && ntohl(a->sin_addr.s_addr) == host && (!port || ntohs(a->sin_port) == port);
}

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

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

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

	/* now the OS side only */
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

/* ---- udp: datagrams between two nodes --------------------------------------------------------- */

static long long (*sock_stat)(const char *);

static struct sockaddr_in any_sa(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	return a;
}

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

/* ---- ppn: several processes per node, all to all ----------------------------------------------- */

#define PPN_BYTES 100000   /* >= the largest datagram */
#define PPN_DGRAMS 30

static unsigned ppn, nprocs, myrank;

static uint16_t ppn_tcp_port(unsigned rank)
{
	return (uint16_t)(port0 + 20 + rank % ppn);   /* the same numbers on every node */
}

static uint16_t ppn_udp_port(unsigned rank)
{
	return (uint16_t)(port0 + 30 + rank % ppn);
}

static size_t ppn_dgram_len(unsigned from, unsigned i)
{
	return i == 0 ? 0 : i == 1 ? 65507 : (size_t)((from * 7919u + i * 2311u) % 40000u);
}

static void *ppn_serve(void *arg)
{
	int l = *(int *)arg, *bad = calloc(1, sizeof(int));
	uint8_t *buf = malloc(PPN_BYTES);
	for (unsigned k = 0; k + 1 < nprocs && bad && buf; k++) {
		uint32_t from;
		int c = accept(l, NULL, NULL);
		if (c < 0 || read_full(c, &from, 4, 4) < 0 || from >= nprocs || read_full(c, buf, PPN_BYTES, 7000) < 0 ||
		    pat_check(buf, PPN_BYTES, from * 64 + myrank, 0) != (size_t)-1 || write(c, "ok", 2) != 2) {
			say("FAIL ppn: connection %u from %u", k, from);
			*bad = 1;
		}
		close(c);
	}
	free(buf);
	return bad;
}

static int ppn_case(void)
{
	unsigned node = me, local = (unsigned)t_env_long("PARANIC_LOCAL_RANK", 0);
	int l, u, dup_fd, udp_dup;
	struct sockaddr_in a;
	pthread_t th;
	void *res;
	uint8_t *buf = malloc(PPN_BYTES);
	unsigned got = 0, seq[64] = {0};
	uint64_t t0;

	ppn = (unsigned)t_env_long("PARANIC_PPN", 1);
	nprocs = (unsigned)t_env_long("PARANIC_NODES", 2) * ppn;
	myrank = node * ppn + local;
	CHECK(buf && nprocs <= 64, "setup");
	/* one port number, both processes of the node: exactly one gets it (the other
	 * EADDRINUSE); both keep what they got until every process has connected to them */
	a = node_sa(node, (uint16_t)(port0 + 19));
	dup_fd = socket(AF_INET, SOCK_STREAM, 0);
	udp_dup = socket(AF_INET, SOCK_DGRAM, 0);
	{
		int rt = bind(dup_fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
		int ru = bind(udp_dup, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
		CHECK((rt == 0 || rt == EADDRINUSE) && (ru == 0 || ru == EADDRINUSE), "bind: %s / %s", strerror(rt),
		      strerror(ru));
		say("bind19 tcp=%s udp=%s", rt ? "EADDRINUSE" : "ok", ru ? "EADDRINUSE" : "ok");
	}
	u = socket(AF_INET, SOCK_DGRAM, 0);
	a = node_sa(node, ppn_udp_port(myrank));
	CHECK(u >= 0 && bind(u, (struct sockaddr *)&a, sizeof(a)) == 0, "UDP bind: %s", strerror(errno));
	CHECK(kind(u) == K_UDP, "kind %d", kind(u));
	l = listener(ppn_tcp_port(myrank), 0);
	CHECK(l >= 0, "listen: %s", strerror(errno));
	CHECK(pthread_create(&th, NULL, ppn_serve, &l) == 0, "thread");
	/* TCP to every other process's listener (its node, its port number), intra-node too */
	for (unsigned k = 1; k < nprocs; k++) {
		unsigned to = (myrank + k) % nprocs;
		int c = connect_to(to / ppn, ppn_tcp_port(to), 0);
		char ok[2];
		uint32_t r32 = myrank;
		CHECK(c >= 0, "connect to %u: %s", to, strerror(errno));
		pat_fill(buf, PPN_BYTES, myrank * 64 + to, 0);
		EXPECT_RC(write_full(c, &r32, 4), 0);
		EXPECT_RC(write_full(c, buf, PPN_BYTES), 0);
		EXPECT_RC(read_full(c, ok, 2, 2), 0);
		close(c);
	}
	CHECK(pthread_join(th, &res) == 0 && res && !*(int *)res, "the server thread failed");
	free(res);
	/* every other process has bound its UDP socket (it listened after): datagrams to all */
	for (unsigned i = 0; i < PPN_DGRAMS; i++)
		for (unsigned k = 1; k < nprocs; k++) {
			unsigned to = (myrank + k) % nprocs;
			struct sockaddr_in d = node_sa(to / ppn, ppn_udp_port(to));
			size_t n = ppn_dgram_len(myrank, i);
			pat_fill(buf, n, myrank * 1000 + to * 64 + i, 0);
			EXPECT_RC(sendto(u, buf, n, 0, (struct sockaddr *)&d, sizeof(d)), n);
		}
	t0 = t_now_ns();
	while (got < PPN_DGRAMS * (nprocs - 1)) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		struct pollfd p = {.fd = u, .events = POLLIN};
		ssize_t r;
		unsigned src;
		CHECK(t_now_ns() - t0 < 20000000000ull, "only %u datagrams in 20 s", got);
		if (poll(&p, 1, 1000) != 1)
			continue;
		r = recvfrom(u, buf, PPN_BYTES, 0, (struct sockaddr *)&from, &fl);
		CHECK(r >= 0, "recvfrom: %s", strerror(errno));
		src = (unsigned)sk_addr_node(&net, ntohl(from.sin_addr.s_addr), 64) * ppn +
		      (ntohs(from.sin_port) - ppn_udp_port(0));
		CHECK(src < nprocs && src != myrank, "a datagram from %s:%u", inet_ntoa(from.sin_addr),
		      ntohs(from.sin_port));
		CHECK((size_t)r == ppn_dgram_len(src, seq[src]) &&
		      pat_check(buf, (size_t)r, src * 1000 + myrank * 64 + seq[src], 0) == (size_t)-1,
		      "datagram %u of %u: %zd bytes", seq[src], src, r);
		seq[src]++;
		got++;
	}
	close(u);
	close(l);
	close(dup_fd);
	close(udp_dup);
	free(buf);
	say("ok ppn rank=%u connections=%u datagrams=%u", myrank, 2 * (nprocs - 1), got);
	return 0;
}

/* ---- epoll: ParaNIC and OS fds in one epoll set ------------------------------------------------ */

static int ep_has(const struct epoll_event *ev, int n, uint32_t tag, uint32_t bits)
{
	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 == tag && (ev[i].events & bits) == bits)
			return 1;
	return 0;
}

static int epoll_server(void)
{
	int l = listener((uint16_t)(port0 + 60), 0), u = socket(AF_INET, SOCK_DGRAM, 0), ep = epoll_create1(EPOLL_CLOEXEC);
	int pfd[2], c = -1, got_tcp = 0, got_udp = 0, n, rounds = 0;
	struct sockaddr_in a = node_sa(me, (uint16_t)(port0 + 61));
	struct epoll_event ev, evs[8], ev2[8];
	char buf[16];
	uint64_t t0;

	CHECK(l >= 0 && u >= 0 && ep >= 0 && pipe(pfd) == 0, "setup: %s", strerror(errno));
	EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK(kind(l) == K_LISTEN && kind(u) == K_UDP, "kinds %d %d", kind(l), kind(u));
	ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 1};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev), 0);
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u32 = 2};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev), 0);
	ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 3};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev), 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev) < 0 && errno == EEXIST, "a second ADD: %s", strerror(errno));
	/* an OS fd in a set with ParaNIC ones: the pipe's event with its data */
	EXPECT_RC(write(pfd[1], "x", 1), 1);
	n = epoll_wait(ep, evs, 8, 5000);
	CHECK(n >= 1 && ep_has(evs, n, 3, EPOLLIN), "the pipe not reported (%d events)", n);
	EXPECT_RC(read(pfd[0], buf, 1), 1);
	while (!got_tcp || !got_udp) {
		CHECK(++rounds < 100, "the client's data did not come");
		n = epoll_wait(ep, evs, 8, 5000);
		CHECK(n > 0, "epoll_wait: %d %s", n, strerror(errno));
		CHECK(!ep_has(evs, n, 3, 0), "the drained pipe reported again");
		if (ep_has(evs, n, 1, EPOLLIN)) {
			c = accept(l, NULL, NULL);
			CHECK(c >= 0 && kind(c) == K_CONN, "accept: %s", strerror(errno));
			ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 4};
			EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev), 0);
		}
		if (ep_has(evs, n, 4, EPOLLIN) && !got_tcp) {
			/* level-triggered: reported again while unread */
			int n2 = epoll_wait(ep, ev2, 8, 0);
			CHECK(ep_has(ev2, n2, 4, EPOLLIN), "level-triggered connection not reported again");
			EXPECT_RC(read_full(c, buf, 5, 5), 0);
			CHECK(!memcmp(buf, "hello", 5), "TCP data");
			got_tcp = 1;
		}
		if (ep_has(evs, n, 2, EPOLLIN) && !got_udp) {
			/* edge-triggered: not reported again until something new comes */
			int n2 = epoll_wait(ep, ev2, 8, 100);
			CHECK(!ep_has(ev2, n2, 2, 0), "EPOLLET: the UDP socket reported twice");
			EXPECT_RC(recv(u, buf, sizeof(buf), 0), 5);
			CHECK(!memcmp(buf, "dgram", 5), "UDP data");
			got_udp = 1;
		}
	}
	/* a UDP socket on both sides (INADDR_ANY): the kernel's event (a datagram from
	 * 127.0.0.1) and the library's (one from the client over the cluster), one entry */
	{
		struct sockaddr_in wa = any_sa((uint16_t)(port0 + 62)), lo = {.sin_family = AF_INET};
		int w = socket(AF_INET, SOCK_DGRAM, 0), o = socket(AF_INET, SOCK_DGRAM, 0), seen = 0;
		CHECK(w >= 0 && o >= 0 && bind(w, (struct sockaddr *)&wa, sizeof(wa)) == 0 && kind(w) == K_UDP,
		      "wildcard UDP: %s", strerror(errno));
		ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 6};
		EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, w, &ev), 0);
		lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		lo.sin_port = htons((uint16_t)(port0 + 62));
		EXPECT_RC(sendto(o, "os", 2, 0, (struct sockaddr *)&lo, sizeof(lo)), 2);
		EXPECT_RC(write(c, "w", 1), 1);   /* the client sends its datagram now */
		for (rounds = 0; seen != 3; rounds++) {
			ssize_t r;
			CHECK(rounds < 50, "wildcard UDP: seen %d", seen);
			n = epoll_wait(ep, evs, 8, 5000);
			if (!ep_has(evs, n, 6, EPOLLIN))
				continue;
			r = recv(w, buf, sizeof(buf), 0);
			CHECK(r == 2 && (!memcmp(buf, "os", 2) || !memcmp(buf, "cl", 2)), "wildcard UDP got %zd", r);
			seen |= buf[0] == 'o' ? 1 : 2;
		}
		close(o);
		close(w);
	}
	/* MOD to EPOLLOUT: writable; DEL; then nothing: a timed-out wait */
	ev = (struct epoll_event){.events = EPOLLOUT, .data.u32 = 5};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev), 0);
	n = epoll_wait(ep, evs, 8, 1000);
	CHECK(ep_has(evs, n, 5, EPOLLOUT), "EPOLLOUT after MOD (%d events)", n);
	EXPECT_RC(write(c, "bye", 3), 3);
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL), 0);
	t0 = t_now_ns();
	n = epoll_pwait(ep, evs, 8, 100, NULL);
	CHECK(n == 0 && t_now_ns() - t0 >= 90000000ull, "an idle wait: %d events after %.0f ms", n,
	      (double)(t_now_ns() - t0) / 1e6);
	EXPECT_RC(read(c, buf, 1), 0);   /* the client's close */
	close(c);
	close(ep);
	close(l);
	close(u);
	close(pfd[0]);
	close(pfd[1]);
	say("ok epoll server");
	return 0;
}

static int epoll_client(void)
{
	int c = connect_to(1, (uint16_t)(port0 + 60), 0), u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = node_sa(1, (uint16_t)(port0 + 61));
	char buf[4];
	CHECK(c >= 0 && u >= 0, "connect: %s", strerror(errno));
	EXPECT_RC(write(c, "hello", 5), 5);
	EXPECT_RC(sendto(u, "dgram", 5, 0, (struct sockaddr *)&to, sizeof(to)), 5);
	EXPECT_RC(read_full(c, buf, 1, 1), 0);
	to.sin_port = htons((uint16_t)(port0 + 62));
	EXPECT_RC(sendto(u, "cl", 2, 0, (struct sockaddr *)&to, sizeof(to)), 2);
	EXPECT_RC(read_full(c, buf, 3, 3), 0);
	CHECK(!memcmp(buf, "bye", 3), "reply");
	close(c);
	close(u);
	say("ok epoll client");
	return 0;
}

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

/* exec'd by fork_client: the inherited ParaNIC fd is nothing to the library now */
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

/* ---- reclaim: a dead process's directory entry (one node, two processes) ---------------------- */

static int reclaim_case(void)
{
	unsigned local = (unsigned)t_env_long("PARANIC_LOCAL_RANK", 0);
	struct sockaddr_in a = node_sa(me, (uint16_t)(port0 + 80));
	int u = socket(AF_INET, SOCK_DGRAM, 0), r;
	long long nobody;

	CHECK(u >= 0, "socket: %s", strerror(errno));
	if (local == 0) {   /* binds, then dies without closing */
		EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
		say("phase-bound");
		t_sleep_us(400000);
		raise(SIGKILL);
		return -1;
	}
	t_sleep_us(150000);
	r = bind(u, (struct sockaddr *)&a, sizeof(a));
	CHECK(r < 0 && errno == EADDRINUSE, "bind while the owner lives: %d %s", r, strerror(errno));
	t_sleep_us(1000000);   /* the owner is dead by now */
	nobody = sock_stat("udp_nobody");
	EXPECT_RC(sendto(u, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);
	CHECK(sock_stat("udp_nobody") == nobody + 1, "a dead owner's port still served");
	u = socket(AF_INET, SOCK_DGRAM, 0);
	EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
	EXPECT_RC(sendto(u, "y", 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);   /* to itself */
	EXPECT_RC(recv(u, &r, sizeof(r), 0), 1);
	say("ok reclaim");
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

int main(int argc, char **argv)
{
	const char *cs = argc > 1 ? argv[1] : "", *nets = getenv("PARANIC_SOCK_NET"), *cl = getenv("PARANIC_CLUSTER");
	uint32_t h = 5381;
	int r = -1;

	if (sk_net_parse(nets && *nets ? nets : SK_DEFAULT_NET, &net) < 0) {
		say("FAIL setup: bad PARANIC_SOCK_NET");
		return 1;
	}
	if (!strcmp(cs, "addr") && argc > 2) {
		struct in_addr a = {htonl(sk_node_addr(&net, (unsigned)atoi(argv[2])))};
		puts(inet_ntoa(a));
		return 0;
	}
	me = (unsigned)t_env_long("PARANIC_NODE", 0);
	for (const char *p = cl ? cl : ""; *p; p++)
		h = h * 33 + (uint8_t)*p;
	port0 = (uint16_t)t_env_long("SOCK_TEST_PORT", 20000 + (long)(h % 10000) * 4);
	*(void **)&fd_kind = dlsym(RTLD_DEFAULT, "pn_sock_fd_kind");
	*(void **)&sock_stat = dlsym(RTLD_DEFAULT, "pn_sock_stat");
	signal(SIGPIPE, on_sigpipe);
	t_case = cs;
	if (!fd_kind) {
		say("FAIL %s: libparanic_sock.so is not preloaded", cs);
		return 1;
	}
	if (!strcmp(cs, "echo"))
		r = me ? echo_server() : echo_client();
	else if (!strcmp(cs, "many"))
		r = me ? many_server() : many_client();
	else if (!strcmp(cs, "eof"))
		r = me ? (eof_server() || eof_server2()) : eof_client();
	else if (!strcmp(cs, "nonblock"))
		r = me ? nb_server() : nb_client();
	else if (!strcmp(cs, "mixed"))
		r = me ? mixed_server() : mixed_client();
	else if (!strcmp(cs, "refused"))
		r = me ? refused_server() : refused_client();
	else if (!strcmp(cs, "reset"))
		r = me ? reset_server() : reset_client();
	else if (!strcmp(cs, "noport"))
		r = me ? noport_server() : noport_client();
	else if (!strcmp(cs, "cross"))
		r = cross();
	else if (!strcmp(cs, "os"))
		r = os_only();
	else if (!strcmp(cs, "udp"))
		r = me ? udp_server() : udp_client();
	else if (!strcmp(cs, "ppn"))
		r = ppn_case();
	else if (!strcmp(cs, "reclaim"))
		r = reclaim_case();
	else if (!strcmp(cs, "epoll"))
		r = me ? epoll_server() : epoll_client();
	else if (!strcmp(cs, "fork"))
		r = me ? fork_server() : fork_client(argv[0]);
	else if (!strcmp(cs, "fork_udp"))
		r = me ? fork_udp_server() : fork_udp_client();
	else if (!strcmp(cs, "execchild") && argc > 2)
		r = exec_child(atoi(argv[2]));
	else
		say("FAIL %s: unknown case", cs);
	return r == 0 && !t_failures ? 0 : 1;
}
