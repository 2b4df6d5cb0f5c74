"""The HLS kernels' flows (``hls/``, docs/hls.md): C simulation here, Vitis where installed.

``python -m paranic.hls`` (``make hls``) runs, per kernel, the C-simulation testbench
built with g++ against the ap_types headers (:func:`include_dirs`) on vectors from the
spec (:func:`route_vectors`, :func:`collective_cases`), and, when ``vitis_hls`` (or
``vitis-run``) is on PATH, the kernel's ``run_hls.tcl`` (csim, csynth, cosim, IP export).
It prints which flow it ran and why.

Headers: ``$XILINX_HLS/include`` when that variable is set (Vitis's own ap_types and
hls::stream); otherwise the Apache-2.0 ap_types inside the hls4ml wheel (``make deps``
installs it with ``--no-deps``) plus ``hls/csim/hls_stream.h``, ParaNIC's stand-in for
``hls::stream`` (the wheel's copy is not Apache-2.0).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from paranic.paths import BUILD_ROOT, INCLUDE, TREE
from paranic.spec import kernels as K
from paranic.spec import protocol as P
from paranic.spec.topo import Topology

HLS = TREE / "hls"
KERNELS = ("route", "collective")
#: Sources of each kernel (the top's file first) and of its testbench.
SOURCES = {"route": ("route.cpp", "route.h"), "collective": ("collective.cpp", "collective.h")}
TESTBENCH = {"route": "route_tb.cpp", "collective": "collective_tb.cpp"}
BUILD = BUILD_ROOT / "hls"
CXXFLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas",
            # the ap_types headers' own constructors trip these at -O2
            "-Wno-maybe-uninitialized", "-Wno-uninitialized"]


class HlsError(RuntimeError):
    pass


def ap_types_dir() -> tuple[Path, str]:
    """(folder with ap_int.h, where it comes from)."""
    xilinx = os.environ.get("XILINX_HLS")
    if xilinx:
        inc = Path(xilinx) / "include"
        if not (inc / "ap_int.h").exists():
            raise HlsError(f"XILINX_HLS={xilinx} but {inc}/ap_int.h does not exist")
        return inc, f"Vitis HLS ($XILINX_HLS={xilinx})"
    try:
        import importlib.util
        spec = importlib.util.find_spec("hls4ml")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise HlsError("no ap_types headers: set XILINX_HLS, or run `make deps` "
                       "(installs hls4ml --no-deps for its Apache-2.0 ap_types)")
    inc = Path(list(spec.submodule_search_locations)[0]) / "templates" / "vivado" / "ap_types"
    if not (inc / "ap_int.h").exists():
        raise HlsError(f"the hls4ml wheel has no {inc}/ap_int.h")
    return inc, "the hls4ml wheel's Apache-2.0 ap_types, with hls/csim/hls_stream.h"


def include_dirs() -> list[str]:
    """g++ include options: the stream stand-in (without Vitis only), ap_types, our headers."""
    inc, _ = ap_types_dir()
    out = [] if os.environ.get("XILINX_HLS") else ["-I", str(HLS / "csim")]
    return out + ["-isystem", str(inc), "-I", str(HLS / "include"), "-I", str(INCLUDE)]


def build_tb(kernel: str) -> Path:
    """The kernel's C-simulation testbench, built (cached by a hash of its inputs)."""
    if kernel not in KERNELS:
        raise HlsError(f"unknown kernel {kernel!r}: one of {', '.join(KERNELS)}")
    d = HLS / kernel
    srcs = [d / s for s in SOURCES[kernel] + (TESTBENCH[kernel],)]
    deps = srcs + [HLS / "include" / "pn_hls.h", INCLUDE / "paranic" / "pn_protocol.h",
                   HLS / "csim" / "hls_stream.h"]
    cxx = os.environ.get("CXX") or "g++"
    h = hashlib.sha256(" ".join([cxx, *CXXFLAGS, *include_dirs()]).encode())
    for f in deps:
        h.update(f.read_bytes())
    BUILD.mkdir(parents=True, exist_ok=True)
    exe = BUILD / f"{kernel}_tb-{h.hexdigest()[:12]}"
    if exe.exists():
        return exe
    if shutil.which(cxx) is None:
        raise HlsError(f"no C++ compiler {cxx!r} (run `make deps`)")
    tmp = exe.with_suffix(f".tmp{os.getpid()}")
    cmd = [cxx, *CXXFLAGS, *include_dirs(), "-o", str(tmp)] + [str(s) for s in srcs if s.suffix == ".cpp"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise HlsError(f"building the {kernel} testbench failed:\n{' '.join(cmd)}\n{r.stderr[-4000:]}")
    os.replace(tmp, exe)
    return exe


def run_tb(kernel: str, stdin: str, timeout: float = 600) -> str:
    exe = build_tb(kernel)
    r = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise HlsError(f"{exe.name} exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


# ---------------------------------------------------------------------------
# route: vectors from paranic.spec.topo (the C routing function spec/c/pn_route.c)
# ---------------------------------------------------------------------------


@dataclass
class RouteCase:
    """Queries of one node: the table it is loaded with, destinations, expected ports."""

    topo: Topology
    node: int
    table: list[int]
    dsts: list[int]
    expect: list[int]


def route_table(topo: Topology, node: int, poison: bool = False) -> list[int]:
    """The kernel's table for ``node``: the spec's table over the first ROUTE_TABLE_NODES
    destinations, or (``poison``) every entry DROP, to show which answers came from it."""
    if poison:
        return [int(P.Port.DROP)] * K.ROUTE_TABLE_NODES
    return topo.table(node, depth=K.ROUTE_TABLE_NODES)


def route_vectors(topo: Topology, nodes: list[int] | None = None, dsts: list[int] | None = None,
                  poison: bool = False) -> list[RouteCase]:
    """For each of ``nodes`` (default: all) every destination (or ``dsts``), plus one
    past the topology: expected ports from :meth:`Topology.table`. With ``poison`` the
    table is all DROP and the expected port DROP for destinations inside it."""
    out = []
    for n in (range(topo.nodes) if nodes is None else nodes):
        full = topo.table(n, depth=P.MAX_NODES)
        ds = list(range(min(topo.nodes + 1, P.MAX_NODES))) if dsts is None else list(dsts)
        exp = [full[d] if d < P.MAX_NODES else int(P.Port.DROP) for d in ds]
        if poison:
            exp = [int(P.Port.DROP) if d < K.ROUTE_TABLE_NODES else e for d, e in zip(ds, exp)]
        out.append(RouteCase(topo, n, route_table(topo, n, poison), ds, exp))
    return out


def random_route_cases(count: int, seed: int) -> list[RouteCase]:
    """``count`` random (topology, node, destination) queries, grouped by node: rings and
    tori of random shapes up to 4096 nodes, destinations inside the table, beyond it and
    past the topology."""
    rng = random.Random(seed)
    out: list[RouteCase] = []
    left = count
    while left > 0:
        if rng.random() < 0.3:
            topo = Topology.ring(rng.randint(1, 600))
        else:
            x = rng.randint(1, 64)
            topo = Topology.torus(x, rng.randint(2, max(2, P.MAX_NODES // x)))
        node = rng.randrange(topo.nodes)
        k = min(left, rng.randint(1, 64))
        dsts = [rng.randrange(min(topo.nodes + 4, P.MAX_NODES)) for _ in range(k)]
        out += route_vectors(topo, [node], dsts, poison=rng.random() < 0.1)
        left -= k
    return out


def route_stdin(cases: list[RouteCase]) -> str:
    lines = []
    for c in cases:
        x, y = c.topo.coords(c.node)
        lines.append(f"topo {c.topo.x} {c.topo.y}")
        lines.append(f"table {x} {y} " + " ".join(map(str, c.table)))
        lines += [f"q {d}" for d in c.dsts]
    return "\n".join(lines) + "\n"


def run_route(cases: list[RouteCase]) -> list[int]:
    """The C++ kernel's answers to every query of ``cases``, in order."""
    return [int(v) for v in run_tb("route", route_stdin(cases)).split()]


def check_route(cases: list[RouteCase], got: list[int]) -> list[str]:
    """Mismatches between ``got`` and the expected ports (empty: all agree)."""
    exp = [e for c in cases for e in c.expect]
    where = [(c.topo, c.node, d) for c in cases for d in c.dsts]
    if len(got) != len(exp):
        return [f"{len(got)} answers for {len(exp)} queries"]
    return [f"{t} node {n} dst {d}: expected {e}, got {g}"
            for (t, n, d), e, g in zip(where, exp, got) if e != g]
