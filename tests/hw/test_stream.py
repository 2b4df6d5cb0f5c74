"""Migen tests of the streaming rates of the host interface's DMA write path.

Cycle counts, not wall time: the DMA writer loses no cycle between commands whose
first beat comes with them, the receive engine takes ``packet_words + 2`` cycles per
packet, and a NicCore's link buffers hold enough packet
slots for a one-hop stream (the end-to-end rate is checked by
``tests/cocotb/host/test_stream_cocotb.py``).
"""

from __future__ import annotations

import random

import pytest
from migen import Module
from migen.sim import run_simulation

from model.ctxseq import MigenPorts
from model.pcie_migen import MigenHost
from paranic.spec import protocol as P
from paranic.hw.dma import DmaWriter
from paranic.hw.host import HostInterface
from paranic.spec.link import frame_words
from paranic.hw.niccore import MGMT_RESERVE_WORDS, NicCore


def _writer_host(dut: DmaWriter, max_payload: int, base: int, size: int, **kw) -> MigenHost:
    """The host model taking a DMA writer's requests into ``size`` bytes at ``base``."""
    host = MigenHost(wr_source=dut.source, max_payload_bytes=max_payload, **kw)
    host.mem.add(base, size, "commands", dma_write=True)
    return host


def _run(dut, host: MigenHost, *generators) -> list:
    """Simulate; the host saw no PCIe violation and no stray write. Returns its write
    requests (:class:`model.pcie.DmaWrite`)."""
    run_simulation(dut, [*generators, host.generator()])
    assert host.errors == [], "\n".join(host.errors[:20])
    return host.write_requests


