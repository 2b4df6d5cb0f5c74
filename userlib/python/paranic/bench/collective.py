"""`paranic bench collective`: allreduce on the NIC's collective unit and in software over
ports, beside the NIC's barrier.

``pn_collbench`` (userlib/tools/pn_collbench.c) runs on every node of a simulated
cluster: ``pn_allreduce`` of 8, 64 and 256 bytes (float64 SUM), back to back, then
``pn_port_barrier`` (the NIC's barrier, pn_barrier), each call timed on node 0 by
``pn_now_ns`` (simulated time: the hardware path plus the simulated PCIe, at 125 MHz)
and by the wall clock. It runs three times per job: with ``PARANIC_COLL=hw`` (the
collective unit: hw/collective.py, its kernel the HLS C++ of hls/collective run by the
simulator), once all-to-all (the library's default up to 32 nodes) and once over the tree
(``PARANIC_COLL_A2A_MAX=0``), and with ``PARANIC_COLL=sw`` (libparanic's software path,
userlib/src/coll.c: the kernel's tree and order over ports messages). Job sizes
(``--coll-nodes``, default all): 2 and 4 nodes on ring:4, 8 on ring:8, 16 on torus:4x4
(the split build: paranic.sim.build.default_split).

A figure is the median of the per-call samples, with the spread (10th .. 90th
percentile, and min .. max in the JSON) and the sample count. Beside them
ParaStation's barrier (Table 2, :func:`paranic.bench.seed.seed_figures`): 1.6, 1.7
and 2.3 µs on 2, 4 and 8 nodes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from paranic.spec import sim as S
from . import msg, plots
from .seed import seed_figures

SIZES = (8, 64, 256)
#: (nodes, simulated topology)
JOBS = ((2, "ring:4"), (4, "ring:4"), (8, "ring:8"), (16, "torus:4x4"))
#: pn_collbench's allreduce runs: (PARANIC_COLL, PARANIC_COLL_A2A_MAX, the path it must
#: report, the row's mode).
PATHS = (("hw", None, "unit", "a2a"), ("hw", "0", "unit", "tree"), ("sw", None, "sw", "sw"))
ITERS, QUICK_ITERS = 100, 20


def stats(samples: list[int]) -> dict:
    """Median, 10th/90th percentile, min, max and count of ns samples."""
    s = sorted(samples)
    if not s:
        return {"median_ns": None, "p10_ns": None, "p90_ns": None, "min_ns": None, "max_ns": None, "n": 0}
    q = statistics.quantiles(s, n=10, method="inclusive") if len(s) > 1 else [s[0]] * 9
    return {"median_ns": statistics.median(s), "p10_ns": q[0], "p90_ns": q[-1], "min_ns": s[0], "max_ns": s[-1],
            "n": len(s)}


def parastation_barrier_us(nodes: int) -> float | None:
    t = seed_figures()["parastation"]["table2_barrier"]
    col = t["columns"].index("parastation_us")
    return next((r[col] for r in t["rows"] if r[0] == nodes), None)


def rows_of(raw: list[dict], topo: str, mode: str | None = None) -> list[dict]:
    """pn_collbench's node-0 lines (every sample) as figure rows; ``path``: "unit" or "sw"
    (allreduce), "nic" (barrier); ``mode``: the allreduce's "a2a", "tree" or "sw"."""
    out = []
    for r in raw:
        path = r.get("path", "sw")
        out.append({"op": r["op"], "nodes": r["nodes"], "topo": topo, "bytes": r["bytes"],
                    "path": path, "mode": mode or ("a2a" if path == "unit" else path),
                    "hw": stats(r["hw_ns"]), "wall": stats(r["wall_ns"])})
    return out


def measure(sess: msg.Session, jobs, iters: int, sizes=SIZES) -> list[dict]:
    rows = []
    for nodes, topo in jobs:
        for coll, a2a_max, path, mode in PATHS:
            env = [f"PARANIC_COLL={coll}"] + ([f"PARANIC_COLL_A2A_MAX={a2a_max}"] if a2a_max is not None else [])
            raw = sess.pn_bench("sim", nodes, [",".join(map(str, sizes)), str(iters)], topo=topo,
                                program="pn_collbench", wrap=("env", *env),
                                show=lambda r: f"{r['op']} ({r.get('path')}) {r['bytes']} B on {r['nodes']} nodes: "
                                               f"median {statistics.median(r['hw_ns']) / 1e3:.2f} µs simulated")
            got = rows_of(raw, topo, mode)
            wrong = [r for r in got if r["op"] == "allreduce" and r["path"] != path]
            if wrong:
                raise msg.BenchError(f"PARANIC_COLL={coll}: the allreduce took the path {wrong[0]['path']!r}")
            # the barrier once per job (the first run's)
            rows += [r for r in got if r["op"] == "allreduce" or mode == PATHS[0][3]]
    return rows


def _us(x) -> str:
    return "-" if x is None else f"{x / 1e3:.2f}"


def _cell(st: dict) -> str:
    return f"{_us(st['median_ns'])} [{_us(st['p10_ns'])}..{_us(st['p90_ns'])}] ({st['n']})"


