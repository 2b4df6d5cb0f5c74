// SPDX-License-Identifier: BSD-2-Clause
/*
 * C-simulation testbench of the `route` kernel (docs/hls.md). Vectors from the file named
 * by the first argument (Vitis csim/cosim: -argv), else stdin, one command per line
 * (paranic.hls writes them from paranic.spec.topo):
 *
 *   topo X Y                 the topology's shape
 *   table NX NY e0 .. e255   this node's coordinates and its table (PN_ROUTE_TABLE_NODES entries)
 *   q DST [EXPECT]           route a packet to DST: prints the port, one per line; with
 *                            EXPECT, a different port is counted and the exit status is 1
 *
 * The kernel is called as the RTL is driven: one call per request, table in an array.
 */
#include <cstdio>
#include <cstring>
#include <vector>

#include "route.h"

int main(int argc, char **argv)
{
	char cmd[16];
	unsigned bad = 0;
	if (argc > 1 && !std::freopen(argv[1], "r", stdin)) {
		std::perror(argv[1]);
		return 2;
	}
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
			unsigned dst, expect;
			if (std::scanf("%u", &dst) != 1)
				return 2;
			unsigned p = route(dst, nx, ny, x, y, table);
			std::printf("%u\n", p);
			int c = std::getchar();       /* an EXPECT on the same line? */
			if (c == ' ' || c == '\t') {
				if (std::scanf("%u", &expect) == 1 && expect != p && bad++ < 10)
					std::fprintf(stderr, "route_tb: %ux%u node (%u,%u) dst %u: port %u, expected %u\n",
						     x, y, nx, ny, dst, p, expect);
			} else if (c != EOF) {
				std::ungetc(c, stdin);
			}
		} else {
			std::fprintf(stderr, "route_tb: unknown command %s\n", cmd);
			return 2;
		}
	}
	if (bad)
		std::fprintf(stderr, "route_tb: %u mismatches\n", bad);
	return bad ? 1 : 0;
}
