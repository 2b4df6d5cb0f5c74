// SPDX-License-Identifier: BSD-2-Clause
// ParaNIC HLS kernel `collective` (see collective.h, docs/hls.md). Top function: collective.
#include <cstdint>
#include <cstring>

#include "collective.h"

/* A field of the collective header word / of network header word 0, as an lvalue range. */
#define CF(w, F) (w).range(PN_COLLHDR_##F##_SHIFT + PN_COLLHDR_##F##_WIDTH - 1, PN_COLLHDR_##F##_SHIFT)
#define HF(w, F) (w).range(PN_HDR_##F##_SHIFT + PN_HDR_##F##_WIDTH - 1, PN_HDR_##F##_SHIFT)
#define CMASK(F) ((uint64_t)PN_COLLHDR_##F##_MASK << PN_COLLHDR_##F##_SHIFT)

/* Header bits every contribution of one operation must agree on. */
static const uint64_t AGREE = ~(CMASK(PHASE) | CMASK(ERR) | CMASK(NODATA) | CMASK(REFUSED) | (0x1ull << (PN_COLLHDR_A2A_SHIFT + 1)));   /* rsvd: no macro */

/* ---- element operations ------------------------------------------------------------- */

static float as_f32(ap_uint<32> v) { uint32_t u = v.to_uint(); float f; std::memcpy(&f, &u, 4); return f; }
static ap_uint<32> bits32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static double as_f64(ap_uint<64> v) { uint64_t u = v.to_uint64(); double f; std::memcpy(&f, &u, 8); return f; }
static ap_uint<64> bits64(double f) { uint64_t u; std::memcpy(&u, &f, 8); return u; }

/* a op b. MIN/MAX return one of the two operands' bits unchanged (b only when strictly
 * better), so the choice between -0.0 and +0.0 or a NaN is defined too. A float SUM that
 * is a NaN is the positive quiet NaN (canonical): which operand's NaN payload `x + y`
 * keeps depends on the compiler's operand order (x86 SSE keeps its first source's), and
 * the gateware twin (hw/collective_core.py) gives the same bits. AND/OR on a float type
 * are refused as BAD_ARGS before any data is combined. */
static ap_uint<32> op32(ap_uint<32> a, ap_uint<32> b, bool flt, ap_uint<3> red)
{
#pragma HLS INLINE
	if (flt) {
		float x = as_f32(a), y = as_f32(b);
		if (red == PN_COLL_RED_SUM) {
			float r = x + y;
			return r != r ? ap_uint<32>(PN_COLL_F32_QNAN) : bits32(r);
		}
		if (red == PN_COLL_RED_MIN) return y < x ? b : a;
		if (red == PN_COLL_RED_MAX) return y > x ? b : a;
		return a;
	}
	ap_int<32> x = a, y = b;
	if (red == PN_COLL_RED_SUM) return ap_uint<32>(x + y);   /* wraps */
	if (red == PN_COLL_RED_MIN) return y < x ? b : a;
	if (red == PN_COLL_RED_MAX) return y > x ? b : a;
	if (red == PN_COLL_RED_AND) return a & b;
	if (red == PN_COLL_RED_OR) return a | b;
	return a;
}

static ap_uint<64> op64(ap_uint<64> a, ap_uint<64> b, bool flt, ap_uint<3> red)
{
#pragma HLS INLINE
	if (flt) {
		double x = as_f64(a), y = as_f64(b);
		if (red == PN_COLL_RED_SUM) {
			double r = x + y;
			return r != r ? ap_uint<64>(PN_COLL_F64_QNAN) : bits64(r);
		}
		if (red == PN_COLL_RED_MIN) return y < x ? b : a;
		if (red == PN_COLL_RED_MAX) return y > x ? b : a;
		return a;
	}
	ap_int<64> x = a, y = b;
	if (red == PN_COLL_RED_SUM) return ap_uint<64>(x + y);
	if (red == PN_COLL_RED_MIN) return y < x ? b : a;
	if (red == PN_COLL_RED_MAX) return y > x ? b : a;
	if (red == PN_COLL_RED_AND) return a & b;
	if (red == PN_COLL_RED_OR) return a | b;
	return a;
}

