"""The collective kernel's C++/Migen agreement: the same input message sequences into the
C++ kernel (``collective_replay.cpp``, built with the csim benches' flags) and into the
Migen core (``CollectiveTop`` Verilated with ``collective_vtb.cpp``), every output word
compared (docs/hls.md, "The Migen twin").

Sequences are recorded from the C++ model cluster (``collective_replay cluster``: each
node's input messages in the order its kernel took them), optionally with random messages
mixed in (:func:`add_noise`): packets that fit no slot, random headers, odd lengths; and
made up for single nodes of trees too big to simulate (:func:`big_tree_sequences`).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from paranic import hls
from paranic.sim.hlsenv import COMMON_HEADERS
from paranic.paths import BUILD_ROOT
from paranic.spec import kernels as K
from paranic.spec import protocol as P

HERE = Path(__file__).resolve().parent
REPLAY_SRC = HERE / "collective_replay.cpp"
VTB_SRC = HERE / "collective_vtb.cpp"
KERNEL_SRCS = [hls.HLS / "collective" / s for s in hls.SOURCES["collective"]]
TOP = "collective_migen"


@dataclass
class Seq:
    """One node's input messages: (kind 'h' or 'n', words)."""

    node: int
    radix_log2: int
    msgs: list[tuple[str, list[int]]]


def _hash(paths, extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:12]


def build_replay() -> Path:
    """The C++ driver, with the kernel's sources, as the csim testbench is built."""
    cxx = os.environ.get("CXX") or "g++"
    deps = KERNEL_SRCS + [hls.HLS / "collective" / h for h in hls.TB_HEADERS["collective"]] + [REPLAY_SRC, *COMMON_HEADERS]
    key = _hash(deps, " ".join([cxx, *hls.CXXFLAGS, *hls.include_dirs()]))
    out = BUILD_ROOT / "hls" / f"collective_replay-{key}"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    cmd = [cxx, *hls.CXXFLAGS, *hls.include_dirs(), "-I", str(hls.HLS / "collective"), "-o", str(tmp),
           str(REPLAY_SRC), str(KERNEL_SRCS[0])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"building collective_replay failed:\n{' '.join(cmd)}\n{r.stderr[-4000:]}")
    os.replace(tmp, out)
    return out


def build_migen() -> Path:
    """The Verilated CollectiveTop with its harness (cached by the Verilog and the harness)."""
    from paranic.hw.collective_core import CollectiveTop
    from paranic.sim.hdl import setup_verilator_env, write_verilog
    from paranic.sim.paths import build_lock

    d = BUILD_ROOT / "sim" / TOP
    top = CollectiveTop()
    v = write_verilog(top, top.ios, TOP, d / "verilog")
    flags = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-UNOPTFLAT",
             "--x-assign", "0", "--x-initial", "0", "-O3"]
    key = _hash([v, VTB_SRC], " ".join(flags))
    exe = d / f"collective_vtb-{key}"
    with build_lock(f"verilator-{TOP}"):
        if exe.exists():
            return exe
        setup_verilator_env()
        obj = d / f"obj-{key}"
        if obj.exists():
            shutil.rmtree(obj)
        cmd = ["verilator", "--cc", str(v), "--top-module", TOP, "--exe", str(VTB_SRC), *flags,
               "--Mdir", str(obj), "-o", exe.name, "--build", "-j", "2",
               "-MAKEFLAGS", "OPT_FAST=-O1 OPT_SLOW=-O1 OPT_GLOBAL=-O1"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"building the Migen core's harness failed:\n{' '.join(cmd)}\n{r.stderr[-4000:]}")
        shutil.copy2(obj / exe.name, exe)
        shutil.rmtree(obj, ignore_errors=True)
    return exe


# Sequences ------------------------------------------------------------------------------


