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


def _coll_run(backend: str, coll: bool) -> dict:
    r = M.run_mpi([str(M.MPI_BUILD / "mpi_coll_test")], 4, backend=backend, timeout=300, coll=coll,
                  env={"PARANIC_MPICOLL_STATS": "1"}, cluster=f"pytest-mpicoll-{os.getpid()}-{backend}-{coll}")
    assert r.rc == 0, r.out
    res = {ln.split()[1]: bytes.fromhex(ln.split()[2]) for ln in r.lines("result ")}
    assert all(ln.endswith(" 1") for ln in r.lines("same ")) and len(r.lines("same ")) == 8, r.out
    inputs: dict[str, list[bytes]] = {}
    for ln in r.lines("input "):
        _, name, rank, hexbytes = ln.split()
        inputs.setdefault(name, []).append(bytes.fromhex(hexbytes))
        assert len(inputs[name]) == int(rank) + 1, r.out
    return {"results": res, "inputs": inputs, "stats": r.lines("pn_mpicoll rank "), "out": r.out}


def test_mpi_allreduce_bcast_on_the_unit(sim_binary, mpi_build):
    """mpi_coll_test's MPI_Allreduce and MPI_Bcast calls with libparanic-mpicoll.so: on sim
    every small one goes to the NIC's collective unit (5 allreduce, 2 bcast on "unit" per
    rank; the 512-byte one to Open MPI), the float sums are the kernel's (a2a_reduce_ref), the
    same bits on every rank, the other results equal Open MPI's own (--no-coll); on sw,
    which has no unit, everything goes to Open MPI."""
    from paranic.hls import a2a_reduce_ref
    from paranic.spec import kernels as K

    sim = _coll_run("sim", True)
    assert sorted(sim["stats"]) == [f"pn_mpicoll rank {r}: 5 allreduce, 2 bcast on unit, 1 passed to MPI"
                                    for r in range(4)], sim["out"]
    sw = _coll_run("sw", True)
    assert sorted(sw["stats"]) == [f"pn_mpicoll rank {r}: 0 allreduce, 0 bcast on none, 8 passed to MPI"
                                   for r in range(4)], sw["out"]
    plain = _coll_run("sw", False)
    assert plain["stats"] == [] and plain["results"] == sw["results"]
    for name in ("max_i8", "bor_l4", "min_f5", "sum_big", "bcast_i16", "bcast_b64"):
        assert sim["results"][name] == plain["results"][name], name
    # the float sums: the kernel's order, computed from the ranks' inputs: the unit's
    # ALLREDUCE of 4 nodes goes all-to-all (the pairwise tree over member index,
    # a2a_reduce_ref: (v0 + v1) + (v2 + v3)), not the tree's of fan-out 4 rooted at 0
    # (reduce_ref: ((v0 + v1) + v2) + v3)
    for name in ("sum_d1", "sum_d32"):
        ins = sim["inputs"][name]
        assert len(ins) == 4 and len(set(ins)) == 4, name
        want = a2a_reduce_ref(ins, K.CollType.F64, K.CollRed.SUM)
        assert sim["results"][name] == want, name
