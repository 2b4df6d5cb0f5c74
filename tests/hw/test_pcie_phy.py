"""paranic.hw.pcie_phy: the PCIe PHYs' receive path at a hard-IP interface wider than the
core's, and ParaNicSoC refusing LitePCIe's (which cuts each beat to the core's width)."""

from __future__ import annotations

import random

import pytest
from litex.build.generic_platform import Pins, Subsignal
from litex.build.sim import SimPlatform
from litepcie.phy.uspciephy import USPCIEPHY as LitePCIeUSPCIEPHY
from migen import ClockDomain, Module, run_simulation

from paranic.hw import pcie_phy
from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

_IO = [("sys_clk", 0, Pins(1)), ("sys_rst", 0, Pins(1)),
       ("pcie", 0, Subsignal("rst_n", Pins(1)), Subsignal("clk_p", Pins(1)), Subsignal("clk_n", Pins(1)),
        Subsignal("rx_p", Pins(4)), Subsignal("rx_n", Pins(4)),
        Subsignal("tx_p", Pins(4)), Subsignal("tx_n", Pins(4)))]


class _Platform(SimPlatform):
    def add_period_constraint(self, *args, **kwargs) -> None:
        pass


def _rx_bench(pcie_width: int):
    # One clock domain: Migen's simulator cannot drive the clock crossing's derived
    # domains; the pipeline register and the width converter (where LitePCIe's path
    # loses the data) are what is under test. The cocotb bench runs the crossing.
    dp = pcie_phy.RXDatapath(core_data_width=64, pcie_data_width=pcie_width, clock_domain="pcie")
    m = Module()
    m.submodules.dp = dp
    m.clock_domains.cd_pcie = ClockDomain()
    return m, dp


