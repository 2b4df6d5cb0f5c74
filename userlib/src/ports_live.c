/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: liveness. At most once a millisecond the progress engine walks the peers: a
 * CONNECT is repeated, backing off, until an ACCEPT comes or the timeout ends it
 * (-ECONNREFUSED); a peer that something depends on and that has been silent for a
 * quarter of the timeout is sent PING, again every quarter; no answer within the
 * timeout ends what depends on it with -ETIMEDOUT. A port of our node whose process is
 * gone is found by its inbox's owner instead (-ECONNRESET at once). PEER-DEAD from a
 * node's paranicd is a packet: on_peer_dead (ports_recv.c). Design of the layer:
 * ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "ports_int.h"

/* A port of our node whose process is gone (its inbox's owner; a closed port clears it):
 * what depends on it ends at once with -ECONNRESET, after what it published is read. */
static int shm_dead(pn_port_t *p, struct peer *pe)
{
	if (pn_shm_link_alive(pe->shm) || pn_shm_pending(p->shm, pe->ctx))
		return 0;
	p->st.shm_dead++;
	pt_tx_reset(p, pe, -ECONNRESET, 1);
	pt_rx_reset(p, pe, -ECONNRESET);
	pn_shm_link_close(p->shm, pe->shm, 0);
	pe->shm = NULL;
	p->st.shm_peers--;
	pe->path = PATH_UNKNOWN;
	pe->ping_sent = 0;
	return 1;
}

/* The walk over the peers (from the progress round, at most every LIVE_CHECK_NS of
 * ports_recv.c): CONNECT retries and refusal, dead same-node peers, PING, timeouts. */
void pt_live_check(pn_port_t *p)
{
	for (struct peer *pe = p->all_peers; pe; pe = pe->all_next) {
		int need1, need2;
		if (pe->tx_state == TX_CONNECTING) {
			if (p->now - pe->connect_t0 >= p->timeout_ns) {
				p->st.refused++;
				pt_tx_reset(p, pe, -ECONNREFUSED, 1);
				continue;
			}
			if (p->now - pe->connect_last >= pe->connect_wait) {
				pe->connect_last = p->now;
				pe->connect_wait *= 2;
				if (pe->connect_wait > CONNECT_RETRY_MAX_NS)
					pe->connect_wait = CONNECT_RETRY_MAX_NS;
				ctl_set(p, pe, CTL_CONNECT);
			}
		}
		need1 = pe->n_rts > 0;
		need2 = pe->n_rndv > 0 || (pe->eager_active && !pe->eager_active->discard);
		if (pe->path == PATH_SHM &&
		    (need1 || need2 || pe->sendq.head || (p->streamq.head && p->streamq.head->peer == pe)) &&
		    shm_dead(p, pe))
			continue;
		if (!need1 && !need2) {
			pe->ping_sent = 0;
			continue;
		}
		if (p->now - pe->last_heard < p->ping_ns)
			continue;
		if (!pe->ping_sent) {
			pe->ping_sent = pe->ping_last = p->now;
		} else if (p->now - pe->ping_sent >= p->timeout_ns) {
			p->st.timeouts++;
			pe->ping_sent = 0;
			if (need1)
				pt_tx_reset(p, pe, -ETIMEDOUT, 1);
			if (need2)
				pt_rx_reset(p, pe, -ETIMEDOUT);
			continue;
		} else if (p->now - pe->ping_last < p->ping_ns) {
			continue;
		}
		pe->ping_last = p->now;
		ctl_set(p, pe, (need1 ? CTL_PING1 : 0) | (need2 ? CTL_PING2 : 0));
	}
}
