"""Migen unit tests of the host interface's pieces (paranic.hw.host*, paranic.hw.dma).

The cocotb bench (tests/cocotb/host) runs the whole HostInterface through its host
software; these tests check the small pieces directly: register decode, header
stamping, descriptor checks, RX slot addresses, the DMA write splitter, the read
realigner, malformed received packets, completion faults and the CSR map. Both face
the same host model (``tests/model/pcie.py``, here through ``model.pcie_migen``), which
also checks every DMA request against the PCIe rules and the memory the driver gave
the NIC.
"""

from __future__ import annotations

import random

import pytest
from migen.sim import passive, run_simulation

from model.ctxseq import MigenPorts
from model.pcie_migen import MigenHost
from paranic.spec import protocol as P
from paranic.hw.dma import DmaWriter, ReadRealigner
from paranic.hw.host import COUNTERS, HostInterface
from paranic.spec.protocol import CTX_STATE_BITS

R = P.CtxReg
SOMEOM = int(P.Flags.SOM | P.Flags.EOM)


# ---------------------------------------------------------------------------------------
# The bench: the host model, the network side, the driver's configuration
# ---------------------------------------------------------------------------------------


def make_host(dut: HostInterface, **kw) -> MigenHost:
    """The host model on ``dut`` with a 3-cycle read latency (short runs)."""
    return MigenHost.for_nic(dut, **{"read_latency": 3, **kw})


class NetSink:
    """The network side of ``tx_source``: takes packets while ``ready``, records their
    words and the cycle (of ``host``) of every beat."""

    def __init__(self, dut: HostInterface, host: MigenHost) -> None:
        self.src = dut.tx_source
        self.host = host
        self.ready = True
        self.packets: list[list[int]] = []
        self.cycles: list[list[int]] = []

    @passive
    def generator(self):
        src = self.src
        cur, cyc = [], []
        while True:
            yield src.ready.eq(int(self.ready))
            yield
            if (yield src.valid) and (yield src.ready):
                cur.append((yield src.data))
                cyc.append(self.host.cycle)
                if (yield src.last):
                    self.packets.append(cur)
                    self.cycles.append(cyc)
                    cur, cyc = [], []


def configure(dut, host, ctx, rx_base=0x10000, rx_log2=2, tx_base=0x20000, tx_log2=2,
              status_addr=0x30000, win_base=0x40000, win_size=0x1000):
    """Hand a context over through the ``cfg_*`` ports (the driver's OPEN sequence, run
    by libparanic's C code) and declare its rings, status block and window as host
    memory the NIC may reach."""
    m = host.mem
    m.add(rx_base, (1 << rx_log2) * P.rx_slot_bytes(dut.mtu), f"ctx{ctx} rx ring", dma_write=True)
    m.add(tx_base, (1 << tx_log2) * P.TX_DESC_BYTES, f"ctx{ctx} tx ring", dma_read=True)
    m.add(status_addr, P.STATUS_BLOCK_BYTES, f"ctx{ctx} status", dma_write=True)
    m.add(win_base, win_size, f"ctx{ctx} window", dma_read=True)
    status = yield from MigenPorts(dut).run("open", ctx, rx_base=rx_base, rx_log2=rx_log2, tx_base=tx_base,
                                            tx_log2=tx_log2, status_addr=status_addr, win_base=win_base,
                                            win_size=win_size)
    assert status == 0, status
    yield


def pio_wait(host, ctx, count, limit=500):
    """Poll PIO_DONE (as software polls its status block) until it reaches count."""
    for _ in range(limit):
        v = yield from host.read32(ctx * P.CTX_PAGE_BYTES + R.PIO_DONE)
        if v >= count:
            return
    raise TimeoutError("PIO_DONE")


def pio(host, ctx, header: bytes, payload: bytes = b""):
    data = header + payload + b"\0" * (-len(payload) % 8)
    base = ctx * P.CTX_PAGE_BYTES + P.PIO_WINDOW_OFFSET
    for i in range(0, len(data), 8):
        yield from host.write64(base + i, int.from_bytes(data[i:i + 8], "little"))
    yield from host.write32(ctx * P.CTX_PAGE_BYTES + R.PIO_DOORBELL, 0)


