// SPDX-License-Identifier: BSD-2-Clause
/*
 * The firmware's main loop: links, neighbours, routes, link faults. docs/firmware.md.
 */
#include "fw.h"

#define SEQ_MASK ((1u << PN_LINK_SEQ_BITS) - 1)

static void zero(void *p, unsigned int n)
{
	uint8_t *b = p;

	while (n--)
		*b++ = 0;
}

static void status(struct fw *f, unsigned int r, uint32_t v)
{
	f->hw->status(f->hw->ctx, r, v);
}

static void publish(struct fw *f)
{
	uint32_t in = 0;
	unsigned int p;

	for (p = 1; p <= f->nports; p++)
		in |= (uint32_t)f->port[p].usable << (p - 1);
	status(f, PN_FW_REG_ERROR, f->error);
	status(f, PN_FW_REG_TOPO, f->X | f->Y << 16);
	status(f, PN_FW_REG_COORDS, f->cx | f->cy << 16);
	status(f, PN_FW_REG_EPOCH, f->epoch);
	status(f, PN_FW_REG_LINKS_IN, in);
	status(f, PN_FW_REG_REROUTES, f->reroutes);
	status(f, PN_FW_REG_LINK_DOWNS, f->link_downs);
	status(f, PN_FW_REG_EVACUATED, f->evacuated);
	status(f, PN_FW_REG_LOST, f->lost);
	status(f, PN_FW_REG_FINGERPRINT, f->fingerprint);
	status(f, PN_FW_REG_FLUSH_TIMEOUTS, f->flush_timeouts);
	status(f, PN_FW_REG_PHASE, f->phase);
	/* The state last: a reader that sees it sees the registers that go with it. */
	status(f, PN_FW_REG_STATE, f->state);
}

void fw_publish_state(struct fw *f)
{
	publish(f);
}

void fw_init(struct fw *f, const struct fw_hw *hw)
{
	void *ctx = hw->ctx;

	zero(f, sizeof(*f));
	f->hw = hw;
	f->cfg = hw->cfg_node(ctx) & (PN_CFG_NODE_VALID | 0xfff);
	f->uid = hw->dna(ctx);
	if (!f->uid)   /* no device DNA: the configured id must stand in for it */
		f->uid = (f->cfg & PN_CFG_NODE_VALID) ? 0xffff000000000000ull | (f->cfg & 0xfff) : 0;
	f->nports = hw->link_ports(ctx);
	if (f->nports > FW_PORTS)
		f->nports = FW_PORTS;
	f->depth = hw->table_depth(ctx);
	if (f->depth > FW_MAX_TABLE)
		f->depth = FW_MAX_TABLE;
	hw->ctx_reset_all(ctx);
	f->state = PN_FW_STATE_BOOT;
	if (!f->uid) {
		f->state = PN_FW_STATE_ERROR;
		f->error = PN_FW_ERROR_ID_CONFLICT;   /* neither DNA nor a configured id */
	}
	f->self_dirty = 1;
	publish(f);
}

/* -- packets ------------------------------------------------------------------------- */

/*
 * Where the management port injects its routed packets (mgmt_tx_target; link-local ones
 * take the control lanes whatever the target). Normally the router's local input; while
 * a link is DOWN, its own input instead: host packets for that link may fill the local
 * input and wait there until the route change this node's FLUSHes and ACKs are needed
 * for (docs/firmware.md, "Route changes"). While a link's packets are replayed, that
 * link's input. The management port applies a new target from the next packet it
 * starts, so the packets still in its TX FIFO (perhaps waiting behind that local input)
 * follow the new target too; fw_evacuate() waits until the input is empty, and the
 * target is back at 0 before the link restarts (restart_links()).
 */
static void tx_route(struct fw *f, unsigned int want)
{
	const struct fw_hw *hw = f->hw;

	if (f->tx_port != want) {
		hw->tx_target(hw->ctx, want);
		f->tx_port = want;
	}
}

static unsigned int control_port(const struct fw *f)
{
	unsigned int p;

	if (f->evac_port)
		return f->evac_port;
	for (p = 1; p <= f->nports; p++)
		if (f->port[p].frozen && f->port[p].hw == PN_LINK_STATE_DOWN)
			return p;
	return 0;
}

