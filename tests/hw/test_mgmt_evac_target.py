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
        self.bad = {XM: 0, LOCAL: 0}       # packets that left ending with error (cut-through)
        self.cur = {XM: [], LOCAL: []}
        self.xm_credit = True              # free A's XM credits as words arrive
        self.owed = 0
        self.b_queue: list[list[int]] = []
        self.b_word = 0
        self.b_pause = None                # B's sender stops before this word of its head packet
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
        if self.b_queue and self.b_word != self.b_pause:
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
        assert not error or last
        self.cur[port].append(data)
        if last:
            if error:
                self.bad[port] += 1
            else:
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
    input) and are routed by the table, in order and whole. XM without credit returns
    takes three packets (its packet slots); the XP buffer (3 packet slots) then takes
    two more, keeping one slot free (the injection bubble rule), and the rest wait in
    the management port; nothing is discarded; tx_idle is 0 meanwhile and 1 once every
    packet has been granted an output."""
    rng = random.Random(7)
    pks = [packet(TO_XM, 1, rng=rng), packet(TO_LOCAL, 2, 24, rng)] + \
        [packet(TO_XM, 3 + i, rng=rng) for i in range(6)] + [packet(TO_XM, 9, 0, rng)]
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
        res["blocked"] = (len(r.out[XM]), (yield top.router.inputs[XP].level),
                          (yield top.mgmt.txf.packets), (yield top.mgmt.tx_idle))
        r.xm_credit = True
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 1000, "tx_idle")
        yield from r.ticks(30)
        res["xp_state"] = (yield top.la.link_state)
        res["aborted"] = (yield top.router.err_aborted)

    r = run(body)
    assert res["idle_before"] == 1
    assert res["blocked"] == (3, 20, 3, 0)
    assert r.out[XM] == [pks[0]] + pks[2:]
    assert r.out[LOCAL] == [pks[1]]
    assert r.commits == {XP: len(pks), LOCAL: 0}
    assert res["aborted"] == 0
    assert res["xp_state"] == LinkState.DOWN


def test_up_target_waits_link_traffic_undisturbed():
    """Target XP while link XP is UP: the management packet waits (tx_idle 0) and B's
    packets arriving on XP pass whole and in order; once the link is DOWN the waiting
    packet enters and is routed."""
    rng = random.Random(3)
    b_pks = [packet(TO_XM, 100 + i, rng.choice([0, 8, 40, MTU]), rng) for i in range(6)]
    mg = packet(TO_LOCAL, 7, 16, rng)
    res = {}

    def body(r, top):
        yield from r.wait_state(LinkState.UP)
        yield top.mgmt.tx_target.eq(XP)
        yield from r.send(mg)
        r.b_queue = list(b_pks)
        yield from r.until(lambda: (yield from _true(len(r.out[XM]) == len(b_pks))), 3000, "B's packets")
        yield from r.ticks(20)
        res["waiting"] = (yield top.mgmt.txf.packets)
        res["idle_up"] = (yield top.mgmt.tx_idle)
        res["local_up"] = len(r.out[LOCAL])
        res["overflows"] = (yield top.la.rx_overflows)
        res["state_up"] = (yield top.la.link_state)
        yield from r.take_down()
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 200, "tx_idle")
        yield from r.ticks(10)

    r = run(body)
    assert res["state_up"] == LinkState.UP
    assert res["waiting"] == 1 and res["idle_up"] == 0 and res["local_up"] == 0
    assert res["overflows"] == 0
    assert r.out[XM] == b_pks
    assert r.out[LOCAL] == [mg]
    assert r.commits == {XP: len(b_pks) + 1, LOCAL: 0}


def test_cut_link_packet_not_mixed_with_mgmt_words():
    """A packet from the link part-way into the XP buffer when the link goes DOWN is
    ended bad (the link ends it with an error beat, a cycle after it is DOWN; the
    cut-through buffer pads it to its SOF length and the router, which had already
    started it towards XM, passes the error on: a link there would stomp it); the
    management packets waiting for XP enter only after it, whole. B's sender pauses
    in the middle of its packet (the link sends fillers), so when the link goes DOWN no
    word is arriving and only the open packet tells the multiplexer to wait."""
    rng = random.Random(5)
    b_pk = packet(TO_XM, 200, MTU, rng)
    mgs = [packet(TO_XM, 8, 8, rng), packet(TO_LOCAL, 9, 0, rng)]
    res = {}

    def body(r, top):
        yield from r.wait_state(LinkState.UP)
        yield top.mgmt.tx_target.eq(XP)
        for pk in mgs:
            yield from r.send(pk)
        r.b_pause = 5
        r.b_queue = [b_pk]
        buf = top.router.inputs[XP]
        # B's packet started in A's XP buffer (cut-through: its SOF length reserved;
        # four words written, the fifth held in the link's receiver), nothing
        # arriving: cut the link.
        yield from r.until(lambda: (yield from _true((yield buf.packets) == 1)), 2000,
                           "B's packet arriving")
        yield from r.ticks(10)
        res["before"] = ((yield buf.level), (yield buf.packets), (yield top.mgmt.txf.packets),
                         (yield top.la.rx_source.valid))
        yield from r.take_down()
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 200, "tx_idle")
        yield from r.ticks(20)
        res["aborted"] = (yield buf.aborted)

    r = run(body)
    assert res["before"][1:] == (1, 2, 0)
    assert res["aborted"] == 0
    assert r.bad[XM] == 1          # B's cut packet, ended with error (never delivered)
    assert r.out[XM] == [mgs[0]]
    assert r.out[LOCAL] == [mgs[1]]
    assert r.commits == {XP: 3, LOCAL: 0}   # cut-through: B's packet counts when it starts


def test_target_local_as_before_and_bad_target_discarded():
    """Target 0: packets enter the router's local input (never the XP buffer) and are
    routed, even with XP DOWN. A target written while a packet is part-way through
    applies from the next packet on (the packet is not cut). A target beyond the link
    ports discards the packet whole and counts it (``misrouted``, part of
    ``mgmt_tx_dropped``); the next packet with a good target is unharmed. tx_idle
    follows each."""
    rng = random.Random(9)
    a, b, c, d = (packet(TO_XM, 1, MTU, rng), packet(TO_LOCAL, 2, MTU, rng),
                  packet(TO_XM, 3, 8, rng), packet(TO_XM, 4, 16, rng))
    res = {}

    def body(r, top):
        steer = top.tx.steer.sink
        yield from r.ticks(10)
        yield from r.take_down()
        yield from r.send(a)
        yield from r.until(lambda: (yield from _true((yield steer.valid) and not (yield steer.first))),
                           50, "packet a part-way through")
        res["a_words_left"] = (yield top.mgmt.txf.level)
        yield top.mgmt.tx_target.eq(XP)            # mid-packet: a still goes to LOCAL
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 200, "tx_idle (a)")
        yield from r.send(d)
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 200, "tx_idle (d, target XP)")
        yield top.mgmt.tx_target.eq(5)
        yield from r.send(b)
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 200, "tx_idle (bad target)")
        res["misrouted"] = (yield top.mgmt.misrouted)
        yield top.mgmt.tx_target.eq(LOCAL)
        yield from r.send(c)
        yield from r.until(lambda: (yield top.mgmt.tx_idle), 200, "tx_idle (target 0, XP down)")
        yield from r.ticks(20)

    r = run(body)
    assert res["a_words_left"] > 1
    assert res["misrouted"] == 1
    assert r.out[XM] == [a, d, c] and r.out[LOCAL] == []
    assert r.commits == {XP: 1, LOCAL: 2}


def test_csrs_in_niccore_map():
    """NicCore's CSR map has mgmt_tx_target (3 bits, rw) and mgmt_tx_idle (status) after
    the older mgmt_* registers, whose offsets do not move."""
    from paranic.hw.standalone import NicCoreStandalone
    regs = NicCoreStandalone(n_links=2, n_ctx=2, mtu=MTU).csr_map()
    tgt, idle = regs["mgmt_tx_target"], regs["mgmt_tx_idle"]
    assert (tgt.size, tgt.kind) == (3, "rw")
    assert (idle.size, idle.kind) == (1, "ro")
    new = ("mgmt_tx_target", "mgmt_tx_idle")
    older = [r.addr for n, r in regs.items() if n.startswith("mgmt_") and n not in new]
    assert max(older) < tgt.addr < idle.addr


def _true(v):
    return v
    yield
