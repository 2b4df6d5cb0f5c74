"""Migen simulations of link faults: a LinkLayer pair over SimPhy wires whose cable is
cut, whose one direction is hammered with errors, or which software takes down.

Each test checks the fault rules of docs/link-layer.md ("Link faults"): both ends go
DOWN (loss of signal within ``los_timeout`` + a few cycles, or the replay limit), the
replay buffer keeps exactly the frames the far end did not acknowledge and the
evacuation port reads them back word for word, the frames the far end never got are
exactly ``[rx_expect of the far end, evac_end)``, and after ``restart`` on both ends
the link trains again only once the receive buffers are empty, with full credits,
delivering the re-sent frames and new traffic exactly once and in order.
"""

from __future__ import annotations

import random

from migen import Module, run_simulation

from paranic.hw.common import LinkPortIf
from paranic.sim.channels import LinkChannel
from paranic.spec import protocol as P
from paranic.spec.link import SEQ_BITS, LinkDownReason, LinkState

MTU = 64
DELAY = 6
TIMEOUT = 160
BUF = 64
LOS = 200
SEQ_MOD = 1 << SEQ_BITS


def make_packet(rng: random.Random, length: int, tag: int) -> list[int]:
    h0, h1 = P.header_words(dst_node=2, src_node=1, length=length, tag=tag)
    return [h0, h1] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


class RouterPort:
    """One router port as the Router drives it: a packet starts only while the port is
    up and the link has room (``tx_room``) and the far buffer has credits; credits are
    held at full while the port is not up; ``buf_empty`` tells the link whether the
    input buffer (committed packets not yet drained, or one arriving) is empty."""

    def __init__(self, port, packets, rng: random.Random, drain: float = 1.0, gap: float = 0.05):
        self.port = port
        self.to_send = list(packets)
        self.sent: list[list[int]] = []     # packets the link took completely
        self.credits = BUF
        self.rng = rng
        self.drain = drain
        self.gap = gap
        self.cur: list[int] | None = None
        self.idx = 0
        self.received: list[list[int]] = []
        self.errored = 0
        self.partial: list[int] = []
        self.occupancy = 0

    def step(self):
        p = self.port
        up = yield p.up
        if (yield p.source.valid) and (yield p.source.ready):
            self.idx += 1
            if self.idx == len(self.cur):
                self.sent.append(self.cur)
                self.cur = None
        if not up:
            self.credits = BUF
        if self.cur is None and self.to_send and up and (yield p.tx_room) \
                and self.credits >= len(self.to_send[0]):
            self.cur = self.to_send.pop(0)
            self.credits -= len(self.cur)
            self.idx = 0
        if self.cur is not None and (self.idx == 0 or self.rng.random() >= self.gap):
            yield p.source.valid.eq(1)
            yield p.source.data.eq(self.cur[self.idx])
            yield p.source.first.eq(self.idx == 0)
            yield p.source.last.eq(self.idx == len(self.cur) - 1)
        else:
            yield p.source.valid.eq(0)
        if (yield p.credit_valid):
            self.credits += yield p.credit_words
            assert self.credits <= BUF, "more credits than buffer"
        yield p.sink.ready.eq(1)
        if (yield p.sink.valid):
            if (yield p.sink.first):
                assert not self.partial
                # As the router's cut-through buffer: the SOF's length is reserved at
                # the first word, and every packet, good or bad, is drained whole.
                self.occupancy += yield p.sink_words
                assert self.occupancy <= BUF, "buffer overrun"
            self.partial.append((yield p.sink.data))
            if (yield p.sink.last):
                if (yield p.sink.error):
                    self.errored += 1
                else:
                    self.received.append(self.partial)
                self.partial = []
        yield p.buf_free.eq(BUF - self.occupancy)
        if self.occupancy and self.rng.random() < self.drain:
            self.occupancy -= 1
            yield p.drained.eq(1)
        else:
            yield p.drained.eq(0)
        yield p.buf_empty.eq(self.occupancy == 0 and not self.partial)


class Pair(Module):
    def __init__(self, seed: int = 5, **kw):
        self.a = LinkPortIf()
        self.b = LinkPortIf()
        self.submodules.ch = LinkChannel(self.a, self.b, delay=DELAY, seed=seed, mtu=MTU,
                                         ack_timeout=TIMEOUT, los_timeout=LOS, **kw)


