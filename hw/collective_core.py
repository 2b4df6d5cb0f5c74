"""The collective kernel in Migen: :class:`CollectiveMigen`, the twin of ``hls/collective``.

It does what the C++ ``coll_step`` does with ``ap_start`` held high: one message per call,
a waiting network packet first, else a host command; the same words in the same order on
``host_out`` and ``net_out`` for the same input messages (docs/hls.md, "The Migen twin").

* State: the host's vector, the four child buffers and the DOWN buffer are Migen
  ``Memory`` (32 words each, one synchronous read/write port), the headers registers.
* One FSM walks the C++ control flow: read a message into its buffer, decide, combine
  (word by word, own then the children in increasing id), deliver, send.
* The all-to-all ALLREDUCE (header bit ``a2a``): a ``Memory`` of two vectors per member
  (2 x 32 x 32 words) and one of their headers, the queue state (head, one, two) in
  registers; the host's command goes to every other member in the C++'s order, and the
  fold runs in the C++'s order, the pairwise tree over member index (level by level,
  pair by pair, word by word, into a ``Memory`` of 16 x 32 partials), sequentially.
* :class:`Combine` is the element operation of every type and operator; float sums go
  through :class:`~paranic.hw.fp_add.FPAdd`, a 5-stage IEEE-754 adder (round to nearest
  even, subnormals, infinities), whose NaN is the canonical NaN of the spec,
  ``COLL_F32_QNAN`` / ``COLL_F64_QNAN``, as the C++ kernel's.
"""

from __future__ import annotations

from migen import (Array, Cat, ClockDomain, ClockDomainsRenamer, FSM, If, Memory, Module, Mux, NextState,
                   NextValue, Signal)

from paranic.spec import kernels as K
from paranic.spec import protocol as P

from .collective import CollectiveCore, cfield
from .common import hdr
from .fp_add import FPAdd

W = P.WORD_BITS
KIDS = 1 << K.COLL_MAX_RADIX_LOG2
A2A_N = K.COLL_A2A_MAX_NODES
assert A2A_N == 32   # member ids are 5 bits (a_s)
#: Header bits every contribution of one operation must agree on: all but phase, err,
#: nodata, refused and the reserved bits.
AGREE = ((1 << W) - 1) & ~sum(((1 << K.COLL_FIELD[n].width) - 1) << K.COLL_FIELD[n].offset
                               for n in ("phase", "err", "nodata", "refused", "rsvd"))
#: Widths of the C++ kernel's tree arithmetic (node_t, ap_uint<PN_DIM_BITS + ...>).
NODE_BITS = P.NODE_BITS
DIM_BITS = K.DIM_BITS
FIRST_BITS = DIM_BITS + K.COLL_MAX_RADIX_LOG2 + 1


def words_of(m: Module, nbytes, name: str) -> Signal:
    """ceil(nbytes / 8) as a signal: the sum in a signal wide enough for its carry (in an
    expression, Verilog would compute ``nbytes + 7`` in the width of ``nbytes``)."""
    s = Signal(len(nbytes) + 1, name=f"{name}_plus7")
    r = Signal(len(nbytes) - 2, name=name)
    m.comb += [s.eq(nbytes + 7), r.eq(s[3:])]
    return r


def with_fields(base, **fields):
    """Statements making a copy of word ``base`` with collective header ``fields`` replaced:
    returns (signal, statements)."""
    s = Signal(W)
    stmts = [s.eq(base)] + [cfield(s, n).eq(v) for n, v in fields.items()]
    return s, stmts


# Element operations ---------------------------------------------------------------------


