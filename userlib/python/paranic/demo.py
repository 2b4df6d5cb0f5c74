"""`paranic demo` (what `make demo` runs): ParaStation's own benchmarks through the real
user library on a simulated ParaNIC cluster, beside ParaStation's 1997 figures.

1. Builds (with progress; cached afterwards) libparanic and the Verilator cluster
   simulators it needs: the 4-node ring and, for the 8-node barrier, the 8-node ring
   (the two builds run side by side).
2. Pairwise exchange (Table 1), ping-pong and stream for the HAL and rawdata layers,
   1 byte to 1 MiB: hardware path on the 4-node ring (hw_ns), software natively
   (sw_ns); the software overhead of a send plus a receive; the barrier for 2, 4 and
   8 nodes (Table 2); the protocol hierarchy (Table 3's first rows) and the targets.
3. Prints the tables, writes the plots and the JSON under ``build/demo/``
   (``demo-messages.png``, ``demo-barrier.png``, ``results.json``); ``--img docs/img``
   refreshes the documents' copies instead (``make bench`` does).

``--quick`` (the short version that ``make test`` runs): sizes up to 4 KiB, fewer
iterations, barrier for 2 and 4 nodes on the 4-node ring only.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from paranic import launch as L
from paranic.bench import msg, msg_cli
from paranic.paths import BUILD_ROOT
from paranic.sim import build as simbuild

#: Where the demo's plots and JSON go unless told otherwise.
OUT = BUILD_ROOT / "demo"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="the short version (sizes <= 4 KiB, 2 and 4 nodes)")
    p.add_argument("--img", default=str(OUT), help=f"where the plots go (default {OUT}; "
                   "docs/img refreshes the documents' plots)")
    p.add_argument("--json-out", default=str(OUT / "results.json"),
                   help=f"where the JSON goes (default {OUT / 'results.json'})")


def _say(s: str = "") -> None:
    print(s, flush=True)


def prebuild(topos: list[str]) -> None:
    """Build the simulators side by side (one compiler job each), with progress."""
    errors: list[BaseException] = []

    def one(t: str) -> None:
        try:
            simbuild.build(t)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(t,)) for t in topos]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def run(a: argparse.Namespace) -> int:
    t0 = time.time()
    img = Path(a.img)
    img.mkdir(parents=True, exist_ok=True)
    out_json = Path(a.json_out)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    nodes = [2, 4] if a.quick else [2, 4, 8]
    topos = sorted({msg.barrier_topology(n) for n in nodes} | {"ring:4"})
    hi = 4096 if a.quick else 1 << 20
    _say(f"ParaNIC demo{' (quick)' if a.quick else ''}: ParaStation's benchmarks through libparanic on a "
         f"simulated ParaNIC cluster ({', '.join(topos)})")
    try:
        L.build_userlib(quiet=False)
        _say(f"building or reusing the cluster simulators: {', '.join(topos)}")
        prebuild(topos)
        _say(f"simulators ready ({time.time() - t0:.0f} s)")
        with msg.Session(quick=a.quick) as sess:
            rows = msg.measure_messages(sess, msg.MSG_BENCHES, msg.LAYERS, 1, hi, msg.BACKENDS)
            rows += msg_cli.measure_overhead(sess)
            rows += msg.measure_barrier(sess, nodes, msg.BACKENDS)
    except (ValueError, RuntimeError, TimeoutError, L.BuildError) as e:
        print(f"paranic demo: {e}", file=sys.stderr)
        return 1
    secs = time.time() - t0
    ns = argparse.Namespace(backend="both", quick=a.quick)
    res = msg_cli.result(rows, "demo", ns, secs)
    out_json.write_text(json.dumps(res, indent=1))
    plots = {"demo-messages.png": msg_cli.plot_messages, "demo-barrier.png": msg_cli.plot_barrier}
    _say()
    _say(msg_cli.report(rows))
    _say()
    for name, fn in plots.items():
        fn(rows, str(img / name))
        _say(f"plot: {img / name}")
    _say(f"JSON: {out_json}")
    _say(f"demo done in {secs:.0f} s")
    return 0
