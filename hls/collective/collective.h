// SPDX-License-Identifier: BSD-2-Clause
/*
 * ParaNIC HLS kernel `collective`: in-network reduce, allreduce and broadcast of small
 * vectors (up to PN_COLL_MAX_BYTES), combined hop by hop on a tree over node ids, as the
 * barrier unit (hw/barrier.py) combines barrier packets. docs/hls.md describes it whole.
 *
 * Streams of 64-bit words:
 *   host_in   a command from this node's host: the collective header word (PN_COLLHDR_*,
 *             paranic.spec.kernels.COLL_FIELDS), then ceil(nbytes / 8) vector words
 *   host_out  a result: the header word (phase DOWN, err), then the vector unless `nodata`
 *   net_in    a collective packet for this node: two network header words (type
 *             PN_TYPE_COLLECTIVE), the collective header word, the vector words
 *   net_out   collective packets this node sends (to its parent or its children)
 *
 * The tree: the k-ary heap (k = 2^radix_log2) over relative ids r = (node - root) mod
 * nodes. The reduction order is fixed, whatever order packets arrive in:
 *   partial(r) = ((own(r) op partial(c0)) op partial(c1)) ... op partial(c_last),
 * children in increasing relative id; the root's partial is the result, which goes
 * down the same tree unchanged, so every node receives the same bits.
 *
 * Every operation ends with a DOWN phase from the root (REDUCE: a header-only
 * completion to non-root nodes), so a host enters its next operation only after the
 * whole tree has finished its child slots for this one: one buffer per child suffices.
 *
 * All-to-all ALLREDUCE (header bit a2a, nodes <= PN_COLL_A2A_MAX_NODES): the host's
 * command goes, phase UP, to every other member at once (farthest first on a ring, as
 * the barrier's a2a_order); each node keeps every member's vector and, once it holds all
 * `nodes` of them, combines them in one fixed order, whatever order they came in: the
 * pairwise tree over member index, level by level,
 *   level 1: (v0 op v1), (v2 op v3), ...; level 2: pairs of those; ...
 * an odd one out passing up unchanged, so the same bits on every node. No DOWN phase: a
 * node that has its result may start the next operation and send its vector before a
 * slower node has finished this one, but not the one after (that needs the slower
 * node's next vector), so each member has a queue of two vectors (a2a_buf: two banks, a
 * head bit and a count per member).
 */
#ifndef PN_HLS_COLLECTIVE_H
#define PN_HLS_COLLECTIVE_H

#include <ap_int.h>
#include <hls_stream.h>

#include "paranic/pn_protocol.h"
#include "pn_hls.h"

typedef ap_uint<64> word_t;
typedef ap_uint<PN_NODE_BITS> node_t;

#define PN_COLL_MAX_KIDS (1 << PN_COLL_MAX_RADIX_LOG2)
/* Levels of the all-to-all fold's pairwise tree: log2(PN_COLL_A2A_MAX_NODES). */
#define PN_COLL_A2A_LEVELS 5
static_assert((1 << PN_COLL_A2A_LEVELS) == PN_COLL_A2A_MAX_NODES, "PN_COLL_A2A_LEVELS");
/* PN_COLL_FADD_CYCLES (pn_coll_spec.h, from spec/kernels.py): a float add's latency, the
 * depth the fold's schedule leaves between a result and its first use. */

/* The all-to-all fold's schedule (try_complete_a2a): level lv (stride 2^lv) of the
 * pairwise tree over `nodes` members has coll_a2a_pairs() pairs, x(i) op x(i + 2^lv) for
 * i = 0, 2^(lv+1), ... with i + 2^lv < nodes. The fold issues one combine per slot, level
 * after level, pair after pair, word after word; level lv has coll_a2a_slots() slots: its
 * pairs' words, then idle ones until the next level may read this level's results, `lat`
 * slots after they were issued. The next level's pair j reads this level's pairs 2j and
 * 2j + 1 (where there are), word w at the next level's start + j * dw + w, issued here at
 * this level's start + (2j + 1) * dw + w: so this level needs
 *   slots >= (2j + 1 - j) * dw + lat   for every such j (2j + 1 < pairs here),
 * at most floor(pairs / 2) * dw + lat. With `lat` = 0 no idle slot. */
static inline unsigned coll_a2a_pairs(unsigned nodes, unsigned lv)
{
	unsigned s = 1u << lv;
	return s < nodes ? ((nodes - 1 - s) >> (lv + 1)) + 1 : 0;
}

static inline unsigned coll_a2a_slots(unsigned nodes, unsigned lv, unsigned dw, unsigned lat)
{
	unsigned pairs = coll_a2a_pairs(nodes, lv), here = pairs * dw, wait = (pairs >> 1) * dw + lat;
	if (here == 0)                 /* no level here, or no words: nothing to wait for */
		return 0;
	return coll_a2a_pairs(nodes, lv + 1) && wait > here ? wait : here;
}

/* Every level's slots: the fold loop's trip count (its pipeline then drains: + lat). */
static inline unsigned coll_a2a_fold_slots(unsigned nodes, unsigned dw, unsigned lat)
{
	unsigned t = 0;
	for (unsigned lv = 0; lv < PN_COLL_A2A_LEVELS; lv++)
		t += coll_a2a_slots(nodes, lv, dw, lat);
	return t;
}

/* The state of one node's collective unit (the top function keeps one; the
 * testbench one per simulated node). */
struct coll_state {
	word_t own_hdr;                                   /* this host's command header */
	bool own_valid;
	word_t own[PN_COLL_MAX_WORDS];                    /* this host's vector */
	word_t kid_hdr[PN_COLL_MAX_KIDS];                 /* child j's UP header */
	ap_uint<PN_COLL_MAX_KIDS> kid_valid;
	word_t kid[PN_COLL_MAX_KIDS][PN_COLL_MAX_WORDS];  /* child j's subtree vector */
	word_t down[PN_COLL_MAX_WORDS];                   /* a DOWN packet's vector, passed on */
	ap_uint<2> stray;                                 /* err bits for a packet that fit nowhere */
	/* all-to-all: per member a queue of (up to) two vectors, in two banks */
	word_t a2a_hdr[2][PN_COLL_A2A_MAX_NODES];
	word_t a2a_buf[2][PN_COLL_A2A_MAX_NODES][PN_COLL_MAX_WORDS];
	ap_uint<PN_COLL_A2A_MAX_NODES> a2a_head;        /* bank of member s's oldest vector */
	ap_uint<PN_COLL_A2A_MAX_NODES> a2a_one, a2a_two; /* member s holds >= 1 / 2 vectors */
	word_t a2a_acc[PN_COLL_A2A_MAX_NODES / 2][PN_COLL_MAX_WORDS]; /* the fold's partials: x[2r] in row r */
};

void coll_reset(coll_state &st);

/* Handle at most one message: a packet from net_in if one waits, else a command from
 * host_in. Returns true when it handled one. */
bool coll_step(coll_state &st, hls::stream<word_t> &host_in, hls::stream<word_t> &host_out,
	       hls::stream<word_t> &net_in, hls::stream<word_t> &net_out,
	       node_t node, ap_uint<2> radix_log2);

/* The top function Vitis synthesizes: coll_step on a static state. */
void collective(hls::stream<word_t> &host_in, hls::stream<word_t> &host_out,
		hls::stream<word_t> &net_in, hls::stream<word_t> &net_out,
		node_t node, ap_uint<2> radix_log2);

/* One element-wise combination of two vector words (both lanes of a 32-bit type). */
word_t coll_combine(word_t a, word_t b, ap_uint<2> dtype, ap_uint<3> red);

#endif
