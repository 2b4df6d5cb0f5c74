"""A TLP-level root complex on the 7-series PCIe hard IP's port boundary (``pcie_s7``,
Xilinx PG054, 64-bit AXI4-Stream interface), as a host model.

The hard IP itself is cut out of the Verilog (a port-only shim); :class:`S7RootPort`
drives its ports the way the IP does and plays the root complex behind it:

* ``user_clk_out``/``user_reset_out``/``user_lnk_up``: the IP's user clock (250 MHz: x4
  Gen2 at 64 bits, PG054), reset, link up;
* the ``cfg_*`` status the PHY reads: bus/device/function (the requester id), command
  (memory space, bus master), device control (max payload / max read request),
  ``cfg_interrupt_msienable``;
* ``m_axis_rx_*`` (host -> device): TLPs as 64-bit beats, dword 0 in bits 31:0, each
  dword in the PCIe spec's byte order (the header's first byte in bits 31:24, like the
  payload: LitePCIe's S7 PHY is "big endian"), ``tkeep`` 0x0F/0xFF, the BAR hit in
  ``tuser[8:2]`` (bit 2: BAR0);
* ``s_axis_tx_*`` (device -> host): every TLP checked (``tkeep`` exactly the TLP's dwords,
  length field = payload, 4 KiB rule, MPS/MRRS via :func:`model.pcie.request_violations`)
  and served: MWr into host memory, MRd answered with CplD split at the RCB and at max
  payload, Cpl/CplD matched to the host's outstanding BAR0 reads by tag;
* MSI: the ``cfg_interrupt``/``cfg_interrupt_rdy`` handshake; the vector is
  ``cfg_interrupt_di`` (multi-vector MSI: the low bits of the message data), logged per
  interrupt.

:class:`S7Host` offers what :class:`model.pcie_rc.RcHost` offers (``mem``,
``write32``/``write64``/``read32``/``mmio_idle``, ``cycle``/``cycles``/``wait_for``,
``errors``, ``irq_log``/``irqs``, ``read_requests``/``write_requests``), so
:class:`model.host.NicContext`, :class:`model.csr.Driver` and the C context sequences run
on it unchanged. A 64-bit store (``write64``) is ONE 2-dword MWr, as a CPU's is.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Event, RisingEdge, SimTimeoutError, Timer, with_timeout
from cocotbext.pcie.core.tlp import CplStatus, Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from model.hostclock import SimTimeClock
from model.hostmem import HostMemory
from model.pcie import DmaRead, DmaWrite, request_violations

#: Host memory base (bus addresses) and size per host.
HOST_BASE = 0x1_0000_0000
HOST_BYTES = 1 << 26
#: Device control encodings (PCIe: 128 << code).
_SIZE_CODE = {128: 0, 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def _dwords(tlp: Tlp) -> list[int]:
    b = bytes(tlp.pack())
    return [int.from_bytes(b[i:i + 4], "big") for i in range(0, len(b), 4)]


class S7RootPort:
    """The hard IP's ports (``ip``: the shim's handle) and the root complex behind them.

    ``bus``/``device``: the function's number (its requester id); ``rcb``: the read
    completion boundary; ``max_payload_bytes``/``max_request_bytes``: device control;
    ``tx_ready_p``: probability that ``s_axis_tx_tready`` is high in a cycle
    (back-pressure); ``host``: the :class:`S7Host` that owns memory and checks.
    """

    def __init__(self, ip, host: "S7Host", bus: int = 1, device: int = 0,
                 user_clk_ns: float = 4.0, rcb: int = 64, tx_ready_p: float = 0.8,
                 seed: int = 1) -> None:
        self.ip = ip
        self.host = host
        self.pcie_id = PcieId(bus, device, 0)
        self.rc_id = PcieId(0, 0, 0)
        self.user_clk_ns = user_clk_ns
        self.rcb = rcb
        self.tx_ready_p = tx_ready_p
        self.rng = random.Random(seed)
        self.rx_queue: deque[list[int]] = deque()
        self.rx_idle = Event()
        self.rx_idle.set()
        self.tlps_in: list[Tlp] = []      # device -> host, as parsed
        self.tlps_out: list[Tlp] = []     # host -> device
        self.rx_beats = 0                 # beats the device took / gave (diagnostics)
        self.tx_beats = 0

    @property
    def clk(self):
        return self.ip.user_clk_out

    async def start(self) -> None:
        ip = self.ip
        h = self.host
        cocotb.start_soon(Clock(ip.user_clk_out, self.user_clk_ns, unit="ns").start())
        ip.user_reset_out.value = 1
        ip.user_lnk_up.value = 0
        ip.m_axis_rx_tvalid.value = 0
        ip.m_axis_rx_tlast.value = 0
        ip.m_axis_rx_tdata.value = 0
        ip.m_axis_rx_tkeep.value = 0
        ip.m_axis_rx_tuser.value = 0
        ip.s_axis_tx_tready.value = 0
        ip.cfg_interrupt_rdy.value = 0
        ip.cfg_bus_number.value = self.pcie_id.bus
        ip.cfg_device_number.value = self.pcie_id.device
        ip.cfg_function_number.value = self.pcie_id.function
        ip.cfg_command.value = 0x0006                  # memory space + bus master
        ip.cfg_dcommand.value = (_SIZE_CODE[h.max_request_bytes] << 12) | (_SIZE_CODE[h.max_payload_bytes] << 5)
        ip.cfg_interrupt_msienable.value = 1
        ip.cfg_interrupt_msixenable.value = 0
        for _ in range(20):
            await RisingEdge(self.clk)
        ip.user_reset_out.value = 0
        ip.user_lnk_up.value = 1
        cocotb.start_soon(self._rx_driver())
        cocotb.start_soon(self._tx_monitor())
        cocotb.start_soon(self._msi())

    # -- host -> device ------------------------------------------------------------------
    def send(self, tlp: Tlp) -> None:
        if not tlp.check():
            raise ValueError(f"malformed TLP to send: {tlp!r}")
        self.tlps_out.append(tlp)
        self.rx_queue.append(_dwords(tlp))
        self.rx_idle.clear()

    async def _rx_driver(self) -> None:
        ip = self.ip
        beats: deque[tuple[int, int, int]] = deque()   # (data, keep, last)
        driving = False
        while True:
            await RisingEdge(self.clk)
            if driving and int(ip.m_axis_rx_tready.value):
                beats.popleft()
                self.rx_beats += 1
            if not beats and self.rx_queue:
                dws = self.rx_queue.popleft()
                for i in range(0, len(dws), 2):
                    pair = dws[i:i + 2]
                    data = pair[0] | ((pair[1] << 32) if len(pair) > 1 else 0)
                    beats.append((data, 0xFF if len(pair) > 1 else 0x0F, i + 2 >= len(dws)))
            if beats:
                data, keep, last = beats[0]
                ip.m_axis_rx_tdata.value = data
                ip.m_axis_rx_tkeep.value = keep
                ip.m_axis_rx_tlast.value = int(last)
                ip.m_axis_rx_tuser.value = 1 << 2        # bar_hit[0]: BAR0
                ip.m_axis_rx_tvalid.value = 1
                driving = True
            else:
                ip.m_axis_rx_tvalid.value = 0
                driving = False
                if not self.rx_queue:
                    self.rx_idle.set()

    # -- device -> host ------------------------------------------------------------------
    async def _tx_monitor(self) -> None:
        ip = self.ip
        dws: list[int] = []
        ready = 0
        while True:
            await RisingEdge(self.clk)
            if ready and int(ip.s_axis_tx_tvalid.value):
                data = int(ip.s_axis_tx_tdata.value)
                keep = int(ip.s_axis_tx_tkeep.value)
                last = int(ip.s_axis_tx_tlast.value)
                if keep not in (0x0F, 0xFF) or (keep != 0xFF and not last):
                    self.host.error(f"s_axis_tx: tkeep {keep:#04x} (last={last}) is not 0xFF or a last 0x0F")
                self.tx_beats += 1
                dws.append(data & 0xFFFFFFFF)
                if keep == 0xFF:
                    dws.append(data >> 32)
                if last:
                    self._received(dws)
                    dws = []
            ready = int(self.rng.random() < self.tx_ready_p)
            ip.s_axis_tx_tready.value = ready

    def _received(self, dws: list[int]) -> None:
        h = self.host
        pkt = b"".join(d.to_bytes(4, "big") for d in dws)
        try:
            tlp = Tlp.unpack(pkt)
        except Exception as e:        # noqa: BLE001 - any unpack failure is the device's
            h.error(f"unparseable TLP {pkt.hex()}: {e}")
            return
        hdr = tlp.get_header_size_dw()
        if tlp.has_data() and len(dws) != hdr + tlp.length:
            h.error(f"TLP length field {tlp.length} does not match its {len(dws) - hdr} data dwords: {tlp!r}")
            return
        if not tlp.has_data() and len(dws) != hdr:
            h.error(f"TLP without data carries {len(dws) - hdr} extra dwords: {tlp!r}")
            return
        if not tlp.check():
            h.error(f"malformed TLP: {tlp!r}")
            return
        self.tlps_in.append(tlp)
        t = tlp.fmt_type
        if t in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            self._check_requester(tlp)
            h.dma_write(tlp.address + tlp.get_first_be_offset(),
                        bytes(tlp.data[tlp.get_first_be_offset():len(tlp.data) - tlp.get_last_be_offset()]))
        elif t in (TlpType.MEM_READ, TlpType.MEM_READ_64):
            self._check_requester(tlp)
            cocotb.start_soon(self._complete_read(tlp))
        elif t in (TlpType.CPL, TlpType.CPL_DATA):
            h.completion(tlp)
        else:
            h.error(f"unexpected TLP from the device: {tlp!r}")

    def _check_requester(self, tlp: Tlp) -> None:
        if tlp.requester_id != self.pcie_id:
            self.host.error(f"requester id {tlp.requester_id} is not the function's {self.pcie_id}")

    async def _complete_read(self, req: Tlp) -> None:
        """CplD(s) for a device's MRd: the first ends at an RCB boundary, each carries at
        most max payload, every one but the last ends on an RCB boundary."""
        h = self.host
        addr = req.address + req.get_first_be_offset()
        n = req.get_be_byte_count()
        data = h.dma_read(addr, n)
        await Timer(200, "ns")           # the root complex's read latency
        a, end = addr, addr + n
        while a < end:
            if a == addr:          # the first ends at the next RCB boundary
                stop = min(end, (a // self.rcb + 1) * self.rcb)
            else:                  # RCB-aligned from here: RCB multiples up to max payload
                limit = a + h.max_payload_bytes
                stop = min(end, limit - limit % self.rcb)
            cpl = Tlp.create_completion_data_for_tlp(req, self.rc_id)
            cpl.byte_count = end - a
            cpl.lower_address = a & 0x7F
            cpl.set_data(bytes(a & 3) + data[a - addr:stop - addr] + bytes(-stop % 4))
            self.send(cpl)
            a = stop

    # -- MSI -------------------------------------------------------------------------------
    async def _msi(self) -> None:
        ip = self.ip
        while True:
            await RisingEdge(self.clk)
            if int(ip.cfg_interrupt.value):
                vector = int(ip.cfg_interrupt_di.value)
                await RisingEdge(self.clk)           # the IP takes a cycle or more
                ip.cfg_interrupt_rdy.value = 1
                await RisingEdge(self.clk)           # the handshake's edge
                ip.cfg_interrupt_rdy.value = 0
                self.host.irq(vector)
                await RisingEdge(self.clk)           # cfg_interrupt follows the handshake


class S7Host(SimTimeClock):
    """The host model (same interface as :class:`model.pcie_rc.RcHost`) of one machine
    whose root port is :class:`S7RootPort` on the shim ``ip``; ``clk``: the NIC's
    ``sys`` clock (``clk_ns``), which ``cycle``/``cycles`` count; ``posted_depth``: the
    posted writes a CPU keeps in flight before a store stalls (writes are posted: they
    return before the device sees them; a read flushes them)."""

    def __init__(self, ip, clk, clk_ns: float = 8.0, max_request_bytes: int = 512,
                 max_payload_bytes: int = 256, posted_depth: int = 8, **port_kw) -> None:
        self.posted_depth = posted_depth
        self.clk = clk
        self.clk_ns = clk_ns
        self.max_request_bytes = max_request_bytes
        self.max_payload_bytes = max_payload_bytes
        self.errors: list[str] = []
        self.read_requests: list[DmaRead] = []
        self.write_requests: list[DmaWrite] = []
        self.irq_log: list[tuple[int, int]] = []
        self.mem = HostMemory(base=HOST_BASE)
        self.port = S7RootPort(ip, self, **port_kw)
        self._tag = 0
        self._pending: dict[int, tuple[Event, list]] = {}

    async def setup(self) -> None:
        await self.port.start()

    # -- what the root port hands up ------------------------------------------------------
    def error(self, msg: str) -> None:
        self.errors.append(f"cycle {self.cycle}: {msg}")

    def irq(self, vector: int) -> None:
        self.irq_log.append((self.cycle, vector))

    def irqs(self, ctx: int | None = None) -> list[int]:
        return [c for (_, c) in self.irq_log if ctx is None or c == ctx]

    def dma_write(self, a: int, data: bytes) -> None:
        for e in request_violations("write", a, len(data), self.max_payload_bytes):
            self.error(e)
        r = self.mem.region_for(a, len(data), write=True)
        if r is None:
            self.error(f"stray DMA write {a:#x}+{len(data)}")
        else:
            r.writes += len(data)
            self.mem.write(a, data)
        self.write_requests.append(DmaWrite(self.cycle, a, len(data), bytes(data), self.cycle))

    def dma_read(self, a: int, n: int) -> bytes:
        for e in request_violations("read", a, n, self.max_request_bytes):
            self.error(e)
        r = self.mem.region_for(a, n, write=False)
        self.read_requests.append(DmaRead(self.cycle, a, n))
        if r is None:
            self.error(f"stray DMA read {a:#x}+{n}")
            return bytes(n)
        r.reads += n
        return bytes(self.mem.read(a, n))

    def completion(self, tlp: Tlp) -> None:
        p = self._pending.pop(tlp.tag, None)
        if p is None:
            self.error(f"completion for no outstanding read (tag {tlp.tag}): {tlp!r}")
            return
        if tlp.requester_id != self.port.rc_id or tlp.completer_id != self.port.pcie_id:
            self.error(f"completion ids: requester {tlp.requester_id}, completer {tlp.completer_id}")
        ev, out = p
        out.append(tlp)
        ev.set()

    # -- MMIO ----------------------------------------------------------------------------
    async def _mwr(self, addr: int, data: bytes) -> None:
        # A CPU has a few posted-write buffers: it stalls when they are all in flight.
        while len(self.port.rx_queue) >= self.posted_depth:
            await RisingEdge(self.port.clk)
        tlp = Tlp()
        tlp.fmt_type = TlpType.MEM_WRITE
        tlp.requester_id = self.port.rc_id
        tlp.set_addr_be_data(addr, data)
        self.port.send(tlp)

    async def write32(self, addr: int, value: int, wait: bool = True, sel: int = 0xF) -> None:
        if addr & 3:
            raise ValueError(f"MMIO address {addr:#x} is not 32-bit aligned")
        if sel != 0xF:
            raise ValueError("S7Host writes whole dwords only")
        await self._mwr(addr, (value & 0xFFFFFFFF).to_bytes(4, "little"))

    async def write64(self, addr: int, value: int, wait: bool = True) -> None:
        """A CPU's 64-bit store: ONE memory write of 2 dwords."""
        if addr & 7:
            raise ValueError(f"MMIO address {addr:#x} is not 64-bit aligned")
        await self._mwr(addr, (value & (2 ** 64 - 1)).to_bytes(8, "little"))

    async def read32(self, addr: int, timeout_us: float = 50) -> int:
        if addr & 3:
            raise ValueError(f"MMIO address {addr:#x} is not 32-bit aligned")
        tag = self._tag
        self._tag = (self._tag + 1) % 32
        if tag in self._pending:
            raise RuntimeError(f"tag {tag} still outstanding")
        tlp = Tlp()
        tlp.fmt_type = TlpType.MEM_READ
        tlp.requester_id = self.port.rc_id
        tlp.tag = tag
        tlp.set_addr_be(addr, 4)
        ev, out = Event(), []
        self._pending[tag] = (ev, out)
        self.port.send(tlp)
        try:
            await with_timeout(ev.wait(), timeout_us, "us")
        except SimTimeoutError as e:
            p = self.port
            raise TimeoutError(f"BAR0 read {addr:#x}: no completion after {timeout_us} us "
                               f"(device took {p.rx_beats} beats, sent {p.tx_beats}; "
                               f"TLPs from it: {p.tlps_in[-3:]}; errors: {self.errors[-3:]})") from e
        cpl = out[0]
        if cpl.status != CplStatus.SC or cpl.fmt_type != TlpType.CPL_DATA or cpl.length != 1:
            raise RuntimeError(f"BAR0 read {addr:#x}: bad completion {cpl!r}")
        if cpl.byte_count != 4 or cpl.lower_address != (addr & 0x7F):
            self.error(f"BAR0 read {addr:#x}: completion byte count {cpl.byte_count}, "
                       f"lower address {cpl.lower_address:#x}")
        return int.from_bytes(cpl.data[:4], "little")

    async def mmio_idle(self) -> None:
        """Until every queued TLP to the device has been taken."""
        await self.port.rx_idle.wait()


__all__ = ["S7RootPort", "S7Host", "HOST_BASE"]
