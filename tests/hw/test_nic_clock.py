"""The NIC clock domain (docs/boards.md, "NIC clock domain"), Migen simulation with two
clocks: first the data path alone (below), then ``NicCore(nic_clock=True)`` (further
down: its build, its crossed CSRs, and two whole NicCores streaming a host's DMA).

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


# NicCore(nic_clock=True) --------------------------------------------------------------------
# Two whole NicCores built with the NIC clock domain (tests/hw/test_niccore_wide.py's
# Pair; its helpers drive the host side, all in sys). The router, link layers, lanes,
# evacuation inputs and the simulated cables run in nic; the host interface, the CSRs
# and everything else in sys, twice as fast.

from test_niccore_wide import Pair, Tap, open_ctx, unpack  # noqa: E402  (tests/hw on sys.path)

from model.pcie_migen import MigenHost  # noqa: E402
from paranic.hw.niccore import NicCore  # noqa: E402
from paranic.spec import protocol as P  # noqa: E402

XP, XM = P.Port.XP, P.Port.XM
#: sys cycles between two CSR accesses of the test (a CPU's or the host's CSR writes
#: are further apart than the crossings' few cycles)
CSR_GAP = 8


def csr_write(storage_csr, value):
    yield storage_csr.storage.eq(value)
    for _ in range(CSR_GAP):
        yield


def csr_strobe(csr):
    yield csr.re.eq(1)
    yield
    yield csr.re.eq(0)
    for _ in range(CSR_GAP):
        yield


def csr_route(nic: NicCore, dst: int, port: int, sets=(0, 1)):
    """Routing-table entry ``dst`` -> ``port`` through the route_* CSRs (crossed)."""
    r = nic.router
    while not (yield r.ready):
        yield
    for s in sets:
        yield from csr_write(r.route_set, s)
        yield from csr_write(r.route_adr, dst)
        yield from csr_write(r.route_port, port)
        yield from csr_strobe(r.route_write)


def wait_links_csr(nics, limit: int = 6000):
    """Every link's ``link_state`` CSR (crossed into sys) UP."""
    for _ in range(limit):
        states = []
        for nic in nics:
            for link in nic.links:
                states.append((yield link._link_state.status))
        if all(s == LK.LinkState.UP for s in states):
            return
        yield
    raise AssertionError(f"links not up: {states}")


def test_niccore_nic_clock_build():
    """The option needs a wide link (the crossings sit on the converters' wide side); it
    puts the router's and link layers' CSRs behind crossings."""
    with pytest.raises(ValueError):
        NicCore(n_links=2, n_ctx=2, mtu=256, nic_clock=True)
    nic = NicCore(n_links=2, n_ctx=2, mtu=256, link_dw=DW, nic_clock=True)
    n = nic.csr_cross.n
    assert n["pulse"] == 1 + 2 * 2        # route_write; take_down and restart per link
    assert n["level"] >= 5 + 4 and n["status"] >= 8
    assert len(nic.inject_cross.sink.data) == DW and len(nic.eject_cross.source.data) == DW
    assert all(len(c.sink.data) == DW for c in nic.mgmt_tx.crosses)


def test_niccore_nic_clock_csrs():
    """One NicCore with ``nic_clock=True`` (no cable: its links train), through its crossed
    CSRs (written in sys, acting in nic): route table writes in both sets read back
    through ``route_read``; ``take_down`` (a one-sys-cycle strobe) takes link 0 DOWN
    once, for the reason SOFTWARE (``downs`` 1, link 1 untouched), and ``restart``
    brings it back to training (reason cleared)."""
    nic = NicCore(n_links=2, n_ctx=2, mtu=64, link_dw=DW, nic_clock=True, table_nodes=16)
    res = {}

    def main():
        r = nic.router
        yield from csr_route(nic, 5, XM, sets=(0,))
        yield from csr_route(nic, 5, XP, sets=(1,))
        yield from csr_route(nic, 6, P.Port.LOCAL, sets=(0,))
        got = []
        for s, d in ((0, 5), (1, 5), (0, 6)):
            yield from csr_write(r.route_set, s)
            yield from csr_write(r.route_adr, d)
            for _ in range(4 * CSR_GAP):
                yield
            got.append((yield r.route_read.status))
        res["read"] = got
        link = nic.links[0]
        for _ in range(4 * CSR_GAP):
            yield
        res["before"] = [(yield link._link_state.status), (yield link._down_reason.status),
                         (yield link._downs.status)]
        yield from csr_strobe(link._take_down)
        for _ in range(4 * CSR_GAP):
            yield
        res["after"] = [(yield link._link_state.status), (yield link._down_reason.status),
                        (yield link._downs.status), (yield nic.links[1]._link_state.status)]
        yield from csr_strobe(link._restart)
        for _ in range(4 * CSR_GAP):
            yield
        res["restart"] = [(yield link._link_state.status), (yield link._down_reason.status)]

    run_simulation(nic, {"sys": [main()]}, clocks={"sys": SYS_NS, "nic": NIC_NS})
    assert res["read"] == [XM, XP, P.Port.LOCAL]
    assert res["before"] == [LK.LinkState.TRAINING, LK.LinkDownReason.NONE, 0]
    assert res["after"] == [LK.LinkState.DOWN, LK.LinkDownReason.SOFTWARE, 1, LK.LinkState.TRAINING]
    assert res["restart"] == [LK.LinkState.TRAINING, LK.LinkDownReason.NONE]


