"""cocotb bench: RouterNetwork with LinkChannels and bit errors on every link.

Environment: TOPO, BER, COUNT (packets per node), MIN_LEN/MAX_LEN (bytes), SEED,
PATTERN (default uniform), CHUNK (cycles between polls), STALL (cycles without a
delivered packet that count as a hang).
"""

from __future__ import annotations

import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Timer

from paranic.spec.sim import ber_to_threshold
from paranic.sim.traffic import PATTERN, RATE_ONE
from paranic.spec.topo import Topology

PERIOD_NS = 8


async def cycles(n: int) -> None:
    await Timer(n * PERIOD_NS, unit="ns")


def rd(dut, name: str) -> int:
    return int(getattr(dut, name).value)


STATS = ("cycle", "tx_packets", "tx_words", "rx_packets", "rx_words", "err_hdr", "err_len",
         "err_seq", "err_payload", "done", "link_crc_errors", "link_ctrl_errors",
         "link_seq_errors", "link_replays", "link_naks", "link_timeouts", "link_rx_overflows",
         "link_rx_packets", "bits_flipped", "err_unknown", "err_length", "err_aborted",
         "eject_aborted", "credits_full", "links_up")


@cocotb.test()
async def network_ber(dut):
    """Every packet delivered exactly once, intact, in order, over lossy links."""
    topo = Topology.parse(os.environ["TOPO"])
    nodes = topo.nodes
    ber = float(os.environ.get("BER", "1e-4"))
    count = int(os.environ.get("COUNT", "40"))
    chunk = int(os.environ.get("CHUNK", "5000"))
    stall = int(os.environ.get("STALL", "200000"))
    pattern = os.environ.get("PATTERN", "uniform")

    cocotb.start_soon(Clock(dut.sys_clk, PERIOD_NS, unit="ns").start())
    await Timer(1, unit="ns")
    for name in ("enable", "clear", "pattern", "rate", "count", "min_len", "max_len", "seed"):
        getattr(dut, name).value = 0
    dut.bubble_en.value = 1
    dut.ber_threshold.value = ber_to_threshold(ber)
    dut.sys_rst.value = 1
    await cycles(4)
    dut.sys_rst.value = 0
    n = 0
    while not (rd(dut, "ready") and rd(dut, "links_up")):
        await cycles(16)
        n += 16
        assert n < 20_000, "routing tables or links never came up"
    dut._log.info("tables ready and all %d links trained after %d cycles", 2 * nodes, n)

    dut.pattern.value = PATTERN[pattern]
    dut.count.value = count
    dut.min_len.value = int(os.environ.get("MIN_LEN", "0"))
    dut.max_len.value = int(os.environ.get("MAX_LEN", "1024"))
    dut.rate.value = RATE_ONE
    dut.seed.value = int(os.environ.get("SEED", "1"))
    dut.clear.value = 1
    await cycles(1)
    dut.clear.value = 0
    await cycles(1)
    while rd(dut, "clearing"):
        await cycles(8)
    t0 = rd(dut, "cycle")
    dut.enable.value = 1
    last_rx, last_change = -1, t0
    while True:
        await cycles(chunk)
        s = {k: rd(dut, k) for k in STATS}
        if s["done"] and s["rx_packets"] == s["tx_packets"] == count * nodes:
            break
        if s["rx_packets"] != last_rx:
            last_rx, last_change = s["rx_packets"], s["cycle"]
        assert s["cycle"] - last_change < stall, f"no progress: {s}"
    dut.enable.value = 0
    # Let the last credits flow home.
    for _ in range(100):
        if rd(dut, "credits_full"):
            break
        await cycles(100)
    s = {k: rd(dut, k) for k in STATS}
    cyc = s["cycle"] - t0
    dut._log.info("%s, BER %g: %d packets (%d words) delivered in %d cycles", pattern, ber,
                  s["rx_packets"], s["rx_words"], cyc)
    dut._log.info("links: %s", {k: s[k] for k in STATS if k.startswith("link_") or k == "bits_flipped"})
    dut._log.info("routers: input-FIFO aborts (bad frames) %d, unknown %d, length %d, eject "
                  "aborts %d", s["err_aborted"], s["err_unknown"], s["err_length"],
                  s["eject_aborted"])
    assert s["tx_packets"] == s["rx_packets"] == count * nodes
    assert s["rx_words"] == s["tx_words"]
    assert s["err_hdr"] == s["err_len"] == s["err_seq"] == s["err_payload"] == 0, s
    assert s["err_unknown"] == s["err_length"] == s["eject_aborted"] == 0, s
    assert s["link_rx_overflows"] == 0
    assert s["credits_full"] == 1, "credits not conserved"
    if ber > 0:
        assert s["bits_flipped"] > 0
        assert s["link_crc_errors"] + s["link_ctrl_errors"] > 0
        assert s["link_replays"] > 0
