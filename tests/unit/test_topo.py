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


# -- ties: a destination exactly half way round an even ring ---------------------------

TIE_TOPOS = ["ring:8", "ring:6", "ring:2", "torus:4x4", "torus:4x6", "torus:2x2"]


def _tie_up_reference(t: Topology, src: int, dst: int) -> dict[int, bool]:
    """Independent model of the tie rule (pn_route.c's tie_up): per dimension with a
    tie, whether the packet goes +. X is decided at the source (key: the destination's
    y), Y at the node where the packet turns, (dst x, src y) (key: the destination's x)."""
    (sx, sy), (dx, dy) = t.coords(src), t.coords(dst)
    out = {}
    if t.x % 2 == 0 and (dx - sx) % t.x == t.x // 2:
        out[0] = t.ties == "plus" or (sx + dy) % 2 == 0
    if t.y % 2 == 0 and t.y > 1 and (dy - sy) % t.y == t.y // 2:
        out[1] = t.ties == "plus" or (sy + dx) % 2 == 0
    return out


@pytest.mark.parametrize("ties", ["split", "plus"])
@pytest.mark.parametrize("spec", TIE_TOPOS)
def test_tie_rule_c_equals_reference(spec, ties):
    """For every pair, the ports the C routing function (through ctypes) takes in a
    tied dimension are the ones the rule says, and every hop of a dimension goes the
    same way (minimal)."""
    t = Topology.parse(spec, ties)
    plus = {0: Port.XP, 1: Port.YP}
    minus = {0: Port.XM, 1: Port.YM}
    for s in range(t.nodes):
        for d in range(t.nodes):
            path = t.path(s, d)
            ports = [t.route(n, d) for n in path[:-1]]
            for dim, up in _tie_up_reference(t, s, d).items():
                used = [p for p in ports if port_dimension(p) == dim]
                half = (t.x if dim == 0 else t.y) // 2
                assert used == [plus[dim] if up else minus[dim]] * half, (spec, s, d, dim)


@pytest.mark.parametrize("spec", TIE_TOPOS)
def test_pair_always_same_path(spec):
    """Tables are per destination: from every node on the path s -> d, the route to d
    continues the same path (so a (source, destination) pair always takes one path, and
    links being FIFOs, arrives in order), and repeated lookups agree."""
    t = Topology.parse(spec)
    tables = [t.table(n) for n in range(t.nodes)]
    for s in range(t.nodes):
        for d in range(t.nodes):
            path = t.path(s, d)
            for i, n in enumerate(path):
                assert t.path(n, d) == path[i:]
                assert tables[n][d] == t.route(n, d)


def test_ties_split_evenly_on_ring8():
    """Split: of ring:8's 8 ties, 4 go each way, alternating; plus: all 8 go +."""
    split = [Topology.parse("ring:8").route(s, (s + 4) % 8) for s in range(8)]
    assert split == [Port.XP, Port.XM] * 4
    plus = [Topology.parse("ring:8", "plus").route(s, (s + 4) % 8) for s in range(8)]
    assert plus == [Port.XP] * 8
    with pytest.raises(ValueError, match="tie rule"):
        Topology.ring(8, "minus")


# -- channel-load bounds ----------------------------------------------------------------

@pytest.mark.parametrize("spec,ties,pattern,bound", [
    # ring:8 uniform: per + link 1+2+3 hops of non-ties + 4 of the ties, over 7 dests;
    # split: (1+2+3+4/2)/7 = 8/7 -> 7/8; plus: (1+2+3+4)/7 = 10/7 -> 0.7
    ("ring:8", "split", "uniform", 7 / 8),
    ("ring:8", "plus", "uniform", 0.7),
    # ring:6: split (1+2+ at most 2 of 3 ties)/5 = 1 -> 1.0; plus (1+2+3)/5 -> 5/6
    ("ring:6", "split", "uniform", 1.0),
    ("ring:6", "plus", "uniform", 5 / 6),
    # torus:4x4 uniform: X and Y links 8/15 (split) or 12/15 (plus), injection 1 -> 1.0
    ("torus:4x4", "split", "uniform", 1.0),
    ("torus:4x4", "plus", "uniform", 1.0),
    # tornado: ring:8 every node sends 3 hops +: 3 per link -> 1/3; torus:4x4 (+1, +1)
    ("ring:8", "split", "tornado", 1 / 3),
    ("torus:4x4", "split", "tornado", 1.0),
    # ring:8 reversal s -> 7-s (transpose, bitcomp): 2->5 and 3->4 both go + over the
    # link 3->4 (6->1 and 7->0 over 7->0; 5->2, 4->3 - over 4->3): load 2 -> 0.5
    ("ring:8", "split", "transpose", 0.5),
    ("ring:8", "split", "bitcomp", 0.5),
])
def test_bounds_hand_values(spec, ties, pattern, bound):
    assert Topology.parse(spec, ties).saturation_bound(pattern) == pytest.approx(bound)


@pytest.mark.parametrize("spec", ["ring:8", "ring:6", "torus:4x4", "torus:4x6"])
def test_hot_spot_bound(spec):
    """All-to-one: node 0's ejection port carries everything: 1/(N-1) per node when node
    0 is silent, 1/N when it sends to itself as the traffic generator does."""
    t = Topology.parse(spec)
    assert t.saturation_bound("all-to-one", self_traffic=False) == pytest.approx(1 / (t.nodes - 1))
    assert t.saturation_bound("all-to-one") == pytest.approx(1 / t.nodes)


def test_channel_loads_conserve_hops():
    """Sum of link loads = mean hop count x nodes; injection and ejection loads 1."""
    t = Topology.parse("torus:4x4")
    loads = t.channel_loads("uniform")
    hops = sum(t.hops(s, d) for s in range(16) for d in range(16) if s != d) / 15
    assert sum(v for k, v in loads.items() if k[0] == "link") == pytest.approx(hops)
    assert all(loads[("inject", i)] == pytest.approx(1) for i in range(16))
    assert all(loads[("eject", i)] == pytest.approx(1) for i in range(16))
    with pytest.raises(ValueError, match="unknown pattern"):
        t.saturation_bound("zigzag")
