/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: the send side. A send waits in its peer's queue until the connection is open
 * and the sends before it have started. It goes eager when it is at most eager_max bytes
 * and the peer's credit allows: one PIO packet, one DMA descriptor from a bounce slot, or
 * records of the peer's ring; else by rendezvous: an RTS, and after the CTS the data
 * streamed by DMA (in place from registered memory, else through two bounce buffers) or
 * through the ring. Nothing here waits: what finds no room stays for the next progress
 * round. Also here: dropping the send side of a connection (pt_tx_reset). Design of the
 * layer: ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "ports_int.h"

static void send_fail(pn_port_t *p, struct pn_port_req *r, int err)
{
	if (r->state == RQ_RTS) {
		pt_id_free(&p->stab, r->sid);
		r->peer->n_rts--;
	}
	req_finish(p, r, err);
}

/* Drop the connection us -> peer: sends waiting for it or for CTS end with err; a
 * stream stops (one posted in place finishes its DMA first). */
void pt_tx_reset(pn_port_t *p, struct peer *pe, int err, int queued_too)
{
	struct pn_port_req *r, *nx;
	if (queued_too)
		while ((r = pe->sendq.head))
			req_finish(p, r, err);
	for (uint32_t i = 0; i < p->stab.cap && pe->n_rts; i++) {
		r = p->stab.ptr[i];
		if (r && r->peer == pe)
			send_fail(p, r, err);
	}
	for (r = p->streamq.head; r; r = nx) {
		nx = r->next;
		if (r->peer != pe)
			continue;
		if (r->registered && r->off) {   /* the NIC may still read the buffer */
			rq_unlink(r);
			r->state = RQ_DRAIN;
			r->st.error = err;
			rq_append(&p->drainq, r);
		} else {
			req_finish(p, r, err);
		}
	}
	pe->n_rts = 0;
	pe->tx_state = TX_NONE;
	pe->ctl &= ~(CTL_CONNECT | CTL_PING1 | CTL_PONG2);
	if (pe->sendq.head)
		send_list_add(p, pe);
}

/* ---- starting a send: eager or RTS -------------------------------------------------------- */

static int eslot_ready(pn_port_t *p, size_t need)
{
	pn_hal_t *h = p->h;
	if (p->eslot && p->eslot_bytes < need) {   /* eager_max grew: replace once idle */
		for (int i = 0; i < EAGER_SLOTS; i++)
			if (!tx_reached(h, p->eslot_ticket[i]))
				return 0;
		pn_dma_free(h, p->eslot);
		p->eslot = NULL;
	}
	if (!p->eslot) {
		size_t b = ((size_t)HDR + (size_t)p->eager_max + 63) & ~(size_t)63;
		if (b < need)
			b = (need + 63) & ~(size_t)63;
		if (pn_dma_alloc(h, b * EAGER_SLOTS, (void **)&p->eslot) < 0) {
			p->eslot = NULL;
			return -ENOMEM;
		}
		p->eslot_bytes = b;
		for (int i = 0; i < EAGER_SLOTS; i++)
			p->eslot_ticket[i] = pn_tx_posted(h);
	}
	return tx_reached(h, p->eslot_ticket[p->eslot_next]) && tx_room(h);
}

static void sent(pn_port_t *p, size_t len)
{
	p->st.sent_msgs++;
	p->st.sent_bytes += len;
}

static void sent_shm(pn_port_t *p, size_t len)
{
	sent(p, len);
	p->st.shm_msgs++;
	p->st.shm_bytes += len;
}

/* send_start over shared memory: an eager message as records of the ring, all at once
 * (no other packet comes between them), else RTS; no DMA, no bounce slot. */
