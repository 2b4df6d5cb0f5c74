"""Routing tables: every route reaches its destination along a shortest X-then-Y path."""

import re

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


@pytest.mark.parametrize("text", ["ring:1", "ring:2", "ring:4", "ring:7", "torus:2x2", "torus:3x3", "torus:4x2"])
def test_cables_each_once_numbered_from_the_plus_end(text):
    t = Topology.parse(text)
    cables = t.cables()
    # One cable per pair of directed links, each directed link in exactly one cable.
    assert 2 * len(cables) == len(t.links())
    ends = [(n, p) for n, p, _, _ in cables] + [(m, q) for _, _, m, q in cables]
    assert sorted(ends) == sorted((n, p) for n, p, _, _ in t.links())
    for k, (n, p, m, q) in enumerate(cables):
        assert p in (Port.XP, Port.YP) and t.neighbor(n, p) == (m, q)
        assert t.cable_of(n, p) == k == t.cable_of(m, q)
    if not t.is_torus:
        assert cables == [(k, Port.XP, (k + 1) % t.x, Port.XM) for k in range(t.x)]
    else:
        assert [c[:2] for c in cables[::2]] == [(n, Port.XP) for n in range(t.nodes)]
        assert [c[:2] for c in cables[1::2]] == [(n, Port.YP) for n in range(t.nodes)]


def test_fault_options_checked():
    from paranic.sim.faults import fault_args
    from paranic.spec.sim import ber_to_threshold

    assert fault_args("ring:4", ["2=1e-4"], ["1@100"], ["1@0x200"]) == [
        "--ber-cable", f"2={ber_to_threshold(1e-4)}", "--cut", "1@100", "--mend", "1@512"]
    for kw, msg in ((dict(cut=["4@1"]), "no cable '4' (ring:4 has cables 0..3"),
                    (dict(cut=["1@-1"]), "non-negative"), (dict(mend=["1"]), "K@CYCLE"),
                    (dict(ber_cable=["0=1.5"]), "0..1"), (dict(ber_cable=["0=nan"]), "0..1"),
                    (dict(ber_cable=["x=0"]), "no cable 'x'")):
        with pytest.raises(ValueError, match=re.escape(msg)):
            fault_args("ring:4", **kw)
