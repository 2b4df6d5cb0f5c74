/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * am_test: active messages and RMA (pn_am.h) over any backend, one process per node.
 *
 *   pn_launch -n N -- am_test CASE [BACKEND] [ARGS...]
 *
 * CASE: pingpong, window, all_to_all, errors, rma SIZE:OFFSET..., gather, dereg,
 * channel, kill (wants `pn_launch -f -k 1:100:phase-kill -r MS` and a short
 * PARANIC_PORT_TIMEOUT_MS), bench. Every endpoint is on context PCTX of its node.
 * Prints "ok CASE ..." or "FAIL CASE: ..." and exits 0 only on success.
 * Environment: AT_WINDOW (the AM window), AT_COUNT (messages per peer).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paranic/pn_am.h"
#include "tutil.h"

#define PCTX 1
enum { H_ECHO = 1, H_ECHO_REP, H_COUNT, H_COUNT_REP, H_KEY, H_HELLO, H_HELLO_REP, H_BAD_REPLY, H_BENCH,
       H_BENCH_REP, H_UNKNOWN = 200 };

static pn_port_t *port;
static pn_am_t *am;
static unsigned me, N;
static const char *backend;

/* what the handlers saw */
static struct {
	unsigned long echo_ok, echo_bad, reply_ok, reply_bad;
	unsigned long count_req[64], count_bad, count_rep;
	uint64_t next[64];       /* per source: the next expected sequence number */
	uint64_t keys[64][4];
	int nkeys[64];
	int errs, last_err, last_handler;
	uint64_t last_arg0;
	int tok_rc[4];
	unsigned long hello, hello_rep, bench;
	int slow;               /* window: poll slowly */
} g;

static uint32_t seed_of(unsigned src, unsigned dst, uint64_t i)
{
	return src * 7919u + dst * 104729u + (uint32_t)i * 31u + 1;
}

static void on_error(pn_am_t *a, const pn_am_error_t *e, void *arg)
{
	(void)a;
	(void)arg;
	g.errs++;
	g.last_err = e->error;
	g.last_handler = (int)e->handler;
	g.last_arg0 = e->arg0;
}

/* args: i, len; payload pattern seed_of(src, me, i); replies with the same back */
static void h_echo(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)arg;
	if (na == 2 && a[1] == len && pat_check(p, len, seed_of((unsigned)t->src_node, me, a[0]), 0) == (size_t)-1)
		g.echo_ok++;
	else
		g.echo_bad++;
	/* the reply carries the requester's pattern back */
	if (pn_am_reply(t, H_ECHO_REP, a, na, p, len) != 0)
		g.echo_bad++;
	g.tok_rc[0] = pn_am_reply(t, H_ECHO_REP, a, na, p, len);   /* a second reply: -EALREADY */
	g.tok_rc[1] = pn_am_poll(t->am);                            /* polling in a handler: -EDEADLK */
}

static void h_echo_rep(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)arg;
	if (na == 2 && a[1] == len && pat_check(p, len, seed_of(me, (unsigned)t->src_node, a[0]), 0) == (size_t)-1)
		g.reply_ok++;
	else
		g.reply_bad++;
	g.tok_rc[2] = pn_am_reply(t, H_ECHO, a, na, p, len);   /* from a reply handler: -EINVAL */
}

/* args: seq (per source), want_reply; payload pattern */
static void h_count(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	unsigned s = (unsigned)t->src_node;
	(void)arg;
	if (na != 2 || a[0] != g.next[s] || pat_check(p, len, seed_of(s, me, a[0]), 0) != (size_t)-1)
		g.count_bad++;
	g.next[s] = a[0] + 1;
	g.count_req[s]++;
	if (g.slow)   /* a slow receiver: every handler takes a while */
		t_sleep_us(200);
	if (a[1])
		pn_am_reply(t, H_COUNT_REP, a, 1, NULL, 0);
}

static void h_count_rep(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)t, (void)a, (void)na, (void)p, (void)len, (void)arg;
	g.count_rep++;
}

static void h_key(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	unsigned s = (unsigned)t->src_node;
	(void)p, (void)len, (void)arg;
	for (unsigned i = 0; i < na && i < 4; i++)
		g.keys[s][i] = a[i];
	g.nkeys[s] = (int)na;
}

static void h_hello(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)p, (void)len, (void)arg;
	g.hello++;
	pn_am_reply(t, H_HELLO_REP, a, na, NULL, 0);
}

static void h_hello_rep(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)t, (void)a, (void)na, (void)p, (void)len, (void)arg;
	g.hello_rep++;
}

/* replies with a handler the requester does not have */
static void h_bad_reply(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)a, (void)na, (void)p, (void)len, (void)arg;
	uint64_t x = 77;
	pn_am_reply(t, H_UNKNOWN + 1, &x, 1, NULL, 0);
}

static void h_bench(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)arg;
	pn_am_reply(t, H_BENCH_REP, a, na, p, len);
}

static void h_bench_rep(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)t, (void)a, (void)na, (void)p, (void)len, (void)arg;
	g.bench++;
}

