"""Migen simulation tests of the barrier unit's all-to-all mode (hw/barrier.py, ``mode`` = 1).

The network model, the one-unit bench and the packet builder are test_barrier.py's
(``NetModel``, ``Bench``, ``pkt``): N units joined by a Python network (random or fixed
delays, optional back-pressure), "software" per context that enters, waits for its
own ``done``, thinks and enters again. Cycle accounting as there: a value written by
the generator in iteration ``k`` is visible to the hardware in cycle ``k + 1``.
"""

from __future__ import annotations

import random

import pytest
from migen import Module, run_simulation

from paranic.spec import protocol as P
from paranic.hw.barrier import (MODE_A2A, MODE_TREE, BarrierPeers, BarrierUnit, a2a_order,
                                tree_parent)
from test_barrier import PT, Bench, NetModel, Result, pkt

# ---------------------------------------------------------------------------
# The send order
# ---------------------------------------------------------------------------


def ring_dist(a: int, b: int, n: int) -> int:
    d = (b - a) % n
    return min(d, n - d)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 32, 100])
def test_order_model_farthest_first(n):
    """a2a_order is every other member exactly once, starting at a farthest id, and the
    ring distance never grows along it (the nearest neighbours go last)."""
    for i in range(n):
        order = a2a_order(i, n)
        assert sorted(order) == [j for j in range(n) if j != i]
        dists = [ring_dist(i, d, n) for d in order]
        assert dists == sorted(dists, reverse=True), (i, n, order)
        if n > 1:
            assert dists[0] == n // 2 and dists[-1] == 1
    assert a2a_order(5, 5) == [] and a2a_order(0, 1) == []
    assert a2a_order(0, 8) == [4, 5, 3, 6, 2, 7, 1]


def test_peers_hardware_matches_model():
    """BarrierPeers' registered outputs for corner and random configurations."""
    max_nodes = 32
    dut = BarrierPeers(max_nodes)
    rng = random.Random(3)
    cases = [(0, 1, 1), (0, 2, 1), (1, 2, 1), (31, 32, 1), (0, 32, 1), (5, 33, 1), (40, 33, 1),
             (3, 8, 0), (9, 8, 1), (0, 0, 1), (4095, 4096, 1)]
    for _ in range(300):
        nodes = rng.randint(0, 40)
        cases.append((rng.randint(0, nodes + 3), nodes, rng.randint(0, 1)))
    checked = []

    def gen():
        for node_id, nodes, mode in cases:
            yield dut.node_id.eq(node_id)
            yield dut.nodes.eq(nodes)
            yield dut.mode.eq(mode)
            yield
            yield
            member = node_id < nodes
            assert (yield dut.a2a) == (mode == MODE_A2A and nodes <= max_nodes)
            if nodes <= max_nodes:
                peers = yield dut.peers
                want = [j for j in range(nodes) if j != node_id] if member else []
                assert [j for j in range(max_nodes) if peers >> j & 1] == want
                assert (yield dut.count) == len(want)
                if member:
                    assert (yield dut.first) == (a2a_order(node_id, nodes) or [node_id])[0]
            checked.append(1)

    run_simulation(dut, gen())
    assert len(checked) == len(cases)


# ---------------------------------------------------------------------------
# Cluster harness
# ---------------------------------------------------------------------------


class A2aCluster(Module):
    def __init__(self, n, n_ctx=4):
        self.units = []
        for i in range(n):
            u = BarrierUnit(n_ctx=n_ctx, mode=MODE_A2A)
            setattr(self.submodules, f"u{i}", u)
            self.comb += [u.node_id.eq(i), u.nodes.eq(n)]
            self.units.append(u)


class _Forget(dict):
    """A ``pair_time`` that remembers nothing: packets between a pair may overtake."""

    def __setitem__(self, key, value) -> None:
        pass


