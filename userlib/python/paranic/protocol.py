"""The one definition of ParaNIC's wire format, host-interface layout and constants.

Everything that two parts of ParaNIC must agree on lives here, once:

* the packet header (two 64-bit little-endian words, 16 bytes),
* packet types, flags, router port numbers,
* the per-context MMIO page (doorbells, status, PIO window),
* the host-memory structures the NIC reads and writes (RX slots, TX descriptors,
  the per-context status block),
* defaults (MTU, context count, target clock).

The gateware (``paranic.hw``) builds its Migen layouts from these tables, the
Python host models and tests pack and unpack with the helpers below, and
``python -m paranic.protocol --c-header FILE`` writes the C header used by the
user library, the driver, the simulator and the HLS kernels
(``userlib/include/paranic/pn_protocol.h``; a test checks it is up to date).
``docs/protocol.md`` explains the format in prose.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable

# ---------------------------------------------------------------------------
# Global constants
# ---------------------------------------------------------------------------

#: Data path width of the network, in bits and bytes.
WORD_BITS = 64
WORD_BYTES = 8
#: Header size in bytes (two words).
HEADER_BYTES = 16
HEADER_WORDS = HEADER_BYTES // WORD_BYTES
#: Default maximum payload bytes per packet (a NicCore parameter).
DEFAULT_MTU = 1024
#: Largest MTU the header's length field and the RX slot layout can describe.
MAX_MTU = 8192
#: Default number of hardware contexts (a NicCore parameter).
DEFAULT_CONTEXTS = 16
#: Width of node and context identifiers in the header.
NODE_BITS = 12
CTX_BITS = 6
MAX_NODES = 1 << NODE_BITS
MAX_CONTEXTS = 1 << CTX_BITS
#: Default routing-table depth (nodes addressable by a NicCore; parameter).
DEFAULT_TABLE_NODES = 256
#: Clock at which hardware cycles are converted to nanoseconds in reports.
TARGET_CLK_HZ = 125_000_000
TARGET_CLK_NS = 1e9 / TARGET_CLK_HZ


class PacketType(IntEnum):
    """Value of the header's ``type`` field."""

    DATA = 0      #: ordinary data, delivered to the destination context's RX ring
    BARRIER = 1   #: hardware barrier arrive/release, consumed by the barrier unit
    CONTROL = 2   #: NIC-to-NIC control (reserved for firmware: discovery, pings)
    RMA_PUT = 3   #: remote write into a registered region (issue 4)
    RMA_GET = 4   #: remote read request (issue 4)
    RMA_RESP = 5  #: remote read response (issue 4)


#: Packet types a user context may send (PIO header or DMA descriptor); the NIC
#: refuses BARRIER and CONTROL, which belong to the barrier unit and the firmware.
USER_PACKET_TYPES = (PacketType.DATA, PacketType.RMA_PUT, PacketType.RMA_GET, PacketType.RMA_RESP)


class Flags(IntEnum):
    """Bits of the header's ``flags`` field."""

    SOM = 1 << 0  #: first packet of a message (DMA messages cut into packets)
    EOM = 1 << 1  #: last packet of a message
    BAR_RELEASE = 1 << 2  #: barrier packets: release (set) or arrive (clear)


class Port(IntEnum):
    """Router port numbers, as stored in the routing table."""

    LOCAL = 0
    XP = 1   #: +X neighbour (the clockwise neighbour on a ring)
    XM = 2   #: -X neighbour
    YP = 3   #: +Y neighbour (torus only)
    YM = 4   #: -Y neighbour (torus only)
    DROP = 7  #: unknown destination: the packet is dropped and counted


#: Width of a routing-table entry.
ROUTE_BITS = 3


def port_dimension(port: int) -> int:
    """Dimension (0 = X, 1 = Y) of a link port; -1 for the local port."""
    if port == Port.LOCAL:
        return -1
    return (port - 1) // 2


# ---------------------------------------------------------------------------
# Bit-field helper
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str
    offset: int  # bit offset within the structure (little-endian, bit 0 = LSB of byte 0)
    width: int
    doc: str

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


def _pack(fields: Iterable[Field], values: dict[str, int], nbytes: int) -> bytes:
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


def _unpack(fields: Iterable[Field], data: bytes) -> dict[str, int]:
    v = int.from_bytes(data, "little")
    return {f.name: (v >> f.offset) & f.mask for f in fields}


# ---------------------------------------------------------------------------
# Packet header: 16 bytes = word 0 (routing and length) + word 1 (tag)
# ---------------------------------------------------------------------------

