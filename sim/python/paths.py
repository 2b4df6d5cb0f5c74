"""Where the simulator's sources are and where builds go.

The simulator is built from a source tree (this package lives in its ``sim/python``);
builds go under ``build/`` at the top of that tree, or under ``$PARANIC_BUILD``.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
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


def generate_unless_current(out: Path, key: str, outputs: Sequence[Path], make: Callable[[], object]) -> bool:
    """Run ``make``, which writes ``outputs`` under ``out``, unless they all exist and
    ``out/.srckey`` holds ``key`` from the run that wrote them; return whether it ran.
    ``key`` hashes whatever the outputs are made from (:func:`source_key`). The caller
    holds a :func:`build_lock` when several processes may generate the same files."""
    stamp = out / ".srckey"
    if all(p.exists() for p in outputs) and stamp.exists() and stamp.read_text() == key:
        return False
    stamp.unlink(missing_ok=True)   # outputs half made by a failed run are never current
    make()
    out.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key)
    return True


def source_key(*parts: object) -> str:
    """A hash (hex) of ``parts``: a :class:`~pathlib.Path` stands for its file's contents
    and its path in the tree, ``bytes`` for themselves, anything else for its ``str``."""
    import hashlib

    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            h.update(str(p.relative_to(TREE) if p.is_relative_to(TREE) else p).encode() + b"\0")
            h.update(p.read_bytes())
        else:
            h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()
