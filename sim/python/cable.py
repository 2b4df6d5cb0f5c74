"""The simulated cable: one direction, a fixed delay with bit-error injection.

:class:`SimPhy` moves one 65-bit line word (64 data bits + the control flag) per
cycle from ``sink`` to ``source`` through a ``delay``-stage register pipeline. On the
way in, each word has one pseudo-random bit (of the 65) flipped with probability
``ber_threshold / 2**32``; :func:`paranic.spec.sim.ber_to_threshold` turns a bit-error
rate into that threshold. The random numbers come from a 64-bit xorshift generator per
instance, seeded by ``seed``. It stands where a board has a PHY adapter and a cable;
only the simulator and the tests use it.

``cut`` pulls the cable: while it is 1 nothing enters or leaves (``source.valid=0``),
so words in flight when it was cut are lost and none arrive after it is mended
before new ones have crossed.

``runtime_seed=True`` (one Verilog module for every node of a split cluster, whose cables
need seeds of their own): the generator takes the 64-bit input ``seed_value`` in every cycle
``seed_load`` is 1 (the harness loads :func:`seed_state` of the cable's seed during reset),
so the words it flips are the same as a cable built with that ``seed``.

``flip_mask`` is a test hook: it is XORed into the word leaving ``source`` in the
same cycle (bit 64 is the control flag), so a test that watched a word enter
``sink`` can corrupt exactly that word ``delay`` cycles later.
"""

from __future__ import annotations

from migen import Constant, If, Mux, Signal, log2_int

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.hw.phy import phy_layout
from paranic.spec import protocol as P
from paranic.spec.link import CTL, LINE_WORD_BITS, CtlKind

__all__ = ["SimPhy", "seed_state"]

_MASK64 = (1 << 64) - 1


def seed_state(seed: int) -> int:
    """The generator's state after reset for ``seed`` (what ``seed_value`` loads)."""
    return _splitmix64(seed)


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) or 1


class SimPhy(LiteXModule):
    """One direction of a simulated cable.

    * ``sink``/``source``: phy_layout streams; ``sink.ready`` is always 1 and
      ``source.ready`` is ignored (a cable cannot stall).
    * ``ber_threshold`` (32 bits, input): error probability per word times 2**32.
    * ``errors_injected`` (32 bits): bits flipped so far (random and ``flip_mask``).
    * ``flip_mask`` (65 bits, input, test hook): XORed into the outgoing word.
    * ``cut`` (input): while 1 the cable carries nothing.
    * ``active`` (output): the word entering ``sink`` is link work, not idle: a packet
      word, a CRC trailer, a SOF (new or replayed frames) or a TRAIN word (a link
      training); only STATUS words are idle. The cluster harness counts it as activity
      (docs/simulator.md, "The clock").
    """

    def __init__(self, delay: int = 8, seed: int = 1, runtime_seed: bool = False,
                 dw: int = P.WORD_BITS):
        if delay < 1:
            raise ValueError("delay must be at least one cycle")
        self.delay = delay
        self.sink = sink = stream.Endpoint(phy_layout(dw))
        self.source = source = stream.Endpoint(phy_layout(dw))
        self.ber_threshold = Signal(32)
        self.errors_injected = Signal(32)
        line_bits = dw + 1 if dw != P.WORD_BITS else LINE_WORD_BITS
        self.flip_mask = Signal(line_bits)
        self.cut = Signal()

        # xorshift64 random source.
        # With a run-time seed the state is not reset: it holds the seed loaded during reset.
        rng = Signal(64, reset=_splitmix64(seed), reset_less=runtime_seed)
        x1, x2, x3 = Signal(64), Signal(64), Signal(64)
        self.comb += [
            x1.eq(rng ^ (rng << 13)),
            x2.eq(x1 ^ (x1 >> 7)),
            x3.eq(x2 ^ (x2 << 17)),
        ]
        if runtime_seed:
            self.seed_value = Signal(64)
            self.seed_load = Signal()
            self.sync += If(self.seed_load, rng.eq(self.seed_value)).Else(rng.eq(x3))
        else:
            self.sync += rng.eq(x3)

        # One bit of 65 (a wide link: of dw + 1), uniformly: (16 random bits * 65) >> 16;
        # index 64 (dw) is the control flag.
        ib = log2_int(dw)
        hit = Signal()
        prod = Signal(16 + ib + 1)
        index = Signal(ib + 1)
        flip = Signal(line_bits)
        self.comb += [
            hit.eq(sink.valid & ~self.cut & (rng[:32] < self.ber_threshold)),
            prod.eq(rng[32:48] * line_bits),
            index.eq(prod[16:]),
            flip[:dw].eq(Mux(hit & ~index[ib], Constant(1, dw) << index[:ib], 0)),
            flip[dw].eq(hit & index[ib]),
            sink.ready.eq(1),
        ]

        # Delay line (data and control flag kept apart: no 65-bit signals).
        stages = [(Signal(), Signal(dw), Signal()) for _ in range(delay)]
        v0, d0, c0 = stages[0]
        self.sync += [
            v0.eq(sink.valid & ~self.cut),
            d0.eq(sink.data ^ flip[:dw]),
            c0.eq(sink.ctrl ^ flip[dw]),
        ]
        for prev, cur in zip(stages, stages[1:]):
            self.sync += [c.eq(p) for c, p in zip(cur, prev)]
        v_out, d_out, c_out = stages[-1]
        self.comb += [
            source.valid.eq(v_out & ~self.cut),
            source.data.eq(d_out ^ self.flip_mask[:dw]),
            source.ctrl.eq(c_out ^ self.flip_mask[dw]),
        ]
        kind = CTL["kind"]
        self.active = Signal()
        # Judged on the word as the link layer sent it (a flipped bit must not make an
        # idle STATUS word look like work), while the cable carries it.
        self.comb += self.active.eq(sink.valid & ~self.cut & (~sink.ctrl | (
            sink.data[kind.offset:kind.offset + kind.width] != CtlKind.STATUS)))
        self.sync += self.errors_injected.eq(self.errors_injected + hit +
                                             (v_out & ~self.cut & (self.flip_mask != 0)))
