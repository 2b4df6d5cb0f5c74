"""Hardware traffic generator and checker for router-only networks.

:class:`TrafficGen` feeds a router's ``local_sink`` with DATA packets; the
destination follows a traffic pattern (uniform random, or a permutation from
:meth:`paranic.spec.topo.Topology.pattern_dst` fixed at elaboration), lengths are random
in ``[min_len, max_len]`` bytes, packets are created by a Bernoulli process of
probability ``rate / 65536`` per cycle into an (unbounded) source queue, so the
offered load is independent of the network's back-pressure.

Every packet is self-describing, so :class:`TrafficCheck` on the destination's
``local_source`` verifies it completely:

* header: ``dst_node``, ``src_node``, ``length``, type DATA;
* tag word: ``seq`` (bits 0..31, per (src, dst) sequence number starting at 0)
  and ``ts`` (bits 32..63, the global cycle counter when the header entered the
  source router's injection FIFO);
* payload word ``i``: :func:`payload_word` ``(src, dst, seq, i)``.
"""

from __future__ import annotations

from migen import Case, Cat, Constant, If, Memory, Mux, Signal, bits_for
from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.hw.common import hdr, packet_layout
from paranic.spec import protocol as P
from paranic.spec.topo import Topology

#: Runtime pattern codes (``TrafficGen.pattern``).
PATTERNS = ("uniform", "all-to-one", "transpose", "tornado", "bitcomp")
PATTERN = {name: i for i, name in enumerate(PATTERNS)}

PAYLOAD_XOR = 0x5A5AA5A5C3C33C3C
RATE_ONE = 1 << 16  #: ``rate`` value for one packet per cycle (always)


def payload_word(src: int, dst: int, seq: int, idx: int) -> int:
    """Payload word ``idx`` of packet ``seq`` from ``src`` to ``dst`` (reference model)."""
    v = (idx & 0xFFFF) | (seq & 0xFFFFFF) << 16 | (dst & 0xFFF) << 40 | (src & 0xFFF) << 52
    return v ^ PAYLOAD_XOR


def _payload_expr(src, dst, seq, idx):
    return Cat(idx[:16], seq[:24], dst[:12], src[:12]) ^ Constant(PAYLOAD_XOR, 64)


def tag_word(seq: int, ts: int) -> int:
    return (seq & 0xFFFFFFFF) | (ts & 0xFFFFFFFF) << 32


def pattern_destinations(topo: Topology, node: int) -> dict[str, int]:
    """Fixed destination of ``node`` for every permutation pattern."""
    return {p: topo.pattern_dst(p, node) for p in PATTERNS if p != "uniform"}


def _xorshift32(s):
    """Next state of a 32-bit xorshift generator (an expression)."""
    a = Signal(32)
    b = Signal(32)
    c = Signal(32)
    return a, b, c, [a.eq(s ^ (s << 13)), b.eq(a ^ (a >> 17)), c.eq(b ^ (b << 5))]


class _Rand(LiteXModule):
    """xorshift32; reseeded to ``seed ^ salt`` (forced odd) on ``load``."""

    def __init__(self, seed: Signal, load: Signal, salt: int) -> None:
        self.value = Signal(32, reset=salt | 1)
        a, b, c, stmts = _xorshift32(self.value)
        self.comb += stmts
        self.sync += If(load, self.value.eq((seed ^ (salt & 0xFFFFFFFF)) | 1)).Else(self.value.eq(c))


def _smear(x: Signal, width: int):
    """x | x>>1 | x>>2 | ...: the all-ones mask covering x."""
    out = Signal(width)
    terms = x
    for i in range(1, width):
        terms = terms | (x >> i)
    return out, out.eq(terms)


