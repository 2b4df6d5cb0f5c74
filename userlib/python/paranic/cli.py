"""The `paranic` command: the demo, benchmarks, running programs on a cluster,
topologies, protocol information."""

from __future__ import annotations

import argparse
import json
import sys

from paranic.spec import protocol as P
from paranic.spec.topo import Topology


def _cmd_info(a: argparse.Namespace) -> int:
    from . import __version__

    info = {
        "version": __version__,
        "header_bytes": P.HEADER_BYTES,
        "default_mtu": P.DEFAULT_MTU,
        "default_contexts": P.DEFAULT_CONTEXTS,
        "max_nodes": P.MAX_NODES,
        "target_clock_mhz": P.TARGET_CLK_HZ / 1e6,
        "rx_slot_bytes": P.rx_slot_bytes(P.DEFAULT_MTU),
    }
    if a.json:
        print(json.dumps(info))
    else:
        for k, v in info.items():
            print(f"{k:20s} {v}")
    return 0


def _parse_down(t: Topology, text: str) -> list[tuple[int, int]]:
    """``NODE:PORT[,NODE:PORT...]`` (PORT a name: xp, xm, yp, ym) -> (node, port) pairs."""
    out = []
    for item in filter(None, text.split(",")):
        node, _, port = item.partition(":")
        try:
            n, p = int(node), P.Port[port.strip().upper()]
        except (ValueError, KeyError):
            raise ValueError(f"bad failed link {item!r}: use NODE:PORT, PORT one of "
                             f"{', '.join(P.Port(q).name.lower() for q in t.ports)}") from None
        if not 0 <= n < t.nodes or p not in t.ports:
            raise ValueError(f"{t} has no link port {p.name.lower()} on node {n}")
        out.append((n, int(p)))
    return out


def _cmd_topo(a: argparse.Namespace) -> int:
    try:
        t = Topology.parse(a.topology)
        down = _parse_down(t, a.down or "")
    except ValueError as e:
        print(f"paranic topo: {e}", file=sys.stderr)
        return 2
    nodes = [a.node] if a.node is not None else range(t.nodes)
    if a.node is not None and not 0 <= a.node < t.nodes:
        print(f"paranic topo: node {a.node} not in {t}", file=sys.stderr)
        return 2
    tables = {n: [P.Port(p).name for p in t.table(n, down=down)] for n in nodes}
    if a.json:
        print(json.dumps({"topology": str(t), "down": [[n, P.Port(p).name] for n, p in down],
                          "tables": tables}))
        return 0
    print(f"{t}: {t.nodes} nodes, {t.link_ports} link ports per router, X-then-Y routing")
    if down:
        print("failed links: " + ", ".join(f"{n}:{P.Port(p).name.lower()}" for n, p in down)
              + " (their rings become lines; DROP: cut off)")
    print("node  " + " ".join(f"{d:>5d}" for d in range(t.nodes)))
    for n, row in tables.items():
        print(f"{n:4d}  " + " ".join(f"{p:>5s}" for p in row))
    return 0


MSG_BENCHES = ("pairwise", "pingpong", "stream", "messages", "overhead", "barrier")


#: Benchmarks with a module of their own in paranic.bench (imported when asked for: each
#: pulls in what it measures), each with ``run(args)``.
BENCH_MODULES = {"router": "router_cli", "layers": "layers", "mpi": "mpi", "ber": "ber", "faults": "faults",
                 "collective": "collective", "simspeed": "simspeed", "wide": "wide"}


def _cmd_bench(a: argparse.Namespace) -> int:
    if a.what in BENCH_MODULES:
        import importlib

        return importlib.import_module(f"{__package__}.bench.{BENCH_MODULES[a.what]}").run(a)
    if a.what in MSG_BENCHES:
        from .bench import msg_cli

        return msg_cli.run(a.what, a)
    print(f"paranic bench: unknown benchmark {a.what!r}", file=sys.stderr)
    return 2


def _cmd_run(a: argparse.Namespace) -> int:
    from . import runjob

    return runjob.run(a)


def _cmd_mpirun(a: argparse.Namespace) -> int:
    from . import mpirun

    return mpirun.run(a)


def _cmd_selftest(a: argparse.Namespace) -> int:
    from . import runjob

    a.program = [sys.executable, "-m", "paranic.selftest"]
    return runjob.run(a)


def _cmd_daemon(a: argparse.Namespace) -> int:
    from . import daemon

    return daemon.run(a)


def _cmd_boards(a: argparse.Namespace) -> int:
    from . import boardtool

    return boardtool.run(a)


def _cmd_demo(a: argparse.Namespace) -> int:
    from . import demo

    return demo.run(a)


def _cmd_cluster(a: argparse.Namespace) -> int:
    from . import clusterstatus

    return clusterstatus.run(a)