@pytest.mark.parametrize("pcie_width", [128, 256])
def test_rx_datapath_keeps_whole_beats(pcie_width):
    """Every 64-bit part of a wide beat arrives, in order, with its byte enables; the
    last beat of a TLP may be partly empty (be 0), and the core's ready stalls it."""
    rng = random.Random(pcie_width)
    per = pcie_width // 64
    tlps = []
    for n in (1, 2, 3):
        beats = [rng.getrandbits(pcie_width) for _ in range(n)]
        bes = [(1 << pcie_width // 8) - 1] * (n - 1) + [(1 << (pcie_width // 8 - 4)) - 1]
        tlps.append((beats, bes))
    m, dp = _rx_bench(pcie_width)
    got = []

    def feed():
        for beats, bes in tlps:
            for i, (d, be) in enumerate(zip(beats, bes)):
                yield dp.sink.valid.eq(1)
                yield dp.sink.first.eq(i == 0)
                yield dp.sink.last.eq(i == len(beats) - 1)
                yield dp.sink.dat.eq(d)
                yield dp.sink.be.eq(be)
                yield
                while not (yield dp.sink.ready):
                    yield
        yield dp.sink.valid.eq(0)

    def drain():
        for cyc in range(400):
            yield dp.source.ready.eq(cyc % 3 != 0)   # back-pressure
            yield
            if (yield dp.source.valid) and (yield dp.source.ready):
                got.append(((yield dp.source.dat), (yield dp.source.be), (yield dp.source.last)))

    run_simulation(m, {"pcie": [feed(), drain()]}, clocks={"pcie": 4})
    want = []
    for beats, bes in tlps:
        for i, (d, be) in enumerate(zip(beats, bes)):
            for k in range(per):
                want.append(((d >> 64 * k) & (2**64 - 1), (be >> 8 * k) & 0xFF,
                             int(i == len(beats) - 1 and k == per - 1)))
    assert got == want


def test_soc_refuses_litepcie_rx_datapath():
    def phy(cls, width):
        platform = _Platform("sim", _IO)
        return platform, cls(platform, platform.request("pcie"), data_width=64,
                             pcie_data_width=width, bar0_size=P.BAR0_BYTES)

    platform, lp = phy(LitePCIeUSPCIEPHY, 128)
    assert pcie_phy.broken_datapaths(lp) == ["cq_datapath", "rc_datapath", "cc_datapath",
                                             "rq_datapath"]
    soc = ParaNicSoC(platform, 125e6, with_cpu=False, n_links=2, n_ctx=4, mtu=256)
    with pytest.raises(ValueError, match="paranic.hw.pcie_phy"):
        soc.add_paranic_pcie(lp)
    platform, ours = phy(pcie_phy.USPCIEPHY, 128)
    assert isinstance(ours, LitePCIeUSPCIEPHY)
    assert pcie_phy.broken_datapaths(ours) == []
    assert isinstance(ours.cq_datapath, pcie_phy.RXDatapath)
    assert isinstance(ours.rq_datapath, pcie_phy.TXDatapath)
    # LitePCIe's own class is left as it was.
    import litepcie.phy.uspciephy as lp_mod
    assert lp_mod.PHYRXDatapath is pcie_phy.LITEPCIE_RX_DATAPATH
    assert lp_mod.PHYTXDatapath is pcie_phy.LITEPCIE_TX_DATAPATH
    # Same widths: LitePCIe's receive path is fine.
    platform, same = phy(LitePCIeUSPCIEPHY, 64)
    assert pcie_phy.broken_datapaths(same) == []


@pytest.mark.parametrize("pcie_width", [128, 256])
def test_tx_datapath_writes_whole_beats(pcie_width):
    """Packets of any length leave as wide beats whose byte enables mark exactly the
    packet's bytes (no stale parts of the previous packet), under back-pressure."""
    rng = random.Random(pcie_width + 1)
    per = pcie_width // 64
    dp = pcie_phy.TXDatapath(core_data_width=64, pcie_data_width=pcie_width, clock_domain="pcie")
    m = Module()
    m.submodules.dp = dp
    m.clock_domains.cd_pcie = ClockDomain()
    pkts = [[rng.getrandbits(64) for _ in range(n)] for n in (5, 1, 2, 3, 4, 7, 1)]
    got = []

    def feed():
        for words in pkts:
            for i, w in enumerate(words):
                yield dp.sink.valid.eq(1)
                yield dp.sink.first.eq(i == 0)
                yield dp.sink.last.eq(i == len(words) - 1)
                yield dp.sink.dat.eq(w)
                yield dp.sink.be.eq(0xFF)
                yield
                while not (yield dp.sink.ready):
                    yield
        yield dp.sink.valid.eq(0)

    def drain():
        for cyc in range(600):
            yield dp.source.ready.eq(cyc % 4 != 1)
            yield
            if (yield dp.source.valid) and (yield dp.source.ready):
                got.append(((yield dp.source.dat), (yield dp.source.be), (yield dp.source.last)))

    run_simulation(m, {"pcie": [feed(), drain()]}, clocks={"pcie": 4})
    want = []
    for words in pkts:
        padded = words + [0] * (-len(words) % per)
        for b in range(0, len(padded), per):
            dat = sum(w << 64 * k for k, w in enumerate(padded[b:b + per]))
            be = sum(0xFF << 8 * k for k in range(min(per, len(words) - b)))
            want.append((dat, be, int(b + per >= len(padded))))
    assert got == want


def test_beat_padder_ratio_one_passes_through():
    """At a hard-IP interface as wide as the core (7-series, 64 bits) no packet is
    padded (a 1-bit beat counter used to add an empty beat to every other packet)."""
    bp = pcie_phy.BeatPadder(64, 1)
    pkts = [[1], [2, 3], [4], [5], [6, 7, 8]]
    got = []

    def feed():
        for words in pkts:
            for i, w in enumerate(words):
                yield bp.sink.valid.eq(1)
                yield bp.sink.last.eq(i == len(words) - 1)
                yield bp.sink.dat.eq(w)
                yield bp.sink.be.eq(0xFF)
                yield
                while not (yield bp.sink.ready):
                    yield
        yield bp.sink.valid.eq(0)

    def drain():
        for cyc in range(60):
            yield bp.source.ready.eq(cyc % 3 != 1)
            yield
            if (yield bp.source.valid) and (yield bp.source.ready):
                got.append(((yield bp.source.dat), (yield bp.source.be), (yield bp.source.last)))

    run_simulation(bp, [feed(), drain()])
    assert got == [(w, 0xFF, int(i == len(p) - 1)) for p in pkts for i, w in enumerate(p)]
