/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports_test: the ports layer over any backend, one process per node (pn_launch).
 *
 *   pn_launch -n N -- ports_test CASE [BACKEND]
 *
 * CASE: sizes, huge, match, order, channels, multi, all_to_all, flood, errors, forge,
 * kill (wants `pn_launch -k 1:150:phase-kill -r 300` and a short
 * PARANIC_PORT_TIMEOUT_MS), bench. Every port is context PCTX of its node (multi: a
 * second process per node on context PCTX + 1). Prints "ok CASE ..." or "FAIL CASE:
 * ..." and exits 0 only on success.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paranic/pn_ports.h"
#include "tutil.h"
#include "../src/ports_wire.h"   /* the wire format, to forge packets (case forge) */

#define PCTX 1
#define ALL (~0ull)

static pn_port_t *port;
static unsigned me, myctx, N, mtu;
static size_t E;   /* the eager limit */

static uint32_t seed_of(unsigned src, unsigned sctx, unsigned dst, unsigned seq)
{
	return src * 7919u + sctx * 613u + dst * 104729u + seq * 31u + 1;
}

static int open_port(unsigned ctx, const char *backend)
{
	pn_port_opts_t o;
	int r;
	pn_port_opts_init(&o);
	o.hal.ctx = (int)ctx;
	o.hal.backend = backend;
	r = pn_port_open(&port, &o);
	CHECK(r == 0, "pn_port_open(ctx %u) returned %d (%s)", ctx, r, pn_strerror(r));
	me = (unsigned)pn_port_node(port);
	myctx = (unsigned)pn_port_ctx(port);
	N = (unsigned)pn_num_nodes(pn_port_hal(port));
	mtu = (unsigned)pn_mtu(pn_port_hal(port));
	E = (size_t)pn_port_eager_max(port);
	return 0;
}

/* Send message `seq` (pattern of me -> dst) of len bytes from buf. */
static int psend(unsigned dst, unsigned dctx, int chan, uint64_t tag, unsigned seq, size_t len, uint8_t *buf)
{
	int r;
	pat_fill(buf, len, seed_of(me, myctx, dst, seq), 0);
	r = pn_port_send(port, dst, dctx, chan, tag, buf, len);
	CHECK(r == 0, "pn_port_send(%u:%u ch %d, %zu bytes) returned %d (%s)", dst, dctx, chan, len, r,
	      pn_strerror(r));
	return 0;
}

static int pisend(unsigned dst, unsigned dctx, int chan, uint64_t tag, unsigned seq, size_t len, uint8_t *buf,
		  pn_port_req_t **req)
{
	int r;
	pat_fill(buf, len, seed_of(me, myctx, dst, seq), 0);
	r = pn_port_isend(port, dst, dctx, chan, tag, buf, len, req);
	CHECK(r == 0 && *req, "pn_port_isend(%u:%u, %zu bytes) returned %d (%s)", dst, dctx, len, r, pn_strerror(r));
	return 0;
}

/* Check a received message against what src sent as message seq. */
static int check_msg(const pn_port_status_t *st, unsigned src, unsigned sctx, int chan, uint64_t tag,
		     unsigned seq, size_t len, const uint8_t *buf)
{
	size_t bad;
	CHECK(st->error == 0, "status error %d", st->error);
	CHECK(st->src_node == (int)src && st->src_ctx == (int)sctx, "from %d:%d, expected %u:%u (tag %#llx)",
	      st->src_node, st->src_ctx, src, sctx, (unsigned long long)st->tag);
	CHECK(st->channel == chan && st->tag == tag, "channel %d tag %#llx, expected %d %#llx", st->channel,
	      (unsigned long long)st->tag, chan, (unsigned long long)tag);
	CHECK(st->len == len, "length %zu, expected %zu (tag %#llx)", st->len, len, (unsigned long long)tag);
	bad = pat_check(buf, len, seed_of(src, sctx, me, seq), 0);
	CHECK(bad == (size_t)-1, "message %u from %u:%u (%zu bytes) differs at byte %zu", seq, src, sctx, len, bad);
	return 0;
}

static int precv(int src, int sctx, int chan, uint64_t tag, uint64_t mask, uint8_t *buf, size_t cap,
		 pn_port_status_t *st)
{
	int r = pn_port_recv(port, src, sctx, chan, tag, mask, buf, cap, st, -1);
	CHECK(r >= 0 && (size_t)r == st->len, "pn_port_recv(%d:%d ch %d tag %#llx/%#llx) returned %d (%s)", src,
	      sctx, chan, (unsigned long long)tag, (unsigned long long)mask, r, pn_strerror(r));
	return 0;
}

static int wait_ok(pn_port_req_t **req, const char *what)
{
	pn_port_status_t st;
	int r = pn_port_wait(port, req, &st, -1);
	CHECK(r == 1 && !*req, "%s: pn_port_wait returned %d (%s)", what, r, pn_strerror(r));
	return 0;
}

/* ---- sizes: 0, 1, MTU-1, MTU, MTU+1, eager max, eager max + 1, 1 MiB ------------------------ */

static int case_sizes(void)
{
	size_t sizes[] = {0, 1, mtu - 1, mtu, mtu + 1, E, E + 1, 1 << 20};
	enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
	size_t cap = 1 << 20;
	pn_port_status_t st;
	uint8_t *buf = malloc(cap);
	CHECK(buf, "malloc");

	if (me == 0) {
		pn_port_req_t *echo[NS], *self[NS];
		uint8_t *ebuf[NS], *sbuf[NS];
		/* The echoes' receives are posted before anything is sent: posted, then arrived. */
		for (unsigned i = 0; i < NS; i++) {
			ebuf[i] = malloc(sizes[i] + 1);
			sbuf[i] = malloc(sizes[i] + 1);
			CHECK(ebuf[i] && sbuf[i], "malloc");
			EXPECT_RC(pn_port_irecv(port, 1, PCTX, 4, 0x7000 + i, ALL, ebuf[i], sizes[i], &echo[i]), 0);
		}
		EXPECT_RC(pn_port_barrier(port), 0);
		for (unsigned i = 0; i < NS; i++)   /* plain memory: eager, or bounce buffers */
			if (psend(1, PCTX, (int)(i % 3), 0x5000 + i, i, sizes[i], buf) < 0)
				return -1;
		/* To itself, all at once (rendezvous to oneself needs the receive posted later). */
		for (unsigned i = 0; i < NS; i++)
			if (pisend(0, PCTX, 9, 0x6000 + i, 50 + i, sizes[i], sbuf[i], &self[i]) < 0)
				return -1;
		for (unsigned i = NS; i-- > 0;) {   /* in reverse: matching by tag */
			if (precv(0, PCTX, 9, 0x6000 + i, ALL, buf, cap, &st) < 0 ||
			    check_msg(&st, 0, PCTX, 9, 0x6000 + i, 50 + i, sizes[i], buf) < 0)
				return -1;
		}
		for (unsigned i = 0; i < NS; i++) {
			if (wait_ok(&self[i], "send to self") < 0)
				return -1;
			int r = pn_port_wait(port, &echo[i], &st, -1);
			CHECK(r == 1, "echo %u: %d (%s)", i, r, pn_strerror(r));
			if (check_msg(&st, 1, PCTX, 4, 0x7000 + i, 100 + i, sizes[i], ebuf[i]) < 0)
				return -1;
			free(ebuf[i]);
			free(sbuf[i]);
		}
		say("ok sizes %u sizes to node 1 and back (posted first), to itself; eager max %zu, mtu %u", NS, E, mtu);
	} else if (me == 1) {
		uint8_t *reg;
		pn_port_stats_t ps;
		EXPECT_RC(pn_dma_alloc(pn_port_hal(port), cap, (void **)&reg), 0);
		EXPECT_RC(pn_port_barrier(port), 0);
		for (unsigned i = 0; i < NS; i++) {
			if (precv(0, PCTX, (int)(i % 3), 0x5000 + i, ALL, buf, cap, &st) < 0 ||
			    check_msg(&st, 0, PCTX, (int)(i % 3), 0x5000 + i, i, sizes[i], buf) < 0)
				return -1;
		}
		for (unsigned i = 0; i < NS; i++)   /* registered memory: rendezvous DMA in place */
			if (psend(0, PCTX, 4, 0x7000 + i, 100 + i, sizes[i], reg) < 0)
				return -1;
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		unsigned ne = 0;
		for (unsigned i = 0; i < NS; i++)
			ne += sizes[i] <= E;
		CHECK(ps.eager_msgs == ne && ps.rndv_msgs == NS - ne, "eager %llu rndv %llu, expected %u eager",
		      (unsigned long long)ps.eager_msgs, (unsigned long long)ps.rndv_msgs, ne);
		EXPECT_RC(pn_dma_free(pn_port_hal(port), reg), 0);
		say("ok sizes received and echoed %u messages (%u eager, %u rendezvous)", NS, ne, NS - ne);
	} else {
		EXPECT_RC(pn_port_barrier(port), 0);
		say("ok sizes (idle)");
	}
	free(buf);
	return 0;
}

