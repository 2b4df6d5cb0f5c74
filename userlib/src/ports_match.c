/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: ordering and matching on the receive side. An incoming message (eager, or an
 * RTS) is delivered in its connection's order, held back while it is ahead of an
 * earlier one; then it goes to the first posted receive that matches it, or to the
 * unexpected queue, where a receive posted later finds it. Also here: the eager credit
 * a consumed message gives back (pt_consume), the CTS of a matched RTS (rndv_start),
 * and dropping what the receive side of a connection holds (pt_rx_reset). The common
 * case, a whole eager message in order for a waiting receive, is matched in on_eager
 * (ports_recv.c) without a message record. Design of the layer: ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ports_int.h"

/* ---- the unexpected queue and message buffers --------------------------------------------- */

static void unx_append(pn_port_t *p, struct imsg *m)
{
	m->where = 1;
	m->next = NULL;
	m->prev = p->unx_tail;
	if (p->unx_tail)
		p->unx_tail->next = m;
	else
		p->unx_head = m;
	p->unx_tail = m;
	p->st.unexpected_msgs++;
}

static int buf_get(pn_port_t *p, struct imsg *m)
{
	if (m->data || m->discard)
		return 0;
	m->data = malloc(m->len ? m->len : 1);
	if (!m->data) {
		p->st.nomem++;
		m->discard = 1;
		return -ENOMEM;
	}
	p->st.unexpected_bytes += m->len;
	if (p->st.unexpected_bytes > p->st.unexpected_peak)
		p->st.unexpected_peak = p->st.unexpected_bytes;
	return 0;
}

void pt_imsg_free(pn_port_t *p, struct imsg *m)
{
	unx_unlink(p, m);
	buf_release(p, m);
	if (m->peer && m->peer->eager_active == m)
		m->peer->eager_active = NULL;
	free(m);
}

/* An eager message's credit comes back: report it when a quarter of the window is due. */
void pt_consume(pn_port_t *p, struct imsg *m)
{
	struct peer *pe = m->peer;
	if (m->kind != PW_EAGER || !pe->rx_known || m->conn != pe->rx_conn)
		return;
	pe->rx_consumed += m->cost;
	if (pe->rx_consumed - pe->rx_reported >= p->window / 4)
		ctl_set(p, pe, CTL_CREDIT);
}

/* ---- matching ----------------------------------------------------------------------------- */

/* Receive r matched an RTS: queue the CTS that names r by its rid; the data then comes
 * as RDATA packets (on_rdata, ports_recv.c). */
static void rndv_start(pn_port_t *p, struct pn_port_req *r, struct peer *pe, uint32_t sreq, uint32_t len)
{
	struct cts *q = malloc(sizeof(*q));
	if (!q || pt_id_alloc(&p->rtab, r, &r->rid) < 0) {
		free(q);
		p->st.nomem++;
		req_finish(p, r, -ENOMEM);
		return;
	}
	r->state = RQ_RNDV;
	r->got = 0;
	if (!pe->n_rndv++)
		pe->last_heard = p->now;
	q->next = NULL;
	q->peer = pe;
	q->sreq = sreq;
	q->rid = r->rid;
	q->conn = pe->rx_conn;
	if (p->cts_tail)
		p->cts_tail->next = q;
	else
		p->cts_head = q;
	p->cts_tail = q;
	if (len == 0) {   /* nothing will come: done once the CTS is queued */
		pt_id_free(&p->rtab, r->rid);
		pe->n_rndv--;
		req_finish(p, r, 0);
	}
}

/* Give message m to receive r (which fits it, or truncates it). */
static void attach(pn_port_t *p, struct pn_port_req *r, struct imsg *m)
{
	struct peer *pe = m->peer;
	rq_unlink(r);
	fill_status(&r->st, pe, m);
	r->peer = pe;
	if (m->kind == PW_RTS) {
		uint32_t sreq = m->sreq, len = m->len;
		pt_imsg_free(p, m);
		rndv_start(p, r, pe, sreq, len);
		return;
	}
	if (m->complete) {
		size_t n = rq_room(r, 0, m->len);
		if (n)
			memcpy(r->rbuf, m->data, n);
		pt_consume(p, m);
		pt_imsg_free(p, m);
		req_finish(p, r, rq_end(r));
		return;
	}
	unx_unlink(p, m);
	m->req = r;
	r->state = RQ_MATCHED;
	if (!m->data && m->got == 0 && m->len <= r->cap)
		m->direct = 1;   /* nothing arrived yet: the data goes straight into r's buffer */
	else
		buf_get(p, m);   /* (a truncating receive: the whole message, then cut) */
}

/* The first posted receive that matches m and can hold it; those that match but are
 * too small end with -EMSGSIZE (m stays for the next). */
struct pn_port_req *pt_find_posted(pn_port_t *p, const struct peer *pe, const struct imsg *m)
{
	for (struct pn_port_req *r = p->posted.head, *nx; r; r = nx) {
		nx = r->next;
		if (!req_matches(r, pe, m->channel, m->tag))
			continue;
		if (m->len > r->cap && !r->trunc) {
			fill_status(&r->st, pe, m);
			req_finish(p, r, -EMSGSIZE);
			continue;
		}
		return r;
	}
	return NULL;
}

