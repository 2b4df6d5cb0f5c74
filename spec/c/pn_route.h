/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ParaNIC routing: the one definition of the routing function.
 *
 * Dimension-order routing on a ring (x by 1) or a 2-D torus (x by y): X first, then Y,
 * each along the shorter way round, exactly as docs/architecture.md describes. A
 * destination exactly half way round an even ring (a tie) goes + or - by the parity rule
 * of pn_route.c's tie_up, which splits ties evenly between the two directions; a given
 * (source, destination) pair always takes the same way. A failed cable turns its ring (the row or column it lies in) into a line:
 * a hop sequence that would cross it goes the other way round instead; when both ways
 * are cut, the destination is unreachable from here (PN_PORT_DROP).
 *
 * Compiled into the SoC firmware (which reloads the router's table when a link fails or
 * returns) and loaded by the Python spec (paranic.spec.topo, `paranic topo`) through
 * ctypes, so the tables a host computes and the ones the firmware loads are the same.
 * Freestanding: no library calls, no allocation.
 */
#ifndef PN_ROUTE_H
#define PN_ROUTE_H

#include <stdint.h>

#include "paranic/pn_protocol.h"

struct pn_route_topo {
	uint16_t x, y;          /* dimensions: a ring of n nodes is n x 1 */
	/*
	 * down[node]: bit (port - 1) set when the link leaving `node` on link port `port`
	 * (PN_PORT_XP..PN_PORT_YM) is out of service; NULL: every link is in service. A
	 * cable is out when either of its two ends says so.
	 */
	const uint8_t *down;
	/* PN_ROUTE_TIES_SPLIT (0, what a zero-initialised struct gets): ties split by
	 * parity; PN_ROUTE_TIES_PLUS: every tie goes + (for comparison in benchmarks). */
	unsigned int ties;
};

#define PN_ROUTE_TIES_SPLIT 0u
#define PN_ROUTE_TIES_PLUS  1u

/* Node id of the node at (x, y) (coordinates taken modulo the dimensions). */
unsigned int pn_route_node(const struct pn_route_topo *t, int x, int y);

/* The node at the far end of link port `port` of `node`, and the port it arrives on. */
unsigned int pn_route_neighbor(const struct pn_route_topo *t, unsigned int node,
			       unsigned int port, unsigned int *far_port);

/* Output port at `node` for a packet to `dst`: PN_PORT_LOCAL .. PN_PORT_YM, or
 * PN_PORT_DROP (dst outside the topology, or cut off by failed links). */
unsigned int pn_route(const struct pn_route_topo *t, unsigned int node, unsigned int dst);

/* The routing table of `node`: table[d] = pn_route(t, node, d) for d < depth
 * (PN_PORT_DROP beyond the topology). Returns the number of unreachable nodes. */
unsigned int pn_route_table(const struct pn_route_topo *t, unsigned int node,
			    uint8_t *table, unsigned int depth);

#endif /* PN_ROUTE_H */
