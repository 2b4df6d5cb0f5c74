/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports_shm_test: the ports layer's intra-node path, several processes per node.
 *
 *   pn_launch -n N -p PPN -- ports_shm_test CASE [BACKEND]
 *
 * Every process opens its own port on context 1 + PARANIC_LOCAL_RANK of its node. The
 * program expects the shared-memory path unless PARANIC_PORT_SHM=0 (then everything
 * must go through the NIC) and checks that with the ports' and the HAL's counters.
 *
 * CASE
 *   local     traffic between the ports of each node only (eager, rendezvous, 2 MiB):
 *             content, order; shm on: every message through shm, not one packet
 *             through the NIC (HAL counters 0); shm off: none through shm
 *   mix       all-to-all over every process of the job (itself too), sizes 0 .. 2 MiB
 *             on 4 channels, received channel by channel (the last first) from any
 *             source: per (source, channel) order and content; the shm counters equal
 *             the intra-node messages exactly, the rest went by the NIC
 *   isolation node 0's ranks 0 and 1 exchange messages; rank 2 of the same node posts a
 *             receive for anything and probes meanwhile: it gets nothing of theirs,
 *             and it has mapped no ring between them (/proc/self/maps)
 *   kill      rank 1 of node 0 streams 32 MiB to rank 0 (receive posted) and is
 *             killed (`pn_launch -k 1:MS:phase-kill`) half way, while rank 2's
 *             rendezvous send waits for its CTS: both end with an error (shm:
 *             -ECONNRESET long before the liveness timeout; NIC: -ETIMEDOUT)
 *   bench     ping-pong latency and streaming bandwidth between rank 0 of node 0 and
 *             PT_PEER ("local": rank 1 of node 0; "remote": rank 0 of node 1); JSON
 * Prints "ok CASE ..." or "FAIL CASE: ..." and exits 0 only on success.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paranic/pn_ports.h"
#include "tutil.h"

#define PCTX 1
#define ALL (~0ull)
#define NCH 4
#define BIG ((size_t)2 << 20)

static pn_port_t *port;
static pn_hal_t *hal;
static unsigned me, myctx, N, P, lr;
static int shm;   /* the shared-memory path expected */
static size_t E;

static uint32_t seed_of(unsigned src, unsigned sctx, unsigned dst, unsigned dctx, unsigned seq)
{
	return src * 7919u + sctx * 613u + dst * 104729u + dctx * 31337u + seq * 31u + 1;
}

static size_t msize(unsigned k)
{
	static const size_t S[] = {0, 8, 200, 1500, 0 /* E */, 0 /* E + 1 */, 9000, 100000, 16, 0 /* BIG */, 3, 70000};
	unsigned i = k % 12;
	return i == 4 ? E : i == 5 ? E + 1 : i == 9 ? (k < 12 ? BIG : 4096) : S[i];
}

/* The HAL barrier counts a node once (its first context), so with several processes per
 * node it is no barrier over processes: this one is, by messages on channel SYNC_CH to
 * and from every process (of our node only, when local_only). */
#define SYNC_CH 60000
static int sync_procs(int local_only)
{
	static unsigned round;
	pn_port_status_t st;
	uint8_t x = 0;
	int r;
	round++;
	for (unsigned n = 0; n < N; n++)
		for (unsigned l = 0; l < P; l++)
			if ((n != me || PCTX + l != myctx) && (!local_only || n == me))
				EXPECT_RC(pn_port_send(port, n, PCTX + l, SYNC_CH, round, &x, 1), 0);
	for (unsigned n = 0; n < N; n++)
		for (unsigned l = 0; l < P; l++)
			if ((n != me || PCTX + l != myctx) && (!local_only || n == me)) {
				r = pn_port_recv(port, (int)n, (int)(PCTX + l), SYNC_CH, round, ALL, &x, 1, &st, 60000000000ll);
				CHECK(r == 1, "sync %u from %u:%u: %d (%s)", round, n, PCTX + l, r, pn_strerror(r));
			}
	return 0;
}

static int local_peer(unsigned n, unsigned c)
{
	return n == me && c != myctx;
}

/* Send M messages to each of peers[] (node, ctx) on channel m % nch, then receive all
 * messages (from np sources) channel by channel, the last channel first, from any
 * source: per (source, channel) order and content. Counts intra-node messages. */
