// SPDX-License-Identifier: BSD-2-Clause
/*
 * C-simulation testbench of the `collective` kernel: the model cluster of
 * collective_model.h (nodes with their own coll_state, a network that keeps each
 * (source, destination) pair in order and otherwise delivers in a random order, hosts
 * that enter their operations at random times; docs/hls.md). In the manner of
 * ACCL's emulator: the kernel's C++ runs natively, one call per message. Node 0 runs
 * through the top function `collective` (its static state: the unit Vitis synthesizes,
 * so cosim puts the RTL in node 0's place); the others through coll_step on their own
 * coll_state. Every case must leave node 0's unit idle (every operation completed).
 *
 * Input from the file named by the first argument (Vitis: -argv), else stdin, per case:
 *   case NODES RADIX_LOG2 SEED
 *   cmd NODE NW W0 .. W(NW-1)      a host command (hex words: collective header, vector);
 *                                  a node's commands are entered in order, each once the
 *                                  result of the one before (same episode) is there.
 *                                  Results can overtake one another (a broadcast's root
 *                                  does not wait for the tree): hosts match them by episode
 *   exp NODE NW W0 ..              an expected result of NODE (optional; matched by episode)
 *   run                            simulate; prints per result `res NODE W0 ..` (hex), then
 *                                  `hang NODE` for a node still waiting, then `done EVENTS`.
 *                                  A hang, or a result other than expected, makes the exit
 *                                  status 1 (after all cases)
 */
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "collective_model.h"

struct Node : CollModelNode {
	std::vector<coll_msg> exp, got;
	unsigned entered = 0, results = 0;
};

static unsigned bad;

static int run_case(unsigned n, unsigned radix, unsigned seed, std::vector<std::unique_ptr<CollModelNode>> &nodes)
{
	unsigned events = 0;
	auto node = [&](unsigned i) -> Node & { return static_cast<Node &>(*nodes[i]); };
	CollModelHooks hk;
	hk.input = [&](unsigned i, char kind, const coll_msg &) {
		if (kind == 'h')
			node(i).entered++;
	};
	hk.run = [&](unsigned i) -> unsigned {
		Node &nd = node(i);
		unsigned calls = 0;
		if (i == 0) {                   /* the synthesized top: one message per call */
			while (!nd.hi.empty() || !nd.ni.empty()) {
				collective(nd.hi, nd.ho, nd.ni, nd.no, 0, radix);
				calls++;
			}
		} else {
			while (coll_step(nd.st, nd.hi, nd.ho, nd.ni, nd.no, i, radix))
				calls++;
		}
		return calls;
	};
	hk.result = [&](unsigned i, const coll_msg &r) {
		std::printf("res %u", i);
		for (uint64_t w : r)
			std::printf(" %016" PRIx64, w);
		std::printf("\n");
		node(i).results++;
		node(i).got.push_back(r);
	};
	if (coll_model_run(n, seed, nodes, hk, &events))
		return 1;

	auto by_episode = [](const coll_msg &a, const coll_msg &b) {
		return PN_MODEL_COLL(a[0], EPISODE) < PN_MODEL_COLL(b[0], EPISODE);
	};
	for (unsigned i = 0; i < n; i++) {
		Node &nd = node(i);
		if (nd.results < nd.entered || !nd.cmds.empty()) {
			std::printf("hang %u\n", i);
			bad++;
		}
		if (!nd.exp.empty()) {     /* results may come in another order: match by episode */
			std::stable_sort(nd.exp.begin(), nd.exp.end(), by_episode);
			std::stable_sort(nd.got.begin(), nd.got.end(), by_episode);
			if (nd.exp != nd.got) {
				std::fprintf(stderr, "collective_tb: node %u: results differ from the expected ones\n", i);
				bad++;
			}
		}
	}
	std::printf("done %u\n", events);
	return 0;
}

int main(int argc, char **argv)
{
	char cmd[16];
	unsigned n = 0, radix = PN_COLL_DEFAULT_RADIX_LOG2, seed = 1;
	std::vector<std::unique_ptr<CollModelNode>> nodes;

	if (argc > 1 && !std::freopen(argv[1], "r", stdin)) {
		std::perror(argv[1]);
		return 2;
	}

	while (std::scanf("%15s", cmd) == 1) {
		if (!std::strcmp(cmd, "case")) {
			if (!coll_model_read_case(n, radix, seed, nodes, [] { return new Node; }))
				return 2;
		} else if (!std::strcmp(cmd, "cmd") || !std::strcmp(cmd, "exp")) {
			unsigned node;
			coll_msg m;
			if (!coll_model_read_node_msg(n, node, m))
				return 2;
			if (cmd[0] == 'c')
				nodes[node]->cmds.push_back(m);
			else
				static_cast<Node &>(*nodes[node]).exp.push_back(m);
		} else if (!std::strcmp(cmd, "run")) {
			if (run_case(n, radix, seed, nodes))
				return 1;
			std::fflush(stdout);
		} else {
			std::fprintf(stderr, "collective_tb: unknown command %s\n", cmd);
			return 2;
		}
	}
	if (bad)
		std::fprintf(stderr, "collective_tb: %u failures\n", bad);
	return bad ? 1 : 0;
}
