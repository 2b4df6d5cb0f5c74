"""PVM (Debian's pvm, pvm-examples) across the nodes of a ParaNIC job, `sw` backend, 3
nodes (docs/pvm.md): node 0 starts pvmd with a hostfile naming pn-node0 .. pn-node2, pvmd
starts the others through paranic-rsh (userlib/sock/pvm/pvm_job.sh does the steps), then
PVM's hello (hello.pvm + hello_other), master/slave (master1 + slave1) and pn_pvm_ring
(workers exchanging data over PVM's direct task-to-task TCP routes) run, and `halt`.

* test_rsh_starts_a_process_of_the_node: a process paranic-rsh starts on node 2 is node
  2's: its host name, its PVM_TMP, and it attaches to node 2 of the job's cluster (a free
  context).
* test_pvm_over_the_os: the whole run with PARANIC_SOCK=0 and the names on 127.1.0.0/24,
  so that the three pvmds (one machine) each have their own address: checks host names,
  rsh start, PVM's own protocol and the examples' results; the traffic is the OS's.
* test_pvm_over_paranic: the same run over libparanic_sock.so (10.77.0.0/24, which the OS
  does not have): pvmd-pvmd UDP and task-task TCP over ports, checked by the library's
  counters (the master pvmd's exit line with PARANIC_SOCK_DEBUG, the ring workers'
  pn_sock_stat("tcp_remote")) and debug lines (pvmd' taking over the inherited UDP
  socket; a task accepting a connection from another node).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.launch import USERLIB_BUILD, clean_env
from paranic.paths import TREE as ROOT
from paranic.sim.paths import build_lock

PVM_DIR = ROOT / "userlib" / "sock" / "pvm"
RSH = PVM_DIR / "paranic-rsh"
JOB = PVM_DIR / "pvm_job.sh"
RING_SRC = PVM_DIR / "pn_pvm_ring.c"
RING_DIR = USERLIB_BUILD / "pvm"
RING = RING_DIR / "pn_pvm_ring"
PARANIC = [sys.executable, "-m", "paranic.cli"]
NODES = 3


def need_pvm() -> None:
    for prog, pkg in (("pvmd", "pvm"), ("hello.pvm", "pvm-examples"), ("master1", "pvm-examples")):
        if shutil.which(prog) is None:
            pytest.skip(f"{prog} is not installed (Debian package {pkg}: scripts/deps.sh installs it)")
    if not Path("/usr/include/pvm3.h").exists():
        pytest.skip("pvm3.h is not installed (Debian package pvm-dev: scripts/deps.sh installs it)")


@pytest.fixture(scope="module")
def ring(userlib_build) -> Path:
    """Build pn_pvm_ring against Debian's libpvm3 (warnings are errors)."""
    need_pvm()
    RING_DIR.mkdir(parents=True, exist_ok=True)
    with build_lock("pvm-ring"):
        r = subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(RING),
                            str(RING_SRC), "-lpvm3"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return RING


def paranic_run(args: list[str], tmp_path: Path, env: dict[str, str], timeout: int = 90) -> subprocess.CompletedProcess:
    e = clean_env()
    e.update(env)
    return subprocess.run([*PARANIC, "run", "--backend", "sw", "--nodes", str(NODES), "--timeout", str(timeout), "--",
                           *args], capture_output=True, text=True, cwd=tmp_path, env=e, timeout=timeout + 60)


def node0(out: str) -> list[str]:
    return [ln[3:] for ln in out.splitlines() if ln.startswith("0: ")]


def logs(work: Path) -> str:
    """pvmd's log of every node (pvml.<uid> in the node's PVM_TMP) and pvmd's output."""
    parts = [f"--- {p.relative_to(work)}\n{p.read_text(errors='replace')}"
             for p in sorted(work.glob("pvm/node*/pvml.*")) + [work / "pvmd.out"] if p.exists()]
    return "\n".join(parts)


def test_rsh_starts_a_process_of_the_node(userlib_build, tmp_path):
    probe = ("import os, socket; from paranic.lib import Hal; h = Hal.open(); "
             "print('probe', socket.gethostname(), h.node_id, h.num_nodes, h.ctx_id, os.environ['PVM_TMP'])")
    script = tmp_path / "job.sh"
    script.write_text(f'[ "$PARANIC_NODE" = 0 ] || exit 0\n'
                      f'export PARANIC_PVM_TMP={tmp_path / "pvm"}\n'
                      f'exec {RSH} -n pn-node2 "{sys.executable} -c \\"{probe}\\""\n')
    r = paranic_run(["sh", str(script)], tmp_path, {}, timeout=60)
    line = [ln for ln in node0(r.stdout) if ln.startswith("probe")]
    assert r.returncode == 0 and len(line) == 1, r.stdout + r.stderr
    _, host, node, nodes, ctx, tmp = line[0].split()
    assert (host, int(node), int(nodes)) == ("pn-node2", 2, NODES)
    assert 0 <= int(ctx) and tmp == str(tmp_path / "pvm" / "node2") and Path(tmp).is_dir()
    bad = subprocess.run([str(RSH), "pn-node3", "true"], capture_output=True, text=True,
                         env={**clean_env(), "PARANIC_NODE": "0", "PARANIC_NODES": str(NODES)})
    assert bad.returncode == 2 and "unknown host pn-node3" in bad.stderr


