"""What limits the router network's saturation: tie rule, buffer slots, packet size.

``python -m paranic.bench.router_study [--samples N] [--only KEY,...]`` prints JSON: for
ring:8 and torus:4x4 under uniform random traffic, the saturation throughput
(:func:`paranic.bench.router.saturation`: median, min, max of N runs at offered load
1.0 with different seeds) of each configuration below, beside the routing function's
channel-load bound. docs/architecture.md ("Buffer sizing and head-of-line blocking")
and docs/benchmarks.md ("Router") quote these numbers.

* ``ties``: every tie +  vs. ties split by parity (the routing function's rule);
* ``slots``: ``buf_words`` 260 / 512 / 1024 / 2048 = 2 / 3 / 7 / 15 packet slots of
  1 KiB packets per link input (the default is 512);
* ``short``: 64-byte packets (10 words) vs. 1 KiB (130 words), default buffers: the
  cost of the fixed per-packet gap between packets;
* ``patterns``: all five patterns, default parameters.
"""

from __future__ import annotations

import argparse
import json
import sys

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
                                  **({} if bw == 512 else {"buf_words": bw}))
                for bw in (260, 512, 1024, 2048))
        if want("short"):
            out.setdefault("short", []).append(
                router.saturation(topo, "uniform", samples, length=64, progress=progress))
        if want("patterns"):
            out.setdefault("patterns", []).extend(router.patterns(topo, samples, progress))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paranic.bench.router_study",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=3, help="runs per configuration (seeds)")
    ap.add_argument("--only", default="", help="comma list of: ties, slots, short, patterns")
    a = ap.parse_args(argv)
    if a.samples < 1:
        ap.error("--samples must be >= 1")
    only = set(a.only.split(",")) if a.only else None
    bad = (only or set()) - {"ties", "slots", "short", "patterns"}
    if bad:
        ap.error(f"unknown --only item(s): {', '.join(sorted(bad))}")
    res = study(a.samples, only, progress=lambda *x, **k: print(*x, file=sys.stderr, flush=True))
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
