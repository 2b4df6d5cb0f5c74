// SPDX-License-Identifier: BSD-2-Clause
/*
 * Route changes that keep every source's packets in order. docs/firmware.md "Route changes".
 *
 * The router holds two table sets; a packet is routed by the set named in its header
 * (`rt`), stamped when it enters the network. A route change is a *plan*: a generation and
 * the failed links the tables avoid, published by the leader (the lowest node id this node
 * reaches) in its LSA, one at a time. Every node then:
 *
 *  1. ARMED: writes the plan's table into the set it does not inject with;
 *  2. EVAC, once every node it reaches has armed: replays what its failed links held
 *     through the failed link's own router input, stamped with the new set, so it leaves
 *     before anything queued for that link; then turns on divert (a packet of the old set
 *     bound for a link that is not up takes the new set);
 *  3. FLUSH: holds its host and barrier injection and sends a FLUSH, stamped with the old
 *     set, to every node it reaches: each FLUSH travels behind every packet this node
 *     sent to that node by the old routes, and the FLUSH_ACK says they all arrived;
 *  4. SWITCHED, once every ACK is in: injects with the new set and releases the hold.
 *     When every node has switched, no packet of the old set is left anywhere; divert
 *     goes off and the old set is free for the next plan.
 *
 * So a source's newer packets (new set) can never overtake its older ones (old set).
 */
#include "fw.h"