class TrafficGen(LiteXModule):
    """Packet generator on a router's local (injection) port.

    Runtime controls (inputs): ``enable``, ``clear`` (one-cycle pulse: reset
    counters, sequence numbers, random state from ``seed``; takes ``n_nodes``
    cycles, ``busy_clear`` while it runs), ``pattern`` (:data:`PATTERN`), ``rate``
    (packets created per cycle = rate/65536, :data:`RATE_ONE` = every cycle),
    ``count`` (packets to create, 0 = unlimited), ``min_len``/``max_len`` (bytes,
    max clamped to the MTU), ``seed``; ``cycle`` (global cycle counter).
    Status: ``sent`` (packets fully written into the router), ``sent_words``,
    ``created``, ``backlog`` (created, not yet started), ``done``
    (``count`` != 0 and all ``count`` packets sent).
    """

    def __init__(self, topo: Topology, node: int, mtu: int = P.DEFAULT_MTU,
                 salt: int = 0) -> None:
        n_nodes = topo.nodes
        self.source = src = stream.Endpoint(packet_layout())
        self.enable = Signal()
        self.clear = Signal()
        self.pattern = Signal(3)
        self.rate = Signal(17)
        self.count = Signal(32)
        self.min_len = Signal(14)
        self.max_len = Signal(14)
        self.seed = Signal(32)
        self.cycle = Signal(32)

        self.sent = Signal(32)
        self.sent_words = Signal(40)
        self.created = Signal(32)
        self.backlog = Signal(32)
        self.done = Signal()
        self.busy_clear = Signal()

        # # #

        clearing = Signal()
        clr_adr = Signal(max=max(n_nodes, 2))
        self.comb += self.busy_clear.eq(clearing | self.clear)
        self.sync += [
            If(self.clear, clearing.eq(1), clr_adr.eq(0))
            .Elif(clearing, clr_adr.eq(clr_adr + 1),
                  If(clr_adr == n_nodes - 1, clearing.eq(0))),
        ]

        salt = (salt * 0x9E3779B1 + node * 0x85EBCA77) & 0xFFFFFFFF
        self.r_rate = _Rand(self.seed, self.clear, salt ^ 0x1B873593)
        self.r_dst = _Rand(self.seed, self.clear, salt ^ 0xCC9E2D51)
        self.r_len = _Rand(self.seed, self.clear, salt ^ 0xE6546B64)

        # -- packet creation (source queue as a counter) -----------------------
        room = Signal()
        create = Signal()
        self.comb += [
            room.eq((self.count == 0) | (self.created < self.count)),
            create.eq(self.enable & ~self.busy_clear & room &
                      (self.r_rate.value[:16] < self.rate)),
        ]

        # -- next packet: destination and length (rejection sampling) ----------
        nxt_valid = Signal()
        nxt_dst = Signal(P.NODE_BITS)
        nxt_len = Signal(14)
        dbits = max(1, (n_nodes - 1).bit_length())
        dests = pattern_destinations(topo, node)
        cand_dst = Signal(P.NODE_BITS)
        dst_ok = Signal()
        rnd_dst = Signal(dbits)
        self.comb += rnd_dst.eq(self.r_dst.value[:dbits])
        cases = {PATTERN[p]: cand_dst.eq(d) for p, d in dests.items()}
        self.comb += [
            cand_dst.eq(rnd_dst),
            dst_ok.eq((rnd_dst < n_nodes) & (rnd_dst != node)),
            If(self.pattern != PATTERN["uniform"], dst_ok.eq(1)),
        ]
        self.comb += Case(self.pattern, cases)

        eff_max = Signal(14)
        span = Signal(14)
        self.comb += [
            eff_max.eq(Mux(self.max_len > mtu, mtu, self.max_len)),
            span.eq(Mux(eff_max > self.min_len, eff_max - self.min_len, 0)),
        ]
        mask, mstmt = _smear(span, 14)
        self.comb += mstmt
        rl = Signal(14)
        self.comb += rl.eq(self.r_len.value[:14] & mask)

        # -- sequence numbers per destination --------------------------------
        self.specials.seqmem = seqmem = Memory(32, max(n_nodes, 2))
        seq_rd = seqmem.get_port(async_read=True)
        seq_wr = seqmem.get_port(write_capable=True)
        self.specials += seq_rd, seq_wr
        self.comb += seq_rd.adr.eq(nxt_dst)

        # -- emission ---------------------------------------------------------
        busy = Signal()
        idx = Signal(bits_for(P.packet_words(mtu)))
        nwords = Signal(bits_for(P.packet_words(mtu)))
        cur_dst = Signal(P.NODE_BITS)
        cur_len = Signal(14)
        cur_seq = Signal(32)
        ts = Signal(32)
        beat = Signal()
        last = Signal()
        start = Signal()
        tokens = Signal(32)
        self.comb += [
            self.backlog.eq(tokens),
            beat.eq(src.valid & src.ready),
            last.eq(idx == nwords - 1),
            start.eq(self.enable & ~self.busy_clear & nxt_valid & (tokens != 0) &
                     (~busy | (beat & last))),
            self.done.eq((self.count != 0) & (self.sent == self.count)),
        ]
        w0 = Signal(64)
        self.comb += [
            hdr(w0, "dst_node").eq(cur_dst),
            hdr(w0, "src_node").eq(node),
            hdr(w0, "type").eq(P.PacketType.DATA),
            hdr(w0, "length").eq(cur_len),
            hdr(w0, "flags").eq(P.Flags.SOM | P.Flags.EOM),
        ]
        pidx = Signal(16)
        self.comb += pidx.eq(idx - P.HEADER_WORDS)
        self.comb += [
            src.valid.eq(busy),
            src.first.eq(idx == 0),
            src.last.eq(last),
            If(idx == 0, src.data.eq(w0))
            .Elif(idx == 1, src.data.eq(Cat(cur_seq, ts)))
            .Else(src.data.eq(_payload_expr(Constant(node, 12), cur_dst, cur_seq, pidx))),
        ]
        self.comb += [
            If(clearing,
                seq_wr.we.eq(1), seq_wr.adr.eq(clr_adr), seq_wr.dat_w.eq(0),
            ).Elif(start,
                seq_wr.we.eq(1), seq_wr.adr.eq(nxt_dst), seq_wr.dat_w.eq(seq_rd.dat_r + 1),
            ),
        ]
        self.sync += [
            # destination/length preparation
            If(self.clear | start,
                nxt_valid.eq(0),
            ).Elif(~nxt_valid & dst_ok & (rl <= span),
                nxt_valid.eq(1),
                nxt_dst.eq(cand_dst),
                nxt_len.eq(self.min_len + rl),
            ),
            # source queue
            If(self.clear,
                tokens.eq(0), self.created.eq(0),
            ).Else(
                tokens.eq(tokens + create - start),
                If(create, self.created.eq(self.created + 1)),
            ),
            # emission
            If(self.clear,
                busy.eq(0), idx.eq(0), self.sent.eq(0), self.sent_words.eq(0),
            ).Else(
                If(beat,
                    idx.eq(idx + 1),
                    If(idx == 0, ts.eq(self.cycle)),
                    If(last,
                        busy.eq(0), idx.eq(0),
                        self.sent.eq(self.sent + 1),
                        self.sent_words.eq(self.sent_words + nwords),
                    ),
                ),
                If(start,
                    busy.eq(1), idx.eq(0),
                    cur_dst.eq(nxt_dst), cur_len.eq(nxt_len), cur_seq.eq(seq_rd.dat_r),
                    nwords.eq(P.HEADER_WORDS + ((nxt_len + 7) >> 3)),
                ),
            ),
        ]


