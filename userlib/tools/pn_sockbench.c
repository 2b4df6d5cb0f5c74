/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_sockbench: TCP ping-pong and stream between two processes, a plain sockets program
 * (no libparanic): `paranic bench layers` runs it for the layers "sockets" (under
 * LD_PRELOAD=libparanic_sock.so, between two nodes of a job) and "os-tcp" (without
 * the preload library, over 127.0.0.1: the operating system's TCP on loopback).
 *
 *   pn_launch -n 2 -- [env LD_PRELOAD=.../libparanic_sock.so] pn_sockbench
 *       [--mode cluster|loopback] [--port P] [--bench pingpong,stream|all]
 *       [--min BYTES] [--max BYTES] [--scale F] [--layer NAME]
 *
 * Node 1 (PARANIC_NODE) listens, node 0 connects and prints one JSON object per size
 * and benchmark, as pn_bench does:
 *
 *   {"bench": "pingpong", "layer": "sockets", "backend": "sw", "bytes": 8, "iters": 20000,
 *    "ns_per_iter": ..., "median_ns_per_iter": ..., "min_ns_per_iter": ..., "iter_p10_ns": ...,
 *    "iter_p90_ns": ..., "iter_max_ns": ..., "iter_samples": ..., "wall_ns_per_iter": ..., "latency_ns": ...,
 *    "MBps": ..., "clock": "backend"|"monotonic", "fd_kind": 4}
 *
 * --mode cluster: node 1 binds its cluster address (PARANIC_SOCK_NET, as the library
 * computes it; sock_wire.h) and node 0 connects to it; loopback: 127.0.0.1. Both set
 * TCP_NODELAY. A connect refused (the peer not listening yet) is retried for 60 s.
 *
 * pingpong  node 0 writes BYTES, node 1 reads them all and writes BYTES back;
 *           latency_ns = half the round trip.
 * stream    node 0 writes `iters` messages of BYTES back to back (blocking writes),
 *           node 1 reads them and answers one byte; MBps = iters * BYTES / time.
 *
 * Time. Under the preload library the program looks up pn_sock_now_ns (dlsym): the
 * socket port's backend time, simulated time on the sim backend. There (clock
 * "backend", backend "sim") each ping-pong iteration is timed and the median is
 * reported with its spread (iter_p10_ns, iter_p90_ns, min_ns_per_iter, iter_max_ns,
 * iter_samples), as pn_bench does (simulated time runs on while a process waits for a
 * core, so the fastest is only the best case); stream reports the mean. Elsewhere the monotonic clock, mean over the iterations.
 * fd_kind is pn_sock_fd_kind of the connection (4: a ParaNIC connection; -1 without the
 * library): the caller checks that the sockets layer was really measured.
 * Iterations per size: scale * clamp(64 MiB / (bytes + 64), 8, 20000), as pn_bench.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tutil.h"
#include "../sock/sock_wire.h"

static uint64_t (*sock_now)(void);   /* pn_sock_now_ns of the preloaded library */
static int (*sock_fd_kind)(int);     /* pn_sock_fd_kind */
static int backend_clock;            /* time with sock_now */
static int per_iter;                 /* sample every iteration (sim) */
static double scale = 1.0;
static uint8_t *buf;
static size_t bufsz;
static uint64_t *samples;
static unsigned nsamples;

