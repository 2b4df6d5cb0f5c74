"""Link-local (``direct``) routing in the Router: CONTROL packets out on a named port,
delivered locally at the far router with ``direct`` rewritten to the arrival port."""

from __future__ import annotations

import pytest

from paranic.spec import protocol as P

from test_router import MAXP, MTU, Bench, identity_table, pkt  # noqa: F401

Port = P.Port
CONTROL = P.PacketType.CONTROL


def ctl(direct, dst=5, tag=0, length=16, type_=CONTROL):
    w0, w1 = P.header_words(dst_node=dst, src_node=3, type=type_, length=length, direct=direct)
    return [w0, tag] + [0x1111 * (i + 1) for i in range(P.payload_words(length))]


def field(w0, name):
    f = P.HEADER_FIELD[name]
    return (w0 >> f.offset) & ((1 << f.width) - 1)


@pytest.mark.parametrize("n_links", [2, 4])
def test_direct_out_on_every_port(n_links):
    """From the local port: out on port ``direct``, whatever the table says (here every
    destination routes to DROP), ``direct`` unchanged on the wire."""
    b = Bench(n_links)
    n = n_links + 1
    sent = {p: ctl(p, dst=p + 7, tag=0x100 + p) for p in range(1, n)}

    def main():
        yield from b.load({})          # table: everything DROP
        yield from b.send(0, list(sent.values()))
    b.run(main, 200)
    for p in range(1, n):
        assert b.words(p) == [sent[p]], f"port {p}"
    assert b.words(0) == []
    assert [len(b.words(p)) for p in range(n)] == [0] + [1] * n_links


@pytest.mark.parametrize("n_links", [2, 4])
def test_direct_arrival_rewrites_port(n_links):
    """From a link port: delivered locally whatever dst_node (even beyond the table),
    ``direct`` rewritten to the arrival port; the rest of the packet untouched."""
    b = Bench(n_links)
    n = n_links + 1
    # dst 0xFFF is outside the 16-entry table: a routed packet would be dropped.
    sent = {p: ctl(1 if p != 1 else 3, dst=0xFFF, tag=0x200 + p) for p in range(1, n)}

    def main():
        yield from b.load({})
        for p in range(1, n):
            yield from b.send(p, [sent[p]])
    b.run(main, 200)
    got = {w[1] - 0x200: w for w in b.words(0)}
    assert sorted(got) == list(range(1, n))
    for p in range(1, n):
        assert field(got[p][0], "direct") == p
        want0 = sent[p][0] & ~(7 << P.HEADER_FIELD["direct"].offset) | (p << P.HEADER_FIELD["direct"].offset)
        assert got[p][0] == want0 and got[p][1:] == sent[p][1:]
    for p in range(1, n):
        assert b.words(p) == []


def test_direct_ignored_on_other_types_and_table_unchanged():
    """``direct`` only means something on CONTROL packets: a DATA packet carrying it is
    routed by the table; routed CONTROL packets (direct = 0) follow the table too."""
    b = Bench(2)
    data = ctl(2, dst=1, tag=1, type_=P.PacketType.DATA)        # table: dst 1 -> XP
    routed_ctl = ctl(0, dst=2, tag=2)                            # table: dst 2 -> XM
    local_ctl = ctl(0, dst=0, tag=3)                             # table: dst 0 -> LOCAL
    arriving_data = ctl(1, dst=2, tag=4, type_=P.PacketType.DATA)  # from XP: to XM by table

    def main():
        yield from b.load(identity_table(3))
        yield from b.send(0, [data, routed_ctl, local_ctl])
        yield from b.send(Port.XP, [arriving_data])
    b.run(main, 200)
    assert b.words(Port.XP) == [data]
    assert b.words(Port.XM) == [routed_ctl, arriving_data]
    assert b.words(0) == [local_ctl]


def test_direct_bad_port_dropped():
    """``direct`` naming a port the router does not have (3 on a ring, 5..7) is dropped
    and counted as an unknown destination, like a DROP route."""
    b = Bench(2)
    res = {}

    def main():
        yield from b.load(identity_table(3))
        yield from b.send(0, [ctl(3, tag=1), ctl(7, tag=2), ctl(2, tag=3)])
        for _ in range(100):
            yield
        res["unk"] = yield b.dut.err_unknown
    b.run(main)
    assert res["unk"] == 2
    assert [w[1] for w in b.words(Port.XM)] == [3]
    assert b.words(Port.XP) == [] and b.words(0) == []


def test_direct_obeys_injection_bubble():
    """A link-local packet enters the link from the local port: it needs two free packet
    slots (injection rule) like any injected packet."""
    b = Bench(2)
    res = {}
    fill = pkt(1, tag=1, length=MTU)

    def main():
        b.credit_return[Port.XP] = False
        yield from b.load({1: Port.XP})
        yield from b.send(Port.XM, [fill, fill])      # 2 of 3 slots used: 1 free
        for _ in range(60):
            yield
        res["slots"] = yield b.dut.slots[Port.XP]
        yield from b.send(0, [ctl(Port.XP, tag=9, length=0)])
        for _ in range(60):
            yield
        res["before"] = [w[1] for w in b.words(Port.XP)]
        b.credit_return[Port.XP] = True
        for _ in range(150):
            yield
    b.run(main)
    assert res["slots"] == 1
    assert res["before"] == [1, 1]                     # held back by the bubble rule
    assert [w[1] for w in b.words(Port.XP)] == [1, 1, 9]


def test_direct_to_a_port_that_is_down_is_dropped():
    """A link-local packet for a link that is not up is dropped and counted (the firmware
    sends it to whoever is at the other end; waiting would block the local input), and
    the packets behind it on the local input go on."""
    b = Bench(2)
    stuck = ctl(Port.XM, dst=0, tag=7)
    behind = ctl(Port.XP, dst=0, tag=8)

    def main():
        yield b.dut.links[Port.XM - 1].up.eq(0)
        yield from b.load({})
        yield from b.send(0, [stuck, behind])
        for _ in range(100):
            yield
        assert (yield b.dut.err_unknown) == 1
    b.run(main, 300)
    assert b.words(Port.XP) == [behind]
    assert b.words(Port.XM) == []

