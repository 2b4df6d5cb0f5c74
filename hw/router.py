"""The ParaNIC router: one local port plus 2 (ring) or 4 (torus) link ports.

Table-based self-routing with a routing table in block RAM (through the HLS route
kernel, or its Migen twin, per input: beyond the table it computes dimension-order
routes), virtual cut-through on
link inputs (a packet is routed and forwarded from its header while its tail still
arrives; the room it reserves is the length its link layer declared from the SOF)
with whole-packet credits, store-and-forward injection and ejection, virtual output
queues on every input (a packet waiting for one output never holds back one for
another: docs/architecture.md, "Virtual output queues"), a second read port on every
input (a link input ejects one packet while another leaves on a link; the injection
input streams to a ``+`` and a ``-`` link at once: "Second read ports"), round-robin
arbitration,
and bubble flow control for deadlock freedom (see docs/architecture.md, "Router" and
"Deadlock freedom"). A packet whose
last word carries ``error`` (its CRC failed at the tail, or it was stomped upstream)
is passed on with it: the next link stomps it, the ejection FIFO drops it. The table
holds two sets; a packet is routed by the set in its header's ``rt``, and while
divert is on, packets of one set whose route is a link that is not up take the other
set's route with ``rt`` flipped (ordered route changes: docs/architecture.md, "Two
table sets and divert").

Pipeline of one packet (cycles relative to the cycle ``T`` in which its
packet-ready entry is at the head of its input FIFO: one cycle after its first word
was written on a link input, one cycle after its last on the injection input)::

    T    header word 0 of the entry; the input's route kernel (hw/router_route.py,
         build option ``route_fn``) gets the request and reads the table at dst_node;
         length check and word count registered
    T+1  the table entry reaches the kernel, which answers a destination inside the
         table (or one to drop) in this cycle, combinational from the entry (ap_done):
         the route (set ``rt``); the entry leaves the packet-ready FIFO into the
         queue of its output (virtual output queues: an empty queue passes it
         straight to its head); every queue head: divert (the other set's route when
         its link is not up), credit and bubble check; the input
         offers its oldest head that may go, the output arbitrates (all
         combinational); grant (and divert flip) registered at the end of the cycle
         (the next entry's request follows)
    T+2  the input streams into the output's pipeline register
    T+3  header word valid on the output ``source`` (link port or ejection FIFO)

so a link input's header leaves 4 cycles after it came in, whatever the packet's
length (a diverted one 2 cycles later: with queues the other set's route is read from
the table when the packet is at its queue's head, as the table is then; with
``route_fn="table"`` the route comes from the table at T+1 too; a
destination beyond the table, computed by the kernel, at T+5: 8 cycles). An output is granted its next packet in the cycle in which the last word of
the current one passes, so back-to-back packets leave without idle cycles.
"""

from __future__ import annotations

from functools import reduce
from operator import add, or_

from migen import Array, Case, Cat, Constant, If, Memory, Mux, ResetInserter, Signal, bits_for, log2_int
from migen.genlib.fifo import SyncFIFO
from migen.fhdl.specials import READ_FIRST
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage

from paranic.spec import kernels as K
from paranic.spec import protocol as P

from .common import LinkPortIf, hdr, packet_beats, packet_layout
from .fifo import PacketFifo
from .cdc import NO_CROSS
from .router_route import ROUTE_FNS, RouteStage

PORT_NAMES = {int(p): p.name.lower() for p in P.Port}

#: Packets the injection input holds with virtual output queues (it back-pressures
#: the local port when all are taken).
INJECT_PACKETS = 8


def default_buf_words(mtu: int, packets: int = 2, dw: int = P.WORD_BITS) -> int:
    """Smallest power of two holding ``packets`` maximum-size packets (default two),
    in beats of ``dw`` bits."""
    need = packets * P.packet_beats(mtu, dw)
    return 1 << (need - 1).bit_length()


def _port_choice(sel, fs, data, second, first) -> If:
    """A stream ``fs`` (and its beat ``data``) from one of an input's two read ports:
    ``second`` while ``sel``, else ``first``; each an (endpoint, beat, header fix-up
    statements) triple."""
    def take(ep, d, fix):
        return [fs.valid.eq(ep.valid), fs.first.eq(ep.first), fs.last.eq(ep.last),
                fs.error.eq(ep.error), data.eq(d)] + fix
    return If(sel, *take(*second)).Else(*take(*first))


def needs_bubble(in_port: int, out_port: int) -> bool:
    """Bubble rule: entering a ring needs room for one more packet.

    A packet enters a (unidirectional) ring when it is injected, when it changes
    dimension, and when it turns back on the cable it came in on (``in_port ==
    out_port``: it changes from the X+ to the X- ring). No route of a routing table
    turns back, but under cut-through a packet is routed by a header the CRC has not
    yet checked, so a corrupted destination may (docs/architecture.md, "Deadlock
    freedom"). Only continuing straight (XP in, XM out and so on) stays in a ring."""
    if out_port == P.Port.LOCAL:
        return False
    if in_port == P.Port.LOCAL or in_port == out_port:
        return True
    return P.port_dimension(in_port) != P.port_dimension(out_port)


