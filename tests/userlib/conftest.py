"""Shared helpers of the libparanic tests: build the library and its C test programs
once per session (``make -C userlib``), and run them under ``pn_launch``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
        """The node's "ok CASE ..." line (asserts there is exactly one)."""
        lines = [ln for ln in self.nodes.get(node, []) if ln.startswith(f"ok {case}")]
        assert len(lines) == 1, f"node {node}: no single 'ok {case}' line\n{self.out}"
        return lines[0]

    def fails(self) -> list[str]:
        return [f"{n}: {ln}" for n, lines in self.nodes.items() for ln in lines if ln.startswith("FAIL")]


@pytest.fixture(scope="session")
def userlib_build() -> Path:
    """Build libparanic (.so, .a) and the test programs; fails on any compiler warning."""
    r = subprocess.run(["make", "-C", str(ROOT / "userlib"), "-j2"], capture_output=True, text=True)
    assert r.returncode == 0, f"make failed:\n{r.stdout}\n{r.stderr}"
    return TESTS


def launch(prog: list[str], nodes: int, name: str, timeout: int = 60, extra: list[str] | None = None,
           env: dict[str, str] | None = None) -> Run:
    """Run ``pn_launch -n NODES -f -t TIMEOUT [extra] -- prog`` on a fresh cluster."""
    cluster = f"pytest-{os.getpid()}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"
    cmd = [str(TESTS / "pn_launch"), "-n", str(nodes), "-c", cluster, "-t", str(timeout)]
    cmd += extra if extra is not None else ["-f"]
    cmd += ["--"] + prog
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("PARANIC_"):
            del e[k]
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


@pytest.fixture
def run_nodes(userlib_build):
    """The `launch` helper, after the build."""
    return launch
