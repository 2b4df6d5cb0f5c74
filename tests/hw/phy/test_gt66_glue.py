"""GTY66LinkPHY elaborates to Verilog (LiteX's Xilinx flow, no Vivado) with the GTY in raw
mode for 64b/66b, and refuses bad input."""

from __future__ import annotations

import re

import pytest
from migen import ClockDomain, ClockDomainsRenamer

from litex.build.generic_platform import Pins, Subsignal
from litex.build.xilinx import XilinxPlatform
from litex.gen import LiteXModule

from paranic.hw.link import LinkLayer
from paranic.hw.phy.gt66_glue import GTY66LinkPHY

DEVICE = "xcu250-figd2104-2L-e"
IO = [
    ("clk", 0, Pins("X1")),
    ("refclk", 0, Subsignal("p", Pins("X2")), Subsignal("n", Pins("X3"))),
    ("qsfp_tx", 0, Subsignal("p", Pins("X4")), Subsignal("n", Pins("X5"))),
    ("qsfp_rx", 0, Subsignal("p", Pins("X6")), Subsignal("n", Pins("X7"))),
]


def _top(dw=128, linerate=25.78125e9, nic=False):
    platform = XilinxPlatform(DEVICE, IO, toolchain="vivado")

    class Top(LiteXModule):
        def __init__(self):
            self.cd_sys = ClockDomain()
            self.comb += self.cd_sys.clk.eq(platform.request("clk"))
            kw = {}
            if nic:       # the link layers on their own clock (a NIC clock domain)
                self.cd_nic = ClockDomain()
                kw = dict(link_cd="nic", link_clk=self.cd_nic.clk)
            link = LinkLayer(dw=dw)
            self.link = ClockDomainsRenamer("nic")(link) if nic else link
            self.phy = phy = GTY66LinkPHY(platform, platform.request("refclk"), 156.25e6,
                                          platform.request("qsfp_tx"), platform.request("qsfp_rx"),
                                          125e6, dw=dw, linerate=linerate, name="qsfp0",
                                          sys_clk=self.cd_sys.clk, **kw)
            self.comb += phy.connect(link)
            phy.add_csrs()

    return platform, Top()


def _param(v: str, name: str) -> str:
    m = re.search(rf"\.{name}\s*\(([^)]*)\)", v)
    assert m, name
    return m.group(1).strip()


@pytest.mark.parametrize("dw,linerate,width", [(128, 25.78125e9, 80), (64, 10.3125e9, 40)])
def test_elaborates_raw_mode(dw, linerate, width):
    platform, top = _top(dw, linerate)
    v = str(platform.get_verilog(top, name="top"))
    assert "GTYE4_CHANNEL" in v and "IBUFDS_GTE4" in v
    assert _param(v, "TX_DATA_WIDTH").endswith(str(width))
    assert _param(v, "RX_DATA_WIDTH").endswith(str(width))
    assert re.fullmatch(r"(10'd0|1'd0|0)", _param(v, "ALIGN_COMMA_ENABLE"))
    for p in ("ALIGN_MCOMMA_DET", "ALIGN_PCOMMA_DET", "DEC_PCOMMA_DETECT", "TXGEARBOX_EN"):
        assert _param(v, p) == '"FALSE"', p
    assert re.fullmatch(r"1'd0|0", _param(v, "RXPCOMMAALIGNEN"))
    assert "qsfp0_tx_clk" in v and "qsfp0_rx_clk" in v
    assert top.phy.user_clk_freq == linerate / width
    assert top.phy.adapter.gt_width == width and top.phy.adapter.dw == dw
    # The adapter's line bits reach TXDATA (not LiteICLink's 8b/10b encoder).
    assert "pcs" in _param(v, "TXDATA").lower() or "tx_word" in _param(v, "TXDATA")


def test_link_in_a_nic_clock_domain():
    """link_cd="nic": the adapter's link side in the NIC domain, CSRs in sys."""
    platform, top = _top(128, nic=True)
    v = str(platform.get_verilog(top, name="top"))
    assert "GTYE4_CHANNEL" in v and "nic_clk" in v
    assert hasattr(top.phy, "_rx_slips") and top.phy.link_cd == "nic"


def test_bad_input():
    with pytest.raises(ValueError, match="line rate"):
        _top(128, 10e9)
    with pytest.raises(ValueError, match="dw >="):
        _top(64, 25.78125e9)
