"""The libfabric provider ``paranic`` (userlib/fabric, docs/fabric.md) on the `sw` backend.

``fi_test`` (userlib/fabric/tests/fi_test.c) is a plain libfabric program: it finds the
provider through ``FI_PROVIDER_PATH`` as any application would. Each run checks with
the provider's counters (``PARANIC_FI_STATS``, one line per process) which path the
bytes took: the NIC, or the intra-node shared memory of the ports layer. The Open MPI
smoke test runs a 2-rank MPI program over ``--mca pml cm --mca mtl ofi`` with the
provider and checks the same counters."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.launch import TESTS, clean_env, cluster_name
from paranic.paths import USERLIB_BUILD

FI_TEST = str(TESTS / "fi_test")
MPI_SMOKE = TESTS / "fi_mpi_smoke"


def fi_env(tmp_path: Path) -> dict[str, str]:
    return {"FI_PROVIDER_PATH": str(USERLIB_BUILD), "PARANIC_FI_STATS": str(tmp_path / "stats-%p")}


def stats(tmp_path: Path) -> list[dict[str, int]]:
    """The counters every process wrote when it closed its domain."""
    rows = []
    for f in sorted(glob.glob(str(tmp_path / "stats-*"))):
        for line in Path(f).read_text().splitlines():
            assert line.startswith("paranic-fi: "), line
            rows.append({k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)})
    return rows


def run_fi(run_nodes, tmp_path: Path, case: str, nodes: int, ppn: int = 1, timeout: int = 120):
    addr = tmp_path / "addr"
    addr.mkdir()
    r = run_nodes([FI_TEST, case, str(addr)], nodes, f"fi-{case}-{nodes}x{ppn}", timeout=timeout,
                  env=fi_env(tmp_path), ppn=ppn)
    assert r.rc == 0 and not r.fails(), r.out
    oks = [ln for lines in r.procs.values() for ln in lines if ln.startswith(f"ok fi_test {case}")]
    assert len(oks) == nodes * ppn, r.out
    return r


def test_fi_info_lists_the_provider(userlib_build):
    """``fi_info -p paranic`` finds it with FI_PROVIDER_PATH, with what Open MPI's OFI MTL
    needs; hints it cannot meet give no result."""
    if not shutil.which("fi_info"):
        pytest.skip("fi_info (libfabric-bin) not installed")
    env = dict(clean_env(), FI_PROVIDER_PATH=str(USERLIB_BUILD))
    r = subprocess.run(["fi_info", "-p", "paranic"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "provider: paranic" in r.stdout and "FI_EP_RDM" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(["fi_info", "-p", "paranic", "-v"], env=env, capture_output=True, text=True, timeout=60)
    out = r.stdout
    assert "prov_name: paranic" in out, out
    for cap in ("FI_TAGGED", "FI_MSG", "FI_DIRECTED_RECV", "FI_REMOTE_CQ_DATA", "FI_SOURCE"):
        assert cap in out, cap
    assert re.search(r"cq_data_size: 4\b", out) and "FI_ORDER_SAS" in out and "FI_PROGRESS_MANUAL" in out, out
    # hints it cannot meet: another endpoint type, RMA, atomics
    for args in (["-t", "FI_EP_MSG"], ["-c", "FI_RMA"], ["-c", "FI_ATOMIC"]):
        r = subprocess.run(["fi_info", "-p", "paranic", *args], env=env, capture_output=True, text=True,
                           timeout=60)
        assert "provider: paranic" not in r.stdout, (args, r.stdout)
    # without FI_PROVIDER_PATH libfabric does not know it
    r = subprocess.run(["fi_info", "-p", "paranic"], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert "provider: paranic" not in r.stdout


@pytest.mark.parametrize("nodes", [2, 4])
def test_functions_over_the_nic(run_nodes, tmp_path, nodes):
    """Every function (masks, directed receive, remote CQ data, inject, truncation,
    cancel, peek/claim/discard, FI_MSG, sizes 0 .. 16 MiB expected and unexpected, bad
    input) between processes on different nodes: the bytes went over the NIC."""
    r = run_fi(run_nodes, tmp_path, "all", nodes, timeout=180)
    rows = stats(tmp_path)
    assert len(rows) == nodes, r.out
    for s in rows:
        # each rank sends 23 sizes (.. 16 MiB, about 21.3 MB) to every rank, itself too
        assert s["nic_sent_bytes"] >= nodes * 21_000_000 and s["shm_sent_msgs"] == 0, s
        assert s["nic_tx_bytes"] >= s["nic_sent_bytes"], s   # the HAL counted them too
        assert s["truncated"] == 2 and s["cancelled"] == 2 and s["claim"] == 1 and s["discard"] == 1, s
        assert s["errors"] == 0, s


def test_two_processes_on_one_node_take_shared_memory(run_nodes, tmp_path):
    """Two processes of one node (``-p 2``): what they send each other goes through the
    ports layer's intra-node shared memory, not the NIC (only sends to oneself loop
    through the NIC)."""
    run_fi(run_nodes, tmp_path, "all", 1, ppn=2, timeout=180)
    rows = stats(tmp_path)
    assert len(rows) == 2
    for s in rows:
        assert s["shm_sent_bytes"] >= 21_000_000 and s["shm_recv_bytes"] >= 21_000_000, s
        # the NIC carried only the sends to itself (loopback): one set of sizes
        assert s["nic_sent_bytes"] < 1.1 * 21_400_000, s


def test_av_table(run_nodes, tmp_path):
    """The same functions with FI_AV_TABLE addresses (and the source of a receive as a
    table index)."""
    run_fi(run_nodes, tmp_path, "table", 2)


def test_paranic_run_launches_it(userlib_build, tmp_path):
    """``paranic run --backend sw`` (with its paranicd per node) runs a libfabric program
    over the provider: only FI_PROVIDER_PATH is needed besides what paranic run sets."""
    addr = tmp_path / "addr"
    addr.mkdir()
    env = dict(clean_env(), **fi_env(tmp_path))
    cmd = [sys.executable, "-m", "paranic.cli", "run", "--backend", "sw", "--nodes", "2", "--timeout", "100",
           "--cluster", cluster_name(f"pytest-{os.getpid()}-fi-run"), "--", FI_TEST, "match", str(addr)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout + r.stderr
    assert r.stdout.count("ok fi_test match") == 2, r.stdout
    assert len(stats(tmp_path)) == 2


def test_bad_usage(userlib_build):
    r = subprocess.run([FI_TEST, "nonsense", "/tmp"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown case" in r.stderr


def test_open_mpi_smoke(userlib_build, tmp_path):
    """A 2-rank MPI program (point to point 0 B .. 4 MiB, Ssend, Probe, Mprobe/Mrecv,
    Iprobe, cancel, Barrier, Allreduce) over Open MPI's OFI MTL with the provider; each
    rank gets PARANIC_NODE = its rank through a tiny exec wrapper. The provider's counters
    show the MPI traffic went over the ParaNIC (sw) NIC."""
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    if not mpirun or not MPI_SMOKE.exists():
        pytest.skip("Open MPI (openmpi-bin, libopenmpi-dev) not installed")
    wrap = tmp_path / "pnrank.sh"
    wrap.write_text('#!/bin/sh\nPARANIC_NODE="$OMPI_COMM_WORLD_RANK" exec "$@"\n')
    wrap.chmod(0o755)
    cluster = cluster_name(f"pytest-{os.getpid()}-fi-mpi")
    env = dict(clean_env(), **fi_env(tmp_path), PARANIC_BACKEND="sw", PARANIC_NODES="2", PARANIC_CLUSTER=cluster,
               OMPI_MCA_plm_rsh_agent="false")
    cmd = [mpirun, "--oversubscribe", "--bind-to", "none", "-np", "2",
           "--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "paranic",
           "--mca", "btl", "self"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for k in ("FI_PROVIDER_PATH", "PARANIC_FI_STATS", "PARANIC_BACKEND", "PARANIC_NODES", "PARANIC_CLUSTER"):
        cmd += ["-x", k]
    cmd += [str(wrap), str(MPI_SMOKE)]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    finally:
        for f in glob.glob(f"/dev/shm/paranic-{cluster}*"):
            os.unlink(f)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout + r.stderr
    assert "ok mpi rank 0" in r.stdout and "ok mpi rank 1" in r.stdout, r.stdout + r.stderr
    rows = stats(tmp_path)
    assert sorted(s["node"] for s in rows) == [0, 1], rows
    for s in rows:
        # 2 x 5.3 MB of ping-pong alone; every message through the provider and the NIC
        assert s["nic_sent_bytes"] >= 5_000_000 and s["nic_tx_bytes"] >= s["nic_sent_bytes"], s
        assert s["tsend"] + s["tinject"] >= 10 and s["shm_sent_msgs"] == 0, s
    assert sum(s["claim"] for s in rows) >= 1 and sum(s["cancelled"] for s in rows) == 2, rows
