/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Active messages: what is outstanding to each peer. Sending (a message assembled in a
 * buffer, sent with pn_port_isend, the buffer released when the send completes), the
 * window (the requests and RMA operations to a peer not yet answered, at most `window`),
 * a peer's failure (what it owed us ends with an error, reported or completing the RMA
 * operation) and liveness (PING while something depends on a silent peer). Design of
 * the layer: am_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

/* ---- sending ------------------------------------------------------------------------------ */

static void buf_done(pn_am_t *am, uint8_t *buf, int small)
{
	if (small && !am->sbuf)
		am->sbuf = buf;
	else
		free(buf);
}

/* Assemble and send one AM message; never waits. */
int am_send_msg(pn_am_t *am, unsigned node, unsigned ctx, const struct paw_hdr *hdr, const uint64_t *args,
		const void *payload, size_t len)
{
	size_t hl = sizeof(*hdr) + 8u * hdr->nargs;
	int small = hl + len <= SBUF_CAP;
	uint8_t *buf;
	struct paw_hdr *hp;
	pn_port_req_t *req = NULL;
	int r;
	if (small && am->sbuf) {
		buf = am->sbuf;
		am->sbuf = NULL;
	} else {
		buf = malloc(small ? SBUF_CAP : hl + len);
	}
	if (!buf)
		return -ENOMEM;
	hp = (struct paw_hdr *)buf;
	*hp = *hdr;
	hp->epoch = am->epoch;
	hp->len = (uint32_t)len;
	if (hdr->nargs)
		memcpy(buf + sizeof(*hdr), args, 8u * hdr->nargs);
	if (len)
		memcpy(buf + hl, payload, len);
	r = pn_port_isend(am->port, node, ctx, am->ch, hdr->kind, buf, hl + len, &req);
	if (r < 0) {
		buf_done(am, buf, small);
		return r;
	}
	r = pn_port_test(am->port, &req, NULL);
	if (r != 0) {   /* completed (eager): done with the buffer */
		buf_done(am, buf, small);
		if (r < 0)
			am_peer_fail(am, node, ctx, r);
		return 0;
	}
	struct psend *ps = malloc(sizeof(*ps));
	if (!ps) {   /* cannot track it: wait for it here */
		r = pn_port_wait(am->port, &req, NULL, -1);
		buf_done(am, buf, small);
		return r < 0 ? r : 0;
	}
	*ps = (struct psend){.req = req, .buf = buf, .small = small, .node = node, .ctx = ctx};
	*am->sends_tail = ps;
	am->sends_tail = &ps->next;
	return 0;
}

/* Sends complete about in the order they were started: test the oldest first and stop
 * at the first one still pending (each test of an unfinished request progresses the
 * port once more; pn_am_poll has just done that). */
void am_reap_sends(pn_am_t *am)
{
	while (am->sends) {
		struct psend *ps = am->sends;
		int r = pn_port_test(am->port, &ps->req, NULL);
		if (r == 0)
			break;
		am->sends = ps->next;
		if (!am->sends)
			am->sends_tail = &am->sends;
		buf_done(am, ps->buf, ps->small);
		if (r < 0)
			am_peer_fail(am, ps->node, ps->ctx, r);
		free(ps);
	}
}

/* At close: wait for our sends, receiving meanwhile (a peer that closes at the same time
 * waits for our receives to free its credits), but give up once none completed for the
 * timeout (a peer that stopped reading). What is left is withdrawn; a send the port has
 * started keeps its buffer (the port may still read it: left allocated). 0, or
 * -ETIMEDOUT when something was given up. */
int am_drain_sends(pn_am_t *am)
{
	uint64_t t0 = am_deadline_ns(am);
	struct psend *oldest = am->sends;
	int r = 0;

	while (am->sends) {
		pn_am_poll(am);
		am_reap_sends(am);
		if (am->sends != oldest) {
			oldest = am->sends;
			t0 = am_deadline_ns(am);
		} else if (am_deadline_ns(am) - t0 >= am->timeout_ns) {
			break;
		}
	}
	while (am->sends) {
		struct psend *ps = am->sends;
		am->sends = ps->next;
		if (pn_port_cancel(am->port, &ps->req) == 0)
			buf_done(am, ps->buf, ps->small);
		free(ps);
		r = -ETIMEDOUT;
	}
	am->sends_tail = &am->sends;
	return r;
}

/* ---- window ------------------------------------------------------------------------------- */

/* Take the window entry `seq` of the peer; returns it (copied) or used=0. */
struct rec am_take_rec(pn_am_t *am, struct peer *p, uint32_t seq)
{
	struct rec none = {0};
	if (!p->recs)
		return none;
	for (unsigned i = 0; i < am->window; i++)
		if (p->recs[i].used && p->recs[i].seq == seq) {
			struct rec r = p->recs[i];
			p->recs[i].used = 0;
			p->out--;
			am->st.outstanding--;
			return r;
		}
	return none;
}

