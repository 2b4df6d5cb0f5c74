"""cocotb bench: two LinkLayers over two Pcs66Adapters and a modelled 64b/66b serial lane.

Each side has its own sys and tx oscillator (``GT66_PPM_A``/``_B`` offsets in ppm,
positive = faster); each receiver runs on the far transmitter's clock. Per transmitter
clock the lane model (line66.Line) moves the G raw bits to the far receiver with a
random offset, bit errors and slips. Router ports: the link bench's models (tb_link).

Parameters (environment): GT66_G, GT66_MTU, GT66_PACKETS, GT66_TX_PS (nominal tx clock
period), GT66_SYS_PS (default 6400), GT66_DW (64; packets as beats), GT66_PPM_A,
GT66_PPM_B, GT66_SEED, GT66_BER, GT66_SLIPS,
GT66_EXPECT (clean | errors | compensation), GT66_MAX_NS.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "link"))
from tb_link import Side, make_packets  # noqa: E402
from lane_pull import cable_pull  # noqa: E402

from line66 import Line  # noqa: E402
from paranic.bench.wide import make_beats  # noqa: E402
from paranic.hw.link import COUNTERS  # noqa: E402
from paranic.hw.phy.gt66 import COUNTERS as GT66_COUNTERS  # noqa: E402
from paranic.spec import protocol as P  # noqa: E402



def env(name, default):
    return type(default)(os.environ.get(name, default))


def _period(nominal_fs: int, ppm: float) -> int:
    return 2 * round(nominal_fs / (1 + ppm * 1e-6) / 2)


def counters(dut, side):
    c = {n: int(getattr(dut, f"{side}_{n}").value) for n, _, _ in COUNTERS}
    c.update({"gt_" + n: int(getattr(dut, f"{side}_gt_{n}").value) for n, _, _ in GT66_COUNTERS})
    return c


class Bench:
    def __init__(self, dut):
        self.dut = dut
        self.g = env("GT66_G", 64)
        self.rng = random.Random(env("GT66_SEED", 1))
        ber = env("GT66_BER", 0.0)
        self.lines = {k: Line(self.g, random.Random(self.rng.random()), ber) for k in ("ab", "ba")}

    async def start(self):
        dut = self.dut
        tx_fs = env("GT66_TX_PS", 6206) * 1000
        sys_fs = env("GT66_SYS_PS", 6400) * 1000
        for s, ppm in (("a", env("GT66_PPM_A", 0.0)), ("b", env("GT66_PPM_B", 0.0))):
            for clk, fs in ((f"sys_{s}_clk", sys_fs), (f"tx_{s}_clk", tx_fs)):
                cocotb.start_soon(Clock(getattr(dut, clk), _period(fs, ppm), unit="fs").start())
            for r in ("sys", "tx", "rx"):
                getattr(dut, f"{r}_{s}_rst").value = 1
            for n in ("tx_valid", "drained"):
                getattr(dut, f"{s}_{n}").value = 0
            getattr(dut, f"{s}_rx_ready").value = 1
            getattr(dut, f"{s}_gt_tx_ready").value = 1
            getattr(dut, f"{s}_gt_rx_ready").value = 1
            getattr(dut, f"{s}_gt_rx_data").value = 0
        await Timer(100, unit="ns")
        for s in ("a", "b"):
            for r in ("sys", "tx", "rx"):
                getattr(dut, f"{r}_{s}_rst").value = 0
        cocotb.start_soon(self.line("a", "b", self.lines["ab"]))
        cocotb.start_soon(self.line("b", "a", self.lines["ba"]))

    async def line(self, src: str, dst: str, lane: Line):
        clk = getattr(self.dut, f"tx_{src}_clk")
        txd = getattr(self.dut, f"{src}_gt_tx_data")
        rxd = getattr(self.dut, f"{dst}_gt_rx_data")
        while True:
            await FallingEdge(clk)
            rxd.value = lane.step(int(txd.value))

    async def wait_up(self, limit_ns: int = 200_000) -> int:
        t = 0
        while not (int(self.dut.a_up.value) and int(self.dut.b_up.value)):
            await Timer(500, unit="ns")
            t += 500
            assert t < limit_ns, f"link not up after {t} ns: a {counters(self.dut, 'a')}"
        return t


async def run_side(side: Side, clk, done: list):
    while not done:
        await FallingEdge(clk)
        side.step(0.0, 1.0, 0.0)


@cocotb.test()
async def gt66_traffic(dut):
    """Full-load random traffic both ways; exact delivery."""
    npk = env("GT66_PACKETS", 300)
    mtu = env("GT66_MTU", 256)
    expect = env("GT66_EXPECT", "clean")
    max_ns = env("GT66_MAX_NS", 20_000_000)
    b = Bench(dut)
    await b.start()
    up_ns = await b.wait_up()
    slips0 = {s: int(getattr(dut, f"{s}_gt_rx_slips").value) for s in "ab"}
    rng = random.Random(env("GT66_SEED", 1) + 100)
    buf = 4096
    dw = env("GT66_DW", 64)
    pa = [make_beats(p, dw) for p in make_packets(rng, npk, mtu, 1, 2)]
    pb = [make_beats(p, dw) for p in make_packets(rng, npk, mtu, 2, 1)]
    A = Side(dut, "a", pa, buf, random.Random(1), P.packet_beats(mtu, dw))
    B = Side(dut, "b", pb, buf, random.Random(2), P.packet_beats(mtu, dw))
    done: list = []
    cocotb.start_soon(run_side(A, dut.sys_a_clk, done))
    cocotb.start_soon(run_side(B, dut.sys_b_clk, done))
    slips = env("GT66_SLIPS", 0)
    t = 0
    next_slip = 20_000
    while not (len(A.received) == npk and len(B.received) == npk):
        await Timer(1000, unit="ns")
        t += 1000
        assert t < max_ns, (f"timeout: a got {len(A.received)}, b got {len(B.received)}; "
                            f"a {counters(dut, 'a')} b {counters(dut, 'b')}")
        if slips and t >= next_slip:
            slips -= 1
            next_slip = t + 20_000
            b.lines[rng.choice(["ab", "ba"])].slip(repeat=rng.random() < 0.5)
    for _ in range(40):
        await Timer(1000, unit="ns")
        if int(dut.a_gt_up.value) and int(dut.b_gt_up.value):
            break
    done.append(1)
    ca, cb = counters(dut, "a"), counters(dut, "b")
    words = sum(len(p) for p in pa)   # beats
    dut._log.info("up after %d ns (slips to lock a %d b %d); %d packets (%d words) each way "
                  "in %d ns", up_ns, slips0["a"], slips0["b"], npk, words, t)
    dut._log.info("a: %s", ca)
    dut._log.info("b: %s", cb)
    dut._log.info("line: bit errors ab %d ba %d, slips ab %d ba %d", b.lines["ab"].errors,
                  b.lines["ba"].errors, b.lines["ab"].slips, b.lines["ba"].slips)
    assert B.received == pa, "a->b: packets lost, duplicated, corrupted or reordered"
    assert A.received == pb, "b->a: packets lost, duplicated, corrupted or reordered"
    for c in (ca, cb):
        assert c["gt_rx_overflow"] == 0 and c["gt_tx_lost"] == 0, c
        assert c["rx_overflows"] == 0
        assert c["gt_up"] == 1
    if expect == "errors":
        assert b.lines["ab"].errors + b.lines["ba"].errors > 0
        assert ca["replays"] + cb["replays"] > 0
        assert sum(c[n] for c in (ca, cb) for n in ("crc_errors", "ctrl_errors", "seq_errors")) > 0
        if env("GT66_SLIPS", 0):
            assert ca["gt_rx_lock_losses"] + cb["gt_rx_lock_losses"] > 0
    else:
        for c in (ca, cb):
            for n in ("crc_errors", "ctrl_errors", "seq_errors", "replays", "timeouts",
                      "gt_rx_bad_headers", "gt_rx_bad_beats", "gt_rx_lock_losses"):
                assert c[n] == 0, (n, c)
        assert ca["gt_tx_fillers_forced"] > 0 and cb["gt_tx_fillers_forced"] > 0
    if expect == "compensation":
        assert cb["gt_rx_fillers_dropped"] > 0


@cocotb.test()
async def gt66_cable_pull(dut):
    """Cut the a->b lane: b's lane goes down (a's stays up); restore: b comes up again."""
    b = Bench(dut)
    await b.start()
    await cable_pull(dut, b, b.lines["ab"])


@cocotb.test()
async def gt66_throughput(dut):
    """MTU packets a -> b only, the line slower than sys: payload bits delivered per line
    bit between the first and the last packet (logged; checked against
    GT66_EXPECT_FRACTION within 0.5 %)."""
    npk = env("GT66_PACKETS", 300)
    mtu = env("GT66_MTU", 256)
    g = env("GT66_G", 64)
    b = Bench(dut)
    await b.start()
    await b.wait_up()
    rng = random.Random(5)
    dw = env("GT66_DW", 64)
    pa = [make_beats(p, dw) for p in make_packets(rng, npk, mtu, 1, 2, fixed=mtu)]
    A = Side(dut, "a", pa, 4096, random.Random(1), P.packet_beats(mtu, dw))
    B = Side(dut, "b", [], 4096, random.Random(2), P.packet_beats(mtu, dw))
    done: list = []
    marks = {}
    line_clocks = [0]

    async def count_line():
        while not done:
            await FallingEdge(dut.tx_a_clk)
            line_clocks[0] += 1

    async def watch_b():
        while not done:
            await FallingEdge(dut.sys_b_clk)
            B.step(0.0, 1.0, 0.0)
            n = len(B.received)
            if n and n not in marks:
                marks[n] = line_clocks[0]

    cocotb.start_soon(count_line())
    cocotb.start_soon(run_side(A, dut.sys_a_clk, done))
    cocotb.start_soon(watch_b())
    t = 0
    while len(B.received) < npk:
        await Timer(1000, unit="ns")
        t += 1000
        assert t < 20_000_000, f"timeout: b got {len(B.received)}"
    done.append(1)
    assert B.received == pa
    payload = (npk - 1) * 64 * P.payload_words(mtu)
    frac = payload / ((marks[npk] - marks[1]) * g)
    ca = counters(dut, "a")
    expect = env("GT66_EXPECT_FRACTION", 0.0)
    dut._log.info("payload fraction of the line %.4f (expected %.4f) over %d packets; "
                  "a: fillers dropped %d forced %d", frac, expect, npk - 1,
                  ca["gt_tx_fillers_dropped"], ca["gt_tx_fillers_forced"])
    assert ca["gt_tx_fillers_dropped"] > 0, "the line was not the bottleneck"
    assert abs(frac - expect) < 0.005 * expect, (frac, expect)
