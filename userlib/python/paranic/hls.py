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

from paranic.paths import BUILD_ROOT, TREE
from paranic.sim.hlsenv import (COMMON_HEADERS, CXXFLAGS, HLS_DIR, HLS_SOLUTION, HlsError, ap_types_dir,
                                 hls_project, hls_work_dir, include_dirs)
from paranic.spec import kernels as K
from paranic.spec import protocol as P
from paranic.spec.topo import Topology

KERNELS = ("route", "collective")
#: Sources of each kernel (the top's file first) and of its testbench.
SOURCES = {"route": ("route.cpp", "route.h"), "collective": ("collective.cpp", "collective.h")}
TESTBENCH = {"route": "route_tb.cpp", "collective": "collective_tb.cpp"}
#: Headers the testbenches include beside the kernel's (the collective's model cluster,
#: shared with tests/hls/collective_replay.cpp).
TB_HEADERS = {"route": (), "collective": ("collective_model.h",)}
BUILD = BUILD_ROOT / "hls"
#: Source folder of the kernels, and their g++ environment (shared with the cluster
#: simulator's harness, which compiles the collective kernel's C++ into its nodes).
HLS = HLS_DIR


def build_tb(kernel: str) -> Path:
    """The kernel's C-simulation testbench, built (cached by a hash of its inputs)."""
    if kernel not in KERNELS:
        raise HlsError(f"unknown kernel {kernel!r}: one of {', '.join(KERNELS)}")
    d = HLS / kernel
    srcs = [d / s for s in SOURCES[kernel] + TB_HEADERS[kernel] + (TESTBENCH[kernel],)]
    deps = srcs + list(COMMON_HEADERS)
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
            r = a + b                       # integers wrap; floats: IEEE, one rounding
        if r.dtype.kind == "f":             # a NaN sum is the canonical NaN (COLL_F32/F64_QNAN)
            qnan = K.COLL_F32_QNAN if r.dtype.itemsize == 4 else K.COLL_F64_QNAN
            r = np.where(np.isnan(r), np.array([qnan], dtype=f"<u{r.dtype.itemsize}").view(r.dtype), r)
        return r
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


def a2a_fold(items: list, combine):
    """The all-to-all fold's order (docs/hls.md, "All-to-all"): the pairwise tree over
    member index. Level 1 combines ``(x0, x1), (x2, x3), ...``; each next level pairs the
    last one's results in order, an odd one out passing up unchanged, until one is left."""
    level = list(items)
    while len(level) > 1:
        level = [combine(level[k], level[k + 1]) if k + 1 < len(level) else level[k]
                 for k in range(0, len(level), 2)]
    return level[0]


def a2a_reduce_ref(vectors: list[bytes], dtype: K.CollType, red: K.CollRed) -> bytes:
    """The combined vector of an all-to-all ALLREDUCE (header bit ``a2a``): every node
    folds all vectors in :func:`a2a_fold`'s order."""
    np = _np()
    return a2a_fold([np.frombuffer(v, dtype=NP_TYPES[dtype]).copy() for v in vectors],
                    lambda a, b: combine_ref(a, b, red)).tobytes()


def a2a_chain_ref(vectors: list[bytes], dtype: K.CollType, red: K.CollRed) -> bytes:
    """The left-to-right fold ``((v0 op v1) op v2) ... op v(n-1)``: the all-to-all order
    before the pairwise tree (tests show the two differ, so a check sees which ran)."""
    np = _np()
    acc = np.frombuffer(vectors[0], dtype=NP_TYPES[dtype]).copy()
    for v in vectors[1:]:
        acc = combine_ref(acc, np.frombuffer(v, dtype=NP_TYPES[dtype]), red)
    return acc.tobytes()


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
    a2a: bool = False    #: all-to-all (ALLREDUCE only): header bit a2a

    def header(self, node: int) -> dict[str, int]:
        h = dict(op=int(self.op), dtype=int(self.dtype), red=int(self.red), root=self.root,
                 nodes=len(self.vectors), nbytes=len(self.vectors[node]), episode=self.episode & 0xFFFF,
                 a2a=int(self.a2a))
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
    """What the kernel gave each node's host, by episode: (header fields, vector bytes)."""

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
            for rs in cur.values():      # results may overtake one another: by episode
                rs.sort(key=lambda r: r[0]["episode"])
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
        elif o.a2a:
            vec = a2a_reduce_ref(o.vectors, o.dtype, o.red)
        else:
            vec = reduce_ref(o.vectors, o.root, o.dtype, o.red, c.radix_log2)
        for n in range(c.nodes):
            h = o.header(n)
            h.update(phase=int(K.CollPhase.DOWN), err=0, refused=0, rsvd=0,
                     nodata=int(o.op == K.CollOp.REDUCE and n != o.root))
            h["root"], h["nbytes"] = o.root, len(vec)
            exp[n].append((h, b"" if h["nodata"] else vec))
    for rs in exp.values():
        rs.sort(key=lambda r: r[0]["episode"])
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