def check_pvm_run(r: subprocess.CompletedProcess, work: Path, addr_prefix: str) -> dict[int, tuple[str, int]]:
    """The job's node-0 output: 3 hosts; hello's answer from another host; master1's 9
    results each as expected; every ring worker's sum right, workers on every host; the
    pvmds at their nodes' addresses; halt. Returns worker index -> (host, tcp_remote)."""
    out = node0(r.stdout)
    text = "\n".join(out) + "\n" + r.stderr + "\n" + logs(work)
    assert r.returncode == 0 and "ok pvm" in out, text
    assert f"hosts {NODES}" in out, text
    assert any(re.fullmatch(r"from t[0-9a-f]+: hello, world from pn-node[0-9]+", ln) for ln in out), text
    got = [re.fullmatch(r"I got ([0-9.]+) from (\d+); \(expecting ([0-9.]+)\)", ln) for ln in out]
    got = [m for m in got if m]
    assert sorted(int(m.group(2)) for m in got) == list(range(3 * NODES)), text
    assert all(float(m.group(1)) == float(m.group(3)) for m in got), text
    assert f"ok ring workers={2 * NODES} ints=16384 hosts={NODES}" in out, text
    workers = [re.fullmatch(r"worker (\d+) on (pn-node\d+) sum (\d+) ok tcp_remote (-?\d+)", ln) for ln in out]
    ring = {int(m.group(1)): (m.group(2), int(m.group(4))) for m in workers if m}
    assert sorted(ring) == list(range(2 * NODES)), text
    assert {host for host, _ in ring.values()} == {f"pn-node{i}" for i in range(NODES)}, text
    for i in range(NODES):
        log = "\n".join(p.read_text(errors="replace") for p in work.glob(f"pvm/node{i}/pvml.*"))
        assert re.search(rf"pn-node{i} \({re.escape(addr_prefix)}{i + 1}:\d+\)", log), text
    return ring


def pvm_env(ring: Path, **extra: str) -> dict[str, str]:
    return {"PVM_EP": f"/usr/bin:{ring.parent}", **extra}


def test_pvm_over_the_os(ring, tmp_path):
    work = tmp_path / "w"
    r = paranic_run(["sh", str(JOB), str(work), "hello.pvm", "master1", str(ring)], tmp_path,
                    pvm_env(ring, PARANIC_SOCK="0", PARANIC_SOCK_NET="127.1.0.0/24"))
    ring = check_pvm_run(r, work, "127.1.0.")
    assert all(remote == 0 for _, remote in ring.values()), ring   # preloaded, but off: the OS's TCP


def test_pvm_over_paranic(ring, tmp_path):
    work = tmp_path / "w"
    r = paranic_run(["sh", str(JOB), str(work), "hello.pvm", "master1", str(ring)], tmp_path,
                    pvm_env(ring, PARANIC_SOCK_DEBUG="2"))
    workers = check_pvm_run(r, work, "10.77.0.")
    log = logs(work)
    # Task-task TCP: worker i sends to worker i+1 over a direct route; between hosts that
    # is a cluster TCP connection, which both workers' libraries count (tcp_remote).
    n = len(workers)
    for i in range(n):
        j = (i + 1) % n
        if workers[i][0] != workers[j][0]:
            assert workers[i][1] >= 1 and workers[j][1] >= 1, (i, j, workers)
    assert any(workers[i][0] != workers[(i + 1) % n][0] for i in range(n)), workers
    # pvmd-pvmd UDP: the master pvmd (stderr: pvmd.out) sent and received datagrams over
    # ports, and never had to take its sockets back; its helper pvmd' (another process)
    # took over the inherited UDP socket (ppnetsock) to report the started hosts.
    out = (work / "pvmd.out").read_text(errors="replace")
    exits = {pid: tuple(map(int, c)) for pid, *c in
             re.findall(r"paranic_sock\[(\d+)\]: exit: .*counters: tcp_opened \d+ tcp_remote \d+ "
                        r"udp_sent (\d+) udp_recv (\d+) udp_taken (\d+)", out)}
    opened = re.findall(r"paranic_sock\[(\d+)\]: port open at node 0 ", out)
    master = opened[0] if opened else None
    assert master in exits, out
    sent, recv, taken = exits[master]
    assert sent >= 2 * (NODES - 1) and recv >= 2 * (NODES - 1) and taken == 0, (exits, out)
    takers = re.findall(r"paranic_sock\[(\d+)\]: UDP port \d+ taken over", out)
    assert takers and master not in takers, out
    # The tasks' stderr (the library's debug lines) reaches the master pvmd's log: some
    # process of one node accepted a ParaNIC connection from another node (a direct route).
    node_of = {pid: int(n) for pid, n in re.findall(r"paranic_sock\[(\d+)\]: node (\d+) of", log)}
    reqs = [(node_of.get(pid), int(src)) for pid, src in
            re.findall(r"paranic_sock\[(\d+)\]: REQ from node (\d+) ctx \d+ for port \d+: accepted", log)]
    assert any(dst is not None and dst != src for dst, src in reqs), log
