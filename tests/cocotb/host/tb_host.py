"""cocotb tests of HostInterface in single-node loopback (see test_host_cocotb.py).

Every test resets the DUT, builds a fresh host model (memory, DMA servers, MMIO
master) and contexts, and ends by checking that the host model saw no protocol
violation and no stray DMA access.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from paranic.spec import protocol as P
from model.host import NicContext, PortConfig, reassemble
from model.pcie_cocotb import HostModel

N_CTX = int(os.environ.get("BENCH_N_CTX", "4"))
MTU = int(os.environ.get("BENCH_MTU", "256"))
MAX_REQ = int(os.environ.get("BENCH_MAX_REQUEST_BYTES", "512"))
MAX_PAY = int(os.environ.get("BENCH_MAX_PAYLOAD_BYTES", "256"))
NODE = 0x5A3
SOMEOM = int(P.Flags.SOM | P.Flags.EOM)
R = P.CtxReg


def cnt(dut, name: str) -> int:
    return int(getattr(dut, "cnt_" + name).value)


def counters(dut) -> dict:
    names = ("err_unknown_ctx", "err_length", "err_desc", "err_pio", "err_ptr", "err_rx",
             "err_dma", "rx_packets", "tx_packets")
    return {n: cnt(dut, n) for n in names}


def delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


async def setup(dut, rx_log2=(3, 3, 3, 3), read_latency=60, rcb=64, seed=1, rd_ready=None):
    random.seed(seed)
    cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
    dut.sys_rst.value = 1
    dut.tx_hold.value = 0
    dut.node_id.value = NODE
    dut.barrier_done_pulse.value = 0
    dut.barrier_done_ctx.value = 0
    host = HostModel(dut, read_latency=read_latency, rcb=rcb, max_request_bytes=MAX_REQ,
                     max_payload_bytes=MAX_PAY, rd_ready=rd_ready)
    host.start()
    cfg = PortConfig(dut)
    for _ in range(4):
        await RisingEdge(dut.sys_clk)
    dut.sys_rst.value = 0
    await RisingEdge(dut.sys_clk)
    ctxs = []
    for c in range(N_CTX):
        x = NicContext(host, cfg, c, mtu=MTU, rx_log2=rx_log2[c % len(rx_log2)], tx_log2=3)
        await x.setup()
        ctxs.append(x)
    return host, cfg, ctxs


def rbytes(n: int) -> bytes:
    return bytes(random.getrandbits(8) for _ in range(n))


def check_clean(host) -> None:
    assert host.errors == [], "\n".join(host.errors[:20])


async def settle(host, n=400):
    await host.mmio_idle()
    await host.cycles(n)


# -------------------------------------------------------------------------------------------


@cocotb.test()
async def pio_loopback_stamps_source(dut):
    """PIO to the own node / another context; forged src fields are overridden."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    sizes = [0, 1, 7, 8, 100, MTU - 8, MTU]
    for i, n in enumerate(sizes):
        payload = rbytes(n)
        tag = 0x1122334455667700 + i
        await c0.pio_send(NODE, 1, payload, tag=tag, src_node=0xABC, src_ctx=3, vc=1, direct=2, rt=1, rsvd=0x3,
                          flags=SOMEOM | int(P.Flags.BAR_RELEASE))
        (p,) = await c1.recv(1)
        h = p.header
        assert (h["src_node"], h["src_ctx"]) == (NODE, 0), h
        assert (h["dst_node"], h["dst_ctx"], h["type"], h["length"], h["tag"]) == \
            (NODE, 1, P.PacketType.DATA, n, tag), h
        assert (h["vc"], h["direct"], h["rt"], h["rsvd"], h["flags"]) == (0, 0, 0, 0, SOMEOM), h
        assert p.payload == payload
    s = await c0.wait_status(pio_done=len(sizes))
    assert s == dict(pio_done=len(sizes), tx_done=0, barrier_done=0, errors=0)
    assert await c0.reg(R.PIO_DONE) == len(sizes)
    assert await c1.reg(R.RX_TAIL) == len(sizes)
    assert await c0.reg(R.STATUS) == int(P.StatusBit.ENABLED)
    c = counters(dut)
    assert (c["tx_packets"], c["rx_packets"]) == (len(sizes), len(sizes))
    assert sum(v for k, v in c.items() if k.startswith("err")) == 0, c
    check_clean(host)


