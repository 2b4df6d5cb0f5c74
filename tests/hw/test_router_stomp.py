"""Cut-through and stomping across three routers joined by link layers (Migen).

Node 0 -> node 1 -> node 2 on a line: two LinkChannels (link layers over simulated
PHY wires). A bit flips in the last payload word of a 256-byte frame on the first link;
by then node 1 has already forwarded that packet's head towards node 2 (cut-through),
so node 1 can only mark it bad: its link to node 2 sends it stomped, node 2's link
counts it (``rx_stomped``) and asks for no replay, node 2's ejection FIFO drops it,
and the first link's replay delivers the packet exactly once, in order.
"""

from __future__ import annotations

import random

from migen import Module, passive, run_simulation

from paranic.hw.router import Router
from paranic.sim.channels import LinkChannel
from paranic.spec import protocol as P
from paranic.spec.link import CtlKind, unpack_ctl

Port = P.Port
MTU = 256       # 34-word frames: the head leaves node 1 long before the tail arrives
N_PKT = 3
BAD = 1          # the packet (tag) whose frame is hit on the first link
DELAY = 4


class Line(Module):
    def __init__(self) -> None:
        # node i: dst 2 goes XP at nodes 0 and 1, LOCAL at node 2
        tables = [[Port.LOCAL, Port.DROP, Port.XP, Port.DROP],
                  [Port.DROP, Port.LOCAL, Port.XP, Port.DROP],
                  [Port.DROP, Port.DROP, Port.LOCAL, Port.DROP]]
        self.r = [Router(n_links=2, mtu=MTU, table_nodes=4, table_init=t) for t in tables]
        for i, r in enumerate(self.r):
            setattr(self.submodules, f"r{i}", r)
            self.comb += r.node_id.eq(i)
        LinkChannel.reset_seeds()
        self.submodules.ch01 = LinkChannel(self.r[0].links[Port.XP - 1], self.r[1].links[Port.XM - 1],
                                           delay=DELAY, mtu=MTU)
        self.submodules.ch12 = LinkChannel(self.r[1].links[Port.XP - 1], self.r[2].links[Port.XM - 1],
                                           delay=DELAY, mtu=MTU)


def _packets():
    rng = random.Random(3)
    out = []
    for i in range(N_PKT):
        w0, w1 = P.header_words(dst_node=2, src_node=0, length=MTU, tag=i)
        out.append([w0, w1] + [rng.getrandbits(64) for _ in range(P.payload_words(MTU))])
    return out


def test_bit_error_after_the_head_left_is_stomped_and_replayed():
    top = Line()
    pk = _packets()
    r0, r1, r2 = top.r
    got: list[list[int]] = []
    ev = {"hit": None, "head_out": None, "tail_in": None, "cycle": 0}
    res = {}
    last_idx = P.packet_words(MTU) - 1

    @passive
    def clock():
        while True:
            yield
            ev["cycle"] += 1

    @passive
    def injector():
        """Flip bit 5 of the last packet word of frame BAD's first transmission 0->1."""
        phy = top.ch01.phy_ab
        frame, idx, seen = None, 0, {}
        while True:
            flip = 0
            if (yield phy.sink.valid):
                d, c = (yield phy.sink.data), (yield phy.sink.ctrl)
                ctl = unpack_ctl(d) if c else None
                if ctl and ctl["kind"] == CtlKind.SOF:
                    frame, idx = ctl["seq"], -1
                    seen[frame] = seen.get(frame, 0) + 1
                elif not c and frame is not None:
                    idx += 1
                    if frame == BAD and seen[frame] == 1 and idx == last_idx and ev["hit"] is None:
                        ev["hit"] = ev["cycle"]
                        flip = 1 << 5
            # the flip mask acts on the word leaving the wire ``delay`` cycles later
            yield phy.flip_mask.eq(0)
            if flip:
                # the word entering now leaves DELAY cycles later; a write is seen
                # in the cycle after it
                for _ in range(DELAY - 1):
                    yield
                yield phy.flip_mask.eq(flip)
                yield
                yield phy.flip_mask.eq(0)
            else:
                yield

    @passive
    def watch_node1():
        """Cycle the bad packet's head leaves node 1 (link XP) and its tail arrives there."""
        out = r1.links[Port.XP - 1].source
        inp = r1.links[Port.XM - 1].sink
        heads = 0
        while True:
            if (yield out.valid) and (yield out.first) and (yield out.ready):
                if heads == BAD:
                    ev["head_out"] = ev["cycle"]
                heads += 1
            if (yield inp.valid) and (yield inp.last) and (yield inp.error) and ev["tail_in"] is None:
                ev["tail_in"] = ev["cycle"]
            yield

    @passive
    def sink():
        src = r2.local_source
        cur = []
        yield src.ready.eq(1)
        while True:
            yield
            if (yield src.valid):
                cur.append((yield src.data))
                if (yield src.last):
                    got.append(cur)
                    cur = []

    def main():
        for r in top.r:
            while not (yield r.ready):
                yield
        ls = r0.local_sink
        for words in pk:
            for i, w in enumerate(words):
                yield ls.valid.eq(1)
                yield ls.data.eq(w)
                yield ls.first.eq(i == 0)
                yield ls.last.eq(i == len(words) - 1)
                yield
                while not (yield ls.ready):
                    yield
            yield ls.valid.eq(0)
        for _ in range(3000):
            if len(got) == N_PKT:
                break
            yield
        for _ in range(50):
            yield
        res["rx_stomped2"] = yield top.ch12.link_b.rx_stomped
        res["tx_stomped1"] = yield top.ch12.link_a.tx_stomped
        res["crc_errors1"] = yield top.ch01.link_b.crc_errors
        res["naks12"] = yield top.ch12.link_b.naks_sent
        res["replays01"] = yield top.ch01.link_a.replays
        res["eject_aborted2"] = yield r2.eject.aborted
        res["errors"] = []
        for r in top.r:
            res["errors"] += [(yield r.err_length), (yield r.err_unknown)]
        res["credits1"] = yield r1.credits[Port.XP]
        res["credits0"] = yield r0.credits[Port.XP]

    run_simulation(top, [main(), clock(), injector(), watch_node1(), sink()])
    assert ev["hit"] is not None, "the bit error was never injected"
    # Cut-through: the bad packet's head left node 1 before its (bad) tail arrived.
    assert ev["head_out"] is not None and ev["tail_in"] is not None
    assert ev["head_out"] < ev["tail_in"] - P.packet_words(MTU) // 2, ev
    # Exactly once, in order, none corrupted (the ejection FIFO drops the stomped copy).
    assert got == pk
    assert res["crc_errors1"] == 1 and res["replays01"] >= 1
    assert res["tx_stomped1"] == 1 and res["rx_stomped2"] == 1
    assert res["naks12"] == 0            # node 2 asked for no replay
    assert res["eject_aborted2"] == 1
    assert res["errors"] == [0] * 6
    # all credits back
    assert (res["credits0"], res["credits1"]) == (r0.buf_words, r1.buf_words), res
