"""Two LinkLayers joined through two Pcs66Adapters (64b/66b) and a serial lane model
(line66.py), in Verilator: long runs with four oscillators, the sides ±100 ppm apart.

As test_gt_cocotb.py for 8b/10b: each side's sys and transceiver tx clock; each side's
rx clock is the far side's tx clock. dw = 64 (SFP+) and dw = 128 (QSFP28 lane on a GTY,
80 raw bits per clock); the router-port models carry beats.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from migen import ClockDomain, ClockDomainsRenamer, Module, Signal

from paranic.hw.common import LinkPortIf
from paranic.hw.link import COUNTERS, LinkLayer
from paranic.hw.phy import connect_phy
from paranic.hw.phy.gt66 import COUNTERS as GT66_COUNTERS, Pcs66Adapter
from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog
from paranic.spec import link as LK
from paranic.spec import protocol as P

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "link"))
from port_pins import router_port_pins  # noqa: E402

HERE = Path(__file__).parent
BUILD_ARGS = ("--output-split-cfuncs", "1000", "--timescale", "1ns/1fs")
#: One Verilator build: small MTU and elastic buffer (compensation shows in a short run).
MTU = 256
G = 64
ADAPTER = dict(elastic_depth=16, elastic_high=4, up_cycles=256)


class GT66Bench(Module):
    """Router-port pins of two LinkLayers, each behind a Pcs66Adapter; the lane is external.

    Pins per side ``s``: the router port, link counters ``s_<counter>``, adapter
    counters ``s_gt_<counter>``, the lane ``s_gt_tx_data`` (out, tx clock) and
    ``s_gt_rx_data`` (in, rx clock = the far side's tx clock), ``s_gt_tx_ready``,
    ``s_gt_rx_ready``. Clocks/resets: ``sys_s``, ``tx_s``, ``rx_s`` (reset only).
    """

    def __init__(self, g: int = G, mtu: int = MTU, dw: int = 64, **adapter_kwargs):
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
            link = ClockDomainsRenamer(ren)(LinkLayer(mtu=mtu, dw=dw))
            ad = ClockDomainsRenamer(ren)(Pcs66Adapter(dw, gt_width=g, mtu=mtu, **adapter_kwargs))
            port = LinkPortIf(dw)
            setattr(self.submodules, f"link_{side}", link)
            setattr(self.submodules, f"gt_{side}", ad)
            self.comb += link.port_connections(port)
            self.comb += router_port_pins(pin, side, port)
            self.comb += connect_phy(link, ad)
            self.comb += [
                pin(f"{side}_gt_tx_data", g).eq(ad.tx_data),
                ad.rx_data.eq(pin(f"{side}_gt_rx_data", g)),
                ad.tx_ready.eq(pin(f"{side}_gt_tx_ready")),
                ad.rx_ready.eq(pin(f"{side}_gt_rx_ready")),
            ]
            for name, width, _ in COUNTERS:
                self.comb += pin(f"{side}_{name}", width).eq(getattr(link, name))
            for name, width, _ in GT66_COUNTERS:
                self.comb += pin(f"{side}_gt_{name}", width).eq(getattr(ad, name))


def _run(testcase: str, dw: int = 64, g: int = G, **env) -> None:
    name = f"gt66_bench_dw{dw}_g{g}"
    kw = dict(ADAPTER, **({"idle_interval": 64} if dw > 64 else {}))
    top = GT66Bench(g=g, dw=dw, **kw)
    v = write_verilog(top, top.ios, name, BUILD_ROOT / "verilog" / name)
    env.setdefault("GT66_G", g)
    env.setdefault("GT66_DW", dw)
    env.setdefault("GT66_MTU", MTU)
    run_cocotb(name, [v], name, "tb_gt66", test_dir=HERE, testcase=testcase,
               extra_env={k: str(v) for k, v in env.items()}, build_args=BUILD_ARGS)


def test_gt66_sfp_plus_ppm():
    """SFP+ clock ratio (tx 6.206 ns against sys 6.4 ns: 156.25 M beats/s each), sides at
    +100 / -100 ppm, full load both ways: exact delivery, no error counter moves."""
    _run("gt66_traffic", GT66_PACKETS=1000, GT66_TX_PS=6206, GT66_PPM_A=100, GT66_PPM_B=-100,
         GT66_SEED=1, GT66_EXPECT="clean")


def test_gt66_qsfp28_128_ppm():
    """dw = 128 over G = 80 at the QSFP28/GTY ratio (NIC 5.12 ns, tx 3.103 ns: 195.3 M
    beats/s each), sides at +100 / -100 ppm, BER 1e-5 and slips: exact delivery."""
    _run("gt66_traffic", dw=128, g=80, GT66_PACKETS=1000, GT66_SYS_PS=5120, GT66_TX_PS=3103,
         GT66_PPM_A=100, GT66_PPM_B=-100, GT66_SEED=7, GT66_BER=1e-5, GT66_SLIPS=2,
         GT66_EXPECT="errors")


def test_gt66_bit_errors_and_slips():
    """BER 2e-5 and bit slips (lost and repeated bits): the CRC catches the errors,
    the lock recovers from the slips, replays deliver everything."""
    _run("gt66_traffic", GT66_PACKETS=1000, GT66_TX_PS=6206, GT66_PPM_A=100,
         GT66_PPM_B=-100, GT66_SEED=2, GT66_BER=2e-5, GT66_SLIPS=4, GT66_EXPECT="errors")


def test_gt66_cable_pull():
    """A cut a->b lane: b's lock and `up` fall, a's stay; restored, b comes back."""
    _run("gt66_cable_pull", GT66_TX_PS=6206, GT66_SEED=3)


@pytest.mark.parametrize("dw,g,tx_ps", [(64, 64, 6206), (128, 80, 3103)])
def test_gt66_throughput(dw, g, tx_ps):
    """The line 10 % slower than sys: the payload fraction of the line at MTU frames is
    64/66 x the framing (payload words over the frame's beats x K) less the forced
    fillers (1 per 1024 beats) and, at dw = 128, the bench's idle beats (1 per 65),
    within 0.5 %."""
    k = dw // 64
    beats = LK.frame_beats(MTU, dw) * (1 + 1 / 1024) * (65 / 64 if k > 1 else 1)
    eff = 64 / 66 * P.payload_words(MTU) / (k * beats)
    _run("gt66_throughput", dw=dw, g=g, GT66_PACKETS=400, GT66_TX_PS=int(tx_ps * 1.1),
         GT66_SYS_PS=6400 if dw == 64 else 5120, GT66_SEED=6, GT66_EXPECT_FRACTION=f"{eff:.6f}")


def test_gt66_compensation_stress():
    """Sides 800 ppm apart: the slow side's elastic buffer drops fillers, no overflow."""
    _run("gt66_traffic", GT66_PACKETS=3000, GT66_TX_PS=6000, GT66_PPM_A=400, GT66_PPM_B=-400,
         GT66_SEED=4, GT66_EXPECT="compensation")
