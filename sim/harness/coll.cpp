// SPDX-License-Identifier: BSD-2-Clause
/*
 * paranic-sim: every node's collective kernel, run as the HLS kernel's own C++
 * (hls/collective/collective.cpp, compiled into the harness with the kernels' flags)
 * in place of the block, on the streams NicCore's collective unit brings out
 * (hw/collective.py, CollectiveExternal). See docs/simulator.md, "The collective kernel".
 *
 * Timing: the kernel handles one message per call, the network's first, as the
 * synthesized kernel with ap_start held high does. It takes the message in at one word
 * per cycle (ready only on the stream it is reading), then spends COLL_COMBINE_CYCLES
 * plus one cycle per vector word (the II=1 combining loop), then offers its output words
 * at one word per cycle on each output stream; it reads the next message once its
 * outputs have been taken. A combination costs more where its loop does:
 *  - tree: a float SUM's chain of one add per child (unrolled in the II=1 loop) adds its
 *    depth, PN_COLL_FADD_CYCLES per child, once;
 *  - all-to-all: the fold is the pairwise tree over member index, level by level, one
 *    combine per cycle in one pipelined loop (try_complete_a2a): a level's pairs' words,
 *    then, for a float SUM, idle cycles until the next level may read its results
 *    (coll_a2a_slots in collective.h: the next level's last pair reads this level's
 *    last results PN_COLL_FADD_CYCLES after they went in), and the pipeline's drain at
 *    the end. nodes - 1 combines per word in all; integer ops and MIN/MAX: no idle
 *    cycle, no drain. One member: no combine (its vector is the result). 8 members, one
 *    word, float SUM: 7 + 6 + 1 slots + 5 = 19 cycles (the node-order chain before it:
 *    8 * 5 = 40); 8 words: 32 + 16 + 8 + 5 = 61 (64); 32 words: 229 (256).
 * These are the cycles of the kernel's loops, not a synthesis report: the Migen twin's
 * or Vitis's figures replace them where they are known.
 */
#include "harness.h"

#if SIM_COLL
#include "collective.h"

/* Cycles between the last word of a message in and its first word out, besides one per
 * vector word: the kernel's reading of the header and its pipelines' depth. */
#define COLL_COMBINE_CYCLES 4

#define CH(h, F) (((h) >> PN_COLLHDR_##F##_SHIFT) & PN_COLLHDR_##F##_MASK)

static bool fsum(uint64_t h)
{
	return CH(h, RED) == PN_COLL_RED_SUM && (CH(h, DTYPE) == PN_COLL_T_F32 || CH(h, DTYPE) == PN_COLL_T_F64);
}

/* The all-to-all fold's cycles: the fold loop's slots (collective.h's schedule), then
 * its pipeline's drain. */
static uint64_t a2a_fold_cycles(unsigned nodes, unsigned dw, bool fadd)
{
	unsigned lat = fadd ? PN_COLL_FADD_CYCLES : 0;
	return nodes > 1 && dw ? coll_a2a_fold_slots(nodes, dw, lat) + lat : 0;
}

/* Cycles a message's combination takes beyond one per vector word (header `in` of the
 * message; `result`: a result header came out of it, `up`: an UP packet went out). */
static uint64_t fold_cycles(uint64_t in, bool result, bool up, unsigned node, unsigned radix_log2)
{
	unsigned nodes = (unsigned)CH(in, NODES), dw = ((unsigned)CH(in, NBYTES) + 7) / 8;
	if (dw > PN_COLL_MAX_WORDS)
		dw = PN_COLL_MAX_WORDS;
	if (CH(in, OP) != PN_COLL_OP_ALLREDUCE && CH(in, OP) != PN_COLL_OP_REDUCE)
		return 0;
	if (CH(in, A2A)) {
		if (!result || !nodes || nodes > PN_COLL_A2A_MAX_NODES)
			return 0;
		uint64_t f = a2a_fold_cycles(nodes, dw, fsum(in));
		return f > dw ? f - dw : 0;   /* the caller counts dw */
	}
	if (!(up || result) || !fsum(in) || !nodes || node >= nodes)
		return 0;
	unsigned root = (unsigned)CH(in, ROOT) % nodes, rel = (node + nodes - root) % nodes;
	uint64_t first = PN_COLL_FIRST_CHILD((uint64_t)rel, radix_log2), kids = 0;
	for (unsigned j = 0; j < (1u << radix_log2); j++)
		kids += first + j < nodes;
	return kids * PN_COLL_FADD_CYCLES;
}

