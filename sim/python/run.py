"""Running the Verilator cluster simulator: start it, attach tools to its clock, stop it.

:func:`start` builds it (cached, :func:`paranic.sim.build.build`), runs the binary,
waits until its links are up and its socket listens, and returns a :class:`SimCluster`
handle (a context manager; ``stop()`` sends SIGTERM and waits; the socket and the
shared-memory file are removed). The global shared memory's layout is the spec's
(:mod:`paranic.spec.sim`).
"""

from __future__ import annotations

import json
import mmap
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from paranic.spec import sim as S
from paranic.spec.topo import Topology

from .build import build
from .faults import SimControl, fault_args
from .paths import RUN_DIR


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

    @property
    def soc(self) -> bool:
        """A cluster of SoCs brought up by their firmware."""
        return bool(self.info.get("soc"))

    @property
    def bringup_cycles(self) -> int:
        """SoC cluster: cycles from reset to every node's firmware reporting a routed
        cluster (0 for a NicCore cluster, which the harness configures)."""
        return int(self.info.get("bringup_cycles", 0))

    @property
    def node_ids(self) -> list[int]:
        """Node id of each node index (the firmware's choice on a SoC cluster; clients
        attach by node id)."""
        return [int(x) for x in self.info.get("node_ids", range(self.nodes))]

    # -- the shared clock and trace records ------------------------------------------------
    def _map(self):
        if self._shm is None:
            with open(self.info["shm"], "rb") as f:
                self._shm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._shm

    def cycle(self) -> int:
        """The simulator's cycle counter (rising edges since it started)."""
        return S.GLOBAL.read(self._map(), "cycle")

    def trace(self, node: int, ctx: int) -> dict[str, int]:
        """The trace record of (node, ctx): field -> value (``paranic.spec.sim.TRACE``,
        definitions in docs/simulator.md)."""
        n_ctx = int(self.info["n_ctx"])
        if not (0 <= node < self.nodes and 0 <= ctx < n_ctx):
            raise ValueError(f"no node {node} / context {ctx}")
        base = S.trace_offset(node, ctx, n_ctx)
        return {k: S.TRACE.read(self._map(), k, base) for k in S.TRACE_FIELDS}

    def control(self) -> "SimControl":
        """A fault client of this simulator: cut, mend, set the error rate of a cable
        (:class:`paranic.sim.faults.SimControl`; close it, or use it in ``with``)."""
        return SimControl(self.socket)

    def counters(self) -> dict[str, int]:
        """The simulator's global counters (cycle, clients, dma_refused, mmio_ops, job_nodes ...)."""
        return {k: S.GLOBAL.read(self._map(), k) for k in S.GLOBAL_COUNTERS}

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
            shm = self.info.get("shm", f"/dev/shm/paranic-sim-{self.proc.pid}")   # the harness's default
            for p in (self.socket, self.ready_file, Path(shm)):
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
          model: str | None = None, poll_miss_ns: float | None = None, cable_ns: float | None = None,
          extra_args: Sequence[str] = (), timeout: float = 120.0, die_with_parent: bool = True,
          quiet_build: bool = False, ber_cable: Sequence[str] = (), cut: Sequence[str] = (),
          mend: Sequence[str] = (), soc: bool = False, firmware: str | Path | None = None,
          node_ids: Mapping[int, int] | None = None, dnas: Mapping[int, int] | None = None,
          bringup_timeout: int | None = None, **build_kwargs) -> SimCluster:
    """Build (cached) and start the simulator; returns once its links are up and its
    socket listens. The socket is ``socket``, else the one the sim backend derives from
    ``cluster`` (:func:`socket_path`). Output goes to ``<socket>.log`` (or a name of its
    own when the socket file exists already: a simulator may be running there).

    Faults (:func:`paranic.sim.faults.fault_args`): ``ber_cable`` ``["K=RATE", ...]``,
    ``cut``/``mend`` ``["K@CYCLE", ...]``; links of cables cut from the start do not
    hold up the start.

    Latencies (docs/simulator.md, "Latency model"): ``model`` a corner of
    ``paranic.spec.sim.LATENCY_MODELS`` (default realistic) sets them all, ``*_ns`` override
    one each; the cable (``model``'s or ``cable_ns``) is the build's ``phy_delay``.

    ``soc``: a cluster of whole SoCs (docs/simulator.md, "SoC clusters"), ready once
    their firmware routed it. ``firmware``: its ROM image (``.init``), or ``"probe"`` for
    the bring-up probe of ``topo`` (which needs configured ids: ``node_ids`` defaults to
    index = id then); default: ``make firmware``'s image. ``node_ids``/``dnas``: node
    index -> configured id / DNA (``--node-id``/``--dna``); ``bringup_timeout`` in cycles.
    """
    threshold = S.ber_to_threshold(ber)   # refuses a bad rate before anything is built
    if model is not None:
        S.latency_model(model)            # a clear error for an unknown corner
    if model is not None or cable_ns is not None:
        build_kwargs.setdefault("phy_delay", S.cable_cycles(model, cable_ns))
    t = topo if isinstance(topo, Topology) else Topology.parse(topo)
    faults = fault_args(t, ber_cable, cut, mend)
    fw_args: list[str] = []
    if not soc:
        if firmware is not None or node_ids or dnas or bringup_timeout is not None:
            raise ValueError("firmware, node_ids, dnas and bringup_timeout need a SoC cluster (soc=True)")
    else:
        from .socbuild import make_firmware

        for what, m in (("node_ids", node_ids or {}), ("dnas", dnas or {})):
            for i in m:
                if not 0 <= int(i) < t.nodes:
                    raise ValueError(f"{what}: no node index {i} in {t} (0..{t.nodes - 1})")
        if firmware == "probe":
            firmware = make_firmware(t.link_ports, probe_topo=str(t), quiet=quiet_build)
            if node_ids is None:
                node_ids = {i: i for i in range(t.nodes)}
        elif firmware is None:
            firmware = make_firmware(t.link_ports, quiet=quiet_build)
        elif not Path(firmware).is_file():
            raise ValueError(f"firmware {firmware}: no such file (a ROM image: firmware.init)")
        fw_args = ["--firmware", str(Path(firmware).resolve())]
        fw_args += [a for i, v in sorted((node_ids or {}).items()) for a in ("--node-id", f"{i}={v}")]
        fw_args += [a for i, v in sorted((dnas or {}).items()) for a in ("--dna", f"{i}={v}")]
        if bringup_timeout is not None:
            fw_args += ["--bringup-timeout", str(int(bringup_timeout))]
    exe = build(t, quiet=quiet_build, soc=soc, **build_kwargs)
    sock = Path(socket) if socket else socket_path(cluster)
    sock.parent.mkdir(parents=True, exist_ok=True)
    # Per start, so that a second start on the same socket cannot touch a running one's.
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    ready = sock.with_name(f"{sock.name}.{tag}.ready")
    log = sock.with_name(f"{sock.name}.log")
    if sock.exists():
        log = sock.with_name(f"{sock.name}.{tag}.log")
    cmd = [str(exe), "--socket", str(sock), "--ready-file", str(ready), "--ber-threshold", str(threshold)]
    if model is not None:
        cmd += ["--model", model]
    for opt, v in (("--mmio-write-ns", mmio_write_ns), ("--mmio-read-ns", mmio_read_ns),
                   ("--dma-read-ns", dma_read_ns), ("--dma-write-ns", dma_write_ns),
                   ("--poll-miss-ns", poll_miss_ns)):
        if v is not None:
            cmd += [opt, repr(float(v))]
    cmd += faults + fw_args + list(extra_args)
    with open(log, "w") as lf:
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_set_pdeathsig if die_with_parent else None)
    sim = SimCluster(proc, sock, ready, log)
    t0 = time.time()
    try:
        while not ready.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"paranic-sim exited with {proc.returncode}:\n{sim.log_text()}")
            if time.time() - t0 > timeout:
                raise TimeoutError(f"paranic-sim not ready after {timeout} s:\n{sim.log_text()}")
            time.sleep(0.05)
    except BaseException:   # a timeout, or a signal to our owner (Ctrl-C, SIGTERM): not left running
        sim.stop()
        try:
            ready.unlink()
        except OSError:
            pass
        raise
    sim.info = json.loads(ready.read_text())
    sim.info["ber"] = float(ber)
    return sim
