"""Routing around failed cables (spec/c/pn_route.c through paranic.spec.topo).

A failed cable turns its ring (row or column) into a line: with at most one failed cable per
ring every destination stays reachable, no path uses a failed cable, routes stay in
dimension order (deadlock freedom argument of docs/architecture.md carries over), and each
dimension's leg is the only way along the line. Two failed cables in one ring cut it.
"""

import itertools
import random

import pytest

from paranic.spec.protocol import Port, port_dimension
from paranic.spec.topo import Topology


def _cable_down(t, node, port):
    """Both ends of the cable leaving ``node`` on ``port``, as the firmware reports them."""
    m, q = t.neighbor(node, port)
    return [(node, port), (m, q)]


def _uses(t, path, d, down):
    bad = set(down)
    for a in path[:-1]:
        p = t.route(a, d, down)
        m, q = t.neighbor(a, p)
        assert (a, p) not in bad and (m, q) not in bad, (path, a, p)


def _check_all(t, down):
    for s, d in itertools.product(range(t.nodes), repeat=2):
        path = t.path(s, d, down)
        assert path[0] == s and path[-1] == d
        _uses(t, path, d, down)
        dims = [port_dimension(t.route(n, d, down)) for n in path[:-1]]
        assert dims == sorted(dims)
        # each leg is monotone: one direction per dimension
        ports = [t.route(n, d, down) for n in path[:-1]]
        for dim in (0, 1):
            assert len({p for p in ports if port_dimension(p) == dim}) <= 1


@pytest.mark.parametrize("spec", ["ring:2", "ring:4", "ring:7", "torus:2x2", "torus:3x3", "torus:4x3"])
def test_every_single_cable_failure_is_routed_around(spec):
    t = Topology.parse(spec)
    for n, p in itertools.product(range(t.nodes), t.ports):
        _check_all(t, [(n, p)])        # one end reporting is enough


def test_one_failure_per_ring_keeps_a_torus_connected():
    t = Topology.parse("torus:4x4")
    rng = random.Random(7)
    for _ in range(20):
        down = []
        for y in range(t.y):        # one X cable in every row
            down += _cable_down(t, t.node(rng.randrange(t.x), y), Port.XP)
        for x in range(t.x):        # and one Y cable in every column
            down += _cable_down(t, t.node(x, rng.randrange(t.y)), Port.YP)
        _check_all(t, down)


def test_ring_becomes_a_line():
    t = Topology.ring(8)
    down = _cable_down(t, 3, Port.XP)          # the cable between 3 and 4
    assert t.path(3, 4, down) == [3, 2, 1, 0, 7, 6, 5, 4]
    assert t.path(0, 5, down) == [0, 7, 6, 5]
    assert t.path(2, 5, down) == [2, 1, 0, 7, 6, 5]
    # untouched pairs keep their shortest routes
    assert t.table(0, down=down)[:3] == t.table(0)[:3]


def test_two_cuts_in_a_ring_partition_it():
    t = Topology.ring(6)
    down = _cable_down(t, 0, Port.XP) + _cable_down(t, 3, Port.XP)
    tab = t.table(1, down=down)
    assert tab[2] == Port.XP and tab[3] == Port.XP
    assert tab[0] == Port.DROP and tab[4] == Port.DROP and tab[5] == Port.DROP
    with pytest.raises(ValueError, match="unreachable"):
        t.path(1, 5, down)


def test_bad_down_entries_are_refused():
    t = Topology.ring(4)
    with pytest.raises(ValueError):
        t.table(0, down=[(0, Port.YP)])
    with pytest.raises(ValueError):
        t.table(0, down=[(9, Port.XP)])


def test_paranic_topo_down(capsys):
    from paranic.cli import main

    assert main(["topo", "ring:4", "--down", "0:xp", "--json"]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert out["down"] == [[0, "XP"]]
    assert out["tables"]["0"] == ["LOCAL", "XM", "XM", "XM"]
    assert main(["topo", "ring:4", "--down", "0:yp"]) == 2
    assert "no link port yp" in capsys.readouterr().err
    assert main(["topo", "torus:2x2", "--down", "1:up"]) == 2
    assert "bad failed link" in capsys.readouterr().err
