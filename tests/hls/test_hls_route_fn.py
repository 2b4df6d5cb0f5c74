"""The Migen twin of the route kernel (hw/route_fn.py): the kernel's vectors in Migen's
simulator, agreement with the C++ kernel on random cases, the table, and the Vitis
Instance (only elaborated: its RTL exists where Vitis does). docs/hls.md."""

from __future__ import annotations

import re

import pytest
from migen import Module
from migen.fhdl.verilog import convert
from migen.sim import run_simulation

from paranic import hls
from paranic.hw.route_fn import RouteFn, RouteFnVitis, RouteUnit
from paranic.spec import kernels as K
from paranic.spec.protocol import Port
from paranic.spec.topo import Topology
from routefn_sim import run_route_fn


@pytest.mark.parametrize("topo,nodes,dsts,poison,div_bits", [
    ("ring:8", None, None, False, 4),
    ("torus:4x4", None, None, False, 4),
    ("torus:64x64", [2080], range(0, 4096, 5), False, 4),     # beyond the table: computed
    ("torus:64x64", [0], range(0, 4096, 9), True, 4),         # a table of DROPs
    ("torus:64x64", [4095], range(0, 4096, 11), False, 1),    # other divider pipelines
    ("torus:64x64", [63], range(0, 4096, 11), False, 5),
    ("torus:64x64", [64], range(0, 4096, 11), False, 12),
])
def test_route_fn_vectors(topo, nodes, dsts, poison, div_bits):
    cases = hls.route_vectors(Topology.parse(topo), nodes, None if dsts is None else list(dsts), poison)
    assert hls.check_route(cases, run_route_fn(cases, div_bits)) == []


def test_route_fn_rejects_bad_divider():
    for bad in (0, 13):
        with pytest.raises(ValueError):
            RouteFn(bad)


def _agree(count: int, seed: int) -> None:
    cases = hls.random_route_cases(count, seed)
    cpp = hls.run_route(cases)
    migen = run_route_fn(cases)
    assert len(cpp) == len(migen) == count
    mism = [(c.topo, c.node, d, a, b) for (c, d), a, b in
            zip(((c, d) for c in cases for d in c.dsts), cpp, migen) if a != b]
    assert mism == []
    assert hls.check_route(cases, cpp) == []


def test_cpp_and_migen_agree_5k():
    _agree(5000, seed=21)


@pytest.mark.slow
def test_cpp_and_migen_agree_100k():
    _agree(100_000, seed=22)


def test_route_unit_with_its_table():
    """RouteUnit: entries written through the table port, then one request per cycle
    through the real block RAM; answers after the twin's latency, in order."""
    t = Topology.torus(4, 4)
    node = 5
    table = t.table(node, depth=16)
    dut = RouteUnit()
    dsts = [3, 0, 15, 5, 300, 9, 16, 4095]
    exp = [t.route(node, d) for d in dsts]
    got, when = [], []

    def gen():
        for a, v in enumerate(table):
            yield dut.table_we.eq(1)
            yield dut.table_adr.eq(a)
            yield dut.table_dat.eq(v)
            yield
        yield dut.table_we.eq(0)
        x, y = t.coords(node)
        yield dut.node_x.eq(x)
        yield dut.node_y.eq(y)
        yield dut.dim_x.eq(4)
        yield dut.dim_y.eq(4)
        yield
        assert (yield dut.ap_idle)
        for cyc in range(len(dsts) + 10):
            if cyc < len(dsts):
                yield dut.ap_start.eq(1)
                yield dut.dst.eq(dsts[cyc])
            else:
                yield dut.ap_start.eq(0)
            if (yield dut.ap_done):
                got.append((yield dut.ap_return))
                when.append(cyc)
            yield
    run_simulation(dut, gen())
    assert got == exp
    # A generator's writes take effect at the next cycle: request i reaches the unit at
    # cycle i + 1, its answer comes the twin's latency later, one per cycle.
    lat = dut.fn.latency_table   # all of them in the table or DROP: the short path
    assert when == list(range(1 + lat, 1 + lat + len(dsts)))


