"""The management port, the identity inputs and the firmware status registers.

* :class:`MgmtPort`: a CPU-driven packet port into the router's local port, for the
  firmware's CONTROL packets (neighbour discovery, topology flooding). Transmit: the
  CPU pushes the words of a packet (the whole header, sent raw: the NIC stamps
  nothing, so link-local packets carry their ``direct`` port and routed ones the
  firmware's own source node) and commits them with ``tx_send``. Receive: CONTROL
  packets the router ejects land in a packet FIFO the CPU reads word by word. The RX
  side never drops a packet: when it is full it back-pressures the ejection path.
* :class:`Identity`: read-only CSRs of what the board (or the simulator) says this
  node is: a unique device id and an optional configured node id.
* :class:`FwStatus`: CSRStorage registers the firmware writes and the host reads
  (``paranic.spec.fw.FW_STATUS``); 0 on a NicCore without firmware.

See docs/mgmt.md.
"""

from __future__ import annotations

from migen import If, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage

from paranic.spec import fw as FW
from paranic.spec import protocol as P

from .common import packet_layout
from .fifo import PacketFifo
from .router import default_buf_words


class MgmtPort(LiteXModule):
    """CPU packet port: ``source`` joins the router's injection, ``sink`` takes the
    CONTROL packets the router ejects.

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
                                     description="Packets discarded (a refused push, longer than the MTU).")
        self._rx_packets = CSRStatus(len(self.rxf.packets), name="rx_packets",
                                     description="Complete packets waiting.")
        self._rx_len = CSRStatus(len(self.rxf.head_words), name="rx_len",
                                 description="Words (header + payload) of the head packet.")
        self._rx_data = CSRStatus(P.WORD_BITS, name="rx_data", description="Current word of the head packet.")
        self._rx_pop = CSR(name="rx_pop")
        self._rx_pop.description = "Write: move to the next word (the next packet after the last)."
        self._tx_packets = CSRStatus(32, name="tx_packets", description="Packets sent.")
        self._rx_packets_total = CSRStatus(32, name="rx_packets_total", description="Packets received.")
        self.comb += [
            self.push.eq(self._tx_push.re),
            self.push_data.eq(self._tx_data.storage),
            self.send.eq(self._tx_send.re),
            self.pop.eq(self._rx_pop.re),
            self._tx_free.status.eq(Mux(self.closing | (self.txf.free == 0), 0, self.txf.free - self.held_valid)),
            self._tx_busy.status.eq(self.closing | (self.txf.packets != 0)),
            self._tx_dropped.status.eq(self.txf.aborted),
            self._rx_packets.status.eq(self.rxf.packets),
            self._rx_len.status.eq(self.rxf.head_words),
            self._rx_data.status.eq(self.rxf.source.data),
            self._tx_packets.status.eq(self.tx_packets),
            self._rx_packets_total.status.eq(self.rx_packets_total),
        ]


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
