"""The Verilator cluster simulator: build it (cached) and start/stop it.

``paranic-sim`` is N NicCores (``paranic.hw.cluster``) Verilated into a C++ model and
linked with the harness in ``sim/`` (each node's host: MMIO master, DMA servers with
PCIe latencies, a UNIX socket where processes using libparanic's ``sim`` backend
attach). See ``docs/simulator.md``.

* :func:`build` writes the cluster's Verilog (skipped when the gateware sources did
  not change), Verilates it into ``build/sim/cluster-<topo>-<hash>/`` (``hash`` of the
  Verilog, the CSR map and the Verilator flags; skipped when that directory holds a
  finished model) and compiles the harness against it (again when the harness sources
  changed). Returns the binary's path.
* :func:`start` runs the binary, waits until its links are up and its socket
  listens, and returns a :class:`SimCluster` handle (a context manager; ``stop()``
  sends SIGTERM and waits, the socket and shared-memory file are removed).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import mmap
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from paranic import protocol as P
from paranic.hdlsim import BUILD_ROOT, ROOT, setup_verilator_env
from paranic.topo import Topology

SIM_SRC = ROOT / "sim"
RUN_DIR = BUILD_ROOT / "run"
#: Name of the Verilated model class (``--prefix``).
MODEL = "Vcluster"
#: Verilator flags: the warning set of ``paranic.hdlsim.build_verilator``, no X.
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-UNOPTFLAT",
                   "--x-assign", "0", "--x-initial", "0", "-O3")
#: C++ optimisation of the Verilated model (OPT_FAST: the per-cycle code).
MODEL_MAKE_VARS = ("OPT_FAST=-O2", "OPT_SLOW=-O1", "OPT_GLOBAL=-O2")
HARNESS_CXXFLAGS = ("-std=c++17", "-O2", "-g", "-Wall", "-Wextra", "-Wno-unused-parameter")
#: Default cable delay of the simulated PHYs, in cycles (``NicCluster(phy_delay=)``).
DEFAULT_PHY_DELAY = 8


_TAG = threading.local()  # the topology being built by this thread (log prefix)


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        tag = getattr(_TAG, "value", "")
        print(f"paranic-sim build{' ' + tag if tag else ''}: {msg}", file=sys.stderr, flush=True)


def _sha(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


def topo_tag(topo: Topology) -> str:
    """``ring4``, ``torus4x4``: the topology part of build directory names."""
    return f"torus{topo.x}x{topo.y}" if topo.is_torus else f"ring{topo.x}"


def harness_sources() -> list[Path]:
    """Every file the harness binary is compiled from (besides the generated glue)."""
    files = sorted(SIM_SRC.glob("*.cpp")) + sorted(SIM_SRC.glob("*.h"))
    files += [ROOT / "userlib/src/pn_sim_shm.h", ROOT / "userlib/include/paranic/pn_protocol.h"]
    return files


def _gateware_key(topo: Topology, mtu: int, n_ctx: int, phy_delay: int) -> str:
    """Hash of everything the cluster's Verilog is generated from."""
    import litex
    import migen
    files = sorted((ROOT / "hw").rglob("*.py"))
    files += [ROOT / "userlib/python/paranic" / n for n in ("protocol.py", "topo.py", "hdlsim.py")]
    parts: list[bytes | str] = [str(topo), str(mtu), str(n_ctx), str(phy_delay),
                                getattr(migen, "__version__", "?"), str(Path(litex.__file__).parent)]
    for f in files:
        parts += [str(f.relative_to(ROOT)), f.read_bytes()]
    return _sha(*parts)[:20]


