"""cocotb bench: two boards joined by a modelled ribbon cable (test_ribbon_cocotb.py builds it).

The cable model sits at the serdes' parallel ports (docs/phy.md, "ribbon"): on every
falling edge of the sending board's clock (which is also the forwarded clock, hence the
receiving board's ``rx`` clock) it takes the 9 lane bytes the serializers would send,
appends their bits to a per-lane bit history, and hands the receiver, per lane, the 8
bits the ISERDESE2 would present: those ``delay + offset`` bits back, where ``delay``
is the lane's flight time in bits (random phase + random skew of several bits and more
than one word) and ``offset`` the deserializer's word boundary. A BITSLIP request seen
at one edge moves the boundary two edges later, alternately one bit later and three
bits earlier (mod 8), as ISERDESE2 does in DDR mode, so 8 requests visit every boundary.
It flips bits at a given rate and can hold lanes at 0.

Environment: RIBBON_SEED, RIBBON_PPM (board b's clock relative to a's), RIBBON_PACKETS,
RIBBON_BER (per bit, every lane, both ways), RIBBON_EXPECT_ERRORS, RIBBON_EXPECT_DROPS,
RIBBON_MTU, RIBBON_MAX_SKEW.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, Timer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "link"))
from tb_link import Side, counters, make_packets  # noqa: E402  (the link bench's port models)

from paranic.spec import protocol as P  # noqa: E402
from paranic.hw.phy.ribbon_lane import LANES  # noqa: E402

REV8 = [int(f"{b:08b}"[::-1], 2) for b in range(256)]
HIST_BITS = 512
BASE_PS = 20_000  # even periods (cocotb); 2 ps = 100 ppm


def env(name, default):
    return type(default)(os.environ.get(name, default))


class Cable:
    """One direction of the ribbon: ``src`` board's serializers to ``dst``'s deserializers."""

    def __init__(self, dut, src: str, dst: str, rng: random.Random, max_skew_words: int,
                 ber: float = 0.0) -> None:
        self.dut = dut
        self.h_tx = getattr(dut, f"{src}_tx_lanes")
        self.h_rx = getattr(dut, f"{dst}_rx_lanes")
        self.h_slip = getattr(dut, f"{dst}_rx_bitslip")
        self.clk = getattr(dut, f"{src}_sys_clk")
        phase = rng.randrange(0, 64)
        # Skews of several bits, the largest more than one word but within the deskew range.
        skew = [rng.randrange(0, 8 * (max_skew_words - 2)) for _ in range(LANES)]
        skew[rng.randrange(LANES)] = 0
        skew[rng.randrange(LANES)] = rng.randrange(12, 8 * (max_skew_words - 2))
        self.delay = [phase + s for s in skew]
        self.offset = [rng.randrange(8) for _ in range(LANES)]   # initial word boundary
        self.slip_dir = [0] * LANES
        self.slips_pending: list[int] = [0, 0]                    # two edges of latency
        self.hist = [0] * LANES
        self.mask = (1 << HIST_BITS) - 1
        self.rng = rng
        self.p_byte = 8 * ber         # one flipped bit per byte with this probability
        self.stuck: set[int] = set()
        self.flips = 0
        self.slips = [0] * LANES

    def word_latency(self) -> list[int]:
        """Per lane, latency in whole words of an aligned lane (None if not aligned)."""
        return [(d + o) // 8 if (d + o) % 8 == 0 else None
                for d, o in zip(self.delay, self.offset)]

    def slip(self, lane: int) -> None:
        step = 1 if self.slip_dir[lane] == 0 else -3
        self.slip_dir[lane] ^= 1
        self.offset[lane] = (self.offset[lane] + step) % 8
        self.slips[lane] += 1

    async def run(self) -> None:
        rng = self.rng
        while True:
            await FallingEdge(self.clk)
            lanes = int(self.h_tx.value)
            req = int(self.h_slip.value)
            # Slip requests take effect two edges after they are seen.
            self.slips_pending.append(req)
            due = self.slips_pending.pop(0)
            out = 0
            for i in range(LANES):
                if due >> i & 1:
                    self.slip(i)
                h = ((self.hist[i] << 8) | REV8[(lanes >> (8 * i)) & 0xFF]) & self.mask
                self.hist[i] = h
                b = REV8[(h >> (self.delay[i] + self.offset[i])) & 0xFF]
                if i in self.stuck:
                    b = 0
                elif self.p_byte and rng.random() < self.p_byte:
                    b ^= 1 << rng.randrange(8)
                    self.flips += 1
                out |= b << (8 * i)
            self.h_rx.value = out


class Bench:
    def __init__(self, dut, seed: int, ppm: float, ber: float = 0.0) -> None:
        self.dut = dut
        self.rng = random.Random(seed)
        max_skew = env("RIBBON_MAX_SKEW", 8)
        self.period = {"a": BASE_PS, "b": 2 * round(BASE_PS * (1 - ppm * 1e-6) / 2)}
        self.ab = Cable(dut, "a", "b", random.Random(seed * 7 + 1), max_skew, ber)
        self.ba = Cable(dut, "b", "a", random.Random(seed * 7 + 2), max_skew, ber)

    async def start(self) -> None:
        dut = self.dut
        for s in ("a", "b"):
            for n in ("tx_valid", "drained"):
                getattr(dut, f"{s}_{n}").value = 0
            getattr(dut, f"{s}_rx_ready").value = 1
            getattr(dut, f"{s}_rx_lanes").value = 0
            getattr(dut, f"{s}_sys_rst").value = 1
        cocotb.start_soon(Clock(dut.a_sys_clk, self.period["a"], unit="ps").start())
        await Timer(self.rng.randrange(1, BASE_PS), unit="ps")   # random relative phase
        cocotb.start_soon(Clock(dut.b_sys_clk, self.period["b"], unit="ps").start())
        for _ in range(6):
            await RisingEdge(dut.a_sys_clk)
        dut.a_sys_rst.value = 0
        dut.b_sys_rst.value = 0
        cocotb.start_soon(self.ab.run())
        cocotb.start_soon(self.ba.run())

    def status(self, side: str) -> dict[str, int]:
        names = ("phy_up", "rx_state", "locked", "skew", "slips", "dead", "pattern_errors",
                 "frame_errors", "retrains", "fillers_dropped", "overflow", "holds", "far_up")
        return {n: int(getattr(self.dut, f"{side}_{n}").value) for n in names}

    async def wait_up(self, limit: int = 20_000, link: bool = True) -> int:
        """Cycles of a's clock until both link layers (or both PHYs) are up."""
        pin = "up" if link else "phy_up"
        for n in range(limit):
            await FallingEdge(self.dut.a_sys_clk)
            if int(getattr(self.dut, f"a_{pin}").value) and int(getattr(self.dut, f"b_{pin}").value):
                return n
        raise AssertionError(f"not up after {limit} cycles: a {self.status('a')} "
                             f"b {self.status('b')}")

    def check_alignment(self) -> None:
        """Every lane locked and deskewed by exactly the model's whole-word skew."""
        for side, cable in (("b", self.ab), ("a", self.ba)):
            st = self.status(side)
            assert st["locked"] == (1 << LANES) - 1, (side, st)
            lat = cable.word_latency()
            assert None not in lat, f"{side}: lane boundaries not all found: {cable.offset}"
            skew = [(st["skew"] >> (4 * i)) & 0xF for i in range(LANES)]
            want = [max(lat) - x for x in lat]
            assert skew == want, f"{side}: deskew {skew}, model needs {want}"
            assert max(want) >= 1, "the model should have produced a skew of a word or more"
            self.dut._log.info("%s: delays (bits) %s, slips %s, deskew (words) %s", side,
                               cable.delay, cable.slips, skew)


