"""Ribbon PHY: elaboration on a real board's FMC connector with the 7-series primitives,
parameter checks, the line code's properties, scrambler vs. model, filler spacing.
The link-level behaviour is tested by tests/cocotb/ribbon."""

from __future__ import annotations

import random
import re
import shutil
import subprocess

import pytest
from migen import ClockDomain, Module, run_simulation

from paranic.hw.link import LinkLayer
from paranic.hw.phy.ribbon import (DEFAULT_FILLER_EVERY, FillerHold, RibbonCore, RibbonPHY,
                                   max_filler_every)
from paranic.hw.phy.ribbon_lane import (FRAMING, MARKERS, TRAIN, TRAIN_SET, Scrambler, rot8,
                                        scrambler_words)
from paranic.hw.phy.ribbon_pads import ribbon_io, sync_io
from paranic.hw.phy.syncline import SyncLine
from paranic.spec.link import CTL, CtlKind, frame_words


def _kc705():
    from litex_boards.platforms import xilinx_kc705
    return xilinx_kc705.Platform()


def _ac701():
    from litex_boards.platforms import xilinx_ac701
    return xilinx_ac701.Platform()


class _Board(Module):
    def __init__(self, platform, connector: str = "LPC"):
        for cd in ("sys", "sys4x", "idelay"):
            setattr(self.clock_domains, f"cd_{cd}", ClockDomain(cd))
        platform.add_extension(ribbon_io(connector, platform=platform) +
                               sync_io(connector, platform=platform))
        self.submodules.phy = phy = RibbonPHY(platform.request("ribbon", 0), 125e6,
                                              with_idelayctrl=True)
        phy.add_csrs()
        self.submodules.link = link = LinkLayer()
        self.comb += phy.connect(link)
        self.submodules.sync_line = SyncLine(platform.request("ribbon_sync", 0))


@pytest.mark.parametrize("board,connector", [("kc705", "LPC"), ("kc705", "HPC"),
                                             ("ac701", "HPC")])
def test_elaborates_on_fmc(tmp_path, board, connector):
    platform = {"kc705": _kc705, "ac701": _ac701}[board]()
    v = str(platform.get_verilog(_Board(platform, connector)))
    def cells(name):
        return len(re.findall(rf"^// Instance \w+ of {name} Module", v, re.M))

    assert cells("OSERDESE2") == 10          # 9 lanes + the forwarded clock
    assert cells("OBUFDS") == 10
    assert cells("ISERDESE2") == 9 and cells("IDELAYE2") == 9
    assert cells("IBUFDS") == 10             # 9 lanes + the forwarded clock
    assert cells("BUFIO") == 1 and cells("BUFR") == 1 and cells("IDELAYCTRL") == 1
    assert "ribbon_rx_clk" in v
    # Lints with Debian's yosys, the vendor cells as black boxes from its cell library.
    if shutil.which("yosys"):
        (tmp_path / "top.v").write_text(v)
        r = subprocess.run(["yosys", "-q", "-p", "read_verilog -lib +/xilinx/cells_xtra.v "
                            "+/xilinx/cells_sim.v; read_verilog top.v; hierarchy -check -top top; "
                            "proc; check -assert"], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_pads_on_the_connector():
    platform = _kc705()
    platform.add_extension(ribbon_io("HPC", 1))
    pads = platform.request("ribbon", 1)
    assert len(pads.tx_data_p) == 9 and len(pads.rx_data_n) == 9
    with pytest.raises(ValueError, match="no connector"):
        ribbon_io("FMC3", platform=platform)
    with pytest.raises(ValueError, match="needs 9"):
        ribbon_io("LPC", pins={"tx_data": ["LA19"]})
    with pytest.raises(ValueError, match="overlap"):
        ribbon_io("LPC", pins={"tx_clk": "LA00_CC"})


def test_bad_parameters_are_refused():
    platform = _kc705()
    platform.add_extension(ribbon_io("LPC"))
    pads = platform.request("ribbon")
    with pytest.raises(ValueError, match="lanes=8"):
        RibbonPHY(pads, 125e6, lanes=8)
    with pytest.raises(ValueError, match="exceeds"):
        RibbonPHY(pads, 200e6)
    with pytest.raises(ValueError, match="filler_every"):
        RibbonCore(1024, filler_every=100)
    with pytest.raises(ValueError, match="pads lack"):
        RibbonPHY(object(), 125e6)


def test_line_code():
    rotations = {rot8(TRAIN, r) for r in range(1, 8)}
    assert not rotations & set(TRAIN_SET), "a slipped TRAIN must not look like training"
    for m in MARKERS:
        assert not {rot8(m, r) for r in range(1, 8)} & set(TRAIN_SET)
    # The framing bits of a data word: no slipped data byte nor training byte has them.
    for r in range(1, 8):
        for lo in range(4):
            for hi in range(4):
                pair = ((FRAMING << 2) | lo) | (((FRAMING << 2) | hi) << 8)
                assert ((pair >> r) & 0xFF) >> 2 != FRAMING
    assert all(t >> 2 != FRAMING for t in TRAIN_SET)


def test_scrambler_matches_model():
    s = Scrambler()
    got = []

    def gen():
        yield s.ce.eq(1)
        for _ in range(5):
            yield
            got.append((yield s.key))

    run_simulation(s, gen())
    want = scrambler_words(6)
    assert got == want[:5] or got == want[1:6]
    assert len(set(want)) == 6 and all(0 < w < 1 << 64 for w in want)


def test_filler_spacing_arithmetic():
    assert max_filler_every(100) == 5000
    assert frame_words(1024) + 1 < DEFAULT_FILLER_EVERY < max_filler_every(100)


def test_hold_forces_a_filler_every_k_words():
    """A sender that only sends a filler when held (at a frame boundary, up to a frame
    later) sends one at least every K words."""
    frame, k = 20, 100
    h = FillerHold(k - frame - 1)
    status = (CtlKind.STATUS << CTL["kind"].offset)
    rng = random.Random(1)
    gaps = []

    def gen():
        since, left = 0, 0
        for _ in range(3000):
            hold = yield h.hold
            if left == 0 and hold:
                yield h.data.eq(status)
                yield h.ctrl.eq(1)
                gaps.append(since + 1)
                since = 0
                left = 0
            else:
                if left == 0:
                    left = rng.randrange(1, frame + 1)   # next frame
                left -= 1
                yield h.data.eq(rng.getrandbits(64))
                yield h.ctrl.eq(0)
                since += 1
            yield

    run_simulation(h, gen())
    assert len(gaps) > 20 and max(gaps) <= k
