/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: the progress engine and the receive path. A progress round takes the packets
 * waiting in the NIC's RX ring and in the rings of the intra-node path and handles each;
 * then it sends the control packets owed, starts and streams sends, and checks liveness
 * when that is due. The calls that send, receive, test or wait run rounds; a round never
 * waits in the HAL.
 *
 * The NIC's receive path is the hot path and stays in this one file: poll_one with
 * dispatch and on_eager inlined into it (always_inline), the cold cases out of line
 * (noinline). A call from here into another file cannot be inlined: keep the handlers
 * here, and the helpers they inline static inline in ports_int.h, or each packet pays
 * the calls (tests/userlib/test_ports_icount.py holds the instruction budget). Design
 * of the layer: ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_daemon.h"
#include "ports_int.h"

#define PROGRESS_BUDGET 256
#define LIVE_CHECK_NS 1000000ull

/* ---- packet handlers ---------------------------------------------------------------------- */

static void nack(pn_port_t *p, struct peer *pe, int side, uint16_t key)
{
	p->st.stale++;
	if (side == 1) {
		pe->nack1_key = key;
		ctl_set(p, pe, CTL_NACK1);
	} else {
		pe->nack2_key = key;
		ctl_set(p, pe, CTL_NACK2);
	}
}

static int rx_key_ok(const struct peer *pe, uint16_t key)
{
	return pe->rx_known && key == pe->rx_key;
}

static void heard(pn_port_t *p, struct peer *pe)
{
	pe->last_heard = p->now;
	pe->ping_sent = 0;
}

/* The packet handlers take the payload in place (an RX slot or a ring record); the
 * caller releases it afterwards. on_eager is inlined into both receive paths (the NIC's
 * and the rings'): out of line, it costs the NIC path's 8-byte ping-pong about 70 ns
 * one way (measured in docs/ports.md, "NIC path before and after"). */
static inline __attribute__((always_inline)) void on_eager(pn_port_t *p, struct peer *pe, const pn_header_t *hd,
							   const uint8_t *pl)
{
	uint16_t key = PW_TAG_EPOCH(hd->tag);
	uint32_t seq = PW_TAG_LOW(hd->tag);
	struct imsg *m;

	if (!rx_key_ok(pe, key)) {
		nack(p, pe, 1, key);
		return;
	}
	heard(p, pe);
	if (hd->flags & PN_FLAG_SOM) {
		struct pw_msg w;
		uint32_t n;
		if (pw_parse_msg(hd, pl, &w) < 0) {
			p->st.stray++;
			return;
		}
		n = hd->length - HDR;
		if ((int32_t)(seq - pe->rx_seq) < 0) {
			p->st.stray++;
			return;
		}
		if (n < w.len && pe->eager_active) {   /* a new multi-packet message: the last broke off */
			struct imsg *a = pe->eager_active;
			pe->eager_active = NULL;
			p->st.aborted++;
			if (a->req) {
				req_finish(p, a->req, -ECONNRESET);
				pt_imsg_free(p, a);
			} else {
				a->discard = 1;
				a->complete = 1;
				if (a->delivered)
					pt_imsg_free(p, a);
			}
		}
		if (n == w.len && seq == pe->rx_seq && p->posted.head &&
		    pe->rx_arrived - pe->rx_consumed + msg_cost(w.len) <= p->window) {
			/* The common case, without a message record: whole, in order, and a
			 * receive is waiting for it. */
			struct imsg tmp;
			struct pn_port_req *r;
			memset(&tmp, 0, sizeof(tmp));
			tmp.kind = PW_EAGER;
			tmp.channel = w.channel;
			tmp.tag = w.tag;
			tmp.len = w.len;
			tmp.mflags = w.flags;
			tmp.imm = w.data;
			if ((r = pt_find_posted(p, pe, &tmp))) {
				pe->rx_seq++;
				pe->rx_arrived += msg_cost(w.len);
				rq_unlink(r);
				fill_status(&r->st, pe, &tmp);
				r->peer = pe;
				if (n)
					memcpy(r->rbuf, pl + HDR, rq_room(r, 0, n));
				tmp.peer = pe;
				tmp.conn = pe->rx_conn;
				tmp.cost = msg_cost(w.len);
				pt_consume(p, &tmp);
				req_finish(p, r, rq_end(r));
				pt_release_held(p, pe);
				return;
			}
		}
		m = calloc(1, sizeof(*m));
		if (!m) {   /* keep the order going: the message is lost */
			p->st.nomem++;
			if (seq == pe->rx_seq) {
				pe->rx_seq++;
				pt_release_held(p, pe);
			}
			return;
		}
		m->peer = pe;
		m->kind = PW_EAGER;
		m->channel = w.channel;
		m->tag = w.tag;
		m->len = w.len;
		m->mflags = w.flags;
		m->imm = w.data;
		m->seq = seq;
		m->conn = pe->rx_conn;
		m->cost = msg_cost(w.len);
		if (pe->rx_arrived - pe->rx_consumed + m->cost > p->window) {
			p->st.overrun++;
			m->discard = 1;
		} else {
			pe->rx_arrived += m->cost;
		}
		pt_arrive(p, pe, m);
		if (!m->discard) {
			uint8_t *dst = m->direct ? m->req->rbuf : m->data;
			if (n && dst)
				memcpy(dst, pl + HDR, n);
		}
		m->got = n;
		if (m->got == m->len)
			pt_eager_complete(p, m);
		else
			pe->eager_active = m;
		return;
	}
	m = pe->eager_active;
	if (!m || m->seq != seq || hd->length > m->len - m->got) {
		p->st.stray++;
		return;
	}
	if (!m->discard) {
		uint8_t *dst = m->direct ? m->req->rbuf : m->data;
		if (dst && hd->length)
			memcpy(dst + m->got, pl, hd->length);
	}
	m->got += hd->length;
	if (m->got == m->len)
		pt_eager_complete(p, m);
}

