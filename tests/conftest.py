"""Test-wide set-up: the tests' own helpers (``tests/model`` ...) are importable, in this
process and in the simulators cocotb starts (they take ``PYTHONPATH``); fixtures that
tests of several directories share (``userlib_build``, ``mpi_build``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent

if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if str(TESTS_DIR) not in _path:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), *_path])


@pytest.fixture(scope="session")
def userlib_build() -> Path:
    """Build libparanic (.so, .a), the tools and the test programs; fails on any compiler
    warning. tests/sim has its own, which also builds its C clients."""
    from paranic.launch import TESTS, BuildError, build_userlib

    try:
        build_userlib()
    except BuildError as e:
        pytest.fail(str(e))
    return TESTS


@pytest.fixture(scope="module")
def mpi_build(userlib_build) -> Path:
    """The MPI programs and the libfabric provider (tests/userlib/test_mpi.py,
    tests/sim/test_mpi_sim.py; docs/mpi.md): fails, never skips, when Open MPI or the
    provider is missing."""
    from paranic import mpirun as M

    why = M.missing()
    if why:
        pytest.fail(why)
    M.build()
    why = M.provider_missing()
    if why:
        pytest.fail(why)
    return M.MPI_BUILD
