"""ParaNIC on the Xilinx AC701 (xc7a200t): PCIe Gen2 x4, links on the SFP cage (GTP) and
on the FMC HPC header (ribbon).

    python -m paranic.boards.xilinx_ac701 --links sfp,ribbon --build [--load]

One SFP cage: a ring takes the SFP plus one ribbon link (default) or two ribbon links.
The SFP's GTP quad 213 takes its reference clock through the board's clock mux
(SFP_MGT_CLK_SEL[1:0] = 00: the 125 MHz oscillator) on MGTREFCLK0.
"""

from __future__ import annotations

from litex_boards.platforms import xilinx_ac701

from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

from .common import (Board, LinkPort, PARTS, add_links, has_ribbon, s7_crg, gt_link, gt_pads, led_pads,
                     ribbon_link, run, add_pcie, s7_pcie_phy)


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
        # One ribbon: it takes 20 of the HPC's LA pairs (paranic.hw.phy.ribbon_pads).
        "ribbon": (LinkPort("ribbon", "FMC HPC (LA pairs)", lambda s, i: ribbon_link(s, i, connector="HPC")),),
    },
    default_links=("sfp", "ribbon"),
    ofl_args=("-b", "ac701"),
    ofl_note="openFPGALoader 0.10 knows the board (ac701, Digilent JTAG) but ships no SPI bridge "
             "for the xc7a200t-fbg676, so --flash fails there: load to SRAM, or flash with Vivado",
    cable="SFP: SFP DAC or modules and fibre; FMC: FMC-to-ribbon breakout pair",
)


class Target(ParaNicSoC):
    def __init__(self, sys_clk_freq: float = P.TARGET_CLK_HZ, links=None, **kwargs) -> None:
        platform = xilinx_ac701.Platform()
        BOARD.resolve_links(links)
        self.crg = s7_crg(platform, sys_clk_freq, reset="cpu_reset", ribbon=True)
        ParaNicSoC.__init__(self, platform, sys_clk_freq, n_links=2, ident="ParaNIC on AC701",
                            with_sync_line=has_ribbon(BOARD, links), **kwargs)
        add_pcie(self, s7_pcie_phy(platform, "pcie_x4"))
        add_links(self, BOARD, links, leds=led_pads(platform, 2))


def main(argv=None) -> int:
    return run(BOARD, Target, argv)


if __name__ == "__main__":
    raise SystemExit(main())
