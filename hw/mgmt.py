"""The management port, the identity inputs and the firmware status registers.

* :class:`MgmtPort`: a CPU-driven packet port for the firmware's CONTROL packets
  (neighbour discovery, topology flooding, route changes). Transmit: the CPU pushes the
  words of a packet (the whole header, sent raw: the NIC stamps nothing, so link-local
  packets carry their ``direct`` port and routed ones the firmware's own source node)
  and commits them with ``tx_send``. Receive: CONTROL packets the router ejects and
  those the control lanes bring (:mod:`paranic.hw.lane`) land in a packet FIFO the CPU
  reads word by word. The RX side never drops a packet: when it is full it
  back-pressures the ejection path and the lanes.
* :class:`MgmtSteer` and :class:`EvacInput`: where the management port's packets go:
  link-local ones to their link's control lane; the others into the router, at its
  local input (``tx_target`` 0, the default) or the input buffer of a
  link port whose link is DOWN (``tx_target`` p), so that packets the firmware replays
  from that link's frozen replay buffer enter the router as if they had just arrived
  on that port, ahead of everything queued behind them at the local input.
* :class:`Identity`: read-only CSRs of what the board (or the simulator) says this
  node is: a unique device id and an optional configured node id.
* :class:`FwStatus`: CSRStorage registers the firmware writes and the host reads
  (``paranic.spec.fw.FW_STATUS``); 0 on a NicCore without firmware.

See docs/mgmt.md.
"""

from __future__ import annotations

from migen import Case, ClockDomainsRenamer, If, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage

from paranic.spec import fw as FW
from paranic.spec import protocol as P
from paranic.spec.link import LinkState

from .cdc import StreamCrossing
from .common import hdr, packet_layout, words_to_beats
from .fifo import PacketFifo
from .lane import is_lane_header
from .router import default_buf_words
from .width import WordsToBeats

#: Width of ``tx_target``: a router port number (``paranic.spec.protocol.Port``).
TARGET_BITS = P.ROUTE_BITS


