"""The control lane (hw/lane.py LaneTx/LaneRx) in Migen simulation: link-local CONTROL
packets cross a link beside the router's packets, never waiting behind them.

Bench: node A's Router; its port XP goes through a LaneTx into a real LinkLayer, cabled
through two SimPhy wires to node B's LinkLayer, whose received packets pass a LaneRx.
The test injects routed packets at A's local input (the table sends dst 7 out on XP)
and lane packets into the LaneTx; at B it collects the router side (returning credits
when told) and the lane FIFO (reading it when told).
"""

from __future__ import annotations

import random

from migen import Module, run_simulation
from litex.soc.interconnect import stream

from paranic.hw.common import LinkPortIf, packet_layout
from paranic.hw.lane import LaneRx, LaneTx
from paranic.hw.link import LinkLayer
from paranic.hw.router import Router
from paranic.sim.cable import SimPhy
from paranic.sim.channels import WireChannel
from paranic.spec import protocol as P
from paranic.spec.link import LinkState

MTU = 64
LANE_WORDS = 64      # B's lane FIFO: six of the test's 64-byte lane packets
XP, XM = P.Port.XP, P.Port.XM
TO_XP = 7
TABLE = [P.Port.DROP] * 16
TABLE[TO_XP] = XP


def routed(tag: int, length: int = MTU) -> list[int]:
    rng = random.Random(tag)
    h0, h1 = P.header_words(dst_node=TO_XP, src_node=3, length=length, tag=tag)
    return [h0, h1] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def lane(tag: int, length: int = 48) -> list[int]:
    rng = random.Random(1000 + tag)
    h0, h1 = P.header_words(dst_node=0, src_node=3, length=length, tag=tag,
                            type=P.PacketType.CONTROL, direct=XP)
    return [h0, h1] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def arrived_lane(pk: list[int], port: int) -> list[int]:
    """A lane packet as B's management port sees it: ``direct`` = the port it came in on."""
    f = P.HEADER_FIELD["direct"]
    mask = ((1 << f.width) - 1) << f.offset
    return [(pk[0] & ~mask) | (port << f.offset)] + pk[1:]


class Bench(Module):
    def __init__(self) -> None:
        self.router = Router(n_links=2, mtu=MTU, table_nodes=16, table_init=TABLE)
        self.ltx = LaneTx()
        self.la = LinkLayer(mtu=MTU)
        self.lb = LinkLayer(mtu=MTU)
        self.lrx = LaneRx(port=XP, n_links=2, depth_words=LANE_WORDS)
        self.ab = SimPhy(delay=4, seed=21)
        self.ba = SimPhy(delay=4, seed=22)
        self.xm_far = LinkPortIf()
        self.xm = WireChannel(self.router.links[XM - 1], self.xm_far, delay=1)
        self.lane_src = stream.Endpoint(packet_layout())
        self.local_src = stream.Endpoint(packet_layout())
        self.submodules += [self.router, self.ltx, self.la, self.lb, self.lrx, self.ab, self.ba,
                            self.xm]
        xp = self.router.links[XP - 1]
        self.comb += [
            self.local_src.connect(self.router.local_sink),
            self.la.port_connections(xp, lane_tx=self.ltx),
            self.ltx.router_busy.eq(self.router.busy[XP]),
            self.lane_src.connect(self.ltx.lane_sink),
            self.la.phy_tx.connect(self.ab.sink), self.ab.source.connect(self.lb.phy_rx),
            self.lb.phy_tx.connect(self.ba.sink), self.ba.source.connect(self.la.phy_rx),
            self.lb.rx_source.connect(self.lrx.sink),
            # B's router side is the Run below: the words the lane passes on go there (the
            # link layer credits only those frames' drained words).
            self.lb.rx_routed.eq(self.lrx.router_source.valid),
            self.lb.tx_sink.valid.eq(0),
            self.lrx.router_source.ready.eq(1),
            self.router.local_source.ready.eq(1),
        ]


class Sender:
    """Drives a packet stream endpoint from a queue of packets, one word per cycle."""

    def __init__(self, ep) -> None:
        self.ep, self.queue, self.word = ep, [], 0

    def tick(self):
        if self.queue and (yield self.ep.valid) and (yield self.ep.ready):
            self.word += 1
            if self.word == len(self.queue[0]):
                self.queue.pop(0)
                self.word = 0
        if self.queue:
            pk = self.queue[0]
            yield self.ep.valid.eq(1)
            yield self.ep.data.eq(pk[self.word])
            yield self.ep.first.eq(self.word == 0)
            yield self.ep.last.eq(self.word == len(pk) - 1)
        else:
            yield self.ep.valid.eq(0)