class _Parser(argparse.ArgumentParser):
    """Bad usage is one line (``paranic run: error: argument --ber: ...``) and exit 2,
    not a usage dump; ``--help`` still prints the usage. Subcommands' parsers are of
    this class too (argparse makes them of their parent's)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (--help: usage)\n")


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="paranic", description="ParaNIC cluster interconnect tools")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("info", help="protocol constants and version")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("topo", help="routing tables of a ring or torus (ring:N, torus:XxY)")
    p.add_argument("topology")
    p.add_argument("--down", metavar="NODE:PORT,...",
                   help="failed links (either end of a cable), e.g. 0:xp,5:ym: route around them "
                        "as the firmware does")
    from .cliopts import int_in
    p.add_argument("--node", type=int_in(0, P.MAX_NODES - 1))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_topo)

    p = sub.add_parser("bench", help="benchmarks: router, pairwise, pingpong, stream, messages (all three), "
                                     "overhead, barrier, layers (ParaStation's Table 3), faults (firmware bring-up, cable pull, "
                                     "goodput at bit-error rates), ber (rawdata delivered or an error at bit-error rates, no firmware), mpi (MPI over ParaNIC vs Open MPI's TCP and "
                                     "shared memory), collective (allreduce in software over ports vs the NIC barrier, sim), simspeed (the simulator's cycles/s; --load: simulated latency under machine load), "
                                     "wide (router + link datapath at 64/128/256 bits: stream payload fraction and hop, Migen simulation)",
                       description="router: the gateware router in Verilator. The others run pn_bench "
                                   "through libparanic: hw_ns on the cluster simulator, sw_ns natively.")
    p.add_argument("what", choices=[*BENCH_MODULES, *MSG_BENCHES])
    p.add_argument("--json", action="store_true", help="print one JSON object {\"rows\": [...], ...}")
    p.add_argument("--plot", metavar="FILE.png", help="write a plot")
    p.add_argument("--quick", action="store_true", help="fewer sweep points / iterations")
    from paranic.spec.sim import DEFAULT_MODEL, LATENCY_MODELS
    p.add_argument("--model", choices=tuple(LATENCY_MODELS), default=None,
                   help=f"the simulator's latency model corner (default {DEFAULT_MODEL}; "
                        "docs/simulator.md, \"Latency model\")")
    from .bench import msg_cli
    msg_cli.add_arguments(p)
    from .bench import layers
    layers.add_arguments(p)
    from .bench import faults
    faults.add_arguments(p)
    from .bench import simspeed
    simspeed.add_arguments(p)
    from .bench import collective
    collective.add_arguments(p)
    from .bench import wide
    wide.add_arguments(p)
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("run", help="run a program on N nodes of a sw or simulated cluster",
                       description="paranic run [--backend sw|sim] [--nodes N] -- PROGRAM ARGS")
    from . import runjob
    runjob.add_arguments(p)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("mpirun", help="run an MPI program (Open MPI) over ParaNIC's libfabric provider on a sw or "
                                      "simulated cluster (docs/mpi.md)",
                       description="paranic mpirun [--backend sw|sim] -np N [--ppn P] [--transport paranic|tcp|sm] "
                                   "-- PROGRAM ARGS")
    from . import mpirun
    mpirun.add_arguments(p)
    p.set_defaults(func=_cmd_mpirun)

    p = sub.add_parser("selftest", help="check a cluster: rawdata all-to-all, HAL PIO and DMA round the "
                                        "ring, barriers, one Python process per node (the bindings)")
    runjob.add_arguments(p)
    p.set_defaults(func=_cmd_selftest, program=[])

    p = sub.add_parser("daemon", help="paranicd: membership table, jobs and attached processes; "
                                      "start/stop a sw cluster's daemons")
    from . import daemon
    daemon.add_arguments(p)
    p.set_defaults(func=_cmd_daemon)

    p = sub.add_parser("boards", help="board targets: list, gen, lint (Verilator), report (yosys resources)",
                       description="The LiteX board targets of boards/ without Vivado (docs/boards.md).")
    from . import boardtool
    boardtool.add_arguments(p)
    p.set_defaults(func=_cmd_boards)

    p = sub.add_parser("cluster", help="cluster status: firmware state, topology, ids, links and counters "
                                       "of every node (sim, pci, sw)")
    from . import clusterstatus
    clusterstatus.add_arguments(p)
    p.set_defaults(func=_cmd_cluster)

    p = sub.add_parser("demo", help="ParaStation's benchmarks on the simulated cluster (make demo)")
    from . import demo
    demo.add_arguments(p)
    p.set_defaults(func=_cmd_demo)

    a = ap.parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    raise SystemExit(main())
