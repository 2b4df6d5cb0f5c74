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
    pat = pattern_table(res)
    if pat:
        out += ["", pat]
    return "\n".join(out)


def pattern_table(res: dict) -> str:
    """Saturation per traffic pattern beside the routing function's channel-load bound."""
    rows = [r for key in ("ring_patterns", "torus_patterns") for r in res.get(key) or []]
    if not rows:
        return ""
    out = [f"{'topology':10s} {'pattern':11s} {'measured (median [min, max], n)':34s} "
           f"{'bound':>6s} {'of bound':>8s}"]
    out.append("-" * len(out[0]))
    for r in rows:
        meas = f"{r['median']:.3f} [{r['min']:.3f}, {r['max']:.3f}], {len(r['samples'])}"
        out.append(f"{r['topo']:10s} {r['pattern']:11s} {meas:34s} {r['bound']:6.3f} "
                   f"{r['median'] / r['bound']:8.0%}")
    out.append("(accepted words/cycle per node at offered load 1.0, "
               f"{res.get('packet_bytes', '?')}-byte packets; bound = min(1, 1 / max channel "
               "load) of the routing function, injection and ejection included)")
    return "\n".join(out)


def plot_patterns(res: dict, path: str) -> None:
    """Bars: measured saturation per pattern (median, min..max as error bar) beside
    the bound, one panel per topology."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in ("ring_patterns", "torus_patterns") if res.get(k)]
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        rows = res[key]
        xs = range(len(rows))
        med = [r["median"] for r in rows]
        err = [[r["median"] - r["min"] for r in rows], [r["max"] - r["median"] for r in rows]]
        ax.bar([x - 0.2 for x in xs], [r["bound"] for r in rows], 0.4, color="lightgray",
               label="bound (channel load)")
        ax.bar([x + 0.2 for x in xs], med, 0.4, yerr=err, capsize=3, label="measured")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["pattern"] for r in rows], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("saturation, words/cycle/node")
        ax.set_title(f"{rows[0]['topo']} ({rows[0]['ties']} ties)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
        if any(res.get(k) for k in ("ring_patterns", "torus_patterns")):
            pp = str(Path(a.plot).with_name(Path(a.plot).stem + "_patterns.png"))
            plot_patterns(res, pp)
            progress(f"plot written to {pp}")
    if a.json:
        print(json.dumps(res))
    else:
        print(table(res))
    return 0