def table(rows: list[dict]) -> str:
    head = (f"{'nodes':>5} {'topo':<10} {'bytes':>5}  {'unit a2a allreduce µs: median [p10..p90] (n)':<44} "
            f"{'unit tree allreduce µs':<28} {'sw allreduce µs':<28} {'NIC barrier µs':<26} {'ParaStation barrier':>19}")
    lines = [head, "-" * len(head)]
    barrier = {r["nodes"]: r for r in rows if r["op"] == "barrier"}
    by = {(r["nodes"], r["bytes"], r.get("mode", r["path"])): r for r in rows if r["op"] == "allreduce"}
    for nodes, nbytes in sorted({(r["nodes"], r["bytes"]) for r in rows if r["op"] == "allreduce"}):
        a2a, tree, sw = (by.get((nodes, nbytes, m)) for m in ("a2a", "tree", "sw"))
        b = barrier.get(nodes)
        topo = (a2a or tree or sw)["topo"]
        ps = parastation_barrier_us(nodes)
        lines.append(f"{nodes:>5} {topo:<10} {nbytes:>5}  {_cell(a2a['hw']) if a2a else '-':<44} "
                     f"{_cell(tree['hw']) if tree else '-':<28} "
                     f"{_cell(sw['hw']) if sw else '-':<28} {_cell(b['hw']) if b else '-':<26} "
                     f"{(f'{ps} µs' if ps else '-'):>19}")
    lines.append("Simulated time (pn_now_ns) per call on node 0, process to process: unit = the NIC's collective "
                 "unit (its kernel the HLS C++, run by the simulator), all-to-all (a2a, the default up to 32 "
                 "nodes) or over the tree (PARANIC_COLL_A2A_MAX=0), sw = software over ports "
                 "(userlib/src/coll.c), float64 SUM. ParaStation: Table 2 (1997).")
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> None:
    plt = plots.pyplot()
    ar = [r for r in rows if r["op"] == "allreduce"]
    if not ar:
        raise ValueError("no rows to plot")
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for nodes in sorted({r["nodes"] for r in ar}):
        line = None
        for kind, style in (("a2a", "-"), ("tree", "--"), ("sw", ":")):
            rs = sorted((r for r in ar if r["nodes"] == nodes and r.get("mode", r["path"]) == kind),
                        key=lambda r: r["bytes"])
            if not rs:
                continue
            x = [r["bytes"] for r in rs]
            med = [r["hw"]["median_ns"] / 1e3 for r in rs]
            err = [[m - r["hw"]["p10_ns"] / 1e3 for m, r in zip(med, rs)],
                   [r["hw"]["p90_ns"] / 1e3 - m for m, r in zip(med, rs)]]
            line = ax.errorbar(x, med, yerr=err, marker="o", capsize=3, ls=style,
                               color=None if line is None else line[0].get_color(),
                               label=f"{'unit ' if kind != 'sw' else ''}{kind} allreduce, {nodes} nodes")
        b = next((r for r in rows if r["op"] == "barrier" and r["nodes"] == nodes), None)
        if b and line is not None:
            ax.axhline(b["hw"]["median_ns"] / 1e3, ls="-.", color=line[0].get_color(), alpha=0.6,
                       label=f"NIC barrier, {nodes} nodes")
    ps = parastation_barrier_us(8)
    if ps:
        ax.axhline(ps, ls=":", color="gray", label=f"ParaStation barrier, 8 nodes ({ps} µs)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(SIZES)
    ax.set_xticklabels([str(s) for s in SIZES])
    ax.set_xlabel("bytes (float64 SUM)")
    plots.log_axis(ax, "µs per call (simulated)",
                   "allreduce: unit a2a (solid), unit tree (dashed), software (dotted), NIC barrier (dash-dot)",
                   legend_size=7, grid_axis="both")
    plots.save(fig, path, "paranic bench collective")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("collective")
    g.add_argument("--coll-nodes", default=",".join(str(n) for n, _ in JOBS), metavar="N,N,...",
                   help=f"collective: job sizes, of {', '.join(str(n) for n, _ in JOBS)} (default all)")
    g.add_argument("--coll-iters", type=int, default=None,
                   help=f"collective: calls per figure (default {ITERS}, --quick {QUICK_ITERS})")


def run(a: argparse.Namespace) -> int:
    iters = a.coll_iters or (QUICK_ITERS if a.quick else ITERS)
    if iters < 1:
        print("paranic bench collective: --coll-iters must be >= 1", file=sys.stderr)
        return 2
    topo_of = dict(JOBS)
    try:
        want = [int(x) for x in a.coll_nodes.split(",") if x.strip()]
    except ValueError:
        want = []
    if not want or any(n not in topo_of for n in want):
        print(f"paranic bench collective: --coll-nodes {a.coll_nodes!r}: a list of {', '.join(map(str, topo_of))}",
              file=sys.stderr)
        return 2
    jobs = tuple((n, topo_of[n]) for n in sorted(set(want)))
    t0 = time.time()
    try:
        with msg.Session(quick=a.quick, model=getattr(a, "model", None)) as sess:
            rows = measure(sess, jobs, iters)
    except (msg.BenchError, TimeoutError) as e:
        print(f"paranic bench collective: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({"bench": "collective", "rows": rows,
                          "parastation_barrier_us": {n: parastation_barrier_us(n) for n, _ in jobs},
                          "config": {"iters": iters, "sizes": list(SIZES), "jobs": [list(j) for j in jobs],
                                     "model": getattr(a, "model", None) or S.DEFAULT_MODEL,
                                     "seconds": round(time.time() - t0, 1)}}))
    else:
        print(table(rows))
    return plots.write(plot, rows, a.plot, "paranic bench collective") if a.plot else 0