/* ---- huge: PT_HUGE_MB (64) MiB from plain memory, 20 MiB from registered memory ------------- */

static int case_huge(void)
{
	size_t big = (size_t)t_env_long("PT_HUGE_MB", 64) << 20, reg = (size_t)20 << 20;
	uint64_t t0 = t_now_ns();
	pn_port_status_t st;
	uint8_t *buf = malloc(big);
	CHECK(buf, "malloc");
	if (me == 0) {
		uint8_t *r;
		EXPECT_RC(pn_dma_alloc(pn_port_hal(port), reg, (void **)&r), 0);
		if (psend(1, PCTX, 1, 1, 1, big, buf) < 0 || psend(1, PCTX, 1, 2, 2, reg, r) < 0)
			return -1;
		EXPECT_RC(pn_dma_free(pn_port_hal(port), r), 0);
		say("ok huge sent %zu MiB and %zu MiB", big >> 20, reg >> 20);
	} else if (me == 1) {
		if (precv(0, PCTX, 1, 1, ALL, buf, big, &st) < 0 || check_msg(&st, 0, PCTX, 1, 1, 1, big, buf) < 0 ||
		    precv(0, PCTX, 1, 2, ALL, buf, big, &st) < 0 || check_msg(&st, 0, PCTX, 1, 2, 2, reg, buf) < 0)
			return -1;
		say("ok huge received %zu MiB and %zu MiB intact in %.0f ms", big >> 20, reg >> 20,
		    (t_now_ns() - t0) / 1e6);
	} else {
		say("ok huge (idle)");
	}
	free(buf);
	return 0;
}

/* ---- matching: source, channel, tag, mask; unexpected then posted; posted then arrived ------ */

#define MTAG(s, k) (((uint64_t)(s) << 12) | ((uint64_t)(k) << 4) | 3)

static size_t msize(unsigned k)
{
	return k == 5 ? E + 1000 : 100 * k;
}

