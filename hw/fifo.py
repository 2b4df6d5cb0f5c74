"""Packet FIFO with store-and-forward commit, status flags and a packet-ready FIFO.

:class:`PacketFifo` is the buffer of every router port (link inputs, injection,
ejection). A packet written into ``sink`` becomes visible at ``source`` only when
its last beat has been written and committed; a packet whose last beat carries
``error``, that does not fit into the free space, or that is longer than
``max_packet_words`` is discarded whole (the write pointer rolls back) and counted
in ``aborted``. Committed packets are never touched by a later abort.

Besides the word-level status (``empty``, ``half_full``, ``full``, ``level``,
``free``) the FIFO keeps ParaStation's *packet-ready FIFO*: one entry per committed
packet holding its word count, so the reader (the router's arbiter, or the host
side) sees ``packets`` (complete packets waiting) and ``head_words`` (length of the
head packet) without looking into the data.
"""

from __future__ import annotations

from migen import Cat, If, Memory, Signal, bits_for, log2_int
from migen.fhdl.specials import READ_FIRST
from migen.genlib.fifo import SyncFIFO
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus

from .common import packet_layout


class PacketFifo(LiteXModule):
    """Store-and-forward packet FIFO.

    Parameters
    ----------
    depth_words:
        Data storage in 64-bit words (a power of two, >= ``max_packet_words``).
    max_packet_words:
        Longest packet accepted; longer ones are aborted. Sets ``head_words``' width.
    packets:
        Depth of the packet-ready FIFO (default ``depth_words``: every packet holds
        at least one word, so it can never fill). With a smaller depth a packet
        that completes while the packet-ready FIFO is full is aborted.
    backpressure:
        ``False`` (default, link inputs): ``sink.ready`` is always 1 and a packet
        that meets a full FIFO is aborted (the sender's credits make this a fault).
        ``True`` (injection side): ``sink.ready`` drops while the FIFO is full and
        the packet being written fits into ``max_packet_words``, so a producer can
        simply stream; only oversized or ``error`` packets are aborted.

    Interface
    ---------
    ``sink``/``source``: :func:`~paranic.hw.common.packet_layout` streams.
    ``source`` carries committed packets only, one word per cycle, with ``first``
    and ``last`` set; its ``valid`` rises in the cycle in which ``packets`` turns
    non-zero (no extra read latency). ``drained`` pulses once per word read.
    ``packets``/``head_words``: the packet-ready FIFO. ``level``/``free``: words
    held (including a packet being written) and free. ``empty``/``half_full``
    (``level >= depth/2``)/``full``. ``aborted``: 32-bit count of discarded packets.
    """

    def __init__(self, depth_words: int, max_packet_words: int, packets: int | None = None,
                 backpressure: bool = False) -> None:
        if depth_words < 2 or depth_words & (depth_words - 1):
            raise ValueError("depth_words must be a power of two >= 2")
        if not 1 <= max_packet_words <= depth_words:
            raise ValueError("max_packet_words must be in 1..depth_words")
        packets = depth_words if packets is None else packets
        self.depth_words = depth_words
        self.max_packet_words = max_packet_words

        self.sink = sink = stream.Endpoint(packet_layout())
        self.source = source = stream.Endpoint(packet_layout())

        abits = log2_int(depth_words)
        self.level = Signal(abits + 1)
        self.free = Signal(abits + 1)
        self.empty = Signal()
        self.half_full = Signal()
        self.full = Signal()
        self.packets = Signal(max=packets + 1)
        self.head_words = Signal(bits_for(max_packet_words))
        self.drained = Signal()
        self.aborted = Signal(32)
        self.committed = Signal()  # strobe: a packet was committed this cycle

        # # #

        wptr = Signal(abits + 1)   # next word to write (may run ahead of cptr)
        cptr = Signal(abits + 1)   # end of the committed packets
        rptr = Signal(abits + 1)   # next word to read
        wcnt = Signal(bits_for(max_packet_words))  # words of the packet being written
        drop = Signal()            # the packet being written is already lost

        # Data memory: 64-bit word + last flag.
        mem = Memory(len(sink.data) + 1, depth_words)
        wr = mem.get_port(write_capable=True)
        rd = mem.get_port(mode=READ_FIRST)  # synchronous read (block RAM)
        self.specials += mem, wr, rd

        # Packet-ready FIFO: one word count per committed packet.
        self.pfifo = pfifo = SyncFIFO(len(self.head_words), packets, fwft=True)

        self.comb += [
            self.level.eq(wptr - rptr),
            self.free.eq(depth_words - self.level),
            self.empty.eq(self.level == 0),
            self.full.eq(self.level == depth_words),
            self.half_full.eq(self.level >= depth_words // 2),
            self.packets.eq(pfifo.level),
            self.head_words.eq(pfifo.dout),
        ]

        # -- write side ------------------------------------------------------
        beat = Signal()
        fits = Signal()      # this beat can be stored
        too_long = Signal()  # the packet already holds max_packet_words
        lost = Signal()      # the packet (with this beat) must be discarded
        stall = Signal()
        self.comb += [
            too_long.eq(wcnt == max_packet_words),
            fits.eq(~self.full & ~too_long & ~drop),
            stall.eq(self.full & ~too_long & ~drop) if backpressure else stall.eq(0),
            sink.ready.eq(~stall),
            beat.eq(sink.valid & sink.ready),
            wr.adr.eq(wptr[:abits]),
            wr.dat_w.eq(Cat(sink.data, sink.last)),
            wr.we.eq(beat & fits),
            lost.eq(drop | ~fits | sink.error | ~pfifo.writable),
            pfifo.din.eq(wcnt + 1),
            pfifo.we.eq(beat & sink.last & ~lost),
            self.committed.eq(pfifo.we),
        ]
        # A one-word packet committed at edge k is read at edge k as well (its only
        # word is written then): hold its valid back one cycle. Longer packets have
        # their first word written at least one edge before their commit.
        fresh = Signal()
        self.sync += [
            fresh.eq(0),
            If(beat,
                If(sink.last,
                    wcnt.eq(0),
                    drop.eq(0),
                    If(lost,
                        wptr.eq(cptr),
                        self.aborted.eq(self.aborted + 1),
                    ).Else(
                        wptr.eq(wptr + 1),
                        cptr.eq(wptr + 1),
                        fresh.eq(wcnt == 0),
                    )
                ).Else(
                    If(fits,
                        wptr.eq(wptr + 1),
                        wcnt.eq(wcnt + 1),
                    ).Else(
                        drop.eq(1),
                    )
                )
            )
        ]

        # -- read side -------------------------------------------------------
        rnext = Signal(abits + 1)
        pop = Signal()
        at_first = Signal(reset=1)
        self.comb += [
            source.valid.eq((rptr != cptr) & ~(fresh & (rptr == cptr - 1))),
            source.data.eq(rd.dat_r[:len(sink.data)]),
            source.last.eq(rd.dat_r[len(sink.data)]),
            source.first.eq(at_first),
            pop.eq(source.valid & source.ready),
            rnext.eq(rptr + pop),
            rd.adr.eq(rnext[:abits]),
            self.drained.eq(pop),
            pfifo.re.eq(pop & source.last),
        ]
        self.sync += [
            rptr.eq(rnext),
            If(pop, at_first.eq(source.last)),
        ]

    def add_csrs(self) -> None:
        """Status registers (level, packets, aborted) for the generated CSR map."""
        self._level = CSRStatus(len(self.level), description="Words held.")
        self._packets = CSRStatus(len(self.packets), description="Complete packets waiting.")
        self._aborted = CSRStatus(32, description="Packets discarded (error/overflow).")
        self.comb += [
            self._level.status.eq(self.level),
            self._packets.status.eq(self.packets),
            self._aborted.status.eq(self.aborted),
        ]
