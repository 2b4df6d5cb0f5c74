"""LitePCIe's Xilinx PCIe PHYs with receive and transmit paths that work when the hard
IP's interface is wider than the core's (``pcie_data_width > data_width``).

Finding (LitePCIe 2024.12, ``litepcie.phy.common.PHYRXDatapath``): the receive path
(hard IP -> core: requests on 7-series' ``rx``, UltraScale's ``cq``, completions on ``rc``)
puts its ``PipeReady`` *before* the width converter but builds it with the core's layout.
The hard IP's 128/256-bit beat is cut to 64 bits there, so the converter hands the core
the first 64 bits of every beat and zeros after them: a TLP longer than 8 bytes loses its
address and data (the cocotb bench in ``tests/cocotb/soc`` saw the address of every BAR0
access arrive as 0 -- the access went to the wrong register and a read was never
completed). Every ParaNIC board runs its PHY with a 64-bit core path and a 128/256-bit
hard-IP interface, so every board needs the fix.

Finding 2 (``PHYTXDatapath``, core -> hard IP): LiteX's up-converter fills a wide beat
part by part and, when a TLP ends in the middle of one, sends it with the parts not
written this time still holding the previous TLP's data *and byte enables*. The hard IP
then sees more dwords (``tkeep``) than the TLP's length says: cocotbext-pcie's model
refuses such a request ("length field does not match data"; the bench saw it on the
first DMA write of 6 dwords) and PG156 asks ``tkeep`` to mark exactly the TLP's dwords.

:class:`RXDatapath` is the receive path with the pipeline register at the hard IP's width
(hard IP beat -> ``PipeReady`` -> width converter -> clock crossing -> ``PipeValid``).
:class:`TXDatapath` is the transmit path with a :class:`BeatPadder` before the
up-converter: a TLP that would end inside a wide beat is padded with empty parts
(``be`` = 0), so every wide beat is written whole.
:class:`S7PCIEPHY`, :class:`USPCIEPHY`, :class:`USPPCIEPHY` are LitePCIe's PHYs built with
both (same arguments); everything else stays LitePCIe's. ParaNicSoC refuses a PHY that
still has LitePCIe's paths at differing widths.
"""

from __future__ import annotations

import contextlib
import importlib

from migen import ClockDomainsRenamer, If, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litepcie.common import phy_layout
from litepcie.phy import common as _lp_common
from litepcie.phy.common import PHYRX128BAligner
from litepcie.phy.s7pciephy import S7PCIEPHY as _S7PCIEPHY
from litepcie.phy.uspciephy import USPCIEPHY as _USPCIEPHY
from litepcie.phy.usppciephy import USPPCIEPHY as _USPPCIEPHY

#: LitePCIe's receive/transmit paths (what :func:`broken_datapaths` looks for).
LITEPCIE_RX_DATAPATH = _lp_common.PHYRXDatapath
LITEPCIE_TX_DATAPATH = _lp_common.PHYTXDatapath
#: Attribute names of the datapaths on LitePCIe's PHYs.
DATAPATH_NAMES = ("rx_datapath", "cq_datapath", "rc_datapath",
                  "tx_datapath", "cc_datapath", "rq_datapath")


class RXDatapath(LiteXModule):
    """Hard IP (``pcie`` domain, ``pcie_data_width``) -> core (``clock_domain``,
    ``core_data_width``). Same constructor as LitePCIe's ``PHYRXDatapath``."""

    def __init__(self, core_data_width: int, pcie_data_width: int, clock_domain: str,
                 with_aligner: bool = False) -> None:
        self.sink = sink = stream.Endpoint(phy_layout(pcie_data_width))
        self.source = stream.Endpoint(phy_layout(core_data_width))

        # # #

        if pcie_data_width == 128 and with_aligner:
            # 7-series 128-bit: TLPs may start in the beat's upper half.
            self.aligner = ClockDomainsRenamer("pcie")(PHYRX128BAligner())
            self.comb += sink.connect(self.aligner.sink)
            sink = self.aligner.source

        if clock_domain == "pcie" and core_data_width == pcie_data_width:
            self.comb += sink.connect(self.source)
            return
        # The pipeline register holds the hard IP's full beat (LitePCIe's held core_data_width).
        self.pipe_ready = ClockDomainsRenamer("pcie")(stream.PipeReady(phy_layout(pcie_data_width)))
        self.converter = ClockDomainsRenamer("pcie")(
            stream.StrideConverter(phy_layout(pcie_data_width), phy_layout(core_data_width)))
        self.cdc = stream.ClockDomainCrossing(phy_layout(core_data_width), cd_from="pcie",
                                              cd_to=clock_domain, with_common_rst=True, depth=16)
        self.pipe_valid = ClockDomainsRenamer(clock_domain)(stream.PipeValid(phy_layout(core_data_width)))
        self.comb += [
            sink.connect(self.pipe_ready.sink),
            self.pipe_ready.source.connect(self.converter.sink),
            self.converter.source.connect(self.cdc.sink),
            self.cdc.source.connect(self.pipe_valid.sink),
            self.pipe_valid.source.connect(self.source),
        ]


