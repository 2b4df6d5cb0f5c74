"""What limits the router network's saturation: tie rule, buffer slots, packet size.

``python -m paranic.bench.router_study [--samples N] [--only KEY,...]`` prints JSON: for
ring:8 and torus:4x4 under uniform random traffic, the saturation throughput
(:func:`paranic.bench.router.saturation`: median, min, max of N runs at offered load
1.0 with different seeds) of each configuration below, beside the routing function's
channel-load bound. docs/architecture.md ("Buffer sizing and head-of-line blocking")
and docs/benchmarks.md ("Router") quote these numbers.

* ``ties``: every tie +  vs. ties split by parity (the routing function's rule);
* ``slots``: ``buf_words`` 512 / 1024 / 2048 = 3 / 7 / 15 packet slots of
  1 KiB packets per link input (the default is 512);
* ``short``: 64-byte packets (10 words) vs. 1 KiB (130 words), with the default
  buffers and with 15 slots (``buf_words`` 2048, where slots hardly limit): the cost
  of the fixed per-packet gap between packets;
* ``bubble``: ring:8 only, the bubble rule switched off (``bubble_en`` = 0; not
  deadlock-free, and a torus does deadlock): what the rule's two free slots for a
  packet entering a ring cost, i.e. what dateline virtual channels could win back;
* ``patterns``: all five patterns, default parameters.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from paranic.spec import protocol as P

from . import router

TOPOS = (router.RING, router.TORUS)


def study(samples: int = 3, only: set[str] | None = None, progress=print) -> dict:
    out: dict = {"samples": samples, "packet_bytes": P.DEFAULT_MTU,
                 "packet_words": P.packet_words(P.DEFAULT_MTU)}

    def want(k: str) -> bool:
        return only is None or k in only

    for topo in TOPOS:
        if want("ties"):
            out.setdefault("ties", []).extend(
                router.saturation(topo, "uniform", samples, ties=t, progress=progress)
                for t in ("plus", "split"))
        if want("slots"):
            out.setdefault("slots", []).extend(
                router.saturation(topo, "uniform", samples, progress=progress,
                                  buf_words=bw)
                for bw in (512, 1024, 2048))
        if want("short"):
            out.setdefault("short", []).extend(
                router.saturation(topo, "uniform", samples, length=length, progress=progress,
                                  buf_words=bw)
                for bw in (512, 2048) for length in (64, P.DEFAULT_MTU))
        if want("bubble") and topo == router.RING:   # a torus deadlocks without it
            out.setdefault("bubble", []).extend(
                router.saturation(topo, "uniform", samples, progress=progress, bubble_en=False,
                                  buf_words=bw)
                for bw in (512, 2048))
        if want("patterns"):
            out.setdefault("patterns", []).extend(router.patterns(topo, samples, progress))
    return out


def by_topo(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["topo"], []).append(r)
    return out


def plot(res: dict, path: str) -> None:
    """Two figures: ``path`` (saturation vs packet slots per link input, and the tie
    rule, per topology, beside the bound) and ``<path stem>_patterns.png`` (every
    pattern beside its bound, :func:`paranic.bench.router_cli.plot_patterns`)."""
    from pathlib import Path

    from .plots import pyplot
    from .router_cli import plot_patterns

    if res.get("patterns"):
        pats = by_topo(res["patterns"])
        plot_patterns({"ring_patterns": pats.get(router.RING),
                       "torus_patterns": pats.get(router.TORUS)},
                      str(Path(path).with_name(Path(path).stem + "_patterns.png")))
    if not res.get("slots"):
        return
    plt = pyplot()
    words = res["packet_words"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for topo, rows in by_topo(res["slots"]).items():
        slots = [r["params"].get("buf_words", 512) // words for r in rows]
        ax.errorbar(slots, [r["median"] for r in rows],
                    yerr=[[r["median"] - r["min"] for r in rows], [r["max"] - r["median"] for r in rows]],
                    marker="o", capsize=3, label=f"{topo} measured")
        ax.axhline(rows[0]["bound"], ls=":", color=ax.lines[-1].get_color(),
                   label=f"{topo} bound {rows[0]['bound']:.3f}")
    for r in res.get("ties") or []:
        if r["ties"] == "plus":
            ax.plot([3], [r["median"]], "x", ms=9, color="k")
    ax.plot([], [], "x", color="k", label="every tie + (3 slots)")
    ax.set_xscale("log", base=2)
    ax.set_xticks([3, 7, 15])
    ax.set_xticklabels(["3\n(default)", "7", "15"])
    ax.set_xlabel(f"packet slots per link input (buf_words // {words})")
    ax.set_ylabel("saturation, words/cycle/node")
    ax.set_ylim(0, 1.05)
    ax.set_title("Uniform random traffic, 1 KiB packets, split ties")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paranic.bench.router_study",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=3, help="runs per configuration (seeds)")
    ap.add_argument("--only", default="", help="comma list of: ties, slots, short, bubble, patterns")
    ap.add_argument("--plot", help="PNG file (and <stem>_patterns.png) to draw")
    ap.add_argument("--from-json", help="plot a saved result instead of measuring")
    a = ap.parse_args(argv)
    if a.samples < 1:
        ap.error("--samples must be >= 1")
    only = set(a.only.split(",")) if a.only else None
    bad = (only or set()) - {"ties", "slots", "short", "bubble", "patterns"}
    if bad:
        ap.error(f"unknown --only item(s): {', '.join(sorted(bad))}")
    if a.from_json:
        with open(a.from_json) as f:
            res = json.load(f)
    else:
        res = study(a.samples, only,
                    progress=lambda *x, **k: print(*x, file=sys.stderr, flush=True))
        print(json.dumps(res, indent=1))
    if a.plot:
        plot(res, a.plot)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def credit_round_trip(delay: int = 8, reverse_busy: bool = False, packets: int = 1,
                      mtu: int = P.DEFAULT_MTU) -> dict:
    """The credit loop of one link, measured in a Migen simulation of a 2-node ring of
    routers joined by the sim cluster's cable (:class:`~paranic.sim.channels.LinkChannel`,
    two link layers and ``SimPhy(delay)``), with the current router.

    Node 0 sends ``packets`` MTU packets to node 1 (out on its XP port, over cable 0);
    with ``reverse_busy`` node 1 sends as many to node 0 at the same time over the same
    cable's other direction (which carries node 0's credits). Per word: cycle it leaves
    node 0's output (``source`` valid & ready), cycle it enters node 1's input FIFO,
    cycle node 1 drains it, cycle its credit is back at node 0 (cumulative
    ``credit_words`` reaching its count). Returns the medians and maxima of
    ``forward`` (leave -> enter), ``hold`` (enter -> drained), ``back`` (drained ->
    credit), ``round_trip`` (leave -> credit)."""
    import statistics

    from migen.sim import run_simulation

    from paranic.sim.channels import LinkChannel
    from paranic.sim.testnet import RouterNetwork
    from paranic.spec.topo import Topology

    topo = Topology.ring(2)
    net = RouterNetwork(topo, mtu=mtu, channel=LinkChannel, channel_kwargs={"delay": delay},
                        with_traffic=False)
    r0, r1 = net.routers
    xp0, xm1 = r0.links[0], r1.links[1]   # node 0 -> node 1: XP (tie, node 0 even) -> XM
    assert topo.route(0, 1) == P.Port.XP and topo.route(1, 0) == P.Port.XM
    t: dict[str, list[int]] = {"leave": [], "enter": [], "drained": [], "credit": []}
    done = {"n": 0}
    words = P.packet_words(mtu)

    def pkt(src, dst, k):
        w0, _ = P.header_words(dst_node=dst, src_node=src, length=mtu)
        return [w0, k] + [(k << 16) | i for i in range(words - 2)]

    def sender(node, dst):
        snk = net.sinks[node]
        while not (yield net.ready):
            yield
        for _ in range(60):   # link training
            yield
        for k in range(packets):
            ws = pkt(node, dst, k)
            for i, w in enumerate(ws):
                yield snk.valid.eq(1)
                yield snk.data.eq(w)
                yield snk.first.eq(i == 0)
                yield snk.last.eq(i == len(ws) - 1)
                yield
                while not (yield snk.ready):
                    yield
        yield snk.valid.eq(0)

    def sinks():
        for s in net.sources:
            yield s.ready.eq(1)
        yield

    def monitor():
        cyc, credits = 0, 0
        target = packets * words
        while cyc < 20 * target + 2000:
            if (yield xp0.source.valid) and (yield xp0.source.ready):
                t["leave"].append(cyc)
            if (yield xm1.sink.valid) and (yield xm1.sink.ready):
                t["enter"].append(cyc)
            if (yield xm1.drained):
                t["drained"].append(cyc)
            if (yield xp0.credit_valid) and len(t["leave"]):
                credits += (yield xp0.credit_words)
                t["credit"] += [cyc] * max(0, min(credits, len(t["leave"])) - len(t["credit"]))
            if len(t["credit"]) >= target:
                break
            cyc += 1
            yield
        done["n"] = cyc

    gens = [sender(0, 1), sinks(), monitor()] + ([sender(1, 0)] if reverse_busy else [])
    run_simulation(net, gens)
    n = min(len(v) for v in t.values())
    if n < packets * words:
        raise RuntimeError(f"credit_round_trip: only {n} of {packets * words} words came round")
    parts = {"forward": [t["enter"][i] - t["leave"][i] for i in range(n)],
             "hold": [t["drained"][i] - t["enter"][i] for i in range(n)],
             "back": [t["credit"][i] - t["drained"][i] for i in range(n)],
             "round_trip": [t["credit"][i] - t["leave"][i] for i in range(n)]}
    out = {"delay": delay, "reverse_busy": reverse_busy, "packets": packets,
           "packet_words": words, "words": n}
    for k, v in parts.items():
        out[k] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
    return out


def resources(n_links: int = 4, voq: bool = True, buf_words: int | None = None,
              family: str = "xc7", **router_kw: Any) -> dict:
    """Yosys ``synth_xilinx -flatten -family xc7`` of one Router (``RouterTop``: its
    ports at the top level), by default as NicCore configures it (link buffers
    :func:`paranic.hw.niccore.link_buf_words`, ejection and injection FIFOs as there);
    ``voq=False``: a single FIFO per input
    (the router before virtual output queues); ``router_kw``: further Router parameters
    (e.g. ``eject_reader=False, inject_reader=False``: without the second read ports,
    ``inject_words``). Returns LUTs (logic + LUT RAM), FFs,
    block RAMs (36 kbit) and the time yosys took."""
    import time

    from paranic.boardtool import count_resources, run_yosys
    from paranic.hw.niccore import INJECT_PACKETS, VOQ_ORDER, inject_buf_words, link_buf_words
    from paranic.hw.router import default_buf_words
    from paranic.sim.paths import BUILD_ROOT
    from paranic.sim.testnet import router_verilog

    bw = link_buf_words(P.DEFAULT_MTU) if buf_words is None else buf_words
    d = BUILD_ROOT / "router_resources"
    d.mkdir(parents=True, exist_ok=True)
    kw = {"eject_words": default_buf_words(P.DEFAULT_MTU),
          "inject_words": inject_buf_words(P.DEFAULT_MTU), "inject_packets": INJECT_PACKETS,
          "voq_order": VOQ_ORDER, **router_kw}
    extra = "".join(f"_{k}{int(v) if isinstance(v, bool) else v}" for k, v in sorted(router_kw.items()))
    name = f"router{n_links}_bw{bw}_{'voq' if voq else 'fifo'}{extra}"
    v, top = router_verilog(d, n_links=n_links, name=name, buf_words=bw, voq=voq, **kw)
    t0 = time.monotonic()
    cells = run_yosys([v], top, family, "-noiopad", d / f"{top}.yosys.log", cwd=d, label=top)
    r = count_resources(cells)
    return {"n_links": n_links, "voq": voq, "buf_words": bw, **router_kw, **r,
            "yosys_seconds": round(time.monotonic() - t0, 1)}
