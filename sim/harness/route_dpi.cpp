/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the route kernel's C++ route() (hls/route/route.cpp, compiled into the
 * harness with the kernels' own flags) called from the Verilated model through DPI-C by
 * route_dpi.sv, the module every router input of a simulated NicCore instantiates
 * (route_fn="sim"; docs/simulator.md, "The route kernel").
 */
#include <atomic>
#include <cstdint>

#include "route.h"

static std::atomic<uint64_t> route_calls;

/* The table entry the shell read through the kernel's ap_memory port, put in place:
 * route() reads table[dst] exactly when dst is inside the table. One table per thread:
 * with worker threads (paranic-sim --threads) several node models call this at once.
 * Called from the shell's combinational logic, which Verilator may evaluate several
 * times in a cycle: the same inputs give the same answer and leave the same table, and
 * nothing is counted here (pn_route_dpi_count, once per request). */
extern "C" int pn_route_dpi(int dst, int node_x, int node_y, int dim_x, int dim_y, int entry)
{
	static thread_local port_t table[PN_ROUTE_TABLE_NODES];
	node_t d = (unsigned)dst;
	table[(unsigned)d(PN_ROUTE_TABLE_ADDR_BITS - 1, 0)] = (unsigned)entry;
	return (int)route(d, node_t((unsigned)node_x), node_t((unsigned)node_y), dim_t((unsigned)dim_x),
			  dim_t((unsigned)dim_y), table).to_uint();
}

/* One routing decision made: called by the shell's clocked block once per request. */
extern "C" void pn_route_dpi_count()
{
	route_calls.fetch_add(1, std::memory_order_relaxed);
}

/* Routing decisions the C++ kernel made (the statistics line; 0 in a build whose routers
 * use another route_fn). */
uint64_t sim_route_dpi_calls()
{
	return route_calls.load(std::memory_order_relaxed);
}