static void on_rts(pn_port_t *p, struct peer *pe, const pn_header_t *hd, const struct pw_rts *w)
{
	uint16_t key = PW_TAG_EPOCH(hd->tag);
	uint32_t seq = PW_TAG_LOW(hd->tag);
	struct imsg *m;

	if (!rx_key_ok(pe, key)) {
		nack(p, pe, 1, key);
		return;
	}
	heard(p, pe);
	if (w->m.len > PN_PORT_MAX_MSG || (int32_t)(seq - pe->rx_seq) < 0) {
		p->st.stray++;
		return;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		p->st.nomem++;
		return;
	}
	m->peer = pe;
	m->kind = PW_RTS;
	m->complete = 1;
	m->channel = w->m.channel;
	m->tag = w->m.tag;
	m->len = w->m.len;
	m->mflags = w->m.flags;
	m->imm = w->m.data;
	m->seq = seq;
	m->sreq = w->sreq;
	m->conn = pe->rx_conn;
	pt_arrive(p, pe, m);
}

static void on_rdata(pn_port_t *p, struct peer *pe, const pn_header_t *hd, const uint8_t *pl)
{
	struct pn_port_req *r = id_get(&p->rtab, PW_TAG_LOW(hd->tag));

	if (!rx_key_ok(pe, PW_TAG_EPOCH(hd->tag)) || !r || r->peer != pe || r->state != RQ_RNDV ||
	    hd->length > r->st.len - r->got) {
		p->st.stray++;
		return;
	}
	heard(p, pe);
	size_t n = rq_room(r, r->got, hd->length);
	if (n)
		memcpy(r->rbuf + r->got, pl, n);
	r->got += hd->length;
	if (r->got == r->st.len) {
		pt_id_free(&p->rtab, r->rid);
		pe->n_rndv--;
		req_finish(p, r, rq_end(r));
	}
}

static void credit_update(struct peer *pe, const struct pw_ctl *c)
{
	if (c->credit && c->conn == pe->tx_conn && (int64_t)(c->credit - pe->tx_consumed) > 0 &&
	    c->credit <= pe->tx_sent_cost)
		pe->tx_consumed = c->credit;
}

static int tx_peer_ok(const pn_port_t *p, const struct peer *pe, const struct pw_ctl *c)
{
	return pe->tx_state == TX_OPEN && c->src_epoch == pe->tx_remote_epoch && c->dst_epoch == p->epoch &&
	       c->conn == pe->tx_conn;
}