static int case_match(void)
{
	pn_port_status_t st;
	size_t cap = E + 1000 > 4096 ? E + 1000 : 4096;
	uint8_t *buf = malloc(cap), *sb[6];
	pn_port_req_t *rq[6];

	CHECK(buf, "malloc");
	/* Phase A: nodes 1 and 2 send six messages each (k = 5 by rendezvous), then everyone
	 * meets; node 0 picks them out of its unexpected queue. */
	if (me == 1 || me == 2) {
		for (unsigned k = 0; k < 6; k++) {
			sb[k] = malloc(msize(k) + 1);
			CHECK(sb[k], "malloc");
			if (pisend(0, PCTX, k % 2 ? 7 : 0, MTAG(me, k), k, msize(k), sb[k], &rq[k]) < 0)
				return -1;
		}
	}
	EXPECT_RC(pn_port_barrier(port), 0);
	if (me == 0) {
		int taken[3][6] = {{0}};
		uint64_t t0;
		/* wait until both rendezvous requests are in */
		t0 = t_now_ns();
		while (pn_port_probe(port, 2, PCTX, PN_PORT_ANY, MTAG(2, 5), ALL, &st) != 1 ||
		       pn_port_probe(port, 1, PCTX, PN_PORT_ANY, MTAG(1, 5), ALL, &st) != 1)
			CHECK(t_now_ns() - t0 < 10000000000ull, "the RTS did not come");
		EXPECT_RC(pn_port_probe(port, PN_PORT_ANY, PN_PORT_ANY, 7, MTAG(2, 3), ALL, &st), 1);
		CHECK(st.src_node == 2 && st.src_ctx == PCTX && st.len == 300 && st.channel == 7, "probe: %d %zu",
		      st.src_node, st.len);
		EXPECT_RC(pn_port_probe(port, 1, PCTX, 0, 0, 0, &st), 1);   /* node 1's first on channel 0 */
		CHECK(st.tag == MTAG(1, 0) && st.len == 0, "probe: tag %#llx", (unsigned long long)st.tag);
		EXPECT_RC(pn_port_probe(port, 1, PCTX, 0, MTAG(1, 1), ALL, &st), 0);   /* k=1 is on channel 7 */
		EXPECT_RC(pn_port_probe(port, 1, 5, PN_PORT_ANY, 0, 0, &st), 0);       /* nothing from ctx 5 */

		/* by source, channel and exact tag */
		if (precv(2, PCTX, 7, MTAG(2, 3), ALL, buf, cap, &st) < 0 || check_msg(&st, 2, PCTX, 7, MTAG(2, 3), 3, 300, buf))
			return -1;
		taken[2][3] = 1;
		/* by tag class under a mask, any source and context */
		if (precv(PN_PORT_ANY, PN_PORT_ANY, 0, (uint64_t)1 << 12, 0xf000, buf, cap, &st) < 0 ||
		    check_msg(&st, 1, PCTX, 0, MTAG(1, 0), 0, 0, buf) < 0)
			return -1;
		taken[1][0] = 1;
		/* any channel, any tag, given source: the next in node 1's order */
		if (precv(1, PN_PORT_ANY, PN_PORT_ANY, 0, 0, buf, cap, &st) < 0 ||
		    check_msg(&st, 1, PCTX, 7, MTAG(1, 1), 1, 100, buf) < 0)
			return -1;
		taken[1][1] = 1;
		/* too small a buffer: -EMSGSIZE, the message stays; then it fits */
		EXPECT_RC(pn_port_recv(port, 2, PCTX, PN_PORT_ANY, MTAG(2, 5) & 0xff0, 0xff0, buf, 10, &st, -1), -EMSGSIZE);
		CHECK(st.len == E + 1000 && st.src_node == 2 && st.tag == MTAG(2, 5), "EMSGSIZE status %zu", st.len);
		if (precv(2, PCTX, PN_PORT_ANY, MTAG(2, 5) & 0xff0, 0xff0, buf, cap, &st) < 0 ||
		    check_msg(&st, 2, PCTX, 7, MTAG(2, 5), 5, E + 1000, buf) < 0)
			return -1;
		taken[2][5] = 1;
		/* the rest, per source in order */
		for (unsigned s = 1; s <= 2; s++)
			for (unsigned k = 0; k < 6; k++) {
				if (taken[s][k])
					continue;
				if (precv((int)s, PCTX, PN_PORT_ANY, 0, 0, buf, cap, &st) < 0 ||
				    check_msg(&st, s, PCTX, k % 2 ? 7 : 0, MTAG(s, k), k, msize(k), buf) < 0)
					return -1;
			}
		EXPECT_RC(pn_port_probe(port, PN_PORT_ANY, PN_PORT_ANY, PN_PORT_ANY, 0, 0, &st), 0);
	} else if (me <= 2) {
		for (unsigned k = 0; k < 6; k++) {
			if (wait_ok(&rq[k], "phase A send") < 0)
				return -1;
			free(sb[k]);
		}
	}

	/* Phase B: node 0 posts four receives, then the others send. */
	if (me == 0) {
		uint8_t *rb[4];
		pn_port_req_t *r[4];
		struct {
			int src, chan;
			uint64_t tag, mask;
			unsigned from, seq;
			int ch;
			uint64_t want_tag;
			size_t len;
		} exp[4] = {
			{2, 5, 0, 0, 2, 13, 5, 0xD, 3000},          /* Ra: anything from node 2 on 5 */
			{1, 5, 0xB, ALL, 1, 11, 5, 0xB, E + 1},     /* Rb: tag 0xB from node 1 (2nd sent) */
			{PN_PORT_ANY, 6, 0, 0, 1, 12, 6, 0xC, 2000}, /* Rc: channel 6 from anyone */
			{1, 5, 0, 0, 1, 10, 5, 0xA, 10},            /* Rd: node 1 on 5: the first, 0xA */
		};
		for (int i = 0; i < 4; i++) {
			rb[i] = malloc(cap);
			CHECK(rb[i], "malloc");
			EXPECT_RC(pn_port_irecv(port, exp[i].src, exp[i].src < 0 ? PN_PORT_ANY : PCTX, exp[i].chan,
						exp[i].tag, exp[i].mask, rb[i], cap, &r[i]), 0);
		}
		EXPECT_RC(pn_port_barrier(port), 0);
		for (int i = 0; i < 4; i++) {
			int rc = pn_port_wait(port, &r[i], &st, -1);
			CHECK(rc == 1, "receive %d: %d", i, rc);
			if (check_msg(&st, exp[i].from, PCTX, exp[i].ch, exp[i].want_tag, exp[i].seq, exp[i].len, rb[i]) < 0)
				return -1;
			free(rb[i]);
		}
	} else {
		EXPECT_RC(pn_port_barrier(port), 0);
		if (me == 1) {
			uint8_t *b = malloc(cap);
			CHECK(b, "malloc");
			if (psend(0, PCTX, 5, 0xA, 10, 10, b) < 0 || psend(0, PCTX, 5, 0xB, 11, E + 1, b) < 0 ||
			    psend(0, PCTX, 6, 0xC, 12, 2000, b) < 0)
				return -1;
			free(b);
		} else if (me == 2) {
			if (psend(0, PCTX, 5, 0xD, 13, 3000, buf) < 0)
				return -1;
		}
	}

	/* Phase C: time limits, cancel, an empty message. */
	if (me == 0) {
		pn_port_req_t *r;
		uint64_t t0 = t_now_ns();
		EXPECT_RC(pn_port_recv(port, PN_PORT_ANY, PN_PORT_ANY, 77, 0, 0, buf, cap, &st, 0), -ETIMEDOUT);
		EXPECT_RC(pn_port_recv(port, PN_PORT_ANY, PN_PORT_ANY, 77, 0, 0, buf, cap, &st, 20000000), -ETIMEDOUT);
		CHECK(t_now_ns() - t0 >= 20000000, "the 20 ms time limit took %llu ns", (unsigned long long)(t_now_ns() - t0));
		EXPECT_RC(pn_port_irecv(port, PN_PORT_ANY, PN_PORT_ANY, 77, 0, 0, buf, cap, &r), 0);
		EXPECT_RC(pn_port_test(port, &r, &st), 0);
		EXPECT_RC(pn_port_wait(port, &r, &st, 1000000), -ETIMEDOUT);
		CHECK(r, "a timed-out wait freed the request");
		EXPECT_RC(pn_port_cancel(port, &r), 0);
		CHECK(!r, "cancel did not free the request");
		EXPECT_RC(pn_port_irecv(port, 1, PCTX, 8, 0, 0, NULL, 0, &r), 0);
		EXPECT_RC(pn_port_barrier(port), 0);
		/* node 1 sends the empty message on 8, then one on 10: once that one is here, the
		 * receive on 8 has completed (same connection, in order) */
		if (precv(1, PCTX, 10, 0, 0, buf, cap, &st) < 0)
			return -1;
		EXPECT_RC(pn_port_cancel(port, &r), -EALREADY);
		EXPECT_RC(pn_port_test(port, &r, &st), 1);
		CHECK(!r && st.len == 0 && st.src_node == 1 && st.channel == 8, "empty message: len %zu", st.len);
		say("ok match unexpected (probe, source/channel/tag/mask, EMSGSIZE kept), posted-first (4 receives), "
		    "time limits, cancel, empty message");
	} else {
		EXPECT_RC(pn_port_barrier(port), 0);
		if (me == 1 && (psend(0, PCTX, 8, 0, 0, 0, buf) < 0 || psend(0, PCTX, 10, 0, 1, 5, buf) < 0))
			return -1;
		say("ok match sender");
	}
	free(buf);
	return 0;
}

/* ---- order: 400 messages on 4 interleaved channels, received channel by channel ----------- */

static int case_order(void)
{
	const unsigned M = 400, C = 4;
	size_t sz[] = {0, 8, 300, 2000, E + 1, 5000, 64};
	enum { NSZ = sizeof(sz) / sizeof(sz[0]) };
	pn_port_status_t st;

	if (me == 1) {
		pn_port_req_t **rq = calloc(M, sizeof(*rq));
		uint8_t **b = calloc(M, sizeof(*b));
		pn_port_stats_t ps;
		CHECK(rq && b, "calloc");
		for (unsigned k = 0; k < M; k++) {
			b[k] = malloc(sz[k % NSZ] + 1);
			CHECK(b[k], "malloc");
			if (pisend(0, PCTX, (int)(k % C), k, k, sz[k % NSZ], b[k], &rq[k]) < 0)
				return -1;
		}
		for (unsigned k = 0; k < M; k++) {
			if (wait_ok(&rq[k], "order send") < 0)
				return -1;
			free(b[k]);
		}
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		say("ok order sent %u messages on %u channels: %llu eager, %llu rendezvous (%llu for want of credit)", M,
		    C, (unsigned long long)ps.eager_msgs, (unsigned long long)ps.rndv_msgs,
		    (unsigned long long)ps.credit_fallbacks);
		free(rq);
		free(b);
	} else if (me == 0) {
		uint8_t *buf = malloc(E + 5000);
		pn_port_stats_t ps;
		CHECK(buf, "malloc");
		for (unsigned c = C; c-- > 0;)
			for (unsigned k = c; k < M; k += C)
				if (precv(1, PCTX, (int)c, 0, 0, buf, E + 5000, &st) < 0 ||
				    check_msg(&st, 1, PCTX, (int)c, k, k, sz[k % NSZ], buf) < 0)
					return -1;
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		say("ok order %u messages in order per channel, channels taken last to first; unexpected peak %llu "
		    "bytes, %llu overtaken and held", M, (unsigned long long)ps.unexpected_peak,
		    (unsigned long long)ps.held);
		free(buf);
	} else {
		say("ok order (idle)");
	}
	return 0;
}

