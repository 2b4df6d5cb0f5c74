/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: the parts of the layer not yet in a file of their own (ports_int.h lists the
 * files). Design of the layer: ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "paranic/pn_daemon.h"
#include "ports_int.h"

#define PROGRESS_BUDGET 256
#define LIVE_CHECK_NS 1000000ull

/* ---- packets in --------------------------------------------------------------------------- */

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
 * and the rings'): an out-of-line call here cost the NIC path's 8-byte ping-pong about
 * 70 ns one way (docs/ports.md, "NIC path before and after"). */
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
		if (hd->length < HDR) {
			p->st.stray++;
			return;
		}
		memcpy(&w, pl, HDR);
		n = hd->length - HDR;
		if (w.len > PN_PORT_EAGER_LIMIT || n > w.len || (int32_t)(seq - pe->rx_seq) < 0) {
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
			if ((r = pt_find_posted(p, pe, &tmp))) {
				pe->rx_seq++;
				pe->rx_arrived += msg_cost(w.len);
				rq_unlink(r);
				fill_status(&r->st, pe, &tmp);
				r->peer = pe;
				if (n)
					memcpy(r->rbuf, pl + HDR, n);
				tmp.peer = pe;
				tmp.conn = pe->rx_conn;
				tmp.cost = msg_cost(w.len);
				pt_consume(p, &tmp);
				req_finish(p, r, 0);
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
	if (hd->length)
		memcpy(r->rbuf + r->got, pl, hd->length);
	r->got += hd->length;
	if (r->got == r->st.len) {
		pt_id_free(&p->rtab, r->rid);
		pe->n_rndv--;
		req_finish(p, r, 0);
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
 * end now, as the liveness timeout would end them, with -ECONNRESET. Believed only from
 * that node's daemon context (the NIC stamps the source). */
static void on_peer_dead(pn_port_t *p, const pn_header_t *hd, const void *pl)
{
	struct pw_dead d;
	struct peer *pe;

	if (hd->length != sizeof(d) || !pl || !(hd->flags & PN_FLAG_SOM) || !(hd->flags & PN_FLAG_EOM)) {
		p->st.foreign++;
		return;
	}
	memcpy(&d, pl, sizeof(d));
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
 * or a ring. Inlined into both callers: the NIC's receive path stays one function, as
 * before the intra-node path, and every test on the packet is made once. */
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
		size_t want = kind == PW_RTS ? sizeof(u.m) : sizeof(u.c);
		if (hd->length != want || !(hd->flags & PN_FLAG_SOM) || !(hd->flags & PN_FLAG_EOM)) {
			p->st.stray++;
			return;
		}
		memcpy(&u, pl, want);
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
	if (!pe || !p->shm_on || pe->node != p->node || PW_TAG_KIND(hd->tag) != PW_CONNECT || hd->length != sizeof(c))
		return;
	memcpy(&c, pl, sizeof(c));
	if (via_shm ? pn_shm_link_epoch(pe->shm) != c.src_epoch : pe->path == PATH_SHM)
		pt_path_resolve(p, pe);
}

/* A packet that is not one of a port's (kind, type or magic; pl may be NULL): PEER-DEAD
 * from a node's paranicd (only from the NIC, never through a ring), else foreign. */
static __attribute__((noinline)) void on_other(pn_port_t *p, const pn_header_t *hd, const void *pl,
						int via_shm)
{
	if (!via_shm && PW_TAG_KIND(hd->tag) == PW_PEER_DEAD && hd->type == PN_TYPE_DATA &&
	    PW_TAG_MAGIC(hd->tag) == PW_MAGIC)
		on_peer_dead(p, hd, pl);
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

int pt_progress_round(pn_port_t *p)
{
	int n = 0;
	p->in_progress = 1;
	p->now = pn_monotonic_ns();
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
	 * NIC work); a second call in an idle round only made the wait loop longer. */
	p->in_progress = 0;
	return n;
}

static void hook(pn_hal_t *h, void *arg)
{
	(void)h;
	progress(arg);
}

int pn_port_progress(pn_port_t *p)
{
	if (!p)
		return -EINVAL;
	return progress(p);
}

/* ---- argument checks ----------------------------------------------------------------------- */

static int check_dst(const pn_port_t *p, unsigned node, unsigned ctx, int channel)
{
	if (node >= p->nodes)
		return -EHOSTUNREACH;
	if (ctx >= p->nctx)
		return -EINVAL;
	if (channel < 0 || channel > PN_PORT_MAX_CHANNEL)
		return -EINVAL;
	return 0;
}

static int check_buf(const void *buf, size_t len)
{
	if (len > (size_t)SSIZE_MAX || (!buf && len))
		return -EINVAL;
	if (len > PN_PORT_MAX_MSG)
		return -EMSGSIZE;
	return 0;
}

static int check_match(const pn_port_t *p, int node, int ctx, int channel)
{
	if (node < PN_PORT_ANY || ctx < PN_PORT_ANY || channel < PN_PORT_ANY || channel > PN_PORT_MAX_CHANNEL)
		return -EINVAL;
	if (node >= (int)p->nodes)
		return -EHOSTUNREACH;
	if (ctx >= (int)p->nctx)
		return -EINVAL;
	return 0;
}

/* ---- send API ----------------------------------------------------------------------------- */

static void req_init_send(struct pn_port_req *r, struct peer *pe, int channel, uint64_t tag, const void *buf,
			  size_t len, const pn_port_t *p)
{
	memset(r, 0, sizeof(*r));
	r->type = RQ_SEND;
	r->state = RQ_QUEUED;
	r->peer = pe;
	r->channel = (uint16_t)channel;
	r->tag = tag;
	r->sbuf = buf;
	r->len = len;
	r->registered = len > 0 && pn_mem_is_registered(p->h, buf, len);
	r->st.src_node = (int)p->node;
	r->st.src_ctx = (int)p->ctx;
	r->st.channel = channel;
	r->st.tag = tag;
	r->st.len = len;
}

int pn_port_isend(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag, const void *buf,
		  size_t len, pn_port_req_t **req)
{
	struct pn_port_req *r;
	struct peer *pe;
	int rc;

	if (!p || !req)
		return -EINVAL;
	*req = NULL;
	if ((rc = check_dst(p, node, ctx, channel)) < 0 || (rc = check_buf(buf, len)) < 0)
		return rc;
	p->now = pn_monotonic_ns();
	if (!(pe = pt_peer_get(p, node, ctx)) || !(r = malloc(sizeof(*r))))
		return -ENOMEM;
	req_init_send(r, pe, channel, tag, buf, len, p);
	pt_send_enqueue(p, pe, r);
	progress(p);
	*req = r;
	return 0;
}

static int wait_req(pn_port_t *p, struct pn_port_req *r, int64_t timeout_ns, int stop_when_matched)
{
	struct pn_backoff b = {0};
	uint64_t t0 = pn_monotonic_ns();
	for (;;) {
		int n = progress(p);
		if (r->state == RQ_DONE)
			return 0;
		if (timeout_ns >= 0 && (!stop_when_matched || r->state == RQ_POSTED) &&
		    pn_monotonic_ns() - t0 >= (uint64_t)timeout_ns)
			return -ETIMEDOUT;
		if (n)
			pn_backoff_reset(&b);
		else
			pn_backoff_step(&b);
	}
}

int pn_port_send(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag, const void *buf,
		 size_t len)
{
	struct pn_port_req r;
	struct peer *pe;
	int rc;

	if (!p)
		return -EINVAL;
	if ((rc = check_dst(p, node, ctx, channel)) < 0 || (rc = check_buf(buf, len)) < 0)
		return rc;
	p->now = pn_monotonic_ns();
	if (!(pe = pt_peer_get(p, node, ctx)))
		return -ENOMEM;
	req_init_send(&r, pe, channel, tag, buf, len, p);
	r.on_stack = 1;
	pt_send_enqueue(p, pe, &r);
	if (r.state != RQ_DONE)
		wait_req(p, &r, -1, 0);
	return r.st.error;
}

/* ---- receive API -------------------------------------------------------------------------- */

static void req_init_recv(struct pn_port_req *r, int node, int ctx, int channel, uint64_t tag, uint64_t mask,
			  void *buf, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->type = RQ_RECV;
	r->state = RQ_POSTED;
	r->m_node = node;
	r->m_ctx = ctx;
	r->m_chan = channel;
	r->m_tag = tag;
	r->m_mask = mask;
	r->rbuf = buf;
	r->cap = cap;
	r->st.src_node = r->st.src_ctx = r->st.channel = PN_PORT_ANY;
}

int pn_port_irecv(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask, void *buf,
		  size_t cap, pn_port_req_t **req)
{
	struct pn_port_req *r;
	int rc;

	if (!p || !req)
		return -EINVAL;
	*req = NULL;
	if ((rc = check_match(p, src_node, src_ctx, channel)) < 0)
		return rc;
	if (cap > (size_t)SSIZE_MAX || (!buf && cap))
		return -EINVAL;
	if (!(r = malloc(sizeof(*r))))
		return -ENOMEM;
	req_init_recv(r, src_node, src_ctx, channel, tag, mask, buf, cap);
	progress(p);
	pt_recv_post(p, r);
	*req = r;
	return 0;
}

int pn_port_recv(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask, void *buf,
		 size_t cap, pn_port_status_t *st, int64_t timeout_ns)
{
	struct pn_port_req r;
	int rc;

	if (!p)
		return -EINVAL;
	if ((rc = check_match(p, src_node, src_ctx, channel)) < 0)
		return rc;
	if (cap > (size_t)SSIZE_MAX || (!buf && cap))
		return -EINVAL;
	req_init_recv(&r, src_node, src_ctx, channel, tag, mask, buf, cap);
	r.on_stack = 1;
	progress(p);
	pt_recv_post(p, &r);
	if (r.state != RQ_DONE && wait_req(p, &r, timeout_ns, 1) == -ETIMEDOUT) {
		rq_unlink(&r);
		return -ETIMEDOUT;
	}
	if (st)
		*st = r.st;
	return r.st.error ? r.st.error : (int)r.st.len;
}

int pn_port_probe(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask,
		  pn_port_status_t *st)
{
	struct pn_port_req r;
	int rc;

	if (!p)
		return -EINVAL;
	if ((rc = check_match(p, src_node, src_ctx, channel)) < 0)
		return rc;
	req_init_recv(&r, src_node, src_ctx, channel, tag, mask, NULL, 0);
	progress(p);
	for (struct imsg *m = p->unx_head; m; m = m->next)
		if (req_matches(&r, m->peer, m->channel, m->tag)) {
			if (st)
				fill_status(st, m->peer, m);
			return 1;
		}
	return 0;
}

/* ---- requests ----------------------------------------------------------------------------- */

static int req_collect(pn_port_req_t **req, pn_port_status_t *st)
{
	struct pn_port_req *r = *req;
	int err = r->st.error;
	if (st)
		*st = r->st;
	free(r);
	*req = NULL;
	return err ? err : 1;
}

int pn_port_test(pn_port_t *p, pn_port_req_t **req, pn_port_status_t *st)
{
	if (!p || !req || !*req)
		return -EINVAL;
	if ((*req)->state != RQ_DONE)
		progress(p);
	if ((*req)->state != RQ_DONE)
		return 0;
	return req_collect(req, st);
}

int pn_port_wait(pn_port_t *p, pn_port_req_t **req, pn_port_status_t *st, int64_t timeout_ns)
{
	if (!p || !req || !*req)
		return -EINVAL;
	if ((*req)->state != RQ_DONE && wait_req(p, *req, timeout_ns, 0) == -ETIMEDOUT)
		return -ETIMEDOUT;
	return req_collect(req, st);
}

int pn_port_cancel(pn_port_t *p, pn_port_req_t **req)
{
	struct pn_port_req *r;
	if (!p || !req || !*req)
		return -EINVAL;
	r = *req;
	if (r->state == RQ_DONE)
		return -EALREADY;
	if (r->state != RQ_POSTED && r->state != RQ_QUEUED)
		return -EBUSY;
	rq_unlink(r);
	free(r);
	*req = NULL;
	return 0;
}

/* ---- open / close / information ------------------------------------------------------------ */

void pn_port_opts_init(pn_port_opts_t *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	pn_open_opts_init(&o->hal);
	o->eager_max = -1;
	o->eager_window = -1;
	o->timeout_ms = -1;
	o->shm = -1;
}

static int env_long(const char *name, long *v)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return 0;
	errno = 0;
	*v = strtol(s, &end, 0);
	return errno || *end ? -EINVAL : 0;
}

static uint32_t new_epoch(void)
{
	uint32_t e = 0;
	if (getrandom(&e, sizeof(e), GRND_NONBLOCK) != sizeof(e)) {
		uint64_t t = pn_monotonic_ns();
		e = (uint32_t)getpid() * 2654435761u ^ (uint32_t)t ^ (uint32_t)(t >> 29);
	}
	return e ? e : 1;
}

int pn_port_open(pn_port_t **out, const pn_port_opts_t *opts)
{
	pn_port_opts_t o;
	pn_port_t *p;
	long v;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (opts)
		o = *opts;
	else
		pn_port_opts_init(&o);
	if (o.eager_max == -1) {
		v = PN_PORT_DEFAULT_EAGER_MAX;
		if ((r = env_long("PARANIC_EAGER_MAX", &v)) < 0)
			return r;
		o.eager_max = v;
	}
	if (o.eager_window == -1) {
		v = 0;
		if ((r = env_long("PARANIC_EAGER_WINDOW", &v)) < 0)
			return r;
		o.eager_window = v;
	}
	if (o.shm == -1) {
		v = 1;
		if ((r = env_long("PARANIC_PORT_SHM", &v)) < 0)
			return r;
		o.shm = (int)v;
	}
	if (o.shm != 0 && o.shm != 1)
		return -EINVAL;
	if (o.timeout_ms == -1) {
		v = PN_PORT_DEFAULT_TIMEOUT_MS;
		if ((r = env_long("PARANIC_PORT_TIMEOUT_MS", &v)) < 0)
			return r;
		o.timeout_ms = v;
	}
	if (o.eager_max < 0 || o.eager_max > (long)PN_PORT_EAGER_LIMIT || o.eager_window < 0 ||
	    o.eager_window > UINT32_MAX || o.timeout_ms < 1 || o.timeout_ms > 3600000)
		return -EINVAL;
	if (o.eager_window == 0) {
		o.eager_window = 8 * (o.eager_max + PN_PORT_MSG_COST);
		if (o.eager_window < 65536)
			o.eager_window = 65536;
	}
	if (o.eager_window < o.eager_max + PN_PORT_MSG_COST)
		return -EINVAL;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (!opts) {
		/* as pn_open(NULL): PARANIC_CTX picks the context */
		r = pn_open(&p->h, NULL);
	} else {
		r = pn_open(&p->h, &o.hal);
	}
	if (r < 0) {
		free(p);
		return r;
	}
	p->node = (uint32_t)pn_node_id(p->h);
	p->nodes = (uint32_t)pn_num_nodes(p->h);
	p->ctx = (uint32_t)pn_ctx_id(p->h);
	p->nctx = (uint32_t)pn_num_ctx(p->h);
	p->mtu = (uint32_t)pn_mtu(p->h);
	p->pio_max = (uint32_t)pn_pio_max(p->h);
	p->epoch = new_epoch();
	p->eager_max = o.eager_max;
	p->window = (uint64_t)o.eager_window;
	p->timeout_ns = (uint64_t)o.timeout_ms * 1000000ull;
	p->ping_ns = p->timeout_ns / 4;
	p->ctl_tail = &p->ctl_peers;
	p->now = pn_monotonic_ns();
	p->peers = calloc(p->nodes, sizeof(*p->peers));
	if (!p->peers) {
		pn_close(p->h);
		free(p);
		return -ENOMEM;
	}
	p->bounce_ticket[0] = p->bounce_ticket[1] = pn_tx_posted(p->h);
	p->st.epoch = p->epoch;
	p->st.node = p->node;
	p->st.ctx = p->ctx;
	/* The intra-node path: our inbox (also when disabled, so that peers of our node
	 * learn to use the NIC with us); without one, everything goes by the NIC. */
	if (pn_shm_open(&p->shm, p->h->cluster, p->node, p->ctx, p->nctx, p->epoch, o.shm) == 0)
		p->shm_on = o.shm;
	else
		p->shm = NULL;
	pn_set_wait_hook(p->h, hook, p);
	*out = p;
	return 0;
}

static void free_all(pn_port_t *p)
{
	struct peer *pe, *nx;
	struct pn_port_req *r;
	struct imsg *m;

	while (p->cts_head) {
		struct cts *q = p->cts_head;
		p->cts_head = q->next;
		free(q);
	}
	while ((m = p->unx_head)) {
		unx_unlink(p, m);
		m->peer->eager_active = m->peer->eager_active == m ? NULL : m->peer->eager_active;
		buf_release(p, m);
		free(m);
	}
	for (pe = p->all_peers; pe; pe = pe->all_next) {
		if (pe->eager_active) {
			m = pe->eager_active;
			if (m->where == 0) {
				buf_release(p, m);
				free(m);
			}
			pe->eager_active = NULL;
		}
		while ((m = pe->held)) {
			pe->held = m->next;
			buf_release(p, m);
			free(m);
		}
		while ((r = pe->sendq.head)) {
			rq_unlink(r);
			if (!r->on_stack)
				free(r);
		}
	}
	/* Requests the caller still holds (posted, streaming, waiting) are freed with the port. */
	while ((r = p->posted.head)) {
		rq_unlink(r);
		if (!r->on_stack)
			free(r);
	}
	while ((r = p->streamq.head)) {
		rq_unlink(r);
		free(r);
	}
	while ((r = p->drainq.head)) {
		rq_unlink(r);
		free(r);
	}
	for (uint32_t i = 0; i < p->stab.cap; i++)
		if (p->stab.ptr[i])
			free(p->stab.ptr[i]);
	for (uint32_t i = 0; i < p->rtab.cap; i++)
		if (p->rtab.ptr[i])
			free(p->rtab.ptr[i]);
	pt_id_destroy(&p->stab);
	pt_id_destroy(&p->rtab);
	for (pe = p->all_peers; pe; pe = nx) {
		nx = pe->all_next;
		free(pe);
	}
	for (uint32_t n = 0; n < p->nodes; n++)
		free(p->peers[n]);
	free(p->peers);
}

int pn_port_close(pn_port_t *p)
{
	pn_hal_t *h;
	struct pn_backoff b = {0};
	uint64_t t0;

	if (!p)
		return -EINVAL;
	h = p->h;
	t0 = pn_monotonic_ns();
	/* DMA in flight first (a CLOSE must not overtake data), at most the timeout. */
	while (!(tx_reached(h, h->tx_tail) && pio_free(h)) && pn_monotonic_ns() - t0 < p->timeout_ns) {
		if (progress(p))
			pn_backoff_reset(&b);
		else
			pn_backoff_step(&b);
	}
	for (struct peer *pe = p->all_peers; pe; pe = pe->all_next) {
		struct pw_ctl c;
		if (pe->tx_state == TX_NONE && !pe->rx_known)
			continue;
		while (!pt_pkt_ready(p, pe, sizeof(c)) && pn_monotonic_ns() - t0 < p->timeout_ns) {
			progress(p);
			pn_backoff_step(&b);
		}
		if (pe->path == PATH_SHM ? !pn_shm_room(pe->shm, sizeof(c)) : !pio_free(h)) {
			if (pe->path == PATH_SHM)
				continue;
			break;
		}
		pt_ctl_init(p, &c, pe->tx_state == TX_OPEN ? pe->tx_remote_epoch : pe->rx_epoch);
		pt_send_ctl(p, pe, PW_CLOSE, 0, &c);
	}
	/* Our rings stay readable for live peers that have not mapped them yet. */
	for (struct peer *pe = p->all_peers; pe; pe = pe->all_next) {
		pn_shm_link_close(p->shm, pe->shm, 1);
		pe->shm = NULL;
	}
	pn_shm_close(p->shm);
	p->shm = NULL;
	p->shm_on = 0;
	while (!pio_free(h) && pn_monotonic_ns() - t0 < p->timeout_ns) {
		pn_progress(h);
		pn_backoff_step(&b);
	}
	pn_set_wait_hook(h, NULL, NULL);
	free_all(p);
	pn_close(h);
	free(p);
	return 0;
}

pn_hal_t *pn_port_hal(pn_port_t *p)
{
	return p ? p->h : NULL;
}

int pn_port_node(const pn_port_t *p)
{
	return p ? (int)p->node : -EINVAL;
}

int pn_port_ctx(const pn_port_t *p)
{
	return p ? (int)p->ctx : -EINVAL;
}

long pn_port_eager_max(const pn_port_t *p)
{
	return p ? p->eager_max : -EINVAL;
}

long pn_port_set_eager_max(pn_port_t *p, long bytes)
{
	long old;
	if (!p || bytes < 0 || bytes > (long)PN_PORT_EAGER_LIMIT || (uint64_t)bytes + PN_PORT_MSG_COST > p->window)
		return -EINVAL;
	old = p->eager_max;
	p->eager_max = bytes;
	return old;
}

int pn_port_stats(pn_port_t *p, pn_port_stats_t *st)
{
	if (!p || !st)
		return -EINVAL;
	*st = p->st;
	return 0;
}

int pn_port_mem_register(pn_port_t *p, void *buf, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a, e;
	if (!p || !buf || !len || len > (size_t)SSIZE_MAX)
		return -EINVAL;
	a = (uintptr_t)buf & ~(uintptr_t)(pg - 1);
	e = (uintptr_t)buf + len;
	if (e < (uintptr_t)buf)
		return -EFAULT;
	/* madvise(MADV_NORMAL) fails with ENOMEM on any unmapped page of the range. */
	if (madvise((void *)a, e - a, MADV_NORMAL) < 0)
		return -EFAULT;
	return pn_mem_register(p->h, buf, len);
}

int pn_port_mem_deregister(pn_port_t *p, void *buf)
{
	if (!p)
		return -EINVAL;
	return pn_mem_deregister(p->h, buf);
}

int pn_port_barrier(pn_port_t *p)
{
	if (!p)
		return -EINVAL;
	progress(p);
	return pn_barrier(p->h);
}