class Bench:
    """A Pair, two RouterPorts with ``n`` random packets each way, and a cycle loop
    with per-cycle hooks."""

    def __init__(self, n: int = 40, seed: int = 1, drain_b: float = 0.4, **kw):
        self.top = Pair(**kw)
        rng = random.Random(seed)
        self.pa = [make_packet(rng, rng.choice([0, 8, MTU, rng.randrange(MTU + 1)]), i) for i in range(n)]
        self.pb = [make_packet(rng, rng.choice([0, 8, MTU, rng.randrange(MTU + 1)]), 100 + i)
                   for i in range(n)]
        self.A = RouterPort(self.top.a, self.pa, random.Random(seed + 1), drain=0.9)
        self.B = RouterPort(self.top.b, self.pb, random.Random(seed + 2), drain=drain_b)
        self.la, self.lb = self.top.ch.link_a, self.top.ch.link_b
        self.cycle = 0
        self.noise_ab = 0.0   # probability that a word on the a->b wire gets a bit flipped
        self.noise_rng = random.Random(seed + 3)

    def tick(self):
        yield from self.A.step()
        yield from self.B.step()
        flip = 0
        if self.noise_ab and self.noise_rng.random() < self.noise_ab:
            flip = 1 << self.noise_rng.randrange(65)
        yield self.top.ch.phy_ab.flip_mask.eq(flip)
        yield
        self.cycle += 1

    def until(self, cond, limit: int, what: str):
        """Tick until the generator function ``cond()`` returns True; at most ``limit`` cycles."""
        for _ in range(limit):
            if (yield from cond()):
                return
            yield from self.tick()
        raise AssertionError(f"{what}: not after {limit} cycles (cycle {self.cycle})")

    def state(self, link):
        return (yield link.link_state)

    def both(self, state):
        def cond():
            return (yield self.la.link_state) == state and (yield self.lb.link_state) == state
        return cond

    def read_evac(self, link, seq: int) -> list[int]:
        """Frame ``seq`` from the evacuation port, one word at a time as software would."""
        yield link.evac_seq.eq(seq % SEQ_MOD)
        yield link.evac_word.eq(0)
        yield from self.tick()
        yield from self.tick()
        n = yield link.evac_len
        words = []
        for w in range(n):
            yield link.evac_word.eq(w)
            yield from self.tick()
            yield from self.tick()
            words.append((yield link.evac_data))
        return words

    def check_frozen(self, tx_port: RouterPort, rx_port: RouterPort, tx_link, rx_link) -> list[list[int]]:
        """One direction after DOWN: returns the packets the far end never got."""
        first = yield tx_link.evac_first
        end = yield tx_link.evac_end
        expect = yield rx_link.rx_expect
        window = (end - first) % SEQ_MOD
        delivered_unacked = (expect - first) % SEQ_MOD
        assert delivered_unacked <= window, (first, expect, end)
        # No sequence wrap in these runs: seq k is the k-th packet taken.
        assert end == len(tx_port.sent) == (yield tx_link.tx_packets), (end, len(tx_port.sent))
        assert tx_port.cur is None, "a packet the link had started was not completed"
        # The far end got exactly the packets before rx_expect, in order.
        assert rx_port.received == tx_port.sent[:expect]
        # Every frame in the replay buffer reads back exactly.
        for seq in range(first, first + window):
            assert (yield from self.read_evac(tx_link, seq)) == tx_port.sent[seq], seq
        return tx_port.sent[expect:end]

    def restart_and_finish(self, lost_a: list, lost_b: list, stagger: int = 37, limit: int = 20000,
                           b_drain_after: int = 0, b_drain: float = 0.5):
        """Mend, restart both ends (``stagger`` cycles apart), re-send what was never
        delivered ahead of the rest, and check exact delivery with full credits.
        ``b_drain_after``: B's buffer (not drained since the fault) starts draining
        only this many cycles after the restarts; until then neither end may come up."""
        A, B = self.A, self.B
        yield self.top.ch.phy_ab.cut.eq(0)
        yield self.top.ch.phy_ba.cut.eq(0)
        self.noise_ab = 0.0
        A.to_send[:0] = lost_a
        B.to_send[:0] = lost_b
        yield self.la.restart.eq(1)
        yield from self.tick()
        yield self.la.restart.eq(0)
        yield from self.tick()
        assert (yield self.la.link_state) == LinkState.TRAINING
        assert (yield self.la.down_reason) == LinkDownReason.NONE
        for _ in range(stagger):
            yield from self.tick()
        yield self.lb.restart.eq(1)
        yield from self.tick()
        yield self.lb.restart.eq(0)
        if b_drain_after:
            assert B.occupancy > 0
            for _ in range(b_drain_after):
                yield from self.tick()
                assert (yield self.lb.link_state) == LinkState.TRAINING
                assert (yield self.la.link_state) in (LinkState.TRAINING, LinkState.SEEN)
            assert (yield self.la.link_state) == LinkState.SEEN   # it heard b, b waits
            B.drain = b_drain
        # Training completes only once each end's receive buffer is empty.
        saw_seen = {"a": False, "b": False}
        for _ in range(limit):
            for side, link, port in (("a", self.la, A), ("b", self.lb, B)):
                st = yield link.link_state
                if st in (LinkState.SEEN, LinkState.UP) and not saw_seen[side]:
                    saw_seen[side] = True
                    assert port.occupancy == 0 and not port.partial, f"{side} trained with a full buffer"
            if len(B.received) == len(self.pa) and len(A.received) == len(self.pb) \
                    and A.credits == BUF and B.credits == BUF and not A.occupancy and not B.occupancy:
                break
            yield from self.tick()
        else:
            raise AssertionError(f"not finished after restart: a got {len(A.received)}, b got "
                                 f"{len(B.received)}, credits {A.credits} {B.credits}")
        # Counters count across the restart: every packet taken, the re-sent ones twice.
        assert (yield self.la.tx_packets) == len(self.pa) + len(lost_a)
        assert (yield self.lb.tx_packets) == len(self.pb) + len(lost_b)
        assert (yield self.lb.rx_packets) == len(self.pa) and (yield self.la.rx_packets) == len(self.pb)
        assert B.received == self.pa, "a->b: lost, duplicated or reordered across the fault"
        assert A.received == self.pb, "b->a: lost, duplicated or reordered across the fault"
        for link in (self.la, self.lb):
            assert (yield link.link_state) == LinkState.UP
            assert (yield link.downs) == 1
            assert (yield link.rx_overflows) == 0


