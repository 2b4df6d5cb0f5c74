"""ParaNIC on the Xilinx AC701 (xc7a200t): PCIe Gen2 x4, links on the SFP cage (GTP) and
on the FMC HPC header (ribbon).

    python -m paranic.boards.xilinx_ac701 --links sfp,ribbon --build [--load]

One SFP cage: a ring takes the SFP plus one ribbon link (default) or two ribbon links.
The SFP's GTP quad 213 takes its reference clock through the board's clock mux
(SFP_MGT_CLK_SEL[1:0] = 00: the 125 MHz oscillator) on MGTREFCLK0.
"""

from __future__ import annotations

from migen import ClockDomain, Signal

from litex.gen import LiteXModule
from litex.soc.cores.clock import S7PLL, S7IDELAYCTRL
from litex_boards.platforms import xilinx_ac701
from paranic.hw.pcie_phy import S7PCIEPHY   # LitePCIe's, with a working receive path

from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

from .common import (Board, LinkPort, PARTS, add_links, gt_link, gt_pads, led_pads,
                     ribbon_link, run, set_pci_ids)


def _sfp(soc, i):
    p = soc.platform
    soc.comb += [p.request("sfp_tx_disable_n").eq(1),
                 p.request("sfp_mgt_clk_sel0").eq(0), p.request("sfp_mgt_clk_sel1").eq(0)]
    tx, rx = gt_pads(p, "sfp")
    return gt_link(soc, i, tx=tx, rx=rx, refclk=p.request("gtp_refclk"), refclk_freq=125e6)


BOARD = Board(
    name="ac701", title="Xilinx AC701", platform=xilinx_ac701.Platform, part=PARTS["xc7a200t"],
    pcie="x4 Gen2",
    ports={
        "sfp": (LinkPort("sfp", "SFP cage (GTP quad 213)", _sfp),),
        "ribbon": (LinkPort("ribbon", "FMC HPC (ribbon link A)", lambda s, i: ribbon_link(s, i, connector="HPC")),
                   LinkPort("ribbon", "FMC HPC (ribbon link B)", lambda s, i: ribbon_link(s, i, connector="HPC"))),
    },
    default_links=("sfp", "ribbon"),
    ofl_args=("-b", "ac701"),
    ofl_note="openFPGALoader 0.10 knows the board (ac701, Digilent JTAG) but ships no SPI bridge "
             "for the xc7a200t-fbg676, so --flash fails there: load to SRAM, or flash with Vivado",
    cable="SFP: SFP DAC or modules and fibre; FMC: FMC-to-ribbon breakout pair",
)


class _CRG(LiteXModule):
    def __init__(self, platform, sys_clk_freq: float) -> None:
        self.rst = Signal()
        self.cd_sys = ClockDomain()
        self.cd_sys4x = ClockDomain()     # the ribbon PHY's serial DDR clock
        self.cd_idelay = ClockDomain()    # its IDELAYCTRL reference
        self.pll = pll = S7PLL(speedgrade=-2)
        self.comb += pll.reset.eq(platform.request("cpu_reset") | self.rst)
        pll.register_clkin(platform.request("clk200"), 200e6)
        pll.create_clkout(self.cd_sys, sys_clk_freq)
        pll.create_clkout(self.cd_sys4x, 4 * sys_clk_freq)
        pll.create_clkout(self.cd_idelay, 200e6)
        self.idelayctrl = S7IDELAYCTRL(self.cd_idelay)
        platform.add_false_path_constraints(self.cd_sys.clk, pll.clkin)


class Target(ParaNicSoC):
    def __init__(self, sys_clk_freq: float = P.TARGET_CLK_HZ, links=None, **kwargs) -> None:
        platform = xilinx_ac701.Platform()
        BOARD.resolve_links(links)
        self.crg = _CRG(platform, sys_clk_freq)
        ParaNicSoC.__init__(self, platform, sys_clk_freq, n_links=2, ident="ParaNIC on AC701", **kwargs)
        self.pcie_phy = S7PCIEPHY(platform, platform.request("pcie_x4"), data_width=64,
                                  pcie_data_width=128, bar0_size=P.BAR0_BYTES,
                                  msi_type="msi-multi-vector")
        set_pci_ids(self.pcie_phy)
        self.add_paranic_pcie(self.pcie_phy)
        add_links(self, BOARD, links, leds=led_pads(platform, 2))


def main(argv=None) -> int:
    return run(BOARD, Target, argv)


if __name__ == "__main__":
    raise SystemExit(main())