/* ---- channels: one message on each of NCH channels (and 65535), taken in another order ---- */

static int case_channels(void)
{
	const unsigned NCH = (unsigned)t_env_long("PT_CHANNELS", 3000);
	pn_port_status_t st;

	if (me == 1) {
		pn_port_req_t **rq = calloc(NCH + 1, sizeof(*rq));
		uint8_t *b = malloc((size_t)(NCH + 1) * 128);
		CHECK(rq && b, "malloc");
		for (unsigned c = 0; c <= NCH; c++) {
			unsigned ch = c == NCH ? PN_PORT_MAX_CHANNEL : c;
			if (pisend(0, PCTX, (int)ch, ch * 3ull, ch, ch % 97, b + (size_t)c * 128, &rq[c]) < 0)
				return -1;
		}
		for (unsigned c = 0; c <= NCH; c++)
			if (wait_ok(&rq[c], "channel send") < 0)
				return -1;
		free(rq);
		free(b);
		say("ok channels sent one message on each of %u channels", NCH + 1);
	} else if (me == 0) {
		uint8_t buf[128];
		if (precv(1, PCTX, PN_PORT_MAX_CHANNEL, 0, 0, buf, sizeof(buf), &st) < 0 ||
		    check_msg(&st, 1, PCTX, PN_PORT_MAX_CHANNEL, PN_PORT_MAX_CHANNEL * 3ull, PN_PORT_MAX_CHANNEL,
			      PN_PORT_MAX_CHANNEL % 97, buf) < 0)
			return -1;
		for (unsigned i = 0; i < NCH; i++) {
			unsigned c = (unsigned)(((uint64_t)i * 7919u + 17) % NCH);
			if (precv(1, PCTX, (int)c, 0, 0, buf, sizeof(buf), &st) < 0 ||
			    check_msg(&st, 1, PCTX, (int)c, c * 3ull, c, c % 97, buf) < 0)
				return -1;
		}
		say("ok channels %u channels, each message found on its channel", NCH + 1);
	} else {
		say("ok channels (idle)");
	}
	return 0;
}

/* ---- traffic between many ports ------------------------------------------------------------ */

static size_t mix(unsigned k)
{
	static const size_t MIX[] = {0, 8, 100, 1024, 1500, 5000, 0 /* E + 1 */, 8, 70000, 16};
	size_t s = MIX[k % 10];
	return k % 10 == 6 ? E + 1 : s;
}

/* Every port of `peers` sends M messages to every port (itself too), then receives from
 * any: per-source order and content. */
static int exchange(const unsigned (*peers)[2], unsigned np, unsigned M, const char *what)
{
	unsigned total = np * M, k = 0;
	pn_port_req_t **rq = calloc(total, sizeof(*rq));
	uint8_t **b = calloc(total, sizeof(*b));
	unsigned *next = calloc(np, sizeof(unsigned));
	uint8_t *buf = malloc(70000 + E);
	pn_port_status_t st;
	CHECK(rq && b && next && buf, "malloc");

	for (unsigned m = 0; m < M; m++)
		for (unsigned j = 0; j < np; j++, k++) {
			unsigned d = peers[j][0], dc = peers[j][1];
			size_t len = mix(m + me + myctx + d + dc);
			b[k] = malloc(len + 1);
			CHECK(b[k], "malloc");
			if (pisend(d, dc, 0, m, m, len, b[k], &rq[k]) < 0)
				return -1;
		}
	for (unsigned i = 0; i < total; i++) {
		unsigned s;
		if (precv(PN_PORT_ANY, PN_PORT_ANY, 0, 0, 0, buf, 70000 + E, &st) < 0)
			return -1;
		for (s = 0; s < np; s++)
			if (peers[s][0] == (unsigned)st.src_node && peers[s][1] == (unsigned)st.src_ctx)
				break;
		CHECK(s < np, "message from %d:%d", st.src_node, st.src_ctx);
		CHECK(next[s] < M, "too many from %d:%d", st.src_node, st.src_ctx);
		if (check_msg(&st, peers[s][0], peers[s][1], 0, next[s], next[s],
			      mix(next[s] + peers[s][0] + peers[s][1] + me + myctx), buf) < 0)
			return -1;
		next[s]++;
	}
	for (unsigned i = 0; i < total; i++) {
		if (wait_ok(&rq[i], what) < 0)
			return -1;
		free(b[i]);
	}
	free(rq);
	free(b);
	free(next);
	free(buf);
	return 0;
}

static int case_all_to_all(void)
{
	const unsigned M = (unsigned)t_env_long("PT_MESSAGES", 20);
	unsigned (*peers)[2] = calloc(N, sizeof(*peers));
	CHECK(peers, "calloc");
	for (unsigned n = 0; n < N; n++) {
		peers[n][0] = n;
		peers[n][1] = PCTX;
	}
	if (exchange((const unsigned(*)[2])peers, N, M, "all_to_all send") < 0)
		return -1;
	say("ok all_to_all %u ports, %u messages each way per pair (and to itself), per-source order kept", N, M);
	free(peers);
	return 0;
}