@cocotb.test()
async def dma_sizes_som_eom(dut, **kw):
    """DMA sends of 0, 1, 7, 8, mtu-1, mtu, mtu+1, 10*mtu+3 bytes, aligned and not."""
    host, cfg, (c0, c1, c2, _, *_) = await setup(dut, **kw)
    sizes = [0, 1, 7, 8, MTU - 1, MTU, MTU + 1, 10 * MTU + 3]
    offsets = [0, 3, 5, 0, 1, 8, 7, 2]
    msgs = []
    off = 0
    for i, (n, o) in enumerate(zip(sizes, offsets)):
        data = rbytes(n)
        off = (off + 4095) // 4096 * 4096 + o * 512 + o  # vary 4 KiB position and alignment
        await c0.dma_send(NODE, 2, data, offset=off, tag=0xD0000000 + i,
                          type=P.PacketType.RMA_PUT if i == 3 else P.PacketType.DATA)
        msgs.append((data, 0xD0000000 + i, P.PacketType.RMA_PUT if i == 3 else P.PacketType.DATA))
        off += n
    for data, tag, ty in msgs:
        npk = max(1, -(-len(data) // MTU))
        pk = await c2.recv(npk)
        for j, p in enumerate(pk):
            h = p.header
            exp_len = MTU if j < npk - 1 else len(data) - MTU * (npk - 1)
            flags = (int(P.Flags.SOM) if j == 0 else 0) | (int(P.Flags.EOM) if j == npk - 1 else 0)
            assert (h["length"], h["flags"], h["tag"], h["type"]) == (exp_len, flags, tag, ty), (j, h)
            assert (h["src_node"], h["src_ctx"], h["dst_node"], h["dst_ctx"]) == (NODE, 0, NODE, 2)
        assert reassemble(pk) == data, f"message of {len(data)} bytes differs"
    s = await c0.wait_status(tx_done=len(sizes))
    assert s["tx_done"] == len(sizes) and s["errors"] == 0
    assert await c0.reg(R.TX_HEAD) == len(sizes)
    await host.cycles(50)
    assert c2.poll() == []  # nothing extra
    total = sum(max(1, -(-n // MTU)) for n in sizes)
    assert cnt(dut, "tx_packets") == total and cnt(dut, "rx_packets") == total
    # Every read request stayed inside ctx0's TX ring or window (host model checks the
    # region); the window reads cover each message's 8-byte aligned span exactly once.
    assert c0.window.reads == sum((o % 8 + n + 7) // 8 * 8 if n else 0
                                  for n, o in zip(sizes, offsets))
    assert c0.tx_ring.reads == len(sizes) * P.TX_DESC_BYTES
    check_clean(host)


@cocotb.test()
async def rx_ring_wrap_and_backpressure(dut):
    """A 4-slot ring: the NIC waits when it is full (never drops), order is kept."""
    host, cfg, (c0, c1, c2, c3, *_) = await setup(dut, rx_log2=(3, 3, 3, 2))
    msgs = []
    got = []
    for k in range(3):
        for i in range(8):
            data = rbytes(1 + (37 * (8 * k + i)) % (2 * MTU))
            msgs.append(data)
            await c0.dma_send(NODE, 3, data, offset=i * 2 * MTU, tag=8 * k + i, ring=False)
        await c0.ring_tx()
        if k == 0:
            # Nobody consumes: exactly 4 packets land, then the NIC waits.
            await host.wait_for(lambda: c3.peek() is not None, 5000)
            await host.cycles(1500)
            assert await c3.reg(R.RX_TAIL) == 4
            assert await c3.reg(R.STATUS) & int(P.StatusBit.RX_FULL)
            assert (await cfg.state(3)) & (1 << 5)  # ctx_state.rx_full
            assert cnt(dut, "rx_packets") == 4
        # consume slowly, one packet at a time
        want = sum(1 + (len(m) > MTU) for m in msgs)
        while len(got) < want:
            new = c3.poll()
            for q in new:
                got.append(q)
                await c3.consume()
                await host.cycles(30)
            if not new:
                await host.cycles(16)
        await c0.wait_status(tx_done=8 * k + 8)
    await host.cycles(100)
    total = sum(1 + (len(m) > MTU) for m in msgs)
    assert await c3.reg(R.RX_TAIL) == total and total >= 6 * 4  # the ring wrapped 6+ times
    # every message arrived once, whole and in order
    out, cur = [], b""
    for q in got:
        assert q.header["tag"] == len(out)
        cur += q.payload
        if q.header["flags"] & int(P.Flags.EOM):
            out.append(cur)
            cur = b""
    assert out == msgs
    assert [q.slot for q in got] == [i % 4 for i in range(total)]
    assert cnt(dut, "err_rx") == 0 and cnt(dut, "err_unknown_ctx") == 0
    check_clean(host)


@cocotb.test()
async def rx_order_across_wrap(dut):
    """Every packet of a long PIO stream arrives once, in order, through a 2-slot ring."""
    host, cfg, (c0, c1, *_) = await setup(dut, rx_log2=(3, 1))
    n = 40
    sent = []

    async def sender():
        for i in range(n):
            d = i.to_bytes(4, "little") + rbytes(4 + (i * 13) % 60)
            sent.append(d)
            await c0.pio_send(NODE, 1, d, tag=i)

    cocotb.start_soon(sender())
    got = []
    while len(got) < n:
        for p in c1.poll():
            got.append(p)
            if len(got) % 3 == 0:
                await host.cycles(200)  # a slow consumer
            await c1.consume()
        await host.cycles(8)
    assert [p.header["tag"] for p in got] == list(range(n))
    assert [p.payload for p in got] == sent
    assert [p.slot for p in got] == [i % 2 for i in range(n)]
    check_clean(host)


@cocotb.test()
async def dma_isolation(dut):
    """Descriptors outside the window (or bad type/length) are refused, never read."""
    host, cfg, (c0, c1, c2, _, *_) = await setup(dut)
    before = counters(dut)
    W = c0.window
    bad = [
        dict(addr=c1.window.base, length=64),                 # another context's window
        dict(addr=W.base + W.size - 8, length=16),            # straddles the end
        dict(addr=W.base - 8, length=16),                     # starts before
        dict(addr=W.base + W.size, length=1),                 # just after
        dict(addr=W.base, length=P.MAX_DMA_LENGTH + 1),       # too long
        dict(addr=(1 << 64) - 8, length=64),                  # wraps around 2**64
    ]
    for b in bad:
        await c0.dma_send(NODE, 2, b"", addr=b["addr"], length=b["length"])
    await c0.dma_send(NODE, 2, b"", addr=W.base, length=64, type=P.PacketType.BARRIER)
    await c0.dma_send(NODE, 2, b"", addr=W.base, length=64, type=P.PacketType.CONTROL)
    await c0.dma_send(NODE, 2, b"", addr=W.base, length=64, type=7)   # no such PacketType
    nbad = len(bad) + 3
    s = await c0.wait_status(tx_done=nbad)
    assert s["errors"] == nbad and s["tx_done"] == nbad
    await settle(host)
    d = delta(counters(dut), before)
    assert d == {"err_desc": nbad}, d
    assert c1.window.reads == 0 and W.reads == 0
    assert c2.poll() == []
    # The engine is not wedged: a good descriptor (last byte of the window) goes.
    data = rbytes(5)
    await c0.dma_send(NODE, 2, data, offset=W.size - 5, tag=77)
    (p,) = await c2.recv(1)
    assert p.payload == data and p.header["tag"] == 77
    # TX_TAIL beyond the ring or backwards is refused and counted.
    await c0.ring_tx(c0.tx_tail + 9)             # 9 > 8 slots
    await c0.ring_tx(c0.tx_tail - 1)             # backwards
    await settle(host, 100)
    assert await c0.reg(R.TX_HEAD) == nbad + 1
    assert cnt(dut, "err_ptr") == 2
    s = await c0.wait_status(errors=nbad + 2)
    assert s["errors"] == nbad + 2
    # RX_HEAD ahead of the tail is refused.
    await c2.host.write32(c2.page + R.RX_HEAD, 5)
    await settle(host, 20)
    assert cnt(dut, "err_ptr") == 3
    # still working
    await c0.dma_send(NODE, 2, data, offset=0, tag=78)
    (p,) = await c2.recv(1)
    assert p.header["tag"] == 78
    check_clean(host)


@cocotb.test()
async def unknown_and_disabled_contexts(dut):
    """Packets for absent/disabled contexts are dropped and counted; others go on."""
    host, cfg, (c0, c1, c2, c3, *_) = await setup(dut)
    await cfg.write_ctx(2, enable=0, rx_base=c2.rx_ring.base, rx_log2=3,
                        status_addr=c2.status_blk.base)
    before = counters(dut)
    w2 = c2.rx_ring.writes
    for dst in (2, N_CTX, 63, 1):
        await c0.pio_send(NODE, dst, rbytes(24), tag=dst)
    (p,) = await c1.recv(1)
    assert p.header["tag"] == 1
    await settle(host)
    d = delta(counters(dut), before)
    assert d == {"err_unknown_ctx": 3, "tx_packets": 4, "rx_packets": 1}, d
    assert c2.rx_ring.writes == w2
    # Doorbells on a disabled context or a page >= n_ctx are refused and counted.
    before = counters(dut)
    await host.write32(c2.page + R.PIO_DOORBELL, 0)
    await host.write32(c2.page + R.TX_TAIL, 1)
    await host.write32(N_CTX * P.CTX_PAGE_BYTES + R.PIO_DOORBELL, 0)
    await host.write32(N_CTX * P.CTX_PAGE_BYTES + 0x800, 0x12345678)  # window of an absent ctx
    assert await host.read32(N_CTX * P.CTX_PAGE_BYTES + R.STATUS) == 0
    assert await host.read32(c2.page + R.STATUS) == 0            # disabled
    assert await host.read32(c0.page + 0x7F0) == 0               # undefined offset
    assert await host.read32(c0.page + R.PIO_DOORBELL) == 0      # write-only
    await host.write32(c0.page + 0x7F0, 0xFFFFFFFF)              # ignored
    await settle(host, 50)
    d = delta(counters(dut), before)
    assert d == {"err_pio": 3}, d
    # Contexts 0/1 unaffected.
    await c0.pio_send(NODE, 1, b"ok", tag=9)
    (p,) = await c1.recv(1)
    assert p.payload == b"ok"
    check_clean(host)


@cocotb.test()
async def bad_pio_headers(dut):
    """Bad PIO length or type: nothing sent, errors and pio_done both count."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    before = counters(dut)
    await c0.pio_send(NODE, 1, rbytes(MTU), length=MTU + 1)
    await c0.pio_send(NODE, 1, rbytes(8), length=(1 << 14) - 1)
    await c0.pio_send(NODE, 1, rbytes(8), type=P.PacketType.BARRIER)
    await c0.pio_send(NODE, 1, rbytes(8), type=P.PacketType.CONTROL)
    good = rbytes(40)
    await c0.pio_send(NODE, 1, good, tag=5)
    (p,) = await c1.recv(1)
    assert p.payload == good and p.header["tag"] == 5
    s = await c0.wait_status(pio_done=5)
    assert s == dict(pio_done=5, tx_done=0, barrier_done=0, errors=4)
    assert await c0.reg(R.ERRORS) == 4
    await settle(host)
    d = delta(counters(dut), before)
    assert d == {"err_length": 2, "err_pio": 2, "tx_packets": 1, "rx_packets": 1}, d
    check_clean(host)


@cocotb.test()
async def pio_window_writes_while_busy(dut):
    """Window writes while busy are refused and never corrupt the packet in flight."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    dut.tx_hold.value = 1
    a = bytes(range(64))
    await c0.pio_send(NODE, 1, a, tag=1)
    await host.mmio_idle()
    await host.cycles(10)
    assert await c0.reg(R.STATUS) & int(P.StatusBit.PIO_BUSY)
    before = counters(dut)
    await c0.pio_write_window(P.pack_header(dst_node=NODE, dst_ctx=1, length=64, tag=2)
                              + bytes([0xEE] * 64), wait=True)   # 10 64-bit stores refused
    await c0.pio_doorbell(wait=True)                             # doorbell while busy: refused
    await host.cycles(1)   # a write is acknowledged in its own cycle; counted at its end
    d = delta(counters(dut), before)
    assert d == {"err_pio": 21}, d
    s = await c0.wait_status(pio_done=1)                         # the refused doorbell
    assert s["errors"] == 1
    dut.tx_hold.value = 0
    (p,) = await c1.recv(1)
    assert p.payload == a and p.header["tag"] == 1
    await c0.wait_status(pio_done=2)
    # The window was spoiled: the next doorbell is refused too, nothing is sent.
    await c0.pio_doorbell()
    s = await c0.wait_status(pio_done=3)
    assert s["errors"] == 2
    await settle(host, 200)
    assert c1.poll() == []
    # A freshly written window goes out.
    b = rbytes(33)
    await c0.pio_send(NODE, 1, b, tag=4)
    (p,) = await c1.recv(1)
    assert p.payload == b and p.header["tag"] == 4
    assert c0.status()["errors"] == 2
    check_clean(host)


@cocotb.test()
async def msi_only_when_armed(dut):
    """IRQ_ARM: one pulse for the next packet, none unarmed, at once if behind."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    await c0.pio_send(NODE, 1, b"x" * 8)
    await c1.recv(1)
    await settle(host, 100)
    assert host.irqs() == []                      # not armed: no MSI
    await c1.arm_irq(wait=True)                   # seen = 1 = tail: armed
    await host.cycles(20)
    assert host.irqs() == []
    assert await c1.reg(R.STATUS) & int(P.StatusBit.IRQ_ARMED)
    await c0.pio_send(NODE, 1, b"y" * 16)
    await host.wait_for(lambda: host.irqs(), 5000, what="MSI")
    cyc, ctx = host.irq_log[0]
    assert ctx == 1
    # the valid word was written (request on the port) before the MSI
    vaddr = c1.slot_addr(1) + P.rx_valid_offset(MTU)
    assert any(w.adr == vaddr and w.cycle <= cyc for w in host.write_requests)
    (p,) = await c1.recv(1)
    assert p.payload == b"y" * 16
    assert not (await c1.reg(R.STATUS) & int(P.StatusBit.IRQ_ARMED))
    await c0.pio_send(NODE, 1, b"z" * 8)          # disarmed: no second MSI
    await c1.recv(1)
    await settle(host, 100)
    assert host.irqs() == [1]
    await c1.arm_irq(seen=1, wait=True)           # behind (tail = 3): MSI at once
    await host.cycles(5)
    assert host.irqs() == [1, 1]
    assert not (await c1.reg(R.STATUS) & int(P.StatusBit.IRQ_ARMED))
    await c1.arm_irq(wait=True)                   # up to date: armed
    await c0.pio_send(NODE, 0, b"other ctx")      # a packet for ctx 0 does not fire ctx 1
    await c0.recv(1)
    await settle(host, 100)
    assert host.irqs() == [1, 1]
    await c0.pio_send(NODE, 1, b"w")
    await host.wait_for(lambda: len(host.irqs()) == 3, 5000, what="MSI")
    assert host.irqs() == [1, 1, 1]
    check_clean(host)


@cocotb.test()
async def barrier_doorbell_and_status(dut):
    """BARRIER doorbell -> barrier_enter pulse; barrier_done input -> status block."""
    host, cfg, (c0, c1, c2, _, *_) = await setup(dut)
    seen = []

    async def mon():
        while True:
            await RisingEdge(dut.sys_clk)
            if int(dut.barrier_enter.value):
                seen.append(int(dut.barrier_enter_ctx.value))

    t = cocotb.start_soon(mon())
    await host.write32(c2.page + R.BARRIER, 0)
    await host.write32(c1.page + R.BARRIER, 0)
    await host.cycles(5)
    assert seen == [2, 1]
    for _ in range(3):
        dut.barrier_done_ctx.value = 2
        dut.barrier_done_pulse.value = 1
        await RisingEdge(dut.sys_clk)
        dut.barrier_done_pulse.value = 0
        await RisingEdge(dut.sys_clk)
    s = await c2.wait_status(barrier_done=3)
    assert s == dict(pio_done=0, tx_done=0, barrier_done=3, errors=0)
    assert c1.status()["barrier_done"] == 0
    t.cancel()
    check_clean(host)


@cocotb.test()
async def ctx_reset_and_reuse(dut):
    """ctx_reset zeroes a context's pointers and counters and its PIO buffer (pio_busy
    until the buffer is zero, as the hand-over sequence waits); it works afterwards."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    for i in range(3):
        await c0.pio_send(NODE, 1, rbytes(16), tag=i)
    await c1.recv(3)
    await c0.wait_status(pio_done=3)
    await cfg.reset_ctx(1)
    await cfg.reset_ctx(0)
    assert (await cfg.state(0)) & P.CtxState.PIO_BUSY     # the buffer is being zeroed
    for _ in range(10_000):
        if not (await cfg.state(0)) & P.CtxState.PIO_BUSY:
            break
    else:
        raise AssertionError("ctx 0's PIO buffer clear never ended")
    c0.pio_rung = 0
    c1.rx_next = c1.rx_freed = 0
    zero = dict(pio_done=0, tx_done=0, barrier_done=0, errors=0)
    await host.wait_for(lambda: c0.status() == zero, 500, what="status block rewritten")
    assert await c1.reg(R.RX_TAIL) == 0
    # the old valid words are stale now: slot 0 holds count 1 from before, so clear the
    # ring as a driver would before handing it out again
    host.mem.write(c1.rx_ring.base, bytes(c1.rx_ring.size))
    d = rbytes(20)
    await c0.pio_send(NODE, 1, d, tag=42)
    (p,) = await c1.recv(1)
    assert p.payload == d and p.slot == 0
    check_clean(host)


@cocotb.test()
async def ctx_close_waits_for_the_nic(dut):
    """CLOSE (paranic/pn_ctxseq.h, libparanic's C code) disables the context at once but
    resets it only when the NIC is done with it: here a PIO packet held in the transmit
    path. Then OPEN hands it to a new owner, which sends again."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    dut.tx_hold.value = 1
    await c0.pio_send(NODE, 1, b"in flight", tag=7)
    await host.mmio_idle()
    await host.cycles(10)
    assert (await cfg.state(0)) & P.CtxState.PIO_BUSY
    close = cocotb.start_soon(c0.teardown())
    await host.cycles(2000)
    assert not close.done(), "the context was reset with a PIO packet in flight"
    assert not (await cfg.state(0)) & P.CtxState.ENABLED
    dut.tx_hold.value = 0
    await close
    assert (await cfg.state(0)) & (P.CtxState.ENABLED | P.CTX_BUSY_MASK) == 0
    host.mem.write(c0.status_blk.base, bytes(c0.status_blk.size))
    await c0.configure()
    assert (await cfg.state(0)) & P.CtxState.ENABLED
    await c0.pio_send(NODE, 1, b"new owner", tag=8)
    got = await c1.recv(2, timeout=20000)
    assert [p.header["tag"] for p in got] == [7, 8] and got[1].payload == b"new owner"
    await c0.wait_status(pio_done=1)
    check_clean(host)


@cocotb.test()
async def dma_throughput(dut):
    """Long DMA message: payload reads pipelined, tx_source near 1 word/cycle."""
    host, cfg, (c0, c1, *_) = await setup(dut, rx_log2=(3, 7))
    n = 64 * MTU
    data = rbytes(n)
    w0 = int(dut.tx_words.value)
    t0 = host.cycle
    await c0.dma_send(NODE, 1, data, offset=0)
    npk = n // MTU
    words = npk * P.packet_words(MTU)
    t_first = await host.wait_for(lambda: int(dut.tx_words.value) > w0, 2000, every=1)
    t_last = await host.wait_for(lambda: int(dut.tx_words.value) >= w0 + words, 20000, every=1)
    pk = await c1.recv(npk, consume=False)
    t_rx = host.cycle
    assert reassemble(pk) == data
    rate = words / (t_last - t_first)
    dut._log.info(f"DMA {n} B in {npk} packets: first word {t_first - t0} cycles after TX_TAIL, "
                  f"tx {rate:.3f} words/cycle ({words} words in {t_last - t_first} cycles), "
                  f"all in RX ring after {t_rx - t0} cycles, read latency {host.read_latency}")
    assert rate > 0.9, rate
    check_clean(host)


@cocotb.test()
async def pio_latency(dut):
    """Cycles from the PIO doorbell to the first word on tx_source and to the valid word."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    res = []
    for n in (8, 64, MTU):
        payload = rbytes(n)
        await c0.wait_window()
        await c0.pio_write_window(P.pack_header(dst_node=NODE, dst_ctx=1, length=n) + payload,
                                  wait=True)
        w0 = int(dut.tx_words.value)
        nreq = len(host.write_requests)
        await c0.pio_doorbell(wait=True)
        t_db = host.cycle  # the doorbell write was presented one cycle before its ack
        t_tx = await host.wait_for(lambda: int(dut.tx_words.value) > w0, 200, every=1)
        vaddr = c1.slot_addr(c1.rx_next) + P.rx_valid_offset(MTU)
        await host.wait_for(lambda: any(w.adr == vaddr for w in host.write_requests[nreq:]),
                            500, every=1)
        t_valid = [w.cycle for w in host.write_requests[nreq:] if w.adr == vaddr][0]
        (p,) = await c1.recv(1)
        assert p.payload == payload
        res.append((n, t_tx - t_db, t_valid - t_db))
    for n, a, b in res:
        dut._log.info(f"PIO {n:4d} B: doorbell ack -> first tx word {a} cycles, "
                      f"-> valid word written {b} cycles (loopback FIFO is store-and-forward)")
    assert all(a <= 4 for _, a, _ in res), res
    check_clean(host)


@cocotb.test()
async def fuzz_bad_context_does_not_disturb_others(dut):
    """Context 3 writes random MMIO values and random descriptors; ctx 0 -> ctx 1
    traffic is delivered complete and in order, no stray DMA, nothing wedges."""
    host, cfg, (c0, c1, c2, c3, *_) = await setup(dut)
    rng = random.Random(7)
    stop = False

    async def vandal():
        regs = [R.PIO_DOORBELL, R.TX_TAIL, R.RX_HEAD, R.BARRIER, R.IRQ_ARM, R.STATUS, 0x28, 0x7FC]
        while not stop:
            k = rng.random()
            if k < 0.4:   # window garbage (headers with random fields)
                a = P.PIO_WINDOW_OFFSET + 8 * rng.randrange(P.PIO_WINDOW_BYTES // 8)
                if rng.random() < 0.5:
                    a = P.PIO_WINDOW_OFFSET
                await host.write32(c3.page + a, rng.getrandbits(32), wait=False)
            elif k < 0.7:
                v = rng.choice([rng.getrandbits(32), rng.randrange(16), 0xFFFFFFFF])
                await host.write32(c3.page + rng.choice(regs), v, wait=False)
            else:         # random descriptors, some inside the window
                slot = rng.randrange(c3.tx_slots)
                addr = rng.choice([rng.getrandbits(64), c3.window.base + rng.randrange(c3.window.size)])
                host.mem.write(c3.tx_ring.base + slot * P.TX_DESC_BYTES, P.pack_tx_desc(
                    addr=addr, length=rng.choice([rng.getrandbits(32), rng.randrange(3 * MTU)]),
                    dst_node=rng.getrandbits(12), dst_ctx=rng.getrandbits(6),
                    type=rng.randrange(8), tag=rng.getrandbits(64)))
            if rng.random() < 0.05:   # the vandal keeps its own ring drained (no HOL)
                t = await host.read32(c3.page + R.RX_TAIL)
                await host.write32(c3.page + R.RX_HEAD, t, wait=False)
            await host.cycles(rng.randrange(1, 6))

    v = cocotb.start_soon(vandal())
    sent = []
    got = []
    for i in range(30):
        d = rbytes(rng.randrange(0, 2 * MTU))
        if i % 2:
            await c0.pio_send(NODE, 1, d[:MTU], tag=i)
            sent.append(d[:MTU])
        else:
            await c0.dma_send(NODE, 1, d, offset=(i % 8) * 2 * MTU, tag=i)
            sent.append(d)
        got += c1.poll()
        await c1.consume()
    # wait for everything from ctx 0
    def mine():
        return [p for p in got if p.header["src_ctx"] == 0]
    while sum(1 for p in mine() if p.header["flags"] & int(P.Flags.EOM)) < len(sent):
        got += c1.poll()
        await c1.consume()
        await host.cycles(16)
    stop = True
    await host.cycles(200)
    msgs, cur = [], b""
    for p in mine():
        assert p.header["tag"] == len(msgs)
        cur += p.payload
        if p.header["flags"] & int(P.Flags.EOM):
            msgs.append(cur)
            cur = b""
    assert msgs == sent
    assert c0.status()["errors"] == 0
    check_clean(host)
    # the vandal's context is still usable after a reset
    dut._log.info(f"fuzz: counters {counters(dut)}, ctx3 status {c3.status()}")
    await c3.teardown()
    await c3.configure()
    host.mem.write(c3.rx_ring.base, bytes(c3.rx_ring.size))
    await c3.pio_send(NODE, 1, b"back", tag=99)
    (p,) = await c1.recv(1)
    assert p.payload == b"back" and p.header["src_ctx"] == 3
    check_clean(host)


@cocotb.test()
async def pio_dma_send_order(dut):
    """A context's PIO and DMA sends leave in the order it posted them."""
    host, cfg, (c0, c1, *_) = await setup(dut)
    big = rbytes(10 * MTU + 3)
    await c0.dma_send(NODE, 1, big, offset=0, tag=0)          # long: reads take a while
    await c0.pio_send(NODE, 1, b"pio-after-dma", tag=1)         # must not overtake it
    await c0.dma_send(NODE, 1, b"dma-after-pio", offset=16 * MTU, tag=2)
    await c0.pio_send(NODE, 1, b"pio-2", tag=3)                 # waits for the window
    pk = await c1.recv(11 + 3)
    assert [p.header["tag"] for p in pk] == [0] * 11 + [1, 2, 3]
    assert reassemble(pk[:11]) == big
    assert [p.payload for p in pk[11:]] == [b"pio-after-dma", b"dma-after-pio", b"pio-2"]
    check_clean(host)


@cocotb.test()
async def dma_sizes_short_latency_backpressure(dut):
    """The same DMA sizes with a 3-cycle host, 128-byte completions and a read
    request port that is busy 40 % of the time."""
    rng = random.Random(3)
    await dma_sizes_som_eom.func(dut, read_latency=3, rcb=128,
                                 rd_ready=lambda c: rng.random() < 0.6)
