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
 * The HAL layer uses context 1 and registered buffers (PIO up to the threshold, DMA in
 * place above); rawdata its well-known context 0 and plain malloc'd buffers; ports a
 * port on context 2 (PORT_CTX, opened only when the layer is named), channel 0, tag 0,
 * buffers from pn_dma_alloc on the port's context (registered: rendezvous by DMA in
 * place), a receive naming the peer port. --layer takes a comma-separated list; "all"
 * (the default) is hal and rawdata, as before ports existed.
 * am and rma: an AM endpoint (pn_am.h) on that port. am: "send" is pn_am_request of
 * `bytes` payload and no arguments, "recv" polls until an AM bench handler ran (and
 * checks the length); in pingpong the request handler replies with the payload (so a
 * ping-pong iteration is one request + reply and the answering node's own "send" is
 * that reply), elsewhere it does not (automatic ACK). max_payload is raised to --max when that is above the default. rma: node 0
 * puts `bytes` from its registered buffer into node 1's region (node 1's registered
 * receive buffer, key exchanged by an AM request); pingpong: pn_rma_put + pn_rma_wait
 * (completion: the data is in the target's memory and its RMAACK is back), latency_ns
 * = half of it; stream: implicit puts, then pn_rma_flush. The target only serves (polls
 * until the puts are in); after every rma run the target checks its region against the
 * initiator's pattern. pairwise and overhead: every node is an initiator. am and rma
 * rows add node 0's endpoint counters over the run (warm-up included): am_requests,
 * am_handled_replies, rma_puts, am_window_waits.
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

static pn_rd_t *rd;      /* rawdata, on its well-known context */
static pn_hal_t *h;       /* the HAL benchmarks' own context (HAL_CTX); barriers, time */
static unsigned me, N, ctx;
static uint8_t *sbuf, *rbuf;   /* registered in h (DMA in place) */
static uint8_t *usbuf, *urbuf; /* plain memory: what rawdata callers usually have */
static size_t bufsz;
#define HAL_CTX 1
#define PORT_CTX 2
static pn_port_t *port;          /* the ports layer (only when named in --layer) */
static uint8_t *psbuf, *prbuf;    /* registered in the port's context */
static double scale = 1.0;
static pn_am_t *am;               /* AM/RMA endpoint on `port` (only when am or rma is named) */
static uint64_t am_my_key, am_peer_key;   /* this node's region (its prbuf), the peer's */
static unsigned long am_handled, am_taken;   /* AM bench handlers run; of them, counted by a "recv" */
static unsigned long am_owed;     /* pingpong: replies sent in the request handler */
static int am_echo;               /* the request handler replies (pingpong) */
static int rma_init, rma_rt;      /* this node initiates; each put is waited for (else flush) */
static pn_rma_req_t *rma_q;
static size_t am_last_len;        /* payload of the last AM bench message handled */
static char row_extra[256];       /* am, rma: node 0's endpoint counters over the run (report) */
static uint64_t rma_want_served, rma_want_bytes;   /* target: puts (and bytes) to have served */
/* On sim, each iteration is timed too (pn_now_ns is a load from the simulator's shared
 * clock there): the hardware path is deterministic, but simulated time keeps running
 * while a client process is descheduled (a busy 2-core machine), which only ever
 * adds. Reported: the fastest iteration for pingpong (each iteration contains the
 * whole round trip), the median for pairwise and barrier (a node that fell behind
 * finds its peer's message waiting, or the others already in the barrier, and catches
 * up in one short iteration); the barrier's hardware path from trace records. */
static int per_iter, on_sim;
static uint64_t *samples;
static unsigned nsamples;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double median_ns(void)
{
	if (!nsamples)
		return -1;
	qsort(samples, nsamples, sizeof(*samples), cmp_u64);
	return nsamples & 1 ? (double)samples[nsamples / 2]
			    : (samples[nsamples / 2 - 1] + samples[nsamples / 2]) / 2.0;
}

/* After median_ns() (sorted): the fastest iteration. */
static double min_ns(void)
{
	return nsamples ? (double)samples[0] : -1;
}

static inline void sample(uint64_t *last, unsigned i, unsigned warm)
{
	uint64_t now;
	if (!per_iter)
		return;
	now = pn_now_ns(h);
	if (i >= warm)
		samples[nsamples++] = now - *last;
	*last = now;
}

/* ---- one message at the HAL level: PIO up to the threshold, DMA above ---------------- */

static int hal_send(unsigned dst, size_t n)
{
	return pn_send(h, dst, ctx, n, sbuf, n);   /* sbuf is registered: DMA in place */
}

static int hal_recv(size_t n)
{
	size_t got = 0;
	for (;;) {
		pn_header_t hd;
		int r = pn_recv_wait(h, &hd, -1);
		if (r < 0)
			return r;
		if (got + hd.length > bufsz)
			return -EMSGSIZE;
		if ((r = pn_recv_body(h, rbuf + got, hd.length)) < 0)
			return r;
		got += hd.length;
		if (hd.flags & PN_FLAG_EOM)
			break;
	}
	return got == n ? 0 : -EPROTO;
}

static int rd_send1(unsigned dst, size_t n)
{
	return pn_rd_send(rd, dst, usbuf, n);
}

static int rd_recv1(unsigned src, size_t n)
{
	size_t len;
	int r = pn_rd_recv(rd, (int)src, urbuf, bufsz, NULL, &len);
	return r < 0 ? r : (len == n ? 0 : -EPROTO);
}

/* A ports send is posted (pn_port_isend) and completed by the next receive or send:
 * in pairwise both nodes send before they receive, and a blocking rendezvous send
 * returns only once the peer has taken the message, so two of them would wait for
 * each other (as MPI_Send above the eager limit would). */
static pn_port_req_t *psreq;

static int port_send_done(void)
{
	pn_port_status_t st;
	int r = psreq ? pn_port_wait(port, &psreq, &st, -1) : 1;
	return r == 1 ? 0 : (r < 0 ? r : -EPROTO);
}

static int port_send1(unsigned dst, size_t n)
{
	int r = port_send_done();
	return r < 0 ? r : pn_port_isend(port, dst, PORT_CTX, 0, 0, psbuf, n, &psreq);
}

static int port_recv1(unsigned src, size_t n)
{
	pn_port_status_t st;
	int r = pn_port_recv(port, (int)src, PORT_CTX, 0, 0, 0, prbuf, bufsz, &st, -1);
	if (r >= 0 && (size_t)r != n)
		r = -EPROTO;
	return r < 0 ? r : port_send_done();
}

/* ---- active messages and RMA (pn_am.h) ------------------------------------------------ */

enum { AMB_REQ = 1, AMB_REP = 2, AMB_KEY = 3, AMB_DONE = 4 };
static unsigned long am_done;     /* AMB_DONE requests received */

static void amb_req(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)arg;
	am_handled++;
	am_last_len = len;
	if (am_echo && pn_am_reply(t, AMB_REP, a, na, p, len) == 0)
		am_owed++;
}