static int open_am(long window)
{
	pn_port_opts_t po;
	pn_am_opts_t ao;
	int r;
	pn_port_opts_init(&po);
	po.hal.ctx = PCTX;
	po.hal.backend = backend;
	r = pn_port_open(&port, &po);
	CHECK(r == 0, "pn_port_open: %d (%s)", r, pn_strerror(r));
	me = (unsigned)pn_port_node(port);
	N = (unsigned)pn_num_nodes(pn_port_hal(port));
	CHECK(N <= 64, "at most 64 nodes");
	if (!getenv("PARANIC_RESPAWN"))
		EXPECT_RC(pn_port_barrier(port), 0);   /* every port open before anyone sends */
	pn_am_opts_init(&ao);
	ao.window = window;
	ao.on_error = on_error;
	r = pn_am_open(&am, port, &ao);
	CHECK(r == 0, "pn_am_open: %d (%s)", r, pn_strerror(r));
	pn_am_register(am, H_ECHO, h_echo, NULL);
	pn_am_register(am, H_ECHO_REP, h_echo_rep, NULL);
	pn_am_register(am, H_COUNT, h_count, NULL);
	pn_am_register(am, H_COUNT_REP, h_count_rep, NULL);
	pn_am_register(am, H_KEY, h_key, NULL);
	pn_am_register(am, H_HELLO, h_hello, NULL);
	pn_am_register(am, H_HELLO_REP, h_hello_rep, NULL);
	pn_am_register(am, H_BAD_REPLY, h_bad_reply, NULL);
	pn_am_register(am, H_BENCH, h_bench, NULL);
	pn_am_register(am, H_BENCH_REP, h_bench_rep, NULL);
	return 0;
}

static int request(unsigned dst, unsigned h, uint64_t i, size_t len, uint8_t *buf, uint64_t flag)
{
	uint64_t a[2] = {i, h == H_ECHO ? len : flag};
	pat_fill(buf, len, seed_of(me, dst, i), 0);
	int r = pn_am_request(am, dst, PCTX, h, a, 2, buf, len);
	CHECK(r == 0, "pn_am_request(%u, handler %u, %zu bytes) returned %d (%s)", dst, h, len, r, pn_strerror(r));
	return 0;
}

/* Register a region on every node with `flags` and tell everyone its key (g.keys[node][0]). */
static int share_region(void *buf, size_t len, unsigned flags, uint64_t *key)
{
	EXPECT_RC(pn_rma_register(am, buf, len, flags, key), 0);
	for (unsigned d = 0; d < N; d++) {
		uint64_t a[2] = {*key, len};
		EXPECT_RC(pn_am_request(am, d, PCTX, H_KEY, a, 2, NULL, 0), 0);
	}
	EXPECT_RC(pn_am_flush(am, -1), 0);
	EXPECT_RC(pn_am_barrier(am), 0);
	return 0;
}

/* ---- pingpong: requests and replies with payload 0 .. max, both ways and to itself ------ */

static int case_pingpong(void)
{
	size_t mx = pn_am_max_payload(am), E = (size_t)pn_port_eager_max(port);
	size_t sizes[] = {0, 1, 7, 8, 100, 255, 1000, 1024, 4000, E - 100, E, E + 1, 40000, mx - 1, mx};
	enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
	uint8_t *buf = malloc(mx);
	unsigned peer = me ^ 1, rounds = 3, want = 0;
	CHECK(buf, "malloc");
	if (peer < N)
		for (unsigned k = 0; k < rounds; k++)
			for (unsigned i = 0; i < NS; i++) {
				if (request(peer, H_ECHO, k * NS + i, sizes[i], buf, 0) < 0 ||
				    request(me, H_ECHO, 1000 + k * NS + i, sizes[i], buf, 0) < 0)
					return -1;
				want += 2;
			}
	EXPECT_RC(pn_am_flush(am, -1), 0);
	EXPECT_RC(pn_am_barrier(am), 0);
	CHECK(g.reply_ok == want && !g.reply_bad, "replies: %lu ok %lu bad, want %u", g.reply_ok, g.reply_bad, want);
	CHECK(g.echo_ok == want && !g.echo_bad, "requests: %lu ok %lu bad, want %u", g.echo_ok, g.echo_bad, want);
	CHECK(want == 0 || (g.tok_rc[0] == -EALREADY && g.tok_rc[1] == -EDEADLK && g.tok_rc[2] == -EINVAL),
	      "second reply %d, poll in handler %d, reply from reply handler %d", g.tok_rc[0], g.tok_rc[1],
	      g.tok_rc[2]);
	CHECK(g.errs == 0, "%d errors (last %d)", g.errs, g.last_err);
	pn_am_stats_t st;
	pn_am_stats(am, &st);
	CHECK(st.outstanding == 0 && st.handled_requests == want && st.handled_replies == want, "stats");
	say("ok pingpong %u requests and replies, %u sizes 0 .. %zu, to node %u and to itself", want, NS, mx, peer);
	free(buf);
	return 0;
}

/* ---- window: a slow receiver; the sender blocks, nothing is lost ------------------------- */

