"""The injection gate (hw/inject.py) in Migen simulation: rt stamping, hold at packet
boundaries, and ``idle`` against a router and a management port wired as in NicCore."""

from __future__ import annotations

import random

import pytest
from migen import Module
from migen.sim import passive, run_simulation
from litex.soc.interconnect import packet

from paranic.hw.inject import InjectionGate
from paranic.hw.mgmt import MgmtPort
from paranic.hw.router import Router
from paranic.spec import protocol as P

MTU = 64
Port = P.Port
RT = P.HEADER_FIELD["rt"].offset


def hpkt(tag, dst=1, rt=0, length=24, type_=P.PacketType.DATA):
    w0, _ = P.header_words(dst_node=dst, src_node=2, type=type_, length=length, rt=rt)
    rng = random.Random(tag)
    return [w0, tag] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def with_rt(words, rt):
    return [words[0] & ~(1 << RT) | (rt << RT)] + words[1:]


def wait(n):
    for _ in range(n):
        yield


def send(ep, packets, rng=None, log=None):
    """Drive packets into ``ep``; with ``rng``, random idle beats inside packets.
    ``log``: the cycle each packet's first word was offered is appended."""
    for words in packets:
        for i, w in enumerate(words):
            while rng is not None and rng.random() < 0.3:
                yield ep.valid.eq(0)
                yield
            yield ep.valid.eq(1)
            yield ep.data.eq(w)
            yield ep.first.eq(i == 0)
            yield ep.last.eq(i == len(words) - 1)
            yield
            while not (yield ep.ready):
                yield
        yield ep.valid.eq(0)


class Collector:
    """Takes packets from an endpoint (ready per ``self.ready``, or randomly)."""

    def __init__(self, ep, rng=None):
        self.ep, self.rng = ep, rng
        self.ready = True
        self.packets = []
        self.words = 0       # words taken so far
        self.gen = self._run()

    @passive
    def _run(self):
        cur = []
        while True:
            r = self.ready and (self.rng is None or self.rng.random() < 0.6)
            yield self.ep.ready.eq(int(r))
            yield
            if (yield self.ep.valid) and (yield self.ep.ready):
                cur.append((yield self.ep.data))
                self.words += 1
                if (yield self.ep.last):
                    self.packets.append(cur)
                    cur = []


# ---------------------------------------------------------------------------
# The gate alone

@pytest.mark.parametrize("s", [0, 1])
def test_stamps_rt_on_every_stream(s):
    """rt of header word 0 is the gate's set whatever the packet carried; nothing else
    changes, payload words with the rt bit set pass untouched."""
    g = InjectionGate(2)
    pk = [[hpkt(1, rt=0), hpkt(2, rt=1)], [hpkt(3, rt=1), hpkt(4, rt=0)]]
    for p in pk:                      # payload words with the rt bit set and clear
        p[0][2] |= 1 << RT
        p[1][2] &= ~(1 << RT)
    cols = [Collector(g.sources[i]) for i in range(2)]

    def main():
        yield g.set.eq(s)
        yield
        yield from send(g.sinks[0], pk[0])
        yield from send(g.sinks[1], pk[1])
        yield from wait(10)
    run_simulation(g, [main()] + [c.gen for c in cols])
    for i in range(2):
        assert cols[i].packets == [with_rt(p, s) for p in pk[i]]


def test_set_latched_when_the_header_is_offered():
    """A packet keeps the set it was offered with when set changes while its header
    waits for ready."""
    g = InjectionGate(1)
    col = Collector(g.sources[0])
    p = hpkt(5)

    def main():
        col.ready = False
        yield g.set.eq(1)
        yield from wait(5)           # the header is offered meanwhile
        yield g.set.eq(0)
        yield from wait(5)
        col.ready = True
        yield from wait(20)

    run_simulation(g, [main(), send(g.sinks[0], [p]), col.gen])
    assert col.packets == [with_rt(p, 1)]


