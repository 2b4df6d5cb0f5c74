"""The host software around a context, for cocotb benches of HostInterface / NicCore.

* :class:`PortConfig`: the privileged per-context registers as the HostInterface's
  plain ``cfg_*`` ports (a NicCore bench uses ``tests.model.csr.CsrConfig``, the same
  registers as CSRs); the context sequences run on either (``tests.model.ctxseq``).
* :class:`NicContext`: the "driver + user library": set a context up (rings, status
  block, DMA window), PIO send, DMA send, poll/consume the RX ring, wait for the
  status block.

Both run on a host model (:class:`model.pcie_cocotb.HostModel`: MMIO, host memory,
DMA servers), which checks what the NIC does on the PCIe side.
"""

from __future__ import annotations

from dataclasses import dataclass

from cocotb.triggers import RisingEdge

from model.ctxseq import CtxRegs
from model.pcie_cocotb import HostModel
from paranic.spec import protocol as P


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