static int case_window(void)
{
	unsigned long n = (unsigned long)t_env_long("AT_COUNT", 2000);
	unsigned W = pn_am_window(am);
	uint8_t buf[512];
	pn_am_stats_t st;
	pn_port_stats_t ps;
	if (me == 0) {
		uint64_t t0 = t_now_ns();
		for (unsigned long i = 0; i < n; i++)
			if (request(1, H_COUNT, i, i % 500, buf, i % 3 == 0) < 0)
				return -1;
		EXPECT_RC(pn_am_flush(am, -1), 0);
		pn_am_stats(am, &st);
		CHECK(st.requests == n && st.window_waits > 0 && st.peak_outstanding == W,
		      "requests %llu, waits %llu, peak outstanding %llu (window %u)", (unsigned long long)st.requests,
		      (unsigned long long)st.window_waits, (unsigned long long)st.peak_outstanding, W);
		CHECK(g.count_rep == (n + 2) / 3, "%lu replies, want %lu", g.count_rep, (n + 2) / 3);
		say("ok window sender: %lu requests, %llu waited for the window (%.0f ms of %.0f), peak outstanding %llu "
		    "= window %u, %lu replies",
		    n, (unsigned long long)st.window_waits, st.window_wait_ns / 1e6, (t_now_ns() - t0) / 1e6,
		    (unsigned long long)st.peak_outstanding, W, g.count_rep);
	} else if (me == 1) {
		uint64_t peak = 0;
		g.slow = 1;
		t_sleep_us(100000);   /* start late: the sender fills the window at once */
		while (g.count_req[0] < n) {
			EXPECT_RC(pn_port_stats(port, &ps), 0);
			if (ps.unexpected_msgs > peak)
				peak = ps.unexpected_msgs;
			pn_am_poll(am);
			t_sleep_us(500);
		}
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		CHECK(!g.count_bad, "%lu requests out of order or corrupt", g.count_bad);
		CHECK(peak <= W + 2 && ps.overrun == 0 && ps.nomem == 0, "peak queue %llu (window %u), overrun %llu",
		      (unsigned long long)peak, W, (unsigned long long)ps.overrun);
		say("ok window receiver: %lu requests in order and intact, at most %llu queued (window %u), no overrun",
		    g.count_req[0], (unsigned long long)peak, W);
	}
	EXPECT_RC(pn_am_barrier(am), 0);
	return 0;
}

/* ---- all_to_all: every node many requests to every node (itself too) ------------------- */

static int case_all_to_all(void)
{
	unsigned long n = (unsigned long)t_env_long("AT_COUNT", 300);
	uint8_t *buf = malloc(3000);
	pn_am_stats_t st;
	CHECK(buf, "malloc");
	for (unsigned long i = 0; i < n; i++)
		for (unsigned k = 0; k < N; k++) {
			unsigned d = (me + k) % N;
			if (request(d, H_COUNT, i, (i * 37 + d) % 3000, buf, i & 1) < 0)
				return -1;
		}
	EXPECT_RC(pn_am_flush(am, -1), 0);
	EXPECT_RC(pn_am_barrier(am), 0);   /* everyone's requests answered, so handled */
	for (unsigned s = 0; s < N; s++)
		CHECK(g.count_req[s] == n, "%lu requests from %u, want %lu", g.count_req[s], s, n);
	CHECK(!g.count_bad && g.count_rep == N * (n / 2) && g.errs == 0, "bad %lu, replies %lu, errors %d",
	      g.count_bad, g.count_rep, g.errs);
	pn_am_stats(am, &st);
	say("ok all_to_all %u nodes x %lu requests each way per pair, per-source order kept; window %u, peak %llu, "
	    "%llu waits",
	    N, n, pn_am_window(am), (unsigned long long)st.peak_outstanding, (unsigned long long)st.window_waits);
	free(buf);
	return 0;
}

/* ---- errors: unknown handlers, sizes, arguments; RMA keys, bounds, permissions ---------- */

static int rma_expect(unsigned d, int put, uint64_t key, uint64_t off, void *b, size_t len, int want)
{
	pn_rma_req_t *q = NULL;
	int r = put ? pn_rma_put(am, d, PCTX, key, off, b, len, &q) : pn_rma_get(am, d, PCTX, key, off, b, len, &q);
	CHECK(r == 0 && q, "%s start: %d", put ? "put" : "get", r);
	r = pn_rma_wait(am, &q, -1);
	CHECK(r == want && !q, "%s(key %#llx, off %llu, len %zu): %d (%s), want %d", put ? "put" : "get",
	      (unsigned long long)key, (unsigned long long)off, len, r, pn_strerror(r), want);
	return 0;
}

