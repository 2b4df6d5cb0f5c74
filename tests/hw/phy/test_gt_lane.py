"""GTTxPacker -> GTRxParser back to back (Migen simulation): framing, commas, error recovery."""

from __future__ import annotations

import random

import pytest
from migen import ClockDomainsRenamer, Module, Signal, run_simulation

from paranic.hw.phy.gt_framing import COMMA, MARKER, PAD, encode_word
from paranic.hw.phy.gt_rx import GTRxParser
from paranic.hw.phy.gt_tx import GTTxPacker

N_COMMA = 32


class Loop(Module):
    def __init__(self, nbytes: int):
        self.submodules.tx = ClockDomainsRenamer({"tx": "sys"})(GTTxPacker(nbytes, N_COMMA))
        self.submodules.rx = ClockDomainsRenamer({"rx": "sys"})(GTRxParser(nbytes))
        self.err = Signal(nbytes)      # forced decode errors on the line
        self.comb += [
            self.rx.data.eq(self.tx.data),
            self.rx.k.eq(self.tx.k),
            self.rx.err.eq(self.err),
        ]


def _run(nbytes: int, words, gap: float, errors_at=(), cycles=None, seed=0):
    rng = random.Random(seed)
    dut = Loop(nbytes)
    got, line = [], []
    cycles = cycles or 12 * len(words) + 200

    def src():
        i = 0
        for _ in range(cycles):
            present = i < len(words) and rng.random() >= gap
            yield dut.tx.sink.valid.eq(int(present))
            if present:
                yield dut.tx.sink.data.eq(words[i][0])
                yield dut.tx.sink.ctrl.eq(words[i][1])
            yield
            if present and (yield dut.tx.sink.ready):
                i += 1

    def mon():
        for c in range(cycles):
            yield dut.err.eq((1 << nbytes) - 1 if c in errors_at else 0)
            yield
            d, k = (yield dut.tx.data), (yield dut.tx.k)
            line.append([((d >> 8 * i) & 0xFF, (k >> i) & 1) for i in range(nbytes)])
            if (yield dut.rx.source.valid):
                got.append(((yield dut.rx.source.data), (yield dut.rx.source.ctrl)))
        mon.dropped = yield dut.rx.dropped
        mon.code_errors = yield dut.rx.code_errors

    run_simulation(dut, [src(), mon()])
    return got, line, mon.dropped, mon.code_errors


def _words(rng, n):
    return [(rng.getrandbits(64), int(rng.random() < 0.3)) for _ in range(n)]


@pytest.mark.parametrize("nbytes", [2, 4])
@pytest.mark.parametrize("gap", [0.0, 0.3])
def test_loopback_and_framing(nbytes, gap):
    rng = random.Random(nbytes)
    words = _words(rng, 150)
    got, line, dropped, cerr = _run(nbytes, words, gap, seed=nbytes)
    assert got == words and dropped == 0 and cerr == 0
    # The line carries exactly the framing of docs/phy.md: each word's characters in
    # order, idles only between words, K28.5 only in byte lane 0.
    chars = [c for clk in line for c in clk]
    body = [c for c in chars if c not in ((COMMA, 1), (PAD, 1))]
    assert body == [c for w in words for c in encode_word(*w)]
    for clk in line:
        assert (COMMA, 1) not in clk[1:]
    # Under full load an idle clock (comma) still comes once the word on the line ends
    # after N_COMMA clocks: at most N_COMMA + ceil(9 / nbytes) + 1 clocks apart.
    if gap == 0.0:
        idle = [i for i, clk in enumerate(line) if clk[0] == (COMMA, 1)]
        busy = [i for i in idle if i < len(line) - 50]
        assert max(b - a for a, b in zip(busy, busy[1:])) <= N_COMMA + -(-9 // nbytes) + 1


@pytest.mark.parametrize("nbytes", [2, 4])
def test_error_drops_the_word_and_resyncs(nbytes):
    rng = random.Random(10 + nbytes)
    words = _words(rng, 120)
    errors_at = (150, 400, 401)
    got, line, dropped, cerr = _run(nbytes, words, 0.0, errors_at=errors_at)
    # Words hit by an error (and the D characters after it until the next K) are
    # dropped; everything else arrives in order.
    it = iter(words)
    assert all(any(w == g for w in it) for g in got), "not an ordered subsequence"
    assert 1 <= len(words) - len(got) <= 40
    assert dropped >= 1 and cerr == len(errors_at) * nbytes
    assert got[-1] == words[-1], "the parser did not resynchronise"


def test_k_inside_a_word_drops_it():
    """A marker in the middle of a word: the partial word goes, the new word parses."""
    dut = ClockDomainsRenamer({"rx": "sys"})(GTRxParser(2))
    w = 0x1122334455667788
    stream = [(0x88, 0), (0x77, 0), (0x66, 0), (MARKER, 1)] + \
             [((w >> 8 * i) & 0xFF, 0) for i in range(8)] + [(COMMA, 1), (PAD, 1)]
    got = []

    def gen():
        for a, b in zip(stream[0::2], stream[1::2]):
            yield dut.data.eq(a[0] | b[0] << 8)
            yield dut.k.eq(a[1] | b[1] << 1)
            yield
            if (yield dut.source.valid):
                got.append(((yield dut.source.data), (yield dut.source.ctrl)))
        yield
        if (yield dut.source.valid):
            got.append(((yield dut.source.data), (yield dut.source.ctrl)))
        gen.dropped = yield dut.dropped

    # Start at a word boundary (the parser hunts for a K after reset).
    stream = [(PAD, 1), (PAD, 1)] + stream
    run_simulation(dut, gen())
    assert got == [(w, 1)]
    assert gen.dropped == 1
