"""`paranic mpirun --backend sw|sim -np N [--ppn P] -- PROGRAM ARGS`: an MPI job over ParaNIC.

One ``mpirun`` of Open MPI 4.1 on this machine starts the N ranks (no hostfile: every
rank runs here, ``--oversubscribe``, and ``--bind-to none`` so that the ranks are not
all pinned to one core: each of Open MPI's launches believes it owns the machine).
Each rank is started through ``pn_mpi_exec`` (userlib/mpi), which sets
``PARANIC_NODE = rank / P`` from ``OMPI_COMM_WORLD_RANK`` before it execs the program,
so the rank's libfabric endpoint opens a port on its own node of the cluster.

The cluster is the one ``paranic run`` sets up (:func:`paranic.runjob.job_cluster`):
on ``sim`` the Verilator cluster, one paranicd per node with the job registered
(unless ``--no-daemon``), removed at the end.

Transports (``--transport``):

* ``paranic`` (default): Open MPI's CM PML over its OFI MTL over ParaNIC's libfabric
  provider ``libparanic-fi.so`` (``FI_PROVIDER_PATH`` = the build directory,
  ``mtl_ofi_provider_include paranic``; the BTLs are cut down to ``self`` so no MPI
  message can take the OS's TCP or shared memory instead). ``--stats`` sets
  ``PARANIC_FI_STATS`` so every rank's provider writes its counters at the end (a file
  per rank, read back: :attr:`MpiRun.stats`); the CLI prints them and their sum.
* ``tcp``: the OB1 PML over the TCP BTL on loopback (``btl tcp,self``,
  ``btl_tcp_if_include lo``): the operating system's TCP, for comparison.
* ``sm``: the OB1 PML over the shared-memory BTL (``btl vader,self``).

Debian's MPICH is built with ch4:ucx, not ch4:ofi (``mpichversion``), so it cannot load
a libfabric provider: only Open MPI is launched (docs/mpi.md).

Exit status: mpirun's (0 when every rank exited 0), 124 on timeout, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence, TextIO

from paranic import cliopts
from paranic import launch as L
from paranic import runjob
from paranic.sim.paths import build_lock

#: Open MPI's mpirun (Debian's alternatives may point ``mpirun`` at MPICH's).
MPIRUN = "mpirun.openmpi"
#: The MPI programs and the exec wrapper (``make -C userlib mpi``).
MPI_BUILD = L.USERLIB_BUILD / "mpi"
EXEC = MPI_BUILD / "pn_mpi_exec"
#: The libfabric provider (branch wt-fabric, userlib/fabric) and the directory
#: libfabric scans for it (FI_PROVIDER_PATH: files named lib*-fi.so).
PROVIDER = L.USERLIB_BUILD / "libparanic-fi.so"
#: MPI_Allreduce / MPI_Bcast of small vectors on ParaNIC's collectives (PMPI; userlib/mpi/pn_mpicoll.c).
MPICOLL = MPI_BUILD / "libparanic-mpicoll.so"
PROVIDER_NAME = "paranic"

TRANSPORTS: dict[str, list[str]] = {
    "paranic": ["--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", PROVIDER_NAME,
                "--mca", "btl", "self"],
    "tcp": ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"],
    "sm": ["--mca", "pml", "ob1", "--mca", "btl", "vader,self"],
}


class MpiError(RuntimeError):
    """Open MPI or the MPI programs are missing, or a build failed."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-np", "--np", dest="np", type=int, default=2,
                   help="MPI ranks (default 2)")
    p.add_argument("--ppn", type=int, default=1,
                   help="ranks per ParaNIC node (default 1): rank r runs on node r / PPN")
    p.add_argument("--transport", choices=sorted(TRANSPORTS), default="paranic",
                   help="paranic: Open MPI's OFI MTL over libparanic-fi.so (default); "
                        "tcp: the TCP BTL on loopback; sm: the shared-memory BTL")
    p.add_argument("--stats", action="store_true",
                   help="paranic: every rank's provider prints its counters at the end (PARANIC_FI_STATS)")
    p.add_argument("--tag-output", action="store_true", help="prefix each output line with its rank (mpirun's)")
    p.add_argument("--no-coll", dest="coll", action="store_false",
                   help="paranic: leave MPI_Allreduce/MPI_Bcast to Open MPI (default: small vectors on "
                        "ParaNIC's collectives, libparanic-mpicoll.so, with one rank per node)")
    runjob.add_cluster_arguments(p, "mpirun")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")