static int case_errors(void)
{
	size_t mx = pn_am_max_payload(am), R = 1 << 16;
	uint8_t *big = calloc(1, mx + 1), *ro = malloc(R), *wo = malloc(R), *rw = malloc(R), *tmp = malloc(4 * R);
	uint64_t a[PN_AM_MAX_ARGS + 1] = {0}, kro, kwo, krw;
	CHECK(big && ro && wo && rw && tmp, "malloc");
	pat_fill(ro, R, 11 + me, 0);
	pat_fill(wo, R, 22 + me, 0);
	pat_fill(rw, R, 33 + me, 0);
	/* argument errors, at the call */
	EXPECT_RC(pn_am_request(am, 0, PCTX, H_ECHO, a, 2, big, mx + 1), -EMSGSIZE);
	EXPECT_RC(pn_am_request(am, 0, PCTX, H_ECHO, a, PN_AM_MAX_ARGS + 1, NULL, 0), -EINVAL);
	EXPECT_RC(pn_am_request(am, 0, PCTX, PN_AM_MAX_HANDLERS, a, 0, NULL, 0), -EINVAL);
	EXPECT_RC(pn_am_request(am, N, PCTX, H_ECHO, a, 0, NULL, 0), -EHOSTUNREACH);
	EXPECT_RC(pn_am_request(am, 0, 4096, H_ECHO, a, 0, NULL, 0), -EINVAL);
	EXPECT_RC(pn_am_request(am, 0, PCTX, H_ECHO, a, 0, NULL, 5), -EINVAL);
	EXPECT_RC(pn_am_register(am, PN_AM_MAX_HANDLERS, h_echo, NULL), -EINVAL);
	EXPECT_RC(pn_am_reply(NULL, H_ECHO, NULL, 0, NULL, 0), -EINVAL);
	EXPECT_RC(pn_rma_register(am, rw, 0, PN_RMA_READ, &krw), -EINVAL);
	EXPECT_RC(pn_rma_register(am, rw, R, 4, &krw), -EINVAL);
	EXPECT_RC(pn_rma_register(am, (void *)(uintptr_t)0x10000, 4096, PN_RMA_READ, &krw), -EFAULT);
	EXPECT_RC(pn_rma_deregister(am, 12345), -ENOENT);
	{
		pn_am_opts_t o;
		pn_am_t *x;
		pn_am_opts_init(&o);
		o.window = 0;
		EXPECT_RC(pn_am_open(&x, port, &o), -EINVAL);
		pn_am_opts_init(&o);
		o.channel = o.rma_channel = 7;
		EXPECT_RC(pn_am_open(&x, port, &o), -EINVAL);
	}
	EXPECT_RC(pn_am_barrier(am), 0);

	/* unknown handler at the receiver: the requester's error callback says -ENOENT */
	unsigned peer = (me + 1) % N;
	a[0] = 4242;
	EXPECT_RC(pn_am_request(am, peer, PCTX, H_UNKNOWN, a, 1, big, 100), 0);
	EXPECT_RC(pn_am_flush(am, -1), 0);
	CHECK(g.errs == 1 && g.last_err == -ENOENT && g.last_handler == H_UNKNOWN && g.last_arg0 == 4242,
	      "unknown handler: %d errors, last %d handler %d arg0 %llu", g.errs, g.last_err, g.last_handler,
	      (unsigned long long)g.last_arg0);
	/* a reply to a handler the requester lacks: also -ENOENT, at the requester */
	EXPECT_RC(pn_am_request(am, peer, PCTX, H_BAD_REPLY, a, 1, NULL, 0), 0);
	EXPECT_RC(pn_am_flush(am, -1), 0);
	CHECK(g.errs == 2 && g.last_err == -ENOENT && g.last_handler == H_UNKNOWN + 1, "bad reply: %d, %d", g.errs,
	      g.last_err);
	/* the receiver stays healthy: zero-length and full requests still work */
	if (request(peer, H_ECHO, 1, 0, big, 0) < 0 || request(peer, H_ECHO, 2, mx, big, 0) < 0)
		return -1;
	EXPECT_RC(pn_am_flush(am, -1), 0);
	EXPECT_RC(pn_am_barrier(am), 0);
	CHECK(g.reply_ok == 2 && g.echo_ok == 2 && g.errs == 2, "after the errors: %lu replies, %lu requests",
	      g.reply_ok, g.echo_ok);
	pn_am_stats_t st;
	pn_am_stats(am, &st);
	CHECK(st.unknown_handler == 2, "unknown_handler %llu", (unsigned long long)st.unknown_handler);

	/* RMA: three regions: read-only, write-only, read-write */
	EXPECT_RC(pn_rma_register(am, ro, R, PN_RMA_READ, &kro), 0);
	EXPECT_RC(pn_rma_register(am, wo, R, PN_RMA_WRITE, &kwo), 0);
	EXPECT_RC(pn_rma_register(am, rw, R, PN_RMA_READ | PN_RMA_WRITE, &krw), 0);
	/* every node sends its keys to its predecessor, which attacks it */
	a[0] = kro, a[1] = kwo, a[2] = krw;
	EXPECT_RC(pn_am_request(am, (me + N - 1) % N, PCTX, H_KEY, a, 3, NULL, 0), 0);
	EXPECT_RC(pn_am_flush(am, -1), 0);
	EXPECT_RC(pn_am_barrier(am), 0);
	unsigned d = peer;
	CHECK(g.nkeys[d] == 3, "keys");
	uint64_t KRO = g.keys[d][0], KWO = g.keys[d][1], KRW = g.keys[d][2];
	size_t inl = 1000, lg = R;   /* inline and PUTRTS puts */
	memset(tmp, 0xee, 4 * R);
	if (rma_expect(d, 1, KRO, 0, tmp, inl, -EACCES) < 0 || rma_expect(d, 1, KRO, 0, tmp, lg, -EACCES) < 0 ||
	    rma_expect(d, 0, KWO, 0, tmp, 100, -EACCES) < 0 || rma_expect(d, 0, KWO, 0, tmp, lg, -EACCES) < 0 ||
	    rma_expect(d, 1, KRW ^ 0x100000, 0, tmp, inl, -EFAULT) < 0 ||   /* bad key */
	    rma_expect(d, 0, 0, 0, tmp, inl, -EFAULT) < 0 ||
	    rma_expect(d, 1, KRW, R - 10, tmp, 11, -EFAULT) < 0 ||            /* one byte beyond */
	    rma_expect(d, 1, KRW, 1, tmp, lg, -EFAULT) < 0 ||
	    rma_expect(d, 0, KRW, R + 1, tmp, 0, -EFAULT) < 0 ||
	    rma_expect(d, 1, KRW, ~0ull - 5, tmp, 100, -EFAULT) < 0 ||      /* offset + len wraps */
	    rma_expect(d, 0, KRW, 2, tmp, ~(size_t)0 >> 34, -EFAULT) < 0 ||
	    rma_expect(d, 0, KRW, R, tmp, 0, 1) < 0 ||                         /* empty at the end: fine */
	    rma_expect(d, 0, KRO, R - 8, tmp, 8, 1) < 0 || rma_expect(d, 1, KWO, 0, tmp, 0, 1) < 0)
		return -1;
	CHECK(pat_check(tmp, 8, 11 + d, R - 8) == (size_t)-1, "get of the last 8 bytes");
	EXPECT_RC(pn_am_flush(am, -1), 0);
	EXPECT_RC(pn_am_barrier(am), 0);
	/* my memory untouched by what my predecessor tried */
	CHECK(pat_check(ro, R, 11 + me, 0) == (size_t)-1 && pat_check(wo, R, 22 + me, 0) == (size_t)-1 &&
	      pat_check(rw, R, 33 + me, 0) == (size_t)-1, "a refused operation changed the target's memory");
	pn_am_stats(am, &st);
	CHECK(st.rma_refused == 11 && st.rma_served == 3 && st.rma_inflight == 0, "target: refused %llu served %llu",
	      (unsigned long long)st.rma_refused, (unsigned long long)st.rma_served);
	EXPECT_RC(pn_am_barrier(am), 0);   /* everyone checked before the next attacks */
	/* implicit operations: the error reaches flush and the callback */
	int e0 = g.errs;
	EXPECT_RC(pn_rma_put(am, d, PCTX, KRO, 0, tmp, 10, NULL), 0);
	EXPECT_RC(pn_rma_flush(am), -EACCES);
	CHECK(g.errs == e0 + 1 && g.last_err == -EACCES, "implicit put error not reported");
	EXPECT_RC(pn_rma_put(am, d, PCTX, KRW, 0, rw, 10, NULL), 0);
	EXPECT_RC(pn_rma_fence(am), 0);
	EXPECT_RC(pn_am_barrier(am), 0);
	EXPECT_RC(pn_rma_deregister(am, kro), 0);
	EXPECT_RC(pn_rma_deregister(am, kro), -ENOENT);
	EXPECT_RC(pn_am_barrier(am), 0);
	if (rma_expect(d, 0, KRO, 0, tmp, 8, -EFAULT) < 0)   /* a withdrawn key */
		return -1;
	EXPECT_RC(pn_am_barrier(am), 0);
	say("ok errors arguments, unknown handler and unknown reply handler (-ENOENT), receiver healthy; RMA: "
	    "permissions (-EACCES), keys and bounds (-EFAULT), target memory untouched, implicit errors, withdrawn key");
	return 0;
}

