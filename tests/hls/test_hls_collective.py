"""The HLS kernel `collective` in C simulation: a cluster of kernels joined by a network
that delivers in random orders (hls/collective/collective_tb.cpp), against the numpy
reference of the defined reduction order (paranic.hls.reduce_ref): docs/hls.md."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np

from paranic import hls
from paranic.spec import kernels as K

F = K.CollType
R = K.CollRed


def _check(cases):
    results = hls.run_collective(cases)
    for c, r in zip(cases, results):
        o = c.ops[0]
        assert not r.hangs, (c.nodes, o.op, r.hangs)
        assert r.results == hls.coll_expected(c), (c.nodes, c.radix_log2, o.op, o.dtype, o.red, o.root)
    return results


def test_every_op_type_reduction_size():
    cases = hls.sweep_cases(seed=1)
    seen = {(c.ops[0].op, c.ops[0].dtype, c.ops[0].red, len(c.ops[0].vectors[0])) for c in cases}
    for op, dt in itertools.product(K.CollOp, K.CollType):
        for red in ([R.SUM] if op == K.CollOp.BCAST else
                    [r for r in R if dt in (F.I32, F.I64) or r < R.AND]):
            for size in (K.COLL_TYPE_BYTES[dt], 64, K.COLL_MAX_BYTES):
                assert (op, dt, red, size) in seen
    _check(cases)


def _float_case(rng, dtype, nodes, radix, seed, op=K.CollOp.ALLREDUCE):
    vecs = [hls.random_vector(rng, dtype, K.COLL_MAX_BYTES) for _ in range(nodes)]
    return hls.CollCase(nodes, radix, seed, [hls.CollOpCase(op, dtype, R.SUM, rng.randrange(nodes), vecs, 7)])


def test_float_results_bit_identical_whatever_the_order():
    """Floating-point sums over 16 nodes: every node receives the same bits, the same in
    every arrival order (10 schedules), equal to the tree order's, which differs from
    a plain left-to-right sum over node ids (so the order is really the defined one)."""
    rng = random.Random(5)
    differs_from_linear = 0
    for dtype in (F.F32, F.F64):
        for radix in (0, 1, 2):
            base = _float_case(rng, dtype, 16, radix, 0)
            runs = [hls.CollCase(16, radix, seed, base.ops) for seed in range(1, 11)]
            texts = [hls.run_tb("collective", hls.coll_stdin([c])) for c in runs]
            if radix:   # a chain (fan-out 1) has one schedule; a tree many
                assert len(set(texts)) > 1, "the schedules did not vary"
            results = _check(runs)
            bits = {data for r in results for rs in r.results.values() for _, data in rs}
            assert len(bits) == 1
            o = base.ops[0]
            lin = np.frombuffer(o.vectors[0], dtype=hls.NP_TYPES[dtype]).copy()
            for v in o.vectors[1:]:
                lin = lin + np.frombuffer(v, dtype=hls.NP_TYPES[dtype])
            differs_from_linear += lin.tobytes() != bits.pop()
    assert differs_from_linear > 0


def test_operations_back_to_back():
    """Several operations in a row on each cluster (mixed kinds, roots, types): each
    result right, no host left waiting; a broadcast's result may overtake."""
    cases = hls.sequence_cases(40, seed=9)
    for c, r in zip(cases, hls.run_collective(cases)):
        assert not r.hangs
        assert r.results == hls.coll_expected(c)


def _one(nodes, op, dtype, red, vecs, override=None, root=0, radix=2, seed=3, a2a=False):
    c = hls.CollCase(nodes, radix, seed, [hls.CollOpCase(op, dtype, red, root, vecs, 1, override or {}, a2a=a2a)])
    r = hls.run_collective([c])[0]
    return c, r


def test_mismatched_sizes_give_an_error_on_every_node():
    vecs = [bytes(64)] * 6
    vecs[4] = bytes(32)
    for op in (K.CollOp.ALLREDUCE, K.CollOp.REDUCE):
        _, r = _one(6, op, F.I64, R.SUM, vecs, root=1)
        assert not r.hangs and sorted(r.results) == list(range(6))
        for n, [(h, _)] in r.results.items():
            assert h["err"] & K.CollErr.MISMATCH, (op, n, h)


def test_mismatched_types_give_an_error_on_every_node():
    vecs = [bytes(16)] * 5
    _, r = _one(5, K.CollOp.ALLREDUCE, F.I32, R.MAX, vecs, override={3: {"dtype": int(F.F32)}})
    assert not r.hangs and all(rs[0][0]["err"] & K.CollErr.MISMATCH for rs in r.results.values())


