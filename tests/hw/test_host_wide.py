"""The host interface's 64-bit MMIO path (Migen simulator): a 64-bit store is one bus beat,
``PIO_SEND`` (store+doorbell) sends exactly the staged packet, refuses a packet whose words
were not staged, works split in two 32-bit writes, and the PIO engine's first beat leaves
the cycle after it reads the header.

The bus master here is the test's own 64-bit Wishbone driver (the host model's MMIO
master is 32-bit); the DMA side is the usual host model (``model.pcie_migen``).
"""

from __future__ import annotations

import pytest
from migen.sim import passive, run_simulation

from model.ctxseq import MigenPorts
from model.pcie_migen import MigenHost
from paranic.bench.wide import drive_packets
from paranic.hw.host import HostInterface
from paranic.spec import protocol as P

R = P.CtxReg
WIN = P.PIO_WINDOW_OFFSET
SOMEOM = int(P.Flags.SOM | P.Flags.EOM)
#: Cycles from the store+doorbell's write to the packet's first beat on tx_source: the
#: doorbell's state update; the header comes from the PIO engine's bypass register (the
#: PIO_SEND word), not from the buffer (2 when it was read back from the buffer first).
DB_TO_FIRST_BEAT = 1


class Wb64:
    """A 64-bit Wishbone master on the test's thread; counts the beats it issues and
    the cycle each access is acknowledged in."""

    def __init__(self, bus) -> None:
        self.bus = bus
        self.beats = 0
        self.cycle = 0
        self.last_ack = 0

    def access(self, byte_adr: int, data: int = 0, sel: int = 0xFF, we: int = 1):
        b = self.bus
        assert byte_adr % 8 == 0
        yield b.adr.eq(byte_adr >> 3)
        yield b.dat_w.eq(data)
        yield b.sel.eq(sel)
        yield b.we.eq(we)
        yield b.cyc.eq(1)
        yield b.stb.eq(1)
        yield
        self.cycle += 1
        while not (yield b.ack):
            yield
            self.cycle += 1
        v = yield b.dat_r
        self.beats += 1
        self.last_ack = self.cycle
        yield b.cyc.eq(0)
        yield b.stb.eq(0)
        yield
        self.cycle += 1
        return v

    def w64(self, adr, v):
        yield from self.access(adr, v, 0xFF)

    def w32(self, adr, v):
        """A 32-bit store: one beat on its half."""
        hi = adr % 8 == 4
        yield from self.access(adr & ~7, (v << 32) if hi else v, 0xF0 if hi else 0x0F)

    def r32(self, adr):
        v = yield from self.access(adr & ~7, 0, 0xF0 if adr % 8 else 0x0F, we=0)
        return (v >> 32) if adr % 8 else v & 0xFFFFFFFF


class Net:
    """Takes packets from ``tx_source`` (always ready), with the bus master's cycle of
    every beat."""

    def __init__(self, dut, wb: Wb64) -> None:
        self.dut, self.wb = dut, wb
        self.packets: list[list[int]] = []
        self.cycles: list[list[int]] = []

    @passive
    def generator(self):
        src = self.dut.tx_source
        cur, cyc = [], []
        yield src.ready.eq(1)
        while True:
            yield
            if (yield src.valid):
                cur.append((yield src.data))
                cyc.append(self.wb.cycle)
                if (yield src.last):
                    self.packets.append(cur)
                    self.cycles.append(cyc)
                    cur, cyc = [], []


@passive
def window_beats(dut, out: list):
    """Every write into the PIO buffer: (word address, byte enables)."""
    port = dut.pio_wport
    while True:
        yield
        we = yield port.we
        if we:
            out.append(((yield port.adr), we))


def setup(n_ctx=2, mtu=64, bus_width=64):
    """The DUT and the host model; at 64 bits the model does DMA only (the test's
    :class:`Wb64` is the bus master), at 32 it is the bus master too."""
    dut = HostInterface(n_ctx=n_ctx, mtu=mtu, bus_width=bus_width)
    if bus_width == 64:
        h = MigenHost(None, dut.dma_rd.source, dut.dma_rd.sink, dut.dma_wr.source, dut.irq, read_latency=3)
    else:
        h = MigenHost.for_nic(dut, read_latency=3)
    m = h.mem
    m.add(0x10000, 4 * P.rx_slot_bytes(mtu), "rx", dma_write=True)
    m.add(0x20000, 4 * P.TX_DESC_BYTES, "tx", dma_read=True)
    m.add(0x30000, P.STATUS_BLOCK_BYTES, "status", dma_write=True)
    m.add(0x40000, 0x1000, "window", dma_read=True)
    return dut, h


