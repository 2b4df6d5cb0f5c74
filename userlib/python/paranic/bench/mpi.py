"""`paranic bench mpi`: MPI over ParaNIC, beside Open MPI's own transports and the seed figures.

Every figure comes from ``mpi_bench`` (userlib/mpi/mpi_bench.c, the OSU micro-benchmarks'
patterns in our own client) run by ``paranic mpirun`` (:mod:`paranic.mpirun`):

* ``latency``: osu_latency, an 8-byte ping-pong between ranks 0 and 1, one way;
* ``bw``: osu_bw, windows of 64 non-blocking 1 MiB sends (fewer on sim), time per
  message and MB/s;
* ``barrier``, ``allreduce`` (8 bytes, one double): back-to-back calls on 2, 4 and 8
  nodes (one rank per node), the slowest rank's time per call.

Rows per (test, nodes, transport). Transports: ``paranic`` (Open MPI's OFI MTL over
libparanic-fi.so), and the peers on the same machine in the same run: ``tcp`` (the TCP
BTL over loopback) and ``sm`` (the shared-memory BTL, vader). A figure is the median of
the samples (each sample ITERS operations), with the fastest and slowest sample
(``*_min_ns``, ``*_max_ns``) and the sample count:

* ``sw_ns``: natively (``paranic`` on the sw backend; the peers always natively);
* ``hw_ns`` (``--backend sim`` or ``both``, the same: sw_ns is measured either way;
  ``paranic`` only): simulated time on the
  Verilator cluster (``mpi_bench -c paranic`` times with pn_now_ns of the rank's node),
  the hardware path: the simulator runs ~1000x slower than real time, so the host's
  software barely shows in it; but simulated time keeps running while a rank waits for a
  core, which only ever adds: the figure is still the median of the samples (their
  means), with the spread; for ``latency`` the best case beside it, ``hw_fastest_ns``:
  the median of each sample's fastest round trip (``hw_mean_ns`` = ``hw_ns``, kept for
  old readers);
* ``total_ns``: hw + sw (bw: max(hw, sw) per message: the host prepares the next while
  the NIC sends); MB/s from it.

Beside them ParaStation's published figures (docs/reference/seed_figures.json through
:func:`paranic.bench.seed.seed_figures`): Table 3's P4 (the MPICH device MPI ran on) and
PVM rows, Table 2's barrier; and BCL's MPI. Its goals are reported, not
asserted: MPI's software latency over the ports layer <= 300 ns natively (the median of
MPI's samples minus the median of 3 or more runs of the ports layer's 8-byte ping-pong,
pn_bench, in the same invocation; the best case, fastest sample minus fastest run,
beside it), the 8-byte one-way hardware path on sim <= 1.2 µs, 1 MiB bandwidth >= 95 %
of the link's payload rate on sim.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Iterable, Sequence

from paranic import mpirun as M
from paranic import runjob
from paranic.spec import protocol as P
from paranic.spec import sim as S
from . import msg, plots
from .msg_cli import link_payload_MBps

TESTS = ("latency", "bw", "barrier", "allreduce")
TRANSPORTS = ("paranic", "tcp", "sm")
LAT_BYTES = 8
BW_BYTES = 1 << 20
NODES = (2, 4, 8)

#: mpi_bench's parameters per (backend, quick): iterations per sample of latency, of the
#: collectives (8 ranks over TCP take ~1 ms a call here), of bw (windows), the bw window, samples. Simulated time runs ~1000x slower.
PARAMS: dict[tuple[str, bool], dict[str, int]] = {
    ("sw", False): {"iters": 2000, "coll_iters": 300, "bw_iters": 4, "window": 64, "samples": 9},
    ("sw", True): {"iters": 200, "coll_iters": 50, "bw_iters": 1, "window": 64, "samples": 3},
    ("sim", False): {"iters": 40, "coll_iters": 40, "bw_iters": 1, "window": 4, "samples": 5},
    ("sim", True): {"iters": 10, "coll_iters": 10, "bw_iters": 1, "window": 2, "samples": 3},
}

#: Goals (reported against, never asserted).
GOAL_ADDED_SW_NS = 300.0
GOAL_HW_LAT_NS = 1200.0
GOAL_BW_FRACTION = 0.95


def _log(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def _stats(samples: Sequence[float]) -> dict:
    return {"ns": round(statistics.median(samples), 1), "min_ns": round(min(samples), 1),
            "max_ns": round(max(samples), 1), "samples": len(samples)}


class Bench:
    """Runs mpi_bench jobs; keeps one simulator per topology (msg.Session)."""

    def __init__(self, sess: msg.Session, quick: bool):
        self.sess, self.quick = sess, quick

    def job(self, backend: str, transport: str, nodes: int, tests: Sequence[str]) -> list[dict]:
        """One mpirun of mpi_bench with ``tests`` on ``nodes`` ranks (one per node); its JSON rows."""
        p = PARAMS[(backend, self.quick)]
        args = [str(M.MPI_BUILD / "mpi_bench"), ",".join(tests), "-b", str(LAT_BYTES), "-B", str(BW_BYTES),
                "-i", str(p["iters"]), "-C", str(p["coll_iters"]), "-I", str(p["bw_iters"]), "-W", str(p["window"]),
                "-r", str(p["samples"]),
                "-c", "paranic" if transport == "paranic" else "wall"]
        sim_socket, topo = None, None
        if backend == "sim":
            topo = msg.barrier_topology(nodes)
            sim = self.sess.sim(topo)
            msg._wait_job_ended(sim)
            sim_socket = str(sim.socket)
        tag = f"{transport} on {backend}" + (f" {topo}" if topo else "") + f", {nodes} ranks"
        _log(f"paranic bench mpi: {','.join(tests)}: {tag}")
        t0 = time.time()
        # The session's simulator runs already (its topology is its own): name it, not a topology.
        r = M.run_mpi(args, nodes, backend=backend, transport=transport, sim_socket=sim_socket,
                      cluster=f"bench-mpi-{os.getpid()}", timeout=3600, stats=transport == "paranic")
        rows = [json.loads(ln) for ln in r.lines('{"bench": "mpi"')]
        if r.rc != 0 or len(rows) != len(tests):
            tail = "\n".join(r.out.splitlines()[-25:])
            raise msg.BenchError(f"mpi_bench {','.join(tests)} ({tag}) failed (exit {r.rc}):\n{tail}")
        traffic = r.traffic() if transport == "paranic" else {}
        if transport == "paranic" and (traffic.get("ranks") != nodes or not traffic.get("nic_sent_msgs")):
            raise msg.BenchError(f"mpi_bench ({tag}): the provider's counters do not show the traffic through "
                                 f"ParaNIC: {traffic}")
        for row in rows:
            row["traffic"] = traffic
            s = _stats(row["samples_ns"])
            _log(f"  [{tag}] {row['test']:9s} {s['ns']:>12.1f} ns median ({s['min_ns']:.1f} .. {s['max_ns']:.1f}, "
                 f"{s['samples']} samples of {row['iters']})")
        _log(f"paranic bench mpi: done in {time.time() - t0:.0f} s")
        return rows

    def ports_sw(self) -> dict | None:
        """The ports layer's 8-byte one-way latency natively (pn_bench --layer ports), for
        the goal: pn_bench's row has one figure per run (the mean over its iterations,
        as each of mpi_bench's samples is), so the layer runs ``samples`` times
        (PARAMS, at least 3) and gives the median, fastest and slowest run
        (:func:`_stats`)."""
        runs = max(3, PARAMS[("sw", self.quick)]["samples"])
        got = []
        for _ in range(runs):
            rows = self.sess.pn_bench("sw", 2, ["--bench", "pingpong", "--layer", "ports", "--min", str(LAT_BYTES),
                                                "--max", str(LAT_BYTES), "--scale", str(self.sess.scale("sw"))],
                                      show=msg._show_msg)
            got += [float(r["latency_ns"]) for r in rows if r["layer"] == "ports" and r["bytes"] == LAT_BYTES]
        return _stats(got) if got else None


def tests_for(nodes: int) -> list[str]:
    return list(TESTS) if nodes == 2 else ["barrier", "allreduce"]


def measure(bench: Bench, backends: Iterable[str], nodes: Iterable[int] = NODES,
            transports: Iterable[str] = TRANSPORTS) -> tuple[list[dict], dict]:
    """Rows ``{test, transport, nodes, bytes, sw_ns, hw_ns, total_ns, MBps, ...}`` and
    notes (the ports layer's latency, skipped transports)."""
    backends, nodes, transports = list(backends), sorted(set(nodes)), list(transports)
    if 2 not in nodes:
        nodes = [2, *nodes]   # latency and bandwidth are 2-rank figures
    notes: dict = {"skipped": {}}
    why = M.provider_missing()
    if why and "paranic" in transports:
        notes["skipped"]["paranic"] = why
        _log(f"paranic bench mpi: paranic skipped: {why}")
        transports = [t for t in transports if t != "paranic"]
    got: dict[tuple[str, int, str, str], dict] = {}
    # Natively always (sw_ns, and the peers have nothing else); on sim the paranic
    # transport again for hw_ns. Every native figure, the ports layer's too, comes
    # before the first simulator starts: native timing wants the cores to itself.
    for be in ["sw"] + (["sim"] if "sim" in backends else []):
        for t in transports:
            if be == "sim" and t != "paranic":
                continue   # no hardware path
            for n in nodes:
                for row in bench.job(be, t, n, tests_for(n)):
                    got[(row["test"], n, t, be)] = row
        if be == "sw" and "paranic" in transports:
            notes["ports_sw"] = bench.ports_sw()
    rows = []
    for test in TESTS:
        for n in nodes:
            if test not in tests_for(n):
                continue
            for t in transports:
                sw, hw = got.get((test, n, t, "sw")), got.get((test, n, t, "sim"))
                if sw is None and hw is None:
                    continue
                rows.append(_row(test, n, t, sw, hw))
    return rows, notes


def _row(test: str, nodes: int, transport: str, sw: dict | None, hw: dict | None) -> dict:
    r: dict = {"test": test, "transport": transport, "nodes": nodes,
               "bytes": 0 if test == "barrier" else BW_BYTES if test == "bw" else LAT_BYTES,
               "window": (sw or hw or {}).get("window", 1)}
    for key, src in (("sw", sw), ("hw", hw)):
        # The figure: the median of the samples (each the mean of its iterations) with
        # their spread. On sim, the latency's best case beside it: the median of each
        # sample's fastest round trip (a rank waiting for a core only ever adds).
        s = _stats(src["samples_ns"]) if src else {"ns": None, "min_ns": None, "max_ns": None, "samples": 0}
        if key == "hw" and src and "fastest_ns" in src:
            r["hw_mean_ns"] = s["ns"]
            r["hw_fastest_ns"] = _stats(src["fastest_ns"])["ns"]
        r[f"{key}_ns"] = s["ns"]
        r[f"{key}_min_ns"] = s["min_ns"]
        r[f"{key}_max_ns"] = s["max_ns"]
        r[f"{key}_samples"] = s["samples"]
        r[f"{key}_iters"] = src["iters"] if src else None
        if key == "sw":
            r["sw_clock"] = src["clock"] if src else None
    if test == "bw":
        parts = [x for x in (r["hw_ns"], r["sw_ns"]) if x is not None]
        r["total_ns"] = max(parts)
        r["MBps"] = round(BW_BYTES * 1e3 / r["total_ns"], 1) if r["total_ns"] else None
        r["hw_MBps"] = round(BW_BYTES * 1e3 / r["hw_ns"], 1) if r["hw_ns"] else None
        r["sw_MBps"] = round(BW_BYTES * 1e3 / r["sw_ns"], 1) if r["sw_ns"] else None
    else:
        r["total_ns"] = round(sum(x for x in (r["hw_ns"], r["sw_ns"]) if x is not None), 1)
        r["MBps"] = None
    tr = (sw or hw or {}).get("traffic", {})
    r["nic_sent_msgs"] = tr.get("nic_sent_msgs")   # the job's, all its tests: proof it went through ParaNIC
    r["shm_sent_msgs"] = tr.get("shm_sent_msgs")
    return r


def references() -> dict:
    """The seed figures beside ours: ParaStation's P4/PVM (Table 3) and barrier (Table 2),
    BCL's MPI (intra-node, inter-node)."""
    from .seed import seed_figures

    f = seed_figures()
    t3 = f["parastation"]["table3_protocol_hierarchy"]
    cols = t3["columns"]
    by = {row[0]: dict(zip(cols, row)) for row in t3["rows"]}
    t2 = f["parastation"]["table2_barrier"]
    bcl = f["bcl_dawning3000"]["mpi_over_bcl"]
    return {
        "parastation_p4": {"latency_us": by["p4"]["alpha_latency_us"], "MBps": by["p4"]["alpha_MBps"],
                           "note": "Table 3, Alpha 21064A (no PC figure)"},
        "parastation_pvm": {"latency_us": by["pvm"]["pc_latency_us"], "MBps": by["pvm"]["pc_MBps"],
                            "note": "Table 3, Pentium PC"},
        "parastation_barrier_us": {int(r[0]): r[1] for r in t2["rows"]},
        "bcl_mpi": {"latency_us": bcl["latency_us"], "MBps": bcl["MBps"], "note": "[intra-node, inter-node]"},
    }


def goals(rows: list[dict], notes: dict) -> list[dict]:
    """The issue's goals against the figures measured (None: not measured in this run)."""
    lat = next((r for r in rows if r["test"] == "latency" and r["transport"] == "paranic"), None)
    bw = next((r for r in rows if r["test"] == "bw" and r["transport"] == "paranic"), None)
    ports = notes.get("ports_sw")
    # median against median (MPI's samples, the ports layer's runs), the best case
    # (fastest sample against fastest run) beside it
    added = best = None
    if lat and lat["sw_ns"] is not None and ports:
        added = round(lat["sw_ns"] - ports["ns"], 1)
        best = round(lat["sw_min_ns"] - ports["min_ns"], 1)
    link = link_payload_MBps()
    frac = round(bw["hw_MBps"] / link, 3) if bw and bw["hw_MBps"] else None
    hw = lat["hw_ns"] if lat else None

    def spread(ns: float | None, lo: float | None, hi: float | None, n: int, what: str) -> str:
        return "-" if ns is None else f"{ns} ns ({lo}..{hi}, {n} {what})"

    mpi_s = spread(*(lat[k] for k in ("sw_ns", "sw_min_ns", "sw_max_ns", "sw_samples")), "samples") if lat else "-"
    ports_s = spread(*(ports[k] for k in ("ns", "min_ns", "max_ns", "samples")), "runs") if ports else "-"
    return [
        # a negative difference means the machine disturbed one of the two runs: no verdict
        {"goal": "MPI software latency over the ports layer, natively", "limit": f"<= {GOAL_ADDED_SW_NS:.0f} ns",
         "value": added, "unit": "ns", "met": None if added is None or added < 0 else added <= GOAL_ADDED_SW_NS,
         "best": best,
         "detail": f"median of MPI {mpi_s} - median of the ports layer {ports_s}; "
                   f"best case (fastest - fastest) {best if best is not None else '-'} ns"},
        {"goal": "8-byte MPI one-way hardware path on sim", "limit": f"<= {GOAL_HW_LAT_NS:.0f} ns",
         "value": hw, "unit": "ns", "met": None if hw is None else hw <= GOAL_HW_LAT_NS,
         "best": lat.get("hw_fastest_ns") if lat else None,
         "detail": "" if hw is None else
                   f"median of the {lat['hw_samples']} samples ({lat['hw_min_ns']}..{lat['hw_max_ns']}); best case: "
                   f"the samples' fastest round trip, median {lat.get('hw_fastest_ns')} ns"},
        {"goal": "1 MiB bandwidth on sim / link payload rate", "limit": f">= {GOAL_BW_FRACTION:.0%}",
         "value": frac, "unit": "", "met": None if frac is None else frac >= GOAL_BW_FRACTION, "best": None,
         "detail": "" if frac is None else f"{bw['hw_MBps']} of {link:.1f} MB/s"},
    ]


# ------------------------------------------------------------------------------------------
# Table, plot
# ------------------------------------------------------------------------------------------

def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e3:.2f}"