static void on_ctl(pn_port_t *p, struct peer *pe, unsigned kind, const pn_header_t *hd, const struct pw_ctl *c)
{
	uint16_t key = PW_TAG_EPOCH(hd->tag);

	switch (kind) {
	case PW_CONNECT:
		if (pe->rx_known && pe->rx_epoch == c->src_epoch && (int32_t)(c->conn - pe->rx_conn) < 0)
			break;   /* a late copy of an older connection's request */
		if (!pe->rx_known || pe->rx_epoch != c->src_epoch || pe->rx_conn != c->conn) {
			if (pe->rx_known)
				pt_rx_reset(p, pe, -ECONNRESET);
			if (pe->tx_state != TX_NONE && pe->tx_remote_epoch != c->src_epoch &&
			    pe->tx_state == TX_OPEN) {
				/* the peer is a new process: what we sent to the old one is lost */
				p->st.resets++;
				pt_tx_reset(p, pe, -ECONNRESET, 0);
			}
			pe->rx_known = 1;
			pe->rx_epoch = c->src_epoch;
			pe->rx_conn = c->conn;
			pe->rx_key = pw_conn_key(c->src_epoch, c->conn);
		}
		if (key != pe->rx_key)
			break;
		heard(p, pe);
		ctl_set(p, pe, CTL_ACCEPT);
		break;
	case PW_ACCEPT:
		if (pe->tx_state == TX_CONNECTING && c->dst_epoch == p->epoch && c->conn == pe->tx_conn) {
			pe->tx_state = TX_OPEN;
			pe->tx_remote_epoch = c->src_epoch;
			pe->tx_seq = 0;
			pe->tx_window = c->a;
			pe->tx_sent_cost = pe->tx_consumed = 0;
			pe->ctl &= ~CTL_CONNECT;
			heard(p, pe);
			if (pe->sendq.head)
				send_list_add(p, pe);
		}
		break;
	case PW_CTS: {
		struct pn_port_req *r;
		if (!tx_peer_ok(p, pe, c))
			break;
		heard(p, pe);
		credit_update(pe, c);
		r = id_get(&p->stab, c->a);
		if (!r || r->peer != pe || r->state != RQ_RTS) {
			p->st.stray++;
			break;
		}
		pt_id_free(&p->stab, r->sid);
		pe->n_rts--;
		r->rid = c->b;
		r->state = RQ_STREAM;
		rq_append(&p->streamq, r);
		break;
	}
	case PW_CREDIT:
		if (tx_peer_ok(p, pe, c)) {
			heard(p, pe);
			credit_update(pe, c);
		}
		break;
	case PW_PING:
		if (c->dst_epoch != p->epoch)
			break;   /* for a previous process on this context: it is gone, nothing to say */
		if (c->a == 1) {   /* from the sender of peer -> us */
			if (pe->rx_known && pe->rx_epoch == c->src_epoch && pe->rx_conn == c->conn) {
				heard(p, pe);
				pe->pong1_conn = c->conn;
				ctl_set(p, pe, CTL_PONG1);
			} else {
				nack(p, pe, 1, key);
			}
		} else if (c->a == 2) {   /* from the receiver of us -> peer */
			if (tx_peer_ok(p, pe, c)) {
				heard(p, pe);
				pe->pong2_conn = c->conn;
				ctl_set(p, pe, CTL_PONG2);
			} else {
				nack(p, pe, 2, key);
			}
		}
		break;
	case PW_PONG:
		if (c->dst_epoch != p->epoch)
			break;
		if (c->a == 1 && tx_peer_ok(p, pe, c)) {
			heard(p, pe);
			credit_update(pe, c);
		} else if (c->a == 2 && pe->rx_known && pe->rx_epoch == c->src_epoch && pe->rx_conn == c->conn) {
			heard(p, pe);
		}
		break;
	case PW_NACK:
		if (c->a == 1 && pe->tx_state != TX_NONE && c->b == pe->tx_key) {
			p->st.resets++;
			pt_tx_reset(p, pe, -ECONNRESET, pe->tx_state == TX_OPEN ? 1 : 0);
		} else if (c->a == 2 && pe->rx_known && c->b == pe->rx_key) {
			p->st.resets++;
			pt_rx_reset(p, pe, -ECONNRESET);
		}
		break;
	case PW_CLOSE:
		if (pe->tx_state != TX_NONE && (pe->tx_state == TX_CONNECTING || pe->tx_remote_epoch == c->src_epoch)) {
			p->st.resets++;
			pt_tx_reset(p, pe, -ECONNRESET, 1);
		}
		if (pe->rx_known && pe->rx_epoch == c->src_epoch)
			pt_rx_reset(p, pe, -ECONNRESET);
		break;
	default:
		p->st.foreign++;
	}
}

