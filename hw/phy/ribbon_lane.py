"""Ribbon PHY: the line code and the per-lane blocks (plain logic, no vendor cells).

Line format (``docs/phy.md``, section "ribbon"): ``DATA_LANES`` lanes carry the 64 data
bits of a line word, 8 per lane per word clock, lane ``i`` bits ``8i .. 8i+7``, scrambled
by the additive PRBS :func:`scrambler_taps`; the last lane (the *ctrl lane*) carries

    bit 0: the word's ctrl flag, bit 1: "my receiver is up", bits 2..7: :data:`FRAMING`.

Training: blocks of ``block`` words; word 0 of a block is a marker byte on every lane
(:data:`MARK_WAIT`, :data:`MARK_READY` or :data:`MARK_LAST`: the sender's receiver is
not aligned / aligned / aligned and data follows this block), the other words are
:data:`TRAIN`. No rotation of :data:`TRAIN` is a marker and no rotation of one marker
is another, so a lane whose word boundary is wrong sees bytes outside the set.
"""

from __future__ import annotations

from functools import reduce
from operator import xor

from migen import Cat, If, Signal
from migen.genlib.fsm import FSM, NextState, NextValue

from litex.gen import LiteXModule

from paranic.spec import protocol as P

from .serdes7 import SERDES_RATIO

#: Lanes carrying the 64 data bits, and all lanes (data + ctrl lane).
DATA_LANES = P.WORD_BITS // SERDES_RATIO
LANES = DATA_LANES + 1
#: Training bytes (bit 0 first on the wire).
TRAIN = 0x0F
MARK_WAIT = 0x17
MARK_READY = 0x1B
MARK_LAST = 0x1D
MARKERS = (MARK_WAIT, MARK_READY, MARK_LAST)
TRAIN_SET = (TRAIN,) + MARKERS
#: Ctrl-lane bits 2..7 of every data word (no rotation of a data byte, with any ctrl/up
#: bits, nor any training byte, matches it: a slipped or retraining lane is seen at once).
FRAMING = 0b101100
#: Additive scrambler x^58 + x^39 + 1 and its seed (reloaded at the start of data).
SCRAMBLER_POLY = (58, 39)
SCRAMBLER_SEED = (1 << 58) - 1


def rot8(x: int, r: int) -> int:
    """``x`` rotated right by ``r`` bits (8-bit)."""
    r %= 8
    return ((x >> r) | (x << (8 - r))) & 0xFF


def scrambler_taps(width: int = P.WORD_BITS, poly: tuple[int, int] = SCRAMBLER_POLY):
    """GF(2) masks of the additive scrambler advanced ``width`` bits per word.

    Returns ``(out, nxt)``: ``out[i]`` is the mask of state bits XORed into output bit
    ``i``, ``nxt[j]`` the mask giving next-state bit ``j``. The sequence is
    ``s[k + n] = s[k + n - m] ^ s[k]`` for ``poly = (n, m)``; the state is the next
    ``n`` sequence bits.
    """
    n, m = poly
    seq = [1 << j for j in range(n)]
    while len(seq) < width + n:
        k = len(seq) - n
        seq.append(seq[k + m] ^ seq[k])
    return seq[:width], seq[width:width + n]


def scrambler_words(count: int, seed: int = SCRAMBLER_SEED, width: int = P.WORD_BITS,
                    poly: tuple[int, int] = SCRAMBLER_POLY) -> list[int]:
    """Reference model: the first ``count`` keystream words from ``seed``."""
    out_m, nxt_m = scrambler_taps(width, poly)
    par = lambda v: bin(v).count("1") & 1  # noqa: E731
    words, s = [], seed
    for _ in range(count):
        words.append(sum(par(s & m) << i for i, m in enumerate(out_m)))
        s = sum(par(s & m) << j for j, m in enumerate(nxt_m))
    return words


class Scrambler(LiteXModule):
    """Keystream generator: ``key`` (64 bits) for this word; advances when ``ce``,
    reloads the seed when ``reset`` (both synchronous, domain of the caller)."""

    def __init__(self, width: int = P.WORD_BITS) -> None:
        out_m, nxt_m = scrambler_taps(width)
        n = SCRAMBLER_POLY[0]
        self.key = Signal(width)
        self.ce = Signal()
        self.reset = Signal()
        state = Signal(n, reset=SCRAMBLER_SEED)

        def lin(mask):
            return reduce(xor, [state[b] for b in range(n) if mask >> b & 1])

        nxt = Signal(n)
        self.comb += [
            self.key.eq(Cat(*[lin(m) for m in out_m])),
            nxt.eq(Cat(*[lin(m) for m in nxt_m])),
        ]
        self.sync += If(self.reset, state.eq(SCRAMBLER_SEED)).Elif(self.ce, state.eq(nxt))


