"""Driving the Migen twin of the route kernel (hw/route_fn.py) in Migen's simulator with
the kernel's vectors (paranic.hls.RouteCase): one request per cycle, the table answered
through the ap_memory port by a model of a latency-1 RAM, answers collected by ap_done.

One generator does all three each cycle (Migen's simulator pays per generator switch):
it reads the outputs the last clock edge produced, answers the table read of the request
the unit took at that edge, and puts the next request on the inputs.
"""

from __future__ import annotations

from migen.sim import run_simulation

from paranic.hls import RouteCase
from paranic.hw.route_fn import RouteFn


def run_route_fn(cases: list[RouteCase], div_bits: int = 4) -> list[int]:
    dut = RouteFn(div_bits)
    reqs = [(c, c.topo.coords(c.node), d) for c in cases for d in c.dsts]
    got: list[int] = []

    def gen():
        prev_table = None                 # the table of the request the unit holds now
        for i in range(len(reqs) + dut.latency + 2):
            if (yield dut.ap_done):
                got.append((yield dut.ap_return))
            if prev_table is not None and (yield dut.table_ce0):
                yield dut.table_q0.eq(prev_table[(yield dut.table_address0)])
            if i < len(reqs):
                c, (x, y), d = reqs[i]
                yield dut.ap_start.eq(1)
                yield dut.dst.eq(d)
                yield dut.node_x.eq(x)
                yield dut.node_y.eq(y)
                yield dut.dim_x.eq(c.topo.x)
                yield dut.dim_y.eq(c.topo.y)
                prev_table = c.table
            else:
                yield dut.ap_start.eq(0)
                prev_table = None
            yield

    run_simulation(dut, gen())
    return got