def test_route_unit_table_init_and_errors():
    RouteUnit(table_init=[1, 2, 7])
    with pytest.raises(ValueError):
        RouteUnit(table_init=[8])
    with pytest.raises(ValueError):
        RouteUnit(table_init=[0] * (K.ROUTE_TABLE_NODES + 1))


def _ports_of(m: Module) -> dict[str, int]:
    return {name: len(getattr(m, name)) for name, *_ in K.ROUTE_PORTS if name not in ("ap_clk", "ap_rst")}


def test_twins_have_the_spec_ports():
    spec = {n: w for n, _d, w, _ in K.ROUTE_PORTS if n not in ("ap_clk", "ap_rst")}
    assert _ports_of(RouteFn()) == spec == _ports_of(RouteFnVitis())


def test_vitis_instance_elaborates():
    """RouteUnit(vitis=True) elaborates to an instance of the kernel's module `route`
    with every port of the spec connected, inputs and outputs the right way."""
    dut = RouteUnit(vitis=True)
    ios = {dut.ap_start, dut.dst, dut.node_x, dut.node_y, dut.dim_x, dut.dim_y, dut.ap_done,
           dut.ap_return, dut.ap_idle, dut.ap_ready, dut.table_we, dut.table_adr, dut.table_dat}
    v = str(convert(dut, ios=ios, name="unit"))
    m = re.search(r"^route\s+route(?:_\d+)?\s*\((.*?)\);", v, re.S | re.M)
    assert m, v[-2000:]
    conns = dict(re.findall(r"\.(\w+)\(([^()]*)\)", m.group(1)))
    assert set(conns) == {n for n, *_ in K.ROUTE_PORTS}
    assert conns["ap_clk"].strip() == "sys_clk" and conns["ap_rst"].strip() == "sys_rst"
    # The Migen twin is not in the Vitis build: its nodes = dim_x * dim_y multiplier is
    # emitted without the build option and absent with it.
    assert " * " not in v
    twin = RouteUnit(vitis=False)
    assert " * " in str(convert(twin, ios={twin.ap_start, twin.dst, twin.ap_return}, name="unit"))


def test_short_path_keeps_request_order():
    """A table hit answers in the cycle its table entry arrives (ap_done one cycle after
    ap_start, combinational from table_q0), a request beyond the table after latency;
    results in request order (ap_ctrl_hs): a table hit right behind a request beyond the
    table waits for it, and so does one whose answer would come out in the same cycle as
    the long one's (one ap_done per cycle); a hit right after that answer is short again."""
    t = Topology.torus(64, 64)
    node = 2080
    x, y = t.coords(node)
    dut = RouteFn()
    assert dut.latency_table == 1 and dut.latency == 5
    L = dut.latency
    # (cycle, dst): a hit alone, a computed one, a hit right behind it, then a hit alone;
    # a computed one and a hit whose short answer would collide with it; a computed one
    # and a hit answering right after it.
    reqs = {0: 5, 10: 3000, 11: 7, 30: 9, 40: 3000, 40 + L - 1: 5, 60: 3001, 60 + L: 6}
    got = []

    def gen():
        yield dut.node_x.eq(x)
        yield dut.node_y.eq(y)
        yield dut.dim_x.eq(64)
        yield dut.dim_y.eq(64)
        yield dut.table_q0.eq(int(Port.XM))      # a table of XM entries
        for cyc in range(80):
            if (yield dut.ap_done):
                got.append((cyc, (yield dut.ap_return)))
            yield dut.ap_start.eq(cyc in reqs)
            yield dut.dst.eq(reqs.get(cyc, 0))
            yield
    run_simulation(dut, gen())
    # a request set in cycle c reaches the unit at c + 1
    assert got == [(1 + 0 + 1, Port.XM), (1 + 10 + L, t.route(node, 3000)),
                   (1 + 10 + L + 1, Port.XM), (1 + 30 + 1, Port.XM),
                   (1 + 40 + L, t.route(node, 3000)), (1 + 40 + L - 1 + L, Port.XM),
                   (1 + 60 + L, t.route(node, 3001)), (1 + 60 + L + 1, Port.XM)]