def test_hold_at_packet_boundaries():
    """hold rises in the middle of a packet: that packet completes, the next does not
    start (no valid offered) until hold falls; then all pass, intact and in order.
    A header already offered when hold rises passes too (valid is never withdrawn)."""
    g = InjectionGate(2)
    rng = random.Random(1)
    pk = [[hpkt(0x100 + i, length=8 * (i % 5)) for i in range(40)],
          [hpkt(0x200 + i, length=8 * (i % 4)) for i in range(40)]]
    cols = [Collector(g.sources[i], rng=random.Random(10 + i)) for i in range(2)]
    res = {"offered_while_held": 0, "dropped_valid": 0}
    phase = {"held": False}

    @passive
    def watch():
        prev = [0, 0]
        while True:
            yield
            for i in range(2):
                v = yield g.sources[i].valid
                r = yield g.sources[i].ready
                first_word = (yield g._started0 if i == 0 else g._started1) == 0
                if phase["held"] and v and first_word:
                    res["offered_while_held"] += 1
                if prev[i] and not v:
                    res["dropped_valid"] += 1
                prev[i] = v and not r

    def main():
        yield from wait(30)
        for _ in range(3):
            yield g.hold.eq(1)
            yield
            # let what had started finish, then check that nothing new starts
            yield from wait(30)
            res.setdefault("at_hold", []).append([len(c.packets) for c in cols])
            phase["held"] = True
            mid = [c.words for c in cols]
            yield from wait(60)
            res.setdefault("after_hold", []).append([c.words for c in cols])
            res.setdefault("mid", []).append(mid)
            phase["held"] = False
            yield g.hold.eq(0)
            yield from wait(40)
        yield from wait(1500)

    gens = [main(), watch(), send(g.sinks[0], pk[0], rng), send(g.sinks[1], pk[1], rng)]
    run_simulation(g, gens + [c.gen for c in cols])
    assert res["mid"] == res["after_hold"]          # nothing moved while held
    assert res["offered_while_held"] == 0 and res["dropped_valid"] == 0
    # holds happened with packets left to send (the test is not vacuous)
    assert all(n < 40 for a in res["at_hold"] for n in a)
    for i in range(2):
        assert cols[i].packets == [with_rt(p, 0) for p in pk[i]]


def test_hold_does_not_cut_an_offered_header():
    """hold rising while a header is offered but not taken (ready low): the packet
    still passes whole once ready comes."""
    g = InjectionGate(1)
    col = Collector(g.sources[0])
    p, q = hpkt(1), hpkt(2)
    res = {}

    def main():
        col.ready = False
        yield from wait(3)
        yield g.hold.eq(1)
        yield from wait(5)
        col.ready = True
        yield from wait(30)
        res["held"] = list(col.packets)
        yield g.hold.eq(0)
        yield from wait(30)

    run_simulation(g, [main(), send(g.sinks[0], [p, q]), col.gen])
    assert res["held"] == [p]
    assert col.packets == [p, q]


# ---------------------------------------------------------------------------
# idle, with a router and a management port as NicCore wires them

class Top(Module):
    def __init__(self) -> None:
        self.gate = InjectionGate(2)
        self.router = Router(n_links=2, mtu=MTU, table_nodes=16)
        self.mgmt = MgmtPort(mtu=MTU)
        self.submodules += self.gate, self.router, self.mgmt
        self.comb += self.gate.watch(self.router, self.mgmt)
        self.submodules.arb = packet.Arbiter(
            [self.gate.sources[0], self.mgmt.source, self.gate.sources[1]], self.router.local_sink)


@passive
def far_end(link, col):
    """Return one credit per word the far end took (an always-draining far buffer)."""
    returned = 0
    while True:
        give = col.words > returned
        yield link.credit_words.eq(1)
        yield link.credit_valid.eq(int(give))
        returned += give
        yield


def load(r, table):
    """The same routes into both table sets."""
    while not (yield r.ready):
        yield
    for s in (0, 1):
        for adr, port in table.items():
            yield r.table_we.eq(1)
            yield r.table_set.eq(s)
            yield r.table_adr.eq(adr)
            yield r.table_dat.eq(port)
            yield
    yield r.table_we.eq(0)
    yield


def mgmt_send(m, words):
    for w in words:
        yield m.push_data.eq(w)
        yield m.push.eq(1)
        yield
        yield m.push.eq(0)
    yield m.send.eq(1)
    yield
    yield m.send.eq(0)


