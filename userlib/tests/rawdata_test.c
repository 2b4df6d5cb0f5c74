/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rawdata_test: rawdata over any backend, one process per node (pn_launch).
 *
 *   pn_launch -n N -- rawdata_test CASE [BACKEND]
 *
 * CASE: sizes, emsgsize, many_to_one, all_to_all, from_given, huge, inflight, kill (the kill case
 * wants `pn_launch -k N-1:300:phase-b -r 500`). Prints "ok CASE ..." or "FAIL CASE:
 * ..." and exits 0 only on success.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_rawdata.h"
#include "tutil.h"

static pn_rd_t *rd;
static unsigned me, N, mtu;

static uint32_t seed_of(unsigned src, unsigned dst, unsigned seq)
{
	return src * 7919u + dst * 104729u + seq * 31u + 1;
}

/* Receive one message from `src` and check it is message `seq` of src -> me. */
static int expect_msg(int src, unsigned want_src, unsigned seq, size_t want_len, uint8_t *buf, size_t cap)
{
	unsigned s = 9999;
	size_t len = 0;
	int r = pn_rd_recv(rd, src, buf, cap, &s, &len);
	size_t bad;
	CHECK(r >= 0, "pn_rd_recv(%d) returned %d (%s)", src, r, pn_strerror(r));
	CHECK(s == want_src, "message from %u, expected %u", s, want_src);
	CHECK(len == want_len && (size_t)r == len, "length %zu (rc %d), expected %zu (seq %u)", len, r, want_len,
	      seq);
	bad = pat_check(buf, len, seed_of(want_src, me, seq), 0);
	CHECK(bad == (size_t)-1, "message %u from %u (%zu bytes) differs at byte %zu", seq, want_src, len, bad);
	return 0;
}

static int send_msg(unsigned dst, unsigned seq, size_t len, uint8_t *buf)
{
	int r;
	pat_fill(buf, len, seed_of(me, dst, seq), 0);
	r = pn_rd_send(rd, dst, buf, len);
	CHECK(r == 0, "pn_rd_send(%u, %zu bytes) returned %d (%s)", dst, len, r, pn_strerror(r));
	return 0;
}

/* ---- sizes: 0, 1, MTU-1, MTU, MTU+1, PIO threshold edges, 1 MiB, several chunks ---------- */

static int case_sizes(void)
{
	size_t sizes[] = {0, 1, mtu - 1, mtu, mtu + 1, 256, 257, 1 << 20, 9 * (size_t)PN_RD_CHUNK + 5};
	unsigned ns = sizeof(sizes) / sizeof(sizes[0]);
	size_t cap = 0;
	uint8_t *buf;
	for (unsigned i = 0; i < ns; i++)
		cap = sizes[i] > cap ? sizes[i] : cap;
	buf = malloc(cap);
	CHECK(buf, "malloc");

	if (me == 0) {
		for (unsigned i = 0; i < ns; i++)
			if (send_msg(1, i, sizes[i], buf) < 0)
				return -1;
		for (unsigned i = 0; i < ns; i++)   /* to ourselves: 1 MiB is more than our ring */
			if (send_msg(0, i, sizes[i], buf) < 0)
				return -1;
		for (unsigned i = 0; i < ns; i++)
			if (expect_msg(0, 0, i, sizes[i], buf, cap) < 0)
				return -1;
		for (unsigned i = 0; i < ns; i++)   /* node 1's echoes, sent from registered memory */
			if (expect_msg(PN_ANY, 1, 100 + i, sizes[i], buf, cap) < 0)
				return -1;
		say("ok sizes %u sizes to node 1, to itself and back, 0 .. %zu bytes", ns, cap);
	} else if (me == 1) {
		uint8_t *reg;
		EXPECT_RC(pn_dma_alloc(pn_rd_hal(rd), cap, (void **)&reg), 0);
		for (unsigned i = 0; i < ns; i++) {
			if (expect_msg(0, 0, i, sizes[i], buf, cap) < 0)
				return -1;
			if (send_msg(0, 100 + i, sizes[i], reg) < 0)
				return -1;
		}
		EXPECT_RC(pn_dma_free(pn_rd_hal(rd), reg), 0);
		say("ok sizes received and echoed %u messages", ns);
	} else {
		say("ok sizes (idle)");
	}
	free(buf);
	return 0;
}