def counter(dut, name):
    return dut.counters[name]


def run(dut, host, main, *others):
    """Simulate ``main`` with the host (and ``others``, e.g. a :class:`NetSink`); the
    host must have seen no PCIe violation and no stray DMA."""
    run_simulation(dut, [main(), host.generator(), *(o.generator() for o in others)])
    assert host.errors == [], "\n".join(host.errors[:20])


# ---------------------------------------------------------------------------------------
# Register decode
# ---------------------------------------------------------------------------------------


def test_register_decode_and_pointer_checks():
    dut = HostInterface(n_ctx=2, mtu=64)
    h = make_host(dut)
    net = NetSink(dut, h)
    res = {}

    def main():
        yield from configure(dut, h, 0, tx_log2=2)
        page = 0
        res["status"] = yield from h.read32(page + R.STATUS)
        res["status1"] = yield from h.read32(P.CTX_PAGE_BYTES + R.STATUS)   # ctx 1 disabled
        res["absent"] = yield from h.read32(5 * P.CTX_PAGE_BYTES + R.STATUS)
        res["db"] = yield from h.read32(page + R.PIO_DOORBELL)
        res["undef"] = yield from h.read32(page + 0x100)
        # TX_TAIL: 4 slots; 5 pending refused, 4 accepted, backwards refused
        yield from h.write32(page + R.TX_TAIL, 5)
        yield from h.write32(page + R.RX_HEAD, 1)       # ahead of tail 0: refused
        res["errors"] = yield from h.read32(page + R.ERRORS)
        res["err_ptr"] = yield counter(dut, "err_ptr")
        yield from h.write32(page + R.RX_HEAD, 0)       # no-op, accepted
        yield from h.write32(5 * P.CTX_PAGE_BYTES + R.PIO_DOORBELL, 0)   # absent ctx
        yield from h.write32(P.CTX_PAGE_BYTES + R.BARRIER, 0)            # disabled ctx
        yield   # a write is acknowledged in its own cycle; the counter counts at its end
        res["err_pio"] = yield counter(dut, "err_pio")
        yield from h.write32(page + 0x100, 0xFFFFFFFF)  # undefined: ignored
        yield from h.write32(page + R.STATUS, 0xFFFFFFFF)  # read-only: ignored
        res["status_after"] = yield from h.read32(page + R.STATUS)
        res["state"] = yield dut.cfg_state

    run(dut, h, main, net)
    assert res["status"] == int(P.StatusBit.ENABLED)
    assert res["status1"] == 0 and res["absent"] == 0 and res["db"] == 0 and res["undef"] == 0
    assert res["errors"] == 2 and res["err_ptr"] == 2
    assert res["err_pio"] == 2
    assert res["status_after"] == int(P.StatusBit.ENABLED)
    assert res["state"] == 1  # ctx 0 selected: enabled only


# ---------------------------------------------------------------------------------------
# PIO: header stamping, checks
# ---------------------------------------------------------------------------------------


