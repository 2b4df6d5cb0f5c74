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
            "-Wno-maybe-uninitialized", "-Wno-uninitialized",
            "-Wno-unused-label",   # HLS loop labels name loops in the synthesis reports
            "-ffp-contract=off"]   # no fused multiply-add: IEEE operations one by one, as in hardware


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


def run_tb(kernel: str, stdin: str, timeout: float = 600, ok: tuple[int, ...] = (0,)) -> str:
    """The testbench's output on ``stdin``; an exit status outside ``ok`` raises."""
    exe = build_tb(kernel)
    r = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=timeout)
    if r.returncode not in ok:
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


def route_stdin(cases: list[RouteCase], expect: bool = False) -> str:
    """The testbench's input; with ``expect`` each query carries its expected port (the
    testbench then checks itself: the form Vitis's csim and cosim run)."""
    lines = []
    for c in cases:
        x, y = c.topo.coords(c.node)
        lines.append(f"topo {c.topo.x} {c.topo.y}")
        lines.append(f"table {x} {y} " + " ".join(map(str, c.table)))
        lines += [f"q {d} {e}" if expect else f"q {d}" for d, e in zip(c.dsts, c.expect)]
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


# ---------------------------------------------------------------------------
# collective: a numpy reference of the defined reduction order, and cases
# ---------------------------------------------------------------------------

#: numpy dtype of each CollType.
NP_TYPES = {K.CollType.I32: "<i4", K.CollType.I64: "<i8", K.CollType.F32: "<f4", K.CollType.F64: "<f8"}


def _np():
    import numpy as np
    return np


def combine_ref(a, b, red: K.CollRed):
    """``a op b`` element-wise, as the kernel does it (numpy arrays of one dtype)."""
    np = _np()
    if red == K.CollRed.SUM:
        with np.errstate(over="ignore", invalid="ignore"):
            return a + b                    # integers wrap; floats: IEEE, one rounding
    if red == K.CollRed.MIN:
        return np.where(b < a, b, a)        # b only when strictly smaller: a's bits otherwise
    if red == K.CollRed.MAX:
        return np.where(b > a, b, a)
    if red == K.CollRed.AND:
        return a & b
    if red == K.CollRed.OR:
        return a | b
    raise ValueError(f"bad reduction {red}")


def reduce_ref(vectors: list[bytes], root: int, dtype: K.CollType, red: K.CollRed,
               radix_log2: int) -> bytes:
    """The combined vector in the kernel's defined order: the k-ary heap over relative ids
    ``(node - root) mod nodes``, each node folding its own vector then its children's
    partials in increasing relative id."""
    np = _np()
    n = len(vectors)

    def partial(rel: int):
        acc = np.frombuffer(vectors[(rel + root) % n], dtype=NP_TYPES[dtype]).copy()
        for c in K.coll_children(rel, n, radix_log2):
            acc = combine_ref(acc, partial(c), red)
        return acc
    return partial(0).tobytes()


@dataclass
class CollOpCase:
    """One operation of a case: every node's vector (and, to provoke errors, per-node
    overrides of header fields)."""

    op: K.CollOp
    dtype: K.CollType
    red: K.CollRed
    root: int
    vectors: list[bytes]
    episode: int = 0
    override: dict[int, dict[str, int]] = field(default_factory=dict)

    def header(self, node: int) -> dict[str, int]:
        h = dict(op=int(self.op), dtype=int(self.dtype), red=int(self.red), root=self.root,
                 nodes=len(self.vectors), nbytes=len(self.vectors[node]), episode=self.episode & 0xFFFF)
        h.update(self.override.get(node, {}))
        return h


@dataclass
class CollCase:
    nodes: int
    radix_log2: int
    seed: int
    ops: list[CollOpCase]


def coll_command(h: dict[str, int], data: bytes) -> list[int]:
    return [K.pack_coll(**h)] + P.bytes_to_words(data)


def coll_stdin(cases: list[CollCase], expect: bool = False) -> str:
    """The testbench's input; with ``expect`` each node's expected results
    (:func:`coll_expected`) too, so the testbench checks itself (Vitis csim, cosim)."""
    out = []
    for c in cases:
        out.append(f"case {c.nodes} {c.radix_log2} {c.seed}")
        for o in c.ops:
            for n in range(c.nodes):
                ws = coll_command(o.header(n), o.vectors[n])
                out.append(f"cmd {n} {len(ws)} " + " ".join(f"{w:x}" for w in ws))
        if expect:
            for n, rs in coll_expected(c).items():
                for h, data in rs:
                    ws = [K.pack_coll(**h)] + P.bytes_to_words(data)
                    out.append(f"exp {n} {len(ws)} " + " ".join(f"{w:x}" for w in ws))
        out.append("run")
    return "\n".join(out) + "\n"


