"""Fixtures of the fuzzing tests: the libFuzzer harnesses (tests/fuzz/Makefile, built with
clang under ASan and UBSan into build/fuzz/); libparanic itself (for the peers that lie,
test_peers.py) is tests/conftest.py's ``userlib_build``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from paranic.sim.paths import build_lock

HERE = Path(__file__).resolve().parent
TOP = HERE.parents[1]
BUILD = TOP / "build" / "fuzz"


@pytest.fixture(scope="session")
def fuzz_build() -> Path:
    """Build every harness (make -C tests/fuzz); fails when clang or its libFuzzer runtime is
    missing (scripts/deps.sh installs clang and libclang-rt-14-dev)."""
    if not shutil.which("clang"):
        pytest.fail("clang is not installed: the fuzz harnesses need it (make deps: clang, libclang-rt-14-dev)")
    with build_lock("fuzz"):
        r = subprocess.run(["make", "-s", "-C", str(HERE), "-j2", "all", f"BUILD={BUILD}"], capture_output=True,
                           text=True, timeout=900)
    if r.returncode != 0:
        pytest.fail("building the fuzz harnesses failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
    return BUILD
