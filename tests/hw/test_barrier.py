"""Migen simulation tests of the hardware barrier unit (hw/barrier.py).

Most tests put N BarrierUnits in one Module and join their ``source``s to their
``sink``s through a Python network model (packets routed by dst_node after a random
or fixed delay, per source/destination order kept, one word per cycle into each
sink). "Software" per context enters, waits for its own ``done``, thinks, enters
again. Cycle accounting: a value written by the generator in iteration ``k`` is
visible to the hardware in cycle ``k + 1``; a value read in iteration ``k`` is the
hardware's in cycle ``k``.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

import pytest
from migen import Module, run_simulation

from paranic.spec import protocol as P
from paranic.hw.barrier import (DEFAULT_MAX_RADIX_LOG2, BarrierTree, BarrierUnit,
                                tree_children, tree_depth, tree_parent)

PT = P.PacketType
BAR = int(PT.BARRIER)
REL = int(P.Flags.BAR_RELEASE)


def pkt(dst, src, release=False, tag=0, **kw):
    """Words of a barrier packet (header via paranic.spec.protocol), extra payload via ``payload``."""
    payload = kw.pop("payload", [])
    fields = dict(dst_node=dst, src_node=src, type=BAR, flags=REL if release else 0, tag=tag)
    fields.update(kw)
    return list(P.header_words(**fields)) + list(payload)


# ---------------------------------------------------------------------------
# Tree reference model and the hardware's tree arithmetic
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("nodes", [1, 2, 3, 5, 8, 16, 100, 4096])
@pytest.mark.parametrize("radix_log2", [0, 1, 2, 3])
def test_tree_model_is_a_spanning_tree(nodes, radix_log2):
    """Every node but 0 has exactly one parent, which lists it as a child; depth matches."""
    seen = {0}
    maxdepth = 0
    depth = {0: 0}
    for i in range(nodes):
        for c in tree_children(i, nodes, radix_log2):
            assert tree_parent(c, radix_log2) == i
            assert c not in seen
            seen.add(c)
            depth[c] = depth[i] + 1
            maxdepth = max(maxdepth, depth[c])
        assert len(tree_children(i, nodes, radix_log2)) <= 1 << radix_log2
    assert seen == set(range(nodes))
    assert tree_parent(0, radix_log2) is None
    assert tree_depth(nodes, radix_log2) == maxdepth


def test_tree_hardware_matches_model():
    """BarrierTree's registered outputs equal the Python model (random + corner configs)."""
    max_r = 3
    dut = BarrierTree(max_radix_log2=max_r)
    rng = random.Random(1)
    cases = [(0, 1, 1), (0, 0, 2), (4095, 4096, 1), (4095, 4096, 3), (2047, 4096, 1),
             (1023, 4096, 2), (1, 2, 0), (7, 5, 2), (4095, 1, 1)]
    for _ in range(400):
        nodes = rng.choice([rng.randint(0, 20), rng.randint(1, 4096)])
        cases.append((rng.randint(0, max(0, min(4095, nodes + 2))), nodes, rng.randint(0, max_r)))
    cases.append((3, 10, 7))  # radix_log2 above the maximum: clamped to max_r
    checked = []

    def gen():
        for node_id, nodes, r in cases:
            yield dut.node_id.eq(node_id)
            yield dut.nodes.eq(nodes)
            yield dut.radix_log2.eq(r)
            yield
            yield
            rr = min(r, max_r)
            member = node_id < nodes
            assert (yield dut.member) == member
            assert (yield dut.is_root) == (node_id == 0 or not member)
            if node_id > 0:
                assert (yield dut.parent) == tree_parent(node_id, rr)
            kids = tree_children(node_id, nodes, rr)
            kv = yield dut.kids_valid
            first = yield dut.first_child
            got = [first + j for j in range(1 << max_r) if kv >> j & 1]
            assert got == kids, (node_id, nodes, r)
            checked.append(1)

    run_simulation(dut, gen())
    assert len(checked) == len(cases)


# ---------------------------------------------------------------------------
# Cluster harness
# ---------------------------------------------------------------------------


