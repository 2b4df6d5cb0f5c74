/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_faultstream: a one-way rawdata stream that sees what a link fault does to it
 * (`paranic bench faults`).
 *
 *   pn_launch -n N -- pn_faultstream [--backend B] [--src A] [--dst B] [--bytes S]
 *       [--count M]
 *
 * Node A (default 0) sends M messages of S bytes (default 4096 x 2000) to node B
 * (default 1), each starting with its sequence number. Node B receives them, checks that
 * every one arrived exactly once with intact contents, and times each arrival on the
 * backend's clock (simulated cycles on sim). Other nodes only join the final barrier.
 * Node B prints one JSON object:
 *
 *   {"bench": "faultstream", "src": A, "dst": B, "bytes": S, "sent": M, "received": R,
 *    "duplicates": D, "corrupt": C, "out_of_order": O, "first_cycle": .., "last_cycle": ..,
 *    "MBps": .. (payload bytes over the first-to-last arrival time),
 *    "median_gap_cycles": .., "max_gap_cycles": .., "max_gap_at_cycle": ..}
 *
 * A message that never arrives makes B wait for ever: run it under a time limit (the
 * bench does) and read the simulator's counters.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_rawdata.h"
#include "tutil.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void fill(uint8_t *buf, size_t n, uint64_t seq)
{
	size_t i;

	memcpy(buf, &seq, 8);
	for (i = 8; i < n; i++)
		buf[i] = (uint8_t)(seq * 131 + i);
}

static int intact(const uint8_t *buf, size_t n, uint64_t seq)
{
	size_t i;

	for (i = 8; i < n; i++)
		if (buf[i] != (uint8_t)(seq * 131 + i))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	pn_open_opts_t o;
	unsigned src = 0, dst = 1, me, from;
	size_t bytes = 4096, len;
	long count = 2000;
	pn_rd_t *rd;
	int r, a;

	pn_open_opts_init(&o);
	for (a = 1; a < argc; a++) {
		const char *v = a + 1 < argc ? argv[a + 1] : NULL;

		if (!v) {
			fprintf(stderr, "pn_faultstream: %s needs a value\n", argv[a]);
			return 2;
		}
		if (!strcmp(argv[a], "--backend")) o.backend = v;
		else if (!strcmp(argv[a], "--src")) src = (unsigned)atoi(v);
		else if (!strcmp(argv[a], "--dst")) dst = (unsigned)atoi(v);
		else if (!strcmp(argv[a], "--bytes")) bytes = (size_t)strtoul(v, NULL, 0);
		else if (!strcmp(argv[a], "--count")) count = atol(v);
		else {
			fprintf(stderr, "pn_faultstream: unknown option %s\n", argv[a]);
			return 2;
		}
		a++;
	}
	if (bytes < 8 || bytes > (64u << 20) || count < 2 || src == dst) {
		fprintf(stderr, "pn_faultstream: need --bytes 8..64Mi, --count >= 2, --src != --dst\n");
		return 2;
	}
	if ((r = pn_rd_open(&rd, &o)) < 0) {
		say("FAIL open: %d (%s)", r, pn_strerror(r));
		return 1;
	}
	pn_hal_t *h = pn_rd_hal(rd);
	me = (unsigned)pn_node_id(h);
	if (src >= (unsigned)pn_num_nodes(h) || dst >= (unsigned)pn_num_nodes(h)) {
		say("FAIL args: the job has %d nodes", pn_num_nodes(h));
		return 2;
	}
	uint8_t *buf = malloc(bytes);
	if (!buf)
		return 1;
	pn_barrier(h);
	if (me == src) {
		for (long i = 0; i < count; i++) {
			fill(buf, bytes, (uint64_t)i);
			if ((r = pn_rd_send(rd, dst, buf, bytes)) < 0) {
				say("FAIL send %ld: %d (%s)", i, r, pn_strerror(r));
				return 1;
			}
		}
	} else if (me == dst) {
		uint8_t *seen = calloc((size_t)count, 1);
		uint64_t *at = calloc((size_t)count, sizeof(*at)), *gap = calloc((size_t)count, sizeof(*gap));
		long got = 0, dup = 0, bad = 0, ooo = 0, last = -1;

		if (!seen || !at || !gap)
			return 1;
		while (got < count) {
			uint64_t seq;

			r = pn_rd_recv(rd, (int)src, buf, bytes, &from, &len);
			if (r < 0) {
				say("FAIL recv: %d (%s)", r, pn_strerror(r));
				return 1;
			}
			memcpy(&seq, buf, 8);
			if (len != bytes || seq >= (uint64_t)count || !intact(buf, bytes, seq)) {
				bad++;
				continue;
			}
			if (seen[seq]++) {
				dup++;
				continue;
			}
			ooo += (long)seq < last;
			last = (long)seq > last ? (long)seq : last;
			at[got++] = pn_cycles(h);
		}
		uint64_t maxg = 0, maxat = 0;
		for (long i = 1; i < got; i++) {
			gap[i - 1] = at[i] - at[i - 1];
			if (gap[i - 1] > maxg) {
				maxg = gap[i - 1];
				maxat = at[i - 1];
			}
		}
		qsort(gap, (size_t)(got - 1), sizeof(*gap), cmp_u64);
		double ns = (double)(at[got - 1] - at[0]) * 1e9 / PN_TARGET_CLK_HZ;
		printf("{\"bench\": \"faultstream\", \"backend\": \"%s\", \"src\": %u, \"dst\": %u, "
		       "\"bytes\": %zu, \"sent\": %ld, \"received\": %ld, \"duplicates\": %ld, "
		       "\"corrupt\": %ld, \"out_of_order\": %ld, \"first_cycle\": %llu, "
		       "\"last_cycle\": %llu, \"MBps\": %.2f, \"median_gap_cycles\": %llu, "
		       "\"max_gap_cycles\": %llu, \"max_gap_at_cycle\": %llu}\n",
		       pn_backend_name(h), src, dst, bytes, count, got, dup, bad, ooo,
		       (unsigned long long)at[0], (unsigned long long)at[got - 1],
		       ns > 0 ? (double)bytes * (double)(got - 1) / ns * 1e3 : 0.0,
		       (unsigned long long)gap[(got - 1) / 2], (unsigned long long)maxg,
		       (unsigned long long)maxat);
		fflush(stdout);
	}
	pn_barrier(h);
	pn_rd_close(rd);
	return 0;
}
