"""Migen unit tests of paranic.hw.fifo.PacketFifo."""

from __future__ import annotations

import random

import pytest
from migen.sim import run_simulation

from paranic.hw.fifo import PacketFifo


def _writer(ep, packets, gap=0):
    """Write packets = [(words, error)], one word per cycle while ready."""
    for words, err in packets:
        for i, w in enumerate(words):
            yield ep.valid.eq(1)
            yield ep.data.eq(w)
            yield ep.first.eq(i == 0)
            yield ep.last.eq(i == len(words) - 1)
            yield ep.error.eq(err and i == len(words) - 1)
            yield
            while not (yield ep.ready):
                yield
        yield ep.valid.eq(0)
        for _ in range(gap):
            yield


class _Reader:
    """Collect packets from source; record (cycle, word) for every accepted word."""

    def __init__(self, dut, ready=lambda c: True):
        self.dut, self.ready = dut, ready
        self.packets, self.beats, self.firsts = [], [], []
        self.cycle = 0

    def gen(self, cycles):
        src = self.dut.source
        cur = []
        for c in range(cycles):
            self.cycle = c
            yield src.ready.eq(1 if self.ready(c) else 0)
            yield  # let comb settle with ready
            if (yield src.valid) and (yield src.ready):
                w = yield src.data
                if not cur:
                    self.firsts.append((yield src.first))
                else:
                    assert not (yield src.first)
                cur.append(w)
                self.beats.append(c)
                if (yield src.last):
                    self.packets.append(cur)
                    cur = []


