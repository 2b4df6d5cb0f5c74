"""The NIC clock domain's data path (docs/boards.md, "NIC clock domain (plan)"), Migen
simulation with two clocks: not NicCore's option yet (its CSRs and status bits do not
cross), but the crossing it plans for its packet streams, measured.

A 64-bit host-side packet stream in ``sys`` -> WordsToBeats(128) (``sys``) -> a LiteX
``stream.ClockDomainCrossing`` (AsyncFIFO, ``sys`` -> ``nic``) -> two 128-bit routers
joined by link layers and a simulated cable (:class:`paranic.sim.testnet.RouterChain`,
renamed into ``nic``) -> ``ClockDomainCrossing`` (``nic`` -> ``sys``) ->
BeatsToWords(128) (``sys``). The ``sys`` clock runs twice as fast as ``nic`` (periods
5 and 10), so the 64-bit host side offers 16 bytes per ``nic`` cycle, as much as a
128-bit beat: the link, not the host, limits the stream.
"""

from __future__ import annotations

import random
import statistics

import pytest
from migen import ClockDomainsRenamer, Module
from migen.sim import passive, run_simulation
from litex.soc.interconnect import stream

from paranic.bench import wide
from paranic.hw.common import packet_layout
from paranic.hw.niccore import link_buf_words
from paranic.hw.width import BeatsToWords, WordsToBeats
from paranic.sim.channels import LinkChannel
from paranic.sim.testnet import RouterChain
from paranic.spec import link as LK

DW = 128
SYS_NS, NIC_NS = 5, 10
CDC_DEPTH = 8


class CdcPath(Module):
    """sys words -> beats -> CDC -> nic routers and link -> CDC -> words (sys)."""

    def __init__(self, mtu: int) -> None:
        self.chain = ClockDomainsRenamer("nic")(
            RouterChain(nodes=2, dw=DW, mtu=mtu, buf_words=link_buf_words(mtu, DW)))
        self.pack = WordsToBeats(DW)
        self.tx_cdc = stream.ClockDomainCrossing(packet_layout(DW), cd_from="sys", cd_to="nic",
                                                 depth=CDC_DEPTH)
        self.rx_cdc = stream.ClockDomainCrossing(packet_layout(DW), cd_from="nic", cd_to="sys",
                                                 depth=CDC_DEPTH)
        self.unpack = BeatsToWords(DW)
        self.submodules += self.chain, self.pack, self.tx_cdc, self.rx_cdc, self.unpack
        self.sink, self.source = self.pack.sink, self.unpack.source
        self.comb += [
            self.pack.source.connect(self.tx_cdc.sink),
            self.tx_cdc.source.connect(self.chain.sinks[0]),
            self.chain.sources[1].connect(self.rx_cdc.sink),
            self.rx_cdc.source.connect(self.unpack.sink),
        ]


@pytest.mark.slow
def test_host_stream_through_nic_clock_domain():
    """5 MTU (1024-byte) packets from the sys side to the far sys side through a 128-bit
    link in the nic domain: every packet arrives once, in order, word for word; at the
    far router's local output one packet per ``frame_beats`` nic cycles (the link's
    framing bound, 0.9552 of 16 bytes per nic cycle). The first packet's first word
    crosses (packer input -> router 0's local input) in 35 ns: one sys cycle in the
    packer and the AsyncFIFO's write-to-read (about 3 nic cycles); the later ones wait
    behind the crossing's full FIFO (the link, slower than the host, back-pressures
    it), so theirs is the queue's, at most its depth in nic cycles more."""
    mtu, npk = 1024, 5
    LinkChannel.reset_seeds()
    top = CdcPath(mtu)
    rng = random.Random(9)
    words = [wide.make_packet(rng, mtu, tag=i, dst=1) for i in range(npk)]
    got: list[list[int]] = []
    t_last: list[int] = []          # nic cycle of each packet's last beat at node 1's local output
    t_in: list[float] = []          # ns: a packet's first word taken by the packer
    t_cdc: list[float] = []         # ns: its first beat valid at router 0's local input
    n = {"sys": 0, "nic": 0}

    def send():
        chain = top.chain
        for _ in range(3000):
            ups = []
            for c in chain.channels:
                ups += [(yield c.link_a.up), (yield c.link_b.up)]
            if all(ups):
                break
            yield
        yield from wide.drive_packets(top.sink, words)

    @passive
    def sys_watch():
        cur = []
        s, k, ls = top.source, top.sink, top.chain.sinks[0]
        yield s.ready.eq(1)
        was = False
        while True:
            yield
            n["sys"] += 1
            if (yield k.valid) and (yield k.ready) and (yield k.first):
                t_in.append(n["sys"] * SYS_NS)
            # router 0's local input (nic), sampled at the faster sys clock
            v = bool((yield ls.valid) and (yield ls.first))
            if v and not was:
                t_cdc.append(n["sys"] * SYS_NS)
            was = v
            if (yield s.valid):
                cur.append((yield s.data))
                if (yield s.last):
                    got.append(cur)
                    cur = []

    @passive
    def nic_watch():
        out = top.chain.sources[1]
        while True:
            yield
            n["nic"] += 1
            if (yield out.valid) and (yield out.ready) and (yield out.last):
                t_last.append(n["nic"])

    def wait():
        for _ in range(4000):
            if len(got) == npk:
                return
            yield

    run_simulation(top, {"sys": [send(), sys_watch(), wait()], "nic": [nic_watch()]},
                   clocks={"sys": SYS_NS, "nic": NIC_NS})
    assert got == words
    gaps = [b - a for a, b in zip(t_last, t_last[1:])]
    frac = (npk - 1) * mtu / (t_last[-1] - t_last[0]) / (DW // 8)
    lat = [c - i for i, c in zip(t_in, t_cdc)]
    print(f"nic clock: payload fraction {frac:.4f} per nic cycle, cycles per packet {gaps}; "
          f"CDC latency first word -> router input (ns) median {statistics.median(lat)} "
          f"[{min(lat)}, {max(lat)}], n {len(lat)}")
    assert set(gaps) == {LK.frame_beats(mtu, DW)}
    assert frac == pytest.approx(LK.link_efficiency(mtu, DW)) and frac >= 0.95
    assert len(lat) == npk and 0 < lat[0] <= 5 * NIC_NS
    assert all(0 < x <= (CDC_DEPTH + 5) * NIC_NS for x in lat)
