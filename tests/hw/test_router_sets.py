"""The Router's two routing-table sets (header ``rt``) and divert (ordered route
changes, docs/architecture.md "Two table sets and divert")."""

from __future__ import annotations

import random

import pytest

from paranic.spec import protocol as P

from test_router import HOP, Bench, csr_write

Port = P.Port
RT = P.HEADER_FIELD["rt"].offset


def rpkt(dst, rt, tag, length=24, src=3):
    w0, _ = P.header_words(dst_node=dst, src_node=src, length=length, rt=rt)
    rng = random.Random(tag)
    return [w0, tag] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def flipped(words):
    """``words`` as a diverting router sends them on: ``rt`` of header word 0 flipped."""
    return [words[0] ^ (1 << RT)] + words[1:]


def rt_of(words):
    return (words[0] >> RT) & 1


def load_sets(b, sets):
    """Write entries ``{set: {dst: port}}`` through the table write port."""
    d = b.dut
    while not (yield d.ready):
        yield
    for s, table in sets.items():
        for adr, port in table.items():
            yield d.table_we.eq(1)
            yield d.table_set.eq(s)
            yield d.table_adr.eq(adr)
            yield d.table_dat.eq(port)
            yield
    yield d.table_we.eq(0)
    yield d.table_set.eq(0)
    yield


def wait(n):
    for _ in range(n):
        yield


def set_divert(b, on, frm):
    yield b.dut.divert_on.eq(on)
    yield b.dut.divert_from.eq(frm)


def link_up(b, port, up):
    yield b.dut.links[port - 1].up.eq(up)


# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n_links", [2, 4])
def test_packets_follow_the_set_in_rt(n_links):
    """The same destination routes differently by set; rt passes unchanged (no divert)."""
    b = Bench(n_links)
    other = Port.YP if n_links == 4 else Port.LOCAL
    sets = {0: {5: Port.XP, 6: other}, 1: {5: Port.XM, 6: Port.XP}}
    p = [rpkt(5, 0, 1), rpkt(5, 1, 2), rpkt(6, 1, 3), rpkt(6, 0, 4)]
    t = [rpkt(5, 1, 5), rpkt(6, 0, 6)]        # arriving on a link input

    def main():
        yield from load_sets(b, sets)
        yield from b.send(0, p)
        yield from b.send(Port.XM, t)
    b.run(main, 150)
    assert b.words(Port.XP) == [p[0], p[2]]
    assert b.words(Port.XM) == [p[1], t[0]]
    assert b.words(other) == [p[3], t[1]]


def test_route_set_csr_writes_and_reads_only_its_set():
    b = Bench(2, csr=True)
    d = b.dut
    res = {}

    def read(adr, s):
        yield from csr_write(d.route_adr, adr)
        yield from csr_write(d.route_set, s)
        yield
        yield
        return (yield d.route_read.status)

    def main():
        while not (yield d.ready):
            yield
        # set 0 (route_set untouched, as every existing user): dst 3 -> XP
        for dst, port in [(3, Port.XP), (4, Port.LOCAL)]:
            yield from csr_write(d.route_adr, dst)
            yield from csr_write(d.route_port, port)
            yield from csr_write(d.route_write, 1)
        yield from csr_write(d.route_set, 1)
        for dst, port in [(3, Port.XM), (5, Port.XP)]:
            yield from csr_write(d.route_adr, dst)
            yield from csr_write(d.route_port, port)
            yield from csr_write(d.route_write, 1)
        res["read"] = {}
        for a in (3, 4, 5):
            for s in (0, 1):
                res["read"][(a, s)] = yield from read(a, s)
        yield from csr_write(d.route_set, 0)
        yield from b.send(0, [rpkt(3, 0, 1), rpkt(3, 1, 2), rpkt(4, 0, 3), rpkt(4, 1, 4),
                              rpkt(5, 0, 5), rpkt(5, 1, 6)])
        yield from wait(150)
        res["unk"] = yield d.err_unknown_csr.status
    b.run(main)
    assert res["read"] == {(3, 0): Port.XP, (3, 1): Port.XM, (4, 0): Port.LOCAL,
                           (4, 1): Port.DROP, (5, 0): Port.DROP, (5, 1): Port.XP}
    assert [w[1] for w in b.words(Port.XP)] == [1, 6]
    assert [w[1] for w in b.words(Port.XM)] == [2]
    assert [w[1] for w in b.words(Port.LOCAL)] == [3]
    assert res["unk"] == 2          # dst 4 in set 1, dst 5 in set 0: DROP