def _run(bench: Bench, body) -> None:
    run_simulation(bench.top, body())


def test_cable_cut_both_ends_down_evacuate_restart():
    """Cut both directions mid-traffic: both ends DOWN by loss of signal within
    los_timeout + a few cycles; frozen frames match the far end's rx_expect and read
    back exactly; restart delivers everything exactly once with full credits."""
    b = Bench(n=40, seed=1, drain_b=0.3)
    res = {}

    def body():
        yield from b.until(b.both(LinkState.UP), 200, "training")
        yield from b.until(lambda: (yield from _true(len(b.A.sent) >= 8 and len(b.B.sent) >= 8)),
                           3000, "traffic")
        cut_at = b.cycle
        b.B.drain = 0.0   # B's buffer keeps what it holds until after the restart
        yield b.top.ch.phy_ab.cut.eq(1)
        yield b.top.ch.phy_ba.cut.eq(1)
        down_at = {}
        for _ in range(LOS + 100):
            yield from b.tick()
            for side, link in (("a", b.la), ("b", b.lb)):
                if side not in down_at and (yield link.link_state) == LinkState.DOWN:
                    down_at[side] = b.cycle - cut_at
        res["down_at"] = down_at
        for link in (b.la, b.lb):
            assert (yield link.down_reason) == LinkDownReason.LOS
            assert (yield link.downs) == 1
            assert (yield link.up) == 0
        # Let a packet the router was handing over complete, then check nothing is sent.
        for _ in range(50):
            yield from b.tick()
            assert (yield b.la.phy_tx.valid) == 0 and (yield b.lb.phy_tx.valid) == 0
        lost_a = yield from b.check_frozen(b.A, b.B, b.la, b.lb)
        lost_b = yield from b.check_frozen(b.B, b.A, b.lb, b.la)
        res["lost"] = (len(lost_a), len(lost_b))
        res["occ_b"] = b.B.occupancy
        yield from b.restart_and_finish(lost_a, lost_b, b_drain_after=300)

    _run(b, body)
    for side in ("a", "b"):
        # The last good word may precede the cut by up to a frame; DOWN follows
        # los_timeout cycles after it.
        assert LOS - 16 <= res["down_at"][side] <= LOS + 4, res
    assert res["lost"][0] > 0 and res["lost"][1] > 0 and res["occ_b"] > 0, res


