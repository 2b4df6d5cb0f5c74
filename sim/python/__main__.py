"""``python -m paranic.sim``: build the cluster simulator, and run it in the foreground.

    python -m paranic.sim --topo ring:4 --build-only
    python -m paranic.sim --topo torus:4x4 --cluster demo [--ber 1e-6] [-- HARNESS OPTIONS]
    python -m paranic.sim --topo ring:4 --ber-cable 2=1e-4 --cut 1@200000 --mend 1@400000
    python -m paranic.sim --soc --topo ring:4 [--firmware probe|PATH] [-- --node-id 0=3 ...]

Harness options (after ``--``) are those of ``paranic-sim --help``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from paranic.spec import protocol as P
from paranic.spec.sim import DEFAULT_MODEL, LATENCY_MODELS, ber_to_threshold, cable_cycles
from paranic.spec.topo import Topology

from .build import build
from .faults import add_fault_options, fault_args
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
    add_fault_options(ap)
    ap.add_argument("--soc", action="store_true",
                    help="a cluster of whole SoCs brought up by their firmware (docs/simulator.md)")
    ap.add_argument("--firmware", metavar="PATH|probe",
                    help="--soc: the ROM image (firmware.init; default: `make firmware`'s), or 'probe' "
                         "for the bring-up probe (give every node an id: -- --node-id I=ID ...)")
    shape = ap.add_mutually_exclusive_group()
    shape.add_argument("--split", action="store_const", const=True, default=None,
                       help="one Verilated model per node (docs/simulator.md, \"Split build\"; the default "
                            "above 4 nodes)")
    shape.add_argument("--one-model", dest="split", action="store_const", const=False,
                       help="one Verilated model of the whole cluster (the default up to 4 nodes)")
    ap.add_argument("--model", choices=tuple(LATENCY_MODELS),
                    help=f"latency model corner (default {DEFAULT_MODEL}): the harness's latencies and "
                         "the cables' delay (docs/simulator.md, \"Latency model\")")
    ap.add_argument("--cable-ns", type=float, metavar="NS",
                    help="cable delay (transceivers, clock crossings, propagation) instead of the model's")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- options for paranic-sim (see --help there)")
    a = ap.parse_args(argv)
    try:
        threshold = ber_to_threshold(a.ber)
        faults = fault_args(a.topo, a.ber_cable, a.cut, a.mend)
    except ValueError as e:
        ap.error(str(e))
    if a.firmware and not a.soc:
        ap.error("--firmware needs --soc")
    try:
        topo = Topology.parse(a.topo)
    except ValueError as e:
        ap.error(str(e))
    if a.split and a.soc:
        ap.error("--split: a SoC cluster has no split build")
    try:
        phy_delay = cable_cycles(a.model, a.cable_ns)
    except ValueError as e:
        ap.error(str(e))
    exe = build(topo, mtu=a.mtu, n_ctx=a.contexts, soc=a.soc, split=a.split, phy_delay=phy_delay)
    if a.build_only:
        print(exe)
        return 0
    fw: list[str] = []
    if a.soc:
        from .socbuild import make_firmware

        if a.firmware == "probe":
            image = make_firmware(topo.link_ports, probe_topo=str(topo))
        elif a.firmware:
            image = Path(a.firmware)
            if not image.is_file():
                ap.error(f"--firmware {a.firmware}: no such file")
        else:
            image = make_firmware(topo.link_ports)
        fw = ["--firmware", str(image.resolve())]
    sock = a.socket or str(socket_path(a.cluster))
    Path(sock).parent.mkdir(parents=True, exist_ok=True)
    extra = [x for x in a.args if x != "--"]
    model = ["--model", a.model] if a.model else []
    os.execv(str(exe), [str(exe), "--socket", sock, "--ber-threshold", str(threshold), *model, *faults, *fw,
                        *extra])
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