def run_a2a(n, *, episodes, seed=0, max_delay=8, fixed_delay=None, n_ctx=4, think=20,
            straggle=0.2, backpressure=0.0, dup_rate=0.0, garbage_rate=0.0, multi_ctx=True,
            all_at_once=False, gap=10, reorder=False, racer=None, forge=None, late=None,
            max_cycles=200_000) -> Result:
    """N units in all-to-all mode. Every context must get exactly one ``done`` per episode,
    never before the last enter of that episode (asserted as they happen).

    ``racer``: that node's contexts re-enter at once after their ``done`` (no thinking,
    never straggling) and its packets take 1..3 cycles, so its next-episode arrives
    reach nodes still finishing the current one. ``reorder``: no per-pair order in the
    network. ``forge``: (node, peer) -- a well-formed arrive from ``peer`` for node
    ``node``'s first episode is injected at cycle 5 (a fake the harness must catch).
    ``late``: {node: cycles} added to that node's first enter. ``Result.nxt_hits``:
    cycles in which some unit held a next-episode arrive.
    """
    rng = random.Random(seed)
    dut = A2aCluster(n, n_ctx=n_ctx)
    units = dut.units
    def delay() -> int:
        if fixed_delay is not None:
            return fixed_delay
        # NetModel logs a packet (cycle, src, header) just before asking for its delay.
        if racer is not None and net.sent_log[-1][1] == racer:
            return rng.randint(1, 3)
        return rng.randint(1, max_delay)

    net = NetModel(units, rng, delay, backpressure)
    if reorder:
        net.pair_time = _Forget()

    parts = []
    for i in range(n):
        k = rng.choice([1, 1, 2, 3]) if multi_ctx else 1
        parts.append(sorted(rng.sample(range(n_ctx), k)))
    masks = [0 if (len(p) == 1 and rng.random() < 0.5) else sum(1 << c for c in p) for p in parts]
    total = sum(len(p) for p in parts)

    ep = {(i, c): 0 for i in range(n) for c in parts[i]}
    due = {}
    waiting = set()
    entered = [0] * (episodes + 2)
    last_enter = [0] * (episodes + 2)
    dones = [[] for _ in range(episodes + 2)]
    done_count = {k: 0 for k in ep}
    dup_count = [0] * n
    garbage = [[0, 0] for _ in range(n)]
    res = Result()
    res.nxt_hits = 0

    def schedule(k, now):
        if all_at_once:
            e = ep[k]
            if len(dones[e - 1]) == total if e else True:
                for kk in ep:
                    if ep[kk] == e and kk not in waiting:
                        due[kk] = now + 1 + gap
        elif k[0] == racer:
            due[k] = now + 1
        else:
            t = rng.randint(0, think)
            if rng.random() < straggle:
                t += rng.randint(think, 4 * think + 10)
            due[k] = now + 1 + t

    for k in ep:
        schedule(k, 0)
        if late and k[0] in late:
            due[k] += late[k[0]]

    def gen():
        for i, u in enumerate(units):
            yield u.participants.eq(masks[i])
        yield
        now = 1
        enter_hi = [False] * n
        finished_at = None
        while True:
            yield from net.step(now)
            if forge is not None and now == 5:
                net.inject(forge[0], pkt(forge[0], forge[1], tag=0), now + 1)
            for i, u in enumerate(units):
                if (yield u.done):
                    c = yield u.done_ctx
                    k = (i, c)
                    assert k in waiting, f"done for node {i} ctx {c} that did not enter"
                    e = ep[k]
                    assert now > last_enter[e] and entered[e] == total, \
                        f"episode {e}: node {i} done at {now} before the last enter"
                    waiting.discard(k)
                    dones[e].append(now)
                    done_count[k] += 1
                    ep[k] = e + 1
                    if e + 1 < episodes:
                        schedule(k, now)
                if (yield u.arrivals.nxt):
                    res.nxt_hits += 1
            all_in_before = [entered[e] == total for e in range(episodes + 2)]
            for i, u in enumerate(units):
                cands = [k for k in due if k[0] == i and due[k] <= now]
                req = None
                if cands:
                    k = min(cands, key=lambda x: due[x])
                    del due[k]
                    e = ep[k]
                    waiting.add(k)
                    entered[e] += 1
                    last_enter[e] = max(last_enter[e], now + 1)
                    req = k[1]
                elif dup_rate and rng.random() < dup_rate:
                    mine = [k for k in waiting if k[0] == i and not all_in_before[ep[k]]]
                    if mine:
                        req = rng.choice(mine)[1]
                        dup_count[i] += 1
                if req is not None:
                    yield u.enter.eq(1)
                    yield u.enter_ctx.eq(req)
                    enter_hi[i] = True
                elif enter_hi[i]:
                    yield u.enter.eq(0)
                    enter_hi[i] = False
            if garbage_rate and finished_at is None and rng.random() < garbage_rate:
                d = rng.randrange(n)
                kind = rng.randrange(6)
                if kind == 0:
                    w = pkt(d, rng.randrange(n), tag=0, length=8, payload=[0x1234])
                elif kind == 1:
                    w = pkt(d, rng.randrange(n), type=int(PT.DATA))
                elif kind == 2:
                    w = pkt((d + 1) % P.MAX_NODES, d, tag=0)           # for another node
                elif kind == 3:                                        # from no peer
                    w = pkt(d, rng.choice([d, n, n + 1, 31, 40, P.MAX_NODES - 1]), tag=0)
                elif kind == 4:                                        # a release: none here
                    w = pkt(d, rng.choice([x for x in range(n) if x != d] or [0]), release=True,
                            tag=ep.get((d, parts[d][0]), 0))
                else:                                                  # a tag of no episode
                    w = pkt(d, (d + 1) % n, tag=(1 << 32) | rng.getrandbits(8))
                garbage[d][0 if kind <= 2 else 1] += 1
                net.inject(d, w, now + rng.randint(1, 10))
            if finished_at is None and all(v == episodes for v in done_count.values()):
                finished_at = now
            if finished_at is not None and now > finished_at + 40 and not net.busy():
                break
            assert now < max_cycles, "barrier wedged"
            yield
            now += 1
        for _ in range(3):
            yield
        for u in units:
            cnt = {}
            for name in BarrierUnit.COUNTERS:
                cnt[name] = yield getattr(u, name)
            res.counters.append(cnt)
            assert (yield u.done) == 0
            assert (yield u.arrivals.nxt) == 0 and (yield u.arrivals.cur) == 0
            assert (yield u.peers.a2a) == 1
        res.cycles = now

    run_simulation(dut, gen())
    for e in range(episodes):
        assert len(dones[e]) == total
        res.latencies.append(max(dones[e]) - last_enter[e])
        res.first_done.append(min(dones[e]) - last_enter[e])
    assert not dones[episodes], "done pulses after the last episode"
    assert all(v == episodes for v in done_count.values())
    res.episodes = episodes
    res.dups = dup_count
    res.garbage = garbage
    res.delivered = net.delivered
    res.parts = parts
    # Every packet that left a unit was an arrive for a peer, each destination once per
    # sender and episode, in a2a_order.
    for s in range(n):
        sent = [(h["dst_node"], h["tag"]) for _, src, h in net.sent_log if src == s]
        assert sent == [(d, e) for e in range(episodes) for d in a2a_order(s, n)]
    return res


