"""`paranic cluster status` and pn_cluster_status on the NicCore cluster simulator: the
harness's status snapshot (no firmware: fw_state NONE; links up; node ids as the harness
wrote them; the simulator's per-node DNA), counters that move with traffic."""

from __future__ import annotations

import json
import os
import subprocess
import time
import sys

import pytest

from paranic.lib import Hal
from paranic.spec import protocol as P
from paranic.spec.link import LinkState
from paranic.spec.sim import sim_dna
from simtest import clean_env


@pytest.fixture(scope="module")
def hal(sim4):
    e = sim4.env()
    old = {k: os.environ.get(k) for k in ("PARANIC_BACKEND", "PARANIC_SIM_SOCKET")}
    os.environ.update({k: e[k] for k in old})
    try:
        h = Hal.open(backend="sim", node=0)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield h
    h.close()


def test_snapshot_no_firmware(sim4, hal):
    nodes = hal.cluster()
    assert [n["index"] for n in nodes] == [0, 1, 2, 3]
    for i, n in enumerate(nodes):
        assert n["node_id"] == i                       # the harness's bring-up wrote it
        assert n["dna"] == sim_dna(i) and n["cfg_node"] == 0
        assert n["fw_state"] == 0 and n["fw_error"] == 0 and n["epoch"] == 0
        assert n["flags"] & 1                          # fw_* read (all 0: no firmware)
        assert n["n_links"] == 2 and n["cycle"] > 0
        assert [ln["port"] for ln in n["links"]] == [P.Port.XP, P.Port.XM]
        assert [ln["state"] for ln in n["links"]] == [LinkState.UP, LinkState.UP]
    assert hal.cluster_status(4) is None


def test_counters_follow_traffic(sim4, hal):
    """Packets node 0 sends to node 1 leave on its XP link: the next snapshot (taken
    after the call began) shows the link counters moved by exactly that many."""
    before = hal.cluster_status(0)["links"][0]["tx_packets"]
    peer_before = hal.cluster_status(1)["links"][1]["rx_packets"]
    for k in range(5):
        hal.send_pio(1, 0, k, b"x" * 16)
    hal.tx_wait()
    after = hal.cluster_status(0)["links"][0]["tx_packets"]
    peer_after = hal.cluster_status(1)["links"][1]["rx_packets"]
    assert after - before == 5
    assert peer_after - peer_before == 5


def test_cli_cluster_status_sim(sim4):
    env = sim4.env(clean_env())
    cmd = [sys.executable, "-m", "paranic.cli", "cluster", "status", "--backend", "sim"]
    r = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["backend"] == "sim" and len(d["nodes"]) == 4
    assert d["topology"].startswith("not discovered")
    for i, n in enumerate(d["nodes"]):
        assert n["node_id"] == i and n["fw_state"] == "none"
        assert n["dna"] == f"0x{sim_dna(i):016x}"
        assert [(ln["port"], ln["state"]) for ln in n["links"]] == [("XP", "up"), ("XM", "up")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "backend sim: 4 node(s)" in r.stdout
    assert r.stdout.count("XP  up") == 4 and r.stdout.count("XM  up") == 4


def test_snapshot_reads_let_the_harness_sleep(sim4, hal):
    """The snapshot's CSR reads are background work: with a client attached and nothing
    in flight the harness still goes to sleep (slow ticks), and a later call still gets a
    fresh snapshot (it wakes the clock)."""
    hal.cluster_status(0)
    deadline = time.monotonic() + 20
    while not sim4.counters()["sleeping"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sim4.counters()["sleeping"] == 1
    c0 = sim4.cycle()
    time.sleep(0.5)
    # slow ticks: 100 cycles per 20 ms tick at most, not the full-speed clock
    assert sim4.cycle() - c0 < 100 * 0.5 / 0.02 * 2
    t = sim4.cycle()
    assert hal.cluster_status(2)["cycle"] >= t
