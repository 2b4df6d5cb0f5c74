"""Driving the Migen twin of the route kernel (hw/route_fn.py) in Migen's simulator with
the kernel's vectors (paranic.hls.RouteCase): one request per cycle, the table answered
through the ap_memory port by a model of a latency-1 RAM, answers collected by ap_done."""

from __future__ import annotations

from migen.sim import run_simulation

from paranic.hls import RouteCase
from paranic.hw.route_fn import RouteFn


def run_route_fn(cases: list[RouteCase]) -> list[int]:
    dut = RouteFn()
    reqs = [(c, d) for c in cases for d in c.dsts]
    issued: list[list[int]] = []     # the table of each request, in issue order
    got: list[int] = []
    state = {"done": False}

    def driver():
        for c, d in reqs:
            x, y = c.topo.coords(c.node)
            yield dut.ap_start.eq(1)
            yield dut.dst.eq(d)
            yield dut.node_x.eq(x)
            yield dut.node_y.eq(y)
            yield dut.dim_x.eq(c.topo.x)
            yield dut.dim_y.eq(c.topo.y)
            issued.append(c.table)
            yield
        yield dut.ap_start.eq(0)
        for _ in range(8):
            yield
        state["done"] = True

    def memory():
        n = 0
        while not state["done"]:
            adr = yield dut.table_address0
            ce = yield dut.table_ce0
            if ce:
                yield dut.table_q0.eq(issued[n][adr])
                n += 1
            yield

    def collector():
        while not state["done"]:
            if (yield dut.ap_done):
                got.append((yield dut.ap_return))
            yield

    run_simulation(dut, [driver(), memory(), collector()])
    return got
