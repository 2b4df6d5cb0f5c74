/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Active messages: the endpoint (open, close, handlers, information), receiving (two
 * receives posted on the AM channel, each message dispatched to its handler or to the
 * window and RMA code it answers) and the calls that send: requests and replies,
 * flush, barrier. pn_am_poll is the layer's progress. Design of the layer: am_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "am_int.h"

/* ---- receiving ---------------------------------------------------------------------------- */

static void run_handler(pn_am_t *am, pn_am_token_t *tok, const uint64_t *args, unsigned nargs, void *payload,
			size_t len)
{
	am->depth++;
	am->h[tok->handler].fn(tok, args, nargs, payload, len, am->h[tok->handler].arg);
	am->depth--;
}

static void handle(pn_am_t *am, uint8_t *buf, size_t n, unsigned node, unsigned ctx)
{
	struct paw_hdr h;
	struct peer *p;
	uint64_t args[PAW_MAX_ARGS];
	uint8_t *payload;
	const uint8_t *pl;
	if (node >= am->nodes || ctx >= am->nctx || paw_parse(buf, n, &h, args, &pl) < 0)
		return;
	payload = (uint8_t *)(uintptr_t)pl;   /* in our receive buffer: handlers may write it */
	p = peer_of(am, node, ctx);
	if (h.epoch != p->src_epoch) {
		/* a new incarnation of that endpoint: what we had outstanding there is lost */
		if (p->src_epoch)
			am_peer_fail(am, node, ctx, -ECONNRESET);
		p->src_epoch = h.epoch;
		p->recvd = 0;
	}
	p->heard = 1;
	switch (h.kind) {
	case PAW_REQ: {
		pn_am_token_t tok = {.am = am, .src_node = (int)node, .src_ctx = (int)ctx, .handler = h.handler,
				     .is_request = 1, .seq = h.seq};
		p->recvd++;
		if (h.handler >= PN_AM_MAX_HANDLERS || !am->h[h.handler].fn) {
			am->st.unknown_handler++;
			am->st.errors_sent++;
			send_ctl(am, node, ctx, PAW_ERR, h.seq, -ENOENT, 0);
			break;
		}
		am->st.handled_requests++;
		run_handler(am, &tok, args, h.nargs, payload, h.len);
		if (!tok.replied) {
			am->st.acks++;
			send_ctl(am, node, ctx, PAW_ACK, h.seq, 0, 0);
		}
		break;
	}
	case PAW_REP: {
		struct rec r = am_take_rec(am, p, h.seq);
		pn_am_token_t tok = {.am = am, .src_node = (int)node, .src_ctx = (int)ctx, .handler = h.handler,
				     .seq = h.seq};
		(void)r;
		if (h.handler >= PN_AM_MAX_HANDLERS || !am->h[h.handler].fn) {
			am->st.unknown_handler++;
			report(am, node, ctx, h.handler, -ENOENT, h.nargs ? args[0] : 0, 0);
			break;
		}
		am->st.handled_replies++;
		run_handler(am, &tok, args, h.nargs, payload, h.len);
		break;
	}
	case PAW_ACK:
		am_take_rec(am, p, h.seq);
		break;
	case PAW_ERR: {
		struct rec r = am_take_rec(am, p, h.seq);
		if (r.used)
			report(am, node, ctx, r.handler, h.err, r.arg0, 0);
		break;
	}
	case PAW_PING:
		am->st.pongs++;
		send_ctl(am, node, ctx, PAW_PONG, h.a, 0, p->recvd);   /* seq: the PING's mark */
		break;
	case PAW_PONG:
		if (p->ping_at && h.a < h.seq && p->out)
			am_peer_fail(am, node, ctx, -ECONNRESET);   /* it never got them: lost with an old process */
		p->ping_at = 0;
		break;
	case PAW_BAR:
		if (h.a < 32)
			am->bar_arrived[h.a]++;
		break;
	case PAW_PUT:
	case PAW_PUTRTS:
	case PAW_GET:
		p->recvd++;
		if (h.nargs < 4) {
			send_ctl(am, node, ctx, PAW_RMAACK, h.seq, -EINVAL, 0);
			break;
		}
		am_rma_serve(am, node, ctx, &h, args, payload);
		break;
	case PAW_GO: {
		/* find the op without freeing its slot (the final RMAACK does) */
		struct rec *r = NULL;
		for (unsigned i = 0; p->recs && i < am->window; i++)
			if (p->recs[i].used && p->recs[i].seq == h.seq)
				r = &p->recs[i];
		if (r && r->op && r->op->kind == OP_PUT && !r->op->data) {
			struct pn_rma_req *op = r->op;
			int e = pn_port_isend(am->port, node, ctx, am->rch, op->opid, op->src, op->len, &op->data);
			if (e < 0)
				op->err = e;
		}
		break;
	}
	case PAW_RMAACK: {
		struct rec r = am_take_rec(am, p, h.seq);
		if (r.used && r.op)
			am_op_finish(am, r.op, h.err);
		break;
	}
	default:
		break;
	}
}

