"""`paranic bench layers`: ParaStation's Table 3 (the protocol hierarchy) for ParaNIC.

One row per layer: latency (one way, half the round trip of an 8-byte ping-pong) and
bandwidth (a stream of 1 MiB messages), measured like the other message benchmarks
(:mod:`paranic.bench.msg`): ``hw_ns`` on the simulated cluster (simulated time, the
hardware path), ``sw_ns`` natively on the ``sw`` backend (the software's own cost),
``latency_ns`` = hw + sw, stream ``max(hw, sw)`` per message. Beside it ParaStation's
Table 3 (PC columns) and the latency each layer adds over the layer it is built on.

Layers are a registry (:data:`LAYERS`): a row is one :class:`Layer` with a measure
function ``(session, backend) -> (ping-pong row, stream row)`` returning rows as
pn_bench prints them (``latency_ns`` one way, ``latency_ns`` per stream message). A new
layer is one such function plus a mode of a benchmark program; until then it is listed
as "not yet". A layer whose software is not installed (``Layer.missing``) is skipped
with a message.

* ``hal``, ``rawdata``, ``ports``: ``pn_bench --layer X`` (userlib/tools/pn_bench.c).
* ``am``: ``pn_bench --layer am``: ping-pong = a request whose handler replies with the
  8 bytes (half the request + reply round trip); stream = 1 MiB requests (the endpoint's
  max_payload raised to 1 MiB), then the last one's answer.
* ``rma``: ``pn_bench --layer rma``: ping-pong = an 8-byte ``pn_rma_put`` + ``pn_rma_wait``
  (completion: the data is in the target's region and its answer is back), half of it;
  stream = 1 MiB puts from registered memory into the peer's region, then
  ``pn_rma_flush``.
* ``sockets``: ``pn_sockbench`` (a plain TCP program, no libparanic) between nodes 0
  and 1 under ``LD_PRELOAD=libparanic_sock.so``; on sim it times with the library's
  ``pn_sock_now_ns`` (simulated time). A row whose connection was not a ParaNIC one
  (the library fell back to the OS) is an error.
* ``pvm``: ``pn_pvm_bench`` (userlib/sock/pvm) as a PVM job of nodes 0 and 1
  (``pvm_job.sh``: pvmd on both, started through paranic-rsh, every PVM process under the
  preload library): the master on node 0 spawns a worker on node 1; ping-pong = 8 bytes
  (PvmDataRaw) over the direct task-to-task route (PvmRouteDirect), half the round trip;
  stream = 1 MiB messages packed with PvmDataInPlace (no copy into a PVM buffer), then
  the worker's answer. On sim timed with ``pn_sock_now_ns`` (simulated time). A row whose
  tasks had no ParaNIC connection (``tcp_remote`` < 1) is an error; without PVM (Debian's
  pvm, pvm-dev) the row is skipped with a message.
* ``os-tcp``: the same program without the preload library over 127.0.0.1: the
  operating system's TCP on loopback, measured natively whatever the backend (there is
  no hardware path).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from paranic import launch as L
from paranic.paths import USERLIB
from paranic.sim.paths import build_lock
from paranic.spec import protocol as P
from paranic.spec import sim as S
from . import msg, plots

#: The message sizes of the table (bytes): latency of a small message, bandwidth of a
#: large one (every layer streams at or near its peak there: docs/benchmarks.md).
LAT_BYTES = 8
BW_BYTES = 1 << 20

#: Runs per layer and backend (1 with --quick). The figure is the median run (of an even
#: count the lower middle one), with the runs' spread (fastest..slowest, their number)
#: beside it and the fastest run as the best case: two busy-polling processes on a small
#: machine are easily disturbed natively. On the simulator one run: its figure is
#: already the median iteration, with that run's spread.
REPEATS = {"sw": 3, "sim": 1}

Pair = tuple[dict, dict]                       # (ping-pong row, stream row) of one backend
Measure = Callable[[msg.Session, str], Pair]


@dataclass(frozen=True)
class Layer:
    name: str
    title: str
    below: Optional[str]                       # the layer it is built on: "added" is over it
    measure: Optional[Measure]                 # None: not yet
    parastation: Optional[str] = None          # its row in ParaStation's Table 3
    parastation_below: Optional[str] = None    # that row's layer below in ParaStation
    parastation_os: bool = False               # Table 3's OS (TCP/IP) columns
    native_only: bool = False                  # no hardware path: measured on sw only
    missing: Optional[Callable[[], Optional[str]]] = None   # why it cannot run here (None: it can)


def _pn_bench(layer: str) -> Measure:
    """pn_bench's ping-pong at LAT_BYTES and stream at BW_BYTES for ``layer``."""

    def measure(sess: msg.Session, backend: str) -> Pair:
        out = []
        for bench, n in (("pingpong", LAT_BYTES), ("stream", BW_BYTES)):
            rows = sess.pn_bench(backend, 2, ["--bench", bench, "--layer", layer, "--min", str(n), "--max", str(n),
                                              "--scale", str(sess.scale(backend))], show=msg._show_msg)
            out.append(_one(rows, bench, layer, n))
        return out[0], out[1]

    return measure


