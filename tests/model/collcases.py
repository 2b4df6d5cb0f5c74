"""The collectives' test cases, shared by the software path's tests (tests/userlib/test_coll.py,
sw backend) and the collective unit's (tests/sim/test_coll_unit_sim.py, the simulated
NIC): cases for ``coll_test cases`` (userlib/tests/coll_test.c), their expected results
from ``paranic.hls.reduce_ref``, and the checks."""

from __future__ import annotations

import random
from pathlib import Path

from paranic.hls import a2a_reduce_ref, random_vector, reduce_ref
from paranic.launch import TESTS
from paranic.spec import kernels as K

COLL_TEST = TESTS / "coll_test"
OP, T, R = K.CollOp, K.CollType, K.CollRed
INTS = (T.I32, T.I64)
SLOT = K.COLL_MAX_BYTES
EINVAL, EBADMSG = -22, -74


def run_cases(run_nodes, tmp: Path, n: int, cases: list[dict], name: str, backend: str = "sw",
              launch=None, timeout: int = 120, env: dict | None = None):
    """cases: {op, dtype, red, root, vectors (one per node), flags (per node, optional),
    override (per node: field -> value)}. Returns (rcs[node][i], outs[node][i])."""
    for node in range(n):
        lines, data = [], b""
        for c in cases:
            o = dict(op=int(c["op"]), dtype=int(c["dtype"]), red=int(c["red"]), root=c["root"],
                     nbytes=len(c["vectors"][node]), flags=c.get("flags", {}).get(node, 0))
            o.update(c.get("override", {}).get(node, {}))
            lines.append("{op} {dtype} {red} {root} {nbytes} {flags}".format(**o))
            data += c["vectors"][node][:o["nbytes"]].ljust(o["nbytes"] if o["nbytes"] <= 512 else 0, b"\0")
        (tmp / f"cases.{node}.txt").write_text("\n".join(lines) + "\n")
        (tmp / f"in.{node}.bin").write_bytes(data)
    prog = [str(COLL_TEST), "cases", backend, str(tmp)]
    r = (launch or run_nodes)(prog, n, name, timeout=timeout, **({"env": env} if env else {}))
    assert r.rc == 0 and not r.fails(), r.out
    rcs = [[int(x) for x in (tmp / f"rc.{node}.txt").read_text().split()] for node in range(n)]
    raw = [(tmp / f"out.{node}.bin").read_bytes() for node in range(n)]
    outs = [[raw[node][i * SLOT:(i + 1) * SLOT] for i in range(len(cases))] for node in range(n)]
    return rcs, outs


def reds_for(op, dtype):
    if op == OP.BCAST:
        return [R.SUM]
    return [r for r in R if dtype in INTS or r < R.AND]