static int exchange(unsigned (*peers)[2], unsigned np, unsigned M, unsigned nch, uint64_t *n_local,
		    uint64_t *b_local)
{
	unsigned total = np * M;
	pn_port_req_t **rq = calloc(total, sizeof(*rq));
	uint8_t **b = calloc(total, sizeof(*b));
	unsigned *next = calloc((size_t)np * nch, sizeof(unsigned));
	uint8_t *buf = malloc(BIG);
	pn_port_status_t st;
	unsigned k = 0;
	CHECK(rq && b && next && buf, "malloc");

	for (unsigned m = 0; m < M; m++)
		for (unsigned j = 0; j < np; j++, k++) {
			unsigned d = peers[j][0], dc = peers[j][1];
			size_t len = msize(m + d + dc);
			int r;
			b[k] = malloc(len + 1);
			CHECK(b[k], "malloc");
			pat_fill(b[k], len, seed_of(me, myctx, d, dc, m), 0);
			r = pn_port_isend(port, d, dc, (int)(m % nch), m, b[k], len, &rq[k]);
			CHECK(r == 0, "isend to %u:%u: %d (%s)", d, dc, r, pn_strerror(r));
			if (local_peer(d, dc)) {
				(*n_local)++;
				*b_local += len;
			}
		}
	for (int ch = (int)nch - 1; ch >= 0; ch--) {
		unsigned per = 0;
		for (unsigned m = 0; m < M; m++)
			per += m % nch == (unsigned)ch;
		for (unsigned i = 0; i < per * np; i++) {
			unsigned s, m;
			size_t bad;
			int r = pn_port_recv(port, PN_PORT_ANY, PN_PORT_ANY, ch, 0, 0, buf, BIG, &st, 60000000000ll);
			CHECK(r >= 0, "recv on channel %d: %d (%s)", ch, r, pn_strerror(r));
			for (s = 0; s < np; s++)
				if (peers[s][0] == (unsigned)st.src_node && peers[s][1] == (unsigned)st.src_ctx)
					break;
			CHECK(s < np, "a message from %d:%d", st.src_node, st.src_ctx);
			m = next[s * nch + ch] * nch + (unsigned)ch;
			CHECK(st.tag == m, "from %d:%d channel %d: tag %llu, expected %u (order)", st.src_node, st.src_ctx,
			      ch, (unsigned long long)st.tag, m);
			CHECK(st.len == msize(m + me + myctx), "length %zu, expected %zu", st.len, msize(m + me + myctx));
			bad = pat_check(buf, st.len, seed_of(peers[s][0], peers[s][1], me, myctx, m), 0);
			CHECK(bad == (size_t)-1, "message %u from %d:%d differs at byte %zu", m, st.src_node, st.src_ctx, bad);
			next[s * nch + ch]++;
		}
	}
	for (unsigned i = 0; i < total; i++) {
		int r = pn_port_wait(port, &rq[i], &st, -1);
		CHECK(r == 1, "send %u: %d (%s)", i, r, pn_strerror(r));
		free(b[i]);
	}
	free(rq);
	free(b);
	free(next);
	free(buf);
	return 0;
}

/* The path counters after an exchange: shm on, exactly the intra-node messages went
 * through shared memory; off, none. */
static pn_port_stats_t ps0;   /* after the first sync */
static pn_status_t hs0;