word_t coll_combine(word_t a, word_t b, ap_uint<2> dtype, ap_uint<3> red)
{
#pragma HLS INLINE
	bool flt = dtype == PN_COLL_T_F32 || dtype == PN_COLL_T_F64;
	if (PN_COLL_TYPE_BYTES(dtype) == 4) {
		word_t r;
		r.range(31, 0) = op32(a.range(31, 0), b.range(31, 0), flt, red);
		r.range(63, 32) = op32(a.range(63, 32), b.range(63, 32), flt, red);
		return r;
	}
	return op64(a, b, flt, red);
}

/* ---- the tree ------------------------------------------------------------------------ */

/* (a - b) mod n and (a + b) mod n for a, b < n. */
/* A relative id in the tree, wide enough for a child's: rel * 2^lg + 2^lg. */
typedef ap_uint<PN_DIM_BITS + PN_COLL_MAX_RADIX_LOG2 + 1> rel_t;

static node_t sub_mod(node_t a, node_t b, ap_uint<PN_DIM_BITS> n) { return a >= b ? node_t(a - b) : node_t(a + n - b); }
static node_t add_mod(rel_t a, node_t b, ap_uint<PN_DIM_BITS> n)
{
	ap_uint<PN_DIM_BITS + PN_COLL_MAX_RADIX_LOG2 + 2> s = a + b;
	return s >= n ? node_t(s - n) : node_t(s);
}

/* The tree of pn_coll_spec.h: this node's first child and its parent, relative ids. */
static rel_t first_child(node_t rel, ap_uint<2> radix_log2) { return PN_COLL_FIRST_CHILD(rel_t(rel), radix_log2); }
static rel_t parent_of(node_t rel, ap_uint<2> radix_log2) { return PN_COLL_PARENT(rel_t(rel), radix_log2); }

/* The operation's arguments make no sense (BAD_ARGS), or this node has no place in it. */
static bool bad_args(word_t h)
{
	ap_uint<2> op = CF(h, OP), dtype = CF(h, DTYPE);
	ap_uint<3> red = CF(h, RED);
	ap_uint<PN_COLLHDR_NBYTES_WIDTH> nbytes = CF(h, NBYTES);
	bool flt = dtype == PN_COLL_T_F32 || dtype == PN_COLL_T_F64;
	unsigned esz = PN_COLL_TYPE_BYTES(dtype);
	return op > PN_COLL_OP_BCAST || nbytes > PN_COLL_MAX_BYTES || (nbytes & (esz - 1)) != 0 ||
	       (op != PN_COLL_OP_BCAST && (red > PN_COLL_RED_OR || (flt && red >= PN_COLL_RED_AND)));
}

static unsigned data_words(word_t h)
{
	unsigned nw = (unsigned(CF(h, NBYTES)) + 7) >> 3;
	return nw > PN_COLL_MAX_WORDS ? PN_COLL_MAX_WORDS : nw;
}

static void send(hls::stream<word_t> &net_out, node_t src, node_t dst, word_t h, const word_t *data, unsigned dw)
{
	word_t w0 = 0;
	HF(w0, DST_NODE) = dst;
	HF(w0, SRC_NODE) = src;
	HF(w0, TYPE) = PN_TYPE_COLLECTIVE;
	HF(w0, LENGTH) = 8 * (1 + dw);
	HF(w0, FLAGS) = PN_FLAG_SOM | PN_FLAG_EOM;
	net_out.write(w0);
	net_out.write(0);          /* tag: unused */
	net_out.write(h);
send_data:
	for (unsigned i = 0; i < dw; i++) {
#pragma HLS LOOP_TRIPCOUNT max = 32
#pragma HLS PIPELINE II = 1
		net_out.write(data[i]);
	}
}

static void deliver(hls::stream<word_t> &host_out, word_t h, const word_t *data)
{
	host_out.write(h);
	unsigned dw = CF(h, NODATA) ? 0u : data_words(h);
deliver_data:
	for (unsigned i = 0; i < dw; i++) {
#pragma HLS LOOP_TRIPCOUNT max = 32
#pragma HLS PIPELINE II = 1
		host_out.write(data[i]);
	}
}

