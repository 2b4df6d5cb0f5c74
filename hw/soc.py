"""ParaNicSoC: a LiteX SoC holding one NicCore behind a LitePCIe endpoint.

What a board target builds on (``boards/``): a SoCCore with a VexRiscv ("standard"
variant: RV32IM with caches, room for the link bring-up firmware) and its own ROM/SRAM,
the :class:`~paranic.hw.standalone.NicCoreStandalone` as a Wishbone slave region of the
SoC bus, and -- once the board hands over its PCIe PHY -- LitePCIe's endpoint, a BAR0
Wishbone master and MSI/MSI-X, wired here by hand rather than by ``SoC.add_pcie`` (which
maps BAR0 onto LiteX's CSR region and adds DMA engines the NIC has its own of).

SoC bus map (byte addresses):

==========================  =================================================================
``rom``/``sram``            the CPU's ROM and SRAM (sizes: ``integrated_rom_size``/``..sram..``)
``paranic`` 0x8000_0000     the NicCore, BAR0's layout: context pages at 0, CSR bank at
                            ``P.BAR0_CSR_OFFSET`` (``P.BAR0_BYTES`` region, uncached for the CPU)
``csr`` 0xF000_0000         LiteX CSRs of the SoC (ctrl, identifier, PCIe PHY, MSI)
==========================  =================================================================

BAR0 (``P.BAR0_BYTES``) as the host sees it (:class:`Bar0Window`): offsets below
``P.BAR0_SOC_CSR_OFFSET`` are the NicCore region (so the host and the soft CPU see the
same registers at the same offsets); offsets from ``P.BAR0_SOC_CSR_OFFSET`` on are the
SoC's LiteX CSR region (``P.BAR0_SOC_CSR_BYTES``, aliased up to BAR0's end).

MSI: one vector per context from NicCore's ``irq``. ``msi_type="msi-multi-vector"``
(LitePCIeMSIMultiVector; the 7-series hard IP takes the vector number) or ``"msi-x"``
(LitePCIeMSIX: the message is a posted write on the crossbar; its table and PBA sit in
BAR0 at ``P.BAR0_MSIX_TABLE_OFFSET``/``P.BAR0_MSIX_PBA_OFFSET``). The MSI/MSI-X enable
CSR resets to "all context vectors on": NicCore arms each context's interrupt itself
(IRQ_ARM), and the PCI capability's enable gates the whole function, so the driver
needs no extra step; the soft CPU or the driver may still mask vectors there.

Clocking: one ``sys`` domain for the CPU, the bus and the NicCore; the PCIe PHY crosses
into its own ``pcie`` domain (PHY built with ``cd="sys"``) and must present the SoC a
64-bit core data path (``data_width=64``; ``pcie_data_width`` may be wider).
"""

from __future__ import annotations

from migen import Constant, If, Signal
from litex.gen import LiteXModule
from litex.soc.integration.soc import SoCRegion
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import wishbone

from paranic.spec import protocol as P

from .pcie_bar0 import Bar0Master
from .pcie_phy import broken_datapaths
from .phy import connect_phy
from .standalone import NicCoreStandalone

#: SoC bus origin of the NicCore region (in VexRiscv's uncached I/O range).
PARANIC_ORIGIN = 0x8000_0000
#: LiteX CSR locations pinned for MSI (so the MSI-X table/PBA land at the spec's offsets).
MSI_CSR_LOC = 30
MSIX_TABLE_CSR_LOC = 31
#: PBA's byte offset inside LitePCIeMSIX's CSR bank: after ``enable`` and ``reserved0``
#: (width <= 32) or after the two words of ``enable`` (width > 32).
MSIX_PBA_BANK_OFFSET = 8
MSI_TYPES = ("msi-multi-vector", "msi-x")
#: BAR0 Wishbone masters: ours (:class:`paranic.hw.pcie_bar0.Bar0Master`, every dword of
#: a multi-dword write) or LitePCIe's (writes only the first dword; kept to show the bug).
BAR0_MASTERS = ("paranic", "litepcie")