static void amb_rep(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)t, (void)a, (void)na, (void)p, (void)arg;
	am_handled++;
	am_last_len = len;
}

static void amb_key(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)t, (void)p, (void)len, (void)arg;
	if (na == 1)
		am_peer_key = a[0];
}

static void amb_done(pn_am_token_t *t, const uint64_t *a, unsigned na, void *p, size_t len, void *arg)
{
	(void)t, (void)a, (void)na, (void)p, (void)len, (void)arg;
	am_done++;
}

/* After a measurement (untimed): both nodes serve until the other is through, so that
 * a node does not stop calling the library while its last answer (a rendezvous reply)
 * still needs it. */
static int am_finish(unsigned peer)
{
	static unsigned long want;   /* one DONE per finish, which may arrive before it */
	int r = pn_am_request(am, peer, PORT_CTX, AMB_DONE, NULL, 0, NULL, 0);
	want++;
	while (r >= 0 && am_done < want)
		r = pn_am_poll(am);
	return r < 0 ? r : pn_am_flush(am, -1);
}

static int am_send1(unsigned dst, size_t n)
{
	if (am_owed) {   /* pingpong's answer: the handler has replied already */
		am_owed--;
		return 0;
	}
	return pn_am_request(am, dst, PORT_CTX, AMB_REQ, NULL, 0, psbuf, n);   /* no arguments */
}

