/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: peers and their connections. A peer is another port, (node, context), met at
 * first contact; per peer we keep the connection we send on and the one we receive on,
 * the way its packets go (the NIC, or the rings of the intra-node path for a port of
 * our node) and the control packets we owe it (CONNECT, ACCEPT, CREDIT, PING, PONG,
 * NACK; the CTS queue is the port's). pt_ctl_flush sends them while there is room and
 * never waits. Design of the layer: ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ports_int.h"

/* The peer (node, ctx), made at first use; NULL when out of range or out of memory. */
struct peer *pt_peer_get(pn_port_t *p, unsigned node, unsigned ctx)
{
	struct peer **row, *pe;
	if (node >= p->nodes || ctx >= p->nctx)
		return NULL;
	row = p->peers[node];
	if (!row) {
		row = calloc(p->nctx, sizeof(*row));
		if (!row)
			return NULL;
		p->peers[node] = row;
	}
	pe = row[ctx];
	if (!pe) {
		pe = calloc(1, sizeof(*pe));
		if (!pe)
			return NULL;
		pe->node = (uint16_t)node;
		pe->ctx = (uint8_t)ctx;
		pe->path = p->shm_on && node == p->node && ctx != p->ctx ? PATH_UNKNOWN : PATH_NIC;
		pe->last_heard = p->now;
		pe->all_next = p->all_peers;
		p->all_peers = pe;
		row[ctx] = pe;
	}
	return pe;
}

/* ---- the way to a peer: the NIC or the intra-node path (ports_shm.c) ---------------------- */

/* Find out how a port of our node is reached: its inbox says whether it takes shared
 * memory (and that it is alive). A link to the same port as before is kept (with our
 * ring to it); one to a port that is gone is dropped. */
void pt_path_resolve(pn_port_t *p, struct peer *pe)
{
	struct pn_shm_link *l = NULL;
	int rc;

	if (!p->shm_on || pe->node != p->node || pe->ctx == p->ctx)
		return;
	rc = pn_shm_link_open(p->shm, pe->ctx, &l);
	if (rc == 1 && pe->shm && pn_shm_link_epoch(pe->shm) == pn_shm_link_epoch(l) && pn_shm_link_alive(pe->shm)) {
		pn_shm_link_close(p->shm, l, 0);
		pe->path = PATH_SHM;
		return;
	}
	if (pe->shm) {
		pn_shm_link_close(p->shm, pe->shm, 0);
		pe->shm = NULL;
		p->st.shm_peers--;
	}
	if (rc == 1) {
		pe->shm = l;
		pe->path = PATH_SHM;
		p->st.shm_peers++;
	} else {
		pe->path = rc == 0 ? PATH_NIC : PATH_UNKNOWN;
	}
}

/* Open the connection us -> pe: a new connection number and key, CONNECT at the next
 * flush (repeated by pt_live_check until an ACCEPT comes or the timeout). */
void pt_connect_start(pn_port_t *p, struct peer *pe)
{
	/* A port of our node: which way, looked up for every connection (another process
	 * may hold that context than at the last one). */
	if (p->shm_on && pe->node == p->node && pe->ctx != p->ctx &&
	    (pe->path != PATH_SHM || !pn_shm_link_alive(pe->shm)))
		pt_path_resolve(p, pe);
	pe->tx_state = TX_CONNECTING;
	pe->tx_conn++;
	pe->tx_key = pw_conn_key(p->epoch, pe->tx_conn);
	pe->connect_t0 = pe->connect_last = p->now;
	pe->connect_wait = CONNECT_RETRY_MIN_NS;
	ctl_set(p, pe, CTL_CONNECT);
}

/* ---- control packets (never waits) -------------------------------------------------------- */

/* 1 when one packet of len payload bytes to pe can go: the PIO window, or its ring. */
int pt_pkt_ready(pn_port_t *p, struct peer *pe, uint32_t len)
{
	if (pe->path != PATH_SHM)
		return pio_ready(p);
	if (pn_shm_room(pe->shm, len))
		return 1;
	p->st.shm_full++;
	return 0;
}

/* One single-packet message to pe (the caller checked pt_pkt_ready). */
static int xmit(pn_port_t *p, struct peer *pe, uint64_t tag, const void *buf, size_t len)
{
	void *d;
	int rc;
	if (pe->path != PATH_SHM)
		return pn_send_pio(p->h, pe->node, pe->ctx, tag, buf, len);
	if ((rc = pn_shm_begin(p->shm, pe->shm)) < 0)
		return rc;
	if (!(d = pn_shm_put(pe->shm, tag, (uint32_t)len, PN_FLAG_SOM | PN_FLAG_EOM)))
		return -EAGAIN;
	if (len)
		memcpy(d, buf, len);
	pn_shm_publish(pe->shm);
	return 0;
}

int pt_send_ctl(pn_port_t *p, struct peer *pe, unsigned kind, uint16_t key, const struct pw_ctl *c)
{
	return xmit(p, pe, PW_TAG(kind, key, 0), c, sizeof(*c));
}

void pt_ctl_init(const pn_port_t *p, struct pw_ctl *c, uint32_t dst_epoch)
{
	memset(c, 0, sizeof(*c));
	c->src_epoch = p->epoch;
	c->dst_epoch = dst_epoch;
}

/* Send what the control flags and the CTS queue ask for, while the PIO window is free.
 * Returns the number of packets sent. */
int pt_ctl_flush(pn_port_t *p)
{
	struct pw_ctl c;
	int n = 0;

	while (p->cts_head) {
		struct cts *q = p->cts_head;
		struct peer *pe = q->peer;
		if (pe->rx_known && pe->rx_conn == q->conn) {
			if (!pt_pkt_ready(p, pe, sizeof(c)))
				return n;
			pt_ctl_init(p, &c, pe->rx_epoch);
			c.a = q->sreq;
			c.b = q->rid;
			c.conn = pe->rx_conn;
			c.credit = pe->rx_consumed;
			pe->rx_reported = pe->rx_consumed;
			pe->ctl &= ~CTL_CREDIT;
			pt_send_ctl(p, pe, PW_CTS, pe->rx_key, &c);
			n++;
		}
		p->cts_head = q->next;
		if (!p->cts_head)
			p->cts_tail = NULL;
		free(q);
	}
	while (p->ctl_peers) {
		struct peer *pe = p->ctl_peers;
		if (pe->path == PATH_UNKNOWN && (pe->ctl & CTL_CONNECT)) {
			/* A port of our node: CONNECT only once we know the way (the retries of
			 * pt_live_check look again, until the timeout). */
			pt_path_resolve(p, pe);
			if (pe->path == PATH_UNKNOWN)
				pe->ctl &= ~CTL_CONNECT;
		}
		while (pe->ctl) {
			uint32_t f = pe->ctl & -pe->ctl;   /* lowest flag first */
			unsigned kind = 0;
			uint16_t key = 0;
			if (!pt_pkt_ready(p, pe, sizeof(c)))
				return n;
			pt_ctl_init(p, &c, 0);
			switch (f) {
			case CTL_CONNECT:
				kind = PW_CONNECT;
				key = pe->tx_key;
				c.conn = pe->tx_conn;
				p->st.connects++;
				break;
			case CTL_ACCEPT:
				kind = PW_ACCEPT;
				key = pe->rx_key;
				c.dst_epoch = pe->rx_epoch;
				c.a = (uint32_t)p->window;
				c.conn = pe->rx_conn;
				break;
			case CTL_CREDIT:
				kind = PW_CREDIT;
				key = pe->rx_key;
				c.dst_epoch = pe->rx_epoch;
				c.conn = pe->rx_conn;
				c.credit = pe->rx_consumed;
				pe->rx_reported = pe->rx_consumed;
				p->st.credit_pkts++;
				break;
			case CTL_PING1:
			case CTL_PING2:
				kind = PW_PING;
				c.a = f == CTL_PING1 ? 1 : 2;
				key = f == CTL_PING1 ? pe->tx_key : pe->rx_key;
				c.dst_epoch = f == CTL_PING1 ? pe->tx_remote_epoch : pe->rx_epoch;
				c.conn = f == CTL_PING1 ? pe->tx_conn : pe->rx_conn;
				p->st.pings++;
				break;
			case CTL_PONG1:
				kind = PW_PONG;
				c.a = 1;
				key = pe->rx_key;
				c.dst_epoch = pe->rx_epoch;
				c.conn = pe->pong1_conn;
				if (pe->rx_known && pe->rx_conn == pe->pong1_conn) {
					c.credit = pe->rx_consumed;
					pe->rx_reported = pe->rx_consumed;
				}
				break;
			case CTL_PONG2:
				kind = PW_PONG;
				c.a = 2;
				key = pe->tx_key;
				c.dst_epoch = pe->tx_remote_epoch;
				c.conn = pe->pong2_conn;
				break;
			case CTL_NACK1:
			case CTL_NACK2:
				kind = PW_NACK;
				c.a = f == CTL_NACK1 ? 1 : 2;
				c.b = f == CTL_NACK1 ? pe->nack1_key : pe->nack2_key;
				break;
			}
			pe->ctl &= ~f;
			if (kind) {
				pt_send_ctl(p, pe, kind, key, &c);
				n++;
			}
		}
		p->ctl_peers = pe->ctl_next;
		pe->in_ctl = 0;
		if (!p->ctl_peers)
			p->ctl_tail = &p->ctl_peers;
	}
	return n;
}
