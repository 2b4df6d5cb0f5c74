// SPDX-License-Identifier: BSD-2-Clause
/*
 * The testbenches' model cluster of the `collective` kernel (docs/hls.md): nodes, each
 * with the kernel's four streams and its own state; a network that keeps each (source,
 * destination) pair in order and otherwise delivers in a random order; hosts that enter
 * their commands in order, each once the result of the one before (same episode) is
 * there. Used by the C-simulation testbench (collective_tb.cpp) and by the C++ side of
 * the C++/Migen agreement (tests/hls/collective_replay.cpp), so both drive the kernel
 * through one scheduler.
 *
 * coll_model_run() asks the caller, through CollModelHooks, to run a node's kernel on
 * the input it was just given; it checks every packet a node sends (a collective packet
 * from that node to a node of the cluster, with a payload) and hands the caller each
 * result.
 */
#ifndef PN_HLS_COLLECTIVE_MODEL_H
#define PN_HLS_COLLECTIVE_MODEL_H

#include <cinttypes>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "collective.h"

#define PN_MODEL_HDR(w, F) (((w) >> PN_HDR_##F##_SHIFT) & PN_HDR_##F##_MASK)
#define PN_MODEL_COLL(w, F) (((w) >> PN_COLLHDR_##F##_SHIFT) & PN_COLLHDR_##F##_MASK)

typedef std::vector<uint64_t> coll_msg;

struct CollModelNode {
	coll_state st;
	hls::stream<word_t> hi{"host_in"}, ho{"host_out"}, ni{"net_in"}, no{"net_out"};
	std::deque<coll_msg> cmds;        /* host commands still to enter, in order */
	std::set<unsigned> got_eps;       /* episodes whose result came */
	int prev_ep = -1;                 /* episode of the last command entered */
	virtual ~CollModelNode() = default;
};

struct CollModelHooks {
	/* node `i` was given a message: kind 'h' (host command) or 'n' (network packet) */
	std::function<void(unsigned i, char kind, const coll_msg &m)> input;
	/* run node i's kernel until its input is consumed; returns the number of calls */
	std::function<unsigned(unsigned i)> run;
	/* a result on node i's host_out: the collective header word, then the vector */
	std::function<void(unsigned i, const coll_msg &r)> result;
};

/* The words of a result on host_out after its header word. */
static inline unsigned coll_model_result_words(uint64_t h)
{
	unsigned nw = PN_MODEL_COLL(h, NODATA) ? 0 : (PN_MODEL_COLL(h, NBYTES) + 7) / 8;
	return nw > PN_COLL_MAX_WORDS ? PN_COLL_MAX_WORDS : nw;
}

/* The scenario format both testbenches read (collective_tb.cpp's header comment):
 * "case N RADIX SEED" starts a case of N nodes, each with a reset kernel made by `make`;
 * "cmd NODE NW W0 .. W(NW-1)" (and "exp ..." the same way) gives a node's message in hex
 * words. Returns false on a malformed line. */
static inline bool coll_model_read_words(coll_msg &m)
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

static inline bool coll_model_read_node_msg(unsigned n, unsigned &node, coll_msg &m)
{
	return std::scanf("%u", &node) == 1 && node < n && coll_model_read_words(m);
}

static inline bool coll_model_read_case(unsigned &n, unsigned &radix, unsigned &seed,
					std::vector<std::unique_ptr<CollModelNode>> &nodes,
					const std::function<CollModelNode *()> &make)
{
	if (std::scanf("%u %u %u", &n, &radix, &seed) != 3 || n == 0 || n > PN_MAX_NODES)
		return false;
	nodes.clear();
	for (unsigned i = 0; i < n; i++) {
		nodes.emplace_back(make());
		coll_reset(nodes.back()->st);
	}
	return true;
}

/*
 * Run the cluster until no host has a command it may enter and no packet is in flight.
 * Returns 0, or 1 after a packet that is not a collective packet of the sender to a node
 * of the cluster (reported on stderr). *events counts the kernel calls.
 */
static inline int coll_model_run(unsigned n, unsigned seed, std::vector<std::unique_ptr<CollModelNode>> &nodes,
				 const CollModelHooks &hk, unsigned *events)
{
	std::mt19937 rng(seed);
	std::map<std::pair<unsigned, unsigned>, std::deque<coll_msg>> chan;

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
			return 0;
		int c = choices[rng() % choices.size()];
		unsigned at;
		if (c >= 0) {
			at = (unsigned)c;
			CollModelNode &nd = *nodes[at];
			const coll_msg &m = nd.cmds.front();
			for (uint64_t w : m)
				nd.hi.write(w);
			if (hk.input)
				hk.input(at, 'h', m);
			nd.prev_ep = (int)PN_MODEL_COLL(m[0], EPISODE);
			nd.cmds.pop_front();
		} else {
			auto key = live[(size_t)(-1 - c)];
			at = key.second;
			const coll_msg &m = chan[key].front();
			for (uint64_t w : m)
				nodes[at]->ni.write(w);
			if (hk.input)
				hk.input(at, 'n', m);
			chan[key].pop_front();
		}
		*events += hk.run(at);

		CollModelNode &nd = *nodes[at];
		while (!nd.no.empty()) {
			uint64_t w0 = nd.no.read().to_uint64();
			unsigned len = PN_MODEL_HDR(w0, LENGTH), dst = PN_MODEL_HDR(w0, DST_NODE);
			if (PN_MODEL_HDR(w0, TYPE) != PN_TYPE_COLLECTIVE || PN_MODEL_HDR(w0, SRC_NODE) != at ||
			    dst >= n || len < 8) {
				std::fprintf(stderr, "node %u sent a bad packet header %016" PRIx64 "\n", at, w0);
				return 1;
			}
			coll_msg p{w0};
			for (unsigned k = 0; k < 1 + (len + 7) / 8; k++)
				p.push_back(nd.no.read().to_uint64());
			chan[{at, dst}].push_back(p);
		}
		while (!nd.ho.empty()) {
			coll_msg r{nd.ho.read().to_uint64()};
			for (unsigned k = coll_model_result_words(r[0]); k > 0; k--)
				r.push_back(nd.ho.read().to_uint64());
			nd.got_eps.insert(PN_MODEL_COLL(r[0], EPISODE));
			if (hk.result)
				hk.result(at, r);
		}
	}
}

#endif
