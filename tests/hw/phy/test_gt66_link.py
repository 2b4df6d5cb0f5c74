"""Two LinkLayers through two Pcs66Adapters and a serial line model (Migen simulation).

Four oscillators: each side's sys clock and transceiver tx clock; each side's rx clock
is the far side's tx clock (a recovered clock has the sender's frequency). The line
model moves the transmitter's G bits per tx clock to the far receiver with a random
start offset, bit errors at a given rate and bit slips. The router ports are the link
tests' port models (tests/hw/test_link.py): exact, in-order delivery is checked.
"""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

import pytest
from migen import ClockDomain, ClockDomainsRenamer, Module, passive, run_simulation

from paranic.bench.wide import make_beats
from paranic.hw.common import LinkPortIf
from paranic.hw.link import LinkLayer
from paranic.hw.phy import connect_phy
from paranic.hw.phy.gt66 import Pcs66Adapter
from paranic.spec import link as LK

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cocotb" / "phy"))
from line66 import Line  # noqa: E402  (the lane model, shared with the cocotb bench)
from test_link import PortModel, make_packet  # noqa: E402  (the link tests' port model)

MTU = 256
BUF = 1024
#: Clock periods in 0.1 ps (Migen's simulator counts integer time steps).
SYS = 80_000                 # 125 MHz
#: SFP+ ratio: the GT clock is 66/64 x the beat rate; 32 beats every 33 clocks.
TX_BALANCED = 77_576         # beat rate = sys rate (within 1e-5)


def _even(x: float) -> int:
    return 2 * round(x / 2)


class Bench(Module):
    def __init__(self, dw: int = 64, **adapter_kwargs):
        self.ports, self.links, self.phys = {}, {}, {}
        for s in "ab":
            for d in ("sys", "tx"):
                self.clock_domains.__iadd__(ClockDomain(f"{d}_{s}"))
        for s, o in (("a", "b"), ("b", "a")):
            link = ClockDomainsRenamer(f"sys_{s}")(LinkLayer(mtu=MTU, dw=dw))
            ad = ClockDomainsRenamer({"sys": f"sys_{s}"})(
                Pcs66Adapter(dw, mtu=MTU, cd_tx=f"tx_{s}", cd_rx=f"tx_{o}", **adapter_kwargs))
            port = LinkPortIf(dw)
            self.submodules += link, ad
            self.comb += link.port_connections(port)
            self.comb += connect_phy(link, ad)
            self.ports[s], self.links[s], self.phys[s] = port, link, ad


def run(n=30, dw=64, tx=(TX_BALANCED, TX_BALANCED), ppm=(100, -100), ber=0.0, slips=(),
        seed=1, max_sys=60_000, **adapter_kwargs):
    """n MTU-ish packets each way at full load; returns (models, counters, lines, t)."""
    # Short bring-up: 32 clean rx clocks to `up`, and at dw > 64 an idle beat (the beat
    # boundary mark) every 64 beats instead of 1024.
    kw = dict(up_cycles=32, elastic_depth=16, elastic_high=4)
    if dw > 64:
        kw["idle_interval"] = 64
    kw.update(adapter_kwargs)
    top = Bench(dw, **kw)
    rng = random.Random(seed)
    g = top.phys["a"].gt_width
    lines = {"ab": Line(g, random.Random(rng.random()), ber),
             "ba": Line(g, random.Random(rng.random()), ber)}
    words = {s: [make_packet(rng, rng.choice([MTU, MTU, rng.randrange(MTU + 1)]), i + 100 * j)
                 for i in range(n)] for j, s in enumerate("ab")}
    pk = {s: [make_beats(w, dw) for w in words[s]] for s in "ab"}
    models = {s: PortModel(top.ports[s], pk[s], BUF, random.Random(seed + j), gap=0.0,
                           drain=1.0) for j, s in enumerate("ab")}
    stats = {"done": False, "t_first": {}, "t_last": {}, "tx_cycles": {"a": 0, "b": 0}}

    def line_gen(src, dst, lane):
        @passive
        def gen():
            while True:
                w = yield top.phys[src].tx_data
                yield top.phys[dst].rx_data.eq(lane.step(w))
                stats["tx_cycles"][src] += 1
                yield
        return gen()

    def side_gen(s, o):
        m = models[s]
        cyc = 0
        pending = list(slips)       # (packets received by this side, line to slip)
        while not stats["done"]:
            yield from m.step()
            yield
            cyc += 1
            if pending and len(m.received) >= pending[0][0]:
                _, name, repeat = pending.pop(0)
                lines[name].slip(repeat)
            if m.received and s not in stats["t_first"]:
                stats["t_first"][s] = (cyc, stats["tx_cycles"][o], len(m.received))
            if len(m.received) == n and s not in stats["t_last"]:
                stats["t_last"][s] = (cyc, stats["tx_cycles"][o])
            if (len(models["a"].received) == n and len(models["b"].received) == n) \
                    or cyc >= max_sys:
                stats["done"] = True
        res = {}
        for name, _, _ in (("replays", 0, 0), ("crc_errors", 0, 0), ("ctrl_errors", 0, 0),
                           ("seq_errors", 0, 0), ("rx_overflows", 0, 0), ("tx_packets", 0, 0)):
            res[name] = yield getattr(top.links[s], name)
        for name in ("up", "rx_bad_headers", "rx_bad_beats", "rx_lock_losses", "rx_slips",
                     "rx_fillers_dropped", "rx_overflow", "tx_fillers_dropped",
                     "tx_fillers_forced", "tx_lost", "rx_realigns"):
            res[name] = yield getattr(top.phys[s], name)
        stats[s] = res

    pa, pb = ppm
    clocks = {"sys_a": _even(SYS / (1 + pa * 1e-6)), "sys_b": _even(SYS / (1 + pb * 1e-6)),
              "tx_a": _even(tx[0] / (1 + pa * 1e-6)), "tx_b": _even(tx[1] / (1 + pb * 1e-6))}
    run_simulation(top, {"sys_a": side_gen("a", "b"), "sys_b": side_gen("b", "a"),
                         "tx_a": line_gen("a", "b", lines["ab"]),
                         "tx_b": line_gen("b", "a", lines["ba"])}, clocks=clocks)
    for s, o in (("a", "b"), ("b", "a")):
        assert models[o].received == pk[s], f"{s}->{o}: lost, corrupted or reordered {stats}"
        assert stats[s]["rx_overflow"] == 0 and stats[s]["tx_lost"] == 0, stats
    stats["words"] = words
    return models, stats, lines, clocks


