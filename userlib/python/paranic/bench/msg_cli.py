"""`paranic bench pairwise|pingpong|stream|overhead|barrier|messages`: tables beside
ParaStation's 1997 figures, ``--json`` (``{"rows": [...], ...}``) and ``--plot``.

Measurement: :mod:`paranic.bench.msg` (hw_ns on the simulator, sw_ns natively)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Iterable

from paranic.spec import protocol as P
from paranic.spec import sim as S
from . import msg

TITLES = {
    "pairwise": "pairwise exchange (ParaStation's Algorithm 1: both send, then both receive), time per iteration",
    "pingpong": "ping-pong, one-way latency (half the round trip)",
    "stream": "stream, one-way: back-to-back messages, time per message",
    "overhead": "software overhead: send to itself and receive, natively (sw backend), no peer",
}
#: The issue's targets, shown (never asserted by tests: these are benchmarks).
TARGET_ONE_WAY_NS = 1000.0        # 8 bytes, one hop, hardware path with PCIe model
TARGET_STREAM_FRACTION = 0.90     # of the link's payload bandwidth, messages >= 4 KiB
TARGET_BARRIER_NS = 1000.0        # 8 nodes
TARGET_RAWDATA_SW_NS = 200.0      # rawdata send + receive, natively


def link_payload_MBps() -> float:
    """The link's payload bandwidth for MTU-sized packets (words/cycle x efficiency)."""
    from paranic.spec.link import link_efficiency
    return P.WORD_BYTES * P.TARGET_CLK_HZ / 1e6 * link_efficiency(P.DEFAULT_MTU)


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def message_table(rows: list[dict], bench: str, layer: str) -> str:
    sel = [r for r in rows if r["bench"] == bench and r["layer"] == layer]
    if not sel:
        return ""
    ps = msg.parastation_table1() if bench == "pairwise" else {}
    head = f"{'bytes':>8s} {'hw_ns':>11s} {'sw_ns':>10s} {'total_ns':>11s} {'MB/s':>9s}"
    if bench == "pairwise":
        head += "   ParaStation P120: us   MB/s"
    topo = next((r["topology"] for r in sel if r.get("topology")), None)
    out = [f"{bench} — {layer}" + (f" — {topo}, nodes 0 and 1" if topo else "") + ":",
           f"  {TITLES[bench]}", head, "-" * len(head)]
    for r in sel:
        line = (f"{r['bytes']:>8d} {_f(r['hw_ns']):>11s} {_f(r['sw_ns']):>10s} {_f(r['total_ns']):>11s} "
                f"{r['MBps']:>9.2f}")
        if r["bytes"] in ps:
            us, mb = ps[r["bytes"]]
            line += f"   {us:>18.2f} {mb:>7.3f}"
        line += _spread_cell(r.get("hw_spread"))
        out.append(line)
    if any(r.get("hw_spread") for r in sel):
        out.append("(hw_ns: the median iteration; [p10..p90, fastest, n iterations] of the hardware path)")
    return "\n".join(out)


def _spread_cell(sp: dict | None) -> str:
    """``  [p10..p90, best B, n=N]`` beside a median, or nothing."""
    if not sp:
        return ""
    return f"  [{sp['p10']:.1f}..{sp['p90']:.1f}, best {sp['min']:.1f}, n={sp['samples']}]"


def overhead_table(rows: list[dict]) -> str:
    sel = [r for r in rows if r["bench"] == "overhead"]
    if not sel:
        return ""
    head = f"{'layer':8s} {'bytes':>6s} {'sw_ns':>8s}"
    out = [TITLES["overhead"] + ":", head, "-" * len(head)]
    out += [f"{r['layer']:8s} {r['bytes']:>6d} {r['sw_ns']:>8.1f}" for r in sel]
    return "\n".join(out)


def hierarchy(rows: list[dict]) -> list[dict]:
    """One row per layer: latency (ping-pong one way at the smallest size, else the
    pairwise iteration) and bandwidth (best stream MB/s, else pairwise), with
    ParaStation's Table 3 (PC columns) beside it."""
    t3 = msg.parastation_table3()
    names = {"hal": "hardware", "rawdata": "rawdata"}
    out = []
    for layer in msg.LAYERS:
        lat = [r for r in rows if r["layer"] == layer and r["bench"] == "pingpong"] or \
              [r for r in rows if r["layer"] == layer and r["bench"] == "pairwise"]
        bw = [r for r in rows if r["layer"] == layer and r["bench"] == "stream"] or \
             [r for r in rows if r["layer"] == layer and r["bench"] == "pairwise"]
        if not lat and not bw:
            continue
        l0 = min(lat, key=lambda r: r["bytes"]) if lat else None
        b0 = max(bw, key=lambda r: r["MBps"]) if bw else None
        ref = t3.get(names[layer], (None, None))
        out.append({"layer": layer, "latency_bytes": l0 and l0["bytes"], "latency_bench": l0 and l0["bench"],
                    "hw_ns": l0 and l0["hw_ns"], "sw_ns": l0 and l0["sw_ns"], "latency_ns": l0 and l0["total_ns"],
                    "MBps": b0 and b0["MBps"], "MBps_bytes": b0 and b0["bytes"],
                    "parastation_latency_us": ref[0], "parastation_MBps": ref[1]})
    return out