static int repost(pn_am_t *am, unsigned i)
{
	return pn_port_irecv(am->port, PN_PORT_ANY, PN_PORT_ANY, am->ch, 0, 0, am->rbuf[i], am->rcap,
			     &am->rreq[i]);
}

/* Post the slots that are not posted, the older position first (rnext, then the other):
 * messages land in the order the receives were posted, and are handled in that order. */
static int topup(pn_am_t *am)
{
	for (unsigned k = 0; k < 2; k++) {
		unsigned i = am->rnext ^ k;
		int r;
		if (!am->rreq[i] && (r = repost(am, i)) < 0)
			return r;
	}
	return 0;
}

/* Two receives stay posted, so that after a message the poll looks for the next one in
 * the other slot and returns; the used slot is posted again at the next poll (off the
 * path of a request that the caller sends in reply to what it has just handled). */
int pn_am_poll(pn_am_t *am)
{
	int n = 0;
	if (!am)
		return -EINVAL;
	if (am->depth)
		return -EDEADLK;
	topup(am);
	while (n < 64) {
		pn_port_status_t st;
		unsigned i = am->rnext;
		int r;
		if (!am->rreq[i] && repost(am, i) < 0)
			break;
		r = pn_port_test(am->port, &am->rreq[i], &st);
		if (r == 0)
			break;
		am->rnext ^= 1;   /* rreq[i] is collected (NULL): the other slot is the older one */
		if (r == 1) {
			handle(am, am->rbuf[i], st.len, (unsigned)st.src_node, (unsigned)st.src_ctx);
		} else if (r == -EMSGSIZE) {   /* longer than our buffer: take it whole */
			/* it ended every posted receive: collect the other slot's -EMSGSIZE too (a
			 * receive posted after it was queued matched it as well), then receive it */
			uint8_t *big;
			pn_port_status_t s2;
			unsigned o = am->rnext;
			if (am->rreq[o] && pn_port_cancel(am->port, &am->rreq[o]) != 0) {   /* ended already */
				pn_port_status_t s3;
				/* a message in it would have come before this one: cannot happen */
				if (pn_port_wait(am->port, &am->rreq[o], &s3, -1) == 1)
					handle(am, am->rbuf[o], s3.len, (unsigned)s3.src_node,
					       (unsigned)s3.src_ctx);
			}
			am->rreq[o] = NULL;
			big = malloc(st.len);
			if (big && pn_port_recv(am->port, st.src_node, st.src_ctx, am->ch, 0, 0, big, st.len, &s2, -1) >= 0)
				handle(am, big, s2.len, (unsigned)s2.src_node, (unsigned)s2.src_ctx);
			free(big);
		}
		/* other errors (a half-sent message of a dead peer): nothing to handle */
		n++;
	}
	am_reap_sends(am);
	am_reap_ops(am);
	am_reap_tops(am);
	am_liveness(am);
	return n;
}

/* ---- open / close ------------------------------------------------------------------------ */

void pn_am_opts_init(pn_am_opts_t *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->channel = -1;
	o->rma_channel = -1;
	o->window = -1;
	o->max_payload = -1;
	o->timeout_ms = -1;
}

static uint32_t rand32(void)
{
	uint64_t x = now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&x;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x | 1u;   /* never 0: 0 means "not known yet" */
}

static long env_or(long v, const char *name, long dflt)
{
	const char *s;
	if (v >= 0)
		return v;
	s = getenv(name);
	if (s && *s) {
		char *end;
		long x = strtol(s, &end, 0);
		if (*end == 0 && x >= 0)
			return x;
	}
	return dflt;
}

