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
 * One dimension: from position a to b on a ring of n positions (the other coordinate
 * fixed at `other`). Returns the port to take, PN_PORT_LOCAL when a == b, or
 * PN_PORT_DROP when both ways round are cut.
 */
static unsigned int step(const struct pn_route_topo *t, int dim, unsigned int a, unsigned int b,
			 unsigned int other)
{
	unsigned int n = dim ? t->y : t->x;
	unsigned int plus = dim ? PN_PORT_YP : PN_PORT_XP, minus = dim ? PN_PORT_YM : PN_PORT_XM;
	unsigned int d = (b + n - a) % n, way, len, i;

	if (d == 0)
		return PN_PORT_LOCAL;
	/* The shorter way first (ties: +), then the other one. */
	for (way = 0; way < 2; way++) {
		int up = (d <= n - d) ^ (int)way;
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
	p = step(t, 0, x, dx, y);          /* X first, in this node's row */
	if (p != PN_PORT_LOCAL)
		return p;
	return step(t, 1, y, dy, dx);      /* then Y, in the destination's column */
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
