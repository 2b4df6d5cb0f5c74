"""64b/66b PCS (hw/phy/pcs66.py), Migen simulation: scrambler against a bit-serial
reference, Pcs66Tx -> TxGearbox -> a bit-level line model -> Pcs66Rx round trips at
K = 1 and 2 blocks per beat, block lock from a random bit offset, after a slip and
after a burst of bad headers, and bit errors."""

from __future__ import annotations

import random
import statistics

import pytest
from migen import Module, run_simulation
from litex.soc.interconnect import stream

from paranic.hw.phy import phy_layout
from paranic.hw.phy.pcs66 import (HDR_CTRL, HDR_DATA, IDLE_FIRST, IDLE_NEXT, Descrambler,
                                  Pcs66Rx, Pcs66Tx, Scrambler, TxGearbox)
from paranic.spec.link import unpack_ctl


# -- bit-serial reference (IEEE 802.3 clause 49 figure 49-8, written from the polynomial)

class SerialScrambler:
    """One bit at a time: s = d ^ s[-39] ^ s[-58] over the transmitted bits."""

    def __init__(self, state: list[int] | None = None):
        self.s = list(state or [0] * 58)      # s[-1] = the latest line bit

    def bit(self, d: int) -> int:
        o = d ^ self.s[-39] ^ self.s[-58]
        self.s = self.s[1:] + [o]
        return o


class SerialDescrambler:
    def __init__(self, state: list[int] | None = None):
        self.s = list(state or [0] * 58)

    def bit(self, s: int) -> int:
        d = s ^ self.s[-39] ^ self.s[-58]
        self.s = self.s[1:] + [s]
        return d


def bits(v: int, n: int) -> list[int]:
    return [(v >> i) & 1 for i in range(n)]


def value(bs: list[int]) -> int:
    return sum(b << i for i, b in enumerate(bs))


def test_idle_payloads_are_not_control_words():
    """An idle block can never be taken for a link control word (CRC-16 fails)."""
    assert unpack_ctl(IDLE_FIRST) is None and unpack_ctl(IDLE_NEXT) is None
    assert HDR_DATA ^ HDR_CTRL == 0b11 and bits(HDR_DATA, 2) == [0, 1]


@pytest.mark.parametrize("n", [64, 128])
def test_scrambler_matches_bit_serial_reference(n):
    class Top(Module):
        def __init__(self):
            self.submodules.scr = Scrambler(n)
            self.submodules.dsc = Descrambler(n)
            self.comb += [self.dsc.i.eq(self.scr.o), self.dsc.ce.eq(self.scr.ce)]

    top = Top()
    rng = random.Random(n)
    ref, ref_d = SerialScrambler(), SerialDescrambler()
    seen = []

    def gen():
        for cyc in range(60):
            word = rng.getrandbits(n) if cyc % 7 else 0      # zeros too (all-zero input)
            ce = int(rng.random() < 0.8)
            yield top.scr.i.eq(word)
            yield top.scr.ce.eq(ce)
            yield
            if ce:
                o, d = (yield top.scr.o), (yield top.dsc.o)
                seen.append((word, o, d))

    run_simulation(top, gen())
    assert len(seen) > 30
    for word, o, d in seen:
        exp = value([ref.bit(b) for b in bits(word, n)])
        assert o == exp
        assert value([ref_d.bit(b) for b in bits(o, n)]) == word
        assert d == word
    # The zero input still gives a scrambled (non-zero) line once the state is non-zero.
    assert any(o for w, o, _ in seen if w == 0)


def test_descrambler_self_synchronises():
    """From any state the descrambler is right after 58 bits (one 64-bit block)."""
    rng = random.Random(5)
    sc = SerialScrambler([rng.getrandbits(1) for _ in range(58)])
    ds = SerialDescrambler([rng.getrandbits(1) for _ in range(58)])
    data = [rng.getrandbits(1) for _ in range(400)]
    out = [ds.bit(sc.bit(b)) for b in data]
    assert out[58:] == data[58:] and out[:58] != data[:58]


# -- Pcs66Tx -> TxGearbox -> line model -> Pcs66Rx ------------------------------------

class Loop(Module):
    def __init__(self, k: int, g: int, idle_interval: int):
        self.submodules.tx = Pcs66Tx(k, idle_interval)
        self.submodules.gb = TxGearbox(66 * k, g)
        self.submodules.rx = Pcs66Rx(k, g)
        self.sink = stream.Endpoint(phy_layout(64 * k))
        self.comb += [
            self.sink.connect(self.tx.sink),
            self.tx.ce.eq(self.gb.take),
            self.gb.din.eq(self.tx.block),
        ]