@cocotb.test()
async def ribbon_bringup(dut):
    """From random skews and phases both PHYs and both link layers come up."""
    b = Bench(dut, env("RIBBON_SEED", 1), env("RIBBON_PPM", 100.0))
    await b.start()
    n = await b.wait_up()
    dut._log.info("link up after %d cycles", n)
    b.check_alignment()
    for s in ("a", "b"):
        st = b.status(s)
        assert st["phy_up"] == 1 and st["far_up"] == 1 and st["rx_state"] == 5, (s, st)
        assert st["retrains"] == 0 and st["frame_errors"] == 0 and st["overflow"] == 0, (s, st)


@cocotb.test()
async def ribbon_traffic(dut):
    """Saturated random traffic both ways: every packet intact, in order, exactly once."""
    seed = env("RIBBON_SEED", 1)
    ppm = env("RIBBON_PPM", 100.0)
    npk = env("RIBBON_PACKETS", 100)
    ber = env("RIBBON_BER", 0.0)
    mtu = env("RIBBON_MTU", P.DEFAULT_MTU)
    expect_errors = env("RIBBON_EXPECT_ERRORS", 0)
    expect_drops = env("RIBBON_EXPECT_DROPS", 0)
    glitch_at = env("RIBBON_GLITCH_AT", 0)   # a's cycle at which lane 5 a->b sticks for 100
    buf = 1024
    b = Bench(dut, seed, ppm, ber)
    await b.start()
    up = await b.wait_up()
    if not ber:
        b.check_alignment()
    rng = random.Random(seed)
    pa = make_packets(rng, npk, mtu, 1, 2)
    pb = make_packets(rng, npk, mtu, 2, 1)
    sides = {"a": Side(dut, "a", pa, buf, random.Random(seed + 10), P.packet_words(mtu)),
             "b": Side(dut, "b", pb, buf, random.Random(seed + 20), P.packet_words(mtu))}

    def finished(s: Side) -> bool:
        return len(s.received) == npk and s.occupancy == 0 and s.credits == buf

    cycles = {"a": 0, "b": 0}
    limit = 20_000 + 400 * npk

    async def drive(name: str) -> None:
        s, clk = sides[name], getattr(dut, f"{name}_sys_clk")
        while True:
            await FallingEdge(clk)
            cycles[name] += 1
            assert cycles[name] < limit, (f"timeout: a got {len(sides['a'].received)}, b got "
                                          f"{len(sides['b'].received)}; a {b.status('a')} "
                                          f"{counters(dut, 'a')} b {b.status('b')} "
                                          f"{counters(dut, 'b')}")
            s.step(0.0, 1.0, 0.0)    # full load: no bubbles, the receiver always drains

    ta = cocotb.start_soon(drive("a"))
    tb = cocotb.start_soon(drive("b"))
    while not (finished(sides["a"]) and finished(sides["b"])):
        await FallingEdge(dut.a_sys_clk)
        if glitch_at and cycles["a"] == glitch_at:
            b.ab.stuck = {5}
        elif glitch_at and cycles["a"] == glitch_at + 100:
            b.ab.stuck = set()
        assert not ta.done() and not tb.done(), "driver stopped: " + str(
            (ta.exception() if ta.done() else None) or (tb.exception() if tb.done() else None))
    done = cycles["a"]
    for _ in range(500):
        await FallingEdge(dut.a_sys_clk)
    ta.cancel()
    tb.cancel()
    ca, cb = counters(dut, "a"), counters(dut, "b")
    sa, sb = b.status("a"), b.status("b")
    dut._log.info("ppm %g BER %g: up after %d cycles, %d packets each way in %d cycles; "
                  "bit flips %d", ppm, ber, up, npk, done, b.ab.flips + b.ba.flips)
    dut._log.info("a link %s phy %s", ca, sa)
    dut._log.info("b link %s phy %s", cb, sb)
    assert sides["b"].received == pa, "a->b: packets lost, duplicated, corrupted or reordered"
    assert sides["a"].received == pb, "b->a: packets lost, duplicated, corrupted or reordered"
    for c in (ca, cb):
        assert c["tx_packets"] == npk and c["rx_packets"] == npk and c["rx_overflows"] == 0
    for s in (sa, sb):
        assert s["overflow"] == 0, s
        assert s["holds"] > 0, "full load must have raised hold for clock compensation"
    # The receiver of the faster clock's words must have dropped fillers.
    fast_rx = sa if ppm > 0 else sb
    if expect_drops:
        assert fast_rx["fillers_dropped"] > 0, fast_rx
    if glitch_at:
        # The PHY dropped and retrained under load; the link layer replayed what was lost.
        assert sb["retrains"] >= 1 and sb["dead"] == 1 << 5, sb
        assert ca["replays"] > 0, ca
    elif expect_errors:
        assert b.ab.flips and b.ba.flips
        for c in (ca, cb):
            assert c["crc_errors"] + c["ctrl_errors"] > 0 and c["replays"] > 0, c
    else:
        for s in (sa, sb):
            assert s["retrains"] == 0 and s["frame_errors"] == 0, s
        for c in (ca, cb):
            for n in ("crc_errors", "ctrl_errors", "seq_errors", "replays", "naks", "timeouts"):
                assert c[n] == 0, (n, c)


