"""The socket emulation where MPI's TCP path and forking servers need it
(docs/sockets.md): the `pn0` interface, addresses beyond the job, connections shared over
fork, sendfile/splice/MSG_ZEROCOPY (accepted, by copying), on the `sw` backend.

* userlib/sock/tests/sock_test_if.c (iface, iface_off, beyond), sock_test_fork.c
  (forksrv: an accept-then-fork echo server), sock_test_zc.c (zcopy) under pn_launch.
* socat's fork mode (`TCP-LISTEN:...,fork`) serving several clients, each over ParaNIC.
* iperf3 -Z (sendfile, by copying) between two nodes, its JSON report parsed.
* Open MPI 4.1 (`--mca btl tcp,self --mca btl_tcp_if_include pn0`, and the subnet form)
  with 2 and 4 ranks: the program checks its data; the library's counters
  (PARANIC_SOCK_STATS) show every rank's bytes went over ParaNIC and none to the OS.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.launch import TESTS, USERLIB_BUILD, clean_env, cluster_name

SOCK_SO = USERLIB_BUILD / "libparanic_sock.so"
MPI_SRC = Path(__file__).resolve().parents[2] / "userlib" / "sock" / "tests" / "mpi"
PARANIC = [sys.executable, "-m", "paranic.cli"]
COUNTERS = re.compile(r"paranic_sock\[\d+\]: counters at exit node (\d+): (.*)")


def need(program: str, package: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed (Debian package {package}: scripts/deps.sh installs it)")


def counters(text: str) -> dict[int, dict[str, int]]:
    """Every process's exit line (PARANIC_SOCK_STATS=1), by node (the last one of a node wins)."""
    out: dict[int, dict[str, int]] = {}
    for m in COUNTERS.finditer(text):
        words = m.group(2).split()
        out[int(m.group(1))] = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}
    return out


def paranic_run(script: str, tmp_path: Path, timeout: int = 60) -> subprocess.CompletedProcess:
    """`paranic run --backend sw --nodes 2 -- sh SCRIPT` (the script picks each node's part)."""
    path = tmp_path / "job.sh"
    path.write_text(script)
    return subprocess.run([*PARANIC, "run", "--backend", "sw", "--nodes", "2", "--timeout", str(timeout), "--",
                           "sh", str(path)], capture_output=True, text=True, cwd=tmp_path, env=clean_env(),
                          timeout=timeout + 60)


@pytest.mark.parametrize("prog,case", [("if", "iface"), ("if", "beyond"), ("fork", "forksrv"), ("zc", "zcopy")])
def test_cases(run_nodes, prog, case):
    """Two nodes (node 1 serving); each program's header says what its case checks."""
    r = run_nodes(["env", f"LD_PRELOAD={SOCK_SO}", str(TESTS / f"sock_test_{prog}"), case], 2, f"sockif-{case}",
                  timeout=60)
    assert r.rc == 0 and not r.fails(), r.out
    r.ok(0, case)
    r.ok(1, case)


