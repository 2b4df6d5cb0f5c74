// SPDX-License-Identifier: BSD-2-Clause
/*
 * C-simulation testbench of the `route` kernel (docs/hls.md). Vectors on stdin, one
 * command per line (the Python side, paranic.hls, writes them from paranic.spec.topo):
 *
 *   topo X Y                 the topology's shape
 *   table NX NY e0 .. e255   this node's coordinates and its table (PN_ROUTE_TABLE_NODES entries)
 *   q DST                    route a packet to DST: prints the port, one per line
 *
 * The kernel is called as the RTL is driven: one call per request, table in an array.
 */
#include <cstdio>
#include <cstring>
#include <vector>

#include "route.h"

int main()
{
	char cmd[16];
	unsigned x = 1, y = 1, nx = 0, ny = 0;
	port_t table[PN_ROUTE_TABLE_NODES];
	std::vector<char> out;

	for (unsigned i = 0; i < PN_ROUTE_TABLE_NODES; i++)
		table[i] = PN_PORT_DROP;
	while (std::scanf("%15s", cmd) == 1) {
		if (!std::strcmp(cmd, "topo")) {
			if (std::scanf("%u %u", &x, &y) != 2)
				return 2;
		} else if (!std::strcmp(cmd, "table")) {
			if (std::scanf("%u %u", &nx, &ny) != 2)
				return 2;
			for (unsigned i = 0; i < PN_ROUTE_TABLE_NODES; i++) {
				unsigned v;
				if (std::scanf("%u", &v) != 1)
					return 2;
				table[i] = v;
			}
		} else if (!std::strcmp(cmd, "q")) {
			unsigned dst;
			if (std::scanf("%u", &dst) != 1)
				return 2;
			unsigned p = route(dst, nx, ny, x, y, table);
			std::printf("%u\n", p);
		} else {
			std::fprintf(stderr, "route_tb: unknown command %s\n", cmd);
			return 2;
		}
	}
	return 0;
}
