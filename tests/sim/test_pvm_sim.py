"""PVM (Debian's pvm, pvm-examples) across 3 nodes of the simulated ring:4, over
libparanic_sock.so (docs/pvm.md): the same job as tests/userlib/test_pvm.py's
test_pvm_over_paranic, on the `sim` backend (`paranic run --backend sim` starts the
cached simulator). hello.pvm, pn_pvm_ring (6 workers, 16384 ints each over PVM's direct
task-to-task TCP routes, 20 timed round trips) and master1, then `halt`.

A few seconds (plus the simulator's start). Before the socket library waited
SK_DEAD_GRACE_NS before resetting a connection whose peer process had exited, 1 run in 4
hung here: a worker's ring data still in the simulated network when the sending worker
exited was discarded by the receiver's liveness check (docs/pvm.md)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.launch import clean_env
from paranic.paths import TREE as ROOT

PVM_DIR = ROOT / "userlib" / "sock" / "pvm"
JOB = PVM_DIR / "pvm_job.sh"
NODES = 3


@pytest.fixture(scope="module")
def ring(userlib_build, tmp_path_factory) -> Path:
    for prog, pkg in (("pvmd", "pvm"), ("hello.pvm", "pvm-examples"), ("master1", "pvm-examples")):
        if shutil.which(prog) is None:
            pytest.skip(f"{prog} is not installed (Debian package {pkg}: scripts/deps.sh installs it)")
    if not Path("/usr/include/pvm3.h").exists():
        pytest.skip("pvm3.h is not installed (Debian package pvm-dev: scripts/deps.sh installs it)")
    exe = tmp_path_factory.mktemp("pvmring") / "pn_pvm_ring"
    r = subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                        str(PVM_DIR / "pn_pvm_ring.c"), "-lpvm3"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def test_pvm_on_the_simulator(ring, tmp_path):
    work = tmp_path / "w"
    env = clean_env()
    env.update({"PVM_EP": f"/usr/bin:{ring.parent}", "PVM_WAIT_S": "120", "PARANIC_SOCK_DEBUG": "1"})
    r = subprocess.run([sys.executable, "-m", "paranic.cli", "run", "--backend", "sim", "--nodes", str(NODES),
                        "--timeout", "240", "--", "sh", str(JOB), str(work), "hello.pvm", f"{ring} 6 16384 20",
                        "master1"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    out = [ln[3:] for ln in r.stdout.splitlines() if ln.startswith("0: ")]
    pvmd_out = (work / "pvmd.out").read_text(errors="replace") if (work / "pvmd.out").exists() else ""
    text = r.stdout + r.stderr + pvmd_out
    assert r.returncode == 0 and "ok pvm" in out and f"hosts {NODES}" in out, text
    assert any(re.fullmatch(r"from t[0-9a-f]+: hello, world from pn-node[12]", ln) for ln in out), text
    got = [m for m in (re.fullmatch(r"I got ([0-9.]+) from (\d+); \(expecting ([0-9.]+)\)", ln) for ln in out) if m]
    assert sorted(int(m.group(2)) for m in got) == list(range(3 * NODES)), text
    assert all(float(m.group(1)) == float(m.group(3)) for m in got), text
    assert "ok ring workers=6 ints=16384 hosts=3" in out, text
    workers = {int(m.group(1)): (m.group(2), int(m.group(3))) for m in
               (re.fullmatch(r"worker (\d+) on (pn-node\d+) sum \d+ ok tcp_remote (-?\d+)", ln) for ln in out) if m}
    assert sorted(workers) == list(range(6)), text
    for i in range(6):   # a ring neighbour on another host: a cluster TCP connection on both sides
        j = (i + 1) % 6
        if workers[i][0] != workers[j][0]:
            assert workers[i][1] >= 1 and workers[j][1] >= 1, (workers, text)
    for i in range(NODES):   # every pvmd at its node's cluster address (UDP over ports)
        log = "\n".join(p.read_text(errors="replace") for p in work.glob(f"pvm/node{i}/pvml.*"))
        assert re.search(rf"pn-node{i} \(10\.77\.0\.{i + 1}:\d+\)", log), text
    opened = re.findall(r"paranic_sock\[(\d+)\]: port open at node 0 context \d+ \(sim\)", pvmd_out)
    exits = {pid: (int(s), int(v)) for pid, s, v in
             re.findall(r"paranic_sock\[(\d+)\]: exit: .* udp_sent (\d+) udp_recv (\d+) udp_taken \d+", pvmd_out)}
    assert opened and opened[0] in exits and min(exits[opened[0]]) >= 2 * (NODES - 1), text
    takers = re.findall(r"paranic_sock\[(\d+)\]: UDP port \d+ taken over", pvmd_out)
    assert takers and opened[0] not in takers, text