def check_counters(res: Result, n: int) -> None:
    for i, c in enumerate(res.counters):
        fmt, proto = res.garbage[i]
        assert c["episodes"] == res.episodes
        assert c["tx_packets"] == (n - 1) * res.episodes
        assert c["rx_packets"] == (n - 1) * res.episodes + fmt + proto
        assert c["err_format"] == fmt
        assert c["err_protocol"] == proto
        assert c["enter_merged"] == res.dups[i]
        assert c["enter_dropped"] == 0


# ---------------------------------------------------------------------------
# Cluster tests
# ---------------------------------------------------------------------------

EPISODES = {1: 20, 2: 25, 3: 20, 4: 16, 5: 12, 8: 8, 13: 6, 16: 5}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, pytest.param(13, marks=pytest.mark.slow),
                               pytest.param(16, marks=pytest.mark.slow)])
def test_cluster_random(n):
    """Random enter times and skews, random delays and back-pressure, several contexts
    per node, duplicate enters: exactly one done per context and episode, never before
    the last enter; exact packet and error counts; every sweep in a2a_order."""
    eps = EPISODES[n]
    res = run_a2a(n, episodes=eps, seed=200 + n, max_delay=12, backpressure=0.2, dup_rate=0.1)
    check_counters(res, n)
    assert res.delivered == n * (n - 1) * eps
    assert sum(res.dups) > 0 or n == 1
    print(f"\nA2A N={n}: {eps} episodes in {res.cycles} cycles, latency last enter -> last "
          f"done min {min(res.latencies)} max {max(res.latencies)}")