/* Send `h` (phase DOWN) with `data` to every child of this node. */
static void send_down(hls::stream<word_t> &net_out, node_t node, ap_uint<2> radix_log2, word_t h, const word_t *data)
{
	ap_uint<PN_DIM_BITS> nodes = CF(h, NODES);
	node_t root = CF(h, ROOT);
	node_t rel = sub_mod(node, root, nodes);
	rel_t first = first_child(rel, radix_log2);
	unsigned dw = CF(h, NODATA) ? 0u : data_words(h);
down_kids:
	for (unsigned j = 0; j < PN_COLL_MAX_KIDS; j++) {
		if (j < (1u << radix_log2) && first + j < nodes)
			send(net_out, node, add_mod(first + j, root, nodes), h, data, dw);
	}
}

/* ---- all-to-all ALLREDUCE ----------------------------------------------------------- */

typedef ap_uint<PN_COLL_A2A_MAX_NODES> members_t;

/* An a2a command this node can take part in (else it is answered at once: BAD_ARGS). */
static bool a2a_fits(word_t h, node_t node)
{
	ap_uint<PN_DIM_BITS> nodes = CF(h, NODES);
	return CF(h, OP) == PN_COLL_OP_ALLREDUCE && nodes != 0 && nodes <= PN_COLL_A2A_MAX_NODES &&
	       node < nodes && node_t(CF(h, ROOT)) < nodes;
}

/* Send `h` with `data` to every other member, farthest first on a ring: (node + nodes/2)
 * mod nodes, then alternately one above and one below (the barrier's a2a_order). */
static void send_a2a(hls::stream<word_t> &net_out, node_t node, word_t h, const word_t *data, unsigned dw)
{
	unsigned nodes = unsigned(CF(h, NODES));
	if (nodes < 2)
		return;
	unsigned start = (unsigned(node) + nodes / 2) % nodes, up = start, dn = start;
	send(net_out, node, node_t(start), h, data, dw);
a2a_sends:
	for (unsigned k = 1; k + 1 < nodes; k++) {
#pragma HLS LOOP_TRIPCOUNT max = 30
		unsigned d;
		if (k & 1) {
			up = up + 1 == nodes ? 0 : up + 1;
			d = up;
		} else {
			dn = dn == 0 ? nodes - 1 : dn - 1;
			d = dn;
		}
		send(net_out, node, node_t(d), h, data, dw);
	}
}

/* What a peer's header `hp` adds to the error of operation `h`: its own error, and
 * MISMATCH when it is not the same operation (AGREE: every field but the per-hop ones). */
static ap_uint<2> peer_err(word_t hp, word_t h)
{
	ap_uint<2> e = CF(hp, ERR);
	if ((hp ^ h) & word_t(AGREE))
		e |= PN_COLL_ERR_MISMATCH;
	return e;
}