def table(rows: list[dict], notes: dict, gls: list[dict]) -> str:
    ref = references()
    head = (f"{'test':9s} {'nodes':>5s} {'transport':9s} {'total us':>9s} {'hw us':>8s} {'(min..max, n)':>20s} "
            f"{'sw us':>8s} {'(min..max, n)':>20s} {'MB/s':>8s}")
    out = [f"MPI over ParaNIC (Open MPI 4.1, OFI MTL + libparanic-fi) and Open MPI's own transports: "
           f"latency one way ({LAT_BYTES} B), bandwidth ({BW_BYTES >> 20} MiB, osu_bw windows), "
           f"barrier, allreduce ({LAT_BYTES} B); medians", head, "-" * len(head)]
    for r in rows:
        def spread(k: str) -> str:
            if r[f"{k}_ns"] is None:
                return ""
            return f"({_us(r[f'{k}_min_ns'])}..{_us(r[f'{k}_max_ns'])}, {r[f'{k}_samples']})"
        out.append(f"{r['test']:9s} {r['nodes']:>5d} {r['transport']:9s} {_us(r['total_ns']):>9s} "
                   f"{_us(r['hw_ns']):>8s} {spread('hw'):>20s} {_us(r['sw_ns']):>8s} {spread('sw'):>20s} "
                   f"{_f(r['MBps']):>8s}")
    for t, why in notes.get("skipped", {}).items():
        out.append(f"{t}: skipped ({why})")
    p4, pvm, bcl = ref["parastation_p4"], ref["parastation_pvm"], ref["bcl_mpi"]
    out.append("")
    out.append("published figures:")
    out.append(f"  ParaStation P4 (MPI's device then): {p4['latency_us']} us, {p4['MBps']} MB/s ({p4['note']})")
    out.append(f"  ParaStation PVM: {pvm['latency_us']} us, {pvm['MBps']} MB/s ({pvm['note']})")
    out.append("  ParaStation barrier (Table 2, hardware-assisted, not MPI): " +
               ", ".join(f"{n} nodes {us} us" for n, us in ref["parastation_barrier_us"].items()))
    out.append(f"  BCL MPI (DAWNING-3000): {bcl['latency_us']} us, {bcl['MBps']} MB/s {bcl['note']}")
    out.append("")
    out.append("goals (reported, not asserted):")
    for g in gls:
        v = "not measured" if g["value"] is None else f"{g['value']}{(' ' + g['unit']) if g['unit'] else ''}"
        met = "" if g["met"] is None else ("  met" if g["met"] else "  NOT met")
        out.append(f"  {g['goal']} {g['limit']}: {v}{met}" + (f"  ({g['detail']})" if g["detail"] else ""))
    out.append("(hw: simulated time on the Verilator cluster, 125 MHz, latency model; figures: medians of the "
               "samples" + "".join(
                   f"; latency's best case (the samples' fastest round trip, median) {_us(r['hw_fastest_ns'])} us"
                   for r in rows if r["test"] == "latency" and r.get("hw_fastest_ns") is not None) +
               "; sw: natively, the paranic transport on the sw backend; total = hw + sw, bw max(hw, sw); "
               "spread: fastest..slowest sample, n samples)")
    return "\n".join(out)