static int check_paths(uint64_t n_local, uint64_t b_local, int nic_must_be_idle)
{
	pn_port_stats_t ps;
	pn_status_t hs;
	EXPECT_RC(pn_port_stats(port, &ps), 0);
	EXPECT_RC(pn_status(hal, &hs), 0);
	ps.shm_msgs -= ps0.shm_msgs;
	ps.shm_bytes -= ps0.shm_bytes;
	ps.shm_recv_msgs -= ps0.shm_recv_msgs;
	hs.sent_packets -= hs0.sent_packets;
	hs.recv_packets -= hs0.recv_packets;
	if (shm) {
		CHECK(ps.shm_msgs == n_local && ps.shm_bytes == b_local,
		      "shm sent %llu msgs %llu bytes, expected %llu %llu", (unsigned long long)ps.shm_msgs,
		      (unsigned long long)ps.shm_bytes, (unsigned long long)n_local, (unsigned long long)b_local);
		CHECK(ps.shm_recv_msgs == n_local, "shm received %llu, expected %llu", (unsigned long long)ps.shm_recv_msgs,
		      (unsigned long long)n_local);
		CHECK(ps.shm_peers == (P > 1 ? P - 1 : 0), "shm peers %llu", (unsigned long long)ps.shm_peers);
		if (nic_must_be_idle)
			CHECK(hs.sent_packets == 0 && hs.recv_packets == 0,
			      "the NIC carried %llu / %llu packets of intra-node traffic", (unsigned long long)hs.sent_packets,
			      (unsigned long long)hs.recv_packets);
	} else {
		CHECK(ps.shm_msgs == 0 && ps.shm_recv_msgs == 0 && ps.shm_peers == 0, "shm used though disabled");
		if (nic_must_be_idle && n_local)
			CHECK(hs.sent_packets >= n_local && hs.recv_packets >= n_local, "the NIC carried only %llu packets",
			      (unsigned long long)hs.sent_packets);
	}
	return 0;
}

static int case_local(void)
{
	unsigned (*peers)[2] = calloc(P, sizeof(*peers)), np = 0;
	uint64_t nl = 0, bl = 0;
	pn_status_t hs;
	CHECK(peers, "calloc");
	for (unsigned l = 0; l < P; l++)
		if (PCTX + l != myctx) {
			peers[np][0] = me;
			peers[np][1] = PCTX + l;
			np++;
		}
	if (exchange(peers, np, 24, NCH, &nl, &bl) < 0 || check_paths(nl, bl, 1) < 0)
		return -1;
	EXPECT_RC(pn_status(hal, &hs), 0);
	hs.sent_packets -= hs0.sent_packets;
	say("ok local %u:%u %llu messages (%llu bytes) with the %u other ports of the node, via %s; NIC packets %llu", me,
	    myctx, (unsigned long long)nl, (unsigned long long)bl, np, shm ? "shm" : "the NIC",
	    (unsigned long long)hs.sent_packets);
	free(peers);
	return 0;
}

static int case_mix(void)
{
	unsigned (*peers)[2] = calloc((size_t)N * P, sizeof(*peers)), np = 0;
	uint64_t nl = 0, bl = 0;
	pn_port_stats_t ps;
	CHECK(peers, "calloc");
	for (unsigned n = 0; n < N; n++)
		for (unsigned l = 0; l < P; l++) {
			peers[np][0] = n;
			peers[np][1] = PCTX + l;
			np++;
		}
	if (exchange(peers, np, 24, NCH, &nl, &bl) < 0 || check_paths(nl, bl, 0) < 0)
		return -1;
	EXPECT_RC(pn_port_stats(port, &ps), 0);
	ps.sent_msgs -= ps0.sent_msgs;
	ps.shm_msgs -= ps0.shm_msgs;
	CHECK(ps.sent_msgs == (uint64_t)np * 24, "sent %llu", (unsigned long long)ps.sent_msgs);
	say("ok mix %u:%u all-to-all with %u ports on %u channels: %llu messages via shm, %llu via the NIC", me, myctx, np,
	    NCH, (unsigned long long)ps.shm_msgs, (unsigned long long)(ps.sent_msgs - ps.shm_msgs));
	free(peers);
	return 0;
}

/* Ring mappings of this process that join two other contexts (there must be none). */
static int foreign_rings(char *what, size_t n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0, rings = 0;
	what[0] = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *s = strstr(line, "/paranic-");
		unsigned node, src, dst;
		char *q;
		if (!s || !(q = strstr(s, ":n")) || sscanf(q, ":n%u:c%u-c%u", &node, &src, &dst) != 3)
			continue;
		rings++;
		if (src != myctx && dst != myctx) {
			found++;
			snprintf(what, n, "%s", s);
		}
	}
	fclose(f);
	return found ? found : -rings - 2;
}

