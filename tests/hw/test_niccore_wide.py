"""A wide NicCore (``NicCore(link_dw=128)``, issue 15 part 5) in Migen simulation.

Two NicCores cabled back to back (port XP of each to port XM of the other, simulated
cables at ``link_dw``). Every block between the host side and the cable is the real
one: the host interface's DMA engine reads a descriptor's payload from the host model
and packs MTU packets, the injection gate and arbiter, the packer (WordsToBeats), the
wide router, control lanes and link layers, and at the far end the unpacker
(BeatsToWords) in front of the ejection dispatcher. Whole NicCores are slow in Migen's
simulator (about 10 to 100 ms per cycle of a pair, more with traffic and a larger
MTU), so each test is a few hundred cycles; run times on this machine (one core):
sizes 1 s, room checks 9 s, lanes 9 s, evacuation 8 s, barrier 11 s, host stream
28 s (about 65 s for the module); marked slow
(``make test-all``): the 256-bit host stream, lanes and evacuation (35 s, 9 s, 8 s)
and the through stream (24 s); the lanes and evacuation again with the NIC clock
(``Pair(nic_clock=True)``, sys twice as fast as nic; together 80 s of CPU).

The host side stays 64 bits at the NIC's clock, so one host feeds at most 8 bytes per
cycle: half of a 128-bit link's beat. ``test_host_stream`` measures that (and
checks every word); ``test_through_stream_128_link_limited`` the link-limited figure:
packets fed into a wide NicCore's link input at one beat per cycle and forwarded to
the next link (no converter on that path; docs/boards.md, "Wider links").
"""

from __future__ import annotations

import random

import pytest
from migen import ClockDomainsRenamer, Module
from migen.sim import passive, run_simulation

from model.ctxseq import MigenPorts
from model.pcie_migen import MigenHost
from paranic.bench import wide
from paranic.hw.link import LinkLayer
from paranic.hw.niccore import NicCore, inject_buf_words, mgmt_reserve_beats
from paranic.sim.cable import SimPhy
from paranic.spec import link as LK
from paranic.spec import protocol as P

DW = 128
XP, XM = P.Port.XP, P.Port.XM
#: the port at the far end of each port (XP <-> XM)
PEER = {XP: XM, XM: XP}
CONTROL = P.PacketType.CONTROL
#: run_simulation's clocks for a ``nic_clock`` Pair: sys twice as fast as nic
NIC_CLOCKS = {"clocks": {"sys": 5, "nic": 10}}


class Pair(Module):
    """Two NicCores ``a`` (node 0) and ``b`` (node 1) at ``link_dw``; port p of ``a``
    cabled to port PEER[p] of ``b``. ``nic_clock``: both built with the NIC clock domain
    (``NicCore(nic_clock=True)``), the cables in ``nic`` too."""

    def __init__(self, link_dw: int = DW, mtu: int = 256, n_ctx: int = 2, table_nodes: int = 16,
                 nic_clock: bool = False) -> None:
        kw = dict(n_links=2, n_ctx=n_ctx, mtu=mtu, link_dw=link_dw, table_nodes=table_nodes)
        if nic_clock:
            kw["nic_clock"] = True
        self.a = NicCore(**kw)
        self.b = NicCore(**kw)
        self.submodules += self.a, self.b
        for p in (XP, XM):
            q = PEER[p]
            for src, dst, seed in ((self.a, self.b, 2 * p), (self.b, self.a, 2 * p + 1)):
                phy = SimPhy(delay=4, seed=seed, dw=link_dw)
                if nic_clock:
                    phy = ClockDomainsRenamer("nic")(phy)
                self.submodules += phy
                sp, dp = (p, q) if src is self.a else (q, p)
                self.comb += [src.phys[sp - 1][0].connect(phy.sink),
                              phy.source.connect(dst.phys[dp - 1][1])]


