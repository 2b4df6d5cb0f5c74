/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the socket emulation's test programs (sock_test_*.c) share. Each is a plain
 * BSD-sockets program (it does not link libparanic), one per concern, run as two
 * processes under pn_launch with LD_PRELOAD=libparanic_sock.so:
 *
 *   pn_launch -n 2 [-p 2] -- env LD_PRELOAD=.../libparanic_sock.so sock_test_CONCERN CASE
 *   sock_test_CONCERN addr NODE   the cluster address of NODE (PARANIC_SOCK_NET), no preload needed
 *
 *   sock_test_tcp    echo, many, eof, nonblock, mixed, refused, noport, cross, reset, os
 *   sock_test_udp    udp
 *   sock_test_ppn    ppn, reclaim (several processes per node: the directory)
 *   sock_test_epoll  epoll
 *   sock_test_fork   fork, forksrv, fork_udp (and execchild, which the fork case exec's)
 *   sock_test_if     iface, iface_off, beyond (the pn0 interface, addresses beyond the job)
 *   sock_test_zc     zcopy (sendfile, splice, MSG_ZEROCOPY)
 *
 * In a two-node case node 1 serves and node 0 is the client; each program's header says
 * what its cases check. Each prints "ok CASE ..." or "FAIL CASE: ..." and exits 0 only on
 * success. Every program is one translation unit: the helpers here are static, and its
 * main is sock_test_main over a table of its cases (struct sock_case).
 */
#ifndef PN_SOCK_TEST_H
#define PN_SOCK_TEST_H

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
static long long (*sock_stat)(const char *);   /* pn_sock_stat of the preloaded library */
static const char *self_path;      /* argv[0]: for a case that execs this program again */
static const char *case_arg;       /* argv[2], NULL without one */

enum { K_STALE = -1, K_OS = 0, K_CAND = 1, K_BOUND = 2, K_LISTEN = 3, K_CONN = 4, K_UDP = 5 };

static inline struct sockaddr_in node_sa(unsigned node, uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(sk_node_addr(&net, node));
	return a;
}

static inline int kind(int fd)
{
	return fd_kind ? fd_kind(fd) : -1;
}

static inline int read_full(int fd, void *buf, size_t len, size_t piece)
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

static inline int write_full(int fd, const void *buf, size_t len)
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
static inline int listener(uint16_t port, int any)
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
static inline int connect_to(unsigned node, uint16_t port, int flags)
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

static inline int check_addr(const struct sockaddr_in *a, uint32_t host, uint16_t port)
{
	return a->sin_family == AF_INET && ntohl(a->sin_addr.s_addr) == host && (!port || ntohs(a->sin_port) == port);
}

static inline struct sockaddr_in any_sa(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	return a;
}

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/* The start of every socket test program: "addr NODE" prints NODE's cluster address
 * (NULL, *rc 0); otherwise this process's node, the run's first port (SOCK_TEST_PORT, or
 * from the cluster's name), the preloaded library's exports, the SIGPIPE counter; the
 * case name (argv[1]), or NULL with *rc 1 when the set-up fails. */
static inline const char *sock_test_setup(int argc, char **argv, int *rc)
{
	const char *cs = argc > 1 ? argv[1] : "", *nets = getenv("PARANIC_SOCK_NET"), *cl = getenv("PARANIC_CLUSTER");
	uint32_t h = 5381;

	*rc = 1;
	if (sk_net_parse(nets && *nets ? nets : SK_DEFAULT_NET, &net) < 0) {
		say("FAIL setup: bad PARANIC_SOCK_NET");
		return NULL;
	}
	if (!strcmp(cs, "addr") && argc > 2) {
		struct in_addr a = {htonl(sk_node_addr(&net, (unsigned)atoi(argv[2])))};
		puts(inet_ntoa(a));
		*rc = 0;
		return NULL;
	}
	self_path = argv[0];
	case_arg = argc > 2 ? argv[2] : NULL;
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
		return NULL;
	}
	return cs;
}

/* A case of a test program: node 0 runs `run`, the other nodes `serve`; without `serve`
 * every process runs `run` (a case that looks at `me` itself). */
struct sock_case {
	const char *name;
	int (*run)(void);
	int (*serve)(void);
};

/* Every test program's main: the set-up, then the case named by argv[1]; exit 0 only
 * when it returned 0 and no check failed. */
static inline int sock_test_main(int argc, char **argv, const struct sock_case *cases, size_t n)
{
	const char *cs;
	int rc;

	if (!(cs = sock_test_setup(argc, argv, &rc)))
		return rc;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(cs, cases[i].name)) {
			int r = me && cases[i].serve ? cases[i].serve() : cases[i].run();
			return r == 0 && !t_failures ? 0 : 1;
		}
	say("FAIL %s: unknown case", cs);
	return 1;
}

#define SOCK_TEST_MAIN(...)                                                                  \
	int main(int argc, char **argv)                                                      \
	{                                                                                    \
		static const struct sock_case cases_[] = {__VA_ARGS__};                      \
		return sock_test_main(argc, argv, cases_, sizeof(cases_) / sizeof(cases_[0])); \
	}

#endif /* PN_SOCK_TEST_H */