def nodes_of(np_: int, ppn: int) -> int:
    """ParaNIC nodes of a job of ``np_`` ranks, ``ppn`` per node (the last may have fewer)."""
    return -(-np_ // ppn)


def missing() -> str | None:
    """Why no MPI job can run here (None: Open MPI is installed)."""
    for prog, pkg in ((MPIRUN, "openmpi-bin"), ("mpicc.openmpi", "libopenmpi-dev")):
        if shutil.which(prog) is None:
            return f"{prog} is not installed (Debian package {pkg}: scripts/deps.sh installs it)"
    return None


def build(quiet: bool = True) -> Path:
    """Build libparanic and the MPI programs (``make -C userlib mpi``); MpiError on failure."""
    why = missing()
    if why:
        raise MpiError(why)
    try:
        L.build_userlib(quiet=quiet)
    except L.BuildError as e:
        raise MpiError(str(e)) from None
    with build_lock("userlib"):
        r = subprocess.run(["make", "-C", str(L.USERLIB), "-j2", "mpi"], capture_output=True, text=True)
    if r.returncode != 0:
        raise MpiError(f"make -C userlib mpi failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return MPI_BUILD


def provider_missing() -> str | None:
    """Why the paranic transport cannot run (None: the provider is built)."""
    if not PROVIDER.exists():
        return (f"the libfabric provider {PROVIDER} is not built (make -C userlib; "
                f"or use --transport tcp|sm)")
    return None


def mpirun_cmd(prog: Sequence[str], np_: int, transport: str, env_keys: Sequence[str] = (),
               tag_output: bool = False, backend: str = "sw") -> list[str]:
    """The mpirun command line: ``np_`` ranks here, unbound, each through pn_mpi_exec;
    ``env_keys`` are forwarded to the ranks explicitly (``-x``). On ``sim`` the ranks
    yield the CPU while they wait (``mpi_yield_when_idle``): the simulator needs the
    cores they would spin on, and simulated time keeps running while it waits for one
    (an 8-byte ping-pong: 0.91 us one way yielding, 1.1 to 4.5 us spinning on 2 cores)."""
    cmd = [MPIRUN, "-np", str(np_), "--oversubscribe", "--bind-to", "none"]
    if backend == "sim":
        cmd += ["--mca", "mpi_yield_when_idle", "1"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")   # containers and CI run as root
    if tag_output:
        cmd.append("--tag-output")
    cmd += TRANSPORTS[transport]
    for k in env_keys:
        cmd += ["-x", k]
    return cmd + [str(EXEC), *prog]


@dataclass
class MpiRun:
    """One mpirun's exit status and output (stdout and stderr together)."""

    rc: int
    out: str
    cmd: list[str] = field(default_factory=list)
    #: with stats: each rank's provider counters (parse_stats), one dict per process
    stats: list[dict] = field(default_factory=list)

    def lines(self, prefix: str) -> list[str]:
        return [ln for ln in self.out.splitlines() if ln.startswith(prefix)]

    def traffic(self) -> dict[str, int]:
        """The ranks' provider counters summed (``nic_*``: what went through the NIC,
        ``shm_*``: the ports layer's intra-node shared-memory path)."""
        out: dict[str, int] = {"ranks": len(self.stats)}
        for st in self.stats:
            for k, v in st.items():
                if k not in ("pid", "node"):
                    out[k] = out.get(k, 0) + v
        return out


def parse_stats(text: str) -> list[dict]:
    """The provider's counter lines (``paranic-fi: key=value ...``, PARANIC_FI_STATS,
    docs/fabric.md) in ``text``, one dict of ints per line."""
    rows = []
    for line in text.splitlines():
        if line.startswith("paranic-fi: ") and "=" in line:
            try:
                rows.append({k: int(v) for k, v in (kv.split("=", 1) for kv in line.split()[1:])})
            except ValueError:
                continue
    return rows


def traffic_line(t: dict[str, int]) -> str:
    """One line saying where the MPI traffic went (the provider's counters, summed)."""
    return (f"paranic mpirun: the provider of {t.get('ranks', 0)} ranks sent {t.get('nic_sent_msgs', 0)} messages "
            f"({t.get('nic_sent_bytes', 0)} bytes) through ParaNIC in {t.get('nic_tx_packets', 0)} packets, "
            f"{t.get('shm_sent_msgs', 0)} messages ({t.get('shm_sent_bytes', 0)} bytes) through the ports' "
            f"intra-node shared memory; MPI's own BTLs: self only")


def run_mpi(prog: Sequence[str], np_: int, *, ppn: int = 1, backend: str = "sw", transport: str = "paranic",
            topo: str | None = None, cluster: str | None = None, timeout: int = 600, daemons: bool = True,
            stats: bool = False, sim_socket: str | None = None, env: Mapping[str, str] | None = None,
            stream: TextIO | None = None, tag_output: bool = False, coll: bool = True) -> MpiRun:
    """Run ``prog`` as an MPI job of ``np_`` ranks (``ppn`` per node) on a fresh cluster of
    ``backend`` and wait. ``env``: extra variables for the ranks; ``sim_socket``: a
    running simulator to use; ``coll``: small MPI_Allreduce/MPI_Bcast on ParaNIC's
    collectives (transport paranic, one rank per node). Raises runjob.UsageError,
    MpiError, TimeoutError."""
    p = argparse.ArgumentParser(add_help=False)
    runjob.add_cluster_arguments(p, "mpirun")   # the cluster options' defaults, from their one definition
    a = p.parse_args([])
    a.__dict__.update(backend=backend, topo=topo, cluster=cluster, timeout=timeout, no_daemon=not daemons,
                      sim_socket=sim_socket)
    return _run(a, list(prog), np_, ppn, transport, stats, env or {}, stream, tag_output, coll)


def _run(a: argparse.Namespace, prog: list[str], np_: int, ppn: int, transport: str, stats: bool,
         extra_env: Mapping[str, str], stream: TextIO | None, tag_output: bool, coll: bool = True) -> MpiRun:
    if not 1 <= np_ <= 1024:
        raise runjob.UsageError(f"-np must be 1..1024, not {np_}")
    if not 1 <= ppn <= runjob.MAX_PPN:
        raise runjob.UsageError(f"--ppn must be 1..{runjob.MAX_PPN}")
    if ppn > np_:
        raise runjob.UsageError(f"--ppn {ppn} is more than the job's {np_} ranks")
    if stats and transport != "paranic":
        raise runjob.UsageError("--stats needs --transport paranic (the provider's counters)")
    nodes = nodes_of(np_, ppn)
    cluster = runjob.check_cluster_args(a, nodes, ppn, "mpirun", nodes_what="the job's nodes (-np / --ppn)")
    build()
    if transport == "paranic":
        why = provider_missing()
        if why:
            raise MpiError(why)
    env = runjob.job_env()
    env.update({"PARANIC_BACKEND": a.backend, "PARANIC_CLUSTER": cluster, "PARANIC_NODES": str(nodes),
                "PARANIC_PPN": str(ppn)})
    stats_dir = None
    if transport == "paranic":
        env["FI_PROVIDER_PATH"] = str(PROVIDER.parent)
        if coll:    # pn_mpi_exec preloads it (one rank per node only)
            env["PARANIC_MPICOLL"] = str(MPICOLL)
        if stats:   # one file per rank process ("%p": its pid), read after the run
            stats_dir = tempfile.mkdtemp(prefix="pn-mpi-stats-")
            env["PARANIC_FI_STATS"] = os.path.join(stats_dir, "fi-%p.txt")
    env.update(extra_env)
    if os.geteuid() == 0:   # the same as --allow-run-as-root, for mpirun's own helpers
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    with runjob.job_cluster(a, cluster, nodes, ppn, prog, env, what="paranic mpirun",
                            nodes_what="the job's nodes (-np / --ppn)") as job:
        keys = sorted(k for k in job.env if k.startswith(("PARANIC_", "FI_")))
        cmd = mpirun_cmd(prog, np_, transport, keys, tag_output, a.backend)
        st: list[dict] = []
        try:
            rc, out = _wait(cmd, job.env, a.timeout or None, stream)
        finally:
            if not job.daemons and a.backend == "sw":   # the ranks created the sw cluster: remove it
                from paranic import lib
                lib.sw_cluster_destroy(cluster, missing_ok=True)
            if stats_dir:
                for f in sorted(Path(stats_dir).glob("fi-*.txt")):
                    st += parse_stats(f.read_text(errors="replace"))
                shutil.rmtree(stats_dir, ignore_errors=True)
        return MpiRun(rc, out, cmd, sorted(st, key=lambda x: (x.get("node", 0), x.get("pid", 0))))


def _wait(cmd: list[str], env: Mapping[str, str], timeout: int | None,
          stream: TextIO | None) -> tuple[int, str]:
    """Run mpirun (``timeout`` None: no limit); stream its output; on timeout or
    interruption SIGTERM (mpirun ends its ranks), then SIGKILL its process group; returns
    (status, output) with 124 for a timeout. mpirun gets SIGTERM when this thread ends
    (PR_SET_PDEATHSIG), so it does not outlive a ``paranic mpirun`` killed outright."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(env),
                         start_new_session=True, preexec_fn=functools.partial(L.set_parent_death_signal,
                                                                              signal.SIGTERM))
    assert p.stdout is not None
    chunks: list[str] = []

    def pump() -> None:
        for line in p.stdout:   # type: ignore[union-attr]
            chunks.append(line)
            if stream is not None:
                stream.write(line)
                stream.flush()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        p.wait(timeout=timeout)
        rc = p.returncode
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        if isinstance(e, KeyboardInterrupt):
            raise
        chunks.append(f"paranic mpirun: timed out after {timeout} s\n")
        rc = 124
    t.join(timeout=10)
    return rc, "".join(chunks)


def run(a: argparse.Namespace) -> int:
    try:
        prog = runjob.program_arg(a, "paranic mpirun")
        with runjob.owned_lifetime():   # a signal stops mpirun, the daemons, the simulator
            r = _run(a, prog, a.np, a.ppn, a.transport, a.stats, {}, sys.stdout, a.tag_output, a.coll)
    except runjob.Terminated as e:
        print(f"paranic mpirun: {signal.Signals(e.signum).name}: stopped", file=sys.stderr)
        return 128 + e.signum
    except runjob.UsageError as e:
        print(f"paranic mpirun: {e}", file=sys.stderr)
        return 2
    except (MpiError, RuntimeError, TimeoutError, ValueError) as e:
        print(f"paranic mpirun: {e}", file=sys.stderr)
        return 1
    if a.stats:
        for st in r.stats:
            print("paranic-fi: " + " ".join(f"{k}={v}" for k, v in st.items()), file=sys.stderr)
        print(traffic_line(r.traffic()), file=sys.stderr)
    if r.rc == 124:
        print("paranic mpirun: timed out", file=sys.stderr)
    return r.rc
