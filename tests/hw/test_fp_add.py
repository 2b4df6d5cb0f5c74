"""hw/fp_add.py: FPAdd against numpy's IEEE addition (binary32 and binary64), one operand
pair per cycle through the pipeline, in Migen's simulator."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from migen.sim import run_simulation

from paranic.hw.fp_add import FPAdd
from paranic.spec import kernels as K

QNAN = {32: 0x7FC00000, 64: 0x7FF8000000000000}


def _operands(rng: random.Random, bits: int, count: int) -> list[tuple[int, int]]:
    ebits, mbits = (8, 23) if bits == 32 else (11, 52)
    top = (1 << ebits) - 1

    def one():
        r = rng.random()
        sign = rng.getrandbits(1) << (bits - 1)
        if r < 0.3:
            return rng.getrandbits(bits)
        if r < 0.5:                     # subnormal or zero
            return sign | rng.getrandbits(mbits) >> rng.randrange(mbits)
        if r < 0.6:                     # infinity or NaN
            return sign | (top << mbits) | (rng.getrandbits(mbits) if rng.random() < 0.5 else 0)
        return sign | (rng.choice((1, 2, top - 2, top - 1, rng.randrange(1, top))) << mbits) | rng.getrandbits(mbits)
    out = []
    for _ in range(count):
        a = one()
        r = rng.random()
        if r < 0.2:
            b = a ^ (1 << (bits - 1)) ^ rng.getrandbits(3)      # (near) cancellation
        elif r < 0.3:
            b = a ^ rng.getrandbits(2)                          # near equal: ties
        else:
            b = one()
        out.append((a, b))
    return out


def _ieee(a: int, b: int, bits: int) -> int:
    t, f = (np.float32, "<I") if bits == 32 else (np.float64, "<Q")
    with np.errstate(all="ignore"):
        x = np.frombuffer(struct.pack(f, a), t)[0] + np.frombuffer(struct.pack(f, b), t)[0]
    return QNAN[bits] if np.isnan(x) else struct.unpack(f, x.tobytes())[0]


@pytest.mark.parametrize("bits", [32, 64])
def test_fp_add_is_ieee_round_to_nearest_even(bits):
    ops = _operands(random.Random(bits), bits, 1500)
    dut = FPAdd(*((8, 23) if bits == 32 else (11, 52)), QNAN[bits])
    got = []

    def gen():
        # the operands written in step i are on the inputs after its clock edge (Migen's
        # simulator), so their sum is read LATENCY steps later
        for i in range(len(ops) + dut.LATENCY + 1):
            if i < len(ops):
                yield dut.a.eq(ops[i][0])
                yield dut.b.eq(ops[i][1])
            yield
            if i >= dut.LATENCY and len(got) < len(ops):
                got.append((yield dut.result))

    run_simulation(dut, gen())
    bad = [(hex(a), hex(b), hex(g), hex(_ieee(a, b, bits))) for (a, b), g in zip(ops, got) if g != _ieee(a, b, bits)]
    assert len(got) == len(ops) and not bad, bad[:5]


def test_latency_is_the_kernels():
    """The adder's pipeline is the float add the collective kernel's fold schedule and the
    simulator's timing assume (spec ``COLL_FADD_CYCLES``)."""
    from paranic.spec import kernels as K
    assert FPAdd.LATENCY == K.COLL_FADD_CYCLES