static int am_recv1(unsigned src, size_t n)
{
	(void)src;
	while (am_handled == am_taken) {
		int r = pn_am_poll(am);
		if (r < 0)
			return r;
	}
	am_taken++;
	return am_last_len == n ? 0 : -EPROTO;   /* every message of a run has n bytes */
}

static int rma_send1(unsigned dst, size_t n)
{
	if (!rma_init)
		return 0;   /* the target: its answer (RMAACK) went while it served */
	return pn_rma_put(am, dst, PORT_CTX, dst == me ? am_my_key : am_peer_key, 0, psbuf, n,
			  rma_rt ? &rma_q : NULL);
}

static int rma_recv1(unsigned src, size_t n)
{
	(void)src;
	if (rma_init) {
		int r = rma_rt ? pn_rma_wait(am, &rma_q, -1) : pn_rma_flush(am);
		return r < 0 ? r : 0;
	}
	rma_want_served++;
	rma_want_bytes += n;
	for (;;) {   /* serve until this put is in the region */
		pn_am_stats_t st;
		int r = pn_am_poll(am);
		if (r < 0 || (r = pn_am_stats(am, &st)) < 0)
			return r;
		if (st.rma_served >= rma_want_served && st.rma_bytes_in >= rma_want_bytes)
			return 0;
	}
}

struct layer {
	const char *name;
	int (*send)(unsigned dst, size_t n);
	int (*recv)(unsigned src, size_t n);
};

static int hal_recv_from(unsigned src, size_t n)
{
	(void)src;
	return hal_recv(n);
}

static const struct layer LAYERS[] = {
	{"hal", hal_send, hal_recv_from},
	{"rawdata", rd_send1, rd_recv1},
	{"ports", port_send1, port_recv1},
	{"am", am_send1, am_recv1},
	{"rma", rma_send1, rma_recv1},
};

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

static unsigned iters_for(size_t n)
{
	double it = (64.0 * 1024 * 1024) / (double)(n + 64);
	if (it < 8)
		it = 8;
	if (it > 20000)
		it = 20000;
	it *= scale;
	return it < 2 ? 2 : (unsigned)it;
}

static void report(const char *bench, const char *layer, size_t n, unsigned it, uint64_t ns, uint64_t wall,
		   uint64_t cyc, double latency, double mbps)
{
	double med = median_ns();
	say("{\"bench\": \"%s\", \"layer\": \"%s\", \"backend\": \"%s\", \"bytes\": %zu, \"iters\": %u, "
	    "\"ns_per_iter\": %.1f, \"median_ns_per_iter\": %.1f, \"min_ns_per_iter\": %.1f, "
	    "\"wall_ns_per_iter\": %.1f, \"cycles_per_iter\": %.1f, \"latency_ns\": %.1f, \"MBps\": %.2f%s}",
	    bench, layer, pn_backend_name(h), n, it, (double)ns / it, med, min_ns(), (double)wall / it,
	    (double)cyc / it, latency, mbps, row_extra);
	row_extra[0] = 0;
}

