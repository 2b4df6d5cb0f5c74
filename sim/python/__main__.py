"""``python -m paranic.sim``: build the cluster simulator, and run it in the foreground.

    python -m paranic.sim --topo ring:4 --build-only
    python -m paranic.sim --topo torus:4x4 --cluster demo [--ber 1e-6] [-- HARNESS OPTIONS]
    python -m paranic.sim --topo ring:4 --ber-cable 2=1e-4 --cut 1@200000 --mend 1@400000

Harness options (after ``--``) are those of ``paranic-sim --help``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from paranic.spec import protocol as P
from paranic.spec.sim import ber_to_threshold

from .build import build
from .faults import fault_args
from .run import socket_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paranic.sim",
                                 description="Build and run the Verilator cluster simulator.")
    ap.add_argument("--topo", default="ring:4", help="ring:N (N <= 16) or torus:XxY (up to 4x4)")
    ap.add_argument("--mtu", type=int, default=P.DEFAULT_MTU)
    ap.add_argument("--contexts", type=int, default=P.DEFAULT_CONTEXTS)
    ap.add_argument("--build-only", action="store_true", help="build (or find) the binary, print its path")
    ap.add_argument("--cluster", help="socket build/run/sim-CLUSTER.sock (default $PARANIC_CLUSTER or default)")
    ap.add_argument("--socket", help="socket path (overrides --cluster)")
    ap.add_argument("--ber", type=float, default=0.0, help="bit-error rate of every cable (default 0)")
    ap.add_argument("--ber-cable", action="append", default=[], metavar="K=RATE",
                    help="bit-error rate of cable K (Topology.cables() numbering; repeatable)")
    ap.add_argument("--cut", action="append", default=[], metavar="K@CYCLE",
                    help="pull cable K at CYCLE (repeatable)")
    ap.add_argument("--mend", action="append", default=[], metavar="K@CYCLE",
                    help="plug cable K back in at CYCLE (repeatable)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- options for paranic-sim (see --help there)")
    a = ap.parse_args(argv)
    try:
        threshold = ber_to_threshold(a.ber)
        faults = fault_args(a.topo, a.ber_cable, a.cut, a.mend)
    except ValueError as e:
        ap.error(str(e))
    exe = build(a.topo, mtu=a.mtu, n_ctx=a.contexts)
    if a.build_only:
        print(exe)
        return 0
    sock = a.socket or str(socket_path(a.cluster))
    Path(sock).parent.mkdir(parents=True, exist_ok=True)
    extra = [x for x in a.args if x != "--"]
    os.execv(str(exe), [str(exe), "--socket", sock, "--ber-threshold", str(threshold), *faults, *extra])
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
