"""cocotb tests of two ParaNicSoCs on LitePCIe's 7-series PHY, cabled to each other,
each under its own TLP-level root complex (model.pcie_s7: two machines, two host
memories), driven by the Python host model (model.host, model.csr, the C context
sequences) unchanged: link bring-up, PIO send (64-bit stores: one 2-dword MWr each),
DMA send, DMA receive (byte for byte in the host's RX ring), MSI per context."""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Timer

from model.csr import CsrBus, Driver
from model.host import NicContext, reassemble
from model.pcie_s7 import S7Host
from paranic.hw.standalone import read_csr_json
from paranic.spec import protocol as P
from paranic.spec.topo import Topology

REGS = read_csr_json(os.environ["SOC_CSR"])
N_CTX = int(os.environ["SOC_N_CTX"])
MTU = int(os.environ["SOC_MTU"])
TOPO = Topology.parse(os.environ["SOC_TOPO"])
#: The SoCs' BAR0 master ("litepcie": LitePCIe's, built to show that it loses dwords).
BAR0_MASTER = os.environ.get("SOC_BAR0_MASTER", "paranic")


class Pair:
    def __init__(self, dut) -> None:
        self.dut = dut
        ips = [dut.pcie_s7, dut.pcie_s7_1]
        self.hosts = [S7Host(ip, dut.sys_clk, seed=i + 1) for i, ip in enumerate(ips)]

    async def start(self, up: bool = True) -> None:
        dut = self.dut
        cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
        dut.sys_rst.value = 1
        for h in self.hosts:
            await h.setup()
        await Timer(200, "ns")
        dut.sys_rst.value = 0
        await Timer(200, "ns")
        self.drivers = [Driver(CsrBus(h, REGS), i, TOPO) for i, h in enumerate(self.hosts)]
        if up:
            for d in self.drivers:
                await d.bring_up()
            for d in self.drivers:
                for port in range(TOPO.link_ports):
                    await d.csr.wait_link_up(port)


    async def context(self, node: int, ctx: int, **kw) -> NicContext:
        c = NicContext(self.hosts[node], self.drivers[node].cfg, ctx, mtu=MTU, **kw)
        await c.setup()
        # The OPEN sequence ends in posted writes: a read flushes them (PCIe ordering) before
        # this host tells anyone the context is open (here: before the other node sends).
        assert await c.reg(P.CtxReg.STATUS) & P.StatusBit.ENABLED
        return c

    def check(self) -> None:
        errs = [f"node {i}: {e}" for i, h in enumerate(self.hosts) for e in h.errors]
        assert not errs, "\n".join(errs[:20])


def _ring(c: NicContext) -> list:
    """Every slot of ``c``'s RX ring whose header is set (diagnostics)."""
    out = []
    for k in range(c.rx_slots):
        a = c.slot_addr(k)
        out.append(type("S", (), {"header": P.unpack_header(c.host.mem.read(a, P.HEADER_BYTES))}))
    return out