class Cluster(Module):
    def __init__(self, n, radix_log2, n_ctx=4, max_radix_log2=DEFAULT_MAX_RADIX_LOG2):
        self.units = []
        for i in range(n):
            u = BarrierUnit(n_ctx=n_ctx, radix_log2=radix_log2, max_radix_log2=max_radix_log2)
            setattr(self.submodules, f"u{i}", u)
            self.comb += [u.node_id.eq(i), u.nodes.eq(n)]
            self.units.append(u)


@dataclass
class Result:
    episodes: int = 0
    cycles: int = 0
    latencies: list = field(default_factory=list)      # last enter -> last done, per episode
    first_done: list = field(default_factory=list)     # last enter -> first done, per episode
    counters: list = field(default_factory=list)       # per node: dict of counters
    dups: list = field(default_factory=list)           # per node: duplicate enters injected
    parts: list = field(default_factory=list)          # per node: participating contexts
    garbage: list = field(default_factory=list)        # per node: (format, protocol) injected
    delivered: int = 0


class NetModel:
    """Moves packets from sources to sinks by dst_node.

    A packet whose last word left source ``s`` in cycle ``t`` is presented at the
    sink of ``d`` from cycle ``max(t + delay, previous packet s->d)``; a sink takes
    one packet at a time, one word per cycle, in (time, arrival) order.
    """

    def __init__(self, units, rng, delay, backpressure=0.0):
        self.u = units
        self.rng = rng
        self.delay = delay              # callable -> cycles
        self.bp = backpressure
        n = len(units)
        self.rx_words = [[] for _ in range(n)]
        self.src_ready = [False] * n
        self.heaps = [[] for _ in range(n)]
        self.cur = [None] * n           # [words, index] on the sink bus
        self.sink_valid = [False] * n
        self.pair_time = {}
        self.seq = 0
        self.delivered = 0
        self.sent_log = []              # (cycle, src, header dict) of packets leaving sources

    def busy(self):
        return any(self.heaps) or any(c is not None for c in self.cur) or any(self.rx_words)

    def inject(self, dst, words, at):
        self.seq += 1
        heapq.heappush(self.heaps[dst], (at, self.seq, words))

    def step(self, now):
        for s, u in enumerate(self.u):
            if self.src_ready[s] and (yield u.source.valid):
                w = yield u.source.data
                self.rx_words[s].append(w)
                assert (yield u.source.first) == (len(self.rx_words[s]) == 1)
                if (yield u.source.last):
                    words = self.rx_words[s]
                    self.rx_words[s] = []
                    h = P.unpack_header(b"".join(x.to_bytes(8, "little") for x in words[:2]))
                    assert len(words) == 2 and h["length"] == 0 and h["type"] == BAR
                    assert h["src_node"] == s and h["dst_ctx"] == 0 and h["src_ctx"] == 0
                    d = h["dst_node"]
                    self.sent_log.append((now, s, h))
                    at = max(now + self.delay(), self.pair_time.get((s, d), 0))
                    self.pair_time[(s, d)] = at
                    self.inject(d, words, at)
            r = self.rng.random() >= self.bp
            if r != self.src_ready[s]:
                yield u.source.ready.eq(r)
                self.src_ready[s] = r
        for d, u in enumerate(self.u):
            cur = self.cur[d]
            if cur is not None:
                assert (yield u.sink.ready) == 1, "barrier sink must never back-pressure"
                cur[1] += 1
                if cur[1] == len(cur[0]):
                    self.cur[d] = cur = None
                    self.delivered += 1
            if cur is None and self.heaps[d] and self.heaps[d][0][0] <= now + 1:
                _, _, words = heapq.heappop(self.heaps[d])
                self.cur[d] = cur = [words, 0]
            if cur is not None:
                words, i = cur
                yield u.sink.valid.eq(1)
                yield u.sink.data.eq(words[i])
                yield u.sink.first.eq(i == 0)
                yield u.sink.last.eq(i == len(words) - 1)
            elif self.sink_valid[d]:
                yield u.sink.valid.eq(0)
                yield u.sink.last.eq(0)
                yield u.sink.first.eq(0)
            self.sink_valid[d] = cur is not None


