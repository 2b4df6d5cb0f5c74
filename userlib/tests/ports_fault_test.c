/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports_fault_test: the ports layer under bad input and failures, one process per node
 * (pn_launch).
 *
 *   pn_launch -n N -- ports_fault_test CASE [BACKEND]
 *
 * CASE: errors (bad arguments, registration, options, refused connections, a port that
 * closes later), forge (a forged source field: the NIC-stamped source decides), kill
 * (a peer killed in the middle of transfers; wants `pn_launch -k 1:150:phase-kill -r
 * 300` and a short PARANIC_PORT_TIMEOUT_MS). Every port is context PCTX of its node.
 * Prints "ok CASE ..." or "FAIL CASE: ..." and exits 0 only on success.
 */
#include "ports_test.h"
#include "../src/ports_wire.h"   /* the wire format, to forge packets (case forge) */

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
				struct pw_msg w = {.tag = 0x100u + q, .len = (uint32_t)len, .channel = 2};
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

int main(int argc, char **argv)
{
	static const struct pt_case cases[] = {
		{.name = "errors", .fn_backend = case_errors},
		{.name = "forge", .min_nodes = 3, .fn = case_forge},
		{.name = "kill", .min_nodes = 3, .fn = case_kill, .no_barrier = 1},
	};

	return pt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