static void send_direct(struct fw *f, unsigned int port, enum fw_msg_kind k, const uint64_t *w,
			unsigned int n)
{
	const struct fw_hw *hw = f->hw;
	uint64_t h[2] = {0, fw_msg_tag(k)};
	unsigned int i;

	PN_SET(h, PN_HDR_TYPE, PN_TYPE_CONTROL);
	PN_SET(h, PN_HDR_LENGTH, n * 8);
	PN_SET(h, PN_HDR_DIRECT, port);   /* the control lane of link port `port` */
	PN_SET(h, PN_HDR_SRC_NODE, f->id);
	hw->tx_word(hw->ctx, h[0]);
	hw->tx_word(hw->ctx, h[1]);
	for (i = 0; i < n; i++)
		hw->tx_word(hw->ctx, w[i]);
	hw->tx_send(hw->ctx);
}

/* A port carries routes once its link is up, its neighbour known and its probation over. */
static void try_use(struct fw *f, struct fw_port *q, uint64_t now)
{
	if (!q->usable && q->up && q->nbr_known && now - q->up_since >= q->probation) {
		q->usable = 1;
		f->self_dirty = 1;
	}
}

static void receive(struct fw *f)
{
	const struct fw_hw *hw = f->hw;
	uint64_t w[2 + FW_LSA_WORDS];
	unsigned int n, i, port;

	while ((n = hw->rx_len(hw->ctx)) != 0) {
		for (i = 0; i < n; i++) {
			uint64_t v = hw->rx_word(hw->ctx);

			if (i < 2 + FW_LSA_WORDS)
				w[i] = v;
		}
		if (n < 2)
			continue;
		port = (unsigned int)PN_GET(w, PN_HDR_DIRECT);
		if (PN_GET(w, PN_HDR_TYPE) != PN_TYPE_CONTROL || (w[1] >> 32) != FW_MSG_MAGIC)
			continue;
		if (port == 0) {   /* routed: the route-change messages */
			if (n >= 2 + FW_FLUSH_WORDS)
				fw_plan_receive(f, (uint16_t)w[1], (unsigned int)PN_GET(w, PN_HDR_SRC_NODE),
						(uint32_t)w[2]);
			continue;
		}
		if (port > f->nports)
			continue;
		if ((uint16_t)w[1] == FW_MSG_HELLO && n >= 2 + FW_HELLO_WORDS) {
			struct fw_port *q = &f->port[port];
			uint64_t uid = w[2];
			uint8_t far = (uint8_t)(w[3] >> 16);

			if (!q->nbr_known || q->nbr_uid != uid || q->nbr_port != far) {
				q->nbr_known = 1;
				q->nbr_uid = uid;
				q->nbr_port = far;
				f->self_dirty = 1;
			}
			try_use(f, q, f->hw->now(f->hw->ctx));
		} else if ((uint16_t)w[1] == FW_MSG_LSA && n >= 2 + FW_LSA_MIN_WORDS) {
			struct fw_lsa l;

			fw_lsa_unpack(&l, &w[2], n - 2);
			fw_db_update(f, &l, port);
		}
	}
}

static void transmit(struct fw *f)
{
	const struct fw_hw *hw = f->hw;
	unsigned int p, i;
	uint64_t w[FW_LSA_WORDS];

	tx_route(f, control_port(f));
	if (!fw_plan_transmit(f))
		return;
	for (p = 1; p <= f->nports; p++) {
		struct fw_port *q = &f->port[p];
		uint64_t bit = 1u << (p - 1);

		if (!q->up) {
			for (i = 0; i < f->ndb; i++)
				f->db[i].pend &= ~bit;
			continue;
		}
		if (q->hello_due) {
			if (hw->tx_free(hw->ctx) < 2 + FW_HELLO_WORDS)
				return;
			w[0] = f->uid;
			w[1] = (f->cfg & 0xffff) | (uint64_t)p << 16 | (uint64_t)f->nports << 24;
			send_direct(f, p, FW_MSG_HELLO, w, FW_HELLO_WORDS);
			q->hello_due = 0;
		}
		for (i = 0; i < f->ndb; i++) {
			if (!(f->db[i].pend & bit))
				continue;
			if (hw->tx_free(hw->ctx) < 2 + FW_LSA_WORDS)
				return;
			send_direct(f, p, FW_MSG_LSA, w, fw_lsa_pack(&f->db[i].lsa, w));
			f->db[i].pend &= ~bit;
		}
	}
}