def sweep(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for op in OP:
        for dtype in T:
            for red in reds_for(op, dtype):
                for nbytes in (0, K.COLL_TYPE_BYTES[dtype], 8, SLOT):
                    root = 0 if op == OP.ALLREDUCE else rng.randrange(n)
                    cases.append(dict(op=op, dtype=dtype, red=red, root=root,
                                      vectors=[random_vector(rng, dtype, nbytes) for _ in range(n)]))
    return cases


def expected(c: dict, n: int, a2a: bool = False) -> bytes:
    """The result; ``a2a``: the unit's ALLREDUCEs go all-to-all (the pairwise tree over member index)."""
    if c["op"] == OP.BCAST:
        return c["vectors"][c["root"]]
    if a2a and c["op"] == OP.ALLREDUCE:
        return a2a_reduce_ref(c["vectors"], c["dtype"], c["red"])
    return reduce_ref(c["vectors"], c["root"], c["dtype"], c["red"], K.COLL_DEFAULT_RADIX_LOG2)


def check_results(cases, rcs, outs, n, a2a: bool = False):
    for i, c in enumerate(cases):
        want = expected(c, n, a2a)
        nb = len(want)
        for node in range(n):
            assert rcs[node][i] == 0, (i, node, c["op"], rcs[node][i])
            gets = c["op"] != OP.REDUCE or node == c["root"]
            got = outs[node][i]
            if gets:
                assert got[:nb] == want, (i, node, c["op"], c["dtype"], c["red"], c["root"])
            assert got[nb if gets else 0:] == b"\xa5" * (SLOT - (nb if gets else 0)), (i, node)


def bad_cases(n: int, rng: random.Random) -> tuple[dict, list[tuple[dict, int]]]:
    """(a good operation, [(an operation that must fail, the errno every node gets)]):
    nodes disagreeing on size, type, operator, root or op (-EBADMSG), and bad arguments
    on one node or all: a size not a multiple, > 256 bytes, AND on floats, a bad root, a
    NULL buffer, an unknown type (-EINVAL)."""

    def vecs(dtype=T.I32, nbytes=16):
        return [random_vector(rng, dtype, nbytes) for _ in range(n)]

    good = dict(op=OP.ALLREDUCE, dtype=T.I64, red=R.SUM, root=0, vectors=vecs(T.I64, 64))
    bad = [
        (dict(op=OP.ALLREDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=vecs(), override={2: dict(nbytes=8)}), EBADMSG),
        (dict(op=OP.ALLREDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=vecs(), override={3: dict(dtype=int(T.F32))}),
         EBADMSG),
        (dict(op=OP.ALLREDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=vecs(), override={1: dict(red=int(R.MAX))}),
         EBADMSG),
        (dict(op=OP.REDUCE, dtype=T.I32, red=R.SUM, root=2, vectors=vecs(), override={0: dict(root=1)}), EBADMSG),
        (dict(op=OP.BCAST, dtype=T.I32, red=R.SUM, root=3, vectors=vecs(), override={1: dict(root=0)}), EBADMSG),
        (dict(op=OP.REDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=vecs(), override={3: dict(op=int(OP.ALLREDUCE))}),
         EBADMSG),
        (dict(op=OP.BCAST, dtype=T.I32, red=R.SUM, root=1, vectors=vecs(), override={2: dict(op=int(OP.REDUCE))}),
         EBADMSG),
        (dict(op=OP.ALLREDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=vecs(), override={1: dict(nbytes=6)}), EINVAL),
        (dict(op=OP.ALLREDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=vecs(nbytes=264)), EINVAL),
        (dict(op=OP.ALLREDUCE, dtype=T.F64, red=R.AND, root=0, vectors=vecs(T.F64)), EINVAL),
        (dict(op=OP.REDUCE, dtype=T.I32, red=R.OR, root=n, vectors=vecs()), EINVAL),
        (dict(op=OP.BCAST, dtype=T.I32, red=R.SUM, root=2, vectors=vecs(), override={0: dict(root=9)}), EINVAL),
        (dict(op=OP.ALLREDUCE, dtype=T.I32, red=R.SUM, root=0, vectors=vecs(), flags={2: 1}), EINVAL),
        (dict(op=OP.ALLREDUCE, dtype=9, red=R.SUM, root=0, vectors=vecs(nbytes=8)), EINVAL),
    ]
    return good, bad


def bad_sequence(good: dict, bad: list[tuple[dict, int]]) -> list[dict]:
    """Each failing operation followed by the good one (which must then work)."""
    cases = []
    for c, _ in bad:
        cases += [c, good]
    return cases


def check_bad(good: dict, bad: list[tuple[dict, int]], rcs, outs, n: int, a2a: bool = False) -> None:
    """Every node got the errno of each failing operation, its buffer untouched, and the
    good operation after it worked."""
    want = expected(good, n, a2a)
    for i, (c, err) in enumerate(bad):
        for node in range(n):
            assert rcs[node][2 * i] == err, (i, node, rcs[node][2 * i])
            eff_op = c.get("override", {}).get(node, {}).get("op", c["op"])
            own = c["vectors"][node] if eff_op == OP.BCAST and not c.get("flags") else b""   # bcast: in place
            own = own[:c.get("override", {}).get(node, {}).get("nbytes", len(own))]
            assert outs[node][2 * i] == own + b"\xa5" * (SLOT - len(own)), (i, node)     # untouched on error
            assert rcs[node][2 * i + 1] == 0 and outs[node][2 * i + 1][:len(want)] == want, (i, node)


def nan_cases(n: int) -> list[dict]:
    """Float sums whose result is a NaN: NaNs with payloads of either sign, and inf - inf.
    Every path must give the canonical NaN (COLL_F32_QNAN / COLL_F64_QNAN), on every node."""
    import struct
    out = []
    for dtype, fmt, nan_a, nan_b in ((T.F32, "<I", 0x7FC00123, 0xFFC00456), (T.F64, "<Q", 0x7FF8000000000123,
                                                                          0xFFF8000000000456)):
        vecs = []
        for node in range(n):
            w = [0] * 4
            w[0] = nan_a if node == 0 else 0
            w[1] = nan_b if node == n - 1 else 0
            inf = 0x7F800000 if dtype == T.F32 else 0x7FF0000000000000
            sign = 0x80000000 if dtype == T.F32 else 0x8000000000000000
            w[2] = inf if node == 0 else (inf | sign if node == 1 else 0)
            vecs.append(b"".join(struct.pack(fmt, x) for x in w))
        out.append(dict(op=OP.ALLREDUCE, dtype=dtype, red=R.SUM, root=0, vectors=vecs))
    return out
