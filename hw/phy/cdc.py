"""Line words across clock domains: a gray-pointer asynchronous FIFO whose writer sees
its fill level (the transmit side's rate matching and the receive side's elastic buffer
both decide by it)."""

from __future__ import annotations

from migen import Cat, If, Memory, Signal
from migen.genlib.cdc import MultiReg

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from . import phy_layout


def gray(b):
    """Gray code of ``b`` (a Migen expression)."""
    return b ^ (b >> 1)


def ungray(g, n: int):
    """Binary value of the ``n``-bit gray code ``g`` (a Migen expression)."""
    bits = [None] * n
    bits[n - 1] = g[n - 1]
    for i in range(n - 2, -1, -1):
        bits[i] = bits[i + 1] ^ g[i]
    return Cat(*bits)


class WordAsyncFIFO(LiteXModule):
    """Line words from ``cd_write`` into ``cd_read``, with the fill level seen by the writer.

    ``sink`` (``cd_write``): written when ``valid`` (``ready`` = not full). ``source``
    (``cd_read``): first-word-fall-through, ``phy_layout(dw)``. ``level_w`` (``cd_write``): words stored, as
    the writer sees it (never less than the truth: the read pointer arrives late).
    """

    def __init__(self, depth: int, cd_write: str = "sys", cd_read: str = "sys",
                 dw: int = P.WORD_BITS) -> None:
        if depth & (depth - 1) or depth < 8:
            raise ValueError("depth must be a power of two, at least 8")
        aw = depth.bit_length() - 1
        self.depth = depth
        self.sink = sink = stream.Endpoint(phy_layout(dw))
        self.source = source = stream.Endpoint(phy_layout(dw))
        self.level_w = Signal(aw + 1)

        # Not an attribute: LiteX's SoC would map an AutoCSR module's Memory into CSR space.
        mem = Memory(len(sink.data) + 1, depth)
        wr = mem.get_port(write_capable=True, clock_domain=cd_write)
        rd = mem.get_port(async_read=True, clock_domain=cd_read)
        self.specials += mem, wr, rd

        wp, wp_g, rp_g_w = Signal(aw + 1), Signal(aw + 1), Signal(aw + 1)
        rp, rp_g, wp_g_r = Signal(aw + 1), Signal(aw + 1), Signal(aw + 1)
        self.specials += [
            MultiReg(rp_g, rp_g_w, odomain=cd_write),
            MultiReg(wp_g, wp_g_r, odomain=cd_read),
        ]
        self.comb += [
            self.level_w.eq(wp - ungray(rp_g_w, aw + 1)),
            sink.ready.eq(self.level_w < depth),
            wr.adr.eq(wp[:aw]),
            wr.dat_w.eq(Cat(sink.data, sink.ctrl)),
            wr.we.eq(sink.valid & sink.ready),
            rd.adr.eq(rp[:aw]),
            source.valid.eq(ungray(wp_g_r, aw + 1) != rp),
            source.data.eq(rd.dat_r[:len(source.data)]),
            source.ctrl.eq(rd.dat_r[len(source.data)]),
        ]
        getattr(self.sync, cd_write).__iadd__(If(wr.we, wp.eq(wp + 1), wp_g.eq(gray(wp + 1))))
        getattr(self.sync, cd_read).__iadd__(
            If(source.valid & source.ready, rp.eq(rp + 1), rp_g.eq(gray(rp + 1))))


__all__ = ["WordAsyncFIFO", "gray", "ungray"]
