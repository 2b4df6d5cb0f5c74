"""Helpers of the simulator tests (a module of its own: test modules import it by
name, which a second `conftest` elsewhere in tests/ cannot shadow)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from paranic import simcluster

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD = ROOT / "build" / "userlib"
TESTS = BUILD / "tests"


@dataclass
class Run:
    """Output of one pn_launch run, split by node."""

    rc: int
    out: str
    nodes: dict[int, list[str]] = field(default_factory=dict)
    launch: list[str] = field(default_factory=list)

    def ok(self, node: int, case: str) -> str:
        lines = [ln for ln in self.nodes.get(node, []) if ln.startswith(f"ok {case}")]
        assert len(lines) == 1, f"node {node}: no single 'ok {case}' line\n{self.out}"
        return lines[0]

    def fails(self) -> list[str]:
        return [f"{n}: {ln}" for n, lines in self.nodes.items() for ln in lines if ln.startswith("FAIL")]


#: Sockets and logs of a test session (removed at its end when every test passed).
RUN = simcluster.RUN_DIR / f"pytest-{os.getpid()}"


def sim_socket(tag: str) -> Path:
    RUN.mkdir(parents=True, exist_ok=True)
    return RUN / f"{tag}.sock"



def launch(sim, prog: list[str], nodes: int, name: str, timeout: int = 120, extra: list[str] | None = None,
           env: dict[str, str] | None = None) -> Run:
    """``pn_launch -n NODES -b sim -f -t TIMEOUT [extra] -- prog`` against ``sim``."""
    cluster = f"pytest-{os.getpid()}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"
    cmd = [str(TESTS / "pn_launch"), "-n", str(nodes), "-c", cluster, "-b", "sim", "-t", str(timeout)]
    cmd += extra if extra is not None else ["-f"]
    cmd += ["--"] + prog
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
    if sim is not None:
        e = sim.env(e)
    e.update(env or {})
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        raise AssertionError(f"pn_launch did not end:\n{out}")
    run = Run(p.returncode, out)
    for line in out.splitlines():
        m = re.match(r"^(\d+): (.*)$", line)
        if m:
            run.nodes.setdefault(int(m.group(1)), []).append(m.group(2))
        elif line.startswith("launch:"):
            run.launch.append(line)
    return run