static int send_start_shm(pn_port_t *p, struct peer *pe, struct pn_port_req *r)
{
	struct pn_shm_link *l = pe->shm;
	struct pw_rts m;
	uint64_t cost = msg_cost(r->len);
	int eager = (long)r->len <= p->eager_max && pe->tx_sent_cost - pe->tx_consumed + cost <= pe->tx_window;
	uint8_t *d;
	int rc;

	memset(&m, 0, sizeof(m));
	m.m.tag = r->tag;
	m.m.len = (uint32_t)r->len;
	m.m.channel = r->channel;
	m.m.flags = r->mflags;
	m.m.data = r->imm;
	r->registered = 0;   /* nothing of the caller's buffer is read after the send completes */
	if ((rc = pn_shm_begin(p->shm, l)) < 0) {
		rq_unlink(r);
		req_finish(p, r, rc);
		return rc;
	}
	if (eager) {
		uint64_t tag = PW_TAG(PW_EAGER, pe->tx_key, pe->tx_seq);
		size_t off = r->len < PW_SHM_REC_MAX - HDR ? r->len : PW_SHM_REC_MAX - HDR;
		d = pn_shm_put(l, tag, (uint32_t)(HDR + off), PN_FLAG_SOM | (off == r->len ? PN_FLAG_EOM : 0));
		if (!d)
			goto full;
		memcpy(d, &m, HDR);
		if (off)
			memcpy(d + HDR, r->sbuf, off);
		while (off < r->len) {
			size_t c = r->len - off < PW_SHM_REC_MAX ? r->len - off : PW_SHM_REC_MAX;
			if (!(d = pn_shm_put(l, tag, (uint32_t)c, off + c == r->len ? PN_FLAG_EOM : 0)))
				goto full;
			memcpy(d, r->sbuf + off, c);
			off += c;
		}
		pn_shm_publish(l);
		rq_unlink(r);
		pe->tx_seq++;
		pe->tx_sent_cost += cost;
		sent_shm(p, r->len);
		p->st.eager_msgs++;
		req_finish(p, r, 0);
		return 1;
	full:
		pn_shm_rollback(l);
		p->st.shm_full++;
		return 0;
	}
	if (!pn_shm_room(l, sizeof(m))) {
		p->st.shm_full++;
		return 0;
	}
	rq_unlink(r);
	if ((rc = pt_id_alloc(&p->stab, r, &r->sid)) < 0) {
		req_finish(p, r, rc);
		return rc;
	}
	m.sreq = r->sid;
	d = pn_shm_put(l, PW_TAG(PW_RTS, pe->tx_key, pe->tx_seq), sizeof(m), PN_FLAG_SOM | PN_FLAG_EOM);
	memcpy(d, &m, sizeof(m));
	pn_shm_publish(l);
	pe->tx_seq++;
	if ((long)r->len <= p->eager_max)
		p->st.credit_fallbacks++;
	sent_shm(p, r->len);
	p->st.rndv_msgs++;
	r->state = RQ_RTS;
	r->key = pe->tx_key;
	if (!pe->n_rts++)
		pe->last_heard = p->now;
	return 1;
}

/* Start send r (the head of its peer's queue, connection open). 1: started (and maybe
 * done), 0: no room for it yet (the next round tries again), <0: r failed. */
