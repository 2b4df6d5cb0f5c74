"""Two LinkLayers joined through two gt adapters and the 8b/10b lane model (tb_gt.py).

The bench has four oscillators: each side's sys clock and transceiver tx clock;
each side's rx clock is the far side's tx clock (a recovered clock has exactly the
sender's frequency). The cocotb tests give the two sides ±ppm offsets.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from migen import ClockDomain, ClockDomainsRenamer, Module, Signal

from paranic.hw.common import LinkPortIf
from paranic.hw.link import COUNTERS, LinkLayer
from paranic.hw.phy import connect_phy
from paranic.hw.phy.gt import COUNTERS as GT_COUNTERS, GTAdapter
from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "link"))
from port_pins import router_port_pins  # noqa: E402  (the link bench's router-port pins)

HERE = Path(__file__).parent
BUILD_ARGS = ("--output-split-cfuncs", "1000", "--timescale", "1ns/1fs")
#: Bench parameters (one Verilator build): small MTU and elastic buffer so that
#: clock compensation shows within a short run.
MTU = 256
NBYTES = 4
ELASTIC = dict(elastic_depth=16, elastic_high=4)


class GTBench(Module):
    """Router-port pins of two LinkLayers, each behind a GTAdapter; the lane is external.

    Pins per side ``s`` in {a, b}: the router port (``s_tx_*``, ``s_rx_*``,
    ``s_credit_*``, ``s_drained``, ``s_up``), link counters ``s_<counter>``, adapter
    counters ``s_gt_<counter>``, ``s_hold``, the lane ``s_gt_tx_data/_k`` (out, tx
    clock) and ``s_gt_rx_data/_k/_err`` (in, rx clock = the far side's tx clock),
    ``s_tx_ready``/``s_rx_ready`` (in, sys). Clocks/resets: ``sys_s``, ``tx_s``,
    ``rx_s`` (reset only).
    """

    def __init__(self, nbytes: int = NBYTES, mtu: int = MTU, **adapter_kwargs):
        self.ios: set[Signal] = set()

        def pin(name: str, width: int = 1) -> Signal:
            s = Signal(width, name_override=name)
            self.ios.add(s)
            return s

        cds = {}
        for side in ("a", "b"):
            for d in ("sys", "tx", "rx"):
                cd = ClockDomain(f"{d}_{side}")
                self.clock_domains += cd
                cds[(d, side)] = cd
        self.comb += [
            cds[("rx", "a")].clk.eq(cds[("tx", "b")].clk),
            cds[("rx", "b")].clk.eq(cds[("tx", "a")].clk),
        ]
        for side in ("a", "b"):
            ren = {"sys": f"sys_{side}", "tx": f"tx_{side}", "rx": f"rx_{side}"}
            link = ClockDomainsRenamer(ren)(LinkLayer(mtu=mtu))
            ad = ClockDomainsRenamer(ren)(GTAdapter(nbytes, mtu=mtu, **adapter_kwargs))
            port = LinkPortIf()
            setattr(self.submodules, f"link_{side}", link)
            setattr(self.submodules, f"gt_{side}", ad)
            self.comb += link.port_connections(port)
            self.comb += router_port_pins(pin, side, port)
            self.comb += connect_phy(link, ad)
            self.comb += [
                pin(f"{side}_hold").eq(ad.hold),
                pin(f"{side}_gt_tx_data", 8 * nbytes).eq(ad.tx_data),
                pin(f"{side}_gt_tx_k", nbytes).eq(ad.tx_k),
                ad.rx_data.eq(pin(f"{side}_gt_rx_data", 8 * nbytes)),
                ad.rx_k.eq(pin(f"{side}_gt_rx_k", nbytes)),
                ad.rx_err.eq(pin(f"{side}_gt_rx_err", nbytes)),
                ad.tx_ready.eq(pin(f"{side}_gt_tx_ready")),
                ad.rx_ready.eq(pin(f"{side}_gt_rx_ready")),
            ]
            for name, width, _ in COUNTERS:
                self.comb += pin(f"{side}_{name}", width).eq(getattr(link, name))
            for name, width, _ in GT_COUNTERS:
                self.comb += pin(f"{side}_gt_{name}", width).eq(getattr(ad, name))
            self.comb += pin(f"{side}_gt_commas", 32).eq(ad.packer.commas)


def _build(name: str, nbytes: int) -> Path:
    top = GTBench(nbytes=nbytes, **ELASTIC)
    return write_verilog(top, top.ios, name, BUILD_ROOT / "verilog" / name)


def _run(testcase: str, nbytes: int = NBYTES, **env) -> None:
    name = f"gt_bench_w{nbytes}"
    v = _build(name, nbytes)
    env.setdefault("GT_NBYTES", nbytes)
    env.setdefault("GT_MTU", MTU)
    run_cocotb(name, [v], name, "tb_gt", test_dir=HERE, testcase=testcase,
               extra_env={k: str(v) for k, v in env.items()}, build_args=BUILD_ARGS)


@pytest.mark.slow   # make test: the sys-limited case and the compensation stress
def test_gt_line_limited_ppm():
    """Line slower than sys (hold engaged), sides at +100 / -100 ppm, full load."""
    _run("gt_traffic", GT_PACKETS=2000, GT_TX_PS=5000, GT_PPM_A=100, GT_PPM_B=-100, GT_SEED=1,
         GT_EXPECT="line_limited")


def test_gt_sys_limited_ppm():
    """Line faster than sys (forced fillers only), sides at +100 / -100 ppm, full load."""
    _run("gt_traffic", GT_PACKETS=2000, GT_TX_PS=3000, GT_PPM_A=100, GT_PPM_B=-100, GT_SEED=2,
         GT_EXPECT="sys_limited")


def test_gt_compensation_stress():
    """Sides 800 ppm apart (4x the spec) on a fast line: the far elastic buffer drops
    fillers and never overflows."""
    _run("gt_traffic", GT_PACKETS=3000, GT_TX_PS=3000, GT_PPM_A=400, GT_PPM_B=-400, GT_SEED=3,
         GT_EXPECT="compensation")


def test_gt_bit_errors_and_slips():
    """Bit errors (BER 2e-5) and bit slips: the CRC catches them, replays deliver all."""
    _run("gt_traffic", GT_PACKETS=2000, GT_TX_PS=4000, GT_PPM_A=100, GT_PPM_B=-100, GT_SEED=4,
         GT_BER=2e-5, GT_SLIPS=4, GT_EXPECT="errors")


def test_gt_two_bytes_per_clock():
    """W = 2 (LiteICLink data_width 20) on a line as fast as sys, +100 / -100 ppm."""
    _run("gt_traffic", nbytes=2, GT_PACKETS=1000, GT_TX_PS=2000, GT_PPM_A=100, GT_PPM_B=-100,
         GT_SEED=7, GT_EXPECT="any")


def test_gt_cable_pull():
    """A lane that stops drops `up` on the far side; plugged back, it comes up again."""
    _run("gt_cable_pull", GT_TX_PS=4000, GT_SEED=5)


@pytest.mark.slow
def test_gt_ber_long():
    """A long run at BER 1e-5 with slips, 5000 packets each way."""
    _run("gt_traffic", GT_PACKETS=5000, GT_TX_PS=4000, GT_PPM_A=100, GT_PPM_B=-100, GT_SEED=6,
         GT_BER=1e-5, GT_SLIPS=10, GT_EXPECT="errors", GT_MAX_NS=100_000_000)