def hierarchy_table(h: list[dict]) -> str:
    if not h:
        return ""
    head = (f"{'layer':8s} {'latency_ns':>11s} {'(hw + sw)':>18s} {'MB/s':>9s}   "
            f"ParaStation PC: us   MB/s")
    out = ["protocol hierarchy (ParaStation's Table 3):", head, "-" * len(head)]
    for r in h:
        hs = f"{_f(r['hw_ns'])} + {_f(r['sw_ns'])}"
        out.append(f"{r['layer']:8s} {_f(r['latency_ns']):>11s} {hs:>18s} {_f(r['MBps'], '{:.1f}'):>9s}   "
                   f"{_f(r['parastation_latency_us'], '{:.2f}'):>17s} {_f(r['parastation_MBps'], '{:.1f}'):>6s}")
    out.append("(latency: ping-pong one way at the smallest size measured, else a pairwise iteration; "
               "MB/s: the best stream, else pairwise)")
    return "\n".join(out)


def barrier_table(rows: list[dict]) -> str:
    sel = [r for r in rows if r["bench"] == "barrier"]
    if not sel:
        return ""
    ps = msg.parastation_table2()
    head = (f"{'nodes':>5s} {'topology':>10s} {'hw_ns':>8s} {'cycles':>6s} {'sw_ns':>6s} {'total_ns':>8s} "
            f"{'b2b_ns':>8s} {'per s':>9s}   ParaStation: us   per s")
    out = ["barrier (ParaStation's Table 2)", head, "-" * len(head)]
    for r in sel:
        line = (f"{r['nodes']:>5d} {r['topology'] or '-':>10s} {_f(r['hw_ns']):>8s} {_f(r['hw_cycles'], '{:.0f}'):>6s} "
                f"{_f(r['sw_ns']):>6s} {_f(r['total_ns']):>8s} {_f(r.get('back_to_back_ns')):>8s} "
                f"{_f(r['per_s'], '{:.0f}'):>9s}")
        if r["nodes"] in ps:
            line += f"   {ps[r['nodes']]:>14.2f} {1e6 / ps[r['nodes']]:>7.0f}"
        line += _spread_cell(r.get("hw_spread"))
        out.append(line)
    out.append("(hw_ns: the hardware path of an isolated episode, last node's BARRIER store to the last "
               "status block, latency model included, the median of the episodes [p10..p90, fastest, n]; sw_ns: a 1-node job's pn_barrier natively; b2b_ns and "
               "per s: back-to-back calls, median episode + sw_ns)")
    return "\n".join(out)


def targets(rows: list[dict]) -> list[dict]:
    """The issue's targets that the measured rows speak to."""
    out = []

    def add(name: str, value: float | None, limit: float, unit: str, ok: bool | None) -> None:
        out.append({"target": name, "value": value, "limit": limit, "unit": unit, "met": ok})

    pp = [r for r in rows if r["bench"] == "pingpong" and r["layer"] == "hal" and r["bytes"] == 8 and r["hw_ns"]]
    if pp:
        v = pp[0]["hw_ns"]
        add("one-way 8 B, one hop, hardware path (hw_ns)", v, TARGET_ONE_WAY_NS, "ns <=", v <= TARGET_ONE_WAY_NS)
    st = [r for r in rows if r["bench"] == "stream" and r["bytes"] >= 4096 and r["hw_ns"]]
    if st:
        link = link_payload_MBps()
        for layer in msg.LAYERS:
            sel = [r for r in st if r["layer"] == layer]
            if sel:
                worst = min(r["bytes"] * 1e3 / r["hw_ns"] for r in sel) / link
                add(f"stream >= 4 KiB, {layer}: worst fraction of link payload bandwidth ({link:.1f} MB/s)",
                    round(worst, 4), TARGET_STREAM_FRACTION, ">=", worst >= TARGET_STREAM_FRACTION)
    br = [r for r in rows if r["bench"] == "barrier" and r["nodes"] == 8 and r["hw_ns"]]
    if br:
        v = br[0]["hw_ns"]
        add("barrier, 8 nodes (hw_ns)", v, TARGET_BARRIER_NS, "ns <=", v <= TARGET_BARRIER_NS)
    ov = [r for r in rows if r["bench"] == "overhead" and r["layer"] == "rawdata" and r["bytes"] == 8]
    if ov:
        v = ov[0]["sw_ns"]
        add("rawdata send + receive, 8 B, natively (sw_ns)", v, TARGET_RAWDATA_SW_NS, "ns <=",
            v <= TARGET_RAWDATA_SW_NS)
    return out


