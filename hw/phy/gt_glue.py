"""GTLinkPHY: one SFP/SFP+/QSFP lane on a Xilinx transceiver (LiteICLink) behind a GTAdapter.

Board files call::

    phy = GTLinkPHY(platform, "gtx", refclk=platform.request("sfp_refclk"), refclk_freq=156.25e6,
                    tx_pads=platform.request("sfp_tx", 0), rx_pads=platform.request("sfp_rx", 0),
                    sys_clk_freq=sys_clk_freq, name="sfp0")
    soc.add_link_phy(0, phy)            # phy follows the adapter contract itself

The glue instantiates the family's PLL and transceiver from LiteICLink (8b/10b in the
fabric, TX and RX buffers on, the GT's own comma aligner on byte lane 0), renames its
``tx``/``rx`` clock domains to ``<name>_tx``/``<name>_rx``, adds their period and
false-path constraints, and joins it to a :class:`~.gt.GTAdapter`. ``sink``,
``source``, ``hold`` and ``up`` are the adapter's (the PHY adapter contract), so a
GTLinkPHY can be handed to ``connect_phy`` / ``ParaNicSoC.add_link_phy`` directly.

Line rates per family and the resulting word rates: ``docs/phy.md``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from migen import Cat, ClockDomainsRenamer, Constant, Instance, Signal

from litex.gen import LiteXModule

from paranic.spec import protocol as P

from .gt import GTAdapter
from .gt_framing import LANE_BYTES


@dataclass(frozen=True)
class GTFamily:
    """A transceiver family as LiteICLink models it, and our choices for it."""

    devices: str               # FPGA families that carry it
    module: str                # liteiclink.serdes module
    serdes: str                # transceiver class in it
    plls: tuple[str, ...]      # PLL classes, tried in order (channel PLL first)
    ibufds: str                # refclk input buffer primitive
    max_linerate: float        # data sheet maximum (fastest speed grade), b/s
    linerate: float            # our default line rate, b/s (reachable from 125 / 156.25 MHz)
    max_user_clk: float        # highest tx/rx fabric clock we accept, Hz


#: Supported families. Line rates: docs/phy.md ("Line rates per family").
FAMILIES: dict[str, GTFamily] = {
    "gtp": GTFamily("Artix-7", "gtp_7series", "GTP", ("GTPQuadPLL",), "IBUFDS_GTE2",
                    6.6e9, 6.25e9, 200e6),
    "gtx": GTFamily("Kintex-7", "gtx_7series", "GTX", ("GTXChannelPLL", "GTXQuadPLL"),
                    "IBUFDS_GTE2", 10.3125e9, 10.0e9, 260e6),
    "gth": GTFamily("UltraScale", "gth3_ultrascale", "GTH3", ("GTHChannelPLL", "GTH3QuadPLL"),
                    "IBUFDS_GTE3", 16.3e9, 10.0e9, 330e6),
    "gth_usp": GTFamily("UltraScale+", "gth4_ultrascale", "GTH4",
                        ("GTHChannelPLL", "GTH4QuadPLL"), "IBUFDS_GTE4", 16.3e9, 10.0e9, 330e6),
    "gty": GTFamily("UltraScale+", "gty_ultrascale", "GTY", ("GTYChannelPLL", "GTYQuadPLL"),
                    "IBUFDS_GTE4", 25.78125e9, 10.0e9, 330e6),
}


def get_family(name: str) -> GTFamily:
    """The :class:`GTFamily` called ``name`` (clear error for an unknown one)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown transceiver family {name!r}; one of {sorted(FAMILIES)}") from None


def pll_config(fam: str, refclk_freq: float, linerate: float) -> tuple[str, dict]:
    """(PLL class name, LiteICLink config) for ``linerate`` from ``refclk_freq``."""
    f = get_family(fam)
    mod = importlib.import_module(f"liteiclink.serdes.{f.module}")
    for cls in f.plls:
        try:
            return cls, getattr(mod, cls).compute_config(refclk_freq, linerate)
        except ValueError:
            continue
    raise ValueError(f"{fam}: no PLL setting gives {linerate / 1e9:g} Gb/s from a "
                     f"{refclk_freq / 1e6:g} MHz reference clock")


