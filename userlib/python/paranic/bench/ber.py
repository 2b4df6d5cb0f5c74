"""`paranic bench ber`: rawdata messages through the default sim cluster at bit-error rates.

The default simulated cluster (ring:4, no firmware), every cable at one bit-error rate;
node 0 sends a fixed count of messages to node 1 with pn_faultstream --until-error, so
the outcome is one of two, never a stall: every message arrived exactly once, intact
and in order, or both ends got an error from rawdata's deadline (docs/userlib.md,
"Deadlines"): -ENETDOWN when the link went DOWN (docs/link-layer.md, "Link faults").
Per rate: messages delivered, the errors, wall seconds, the simulator's cycle rate
during the run, and the link counters (replays, DOWNs) of the whole cluster.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
import time
from typing import Any

from paranic import launch as L
from paranic.spec import protocol as P

BERS = (0.0, 1e-6, 1e-5, 1e-4, 1e-3)
#: Four MTU packets per message, as `paranic bench faults` streams.
MSG_BYTES = 4 * P.DEFAULT_MTU
#: The deadline the runs use (ms): shorter than the library's default to keep runs short.
DEADLINE_MS = 3000


def _errname(e: int) -> str:
    return "0" if e == 0 else f"-{errno.errorcode.get(-e, str(-e))}"


def stream(sim, count: int, nbytes: int = MSG_BYTES, deadline_ms: int = DEADLINE_MS,
           timeout: int = 600, name: str = "ber") -> dict[str, Any]:
    """pn_faultstream --until-error from node 0 to node 1 of ``sim``; returns
    ``{"src": {...}, "dst": {...}, "seconds", "cycles_per_s"}`` (the two JSON lines,
    wall time, the simulator's mean cycle rate during the run)."""
    env = sim.env(L.clean_env())
    env["PARANIC_RD_TIMEOUT_MS"] = str(deadline_ms)
    c0, t0 = sim.cycle(), time.time()
    run = L.launch([str(L.tool("pn_faultstream")), "--backend", "sim", "--src", "0", "--dst", "1",
                    "--bytes", str(nbytes), "--count", str(count), "--until-error"], sim.info["nodes"],
                   L.cluster_name(name), backend="sim", timeout=timeout, env=env)
    secs = time.time() - t0
    rate = (sim.cycle() - c0) / secs if secs > 0 else 0.0
    out = {}
    for node, role in ((0, "src"), (1, "dst")):
        lines = [ln for ln in run.nodes.get(node, []) if ln.startswith("{")]
        if not lines:
            raise RuntimeError(f"pn_faultstream: no result from node {node} (rc {run.rc}):\n{run.out[-2000:]}")
        out[role] = json.loads(lines[-1])
    if run.rc != 0:
        raise RuntimeError(f"pn_faultstream failed (rc {run.rc}):\n{run.out[-2000:]}")
    out["seconds"] = secs
    out["cycles_per_s"] = rate
    return out


def links(sim) -> dict[str, int]:
    """Replays, DOWNs and CRC errors summed over every link of the cluster."""
    import subprocess

    r = subprocess.run(["paranic", "cluster", "status", "--backend", "sim", "--json"],
                       env=sim.env(L.clean_env()), capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise RuntimeError(r.stderr)
    tot = {"replays": 0, "downs": 0, "crc_errors": 0}
    for n in json.loads(r.stdout)["nodes"]:
        for ln in n.get("links", []):
            for k in tot:
                tot[k] += int(ln.get(k, 0))
    return tot


def one_rate(ber: float, count: int) -> dict[str, Any]:
    from paranic.sim import run as simrun

    with simrun.start("ring:4", ber=ber, timeout=900) as sim:
        res = stream(sim, count, name=f"bench-ber-{ber:g}")
        lk = links(sim)
    src, dst = res["src"], res["dst"]
    return {"ber": ber, "messages": count, "bytes": MSG_BYTES, "delivered": dst["received"],
            "duplicates": dst["duplicates"], "corrupt": dst["corrupt"], "out_of_order": dst["out_of_order"],
            "send_error": src["error"], "recv_error": dst["error"], "sent_ok": src["sent_ok"],
            "seconds": round(res["seconds"], 1), "cycles_per_s": round(res["cycles_per_s"]), **lk}


def table(rows: list[dict]) -> str:
    out = [f"rawdata, {MSG_BYTES // 1024} KiB messages node 0 -> node 1, ring:4 sim (no firmware), every cable "
           f"at the BER, deadline {DEADLINE_MS} ms:",
           f"  {'BER':>6s} {'delivered':>11s} {'send err':>11s} {'recv err':>11s} {'s':>6s} {'cycles/s':>9s} "
           f"{'replays':>8s} {'downs':>6s}"]
    for r in rows:
        out.append(f"  {r['ber']:>6g} {r['delivered']:>5d} of {r['messages']:<3d} {_errname(r['send_error']):>11s} "
                   f"{_errname(r['recv_error']):>11s} {r['seconds']:>6.1f} {r['cycles_per_s']:>9d} "
                   f"{r['replays']:>8d} {r['downs']:>6d}")
    return "\n".join(out)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    labels = ["0" if r["ber"] == 0 else f"{r['ber']:g}" for r in rows]
    ax.bar(labels, [r["delivered"] for r in rows],
           color=["#4c72b0" if r["send_error"] == 0 else "#dd8452" for r in rows])
    for i, r in enumerate(rows):
        if r["send_error"]:
            ax.annotate(f"{_errname(r['send_error'])}\nafter {r['seconds']:.0f} s", (i, r["delivered"]),
                        ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("bit-error rate of every cable")
    ax.set_ylabel(f"messages delivered (of {rows[0]['messages']})")
    ax.set_title("rawdata through ring:4 (no firmware): delivered, or an error")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def run(a: argparse.Namespace) -> int:
    count = 20 if a.quick else 60
    rows = []
    t0 = time.time()
    try:
        for ber in BERS:
            rows.append(one_rate(ber, count))
            print(f"paranic bench ber: BER {ber:g}: {rows[-1]['delivered']} of {count}, "
                  f"error {_errname(rows[-1]['send_error'])}", file=sys.stderr, flush=True)
    except (RuntimeError, TimeoutError, ValueError) as e:
        print(f"paranic bench ber: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({"bench": "ber", "rows": rows,
                          "config": {"quick": a.quick, "deadline_ms": DEADLINE_MS,
                                     "seconds": round(time.time() - t0, 1)}}))
    else:
        print(table(rows))
    if a.plot:
        plot(rows, a.plot)
    return 0

