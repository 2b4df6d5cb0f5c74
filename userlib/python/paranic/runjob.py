"""`paranic run --backend sim|sw --nodes N -- PROGRAM ARGS`: one process per node.

The processes get ``PARANIC_BACKEND``, ``PARANIC_NODE``, ``PARANIC_NODES`` and
``PARANIC_CLUSTER`` (and, on ``sim``, ``PARANIC_SIM_SOCKET``), so that
``pn_open(&h, NULL)`` in each attaches to its node. On ``sim`` the Verilator cluster
is started first (built once and cached; the smallest of ring:4, ring:8 and
torus:4x4 that holds N nodes, or ``--topo``) unless ``PARANIC_SIM_SOCKET`` names a
running simulator, and stopped at the end. On ``sw`` a fresh software cluster is
created and removed at the end. Unless ``--no-daemon``, one paranicd per node is
started first (docs/paranicd.md), the job is registered with every node's daemon and
its processes carry ``PARANIC_JOB`` (the cluster name), so that pn_open's attach
checks and the crash clean-up apply; the daemons stop at the end.
Output: each line prefixed with its node id.
Exit status: 0 when every process exited 0, 124 on timeout, 128+N when ended by signal
N, else 1 (2: bad usage).

``paranic run`` owns what it starts (:func:`owned_lifetime`): on SIGINT, SIGTERM or
SIGHUP, and when its own parent dies (PR_SET_PDEATHSIG: SIGHUP), it stops the job
(pn_launch ends every process group it started), the daemons and the simulator, and
removes the cluster's segments, sockets and directories before it exits. The daemons
and the simulator also die with it if it is killed outright (their own
PR_SET_PDEATHSIG), as does pn_launch, which then ends the job.

The cluster set-up (simulator, daemons, job registration) is :func:`job_cluster`,
shared with ``paranic mpirun`` (:mod:`paranic.mpirun`), whose ranks come from Open
MPI's mpirun instead of pn_launch.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import signal
import socket
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from paranic import cliopts as O
from paranic import launch as L
from paranic.spec import protocol as P
from paranic.sim.faults import add_fault_options, fault_args
from paranic.spec.sim import ber_to_threshold
from paranic.spec.topo import Topology


def add_cluster_arguments(p: argparse.ArgumentParser, what: str = "run") -> None:
    """The options of the cluster a job runs on (``paranic run`` and ``paranic mpirun``)."""
    p.add_argument("--backend", choices=["sw", "sim"], default=os.environ.get("PARANIC_BACKEND", "sw"),
                   help="sw: software NIC on this machine (default); sim: the Verilator cluster")
    p.add_argument("--topo", help="sim: the simulated cluster (default: ring:4, ring:8 or torus:4x4 by the nodes)")
    p.add_argument("--cluster", help=f"cluster name (default {what}-<pid>)")
    p.add_argument("--timeout", type=O.timeout_s, default=0,
                   help=f"kill everything after S seconds (0..{O.MAX_TIMEOUT_S}; default 0: never)")
    add_fault_options(p, "sim: ", O.ber)
    p.add_argument("--soc", action="store_true",
                   help="sim: a cluster of whole SoCs brought up by their firmware (docs/simulator.md)")
    p.add_argument("--firmware", metavar="PATH|probe",
                   help="sim --soc: ROM image (default: `make firmware`'s; 'probe': the bring-up probe)")
    p.add_argument("--no-daemon", action="store_true",
                   help="do not start paranicd on the job's nodes (development mode)")


#: Processes per node: each needs a context of its node.
MAX_PPN = P.MAX_CONTEXTS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", "-n", type=O.int_in(1, P.MAX_NODES), default=2,
                   help="nodes, one process each (default 2)")
    p.add_argument("--ppn", type=O.int_in(1, MAX_PPN), default=1,
                   help="processes per node (default 1); each needs a free context of its node")
    add_cluster_arguments(p)
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")


class UsageError(ValueError):
    """Bad options (exit status 2)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, SIGHUP or SIGINT (or the parent's death, as SIGHUP) reached a job's
    owner: everything it started is stopped on the way out (``finally`` blocks; a
    KeyboardInterrupt, so that code ending its children on Ctrl-C does so here too)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: The signals that end a job's owner.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


@contextmanager
def owned_lifetime() -> Iterator[None]:
    """While inside: SIGTERM, SIGHUP and SIGINT raise :class:`Terminated` (once: later
    ones are ignored, so that the clean-up they started is not cut short), and the
    death of this process's parent arrives as SIGHUP. Handlers restored on the way out."""
    fired: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        if fired:
            return   # already stopping
        fired.append(signum)
        raise Terminated(signum)

    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    parent = os.getppid()
    L.set_parent_death_signal(signal.SIGHUP)
    try:
        if os.getppid() != parent:   # it died before prctl took effect
            on_signal(signal.SIGHUP, None)
        yield
    finally:
        L.set_parent_death_signal(0)
        for s, h in old.items():
            signal.signal(s, h)


def _sim_probe(path: str) -> str | None:
    """None when a simulator listens at ``path``, else why not (for the error message)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.settimeout(5)
        s.connect(path)
        return None
    except FileNotFoundError:
        return "no such socket"
    except OSError as e:
        if e.errno == errno.EPROTOTYPE:
            return "a socket of another type (not SOCK_SEQPACKET) listens there: not a simulator"
        if e.errno == errno.ECONNREFUSED:
            return "nothing listens there (a stale socket of a simulator that ended?)"
        if e.errno == errno.ENOTSOCK:
            return "not a socket"
        return os.strerror(e.errno) if e.errno else str(e)
    finally:
        s.close()


def program_arg(a: argparse.Namespace, what: str) -> list[str]:
    """The program and its arguments after ``--``; UsageError when missing or not found."""
    prog = list(a.program)
    if prog and prog[0] == "--":
        prog = prog[1:]
    if not prog:
        raise UsageError(f"no program given ({what} [options] -- PROGRAM ARGS)")
    if shutil.which(prog[0]) is None:
        raise UsageError(f"{prog[0]}: not found or not executable")
    return prog


def check_cluster_args(a: argparse.Namespace, nodes: int, ppn: int, default_name: str,
                       nodes_what: str = "--nodes") -> str:
    """Checks the cluster options (and a job of ``nodes`` x ``ppn``; ``nodes_what``
    names the nodes in messages); returns the cluster name. UsageError with the reason."""
    if not 1 <= nodes <= P.MAX_NODES:
        raise UsageError(f"{nodes_what} must be 1..{P.MAX_NODES}, not {nodes}")
    if (getattr(a, "soc", False) or getattr(a, "firmware", None)) and a.backend != "sim":
        raise UsageError("--soc/--firmware need --backend sim")
    if getattr(a, "firmware", None) and not getattr(a, "soc", False):
        raise UsageError("--firmware needs --soc")
    if a.timeout < 0:
        raise UsageError("--timeout must be >= 0")
    if not 1 <= ppn <= MAX_PPN:
        raise UsageError(f"--ppn must be 1..{MAX_PPN}")
    cluster = a.cluster or f"{default_name}-{os.getpid()}"
    try:
        if L.cluster_name(cluster) != cluster:
            raise ValueError
    except ValueError:
        raise UsageError(f"bad cluster name {cluster!r} (letters, digits, _ . -; at most 64)") from None
    return cluster


def job_env() -> dict[str, str]:
    """The job's base environment: this one without PARANIC_* variables, but with the
    settings a user gave for the job's processes (libparanic's, the socket library's)."""
    env = L.clean_env()
    for k in ("PARANIC_SIM_SOCKET", "PARANIC_RUN_DIR", "PARANIC_PIO_THRESHOLD", "PARANIC_MTU",
              "PARANIC_CONTEXTS", "PARANIC_RX_SLOTS", "PARANIC_TX_ENTRIES", "PARANIC_DAEMON_DIR",
              "PARANIC_SOCK_NET"):
        if k in os.environ:   # settings the user gave for the job's processes
            env[k] = os.environ[k]
    env.update({k: v for k, v in os.environ.items() if k.startswith("PARANIC_SOCK")})   # libparanic_sock.so's
    env.update({k: v for k, v in os.environ.items() if k.startswith("PARANIC_FI_")})    # libparanic-fi.so's
    return env


@dataclass
class Job:
    """A job's cluster while :func:`job_cluster` holds it: the environment of its
    processes (PARANIC_CLUSTER/NODES/BACKEND, the simulator's socket, PARANIC_JOB), and
    whether paranicds run (then the cluster is theirs: attach, never create)."""

    env: dict[str, str]
    cluster: str
    nodes: int
    daemons: bool


def remove_job_files(cluster: str, env: Mapping[str, str]) -> None:
    """What the job's processes leave on the host whoever killed them: the socket
    library's node directories (``/dev/shm/paranic-<cluster>.sock.<n>``, removed with
    the cluster's segments by ``pn_sw_cluster_destroy``) and paranic-rsh's default PVM
    directory ``/tmp/paranic-pvm-<cluster>`` (only when it is ours and no
    PARANIC_PVM_TMP named another)."""
    from paranic import lib

    try:
        lib.sw_cluster_destroy(cluster, missing_ok=True)
    except (OSError, TypeError):
        pass
    if env.get("PARANIC_PVM_TMP"):
        return
    pvm = Path("/tmp") / f"paranic-pvm-{cluster}"
    try:
        st = os.lstat(pvm)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
        shutil.rmtree(pvm, ignore_errors=True)


@contextmanager
def job_cluster(a: argparse.Namespace, cluster: str, nodes: int, ppn: int, prog: Sequence[str],
                env: Mapping[str, str], what: str = "paranic run", nodes_what: str = "--nodes") -> Iterator[Job]:
    """The cluster of a job of ``nodes`` x ``ppn`` processes of ``prog`` (``a``: the
    options of :func:`add_cluster_arguments`): on sim the simulator (unless
    ``a.sim_socket`` or PARANIC_SIM_SOCKET names a running one), then one paranicd per node with the job
    registered (unless ``a.no_daemon``). Stopped (and the sw cluster removed) at the
    end. UsageError for a bad topology or fault option; RuntimeError, ValueError,
    TimeoutError when something does not start."""
    env = dict(env)
    sim = None
    daemons = None
    try:
        if a.backend == "sim":
            given = getattr(a, "sim_socket", None) or os.environ.get("PARANIC_SIM_SOCKET")
            if given:
                # A simulator named by the user is used or refused, never replaced by a
                # second one started in silence.
                why = _sim_probe(given)
                if why is not None:
                    raise RuntimeError(f"PARANIC_SIM_SOCKET={given}: no simulator there ({why}); "
                                       f"start one there, or unset PARANIC_SIM_SOCKET to start a new one")
                own = [o for o, v in (("--topo", a.topo), ("--ber", a.ber), ("--ber-cable", a.ber_cable),
                                      ("--cut", a.cut), ("--mend", a.mend), ("--soc", getattr(a, "soc", False)),
                                      ("--firmware", getattr(a, "firmware", None))) if v]
                if own:
                    raise UsageError(f"{', '.join(own)}: options of a simulator this command starts; the one at "
                                     f"{given} (PARANIC_SIM_SOCKET) runs already with its own")
                print(f"{what}: using the simulator at {given}", file=sys.stderr)
                env.update(PARANIC_BACKEND="sim", PARANIC_SIM_SOCKET=given)
            else:
                from paranic.sim import run as simrun
                from paranic.bench.msg import barrier_topology
                try:
                    topo = Topology.parse(a.topo) if a.topo else Topology.parse(barrier_topology(nodes))
                    ber_to_threshold(a.ber)
                    fault_args(topo, a.ber_cable, a.cut, a.mend)
                except ValueError as e:
                    raise UsageError(str(e)) from None
                if topo.nodes < nodes:
                    raise UsageError(f"{topo} has {topo.nodes} nodes, fewer than {nodes_what} {nodes}")
                print(f"{what}: starting the {topo} simulator", file=sys.stderr, flush=True)
                sock = simrun.RUN_DIR / f"sim-{cluster}.sock"
                sim = simrun.start(str(topo), socket=sock, ber=a.ber, timeout=300,
                                   ber_cable=a.ber_cable, cut=a.cut, mend=a.mend,
                                   soc=getattr(a, "soc", False), firmware=getattr(a, "firmware", None))
                if sim.soc:
                    print(f"{what}: the firmware brought the cluster up in {sim.bringup_cycles} cycles "
                          f"(node ids by index: {sim.node_ids})", file=sys.stderr, flush=True)
                env = sim.env(env)
        if not getattr(a, "no_daemon", False):
            from paranic import daemon as PD

            daemons = PD.Daemons.start(cluster, nodes, a.backend, env=env, die_with_parent=True)
            for n in range(nodes):
                PD.job_start(cluster, n, cluster, nodes, ppn, prog, env=env)
            env = dict(env, PARANIC_JOB=cluster)
        yield Job(env, cluster, nodes, daemons is not None)
    finally:
        if daemons is not None:
            daemons.stop()
        remove_job_files(cluster, env)
        if sim is not None:
            rc = sim.stop()
            if rc != 0:
                print(f"{what}: the simulator exited with {rc}; log: {sim.log}", file=sys.stderr)
            log = Path(sim.log)
            if rc == 0 and log.exists():
                log.unlink()


def run(a: argparse.Namespace) -> int:
    try:
        prog = program_arg(a, "paranic run")
        cluster = check_cluster_args(a, a.nodes, a.ppn, "run")
    except UsageError as e:
        print(f"paranic run: {e}", file=sys.stderr)
        return 2
    try:
        L.build_userlib(quiet=False)
    except L.BuildError as e:
        print(f"paranic run: {e}", file=sys.stderr)
        return 1
    try:
        with owned_lifetime(), job_cluster(a, cluster, a.nodes, a.ppn, prog, job_env()) as job:
            # the daemons' cluster: pn_launch neither creates nor removes it
            extra = ["-f", "--attach"] if job.daemons else None
            # a.timeout 0: no limit in pn_launch either (-t 0); this process owns the job
            r = L.launch(prog, a.nodes, cluster, backend=a.backend, timeout=a.timeout, env=job.env,
                         stream=sys.stdout, extra=extra, ppn=a.ppn)
            return r.rc
    except Terminated as e:
        print(f"paranic run: {signal.Signals(e.signum).name}: stopped the job"
              f"{', the daemons' if not a.no_daemon else ''}{' and the simulator' if a.backend == 'sim' else ''}",
              file=sys.stderr)
        return 128 + e.signum
    except UsageError as e:
        print(f"paranic run: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, TimeoutError, ValueError) as e:
        print(f"paranic run: {e}", file=sys.stderr)
        return 1
