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

from migen import Cat, If, Memory, Signal
from migen.genlib.cdc import MultiReg

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from ..link.ctl import is_filler
from . import phy_layout


def _gray(b):
    return b ^ (b >> 1)


def _bin(g, n):
    """Binary of gray code ``g`` (n bits), as a list of bit expressions (LSB first)."""
    bits = [None] * n
    bits[n - 1] = g[n - 1]
    for i in range(n - 2, -1, -1):
        bits[i] = bits[i + 1] ^ g[i]
    return Cat(*bits)


class ElasticBuffer(LiteXModule):
    """Line words from clock domain ``cd_write`` into ``sys``, dropping fillers when full.

    ``sink`` (``cd_write``): a word whenever ``sink.valid``; ``sink.ready`` is always 1.
    ``source`` (``sys``): the words in order, ``valid`` whenever one is buffered.
    ``level_w``: fill level seen by the write side. Status (``sys``): ``overflow``
    (sticky), ``dropped`` (toggles once per dropped filler, for a counter in ``sys``).
    """

    def __init__(self, cd_write: str = "rx", depth: int = 64, high: int | None = None) -> None:
        if depth & (depth - 1) or depth < 8:
            raise ValueError("depth must be a power of two, at least 8")
        high = depth // 2 if high is None else high
        if not 0 < high < depth:
            raise ValueError("high must lie between 0 and depth")
        aw = depth.bit_length() - 1
        self.sink = sink = stream.Endpoint(phy_layout())
        self.source = source = stream.Endpoint(phy_layout())
        self.level_w = Signal(aw + 1)
        self.overflow = Signal()
        self.dropped_w = Signal(32)  # fillers dropped (write domain; for tests and status)

        # Not an attribute: LiteX's SoC would map an AutoCSR module's Memory into CSR space.
        mem = Memory(len(sink.data) + 1, depth)
        wr = mem.get_port(write_capable=True, clock_domain=cd_write)
        rd = mem.get_port(async_read=True)
        self.specials += mem, wr, rd

        # Write side (cd_write) -------------------------------------------------------
        wp = Signal(aw + 1)
        wp_g = Signal(aw + 1)
        rp_g_w = Signal(aw + 1)
        lost_w = Signal()
        drop = Signal()
        store = Signal()
        wsync = getattr(self.sync, cd_write)
        self.comb += [
            sink.ready.eq(1),
            self.level_w.eq(wp - _bin(rp_g_w, aw + 1)),
            drop.eq(sink.valid & (self.level_w >= high) & is_filler(sink.data, sink.ctrl)),
            store.eq(sink.valid & ~drop & (self.level_w < depth)),
            wr.adr.eq(wp[:aw]),
            wr.dat_w.eq(Cat(sink.data, sink.ctrl)),
            wr.we.eq(store),
        ]
        wsync += [
            If(store, wp.eq(wp + 1), wp_g.eq(_gray(wp + 1))),
            If(drop, self.dropped_w.eq(self.dropped_w + 1)),
            If(sink.valid & ~drop & ~store, lost_w.eq(1)),
        ]

        # Read side (sys) ---------------------------------------------------------------
        rp = Signal(aw + 1)
        rp_g = Signal(aw + 1)
        wp_g_r = Signal(aw + 1)
        self.specials += [
            MultiReg(rp_g, rp_g_w, odomain=cd_write),
            MultiReg(wp_g, wp_g_r, odomain="sys"),
            MultiReg(lost_w, self.overflow, odomain="sys"),
        ]
        self.comb += [
            rd.adr.eq(rp[:aw]),
            source.valid.eq(_bin(wp_g_r, aw + 1) != rp),
            source.data.eq(rd.dat_r[:len(source.data)]),
            source.ctrl.eq(rd.dat_r[len(source.data)]),
            source.first.eq(0), source.last.eq(0),
        ]
        self.sync += If(source.valid & source.ready, rp.eq(rp + 1), rp_g.eq(_gray(rp + 1)))


__all__ = ["ElasticBuffer"]