@cocotb.test()
async def ribbon_stuck_lane(dut):
    """A stuck lane keeps the PHY down (that lane never locks); a lane sticking later drops
    the link (dead_lanes / frame_errors / retrains say why); released, it comes back."""
    b = Bench(dut, env("RIBBON_SEED", 1), env("RIBBON_PPM", 100.0))
    b.ab.stuck = {3}
    await b.start()
    for _ in range(6000):
        await FallingEdge(dut.a_sys_clk)
    st = b.status("b")
    dut._log.info("lane 3 stuck from the start: b %s", st)
    assert st["phy_up"] == 0 and int(dut.a_up.value) == 0 and int(dut.b_up.value) == 0
    assert st["locked"] & (1 << 3) == 0 and st["locked"] != 0, st
    assert st["rx_state"] == 1, st     # LOCK: waiting for lane 3
    slips0 = (st["slips"] >> 24) & 0xFF
    for _ in range(200):
        await FallingEdge(dut.a_sys_clk)
    assert ((b.status("b")["slips"] >> 24) & 0xFF) != slips0, "lane 3 should keep slipping"

    b.ab.stuck = set()
    await b.wait_up()
    b.check_alignment()

    # A data lane sticks while up: no transitions on a scrambled lane -> dead, retrain.
    b.ab.stuck = {5}
    for _ in range(300):
        await FallingEdge(dut.a_sys_clk)
    st = b.status("b")
    dut._log.info("lane 5 stuck while up: b %s", st)
    assert st["dead"] == 1 << 5 and st["retrains"] == 1 and st["phy_up"] == 0, st
    b.ab.stuck = set()
    await b.wait_up(link=False)

    # The ctrl lane sticks: its framing pattern breaks -> frame errors, retrain.
    b.ab.stuck = {LANES - 1}
    for _ in range(300):
        await FallingEdge(dut.a_sys_clk)
    st = b.status("b")
    dut._log.info("ctrl lane stuck while up: b %s", st)
    assert st["retrains"] == 2 and st["frame_errors"] >= 4 and st["phy_up"] == 0, st
    b.ab.stuck = set()
    await b.wait_up(link=False)
    b.check_alignment()