def word_rate(linerate: float) -> float:
    """Line words per second of a lane full of data words (8 bytes, 10 bits each)."""
    return linerate / 10 / 8


def _unshort_outputs(serdes) -> None:
    """Give transceiver outputs that LiteICLink ties to a constant a signal of their own.

    LiteICLink's GTY connects ``o_TXPHINITDONE = 0``: an output driving a constant, which
    Verilator (and Vivado's DRC) reject as a short. The output is unused; an unconnected
    signal is what was meant.
    """
    # LiteICLink builds the channel Instance at finalization from this dict.
    for attr in ("gtp_params", "gtx_params", "gth_params", "gty_params"):
        params = getattr(serdes, attr, None) or {}
        for key, value in params.items():
            if key.startswith("o_") and isinstance(value, (int, Constant)):
                params[key] = Signal(name=f"{attr[:3]}_{key[2:].lower()}")


class GTLinkPHY(LiteXModule):
    """One transceiver lane as a link PHY.

    Parameters
    ----------
    platform : LiteX platform (constraints go to it).
    family : ``"gtp"`` (Artix-7), ``"gtx"`` (Kintex-7), ``"gth"`` (UltraScale),
        ``"gth_usp"`` (UltraScale+ GTH), ``"gty"`` (UltraScale+ GTY).
    refclk : the transceiver reference clock: a Signal (already buffered) or
        differential pads (``p``/``n``; the family's IBUFDS_GTEx is added).
    refclk_freq : its frequency in Hz (125e6 and 156.25e6 reach the default rates).
    tx_pads, rx_pads : the lane's differential pads (``p``/``n``).
    sys_clk_freq : sys clock in Hz (LiteICLink's init state machines run in sys).
    linerate : b/s (default: the family's, see :data:`FAMILIES`).
    nbytes : transceiver bytes per clock (4 = data_width 40; 2 for slow lines).
    name : prefix of the clock domains (``<name>_tx``, ``<name>_rx``).
    pll : a PLL from another GTLinkPHY of the same quad to share (its QPLL);
        ``None`` builds one (this lane then owns its reset).
    sys_clk : the sys clock signal (e.g. ``crg.cd_sys.clk``): with it the crossings
        sys <-> tx/rx are declared false paths (they go through MultiRegs and the
        gray-coded FIFOs only).
    mtu, adapter_kwargs : passed to :class:`GTAdapter`.

    Attributes: ``adapter``, ``serdes``, ``pll``, and the contract's ``sink``,
    ``source``, ``hold``, ``up``; :meth:`connect` gives the statements to a LinkLayer.
    """

    def __init__(self, platform, family: str, refclk, refclk_freq: float, tx_pads, rx_pads,
                 sys_clk_freq: float, linerate: float | None = None, nbytes: int = 4,
                 name: str = "gt0", pll=None, sys_clk=None, mtu: int = P.DEFAULT_MTU,
                 **adapter_kwargs) -> None:
        fam = get_family(family)
        linerate = fam.linerate if linerate is None else linerate
        if nbytes not in LANE_BYTES:
            raise ValueError(f"nbytes must be one of {LANE_BYTES}, not {nbytes}")
        if not 0 < linerate <= fam.max_linerate:
            raise ValueError(f"{family}: line rate {linerate / 1e9:g} Gb/s above the "
                             f"{fam.max_linerate / 1e9:g} Gb/s of {fam.devices}")
        user_clk = linerate / (10 * nbytes)
        if user_clk > fam.max_user_clk:
            raise ValueError(f"{family}: {linerate / 1e9:g} Gb/s with {nbytes} bytes per clock "
                             f"needs a {user_clk / 1e6:g} MHz fabric clock (max "
                             f"{fam.max_user_clk / 1e6:g} MHz)")
        self.family = family
        self.linerate = linerate
        self.user_clk_freq = user_clk
        pll_cls, _ = pll_config(family, refclk_freq, linerate)   # clear error if unreachable
        mod = importlib.import_module(f"liteiclink.serdes.{fam.module}")

        # Reference clock.
        if hasattr(refclk, "p"):
            buffered = Signal()
            params = dict(i_CEB=0, i_I=refclk.p, i_IB=refclk.n, o_O=buffered)
            if fam.ibufds != "IBUFDS_GTE2":
                params.update(p_REFCLK_HROW_CK_SEL=0b00, o_ODIV2=Signal())
            self.specials += Instance(fam.ibufds, **params)
            refclk = buffered

        # PLL and transceiver.
        pll_master = pll is None
        if pll is None:
            pll = getattr(mod, pll_cls)(refclk, refclk_freq, linerate)
            self.submodules.pll = pll     # a quad PLL lives here; lanes sharing it don't add it
        else:
            self.pll = pll
        kwargs = dict(data_width=10 * nbytes, tx_buffer_enable=True, rx_buffer_enable=True,
                      clock_aligner=False)
        if fam.serdes == "GTP":
            kwargs["qpll_reset"] = pll_master
        else:
            kwargs["pll_master"] = pll_master
        serdes = getattr(mod, fam.serdes)(pll, tx_pads, rx_pads, sys_clk_freq, **kwargs)
        serdes.add_stream_endpoints()
        _unshort_outputs(serdes)
        cd_tx, cd_rx = f"{name}_tx", f"{name}_rx"
        self.serdes = serdes = ClockDomainsRenamer({"tx": cd_tx, "rx": cd_rx})(serdes)

        # Adapter.
        self.adapter = ad = GTAdapter(nbytes, mtu=mtu, cd_tx=cd_tx, cd_rx=cd_rx, **adapter_kwargs)
        # LiteICLink's fabric decoders register d/k but flag ``invalid`` combinatorially:
        # delay the flags one rx clock to line them up with their bytes.
        err = Signal(nbytes)
        getattr(self.sync, cd_rx).__iadd__(err.eq(Cat(*[d.invalid for d in serdes.decoders])))
        self.comb += [
            serdes.sink.data.eq(ad.tx_data),
            serdes.sink.ctrl.eq(ad.tx_k),
            serdes.sink.valid.eq(1),
            ad.rx_data.eq(serdes.source.data),
            ad.rx_k.eq(serdes.source.ctrl),
            ad.rx_err.eq(err),
            ad.tx_ready.eq(serdes.tx_ready),
            ad.rx_ready.eq(serdes.rx_ready),
        ]
        self.sink, self.source, self.hold, self.up = ad.sink, ad.source, ad.hold, ad.up

        # Timing constraints: the two transceiver clocks and their crossings into sys.
        period_ns = 1e9 / user_clk
        platform.add_period_constraint(serdes.cd_tx.clk, period_ns)
        platform.add_period_constraint(serdes.cd_rx.clk, period_ns)
        clks = [serdes.cd_tx.clk, serdes.cd_rx.clk] + ([sys_clk] if sys_clk is not None else [])
        platform.add_false_path_constraints(*clks)

    def connect(self, link_layer) -> list:
        """Statements joining this PHY to a LinkLayer (``paranic.hw.phy.connect_phy``)."""
        from . import connect_phy
        return connect_phy(link_layer, self)

    def add_csrs(self) -> None:
        """The adapter's counters and LiteICLink's base controls (tx/rx enable and ready)."""
        self.adapter.add_csrs()
        self.serdes.add_base_control()


__all__ = ["FAMILIES", "GTFamily", "GTLinkPHY", "get_family", "pll_config", "word_rate"]
