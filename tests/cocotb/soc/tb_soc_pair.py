"""cocotb tests of two ParaNicSoCs cabled to each other, both under one cocotbext-pcie
root complex (one host: each SoC's host memory is a region of the root complex's memory
pool), driven through the Python host model on its PCIe backend (model.pcie_rc):
link bring-up by the driver's steps, contexts opened by the C sequence, PIO send, DMA
send and DMA receive end to end (see test_soc_cocotb.py)."""

from __future__ import annotations

import os
import random

import cocotb
from cocotbext.pcie.core import RootComplex

from model.csr import CsrBus, Driver
from model.host import NicContext, reassemble
from model.pcie_rc import RcHost
from paranic.spec.topo import Topology
from tb_soc import MTU, REGS, function, hard_ip, start_rc

TOPO = Topology.parse(os.environ["SOC_TOPO"])


class Pair:
    def __init__(self, dut) -> None:
        self.dut = dut
        self.rc = RootComplex()
        # Instance names in the Verilog top: SoC 0's support wrapper first.
        ips = [dut.pcie_support.pcie_us_i, dut.pcie_support_1.pcie_us_i]
        self.devs = [hard_ip(self.rc, ip) for ip in ips]

    async def start(self) -> None:
        await start_rc(self.dut, self.rc)
        self.fns = [await function(self.rc, d) for d in self.devs]
        self.hosts = [RcHost(self.rc, fn, self.dut.sys_clk) for fn in self.fns]
        for h in self.hosts:
            await h.setup()
        self.drivers = [Driver(CsrBus(h, REGS), i, TOPO) for i, h in enumerate(self.hosts)]
        for d in self.drivers:
            await d.bring_up()
        for d in self.drivers:
            for port in range(TOPO.link_ports):
                await d.csr.wait_link_up(port)


    async def context(self, node: int, ctx: int, **kw) -> NicContext:
        c = NicContext(self.hosts[node], self.drivers[node].cfg, ctx, mtu=MTU, **kw)
        await c.setup()
        return c

    def check(self) -> None:
        errs = [f"node {i}: {e}" for i, h in enumerate(self.hosts) for e in h.errors]
        assert not errs, "\n".join(errs[:20])


def _payload(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


@cocotb.test()
async def test_pio_dma_between_socs(dut):
    """PIO and DMA messages both ways between the two SoCs: every byte arrives in the
    other host's RX ring (DMA receive) with the sender's node stamped, in order; the
    receiver's MSI-X fires for an armed context."""
    pair = Pair(dut)
    await pair.start()
    rng = random.Random(11)
    ctx = [await pair.context(n, 1, rx_log2=4, window_bytes=1 << 14) for n in range(2)]
    await ctx[1].arm_irq(seen=0)
    sent = {0: [], 1: []}
    for src in (0, 1):
        dst = 1 - src
        for k, n in enumerate([0, 8, 13, MTU]):
            data = _payload(rng, n)
            sent[src].append(data)
            await ctx[src].pio_send(dst, 1, data, tag=k)
        await ctx[src].wait_window()
        for k, n in enumerate([MTU + 1, 3 * MTU + 5]):
            data = _payload(rng, n)
            sent[src].append(data)
            await ctx[src].dma_send(dst, 1, data, offset=k * 4096, tag=100 + k)
    for dst in (0, 1):
        src = 1 - dst
        want = len(sent[src][:4]) + 2 + 4      # 4 PIO packets, MTU+1 -> 2, 3*MTU+5 -> 4
        got = await ctx[dst].recv(want, timeout=200000)
        assert all(p.header["src_node"] == src for p in got)
        pio = [p.payload for p in got[:4]]
        assert pio == sent[src][:4]
        assert reassemble(got[4:6]) == sent[src][4]
        assert reassemble(got[6:]) == sent[src][5]
    # Node 1's context 1 was armed before anything arrived: its MSI-X came.
    assert pair.hosts[1].irqs(1), pair.hosts[1].irq_log
    for n in (0, 1):
        s = ctx[n].status()
        assert s["tx_done"] == 2 and s["pio_done"] == 4, s
    pair.check()