/* ---- large messages: RD_HUGE_MB (default 64) MiB from plain memory through the bounce
 * buffers, and 20 MiB from registered memory (more than one descriptor, in place) ---- */

static int case_huge(void)
{
	size_t big = (size_t)t_env_long("RD_HUGE_MB", 64) << 20, reg = (size_t)20 << 20;
	uint64_t t0 = t_now_ns();
	if (me == 0) {
		uint8_t *buf = malloc(big), *r;
		CHECK(buf, "malloc");
		EXPECT_RC(pn_dma_alloc(pn_rd_hal(rd), reg, (void **)&r), 0);
		if (send_msg(1, 1, big, buf) < 0 || send_msg(1, 2, reg, r) < 0)
			return -1;
		EXPECT_RC(pn_dma_free(pn_rd_hal(rd), r), 0);
		free(buf);
		say("ok huge sent %zu MiB and %zu MiB", big >> 20, reg >> 20);
	} else if (me == 1) {
		uint8_t *buf = malloc(big);
		CHECK(buf, "malloc");
		if (expect_msg(0, 0, 1, big, buf, big) < 0 || expect_msg(0, 0, 2, reg, buf, big) < 0)
			return -1;
		free(buf);
		say("ok huge received %zu MiB and %zu MiB intact in %.0f ms", big >> 20, reg >> 20,
		    (t_now_ns() - t0) / 1e6);
	} else {
		say("ok huge (idle)");
	}
	return 0;
}

/* ---- errors, -EMSGSIZE keeps the message, peek --------------------------------------------- */

static int case_emsgsize(void)
{
	uint8_t buf[8192];
	unsigned s = 0;
	size_t len = 0;

	memset(buf, 0, sizeof(buf));
	EXPECT_RC(pn_rd_send(rd, N, buf, 8), -EHOSTUNREACH);
	EXPECT_RC(pn_rd_send(rd, (unsigned)-1, buf, 8), -EHOSTUNREACH);
	EXPECT_RC(pn_rd_send(rd, me, buf, (size_t)PN_RD_MAX_MSG + 1), -EMSGSIZE);
	EXPECT_RC(pn_rd_send(rd, me, buf, (size_t)-1), -EINVAL);
	EXPECT_RC(pn_rd_send(rd, me, NULL, 5), -EINVAL);
	EXPECT_RC(pn_rd_send(NULL, me, buf, 5), -EINVAL);
	EXPECT_RC(pn_rd_recv(rd, (int)N, buf, sizeof(buf), &s, &len), -EHOSTUNREACH);
	/* a negative source other than PN_ANY is a bad argument, not an unknown node */
	EXPECT_RC(pn_rd_recv(rd, -2, buf, sizeof(buf), &s, &len), -EINVAL);
	EXPECT_RC(pn_rd_recv(rd, -5, buf, sizeof(buf), &s, &len), -EINVAL);
	EXPECT_RC(pn_rd_recv_timeout(rd, -5, buf, sizeof(buf), &s, &len, 0), -EINVAL);
	EXPECT_RC(pn_rd_peek(rd, -5, &s, &len), -EINVAL);
	EXPECT_RC(pn_rd_send(rd, N, NULL, 8), -EINVAL);   /* the argument before the route */
	EXPECT_RC(pn_rd_recv(rd, PN_ANY, NULL, 10, &s, &len), -EINVAL);
	EXPECT_RC(pn_rd_recv(NULL, PN_ANY, buf, 10, &s, &len), -EINVAL);
	EXPECT_RC(pn_rd_peek(rd, (int)N, &s, &len), -EHOSTUNREACH);

	if (me == 0) {
		uint8_t *big = malloc(1 << 20);
		CHECK(big, "malloc");
		if (send_msg(1, 1, 5000, buf) < 0 || send_msg(1, 2, 0, buf) < 0 || send_msg(1, 3, 1 << 20, big) < 0)
			return -1;
		free(big);
		EXPECT_RC(pn_rd_recv_timeout(rd, PN_ANY, buf, sizeof(buf), &s, &len, 0), -ETIMEDOUT);
		EXPECT_RC(pn_rd_recv_timeout(rd, PN_ANY, buf, sizeof(buf), &s, &len, 5000000), -ETIMEDOUT);
		say("ok emsgsize sender");
	} else if (me == 1) {
		uint64_t t0 = t_now_ns();
		int r;
		while ((r = pn_rd_peek(rd, 0, &s, &len)) == 0) {
			CHECK(t_now_ns() - t0 < 20000000000ull, "no message within 20 s");
			t_sleep_us(200);
		}
		CHECK(r == 1 && s == 0 && len == 5000, "peek: rc %d src %u len %zu", r, s, len);
		EXPECT_RC(pn_rd_peek(rd, 1, &s, &len), 0);   /* nothing from node 1 */
		s = 77;
		len = 0;
		EXPECT_RC(pn_rd_recv(rd, PN_ANY, buf, 100, &s, &len), -EMSGSIZE);
		CHECK(s == 0 && len == 5000, "-EMSGSIZE reported src %u len %zu", s, len);
		EXPECT_RC(pn_rd_recv(rd, 0, buf, 4999, &s, &len), -EMSGSIZE);
		if (expect_msg(0, 0, 1, 5000, buf, 5000) < 0)   /* still there, now it fits */
			return -1;
		s = 77;
		len = 77;
		EXPECT_RC(pn_rd_recv(rd, 0, NULL, 0, &s, &len), 0);   /* the empty message */
		CHECK(s == 0 && len == 0, "empty message: src %u len %zu", s, len);
		/* 1 MiB received with a 2 us time limit per call: a call that gives up while the
		 * message is being placed into its buffer must hand it over to the queue. */
		uint8_t *big = malloc(1 << 20);
		unsigned tries = 0;
		CHECK(big, "malloc");
		while ((r = pn_rd_recv_timeout(rd, 0, big, 1 << 20, &s, &len, 2000)) == -ETIMEDOUT) {
			memset(big, 0, 1 << 20);   /* the caller owns its buffer again */
			tries++;
		}
		CHECK(r == 1 << 20 && len == 1 << 20 && s == 0, "rc %d len %zu", r, len);
		CHECK(pat_check(big, len, seed_of(0, 1, 3), 0) == (size_t)-1, "1 MiB after %u timeouts", tries);
		free(big);
		EXPECT_RC(pn_rd_recv_timeout(rd, PN_ANY, buf, sizeof(buf), &s, &len, 0), -ETIMEDOUT);
		say("ok emsgsize too-small buffer kept the message; peek, retry and empty message work; "
		    "1 MiB intact after %u timeouts", tries);
	} else {
		say("ok emsgsize (idle)");
	}
	return 0;
}

