"""Helpers of the simulator tests (a module of its own: test modules import it by
name, which a second `conftest` elsewhere in tests/ cannot shadow). The launcher
itself is ``paranic.launch``."""

from __future__ import annotations

import os
from pathlib import Path

from paranic.sim import run as simrun
from paranic.paths import TREE as ROOT  # noqa: F401  (re-exported for the tests)
from paranic.launch import TESTS, USERLIB_BUILD as BUILD, Run, clean_env, cluster_name  # noqa: F401
from paranic.launch import launch as _launch

HERE = Path(__file__).resolve().parent

#: Sockets and logs of a test session (removed at its end when every test passed).
RUN = simrun.RUN_DIR / f"pytest-{os.getpid()}"


def sim_socket(tag: str) -> Path:
    RUN.mkdir(parents=True, exist_ok=True)
    return RUN / f"{tag}.sock"


def launch(sim, prog: list[str], nodes: int, name: str, timeout: int = 120, extra: list[str] | None = None,
           env: dict[str, str] | None = None) -> Run:
    """``pn_launch -n NODES -b sim -f -t TIMEOUT [extra] -- prog`` against ``sim``."""
    e = clean_env()
    if sim is not None:
        e = sim.env(e)
    e.update(env or {})
    try:
        return _launch(prog, nodes, cluster_name(f"pytest-{os.getpid()}-{name}"), backend="sim",
                       timeout=timeout, extra=extra, env=e)
    except TimeoutError as err:
        raise AssertionError(str(err)) from None
