// SPDX-License-Identifier: BSD-2-Clause
/*
 * ParaNIC HLS kernel `route`: the routing function of one router input (docs/hls.md).
 *
 * Input: the header's destination, this node's coordinates and the topology's shape;
 * output: the router port (Port in paranic/spec/protocol.py: LOCAL, XP, XM, YP, YM, DROP).
 * A destination inside the table (dst < PN_ROUTE_TABLE_NODES) takes the table's entry,
 * which the firmware loads (it may route around failed links); one beyond it is routed
 * by dimension-order computation (X then Y, the shorter way round, ties split by
 * spec/c/pn_route.c's parity rule), so a 4096-node torus needs no 4096-entry table. A destination outside the topology: DROP.
 *
 * The RTL port list this signature exports is paranic.spec.kernels.ROUTE_PORTS; the
 * Migen twin (hw/route_fn.py) has the same ports and passes the same vectors.
 */
#ifndef PN_HLS_ROUTE_H
#define PN_HLS_ROUTE_H

#include <ap_int.h>

#include "paranic/pn_protocol.h"
#include "pn_hls.h"

typedef ap_uint<PN_NODE_BITS> node_t;
typedef ap_uint<PN_DIM_BITS> dim_t;
typedef ap_uint<PN_ROUTE_BITS> port_t;

port_t route(node_t dst, node_t node_x, node_t node_y, dim_t dim_x, dim_t dim_y,
	     const port_t table[PN_ROUTE_TABLE_NODES]);

/*
 * One dimension of dimension-order routing: from position a to b on a ring of n.
 * PN_PORT_LOCAL when a == b; else the shorter way round. A tie (d == n - d, b half way
 * round an even ring) goes + when a + key is even, else - (`key`: the destination's
 * coordinate in the other dimension), which is spec/c/pn_route.c's tie_up; the tests
 * take their vectors from it through paranic.spec.topo, so a change there shows up here
 * as a failing test.
 */
static inline port_t pn_dor_step(dim_t a, dim_t b, dim_t n, dim_t key, port_t plus, port_t minus)
{
#pragma HLS INLINE
	dim_t d = b >= a ? dim_t(b - a) : dim_t(b + n - a);   // hops going +
	if (d == 0)
		return PN_PORT_LOCAL;
	dim_t back = n - d;                                     // hops going -
	if (d == back)
		return ((a ^ key) & 1) == 0 ? plus : minus;
	return d < back ? plus : minus;
}

#endif