def plot(rows: list[dict], path: str) -> None:
    plt = plots.pyplot()
    if not rows:
        raise ValueError("no rows to plot")
    ref = references()
    # the published figures beside the latency and bandwidth bars: (name, µs, MB/s)
    published = [("PS P4", ref["parastation_p4"]["latency_us"], ref["parastation_p4"]["MBps"]),
                 ("PS PVM", ref["parastation_pvm"]["latency_us"], ref["parastation_pvm"]["MBps"]),
                 ("BCL MPI", ref["bcl_mpi"]["latency_us"][1], ref["bcl_mpi"]["MBps"][1])]
    colors = {"paranic": "tab:green", "tcp": "tab:red", "sm": "tab:purple"}
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.6))
    for ax, test in zip(axes[:2], ("latency", "bw")):
        sel = [r for r in rows if r["test"] == test]
        labels, vals, errs, cols = [], [], [], []
        for r in sel:
            for key, lab in (("hw", "hw (sim)"), ("sw", "native"), ("total", "total")):
                v = r[f"{key}_ns"]
                if v is None or (key == "total" and r["hw_ns"] is None):
                    continue
                lo = r.get(f"{key}_min_ns", v) or v
                hi = r.get(f"{key}_max_ns", v) or v
                if test == "bw":
                    v, lo, hi = BW_BYTES * 1e3 / v, BW_BYTES * 1e3 / hi, BW_BYTES * 1e3 / lo
                else:
                    v, lo, hi = v / 1e3, lo / 1e3, hi / 1e3
                labels.append(f"{r['transport']}\n{lab}")
                vals.append(v)
                errs.append((v - lo, hi - v))
                cols.append(colors[r["transport"]])
        for name, us, mbps in published:
            labels.append(name)
            vals.append(us if test == "latency" else mbps)
            errs.append((0, 0))
            cols.append("gray")
        ax.bar(list(range(len(vals))), vals, color=cols, yerr=list(zip(*errs)), capsize=2)
        plots.log_axis(ax, "µs one way" if test == "latency" else "MB/s",
                       f"{LAT_BYTES} B latency (ping-pong)" if test == "latency"
                       else f"{BW_BYTES >> 20} MiB bandwidth (osu_bw)", ticks=labels, tick_size=6)
    for ax, test in zip(axes[2:], ("barrier", "allreduce")):
        for t in TRANSPORTS:
            sel = sorted((r for r in rows if r["test"] == test and r["transport"] == t), key=lambda r: r["nodes"])
            for key, style, lab in (("hw", "--", "hw (sim)"), ("sw", ":", "native"), ("total", "-", "total")):
                pts = [(r["nodes"], r[f"{key}_ns"] / 1e3) for r in sel if r[f"{key}_ns"] is not None
                       and (key != "total" or r["hw_ns"] is not None)]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=colors[t],
                            label=f"{t} {lab}")
        if test == "barrier":
            b = ref["parastation_barrier_us"]
            ax.plot(list(b), list(b.values()), "-", marker="s", color="gray", label="ParaStation (hw barrier)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("nodes")
        plots.log_axis(ax, "µs per call", f"MPI_{test.capitalize()}", legend_size=6, grid_axis="both")
    plots.save(fig, path, "MPI over ParaNIC (Open MPI OFI MTL + libparanic-fi) vs Open MPI TCP (loopback) and "
               "shared memory; ParaStation/BCL published figures in gray")


# ------------------------------------------------------------------------------------------
# Command line (cli.py: `paranic bench mpi`; --backend, --nodes, --json, --plot, --quick shared)
# ------------------------------------------------------------------------------------------

def run(a: argparse.Namespace) -> int:
    backends = ("sim", "sw") if a.backend == "both" else (a.backend,)
    try:
        nodes = [int(x) for x in str(a.nodes).split(",") if x.strip()]
        for n in nodes:
            msg.barrier_topology(n)
    except ValueError as e:
        print(f"paranic bench mpi: --nodes: {e}", file=sys.stderr)
        return 2
    why = M.missing()
    if why:
        print(f"paranic bench mpi: {why}", file=sys.stderr)
        return 1
    t0 = time.time()
    try:
        M.build(quiet=False)
        with msg.Session(quick=a.quick, model=getattr(a, "model", None)) as sess:
            rows, notes = measure(Bench(sess, a.quick), backends, nodes)
    except (ValueError, msg.BenchError, M.MpiError, runjob.UsageError, TimeoutError) as e:
        print(f"paranic bench mpi: {e}", file=sys.stderr)
        return 1
    gls = goals(rows, notes)
    if a.json:
        print(json.dumps({"bench": "mpi", "rows": rows, "goals": gls, "references": references(), "notes": notes,
                          "config": {"backend": a.backend, "quick": a.quick, "model": getattr(a, "model", None) or S.DEFAULT_MODEL, "nodes": nodes,
                                     "params": {be: PARAMS[(be, a.quick)] for be in ("sw", "sim")},
                                     "link_payload_MBps": round(link_payload_MBps(), 1),
                                     "clock_mhz": P.TARGET_CLK_HZ / 1e6, "seconds": round(time.time() - t0, 1)}}))
    else:
        print(table(rows, notes, gls))
    return plots.write(plot, rows, a.plot, "paranic bench mpi") if a.plot else 0