@pytest.mark.parametrize("n,racer", [(3, 0), (4, 3), (8, 5), pytest.param(16, 0, marks=pytest.mark.slow)])
def test_fast_node_races_ahead(n, racer):
    """One node re-enters at once after every done while the others think and straggle;
    its packets are fast, the others' take up to 40 cycles: its next-episode arrives
    reach nodes still in the current episode (asserted: seen in a unit's next-episode
    mask) and are neither lost nor counted for the wrong episode."""
    eps = max(6, 40 // n)
    res = run_a2a(n, episodes=eps, seed=17 * n + racer, max_delay=40, think=30, straggle=0.3,
                  multi_ctx=False, racer=racer)
    check_counters(res, n)
    assert res.nxt_hits > 0


@pytest.mark.parametrize("n", [2, 3, 6])
def test_reordering_network(n):
    """Packets between a pair may overtake each other (the mode does not need per-pair
    order): same guarantees, with a racing node (with 2 nodes, only a reordering network
    can bring the next episode's arrive first)."""
    res = run_a2a(n, episodes=12, seed=5 + n, max_delay=30, think=10, reorder=True, racer=0,
                  multi_ctx=False)
    check_counters(res, n)
    assert res.nxt_hits > 0


@pytest.mark.parametrize("n", [4, 8])
def test_cluster_with_garbage(n):
    """Malformed and unexpected packets (payload, wrong type or destination, from no
    peer, releases, tags of no episode) injected all over a running cluster are counted
    and dropped; the barrier keeps its guarantees."""
    res = run_a2a(n, episodes=10, seed=31 + n, max_delay=8, garbage_rate=0.08, dup_rate=0.05)
    assert sum(sum(g) for g in res.garbage) > 20
    check_counters(res, n)


def test_harness_catches_an_early_done():
    """The only way to complete early is a forged well-formed arrive from a peer for the
    right episode: then a node completes before that peer entered, and the cluster check
    reports it. (Shows the 'never before the last enter' assertion can fail.)"""
    with pytest.raises(AssertionError, match="before the last enter"):
        run_a2a(3, episodes=1, seed=1, fixed_delay=2, multi_ctx=False, forge=(0, 2),
                late={2: 300})


# ---------------------------------------------------------------------------
# Latency with an ideal network (fixed per-packet delay)
# ---------------------------------------------------------------------------


def model_latency(n: int, delay: int) -> tuple[int, int]:
    """(first done, last done) in cycles after a common enter of every node, for a network
    presenting a packet ``delay`` cycles after its last word left the sender.

    Unit costs (docs/architecture.md, Barrier, all-to-all): the sweep starts 1 cycle
    after the enter and its ``j``-th arrive (0-based, a2a_order) leaves its last word
    ``3 + 2j`` cycles after the enter; a sink takes one packet at a time, 2 cycles each;
    a node completes in the cycle the last arrive's last word comes in; done +1.
    """
    if n == 1:
        return 2, 2
    done = []
    for d in range(n):
        at = sorted(3 + 2 * a2a_order(s, n).index(d) + delay for s in range(n) if s != d)
        free = last = 0
        for a in at:
            start = max(a, free)
            last, free = start + 1, start + 2
        done.append(last + 1)
    return min(done), max(done)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16])
@pytest.mark.parametrize("delay", [1, 20])
def test_latency_ideal_network(n, delay):
    """All nodes enter in the same cycle: first and last done exactly as the model says."""
    res = run_a2a(n, episodes=2, fixed_delay=delay, all_at_once=True, multi_ctx=False, seed=n,
                  gap=2)
    check_counters(res, n)
    first, last = model_latency(n, delay)
    print(f"\nA2A LAT N={n} delay={delay}: {res.latencies} first {res.first_done} "
          f"(model {first}, {last})")
    assert res.latencies == [last] * 2 and res.first_done == [first] * 2


