"""The simulated cluster routes every packet with the route kernel's C++ (route_fn "sim":
sim/harness/route_dpi.sv calls route() through DPI-C; docs/simulator.md, "The route
kernel"): the shell has the kernel's ports, the cluster's Verilog instantiates it at
every router input, and the harness counts the C++ kernel's routing decisions."""

from __future__ import annotations

import json
import re

from simtest import BUILD, launch, sim_socket
from paranic.sim import build as simbuild, run as simrun
from paranic.spec import kernels as K


def test_dpi_shell_has_the_kernel_ports():
    """route_dpi.sv's port list is ROUTE_PORTS (names, directions, widths, order): the
    shell includes the list the build generates from the spec, and takes every width it
    uses from its ports instead of spelling one out."""
    text = simbuild.ROUTE_DPI_SV.read_text()
    start = text.index("module route_dpi")
    head = text[start:text.index(");", start)]
    assert '`include "route_dpi_ports.svh"' in head and "input" not in head and "output" not in head
    assert not re.findall(r"\[\d+:0\]|\d+'d0", text), "a width spelled out in route_dpi.sv"
    srcs = simbuild.route_dpi_sources()
    assert srcs == [simbuild.ROUTE_DPI_SV, simbuild.ROUTE_DPI_PORTS_SVH]
    ports = simbuild.ROUTE_DPI_PORTS_SVH.read_text()
    got = [(name, d[0], int(hi) + 1 if hi else 1) for d, hi, name in
           re.findall(r"(input|output)\s+wire\s*(?:\[(\d+):0\])?\s*(\w+)", ports)]
    assert got == [(n, d, w) for n, d, w, _doc in K.ROUTE_PORTS]


def test_cluster_routes_with_the_cpp_kernel(sim_binary, userlib_build):
    """Every router input of the 4-node ring is a route_dpi instance, and traffic between
    two nodes is routed by the C++ kernel: the harness's count of its routing decisions
    is one per packet and router (at least that; a build with another route_fn counts 0;
    well under two: the shell's combinational call, evaluated as often as Verilator
    likes, is not what counts). The shell answers a table hit in the cycle the entry
    arrives, as the Migen twin does: the 8-byte one-way hardware path between
    neighbours (two routers) is 96 cycles on the default (realistic) model, where a
    registered answer costs a cycle per router (98). (103 before the link layer lost its
    three register stages, stores were acknowledged in the cycle they are presented, the
    DMA write port's arbiter granted at once and the PIO engine bypassed the header:
    docs/host-interface.md, "The whole path".)"""
    info = json.loads((sim_binary.parent / "info.json").read_text())
    verilog = open(info["verilog"]).read()
    assert len(re.findall(r"^route_dpi\s+\w+\s*\(", verilog, re.M)) == 4 * 3
    sim = simrun.start("ring:4", socket=sim_socket("routedpi"))
    try:
        # 50 round trips of 8 bytes between nodes 0 and 1 (neighbours): each message is
        # routed at its source's router and at its destination's
        r = launch(sim, [str(BUILD / "simtests" / "sim_latency"), "50", "8"], 2, "dpi", timeout=200)
    finally:
        rc = sim.stop()
    assert r.rc == 0 and not r.fails(), r.out
    mn, med = map(int, re.search(r"min (\d+) median (\d+) max", r.ok(0, "latency")).groups())
    assert (mn, med) == (96, 96), r.ok(0, "latency")
    log = sim.log_text()
    assert rc == 0, log[-3000:]
    m = re.search(r"route kernel: (\d+) routing decisions by its C\+\+", log)
    assert m, log[-3000:]
    assert 2 * 50 * 2 <= int(m.group(1)) < 2 * 2 * 50 * 2, m.group(0)
    print(f"\n{m.group(0)}")
