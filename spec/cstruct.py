"""C structures described once: the C declaration and the Python packing both come from here.

A :class:`CStruct` is a tuple of :class:`Member` s, each naturally aligned (the
constructor checks it, so a C compiler lays the struct out exactly as Python's
``struct`` module does with ``<``, no padding inserted) and with the total size
stated (checked too). :mod:`paranic.spec.cgen` turns it into a ``struct`` with
``static_assert`` s on its size and every member's offset; Python code packs and
unpacks with :meth:`CStruct.pack` / :meth:`CStruct.unpack` or reads one member at
:meth:`CStruct.offset`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

#: C type -> (Python struct code, size in bytes, C spelling)
CTYPES = {
    "u8": ("B", 1, "uint8_t"), "u16": ("H", 2, "uint16_t"), "u32": ("I", 4, "uint32_t"),
    "i32": ("i", 4, "int32_t"), "u64": ("Q", 8, "uint64_t"), "char": ("s", 1, "char"),
}


@dataclass(frozen=True)
class Member:
    name: str
    ctype: str
    count: int = 1   #: array length (``char`` arrays are one Python bytes value)
    doc: str = ""

    @property
    def size(self) -> int:
        return CTYPES[self.ctype][1] * self.count

    @property
    def align(self) -> int:
        return CTYPES[self.ctype][1]

    @property
    def fmt(self) -> str:
        code = CTYPES[self.ctype][0]
        if self.ctype == "char" or (self.ctype == "u8" and self.count > 1):
            return f"{self.count}s"
        return code if self.count == 1 else code * self.count


@dataclass(frozen=True)
class CStruct:
    name: str                    #: C tag, e.g. ``pn_sim_hello`` (``struct pn_sim_hello``)
    members: tuple[Member, ...]
    size: int                    #: sizeof, checked against the members
    doc: str = ""
    _offsets: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        off = 0
        for m in self.members:
            if m.ctype not in CTYPES:
                raise ValueError(f"{self.name}.{m.name}: unknown type {m.ctype}")
            if off % m.align:
                raise ValueError(f"{self.name}.{m.name} at {off} is not {m.align}-byte aligned")
            self._offsets[m.name] = off
            off += m.size
        align = max(m.align for m in self.members)
        if off != self.size or off % align:
            raise ValueError(f"{self.name}: members take {off} bytes, the struct is stated as {self.size}")

    @property
    def fmt(self) -> str:
        return "<" + "".join(m.fmt for m in self.members)

    def offset(self, name: str) -> int:
        return self._offsets[name]

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"{self.name} has no member {name!r}")

    def pack(self, **values) -> bytes:
        """The struct's bytes; members not given are zero (padding always is)."""
        unknown = set(values) - {m.name for m in self.members}
        if unknown:
            raise KeyError(f"{self.name} has no member {', '.join(sorted(unknown))}")
        args = []
        for m in self.members:
            v = values.get(m.name, b"" if "s" in m.fmt else 0)
            if m.count > 1 and "s" not in m.fmt:
                args.extend(v if v else [0] * m.count)
            else:
                args.append(v)
        return struct.pack(self.fmt, *args)

    def unpack(self, data: bytes) -> dict:
        vals = list(struct.unpack(self.fmt, bytes(data[:self.size])))
        out = {}
        for m in self.members:
            n = m.count if (m.count > 1 and "s" not in m.fmt) else 1
            out[m.name] = vals[0] if n == 1 else tuple(vals[:n])
            del vals[:n]
        return out

    def read(self, buf, name: str, base: int = 0):
        """One scalar member from a buffer (an mmap) holding the struct at ``base``."""
        m = self.member(name)
        return struct.unpack_from("<" + m.fmt, buf, base + self.offset(name))[0]
