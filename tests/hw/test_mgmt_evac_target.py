"""The management port's TX target (hw/mgmt.py MgmtSteer/EvacInput/MgmtTxPath) in Migen
simulation: packets the firmware replays after a link fault enter the router through the
input buffer of the failed link's port, as if they had just arrived on it.

Bench (the smallest assembly that shows it, wired by the same MgmtTxPath as NicCore):
node A's Router with a MgmtPort and its TX path; A's link port XP has a real LinkLayer,
cabled through two SimPhy wires to a far LinkLayer whose router side the test drives
(node B); A's port XM is a wire channel to a collector that returns credits when told;
A's local output is collected. A whole NicCore runs at a few cycles per second in
Migen's simulator (tests/hw/test_mgmt.py), far too slow here.

Routing table of A: dst 5 -> XM, dst 6 -> LOCAL, dst 7 -> XP.
"""

from __future__ import annotations

import random

from migen import Module, run_simulation
from litex.soc.interconnect import stream

from paranic.hw.common import LinkPortIf, packet_layout
from paranic.hw.link import LinkLayer
from paranic.hw.mgmt import MgmtPort, MgmtTxPath
from paranic.hw.router import Router
from paranic.sim.cable import SimPhy
from paranic.sim.channels import WireChannel
from paranic.spec import protocol as P
from paranic.spec.link import LinkState

MTU = 64
XP, XM, LOCAL = P.Port.XP, P.Port.XM, P.Port.LOCAL
TO_XM, TO_LOCAL, TO_XP = 5, 6, 7
TABLE = [P.Port.DROP] * 16
TABLE[TO_XM], TABLE[TO_LOCAL], TABLE[TO_XP] = XM, LOCAL, XP


def packet(dst: int, tag: int, length: int = MTU, rng: random.Random | None = None) -> list[int]:
    rng = rng or random.Random(tag)
    h0, h1 = P.header_words(dst_node=dst, src_node=3, length=length, tag=tag)
    return [h0, h1] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


class Bench(Module):
    def __init__(self) -> None:
        self.router = Router(n_links=2, mtu=MTU, table_nodes=16, table_init=TABLE)
        self.mgmt = MgmtPort(mtu=MTU)
        self.tx = MgmtTxPath(self.mgmt, self.router)
        self.la = LinkLayer(mtu=MTU)        # A's end of the XP cable
        self.lb = LinkLayer(mtu=MTU)        # the far end (node B)
        self.ab = SimPhy(delay=4, seed=11)
        self.ba = SimPhy(delay=4, seed=12)
        self.xm_far = LinkPortIf()          # the far end of A's XM port
        self.xm = WireChannel(self.router.links[XM - 1], self.xm_far, delay=1)
        self.b_src = stream.Endpoint(packet_layout())   # B's packets towards A
        self.submodules += [self.router, self.mgmt, self.tx, self.la, self.lb, self.ab, self.ba,
                            self.xm]
        xp = self.router.links[XP - 1]
        self.comb += [
            self.tx.local.connect(self.router.local_sink),
            self.la.port_connections(xp, rx_sink=self.tx.link_sinks[XP - 1]),
            self.tx.link_states[XP - 1].eq(self.la.link_state),
            self.tx.link_states[XM - 1].eq(LinkState.UP),
            self.la.phy_tx.connect(self.ab.sink), self.ab.source.connect(self.lb.phy_rx),
            self.lb.phy_tx.connect(self.ba.sink), self.ba.source.connect(self.la.phy_rx),
            # B: sends b_src, takes and frees whatever A sends at once.
            self.b_src.connect(self.lb.tx_sink),
            self.lb.rx_source.ready.eq(1),
            self.lb.drained.eq(self.lb.rx_source.valid),
            self.router.local_source.ready.eq(1),
        ]


