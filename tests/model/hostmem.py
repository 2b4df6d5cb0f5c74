"""Host memory for the host models: sparse, byte-addressed, with DMA permissions.

Every piece of memory the NIC may reach is a :class:`Region` that says whether the
NIC may DMA-read and/or DMA-write it; the host model (:mod:`model.pcie`) reports any
NIC access that is not entirely inside a region allowing it. Regions are allocated
(:meth:`HostMemory.alloc`, with a guard gap so an off-by-a-little access is caught)
or placed at fixed addresses (:meth:`HostMemory.add`, for benches that configure the
NIC with literal addresses).
"""

from __future__ import annotations

from dataclasses import dataclass

PAGE = 4096
MASK64 = (1 << 64) - 1


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

    def add(self, base: int, size: int, name: str, dma_read: bool = False,
            dma_write: bool = False) -> Region:
        """Declare ``size`` bytes at ``base`` as a region (regions may overlap: an
        access is allowed if one region containing it allows it)."""
        r = Region(base, size, name, dma_read, dma_write)
        self.regions.append(r)
        return r

    def alloc(self, size: int, name: str, align: int = 64, dma_read: bool = False,
              dma_write: bool = False, guard: int = 256) -> Region:
        """Allocate ``size`` bytes aligned to ``align``, with ``guard`` unallocated bytes
        before it (so an off-by-a-little access is caught)."""
        base = (self._next + guard + align - 1) // align * align
        self._next = base + size
        return self.add(base, size, name, dma_read, dma_write)

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
