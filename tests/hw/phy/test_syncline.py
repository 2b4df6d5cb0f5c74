"""SyncLine: wired-AND semantics across N boards with unrelated clocks, glitch filtering,
back-to-back episodes; SyncLineBarrier's enter/done interface."""

from __future__ import annotations

import random

import pytest
from migen import ClockDomainsRenamer, Module, Signal, run_simulation

from paranic.hw.phy.syncline import SyncLine, SyncLineBarrier

PERIODS = (20, 22, 26, 28, 34)   # each board its own oscillator (even: migen halves them)


class Cluster(Module):
    """N SyncLines on one wired-AND line; ``noise`` XORs into what every board reads."""

    def __init__(self, n: int) -> None:
        self.nodes = []
        self.noise = Signal()
        line = Signal()
        for i in range(n):
            s = ClockDomainsRenamer(f"n{i}")(SyncLine())
            self.submodules += s
            self.nodes.append(s)
        self.comb += line.eq(~_any([s.drive_low for s in self.nodes]))   # open drain
        for s in self.nodes:
            self.comb += s.line_in.eq(line ^ self.noise)


def _any(sigs):
    out = sigs[0]
    for s in sigs[1:]:
        out = out | s
    return out


def _run(n: int, episodes: int, seed: int, noise_at: list[tuple[int, int]] | None = None):
    top = Cluster(n)
    rng = random.Random(seed)
    log = {i: {"arrive": [], "done": []} for i in range(n)}
    # Random arrival gaps, often 0 (arrive again the very cycle after done) to test the
    # next-episode bookkeeping, sometimes long (the others wait on this board).
    gaps = {i: [rng.choice([0, 0, 1, 5, rng.randrange(0, 100)]) for _ in range(episodes)]
            for i in range(n)}

    def node(i):
        s, per = top.nodes[i], PERIODS[i]
        t = 0
        for k in range(episodes):
            for _ in range(gaps[i][k]):
                yield
                t += per
            yield s.arrive.eq(1)
            log[i]["arrive"].append(t)
            yield
            t += per
            yield s.arrive.eq(0)
            while not (yield s.done):
                yield
                t += per
                assert t < 200_000, f"node {i} stuck in episode {k}"
            log[i]["done"].append(t)
            yield
            t += per
        for _ in range(400):   # stay around: no extra done may appear
            assert not (yield s.done)
            yield

    def noise():
        t = 0
        for at, length in sorted(noise_at or []):
            while t < at:
                yield
                t += 1
            yield top.noise.eq(1)
            for _ in range(length):
                yield
                t += 1
            yield top.noise.eq(0)

    gens = {f"n{i}": node(i) for i in range(n)}
    clocks = {f"n{i}": PERIODS[i] for i in range(n)}
    if noise_at:
        gens["sys"] = noise()
        clocks["sys"] = 1
    run_simulation(top, gens, clocks=clocks)
    return top, log


@pytest.mark.parametrize("n,seed", [(2, 1), (5, 2)])
def test_wired_and_across_boards(n, seed):
    episodes = 12
    _, log = _run(n, episodes, seed)
    per = max(PERIODS[:n])
    latency = 8 + 3                # default filter + synchroniser + 1
    turnaround = 2 * 2 * latency   # hold + min_low after each episode
    for k in range(episodes):
        last = max(log[i]["arrive"][k] for i in range(n))
        dones = [log[i]["done"][k] for i in range(n)]
        # Nobody completes before everyone arrived; everyone completes within a bounded
        # time of the last arrival, or of the previous episode's turnaround.
        assert min(dones) > last, (k, last, dones)
        start = max(last, turnaround // 2 * per) if k == 0 else max(last, max(log[i]["done"][k - 1] for i in range(n)) +
                                        turnaround * per)
        assert max(dones) - start < (latency + 6) * per, (k, start, dones)
        assert max(dones) - min(dones) < (latency + 2) * per, (k, dones)
    for i in range(n):
        assert len(log[i]["done"]) == episodes


