"""Migen unit tests of the host interface's pieces (paranic.hw.host*, paranic.hw.dma).

The cocotb bench (tests/cocotb/host) runs the whole HostInterface against the full
host model; these tests check the small pieces directly: register decode, header
stamping, descriptor checks, RX slot addresses, the DMA write splitter, the read
realigner, malformed received packets, completion faults and the CSR map.
"""

from __future__ import annotations

import random

import pytest
from migen.sim import passive, run_simulation

from paranic.spec import protocol as P
from paranic.hw.dma import DmaWriter, ReadRealigner
from paranic.hw.host import COUNTERS, HostInterface
from paranic.spec.protocol import CTX_STATE_BITS

R = P.CtxReg
SOMEOM = int(P.Flags.SOM | P.Flags.EOM)


# ---------------------------------------------------------------------------------------
# A small generator-based host for Migen simulation
# ---------------------------------------------------------------------------------------


class SimHost:
    """Memory + DMA servers + Wishbone master + tx/rx stream ends for run_simulation."""

    def __init__(self, dut: HostInterface, latency: int = 3, rcb: int = 64) -> None:
        self.dut = dut
        self.mem: dict[int, int] = {}           # 8-byte aligned address -> 64-bit word
        self.latency = latency
        self.rcb = rcb
        self.reads: list[tuple[int, int]] = []  # (adr, bytes)
        self.writes: list[tuple[int, int, list[int]]] = []  # (adr, bytes, words)
        self.tx: list[list[int]] = []           # packets seen on tx_source
        self.tx_cycles: list[list[int]] = []    # cycle of each of their beats
        self.irqs: list[int] = []
        self.cycle = 0
        self.fault = None                       # callable(n_read, adr, nbytes) -> words list or None
        self.tx_ready = True

    # memory helpers
    def write_bytes(self, addr: int, data: bytes) -> None:
        for i, b in enumerate(data):
            a = addr + i
            w = self.mem.get(a & ~7, 0)
            sh = (a & 7) * 8
            self.mem[a & ~7] = (w & ~(0xFF << sh)) | (b << sh)

    def read_bytes(self, addr: int, n: int) -> bytes:
        return bytes((self.mem.get((addr + i) & ~7, 0) >> (((addr + i) & 7) * 8)) & 0xFF
                     for i in range(n))

    # generators
    @passive
    def clock(self):
        while True:
            yield
            self.cycle += 1

    @passive
    def dma_read_server(self):
        port = self.dut.dma_rd
        q = []
        beats = []
        nreq = 0
        yield port.source.ready.eq(1)
        while True:
            if (yield port.source.valid):
                adr = yield port.source.adr
                nbytes = (yield port.source.len) * 4
                self.reads.append((adr, nbytes))
                words = [self.mem.get(adr + 8 * i, 0) for i in range(nbytes // 8)]
                if self.fault is not None:
                    f = self.fault(nreq, adr, nbytes)
                    if f is not None:
                        words = f
                nreq += 1
                q.append((self.cycle + self.latency, adr, words))
            if not beats and q and q[0][0] <= self.cycle:
                _, adr, words = q.pop(0)
                per = self.rcb // 8
                chunks = [words[i:i + per] for i in range(0, len(words), per)] or [[0]]
                for ci, ch in enumerate(chunks):
                    for i, w in enumerate(ch):
                        beats.append((w, i == 0, i == len(ch) - 1, ci == len(chunks) - 1))
            if beats:
                w, first, last, end = beats[0]
                yield port.sink.valid.eq(1)
                yield port.sink.dat.eq(w)
                yield port.sink.first.eq(first)
                yield port.sink.last.eq(last)
                yield port.sink.end.eq(end)
            else:
                yield port.sink.valid.eq(0)
            yield
            if beats and (yield port.sink.ready):
                beats.pop(0)

    @passive
    def dma_write_server(self):
        port = self.dut.dma_wr
        yield port.source.ready.eq(1)
        cur = None
        while True:
            yield
            if (yield port.source.valid):
                if (yield port.source.first):
                    cur = [(yield port.source.adr), (yield port.source.len) * 4, []]
                cur[2].append((yield port.source.dat))
                if (yield port.source.last):
                    adr, nbytes, words = cur
                    assert len(words) * 8 == nbytes
                    for i, w in enumerate(words):
                        self.mem[adr + 8 * i] = w
                    self.writes.append((adr, nbytes, words))
                    cur = None

    @passive
    def tx_monitor(self):
        src = self.dut.tx_source
        cur, cyc = [], []
        while True:
            yield src.ready.eq(int(self.tx_ready))
            yield
            if (yield src.valid) and (yield src.ready):
                cur.append((yield src.data))
                cyc.append(self.cycle)
                if (yield src.last):
                    self.tx.append(cur)
                    self.tx_cycles.append(cyc)
                    cur, cyc = [], []

    @passive
    def irq_monitor(self):
        while True:
            yield
            v = yield self.dut.irq
            if v:
                self.irqs.append(v)

    def gens(self):
        return [self.clock(), self.dma_read_server(), self.dma_write_server(), self.tx_monitor(),
                self.irq_monitor()]

    # stimuli
    def configure(self, ctx, enable=1, rx_base=0x10000, rx_log2=2, tx_base=0x20000, tx_log2=2,
                  status_addr=0x30000, win_base=0x40000, win_size=0x1000):
        d = self.dut
        yield d.cfg_ctx.eq(ctx)
        for k, v in dict(enable=enable, rx_base=rx_base, rx_log2=rx_log2, tx_base=tx_base,
                         tx_log2=tx_log2, status_addr=status_addr, win_base=win_base,
                         win_size=win_size).items():
            yield getattr(d, "cfg_" + k).eq(v)
        yield d.cfg_write.eq(1)
        yield
        yield d.cfg_write.eq(0)
        yield d.cfg_reset.eq(1)
        yield
        yield d.cfg_reset.eq(0)
        yield

    def wb_write(self, addr, value, sel=0xF):
        yield from self.dut.bus.write(addr >> 2, value, sel=sel)

    def wb_read(self, addr):
        return (yield from self.dut.bus.read(addr >> 2))

    def write64(self, addr, value):
        yield from self.wb_write(addr, value & 0xFFFFFFFF)
        yield from self.wb_write(addr + 4, value >> 32)

    def pio_wait(self, ctx, count, limit=500):
        """Poll PIO_DONE (as software polls its status block) until it reaches count."""
        for _ in range(limit):
            v = yield from self.wb_read(ctx * P.CTX_PAGE_BYTES + R.PIO_DONE)
            if v >= count:
                return
        raise TimeoutError("PIO_DONE")

    def pio(self, ctx, header: bytes, payload: bytes = b""):
        data = header + payload + b"\0" * (-len(payload) % 8)
        base = ctx * P.CTX_PAGE_BYTES + P.PIO_WINDOW_OFFSET
        for i in range(0, len(data), 8):
            yield from self.write64(base + i, int.from_bytes(data[i:i + 8], "little"))
        yield from self.wb_write(ctx * P.CTX_PAGE_BYTES + R.PIO_DOORBELL, 0)


def counter(dut, name):
    return dut.counters[name]


def run(dut, host, main):
    run_simulation(dut, [main()] + host.gens())


# ---------------------------------------------------------------------------------------
# Register decode
# ---------------------------------------------------------------------------------------


def test_register_decode_and_pointer_checks():
    dut = HostInterface(n_ctx=2, mtu=64)
    h = SimHost(dut)
    res = {}

    def main():
        yield from h.configure(0, tx_log2=2)
        page = 0
        res["status"] = yield from h.wb_read(page + R.STATUS)
        res["status1"] = yield from h.wb_read(P.CTX_PAGE_BYTES + R.STATUS)   # ctx 1 disabled
        res["absent"] = yield from h.wb_read(5 * P.CTX_PAGE_BYTES + R.STATUS)
        res["db"] = yield from h.wb_read(page + R.PIO_DOORBELL)
        res["undef"] = yield from h.wb_read(page + 0x100)
        # TX_TAIL: 4 slots; 5 pending refused, 4 accepted, backwards refused
        yield from h.wb_write(page + R.TX_TAIL, 5)
        yield from h.wb_write(page + R.RX_HEAD, 1)       # ahead of tail 0: refused
        res["errors"] = yield from h.wb_read(page + R.ERRORS)
        res["err_ptr"] = yield counter(dut, "err_ptr")
        yield from h.wb_write(page + R.RX_HEAD, 0)       # no-op, accepted
        yield from h.wb_write(5 * P.CTX_PAGE_BYTES + R.PIO_DOORBELL, 0)   # absent ctx
        yield from h.wb_write(P.CTX_PAGE_BYTES + R.BARRIER, 0)            # disabled ctx
        res["err_pio"] = yield counter(dut, "err_pio")
        yield from h.wb_write(page + 0x100, 0xFFFFFFFF)  # undefined: ignored
        yield from h.wb_write(page + R.STATUS, 0xFFFFFFFF)  # read-only: ignored
        res["status_after"] = yield from h.wb_read(page + R.STATUS)
        res["state"] = yield dut.cfg_state

    run(dut, h, main)
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
    h = SimHost(dut)
    res = {}

    def main():
        yield dut.node_id.eq(0x123)
        yield from h.configure(2)
        hdr = P.pack_header(dst_node=7, dst_ctx=3, src_node=0xFFF, src_ctx=0x3F, type=P.PacketType.RMA_GET,
                            vc=1, length=11, flags=0xF, rsvd=0x3F, tag=0xDEADBEEF01234567)
        yield from h.pio(2, hdr, bytes(range(11)))
        yield from h.pio_wait(2, 1)
        yield from h.pio(2, P.pack_header(dst_node=7, length=65), bytes(56))          # > mtu
        yield from h.pio_wait(2, 2)
        yield from h.pio(2, P.pack_header(dst_node=7, type=P.PacketType.BARRIER))     # type
        yield from h.pio_wait(2, 3)
        yield from h.pio(2, P.pack_header(dst_node=7, length=0, tag=9))              # empty ok
        for _ in range(60):
            yield
        res["pio_done"] = yield from h.wb_read(2 * P.CTX_PAGE_BYTES + R.PIO_DONE)
        res["errors"] = yield from h.wb_read(2 * P.CTX_PAGE_BYTES + R.ERRORS)
        res["len"] = yield counter(dut, "err_length")
        res["pio"] = yield counter(dut, "err_pio")

    run(dut, h, main)
    assert len(h.tx) == 2
    w0, w1, *pay = h.tx[0]
    hd = P.unpack_header(w0.to_bytes(8, "little") + w1.to_bytes(8, "little"))
    assert hd == dict(dst_node=7, src_node=0x123, dst_ctx=3, src_ctx=2, type=P.PacketType.RMA_GET,
                      vc=0, length=11, flags=SOMEOM, rsvd=0, tag=0xDEADBEEF01234567)
    assert P.words_to_bytes(pay, 11) == bytes(range(11)) and len(pay) == 2
    assert len(h.tx[1]) == 2 and h.tx[1][1] == 9
    assert h.tx_cycles[0] == list(range(h.tx_cycles[0][0], h.tx_cycles[0][0] + 4))  # no bubble
    assert (res["pio_done"], res["errors"], res["len"], res["pio"]) == (4, 2, 1, 1)
    # status block written with the final values
    st = P.unpack_status(h.read_bytes(0x30000, 16))
    assert st == dict(pio_done=4, tx_done=0, barrier_done=0, errors=2)


# ---------------------------------------------------------------------------------------
# DMA TX: descriptor checks, realignment, packet cutting
# ---------------------------------------------------------------------------------------


def _desc_setup(h, ctx, descs, tx_base=0x20000):
    for i, d in enumerate(descs):
        h.write_bytes(tx_base + i * P.TX_DESC_BYTES, P.pack_tx_desc(**d))


def test_dma_descriptor_checks():
    dut = HostInterface(n_ctx=2, mtu=64)
    h = SimHost(dut)
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
    h.write_bytes(W, bytes((i * 7) & 0xFF for i in range(S)))
    res = {}

    def main():
        yield from h.configure(0, tx_log2=3, win_base=W, win_size=S)
        yield from h.wb_write(R.TX_TAIL, len(descs))
        for _ in range(2500):
            yield
        res["head"] = yield from h.wb_read(R.TX_HEAD)
        res["errors"] = yield from h.wb_read(R.ERRORS)
        res["err_desc"] = yield counter(dut, "err_desc")

    run(dut, h, main)
    assert (res["head"], res["errors"], res["err_desc"]) == (8, 5, 5)
    # reads: 8 descriptors, then only inside the window
    desc_reads = [r for r in h.reads if 0x20000 <= r[0] < 0x20100]
    assert len(desc_reads) == 8
    for adr, n in h.reads:
        if (adr, n) in desc_reads:
            continue
        assert W <= adr and adr + n <= W + S, hex(adr)
        assert n <= 512 and adr // 4096 == (adr + n - 1) // 4096
    tags = [p[1] for p in h.tx]
    assert tags == [1, 2] + [3] * (S // 64)
    hd = [P.unpack_header(p[0].to_bytes(8, "little") + p[1].to_bytes(8, "little")) for p in h.tx]
    assert P.words_to_bytes(h.tx[0][2:], 3) == bytes(((S - 3 + i) * 7) & 0xFF for i in range(3))
    assert (hd[1]["length"], hd[1]["flags"]) == (0, SOMEOM)
    big = hd[2:]
    assert [x["flags"] for x in big] == [1] + [0] * 62 + [2]
    assert all(x["length"] == 64 and x["dst_ctx"] == 5 and x["src_ctx"] == 0 for x in big)
    data = b"".join(P.words_to_bytes(p[2:], 64) for p in h.tx[2:])
    assert data == bytes((i * 7) & 0xFF for i in range(S))
    # once started, a packet streams without bubbles (tx_source always ready here)
    for cyc in h.tx_cycles:
        assert cyc == list(range(cyc[0], cyc[0] + len(cyc)))


def test_dma_completion_faults():
    """Short, errored and long completions: counted, padded/dropped, never wedge."""
    dut = HostInterface(n_ctx=1, mtu=64)
    h = SimHost(dut)
    W = 0x40000

    def fault(n, adr, nbytes):
        if adr == 0x20000:            # descriptor 0: error -> the descriptor is refused
            return [0] * (nbytes // 8 - 1)
        if adr == W + 0x100:          # payload of descriptor 1: short completion
            return [0x1111] * 2
        if adr == W + 0x200:          # payload of descriptor 2: 2 extra words
            return [0x2222] * (nbytes // 8 + 2)
        return None

    h.fault = fault
    descs = [dict(addr=W, length=16, dst_node=1, tag=0),
             dict(addr=W + 0x100, length=64, dst_node=1, tag=1),
             dict(addr=W + 0x200, length=16, dst_node=1, tag=2),
             dict(addr=W + 0x300, length=16, dst_node=1, tag=3)]
    _desc_setup(h, 0, descs)
    h.write_bytes(W + 0x300, b"ok-data-16bytes!")
    res = {}

    def main():
        yield from h.configure(0, win_base=W, win_size=0x1000)
        yield from h.wb_write(R.TX_TAIL, 4)
        for _ in range(400):
            yield
        res["head"] = yield from h.wb_read(R.TX_HEAD)
        res["err_dma"] = yield counter(dut, "err_dma")
        res["err_desc"] = yield counter(dut, "err_desc")

    run(dut, h, main)
    assert res["head"] == 4
    assert res["err_desc"] == 1
    assert res["err_dma"] == 3
    assert [p[1] for p in h.tx] == [1, 2, 3]
    assert h.tx[0][2:4] == [0x1111, 0x1111] and h.tx[0][4:] == [0] * 6   # padded
    assert h.tx[1][2:] == [0x2222, 0x2222]                               # extras dropped
    assert P.words_to_bytes(h.tx[2][2:], 16) == b"ok-data-16bytes!"


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
    h = SimHost(dut)
    base = 0x1_0000_0040  # 64-byte aligned, above 4 GiB
    sb, vo = P.rx_slot_bytes(mtu), P.rx_valid_offset(mtu)

    def main():
        yield from h.configure(1, rx_base=base, rx_log2=2)
        pk = [(_pkt(1, 8 * (i % 9), i), 0) for i in range(6)]
        # 6 packets into 4 slots: free slots as the test goes
        yield from _send_rx(dut, pk[:4])
        yield from h.wb_write(P.CTX_PAGE_BYTES + R.RX_HEAD, 2)
        yield from _send_rx(dut, pk[4:])

    run(dut, h, main)
    valid_writes = [w for w in h.writes if (w[0] - base) % sb == vo]
    assert [(w[0], w[2]) for w in valid_writes] == \
        [(base + (i % 4) * sb + vo, [i + 1]) for i in range(6)]
    for a, n, _ in h.writes:
        if a == 0x30000:  # status block
            continue
        assert base <= a and a + n <= base + 4 * sb and n <= 256
        assert a // 4096 == (a + n - 1) // 4096
    # each slot: header at +0, payload at +16 (the last two packets overwrote slots 0, 1)
    for i in range(6):
        if i < 2:
            continue
        slot = base + (i % 4) * sb
        words = [h.mem[slot + 8 * k] for k in range(2 + (8 * (i % 9)) // 8)]
        assert words == _pkt(1, 8 * (i % 9), i)
    # valid word written after the slot data of the same packet
    idx = {w[0]: k for k, w in enumerate(h.writes)}
    assert idx[base + 3 * sb + vo] > idx[base + 3 * sb]


def test_rx_malformed_packets_not_committed():
    mtu = 64
    dut = HostInterface(n_ctx=2, mtu=mtu)
    h = SimHost(dut)
    base = 0x10000
    sb, vo = P.rx_slot_bytes(mtu), P.rx_valid_offset(mtu)
    res = {}

    def main():
        yield from h.configure(0, rx_base=base, rx_log2=2)
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
        res["tail"] = yield from h.wb_read(R.RX_TAIL)

    run(dut, h, main)
    assert (res["err_rx"], res["unk"], res["rx"], res["tail"]) == (5, 2, 2, 2)
    valid = [(w[0], w[2]) for w in h.writes if (w[0] - base) % sb == vo]
    assert valid == [(base + vo, [1]), (base + sb + vo, [2])]
    assert [h.mem[base + 8], h.mem[base + sb + 8]] == [6, 9]    # tags of the good packets
    for a, n, _ in h.writes:
        assert (base <= a and a + n <= base + 4 * sb) or a == 0x30000


def test_rx_irq_and_barrier_status():
    dut = HostInterface(n_ctx=2, mtu=64)
    h = SimHost(dut)
    res = {}

    def main():
        yield from h.configure(0, status_addr=0x30000)
        yield from h.configure(1, rx_base=0x50000, status_addr=0x30040)
        yield from h.wb_write(P.CTX_PAGE_BYTES + R.IRQ_ARM, 0)
        yield from _send_rx(dut, [(_pkt(0, 8, 1), 0), (_pkt(1, 8, 2), 0), (_pkt(1, 8, 3), 0)])
        res["irqs"] = list(h.irqs)
        yield from h.wb_write(P.CTX_PAGE_BYTES + R.IRQ_ARM, 1)   # behind: at once
        yield
        yield
        res["irqs2"] = list(h.irqs)
        yield dut.barrier_done_ctx.eq(1)
        yield dut.barrier_done_pulse.eq(1)
        yield
        yield dut.barrier_done_pulse.eq(0)
        for _ in range(30):
            yield

    run(dut, h, main)
    assert res["irqs"] == [0b10]
    assert res["irqs2"] == [0b10, 0b10]
    assert P.unpack_status(h.read_bytes(0x30040, 16))["barrier_done"] == 1
    assert P.unpack_status(h.read_bytes(0x30000, 16))["barrier_done"] == 0


# ---------------------------------------------------------------------------------------
# DMA helpers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_payload", [64, 256])
def test_dma_writer_splits(max_payload):
    rng = random.Random(max_payload)
    dut = DmaWriter(64, max_payload)
    cmds = [(rng.randrange(0, 1 << 20) * 8 + (1 << 40), rng.randint(1, 200)) for _ in range(25)]
    cmds += [(4096 - 8, 3), (4096 * 5 - max_payload + 8, 40)]
    got = []

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

    @passive
    def sink():
        cur = None
        k = 0
        while True:
            yield dut.source.ready.eq(int(k % 5 != 0))
            k += 1
            yield
            if (yield dut.source.valid) and (yield dut.source.ready):
                if (yield dut.source.first):
                    cur = [(yield dut.source.adr), (yield dut.source.len), []]
                cur[2].append((yield dut.source.dat))
                if (yield dut.source.last):
                    got.append(cur)

    run_simulation(dut, [feed(), sink()])
    pos = 0
    for adr, n in cmds:
        a, left = adr, n
        while left:
            radr, dw, data = got[pos]
            pos += 1
            assert radr == a and dw * 4 == len(data) * 8
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
    h = SimHost(dut)
    W = 0x40000
    _desc_setup(h, 0, [dict(addr=W, length=64, dst_node=1, tag=t) for t in range(12)])
    res = {}

    def main():
        yield from h.configure(0, win_base=W, win_size=0x1000, tx_log2=4)
        h.tx_ready = False                           # the network is blocked
        yield from h.wb_write(R.TX_TAIL, 12)
        yield from h.pio(0, P.pack_header(dst_node=1, length=8, tag=99), bytes(8))
        for _ in range(100):
            yield
        res["busy"] = (yield from h.wb_read(R.STATUS)) & int(P.StatusBit.PIO_BUSY)
        yield dut.cfg_enable.eq(0)                   # driver: disable (same addresses)
        yield dut.cfg_write.eq(1)
        yield
        yield dut.cfg_write.eq(0)
        for _ in range(10):
            yield
        res["state_blocked"] = yield dut.cfg_state
        h.tx_ready = True
        for _ in range(200):
            yield
        res["state"] = yield dut.cfg_state
        res["pio_done"] = yield dut.state.pio_done[0]
        res["tx_done"] = yield dut.state.tx_done[0]

    run(dut, h, main)
    assert res["busy"]
    assert res["state_blocked"] & 0b11 == 0          # disabled, PIO flushed
    assert res["state_blocked"] & 0b100               # a fetched descriptor still in flight
    assert res["state"] & 0b10111 == 0                # nothing in flight, nothing active
    assert res["pio_done"] == 1
    assert 99 not in [p[1] for p in h.tx]             # the PIO packet was never sent
    assert 1 <= res["tx_done"] < 12                   # fetched ones completed, others not
    assert [p[1] for p in h.tx] == list(range(res["tx_done"]))
