"""`paranic bench faults`: what the firmware costs and buys, on clusters of whole SoCs.

In simulated time at the target clock (the Verilator cluster of SoCs, docs/simulator.md):

* **bring-up**: reset to every node ROUTED with one fingerprint (the simulator's
  ``bringup_cycles``), ring:4 and torus:2x2, each run with another order of device DNAs;
* **cable pull**: a one-way rawdata stream (pn_faultstream, 4 KiB messages of four MTU
  packets, so a reroute splits messages) from node 0 to
  node 1 over cable 0 of a 2x2 torus; the cable is cut while it runs; the figure is the
  longest gap between two arrivals at node 1 (the traffic stops at the cut and flows again
  once the firmware has rerouted and replayed what the link held); also the packets
  replayed, duplicates (must be 0), messages that arrived after a later one (must be 0);
* **goodput at a bit-error rate**: the same stream over cable 0 of ring:4
  with that cable at BER 0, 1e-5, 1e-4, 1e-3 (the others clean); payload MB/s from the first
  to the last arrival, and whether the link was taken out.

Each figure is a median with its range over the runs (``--runs``); the table says n.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from typing import Any

from paranic import launch as L
from paranic.spec import protocol as P

NS_PER_CYCLE = 1e9 / P.TARGET_CLK_HZ
BERS = (0.0, 1e-5, 1e-4, 1e-3)
#: Message size of the streams: four MTU packets, so that a reroute splits messages.
MSG_BYTES = 4 * P.DEFAULT_MTU


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _stream(sim, name: str, src: int, dst: int, nbytes: int, count: int, timeout: int = 900) -> dict:
    run = L.launch([str(L.tool("pn_faultstream")), "--backend", "sim", "--src", str(src), "--dst", str(dst),
                    "--bytes", str(nbytes), "--count", str(count)], sim.info["nodes"],
                   L.cluster_name(name), backend="sim", timeout=timeout, env=sim.env(L.clean_env()))
    lines = [ln for ln in run.nodes.get(dst, []) if ln.startswith("{")]
    if run.rc != 0 or not lines:
        raise RuntimeError(f"pn_faultstream failed (rc {run.rc}):\n{run.out[-2000:]}")
    return json.loads(lines[-1])


def _status(sim) -> list[dict]:
    import subprocess

    r = subprocess.run(["paranic", "cluster", "status", "--backend", "sim", "--json"],
                       env=sim.env(L.clean_env()), capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return sorted(json.loads(r.stdout)["nodes"], key=lambda n: n["index"])


def _summary(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def bringup(topo: str, runs: int, rng: random.Random) -> dict:
    from paranic.sim import run as simrun
    from paranic.spec.topo import Topology

    n = Topology.parse(topo).nodes
    us = []
    for k in range(runs):
        order = list(range(n))
        rng.shuffle(order)
        dnas = {i: 0x5E11_0000_0000_0100 + 0x10 * order[i] for i in range(n)}
        with simrun.start(topo, soc=True, dnas=dnas, timeout=900) as sim:
            us.append(sim.bringup_cycles * NS_PER_CYCLE / 1e3)
        _log(f"paranic bench faults: {topo} bring-up {k + 1}/{runs}: {us[-1]:.1f} us")
    return {"what": "bring-up", "topology": topo, "unit": "us", **_summary(us)}


def cable_pull(runs: int, count: int) -> dict:
    from paranic.sim import run as simrun

    gaps, replayed, ooo, dups = [], [], [], []
    for k in range(runs):
        with simrun.start("torus:2x2", soc=True, timeout=900) as sim:
            a, b = sim.node_ids[0], sim.node_ids[1]       # the two ends of cable 0
            delay = 0.6 + 0.2 * k
            done: dict = {}

            def cut() -> None:
                time.sleep(delay)
                with sim.control() as c:
                    done["at"] = c.cut(0)["at_cycle"]

            th = threading.Thread(target=cut, daemon=True)
            th.start()
            res = _stream(sim, f"bench-cut-{k}", a, b, MSG_BYTES, count)
            th.join(timeout=60)
            if "at" not in done or not res["first_cycle"] < done["at"] < res["last_cycle"]:
                _log(f"paranic bench faults: run {k + 1}: the cut missed the stream; not counted")
                continue
            st = _status(sim)
            gaps.append(res["max_gap_cycles"] * NS_PER_CYCLE / 1e3)
            replayed.append(sum(n["evacuated"] for n in st))
            ooo.append(res["out_of_order"])
            dups.append(res["duplicates"] + res["corrupt"] + res["sent"] - res["received"])
        _log(f"paranic bench faults: cable pull {k + 1}/{runs}: traffic stopped {gaps[-1] if gaps else '-'} us")
    if not gaps:
        raise RuntimeError("no run cut the cable while the stream ran")
    return {"what": "cable pull to traffic flowing", "topology": "torus:2x2", "unit": "us", **_summary(gaps),
            "replayed": replayed, "out_of_order": ooo, "lost_or_duplicated": dups}


def goodput(bers: tuple[float, ...], runs: int, count: int) -> list[dict]:
    from paranic.sim import run as simrun

    rows = []
    for ber in bers:
        mbps, downs = [], []
        for k in range(runs):
            with simrun.start("ring:4", soc=True, ber_cable=[f"0={ber!r}"], timeout=900) as sim:
                a, b = sim.node_ids[0], sim.node_ids[1]
                res = _stream(sim, f"bench-ber-{k}", a, b, MSG_BYTES, count)
                st = _status(sim)
                mbps.append(res["MBps"])
                downs.append(st[0]["link_downs"] + st[1]["link_downs"])
                if res["received"] != res["sent"] or res["duplicates"] or res["corrupt"]:
                    raise RuntimeError(f"BER {ber}: {res}")
        rows.append({"what": "goodput", "ber": ber, "unit": "MB/s", **_summary(mbps), "link_downs": downs})
        _log(f"paranic bench faults: BER {ber:g}: {rows[-1]['median']:.0f} MB/s, link downs {downs}")
    return rows


def table(rows: list[dict]) -> str:
    out = ["firmware and link faults, simulated time at 125 MHz (median [min..max], n runs):"]
    for r in rows:
        if r["what"] == "bring-up":
            out.append(f"  bring-up, reset to routed, {r['topology']:9s} {r['median']:8.1f} us "
                       f"[{r['min']:.1f}..{r['max']:.1f}] n={r['n']}")
    for r in rows:
        if r["what"].startswith("cable pull"):
            out.append(f"  cable pull to traffic flowing, {r['topology']} {r['median']:8.1f} us "
                       f"[{r['min']:.1f}..{r['max']:.1f}] n={r['n']}; packets replayed by another path "
                       f"{r['replayed']}, arrived after a later one {r['out_of_order']}, lost or "
                       f"duplicated {r['lost_or_duplicated']}")
    g = [r for r in rows if r["what"] == "goodput"]
    if g:
        out.append(f"  goodput of a {MSG_BYTES // 1024} KiB-message stream over one cable of ring:4 at a bit-error rate:")
        out.append(f"  {'BER':>8s} {'MB/s':>9s} {'range':>17s} {'n':>3s}  link taken out (downs per run)")
        for r in g:
            out.append(f"  {r['ber']:>8g} {r['median']:>9.1f} {r['min']:>8.1f}..{r['max']:<8.1f} {r['n']:>3d}  "
                       f"{r['link_downs']}")
    return "\n".join(out)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = [r for r in rows if r["what"] == "goodput"]
    if not g:
        raise ValueError("no goodput rows to plot")
    fig, ax = plt.subplots(figsize=(6.5, 4))
    labels = ["0" if r["ber"] == 0 else f"{r['ber']:g}" for r in g]
    med = [r["median"] for r in g]
    err = [[r["median"] - r["min"] for r in g], [r["max"] - r["median"] for r in g]]
    ax.bar(labels, med, yerr=err, capsize=4, color=["#4c72b0" if not any(r["link_downs"]) else "#dd8452"
                                                    for r in g])
    for i, r in enumerate(g):
        if any(r["link_downs"]):
            ax.annotate("link taken out,\nrouted around", (i, med[i]), ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("bit-error rate of the cable")
    ax.set_ylabel("goodput, MB/s (simulated time)")
    ax.set_title(f"{MSG_BYTES // 1024} KiB-message rawdata stream over one cable of a ring:4 of SoCs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from paranic.cliopts import int_in
    p.add_argument("--runs", type=int_in(1, 1000), default=None, help="runs per figure (default 3, --quick 1)")


def run(a: argparse.Namespace) -> int:
    runs = a.runs or (1 if a.quick else 3)
    if runs < 1:
        print("paranic bench faults: --runs must be at least 1", file=sys.stderr)
        return 2
    rng = random.Random(12)
    t0 = time.time()
    try:
        rows = [bringup("ring:4", runs, rng), bringup("torus:2x2", runs, rng),
                cable_pull(runs, 150 if a.quick else 500),
                *goodput(BERS, runs, 75 if a.quick else 250)]
    except (RuntimeError, TimeoutError, ValueError) as e:
        print(f"paranic bench faults: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({"bench": "faults", "rows": rows,
                          "config": {"runs": runs, "quick": a.quick, "seconds": round(time.time() - t0, 1)}}))
    else:
        print(table(rows))
    if a.plot:
        try:
            plot(rows, a.plot)
            _log(f"paranic bench faults: plot written to {a.plot}")
        except ValueError as e:
            print(f"paranic bench faults: no plot: {e}", file=sys.stderr)
    return 0
