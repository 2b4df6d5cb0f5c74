"""MPI over ParaNIC on the simulated cluster (docs/mpi.md): `paranic mpirun --backend sim`
runs the heat diffusion over libparanic-fi.so on the Verilator ring:4 (a few seconds on
top of the cached simulator build): the same plate as on sw, and the provider's
counters show every message through the simulated NICs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paranic import mpirun as M

PARANIC = Path(sys.executable).with_name("paranic")

ARGS = ["-n", "16", "-s", "20", "-g", "10"]
STEPS = 20


def heat(backend: str, np_: int) -> tuple[str, M.MpiRun]:
    r = M.run_mpi([str(M.MPI_BUILD / "mpi_heat"), *ARGS], np_, backend=backend, stats=True, timeout=300,
                  cluster=f"pytest-mpisim-{os.getpid()}-{backend}")
    assert r.rc == 0, r.out
    line = r.lines("heat ")
    assert len(line) == 1, r.out
    return dict(kv.split("=", 1) for kv in line[0].split()[1:])["checksum"], r


def test_heat_on_sim(sim_binary, mpi_build):
    want, _ = heat("sw", 1)
    got, r = heat("sim", 4)
    assert got == want, r.out
    assert [s["node"] for s in r.stats] == [0, 1, 2, 3], r.stats
    t = r.traffic()
    assert t["nic_sent_msgs"] >= 2 * 3 * STEPS and t["nic_sent_msgs"] == t["nic_recv_msgs"], t
    assert t["nic_tx_packets"] >= t["nic_sent_msgs"] and t["shm_sent_msgs"] == 0, t
    assert t["errors"] == 0 and t["cq_errors"] == 0, t


def test_bench_mpi_on_sim_quick(sim_binary, mpi_build):
    """`paranic bench mpi --backend sim --nodes 2 --quick --json`: the paranic rows get a
    hardware-path figure from the session's simulator (the bench names that simulator to
    mpirun, never a topology beside it, which mpirun refuses)."""
    r = subprocess.run([str(PARANIC), "bench", "mpi", "--backend", "sim", "--nodes", "2", "--quick", "--json"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    rows = {(x["test"], x["nodes"], x["transport"]): x for x in res["rows"]}
    for test in ("latency", "bw", "barrier", "allreduce"):
        x = rows[(test, 2, "paranic")]
        assert x["hw_ns"] > 0 and x["hw_min_ns"] <= x["hw_ns"] <= x["hw_max_ns"], x
        assert x["nic_sent_msgs"] > 0, x
    assert rows[("bw", 2, "paranic")]["MBps"] > 0
    hw = {g["goal"]: g for g in res["goals"]}["8-byte MPI one-way hardware path on sim"]
    assert hw["value"] is not None and hw["value"] > 0, hw