def test_table_init_fills_both_sets():
    b = Bench(2, table_init=[Port.LOCAL, Port.XP, Port.XM])
    p = [rpkt(1, 0, 1), rpkt(1, 1, 2), rpkt(2, 1, 3), rpkt(0, 1, 4)]

    def main():
        yield from load_sets(b, {})
        yield from b.send(0, p)
    b.run(main, 150)
    assert b.words(Port.XP) == p[:2]
    assert b.words(Port.XM) == [p[2]]
    assert b.words(Port.LOCAL) == [p[3]]


@pytest.mark.parametrize("src", [Port.LOCAL, Port.XM])
def test_divert_from_a_down_link(src):
    """Set 0 says XP, whose link is down: with divert on from set 0 the packet goes by
    set 1 (XM: from XM a U-turn), rt flipped in its header, the rest untouched; counted."""
    b = Bench(2)
    p = [rpkt(1, 0, 10 + i, length=8 * i) for i in range(3)]
    res = {}

    def main():
        yield from link_up(b, Port.XP, 0)
        yield from set_divert(b, 1, 0)
        yield from load_sets(b, {0: {1: Port.XP}, 1: {1: Port.XM}})
        yield from b.send(src, p)
        yield from wait(120)
        res["div"] = yield b.dut.diverted
    b.run(main)
    got = b.words(Port.XM)
    assert got == [flipped(w) for w in p]
    assert all(rt_of(w) == 1 for w in got)
    assert b.words(Port.XP) == []
    assert res["div"] == 3


@pytest.mark.parametrize("case", ["link_up", "other_rt", "off"])
def test_no_divert(case):
    """No divert when the link is up, when rt is not the set diverted from, or when off:
    the packet waits for its own route (XP) and leaves unflipped when the link is up."""
    b = Bench(2)
    rt = 1 if case == "other_rt" else 0
    p = rpkt(1, rt, 7)
    res = {}

    def main():
        if case != "link_up":
            yield from link_up(b, Port.XP, 0)
        yield from set_divert(b, case != "off", 0)
        # the packet's own set says XP, the other one XM
        yield from load_sets(b, {rt: {1: Port.XP}, 1 - rt: {1: Port.XM}})
        yield from b.send(0, [p])
        yield from wait(80)
        res["early"] = (len(b.rx[Port.XP]), len(b.rx[Port.XM]))
        yield from link_up(b, Port.XP, 1)
        yield from wait(80)
        res["div"] = yield b.dut.diverted
    b.run(main)
    assert res["early"] == ((1, 0) if case == "link_up" else (0, 0))
    assert b.words(Port.XP) == [p]
    assert b.words(Port.XM) == []
    assert res["div"] == 0


def test_diverted_packet_waits_for_the_other_link():
    """Both routes' links down: the diverted packet waits on the other set's port (no flip
    back), and leaves there, flipped, once that link comes up."""
    b = Bench(2)
    p = rpkt(1, 0, 9)
    res = {}

    def main():
        yield from link_up(b, Port.XP, 0)
        yield from link_up(b, Port.XM, 0)
        yield from set_divert(b, 1, 0)
        yield from load_sets(b, {0: {1: Port.XP}, 1: {1: Port.XM}})
        yield from b.send(0, [p])
        yield from wait(100)
        res["early"] = (len(b.rx[Port.XP]), len(b.rx[Port.XM]), (yield b.dut.diverted))
        yield from link_up(b, Port.XM, 1)
        yield from wait(60)
        res["div"] = yield b.dut.diverted
    b.run(main)
    assert res["early"] == (0, 0, 0)
    assert b.words(Port.XM) == [flipped(p)]
    assert b.words(Port.XP) == []
    assert res["div"] == 1


def test_divert_from_set_1_and_to_local_and_drop():
    """Divert from set 1: a packet diverted to LOCAL is ejected with rt = 0; one whose
    route in the other set is DROP is dropped (err_unknown), not diverted."""
    b = Bench(2)
    a, c = rpkt(2, 1, 1), rpkt(3, 1, 2)
    res = {}

    def main():
        yield from link_up(b, Port.XM, 0)
        yield from set_divert(b, 1, 1)
        yield from load_sets(b, {1: {2: Port.XM, 3: Port.XM}, 0: {2: Port.LOCAL, 3: Port.DROP}})
        yield from b.send(Port.XP, [c, a])
        yield from wait(100)
        res["div"] = yield b.dut.diverted
        res["unk"] = yield b.dut.err_unknown
    b.run(main)
    assert b.words(Port.LOCAL) == [flipped(a)] and rt_of(b.words(Port.LOCAL)[0]) == 0
    assert res == {"div": 1, "unk": 1}


