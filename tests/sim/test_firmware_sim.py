"""The firmware (firmware/, docs/firmware.md) on Verilator clusters of whole SoCs: it brings
the cluster up by itself (no host writes an id or a route), routes around a pulled cable
during traffic, puts it back, and takes a link with a high bit-error rate out.

Every node runs `make firmware`'s image; the harness only waits for the firmware
(docs/simulator.md, "SoC clusters") and injects faults (its fault requests).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from paranic.sim import build as simbuild, run as simrun
from paranic.sim.socbuild import make_firmware
from paranic.spec.fw import FwState
from paranic.spec.topo import Topology
from simtest import BUILD, TESTS, clean_env, launch, sim_socket

FAULTSTREAM = BUILD / "bin" / "pn_faultstream"
#: pn_faultstream --stall-limit: a receiver that got nothing for this many of its 10 s
#: reports in a row fails (a stall costs a minute, not the launch's time limit)
STALL_REPORTS = ["--stall-limit", "6"]
BASE_DNA = 0x5E11_0000_0000_0000


def status(sim) -> list[dict]:
    """Every node's `paranic cluster status --json` record, by node index."""
    r = subprocess.run(["paranic", "cluster", "status", "--backend", "sim", "--json"],
                       env=sim.env(clean_env()), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    nodes = json.loads(r.stdout)["nodes"]
    return sorted(nodes, key=lambda n: n["index"])


def wait_state(sim, want: FwState, what: str, timeout: float = 120.0) -> list[dict]:
    """Poll the status until every node is in ``want`` with one fingerprint."""
    t0 = time.time()
    while True:
        st = status(sim)
        if all(n["fw_state"] == want.name.lower() for n in st) and \
                len({n["fingerprint"] for n in st}) == 1:
            return st
        assert time.time() - t0 < timeout, f"{what}: {[(n['fw_state'], n['fingerprint']) for n in st]}"
        time.sleep(0.5)


def expected_ids(t: Topology, dnas: dict[int, int]) -> list[int]:
    """The documented rule: the lowest DNA is node 0, the others follow the cabling."""
    a = min(dnas, key=dnas.get)
    ax, ay = t.coords(a)
    return [t.node(x - ax, y - ay) for x, y in map(t.coords, range(t.nodes))]


@pytest.fixture(scope="session")
def firmware_images():
    """`make firmware`'s images for 2- and 4-link nodes."""
    return {links: make_firmware(links) for links in (2, 4)}


# ---- bring-up ---------------------------------------------------------------------------------

#: DNAs in an order that is not the cabling's: node index 2 has the lowest.
RING_DNAS = {0: BASE_DNA + 0x40, 1: BASE_DNA + 0x30, 2: BASE_DNA + 0x10, 3: BASE_DNA + 0x20}


def test_ring_brings_itself_up_and_keeps_its_ids(soc_ring_binary, userlib_build, firmware_images):
    """ring:4: ROUTED with one fingerprint, ids by the lowest-DNA rule (not the index
    order), topology and coordinates right, the same ids after a reboot."""
    t = Topology.parse("ring:4")
    want = expected_ids(t, RING_DNAS)
    assert want != [0, 1, 2, 3]
    seen = []
    for boot in range(2):
        with simrun.start("ring:4", soc=True, dnas=RING_DNAS, socket=sim_socket(f"fw-ring-{boot}"),
                          timeout=600) as sim:
            assert sim.node_ids == want
            st = wait_state(sim, FwState.ROUTED, "ring bring-up")
            for n in st:
                assert n["node_id"] == want[n["index"]]
                assert n["topology"] == [4, 1] and n["coords"] == list(t.coords(n["node_id"]))
                assert n["links_in"] == 0b11 and n["lost"] == 0
                assert all(ln["state"] == "up" for ln in n["links"])
            print(f"ring:4 boot {boot}: routed {sim.bringup_cycles} cycles after reset "
                  f"({sim.bringup_cycles * 8e-3:.1f} us simulated)")
            seen.append(sim.node_ids)
    assert seen[0] == seen[1]


def test_configured_id_wins(soc_ring_binary, userlib_build, firmware_images):
    """A configured id on one board moves the numbering so that this board has it."""
    t = Topology.parse("ring:4")
    with simrun.start("ring:4", soc=True, dnas=RING_DNAS, node_ids={1: 0},
                      socket=sim_socket("fw-cfg"), timeout=600) as sim:
        assert sim.node_ids == [t.node(i - 1, 0) for i in range(4)]


def test_hal_conformance_through_the_firmware_routed_ring(soc_ring_binary, userlib_build,
                                                          firmware_images):
    """The HAL conformance vectors, on routes no host wrote (ids permuted by the DNAs)."""
    with simrun.start("ring:4", soc=True, dnas=RING_DNAS, socket=sim_socket("fw-conf"),
                      timeout=600) as sim:
        r = launch(sim, [str(TESTS / "hal_conformance"), "sim"], 4, "fw-conf4", timeout=900)
        assert r.rc == 0 and not r.fails(), r.out
        for node in range(4):
            assert r.nodes[node][-1] == "PASS", r.out
        assert "17 vectors, 1104 packets received" in r.ok(0, "vectors")


# ---- a cable pulled during traffic ------------------------------------------------------------


@pytest.fixture(scope="module", params=["ring:4", pytest.param("torus:2x2", marks=pytest.mark.slow)])
def soc_cut(request, userlib_build, firmware_images):
    """A cluster of SoCs running the firmware: ring:4 (the build the tests above use) and,
    with -m slow, torus:2x2 (its own build: minutes the first time)."""
    topo = request.param
    simbuild.build(topo, soc=True)
    sim = simrun.start(topo, soc=True, socket=sim_socket(f"fw-cut-{topo.replace(':', '')}"), timeout=600)
    try:
        yield sim
    finally:
        rc = sim.stop()
        assert rc == 0, sim.log_text()[-3000:]


def _run_all_to_all(sim, name: str, count: int, during=None) -> list[dict]:
    """pn_faultstream --all on every node (2 KiB messages: two packets each, so a reroute
    splits messages), ``during(sim)`` run in a thread once the job has started; the
    per-node JSON results."""
    th = None
    if during is not None:
        th = threading.Thread(target=during, args=(sim,), daemon=True)
        th.start()
    r = launch(sim, [str(FAULTSTREAM), "--backend", "sim", "--all", "--count", str(count),
                     "--bytes", "2048", *STALL_REPORTS], 4, name, timeout=300)
    if th is not None:
        th.join(timeout=60)
    assert r.rc == 0 and not r.fails(), r.out
    out = []
    for node in range(4):
        lines = [ln for ln in r.nodes[node] if ln.startswith("{")]
        assert lines, r.out
        out.append(json.loads(lines[-1]))
    return out


def test_cable_pulled_during_all_to_all(soc_cut):
    """A cable is cut while every node sends to every other: every message arrives exactly
    once, intact and in order per sender (messages of two packets: one split by the
    reroute would never complete); the firmware routes around it (DEGRADED, one
    fingerprint); mended, the cable is put back (ROUTED, every link in use, a newer plan).
    On the ring the node at each end of the cut has one live input left, which transit
    packets waiting for the cut block until divert (the control lane's case)."""
    t = Topology.parse(soc_cut.info["topo"])
    cable = 0                                   # node index 0's XP to node index 1's XM
    before = wait_state(soc_cut, FwState.ROUTED, "bring-up")
    epoch0 = {n["index"]: n["epoch"] for n in before}
    cut_at = {}

    def traffic(sim) -> int:
        return sum(ln["tx_packets"] for n in status(sim) for ln in n["links"])

    def cut(sim):
        # once the messages flow (a hundred packets on the links), not by the clock
        base = traffic(sim)
        t0 = time.time()
        while traffic(sim) < base + 100 and time.time() - t0 < 300:
            time.sleep(0.2)
        with sim.control() as c:
            cut_at["cycle"] = c.cut(cable)["at_cycle"]

    res = _run_all_to_all(soc_cut, "fw-a2a-cut", 100, during=cut)
    assert "cycle" in cut_at
    for r in res:
        assert r["received"] == r["sent"] == 3 * 100
        assert r["duplicates"] == 0 and r["corrupt"] == 0 and r["out_of_order"] == 0
    st = wait_state(soc_cut, FwState.DEGRADED, "reroute after the cut")
    a, pa, b, pb = t.cables()[cable]
    assert all(n["lost"] == 0 for n in st)
    assert st[a]["links_in"] & (1 << (pa - 1)) == 0 and st[b]["links_in"] & (1 << (pb - 1)) == 0
    assert st[a]["link_downs"] >= 1 and st[b]["link_downs"] >= 1
    assert all(n["flush_timeouts"] == 0 for n in st)
    evacuated = sum(n["evacuated"] for n in st)
    print(f"cut at cycle {cut_at['cycle']}: {evacuated} packets replayed by another path")

    with soc_cut.control() as c:
        c.mend(cable)
    st = wait_state(soc_cut, FwState.ROUTED, "cable put back")
    # Nodes whose table the cut changes (paranic.spec.topo) loaded it twice: around the
    # cable and back; the others never changed theirs.
    ids = soc_cut.node_ids
    down = [(ids[a], pa), (ids[b], pb)]
    for n in st:
        assert n["links_in"] == (1 << t.link_ports) - 1
        changed = t.table(n["node_id"], down=down) != t.table(n["node_id"])
        assert n["epoch"] >= epoch0[n["index"]] + (2 if changed else 0), (n, changed)
    assert any(t.table(i, down=down) != t.table(i) for i in range(4))
    res = _run_all_to_all(soc_cut, "fw-a2a-after", 40)
    assert all(r["received"] == r["sent"] and r["out_of_order"] == 0 for r in res)


#: cycles from asking for the job to the cut: once its packets flow (measured on ring:4: the
#: cut 40 000 cycles after asking, 8 packets on the cable replayed, the messages arriving
#: from 24 000 cycles after the cut to 400 000 after it). With the old router the cuts
#: tried there (30 000 and 46 720 cycles after asking, and one at cycle 560 000) all hung;
#: with the fix cuts at 20 000 to 60 000 all passed. The traffic-triggered cut above came
#: later (often nothing replayed).
CUT_AFTER = 40_000


def test_cable_cut_at_a_fixed_cycle_of_all_to_all(soc_cut):
    """The cut of the test above at a fixed moment: CUT_AFTER cycles after the job is asked
    for, while every node still streams (checked: before the last message arrives), so that
    packets for the cable wait in the routers' queues while the new plan is armed. Those
    were 'diverted' to the dead link and stayed there for ever, stopping both ends' senders
    (docs/architecture.md, "Virtual output queues": the other set's route is read at the
    queue head); the traffic-triggered cut above usually came too late to catch it."""
    wait_state(soc_cut, FwState.ROUTED, "before the cut")
    with soc_cut.control() as c:
        at = c.cut(0, at=c.query(0)["cycle"] + CUT_AFTER)["at_cycle"]
    res = _run_all_to_all(soc_cut, "fw-a2a-cutat", 100)
    assert at < max(r["last_cycle"] for r in res), (at, res)
    for r in res:
        assert r["received"] == r["sent"] == 3 * 100
        assert r["duplicates"] == 0 and r["corrupt"] == 0 and r["out_of_order"] == 0
    st = wait_state(soc_cut, FwState.DEGRADED, "reroute after the cut")
    assert all(n["lost"] == 0 and n["flush_timeouts"] == 0 for n in st)
    print(f"cut at cycle {at}, messages arrived in cycles {min(r['first_cycle'] for r in res)}.."
          f"{max(r['last_cycle'] for r in res)}: {sum(n['evacuated'] for n in st)} packets replayed "
          "by another path")
    with soc_cut.control() as c:
        c.mend(0)
    wait_state(soc_cut, FwState.ROUTED, "cable put back")



# ---- a noisy link -----------------------------------------------------------------------------


@pytest.mark.slow
def test_link_at_ber_1e3_is_taken_out_or_progresses(soc_ring_binary, userlib_build, firmware_images):
    """Cable 0 at a bit-error rate of 1e-3: a stream across it either still progresses or
    the link goes down and is routed around. Never a silent stall: the stream of 4 KiB
    messages (four packets each) completes, every message exactly once and in order."""
    with simrun.start("ring:4", soc=True, ber_cable=["0=1e-3"], socket=sim_socket("fw-ber"),
                      timeout=600) as sim:
        a, _, b, _ = Topology.parse("ring:4").cables()[0]
        src, dst = sim.node_ids[a], sim.node_ids[b]
        r = launch(sim, [str(FAULTSTREAM), "--backend", "sim", "--src", str(src), "--dst", str(dst),
                         "--count", "100", "--bytes", "4096", *STALL_REPORTS], 4, "fw-ber", timeout=400)
        assert r.rc == 0 and not r.fails(), r.out
        res = json.loads(next(ln for ln in r.nodes[dst] if ln.startswith("{")))
        assert res["received"] == res["sent"] == 100 and res["duplicates"] == 0 and res["corrupt"] == 0
        assert res["out_of_order"] == 0
        st = status(sim)
        downs = st[a]["link_downs"] + st[b]["link_downs"]
        print(f"BER 1e-3 on cable 0: {res['MBps']:.1f} MB/s, link downs {downs}, "
              f"states {[n['fw_state'] for n in st]}")
