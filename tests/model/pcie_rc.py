"""The host model's view of a NIC (:mod:`model.host`, :mod:`model.csr`) on cocotbext-pcie:
a device found by a ``RootComplex`` instead of the NIC's bare ports.

:class:`RcHost` offers what :class:`model.pcie_cocotb.HostModel` offers the benches
(``mem``, ``write32``/``write64``/``read32``/``mmio_idle``, ``cycles``, ``wait_for``,
``cycle``, ``errors``, ``irq_log``), so :class:`model.host.NicContext`,
:class:`model.csr.CsrBus`/``CsrConfig``/``Driver`` and the context sequences of
:mod:`model.ctxseq` run unchanged over PCIe:

* MMIO: memory read/write TLPs to the function's BAR0 (``bar_window[0]``);
* host memory: a :class:`model.hostmem.HostMemory` whose bytes live in a region of the
  root complex's memory pool (:class:`HostRegion`), so the NIC's DMA requests are served
  by the root complex (completions split at its RCB, as a real one does); every request
  is checked against the PCIe rules of :func:`model.pcie.request_violations` and the
  memory's DMA permissions, like the port-level model does;
* MSI-X: the function's vectors are allocated by the root complex
  (``alloc_irq_vectors``: it writes the table through BAR0); each message that arrives
  is logged with its vector (``irq_log``).
"""

from __future__ import annotations

import cocotb
from cocotbext.axi.address_space import Region

from model.hostclock import SimTimeClock
from model.hostmem import HostMemory
from model.pcie import DmaRead, DmaWrite, request_violations

#: Bytes of the root complex's address space one host's memory may use.
HOST_REGION_BYTES = 1 << 26


class HostRegion(Region):
    """A root-complex memory region backed by a :class:`HostMemory` (``host.mem``),
    checking every DMA access (``host.error``) and recording it."""

    def __init__(self, size: int, host: "RcHost") -> None:
        super().__init__(size)
        self.host = host

    def _abs(self, address: int) -> int:
        return self.get_absolute_address(address)

    async def _read(self, address, length, **kwargs):
        h = self.host
        a = self._abs(address)
        for e in request_violations("read", a, length, h.max_request_bytes):
            h.error(e)
        r = h.mem.region_for(a, length, write=False)
        if r is None:
            h.error(f"stray DMA read {a:#x}+{length}")
        else:
            r.reads += length
        h.read_requests.append(DmaRead(h.cycle, a, length))
        return bytearray(h.mem.read(a, length))

    async def _write(self, address, data, **kwargs):
        h = self.host
        a = self._abs(address)
        n = len(data)
        for e in request_violations("write", a, n, h.max_payload_bytes):
            h.error(e)
        r = h.mem.region_for(a, n, write=True)
        if r is None:
            h.error(f"stray DMA write {a:#x}+{n}")
        else:
            r.writes += n
            h.mem.write(a, data)
        h.write_requests.append(DmaWrite(h.cycle, a, n, bytes(data), h.cycle))


class RcHost(SimTimeClock):
    """One PCIe function under ``rc`` (a ``RootComplex``), seen as a host model.

    ``fn``: the function (``rc.find_device(...)``, enabled, bus master); ``clk``: the
    clock ``cycles``/``cycle`` count (the NIC's ``sys``, ``clk_ns`` its period);
    ``max_request_bytes``/``max_payload_bytes``: the limits checked on DMA requests.
    Call :meth:`setup` once: host memory region, MSI-X vectors.
    """

    def __init__(self, rc, fn, clk, clk_ns: float = 8.0, max_request_bytes: int = 512,
                 max_payload_bytes: int = 256) -> None:
        self.rc = rc
        self.fn = fn
        self.clk = clk
        self.clk_ns = clk_ns
        self.max_request_bytes = max_request_bytes
        self.max_payload_bytes = max_payload_bytes
        self.bar = fn.bar_window[0]
        self.errors: list[str] = []
        self.read_requests: list[DmaRead] = []
        self.write_requests: list[DmaWrite] = []
        self.irq_log: list[tuple[int, int]] = []
        self.mem: HostMemory | None = None
        self.region: HostRegion | None = None

    async def setup(self, vectors: int | None = None) -> int:
        """Host memory in the root complex's pool; MSI-X with ``vectors`` vectors (all
        the function offers by default). Returns the number of vectors enabled."""
        self.region = self.rc.mem_pool.alloc_region(
            HOST_REGION_BYTES, region_type=lambda size: HostRegion(size, self))
        self.mem = HostMemory(base=self.region.get_absolute_address(0))
        n = vectors or await self.fn.msix_vec_count()
        got = await self.fn.alloc_irq_vectors(n, n)
        if got != n:
            raise RuntimeError(f"{self.fn.pcie_id}: {got} MSI-X vectors, wanted {n}")
        for v in range(n):
            self.fn.request_irq(v, self._irq_handler(v))
        return n

    def _irq_handler(self, v: int):
        async def handler():
            self.irq_log.append((self.cycle, v))
        return handler

    def irqs(self, ctx: int | None = None) -> list[int]:
        return [c for (_, c) in self.irq_log if ctx is None or c == ctx]

    def error(self, msg: str) -> None:
        self.errors.append(f"cycle {self.cycle}: {msg}")

    # -- MMIO ----------------------------------------------------------------------------
    async def write32(self, addr: int, value: int, wait: bool = True, sel: int = 0xF) -> None:
        """A posted write (``wait`` means nothing over PCIe: a later read is ordered
        behind it)."""
        if addr & 3:
            raise ValueError(f"MMIO address {addr:#x} is not 32-bit aligned")
        if sel != 0xF:
            raise ValueError("RcHost writes whole dwords only")
        await self.bar.write_dword(addr, value & 0xFFFFFFFF)

    async def write64(self, addr: int, value: int, wait: bool = True) -> None:
        """A 64-bit store as two 32-bit writes, low word first (as the port model)."""
        await self.write32(addr, value & 0xFFFFFFFF)
        await self.write32(addr + 4, (value >> 32) & 0xFFFFFFFF)

    async def read32(self, addr: int, timeout_us: float = 50) -> int:
        if addr & 3:
            raise ValueError(f"MMIO address {addr:#x} is not 32-bit aligned")
        return await cocotb.triggers.with_timeout(self.bar.read_dword(addr), timeout_us, "us")

    async def mmio_idle(self) -> None:
        """Posted writes are on their way once written; nothing to wait for."""


__all__ = ["RcHost", "HostRegion", "HOST_REGION_BYTES"]