class Line:
    """The serial line between the gearboxes: a bit queue with a start offset, slips
    (a bit lost), bit flips and stretches of zeros."""

    def __init__(self, g: int, offset: int, rng: random.Random):
        self.g = g
        self.q = [rng.getrandbits(1) for _ in range(offset)]
        self.flips: set[int] = set()      # absolute bit numbers (sent) to flip
        self.zero = range(0)              # absolute bit numbers forced to 0
        self.sent = 0
        self.log: list[int] = []          # every transmitted bit (for checks)

    def step(self, word: int) -> int:
        for i in range(self.g):
            b = (word >> i) & 1
            self.log.append(b)
            n = self.sent
            self.sent += 1
            if n in self.flips:
                b ^= 1
            if n in self.zero:
                b = 0
            self.q.append(b)
        out = self.q[:self.g]
        del self.q[:self.g]
        return value(out)

    def slip(self):
        self.q.pop(0)


def run_loop(k, g, words, *, seed=0, gap=0.3, idle_interval=None, events=None, extra=400,
             max_cycles=20000, offset=None):
    """Send ``words`` (data, ctrl) once the receiver is aligned; return what came out,
    per-word (sent cycle, received cycle), status and the line."""
    idle_interval = (64 if k > 1 else 0) if idle_interval is None else idle_interval
    rng = random.Random(seed)
    top = Loop(k, g, idle_interval)
    line = Line(g, rng.randrange(66 * k) if offset is None else offset, rng)
    got, t_sent, t_got, res = [], [], [], {}
    events = events or {}

    def gen():
        i = 0
        start = None
        done_at = None
        for cyc in range(max_cycles):
            if cyc in events:
                events[cyc](line)
            if start is None and (yield top.rx.aligned):
                start = cyc
                res["lock_cycles"] = cyc
            present = start is not None and i < len(words) and rng.random() >= gap
            yield top.sink.valid.eq(int(present))
            if present:
                yield top.sink.data.eq(words[i][0])
                yield top.sink.ctrl.eq(words[i][1])
            rx_word = line.step((yield top.gb.data))
            yield top.rx.data.eq(rx_word)
            yield
            if present and (yield top.tx.sink.ready):
                t_sent.append(cyc)
                i += 1
            if (yield top.rx.source.valid):
                got.append(((yield top.rx.source.data), (yield top.rx.source.ctrl)))
                t_got.append(cyc)
            if i == len(words) and done_at is None:
                done_at = cyc + extra
            if cyc == done_at:
                break
        for name in ("locked", "aligned", "bad_headers", "bad_beats", "realigns",
                     "slips", "losses"):
            res[name] = yield getattr(top.rx, name)
        res["idles"] = yield top.tx.idles
        res["cycles"] = cyc

    run_simulation(top, gen())
    return got, t_sent, t_got, res, line


def random_words(rng, n, k, p_ctrl=0.3):
    return [(rng.getrandbits(64 * k), int(rng.random() < p_ctrl)) for _ in range(n)]


@pytest.mark.parametrize("k,g", [(1, 64), (1, 32), (2, 128), (2, 64), (2, 80), (4, 256)])
def test_round_trip_from_random_offset(k, g):
    """Data and control beats with idles between them arrive exactly; the line carries
    the block format (sync headers every 66 bits, idles as control blocks)."""
    rng = random.Random(10 * k + g)
    words = random_words(rng, 300, k)
    got, t_sent, t_got, res, line = run_loop(k, g, words, seed=k + g)
    assert got == words, res
    assert res["slips"] >= 1 or res["lock_cycles"] < 80      # it had to find the boundary
    assert res["bad_headers"] == 0 and res["bad_beats"] == 0 and res["losses"] == 0
    assert res["idles"] > 0
    # Sync headers on the line: every 66 bits a 01 or 10, from the gearbox's first word
    # (the line's first G bits are its reset value).
    hdrs = [value(line.log[i:i + 2]) for i in range(g, len(line.log) - 66, 66)]
    assert set(hdrs) <= {HDR_DATA, HDR_CTRL} and HDR_DATA in hdrs and HDR_CTRL in hdrs


def test_throughput_back_to_back():
    """With a source that never runs dry the transmitter takes a beat whenever the
    gearbox can: 32 beats in 33 clocks at K = 1, G = 64, and every word's latency
    through the loop is the same within the gearbox's phase."""
    rng = random.Random(1)
    words = random_words(rng, 330, 1)
    got, t_sent, t_got, res, line = run_loop(1, 64, words, seed=3, gap=0.0)
    assert got == words
    span = t_sent[-1] - t_sent[0] + 1
    assert 329 / span == pytest.approx(32 / 33, abs=0.01)
    lat = [b - a for a, b in zip(t_sent, t_got)]
    assert max(lat) - min(lat) <= 2


