"""`paranic bench router`: router figures as a table, JSON, and a plot."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from paranic.spec import protocol as P
from paranic.spec.link import link_efficiency

from .seed import seed_figures


def collect(quick: bool = False, progress=None) -> dict:
    from . import router

    res = dict(router.measure(progress=progress or (lambda *a, **k: None), quick=quick))
    res["link_efficiency"] = link_efficiency(P.DEFAULT_MTU)
    res["link_efficiency_mtu_bytes"] = P.DEFAULT_MTU
    res["clock_mhz"] = P.TARGET_CLK_HZ / 1e6
    res["hop_latency_ns"] = res["hop_latency_cycles"] * P.TARGET_CLK_NS
    res["hop_header_mtu_ns"] = res["hop_header_mtu_cycles"] * P.TARGET_CLK_NS
    return res


def table(res: dict) -> str:
    seed = seed_figures()["parastation"]["hardware"]
    link_mbps = P.WORD_BYTES * P.TARGET_CLK_HZ / 1e6
    rows = [
        (f"hop (link input), {P.DEFAULT_MTU} B packet, header in to out", f"{res['hop_header_mtu_cycles']} cycles = "
         f"{res['hop_header_mtu_ns']:.0f} ns", f"{seed['router_delay_ns_per_hop']} ns (cut-through)"),
        ("hop, complete packet to header out", f"{res['hop_latency_cycles']} cycles = "
         f"{res['hop_latency_ns']:.0f} ns", ""),
    ]
    if "link_hop_latency_cycles" in res:
        c = res["link_hop_latency_cycles"]
        rows.append(("hop incl. link layer + PHY", f"{c} cycles = {c * P.TARGET_CLK_NS:.0f} ns", ""))
    rows += [
        ("link capacity", f"{link_mbps:.0f} MB/s", f"{seed['link_MBps']} MB/s"),
        ("ring:8 saturation (per node)", f"{res['ring_saturation']:.3f} of link", ""),
        ("torus:4x4 saturation (per node)", f"{res['torus_saturation']:.3f} of link", ""),
        (f"link efficiency ({res['link_efficiency_mtu_bytes']} B packets)",
         f"{res['link_efficiency']:.3f}", ""),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    out = [f"{'figure':{w0}s}  {'ParaNIC':{w1}s}  ParaStation 1997"]
    out.append("-" * len(out[0]))
    out += [f"{a:{w0}s}  {b:{w1}s}  {c}" for a, b, c in rows]
    out.append(f"(clock {res['clock_mhz']:.0f} MHz; link inputs are cut-through (virtual cut-through, "
               "whole-packet credits), the injection input store-and-forward; saturation: uniform random traffic, "
               f"{res.get('packet_bytes', '?')}-byte packets)")
    return "\n".join(out)


def plot(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (("ring_sweep", "ring:8"), ("torus_sweep", "torus:4x4")):
        pts = res.get(key) or []
        if not pts:
            continue
        off = [p[0] for p in pts]
        acc = [p[1] for p in pts]
        lat = [p[2] for p in pts]
        axes[0].plot(off, acc, "o-", label=label)
        axes[1].plot(acc, lat, "o-", label=label)
    axes[0].plot([0, 1], [0, 1], ":", color="gray", label="accepted = offered")
    axes[0].set_xlabel("offered load per node (fraction of link capacity)")
    axes[0].set_ylabel("accepted throughput per node")
    axes[0].set_title("Uniform random traffic")
    axes[1].set_xlabel("accepted throughput per node")
    axes[1].set_ylabel("mean packet latency (cycles)")
    axes[1].set_title("Latency vs load")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(a: argparse.Namespace) -> int:
    progress = (lambda *x, **k: print(*x, file=sys.stderr, flush=True))
    res = collect(quick=a.quick, progress=progress)
    if a.plot:
        plot(res, a.plot)
        progress(f"plot written to {a.plot}")
    if a.json:
        print(json.dumps(res))
    else:
        print(table(res))
    return 0