def record(cases: list[hls.CollCase]) -> list[Seq]:
    """Every node's input messages while the C++ model cluster runs ``cases``."""
    r = subprocess.run([str(build_replay()), "cluster"], input=hls.coll_stdin(cases),
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(f"collective_replay cluster: exit {r.returncode}: {r.stderr[-2000:]}")
    out: list[Seq] = []
    for ln in r.stdout.splitlines():
        f = ln.split()
        if f[0] == "seq":
            out.append(Seq(int(f[1]), int(f[2]), []))
        else:
            out[-1].msgs.append((f[0], [int(w, 16) for w in f[2:]]))
    return out


def seq_text(seqs: list[Seq]) -> str:
    lines = []
    for s in seqs:
        lines.append(f"seq {s.node} {s.radix_log2}")
        lines += [f"{k} {len(ws)} " + " ".join(f"{w:x}" for w in ws) for k, ws in s.msgs]
    return "\n".join(lines) + "\n"


def run_cpp(seqs: list[Seq]) -> list[str]:
    r = subprocess.run([str(build_replay()), "replay"], input=seq_text(seqs),
                       capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"collective_replay replay: exit {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout.splitlines()


def run_migen(seqs: list[Seq], stall_seed: int = 0, cycles: Path | None = None) -> list[str]:
    args = [str(build_migen()), str(stall_seed)] + ([str(cycles)] if cycles else [])
    r = subprocess.run(args, input=seq_text(seqs), capture_output=True, text=True, timeout=3600)
    if r.returncode:
        raise RuntimeError(f"collective_vtb: exit {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout.splitlines()


def disagreements(seqs: list[Seq], cpp: list[str], mig: list[str], limit: int = 5) -> list[str]:
    """Messages whose outputs differ (empty: every output word agrees)."""
    where = [(s.node, s.radix_log2, k, ws) for s in seqs for k, ws in s.msgs]
    out = []
    if not (len(cpp) == len(mig) == len(where)):
        out.append(f"{len(where)} messages, {len(cpp)} C++ outputs, {len(mig)} Migen outputs")
    for n, (a, b) in enumerate(zip(cpp, mig)):
        if a != b and len(out) < limit:
            node, radix, k, ws = where[n]
            out.append(f"message {n} (node {node} radix {radix} {k} {' '.join(f'{w:x}' for w in ws[:4])} ..):"
                       f"\n  C++:   {a[:300]}\n  Migen: {b[:300]}")
    return out


# Inputs ---------------------------------------------------------------------------------

F32_SPECIAL = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x80800000,
               0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
               0x7FA00000, 0xFFFFFFFF, 0x3F800000, 0xBF800000, 0x33800000, 0x34000000]
F64_SPECIAL = [0, 1 << 63, 1, (1 << 63) | 1, (1 << 52) - 1, 1 << 52, (1 << 63) | (1 << 52),
               0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000,
               0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF4000000000000,
               0xFFFFFFFFFFFFFFFF, 0x3FF0000000000000, 0xBFF0000000000000, 0x3CA0000000000000,
               0x3CB0000000000000]


def edgy_float(rng: random.Random, bits: int) -> int:
    """Float bits hard on an adder: specials, subnormals, random bits, extreme exponents."""
    ebits, mbits = (8, 23) if bits == 32 else (11, 52)
    r = rng.random()
    if r < 0.15:
        return rng.choice(F32_SPECIAL if bits == 32 else F64_SPECIAL)
    if r < 0.3:                                         # subnormal
        return (rng.getrandbits(1) << (bits - 1)) | rng.getrandbits(mbits)
    if r < 0.5:                                         # any bits
        return rng.getrandbits(bits)
    if r < 0.6:                                         # near the top
        e = (1 << ebits) - 2 - rng.randrange(3)
        return (rng.getrandbits(1) << (bits - 1)) | (e << mbits) | rng.getrandbits(mbits)
    if r < 0.7:                                         # near the bottom
        e = 1 + rng.randrange(3)
        return (rng.getrandbits(1) << (bits - 1)) | (e << mbits) | rng.getrandbits(mbits)
    fmt = "<f" if bits == 32 else "<d"
    v = rng.choice((-1, 1)) * rng.random() * 10.0 ** rng.randint(-6, 6)
    return int.from_bytes(struct.pack(fmt, v), "little")


def edgy_vectors(rng: random.Random, dtype: K.CollType, nbytes: int, n: int) -> list[bytes]:
    """``n`` vectors; for floats often one vector's negation (cancellations) or a copy
    with its low bits changed (near-cancellations and ties) of another node's."""
    esz = K.COLL_TYPE_BYTES[dtype]
    count = nbytes // esz
    if dtype in (K.CollType.I32, K.CollType.I64):
        return [bytes(rng.getrandbits(8) for _ in range(nbytes)) for _ in range(n)]
    bits = 8 * esz
    base = [[edgy_float(rng, bits) for _ in range(count)] for _ in range(n)]
    for v in range(1, n):
        for e in range(count):
            r = rng.random()
            src = base[rng.randrange(v)][e]
            if r < 0.25:
                base[v][e] = src ^ (1 << (bits - 1))
            elif r < 0.4:
                base[v][e] = (src ^ (1 << (bits - 1))) ^ rng.getrandbits(rng.randint(1, 4))
            elif r < 0.5:
                base[v][e] = src ^ rng.getrandbits(rng.randint(1, 6))
    return [b"".join(x.to_bytes(esz, "little") for x in vec) for vec in base]


def random_cases(rng: random.Random, count: int, max_nodes: int = 16, ops: int = 4,
                 errors: float = 0.15, a2a: float = 0.0) -> list[hls.CollCase]:
    """Clusters running ``ops`` random operations each (kinds, types, reductions, sizes,
    roots; fan-out 1, 2, 4 and radix_log2 3, which the kernel takes as 2); some with a
    node's header disagreeing or its arguments bad (``errors``: the fraction of ops);
    ``a2a``: the fraction of ALLREDUCEs all-to-all."""
    out = []
    for _ in range(count):
        n = rng.randint(1, max_nodes)
        opl = []
        for e in range(ops):
            op = rng.choice(list(K.CollOp))
            dtype = rng.choice(list(K.CollType))
            ints = dtype in (K.CollType.I32, K.CollType.I64)
            red = rng.choice([r for r in K.CollRed if ints or r < K.CollRed.AND])
            esz = K.COLL_TYPE_BYTES[dtype]
            nbytes = esz * rng.choice((0, 1, 2, rng.randint(0, K.COLL_MAX_BYTES // esz), K.COLL_MAX_BYTES // esz))
            o = hls.CollOpCase(op, dtype, red, rng.randrange(n), edgy_vectors(rng, dtype, nbytes, n), e)
            if a2a and op == K.CollOp.ALLREDUCE:
                o.a2a = rng.random() < a2a
            if rng.random() < errors:
                bad = rng.randrange(n)
                kind = rng.randrange(7)
                if kind == 0:
                    o.vectors[bad] = o.vectors[bad][:max(0, nbytes - esz)]
                elif kind == 1:
                    o.override[bad] = {"dtype": rng.randrange(4)}
                elif kind == 2:
                    o.override[bad] = {"red": rng.randrange(8)}
                elif kind == 3:     # oversized or misaligned
                    o.vectors = [v + bytes(rng.choice((4, 12, 264 - len(v) if len(v) < 264 else 8)))
                                 for v in o.vectors]
                elif kind == 4:
                    o.override = {m: {"nodes": rng.randint(0, n)} for m in range(n)}
                elif kind == 5:
                    o.override[bad] = {"op": 3}
                else:
                    o.override[bad] = {"episode": (e + 1) & 0xFFFF}
            opl.append(o)
        out.append(hls.CollCase(n, rng.randint(0, 3), rng.getrandbits(31), opl))
    return out


def random_net_packet(rng: random.Random, seqs_msgs: list[list[int]]) -> list[int]:
    """A packet the network should not bring: a recorded one with a field changed, or
    random words; its length field decides its word count."""
    if seqs_msgs and rng.random() < 0.6:
        p = list(rng.choice(seqs_msgs))
        what = rng.randrange(5)
        if what == 0:
            p[0] ^= 1 << rng.randrange(12, 24)          # another source
        elif what == 1:
            p[0] = (p[0] & ~(7 << 36)) | (rng.randrange(8) << 36)   # another type
        elif what == 2 and len(p) > 2:
            p[2] ^= 1 << rng.randrange(64)              # a header bit
        elif what == 3:
            p[0] &= ~(0x3FFF << 40)                     # length 0: no collective header
        else:
            p[0] = (p[0] & ~(0x3FFF << 40)) | (rng.randint(0, 300) << 40)
    else:
        p = [rng.getrandbits(64) & ~(0x3FFF << 40) | (rng.choice((0, 1, 8, 9, 64, 256, 264, 300,
                                                                   rng.randint(0, 0x3FFF))) << 40),
             rng.getrandbits(64), rng.getrandbits(64)]
    length = (p[0] >> 40) & 0x3FFF
    nw = (length + 7) >> 3
    words = p[:2] + (p[2:3] if nw else [])
    words += p[3:3 + max(0, nw - 1)]
    while len(words) < 2 + nw:
        words.append(rng.getrandbits(64))
    return words


def random_host_command(rng: random.Random) -> list[int]:
    h = rng.getrandbits(64)
    nb = (h >> 8) & 0x1FF
    return [h] + [rng.getrandbits(64) for _ in range((nb + 7) >> 3)]


def add_noise(rng: random.Random, seqs: list[Seq], rate: float) -> list[Seq]:
    """Each sequence with random messages (:func:`random_net_packet`,
    :func:`random_host_command`) mixed in at about ``rate`` per message."""
    pkts = [ws for s in seqs for k, ws in s.msgs if k == "n"]
    out = []
    for s in seqs:
        msgs = []
        for m in s.msgs:
            while rng.random() < rate:
                msgs.append(("n", random_net_packet(rng, pkts)) if rng.random() < 0.7
                            else ("h", random_host_command(rng)))
            msgs.append(m)
        out.append(Seq(s.node, s.radix_log2, msgs))
    return out


def _sub_mod(a: int, b: int, n: int) -> int:
    """The C++ kernel's sub_mod, with its node_t truncation."""
    return (a - b if a >= b else a + n - b) & (P.MAX_NODES - 1)


def _add_mod(a: int, b: int, n: int) -> int:
    return (a + b - n if a + b >= n else a + b) & (P.MAX_NODES - 1)


def _net(src: int, dst: int, h: int, data: list[int]) -> list[int]:
    w0 = P.header_words(dst_node=dst, src_node=src, type=int(P.PacketType.COLLECTIVE),
                        length=8 * (1 + len(data)), flags=int(P.Flags.SOM | P.Flags.EOM))[0]
    return [w0, 0, h] + data


def big_tree_sequences(rng: random.Random, count: int) -> list[Seq]:
    """Single nodes of trees too big to simulate whole: any node id below 4096, ``nodes``
    up to 8191 (where the C++'s 12-bit node_t truncates), the host's command, its children's
    UP packets (in a random order, sometimes one twice) and the parent's DOWN, as the
    kernel's own formulas name them."""
    out = []
    for _ in range(count):
        radix = rng.randint(0, 3)
        k = min(radix, K.COLL_MAX_RADIX_LOG2)
        msgs: list[tuple[str, list[int]]] = []
        node = rng.randrange(P.MAX_NODES)
        for e in range(rng.randint(1, 4)):
            nodes = rng.randint(node + 1, (1 << K.DIM_BITS) - 1)
            root = rng.randrange(min(nodes, P.MAX_NODES))
            dtype = rng.choice(list(K.CollType))
            ints = dtype in (K.CollType.I32, K.CollType.I64)
            red = rng.choice([r for r in K.CollRed if ints or r < K.CollRed.AND])
            op = rng.choice((K.CollOp.REDUCE, K.CollOp.ALLREDUCE))
            nbytes = K.COLL_TYPE_BYTES[dtype] * rng.randint(0, K.COLL_MAX_BYTES // K.COLL_TYPE_BYTES[dtype])
            h = dict(op=int(op), dtype=int(dtype), red=int(red), root=root, nodes=nodes, nbytes=nbytes, episode=e)
            vec = lambda: P.bytes_to_words(b"".join(edgy_vectors(rng, dtype, nbytes, 1)))  # noqa: E731
            rel = _sub_mod(node, root, nodes)
            first = (rel << k) + 1
            kids = [_add_mod(first + j, root, nodes) for j in range(1 << k) if first + j < nodes]
            ev = [("h", [K.pack_coll(**h)] + vec())]
            ev += [("n", _net(c, node, K.pack_coll(**h, phase=int(K.CollPhase.UP)), vec())) for c in kids]
            if kids and rng.random() < 0.2:
                ev.append(rng.choice(ev[1:]))
            rng.shuffle(ev)
            msgs += ev
            if rel:
                parent = _add_mod((rel - 1) >> k, root, nodes)
                down = dict(h, phase=int(K.CollPhase.DOWN), nodata=int(op == K.CollOp.REDUCE))
                msgs.append(("n", _net(parent, node, K.pack_coll(**down), [] if down["nodata"] else vec())))
        out.append(Seq(node, radix, msgs))
    return out


def messages(seqs: list[Seq]) -> int:
    return sum(len(s.msgs) for s in seqs)


# Figures (docs/hls.md): `python tests/hls/collagree.py` ----------------------------------


def read_cycles(path: Path) -> list[tuple[str, int, int]]:
    """The harness's cycles file: (kind, words in, cycles) per message."""
    out = []
    for ln in Path(path).read_text().splitlines():
        k, nw, c = ln.split()
        out.append((k, int(nw), int(c)))
    return out


def _stats(xs: list[int]) -> str:
    xs = sorted(xs)
    return f"median {xs[len(xs) // 2]}, min {xs[0]}, max {xs[-1]}, n {len(xs)}"


def completion_latency(dtype: K.CollType, red: K.CollRed, episodes: int = 20, seed: int = 1) -> list[int]:
    """Cycles of the message that completes an ALLREDUCE of 256 bytes at the root of a
    5-node tree of fan-out 4 (its last child's UP packet or its host's command, whichever
    came last): read it, combine 32 words x 4 children, deliver, send DOWN to 4 children."""
    import tempfile
    rng = random.Random(seed)
    ops = [hls.CollOpCase(K.CollOp.ALLREDUCE, dtype, red, 0,
                          [hls.random_vector(rng, dtype, K.COLL_MAX_BYTES) for _ in range(5)], e)
           for e in range(episodes)]
    root = record([hls.CollCase(5, 2, seed, ops)])[0]
    with tempfile.TemporaryDirectory() as d:
        cyc = Path(d) / "cycles"
        outs = run_migen([root], cycles=cyc)
        cycles = read_cycles(cyc)
    return [c for o, (_k, _nw, c) in zip(outs, cycles) if o.split("|")[1].strip()]


def main() -> None:
    import argparse
    import tempfile
    import time
    ap = argparse.ArgumentParser(description="C++/Migen agreement of the collective kernel, and its latencies")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stall", type=int, default=7, help="stall seed of a second Migen run (0: none)")
    a = ap.parse_args()
    for dtype, red in ((K.CollType.I32, K.CollRed.SUM), (K.CollType.I64, K.CollRed.MAX),
                       (K.CollType.F32, K.CollRed.SUM), (K.CollType.F64, K.CollRed.SUM)):
        print(f"completion at the root, ALLREDUCE {dtype.name} {red.name} 256 B, 4 children: "
              f"{_stats(completion_latency(dtype, red))} cycles")
    rng = random.Random(a.seed)
    seqs: list[Seq] = []
    t = time.monotonic()
    while messages(seqs) < a.messages:
        seqs += add_noise(rng, record(random_cases(rng, 200, max_nodes=40, ops=6, a2a=0.5)), 0.05)
        seqs += big_tree_sequences(rng, 300)
    print(f"recorded {messages(seqs)} messages of {len(seqs)} node sequences in {time.monotonic() - t:.1f} s")
    t = time.monotonic()
    cpp = run_cpp(seqs)
    print(f"C++ replay: {time.monotonic() - t:.1f} s")
    with tempfile.TemporaryDirectory() as d:
        cyc = Path(d) / "cycles"
        t = time.monotonic()
        mig = run_migen(seqs, cycles=cyc)
        print(f"Migen (Verilator) replay: {time.monotonic() - t:.1f} s")
        cycles = read_cycles(cyc)
    bad = disagreements(seqs, cpp, mig)
    if a.stall:
        bad += disagreements(seqs, cpp, run_migen(seqs, stall_seed=a.stall))
    print("agreement:", "every output word" if not bad else "\n".join(bad))
    out_words = [len(o.replace("|", " ").split()) - 1 for o in mig]
    for kind, name in (("h", "host commands"), ("n", "network packets")):
        sel = [(c, nw, ow) for (k, nw, c), ow in zip(cycles, out_words) if k == kind]
        print(f"{name}: cycles {_stats([c for c, _, _ in sel])}; "
              f"cycles - words in - words out {_stats([c - nw - ow for c, nw, ow in sel])}")


if __name__ == "__main__":
    main()