# ---------------------------------------------------------------------------
# One unit, driven directly
# ---------------------------------------------------------------------------


def a2a_bench(node_id, nodes, **kw):
    return Bench(node_id, nodes, mode=MODE_A2A, **kw)


def test_unit_exact_packets_and_timing():
    """Node 2 of 8: on the enter, 7 header-only arrives in a2a_order, back to back, the
    first word 2 cycles after the enter; no done until the 7th peer was heard; in the
    next episode (peers first, host last) done comes 2 cycles after the enter."""
    b = a2a_bench(2, 8)
    peers = a2a_order(2, 8)

    def body(b):
        assert (yield b.u.peers.a2a) == 1
        yield from b.enter(1)
        yield from b.wait(20)
        assert [w for _, w in b.tx] == [pkt(d, 2, tag=0) for d in peers]
        h = b.tx[0][0]
        assert (h["type"], h["flags"], h["length"], h["dst_ctx"], h["src_ctx"], h["vc"]) == \
            (int(PT.BARRIER), 0, 0, 0, 0, 0)
        for s in [0, 1, 3, 4, 5, 7]:
            yield from b.send(pkt(2, s, tag=0))
        yield from b.wait()
        assert b.done == []
        assert (yield b.u.arrivals.cur) == sum(1 << s for s in [0, 1, 3, 4, 5, 7])
        yield from b.send(pkt(2, 6, tag=0))
        assert [c for c, _ in b.done] == [1]
        assert (yield b.u.episode) == 1 and (yield b.u.arrivals.cur) == 0
        for s in peers:
            yield from b.send(pkt(2, s, tag=1))
        yield from b.wait()
        assert len(b.done) == 1 and len(b.tx) == 7
        yield from b.enter(3)
        yield from b.wait(20)
        t_enter = b.enters[-1][1]
        assert [c for c, t in b.done] == [1, 3] and b.done[1][1] == t_enter + 2
        assert [w for _, w in b.tx[7:]] == [pkt(d, 2, tag=1) for d in peers]
        c = yield from b.counters()
        assert c == dict(episodes=2, tx_packets=14, rx_packets=14, err_format=0, err_protocol=0,
                         enter_merged=0, enter_dropped=0)

    b.run(body)


def test_unit_next_episode_arrives_kept():
    """Node 0 of 4: arrives of the next episode from fast peers, received before this
    node completes the current one, are kept and count in the next episode only."""
    b = a2a_bench(0, 4)

    def body(b):
        yield from b.enter(0)
        yield from b.send(pkt(0, 1, tag=0))
        yield from b.send(pkt(0, 1, tag=1))      # node 1 already completed episode 0
        yield from b.send(pkt(0, 2, tag=0))
        yield from b.send(pkt(0, 2, tag=1))
        yield from b.wait()
        assert b.done == []                       # node 3 not heard yet (tag 1 does not count)
        assert (yield b.u.arrivals.nxt) == 0b0110
        yield from b.send(pkt(0, 3, tag=0))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0]
        assert (yield b.u.arrivals.cur) == 0b0110 and (yield b.u.arrivals.nxt) == 0
        yield from b.enter(0)
        yield from b.wait()
        assert len(b.done) == 1                   # node 3's episode-1 arrive still missing
        yield from b.send(pkt(0, 3, tag=1))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0, 0]
        assert [w for _, w in b.tx] == [pkt(d, 0, tag=e) for e in (0, 1) for d in (2, 3, 1)]
        c = yield from b.counters()
        assert (c["episodes"], c["err_protocol"], c["rx_packets"]) == (2, 0, 6)

    b.run(body)