/* ---- rma SIZE:OFFSET...: put then get back, data intact -------------------------------- */

static int case_rma(int argc, char **argv)
{
	size_t R = 0;
	uint64_t key;
	unsigned d = (me + 1) % N;
	for (int i = 0; i < argc; i++) {
		size_t s = strtoul(argv[i], NULL, 0), o = strtoul(strchr(argv[i], ':') ? strchr(argv[i], ':') + 1 : "0", NULL, 0);
		R = s + o > R ? s + o : R;
	}
	R = R ? R : 1;
	uint8_t *reg = calloc(1, R), *src = malloc(R), *back = malloc(R);
	CHECK(reg && src && back, "malloc");
	if (share_region(reg, R, PN_RMA_READ | PN_RMA_WRITE, &key) < 0)
		return -1;
	uint64_t dkey = g.keys[d][0];
	size_t total = 0;
	for (int i = 0; i < argc; i++) {
		size_t s = strtoul(argv[i], NULL, 0), o = strtoul(strchr(argv[i], ':') ? strchr(argv[i], ':') + 1 : "0", NULL, 0);
		pn_rma_req_t *q;
		pat_fill(src, s, seed_of(me, d, (uint64_t)i), 0);
		memset(back, 0, s);
		EXPECT_RC(pn_rma_put(am, d, PCTX, dkey, o, src, s, &q), 0);
		EXPECT_RC(pn_rma_wait(am, &q, -1), 1);
		EXPECT_RC(pn_rma_get(am, d, PCTX, dkey, o, back, s, &q), 0);
		EXPECT_RC(pn_rma_wait(am, &q, -1), 1);
		size_t bad = pat_check(back, s, seed_of(me, d, (uint64_t)i), 0);
		CHECK(bad == (size_t)-1, "put/get %zu bytes at %zu: byte %zu differs", s, o, bad);
		total += s;
	}
	EXPECT_RC(pn_am_barrier(am), 0);
	/* the last put of each offset is in my region (checked from the target side too) */
	unsigned p = (me + N - 1) % N;
	for (int i = argc - 1; i >= 0 && argc; i--) {
		size_t s = strtoul(argv[i], NULL, 0), o = strtoul(strchr(argv[i], ':') ? strchr(argv[i], ':') + 1 : "0", NULL, 0);
		int later = 0;   /* skip if a later put overlapped it */
		for (int j = i + 1; j < argc; j++) {
			size_t s2 = strtoul(argv[j], NULL, 0), o2 = strtoul(strchr(argv[j], ':') + 1, NULL, 0);
			later |= s2 && s && o2 < o + s && o < o2 + s2;
		}
		if (!later)
			CHECK(pat_check(reg + o, s, seed_of(p, me, (uint64_t)i), 0) == (size_t)-1,
			      "target: put %d (%zu at %zu) not in the region", i, s, o);
	}
	pn_am_stats_t st;
	pn_port_stats_t ps;
	pn_am_stats(am, &st);
	pn_port_stats(port, &ps);
	CHECK(st.rma_bytes_in == total && st.rma_bytes_out == total && st.rma_inflight == 0,
	      "target bytes in %llu out %llu, want %zu", (unsigned long long)st.rma_bytes_in,
	      (unsigned long long)st.rma_bytes_out, total);
	EXPECT_RC(pn_am_barrier(am), 0);
	EXPECT_RC(pn_rma_deregister(am, key), 0);
	say("ok rma %d puts and gets intact (%zu bytes), region %zu bytes; unexpected peak %llu", argc, total, R,
	    (unsigned long long)ps.unexpected_peak);
	free(reg), free(src), free(back);
	return 0;
}