def open_ctx(dut, ctx=0):
    status = yield from MigenPorts(dut).run("open", ctx, rx_base=0x10000, rx_log2=2, tx_base=0x20000,
                                            tx_log2=2, status_addr=0x30000, win_base=0x40000,
                                            win_size=0x1000)
    assert status == 0, status


def words(header: bytes, payload: bytes) -> list[int]:
    return P.bytes_to_words(header + payload)


def test_64bit_store_is_one_beat_and_pio_send_sends_the_staged_packet():
    """Payload and tag words as 64-bit stores, then header word 0 through PIO_SEND: each
    store is one bus beat and one buffer write with all 8 byte enables, and the packet
    leaves exactly as staged (stamped); pio_done counts it, no error."""
    dut, h = setup()
    wb = Wb64(dut.bus)
    net = Net(dut, wb)
    beats: list = []
    res = {}
    payload = bytes(range(1, 20))          # 19 bytes: 3 payload words, the last one partial

    def main():
        yield dut.node_id.eq(0x42)
        yield from open_ctx(dut)
        w = words(P.pack_header(dst_node=5, dst_ctx=1, length=len(payload), tag=0x77), payload)
        b0 = wb.beats
        del beats[:]
        for i in range(len(w) - 1, 0, -1):          # payload first, the tag last of them
            yield from wb.w64(WIN + 8 * i, w[i])
        yield from wb.w64(R.PIO_SEND, w[0])         # header word 0 + doorbell: one store
        res["bus_beats"] = wb.beats - b0
        res["buf_writes"] = list(beats)
        for _ in range(30):
            yield
        res["pio_done"] = yield from wb.r32(R.PIO_DONE)
        res["errors"] = yield from wb.r32(R.ERRORS)

    run_simulation(dut, [main(), h.generator(), net.generator(), window_beats(dut, beats)])
    assert h.errors == []
    assert res["bus_beats"] == 5                          # 5 words, 5 beats (was 10 + doorbell)
    assert [we for _, we in res["buf_writes"]] == [0xFF] * 5
    assert sorted(a for a, _ in res["buf_writes"]) == list(range(5))
    assert len(net.packets) == 1
    p = net.packets[0]
    hd = P.unpack_header(P.words_to_bytes(p[:2], 16))
    assert hd["src_node"] == 0x42 and hd["dst_node"] == 5 and hd["length"] == 19 and hd["tag"] == 0x77
    assert hd["flags"] == 0
    assert P.words_to_bytes(p[2:], 19) == payload and len(p) == 5
    assert (res["pio_done"], res["errors"]) == (1, 0)


def test_pio_send_with_unstaged_words_is_refused():
    """A PIO_SEND whose header needs words not written since the last packet is refused
    as a doorbell is (nothing sent, pio_done and errors, err_length); the next, fully
    staged packet goes out."""
    dut, h = setup()
    wb = Wb64(dut.bus)
    net = Net(dut, wb)
    res = {}

    def main():
        yield from open_ctx(dut)
        hdr = words(P.pack_header(dst_node=1, length=40, tag=1), b"")
        yield from wb.w64(WIN + 8, hdr[1])
        yield from wb.w64(R.PIO_SEND, hdr[0])          # 40 bytes claimed, none staged
        for _ in range(10):
            yield
        res["len"] = yield dut.counters["err_length"]
        w = words(P.pack_header(dst_node=1, length=8, tag=2), b"ABCDEFGH")
        yield from wb.w64(WIN + 16, w[2])
        yield from wb.w64(WIN + 8, w[1])
        yield from wb.w64(R.PIO_SEND, w[0])
        for _ in range(20):
            yield
        res["pio_done"] = yield from wb.r32(R.PIO_DONE)
        res["errors"] = yield from wb.r32(R.ERRORS)

    run_simulation(dut, [main(), h.generator(), net.generator()])
    assert res["len"] == 1
    assert [p[1] for p in net.packets] == [2]
    assert P.words_to_bytes(net.packets[0][2:], 8) == b"ABCDEFGH"
    assert (res["pio_done"], res["errors"]) == (2, 1)