@dataclass
class CollResult:
    """What the kernel gave each node's host, in order: (header fields, vector bytes)."""

    results: dict[int, list[tuple[dict[str, int], bytes]]]
    hangs: list[int]
    events: int


def run_collective(cases: list[CollCase]) -> list[CollResult]:
    text = run_tb("collective", coll_stdin(cases), ok=(0, 1))   # 1: a hang, reported below
    out: list[CollResult] = []
    cur: dict[int, list] = {}
    hangs: list[int] = []
    for ln in text.splitlines():
        f = ln.split()
        if f[0] == "res":
            h = K.unpack_coll(int(f[2], 16))
            data = b"".join(int(w, 16).to_bytes(8, "little") for w in f[3:])[:h["nbytes"]]
            cur.setdefault(int(f[1]), []).append((h, data))
        elif f[0] == "hang":
            hangs.append(int(f[1]))
        elif f[0] == "done":
            out.append(CollResult(cur, hangs, int(f[1])))
            cur, hangs = {}, []
    if len(out) != len(cases):
        raise HlsError(f"{len(out)} results for {len(cases)} cases")
    return out


def coll_expected(c: CollCase) -> dict[int, list[tuple[dict[str, int], bytes]]]:
    """Every node's results for a case whose headers agree and whose arguments are good."""
    exp: dict[int, list] = {n: [] for n in range(c.nodes)}
    for o in c.ops:
        if o.op == K.CollOp.BCAST:
            vec = o.vectors[o.root]
        else:
            vec = reduce_ref(o.vectors, o.root, o.dtype, o.red, c.radix_log2)
        for n in range(c.nodes):
            h = o.header(n)
            h.update(phase=int(K.CollPhase.DOWN), err=0, rsvd=0,
                     nodata=int(o.op == K.CollOp.REDUCE and n != o.root))
            h["root"], h["nbytes"] = o.root, len(vec)
            exp[n].append((h, b"" if h["nodata"] else vec))
    return exp


def random_vector(rng: random.Random, dtype: K.CollType, nbytes: int) -> bytes:
    """Random elements; floats spread over many magnitudes and signs, so the order of a
    sum changes its rounding (and a wrong order shows)."""
    count = nbytes // K.COLL_TYPE_BYTES[dtype]
    if dtype in (K.CollType.I32, K.CollType.I64):
        bits = 8 * K.COLL_TYPE_BYTES[dtype]
        return b"".join(rng.getrandbits(bits).to_bytes(bits // 8, "little") for _ in range(count))
    fmt = "<f" if dtype == K.CollType.F32 else "<d"
    vals = [rng.choice((-1, 1)) * rng.random() * 10.0 ** rng.randint(-6, 6) for _ in range(count)]
    return b"".join(struct.pack(fmt, v) for v in vals)


def sweep_cases(seed: int = 1) -> list[CollCase]:
    """Every operation x type x reduction x size, each on a random cluster (1..16 nodes,
    fan-out 1, 2 or 4, a random root)."""
    rng = random.Random(seed)
    out = []
    for op in K.CollOp:
        for dtype in K.CollType:
            esz = K.COLL_TYPE_BYTES[dtype]
            reds = [K.CollRed.SUM] if op == K.CollOp.BCAST else \
                [r for r in K.CollRed if esz and (dtype in (K.CollType.I32, K.CollType.I64) or r < K.CollRed.AND)]
            for red in reds:
                for nbytes in (0, esz, 8, 64, 248, 252, K.COLL_MAX_BYTES):
                    if nbytes % esz:
                        continue
                    n = rng.choice((1, 2, 3, 5, 8, 13, 16))
                    vecs = [random_vector(rng, dtype, nbytes) for _ in range(n)]
                    o = CollOpCase(op, dtype, red, rng.randrange(n), vecs, rng.getrandbits(16))
                    out.append(CollCase(n, rng.randint(0, K.COLL_MAX_RADIX_LOG2), rng.getrandbits(31), [o]))
    return out