static uint64_t now_ns(void)
{
	return backend_clock ? sock_now() : t_now_ns();
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static unsigned iters_for(size_t n)
{
	double it = (64.0 * 1024 * 1024) / (double)(n + 64);
	if (it < 8)
		it = 8;
	if (it > 20000)
		it = 20000;
	it *= scale;
	return it < 2 ? 2 : (unsigned)it;
}

#define TRY(x)                                                                           \
	do {                                                                             \
		if ((x) < 0) {                                                           \
			say("FAIL sockbench: %s: %s", #x, strerror(errno));              \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

static int write_full(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_full(int fd, void *p, size_t n)
{
	uint8_t *b = p;
	while (n) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = ECONNRESET;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Read `total` bytes in pieces of at most bufsz (a stream of messages). */
static int read_total(int fd, size_t total)
{
	while (total) {
		size_t k = total < bufsz ? total : bufsz;
		ssize_t r = read(fd, buf, k);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = ECONNRESET;
		if (r <= 0)
			return -1;
		total -= (size_t)r;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int serve(struct sockaddr_in *a)
{
	int one = 1, l, c;
	TRY(l = socket(AF_INET, SOCK_STREAM, 0));
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	TRY(bind(l, (struct sockaddr *)a, sizeof(*a)));
	TRY(listen(l, 4));
	TRY(c = accept(l, NULL, NULL));
	close(l);
	nodelay(c);
	return c;
}

static int dial(struct sockaddr_in *a)
{
	uint64_t t0 = t_now_ns();
	for (;;) {
		int fd;
		TRY(fd = socket(AF_INET, SOCK_STREAM, 0));
		if (connect(fd, (struct sockaddr *)a, sizeof(*a)) == 0) {
			nodelay(fd);
			return fd;
		}
		if ((errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EINTR) ||
		    t_now_ns() - t0 > 60000000000ull) {
			say("FAIL sockbench: connect to %s:%u: %s", inet_ntoa(a->sin_addr), ntohs(a->sin_port),
			    strerror(errno));
			exit(1);
		}
		close(fd);
		t_sleep_us(10000);
	}
}

static void report(const char *bench, const char *layer, const char *backend, int kind, size_t n, unsigned it,
		   uint64_t ns, uint64_t wall, double latency, double mbps)
{
	/* samples[] is sorted (pingpong): median, p10, p90 (nearest rank), slowest */
	unsigned k = nsamples;
#define PCT(p) (k ? (double)samples[((uint64_t)(p) * k + 99) / 100 - 1] : -1.0)
	say("{\"bench\": \"%s\", \"layer\": \"%s\", \"backend\": \"%s\", \"bytes\": %zu, \"iters\": %u, "
	    "\"ns_per_iter\": %.1f, \"median_ns_per_iter\": %.1f, \"min_ns_per_iter\": %.1f, \"iter_p10_ns\": %.1f, "
	    "\"iter_p90_ns\": %.1f, \"iter_max_ns\": %.1f, \"iter_samples\": %u, \"wall_ns_per_iter\": %.1f, "
	    "\"latency_ns\": %.1f, \"MBps\": %.2f, \"clock\": \"%s\", \"fd_kind\": %d}",
	    bench, layer, backend, n, it, (double)ns / it,
	    k ? (k & 1 ? (double)samples[k / 2] : (samples[k / 2 - 1] + samples[k / 2]) / 2.0) : -1.0,
	    k ? (double)samples[0] : -1.0, PCT(10), PCT(90), k ? (double)samples[k - 1] : -1.0, k,
	    (double)wall / it, latency, mbps, backend_clock ? "backend" : "monotonic", kind);
#undef PCT
}

static void pingpong(int fd, unsigned me, size_t n, const char *layer, const char *backend, int kind)
{
	unsigned it = iters_for(n), warm = it / 10 + 1;
	uint64_t t0 = 0, w0 = 0, last = 0, t;

	nsamples = 0;
	for (unsigned i = 0; i < warm + it; i++) {
		if (i == warm) {
			t0 = last = now_ns();
			w0 = t_now_ns();
		}
		if (me == 0) {
			TRY(write_full(fd, buf, n));
			TRY(read_full(fd, buf, n));
		} else {
			TRY(read_full(fd, buf, n));
			TRY(write_full(fd, buf, n));
		}
		if (per_iter && i >= warm) {
			t = now_ns();
			samples[nsamples++] = t - last;
			last = t;
		}
	}
	uint64_t ns = now_ns() - t0, wall = t_now_ns() - w0;
	if (me != 0)
		return;
	double per = (double)ns / it;
	if (nsamples) {   /* the median iteration; the fastest (best case) beside it */
		qsort(samples, nsamples, sizeof(*samples), cmp_u64);
		per = nsamples & 1 ? (double)samples[nsamples / 2]
				   : (samples[nsamples / 2 - 1] + samples[nsamples / 2]) / 2.0;
	}
	if (per <= 0)
		per = 0.001;
	report("pingpong", layer, backend, kind, n, it, ns, wall, per / 2, n * 1e3 / (per / 2));
}

static void stream(int fd, unsigned me, size_t n, const char *layer, const char *backend, int kind)
{
	unsigned it = iters_for(n), warm = it / 10 + 1;
	uint64_t t0 = 0, w0 = 0;
	uint8_t ack = 0;

	nsamples = 0;
	for (int round = 0; round < 2; round++) {   /* a warm-up round, then the measured one */
		unsigned cnt = round ? it : warm;
		if (round) {
			t0 = now_ns();
			w0 = t_now_ns();
		}
		if (me == 0) {
			for (unsigned i = 0; i < cnt; i++)
				TRY(write_full(fd, buf, n));
			TRY(read_full(fd, &ack, 1));
		} else {
			TRY(read_total(fd, (size_t)cnt * n));
			TRY(write_full(fd, &ack, 1));
		}
	}
	uint64_t ns = now_ns() - t0, wall = t_now_ns() - w0;
	if (me != 0)
		return;
	if (!ns)
		ns = 1;
	report("stream", layer, backend, kind, n, it, ns, wall, (double)ns / it, (double)n * it * 1e3 / (double)ns);
}

int main(int argc, char **argv)
{
	const char *mode = "cluster", *benches = "all", *layer = NULL, *nets = getenv("PARANIC_SOCK_NET");
	const char *backend = getenv("PARANIC_BACKEND"), *node = getenv("PARANIC_NODE");
	size_t lo = 8, hi = 8;
	long port = 0;
	struct sk_net net;
	struct sockaddr_in a = {.sin_family = AF_INET};
	unsigned me;
	int fd, kind;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--bench") && i + 1 < argc)
			benches = argv[++i];
		else if (!strcmp(argv[i], "--min") && i + 1 < argc)
			lo = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--max") && i + 1 < argc)
			hi = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = atof(argv[++i]);
		else if (!strcmp(argv[i], "--layer") && i + 1 < argc)
			layer = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--mode cluster|loopback] [--port P] [--bench pingpong,stream|all] "
					"[--min N] [--max N] [--scale F] [--layer NAME]\n", argv[0]);
			return 2;
		}
	}
	if (!node || (strcmp(mode, "cluster") && strcmp(mode, "loopback")) || port < 1 || port > 65535 ||
	    !(scale > 0) || lo < 1 || lo > hi || hi > (1u << 30)) {
		say("FAIL sockbench: bad arguments (run under pn_launch; --mode cluster|loopback, --port 1..65535, "
		    "--scale > 0, 1 <= --min <= --max <= 1 GiB)");
		return 2;
	}
	me = (unsigned)atoi(node);
	if (me > 1)
		return 0;   /* two nodes measure */
	if (!backend || !*backend)
		backend = "sw";
	if (!layer)
		layer = strcmp(mode, "cluster") ? "os-tcp" : "sockets";
	if (!strcmp(mode, "cluster")) {
		if (sk_net_parse(nets && *nets ? nets : SK_DEFAULT_NET, &net) < 0) {
			say("FAIL sockbench: bad PARANIC_SOCK_NET '%s'", nets);
			return 2;
		}
		a.sin_addr.s_addr = htonl(sk_node_addr(&net, 1));
	} else {
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	a.sin_port = htons((uint16_t)port);
	*(void **)&sock_now = dlsym(RTLD_DEFAULT, "pn_sock_now_ns");
	*(void **)&sock_fd_kind = dlsym(RTLD_DEFAULT, "pn_sock_fd_kind");

	bufsz = hi;
	buf = malloc(bufsz);
	samples = calloc((size_t)(20000 * scale) + 2, sizeof(*samples));
	if (!buf || !samples)
		return 1;
	pat_fill(buf, bufsz, me, 0);

	fd = me == 1 ? serve(&a) : dial(&a);
	kind = sock_fd_kind ? sock_fd_kind(fd) : -1;
	/* One byte each way: both sides are connected and (under the library) the port is open. */
	{
		uint8_t b = 0;
		if (me == 0) {
			TRY(write_full(fd, &b, 1));
			TRY(read_full(fd, &b, 1));
		} else {
			TRY(read_full(fd, &b, 1));
			TRY(write_full(fd, &b, 1));
		}
	}
	backend_clock = sock_now && kind == 4 && sock_now() != 0;
	per_iter = backend_clock && !strcmp(backend, "sim");

	const char *names[] = {"pingpong", "stream"};
	for (size_t b = 0; b < 2; b++) {
		if (strcmp(benches, "all") && !strstr(benches, names[b]))
			continue;
		for (size_t n = lo; n <= hi; n *= 2) {
			if (b == 0)
				pingpong(fd, me, n, layer, backend, kind);
			else
				stream(fd, me, n, layer, backend, kind);
		}
	}
	/* Orderly end: node 0 shuts down its side, node 1 reads the EOF and closes. */
	if (me == 0) {
		uint8_t b;
		shutdown(fd, SHUT_WR);
		while (read(fd, &b, 1) > 0)
			;
	} else {
		uint8_t b;
		while (read(fd, &b, 1) > 0)
			;
	}
	close(fd);
	free(buf);
	free(samples);
	return 0;
}