def run_cluster(n, radix_log2, *, episodes, seed=0, max_delay=8, fixed_delay=None, n_ctx=4,
                think=20, straggle=0.2, backpressure=0.0, dup_rate=0.0, garbage_rate=0.0,
                multi_ctx=True, all_at_once=False, gap=10, max_cycles=200_000):
    rng = random.Random(seed)
    dut = Cluster(n, radix_log2, n_ctx=n_ctx)
    units = dut.units
    delay = (lambda: fixed_delay) if fixed_delay is not None else (lambda: rng.randint(1, max_delay))
    net = NetModel(units, rng, delay, backpressure)

    # Participating contexts per node and the mode ("any" mask 0 only with one context).
    parts = []
    for i in range(n):
        k = rng.choice([1, 1, 2, 3]) if multi_ctx else 1
        parts.append(sorted(rng.sample(range(n_ctx), k)))
    masks = []
    for p in parts:
        m = sum(1 << c for c in p)
        masks.append(0 if (len(p) == 1 and rng.random() < 0.5) else m)
    total = sum(len(p) for p in parts)

    # Software state per (node, ctx).
    ep = {(i, c): 0 for i in range(n) for c in parts[i]}          # episode it is in / next enters
    due = {}                                                       # (i, c) -> iteration to enter
    waiting = set()                                                # entered, waiting for done
    entered = [0] * (episodes + 2)                                 # contexts entered, per episode
    last_enter = [0] * (episodes + 2)                              # visible cycle of last enter
    dones = [[] for _ in range(episodes + 2)]                      # visible cycles of dones
    done_count = {k: 0 for k in ep}
    dup_count = [0] * n
    garbage = [[0, 0] for _ in range(n)]
    res = Result()

    def schedule(k, now):
        if all_at_once:
            # All contexts enter in one cycle, a gap after the previous episode's last done.
            e = ep[k]
            if len(dones[e - 1]) == total if e else True:
                for kk in ep:
                    if ep[kk] == e and kk not in waiting:
                        due[kk] = now + 1 + gap
        else:
            t = rng.randint(0, think)
            if rng.random() < straggle:
                t += rng.randint(think, 4 * think + 10)
            due[k] = now + 1 + t

    for k in ep:
        schedule(k, 0)

    def gen():
        for i, u in enumerate(units):
            yield u.participants.eq(masks[i])
        yield
        now = 1
        enter_hi = [False] * n
        finished_at = None
        while True:
            yield from net.step(now)
            # Done pulses.
            for i, u in enumerate(units):
                if (yield u.done):
                    c = yield u.done_ctx
                    k = (i, c)
                    assert k in waiting, f"done for node {i} ctx {c} that did not enter"
                    e = ep[k]
                    assert now > last_enter[e] and entered[e] == total, \
                        f"episode {e}: done at {now} before the last enter"
                    waiting.discard(k)
                    dones[e].append(now)
                    done_count[k] += 1
                    ep[k] = e + 1
                    if e + 1 < episodes:
                        schedule(k, now)
            # Enters (one per node per cycle).
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
            # Garbage: malformed or unexpected packets that the units must drop.
            if garbage_rate and finished_at is None and rng.random() < garbage_rate:
                d = rng.randrange(n)
                kind = rng.randrange(5)
                kids = tree_children(d, n, radix_log2)
                if kind == 0:
                    w = pkt(d, rng.randrange(n), tag=0, length=8, payload=[0x1234])
                elif kind == 1:
                    w = pkt(d, rng.randrange(n), type=int(PT.DATA))
                elif kind == 2:
                    w = pkt((d + 1) % P.MAX_NODES, d, tag=0)     # for another node
                elif kind == 3:  # arrive from a node that is not a child
                    w = pkt(d, rng.choice([x for x in range(n + 5) if x not in kids]), tag=ep.get((d, parts[d][0]), 0))
                else:  # release with a tag from no episode (upper tag bits set)
                    w = pkt(d, tree_parent(d, radix_log2) or 0, release=True, tag=1 << 40)
                garbage[d][0 if kind <= 2 else 1] += 1
                net.inject(d, w, now + rng.randint(1, 10))
            if finished_at is None and all(v == episodes for v in done_count.values()):
                finished_at = now
            if finished_at is not None and now > finished_at + 40 and not net.busy():
                break
            assert now < max_cycles, "barrier wedged"
            yield
            now += 1
        for _ in range(3):  # let the last accepted words reach the counters
            yield
        for u in units:
            cnt = {}
            for name in BarrierUnit.COUNTERS:
                cnt[name] = yield getattr(u, name)
            res.counters.append(cnt)
            assert (yield u.done) == 0
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
    return res


