"""ParaNIC on the Xilinx Alveo U250 (xcu250): PCIe Gen3 x4 (of the x16 edge), two links on lane 0 of the two
QSFP28 cages (GTY; the cages' 156.25 MHz reference clocks, FS[1:0] = 01).

    python -m paranic.boards.xilinx_alveo_u250 --build

The SQRL XCU1525 is the same card, but litex-boards 2023.12 has no QSFP28 pins for it:
the U250 platform has them. openFPGALoader 0.10 does not know the xcu250 (no IDCODE):
program it with Vivado's hardware manager.
"""

from __future__ import annotations

from migen import If, Signal

from litex.gen import LiteXModule
from litex.soc.cores.clock import USPMMCM
from litex_boards.platforms import xilinx_alveo_u250
from paranic.hw.pcie_phy import USPPCIEPHY  # LitePCIe's, with a working receive path

from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

from .common import Board, LinkPort, PARTS, add_links, gt_link, gt_pads, led_pads, run, add_pcie, us_crg


class QSFPClockSelect(LiteXModule):
    """Selects 156.25 MHz on a QSFP28 cage's reference clock generator (FS[1:0] = 01) and
    pulses its RESET after configuration: the generator latches FS only on reset (with the
    FPGA unconfigured the pins float and it runs at 161.13 MHz)."""

    def __init__(self, pads, sys_clk_freq: float) -> None:
        count = Signal(max=int(sys_clk_freq * 1e-3) + 1, reset=int(sys_clk_freq * 1e-3))  # 1 ms
        self.sync += If(count != 0, count.eq(count - 1))
        self.comb += [pads.fs0.eq(1), pads.fs1.eq(0), pads.refclk_reset.eq(count != 0),
                      pads.lpmode.eq(0), pads.resetl.eq(1), pads.modskll.eq(0)]


def _qsfp(n):
    def build(soc, i):
        tx, rx = gt_pads(soc.platform, "qsfp28", n, lane=0)
        pads = soc.platform.lookup_request("qsfp28", n)
        setattr(soc, f"qsfp{n}_clksel", QSFPClockSelect(pads, soc.sys_clk_freq))
        refclk = type("Refclk", (), {"p": pads.clk_p, "n": pads.clk_n})()
        return gt_link(soc, i, tx=tx, rx=rx, refclk=refclk, refclk_freq=156.25e6)
    return build


BOARD = Board(
    name="u250", title="Xilinx Alveo U250", platform=xilinx_alveo_u250.Platform, part=PARTS["xcu250"],
    pcie="x4 Gen3",
    ports={"qsfp": (LinkPort("qsfp", "QSFP28 cage 0, lane 0 (GTY)", _qsfp(0)),
                    LinkPort("qsfp", "QSFP28 cage 1, lane 0 (GTY)", _qsfp(1)))},
    default_links=("qsfp", "qsfp"),
    ofl_args=None,
    ofl_note="openFPGALoader 0.10 does not know the xcu250 (no IDCODE entry): use Vivado's hardware "
             "manager (open_hw_target; program_hw_devices) over the card's USB-JTAG",
    cable="QSFP28 DACs (or QSFP28-to-4xSFP28 breakouts; only lane 0 is used)",
)


class Target(ParaNicSoC):
    def __init__(self, sys_clk_freq: float = P.TARGET_CLK_HZ, links=None, **kwargs) -> None:
        platform = xilinx_alveo_u250.Platform()
        BOARD.resolve_links(links)
        self.crg = us_crg(platform, sys_clk_freq, mmcm_cls=USPMMCM, clkin="clk300", clkin_freq=300e6)
        ParaNicSoC.__init__(self, platform, sys_clk_freq, n_links=2, ident="ParaNIC on Alveo U250", **kwargs)
        # Gen3 x4 (128-bit AXI stream at 250 MHz; ParaNicSoC takes 64 bits), as litex-boards'
        # U250 target: x16 needs LitePCIe's 512-bit adapters, and in LitePCIe 2024.12
        # pcie_usp_support.v connects an m_axis_rc_tkeep_a port m_axis_rc_adapt_512b.v lacks
        # (the Verilator lint of `paranic boards lint u250` finds it). 32 Gb/s is ample for
        # two links.
        self.pcie_phy = USPPCIEPHY(platform, platform.request("pcie_x4"), speed="gen3",
                                   data_width=64, pcie_data_width=128, bar0_size=P.BAR0_BYTES)
        add_pcie(self, self.pcie_phy)
        add_links(self, BOARD, links, leds=led_pads(platform, 2))


def main(argv=None) -> int:
    return run(BOARD, Target, argv)


if __name__ == "__main__":
    raise SystemExit(main())