def _clean(st):
    for s in "ab":
        for name in ("replays", "crc_errors", "ctrl_errors", "seq_errors", "rx_bad_headers",
                     "rx_bad_beats", "rx_lock_losses"):
            assert st[s][name] == 0, (s, name, st[s])


@pytest.mark.slow   # ~30 s: four unrelated clocks are slow in Migen's simulator
def test_link_pair_sfp_plus_ppm():
    """dw = 64, G = 64 at the SFP+ clock ratio, sides at +100 / -100 ppm: every packet
    once, intact, in order, no error counter moves; forced fillers both ways."""
    _, st, lines, _ = run(n=8, filler_period=128)
    _clean(st)
    assert st["a"]["tx_fillers_forced"] + st["b"]["tx_fillers_forced"] > 0
    assert st["a"]["up"] == 1 and st["b"]["up"] == 1


@pytest.mark.slow   # ~60 s
def test_link_pair_bit_errors_caught_by_crc():
    """BER 1e-4 on both lines: the descrambler triples each error; the link layer's
    CRC/sequence checks catch them and replays deliver every packet intact."""
    _, st, lines, _ = run(n=8, ber=3e-4, seed=3, max_sys=40_000)
    assert lines["ab"].errors + lines["ba"].errors > 10
    assert st["a"]["replays"] + st["b"]["replays"] > 0
    assert sum(st[s][n] for s in "ab" for n in ("crc_errors", "ctrl_errors", "seq_errors")) > 0


@pytest.mark.slow   # ~18 s; the cocotb bench covers slips under load at dw = 64
def test_link_pair_slip_relocks():
    """A bit slip (a repeated bit) on a line under load: the lock falls and finds the
    boundary again, the link layer replays what was lost (the lost-bit case, which
    needs 65 slips, is test_pcs66's)."""
    _, st, lines, _ = run(n=4, slips=((2, "ab", True),), seed=4, max_sys=40_000, ppm=(0, 0))
    assert st["b"]["rx_lock_losses"] >= 1 and st["b"]["up"] == 1
    assert st["a"]["replays"] > 0


#: (dw, G, tx clock period): SFP+ (64 bits at 161.13 MHz for 156.25 M beats/s, here
#: against sys 125 MHz) and a QSFP28 lane on the GTY (80 bits at 322.27 MHz, 195.3 M
#: beats/s), each with the line 10 % slower than sys so that the line is the bottleneck.
LINE_LIMITED = {64: (64, _even(TX_BALANCED * 1.1)), 128: (80, _even(80 / 132 * SYS * 1.1))}


