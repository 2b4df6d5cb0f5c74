// SPDX-License-Identifier: BSD-2-Clause
/*
 * C-simulation testbench of the `collective` kernel: a cluster of nodes, each with its
 * own coll_state (the kernel's state), joined by a network that keeps each
 * (source, destination) pair in order and otherwise delivers in a random order, with
 * hosts that enter their operations at random times (docs/hls.md). In the manner of
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
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <algorithm>
#include <utility>
#include <vector>

#include "collective.h"

#define HFV(w, F) (((w) >> PN_HDR_##F##_SHIFT) & PN_HDR_##F##_MASK)
#define CFV(w, F) (((w) >> PN_COLLHDR_##F##_SHIFT) & PN_COLLHDR_##F##_MASK)

struct Node {
	coll_state st;
	hls::stream<word_t> hi{"host_in"}, ho{"host_out"}, ni{"net_in"}, no{"net_out"};
	std::deque<std::vector<uint64_t>> cmds;
	std::vector<std::vector<uint64_t>> exp, got;
	std::set<unsigned> got_eps;
	int prev_ep = -1;                 /* episode of the last command entered */
	unsigned entered = 0, results = 0;
};

static unsigned bad;

static int run_case(unsigned n, unsigned radix, unsigned seed, std::vector<std::unique_ptr<Node>> &nodes)
{
	std::mt19937 rng(seed);
	std::map<std::pair<unsigned, unsigned>, std::deque<std::vector<uint64_t>>> chan;
	unsigned events = 0;

	auto drain = [&](unsigned i) -> int {
		Node &nd = *nodes[i];
		while (!nd.no.empty()) {
			uint64_t w0 = nd.no.read().to_uint64();
			unsigned len = HFV(w0, LENGTH), dst = HFV(w0, DST_NODE);
			if (HFV(w0, TYPE) != PN_TYPE_COLLECTIVE || HFV(w0, SRC_NODE) != i || dst >= n || len < 8) {
				std::fprintf(stderr, "node %u sent a bad packet header %016" PRIx64 "\n", i, w0);
				return 1;
			}
			std::vector<uint64_t> p{w0};
			for (unsigned k = 0; k < 1 + (len + 7) / 8; k++)
				p.push_back(nd.no.read().to_uint64());
			chan[{i, dst}].push_back(p);
		}
		while (!nd.ho.empty()) {
			uint64_t h = nd.ho.read().to_uint64();
			unsigned nw = CFV(h, NODATA) ? 0 : (CFV(h, NBYTES) + 7) / 8;
			if (nw > PN_COLL_MAX_WORDS)
				nw = PN_COLL_MAX_WORDS;
			std::vector<uint64_t> r{h};
			for (unsigned k = 0; k < nw; k++)
				r.push_back(nd.ho.read().to_uint64());
			std::printf("res %u", i);
			for (uint64_t w : r)
				std::printf(" %016" PRIx64, w);
			std::printf("\n");
			nd.results++;
			nd.got_eps.insert(CFV(h, EPISODE));
			nd.got.push_back(r);
		}
		return 0;
	};

	for (;;) {
		std::vector<int> choices;           /* >= 0: a node enters; < 0: -1 - channel index */
		for (unsigned i = 0; i < n; i++)
			if (!nodes[i]->cmds.empty() &&
			    (nodes[i]->prev_ep < 0 || nodes[i]->got_eps.count((unsigned)nodes[i]->prev_ep)))
				choices.push_back((int)i);
		std::vector<std::pair<unsigned, unsigned>> live;
		for (auto &kv : chan)
			if (!kv.second.empty())
				live.push_back(kv.first);
		for (size_t k = 0; k < live.size(); k++)
			choices.push_back(-1 - (int)k);
		if (choices.empty())
			break;
		int c = choices[rng() % choices.size()];
		unsigned at;
		if (c >= 0) {
			at = (unsigned)c;
			Node &nd = *nodes[at];
			for (uint64_t w : nd.cmds.front())
				nd.hi.write(w);
			nd.prev_ep = (int)CFV(nd.cmds.front()[0], EPISODE);
			nd.cmds.pop_front();
			nd.entered++;
		} else {
			auto key = live[(size_t)(-1 - c)];
			at = key.second;
			for (uint64_t w : chan[key].front())
				nodes[at]->ni.write(w);
			chan[key].pop_front();
		}
		Node &nd = *nodes[at];
		if (at == 0) {                  /* the synthesized top: one message per call */
			while (!nd.hi.empty() || !nd.ni.empty()) {
				collective(nd.hi, nd.ho, nd.ni, nd.no, 0, radix);
				events++;
			}
		} else {
			while (coll_step(nd.st, nd.hi, nd.ho, nd.ni, nd.no, at, radix))
				events++;
		}
		if (drain(at))
			return 1;
	}
	auto by_episode = [](const std::vector<uint64_t> &a, const std::vector<uint64_t> &b) {
		return CFV(a[0], EPISODE) < CFV(b[0], EPISODE);
	};
	for (unsigned i = 0; i < n; i++) {
		Node &nd = *nodes[i];
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
	std::vector<std::unique_ptr<Node>> nodes;

	if (argc > 1 && !std::freopen(argv[1], "r", stdin)) {
		std::perror(argv[1]);
		return 2;
	}

	while (std::scanf("%15s", cmd) == 1) {
		if (!std::strcmp(cmd, "case")) {
			if (std::scanf("%u %u %u", &n, &radix, &seed) != 3 || n == 0 || n > PN_MAX_NODES)
				return 2;
			nodes.clear();
			for (unsigned i = 0; i < n; i++) {
				nodes.emplace_back(new Node);
				coll_reset(nodes.back()->st);
			}
		} else if (!std::strcmp(cmd, "cmd")) {
			unsigned node, nw;
			if (std::scanf("%u %u", &node, &nw) != 2 || node >= n)
				return 2;
			std::vector<uint64_t> c(nw);
			for (auto &w : c)
				if (std::scanf("%" SCNx64, &w) != 1)
					return 2;
			nodes[node]->cmds.push_back(c);
		} else if (!std::strcmp(cmd, "exp")) {
			unsigned node, nw;
			if (std::scanf("%u %u", &node, &nw) != 2 || node >= n)
				return 2;
			std::vector<uint64_t> e(nw);
			for (auto &w : e)
				if (std::scanf("%" SCNx64, &w) != 1)
					return 2;
			nodes[node]->exp.push_back(e);
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