#define TRY(x)                                                                          \
	do {                                                                            \
		int r_ = (x);                                                           \
		if (r_ < 0) {                                                           \
			say("FAIL bench: %s returned %d (%s)", #x, r_, pn_strerror(r_)); \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

static void run(const char *bench, const struct layer *L, size_t n)
{
	unsigned it = iters_for(n), warm = it / 10 + 1;
	unsigned peer = 1 - me;
	uint64_t t0 = 0, w0 = 0, c0 = 0, ns, wall, cyc, last = 0;

	nsamples = 0;
	am_echo = !strcmp(bench, "pingpong");
	rma_rt = strcmp(bench, "stream") != 0;
	rma_init = me == 0 || !strcmp(bench, "pairwise");
	int is_am = L->send == am_send1 || L->send == rma_send1;
	pn_am_stats_t st0 = {0}, st1;
	if (L->send == rma_send1)
		memset(prbuf, 0, n);   /* the region: the peer's puts must fill it */
	pn_barrier(h);
	if (me > 1)
		return;
	if (is_am) {   /* what the target has served so far (it polls only in this run's calls) */
		TRY(pn_am_stats(am, &st0));
		rma_want_served = st0.rma_served;
		rma_want_bytes = st0.rma_bytes_in;
	}
	if (!strcmp(bench, "pairwise")) {
		for (unsigned i = 0; i < warm + it; i++) {
			if (i == warm) {
				t0 = pn_now_ns(h);
				w0 = t_now_ns();
				c0 = pn_cycles(h);
			}
			sample(&last, i, warm + 1);
			TRY(L->send(peer, n));
			TRY(L->recv(peer, n));
		}
		sample(&last, warm + it, warm + 1);
	} else if (!strcmp(bench, "pingpong")) {
		for (unsigned i = 0; i < warm + it; i++) {
			if (i == warm) {
				t0 = pn_now_ns(h);
				w0 = t_now_ns();
				c0 = pn_cycles(h);
			}
			sample(&last, i, warm + 1);
			if (me == 0) {
				TRY(L->send(peer, n));
				TRY(L->recv(peer, n));
			} else {
				TRY(L->recv(peer, n));
				TRY(L->send(peer, n));
			}
		}
		sample(&last, warm + it, warm + 1);
	} else { /* stream: the mean (messages overlap) */
		for (int round = 0; round < 2; round++) {   /* a warm-up round, then the measured one */
			unsigned cnt = round ? it : warm;
			if (round) {
				t0 = pn_now_ns(h);
				w0 = t_now_ns();
				c0 = pn_cycles(h);
			}
			if (me == 0) {
				for (unsigned i = 0; i < cnt; i++)
					TRY(L->send(peer, n));
				TRY(L->recv(peer, 0));
			} else {
				for (unsigned i = 0; i < cnt; i++)
					TRY(L->recv(peer, n));
				TRY(L->send(peer, 0));
			}
		}
	}
	ns = pn_now_ns(h) - t0;
	wall = t_now_ns() - w0;
	cyc = pn_cycles(h) - c0;
	if (is_am) {
		TRY(pn_am_stats(am, &st1));
		snprintf(row_extra, sizeof(row_extra), ", \"am_requests\": %llu, \"am_handled_replies\": %llu, "
			 "\"rma_puts\": %llu, \"am_window_waits\": %llu",
			 (unsigned long long)(st1.requests - st0.requests),
			 (unsigned long long)(st1.handled_replies - st0.handled_replies),
			 (unsigned long long)(st1.rma_puts - st0.rma_puts),
			 (unsigned long long)(st1.window_waits - st0.window_waits));
		TRY(am_finish(peer));
	}
	if (L->send == rma_send1 && (me == 1 || !strcmp(bench, "pairwise")) &&
	    pat_check(prbuf, n, peer, 0) != (size_t)-1) {
		say("FAIL bench: rma %s %zu B: the region does not hold the peer's data", bench, n);
		exit(1);
	}
	if (L->send == port_send1)
		TRY(port_send_done());   /* the last posted send, before the next barrier */
	TRY(pn_tx_wait(h));
	if (me != 0)
		return;
	double med = median_ns(), per = (double)ns / it;   /* one iteration */
	if (nsamples && on_sim)
		per = !strcmp(bench, "pairwise") ? med : min_ns();
	if (per <= 0)
		per = 0.001;
	if (!strcmp(bench, "pairwise"))
		report(bench, L->name, n, it, ns, wall, cyc, per, n * 1e3 / per);
	else if (!strcmp(bench, "pingpong"))
		report(bench, L->name, n, it, ns, wall, cyc, per / 2, n * 1e3 / (per / 2));
	else
		report(bench, L->name, n, it, ns, wall, cyc, (double)ns / it, (double)n * it * 1e3 / (double)ns);
}

/* On sim: the hardware path of isolated episodes from the simulator's trace records,
 * deterministic: from the last node's BARRIER store leaving the CPU (its bus cycle
 * minus the PCIe model's MMIO write latency) to the last status block showing the
 * episode done in host memory. After each episode the other nodes wait for node 0's
 * go (a 0-byte PIO packet) so that no one enters the next and overwrites its record
 * before node 0 has read them. Returns the median in ns (sorted in v[]), or -1. */
static double barrier_trace(unsigned episodes, double *lo, double *hi)
{
	pn_sim_info_t info;
	pn_sim_trace_t t;
	uint64_t *v = calloc(episodes, sizeof(*v));
	unsigned k = 0;

	if (!v || pn_sim_info(h, &info) < 0) {
		free(v);
		return -1;
	}
	for (unsigned e = 0; e < episodes; e++) {
		TRY(pn_barrier(h));
		if (me == 0) {
			uint64_t want, enter = 0, done = 0;
			TRY(pn_sim_trace(h, 0, ctx, &t));
			want = t.barrier_done_count;
			for (unsigned n = 0; n < N; n++) {
				for (;;) {   /* every node's status write of this episode is visible */
					TRY(pn_sim_trace(h, n, ctx, &t));
					if (t.barrier_done_count >= want)
						break;
					pn_progress(h);
				}
				if (t.barrier_enter_cycle > enter)
					enter = t.barrier_enter_cycle;
				if (t.barrier_done_cycle > done)
					done = t.barrier_done_cycle;
			}
			v[k++] = done - enter + info.mmio_write_cycles;
			for (unsigned n = 1; n < N; n++)
				TRY(pn_send_pio(h, n, ctx, 0, NULL, 0));
		} else {
			pn_header_t hd;
			TRY(pn_recv_wait(h, &hd, -1));
			TRY(pn_recv_skip(h));
		}
	}
	TRY(pn_tx_wait(h));
	double med = -1;
	if (k) {
		qsort(v, k, sizeof(*v), cmp_u64);
		double ns = 1e9 / info.clk_hz;
		med = (k & 1 ? (double)v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2.0) * ns;
		*lo = v[0] * ns;
		*hi = v[k - 1] * ns;
	}
	free(v);
	return med;
}

static void barriers(unsigned count)
{
	uint64_t t0, w0, c0, ns, wall, cyc, last;
	unsigned warm = count / 10 + 1;
	double path = -1, path_lo = -1, path_hi = -1;

	nsamples = 0;
	for (unsigned i = 0; i < warm; i++)
		TRY(pn_barrier(h));
	t0 = pn_now_ns(h);
	w0 = t_now_ns();
	c0 = pn_cycles(h);
	last = t0;
	for (unsigned i = 0; i < count; i++) {
		TRY(pn_barrier(h));
		sample(&last, i + 1, 1);
	}
	ns = pn_now_ns(h) - t0;
	wall = t_now_ns() - w0;
	cyc = pn_cycles(h) - c0;
	/* Back to back: the median episode on sim (a node descheduled after an episode
	 * makes the next one look short, so not the fastest), the mean natively. */
	double med = median_ns(), per = nsamples && on_sim ? med : (double)ns / count;
	if (on_sim)
		path = barrier_trace(count < 20 ? count : 20, &path_lo, &path_hi);
	if (me == 0)
		say("{\"bench\": \"barrier\", \"layer\": \"hal\", \"backend\": \"%s\", \"nodes\": %u, "
		    "\"iters\": %u, \"ns_per_iter\": %.1f, \"median_ns_per_iter\": %.1f, \"min_ns_per_iter\": %.1f, "
		    "\"wall_ns_per_iter\": %.1f, \"cycles_per_iter\": %.1f, \"latency_ns\": %.1f, "
		    "\"hw_path_ns\": %.1f, \"hw_path_min_ns\": %.1f, \"hw_path_max_ns\": %.1f}",
		    pn_backend_name(h), N, count, (double)ns / count, med, min_ns(), (double)wall / count,
		    (double)cyc / count, per, path, path_lo, path_hi);
}

static void overhead(const struct layer *L, size_t n)
{
	unsigned it = (unsigned)(200000 * scale) + 2, warm = it / 10 + 1;
	uint64_t t0 = 0, w0 = 0, c0 = 0;
	nsamples = 0;
	am_echo = 0;
	rma_rt = rma_init = 1;
	pn_barrier(h);
	if (me != 0)
		return;
	for (unsigned i = 0; i < warm + it; i++) {
		if (i == warm) {
			t0 = pn_now_ns(h);
			w0 = t_now_ns();
			c0 = pn_cycles(h);
		}
		TRY(L->send(me, n));
		TRY(L->recv(me, n));
	}
	uint64_t ns = pn_now_ns(h) - t0;
	report("overhead", L->name, n, it, ns, t_now_ns() - w0, pn_cycles(h) - c0, (double)ns / it,
	       n * 1e3 / ((double)ns / it));
}

int main(int argc, char **argv)
{
	const char *layer = "all", *benches = "all";
	size_t lo = 1, hi = 1 << 20;
	long nbarriers = -1;
	pn_open_opts_t o;
	int r;

	pn_open_opts_init(&o);
	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--backend") && a + 1 < argc)
			o.backend = argv[++a];
		else if (!strcmp(argv[a], "--layer") && a + 1 < argc)
			layer = argv[++a];
		else if (!strcmp(argv[a], "--bench") && a + 1 < argc)
			benches = argv[++a];
		else if (!strcmp(argv[a], "--min") && a + 1 < argc)
			lo = strtoul(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--max") && a + 1 < argc)
			hi = strtoul(argv[++a], NULL, 0);
		else if (!strcmp(argv[a], "--scale") && a + 1 < argc)
			scale = atof(argv[++a]);
		else if (!strcmp(argv[a], "--per-iter"))   /* time every iteration on sw too */
			per_iter = 1;
		else if (!strcmp(argv[a], "--barriers") && a + 1 < argc)
			nbarriers = strtol(argv[++a], NULL, 0);
		else {
			fprintf(stderr, "usage: %s [--backend B] [--layer hal,rawdata,ports,am,rma|all] "
					"[--bench pairwise,pingpong,stream,overhead,barrier|all] [--min N] [--max N] "
					"[--scale F] [--barriers N] [--per-iter]\n", argv[0]);
			return 2;
		}
	}
	if (!(scale > 0) || lo > hi || hi > PN_RD_MAX_MSG || nbarriers == 0 || nbarriers > 100000000) {
		say("FAIL bench: bad arguments (--scale > 0, --min <= --max <= %u, 0 < --barriers <= 1e8)",
		    PN_RD_MAX_MSG);
		return 2;
	}
	for (const char *p = layer; strcmp(layer, "all"); ) {   /* every name in the list is known */
		size_t len = strcspn(p, ",");
		int known = 0;
		for (size_t l = 0; l < sizeof(LAYERS) / sizeof(LAYERS[0]); l++)
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
	if ((r = pn_rd_open(&rd, &o)) < 0) {
		say("FAIL open: %d (%s)", r, pn_strerror(r));
		return 1;
	}
	o.ctx = HAL_CTX;
	if ((r = pn_open(&h, &o)) < 0) {
		say("FAIL open: %d (%s)", r, pn_strerror(r));
		return 1;
	}
	me = (unsigned)pn_node_id(h);
	on_sim = !strcmp(pn_backend_name(h), "sim");
	per_iter |= on_sim;
	size_t cap = (size_t)(20000 * scale) + 2;   /* iters_for()'s largest */
	if (nbarriers > 0 && (size_t)nbarriers >= cap)
		cap = (size_t)nbarriers + 1;
	samples = calloc(cap, sizeof(*samples));
	if (!samples)
		return 1;
	N = (unsigned)pn_num_nodes(h);
	ctx = (unsigned)pn_ctx_id(h);
	if (strstr(benches, "barrier")) {
		unsigned cnt = nbarriers > 0 ? (unsigned)nbarriers : (unsigned)(2000 * scale) + 2;
		pn_barrier(h);
		barriers(cnt);
		pn_close(h);
		pn_rd_close(rd);
		return 0;
	}
	if (N < 2) {
		say("FAIL bench: needs 2 nodes");
		return 1;
	}
	bufsz = hi > 256 ? hi : 256;
	TRY(pn_dma_alloc(h, bufsz, (void **)&sbuf));
	TRY(pn_dma_alloc(h, bufsz, (void **)&rbuf));
	usbuf = malloc(bufsz);
	urbuf = malloc(bufsz);
	if (!usbuf || !urbuf)
		return 1;
	pat_fill(sbuf, bufsz, me, 0);
	pat_fill(usbuf, bufsz, me, 0);
	int want_am = layer_named(layer, "am") || layer_named(layer, "rma");
	if (layer_named(layer, "ports") || want_am) {
		pn_port_opts_t po;
		pn_port_opts_init(&po);
		po.hal = o;
		po.hal.ctx = PORT_CTX;
		if ((r = pn_port_open(&port, &po)) < 0) {
			say("FAIL open port: %d (%s)", r, pn_strerror(r));
			return 1;
		}
		TRY(pn_dma_alloc(pn_port_hal(port), bufsz, (void **)&psbuf));
		TRY(pn_dma_alloc(pn_port_hal(port), bufsz, (void **)&prbuf));
		pat_fill(psbuf, bufsz, me, 0);
	}
	if (want_am) {
		pn_am_opts_t ao;
		pn_am_opts_init(&ao);
		if (hi > PN_AM_DEFAULT_MAX_PAYLOAD)   /* am's stream of --max byte requests */
			ao.max_payload = (long)hi;
		if ((r = pn_am_open(&am, port, &ao)) < 0) {
			say("FAIL pn_am_open: %d (%s)", r, pn_strerror(r));
			return 1;
		}
		TRY(pn_am_register(am, AMB_REQ, amb_req, NULL));
		TRY(pn_am_register(am, AMB_REP, amb_rep, NULL));
		TRY(pn_am_register(am, AMB_KEY, amb_key, NULL));
		TRY(pn_am_register(am, AMB_DONE, amb_done, NULL));
		TRY(pn_rma_register(am, prbuf, bufsz, PN_RMA_WRITE, &am_my_key));
	}
	pn_barrier(h);
	if (am && me < 2) {   /* every endpoint is open: tell the peer our region's key */
		TRY(pn_am_request(am, 1 - me, PORT_CTX, AMB_KEY, &am_my_key, 1, NULL, 0));
		while (!am_peer_key)
			TRY(pn_am_poll(am));
		TRY(pn_am_flush(am, -1));
	}
	pn_barrier(h);

	const char *names[] = {"pairwise", "pingpong", "stream"};
	for (size_t l = 0; l < sizeof(LAYERS) / sizeof(LAYERS[0]); l++) {
		const struct layer *L = &LAYERS[l];
		if (!layer_named(layer, L->name))
			continue;
		for (size_t b = 0; b < 3; b++) {
			if (strcmp(benches, "all") && !strstr(benches, names[b]))
				continue;
			for (size_t n = lo; n <= hi; n *= 2)
				run(names[b], L, n);
		}
		if (!strcmp(benches, "all") || strstr(benches, "overhead")) {
			size_t sz[] = {0, 8, 64, 256};
			for (size_t i = 0; i < 4; i++)
				overhead(L, sz[i]);
		}
	}
	pn_barrier(h);
	if (am)
		TRY(pn_am_close(am));
	if (port) {
		pn_dma_free(pn_port_hal(port), psbuf);
		pn_dma_free(pn_port_hal(port), prbuf);
		pn_port_close(port);
	}
	pn_dma_free(h, sbuf);
	pn_dma_free(h, rbuf);
	free(usbuf);
	free(urbuf);
	pn_close(h);
	pn_rd_close(rd);
	return 0;
}
