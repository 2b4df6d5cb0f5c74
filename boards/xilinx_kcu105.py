"""ParaNIC on the Xilinx KCU105 (xcku040): PCIe Gen3 x8, two links on the two SFP+ cages
(GTH quad 226, 156.25 MHz from the SI570 after power-up on MGTREFCLK0).

    python -m paranic.boards.xilinx_kcu105 --build [--load]
"""

from __future__ import annotations

from litex.soc.cores.clock import USMMCM
from litex_boards.platforms import xilinx_kcu105
from paranic.hw.pcie_phy import USPCIEPHY   # LitePCIe's, with a working receive path

from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

from .common import Board, LinkPort, PARTS, add_links, gt_link, gt_pads, led_pads, run, add_pcie, us_crg


def _sfp(n):
    def build(soc, i):
        soc.comb += soc.platform.request("sfp_tx_disable_n", n).eq(1)
        tx, rx = gt_pads(soc.platform, "sfp", n)
        if not hasattr(soc, "_quad226_refclk"):     # both cages share the quad's refclk
            soc._quad226_refclk = soc.platform.request("si570_refclk")
        return gt_link(soc, i, tx=tx, rx=rx, refclk=soc._quad226_refclk, refclk_freq=156.25e6)
    return build


BOARD = Board(
    name="kcu105", title="Xilinx KCU105", platform=xilinx_kcu105.Platform, part=PARTS["xcku040"],
    pcie="x8 Gen3",
    ports={"sfp": (LinkPort("sfp", "SFP+ cage P3 (GTH)", _sfp(0)),
                   LinkPort("sfp", "SFP+ cage P4 (GTH)", _sfp(1)))},
    default_links=("sfp", "sfp"),
    ofl_args=("-c", "digilent", "--fpga-part", "xcku040-ffva1156"),
    ofl_note="openFPGALoader 0.10 has no kcu105 board entry: it goes through the on-board Digilent "
             "JTAG (-c digilent); it ships no SPI bridge for the xcku040, so --flash fails: load "
             "to SRAM, or flash with Vivado's hardware manager",
    cable="two SFP+ DACs (or SFP+ modules and fibre), one per ring neighbour",
)


class Target(ParaNicSoC):
    def __init__(self, sys_clk_freq: float = P.TARGET_CLK_HZ, links=None, **kwargs) -> None:
        platform = xilinx_kcu105.Platform()
        BOARD.resolve_links(links)
        self.crg = us_crg(platform, sys_clk_freq, mmcm_cls=USMMCM, clkin="clk125", clkin_freq=125e6,
                          reset="cpu_reset")
        ParaNicSoC.__init__(self, platform, sys_clk_freq, n_links=2, ident="ParaNIC on KCU105", **kwargs)
        # Gen3 x8: the hard block's 256-bit AXI stream at 250 MHz; ParaNicSoC takes 64 bits.
        self.pcie_phy = USPCIEPHY(platform, platform.request("pcie_x8"), speed="gen3",
                                  data_width=64, pcie_data_width=256, bar0_size=P.BAR0_BYTES)
        add_pcie(self, self.pcie_phy)
        add_links(self, BOARD, links, leds=led_pads(platform, 2))


def main(argv=None) -> int:
    return run(BOARD, Target, argv)


if __name__ == "__main__":
    raise SystemExit(main())