def test_no_interface_outside_a_job(userlib_build):
    """Without PARANIC_NODE the library is inactive: no pn0 in any of the calls."""
    env = clean_env()
    env.pop("PARANIC_NODE", None)
    env["LD_PRELOAD"] = str(SOCK_SO)
    r = subprocess.run([str(TESTS / "sock_test_if"), "iface_off"], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0 and "ok iface_off" in r.stdout, r.stdout + r.stderr


def test_socat_fork_server(userlib_build, tmp_path):
    """socat TCP-LISTEN:PORT,fork on node 1 (each connection accepted by the parent, served by
    a forked child that runs `tr`); five socat clients on node 0 one after the other, each
    gets its line back upper-cased. The server's connections were paused for the fork and
    moved to the children (counters); the server is stopped at the end."""
    need("socat", "socat")
    port = 21000 + os.getpid() % 20000
    so = shlex.quote(str(SOCK_SO))
    script = (
        f'if [ "$PARANIC_NODE" = 1 ]; then\n'
        f'  env LD_PRELOAD={so} PARANIC_SOCK_STATS=1 socat TCP-LISTEN:{port},fork,reuseaddr SYSTEM:"tr a-z A-Z" &\n'
        f'  echo $! > server.pid; wait\n'
        f'else\n'
        f'  for i in 1 2 3 4 5; do\n'
        f'    printf "hello %s\\n" $i | env LD_PRELOAD={so} PARANIC_SOCK_CONNECT_WAIT_MS=10000 '
        f'socat -t 5 - TCP:10.77.0.2:{port}\n'
        f'  done\n'
        f'  kill $(cat server.pid)\n'
        f'fi\n')
    r = paranic_run(script, tmp_path)
    out = r.stdout + r.stderr
    for i in range(1, 6):
        assert f"0: HELLO {i}" in out, out
    stats = [m.group(2) for m in COUNTERS.finditer(out) if m.group(1) == "1"]
    moved = sum(int(s.split("fork_moved ")[1].split()[0]) for s in stats)
    paused = sum(int(s.split("fork_paused ")[1].split()[0]) for s in stats)
    assert paused >= 5 and moved >= 5, out


def test_iperf3_sendfile(userlib_build, tmp_path):
    """iperf3 -Z (its sender uses sendfile from its buffer file, which the library accepts by
    copying) from node 0 to node 1, 64 MiB:
    the report parses, the receiver got what was sent (less at most the send buffer and a
    block in flight at the end, as in test_sock's iperf3 test) at a positive rate, and the
    client's sendfile counter carried it."""
    need("iperf3", "iperf3")
    total, sndbuf, block = 64 << 20, 256 << 10, 128 << 10
    port = 22000 + os.getpid() % 20000
    report = tmp_path / "iperf.json"
    so = shlex.quote(str(SOCK_SO))
    script = (
        f'if [ "$PARANIC_NODE" = 1 ]; then exec env LD_PRELOAD={so} PARANIC_SOCK_SNDBUF={sndbuf} '
        f'iperf3 -s -1 -p {port}\n'
        f'else exec env LD_PRELOAD={so} PARANIC_SOCK_SNDBUF={sndbuf} PARANIC_SOCK_STATS=1 '
        f'PARANIC_SOCK_CONNECT_WAIT_MS=10000 iperf3 -c 10.77.0.2 -p {port} -Z -n {total} -J --logfile {report}; fi\n')
    r = paranic_run(script, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr + (report.read_text() if report.exists() else "")
    data = json.loads(report.read_text())
    end = data["end"]
    sent, received = end["sum_sent"]["bytes"], end["sum_received"]["bytes"]
    assert total <= sent <= total + block and sent - sndbuf - block <= received <= sent, end
    assert end["sum_received"]["bits_per_second"] > 1e8, end
    c = counters(r.stdout + r.stderr)[0]
    assert c["sendfile_bytes"] >= total and c["os_cluster"] == 0, c


@pytest.fixture(scope="module")
def mpi_program(userlib_build, tmp_path_factory) -> Path:
    need("mpicc", "libopenmpi-dev")
    need("mpirun", "openmpi-bin")
    exe = tmp_path_factory.mktemp("mpi") / "sock_mpi_check"
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(MPI_SRC / "sock_mpi_check.c")], check=True,
                   capture_output=True)
    return exe


@pytest.mark.parametrize("ranks,include", [(2, "pn0"), (4, "10.77.0.0/24")])
def test_open_mpi_tcp_btl_over_paranic(mpi_program, ranks, include):
    """Open MPI's TCP BTL finds pn0 (SIOCGIFCONF, SIOCGIF*) and, restricted to it (by name or
    subnet, no shared-memory BTL), carries the program's ring, pairwise exchanges,
    allreduce and barrier over ParaNIC: the program checks its data; every rank's counters
    show its point-to-point payload went out over ParaNIC connections to other nodes, and
    nothing with a cluster address went to the OS."""
    cluster = cluster_name(f"pytest-{os.getpid()}-mpi{ranks}")
    env = clean_env()
    env.update(PARANIC_NODES=str(ranks), PARANIC_CLUSTER=cluster, PARANIC_BACKEND="sw", PARANIC_SOCK_STATS="1",
               LD_PRELOAD=str(SOCK_SO), OMPI_MCA_rmaps_base_oversubscribe="1")
    env.pop("PARANIC_NODE", None)
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
           "-x", "LD_PRELOAD", "-x", "PARANIC_NODES", "-x", "PARANIC_CLUSTER", "-x", "PARANIC_BACKEND",
           "-x", "PARANIC_SOCK_STATS", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", include,
           str(MPI_SRC / "pn_mpi_rank.sh"), str(mpi_program)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    finally:
        for f in Path("/dev/shm").glob(f"paranic-{cluster}*"):
            f.unlink(missing_ok=True)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    m = re.search(r"ok ranks (\d+) bytes (\d+)", out)
    assert m and int(m.group(1)) == ranks, out
    payload = int(m.group(2))
    c = counters(out)
    assert sorted(c) == list(range(ranks)), out
    assert sum(v["tcp_tx_bytes"] for v in c.values()) >= payload, (payload, c)
    for node, v in c.items():
        assert v["tcp_remote"] >= 1 and v["tcp_opened"] == v["tcp_remote"], (node, v)
        assert v["tcp_rx_bytes"] > payload // ranks // 2, (node, v)
        assert v["os_cluster"] == 0 and v["beyond"] == 0, (node, v)
