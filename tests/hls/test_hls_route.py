"""The HLS kernel `route` in C simulation (g++ against the ap_types headers), on vectors
from paranic.spec.topo (the C routing function spec/c/pn_route.c): docs/hls.md."""

from __future__ import annotations

import re

import pytest

from paranic import hls
from paranic.paths import INCLUDE
from paranic.spec import kernels as K
from paranic.spec import protocol as P
from paranic.spec.topo import Topology


@pytest.mark.parametrize("topo,nodes", [("ring:8", None), ("torus:4x4", None),
                                        ("torus:64x64", list(hls.TORUS64_NODES))])
def test_route_kernel_matches_spec(topo, nodes):
    t = Topology.parse(topo)
    cases = hls.route_vectors(t, nodes)
    got = hls.run_route(cases)
    assert hls.check_route(cases, got) == []
    # Every port the topology has occurs (the vectors exercise every direction), and DROP
    # for the destination one past the topology (none past a 4096-node one).
    drop = {int(P.Port.DROP)} if t.nodes < P.MAX_NODES else set()
    assert set(got) == {int(P.Port.LOCAL), *drop, *map(int, t.ports)}


def test_route_fallback_beyond_the_table():
    """A 64x64 torus with a table of DROPs: destinations inside the table come from the
    table (DROP), every one beyond it is computed, and agrees with the spec."""
    t = Topology.torus(64, 64)
    cases = hls.route_vectors(t, [0, 2080, 4095], poison=True)
    got = hls.run_route(cases)
    assert hls.check_route(cases, got) == []
    for c in cases:
        answers = got[:len(c.dsts)]
        got = got[len(c.dsts):]
        assert all(a == P.Port.DROP for d, a in zip(c.dsts, answers) if d < K.ROUTE_TABLE_NODES)
        beyond = [a for d, a in zip(c.dsts, answers) if K.ROUTE_TABLE_NODES <= d < t.nodes]
        assert len(beyond) == t.nodes - K.ROUTE_TABLE_NODES and P.Port.DROP not in beyond


def test_route_table_wins_inside_it():
    """Inside the table the kernel follows the table, even where it disagrees with
    dimension order (the firmware's detours around failed links)."""
    t = Topology.torus(4, 4)
    down = [(0, int(P.Port.XP))]
    c = hls.RouteCase(t, 0, t.table(0, depth=K.ROUTE_TABLE_NODES, down=down), list(range(16)),
                      [t.route(0, d, down) for d in range(16)])
    assert c.expect != [t.route(0, d) for d in range(16)]
    assert hls.run_route([c]) == c.expect


def test_route_random_agrees_with_spec():
    cases = hls.random_route_cases(5000, seed=11)
    assert hls.check_route(cases, hls.run_route(cases)) == []


def test_route_signature_is_the_spec_port_list():
    """The kernel's C++ top function takes exactly paranic.spec.kernels.ROUTE_ARGS, with
    the widths the generated header gives, and its pragmas give the ports' protocols."""
    src = (hls.HLS / "route" / "route.cpp").read_text()
    hdr = (hls.HLS / "include" / "pn_hls.h").read_text() + \
        (INCLUDE / "paranic" / "pn_protocol.h").read_text()
    defs = {m[0]: int(m[1]) for m in re.findall(r"#define (PN_\w+) (\d+)\b", hdr)}
    typedefs = {m[1]: defs[m[0]] for m in re.findall(r"typedef ap_uint<(\w+)> (\w+);",
                                                     (hls.HLS / "route" / "route.h").read_text())}
    sig = re.search(r"^port_t route\(([^)]*)\)", src, re.M)
    assert sig, "top function route() not found"
    args = []
    for a in sig.group(1).split(","):
        m = re.fullmatch(r"\s*(?:const\s+)?(\w+)\s+(\w+)(\[\w+\])?\s*", a)
        assert m, a
        args.append((m.group(2), typedefs[m.group(1)]))
    assert tuple(args) == K.ROUTE_ARGS
    pragmas = {port: mode for mode, port in re.findall(r"#pragma HLS INTERFACE mode=(\w+) port=(\w+)", src)}
    assert pragmas == {"return": "ap_ctrl_hs", "table": "ap_memory",
                       **{n: "ap_none" for n, _ in K.ROUTE_ARGS if n != "table"}}
    assert "#pragma HLS PIPELINE II=1" in src
    # The RTL ports those give (Vitis's naming) are the spec's list.
    rtl = {"ap_clk", "ap_rst", "ap_start", "ap_done", "ap_idle", "ap_ready", "ap_return",
           *(n for n, _ in K.ROUTE_ARGS if n != "table"), "table_address0", "table_ce0", "table_q0"}
    assert {p[0] for p in K.ROUTE_PORTS} == rtl


def test_route_tb_checks_itself():
    """The self-checking form (Vitis csim/cosim) fails on a wrong expectation."""
    import subprocess
    t = Topology.ring(8)
    cases = hls.route_vectors(t, [0])
    exe = hls.build_tb("route")
    good = hls.route_stdin(cases, expect=True)
    assert subprocess.run([str(exe)], input=good, capture_output=True, text=True).returncode == 0
    cases[0].expect[3] = int(P.Port.YM)
    r = subprocess.run([str(exe)], input=hls.route_stdin(cases, expect=True), capture_output=True, text=True)
    assert r.returncode == 1 and "expected 4" in r.stderr
