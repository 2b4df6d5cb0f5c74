"""MPI over ParaNIC on the sw backend (docs/mpi.md): `paranic mpirun` runs Open MPI's
OFI MTL over libparanic-fi.so; the heat diffusion's checksum does not depend on the
rank count, and the provider's counters prove that the messages went through ParaNIC
(not the OS: the only BTL is ``self``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from paranic import mpirun as M
from paranic import runjob

HEAT_N, HEAT_STEPS = 48, 60


def heat(np_: int, ppn: int = 1, transport: str = "paranic", **kw) -> tuple[dict, M.MpiRun]:
    r = M.run_mpi([str(M.MPI_BUILD / "mpi_heat"), "-n", str(HEAT_N), "-s", str(HEAT_STEPS), "-g", "20"], np_,
                  ppn=ppn, transport=transport, stats=transport == "paranic", timeout=120,
                  cluster=f"pytest-mpi-{os.getpid()}", **kw)
    assert r.rc == 0, r.out
    lines = r.lines("heat ")
    assert len(lines) == 1, r.out
    res = dict(kv.split("=", 1) for kv in lines[0].split()[1:])
    assert int(res["ranks"]) == np_ and int(res["n"]) == HEAT_N and int(res["steps"]) == HEAT_STEPS
    return res, r


def test_heat_checksum_and_traffic_over_paranic(mpi_build):
    """1, 2 and 4 ranks (one per node) compute the same plate; with 2 and 4 every halo
    and reduction message went through the NIC and none through shared memory: each
    rank's provider counted at least a halo row per neighbour and step through the NIC
    and its NIC's own packet counters at least as many packets (a rank whose messages
    took another path would fail this)."""
    base, _ = heat(1)
    for np_ in (2, 4):
        res, r = heat(np_)
        assert (res["checksum"], res["sum"], res["residual"]) == (base["checksum"], base["sum"], base["residual"])
        assert [s["node"] for s in r.stats] == list(range(np_)), r.stats   # rank r on node r
        t = r.traffic()
        # each of the np-1 inner boundaries: two halo rows per step, one per direction
        assert t["nic_sent_msgs"] >= 2 * (np_ - 1) * HEAT_STEPS, t
        assert t["nic_sent_msgs"] == t["nic_recv_msgs"], t
        assert t["nic_tx_packets"] >= t["nic_sent_msgs"] and t["nic_tx_bytes"] > 0, t
        assert t["shm_sent_msgs"] == 0 and t["errors"] == 0 and t["cq_errors"] == 0, t
        for s in r.stats:   # every rank, not only the sum: none of them took another path
            nbrs = (s["node"] > 0) + (s["node"] < np_ - 1)
            assert s["nic_sent_msgs"] >= nbrs * HEAT_STEPS and s["nic_recv_msgs"] >= nbrs * HEAT_STEPS, s
            assert s["nic_tx_packets"] >= s["nic_sent_msgs"] and s["nic_rx_packets"] >= s["nic_recv_msgs"], s
        line = M.traffic_line(t)
        assert f"sent {t['nic_sent_msgs']} messages" in line


def test_heat_two_ranks_per_node(mpi_build):
    """--ppn 2: ranks 0, 1 on node 0 and 2, 3 on node 1; the neighbours on one node
    talk through the ports' intra-node path, the ones across nodes through the NIC."""
    base, _ = heat(1)
    res, r = heat(4, ppn=2)
    assert res["checksum"] == base["checksum"]
    assert sorted(s["node"] for s in r.stats) == [0, 0, 1, 1]
    t = r.traffic()
    assert t["nic_sent_msgs"] >= 2 * HEAT_STEPS and t["shm_sent_msgs"] >= 4 * HEAT_STEPS, t


def test_heat_peers_same_checksum(mpi_build):
    """Open MPI's own transports (TCP on loopback, shared memory) compute the same plate."""
    base, _ = heat(1)
    for transport in ("tcp", "sm"):
        res, r = heat(2, transport=transport)
        assert res["checksum"] == base["checksum"], transport
        assert "btl_tcp_if_include" in r.cmd if transport == "tcp" else "vader,self" in r.cmd
        assert r.stats == []