/* ---- gather: node 0 gets from 3 nodes into one buffer at once ------------------------- */

static int case_gather(void)
{
	size_t R = (size_t)t_env_long("AT_BYTES", 1 << 20);
	uint8_t *reg = malloc(R);
	uint64_t key;
	CHECK(N >= 4 && reg, "needs 4 nodes");
	pat_fill(reg, R, 500 + me, 0);
	if (share_region(reg, R, PN_RMA_READ, &key) < 0)
		return -1;
	if (me == 0) {
		uint8_t *dst = malloc(3 * R + 3 * 64);
		pn_rma_req_t *q[6];
		CHECK(dst, "malloc");
		for (unsigned s = 1; s <= 3; s++) {   /* a large and a small part from each */
			EXPECT_RC(pn_rma_get(am, s, PCTX, g.keys[s][0], 0, dst + (s - 1) * R, R, &q[s - 1]), 0);
			EXPECT_RC(pn_rma_get(am, s, PCTX, g.keys[s][0], 1000, dst + 3 * R + (s - 1) * 64, 64, &q[2 + s]), 0);
		}
		for (unsigned i = 0; i < 6; i++)
			EXPECT_RC(pn_rma_wait(am, &q[i], -1), 1);
		for (unsigned s = 1; s <= 3; s++) {
			CHECK(pat_check(dst + (s - 1) * R, R, 500 + s, 0) == (size_t)-1, "part from %u", s);
			CHECK(pat_check(dst + 3 * R + (s - 1) * 64, 64, 500 + s, 1000) == (size_t)-1, "small part from %u", s);
		}
		say("ok gather node 0 got %zu bytes from each of nodes 1, 2, 3 into one buffer at once", R + 64);
		free(dst);
	} else {
		say("ok gather served node 0");
	}
	EXPECT_RC(pn_am_barrier(am), 0);
	EXPECT_RC(pn_rma_deregister(am, key), 0);
	free(reg);
	return 0;
}

/* ---- dereg: withdrawing a region while a put moves into it ----------------------------- */

static int case_dereg(void)
{
	size_t R = (size_t)t_env_long("AT_BYTES", 8 << 20);
	uint8_t *reg = calloc(1, R), *src = malloc(R);
	uint64_t key;
	pn_am_stats_t st;
	CHECK(reg && src, "malloc");
	if (share_region(reg, R, PN_RMA_READ | PN_RMA_WRITE, &key) < 0)
		return -1;
	if (me == 0) {
		pn_rma_req_t *q;
		pat_fill(src, R, 77, 0);
		EXPECT_RC(pn_rma_put(am, 1, PCTX, g.keys[1][0], 0, src, R, &q), 0);
		EXPECT_RC(pn_rma_wait(am, &q, -1), 1);   /* it completes: the target waited for it */
		EXPECT_RC(pn_am_barrier(am), 0);           /* the target has withdrawn the region */
		EXPECT_RC(pn_rma_put(am, 1, PCTX, g.keys[1][0], 0, src, 100, &q), 0);
		EXPECT_RC(pn_rma_wait(am, &q, -1), -EFAULT);
		EXPECT_RC(pn_rma_get(am, 1, PCTX, g.keys[1][0], 0, src, R, &q), 0);
		EXPECT_RC(pn_rma_wait(am, &q, -1), -EFAULT);
		say("ok dereg the put in flight completed, later operations on the withdrawn key failed with -EFAULT");
	} else if (me == 1) {
		uint64_t t0 = t_now_ns();
		do {   /* until the put is accepted: its data moves into the region */
			pn_am_poll(am);
			pn_am_stats(am, &st);
			CHECK(t_now_ns() - t0 < 30000000000ull, "the put never arrived");
		} while (!st.rma_inflight);
		EXPECT_RC(pn_rma_deregister(am, key), 0);   /* waits for it */
		pn_am_stats(am, &st);
		CHECK(st.rma_inflight == 0 && st.rma_bytes_in == R, "in flight %llu, bytes in %llu",
		      (unsigned long long)st.rma_inflight, (unsigned long long)st.rma_bytes_in);
		CHECK(pat_check(reg, R, 77, 0) == (size_t)-1, "the region lacks the put's data");
		memset(reg, 0x33, R);   /* the memory is ours again */
		EXPECT_RC(pn_am_barrier(am), 0);
		EXPECT_RC(pn_am_flush(am, -1), 0);
		say("ok dereg withdrew the region while %zu bytes moved in: waited for them, all there", R);
	} else {
		EXPECT_RC(pn_am_barrier(am), 0);
	}
	EXPECT_RC(pn_am_barrier(am), 0);
	if (me != 1)
		EXPECT_RC(pn_rma_deregister(am, key), 0);
	free(reg), free(src);
	return 0;
}

/* ---- channel: BCL's normal channel = a ports rendezvous into a posted receive ---------- */