@pytest.mark.parametrize("max_payload", [64, 256])
def test_dma_writer_commands_back_to_back(max_payload):
    """Commands presented with their first beat: one beat every cycle, across command
    and request boundaries, and the requests split and addressed as before."""
    rng = random.Random(max_payload)
    dut = DmaWriter(64, max_payload)
    cmds = [(rng.randrange(0, 1 << 20) * 8 + (1 << 40), rng.choice([1, 2, 3, 17, 40, 130]))
            for _ in range(20)]
    beats_in = [((adr << 8) + i) for adr, n in cmds for i in range(n)]
    host = _writer_host(dut, max_payload, 1 << 40, 1 << 24)

    def cmd_feed():
        for adr, n in cmds:
            yield dut.cmd.valid.eq(1)
            yield dut.cmd.adr.eq(adr)
            yield dut.cmd.words.eq(n)
            yield
            while not (yield dut.cmd.ready):
                yield
        yield dut.cmd.valid.eq(0)

    def data_feed():
        for w in beats_in:
            yield dut.data.valid.eq(1)
            yield dut.data.data.eq(w)
            yield
            while not (yield dut.data.ready):
                yield
        yield dut.data.valid.eq(0)
        for _ in range(5):
            yield

    got = _run(dut, host, cmd_feed(), data_feed())
    assert sum(len(w.words) for w in got) == len(beats_in)
    assert got[-1].cycle - got[0].first_cycle == len(beats_in) - 1, "idle cycles between beats"
    pos = 0
    for adr, n in cmds:
        a, left = adr, n
        while left:
            radr, nbytes, data = got[pos].adr, got[pos].nbytes, got[pos].words
            pos += 1
            assert radr == a and nbytes == len(data) * 8 <= max_payload
            assert radr // max_payload == (radr + len(data) * 8 - 1) // max_payload
            assert data == [(adr << 8) + (a - adr) // 8 + i for i in range(len(data))]
            a += len(data) * 8
            left -= len(data)
    assert pos == len(got)


def test_dma_writer_command_alone_then_data():
    """A command taken without data (the status writer's way) still works, back-pressure too."""
    dut = DmaWriter(64, 256)
    host = _writer_host(dut, 256, 0, 0x4000, wr_ready=lambda k: k % 3 != 1)

    def feed():
        for adr, n in ((0x1000, 3), (0x2008, 1), (0x30F8, 2)):
            yield dut.cmd.valid.eq(1)
            yield dut.cmd.adr.eq(adr)
            yield dut.cmd.words.eq(n)
            yield
            while not (yield dut.cmd.ready):
                yield
            yield dut.cmd.valid.eq(0)
            for i in range(n):
                yield dut.data.valid.eq(1)
                yield dut.data.data.eq(adr + i)
                yield
                while not (yield dut.data.ready):
                    yield
            yield dut.data.valid.eq(0)
        # a command of 0 words is taken and ignored
        yield dut.cmd.valid.eq(1)
        yield dut.cmd.words.eq(0)
        yield
        assert (yield dut.cmd.ready)
        yield dut.cmd.valid.eq(0)
        for _ in range(8):
            yield
        assert not (yield dut.busy)

    got = _run(dut, host, feed())
    assert [(w.adr, w.nbytes // 4, w.words) for w in got] == [
        (0x1000, 6, [0x1000, 0x1001, 0x1002]), (0x2008, 2, [0x2008]),
        (0x30F8, 2, [0x30F8]), (0x3100, 2, [0x30F9])]  # split at 256 bytes


@pytest.mark.parametrize("mtu,npk", [(64, 24), (P.DEFAULT_MTU, 6)])
def test_rx_engine_packet_train(mtu, npk):
    """Back-to-back packets into the receive engine, DMA writes always accepted: every
    packet takes exactly packet_words + 2 cycles (slot beats, valid word, one check),
    so MTU packets (132 cycles) keep up with the link's frame rate; slots intact."""
    dut = HostInterface(n_ctx=2, mtu=mtu)
    base = 0x1_0000_0000
    sb, vo = P.rx_slot_bytes(mtu), P.rx_valid_offset(mtu)
    pw = P.packet_words(mtu)
    # only the write port: the receive engine alone, DMA writes always accepted
    host = MigenHost(wr_source=dut.dma_wr.source)
    host.mem.add(base, 64 * sb, "ctx1 rx ring", dma_write=True)
    taken: list[int] = []   # cycle of each packet's header word leaving rx_sink
    packets = []
    for i in range(npk):
        w0, w1 = P.header_words(dst_node=1, src_node=2, dst_ctx=1, length=mtu, tag=i)
        packets.append([w0, w1] + [(i << 16) | k for k in range(P.payload_words(mtu))])

    def main():
        assert (yield from MigenPorts(dut).run("open", 1, rx_base=base, rx_log2=6)) == 0
        yield
        ep = dut.rx_sink
        for words in packets:
            for i, w in enumerate(words):
                yield ep.valid.eq(1)
                yield ep.data.eq(w)
                yield ep.first.eq(i == 0)
                yield ep.last.eq(i == len(words) - 1)
                yield
                while not (yield ep.ready):
                    yield
                if i == 0:
                    taken.append(host.cycle - 1)
        yield ep.valid.eq(0)
        for _ in range(40):
            yield

    got = _run(dut, host, main())
    mem = {w.adr + 8 * k: word for w in got for k, word in enumerate(w.words)}
    gaps = [b - a for a, b in zip(taken, taken[1:])]
    assert gaps == [pw + 2] * (npk - 1), gaps
    for i, words in enumerate(packets):
        slot = base + i * sb
        assert [mem.get(slot + 8 * k) for k in range(pw)] == words
        assert mem[slot + vo] == i + 1
    # the valid word of each packet is written after its slot, the next slot after it
    order = [w.adr for w in got]
    for i in range(npk - 1):
        assert order.index(base + i * sb + vo) < order.index(base + (i + 1) * sb)
    # npk*(pw+1) beats, one check cycle each
    assert got[-1].cycle - got[0].first_cycle == npk * (pw + 2) - 2
    assert frame_words(P.DEFAULT_MTU) == P.packet_words(P.DEFAULT_MTU) + 2


def test_niccore_link_buffers_hold_a_stream():
    """A packet entering a ring needs two free packet slots in the next router: a
    NicCore's link buffers must have at least four (the router's own default has 3,
    which holds a one-hop stream to 2 packets in flight: 145 cycles per MTU packet)."""
    for mtu in (256, P.DEFAULT_MTU):
        nic = NicCore(n_links=2, n_ctx=2, mtu=mtu)
        r = nic.router
        assert r.slots_per_buffer >= 4, (mtu, r.buf_words)
        # the ejection FIFO keeps the router's default (two packets); the injection FIFO
        # holds two packets beside the management port's reserve (NicCore, "Injection")
        assert r.eject.depth_words < r.buf_words
        assert r.inject.depth_words >= 2 * P.packet_words(mtu) + MGMT_RESERVE_WORDS
    assert isinstance(nic, Module)


def test_packet_arbiter_grants_at_once_and_keeps_packets_whole():
    """hw/host.py's PacketArbiter (the DMA write port's): an idle output is granted in
    the cycle a master offers (LiteX's packet.Arbiter: a cycle later when the other master
    was served last); packets never interleave, an offered beat is never withdrawn or
    changed, and each master's packets arrive whole and in order."""
    from litex.soc.interconnect import stream
    from migen import Module
    from paranic.hw.host import PacketArbiter

    lay = [("data", 16)]

    class Top(Module):
        def __init__(self):
            self.m = [stream.Endpoint(lay) for _ in range(2)]
            self.s = stream.Endpoint(lay)
            self.submodules.arb = PacketArbiter(self.m, self.s)

    top = Top()
    rng = random.Random(5)
    got, offered = [], []
    plan = {0: [(0 << 8) | i for i in range(6)], 1: [(1 << 8) | i for i in range(6)]}
    cyc = {"n": 0}

    def master(i, busy_start):
        ep = top.m[i]
        for _ in range(busy_start):
            yield
        for p in plan[i]:
            for k in range(3):
                yield ep.valid.eq(1)
                yield ep.data.eq((p << 2) | k)
                yield ep.first.eq(k == 0)
                yield ep.last.eq(k == 2)
                yield
                while not ((yield ep.valid) and (yield ep.ready)):
                    yield
            yield ep.valid.eq(0)
            if busy_start:
                for _ in range(rng.randrange(3)):
                    yield

    def slave():
        s = top.s
        prev = None
        for n in range(300):
            r = rng.random() < 0.7 or n < 12
            yield s.ready.eq(int(r))
            yield
            if (yield s.valid):
                d = yield s.data
                if prev is not None and not prev[1]:
                    assert d == prev[0], "an offered beat changed before it was taken"
                if n < 12 and "first" not in cyc:
                    cyc["first"] = n
                offered.append(n)
                took = (yield s.ready)
                prev = (d, took)
                if took:
                    got.append(d)
            else:
                assert prev is None or prev[1], "an offered beat was withdrawn"
                prev = None

    # master 1 alone first (granted at once although master 0 is the arbiter's reset
    # choice), then both
    run_simulation(top, [master(1, 0), master(0, 40), slave()])
    words = [d for d in got]
    pkts = [words[i:i + 3] for i in range(0, len(words), 3)]
    assert len(pkts) == 12 and all([w & 3 for w in p] == [0, 1, 2] and len({w >> 2 for w in p}) == 1
                                    for p in pkts)
    assert cyc["first"] == 0            # master 1's first beat offered in the first cycle
    for i in (0, 1):
        assert [p[0] >> 2 for p in pkts if (p[0] >> 10) == i] == plan[i]
