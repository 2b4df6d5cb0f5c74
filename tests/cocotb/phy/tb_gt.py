"""cocotb bench: two LinkLayers over two gt adapters and a modelled 8b/10b serial cable.

Each side has its own sys and tx oscillator (``GT_PPM_A``/``GT_PPM_B`` offsets in
ppm, positive = faster); each receiver runs on the far transmitter's clock (the
recovered clock). Per transmitter clock the lane model (gtmodel.SerialLane) encodes
the adapter's characters, serialises them, adds bit errors / slips / a cut, and
hands the far adapter what a GT with comma alignment would decode. The router ports
are the link bench's models (tests/cocotb/link/tb_link.py): random packets under
credits, checked for exact in-order delivery.

Parameters (environment): GT_NBYTES, GT_MTU, GT_PACKETS, GT_TX_PS (nominal tx clock
period; sys is 8 ns), GT_PPM_A, GT_PPM_B, GT_SEED, GT_BER, GT_SLIPS, GT_EXPECT
(line_limited | sys_limited | compensation | errors), GT_MAX_NS.
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

from gtmodel import SerialLane  # noqa: E402
from paranic.hw.link import COUNTERS  # noqa: E402
from paranic.hw.phy.gt import COUNTERS as GT_COUNTERS  # noqa: E402
from paranic.spec import protocol as P  # noqa: E402

SYS_FS = 8_000_000


def env(name, default):
    return type(default)(os.environ.get(name, default))


def _period(nominal_fs: int, ppm: float) -> int:
    """Period of an oscillator ``ppm`` fast, rounded to an even number of fs."""
    return 2 * round(nominal_fs / (1 + ppm * 1e-6) / 2)


def counters(dut, side):
    c = {n: int(getattr(dut, f"{side}_{n}").value) for n, _, _ in COUNTERS}
    c.update({"gt_" + n: int(getattr(dut, f"{side}_gt_{n}").value) for n, _, _ in GT_COUNTERS})
    return c


class Bench:
    def __init__(self, dut):
        self.dut = dut
        self.W = env("GT_NBYTES", 4)
        self.rng = random.Random(env("GT_SEED", 1))
        ber = env("GT_BER", 0.0)
        W = self.W
        self.lanes = {
            "ab": SerialLane(W, random.Random(self.rng.random()), ber, slip=self.rng.randrange(1, 10 * W)),
            "ba": SerialLane(W, random.Random(self.rng.random()), ber, slip=self.rng.randrange(1, 10 * W)),
        }

    async def start(self):
        dut = self.dut
        tx_fs = env("GT_TX_PS", 4000) * 1000
        for s, ppm in (("a", env("GT_PPM_A", 0.0)), ("b", env("GT_PPM_B", 0.0))):
            cocotb.start_soon(Clock(getattr(dut, f"sys_{s}_clk"), _period(SYS_FS, ppm), unit="fs").start())
            cocotb.start_soon(Clock(getattr(dut, f"tx_{s}_clk"), _period(tx_fs, ppm), unit="fs").start())
            for r in ("sys", "tx", "rx"):
                getattr(dut, f"{r}_{s}_rst").value = 1
            for n in ("tx_valid", "drained"):
                getattr(dut, f"{s}_{n}").value = 0
            getattr(dut, f"{s}_rx_ready").value = 1
            getattr(dut, f"{s}_gt_tx_ready").value = 1
            getattr(dut, f"{s}_gt_rx_ready").value = 1
            getattr(dut, f"{s}_gt_rx_data").value = 0
            getattr(dut, f"{s}_gt_rx_k").value = 0
            getattr(dut, f"{s}_gt_rx_err").value = 0
        await Timer(100, unit="ns")
        for s in ("a", "b"):
            for r in ("sys", "tx", "rx"):
                getattr(dut, f"{r}_{s}_rst").value = 0
        cocotb.start_soon(self.line("a", "b", self.lanes["ab"]))
        cocotb.start_soon(self.line("b", "a", self.lanes["ba"]))

    async def line(self, src: str, dst: str, lane: SerialLane):
        dut = self.dut
        clk = getattr(dut, f"tx_{src}_clk")
        txd, txk = getattr(dut, f"{src}_gt_tx_data"), getattr(dut, f"{src}_gt_tx_k")
        rxd, rxk = getattr(dut, f"{dst}_gt_rx_data"), getattr(dut, f"{dst}_gt_rx_k")
        rxe = getattr(dut, f"{dst}_gt_rx_err")
        W = self.W
        shifts = [8 * i for i in range(W)]
        while True:
            await FallingEdge(clk)
            d, k = int(txd.value), int(txk.value)
            lane.send([(d >> s) & 0xFF for s in shifts], [(k >> i) & 1 for i in range(W)])
            bs, ks, es = lane.receive()
            rxd.value = sum(b << s for b, s in zip(bs, shifts))
            rxk.value = sum(x << i for i, x in enumerate(ks))
            rxe.value = sum(x << i for i, x in enumerate(es))

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
async def gt_traffic(dut):
    """Full-load random traffic both ways; exact delivery; rate matching / compensation."""
    npk = env("GT_PACKETS", 300)
    mtu = env("GT_MTU", 256)
    expect = env("GT_EXPECT", "line_limited")
    max_ns = env("GT_MAX_NS", 20_000_000)
    b = Bench(dut)
    await b.start()
    up_ns = await b.wait_up()
    realigns = {k: lane.rx.realigns for k, lane in b.lanes.items()}
    rng = random.Random(env("GT_SEED", 1) + 100)
    buf = 4096
    pa = make_packets(rng, npk, mtu, 1, 2)
    pb = make_packets(rng, npk, mtu, 2, 1)
    A = Side(dut, "a", pa, buf, random.Random(1), P.packet_words(mtu))
    B = Side(dut, "b", pb, buf, random.Random(2), P.packet_words(mtu))
    done: list = []
    cocotb.start_soon(run_side(A, dut.sys_a_clk, done))
    cocotb.start_soon(run_side(B, dut.sys_b_clk, done))
    slips = env("GT_SLIPS", 0)
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
            b.lanes[rng.choice(["ab", "ba"])].slip(drop=rng.random() < 0.5)
    # A slip or an error burst takes the lane down until it has been clean for a while.
    for _ in range(40):
        await Timer(1000, unit="ns")
        if int(dut.a_gt_up.value) and int(dut.b_gt_up.value):
            break
    done.append(1)
    ca, cb = counters(dut, "a"), counters(dut, "b")
    words = sum(len(p) for p in pa)
    dut._log.info("up after %d ns (initial realigns %s); %d packets (%d words) each way in %d ns",
                  up_ns, realigns, npk, words, t)
    dut._log.info("a: %s", ca)
    dut._log.info("b: %s", cb)
    dut._log.info("line: bit errors ab %d ba %d, slips ab %d ba %d, realigns ab %d ba %d",
                  b.lanes["ab"].errors.count, b.lanes["ba"].errors.count, b.lanes["ab"].slips,
                  b.lanes["ba"].slips, b.lanes["ab"].rx.realigns, b.lanes["ba"].rx.realigns)
    assert all(r >= 1 for r in realigns.values()), "the receivers never had to align"
    assert B.received == pa, "a->b: packets lost, duplicated, corrupted or reordered"
    assert A.received == pb, "b->a: packets lost, duplicated, corrupted or reordered"
    for c in (ca, cb):
        assert c["gt_rx_overflow"] == 0 and c["gt_tx_lost"] == 0, c
        assert c["rx_overflows"] == 0
        assert c["gt_up"] == 1
    if expect == "errors":
        assert b.lanes["ab"].errors.count + b.lanes["ba"].errors.count > 0
        assert ca["replays"] + cb["replays"] > 0
        assert sum(c[n] for c in (ca, cb) for n in ("crc_errors", "ctrl_errors", "seq_errors")) > 0
        assert ca["gt_rx_code_errors"] + cb["gt_rx_code_errors"] > 0
    else:
        for c in (ca, cb):
            for n in ("crc_errors", "ctrl_errors", "seq_errors", "replays", "timeouts",
                      "gt_rx_dropped_words"):
                assert c[n] == 0, (n, c)
    if expect == "line_limited":
        # The line is the bottleneck: both transmitters held the link and dropped fillers.
        assert ca["gt_tx_fillers_dropped"] > 0 and cb["gt_tx_fillers_dropped"] > 0
    if expect in ("sys_limited", "compensation"):
        # The line is faster than sys: no hold for rate, but forced fillers both ways.
        assert ca["gt_tx_fillers_dropped"] == 0 and cb["gt_tx_fillers_dropped"] == 0
        assert ca["gt_tx_fillers_forced"] > 0 and cb["gt_tx_fillers_forced"] > 0
    if expect == "compensation":
        # a's oscillators are the fast ones: b's elastic buffer drops fillers.
        assert cb["gt_rx_fillers_dropped"] > 0


@cocotb.test()
async def gt_cable_pull(dut):
    """Cut the a->b lane: b's lane goes down (a's stays up); restore: b comes up again."""
    b = Bench(dut)
    await b.start()
    await cable_pull(dut, b, b.lanes["ab"])
