"""ParaNIC on the Sitlinv STLV7325 v2 (xc7k325t, a low-cost Kintex-7 PCIe card): PCIe Gen2
x4, two links on the SFP cages A and B (GTX quad 116, clocked by the SI5338's CLK2 on
MGTREFCLK0; 125 MHz assumed, the seller's default).

    python -m paranic.boards.sitlinv_stlv7325 --build [--load | --flash]

Chosen as the low-cost board: litex-boards 2023.12 has its platform with both SFP cages
and PCIe x4, and Debian's openFPGALoader 0.10 knows it (stlv7325, on-board FT4232) and
ships its SPI bridge (xc7k325t-ffg676), so --load and --flash both work. (The Acorn
CLE-215+ has no SFP in litex-boards 2023.12; the Numato Tagus is not an openFPGALoader
0.10 board.)
"""

from __future__ import annotations

from litex_boards.platforms import sitlinv_stlv7325_v2

from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

from .common import Board, LinkPort, PARTS, add_links, s7_crg, gt_link, gt_pads, led_pads, run, add_pcie, s7_pcie_phy


def _sfp(cage):
    def build(soc, i):
        tx, rx = gt_pads(soc.platform, f"sfp_{cage}")
        if not hasattr(soc, "_quad116_refclk"):     # both cages share the quad's refclk
            soc._quad116_refclk = soc.platform.request("si5338_clkin")
        return gt_link(soc, i, tx=tx, rx=rx, refclk=soc._quad116_refclk, refclk_freq=125e6)
    return build


BOARD = Board(
    name="stlv7325", title="Sitlinv STLV7325 v2", platform=sitlinv_stlv7325_v2.Platform,
    part=PARTS["xc7k325t"], pcie="x4 Gen2",
    ports={"sfp": (LinkPort("sfp", "SFP cage A (GTX)", _sfp("a")),
                   LinkPort("sfp", "SFP cage B (GTX)", _sfp("b")))},
    default_links=("sfp", "sfp"),
    ofl_args=("-b", "stlv7325"),
    ofl_note="openFPGALoader 0.10 knows the board (stlv7325, FT4232) and ships its SPI bridge "
             "(spiOverJtag_xc7k325tffg676) for --flash",
    cable="two SFP DACs (or SFP modules and fibre), one per ring neighbour",
)


class Target(ParaNicSoC):
    def __init__(self, sys_clk_freq: float = P.TARGET_CLK_HZ, links=None, **kwargs) -> None:
        platform = sitlinv_stlv7325_v2.Platform()
        BOARD.resolve_links(links)
        self.crg = s7_crg(platform, sys_clk_freq, reset="cpu_reset_n", reset_active_low=True)
        ParaNicSoC.__init__(self, platform, sys_clk_freq, n_links=2, ident="ParaNIC on STLV7325", **kwargs)
        add_pcie(self, s7_pcie_phy(platform, "pcie_x4"))
        # The LEDs are active low (user_led_n).
        add_links(self, BOARD, links, leds=led_pads(platform, 2, "user_led_n"), leds_active_low=True)


def main(argv=None) -> int:
    return run(BOARD, Target, argv)


if __name__ == "__main__":
    raise SystemExit(main())
