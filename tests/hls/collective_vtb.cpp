// SPDX-License-Identifier: BSD-2-Clause
/*
 * The Migen side of the collective kernel's C++/Migen agreement (tests/hls/collagree.py):
 * a Verilator harness of CollectiveTop (hw/collective_core.py, the kernel's RTL ports).
 * Input and output as `collective_replay replay`: `seq NODE RADIX_LOG2` (a reset), then
 * messages `h NW W..` / `n NW W..`, each fed once the one before is done (ap_done);
 * per message `o HOST_OUT.. | NET_OUT..` (hex).
 *
 *   collective_vtb [STALL_SEED [CYCLES_FILE]] < SEQS
 *
 * STALL_SEED != 0: the input words come with random gaps and the outputs see random
 * backpressure (TREADY low), from that seed. CYCLES_FILE: per message `KIND WORDS CYCLES`,
 * cycles from its first word offered to its ap_done, both included.
 */
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "Vcollective_migen.h"
#include "verilated.h"

static Vcollective_migen *top;   /* never deleted: the process ends with it */
static uint64_t now;

static void tick()
{
	top->ap_clk = 1;
	top->eval();
	top->ap_clk = 0;
	top->eval();
	now++;
}

int main(int argc, char **argv)
{
	unsigned stall = argc > 1 ? (unsigned)std::strtoul(argv[1], nullptr, 0) : 0;
	FILE *cyc = argc > 2 ? std::fopen(argv[2], "w") : nullptr;
	std::mt19937 rng(stall ? stall : 1);
	VerilatedContext *ctx = new VerilatedContext;
	ctx->commandArgs(1, argv);
	top = new Vcollective_migen(ctx);
	top->ap_start = 1;
	top->ap_clk = 0;
	char cmd[16];
	while (std::scanf("%15s", cmd) == 1) {
		if (!std::strcmp(cmd, "seq")) {
			unsigned node, radix;
			if (std::scanf("%u %u", &node, &radix) != 2)
				return 2;
			top->node = node;
			top->radix_log2 = radix;
			top->host_in_TVALID = top->net_in_TVALID = 0;
			top->ap_rst = 1;
			tick();
			tick();
			top->ap_rst = 0;
			continue;
		}
		unsigned nw;
		if ((cmd[0] != 'h' && cmd[0] != 'n') || cmd[1] || std::scanf("%u", &nw) != 1)
			return 2;
		std::vector<uint64_t> m(nw), ho, no;
		for (auto &w : m)
			if (std::scanf("%" SCNx64, &w) != 1)
				return 2;
		bool host = cmd[0] == 'h';
		size_t k = 0;
		uint64_t start = now, limit = now + 100000 + 64 * (uint64_t)nw;
		bool done = false;
		while (!done) {
			if (now > limit) {
				std::fprintf(stderr, "collective_vtb: message %c of %u words: no ap_done after %" PRIu64
					     " cycles (%zu words taken)\n", cmd[0], nw, now - start, k);
				return 3;
			}
			bool offer = k < m.size() && (!stall || rng() % 4 != 0);
			uint64_t w = k < m.size() ? m[k] : 0;
			top->host_in_TVALID = host && offer;
			top->net_in_TVALID = !host && offer;
			top->host_in_TDATA = host ? w : 0;
			top->net_in_TDATA = host ? 0 : w;
			top->host_out_TREADY = !stall || rng() % 3 != 0;
			top->net_out_TREADY = !stall || rng() % 3 != 0;
			top->eval();
			if (offer && (host ? top->host_in_TREADY : top->net_in_TREADY))
				k++;
			if (top->host_out_TVALID && top->host_out_TREADY)
				ho.push_back(top->host_out_TDATA);
			if (top->net_out_TVALID && top->net_out_TREADY)
				no.push_back(top->net_out_TDATA);
			done = top->ap_done;
			tick();
		}
		if (k != m.size()) {
			std::fprintf(stderr, "collective_vtb: message %c of %u words (word 0 %" PRIx64 ") ended after %zu\n", cmd[0], nw, m.empty() ? 0 : m[0], k);
			return 3;
		}
		if (cyc)
			std::fprintf(cyc, "%c %u %" PRIu64 "\n", cmd[0], nw, now - start);
		std::printf("o");
		for (uint64_t x : ho)
			std::printf(" %" PRIx64, x);
		std::printf(" |");
		for (uint64_t x : no)
			std::printf(" %" PRIx64, x);
		std::printf("\n");
	}
	if (cyc)
		std::fclose(cyc);
	top->final();
	return 0;
}
