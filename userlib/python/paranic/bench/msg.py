"""Message and barrier benchmarks of libparanic: ParaStation's Tables 1 and 2, reproduced.

Each figure is measured twice with the same C program (``pn_bench``, the real
library) and then combined:

* ``hw_ns`` — on the ``sim`` backend: the Verilator cluster simulator, times in
  simulated nanoseconds at the target clock, PCIe model included. The simulator runs
  about 1000 times slower than real time, so the host software's own time is
  invisible in it: this is the hardware path.
* ``sw_ns`` — on the ``sw`` backend, natively: the same code path with a software
  NIC in shared memory. It includes the software NIC's own copying, so it is an upper
  bound of what the host spends in the library.
  On sim, pingpong, pairwise and barrier report the median iteration, with its spread
  beside it (``hw_spread``: p10, p90, fastest, slowest and the number of samples,
  per message); the fastest iteration is only the best case (``hw_best_ns``): the
  hardware path is deterministic, but simulated time keeps running while a client
  process is descheduled (a busy machine with few cores), which only ever adds, and a
  node that fell behind catches up in one short iteration. Stream reports the mean
  (messages overlap). Measure on an idle machine for figures to publish.
* ``total_ns`` — latency benchmarks (pairwise, pingpong, barrier): ``hw_ns + sw_ns``
  (the host's work and the NIC's are in series). ``stream``: ``max(hw_ns, sw_ns)``
  (the host prepares the next message while the NIC sends the last).
* ``MBps`` — ``bytes / total_ns``; for ``pairwise`` twice that (both nodes send:
  ParaStation's definition in Table 1).

The benchmarks (``pn_bench``'s, see userlib/tools/pn_bench.c):

* ``pairwise`` — ParaStation's Algorithm 1: both nodes send, then both receive;
  time per iteration.
* ``pingpong`` — one-way latency (half the round trip).
* ``stream`` — one-way bandwidth: back-to-back messages, time per message.
* ``barrier`` — ``hw_ns`` is the hardware path of isolated episodes from the
  simulator's trace records: from the last node's BARRIER store leaving the CPU to
  the last node's status block showing the episode done (median of 20; the range is
  in the row). ``back_to_back_ns`` and ``per_s``: back-to-back ``pn_barrier`` calls of
  a job of N nodes, the median episode plus ``sw_ns`` (ParaStation's Table 2 rate).
  ``sw_ns`` is a 1-node job's time per call natively (the call path's own cost; N
  busy-waiting processes on a 2-core machine would measure the scheduler).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from paranic import launch as L
from paranic.spec import protocol as P
from paranic.spec import sim as S
from paranic.sim import run as simrun

MSG_BENCHES = ("pairwise", "pingpong", "stream")
LAYERS = ("hal", "rawdata")
BACKENDS = ("sim", "sw")
#: pn_bench's iteration scale per backend (iterations = scale * clamp(64 MiB / (bytes + 64), 8, 20000)).
#: Simulated time runs ~1000x slower than real time; its figures barely vary between runs.
SCALE = {"sw": 1.0, "sim": 0.003}
QUICK_SCALE = {"sw": 0.05, "sim": 0.0015}


def barrier_topology(nodes: int) -> str:
    """The smallest simulated cluster that holds a job of ``nodes`` nodes."""
    if nodes < 1 or nodes > 16:
        raise ValueError(f"barrier jobs of 1..16 nodes, not {nodes}")
    return "ring:4" if nodes <= 4 else "ring:8" if nodes <= 8 else "torus:4x4"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _Rows:
    """A text sink for pn_launch's output: collects node 0's JSON rows and prints a
    progress line for each as it arrives."""

    def __init__(self, tag: str, show: Callable[[dict], str]):
        self.tag, self.show, self.rows, self.lines = tag, show, [], []
        self._buf = ""

    def write(self, s: str) -> None:
        self._buf += s
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            self.lines.append(line)
            if line.startswith("0: {"):
                row = json.loads(line[3:])
                self.rows.append(row)
                _log(f"  [{self.tag}] {self.show(row)}")
            elif "FAIL" in line or line.startswith("launch: node"):
                _log(f"  [{self.tag}] {line}")

    def flush(self) -> None:
        pass


class BenchError(RuntimeError):
    pass


@dataclass
class Session:
    """Runs pn_bench on the sw backend and on simulated clusters (started once per
    topology and kept until :meth:`close`)."""

    quick: bool = False
    sims: dict[str, simrun.SimCluster] = field(default_factory=dict)
    #: The simulator's latency model corner (paranic.spec.sim.LATENCY_MODELS; None: the default).
    model: str | None = None

    def __post_init__(self) -> None:
        if self.model is not None:
            S.latency_model(self.model)   # a clear error before anything runs

    def __enter__(self) -> "Session":
        L.build_userlib(quiet=False)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for topo, sim in list(self.sims.items()):
            rc = sim.stop()
            if rc != 0:
                _log(f"paranic bench: simulator {topo} exited with {rc}; log {sim.log}")
        self.sims.clear()

    def sim(self, topo: str) -> simrun.SimCluster:
        if topo not in self.sims:
            for other in list(self.sims):  # one simulator at a time: the machine has few cores
                self.sims.pop(other).stop()
            _log(f"paranic bench: starting the {topo} simulator (built once, then cached)")
            sock = simrun.RUN_DIR / f"bench-{os.getpid()}-{topo.replace(':', '')}.sock"
            self.sims[topo] = simrun.start(topo, socket=sock, timeout=300, model=self.model)
        return self.sims[topo]

    def pn_bench(self, backend: str, nodes: int, args: Sequence[str], *, topo: str = "ring:4",
                 timeout: int = 3600, show: Callable[[dict], str] = str, program: str = "pn_bench",
                 wrap: Sequence[str] = ()) -> list[dict]:
        """Run ``pn_bench ARGS`` on ``nodes`` nodes of ``backend``; node 0's JSON rows.
        ``program``: another tool that prints rows the same way (pn_sockbench), started
        behind ``wrap`` (e.g. ``env LD_PRELOAD=...``)."""
        env = L.clean_env()
        tag = backend
        if backend == "sim":
            sim = self.sim(topo)
            env = sim.env(env)
            tag = f"sim {topo}"
            _wait_job_ended(sim)
        sink = _Rows(tag, show)
        cluster = L.cluster_name(f"bench-{os.getpid()}-{backend}")
        run = L.launch([*wrap, str(L.tool(program)), *args], nodes, cluster, backend=backend, timeout=timeout,
                       env=env, stream=sink)
        if run.rc != 0:
            tail = "\n".join(sink.lines[-20:])
            raise BenchError(f"{program} on {tag} failed (exit {run.rc}):\n{tail}")
        return sink.rows

    def scale(self, backend: str) -> float:
        return (QUICK_SCALE if self.quick else SCALE)[backend]


def _wait_job_ended(sim: simrun.SimCluster, timeout: float = 60.0) -> None:
    """Wait until the simulator has seen the last job's processes detach: a job of
    another size is refused (-EBUSY) while one runs (docs/simulator.md, "Jobs")."""
    t0 = time.time()
    while True:
        c = sim.counters()
        if c["clients"] == 0 and c["job_nodes"] == 0:
            return
        if time.time() - t0 > timeout or not sim.alive():
            raise BenchError(f"the simulator still runs a job after {timeout:.0f} s: {c}")
        time.sleep(0.02)


def _show_msg(row: dict) -> str:
    what = "ns one way" if row["bench"] == "pingpong" else "ns/message" if row["bench"] == "stream" else "ns/iter"
    sp = spread(row, per=0.5 if row["bench"] == "pingpong" else 1.0) if row["bench"] != "stream" else None
    extra = (f" median, p10..p90 {sp['p10']:.1f}..{sp['p90']:.1f}, best {sp['min']:.1f}, n={sp['samples']}"
             if sp else "")
    return (f"{row['bench']:8s} {row['layer']:7s} {row['bytes']:>8d} B  {row['latency_ns']:>12.1f} {what}{extra}"
            f"  ({row['iters']} iterations)")


def _combine(bench: str, hw: float | None, sw: float | None) -> float:
    parts = [x for x in (hw, sw) if x is not None]
    return max(parts) if bench == "stream" else sum(parts)


def _mbps(bench: str, nbytes: int, total_ns: float) -> float:
    if total_ns <= 0:
        return 0.0
    return (2 if bench == "pairwise" else 1) * nbytes * 1e3 / total_ns


def measure_messages(sess: Session, benches: Iterable[str] = MSG_BENCHES, layers: Iterable[str] = LAYERS,
                     lo: int = 1, hi: int = 1 << 20, backends: Iterable[str] = BACKENDS,
                     topo: str = "ring:4") -> list[dict]:
    """Rows ``{bench, layer, bytes, hw_ns, sw_ns, total_ns, MBps, ...}`` for every size
    lo, 2 lo, ... hi of every benchmark and layer (nodes 0 and 1 of ``topo``)."""
    benches, layers, backends = list(benches), list(layers), list(backends)
    for b in benches:
        if b not in MSG_BENCHES:
            raise ValueError(f"unknown benchmark {b!r} (one of {', '.join(MSG_BENCHES)})")
    for x in layers:
        if x not in LAYERS:
            raise ValueError(f"unknown layer {x!r} (one of {', '.join(LAYERS)})")
    if not (1 <= lo <= hi <= 1 << 30):
        raise ValueError(f"sizes must satisfy 1 <= min <= max <= 1 GiB (got {lo}, {hi})")
    got: dict[str, dict[tuple, dict]] = {}
    for be in ("sw", "sim"):  # sw first: its native timing wants the cores to itself
        if be not in backends:
            continue
        t0 = time.time()
        _log(f"paranic bench: {', '.join(benches)} on {be} ({', '.join(layers)}; {lo}..{hi} bytes)")
        rows = sess.pn_bench(be, 2, ["--bench", ",".join(benches), "--layer", layers[0] if len(layers) == 1 else "all",
                                     "--min", str(lo), "--max", str(hi), "--scale", str(sess.scale(be))],
                             topo=topo, show=_show_msg)
        got[be] = {(r["bench"], r["layer"], r["bytes"]): r for r in rows
                   if r["bench"] in benches and r["layer"] in layers}
        _log(f"paranic bench: {be} done in {time.time() - t0:.0f} s")
    keys = sorted({k for rows in got.values() for k in rows},
                  key=lambda k: (benches.index(k[0]), layers.index(k[1]), k[2]))
    out = []
    for bench, layer, nbytes in keys:
        hw = got.get("sim", {}).get((bench, layer, nbytes))
        sw = got.get("sw", {}).get((bench, layer, nbytes))
        hw_ns = _per_msg(hw)
        sw_ns = _per_msg(sw)
        total = _combine(bench, hw_ns, sw_ns)
        hw_spread = spread(hw, per=0.5 if bench == "pingpong" else 1.0) if bench != "stream" else None
        out.append({"bench": bench, "layer": layer, "bytes": nbytes,
                    "hw_spread": hw_spread, "hw_best_ns": hw_spread and hw_spread["min"],
                    "hw_ns": _r(hw_ns), "sw_ns": _r(sw_ns), "total_ns": _r(total),
                    "hw_ns_p10": hw_spread and hw_spread["p10"], "hw_ns_p90": hw_spread and hw_spread["p90"],
                    "MBps": round(_mbps(bench, nbytes, total), 3),
                    "hw_cycles": _r(hw_ns and hw_ns / P.TARGET_CLK_NS),
                    "topology": topo if hw else None,
                    "iters": {k: v["iters"] for k, v in (("sim", hw), ("sw", sw)) if v}})
    return out


def spread(row: dict | None, prefix: str = "iter_", per: float = 1.0) -> dict | None:
    """The spread beside a median from pn_bench's row (``<prefix>p10_ns`` ...), scaled by
    ``per`` (0.5: a ping-pong iteration is two messages): ``{median, p10, p90, min, max,
    samples}`` in ns, or None when the row has no samples (sw without --per-iter)."""
    if not row or row.get(f"{prefix}samples", 0) <= 0:
        return None
    if prefix == "iter_":
        med, lo = row["median_ns_per_iter"], row["min_ns_per_iter"]
    else:
        med, lo = row[f"{prefix}ns"], row[f"{prefix}min_ns"]
    return {"median": _r(med * per), "p10": _r(row[f"{prefix}p10_ns"] * per),
            "p90": _r(row[f"{prefix}p90_ns"] * per), "min": _r(lo * per),
            "max": _r(row[f"{prefix}max_ns"] * per), "samples": int(row[f"{prefix}samples"])}


def _per_msg(row: dict | None) -> float | None:
    """Nanoseconds per message: pn_bench's latency_ns (one way for pingpong, one
    iteration for pairwise, one message for stream; on sim the median iteration for
    pingpong and pairwise, the mean for stream)."""
    if row is None:
        return None
    return float(row["latency_ns"])


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 1)


def measure_barrier(sess: Session, nodes: Iterable[int] = (2, 4, 8), backends: Iterable[str] = BACKENDS,
                    count: int | None = None) -> list[dict]:
    """Rows ``{bench: barrier, nodes, topology, hw_ns, sw_ns, total_ns, MBps: None,
    back_to_back_ns, per_s, ...}``."""
    nodes, backends = sorted(set(nodes)), list(backends)
    for n in nodes:
        barrier_topology(n)  # validates
    sw_ns = None
    if "sw" in backends:
        c = count or (2000 if sess.quick else 200000)
        r = sess.pn_bench("sw", 1, ["--bench", "barrier", "--barriers", str(c)], show=_show_barrier)
        sw_ns = float(r[0]["latency_ns"])
    out = []
    for n in nodes:
        hw_ns = b2b = r = None
        topo = barrier_topology(n)
        if "sim" in backends:
            c = count or (20 if sess.quick else 200 if n <= 8 else 40)
            r = sess.pn_bench("sim", n, ["--bench", "barrier", "--barriers", str(c)], topo=topo,
                              show=_show_barrier)[0]
            b2b = float(r["latency_ns"])                 # back to back, the median episode
            hw_ns = float(r["hw_path_ns"]) if r.get("hw_path_ns", -1) > 0 else b2b
        total = _combine("barrier", hw_ns, sw_ns)
        b2b_total = _combine("barrier", b2b, sw_ns)
        out.append({"bench": "barrier", "layer": "hal", "nodes": n, "topology": topo if hw_ns else None,
                    "hw_ns": _r(hw_ns), "sw_ns": _r(sw_ns), "total_ns": _r(total), "MBps": None,
                    "hw_cycles": _r(hw_ns and hw_ns / P.TARGET_CLK_NS),
                    "hw_path_range_ns": [r["hw_path_min_ns"], r["hw_path_max_ns"]] if r else None,
                    "hw_spread": spread(r, "hw_path_"), "back_to_back_spread": spread(r),
                    "back_to_back_ns": _r(b2b_total),
                    "per_s": round(1e9 / b2b_total) if b2b_total else None})
    return out


def _show_barrier(row: dict) -> str:
    sp = spread(row, "hw_path_")
    path = (f", hardware path {row['hw_path_ns']:.1f} ns median (p10..p90 {sp['p10']:.1f}..{sp['p90']:.1f}, "
            f"min {sp['min']:.1f}, n={sp['samples']})" if sp else "")
    return (f"barrier {row['nodes']:>2d} nodes  {row['latency_ns']:>10.1f} ns/episode back to back{path}"
            f"  ({row['iters']} episodes)")


# ------------------------------------------------------------------------------------------
# ParaStation's figures (the package's seed_figures.json)
# ------------------------------------------------------------------------------------------

def parastation_table1() -> dict[int, tuple[float, float]]:
    """bytes -> (µs per iteration, MB/s) of Table 1's Pentium 120 columns (the best);
    word transfer up to 8 bytes, block transfer above."""
    from .seed import seed_figures
    t = seed_figures()["parastation"]["table1_pairwise_exchange"]
    cols = t["columns"]
    i_us, i_mb = cols.index("pentium120_us"), cols.index("pentium120_MBps")
    out: dict[int, tuple[float, float]] = {}
    for part in ("block_transfer", "word_transfer"):   # word transfer wins where both exist
        for row in t[part]:
            out[int(row[0])] = (float(row[i_us]), float(row[i_mb]))
    return out


def parastation_table2() -> dict[int, float]:
    """nodes -> ParaStation barrier µs (Table 2)."""
    from .seed import seed_figures
    t = seed_figures()["parastation"]["table2_barrier"]
    i = t["columns"].index("parastation_us")
    return {int(r[0]): float(r[i]) for r in t["rows"]}


def parastation_table3(columns: tuple[str, str] = ("pc_latency_us", "pc_MBps")) -> dict[str, tuple[float, float]]:
    """layer -> (µs, MB/s) of Table 3's PC columns (hardware, rawdata, ...); ``columns``
    ("pc_os_latency_us", "pc_os_MBps"): the same API over the operating system's TCP."""
    from .seed import seed_figures
    t = seed_figures()["parastation"]["table3_protocol_hierarchy"]
    cols = t["columns"]
    i_us, i_mb = cols.index(columns[0]), cols.index(columns[1])
    return {r[0]: (r[i_us], r[i_mb]) for r in t["rows"]}
