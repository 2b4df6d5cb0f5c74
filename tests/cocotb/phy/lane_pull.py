"""The cable-pull check both transceiver benches run (tb_gt.py: 8b/10b, tb_gt66.py:
64b/66b): with both lanes up, cut the a->b lane model, see b's lane (only b's) go down
once, mend it and see b come up again. ``bench``: the bench, started; ``ab``: its lane
model of the a->b direction (anything with a ``cut`` attribute)."""

from __future__ import annotations

from cocotb.triggers import Timer


async def cable_pull(dut, bench, ab) -> None:
    up_ns = await bench.wait_up()
    await Timer(5000, unit="ns")
    assert int(dut.a_gt_up.value) == 1 and int(dut.b_gt_up.value) == 1
    downs0 = int(dut.b_gt_downs.value)
    ab.cut = True
    t = 0
    while int(dut.b_gt_up.value):
        await Timer(100, unit="ns")
        t += 100
        assert t < 20_000, "b's lane still up 20 us after the cut"
    down_ns = t
    assert int(dut.a_gt_up.value) == 1, "the other direction went down too"
    await Timer(2000, unit="ns")
    assert int(dut.b_gt_downs.value) == downs0 + 1
    ab.cut = False
    t = 0
    while not int(dut.b_gt_up.value):
        await Timer(500, unit="ns")
        t += 500
        assert t < 100_000, "b's lane did not come back"
    dut._log.info("up after %d ns; cut seen after %d ns; back up %d ns after the repair",
                  up_ns, down_ns, t)