static int case_isolation(void)
{
	CHECK(P == 3, "isolation needs -p 3");
	if (me != 0 || lr > 2) {
		say("ok isolation (idle)");
		return 0;
	}
	if (lr == 2) {
		pn_port_req_t *r;
		pn_port_status_t st;
		uint8_t buf[256];
		char what[256];
		unsigned probes = 0, got = 0;
		int rc, fr;
		/* a receive for anything from anyone, posted before they start */
		EXPECT_RC(pn_port_irecv(port, PN_PORT_ANY, PN_PORT_ANY, PN_PORT_ANY, 0, 0, buf, sizeof(buf), &r), 0);
		for (;;) {
			rc = pn_port_test(port, &r, &st);
			if (rc)
				break;
			probes++;
			/* only what is meant for us: the other "done", or a final sync */
			if (pn_port_probe(port, PN_PORT_ANY, PN_PORT_ANY, PN_PORT_ANY, 0, 0, &st) == 1)
				CHECK(st.channel == SYNC_CH || (st.channel == 7 && st.tag == 0xd0e),
				      "probe saw a message from %d:%d channel %d tag %#llx", st.src_node, st.src_ctx, st.channel,
				      (unsigned long long)st.tag);
		}
		CHECK(rc == 1 && st.tag == 0xd0e && st.channel == 7, "the first message is tag %#llx channel %d (%d)",
		      (unsigned long long)st.tag, st.channel, rc);
		got = 1;
		rc = pn_port_recv(port, PN_PORT_ANY, PN_PORT_ANY, 7, 0xd0e, ALL, buf, sizeof(buf), &st, 30000000000ll);
		CHECK(rc == 1, "the second message: %d", rc);
		got++;
		for (int ch = 0; ch < 8; ch++)
			CHECK(pn_port_probe(port, PN_PORT_ANY, PN_PORT_ANY, ch, 0, 0, &st) == 0, "more messages on %d", ch);
		fr = foreign_rings(what, sizeof(what));
		CHECK(fr < 0, "mapped a ring of two other ports: %s", what);
		say("ok isolation rank 2 got only the %u messages for it (%u probes meanwhile), maps %d rings, all its own",
		    got, probes, -fr - 2);
		return 0;
	}
	/* ranks 0 and 1: 200 messages each way (eager, rendezvous, 1 MiB), unexpected first */
	{
		unsigned other = PCTX + (lr ^ 1u), M = 200;
		pn_port_req_t **rq = calloc(M, sizeof(*rq));
		uint8_t *sb = malloc(1 << 20), *rb = malloc(1 << 20), done = 0;
		pn_port_status_t st;
		CHECK(rq && sb && rb, "malloc");
		uint8_t **bufs = calloc(M, sizeof(*bufs));
		CHECK(bufs, "calloc");
		for (unsigned m = 0; m < M; m++) {
			size_t len = m % 50 == 7 ? (1u << 20) : msize(m) > 200000 ? 4096 : msize(m);
			bufs[m] = malloc(len + 1);
			CHECK(bufs[m], "malloc");
			pat_fill(bufs[m], len, seed_of(me, myctx, me, other, m), 0);
			EXPECT_RC(pn_port_isend(port, me, other, (int)(m % NCH), m, bufs[m], len, &rq[m]), 0);
		}
		for (unsigned m = 0; m < M; m++) {
			size_t len = m % 50 == 7 ? (1u << 20) : msize(m) > 200000 ? 4096 : msize(m);
			int rc = pn_port_recv(port, me, other, (int)(m % NCH), m, ALL, rb, 1 << 20, &st, 30000000000ll);
			CHECK(rc == (int)len, "message %u: %d", m, rc);
			CHECK(pat_check(rb, len, seed_of(me, other, me, myctx, m), 0) == (size_t)-1, "message %u differs", m);
		}
		for (unsigned m = 0; m < M; m++) {
			EXPECT_RC(pn_port_wait(port, &rq[m], &st, -1), 1);
			free(bufs[m]);
		}
		free(bufs);
		EXPECT_RC(pn_port_send(port, me, PCTX + 2, 7, 0xd0e, &done, 1), 0);
		say("ok isolation rank %u exchanged %u messages with rank %u", lr, M, lr ^ 1u);
		free(rq);
		free(sb);
		free(rb);
	}
	return 0;
}