def _verilog(topo: Topology, mtu: int, n_ctx: int, phy_delay: int, quiet: bool) -> tuple[Path, Path, str]:
    """The cluster's Verilog and CSR map (regenerated only when the gateware changed)."""
    from paranic.hw.cluster import cluster_verilog

    name = "cluster_sim"
    out = BUILD_ROOT / "verilog" / f"sim-{topo_tag(topo)}-m{mtu}-c{n_ctx}-d{phy_delay}"
    v, csr = out / f"{name}.v", out / f"{name}.csr.json"
    key = _gateware_key(topo, mtu, n_ctx, phy_delay)
    stamp = out / ".srckey"
    if v.exists() and csr.exists() and stamp.exists() and stamp.read_text() == key:
        return v, csr, name
    _log(f"generating Verilog for {topo} (MTU {mtu}, {n_ctx} contexts)", quiet)
    t0 = time.time()
    v, top, csr = cluster_verilog(topo, out, name=name, n_ctx=n_ctx, mtu=mtu, phy_delay=phy_delay)
    stamp.write_text(key)
    _log(f"Verilog written in {time.time() - t0:.1f} s: {v} ({v.stat().st_size >> 10} KiB)", quiet)
    return v, csr, top


def _run_logged(cmd: Sequence[str], cwd: Path, log: Path, quiet: bool, progress=None,
                env: dict | None = None) -> None:
    """Run ``cmd``, output to ``log``; ``progress(line)`` may print a status line."""
    with open(log, "a") as lf:
        lf.write("$ " + " ".join(cmd) + "\n")
        lf.flush()
        p = subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
        assert p.stdout is not None
        for line in p.stdout:
            lf.write(line)
            if progress:
                progress(line)
        rc = p.wait()
    if rc:
        tail = log.read_text().splitlines()[-30:]
        raise RuntimeError(f"{cmd[0]} failed (exit {rc}); see {log}:\n" + "\n".join(tail))


def _build_model(v: Path, top: str, obj: Path, vhash: str, jobs: int, quiet: bool) -> None:
    stamp = obj / ".stamp"
    if stamp.exists() and stamp.read_text() == vhash and (obj / f"{MODEL}__ALL.a").exists() \
            and (obj / "libverilated.a").exists():
        return
    if obj.exists():
        shutil.rmtree(obj)
    obj.mkdir(parents=True)
    setup_verilator_env()
    log = obj.parent / "build.log"
    t0 = time.time()
    _log(f"verilating {v.name} -> {obj} (log: {log})", quiet)
    _run_logged(["verilator", "--cc", str(v), "--top-module", top, "--prefix", MODEL,
                 "--Mdir", str(obj), *VERILATOR_FLAGS], obj, log, quiet)
    cpps = sorted(p.name for p in obj.glob(f"{MODEL}*.cpp"))
    _log(f"verilated in {time.time() - t0:.0f} s: {len(cpps)} C++ files; compiling with -j{jobs} "
         "(this takes minutes)", quiet)
    done = [0]
    n_total = len(cpps) + 4  # + the verilated runtime

    def progress(line: str) -> None:
        m = re.search(r"-c (?:\S*/)?([\w.]+\.cpp)", line)
        if m:
            done[0] += 1
            _log(f"[{done[0]}/~{n_total}] {m.group(1)} ({time.time() - t0:.0f} s)", quiet)

    _run_logged(["make", "-C", str(obj), "-f", f"{MODEL}.mk", f"-j{jobs}", *MODEL_MAKE_VARS,
                 f"{MODEL}__ALL.a", "libverilated.a"], obj, log, quiet, progress)
    stamp.write_text(vhash)
    _log(f"model built in {time.time() - t0:.0f} s", quiet)


def model_hash(v: Path, csr: Path) -> str:
    """Key of a Verilated model: the Verilog, the CSR map, the flags, the Verilator."""
    from paranic.hdlsim import verilator_root
    return _sha(v.read_bytes(), csr.read_bytes(), " ".join(VERILATOR_FLAGS),
                " ".join(MODEL_MAKE_VARS), str(verilator_root()))[:12]


def _c_ident(s: str) -> str:
    return re.sub(r"\W", "_", s)