/* The own command and every member's vector present: combine (the pairwise tree), deliver. */
static void try_complete_a2a(coll_state &st, hls::stream<word_t> &host_out)
{
	word_t h = st.own_hdr;
	unsigned nodes = unsigned(CF(h, NODES));
	members_t need = nodes >= PN_COLL_A2A_MAX_NODES ? ~members_t(0) : members_t((members_t(1) << nodes) - 1);
	if ((st.a2a_one & need) != need)
		return;
	ap_uint<2> err = ap_uint<2>(CF(h, ERR)) | st.stray;
	for (unsigned s = 0; s < PN_COLL_A2A_MAX_NODES; s++) {
#pragma HLS UNROLL
		if (need[s])
			err |= peer_err(st.a2a_hdr[st.a2a_head[s]][s], h);
	}
	ap_uint<2> dtype = CF(h, DTYPE);
	ap_uint<3> red = CF(h, RED);
	unsigned dw = data_words(h);
	/* The pairwise tree over member index (docs/hls.md, "All-to-all"), whatever the
	 * arrival order: level by level, stride s = 1, 2, 4, ..., x[i] = x[i] op x[i + s] for
	 * every i a multiple of 2s with i + s < nodes (an odd one out passes up unchanged);
	 * the result is x[0]. x[m] is member m's vector until it is first written, then
	 * a2a_acc[m / 2] (only even m are written; m = nodes - 1 never is). One combine unit
	 * and one loop over every level's (pair, word)s, one slot per cycle: two reads (level
	 * 0: both from a2a_buf, ram_t2p; later: a2a_acc's rows, one memory each, and a2a_buf
	 * for member nodes - 1) and one write. The slots follow coll_a2a_slots(): a level's
	 * combines, then idle slots until its results are written for the next level, so no
	 * combine reads a result still in the adder's pipeline (DEPENDENCE false holds by
	 * the schedule; it assumes a loop depth of at most PN_COLL_FADD_CYCLES). */
	bool fadd = red == PN_COLL_RED_SUM && (dtype == PN_COLL_T_F32 || dtype == PN_COLL_T_F64);
	unsigned lat = fadd ? PN_COLL_FADD_CYCLES : 0, total = coll_a2a_fold_slots(nodes, dw, lat);
	unsigned lv = 0, s = 1, p = 0, w = 0, k = 0;
	unsigned busy = coll_a2a_pairs(nodes, 0) * dw, len = coll_a2a_slots(nodes, 0, dw, lat);
a2a_fold:
	for (unsigned t = 0; t < total; t++) {
#pragma HLS LOOP_TRIPCOUNT max = 992
#pragma HLS PIPELINE II = 1
#pragma HLS DEPENDENCE variable = st.a2a_acc type = inter false
		if (k < busy) {
			unsigned i = p << (lv + 1), j = i + s;
			word_t a = lv == 0 ? st.a2a_buf[st.a2a_head[i]][i][w] : st.a2a_acc[i >> 1][w];
			word_t b = lv == 0 || j == nodes - 1 ? st.a2a_buf[st.a2a_head[j]][j][w] : st.a2a_acc[j >> 1][w];
			st.a2a_acc[i >> 1][w] = coll_combine(a, b, dtype, red);
			if (++w == dw) {
				w = 0;
				p++;
			}
		}
		if (++k == len) {              /* the next level */
			lv++;
			s <<= 1;
			p = 0;
			w = 0;
			k = 0;
			busy = coll_a2a_pairs(nodes, lv) * dw;
			len = coll_a2a_slots(nodes, lv, dw, lat);
		}
	}
	const word_t *res = nodes == 1 ? st.a2a_buf[st.a2a_head[0]][0] : st.a2a_acc[0];
	/* Each member's oldest vector is used: its second (if any) becomes its first. */
	st.a2a_head ^= need;
	st.a2a_one = (st.a2a_one & ~need) | (st.a2a_two & need);
	st.a2a_two &= ~need;
	st.own_valid = false;
	st.stray = 0;
	CF(h, ERR) = err;
	CF(h, PHASE) = PN_COLL_PHASE_DOWN;
	deliver(host_out, h, res);
}

/* Own vector and every child's present: combine in the fixed order and pass it on. */
static void try_complete(coll_state &st, hls::stream<word_t> &host_out, hls::stream<word_t> &net_out,
			 node_t node, ap_uint<2> radix_log2)
{
	if (!st.own_valid)
		return;
	if (CF(st.own_hdr, A2A)) {
		try_complete_a2a(st, host_out);
		return;
	}
	word_t h = st.own_hdr;
	ap_uint<PN_DIM_BITS> nodes = CF(h, NODES);
	node_t root = CF(h, ROOT);
	node_t rel = sub_mod(node, root, nodes);
	rel_t first = first_child(rel, radix_log2);
	ap_uint<PN_COLL_MAX_KIDS> need = 0;
	for (unsigned j = 0; j < PN_COLL_MAX_KIDS; j++) {
#pragma HLS UNROLL
		need[j] = j < (1u << radix_log2) && first + j < nodes;
	}
	if ((st.kid_valid & need) != need)
		return;
	ap_uint<2> err = ap_uint<2>(CF(h, ERR)) | st.stray;
	for (unsigned j = 0; j < PN_COLL_MAX_KIDS; j++) {
#pragma HLS UNROLL
		if (need[j])
			err |= peer_err(st.kid_hdr[j], h);
	}
	ap_uint<2> dtype = CF(h, DTYPE);
	ap_uint<3> red = CF(h, RED);
	unsigned dw = data_words(h);
combine:
	for (unsigned w = 0; w < dw; w++) {
#pragma HLS LOOP_TRIPCOUNT max = 32
#pragma HLS PIPELINE II = 1
		word_t acc = st.own[w];
		for (unsigned j = 0; j < PN_COLL_MAX_KIDS; j++) {   /* children in increasing id */
#pragma HLS UNROLL
			if (need[j])
				acc = coll_combine(acc, st.kid[j][w], dtype, red);
		}
		st.own[w] = acc;
	}
	st.own_valid = false;
	st.kid_valid &= ~need;
	st.stray = 0;
	CF(h, ERR) = err;
	if (rel == 0) {                              /* the root: the result */
		CF(h, PHASE) = PN_COLL_PHASE_DOWN;
		deliver(host_out, h, st.own);
		if (CF(h, OP) == PN_COLL_OP_REDUCE)
			CF(h, NODATA) = 1;               /* the others only learn it is done */
		send_down(net_out, node, radix_log2, h, st.own);
	} else {
		CF(h, PHASE) = PN_COLL_PHASE_UP;
		node_t parent = add_mod(parent_of(rel, radix_log2), root, nodes);
		send(net_out, node, parent, h, st.own, dw);
	}
}

