// SPDX-License-Identifier: BSD-2-Clause
// ParaNIC HLS kernel `route` (see route.h, docs/hls.md). Top function: route.
#include "route.h"

port_t route(node_t dst, node_t node_x, node_t node_y, dim_t dim_x, dim_t dim_y,
	     const port_t table[PN_ROUTE_TABLE_NODES])
{
	// One request per cycle; the block handshake (ap_start/ap_done) frames each, and
	// the scalars are plain wires sampled with ap_start (paranic.spec.kernels.ROUTE_PORTS).
#pragma HLS INTERFACE mode=ap_ctrl_hs port=return
#pragma HLS INTERFACE mode=ap_none port=dst
#pragma HLS INTERFACE mode=ap_none port=node_x
#pragma HLS INTERFACE mode=ap_none port=node_y
#pragma HLS INTERFACE mode=ap_none port=dim_x
#pragma HLS INTERFACE mode=ap_none port=dim_y
#pragma HLS INTERFACE mode=ap_memory port=table storage_type=ram_1p latency=1
#pragma HLS PIPELINE II=1
	ap_uint<2 * PN_DIM_BITS> nodes = dim_x * dim_y;
	if (dst >= nodes)
		return PN_PORT_DROP;
	if (dst < PN_ROUTE_TABLE_NODES)
		return table[dst(PN_ROUTE_TABLE_ADDR_BITS - 1, 0)];
	// Beyond the table: X first (in this row), then Y (in the destination's column).
	node_t dy = dst / dim_x;
	node_t dx = dst - dy * dim_x;
	port_t p = pn_dor_step(node_x, dx, dim_x, dy, PN_PORT_XP, PN_PORT_XM);
	if (p != PN_PORT_LOCAL)
		return p;
	return pn_dor_step(node_y, dy, dim_y, dx, PN_PORT_YP, PN_PORT_YM);
}