class TrafficCheck(LiteXModule):
    """Packet checker on a router's local (ejection) port; always ready.

    Checks every packet: ``dst_node`` is this node and ``src_node`` exists
    (``err_hdr``), the word count matches ``length`` and no ``error`` flag
    (``err_len``), the tag's sequence number is the next one expected from that
    source (``err_seq``: loss, duplication, reordering), every payload word
    (``err_payload``). Counters: ``rx_packets``, ``rx_words``, ``rx_bytes``
    (payload), ``lat_sum``/``lat_max`` (cycles from header into the source's
    injection FIFO to header out of this ejection FIFO), ``first_rx``/``last_rx``
    (cycle of the first/last header since ``clear``).
    """

    def __init__(self, topo: Topology, node: int, mtu: int = P.DEFAULT_MTU) -> None:
        n_nodes = topo.nodes
        self.sink = snk = stream.Endpoint(packet_layout())
        self.clear = Signal()
        self.cycle = Signal(32)
        self.rx_packets = Signal(32)
        self.rx_words = Signal(40)
        self.rx_bytes = Signal(40)
        self.err_hdr = Signal(32)
        self.err_len = Signal(32)
        self.err_seq = Signal(32)
        self.err_payload = Signal(32)
        self.lat_sum = Signal(64)
        self.lat_max = Signal(32)
        self.first_rx = Signal(32)
        self.last_rx = Signal(32)
        self.errors = Signal(34)

        # # #

        clearing = Signal()
        clr_adr = Signal(max=max(n_nodes, 2))
        self.sync += [
            If(self.clear, clearing.eq(1), clr_adr.eq(0))
            .Elif(clearing, clr_adr.eq(clr_adr + 1),
                  If(clr_adr == n_nodes - 1, clearing.eq(0))),
        ]
        self.comb += [
            snk.ready.eq(1),
            self.errors.eq(self.err_hdr + self.err_len + self.err_seq + self.err_payload),
        ]

        self.specials.expmem = expmem = Memory(32, max(n_nodes, 2))
        exp_rd = expmem.get_port(async_read=True)
        exp_wr = expmem.get_port(write_capable=True)
        self.specials += exp_rd, exp_wr

        beat = Signal()
        idx = Signal(16)
        src = Signal(P.NODE_BITS)
        length = Signal(14)
        seq = Signal(32)
        t_hdr = Signal(32)
        lat = Signal(32)
        bad_hdr, bad_len, bad_seq, bad_pl = (Signal() for _ in range(4))
        have_any = Signal()
        data = snk.data
        pidx = Signal(16)
        self.comb += [
            beat.eq(snk.valid & snk.ready),
            pidx.eq(idx - P.HEADER_WORDS),
            exp_rd.adr.eq(src),
        ]
        src_ok = Signal()
        self.comb += src_ok.eq(src < n_nodes)
        nwords = Signal(17)
        self.comb += nwords.eq(P.HEADER_WORDS + ((length + 7) >> 3))
        new_hdr_bad = Signal()
        self.comb += new_hdr_bad.eq((hdr(data, "dst_node") != node) |
                                    (hdr(data, "src_node") >= n_nodes) |
                                    (hdr(data, "type") != P.PacketType.DATA) |
                                    (hdr(data, "length") > mtu))
        exp_seq = Signal(32)
        seq_bad_now = Signal()
        self.comb += [
            exp_seq.eq(exp_rd.dat_r),
            seq_bad_now.eq(~bad_hdr & (data[:32] != exp_seq)),
        ]
        self.comb += [
            If(clearing,
                exp_wr.we.eq(1), exp_wr.adr.eq(clr_adr), exp_wr.dat_w.eq(0),
            ).Elif(beat & (idx == 1) & src_ok & ~bad_hdr,
                exp_wr.we.eq(1), exp_wr.adr.eq(src), exp_wr.dat_w.eq(data[:32] + 1),
            ),
        ]
        final_len_bad = Signal()
        self.comb += final_len_bad.eq(bad_len | snk.error | (idx + 1 != nwords) | ~snk.first & (idx == 0))
        final_pl_bad = Signal()
        self.comb += final_pl_bad.eq(bad_pl | ((idx >= P.HEADER_WORDS) &
                     (data != _payload_expr(src, Constant(node, 12), seq, pidx))))
        self.sync += [
            If(self.clear,
                idx.eq(0), self.rx_packets.eq(0), self.rx_words.eq(0), self.rx_bytes.eq(0),
                self.err_hdr.eq(0), self.err_len.eq(0), self.err_seq.eq(0),
                self.err_payload.eq(0), self.lat_sum.eq(0), self.lat_max.eq(0),
                self.first_rx.eq(0), self.last_rx.eq(0), have_any.eq(0),
            ).Elif(beat,
                idx.eq(idx + 1),
                If(idx == 0,
                    src.eq(hdr(data, "src_node")),
                    length.eq(hdr(data, "length")),
                    t_hdr.eq(self.cycle),
                    bad_hdr.eq(new_hdr_bad),
                    bad_len.eq(~snk.first),
                    bad_seq.eq(0),
                    bad_pl.eq(0),
                    If(~have_any, self.first_rx.eq(self.cycle)),
                    have_any.eq(1),
                    self.last_rx.eq(self.cycle),
                ).Elif(idx == 1,
                    seq.eq(data[:32]),
                    lat.eq(t_hdr - data[32:64]),
                    bad_seq.eq(seq_bad_now),
                ).Else(
                    If(data != _payload_expr(src, Constant(node, 12), seq, pidx), bad_pl.eq(1)),
                ),
                If(snk.last,
                    idx.eq(0),
                    self.rx_packets.eq(self.rx_packets + 1),
                    self.rx_words.eq(self.rx_words + idx + 1),
                    self.rx_bytes.eq(self.rx_bytes + length),
                    If(bad_hdr | (idx == 0) & new_hdr_bad, self.err_hdr.eq(self.err_hdr + 1)),
                    If(final_len_bad, self.err_len.eq(self.err_len + 1)),
                    If((idx >= 1) & Mux(idx == 1, seq_bad_now, bad_seq),
                       self.err_seq.eq(self.err_seq + 1)),
                    If(final_pl_bad, self.err_payload.eq(self.err_payload + 1)),
                    If(idx >= 1,
                        self.lat_sum.eq(self.lat_sum + Mux(idx == 1, t_hdr - data[32:64], lat)),
                        If(Mux(idx == 1, t_hdr - data[32:64], lat) > self.lat_max,
                           self.lat_max.eq(Mux(idx == 1, t_hdr - data[32:64], lat))),
                    ),
                ),
            ),
        ]
