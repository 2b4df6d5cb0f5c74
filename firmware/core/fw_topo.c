// SPDX-License-Identifier: BSD-2-Clause
/*
 * Recognising the topology from the database and assigning node ids and coordinates.
 * docs/firmware.md "Topology and node ids":
 *
 *  - the anchor is the node with the lowest uid among those with a configured id, or the
 *    lowest uid of all when none is configured;
 *  - X is the length of the anchor's XP walk back to itself, Y of its YP walk (a ring:
 *    Y = 1); every node must be in place: port XP of (x, y) cabled to port XM of
 *    (x+1, y), YP to YM of (x, y+1);
 *  - the anchor sits at its configured id's coordinates, else at (0, 0); every other node
 *    follows from the cabling, and its id is x + y * X (paranic.spec.topo's numbering).
 *
 * The cabling is taken from the neighbours each node has ever seen, so a link that is down
 * changes the routes (fw->down), never the topology.
 */
#include "fw.h"

#define NONE 0xffu

static unsigned int idx_of(struct fw *f, uint64_t uid)
{
	unsigned int i;

	for (i = 0; i < f->ndb; i++)
		if (f->db[i].lsa.uid == uid)
			return i;
	return NONE;
}

/* Database index of the node at the far end of `port` of node `i` (NONE: not known). */
static unsigned int nbr(struct fw *f, const uint8_t (*link)[FW_PORTS + 1], unsigned int i,
			unsigned int port)
{
	return link[i][port];
}

static int walk(struct fw *f, const uint8_t (*link)[FW_PORTS + 1], unsigned int start,
		unsigned int port)
{
	unsigned int cur = start, n = 0;

	do {
		cur = nbr(f, link, cur, port);
		n++;
		if (cur == NONE)
			return -1;
	} while (cur != start && n <= f->ndb);
	return cur == start ? (int)n : -2;
}

static uint32_t fnv(uint32_t h, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++) {
		h ^= (uint8_t)(v >> (8 * i));
		h *= 16777619u;
	}
	return h;
}