class alignas(64) CollNode {   /* its node's thread writes it every cycle (windows) */
public:
	explicit CollNode(const CollPorts &p) : p(p) { coll_reset(st); }

	void pre(uint64_t cycle)
	{
		if (*p.rst) {   /* the unit is disabled: the kernel's state is held in reset */
			coll_reset(st);
			reading = Src::None;
			msg.clear();
			hq.clear();
			nq.clear();
			*p.net_in_ready = *p.host_in_ready = 0;
			*p.host_out_valid = *p.net_out_valid = 0;
			return;
		}
		if (reading == Src::None && idle()) {
			if (*p.net_in_valid)
				reading = Src::Net;
			else if (*p.host_in_valid)
				reading = Src::Host;
		}
		*p.net_in_ready = reading == Src::Net;
		*p.host_in_ready = reading == Src::Host;
		bool go = cycle >= out_at;
		*p.host_out_valid = go && !hq.empty();
		*p.host_out_data = hq.empty() ? 0 : hq.front();
		*p.net_out_valid = go && !nq.empty();
		*p.net_out_data = nq.empty() ? 0 : nq.front();
	}

	void post(uint64_t cycle)
	{
		if (*p.host_out_valid && *p.host_out_ready) {
			if (sim_verbose > 1)
				sim_log("node %u: host_out %016llx at cycle %llu", (unsigned)*p.node,
					(unsigned long long)hq.front(), (unsigned long long)cycle);
			hq.pop_front();
		}
		if (*p.net_out_valid && *p.net_out_ready) {
			if (sim_verbose > 1)
				sim_log("node %u: net_out %016llx at cycle %llu", (unsigned)*p.node,
					(unsigned long long)nq.front(), (unsigned long long)cycle);
			nq.pop_front();
		}
		if (reading == Src::Net && *p.net_in_valid)
			take(*p.net_in_data, cycle);
		else if (reading == Src::Host && *p.host_in_valid)
			take(*p.host_in_data, cycle);
	}

	bool idle() const { return hq.empty() && nq.empty(); }
	bool busy() const { return reading != Src::None || !idle(); }
	uint64_t messages = 0;

private:
	enum class Src { None, Net, Host };

	/* One word of the message being read; the whole message runs the kernel. */
	void take(uint64_t w, uint64_t cycle)
	{
		msg.push_back(w);
		if (msg.size() == 1) {
			if (reading == Src::Net)   /* two header words, then the payload */
				need = 2 + ((PN_GET((&w), PN_HDR_LENGTH) + 7) >> 3);
			else                       /* the collective header, then its vector */
				need = 1 + ((PN_GET((&w), PN_COLLHDR_NBYTES) + 7) >> 3);
		}
		if (msg.size() < need)
			return;
		hls::stream<word_t> &in = reading == Src::Net ? net_in : host_in;
		for (uint64_t v : msg)
			in.write(word_t(v));
		coll_step(st, host_in, host_out, net_in, net_out, node_t(*p.node), ap_uint<2>(*p.radix_log2));
		size_t words = 0, nq0 = nq.size(), hq0 = hq.size();
		while (!host_out.empty()) {
			hq.push_back(host_out.read().to_uint64());
			words++;
		}
		while (!net_out.empty()) {
			nq.push_back(net_out.read().to_uint64());
			words++;
		}
		uint64_t vec = msg.size() > 2 ? msg.size() - 2 : 0;
		uint64_t in_hdr = reading == Src::Net ? (msg.size() > 2 ? msg[2] : 0) : msg[0];
		bool result = hq.size() > hq0 && !CH(hq[hq0], NODATA);
		bool up = nq.size() > nq0 + 2 && CH(nq[nq0 + 2], PHASE) == PN_COLL_PHASE_UP;
		bool net_down = reading == Src::Net && CH(in_hdr, PHASE) == PN_COLL_PHASE_DOWN;
		uint64_t fold = words && !net_down ? fold_cycles(in_hdr, result, up, (unsigned)*p.node,
								  (unsigned)*p.radix_log2) : 0;
		out_at = cycle + 1 + COLL_COMBINE_CYCLES + (words ? vec : 0) + fold;
		if (sim_verbose)
			sim_log("node %u: collective kernel took a %s message of %zu words at cycle %llu: %zu words out"
				" (from node %u)", (unsigned)*p.node, reading == Src::Net ? "network" : "host", msg.size(),
				(unsigned long long)cycle, words,
				reading == Src::Net ? (unsigned)PN_GET((&msg[0]), PN_HDR_SRC_NODE) : (unsigned)*p.node);
		messages++;
		msg.clear();
		reading = Src::None;
	}