/* ---- traffic patterns --------------------------------------------------------------------- */

static const size_t MIX[] = {0, 8, 100, 1024, 1500, 5000, 70000, 8, 300000, 16};
#define NMIX (sizeof(MIX) / sizeof(MIX[0]))
#define MIX_MAX 300000

static int case_many_to_one(void)
{
	const unsigned M = (unsigned)t_env_long("RD_MESSAGES", 200);
	uint8_t *buf = malloc(MIX_MAX);
	CHECK(buf, "malloc");
	if (me != 0) {
		for (unsigned k = 0; k < M; k++)
			if (send_msg(0, k, MIX[(k + me) % NMIX], buf) < 0)
				return -1;
		say("ok many_to_one sent %u messages", M);
	} else {
		unsigned *next = calloc(N, sizeof(unsigned));
		uint64_t bytes = 0, t0 = t_now_ns();
		CHECK(next, "calloc");
		for (unsigned i = 0; i < (N - 1) * M; i++) {
			unsigned s = 0;
			size_t len = 0;
			int r = pn_rd_recv(rd, PN_ANY, buf, MIX_MAX, &s, &len);
			CHECK(r >= 0 && s >= 1 && s < N, "recv rc %d src %u", r, s);
			CHECK(next[s] < M, "too many messages from %u", s);
			CHECK(len == MIX[(next[s] + s) % NMIX], "node %u message %u: %zu bytes", s, next[s], len);
			CHECK(pat_check(buf, len, seed_of(s, 0, next[s]), 0) == (size_t)-1, "node %u message %u content",
			      s, next[s]);
			next[s]++;
			bytes += len;
		}
		say("ok many_to_one %u messages from %u senders intact and in order, %.1f MB in %.1f ms",
		    (N - 1) * M, N - 1, bytes / 1e6, (t_now_ns() - t0) / 1e6);
		free(next);
	}
	free(buf);
	return 0;
}