def test_pn_mpi_exec(mpi_build, tmp_path):
    """The wrapper: node = rank / PARANIC_PPN from OMPI_COMM_WORLD_RANK or PMI_RANK."""
    exe = str(M.EXEC)
    show = ["sh", "-c", 'echo "$PARANIC_NODE $PARANIC_RANK $PARANIC_LOCAL_RANK"']
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PARANIC_", "OMPI_", "PMI_"))}
    r = subprocess.run([exe, *show], env=dict(env, OMPI_COMM_WORLD_RANK="5", PARANIC_PPN="2"),
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["2", "5", "1"], r
    r = subprocess.run([exe, *show], env=dict(env, PMI_RANK="3"), capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["3", "3", "0"], r
    for extra, msg in (({}, "neither OMPI_COMM_WORLD_RANK nor PMI_RANK"),
                       ({"OMPI_COMM_WORLD_RANK": "4", "PARANIC_NODES": "2"}, "the job has PARANIC_NODES=2"),
                       ({"OMPI_COMM_WORLD_RANK": "x"}, "is not an integer"),
                       ({"OMPI_COMM_WORLD_RANK": "0", "PARANIC_PPN": "0"}, "PARANIC_PPN=0")):
        r = subprocess.run([exe, *show], env=dict(env, **extra), capture_output=True, text=True)
        assert r.returncode == 2 and msg in r.stderr, (extra, r.stderr)
    r = subprocess.run([exe, "/no/such/program"], env=dict(env, OMPI_COMM_WORLD_RANK="0"),
                       capture_output=True, text=True)
    assert r.returncode == 127 and "cannot run /no/such/program" in r.stderr


def paranic(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paranic.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_mpirun_bad_input(mpi_build, monkeypatch):
    heat_exe = str(M.MPI_BUILD / "mpi_heat")
    for bad, msg in ((["-np", "2"], "no program given"),
                     (["-np", "2", "--", "/no/such/program"], "not found or not executable"),
                     (["-np", "0", "--", heat_exe], "-np must be 1..1024"),
                     (["-np", "2", "--ppn", "0", "--", heat_exe], "--ppn must be 1..64"),
                     (["-np", "2", "--ppn", "3", "--", heat_exe], "--ppn 3 is more than the job's 2 ranks"),
                     (["-np", "2", "--transport", "tcp", "--stats", "--", heat_exe], "--stats needs --transport paranic"),
                     (["-np", "2", "--cluster", "a/b", "--", heat_exe], "bad cluster name"),
                     (["-np", "2", "--soc", "--", heat_exe], "need --backend sim"),
                     (["--backend", "sim", "-np", "5", "--topo", "ring:4", "--", heat_exe],
                      "ring:4 has 4 nodes, fewer than the job's nodes"),
                     (["--backend", "sim", "-np", "2", "--topo", "ring:x", "--", heat_exe], "ring")):
        r = paranic("mpirun", *bad)
        assert r.returncode == 2 and msg in r.stderr, (bad, r.stderr)
        assert r.stderr.startswith("paranic mpirun: "), r.stderr
    r = paranic("mpirun", "-np", "2", "--transport", "udp", "--", heat_exe)
    assert r.returncode == 2 and "invalid choice: 'udp'" in r.stderr
    # the provider not built: a clear error, not Open MPI's "PML cm cannot be selected"
    monkeypatch.setattr(M, "PROVIDER", M.PROVIDER.with_name("libnothere-fi.so"))
    with pytest.raises(M.MpiError, match="libnothere-fi.so is not built"):
        M.run_mpi([heat_exe], 2)
    with pytest.raises(runjob.UsageError, match="-np must be"):
        M.run_mpi([heat_exe], 0)
    # a failing program: mpirun's non-zero status comes back
    r = paranic("mpirun", "-np", "3", "--", heat_exe, "-n", "2")
    assert r.returncode != 0 and "needs at least one row per rank" in r.stdout + r.stderr


def test_mpirun_cli_stats(mpi_build):
    """The CLI: the program's output, then with --stats every rank's counters and their sum."""
    r = paranic("mpirun", "-np", "2", "--stats", "--", str(M.MPI_BUILD / "mpi_heat"), "-n", "16", "-s", "10")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^heat n=16 steps=10 ranks=2 .*checksum=0x[0-9a-f]{16}", r.stdout, re.M), r.stdout
    assert len(M.parse_stats(r.stderr)) == 2, r.stderr
    m = re.search(r"the provider of 2 ranks sent (\d+) messages .* through ParaNIC", r.stderr)
    assert m and int(m.group(1)) >= 20, r.stderr


def test_bench_mpi_quick_json(mpi_build):
    """`paranic bench mpi --quick --json` on sw: every row of ParaNIC and the peers, the
    paranic rows' traffic through the NIC, the goals and the seed figures."""
    r = paranic("bench", "mpi", "--backend", "sw", "--quick", "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    rows = {(x["test"], x["nodes"], x["transport"]): x for x in res["rows"]}
    want = [("latency", 2), ("bw", 2)] + [(t, n) for t in ("barrier", "allreduce") for n in (2, 4, 8)]
    for test, n in want:
        for tr in ("paranic", "tcp", "sm"):
            x = rows[(test, n, tr)]
            assert x["sw_ns"] > 0 and x["hw_ns"] is None and x["sw_samples"] == 3, x
            assert x["sw_min_ns"] <= x["sw_ns"] <= x["sw_max_ns"], x
            if tr == "paranic":
                assert x["nic_sent_msgs"] > 0 and x["shm_sent_msgs"] == 0, x
    assert rows[("bw", 2, "paranic")]["MBps"] > 0
    goals = {g["goal"]: g for g in res["goals"]}
    added = goals["MPI software latency over the ports layer, natively"]
    lat, ports = rows[("latency", 2, "paranic")], res["notes"]["ports_sw"]
    assert ports["samples"] >= 3 and ports["min_ns"] <= ports["ns"] <= ports["max_ns"], ports
    # median against median, the best case beside it
    assert added["value"] == round(lat["sw_ns"] - ports["ns"], 1), (added, lat, ports)
    assert added["best"] == round(lat["sw_min_ns"] - ports["min_ns"], 1), (added, lat, ports)
    assert goals["8-byte MPI one-way hardware path on sim"]["value"] is None   # sw only
    assert res["references"]["parastation_barrier_us"]["8"] == 2.3
