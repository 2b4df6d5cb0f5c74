/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Active messages and RMA over the ports layer's public API (pn_am.h, docs/am.md,
 * wire format in am_wire.h).
 * This private header holds the layer's design, the structures its files share and the
 * functions they call in each other.
 *
 * Receive: two receives are kept posted on the AM channel (any source), each into a
 * buffer of header + min(max_payload, 64 KiB) bytes; a longer message (-EMSGSIZE, it
 * stays queued) is taken whole into a temporary buffer. Send: header, arguments and
 * payload are assembled in a buffer (a cached one for small messages) and sent with
 * pn_port_isend; the buffer is released when the send completes (at once for eager
 * messages), so AM calls never wait for a send.
 * Window: per peer the requests (and RMA operations) not yet answered, at most
 * `window`. Liveness: while something depends on a peer and nothing was heard from it
 * for a quarter of the timeout, PING; PONG says how many window messages the peer's
 * incarnation received from ours (fewer than we sent before the PING: they were lost
 * with a previous process, -ECONNRESET); no PONG within the timeout: -ETIMEDOUT.
 *
 * Cost per poll (docs/am.md, "Measured"): a poll that finds nothing is one pn_port_test
 * of the posted receive (which progresses the port) plus, only while something depends
 * on a peer, one clock read; the peer scan of liveness runs at most every timeout/64,
 * and "heard from" is a flag the scan turns into a time (no clock read per message).
 * Pending sends are tested oldest first up to the first one still pending (every
 * pn_port_test of an unfinished request progresses the port once more); an RMA
 * operation's data request only once the operation's answer is in (it cannot complete
 * before). Small messages are assembled in a cached buffer (no malloc per message).
 *
 * Files:
 *   am_msg.c     the endpoint: open, close, receiving (pn_am_poll), requests, replies
 *   am_window.c  sends in flight, the window per peer, peer failure, liveness
 *   am_rma.c     RMA: regions, put and get, the target side
 * A function one file calls in another is named am_* (global in the library, hidden);
 * the small helpers here are static inline.
 */
#ifndef PN_AM_INT_H
#define PN_AM_INT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "am_wire.h"
#include "hal_backend.h"
#include "paranic/pn_am.h"

struct rec {                 /* one outstanding window message to a peer */
	uint32_t seq;
	uint16_t handler;
	uint8_t used;
	uint64_t arg0;
	struct pn_rma_req *op;   /* RMA operation, or NULL for a request */
};

struct peer {
	/* as requester */
	uint32_t sent;           /* window messages sent (their seq: 1, 2, ...) */
	uint32_t out;            /* outstanding */
	struct rec *recs;        /* window entries */
	uint64_t last_heard, ping_at, ping_last;   /* ping_at: the first unanswered PING */
	int heard;               /* heard from (or started depending on) it since the last scan */
	uint32_t ping_mark;      /* window messages sent since `base` when the last PING went */
	uint32_t base;           /* `sent` when the peer last failed: PONG counts from a new start */
	uint32_t failures;       /* times this peer failed (pn_am_request notices during a wait) */
	int last_err;
	/* as receiver */
	uint32_t src_epoch;      /* the incarnation of this source we know (0: none yet) */
	uint32_t recvd;          /* window messages received from it */
	uint32_t tgt_waits;      /* target puts waiting for its data */
};

enum { OP_PUT = 1, OP_GET = 2 };

struct pn_rma_req {
	struct pn_rma_req *next;
	int kind;
	unsigned node, ctx;
	uint64_t opid;
	const void *src;
	void *dst;
	size_t len;
	pn_port_req_t *data;     /* the data's ports request (put: send after GO; get: receive) */
	int acked, done, err, implicit;
};

struct region {
	struct region *next;
	uint8_t *base;
	size_t len;
	unsigned flags;
	uint64_t key;
	unsigned inflight;
	int port_reg;
};

struct tgt_op {              /* data moving into (put) or out of (get) a region */
	struct tgt_op *next;
	struct region *reg;
	pn_port_req_t *req;
	int is_put;
	unsigned node, ctx;
	uint32_t epoch, seq;
	size_t len;
};

struct psend {
	struct psend *next;
	pn_port_req_t *req;
	void *buf;
	int small;               /* buf is a SBUF_CAP buffer (back to the cache when done) */
	unsigned node, ctx;
};

/* Messages up to this size (header, arguments, payload) are assembled in the endpoint's
 * cached buffer (or, while that one is still being sent, a fresh buffer of this size). */
