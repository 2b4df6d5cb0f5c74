"""Where the simulator's sources are and where builds go.

The simulator is built from a source tree (this package lives in its ``sim/python``);
builds go under ``build/`` at the top of that tree, or under ``$PARANIC_BUILD``.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: sim/ of the source tree, the tree itself, the C++ harness.
SIM_DIR = Path(__file__).resolve().parents[1]
TREE = SIM_DIR.parent
HARNESS_DIR = SIM_DIR / "harness"
#: Every build product (Verilog, Verilated models, run directories).
BUILD_ROOT = Path(os.environ.get("PARANIC_BUILD", TREE / "build"))
#: Sockets, ready files and logs of running simulators: where libparanic's sim backend
#: looks for them (hal_sim.c: ``$PARANIC_RUN_DIR``, else the tree's build/run).
RUN_DIR = Path(os.environ.get("PARANIC_RUN_DIR") or TREE / "build" / "run")


@contextmanager
def build_lock(name: str) -> Iterator[None]:
    """Hold the build lock ``name`` (a file under ``BUILD_ROOT/.locks``): processes that
    build the same thing at once (test workers, several launches) take turns, and the
    later ones find it built."""
    d = BUILD_ROOT / ".locks"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
