"""The management port (hw/mgmt.py) in Migen simulation: TX packet building (a send that
waits for room, a refused push), identity inputs and firmware status registers, the
host's header stamping; and (slow) two whole NicCores exchanging link-local CONTROL
packets on every port."""

from __future__ import annotations

import random

import pytest
from migen import Module, Signal
from migen.sim import passive, run_simulation

from paranic.hw.host_pio import stamp_header
from paranic.hw.mgmt import MgmtPort
from paranic.hw.niccore import NicCore
from paranic.sim.cable import SimPhy
from paranic.spec import fw as FW
from paranic.spec import link as LK
from paranic.spec import protocol as P

MTU = 64
N_CTX = 2
CONTROL = P.PacketType.CONTROL
#: the port at the far end of each port in a pair of NicCores cabled XP<->XM, YP<->YM
PEER = {P.Port.XP: P.Port.XM, P.Port.XM: P.Port.XP, P.Port.YP: P.Port.YM, P.Port.YM: P.Port.YP}


class Pair(Module):
    """Two NicCores; port p of ``a`` cabled to port PEER[p] of ``b``."""

    def __init__(self, n_links: int) -> None:
        self.a = NicCore(n_links=n_links, n_ctx=N_CTX, mtu=MTU)
        self.b = NicCore(n_links=n_links, n_ctx=N_CTX, mtu=MTU)
        self.submodules += self.a, self.b
        for p in range(1, n_links + 1):
            q = PEER[p]
            for src, dst, seed in ((self.a, self.b, 2 * p), (self.b, self.a, 2 * p + 1)):
                phy = SimPhy(delay=4, seed=seed)
                self.submodules += phy
                sp, dp = (p, q) if src is self.a else (q, p)
                self.comb += [src.phys[sp - 1][0].connect(phy.sink),
                              phy.source.connect(dst.phys[dp - 1][1])]


def ctl_packet(direct: int, dst: int = 0, src: int = 0, tag: int = 0, length: int = 16,
               rng: random.Random | None = None) -> list[int]:
    rng = rng or random.Random(tag)
    w0, _ = P.header_words(dst_node=dst, src_node=src, type=CONTROL, length=length, direct=direct)
    return [w0, tag] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def field(w0: int, name: str) -> int:
    f = P.HEADER_FIELD[name]
    return (w0 >> f.offset) & ((1 << f.width) - 1)


class Cpu:
    """The firmware's view of a management port, at the port's CPU-side signals."""

    def __init__(self, nic: NicCore) -> None:
        self.nic = nic
        self.m: MgmtPort = nic.mgmt

    def send(self, words: list[int]):
        m = self.m
        free = m.txf.free
        for w in words:
            while (yield free) - (yield m.held_valid) < 1 or (yield m.closing):
                yield
            yield m.push_data.eq(w)
            yield m.push.eq(1)
            yield
            yield m.push.eq(0)
        yield m.send.eq(1)
        yield
        yield m.send.eq(0)
        yield

    def recv(self, gap: int = 0):
        """One packet (waits for it); ``gap`` idle cycles between word reads."""
        f = self.m.rxf
        while not (yield f.packets):
            yield
        n = yield f.head_words
        out = []
        for _ in range(n):
            out.append((yield f.source.data))
            yield self.m.pop.eq(1)
            yield
            yield self.m.pop.eq(0)
            for _ in range(gap):
                yield
        yield
        return out


def wait_links(nics, limit=4000):
    for _ in range(limit):
        states = []
        for nic in nics:
            for link in nic.links:
                states.append((yield link.link_state))
        if all(s == LK.LinkState.UP for s in states):
            return
        yield
    raise AssertionError(f"links not up: {states}")


# Two whole NicCores in Migen's simulator run at a few cycles per second: this test takes
# about 12 minutes here. Routed packets, back-pressure and the torus are tested on
# Verilated clusters (tests/cocotb/mgmt).
@pytest.mark.slow
@pytest.mark.parametrize("n_links", [2])
def test_link_local_every_port(n_links):
    """A link-local CONTROL packet sent on each port of each NIC arrives at the other
    NIC's management port with ``direct`` = the port it arrived on, whatever its
    dst_node and with no routing table loaded (node ids both 0)."""
    top = Pair(n_links)
    got = {"a": [], "b": []}
    sent = {"a": [], "b": []}

    def main():
        yield from wait_links([top.a, top.b])
        for name, nic in (("a", top.a), ("b", top.b)):
            cpu = Cpu(nic)
            for p in range(1, n_links + 1):
                pk = ctl_packet(p, dst=0xABC, tag=(ord(name) << 8) | p, length=8 * p)
                sent[name].append((p, pk))
                yield from cpu.send(pk)
        for name, nic in (("b", top.b), ("a", top.a)):
            cpu = Cpu(nic)
            for _ in range(n_links):
                got[name].append((yield from cpu.recv()))
        res["tx"] = [(yield top.a.mgmt.tx_packets), (yield top.b.mgmt.tx_packets)]
        res["rx"] = [(yield top.a.mgmt.rx_packets_total), (yield top.b.mgmt.rx_packets_total)]
        res["host_rx"] = [(yield top.a.router.tx_packets[0]), (yield top.b.router.tx_packets[0])]
    res = {}
    run_simulation(top, main())
    for src, dst in (("a", "b"), ("b", "a")):
        by_tag = {w[1]: w for w in got[dst]}
        assert len(by_tag) == n_links
        for p, pk in sent[src]:
            w = by_tag[pk[1]]
            assert field(w[0], "direct") == PEER[p]
            clear = ~(7 << P.HEADER_FIELD["direct"].offset)
            assert w[0] & clear == pk[0] & clear and w[1:] == pk[1:]
    assert res["tx"] == [n_links, n_links] and res["rx"] == [n_links, n_links]
    assert res["host_rx"] == [n_links, n_links]   # every ejected packet went to mgmt