/* -- links --------------------------------------------------------------------------- */

static const struct fw_lsa_port *far_end(struct fw *f, const struct fw_port *q)
{
	struct fw_node *n = q->nbr_known ? fw_db_find(f, q->nbr_uid) : 0;

	return n && q->nbr_port >= 1 && q->nbr_port <= FW_PORTS ? &n->lsa.port[q->nbr_port] : 0;
}

static void links(struct fw *f, uint64_t now)
{
	const struct fw_hw *hw = f->hw;
	unsigned int p, i;

	for (p = 1; p <= f->nports; p++) {
		struct fw_port *q = &f->port[p];
		unsigned int st = hw->link_state(hw->ctx, p);

		q->hw = st;
		if (st == PN_LINK_STATE_DOWN) {
			if (q->frozen)
				continue;
			/* Taken out: everything it held waits in its replay buffer (evacuate()). */
			/* A link that comes back is used again after a probation time,
			 * doubled while it keeps failing soon after coming up. */
			if (q->up && now - q->up_since < FW_FLAP_WINDOW && q->probation) {
				q->probation *= 2;
				if (q->probation > FW_PROBATION_MAX)
					q->probation = FW_PROBATION_MAX;
			} else {
				q->probation = FW_PROBATION_MIN;
			}
			q->frozen = 1;
			q->up = q->usable = 0;
			q->downs++;
			q->rx_expect = (uint16_t)hw->rx_expect(hw->ctx, p);
			q->down_at = now;
			q->evac_go = 0;
			q->evac_deadline = now + FW_EVAC_TIMEOUT;
			f->link_downs++;
			f->self_dirty = 1;
		} else if (st == PN_LINK_STATE_UP) {
			if (!q->up) {
				q->up = 1;
				q->up_since = now;
				q->hello_due = 1;
				for (i = 0; i < f->ndb; i++)
					f->db[i].pend |= 1u << (p - 1);
			}
			try_use(f, q, now);
		} else if (q->up) {
			q->up = q->usable = 0;
			f->self_dirty = 1;
		}
	}
}

/*
 * Replay what failed link port p held by another path (docs/firmware.md "Link faults").
 * The far end's receive count at its DOWN (in its LSA) tells which of our unacknowledged
 * frames arrived: those before it did; the rest enter our router through the failed link's
 * own input (tx_target), ahead of every packet still queued for that link, stamped with
 * table set `set`. The link restarts later, once no route change is under way
 * (restart_links). Non-blocking: returns 1 when done, 0 to be called again.
 */