def expected_packets(i, n, r, episodes):
    """(tx, rx) barrier packets of node i over ``episodes`` episodes."""
    kids = len(tree_children(i, n, r))
    up = 0 if i == 0 else 1
    return (up + kids) * episodes, (up + kids) * episodes


def check_counters(res, n, r):
    for i, c in enumerate(res.counters):
        tx, rx = expected_packets(i, n, r, res.episodes)
        fmt, proto = res.garbage[i]
        assert c["episodes"] == res.episodes
        assert c["tx_packets"] == tx
        assert c["rx_packets"] == rx + fmt + proto
        assert c["err_format"] == fmt
        assert c["err_protocol"] == proto
        assert c["enter_merged"] == res.dups[i]
        assert c["enter_dropped"] == 0


# ---------------------------------------------------------------------------
# Cluster tests
# ---------------------------------------------------------------------------

EPISODES = {1: 30, 2: 25, 3: 20, 5: 12, 8: 8, 16: 5}


@pytest.mark.parametrize("radix_log2", [1, 2])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, pytest.param(16, marks=pytest.mark.slow)])
def test_cluster_random(n, radix_log2):
    """Random enter times, random network delays and back-pressure, several contexts per
    node, duplicate enters: every context gets exactly one done per episode, never before
    the last enter of that episode, and the counters add up."""
    eps = EPISODES[n]
    res = run_cluster(n, radix_log2, episodes=eps, seed=100 * n + radix_log2, max_delay=12,
                      backpressure=0.2, dup_rate=0.1)
    assert res.episodes == eps
    check_counters(res, n, radix_log2)
    assert res.delivered == sum(expected_packets(i, n, radix_log2, eps)[1] for i in range(n))
    assert sum(res.dups) > 0 or n == 1
    print(f"\nN={n} k={1 << radix_log2}: {eps} episodes in {res.cycles} cycles, "
          f"latency last enter -> last done min {min(res.latencies)} "
          f"max {max(res.latencies)} cycles")


@pytest.mark.parametrize("n,radix_log2", [(5, 1), (8, 2)])
def test_cluster_with_garbage(n, radix_log2):
    """Malformed and unexpected packets injected at random all over the cluster are
    counted and dropped; the barrier keeps its guarantees."""
    eps = 12
    res = run_cluster(n, radix_log2, episodes=eps, seed=7 + n, max_delay=8,
                      garbage_rate=0.08, multi_ctx=False)
    g = [sum(x) for x in res.garbage]
    assert sum(g) > 20
    check_counters(res, n, radix_log2)


# ---------------------------------------------------------------------------
# Latency with an ideal network (fixed per-packet delay)
# ---------------------------------------------------------------------------


def model_latency(n, r, delay):
    """(first done, last done) in cycles after a common enter of every node, for an ideal
    network presenting a packet ``delay`` cycles after its last word left the sender.

    The per-step costs are the unit's (docs/architecture.md, "Barrier latency"):
    gathered 1 cycle after the enter or after the last child's arrive (its last word);
    the arrive's words leave 1 and 2 cycles after gathered; a sink takes one packet at
    a time, 2 cycles each; the root completes when gathered, and its j-th release
    (0-based) leaves 2 + 2j cycles after completion; a node completes in the cycle the
    release's last word arrives; done follows 1 cycle after completion.
    """
    if n == 1:
        return 2, 2

    def gathered(i):
        free, last = 0, 0
        for at in sorted(gathered(c) + 2 + delay for c in tree_children(i, n, r)):
            start = max(at, free)
            last, free = start + 1, start + 2
        return max(1, last + 1)

    complete = {0: gathered(0)}
    order = [0]
    for i in order:
        for j, c in enumerate(tree_children(i, n, r)):
            complete[c] = complete[i] + 2 + 2 * j + delay + 1
            order.append(c)
    return min(complete.values()) + 1, max(complete.values()) + 1


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
@pytest.mark.parametrize("radix_log2", [1, 2, 3])
@pytest.mark.parametrize("delay", [1, 20])
def test_latency_ideal_network(n, radix_log2, delay):
    """All nodes enter in the same cycle: first and last done come exactly when the
    latency model says, in every episode."""
    res = run_cluster(n, radix_log2, episodes=2, fixed_delay=delay, all_at_once=True,
                      multi_ctx=False, seed=n, gap=2)
    check_counters(res, n, radix_log2)
    first, last = model_latency(n, radix_log2, delay)
    print(f"\nLAT N={n} k={1 << radix_log2} delay={delay}: last enter -> last done "
          f"{res.latencies} first done {res.first_done}")
    assert res.latencies == [last] * 2
    assert res.first_done == [first] * 2