static int send_start(pn_port_t *p, struct peer *pe, struct pn_port_req *r)
{
	pn_hal_t *h = p->h;
	if (pe->path == PATH_SHM)
		return send_start_shm(p, pe, r);
	struct pw_rts m;
	uint64_t cost = msg_cost(r->len);
	int eager = (long)r->len <= p->eager_max && pe->tx_sent_cost - pe->tx_consumed + cost <= pe->tx_window;
	int rc = 0;

	memset(&m, 0, sizeof(m));
	m.m.tag = r->tag;
	m.m.len = (uint32_t)r->len;
	m.m.channel = r->channel;
	m.m.flags = r->mflags;
	m.m.data = r->imm;
	if (eager) {
		size_t total = HDR + r->len;
		if ((long)total <= h->pio_threshold && total <= p->pio_max) {
			if (!pio_ready(p))
				return 0;
			memcpy(p->pio_buf, &m, HDR);
			if (r->len)
				memcpy(p->pio_buf + HDR, r->sbuf, r->len);
			rc = pn_send_pio(h, pe->node, pe->ctx, PW_TAG(PW_EAGER, pe->tx_key, pe->tx_seq), p->pio_buf, total);
		} else {
			int ok = eslot_ready(p, total);
			if (ok <= 0) {
				if (ok < 0)
					eager = 0;   /* no DMA memory: go by rendezvous */
				else
					return 0;
			}
			if (eager) {
				uint8_t *slot = p->eslot + (size_t)p->eslot_next * p->eslot_bytes;
				memcpy(slot, &m, HDR);
				memcpy(slot + HDR, r->sbuf, r->len);
				rc = pn_send_dma(h, pe->node, pe->ctx, PW_TAG(PW_EAGER, pe->tx_key, pe->tx_seq), slot, total);
				p->eslot_ticket[p->eslot_next] = pn_tx_posted(h);
				p->eslot_next = (p->eslot_next + 1) % EAGER_SLOTS;
			}
		}
		if (eager) {
			rq_unlink(r);
			if (rc < 0) {
				req_finish(p, r, rc);
				return rc;
			}
			pe->tx_seq++;
			pe->tx_sent_cost += cost;
			sent(p, r->len);
			p->st.eager_msgs++;
			req_finish(p, r, 0);
			return 1;
		}
	}
	/* Rendezvous: the RTS first, the data after the CTS. */
	if (!pio_ready(p))
		return 0;
	rq_unlink(r);
	if ((rc = pt_id_alloc(&p->stab, r, &r->sid)) < 0) {
		req_finish(p, r, rc);
		return rc;
	}
	m.sreq = r->sid;
	rc = pn_send_pio(h, pe->node, pe->ctx, PW_TAG(PW_RTS, pe->tx_key, pe->tx_seq), &m, sizeof(m));
	if (rc < 0) {
		pt_id_free(&p->stab, r->sid);
		req_finish(p, r, rc);
		return rc;
	}
	pe->tx_seq++;
	if ((long)r->len <= p->eager_max)
		p->st.credit_fallbacks++;
	sent(p, r->len);
	p->st.rndv_msgs++;
	r->state = RQ_RTS;
	r->key = pe->tx_key;
	if (!pe->n_rts++)
		pe->last_heard = p->now;   /* silence counts from the first RTS waiting for CTS */
	return 1;
}

/* A new send: queued behind its peer's earlier sends (a connection opened if there is
 * none), started at once when it is first and the connection is open, else later by
 * pt_send_pump. */
void pt_send_enqueue(pn_port_t *p, struct peer *pe, struct pn_port_req *r)
{
	rq_append(&pe->sendq, r);
	if (pe->tx_state == TX_NONE)
		pt_connect_start(p, pe);
	if (pe->tx_state == TX_OPEN && pe->sendq.head == r)
		send_start(p, pe, r);
	if (pe->sendq.head)
		send_list_add(p, pe);
}

/* Start queued sends, peer by peer, in each peer's order. */
int pt_send_pump(pn_port_t *p)
{
	int n = 0;
	struct peer **pp = &p->send_peers;
	while (*pp) {
		struct peer *pe = *pp;
		if (pe->tx_state == TX_NONE && pe->sendq.head)
			pt_connect_start(p, pe);
		if (pe->tx_state == TX_OPEN) {
			struct pn_port_req *r;
			while ((r = pe->sendq.head)) {
				int rc = send_start(p, pe, r);
				if (rc == 0)
					break;
				n++;
			}
		}
		if (!pe->sendq.head) {
			*pp = pe->send_next;
			pe->in_send = 0;
		} else {
			pp = &pe->send_next;
		}
	}
	return n;
}

/* ---- rendezvous data ---------------------------------------------------------------------- */