HEADER_FIELDS: tuple[Field, ...] = (
    Field("dst_node", 0, NODE_BITS, "destination node id"),
    Field("src_node", 12, NODE_BITS, "source node id (stamped by the sending NIC)"),
    Field("dst_ctx", 24, CTX_BITS, "destination hardware context"),
    Field("src_ctx", 30, CTX_BITS, "source hardware context (stamped by the sending NIC)"),
    Field("type", 36, 3, "PacketType"),
    Field("vc", 39, 1, "virtual channel (0; reserved for dateline VCs)"),
    Field("length", 40, 14, "payload length in bytes, 0..MTU"),
    Field("flags", 54, 4, "Flags: SOM, EOM, BAR_RELEASE"),
    Field("rsvd", 58, 6, "reserved, zero"),
    Field("tag", 64, 64, "tag or immediate word, opaque to the network"),
)
HEADER_FIELD = {f.name: f for f in HEADER_FIELDS}


def pack_header(**values: int) -> bytes:
    """Pack a header from keyword fields (missing fields are zero)."""
    return _pack(HEADER_FIELDS, values, HEADER_BYTES)


def unpack_header(data: bytes) -> dict[str, int]:
    if len(data) < HEADER_BYTES:
        raise ValueError("header needs 16 bytes")
    return _unpack(HEADER_FIELDS, data[:HEADER_BYTES])


def header_words(**values: int) -> tuple[int, int]:
    """The header as two 64-bit words, as they travel on the 64-bit data path."""
    b = pack_header(**values)
    return int.from_bytes(b[:8], "little"), int.from_bytes(b[8:], "little")


def payload_words(length: int) -> int:
    """Number of 64-bit data words that carry ``length`` payload bytes."""
    return (length + WORD_BYTES - 1) // WORD_BYTES


def packet_words(length: int) -> int:
    """Words of a whole packet (header + payload) on the router's data path."""
    return HEADER_WORDS + payload_words(length)


def bytes_to_words(data: bytes) -> list[int]:
    """Little-endian 64-bit words of ``data``, the last one zero-padded."""
    pad = (-len(data)) % WORD_BYTES
    data = bytes(data) + b"\0" * pad
    return [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data), 8)]


def words_to_bytes(words: Iterable[int], length: int) -> bytes:
    return b"".join(int(w).to_bytes(8, "little") for w in words)[:length]


# ---------------------------------------------------------------------------
# Per-context MMIO page (BAR0 offset ctx * CTX_PAGE_BYTES)
# ---------------------------------------------------------------------------

CTX_PAGE_BYTES = 4096


class CtxReg(IntEnum):
    """Byte offsets of the 32-bit registers in a context's MMIO page.

    Registers sit on an 8-byte stride so 64-bit stores stay aligned. Doorbells are
    write-only (posted writes, cheap over PCIe); the read-only registers are for
    debugging and bring-up, since a read across PCIe costs about a microsecond:
    the fast path polls host memory instead (RX slots, status block).
    """

    PIO_DOORBELL = 0x000  #: W: send the packet staged in the PIO window
    TX_TAIL = 0x008       #: W: producer index of the DMA TX descriptor ring
    RX_HEAD = 0x010       #: W: consumer index of the RX ring (frees slots)
    BARRIER = 0x018       #: W: enter the hardware barrier
    IRQ_ARM = 0x020       #: W: arm this context's MSI for the next received packet
    STATUS = 0x040        #: R: StatusBit flags
    RX_TAIL = 0x048       #: R: packets written into the RX ring (absolute count)
    TX_HEAD = 0x050       #: R: DMA descriptors consumed (absolute count)
    PIO_DONE = 0x058      #: R: PIO doorbells completed (absolute count)
    ERRORS = 0x060        #: R: operations of this context refused (absolute count)


class StatusBit(IntEnum):
    ENABLED = 1 << 0      #: the context is configured and enabled by the driver
    PIO_BUSY = 1 << 1     #: the PIO window is being drained; writes are refused
    TX_BUSY = 1 << 2      #: DMA TX descriptors are pending
    RX_FULL = 1 << 3      #: the RX ring is full (back-pressure)
    IRQ_ARMED = 1 << 4


#: The PIO transmit window: header (16 bytes) then payload, written with 64-bit
#: stores; the doorbell sends ``16 + header.length`` bytes from it.
PIO_WINDOW_OFFSET = 0x800
PIO_WINDOW_BYTES = 0x800


# ---------------------------------------------------------------------------
# Host memory: RX ring slots, TX descriptors, status block
# ---------------------------------------------------------------------------

