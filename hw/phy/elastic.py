"""Elastic buffer: line words from a PHY's receive clock into NicCore's clock.

A receiver clocked by the far end's oscillator (a transceiver's recovered clock, a
ribbon cable's forwarded clock) delivers words up to 200 ppm faster than the local
clock can take them when both oscillators sit at opposite ends of a ±100 ppm
tolerance. The buffer absorbs the difference the way PCIe's and Ethernet's elastic
buffers drop SKIP symbols: while it is more than ``high`` words full it drops filler
words (:func:`paranic.hw.link.ctl.is_filler`) instead of storing them. A far end whose
link layer holds a filler at least once every few thousand words (``LinkTX.hold``)
therefore never overruns it. When it runs empty the link layer simply sees a cycle
without a word, which its receiver accepts anywhere.

A word that arrives while the buffer is completely full is lost; ``overflow`` (sticky,
in the read domain) says so, and the link layer's sequence and CRC checks replay the
frame it belonged to. It does not happen while the far end holds fillers as it should.
"""

from __future__ import annotations

from migen import If, Signal
from migen.genlib.cdc import MultiReg

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from ..link.ctl import is_filler
from . import phy_layout
from .cdc import WordAsyncFIFO


class ElasticBuffer(LiteXModule):
    """Line words from clock domain ``cd_write`` into ``sys``, dropping fillers when full.

    Words are ``phy_layout(dw)`` beats (a filler beat: its low 64 bits, docs/link-layer.md).
    ``sink`` (``cd_write``): a word whenever ``sink.valid``; ``sink.ready`` is always 1.
    ``source`` (``sys``): the words in order, ``valid`` whenever one is buffered.
    ``level_w``: fill level seen by the write side. Status: ``overflow`` (sticky, in
    ``sys``), ``dropped_w`` (fillers dropped, in ``cd_write``).
    """

    def __init__(self, cd_write: str = "rx", depth: int = 64, high: int | None = None,
                 dw: int = P.WORD_BITS) -> None:
        high = depth // 2 if high is None else high
        if not 0 < high < depth:
            raise ValueError("high must lie between 0 and depth")
        self.fifo = fifo = WordAsyncFIFO(depth, cd_write=cd_write, cd_read="sys", dw=dw)
        self.sink = sink = stream.Endpoint(phy_layout(dw))
        self.source = fifo.source
        self.level_w = fifo.level_w
        self.overflow = Signal()
        self.dropped_w = Signal(32)

        drop = Signal()
        lost_w = Signal()
        self.comb += [
            sink.ready.eq(1),
            drop.eq(sink.valid & (self.level_w >= high) & is_filler(sink.data, sink.ctrl)),
            fifo.sink.valid.eq(sink.valid & ~drop),
            fifo.sink.data.eq(sink.data),
            fifo.sink.ctrl.eq(sink.ctrl),
        ]
        getattr(self.sync, cd_write).__iadd__([
            If(drop, self.dropped_w.eq(self.dropped_w + 1)),
            If(fifo.sink.valid & ~fifo.sink.ready, lost_w.eq(1)),
        ])
        self.specials += MultiReg(lost_w, self.overflow, odomain="sys")


__all__ = ["ElasticBuffer"]
