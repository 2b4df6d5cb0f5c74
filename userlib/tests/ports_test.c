/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports_test: the ports layer's functions over any backend, one process per node
 * (pn_launch).
 *
 *   pn_launch -n N -- ports_test CASE [BACKEND]
 *
 * CASE: sizes, huge, match, order, ext, channels, multi, all_to_all, flood, bench. Every port
 * is context PCTX of its node (multi: a second process per node on context PCTX + 1).
 * Prints "ok CASE ..." or "FAIL CASE: ..." and exits 0 only on success. Bad input,
 * forged sources and killed peers are ports_fault_test's.
 */
#include "ports_test.h"

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

/* ---- ext: immediate data (pn_port_isendx), truncating receives (PN_PORT_TRUNC), pn_port_done --- */

#define XCH 4             /* the channel of this case */
#define XCANARY 0xA5      /* the bytes after a truncating receive's buffer must keep it */

struct xmsg {
	uint64_t tag;
	size_t len, cap;      /* cap: the receive's buffer (< len: truncated) */
	int data;             /* sent with PN_PORT_DATA (immediate data 0xDA7A0000 + seq) */
};

/* Node 1 posts message k of m (as seq base + k) to node 0; xwait completes them (a
 * rendezvous send completes only once node 0 has posted its receive). */
static int xpost(const struct xmsg *m, unsigned n, unsigned base, pn_port_req_t **rq, uint8_t **bufs)
{
	for (unsigned k = 0; k < n; k++) {
		CHECK(bufs[k] = malloc(m[k].len + 1), "malloc");
		pat_fill(bufs[k], m[k].len, seed_of(me, myctx, 0, base + k), 0);
		EXPECT_RC(pn_port_isendx(port, 0, PCTX, XCH, m[k].tag, bufs[k], m[k].len, 0xDA7A0000u + base + k,
					 m[k].data ? PN_PORT_DATA : 0, &rq[k]), 0);
	}
	return 0;
}

static int xwait(unsigned n, pn_port_req_t **rq, uint8_t **bufs)
{
	for (unsigned k = 0; k < n; k++) {
		if (wait_ok(&rq[k], "isendx") < 0)
			return -1;
		free(bufs[k]);
	}
	return 0;
}

/* Node 0 checks a completed truncating receive of message seq (m): its end, its status
 * (length, data), the bytes kept and the canary behind them. */
static int xcheck(const struct xmsg *m, unsigned seq, int rc, const pn_port_status_t *st, const uint8_t *b)
{
	size_t keep = m->len < m->cap ? m->len : m->cap, bad;
	CHECK(rc == (m->len > m->cap ? -EMSGSIZE : 1), "message %u (%zu bytes into %zu): ended %d", seq, m->len,
	      m->cap, rc);
	CHECK(st->len == m->len && st->tag == m->tag && st->src_node == 1 && st->channel == XCH,
	      "message %u: status len %zu tag %#llx from %d", seq, st->len, (unsigned long long)st->tag, st->src_node);
	CHECK(m->data ? (st->flags == PN_PORT_DATA && st->data == 0xDA7A0000u + seq) : st->flags == 0,
	      "message %u: flags %u data %#x", seq, st->flags, st->data);
	bad = pat_check(b, keep, seed_of(1, PCTX, 0, seq), 0);
	CHECK(bad == (size_t)-1, "message %u: the %zu bytes kept differ at %zu", seq, keep, bad);
	for (size_t i = keep; i < m->cap + 64; i++)
		CHECK(b[i] == XCANARY, "message %u: byte %zu past the %zu kept was written", seq, i, keep);
	return 0;
}