# ---------------------------------------------------------------------------
# One unit, driven directly: exact packets, semantics, bad input
# ---------------------------------------------------------------------------


class Bench:
    """One BarrierUnit; the test plays its parent, children and host.

    A passive monitor keeps ``source.ready`` high and records every packet leaving
    ``source`` (as a header dict + word list) and every ``done`` pulse (ctx, cycle).
    """

    def __init__(self, node_id, nodes, radix_log2=1, n_ctx=4, **kw):
        self.u = BarrierUnit(n_ctx=n_ctx, radix_log2=radix_log2, **kw)
        self.node_id, self.nodes = node_id, nodes
        self.tx = []
        self.done = []
        self.enters = []   # (ctx, cycle) as seen by the unit
        self.cycle = 0

    def run(self, body):
        u = self.u

        def main():
            yield u.node_id.eq(self.node_id)
            yield u.nodes.eq(self.nodes)
            yield u.source.ready.eq(1)
            yield
            yield
            yield from body(self)

        def monitor():
            yield "passive"
            words = []
            while True:
                if (yield u.source.valid) and (yield u.source.ready):
                    words.append((yield u.source.data))
                    assert (yield u.source.first) == (len(words) == 1)
                    if (yield u.source.last):
                        h = P.unpack_header(b"".join(w.to_bytes(8, "little") for w in words[:2]))
                        self.tx.append((h, words))
                        words = []
                if (yield u.done):
                    self.done.append(((yield u.done_ctx), self.cycle))
                if (yield u.enter):
                    self.enters.append(((yield u.enter_ctx), self.cycle))
                yield
                self.cycle += 1

        run_simulation(u, [main(), monitor()])

    # -- helpers used inside body generators --
    def send(self, words, error=False, first=True, last=True):
        u = self.u
        for i, w in enumerate(words):
            yield u.sink.valid.eq(1)
            yield u.sink.data.eq(w)
            yield u.sink.first.eq(first and i == 0)
            yield u.sink.last.eq(last and i == len(words) - 1)
            yield u.sink.error.eq(error and i == len(words) - 1)
            yield
            assert (yield u.sink.ready) == 1
        yield u.sink.valid.eq(0)
        yield u.sink.last.eq(0)
        yield u.sink.error.eq(0)
        yield
        yield

    def enter(self, ctx):
        yield self.u.enter.eq(1)
        yield self.u.enter_ctx.eq(ctx)
        yield
        yield self.u.enter.eq(0)
        yield
        yield

    def wait(self, n=8):
        for _ in range(n):
            yield

    def counters(self):
        out = {}
        for name in BarrierUnit.COUNTERS:
            out[name] = yield getattr(self.u, name)
        return out


def test_unit_exact_packets():
    """Node 1 of 8 with fan-out 2 (parent 0, children 3 and 4): the arrive and the two
    releases have exactly the headers of paranic.spec.protocol; done only after the release."""
    b = Bench(1, 8, radix_log2=1)

    def body(b):
        yield from b.enter(2)
        yield from b.send(pkt(1, 3, tag=0))
        yield from b.wait()
        assert b.tx == [] and b.done == []
        yield from b.send(pkt(1, 4, tag=0))
        yield from b.wait()
        assert [w for _, w in b.tx] == [pkt(0, 1, tag=0)]
        h = b.tx[0][0]
        assert (h["type"], h["flags"], h["length"], h["dst_ctx"], h["src_ctx"], h["vc"]) == \
            (BAR, 0, 0, 0, 0, 0)
        assert b.done == []
        t0 = b.cycle
        yield from b.send(pkt(1, 0, release=True, tag=0))
        yield from b.wait()
        assert [w for _, w in b.tx[1:]] == [pkt(3, 1, True, 0), pkt(4, 1, True, 0)]
        assert [c for c, _ in b.done] == [2]
        assert (yield b.u.episode) == 1
        # Second episode: children first, host last; tags are the episode number.
        yield from b.send(pkt(1, 4, tag=1))
        yield from b.send(pkt(1, 3, tag=1))
        yield from b.wait()
        assert len(b.tx) == 3
        yield from b.enter(0)
        yield from b.wait()
        assert [w for _, w in b.tx[3:]] == [pkt(0, 1, tag=1)]
        yield from b.send(pkt(1, 0, release=True, tag=1))
        yield from b.wait()
        assert [w for _, w in b.tx[4:]] == [pkt(3, 1, True, 1), pkt(4, 1, True, 1)]
        assert [c for c, _ in b.done] == [2, 0]
        c = yield from b.counters()
        assert c == dict(episodes=2, tx_packets=6, rx_packets=6, err_format=0, err_protocol=0,
                         enter_merged=0, enter_dropped=0)
        assert t0 < b.done[0][1]

    b.run(body)