def test_pio_header_stamping_and_checks():
    dut = HostInterface(n_ctx=4, mtu=64)
    h = make_host(dut)
    net = NetSink(dut, h)
    res = {}

    def main():
        yield dut.node_id.eq(0x123)
        yield from configure(dut, h, 2)
        hdr = P.pack_header(dst_node=7, dst_ctx=3, src_node=0xFFF, src_ctx=0x3F, type=P.PacketType.RMA_GET,
                            vc=1, length=11, flags=0xF, direct=0x7, rt=1, rsvd=0x3, tag=0xDEADBEEF01234567)
        yield from pio(h, 2, hdr, bytes(range(11)))
        yield from pio_wait(h, 2, 1)
        yield from pio(h, 2, P.pack_header(dst_node=7, length=65), bytes(56))          # > mtu
        yield from pio_wait(h, 2, 2)
        yield from pio(h, 2, P.pack_header(dst_node=7, type=P.PacketType.BARRIER))     # type
        yield from pio_wait(h, 2, 3)
        yield from pio(h, 2, P.pack_header(dst_node=7, length=0, tag=9))              # empty ok
        for _ in range(60):
            yield
        res["pio_done"] = yield from h.read32(2 * P.CTX_PAGE_BYTES + R.PIO_DONE)
        res["errors"] = yield from h.read32(2 * P.CTX_PAGE_BYTES + R.ERRORS)
        res["len"] = yield counter(dut, "err_length")
        res["pio"] = yield counter(dut, "err_pio")

    run(dut, h, main, net)
    assert len(net.packets) == 2
    w0, w1, *pay = net.packets[0]
    hd = P.unpack_header(w0.to_bytes(8, "little") + w1.to_bytes(8, "little"))
    assert hd == dict(dst_node=7, src_node=0x123, dst_ctx=3, src_ctx=2, type=P.PacketType.RMA_GET,
                      vc=0, length=11, flags=SOMEOM, direct=0, rt=0, rsvd=0, tag=0xDEADBEEF01234567)
    assert P.words_to_bytes(pay, 11) == bytes(range(11)) and len(pay) == 2
    assert len(net.packets[1]) == 2 and net.packets[1][1] == 9
    assert net.cycles[0] == list(range(net.cycles[0][0], net.cycles[0][0] + 4))  # no bubble
    assert (res["pio_done"], res["errors"], res["len"], res["pio"]) == (4, 2, 1, 1)
    # status block written with the final values
    st = P.unpack_status(h.mem.read(0x30000, 16))
    assert st == dict(pio_done=4, tx_done=0, barrier_done=0, errors=2)


# ---------------------------------------------------------------------------------------
# DMA TX: descriptor checks, realignment, packet cutting
# ---------------------------------------------------------------------------------------


def _desc_setup(h, ctx, descs, tx_base=0x20000):
    for i, d in enumerate(descs):
        h.mem.write(tx_base + i * P.TX_DESC_BYTES, P.pack_tx_desc(**d))