def gen_glue(topo: Topology, csr_json: Path, mtu: int, n_ctx: int, out: Path) -> list[Path]:
    """The per-build C++ glue: cluster constants, routing tables, CSR addresses, and a
    function binding each node's ports of the Verilated model."""
    from paranic.hw.link import LinkState
    from paranic.hw.standalone import read_csr_json

    regs = read_csr_json(csr_json)
    table_nodes = 1 << regs["router_route_adr"].size
    out.mkdir(parents=True, exist_ok=True)
    H: list[str] = ["/* GENERATED by paranic.simcluster.gen_glue: do not edit. */",
                    "#pragma once", "#include <cstdint>", "",
                    f"#define SIM_NODES {topo.nodes}", f"#define SIM_TOPO_X {topo.x}",
                    f"#define SIM_TOPO_Y {topo.y}", f'#define SIM_TOPO "{topo}"',
                    f"#define SIM_LINK_PORTS {topo.link_ports}", f"#define SIM_N_CTX {n_ctx}",
                    f"#define SIM_MTU {mtu}", f"#define SIM_TABLE_NODES {table_nodes}",
                    f"#define SIM_LINK_UP {int(LinkState.UP)}", "",
                    "/* CSRs: byte address, size in bits (wide CSRs: 32-bit words, MSW first) */"]
    for name, r in sorted(regs.items(), key=lambda kv: kv[1].addr):
        H.append(f"#define CSR_{_c_ident(name).upper()} 0x{r.addr:x}u")
        H.append(f"#define CSR_{_c_ident(name).upper()}_SIZE {r.size}")
    lo = min(r.addr for r in regs.values())
    hi = max(r.addr + 4 * (r.words - 1) for r in regs.values())
    H += [f"#define SIM_CSR_LO 0x{lo:x}u", f"#define SIM_CSR_HI 0x{hi:x}u",
          "static const uint32_t SIM_LINK_STATE_CSR[SIM_LINK_PORTS] = {"
          + ", ".join(f"CSR_LINK{p}_LINK_STATE" for p in range(topo.link_ports)) + "};"]
    H += ["", "/* routing tables: SIM_ROUTES[node][dst] = port (paranic.topo) */",
          f"static const uint8_t SIM_ROUTES[SIM_NODES][SIM_TABLE_NODES] = {{"]
    for n in range(topo.nodes):
        H.append("\t{" + ", ".join(str(int(p)) for p in topo.table(n, table_nodes)) + "},")
    H += ["};", ""]
    H += ["struct NodePorts;", "class " + MODEL + ";",
          f"void sim_bind_ports({MODEL} *m, NodePorts *p);", ""]
    hdr = out / "cluster_gen.h"
    C = ["/* GENERATED by paranic.simcluster.gen_glue: do not edit. */",
         f'#include "{MODEL}.h"', '#include "harness.h"', "",
         f"void sim_bind_ports({MODEL} *m, NodePorts *p)", "{"]
    fields = [("bus_adr", "bus_adr"), ("bus_dat_w", "bus_dat_w"), ("bus_dat_r", "bus_dat_r"),
              ("bus_sel", "bus_sel"), ("bus_cyc", "bus_cyc"), ("bus_stb", "bus_stb"),
              ("bus_we", "bus_we"), ("bus_ack", "bus_ack"),
              ("rd_valid", "dma_rd_source_valid"), ("rd_ready", "dma_rd_source_ready"),
              ("rd_we", "dma_rd_source_payload_we"), ("rd_adr", "dma_rd_source_payload_adr"),
              ("rd_len", "dma_rd_source_payload_len"),
              ("c_valid", "dma_rd_sink_valid"), ("c_ready", "dma_rd_sink_ready"),
              ("c_first", "dma_rd_sink_first"), ("c_last", "dma_rd_sink_last"),
              ("c_dat", "dma_rd_sink_payload_dat"), ("c_len", "dma_rd_sink_payload_len"),
              ("c_end", "dma_rd_sink_payload_end"), ("c_err", "dma_rd_sink_payload_err"),
              ("c_adr", "dma_rd_sink_payload_adr"),
              ("w_valid", "dma_wr_source_valid"), ("w_ready", "dma_wr_source_ready"),
              ("w_first", "dma_wr_source_first"), ("w_last", "dma_wr_source_last"),
              ("w_we", "dma_wr_source_payload_we"), ("w_adr", "dma_wr_source_payload_adr"),
              ("w_len", "dma_wr_source_payload_len"), ("w_dat", "dma_wr_source_payload_dat")]
    for n in range(topo.nodes):
        for f, port in fields:
            C.append(f"\tp[{n}].{f} = &m->n{n}_{port};")
    C += ["}", ""]
    src = out / "cluster_gen.cpp"
    for path, lines in ((hdr, H), (src, C)):
        text = "\n".join(lines) + "\n"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return [hdr, src]


