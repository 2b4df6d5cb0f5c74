"""GTY66LinkPHY: one 64b/66b lane (QSFP28 lane at 25.78125 Gb/s, SFP+ at 10.3125 Gb/s) on an
UltraScale+ GTY, behind a :class:`~.gt66.Pcs66Adapter`.

LiteICLink's ``GTY`` is an 8b/10b transceiver (``data_width`` 20/40/80 of 10-bit symbols,
the comma aligner on); it has no 64b/66b mode. Its 80-bit (and 40-bit) settings are,
however, the GTY's *raw* interface: 8b/10b off in the transceiver (``TX8B10BEN`` =
``RX8B10BEN`` = 0), ``TX_DATA_WIDTH`` = ``RX_DATA_WIDTH`` = 80 with ``TX/RX_INT_DATAWIDTH``
= 2 (80-bit internal), ``TXUSRCLK`` = ``TXUSRCLK2`` = line / 80. This glue reuses it
(PLL, reset sequencing, BUFG_GTs, DRP, the GTYE4_CHANNEL parameter set) and changes only
what 64b/66b needs before LiteICLink builds the instance:

* the data ports: ``TXDATA``/``TXCTRL0``/``TXCTRL1`` carry the adapter's G = 80 (or 40)
  line bits and ``RXDATA``/``RXCTRL0``/``RXCTRL1`` bring them back, in LiteICLink's
  raw mapping (10-bit group i = ``{CTRL1[i], CTRL0[i], DATA[8i+7:8i]}``, group 0 and bit
  0 first on the line: UG578, "TX/RX interface", 80-bit width, 8B/10B bypassed);
* comma detection and alignment off (``ALIGN_COMMA_ENABLE`` = 0, ``ALIGN_M/PCOMMA_DET``,
  ``DEC_*COMMA_DETECT``, ``SHOW_REALIGN_COMMA`` = FALSE, ``RXCOMMADETEN`` =
  ``RXM/PCOMMAALIGNEN`` = 0): scrambled 64b/66b data contains comma patterns, and a
  comma aligner would slip the word under the block lock. Clock correction stays off
  (``CLK_CORRECT_USE`` = FALSE, as LiteICLink has it); the TX and RX buffers stay on.

The 64b/66b gearbox is the fabric's (:class:`~.pcs66.TxGearbox`, ``RxGearbox``: 132-bit
beats to 80-bit words at 322.27 MHz for dw = 128), not the GTY's own (``TXGEARBOX_EN``
stays FALSE): the fabric one is the tested one, and it needs no ``TXSEQUENCE`` pacing.

Not done here (docs/phy.md, "64b/66b lanes", open points): the GTY's analog and CDR
attributes for 25.78125 Gb/s (``RXCDR_CFG*``, ``RX_WIDEMODE_CDR``, ``RX_EN_HI_LR``,
DFE/LPM choice, TX driver) are LiteICLink's; they must be checked against what the
Vivado Transceivers Wizard writes for this rate before hardware.
"""

from __future__ import annotations

from migen import Cat, ClockDomainsRenamer, Instance, Signal
from migen.genlib.cdc import BusSynchronizer, MultiReg

from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRStatus

from paranic.spec import protocol as P

from .gt66 import COUNTERS, Pcs66Adapter
from .gt_glue import FAMILIES, _unshort_outputs, pll_config

#: QSFP28 lane / SFP+ line rates (64b/66b) and the LiteICLink data width each uses.
LINE_RATES = {25.78125e9: 80, 10.3125e9: 40}

#: GTYE4_CHANNEL settings for 64b/66b in raw mode (over LiteICLink's 8b/10b ones).
RAW_PARAMS = dict(
    p_ALIGN_COMMA_ENABLE=0b0000000000,
    p_ALIGN_MCOMMA_DET="FALSE",
    p_ALIGN_PCOMMA_DET="FALSE",
    p_DEC_MCOMMA_DETECT="FALSE",
    p_DEC_PCOMMA_DETECT="FALSE",
    p_DEC_VALID_COMMA_ONLY="FALSE",
    p_SHOW_REALIGN_COMMA="FALSE",
    p_CLK_CORRECT_USE="FALSE",
    p_TXGEARBOX_EN="FALSE",
    p_RXGEARBOX_EN="FALSE",
    i_RXCOMMADETEN=0,
    i_RXMCOMMAALIGNEN=0,
    i_RXPCOMMAALIGNEN=0,
    i_TX8B10BEN=0,
    i_RX8B10BEN=0,
)