class Run:
    def __init__(self, top: Bench) -> None:
        self.top = top
        self.local = Sender(top.local_src)
        self.lanes = Sender(top.lane_src)
        self.b_router, self.b_lane = [], []
        self.cur_r, self.cur_l = [], []
        self.b_credit = True        # B's router side returns credits for what it takes
        self.owed = 0
        self.read_lane = True       # B's management port reads the lane FIFO
        self.cycle = 0

    def tick(self):
        t = self.top
        yield from self.local.tick()
        yield from self.lanes.tick()
        s = t.lrx.router_source
        if (yield s.valid):
            assert not (yield s.error) or (yield s.last)
            self.cur_r.append(((yield s.data), (yield s.error)))
            self.owed += 1
            if (yield s.last):
                if not any(e for _, e in self.cur_r):
                    self.b_router.append([w for w, _ in self.cur_r])
                self.cur_r = []
        give = self.b_credit and self.owed > 0
        yield t.lb.drained.eq(1 if give else 0)
        if give:
            self.owed -= 1
        q = t.lrx.source
        taken = (yield q.valid) and (yield q.ready)
        yield q.ready.eq(1 if self.read_lane else 0)
        if taken:
            self.cur_l.append((yield q.data))
            if (yield q.last):
                self.b_lane.append(self.cur_l)
                self.cur_l = []
        yield
        self.cycle += 1

    def ticks(self, n: int):
        for _ in range(n):
            yield from self.tick()

    def until(self, cond, limit: int, what: str):
        for _ in range(limit):
            if cond():
                return
            yield from self.tick()
        raise AssertionError(f"{what}: not after {limit} cycles (cycle {self.cycle})")

    def up(self):
        for _ in range(3000):
            if (yield self.top.la.link_state) == LinkState.UP and \
                    (yield self.top.lb.link_state) == LinkState.UP:
                return
            yield from self.tick()
        raise AssertionError("link not up")


def run(body) -> Run:
    top = Bench()
    r = Run(top)
    run_simulation(top, body(r, top))
    return r


def test_lane_and_routed_packets_share_the_link_intact():
    """Routed and lane packets sent at once: each kind arrives whole, in its order, on
    its side at B (routed to the router, lane to the lane FIFO with direct = the port)."""
    rp = [routed(i, MTU if i % 3 else 8 * (i % 5)) for i in range(12)]
    lp = [lane(i, 8 * (i % 7)) for i in range(12)]
    res = {}

    def body(r, top):
        yield from r.up()
        r.local.queue += rp
        r.lanes.queue += lp
        yield from r.until(lambda: len(r.b_router) == len(rp) and len(r.b_lane) == len(lp),
                           20000, "all packets at B")
        yield from r.ticks(50)
        res["sent"] = (yield top.ltx.sent)
        res["errors"] = ((yield top.lb.crc_errors), (yield top.lb.rx_overflows),
                         (yield top.lrx.refused))

    r = run(body)
    assert r.b_router == rp
    assert r.b_lane == [arrived_lane(p, XP) for p in lp]
    assert res["sent"] == len(lp)
    assert res["errors"] == (0, 0, 0)


def test_lane_passes_a_blocked_router_port():
    """B's router input takes nothing more (no credits come back): A's routed packets
    stop at A, yet lane packets keep crossing, and once credits flow again the routed
    ones follow, whole and in order."""
    rp = [routed(i) for i in range(20)]
    lp = [lane(i) for i in range(8)]
    res = {}

    def body(r, top):
        yield from r.up()
        r.b_credit = False
        r.local.queue += rp
        yield from r.ticks(1500)
        res["routed_blocked"] = len(r.b_router)
        r.lanes.queue += lp
        yield from r.until(lambda: len(r.b_lane) == len(lp), 5000, "lane packets at B")
        res["routed_meanwhile"] = len(r.b_router)
        r.b_credit = True
        yield from r.until(lambda: len(r.b_router) == len(rp), 20000, "routed packets at B")

    r = run(body)
    assert res["routed_blocked"] < len(rp)
    assert res["routed_meanwhile"] == res["routed_blocked"]
    assert r.b_lane == [arrived_lane(p, XP) for p in lp]
    assert r.b_router == rp