def test_unit_bad_input_counted_and_dropped():
    """Malformed packets (err_format) and unexpected ones (err_protocol: releases, from
    itself or no member, tags other than this or the next episode, duplicates) change
    nothing; afterwards the barrier works."""
    b = a2a_bench(1, 4)

    def body(b):
        fmt = [pkt(1, 0, length=8, payload=[1]), pkt(1, 0, payload=[0]), pkt(1, 0)[:1],
               pkt(1, 0, type=int(PT.DATA)), pkt(2, 0)]
        for w in fmt:
            yield from b.send(w)
        yield from b.send(pkt(1, 0), error=True)
        nfmt = len(fmt) + 1
        proto = [pkt(1, 0, release=True), pkt(1, 2, release=True, tag=0),
                 pkt(1, 1), pkt(1, 4), pkt(1, 31), pkt(1, 100),
                 pkt(1, 0, tag=2), pkt(1, 0, tag=0xFFFFFFFF), pkt(1, 0, tag=1 << 32),
                 pkt(1, 0, tag=(1 << 32) | 1)]
        for w in proto:
            yield from b.send(w)
        yield from b.wait()
        assert b.tx == [] and b.done == []
        assert (yield b.u.arrivals.cur) == 0 and (yield b.u.arrivals.nxt) == 0
        # Duplicates of this and of the next episode: the first counts, the second is an error.
        for w in (pkt(1, 0), pkt(1, 0), pkt(1, 2, tag=1), pkt(1, 2, tag=1)):
            yield from b.send(w)
        nproto = len(proto) + 2
        c = yield from b.counters()
        assert (c["err_format"], c["err_protocol"], c["rx_packets"]) == \
            (nfmt, nproto, nfmt + nproto + 2)
        yield from b.send(pkt(1, 2))
        yield from b.enter(2)
        yield from b.wait()
        assert b.done == []                        # node 3 missing
        yield from b.send(pkt(1, 3))
        yield from b.wait(10)
        assert [c for c, _ in b.done] == [2]
        assert [w for _, w in b.tx] == [pkt(d, 1, tag=0) for d in a2a_order(1, 4)]
        c = yield from b.counters()
        assert c["err_protocol"] == nproto and c["episodes"] == 1

    b.run(body)


def test_unit_context_semantics_and_participants():
    """Several contexts: enters before the sweep started join the episode, later ones the
    next; a repeated enter counts once; a participants mask waits for all its contexts."""
    b = a2a_bench(0, 2, n_ctx=4)

    def body(b):
        u = b.u
        yield u.participants.eq(0b0101)
        yield from b.enter(0)
        yield from b.enter(1)
        yield from b.wait()
        assert b.tx == []                          # ctx 2 still missing
        yield from b.enter(2)
        yield from b.enter(2)                      # merged
        yield from b.wait()
        assert [w for _, w in b.tx] == [pkt(1, 0, tag=0)]
        yield from b.enter(3)                      # sweep started: next episode
        yield from b.send(pkt(0, 1, tag=0))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0, 1, 2]
        assert (yield u.cur_mask) == 0b1000
        yield u.participants.eq(0)
        yield from b.wait()
        assert len(b.tx) == 2                      # ctx 3 alone starts episode 1's sweep
        yield from b.send(pkt(0, 1, tag=1))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0, 1, 2, 3]
        c = yield from b.counters()
        assert c["enter_merged"] == 1 and c["episodes"] == 2

    b.run(body)


def test_unit_sweep_waits_for_previous_and_backpressure():
    """Node 0 of 16 with a stalled source: the last to enter completes at once (all 15
    heard) while its sweep cannot leave; the next episode cannot complete before its own
    sweep has started, which waits for the first to finish. Both sweeps leave whole and
    in order once the source moves (with random back-pressure)."""
    b = a2a_bench(0, 16)
    peers = a2a_order(0, 16)

    def body(b):
        u = b.u
        yield u.source.ready.eq(0)
        for s in peers:
            yield from b.send(pkt(0, s, tag=0))
        yield from b.enter(0)
        yield from b.wait()
        assert [c for c, _ in b.done] == [0] and b.tx == []
        yield from b.enter(0)
        for s in peers:
            yield from b.send(pkt(0, s, tag=1))
        yield from b.wait(20)
        assert len(b.done) == 1 and (yield u.sent) == 0
        rng = random.Random(9)
        tx_at_done = None
        for cyc in range(200):
            yield u.source.ready.eq(1 if cyc >= 60 else rng.random() < 0.5)
            yield
            if len(b.done) == 2 and tx_at_done is None:
                tx_at_done = len(b.tx)
        assert [w for _, w in b.tx] == [pkt(d, 0, tag=e) for e in (0, 1) for d in peers]
        assert [c for c, _ in b.done] == [0, 0]
        # Episode 1 completed only once its own sweep could start: after episode 0's 15th packet.
        assert tx_at_done is not None and tx_at_done >= 15

    b.run(body)


