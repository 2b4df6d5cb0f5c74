"""The collectives' software path (pn_coll.h, userlib/src/coll.c) on the sw backend:
every op x type x operator x size on 2, 4 and 8 nodes against ``paranic.hls.reduce_ref``
(bit-identical on every node), disagreeing nodes, bad arguments, a node killed
mid-operation, and the generated tree macros against the spec."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from model.collcases import (COLL_TEST, EINVAL, OP, R, SLOT, T, bad_cases, bad_sequence, check_bad, check_results,
                             expected, nan_cases, run_cases, sweep)
from paranic.hls import NP_TYPES, random_vector, reduce_ref
from paranic.spec import kernels as K

@pytest.mark.parametrize("n", [2, 4, 8])
def test_sweep(run_nodes, tmp_path, n):
    """Every op x type x operator x size (0, one element, 8, 256 bytes), random roots."""
    cases = sweep(n, seed=n)
    rcs, outs = run_cases(run_nodes, tmp_path, n, cases, f"coll-sweep-{n}")
    check_results(cases, rcs, outs, n)


def test_float_order_matters(run_nodes, tmp_path):
    """Float sums whose bits depend on the order: the result is reduce_ref's (the
    kernel's tree order for that root), the same bits on every node, and differs from a
    plain sum over node ids for some roots (so the order is really the defined one)."""
    import numpy as np
    n, rng = 8, random.Random(7)
    cases, differs = [], 0
    for root in range(n):
        vecs = [random_vector(rng, T.F32, SLOT) for _ in range(n)]
        for op in (OP.ALLREDUCE, OP.REDUCE):
            cases.append(dict(op=op, dtype=T.F32, red=R.SUM, root=0 if op == OP.ALLREDUCE else root, vectors=vecs))
        plain = np.zeros(SLOT // 4, dtype=NP_TYPES[T.F32])
        for v in vecs:
            plain = plain + np.frombuffer(v, dtype=NP_TYPES[T.F32])
        differs += plain.tobytes() != reduce_ref(vecs, root, T.F32, R.SUM, K.COLL_DEFAULT_RADIX_LOG2)
    assert differs, "the test vectors do not depend on the order"
    rcs, outs = run_cases(run_nodes, tmp_path, n, cases, "coll-order")
    check_results(cases, rcs, outs, n)


def test_nan_sums_are_canonical(run_nodes, tmp_path):
    """A float sum that is a NaN is the canonical quiet NaN on every node, as the kernel
    gives it, whatever the payloads and signs of the NaNs that went in."""
    n = 4
    cases = nan_cases(n)
    rcs, outs = run_cases(run_nodes, tmp_path, n, cases, "coll-nan")
    check_results(cases, rcs, outs, n)
    for c in cases:
        size = K.COLL_TYPE_BYTES[c["dtype"]]
        qnan = (K.COLL_F32_QNAN if size == 4 else K.COLL_F64_QNAN).to_bytes(size, "little")
        assert expected(c, n)[:3 * size] == qnan * 3


def test_mismatch_and_bad_args(run_nodes, tmp_path):
    """Nodes disagreeing on size, type, operator, root or op: -EBADMSG on every node; bad
    arguments on one node or all (size not a multiple, > 256, AND on floats, bad root,
    NULL buffer): -EINVAL on every node; and the next operation works."""
    n = 4
    good, bad = bad_cases(n, random.Random(3))
    rcs, outs = run_cases(run_nodes, tmp_path, n, bad_sequence(good, bad), "coll-bad")
    check_bad(good, bad, rcs, outs, n)


@pytest.mark.parametrize("value", ["0", "abc", "3600001"])
def test_bad_coll_timeout(run_nodes, tmp_path, value):
    """A bad $PARANIC_COLL_TIMEOUT_MS: -EINVAL at once, for every call."""
    rng = random.Random(5)
    cases = [dict(op=OP.ALLREDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=[random_vector(rng, T.I32, 8)] * 2)] * 2
    rcs, outs = run_cases(run_nodes, tmp_path, 2, cases, "coll-badtmo", env={"PARANIC_COLL_TIMEOUT_MS": value})
    assert rcs == [[EINVAL, EINVAL]] * 2


@pytest.mark.parametrize("knob", ["PARANIC_PORT_TIMEOUT_MS", "PARANIC_COLL_TIMEOUT_MS"])
def test_killed_node(run_nodes, knob):
    """Node 1 (an inner node of the 8-node tree: parent 0, children 5..7) is killed
    (SIGKILL) 100 ms into a loop of allreduces, in the middle of one or between two:
    every other node's allreduce ends with an error (its own timeout or a neighbour's
    ABORT) within a few timeouts, nobody hangs, and the survivors exit normally. The
    timeout is the port's, or the collectives' own (the port's then stays 5 s)."""
    tmo = 300
    r = run_nodes([str(COLL_TEST), "kill", "sw"], 8, f"coll-kill-{knob[8:12]}", timeout=60,
                  extra=["-k", "1:100:phase-kill"], env={knob: str(tmo)})
    assert "launch: node 1 killed by signal 9" in r.out, r.out
    for node in (0, 2, 3, 4, 5, 6, 7):
        line = next((ln for ln in r.nodes[node] if ln.startswith("ok kill")), None)
        assert line, (node, r.out)
        m = re.match(r"ok kill rc=(-\d+) \((.+)\) after (\d+) operations, the last took (\d+) ms", line)
        assert m and m.group(2) in ("Connection timed out", "Connection reset by peer"), line
        assert int(m.group(3)) > 0 and int(m.group(4)) < 10 * tmo, line


def test_tree_macros_match_spec(userlib_build):
    """PN_COLL_PARENT / PN_COLL_FIRST_CHILD (generated) = coll_parent / coll_children."""
    import subprocess
    lg = K.COLL_DEFAULT_RADIX_LOG2
    for n in (1, 2, 5, 8, 17, 64):
        out = subprocess.run([str(COLL_TEST), "tree", str(n)], capture_output=True, text=True, check=True).stdout
        for rel, line in enumerate(out.splitlines()):
            f = line.split()
            parent = K.coll_parent(rel, lg)
            assert int(f[3]) == (-1 if parent is None else parent), line
            assert [int(x) for x in f[4:]] == K.coll_children(rel, n, lg), line


def test_python_bindings(run_nodes):
    """Ports.allreduce / reduce / bcast (numpy arrays and bytes) and the error as PnError."""
    import sys
    n = 4
    r = run_nodes([sys.executable, str(Path(__file__).with_name("coll_py_node.py"))], n, "coll-py", timeout=60)
    assert r.rc == 0 and not r.fails(), r.out
    total = sum(range(1, n + 1))
    for node in range(n):
        lines = r.nodes[node]
        assert f"ok allreduce {[float(i * total) for i in range(8)]}" in lines, r.out
        assert "ok bcast " + "01" * 8 in lines, r.out
        assert "ok bcast int8 [2, 2, 2, 2]" in lines, r.out
        assert ("ok reduce [3, 0]" if node == 0 else "ok reduce None") in lines, r.out
        assert "ok bytes " + total.to_bytes(8, "little").hex() in lines, r.out
        assert "ok error 22" in lines, r.out


def test_bench_table_and_plot(tmp_path):
    """`paranic bench collective`'s table, JSON rows and plot from pn_collbench lines of
    the unit's two modes (all-to-all, tree) and software."""
    from paranic.bench import collective as C

    def raw(path, k):
        return [{"op": "allreduce", "path": path, "bytes": b, "nodes": 8,
                 "hw_ns": [k * (9000 + b), k * (10000 + b), k * (11000 + b), 50000], "wall_ns": [1e6] * 4}
                for b in C.SIZES]
    barrier = [{"op": "barrier", "path": "nic", "bytes": 0, "nodes": 8, "hw_ns": [1500, 1600, 1700], "wall_ns": [1e5] * 3}]
    rows = (C.rows_of(raw("unit", 1), "ring:8", "a2a") + C.rows_of(raw("unit", 2), "ring:8", "tree") +
            C.rows_of(raw("sw", 3), "ring:8", "sw") + C.rows_of(barrier, "ring:8"))
    assert rows[0]["hw"]["n"] == 4 and rows[0]["hw"]["median_ns"] == 10508 and rows[0]["hw"]["max_ns"] == 50000
    assert [r["path"] for r in rows] == ["unit"] * 6 + ["sw"] * 3 + ["nic"]
    assert [r["mode"] for r in rows] == ["a2a"] * 3 + ["tree"] * 3 + ["sw"] * 3 + ["nic"]
    t = C.table(rows)
    line8 = next(ln for ln in t.splitlines() if ln.split()[:3] == ["8", "ring:8", "8"])
    # a2a median 10.51 µs, tree 21.02, sw 31.52 µs, the barrier 1.60 µs, ParaStation 2.3 µs, in that order
    assert re.search(r"10\.51 \[.*21\.02 \[.*31\.52 \[.*1\.60 \[.*2\.3 µs", line8), t
    assert C.parastation_barrier_us(8) == 2.3
    C.plot(rows, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_header_stands_alone_and_null_port(userlib_build, tmp_path):
    """pn_coll.h compiles on its own in C11 and C++17; the calls are exported; a NULL
    port is -EINVAL at once (no communication)."""
    import subprocess
    from paranic.launch import USERLIB_BUILD as BUILD
    from paranic.paths import TREE
    src = tmp_path / "c.c"
    src.write_text("#include <paranic/pn_coll.h>\nint main(void) { char b[8] = {0};\n"
                   "return pn_allreduce(0, b, b, 8, PN_COLL_T_I32, PN_COLL_RED_SUM) == -22 &&\n"
                   "       pn_reduce(0, 0, b, b, 8, PN_COLL_T_F64, PN_COLL_RED_MAX) == -22 &&\n"
                   "       pn_bcast(0, 0, b, 8) == -22 ? 0 : 1; }\n")
    for cc, std in (("gcc", "-std=c11"), ("g++", "-std=c++17")):
        r = subprocess.run([cc, std, "-Wall", "-Wextra", "-Werror", "-I", str(TREE / "userlib/include"), "-x",
                            "c" if cc == "gcc" else "c++", str(src), "-o", str(tmp_path / "a"), "-L", str(BUILD),
                            f"-Wl,-rpath,{BUILD}", "-lparanic"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert subprocess.run([str(tmp_path / "a")]).returncode == 0
