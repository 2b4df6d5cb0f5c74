"""An 8-node ring RouterNetwork whose every link is a LinkChannel, at BER 1e-4.

The network's hardware traffic generators and checkers verify every packet (header,
per source/destination sequence number, payload); the bench adds the link layers'
counters, the routers' credit state and the run-time ``ber_threshold`` as top-level
pins. One Verilator build serves all runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from migen import Signal

from paranic.spec import protocol as P
from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog
from paranic.sim.channels import LinkChannel
from paranic.sim.testnet import RouterNetwork
from paranic.spec.topo import Topology

HERE = Path(__file__).parent
NAME = "link_net_ring8"
TOPO = "ring:8"
MTU = P.DEFAULT_MTU
#: Verilator otherwise emits the whole model as one huge evaluation function, which
#: GCC compiles very slowly (the network model took 4 min instead of 2).
BUILD_ARGS = ("--output-split-cfuncs", "1000")


def _sum(sigs):
    out = sigs[0]
    for s in sigs[1:]:
        out = out + s
    return out


def _and(sigs):
    out = sigs[0]
    for s in sigs[1:]:
        out = out & s
    return out


def build_network() -> RouterNetwork:
    """RouterNetwork(ring:8, channel=LinkChannel) plus the bench's extra pins."""
    LinkChannel.reset_seeds()
    net = RouterNetwork(Topology.parse(TOPO), mtu=MTU, channel=LinkChannel,
                        channel_kwargs=dict(delay=8, mtu=MTU), with_traffic=True)
    links = [ln for ch in net.channels for ln in (ch.link_a, ch.link_b)]
    extra = set()

    def out(name, width, expr):
        s = Signal(width, name_override=name)
        net.comb += s.eq(expr)
        extra.add(s)

    ber = Signal(32, name_override="ber_threshold")
    extra.add(ber)
    net.comb += [ch.ber_threshold.eq(ber) for ch in net.channels]
    for c in ("crc_errors", "ctrl_errors", "seq_errors", "replays", "naks", "timeouts",
              "rx_overflows", "rx_packets"):
        out(f"link_{c}", 40, _sum([getattr(ln, c) for ln in links]))
    out("bits_flipped", 40, _sum([p.errors_injected for ch in net.channels
                                  for p in (ch.phy_ab, ch.phy_ba)]))
    out("links_up", 1, _and([ln.up for ln in links]))
    out("credits_full", 1, _and([r.credits[p] == r.buf_words
                                 for r in net.routers for p in range(1, r.n_links + 1)]))
    out("err_unknown", 40, _sum([r.err_unknown for r in net.routers]))
    out("err_length", 40, _sum([r.err_length for r in net.routers]))
    out("err_aborted", 40, _sum([r.err_aborted for r in net.routers]))
    out("eject_aborted", 40, _sum([r.eject.aborted for r in net.routers]))
    net.bench_ios = net.ios | extra
    return net


def _run(**env) -> None:
    net = build_network()
    v = write_verilog(net, net.bench_ios, NAME, BUILD_ROOT / "verilog" / NAME)
    env.setdefault("TOPO", TOPO)
    run_cocotb(NAME, [v], NAME, "tb_network_ber", test_dir=HERE, testcase="network_ber",
               extra_env={k: str(v) for k, v in env.items()}, build_args=BUILD_ARGS)


@pytest.mark.slow   # make test keeps the link at BER 1e-4 (test_link_cocotb) and NicCore's ring:4 under bit errors
def test_network_ring8_ber1e4():
    """Uniform random traffic, 40 packets per node of 0..MTU bytes, BER 1e-4 on all links."""
    _run(BER=1e-4, COUNT=40, MIN_LEN=0, MAX_LEN=MTU, SEED=3)


@pytest.mark.slow
def test_network_ring8_ber1e4_long():
    """100,000 packets (12,500 per node) at BER 1e-4."""
    _run(BER=1e-4, COUNT=12_500, MIN_LEN=0, MAX_LEN=MTU, SEED=5, CHUNK=20_000)