class Router(LiteXModule):
    """Packet router.

    Parameters
    ----------
    n_links: 2 (ring: XP, XM) or 4 (torus: XP, XM, YP, YM).
    mtu: largest payload in bytes; ``max_pkt = P.packet_beats(mtu, dw)``.
    dw: datapath width in bits (64, 128, 256; docs/architecture.md "Datapath
        width"): every port moves one beat of ``dw // 64`` packet words per cycle, and
        every count below (``max_pkt``, buffer sizes, credits) is in beats.
    buf_words: beats of each link input buffer (and the initial credits of each
        link output: all routers of a network must agree). Default: the smallest
        power of two >= 2 * max_pkt.
    table_nodes: routing-table depth (power of two); larger dst_node is dropped.
    eject_words / inject_words: ejection / injection FIFO sizes (default buf_words).
    table_init: optional list of ports loaded into both table sets after reset
        (default: every entry DROP). The table is (re)initialised during the
        ``table_nodes`` cycles after reset; ``ready`` rises when done.
    bubble: accounting of the bubble rule on link outputs.
        ``"packet"`` (default): a link buffer has ``buf_words // max_pkt`` packet
        slots, every packet takes one; continuing in a dimension needs one free
        slot, entering a ring (injection, X->Y turn) two. Provably deadlock-free.
        ``"word"``: continuing needs ``credits >= len``, entering
        ``credits >= len + max_pkt``; uses short-packet buffer space better but is
        not deadlock-free in general with variable-size packets (free space can
        fragment across a ring). See docs/architecture.md, "Deadlock freedom".
        Word credits (``credits >= len``) are checked in both modes.
    route_fn: how an input's route is computed (hw/router_route.py, ``ROUTE_FNS``):
        ``"migen"`` (default: the route kernel's Migen twin, the table inside it and
        dimension-order routing beyond it), ``"vitis"`` (the kernel's exported RTL),
        ``"sim"`` (the simulator's DPI-C shell running the kernel's C++), ``"table"``
        (the table alone, as before the kernel: a destination beyond it is dropped; the
        same hop latency as a kernel's table hit). The kernels use the inputs ``node_x``, ``node_y`` (this
        node's coordinates, default 0) and ``dim_x``, ``dim_y`` (the topology's shape,
        reset to ``dims``; a kernel drops a destination >= ``dim_x * dim_y``).
    voq: virtual output queues on every input (default: on with ``bubble="packet"``;
        ``False``: one FIFO per input, the router before them). Needs
        ``bubble="packet"``: a link input holds ``buf_words // max_pkt + 1`` packets.
    inject_packets: packets the injection input holds with ``voq`` (default 8).
    voq_order: which available queue head an input offers: ``"oldest"`` (default,
        arrival order) or ``"rr"`` (round robin over the queues).
    transit_first: ``True``: the local input is granted an output only when no link
        input wants it (ParaStation's in-transit priority); ``False`` (default): it
        takes its turn in the round robin with the link inputs.
    local_every: with ``transit_first``, a local input passed over for this many
        grants to link inputs while it could have gone goes next (0, default: never).
    eject_transit_first: ``True`` (default): at the ejection port the local input
        (loopback packets) is granted only when no link input has a queue head for it,
        whatever ``transit_first`` says for the link outputs: packets from the network
        hold buffer slots of a ring and their senders' descriptors, loopback packets
        only this node's injection buffer (docs/architecture.md, "Routing, drops and
        arbitration"). ``False``: the ejection port arbitrates like the link outputs.
    eject_reader: a second read port on every link input, for its ejection queue
        (default: with ``voq``): a link input streams a packet into the ejection port
        and another out on a link in the same cycles. Its grant of the ejection port is
        the second port's (the first port still takes a link queue head diverted to
        ``LOCAL``). One more copy of each link input's data memory.
    inject_reader: a second read port on the injection input (default: with ``voq``):
        it serves the queues of the ``-`` links (XM, YM), the first port the others
        (XP, YP, loopback, drops), so the injection input streams to two links at once.
        One more copy of the injection FIFO's data memory.
    """

    def __init__(self, n_links: int = 2, mtu: int = P.DEFAULT_MTU, buf_words: int | None = None,
                 table_nodes: int = P.DEFAULT_TABLE_NODES, eject_words: int | None = None,
                 inject_words: int | None = None, table_init: list[int] | None = None,
                 bubble: str = "packet", route_fn: str = "migen",
                 dims: tuple[int, int] = (P.MAX_NODES, 1), voq: bool | None = None,
                 inject_packets: int = INJECT_PACKETS, voq_order: str = "oldest",
                 transit_first: bool = False, local_every: int = 0,
                 eject_transit_first: bool = True, eject_reader: bool | None = None,
                 inject_reader: bool | None = None, dw: int = P.WORD_BITS) -> None:
        if n_links not in (2, 4):
            raise ValueError("n_links must be 2 (ring) or 4 (torus)")
        if not 8 <= mtu <= P.MAX_MTU:
            raise ValueError(f"mtu must be in 8..{P.MAX_MTU}")
        self.n_links = n_links
        self.mtu = mtu
        self.dw = dw
        self.max_pkt = max_pkt = P.packet_beats(mtu, dw)
        self.buf_words = buf_words = default_buf_words(mtu, dw=dw) if buf_words is None else buf_words
        if buf_words < 2 * max_pkt:
            raise ValueError(f"buf_words={buf_words} must be >= 2*max_pkt={2 * max_pkt}")
        self.eject_words = eject_words = buf_words if eject_words is None else eject_words
        inject_words = buf_words if inject_words is None else inject_words
        if table_nodes & (table_nodes - 1) or table_nodes < 2:
            raise ValueError("table_nodes must be a power of two >= 2")
        self.table_nodes = table_nodes
        if route_fn not in ROUTE_FNS:
            raise ValueError(f"route_fn must be one of {ROUTE_FNS}")
        self.route_fn = route_fn
        tbits = log2_int(table_nodes)
        nports = n_links + 1

        # -- interface -------------------------------------------------------
        self.node_id = Signal(P.NODE_BITS)
        # This node's coordinates and the topology's dimensions (the route kernels only;
        # reset: ``dims`` and node (0, 0)).
        self.node_x = Signal(P.NODE_BITS)
        self.node_y = Signal(P.NODE_BITS)
        self.dim_x = Signal(K.DIM_BITS, reset=dims[0])
        self.dim_y = Signal(K.DIM_BITS, reset=dims[1])
        self.table_we = Signal()
        self.table_set = Signal()          # which of the two table sets table_we writes
        self.table_adr = Signal(tbits)
        self.table_dat = Signal(P.ROUTE_BITS)
        # Divert (ordered route changes, docs/architecture.md "Two table sets and divert"):
        # while divert_on, a packet of set divert_from whose route there is a link that is
        # not up goes by the other set, its ``rt`` flipped.
        self.divert_on = Signal()
        self.divert_from = Signal()
        self.diverted = Signal(32)         # packets granted an output by the other set
        self.ready = Signal()              # routing table initialised
        self.bubble_en = Signal(reset=1)   # bubble rule on (off only to demonstrate deadlock)
        self.local_sink = stream.Endpoint(packet_layout(dw))
        self.local_source = stream.Endpoint(packet_layout(dw))
        self.eject_packets = Signal(max=eject_words + 1)
        self.links = [LinkPortIf(dw) for _ in range(n_links)]
        # counters
        self.tx_packets = [Signal(32, name=f"tx_{PORT_NAMES[p]}") for p in range(nports)]
        self.err_unknown = Signal(32)
        self.err_length = Signal(32)
        self.err_aborted = Signal(32)      # packets discarded by the input FIFOs
        if bubble not in ("packet", "word"):
            raise ValueError("bubble must be 'packet' or 'word'")
        self.bubble = bubble
        if voq is None:
            voq = bubble == "packet"
        if voq_order not in ("oldest", "rr"):
            raise ValueError("voq_order must be 'oldest' or 'rr'")
        if voq and bubble != "packet":
            raise ValueError("virtual output queues need bubble='packet' (entries per packet slot)")
        self.voq = voq
        if eject_reader is None:
            eject_reader = voq
        if eject_reader and not voq:
            raise ValueError("eject_reader needs virtual output queues")
        #: link inputs have a second read port for the ejection port
        self.eject_reader = eject_reader
        if inject_reader is None:
            inject_reader = voq
        if inject_reader and not voq:
            raise ValueError("inject_reader needs virtual output queues")
        #: the injection input has a second read port for the ``-`` link outputs
        self.inject_reader = inject_reader
        #: packet slots of a link input buffer (bubble="packet")
        self.slots_per_buffer = buf_words // max_pkt
        self.slots = [None] + [Signal(max=self.slots_per_buffer + 1, reset=self.slots_per_buffer,
                                      name=f"slots_{PORT_NAMES[p]}") for p in range(1, nports)]
        cbits = bits_for(max(buf_words, eject_words)) + 1
        self.credits = [Signal(cbits, name=f"credits_{PORT_NAMES[p]}",
                               reset=eject_words if p == 0 else buf_words) for p in range(nports)]

        # # #

        # -- routing table -----------------------------------------------------
        # Two sets side by side in one entry (set s in bits [s*ROUTE_BITS, (s+1)*ROUTE_BITS)):
        # one read gives a packet's route in both sets, as divert needs; writes are per set.
        rb = P.ROUTE_BITS
        self.specials.table = table = Memory(2 * rb, table_nodes)
        wp = table.get_port(write_capable=True, we_granularity=rb)
        self.specials += wp
        init_adr = Signal(tbits)
        initing = Signal(reset=1)
        if table_init is None:
            init_val = Constant(P.Port.DROP, rb)
        else:
            if len(table_init) > table_nodes:
                raise ValueError(f"table_init has {len(table_init)} entries, the table {table_nodes}")
            vals = list(table_init) + [P.Port.DROP] * (table_nodes - len(table_init))
            init_val = Array(Constant(int(v), rb) for v in vals)[init_adr]
        self.comb += [
            self.ready.eq(~initing),
            If(self.table_we,
                wp.we.eq(Mux(self.table_set, 0b10, 0b01)), wp.adr.eq(self.table_adr),
                wp.dat_w.eq(Cat(self.table_dat, self.table_dat)),
            ).Elif(initing,
                wp.we.eq(0b11), wp.adr.eq(init_adr), wp.dat_w.eq(Cat(init_val, init_val)),
            ),
        ]
        self.sync += If(initing & ~self.table_we,
            init_adr.eq(init_adr + 1),
            If(init_adr == table_nodes - 1, initing.eq(0)),
        )
        self._table = table

        # -- buffers -----------------------------------------------------------
        # Injection: store-and-forward (the host side streams it in at its own pace;
        # its length is checked once the packet is complete). Link inputs: cut-through,
        # each packet's length declared by the link layer with its first word (the
        # SOF's CRC-16-protected length). Both with lookahead: the arbiter decides a
        # packet's output while the one before it still streams. Ejection:
        # store-and-forward, so that a packet whose last word carries ``error`` (a
        # stomped or cut packet) is dropped before the host side sees any of it.
        # With virtual output queues (``voq``) every input is read in any order: a
        # link input holds at most one packet per packet slot the sender counts, plus
        # one (a bad copy the link layer will replay); the injection input
        # ``INJECT_PACKETS`` (it back-pressures when they are taken).
        slots = buf_words // max_pkt
        self.link_entries = slots + 1 if voq else buf_words // P.packet_beats(0, dw)
        self.inject = PacketFifo(inject_words, max_pkt, backpressure=True, lookahead=True,
                                 head_word=True, random_read=voq, second_reader=inject_reader,
                                 packets=inject_packets if voq else None, dw=dw)
        self.eject = PacketFifo(eject_words, max_pkt, dw=dw)
        # every packet holds at least the header's beats: depth // packet_beats(0) entries
        self.inputs = [self.inject] + [
            PacketFifo(buf_words, max_pkt, packets=self.link_entries,
                       cut_through=True, lookahead=True, head_word=True, random_read=voq,
                       second_reader=eject_reader, dw=dw)
            for _ in range(n_links)]
        for i, f in enumerate(self.inputs[1:]):
            setattr(self, f"in_{PORT_NAMES[i + 1]}", f)
        self.comb += [
            self.local_sink.connect(self.inject.sink),
            self.eject.source.connect(self.local_source),
            self.eject_packets.eq(self.eject.packets),
            self.err_aborted.eq(sum(f.aborted for f in self.inputs)),
        ]
        for link, f in zip(self.links, self.inputs[1:]):
            # Declared length: the link layer's (SOF) when it gives one, else (wire
            # channels, which cannot corrupt a header) from the header's length field.
            hl = packet_beats(hdr(link.sink.data, "length"), dw)
            self.comb += [link.sink.connect(f.sink), link.drained.eq(f.drained),
                          link.buf_empty.eq(f.empty), link.buf_free.eq(f.free),
                          f.sink_words.eq(Mux(link.sink_words != 0, link.sink_words,
                                              Mux(hl > max_pkt, max_pkt, hl)))]

        # Output pipeline registers: [0] feeds the ejection FIFO, [i] link i.
        self.pipes = pipes = [stream.PipeValid(packet_layout(dw)) for _ in range(nports)]
        for i, p in enumerate(pipes):
            setattr(self, f"pipe_{PORT_NAMES[i]}", p)
        self.comb += pipes[0].source.connect(self.eject.sink)
        for link, p in zip(self.links, pipes[1:]):
            self.comb += p.source.connect(link.source)

        # -- output state: credits, allocation -----------------------------------
        busy = [Signal(name=f"busy_{PORT_NAMES[o]}") for o in range(nports)]
        owner = [Signal(max=nports, name=f"owner_{PORT_NAMES[o]}") for o in range(nports)]
        # A link output takes a packet when it is up and its channel has room for one.
        up = [Constant(1, 1)] + [link.up & link.tx_room for link in self.links]
        link_up = [Constant(0, 1)] + [link.up for link in self.links] + \
            [Constant(0, 1)] * (8 - 1 - n_links)

        # -- per-input head decode ---------------------------------------------
        fwd = [Signal(name=f"fwd_{PORT_NAMES[k]}") for k in range(nports)]
        drain = [Signal(name=f"drain_{PORT_NAMES[k]}") for k in range(nports)]
        sel = [Signal(max=nports, name=f"sel_{PORT_NAMES[k]}") for k in range(nports)]
        look = [Signal(name=f"look_{PORT_NAMES[k]}") for k in range(nports)]
        flip = [Signal(name=f"flip_{PORT_NAMES[k]}") for k in range(nports)]   # granted: rt flipped
        route = []
        words = []
        req = []
        drop_now = []
        badlen = []
        directs = []
        diverts = []
        flips = []
        self.route_stages = stages = []
        voq_heads = []      # voq: per input, per queue (valid, entry, taken)
        NQ = nports + 1     # voq: a queue per output and one for packets to drop
        DROPQ = nports
        efields = []        # voq: per input, the (name, width) of a queue entry's fields
        for k, f in enumerate(self.inputs):
            # The route of the head packet (hw/router_route.py): ``look`` says it is there.
            st = RouteStage(route_fn, table, table_nodes)
            setattr(self, f"route_{PORT_NAMES[k]}", st)
            stages.append(st)
            w0 = f.head_word           # header word 0 of the next packet not yet started
            dst = hdr(w0, "dst_node")
            length = hdr(w0, "length")
            head = Signal(name=f"head_{PORT_NAMES[k]}")
            bl = Signal(name=f"badlen_{PORT_NAMES[k]}")
            nw = Signal(len(f.head_words), name=f"words_{PORT_NAMES[k]}")
            pw = Signal(len(length) + 1)
            self.comb += [
                head.eq(f.waiting != 0),
                st.head.eq(head & self.ready),
                st.dst.eq(dst), st.rt.eq(hdr(w0, "rt")),
                st.node_x.eq(self.node_x), st.node_y.eq(self.node_y),
                st.dim_x.eq(self.dim_x), st.dim_y.eq(self.dim_y),
                look[k].eq(st.valid),
                pw.eq(packet_beats(length, dw)),
            ]
            # Link-local packets (header ``direct`` != 0, CONTROL only): from the local
            # port out on link port ``direct``; from a link port to the local port.
            dr = Signal(len(hdr(w0, "direct")), name=f"direct_{PORT_NAMES[k]}")
            self.sync += [
                bl.eq((length > mtu) | (pw != f.head_words)),
                nw.eq(f.head_words),
                dr.eq(Mux(hdr(w0, "type") == P.PacketType.CONTROL, hdr(w0, "direct"), 0)),
            ]
            # The packet's route in its own set (header ``rt``) and in the other one. Divert
            # when the own route is a link port that is not up (a packet diverted to a link
            # that is not up either waits there: it is never flipped back).
            # A destination beyond the table (route kernels) has no other set: not diverted.
            rt = hdr(w0, "rt")
            r_own, r_other, oob = st.own, st.other, st.oob
            dv = Signal(name=f"divert_{PORT_NAMES[k]}")
            self.comb += [
                dv.eq(self.divert_on & (rt == self.divert_from) & (dr == 0) & st.in_table &
                      (r_own != P.Port.LOCAL) & (r_own <= n_links) & ~Array(link_up)[r_own]),
            ]
            setattr(self, f"_head_{k}", head)
            if voq:
                # Classify as soon as the route is there (T+1 for a table hit): into the
                # queue of the packet's output (own set's route; a link-local packet: its
                # ``direct`` port from the local input, LOCAL from a link input) or the
                # drop queue. The entry leaves the packet-ready FIFO at once; an empty
                # queue passes it straight to its head, so the grant can follow in the
                # same cycle as without queues.
                rc = Signal(rb, name=f"class_{PORT_NAMES[k]}")
                qsel = Signal(max=NQ, name=f"qsel_{PORT_NAMES[k]}")
                self.comb += [
                    If((dr != 0) & (k == 0), rc.eq(dr)
                    ).Elif(dr != 0, rc.eq(P.Port.LOCAL)
                    ).Else(rc.eq(r_own)),
                    If(bl | (oob & (dr == 0)) | (rc > n_links), qsel.eq(DROPQ)).Else(qsel.eq(rc)),
                    f.head_take.eq(look[k]),
                    st.take.eq(look[k]),
                ]
                # The other set's route is not kept: it is read when divert needs it (below),
                # as the table is then, not as it was when the packet was queued.
                fields = [("adr", f.head_adr), ("idx", f.head_idx), ("words", nw),
                          ("dst", dst[:tbits]), ("rt", rt), ("dr", dr), ("bl", bl), ("intab", st.in_table)]
                efields.append([(n, len(x)) for n, x in fields])
                ew = sum(w for _, w in efields[k])
                inc = Signal(ew, name=f"entry_{PORT_NAMES[k]}")
                self.comb += inc.eq(Cat(*[x for _, x in fields]))
                heads = []
                for q in range(NQ):
                    qn = "drop" if q == DROPQ else PORT_NAMES[q]
                    fq = SyncFIFO(ew, f.pfifo.depth, fwft=True)
                    setattr(self, f"voq_{PORT_NAMES[k]}_{qn}", fq)
                    iv = Signal(name=f"qin_{PORT_NAMES[k]}_{qn}")
                    hv = Signal(name=f"qhead_{PORT_NAMES[k]}_{qn}")
                    hd = Signal(ew, name=f"qentry_{PORT_NAMES[k]}_{qn}")
                    tk = Signal(name=f"qtake_{PORT_NAMES[k]}_{qn}")
                    self.comb += [
                        iv.eq(look[k] & (qsel == q)),
                        hv.eq(fq.readable | iv),
                        hd.eq(Mux(fq.readable, fq.dout, inc)),
                        fq.din.eq(inc),
                        fq.we.eq(iv & ~(tk & ~fq.readable)),
                        fq.re.eq(tk & fq.readable),
                    ]
                    heads.append((hv, hd, tk))
                voq_heads.append(heads)
                for lst, nm, width in ((route, "route", rb), (words, "words", len(nw)),
                                       (req, "req", 1), (drop_now, "drop", 1), (badlen, "badlensel", 1),
                                       (directs, "directsel", len(dr)), (diverts, "divert", 1)):
                    lst.append(Signal(width, name=f"{nm}_{PORT_NAMES[k]}"))
                flips.append(diverts[-1])
                continue
            r = Signal(P.ROUTE_BITS, name=f"route_{PORT_NAMES[k]}")
            dn = Signal(name=f"drop_{PORT_NAMES[k]}")
            rq = Signal(name=f"req_{PORT_NAMES[k]}")
            # A link-local packet from the local port leaves on its ``direct`` port; one
            # from a link port is delivered here. One sent out on a link that is not up
            # is dropped (and counted in err_unknown): it was meant for whoever is at the
            # other end of that cable, and waiting would block the input behind it.
            out = Signal(name=f"directout_{PORT_NAMES[k]}")
            self.comb += out.eq(dr != 0) if k == 0 else out.eq(0)
            dead = Signal(name=f"deaddirect_{PORT_NAMES[k]}")
            self.comb += dead.eq(out & ~Array(link_up)[dr])
            self.comb += [
                If(out, r.eq(dr)
                ).Elif(dr != 0, r.eq(P.Port.LOCAL)
                ).Elif(dv, r.eq(r_other)
                ).Else(r.eq(r_own)),
                dn.eq(look[k] & ((oob & (dr == 0)) | bl | (r > n_links) | dead)),
                rq.eq(look[k] & ~dn),
            ]
            directs.append(dr)
            diverts.append(dv)
            flips.append(dv)
            route.append(r)
            words.append(nw)
            req.append(rq)
            drop_now.append(dn)
            badlen.append(bl)

        # -- arbitration per output --------------------------------------------
        grant = [[Signal(name=f"grant_{PORT_NAMES[o]}_{PORT_NAMES[k]}") for k in range(nports)]
                 for o in range(nports)]
        # An input can start its next packet in a cycle in which it is idle or in which
        # the last word of its current packet leaves; an output takes a new packet in a
        # cycle in which it is free or its current packet's last word passes. So the
        # next packet follows the last word of the one before without an idle cycle.
        ends = [f.source.valid & f.source.ready & f.source.last for f in self.inputs]
        can_start = [Signal(name=f"canstart_{PORT_NAMES[k]}") for k in range(nports)]
        ended = [Signal(name=f"ended_{PORT_NAMES[o]}") for o in range(nports)]
        for k in range(nports):
            self.comb += can_start[k].eq((~fwd[k] & ~drain[k]) | ends[k])
        # eject_reader: a link input's second read port, forwarding into the ejection port
        fwd2 = [Signal(name=f"fwd2_{PORT_NAMES[k]}") for k in range(nports)]
        ej_sel = [None] + [Signal(name=f"ejsel_{PORT_NAMES[k]}") for k in range(1, nports)]
        ej_own = [None] + [Signal(name=f"ejown_{PORT_NAMES[k]}") for k in range(1, nports)]
        can_start2 = [Signal(name=f"canstart2_{PORT_NAMES[k]}") for k in range(nports)]
        ends2 = [None] * nports
        # inject_reader: the output's packet from the local input comes from its second
        # read port (registered at the grant) / would (this cycle's offer)
        own2 = [Signal(name=f"own2_{PORT_NAMES[o]}") for o in range(nports)]
        sel2_0 = [Signal(name=f"sel2now_{PORT_NAMES[o]}") for o in range(nports)]
        for k in range(nports):
            if (k == 0 and inject_reader) or (k >= 1 and eject_reader):
                s2 = self.inputs[k].source2
                ends2[k] = s2.valid & s2.ready & s2.last
                self.comb += can_start2[k].eq(~fwd2[k] | ends2[k])
        for o in range(nports):
            p = pipes[o]
            self.comb += ended[o].eq(busy[o] & p.sink.valid & p.sink.ready & p.sink.last)

        def room_for(k: int, o: int, w) -> object:
            """Flow control of a packet of ``w`` words from input ``k`` to output ``o``
            (packet-slot bubble rule on link outputs)."""
            if bubble == "packet" and o != 0:
                nslots = Mux(self.bubble_en, 2, 1) if needs_bubble(k, o) else 1
                return (self.credits[o] >= w) & (self.slots[o] >= nslots)
            return self.credits[o] >= w

        # -- virtual output queues: each input offers one of its queue heads ------------
        # Per input, the heads of its queues are checked against their outputs (free or
        # freeing this cycle, up, credits and bubble); a packet to drop goes first, else
        # the input offers an available head, round-robin after the queue it served
        # last. The output arbitration below then works as without queues. A head
        # waiting for its output never hides another head whose output is free: that is
        # the head-of-line blocking the queues remove.
        self.rr_in = rr_in = [Signal(max=NQ, name=f"rrin_{PORT_NAMES[k]}") for k in range(nports)]
        chosen = []
        link_wants = [[] for _ in range(nports)]   # voq: link-input heads per final route
        # eject_reader: per link input, its ejection queue's head: may go now (its output
        # free, credits), the entry
        ej_avail = [None] * nports
        ej_ent = [None] * nports
        # inject_reader: the injection input's second read port serves the queues of the
        # ``-`` links (XM, YM), the first the others (and every packet to drop)
        minus_q = [q for q in (P.Port.XM, P.Port.YM) if q < nports] if inject_reader else []
        route2 = Signal(rb, name="route2_local")
        words2 = Signal(bits_for(max_pkt), name="words2_local")
        req2 = Signal(name="req2_local")
        divert2 = Signal(name="divert2_local")
        chosen2 = Signal(max=NQ, name="chosen2_local")

        def oldest_of(k, f, av, ents, qs, tag):
            """The queue (of ``qs``) whose available head is the oldest (arrival order:
            entry number after the oldest entry held), so that room comes back as early
            as it can."""
            nent = f.pfifo.depth
            hp = f.oldest
            best_v, best_a, best_q = Constant(0, 1), Constant(0, 1), Constant(0, 1)
            for q in qs:
                e = ents[q]
                qn = PORT_NAMES[q] + tag
                age = Signal(len(hp) + 1, name=f"qage_{PORT_NAMES[k]}_{qn}")
                self.comb += age.eq(Mux(e["idx"] >= hp, e["idx"] - hp, e["idx"] + nent - hp))
                bv = Signal(name=f"bestv_{PORT_NAMES[k]}_{qn}")
                ba = Signal(len(age), name=f"besta_{PORT_NAMES[k]}_{qn}")
                bq = Signal(max=NQ, name=f"bestq_{PORT_NAMES[k]}_{qn}")
                better = av[q] & (~best_v | (age < best_a))
                self.comb += [bv.eq(best_v | av[q]),
                              ba.eq(Mux(better, age, best_a)),
                              bq.eq(Mux(better, q, best_q))]
                best_v, best_a, best_q = bv, ba, bq
            return best_q
        if voq:
            free_out = [(~busy[o] | ended[o]) & up[o] for o in range(nports)]
            for k, f in enumerate(self.inputs):
                heads = voq_heads[k]
                fin, dq, av, dvs, ents = [], [], [], [], []
                av2 = {}
                for q, (hv, hd, tk) in enumerate(heads):
                    e = {}
                    pos = 0
                    for n, w in efields[k]:
                        e[n] = hd[pos:pos + w]
                        pos += w
                    ents.append(e)
                # The other set's route of each link queue's head, for divert, read from the
                # table as it is now: a packet queued before the firmware wrote the new plan
                # into the other set (ARMED) and still waiting for its down link when divert
                # comes on (EVAC) must take the new plan's route. (Kept in the queue entry
                # from the moment of queueing, it was the old plan's: the down link itself,
                # where the packet then waited for ever.) One read port per input reads the
                # other set's entry for a link queue head that has none (the lowest such
                # queue first); ``oth_ok`` says the value belongs to the head now there and
                # no table write came after its read. A head is diverted only with it: a
                # diverted packet leaves 2 cycles later than one that is not (a link queue's
                # new head is read in the cycle it gets there, the value is there 2 cycles
                # later); one queue's head after another's.
                dp = table.get_port(mode=READ_FIRST)
                self.specials += dp
                setattr(self, f"divert_port_{PORT_NAMES[k]}", dp)
                scan = Signal(max=nports, name=f"dscan_{PORT_NAMES[k]}")
                scan_r = Signal(max=nports, name=f"dscanr_{PORT_NAMES[k]}")
                rd_ok = Signal(name=f"dreadok_{PORT_NAMES[k]}")
                oth = [None] + [Signal(rb, name=f"qother_{PORT_NAMES[k]}_{PORT_NAMES[q]}")
                                for q in range(1, nports)]
                oth_ok = [None] + [Signal(name=f"qotherok_{PORT_NAMES[k]}_{PORT_NAMES[q]}")
                                   for q in range(1, nports)]
                lq = list(range(1, nports))
                half = [dp.dat_r[s * rb:(s + 1) * rb] for s in range(2)]
                need = [heads[q][0] & ~heads[q][2] & ~oth_ok[q] for q in lq]
                pick = None
                for q in reversed(lq):
                    pick = If(need[q - 1], scan.eq(q)) if pick is None else \
                        If(need[q - 1], scan.eq(q)).Else(pick)
                self.comb += [pick, dp.adr.eq(Array(ents[q]["dst"] for q in lq)[scan - 1])]
                self.sync += [
                    scan_r.eq(scan),
                    rd_ok.eq(~self.table_we & (scan != 0)),
                ]
                for q in lq:
                    self.sync += If(heads[q][2] | self.table_we, oth_ok[q].eq(0)
                                    ).Elif(rd_ok & (scan_r == q),
                                           oth_ok[q].eq(1),
                                           oth[q].eq(Mux(ents[q]["rt"], half[0], half[1])))
                for q, (hv, hd, tk) in enumerate(heads):
                    qn = "drop" if q == DROPQ else PORT_NAMES[q]
                    e = ents[q]
                    fr = Signal(rb, name=f"qroute_{PORT_NAMES[k]}_{qn}")
                    dnq = Signal(name=f"qdrop_{PORT_NAMES[k]}_{qn}")
                    rqq = Signal(name=f"qreq_{PORT_NAMES[k]}_{qn}")
                    avq = Signal(name=f"qavail_{PORT_NAMES[k]}_{qn}")
                    dvq = Signal(name=f"qdivert_{PORT_NAMES[k]}_{qn}")
                    if q == DROPQ:
                        self.comb += [dnq.eq(hv), fr.eq(0)]
                    elif q == P.Port.LOCAL:
                        self.comb += [rqq.eq(hv), fr.eq(P.Port.LOCAL)]
                    else:
                        # divert (as without queues) and dead link-local packets: decided
                        # at the head, every cycle, from the link's state now
                        dead = (e["dr"] != 0) & ~link_up[q] if k == 0 else Constant(0, 1)
                        self.comb += [
                            dvq.eq(self.divert_on & (e["rt"] == self.divert_from) &
                                   (e["dr"] == 0) & e["intab"] & ~link_up[q] & oth_ok[q]),
                            fr.eq(Mux(dvq, oth[q], q)),
                            dnq.eq(hv & (dead | (dvq & (oth[q] > n_links)))),
                            rqq.eq(hv & ~dnq),
                        ]
                    if q != DROPQ:
                        rooms = [room_for(k, o, e["words"]) for o in range(nports)]
                        pad = [Constant(0, 1)] * (8 - nports)
                        self.comb += avq.eq(rqq & Array(free_out + pad)[fr] & Array(rooms + pad)[fr])
                        if k >= 1:
                            for o in range(nports):
                                link_wants[o].append(rqq & (fr == o))
                    fin.append(fr)
                    dq.append(dnq)
                    dvs.append(dvq)
                    if eject_reader and k >= 1 and q == P.Port.LOCAL:
                        # served by the second read port: not offered by the first
                        ej_avail[k], ej_ent[k] = avq, e
                        av.append(Constant(0, 1))
                    elif k == 0 and q in minus_q:
                        av2[q] = avq
                        av.append(Constant(0, 1))
                    else:
                        av.append(avq)
                ch = Signal(max=NQ, name=f"chosen_{PORT_NAMES[k]}")
                anyd = reduce(or_, dq)
                drop_chain = None
                for q in reversed(range(NQ)):
                    drop_chain = If(dq[q], ch.eq(q)) if drop_chain is None else \
                        If(dq[q], ch.eq(q)).Else(drop_chain)
                if voq_order == "rr":
                    cases = {}
                    for last in range(NQ):
                        chain = None
                        for j in reversed([(last + 1 + i) % NQ for i in range(NQ)]):
                            chain = If(av[j], ch.eq(j)) if chain is None else If(av[j], ch.eq(j)).Else(chain)
                        cases[last] = chain
                    fwd_choice = Case(rr_in[k], cases)
                else:
                    fwd_choice = ch.eq(oldest_of(k, f, av, ents, [q for q in range(NQ) if q != DROPQ], ""))
                self.comb += [
                    If(anyd, drop_chain).Else(fwd_choice),
                    route[k].eq(Array(fin)[ch]),
                    words[k].eq(Array(e["words"] for e in ents)[ch]),
                    req[k].eq(~anyd & reduce(or_, av)),
                    drop_now[k].eq(anyd),
                    badlen[k].eq(Array(e["bl"] for e in ents)[ch]),
                    directs[k].eq(Array(e["dr"] for e in ents)[ch]),
                    diverts[k].eq(Array(dvs)[ch]),
                    f.start_adr.eq(Array(e["adr"] for e in ents)[ch]),
                    f.start_words.eq(Array(e["words"] for e in ents)[ch]),
                    f.start_idx.eq(Array(e["idx"] for e in ents)[ch]),
                ]
                chosen.append(ch)
                if k == 0 and minus_q:
                    # the second read port: the oldest available head of a ``-`` queue
                    ch2 = chosen2
                    self.comb += [
                        ch2.eq(oldest_of(k, f, av2, ents, minus_q, "2")),
                        route2.eq(Array(fin)[ch2]),
                        words2.eq(Array(e["words"] for e in ents)[ch2]),
                        req2.eq(reduce(or_, av2.values())),
                        divert2.eq(Array(dvs)[ch2]),
                        f.start2_adr.eq(Array(e["adr"] for e in ents)[ch2]),
                        f.start2_words.eq(Array(e["words"] for e in ents)[ch2]),
                        f.start2_idx.eq(Array(e["idx"] for e in ents)[ch2]),
                    ]

        self.rr = rr = [Signal(max=max(n_links, 2), name=f"rr_{PORT_NAMES[o]}") for o in range(nports)]
        rr_all = [Signal(max=nports, name=f"rrall_{PORT_NAMES[o]}") for o in range(nports)]
        for o in range(nports):
            elig = []
            for k in range(nports):
                room = Signal(name=f"room_{PORT_NAMES[k]}_{PORT_NAMES[o]}")
                if bubble == "word" and needs_bubble(k, o):
                    need = Signal(bits_for(2 * max_pkt), name=f"need_{PORT_NAMES[k]}_{PORT_NAMES[o]}")
                    self.comb += [need.eq(words[k] + Mux(self.bubble_en, max_pkt, 0)),
                                  room.eq(self.credits[o] >= need)]
                else:
                    self.comb += room.eq(room_for(k, o, words[k]))
                e = Signal(name=f"elig_{PORT_NAMES[k]}_{PORT_NAMES[o]}")
                if o == 0 and ej_avail[k] is not None:
                    # a link input's ejection queue head, through its second read port;
                    # else a packet its first port offers here (a link queue's head
                    # diverted to this node)
                    self.comb += [
                        ej_sel[k].eq(ej_avail[k] & can_start2[k]),
                        e.eq(ej_sel[k] | (req[k] & (route[k] == o) & (~busy[o] | ended[o]) &
                                          can_start[k] & room)),
                    ]
                elif k == 0 and inject_reader:
                    # either read port of the injection input (the first one first)
                    ea = Signal(name=f"eligA_{PORT_NAMES[k]}_{PORT_NAMES[o]}")
                    eb = Signal(name=f"eligB_{PORT_NAMES[k]}_{PORT_NAMES[o]}")
                    self.comb += [
                        ea.eq(req[k] & (route[k] == o) & (~busy[o] | ended[o]) &
                              can_start[k] & up[o] & room),
                        eb.eq(req2 & (route2 == o) & (~busy[o] | ended[o]) & can_start2[0] &
                              up[o] & room_for(k, o, words2)),
                        sel2_0[o].eq(~ea & eb),
                        e.eq(ea | eb),
                    ]
                else:
                    self.comb += e.eq(req[k] & (route[k] == o) & (~busy[o] | ended[o]) &
                                      can_start[k] & up[o] & room)
                elig.append(e)
            link_req = Signal(name=f"linkreq_{PORT_NAMES[o]}")
            if voq:
                # any link input's queue head for this output, whether it may go now or not
                self.comb += link_req.eq(reduce(or_, link_wants[o]))
            else:
                self.comb += link_req.eq(reduce(or_, [req[k] & (route[k] == o) for k in range(1, nports)]))
            if not (transit_first or (o == 0 and eject_transit_first)):
                # round robin among all inputs, the local one included
                cases = {}
                for last in range(nports):
                    chain = None
                    for j in reversed([(last + 1 + i) % nports for i in range(nports)]):
                        chain = If(elig[j], grant[o][j].eq(1)) if chain is None else \
                            If(elig[j], grant[o][j].eq(1)).Else(chain)
                    cases[last] = chain
                self.comb += Case(rr_all[o], cases)
                continue
            # round robin among link inputs, starting after the last one granted
            cases = {}
            for last in range(n_links):
                order = [(last + 1 + j) % n_links for j in range(n_links)]
                chain = None
                for j in reversed(order):
                    stmt = [grant[o][j + 1].eq(1)]
                    chain = If(elig[j + 1], *stmt) if chain is None else \
                        If(elig[j + 1], *stmt).Else(chain)
                cases[last] = chain
            if local_every:
                # the local input, passed over for ``local_every`` grants to link inputs
                # while it could have gone, goes next (its share of a contended output:
                # 1 in local_every + 1)
                passed = Signal(max=local_every + 1, name=f"passed_{PORT_NAMES[o]}")
                turn = Signal(name=f"localturn_{PORT_NAMES[o]}")
                self.comb += turn.eq(elig[0] & (passed == local_every))
                self.comb += [
                    If(turn, grant[o][0].eq(1)
                    ).Else(
                        Case(rr[o], cases),
                        If(~link_req, grant[o][0].eq(elig[0])),
                    ),
                ]
                link_granted = reduce(or_, [grant[o][k] for k in range(1, nports)])
                self.sync += If(grant[o][0], passed.eq(0)
                                ).Elif(link_granted & elig[0] & (passed != local_every),
                                       passed.eq(passed + 1))
            else:
                self.comb += [
                    Case(rr[o], cases),
                    If(~link_req, grant[o][0].eq(elig[0])),
                ]

        # -- state updates -----------------------------------------------------
        # An input takes its packet-ready entry when it starts forwarding or draining
        # the packet; the next entry's table read follows (``look`` is 0 for a cycle).
        granted = []
        dropping = []
        cur_direct = []
        cur_direct2 = [None] * nports
        # inject_reader: the injection input's second read port is granted an output
        g2_0 = Signal(name="granted2_local")
        sel2 = Signal(max=nports, name="sel2_local")
        flip2 = Signal(name="flip2_local")
        if inject_reader:
            f = self.inject
            self.comb += [
                g2_0.eq(reduce(or_, [grant[o][0] & sel2_0[o] for o in range(nports)])),
                f.start2.eq(g2_0),
                Case(sel2, {o: If(fwd2[0], f.source2.ready.eq(pipes[o].sink.ready))
                            for o in range(nports)}),
            ]
            self.sync += If(g2_0, fwd2[0].eq(1), sel2.eq(route2), flip2.eq(divert2)
                            ).Elif(ends2[0], fwd2[0].eq(0))
            for o in range(nports):
                self.sync += If(grant[o][0], own2[o].eq(sel2_0[o]))
        for k, f in enumerate(self.inputs):
            gk = Signal(name=f"granted_{PORT_NAMES[k]}")
            dk = Signal(name=f"dropping_{PORT_NAMES[k]}")
            take = Signal(name=f"take_{PORT_NAMES[k]}")
            cd = Signal(len(directs[k]), name=f"curdirect_{PORT_NAMES[k]}")
            # (with eject_reader a link input's grant of the ejection port is its second
            # read port's)
            g_main = [grant[o][k] for o in range(nports)]
            if eject_reader and k >= 1:
                g_main[0] = grant[0][k] & ~ej_sel[k]
            if inject_reader and k == 0:
                g_main = [grant[o][0] & ~sel2_0[o] for o in range(nports)]
            self.comb += [
                gk.eq(reduce(or_, g_main)),
                dk.eq(drop_now[k] & can_start[k]),
                take.eq(gk | dk),
            ]
            if voq:
                self.comb += f.start.eq(take)
                for q, (hv, hd, tk) in enumerate(voq_heads[k]):
                    if eject_reader and k >= 1 and q == P.Port.LOCAL:
                        self.comb += tk.eq(grant[0][k] & ej_sel[k])
                    elif k == 0 and q in minus_q:
                        self.comb += tk.eq((take & (chosen[k] == q)) | (g2_0 & (chosen2 == q)))
                    else:
                        self.comb += tk.eq(take & (chosen[k] == q))
                self.sync += If(gk, rr_in[k].eq(chosen[k]))
            else:
                self.comb += [f.head_take.eq(take), stages[k].take.eq(take)]
            granted.append(gk)
            dropping.append(dk)
            cur_direct.append(cd)
            self.sync += [
                If(gk,
                    fwd[k].eq(1), drain[k].eq(0), sel[k].eq(route[k]), flip[k].eq(flips[k]),
                    cd.eq(directs[k]),
                ).Elif(dk,
                    fwd[k].eq(0), drain[k].eq(1),
                ).Elif(ends[k],
                    fwd[k].eq(0), drain[k].eq(0),
                ),
            ]
            # FIFO read: drain freely, or forward into the allocated output
            self.comb += Case(sel[k], {o: If(fwd[k], f.source.ready.eq(pipes[o].sink.ready))
                                       for o in range(nports)})
            self.comb += If(drain[k], f.source.ready.eq(1))
            if eject_reader and k >= 1:
                e = ej_ent[k]
                cd2 = Signal(len(directs[k]), name=f"curdirect2_{PORT_NAMES[k]}")
                cur_direct2[k] = cd2
                self.comb += [
                    f.start2.eq(grant[0][k] & ej_sel[k]),
                    f.start2_adr.eq(e["adr"]), f.start2_words.eq(e["words"]),
                    f.start2_idx.eq(e["idx"]),
                    f.source2.ready.eq(fwd2[k] & pipes[0].sink.ready),
                ]
                self.sync += [
                    If(grant[0][k] & ej_sel[k], fwd2[k].eq(1), cd2.eq(e["dr"])
                       ).Elif(ends2[k], fwd2[k].eq(0)),
                    If(grant[0][k], ej_own[k].eq(ej_sel[k])),
                ]

        # error counters (several inputs may drop in the same cycle). Note: never
        # build an OR from sum(1-bit) != 0 -- Verilog sizes such an expression to
        # 1 bit and the sum wraps (Migen's simulator does not): use reduce(or_).
        n_len = Signal(bits_for(nports))
        n_unk = Signal(bits_for(nports))
        self.comb += [
            n_len.eq(reduce(add, [dropping[k] & badlen[k] for k in range(nports)])),
            n_unk.eq(reduce(add, [dropping[k] & ~badlen[k] for k in range(nports)])),
        ]
        n_div = Signal(bits_for(nports))
        self.comb += n_div.eq(reduce(add, [granted[k] & diverts[k] for k in range(nports)] +
                                  [g2_0 & divert2]))
        self.sync += [
            self.err_length.eq(self.err_length + n_len),
            self.err_unknown.eq(self.err_unknown + n_unk),
            self.diverted.eq(self.diverted + n_div),
        ]

        # The receiving router rewrites a link-local packet's ``direct`` to the port it
        # arrived on (its header word 0 passes while ``first``), so the receiver knows its port.
        # A diverted packet leaves with ``rt`` flipped (header word 0, ``flip`` registered
        # at its grant), so the next routers route it by the set it was diverted to.
        dlo = P.HEADER_FIELD["direct"].offset
        dhi = dlo + P.HEADER_FIELD["direct"].width
        rtb = P.HEADER_FIELD["rt"].offset
        out_data = []
        for k, f in enumerate(self.inputs):
            d = Signal(dw, name=f"out_data_{PORT_NAMES[k]}")
            self.comb += [d.eq(f.source.data),
                          If(f.source.first & flip[k], d[rtb].eq(~f.source.data[rtb]))]
            out_data.append(d)
        for o in range(nports):
            p = pipes[o]
            src = {}
            for k, f in enumerate(self.inputs):
                data = out_data[k]
                fs = f.source
                if o == 0 and k != 0 and eject_reader:
                    # the second read port (no divert: nothing to flip), or the first (a
                    # packet diverted here)
                    fs = stream.Endpoint(packet_layout(dw), name=f"eject_src_{PORT_NAMES[k]}")
                    data = Signal(dw, name=f"eject_data_{PORT_NAMES[k]}")
                    s2 = f.source2
                    self.comb += _port_choice(
                        ej_own[k], fs, data,
                        (s2, s2.data, [If(s2.first & (cur_direct2[k] != 0), data[dlo:dhi].eq(k))]),
                        (f.source, out_data[k],
                         [If(f.source.first & (cur_direct[k] != 0), data[dlo:dhi].eq(k))]))
                elif k == 0 and inject_reader:
                    # either read port of the injection input
                    fs = stream.Endpoint(packet_layout(dw), name=f"local_src_{PORT_NAMES[o]}")
                    data = Signal(dw, name=f"local_data_{PORT_NAMES[o]}")
                    s2 = f.source2
                    self.comb += _port_choice(
                        own2[o], fs, data,
                        (s2, s2.data, [If(s2.first & flip2, data[rtb].eq(~s2.data[rtb]))]),
                        (f.source, out_data[k], []))
                elif o == 0 and k != 0:
                    data = Signal(dw, name=f"eject_data_{PORT_NAMES[k]}")
                    self.comb += [data.eq(out_data[k]),
                                  If(f.source.first & (cur_direct[k] != 0), data[dlo:dhi].eq(k))]
                # ``error`` on a last word passes on: the packet is stomped on the next
                # link, or dropped by the ejection FIFO (store-and-forward).
                src[k] = [p.sink.valid.eq(fs.valid), p.sink.data.eq(data),
                          p.sink.first.eq(fs.first), p.sink.last.eq(fs.last),
                          p.sink.error.eq(fs.error & fs.last)]
            self.comb += If(busy[o], Case(owner[o], src))
            any_g = Signal(name=f"anygrant_{PORT_NAMES[o]}")
            gw = Signal(len(words[0]), name=f"grantwords_{PORT_NAMES[o]}")
            self.comb += any_g.eq(reduce(or_, [grant[o][k] for k in range(nports)]))
            self.comb += [If(grant[o][k], gw.eq(Mux(ej_sel[k], ej_ent[k]["words"], words[k])
                                                if o == 0 and ej_ent[k] is not None
                                                else Mux(sel2_0[o], words2, words[k])
                                                if k == 0 and inject_reader
                                                else words[k])) for k in range(nports)]
            if o == 0:
                ret = Signal(16)
                # words read out of the ejection FIFO, and those of a packet it
                # discarded (error on its last word: stomped or cut short)
                self.comb += ret.eq(self.eject.drained + self.eject.abort_words)
            else:
                link = self.links[o - 1]
                ret = Signal(16)
                self.comb += If(link.credit_valid, ret.eq(link.credit_words))
            if bubble == "packet" and o != 0:
                # Packet credits: one slot per packet in the far buffer. Word
                # credits come back in order (the far buffer is a FIFO), so the
                # lengths of the packets sent tell when a whole packet has left.
                lens = ResetInserter()(SyncFIFO(len(gw), self.slots_per_buffer))
                setattr(self, f"sent_lens_{PORT_NAMES[o]}", lens)
                acc = Signal(len(self.credits[o]) + 1, name=f"retacc_{PORT_NAMES[o]}")
                acc_sum = Signal(len(acc), name=f"retsum_{PORT_NAMES[o]}")
                freed = Signal(name=f"slotfreed_{PORT_NAMES[o]}")
                self.comb += [
                    lens.we.eq(any_g), lens.din.eq(gw),
                    acc_sum.eq(acc + ret),
                    freed.eq(lens.readable & (acc_sum >= lens.dout)),
                    lens.re.eq(freed),
                ]
                self.sync += [
                    acc.eq(acc_sum - Mux(freed, lens.dout, 0)),
                    self.slots[o].eq(self.slots[o] + freed - any_g),
                    # Port not up: the far buffer starts empty when it comes up again.
                    If(~self.links[o - 1].up,
                        acc.eq(0),
                        self.slots[o].eq(self.slots_per_buffer),
                    ),
                ]
                self.comb += lens.reset.eq(~self.links[o - 1].up)
            self.sync += [
                self.credits[o].eq(self.credits[o] + ret - gw),
                If(~self.links[o - 1].up, self.credits[o].eq(buf_words)) if o != 0 else [],
                If(any_g,
                    busy[o].eq(1),
                    self.tx_packets[o].eq(self.tx_packets[o] + 1),
                ).Elif(ended[o],
                    busy[o].eq(0),
                ),
            ]
            for k in range(nports):
                self.sync += If(grant[o][k], owner[o].eq(k))
                if not (transit_first or (o == 0 and eject_transit_first)):
                    self.sync += If(grant[o][k], rr_all[o].eq(k))
                if k >= 1:
                    self.sync += If(grant[o][k], rr[o].eq(k - 1))

        # observation for tests/benches
        self.busy, self.owner, self.fwd, self.drain, self.look = busy, owner, fwd, drain, look
        self.fwd2 = fwd2
        self.route, self.grant = route, grant
        self.req, self.req_words, self.drop_now = req, words, drop_now
        self.flip, self.diverts = flip, diverts

    # ------------------------------------------------------------------------
    def add_csrs(self, cross=NO_CROSS) -> None:
        """CSRs: routing-table write/read-back port, divert and counters.

        Write ``route_adr`` and ``route_port``, then any value to ``route_write``
        to store the entry in table set ``route_set`` (default 0). ``route_read``
        shows the entry at ``route_adr`` of set ``route_set``. ``divert``: bit 0 on,
        bit 1 the set diverted from; ``diverted`` counts diverted packets.

        ``cross`` (:class:`~paranic.hw.cdc.CsrCross`; default none): the router runs in
        another clock domain than the CSR bank (``NicCore(nic_clock=True)``): storages
        cross as levels, ``route_write`` as a pulse, counters and ``route_read`` as
        whole words (a few cycles late).
        """
        c = cross
        tbits = len(self.table_adr)
        rb = P.ROUTE_BITS
        self.route_adr = CSRStorage(tbits, name="route_adr", description="Routing-table index (destination node).")
        self.route_port = CSRStorage(rb, name="route_port", description="Port for route_adr (paranic.spec.protocol.Port).")
        self.route_write = CSR(name="route_write")
        self.route_read = CSRStatus(rb, name="route_read", description="Entry at route_adr of table set route_set.")
        self.route_set = CSRStorage(1, name="route_set",
                                    description="Table set (0/1) that route_write writes and route_read shows.")
        self.divert_csr = CSRStorage(2, name="divert",
                                     description="Bit 0: divert on; bit 1: the set diverted from (to the other).")
        self.diverted_csr = CSRStatus(32, name="diverted", description="Packets diverted to the other table set.")
        rp = self._table.get_port(mode=READ_FIRST)
        self.specials += rp
        route_set, route_adr = c.level(self.route_set.storage), c.level(self.route_adr.storage)
        divert = c.level(self.divert_csr.storage)
        self.comb += [
            self.table_we.eq(c.pulse(self.route_write.re)),
            self.table_set.eq(route_set),
            self.table_adr.eq(route_adr),
            self.table_dat.eq(c.level(self.route_port.storage)),
            rp.adr.eq(route_adr),
            self.route_read.status.eq(c.status(Mux(route_set, rp.dat_r[rb:2 * rb], rp.dat_r[:rb]))),
            self.divert_on.eq(divert[0]),
            self.divert_from.eq(divert[1]),
            self.diverted_csr.status.eq(c.status(self.diverted)),
        ]
        for p, sig in enumerate(self.tx_packets):
            st = CSRStatus(32, name=f"tx_{PORT_NAMES[p]}", description=f"Packets forwarded to port {PORT_NAMES[p]}.")
            setattr(self, f"tx_{PORT_NAMES[p]}_csr", st)
            self.comb += st.status.eq(c.status(sig))
        for name in ("err_unknown", "err_length", "err_aborted"):
            st = CSRStatus(32, name=name)
            setattr(self, f"{name}_csr", st)
            self.comb += st.status.eq(c.status(getattr(self, name)))
        self.eject_packets_csr = CSRStatus(len(self.eject_packets), name="eject_packets")
        self.comb += self.eject_packets_csr.status.eq(c.status(self.eject_packets))