def test_unit_bad_input_counted_and_dropped():
    """Malformed and unexpected packets are counted (format / protocol) and change
    nothing: no packet out, no done; afterwards the barrier works normally."""
    b = Bench(1, 8, radix_log2=1)

    def body(b):
        fmt = [
            pkt(1, 3, length=8, payload=[0xdead]),          # arrive with a payload
            pkt(1, 3, length=8),                            # length field set, no payload
            pkt(1, 3, payload=[0]),                         # extra word, length 0
            pkt(1, 0, release=True, payload=[0, 1, 2, 3]),  # release with payload
            pkt(1, 3)[:1],                                  # one word only
            pkt(1, 3, type=int(PT.DATA)),                   # not a barrier packet
            pkt(1, 3, type=int(PT.CONTROL)),
            pkt(2, 3),                                      # for another node
        ]
        for w in fmt:
            yield from b.send(w)
        yield from b.send(pkt(1, 3), error=True)           # error flag on the last beat
        nfmt = len(fmt) + 1
        proto = [
            pkt(1, 5),                                      # arrive from a non-child
            pkt(1, 2),                                      # arrive from a sibling
            pkt(1, 0),                                      # arrive from the parent
            pkt(1, 1),                                      # arrive from itself
            pkt(1, 3, release=True),                        # release from a child
            pkt(1, 0, release=True),                        # release not awaited
            pkt(1, 3, tag=1),                               # arrive of another episode
            pkt(1, 3, tag=1 << 32),                         # tag upper bits set
        ]
        for w in proto:
            yield from b.send(w)
        nproto = len(proto)
        yield from b.wait()
        assert b.tx == [] and b.done == []
        c = yield from b.counters()
        assert (c["err_format"], c["err_protocol"], c["rx_packets"]) == (nfmt, nproto, nfmt + nproto)
        assert (yield b.u.kids) == 0
        # Duplicate arrive: the first counts, the second is an error.
        yield from b.send(pkt(1, 3))
        yield from b.send(pkt(1, 3))
        yield from b.send(pkt(1, 4))
        yield from b.send(pkt(1, 0, release=True))          # still not awaited (host not in)
        nproto += 2
        # A packet cut short by a new `first` is abandoned without an event.
        yield from b.send([0x55], last=False)
        yield from b.enter(1)
        yield from b.wait()
        assert [w for _, w in b.tx] == [pkt(0, 1)]
        # Waiting for release now: wrong episode, wrong sender.
        yield from b.send(pkt(1, 0, release=True, tag=7))
        yield from b.send(pkt(1, 2, release=True))
        yield from b.send(pkt(1, 4, release=True))
        nproto += 3
        yield from b.wait()
        assert b.done == [] and len(b.tx) == 1
        yield from b.send(pkt(1, 0, release=True))
        yield from b.wait()
        assert [c for c, _ in b.done] == [1]
        assert [w for _, w in b.tx[1:]] == [pkt(3, 1, True), pkt(4, 1, True)]
        c = yield from b.counters()
        assert c["err_format"] == nfmt and c["err_protocol"] == nproto
        assert c["episodes"] == 1 and c["tx_packets"] == 3
        assert c["rx_packets"] == nfmt + nproto + 3

    b.run(body)