static int case_channel(void)
{
	size_t R = (size_t)t_env_long("AT_BYTES", 1 << 20);
	pn_port_stats_t ps;
	EXPECT_RC(pn_port_stats(port, &ps), 0);
	uint64_t rndv0 = ps.rndv_msgs;
	if (me == 1) {
		uint8_t *buf = malloc(R);
		pn_port_req_t *q;
		pn_port_status_t s;
		CHECK(buf, "malloc");
		EXPECT_RC(pn_port_irecv(port, 0, PCTX, 5, 0, 0, buf, R, &q), 0);   /* posted first */
		EXPECT_RC(pn_am_barrier(am), 0);
		EXPECT_RC(pn_port_wait(port, &q, &s, -1), 1);
		CHECK(pat_check(buf, R, 99, 0) == (size_t)-1 && s.len == R, "data");
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		/* the data went from the RX ring straight into the posted buffer: never queued */
		CHECK(ps.unexpected_peak == 0 && ps.held == 0, "unexpected peak %llu held %llu",
		      (unsigned long long)ps.unexpected_peak, (unsigned long long)ps.held);
		say("ok channel %zu bytes into the posted buffer, nothing queued (unexpected peak 0)", R);
		free(buf);
	} else if (me == 0) {
		uint8_t *buf;
		EXPECT_RC(pn_dma_alloc(pn_port_hal(port), R, (void **)&buf), 0);   /* DMA in place */
		pat_fill(buf, R, 99, 0);
		EXPECT_RC(pn_am_barrier(am), 0);
		EXPECT_RC(pn_port_send(port, 1, PCTX, 5, 0, buf, R), 0);
		EXPECT_RC(pn_port_stats(port, &ps), 0);
		CHECK(ps.rndv_msgs == rndv0 + 1, "by rendezvous");
		EXPECT_RC(pn_dma_free(pn_port_hal(port), buf), 0);
		say("ok channel sent %zu bytes by rendezvous from registered memory", R);
	} else {
		EXPECT_RC(pn_am_barrier(am), 0);
	}
	return 0;
}

/* ---- kill: the peer dies mid-transfer; requests and RMA to it end with an error --------- */

static int case_kill(void)
{
	const size_t BIG = (size_t)64 << 20;
	unsigned W = pn_am_window(am);
	if (me == 1 && getenv("PARANIC_RESPAWN")) {   /* the new process: answers hello */
		uint64_t t0 = t_now_ns();
		while (!g.hello && t_now_ns() - t0 < 30000000000ull)
			pn_am_poll(am);
		CHECK(g.hello, "no hello from node 0");
		EXPECT_RC(pn_am_flush(am, -1), 0);
		for (uint64_t t1 = t_now_ns(); t_now_ns() - t1 < 300000000ull;)
			pn_am_poll(am);   /* let the reply go */
		say("ok kill the new process answered node 0");
		return 0;
	}
	uint8_t *big = malloc(BIG);
	uint64_t key;
	CHECK(big, "malloc");
	if (share_region(big, BIG, PN_RMA_READ, &key) < 0)
		return -1;
	if (me == 1) {   /* the victim: serves the get, streams part of it, then stops */
		pn_am_stats_t st;
		pn_status_t hs;
		do {
			pn_am_poll(am);
			pn_am_stats(am, &st);
		} while (!st.rma_inflight);
		do {
			pn_port_progress(port);
			EXPECT_RC(pn_status(pn_port_hal(port), &hs), 0);
		} while (hs.sent_bytes < (1u << 20));
		/* (in-place DMA counts its bytes when posted; the sw NIC moves them in our calls) */
		for (uint64_t t1 = t_now_ns(); t_now_ns() - t1 < 2000000ull;)
			pn_port_progress(port);
		say("phase-kill after %llu bytes", (unsigned long long)hs.sent_bytes);
		for (;;)
			pause();
	}
	if (me == 0) {
		pn_rma_req_t *q;
		pn_status_t hs;
		uint8_t *dst = malloc(BIG);
		uint64_t t0;
		int rc, rr = 0;
		unsigned sent = 0;
		CHECK(dst, "malloc");
		EXPECT_RC(pn_rma_get(am, 1, PCTX, g.keys[1][0], 0, dst, BIG, &q), 0);
		t0 = t_now_ns();
		do {   /* the data has begun to arrive (or the victim stopped before: a loaded machine) */
			pn_am_poll(am);
			EXPECT_RC(pn_status(pn_port_hal(port), &hs), 0);
		} while (hs.recv_bytes < (1u << 19) && t_now_ns() - t0 < 3000000000ull);
		say("get under way: %llu bytes received", (unsigned long long)hs.recv_bytes);
		t0 = t_now_ns();
		/* more requests than the window: the call waits, then fails with the peer */
		for (unsigned i = 0; i < W + 4 && rr == 0; i++) {
			uint64_t a[2] = {i, 0};
			rr = pn_am_request(am, 1, PCTX, H_COUNT, a, 2, NULL, 0);
			sent += rr == 0;
		}
		CHECK(rr == -ETIMEDOUT || rr == -ECONNRESET, "request beyond the window returned %d (%s)", rr,
		      pn_strerror(rr));
		rc = pn_rma_wait(am, &q, -1);
		CHECK(rc == -ETIMEDOUT || rc == -ECONNRESET, "get from the killed peer: %d (%s)", rc, pn_strerror(rc));
		CHECK(g.errs == (int)sent && (g.last_err == -ETIMEDOUT || g.last_err == -ECONNRESET),
		      "%d errors for %u requests (last %d)", g.errs, sent, g.last_err);
		say("ok kill node 0: the get ended with %s, %d outstanding requests with %s, the request beyond the "
		    "window returned %s, after %.0f ms",
		    pn_strerror(rc), g.errs, pn_strerror(g.last_err), pn_strerror(rr), (t_now_ns() - t0) / 1e6);
		/* the new process on node 1 (pn_launch -r) */
		t0 = t_now_ns();
		while (!g.hello_rep && t_now_ns() - t0 < 30000000000ull) {
			uint64_t a = 1;
			pn_am_request(am, 1, PCTX, H_HELLO, &a, 1, NULL, 0);
			pn_am_flush(am, -1);
		}
		CHECK(g.hello_rep, "the new process never answered");
		say("ok kill node 0 talked to the new process");
		free(dst);
	}
	return 0;
}