def test_bad_arguments():
    """AND on floats, a size beyond 256 bytes or not a multiple of the element: BAD_ARGS
    on every node, no hang; the kernel swallowed the whole command (the next works)."""
    for dtype, red, nbytes in ((F.F32, R.AND, 16), (F.I32, R.SUM, 264), (F.I64, R.SUM, 12)):
        vecs = [bytes(nbytes)] * 4
        c = hls.CollCase(4, 2, 1, [hls.CollOpCase(K.CollOp.ALLREDUCE, dtype, red, 0, vecs, 1),
                                   hls.CollOpCase(K.CollOp.ALLREDUCE, F.I32, R.SUM, 2, [b"\1\0\0\0"] * 4, 2)])
        r = hls.run_collective([c])[0]
        assert not r.hangs
        for n, (bad, good) in r.results.items():
            assert bad[0]["err"] & K.CollErr.BAD_ARGS, (dtype, red, nbytes, n)
            assert good[0]["err"] == 0 and good[1] == (4).to_bytes(4, "little")


def test_node_outside_the_operation_is_refused_at_once():
    vecs = [bytes(8)] * 3
    _, r = _one(3, K.CollOp.ALLREDUCE, F.I64, R.SUM, vecs, override={n: {"nodes": 2} for n in range(3)})
    assert not r.hangs
    assert r.results[2][0][0]["err"] & K.CollErr.BAD_ARGS and r.results[2][0][0]["nodata"]
    assert r.results[0][0][0]["err"] == 0 and r.results[1][0][0]["err"] == 0


def test_header_word_round_trips():
    h = dict(op=1, dtype=3, red=2, phase=1, nbytes=256, root=4095, nodes=4096, err=3, nodata=1, episode=65535)
    assert K.unpack_coll(K.pack_coll(**h)) == {**h, "refused": 0, "a2a": 0, "rsvd": 0}


# ---- all-to-all ALLREDUCE (header bit a2a) ---------------------------------------------

def test_a2a_every_type_reduction_size():
    """Every type x reduction x size on 1 to 32 nodes: every node's result is the
    pairwise tree over member index (a2a_reduce_ref), with a2a set in the result; no hang."""
    cases = hls.a2a_cases(seed=1)
    assert {c.nodes for c in cases} >= {1, 2, 8, 16, K.COLL_A2A_MAX_NODES}
    for c, r in zip(cases, _check(cases)):
        assert all(h["a2a"] == 1 for rs in r.results.values() for h, _ in rs)


def test_a2a_float_results_bit_identical_whatever_the_order():
    """Float sums over 5, 8, 13 and 32 nodes in 10 arrival orders: every node the same
    bits, which are the pairwise tree's over member index (a2a_reduce_ref), not the
    left-to-right sum over node ids (a2a_chain_ref) and not the tree's."""
    rng = random.Random(11)
    differs_from_tree = differs_from_chain = 0
    for dtype in (F.F32, F.F64):
        for n in (5, 8, 13, K.COLL_A2A_MAX_NODES):
            vecs = [hls.random_vector(rng, dtype, K.COLL_MAX_BYTES) for _ in range(n)]
            o = hls.CollOpCase(K.CollOp.ALLREDUCE, dtype, R.SUM, 0, vecs, 7, a2a=True)
            runs = [hls.CollCase(n, 2, seed, [o]) for seed in range(1, 11)]
            texts = [hls.run_tb("collective", hls.coll_stdin([c])) for c in runs]
            assert len(set(texts)) > 1, "the schedules did not vary"
            results = _check(runs)
            bits = {data for r in results for rs in r.results.values() for _, data in rs}
            assert bits == {hls.a2a_reduce_ref(vecs, dtype, R.SUM)}
            got = bits.pop()
            differs_from_tree += got != hls.reduce_ref(vecs, 0, dtype, R.SUM, 2)
            differs_from_chain += got != hls.a2a_chain_ref(vecs, dtype, R.SUM)
    assert differs_from_tree == 8 and differs_from_chain == 8


def test_a2a_fold_order():
    """The documented order, written out: a2a_fold (a2a_reduce_ref's order) on 1 to 8
    members with a combine that builds the expression."""
    want = {1: "0", 2: "(0+1)", 3: "((0+1)+2)", 4: "((0+1)+(2+3))", 5: "(((0+1)+(2+3))+4)",
            6: "(((0+1)+(2+3))+(4+5))", 7: "(((0+1)+(2+3))+((4+5)+6))",
            8: "(((0+1)+(2+3))+((4+5)+(6+7)))"}
    for n, w in want.items():
        assert hls.a2a_fold([str(k) for k in range(n)], lambda a, b: f"({a}+{b})") == w


def test_a2a_operations_back_to_back():
    """Mixed sequences where most ALLREDUCEs are all-to-all: a fast node's next vector
    may come before a slow node has finished (each member's queue of two)."""
    cases = hls.sequence_cases(40, seed=9, a2a=0.7)
    assert sum(o.a2a for c in cases for o in c.ops) > 50
    for c, r in zip(cases, hls.run_collective(cases)):
        assert not r.hangs
        assert r.results == hls.coll_expected(c)