def targets_table(t: list[dict]) -> str:
    if not t:
        return ""
    out = ["targets:"]
    for x in t:
        mark = "met" if x["met"] else "NOT met"
        out.append(f"  {x['target']}: {x['value']} ({x['unit']} {x['limit']}) — {mark}")
    return "\n".join(out)


def report(rows: list[dict]) -> str:
    parts = []
    for bench in msg.MSG_BENCHES:
        for layer in msg.LAYERS:
            parts.append(message_table(rows, bench, layer))
    parts += [overhead_table(rows), barrier_table(rows), hierarchy_table(hierarchy(rows)),
              targets_table(targets(rows))]
    return "\n\n".join(p for p in parts if p)


# ------------------------------------------------------------------------------------------
# Plots
# ------------------------------------------------------------------------------------------

def plot_messages(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = [b for b in msg.MSG_BENCHES if any(r["bench"] == b for r in rows)]
    if not benches:
        raise ValueError("no message rows to plot")
    fig, axes = plt.subplots(2, len(benches), figsize=(5.2 * len(benches), 8), squeeze=False)
    ps = msg.parastation_table1()
    colors = {"hal": "tab:blue", "rawdata": "tab:orange"}
    for j, bench in enumerate(benches):
        ax_t, ax_b = axes[0][j], axes[1][j]
        for layer in msg.LAYERS:
            sel = [r for r in rows if r["bench"] == bench and r["layer"] == layer and r["total_ns"]]
            if not sel:
                continue
            x = [r["bytes"] for r in sel]
            ax_t.plot(x, [r["total_ns"] / 1e3 for r in sel], "o-", color=colors[layer], ms=3,
                      label=f"{layer} total")
            if any(r["hw_ns"] for r in sel):
                ax_t.plot([r["bytes"] for r in sel if r["hw_ns"]], [r["hw_ns"] / 1e3 for r in sel if r["hw_ns"]],
                          "--", color=colors[layer], lw=1, label=f"{layer} hw (sim)")
            if any(r["sw_ns"] for r in sel):
                ax_t.plot([r["bytes"] for r in sel if r["sw_ns"]], [r["sw_ns"] / 1e3 for r in sel if r["sw_ns"]],
                          ":", color=colors[layer], lw=1, label=f"{layer} sw (native)")
            ax_b.plot(x, [r["MBps"] for r in sel], "o-", color=colors[layer], ms=3, label=layer)
        if bench == "pairwise":
            xs = sorted(ps)
            ax_t.plot(xs, [ps[b][0] for b in xs], "s", color="gray", ms=4, label="ParaStation 1997 (P120)")
            ax_b.plot(xs, [ps[b][1] for b in xs], "s", color="gray", ms=4, label="ParaStation 1997 (P120)")
        if bench == "stream":
            link = link_payload_MBps()
            ax_b.axhline(link, color="k", lw=0.8, ls="--", label=f"link payload {link:.0f} MB/s")
            ax_b.axhline(TARGET_STREAM_FRACTION * link, color="r", lw=0.8, ls=":", label="90% target")
        for ax in (ax_t, ax_b):
            ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("message bytes")
        ax_t.set_yscale("log")
        ax_t.set_ylabel("µs per " + ("iteration" if bench == "pairwise" else "message (one way)"))
        ax_b.set_yscale("log")
        ax_b.set_ylabel("MB/s" + (" (both directions)" if bench == "pairwise" else ""))
        ax_t.set_title(bench)
        ax_t.legend(fontsize=7)
        ax_b.legend(fontsize=7)
    fig.suptitle("ParaNIC messages: hardware path in the Verilator cluster (125 MHz, PCIe model) + native software")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_barrier(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sel = [r for r in rows if r["bench"] == "barrier"]
    if not sel:
        raise ValueError("no barrier rows to plot")
    ps = msg.parastation_table2()
    fig, ax = plt.subplots(figsize=(6, 4))
    n = [r["nodes"] for r in sel]
    ax.plot(n, [(r["total_ns"] or 0) / 1e3 for r in sel], "o-", label="ParaNIC total (hw + sw)")
    if any(r.get("back_to_back_ns") for r in sel):
        ax.plot([r["nodes"] for r in sel if r.get("back_to_back_ns")],
                [r["back_to_back_ns"] / 1e3 for r in sel if r.get("back_to_back_ns")], "^:",
                label="ParaNIC back to back (median episode + sw)")
    if any(r["hw_ns"] for r in sel):
        ax.plot([r["nodes"] for r in sel if r["hw_ns"]], [r["hw_ns"] / 1e3 for r in sel if r["hw_ns"]], "--",
                label="ParaNIC hardware path (sim)")
    ax.plot(sorted(ps), [ps[k] for k in sorted(ps)], "s-", color="gray", label="ParaStation 1997")
    ax.axhline(TARGET_BARRIER_NS / 1e3, color="r", lw=0.8, ls=":", label="target, 8 nodes")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(n) | set(ps)))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("nodes")
    ax.set_ylabel("µs per barrier")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("barrier")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=["both", "sim", "sw"], default="both",
                   help="sim: hardware path only; sw: native only; both (default): hw_ns + sw_ns")
    p.add_argument("--layer", default="hal,rawdata", help="comma-separated: hal, rawdata")
    p.add_argument("--min", type=_size, default=1, help="smallest message (bytes; K, M suffixes)")
    p.add_argument("--max", type=_size, default=1 << 20, help="largest message (default 1M)")
    p.add_argument("--nodes", default="2,4,8", help="barrier: comma-separated job sizes (<= 16; 16: torus:4x4)")
    p.add_argument("--topo", default="ring:4", help="message benchmarks: the simulated cluster (default ring:4)")


