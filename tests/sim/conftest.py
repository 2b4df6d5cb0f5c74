"""Fixtures of the simulator tests: the cached 4-node ring build, a running simulator
per test module, libparanic and the C test programs (helpers: simtest.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from paranic.sim import build as simbuild, run as simrun
from paranic.launch import BuildError, build_userlib
from paranic.sim.paths import build_lock
from simtest import BUILD, HERE, ROOT, RUN, TESTS, sim_socket


@pytest.fixture(scope="session")
def userlib_build() -> Path:
    """libparanic (with the sim backend), its C test programs, and tests/sim's own."""
    try:
        build_userlib()
    except BuildError as e:
        pytest.fail(str(e))
    out = BUILD / "simtests"
    out.mkdir(parents=True, exist_ok=True)
    with build_lock("simtests"):
        _build_simtests(out)
    return TESTS


def _build_simtests(out: Path) -> None:
    for src in HERE.glob("*.c"):
        exe = out / src.stem
        if exe.exists() and exe.stat().st_mtime >= max(src.stat().st_mtime, (BUILD / "libparanic.so").stat().st_mtime):
            continue
        r = subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
                            f"-I{ROOT / 'userlib/include'}", "-o", str(exe), str(src), f"-L{BUILD}",
                            f"-Wl,-rpath,{BUILD}", "-lparanic"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@pytest.fixture(scope="session", autouse=True)
def _run_dir(request):
    """The session's sockets and simulator logs: kept for a look when a test failed."""
    yield
    if not request.session.testsfailed:
        shutil.rmtree(RUN, ignore_errors=True)


@pytest.fixture(scope="session")
def sim_binary() -> Path:
    """The 4-node ring simulator, built once (minutes) and cached under build/sim."""
    return simbuild.build("ring:4")


@pytest.fixture(scope="module")
def sim4(sim_binary, userlib_build, request):
    """A running 4-node ring shared by the tests of a module. At the end: the NIC broke
    no PCIe rule and the harness refused no DMA."""
    sim = simrun.start("ring:4", socket=sim_socket(request.module.__name__.split(".")[-1]))
    try:
        yield sim
    finally:
        rc = sim.stop()
        log = sim.log_text()
        assert rc == 0, f"simulator exited with {rc}:\n{log[-3000:]}"
        assert "PCIe rule broken" not in log and "outside client memory" not in log, log[-3000:]




@pytest.fixture(scope="session")
def soc_ring_binary():
    """The SoC ring:4 simulator (tests/sim/test_soc_cluster.py, test_firmware_sim.py),
    built once (minutes the first time) and cached."""
    return simbuild.build("ring:4", soc=True)
