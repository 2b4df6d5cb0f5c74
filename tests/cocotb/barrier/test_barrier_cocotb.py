"""Builds the BarrierUnit Verilog and runs the cocotb bench tb_barrier.py on Verilator."""

from pathlib import Path

from paranic.hdlsim import BUILD_ROOT, run_cocotb, write_verilog
from paranic.hw.barrier import BarrierUnit

NAME = "barrier_unit"


def _verilog() -> Path:
    u = BarrierUnit(n_ctx=4)
    ios = {u.node_id, u.nodes, u.radix_log2, u.enable, u.participants, u.enter, u.enter_ctx,
           u.done, u.done_ctx, u.episode}
    ios |= {getattr(u, c) for c in BarrierUnit.COUNTERS}
    for ep in (u.sink, u.source):
        ios |= {ep.valid, ep.ready, ep.first, ep.last, ep.data, ep.error}
    return write_verilog(u, ios, NAME, BUILD_ROOT / "verilog" / NAME)


def test_barrier_cocotb():
    v = _verilog()
    tests, failed = run_cocotb(NAME, [v], NAME, "tb_barrier", test_dir=Path(__file__).parent)
    assert tests == 4 and failed == 0