/* ---- inflight: a stream of small DMA messages through the bounce ring ------------------ */

/* Node 1 sends RD_MESSAGES messages above the PIO threshold to node 0 without waiting for
 * their completions (the bounce ring keeps many in flight; a 100 KB one now and then makes
 * the ring wrap and fill); it reports the most descriptors it saw posted but not completed
 * right after a send returned. Node 0 checks every message: exactly once, in order, intact. */
static const size_t INF[] = {300, 1024, 4096, 257, 2000, 512, 4096, 100000, 700, 4095};
#define NINF (sizeof(INF) / sizeof(INF[0]))

static int case_inflight(void)
{
	const unsigned M = (unsigned)t_env_long("RD_MESSAGES", 300);
	uint8_t *buf = malloc(100000);
	pn_hal_t *h = pn_rd_hal(rd);
	CHECK(buf, "malloc");
	if (me == 1) {
		uint32_t most = 0;
		for (unsigned k = 0; k < M; k++) {
			pn_status_t st;
			if (send_msg(0, k, INF[k % NINF], buf) < 0)
				return -1;
			CHECK(pn_status(h, &st) == 0, "pn_status");
			if (pn_tx_posted(h) - st.tx_done > most)
				most = pn_tx_posted(h) - st.tx_done;
		}
		say("ok inflight sent %u messages, up to %u in flight", M, most);
	} else if (me == 0) {
		/* Start late, so that the sender's descriptors wait for receive room whatever the
		 * machine's load: the ring must hold many (on an idle sw NIC each one could
		 * complete before the next is posted). */
		t_sleep_us(300000);
		for (unsigned k = 0; k < M; k++)
			if (expect_msg(1, 1, k, INF[k % NINF], buf, 100000) < 0)
				return -1;
		{
			unsigned src;
			size_t len;
			int r = pn_rd_recv_timeout(rd, PN_ANY, buf, 100000, &src, &len, 200000000);
			CHECK(r == -ETIMEDOUT, "a message more than sent (rc %d, from %u, %zu bytes)", r, src, len);
		}
		say("ok inflight received %u messages once each, in order", M);
	}
	free(buf);
	return 0;
}

static int case_all_to_all(void)
{
	const unsigned M = (unsigned)t_env_long("RD_MESSAGES", 40);
	uint8_t *buf = malloc(MIX_MAX);
	unsigned *next = calloc(N, sizeof(unsigned));
	CHECK(buf && next, "malloc");
	for (unsigned k = 0; k < M; k++)
		for (unsigned j = 1; j < N; j++) {
			unsigned d = (me + j) % N;
			if (send_msg(d, k, MIX[(k + me + d) % NMIX], buf) < 0)
				return -1;
		}
	for (unsigned i = 0; i < (N - 1) * M; i++) {
		unsigned s = 0;
		size_t len = 0;
		int r = pn_rd_recv(rd, PN_ANY, buf, MIX_MAX, &s, &len);
		CHECK(r >= 0 && s < N && s != me, "recv rc %d src %u", r, s);
		CHECK(next[s] < M, "too many messages from %u", s);
		CHECK(len == MIX[(next[s] + s + me) % NMIX], "node %u message %u: %zu bytes", s, next[s], len);
		CHECK(pat_check(buf, len, seed_of(s, me, next[s]), 0) == (size_t)-1, "node %u message %u content", s,
		      next[s]);
		next[s]++;
	}
	say("ok all_to_all sent %u and received %u messages, per-sender order kept", (N - 1) * M, (N - 1) * M);
	free(buf);
	free(next);
	return 0;
}

