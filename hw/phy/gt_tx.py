"""gt adapter, transmit side: rate matching in sys, byte packing in the transceiver's tx clock.

:class:`GTTxRateMatch` (sys) takes one line word per cycle from the LinkLayer and
writes it into :class:`~.cdc.WordAsyncFIFO` towards the ``tx`` domain. Above ``threshold``
words it asks the link for fillers (``hold``) and drops them instead of writing
them, so the link's word rate follows the line's payload rate whatever the sys
clock is. Every ``filler_period`` words written it also forces one filler *onto*
the line (hold until the link emits one, and write it even above the threshold):
the far elastic buffer drops those to absorb up to ±100 ppm oscillator offsets.

:class:`GTTxPacker` (``tx``) packs the variable-length byte stream of the words
(:mod:`.gt_framing`) into ``nbytes`` transceiver bytes per clock, sends idles
when it has no whole word, and forces an idle clock (comma in byte lane 0) as soon
as the word on the line ends once ``comma_interval`` clocks went by without one.
"""

from __future__ import annotations

from migen import Array, Cat, If, Mux, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from ..link.ctl import is_filler
from . import phy_layout
from .gt_framing import COMMA, LANE_BYTES, MARKER, PAD


class GTTxRateMatch(LiteXModule):
    """sys side: LinkLayer words into the tx FIFO, ``hold`` and filler dropping.

    ``sink`` (sys): one word per cycle (``ready`` = 1). ``source``: into the FIFO
    (``level`` is its write-side fill level). ``tx_ready`` (sys): the transmitter
    runs; while low every word is dropped and ``hold`` is high.
    Counters (sys): ``fillers_dropped``, ``fillers_forced``, ``lost`` (words that met
    a full FIFO: never happens while the link honours ``hold``). ``dw``: beat width
    (``phy_layout(dw)``; words are counted in beats).
    """

    def __init__(self, depth: int, threshold: int, filler_period: int,
                 dw: int = P.WORD_BITS) -> None:
        if not 0 < threshold < depth:
            raise ValueError("threshold must lie between 0 and the FIFO depth")
        if filler_period < 2:
            raise ValueError("filler_period must be at least 2")
        self.sink = sink = stream.Endpoint(phy_layout(dw))
        self.source = source = stream.Endpoint(phy_layout(dw))
        self.level = Signal(max=depth + 1)
        self.tx_ready = Signal(reset=1)
        self.hold = Signal()
        self.fillers_dropped = Signal(32)
        self.fillers_forced = Signal(32)
        self.lost = Signal(32)

        above = Signal()
        filler = Signal()
        debt = Signal()          # a filler must reach the line before the next frame
        since = Signal(max=filler_period + 1)
        drop = Signal()
        self.comb += [
            sink.ready.eq(1),
            above.eq(self.level >= threshold),
            filler.eq(is_filler(sink.data, sink.ctrl)),
            drop.eq(sink.valid & (~self.tx_ready | (filler & above & ~debt))),
            source.valid.eq(sink.valid & ~drop),
            source.data.eq(sink.data),
            source.ctrl.eq(sink.ctrl),
            self.hold.eq(above | debt | ~self.tx_ready),
        ]
        self.sync += [
            If(source.valid & source.ready,
                If(filler,
                    since.eq(0), debt.eq(0),
                    If(debt, self.fillers_forced.eq(self.fillers_forced + 1)),
                ).Else(
                    since.eq(since + 1),
                    If(since == filler_period - 1, debt.eq(1)),
                ),
            ),
            If(drop & self.tx_ready, self.fillers_dropped.eq(self.fillers_dropped + 1)),
            If(source.valid & ~source.ready, self.lost.eq(self.lost + 1)),
        ]


class GTTxPacker(LiteXModule):
    """tx side: words into ``nbytes`` transceiver bytes (+ K flags) per clock.

    ``sink`` (tx domain, from the FIFO; ``valid`` may drop any time). ``data``
    (8 x nbytes) and ``k`` (nbytes): registered, byte lane 0 in the LSBs, sent first.
    ``commas`` counts idle clocks (tx domain; for tests).
    """

    def __init__(self, nbytes: int = 4, comma_interval: int = 256) -> None:
        if nbytes not in LANE_BYTES:
            raise ValueError(f"nbytes must be one of {LANE_BYTES}")
        if comma_interval < 16:
            raise ValueError("comma_interval must be at least 16 clocks")
        W = nbytes
        self.sink = sink = stream.Endpoint(phy_layout())
        self.data = Signal(8 * W)
        self.k = Signal(W)
        self.commas = Signal(32)

        # The word on the line (9 byte slots: a control word's marker first).
        cur_b = [Signal(8) for _ in range(9)]
        cur_k = [Signal() for _ in range(9)]
        cur_len = Signal(4)
        pos = Signal(4)
        cur_valid = Signal()
        # The FIFO's head word as byte slots.
        head_b = [Signal(8) for _ in range(9)]
        head_k = [Signal() for _ in range(9)]
        dbytes = [sink.data[8 * i:8 * (i + 1)] for i in range(8)]
        for j in range(9):
            self.comb += [
                head_b[j].eq(Mux(sink.ctrl, MARKER if j == 0 else dbytes[j - 1],
                                 dbytes[j] if j < 8 else 0)),
                head_k[j].eq(sink.ctrl & (j == 0)),
            ]

        rem = Signal(4)           # bytes of the current word still to send
        take = Signal()           # the head word starts in this clock
        comma_cnt = Signal(max=comma_interval + 1)
        comma_due = Signal()
        idle_clock = Signal()
        self.comb += [
            rem.eq(Mux(cur_valid, cur_len - pos, 0)),
            comma_due.eq(comma_cnt == comma_interval),
            take.eq(sink.valid & ~comma_due & (rem < W)),
            idle_clock.eq((rem == 0) & ~take),
            sink.ready.eq(take),
        ]
        cur_ba, cur_ka = Array(cur_b), Array(cur_k)
        head_ba, head_ka = Array(head_b), Array(head_k)
        lanes_b = [Signal(8) for _ in range(W)]
        lanes_k = [Signal() for _ in range(W)]
        for i in range(W):
            ci, hi = Signal(4), Signal(4)   # slot of lane i in the current / head word
            self.comb += [
                ci.eq(pos + i),
                hi.eq(i - rem),
                If(rem > i,
                    lanes_b[i].eq(cur_ba[ci]), lanes_k[i].eq(cur_ka[ci]),
                ).Elif(take,
                    lanes_b[i].eq(head_ba[hi]), lanes_k[i].eq(head_ka[hi]),
                ).Else(
                    lanes_b[i].eq(COMMA if i == 0 else PAD), lanes_k[i].eq(1),
                ),
            ]
        self.sync.tx += [
            self.data.eq(Cat(*lanes_b)),
            self.k.eq(Cat(*lanes_k)),
            If(rem > W,
                pos.eq(pos + W),
            ).Elif(take,
                *[cur_b[j].eq(head_b[j]) for j in range(9)],
                *[cur_k[j].eq(head_k[j]) for j in range(9)],
                cur_len.eq(Mux(sink.ctrl, 9, 8)),
                pos.eq(W - rem),
                cur_valid.eq(1),
            ).Else(
                cur_valid.eq(0),
            ),
            If(idle_clock,
                comma_cnt.eq(0),
                self.commas.eq(self.commas + 1),
            ).Elif(~comma_due,
                comma_cnt.eq(comma_cnt + 1),
            ),
        ]