def _true(v):
    """A generator function returning ``v`` (for ``Bench.until`` conditions)."""
    return v
    yield  # pragma: no cover


def test_replay_limit_on_one_direction():
    """Half the words a->b hit: a's frames never get through, so a exceeds
    max_replays (default 32) rounds without ACK progress and goes DOWN (replay limit);
    b then loses a's signal and goes DOWN too. Nothing acknowledged is kept, nothing
    unacknowledged is lost; restart at BER 0 finishes the traffic."""
    b = Bench(n=30, seed=3, drain_b=0.8)
    res = {}

    def body():
        yield from b.until(b.both(LinkState.UP), 200, "training")
        yield from b.until(lambda: (yield from _true(len(b.A.sent) >= 5)), 3000, "traffic")
        b.noise_ab = 0.5
        yield from b.until(lambda: (yield from _true((yield b.la.link_state) == LinkState.DOWN)),
                           20000, "replay limit")
        res["replays"] = yield b.la.replays
        res["rounds"] = (yield b.la.naks) + (yield b.la.timeouts)
        assert (yield b.la.down_reason) == LinkDownReason.REPLAY_LIMIT
        yield from b.until(lambda: (yield from _true((yield b.lb.link_state) == LinkState.DOWN)),
                           LOS + 50, "far end loss of signal")
        assert (yield b.lb.down_reason) == LinkDownReason.LOS
        for _ in range(50):
            yield from b.tick()
        lost_a = yield from b.check_frozen(b.A, b.B, b.la, b.lb)
        lost_b = yield from b.check_frozen(b.B, b.A, b.lb, b.la)
        res["lost"] = (len(lost_a), len(lost_b))
        yield from b.restart_and_finish(lost_a, lost_b, stagger=5)

    _run(b, body)
    assert res["rounds"] > 32, res
    assert res["lost"][0] > 0, res


def test_take_down_by_software_and_restart_order():
    """take_down: this end DOWN with reason 3 at once, the far end by loss of signal;
    restart is ignored while not DOWN; restarting the far end first works too."""
    b = Bench(n=24, seed=7, drain_b=0.9)
    res = {}

    def body():
        yield from b.until(b.both(LinkState.UP), 200, "training")
        yield b.lb.restart.eq(1)   # not DOWN: ignored
        yield from b.tick()
        yield b.lb.restart.eq(0)
        yield from b.until(lambda: (yield from _true(len(b.B.sent) >= 6)), 3000, "traffic")
        assert (yield b.lb.link_state) == LinkState.UP
        yield b.lb.take_down.eq(1)
        yield from b.tick()
        yield b.lb.take_down.eq(0)
        yield from b.tick()
        assert (yield b.lb.link_state) == LinkState.DOWN
        assert (yield b.lb.down_reason) == LinkDownReason.SOFTWARE
        t0 = b.cycle
        yield from b.until(lambda: (yield from _true((yield b.la.link_state) == LinkState.DOWN)),
                           LOS + 50, "far end loss of signal")
        res["los_after"] = b.cycle - t0
        assert (yield b.la.down_reason) == LinkDownReason.LOS
        for _ in range(30):
            yield from b.tick()
        lost_a = yield from b.check_frozen(b.A, b.B, b.la, b.lb)
        lost_b = yield from b.check_frozen(b.B, b.A, b.lb, b.la)
        # Restart the far end first this time.
        b.la, b.lb = b.lb, b.la
        b.A, b.B = b.B, b.A
        b.pa, b.pb = b.pb, b.pa
        yield from b.restart_and_finish(lost_b, lost_a, stagger=300)

    _run(b, body)
    assert LOS <= res["los_after"] <= LOS + DELAY + 8, res