class Combine(Module):
    """One element-wise combination ``a op b`` of two vector words (both lanes of a 32-bit
    type), as the C++ ``coll_combine``: SUM wraps for integers and is IEEE for floats;
    MIN/MAX return ``b`` only when strictly better, else ``a``; AND/OR for integers; any
    other operator (or AND/OR on a float type) returns ``a``. ``start``: the operands are
    there (and stay until ``done``); ``done``: ``result`` is valid this cycle (the cycle of
    ``start`` but for float sums, ``FPAdd.LATENCY`` cycles later)."""

    def __init__(self) -> None:
        self.a = Signal(W)
        self.b = Signal(W)
        self.dtype = Signal(2)
        self.red = Signal(3)
        self.start = Signal()
        self.done = Signal()
        self.result = Signal(W)

        # # #

        f32 = [FPAdd(8, 23, K.COLL_F32_QNAN), FPAdd(8, 23, K.COLL_F32_QNAN)]
        f64 = FPAdd(11, 52, K.COLL_F64_QNAN)
        self.submodules += f32 + [f64]
        self.comb += [
            f32[0].a.eq(self.a[:32]), f32[0].b.eq(self.b[:32]),
            f32[1].a.eq(self.a[32:]), f32[1].b.eq(self.b[32:]),
            f64.a.eq(self.a), f64.b.eq(self.b),
        ]
        flt = Signal()
        narrow = Signal()
        self.comb += [flt.eq((self.dtype == K.CollType.F32) | (self.dtype == K.CollType.F64)),
                      narrow.eq((self.dtype == K.CollType.I32) | (self.dtype == K.CollType.F32))]

        def lane(a, b, bits, fsum):
            """(statements, result) of one lane of ``bits`` bits."""
            r = Signal(bits)
            ilt, igt = Signal(), Signal()       # b < a, b > a as two's complement
            flt_lt, flt_gt = Signal(), Signal() # the same as IEEE
            sa, sb = a[bits - 1], b[bits - 1]
            stmts = [
                ilt.eq(Mux(sa != sb, sb, b[:bits - 1] < a[:bits - 1])),
                igt.eq(Mux(sa != sb, sa, b[:bits - 1] > a[:bits - 1])),
            ]
            ebits = 8 if bits == 32 else 11
            mag_a, mag_b = a[:bits - 1], b[:bits - 1]
            nan_a = mag_a > (((1 << ebits) - 1) << (bits - 1 - ebits))
            nan_b = mag_b > (((1 << ebits) - 1) << (bits - 1 - ebits))
            both0 = (mag_a == 0) & (mag_b == 0)
            ordered = Signal()
            # b < a for IEEE values: signs differ -> b negative; both positive -> |b| < |a|;
            # both negative -> |b| > |a|.
            f_lt = Mux(sa != sb, sb, Mux(sa, mag_b > mag_a, mag_b < mag_a))
            f_gt = Mux(sa != sb, sa, Mux(sa, mag_b < mag_a, mag_b > mag_a))
            stmts += [
                ordered.eq(~nan_a & ~nan_b & ~both0),
                flt_lt.eq(ordered & f_lt),
                flt_gt.eq(ordered & f_gt),
            ]
            lt = Mux(flt, flt_lt, ilt)
            gt = Mux(flt, flt_gt, igt)
            stmts += [
                r.eq(a),
                If(self.red == K.CollRed.SUM,
                    r.eq(Mux(flt, fsum, a + b)),
                ).Elif(self.red == K.CollRed.MIN,
                    If(lt, r.eq(b)),
                ).Elif(self.red == K.CollRed.MAX,
                    If(gt, r.eq(b)),
                ).Elif((self.red == K.CollRed.AND) & ~flt,
                    r.eq(a & b),
                ).Elif((self.red == K.CollRed.OR) & ~flt,
                    r.eq(a | b),
                ),
            ]
            return stmts, r

        st_lo, r_lo = lane(self.a[:32], self.b[:32], 32, f32[0].result)
        st_hi, r_hi = lane(self.a[32:], self.b[32:], 32, f32[1].result)
        st_64, r_64 = lane(self.a, self.b, 64, f64.result)
        self.comb += st_lo + st_hi + st_64
        self.comb += self.result.eq(Mux(narrow, Cat(r_lo, r_hi), r_64))

        # Integer ops and MIN/MAX are done at once (with `start`), float sums after the
        # adder's latency.
        chain = Signal(FPAdd.LATENCY)
        self.sync += chain.eq(Cat(self.start, chain[:-1]))
        self.comb += self.done.eq(Mux(flt & (self.red == K.CollRed.SUM), chain[-1], self.start))


# The kernel -----------------------------------------------------------------------------