static int same_down(const uint8_t *a, const uint8_t *b, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

static void copy_down(uint8_t *to, const uint8_t *from, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		to[i] = from[i];
}

static unsigned int nodes(const struct fw *f)
{
	return f->X * f->Y;
}

static unsigned int route_to(const struct fw *f, const uint8_t *down, unsigned int dst)
{
	struct pn_route_topo t = {(uint16_t)f->X, (uint16_t)f->Y, down, PN_ROUTE_TIES_SPLIT};

	return pn_route(&t, f->id, dst);
}

static int reachable(const struct fw *f, const uint8_t *down, unsigned int dst)
{
	return route_to(f, down, dst) != PN_PORT_DROP;
}

static const struct fw_node *node_by_id(const struct fw *f, unsigned int id)
{
	unsigned int i = id < FW_MAX_NODES ? f->by_id[id] : 0xff;

	return i < f->ndb && f->db[i].id == (int)id ? &f->db[i] : 0;
}

/* The leader: the lowest node id this node reaches as its database says now (kept in
 * f->leader by fw_plan_lead(), which runs whenever the database changes). */
static unsigned int find_leader(const struct fw *f)
{
	unsigned int d;

	for (d = 0; d < nodes(f); d++)
		if (reachable(f, f->down, d))
			return d;
	return f->id;
}

/*
 * Every node reachable under `down` reports plan `gen` in use (armed_too: or loaded
 * beside the one in use).
 */
static int all_at(const struct fw *f, const uint8_t *down, uint32_t gen, int armed_too)
{
	unsigned int d;

	for (d = 0; d < nodes(f); d++) {
		const struct fw_node *n;

		if (!reachable(f, down, d))
			continue;
		n = node_by_id(f, d);
		if (!n || !(n->lsa.gen == gen || (armed_too && n->lsa.armed == gen)))
			return 0;
	}
	return 1;
}

/* The failed links of the database, both ends of a cable marked when either end says
 * so: plans differ only when routes do. */
static void cable_set(const struct fw *f, uint8_t *down)
{
	struct pn_route_topo t = {(uint16_t)f->X, (uint16_t)f->Y, f->down, PN_ROUTE_TIES_SPLIT};
	unsigned int d, p, fp, far;

	copy_down(down, f->down, FW_MAX_NODES);
	for (d = 0; d < nodes(f); d++)
		for (p = 1; p <= f->nports; p++)
			if (f->down[d] >> (p - 1) & 1) {
				far = pn_route_neighbor(&t, d, p, &fp);
				down[far] |= (uint8_t)(1u << (fp - 1));
			}
}

void fw_plan_lead(struct fw *f)
{
	uint8_t down[FW_MAX_NODES];
	uint32_t gen = 0;
	unsigned int i;

	if (!f->recognised)
		return;
	f->leader = find_leader(f);
	if (f->leader != f->id)
		return;
	cable_set(f, down);
	if (f->pub.gen && same_down(f->pub.down, down, nodes(f)))
		return;
	/* One plan at a time: the last one must be in use everywhere first. */
	if (f->pub.gen && !all_at(f, f->down, f->pub.gen, 0))
		return;
	/* A new leader continues above every generation it has seen. */
	for (i = 0; i < f->ndb; i++) {
		const struct fw_lsa *l = &f->db[i].lsa;

		if ((int32_t)(l->gen - gen) > 0)
			gen = l->gen;
		if ((int32_t)(l->plan - gen) > 0)
			gen = l->plan;
	}
	if ((int32_t)(f->pub.gen - gen) > 0)
		gen = f->pub.gen;
	if ((int32_t)(f->cur.gen - gen) > 0)
		gen = f->cur.gen;
	f->pub.gen = gen + 1 ? gen + 1 : 1;
	copy_down(f->pub.down, down, FW_MAX_NODES);
	f->self_dirty = 1;
}

/* The generation of the leader's current plan (0: none yet). */
static uint32_t leader_gen(const struct fw *f)
{
	unsigned int l = f->leader;
	const struct fw_node *n;

	if (l == f->id)
		return f->pub.gen;
	n = node_by_id(f, l);
	return n ? n->lsa.plan : 0;
}

/* The leader's current plan, whole (its failed-link set unpacked from the LSA). */
static void leader_plan(const struct fw *f, struct fw_plan *p)
{
	unsigned int l = f->leader, i;
	const struct fw_node *n;

	if (l == f->id) {
		*p = f->pub;
		return;
	}
	n = node_by_id(f, l);
	p->gen = n ? n->lsa.plan : 0;
	for (i = 0; i < FW_MAX_NODES; i++)
		p->down[i] = n ? fw_plan_down(n->lsa.plan_down, i) : 0;
}

/* Write plan `p`'s table for this node into table set `set` (only the entries that
 * differ from what the set holds). */
static void load(struct fw *f, unsigned int set, const struct fw_plan *p, uint8_t *table)
{
	const struct fw_hw *hw = f->hw;
	struct pn_route_topo t = {(uint16_t)f->X, (uint16_t)f->Y, p->down, PN_ROUTE_TIES_SPLIT};
	unsigned int d;

	pn_route_table(&t, f->id, table, f->depth);
	for (d = 0; d < f->depth; d++)
		if (!f->live || table[d] != f->set_table[set][d]) {
			hw->route_write(hw->ctx, set, d, table[d]);
			f->set_table[set][d] = table[d];
		}
}

/* State and error from the plan in use. */
static void settle(struct fw *f)
{
	struct pn_route_topo t = {(uint16_t)f->X, (uint16_t)f->Y, f->cur.down, PN_ROUTE_TIES_SPLIT};
	uint8_t table[FW_MAX_TABLE];
	unsigned int d, anydown = 0, lost;

	for (d = 0; d < nodes(f); d++)
		anydown |= f->cur.down[d];
	lost = pn_route_table(&t, f->id, table, f->depth);
	f->epoch = f->cur.gen;
	f->state = anydown ? PN_FW_STATE_DEGRADED : PN_FW_STATE_ROUTED;
	f->error = lost ? PN_FW_ERROR_PARTITIONED : PN_FW_ERROR_NONE;
	f->dirty_status = 1;
}

static void send_routed(struct fw *f, unsigned int dst, unsigned int set, enum fw_msg_kind k,
			uint32_t gen)
{
	const struct fw_hw *hw = f->hw;
	uint64_t h[2] = {0, fw_msg_tag(k)};

	PN_SET(h, PN_HDR_TYPE, PN_TYPE_CONTROL);
	PN_SET(h, PN_HDR_LENGTH, 8 * FW_FLUSH_WORDS);
	PN_SET(h, PN_HDR_DST_NODE, dst);
	PN_SET(h, PN_HDR_SRC_NODE, f->id);
	PN_SET(h, PN_HDR_RT, set);
	hw->tx_word(hw->ctx, h[0]);
	hw->tx_word(hw->ctx, h[1]);
	hw->tx_word(hw->ctx, gen);
	hw->tx_send(hw->ctx);
}

void fw_plan_receive(struct fw *f, unsigned int kind, unsigned int src, uint32_t gen)
{
	if (src >= FW_MAX_NODES)
		return;
	if (kind == FW_MSG_FLUSH) {
		f->ack_due |= 1ull << src;
		f->ack_gen[src] = gen;
	} else if (kind == FW_MSG_FLUSH_ACK && f->phase == FW_PHASE_FLUSH && gen == f->arm.gen) {
		f->flush_need &= ~(1ull << src);
	}
}

/* Send what is due: FLUSH_ACKs, then FLUSHes. 0: the TX is full, try again later. */
int fw_plan_transmit(struct fw *f)
{
	const struct fw_hw *hw = f->hw;
	unsigned int d;

	for (d = 0; f->ack_due && d < FW_MAX_NODES; d++) {
		if (!(f->ack_due & (1ull << d)))
			continue;
		if (hw->tx_free(hw->ctx) < 2 + FW_FLUSH_WORDS)
			return 0;
		/* By the set of the plan the FLUSH is for, which every node has loaded (the
		 * sender saw them all armed): an ACK never waits for a failed link. */
		send_routed(f, d, f->ack_gen[d] == f->cur.gen ? f->cur_set : !f->cur_set,
			    FW_MSG_FLUSH_ACK, f->ack_gen[d]);
		f->ack_due &= ~(1ull << d);
	}
	if (f->phase != FW_PHASE_FLUSH)
		return 1;
	for (d = 0; d < nodes(f); d++) {
		uint64_t bit = 1ull << d;

		if (!(f->flush_need & bit) || (f->flush_sent & bit))
			continue;
		if (hw->tx_free(hw->ctx) < 2 + FW_FLUSH_WORDS)
			return 0;
		send_routed(f, d, f->cur_set, FW_MSG_FLUSH, f->arm.gen);
		f->flush_sent |= bit;
	}
	return 1;
}

/* The cable on our link port p is out of service in `down` (either end says so). */
static int cable_down(const struct fw *f, const uint8_t *down, unsigned int p)
{
	struct pn_route_topo t = {(uint16_t)f->X, (uint16_t)f->Y, down, PN_ROUTE_TIES_SPLIT};
	unsigned int fp, far = pn_route_neighbor(&t, f->id, p, &fp);

	return (down[f->id] >> (p - 1) & 1) || (down[far] >> (fp - 1) & 1);
}

/* Links this plan takes out that are still up here (the far end saw the failure first):
 * take them down now, so what they hold is replayed with this plan. Then replay every
 * failed link of the plan. 1 when all are done. */
static int evacuate_plan(struct fw *f, uint64_t now)
{
	const struct fw_hw *hw = f->hw;
	unsigned int p, done = 1;

	for (p = 1; p <= f->nports; p++) {
		struct fw_port *q = &f->port[p];

		if (!cable_down(f, f->arm.down, p))
			continue;
		if (!q->frozen && !cable_down(f, f->cur.down, p) && q->hw == PN_LINK_STATE_UP) {
			hw->link_take_down(hw->ctx, p);
			done = 0;
			continue;
		}
		if (q->frozen && !fw_evacuate(f, p, !f->cur_set, now))
			done = 0;
	}
	return done;
}

void fw_plan_step(struct fw *f, uint64_t now)
{
	const struct fw_hw *hw = f->hw;
	static struct fw_plan p;      /* (not on the firmware's small stack) */
	unsigned int d, port;
	uint32_t gen;

	if (!f->recognised || !(gen = leader_gen(f)))
		return;
	if (!f->live) {
		leader_plan(f, &p);
		/* The first plan: nothing is in flight yet, load it into set 0 directly. */
		hw->set_node(hw->ctx, f->id);
		f->cur = f->arm = p;
		load(f, 0, &p, f->table);   /* !live: every entry of both sets written */
		load(f, 1, &p, f->table);
		f->live = 1;
		f->cur_set = 0;
		hw->inject_set(hw->ctx, 0);
		settle(f);
		f->self_dirty = 1;
		return;
	}
	switch (f->phase) {
	case FW_PHASE_IDLE:
		if ((int32_t)(gen - f->cur.gen) > 0) {
			uint8_t table[FW_MAX_TABLE];

			leader_plan(f, &p);
			f->arm = p;
			load(f, !f->cur_set, &p, table);
			f->phase = FW_PHASE_ARMED;
			f->dirty_status = 1;
			f->self_dirty = 1;
			break;
		}
		/* A link that failed after the plan in use already avoided it (it was
		 * not carrying routes): replay what it holds with the set in use. */
		for (port = 1; port <= f->nports; port++)
			if (f->port[port].frozen && cable_down(f, f->cur.down, port))
				fw_evacuate(f, port, f->cur_set, now);
		break;
	case FW_PHASE_ARMED:
		if (gen != f->arm.gen && (int32_t)(gen - f->arm.gen) > 0) {
			/* A newer plan before anyone could commit (a new leader): arm that. */
			uint8_t table[FW_MAX_TABLE];

			leader_plan(f, &p);
			f->arm = p;
			load(f, !f->cur_set, &p, table);
			f->self_dirty = 1;
			break;
		}
		if (!all_at(f, f->arm.down, f->arm.gen, 1))
			break;
		f->phase = FW_PHASE_EVAC;
		f->dirty_status = 1;
		/* fall through */
	case FW_PHASE_EVAC:
		if (!evacuate_plan(f, now))
			break;
		hw->divert(hw->ctx, 1, f->cur_set);
		hw->inject_hold(hw->ctx, 1);
		f->flush_need = f->flush_sent = 0;
		for (d = 0; d < nodes(f); d++) {
			unsigned int r = f->table[d];

			if (r >= PN_PORT_XP && r <= PN_PORT_YM)
				f->flush_need |= 1ull << d;
		}
		f->deadline = now + FW_FLUSH_TIMEOUT;
		f->phase = FW_PHASE_FLUSH;
		f->dirty_status = 1;
		break;
	case FW_PHASE_FLUSH:
		if (f->flush_need) {
			if ((int64_t)(now - f->deadline) < 0)
				break;
			/* Some FLUSH or its ACK is stuck (a second failure on its way): go on;
			 * order across this change is not guaranteed. */
			f->flush_timeouts++;
			f->flush_need = 0;
		}
		f->cur_set = !f->cur_set;
		hw->inject_set(hw->ctx, f->cur_set);
		hw->inject_hold(hw->ctx, 0);
		f->cur = f->arm;
		for (d = 0; d < f->depth; d++)
			f->table[d] = f->set_table[f->cur_set][d];
		f->reroutes++;
		settle(f);
		f->phase = FW_PHASE_SWITCHED;
		f->self_dirty = 1;
		break;
	case FW_PHASE_SWITCHED:
		if (!all_at(f, f->cur.down, f->cur.gen, 0))
			break;
		hw->divert(hw->ctx, 0, 0);
		f->phase = FW_PHASE_IDLE;
		f->dirty_status = 1;
		break;
	}
}