int fw_recognise(struct fw *f)
{
	static uint8_t link[FW_MAX_NODES][FW_PORTS + 1];
	static int16_t cx[FW_MAX_NODES], cy[FW_MAX_NODES];
	static uint8_t queue[FW_MAX_NODES];
	unsigned int i, p, anchor = NONE, head = 0, tail = 0;
	int X, Y;
	unsigned int nports = f->nports;

	/* Links of the structure, from every node's own report. */
	for (i = 0; i < f->ndb; i++) {
		const struct fw_lsa *l = &f->db[i].lsa;

		if (l->nports != nports)
			return -PN_FW_ERROR_TOPOLOGY;
		link[i][0] = NONE;
		for (p = 1; p <= FW_PORTS; p++) {
			link[i][p] = NONE;
			if (p <= nports && l->port[p].state != FW_PORT_UNUSED) {
				unsigned int j = idx_of(f, l->port[p].nbr_uid);

				if (j == NONE)
					return -EAGAIN;        /* the neighbour's LSA has not arrived */
				/* XP meets XM, YP meets YM */
				if (l->port[p].nbr_port != ((p & 1) ? p + 1 : p - 1))
					return -PN_FW_ERROR_TOPOLOGY;
				link[i][p] = (uint8_t)j;
			}
		}
	}
	for (i = 0; i < f->ndb; i++)
		for (p = 1; p <= nports; p++) {
			unsigned int j = link[i][p], back = (p & 1) ? p + 1 : p - 1;

			/* both ends must report the cable (one end seeing it is not enough yet) */
			if (j != NONE && link[j][back] != i)
				return link[j][back] == NONE ? -EAGAIN : -PN_FW_ERROR_TOPOLOGY;
		}

	for (i = 0; i < f->ndb; i++) {
		int cfg = f->db[i].lsa.cfg & PN_CFG_NODE_VALID;
		int acfg = anchor != NONE && (f->db[anchor].lsa.cfg & PN_CFG_NODE_VALID);

		if (anchor == NONE || (cfg && !acfg) ||
		    (!!cfg == !!acfg && f->db[i].lsa.uid < f->db[anchor].lsa.uid))
			anchor = i;
	}
	if (anchor == NONE)
		return -EAGAIN;
	X = walk(f, link, anchor, PN_PORT_XP);
	Y = nports == 4 ? walk(f, link, anchor, PN_PORT_YP) : 1;
	if (X == -1 || Y == -1)
		return -EAGAIN;
	if (X < 0 || Y < 0)
		return -PN_FW_ERROR_TOPOLOGY;
	if ((unsigned int)(X * Y) != f->ndb)
		return (unsigned int)(X * Y) > f->ndb ? -EAGAIN : -PN_FW_ERROR_TOPOLOGY;
	if ((unsigned int)(X * Y) > f->depth || X * Y > FW_MAX_NODES)
		return -PN_FW_ERROR_TOO_MANY;

	/* Coordinates by walking the cables from the anchor. */
	for (i = 0; i < f->ndb; i++)
		cx[i] = -1;
	if (f->db[anchor].lsa.cfg & PN_CFG_NODE_VALID) {
		unsigned int c = f->db[anchor].lsa.cfg & 0xfff;

		if (c >= (unsigned int)(X * Y))
			return -PN_FW_ERROR_ID_CONFLICT;
		cx[anchor] = (int16_t)(c % X);
		cy[anchor] = (int16_t)(c / X);
	} else {
		cx[anchor] = cy[anchor] = 0;
	}
	queue[tail++] = (uint8_t)anchor;
	while (head < tail) {
		unsigned int a = queue[head++];

		for (p = 1; p <= nports; p++) {
			unsigned int b = link[a][p];
			int bx = cx[a], by = cy[a];

			if (b == NONE)
				continue;
			switch (p) {
			case PN_PORT_XP: bx = (bx + 1) % X; break;
			case PN_PORT_XM: bx = (bx + X - 1) % X; break;
			case PN_PORT_YP: by = (by + 1) % Y; break;
			default: by = (by + Y - 1) % Y; break;
			}
			if (cx[b] < 0) {
				cx[b] = (int16_t)bx;
				cy[b] = (int16_t)by;
				queue[tail++] = (uint8_t)b;
			} else if (cx[b] != bx || cy[b] != by) {
				return -PN_FW_ERROR_TOPOLOGY;
			}
		}
	}
	if (tail != f->ndb)
		return -EAGAIN;
	/* ids, a bijection (distinct coordinates), configured ids respected */
	{
		static uint8_t seen[FW_MAX_NODES];

		for (i = 0; i < f->ndb; i++)
			seen[i] = 0;
		for (i = 0; i < f->ndb; i++) {
			unsigned int id = (unsigned int)(cx[i] + cy[i] * X);
			uint16_t cfg = f->db[i].lsa.cfg;

			if (seen[id]++)
				return -PN_FW_ERROR_TOPOLOGY;
			if ((cfg & PN_CFG_NODE_VALID) && (cfg & 0xfff) != id)
				return -PN_FW_ERROR_ID_CONFLICT;
			f->db[i].id = (int)id;
			f->by_id[id] = (uint8_t)i;
		}
	}

	/* Links out of service, by node id: a cable is out when either end says so. */
	f->X = (unsigned int)X;
	f->Y = (unsigned int)Y;
	for (i = 0; i < (unsigned int)(X * Y); i++)
		f->down[i] = 0;
	for (i = 0; i < f->ndb; i++)
		for (p = 1; p <= nports; p++)
			if (f->db[i].lsa.port[p].state != FW_PORT_UP)
				f->down[f->db[i].id] |= (uint8_t)(1u << (p - 1));
	i = idx_of(f, f->uid);
	f->id = (unsigned int)f->db[i].id;
	f->cx = (unsigned int)cx[i];
	f->cy = (unsigned int)cy[i];

	/* Fingerprint: (uid, down) by id, the same on every node that agrees. */
	{
		uint32_t h = 2166136261u;
		unsigned int id;

		h = fnv(h, (uint64_t)X | ((uint64_t)Y << 16));
		for (id = 0; id < (unsigned int)(X * Y); id++)
			for (i = 0; i < f->ndb; i++)
				if (f->db[i].id == (int)id)
					h = fnv(fnv(h, f->db[i].lsa.uid), f->down[id]);
		f->fingerprint = h;
	}
	return 0;
}