class CollectiveMigen(CollectiveCore):
    """The collective kernel (see the module's description). Besides the interface of
    :class:`CollectiveCore`, the HLS block's ``ap_ctrl_hs`` signals
    (:data:`~paranic.spec.kernels.COLL_PORTS`): ``ap_start`` (reset 1: held high),
    ``ap_ready`` (a message is taken this cycle), ``ap_done`` (its handling ends this
    cycle), ``ap_idle`` (between messages)."""

    def __init__(self) -> None:
        super().__init__()
        self.ap_start = Signal(reset=1)
        self.ap_ready = Signal()
        self.ap_idle = Signal()
        self.ap_done = Signal()

        # # #

        hi, ho, ni, no = self.host_in, self.host_out, self.net_in, self.net_out
        node = self.node
        radix = Signal(2)
        self.comb += radix.eq(Mux(self.radix_log2 > K.COLL_MAX_RADIX_LOG2, K.COLL_MAX_RADIX_LOG2,
                                  self.radix_log2))
        kids_n = Signal(KIDS.bit_length())          # 1 << radix
        self.comb += kids_n.eq(1 << radix)

        # Memories: own, child 0..3, down; one port each, all at the address `adr`.
        names = ["own"] + [f"kid{j}" for j in range(KIDS)] + ["down"]
        ports = {}
        for nm in names:
            mem = Memory(W, K.COLL_MAX_WORDS, name=f"coll_{nm}")
            p = mem.get_port(write_capable=True)
            self.specials += mem, p
            ports[nm] = p
        own, down = ports["own"], ports["down"]
        kid = [ports[f"kid{j}"] for j in range(KIDS)]
        adr = Signal(5)
        wdat = Signal(W)
        for p in ports.values():
            self.comb += [p.adr.eq(adr), p.dat_w.eq(wdat)]

        # All-to-all: every member's vectors (bank, member, word) and headers (bank,
        # member); the word address is `adr`, the member `a_s`, the bank the register
        # `a_bank` or, while completing (`a_use_head`), the member's head.
        a2a_mem = Memory(W, 2 * A2A_N * K.COLL_MAX_WORDS, name="coll_a2a")
        ap = a2a_mem.get_port(write_capable=True)
        a2a_hmem = Memory(W, 2 * A2A_N, name="coll_a2a_hdr")
        hp = a2a_hmem.get_port(write_capable=True)
        self.specials += a2a_mem, ap, a2a_hmem, hp
        # The fold's partials (try_complete_a2a's a2a_acc): x[2r] in row r, word `adr`.
        acc_mem = Memory(W, A2A_N // 2 * K.COLL_MAX_WORDS, name="coll_a2a_acc")
        sc = acc_mem.get_port(write_capable=True)
        self.specials += acc_mem, sc
        a_row = Signal(4)        # the row `sc` addresses (but in A_WB: the pair's own, a_i / 2)
        a_wb = Signal()          # A_WB: writing the pair's partial
        a_lv = Signal(3)         # the fold's level: stride 2^a_lv
        a_i = Signal(6)          # the pair's first member, a multiple of 2^(a_lv + 1)
        src_acc = Signal()       # deliver from row 0 of the partials
        a_head, a_one, a_two = Signal(A2A_N), Signal(A2A_N), Signal(A2A_N)
        head_arr = Array(a_head[k] for k in range(A2A_N))
        one_arr = Array(a_one[k] for k in range(A2A_N))
        two_arr = Array(a_two[k] for k in range(A2A_N))
        a_s = Signal(5)
        a_bank = Signal()
        a_use_head = Signal()
        a_onehot = Signal(A2A_N)
        bank = Signal()
        self.comb += [
            bank.eq(Mux(a_use_head, head_arr[a_s], a_bank)),
            ap.adr.eq(Cat(adr, a_s, bank)), ap.dat_w.eq(wdat),
            hp.adr.eq(Cat(a_s, bank)),
            sc.adr.eq(Cat(adr, Mux(a_wb, a_i[1:5], a_row))), sc.dat_w.eq(wdat),
            *[a_onehot[k].eq(a_s == k) for k in range(A2A_N)],
        ]
        src_a2a = Signal()       # send from the own a2a slot
        a2a_send = Signal()      # the sends in progress go to every member
        a2a_pkt = Signal()       # the network packet in hand is an a2a one
        a_k = Signal(6)          # sends done
        a_up, a_dn = Signal(NODE_BITS), Signal(NODE_BITS)
        need_a = Signal(A2A_N)

        # State (coll_state) and the message in hand.
        own_hdr = Signal(W)
        own_valid = Signal()
        kid_hdr = [Signal(W, name=f"kid_hdr{c}") for c in range(KIDS)]
        kid_valid = Signal(KIDS)
        stray = Signal(2)
        h = Signal(W)            # the header being handled (and sent, delivered)
        w0 = Signal(W)           # a network packet's word 0
        cnt = Signal(12)         # words of the message read so far
        i = Signal(6)            # word being sent or delivered
        j = Signal(3)            # child slot
        dst = Signal(NODE_BITS)
        ok_r, up_r = Signal(), Signal()
        slot = Signal(2)         # an UP packet's child slot
        err_r = Signal(2)
        src_down = Signal()      # send/deliver from the DOWN buffer (else own)
        then_down = Signal()     # after delivering: send DOWN to the children
        finishing = Signal()     # the root completing a reduction (REDUCE: nodata after delivery)
        up_send = Signal()       # the send in progress goes to the parent
        acc = Signal(W)

        self.comb += hp.dat_w.eq(h)
        for k in range(A2A_N):
            self.comb += need_a[k].eq(k < cfield(h, "nodes"))

        # The tree of header `h` (the C++'s widths, truncations included).
        nodes = Signal(DIM_BITS)
        root = Signal(NODE_BITS)
        rel = Signal(NODE_BITS)
        first = Signal(FIRST_BITS)
        parent = Signal(NODE_BITS)
        need = Signal(KIDS)
        child = Array(Signal(NODE_BITS, name=f"child{c}") for c in range(KIDS))
        self.comb += [
            nodes.eq(cfield(h, "nodes")),
            root.eq(cfield(h, "root")),
            rel.eq(Mux(node >= root, node - root, node + nodes - root)),
            first.eq((rel << radix) + 1),
        ]

        def add_mod(a, b):
            s = Signal(FIRST_BITS + 1)
            r = Signal(NODE_BITS)
            self.comb += [s.eq(a + b), r.eq(Mux(s >= nodes, s - nodes, s))]
            return r

        self.comb += parent.eq(add_mod((rel - 1) >> radix, root))
        for c in range(KIDS):
            self.comb += [
                need[c].eq((c < kids_n) & (first + c < nodes)),
                child[c].eq(add_mod(first + c, root)),
            ]

        # Words of a header's vector: ceil(nbytes / 8), at most 32; none with nodata.
        h_nw = words_of(self, cfield(h, "nbytes"), "h_nw")
        h_dw = Signal(7)
        self.comb += h_dw.eq(Mux(h_nw > K.COLL_MAX_WORDS, K.COLL_MAX_WORDS, h_nw))
        dwe = Signal(7)
        self.comb += dwe.eq(Mux(cfield(h, "nodata"), 0, h_dw))

        # A host command's header, checked.
        op, dtype, red, nbytes = (cfield(h, f) for f in ("op", "dtype", "red", "nbytes"))
        is_flt = (dtype == K.CollType.F32) | (dtype == K.CollType.F64)
        esz_mask = Mux((dtype == K.CollType.I32) | (dtype == K.CollType.F32), 3, 7)
        bad_args = Signal()
        self.comb += bad_args.eq(
            (op > K.CollOp.BCAST) | (nbytes > K.COLL_MAX_BYTES) | ((nbytes & esz_mask) != 0) |
            ((op != K.CollOp.BCAST) & ((red > K.CollRed.OR) | (is_flt & (red >= K.CollRed.AND)))))
        # All-to-all: header `h` is one this node can take part in (a2a_fits).
        is_a2a = Signal()
        fits = Signal()
        self.comb += [
            is_a2a.eq(cfield(h, "a2a")),
            fits.eq((op == K.CollOp.ALLREDUCE) & (nodes != 0) & (nodes <= A2A_N) & (node < nodes) &
                    (root < nodes)),
        ]
        outside = Signal()
        self.comb += outside.eq((nodes == 0) | (node >= nodes) | (root >= nodes) | (is_a2a & ~fits))
        h_cmd, st = with_fields(h, nodata=0, err=cfield(h, "err") | Mux(bad_args | outside, K.CollErr.BAD_ARGS, 0))
        self.comb += st
        h_refuse, st = with_fields(h_cmd, phase=K.CollPhase.DOWN, nodata=1)
        self.comb += st
        h_a2a_up, st = with_fields(h_cmd, phase=K.CollPhase.UP)
        self.comb += st
        h_bcast, st = with_fields(h_cmd, phase=K.CollPhase.DOWN)
        self.comb += st

        # A network packet.
        net_nw = words_of(self, hdr(w0, "length"), "net_nw")
        src = hdr(w0, "src_node")
        rs = Signal(NODE_BITS)
        self.comb += rs.eq(Mux(src >= root, src - root, src + nodes - root))
        jj = Signal(FIRST_BITS)
        self.comb += jj.eq(rs - first)
        pkt_ok = Signal()
        pkt_up = Signal()
        self.comb += [
            pkt_ok.eq((hdr(w0, "type") == P.PacketType.COLLECTIVE) & (nodes != 0) & (node < nodes) &
                      (root < nodes) & (src < nodes)),
            pkt_up.eq(cfield(h, "phase") == K.CollPhase.UP),
        ]
        slot_ok = Signal()
        kv = Array(kid_valid[c] for c in range(KIDS))
        self.comb += slot_ok.eq((rs >= first) & (jj < kids_n) & ~kv[jj[:2]])

        # Completion: the error bits of the operation.
        errs = [Signal(2, name=f"kid_err{c}") for c in range(KIDS)]
        for c in range(KIDS):
            self.comb += errs[c].eq(Mux(need[c], cfield(kid_hdr[c], "err") |
                                        Mux(((kid_hdr[c] ^ h) & AGREE) != 0, K.CollErr.MISMATCH, 0), 0))
        err_done = Signal(2)
        self.comb += err_done.eq(cfield(h, "err") | stray | errs[0] | errs[1] | errs[2] | errs[3])

        # The element operation.
        self.submodules.comb_unit = cu = Combine()
        kid_rd = Array(p.dat_r for p in kid)
        a_strd = Signal(6)       # 2^a_lv
        a_j = Signal(7)          # the pair's second member, a_i + 2^a_lv
        a_nxt = Signal(7)        # the next pair's first member
        b_member = Signal()      # x[a_j] is still member a_j's vector (level 0, or the last member)
        self.comb += [
            a_strd.eq(1 << a_lv), a_j.eq(a_i + a_strd), a_nxt.eq(a_i + (a_strd << 1)),
            b_member.eq((a_lv == 0) | (a_j + 1 == cfield(h, "nodes"))),
        ]
        self.comb += [cu.a.eq(acc), cu.b.eq(Mux(a_use_head, Mux(b_member, ap.dat_r, sc.dat_r), kid_rd[j[:2]])),
                      cu.dtype.eq(dtype), cu.red.eq(red)]

        # Packets this node sends: word 0.
        w0_out = Signal(W)
        self.comb += [
            hdr(w0_out, "dst_node").eq(dst),
            hdr(w0_out, "src_node").eq(node),
            hdr(w0_out, "type").eq(P.PacketType.COLLECTIVE),
            hdr(w0_out, "length").eq(8 * (1 + dwe)),
            hdr(w0_out, "flags").eq(P.Flags.SOM | P.Flags.EOM),
        ]
        rd = Signal(W)
        self.comb += rd.eq(Mux(src_a2a, ap.dat_r, Mux(src_acc, sc.dat_r, Mux(src_down, down.dat_r, own.dat_r))))

        need_j = Signal()
        self.comb += need_j.eq(Array(need[c] for c in range(KIDS))[j[:2]])
        h_up, st = with_fields(h, err=err_r, phase=K.CollPhase.UP)
        self.comb += st
        h_root, st = with_fields(h, err=err_r, phase=K.CollPhase.DOWN)
        self.comb += st
        h_nodata, st = with_fields(h, nodata=1)
        self.comb += st
        self.comb += adr.eq(i)
        self.submodules.fsm = fsm = FSM(reset_state="IDLE")
        self.comb += self.ap_idle.eq(fsm.ongoing("IDLE"))
        done = self.ap_done

        fsm.act("IDLE",
            If(~self.ap_start,
            ).Elif(ni.valid,                 # the network first
                ni.ready.eq(1),
                self.ap_ready.eq(1),
                NextValue(w0, ni.data),
                NextState("NET_TAG"),
            ).Elif(hi.valid,
                hi.ready.eq(1),
                self.ap_ready.eq(1),
                NextValue(h, hi.data),
                NextValue(cnt, 0),
                NextValue(a_s, node[:5]),                 # the own slot, if a2a
                NextValue(a_bank, head_arr[node[:5]]),
                NextValue(a_use_head, 0),
                If(cfield(hi.data, "nbytes") == 0, NextState("HOST_DECIDE")
                ).Else(NextState("HOST_DATA"))))

        # Host command: the vector into `own` (words beyond 32 are read and dropped).
        fsm.act("HOST_DATA",
            hi.ready.eq(1),
            adr.eq(cnt),
            wdat.eq(hi.data),
            If(is_a2a & fits,
                ap.we.eq(hi.valid & (cnt < K.COLL_MAX_WORDS)),
            ).Else(
                own.we.eq(hi.valid & (cnt < K.COLL_MAX_WORDS))),
            If(hi.valid,
                NextValue(cnt, cnt + 1),
                If(cnt + 1 == h_nw, NextState("HOST_DECIDE"))))
        fsm.act("HOST_DECIDE",
            NextValue(src_down, 0),
            NextValue(finishing, 0),
            If(outside,
                NextValue(h, h_refuse),
                NextValue(then_down, 0),
                NextState("DELIVER_H"),
            ).Elif(op == K.CollOp.BCAST,
                If(node == root,
                    NextValue(h, h_bcast),
                    NextValue(then_down, 1),
                    NextState("DELIVER_H"),
                ).Else(done.eq(1), NextState("IDLE")),
            ).Elif(is_a2a,                       # all-to-all: to every member at once
                NextValue(h, h_a2a_up),
                NextValue(own_hdr, h_a2a_up),
                NextValue(own_valid, 1),
                NextState("A_HOST"),
            ).Else(
                NextValue(own_hdr, h_cmd),
                NextValue(own_valid, 1),
                NextState("TRY")))
        # The own header into its slot; the first send goes to (node + nodes/2) mod nodes.
        a_start = Signal(NODE_BITS + 1)
        a_start_m = Signal(NODE_BITS)
        self.comb += [a_start.eq(node + (nodes >> 1)),
                      a_start_m.eq(Mux(a_start >= nodes, a_start - nodes, a_start))]
        fsm.act("A_HOST",
            hp.we.eq(1),
            NextValue(a_one, a_one | a_onehot),
            If(nodes < 2, NextState("TRY")
            ).Else(
                NextValue(dst, a_start_m), NextValue(a_up, a_start_m), NextValue(a_dn, a_start_m),
                NextValue(a_k, 1),
                NextValue(a2a_send, 1),
                NextValue(src_a2a, 1),
                NextState("S_W0")))
        fsm.act("A_NEXT",
            If(a_k + 1 >= nodes,
                NextValue(a2a_send, 0),
                NextValue(src_a2a, 0),
                NextState("TRY"),
            ).Else(
                NextValue(a_k, a_k + 1),
                If(a_k[0],
                    If(a_up + 1 == nodes, NextValue(a_up, 0), NextValue(dst, 0)
                    ).Else(NextValue(a_up, a_up + 1), NextValue(dst, a_up + 1)),
                ).Else(
                    If(a_dn == 0, NextValue(a_dn, nodes - 1), NextValue(dst, nodes - 1)
                    ).Else(NextValue(a_dn, a_dn - 1), NextValue(dst, a_dn - 1))),
                NextState("S_W0")))

        # Network packet: the tag, the header, the vector into a child's buffer or `down`.
        fsm.act("NET_TAG",
            ni.ready.eq(1),
            If(ni.valid,
                If(net_nw == 0,
                    NextValue(stray, stray | K.CollErr.MISMATCH),
                    done.eq(1),
                    NextState("IDLE"),
                ).Else(NextState("NET_H"))))
        fsm.act("NET_H",
            ni.ready.eq(1),
            If(ni.valid,
                NextValue(h, ni.data),
                NextState("NET_DECIDE")))
        fsm.act("NET_DECIDE",
            NextValue(ok_r, Mux(is_a2a, pkt_ok & pkt_up & fits & (src != node) & ~two_arr[src[:5]],
                                pkt_ok & (~pkt_up | slot_ok))),
            NextValue(a2a_pkt, is_a2a),
            NextValue(a_s, src[:5]),
            NextValue(a_bank, head_arr[src[:5]] ^ one_arr[src[:5]]),
            NextValue(a_use_head, 0),
            NextValue(up_r, pkt_up),
            NextValue(slot, jj[:2]),
            NextValue(cnt, 0),
            If(net_nw == 1, NextState("NET_END")).Else(NextState("NET_DATA")))
        to_kid = Signal()
        self.comb += to_kid.eq(up_r & ok_r & ~a2a_pkt)
        fsm.act("NET_DATA",
            ni.ready.eq(1),
            adr.eq(cnt),
            wdat.eq(ni.data),
            If(ni.valid & (cnt < K.COLL_MAX_WORDS),
                If(a2a_pkt & ok_r, ap.we.eq(1)
                ).Elif(to_kid, *[If(slot == c, kid[c].we.eq(1)) for c in range(KIDS)]
                ).Else(down.we.eq(1))),
            If(ni.valid,
                NextValue(cnt, cnt + 1),
                If(cnt + 2 == net_nw, NextState("NET_END"))))
        fsm.act("NET_END",
            If(~ok_r,
                NextValue(stray, stray | K.CollErr.MISMATCH),
                done.eq(1),
                NextState("IDLE"),
            ).Elif(a2a_pkt,                       # a member's vector: into its queue
                hp.we.eq(1),
                If(one_arr[a_s], NextValue(a_two, a_two | a_onehot)
                ).Else(NextValue(a_one, a_one | a_onehot)),
                NextState("TRY"),
            ).Elif(up_r,
                *[If(slot == c, NextValue(kid_hdr[c], h)) for c in range(KIDS)],
                NextValue(kid_valid, kid_valid | (1 << slot)),
                NextState("TRY"),
            ).Else(
                NextValue(src_down, 1),
                NextValue(then_down, 1),
                NextValue(finishing, 0),
                NextState("DELIVER_H")))

        # try_complete: own vector and every child's there -> combine, pass on.
        fsm.act("TRY",
            If(~own_valid, done.eq(1), NextState("IDLE")
            ).Else(NextValue(h, own_hdr), NextState("TRY_NEED")))
        fsm.act("TRY_NEED",
            If(is_a2a, NextState("A_TRY")
            ).Elif((kid_valid & need) != need, done.eq(1), NextState("IDLE")
            ).Else(
                NextValue(err_r, err_done),
                NextValue(i, 0),
                # no child (a leaf): own[w] op nothing = own[w], no pass over the words
                If((h_dw == 0) | (need == 0), NextState("FINISH")).Else(NextState("C_ADDR"))))
        fsm.act("C_ADDR", NextState("C_LOAD"))          # adr = i: own[i], kid[*][i]
        fsm.act("C_LOAD",
            NextValue(acc, own.dat_r),
            NextValue(j, 0),
            NextState("C_KID"))
        fsm.act("C_KID",
            If(j == KIDS, NextState("C_WB")
            ).Elif(need_j,
                cu.start.eq(1),
                If(cu.done,
                    NextValue(acc, cu.result),
                    NextValue(j, j + 1),
                ).Else(NextState("C_WAIT")),
            ).Else(NextValue(j, j + 1)))
        fsm.act("C_WAIT",
            If(cu.done,
                NextValue(acc, cu.result),
                NextValue(j, j + 1),
                NextState("C_KID")))
        fsm.act("C_WB",
            wdat.eq(acc),
            own.we.eq(1),
            NextValue(i, i + 1),
            If(i + 1 == h_dw, NextState("FINISH")).Else(NextState("C_ADDR")))
        fsm.act("FINISH",
            NextValue(own_valid, 0),
            NextValue(kid_valid, kid_valid & ~need),
            NextValue(stray, 0),
            NextValue(src_down, 0),
            If(rel == 0,
                NextValue(h, h_root),
                NextValue(then_down, 1),
                NextValue(finishing, 1),
                NextState("DELIVER_H"),
            ).Else(
                NextValue(h, h_up),
                NextValue(up_send, 1),
                NextValue(dst, parent),
                NextState("S_W0")))

        # try_complete_a2a: one vector of every member there -> check the headers, fold in
        # the pairwise tree over member index (level by level: x[i] op x[i + 2^lv] into
        # row i / 2 of the partials, i a multiple of 2^(lv + 1), i + 2^lv < nodes; one
        # member: its vector copied into row 0), word by word; deliver row 0.
        h_a2a_done, st = with_fields(h, err=err_r, phase=K.CollPhase.DOWN)
        self.comb += st
        fsm.act("A_TRY",
            If((a_one & need_a) != need_a, done.eq(1), NextState("IDLE")
            ).Else(
                NextValue(err_r, cfield(h, "err") | stray),
                NextValue(a_s, 0),
                NextValue(a_use_head, 1),
                NextState("A_H0")))
        fsm.act("A_H0", NextState("A_H1"))             # hp.adr = (head[a_s], a_s)
        fsm.act("A_H1",
            NextValue(err_r, err_r | cfield(hp.dat_r, "err") |
                      Mux(((hp.dat_r ^ h) & AGREE) != 0, K.CollErr.MISMATCH, 0)),
            If(a_s + 1 == nodes,
                NextValue(a_s, 0), NextValue(a_row, 0), NextValue(a_lv, 0), NextValue(a_i, 0),
                NextValue(i, 0),
                If(h_dw == 0, NextState("A_FIN")).Else(NextState("A_C0")),
            ).Else(NextValue(a_s, a_s + 1), NextState("A_H0")))
        # adr = i; a_s = a_i (a2a[head][a_i][i]), a_row = a_i / 2 (partial x[a_i])
        fsm.act("A_C0", NextState("A_C1"))
        fsm.act("A_C1",
            NextValue(acc, Mux(a_lv == 0, ap.dat_r, sc.dat_r)),
            If(nodes == 1, NextState("A_WB")
            ).Else(NextValue(a_s, a_j), NextValue(a_row, a_j[1:5]), NextState("A_C2")))
        fsm.act("A_C2", NextState("A_OP"))             # a_s, a_row = a_j: x[a_j][i]
        fsm.act("A_OP",
            cu.start.eq(1),
            If(cu.done, NextValue(acc, cu.result), NextState("A_WB")
            ).Else(NextState("A_WAIT")))
        fsm.act("A_WAIT",
            If(cu.done, NextValue(acc, cu.result), NextState("A_WB")))
        fsm.act("A_WB",
            wdat.eq(acc),
            a_wb.eq(1),
            sc.we.eq(1),
            If(i + 1 == h_dw,
                NextValue(i, 0),
                If(a_nxt + a_strd < nodes,                       # the level's next pair
                    NextValue(a_i, a_nxt), NextValue(a_s, a_nxt), NextValue(a_row, a_nxt[1:5]),
                    NextState("A_C0"),
                ).Elif((a_strd << 1) < nodes,                     # the next level
                    NextValue(a_lv, a_lv + 1), NextValue(a_i, 0), NextValue(a_s, 0), NextValue(a_row, 0),
                    NextState("A_C0"),
                ).Else(NextState("A_FIN")),
            ).Else(NextValue(i, i + 1), NextValue(a_s, a_i), NextValue(a_row, a_i[1:5]), NextState("A_C0")))
        fsm.act("A_FIN",
            NextValue(a_head, a_head ^ need_a),
            NextValue(a_one, (a_one & ~need_a) | (a_two & need_a)),
            NextValue(a_two, a_two & ~need_a),
            NextValue(a_use_head, 0),
            NextValue(own_valid, 0),
            NextValue(stray, 0),
            NextValue(src_down, 0),
            NextValue(then_down, 0),
            NextValue(finishing, 0),
            NextValue(src_acc, 1),
            NextValue(a_row, 0),
            NextValue(h, h_a2a_done),
            NextState("DELIVER_H"))

        # deliver(): the header, then the vector unless nodata.
        fsm.act("DELIVER_H",
            ho.valid.eq(1), ho.data.eq(h),
            adr.eq(0),
            If(ho.ready,
                NextValue(i, 0),
                If(dwe == 0, NextState("DELIVERED")).Else(NextState("DELIVER_D"))))
        fsm.act("DELIVER_D",
            ho.valid.eq(1), ho.data.eq(rd),
            If(ho.ready,
                adr.eq(i + 1),
                NextValue(i, i + 1),
                If(i + 1 == dwe, NextState("DELIVERED"))))
        fsm.act("DELIVERED",
            NextValue(j, 0),
            NextValue(src_acc, 0),
            NextValue(up_send, 0),
            If(finishing & (op == K.CollOp.REDUCE), NextValue(h, h_nodata)),
            If(then_down, NextState("DOWN_NEXT")).Else(done.eq(1), NextState("IDLE")))

        # send_down(): to each child in turn.
        fsm.act("DOWN_NEXT",
            If(j == KIDS, done.eq(1), NextState("IDLE")
            ).Elif(need_j,
                NextValue(dst, child[j[:2]]),
                NextState("S_W0"),
            ).Else(NextValue(j, j + 1)))

        # send(): word 0, the tag, the header, the vector.
        fsm.act("S_W0",
            no.valid.eq(1), no.data.eq(w0_out),
            If(no.ready, NextState("S_TAG")))
        fsm.act("S_TAG",
            no.valid.eq(1), no.data.eq(0),
            If(no.ready, NextState("S_H")))
        fsm.act("S_H",
            no.valid.eq(1), no.data.eq(h),
            adr.eq(0),
            If(no.ready,
                NextValue(i, 0),
                If(dwe == 0, NextState("S_END")).Else(NextState("S_D"))))
        fsm.act("S_D",
            no.valid.eq(1), no.data.eq(rd),
            If(no.ready,
                adr.eq(i + 1),
                NextValue(i, i + 1),
                If(i + 1 == dwe, NextState("S_END"))))
        fsm.act("S_END",
            If(a2a_send, NextState("A_NEXT")
            ).Elif(up_send, done.eq(1), NextState("IDLE")
            ).Else(NextValue(j, j + 1), NextState("DOWN_NEXT")))


class CollectiveTop(Module):
    """:class:`CollectiveMigen` with the kernel's RTL port names (``COLL_PORTS``: ``ap_clk``,
    ``ap_rst``, ``host_in_TDATA`` ...), for a Verilog top of its own (Verilator, Yosys).
    ``ios``: the ports."""

    def __init__(self) -> None:
        self.clock_domains.cd_ap = ClockDomain("ap")
        self.submodules.core = core = ClockDomainsRenamer("ap")(CollectiveMigen())
        self.ios = {self.cd_ap.clk, self.cd_ap.rst}
        for name, d, width, _doc in K.COLL_PORTS:
            if name in ("ap_clk", "ap_rst"):
                continue
            s = Signal(width, name=name)
            self.ios.add(s)
            if name.endswith(("_TDATA", "_TVALID", "_TREADY")):
                stream, what = name.rsplit("_", 1)
                t = getattr(getattr(core, stream), {"TDATA": "data", "TVALID": "valid", "TREADY": "ready"}[what])
            else:
                t = getattr(core, name)
            self.comb += s.eq(t) if d == "o" else t.eq(s)