def test_unit_single_node_non_member_and_large_jobs():
    """All-to-all with nodes = 1 or a non-member: done 2 cycles after each enter, nothing
    sent. A job above max_a2a_nodes runs the tree whatever ``mode`` says."""
    for node_id, nodes in ((0, 1), (9, 8)):
        b = a2a_bench(node_id, nodes, n_ctx=4)

        def body(b):
            for c in range(4):
                yield from b.enter(c)
            yield from b.wait()
            assert [c for c, _ in b.done] == [0, 1, 2, 3]
            assert [t for _, t in b.done] == [t + 2 for _, t in b.enters]
            assert b.tx == []

        b.run(body)

    b = a2a_bench(1, 8, radix_log2=1, max_a2a_nodes=4)

    def tree_body(b):
        assert (yield b.u.peers.a2a) == 0
        yield from b.enter(0)
        yield from b.send(pkt(1, 3))
        yield from b.send(pkt(1, 4))
        yield from b.wait()
        assert [w for _, w in b.tx] == [pkt(tree_parent(1, 1), 1, tag=0)]
        yield from b.send(pkt(1, 0, release=True))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0]
        yield b.u.enable.eq(0)
        yield b.u.nodes.eq(4)
        yield
        yield b.u.enable.eq(1)
        yield from b.wait(3)
        assert (yield b.u.peers.a2a) == 1

    b.run(tree_body)


def test_unit_disable_resets():
    """enable = 0 clears both arrival masks and the episode, ends a sweep after the loaded
    packet, drops enters and counts packets as protocol errors; re-enabled, the unit
    works from episode 0."""
    b = a2a_bench(0, 8)

    def body(b):
        u = b.u
        yield u.source.ready.eq(0)
        yield from b.send(pkt(0, 3, tag=0))
        yield from b.send(pkt(0, 4, tag=1))
        yield from b.enter(0)
        assert (yield u.arrivals.cur) == 0b1000 and (yield u.arrivals.nxt) == 0b10000
        yield u.enable.eq(0)
        yield
        yield u.source.ready.eq(1)
        yield from b.wait(10)
        assert len(b.tx) == 1                      # the loaded packet is finished, no more
        assert (yield u.arrivals.cur) == 0 and (yield u.arrivals.nxt) == 0
        assert (yield u.episode) == 0 and (yield u.sent) == 0
        yield from b.enter(1)
        yield from b.send(pkt(0, 3, tag=0))
        c = yield from b.counters()
        assert c["enter_dropped"] == 1 and c["err_protocol"] == 1
        yield u.enable.eq(1)
        yield
        yield from b.enter(2)
        for s in a2a_order(0, 8):
            yield from b.send(pkt(0, s, tag=0))
        yield from b.wait(20)
        assert [c for c, _ in b.done] == [2]
        assert [w for _, w in b.tx[1:]] == [pkt(d, 0, tag=0) for d in a2a_order(0, 8)]

    b.run(body)


def test_tree_mode_untouched_by_default():
    """The reset mode is the tree (MODE_TREE); the CSR's reset value too."""
    u = BarrierUnit(n_ctx=2)
    assert u.mode.reset.value == MODE_TREE
    u.add_csrs()
    assert u._mode.storage.reset.value == MODE_TREE
    with pytest.raises(ValueError):
        BarrierUnit(mode=2)
    with pytest.raises(ValueError):
        BarrierUnit(max_a2a_nodes=0)