class MgmtPort(LiteXModule):
    """CPU packet port: ``source`` goes to the router's injection and the control lanes
    (:class:`MgmtSteer`), ``sink`` takes the CONTROL packets the router ejects and the
    lanes bring.

    ``depth_words`` (power of two, default room for two MTU packets) sizes each of the
    two packet FIFOs. CSRs (collected as ``mgmt_*``):

    * TX: ``tx_data`` (64) then ``tx_push`` (strobe) appends a word; ``tx_send``
      (strobe) makes the words pushed since the last send one packet. ``tx_free``:
      words that may still be pushed; ``tx_busy``: committed packets not yet handed to
      the router. A push without room is refused and spoils its packet (the send then
      discards it and counts it in ``tx_dropped``, as a packet longer than the MTU).
    * RX: ``rx_packets`` complete packets waiting; ``rx_len`` words of the head packet;
      ``rx_data`` (64) its current word; ``rx_pop`` (strobe) moves to the next word.
    * ``tx_packets``/``rx_packets_total``: packets sent / received (32-bit counters).
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, depth_words: int | None = None) -> None:
        max_pkt = P.packet_words(mtu)
        depth_words = default_buf_words(mtu) if depth_words is None else depth_words
        self.depth_words = depth_words
        self.source = stream.Endpoint(packet_layout())
        self.sink = stream.Endpoint(packet_layout())

        # CPU-side interface (driven by the CSRs below, or directly by a test).
        self.push = Signal()
        self.push_data = Signal(P.WORD_BITS)
        self.send = Signal()
        self.pop = Signal()
        self.tx_packets = Signal(32)
        self.rx_packets_total = Signal(32)
        self.tx_refused = Signal()   # strobe: a push found no room
        # Where the packets go (MgmtSteer): 0 the router's local input, p link port p's input.
        self.tx_target = Signal(TARGET_BITS)
        # From NicCore: the router input the packets currently go to is empty.
        self.fed_empty = Signal(reset=1)
        self.tx_empty = Signal()     # TX FIFO empty and no send waiting for room
        self.tx_idle = Signal()      # ... and the link input it feeds (target p) is empty
        self.misrouted = Signal(32)  # from MgmtSteer: packets discarded for a bad tx_target

        # # #

        self.txf = txf = PacketFifo(depth_words, max_pkt, backpressure=True)
        self.rxf = rxf = PacketFifo(depth_words, max_pkt, backpressure=True)

        # TX: the last word pushed is held back until the CPU says whether it ends the
        # packet (the next push writes it with last = 0, a send with last = 1). A send
        # that finds the FIFO full keeps the word until there is room ("closing"; the
        # committed packets ahead of it drain into the router meanwhile).
        held = Signal(P.WORD_BITS)
        held_valid = Signal()
        closing = Signal()           # the held word ends a packet, waiting for room
        spoilt = Signal()            # a word of this packet was refused: discard it
        spoil_next = Signal()        # a push refused while closing: the next packet's
        self.comb += [
            If(closing,
                txf.sink.valid.eq(1), txf.sink.data.eq(held), txf.sink.last.eq(1),
                txf.sink.error.eq(spoilt),
            ).Elif(self.push & held_valid,
                txf.sink.valid.eq(1), txf.sink.data.eq(held), txf.sink.last.eq(0),
            ).Elif(self.send & held_valid,
                txf.sink.valid.eq(1), txf.sink.data.eq(held), txf.sink.last.eq(1),
                txf.sink.error.eq(spoilt),
            ),
            self.tx_refused.eq(self.push & (closing | (held_valid & ~txf.sink.ready))),
        ]
        self.sync += [
            If(closing,
                If(txf.sink.ready,
                    closing.eq(0), held_valid.eq(0), spoilt.eq(spoil_next | self.push),
                    spoil_next.eq(0),
                ).Elif(self.push, spoil_next.eq(1)),
            ).Elif(self.send,
                If(held_valid & ~txf.sink.ready,
                    closing.eq(1),
                ).Else(
                    held_valid.eq(0), spoilt.eq(0),
                ),
            ).Elif(self.push,
                held.eq(self.push_data), held_valid.eq(1),
                If(held_valid & ~txf.sink.ready, spoilt.eq(1)),
            ),
        ]
        self.closing = closing
        self.held_valid = held_valid
        self.comb += txf.source.connect(self.source)
        self.sync += If(self.source.valid & self.source.ready & self.source.last,
                        self.tx_packets.eq(self.tx_packets + 1))
        self.comb += [
            self.tx_empty.eq(txf.empty & ~closing),
            self.tx_idle.eq(self.tx_empty & self.fed_empty),
        ]

        # RX: the router's ejected CONTROL packets; back-pressure, never an abort
        # (packets longer than the MTU never leave the router).
        self.comb += [
            self.sink.connect(rxf.sink),
            rxf.source.ready.eq(self.pop & (rxf.packets != 0)),
        ]
        self.sync += If(rxf.committed, self.rx_packets_total.eq(self.rx_packets_total + 1))

    def add_csrs(self) -> None:
        self._tx_data = CSRStorage(P.WORD_BITS, name="tx_data", description="Word to push.")
        self._tx_push = CSR(name="tx_push")
        self._tx_push.description = "Write: append tx_data to the packet being built."
        self._tx_send = CSR(name="tx_send")
        self._tx_send.description = "Write: the words pushed so far are one packet; send it."
        self._tx_free = CSRStatus(len(self.txf.free), name="tx_free", description="Words that may be pushed.")
        self._tx_busy = CSRStatus(1, name="tx_busy", description="Packets committed, not yet sent.")
        self._tx_dropped = CSRStatus(32, name="tx_dropped",
                                     description="Packets discarded (a refused push, longer than the MTU, "
                                                 "a tx_target beyond the link ports).")
        self._rx_packets = CSRStatus(len(self.rxf.packets), name="rx_packets",
                                     description="Complete packets waiting.")
        self._rx_len = CSRStatus(len(self.rxf.head_words), name="rx_len",
                                 description="Words (header + payload) of the head packet.")
        self._rx_data = CSRStatus(P.WORD_BITS, name="rx_data", description="Current word of the head packet.")
        self._rx_pop = CSR(name="rx_pop")
        self._rx_pop.description = "Write: move to the next word (the next packet after the last)."
        self._tx_packets = CSRStatus(32, name="tx_packets", description="Packets sent.")
        self._rx_packets_total = CSRStatus(32, name="rx_packets_total", description="Packets received.")
        # Last, so that the older CSRs keep their offsets.
        self._tx_target = CSRStorage(TARGET_BITS, name="tx_target",
                                     description="Where packets enter the router: 0 its local input; p the "
                                                 "input of link port p, while link p is DOWN (they wait "
                                                 "otherwise). Change it only while tx_idle is 1.")
        self._tx_idle = CSRStatus(1, name="tx_idle",
                                  description="TX FIFO empty (no send waiting for room) and, with a "
                                              "link port as tx_target, that router input empty.")
        self.comb += [
            self.push.eq(self._tx_push.re),
            self.push_data.eq(self._tx_data.storage),
            self.send.eq(self._tx_send.re),
            self.pop.eq(self._rx_pop.re),
            self._tx_free.status.eq(Mux(self.closing | (self.txf.free == 0), 0, self.txf.free - self.held_valid)),
            self._tx_busy.status.eq(self.closing | (self.txf.packets != 0)),
            self._tx_dropped.status.eq(self.txf.aborted + self.misrouted),
            self.tx_target.eq(self._tx_target.storage),
            self._tx_idle.status.eq(self.tx_idle),
            self._rx_packets.status.eq(self.rxf.packets),
            self._rx_len.status.eq(self.rxf.head_words),
            self._rx_data.status.eq(self.rxf.source.data),
            self._tx_packets.status.eq(self.tx_packets),
            self._rx_packets_total.status.eq(self.rx_packets_total),
        ]


class MgmtSteer(LiteXModule):
    """Sends each management packet to the control lane or the router input ``target`` names.

    ``sink`` (the MgmtPort's ``source``) goes to ``lanes[p - 1]`` when it is a link-local
    CONTROL packet for link port p (:func:`paranic.hw.lane.is_lane_header`: the control
    lane, beside the router), and otherwise to ``local`` (target 0: NicCore's injection
    arbiter) or to ``links[p - 1]`` (target p: link port p's :class:`EvacInput`).
    The way is chosen at a packet's first word (``target`` sampled then) and held until
    its last, so changing ``target`` never cuts a packet. A routed packet for a target
    beyond ``n_links`` is read and discarded whole, counted in ``misrouted``. ``cur``:
    the router input the packet at the head goes to (the held target during a packet,
    else ``target``); ``lane``: it goes to a lane instead.
    """

    def __init__(self, n_links: int) -> None:
        self.sink = stream.Endpoint(packet_layout())
        self.local = stream.Endpoint(packet_layout())
        self.links = [stream.Endpoint(packet_layout()) for _ in range(n_links)]
        self.lanes = [stream.Endpoint(packet_layout()) for _ in range(n_links)]
        self.target = Signal(TARGET_BITS)
        self.cur = Signal(TARGET_BITS)
        self.lane = Signal()
        self.misrouted = Signal(32)

        # # #

        open_ = Signal()                 # a packet is part-way through
        held = Signal(TARGET_BITS)
        held_lane = Signal()
        lane_port = Signal(TARGET_BITS)  # the lane of the packet at the head
        held_port = Signal(TARGET_BITS)
        beat = Signal()
        self.comb += [
            self.cur.eq(Mux(open_, held, self.target)),
            self.lane.eq(Mux(open_, held_lane, is_lane_header(self.sink.data, n_links))),
            lane_port.eq(Mux(open_, held_port, hdr(self.sink.data, "direct"))),
            beat.eq(self.sink.valid & self.sink.ready),
        ]
        self.sync += If(beat,
            open_.eq(~self.sink.last),
            If(~open_, held.eq(self.target), held_lane.eq(self.lane), held_port.eq(lane_port)),
        )
        outs = [self.local] + self.links
        bad = Signal()
        self.comb += bad.eq(~self.lane & (self.cur > n_links))
        for p, out in enumerate(outs):
            self.comb += If(~self.lane & (self.cur == p), self.sink.connect(out))
        for p, out in enumerate(self.lanes, start=1):
            self.comb += If(self.lane & (lane_port == p), self.sink.connect(out))
        # A bad target: drain the packet (never block the port behind it).
        self.comb += If(bad, self.sink.ready.eq(1))
        self.sync += If(bad & beat & self.sink.last, self.misrouted.eq(self.misrouted + 1))


class EvacInput(LiteXModule):
    """Multiplexer in front of a router link port's input buffer.

    ``link_sink`` (the link layer's received packets) passes to ``source`` (the router
    port's ``sink``) normally. A management packet on ``mgmt_sink`` (from
    :class:`MgmtSteer`) passes instead only while the link is DOWN (``link_state``),
    no received packet is part-way through (a frame cut by the fault still ends with
    its error beat, which discards it in the buffer), and the buffer has room: the
    injection bubble rule of the router's packet accounting (``slots`` packet slots of
    ``max_pkt`` words, one per packet whatever its size; after this packet one slot must
    stay free: ``packets`` + 2 <= ``slots``), so that a packet entering the network here
    never takes a ring's last free slot; and, implied by that but checked anyway
    because the router's link input buffers take no back-pressure (they discard a
    packet that does not fit), ``room`` free words >= ``mgmt_words`` (its length).
    Otherwise the management packet waits (back-pressure). Switching happens only at
    packet boundaries on both sides; a management packet once started is passed whole,
    even if the link leaves DOWN meanwhile (a restart; the link trains only once the
    buffer is empty again). While a management packet passes, the link's ``ready`` is
    0: a word the link delivered then would be a credit violation, which the link layer
    counts (``rx_overflows``) and repairs by replay; a DOWN link delivers none.

    Credits: the link layer returns to the far end the words drained out of this
    buffer, but counts them only once it has seen its partner (training), which needs
    the buffer empty: words of injected packets, drained while the link is DOWN or
    before it has seen the partner again, are never returned. ``active`` is 1 while a
    management packet passes.

    ``dw`` (64, 128, 256): the width of all three streams (the router's beats); then
    ``room`` and ``mgmt_words`` count beats (:class:`MgmtTxPath` packs the management
    port's words into beats in front of ``mgmt_sink``).
    """

    def __init__(self, room_bits: int, words_bits: int, packets_bits: int, slots: int,
                 dw: int = P.WORD_BITS) -> None:
        if slots < 2:
            raise ValueError("an input buffer has at least two packet slots")
        self.link_sink = stream.Endpoint(packet_layout(dw))
        self.mgmt_sink = stream.Endpoint(packet_layout(dw))
        self.source = stream.Endpoint(packet_layout(dw))
        self.link_state = Signal(2)
        self.room = Signal(room_bits)
        self.packets = Signal(packets_bits)
        self.mgmt_words = Signal(words_bits)
        self.active = Signal()

        # # #

        mg = Signal()        # a management packet is part-way through
        lin = Signal()       # a received packet is part-way through
        start = Signal()
        self.comb += [
            start.eq(~mg & ~lin & ~self.link_sink.valid & self.mgmt_sink.valid &
                     (self.link_state == LinkState.DOWN) & (self.packets <= slots - 2) &
                     (self.room >= self.mgmt_words)),
            self.active.eq(mg | start),
            If(self.active,
                self.mgmt_sink.connect(self.source),
            ).Else(
                self.link_sink.connect(self.source),
            ),
        ]
        self.sync += [
            If(self.mgmt_sink.valid & self.mgmt_sink.ready, mg.eq(~self.mgmt_sink.last)),
            If(self.link_sink.valid & self.link_sink.ready, lin.eq(~self.link_sink.last)),
        ]


class MgmtTxPath(LiteXModule):
    """The management port's TX path into a router: a :class:`MgmtSteer` and one
    :class:`EvacInput` per link port, wired to ``mgmt`` (its ``source``, ``tx_target``,
    ``fed_empty``, ``misrouted``) and to ``router`` (each link port's ``sink``, the room
    and packets in its input buffers, its packet slots; the buffer ``tx_idle`` watches).

    Left to the assembly (NicCore): ``local`` (packets for the router's local input,
    to the injection arbiter; 64-bit words), ``link_sinks[i]`` (link port i + 1's
    received packets, from its link layer; the router's width) and ``link_states[i]``
    (its ``LinkState``).

    A router wider than 64 bits (``router.dw``): each link port's management packets
    pass a :class:`~paranic.hw.width.WordsToBeats` (``packs[i]``) before its
    :class:`EvacInput`, whose ``mgmt_words`` is then the packet's beats: its words
    (the TX FIFO's ``head_words``, taken as its first word enters the packer) in beats.
    A beat still in a packer counts as not empty for ``tx_idle``.

    ``cd`` (default None: one clock): the router's clock domain when it is not the
    management port's (``NicCore(nic_clock=True)``; a wide router only): each
    :class:`EvacInput` runs in ``cd``, behind a
    :class:`~paranic.hw.cdc.StreamCrossing` (``crosses[i]``) from its packer, whose
    beats carry the packet's ``mgmt_words`` (field ``beats``) with them; ``tx_idle``
    also waits for the crossing and sees the buffer's ``empty`` through it.
    """

    def __init__(self, mgmt: MgmtPort, router, cd: str | None = None) -> None:
        n_links = router.n_links
        dw = getattr(router, "dw", P.WORD_BITS)
        wide = P.beat_words(dw) > 1
        if cd is not None and not wide:
            raise ValueError("MgmtTxPath: a clock domain crossing needs a router wider than 64 bits")
        self.packs = []
        self.crosses = []
        self.steer = steer = MgmtSteer(n_links)
        self.local = steer.local
        self.evac = []
        self.comb += [
            mgmt.source.connect(steer.sink),
            steer.target.eq(mgmt.tx_target),
            mgmt.misrouted.eq(steer.misrouted),
        ]
        # tx_idle: the link input the head packet goes to (or went to) is empty. The
        # local input is not watched: it also holds host packets, which may wait there
        # for a failed link (exactly when the firmware replays that link's packets).
        if wide:
            for i in range(n_links):
                pk = WordsToBeats(dw)
                setattr(self, f"pack{i}", pk)
                self.packs.append(pk)
                if cd is not None:
                    cr = StreamCrossing(packet_layout(dw) + [("beats", len(mgmt.txf.head_words))],
                                        cd_from="sys", cd_to=cd)
                    setattr(self, f"cross{i}", cr)
                    self.crosses.append(cr)
                    self.comb += cr.far_busy.eq(~router.inputs[i + 1].empty)
        if cd is not None:
            empties = {p: ~self.crosses[p - 1].pending & ~self.packs[p - 1].source.valid
                       for p in range(1, n_links + 1)}
        else:
            empties = {p: f.empty & ~self.packs[p - 1].source.valid if wide else f.empty
                       for p, f in enumerate(router.inputs) if p}
        fed = Signal(name="fed")
        self.comb += [
            fed.eq(1),    # the local input, or a bad target (discarded, nothing fed)
            Case(steer.cur, {p: fed.eq(e) for p, e in empties.items()}),
            mgmt.fed_empty.eq(fed),
        ]
        for i, port in enumerate(router.links):
            buf = router.inputs[i + 1]
            ev = EvacInput(room_bits=len(buf.free), words_bits=len(mgmt.txf.head_words),
                           packets_bits=len(buf.packets), slots=router.slots_per_buffer, dw=dw)
            if cd is not None:
                ev = ClockDomainsRenamer(cd)(ev)
            setattr(self, f"evac{i}", ev)
            self.evac.append(ev)
            mgmt_in, mgmt_words = ev.mgmt_sink, mgmt.txf.head_words
            if wide:
                pk = self.packs[i]
                beats = Signal(len(mgmt.txf.head_words), name=f"mgmt_beats{i}")
                at_first = Signal(reset=1, name=f"mgmt_first{i}")
                self.sync += If(pk.sink.valid & pk.sink.ready,
                    at_first.eq(pk.sink.last),
                    If(at_first, beats.eq(words_to_beats(mgmt.txf.head_words, dw))),
                )
                if cd is None:
                    self.comb += pk.source.connect(ev.mgmt_sink)
                    mgmt_in, mgmt_words = pk.sink, beats
                else:
                    cr = self.crosses[i]
                    self.comb += [
                        pk.source.connect(cr.sink),
                        cr.sink.beats.eq(beats),
                        cr.source.connect(ev.mgmt_sink, omit={"beats"}),
                    ]
                    mgmt_in, mgmt_words = pk.sink, cr.source.beats
            self.comb += [
                steer.links[i].connect(mgmt_in),
                ev.source.connect(port.sink),
                ev.room.eq(buf.free),
                ev.packets.eq(buf.packets),
                ev.mgmt_words.eq(mgmt_words),
            ]
        self.link_sinks = [ev.link_sink for ev in self.evac]
        self.link_states = [ev.link_state for ev in self.evac]


class Identity(LiteXModule):
    """``dna``/``cfg_node`` inputs (``paranic.spec.fw.ID_REGS``) as read-only CSRs
    (collected as ``id_dna``, ``id_cfg_node``)."""

    def __init__(self) -> None:
        for name, bits, doc in FW.ID_REGS:
            sig = Signal(bits, name=name)
            setattr(self, name, sig)
            csr = CSRStatus(bits, name=name, description=doc)
            setattr(self, f"_{name}", csr)
            self.comb += csr.status.eq(sig)


class FwStatus(LiteXModule):
    """The firmware's status registers (``paranic.spec.fw.FW_STATUS``), collected as
    ``fw_<name>``; ``regs[name]`` is the CSRStorage."""

    def __init__(self) -> None:
        self.regs = {}
        for name, bits, doc in FW.FW_STATUS:
            csr = CSRStorage(bits, name=name, description=doc)
            setattr(self, f"_{name}", csr)
            self.regs[name] = csr