@pytest.mark.slow
def test_niccore_host_stream_nic_clock():
    """Node 0's host DMA-sends one descriptor of 5 MTU (1024-byte) packets to node 1, both
    NicCores with ``nic_clock=True, link_dw=128``, sys twice as fast as nic: at node 1's
    router ejection (nic) every packet arrives once, in order, word for word node 0's
    host memory, and again as 64-bit words after the crossing and the unpacker (sys).
    Rate at node 1's ejection, per nic cycle: one packet per ``frame_beats(1024, 128)``
    = 67 cycles, the link's framing bound (0.9552 of 16 bytes per nic cycle): the host
    (131 sys cycles = 65.5 nic cycles per packet) no longer limits it."""
    mtu, npk = 1024, 5
    top = Pair(mtu=mtu, nic_clock=True)
    ha = MigenHost.for_nic(top.a, read_latency=3)
    hb = MigenHost.for_nic(top.b, read_latency=3)
    rng = random.Random(15)
    data = bytes(rng.getrandbits(8) for _ in range(npk * mtu))
    W = 0x40000
    ha.mem.write(W, data)
    ha.mem.write(0x20000, P.pack_tx_desc(addr=W, length=len(data), dst_node=1, dst_ctx=1, tag=7))
    ejb = Tap(top.b.router.local_source)          # nic
    wordsb = Tap(top.b.eject_unpack.source)       # sys
    res = {}

    def main():
        yield from csr_write(top.b.node, 1)
        yield from csr_route(top.a, 1, XP)
        yield from csr_route(top.b, 1, P.Port.LOCAL)
        yield from open_ctx(top.a, ha, win_base=W)
        yield from wait_links_csr([top.a, top.b])
        yield from ha.write32(P.CtxReg.TX_TAIL, 1)
        for _ in range(6000):
            if len(ejb.packets) == npk and len(wordsb.packets) == npk:
                break
            yield
        for _ in range(4 * CSR_GAP):
            yield
        res["aborted"] = [(yield top.a.router.err_aborted_csr.status),
                          (yield top.b.router.err_aborted_csr.status)]
        res["ejected"] = yield top.b.router.eject_packets_csr.status

    run_simulation(top, {"sys": [main(), ha.generator(), hb.generator(), wordsb.generator()],
                         "nic": [ejb.generator()]},
                   clocks={"sys": SYS_NS, "nic": NIC_NS})
    assert ha.errors == [] and hb.errors == [] and res["aborted"] == [0, 0]
    assert len(ejb.packets) == npk and len(wordsb.packets) == npk
    for i, (beats, words) in enumerate(zip(ejb.packets, wordsb.packets)):
        assert len(beats) == P.packet_beats(mtu, DW)
        got = unpack(beats, P.packet_words(mtu), DW)
        assert got == words
        hd = P.unpack_header(got[0].to_bytes(8, "little") + got[1].to_bytes(8, "little"))
        assert (hd["src_node"], hd["dst_node"], hd["dst_ctx"], hd["length"]) == (0, 1, 1, mtu)
        assert P.words_to_bytes(got[2:], mtu) == data[i * mtu:(i + 1) * mtu]
    t = ejb.t_last
    gaps = [b - a for a, b in zip(t, t[1:])]
    frac = (npk - 1) * mtu / (t[-1] - t[0]) / (DW // 8)
    print(f"NicCore nic clock host stream: payload fraction {frac:.4f} per nic cycle "
          f"(cycles per packet {gaps}, n {len(gaps)})")
    assert set(gaps) == {LK.frame_beats(mtu, DW)}
    assert frac == pytest.approx(LK.link_efficiency(mtu, DW)) and frac >= 0.95
