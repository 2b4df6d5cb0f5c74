"""Channels joining two routers' link ports, for simulated networks.

* :class:`WireChannel`: the ideal channel of router-only networks: plain wires,
  optionally through a ``delay``-cycle pipeline, no errors.
* :class:`LinkChannel`: a cable as a board has it: two link layers and two simulated
  PHY wires (:class:`~paranic.sim.cable.SimPhy`), with bit errors.

Both take ``(a, b, ...)`` the same way, so :class:`~paranic.sim.testnet.RouterNetwork`
takes the channel class as a parameter.
"""

from __future__ import annotations

import itertools

from migen import Signal
from litex.gen import LiteXModule

from paranic.hw.common import LinkPortIf
from paranic.hw.link import LinkLayer
from paranic.spec import protocol as P
from paranic.spec.sim import ber_to_threshold

from .cable import SimPhy


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


class LinkChannel(LiteXModule):
    """Join two router link ports through two LinkLayers and two :class:`SimPhy` wires.

    Same shape as the router's ``WireChannel(a, b, ...)``: ``a.source`` reaches
    ``b.sink`` and vice versa; ``drained`` at one end comes out as
    ``credit_valid``/``credit_words`` at the other; ``up`` follows training.

    ``ber`` sets the reset value of ``ber_threshold`` (shared by both wires), which a
    bench may also drive at run time (make it a top-level input). ``seed`` selects the
    error patterns; by default every channel gets a new one. Remaining keyword
    arguments go to both :class:`LinkLayer`s.
    """

    _seeds = itertools.count(1)

    @classmethod
    def reset_seeds(cls, start: int = 1) -> None:
        """Restart the default seeds, so that elaborating the same network twice gives
        the same Verilog (and a cached Verilator build is reused)."""
        cls._seeds = itertools.count(start)

    def __init__(self, a, b, delay: int = 8, ber: float = 0.0, seed: int | None = None,
                 **link_kwargs):
        if seed is None:
            seed = next(LinkChannel._seeds)
        dw = getattr(a, "dw", P.WORD_BITS)   # the ports' datapath width (LinkPortIf), for link layers and wires
        self.ber_threshold = Signal(32, reset=ber_to_threshold(ber))
        self.link_a = LinkLayer(dw=dw, **link_kwargs)
        self.link_b = LinkLayer(dw=dw, **link_kwargs)
        self.phy_ab = SimPhy(delay=delay, seed=2 * seed, dw=dw)
        self.phy_ba = SimPhy(delay=delay, seed=2 * seed + 1, dw=dw)
        for port, link in ((a, self.link_a), (b, self.link_b)):
            self.comb += link.port_connections(port)
        self.comb += [
            self.link_a.phy_tx.connect(self.phy_ab.sink),
            self.phy_ab.source.connect(self.link_b.phy_rx),
            self.link_b.phy_tx.connect(self.phy_ba.sink),
            self.phy_ba.source.connect(self.link_a.phy_rx),
            self.phy_ab.ber_threshold.eq(self.ber_threshold),
            self.phy_ba.ber_threshold.eq(self.ber_threshold),
        ]
