"""Channels joining two routers' link ports.

:class:`WireChannel` is the ideal channel of router-only networks: plain wires,
optionally through a ``delay``-cycle pipeline, no errors. ``LinkChannel`` in
``hw/link.py`` has the same constructor signature plus link-layer parameters, so
:class:`~paranic.hw.testnet.RouterNetwork` takes the channel class as a parameter.
"""

from __future__ import annotations

from migen import If, Signal
from litex.gen import LiteXModule

from .common import LinkPortIf


class _Direction(LiteXModule):
    """One direction: packets from ``a.source`` to ``b.sink``, credits from
    ``b.drained`` to ``a.credit_*``, both delayed by ``delay`` cycles."""

    def __init__(self, a: LinkPortIf, b: LinkPortIf, delay: int) -> None:
        src, snk = a.source, b.sink
        if delay == 0:
            self.comb += [
                src.connect(snk),
                a.credit_valid.eq(b.drained),
                a.credit_words.eq(1),
            ]
            return
        # The far end's input FIFO never back-pressures a link (credits guarantee
        # room), so the pipeline has no ready path: the source is always ready.
        stages = []
        prev = (src.valid, src.first, src.last, src.data, src.error, b.drained)
        for i in range(delay):
            cur = (Signal(name=f"v{i}"), Signal(name=f"f{i}"), Signal(name=f"l{i}"),
                   Signal(len(src.data), name=f"d{i}"), Signal(name=f"e{i}"),
                   Signal(name=f"c{i}"))
            self.sync += [c.eq(p) for c, p in zip(cur, prev)]
            stages.append(cur)
            prev = cur
        v, f, l, d, e, c = prev
        self.comb += [
            src.ready.eq(1),
            snk.valid.eq(v), snk.first.eq(f), snk.last.eq(l), snk.data.eq(d), snk.error.eq(e),
            a.credit_valid.eq(c),
            a.credit_words.eq(1),
        ]


class WireChannel(LiteXModule):
    """Join link ports ``a`` and ``b`` with wires (``delay`` register stages each way).

    a.source -> b.sink, b.source -> a.sink; b.drained -> a.credit_valid (1 word per
    strobe) and a.drained -> b.credit_valid; ``up`` is 1 on both ports.
    With ``delay`` >= 1 the channel ignores ``sink.ready`` (a router's link input
    FIFO is always ready; flow control is by credits).
    """

    def __init__(self, a: LinkPortIf, b: LinkPortIf, delay: int = 1) -> None:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        self.delay = delay
        self.ab = _Direction(a, b, delay)
        self.ba = _Direction(b, a, delay)
        self.comb += [a.up.eq(1), b.up.eq(1)]
