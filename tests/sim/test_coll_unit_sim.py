"""The collective unit of the simulated NIC (hw/collective.py), each node's kernel the HLS
kernel's own C++ run by the harness (sim/harness/coll.cpp), on a ring:4 and a torus:2x2:
pn_allreduce, pn_reduce and pn_bcast with ``PARANIC_COLL=hw`` (the unit, or -ENODEV: nothing falls back to software)
against ``paranic.hls.reduce_ref``, bit-identical on every node; disagreeing nodes and bad
arguments give their error on every node (nodes that disagree on the root or op: an
error where the trees part, see below); a context without the unit is refused (-ENODEV),
or takes the software path under ``auto``; a node killed mid-operation ends the others'
calls with -ETIMEDOUT."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

from model.collcases import (COLL_TEST, EBADMSG, EINVAL, OP, R, T, bad_cases, bad_sequence, check_bad,
                             check_results, nan_cases, run_cases, sweep)
from paranic.hls import random_vector
from paranic.sim import build as simbuild
from paranic.sim import run as simrun
from paranic.spec import kernels as K
from simtest import launch, sim_socket

HW = {"PARANIC_COLL": "hw"}
#: The unit's two ALLREDUCE modes: the tree, and all-to-all (the default up to 32 nodes).
MODES = {"tree": {**HW, "PARANIC_COLL_A2A_MAX": "0"}, "a2a": HW}
ENODEV, ETIMEDOUT, ENOTRECOVERABLE = -19, -110, -131
HOLDER = Path(__file__).with_name("coll_holder.py")


def on(sim):
    return lambda prog, n, name, **kw: launch(sim, prog, n, name, **kw)


@pytest.mark.parametrize("mode", MODES)
def test_unit_sweep(sim4, tmp_path, mode):
    """Every op x type x operator x size (0, one element, 8, 256 bytes), random roots,
    and float sums that come out NaN, on the unit of each of 4 nodes: reduce_ref's bits
    (a2a: a2a_reduce_ref's, the pairwise tree) on every node (a NaN sum: the canonical NaN)."""
    cases = sweep(4, seed=41) + nan_cases(4)
    rcs, outs = run_cases(None, tmp_path, 4, cases, f"unit-sweep-{mode}", backend="sim", launch=on(sim4),
                          timeout=900, env=MODES[mode])
    check_results(cases, rcs, outs, 4, a2a=mode == "a2a")


def _same_tree(c: dict, n: int) -> bool:
    """Every node names the same op and root (after the library's replacement of an
    impossible root by 0): the nodes build one tree."""
    eff = set()
    for node in range(n):
        o = {"op": c["op"], "root": c["root"], **c.get("override", {}).get(node, {})}
        eff.add((int(o["op"]), o["root"] if o["root"] < n else 0))
    return len(eff) == 1


@pytest.fixture(scope="module")
def torus4(userlib_build):
    """A 2x2 torus (4 link ports per node: its own build). The split build (one node
    model, docs/simulator.md "Split build") compiles in under a minute where the one-model
    build takes about three; the nodes' gateware and the harness are the same."""
    simbuild.build("torus:2x2", split=True)
    sim = simrun.start("torus:2x2", split=True, socket=sim_socket("coll-torus"), timeout=300)
    try:
        yield sim
    finally:
        assert sim.stop() == 0, sim.log_text()[-3000:]


@pytest.mark.parametrize("mode", MODES)
def test_unit_sweep_torus(torus4, tmp_path, mode):
    """The same sweep on a 2x2 torus, whose tree edges take other routes than the ring's."""
    cases = sweep(4, seed=53)
    rcs, outs = run_cases(None, tmp_path, 4, cases, f"unit-torus-{mode}", backend="sim", launch=on(torus4),
                          timeout=900, env=MODES[mode])
    check_results(cases, rcs, outs, 4, a2a=mode == "a2a")


@pytest.mark.parametrize("mode", MODES)
def test_unit_bad_input(sim4, tmp_path, mode):
    """Nodes that disagree on size, type or operator: -EBADMSG everywhere; bad arguments
    on one node or all: -EINVAL everywhere (the kernel ORs the err bits up the tree and
    down to every host; all-to-all: every node compares every member's header); the
    operation after each works."""
    good, bad = bad_cases(4, random.Random(43))
    bad = [(c, err) for c, err in bad if _same_tree(c, 4)]
    assert len(bad) == 9
    rcs, outs = run_cases(None, tmp_path, 4, bad_sequence(good, bad), f"unit-bad-{mode}", backend="sim",
                          launch=on(sim4), timeout=900, env=MODES[mode])
    check_bad(good, bad, rcs, outs, 4, a2a=mode == "a2a")


def test_unit_different_trees(sim4, tmp_path):
    """Nodes that disagree on the root or the op build different trees, which no kernel
    sees whole. Nobody hangs, and some node fails: -EBADMSG where another tree's result
    reached it, -ETIMEDOUT after the collectives' timeout where none did (-EINVAL on a node
    with a bad root). A node that
    timed out refuses its next call (-ENOTRECOVERABLE) until its port is opened again;
    a node that the root's own tree served may succeed (a BCAST reaches the nodes that
    agree with its root). Each case is a job of its own (closing the contexts resets the
    units)."""
    good, bad = bad_cases(4, random.Random(43))
    cases = [c for c, _ in bad if not _same_tree(c, 4)]
    assert len(cases) == 5
    for i, c in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        rcs, _ = run_cases(None, d, 4, [c, good], f"unit-trees-{i}", backend="sim", launch=on(sim4), timeout=300,
                           env={**HW, "PARANIC_COLL_TIMEOUT_MS": "300"})
        for node in range(4):
            assert rcs[node][0] in (0, EINVAL, EBADMSG, ETIMEDOUT), (i, node, rcs[node])
            if rcs[node][0] == ETIMEDOUT:
                assert rcs[node][1] == ENOTRECOVERABLE, (i, node, rcs[node])
        assert any(r[0] != 0 for r in rcs), (i, rcs)


def _one_allreduce(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [dict(op=OP.ALLREDUCE, dtype=T.F64, red=R.SUM, root=0,
                 vectors=[random_vector(rng, T.F64, 64) for _ in range(n)])] * 2


def test_context_without_unit(sim4, tmp_path):
    """Each node's unit belongs to the first context that sends it a command (here a
    holder on ctx 0, whose allreduce takes it); coll_test's context 1 is refused: -ENODEV
    under PARANIC_COLL=hw on every node, and the software path's correct result under auto."""
    cases = _one_allreduce(4, 47)
    for mode, rc in (("hw", ENODEV), ("auto", 0)):
        d = tmp_path / mode
        d.mkdir()
        holder = [sys.executable, str(HOLDER)]
        rcs, outs = run_cases(None, d, 4, cases, f"unit-none-{mode}", backend="sim", timeout=600,
                              launch=lambda prog, n, name, **kw: _checked(launch(sim4, holder + prog, n, name, **kw)),
                              env={"PARANIC_COLL": mode})
        assert all(r == [rc, rc] for r in rcs), (mode, rcs)
        if rc == 0:
            check_results(cases, rcs, outs, 4)


def _checked(r):
    assert all("holding the unit: unit" in r.nodes[k] for k in range(4)), r.out
    return r


@pytest.mark.parametrize("mode", MODES)
def test_unit_killed_node(sim4, mode):
    """Node 1 is killed during a loop of allreduces on the unit: every other node's call
    ends with -ETIMEDOUT (the collectives' timeout, 300 ms of the simulator's work clock),
    nobody hangs, the survivors exit normally."""
    r = launch(sim4, [str(COLL_TEST), "kill", "sim"], 4, f"unit-kill-{mode}", timeout=300,
               extra=["-k", "1:2000:phase-kill"], env={**MODES[mode], "PARANIC_COLL_TIMEOUT_MS": "300"})
    assert "launch: node 1 killed by signal 9" in r.out, r.out
    for node in (0, 2, 3):
        line = next((ln for ln in r.nodes[node] if ln.startswith("ok kill")), None)
        assert line, (node, r.out)
        m = re.match(r"ok kill rc=(-\d+) \((.+)\) after (\d+) operations", line)
        assert m and m.group(2) == "Connection timed out" and int(m.group(3)) > 0, line


@pytest.fixture(scope="module")
def ring8(sim_binary, userlib_build):
    """A ring of 8 (its own build, several minutes: the test using it is slow)."""
    sim = simrun.start("ring:8", socket=sim_socket("coll-ring8"), timeout=1800)
    try:
        yield sim
    finally:
        assert sim.stop() == 0, sim.log_text()[-3000:]


@pytest.mark.slow   # the ring:8 build; with it built, about 20 s
def test_unit_allreduce_order_on_8_nodes(ring8, tmp_path):
    """On 8 nodes the two modes' float sums differ: the unit's ALLREDUCE gives
    a2a_reduce_ref's bits (the pairwise tree) on every node by default, reduce_ref's (the tree of
    fan-out 4) with PARANIC_COLL_A2A_MAX=0; each differs from the other for some case, so
    the check sees which mode ran."""
    from paranic.hls import a2a_reduce_ref, reduce_ref
    rng = random.Random(61)
    cases = [dict(op=OP.ALLREDUCE, dtype=dt, red=R.SUM, root=0,
                  vectors=[random_vector(rng, dt, nb) for _ in range(8)])
             for dt in (T.F64, T.F32) for nb in (8, 64, 256)]
    differ = [a2a_reduce_ref(c["vectors"], c["dtype"], c["red"]) !=
              reduce_ref(c["vectors"], 0, c["dtype"], c["red"], K.COLL_DEFAULT_RADIX_LOG2) for c in cases]
    assert sum(differ) >= 4
    for mode in MODES:
        d = tmp_path / mode
        d.mkdir()
        rcs, outs = run_cases(None, d, 8, cases, f"unit-order-{mode}", backend="sim", launch=on(ring8), timeout=600,
                              env=MODES[mode])
        check_results(cases, rcs, outs, 8, a2a=mode == "a2a")