#: RX slot layout: header at +0, payload at +16, the valid word in the slot's last
#: 8 bytes. The NIC writes header and payload first and the valid word last; the
#: valid word holds the absolute packet number of the ring plus one (1, 2, 3 ...),
#: so a slot is new exactly when its valid word equals the count the host expects.
RX_SLOT_HEADER_OFFSET = 0
RX_SLOT_PAYLOAD_OFFSET = HEADER_BYTES
RX_VALID_BYTES = 8


def rx_slot_bytes(mtu: int = DEFAULT_MTU) -> int:
    """Size of one RX slot for a given MTU: header + MTU + valid word, 64-byte aligned."""
    if not 8 <= mtu <= MAX_MTU or mtu % WORD_BYTES:
        raise ValueError(f"MTU {mtu} must be a multiple of 8 in 8..{MAX_MTU}")
    n = HEADER_BYTES + mtu + RX_VALID_BYTES
    return (n + 63) // 64 * 64


def rx_valid_offset(mtu: int = DEFAULT_MTU) -> int:
    return rx_slot_bytes(mtu) - RX_VALID_BYTES


#: DMA TX descriptor: 32 bytes in the context's TX ring.
TX_DESC_BYTES = 32
TX_DESC_FIELDS: tuple[Field, ...] = (
    Field("addr", 0, 64, "host address of the payload (inside the context's DMA window)"),
    Field("length", 64, 32, "message length in bytes (0..MAX_DMA_LENGTH), cut into MTU packets"),
    Field("dst_node", 96, NODE_BITS, "destination node"),
    Field("rsvd0", 108, 4, "reserved, zero"),
    Field("dst_ctx", 112, CTX_BITS, "destination context"),
    Field("rsvd1", 118, 2, "reserved, zero"),
    Field("type", 120, 3, "PacketType of every packet of the message"),
    Field("rsvd2", 123, 5, "reserved, zero"),
    Field("tag", 128, 64, "tag copied into every packet of the message"),
    Field("cookie", 192, 64, "software's own, ignored by the NIC"),
)
#: Longest message one descriptor may describe.
MAX_DMA_LENGTH = 1 << 24


def pack_tx_desc(**values: int) -> bytes:
    return _pack(TX_DESC_FIELDS, values, TX_DESC_BYTES)


def unpack_tx_desc(data: bytes) -> dict[str, int]:
    return _unpack(TX_DESC_FIELDS, data[:TX_DESC_BYTES])


#: The per-context status block in host memory, rewritten whole (16 bytes) by the
#: NIC whenever one of its counters moves. All counters are absolute, modulo 2**32.
STATUS_BLOCK_BYTES = 16
STATUS_FIELDS: tuple[Field, ...] = (
    Field("pio_done", 0, 32, "PIO doorbells whose packet has left the window"),
    Field("tx_done", 32, 32, "DMA descriptors completed or refused"),
    Field("barrier_done", 64, 32, "barrier episodes completed"),
    Field("errors", 96, 32, "operations of this context refused (bad PIO header, descriptor)"),
)


def unpack_status(data: bytes) -> dict[str, int]:
    return _unpack(STATUS_FIELDS, data[:STATUS_BLOCK_BYTES])


def pack_status(**values: int) -> bytes:
    return _pack(STATUS_FIELDS, values, STATUS_BLOCK_BYTES)


# ---------------------------------------------------------------------------
# PCI identity and BAR0 layout (the board's LitePCIe endpoint; driver/, docs/driver.md)
# ---------------------------------------------------------------------------

#: PCI IDs the project's LiteX SoC presents (LitePCIe's configurable IDs). A choice:
#: Xilinx's vendor id (the FPGA vendor, as LitePCIe designs do by default) and a
#: device id of the project's own, outside the 0x7xxx/0x9xxx ranges the Xilinx
#: PCIe hard-IP wizards and LitePCIe's examples use, so the stock litepcie driver
#: never binds a ParaNIC and paranic.ko never binds anything else.
PCI_VENDOR_ID = 0x10EE
PCI_DEVICE_ID = 0x5A4E
#: BAR0 (32-bit, non-prefetchable): the NicCore's Wishbone slave at offset 0, as
#: hw/standalone.py lays it out: the context pages first, the LiteX CSR bank above.
BAR0_BYTES = 1 << 20
BAR0_CTX_OFFSET = 0
BAR0_CTX_BYTES = MAX_CONTEXTS * CTX_PAGE_BYTES
#: Byte offset of the CSR region (= paranic.hw.standalone.CSR_BASE; a test keeps them
#: equal). The CSR addresses inside it come from the gateware's CSR map
#: (python -m paranic.csrmap), never from here.
BAR0_CSR_OFFSET = 0x40000
BAR0_CSR_BYTES = 0x10000