int fw_evacuate(struct fw *f, unsigned int p, unsigned int set, uint64_t now)
{
	const struct fw_hw *hw = f->hw;
	struct fw_port *q = &f->port[p];

	if (!q->frozen || q->replayed)
		return 1;
	if (!q->evac_go) {
		const struct fw_lsa_port *far = far_end(f, q);
		uint32_t first = hw->evac_first(hw->ctx, p), end = hw->evac_end(hw->ctx, p);
		uint32_t all = (end - first) & SEQ_MASK, got;

		/* Both ends of a cable go DOWN once per failure (loss of signal
		 * propagates), so equal down counts name the same failure. */
		if (far && far->downs == q->downs && far->state != FW_PORT_UP) {
			got = (far->rx_expect - first) & SEQ_MASK;
			if (got > all)    /* cannot be: count none as arrived, report all */
				got = all;
			q->evac_seq = (first + got) & SEQ_MASK;
		} else if ((int64_t)(now - q->evac_deadline) >= 0) {
			/* The far end never told: nothing can be replayed without risking a
			 * duplicate. Count them as lost (fw_lost) and go on. */
			f->lost += all;
			q->evac_seq = end;
		} else {
			return 0;
		}
		q->evac_end = end;
		q->evac_go = 1;
		q->evac_deadline = now + FW_FLUSH_TIMEOUT;
	}
	if (f->evac_port && f->evac_port != p)
		return 0;     /* another port's replay under way */
	tx_route(f, p);
	f->evac_port = p;
	while (q->evac_seq != q->evac_end) {
		unsigned int len = hw->evac_len(hw->ctx, p, q->evac_seq), i;
		uint64_t h[1] = {hw->evac_word(hw->ctx, p, q->evac_seq, 0)};

		/* Link-local control packets were for that link only: drop them (the
		 * neighbours exchange everything again when it returns). */
		if (!(PN_GET(h, PN_HDR_TYPE) == PN_TYPE_CONTROL && PN_GET(h, PN_HDR_DIRECT))) {
			if (hw->tx_free(hw->ctx) < len)
				return 0;
			PN_SET(h, PN_HDR_RT, set);
			hw->tx_word(hw->ctx, h[0]);
			for (i = 1; i < len; i++)
				hw->tx_word(hw->ctx, hw->evac_word(hw->ctx, p, q->evac_seq, i));
			hw->tx_send(hw->ctx);
			f->evacuated++;
		}
		q->evac_seq = (q->evac_seq + 1) & SEQ_MASK;
	}
	/* Done once every replayed packet has been granted an output (so it leaves before
	 * anything diverted later); a route that never frees gives up after a while. */
	if (!hw->tx_idle(hw->ctx)) {
		if ((int64_t)(now - q->evac_deadline) < 0)
			return 0;
		f->flush_timeouts++;
	}
	hw->tx_target(hw->ctx, 0);
	f->tx_port = 0;
	f->evac_port = 0;
	q->evac_go = 0;
	q->replayed = 1;
	f->dirty_status = 1;
	return 1;
}

/*
 * Restart the links whose replay buffers are evacuated, once no route change is under way.
 * Not earlier: a link whose cable is whole (taken out for its errors) trains again at once,
 * and while a change is under way the old table set still routes over it, so newer packets
 * would take it past the older ones that were replayed by another path (and divert, which
 * acts only on links that are not up, would stop moving them). Once idle, only the table
 * set in use carries packets, and it avoids the link until a later plan puts it back.
 */
static void restart_links(struct fw *f)
{
	const struct fw_hw *hw = f->hw;
	unsigned int p;

	if (f->phase != FW_PHASE_IDLE)
		return;
	for (p = 1; p <= f->nports; p++) {
		struct fw_port *q = &f->port[p];

		if (!q->frozen || !q->replayed)
			continue;
		/* The link's input may take nothing more from the management port once it
		 * trains. */
		if (f->tx_port == p) {
			hw->tx_target(hw->ctx, 0);
			f->tx_port = 0;
		}
		hw->link_restart(hw->ctx, p);
		q->frozen = q->replayed = 0;
		f->self_dirty = 1;
		f->dirty_status = 1;
	}
}

/* -- routes -------------------------------------------------------------------------- */

/* The topology from the database; the leader publishes route plans from it. */
static void route(struct fw *f)
{
	int r = fw_recognise(f);

	if (r == -EAGAIN) {
		if (!f->live)
			f->state = PN_FW_STATE_DISCOVER;
		return;
	}
	if (r < 0) {
		f->state = PN_FW_STATE_ERROR;
		f->error = (uint32_t)-r;
		return;
	}
	f->recognised = 1;
	fw_plan_lead(f);
}

void fw_poll(struct fw *f)
{
	const struct fw_hw *hw = f->hw;
	uint64_t now = hw->now(hw->ctx);

	if (!f->uid)
		return;
	links(f, now);
	receive(f);
	if (f->self_dirty)
		fw_db_self(f);
	if (f->db_dirty) {
		f->db_dirty = 0;
		route(f);
		f->dirty_status = 1;
	}
	fw_plan_step(f, now);
	restart_links(f);
	if (f->self_dirty)
		fw_db_self(f);
	transmit(f);
	if (f->dirty_status) {
		f->dirty_status = 0;
		publish(f);
	}
	if ((++f->polls & 63) == 0)
		status(f, PN_FW_REG_HEARTBEAT, ++f->heartbeat);
}
