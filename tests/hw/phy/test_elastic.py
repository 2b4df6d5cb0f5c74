"""ElasticBuffer: words cross from a faster write clock in order; only fillers are dropped."""

from __future__ import annotations

import random

from migen import ClockDomain, Module, run_simulation

from paranic.hw.phy.elastic import ElasticBuffer
from paranic.spec.link import CTL, CtlKind


def _ctl(kind: int, nak: int = 0) -> int:
    return (kind << CTL["kind"].offset) | (nak << CTL["nak"].offset)


def _run(write_period: int, read_period: int, words: list[tuple[int, int]], depth: int = 16):
    class Top(Module):
        def __init__(self):
            self.clock_domains.cd_rx = ClockDomain()
            self.submodules.eb = ElasticBuffer("rx", depth=depth)

    top = Top()
    got: list[tuple[int, int]] = []
    status = {}

    def writer():
        for data, ctrl in words:
            yield top.eb.sink.valid.eq(1)
            yield top.eb.sink.data.eq(data)
            yield top.eb.sink.ctrl.eq(ctrl)
            yield
        yield top.eb.sink.valid.eq(0)

    def reader():
        yield top.eb.source.ready.eq(1)
        idle = 0
        while idle < 200:
            if (yield top.eb.source.valid):
                got.append(((yield top.eb.source.data), (yield top.eb.source.ctrl)))
                idle = 0
            else:
                idle += 1
            yield
        status["overflow"] = yield top.eb.overflow

    run_simulation(top, {"sys": reader(), "rx": writer()},
                   clocks={"sys": read_period, "rx": write_period})
    return got, status["overflow"]


def test_faster_writer_drops_only_fillers():
    rng = random.Random(1)
    words = []
    for i in range(3000):
        if i % 40 == 0:
            words.append((_ctl(CtlKind.STATUS), 1))
        elif i % 97 == 0:
            words.append((_ctl(CtlKind.STATUS, nak=1), 1))   # a NAK is never dropped
        else:
            words.append((rng.getrandbits(64), 0))
    # The writer is 1 % faster than the reader; 2.5 % of the words are fillers.
    got, overflow = _run(99, 100, words)
    keep = [w for w in words if not (w[1] and w[0] == _ctl(CtlKind.STATUS))]
    assert [w for w in got if not (w[1] and w[0] == _ctl(CtlKind.STATUS))] == keep
    assert len(got) < len(words)
    assert overflow == 0


def test_slower_writer_loses_nothing():
    words = [(i * 0x0101010101, i & 1) for i in range(500)]
    got, overflow = _run(23, 20, words)
    assert got == words and overflow == 0


def test_no_fillers_overflows_and_says_so():
    words = [(i, 0) for i in range(2000)]
    got, overflow = _run(10, 20, words)
    assert len(got) < len(words)
    assert got == sorted(set(got))   # what arrives is still in order
    assert overflow == 1