static int case_from_given(void)
{
	const unsigned M = 100;
	uint8_t *buf = malloc(MIX_MAX);
	CHECK(buf, "malloc");
	if (me >= 2) {
		for (unsigned k = 0; k < M; k++)
			if (send_msg(0, k, MIX[(k + me) % NMIX], buf) < 0)
				return -1;
		if (send_msg(1, 0, 2, buf) < 0)   /* "go": node 0 has all of ours */
			return -1;
		say("ok from_given sent %u messages", M);
	} else if (me == 1) {
		for (unsigned i = 2; i < N; i++) {
			unsigned s;
			size_t len;
			CHECK(pn_rd_recv(rd, PN_ANY, buf, MIX_MAX, &s, &len) == 2 && s >= 2, "bad go");
		}
		for (unsigned k = 0; k < M; k++)
			if (send_msg(0, k, MIX[(k + me) % NMIX], buf) < 0)
				return -1;
		say("ok from_given sent %u messages after the others", M);
	} else {
		pn_rd_stats_t st;
		for (unsigned k = 0; k < M; k++)   /* only node 1's, while the others' pile up */
			if (expect_msg(1, 1, k, MIX[(k + 1) % NMIX], buf, MIX_MAX) < 0)
				return -1;
		EXPECT_RC(pn_rd_stats(rd, &st), 0);
		for (unsigned s = 2; s < N; s++) {
			unsigned src;
			size_t len;
			EXPECT_RC(pn_rd_peek(rd, (int)s, &src, &len), 1);
			CHECK(src == s && len == MIX[s % NMIX], "peek(%u): src %u len %zu", s, src, len);
		}
		for (unsigned s = N - 1; s >= 2; s--)
			for (unsigned k = 0; k < M; k++)
				if (expect_msg((int)s, s, k, MIX[(k + s) % NMIX], buf, MIX_MAX) < 0)
					return -1;
		say("ok from_given %u from node 1 first (%llu others queued meanwhile), then %u from the rest",
		    M, (unsigned long long)st.queued_msgs, (N - 2) * M);
	}
	free(buf);
	return 0;
}

/* ---- a node killed mid-run, and a new process in its place --------------------------------- */

enum { K_PHASE_B = 'B', K_HELLO = 'H', K_ACK = 'A', K_LAST = 1 };
struct khdr {
	uint32_t phase, src, seq, flags;
};
static const size_t KSIZES[] = {64, 3000, 200000, 1 << 20};
#define KMAX ((1 << 20) + 64)

static int ksend(unsigned dst, uint32_t phase, uint32_t seq, uint32_t flags, size_t len, uint8_t *buf)
{
	struct khdr k = {phase, me, seq, flags};
	int r;
	pat_fill(buf, len, seed_of(me, dst, seq), 0);
	memcpy(buf, &k, sizeof(k));
	r = pn_rd_send(rd, dst, buf, len);
	CHECK(r == 0, "pn_rd_send(%u) returned %d (%s)", dst, r, pn_strerror(r));
	return 0;
}

static int krecv(int src, struct khdr *k, unsigned *from, uint8_t *buf)
{
	size_t len = 0;
	int r = pn_rd_recv(rd, src, buf, KMAX, from, &len);
	CHECK(r >= 0 && len >= sizeof(*k), "pn_rd_recv(%d) returned %d, %zu bytes", src, r, len);
	memcpy(k, buf, sizeof(*k));
	CHECK(k->src == *from, "message says it is from %u, came from %u", k->src, *from);
	CHECK(pat_check(buf + sizeof(*k), len - sizeof(*k), seed_of(*from, me, k->seq), sizeof(*k)) == (size_t)-1,
	      "message %c%u from %u (%zu bytes) is corrupt", (char)k->phase, k->seq, *from, len);
	return 0;
}

