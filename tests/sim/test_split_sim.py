"""The split build (docs/simulator.md, "Split build"): one Verilated model per node, the
cables' delay in the harness. It must behave as the one-model cluster: the links train
in the same cycle (also with a cable cut) and the HAL's 8-byte hardware path takes the
same cycles."""

from __future__ import annotations

import re

import pytest

from paranic.sim import build as simbuild
from paranic.sim import run as simrun

from simtest import BUILD, launch, sim_socket

#: The split build is opt-in and its node model is a build of its own (minutes): make test-all.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def split_binary():
    return simbuild.build("ring:4", split=True)


def _latency(sim) -> list[tuple[int, ...]]:
    r = launch(sim, [str(BUILD / "simtests" / "sim_latency"), "30", "8"], 2, "split-latency", timeout=200)
    assert r.rc == 0 and not r.fails(), r.out
    out = []
    for node in (0, 1):
        line = [ln for ln in r.nodes[node] if ln.startswith("direction")][0]
        out.append(tuple(map(int, re.search(
            r"min (\d+) median (\d+) max (\d+) cycles; issue->doorbell (\d+), doorbell->rx valid (\d+)",
            line).groups())))
    return out


def test_split_matches_one_model(split_binary, sim_binary, userlib_build):
    with simrun.start("ring:4", socket=sim_socket("split"), split=True) as sim:
        split_up = sim.info["links_up_cycle"]
        split_lat = _latency(sim)
    with simrun.start("ring:4", socket=sim_socket("onemodel")) as sim:
        one_up = sim.info["links_up_cycle"]
        one_lat = _latency(sim)
    assert split_up == one_up, (split_up, one_up)
    # The hardware path (doorbell -> RX valid) is the same number of cycles; issue->doorbell
    # is the harness's MMIO model, also the same.
    for s, o in zip(split_lat, one_lat):
        assert s[3:] == o[3:], (split_lat, one_lat)


def test_split_cut_cable(split_binary, sim_binary, userlib_build):
    """Cable 0 (nodes 0 and 1) cut from the start: the other links train in the same cycle
    in both builds (the cut cable's ends see nothing: the cut drops words at the cable's
    entry and exit in both)."""
    ups = []
    for split in (True, False):
        with simrun.start("ring:4", socket=sim_socket(f"cut-{split}"), split=split, cut=["0@0"]) as sim:
            ups.append(sim.info["links_up_cycle"])
            log = sim.log_text()
        assert "PCIe rule broken" not in log
    assert ups[0] == ups[1], ups


def test_split_worker_threads_match(split_binary, userlib_build):
    """--threads 2 (docs/simulator.md, "Worker threads"): the node models are evaluated on
    two threads between the harness's steps; the links train in the same cycle and the
    8-byte hardware path takes the same cycles as on one thread."""
    got = []
    for threads in (1, 2):
        with simrun.start("ring:4", socket=sim_socket(f"threads{threads}"), split=True,
                          extra_args=["--threads", str(threads)]) as sim:
            got.append((sim.info["links_up_cycle"], [x[3:] for x in _latency(sim)]))
            log = sim.log_text()
        if threads == 2:
            assert "2 threads evaluate the 4 node models" in log, log[-2000:]
    assert got[0] == got[1], got