/* Stream rendezvous data over shared memory: records of up to PW_SHM_REC_MAX straight
 * from the caller's buffer (one copy; the receiver's is the second), each published at
 * once so that the receiver copies while we do; done when the last is in the ring. */
static int stream_shm(pn_port_t *p, struct pn_port_req *s)
{
	struct peer *pe = s->peer;
	uint64_t tag = PW_TAG(PW_RDATA, s->key, s->rid);
	int n = 0, rc;

	if ((rc = pn_shm_begin(p->shm, pe->shm)) < 0) {
		req_finish(p, s, rc);
		return 0;
	}
	while (s->off < s->len) {
		size_t c = s->len - s->off < PW_SHM_REC_MAX ? s->len - s->off : PW_SHM_REC_MAX;
		uint8_t *d = pn_shm_put(pe->shm, tag, (uint32_t)c, 0);
		if (!d) {
			p->st.shm_full++;
			break;
		}
		memcpy(d, s->sbuf + s->off, c);
		pn_shm_publish(pe->shm);
		s->off += c;
		n++;
	}
	if (s->off == s->len)
		req_finish(p, s, 0);
	return n;
}

/* Stream rendezvous data (the head of the stream queue first). */
int pt_stream_pump(pn_port_t *p)
{
	pn_hal_t *h = p->h;
	struct pn_port_req *s;
	int n = 0;

	while ((s = p->streamq.head)) {
		struct peer *pe = s->peer;
		uint64_t tag = PW_TAG(PW_RDATA, s->key, s->rid);
		if (pe->path == PATH_SHM) {
			n += stream_shm(p, s);
			if (s->state != RQ_DONE)
				return n;
			continue;
		}
		if (s->registered) {
			while (s->off < s->len && tx_room(h)) {
				size_t c = s->len - s->off < PN_MAX_DMA_LENGTH ? s->len - s->off : PN_MAX_DMA_LENGTH;
				int rc = pn_send_dma(h, pe->node, pe->ctx, tag, s->sbuf + s->off, c);
				if (rc < 0) {
					req_finish(p, s, rc);
					break;
				}
				s->off += c;
				s->ticket = pn_tx_posted(h);
				n++;
			}
			if (s->state == RQ_DONE)
				continue;
			if (s->off < s->len)
				return n;
			rq_unlink(s);
			s->state = RQ_DRAIN;
			rq_append(&p->drainq, s);
			continue;
		}
		while (s->off < s->len) {
			unsigned k = p->bounce_next;
			size_t c = s->len - s->off < PN_PORT_CHUNK ? s->len - s->off : PN_PORT_CHUNK;
			int rc;
			if (!p->bounce[k] && pn_dma_alloc(h, PN_PORT_CHUNK, &p->bounce[k]) < 0) {
				p->bounce[k] = NULL;
				if (!p->bounce[k ^ 1]) {
					req_finish(p, s, -ENOMEM);
					break;
				}
				p->bounce_next ^= 1;
				continue;
			}
			if (!tx_reached(h, p->bounce_ticket[k]) || !tx_room(h))
				return n;
			memcpy(p->bounce[k], s->sbuf + s->off, c);
			rc = pn_send_dma(h, pe->node, pe->ctx, tag, p->bounce[k], c);
			if (rc < 0) {
				req_finish(p, s, rc);
				break;
			}
			p->bounce_ticket[k] = pn_tx_posted(h);
			p->bounce_next ^= 1;
			s->off += c;
			n++;
		}
		if (s->state != RQ_DONE)
			req_finish(p, s, 0);
	}
	return n;
}

int pt_drain_check(pn_port_t *p)
{
	int n = 0;
	for (struct pn_port_req *s = p->drainq.head, *nx; s; s = nx) {
		nx = s->next;
		if (tx_reached(p->h, s->ticket)) {
			req_finish(p, s, s->st.error);
			n++;
		}
	}
	return n;
}