static int case_kill(void)
{
	const unsigned V = N - 1;   /* the victim */
	uint8_t *buf = malloc(KMAX);
	struct khdr k;
	unsigned from;
	CHECK(buf && N >= 3, "needs 3 nodes");

	if (me == V && !getenv("PARANIC_RESPAWN")) {
		/* The victim: traffic until the launcher kills it. */
		say("phase-b");
		for (uint32_t r = 0;; r++) {
			for (unsigned d = 0; d < V; d++)
				if (ksend(d, K_PHASE_B, r, 0, KSIZES[(r + d) % 4], buf) < 0)
					return -1;
			for (unsigned s = 0; s < V; s++) {
				if (krecv((int)s, &k, &from, buf) < 0)
					return -1;
				CHECK(k.phase == K_PHASE_B && k.seq == r, "victim: got %c%u from %u", k.phase, k.seq, s);
			}
		}
	}
	if (me == V) {
		/* The new process: say hello, collect one ack per survivor. */
		pn_status_t st;
		unsigned acks = 0, old = 0;
		for (unsigned d = 0; d < V; d++)
			if (ksend(d, K_HELLO, 0, 0, 64, buf) < 0)
				return -1;
		while (acks < V) {
			if (krecv(PN_ANY, &k, &from, buf) < 0)
				return -1;
			if (k.phase == K_ACK)
				acks++;
			else
				old++;
			CHECK(k.phase == K_ACK || k.phase == K_PHASE_B, "reborn: got %c", k.phase);
		}
		EXPECT_RC(pn_status(pn_rd_hal(rd), &st), 0);
		CHECK(st.node_dropped > 0, "no packet was dropped while node %u was dead", V);
		say("ok kill reborn node %u: %u acks, %u late phase-B messages, %llu packets dropped while dead", V,
		    acks, old, (unsigned long long)st.node_dropped);
		pn_barrier(pn_rd_hal(rd));
		free(buf);
		return 0;
	}

	/* Survivors: rounds of traffic with everyone (the victim too) until node 0 has
	 * heard from the new process; node 0 flags the last round. */
	int hello = 0, stop = 0;
	uint32_t r, from_v = 0;
	pn_rd_stats_t rs;
	for (r = 0; !stop; r++) {
		uint32_t flags = me == 0 && hello ? K_LAST : 0;
		for (unsigned j = 1; j < N; j++) {
			unsigned d = (me + j) % N;
			if (ksend(d, K_PHASE_B, r, flags, KSIZES[(r + d) % 4], buf) < 0)
				return -1;
		}
		stop = flags != 0;
		for (unsigned s = 0; s < V; s++) {
			if (s == me)
				continue;
			if (krecv((int)s, &k, &from, buf) < 0)
				return -1;
			CHECK(k.phase == K_PHASE_B && k.seq == r, "round %u: got %c%u from %u", r, k.phase, k.seq, s);
			if (s == 0 && (k.flags & K_LAST))
				stop = 1;
		}
		if (me == 0)
			while (!hello && pn_rd_peek(rd, (int)V, NULL, NULL) == 1) {
				if (krecv((int)V, &k, &from, buf) < 0)
					return -1;
				hello = k.phase == K_HELLO;
				from_v += !hello;
			}
	}
	while (!hello) {
		if (krecv((int)V, &k, &from, buf) < 0)
			return -1;
		hello = k.phase == K_HELLO;
		from_v += !hello;
	}
	if (ksend(V, K_ACK, 0, 0, 64, buf) < 0)
		return -1;
	EXPECT_RC(pn_rd_stats(rd, &rs), 0);
	say("ok kill survivor: %u rounds, %u messages of the killed process intact, %llu partial dropped", r,
	    from_v, (unsigned long long)rs.aborted);
	pn_barrier(pn_rd_hal(rd));
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	pn_open_opts_t o;
	const char *name = argc > 1 ? argv[1] : "";
	int r;
	struct {
		const char *name;
		unsigned min_nodes;
		int (*fn)(void);
	} cases[] = {
		{"sizes", 2, case_sizes},           {"emsgsize", 2, case_emsgsize},
		{"many_to_one", 2, case_many_to_one}, {"all_to_all", 2, case_all_to_all},
		{"from_given", 3, case_from_given}, {"kill", 3, case_kill},
		{"huge", 2, case_huge},             {"inflight", 2, case_inflight},
	};

	pn_open_opts_init(&o);
	if (argc > 2)
		o.backend = argv[2];
	r = pn_rd_open(&rd, &o);
	if (r < 0) {
		say("FAIL open: pn_rd_open returned %d (%s)", r, pn_strerror(r));
		return 1;
	}
	me = (unsigned)pn_node_id(pn_rd_hal(rd));
	N = (unsigned)pn_num_nodes(pn_rd_hal(rd));
	mtu = (unsigned)pn_mtu(pn_rd_hal(rd));
	if (!getenv("PARANIC_RESPAWN"))
		pn_barrier(pn_rd_hal(rd));   /* all open before anyone sends */
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		if (strcmp(name, cases[c].name))
			continue;
		t_case = cases[c].name;
		if (N < cases[c].min_nodes) {
			say("skip %s (needs %u nodes)", t_case, cases[c].min_nodes);
			pn_rd_close(rd);
			return 0;
		}
		r = cases[c].fn();
		if (r == 0 && strcmp(name, "kill"))
			pn_barrier(pn_rd_hal(rd));
		pn_rd_close(rd);
		return r == 0 && !t_failures ? 0 : 1;
	}
	say("FAIL unknown case %s", name);
	return 2;
}
