/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_faultstream: a one-way rawdata stream that sees what a link fault does to it
 * (`paranic bench faults`).
 *
 *   pn_launch -n N -- pn_faultstream [--backend B] [--src A] [--dst B] [--bytes S]
 *       [--count M] [--all] [--stall-limit K]
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
 * --all: every node sends M messages to every other node (round robin over the
 * destinations) and receives (N-1) * M; each node prints the same JSON object with
 * "src": -1, "dst": its own id, counting what it received from all senders
 * ("out_of_order": messages from a sender that arrived after a later one of it).
 *
 * A message that never arrives makes B wait for ever: run it under a time limit (the
 * bench does) and read the simulator's counters. Every 10 s without a message B says on
 * stderr how far it got and what rawdata dropped. --stall-limit K: after K such reports in
 * a row (K * 10 s of wall time without any message) B gives up: "FAIL stalled" on stderr,
 * exit status 1 (tests: a stall fails in a minute instead of at the launch's time limit).
 *
 * --until-error: rawdata's deadline decides instead (docs/userlib.md, "Deadlines"): B
 * receives with pn_rd_recv and stops at its first error, A stops at its first send error
 * (or pn_rd_close's), and neither joins the final barrier. B's JSON gains "error" (0 or
 * the negative errno) and "seconds" (wall time from the first barrier); A prints
 *   {"bench": "faultstream", "role": "src", "sent_ok": K, "error": E, "seconds": ..}
 * (K messages accepted before the error; -ENETDOWN / -ETIMEDOUT are the deadline's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_rawdata.h"
#include "tutil.h"

/* Wall-clock time without a message after which the receiver reports where it stands. */
#define STALL_NS 10000000000ll

static int until_error;
static long stall_limit;   /* --stall-limit: give up after this many stall reports in a row */
static uint64_t t_start;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Message `seq` of sender `src`: its (src, seq) word, then a pattern of both. */
static void fill(uint8_t *buf, size_t n, unsigned src, uint64_t seq)
{
	uint64_t w = seq | (uint64_t)src << 48;
	size_t i;

	memcpy(buf, &w, 8);
	for (i = 8; i < n; i++)
		buf[i] = (uint8_t)(seq * 131 + src * 17 + i);
}

static int intact(const uint8_t *buf, size_t n, unsigned src, uint64_t seq)
{
	size_t i;

	for (i = 8; i < n; i++)
		if (buf[i] != (uint8_t)(seq * 131 + src * 17 + i))
			return 0;
	return 1;
}

/* Receive `expect` messages from `src` (PN_ANY: from everyone, `count` each), check and
 * time them, print the JSON line. 0, or 1 on an error. */
static int receive(pn_rd_t *rd, pn_hal_t *h, int src, unsigned nsrc, long count, size_t bytes,
		   uint8_t *buf)
{
	long expect = count * (long)nsrc, got = 0, dup = 0, bad = 0, ooo = 0;
	unsigned n = (unsigned)pn_num_nodes(h), me = (unsigned)pn_node_id(h), from;
	uint8_t *seen = calloc((size_t)count * n, 1);
	long *last = malloc(n * sizeof(*last));
	uint64_t *at = calloc((size_t)expect, sizeof(*at)), *gap = calloc((size_t)expect, sizeof(*gap));
	size_t len;
	long stalls = 0;
	int r;

	if (!seen || !last || !at || !gap)
		return 1;
	for (unsigned i = 0; i < n; i++)
		last[i] = -1;
	while (got < expect) {
		uint64_t w, seq;
		unsigned who;

		r = until_error ? pn_rd_recv(rd, src, buf, bytes, &from, &len)
				: pn_rd_recv_timeout(rd, src, buf, bytes, &from, &len, STALL_NS);
		if (r < 0 && until_error) {
			printf("{\"bench\": \"faultstream\", \"role\": \"dst\", \"dst\": %u, \"sent\": %ld, "
			       "\"received\": %ld, \"duplicates\": %ld, \"corrupt\": %ld, \"out_of_order\": %ld, "
			       "\"error\": %d, \"seconds\": %.2f}\n", me, expect, got, dup, bad, ooo, r,
			       (t_now_ns() - t_start) / 1e9);
			fflush(stdout);
			return 0;
		}
		if (r == -ETIMEDOUT) {
			/* Never a silent stall: say where the stream stands, keep waiting. */
			pn_rd_stats_t st;

			pn_rd_stats(rd, &st);
			fprintf(stderr, "pn_faultstream: no message for %d s: %ld of %ld received; "
				"rawdata aborted %llu stray %llu foreign %llu; missing (node:seq):",
				(int)(STALL_NS / 1000000000), got, expect,
				(unsigned long long)st.aborted, (unsigned long long)st.stray,
				(unsigned long long)st.foreign);
			for (unsigned k = 0, shown = 0; k < n && shown < 8; k++)
				for (long q = 0; q < count && shown < 8; q++)
					if (k != me && (src < 0 || (unsigned)src == k) &&
					    !seen[k * (size_t)count + q]) {
						fprintf(stderr, " %u:%ld", k, q);
						shown++;
					}
			fprintf(stderr, "\n");
			if (stall_limit && ++stalls >= stall_limit) {
				say("FAIL stalled: no message for %ld s, %ld of %ld received",
				    stalls * (long)(STALL_NS / 1000000000), got, expect);
				return 1;
			}
			continue;
		}
		stalls = 0;
		if (r < 0) {
			say("FAIL recv: %d (%s)", r, pn_strerror(r));
			return 1;
		}
		memcpy(&w, buf, 8);
		seq = w & 0xffffffffffffull;
		who = (unsigned)(w >> 48);
		if (len != bytes || who != from || who >= n || seq >= (uint64_t)count ||
		    !intact(buf, bytes, who, seq)) {
			bad++;
			continue;
		}
		if (seen[who * (size_t)count + seq]++) {
			dup++;
			continue;
		}
		ooo += (long)seq < last[who];
		if ((long)seq > last[who])
			last[who] = (long)seq;
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
	printf("{\"bench\": \"faultstream\", \"backend\": \"%s\", \"src\": %d, \"dst\": %u, "
	       "\"bytes\": %zu, \"sent\": %ld, \"received\": %ld, \"duplicates\": %ld, "
	       "\"corrupt\": %ld, \"out_of_order\": %ld, \"first_cycle\": %llu, "
	       "\"last_cycle\": %llu, \"MBps\": %.2f, \"median_gap_cycles\": %llu, "
	       "\"max_gap_cycles\": %llu, \"max_gap_at_cycle\": %llu, \"error\": 0, \"seconds\": %.2f}\n",
	       pn_backend_name(h), src, me, bytes, expect, got, dup, bad, ooo,
	       (unsigned long long)at[0], (unsigned long long)at[got - 1],
	       ns > 0 ? (double)bytes * (double)(got - 1) / ns * 1e3 : 0.0,
	       (unsigned long long)gap[(got - 1) / 2], (unsigned long long)maxg,
	       (unsigned long long)maxat, (t_now_ns() - t_start) / 1e9);
	fflush(stdout);
	free(seen);
	free(last);
	free(at);
	free(gap);
	return 0;
}

int main(int argc, char **argv)
{
	pn_open_opts_t o;
	unsigned src = 0, dst = 1, me, n;
	size_t bytes = 4096;
	long count = 2000;
	int all = 0, r, a;
	pn_rd_t *rd;

	pn_open_opts_init(&o);
	for (a = 1; a < argc; a++) {
		const char *v = a + 1 < argc ? argv[a + 1] : NULL;

		if (!strcmp(argv[a], "--all")) {
			all = 1;
			continue;
		}
		if (!strcmp(argv[a], "--until-error")) {
			until_error = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "pn_faultstream: %s needs a value\n", argv[a]);
			return 2;
		}
		if (!strcmp(argv[a], "--backend")) o.backend = v;
		else if (!strcmp(argv[a], "--src")) src = (unsigned)atoi(v);
		else if (!strcmp(argv[a], "--dst")) dst = (unsigned)atoi(v);
		else if (!strcmp(argv[a], "--bytes")) bytes = (size_t)strtoul(v, NULL, 0);
		else if (!strcmp(argv[a], "--count")) count = atol(v);
		else if (!strcmp(argv[a], "--stall-limit")) stall_limit = atol(v);
		else {
			fprintf(stderr, "pn_faultstream: unknown option %s\n", argv[a]);
			return 2;
		}
		a++;
	}
	if (bytes < 8 || bytes > (64u << 20) || count < 2 || count >= (1l << 40) || src == dst) {
		fprintf(stderr, "pn_faultstream: need --bytes 8..64Mi, --count >= 2, --src != --dst\n");
		return 2;
	}
	if ((r = pn_rd_open(&rd, &o)) < 0) {
		say("FAIL open: %d (%s)", r, pn_strerror(r));
		return 1;
	}
	pn_hal_t *h = pn_rd_hal(rd);
	me = (unsigned)pn_node_id(h);
	n = (unsigned)pn_num_nodes(h);
	if (src >= n || dst >= n || n < 2) {
		say("FAIL args: the job has %u nodes", n);
		return 2;
	}
	uint8_t *buf = malloc(bytes);
	if (!buf)
		return 1;
	pn_barrier(h);
	t_start = t_now_ns();
	if (until_error && all) {
		fprintf(stderr, "pn_faultstream: --until-error with --all is not supported\n");
		return 2;
	}
	if (until_error) {
		if (me == src) {
			long i;
			for (i = 0, r = 0; i < count && r == 0; i++) {
				fill(buf, bytes, me, (uint64_t)i);
				r = pn_rd_send(rd, dst, buf, bytes);
			}
			long ok = r == 0 ? i : i - 1;
			int rc = pn_rd_close(rd);
			printf("{\"bench\": \"faultstream\", \"role\": \"src\", \"sent_ok\": %ld, \"error\": %d, "
			       "\"seconds\": %.2f}\n", ok, r ? r : rc, (t_now_ns() - t_start) / 1e9);
			return 0;
		}
		if (me == dst && receive(rd, h, (int)src, 1, count, bytes, buf))
			return 1;
		pn_rd_close(rd);
		return 0;
	}
	if (all) {
		/* Send and receive interleaved: pn_rd_send keeps receiving while it waits. */
		for (long i = 0; i < count; i++)
			for (unsigned j = 1; j < n; j++) {
				fill(buf, bytes, me, (uint64_t)i);
				if ((r = pn_rd_send(rd, (me + j) % n, buf, bytes)) < 0) {
					say("FAIL send %ld: %d (%s)", i, r, pn_strerror(r));
					return 1;
				}
			}
		if (receive(rd, h, PN_ANY, n - 1, count, bytes, buf))
			return 1;
	} else if (me == src) {
		for (long i = 0; i < count; i++) {
			fill(buf, bytes, me, (uint64_t)i);
			if ((r = pn_rd_send(rd, dst, buf, bytes)) < 0) {
				say("FAIL send %ld: %d (%s)", i, r, pn_strerror(r));
				return 1;
			}
		}
	} else if (me == dst) {
		if (receive(rd, h, (int)src, 1, count, bytes, buf))
			return 1;
	}
	pn_barrier(h);
	pn_rd_close(rd);
	return 0;
}
