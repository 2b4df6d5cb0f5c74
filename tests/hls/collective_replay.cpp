// SPDX-License-Identifier: BSD-2-Clause
/*
 * The C++ side of the collective kernel's C++/Migen agreement (tests/hls/collagree.py).
 * Built with the csim benches' flags (paranic.hls.CXXFLAGS) against the kernel's sources.
 *
 *   collective_replay cluster < CASES    run the testbench's model clusters
 *                                        (collective_model.h; the input of collective_tb:
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
#include <memory>
#include <utility>
#include <vector>

#include "collective_model.h"

typedef coll_msg Msg;

static void print_msg(char kind, const Msg &m)
{
	std::printf("%c %zu", kind, m.size());
	for (uint64_t w : m)
		std::printf(" %" PRIx64, w);
	std::printf("\n");
}

/* ---- cluster: the testbench's model cluster, recording each node's inputs -------------- */

static int run_cluster(unsigned n, unsigned radix, unsigned seed, std::vector<std::unique_ptr<CollModelNode>> &nodes)
{
	std::vector<std::vector<std::pair<char, Msg>>> log(n);   /* inputs, in the order taken */
	unsigned events = 0;
	CollModelHooks hk;
	hk.input = [&](unsigned i, char kind, const Msg &m) { log[i].push_back({kind, m}); };
	hk.run = [&](unsigned i) -> unsigned {
		CollModelNode &nd = *nodes[i];
		unsigned calls = 0;
		while (coll_step(nd.st, nd.hi, nd.ho, nd.ni, nd.no, i, radix))
			calls++;
		return calls;
	};
	if (coll_model_run(n, seed, nodes, hk, &events))
		return 1;
	for (unsigned i = 0; i < n; i++) {
		std::printf("seq %u %u\n", i, radix);
		for (auto &m : log[i])
			print_msg(m.first, m.second);
	}
	return 0;
}

static int cluster_main()
{
	char cmd[16];
	unsigned n = 0, radix = 0, seed = 1;
	std::vector<std::unique_ptr<CollModelNode>> nodes;
	while (std::scanf("%15s", cmd) == 1) {
		if (!std::strcmp(cmd, "case")) {
			if (!coll_model_read_case(n, radix, seed, nodes, [] { return new CollModelNode(); }))
				return 2;
		} else if (!std::strcmp(cmd, "cmd") || !std::strcmp(cmd, "exp")) {
			unsigned node;
			Msg m;
			if (!coll_model_read_node_msg(n, node, m))
				return 2;
			if (cmd[0] == 'c')
				nodes[node]->cmds.push_back(m);
		} else if (!std::strcmp(cmd, "run")) {
			if (run_cluster(n, radix, seed, nodes))
				return 1;
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
		if ((cmd[0] != 'h' && cmd[0] != 'n') || cmd[1] || !coll_model_read_words(m)) {
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