class CsrPorts(MigenPorts):
    """The driver's context sequences on a NicCore's ``ctx_*`` CSRs (no CSR bank in
    this bench: the test writes the storage and strobes ``re``)."""

    def reg_write(self, name: str, value: int):
        h = self.dut
        if name in ("write", "reset"):
            re = getattr(h, "ctx_" + name).re
            yield re.eq(1)
            yield
            yield re.eq(0)
        else:
            yield getattr(h, "ctx_" + name).storage.eq(value)

    def reg_read(self, name: str):
        yield
        yield
        return (yield self.dut.ctx_state.status)


def open_ctx(nic: NicCore, host: MigenHost, ctx: int = 0, tx_base: int = 0x20000, win_base: int = 0x40000,
             win_size: int = 0x10000):
    """OPEN context ``ctx`` of ``nic`` (TX ring of 4 descriptors at ``tx_base``, a DMA
    window); the RX ring and status block are declared but only the TX side is used."""
    m = host.mem
    m.add(0x10000, 4 * P.rx_slot_bytes(nic.mtu), f"ctx{ctx} rx ring", dma_write=True)
    m.add(tx_base, 4 * P.TX_DESC_BYTES, f"ctx{ctx} tx ring", dma_read=True)
    m.add(0x30000, P.STATUS_BLOCK_BYTES, f"ctx{ctx} status", dma_write=True)
    m.add(win_base, win_size, f"ctx{ctx} window", dma_read=True)
    status = yield from CsrPorts(nic.host).run("open", ctx, rx_base=0x10000, rx_log2=2, tx_base=tx_base,
                                                tx_log2=2, status_addr=0x30000, win_base=win_base,
                                                win_size=win_size)
    assert status == 0, status


def set_route(nic: NicCore, dst: int, port: int, gap: int = 0):
    """Routing-table entry ``dst`` -> ``port`` in both sets (the ``route_*`` CSRs), once
    the table's reset initialisation is done. ``gap``: cycles after each storage write
    and strobe (a ``nic_clock`` NicCore's CSRs cross: a strobe must follow its
    storages' levels and not meet the next ones)."""
    r = nic.router
    while not (yield r.ready):
        yield
    for s in (0, 1):
        yield r.route_set.storage.eq(s)
        yield r.route_adr.storage.eq(dst)
        yield r.route_port.storage.eq(port)
        for _ in range(gap):
            yield
        yield r.route_write.re.eq(1)
        yield
        yield r.route_write.re.eq(0)
        yield
        for _ in range(gap):
            yield


def wait_links(nics, limit: int = 3000):
    for _ in range(limit):
        states = []
        for nic in nics:
            for link in nic.links:
                states.append((yield link.link_state))
        if all(s == LK.LinkState.UP for s in states):
            return
        yield
    raise AssertionError(f"links not up: {states}")


def unpack(beats: list[int], n_words: int, dw: int = DW) -> list[int]:
    """The words of ``dw``-bit beats (word 0 low); the words past ``n_words`` must be 0."""
    m = (1 << 64) - 1
    words = [(b >> (64 * j)) & m for b in beats for j in range(P.beat_words(dw))]
    assert not any(words[n_words:]), "unused words of the last beat not zero"
    return words[:n_words]


class Tap:
    """Records the packets on a stream (beats, the cycle of each packet's last beat)."""

    def __init__(self, ep) -> None:
        self.ep = ep
        self.packets: list[list[int]] = []
        self.t_last: list[int] = []
        self.t_first: list[int] = []

    @passive
    def generator(self):
        ep = self.ep
        cur, n = [], 0
        while True:
            yield
            n += 1
            if (yield ep.valid) and (yield ep.ready):
                if not cur:
                    self.t_first.append(n)
                cur.append((yield ep.data))
                if (yield ep.last):
                    self.packets.append(cur)
                    self.t_last.append(n)
                    cur = []


