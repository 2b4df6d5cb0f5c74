"""The router's routing stage (hw/router_route.py): destinations beyond the routing table
are routed by the route kernel's dimension-order fallback; the table alone drops them;
the node's coordinates from its id (RouteCoords). docs/architecture.md, "Routing stage"."""

from __future__ import annotations

import pytest
from migen.sim import run_simulation

from paranic.hw.router import Router
from paranic.hw.router_route import RouteCoords
from paranic.spec import protocol as P
from paranic.spec.topo import Topology
from test_router import Bench, pkt

Port = P.Port
TN = 16                          # the Bench's table: destinations 16 .. 31 are beyond it
TOPO = Topology.torus(8, 4)      # 32 nodes
NODE = 10                        # (2, 1)


def _route_all(route_fn):
    b = Bench(4, route_fn=route_fn, dims=(TOPO.x, TOPO.y))
    res = {}
    dsts = [d for d in range(TOPO.nodes) if d != NODE]
    table = TOPO.table(NODE, depth=TN)

    def main():
        x, y = TOPO.coords(NODE)
        yield b.dut.node_x.eq(x)
        yield b.dut.node_y.eq(y)
        yield from b.load(dict(enumerate(table)))
        yield from b.send(Port.LOCAL, [pkt(d, src=NODE, length=8, tag=d + 1) for d in dsts])
        for _ in range(300):
            yield
        res["unk"] = yield b.dut.err_unknown
        res["req"] = yield b.dut.route_local.requests
    b.run(main)
    got = {w[1]: p for p in range(1, 5) for w in b.words(p)}     # tag -> port
    return dsts, got, res


def test_beyond_the_table_routed_by_the_kernel():
    """A 32-node torus, a 16-entry table: the 15 destinations in the table take its
    entries, the 16 beyond it the kernel's computed route; all as the spec routes."""
    dsts, got, res = _route_all("migen")
    assert res["unk"] == 0
    assert {t - 1: p for t, p in got.items()} == {d: TOPO.route(NODE, d) for d in dsts}
    assert sum(1 for d in dsts if d >= TN) == 16
    assert res["req"] == len(dsts)              # one kernel request per packet


def test_table_alone_drops_beyond_the_table():
    dsts, got, res = _route_all("table")
    assert sorted(t - 1 for t in got) == [d for d in dsts if d < TN]
    assert res["unk"] == sum(1 for d in dsts if d >= TN)


def test_kernel_table_entry_wins_inside_the_table():
    """Inside the table the kernel takes the entry, even one no computation gives
    (dst 3 routed to YM although dimension order says X first)."""
    b = Bench(4, route_fn="migen", dims=(TOPO.x, TOPO.y))

    def main():
        yield from b.load({3: Port.YM})
        yield from b.send(Port.LOCAL, [pkt(3, tag=7)])
        for _ in range(60):
            yield
    b.run(main)
    assert [w[1] for w in b.words(Port.YM)] == [7]


def test_route_fn_option_checked():
    with pytest.raises(ValueError):
        Router(n_links=2, route_fn="nope")
    with pytest.raises(ValueError):          # the C++ kernel's table has 256 entries
        Router(n_links=2, route_fn="sim", table_nodes=512)


@pytest.mark.parametrize("dims,ids", [((8, 4), [0, 10, 31, 7]), ((4096, 1), [4095, 1]), ((5, 3), [14, 5])])
def test_route_coords(dims, ids):
    dut = RouteCoords(dims)
    got = []

    def gen():
        for nid in ids:
            yield dut.node_id.eq(nid)
            yield
            yield
            while not (yield dut.ready):
                yield
            got.append(((yield dut.node_x), (yield dut.node_y)))
    run_simulation(dut, gen())
    assert got == [(i % dims[0], i // dims[0]) for i in ids]


def test_beyond_the_table_costs_four_cycles():
    """Unloaded, a destination beyond the table leaves 4 cycles later than one inside it:
    the twin's long path (the divider, latency 5) against its short one (latency 1)."""
    from test_router import HOP

    lat = {}
    for dst in (11, 27):          # (3, 1) in the table, (3, 3) beyond it
        b = Bench(4, route_fn="migen", dims=(TOPO.x, TOPO.y))

        def main():
            x, y = TOPO.coords(NODE)
            yield b.dut.node_x.eq(x)
            yield b.dut.node_y.eq(y)
            yield from b.load({11: Port.XP})
            for _ in range(5):
                yield
            yield from b.send(Port.XM, [pkt(dst, length=24)])
            for _ in range(40):
                yield
        b.run(main)
        out = TOPO.route(NODE, dst)
        lat[dst] = b.hdr_out[out][0] - b.commit_cycle[Port.XM][0]
    assert lat == {11: HOP["migen"] - 1, 27: HOP["migen"] - 1 + 4}
