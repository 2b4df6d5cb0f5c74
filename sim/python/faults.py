"""Fault injection on the simulated cluster's cables: option parsing and a run-time client.

Cables are numbered as :meth:`paranic.spec.topo.Topology.cables` (on a ring, cable ``k``
joins node ``k``'s XP to node ``k+1``'s XM). ``paranic-sim`` takes a schedule on its
command line (``--cut K@CYCLE``, ``--mend K@CYCLE``, ``--ber-cable K=THRESH``);
:func:`fault_args` checks the same in Python (bit-error *rates* instead of thresholds)
and builds those options, for ``python -m paranic.sim``, :func:`paranic.sim.run.start`
and ``paranic run --backend sim``.

:class:`SimControl` talks to a running simulator over its socket (the fault requests of
:mod:`paranic.spec.sim`): cut, mend or set the error rate of a cable now or at a cycle,
and query a cable. See docs/simulator.md ("Fault injection").
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Callable, Iterable

from paranic.spec import sim as S
from paranic.spec.topo import Topology


def _cable(text: str, topo: Topology, what: str) -> int:
    n = len(topo.cables())
    try:
        k = int(text, 0)
    except ValueError:
        k = -1
    if not 0 <= k < n:
        raise ValueError(f"{what}: no cable {text!r} ({topo} has cables 0..{n - 1}, numbered as "
                         "paranic.spec.topo.Topology.cables())")
    return k


def parse_at(text: str, topo: Topology, opt: str) -> tuple[int, int]:
    """``K@CYCLE`` of ``--cut``/``--mend`` -> (cable, cycle)."""
    what = f"{opt} {text}"
    k, sep, c = text.partition("@")
    if not sep:
        raise ValueError(f"{what}: expected K@CYCLE")
    cable = _cable(k, topo, what)
    try:
        cycle = int(c, 0)
    except ValueError:
        cycle = -1
    if cycle < 0:
        raise ValueError(f"{what}: the cycle must be a non-negative integer")
    return cable, cycle


def parse_ber(text: str, topo: Topology, opt: str = "--ber-cable") -> tuple[int, int]:
    """``K=RATE`` -> (cable, threshold) (:func:`paranic.spec.sim.ber_to_threshold`)."""
    what = f"{opt} {text}"
    k, sep, r = text.partition("=")
    if not sep:
        raise ValueError(f"{what}: expected K=RATE")
    cable = _cable(k, topo, what)
    try:
        rate = float(r)
    except ValueError:
        raise ValueError(f"{what}: the bit-error rate must be a number in 0..1") from None
    try:
        return cable, S.ber_to_threshold(rate)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def fault_args(topo: str | Topology, ber_cable: Iterable[str] = (), cut: Iterable[str] = (),
               mend: Iterable[str] = ()) -> list[str]:
    """``paranic-sim`` options for ``--ber-cable K=RATE`` / ``--cut K@CYCLE`` /
    ``--mend K@CYCLE`` texts (checked here; ValueError with a clear message)."""
    t = topo if isinstance(topo, Topology) else Topology.parse(topo)
    out: list[str] = []
    for b in ber_cable:
        k, thr = parse_ber(b, t)
        out += ["--ber-cable", f"{k}={thr}"]
    for opt, items in (("--cut", cut), ("--mend", mend)):
        for x in items:
            k, c = parse_at(x, t, opt)
            out += [opt, f"{k}@{c}"]
    return out


def add_fault_options(ap: Any, scope: str = "", ber_type: Callable[[str], float] = float) -> None:
    """``--ber``, ``--ber-cable``, ``--cut`` and ``--mend`` on the argparse parser ``ap``
    (``python -m paranic.sim``, ``paranic run``); ``scope`` starts each help text ("sim: "
    where other backends ignore them). :func:`fault_args` checks the cables and cycles."""
    ap.add_argument("--ber", type=ber_type, default=0.0, help=f"{scope}bit-error rate of every cable (0..1; default 0)")
    ap.add_argument("--ber-cable", action="append", default=[], metavar="K=RATE",
                    help=f"{scope}bit-error rate of cable K (paranic.spec.topo.Topology.cables(); repeatable)")
    ap.add_argument("--cut", action="append", default=[], metavar="K@CYCLE",
                    help=f"{scope}pull cable K at CYCLE (repeatable)")
    ap.add_argument("--mend", action="append", default=[], metavar="K@CYCLE",
                    help=f"{scope}plug cable K back in at CYCLE (repeatable)")


class FaultRefused(RuntimeError):
    """The simulator refused a fault request (status -errno)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"fault request refused: {status} ({os.strerror(-status)})")
        self.status = status


class SimControl:
    """A fault client of a running ``paranic-sim`` (its UNIX socket).

    Every method sends one request and returns the reply as a dict: ``cable``,
    ``cables``, ``cut`` and ``ber`` (the cable's state when the harness answered),
    ``cycle`` (the harness's cycle then) and ``at_cycle`` (when the change takes or took
    effect). ``at=None`` (or a cycle already past) means now.
    """

    def __init__(self, sock_path: str | Path, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        self.sock.connect(str(sock_path))

    def request(self, op: int, cable: int, at: int | None = None, value: int = 0) -> dict:
        if not isinstance(cable, int) or cable < 0:
            raise ValueError(f"bad cable {cable!r}")
        if at is not None and (not isinstance(at, int) or at < 0):
            raise ValueError(f"bad cycle {at!r}: a non-negative integer")
        msg = S.FAULT.pack(magic=S.MAGIC_FAULT, version=S.VERSION, op=int(op), cable=cable, rsvd=0,
                           at_cycle=at or 0, value=value)
        self.sock.send(msg)
        r = S.FAULT_REPLY.unpack(self.sock.recv(256))
        if r["magic"] != S.MAGIC_FAULT_REPLY:
            raise RuntimeError("not a fault reply")
        if r["status"]:
            raise FaultRefused(r["status"])
        return r

    def cut(self, cable: int, at: int | None = None) -> dict:
        """Pull ``cable`` (both directions carry nothing)."""
        return self.request(S.FaultOp.CUT, cable, at)

    def mend(self, cable: int, at: int | None = None) -> dict:
        """Plug ``cable`` back in."""
        return self.request(S.FaultOp.MEND, cable, at)

    def set_ber(self, cable: int, ber: float | None = None, *, threshold: int | None = None,
                at: int | None = None) -> dict:
        """Set ``cable``'s bit-error rate (or its raw ``threshold``, both directions)."""
        if (ber is None) == (threshold is None):
            raise ValueError("give ber or threshold")
        thr = S.ber_to_threshold(ber) if ber is not None else threshold
        if not isinstance(thr, int) or not 0 <= thr < 1 << 32:
            raise ValueError(f"bad threshold {thr!r}: an integer in 0..2^32-1")
        return self.request(S.FaultOp.BER, cable, at, thr)

    def query(self, cable: int) -> dict:
        """The cable's state (cut, threshold) and the harness's cycle."""
        return self.request(S.FaultOp.QUERY, cable)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "SimControl":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
