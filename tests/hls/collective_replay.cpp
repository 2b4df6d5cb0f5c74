// SPDX-License-Identifier: BSD-2-Clause
/*
 * The C++ side of the collective kernel's C++/Migen agreement (tests/hls/collagree.py).
 * Built with the csim benches' flags (paranic.hls.CXXFLAGS) against the kernel's sources.
 *
 *   collective_replay cluster < CASES    run model clusters (the input of collective_tb:
 *                                        case / cmd / run) and print every node's input
 *                                        messages, in the order its kernel took them:
 *                                          seq NODE RADIX_LOG2
 *                                          h NW W0 ..    a host command
 *                                          n NW W0 ..    a network packet
 *   collective_replay replay < SEQS      feed such sequences to one kernel (coll_step, one
 *                                        message per call, its outputs drained before the
 *                                        next) and print per message one line:
 *                                          o H0 H1 .. | N0 N1 ..   (host_out | net_out, hex)
 *                                        `seq` resets the kernel (coll_reset: the control
 *                                        state; the buffers keep their words, as the
 *                                        gateware's memories do over a reset).
 */
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "collective.h"

#define HFV(w, F) (((w) >> PN_HDR_##F##_SHIFT) & PN_HDR_##F##_MASK)
#define CFV(w, F) (((w) >> PN_COLLHDR_##F##_SHIFT) & PN_COLLHDR_##F##_MASK)

typedef std::vector<uint64_t> Msg;

static bool read_words(Msg &m)
{
	unsigned nw;
	if (std::scanf("%u", &nw) != 1)
		return false;
	m.resize(nw);
	for (auto &w : m)
		if (std::scanf("%" SCNx64, &w) != 1)
			return false;
	return true;
}

static void print_msg(char kind, const Msg &m)
{
	std::printf("%c %zu", kind, m.size());
	for (uint64_t w : m)
		std::printf(" %" PRIx64, w);
	std::printf("\n");
}

/* ---- cluster: the collective_tb's model cluster, recording each node's inputs ---------- */

struct Node {
	coll_state st;
	hls::stream<word_t> hi, ho, ni, no;
	std::deque<Msg> cmds;
	std::vector<std::pair<char, Msg>> log;   /* input messages, in the order taken */
	std::vector<unsigned> got_eps;
	int prev_ep = -1;
};

static bool got(const Node &nd, int ep)
{
	for (unsigned e : nd.got_eps)
		if ((int)e == ep)
			return true;
	return false;
}

static int run_cluster(unsigned n, unsigned radix, unsigned seed, std::vector<std::unique_ptr<Node>> &nodes)
{
	std::mt19937 rng(seed);
	std::map<std::pair<unsigned, unsigned>, std::deque<Msg>> chan;
	for (;;) {
		std::vector<int> choices;
		for (unsigned i = 0; i < n; i++)
			if (!nodes[i]->cmds.empty() && (nodes[i]->prev_ep < 0 || got(*nodes[i], nodes[i]->prev_ep)))
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
			nd.log.push_back({'h', nd.cmds.front()});
			nd.prev_ep = (int)CFV(nd.cmds.front()[0], EPISODE);
			nd.cmds.pop_front();
		} else {
			auto key = live[(size_t)(-1 - c)];
			at = key.second;
			for (uint64_t w : chan[key].front())
				nodes[at]->ni.write(w);
			nodes[at]->log.push_back({'n', chan[key].front()});
			chan[key].pop_front();
		}
		Node &nd = *nodes[at];
		while (coll_step(nd.st, nd.hi, nd.ho, nd.ni, nd.no, at, radix))
			;
		while (!nd.no.empty()) {
			uint64_t w0 = nd.no.read().to_uint64();
			unsigned len = HFV(w0, LENGTH), dst = HFV(w0, DST_NODE);
			Msg p{w0};
			for (unsigned k = 0; k < 1 + (len + 7) / 8; k++)
				p.push_back(nd.no.read().to_uint64());
			if (dst < n)
				chan[{at, dst}].push_back(p);
		}
		while (!nd.ho.empty()) {
			uint64_t h = nd.ho.read().to_uint64();
			unsigned nw = CFV(h, NODATA) ? 0 : (CFV(h, NBYTES) + 7) / 8;
			if (nw > PN_COLL_MAX_WORDS)
				nw = PN_COLL_MAX_WORDS;
			for (unsigned k = 0; k < nw; k++)
				nd.ho.read();
			nd.got_eps.push_back(CFV(h, EPISODE));
		}
	}
	for (unsigned i = 0; i < n; i++) {
		std::printf("seq %u %u\n", i, radix);
		for (auto &m : nodes[i]->log)
			print_msg(m.first, m.second);
	}
	return 0;
}

static int cluster_main()
{
	char cmd[16];
	unsigned n = 0, radix = 0, seed = 1;
	std::vector<std::unique_ptr<Node>> nodes;
	while (std::scanf("%15s", cmd) == 1) {
		if (!std::strcmp(cmd, "case")) {
			if (std::scanf("%u %u %u", &n, &radix, &seed) != 3 || n == 0 || n > PN_MAX_NODES)
				return 2;
			nodes.clear();
			for (unsigned i = 0; i < n; i++) {
				nodes.emplace_back(new Node());
				coll_reset(nodes.back()->st);
			}
		} else if (!std::strcmp(cmd, "cmd") || !std::strcmp(cmd, "exp")) {
			unsigned node;
			Msg m;
			if (std::scanf("%u", &node) != 1 || node >= n || !read_words(m))
				return 2;
			if (cmd[0] == 'c')
				nodes[node]->cmds.push_back(m);
		} else if (!std::strcmp(cmd, "run")) {
			run_cluster(n, radix, seed, nodes);
		} else {
			std::fprintf(stderr, "collective_replay: unknown command %s\n", cmd);
			return 2;
		}
	}
	return 0;
}

/* ---- replay: one kernel, one message at a time ---------------------------------------- */

static int replay_main()
{
	char cmd[16];
	std::unique_ptr<coll_state> st(new coll_state());    /* value-initialized: zeros */
	hls::stream<word_t> hi, ho, ni, no;
	unsigned node = 0, radix = 0;
	while (std::scanf("%15s", cmd) == 1) {
		if (!std::strcmp(cmd, "seq")) {
			if (std::scanf("%u %u", &node, &radix) != 2)
				return 2;
			coll_reset(*st);
			continue;
		}
		Msg m;
		if ((cmd[0] != 'h' && cmd[0] != 'n') || cmd[1] || !read_words(m)) {
			std::fprintf(stderr, "collective_replay: bad message %s\n", cmd);
			return 2;
		}
		for (uint64_t w : m)
			(cmd[0] == 'h' ? hi : ni).write(w);
		bool took = coll_step(*st, hi, ho, ni, no, node, radix);
		if (!took || !hi.empty() || !ni.empty()) {
			std::fprintf(stderr, "collective_replay: a message of %zu words was not taken whole\n", m.size());
			return 3;
		}
		std::printf("o");
		while (!ho.empty())
			std::printf(" %" PRIx64, (uint64_t)ho.read().to_uint64());
		std::printf(" |");
		while (!no.empty())
			std::printf(" %" PRIx64, (uint64_t)no.read().to_uint64());
		std::printf("\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !std::strcmp(argv[1], "cluster"))
		return cluster_main();
	if (argc == 2 && !std::strcmp(argv[1], "replay"))
		return replay_main();
	std::fprintf(stderr, "usage: collective_replay cluster|replay < input\n");
	return 2;
}
