"""`paranic bench simspeed`: how fast the cluster simulator runs, and how much its
simulated latencies depend on the machine's load (docs/simulator.md, "Speed").

* **speed**: cycles of the whole cluster per wall second for each topology, with the
  clock free-running and nobody attached (``paranic-sim --free-run --max-cycles N``, the
  harness's own figure), and under traffic (a ``pn_bench`` stream of 64 KiB HAL DMA
  messages (10 of them: pn_bench --scale 0.01) between nodes 0 and 1 while the cluster's cycle counter is sampled).
* **load** (``--load``): the 8-byte ping-pong's one-way latency (``--lat-layer`` hal or am;
  pn_bench's fastest iteration and the mean) in simulated time on ring:4, with the pause off (``--pause-cap-ms 0``) and on, on the machine as it is and
  with ``--busy`` extra busy-loop processes running: median and spread over
  ``--samples`` runs.

``--split`` measures the split build (one model per node) and ``--threads 1,2,2w`` its
worker threads (docs/simulator.md, "Worker threads"; ``N``: fork-join per half cycle) and
lock-step windows (``Nw``: ``--window auto`` on N threads, "Windows"), each a row of its
own; the samples of the configurations are interleaved.
``--sim-args "..."`` passes other options to every simulator started.
Every figure is a measurement on this machine; the load average is printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

from paranic import launch as L
from paranic.sim import build as simbuild
from paranic.sim import run as simrun
from . import msg, plots

DEFAULT_TOPOS = "ring:4,ring:8"
#: Issue 15's goals, free-running cycles per wall second on a 2-core machine (drawn on the plot).
GOALS = {"ring:4": 500_000, "torus:4x4": 100_000}
_RATE = re.compile(r"after ([\d.]+) s: (\d+) cycles/s")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("simspeed")
    g.add_argument("--topos", default=DEFAULT_TOPOS, metavar="T,T,...",
                   help=f"simspeed: topologies (default {DEFAULT_TOPOS})")
    g.add_argument("--samples", type=int, default=3, help="simspeed: runs per figure (default 3)")
    g.add_argument("--cycles", type=int, default=200_000,
                   help="simspeed: cycles per free-running sample (default 200000)")
    g.add_argument("--sim-args", default="", metavar="'ARGS'", help="simspeed: extra paranic-sim options")
    g.add_argument("--load", action="store_true",
                   help="simspeed: latency (HAL 8 B, simulated) with the pause off/on, idle and under load")
    g.add_argument("--lat-layer", choices=("hal", "am"), default="hal",
                   help="simspeed --load: pn_bench layer of the ping-pong (default hal)")
    g.add_argument("--busy", type=int, default=2, help="simspeed --load: busy-loop processes (default 2)")
    g.add_argument("--split", action="store_true", help="simspeed: the split build (one model per node)")
    g.add_argument("--threads", default="1", metavar="N,Nw,...",
                   help="simspeed --split: threads evaluating the node models, one row each; Nw: in "
                        "lock-step windows (--window auto) on N threads (default 1)")
    g.add_argument("--no-traffic", action="store_true", help="simspeed: free-running figures only")


def _stats(xs: Sequence[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def free_run(binary: Path, cycles: int, sim_args: Sequence[str]) -> tuple[float, float]:
    """One free-running sample, nobody attached: the harness's cycles per wall second,
    and cycles per CPU second of the simulator process (user + system; on a loaded
    machine the wall figure mostly measures the load)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="pn-simspeed-") as d:
        r = subprocess.run([str(binary), "--socket", f"{d}/s.sock", "--shm", f"{d}/shm", "--free-run",
                            "--max-cycles", str(cycles), *sim_args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rates = _RATE.findall(r.stdout)
    if r.returncode != 0 or not rates:
        raise msg.BenchError(f"{binary} exited with {r.returncode}:\n{r.stdout[-2000:]}")
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    done = int(re.findall(r"cycle (\d+) \(", r.stdout)[-1])
    return float(rates[-1][1]), done / cpu if cpu > 0 else float("nan")


def _pn_bench(sim: simrun.SimCluster, args: Sequence[str], tag: str) -> list[dict]:
    msg._wait_job_ended(sim)
    sink = msg._Rows(tag, msg._show_msg)
    run = L.launch([str(L.tool("pn_bench")), *args], 2, L.cluster_name(f"simspeed-{os.getpid()}"),
                   backend="sim", timeout=1800, env=sim.env(L.clean_env()), stream=sink)
    if run.rc != 0:
        raise msg.BenchError(f"pn_bench on {tag} failed (exit {run.rc}):\n" + "\n".join(sink.lines[-20:]))
    return sink.rows


def traffic(topo: str, sim_args: Sequence[str], split: bool = False) -> float:
    """Cycles per wall second while a HAL DMA stream runs between nodes 0 and 1."""
    with simrun.start(topo, socket=simrun.RUN_DIR / f"simspeed-{os.getpid()}.sock", extra_args=sim_args,
                      timeout=600, split=split) as sim:
        samples: list[tuple[float, int, int]] = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                samples.append((time.time(), sim.cycle(), sim.counters()["clients"]))
                time.sleep(0.1)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            _pn_bench(sim, ["--bench", "stream", "--layer", "hal", "--min", "65536", "--max", "65536",
                            "--scale", "0.01"], f"sim {topo}")
        finally:
            stop.set()
            t.join()
    busy = [s for s in samples if s[2] >= 2]     # both processes attached
    if len(busy) < 2 or busy[-1][0] - busy[0][0] < 0.5:
        raise msg.BenchError(f"{topo}: the traffic ran too briefly to measure ({len(busy)} samples)")
    return (busy[-1][1] - busy[0][1]) / (busy[-1][0] - busy[0][0])


def latency(layer: str, pause: bool, busy: int, samples: int, sim_args: Sequence[str]) -> list[dict]:
    """pn_bench's 8-byte ping-pong rows on ``layer`` (ring:4), ``samples`` runs, with
    ``busy`` busy-loop processes running meanwhile. Each row's ``latency_ns`` is its
    fastest iteration (pn_bench on sim), ``ns_per_iter / 2`` the mean one way."""
    args = [*sim_args, *([] if pause else ["--pause-cap-ms", "0"])]
    simbuild.build("ring:4")   # built (or found) before the load starts
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        with simrun.start("ring:4", socket=simrun.RUN_DIR / f"simspeed-lat-{os.getpid()}.sock",
                          extra_args=args, timeout=600) as sim:
            out = []
            for _ in range(samples):
                rows = _pn_bench(sim, ["--bench", "pingpong", "--layer", layer, "--min", "8", "--max", "8",
                                       "--scale", "0.003"], "sim ring:4")
                out += [r for r in rows if r.get("bench") == "pingpong"]
            return out
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def _threads(spec: str, split: bool) -> list[tuple[int, bool]]:
    """``1,2,2w`` -> [(1, False), (2, False), (2, True)]: thread counts, windowed or not."""
    try:
        ts = [(int(x[:-1]), True) if x.endswith("w") else (int(x), False) for x in spec.split(",")]
    except ValueError:
        raise ValueError(f"--threads {spec}: give thread counts, e.g. 1,2,2w") from None
    if any(t < 1 for t, _ in ts):
        raise ValueError(f"--threads {spec}: counts must be >= 1")
    if not split and ts != [(1, False)]:
        raise ValueError("--threads needs --split: worker threads and windows run the split build's node models")
    return ts


def _config_args(t: int, window: bool, split: bool) -> list[str]:
    if not split:
        return []
    return ["--threads", str(t), *(["--window", "auto"] if window else [])]


def summary(rows: list[dict]) -> dict:
    """The headline keys: ``<topo>_cycles_per_s`` (``ring4_cycles_per_s``,
    ``torus4x4_cycles_per_s`` ...), the median wall-clock rate of the free-running
    cluster, with ``<topo>_cycles_per_cpu_s`` (per CPU second of the simulator) and
    ``<topo>_threads`` (the thread count of that figure) beside it: per topology the
    fastest of the configurations measured (each row has its own)."""
    out: dict = {}
    for r in rows:
        if r["what"] == "cycles_per_s" and not r["traffic"]:
            key = r["topo"].replace(":", "")
            if out.get(f"{key}_cycles_per_s", -1) >= r["median"]:
                continue
            out[f"{key}_cycles_per_s"] = r["median"]
            out[f"{key}_cycles_per_cpu_s"] = r["per_cpu_s"]["median"]
            out[f"{key}_threads"] = r.get("threads", 1)
            out[f"{key}_window"] = r.get("window", False)
    return out


def _mode(r: dict) -> str:
    t = r.get("threads", 1)
    kind = "windows" if r.get("window") else "fork-join" if t > 1 else "serial"
    return f"{'split' if r['split'] else 'one model'}, {t} thread{'s' if t > 1 else ''}, {kind}"


def plot(rows: list[dict], path: str) -> None:
    """Bars of the free-running and the traffic rates per topology and configuration
    (median, min..max as error bars), each topology's goal as a mark."""
    plt = plots.pyplot()
    rs = [r for r in rows if r["what"] == "cycles_per_s"]
    if not rs:
        raise ValueError("no speed rows to plot (--load measures latencies)")
    topos = list(dict.fromkeys(r["topo"] for r in rs))
    modes = list(dict.fromkeys(_mode(r) for r in rs))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
    width = 0.8 / len(modes)
    for ax, traffic in zip(axes, (False, True)):
        for k, mode in enumerate(modes):
            sel = {r["topo"]: r for r in rs if _mode(r) == mode and r["traffic"] == traffic}
            xs = [i + (k - (len(modes) - 1) / 2) * width for i, t in enumerate(topos) if t in sel]
            got = [sel[t] for t in topos if t in sel]
            if got:
                ax.bar(xs, [r["median"] for r in got], width,
                       yerr=[[r["median"] - r["min"] for r in got], [r["max"] - r["median"] for r in got]],
                       capsize=3, label=mode)
        for i, t in enumerate(topos):
            if t in GOALS:
                ax.hlines(GOALS[t], i - 0.45, i + 0.45, colors="r", linestyles=":",
                          label="goal" if i == min(j for j, u in enumerate(topos) if u in GOALS) else None)
        plots.log_axis(ax, "simulated cycles per wall second" if not traffic else "",
                       "free-running, nobody attached" if not traffic else "under traffic (a HAL DMA stream)",
                       ticks=topos, legend_size=7 if not traffic else None)
    loads = sorted({r["loadavg"] for r in rs})
    plots.save(fig, path, f"paranic bench simspeed: median [min..max] of {rs[0]['n']} samples; "
               f"load average {', '.join(loads)}")


def run(a: argparse.Namespace) -> int:
    sim_args = shlex.split(a.sim_args)
    if a.samples < 1 or a.cycles < 1000:
        print("paranic bench simspeed: --samples >= 1 and --cycles >= 1000", file=sys.stderr)
        return 2
    rows: list[dict] = []
    try:
        L.build_userlib(quiet=False)
        if a.load:
            for busy in (0, a.busy):
                for pause in (False, True):
                    got = latency(a.lat_layer, pause, busy, a.samples, sim_args)
                    for fig, xs in (("min", [r["latency_ns"] for r in got]),
                                    ("mean", [r["ns_per_iter"] / 2 for r in got])):
                        rows.append({"what": f"latency_{a.lat_layer}_8B_{fig}_ns", "layer": a.lat_layer,
                                     "figure": fig, "pause": pause, "busy": busy,
                                     "loadavg": round(os.getloadavg()[0], 1), **_stats(xs), "samples": xs})
                        msg._log(f"paranic bench simspeed: {rows[-1]}")
        else:
            threads = _threads(a.threads, a.split)
            for topo in a.topos.split(","):
                binary = simbuild.build(topo, split=a.split)
                # Samples interleaved over the configurations: a change of the machine's
                # load meanwhile hits them alike.
                free: dict = {c: [] for c in threads}
                busy: dict = {c: [] for c in threads}
                loads: list[float] = []
                for _ in range(a.samples):
                    for t, w in threads:
                        args = [*sim_args, *_config_args(t, w, a.split)]
                        loads.append(os.getloadavg()[0])
                        free[(t, w)].append(free_run(binary, a.cycles, args))
                        if not a.no_traffic:
                            busy[(t, w)].append(traffic(topo, args, a.split))
                la = f"{min(loads):.1f}-{max(loads):.1f}"
                for t, w in threads:
                    got = free[(t, w)]
                    rows.append({"what": "cycles_per_s", "topo": topo, "split": a.split, "threads": t, "window": w,
                                 "traffic": False, "loadavg": la,
                                 **_stats([x for x, _ in got]), "per_cpu_s": _stats([c for _, c in got]),
                                 "samples": [round(x) for x, _ in got]})
                    msg._log(f"paranic bench simspeed: {rows[-1]}")
                    if not a.no_traffic:
                        xs = busy[(t, w)]
                        rows.append({"what": "cycles_per_s", "topo": topo, "split": a.split, "threads": t,
                                     "window": w, "traffic": True, "loadavg": la, **_stats(xs),
                                     "samples": [round(x) for x in xs]})
                        msg._log(f"paranic bench simspeed: {rows[-1]}")
    except (ValueError, msg.BenchError, TimeoutError, subprocess.TimeoutExpired) as e:
        print(f"paranic bench simspeed: {e}", file=sys.stderr)
        return 1
    if a.plot and plots.write(plot, rows, a.plot, "paranic bench simspeed"):
        return 1
    if a.json:
        print(json.dumps({"bench": "simspeed", **summary(rows), "rows": rows, "config": {"sim_args": sim_args}}))
    else:
        for r in rows:
            label = (f"{r['topo']:10s} {'split' if r['split'] else 'one-model':9s} "
                     f"{r.get('threads', 1)} thread{'s' if r.get('threads', 1) > 1 else ' '} "
                     f"{'windows ' if r.get('window') else 'fork-join' if r.get('threads', 1) > 1 else 'serial   '} "
                     f"{'traffic' if r['traffic'] else 'idle':8s} cycles/s"
                     if r["what"] == "cycles_per_s" else
                     f"{r['layer']} 8 B one-way ns ({r['figure']} iteration), pause {'on ' if r['pause'] else 'off'}, "
                     f"{r['busy']} busy loops")
            cpu = r.get("per_cpu_s")
            print(f"{label}: median {r['median']:.0f} (min {r['min']:.0f}, max {r['max']:.0f}, n={r['n']})"
                  + (f"; per CPU second {cpu['median']:.0f} ({cpu['min']:.0f}-{cpu['max']:.0f})" if cpu else "")
                  + f", load average {r['loadavg']}")
    return 0