def test_divert_counts_packets_of_several_inputs():
    """Packets diverted on several inputs at once are all counted; packets not diverted
    are not."""
    b = Bench(4)
    loc = [rpkt(1, 0, 0x100 + i) for i in range(4)]
    xm = [rpkt(1, 0, 0x200 + i) for i in range(3)]
    yp = [rpkt(1, 0, 0x300 + i) for i in range(3)]
    plain = [rpkt(2, 0, 0x400 + i) for i in range(2)]      # set 0: XM, up
    res = {}

    def main():
        yield from link_up(b, Port.XP, 0)
        yield from set_divert(b, 1, 0)
        yield from load_sets(b, {0: {1: Port.XP, 2: Port.XM}, 1: {1: Port.YM, 2: Port.YP}})
        yield from wait(300)
        res["div"] = yield b.dut.diverted

    def sender(port, packets):
        # the three inputs send at once, so their packets reach the heads together
        while not (yield b.dut.ready):
            yield
        yield from wait(20)
        yield from b.send(port, packets)
    b.gens += [sender(0, loc + plain), sender(Port.XM, xm), sender(Port.YP, yp)]
    b.run(main)
    got = b.words(Port.YM)
    assert sorted(w[1] for w in got) == sorted(w[1] for w in loc + xm + yp)
    assert all(rt_of(w) == 1 for w in got)
    for group in (loc, xm, yp):          # in order per input
        tags = [w[1] for w in got if w[1] in {x[1] for x in group}]
        assert tags == [x[1] for x in group]
    assert b.words(Port.XM) == plain
    assert res["div"] == len(loc + xm + yp)


@pytest.mark.parametrize("route_fn", ["migen", "table"])
@pytest.mark.parametrize("diverted", [False, True])
def test_latency_of_a_set1_packet(diverted, route_fn):
    """A set-1 packet not diverted leaves as many cycles after it is complete as any other
    packet (HOP - 1); a diverted one 2 cycles later: with virtual output queues the other
    set's entry is read when the packet is at its queue's head (the table as it is then,
    test_divert_reads_the_other_set_as_it_is_now), not with its own route."""
    b = Bench(2, route_fn=route_fn)

    def main():
        yield from set_divert(b, 1, 1)
        if diverted:
            yield from link_up(b, Port.XM, 0)
        yield from load_sets(b, {1: {5: Port.XM}, 0: {5: Port.XP}})
        yield from wait(5)
        yield from b.send(Port.XM if not diverted else 0, [rpkt(5, 1, 1)])
        yield from wait(40)
    b.run(main)
    out = Port.XP if diverted else Port.XM
    src = 0 if diverted else Port.XM
    assert b.hdr_out[out][0] - b.commit_cycle[src][0] == HOP[route_fn] - 1 + (2 if diverted else 0)
    assert rt_of(b.words(out)[0]) == (0 if diverted else 1)


@pytest.mark.parametrize("src", [Port.LOCAL, Port.XM])
@pytest.mark.parametrize("route_fn,voq", [("migen", True), ("table", True), ("migen", False)])
def test_divert_reads_the_other_set_as_it_is_now(src, route_fn, voq):
    """A packet already waiting for a link that went down when the firmware writes the
    new plan into the other set (ARMED) and then turns divert on (EVAC) takes the new
    entry, not the one the other set held when the packet arrived. (With virtual output
    queues the other set's route was kept in the queue entry from the moment the packet
    was queued: the cut cable's packets queued before the plan was armed were 'diverted'
    to the old route, the down link, and stayed there for ever; the SoC ring's
    all-to-all run under a cable cut hung, tests/sim/test_firmware_sim.py.)"""
    b = Bench(2, route_fn=route_fn, voq=voq, **({} if voq else {"bubble": "word"}))
    p = [rpkt(1, 0, 0x40 + i, length=8 * i) for i in range(3)]
    res = {}

    def main():
        # bring-up: one plan in both sets (XP), the link down with packets queued for it
        yield from load_sets(b, {0: {1: Port.XP}, 1: {1: Port.XP}})
        yield from link_up(b, Port.XP, 0)
        yield from b.send(src, p)
        yield from wait(60)
        res["early"] = (len(b.rx[Port.XP]), len(b.rx[Port.XM]))
        # the new plan, around the link, into set 1; then divert from set 0
        yield from load_sets(b, {1: {1: Port.XM}})
        yield from set_divert(b, 1, 0)
        yield from wait(150)
        res["div"] = yield b.dut.diverted
    b.run(main)
    assert res["early"] == (0, 0)
    assert b.words(Port.XM) == [flipped(w) for w in p]
    assert b.words(Port.XP) == []
    assert res["div"] == 3