static int case_kill(void)
{
	const size_t KB = (size_t)32 << 20;
	pn_port_req_t *r = NULL;
	pn_port_status_t st;
	uint64_t t0;
	int rc;
	CHECK(P >= 3, "kill needs -p 3");
	if (me != 0 || lr > 2) {
		say("ok kill (idle)");
		return 0;
	}
	if (lr == 0)
		EXPECT_RC(pn_port_irecv(port, 0, PCTX + 1, 2, 0, 0, malloc(KB), KB, &r), 0);
	if (lr == 1) {
		uint8_t *b = malloc(KB);
		pn_port_stats_t ps;
		CHECK(b, "malloc");
		memset(b, 0x5a, KB);
		EXPECT_RC(pn_port_isend(port, 0, PCTX, 2, 0, b, KB, &r), 0);
		t0 = t_now_ns();
		while (t_now_ns() - t0 < 3000000ull)   /* 3 ms of streaming (as far as rank 0 takes it) */
			pn_port_progress(port);
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		CHECK(r && ps.rndv_msgs == 1, "the 32 MiB send is not streaming (done %d)", !r);
		say("phase-kill");
		for (;;)
			pause();
	}
	t0 = t_now_ns();
	if (lr == 0) {
		rc = pn_port_wait(port, &r, &st, -1);
	} else {
		uint8_t *b = malloc(E + 1000);
		CHECK(b, "malloc");
		rc = pn_port_send(port, 0, PCTX + 1, 3, 0, b, E + 1000);   /* never received */
	}
	{
		pn_port_stats_t ps;
		double ms = (t_now_ns() - t0) / 1e6;
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		CHECK(shm ? rc == -ECONNRESET : rc == -ETIMEDOUT, "%s: %d (%s)", lr ? "send" : "receive", rc, pn_strerror(rc));
		CHECK(!shm || ps.shm_dead == 1, "shm_dead %llu", (unsigned long long)ps.shm_dead);
		say("ok kill rank %u: the %s ended with %s after %.0f ms", lr, lr ? "waiting rendezvous send" :
		    "half-filled receive", pn_strerror(rc), ms);
	}
	/* the two survivors still talk */
	{
		uint8_t x = 1;
		unsigned other = PCTX + (lr == 0 ? 2 : 0);
		EXPECT_RC(pn_port_send(port, 0, other, 5, lr, &x, 1), 0);
		rc = pn_port_recv(port, 0, other, 5, 0, 0, &x, 1, &st, 30000000000ll);
		CHECK(rc == 1, "survivors: %d", rc);
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Rank 0 of node 0 against PT_PEER (local: rank 1 of node 0, remote: rank 0 of node 1):
 * ping-pong (one-way latency: min, median) and streaming bandwidth per PT_SIZES. */
static int case_bench(void)
{
	const char *peer = getenv("PT_PEER") ? getenv("PT_PEER") : "local";
	const char *sizes = getenv("PT_SIZES") ? getenv("PT_SIZES") : "8,1024,16384,65536,1048576";
	double scale = getenv("PT_ITERS") ? atof(getenv("PT_ITERS")) : 1.0;
	int local = !strcmp(peer, "local");
	unsigned pn = local ? 0 : 1, pc = local ? PCTX + 1 : PCTX, a;
	char tmp[256];
	uint8_t *sb = malloc(8 << 20), *rb = malloc(8 << 20);
	pn_port_status_t st;

	CHECK(sb && rb, "malloc");
	memset(sb, 1, 8 << 20);
	memset(rb, 1, 8 << 20);
	a = me == 0 && lr == 0 ? 1 : me == pn && myctx == pc ? 2 : 0;
	snprintf(tmp, sizeof(tmp), "%s", sizes);
	for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
		size_t n = strtoul(t, NULL, 0);
		unsigned iters = (unsigned)(scale * (n < 16384 ? 20000 : n < 262144 ? 2000 : 300)), warm = iters / 10 + 1;
		uint64_t *samp = calloc(iters + warm, sizeof(uint64_t)), last, t0 = 0;
		CHECK(samp && n <= (8u << 20), "size");
		pn_port_stats_t pb;
		if (sync_procs(0) < 0)
			return -1;
		EXPECT_RC(pn_port_stats(port, &pb), 0);
		last = t_now_ns();
		for (unsigned i = 0; a && i < iters + warm; i++) {
			if (i == warm)
				t0 = t_now_ns();
			if (a == 1) {
				if (pn_port_send(port, pn, pc, 0, i, sb, n) < 0 ||
				    pn_port_recv(port, pn, pc, 0, 0, 0, rb, n, &st, -1) < 0)
					CHECK(0, "pingpong");
			} else {
				if (pn_port_recv(port, 0, PCTX, 0, 0, 0, rb, n, &st, -1) < 0 ||
				    pn_port_send(port, 0, PCTX, 0, i, sb, n) < 0)
					CHECK(0, "pingpong");
			}
			uint64_t now = t_now_ns();
			samp[i] = now - last;
			last = now;
		}
		double lat = a ? (double)(t_now_ns() - t0) / iters / 2 : 0;
		if (a)
			qsort(samp + warm, iters, sizeof(uint64_t), cmp_u64);
		if (sync_procs(0) < 0)
			return -1;
		t0 = t_now_ns();
		if (a == 1) {
			for (unsigned i = 0; i < iters; i++)
				CHECK(pn_port_send(port, pn, pc, 1, i, sb, n) == 0, "stream send");
			CHECK(pn_port_recv(port, pn, pc, 1, 0, 0, rb, 8, &st, -1) >= 0, "stream ack");
		} else if (a == 2) {
			for (unsigned i = 0; i < iters; i++)
				CHECK(pn_port_recv(port, 0, PCTX, 1, 0, 0, rb, n, &st, -1) >= 0, "stream recv");
			CHECK(pn_port_send(port, 0, PCTX, 1, 0, sb, 0) == 0, "stream ack");
		}
		if (a == 1) {
			pn_port_stats_t ps;
			double sn = (double)(t_now_ns() - t0);
			EXPECT_RC(pn_port_stats(port, &ps), 0);
			say("{\"bench\": \"ports\", \"peer\": \"%s\", \"path\": \"%s\", \"bytes\": %zu, \"iters\": %u, "
			    "\"latency_ns\": %.0f, \"latency_min_ns\": %.0f, \"latency_median_ns\": %.0f, \"MBps\": %.1f}",
			    peer, ps.shm_msgs - pb.shm_msgs >= iters ? "shm" : "nic", n, iters, lat, samp[warm] / 2.0, samp[warm + iters / 2] / 2.0,
			    n * (double)iters / sn * 1e3);
		}
		free(samp);
	}
	say("ok bench");
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	const char *backend = argc > 2 ? argv[2] : NULL;
	const char *s = getenv("PARANIC_PORT_SHM");
	pn_port_opts_t o;
	int r, local_sync;

	P = (unsigned)t_env_long("PARANIC_PPN", 1);
	lr = (unsigned)t_env_long("PARANIC_LOCAL_RANK", 0);
	shm = !(s && !strcmp(s, "0"));
	pn_port_opts_init(&o);
	o.hal.ctx = (int)(PCTX + lr);
	o.hal.backend = backend;
	t_case = name;
	r = pn_port_open(&port, &o);
	if (r < 0) {
		say("FAIL %s: pn_port_open(ctx %u): %d (%s)", name, PCTX + lr, r, pn_strerror(r));
		return 1;
	}
	hal = pn_port_hal(port);
	me = (unsigned)pn_port_node(port);
	myctx = (unsigned)pn_port_ctx(port);
	N = (unsigned)pn_num_nodes(hal);
	E = (size_t)pn_port_eager_max(port);
	/* all open before anyone sends */
	local_sync = !strcmp(name, "local") || !strcmp(name, "isolation") || !strcmp(name, "kill");
	if (sync_procs(local_sync) < 0)
		return 1;
	pn_port_stats(port, &ps0);
	pn_status(hal, &hs0);
	if (!strcmp(name, "local"))
		r = case_local();
	else if (!strcmp(name, "mix"))
		r = case_mix();
	else if (!strcmp(name, "isolation"))
		r = case_isolation();
	else if (!strcmp(name, "kill"))
		r = case_kill();
	else if (!strcmp(name, "bench"))
		r = case_bench();
	else {
		say("FAIL unknown case %s", name);
		return 2;
	}
	if (r == 0 && strcmp(name, "kill"))
		r = sync_procs(local_sync);   /* nobody closes while others still need it */
	pn_port_close(port);
	return r == 0 && !t_failures ? 0 : 1;
}