class BeatPadder(LiteXModule):
    """Pads each packet of ``phy_layout(data_width)`` to a multiple of ``ratio`` beats
    with empty beats (``dat``/``be`` 0), ``last`` moved to the final one."""

    def __init__(self, data_width: int, ratio: int) -> None:
        self.sink = sink = stream.Endpoint(phy_layout(data_width))
        self.source = source = stream.Endpoint(phy_layout(data_width))

        # # #

        if ratio == 1:
            # Every beat is a whole hard-IP beat: nothing to pad. (A 1-bit counter here
            # would wrap 0 -> 1 and pad every other TLP with an empty beat: found on the
            # 7-series PHY at a 64-bit hard-IP interface, tests/cocotb/soc.)
            self.comb += sink.connect(source)
            return
        count = Signal(max=max(ratio, 2))   # beat index inside the wide beat
        pad = Signal()                      # sending the padding beats
        full = count == ratio - 1
        self.comb += [
            If(~pad,
                sink.connect(source),
                source.last.eq(sink.last & full),
            ).Else(
                source.valid.eq(1),
                source.last.eq(full),
            ),
        ]
        self.sync += [
            If(source.valid & source.ready,
                count.eq(count + 1),
                If(~pad & sink.last & ~full, pad.eq(1)),
                If(source.last, count.eq(0), pad.eq(0)),
            ),
        ]


class TXDatapath(LiteXModule):
    """Core (``clock_domain``, ``core_data_width``) -> hard IP (``pcie`` domain,
    ``pcie_data_width``). Same constructor as LitePCIe's ``PHYTXDatapath``."""

    def __init__(self, core_data_width: int, pcie_data_width: int, clock_domain: str) -> None:
        self.sink = stream.Endpoint(phy_layout(core_data_width))
        self.source = stream.Endpoint(phy_layout(pcie_data_width))

        # # #

        if clock_domain == "pcie" and core_data_width == pcie_data_width:
            self.comb += self.sink.connect(self.source)
            return
        self.pipe_valid = ClockDomainsRenamer(clock_domain)(stream.PipeValid(phy_layout(core_data_width)))
        self.cdc = stream.ClockDomainCrossing(phy_layout(core_data_width), cd_from=clock_domain,
                                              cd_to="pcie", with_common_rst=True, depth=16)
        self.padder = ClockDomainsRenamer("pcie")(
            BeatPadder(core_data_width, pcie_data_width // core_data_width))
        self.converter = ClockDomainsRenamer("pcie")(
            stream.StrideConverter(phy_layout(core_data_width), phy_layout(pcie_data_width)))
        self.pipe_ready = ClockDomainsRenamer("pcie")(stream.PipeReady(phy_layout(pcie_data_width)))
        self.comb += [
            self.sink.connect(self.pipe_valid.sink),
            self.pipe_valid.source.connect(self.cdc.sink),
            self.cdc.source.connect(self.padder.sink),
            self.padder.source.connect(self.converter.sink),
            self.converter.source.connect(self.pipe_ready.sink),
            self.pipe_ready.source.connect(self.source),
        ]


@contextlib.contextmanager
def _datapaths_of(module_name: str):
    """While constructing a LitePCIe PHY, its module's ``PHYRXDatapath`` and
    ``PHYTXDatapath`` are ours (the PHY classes look the names up in their module when
    they build the paths)."""
    mod = importlib.import_module(module_name)
    saved = mod.PHYRXDatapath, mod.PHYTXDatapath
    mod.PHYRXDatapath, mod.PHYTXDatapath = RXDatapath, TXDatapath
    try:
        yield
    finally:
        mod.PHYRXDatapath, mod.PHYTXDatapath = saved


class S7PCIEPHY(_S7PCIEPHY):
    """LitePCIe's 7-series PHY with :class:`RXDatapath`."""

    def __init__(self, *args, **kwargs) -> None:
        with _datapaths_of(_S7PCIEPHY.__module__):
            super().__init__(*args, **kwargs)


class USPCIEPHY(_USPCIEPHY):
    """LitePCIe's UltraScale PHY with :class:`RXDatapath`."""

    def __init__(self, *args, **kwargs) -> None:
        with _datapaths_of(_USPCIEPHY.__module__):
            super().__init__(*args, **kwargs)


class USPPCIEPHY(_USPPCIEPHY):
    """LitePCIe's UltraScale+ PHY with :class:`RXDatapath`."""

    def __init__(self, *args, **kwargs) -> None:
        with _datapaths_of(_USPPCIEPHY.__module__):
            super().__init__(*args, **kwargs)


def broken_datapaths(phy) -> list[str]:
    """Names of ``phy``'s datapaths that are LitePCIe's with a hard-IP interface wider
    than the core's (the bugs above)."""
    out = []
    if getattr(phy, "pcie_data_width", None) in (None, getattr(phy, "data_width", None)):
        return out
    for name in DATAPATH_NAMES:
        if isinstance(getattr(phy, name, None), (LITEPCIE_RX_DATAPATH, LITEPCIE_TX_DATAPATH)):
            out.append(name)
    return out


__all__ = ["RXDatapath", "TXDatapath", "BeatPadder", "S7PCIEPHY", "USPCIEPHY", "USPPCIEPHY",
           "broken_datapaths"]