class Run:
    """Cycle loop with collectors on A's XM and LOCAL outputs and B's sender."""

    def __init__(self, top: Bench) -> None:
        self.top = top
        self.out = {XM: [], LOCAL: []}     # whole packets, in order
        self.cur = {XM: [], LOCAL: []}
        self.xm_credit = True              # free A's XM credits as words arrive
        self.owed = 0
        self.b_queue: list[list[int]] = []
        self.b_word = 0
        self.cycle = 0
        self.commits = {XP: 0, LOCAL: 0}   # packets committed into A's XP / local input

    def tick(self):
        t = self.top
        # XM collector (the channel ignores ready: credits make room).
        s = t.xm_far.sink
        if (yield s.valid):
            self._word(XM, (yield s.data), (yield s.last), (yield s.error))
            self.owed += 1
        give = self.xm_credit and self.owed > 0
        yield t.xm_far.drained.eq(1 if give else 0)
        if give:
            self.owed -= 1
        ls = t.router.local_source
        if (yield ls.valid):
            self._word(LOCAL, (yield ls.data), (yield ls.last), 0)
        # B's sender.
        if self.b_queue:
            pk = self.b_queue[0]
            if (yield t.b_src.valid) and (yield t.b_src.ready):
                self.b_word += 1
                if self.b_word == len(pk):
                    self.b_queue.pop(0)
                    self.b_word = 0
        if self.b_queue:
            pk = self.b_queue[0]
            yield t.b_src.valid.eq(1)
            yield t.b_src.data.eq(pk[self.b_word])
            yield t.b_src.first.eq(self.b_word == 0)
            yield t.b_src.last.eq(self.b_word == len(pk) - 1)
        else:
            yield t.b_src.valid.eq(0)
        self.commits[XP] += (yield t.router.inputs[XP].committed)
        self.commits[LOCAL] += (yield t.router.inject.committed)
        yield
        self.cycle += 1

    def _word(self, port, data, last, error):
        assert not error
        self.cur[port].append(data)
        if last:
            self.out[port].append(self.cur[port])
            self.cur[port] = []

    def ticks(self, n: int):
        for _ in range(n):
            yield from self.tick()

    def until(self, cond, limit: int, what: str):
        for _ in range(limit):
            if (yield from cond()):
                return
            yield from self.tick()
        raise AssertionError(f"{what}: not after {limit} cycles (cycle {self.cycle})")

    def link_state(self):
        return (yield self.top.la.link_state)

    def wait_state(self, state: LinkState, limit: int = 2000):
        def cond():
            return (yield self.top.la.link_state) == state
        yield from self.until(cond, limit, f"link {state.name}")

    def take_down(self):
        yield self.top.la.take_down.eq(1)
        yield from self.tick()
        yield self.top.la.take_down.eq(0)
        yield from self.wait_state(LinkState.DOWN, 10)

    def send(self, words: list[int]):
        """The firmware's send: push every word (waiting for room), then send."""
        m = self.top.mgmt
        for w in words:
            while (yield m.txf.free) - (yield m.held_valid) < 1 or (yield m.closing):
                yield from self.tick()
            yield m.push_data.eq(w)
            yield m.push.eq(1)
            yield from self.tick()
            yield m.push.eq(0)
        yield m.send.eq(1)
        yield from self.tick()
        yield m.send.eq(0)
        yield from self.tick()


def run(body) -> Run:
    """Run the generator function ``body(r, top)`` on a new bench; the Run afterwards."""
    top = Bench()
    r = Run(top)
    run_simulation(top, body(r, top))
    return r


def test_down_target_enters_link_input_routed_in_order():
    """Link XP DOWN, target XP: the packets enter A's XP input buffer (never the local
    input) and are routed by the table, in order and whole; tx_idle is 0 while one waits
    for a blocked output (XM without credit returns: 3 packet slots) and 1 once every
    one has been granted; the XP buffer (32 words) never overflows (a packet waits for
    room for all of it)."""
    rng = random.Random(7)
    pks = [packet(TO_XM, 1, rng=rng), packet(TO_LOCAL, 2, 24, rng), packet(TO_XM, 3, rng=rng),
           packet(TO_XM, 4, rng=rng), packet(TO_XM, 5, rng=rng), packet(TO_XM, 6, 0, rng)]
    res = {}

    def body(r, top):
        yield from r.ticks(20)
        yield from r.take_down()
        yield top.mgmt.tx_target.eq(XP)
        res["idle_before"] = (yield top.mgmt.tx_idle)
        r.xm_credit = False
        for pk in pks:
            yield from r.send(pk)
        yield from r.ticks(80)
        res["xm_while_blocked"] = len(r.out[XM])
        res["idle_blocked"] = (yield top.mgmt.tx_idle)
        res["mgmt_empty_blocked"] = (yield top.mgmt.tx_empty)
        r.xm_credit = True
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 600, "tx_idle")
        res["idle_at"] = r.cycle
        yield from r.ticks(30)
        res["xp_state"] = (yield top.la.link_state)
        res["aborted"] = (yield top.router.err_aborted)

    r = run(body)
    assert res["idle_before"] == 1
    assert res["xm_while_blocked"] == 3        # XM's three packet slots, then the rest wait
    assert res["idle_blocked"] == 0 and res["mgmt_empty_blocked"] == 1
    assert r.out[XM] == [pks[0], pks[2], pks[3], pks[4], pks[5]]
    assert r.out[LOCAL] == [pks[1]]
    assert r.commits == {XP: 6, LOCAL: 0}
    assert res["aborted"] == 0
    assert res["xp_state"] == LinkState.DOWN