def a2a_cases(seed: int = 1, sizes: tuple[int, ...] = (1, 2, 3, 5, 8, 13, 16, 32)) -> list[CollCase]:
    """All-to-all ALLREDUCEs: every type x reduction x size, each on a random cluster
    (node counts from ``sizes``, up to COLL_A2A_MAX_NODES)."""
    rng = random.Random(seed)
    out = []
    for dtype in K.CollType:
        esz = K.COLL_TYPE_BYTES[dtype]
        for red in [r for r in K.CollRed if dtype in (K.CollType.I32, K.CollType.I64) or r < K.CollRed.AND]:
            for nbytes in (0, esz, 8, 64, 248, K.COLL_MAX_BYTES):
                if nbytes % esz:
                    continue
                n = rng.choice(sizes)
                vecs = [random_vector(rng, dtype, nbytes) for _ in range(n)]
                o = CollOpCase(K.CollOp.ALLREDUCE, dtype, red, rng.randrange(n), vecs, rng.getrandbits(16), a2a=True)
                out.append(CollCase(n, rng.randint(0, K.COLL_MAX_RADIX_LOG2), rng.getrandbits(31), [o]))
    return out


def sequence_cases(count: int, seed: int = 2, ops_per_case: int = 6, a2a: float = 0.0) -> list[CollCase]:
    """Clusters running several operations back to back (mixed kinds, types, roots),
    each host entering its next one as soon as it has its last result; with ``a2a``,
    that fraction of the ALLREDUCEs all-to-all (the draws for the others unchanged)."""
    rng = random.Random(seed)
    arng = random.Random(seed + 1)
    out = []
    for _ in range(count):
        n = rng.randint(1, 16)
        ops = []
        for e in range(ops_per_case):
            op = rng.choice(list(K.CollOp))
            dtype = rng.choice(list(K.CollType))
            ints = dtype in (K.CollType.I32, K.CollType.I64)
            red = rng.choice([r for r in K.CollRed if ints or r < K.CollRed.AND])
            esz = K.COLL_TYPE_BYTES[dtype]
            nbytes = esz * rng.randint(0, K.COLL_MAX_BYTES // esz)
            ops.append(CollOpCase(op, dtype, red, rng.randrange(n),
                                  [random_vector(rng, dtype, nbytes) for _ in range(n)], e,
                                  a2a=op == K.CollOp.ALLREDUCE and arng.random() < a2a))
        out.append(CollCase(n, rng.randint(0, K.COLL_MAX_RADIX_LOG2), rng.getrandbits(31), ops))
    return out


# ---------------------------------------------------------------------------
# The flow: `make hls`
# ---------------------------------------------------------------------------

#: Nodes of the 64x64 torus whose every destination the csim checks (corners, middle).
TORUS64_NODES = (0, 1, 63, 64, 2080, 4095)


def flow_route_cases() -> list[RouteCase]:
    """ring:8 and torus:4x4 whole, torus:64x64 from a few nodes to every destination
    (beyond the table: the fallback), and two 64x64 nodes with a table of DROPs."""
    t64 = Topology.torus(64, 64)
    return (route_vectors(Topology.ring(8)) + route_vectors(Topology.torus(4, 4)) +
            route_vectors(t64, list(TORUS64_NODES)) + route_vectors(t64, [0, 2080], poison=True))


def flow_collective_cases() -> list[CollCase]:
    return sweep_cases(1) + sequence_cases(20) + a2a_cases(1) + sequence_cases(10, seed=4, a2a=0.7)


def write_vectors(kernel: str) -> tuple[Path, str]:
    """The kernel's self-checking vectors file, and a description of its contents."""
    BUILD.mkdir(parents=True, exist_ok=True)
    path = BUILD / f"{kernel}_vectors.txt"
    if kernel == "route":
        cases = flow_route_cases()
        path.write_text(route_stdin(cases, expect=True))
        what = f"{sum(len(c.dsts) for c in cases)} queries: ring:8, torus:4x4, torus:64x64 (fallback), DROP tables"
    else:
        cc = flow_collective_cases()
        path.write_text(coll_stdin(cc, expect=True))
        what = (f"{len(cc)} clusters, {sum(len(c.ops) for c in cc)} operations: every op x type x "
                f"reduction x size, and sequences")
    return path, what


def vitis_command() -> list[str] | None:
    """How to run a run_hls.tcl here: ``vitis_hls -f`` or (Vitis 2024.2+) ``vitis-run
    --mode hls --tcl``; None when neither is on PATH."""
    if shutil.which("vitis_hls"):
        return ["vitis_hls", "-f"]
    if shutil.which("vitis-run"):
        return ["vitis-run", "--mode", "hls", "--tcl"]
    return None


def csim(kernel: str, vectors: Path) -> None:
    exe = build_tb(kernel)
    r = subprocess.run([str(exe), str(vectors)], capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise HlsError(f"{kernel}: C simulation failed ({exe.name} exit {r.returncode}):\n{r.stderr[-3000:]}")


def vitis_env(kernel: str, vectors: Path) -> dict[str, str]:
    """The environment hls/flow.tcl reads (see its head)."""
    return dict(os.environ, PN_TREE=str(TREE), PN_HLS_VECTORS=str(vectors),
                PN_HLS_PROJECT=hls_project(kernel), PN_HLS_SOLUTION=HLS_SOLUTION)


def run_vitis(kernel: str, vectors: Path, cmd: list[str]) -> Path:
    work = hls_work_dir(kernel)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "vitis.log"
    env = vitis_env(kernel, vectors)
    with open(log, "w") as f:
        r = subprocess.run(cmd + [str(HLS / kernel / "run_hls.tcl")], cwd=work, env=env,
                           stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        raise HlsError(f"{kernel}: {' '.join(cmd)} run_hls.tcl failed (exit {r.returncode}); see {log}")
    return work


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paranic.hls", description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=list(KERNELS), help=f"kernels (default: {' '.join(KERNELS)})")
    ap.add_argument("--csim-only", action="store_true", help="C simulation only, even where Vitis is installed")
    a = ap.parse_args(argv)
    try:
        bad = [k for k in a.kernels if k not in KERNELS]
        if bad:
            raise HlsError(f"unknown kernel {', '.join(bad)}: one of {', '.join(KERNELS)}")
        _, where = ap_types_dir()
        vitis = None if a.csim_only else vitis_command()
        for k in a.kernels:
            vectors, what = write_vectors(k)
            csim(k, vectors)
            print(f"hls: {k}: C simulation (g++, headers: {where}) passed: {what}", flush=True)
            if vitis:
                work = run_vitis(k, vectors, vitis)
                print(f"hls: {k}: Vitis flow ({' '.join(vitis)} hls/{k}/run_hls.tcl): csim, csynth, "
                      f"cosim and IP export passed; reports and IP in {work / hls_project(k) / HLS_SOLUTION}")
        if not vitis:
            why = "--csim-only given" if a.csim_only else "neither vitis_hls nor vitis-run is on PATH"
            print(f"hls: Vitis HLS flow not run ({why}). With Vitis, `make hls` runs for each kernel "
                  f"`vitis_hls -f hls/<kernel>/run_hls.tcl` in build/hls/<kernel>: csim, csynth, "
                  f"cosim and IP export (the IP RouteUnit(vitis=True) instantiates).")
    except HlsError as e:
        print(f"hls: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
