"""The firmware core (firmware/core) on fwnet, a packet-level model of a cluster.

Every node runs the real core against a model of its NIC (tests/firmware/fwnet.c); the
tests check its decisions against the spec: node ids by the documented rule, routing
tables equal to paranic.spec.topo's (with and without failed links), exactly-once delivery
across a cable pull, routes restored when the cable returns.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from paranic.spec.fw import FwError, FwState
from paranic.spec.protocol import Port
from paranic.spec.topo import Topology

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fwnet(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("fwnet") / "fwnet"
    srcs = [ROOT / "tests/firmware/fwnet.c", *sorted((ROOT / "firmware/core").glob("*.c")),
            ROOT / "spec/c/pn_route.c"]
    subprocess.run(["gcc", "-std=gnu11", "-O1", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror",
                    "-Wno-unused-parameter", "-I", ROOT / "firmware/core", "-I", ROOT / "spec/c",
                    "-I", ROOT / "userlib/include", "-o", exe, *srcs], check=True)
    return exe


def run(fwnet: Path, *args: str) -> dict:
    r = subprocess.run([str(fwnet), *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def expected_ids(t: Topology, out: dict, anchor: int | None = None, anchor_id: int = 0) -> list[int]:
    """Node index i sits at position i of the cabling; the anchor (lowest DNA unless
    given) gets ``anchor_id``, everyone else follows from the cabling."""
    dnas = [int(n["dna"], 16) for n in out["nodes"]]
    a = dnas.index(min(dnas)) if anchor is None else anchor
    (ax, ay), (bx, by) = t.coords(a), t.coords(anchor_id)
    return [t.node(x - ax + bx, y - ay + by) for x, y in map(t.coords, range(t.nodes))]


@pytest.mark.parametrize("spec,seed", [("ring:4", 1), ("ring:7", 2), ("torus:2x2", 3),
                                       ("torus:3x3", 4), ("torus:4x3", 5)])
def test_bring_up(fwnet, spec, seed):
    t = Topology.parse(spec)
    out = run(fwnet, "--topo", spec, "--dna-seed", str(seed), "--ticks", "400")
    assert out["routed_at"] > 0
    ids = [n["id"] for n in out["nodes"]]
    assert ids == expected_ids(t, out)
    assert len({n["fingerprint"] for n in out["nodes"]}) == 1
    for n in out["nodes"]:
        assert n["state"] == FwState.ROUTED
        assert n["links_in"] == (1 << t.link_ports) - 1
        assert n["table"] == t.table(n["id"])
        assert n["coords"] == list(t.coords(n["id"]))


@pytest.mark.parametrize("spec", ["ring:4", "torus:2x2", "torus:3x3"])
def test_control_traffic_settles(fwnet, spec):
    """Once the cluster agrees, the firmware sends nothing more: the count of HELLO and
    LSA packets is the same after 400 and after 4000 ticks (a 2x2 torus has two cables
    between neighbours, over which a node's own LSA comes straight back)."""
    short = run(fwnet, "--topo", spec, "--ticks", "400")["control_packets"]
    long = run(fwnet, "--topo", spec, "--ticks", "4000")["control_packets"]
    t = Topology.parse(spec)
    assert short == long <= 4 * t.nodes * t.nodes * t.link_ports


def test_ids_stable_across_reboots(fwnet):
    out = run(fwnet, "--topo", "torus:3x3", "--dna-seed", "9", "--ticks", "400", "--boot-twice")
    assert out["first_ids"] == [n["id"] for n in out["nodes"]]


def test_configured_id_wins(fwnet):
    t = Topology.parse("ring:5")
    out = run(fwnet, "--topo", "ring:5", "--cfg", "3=1", "--ticks", "400")
    assert [n["id"] for n in out["nodes"]] == expected_ids(t, out, anchor=3, anchor_id=1)
    assert out["nodes"][3]["id"] == 1
    # two configured ids that the cabling cannot both honour: an error, no routes
    out = run(fwnet, "--topo", "ring:5", "--cfg", "3=1", "--cfg", "4=1", "--ticks", "400")
    assert out["routed_at"] == 0
    assert all(n["state"] == FwState.ERROR and n["error"] == FwError.ID_CONFLICT
               for n in out["nodes"])


def _down(t: Topology, cable: int) -> list[tuple[int, int]]:
    n = cable // (t.link_ports // 2)
    p = Port.XP if cable % (t.link_ports // 2) == 0 else Port.YP
    m, q = t.neighbor(n, p)
    return [(n, p), (m, q)]


@pytest.mark.parametrize("spec,cable", [("ring:4", 1), ("ring:6", 5), ("torus:2x2", 2),
                                        ("torus:3x3", 7), ("torus:3x3", 4)])
def test_cable_pulled_during_traffic(fwnet, spec, cable):
    """All-to-all traffic; a cable is pulled: every packet arrives exactly once and, per
    source and destination, in the order sent (the flush of docs/firmware.md "Route
    changes"); the tables route around it (paranic.spec.topo with the cable down), the
    state is DEGRADED."""
    t = Topology.parse(spec)
    out = run(fwnet, "--topo", spec, "--ticks", "2500", "--traffic", "30000", "--cut", f"{cable}@150")
    tr = out["traffic"]
    assert tr["sent"] > 5000
    assert tr["once"] == tr["sent"], tr
    assert tr["out_of_order"] == 0, tr
    assert tr["lost"] == 0 and tr["flush_timeouts"] == 0, tr
    assert tr["diverted"] > 0, tr   # packets queued for the cut link took the new routes
    assert out["rerouted_at"] > 150
    down = _down(t, cable)
    for n in out["nodes"]:
        assert n["state"] == FwState.DEGRADED
        assert n["table"] == t.table(n["id"], down=[(out["nodes"][i]["id"], p) for i, p in down])


@pytest.mark.parametrize("spec,cable", [("ring:4", 0), ("torus:3x3", 10)])
def test_cable_returns(fwnet, spec, cable):
    t = Topology.parse(spec)
    out = run(fwnet, "--topo", spec, "--ticks", "2500", "--traffic", "30000",
              "--cut", f"{cable}@150", "--mend", f"{cable}@700")
    tr = out["traffic"]
    assert tr["once"] == tr["sent"] > 5000, tr
    assert tr["out_of_order"] == 0 and tr["flush_timeouts"] == 0, tr
    assert out["restored_at"] > 700
    for n in out["nodes"]:
        assert n["state"] == FwState.ROUTED
        assert n["table"] == t.table(n["id"])
        assert n["link_downs"] in (0, 1)


@pytest.mark.parametrize("spec,cable", [("ring:4", 0), ("ring:6", 2), ("torus:3x3", 4)])
def test_link_taken_out_with_its_cable_whole(fwnet, spec, cable):
    """During all-to-all traffic one end's link layer takes the link out (as at its replay
    limit) while the cable stays whole, so a restarted link trains again at once: every
    packet still arrives exactly once and in order, and the link is back in the routes at
    the end. (The model re-routes a waiting queue in one step, so it does not show the
    reordering a restart during the change caused on the SoC cluster; that case is
    tests/sim/test_firmware_sim.py's BER 1e-3 test.)"""
    t = Topology.parse(spec)
    out = run(fwnet, "--topo", spec, "--ticks", "4000", "--traffic", "30000", "--fail", f"{cable}@150")
    tr = out["traffic"]
    assert tr["sent"] > 5000
    assert tr["once"] == tr["sent"], tr
    assert tr["out_of_order"] == 0, tr
    assert tr["lost"] == 0 and tr["flush_timeouts"] == 0, tr
    assert tr["evacuated"] > 0, tr
    for n in out["nodes"]:
        assert n["state"] == FwState.ROUTED, n
        assert n["table"] == t.table(n["id"])


def test_second_cable_during_a_route_change(fwnet):
    """A second cable (another ring) fails while the cluster is still switching to routes
    around the first: FLUSHes caught behind the second failure give up after
    FW_FLUSH_TIMEOUT (counted), the next plan takes both out, and every packet still
    arrives exactly once."""
    t = Topology.parse("torus:3x3")
    out = run(fwnet, "--topo", "torus:3x3", "--ticks", "8000", "--traffic", "60000",
              "--cut", "0@700", "--cut", "7@702")
    tr = out["traffic"]
    assert tr["once"] == tr["sent"] == 60000, tr
    assert tr["lost"] == 0 and tr["flush_timeouts"] > 0, tr
    down = _down(t, 0) + _down(t, 7)
    for n in out["nodes"]:
        assert n["state"] == FwState.DEGRADED
        assert n["table"] == t.table(n["id"], down=[(out["nodes"][i]["id"], p) for i, p in down])
