"""`paranic bench collective`: allreduce in software over ports, beside the NIC's barrier.

``pn_collbench`` (userlib/tools/pn_collbench.c) runs on every node of a simulated
cluster: ``pn_allreduce`` of 8, 64 and 256 bytes (float64 SUM), back to back, then
``pn_port_barrier`` (the NIC's barrier, pn_barrier), each call timed on node 0 by
``pn_now_ns`` (simulated time: the hardware path plus the simulated PCIe, at 125 MHz)
and by the wall clock. Job sizes: 2 and 4 nodes on ring:4, 8 on ring:8; 16 on torus:4x4
only with ``--coll16`` (slow). The allreduce is libparanic's software path
(userlib/src/coll.c: the kernel's tree and order, over ports messages); the in-network
collective unit (hls/collective) is not in NicCore yet, so its column says so.

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
JOBS = ((2, "ring:4"), (4, "ring:4"), (8, "ring:8"))
JOB16 = (16, "torus:4x4")
HW_ALLREDUCE = "not built yet (the collective unit is not in NicCore)"
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


def rows_of(raw: list[dict], topo: str) -> list[dict]:
    """pn_collbench's node-0 lines (every sample) as figure rows."""
    out = []
    for r in raw:
        out.append({"op": r["op"], "nodes": r["nodes"], "topo": topo, "bytes": r["bytes"],
                    "path": "sw over ports" if r["op"] == "allreduce" else "NIC barrier (pn_barrier)",
                    "hw": stats(r["hw_ns"]), "wall": stats(r["wall_ns"])})
    return out


def measure(sess: msg.Session, jobs, iters: int, sizes=SIZES) -> list[dict]:
    rows = []
    for nodes, topo in jobs:
        raw = sess.pn_bench("sim", nodes, [",".join(map(str, sizes)), str(iters)], topo=topo,
                            program="pn_collbench",
                            show=lambda r: f"{r['op']} {r['bytes']} B on {r['nodes']} nodes: "
                                           f"median {statistics.median(r['hw_ns']) / 1e3:.2f} µs simulated")
        rows += rows_of(raw, topo)
    return rows


def _us(x) -> str:
    return "-" if x is None else f"{x / 1e3:.2f}"


def table(rows: list[dict]) -> str:
    head = (f"{'nodes':>5} {'topo':<10} {'bytes':>5}  {'sw allreduce hw_ns µs: median [p10..p90] (n)':<44} "
            f"{'wall ms: median':>15}  {'NIC barrier µs (n)':<24} {'ParaStation barrier':>19}  hw allreduce")
    lines = [head, "-" * len(head)]
    barrier = {r["nodes"]: r for r in rows if r["op"] == "barrier"}
    for r in rows:
        if r["op"] != "allreduce":
            continue
        h, w, b = r["hw"], r["wall"], barrier.get(r["nodes"])
        ps = parastation_barrier_us(r["nodes"])
        bar = f"{_us(b['hw']['median_ns'])} [{_us(b['hw']['p10_ns'])}..{_us(b['hw']['p90_ns'])}] ({b['hw']['n']})" \
            if b else "-"
        lines.append(f"{r['nodes']:>5} {r['topo']:<10} {r['bytes']:>5}  "
                     f"{_us(h['median_ns']) + ' [' + _us(h['p10_ns']) + '..' + _us(h['p90_ns']) + '] (' + str(h['n']) + ')':<44} "
                     f"{w['median_ns'] / 1e6:>15.2f}  {bar:<24} {(f'{ps} µs' if ps else '-'):>19}  {HW_ALLREDUCE}")
    lines.append("hw_ns: simulated time (pn_now_ns) per call on node 0, the software allreduce over ports "
                 "(userlib/src/coll.c) on the Verilator cluster; wall: the host's clock (the simulator runs "
                 "~1000x slower than real time). ParaStation: Table 2 (1997).")
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> None:
    plt = plots.pyplot()
    ar = [r for r in rows if r["op"] == "allreduce"]
    if not ar:
        raise ValueError("no rows to plot")
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for nodes in sorted({r["nodes"] for r in ar}):
        rs = [r for r in ar if r["nodes"] == nodes]
        x = [r["bytes"] for r in rs]
        med = [r["hw"]["median_ns"] / 1e3 for r in rs]
        err = [[m - r["hw"]["p10_ns"] / 1e3 for m, r in zip(med, rs)], [r["hw"]["p90_ns"] / 1e3 - m for m, r in zip(med, rs)]]
        line = ax.errorbar(x, med, yerr=err, marker="o", capsize=3, label=f"sw allreduce, {nodes} nodes")
        b = next((r for r in rows if r["op"] == "barrier" and r["nodes"] == nodes), None)
        if b:
            ax.axhline(b["hw"]["median_ns"] / 1e3, ls="--", color=line[0].get_color(), alpha=0.6,
                       label=f"NIC barrier, {nodes} nodes")
    ps = parastation_barrier_us(8)
    if ps:
        ax.axhline(ps, ls=":", color="gray", label=f"ParaStation barrier, 8 nodes ({ps} µs)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(SIZES)
    ax.set_xticklabels([str(s) for s in SIZES])
    ax.set_xlabel("bytes (float64 SUM)")
    plots.log_axis(ax, "µs per call (simulated)", "allreduce in software over ports vs the NIC barrier",
                   legend_size=7, grid_axis="both")
    plots.save(fig, path, f"paranic bench collective; hardware allreduce: {HW_ALLREDUCE}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("collective")
    g.add_argument("--coll16", action="store_true", help="collective: also 16 nodes on torus:4x4 (slow)")
    g.add_argument("--coll-iters", type=int, default=None,
                   help=f"collective: calls per figure (default {ITERS}, --quick {QUICK_ITERS})")


def run(a: argparse.Namespace) -> int:
    iters = a.coll_iters or (QUICK_ITERS if a.quick else ITERS)
    if iters < 1:
        print("paranic bench collective: --coll-iters must be >= 1", file=sys.stderr)
        return 2
    jobs = JOBS + ((JOB16,) if a.coll16 else ())
    t0 = time.time()
    try:
        with msg.Session(quick=a.quick, model=getattr(a, "model", None)) as sess:
            rows = measure(sess, jobs, iters)
    except (msg.BenchError, TimeoutError) as e:
        print(f"paranic bench collective: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({"bench": "collective", "rows": rows, "hw_allreduce": HW_ALLREDUCE,
                          "parastation_barrier_us": {n: parastation_barrier_us(n) for n, _ in jobs},
                          "config": {"iters": iters, "sizes": list(SIZES), "jobs": [list(j) for j in jobs],
                                     "model": getattr(a, "model", None) or S.DEFAULT_MODEL,
                                     "seconds": round(time.time() - t0, 1)}}))
    else:
        print(table(rows))
    return plots.write(plot, rows, a.plot, "paranic bench collective") if a.plot else 0
