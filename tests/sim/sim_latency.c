/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sim_latency: 8-byte HAL ping-pong between nodes 0 and 1 on the simulator, with the
 * hardware path taken from the simulator's trace records (pn_sim.h):
 *
 *   one-way = rx_valid_cycle(receiver) - issue_cycle(sender)
 *           = [issue -> PIO doorbell on the bus] + [doorbell -> RX valid word visible]
 *
 *   pn_launch -n 2 -b sim -- sim_latency [ITERS] [BYTES]
 *
 * Each receiver checks the records belong to the packet it got (rx_valid_count, the
 * sender's doorbell count) and prints the per-direction figures; node 0 prints
 * "ok latency ..." with min/median/max over both directions.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_hal.h"
#include "paranic/pn_sim.h"

#define FAIL(...) do { printf("FAIL latency: " __VA_ARGS__); printf("\n"); fflush(stdout); return 1; } while (0)

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 50;
	size_t len = argc > 2 ? (size_t)atoi(argv[2]) : 8;
	pn_hal_t *h;
	pn_header_t hd;
	uint8_t buf[2048];
	uint64_t *lat, *db, *net, rt_cycles = 0;
	int r, n = 0;

	if (iters < 1 || len > 1024)
		return 2;
	r = pn_open(&h, NULL);
	if (r < 0)
		FAIL("pn_open returned %d (%s)", r, pn_strerror(r));
	unsigned me = (unsigned)pn_node_id(h), ctx = (unsigned)pn_ctx_id(h), peer = 1 - me;
	if (me > 1) {
		pn_barrier(h);
		pn_close(h);
		return 0;
	}
	lat = calloc((size_t)iters, 8);
	db = calloc((size_t)iters, 8);
	net = calloc((size_t)iters, 8);
	memset(buf, 0x5a, sizeof(buf));
	pn_barrier(h);
	for (int i = 0; i < iters; i++) {
		uint64_t c0 = pn_cycles(h);
		/* node 0 serves first; node 1 answers */
		for (int turn = 0; turn < 2; turn++) {
			if ((unsigned)turn == me) {
				if ((r = pn_send_pio(h, peer, ctx, (uint64_t)i, buf, len)) < 0)
					FAIL("send returned %d", r);
			} else {
				pn_sim_trace_t ts, tr;
				if (pn_recv_wait(h, &hd, 20000000000ll) != 1)
					FAIL("no packet %d within 20 s", i);
				if (hd.tag != (uint64_t)i || hd.length != len || hd.src_node != peer)
					FAIL("packet %d: tag %llu len %u src %u", i, (unsigned long long)hd.tag, hd.length,
					     hd.src_node);
				pn_recv_skip(h);
				if (pn_sim_trace(h, peer, ctx, &ts) < 0 || pn_sim_trace(h, me, ctx, &tr) < 0)
					FAIL("pn_sim_trace failed");
				if (tr.rx_valid_count != (uint64_t)i + 1 || ts.pio_doorbells != (uint64_t)i + 1)
					FAIL("records of another packet: rx_valid_count %llu, sender doorbells %llu, packet %d",
					     (unsigned long long)tr.rx_valid_count, (unsigned long long)ts.pio_doorbells, i);
				if (!(ts.issue_cycle < ts.pio_doorbell_cycle && ts.pio_doorbell_cycle < tr.rx_valid_cycle))
					FAIL("cycles out of order: issue %llu doorbell %llu valid %llu",
					     (unsigned long long)ts.issue_cycle, (unsigned long long)ts.pio_doorbell_cycle,
					     (unsigned long long)tr.rx_valid_cycle);
				lat[n] = tr.rx_valid_cycle - ts.issue_cycle;
				db[n] = ts.pio_doorbell_cycle - ts.issue_cycle;
				net[n] = tr.rx_valid_cycle - ts.pio_doorbell_cycle;
				n++;
			}
		}
		rt_cycles += pn_cycles(h) - c0;
	}
	if (pn_tx_wait(h) < 0)
		FAIL("tx_wait");
	pn_barrier(h);   /* node 0 has read the records of the last packet before node 1 sends again */
	/* Node 1 sends its figures to node 0, which prints both directions. */
	{
		qsort(lat, (size_t)n, 8, cmp_u64);
		qsort(db, (size_t)n, 8, cmp_u64);
		qsort(net, (size_t)n, 8, cmp_u64);
		uint64_t mine[6] = {lat[0], lat[n / 2], lat[n - 1], db[n / 2], net[n / 2], rt_cycles / (uint64_t)iters};
		printf("direction %u->%u: one-way min %llu median %llu max %llu cycles; issue->doorbell %llu, "
		       "doorbell->rx valid %llu (medians); simulated round trip incl. software %llu cycles\n",
		       peer, me, (unsigned long long)mine[0], (unsigned long long)mine[1], (unsigned long long)mine[2],
		       (unsigned long long)mine[3], (unsigned long long)mine[4], (unsigned long long)mine[5]);
		fflush(stdout);
		if (me == 1) {
			if ((r = pn_send_pio(h, 0, ctx, 0xfeed, mine, sizeof(mine))) < 0 || pn_tx_wait(h) < 0)
				FAIL("send figures: %d", r);
		} else {
			uint64_t other[6];
			pn_sim_info_t inf;
			if (pn_recv_wait(h, &hd, 20000000000ll) != 1 || hd.tag != 0xfeed ||
			    pn_recv_body(h, other, sizeof(other)) != (int)sizeof(other))
				FAIL("figures from node 1");
			pn_sim_info(h, &inf);
			uint64_t mn = mine[0] < other[0] ? mine[0] : other[0];
			uint64_t mx = mine[2] > other[2] ? mine[2] : other[2];
			uint64_t med = (mine[1] + other[1]) / 2;
			printf("ok latency %zu bytes one-way hardware path: min %llu median %llu max %llu cycles = %.0f ns "
			       "median at %u MHz (PCIe model: MMIO write %u, DMA write %u cycles); %d round trips\n",
			       len, (unsigned long long)mn, (unsigned long long)med, (unsigned long long)mx,
			       med * 1e9 / inf.clk_hz, inf.clk_hz / 1000000, inf.mmio_write_cycles, inf.dma_write_cycles,
			       iters);
			fflush(stdout);
		}
	}
	pn_barrier(h);
	pn_close(h);
	return 0;
}