def _gapped_subsequence(got, words, garbage: int = 0):
    """got == words[:i] + (at most ``garbage`` other beats) + words[j:] with i <= j: a
    contiguous loss, and nothing reordered or duplicated. Returns j - i."""
    i = 0
    while i < len(got) and got[i] == words[i]:
        i += 1
    m = 0
    while m < len(got) - i and got[len(got) - 1 - m] == words[len(words) - 1 - m]:
        m += 1
    middle = len(got) - i - m
    assert middle <= garbage, f"{middle} beats neither before nor after the loss"
    j = len(words) - m
    assert j >= i
    return j - i


@pytest.mark.parametrize("k,g", [(1, 64), (2, 128)])
def test_slip_loses_and_regains_lock(k, g):
    """A bit slip on the line: the lock falls (16 bad headers in 64), slips back to the
    boundary and the words after the disturbance arrive again, in order."""
    rng = random.Random(7)
    words = random_words(rng, 1200, k)
    got, t_sent, t_got, res, _ = run_loop(k, g, words, seed=11, gap=0.2,
                                          events={600: Line.slip})
    # Until the lock falls, beats whose headers happen to look valid pass (garbage for the
    # link layer's CRC); then nothing until the lock is back.
    lost = _gapped_subsequence(got, words, garbage=64)
    assert res["losses"] == 1 and res["locked"] == 1 and res["aligned"] == 1
    assert 0 < lost < 400
    assert got[-1] == words[-1]


@pytest.mark.parametrize("k,g", [(1, 64), (2, 128)])
def test_bad_header_burst_and_recovery(k, g):
    """A burst of zeros (invalid headers 00) long enough to lose lock; lock regained."""
    rng = random.Random(8)
    words = random_words(rng, 1200, k)
    zero = range(600 * g, 600 * g + 40 * 66 * k)

    def burst(line):
        line.zero = zero

    got, t_sent, t_got, res, _ = run_loop(k, g, words, seed=12, gap=0.2, events={0: burst})
    lost = _gapped_subsequence(got, words, garbage=2)   # beats cut by the burst's edges
    assert res["losses"] >= 1 and res["locked"] == 1 and res["bad_headers"] >= 16
    assert lost > 0 and got[-1] == words[-1]


def header_at(line, blocks_ahead: int) -> int:
    """Line bit number of a sync header about ``blocks_ahead`` blocks after now."""
    n = line.sent + 66 * blocks_ahead
    return n - (n - line.g) % 66


def test_short_error_burst_keeps_lock():
    """Ten bad headers (fewer than 16 in a window): the lock holds; exactly the ten
    beats are dropped and counted."""
    rng = random.Random(9)
    words = random_words(rng, 600, 1, p_ctrl=0.0)

    def hit(line):
        first = header_at(line, 20)
        line.flips = {first + 66 * i for i in range(10)}

    got, _, _, res, _ = run_loop(1, 64, words, seed=13, gap=0.0, events={300: hit})
    assert res["losses"] == 0 and res["bad_headers"] == 10 and res["bad_beats"] == 10
    assert _gapped_subsequence(got, words) == 10


def test_payload_bit_error_is_three_bit_errors_in_data():
    """One flipped payload bit comes out as that bit and its echoes 39 and 58 bits
    later (descrambler); the beats are still delivered (the link layer's CRC catches
    it, tests/hw/phy/test_gt66_link.py)."""
    rng = random.Random(4)
    words = random_words(rng, 400, 1, p_ctrl=0.0)

    def hit(line):
        line.flips = {header_at(line, 20) + 2 + 5}

    got, _, _, res, line = run_loop(1, 64, words, seed=14, gap=0.0, events={300: hit})
    assert len(got) == len(words) and res["bad_beats"] == 0
    diff = [a[0] ^ b[0] for a, b in zip(got, words)]
    bad = [i for i, d in enumerate(diff) if d]
    assert sum(bin(d).count("1") for d in diff) == 3
    # payload bit 5 and its echoes at 5 + 39 and 5 + 58, all in the same word
    assert len(bad) == 1 and diff[bad[0]] == (1 << 5) | (1 << 44) | (1 << 63)


@pytest.mark.parametrize("k,g", [(1, 64), (2, 80), (2, 128)])
def test_loop_latency(k, g):
    """PCS loop latency: Pcs66Tx accepts a beat -> Pcs66Rx emits it, with the line one
    register (the test's generator) and no offset. Bounded (TX 1 clock to the first bit,
    serialisation, RX 2 clocks, K > 1 up to one beat more for the beat alignment)."""
    rng = random.Random(k * g)
    words = random_words(rng, 200, k)
    got, t_sent, t_got, res, _ = run_loop(k, g, words, seed=1, gap=0.5, offset=0)
    assert got == words
    lat = sorted(b - a for a, b in zip(t_sent, t_got))
    med = statistics.median(lat)
    print(f"K={k} G={g}: loop latency median {med} clocks, {lat[0]}..{lat[-1]}, n={len(lat)}")
    assert lat[-1] <= 3 + 2 + -(-66 * k // g) + (-(-66 * k // g) if k > 1 else 0)