def test_idle_follows_packets_waiting_for_a_route():
    """idle is 1 at rest; 0 while a host packet is part-way through the gate, while
    injected packets wait in the router's injection FIFO for a blocked output (XP's link
    down), and while a management packet is queued; 1 again once all are granted."""
    t = Top()
    r, g = t.router, t.gate
    outs = {p: Collector(r.links[p - 1].source) for p in (1, 2)}
    host = [hpkt(0x10 + i, dst=1, length=40) for i in range(2)]     # -> XP (down)
    ctl = hpkt(0x20, dst=2, length=16, type_=P.PacketType.CONTROL)  # -> XM
    ctl2 = hpkt(0x21, dst=2, length=32, type_=P.PacketType.CONTROL)
    res = {}

    def main():
        yield r.links[0].up.eq(0)
        yield from load(r, {1: Port.XP, 2: Port.XM})
        yield from wait(3)
        res["rest"] = yield g.idle
        # a packet part-way through the gate (its source stalls after the header)
        sk = g.sinks[1]
        yield sk.valid.eq(1)
        yield sk.first.eq(1)
        yield sk.data.eq(host[0][0])
        yield
        while not (yield sk.ready):
            yield
        yield sk.valid.eq(0)
        yield
        yield
        res["partway"] = yield g.idle
        for i, w in enumerate(host[0][1:]):
            yield sk.valid.eq(1)
            yield sk.first.eq(0)
            yield sk.data.eq(w)
            yield sk.last.eq(i == len(host[0]) - 2)
            yield
            while not (yield sk.ready):
                yield
        yield sk.valid.eq(0)
        yield from send(g.sinks[0], [host[1]])
        yield from wait(20)
        res["blocked"] = (yield g.idle), (yield r.inject.packets)
        # the management packet behind them waits too
        yield from mgmt_send(t.mgmt, ctl)
        yield from wait(20)
        res["mgmt_blocked"] = (yield g.idle), (yield r.inject.packets)
        yield r.links[0].up.eq(1)
        n = 0
        while not (yield g.idle):
            n += 1
            yield
        res["granted"] = [len(outs[p].packets) for p in (1, 2)], (yield r.tx_packets[1])
        res["cycles"] = n
        # a management packet part-way built (words in the TX FIFO, not yet sent)
        m = t.mgmt
        for w in ctl2[:3]:
            yield m.push_data.eq(w)
            yield m.push.eq(1)
            yield
            yield m.push.eq(0)
        yield from wait(10)
        res["mgmt_partway"] = yield g.idle
        yield from mgmt_send(m, ctl2[3:])
        yield from wait(30)
        res["end"] = yield g.idle

    credits = [far_end(r.links[p - 1], outs[p]) for p in (1, 2)]
    run_simulation(t, [main()] + credits + [c.gen for c in outs.values()])
    assert res["rest"] == 1 and res["partway"] == 0
    assert res["blocked"] == (0, 2)
    assert res["mgmt_blocked"] == (0, 3)            # queued behind the blocked ones
    # every packet has been granted an output when idle rises
    assert res["granted"][1] == 2 and res["cycles"] > 0
    assert res["mgmt_partway"] == 0 and res["end"] == 1
    assert [p[1] for p in outs[1].packets] == [0x10, 0x11]
    assert outs[2].packets == [ctl, ctl2]


def test_hold_then_mgmt_then_idle():
    """The firmware's sequence: hold, a management packet, wait for idle. Host packets
    offered meanwhile do not enter the router; every packet injected before hold (and
    the management packet) has been granted an output when idle is seen; after
    release with set = 1 the held packets follow, stamped rt = 1."""
    t = Top()
    r, g = t.router, t.gate
    outs = {p: Collector(r.links[p - 1].source) for p in (1, 2)}
    host = [hpkt(0x100 + i, dst=1, length=8 * (i % 6)) for i in range(20)]
    ctl = hpkt(0x300, dst=2, length=16, type_=P.PacketType.CONTROL)
    res = {}
    offered = []

    @passive
    def count_accepted():
        # packets the router's injection FIFO took (through the arbiter)
        while True:
            yield
            ls = r.local_sink
            if (yield ls.valid) and (yield ls.ready) and (yield ls.last):
                offered.append((yield r.inject.packets))

    def main():
        yield from load(r, {1: Port.XP, 2: Port.XM})
        yield from wait(60)
        yield g.hold.eq(1)
        yield
        before = len(offered)
        yield from mgmt_send(t.mgmt, ctl)
        n = 0
        while not (yield g.idle):
            n += 1
            yield
        res["injected"] = len(offered)
        res["granted_xp"] = yield r.tx_packets[1]
        res["granted_xm"] = yield r.tx_packets[2]
        res["before"] = before
        yield from wait(100)
        res["still"] = len(offered)
        yield g.set.eq(1)
        yield g.hold.eq(0)
        yield from wait(2000)

    def host_tx():
        while not (yield r.ready):
            yield
        yield from send(g.sinks[1], host, random.Random(3))

    credits = [far_end(r.links[p - 1], outs[p]) for p in (1, 2)]
    run_simulation(t, [main(), host_tx(), count_accepted()] + credits + [c.gen for c in outs.values()])
    n_before = res["injected"] - 1                   # host packets injected before hold
    assert 0 < n_before < len(host)
    assert res["granted_xp"] == n_before and res["granted_xm"] == 1
    assert res["still"] == res["injected"]           # nothing injected while held
    got = outs[1].packets
    assert [p[1] for p in got] == [p[1] for p in host]
    assert got[:n_before] == host[:n_before]
    assert got[n_before:] == [with_rt(p, 1) for p in host[n_before:]]


def test_niccore_csr_names():
    """The CSRs the firmware uses (firmware/hw_soc.c) exist under these names."""
    from paranic.hw.gen import csr_map

    regs = csr_map(links=2)
    for name, size in [("router_route_set", 1), ("router_divert", 2), ("router_diverted", 32),
                       ("injection_set", 1), ("injection_hold", 1), ("injection_idle", 1)]:
        assert regs[name]["size"] == size, name