void coll_reset(coll_state &st)
{
	st.own_valid = false;
	st.kid_valid = 0;
	st.stray = 0;
	st.a2a_head = 0;
	st.a2a_one = 0;
	st.a2a_two = 0;
}

static void host_command(coll_state &st, hls::stream<word_t> &host_in, hls::stream<word_t> &host_out,
			 hls::stream<word_t> &net_out, node_t node, ap_uint<2> radix_log2)
{
	word_t h = host_in.read();
	unsigned nw = (unsigned(CF(h, NBYTES)) + 7) >> 3;     /* what follows, stored or not */
	bool a2a = CF(h, A2A), a2a_ok = a2a && a2a_fits(h, node);
	unsigned me = unsigned(node) & (PN_COLL_A2A_MAX_NODES - 1);   /* < nodes when a2a_ok */
	word_t *own = a2a_ok ? st.a2a_buf[st.a2a_head[me]][me] : st.own;
read_cmd:
	for (unsigned i = 0; i < nw; i++) {
#pragma HLS LOOP_TRIPCOUNT max = 64
#pragma HLS PIPELINE II = 1
		word_t w = host_in.read();
		if (i < PN_COLL_MAX_WORDS)
			own[i] = w;
	}
	ap_uint<PN_DIM_BITS> nodes = CF(h, NODES);
	node_t root = CF(h, ROOT);
	CF(h, NODATA) = 0;
	if (bad_args(h))
		CF(h, ERR) = ap_uint<2>(CF(h, ERR)) | PN_COLL_ERR_BAD_ARGS;
	if (nodes == 0 || node >= nodes || root >= nodes || (a2a && !a2a_ok)) {
		/* No tree to take part in: refused here and now. */
		CF(h, ERR) = ap_uint<2>(CF(h, ERR)) | PN_COLL_ERR_BAD_ARGS;
		CF(h, PHASE) = PN_COLL_PHASE_DOWN;
		CF(h, NODATA) = 1;
		deliver(host_out, h, st.own);
		return;
	}
	if (CF(h, OP) == PN_COLL_OP_BCAST) {
		if (node == root) {              /* the root's vector is the result */
			CF(h, PHASE) = PN_COLL_PHASE_DOWN;
			deliver(host_out, h, st.own);
			send_down(net_out, node, radix_log2, h, st.own);
		}
		return;                          /* elsewhere: the parent's DOWN brings it */
	}
	if (a2a_ok) {                            /* all-to-all: to every member at once */
		CF(h, PHASE) = PN_COLL_PHASE_UP;
		st.own_hdr = h;
		st.own_valid = true;
		st.a2a_hdr[st.a2a_head[me]][me] = h;
		st.a2a_one[me] = 1;
		send_a2a(net_out, node, h, own, data_words(h));
		try_complete_a2a(st, host_out);
		return;
	}
	st.own_hdr = h;
	st.own_valid = true;
	try_complete(st, host_out, net_out, node, radix_log2);
}