/* PEER-DEAD from a node's paranicd: the process on (node, ctx) died. Its connections
 * end at once, as the liveness timeout would end them, with -ECONNRESET. Believed only
 * from that node's daemon context (the NIC stamps the source). */
static void on_peer_dead(pn_port_t *p, const pn_header_t *hd, const void *pl)
{
	struct pw_dead d;
	struct peer *pe;

	if (pw_parse_fixed(hd, pl, &d, sizeof(d)) < 0) {
		p->st.foreign++;
		return;
	}
	if (hd->src_ctx != PN_DAEMON_CTX(p->nctx) || d.node != hd->src_node || d.node >= p->nodes ||
	    d.ctx >= p->nctx) {
		p->st.foreign++;   /* not from that node's daemon: not believed */
		return;
	}
	if (!p->peers[d.node] || !(pe = p->peers[d.node][d.ctx]))
		return;   /* never talked to it */
	if (pe->tx_state != TX_NONE || pe->rx_known)
		p->st.resets++;
	pe->ping_sent = 0;
	if (pe->tx_state != TX_NONE)
		pt_tx_reset(p, pe, -ECONNRESET, 1);
	if (pe->rx_known)
		pt_rx_reset(p, pe, -ECONNRESET);
}

/* Handle one ports packet (kind PW_EAGER .. PW_NACK, checked by the caller) from the NIC
 * or a ring. Inlined into both callers: the NIC's receive path is one function, and
 * every test on the packet is made once. */
static inline __attribute__((always_inline)) void dispatch(pn_port_t *p, struct peer *pe, unsigned kind,
							   const pn_header_t *hd, const uint8_t *pl)
{
	if (kind == PW_EAGER) {
		on_eager(p, pe, hd, pl);
	} else if (kind == PW_RDATA) {
		on_rdata(p, pe, hd, pl);
	} else {
		union {
			struct pw_rts m;
			struct pw_ctl c;
		} u;
		if (pw_parse_fixed(hd, pl, &u, kind == PW_RTS ? sizeof(u.m) : sizeof(u.c)) < 0) {
			p->st.stray++;
			return;
		}
		if (kind == PW_RTS)
			on_rts(p, pe, hd, &u.m);
		else
			on_ctl(p, pe, kind, hd, &u.c);
	}
}

/* A CONNECT from a port of our node that came the other way, or from another process
 * than the one we know: find out again how that port is reached. */
static __attribute__((noinline)) void connect_path(pn_port_t *p, struct peer *pe, const pn_header_t *hd,
						    const void *pl, int via_shm)
{
	struct pw_ctl c;
	if (!pe || !p->shm_on || pe->node != p->node || PW_TAG_KIND(hd->tag) != PW_CONNECT ||
	    pw_parse_fixed(hd, pl, &c, sizeof(c)) < 0)
		return;
	if (via_shm ? pn_shm_link_epoch(pe->shm) != c.src_epoch : pe->path == PATH_SHM)
		pt_path_resolve(p, pe);
}

/* A packet that is not one of a port's (kind, type or magic; pl may be NULL): PEER-DEAD
 * from a node's paranicd (only from the NIC, never through a ring), a result of the
 * collective unit, else foreign. */
static __attribute__((noinline)) void on_other(pn_port_t *p, const pn_header_t *hd, const void *pl,
						int via_shm)
{
	if (!via_shm && PW_TAG_KIND(hd->tag) == PW_PEER_DEAD && hd->type == PN_TYPE_DATA &&
	    PW_TAG_MAGIC(hd->tag) == PW_MAGIC)
		on_peer_dead(p, hd, pl);
	else if (!via_shm && hd->type == PN_TYPE_COLLECTIVE)
		pt_coll_result(p, hd, pl);   /* the collective unit's answer (coll_unit.c) */
	else
		p->st.foreign++;
}