/* Two processes per node: this one (context PCTX) and a child (context PCTX + 1). */
static int case_multi(const char *backend)
{
	const unsigned M = (unsigned)t_env_long("PT_MESSAGES", 30);
	unsigned peers[8][2], np = 0;
	pid_t child;
	int status = 0, r;

	CHECK(N <= 4, "multi: at most 4 nodes");
	pn_port_close(port);   /* the child opens its own port; start both after the fork */
	port = NULL;
	fflush(stdout);
	child = fork();
	CHECK(child >= 0, "fork");
	if (open_port(child == 0 ? PCTX + 1 : PCTX, backend) < 0)
		_exit(1);
	for (unsigned n = 0; n < N; n++)
		for (unsigned c = PCTX; c <= PCTX + 1; c++) {
			peers[np][0] = n;
			peers[np][1] = c;
			np++;
		}
	r = exchange((const unsigned(*)[2])peers, np, M, "multi send");
	if (r == 0)
		say("ok multi port %u:%u exchanged %u messages with each of %u ports", me, myctx, M, np);
	/* Stay until every port has everything: each tells each other it is done. */
	if (r == 0) {
		pn_port_status_t st;
		uint8_t x = 0;
		for (unsigned j = 0; j < np && r == 0; j++)
			r = pn_port_send(port, peers[j][0], peers[j][1], 1, 0, &x, 1);
		for (unsigned j = 0; j < np && r >= 0; j++)
			r = pn_port_recv(port, PN_PORT_ANY, PN_PORT_ANY, 1, 0, 0, &x, 1, &st, 30000000000ll);
		r = r < 0 ? r : 0;
		if (r)
			say("FAIL multi: done handshake %d (%s)", r, pn_strerror(r));
	}
	pn_port_close(port);
	port = NULL;
	if (child == 0)
		_exit(r == 0 && !t_failures ? 0 : 1);
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the second process of node %u failed (%#x)", me, status);
	return r;
}

/* ---- a slow receiver flooded with eager messages ------------------------------------------ */

static int case_flood(void)
{
	const unsigned F = (unsigned)t_env_long("PT_FLOOD", 3000);
	size_t sz[] = {0, 16, 200, 1000, E};
	pn_port_stats_t ps;
	pn_port_status_t st;
	size_t cap = E + 1 > 1000 ? E + 1 : 1000;
	uint8_t *buf = malloc(cap);
	CHECK(buf, "malloc");

	if (me == 0) {
		uint64_t t0 = t_now_ns();
		for (unsigned k = 0; k < F; k++)
			if (psend(1, PCTX, 0, k, k, sz[k % 5], buf) < 0)
				return -1;
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		CHECK(ps.credit_fallbacks > 0 && ps.eager_msgs > 0, "no fallback to rendezvous: eager %llu",
		      (unsigned long long)ps.eager_msgs);
		say("ok flood sent %u eager-sized messages in %.0f ms: %llu eager, %llu by rendezvous for want of credit",
		    F, (t_now_ns() - t0) / 1e6, (unsigned long long)ps.eager_msgs,
		    (unsigned long long)ps.credit_fallbacks);
	} else if (me == 1) {
		pn_port_opts_t o;
		long window;
		pn_port_opts_init(&o);
		t_sleep_us(100000);   /* late to the party: the sender runs into its credit limit */
		for (unsigned k = 0; k < F; k++) {
			if (precv(0, PCTX, 0, 0, 0, buf, cap, &st) < 0 ||
			    check_msg(&st, 0, PCTX, 0, k, k, sz[k % 5], buf) < 0)
				return -1;
			if (k % 100 == 99)
				t_sleep_us(1000);
		}
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		window = t_env_long("PARANIC_EAGER_WINDOW", 0);
		if (!window)
			window = 8 * ((long)E + PN_PORT_MSG_COST) > 65536 ? 8 * ((long)E + PN_PORT_MSG_COST) : 65536;
		CHECK(ps.unexpected_peak > 0 && ps.unexpected_peak <= (uint64_t)window, "unexpected peak %llu, window %ld",
		      (unsigned long long)ps.unexpected_peak, window);
		CHECK(ps.overrun == 0 && ps.nomem == 0 && ps.unexpected_bytes == 0, "overrun %llu nomem %llu",
		      (unsigned long long)ps.overrun, (unsigned long long)ps.nomem);
		say("ok flood received %u messages in order, unexpected queue peak %llu bytes <= window %ld, %llu credit "
		    "returns", F, (unsigned long long)ps.unexpected_peak, window, (unsigned long long)ps.credit_pkts);
	} else {
		say("ok flood (idle)");
	}
	free(buf);
	return 0;
}

/* ---- bad input, closed ports, a port that closes later ------------------------------------ */

static int case_errors(const char *backend)
{
	uint8_t buf[256];
	pn_port_status_t st;
	pn_port_req_t *r = NULL;
	pn_port_opts_t o;
	pn_port_t *q;
	long tmo = t_env_long("PARANIC_PORT_TIMEOUT_MS", PN_PORT_DEFAULT_TIMEOUT_MS);

	memset(buf, 0, sizeof(buf));
	/* arguments (everyone) */
	EXPECT_RC(pn_port_send(port, N, PCTX, 0, 0, buf, 8), -EHOSTUNREACH);
	EXPECT_RC(pn_port_send(port, (unsigned)-1, PCTX, 0, 0, buf, 8), -EHOSTUNREACH);
	EXPECT_RC(pn_port_send(port, 0, PN_MAX_CONTEXTS, 0, 0, buf, 8), -EINVAL);
	EXPECT_RC(pn_port_send(port, 0, PCTX, -1, 0, buf, 8), -EINVAL);
	EXPECT_RC(pn_port_send(port, 0, PCTX, PN_PORT_MAX_CHANNEL + 1, 0, buf, 8), -EINVAL);
	EXPECT_RC(pn_port_send(port, 0, PCTX, 0, 0, buf, (size_t)PN_PORT_MAX_MSG + 1), -EMSGSIZE);
	EXPECT_RC(pn_port_send(port, 0, PCTX, 0, 0, buf, (size_t)-1), -EINVAL);
	EXPECT_RC(pn_port_send(port, 0, PCTX, 0, 0, NULL, 5), -EINVAL);
	EXPECT_RC(pn_port_send(NULL, 0, PCTX, 0, 0, buf, 5), -EINVAL);
	EXPECT_RC(pn_port_isend(port, 0, PCTX, 0, 0, buf, 5, NULL), -EINVAL);
	EXPECT_RC(pn_port_isend(port, 0, PCTX, 70000, 0, buf, 5, &r), -EINVAL);
	CHECK(r == NULL, "a refused isend left a request");
	EXPECT_RC(pn_port_recv(port, (int)N, PCTX, 0, 0, 0, buf, 8, &st, 0), -EHOSTUNREACH);
	EXPECT_RC(pn_port_recv(port, -2, PCTX, 0, 0, 0, buf, 8, &st, 0), -EINVAL);
	EXPECT_RC(pn_port_recv(port, 0, 99, 0, 0, 0, buf, 8, &st, 0), -EINVAL);
	EXPECT_RC(pn_port_recv(port, 0, PCTX, 70000, 0, 0, buf, 8, &st, 0), -EINVAL);
	EXPECT_RC(pn_port_recv(port, 0, PCTX, -2, 0, 0, buf, 8, &st, 0), -EINVAL);
	EXPECT_RC(pn_port_recv(port, 0, PCTX, 0, 0, 0, NULL, 8, &st, 0), -EINVAL);
	EXPECT_RC(pn_port_irecv(port, 0, PCTX, 0, 0, 0, buf, 8, NULL), -EINVAL);
	EXPECT_RC(pn_port_probe(port, 0, PCTX, 65536, 0, 0, &st), -EINVAL);
	EXPECT_RC(pn_port_test(port, NULL, &st), -EINVAL);
	EXPECT_RC(pn_port_test(port, &r, &st), -EINVAL);   /* r is NULL */
	EXPECT_RC(pn_port_wait(NULL, &r, &st, 0), -EINVAL);
	EXPECT_RC(pn_port_cancel(port, &r), -EINVAL);
	EXPECT_RC(pn_port_progress(NULL), -EINVAL);
	EXPECT_RC(pn_port_close(NULL), -EINVAL);
	EXPECT_RC(pn_port_set_eager_max(port, -1), -EINVAL);
	EXPECT_RC(pn_port_set_eager_max(port, (long)PN_PORT_EAGER_LIMIT + 1), -EINVAL);
	EXPECT_RC(pn_port_set_eager_max(port, (long)E), (long)E);
	/* memory registration */
	{
		long pg = sysconf(_SC_PAGESIZE);
		uint8_t *m = mmap(NULL, 3 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(m != MAP_FAILED, "mmap");
		munmap(m + pg, (size_t)pg);   /* a hole in the middle */
		EXPECT_RC(pn_port_mem_register(port, m, 3 * (size_t)pg), -EFAULT);
		EXPECT_RC(pn_port_mem_register(port, (void *)(uintptr_t)16, 4096), -EFAULT);
		EXPECT_RC(pn_port_mem_register(port, NULL, 4096), -EINVAL);
		EXPECT_RC(pn_port_mem_register(port, m, 0), -EINVAL);
		if (!strcmp(pn_backend_name(pn_port_hal(port)), "sw")) {
			EXPECT_RC(pn_port_mem_register(port, m, (size_t)pg), 0);
			EXPECT_RC(pn_port_mem_deregister(port, m), 0);
		} else {   /* only the DMA heap is DMA-able on sim */
			EXPECT_RC(pn_port_mem_register(port, m, (size_t)pg), -EFAULT);
		}
		EXPECT_RC(pn_port_mem_deregister(port, m), -ENOENT);
		munmap(m, (size_t)pg);
		munmap(m + 2 * pg, (size_t)pg);
	}
	/* bad options */
	pn_port_opts_init(&o);
	o.hal.backend = backend;
	o.eager_max = -5;
	EXPECT_RC(pn_port_open(&q, &o), -EINVAL);
	o.eager_max = 4096;
	o.eager_window = 1000;
	EXPECT_RC(pn_port_open(&q, &o), -EINVAL);
	o.eager_window = 0;
	o.timeout_ms = 0;
	EXPECT_RC(pn_port_open(&q, &o), -EINVAL);
	o.timeout_ms = -1;
	o.hal.ctx = PCTX;
	EXPECT_RC(pn_port_open(&q, &o), -EBUSY);   /* our own context */

	if (me == 0) {
		uint64_t t0;
		uint8_t *big = malloc(E + 1);
		int rc;
		CHECK(big, "malloc");
		/* a context nobody opened: refused after the timeout */
		t0 = t_now_ns();
		EXPECT_RC(pn_port_send(port, 1, 7, 0, 0, buf, 8), -ECONNREFUSED);
		CHECK(t_now_ns() - t0 >= (uint64_t)tmo * 1000000ull, "refused after %llu ns",
		      (unsigned long long)(t_now_ns() - t0));
		/* the empty message */
		EXPECT_RC(pn_port_send(port, 1, PCTX, 3, 0, NULL, 0), 0);
		EXPECT_RC(pn_port_barrier(port), 0);   /* B1: node 1 opened a second port, context PCTX + 1 */
		/* a rendezvous send to it that is never received: node 1 closes that port */
		EXPECT_RC(pn_port_isend(port, 1, PCTX + 1, 0, 1, big, E + 1, &r), 0);
		t0 = t_now_ns();
		rc = pn_port_wait(port, &r, &st, 20000000000ll);
		CHECK(rc == -ECONNRESET && st.error == -ECONNRESET, "send to a port that closed: %d (%s)", rc,
		      pn_strerror(rc));
		say("ok errors: a port that closed under a waiting send: -ECONNRESET after %.1f ms",
		    (t_now_ns() - t0) / 1e6);
		/* sending to it again: nobody there */
		EXPECT_RC(pn_port_send(port, 1, PCTX + 1, 0, 2, buf, 8), -ECONNREFUSED);
		/* a live but slow receiver keeps a rendezvous send waiting, beyond the timeout,
		 * without an error (it answers the pings from its barrier) */
		EXPECT_RC(pn_port_isend(port, 1, PCTX, 4, 5, big, E + 1, &r), 0);
		EXPECT_RC(pn_port_wait(port, &r, &st, (int64_t)tmo * 3000000ll), -ETIMEDOUT);
		EXPECT_RC(pn_port_cancel(port, &r), -EBUSY);
		EXPECT_RC(pn_port_barrier(port), 0);   /* B2: now node 1 receives it */
		EXPECT_RC(pn_port_wait(port, &r, &st, -1), 1);
		free(big);
		say("ok errors sender: bad arguments, registration, options, refused (%ld ms), reset, slow receiver "
		    "kept alive", tmo);
	} else if (me == 1) {
		pn_port_t *p2;
		pn_port_stats_t ps;
		uint8_t *big = malloc(E + 1);
		CHECK(big, "malloc");
		EXPECT_RC(pn_port_recv(port, 0, PCTX, 3, 0, 0, NULL, 0, &st, -1), 0);
		CHECK(st.len == 0 && st.src_node == 0, "empty message: %zu from %d", st.len, st.src_node);
		pn_port_opts_init(&o);
		o.hal.backend = backend;
		o.hal.ctx = PCTX + 1;
		EXPECT_RC(pn_port_open(&p2, &o), 0);
		EXPECT_RC(pn_port_barrier(port), 0);   /* B1 */
		{
			uint64_t t0 = t_now_ns();
			while (pn_port_probe(p2, 0, PCTX, 0, 1, ALL, &st) != 1)
				CHECK(t_now_ns() - t0 < 20000000000ull, "the RTS did not come to the second port");
		}
		EXPECT_RC(pn_port_close(p2), 0);
		/* B2: node 0 waits beyond the timeout meanwhile; the barrier answers its pings */
		EXPECT_RC(pn_port_barrier(port), 0);
		if (precv(0, PCTX, 4, 5, ALL, big, E + 1, &st) < 0)
			return -1;
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		free(big);
		say("ok errors receiver (%llu pings answered meanwhile)", (unsigned long long)ps.pings);
	} else {
		EXPECT_RC(pn_port_barrier(port), 0);
		EXPECT_RC(pn_port_barrier(port), 0);
		say("ok errors (idle)");
	}
	return 0;
}

/* ---- forged source: the stamped source decides, never the header's or the payload's ------- */

static int case_forge(void)
{
	pn_port_status_t st;
	uint8_t buf[64];

	if (me == 2) {
		pn_port_stats_t ps;
		struct {
			struct pw_msg m;
			uint8_t data[16];
		} pk;
		uint64_t hdr[2] = {0, 0};
		memset(buf, 0, sizeof(buf));
		if (psend(0, PCTX, 1, 0x600D, 1, 16, buf) < 0)   /* connects: seq 0 */
			return -1;
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		memset(&pk, 0, sizeof(pk));
		pk.m.tag = 0xBAD;
		pk.m.len = sizeof(pk.data);
		pk.m.channel = 1;
		pat_fill(pk.data, sizeof(pk.data), seed_of(2, PCTX, 0, 2), 0);
		PN_SET(hdr, PN_HDR_DST_NODE, 0);
		PN_SET(hdr, PN_HDR_DST_CTX, PCTX);
		PN_SET(hdr, PN_HDR_SRC_NODE, 1);   /* forged: node 1 */
		PN_SET(hdr, PN_HDR_SRC_CTX, PCTX);
		PN_SET(hdr, PN_HDR_TYPE, PN_TYPE_DATA);
		PN_SET(hdr, PN_HDR_LENGTH, sizeof(pk));
		PN_SET(hdr, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
		PN_SET(hdr, PN_HDR_TAG, PW_TAG(PW_EAGER, pw_conn_key(ps.epoch, 1), 1));
		EXPECT_RC(pn_pio_raw(pn_port_hal(port), hdr, &pk, sizeof(pk)), 0);
		/* and a message on a connection that does not exist (a made-up key) */
		PN_SET(hdr, PN_HDR_TAG, PW_TAG(PW_EAGER, 0x1234, 0));
		EXPECT_RC(pn_pio_raw(pn_port_hal(port), hdr, &pk, sizeof(pk)), 0);
		/* Out of order on the connection (as when PIO overtakes DMA): sequence numbers
		 * 3 (PIO), 5 (DMA, three packets), 2 (PIO), 4 (PIO) on channel 2: the receiver
		 * holds 3 and 5 back and matches 2, 3, 4, 5. */
		{
			static const uint32_t order[] = {3, 5, 2, 4};
			uint8_t *d;
			size_t big = 2500;
			EXPECT_RC(pn_dma_alloc(pn_port_hal(port), sizeof(struct pw_msg) + big, (void **)&d), 0);
			for (unsigned i = 0; i < 4; i++) {
				uint32_t q = order[i];
				size_t len = q == 5 ? big : 16;
				struct pw_msg w = {0x100u + q, (uint32_t)len, 2, 0};
				uint64_t tag = PW_TAG(PW_EAGER, pw_conn_key(ps.epoch, 1), q);
				memcpy(d, &w, sizeof(w));
				pat_fill(d + sizeof(w), len, seed_of(2, PCTX, 0, q), 0);
				if (q == 5) {
					EXPECT_RC(pn_send_dma(pn_port_hal(port), 0, PCTX, tag, d, sizeof(w) + len), 0);
				} else {
					PN_SET(hdr, PN_HDR_LENGTH, sizeof(w) + len);
					PN_SET(hdr, PN_HDR_TAG, tag);
					EXPECT_RC(pn_pio_raw(pn_port_hal(port), hdr, d, sizeof(w) + len), 0);
				}
				EXPECT_RC(pn_tx_wait(pn_port_hal(port)), 0);   /* this order on the wire */
			}
			EXPECT_RC(pn_dma_free(pn_port_hal(port), d), 0);
		}
		EXPECT_RC(pn_tx_wait(pn_port_hal(port)), 0);
	}
	EXPECT_RC(pn_port_barrier(port), 0);
	if (me == 0) {
		pn_port_stats_t ps;
		uint64_t t0 = t_now_ns();
		/* nothing from node 1 yet, whatever the forged header said */
		EXPECT_RC(pn_port_recv(port, 1, PN_PORT_ANY, PN_PORT_ANY, 0, 0, buf, sizeof(buf), &st, 200000000), -ETIMEDOUT);
		CHECK(t_now_ns() - t0 >= 200000000, "time limit");
		if (precv(2, PCTX, 1, 0x600D, ALL, buf, sizeof(buf), &st) < 0 ||
		    check_msg(&st, 2, PCTX, 1, 0x600D, 1, 16, buf) < 0)
			return -1;
		/* the forged message arrived as what it is: from node 2 */
		if (precv(PN_PORT_ANY, PN_PORT_ANY, 1, 0xBAD, ALL, buf, sizeof(buf), &st) < 0 ||
		    check_msg(&st, 2, PCTX, 1, 0xBAD, 2, 16, buf) < 0)
			return -1;
		/* the held-back messages come in their connection's order */
		for (uint32_t q = 2; q <= 5; q++) {
			uint8_t b2[2600];
			if (precv(2, PCTX, 2, 0, 0, b2, sizeof(b2), &st) < 0 ||
			    check_msg(&st, 2, PCTX, 2, 0x100u + q, q, q == 5 ? 2500 : 16, b2) < 0)
				return -1;
		}
		EXPECT_RC(pn_port_barrier(port), 0);
		if (precv(1, PCTX, PN_PORT_ANY, 0, 0, buf, sizeof(buf), &st) < 0 ||
		    check_msg(&st, 1, PCTX, 1, 0x1111, 7, 24, buf) < 0)
			return -1;
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		CHECK(ps.stale >= 1, "the unknown connection's packet was not counted as stale");
		CHECK(ps.held == 2, "%llu messages held back, expected 2 (sequence numbers 3 and 5)",
		      (unsigned long long)ps.held);
		EXPECT_RC(pn_port_probe(port, PN_PORT_ANY, PN_PORT_ANY, PN_PORT_ANY, 0, 0, &st), 0);
		say("ok forge a forged source field was stamped over: the message came from node 2; node 1's own "
		    "message came from node 1; %llu stale packets dropped; 4 messages sent out of order matched in "
		    "order (%llu held back)", (unsigned long long)ps.stale, (unsigned long long)ps.held);
	} else {
		EXPECT_RC(pn_port_barrier(port), 0);
		if (me == 1 && psend(0, PCTX, 1, 0x1111, 7, 24, buf) < 0)
			return -1;
		say("ok forge");
	}
	return 0;
}

/* ---- a peer killed in the middle of transfers ----------------------------------------------- */

static int case_kill(void)
{
	const size_t BIG = (size_t)64 << 20;
	pn_port_status_t st;
	uint8_t small[64];
	pn_port_req_t *r;
	int rc;

	CHECK(N >= 3, "needs 3 nodes");
	memset(small, 0, sizeof(small));
	if (me == 1 && getenv("PARANIC_RESPAWN")) {
		/* the new process in the killed one's place: its peers take it as a new port */
		for (unsigned d = 0; d <= 2; d += 2)
			if (psend(d, PCTX, 9, 0x4e11, 0, sizeof(small), small) < 0)
				return -1;
		for (unsigned i = 0; i < 2; i++) {
			rc = pn_port_recv(port, PN_PORT_ANY, PCTX, 9, 0x3e1c, ALL, small, sizeof(small), &st, 30000000000ll);
			CHECK(rc == 0, "welcome %u: %d (%s)", i, rc, pn_strerror(rc));
		}
		say("ok kill the new process on node 1 talked to both survivors");
		return 0;
	}
	if (me == 2)   /* posted before anyone sends */
		EXPECT_RC(pn_port_irecv(port, 1, PCTX, 2, 0, 0, malloc(BIG), BIG, &r), 0);
	/* node 0's connection to node 1 exists before the victim stops answering (else its
	 * send below would end as a refused connect, on a loaded machine) */
	if (me == 0 && psend(1, PCTX, 4, 0xc0, 0, sizeof(small), small) < 0)
		return -1;
	if (me == 1 && precv(0, PCTX, 4, 0xc0, ALL, small, sizeof(small), &st) < 0)
		return -1;
	EXPECT_RC(pn_port_barrier(port), 0);
	if (me == 1) {
		/* the victim: starts streaming 64 MiB to node 2, then stops calling the library
		 * and is killed; node 0's rendezvous request waits unanswered meanwhile */
		uint8_t *b = malloc(BIG);
		pn_status_t hs;
		uint64_t t0 = t_now_ns();
		CHECK(b, "malloc");
		memset(b, 0x5a, BIG);
		EXPECT_RC(pn_port_isend(port, 2, PCTX, 2, 0, b, BIG, &r), 0);
		do {
			pn_port_progress(port);
			EXPECT_RC(pn_status(pn_port_hal(port), &hs), 0);
			CHECK(t_now_ns() - t0 < 20000000000ull, "no rendezvous data went out");
		} while (hs.sent_bytes < (1u << 20));
		say("phase-kill after %llu bytes", (unsigned long long)hs.sent_bytes);
		for (;;)
			pause();
	}
	if (me == 0) {
		uint8_t *b = malloc(E + 1000);
		uint64_t t0 = t_now_ns();
		CHECK(b, "malloc");
		rc = pn_port_send(port, 1, PCTX, 3, 0, b, E + 1000);   /* never received */
		CHECK(rc == -ETIMEDOUT || rc == -ECONNRESET, "send to the killed port: %d (%s)", rc, pn_strerror(rc));
		say("ok kill node 0: the waiting rendezvous send ended with %s after %.0f ms", pn_strerror(rc),
		    (t_now_ns() - t0) / 1e6);
		free(b);
	} else if (me == 2) {
		uint64_t t0 = t_now_ns();
		rc = pn_port_wait(port, &r, &st, -1);
		CHECK(rc == -ETIMEDOUT || rc == -ECONNRESET, "receive from the killed port: %d (%s)", rc, pn_strerror(rc));
		say("ok kill node 2: the receive of the half-sent message ended with %s after %.0f ms", pn_strerror(rc),
		    (t_now_ns() - t0) / 1e6);
	}
	if (me == 0 || me == 2) {
		rc = pn_port_recv(port, 1, PCTX, 9, 0x4e11, ALL, small, sizeof(small), &st, 30000000000ll);
		CHECK(rc == (int)sizeof(small), "hello from the new process: %d (%s)", rc, pn_strerror(rc));
		if (psend(1, PCTX, 9, 0x3e1c, 0, 0, small) < 0)
			return -1;
		say("ok kill node %u talked to the new process", me);
	}
	return 0;
}

/* ---- bench: ping-pong latency and streaming bandwidth ------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* PT_SIZES (comma list), PT_EAGER (eager limits to compare, comma list: "default" is
 * the port's), PT_ITERS scale, PT_REG=1 registered buffers. Node 0 prints JSON. */
static int case_bench(void)
{
	const char *sizes_s = getenv("PT_SIZES") ? getenv("PT_SIZES") : "8,1024,4096,8192,16384,32768,65536";
	const char *eager_s = getenv("PT_EAGER") ? getenv("PT_EAGER") : "0,262144";
	double scale = getenv("PT_ITERS") ? atof(getenv("PT_ITERS")) : 1.0;
	int reg = (int)t_env_long("PT_REG", 0);
	size_t maxsz = 0;
	uint8_t *sb, *rb;
	char tmp[256];
	pn_hal_t *h = pn_port_hal(port);
	const char *be = pn_backend_name(h);
	int sim = !strcmp(be, "sim");

	snprintf(tmp, sizeof(tmp), "%s", sizes_s);
	for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
		size_t v = strtoul(t, NULL, 0);
		maxsz = v > maxsz ? v : maxsz;
	}
	if (reg) {
		EXPECT_RC(pn_dma_alloc(h, maxsz + 64, (void **)&sb), 0);
		EXPECT_RC(pn_dma_alloc(h, maxsz + 64, (void **)&rb), 0);
	} else {
		sb = malloc(maxsz + 64);
		rb = malloc(maxsz + 64);
		CHECK(sb && rb, "malloc");
		memset(sb, 1, maxsz + 64);
		memset(rb, 1, maxsz + 64);
	}
	char etmp[256];
	snprintf(etmp, sizeof(etmp), "%s", eager_s);
	char *esave = NULL;
	for (char *et = strtok_r(etmp, ",", &esave); et; et = strtok_r(NULL, ",", &esave)) {
		long em = strcmp(et, "default") ? strtol(et, NULL, 0) : PN_PORT_DEFAULT_EAGER_MAX;
		CHECK(pn_port_set_eager_max(port, em) >= 0, "eager max %ld", em);
		char stmp[256], *ssave = NULL;
		snprintf(stmp, sizeof(stmp), "%s", sizes_s);
		for (char *t = strtok_r(stmp, ",", &ssave); t; t = strtok_r(NULL, ",", &ssave)) {
			size_t n = strtoul(t, NULL, 0);
			unsigned iters = (unsigned)(scale * (n < 16384 ? 2000 : n < 262144 ? 400 : 60));
			unsigned warm = iters / 10 + 1;
			uint64_t *samp = calloc(iters + warm, sizeof(uint64_t)), tw0 = 0, t0 = 0, last;
			pn_port_status_t st;
			CHECK(samp && iters, "calloc");
			if (sim)
				iters = iters / 20 + 3, warm = 2;
			EXPECT_RC(pn_port_barrier(port), 0);
			/* ping-pong */
			last = pn_now_ns(h);
			for (unsigned i = 0; i < iters + warm; i++) {
				if (i == warm) {
					tw0 = t_now_ns();
					t0 = pn_now_ns(h);
				}
				if (me == 0) {
					if (pn_port_send(port, 1, PCTX, 0, i, sb, n) < 0 ||
					    pn_port_recv(port, 1, PCTX, 0, 0, 0, rb, n, &st, -1) < 0)
						CHECK(0, "pingpong");
				} else if (me == 1) {
					if (pn_port_recv(port, 0, PCTX, 0, 0, 0, rb, n, &st, -1) < 0 ||
					    pn_port_send(port, 0, PCTX, 0, i, sb, n) < 0)
						CHECK(0, "pingpong");
				}
				uint64_t now = pn_now_ns(h);
				samp[i] = now - last;
				last = now;
			}
			double pp = (double)(pn_now_ns(h) - t0) / iters / 2, ppw = (double)(t_now_ns() - tw0) / iters / 2;
			qsort(samp + warm, iters, sizeof(uint64_t), cmp_u64);
			double ppmin = samp[warm] / 2.0, ppmed = samp[warm + iters / 2] / 2.0;
			double pp10 = samp[warm + iters / 10] / 2.0, pp90 = samp[warm + iters * 9 / 10] / 2.0;
			EXPECT_RC(pn_port_barrier(port), 0);
			/* stream: node 0 sends back to back, node 1 answers the last */
			t0 = pn_now_ns(h);
			tw0 = t_now_ns();
			if (me == 0) {
				for (unsigned i = 0; i < iters; i++)
					CHECK(pn_port_send(port, 1, PCTX, 1, i, sb, n) == 0, "stream send");
				CHECK(pn_port_recv(port, 1, PCTX, 1, 0, 0, rb, 8, &st, -1) >= 0, "stream ack");
			} else if (me == 1) {
				for (unsigned i = 0; i < iters; i++)
					CHECK(pn_port_recv(port, 0, PCTX, 1, 0, 0, rb, n, &st, -1) >= 0, "stream recv");
				CHECK(pn_port_send(port, 0, PCTX, 1, 0, sb, 0) == 0, "stream ack");
			}
			double sn = (double)(pn_now_ns(h) - t0), sw = (double)(t_now_ns() - tw0);
			if (me == 0)
				say("{\"bench\": \"ports\", \"backend\": \"%s\", \"eager_max\": %ld, \"bytes\": %zu, "
				    "\"registered\": %d, \"iters\": %u, \"latency_ns\": %.0f, \"latency_min_ns\": %.0f, "
				    "\"latency_median_ns\": %.0f, \"latency_p10_ns\": %.0f, \"latency_p90_ns\": %.0f, "
				    "\"latency_wall_ns\": %.0f, \"MBps\": %.1f, \"MBps_wall\": %.1f}",
				    be, em, n, reg, iters, pp, ppmin, ppmed, pp10, pp90, ppw, n * (double)iters / sn * 1e3,
				    n * (double)iters / sw * 1e3);
			free(samp);
		}
	}
	say("ok bench");
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	const char *backend = argc > 2 ? argv[2] : NULL;
	int r = -1, found = 0;
	struct {
		const char *name;
		unsigned min_nodes;
		int (*fn)(void);
	} cases[] = {
		{"sizes", 2, case_sizes},       {"huge", 2, case_huge},   {"match", 3, case_match},
		{"order", 2, case_order},       {"channels", 2, case_channels}, {"all_to_all", 1, case_all_to_all},
		{"flood", 2, case_flood},       {"forge", 3, case_forge}, {"kill", 3, case_kill},
		{"bench", 2, case_bench},
	};

	if (open_port(PCTX, backend) < 0)
		return 1;
	if (!getenv("PARANIC_RESPAWN"))
		pn_port_barrier(port);   /* all open before anyone sends */
	t_case = name;
	if (!strcmp(name, "multi")) {
		r = case_multi(backend);
		return r == 0 && !t_failures ? 0 : 1;
	}
	if (!strcmp(name, "errors")) {
		r = case_errors(backend);
		found = 1;
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]) && !found; c++) {
		if (strcmp(name, cases[c].name))
			continue;
		found = 1;
		if (N < cases[c].min_nodes) {
			say("skip %s (needs %u nodes)", t_case, cases[c].min_nodes);
			pn_port_close(port);
			return 0;
		}
		r = cases[c].fn();
	}
	if (!found) {
		say("FAIL unknown case %s", name);
		return 2;
	}
	if (r == 0 && strcmp(name, "kill"))
		pn_port_barrier(port);   /* nobody closes while others still need it */
	pn_port_close(port);
	return r == 0 && !t_failures ? 0 : 1;
}
