/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_collbench: latency of pn_allreduce (pn_coll.h) and of the barrier, every node of
 * the job (`paranic bench collective`).
 *
 *   pn_launch -n N -- pn_collbench [SIZES [ITERS]]      (default 8,64,256 and 200)
 *
 * Every node opens a port on context 1. Per size (bytes of float64 elements, a SUM):
 * one warm-up allreduce, then ITERS back-to-back allreduces, each timed on node 0 by
 * pn_now_ns (the backend's time base: simulated time on sim, wall clock on sw) and by
 * the process's monotonic clock; then ITERS back-to-back pn_port_barrier calls (the
 * NIC's barrier, pn_barrier, answering ports traffic). The allreduce takes the path
 * PARANIC_COLL chooses (pn_coll.h). Node 0 prints one JSON object per line with every
 * sample and the path taken (pn_coll_path):
 *   {"op": "allreduce", "path": "unit", "bytes": 8, "nodes": 4, "hw_ns": [...], "wall_ns": [...]}
 *   {"op": "barrier", "path": "nic", "bytes": 0, ...}
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_coll.h"
#include "tutil.h"

static void print_samples(const char *what, const char *path, size_t bytes, unsigned nodes, const uint64_t *hw,
			  const uint64_t *wall, long n)
{
	printf("{\"op\": \"%s\", \"path\": \"%s\", \"bytes\": %zu, \"nodes\": %u, \"hw_ns\": [", what, path, bytes,
	       nodes);
	for (long i = 0; i < n; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)hw[i]);
	printf("], \"wall_ns\": [");
	for (long i = 0; i < n; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)wall[i]);
	printf("]}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *sizes = argc > 1 ? argv[1] : "8,64,256";
	long iters = argc > 2 ? atol(argv[2]) : 200;
	pn_port_opts_t po;
	pn_port_t *port;
	pn_hal_t *h;
	unsigned me, nodes;
	double in[32], out[32];
	uint64_t *hw, *wall;
	char *list, *save = NULL;
	int r;

	if (iters < 1 || iters > 1000000) {
		fprintf(stderr, "pn_collbench: ITERS must be 1 .. 1000000\n");
		return 2;
	}
	pn_port_opts_init(&po);
	po.hal.ctx = 1;
	if ((r = pn_port_open(&port, &po)) != 0) {
		say("FAIL pn_port_open: %s", pn_strerror(r));
		return 1;
	}
	h = pn_port_hal(port);
	me = (unsigned)pn_port_node(port);
	nodes = (unsigned)pn_num_nodes(h);
	hw = calloc((size_t)iters, sizeof(*hw));
	wall = calloc((size_t)iters, sizeof(*wall));
	list = strdup(sizes);
	if (!hw || !wall || !list)
		return 1;
	for (unsigned i = 0; i < 32; i++)
		in[i] = me + i * 0.5;
	pn_port_barrier(port);
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t bytes = (size_t)atol(tok);
		if ((r = pn_allreduce(port, in, out, bytes, PN_COLL_T_F64, PN_COLL_RED_SUM)) != 0) {
			say("FAIL pn_allreduce of %zu bytes: %s", bytes, pn_strerror(r));
			return 1;
		}
		for (long i = 0; i < iters; i++) {
			uint64_t h0 = pn_now_ns(h), w0 = t_now_ns();
			if ((r = pn_allreduce(port, in, out, bytes, PN_COLL_T_F64, PN_COLL_RED_SUM)) != 0) {
				say("FAIL pn_allreduce of %zu bytes: %s", bytes, pn_strerror(r));
				return 1;
			}
			hw[i] = pn_now_ns(h) - h0;
			wall[i] = t_now_ns() - w0;
		}
		if (me == 0)
			print_samples("allreduce", pn_coll_path(port), bytes, nodes, hw, wall, iters);
	}
	pn_port_barrier(port);
	for (long i = 0; i < iters; i++) {
		uint64_t h0 = pn_now_ns(h), w0 = t_now_ns();
		if ((r = pn_port_barrier(port)) != 0) {
			say("FAIL pn_port_barrier: %s", pn_strerror(r));
			return 1;
		}
		hw[i] = pn_now_ns(h) - h0;
		wall[i] = t_now_ns() - w0;
	}
	if (me == 0)
		print_samples("barrier", "nic", 0, nodes, hw, wall, iters);
	pn_port_barrier(port);
	pn_port_close(port);
	free(list);
	free(hw);
	free(wall);
	return 0;
}