#define SBUF_CAP 1024

struct pn_am {
	pn_port_t *port;
	int ch, rch;
	unsigned window;
	size_t max_payload;
	uint64_t timeout_ns;
	pn_am_error_fn on_error;
	void *error_arg;
	struct {
		pn_am_handler_t fn;
		void *arg;
	} h[PN_AM_MAX_HANDLERS];
	unsigned me, myctx, nodes, nctx;
	uint32_t epoch;
	struct peer *peers;
	pn_port_req_t *rreq[2];  /* two receives posted on the AM channel (NULL: not posted) */
	uint8_t *rbuf[2];
	unsigned rnext;          /* the slot posted first: where the next message lands */
	size_t rcap;
	struct psend *sends, **sends_tail;   /* oldest first */
	uint8_t *sbuf;           /* the cached small send buffer, NULL while in use */
	uint64_t live_next;      /* the next liveness scan (monotonic ns) */
	struct pn_rma_req *ops;
	struct region *regions;
	struct tgt_op *tops;
	uint64_t next_key, next_opid;
	int depth;               /* > 0 inside a handler */
	int implicit_err;        /* first error of an implicit RMA op since the last flush */
	uint32_t bar_epoch;
	uint32_t bar_arrived[32];
	pn_am_stats_t st;
};

/* For AM's wait loops: every 256 rounds, is the NIC under the port still there? 0, or
 * -EIO/-ENODEV (pn_alive) once the simulator or device went away. */
static inline int am_alive(pn_am_t *am, uint32_t *spins)
{
	return ++*spins % 256u ? 0 : pn_alive(pn_port_hal(am->port));
}

/* ---- functions shared between the files (global in the library, hidden) ------------------- */

#pragma GCC visibility push(hidden)

/* am_window.c */
int am_send_msg(pn_am_t *am, unsigned node, unsigned ctx, const struct paw_hdr *hdr, const uint64_t *args,
		const void *payload, size_t len);
void am_reap_sends(pn_am_t *am);
int am_drain_sends(pn_am_t *am);
struct rec am_take_rec(pn_am_t *am, struct peer *p, uint32_t seq);
void am_peer_fail(pn_am_t *am, unsigned node, unsigned ctx, int err);
int am_slot_wait(pn_am_t *am, struct peer *p);
int am_slot_take(pn_am_t *am, struct peer *p, uint16_t handler, uint64_t arg0, struct pn_rma_req *op,
		 uint32_t *seq);
void am_slot_undo(pn_am_t *am, struct peer *p, uint32_t seq);
void am_liveness(pn_am_t *am);

/* am_rma.c */
void am_op_finish(pn_am_t *am, struct pn_rma_req *op, int err);
void am_reap_ops(pn_am_t *am);
void am_reap_tops(pn_am_t *am);
void am_rma_serve(pn_am_t *am, unsigned node, unsigned ctx, const struct paw_hdr *h, const uint64_t *args,
		  const uint8_t *payload);

#pragma GCC visibility pop

/* ---- small helpers ------------------------------------------------------------------------ */

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The clock of liveness (pn_deadline_ns: the simulator's work clock on sim). */
static inline uint64_t am_deadline_ns(pn_am_t *am)
{
	return pn_deadline_ns(pn_port_hal(am->port));
}

static inline struct peer *peer_of(pn_am_t *am, unsigned node, unsigned ctx)
{
	return &am->peers[node * am->nctx + ctx];
}

static inline int check_addr(pn_am_t *am, unsigned node, unsigned ctx)
{
	if (node >= am->nodes)
		return -EHOSTUNREACH;
	if (ctx >= am->nctx)
		return -EINVAL;
	return 0;
}

static inline int send_ctl(pn_am_t *am, unsigned node, unsigned ctx, int kind, uint32_t seq, int32_t err, uint32_t a)
{
	struct paw_hdr h = {.kind = (uint8_t)kind, .seq = seq, .err = err, .a = a};
	return am_send_msg(am, node, ctx, &h, NULL, NULL, 0);
}

static inline void report(pn_am_t *am, unsigned node, unsigned ctx, unsigned handler, int err, uint64_t arg0, int rma)
{
	pn_am_error_t e = {.node = (int)node, .ctx = (int)ctx, .handler = handler, .error = err, .arg0 = arg0,
			   .is_rma = rma};
	am->st.errors++;
	if (am->on_error) {
		am->depth++;
		am->on_error(am, &e, am->error_arg);
		am->depth--;
	}
}

#endif /* PN_AM_INT_H */