def _size(s: str) -> int:
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s0 = s.strip().lower()
    try:
        if s0 and s0[-1] in mult:
            return int(s0[:-1]) * mult[s0[-1]]
        return int(s0, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {s!r}") from None


def _backends(a: argparse.Namespace) -> tuple[str, ...]:
    return ("sim", "sw") if a.backend == "both" else (a.backend,)


def collect(what: str, a: argparse.Namespace) -> list[dict]:
    layers = [x.strip() for x in a.layer.split(",") if x.strip()]
    with msg.Session(quick=a.quick, model=getattr(a, "model", None)) as sess:
        if what in msg.MSG_BENCHES or what == "messages":
            benches = msg.MSG_BENCHES if what == "messages" else (what,)
            return msg.measure_messages(sess, benches, layers, a.min, a.max, _backends(a), topo=a.topo)
        if what == "overhead":
            return measure_overhead(sess, layers)
        if what == "barrier":
            nodes = [int(x) for x in a.nodes.split(",") if x.strip()]
            return msg.measure_barrier(sess, nodes, _backends(a))
    raise ValueError(f"unknown benchmark {what!r}")


def measure_overhead(sess: msg.Session, layers: Iterable[str] = msg.LAYERS) -> list[dict]:
    """Rows {bench: overhead, layer, bytes, sw_ns, total_ns, MBps} (sw backend only)."""
    layers = list(layers)
    rows = sess.pn_bench("sw", 2, ["--bench", "overhead", "--layer", layers[0] if len(layers) == 1 else "all",
                                   "--scale", str(sess.scale("sw"))],
                         show=lambda r: f"overhead {r['layer']:7s} {r['bytes']:>4d} B  {r['ns_per_iter']:8.1f} ns")
    return [{"bench": "overhead", "layer": r["layer"], "bytes": r["bytes"], "hw_ns": None,
             "sw_ns": round(r["ns_per_iter"], 1), "total_ns": round(r["ns_per_iter"], 1),
             "MBps": round(r["bytes"] * 1e3 / r["ns_per_iter"], 3) if r["ns_per_iter"] else 0.0,
             "iters": {"sw": r["iters"]}} for r in rows if r["layer"] in layers]


def result(rows: list[dict], what: str, a: argparse.Namespace, seconds: float) -> dict:
    return {"bench": what, "rows": rows, "hierarchy": hierarchy(rows), "targets": targets(rows),
            "config": {"backend": a.backend, "quick": a.quick, "model": getattr(a, "model", None) or S.DEFAULT_MODEL, "clock_mhz": P.TARGET_CLK_HZ / 1e6,
                       "link_payload_MBps": round(link_payload_MBps(), 1), "seconds": round(seconds, 1)}}


def run(what: str, a: argparse.Namespace) -> int:
    t0 = time.time()
    try:
        rows = collect(what, a)
    except (ValueError, msg.BenchError, TimeoutError) as e:
        print(f"paranic bench {what}: {e}", file=sys.stderr)
        return 1
    res = result(rows, what, a, time.time() - t0)
    if a.json:
        print(json.dumps(res))
    else:
        print(report(rows))
    if a.plot:
        try:
            (plot_barrier if what == "barrier" else plot_messages)(rows, a.plot)
        except ValueError as e:
            print(f"paranic bench {what}: no plot: {e}", file=sys.stderr)
            return 1
        print(f"plot written to {a.plot}", file=sys.stderr)
    return 0