class Bar0Window(LiteXModule):
    """Maps BAR0 offsets (``bus_in``, word-addressed, from the BAR0 master, :class:`~paranic.hw.pcie_bar0.Bar0Master`) onto
    the SoC bus (``bus_out``): the NicCore region below ``P.BAR0_SOC_CSR_OFFSET``, the
    LiteX CSR region (``csr_origin``, ``P.BAR0_SOC_CSR_BYTES``) above it."""

    def __init__(self, nic_origin: int, csr_origin: int) -> None:
        self.bus_in = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.bus_out = wishbone.Interface(data_width=32, address_width=32, addressing="word")

        # # #

        bar_words = P.BAR0_BYTES // 4
        off = Signal(max=bar_words)
        self.comb += [
            self.bus_in.connect(self.bus_out),
            off.eq(self.bus_in.adr),
            If(off < P.BAR0_SOC_CSR_OFFSET // 4,
                self.bus_out.adr.eq((nic_origin >> 2) + off),
            ).Else(
                self.bus_out.adr.eq((csr_origin >> 2) + off[:(P.BAR0_SOC_CSR_BYTES // 4 - 1).bit_length()]),
            ),
        ]


class ParaNicSoC(SoCCore):
    """The board-independent SoC: CPU (unless ``with_cpu=False``), NicCore, PCIe glue.

    ``n_links``/``n_ctx``/``mtu`` go to the NicCore; ``node_id`` is the reset value of its
    ``node`` CSR (default: 0, the driver or firmware writes it); ``soc_kwargs`` go to
    SoCCore (``integrated_rom_size`` default 0x8000, ``integrated_sram_size`` 0x8000 (the firmware's topology database and stack),
    ``cpu_variant`` "standard", ``timer_uptime`` on; with ``with_cpu=False`` no CPU, ROM, SRAM, UART or timer).
    """

    mem_map = {**SoCCore.mem_map, "paranic": PARANIC_ORIGIN}

    def __init__(self, platform, sys_clk_freq: float, *, n_links: int = 2,
                 n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
                 node_id: int | None = None, with_cpu: bool = True,
                 with_sync_line: bool = False, collective: str | None = None, ident: str = "ParaNIC",
                 route_fn: str = "migen", **soc_kwargs) -> None:
        if with_cpu:
            soc_kwargs.setdefault("cpu_type", "vexriscv")
            soc_kwargs.setdefault("cpu_variant", "standard")
            soc_kwargs.setdefault("integrated_rom_size", 0x8000)
            soc_kwargs.setdefault("integrated_sram_size", 0x8000)
            # timer0's 64-bit uptime counter: the firmware's clock (timer0_uptime_cycles).
            soc_kwargs.setdefault("timer_uptime", True)
        else:
            soc_kwargs.update(cpu_type=None, integrated_rom_size=0, integrated_sram_size=0)
            soc_kwargs.setdefault("with_uart", False)
            soc_kwargs.setdefault("with_timer", False)
        soc_kwargs.setdefault("csr_data_width", 32)
        if soc_kwargs["csr_data_width"] != 32:
            raise ValueError("ParaNicSoC: csr_data_width must be 32 (LitePCIe, the driver)")
        SoCCore.__init__(self, platform, sys_clk_freq, ident=ident, **soc_kwargs)
        csr_bytes = self.csr.paging * (2 ** self.csr.address_width * 4 // self.csr.paging)
        if csr_bytes > P.BAR0_SOC_CSR_BYTES:
            raise ValueError(f"ParaNicSoC: the LiteX CSR region ({csr_bytes:#x} bytes) does not fit "
                             f"BAR0's SoC CSR window ({P.BAR0_SOC_CSR_BYTES:#x}): lower csr_address_width")
        self.n_links = n_links
        self.n_ctx = n_ctx
        # The NicCore's CSRs live in its own bank array (BAR0's CSR region,
        # hw/standalone.py): LiteX's CSR bank array must not map them (or its memories) a
        # second time, so "nic" gets no location in the SoC's CSR region.
        soc_map = self.csr.address_map
        self.csr.address_map = lambda name, memory: None if name == "nic" else soc_map(name, memory)

        # NicCore on the SoC bus ----------------------------------------------------------------
        self.nic = NicCoreStandalone(n_links=n_links, n_ctx=n_ctx, mtu=mtu,
                                     with_sync_line=with_sync_line, collective=collective,
                                     route_fn=route_fn)
        if node_id is not None:
            if not 0 <= node_id < P.MAX_NODES:
                raise ValueError(f"node_id {node_id} not in 0..{P.MAX_NODES - 1}")
            self.nic.nic.node.storage.reset = Constant(node_id, P.NODE_BITS)
        self.nic_bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.bus.add_slave("paranic", self.nic_bus,
                           SoCRegion(origin=self.mem_map["paranic"], size=P.BAR0_BYTES, cached=False))
        # The NicCore decodes BAR0 offsets: strip the region's origin.
        self.nic_remap = wishbone.Remapper(self.nic_bus, self.nic.bus, origin=0, size=P.BAR0_BYTES)
        self.add_constant("PARANIC_BASE", self.mem_map["paranic"])

    # PCIe ---------------------------------------------------------------------------------------
    def add_paranic_pcie(self, phy, msi_type: str = "msi-multi-vector",
                         max_pending_requests: int = 8, bar0_master: str = "paranic") -> None:
        """LitePCIe endpoint on ``phy``; BAR0 -> ``bar0_master`` -> :class:`Bar0Window`;
        NicCore's DMA ports on the crossbar; one MSI (``msi_type``) vector per context.
        ``bar0_master="litepcie"`` uses LitePCIe's master, which drops all but the first
        dword of a multi-dword write (tests only: it shows the bug)."""
        from litepcie.core import LitePCIeEndpoint, LitePCIeMSIMultiVector, LitePCIeMSIX
        from litepcie.frontend.wishbone import LitePCIeWishboneMaster

        if getattr(phy, "data_width", None) != 64:
            raise ValueError(f"ParaNicSoC: the PCIe PHY's core data path must be 64 bits "
                             f"(build it with data_width=64), not {getattr(phy, 'data_width', None)}")
        if getattr(phy, "bar0_size", P.BAR0_BYTES) != P.BAR0_BYTES:
            raise ValueError(f"ParaNicSoC: build the PHY with bar0_size=P.BAR0_BYTES "
                             f"({P.BAR0_BYTES:#x}), not {phy.bar0_size:#x}")
        broken = broken_datapaths(phy)
        if broken:
            raise ValueError(f"ParaNicSoC: {type(phy).__name__}'s datapaths ({', '.join(broken)}) are "
                             f"LitePCIe's, which lose data between {phy.pcie_data_width}-bit "
                             f"hard-IP beats and the {phy.data_width}-bit core: build the PHY "
                             f"from paranic.hw.pcie_phy")
        if bar0_master not in BAR0_MASTERS:
            raise ValueError(f"bar0_master {bar0_master!r}: one of {BAR0_MASTERS}")
        if msi_type not in MSI_TYPES:
            raise ValueError(f"msi_type {msi_type!r}: one of {MSI_TYPES}")
        if msi_type == "msi-multi-vector" and self.n_ctx > 32:
            raise ValueError(f"{self.n_ctx} contexts need MSI-X (MSI has at most 32 vectors)")
        if getattr(self, "pcie_phy", None) is not phy:
            self.pcie_phy = phy
        self.msi_type = msi_type

        # Endpoint (64-bit addresses: host buffers may lie anywhere).
        self.pcie_endpoint = ep = LitePCIeEndpoint(phy, max_pending_requests=max_pending_requests,
                                                   endianness=phy.endianness, address_width=64)

        # BAR0 -> SoC bus.
        if bar0_master == "paranic":
            self.pcie_mmap = Bar0Master(ep.crossbar.get_slave_port(lambda a: 1), phy.id,
                                        data_width=phy.data_width)
        else:
            self.pcie_mmap = LitePCIeWishboneMaster(ep, base_address=0,
                                                    qword_aligned=getattr(phy, "qword_aligned", False))
        self.pcie_bar0 = Bar0Window(self.mem_map["paranic"], self.mem_map["csr"])
        self.comb += self.pcie_mmap.wishbone.connect(self.pcie_bar0.bus_in)
        self.bus.add_master("pcie_bar0", master=self.pcie_bar0.bus_out)

        # NicCore DMA on the crossbar.
        nic = self.nic.nic
        for dma, port in ((nic.dma_rd, ep.crossbar.get_master_port(read_only=True)),
                          (nic.dma_wr, ep.crossbar.get_master_port(write_only=True))):
            self.comb += [
                dma.source.connect(port.source),
                port.sink.connect(dma.sink),
                dma.channel.eq(port.channel),
                dma.req_id.eq(phy.id),
            ]

        # MSI: one vector per context, enabled at reset (see the module doc).
        self.csr.add("pcie_msi", n=MSI_CSR_LOC)
        if msi_type == "msi-x":
            self.csr.add("pcie_msi_table", n=MSIX_TABLE_CSR_LOC)
            self.pcie_msi = msi = LitePCIeMSIX(ep, width=self.n_ctx, default_enable=1)
        else:
            self.pcie_msi = msi = LitePCIeMSIMultiVector(width=self.n_ctx)
            msi.enable.storage.reset = Constant(2 ** self.n_ctx - 1, self.n_ctx)
            self.comb += msi.source.connect(phy.msi)
        self.comb += msi.irqs.eq(nic.irq)
        self.add_constant("PARANIC_MSI_VECTORS", self.n_ctx)

        if hasattr(self, "crg") and hasattr(phy, "cd_pcie"):
            self.platform.add_false_path_constraints(self.crg.cd_sys.clk, phy.cd_pcie.clk)

    # Links --------------------------------------------------------------------------------------
    def add_link_phy(self, i: int, adapter) -> None:
        """PHY adapter (the contract of :mod:`paranic.hw.phy`) on NicCore link port ``i``."""
        if not 0 <= i < self.n_links:
            raise ValueError(f"link port {i}: this NicCore has ports 0..{self.n_links - 1}")
        name = f"link_phy{i}"
        if hasattr(self, name):
            raise ValueError(f"link port {i} has a PHY adapter already")
        self.add_module(name=name, module=adapter)
        self.comb += connect_phy(self.nic.nic.links[i], adapter)
        # The adapter's status and counters in the SoC's CSR region (BAR0_SOC_CSR_OFFSET
        # for the host, the csr region for the soft CPU): link_phy<i>_*.
        if hasattr(adapter, "add_csrs"):
            adapter.add_csrs()

    def add_sync_line(self, pad) -> None:
        """The ribbon's wired-AND sync line on ``pad`` (an open-drain pin,
        :func:`paranic.hw.phy.ribbon_pads.sync_io`) as the barrier's line path; needs
        ``with_sync_line=True``. Software selects it with the ``barrier_use_line`` CSR."""
        from .phy.syncline import SyncLine

        barrier = self.nic.nic.barrier
        if not barrier.with_sync_line:
            raise ValueError("add_sync_line: build the SoC with with_sync_line=True")
        self.sync_line = line = SyncLine(pad)
        self.comb += [line.arrive.eq(barrier.line_arrive), barrier.line_done.eq(line.done)]
        line.add_csrs()

    def add_link_leds(self, pads) -> None:
        """One LED per link port, lit while the link is up (``pads``: a Signal of at least
        ``n_links`` bits, or a list of 1-bit pads)."""
        leds = list(pads) if isinstance(pads, (list, tuple)) else [pads[i] for i in range(len(pads))]
        if len(leds) < self.n_links:
            raise ValueError(f"{len(leds)} LEDs for {self.n_links} links")
        self.comb += [led.eq(link.up) for led, link in zip(leds, self.nic.nic.links)]


__all__ = ["ParaNicSoC", "Bar0Window", "PARANIC_ORIGIN", "MSI_TYPES", "BAR0_MASTERS"]