int pn_am_open(pn_am_t **out, pn_port_t *port, const pn_am_opts_t *opts)
{
	pn_am_opts_t o;
	pn_am_t *am;
	pn_hal_t *h;
	int r;
	if (!out || !port)
		return -EINVAL;
	if (opts)
		o = *opts;
	else
		pn_am_opts_init(&o);
	if (o.channel < 0)
		o.channel = PN_AM_DEFAULT_CHANNEL;
	if (o.rma_channel < 0)
		o.rma_channel = PN_AM_DEFAULT_RMA_CHANNEL;
	o.window = env_or(o.window, "PARANIC_AM_WINDOW", PN_AM_DEFAULT_WINDOW);
	o.max_payload = env_or(o.max_payload, "PARANIC_AM_MAX_PAYLOAD", PN_AM_DEFAULT_MAX_PAYLOAD);
	o.timeout_ms = env_or(o.timeout_ms, "PARANIC_PORT_TIMEOUT_MS", PN_PORT_DEFAULT_TIMEOUT_MS);
	if (o.channel > PN_PORT_MAX_CHANNEL || o.rma_channel > PN_PORT_MAX_CHANNEL || o.channel == o.rma_channel ||
	    o.window < 1 || o.window > PN_AM_MAX_WINDOW || o.max_payload > (long)PN_AM_MAX_PAYLOAD_LIMIT ||
	    o.timeout_ms < 1)
		return -EINVAL;
	am = calloc(1, sizeof(*am));
	if (!am)
		return -ENOMEM;
	h = pn_port_hal(port);
	am->port = port;
	am->ch = o.channel;
	am->rch = o.rma_channel;
	am->window = (unsigned)o.window;
	am->max_payload = (size_t)o.max_payload;
	am->timeout_ns = (uint64_t)o.timeout_ms * 1000000ull;
	am->on_error = o.on_error;
	am->error_arg = o.error_arg;
	am->me = (unsigned)pn_port_node(port);
	am->myctx = (unsigned)pn_port_ctx(port);
	am->nodes = (unsigned)pn_num_nodes(h);
	am->nctx = (unsigned)pn_num_ctx(h);
	am->epoch = rand32();
	am->next_key = ((uint64_t)rand32() << 32) | 1;
	am->next_opid = (uint64_t)am->epoch << 32;
	/* the posted buffer holds the largest message we send; longer ones take the slow path */
	am->rcap = PAW_HDR_MAX + (am->max_payload < 65536 ? am->max_payload : 65536);
	am->peers = calloc((size_t)am->nodes * am->nctx, sizeof(*am->peers));
	am->rbuf[0] = malloc(am->rcap);
	am->rbuf[1] = malloc(am->rcap);
	am->sbuf = malloc(SBUF_CAP);
	am->sends_tail = &am->sends;
	r = !am->peers || !am->rbuf[0] || !am->rbuf[1] || !am->sbuf ? -ENOMEM : topup(am);
	if (r < 0) {
		for (unsigned i = 0; i < 2; i++)
			if (am->rreq[i])
				pn_port_cancel(port, &am->rreq[i]);
		free(am->peers);
		free(am->rbuf[0]);
		free(am->rbuf[1]);
		free(am->sbuf);
		free(am);
		return r;
	}
	*out = am;
	return 0;
}

int pn_am_close(pn_am_t *am)
{
	int rc;
	if (!am)
		return -EINVAL;
	if (am->depth)
		return -EDEADLK;
	/* answers owed to us, data moving into or out of our regions: bounded by liveness */
	while (am->st.outstanding || am->tops)
		pn_am_poll(am);
	rc = am_drain_sends(am);
	for (unsigned i = 0; i < 2; i++)
		if (am->rreq[i] && pn_port_cancel(am->port, &am->rreq[i]) != 0)
			pn_port_wait(am->port, &am->rreq[i], NULL, -1);
	while (am->ops) {
		struct pn_rma_req *op = am->ops;
		am->ops = op->next;
		free(op);
	}
	while (am->regions) {
		struct region *r = am->regions;
		am->regions = r->next;
		if (r->port_reg)
			pn_port_mem_deregister(am->port, r->base);
		free(r);
	}
	for (unsigned i = 0; i < am->nodes * am->nctx; i++)
		free(am->peers[i].recs);
	free(am->peers);
	free(am->rbuf[0]);
	free(am->rbuf[1]);
	free(am->sbuf);
	free(am);
	return rc;
}

int pn_am_register(pn_am_t *am, unsigned index, pn_am_handler_t fn, void *arg)
{
	if (!am || index >= PN_AM_MAX_HANDLERS)
		return -EINVAL;
	am->h[index].fn = fn;
	am->h[index].arg = fn ? arg : NULL;
	return 0;
}

