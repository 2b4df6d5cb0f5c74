// SPDX-License-Identifier: BSD-2-Clause
/*
 * The topology database: one LSA per node, the newest (highest seq) of each, flooded
 * link by link. docs/firmware.md "Discovery".
 */
#include "fw.h"

struct fw_node *fw_db_find(struct fw *f, uint64_t uid)
{
	unsigned int i;

	for (i = 0; i < f->ndb; i++)
		if (f->db[i].lsa.uid == uid)
			return &f->db[i];
	return 0;
}

static uint64_t all_ports(const struct fw *f)
{
	return (1u << f->nports) - 1;
}

/*
 * Take an LSA that arrived on `from_port` (0: our own). Newer than what we hold: store it
 * and flood it on every other port. Returns 1 when the database changed.
 */
int fw_db_update(struct fw *f, const struct fw_lsa *l, unsigned int from_port)
{
	struct fw_node *n = fw_db_find(f, l->uid);

	if (l->uid == f->uid && from_port) {
		/* Our own LSA coming back (a neighbour with two cables to us floods it back)
		 * is ignored; one newer than ours is from before a restart: continue above it. */
		if ((int32_t)(l->seq - f->seq) > 0) {
			f->seq = l->seq + 1;
			f->self_dirty = 1;
		}
		return 0;
	}
	if (n && (int32_t)(l->seq - n->lsa.seq) <= 0)
		return 0;
	if (!n) {
		if (f->ndb == FW_MAX_NODES) {
			f->error = PN_FW_ERROR_TOO_MANY;
			return 0;
		}
		n = &f->db[f->ndb++];
		n->id = -1;
	}
	n->lsa = *l;
	n->pend = all_ports(f) & ~(from_port ? 1u << (from_port - 1) : 0);
	f->db_dirty = 1;
	return 1;
}

/* Our own LSA from the ports' state, with the next sequence number. */
void fw_db_self(struct fw *f)
{
	struct fw_lsa l;
	unsigned int p;

	l.uid = f->uid;
	l.seq = ++f->seq;
	l.cfg = (uint16_t)f->cfg;
	l.nports = (uint8_t)f->nports;
	l.port[0] = (struct fw_lsa_port){0, 0, 0, 0, 0};
	l.gen = f->cur.gen;
	l.armed = f->arm.gen;
	l.plan = f->pub.gen;
	for (p = 0; p < FW_PLAN_NODES / 16; p++)
		l.plan_down[p] = 0;
	for (p = 0; p < FW_MAX_NODES && p < FW_PLAN_NODES; p++)
		l.plan_down[p / 16] |= (uint64_t)(f->pub.down[p] & 15) << (4 * (p % 16));
	for (p = 1; p <= FW_PORTS; p++) {
		const struct fw_port *q = &f->port[p];
		struct fw_lsa_port *o = &l.port[p];

		o->nbr_uid = q->nbr_known ? q->nbr_uid : 0;
		o->nbr_port = q->nbr_known ? q->nbr_port : 0;
		o->downs = q->downs;
		o->rx_expect = q->rx_expect;
		if (p > f->nports || !q->nbr_known)
			o->state = FW_PORT_UNUSED;
		else if (q->usable)
			o->state = FW_PORT_UP;
		else if (q->frozen)
			o->state = FW_PORT_DOWN;
		else
			o->state = FW_PORT_RECOVERING;
	}
	fw_db_update(f, &l, 0);
	f->self_dirty = 0;
}