def test_dma_descriptor_checks():
    dut = HostInterface(n_ctx=2, mtu=64)
    h = make_host(dut)
    net = NetSink(dut, h)
    W, S = 0x40000, 0x1000
    descs = [
        dict(addr=W - 1, length=2, dst_node=1),                 # starts before
        dict(addr=W + S - 1, length=2, dst_node=1),             # ends after
        dict(addr=W + 4, length=P.MAX_DMA_LENGTH + 1, dst_node=1),
        dict(addr=W, length=8, dst_node=1, type=P.PacketType.CONTROL),
        dict(addr=W, length=8, dst_node=1, type=7),
        dict(addr=W + S - 3, length=3, dst_node=1, tag=1),      # last bytes: ok
        dict(addr=0, length=0, dst_node=1, tag=2),              # empty: ok, no read
        dict(addr=W, length=S, dst_node=1, tag=3, dst_ctx=5),  # whole window: 64 packets
    ]
    _desc_setup(h, 0, descs)
    h.mem.write(W, bytes((i * 7) & 0xFF for i in range(S)))
    res = {}

    def main():
        yield from configure(dut, h, 0, tx_log2=3, win_base=W, win_size=S)
        yield from h.write32(R.TX_TAIL, len(descs))
        for _ in range(2500):
            yield
        res["head"] = yield from h.read32(R.TX_HEAD)
        res["errors"] = yield from h.read32(R.ERRORS)
        res["err_desc"] = yield counter(dut, "err_desc")

    run(dut, h, main, net)
    assert (res["head"], res["errors"], res["err_desc"]) == (8, 5, 5)
    # reads: 8 descriptors, then only inside the window
    reads = [(r.adr, r.nbytes) for r in h.read_requests]
    desc_reads = [r for r in reads if 0x20000 <= r[0] < 0x20100]
    assert len(desc_reads) == 8
    for adr, n in reads:
        if (adr, n) in desc_reads:
            continue
        assert W <= adr and adr + n <= W + S, hex(adr)
        assert n <= 512 and adr // 4096 == (adr + n - 1) // 4096
    tags = [p[1] for p in net.packets]
    assert tags == [1, 2] + [3] * (S // 64)
    hd = [P.unpack_header(p[0].to_bytes(8, "little") + p[1].to_bytes(8, "little"))
          for p in net.packets]
    assert P.words_to_bytes(net.packets[0][2:], 3) == \
        bytes(((S - 3 + i) * 7) & 0xFF for i in range(3))
    assert (hd[1]["length"], hd[1]["flags"]) == (0, SOMEOM)
    big = hd[2:]
    assert [x["flags"] for x in big] == [1] + [0] * 62 + [2]
    assert all(x["length"] == 64 and x["dst_ctx"] == 5 and x["src_ctx"] == 0 for x in big)
    data = b"".join(P.words_to_bytes(p[2:], 64) for p in net.packets[2:])
    assert data == bytes((i * 7) & 0xFF for i in range(S))
    # once started, a packet streams without bubbles (tx_source always ready here)
    for cyc in net.cycles:
        assert cyc == list(range(cyc[0], cyc[0] + len(cyc)))


def test_dma_completion_faults():
    """Short, errored and long completions: counted, padded/dropped, never wedge."""
    dut = HostInterface(n_ctx=1, mtu=64)
    W = 0x40000

    def fault(n, adr, nbytes):
        if adr == 0x20000:            # descriptor 0: error -> the descriptor is refused
            return [0] * (nbytes // 8 - 1)
        if adr == W + 0x100:          # payload of descriptor 1: short completion
            return [0x1111] * 2
        if adr == W + 0x200:          # payload of descriptor 2: 2 extra words
            return [0x2222] * (nbytes // 8 + 2)
        return None

    h = make_host(dut, completion_fault=fault)
    net = NetSink(dut, h)
    descs = [dict(addr=W, length=16, dst_node=1, tag=0),
             dict(addr=W + 0x100, length=64, dst_node=1, tag=1),
             dict(addr=W + 0x200, length=16, dst_node=1, tag=2),
             dict(addr=W + 0x300, length=16, dst_node=1, tag=3)]
    _desc_setup(h, 0, descs)
    h.mem.write(W + 0x300, b"ok-data-16bytes!")
    res = {}

    def main():
        yield from configure(dut, h, 0, win_base=W, win_size=0x1000)
        yield from h.write32(R.TX_TAIL, 4)
        for _ in range(400):
            yield
        res["head"] = yield from h.read32(R.TX_HEAD)
        res["err_dma"] = yield counter(dut, "err_dma")
        res["err_desc"] = yield counter(dut, "err_desc")

    run(dut, h, main, net)
    assert res["head"] == 4
    assert res["err_desc"] == 1
    assert res["err_dma"] == 3
    assert [p[1] for p in net.packets] == [1, 2, 3]
    assert net.packets[0][2:4] == [0x1111, 0x1111] and net.packets[0][4:] == [0] * 6  # padded
    assert net.packets[1][2:] == [0x2222, 0x2222]                          # extras dropped
    assert P.words_to_bytes(net.packets[2][2:], 16) == b"ok-data-16bytes!"


# ---------------------------------------------------------------------------------------
# RX: slot addresses, valid word, wrap, malformed packets
# ---------------------------------------------------------------------------------------


def _send_rx(dut, packets):
    """Drive rx_sink with [(words, error_on_last)]."""
    ep = dut.rx_sink
    for words, err in packets:
        for i, w in enumerate(words):
            yield ep.valid.eq(1)
            yield ep.data.eq(w)
            yield ep.first.eq(i == 0)
            yield ep.last.eq(i == len(words) - 1)
            yield ep.error.eq(int(err and i == len(words) - 1))
            yield
            while not (yield ep.ready):
                yield
        yield ep.valid.eq(0)
    for _ in range(60):
        yield


def _pkt(dst_ctx, length, tag, nwords=None):
    w0, w1 = P.header_words(dst_node=1, src_node=2, dst_ctx=dst_ctx, length=length, tag=tag)
    n = P.payload_words(length) if nwords is None else nwords
    return [w0, w1] + [(tag << 8) | i for i in range(n)]


def test_rx_slot_addresses_and_wrap():
    mtu = 64
    dut = HostInterface(n_ctx=2, mtu=mtu)
    h = make_host(dut)
    net = NetSink(dut, h)
    base = 0x1_0000_0040  # 64-byte aligned, above 4 GiB
    sb, vo = P.rx_slot_bytes(mtu), P.rx_valid_offset(mtu)

    def main():
        yield from configure(dut, h, 1, rx_base=base, rx_log2=2)
        pk = [(_pkt(1, 8 * (i % 9), i), 0) for i in range(6)]
        # 6 packets into 4 slots: free slots as the test goes
        yield from _send_rx(dut, pk[:4])
        yield from h.write32(P.CTX_PAGE_BYTES + R.RX_HEAD, 2)
        yield from _send_rx(dut, pk[4:])

    run(dut, h, main, net)
    valid_writes = [w for w in h.write_requests if (w.adr - base) % sb == vo]
    assert [(w.adr, w.words) for w in valid_writes] == \
        [(base + (i % 4) * sb + vo, [i + 1]) for i in range(6)]
    for a, n in [(w.adr, w.nbytes) for w in h.write_requests]:
        if a == 0x30000:  # status block
            continue
        assert base <= a and a + n <= base + 4 * sb and n <= 256
        assert a // 4096 == (a + n - 1) // 4096
    # each slot: header at +0, payload at +16 (the last two packets overwrote slots 0, 1)
    for i in range(6):
        if i < 2:
            continue
        slot = base + (i % 4) * sb
        words = [h.mem.read64(slot + 8 * k) for k in range(2 + (8 * (i % 9)) // 8)]
        assert words == _pkt(1, 8 * (i % 9), i)
    # valid word written after the slot data of the same packet
    idx = {w.adr: k for k, w in enumerate(h.write_requests)}
    assert idx[base + 3 * sb + vo] > idx[base + 3 * sb]


def test_rx_malformed_packets_not_committed():
    mtu = 64
    dut = HostInterface(n_ctx=2, mtu=mtu)
    h = make_host(dut)
    net = NetSink(dut, h)
    base = 0x10000
    sb, vo = P.rx_slot_bytes(mtu), P.rx_valid_offset(mtu)
    res = {}

    def main():
        yield from configure(dut, h, 0, rx_base=base, rx_log2=2)
        yield from _send_rx(dut, [
            (_pkt(0, 24, 1, nwords=1), 0),        # short
            (_pkt(0, 8, 2, nwords=4), 0),         # long
            (_pkt(0, 72, 3, nwords=9), 0),        # length > mtu
            (_pkt(0, 16, 4), 1),                  # error flag
            ([_pkt(0, 16, 5)[0]], 0),             # header word only
            (_pkt(0, 16, 6), 0),                  # good
            (_pkt(1, 16, 7), 0),                  # disabled context
            (_pkt(40, 16, 8), 0),                 # absent context
            (_pkt(0, 16, 9), 0),                  # good
        ])
        res["err_rx"] = yield counter(dut, "err_rx")
        res["unk"] = yield counter(dut, "err_unknown_ctx")
        res["rx"] = yield counter(dut, "rx_packets")
        res["tail"] = yield from h.read32(R.RX_TAIL)

    run(dut, h, main, net)
    assert (res["err_rx"], res["unk"], res["rx"], res["tail"]) == (5, 2, 2, 2)
    valid = [(w.adr, w.words) for w in h.write_requests if (w.adr - base) % sb == vo]
    assert valid == [(base + vo, [1]), (base + sb + vo, [2])]
    # tags of the good packets
    assert [h.mem.read64(base + 8), h.mem.read64(base + sb + 8)] == [6, 9]
    for a, n in [(w.adr, w.nbytes) for w in h.write_requests]:
        assert (base <= a and a + n <= base + 4 * sb) or a == 0x30000


def test_rx_irq_and_barrier_status():
    dut = HostInterface(n_ctx=2, mtu=64)
    h = make_host(dut)
    net = NetSink(dut, h)
    res = {}

    def main():
        yield from configure(dut, h, 0, status_addr=0x30000)
        yield from configure(dut, h, 1, rx_base=0x50000, status_addr=0x30040)
        yield from h.write32(P.CTX_PAGE_BYTES + R.IRQ_ARM, 0)
        yield from _send_rx(dut, [(_pkt(0, 8, 1), 0), (_pkt(1, 8, 2), 0), (_pkt(1, 8, 3), 0)])
        res["irqs"] = h.irqs()
        yield from h.write32(P.CTX_PAGE_BYTES + R.IRQ_ARM, 1)   # behind: at once
        yield
        yield
        res["irqs2"] = h.irqs()
        yield dut.barrier_done_ctx.eq(1)
        yield dut.barrier_done_pulse.eq(1)
        yield
        yield dut.barrier_done_pulse.eq(0)
        for _ in range(30):
            yield

    run(dut, h, main, net)
    assert res["irqs"] == [1]   # one MSI pulse, vector 1
    assert res["irqs2"] == [1, 1]
    assert P.unpack_status(h.mem.read(0x30040, 16))["barrier_done"] == 1
    assert P.unpack_status(h.mem.read(0x30000, 16))["barrier_done"] == 0


# ---------------------------------------------------------------------------------------
# DMA helpers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_payload", [64, 256])
def test_dma_writer_splits(max_payload):
    rng = random.Random(max_payload)
    dut = DmaWriter(64, max_payload)
    cmds = [(rng.randrange(0, 1 << 20) * 8 + (1 << 40), rng.randint(1, 200)) for _ in range(25)]
    cmds += [(4096 - 8, 3), (4096 * 5 - max_payload + 8, 40)]
    host = MigenHost(wr_source=dut.source, max_payload_bytes=max_payload,
                     wr_ready=lambda k: k % 5 != 0)
    host.mem.add(1 << 40, 1 << 24, "commands", dma_write=True)
    host.mem.add(0, 1 << 16, "page-crossing commands", dma_write=True)

    def feed():
        for adr, n in cmds:
            yield dut.cmd.valid.eq(1)
            yield dut.cmd.adr.eq(adr)
            yield dut.cmd.words.eq(n)
            yield
            while not (yield dut.cmd.ready):
                yield
            yield dut.cmd.valid.eq(0)
            for i in range(n):
                yield dut.data.valid.eq(1)
                yield dut.data.data.eq((adr << 8) + i)
                yield
                while not (yield dut.data.ready):
                    yield
            yield dut.data.valid.eq(0)

    run_simulation(dut, [feed(), host.generator()])
    assert host.errors == [], host.errors[:20]
    got = host.write_requests
    pos = 0
    for adr, n in cmds:
        a, left = adr, n
        while left:
            radr, nbytes, data = got[pos].adr, got[pos].nbytes, got[pos].words
            pos += 1
            assert radr == a and nbytes == len(data) * 8
            assert len(data) * 8 <= max_payload
            assert radr // max_payload == (radr + len(data) * 8 - 1) // max_payload
            assert data == [(adr << 8) + (a - adr) // 8 + i for i in range(len(data))]
            a += len(data) * 8
            left -= len(data)
    assert pos == len(got)


def test_read_realigner():
    rng = random.Random(5)
    dut = ReadRealigner()
    cases = [(s, L) for s in range(8) for L in (1, 7, 8, 9, 16, 23)] + [(3, 0)]
    out = []

    def main():
        for shift, L in cases:
            mem = bytes(rng.getrandbits(8) for _ in range(shift + L + 16))
            n_in = (shift + L + 7) // 8 if L else 0
            n_out = (L + 7) // 8
            yield dut.shift.eq(shift)
            yield dut.n_in.eq(n_in)
            yield dut.n_out.eq(n_out)
            yield dut.tail_bytes.eq(L % 8)
            yield dut.start.eq(1)
            yield
            yield dut.start.eq(0)
            words_in = [int.from_bytes(mem[8 * i:8 * i + 8], "little") for i in range(n_in)]
            got = []
            i = 0
            for _ in range(4 * (n_in + 2)):
                yield dut.sink.valid.eq(i < n_in)
                yield dut.sink.data.eq(words_in[i] if i < n_in else 0)
                yield dut.source.ready.eq(rng.random() < 0.7)
                yield
                if i < n_in and (yield dut.sink.ready):
                    i += 1
                if (yield dut.source.valid) and (yield dut.source.ready):
                    got.append((yield dut.source.data))
            yield dut.sink.valid.eq(0)
            yield dut.source.ready.eq(0)
            exp = mem[shift:shift + L] + b"\0" * (-L % 8)
            out.append((shift, L, i == n_in, b"".join(w.to_bytes(8, "little") for w in got), exp))

    run_simulation(dut, [main()])
    for shift, L, all_in, got, exp in out:
        assert all_in and got == exp, (shift, L)


# ---------------------------------------------------------------------------------------
# CSRs and elaboration with defaults
# ---------------------------------------------------------------------------------------


def test_csrs_drive_configuration():
    dut = HostInterface(n_ctx=3, mtu=128)
    dut.add_csrs()
    names = [c.name for c in dut.get_csrs()]
    for n in ("ctx_sel", "ctx_enable", "ctx_rx_base", "ctx_rx_log2", "ctx_tx_base", "ctx_tx_log2",
              "ctx_status_addr", "ctx_win_base", "ctx_win_size", "ctx_write", "ctx_reset",
              "ctx_state", "info_n_ctx", "info_mtu"):
        assert n in names
    for n, _ in COUNTERS:
        assert n in names
    res = {}

    def main():
        yield dut.ctx_sel.storage.eq(2)
        yield dut.ctx_enable.storage.eq(1)
        yield dut.ctx_rx_log2.storage.eq(1)
        yield
        yield dut.ctx_write.re.eq(1)
        yield
        yield dut.ctx_write.re.eq(0)
        yield
        yield
        res["state"] = yield dut.ctx_state.status
        res["enable"] = yield dut.state.enable
        res["mask"] = yield dut.state.rx_mask[2]
        res["n_ctx"] = yield dut.info_n_ctx.status

    run_simulation(dut, [main()])
    assert res["enable"] == 0b100 and res["mask"] == 1
    assert res["state"] & 1 and len(CTX_STATE_BITS) == 8
    assert res["n_ctx"] == 3


def test_default_parameters_elaborate():
    from migen.fhdl.verilog import convert
    h = HostInterface()
    h.add_csrs()
    assert h.n_ctx == P.DEFAULT_CONTEXTS and h.pio_words == 256 and h.pio_max_length == P.DEFAULT_MTU
    assert h.dmatx.fifo_words >= P.packet_words(P.DEFAULT_MTU)
    convert(h, ios=set(h.bus.flatten()) | {h.irq})


def test_bad_parameters():
    with pytest.raises(ValueError):
        HostInterface(n_ctx=0)
    with pytest.raises(ValueError):
        HostInterface(mtu=100)
    with pytest.raises(ValueError):
        HostInterface(dma_data_width=128)
    with pytest.raises(ValueError):
        HostInterface(max_request_bytes=16)
    with pytest.raises(ValueError):
        HostInterface(max_payload_bytes=384)


def test_disable_flushes_pending_pio():
    """A doorbell waiting behind DMA sends is dropped when the context is disabled,
    and the context drains (ctx_state) so the driver can hand it over."""
    dut = HostInterface(n_ctx=2, mtu=64)
    h = make_host(dut)
    net = NetSink(dut, h)
    W = 0x40000
    _desc_setup(h, 0, [dict(addr=W, length=64, dst_node=1, tag=t) for t in range(12)])
    res = {}

    def main():
        yield from configure(dut, h, 0, win_base=W, win_size=0x1000, tx_log2=4)
        net.ready = False                            # the network is blocked
        yield from h.write32(R.TX_TAIL, 12)
        yield from pio(h, 0, P.pack_header(dst_node=1, length=8, tag=99), bytes(8))
        for _ in range(100):
            yield
        res["busy"] = (yield from h.read32(R.STATUS)) & int(P.StatusBit.PIO_BUSY)
        yield dut.cfg_enable.eq(0)                   # driver: disable (same addresses)
        yield dut.cfg_write.eq(1)
        yield
        yield dut.cfg_write.eq(0)
        for _ in range(10):
            yield
        res["state_blocked"] = yield dut.cfg_state
        net.ready = True
        for _ in range(200):
            yield
        res["state"] = yield dut.cfg_state
        res["pio_done"] = yield dut.state.pio_done[0]
        res["tx_done"] = yield dut.state.tx_done[0]

    run(dut, h, main, net)
    assert res["busy"]
    assert res["state_blocked"] & 0b11 == 0          # disabled, PIO flushed
    assert res["state_blocked"] & 0b100               # a fetched descriptor still in flight
    assert res["state"] & 0b10111 == 0                # nothing in flight, nothing active
    assert res["pio_done"] == 1
    assert 99 not in [p[1] for p in net.packets]      # the PIO packet was never sent
    assert 1 <= res["tx_done"] < 12                   # fetched ones completed, others not
    assert [p[1] for p in net.packets] == list(range(res["tx_done"]))


# ---------------------------------------------------------------------------------------
# PIO isolation: only staged words leave; ctx_reset zeroes the buffer (docs/reliability.md)
# ---------------------------------------------------------------------------------------


def test_pio_sends_only_staged_words_and_reset_clears_the_buffer():
    """Owner A stages a 40-byte packet and sends it. A header alone saying 40 bytes is
    refused (nothing sent, errors, err_length); a header with only its last word staged
    is sent, with A's own earlier words between. Then the context is handed over (the
    OPEN sequence: ctx_reset starts the clear, the sequence waits for it): the buffer
    region is zero, and the new owner's header-plus-last-word packet carries zeros, never
    A's bytes. Another context's window writes during the clear land (the clear yields
    the buffer's write port to them)."""
    dut = HostInterface(n_ctx=2, mtu=64)
    h = make_host(dut)
    net = NetSink(dut, h)
    res = {}
    secret = bytes(range(0xA0, 0xA0 + 40))
    win = P.PIO_WINDOW_OFFSET

    def last_word_only(ctx, length, tag, word):
        base = ctx * P.CTX_PAGE_BYTES + win
        hdr = P.pack_header(dst_node=1, length=length, tag=tag)
        yield from h.write64(base, int.from_bytes(hdr[:8], "little"))
        yield from h.write64(base + 8, int.from_bytes(hdr[8:], "little"))
        yield from h.write64(base + 8 * (P.packet_words(length) - 1), word)
        yield from h.write32(ctx * P.CTX_PAGE_BYTES + R.PIO_DOORBELL, 0)

    def main():
        yield from configure(dut, h, 0)
        yield from configure(dut, h, 1, rx_base=0x50000, tx_base=0x60000, status_addr=0x70000,
                             win_base=0x80000)
        yield from pio(h, 0, P.pack_header(dst_node=1, length=40, tag=1), secret)
        yield from pio_wait(h, 0, 1)
        yield from pio(h, 0, P.pack_header(dst_node=1, length=40, tag=2))          # header only
        yield from pio_wait(h, 0, 2)
        res["errors"] = yield from h.read32(R.ERRORS)
        res["err_length"] = yield counter(dut, "err_length")
        yield from last_word_only(0, 40, 3, 0x1111)
        yield from pio_wait(h, 0, 3)
        # Hand-over of context 0; context 1 keeps writing its window meanwhile.
        yield dut.cfg_ctx.eq(0)
        yield dut.cfg_reset.eq(1)
        yield
        yield dut.cfg_reset.eq(0)
        yield
        res["clearing"] = (yield dut.cfg_state) & int(P.CtxState.PIO_BUSY)
        for i in range(8):
            yield from h.write64(P.CTX_PAGE_BYTES + win + 8 * i, 0x5A5A0000 + i)
        yield from configure(dut, h, 0)
        res["region"], res["ctx1"] = [], []
        for i in range(dut.pio_words):
            res["region"].append((yield dut.pio_mem[i]))
        for i in range(8):
            res["ctx1"].append((yield dut.pio_mem[dut.pio_words + i]))
        yield from last_word_only(0, 40, 4, 0x2222)
        yield from pio_wait(h, 0, 1)
        res["errors_b"] = yield from h.read32(R.ERRORS)
        for _ in range(40):
            yield

    run(dut, h, main, net)
    assert res["errors"] == 1 and res["err_length"] == 1
    assert [p[1] for p in net.packets] == [1, 3, 4]
    assert P.words_to_bytes(net.packets[0][2:], 40) == secret
    # Same owner: the words it did not rewrite are its own (packet 1's).
    assert net.packets[1][2:6] == net.packets[0][2:6] and net.packets[1][6] == 0x1111
    # New owner: zeros where A's bytes were.
    assert res["clearing"]
    assert res["region"] == [0] * dut.pio_words
    assert net.packets[2][2:6] == [0, 0, 0, 0] and net.packets[2][6] == 0x2222
    assert res["ctx1"] == [0x5A5A0000 + i for i in range(8)]
    assert res["errors_b"] == 0
