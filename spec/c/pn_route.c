// SPDX-License-Identifier: BSD-2-Clause
/* ParaNIC routing: see pn_route.h. */
#include "pn_route.h"

static unsigned int wrap(int v, unsigned int n)
{
	int m = v % (int)n;
	return (unsigned int)(m < 0 ? m + (int)n : m);
}

unsigned int pn_route_node(const struct pn_route_topo *t, int x, int y)
{
	return wrap(x, t->x) + wrap(y, t->y) * t->x;
}

unsigned int pn_route_neighbor(const struct pn_route_topo *t, unsigned int node,
			       unsigned int port, unsigned int *far_port)
{
	int x = (int)(node % t->x), y = (int)(node / t->x);
	unsigned int back;

	switch (port) {
	case PN_PORT_XP: x++; back = PN_PORT_XM; break;
	case PN_PORT_XM: x--; back = PN_PORT_XP; break;
	case PN_PORT_YP: y++; back = PN_PORT_YM; break;
	case PN_PORT_YM: y--; back = PN_PORT_YP; break;
	default: back = PN_PORT_LOCAL; break;
	}
	if (far_port)
		*far_port = back;
	return pn_route_node(t, x, y);
}

/* Is the hop out of `node` on `port` usable? Both ends of the cable must agree. */
static int hop_ok(const struct pn_route_topo *t, unsigned int node, unsigned int port)
{
	unsigned int far_port, far;

	if (!t->down)
		return 1;
	far = pn_route_neighbor(t, node, port, &far_port);
	return !(t->down[node] & (1u << (port - 1))) && !(t->down[far] & (1u << (far_port - 1)));
}

/*
 * The way to take when b lies exactly half way round from a (an even ring): + or -.
 * `key` is the destination's coordinate in the other dimension (0 on a ring). Going
 * + when a + key is even and - when it is odd sends half of the sources of a ring
 * (and, on a torus, half of each source's destinations in the far column or row)
 * each way, so both directions carry the same share of the ties. Only the node where
 * the packet enters this dimension ever sees the tie (one hop later the rest of the
 * way is shorter than half), so a (source, destination) pair always goes the same
 * way. PN_ROUTE_TIES_PLUS sends every tie +, the rule before ties were split.
 */
static int tie_up(const struct pn_route_topo *t, unsigned int a, unsigned int key)
{
	if (t->ties == PN_ROUTE_TIES_PLUS)
		return 1;
	return ((a + key) & 1u) == 0;
}

/*
 * One dimension: from position a to b on a ring of n positions (the other coordinate
 * fixed at `other`; `key`: see tie_up). Returns the port to take, PN_PORT_LOCAL when
 * a == b, or PN_PORT_DROP when both ways round are cut.
 */
static unsigned int step(const struct pn_route_topo *t, int dim, unsigned int a, unsigned int b,
			 unsigned int other, unsigned int key)
{
	unsigned int n = dim ? t->y : t->x;
	unsigned int plus = dim ? PN_PORT_YP : PN_PORT_XP, minus = dim ? PN_PORT_YM : PN_PORT_XM;
	unsigned int d = (b + n - a) % n, way, len, i;
	int first;

	if (d == 0)
		return PN_PORT_LOCAL;
	first = 2 * d == n ? tie_up(t, a, key) : d < n - d;
	/* The shorter way first (ties: tie_up), then the other one. */
	for (way = 0; way < 2; way++) {
		int up = first ^ (int)way;
		unsigned int port = up ? plus : minus;
		unsigned int pos = a;
		int clear = 1;

		len = up ? d : n - d;
		for (i = 0; i < len && clear; i++) {
			unsigned int node = dim ? pn_route_node(t, (int)other, (int)pos)
						: pn_route_node(t, (int)pos, (int)other);
			clear = hop_ok(t, node, port);
			pos = up ? (pos + 1) % n : (pos + n - 1) % n;
		}
		if (clear)
			return port;
	}
	return PN_PORT_DROP;
}

unsigned int pn_route(const struct pn_route_topo *t, unsigned int node, unsigned int dst)
{
	unsigned int nodes = (unsigned int)t->x * t->y;
	unsigned int x, y, dx, dy, p;

	if (dst >= nodes || node >= nodes)
		return PN_PORT_DROP;
	x = node % t->x;
	y = node / t->x;
	dx = dst % t->x;
	dy = dst / t->x;
	p = step(t, 0, x, dx, y, dy);      /* X first, in this node's row */
	if (p != PN_PORT_LOCAL)
		return p;
	return step(t, 1, y, dy, dx, dx);  /* then Y, in the destination's column */
}

unsigned int pn_route_table(const struct pn_route_topo *t, unsigned int node,
			    uint8_t *table, unsigned int depth)
{
	unsigned int d, lost = 0;

	for (d = 0; d < depth; d++) {
		table[d] = (uint8_t)pn_route(t, node, d);
		lost += d < (unsigned int)t->x * t->y && table[d] == PN_PORT_DROP;
	}
	return lost;
}