def _pkts(rng, n, lo=1, hi=8):
    return [[rng.getrandbits(64) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def test_order_and_commit():
    rng = random.Random(1)
    pk = _pkts(rng, 40, 1, 12)
    dut = PacketFifo(64, 16)
    rd = _Reader(dut, ready=lambda c: (c * 7) % 5 != 0)
    run_simulation(dut, [_writer(dut.sink, [(p, 0) for p in pk], gap=1), rd.gen(1500)])
    assert rd.packets == pk
    assert rd.firsts == [1] * len(pk)


def test_not_visible_before_commit():
    """valid must stay low until the last beat is written; then rise next cycle."""
    dut = PacketFifo(32, 8)
    seen = {}

    def writer():
        words = [11, 22, 33, 44]
        for i, w in enumerate(words):
            yield dut.sink.valid.eq(1)
            yield dut.sink.data.eq(w)
            yield dut.sink.last.eq(i == 3)
            yield
        yield dut.sink.valid.eq(0)

    def mon():
        for c in range(12):
            yield
            seen[c] = ((yield dut.source.valid), (yield dut.packets), (yield dut.level),
                       (yield dut.head_words), (yield dut.source.data))

    run_simulation(dut, [writer(), mon()])
    # The 4 words are written at edges 0..3; the packet is committed at edge 3
    # and visible from the cycle after: valid and packets rise together.
    for c in range(3):
        assert seen[c][0] == 0 and seen[c][1] == 0
    c0 = next(c for c in seen if seen[c][0])
    assert seen[c0][1] == 1 and seen[c0][3] == 4 and seen[c0][4] == 11
    assert seen[c0 - 1][1] == 0


def test_one_word_packet():
    dut = PacketFifo(16, 8)
    rd = _Reader(dut)
    pk = [[5], [6], [7, 8], [9]]
    run_simulation(dut, [_writer(dut.sink, [(p, 0) for p in pk]), rd.gen(40)])
    assert rd.packets == pk


def test_abort_on_error():
    rng = random.Random(2)
    pk = _pkts(rng, 30, 1, 10)
    errs = [rng.random() < 0.3 for _ in pk]
    dut = PacketFifo(64, 16)
    rd = _Reader(dut)
    run_simulation(dut, [_writer(dut.sink, list(zip(pk, errs))), rd.gen(600)])
    assert rd.packets == [p for p, e in zip(pk, errs) if not e]
    assert sum(errs) > 3
    res = {}

    def chk():
        for _ in range(600):
            yield
        res["v"] = ((yield dut.aborted), (yield dut.level), (yield dut.empty))
    dut = PacketFifo(64, 16)
    run_simulation(dut, [_writer(dut.sink, list(zip(pk, errs))), _Reader(dut).gen(600), chk()])
    assert res["v"] == (sum(errs), 0, 1)


def test_abort_on_overflow_keeps_committed():
    """A packet larger than the free space is discarded; earlier packets survive."""
    dut = PacketFifo(16, 16)
    a, b, c = [1, 2, 3, 4, 5, 6], [7] * 12, [8, 9]
    res = {}

    def reader():
        # nothing is read before cycle 40
        for _ in range(40):
            yield
        res["pre"] = ((yield dut.packets), (yield dut.level), (yield dut.aborted))

    rd = _Reader(dut, ready=lambda cyc: cyc >= 40)
    run_simulation(dut, [_writer(dut.sink, [(a, 0), (b, 0), (c, 0)]), rd.gen(80), reader()])
    assert res["pre"] == (2, 8, 1)
    assert rd.packets == [a, c]


def test_abort_oversized():
    dut = PacketFifo(32, 4)
    rd = _Reader(dut)
    pk = [[1, 2, 3, 4], [5, 6, 7, 8, 9], [10]]
    out = {}

    def chk():
        for _ in range(60):
            yield
        out["ab"] = yield dut.aborted
    run_simulation(dut, [_writer(dut.sink, [(p, 0) for p in pk]), rd.gen(60), chk()])
    assert rd.packets == [[1, 2, 3, 4], [10]]
    assert out["ab"] == 1


def test_status_flags_and_packet_count():
    dut = PacketFifo(16, 16)
    log = []

    def writer():
        # four 4-word packets: 16 words exactly fill the FIFO
        yield from _writer(dut.sink, [([i] * 4, 0) for i in range(4)])

    def mon():
        for _ in range(24):
            yield
            log.append(((yield dut.level), (yield dut.free), (yield dut.empty),
                        (yield dut.half_full), (yield dut.full), (yield dut.packets),
                        (yield dut.head_words), (yield dut.sink.ready)))

    run_simulation(dut, [writer(), mon()])
    levels = [x[0] for x in log]
    assert levels[:17] == list(range(17))
    for lvl, free, empty, half, full, pk, hw, rdy in log:
        assert free == 16 - lvl
        assert empty == (lvl == 0)
        assert half == (lvl >= 8)
        assert full == (lvl == 16)
        assert rdy == 1  # no backpressure mode
        if pk:
            assert hw == 4
    assert log[-1][:6] == (16, 0, 0, 1, 1, 4)
    # packet count rises by one per committed 4-word packet
    pks = [x[5] for x in log]
    assert pks[3] == 0 and pks[4] == 1 and pks[8] == 2 and pks[16] == 4


def test_packets_count_decrements_on_last_word():
    dut = PacketFifo(32, 8)
    log = []
    rd = _Reader(dut, ready=lambda c: c >= 20)

    def mon():
        for _ in range(40):
            yield
            log.append(((yield dut.packets), (yield dut.head_words)))

    run_simulation(dut, [_writer(dut.sink, [([1, 2, 3], 0), ([4, 5], 0)]), rd.gen(40), mon()])
    assert rd.packets == [[1, 2, 3], [4, 5]]
    assert log[19] == (2, 3)
    # reading starts at cycle 20: words at 20, 21, 22 (last of packet 0)
    assert rd.beats == [20, 21, 22, 23, 24]
    assert log[22][0] == 2 and log[23] == (1, 2) and log[25][0] == 0


def test_backpressure_mode():
    rng = random.Random(3)
    pk = _pkts(rng, 50, 2, 8)
    dut = PacketFifo(16, 8, backpressure=True)
    rd = _Reader(dut, ready=lambda c: c % 3 == 0)
    run_simulation(dut, [_writer(dut.sink, [(p, 0) for p in pk]), rd.gen(1500)])
    assert rd.packets == pk


def test_throughput_one_word_per_cycle():
    """Back-to-back packets stream out at one word per cycle with no gaps."""
    rng = random.Random(4)
    pk = _pkts(rng, 30, 1, 9)
    dut = PacketFifo(512, 16)
    total = sum(map(len, pk))
    rd = _Reader(dut, ready=lambda c: True)
    run_simulation(dut, [_writer(dut.sink, [(p, 0) for p in pk]), rd.gen(total + 40)])
    assert rd.packets == pk
    # first word leaves in the cycle after the first packet's commit edge
    assert rd.beats[0] == len(pk[0])
    # with everything committed, reading never pauses between packets
    dut = PacketFifo(512, 16)
    rd = _Reader(dut, ready=lambda c: c >= total + 5)
    run_simulation(dut, [_writer(dut.sink, [(p, 0) for p in pk]), rd.gen(2 * total + 40)])
    assert rd.packets == pk
    assert rd.beats == list(range(total + 5, 2 * total + 5))


def test_drained_strobe_counts_words():
    dut = PacketFifo(64, 16)
    n = {"d": 0}
    rng = random.Random(5)
    pk = _pkts(rng, 10, 1, 9)
    rd = _Reader(dut, ready=lambda c: c % 2 == 0)

    def mon():
        for _ in range(300):
            yield
            n["d"] += (yield dut.drained)

    run_simulation(dut, [_writer(dut.sink, [(p, 0) for p in pk]), rd.gen(300), mon()])
    assert n["d"] == sum(map(len, pk)) == len(rd.beats)


@pytest.mark.parametrize("seed", [10, 11])
def test_random_mix(seed):
    """Random mix of good, errored, oversized packets against a reference model."""
    rng = random.Random(seed)
    depth, maxw = 32, 12
    pk = []
    for _ in range(120):
        n = rng.randint(1, 14)
        pk.append(([rng.getrandbits(64) for _ in range(n)], rng.random() < 0.1))
    dut = PacketFifo(depth, maxw, backpressure=True)
    rd = _Reader(dut, ready=lambda c: rng.random() < 0.7)
    run_simulation(dut, [_writer(dut.sink, pk), rd.gen(4000)])
    assert rd.packets == [p for p, e in pk if not e and len(p) <= maxw]


# ---------------------------------------------------------------------------
# Cut-through mode (router link inputs)
# ---------------------------------------------------------------------------


def _ct_run(packets, declared, cycles=80, depth=32, maxw=8, ready=lambda c: True):
    """Write ``packets`` = [(words, error)] with ``sink_words`` = ``declared[i]`` on each
    first beat into a cut-through FIFO; return the words/last/error read and cycles."""
    dut = PacketFifo(depth, maxw, cut_through=True)
    out = []   # (cycle, data, last, error)
    writes = []
    res = {}

    def writer():
        ep = dut.sink
        for (words, err), n in zip(packets, declared):
            for i, w in enumerate(words):
                yield ep.valid.eq(1)
                yield ep.data.eq(w)
                yield ep.last.eq(i == len(words) - 1)
                yield ep.error.eq(err and i == len(words) - 1)
                yield dut.sink_words.eq(n if i == 0 else 0)
                writes.append(len(writes))
                yield
        yield ep.valid.eq(0)

    def reader():
        src = dut.source
        drained = 0
        for c in range(cycles):
            yield src.ready.eq(1 if ready(c) else 0)
            yield
            if (yield src.valid) and (yield src.ready):
                out.append((c, (yield src.data), (yield src.last), (yield src.error)))
            drained += (yield dut.drained)
        res["drained"] = drained
        res["aborted"] = yield dut.aborted
        res["level"] = yield dut.level

    run_simulation(dut, [writer(), reader()])
    return out, res


def test_cut_through_visible_before_tail():
    """A word is readable two cycles after it was written: the head leaves long before
    the tail is in."""
    words = list(range(100, 108))
    out, res = _ct_run([(words, False)], [8])
    assert [d for _, d, _, _ in out] == words
    assert [l for _, _, l, _ in out] == [0] * 7 + [1]
    assert out[0][0] == 2 and out[-1][0] == 9   # written in cycles 0..7
    assert res["drained"] == 8 and res["level"] == 0 and res["aborted"] == 0


def test_cut_through_error_passes_on():
    out, res = _ct_run([([1, 2, 3], True), ([4, 5], False)], [3, 2])
    assert [(d, l, e) for _, d, l, e in out] == [(1, 0, 0), (2, 0, 0), (3, 1, 1), (4, 0, 0), (5, 1, 0)]
    assert res["aborted"] == 0


def test_cut_through_short_packet_padded_to_declared():
    """A packet that ends before its declared length (a frame cut by the link) leaves
    with exactly the declared words: zero pads, the last with error; drained counts
    them all (the sender's credits)."""
    out, res = _ct_run([([1, 2], True), ([7, 8], False)], [5, 2])
    assert [(d, l, e) for _, d, l, e in out] == [
        (1, 0, 0), (2, 0, 0), (0, 0, 0), (0, 0, 0), (0, 1, 1), (7, 0, 0), (8, 1, 0)]
    assert res["drained"] == 7 and res["level"] == 0


def test_cut_through_long_packet_cut_at_declared():
    """A packet longer than declared is cut there with error; the rest is discarded and
    counted; the next packet is intact."""
    out, res = _ct_run([([1, 2, 3, 4, 5], False), ([9, 9], False)], [3, 2])
    assert [(d, l, e) for _, d, l, e in out] == [(1, 0, 0), (2, 0, 0), (3, 1, 1), (9, 0, 0), (9, 1, 0)]
    assert res["aborted"] == 1 and res["drained"] == 5


def test_cut_through_refuses_packet_without_room():
    """The declared words are reserved at the first beat; a packet whose declared length
    does not fit is refused whole (a credit fault), the next one that fits passes."""
    out, res = _ct_run([([1] * 8, False), ([2] * 6, False), ([3] * 4, False), ([4] * 2, False)],
                       [8, 6, 4, 2], depth=16, ready=lambda c: c > 60)
    got = [d for _, d, _, _ in out]
    assert got == [1] * 8 + [2] * 6 + [4] * 2
    assert res["aborted"] == 1


def test_lookahead_shows_next_head_while_streaming():
    """lookahead + head_word: the reader takes an entry when it starts a packet, so the
    next packet's length and header word are visible while the current one streams."""
    dut = PacketFifo(32, 8, lookahead=True, head_word=True)
    seen = []

    def gen():
        ep = dut.sink
        for words in ([11, 1, 1], [22, 2]):
            for i, w in enumerate(words):
                yield ep.valid.eq(1)
                yield ep.data.eq(w)
                yield ep.last.eq(i == len(words) - 1)
                yield
        yield ep.valid.eq(0)
        yield
        seen.append(((yield dut.waiting), (yield dut.head_words), (yield dut.head_word),
                     (yield dut.packets)))
        yield dut.head_take.eq(1)
        yield
        yield dut.head_take.eq(0)
        yield dut.source.ready.eq(1)
        yield
        seen.append(((yield dut.waiting), (yield dut.head_words), (yield dut.head_word),
                     (yield dut.packets)))

    run_simulation(dut, gen())
    assert seen[0] == (2, 3, 11, 2)
    assert seen[1] == (1, 2, 22, 2)   # first packet streaming: still counted in packets
