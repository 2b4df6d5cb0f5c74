"""WordsToBeats / BeatsToWords (hw/width.py): 64-bit packet streams to 128/256-bit beats
and back, with random stalls on both sides (Migen)."""

from __future__ import annotations

import random

import pytest
from migen import Module, run_simulation

from paranic.bench.wide import drive_packets, make_beats, make_packet
from paranic.hw.width import BeatsToWords, WordsToBeats


def _run(top, sink, source, packets, gap, stall, seed=0):
    rng = random.Random(seed)
    got, cur = [], []
    cycles = [0]

    def recv():
        while len(got) < len(packets) and cycles[0] < 20000:
            ready = int(rng.random() >= stall)
            yield source.ready.eq(ready)
            yield    # settle the comb logic of this cycle
            if ready and (yield source.valid):
                if not cur:
                    assert (yield source.first)
                cur.append((yield source.data))
                if (yield source.last):
                    got.append(list(cur))
                    cur.clear()
            cycles[0] += 1

    def send():
        yield from drive_packets(sink, packets, random.Random(seed + 1), gap)
    run_simulation(top, [send(), recv()])
    return got, cycles[0]


@pytest.mark.parametrize("dw", [128, 256])
def test_round_trip_with_stalls(dw):
    """Random packets (0..200 bytes) 64 -> dw -> 64 with stalls on both sides: the same
    words come out; the beats in between are packed word 0 low, last beat zero-padded."""
    rng = random.Random(dw)
    pkts = [make_packet(rng, rng.choice([0, 8, 16, 24, 40, 200]), i, 1) for i in range(12)]

    class Top(Module):
        def __init__(self):
            self.submodules.up = WordsToBeats(dw)
            self.submodules.down = BeatsToWords(dw)
            self.comb += self.up.source.connect(self.down.sink)

    top = Top()
    got, _ = _run(top, top.up.sink, top.down.source, pkts, gap=0.2, stall=0.3)
    assert got == pkts


@pytest.mark.parametrize("dw", [128, 256])
def test_words_to_beats_packing(dw):
    """Beats as the spec packs them: word 0 low, a last beat's unused words zero."""
    rng = random.Random(5)
    pkts = [make_packet(rng, n, i, 1) for i, n in enumerate([0, 8, 24, 64])]
    top = WordsToBeats(dw)
    got, _ = _run(top, top.sink, top.source, pkts, gap=0.0, stall=0.0)
    assert got == [make_beats(p, dw) for p in pkts]


def test_beats_to_words_drops_padding_and_full_rate():
    """Dirty unused words of a last beat do not leave; one word per cycle."""
    rng = random.Random(7)
    pkts = [make_packet(rng, n, i, 1) for i, n in enumerate([8, 40, 0])]   # 3, 7, 2 words
    beats = [make_beats(p, 256) for p in pkts]
    dirty = [b[:-1] + [b[-1] | (0xDEAD << 192)] if len(p) % 4 else b for b, p in zip(beats, pkts)]
    top = BeatsToWords(256)
    got, cycles = _run(top, top.sink, top.source, dirty, gap=0.0, stall=0.0)
    assert got == pkts
    assert cycles <= sum(len(p) for p in pkts) + 2