/* A ports packet (kind in PW_EAGER .. PW_NACK, type data, our magic)? */
static inline int is_ports_pkt(const pn_header_t *hd, unsigned kind)
{
	return hd->type == PN_TYPE_DATA && PW_TAG_MAGIC(hd->tag) == PW_MAGIC && kind >= PW_EAGER && kind <= PW_NACK;
}

/* Take one packet from the RX ring: 1 if one was handled, 0 if none. The hot path of the
 * NIC: one peer lookup, the handler inlined, nothing of the intra-node path but one
 * test of the peer's path. */
static int poll_one(pn_port_t *p)
{
	pn_hal_t *h = p->h;
	pn_header_t hd;
	const void *pl = NULL;
	struct peer *pe;
	unsigned kind;

	if (pn_recv_header(h, &hd) <= 0)
		return 0;
	pn_recv_payload(h, &pl);
	kind = PW_TAG_KIND(hd.tag);
	if (__builtin_expect(!is_ports_pkt(&hd, kind), 0)) {
		on_other(p, &hd, pl, 0);
	} else if (__builtin_expect(!(pe = pt_peer_get(p, hd.src_node, hd.src_ctx)), 0)) {
		p->st.foreign++;
	} else {
		if (__builtin_expect(pe->path == PATH_SHM, 0))
			connect_path(p, pe, &hd, pl, 0);
		dispatch(p, pe, kind, &hd, pl);
	}
	pn_recv_skip(h);
	return 1;
}

/* Take one packet from the rings of the ports of our node: 1 if one was handled. */
static int poll_shm(pn_port_t *p)
{
	pn_header_t hd;
	const void *pl;
	struct peer *pe;
	unsigned kind;

	if (!pn_shm_next(p->shm, &hd, &pl))
		return 0;
	kind = PW_TAG_KIND(hd.tag);
	pe = pt_peer_get(p, hd.src_node, hd.src_ctx);
	if (pe && pe->path != PATH_SHM)
		pt_path_resolve(p, pe);   /* it sends us by shared memory: it found our inbox */
	if (pe && pe->path == PATH_SHM)
		connect_path(p, pe, &hd, pl, 1);
	if (!pe || !is_ports_pkt(&hd, kind))
		on_other(p, &hd, pl, 1);
	else
		dispatch(p, pe, kind, &hd, pl);
	pn_shm_release(p->shm);
	return 1;
}

/* ---- progress ----------------------------------------------------------------------------- */

/* One round (progress() in ports_int.h runs it, never inside another): the packets that
 * are in, up to PROGRESS_BUDGET from the NIC and as many from the rings, then what is
 * due to go out. Returns the number of things done (0: an idle round). */
int pt_progress_round(pn_port_t *p)
{
	int n = 0;
	p->in_progress = 1;
	p->now = pn_deadline_ns(p->h);
	while (n < PROGRESS_BUDGET && poll_one(p))
		n++;
	if (p->shm_on && !pn_shm_idle(p->shm)) {   /* no call while no port of our node sends to us */
		int k = 0;
		while (k < PROGRESS_BUDGET && poll_shm(p))
			k++;
		n += k;
	}
	if (p->cts_head || p->ctl_peers)
		n += pt_ctl_flush(p);
	if (p->send_peers)
		n += pt_send_pump(p);
	if (p->streamq.head)
		n += pt_stream_pump(p);
	if (p->drainq.head)
		n += pt_drain_check(p);
	if (p->now - p->last_live >= LIVE_CHECK_NS) {
		p->last_live = p->now;
		pt_live_check(p);
		if (p->ctl_peers)
			n += pt_ctl_flush(p);
	}
	/* No pn_progress here: the last poll_one of this round found the RX ring empty, and
	 * pn_recv_header then ran the HAL's progress (returned freed slots, let a software
	 * NIC work); a second call in an idle round would only make the wait loop longer. */
	p->in_progress = 0;
	return n;
}