def test_full_lane_fifo_refuses_and_the_link_replays():
    """B's management port stops reading: lane packets beyond the lane FIFO's room are
    refused whole, and the link replays them (go-back-N: routed packets sent after
    them wait too). Once it reads again, every packet arrives exactly once, each kind in
    its order, and the link stayed up."""
    lp = [lane(i, 64) for i in range(16)]
    rp = [routed(i) for i in range(6)]
    res = {}

    def body(r, top):
        yield from r.up()
        r.read_lane = False
        r.lanes.queue += lp
        yield from r.ticks(300)
        r.local.queue += rp
        yield from r.ticks(300)
        res["refused"] = (yield top.lrx.refused)
        res["lane_held"] = len(r.b_lane)
        r.read_lane = True
        yield from r.until(lambda: len(r.b_lane) == len(lp) and len(r.b_router) == len(rp),
                           40000, "all packets at B")
        res["state"] = (yield top.la.link_state)

    r = run(body)
    assert res["refused"] > 0 and res["lane_held"] == 0
    assert r.b_lane == [arrived_lane(p, XP) for p in lp]
    assert r.b_router == rp
    assert res["state"] == LinkState.UP


def test_lane_packets_dropped_while_the_link_is_down():
    """Lane packets for a link that is not up are read and dropped (counted), never
    block the management port."""
    lp = [lane(i) for i in range(5)]
    res = {}

    def body(r, top):
        yield from r.up()
        yield top.la.take_down.eq(1)
        yield from r.tick()
        yield top.la.take_down.eq(0)
        r.lanes.queue += lp
        yield from r.until(lambda: not r.lanes.queue, 500, "lane packets taken")
        yield from r.ticks(5)
        res["counts"] = ((yield top.ltx.sent), (yield top.ltx.dropped))

    r = run(body)
    assert res["counts"] == (0, len(lp))
    assert r.b_lane == []


def test_mgmt_steer_sends_link_local_control_to_the_lanes():
    """MgmtSteer: a short link-local CONTROL packet goes to its port's lane whatever
    ``target`` says; a longer one (over LANE_MAX_BYTES), a DATA packet with ``direct`` set
    and a routed CONTROL packet go where ``target`` says."""
    from paranic.hw.mgmt import MgmtSteer

    def pk(tag, length, ptype=P.PacketType.CONTROL, direct=0):
        h0, _ = P.header_words(dst_node=1, src_node=2, length=length, tag=tag, type=ptype, direct=direct)
        return [h0, tag] + [tag * 100 + i for i in range(P.payload_words(length))]

    sent = [pk(1, 48, direct=XM), pk(2, P.LANE_MAX_BYTES + 8, direct=XP), pk(3, 16, P.PacketType.DATA, direct=XP),
            pk(4, 24), pk(5, P.LANE_MAX_BYTES, direct=XP)]
    want = {"lane2": [sent[0]], "link1": [sent[1], sent[2], sent[3]], "lane1": [sent[4]]}
    dut = MgmtSteer(n_links=2)
    outs = {"local": dut.local, "link1": dut.links[0], "link2": dut.links[1],
            "lane1": dut.lanes[0], "lane2": dut.lanes[1]}
    got = {k: [] for k in outs}

    def body():
        yield dut.target.eq(XP)          # routed packets into link port XP's input
        for ep in outs.values():
            yield ep.ready.eq(1)
        cur = {k: [] for k in outs}
        words = [(w, i == len(p) - 1) for p in sent for i, w in enumerate(p)]
        k = 0
        for _ in range(400):
            if k < len(words):
                yield dut.sink.valid.eq(1)
                yield dut.sink.data.eq(words[k][0])
                yield dut.sink.last.eq(words[k][1])
            else:
                yield dut.sink.valid.eq(0)
            yield
            if k < len(words) and (yield dut.sink.ready):
                k += 1
            for name, ep in outs.items():
                if (yield ep.valid) and (yield ep.ready):
                    cur[name].append((yield ep.data))
                    if (yield ep.last):
                        got[name].append(cur[name])
                        cur[name] = []

    run_simulation(dut, body())
    assert {k: v for k, v in got.items() if v} == want
