"""cocotb bench: a LinkChannel between two router-port models.

Each side sends random packets (random length 0..MTU, random payload) under
credits, with random bubbles inside packets, and receives into a model of the
router's input buffer that discards packets ending with ``error=1`` and drains at a
random rate (with pauses), producing ``drained`` strobes. Checks: every packet
arrives exactly once, intact and in order; the buffer never overflows; at the end
every side holds exactly the full buffer of credits again.

Parameters come from the environment (set by test_link_cocotb.py):
LINK_PACKETS (per direction), LINK_BER, LINK_SEED, LINK_BUFFER (words), LINK_MTU,
LINK_EXPECT_ERRORS (1: require crc/ctrl errors and replays), LINK_MAX_CYCLES,
LINK_MAXLEN (longest payload generated; default the MTU).
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from paranic.spec import protocol as P
from paranic.hw.link import COUNTERS
from paranic.spec.link import CtlKind, LinkState, frame_words, link_efficiency, unpack_ctl
from paranic.spec.sim import ber_to_threshold

COUNTER_NAMES = [name for name, _, _ in COUNTERS]


def env(name, default):
    return type(default)(os.environ.get(name, default))


class Side:
    """One router port: a credit-respecting sender and a draining receive buffer."""

    def __init__(self, dut, name: str, packets: list[list[int]], buffer_words: int,
                 rng: random.Random, max_words: int):
        self.name = name
        self.dut = dut
        g = lambda s: getattr(dut, f"{name}_{s}")  # noqa: E731
        self.h_tx_valid, self.h_tx_ready = g("tx_valid"), g("tx_ready")
        self.h_tx_first, self.h_tx_last, self.h_tx_data = g("tx_first"), g("tx_last"), g("tx_data")
        self.h_rx_valid, self.h_rx_first = g("rx_valid"), g("rx_first")
        self.h_rx_last, self.h_rx_error, self.h_rx_data = g("rx_last"), g("rx_error"), g("rx_data")
        self.h_rx_ready = g("rx_ready")
        self.h_credit_valid, self.h_credit_words = g("credit_valid"), g("credit_words")
        self.h_drained, self.h_up = g("drained"), g("up")
        self.h_rx_words, self.h_buf_free = g("rx_words"), g("buf_free")
        self.to_send = packets
        self.next_pkt = 0
        self.sent = 0
        self.buffer_words = buffer_words
        self.credits = buffer_words
        self.rng = rng
        self.max_words = max_words
        self.cur = None
        self.idx = 0
        self.presenting = False
        self.received: list[list[int]] = []
        self.partial: list[int] = []
        self.errored = 0
        self.occupancy = 0
        self.drain_pause = 0
        self.drained_out = False
        self.h_rx_ready.value = 1
        self.h_tx_valid.value = 0
        self.h_drained.value = 0
        self.h_buf_free.value = min(buffer_words, 0xFFFF)

    def step(self, gap: float, drain: float, pause: float):
        # -- transmit ---------------------------------------------------------------
        if self.presenting and int(self.h_tx_ready.value):
            # The word presented since the last falling edge is taken at the next
            # rising edge (ready depends only on the link layer's state).
            pass
        if self.cur is None and self.next_pkt < len(self.to_send):
            nxt = self.to_send[self.next_pkt]
            if self.credits >= len(nxt):
                self.credits -= len(nxt)
                self.cur = nxt
                self.next_pkt += 1
                self.idx = 0
        present = self.cur is not None and not (gap and self.rng.random() < gap)
        if present:
            w = self.cur[self.idx]
            self.h_tx_data.value = w
            self.h_tx_first.value = int(self.idx == 0)
            self.h_tx_last.value = int(self.idx == len(self.cur) - 1)
            if not self.presenting:
                self.h_tx_valid.value = 1
            if int(self.h_tx_ready.value):
                self.idx += 1
                if self.idx == len(self.cur):
                    self.cur = None
                    self.sent += 1
        elif self.presenting:
            self.h_tx_valid.value = 0
        self.presenting = present
        # -- credits ----------------------------------------------------------------
        if int(self.h_credit_valid.value):
            self.credits += int(self.h_credit_words.value)
            assert self.credits <= self.buffer_words, f"{self.name}: more credits than buffer"
        # -- receive ----------------------------------------------------------------
        if int(self.h_rx_valid.value):
            if int(self.h_rx_first.value):
                assert not self.partial, f"{self.name}: packet started before the last ended"
                # As the router's cut-through input buffer: the SOF's length is
                # reserved with the first word, and every packet, good or bad, is
                # drained whole (the link layer withholds a bad copy's credits).
                self.occupancy += int(self.h_rx_words.value)
                assert self.occupancy <= self.buffer_words, f"{self.name}: input buffer overrun"
            self.partial.append(int(self.h_rx_data.value))
            assert len(self.partial) <= self.max_words, f"{self.name}: packet too long"
            if int(self.h_rx_last.value):
                if int(self.h_rx_error.value):
                    self.errored += 1
                else:
                    self.received.append(self.partial)
                self.partial = []
        # -- drain ------------------------------------------------------------------
        d = False
        if self.drain_pause:
            self.drain_pause -= 1
        elif pause and self.rng.random() < pause:
            self.drain_pause = self.rng.randrange(50, 600)
        elif self.occupancy and self.rng.random() < drain:
            self.occupancy -= 1
            d = True
        if d != self.drained_out:
            self.h_drained.value = int(d)
            self.drained_out = d
        self.h_buf_free.value = min(self.buffer_words - self.occupancy, 0xFFFF)


def make_packets(rng: random.Random, n: int, mtu: int, src: int, dst: int,
                 fixed: int | None = None) -> list[list[int]]:
    """Random packets: lengths 0, 1, 8, ``mtu`` and uniform in 0..``mtu``."""
    out = []
    for i in range(n):
        length = fixed if fixed is not None else rng.choice(
            [0, 1, 8, mtu, rng.randrange(0, mtu + 1), rng.randrange(0, mtu + 1)])
        h0, h1 = P.header_words(dst_node=dst, src_node=src, length=length, tag=i)
        out.append([h0, h1] + [rng.getrandbits(64) for _ in range(P.payload_words(length))])
    return out


async def reset(dut):
    cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
    dut.sys_rst.value = 1
    for _ in range(4):
        await RisingEdge(dut.sys_clk)
    dut.sys_rst.value = 0


def counters(dut, side):
    return {n: int(getattr(dut, f"{side}_{n}").value) for n in COUNTER_NAMES}


@cocotb.test()
async def link_traffic(dut):
    """Random bidirectional traffic under credits; exact delivery; credits conserved."""
    npk = env("LINK_PACKETS", 1000)
    ber = env("LINK_BER", 0.0)
    seed = env("LINK_SEED", 1)
    mtu = env("LINK_MTU", P.DEFAULT_MTU)
    buf = env("LINK_BUFFER", 1024)
    expect_errors = env("LINK_EXPECT_ERRORS", 0)
    max_cycles = env("LINK_MAX_CYCLES", 10_000_000)
    rng = random.Random(seed)
    dut.ber_threshold.value = ber_to_threshold(ber)
    for s in ("a", "b"):
        for n in ("tx_valid", "drained"):
            getattr(dut, f"{s}_{n}").value = 0
    await reset(dut)
    max_words = P.packet_words(mtu)
    maxlen = env("LINK_MAXLEN", mtu)
    pa = make_packets(rng, npk, maxlen, 1, 2)
    pb = make_packets(rng, npk, maxlen, 2, 1)
    A = Side(dut, "a", pa, buf, random.Random(seed + 10), max_words)
    B = Side(dut, "b", pb, buf, random.Random(seed + 20), max_words)

    cycles = 0
    up_at = None
    done_at = None
    clk = dut.sys_clk
    while True:
        await FallingEdge(clk)
        cycles += 1
        assert cycles < max_cycles, (f"timeout: a got {len(A.received)}, b got {len(B.received)}, "
                                     f"a {counters(dut, 'a')} b {counters(dut, 'b')}")
        if up_at is None:
            if int(A.h_up.value) and int(B.h_up.value):
                up_at = cycles
            else:
                continue
        if cycles % 1024 == 0:
            # Errors at 1e-5..1e-4 are replayed, never escalated (default max_replays).
            assert int(dut.a_downs.value) == 0 and int(dut.b_downs.value) == 0, \
                f"link went DOWN at cycle {cycles}: a {counters(dut, 'a')} b {counters(dut, 'b')}"
        A.step(0.05, 0.95, 0.0005)
        B.step(0.05, 0.6, 0.0005)
        if (len(A.received) == npk and len(B.received) == npk and A.occupancy == 0
                and B.occupancy == 0 and A.credits == buf and B.credits == buf):
            done_at = cycles
            break
    # Let anything in flight settle, then check nothing more arrives.
    for _ in range(500):
        await FallingEdge(clk)
        A.step(0, 1, 0)
        B.step(0, 1, 0)
    ca, cb = counters(dut, "a"), counters(dut, "b")
    inj = int(dut.ab_errors_injected.value) + int(dut.ba_errors_injected.value)
    dut._log.info("BER %g: trained after %d cycles, %d packets each way in %d cycles; "
                  "bit flips injected %d", ber, up_at, npk, done_at - up_at, inj)
    dut._log.info("a: %s", ca)
    dut._log.info("b: %s", cb)
    dut._log.info("packets ended with error=1 at the router: a %d, b %d", A.errored, B.errored)
    assert B.received == pa, "a->b: packets lost, duplicated, corrupted or reordered"
    assert A.received == pb, "b->a: packets lost, duplicated, corrupted or reordered"
    assert A.credits == buf and B.credits == buf, "credits not conserved"
    assert ca["tx_packets"] == npk and cb["rx_packets"] == npk
    assert cb["tx_packets"] == npk and ca["rx_packets"] == npk
    assert ca["tx_bytes"] == sum(P.unpack_header(P.words_to_bytes(p[:2], 16))["length"] for p in pa)
    assert cb["rx_bytes"] == ca["tx_bytes"]
    assert ca["rx_overflows"] == 0 and cb["rx_overflows"] == 0
    assert int(dut.a_downs.value) == 0 and int(dut.b_downs.value) == 0
    assert int(dut.a_link_state.value) == LinkState.UP and int(dut.b_link_state.value) == LinkState.UP
    if expect_errors:
        assert inj > 0
        for c in (ca, cb):
            assert c["crc_errors"] + c["ctrl_errors"] > 0
            assert c["replays"] > 0
    else:
        assert inj == 0
        for c in (ca, cb):
            for n in ("crc_errors", "ctrl_errors", "seq_errors", "replays", "naks", "naks_sent",
                      "timeouts"):
                assert c[n] == 0, (n, c)


@cocotb.test()
async def link_efficiency_stream(dut):
    """Saturated MTU stream both ways: PHY words per packet match link_efficiency()."""
    npk = env("LINK_PACKETS", 200)
    mtu = env("LINK_MTU", P.DEFAULT_MTU)
    seed = env("LINK_SEED", 1)
    rng = random.Random(seed)
    dut.ber_threshold.value = 0
    await reset(dut)
    buf = 1 << 16  # the far end always has room: the link itself is the bottleneck
    pa = make_packets(rng, npk, mtu, 1, 2, fixed=mtu)
    pb = make_packets(rng, npk, mtu, 2, 1, fixed=mtu)
    A = Side(dut, "a", pa, 4096, random.Random(1), P.packet_words(mtu))
    B = Side(dut, "b", pb, 4096, random.Random(2), P.packet_words(mtu))
    A.credits = B.credits = A.buffer_words = B.buffer_words = buf
    clk = dut.sys_clk
    words = {"sof": 0, "status": 0, "data": 0, "other": 0}
    first_sof = None
    last_trailer = None
    sofs = 0
    cycles = 0
    in_frame = 0
    while len(B.received) < npk or len(A.received) < npk:
        await FallingEdge(clk)
        cycles += 1
        assert cycles < 100_000 + 400 * npk
        if not (int(A.h_up.value) and int(B.h_up.value)):
            continue
        A.step(0, 1, 0)
        B.step(0, 1, 0)
        # Classify the word entering the a->b wire, from the first SOF to the last
        # CRC trailer.
        if last_trailer is not None:
            continue
        ctrl = int(dut.ab_ctrl.value)
        data = int(dut.ab_data.value)
        if ctrl:
            c = unpack_ctl(data)
            kind = c["kind"] if c else None
            if kind == CtlKind.SOF:
                if first_sof is None:
                    first_sof = cycles
                sofs += 1
                in_frame = c["len"] + 1
                words["sof"] += 1
            elif first_sof is None:
                continue
            elif kind == CtlKind.STATUS:
                words["status"] += 1
            else:
                words["other"] += 1
        elif first_sof is not None:
            words["data"] += 1
            in_frame -= 1
            if in_frame == 0 and sofs == npk:
                last_trailer = cycles
    total = last_trailer - first_sof + 1
    measured = npk * mtu / (8 * total)
    model = link_efficiency(mtu)
    dut._log.info("MTU %d: %d packets in %d PHY words (%s): efficiency %.4f, model %.4f",
                  mtu, npk, total, words, measured, model)
    assert B.received == pa and A.received == pb
    assert sum(words.values()) == total
    assert words["status"] == 0 and words["other"] == 0, words
    assert total == npk * frame_words(mtu)
    assert abs(measured - model) < 1e-12, (measured, model)