def raw_tx_ports(word: Signal, nsym: int) -> dict:
    """``TXDATA``/``TXCTRL0``/``TXCTRL1`` for ``nsym`` 10-bit raw groups of ``word``."""
    return dict(
        i_TXDATA=Cat(*[word[10 * i:10 * i + 8] for i in range(nsym)]),
        i_TXCTRL0=Cat(*[word[10 * i + 8] for i in range(nsym)]),
        i_TXCTRL1=Cat(*[word[10 * i + 9] for i in range(nsym)]),
    )


def raw_rx_ports(word: Signal, nsym: int) -> dict:
    """``RXDATA``/``RXCTRL0``/``RXCTRL1`` into ``word`` (the same mapping as the TX)."""
    return dict(
        o_RXDATA=Cat(*[word[10 * i:10 * i + 8] for i in range(nsym)]),
        o_RXCTRL0=Cat(*[word[10 * i + 8] for i in range(nsym)]),
        o_RXCTRL1=Cat(*[word[10 * i + 9] for i in range(nsym)]),
    )


class GTY66LinkPHY(LiteXModule):
    """One GTY lane with 64b/66b as a link PHY of width ``dw``.

    Parameters
    ----------
    platform : LiteX platform (constraints go to it).
    refclk : the reference clock: a Signal (already buffered) or differential pads
        (``p``/``n``; an IBUFDS_GTE4 is added).
    refclk_freq : Hz (156.25e6: QPLL1 at 12.890625 GHz for 25.78125 Gb/s).
    tx_pads, rx_pads : the lane's differential pads.
    sys_clk_freq : the clock of LiteICLink's init state machines and of the adapter's
        sys side (the NIC clock: 195.3125 MHz for dw = 128 at 25.78125 Gb/s).
    dw : link width (128 for a QSFP28 lane, 64 for SFP+).
    linerate : 25.78125e9 or 10.3125e9 (b/s).
    name : prefix of the clock domains (``<name>_tx``, ``<name>_rx``).
    pll : a GTYQuadPLL of another lane of the quad to share (None: build one).
    sys_clk : the sys clock signal: with it, false paths sys <-> tx/rx.
    link_cd : the clock domain of the LinkLayer this PHY serves (its ``sink``/``source``/
        ``hold``/``up`` are in it): ``"sys"``, or e.g. ``"nic"`` when the router and link
        layers run on their own clock (195.3125 MHz for a QSFP28 lane). LiteICLink's
        init state machines and the CSRs stay in sys; the counters cross into sys.
    link_clk : that domain's clock signal (false paths to tx/rx/sys), if not sys.
    mtu, adapter_kwargs : passed to :class:`~.gt66.Pcs66Adapter`.

    ``sink``/``source``/``hold``/``up``: the adapter's (the PHY contract);
    ``adapter``, ``serdes``, ``pll``; :meth:`connect`, :meth:`add_csrs`.
    """

    def __init__(self, platform, refclk, refclk_freq: float, tx_pads, rx_pads,
                 sys_clk_freq: float, dw: int = 128, linerate: float = 25.78125e9,
                 name: str = "qsfp0", pll=None, sys_clk=None, link_cd: str = "sys",
                 link_clk=None, mtu: int = P.DEFAULT_MTU, **adapter_kwargs) -> None:
        from liteiclink.serdes import gty_ultrascale as gty

        if linerate not in LINE_RATES:
            raise ValueError(f"line rate {linerate / 1e9:g} Gb/s: one of "
                             f"{sorted(r / 1e9 for r in LINE_RATES)} Gb/s")
        data_width = LINE_RATES[linerate]
        g = data_width              # raw bits per transceiver clock
        if g > 66 * P.beat_words(dw):
            raise ValueError(f"{g} raw bits per clock need dw >= {64 * -(-g // 66)}")
        fam = FAMILIES["gty"]
        self.linerate = linerate
        self.user_clk_freq = user_clk = linerate / data_width
        if user_clk > fam.max_user_clk:
            raise ValueError(f"fabric clock {user_clk / 1e6:g} MHz too fast")
        pll_cls, _ = pll_config("gty", refclk_freq, linerate)

        if hasattr(refclk, "p"):
            buffered = Signal()
            self.specials += Instance(fam.ibufds, i_CEB=0, i_I=refclk.p, i_IB=refclk.n,
                                      o_O=buffered, p_REFCLK_HROW_CK_SEL=0b00, o_ODIV2=Signal())
            refclk = buffered
        pll_master = pll is None
        if pll is None:
            pll = getattr(gty, pll_cls)(refclk, refclk_freq, linerate)
            self.submodules.pll = pll
        else:
            self.pll = pll
        serdes = gty.GTY(pll, tx_pads, rx_pads, sys_clk_freq, data_width=data_width,
                         tx_buffer_enable=True, rx_buffer_enable=True, clock_aligner=False,
                         pll_master=pll_master)
        nsym = data_width // 10
        self.tx_word = Signal(g)
        self.rx_word = Signal(g)
        serdes.gty_params.update(RAW_PARAMS)
        serdes.gty_params.update(raw_tx_ports(self.tx_word, nsym))
        serdes.gty_params.update(raw_rx_ports(self.rx_word, nsym))
        _unshort_outputs(serdes)
        cd_tx, cd_rx = f"{name}_tx", f"{name}_rx"
        self.serdes = serdes = ClockDomainsRenamer({"tx": cd_tx, "rx": cd_rx})(serdes)

        ad = Pcs66Adapter(dw, gt_width=g, mtu=mtu, cd_tx=cd_tx, cd_rx=cd_rx, **adapter_kwargs)
        self.link_cd = link_cd
        self.adapter = ad = ClockDomainsRenamer({"sys": link_cd})(ad)
        tx_ready, rx_ready = Signal(), Signal()
        if link_cd == "sys":
            self.comb += [tx_ready.eq(serdes.tx_ready), rx_ready.eq(serdes.rx_ready)]
        else:
            self.specials += [MultiReg(serdes.tx_ready, tx_ready, odomain=link_cd),
                              MultiReg(serdes.rx_ready, rx_ready, odomain=link_cd)]
        self.comb += [
            self.tx_word.eq(ad.tx_data),
            ad.rx_data.eq(self.rx_word),
            ad.tx_ready.eq(tx_ready),
            ad.rx_ready.eq(rx_ready),
        ]
        self.sink, self.source, self.hold, self.up = ad.sink, ad.source, ad.hold, ad.up

        period_ns = 1e9 / user_clk
        platform.add_period_constraint(serdes.cd_tx.clk, period_ns)
        platform.add_period_constraint(serdes.cd_rx.clk, period_ns)
        clks = [serdes.cd_tx.clk, serdes.cd_rx.clk] + [c for c in (sys_clk, link_clk)
                                                        if c is not None]
        platform.add_false_path_constraints(*clks)

    def connect(self, link_layer) -> list:
        """Statements joining this PHY to a LinkLayer of the same ``dw``."""
        from . import connect_phy
        return connect_phy(link_layer, self)

    def add_csrs(self) -> None:
        """The adapter's counters (crossed into sys if ``link_cd`` is not sys) and
        LiteICLink's base controls."""
        if self.link_cd == "sys":
            self.adapter.add_csrs()
        else:
            for name, width, desc in COUNTERS:
                csr = CSRStatus(width, name=name, description=desc)
                setattr(self, "_" + name, csr)
                if width == 1:
                    self.specials += MultiReg(getattr(self.adapter, name), csr.status)
                else:
                    bs = BusSynchronizer(width, self.link_cd, "sys")
                    self.submodules += bs
                    self.comb += [bs.i.eq(getattr(self.adapter, name)), csr.status.eq(bs.o)]
        self.serdes.add_base_control()


__all__ = ["GTY66LinkPHY", "LINE_RATES", "RAW_PARAMS", "raw_rx_ports", "raw_tx_ports"]