static void net_packet(coll_state &st, hls::stream<word_t> &host_out, hls::stream<word_t> &net_in,
		       hls::stream<word_t> &net_out, node_t node, ap_uint<2> radix_log2)
{
	word_t w0 = net_in.read();
	net_in.read();                                   /* tag */
	unsigned len = HF(w0, LENGTH);
	unsigned nw = (len + 7) >> 3;
	if (nw == 0) {                                   /* no collective header: nothing to do */
		st.stray |= PN_COLL_ERR_MISMATCH;
		return;
	}
	word_t h = net_in.read();
	ap_uint<PN_DIM_BITS> nodes = CF(h, NODES);
	node_t root = CF(h, ROOT);
	node_t src = HF(w0, SRC_NODE);
	bool ok = HF(w0, TYPE) == PN_TYPE_COLLECTIVE && nodes != 0 && node < nodes && root < nodes && src < nodes;
	bool up = CF(h, PHASE) == PN_COLL_PHASE_UP;
	if (CF(h, A2A)) {                                /* a member's vector: into its queue */
		unsigned s = unsigned(src) & (PN_COLL_A2A_MAX_NODES - 1);
		ok = ok && up && a2a_fits(h, node) && src != node && !st.a2a_two[s];
		ap_uint<1> bank = st.a2a_head[s] ^ st.a2a_one[s];
		word_t *abuf = ok ? st.a2a_buf[bank][s] : st.down;
	read_a2a:
		for (unsigned i = 0; i + 1 < nw; i++) {
#pragma HLS LOOP_TRIPCOUNT max = 32
#pragma HLS PIPELINE II = 1
			word_t w = net_in.read();
			if (i < PN_COLL_MAX_WORDS)
				abuf[i] = w;
		}
		if (!ok) {
			st.stray |= PN_COLL_ERR_MISMATCH;
			return;
		}
		st.a2a_hdr[bank][s] = h;
		if (st.a2a_one[s])
			st.a2a_two[s] = 1;
		else
			st.a2a_one[s] = 1;
		try_complete(st, host_out, net_out, node, radix_log2);
		return;
	}
	/* UP: which child slot (relative id of the sender minus our first child's). */
	node_t rel = sub_mod(node, root, nodes);
	rel_t first = first_child(rel, radix_log2);
	rel_t rs = sub_mod(src, root, nodes);
	unsigned j = unsigned(rs - first);
	if (up)
		ok = ok && rs >= first && j < (1u << radix_log2) && !st.kid_valid[j];
	word_t *buf = up && ok ? st.kid[j] : st.down;
read_pkt:
	for (unsigned i = 0; i + 1 < nw; i++) {
#pragma HLS LOOP_TRIPCOUNT max = 32
#pragma HLS PIPELINE II = 1
		word_t w = net_in.read();
		if (i < PN_COLL_MAX_WORDS)
			buf[i] = w;
	}
	if (!ok) {                                       /* fits no slot: reported with the next result */
		st.stray |= PN_COLL_ERR_MISMATCH;
		return;
	}
	if (up) {
		st.kid_hdr[j] = h;
		st.kid_valid[j] = 1;
		try_complete(st, host_out, net_out, node, radix_log2);
	} else {
		deliver(host_out, h, st.down);
		send_down(net_out, node, radix_log2, h, st.down);
	}
}

bool coll_step(coll_state &st, hls::stream<word_t> &host_in, hls::stream<word_t> &host_out,
	       hls::stream<word_t> &net_in, hls::stream<word_t> &net_out, node_t node, ap_uint<2> radix_log2)
{
#pragma HLS INLINE
	if (radix_log2 > PN_COLL_MAX_RADIX_LOG2)
		radix_log2 = PN_COLL_MAX_RADIX_LOG2;
	if (!net_in.empty()) {           /* the network first: it must never wait on a host */
		net_packet(st, host_out, net_in, net_out, node, radix_log2);
		return true;
	}
	if (!host_in.empty()) {
		host_command(st, host_in, host_out, net_out, node, radix_log2);
		return true;
	}
	return false;
}

void collective(hls::stream<word_t> &host_in, hls::stream<word_t> &host_out,
		hls::stream<word_t> &net_in, hls::stream<word_t> &net_out, node_t node, ap_uint<2> radix_log2)
{
#pragma HLS INTERFACE mode=axis port=host_in
#pragma HLS INTERFACE mode=axis port=host_out
#pragma HLS INTERFACE mode=axis port=net_in
#pragma HLS INTERFACE mode=axis port=net_out
#pragma HLS INTERFACE mode=ap_none port=node
#pragma HLS INTERFACE mode=ap_none port=radix_log2
#pragma HLS INTERFACE mode=ap_ctrl_hs port=return
	static coll_state st = {};
#pragma HLS ARRAY_PARTITION variable=st.kid dim=1 type=complete
#pragma HLS BIND_STORAGE variable=st.a2a_buf type=ram_t2p impl=bram
#pragma HLS ARRAY_PARTITION variable=st.a2a_acc dim=1 type=complete
	coll_step(st, host_in, host_out, net_in, net_out, node, radix_log2);
}