def _build_harness(bdir: Path, obj: Path, gen: list[Path], vhash: str, quiet: bool) -> Path:
    setup_verilator_env()
    vroot = Path(os.environ["VERILATOR_ROOT"])
    exe = bdir / "paranic-sim"
    srcs = sorted(SIM_SRC.glob("*.cpp"))
    deps = harness_sources() + gen
    key = _sha(vhash, " ".join(HARNESS_CXXFLAGS), *[p.read_bytes() for p in deps])[:20]
    stamp = bdir / ".harness"
    if exe.exists() and stamp.exists() and stamp.read_text() == key:
        return exe
    t0 = time.time()
    _log(f"compiling the harness ({', '.join(s.name for s in srcs)})", quiet)
    inc = [f"-I{obj}", f"-I{vroot / 'include'}", f"-I{vroot / 'include' / 'vltstd'}",
           f"-I{gen[0].parent}", f"-I{SIM_SRC}", f"-I{ROOT / 'userlib/include'}",
           f"-I{ROOT / 'userlib/src'}"]
    objs = []
    hobj = bdir / "hobj"
    hobj.mkdir(exist_ok=True)
    log = bdir / "build.log"
    for s in srcs + [gen[1]]:
        o = hobj / (s.stem + ".o")
        _run_logged(["g++", *HARNESS_CXXFLAGS, *inc, "-c", str(s), "-o", str(o)], bdir, log, quiet)
        objs.append(str(o))
    tmp = exe.with_suffix(".tmp")
    _run_logged(["g++", "-o", str(tmp), *objs, str(obj / f"{MODEL}__ALL.a"),
                 str(obj / "libverilated.a"), "-lpthread", "-latomic"], bdir, log, quiet)
    tmp.replace(exe)
    stamp.write_text(key)
    _log(f"harness built in {time.time() - t0:.0f} s: {exe}", quiet)
    return exe


def _prune(simroot: Path, tag: str, keep: Path, quiet: bool, older_to_keep: int = 1) -> None:
    """Remove superseded builds of a topology (each is ~200 MB): all but the newest
    ``older_to_keep`` besides ``keep``."""
    others = [d for d in simroot.glob(f"cluster-{tag}-*") if d.is_dir() and d != keep]
    others.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    for d in others[older_to_keep:]:
        _log(f"removing superseded build {d.name}", quiet)
        shutil.rmtree(d, ignore_errors=True)