	CollPorts p;
	coll_state st;
	hls::stream<word_t> host_in, host_out, net_in, net_out;
	Src reading = Src::None;
	std::vector<uint64_t> msg;
	size_t need = 0;
	std::deque<uint64_t> hq, nq;
	uint64_t out_at = 0;
};

void Harness::coll_pre()
{
	for (CollNode *c : colls)
		c->pre(cycle);
}

void Harness::coll_post()
{
	for (CollNode *c : colls)
		c->post(cycle);
}

void Harness::coll_node(int n, bool post, uint64_t cyc)
{
	if (post)
		colls[n]->post(cyc);
	else
		colls[n]->pre(cyc);
}

bool Harness::coll_busy() const
{
	for (const CollNode *c : colls)
		if (c->busy())
			return true;
	return false;
}

void Harness::coll_attach(const NodePorts &p)
{
	colls.push_back(new CollNode(p.k));
}

/* Bring-up, as the barrier unit's: enabled, with the tree's fan-out. The first context
 * that sends a command owns the unit (hw/collective.py). */
void Harness::coll_init(Script *s)
{
	s->csr_write(PN_CSR_COLL_ENABLE, PN_CSR_COLL_ENABLE_SIZE, 0);
	s->csr_write(PN_CSR_COLL_RADIX_LOG2, PN_CSR_COLL_RADIX_LOG2_SIZE, cfg.radix_log2);
	s->csr_write(PN_CSR_COLL_ENABLE, PN_CSR_COLL_ENABLE_SIZE, 1);
}

/* As a driver would when a context closes: if it owns its node's unit, disable and enable
 * the unit, which frees it and resets the kernel, so that the next owner does not inherit
 * half an operation of a process that died in one. */
void Harness::coll_release(const Client *cl)
{
	int n = cl->node, ctx = cl->ctx;
	if (n < 0)
		return;
	Script *s = new Script;
	s->csr_read(PN_CSR_COLL_OWNED);
	s->csr_read(PN_CSR_COLL_CTX);
	s->done = [this, n, ctx](Script &sc) {
		if (!(sc.reads[0] & 1) || (int)sc.reads[1] != ctx)
			return;
		Script *t = new Script;
		t->csr_write(PN_CSR_COLL_ENABLE, PN_CSR_COLL_ENABLE_SIZE, 0);
		t->csr_write(PN_CSR_COLL_ENABLE, PN_CSR_COLL_ENABLE_SIZE, 1);
		hosts[n]->push_script(t, cycle);
		if (sim_verbose)
			sim_log("node %d: collective unit freed by ctx %d", n, ctx);
	};
	hosts[n]->push_script(s, cycle);
}

#else

void Harness::coll_pre() {}
void Harness::coll_post() {}
void Harness::coll_node(int, bool, uint64_t) {}
bool Harness::coll_busy() const { return false; }
void Harness::coll_attach(const NodePorts &) {}
void Harness::coll_init(Script *) {}
void Harness::coll_release(const Client *) {}

#endif
