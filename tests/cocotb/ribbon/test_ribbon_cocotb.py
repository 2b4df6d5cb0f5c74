"""Build a two-board ribbon bench (Verilator, cached) and run the cocotb tests of tb_ribbon.py.

Each board: a LinkLayer on a RibbonCore, in its own ``sys`` clock. The cable between
them is modelled in tb_ribbon.py at the serdes' parallel ports (docs/phy.md, "ribbon").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from migen import ClockDomain, ClockDomainsRenamer, ClockSignal, Module, ResetSignal, Signal

from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog
from paranic.hw.common import LinkPortIf
from paranic.hw.link import COUNTERS, LinkLayer
from paranic.hw.phy import connect_phy
from paranic.hw.phy.ribbon import RibbonCore
from paranic.hw.phy.ribbon_lane import LANES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "link"))
from port_pins import router_port_pins  # noqa: E402  (the link bench's router-port pins)

HERE = Path(__file__).parent
NAME = "ribbon_bench"
BUILD_ARGS = ("--output-split-cfuncs", "1000")
#: Bench parameters (tb_ribbon.py reads the same names from the environment).
MTU = 256
FILLER_EVERY = 256
MAX_SKEW = 8
#: A small elastic buffer, so that its level reaches the drop mark within a short run.
ELASTIC_DEPTH, ELASTIC_HIGH = 16, 8

#: Ribbon status pins per board: (name, width, attribute of RibbonCore).
STATUS = (
    ("phy_up", 1, "up"), ("phy_hold", 1, "hold"), ("rx_state", 3, "rx_state"),
    ("locked", LANES, "locked"), ("skew", 4 * LANES, "skew"), ("slips", 8 * LANES, "slips"),
    ("dead", LANES, "dead"), ("pattern_errors", 32, "pattern_errors"),
    ("frame_errors", 32, "frame_errors"), ("retrains", 32, "retrains"),
    ("fillers_dropped", 32, "fillers_dropped"), ("overflow", 1, "elastic_overflow"),
    ("holds", 32, "holds"), ("far_up", 1, "far_up"),
)


class RibbonBench(Module):
    """Boards ``a`` and ``b``, each a LinkLayer + RibbonCore in domain ``{a,b}_sys``.

    Board ``a``'s receive domain is clocked by ``b_sys_clk`` (the forwarded clock) and
    vice versa. Pins: the router-port pins of tests/cocotb/link (``{s}_tx_*``,
    ``{s}_rx_*``, ``{s}_credit_*``, ``{s}_drained``, ``{s}_up``, link counters), the
    serdes ports ``{s}_tx_lanes`` (sys), ``{s}_rx_lanes``/``{s}_rx_bitslip`` (rx domain)
    and the status pins of :data:`STATUS`.
    """

    def __init__(self) -> None:
        self.ios: set[Signal] = set()

        def pin(name: str, width: int = 1) -> Signal:
            s = Signal(width, name_override=name)
            self.ios.add(s)
            return s

        for side in ("a", "b"):
            cd = ClockDomain(f"{side}_sys")
            setattr(self.clock_domains, f"cd_{side}_sys", cd)
            setattr(self.clock_domains, f"cd_{side}_rx", ClockDomain(f"{side}_rx"))
            self.ios |= {cd.clk, cd.rst}
        for side, other in (("a", "b"), ("b", "a")):
            self.comb += [
                ClockSignal(f"{side}_rx").eq(ClockSignal(f"{other}_sys")),
                ResetSignal(f"{side}_rx").eq(ResetSignal(f"{other}_sys") | ResetSignal(f"{side}_sys")),
            ]
            ren = ClockDomainsRenamer({"sys": f"{side}_sys"})
            link = ren(LinkLayer(mtu=MTU))
            core = ren(RibbonCore(MTU, cd_rx=f"{side}_rx", max_skew=MAX_SKEW,
                                  filler_every=FILLER_EVERY, elastic_depth=ELASTIC_DEPTH,
                                  elastic_high=ELASTIC_HIGH))
            setattr(self.submodules, f"link_{side}", link)
            setattr(self.submodules, f"core_{side}", core)
            port = LinkPortIf()
            self.comb += link.port_connections(port)
            self.comb += router_port_pins(pin, side, port)
            self.comb += connect_phy(link, core)
            self.comb += [
                pin(f"{side}_tx_lanes", 8 * LANES).eq(core.tx_lanes),
                core.rx_lanes.eq(pin(f"{side}_rx_lanes", 8 * LANES)),
                pin(f"{side}_rx_bitslip", LANES).eq(core.rx_bitslip),
            ]
            for name, width, _ in COUNTERS:
                self.comb += pin(f"{side}_{name}", width).eq(getattr(link, name))
            for name, width, attr in STATUS:
                self.comb += pin(f"{side}_{name}", width).eq(getattr(core, attr))


def _verilog() -> Path:
    top = RibbonBench()
    return write_verilog(top, top.ios, NAME, BUILD_ROOT / "verilog" / NAME)


def _run(testcase: str, **env) -> None:
    v = _verilog()
    env.setdefault("RIBBON_MTU", MTU)
    env.setdefault("RIBBON_MAX_SKEW", MAX_SKEW)
    run_cocotb(NAME, [v], NAME, "tb_ribbon", test_dir=HERE, testcase=testcase,
               extra_env={k: str(v) for k, v in env.items()}, build_args=BUILD_ARGS)


@pytest.mark.parametrize("seed", [1, 2])
def test_ribbon_comes_up(seed):
    """Random per-lane skews (bits, > 1 word) and phases: all lanes lock, deskew, link up."""
    _run("ribbon_bringup", RIBBON_SEED=seed)


@pytest.mark.parametrize("ppm", [100, -100])
def test_ribbon_full_load(ppm):
    """Saturated random traffic both ways with the forwarded clock +-100 ppm off: exact delivery."""
    _run("ribbon_traffic", RIBBON_SEED=3 + (ppm > 0), RIBBON_PPM=ppm, RIBBON_PACKETS=1000)


def test_ribbon_compensation():
    """2000 ppm apart (10x a real pair): the elastic buffer must drop the held fillers."""
    _run("ribbon_traffic", RIBBON_SEED=5, RIBBON_PPM=2000, RIBBON_PACKETS=1000,
         RIBBON_EXPECT_DROPS=1)


def test_ribbon_bit_errors():
    """Bit errors on every lane: the link layer's CRCs catch them and replay; exact delivery."""
    _run("ribbon_traffic", RIBBON_SEED=6, RIBBON_PPM=-100, RIBBON_PACKETS=1000,
         RIBBON_BER=2e-5, RIBBON_EXPECT_ERRORS=1)


def test_ribbon_retrain_under_load():
    """A lane sticks for 100 cycles mid-traffic: the PHY drops and retrains, the link layer
    replays what was lost, and every packet still arrives intact and in order."""
    _run("ribbon_traffic", RIBBON_SEED=9, RIBBON_PPM=100, RIBBON_PACKETS=1000,
         RIBBON_GLITCH_AT=5000)


def test_ribbon_stuck_lane():
    """A lane stuck at 0 keeps the link down, drops it when it sticks later, and says so."""
    _run("ribbon_stuck_lane", RIBBON_SEED=7)


@pytest.mark.slow
@pytest.mark.parametrize("ppm", [200, -200])
def test_ribbon_full_load_long(ppm):
    """30,000 packets each way, the two oscillators at opposite ends of +-100 ppm, bit errors."""
    _run("ribbon_traffic", RIBBON_SEED=8 + (ppm > 0), RIBBON_PPM=ppm, RIBBON_PACKETS=30_000,
         RIBBON_BER=1e-5, RIBBON_EXPECT_ERRORS=1, RIBBON_EXPECT_DROPS=1)
