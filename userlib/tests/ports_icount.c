/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports_icount: a deterministic ping-pong of the ports layer for instruction counts.
 *
 *   ports_icount MODE ITERS [BYTES]          (sw backend, one process, one thread)
 *
 * Two ports of one process on a 2-node sw cluster of its own: A = node 0 ctx 1, B = node
 * 1 ctx 1 (the NIC path; PARANIC_PORT_SHM as usual). The sw NIC delivers in the sender's
 * doorbell, so every receive finds its packet at its first poll: no waiting, no spinning,
 * and the same instructions in every run. MODE:
 *   posted  round trips with the receive posted before the message arrives (as in a
 *           two-process ping-pong): B irecv, A send, B wait; A irecv, B send, A wait
 *   unx     round trips through the unexpected queue: A send, B recv; B send, A recv
 *   idle    pn_port_progress on A with nothing arriving (one empty progress round: the
 *           cost of one poll of a waiting receiver)
 * The measured loop is the function run_loop, for callgrind:
 *   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=run_loop \
 *            ports_icount posted 2000 8
 * (instructions per round trip = Ir / ITERS). Without valgrind it prints the wall time
 * per iteration. Prints "ok icount ..." and exits 0 on success.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paranic/pn_ports.h"

static pn_port_t *A, *B;
static unsigned char sbuf[1 << 16], rbuf[1 << 16];

static int open_one(pn_port_t **p, const char *cluster, int node)
{
	pn_port_opts_t o;
	pn_port_opts_init(&o);
	o.hal.backend = "sw";
	o.hal.cluster = cluster;
	o.hal.node = node;
	o.hal.nodes = 2;
	o.hal.ctx = 1;
	return pn_port_open(p, &o);
}

/* One round trip A -> B -> A. */
static int round_trip(int posted, size_t n, unsigned i)
{
	pn_port_status_t st;
	pn_port_req_t *r;
	if (posted) {
		if (pn_port_irecv(B, 0, 1, 0, 0, 0, rbuf, n, &r) < 0 || pn_port_send(A, 1, 1, 0, i, sbuf, n) < 0 ||
		    pn_port_wait(B, &r, &st, -1) < 0)
			return -1;
		if (pn_port_irecv(A, 1, 1, 0, 0, 0, rbuf, n, &r) < 0 || pn_port_send(B, 0, 1, 0, i, sbuf, n) < 0 ||
		    pn_port_wait(A, &r, &st, -1) < 0)
			return -1;
		return 0;
	}
	if (pn_port_send(A, 1, 1, 0, i, sbuf, n) < 0 || pn_port_recv(B, 0, 1, 0, 0, 0, rbuf, n, &st, -1) != (int)n)
		return -1;
	if (pn_port_send(B, 0, 1, 0, i, sbuf, n) < 0 || pn_port_recv(A, 1, 1, 0, 0, 0, rbuf, n, &st, -1) != (int)n)
		return -1;
	return 0;
}

/* The measured loop (callgrind --toggle-collect=run_loop). */
__attribute__((noinline)) int run_loop(int mode, unsigned iters, size_t n);
__attribute__((noinline)) int run_loop(int mode, unsigned iters, size_t n)
{
	for (unsigned i = 0; i < iters; i++) {
		if (mode == 2) {
			if (pn_port_progress(A) < 0)
				return -1;
		} else if (round_trip(mode == 0, n, i) < 0) {
			return -1;
		}
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	char cluster[64];
	const char *ms = argc > 1 ? argv[1] : "posted";
	unsigned iters = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 1000;
	size_t n = argc > 3 ? strtoul(argv[3], NULL, 0) : 8;
	int mode = !strcmp(ms, "posted") ? 0 : !strcmp(ms, "unx") ? 1 : !strcmp(ms, "idle") ? 2 : -1;
	int r;
	uint64_t t0;

	if (mode < 0 || n > sizeof(sbuf)) {
		fprintf(stderr, "usage: ports_icount posted|unx|idle ITERS [BYTES <= 65536]\n");
		return 2;
	}
	snprintf(cluster, sizeof(cluster), "icount-%d", (int)getpid());
	pn_sw_cluster_destroy(cluster);
	if ((r = open_one(&A, cluster, 0)) < 0 || (r = open_one(&B, cluster, 1)) < 0) {
		printf("FAIL icount: open %d\n", r);
		pn_sw_cluster_destroy(cluster);
		return 1;
	}
	/* Connect both directions without blocking (one thread drives both ports). */
	{
		pn_port_req_t *s1, *s2, *r1, *r2;
		int d = 0;
		pn_port_isend(A, 1, 1, 1, 0, sbuf, 0, &s1);
		pn_port_isend(B, 0, 1, 1, 0, sbuf, 0, &s2);
		pn_port_irecv(A, 1, 1, 1, 0, 0, rbuf, 0, &r1);
		pn_port_irecv(B, 0, 1, 1, 0, 0, rbuf, 0, &r2);
		for (int k = 0; k < 100000 && d < 4; k++) {
			d += s1 && pn_port_test(A, &s1, NULL) != 0;
			d += s2 && pn_port_test(B, &s2, NULL) != 0;
			d += r1 && pn_port_test(A, &r1, NULL) != 0;
			d += r2 && pn_port_test(B, &r2, NULL) != 0;
		}
		if (d < 4) {
			printf("FAIL icount: connect\n");
			return 1;
		}
	}
	memset(sbuf, 0x5a, sizeof(sbuf));
	r = 0;
	for (unsigned i = 0; i < 100 && !r; i++)   /* warm up (round trips also for idle) */
		r = round_trip(mode != 1, n, i);
	t0 = now_ns();
	if (!r)
		r = run_loop(mode, iters, n);
	t0 = now_ns() - t0;
	pn_port_close(A);
	pn_port_close(B);
	pn_sw_cluster_destroy(cluster);
	if (r < 0) {
		printf("FAIL icount: %s\n", ms);
		return 1;
	}
	printf("ok icount %s iters %u bytes %zu: %.1f ns per iteration\n", ms, iters, n, (double)t0 / iters);
	return 0;
}
