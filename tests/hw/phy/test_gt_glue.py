"""GTLinkPHY elaborates to Verilog for every family (LiteX's Xilinx flow, no Vivado)."""

from __future__ import annotations

import pytest
from migen import ClockDomain

from litex.build.generic_platform import Pins, Subsignal
from litex.build.xilinx import XilinxPlatform
from litex.gen import LiteXModule

from paranic.hw.link import LinkLayer
from paranic.hw.phy.gt_glue import FAMILIES, GTLinkPHY, pll_config, word_rate

DEVICES = {
    "gtp": "xc7a100tfgg484-2",
    "gtx": "xc7k325tffg900-2",
    "gth": "xcku040-ffva1156-2-e",
    "gth_usp": "xczu9eg-ffvb1156-2-e",
    "gty": "xcvu9p-flga2104-2-e",
}
PRIMITIVES = {"gtp": "GTPE2_CHANNEL", "gtx": "GTXE2_CHANNEL", "gth": "GTHE3_CHANNEL",
              "gth_usp": "GTHE4_CHANNEL", "gty": "GTYE4_CHANNEL"}

IO = [
    ("clk", 0, Pins("X1")),
    ("refclk", 0, Subsignal("p", Pins("X2")), Subsignal("n", Pins("X3"))),
    ("sfp_tx", 0, Subsignal("p", Pins("X4")), Subsignal("n", Pins("X5"))),
    ("sfp_rx", 0, Subsignal("p", Pins("X6")), Subsignal("n", Pins("X7"))),
]


def _top(fam: str, **kw):
    platform = XilinxPlatform(DEVICES[fam], IO, toolchain="vivado")

    class Top(LiteXModule):
        def __init__(self):
            self.cd_sys = ClockDomain()
            self.comb += self.cd_sys.clk.eq(platform.request("clk"))
            self.link = link = LinkLayer()
            self.phy = phy = GTLinkPHY(platform, fam, platform.request("refclk"), 156.25e6,
                                       platform.request("sfp_tx"), platform.request("sfp_rx"),
                                       125e6, name="sfp0", sys_clk=self.cd_sys.clk, **kw)
            self.comb += phy.connect(link)
            phy.add_csrs()

    return platform, Top()


@pytest.mark.parametrize("fam", sorted(FAMILIES))
def test_elaborates(fam):
    platform, top = _top(fam)
    v = str(platform.get_verilog(top, name="top"))
    assert PRIMITIVES[fam] in v
    assert ("IBUFDS_GTE2" if fam in ("gtp", "gtx") else "IBUFDS_GTE") in v
    # The adapter's tx characters reach the transceiver: the link is wired through.
    assert "sfp0_tx_clk" in v and "sfp0_rx_clk" in v
    assert top.phy.user_clk_freq == FAMILIES[fam].linerate / 40


def test_default_line_rates_are_reachable():
    for name, f in FAMILIES.items():
        for ref in (125e6, 156.25e6):
            pll_config(name, ref, f.linerate)
        assert f.linerate <= f.max_linerate
    assert word_rate(10e9) == 125e6


def test_bad_input():
    with pytest.raises(ValueError, match="unknown transceiver family"):
        GTLinkPHY(None, "gtz", None, 0, None, None, 0)
    with pytest.raises(ValueError, match="above"):
        _top("gtp", linerate=10e9)
    with pytest.raises(ValueError, match="no PLL setting"):
        _top("gtx", linerate=9.9e9)
    with pytest.raises(ValueError, match="fabric clock"):
        _top("gtx", linerate=10e9, nbytes=2)