def test_wide_niccore_sizes_in_beats():
    """At 128 bits the router, its FIFOs, the link layers and the lanes count beats; the
    host side stays 64 bits; at 64 bits there is no converter."""
    nic = NicCore(n_links=2, n_ctx=2, mtu=1024, link_dw=DW)
    r = nic.router
    assert r.dw == DW and r.max_pkt == P.packet_beats(1024, DW) == 65
    assert all(link.dw == DW for link in nic.links)
    assert r.inject.depth_words == inject_buf_words(1024, DW) == 1024   # 14 * 65 + 32 beats
    assert mgmt_reserve_beats(DW) == 32 and mgmt_reserve_beats(64) == 64
    assert len(nic.inject_pack.source.data) == DW and len(nic.eject_unpack.source.data) == 64
    assert len(nic.host.tx_source.data) == 64 and len(nic.lanes_rx[0].source.data) == 64
    assert len(nic.lanes_tx[0].source.data) == DW
    assert all(len(ev.mgmt_sink.data) == DW for ev in nic.mgmt_tx.evac)
    narrow = NicCore(n_links=2, n_ctx=2, mtu=1024)
    assert not hasattr(narrow, "inject_pack") and not hasattr(narrow, "eject_unpack")
    assert narrow.router.dw == 64 and narrow.router.inject.depth_words == 2048