static int case_ext(void)
{
	/* A: sent before any receive (unexpected); B: the receives posted first. Each
	 * truncated message is followed by one of the same tag, which must come whole (the
	 * truncated one was consumed). */
	const struct xmsg a[] = {
		{0xE0, 100, 100, 1},           /* eager with data */
		{0xE1, 50, 64, 0},             /* no data: flags 0 */
		{0xE2, 2000, 100, 0},          /* multi-packet eager, truncated */
		{0xE2, 10, 100, 0},
		{0xE3, E + 5000, 1000, 1},     /* rendezvous, truncated, with data */
		{0xE3, 20, 1000, 0},
		{0xE4, 8, 8, 1},               /* the last: once it is here, all are */
	};
	const struct xmsg b[] = {
		{0xF0, 50, 10, 1},             /* single packet into a posted receive, truncated */
		{0xF1, 2000, 100, 0},          /* multi-packet eager, truncated */
		{0xF2, E + 5000, 1000, 1},     /* rendezvous, truncated */
		{0xF3, 64, 64, 1},             /* exact fit */
	};
	enum { NA = sizeof(a) / sizeof(a[0]), NB = sizeof(b) / sizeof(b[0]) };
	pn_port_status_t st;
	pn_port_req_t *r;
	uint8_t x[8] = {0};

	/* bad flags and arguments */
	EXPECT_RC(pn_port_isendx(port, 0, PCTX, XCH, 0, x, 8, 0, PN_PORT_TRUNC, &r), -EINVAL);
	EXPECT_RC(pn_port_irecvx(port, 1, PCTX, XCH, 0, 0, x, 8, PN_PORT_DATA, &r), -EINVAL);
	EXPECT_RC(pn_port_done(NULL), -EINVAL);

	if (me == 1) {
		pn_port_req_t *rq[NA];
		uint8_t *bufs[NA];
		if (xpost(a, NA, 0, rq, bufs) < 0)
			return -1;
		EXPECT_RC(pn_port_barrier(port), 0);
		if (xwait(NA, rq, bufs) < 0)
			return -1;
		EXPECT_RC(pn_port_barrier(port), 0);   /* node 0 has posted B's receives */
		if (xpost(b, NB, NA, rq, bufs) < 0 || xwait(NB, rq, bufs) < 0)
			return -1;
		say("ok ext sender");
	} else if (me == 0) {
		uint8_t *rb[NB];
		pn_port_req_t *rq[NB];
		EXPECT_RC(pn_port_barrier(port), 0);
		/* the barrier does not wait for the messages: the last one (so all are here, in
		 * order); a probe's status carries the data too */
		uint64_t t0 = t_now_ns();
		while (pn_port_probe(port, 1, PCTX, XCH, 0xE4, ALL, &st) != 1)
			CHECK(t_now_ns() - t0 < 10000000000ull, "the last message did not come");
		CHECK(st.flags == PN_PORT_DATA && st.data == 0xDA7A0000u + NA - 1, "probe: flags %u data %#x", st.flags,
		      st.data);
		for (unsigned k = 0; k < NA; k++) {
			uint8_t *buf = malloc(a[k].cap + 64);
			int rc;
			CHECK(buf, "malloc");
			memset(buf, XCANARY, a[k].cap + 64);
			EXPECT_RC(pn_port_irecvx(port, 1, PCTX, XCH, a[k].tag, ALL, buf, a[k].cap, PN_PORT_TRUNC, &r), 0);
			if (a[k].len > E)   /* a rendezvous: its data cannot be here yet */
				EXPECT_RC(pn_port_done(r), 0);
			while (!pn_port_done(r))
				pn_port_progress(port);
			rc = pn_port_test(port, &r, &st);
			if (xcheck(&a[k], k, rc, &st, buf) < 0)
				return -1;
			free(buf);
		}
		for (unsigned k = 0; k < NB; k++) {
			rb[k] = malloc(b[k].cap + 64);
			CHECK(rb[k], "malloc");
			memset(rb[k], XCANARY, b[k].cap + 64);
			EXPECT_RC(pn_port_irecvx(port, 1, PCTX, XCH, b[k].tag, ALL, rb[k], b[k].cap, PN_PORT_TRUNC, &rq[k]), 0);
			EXPECT_RC(pn_port_done(rq[k]), 0);
		}
		EXPECT_RC(pn_port_barrier(port), 0);
		for (unsigned k = 0; k < NB; k++) {
			int rc = pn_port_wait(port, &rq[k], &st, -1);
			if (xcheck(&b[k], NA + k, rc, &st, rb[k]) < 0)
				return -1;
			free(rb[k]);
		}
		EXPECT_RC(pn_port_probe(port, PN_PORT_ANY, PN_PORT_ANY, XCH, 0, 0, &st), 0);   /* nothing left */
		say("ok ext immediate data (probe too), truncating receives (eager, multi-packet, rendezvous; "
		    "unexpected and posted first), pn_port_done");
	} else {
		EXPECT_RC(pn_port_barrier(port), 0);
		EXPECT_RC(pn_port_barrier(port), 0);
		say("ok ext (idle)");
	}
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
				    "\"latency_wall_ns\": %.0f, \"MBps\": %.3f, \"MBps_wall\": %.3f}",
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
	static const struct pt_case cases[] = {
		{.name = "sizes", .min_nodes = 2, .fn = case_sizes},
		{.name = "huge", .min_nodes = 2, .fn = case_huge},
		{.name = "match", .min_nodes = 3, .fn = case_match},
		{.name = "order", .min_nodes = 2, .fn = case_order},
		{.name = "ext", .min_nodes = 2, .fn = case_ext},
		{.name = "channels", .min_nodes = 2, .fn = case_channels},
		{.name = "all_to_all", .min_nodes = 1, .fn = case_all_to_all},
		{.name = "flood", .min_nodes = 2, .fn = case_flood},
		{.name = "bench", .min_nodes = 2, .fn = case_bench},
		{.name = "multi", .fn_backend = case_multi, .alone = 1},
	};

	return pt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
