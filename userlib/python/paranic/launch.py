"""libparanic's build and its launcher, for the CLI and the tests.

* :func:`build_userlib` runs ``make -C userlib`` (libparanic, the tools ``pn_launch``
  and ``pn_bench`` in ``build/userlib/bin``, the C test programs in
  ``build/userlib/tests``); make decides what is out of date.
* :func:`launch` runs ``pn_launch -n N`` (one process per node with
  ``PARANIC_NODE``/``PARANIC_NODES``/``PARANIC_CLUSTER``/``PARANIC_BACKEND`` set),
  either capturing the output into a :class:`Run` split by node, or streaming it.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from paranic.paths import BIN, LIBRARY, TESTS, USERLIB, USERLIB_BUILD
from paranic.sim.paths import build_lock

__all__ = ["BIN", "LIBRARY", "TESTS", "USERLIB_BUILD", "BuildError", "build_userlib", "tool", "Run",
           "clean_env", "cluster_name", "launch_cmd", "launch", "set_parent_death_signal"]


_PR_SET_PDEATHSIG = 1
try:   # loaded here, not in a forked child (a preexec_fn must not dlopen)
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None


def set_parent_death_signal(sig: int) -> bool:
    """prctl(PR_SET_PDEATHSIG, sig) for the calling process (False where unsupported;
    0 clears it). Also usable in a ``preexec_fn`` (``functools.partial``): the child
    gets ``sig`` when the thread that started it ends (``paranic run``'s daemons, and
    ``paranic run`` itself: docs/reliability.md, "`paranic run` owns its children")."""
    try:
        return _LIBC is not None and _LIBC.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except AttributeError:
        return False


class BuildError(RuntimeError):
    """``make -C userlib`` failed (the message holds its output)."""


def build_userlib(quiet: bool = True, jobs: int = 2) -> Path:
    """Build libparanic, its tools and test programs (warnings are errors); returns
    the build directory. Raises :class:`BuildError` with the compiler output."""
    if not quiet:
        print("paranic: building libparanic (make -C userlib)", file=sys.stderr, flush=True)
    with build_lock("userlib"):
        r = subprocess.run(["make", "-C", str(USERLIB), f"-j{jobs}"], capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"make -C userlib failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return USERLIB_BUILD


def tool(name: str) -> Path:
    """Path of a libparanic tool (``pn_launch``, ``pn_bench``)."""
    return BIN / name


@dataclass
class Run:
    """Output of one pn_launch run, split by node (``nodes``, one process per node) and
    by process (``procs``, keyed by (node, local rank); with ``ppn`` > 1 only these)."""

    rc: int
    out: str
    nodes: dict[int, list[str]] = field(default_factory=dict)
    procs: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    launch: list[str] = field(default_factory=list)

    def ok(self, node: int, case: str) -> str:
        """The node's "ok CASE ..." line (asserts there is exactly one)."""
        lines = [ln for ln in self.nodes.get(node, []) if ln.startswith(f"ok {case}")]
        assert len(lines) == 1, f"node {node}: no single 'ok {case}' line\n{self.out}"
        return lines[0]

    def fails(self) -> list[str]:
        return [f"{n}.{r}: {ln}" for (n, r), lines in self.procs.items() for ln in lines if ln.startswith("FAIL")]

    @classmethod
    def parse(cls, rc: int, out: str) -> "Run":
        run = cls(rc, out)
        for line in out.splitlines():
            m = re.match(r"^(\d+): (.*)$", line)
            mp = re.match(r"^(\d+)\.(\d+): (.*)$", line)
            if m:
                run.nodes.setdefault(int(m.group(1)), []).append(m.group(2))
                run.procs.setdefault((int(m.group(1)), 0), []).append(m.group(2))
            elif mp:
                run.procs.setdefault((int(mp.group(1)), int(mp.group(2))), []).append(mp.group(3))
            elif line.startswith("launch:"):
                run.launch.append(line)
        return run


def clean_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without PARANIC_* variables."""
    return {k: v for k, v in (base if base is not None else os.environ).items() if not k.startswith("PARANIC_")}


def cluster_name(name: str) -> str:
    """A valid cluster name (shared-memory segment, socket) made from ``name``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64]


def launch_cmd(prog: Sequence[str], nodes: int, cluster: str, backend: str | None = None,
               timeout: int = 60, extra: Sequence[str] | None = None, ppn: int = 1) -> list[str]:
    """The ``pn_launch`` command line (``extra`` defaults to ``-f``: fail fast; ``ppn``
    processes per node)."""
    cmd = [str(tool("pn_launch")), "-n", str(nodes), "-c", cluster, "-t", str(timeout)]
    if ppn != 1:
        cmd += ["-p", str(ppn)]
    if backend:
        cmd += ["-b", backend]
    cmd += list(extra) if extra is not None else ["-f"]
    return cmd + ["--", *prog]


def launch(prog: Sequence[str], nodes: int, cluster: str, *, backend: str | None = None, timeout: int = 60,
           extra: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
           stream=None, ppn: int = 1) -> Run:
    """Run ``prog`` on ``nodes`` nodes under pn_launch and wait (at most timeout + 30 s;
    ``timeout`` 0: no limit, the caller owns the job's lifetime).

    ``env`` is the complete environment (e.g. :func:`clean_env` plus the simulator's
    socket); ``stream``, a text file, also receives each output line as it comes.
    Interrupted (KeyboardInterrupt, or :class:`paranic.runjob.Terminated`), it stops
    pn_launch with SIGTERM (pn_launch ends every process group it started, SIGKILL
    after 2 s), SIGKILL after :data:`STOP_WAIT_S`, and raises the interruption again."""
    cmd = launch_cmd(prog, nodes, cluster, backend, timeout, extra, ppn)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(env) if env is not None else None, start_new_session=True)
    assert p.stdout is not None
    lines: list[str] = []
    try:
        if stream is None:
            out, _ = p.communicate(timeout=timeout + 30 if timeout else None)
            lines.append(out)
        else:
            for line in p.stdout:
                lines.append(line)
                stream.write(line)
                stream.flush()
            p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rest, _ = p.communicate()
        raise TimeoutError(f"pn_launch did not end:\n{''.join(lines)}{rest}")
    except KeyboardInterrupt:
        stop(p)
        raise
    return Run.parse(p.returncode, "".join(lines))


#: How long :func:`launch` gives pn_launch to end its processes before SIGKILL.
STOP_WAIT_S = 5.0


def stop(p: subprocess.Popen) -> None:
    """End a pn_launch (SIGTERM: it stops its process groups), SIGKILL after
    :data:`STOP_WAIT_S`; its output is read and dropped."""
    try:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