def test_pio_send_split_and_busy():
    """PIO_SEND by two 32-bit writes (a 32-bit path): the low half only stores, the high
    half rings. A PIO_SEND while the window is busy is refused at once and spoils the
    window (like any window write while busy): the next doorbell is refused too."""
    dut, host = setup(bus_width=32)
    net = Net(dut, None)
    res = {}

    def main():
        yield from open_ctx(dut)
        w = words(P.pack_header(dst_node=3, length=8, tag=5), b"12345678")
        yield from host.write64(WIN + 16, w[2])
        yield from host.write64(WIN + 8, w[1])
        yield from host.write32(R.PIO_SEND, w[0] & 0xFFFFFFFF)
        for _ in range(10):
            yield
        res["sent_after_low"] = len(net.packets)
        yield from host.write32(R.PIO_SEND + 4, w[0] >> 32)
        for _ in range(20):
            yield
        res["sent_after_high"] = len(net.packets)
        # busy: stall the network, send, then PIO_SEND again while the first is pending
        yield dut.tx_source.ready.eq(0)
        net.hold = True
        yield from host.write64(WIN + 8, w[1])
        yield from host.write64(WIN + 16, w[2])
        yield from host.write64(R.PIO_SEND, w[0])
        yield from host.write64(R.PIO_SEND, w[0])     # busy: refused, spoils
        res["pio_err"] = yield dut.counters["err_pio"]
        for _ in range(20):
            yield
        res["busy_done"] = yield from host.read32(R.PIO_DONE)
        yield dut.tx_source.ready.eq(1)
        net.hold = False
        for _ in range(20):
            yield
        yield from host.write64(R.PIO_SEND, w[0])     # spoiled window: refused
        for _ in range(20):
            yield
        res["pio_done"] = yield from host.read32(R.PIO_DONE)
        res["errors"] = yield from host.read32(R.ERRORS)

    @passive
    def net_gen():
        src = dut.tx_source
        cur = []
        net.hold = False
        while True:
            if not net.hold:
                yield src.ready.eq(1)
            yield
            if (yield src.valid) and (yield src.ready):
                cur.append((yield src.data))
                if (yield src.last):
                    net.packets.append(cur)
                    cur = []

    run_simulation(dut, [main(), host.generator(), net_gen()])
    assert res["sent_after_low"] == 0 and res["sent_after_high"] == 1
    assert res["pio_err"] >= 1
    assert res["busy_done"] == 2            # the split packet, and the busy PIO_SEND refused
    assert len(net.packets) == 2 and all(p[1] == 5 for p in net.packets)
    assert (res["pio_done"], res["errors"]) == (4, 2)


def test_doorbell_to_first_beat():
    """The PIO engine: the header's first beat is on tx_source DB_TO_FIRST_BEAT cycles
    after the cycle the store+doorbell's write is presented, with no bubble after it (the
    numbers docs/host-interface.md gives). One monitor samples both at each clock edge."""
    dut, h = setup()
    wb = Wb64(dut.bus)
    ev = {}

    @passive
    def monitor():
        b, src = dut.bus, dut.tx_source
        n = 0
        yield src.ready.eq(1)
        while True:
            yield
            n += 1
            # (a write is acknowledged in the cycle it is presented: its first cycle)
            if ((yield b.cyc) and (yield b.stb) and (yield b.we)
                    and (yield b.adr) == int(R.PIO_SEND) >> 3 and "db" not in ev):
                ev["db"] = n
            if (yield src.valid):
                ev.setdefault("beats", []).append(n)

    def main():
        yield from open_ctx(dut)
        w = words(P.pack_header(dst_node=3, length=8, tag=5), b"12345678")
        yield from wb.w64(WIN + 16, w[2])
        yield from wb.w64(WIN + 8, w[1])
        yield from wb.w64(R.PIO_SEND, w[0])
        for _ in range(20):
            yield

    run_simulation(dut, [main(), h.generator(), monitor()])
    beats = ev["beats"]
    print("doorbell write presented -> first beat:", beats[0] - ev["db"], "cycles")
    assert beats == list(range(beats[0], beats[0] + 3))        # no bubble
    assert beats[0] - ev["db"] == DB_TO_FIRST_BEAT