/* ---- bench: request+reply round trip / 2, put bandwidth --------------------------------- */

static int case_bench(void)
{
	const char *sizes_s = getenv("AT_SIZES") ? getenv("AT_SIZES") : "8,1024,16384";
	double scale = getenv("AT_ITERS") ? atof(getenv("AT_ITERS")) : 1.0;
	pn_hal_t *h = pn_port_hal(port);
	int sim = !strcmp(pn_backend_name(h), "sim");
	char tmp[256];
	size_t maxsz = 1 << 20;
	uint8_t *buf = malloc(maxsz), *reg = malloc(maxsz);
	uint64_t key;
	CHECK(buf && reg, "malloc");
	memset(buf, 1, maxsz);
	if (share_region(reg, maxsz, PN_RMA_WRITE, &key) < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s", sizes_s);
	for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
		size_t n = strtoul(t, NULL, 0);
		unsigned iters = (unsigned)(scale * (n <= 16384 ? 2000 : 200)), warm = iters / 10 + 1;
		if (sim)
			iters = iters / 20 + 3, warm = 2;
		if (n > pn_am_max_payload(am))
			n = pn_am_max_payload(am);
		EXPECT_RC(pn_am_barrier(am), 0);
		uint64_t t0 = 0, w0 = 0;
		if (me == 0) {
			for (unsigned i = 0; i < iters + warm; i++) {
				unsigned long want = g.bench + 1;
				uint64_t a = i;
				if (i == warm)
					t0 = pn_now_ns(h), w0 = t_now_ns();
				EXPECT_RC(pn_am_request(am, 1, PCTX, H_BENCH, &a, 1, buf, n), 0);
				while (g.bench < want)
					pn_am_poll(am);
			}
			double lat = (double)(pn_now_ns(h) - t0) / iters / 2, latw = (double)(t_now_ns() - w0) / iters / 2;
			/* put bandwidth: back to back, then one flush */
			pn_rma_req_t *q;
			unsigned pi = iters / 2 + 1;
			t0 = pn_now_ns(h), w0 = t_now_ns();
			for (unsigned i = 0; i < pi; i++)
				EXPECT_RC(pn_rma_put(am, 1, PCTX, g.keys[1][0], 0, buf, n, i + 1 == pi ? &q : NULL), 0);
			EXPECT_RC(pn_rma_flush(am), 0);
			EXPECT_RC(pn_rma_wait(am, &q, -1), 1);
			double bt = (double)(pn_now_ns(h) - t0), bw = (double)(t_now_ns() - w0);
			say("{\"bench\": \"am\", \"backend\": \"%s\", \"bytes\": %zu, \"iters\": %u, \"latency_ns\": %.0f, "
			    "\"latency_wall_ns\": %.0f, \"put_MBps\": %.4g, \"put_MBps_wall\": %.4g}",
			    pn_backend_name(h), n, iters, lat, latw, n * (double)pi / bt * 1e3, n * (double)pi / bw * 1e3);
		}
		EXPECT_RC(pn_am_flush(am, -1), 0);
		EXPECT_RC(pn_am_barrier(am), 0);   /* node 1 serves in the barrier */
	}
	say("ok bench");
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	int r = -1;
	backend = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL;
	if (open_am(t_env_long("AT_WINDOW", -1)) < 0)
		return 1;
	t_case = name;
	if (!strcmp(name, "pingpong"))
		r = case_pingpong();
	else if (!strcmp(name, "window"))
		r = N >= 2 ? case_window() : 0;
	else if (!strcmp(name, "all_to_all"))
		r = case_all_to_all();
	else if (!strcmp(name, "errors"))
		r = case_errors();
	else if (!strcmp(name, "rma"))
		r = case_rma(argc > 3 ? argc - 3 : 0, argv + 3);
	else if (!strcmp(name, "gather"))
		r = case_gather();
	else if (!strcmp(name, "dereg"))
		r = case_dereg();
	else if (!strcmp(name, "channel"))
		r = case_channel();
	else if (!strcmp(name, "kill"))
		r = case_kill();
	else if (!strcmp(name, "bench"))
		r = case_bench();
	else {
		say("FAIL unknown case %s", name);
		return 2;
	}
	if (r == 0 && strcmp(name, "kill")) {
		pn_am_flush(am, -1);
		pn_am_barrier(am);   /* nobody closes while others still need it */
	}
	EXPECT_RC(pn_am_close(am), 0);
	pn_port_close(port);
	return r == 0 && !t_failures ? 0 : 1;
}
