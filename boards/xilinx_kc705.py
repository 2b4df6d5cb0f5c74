"""ParaNIC on the Xilinx KC705 (xc7k325t): PCIe Gen2 x8, links on the SFP cage (GTX) and
on the FMC HPC header (ribbon).

    python -m paranic.boards.xilinx_kc705 --links sfp,ribbon --build [--load | --flash]

The KC705 has one SFP cage, so a ring (two links) takes the SFP plus one FMC ribbon
link (default), or two ribbon links on the FMC HPC header (``--links ribbon``).
The SFP's GTX quad 117 is clocked by the 125 MHz SGMII reference clock (MGTREFCLK0).
"""

from __future__ import annotations

from litex_boards.platforms import xilinx_kc705

from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

from .common import (Board, LinkPort, PARTS, add_links, has_ribbon, s7_crg, gt_link, gt_pads, led_pads,
                     ribbon_link, run, add_pcie, s7_pcie_phy)


def _sfp(soc, i):
    soc.comb += soc.platform.request("sfp_tx_disable_n").eq(1)
    tx, rx = gt_pads(soc.platform, "sfp")
    return gt_link(soc, i, tx=tx, rx=rx, refclk=soc.platform.request("sgmii_clock"), refclk_freq=125e6)


BOARD = Board(
    name="kc705", title="Xilinx KC705", platform=xilinx_kc705.Platform, part=PARTS["xc7k325t"],
    pcie="x8 Gen2",
    ports={
        "sfp": (LinkPort("sfp", "SFP cage (GTX quad 117)", _sfp),),
        "ribbon": (LinkPort("ribbon", "FMC HPC (LA pairs)", lambda s, i: ribbon_link(s, i, connector="HPC")),
                   LinkPort("ribbon", "FMC LPC (LA pairs)", lambda s, i: ribbon_link(s, i, connector="LPC"))),
    },
    default_links=("sfp", "ribbon"),
    ofl_args=("-b", "kc705"),
    ofl_note="openFPGALoader 0.10 knows the board (kc705, Digilent JTAG) and ships its SPI bridge "
             "(spiOverJtag_xc7k325tffg900) for --flash",
    cable="SFP: 1000BASE-X/10G SFP+ DAC or two SFP modules and fibre; FMC: FMC-to-ribbon breakout pair",
)


class Target(ParaNicSoC):
    def __init__(self, sys_clk_freq: float = P.TARGET_CLK_HZ, links=None, **kwargs) -> None:
        platform = xilinx_kc705.Platform()
        BOARD.resolve_links(links)
        self.crg = s7_crg(platform, sys_clk_freq, reset="cpu_reset", ribbon=True, mmcm=True)
        ParaNicSoC.__init__(self, platform, sys_clk_freq, n_links=2, ident="ParaNIC on KC705",
                            with_sync_line=has_ribbon(BOARD, links), **kwargs)
        # PCIe Gen2 x8: the hard block's 128-bit stream at 250 MHz; ParaNicSoC takes 64 bits.
        add_pcie(self, s7_pcie_phy(platform, "pcie_x8"))
        add_links(self, BOARD, links, leds=led_pads(platform, 2))


def main(argv=None) -> int:
    return run(BOARD, Target, argv)


if __name__ == "__main__":
    raise SystemExit(main())