def test_tx_refused_push_discards_packet():
    """A send that finds the FIFO full waits for room (the packet goes out whole); a
    push without room spoils its packet: it is discarded whole (counted), the packets
    before and after it are sent intact."""
    m = MgmtPort(mtu=MTU, depth_words=16)
    pa = ctl_packet(1, tag=1, length=40)        # 7 words
    pb = ctl_packet(1, tag=2, length=64)        # 10 words: its last word fills the FIFO
    pc = ctl_packet(2, tag=3, length=64)        # 10 words
    pd = ctl_packet(2, tag=4, length=64)        # 10 words: 10 + 10 > 16, pushes refused
    pe = ctl_packet(3, tag=5, length=8)
    out, res = [], {}

    def push_all(words, send=True):
        for w in words:
            yield m.push_data.eq(w)
            yield m.push.eq(1)
            yield
            yield m.push.eq(0)
        if send:
            yield m.send.eq(1)
            yield
            yield m.send.eq(0)
        yield

    def main():
        yield m.source.ready.eq(0)
        yield from push_all(pa)
        yield from push_all(pb)
        res["closing"] = yield m.closing
        yield m.source.ready.eq(1)
        for _ in range(40):
            yield
        yield m.source.ready.eq(0)
        yield from push_all(pc)
        yield from push_all(pd)
        yield m.source.ready.eq(1)
        for _ in range(40):
            yield
        yield from push_all(pe)
        for _ in range(30):
            yield
        res["dropped"] = yield m.txf.aborted
        res["sent"] = yield m.tx_packets

    @passive
    def collect():
        cur = []
        while True:
            yield
            if (yield m.source.valid) and (yield m.source.ready):
                cur.append((yield m.source.data))
                if (yield m.source.last):
                    out.append(cur)
                    cur = []

    run_simulation(m, [main(), collect()])
    assert res["closing"] == 1
    assert out == [pa, pb, pc, pe]
    assert res["dropped"] == 1 and res["sent"] == 4


def test_identity_and_fw_status_csrs():
    """id_* follow the NicCore inputs; fw_* are storage registers, 0 after reset."""
    nic = NicCore(n_links=2, n_ctx=N_CTX, mtu=MTU)
    res = {}

    def main():
        yield nic.dna.eq(0x0123_4567_89AB_CDEF)
        yield nic.cfg_node.eq(FW.cfg_node(42))
        yield
        yield
        res["dna"] = yield nic.id._dna.status
        res["cfg"] = yield nic.id._cfg_node.status
        res["fw"] = {}
        for n in FW.FW_STATUS_NAMES:
            res["fw"][n] = yield nic.fw.regs[n].storage

    run_simulation(nic, main())
    assert res["dna"] == 0x0123_4567_89AB_CDEF
    assert res["cfg"] == 0x8000 | 42
    assert res["fw"] == {n: 0 for n in FW.FW_STATUS_NAMES}


def test_host_headers_never_link_local():
    """The host's PIO header stamping zeroes ``direct`` (and the host refuses CONTROL,
    tests/hw/test_host.py), so only the management port sends link-local packets."""
    m = Module()
    w0 = Signal(64)
    out = Signal(64)
    m.comb += stamp_header(w0, out, 7, 3, keep_flags=0xF)
    hdr0, _ = P.header_words(dst_node=5, type=P.PacketType.DATA, length=8, direct=2)
    res = {}

    def main():
        yield w0.eq(hdr0)
        yield
        res["out"] = yield out

    run_simulation(m, main())
    assert field(res["out"], "direct") == 0 and field(res["out"], "dst_node") == 5
    assert field(res["out"], "src_node") == 7 and field(res["out"], "src_ctx") == 3
