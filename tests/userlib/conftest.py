"""Fixtures of the libparanic tests: build the library, its tools and C test programs
once per session (``make -C userlib``), and run them under ``pn_launch``
(``paranic.launch``)."""

from __future__ import annotations

import os

import pytest

from paranic.launch import Run, clean_env, cluster_name
from paranic.launch import launch as _launch



def launch(prog: list[str], nodes: int, name: str, timeout: int = 60, extra: list[str] | None = None,
           env: dict[str, str] | None = None, ppn: int = 1) -> Run:
    """Run ``pn_launch -n NODES [-p PPN] -f -t TIMEOUT [extra] -- prog`` on a fresh sw cluster."""
    e = clean_env()
    e.update(env or {})
    try:
        return _launch(prog, nodes, cluster_name(f"pytest-{os.getpid()}-{name}"), timeout=timeout,
                       extra=extra, env=e, ppn=ppn)
    except TimeoutError as err:
        raise AssertionError(str(err)) from None


@pytest.fixture
def run_nodes(userlib_build):
    """The `launch` helper, after the build."""
    return launch