#: Cycles from a received packet's header on rx_sink to its slot's first DMA write beat:
#: the check cycle. (2 before the DMA write port's arbiter granted an idle port at once:
#: after the status writes of the open, its grant moved to the RX engine a cycle late.)
EJECT_TO_WRITE = 1


def test_ejection_to_dma_write():
    """The RX engine: an idle engine checks the header in the cycle it arrives, so the
    slot's write request leaves EJECT_TO_WRITE cycle(s) later; the packet lands whole
    (header, payload, valid word) in the ring."""
    dut, h = setup()
    ev = {}
    payload = b"ejected!"

    @passive
    def monitor():
        snk, wr = dut.rx_sink, dut.dma_wr.source
        n = 0
        while True:
            yield
            n += 1
            if (yield snk.valid) and "in" not in ev:
                ev["in"] = n
            if (yield wr.valid) and (yield wr.first) and "out" not in ev and "in" in ev:
                ev["out"] = n

    def main():
        yield from open_ctx(dut)
        for _ in range(10):       # let the status writes of the open go
            yield
        snk = dut.rx_sink
        w = words(P.pack_header(dst_node=0, src_node=1, dst_ctx=0, length=len(payload), tag=9), payload)
        yield from drive_packets(snk, [w])
        for _ in range(30):
            yield

    run_simulation(dut, [main(), h.generator(), monitor()])
    assert h.errors == []
    slot = h.mem.read(0x10000, P.rx_slot_bytes(64))
    assert P.unpack_header(slot)["tag"] == 9 and slot[16:24] == payload
    assert int.from_bytes(slot[P.rx_valid_offset(64):][:8], "little") == 1
    print("header on rx_sink -> first DMA write beat:", ev["out"] - ev["in"], "cycles")
    assert ev["out"] - ev["in"] == EJECT_TO_WRITE


def test_bar0_path_one_beat_per_64bit_store():
    """The board's BAR0 path: LitePCIe requests (2-dword MWr = a CPU's 64-bit store) into
    :class:`~paranic.hw.pcie_bar0.Bar0Master` (``wishbone_width=64``) into the 64-bit
    context pages. Each store is one beat on the pages' bus; payload, tag, then PIO_SEND
    send the packet exactly as staged."""
    from types import SimpleNamespace

    from litepcie.common import completion_layout, request_layout
    from litex.soc.interconnect import stream
    from migen import Module, Signal

    from paranic.hw.pcie_bar0 import Bar0Master

    class Top(Module):
        def __init__(self):
            self.submodules.host = host = HostInterface(n_ctx=2, mtu=64, bus_width=64)
            self.port = SimpleNamespace(sink=stream.Endpoint(request_layout(64)),
                                        source=stream.Endpoint(completion_layout(64)))
            self.submodules.bar0 = Bar0Master(self.port, Signal(16), data_width=64, wishbone_width=64)
            self.comb += [self.bar0.wishbone.connect(host.bus), self.port.source.ready.eq(1)]

    top = Top()
    dut = top.host
    h = MigenHost(None, dut.dma_rd.source, dut.dma_rd.sink, dut.dma_wr.source, dut.irq, read_latency=3)
    for base, size, name, kw in ((0x10000, 4 * P.rx_slot_bytes(64), "rx", {"dma_write": True}),
                                 (0x20000, 4 * P.TX_DESC_BYTES, "tx", {"dma_read": True}),
                                 (0x30000, P.STATUS_BLOCK_BYTES, "status", {"dma_write": True}),
                                 (0x40000, 0x1000, "window", {"dma_read": True})):
        h.mem.add(base, size, name, **kw)
    beats = []
    packets = []

    def mwr(adr, value):
        s = top.port.sink
        for sig, v in ((s.valid, 1), (s.first, 1), (s.last, 1), (s.we, 1), (s.adr, adr), (s.len, 2),
                       (s.dat, value)):
            yield sig.eq(v)
        yield
        while not (yield s.ready):
            yield
        yield s.valid.eq(0)

    @passive
    def monitor():
        b, src = dut.bus, dut.tx_source
        cur = []
        yield src.ready.eq(1)
        while True:
            yield
            if (yield b.cyc) and (yield b.stb) and (yield b.we) and (yield b.ack):
                beats.append(((yield b.adr), (yield b.sel)))
            if (yield src.valid):
                cur.append((yield src.data))
                if (yield src.last):
                    packets.append(cur)
                    cur = []

    def main():
        yield from open_ctx(dut)
        w = words(P.pack_header(dst_node=2, length=16, tag=0xAB), b"0123456789abcdef")
        for i in (3, 2, 1):
            yield from mwr(WIN + 8 * i, w[i])
        yield from mwr(int(R.PIO_SEND), w[0])
        for _ in range(30):
            yield

    run_simulation(top, [main(), h.generator(), monitor()])
    assert h.errors == []
    assert beats == [((WIN >> 3) + 3, 0xFF), ((WIN >> 3) + 2, 0xFF), ((WIN >> 3) + 1, 0xFF),
                     (int(R.PIO_SEND) >> 3, 0xFF)]
    assert len(packets) == 1 and P.words_to_bytes(packets[0][2:], 16) == b"0123456789abcdef"
    assert packets[0][1] == 0xAB


