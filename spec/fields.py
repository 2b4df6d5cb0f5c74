"""Bit-field structures: the one way the spec describes a packed layout.

A :class:`Field` is a named run of bits at a bit offset (little-endian: bit 0 is the
least significant bit of byte 0). The packet header, the DMA descriptor, the status
block and the link control word are tuples of fields; :func:`pack` and :func:`unpack`
turn them into bytes and back, and the C and Markdown generators read the same tuples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Field:
    name: str
    offset: int  #: bit offset within the structure
    width: int
    doc: str

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


def pack(fields: Iterable[Field], values: dict[str, int], nbytes: int) -> bytes:
    """``values`` (missing fields are zero) packed into ``nbytes`` little-endian bytes."""
    v = 0
    known = {f.name: f for f in fields}
    for name, val in values.items():
        if name not in known:
            raise KeyError(f"unknown field {name!r}")
        f = known[name]
        if val < 0 or val > f.mask:
            raise ValueError(f"{name}={val} does not fit in {f.width} bits")
        v |= (val & f.mask) << f.offset
    return v.to_bytes(nbytes, "little")


def unpack(fields: Iterable[Field], data: bytes) -> dict[str, int]:
    v = int.from_bytes(data, "little")
    return {f.name: (v >> f.offset) & f.mask for f in fields}