/* Peer (node, ctx) failed with err: what it owes us ends (requests reported, RMA
 * operations completed with err), target puts waiting for its data are withdrawn, and
 * PONG counts start afresh. */
void am_peer_fail(pn_am_t *am, unsigned node, unsigned ctx, int err)
{
	struct peer *p = peer_of(am, node, ctx);
	int any = p->out > 0;
	if (p->recs)
		for (unsigned i = 0; i < am->window; i++) {
			struct rec r = p->recs[i];
			if (!r.used)
				continue;
			p->recs[i].used = 0;
			p->out--;
			am->st.outstanding--;
			if (r.op)
				am_op_finish(am, r.op, err);
			else
				report(am, node, ctx, r.handler, err, r.arg0, 0);
		}
	/* target puts waiting for this peer's data: withdraw the receives not yet matched
	 * (a matched one ends by the ports layer's own liveness) */
	for (struct tgt_op *t = am->tops; t; t = t->next)
		if (t->is_put && t->node == node && t->ctx == ctx && t->req && pn_port_cancel(am->port, &t->req) == 0)
			any = 1;   /* t->req is NULL: am_reap_tops counts it as failed */
	p->ping_at = 0;
	p->base = p->sent;
	if (any) {
		p->failures++;
		p->last_err = err;
		am->st.peer_failures++;
	}
}

/* Wait for a free slot to (node, ctx); returns 0, or the peer's error when it failed
 * during the wait, -EAGAIN inside a handler. */
int am_slot_wait(pn_am_t *am, struct peer *p)
{
	uint32_t f0 = p->failures;
	uint64_t t0;
	if (p->out < am->window)
		return 0;
	if (am->depth)
		return -EAGAIN;
	am->st.window_waits++;
	t0 = now_ns();
	uint32_t spins = 0;
	int r = 0;
	while (p->out >= am->window) {
		pn_am_poll(am);
		if (p->failures != f0 || (r = am_alive(am, &spins)) < 0)
			break;
	}
	am->st.window_wait_ns += now_ns() - t0;
	if (r < 0)
		return r;
	return p->failures != f0 ? p->last_err : 0;
}

/* A window slot to p for a request (handler, arg0) or an RMA operation (op); its
 * sequence number in *seq. -EAGAIN when none is free (am_slot_wait first). */
int am_slot_take(pn_am_t *am, struct peer *p, uint16_t handler, uint64_t arg0, struct pn_rma_req *op,
		 uint32_t *seq)
{
	if (!p->recs) {
		p->recs = calloc(am->window, sizeof(*p->recs));
		if (!p->recs)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < am->window; i++)
		if (!p->recs[i].used) {
			if (p->out == 0) {   /* starts depending on the peer: counts from the next scan */
				p->heard = 1;
				p->ping_at = 0;
			}
			*seq = ++p->sent;
			p->recs[i] = (struct rec){.seq = *seq, .handler = handler, .used = 1, .arg0 = arg0, .op = op};
			p->out++;
			am->st.outstanding++;
			if (p->out > am->st.peak_outstanding)
				am->st.peak_outstanding = p->out;
			return 0;
		}
	return -EAGAIN;
}

/* Undo am_slot_take when the send failed at once. */
void am_slot_undo(pn_am_t *am, struct peer *p, uint32_t seq)
{
	am_take_rec(am, p, seq);
	p->sent--;
}

/* ---- liveness ----------------------------------------------------------------------------- */

/* Every timeout/64 at most, and only while something depends on a peer (requests or
 * RMA operations outstanding, target puts waiting for data). A peer heard from since
 * the last scan counts as heard at this scan: PINGs and failures come up to 1/64 of the
 * timeout later than with a clock read per message. */
void am_liveness(pn_am_t *am)
{
	uint64_t now;
	if (!am->st.outstanding && !am->tops)
		return;
	now = am_deadline_ns(am);
	if (now < am->live_next)
		return;
	am->live_next = now + am->timeout_ns / 64;
	for (unsigned i = 0; i < am->nodes * am->nctx; i++) {
		struct peer *p = &am->peers[i];
		unsigned node = i / am->nctx, ctx = i % am->nctx;
		if (!p->out && !p->tgt_waits)
			continue;
		if (p->heard) {
			p->last_heard = now;
			p->heard = 0;
		}
		if (p->ping_at && now - p->ping_at > am->timeout_ns) {
			am_peer_fail(am, node, ctx, -ETIMEDOUT);
		} else if (p->ping_at ? now - p->ping_last > am->timeout_ns / 4 : now - p->last_heard > am->timeout_ns / 4) {
			/* again every quarter: a PING dropped on a connection a new process reset
			 * is then answered by that process (and its count tells the loss) */
			if (!p->ping_at)
				p->ping_at = now;
			p->ping_last = now;
			p->ping_mark = p->sent - p->base;
			am->st.pings++;
			send_ctl(am, node, ctx, PAW_PING, 0, 0, p->ping_mark);
		}
	}
}