def test_unit_random_garbage_never_wedges():
    """10k cycles of random words, framing and back-pressure-free garbage into the sink:
    the sink never stalls, nothing is sent and no done appears; then a barrier works."""
    b = Bench(1, 8, radix_log2=1)
    rng = random.Random(5)

    def body(b):
        u = b.u
        n_last = 0
        for _ in range(3000):
            v = rng.random() < 0.7
            last = rng.random() < 0.3
            yield u.sink.valid.eq(v)
            yield u.sink.first.eq(rng.random() < 0.3)
            yield u.sink.last.eq(last)
            yield u.sink.error.eq(rng.random() < 0.1)
            w = rng.getrandbits(64)
            if rng.random() < 0.3:  # make word 0 look like a barrier header for node 1
                w = pkt(1, rng.randrange(8), release=rng.random() < 0.5,
                        tag=rng.getrandbits(8))[0] | (rng.getrandbits(1) << 40)
            yield u.sink.data.eq(w)
            yield
            assert (yield u.sink.ready) == 1
            n_last += v and last
        yield u.sink.valid.eq(0)
        yield u.sink.last.eq(0)
        yield u.sink.error.eq(0)
        yield from b.wait()
        c = yield from b.counters()
        assert c["rx_packets"] == n_last
        assert c["err_format"] + c["err_protocol"] == n_last - 0  # nothing matched by chance
        assert b.tx == [] and b.done == []
        assert (yield u.kids) == 0
        yield from b.send(pkt(1, 3))
        yield from b.send(pkt(1, 4))
        yield from b.enter(3)
        yield from b.send(pkt(1, 0, release=True))
        yield from b.wait()
        assert [c for c, _ in b.done] == [3]
        assert len(b.tx) == 3

    b.run(body)


def test_unit_context_semantics():
    """Several contexts: a repeated enter counts once; an enter after the arrive was
    sent joins the next episode; every context of an episode gets its own done."""
    b = Bench(1, 8, radix_log2=1)

    def body(b):
        yield from b.enter(0)
        yield from b.enter(0)            # counts once
        yield from b.enter(1)            # joins episode 0 (arrive not sent yet)
        yield from b.send(pkt(1, 3))
        yield from b.send(pkt(1, 4))
        yield from b.wait()
        assert [w for _, w in b.tx] == [pkt(0, 1, tag=0)]
        yield from b.enter(2)            # arrive already sent: episode 1
        yield from b.enter(1)            # still outstanding: counts once
        yield from b.send(pkt(1, 0, release=True, tag=0))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0, 1]
        assert b.done[1][1] == b.done[0][1] + 1     # one done per cycle
        assert (yield b.u.cur_mask) == 0b100
        # Episode 1 (ctx 2 already in): the children's arrivals send the arrive at once.
        yield from b.send(pkt(1, 3, tag=1))
        yield from b.send(pkt(1, 4, tag=1))
        yield from b.wait()
        assert [w for _, w in b.tx[3:]] == [pkt(0, 1, tag=1)]
        yield from b.send(pkt(1, 0, release=True, tag=1))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0, 1, 2]
        c = yield from b.counters()
        assert c["enter_merged"] == 2 and c["episodes"] == 2 and c["enter_dropped"] == 0

    b.run(body)


def test_unit_participants_mask():
    """With a participants mask the node counts as entered when all of them entered;
    other contexts that entered meanwhile ride along."""
    b = Bench(0, 1, n_ctx=4)

    def body(b):
        yield b.u.participants.eq(0b0101)
        yield from b.enter(0)
        yield from b.enter(1)
        yield from b.wait()
        assert b.done == []
        yield from b.enter(2)
        yield from b.wait()
        assert [c for c, _ in b.done] == [0, 1, 2]
        assert b.tx == []

    b.run(body)


def test_unit_single_node_and_non_member():
    """nodes == 1: done 2 cycles after the enter, for each of 16 contexts entering one per
    cycle. A node outside 0..nodes-1 completes alone and sends nothing."""
    for node_id, nodes in ((0, 1), (9, 8)):
        b = Bench(node_id, nodes, n_ctx=16)

        def body(b):
            u = b.u
            for c in range(16):
                yield u.enter.eq(1)
                yield u.enter_ctx.eq(c)
                yield
            yield u.enter.eq(0)
            yield from b.wait()
            assert [c for c, _ in b.done] == list(range(16))
            assert [c for c, _ in b.enters] == list(range(16))
            assert [t for _, t in b.done] == [t + 2 for _, t in b.enters]
            assert b.tx == []
            c = yield from b.counters()
            assert c["episodes"] == 16

        b.run(body)


