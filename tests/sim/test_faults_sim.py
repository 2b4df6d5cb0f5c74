"""Fault injection on the Verilator cluster (ring:4, no firmware): a cable cut at a
chosen cycle, from the socket (SimControl) and from the command line, takes both of
its link ends DOWN (loss of signal) in their link_state CSRs while the other links stay
UP; mending it brings nothing back by itself (no firmware restarts the links); bad
cable numbers, cycles and thresholds are refused with clear errors.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from simtest import sim_socket
from paranic.hw.standalone import read_csr_json
from paranic.sim import run as simrun
from paranic.sim.faults import FaultRefused, SimControl
from paranic.spec import sim as S
from paranic.spec.link import DEFAULT_LOS_TIMEOUT, LinkDownReason, LinkState
from paranic.spec.topo import Topology
from rawclient import RawClient

TOPO = Topology.parse("ring:4")


class Node:
    """Link CSRs of one node, read through a RawClient attached to it."""

    def __init__(self, sim, regs, node: int) -> None:
        self.c = RawClient(sim.socket, node=node)
        self.c.attach()
        self.regs = regs

    def link(self, port: int, name: str) -> int:
        return self.c.csr(self.regs[f"link{port - 1}_{name}"].addr)

    def close(self) -> None:
        self.c.close()


def _wait(cond, seconds: float, what: str) -> None:
    t0 = time.time()
    while not cond():
        assert time.time() - t0 < seconds, what
        time.sleep(0.05)


@pytest.fixture
def regs(sim_binary):
    return read_csr_json(sim_binary.parent / "csr.json")


def test_cut_from_socket_at_a_cycle(sim_binary, regs):
    sim = simrun.start("ring:4", socket=sim_socket("faults_socket"))
    nodes = {}
    try:
        k = 1
        n, pn, m, pm = TOPO.cables()[k]
        assert (n, m) == (1, 2)
        with sim.control() as ctl:
            q = ctl.query(k)
            assert q["cables"] == 4 and q["cut"] == 0 and q["ber"] == 0
            for i in range(4):
                nodes[i] = Node(sim, regs, i)
            for i, node in nodes.items():
                for p in (1, 2):
                    assert node.link(p, "link_state") == LinkState.UP, (i, p)
            at = sim.cycle() + 20_000
            r = ctl.cut(k, at=at)
            assert r["at_cycle"] == at and r["cut"] == 0   # not yet
            _wait(lambda: sim.cycle() > at + 100, 60, "clock")
            assert ctl.query(k)["cut"] == 1
            # Both ends DOWN by loss of signal, los_timeout (+ a few) cycles after the cut.
            _wait(lambda: nodes[n].link(pn, "link_state") == LinkState.DOWN
                  and nodes[m].link(pm, "link_state") == LinkState.DOWN, 60, "link ends not DOWN")
            assert sim.cycle() >= at + DEFAULT_LOS_TIMEOUT
            for node, p in ((nodes[n], pn), (nodes[m], pm)):
                assert node.link(p, "down_reason") == LinkDownReason.LOS
                assert node.link(p, "downs") == 1
            # Every other link end stays UP.
            for c, (a, pa, b, pb) in enumerate(TOPO.cables()):
                if c != k:
                    assert nodes[a].link(pa, "link_state") == LinkState.UP
                    assert nodes[b].link(pb, "link_state") == LinkState.UP
            # Mended: without firmware to restart them, the ends stay DOWN.
            r = ctl.mend(k)
            assert r["cut"] == 0
            t = sim.cycle()
            _wait(lambda: sim.cycle() > t + 5000, 60, "clock")
            assert nodes[n].link(pn, "link_state") == LinkState.DOWN
            assert nodes[m].link(pm, "link_state") == LinkState.DOWN
            # Per-cable error threshold, and bad requests.
            assert ctl.set_ber(0, 1e-5)["ber"] == S.ber_to_threshold(1e-5)
            with pytest.raises(FaultRefused):
                ctl.cut(4)
            with pytest.raises(FaultRefused):
                ctl.request(S.FaultOp.BER, 0, value=1 << 32)
            with pytest.raises(FaultRefused):
                ctl.request(99, 0)
            with pytest.raises(ValueError):
                ctl.set_ber(0, threshold=1 << 32)
            with pytest.raises(ValueError):
                ctl.cut(0, at=-1)
            assert ctl.query(0)["ber"] == S.ber_to_threshold(1e-5)   # the refused ones changed nothing
    finally:
        for node in nodes.values():
            node.close()
        rc = sim.stop()
    assert rc == 0, sim.log_text()[-2000:]
    log = sim.log_text()
    assert "cable 1 (node 1 port 1 - node 2 port 2) cut at cycle" in log


def test_cut_from_command_line(sim_binary, regs):
    """--cut 3@C --ber-cable 0=RATE: cable 3 (node 3 XP - node 0 XM) goes down at C."""
    sim = simrun.start("ring:4", socket=sim_socket("faults_cli"), cut=["3@30000"], ber_cable=["0=1e-6"])
    nodes = []
    try:
        with SimControl(sim.socket) as ctl:
            assert ctl.query(0)["ber"] == S.ber_to_threshold(1e-6)
            assert ctl.query(3)["cut"] == 0
        a, b = Node(sim, regs, 3), Node(sim, regs, 0)
        nodes = [a, b]
        assert a.link(1, "link_state") == LinkState.UP and b.link(2, "link_state") == LinkState.UP
        _wait(lambda: a.link(1, "link_state") == LinkState.DOWN and b.link(2, "link_state") == LinkState.DOWN,
              60, "cable 3's ends not DOWN")
        assert sim.cycle() >= 30_000 + DEFAULT_LOS_TIMEOUT
        assert a.link(1, "down_reason") == LinkDownReason.LOS == b.link(2, "down_reason")
        assert a.link(2, "link_state") == LinkState.UP   # node 3's other cable
    finally:
        for node in nodes:
            node.close()
        rc = sim.stop()
    assert rc == 0, sim.log_text()[-2000:]


@pytest.mark.parametrize("args,msg", [
    (["--cut", "4@100"], "no cable 4"),
    (["--cut", "-1@100"], "no cable"),
    (["--mend", "1@soon"], "the cycle must be a non-negative integer"),
    (["--cut", "1@-5"], "the cycle must be a non-negative integer"),
    (["--cut", "1"], "expected K@CYCLE"),
    (["--ber-cable", "0=4294967296"], "the threshold must be an integer in 0..2^32-1"),
    (["--ber-cable", "9=1"], "no cable 9"),
])
def test_harness_refuses_bad_fault_options(sim_binary, args, msg):
    r = subprocess.run([str(sim_binary), "--socket", str(sim_socket("faults_bad")), *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and msg in r.stderr, r.stderr


@pytest.mark.parametrize("args,msg", [
    (["--cut", "4@100"], "no cable '4' (ring:4 has cables 0..3"),
    (["--mend", "0@x"], "the cycle must be a non-negative integer"),
    (["--ber-cable", "1=2"], "bit-error rate must be a number in 0..1"),
    (["--ber-cable", "1=abc"], "bit-error rate must be a number in 0..1"),
    (["--ber-cable", "1"], "expected K=RATE"),
])
def test_python_launcher_refuses_bad_fault_options(args, msg):
    """``python -m paranic.sim`` checks before building anything."""
    r = subprocess.run([sys.executable, "-m", "paranic.sim", "--topo", "ring:4", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and msg in r.stderr, r.stderr


@pytest.mark.parametrize("args,msg", [
    (["--cut", "9@1"], "--cut 9@1: no cable '9' (ring:4 has cables 0..3"),
    (["--ber-cable", "0=5"], "--ber-cable 0=5: bit-error rate must be a number in 0..1"),
])
def test_paranic_run_refuses_bad_fault_options(userlib_build, args, msg):
    """``paranic run --backend sim`` checks before starting a simulator."""
    from pathlib import Path
    exe = Path(sys.executable).parent / "paranic"
    r = subprocess.run([str(exe), "run", "--backend", "sim", "--nodes", "2", *args, "--", "true"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