def _in_set(x, values) -> object:
    return reduce(lambda a, b: a | b, [x == v for v in values])


class LaneAligner(LiteXModule):
    """Finds one lane's word boundary in the training pattern by bit slips.

    ``data``: the lane's byte this cycle (from the deserializer). While ``enable`` it
    checks ``window`` consecutive bytes: all must be training bytes; at the first one
    that is not, it pulses ``bitslip`` and waits ``settle`` cycles for the new boundary
    to arrive. After a clean window ``locked`` rises and stays until ``enable`` drops.
    Status: ``slips`` (bit slips requested, wraps), ``marker`` (this byte is a marker;
    meaningful while ``locked``).
    """

    def __init__(self, window: int = 64, settle: int = 16) -> None:
        self.data = Signal(SERDES_RATIO)
        self.enable = Signal()
        self.bitslip = Signal()
        self.locked = Signal()
        self.marker = Signal()
        self.slips = Signal(8)

        cnt = Signal(max=max(window, settle) + 1)
        good = Signal()
        self.comb += [
            good.eq(_in_set(self.data, TRAIN_SET)),
            self.marker.eq(_in_set(self.data, MARKERS)),
        ]
        self.fsm = fsm = FSM(reset_state="SETTLE")
        fsm.act("SETTLE",
            If(~self.enable, NextValue(cnt, 0)).Elif(cnt == settle - 1,
                NextValue(cnt, 0), NextState("CHECK"),
            ).Else(NextValue(cnt, cnt + 1)),
        )
        fsm.act("CHECK",
            If(~self.enable,
                NextValue(cnt, 0), NextState("SETTLE"),
            ).Elif(~good,
                self.bitslip.eq(1),
                NextValue(self.slips, self.slips + 1),
                NextValue(cnt, 0), NextState("SETTLE"),
            ).Elif(cnt == window - 1,
                NextState("LOCKED"),
            ).Else(NextValue(cnt, cnt + 1)),
        )
        fsm.act("LOCKED",
            self.locked.eq(1),
            If(~self.enable, NextValue(cnt, 0), NextState("SETTLE")),
        )


class LaneDelay(LiteXModule):
    """Delays one lane by ``delay`` whole words (0 .. ``max_delay``): a tapped shift register."""

    def __init__(self, max_delay: int) -> None:
        self.i = Signal(SERDES_RATIO)
        self.o = Signal(SERDES_RATIO)
        self.delay = Signal(max=max_delay + 1)
        taps = [self.i]
        for k in range(max_delay):
            r = Signal(SERDES_RATIO, name=f"tap{k + 1}")
            self.sync += r.eq(taps[-1])
            taps.append(r)
        cases = self.o.eq(taps[0])
        for k in range(1, max_delay + 1):
            cases = If(self.delay == k, self.o.eq(taps[k])).Else(cases)
        self.comb += cases


class StuckMonitor(LiteXModule):
    """Flags a scrambled lane that shows no bit transition for ``words`` words.

    ``stuck`` rises when ``words`` consecutive bytes (while ``ce``) were all 0x00 or all
    0xFF: for scrambled data that has probability (2/256)**words, i.e. never.
    """

    def __init__(self, words: int = 16) -> None:
        self.data = Signal(SERDES_RATIO)
        self.ce = Signal()
        self.stuck = Signal()
        run = Signal(max=words + 1)
        flat = Signal()
        self.comb += [
            flat.eq((self.data == 0) | (self.data == 0xFF)),
            self.stuck.eq(run == words),
        ]
        self.sync += If(~self.ce, run.eq(0)).Elif(~flat, run.eq(0)).Elif(~self.stuck,
                                                                         run.eq(run + 1))


__all__ = ["DATA_LANES", "LANES", "TRAIN", "MARK_WAIT", "MARK_READY", "MARK_LAST", "MARKERS",
           "TRAIN_SET", "FRAMING", "rot8", "scrambler_taps", "scrambler_words", "Scrambler",
           "LaneAligner", "LaneDelay", "StuckMonitor"]
