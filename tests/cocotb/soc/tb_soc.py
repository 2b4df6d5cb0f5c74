"""cocotb tests of ParaNicSoC over PCIe: cocotbext-pcie's root complex and UltraScale
hard-IP model on LitePCIe's real TLP logic (see test_soc_cocotb.py)."""

from __future__ import annotations

import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Timer, with_timeout
from cocotbext.axi import AxiStreamBus
from cocotbext.pcie.core import RootComplex
from cocotbext.pcie.core.caps import PciCapId
from cocotbext.pcie.xilinx.us import UltraScalePcieDevice

from model.csr import CsrBus, CsrConfig
from model.host import NicContext
from model.pcie_rc import RcHost
from paranic.hw.standalone import read_csr_json

import hardip_shim
from paranic.spec import protocol as P

REGS = read_csr_json(os.environ["SOC_CSR"])
N_CTX = int(os.environ["SOC_N_CTX"])
MTU = int(os.environ["SOC_MTU"])


def hard_ip(rc, ip) -> UltraScalePcieDevice:
    """cocotbext-pcie's UltraScale hard IP on the shim ``ip`` (its ports), configured as
    a board configures the Vivado IP for ParaNIC (ids, BAR0, MSI-X in BAR0), on a new
    root port of ``rc``."""
    dev = UltraScalePcieDevice(
        pcie_generation=3, pcie_link_width=4, user_clk_frequency=hardip_shim.USER_CLK_HZ, alignment="dword",
        enable_client_tag=True,
        pf0_msi_enable=False, pf0_msix_enable=True, pf0_msix_table_size=N_CTX - 1,
        pf0_msix_table_bir=0, pf0_msix_table_offset=P.BAR0_MSIX_TABLE_OFFSET,
        pf0_msix_pba_bir=0, pf0_msix_pba_offset=P.BAR0_MSIX_PBA_OFFSET,
        user_clk=ip.user_clk, user_reset=ip.user_reset, user_lnk_up=ip.user_lnk_up,
        rq_bus=AxiStreamBus.from_prefix(ip, "s_axis_rq"),
        pcie_rq_seq_num=ip.pcie_rq_seq_num, pcie_rq_seq_num_vld=ip.pcie_rq_seq_num_vld,
        pcie_rq_tag=ip.pcie_rq_tag, pcie_rq_tag_av=ip.pcie_rq_tag_av,
        pcie_rq_tag_vld=ip.pcie_rq_tag_vld,
        rc_bus=AxiStreamBus.from_prefix(ip, "m_axis_rc"),
        cq_bus=AxiStreamBus.from_prefix(ip, "m_axis_cq"),
        pcie_cq_np_req=ip.pcie_cq_np_req, pcie_cq_np_req_count=ip.pcie_cq_np_req_count,
        cc_bus=AxiStreamBus.from_prefix(ip, "s_axis_cc"),
        cfg_phy_link_down=ip.cfg_phy_link_down, cfg_phy_link_status=ip.cfg_phy_link_status,
        cfg_negotiated_width=ip.cfg_negotiated_width, cfg_current_speed=ip.cfg_current_speed,
        cfg_max_payload=ip.cfg_max_payload, cfg_max_read_req=ip.cfg_max_read_req,
        cfg_function_status=ip.cfg_function_status, cfg_ltssm_state=ip.cfg_ltssm_state,
        cfg_interrupt_msi_enable=ip.cfg_interrupt_msi_enable,
        cfg_interrupt_msi_sent=ip.cfg_interrupt_msi_sent,
        cfg_interrupt_msi_fail=ip.cfg_interrupt_msi_fail,
        cfg_interrupt_msi_mmenable=ip.cfg_interrupt_msi_mmenable,
    )
    dev.functions[0].vendor_id = P.PCI_VENDOR_ID
    dev.functions[0].device_id = P.PCI_DEVICE_ID
    # BAR0 as USPCIEPHY configures the Vivado IP (pf0_bar0_size from bar0_size): 32-bit memory.
    dev.functions[0].configure_bar(0, P.BAR0_BYTES)
    rc.make_port().connect(dev)
    return dev


async def start_rc(dut, rc) -> None:
    """sys clock and reset, then enumeration."""
    cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
    dut.sys_rst.value = 1
    await Timer(100, "ns")
    dut.sys_rst.value = 0
    await rc.enumerate()


async def function(rc, dev):
    fn = rc.find_device(dev.functions[0].pcie_id)
    await fn.enable_device()
    await fn.set_master()
    return fn