def test_a2a_only_allreduce_back_to_back():
    """Eight all-to-all ALLREDUCEs in a row on 2..32 nodes, random arrival orders."""
    rng = random.Random(3)
    cases = []
    for n in (2, 3, 7, 16, 32):
        ops = []
        for e in range(8):
            nbytes = 8 * rng.randint(0, 32)
            ops.append(hls.CollOpCase(K.CollOp.ALLREDUCE, F.I64, R.SUM, 0,
                                      [hls.random_vector(rng, F.I64, nbytes) for _ in range(n)], e, a2a=True))
        cases.append(hls.CollCase(n, 2, rng.getrandbits(31), ops))
    for c, r in zip(cases, hls.run_collective(cases)):
        assert not r.hangs
        assert r.results == hls.coll_expected(c)


def test_a2a_mismatches_give_an_error_on_every_node():
    """Another size, type or episode at one node: MISMATCH on
    every node, no hang."""
    cases = [({4: {"nbytes": 32}}, 64), ({3: {"dtype": int(F.F64)}}, 64), ({2: {"episode": 3}}, 64)]
    for override, nbytes in cases:
        vecs = [bytes(nbytes)] * 6
        if "nbytes" in override.get(4, {}):
            vecs[4] = bytes(32)
            override = {}
        _, r = _one(6, K.CollOp.ALLREDUCE, F.I64, R.SUM, vecs, override=override, a2a=True)
        assert not r.hangs and sorted(r.results) == list(range(6)), override
        for n, [(h, _)] in r.results.items():
            assert h["err"] & K.CollErr.MISMATCH, (override, n, h)


def test_a2a_bad_arguments():
    """AND on floats, 264 bytes, a misaligned size: BAD_ARGS on every node, no hang, the
    next operation works. REDUCE or BCAST with a2a, or more than COLL_A2A_MAX_NODES nodes:
    answered at once with BAD_ARGS and nodata."""
    for dtype, red, nbytes in ((F.F32, R.AND, 16), (F.I32, R.SUM, 264), (F.I64, R.SUM, 12)):
        vecs = [bytes(nbytes)] * 4
        c = hls.CollCase(4, 2, 1, [hls.CollOpCase(K.CollOp.ALLREDUCE, dtype, red, 0, vecs, 1, a2a=True),
                                   hls.CollOpCase(K.CollOp.ALLREDUCE, F.I32, R.SUM, 2, [b"\1\0\0\0"] * 4, 2, a2a=True)])
        r = hls.run_collective([c])[0]
        assert not r.hangs
        for n, (bad, good) in r.results.items():
            assert bad[0]["err"] & K.CollErr.BAD_ARGS, (dtype, red, nbytes, n)
            assert good[0]["err"] == 0 and good[0]["a2a"] and good[1] == (4).to_bytes(4, "little")
    for op in (K.CollOp.REDUCE, K.CollOp.BCAST):
        _, r = _one(3, op, F.I64, R.SUM, [bytes(8)] * 3, a2a=True)
        assert not r.hangs and all(rs[0][0]["err"] == K.CollErr.BAD_ARGS and rs[0][0]["nodata"]
                                   for rs in r.results.values())
    n = K.COLL_A2A_MAX_NODES + 1
    _, r = _one(n, K.CollOp.ALLREDUCE, F.I64, R.SUM, [bytes(8)] * n, a2a=True)
    assert not r.hangs and len(r.results) == n
    assert all(rs[0][0]["err"] == K.CollErr.BAD_ARGS and rs[0][0]["nodata"] for rs in r.results.values())


def test_a2a_fold_schedule(tmp_path):
    """The all-to-all fold's slot schedule (collective.h) by brute force on 1..32 members
    and 1..32 words (tests/hls/a2a_schedule.cpp): no combine reads a partial still in the
    adder's pipeline, the combines are the pairwise tree's; and its cycles for 8 members
    (one word: 19, where the node-order chain took 40)."""
    import subprocess
    exe = tmp_path / "a2a_schedule"
    src = Path(__file__).with_name("a2a_schedule.cpp")
    subprocess.run(["g++", *hls.CXXFLAGS, *hls.include_dirs(), "-I", str(hls.HLS / "collective"), "-o", str(exe),
                    str(src)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "ok", out
    cycles = {(int(n), int(d)): int(c) for n, d, c in (ln.split() for ln in out[1:] if ln)}
    assert cycles[(8, 1)] == 19 and cycles[(8, 8)] == 61 and cycles[(8, 32)] == 229 and cycles[(2, 1)] == 6
