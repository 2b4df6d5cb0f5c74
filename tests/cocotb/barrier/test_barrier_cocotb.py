"""Builds the BarrierUnit Verilog and runs the cocotb bench tb_barrier.py on Verilator,
once per barrier mode (the Verilog has both; ``mode`` is an input)."""

from pathlib import Path

import pytest

from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog
from paranic.hw.barrier import BarrierUnit

NAME = "barrier_unit"
CASES = {
    "tree": ["tree_exact_flow", "tree_fanout8", "tree_bad_input", "tree_garbage"],
    "a2a": ["a2a_exact_flow", "a2a_sixteen", "a2a_bad_input", "a2a_garbage"],
}


def _verilog() -> Path:
    u = BarrierUnit(n_ctx=4)
    ios = {u.node_id, u.nodes, u.radix_log2, u.mode, u.enable, u.participants, u.enter, u.enter_ctx,
           u.done, u.done_ctx, u.episode}
    ios |= {getattr(u, c) for c in BarrierUnit.COUNTERS}
    for ep in (u.sink, u.source):
        ios |= {ep.valid, ep.ready, ep.first, ep.last, ep.data, ep.error}
    return write_verilog(u, ios, NAME, BUILD_ROOT / "verilog" / NAME)


@pytest.mark.parametrize("mode", sorted(CASES))
def test_barrier_cocotb(mode):
    v = _verilog()
    tests, failed = run_cocotb(NAME, [v], NAME, "tb_barrier", test_dir=Path(__file__).parent,
                               testcase=CASES[mode])
    assert tests == len(CASES[mode]) and failed == 0