def _payload(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


@cocotb.test()
async def test_bar0_64bit_store(dut):
    """A 64-bit store (one 2-dword MWr) writes both halves: a 64-bit CSR written with
    write64 reads back whole (LitePCIe's BAR0 master kept only the first dword)."""
    pair = Pair(dut)
    await pair.start(up=False)
    h = pair.hosts[0]
    assert await pair.drivers[0].csr.read("ident") == P.NIC_IDENT
    # Two consecutive writable CSR words: a 64-bit CSR (most significant word first).
    r = next(r for n, r in sorted(REGS.items(), key=lambda kv: kv[1].addr)
             if r.size == 64 and r.kind == "rw" and r.addr % 8 == 0)
    await h.write64(r.addr, 0x0123_4567_89AB_CDEF)
    hi, lo = await h.read32(r.addr), await h.read32(r.addr + 4)
    if BAR0_MASTER == "litepcie":
        # Only the first dword (the CSR's upper word) reached the bus; the second was
        # dropped by the BAR0 master.
        assert (hi, lo) == (0x89AB_CDEF, 0), f"{hi:#x} {lo:#x}"
        return
    assert (hi, lo) == (0x89AB_CDEF, 0x0123_4567), f"{hi:#x} {lo:#x}"
    pair.check()


@cocotb.test()
async def test_pio_dma_msi_between_socs(dut):
    """PIO and DMA messages both ways: every byte arrives in the other host's RX ring
    (DMA receive), the sender's node stamped, in order; MSI per context: each armed
    context's interrupt arrives with its own vector."""
    pair = Pair(dut)
    await pair.start()
    rng = random.Random(11)
    ctx = [await pair.context(n, 1, rx_log2=4, window_bytes=1 << 14) for n in range(2)]
    await ctx[1].arm_irq(seen=0)
    await ctx[1].reg(P.CtxReg.STATUS)              # flush the arm before node 0 sends
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
        try:
            got = await ctx[dst].recv(4 + 2 + 4, timeout=200000)
        except TimeoutError:
            pair.check()
            h = pair.hosts[src]
            errs = {}
            for n in (0, 1):
                for name in ("host_err_pio", "host_err_rx", "host_err_length", "host_err_dma",
                             "host_err_unknown_ctx", "router_err_length", "router_err_unknown",
                             "router_err_aborted"):
                    v = await pair.drivers[n].csr.read(name)
                    if v:
                        errs[f"{n}:{name}"] = v
            raise AssertionError(
                f"errors {errs}; "
                f"to node {dst}: ring {[(c.header['tag'], c.header['length'], c.header.get('flags')) for c in _ring(ctx[dst])]}; "
                f"sender status {ctx[src].status()}, receiver status {ctx[dst].status()}; "
                f"sender reads {h.read_requests[-8:]}; "
                f"sender tlps {[(str(t.fmt_type), t.length, t.byte_count, t.lower_address) for t in h.port.tlps_out[-12:]]}")
        assert all(p.header["src_node"] == src for p in got)
        assert [p.payload for p in got[:4]] == sent[src][:4]
        assert [p.header["tag"] for p in got[:4]] == [0, 1, 2, 3]
        assert reassemble(got[4:6]) == sent[src][4]
        assert reassemble(got[6:]) == sent[src][5]
    assert pair.hosts[1].irqs() and set(pair.hosts[1].irqs()) == {1}, pair.hosts[1].irq_log
    assert not pair.hosts[0].irqs(), pair.hosts[0].irq_log          # node 0 never armed
    for n in (0, 1):
        s = ctx[n].status()
        assert s["tx_done"] == 2 and s["pio_done"] == 4, s

    # MSI per context: node 1's other contexts armed, one packet to each: each vector once.
    others = [c for c in range(N_CTX) if c != 1]
    rx = {c: await pair.context(1, c, rx_log2=3) for c in others}
    before = len(pair.hosts[1].irq_log)
    for c in others:
        await rx[c].arm_irq(seen=0)
    await rx[others[-1]].reg(P.CtxReg.STATUS)      # flush the arms
    for c in others:
        await ctx[0].pio_send(1, c, bytes([c]) * 16, tag=c)
    for c in others:
        got = await rx[c].recv(1, timeout=50000)
        assert got[0].payload == bytes([c]) * 16
    await pair.hosts[1].wait_for(lambda: len(pair.hosts[1].irq_log) >= before + len(others),
                                 timeout=20000, what="one MSI per context")
    assert sorted(v for (_, v) in pair.hosts[1].irq_log[before:]) == others
    pair.check()


@cocotb.test()
async def test_hal_conformance_vectors(dut):
    """The HAL conformance vectors of the PIO and DMA engines (paranic.spec.conformance,
    the table hal_conformance.c is generated from) from node 0 to node 1: each vector's
    bytes arrive whole and in order, a PIO vector as one packet, a DMA one as
    ceil(len / MTU) packets (at least one). Sizes up to 4 MTUs unless SOC_BIG_VECS=1
    (then also the 1 MiB one)."""
    from paranic.spec.conformance import VECS

    big = os.environ.get("SOC_BIG_VECS") == "1"
    pio_max = min(MTU, P.PIO_WINDOW_BYTES - P.HEADER_BYTES)      # what the HAL uses (hal.c)
    vecs = [(i, v, v.length(MTU, pio_max)) for i, v in enumerate(VECS) if v.how in "PD"]
    vecs = [(i, v, n) for (i, v, n) in vecs if big or n <= 4 * MTU]
    assert {v.how for (_, v, _) in vecs} == {"P", "D"}
    pair = Pair(dut)
    await pair.start()
    rng = random.Random(7)
    offsets, off = [], 0
    for (_, v, n) in vecs:
        offsets.append(off)
        off += (n + 63) // 64 * 64 if v.how == "D" else 0
    tx = await pair.context(0, 2, window_bytes=max(1 << 14, 1 << off.bit_length()))
    rx = await pair.context(1, 2, rx_log2=5)
    npk = [1 if v.how == "P" else max(1, -(-n // MTU)) for (_, v, n) in vecs]
    recv = cocotb.start_soon(rx.recv(sum(npk), timeout=400000 + sum(npk) * 2000))
    sent = []
    first_dma = True
    for (i, v, n), o in zip(vecs, offsets):
        data = _payload(rng, n)
        sent.append(data)
        if v.how == "P":
            await tx.pio_send(1, 2, data, tag=i)
        else:
            if first_dma:                  # no order between the engines: PIO ones out first
                await tx.wait_window()
                first_dma = False
            await tx.dma_send(1, 2, data, offset=o, tag=i)
    got = await recv
    k = 0
    for (i, v, n), data, cnt in zip(vecs, sent, npk):
        mine = got[k:k + cnt]
        k += cnt
        assert all(p.header["tag"] == i for p in mine), (v.name, [p.header["tag"] for p in mine])
        assert reassemble(mine) == data, f"{v.name}: {n} bytes differ"
    assert k == len(got)
    pair.check()
