"""MPI over ParaNIC on the simulated cluster (docs/mpi.md): `paranic mpirun --backend sim`
runs the heat diffusion over libparanic-fi.so on the Verilator ring:4 (a few seconds on
top of the cached simulator build): the same plate as on sw, and the provider's
counters show every message through the simulated NICs."""

from __future__ import annotations

import os

from paranic import mpirun as M

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