# ---------------------------------------------------------------------------
# C header generation
# ---------------------------------------------------------------------------


def _c_field_macros(prefix: str, fields: Iterable[Field], word_bits: int = 64) -> list[str]:
    out = []
    for f in fields:
        if f.name.startswith("rsvd"):
            continue
        n = f"{prefix}_{f.name.upper()}"
        out.append(f"/* {f.doc} */")
        out.append(f"#define {n}_WORD {f.offset // word_bits}")
        out.append(f"#define {n}_SHIFT {f.offset % word_bits}")
        out.append(f"#define {n}_WIDTH {f.width}")
        if f.width < 64:
            out.append(f"#define {n}_MASK 0x{f.mask:x}ULL")
        else:
            out.append(f"#define {n}_MASK 0xffffffffffffffffULL")
    return out


def c_header() -> str:
    L: list[str] = []
    L.append("/* SPDX-License-Identifier: BSD-2-Clause */")
    L.append("/* GENERATED by `python -m paranic.protocol --c-header` from")
    L.append(" * userlib/python/paranic/protocol.py. Do not edit: edit the Python and regenerate. */")
    L.append("#ifndef PN_PROTOCOL_H")
    L.append("#define PN_PROTOCOL_H")
    L.append("")
    consts = dict(
        WORD_BYTES=WORD_BYTES, HEADER_BYTES=HEADER_BYTES, DEFAULT_MTU=DEFAULT_MTU, MAX_MTU=MAX_MTU,
        DEFAULT_CONTEXTS=DEFAULT_CONTEXTS, NODE_BITS=NODE_BITS, CTX_BITS=CTX_BITS,
        MAX_NODES=MAX_NODES, MAX_CONTEXTS=MAX_CONTEXTS, ROUTE_BITS=ROUTE_BITS,
        TARGET_CLK_HZ=TARGET_CLK_HZ, CTX_PAGE_BYTES=CTX_PAGE_BYTES,
        PIO_WINDOW_OFFSET=PIO_WINDOW_OFFSET, PIO_WINDOW_BYTES=PIO_WINDOW_BYTES,
        RX_SLOT_HEADER_OFFSET=RX_SLOT_HEADER_OFFSET, RX_SLOT_PAYLOAD_OFFSET=RX_SLOT_PAYLOAD_OFFSET,
        RX_VALID_BYTES=RX_VALID_BYTES, TX_DESC_BYTES=TX_DESC_BYTES,
        MAX_DMA_LENGTH=MAX_DMA_LENGTH, STATUS_BLOCK_BYTES=STATUS_BLOCK_BYTES,
        BAR0_BYTES=f"0x{BAR0_BYTES:x}", BAR0_CTX_OFFSET=f"0x{BAR0_CTX_OFFSET:x}",
        BAR0_CTX_BYTES=f"0x{BAR0_CTX_BYTES:x}", BAR0_CSR_OFFSET=f"0x{BAR0_CSR_OFFSET:x}",
        BAR0_CSR_BYTES=f"0x{BAR0_CSR_BYTES:x}",
    )
    for k, v in consts.items():
        L.append(f"#define PN_{k} {v}")
    L.append("")
    L.append("/* Packet types a user context may send, as a mask of 1 << type */")
    L.append(f"#define PN_USER_TYPE_MASK 0x{sum(1 << int(t) for t in USER_PACKET_TYPES):x}")
    L.append("")
    L.append("/* PCI identity of the board (docs/driver.md) */")
    L.append(f"#define PN_PCI_VENDOR_ID 0x{PCI_VENDOR_ID:04x}")
    L.append(f"#define PN_PCI_DEVICE_ID 0x{PCI_DEVICE_ID:04x}")
    L.append("")
    L.append("/* RX slot size for an MTU: header + MTU + valid word, 64-byte aligned */")
    L.append("#define PN_RX_SLOT_BYTES(mtu) ((((mtu) + PN_HEADER_BYTES + PN_RX_VALID_BYTES) + 63) & ~63)")
    L.append("#define PN_RX_VALID_OFFSET(mtu) (PN_RX_SLOT_BYTES(mtu) - PN_RX_VALID_BYTES)")
    L.append("")
    for enum, prefix in ((PacketType, "PN_TYPE"), (Flags, "PN_FLAG"), (Port, "PN_PORT"),
                         (CtxReg, "PN_REG"), (StatusBit, "PN_STATUS")):
        L.append(f"/* {enum.__name__} */")
        for m in enum:
            L.append(f"#define {prefix}_{m.name} 0x{int(m.value):x}")
        L.append("")
    L.append("/* Packet header: two little-endian 64-bit words. */")
    L += _c_field_macros("PN_HDR", HEADER_FIELDS)
    L.append("")
    L.append("/* DMA TX descriptor: four little-endian 64-bit words. */")
    L += _c_field_macros("PN_DESC", TX_DESC_FIELDS)
    L.append("")
    L.append("/* Status block: four little-endian 32-bit counters. */")
    L += _c_field_macros("PN_STS", STATUS_FIELDS, word_bits=32)
    L.append("")
    L.append("/* Extract/insert a field from an array of 64-bit words (or 32-bit for PN_STS). */")
    L.append("#define PN_GET(w, F) (((w)[F##_WORD] >> F##_SHIFT) & F##_MASK)")
    L.append("#define PN_SET(w, F, v) ((w)[F##_WORD] = ((w)[F##_WORD] & ~(F##_MASK << F##_SHIFT)) | \\")
    L.append("\t(((__typeof__((w)[0]))(v) & F##_MASK) << F##_SHIFT))")
    L.append("")
    L.append("#endif /* PN_PROTOCOL_H */")
    return "\n".join(L) + "\n"


