"""Routing tables: every route reaches its destination along a shortest X-then-Y path."""

import pytest

from paranic.spec.protocol import Port, port_dimension
from paranic.spec.topo import Topology


@pytest.mark.parametrize("spec", ["ring:1", "ring:2", "ring:5", "ring:8", "torus:2x2",
                                  "torus:3x3", "torus:4x4", "torus:5x3"])
def test_routes_reach_destination_minimally(spec):
    t = Topology.parse(spec)
    for s in range(t.nodes):
        assert t.route(s, s) == Port.LOCAL
        for d in range(t.nodes):
            path = t.path(s, d)
            assert path[0] == s and path[-1] == d
            (sx, sy), (dx, dy) = t.coords(s), t.coords(d)
            ddx = min((dx - sx) % t.x, (sx - dx) % t.x)
            ddy = min((dy - sy) % t.y, (sy - dy) % t.y)
            assert len(path) - 1 == ddx + ddy
            # dimension order: once a Y port is used, no X port follows
            dims = [port_dimension(t.route(n, d)) for n in path[:-1]]
            assert dims == sorted(dims)


def test_wiring_is_symmetric():
    t = Topology.torus(4, 4)
    links = t.links()
    assert len(links) == 16 * 4
    for n, p, m, q in links:
        assert t.neighbor(m, q) == (n, p)


def test_table_drops_unknown():
    t = Topology.ring(4)
    tab = t.table(0, depth=8)
    assert tab[:4] == [Port.LOCAL, Port.XP, Port.XP, Port.XM]
    assert tab[4:] == [Port.DROP] * 4
    assert t.route(0, 99) == Port.DROP


def test_parse_errors():
    for bad in ["torus:4", "mesh:3", "ring:0", "ring:x"]:
        with pytest.raises(ValueError):
            Topology.parse(bad)


@pytest.mark.parametrize("pattern", ["tornado", "transpose", "bitcomp", "all-to-one"])
def test_patterns_are_in_range(pattern):
    for t in (Topology.ring(8), Topology.torus(4, 4)):
        dsts = [t.pattern_dst(pattern, s) for s in range(t.nodes)]
        assert all(0 <= d < t.nodes for d in dsts)
        if pattern != "all-to-one":
            assert sorted(dsts) == list(range(t.nodes)), "permutation"