def _sockbench(mode: str, layer: str, preload: bool) -> Measure:
    """pn_sockbench between nodes 0 and 1: ping-pong at LAT_BYTES, stream at BW_BYTES."""

    def measure(sess: msg.Session, backend: str) -> Pair:
        wrap = ["env", f"LD_PRELOAD={L.USERLIB_BUILD / 'libparanic_sock.so'}"] if preload else []
        out = []
        for bench, n in (("pingpong", LAT_BYTES), ("stream", BW_BYTES)):
            port = _free_port() if mode == "loopback" else 5000   # cluster ports belong to the job
            rows = sess.pn_bench(backend, 2, ["--mode", mode, "--port", str(port), "--layer", layer, "--bench", bench,
                                              "--min", str(n), "--max", str(n), "--scale", str(sess.scale(backend))],
                                 show=msg._show_msg, program="pn_sockbench", wrap=wrap)
            row = _one(rows, bench, layer, n)
            if preload and row.get("fd_kind") != 4:
                raise msg.BenchError(f"{layer} on {backend}: the connection was not a ParaNIC one "
                                     f"(pn_sock_fd_kind {row.get('fd_kind')}): the library fell back to the OS")
            if preload and backend == "sim" and row.get("clock") != "backend":
                raise msg.BenchError(f"{layer} on sim: no simulated time (pn_sock_now_ns missing)")
            out.append(row)
        return out[0], out[1]

    return measure


PVM_DIR = USERLIB / "sock" / "pvm"
PVM_JOB = PVM_DIR / "pvm_job.sh"
PVM_BENCH_SRC = PVM_DIR / "pn_pvm_bench.c"
PVM_BENCH = L.USERLIB_BUILD / "pvm" / "pn_pvm_bench"


def pvm_missing() -> Optional[str]:
    """Why the pvm row cannot run here (None: PVM is installed)."""
    for prog, pkg in (("pvmd", "pvm"), ("gcc", "gcc")):
        if shutil.which(prog) is None:
            return f"{prog} is not installed (Debian package {pkg}: scripts/deps.sh installs it)"
    if not Path("/usr/include/pvm3.h").exists():
        return "pvm3.h is not installed (Debian package pvm-dev: scripts/deps.sh installs it)"
    return None


def build_pvm_bench() -> Path:
    """Build pn_pvm_bench against Debian's libpvm3 (as tests/userlib/test_pvm.py builds
    pn_pvm_ring), unless it is newer than its source."""
    PVM_BENCH.parent.mkdir(parents=True, exist_ok=True)
    with build_lock("pvm-bench"):
        if PVM_BENCH.exists() and PVM_BENCH.stat().st_mtime >= PVM_BENCH_SRC.stat().st_mtime:
            return PVM_BENCH
        r = subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(PVM_BENCH),
                            str(PVM_BENCH_SRC), "-lpvm3"], capture_output=True, text=True)
    if r.returncode != 0:
        raise msg.BenchError(f"building pn_pvm_bench failed:\n{r.stderr[-2000:]}")
    return PVM_BENCH


