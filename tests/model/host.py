"""A host (PC) model for cocotb benches of ParaNIC's HostInterface / NicCore.

Layers, bottom up:

* :class:`HostMemory`: sparse, bytearray-backed host memory with an allocator. Every
  allocation is a :class:`Region` that says whether the NIC may DMA-read and/or
  DMA-write it; any NIC access that is not entirely inside a region allowing it is
  recorded in :attr:`HostModel.errors` (tests assert the list stays empty).
* :class:`HostModel`: one node's PCIe side, driven once per clock cycle by a single
  coroutine: a Wishbone master for MMIO (``write32``/``read32``/``write64``), a DMA
  read server (completions in request order after ``read_latency`` cycles, split at
  ``rcb``-byte boundaries, one beat per cycle) and a DMA write server (applies posted
  writes), both checking ``max_request_bytes``/``max_payload_bytes``, the 4 KiB rule
  and request framing; it also records MSI pulses.
* :class:`PortConfig`: the privileged per-context registers as the HostInterface's
  plain ``cfg_*`` ports (a NicCore bench uses ``tests.model.csr.CsrConfig``, the same
  registers as CSRs); the context sequences run on either (``tests.model.ctxseq``).
* :class:`NicContext`: the "driver + user library": set a context up (rings, status
  block, DMA window), PIO send, DMA send, poll/consume the RX ring, wait for the
  status block.

Signal names are ``<prefix><name>``: ``bus_adr`` ``bus_dat_w`` ``bus_dat_r`` ``bus_sel``
``bus_cyc`` ``bus_stb`` ``bus_we`` ``bus_ack``; ``dma_rd_source_valid/ready/first/last``
and ``dma_rd_source_payload_{we,adr,len,dat}``; ``dma_rd_sink_valid/ready/first/last``
and ``dma_rd_sink_payload_{dat,len,end,err,adr}``; the same for ``dma_wr_source``;
``irq``. With ``prefix="n0_"`` the same model drives node 0 of a multi-node top.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Callable

import cocotb
from cocotb.triggers import Event, RisingEdge

from paranic.spec import protocol as P

from .ctxseq import CtxRegs

PAGE = 4096
MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------------------------
# Host memory
# ---------------------------------------------------------------------------------------


@dataclass
class Region:
    base: int
    size: int
    name: str
    dma_read: bool = False
    dma_write: bool = False
    reads: int = 0        #: DMA read bytes served from this region
    writes: int = 0       #: DMA write bytes into this region

    @property
    def end(self) -> int:
        return self.base + self.size

    def contains(self, addr: int, n: int) -> bool:
        return self.base <= addr and addr + n <= self.end


class HostMemory:
    """Sparse byte-addressed memory (4 KiB pages, zero when never written) + allocator."""

    def __init__(self, base: int = 0x1_2340_0000) -> None:
        self.pages: dict[int, bytearray] = {}
        self.regions: list[Region] = []
        self._next = base

    def alloc(self, size: int, name: str, align: int = 64, dma_read: bool = False,
              dma_write: bool = False, guard: int = 256) -> Region:
        """Allocate ``size`` bytes aligned to ``align``, with ``guard`` unallocated bytes
        before it (so an off-by-a-little access is caught)."""
        base = (self._next + guard + align - 1) // align * align
        self._next = base + size
        r = Region(base, size, name, dma_read, dma_write)
        self.regions.append(r)
        return r

    def read(self, addr: int, n: int) -> bytes:
        out = bytearray()
        while n > 0:
            pg, off = divmod(addr, PAGE)
            k = min(n, PAGE - off)
            page = self.pages.get(pg)
            out += page[off:off + k] if page is not None else bytes(k)
            addr += k
            n -= k
        return bytes(out)

    def write(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        i = 0
        while i < len(data):
            pg, off = divmod(addr + i, PAGE)
            k = min(len(data) - i, PAGE - off)
            page = self.pages.setdefault(pg, bytearray(PAGE))
            page[off:off + k] = data[i:i + k]
            i += k

    def read64(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 8), "little")

    def write64(self, addr: int, v: int) -> None:
        self.write(addr, (v & MASK64).to_bytes(8, "little"))

    def region_for(self, addr: int, n: int, write: bool) -> Region | None:
        for r in self.regions:
            if r.contains(addr, n) and (r.dma_write if write else r.dma_read):
                return r
        return None


# ---------------------------------------------------------------------------------------
# Per-node PCIe model
# ---------------------------------------------------------------------------------------


@dataclass
class _MmioOp:
    addr: int
    data: int
    write: bool
    sel: int = 0xF
    done: Event = field(default_factory=Event)
    result: int = 0


@dataclass
class _ReadJob:
    due: int
    adr: int
    nbytes: int


class HostModel:
    """PCIe side of one node: MMIO master, DMA read/write servers, MSI monitor.

    Parameters: ``dut`` and ``prefix`` (signal names, see module doc), ``clk`` (default
    ``dut.sys_clk``), ``mem`` (share one :class:`HostMemory` between nodes only if
    they really share a host), ``read_latency`` cycles from read request to first
    completion (default 60, about 0.5 us at 125 MHz), ``rcb`` completion split
    boundary (64 or 128 bytes), ``max_request_bytes``/``max_payload_bytes`` limits
    to check, ``rd_ready``: callable(cycle) -> bool to back-pressure read requests,
    ``rst`` the reset input (default ``dut.sys_rst``): while it is high the model
    forgets requests in flight and ignores the DUT's outputs.
    """

    def __init__(self, dut, prefix: str = "", clk=None, mem: HostMemory | None = None,
                 read_latency: int = 60, rcb: int = 64, max_request_bytes: int = 512,
                 max_payload_bytes: int = 256,
                 rd_ready: Callable[[int], bool] | None = None, rst=None) -> None:
        self.dut = dut
        self.prefix = prefix
        self.clk = clk if clk is not None else dut.sys_clk
        self.mem = mem if mem is not None else HostMemory()
        self.read_latency = read_latency
        self.rcb = rcb
        self.max_request_bytes = max_request_bytes
        self.max_payload_bytes = max_payload_bytes
        self.rd_ready_fn = rd_ready
        self.errors: list[str] = []
        self.cycle = 0
        self.irq_log: list[tuple[int, int]] = []  # (cycle, ctx)
        self.read_requests: list[tuple[int, int, int]] = []  # (cycle, adr, bytes)
        self.write_requests: list[tuple[int, int, int]] = []
        self.on_write: list[Callable[[int, bytes], None]] = []

        g = lambda n: getattr(dut, prefix + n)  # noqa: E731
        self.wb = {n: g("bus_" + n) for n in ("adr", "dat_w", "dat_r", "sel", "cyc", "stb", "we", "ack")}
        rq = "dma_rd_source_"
        self.rd_valid, self.rd_ready = g(rq + "valid"), g(rq + "ready")
        self.rd_we, self.rd_adr, self.rd_len = (g(rq + "payload_we"), g(rq + "payload_adr"),
                                                g(rq + "payload_len"))
        cp = "dma_rd_sink_"
        self.c_valid, self.c_ready, self.c_first, self.c_last = (
            g(cp + "valid"), g(cp + "ready"), g(cp + "first"), g(cp + "last"))
        self.c_dat, self.c_len, self.c_end, self.c_err, self.c_adr = (
            g(cp + "payload_dat"), g(cp + "payload_len"), g(cp + "payload_end"),
            g(cp + "payload_err"), g(cp + "payload_adr"))
        wq = "dma_wr_source_"
        self.w_valid, self.w_ready, self.w_first, self.w_last = (
            g(wq + "valid"), g(wq + "ready"), g(wq + "first"), g(wq + "last"))
        self.w_we, self.w_adr, self.w_len, self.w_dat = (
            g(wq + "payload_we"), g(wq + "payload_adr"), g(wq + "payload_len"), g(wq + "payload_dat"))
        self.irq = g("irq")
        self.rst = rst if rst is not None else getattr(dut, "sys_rst", None)

        self._mmio_q: collections.deque[_MmioOp] = collections.deque()
        self._mmio_cur: _MmioOp | None = None
        self._rd_q: collections.deque[_ReadJob] = collections.deque()
        self._beats: collections.deque[tuple] = collections.deque()
        self._cpl_driving = False
        self._rd_ready_val = 1
        self._wr: dict | None = None
        self._task = None

    # -- start ---------------------------------------------------------------------------
    def start(self) -> None:
        for h in (self.wb["cyc"], self.wb["stb"], self.wb["we"], self.c_valid):
            h.value = 0
        self.rd_ready.value = 1
        self.w_ready.value = 1
        self.c_err.value = 0
        self._task = cocotb.start_soon(self._run())

    def error(self, msg: str) -> None:
        self.errors.append(f"cycle {self.cycle}: {msg}")

    # -- MMIO ----------------------------------------------------------------------------
    async def write32(self, addr: int, value: int, wait: bool = True, sel: int = 0xF) -> None:
        op = _MmioOp(addr, value & 0xFFFFFFFF, True, sel)
        self._mmio_q.append(op)
        if wait:
            await op.done.wait()

    async def write64(self, addr: int, value: int, wait: bool = True) -> None:
        """A 64-bit store: two 32-bit writes, low word (lower address) first."""
        await self.write32(addr, value & 0xFFFFFFFF, wait=False)
        await self.write32(addr + 4, (value >> 32) & 0xFFFFFFFF, wait=wait)

    async def read32(self, addr: int) -> int:
        op = _MmioOp(addr, 0, False)
        self._mmio_q.append(op)
        await op.done.wait()
        return op.result

    async def mmio_idle(self) -> None:
        """Wait until every queued MMIO access has been acknowledged."""
        while self._mmio_q or self._mmio_cur is not None:
            await RisingEdge(self.clk)

    # -- waiting -------------------------------------------------------------------------
    async def cycles(self, n: int) -> None:
        for _ in range(n):
            await RisingEdge(self.clk)

    async def wait_for(self, pred: Callable[[], bool], timeout: int = 20000, every: int = 8,
                       what: str = "condition") -> int:
        """Poll ``pred`` (host-side, free) every ``every`` cycles; returns the cycle."""
        start = self.cycle
        while not pred():
            if self.cycle - start > timeout:
                raise TimeoutError(f"{what} not reached after {timeout} cycles")
            for _ in range(every):
                await RisingEdge(self.clk)
        return self.cycle

    # -- the per-cycle engine ------------------------------------------------------------
    async def _run(self) -> None:
        clk = self.clk
        while True:
            await RisingEdge(clk)
            self.cycle += 1
            if self.rst is not None and int(self.rst.value):
                self._rd_q.clear()
                self._beats.clear()
                self._wr = None
                if self._cpl_driving:
                    self.c_valid.value = 0
                    self._cpl_driving = False
                continue
            self._mmio_step()
            self._rd_req_step()
            self._cpl_step()
            self._wr_step()
            if int(self.irq.value):
                v = int(self.irq.value)
                for c in range(v.bit_length()):
                    if v >> c & 1:
                        self.irq_log.append((self.cycle, c))

    def _mmio_step(self) -> None:
        wb = self.wb
        cur = self._mmio_cur
        if cur is not None and int(wb["ack"].value):
            if not cur.write:
                cur.result = int(wb["dat_r"].value)
            cur.done.set()
            self._mmio_cur = cur = None
        if cur is None:
            if self._mmio_q:
                op = self._mmio_cur = self._mmio_q.popleft()
                if op.addr & 3:
                    raise ValueError("MMIO address must be 32-bit aligned")
                wb["adr"].value = op.addr >> 2
                wb["dat_w"].value = op.data
                wb["sel"].value = op.sel
                wb["we"].value = int(op.write)
                wb["cyc"].value = 1
                wb["stb"].value = 1
            else:
                wb["cyc"].value = 0
                wb["stb"].value = 0

    def _rd_req_step(self) -> None:
        if self._rd_ready_val and int(self.rd_valid.value):
            adr = int(self.rd_adr.value)
            dw = int(self.rd_len.value) or 1024
            nbytes = dw * 4
            if int(self.rd_we.value):
                self.error(f"write request on the read port at {adr:#x}")
            self._check_req("read", adr, nbytes, self.max_request_bytes, write=False)
            self.read_requests.append((self.cycle, adr, nbytes))
            self._rd_q.append(_ReadJob(self.cycle + self.read_latency, adr, nbytes))
        if self.rd_ready_fn is not None:
            v = int(bool(self.rd_ready_fn(self.cycle)))
            if v != self._rd_ready_val:
                self.rd_ready.value = v
                self._rd_ready_val = v

    def _check_req(self, kind: str, adr: int, nbytes: int, limit: int, write: bool) -> None:
        if nbytes > limit:
            self.error(f"{kind} request of {nbytes} bytes > {limit} at {adr:#x}")
        if adr // 4096 != (adr + nbytes - 1) // 4096:
            self.error(f"{kind} request {adr:#x}+{nbytes} crosses a 4 KiB boundary")
        if adr % 8 or nbytes % 8:
            self.error(f"{kind} request {adr:#x}+{nbytes} not 8-byte aligned")
        r = self.mem.region_for(adr, nbytes, write)
        if r is None:
            self.error(f"stray DMA {kind} {adr:#x}+{nbytes}")
        elif write:
            r.writes += nbytes
        else:
            r.reads += nbytes

    def _cpl_step(self) -> None:
        beats = self._beats
        if self._cpl_driving and int(self.c_ready.value):
            beats.popleft()
        if not beats and self._rd_q and self._rd_q[0].due <= self.cycle:
            job = self._rd_q.popleft()
            data = self.mem.read(job.adr, job.nbytes)
            pos = 0
            while pos < job.nbytes:
                a = job.adr + pos
                k = min(job.nbytes - pos, self.rcb - a % self.rcb)
                chunk = data[pos:pos + k]
                nb = len(chunk) // 8
                for i in range(nb):
                    beats.append((int.from_bytes(chunk[8 * i:8 * i + 8], "little"), i == 0,
                                  i == nb - 1, pos + k == job.nbytes, k // 4, a))
                pos += k
        if beats:
            dat, first, last, end, ln, adr = beats[0]
            self.c_dat.value = dat
            self.c_first.value = first
            self.c_last.value = last
            self.c_end.value = end
            self.c_len.value = ln
            self.c_adr.value = adr & 0xFFFFFFFF
            if not self._cpl_driving:
                self.c_valid.value = 1
                self._cpl_driving = True
        elif self._cpl_driving:
            self.c_valid.value = 0
            self._cpl_driving = False

    def _wr_step(self) -> None:
        if not int(self.w_valid.value):
            return
        first = int(self.w_first.value)
        last = int(self.w_last.value)
        dat = int(self.w_dat.value)
        if first:
            if self._wr is not None:
                self.error("write request started before the previous one ended")
            if not int(self.w_we.value):
                self.error("read request on the write port")
            self._wr = {"adr": int(self.w_adr.value), "dw": int(self.w_len.value) or 1024,
                        "data": bytearray()}
        if self._wr is None:
            self.error("write beat without first")
            return
        self._wr["data"] += dat.to_bytes(8, "little")
        if last:
            w = self._wr
            self._wr = None
            nbytes = w["dw"] * 4
            if len(w["data"]) != nbytes:
                self.error(f"write {w['adr']:#x}: len {nbytes} bytes but {len(w['data'])} sent")
            self._check_req("write", w["adr"], nbytes, self.max_payload_bytes, write=True)
            self.write_requests.append((self.cycle, w["adr"], nbytes))
            data = bytes(w["data"][:nbytes])
            if self.mem.region_for(w["adr"], nbytes, True) is not None:
                self.mem.write(w["adr"], data)
            for cb in self.on_write:
                cb(w["adr"], data)

    # -- helpers for tests --------------------------------------------------------------
    def irqs(self, ctx: int | None = None) -> list[int]:
        return [c for (_, c) in self.irq_log if ctx is None or c == ctx]


# ---------------------------------------------------------------------------------------
# Privileged configuration
# ---------------------------------------------------------------------------------------


class PortConfig(CtxRegs):
    """The per-context registers as the HostInterface's plain ports: ``sel`` is
    ``cfg_ctx``, a field ``<name>`` is ``cfg_<name>``, ``write``/``reset`` strobe
    ``cfg_write``/``cfg_reset`` for one cycle, ``state`` reads ``cfg_state`` (two cycles
    after ``cfg_ctx`` was set). The context sequences run on them
    (:class:`tests.model.ctxseq.CtxRegs`)."""

    STROBES = ("write", "reset")

    def __init__(self, dut, prefix: str = "", clk=None) -> None:
        self.dut = dut
        self.prefix = prefix
        self.clk = clk if clk is not None else dut.sys_clk
        for s in self.STROBES:
            self._sig("cfg_" + s).value = 0

    def _sig(self, n):
        return getattr(self.dut, self.prefix + n)

    async def reg_write(self, name: str, value: int) -> None:
        if name in self.STROBES:
            self._sig("cfg_" + name).value = 1
            await RisingEdge(self.clk)
            self._sig("cfg_" + name).value = 0
            await RisingEdge(self.clk)
        else:
            self._sig("cfg_ctx" if name == "sel" else "cfg_" + name).value = value

    async def reg_read(self, name: str) -> int:
        await RisingEdge(self.clk)
        await RisingEdge(self.clk)
        return int(self._sig("cfg_" + name).value)

    async def cycles(self, n: int) -> None:
        for _ in range(n):
            await RisingEdge(self.clk)


# ---------------------------------------------------------------------------------------
# Driver + user library
# ---------------------------------------------------------------------------------------


@dataclass
class RxPacket:
    header: dict
    payload: bytes
    slot: int
    count: int


class NicContext:
    """One hardware context as a process sees it (after the driver set it up).

    ``setup()`` allocates the RX ring (``2**rx_log2`` slots), the TX descriptor ring
    (``2**tx_log2``), the status block and a DMA window of ``window_bytes``, and hands
    the context over to them (``configure()``: the OPEN sequence of
    ``paranic/pn_ctxseq.h``, run on ``cfg``, a :class:`tests.model.ctxseq.CtxRegs`);
    ``teardown()`` takes it back (CLOSE).
    """

    def __init__(self, host: HostModel, cfg, ctx: int, mtu: int = P.DEFAULT_MTU,
                 rx_log2: int = 3, tx_log2: int = 3, window_bytes: int = 1 << 16,
                 bar_base: int = 0) -> None:
        self.host = host
        self.cfg = cfg
        self.ctx = ctx
        self.mtu = mtu
        self.rx_log2 = rx_log2
        self.tx_log2 = tx_log2
        self.window_bytes = window_bytes
        self.page = bar_base + ctx * P.CTX_PAGE_BYTES
        self.slot_bytes = P.rx_slot_bytes(mtu)
        self.rx_next = 0      # packets taken from the ring (absolute)
        self.rx_freed = 0     # last RX_HEAD written
        self.tx_tail = 0
        self.pio_rung = 0

    @property
    def rx_slots(self) -> int:
        return 1 << self.rx_log2

    @property
    def tx_slots(self) -> int:
        return 1 << self.tx_log2

    async def setup(self) -> None:
        m = self.host.mem
        c = self.ctx
        self.rx_ring = m.alloc(self.rx_slots * self.slot_bytes, f"ctx{c} rx ring", align=4096,
                               dma_write=True)
        self.tx_ring = m.alloc(self.tx_slots * P.TX_DESC_BYTES, f"ctx{c} tx ring", align=4096,
                               dma_read=True)
        self.status_blk = m.alloc(P.STATUS_BLOCK_BYTES, f"ctx{c} status", align=64, dma_write=True)
        self.window = m.alloc(self.window_bytes, f"ctx{c} window", align=4096, dma_read=True)
        await self.configure()

    def _config(self) -> dict[str, int]:
        return dict(rx_base=self.rx_ring.base, rx_log2=self.rx_log2, tx_base=self.tx_ring.base,
                    tx_log2=self.tx_log2, status_addr=self.status_blk.base,
                    win_base=self.window.base, win_size=self.window.size)

    async def configure(self) -> None:
        """Hand the context over to this owner (OPEN: disable, wait until idle, reset,
        program and enable); the rings count from 0 again."""
        await self.cfg.run("open", self.ctx, **self._config())
        self.rx_next = self.rx_freed = self.tx_tail = self.pio_rung = 0

    async def teardown(self) -> None:
        """Take the context back (CLOSE: disable, wait until idle, settle, reset)."""
        await self.cfg.run("close", self.ctx, **self._config())

    # -- transmit --------------------------------------------------------------------------
    async def pio_write_window(self, data: bytes, wait: bool = False) -> None:
        data = bytes(data) + b"\0" * (-len(data) % 8)
        for i in range(0, len(data), 8):
            await self.host.write64(self.page + P.PIO_WINDOW_OFFSET + i,
                                    int.from_bytes(data[i:i + 8], "little"), wait=False)
        if wait:
            await self.host.mmio_idle()

    async def pio_doorbell(self, wait: bool = False) -> int:
        await self.host.write32(self.page + P.CtxReg.PIO_DOORBELL, 0, wait=wait)
        self.pio_rung += 1
        return self.pio_rung

    async def wait_window(self, timeout: int = 50000) -> None:
        """Wait until every doorbell rung so far has left the window (status block)."""
        if self.status()["pio_done"] != self.pio_rung & 0xFFFFFFFF:
            await self.wait_status(timeout, pio_done=self.pio_rung)

    async def pio_send(self, dst_node: int, dst_ctx: int, payload: bytes,
                       type: int = P.PacketType.DATA, tag: int = 0,
                       flags: int = P.Flags.SOM | P.Flags.EOM, wait: bool = False,
                       wait_window: bool = True, **hdr_fields: int) -> int:
        """Stage header + payload in the window and ring the doorbell; returns the
        doorbell number (compare with the status block's pio_done). With
        ``wait_window`` it first waits (status block) until the window is free again."""
        if wait_window:
            await self.wait_window()
        fields = dict(dst_node=dst_node, dst_ctx=dst_ctx, type=int(type), tag=tag,
                      length=len(payload), flags=int(flags))
        fields.update(hdr_fields)
        await self.pio_write_window(P.pack_header(**fields) + bytes(payload))
        return await self.pio_doorbell(wait=wait)

    def write_desc(self, slot_count: int, **fields: int) -> None:
        a = self.tx_ring.base + (slot_count % self.tx_slots) * P.TX_DESC_BYTES
        self.host.mem.write(a, P.pack_tx_desc(**fields))

    async def dma_send(self, dst_node: int, dst_ctx: int, data: bytes, offset: int = 0,
                       type: int = P.PacketType.DATA, tag: int = 0, addr: int | None = None,
                       length: int | None = None, ring: bool = True) -> int:
        """Put ``data`` at window+``offset`` (or describe ``addr``/``length`` as given),
        write a descriptor and (``ring``) bump TX_TAIL; returns the descriptor number."""
        await self.wait_tx_space()
        if addr is None:
            addr = self.window.base + offset
            self.host.mem.write(addr, data)
        if length is None:
            length = len(data)
        self.write_desc(self.tx_tail, addr=addr, length=length, dst_node=dst_node,
                        dst_ctx=dst_ctx, type=int(type), tag=tag, cookie=0xC0FFEE)
        self.tx_tail += 1
        if ring:
            await self.ring_tx()
        return self.tx_tail

    async def wait_tx_space(self, timeout: int = 100000) -> None:
        """Wait (status block) until the TX ring has a free slot."""
        if self.tx_tail - self.status()["tx_done"] >= self.tx_slots:
            await self.wait_status(timeout, tx_done=self.tx_tail - self.tx_slots + 1)

    async def ring_tx(self, value: int | None = None, wait: bool = False) -> None:
        v = self.tx_tail if value is None else value
        await self.host.write32(self.page + P.CtxReg.TX_TAIL, v & 0xFFFFFFFF, wait=wait)

    # -- receive ---------------------------------------------------------------------------
    def slot_addr(self, count: int) -> int:
        return self.rx_ring.base + (count % self.rx_slots) * self.slot_bytes

    def peek(self) -> RxPacket | None:
        """The next packet if its valid word says it is there (no simulation time)."""
        a = self.slot_addr(self.rx_next)
        if self.host.mem.read64(a + P.rx_valid_offset(self.mtu)) != ((self.rx_next + 1) & 0xFFFFFFFF):
            return None
        hdr = P.unpack_header(self.host.mem.read(a, P.HEADER_BYTES))
        n = min(hdr["length"], self.mtu)
        payload = self.host.mem.read(a + P.RX_SLOT_PAYLOAD_OFFSET, n)
        return RxPacket(hdr, payload, self.rx_next % self.rx_slots, self.rx_next)

    def poll(self) -> list[RxPacket]:
        out = []
        while (p := self.peek()) is not None:
            out.append(p)
            self.rx_next += 1
        return out

    async def consume(self, wait: bool = False) -> None:
        """Give the slots of every packet taken so far back to the NIC (RX_HEAD)."""
        self.rx_freed = self.rx_next
        await self.host.write32(self.page + P.CtxReg.RX_HEAD, self.rx_next & 0xFFFFFFFF, wait=wait)

    async def recv(self, n: int, timeout: int = 50000, consume: bool = True) -> list[RxPacket]:
        """Wait for ``n`` packets (consuming as they come when ``consume``)."""
        got: list[RxPacket] = []
        start = self.host.cycle
        while len(got) < n:
            new = self.poll()
            if new:
                got += new
                if consume:
                    await self.consume()
                continue
            if self.host.cycle - start > timeout:
                raise TimeoutError(f"ctx{self.ctx}: {len(got)} of {n} packets after {timeout} cycles")
            await self.host.cycles(8)
        return got

    # -- status ----------------------------------------------------------------------------
    def status(self) -> dict:
        return P.unpack_status(self.host.mem.read(self.status_blk.base, P.STATUS_BLOCK_BYTES))

    async def wait_status(self, timeout: int = 50000, **at_least: int) -> dict:
        def ok():
            s = self.status()
            return all(((s[k] - v) & 0xFFFFFFFF) < (1 << 31) for k, v in at_least.items())
        await self.host.wait_for(ok, timeout, what=f"ctx{self.ctx} status {at_least}")
        return self.status()

    async def reg(self, r: int) -> int:
        return await self.host.read32(self.page + int(r))

    async def arm_irq(self, seen: int | None = None, wait: bool = False) -> None:
        """IRQ_ARM with the packet count software has seen (default: taken so far)."""
        v = self.rx_next if seen is None else seen
        await self.host.write32(self.page + P.CtxReg.IRQ_ARM, v & 0xFFFFFFFF, wait=wait)


def reassemble(packets: list[RxPacket]) -> bytes:
    return b"".join(p.payload for p in packets)