class Bench:
    """One SoC under a root complex; the hard IP modelled at its port boundary."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.rc = RootComplex()
        self.dev = hard_ip(self.rc, dut.pcie_support.pcie_us_i)
        self.irqs: list[int] = []

    async def start(self) -> None:
        await start_rc(self.dut, self.rc)
        self.fn = await function(self.rc, self.dev)
        self.bar = self.fn.bar_window[0]

    async def read32(self, addr: int) -> int:
        # A completion that never comes fails the test instead of hanging it.
        return await with_timeout(self.bar.read_dword(addr), 50, "us")

    async def write32(self, addr: int, value: int) -> None:
        await self.bar.write_dword(addr, value)

    async def csr_write(self, name: str, value: int) -> None:
        r = REGS[name]
        for i in range(r.words):
            await self.write32(r.addr + 4 * i, (value >> (32 * (r.words - 1 - i))) & 0xFFFFFFFF)

    async def csr_read(self, name: str) -> int:
        r = REGS[name]
        v = 0
        for i in range(r.words):
            v = v << 32 | await self.read32(r.addr + 4 * i)
        return v & ((1 << r.size) - 1)


@cocotb.test()
async def test_enumeration_and_identity(dut):
    """Config space (ids, BAR0 size, MSI-X capability) and the identity registers."""
    b = Bench(dut)
    await b.start()
    fn = b.fn
    assert fn.vendor_id == P.PCI_VENDOR_ID and fn.device_id == P.PCI_DEVICE_ID
    assert b.bar.size == P.BAR0_BYTES, hex(b.bar.size)
    assert fn.get_capability_offset(PciCapId.MSIX)
    assert await fn.msix_vec_count() == N_CTX
    assert await b.csr_read("ident") == P.NIC_IDENT
    assert await b.csr_read("version") == P.NIC_VERSION
    assert await b.csr_read("host_info_n_ctx") == N_CTX


@cocotb.test()
async def test_mmio_context_pages(dut):
    """BAR0 writes reach the right context page and read back through the SoC."""
    b = Bench(dut)
    await b.start()
    await b.csr_write("node", 5)
    assert await b.csr_read("node") == 5
    for c in (1, 3):
        await b.csr_write("host_ctx_sel", c)
        await b.csr_write("host_ctx_enable", 1)
        await b.csr_write("host_ctx_write", 1)
    status = [await b.read32(c * P.CTX_PAGE_BYTES + P.CtxReg.STATUS) for c in range(N_CTX)]
    assert [s & P.StatusBit.ENABLED for s in status] == [0, P.StatusBit.ENABLED, 0, P.StatusBit.ENABLED]
    # The PIO window of a context takes 64-bit stores as two dwords: a doorbell for a
    # packet whose header is invalid (type 0 length > MTU) is refused and counted.
    page = 1 * P.CTX_PAGE_BYTES
    hdr = P.pack_header(dst_node=5, dst_ctx=1, type=int(P.PacketType.DATA), length=4096, flags=0)
    for i in range(0, len(hdr), 4):
        await b.write32(page + P.PIO_WINDOW_OFFSET + i, int.from_bytes(hdr[i:i + 4], "little"))
    before = await b.csr_read("host_err_length")
    await b.write32(page + P.CtxReg.PIO_DOORBELL, 0)
    for _ in range(50):
        if await b.csr_read("host_err_length") != before:
            break
    assert await b.csr_read("host_err_length") == before + 1
    # The SoC's CSR window in BAR0: MSI-X enable resets to all context vectors on.
    assert await b.read32(P.BAR0_MSIX_PBA_OFFSET - 8) == (1 << N_CTX) - 1


@cocotb.test()
async def test_contexts_and_msix(dut):
    """The driver's view over PCIe: MSI-X vectors allocated (the root complex writes the
    table through BAR0), every context opened by the C context sequence (OPEN) over the
    CSRs with its rings in the root complex's memory, and each context's interrupt
    arriving at the root complex as its own MSI-X message."""
    b = Bench(dut)
    await b.start()
    host = RcHost(b.rc, b.fn, dut.sys_clk)
    assert await host.setup() == N_CTX
    cfg = CsrConfig(CsrBus(host, REGS))
    ctxs = []
    for c in range(N_CTX):
        x = NicContext(host, cfg, c, mtu=MTU)
        await x.setup()
        ctxs.append(x)
    for c, x in enumerate(ctxs):
        st = await x.reg(P.CtxReg.STATUS)
        assert st & P.StatusBit.ENABLED, (c, hex(st))
    # IRQ_ARM with a count other than the RX tail raises the context's interrupt at
    # once; one context after the other, each must arrive as its own vector.
    for c in reversed(range(N_CTX)):
        await ctxs[c].arm_irq(seen=1)
        await host.wait_for(lambda: c in host.irqs(), 2000, what=f"MSI-X of context {c}")
    assert host.irqs() == list(reversed(range(N_CTX)))
    # Armed with the tail it stays quiet until a packet arrives (none does here).
    await ctxs[1].arm_irq(seen=0)
    await host.cycles(200)
    assert host.irqs() == list(reversed(range(N_CTX)))
    assert await ctxs[1].reg(P.CtxReg.STATUS) & P.StatusBit.IRQ_ARMED
    assert not host.errors, host.errors