def _pvm(sess: msg.Session, backend: str, topo: str = "ring:4") -> Pair:
    """pn_pvm_bench as a PVM job of 2 nodes (pvm_job.sh): ping-pong at LAT_BYTES,
    stream at BW_BYTES (PvmDataInPlace), both in one run of the virtual machine."""
    exe = build_pvm_bench()
    env = L.clean_env()
    tag = backend
    if backend == "sim":
        sim = sess.sim(topo)
        env = sim.env(env)
        tag = f"sim {topo}"
        msg._wait_job_ended(sim)
    env["PVM_EP"] = f"/usr/bin:{exe.parent}"   # where pvmd finds the worker it spawns
    sink = msg._Rows(tag, msg._show_msg)
    with tempfile.TemporaryDirectory(prefix="pn-pvm-bench-") as work:
        cmd = f"{exe} --min {LAT_BYTES} --bw {BW_BYTES} --encoding inplace --scale {sess.scale(backend)}"
        run = L.launch(["sh", str(PVM_JOB), f"{work}/w", cmd], 2, L.cluster_name(f"bench-pvm-{backend}"),
                       backend=backend, timeout=1800, env=env, stream=sink)
        if run.rc != 0:
            log = "\n".join(p.read_text(errors="replace")[-1500:] for p in Path(work).glob("w/pvm/node*/pvml.*"))
            raise msg.BenchError(f"pn_pvm_bench on {tag} failed (exit {run.rc}):\n" +
                                 "\n".join(sink.lines[-20:]) + ("\n" + log if log else ""))
    out = []
    for bench, n in (("pingpong", LAT_BYTES), ("stream", BW_BYTES)):
        row = _one(sink.rows, bench, "pvm", n)
        if row.get("tcp_remote", -1) < 1:
            raise msg.BenchError(f"pvm on {backend}: the tasks had no ParaNIC connection (tcp_remote "
                                 f"{row.get('tcp_remote')}): the library fell back to the OS")
        if backend == "sim" and row.get("clock") != "backend":
            raise msg.BenchError("pvm on sim: no simulated time (pn_sock_now_ns missing)")
        out.append(row)
    return out[0], out[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one(rows: list[dict], bench: str, layer: str, n: int) -> dict:
    sel = [r for r in rows if r["bench"] == bench and r["layer"] == layer and r["bytes"] == n]
    if len(sel) != 1:
        raise msg.BenchError(f"{bench} {layer} {n} B: expected one row, got {len(sel)}")
    return sel[0]


LAYERS: tuple[Layer, ...] = (
    Layer("hal", "HAL: PIO up to 256 B, DMA in place above", None, _pn_bench("hal"), "hardware"),
    Layer("rawdata", "rawdata: the HAL's context 0, plain memory", "hal", _pn_bench("rawdata"), "rawdata", "hardware"),
    Layer("ports", "ports: tagged messages, eager / rendezvous", "hal", _pn_bench("ports"), "port", "rawdata"),
    Layer("sockets", "TCP sockets over ports (LD_PRELOAD)", "ports", _sockbench("cluster", "sockets", True),
          "socket", "port"),
    Layer("pvm", "PVM over the emulated sockets (direct route)", "sockets", _pvm, "pvm", "socket",
          missing=pvm_missing),
    Layer("am", "active messages: request + reply handlers", "ports", _pn_bench("am")),
    Layer("rma", "RMA: put into a registered region", "ports", _pn_bench("rma")),
    Layer("os-tcp", "the OS's TCP over loopback (no ParaNIC)", None, _sockbench("loopback", "os-tcp", False),
          "socket_self", None, parastation_os=True, native_only=True),
)
BY_NAME = {x.name: x for x in LAYERS}
READY = tuple(x.name for x in LAYERS if x.measure)
NOT_YET = tuple(x.name for x in LAYERS if not x.measure)


def parse_layers(spec: str | None) -> list[str]:
    """The layers of ``--layers a,b`` (default: every one implemented), in table order.
    ValueError for an unknown layer or one that is not implemented yet."""
    if spec is None or spec.strip() in ("", "all"):
        return list(READY)
    names = [x.strip() for x in spec.split(",") if x.strip()]
    for x in names:
        if x not in BY_NAME:
            raise ValueError(f"unknown layer {x!r} (known: {', '.join(READY)}; not yet: {', '.join(NOT_YET)})")
        if x not in READY:
            raise ValueError(f"layer {x!r} is not implemented yet (available: {', '.join(READY)})")
    return [x.name for x in LAYERS if x.name in names]


def skipped_layers(names: Iterable[str]) -> dict[str, str]:
    """layer -> why it cannot run here, for those of ``names`` that cannot (PVM not installed)."""
    out = {}
    for name in names:
        why = BY_NAME[name].missing() if BY_NAME[name].missing else None
        if why:
            out[name] = why
    return out


def measure_layers(sess: msg.Session, layers: Iterable[str] = READY,
                   backends: Iterable[str] = msg.BACKENDS, repeats: int | None = None) -> list[dict]:
    """One row per layer: ``{layer, latency_ns, MBps, hw_ns, sw_ns, added_ns, ...}``.
    Every layer is measured ``repeats`` times per backend (default REPEATS, 1 with
    ``quick``), round robin over the layers, and the median run counts (``runs``: the
    spread of the runs per backend, ``best_latency_ns``: the fastest runs). A layer that
    cannot run here (:func:`skipped_layers`) is left out with a message."""
    layers, backends = parse_layers(",".join(layers)), list(backends)
    skipped = skipped_layers(layers)
    for name, why in skipped.items():
        msg._log(f"paranic bench layers: {name} skipped: {why}")
    layers = [x for x in layers if x not in skipped]
    def reps(be: str) -> int:
        return repeats if repeats is not None else 1 if sess.quick else REPEATS[be]

    plan = [(name, be, rep) for be in ("sw", "sim")   # sw first: its native timing wants the cores to itself
            for rep in range(reps(be))
            for name in layers
            if (be == "sw" and BY_NAME[name].native_only) or (be in backends and not BY_NAME[name].native_only)]
    runs: dict[str, dict[str, list[Pair]]] = {}
    for name, be, rep in plan:
        measure = BY_NAME[name].measure
        assert measure is not None
        t0 = time.time()
        msg._log(f"paranic bench layers: {name} on {be}" + (f" (run {rep + 1} of {reps(be)})" if reps(be) > 1 else ""))
        runs.setdefault(name, {}).setdefault(be, []).append(measure(sess, be))
        msg._log(f"paranic bench layers: {name} on {be} done in {time.time() - t0:.0f} s")
    rows = []
    for name in layers:
        by_be = runs.get(name, {})
        row = _row(BY_NAME[name], {be: _median_run(p) for be, p in by_be.items()})
        row["runs"] = {be: _runs_spread(p) for be, p in by_be.items()}
        best = {be: _median_run(p, best=True) for be, p in by_be.items()}
        row["best_latency_ns"] = _row(BY_NAME[name], best)["latency_ns"]
        rows.append(row)
    return _added(rows)


def _median_run(pairs: list[Pair], best: bool = False) -> Pair:
    """The run whose ping-pong (and, separately, stream) figure is the median of the runs
    (the lower middle one of an even count); ``best``: the fastest instead."""
    def pick(rows: list[dict]) -> dict:
        rows = sorted(rows, key=lambda r: r["latency_ns"])
        return rows[0] if best else rows[(len(rows) - 1) // 2]
    return pick([p for p, _ in pairs]), pick([s for _, s in pairs])


def _runs_spread(pairs: list[Pair]) -> dict:
    """Per backend: the runs' ping-pong latency and stream ns per message, median
    [min..max] and their number; on sim also the median run's per-iteration spread."""
    out = {}
    for i, what in ((0, "pingpong_ns"), (1, "stream_ns")):
        v = sorted(float(p[i]["latency_ns"]) for p in pairs)
        out[what] = {"median": msg._r(v[(len(v) - 1) // 2]), "min": msg._r(v[0]), "max": msg._r(v[-1]),
                     "runs": len(v)}
    it = msg.spread(_median_run(pairs)[0], per=0.5)
    if it:
        out["pingpong_iterations"] = it
    return out


def _row(lay: Layer, by_be: dict[str, Pair]) -> dict:
    hw_pp, hw_st = by_be.get("sim", (None, None))
    sw_pp, sw_st = by_be.get("sw", (None, None))
    hw_ns, sw_ns = msg._per_msg(hw_pp), msg._per_msg(sw_pp)
    lat = msg._combine("pingpong", hw_ns, sw_ns)
    st_hw, st_sw = msg._per_msg(hw_st), msg._per_msg(sw_st)
    st = msg._combine("stream", st_hw, st_sw)
    cols = ("pc_os_latency_us", "pc_os_MBps") if lay.parastation_os else ("pc_latency_us", "pc_MBps")
    t3 = _table3(cols) if lay.parastation else {}
    ref = t3.get(lay.parastation or "", (None, None))
    ref_below = t3.get(lay.parastation_below or "", (None, None))
    ps_added = (round(ref[0] - ref_below[0], 2) if ref[0] is not None and ref_below[0] is not None else None)
    return {"layer": lay.name, "title": lay.title, "below": lay.below,
            "latency_ns": msg._r(lat), "MBps": round(msg._mbps("stream", BW_BYTES, st), 1) if st else None,
            "hw_ns": msg._r(hw_ns), "sw_ns": msg._r(sw_ns), "hw_cycles": msg._r(hw_ns and hw_ns / P.TARGET_CLK_NS),
            "stream_hw_ns": msg._r(st_hw), "stream_sw_ns": msg._r(st_sw),
            "hw_MBps": round(BW_BYTES * 1e3 / st_hw, 1) if st_hw else None,
            "sw_MBps": round(BW_BYTES * 1e3 / st_sw, 1) if st_sw else None,
            "latency_bytes": LAT_BYTES, "MBps_bytes": BW_BYTES, "native_only": lay.native_only,
            "added_ns": None, "added_hw_ns": None, "added_sw_ns": None,
            "parastation_layer": lay.parastation, "parastation_latency_us": ref[0], "parastation_MBps": ref[1],
            "parastation_added_us": ps_added,
            "iters": {be: [p["iters"], s["iters"]] for be, (p, s) in by_be.items()}}


def _table3(cols: tuple[str, str]) -> dict[str, tuple[float, float]]:
    """ParaStation's Table 3 (msg.parastation_table3)."""
    return msg.parastation_table3(cols)


def _added(rows: list[dict]) -> list[dict]:
    """The latency each layer adds over the one it is built on (when both were measured)."""
    by = {r["layer"]: r for r in rows}
    for r in rows:
        b = by.get(r["below"] or "")
        if not b:
            continue
        for k, src in (("added_ns", "latency_ns"), ("added_hw_ns", "hw_ns"), ("added_sw_ns", "sw_ns")):
            if r[src] is not None and b[src] is not None:
                r[k] = round(r[src] - b[src], 1)
    return rows


# ------------------------------------------------------------------------------------------
# Table, plot
# ------------------------------------------------------------------------------------------

def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(rows: list[dict], backends: Iterable[str] = msg.BACKENDS, skipped: dict[str, str] | None = None) -> str:
    head = (f"{'layer':8s} {'latency_ns':>10s} {'(hw + sw)':>17s} {'added_ns':>9s} {'(hw + sw)':>15s} {'over':>6s} "
            f"{'MB/s':>8s}   {'ParaStation:':>12s} {'us':>6s} {'added':>6s} {'MB/s':>6s}")
    out = [f"protocol hierarchy (ParaStation's Table 3): latency one way, {LAT_BYTES} B ping-pong; "
           f"bandwidth, stream of {BW_BYTES >> 20} MiB messages",
           head, "-" * len(head)]
    for r in rows:
        hs = f"{_f(r['hw_ns'])} + {_f(r['sw_ns'])}" if not r["native_only"] else "(native)"
        ps = r["parastation_layer"] or ""
        ad = f"{_f(r['added_hw_ns'])} + {_f(r['added_sw_ns'])}" if r["added_ns"] is not None else ""
        out.append(f"{r['layer']:8s} {_f(r['latency_ns']):>10s} {hs:>17s} {_f(r['added_ns']):>9s} {ad:>15s} "
                   f"{r['below'] or '':>6s} {_f(r['MBps']):>8s}   {ps:>12s} "
                   f"{_f(r['parastation_latency_us'], '{:.2f}'):>6s} {_f(r['parastation_added_us'], '{:.2f}'):>6s} "
                   f"{_f(r['parastation_MBps']):>6s}")
    out.append("(spread of the latency, medians above: sw runs fastest..slowest (n runs); hw iterations "
               "p10..p90 [fastest..slowest] (n); best = the fastest runs' latency)")
    for r in rows:
        parts = []
        for be, sp in sorted((r.get("runs") or {}).items()):
            pp = sp["pingpong_ns"]
            it = sp.get("pingpong_iterations")
            if it:
                parts.append(f"{be} {it['p10']:.1f}..{it['p90']:.1f} [{it['min']:.1f}..{it['max']:.1f}] "
                             f"(n={it['samples']})")
            else:
                parts.append(f"{be} {pp['min']:.1f}..{pp['max']:.1f} (n={pp['runs']})")
        if parts:
            out.append(f"  {r['layer']:8s} {'; '.join(parts)}; best {_f(r.get('best_latency_ns'))}")
    for x in LAYERS:
        if not x.measure:
            out.append(f"{x.name:8s} {'not yet':>10s}   ({x.title})")
    for name, why in (skipped or {}).items():
        out.append(f"{name:8s} {'skipped':>10s}   ({why})")
    be = sorted(backends)
    what = {("sim", "sw"): "hw_ns (simulated cluster, hardware path) + sw_ns (natively, sw backend)",
            ("sim",): "hw_ns only (simulated cluster, hardware path); os-tcp natively",
            ("sw",): "sw_ns only (natively, sw backend)"}[tuple(be)]
    out.append(f"(latency_ns: {what};")
    out.append(" added_ns: over the layer it is built on ('over'); MB/s: from max(hw, sw) per message;")
    out.append(" ParaStation: Table 3, 1997 PC (Pentium); os-tcp beside its socket-to-itself row over the OS's TCP)")
    return "\n".join(out)


def plot(rows: list[dict], path: str) -> None:
    plt = plots.pyplot()
    if not rows:
        raise ValueError("no rows to plot")
    names = [r["layer"] for r in rows]
    x = list(range(len(rows)))
    fig, (ax_l, ax_a, ax_b) = plt.subplots(1, 3, figsize=(17, 4.8))
    w = 0.2
    series_l = [("hw (sim)", "hw_ns", "tab:blue"), ("sw (native)", "sw_ns", "tab:orange"),
                ("total", "latency_ns", "tab:green")]
    for k, (label, key, color) in enumerate(series_l):
        ax_l.bar([i + (k - 1.5) * w for i in x], [(r[key] or 0) / 1e3 for r in rows], w, label=label, color=color)
    ax_l.bar([i + 1.5 * w for i in x], [r["parastation_latency_us"] or 0 for r in rows], w, color="gray",
             label="ParaStation 1997")
    series_a = [("hw (sim)", "added_hw_ns", "tab:blue"), ("sw (native)", "added_sw_ns", "tab:orange"),
                ("total", "added_ns", "tab:green")]
    for k, (label, key, color) in enumerate(series_a):   # log scale: a difference <= 0 draws no bar
        ax_a.bar([i + (k - 1.5) * w for i in x], [max(r[key] or 0, 0) / 1e3 for r in rows], w, label=label,
                 color=color)
    ax_a.bar([i + 1.5 * w for i in x], [r["parastation_added_us"] or 0 for r in rows], w, color="gray",
             label="ParaStation 1997")
    series_b = [("hw (sim)", "hw_MBps", "tab:blue"), ("sw (native)", "sw_MBps", "tab:orange"),
                ("total", "MBps", "tab:green")]
    for k, (label, key, color) in enumerate(series_b):
        ax_b.bar([i + (k - 1.5) * w for i in x], [r[key] or 0 for r in rows], w, label=label, color=color)
    ax_b.bar([i + 1.5 * w for i in x], [r["parastation_MBps"] or 0 for r in rows], w, color="gray",
             label="ParaStation 1997")
    below = [f"{r['layer']}\nover {r['below']}" if r["below"] else r["layer"] for r in rows]
    for ax, yl, t, ticks in ((ax_l, "µs one way", f"latency ({LAT_BYTES} B ping-pong)", names),
                             (ax_a, "µs added", "latency added over the layer below", below),
                             (ax_b, "MB/s", f"bandwidth (stream of {BW_BYTES >> 20} MiB messages)", names)):
        plots.log_axis(ax, yl, t, ticks=ticks, legend_size=7)
    plots.save(fig, path, "ParaNIC protocol hierarchy (ParaStation's Table 3): hardware path in the Verilator "
               "cluster (125 MHz, PCIe model) + native software")


# ------------------------------------------------------------------------------------------
# Command line (cli.py: `paranic bench layers`)
# ------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layers", default=None, metavar="a,b,...",
                   help=f"layers: {', '.join(READY)} (default: all of them); not yet: {', '.join(NOT_YET)}")


def run(a: argparse.Namespace) -> int:
    try:
        layers = parse_layers(a.layers)
    except ValueError as e:
        print(f"paranic bench layers: {e}", file=sys.stderr)
        return 2
    backends = ("sim", "sw") if a.backend == "both" else (a.backend,)
    skipped = skipped_layers(layers)
    t0 = time.time()
    try:
        with msg.Session(quick=a.quick, model=getattr(a, "model", None)) as sess:
            rows = measure_layers(sess, layers, backends)
    except (ValueError, msg.BenchError, TimeoutError) as e:
        print(f"paranic bench layers: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({"bench": "layers", "rows": rows, "not_yet": list(NOT_YET), "skipped": skipped,
                          "config": {"backend": a.backend, "quick": a.quick, "model": getattr(a, "model", None) or S.DEFAULT_MODEL, "latency_bytes": LAT_BYTES,
                                     "bandwidth_bytes": BW_BYTES, "clock_mhz": P.TARGET_CLK_HZ / 1e6,
                                     "seconds": round(time.time() - t0, 1)}}))
    else:
        print(table(rows, backends, skipped))
    return plots.write(plot, rows, a.plot, "paranic bench layers") if a.plot else 0
