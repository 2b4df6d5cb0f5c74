"""The collectives' software path (pn_coll.h, ``PARANIC_COLL=sw``) on the simulated ring:4:
allreduce of 8 and 256 bytes (float sums, order-dependent) equal to
``paranic.hls.reduce_ref`` and bit-identical on every node; pn_collbench on both paths.
The collective unit's own tests: test_coll_unit_sim.py."""

from __future__ import annotations

import random

from simtest import TESTS, launch

from paranic.hls import random_vector, reduce_ref
from paranic.spec import kernels as K

SLOT = K.COLL_MAX_BYTES


def test_allreduce_sim(sim4, tmp_path):
    n, rng = 4, random.Random(11)
    cases = [dict(op=K.CollOp.ALLREDUCE, dtype=dt, red=K.CollRed.SUM, root=0,
                  vectors=[random_vector(rng, dt, nb) for _ in range(n)])
             for nb in (8, SLOT) for dt in (K.CollType.F64, K.CollType.F32)]
    for node in range(n):
        (tmp_path / f"cases.{node}.txt").write_text(
            "".join(f"{int(c['op'])} {int(c['dtype'])} {int(c['red'])} 0 {len(c['vectors'][node])} 0\n" for c in cases))
        (tmp_path / f"in.{node}.bin").write_bytes(b"".join(c["vectors"][node] for c in cases))
    r = launch(sim4, [str(TESTS / "coll_test"), "cases", "sim", str(tmp_path)], n, "coll-sim", timeout=300,
               env={"PARANIC_COLL": "sw"})
    assert r.rc == 0 and not r.fails(), r.out
    rcs = [[int(x) for x in (tmp_path / f"rc.{node}.txt").read_text().split()] for node in range(n)]
    raw = [(tmp_path / f"out.{node}.bin").read_bytes() for node in range(n)]
    outs = [[raw[node][i * SLOT:(i + 1) * SLOT] for i in range(len(cases))] for node in range(n)]
    for i, c in enumerate(cases):
        want = reduce_ref(c["vectors"], 0, c["dtype"], c["red"], K.COLL_DEFAULT_RADIX_LOG2)
        for node in range(n):
            assert rcs[node][i] == 0, (i, node, rcs[node][i])
            assert outs[node][i] == want + b"\xa5" * (SLOT - len(want)), (i, node)   # the same bits everywhere


def test_collbench_sim(sim4):
    """pn_collbench (`paranic bench collective`) on 2 nodes of the simulator, on the unit
    (the default on sim: all-to-all; and over the tree, PARANIC_COLL_A2A_MAX=0) and in
    software: every call timed (simulated and wall), the rows as the bench reads them,
    each run on the path it asked for."""
    import json

    from paranic.bench.collective import rows_of, table
    from paranic.launch import tool
    rows = []
    for mode, env in (("a2a", {"PARANIC_COLL": "auto"}), ("tree", {"PARANIC_COLL": "auto", "PARANIC_COLL_A2A_MAX": "0"}),
                      ("sw", {"PARANIC_COLL": "sw"})):
        r = launch(sim4, [str(tool("pn_collbench")), "8,256", "3"], 2, f"coll-bench-{mode}", timeout=300, env=env)
        assert r.rc == 0 and not r.fails(), r.out
        raw = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
        path = "sw" if mode == "sw" else "unit"
        assert [(d["op"], d["path"], d["bytes"]) for d in raw] == \
            [("allreduce", path, 8), ("allreduce", path, 256), ("barrier", "nic", 0)], r.out
        assert all(len(d["hw_ns"]) == 3 and min(d["hw_ns"]) > 0 for d in raw), raw
        rows += rows_of(raw, "ring:4", mode)
    assert "2 ring:4 8 " in " ".join(table(rows).split()), table(rows)
    by = {(r["mode"], r["bytes"]): r["hw"]["median_ns"] for r in rows if r["op"] == "allreduce"}
    # the unit combines in the network: one PIO command and one result packet per call,
    # where the software path sends ports messages up and down the tree
    assert by[("a2a", 8)] < by[("sw", 8)] and by[("a2a", 256)] < by[("sw", 256)], by
    assert by[("tree", 8)] < by[("sw", 8)] and by[("tree", 256)] < by[("sw", 256)], by
    # all-to-all crosses the network once, the tree twice (up to the root, down again):
    # this shows the mode really changed (on 2 nodes both give the same bits)
    assert by[("a2a", 8)] < by[("tree", 8)], by