@pytest.mark.parametrize("dw", [128, pytest.param(256, marks=pytest.mark.slow)])
def test_host_stream(dw):
    """Node 0's host DMA-sends one descriptor of 4 MTU (128-byte) packets to node 1 over
    128-bit links: at node 1's router ejection every packet arrives once, in order, word
    for word what node 0's host memory held (headers: node 0 -> node 1, SOM/EOM), in
    ``packet_beats`` beats with the unused words zero, and again as 64-bit words after
    the unpacker. Rate at node 1's ejection, last beat to last beat: one host feeds 8
    bytes per cycle, so at most half of the link's 16 bytes per beat."""
    mtu, npk = 128, 4
    top = Pair(mtu=mtu, link_dw=dw)
    ha = MigenHost.for_nic(top.a, read_latency=3)
    hb = MigenHost.for_nic(top.b, read_latency=3)
    rng = random.Random(15)
    data = bytes(rng.getrandbits(8) for _ in range(npk * mtu))
    W = 0x40000
    ha.mem.write(W, data)
    ha.mem.write(0x20000, P.pack_tx_desc(addr=W, length=len(data), dst_node=1, dst_ctx=1, tag=7))
    ejb = Tap(top.b.router.local_source)
    wordsb = Tap(top.b.eject_unpack.source)
    res = {}

    def main():
        yield top.b.node.storage.eq(1)
        yield from set_route(top.a, 1, XP)
        yield from set_route(top.b, 1, P.Port.LOCAL)
        yield from open_ctx(top.a, ha, win_base=W)
        yield from wait_links([top.a, top.b])
        yield from ha.write32(P.CtxReg.TX_TAIL, 1)
        for _ in range(3000):
            if len(ejb.packets) == npk and len(wordsb.packets) == npk:
                break
            yield
        for _ in range(20):
            yield
        res["aborted"] = [(yield top.a.router.err_aborted), (yield top.b.router.err_aborted)]

    run_simulation(top, [main(), ha.generator(), hb.generator(), ejb.generator(), wordsb.generator()])
    assert ha.errors == [] and hb.errors == [] and res["aborted"] == [0, 0]
    assert len(ejb.packets) == npk and len(wordsb.packets) == npk
    for i, (beats, words) in enumerate(zip(ejb.packets, wordsb.packets)):
        assert len(beats) == P.packet_beats(mtu, dw)
        got = unpack(beats, P.packet_words(mtu), dw)
        assert got == words
        hd = P.unpack_header(got[0].to_bytes(8, "little") + got[1].to_bytes(8, "little"))
        assert (hd["src_node"], hd["dst_node"], hd["dst_ctx"], hd["length"]) == (0, 1, 1, mtu)
        assert hd["flags"] == (int(P.Flags.SOM) if i == 0 else 0) | (int(P.Flags.EOM) if i == npk - 1 else 0)
        assert P.words_to_bytes(got[2:], mtu) == data[i * mtu:(i + 1) * mtu]
    t = ejb.t_last
    gaps = [b - a for a, b in zip(t, t[1:])]
    frac = (npk - 1) * mtu / (t[-1] - t[0]) / (dw // 8)
    print(f"host stream {dw}: payload fraction {frac:.4f} of the link's beat (cycles per packet {gaps})")
    # Host-limited: one 64-bit word per cycle (at most half a beat) and one cycle between
    # the host's packets; the packer, the wide path and the unpacker add no cycle.
    assert max(gaps) <= P.packet_words(mtu) + 1
    assert frac >= mtu / ((P.packet_words(mtu) + 1) * (dw // 8)) and frac < 64 / dw


class MgmtCsr:
    """The firmware's view of a NicCore's management port, through its ``mgmt_*`` CSRs
    (storage written, strobes' ``re`` pulsed: there is no CSR bank in this bench)."""

    def __init__(self, nic: NicCore) -> None:
        self.m = nic.mgmt

    def _strobe(self, csr):
        yield csr.re.eq(1)
        yield
        yield csr.re.eq(0)

    def send(self, words: list[int]):
        m = self.m
        for w in words:
            yield m._tx_data.storage.eq(w)
            yield from self._strobe(m._tx_push)
        yield from self._strobe(m._tx_send)

    def recv(self, limit: int = 2000):
        """One packet (waits for it)."""
        m = self.m
        for _ in range(limit):
            if (yield m.rxf.packets):
                break
            yield
        else:
            raise AssertionError("no packet at the management port")
        n = yield m.rxf.head_words
        out = []
        for _ in range(n):
            out.append((yield m.rxf.source.data))
            yield from self._strobe(m._rx_pop)
            yield      # the FIFO's next word (a firmware's CSR reads are further apart)
        yield
        return out


def ctl_packet(direct: int, dst: int, tag: int, length: int) -> list[int]:
    rng = random.Random(tag)
    w0, _ = P.header_words(dst_node=dst, src_node=0, type=CONTROL, length=length, direct=direct)
    return [w0, tag] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def field(w0: int, name: str) -> int:
    f = P.HEADER_FIELD[name]
    return (w0 >> f.offset) & ((1 << f.width) - 1)


@pytest.mark.parametrize("dw,nic_clock", [(128, False), pytest.param(256, False, marks=pytest.mark.slow),
                                          pytest.param(128, True, marks=pytest.mark.slow)])
def test_lane_every_port(dw, nic_clock):
    """A link-local CONTROL packet sent on each port of each NIC (3 and 5 words: the
    last beat partly used) crosses the wide lanes (packer in LaneTx, FIFO and unpacker
    in LaneRx) and arrives at the other NIC's management port word for word, ``direct``
    = the port it came in on, never through a router buffer. ``nic_clock``: the lanes
    in nic, their 64-bit streams crossing to and from the management port in sys
    (twice as fast)."""
    top = Pair(mtu=64, link_dw=dw, nic_clock=nic_clock)
    sent = {"a": [], "b": []}
    got = {"a": [], "b": []}
    res = {}

    def main():
        yield from wait_links([top.a, top.b], 6000 if nic_clock else 3000)
        for name, nic in (("a", top.a), ("b", top.b)):
            cpu = MgmtCsr(nic)
            for p in (XP, XM):
                pk = ctl_packet(p, dst=0xABC, tag=(ord(name) << 8) | p, length=8 * (2 * p - 1))
                sent[name].append((p, pk))
                yield from cpu.send(pk)
        for name, nic in (("b", top.b), ("a", top.a)):
            cpu = MgmtCsr(nic)
            for _ in (XP, XM):
                got[name].append((yield from cpu.recv()))
        res["routed"] = [(yield top.a.router.tx_packets[0]), (yield top.b.router.tx_packets[0])]

    run_simulation(top, main(), **(NIC_CLOCKS if nic_clock else {}))
    for src, dst in (("a", "b"), ("b", "a")):
        by_tag = {w[1]: w for w in got[dst]}
        assert len(by_tag) == 2
        for p, pk in sent[src]:
            w = by_tag[pk[1]]
            assert field(w[0], "direct") == PEER[p]
            clear = ~(7 << P.HEADER_FIELD["direct"].offset)
            assert w[0] & clear == pk[0] & clear and w[1:] == pk[1:]
    assert res["routed"] == [0, 0]   # nothing went through a router


@pytest.mark.parametrize("dw,nic_clock", [(128, False), pytest.param(256, False, marks=pytest.mark.slow),
                                          pytest.param(128, True, marks=pytest.mark.slow)])
def test_mgmt_evacuated_into_down_link_input(dw, nic_clock):
    """Node 0's link XM is taken DOWN and its management port's tx_target set to XM: two
    routed CONTROL packets (5 and 10 words: 3 and 5 beats at 128 bits, 2 and 3 at 256,
    last beats partly used) are packed into beats, enter the router through XM's input
    buffer (EvacInput; its room check by the packet's beats) and are routed out of XP
    to node 1, whose management port gets them word for word. ``nic_clock``: the
    packets' beats and their ``mgmt_words`` cross from the packers (sys) to the
    EvacInput (nic, half as fast); the CSRs cross too."""
    top = Pair(mtu=64, link_dw=dw, nic_clock=nic_clock)
    gap = 8 if nic_clock else 0
    ev = top.a.mgmt_tx.evac[XM - 1]
    pks = [ctl_packet(0, dst=1, tag=0x51, length=24), ctl_packet(0, dst=1, tag=0x52, length=64)]
    got, starts, beats = [], [], [0]
    res = {}

    @passive
    def watch():
        was = 0
        while True:
            yield
            act = yield ev.active
            if act and not was:
                starts.append((yield ev.mgmt_words))
            was = act
            if (yield ev.source.valid) and (yield ev.source.ready) and act:
                beats[0] += 1

    def main():
        yield from set_route(top.a, 1, XP, gap)
        yield from set_route(top.b, 1, P.Port.LOCAL, gap)
        yield from wait_links([top.a, top.b], 6000 if nic_clock else 3000)
        link = top.a.links[XM - 1]
        yield link._take_down.re.eq(1)
        yield
        yield link._take_down.re.eq(0)
        yield
        for _ in range(gap):
            yield
        res["state"] = yield link.link_state
        yield top.a.mgmt._tx_target.storage.eq(XM)
        cpu = MgmtCsr(top.a)
        for pk in pks:
            yield from cpu.send(pk)
        rx = MgmtCsr(top.b)
        for _ in pks:
            got.append((yield from rx.recv()))
        res["tx_xp"] = yield top.a.router.tx_packets[XP]
        res["dropped"] = yield top.a.mgmt._tx_dropped.status

    if nic_clock:
        run_simulation(top, {"sys": [main()], "nic": [watch()]}, **NIC_CLOCKS)
    else:
        run_simulation(top, [main(), watch()])
    assert res["state"] == LK.LinkState.DOWN
    assert got == pks
    assert starts == [P.packet_beats(24, dw), P.packet_beats(64, dw)] == {128: [3, 5], 256: [2, 3]}[dw]
    assert beats[0] == sum(starts) and res["tx_xp"] == 2 and res["dropped"] == 0


def test_barrier_128():
    """A two-node barrier (combining tree: node 1 arrives at node 0, which releases it)
    over 128-bit links: both nodes' contexts enter through their BARRIER doorbells and
    both complete exactly once; the barrier packets (header only: one beat) went
    through the packer, the 128-bit routers and links, and the unpacker."""
    top = Pair(mtu=64)
    ha = MigenHost.for_nic(top.a, read_latency=3)
    hb = MigenHost.for_nic(top.b, read_latency=3)
    done = {"a": 0, "b": 0}
    res = {}

    @passive
    def watch():
        while True:
            yield
            for name, nic in (("a", top.a), ("b", top.b)):
                if (yield nic.barrier.done):
                    done[name] += 1

    def main():
        yield top.b.node.storage.eq(1)
        for nic in (top.a, top.b):
            yield nic.barrier._nodes.storage.eq(2)
        yield from set_route(top.a, 1, XP)
        yield from set_route(top.a, 0, P.Port.LOCAL)
        yield from set_route(top.b, 0, XM)
        yield from set_route(top.b, 1, P.Port.LOCAL)
        yield from open_ctx(top.a, ha)
        yield from open_ctx(top.b, hb)
        yield from wait_links([top.a, top.b])
        yield from hb.write32(P.CtxReg.BARRIER, 0)
        yield from ha.write32(P.CtxReg.BARRIER, 0)
        for _ in range(300):
            if done["a"] and done["b"]:
                break
            yield
        for _ in range(20):
            yield
        res["pk"] = [(yield top.a.router.tx_packets[XP]), (yield top.b.router.tx_packets[XM])]

    run_simulation(top, [main(), ha.generator(), hb.generator(), watch()])
    assert ha.errors == [] and hb.errors == []
    assert done == {"a": 1, "b": 1}
    assert res["pk"] == [1, 1]      # one release 0 -> 1, one arrive 1 -> 0


class Through(Module):
    """A wide NicCore (node 1) between two bare 128-bit link layers: ``l0`` (node 0's
    end of the cable into its port XM, driven by the test at one beat per cycle) and
    ``l2`` (node 2's end of the cable out of its port XP, taking and freeing every beat
    at once)."""

    def __init__(self, mtu: int) -> None:
        self.nic = NicCore(n_links=2, n_ctx=2, mtu=mtu, link_dw=DW, table_nodes=16)
        self.l0 = LinkLayer(mtu=mtu, dw=DW)
        self.l2 = LinkLayer(mtu=mtu, dw=DW)
        self.submodules += self.nic, self.l0, self.l2
        for far, port, seed in ((self.l0, XM, 21), (self.l2, XP, 23)):
            out, back = SimPhy(delay=4, seed=seed, dw=DW), SimPhy(delay=4, seed=seed + 1, dw=DW)
            self.submodules += out, back
            tx, rx = self.nic.phys[port - 1]
            self.comb += [
                far.phy_tx.connect(out.sink), out.source.connect(rx),
                tx.connect(back.sink), back.source.connect(far.phy_rx),
                far.rx_source.ready.eq(1),
                far.rx_routed.eq(far.rx_source.valid),    # every frame "into the buffer" ...
                far.drained.eq(far.rx_source.valid),      # ... and out of it at once: credits
            ]


@pytest.mark.slow
def test_through_stream_128_link_limited():
    """Through traffic: 4 MTU (1024-byte) packets enter node 1's NicCore on XM at one
    beat per cycle and leave on XP (router, LaneRx/LaneTx, link layers at 128 bits; no
    converter on this path). At node 2 every packet arrives once, in order, intact, and
    back to back: one packet per ``frame_beats`` cycles, the framing's bound (0.9552 of
    the link's 16 bytes per cycle): the link-limited figure."""
    mtu, npk = 1024, 4
    top = Through(mtu)
    rng = random.Random(5)
    words = [wide.make_packet(rng, mtu, tag=i, dst=2) for i in range(npk)]
    pkts = [wide.make_beats(w, DW) for w in words]
    got, t_last = [], []

    @passive
    def recv():
        src = top.l2.rx_source
        cur, n = [], 0
        while True:
            yield
            n += 1
            if (yield src.valid):
                cur.append((yield src.data))
                if (yield src.last):
                    assert not (yield src.error)
                    got.append(cur)
                    t_last.append(n)
                    cur = []

    def main():
        yield top.nic.node.storage.eq(1)
        yield from set_route(top.nic, 2, XP)
        for _ in range(3000):
            ups = [(yield top.l0.up), (yield top.l2.up)]
            for link in top.nic.links:
                ups.append((yield link.up))
            if all(ups):
                break
            yield
        yield from wide.drive_packets(top.l0.tx_sink, pkts)
        for _ in range(200):
            if len(got) == npk:
                break
            yield

    run_simulation(top, [main(), recv()])
    wide.check_stream(words, got, DW)
    gaps = {b - a for a, b in zip(t_last, t_last[1:])}
    frac = (npk - 1) * mtu / (t_last[-1] - t_last[0]) / (DW // 8)
    print(f"through stream 128: payload fraction {frac:.4f}, cycles per packet {sorted(gaps)}")
    assert gaps == {LK.frame_beats(mtu, DW)}
    assert frac == pytest.approx(LK.link_efficiency(mtu, DW)) and frac >= 0.95


def test_injection_room_checks_in_beats():
    """One NicCore at 128 bits whose links never come up: routed CONTROL packets from
    the management port (10 words: 5 beats) pile up in the injection FIFO (128 beats at
    MTU 64) until its 16 queue entries are used. Every cycle the gates' room checks are
    the FIFO's free beats against beats: host/barrier packets ``packet_beats(mtu) +
    mgmt_reserve_beats + PACK_HELD_BEATS`` (5 + 32 + 1), management packets
    ``mgmt_reserve_beats + PACK_HELD_BEATS`` (33), including at free levels where the
    same checks in words (10 + 64, 64) would say no. Nothing is lost or aborted."""
    from paranic.hw.niccore import INJECT_PACKETS, MGMT_RESERVE_WORDS
    from paranic.hw.width import PACK_HELD_BEATS

    mtu, npk = 64, 18
    nic = NicCore(n_links=2, n_ctx=2, mtu=mtu, link_dw=DW, table_nodes=16)
    free = nic.router.inject.free
    host_need = P.packet_beats(mtu, DW) + mgmt_reserve_beats(DW) + PACK_HELD_BEATS
    mgmt_need = mgmt_reserve_beats(DW) + PACK_HELD_BEATS
    seen, bad = set(), []
    res = {}

    @passive
    def watch():
        while True:
            yield
            f = yield free
            room, ok = (yield nic.injection.room), (yield nic.mgmt_start.ok)
            seen.add(f)
            if room != (f >= host_need) or ok != (f >= mgmt_need):
                bad.append((f, room, ok))

    def main():
        yield from set_route(nic, 1, XP)
        cpu = MgmtCsr(nic)
        for i in range(npk):
            while (yield nic.mgmt._tx_free.status) < P.packet_words(mtu):
                yield
            yield from cpu.send(ctl_packet(0, dst=1, tag=i, length=mtu))
        for _ in range(40):
            yield
        res["packets"] = yield nic.router.inject.packets
        res["aborted"] = yield nic.router.err_aborted
        res["waiting"] = yield nic.mgmt.txf.packets
        res["dropped"] = yield nic.mgmt._tx_dropped.status

    run_simulation(nic, [main(), watch()])
    assert nic.router.inject.depth_words == 128 and (host_need, mgmt_need) == (38, 33)
    assert bad == []
    words_host = P.packet_words(mtu) + MGMT_RESERVE_WORDS
    assert any(host_need <= f < words_host for f in seen)   # where beats and words differ
    assert any(f >= words_host for f in seen) and min(seen) < mgmt_need
    assert res["packets"] == INJECT_PACKETS
    assert res["aborted"] == 0 and res["dropped"] == 0 and res["packets"] + res["waiting"] == npk