/* Match a new receive against the unexpected queue, else post it. */
void pt_recv_post(pn_port_t *p, struct pn_port_req *r)
{
	for (struct imsg *m = p->unx_head; m; m = m->next) {
		if (!req_matches(r, m->peer, m->channel, m->tag))
			continue;
		if (m->len > r->cap && !r->trunc) {
			fill_status(&r->st, m->peer, m);
			req_finish(p, r, -EMSGSIZE);
			return;
		}
		attach(p, r, m);
		return;
	}
	rq_append(&p->posted, r);
}

/* ---- connection order --------------------------------------------------------------------- */

/* Message m is next in its connection's order: match it with the posted receives, or
 * queue it as unexpected. */
static void deliver(pn_port_t *p, struct imsg *m)
{
	struct peer *pe = m->peer;
	m->delivered = 1;
	if (m->discard) {
		if (m->complete)
			pt_imsg_free(p, m);
		return;
	}
	struct pn_port_req *r = pt_find_posted(p, pe, m);
	if (r) {
		attach(p, r, m);
		return;
	}
	if (m->kind == PW_EAGER && !m->complete)
		buf_get(p, m);
	if (m->discard) {   /* no memory for it */
		if (m->complete)
			pt_imsg_free(p, m);
		return;
	}
	unx_append(p, m);
}

void pt_release_held(pn_port_t *p, struct peer *pe)
{
	while (pe->held && pe->held->seq == pe->rx_seq) {
		struct imsg *m = pe->held;
		pe->held = m->next;
		m->next = NULL;
		m->where = 0;
		pe->rx_seq++;
		deliver(p, m);
	}
}

static void hold(struct peer *pe, struct imsg *m)
{
	struct imsg **pp = &pe->held;
	while (*pp && (int32_t)((*pp)->seq - m->seq) < 0)
		pp = &(*pp)->next;
	m->next = *pp;
	m->where = 2;
	*pp = m;
}

/* A new message of the connection: in order, ahead (held), or a duplicate. */
void pt_arrive(pn_port_t *p, struct peer *pe, struct imsg *m)
{
	if (m->seq == pe->rx_seq) {
		pe->rx_seq++;
		deliver(p, m);
		pt_release_held(p, pe);
	} else {
		p->st.held++;
		if (m->kind == PW_EAGER)
			buf_get(p, m);
		hold(pe, m);
	}
}

void pt_eager_complete(pn_port_t *p, struct imsg *m)
{
	struct pn_port_req *r = m->req;
	m->complete = 1;
	if (m->peer->eager_active == m)
		m->peer->eager_active = NULL;
	if (m->discard) {
		if (m->delivered)
			pt_imsg_free(p, m);
		return;
	}
	if (r) {
		size_t n = rq_room(r, 0, m->len);
		if (!m->direct && n && m->data)
			memcpy(r->rbuf, m->data, n);
		pt_consume(p, m);
		pt_imsg_free(p, m);
		req_finish(p, r, rq_end(r));
	}
}

/* Drop what the connection peer -> us had in flight: partial and held messages, RTS
 * not yet taken, rendezvous receives waiting for data (they end with err). Complete
 * eager messages stay in the queue: their data is whole. */
void pt_rx_reset(pn_port_t *p, struct peer *pe, int err)
{
	struct imsg *m;
	if (pe->eager_active) {
		m = pe->eager_active;
		pe->eager_active = NULL;
		p->st.aborted++;
		if (m->req) {
			req_finish(p, m->req, err);
			m->req = NULL;
			pt_imsg_free(p, m);
		} else if (m->where == 2 || !m->delivered) {
			m->discard = 1;   /* freed below with the held ones */
			m->complete = 1;
		} else {
			pt_imsg_free(p, m);
		}
	}
	while ((m = pe->held)) {
		pe->held = m->next;
		m->where = 0;
		buf_release(p, m);
		free(m);
	}
	for (m = p->unx_head; m;) {
		struct imsg *nx = m->next;
		if (m->peer == pe && (m->kind == PW_RTS || !m->complete))
			pt_imsg_free(p, m);
		m = nx;
	}
	for (uint32_t i = 0; i < p->rtab.cap && pe->n_rndv; i++) {
		struct pn_port_req *r = p->rtab.ptr[i];
		if (r && r->peer == pe) {
			p->rtab.ptr[i] = NULL;
			p->rtab.free[p->rtab.nfree++] = i;
			pe->n_rndv--;
			req_finish(p, r, err);
		}
	}
	/* CTS not yet sent for it are dropped by pt_ctl_flush (connection number). */
	pe->n_rndv = 0;
	pe->rx_known = 0;
	pe->rx_seq = 0;
	pe->rx_arrived = pe->rx_consumed = pe->rx_reported = 0;
	pe->ctl &= ~(CTL_CREDIT | CTL_PONG1 | CTL_PING2);
}
