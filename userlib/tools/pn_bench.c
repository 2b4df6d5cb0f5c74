/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_bench: micro-benchmarks of the HAL, rawdata, ports, AM and RMA layers (`paranic bench`).
 *
 *   pn_launch -n 2 -- pn_bench [--backend B] [--layer hal,rawdata,ports,am,rma|all]
 *       [--bench pairwise,pingpong,stream,overhead,barrier|all] [--min BYTES] [--max BYTES]
 *       [--scale F] [--barriers N] [--per-iter]
 *
 * Nodes 0 and 1 measure (further nodes only join the barriers); node 0 prints one
 * JSON object per line:
 *
 *   {"bench": "pingpong", "layer": "hal", "backend": "sw", "bytes": 8, "iters": 20000,
 *    "ns_per_iter": ..., "wall_ns_per_iter": ..., "cycles_per_iter": ...,
 *    "latency_ns": ..., "MBps": ...}
 *
 * pairwise  both nodes send a message, then both receive one (ParaStation's
 *           Algorithm 1); latency_ns = ns_per_iter, MBps = bytes / ns_per_iter.
 * pingpong  node 0 sends, node 1 answers; latency_ns = ns_per_iter / 2 (one way).
 * stream    node 0 sends `iters` messages back to back, node 1 acknowledges the
 *           last; MBps = iters * bytes / time.
 * overhead  node 0 alone: send to itself and receive (the software cost of a send
 *           plus a receive, no peer); bytes 0 .. 256.
 * barrier   every node of the job: N back-to-back pn_barrier calls (default 2000 *
 *           scale); node 0 prints {"bench": "barrier", "nodes": N, "iters": ...,
 *           "ns_per_iter": ..., ...}: one barrier episode, entry to entry; on sim also
 *           "hw_path_ns": isolated episodes, last enter to last done (trace records).
 *           Only with --bench barrier (not part of "all").
 * ns are the backend's time base (pn_now_ns: wall clock for sw, simulated time for
 * sim), wall_ns the process's monotonic clock, cycles pn_cycles (target clock).
 * --per-iter: time every iteration on sw as well (median_ns_per_iter, min_ns_per_iter:
 * robust against preemption on a loaded machine; latency_ns stays the mean there).
 * Iterations per size: scale * clamp(64 MiB / (bytes + 64), 8, 20000).
 *
 * The HAL layer uses context 1 and registered buffers (PIO up to the threshold, DMA in
 * place above); rawdata its well-known context 0 and plain malloc'd buffers; ports a
 * port on context 2 (PORT_CTX, opened only when the layer is named), channel 0, tag 0,
 * buffers from pn_dma_alloc on the port's context (registered: rendezvous by DMA in
 * place), a receive naming the peer port. --layer takes a comma-separated list; "all"
 * (the default) is the HAL-level layers, hal and rawdata.
 * am and rma: an AM endpoint (pn_am.h) on that port. am: "send" is pn_am_request of
 * `bytes` payload and no arguments, "recv" polls until an AM bench handler ran (and
 * checks the length); in pingpong the request handler replies with the payload (so a
 * ping-pong iteration is one request + reply and the answering node's own "send" is
 * that reply), elsewhere it does not (automatic ACK). max_payload is raised to --max
 * when that is above the default. rma: node 0 puts `bytes` from its registered buffer
 * into node 1's region (node 1's registered receive buffer, key exchanged by an AM
 * request); pingpong: pn_rma_put + pn_rma_wait (completion: the data is in the
 * target's memory and its RMAACK is back), latency_ns = half of it; stream: implicit
 * puts, then pn_rma_flush. The target only serves (polls until the puts are in); after
 * every rma run the target checks its region against the initiator's pattern. pairwise
 * and overhead: every node is an initiator. am and rma rows add node 0's endpoint
 * counters over the run (warm-up included): am_requests, am_handled_replies, rma_puts,
 * am_window_waits.
 *
 * One program, one file: the QEMU guest image links it on its own (paranic.qemu).
 * The command line is parsed once into a struct bench_opts; everything a run uses
 * (handles, buffers, each layer's state, the samples) is in a struct bench handed to
 * every function.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_am.h"
#include "paranic/pn_ports.h"
#include "paranic/pn_rawdata.h"
#include "paranic/pn_sim.h"
#include "tutil.h"

#define HAL_CTX 1
#define PORT_CTX 2

/* The command line. */
struct bench_opts {
	pn_open_opts_t open;     /* --backend (the rest from the environment) */
	const char *layers;      /* --layer: a comma-separated list or "all" */
	const char *benches;     /* --bench: a comma-separated list or "all" */
	size_t lo, hi;           /* --min, --max: message sizes */
	double scale;            /* --scale: iterations */
	int per_iter;            /* --per-iter: time every iteration on sw too */
	long nbarriers;          /* --barriers (-1: 2000 * scale) */
};

/* Iteration times. On sim, each iteration is timed too (pn_now_ns is a load from the
 * simulator's shared clock there): the hardware path is deterministic, but simulated
 * time keeps running while a client process is descheduled (a busy 2-core machine),
 * which only ever adds. Reported: the median iteration (latency_ns, on sim) with the
 * spread beside it (iter_p10_ns, iter_p90_ns, min/max, iter_samples); the fastest
 * iteration only as min_ns_per_iter (the best case, not the figure: a node that fell
 * behind catches up in one short iteration); the barrier's hardware path from trace
 * records (median, p10..p90, min..max, samples). */
struct samples {
	int on;                  /* --per-iter, or on sim */
	uint64_t *v;
	unsigned n;
};

/* The ports layer (only when ports, am or rma is named). A ports send is posted
 * (pn_port_isend) and completed by the next receive or send: in pairwise both nodes
 * send before they receive, and a blocking rendezvous send returns only once the peer
 * has taken the message, so two of them would wait for each other (as MPI_Send above
 * the eager limit would). */
struct port_layer {
	pn_port_t *port;
	uint8_t *sbuf, *rbuf;          /* registered in the port's context */
	pn_port_req_t *sreq;           /* the posted send */
};

/* The AM/RMA endpoint on the port (only when am or rma is named). */
struct am_layer {
	pn_am_t *am;
	uint64_t my_key, peer_key;     /* this node's region (the port's rbuf), the peer's */
	unsigned long handled, taken;  /* AM bench handlers run; of them, counted by a "recv" */
	unsigned long owed;            /* pingpong: replies sent in the request handler */
	unsigned long done, done_want; /* AMB_DONE requests received; expected by am_finish */
	size_t last_len;               /* payload of the last AM bench message handled */
	int echo;                      /* the request handler replies (pingpong) */
	int rma_init, rma_rt;          /* this node initiates; each put is waited for (else flush) */
	pn_rma_req_t *rma_q;
	uint64_t rma_want_served, rma_want_bytes;   /* target: puts (and bytes) to have served */
};

/* One benchmark process. */
struct bench {
	const struct bench_opts *opt;
	pn_rd_t *rd;                   /* rawdata, on its well-known context */
	pn_hal_t *h;                   /* the HAL benchmarks' own context (HAL_CTX); barriers, time */
	unsigned me, N, ctx;
	int on_sim;
	size_t bufsz;
	uint8_t *sbuf, *rbuf;          /* registered in h (DMA in place) */
	uint8_t *usbuf, *urbuf;        /* plain memory: what rawdata callers usually have */
	struct samples s;
	struct port_layer p;
	struct am_layer a;
	char row_extra[256];           /* am, rma: node 0's endpoint counters over the run (report) */
};

#define TRY(x)                                                                          \
	do {                                                                            \
		int r_ = (x);                                                           \
		if (r_ < 0) {                                                           \
			say("FAIL bench: %s returned %d (%s)", #x, r_, pn_strerror(r_)); \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

/* ---- iteration times -------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double median_ns(struct samples *s)
{
	if (!s->n)
		return -1;
	qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
	return s->n & 1 ? (double)s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2.0;
}

/* After median_ns() (sorted): the fastest iteration. */
static double min_ns(const struct samples *s)
{
	return s->n ? (double)s->v[0] : -1;
}

/* The p-th percentile (nearest rank) of n sorted values, or -1. */
static double pct_sorted(const uint64_t *v, unsigned n, unsigned p)
{
	if (!n)
		return -1;
	unsigned k = (unsigned)(((uint64_t)p * n + 99) / 100);
	return (double)v[k ? k - 1 : 0];
}

/* The spread of the samples beside their median (after median_ns()): p10, p90, slowest
 * and the number of samples, as JSON members (docs/benchmarks.md, "Statistics"). */
static void spread_json(char *out, size_t len, const char *pre, const uint64_t *v, unsigned n, double scale)
{
	snprintf(out, len, ", \"%sp10_ns\": %.1f, \"%sp90_ns\": %.1f, \"%smax_ns\": %.1f, \"%ssamples\": %u", pre,
		 n ? pct_sorted(v, n, 10) * scale : -1, pre, n ? pct_sorted(v, n, 90) * scale : -1, pre,
		 n ? v[n - 1] * scale : -1, pre, n);
}

static inline void sample(struct bench *b, uint64_t *last, unsigned i, unsigned warm)
{
	uint64_t t;
	if (!b->s.on)
		return;
	t = pn_now_ns(b->h);
	if (i >= warm)
		b->s.v[b->s.n++] = t - *last;
	*last = t;
}

/* ---- one message at the HAL level: PIO up to the threshold, DMA above ---------------- */

static int hal_send(struct bench *b, unsigned dst, size_t n)
{
	return pn_send(b->h, dst, b->ctx, n, b->sbuf, n);   /* sbuf is registered: DMA in place */
}

static int hal_recv(struct bench *b, unsigned src, size_t n)
{
	size_t got = 0;
	(void)src;
	for (;;) {
		pn_header_t hd;
		int r = pn_recv_wait(b->h, &hd, -1);
		if (r < 0)
			return r;
		if (got + hd.length > b->bufsz)
			return -EMSGSIZE;
		if ((r = pn_recv_body(b->h, b->rbuf + got, hd.length)) < 0)
			return r;
		got += hd.length;
		if (hd.flags & PN_FLAG_EOM)
			break;
	}
	return got == n ? 0 : -EPROTO;
}

/* ---- rawdata ------------------------------------------------------------------------------ */

static int rd_send1(struct bench *b, unsigned dst, size_t n)
{
	return pn_rd_send(b->rd, dst, b->usbuf, n);
}

static int rd_recv1(struct bench *b, unsigned src, size_t n)
{
	size_t len;
	int r = pn_rd_recv(b->rd, (int)src, b->urbuf, b->bufsz, NULL, &len);
	return r < 0 ? r : (len == n ? 0 : -EPROTO);
}

/* ---- ports -------------------------------------------------------------------------------- */

static int port_send_done(struct bench *b)
{
	pn_port_status_t st;
	int r = b->p.sreq ? pn_port_wait(b->p.port, &b->p.sreq, &st, -1) : 1;
	return r == 1 ? 0 : (r < 0 ? r : -EPROTO);
}

static int port_send1(struct bench *b, unsigned dst, size_t n)
{
	int r = port_send_done(b);
	return r < 0 ? r : pn_port_isend(b->p.port, dst, PORT_CTX, 0, 0, b->p.sbuf, n, &b->p.sreq);
}

static int port_recv1(struct bench *b, unsigned src, size_t n)
{
	pn_port_status_t st;
	int r = pn_port_recv(b->p.port, (int)src, PORT_CTX, 0, 0, 0, b->p.rbuf, b->bufsz, &st, -1);
	if (r >= 0 && (size_t)r != n)
		r = -EPROTO;
	return r < 0 ? r : port_send_done(b);
}

/* ---- active messages and RMA (pn_am.h) ------------------------------------------------ */

enum { AMB_REQ = 1, AMB_REP = 2, AMB_KEY = 3, AMB_DONE = 4 };

static void amb_req(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	struct am_layer *A = arg;
	A->handled++;
	A->last_len = len;
	if (A->echo && pn_am_reply(t, AMB_REP, a, na, p, len) == 0)
		A->owed++;
}

static void amb_rep(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	struct am_layer *A = arg;
	(void)t, (void)a, (void)na, (void)p;
	A->handled++;
	A->last_len = len;
}

static void amb_key(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	struct am_layer *A = arg;
	(void)t, (void)p, (void)len;
	if (na == 1)
		A->peer_key = a[0];
}

static void amb_done(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	struct am_layer *A = arg;
	(void)t, (void)a, (void)na, (void)p, (void)len;
	A->done++;
}

/* After a measurement (untimed): both nodes serve until the other is through, so that
 * a node does not stop calling the library while its last answer (a rendezvous reply)
 * still needs it. One DONE per finish, which may arrive before it. */
static int am_finish(struct bench *b, unsigned peer)
{
	struct am_layer *A = &b->a;
	int r = pn_am_request(A->am, peer, PORT_CTX, AMB_DONE, NULL, 0, NULL, 0);
	A->done_want++;
	while (r >= 0 && A->done < A->done_want)
		r = pn_am_poll(A->am);
	return r < 0 ? r : pn_am_flush(A->am, -1);
}

static int am_send1(struct bench *b, unsigned dst, size_t n)
{
	if (b->a.owed) {   /* pingpong's answer: the handler has replied already */
		b->a.owed--;
		return 0;
	}
	return pn_am_request(b->a.am, dst, PORT_CTX, AMB_REQ, NULL, 0, b->p.sbuf, n);   /* no arguments */
}

static int am_recv1(struct bench *b, unsigned src, size_t n)
{
	(void)src;
	while (b->a.handled == b->a.taken) {
		int r = pn_am_poll(b->a.am);
		if (r < 0)
			return r;
	}
	b->a.taken++;
	return b->a.last_len == n ? 0 : -EPROTO;   /* every message of a run has n bytes */
}

static int rma_send1(struct bench *b, unsigned dst, size_t n)
{
	struct am_layer *A = &b->a;
	if (!A->rma_init)
		return 0;   /* the target: its answer (RMAACK) went while it served */
	return pn_rma_put(A->am, dst, PORT_CTX, dst == b->me ? A->my_key : A->peer_key, 0, b->p.sbuf, n,
			  A->rma_rt ? &A->rma_q : NULL);
}

static int rma_recv1(struct bench *b, unsigned src, size_t n)
{
	struct am_layer *A = &b->a;
	(void)src;
	if (A->rma_init) {
		int r = A->rma_rt ? pn_rma_wait(A->am, &A->rma_q, -1) : pn_rma_flush(A->am);
		return r < 0 ? r : 0;
	}
	A->rma_want_served++;
	A->rma_want_bytes += n;
	for (;;) {   /* serve until this put is in the region */
		pn_am_stats_t st;
		int r = pn_am_poll(A->am);
		if (r < 0 || (r = pn_am_stats(A->am, &st)) < 0)
			return r;
		if (st.rma_served >= A->rma_want_served && st.rma_bytes_in >= A->rma_want_bytes)
			return 0;
	}
}

/* ---- the layers ----------------------------------------------------------------------- */

struct layer {
	const char *name;
	int (*send)(struct bench *b, unsigned dst, size_t n);
	int (*recv)(struct bench *b, unsigned src, size_t n);
};

static const struct layer LAYERS[] = {
	{"hal", hal_send, hal_recv},
	{"rawdata", rd_send1, rd_recv1},
	{"ports", port_send1, port_recv1},
	{"am", am_send1, am_recv1},
	{"rma", rma_send1, rma_recv1},
};
#define NLAYERS (sizeof(LAYERS) / sizeof(LAYERS[0]))

/* Is layer `name` in the --layer list ("all": the HAL-level layers hal and rawdata)? */
static int layer_named(const char *list, const char *name)
{
	size_t n = strlen(name);
	if (!strcmp(list, "all"))
		return !strcmp(name, "hal") || !strcmp(name, "rawdata");
	for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
		if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return 1;
	return 0;
}

/* ---- the message benchmarks ------------------------------------------------------------- */

static unsigned iters_for(const struct bench *b, size_t n)
{
	double it = (64.0 * 1024 * 1024) / (double)(n + 64);
	if (it < 8)
		it = 8;
	if (it > 20000)
		it = 20000;
	it *= b->opt->scale;
	return it < 2 ? 2 : (unsigned)it;
}

static void report(struct bench *b, const char *bench, const char *layer, size_t n, unsigned it, uint64_t ns,
		   uint64_t wall, uint64_t cyc, double latency, double mbps)
{
	double med = median_ns(&b->s);
	char spread[256];
	spread_json(spread, sizeof(spread), "iter_", b->s.v, b->s.n, 1.0);
	say("{\"bench\": \"%s\", \"layer\": \"%s\", \"backend\": \"%s\", \"bytes\": %zu, \"iters\": %u, "
	    "\"ns_per_iter\": %.1f, \"median_ns_per_iter\": %.1f, \"min_ns_per_iter\": %.1f%s, "
	    "\"wall_ns_per_iter\": %.1f, \"cycles_per_iter\": %.1f, \"latency_ns\": %.1f, \"MBps\": %.2f%s}",
	    bench, layer, pn_backend_name(b->h), n, it, (double)ns / it, med, min_ns(&b->s), spread, (double)wall / it,
	    (double)cyc / it, latency, mbps, b->row_extra);
	b->row_extra[0] = 0;
}

/* pairwise, pingpong or stream of n-byte messages over layer L between nodes 0 and 1. */
static void run(struct bench *b, const char *bench, const struct layer *L, size_t n)
{
	struct am_layer *A = &b->a;
	unsigned it = iters_for(b, n), warm = it / 10 + 1;
	unsigned me = b->me, peer = 1 - me;
	uint64_t t0 = 0, w0 = 0, c0 = 0, ns, wall, cyc, last = 0;

	b->s.n = 0;
	A->echo = !strcmp(bench, "pingpong");
	A->rma_rt = strcmp(bench, "stream") != 0;
	A->rma_init = me == 0 || !strcmp(bench, "pairwise");
	int is_am = L->send == am_send1 || L->send == rma_send1;
	pn_am_stats_t st0 = {0}, st1;
	if (L->send == rma_send1)
		memset(b->p.rbuf, 0, n);   /* the region: the peer's puts must fill it */
	pn_barrier(b->h);
	if (me > 1)
		return;
	if (is_am) {   /* what the target has served so far (it polls only in this run's calls) */
		TRY(pn_am_stats(A->am, &st0));
		A->rma_want_served = st0.rma_served;
		A->rma_want_bytes = st0.rma_bytes_in;
	}
	if (!strcmp(bench, "pairwise")) {
		for (unsigned i = 0; i < warm + it; i++) {
			if (i == warm) {
				t0 = pn_now_ns(b->h);
				w0 = t_now_ns();
				c0 = pn_cycles(b->h);
			}
			sample(b, &last, i, warm + 1);
			TRY(L->send(b, peer, n));
			TRY(L->recv(b, peer, n));
		}
		sample(b, &last, warm + it, warm + 1);
	} else if (!strcmp(bench, "pingpong")) {
		for (unsigned i = 0; i < warm + it; i++) {
			if (i == warm) {
				t0 = pn_now_ns(b->h);
				w0 = t_now_ns();
				c0 = pn_cycles(b->h);
			}
			sample(b, &last, i, warm + 1);
			if (me == 0) {
				TRY(L->send(b, peer, n));
				TRY(L->recv(b, peer, n));
			} else {
				TRY(L->recv(b, peer, n));
				TRY(L->send(b, peer, n));
			}
		}
		sample(b, &last, warm + it, warm + 1);
	} else { /* stream: the mean (messages overlap) */
		for (int round = 0; round < 2; round++) {   /* a warm-up round, then the measured one */
			unsigned cnt = round ? it : warm;
			if (round) {
				t0 = pn_now_ns(b->h);
				w0 = t_now_ns();
				c0 = pn_cycles(b->h);
			}
			if (me == 0) {
				for (unsigned i = 0; i < cnt; i++)
					TRY(L->send(b, peer, n));
				TRY(L->recv(b, peer, 0));
			} else {
				for (unsigned i = 0; i < cnt; i++)
					TRY(L->recv(b, peer, n));
				TRY(L->send(b, peer, 0));
			}
		}
	}
	ns = pn_now_ns(b->h) - t0;
	wall = t_now_ns() - w0;
	cyc = pn_cycles(b->h) - c0;
	if (is_am) {
		TRY(pn_am_stats(A->am, &st1));
		snprintf(b->row_extra, sizeof(b->row_extra), ", \"am_requests\": %llu, \"am_handled_replies\": %llu, "
			 "\"rma_puts\": %llu, \"am_window_waits\": %llu",
			 (unsigned long long)(st1.requests - st0.requests),
			 (unsigned long long)(st1.handled_replies - st0.handled_replies),
			 (unsigned long long)(st1.rma_puts - st0.rma_puts),
			 (unsigned long long)(st1.window_waits - st0.window_waits));
		TRY(am_finish(b, peer));
	}
	if (L->send == rma_send1 && (me == 1 || !strcmp(bench, "pairwise")) &&
	    pat_check(b->p.rbuf, n, peer, 0) != (size_t)-1) {
		say("FAIL bench: rma %s %zu B: the region does not hold the peer's data", bench, n);
		exit(1);
	}
	if (L->send == port_send1)
		TRY(port_send_done(b));   /* the last posted send, before the next barrier */
	TRY(pn_tx_wait(b->h));
	if (me != 0)
		return;
	double med = median_ns(&b->s), per = (double)ns / it;   /* one iteration */
	if (b->s.n && b->on_sim)
		per = med;   /* the median iteration; the fastest is min_ns_per_iter, beside it */
	if (per <= 0)
		per = 0.001;
	if (!strcmp(bench, "pairwise"))
		report(b, bench, L->name, n, it, ns, wall, cyc, per, n * 1e3 / per);
	else if (!strcmp(bench, "pingpong"))
		report(b, bench, L->name, n, it, ns, wall, cyc, per / 2, n * 1e3 / (per / 2));
	else
		report(b, bench, L->name, n, it, ns, wall, cyc, (double)ns / it, (double)n * it * 1e3 / (double)ns);
}

/* overhead: node 0 sends n bytes to itself and receives them over layer L. */
static void overhead(struct bench *b, const struct layer *L, size_t n)
{
	unsigned it = (unsigned)(200000 * b->opt->scale) + 2, warm = it / 10 + 1;
	uint64_t t0 = 0, w0 = 0, c0 = 0;
	b->s.n = 0;
	b->a.echo = 0;
	b->a.rma_rt = b->a.rma_init = 1;
	pn_barrier(b->h);
	if (b->me != 0)
		return;
	for (unsigned i = 0; i < warm + it; i++) {
		if (i == warm) {
			t0 = pn_now_ns(b->h);
			w0 = t_now_ns();
			c0 = pn_cycles(b->h);
		}
		TRY(L->send(b, b->me, n));
		TRY(L->recv(b, b->me, n));
	}
	uint64_t ns = pn_now_ns(b->h) - t0;
	report(b, "overhead", L->name, n, it, ns, t_now_ns() - w0, pn_cycles(b->h) - c0, (double)ns / it,
	       n * 1e3 / ((double)ns / it));
}

/* ---- the barrier benchmark ---------------------------------------------------------------- */

/* On sim: the hardware path of isolated episodes from the simulator's trace records,
 * deterministic: from the last node's BARRIER store leaving the CPU (its bus cycle
 * minus the PCIe model's MMIO write latency) to the last status block showing the
 * episode done in host memory. After each episode the other nodes wait for node 0's
 * go (a 0-byte PIO packet) so that no one enters the next and overwrites its record
 * before node 0 has read them. Returns the median in ns (sorted in v[]), or -1. */
static double barrier_trace(struct bench *b, unsigned episodes, double *lo, double *hi, char *spread, size_t len)
{
	pn_sim_info_t info;
	pn_sim_trace_t t;
	uint64_t *v = calloc(episodes, sizeof(*v));
	unsigned k = 0;

	if (!v || pn_sim_info(b->h, &info) < 0) {
		free(v);
		return -1;
	}
	for (unsigned e = 0; e < episodes; e++) {
		TRY(pn_barrier(b->h));
		if (b->me == 0) {
			uint64_t want, enter = 0, done = 0;
			TRY(pn_sim_trace(b->h, 0, b->ctx, &t));
			want = t.barrier_done_count;
			for (unsigned n = 0; n < b->N; n++) {
				for (;;) {   /* every node's status write of this episode is visible */
					TRY(pn_sim_trace(b->h, n, b->ctx, &t));
					if (t.barrier_done_count >= want)
						break;
					pn_progress(b->h);
				}
				if (t.barrier_enter_cycle > enter)
					enter = t.barrier_enter_cycle;
				if (t.barrier_done_cycle > done)
					done = t.barrier_done_cycle;
			}
			v[k++] = done - enter + info.mmio_write_cycles;
			for (unsigned n = 1; n < b->N; n++)
				TRY(pn_send_pio(b->h, n, b->ctx, 0, NULL, 0));
		} else {
			pn_header_t hd;
			TRY(pn_recv_wait(b->h, &hd, -1));
			TRY(pn_recv_skip(b->h));
		}
	}
	TRY(pn_tx_wait(b->h));
	double med = -1;
	if (k) {
		qsort(v, k, sizeof(*v), cmp_u64);
		double ns = 1e9 / info.clk_hz;
		med = (k & 1 ? (double)v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2.0) * ns;
		*lo = v[0] * ns;
		*hi = v[k - 1] * ns;
		spread_json(spread, len, "hw_path_", v, k, ns);
	}
	free(v);
	return med;
}

static void barriers(struct bench *b, unsigned count)
{
	uint64_t t0, w0, c0, ns, wall, cyc, last;
	unsigned warm = count / 10 + 1;
	double path = -1, path_lo = -1, path_hi = -1;
	char path_spread[256] = "", spread[256];

	b->s.n = 0;
	for (unsigned i = 0; i < warm; i++)
		TRY(pn_barrier(b->h));
	t0 = pn_now_ns(b->h);
	w0 = t_now_ns();
	c0 = pn_cycles(b->h);
	last = t0;
	for (unsigned i = 0; i < count; i++) {
		TRY(pn_barrier(b->h));
		sample(b, &last, i + 1, 1);
	}
	ns = pn_now_ns(b->h) - t0;
	wall = t_now_ns() - w0;
	cyc = pn_cycles(b->h) - c0;
	/* Back to back: the median episode on sim (a node descheduled after an episode
	 * makes the next one look short, so not the fastest), the mean natively. */
	double med = median_ns(&b->s), per = b->s.n && b->on_sim ? med : (double)ns / count;
	if (b->on_sim)
		path = barrier_trace(b, count < 20 ? count : 20, &path_lo, &path_hi, path_spread, sizeof(path_spread));
	spread_json(spread, sizeof(spread), "iter_", b->s.v, b->s.n, 1.0);
	if (b->me == 0)
		say("{\"bench\": \"barrier\", \"layer\": \"hal\", \"backend\": \"%s\", \"nodes\": %u, "
		    "\"iters\": %u, \"ns_per_iter\": %.1f, \"median_ns_per_iter\": %.1f, \"min_ns_per_iter\": %.1f%s, "
		    "\"wall_ns_per_iter\": %.1f, \"cycles_per_iter\": %.1f, \"latency_ns\": %.1f, "
		    "\"hw_path_ns\": %.1f, \"hw_path_min_ns\": %.1f, \"hw_path_max_ns\": %.1f%s}",
		    pn_backend_name(b->h), b->N, count, (double)ns / count, med, min_ns(&b->s), spread,
		    (double)wall / count, (double)cyc / count, per, path, path_lo, path_hi, path_spread);
}

/* ---- set-up --------------------------------------------------------------------------------- */

/* Fill *o from the command line: 0, or the exit code (2: bad arguments). */
static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	*o = (struct bench_opts){.layers = "all", .benches = "all", .lo = 1, .hi = 1 << 20, .scale = 1.0,
				 .nbarriers = -1};
	pn_open_opts_init(&o->open);
	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--backend") && a + 1 < argc)
			o->open.backend = argv[++a];
		else if (!strcmp(argv[a], "--layer") && a + 1 < argc)
			o->layers = argv[++a];
		else if (!strcmp(argv[a], "--bench") && a + 1 < argc)
			o->benches = argv[++a];
		else if (!strcmp(argv[a], "--min") && a + 1 < argc)
			o->lo = strtoul(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--max") && a + 1 < argc)
			o->hi = strtoul(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--scale") && a + 1 < argc)
			o->scale = atof(argv[++a]);
		else if (!strcmp(argv[a], "--per-iter"))
			o->per_iter = 1;
		else if (!strcmp(argv[a], "--barriers") && a + 1 < argc)
			o->nbarriers = strtol(argv[++a], NULL, 0);
		else {
			fprintf(stderr, "usage: %s [--backend B] [--layer hal,rawdata,ports,am,rma|all] "
					"[--bench pairwise,pingpong,stream,overhead,barrier|all] [--min N] [--max N] "
					"[--scale F] [--barriers N] [--per-iter]\n", argv[0]);
			return 2;
		}
	}
	if (!(o->scale > 0) || o->lo > o->hi || o->hi > PN_RD_MAX_MSG || o->nbarriers == 0 ||
	    o->nbarriers > 100000000) {
		say("FAIL bench: bad arguments (--scale > 0, --min <= --max <= %u, 0 < --barriers <= 1e8)",
		    PN_RD_MAX_MSG);
		return 2;
	}
	for (const char *p = o->layers; strcmp(o->layers, "all"); ) {   /* every name in the list is known */
		size_t len = strcspn(p, ",");
		int known = 0;
		for (size_t l = 0; l < NLAYERS; l++)
			known |= strlen(LAYERS[l].name) == len && !strncmp(p, LAYERS[l].name, len);
		if (!known) {
			say("FAIL bench: unknown layer '%.*s' (hal, rawdata, ports, am, rma or all)", (int)len,
			    p);
			return 2;
		}
		if (!p[len])
			break;
		p += len + 1;
	}
	return 0;
}

/* rawdata's context and the HAL context; the samples array. 0, or the exit code. */
static int bench_open(struct bench *b)
{
	const struct bench_opts *opt = b->opt;
	pn_open_opts_t o = opt->open;
	int r;

	if ((r = pn_rd_open(&b->rd, &o)) < 0) {
		say("FAIL open: %d (%s)", r, pn_strerror(r));
		return 1;
	}
	o.ctx = HAL_CTX;
	if ((r = pn_open(&b->h, &o)) < 0) {
		say("FAIL open: %d (%s)", r, pn_strerror(r));
		return 1;
	}
	b->me = (unsigned)pn_node_id(b->h);
	b->on_sim = !strcmp(pn_backend_name(b->h), "sim");
	b->s.on = opt->per_iter || b->on_sim;
	size_t cap = (size_t)(20000 * opt->scale) + 2;   /* iters_for()'s largest */
	if (opt->nbarriers > 0 && (size_t)opt->nbarriers >= cap)
		cap = (size_t)opt->nbarriers + 1;
	b->s.v = calloc(cap, sizeof(*b->s.v));
	if (!b->s.v)
		return 1;
	b->N = (unsigned)pn_num_nodes(b->h);
	b->ctx = (unsigned)pn_ctx_id(b->h);
	return 0;
}

/* The message benchmarks' buffers, the port and the AM endpoint (when named), the
 * exchange of RMA keys. 0, or the exit code. */
static int layers_open(struct bench *b)
{
	const struct bench_opts *opt = b->opt;
	size_t bufsz = opt->hi > 256 ? opt->hi : 256;
	int r;

	b->bufsz = bufsz;
	TRY(pn_dma_alloc(b->h, bufsz, (void **)&b->sbuf));
	TRY(pn_dma_alloc(b->h, bufsz, (void **)&b->rbuf));
	b->usbuf = malloc(bufsz);
	b->urbuf = malloc(bufsz);
	if (!b->usbuf || !b->urbuf)
		return 1;
	pat_fill(b->sbuf, bufsz, b->me, 0);
	pat_fill(b->usbuf, bufsz, b->me, 0);
	int want_am = layer_named(opt->layers, "am") || layer_named(opt->layers, "rma");
	if (layer_named(opt->layers, "ports") || want_am) {
		pn_port_opts_t po;
		pn_port_opts_init(&po);
		po.hal = opt->open;
		po.hal.ctx = PORT_CTX;
		if ((r = pn_port_open(&b->p.port, &po)) < 0) {
			say("FAIL open port: %d (%s)", r, pn_strerror(r));
			return 1;
		}
		TRY(pn_dma_alloc(pn_port_hal(b->p.port), bufsz, (void **)&b->p.sbuf));
		TRY(pn_dma_alloc(pn_port_hal(b->p.port), bufsz, (void **)&b->p.rbuf));
		pat_fill(b->p.sbuf, bufsz, b->me, 0);
	}
	if (want_am) {
		struct am_layer *A = &b->a;
		pn_am_opts_t ao;
		pn_am_opts_init(&ao);
		if (opt->hi > PN_AM_DEFAULT_MAX_PAYLOAD)   /* am's stream of --max byte requests */
			ao.max_payload = (long)opt->hi;
		if ((r = pn_am_open(&A->am, b->p.port, &ao)) < 0) {
			say("FAIL pn_am_open: %d (%s)", r, pn_strerror(r));
			return 1;
		}
		TRY(pn_am_register(A->am, AMB_REQ, amb_req, A));
		TRY(pn_am_register(A->am, AMB_REP, amb_rep, A));
		TRY(pn_am_register(A->am, AMB_KEY, amb_key, A));
		TRY(pn_am_register(A->am, AMB_DONE, amb_done, A));
		TRY(pn_rma_register(A->am, b->p.rbuf, bufsz, PN_RMA_WRITE, &A->my_key));
	}
	pn_barrier(b->h);
	if (b->a.am && b->me < 2) {   /* every endpoint is open: tell the peer our region's key */
		struct am_layer *A = &b->a;
		TRY(pn_am_request(A->am, 1 - b->me, PORT_CTX, AMB_KEY, &A->my_key, 1, NULL, 0));
		while (!A->peer_key)
			TRY(pn_am_poll(A->am));
		TRY(pn_am_flush(A->am, -1));
	}
	pn_barrier(b->h);
	return 0;
}

/* Every named benchmark over every named layer, sizes --min .. --max (powers of two). */
static void run_all(struct bench *b)
{
	const struct bench_opts *opt = b->opt;
	const char *names[] = {"pairwise", "pingpong", "stream"};

	for (size_t l = 0; l < NLAYERS; l++) {
		const struct layer *L = &LAYERS[l];
		if (!layer_named(opt->layers, L->name))
			continue;
		for (size_t k = 0; k < 3; k++) {
			if (strcmp(opt->benches, "all") && !strstr(opt->benches, names[k]))
				continue;
			for (size_t n = opt->lo; n <= opt->hi; n *= 2)
				run(b, names[k], L, n);
		}
		if (!strcmp(opt->benches, "all") || strstr(opt->benches, "overhead")) {
			size_t sz[] = {0, 8, 64, 256};
			for (size_t i = 0; i < 4; i++)
				overhead(b, L, sz[i]);
		}
	}
}

static void layers_close(struct bench *b)
{
	if (b->a.am)
		TRY(pn_am_close(b->a.am));
	if (b->p.port) {
		pn_dma_free(pn_port_hal(b->p.port), b->p.sbuf);
		pn_dma_free(pn_port_hal(b->p.port), b->p.rbuf);
		pn_port_close(b->p.port);
	}
	pn_dma_free(b->h, b->sbuf);
	pn_dma_free(b->h, b->rbuf);
	free(b->usbuf);
	free(b->urbuf);
}

int main(int argc, char **argv)
{
	struct bench_opts opt;
	struct bench b = {.opt = &opt};
	int r;

	if ((r = parse_opts(argc, argv, &opt)) != 0)
		return r;
	if ((r = bench_open(&b)) != 0)
		return r;
	if (strstr(opt.benches, "barrier")) {
		unsigned cnt = opt.nbarriers > 0 ? (unsigned)opt.nbarriers : (unsigned)(2000 * opt.scale) + 2;
		pn_barrier(b.h);
		barriers(&b, cnt);
		pn_close(b.h);
		pn_rd_close(b.rd);
		return 0;
	}
	if (b.N < 2) {
		say("FAIL bench: needs 2 nodes");
		return 1;
	}
	if ((r = layers_open(&b)) != 0)
		return r;
	run_all(&b);
	pn_barrier(b.h);
	layers_close(&b);
	pn_close(b.h);
	pn_rd_close(b.rd);
	return 0;
}