pn_port_t *pn_am_port(pn_am_t *am)
{
	return am ? am->port : NULL;
}

size_t pn_am_max_payload(const pn_am_t *am)
{
	return am ? am->max_payload : 0;
}

unsigned pn_am_window(const pn_am_t *am)
{
	return am ? am->window : 0;
}

int pn_am_stats(pn_am_t *am, pn_am_stats_t *st)
{
	if (!am || !st)
		return -EINVAL;
	*st = am->st;
	return 0;
}

/* ---- requests and replies ---------------------------------------------------------------- */

static int check_msg_args(pn_am_t *am, unsigned handler, const uint64_t *args, unsigned nargs, const void *payload,
			  size_t len)
{
	if (handler >= PN_AM_MAX_HANDLERS || nargs > PN_AM_MAX_ARGS || (nargs && !args) || (len && !payload))
		return -EINVAL;
	if (len > am->max_payload)
		return -EMSGSIZE;
	return 0;
}

int pn_am_request(pn_am_t *am, unsigned node, unsigned ctx, unsigned handler, const uint64_t *args,
		  unsigned nargs, const void *payload, size_t len)
{
	struct peer *p;
	uint32_t seq;
	int r;
	if (!am)
		return -EINVAL;
	r = check_msg_args(am, handler, args, nargs, payload, len);
	if (!r)
		r = check_addr(am, node, ctx);
	if (r)
		return r;
	p = peer_of(am, node, ctx);
	r = am_slot_wait(am, p);
	if (r)
		return r;
	r = am_slot_take(am, p, (uint16_t)handler, nargs ? args[0] : 0, NULL, &seq);
	if (r)
		return r;
	struct paw_hdr h = {.kind = PAW_REQ, .nargs = (uint8_t)nargs, .handler = (uint16_t)handler, .seq = seq};
	r = am_send_msg(am, node, ctx, &h, args, payload, len);
	if (r) {
		am_slot_undo(am, p, seq);
		return r;
	}
	am->st.requests++;
	return 0;
}

int pn_am_reply(pn_am_token_t *tok, unsigned handler, const uint64_t *args, unsigned nargs, const void *payload,
		size_t len)
{
	pn_am_t *am;
	int r;
	if (!tok || !tok->am || !tok->is_request)
		return -EINVAL;
	if (tok->replied)
		return -EALREADY;
	am = tok->am;
	r = check_msg_args(am, handler, args, nargs, payload, len);
	if (r)
		return r;
	struct paw_hdr h = {.kind = PAW_REP, .nargs = (uint8_t)nargs, .handler = (uint16_t)handler, .seq = tok->seq};
	r = am_send_msg(am, (unsigned)tok->src_node, (unsigned)tok->src_ctx, &h, args, payload, len);
	if (r)
		return r;
	tok->replied = 1;
	am->st.replies++;
	return 0;
}

int pn_am_flush(pn_am_t *am, int64_t timeout_ns)
{
	uint64_t t0 = now_ns();
	uint32_t spins = 0;
	int r;
	if (!am)
		return -EINVAL;
	if (am->depth)
		return -EDEADLK;
	for (;;) {
		int busy = am->st.outstanding > 0;
		pn_am_poll(am);
		for (struct pn_rma_req *op = am->ops; op && !busy; op = op->next)
			busy = !op->done;
		if (!busy && !am->st.outstanding)
			return 0;
		if (timeout_ns >= 0 && now_ns() - t0 > (uint64_t)timeout_ns)
			return -ETIMEDOUT;
		if ((r = am_alive(am, &spins)) < 0)
			return r;
	}
}

int pn_am_barrier(pn_am_t *am)
{
	unsigned round = 0;
	uint32_t spins = 0;
	if (!am)
		return -EINVAL;
	if (am->depth)
		return -EDEADLK;
	am->bar_epoch++;
	for (unsigned d = 1; d < am->nodes; d <<= 1, round++) {
		int r = send_ctl(am, (am->me + d) % am->nodes, am->myctx, PAW_BAR, 0, 0, round);
		if (r < 0)
			return r;
		while (am->bar_arrived[round] < am->bar_epoch) {
			pn_am_poll(am);
			if ((r = am_alive(am, &spins)) < 0)
				return r;
		}
	}
	am->st.barriers++;
	return 0;
}