def test_short_pulses_are_filtered():
    """While one board holds the line low, noise pulses shorter than the filter complete
    nothing (the counter sees them); the real release completes the episode."""
    n = 3

    top = Cluster(n)
    got = {"done": 0}

    def boards():
        # Boards 0 and 1 arrive at once; board 2 waits 2000 time units.
        for i in (0, 1):
            yield top.nodes[i].arrive.eq(1)
        yield
        for i in (0, 1):
            yield top.nodes[i].arrive.eq(0)
        for _ in range(2000):
            if (yield top.nodes[0].done):
                got["done"] += 1
            yield
        got["early"] = got["done"]
        got["glitches"] = yield top.nodes[0].glitches
        yield top.nodes[2].arrive.eq(1)
        yield
        yield top.nodes[2].arrive.eq(0)
        for _ in range(200):
            if (yield top.nodes[0].done):
                got["done"] += 1
            yield

    def noise():
        for _ in range(300):
            yield
        for _ in range(5):
            yield top.noise.eq(1)
            for _ in range(4):      # 4 cycles < filter (8)
                yield
            yield top.noise.eq(0)
            for _ in range(100):
                yield

    cd = lambda m: ClockDomainsRenamer({f"n{i}": "sys" for i in range(n)})(m)  # noqa: E731
    top = cd(top)
    run_simulation(top, {"sys": [boards(), noise()]})
    assert got["early"] == 0
    assert got["glitches"] >= 5
    assert got["done"] == 1


def test_bad_timing_parameters():
    with pytest.raises(ValueError):
        SyncLine(filter=8, hold=4)


def test_sync_line_barrier_contexts():
    """One board alone: contexts 1 and 3 enter; with participants = {1, 3} the line
    completes only after both, then done pulses once per context."""

    class Top(Module):
        def __init__(self):
            self.submodules.line = line = SyncLine(filter=2)
            self.submodules.bar = SyncLineBarrier(line, n_ctx=4)
            self.comb += line.line_in.eq(~line.drive_low)

    top = Top()
    dones = []

    def gen():
        yield top.bar.participants.eq(0b1010)
        for _ in range(40):
            yield
        yield top.bar.enter.eq(1)
        yield top.bar.enter_ctx.eq(1)
        yield
        yield top.bar.enter.eq(0)
        for _ in range(60):
            assert not (yield top.bar.done), "completed before context 3 entered"
            yield
        yield top.bar.enter.eq(1)
        yield top.bar.enter_ctx.eq(3)
        yield
        yield top.bar.enter.eq(0)
        for _ in range(100):
            if (yield top.bar.done):
                dones.append((yield top.bar.done_ctx))
            yield

    run_simulation(top, gen())
    assert dones == [1, 3]


def test_barrier_unit_completes_on_the_sync_line():
    """BarrierUnit(with_sync_line=True) with use_line=1 on three boards (own clocks):
    every episode completes on every board only after all entered, with no packets."""
    from paranic.hw.barrier import BarrierUnit

    n, episodes = 3, 5

    class Top(Module):
        def __init__(self):
            self.units, self.lines = [], []
            for i in range(n):
                u = ClockDomainsRenamer(f"n{i}")(BarrierUnit(n_ctx=2, with_sync_line=True))
                s = ClockDomainsRenamer(f"n{i}")(SyncLine())
                self.submodules += u, s
                self.comb += [u.use_line.eq(1), u.source.ready.eq(1),
                              s.arrive.eq(u.line_arrive), u.line_done.eq(s.done)]
                self.units.append(u)
                self.lines.append(s)
            line = Signal()
            self.comb += line.eq(~_any([s.drive_low for s in self.lines]))
            for s in self.lines:
                self.comb += s.line_in.eq(line)

    top = Top()
    rng = random.Random(3)
    log = {i: {"enter": [], "done": []} for i in range(n)}

    def board(i):
        u, per, t = top.units[i], PERIODS[i], 0
        for k in range(episodes):
            for _ in range(rng.randrange(0, 80)):
                yield
                t += per
            yield u.enter.eq(1)
            yield u.enter_ctx.eq(k & 1)
            log[i]["enter"].append(t)
            yield
            t += per
            yield u.enter.eq(0)
            while not (yield u.done):
                assert not (yield u.source.valid), "the line path sends no packets"
                yield
                t += per
                assert t < 100_000
            assert (yield u.done_ctx) == k & 1
            log[i]["done"].append(t)
            yield
            t += per
        log[i]["episodes"] = yield u.episodes
        log[i]["tx"] = yield u.tx_packets

    run_simulation(top, {f"n{i}": board(i) for i in range(n)},
                   clocks={f"n{i}": PERIODS[i] for i in range(n)})
    for k in range(episodes):
        last = max(log[i]["enter"][k] for i in range(n))
        assert all(log[i]["done"][k] > last for i in range(n)), k
    for i in range(n):
        assert log[i]["episodes"] == episodes and log[i]["tx"] == 0


def test_barrier_unit_default_has_no_line():
    from paranic.hw.barrier import BarrierUnit
    assert not hasattr(BarrierUnit(n_ctx=2), "use_line")
