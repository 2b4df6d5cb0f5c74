"""ParaNicSocNode: a whole ParaNicSoC (VexRiscv, ROM, SRAM, NicCore) as one Verilog module
for the cluster simulator, without PCIe.

What differs from a board's SoC (:class:`~paranic.hw.soc.ParaNicSoC`): no PHY, no pins. The
module's ports (``node_ports``: name, width, direction) are

* ``sys_clk``/``sys_rst``: the one clock domain;
* ``bus_*``: a 32-bit word-addressed Wishbone slave taking BAR0 offsets, entering the SoC
  bus through :class:`~paranic.hw.soc.Bar0Window` exactly as the PCIe BAR0 master does
  (NicCore region below ``P.BAR0_SOC_CSR_OFFSET``, the SoC's LiteX CSRs above);
* ``dma_rd_*``/``dma_wr_*``/``irq``: NicCore's DMA master ports and interrupt lines, as the
  NicCore cluster (:class:`paranic.sim.cluster.NicCluster`) has them;
* ``link<i>_tx_*``/``link<i>_rx_*``: the raw ``phy_layout`` streams of link port ``i``
  (for the simulated cables);
* ``dna`` (64) and ``cfg_node`` (16): the identity inputs (the FPGA's DNA and a configured
  node id, bit 15 = configured), wired to NicCore's ``dna``/``cfg_node`` (CSRs ``id_dna``/
  ``id_cfg_node``, hw/mgmt.py).

:class:`SocNodePlatform` is the LiteX platform of such a module: its ``build`` (what LiteX's
``Builder`` calls) writes the Verilog with ``node_ports`` as the module's ports. The build
itself (Builder, software libraries, ROM init file) is ``paranic.sim.socbuild``.
"""

from __future__ import annotations

import os
from typing import Iterator

from migen import ClockDomain, Signal
from litex.build.generic_platform import GenericPlatform

from paranic.spec import protocol as P

from .soc import Bar0Window, ParaNicSoC

#: Placeholder ROM contents (``j .``): the ROM must have an init file for the simulator to
#: load the firmware into at run time; the real image replaces it there.
ROM_PLACEHOLDER = [0x0000006F]


def endpoint_signals(ep) -> Iterator[tuple[str, Signal, bool]]:
    """A stream endpoint's signals as (suffix, signal, driven by the producer)."""
    yield "valid", ep.valid, True
    yield "ready", ep.ready, False
    yield "first", ep.first, True
    yield "last", ep.last, True
    for f in ep.payload.layout:
        yield f"payload_{f[0]}", getattr(ep, f[0]), True


class ParaNicSocNode(ParaNicSoC):
    """One simulated SoC node (see the module doc). ``n_links``/``n_ctx``/``mtu``/
    ``table_nodes`` go to the NicCore; ``soc_kwargs`` to :class:`ParaNicSoC`."""

    def __init__(self, platform, sys_clk_freq: float = P.TARGET_CLK_HZ, *, n_links: int = 2,
                 n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU, **soc_kwargs) -> None:
        # No UART on a node without pins (libbase's console then prints nothing).
        soc_kwargs.setdefault("with_uart", False)
        super().__init__(platform, sys_clk_freq, n_links=n_links, n_ctx=n_ctx, mtu=mtu, **soc_kwargs)
        self.node_ports: list[tuple[str, int, str]] = []
        self.node_ios: list[Signal] = []

        # Clock and reset from the ports.
        self.cd_sys = ClockDomain("sys")
        self._port(self.cd_sys.clk, "sys_clk", "in")
        self._port(self.cd_sys.rst, "sys_rst", "in")

        # The host's BAR0 accesses -> Bar0Window -> SoC bus (a bus master, as over PCIe).
        self.bar0 = Bar0Window(self.mem_map["paranic"], self.mem_map["csr"])
        self.bus.add_master("host_bar0", master=self.bar0.bus_out)
        for s in ("adr", "dat_w", "sel", "cyc", "stb", "we"):
            self._expose(getattr(self.bar0.bus_in, s), f"bus_{s}", "in")
        for s in ("dat_r", "ack"):
            self._expose(getattr(self.bar0.bus_in, s), f"bus_{s}", "out")

        # NicCore's DMA ports and interrupts.
        nic = self.nic.nic
        for name, ep, master in (("dma_rd_source", nic.dma_rd.source, True),
                                 ("dma_rd_sink", nic.dma_rd.sink, False),
                                 ("dma_wr_source", nic.dma_wr.source, True),
                                 ("dma_wr_sink", nic.dma_wr.sink, False)):
            self._expose_endpoint(ep, name, master)
        self._expose(nic.irq, "irq", "out")

        # Link PHY streams (NicCore's transmitter drives tx, the cable drives rx).
        for i, (tx, rx) in enumerate(nic.phys):
            self._expose_endpoint(tx, f"link{i}_tx", True)
            self._expose_endpoint(rx, f"link{i}_rx", False)

        # Identity.
        self.dna = Signal(64)
        self.cfg_node = Signal(16)
        self._expose(self.dna, "dna", "in")
        self._expose(self.cfg_node, "cfg_node", "in")
        # NicCore's identity inputs (hw/mgmt.py; CSRs id_dna, id_cfg_node).
        self.comb += [nic.dna.eq(self.dna), nic.cfg_node.eq(self.cfg_node)]

        # The ROM gets an init file (the simulator loads the firmware there at run time);
        # not LiteX's init_rom, which would shrink the ROM to the placeholder's size.
        if self.integrated_rom_size:
            self.rom.mem.init = list(ROM_PLACEHOLDER)
            self.integrated_rom_initialized = True

    # Ports ------------------------------------------------------------------------------------
    def _port(self, sig: Signal, name: str, direction: str) -> None:
        sig.name_override = name
        self.node_ios.append(sig)
        self.node_ports.append((name, len(sig), direction))

    def _expose(self, sig: Signal, name: str, direction: str) -> None:
        top = Signal(len(sig), name_override=name)
        self.comb += (sig.eq(top) if direction == "in" else top.eq(sig))
        self.node_ios.append(top)
        self.node_ports.append((name, len(sig), direction))

    def _expose_endpoint(self, ep, name: str, master: bool) -> None:
        """``master``: the node drives valid/payload."""
        for suffix, sig, by_producer in endpoint_signals(ep):
            out = by_producer == master
            self._expose(sig, f"{name}_{suffix}", "out" if out else "in")


class SocNodePlatform(GenericPlatform):
    """A platform without pins: ``build`` writes the SoC as a Verilog module whose ports
    are the SoC's ``node_ios`` (what LiteX's Builder calls through ``SoC.build``)."""

    def __init__(self, name: str = "paranic_socnode") -> None:
        super().__init__("sim", [], name=name)

    def build(self, soc, build_dir: str = "build", build_name: str = "paranic_socnode",
              run: bool = False, **kwargs):
        os.makedirs(build_dir, exist_ok=True)
        fragment = soc.get_fragment()
        self.finalize(fragment)
        out = self.get_verilog(fragment, name=build_name, ios=set(soc.node_ios))
        cwd = os.getcwd()
        os.chdir(build_dir)   # the memories' init files go next to the Verilog
        try:
            out.write(f"{build_name}.v")
        finally:
            os.chdir(cwd)
        return out.ns


__all__ = ["ParaNicSocNode", "SocNodePlatform", "endpoint_signals", "ROM_PLACEHOLDER"]