def test_header_bypass_never_stale():
    """The PIO engine's header bypass (the last whole-word PIO_SEND's word): two contexts'
    PIO_SENDs back to back (the second overwrites the bypass while the first is sent),
    then a packet sent the old way (window word 0 + PIO_DOORBELL) and one by PIO_SEND
    as two 32-bit halves: each packet leaves with its own header, never a bypassed
    one of another packet."""
    dut, h = setup()
    wb = Wb64(dut.bus)
    net = Net(dut, wb)
    res = {}

    def pkt(dst, tag, pay):
        return words(P.pack_header(dst_node=dst, length=8, tag=tag), pay)

    def main():
        yield from open_ctx(dut, 0)
        yield from open_ctx(dut, 1)
        page1 = P.CTX_PAGE_BYTES
        a, b = pkt(3, 0xA, b"AAAAAAAA"), pkt(4, 0xB, b"BBBBBBBB")
        for base, w in ((0, a), (page1, b)):
            yield from wb.w64(base + WIN + 16, w[2])
            yield from wb.w64(base + WIN + 8, w[1])
        yield from wb.w64(R.PIO_SEND, a[0])
        yield from wb.w64(page1 + R.PIO_SEND, b[0])
        for _ in range(20):
            yield
        c = pkt(5, 0xC, b"CCCCCCCC")                  # the old way, ctx 0
        for i in (2, 1, 0):
            yield from wb.w64(WIN + 8 * i, c[i])
        yield from wb.w32(R.PIO_DOORBELL, 0)
        for _ in range(20):
            yield
        d = pkt(6, 0xD, b"DDDDDDDD")                  # PIO_SEND as two halves, ctx 1
        yield from wb.w64(page1 + WIN + 16, d[2])
        yield from wb.w64(page1 + WIN + 8, d[1])
        yield from wb.w32(page1 + R.PIO_SEND, d[0] & 0xFFFFFFFF)
        yield from wb.w32(page1 + R.PIO_SEND + 4, d[0] >> 32)
        for _ in range(20):
            yield
        res["errors"] = []
        for base in (0, page1):
            res["errors"].append((yield from wb.r32(base + R.ERRORS)))

    run_simulation(dut, [main(), h.generator(), net.generator()])
    assert h.errors == [] and res["errors"] == [0, 0]
    got = [(P.unpack_header(P.words_to_bytes(p[:2], 16)), P.words_to_bytes(p[2:], 8)) for p in net.packets]
    assert [(x["dst_node"], x["tag"], x["src_ctx"], pay) for x, pay in got] == [
        (3, 0xA, 0, b"AAAAAAAA"), (4, 0xB, 1, b"BBBBBBBB"), (5, 0xC, 0, b"CCCCCCCC"),
        (6, 0xD, 1, b"DDDDDDDD")]
