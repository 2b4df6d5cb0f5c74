"""The ports layer (userlib/src/ports_*.c) on the simulated 4-node ring: the same C
program as on `sw` (userlib/tests/ports_test.c), so the protocol runs over the
gateware's host interface, the NIC's separate PIO and DMA engines and the simulated
PCIe latencies; and the hardware-path latency of an eager message against a
rendezvous one (simulated time)."""

from __future__ import annotations

import json

import pytest

from simtest import TESTS, launch

PORTS_TEST = str(TESTS / "ports_test")
PORTS_FAULT_TEST = str(TESTS / "ports_fault_test")


def _quiet(sim) -> None:
    """Wait until the previous test's clients have detached (a fresh job size)."""
    import time

    t0 = time.time()
    while not (sim.counters()["clients"] == 0 and sim.counters()["job_nodes"] == 0):
        assert time.time() - t0 < 60, "the previous test's clients did not detach"
        time.sleep(0.05)


def test_sizes(sim4):
    """0, 1, MTU-1, MTU, MTU+1, eager max, eager max + 1, 1 MiB: to a peer from plain
    memory, back from DMA memory into receives posted first, and to itself."""
    from paranic.lib import CONSTANTS

    _quiet(sim4)
    r = launch(sim4, [PORTS_TEST, "sizes", "sim"], 2, "pt-sizes", timeout=300)
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "sizes").startswith("ok sizes 8 sizes to node 1 and back (posted first), to itself; "
                                       f"eager max {CONSTANTS['PN_PORT_DEFAULT_EAGER_MAX']}")
    assert r.ok(1, "sizes") == "ok sizes received and echoed 8 messages (6 eager, 2 rendezvous)"


@pytest.mark.parametrize("case", ["match", "forge"])
def test_matching_and_forged_source(sim4, case):
    """Matching (unexpected then posted, posted then arrived, masks, EMSGSIZE, time
    limits, cancel); a forged source field stamped over by the NIC, and messages sent
    out of order matched in their connection's order."""
    _quiet(sim4)
    prog = PORTS_FAULT_TEST if case == "forge" else PORTS_TEST
    r = launch(sim4, [prog, case, "sim"], 3, f"pt-{case}", timeout=300)
    assert r.rc == 0 and not r.fails(), r.out
    r.ok(0, case)
    if case == "forge":
        assert "(2 held back)" in r.ok(0, case)


def test_bad_input_and_closed_ports(sim4):
    _quiet(sim4)
    r = launch(sim4, [PORTS_FAULT_TEST, "errors", "sim"], 2, "pt-errors", timeout=300,
               env={"PARANIC_PORT_TIMEOUT_MS": "500"})
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "errors sender").startswith("ok errors sender: bad arguments, registration, options, refused "
                                               "(500 ms), reset, slow receiver kept alive")


def test_killed_peer(sim4):
    """Node 1's process is killed while it streams to node 2 and node 0 waits for its
    CTS: both survivors' operations end with an error (the harness drops packets for the
    dead context; nobody answers the pings), nothing hangs, and the process that takes
    node 1's context later talks to both. The timeout is wall time and must exceed
    what a busy simulator needs for a round trip (300 ms is too short here)."""
    _quiet(sim4)
    r = launch(sim4, [PORTS_FAULT_TEST, "kill", "sim"], 3, "pt-kill", timeout=300,
               extra=["-f", "-k", "1:100:phase-kill", "-r", "2500"], env={"PARANIC_PORT_TIMEOUT_MS": "1500"})
    assert r.rc == 0 and not r.fails(), r.out
    assert "launch: node 1 killed by signal 9, respawning in 2500 ms" in r.launch
    assert "ok kill the new process on node 1 talked to both survivors" in r.nodes[1], r.out


def test_eager_against_rendezvous_latency(sim4):
    """Ping-pong one-way latency in simulated time (the hardware path): an 8-byte eager
    message is one PIO packet, by rendezvous it needs RTS and CTS first; at the eager
    limit (16 KiB) eager still wins, by about the RTS/CTS round trip."""
    from paranic.lib import CONSTANTS

    e = CONSTANTS["PN_PORT_DEFAULT_EAGER_MAX"]
    _quiet(sim4)
    r = launch(sim4, [PORTS_TEST, "bench", "sim"], 2, "pt-bench", timeout=300,
               env={"PT_SIZES": f"8,{e}", "PT_EAGER": "0,default", "PT_ITERS": "0.05",
                    "PARANIC_EAGER_WINDOW": "262144"})
    assert r.rc == 0 and not r.fails(), r.out
    rows = {(d["eager_max"], d["bytes"]): d for d in (json.loads(ln) for ln in r.nodes[0] if ln.startswith("{"))}
    print("\n" + "\n".join(json.dumps(d) for d in rows.values()))
    eager8, rndv8 = rows[(e, 8)]["latency_min_ns"], rows[(0, 8)]["latency_min_ns"]
    eager_e, rndv_e = rows[(e, e)]["latency_min_ns"], rows[(0, e)]["latency_min_ns"]
    # (simulated time runs on while a client waits for a CPU, which only adds: bounds
    # are loose, the comparison is by the fastest iteration)
    assert 0 < eager8 < 4000 and rndv8 > eager8 + 1000, (eager8, rndv8)
    assert eager_e < rndv_e + 500, (eager_e, rndv_e)


def test_intra_node_path(sim4):
    """Two processes per node (``pn_launch -p 2``) on the simulated ring: the ports of a
    node talk through shared memory (ports_shm.c), not one packet of it through the
    simulated NIC; content and order as on `sw` (userlib/tests/ports_shm_test.c)."""
    import re

    _quiet(sim4)
    r = launch(sim4, [str(TESTS / "ports_shm_test"), "local", "sim"], 2, "pt-shm", timeout=300,
               extra=["-f", "-p", "2"])
    assert r.rc == 0 and not r.fails(), r.out
    lines = [ln for ls in r.procs.values() for ln in ls if ln.startswith("ok local")]
    assert len(lines) == 4, r.out
    for ln in lines:
        assert re.search(r"24 messages .* via shm; NIC packets 0$", ln), ln
