"""Build a LinkChannel bench (Verilator, cached) and run the cocotb tests of tb_link.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from migen import Module, Signal

from paranic.spec import protocol as P
from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog
from paranic.hw.common import LinkPortIf
from paranic.hw.link import COUNTERS
from paranic.sim.channels import LinkChannel

from port_pins import router_port_pins  # this folder (pytest puts it on sys.path)

HERE = Path(__file__).parent
NAME = "link_bench"
#: Verilator otherwise emits the whole model as one huge evaluation function, which
#: GCC compiles very slowly (the network model took 4 min instead of 2).
BUILD_ARGS = ("--output-split-cfuncs", "1000")


class LinkBench(Module):
    """Two router ports joined by a LinkChannel; every port signal is a top-level pin.

    Pins: ``{a,b}_tx_*`` (router source into the channel), ``{a,b}_rx_*`` (channel
    into the router's input buffer), ``{a,b}_credit_valid/_credit_words``,
    ``{a,b}_drained``, ``{a,b}_up``, ``{a,b}_rx_words`` (the SOF's length beside a
    packet's first word), ``{a,b}_buf_free`` (input: free words in the buffer model), ``{a,b}_<counter>``, ``{a,b}_downs``,
    ``{a,b}_link_state``, ``ber_threshold`` (input),
    ``ab_/ba_errors_injected``, and the words entering the a->b wire
    (``ab_ctrl``, ``ab_data``).
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, delay: int = 8, **link_kwargs):
        self.ios: set[Signal] = set()

        def pin(name: str, width: int = 1) -> Signal:
            s = Signal(width, name_override=name)
            self.ios.add(s)
            return s

        a, b = LinkPortIf(), LinkPortIf()
        self.submodules.ch = ch = LinkChannel(a, b, delay=delay, seed=1, mtu=mtu, **link_kwargs)
        for side, port, link in (("a", a, ch.link_a), ("b", b, ch.link_b)):
            self.comb += router_port_pins(pin, side, port)
            for name, width, _ in COUNTERS:
                self.comb += pin(f"{side}_{name}", width).eq(getattr(link, name))
            self.comb += [
                pin(f"{side}_downs", 32).eq(link.downs),
                pin(f"{side}_link_state", 2).eq(link.link_state),
            ]
        self.comb += [
            ch.ber_threshold.eq(pin("ber_threshold", 32)),
            pin("ab_errors_injected", 32).eq(ch.phy_ab.errors_injected),
            pin("ba_errors_injected", 32).eq(ch.phy_ba.errors_injected),
            pin("ab_ctrl").eq(ch.phy_ab.sink.ctrl),
            pin("ab_data", P.WORD_BITS).eq(ch.phy_ab.sink.data),
        ]


def _verilog() -> Path:
    top = LinkBench()
    return write_verilog(top, top.ios, NAME, BUILD_ROOT / "verilog" / NAME)


def _run(testcase: str, **env) -> None:
    v = _verilog()
    run_cocotb(NAME, [v], NAME, "tb_link", test_dir=HERE, testcase=testcase,
               extra_env={k: str(v) for k, v in env.items()}, build_args=BUILD_ARGS)


def test_link_ber0():
    """2000 random packets each way at BER 0: exact delivery, no error counters move."""
    _run("link_traffic", LINK_PACKETS=2000, LINK_BER=0.0, LINK_SEED=1)


def test_link_ber1e4():
    """2000 random packets each way at BER 1e-4: exact delivery despite many bad frames."""
    _run("link_traffic", LINK_PACKETS=2000, LINK_BER=1e-4, LINK_SEED=2, LINK_EXPECT_ERRORS=1)


def test_link_ber1e5():
    """1000 random packets each way at BER 1e-5: exact delivery, and (as at 1e-4) the
    link never escalates to DOWN with the default max_replays."""
    _run("link_traffic", LINK_PACKETS=1000, LINK_BER=1e-5, LINK_SEED=5, LINK_EXPECT_ERRORS=1)


def test_link_efficiency():
    """A saturated MTU stream uses exactly the PHY words link_efficiency() assumes."""
    _run("link_efficiency_stream", LINK_PACKETS=200)


@pytest.mark.slow
def test_link_ber1e4_long():
    """100,000 random packets each way at BER 1e-4."""
    _run("link_traffic", LINK_PACKETS=100_000, LINK_BER=1e-4, LINK_SEED=3, LINK_EXPECT_ERRORS=1,
         LINK_MAX_CYCLES=40_000_000)


@pytest.mark.slow
def test_link_ber1e3_short_packets():
    """A harsh channel, BER 1e-3 (6 % of words hit), with packets of 0..64 bytes.

    (With MTU-sized frames almost none would survive: 0.937**132 = 0.02 %.)
    """
    _run("link_traffic", LINK_PACKETS=2000, LINK_BER=1e-3, LINK_SEED=4, LINK_EXPECT_ERRORS=1,
         LINK_MAXLEN=64)
