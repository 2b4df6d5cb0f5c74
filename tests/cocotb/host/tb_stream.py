"""cocotb tests of a one-hop DMA stream (see test_stream_cocotb.py for the top).

Node 0 posts a train of DMA messages to node 1 at once; node 1 polls and frees its
RX ring. In the steady state (from the 16th packet received to the 8th before the
end, counted by RX valid words), with ``F = frame_words(MTU)`` (132 PHY words for a
1 KiB packet):

* one MTU packet every ``F + 1`` cycles or faster: the link's frame plus the one
  idle word the router's route lookup costs between two packets of one input;
* the sender's router never holds a packet in its injection FIFO for want of a
  packet slot in the next router's input buffer (the bubble rule needs two; with
  3 slots per buffer the slot round trip made this the bottleneck: 145 cycles per
  packet);
* the receive engine takes ``packet_words + 2`` cycles per packet (the slot's
  beats, the valid word, one check cycle): its input waits at most 2 cycles per
  packet;
* every packet arrives intact, with SOM/EOM and tag of its message.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from model.csr import CsrBus, Driver
from model.host import NicContext
from model.pcie_cocotb import HostModel
from paranic.spec import protocol as P
from paranic.spec.link import LinkState, frame_words
from paranic.hw.standalone import read_csr_json
from paranic.spec.topo import Topology

TOPO = Topology.parse(os.environ.get("CLUSTER_TOPO", "ring:2"))
MTU = int(os.environ.get("CLUSTER_MTU", P.DEFAULT_MTU))
REGS = read_csr_json(os.environ["CLUSTER_CSR"])
PROBES = os.environ["STREAM_PROBES"].split(",")
READ_LATENCY = 63  # cycles: the cluster simulator's default (500 ns)
WINDOW = 1 << 17


def _snap(dut) -> dict:
    d = {n: int(getattr(dut, "p_" + n).value) for n in PROBES}
    d["cycle"] = int(dut.cycle.value)
    return d


async def _cluster(dut):
    hosts = [HostModel(dut, prefix=f"n{i}_", read_latency=READ_LATENCY) for i in range(TOPO.nodes)]
    csr = [CsrBus(h, REGS) for h in hosts]
    drivers = [Driver(c, i, TOPO) for i, c in enumerate(csr)]
    dut.ber_threshold.value = 0
    cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
    dut.sys_rst.value = 1
    for h in hosts:
        h.start()
    for _ in range(5):
        await RisingEdge(dut.sys_clk)
    dut.sys_rst.value = 0
    await RisingEdge(dut.sys_clk)
    for d in drivers:
        await d.bring_up()
    for c in csr:
        for port in range(TOPO.link_ports):
            for _ in range(200):
                if await c.read(f"link{port}_link_state") == LinkState.UP:
                    break
                await c.host.cycles(64)
            else:
                raise TimeoutError(f"link {port} did not come up")
    return hosts, drivers


async def _stream(dut, msg_bytes: int, n_msgs: int) -> None:
    hosts, drivers = await _cluster(dut)
    tx = NicContext(hosts[0], drivers[0].cfg, 1, mtu=MTU, rx_log2=3, tx_log2=6, window_bytes=WINDOW)
    rx = NicContext(hosts[1], drivers[1].cfg, 1, mtu=MTU, rx_log2=8, tx_log2=3)
    await tx.setup()
    await rx.setup()
    rng = random.Random(msg_bytes)
    data = bytes(rng.getrandbits(8) for _ in range(WINDOW))
    hosts[0].mem.write(tx.window.base, data)
    offsets = [(k * 4099) % (WINDOW - msg_bytes) for k in range(n_msgs)]  # any byte alignment
    for k, off in enumerate(offsets):
        tx.write_desc(k, addr=tx.window.base + off, length=msg_bytes, dst_node=1, dst_ctx=1,
                      type=int(P.PacketType.DATA), tag=0x5000 + k, cookie=0)
    tx.tx_tail = n_msgs
    await tx.ring_tx()

    per_msg = -(-msg_bytes // MTU)
    total = n_msgs * per_msg
    a, b = 16, total - 8
    assert b - a >= 24, "train too short for a steady state"
    snaps: dict[int, dict] = {}
    got = []
    start = hosts[1].cycle
    while rx.rx_next < total:
        new = rx.poll()
        for p in new:
            got.append(p)
            if p.count + 1 in (a, b):
                snaps[p.count + 1] = _snap(dut)
        if new:
            await rx.consume()
        await hosts[1].cycles(1)
        assert hosts[1].cycle - start < 400 * total, f"{len(got)} of {total} packets"
    for h in hosts:
        assert not h.errors, h.errors[:5]

    # every packet intact and in order
    for k, off in enumerate(offsets):
        pk = got[k * per_msg:(k + 1) * per_msg]
        for i, p in enumerate(pk):
            h = p.header
            assert (h["src_node"], h["dst_node"], h["tag"]) == (0, 1, 0x5000 + k), h
            assert h["flags"] == (P.Flags.SOM if i == 0 else 0) | (P.Flags.EOM if i == per_msg - 1 else 0)
        assert b"".join(p.payload for p in pk) == data[off:off + msg_bytes], f"message {k}"

    sa, sb = snaps[a], snaps[b]
    npk = b - a
    cyc = sb["cycle"] - sa["cycle"]
    d = {n: sb[n] - sa[n] for n in PROBES}
    f = frame_words(MTU)
    per_pk = cyc / npk
    dut._log.info(f"{msg_bytes} B x {n_msgs}: {npk} packets in {cyc} cycles = {per_pk:.2f} "
                  f"cycles/packet ({8 * MTU / per_pk * 125e6 / 8 / 1e6:.1f} MB/s payload); per packet: "
                  + ", ".join(f"{n} {v / npk:.2f}" for n, v in d.items()))
    assert per_pk <= f + 1, f"{per_pk:.2f} cycles per packet, the link needs {f}"
    assert d["inj_blocked"] == 0, "injection waited for packet slots of the next router"
    assert d["rx_waiting"] <= 2 * npk, "the RX engine takes more than packet_words + 2 cycles"
    assert d["phy_sof"] == npk and d["phy_data"] == npk * (f - 1)


@cocotb.test()
async def stream_4k_messages(dut):
    """4 KiB messages (4 packets each) back to back."""
    await _stream(dut, 4096, 16)


@cocotb.test()
async def stream_mtu_messages(dut):
    """One-packet messages: a descriptor per packet costs the DMA engine no cycle."""
    await _stream(dut, MTU, 48)