def test_unit_disable_and_bad_ctx():
    """enable=0 drops enters (counted) and received packets (protocol errors) and resets
    the episode; enter_ctx >= n_ctx is dropped; re-enabled, the unit works from episode 0."""
    b = Bench(1, 8, radix_log2=1, n_ctx=4)

    def body(b):
        u = b.u
        yield from b.send(pkt(1, 3))
        yield from b.enter(0)
        yield from b.send(pkt(1, 4))
        yield from b.send(pkt(1, 0, release=True))
        yield from b.enter(1)                    # joins episode 1
        yield from b.send(pkt(1, 3, tag=1))
        assert (yield u.episode) == 1 and (yield u.kids) == 1
        yield u.enable.eq(0)
        yield
        yield from b.wait(2)
        assert (yield u.episode) == 0 and (yield u.kids) == 0 and (yield u.cur_mask) == 0
        yield from b.enter(2)
        yield from b.send(pkt(1, 4, tag=0))
        yield from b.wait()
        yield u.enable.eq(1)
        yield from b.enter(7)                    # no such context
        yield from b.wait()
        c = yield from b.counters()
        assert c["enter_dropped"] == 2 and c["err_protocol"] == 1
        ntx = len(b.tx)
        assert [c for c, _ in b.done] == [0]
        yield from b.send(pkt(1, 3, tag=0))
        yield from b.send(pkt(1, 4, tag=0))
        yield from b.enter(3)
        yield from b.send(pkt(1, 0, release=True, tag=0))
        yield from b.wait()
        assert [c for c, _ in b.done] == [0, 3]
        assert [w for _, w in b.tx[ntx:]] == [pkt(0, 1, tag=0), pkt(3, 1, True, 0),
                                             pkt(4, 1, True, 0)]

    b.run(body)


def test_unit_source_backpressure():
    """Releases wait for source.ready and go out whole, in child order."""
    b = Bench(0, 5, radix_log2=2)

    def body(b):
        u = b.u
        yield u.source.ready.eq(0)
        for c in (1, 2, 3, 4):
            yield from b.send(pkt(0, c))
        yield from b.enter(0)
        yield from b.wait(20)
        assert b.tx == []
        assert (yield u.source.valid) == 1
        rng = random.Random(3)
        for _ in range(12):
            yield u.source.ready.eq(rng.random() < 0.5)
            yield
        assert 0 < len(b.tx) < 4
        yield u.source.ready.eq(1)
        yield from b.wait(20)
        assert [w for _, w in b.tx] == [pkt(c, 0, True, 0) for c in (1, 2, 3, 4)]
        assert [c for c, _ in b.done] == [0]

    b.run(body)


# ---------------------------------------------------------------------------
# Long runs
# ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("n,radix_log2,delay", [(32, 2, 30), (64, 3, 30), (13, 0, 5)])
def test_latency_large_slow(n, radix_log2, delay):
    """The latency model holds for larger trees (and for a chain, fan-out 1)."""
    res = run_cluster(n, radix_log2, episodes=2, fixed_delay=delay, all_at_once=True,
                      multi_ctx=False, seed=n, gap=2)
    check_counters(res, n, radix_log2)
    first, last = model_latency(n, radix_log2, delay)
    print(f"\nLAT N={n} k={1 << radix_log2} delay={delay}: {res.latencies} (model {last})")
    assert res.latencies == [last] * 2 and res.first_done == [first] * 2


@pytest.mark.slow
@pytest.mark.parametrize("n,radix_log2,seed,episodes", [(16, 2, 1, 30), (12, 3, 2, 30),
                                                        (7, 1, 4, 80)])
def test_cluster_random_long_slow(n, radix_log2, seed, episodes):
    """Many episodes with back-pressure, long delays, duplicates and garbage."""
    res = run_cluster(n, radix_log2, episodes=episodes, seed=seed, max_delay=40,
                      backpressure=0.3, dup_rate=0.05, garbage_rate=0.03, think=30)
    check_counters(res, n, radix_log2)
    print(f"\nN={n} k={1 << radix_log2}: {episodes} episodes in {res.cycles} cycles, "
          f"latency min {min(res.latencies)} max {max(res.latencies)}")