def _md_fields(fields: Iterable[Field], unit_bits: int) -> list[str]:
    out = ["| field | word | bits | width | meaning |", "|---|---|---|---|---|"]
    for f in fields:
        lo = f.offset % unit_bits
        out.append(f"| `{f.name}` | {f.offset // unit_bits} | {lo + f.width - 1}:{lo} | "
                   f"{f.width} | {f.doc} |")
    return out


def markdown_tables() -> str:
    """The layout tables of docs/protocol.md (generated; a test keeps them in step)."""
    L = ["### Packet header (two 64-bit little-endian words)", ""]
    L += _md_fields(HEADER_FIELDS, 64)
    L += ["", "### Packet types", "", "| value | name |", "|---|---|"]
    L += [f"| {int(t)} | `{t.name}` |" for t in PacketType]
    L += ["", "### Flags", "", "| bit | name |", "|---|---|"]
    L += [f"| 0x{int(t):x} | `{t.name}` |" for t in Flags]
    L += ["", "### Router ports (routing-table entries)", "", "| value | port |", "|---|---|"]
    L += [f"| {int(t)} | `{t.name}` |" for t in Port]
    L += ["", f"### Context page ({CTX_PAGE_BYTES} bytes per context)", "",
          "| offset | register |", "|---|---|"]
    L += [f"| 0x{int(r):03x} | `{r.name}` |" for r in CtxReg]
    L += [f"| 0x{PIO_WINDOW_OFFSET:03x}..0x{PIO_WINDOW_OFFSET + PIO_WINDOW_BYTES - 1:03x} "
          f"| PIO transmit window |"]
    L += ["", "### STATUS register bits", "", "| bit | name |", "|---|---|"]
    L += [f"| 0x{int(t):x} | `{t.name}` |" for t in StatusBit]
    L += ["", f"### DMA TX descriptor ({TX_DESC_BYTES} bytes, 64-bit little-endian words)", ""]
    L += _md_fields(TX_DESC_FIELDS, 64)
    L += ["", f"### Status block ({STATUS_BLOCK_BYTES} bytes, 32-bit little-endian words)", ""]
    L += _md_fields(STATUS_FIELDS, 32)
    L += ["", f"### RX slot (MTU {DEFAULT_MTU}: {rx_slot_bytes()} bytes)", "",
          "| offset | content |", "|---|---|",
          f"| {RX_SLOT_HEADER_OFFSET} | packet header (16 bytes, as received, src stamped) |",
          f"| {RX_SLOT_PAYLOAD_OFFSET} | payload (`length` bytes, up to MTU) |",
          f"| slot size - {RX_VALID_BYTES} | valid word: packet number in this ring + 1 (u64), "
          "written last |"]
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--c-header", metavar="FILE", help="write the C header (- for stdout)")
    ap.add_argument("--markdown", action="store_true", help="print the layout tables")
    ap.add_argument("--doc", metavar="FILE", help="rewrite the generated tables in FILE")
    a = ap.parse_args(argv)
    if a.doc:
        with open(a.doc) as f:
            doc = f.read()
        start = doc.index("\n", doc.index("<!-- BEGIN GENERATED")) + 1
        end = doc.index("<!-- END GENERATED -->")
        with open(a.doc, "w") as f:
            f.write(doc[:start] + markdown_tables() + doc[end:])
    if a.markdown:
        sys.stdout.write(markdown_tables())
    if a.c_header:
        text = c_header()
        if a.c_header == "-":
            sys.stdout.write(text)
        else:
            with open(a.c_header, "w") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