@pytest.mark.slow   # ~11 s each; the cocotb bench measures both widths over 400 packets
@pytest.mark.parametrize("dw", [64, 128])
def test_throughput_line_limited(dw):
    """The line slower than sys (hold meters frames): the payload fraction of the line
    at MTU frames is 64/66 x the link framing's efficiency (frame beats), within 2 %."""
    g, tx = LINE_LIMITED[dw]
    m, st, lines, clocks = run(n=6, dw=dw, gt_width=g, tx=(tx, tx), ppm=(0, 0), seed=5)
    _clean(st)
    assert st["a"]["tx_fillers_dropped"] > 0
    sent = st["words"]["a"][1:]                 # the packets after the first one
    payload = sum(64 * (len(w) - 2) for w in sent)
    c0, t0, _ = st["t_first"]["b"]
    c1, t1 = st["t_last"]["b"]
    frac = payload / ((t1 - t0) * g)
    frame_bits = sum(66 * dw // 64 * LK.frame_beats(8 * (len(w) - 2), dw) for w in sent)
    # dw > 64: the run's idle beats (one every 64 beats, run()) take their share too.
    expect = payload / frame_bits * (64 / 65 if dw > 64 else 1.0)
    print(f"dw={dw} G={g}: payload fraction of the line {frac:.4f}, "
          f"64/66 x framing {payload / frame_bits:.4f}, with idle beats {expect:.4f}")
    # Timed at packet ends (a few cycles of jitter over ~150 line cycles): 2 %.
    assert frac == pytest.approx(expect, rel=0.02)


@pytest.mark.slow   # ~18 s; the cocotb bench runs dw = 128 under ppm, errors and slips
def test_link_pair_128_qsfp28_ratio():
    """dw = 128 over G = 80 at the QSFP28/GTY clock ratio (beat rate = NIC clock), sides
    at +100 / -100 ppm: exact delivery both ways, no error counter moves."""
    _, st, lines, _ = run(n=4, dw=128, gt_width=80, tx=(_even(80 / 132 * SYS),) * 2,
                          filler_period=128)
    _clean(st)
    assert st["a"]["up"] == 1 and st["b"]["up"] == 1


@pytest.mark.parametrize("dw,g,tx", [(64, 64, TX_BALANCED), (128, 80, _even(80 / 132 * SYS))])
def test_adapter_loopback_latency(dw, g, tx):
    """One adapter, tx_data wired to rx_data (a transceiver loopback with no delay):
    every beat comes back once, in order; latency sink -> source in sys clocks,
    crossings included (printed for docs/phy.md), bounded."""

    class Top(Module):
        def __init__(self):
            self.clock_domains.cd_tx = ClockDomain()
            kw = {"idle_interval": 64} if dw > 64 else {}
            self.submodules.ad = Pcs66Adapter(dw, gt_width=g, mtu=MTU, up_cycles=32,
                                              cd_tx="tx", cd_rx="tx", **kw)
            self.comb += self.ad.rx_data.eq(self.ad.tx_data)

    top = Top()
    ad = top.ad
    rng = random.Random(dw)
    sent, got, t_in, t_out = [], [], [], []

    def sys_gen():
        cyc = 0
        while not (yield ad.up):
            yield
            cyc += 1
            assert cyc < 5000, "no lock"
        for i in range(300):
            valid = rng.random() < 0.3 and not (yield ad.hold)
            w = (rng.getrandbits(dw), 0)          # data beats: never fillers
            yield ad.sink.valid.eq(int(valid))
            yield ad.sink.data.eq(w[0])
            yield ad.sink.ctrl.eq(w[1])
            yield ad.source.ready.eq(1)
            yield
            if valid:
                sent.append(w)
                t_in.append(cyc)
            if (yield ad.source.valid):
                got.append(((yield ad.source.data), (yield ad.source.ctrl)))
                t_out.append(cyc)
            cyc += 1
        yield ad.sink.valid.eq(0)
        for _ in range(60):
            yield
            if (yield ad.source.valid):
                got.append(((yield ad.source.data), (yield ad.source.ctrl)))
                t_out.append(cyc)
            cyc += 1

    run_simulation(top, {"sys": sys_gen()}, clocks={"sys": SYS, "tx": tx})
    assert got == sent and len(sent) > 50
    lat = sorted(b - a for a, b in zip(t_in, t_out))
    print(f"dw={dw} G={g}: adapter loopback latency median {statistics.median(lat)} sys "
          f"clocks, {lat[0]}..{lat[-1]}, n={len(lat)}")
    assert lat[-1] - lat[0] <= 3 and lat[-1] <= 20