def build(topo: str | Topology = "ring:4", mtu: int = P.DEFAULT_MTU, n_ctx: int = P.DEFAULT_CONTEXTS,
          phy_delay: int = DEFAULT_PHY_DELAY, jobs: int | None = None, quiet: bool = False) -> Path:
    """Build (or reuse) the simulator of ``topo``; returns the ``paranic-sim`` binary.

    Progress goes to stderr (``quiet`` silences it). ``jobs``: parallel compiler jobs
    for the model (default ``$PARANIC_SIM_JOBS`` or 1: the machine is shared).
    Concurrent calls for the same topology wait for each other (a lock file).
    """
    t = topo if isinstance(topo, Topology) else Topology.parse(topo)
    if t.nodes > 16 or (t.is_torus and (t.x > 4 or t.y > 4)):
        raise ValueError(f"{t}: the simulator supports rings up to 16 nodes and tori up to 4x4")
    jobs = jobs or int(os.environ.get("PARANIC_SIM_JOBS", "1"))
    _TAG.value = topo_tag(t)
    simroot = BUILD_ROOT / "sim"
    simroot.mkdir(parents=True, exist_ok=True)
    lock = open(simroot / f"cluster-{topo_tag(t)}.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        v, csr, top = _verilog(t, mtu, n_ctx, phy_delay, quiet)
        vhash = model_hash(v, csr)
        bdir = simroot / f"cluster-{topo_tag(t)}-{vhash}"
        bdir.mkdir(exist_ok=True)
        obj = bdir / "obj"
        _build_model(v, top, obj, vhash, jobs, quiet)
        gen = gen_glue(t, csr, mtu, n_ctx, bdir / "gen")
        shutil.copyfile(csr, bdir / "csr.json")
        exe = _build_harness(bdir, obj, gen, vhash, quiet)
        (bdir / "info.json").write_text(json.dumps(
            {"topo": str(t), "nodes": t.nodes, "mtu": mtu, "n_ctx": n_ctx, "phy_delay": phy_delay,
             "verilog": str(v), "binary": str(exe)}, indent=1))
        _prune(simroot, topo_tag(t), bdir, quiet)
        return exe
    finally:
        lock.close()


# ---------------------------------------------------------------------------------------------
# Running the simulator
# ---------------------------------------------------------------------------------------------

def socket_path(cluster: str | None = None) -> Path:
    """Where the sim backend looks for the simulator of ``cluster`` when
    ``PARANIC_SIM_SOCKET`` is not set: ``build/run/sim-<cluster>.sock``."""
    cluster = cluster or os.environ.get("PARANIC_CLUSTER") or "default"
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", cluster):
        raise ValueError(f"bad cluster name {cluster!r}")
    return RUN_DIR / f"sim-{cluster}.sock"


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child
    import ctypes
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class SimCluster:
    """A running ``paranic-sim`` (returned by :func:`start`)."""

    proc: subprocess.Popen
    socket: Path
    ready_file: Path
    log: Path
    info: dict = field(default_factory=dict)
    _shm: Any = None

    # -- clients ---------------------------------------------------------------------------
    def env(self, base: dict | None = None) -> dict:
        """Environment for processes that should attach to this simulator."""
        e = dict(os.environ if base is None else base)
        e["PARANIC_BACKEND"] = "sim"
        e["PARANIC_SIM_SOCKET"] = str(self.socket)
        return e

    @property
    def nodes(self) -> int:
        return int(self.info["nodes"])

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- the shared clock and trace records ------------------------------------------------
    def _map(self):
        if self._shm is None:
            with open(self.info["shm"], "rb") as f:
                self._shm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._shm

    def cycle(self) -> int:
        """The simulator's cycle counter (rising edges since it started)."""
        return struct.unpack_from("<Q", self._map(), int(self.info["cycle_offset"]))[0]

    def trace(self, node: int, ctx: int) -> dict[str, int]:
        """The trace record of (node, ctx): field -> value (definitions in docs/simulator.md;
        the layout comes from the simulator's ready file)."""
        if not (0 <= node < self.nodes and 0 <= ctx < int(self.info["n_ctx"])):
            raise ValueError(f"no node {node} / context {ctx}")
        m = self._map()
        base = int(self.info["trace_off"]) + (node * int(self.info["n_ctx"]) + ctx) * int(self.info["trace_stride"])
        return {k: struct.unpack_from("<Q", m, base + off)[0] for k, off in self.info["trace_fields"].items()}

    def counters(self) -> dict[str, int]:
        """The simulator's global counters (cycle, clients, dma_refused, mmio_ops, job_nodes ...)."""
        m = self._map()
        fmt = {4: "<I", 8: "<Q"}
        return {k: struct.unpack_from(fmt[size], m, off)[0]
                for k, (off, size) in self.info["global_fields"].items()}

    # -- lifetime ----------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log.read_text()
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait (SIGKILL after ``timeout``); returns the exit status."""
        if self._shm is not None:
            self._shm.close()
            self._shm = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # A simulator that was killed cannot clean up after itself.
        if self.proc.returncode and self.proc.returncode < 0:
            for p in (self.socket, self.ready_file, Path(self.info.get("shm", "/nonexistent"))):
                try:
                    p.unlink()
                except OSError:
                    pass
        return self.proc.returncode

    def __enter__(self) -> "SimCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start(topo: str | Topology = "ring:4", *, cluster: str | None = None, socket: str | Path | None = None,
          ber: float = 0.0, mmio_write_ns: float | None = None, mmio_read_ns: float | None = None,
          dma_read_ns: float | None = None, dma_write_ns: float | None = None,
          extra_args: Sequence[str] = (), timeout: float = 120.0, die_with_parent: bool = True,
          quiet_build: bool = False, **build_kwargs) -> SimCluster:
    """Build (cached) and start the simulator; returns once its links are up and its
    socket listens. The socket is ``socket``, else the one the sim backend derives from
    ``cluster`` (:func:`socket_path`). Output goes to ``<socket>.log`` (or a name of its
    own when the socket file exists already: a simulator may be running there)."""
    exe = build(topo, quiet=quiet_build, **build_kwargs)
    sock = Path(socket) if socket else socket_path(cluster)
    sock.parent.mkdir(parents=True, exist_ok=True)
    # Per start, so that a second start on the same socket cannot touch a running one's.
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    ready = sock.with_name(f"{sock.name}.{tag}.ready")
    log = sock.with_name(f"{sock.name}.log")
    if sock.exists():
        log = sock.with_name(f"{sock.name}.{tag}.log")
    cmd = [str(exe), "--socket", str(sock), "--ready-file", str(ready), "--ber", repr(float(ber))]
    for opt, v in (("--mmio-write-ns", mmio_write_ns), ("--mmio-read-ns", mmio_read_ns),
                   ("--dma-read-ns", dma_read_ns), ("--dma-write-ns", dma_write_ns)):
        if v is not None:
            cmd += [opt, repr(float(v))]
    cmd += list(extra_args)
    with open(log, "w") as lf:
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_set_pdeathsig if die_with_parent else None)
    sim = SimCluster(proc, sock, ready, log)
    t0 = time.time()
    while not ready.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"paranic-sim exited with {proc.returncode}:\n{sim.log_text()}")
        if time.time() - t0 > timeout:
            sim.stop()
            raise TimeoutError(f"paranic-sim not ready after {timeout} s:\n{sim.log_text()}")
        time.sleep(0.05)
    sim.info = json.loads(ready.read_text())
    return sim


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m paranic.simcluster",
                                 description="Build and run the Verilator cluster simulator.")
    ap.add_argument("--topo", default="ring:4", help="ring:N (N <= 16) or torus:XxY (up to 4x4)")
    ap.add_argument("--mtu", type=int, default=P.DEFAULT_MTU)
    ap.add_argument("--contexts", type=int, default=P.DEFAULT_CONTEXTS)
    ap.add_argument("--build-only", action="store_true", help="build (or find) the binary, print its path")
    ap.add_argument("--cluster", help="socket build/run/sim-CLUSTER.sock (default $PARANIC_CLUSTER or default)")
    ap.add_argument("--socket", help="socket path (overrides --cluster)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- options for paranic-sim (see --help there)")
    a = ap.parse_args(argv)
    exe = build(a.topo, mtu=a.mtu, n_ctx=a.contexts)
    if a.build_only:
        print(exe)
        return 0
    sock = a.socket or str(socket_path(a.cluster))
    Path(sock).parent.mkdir(parents=True, exist_ok=True)
    extra = [x for x in a.args if x != "--"]
    os.execv(str(exe), [str(exe), "--socket", sock, *extra])
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
