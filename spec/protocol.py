"""ParaNIC's wire format, host-interface layout and constants: the one definition.

* the packet header (two 64-bit little-endian words, 16 bytes),
* packet types, flags, router port numbers,
* the per-context MMIO page (doorbells, status, PIO window) and the bits of the
  privileged ``ctx_state`` register,
* the host-memory structures the NIC reads and writes (RX slots, TX descriptors,
  the per-context status block),
* the board's PCI identity and BAR0 map,
* defaults (MTU, context count, target clock).

The gateware (``paranic.hw``) builds its Migen layouts from these tables, the host
models and tests pack and unpack with the helpers below, and ``python -m paranic.spec``
writes the C header that the user library, the driver, the simulator and the HLS
kernels include (``userlib/include/paranic/pn_protocol.h``, :mod:`paranic.spec.cgen`)
and the tables of ``docs/protocol.md``; a test keeps both up to date.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Iterable

from .fields import Field, pack as _pack, unpack as _unpack

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
#: Largest payload of a link-local CONTROL packet that takes the control lane (beside the
#: router; hw/lane.py, docs/architecture.md "The control lane"). Longer ones are routed.
LANE_MAX_BYTES = 256
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
    RMA_PUT = 3   #: remote write into a registered region
    RMA_GET = 4   #: remote read request
    RMA_RESP = 5  #: remote read response
    COLLECTIVE = 6  #: in-network reduce/allreduce/broadcast, consumed by the collective unit (docs/hls.md)


#: Packet types a user context may send (PIO header or DMA descriptor); the NIC
#: refuses BARRIER and CONTROL, which belong to the barrier unit and the firmware. A
#: COLLECTIVE packet from the host is a command for this NIC's collective unit (docs/hls.md).
USER_PACKET_TYPES = (PacketType.DATA, PacketType.RMA_PUT, PacketType.RMA_GET, PacketType.RMA_RESP,
                     PacketType.COLLECTIVE)


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
    Field("direct", 58, 3, "0: routed by table; 1..4: link-local CONTROL packet, out on that port (docs/mgmt.md)"),
    Field("rt", 61, 1, "routing table (0/1) the packet is routed by; stamped at injection (docs/firmware.md, \"Route changes\")"),
    Field("rsvd", 62, 2, "reserved, zero"),
    Field("tag", 64, 64, "tag or immediate word, opaque to the network"),
)
HEADER_FIELD = {f.name: f for f in HEADER_FIELDS}

#: The header's ``direct`` field (docs/mgmt.md, "Link-local packets").
DIRECT_DOC = (
    "0: the packet is routed by the routing table. 1..4: a link-local packet. The sending "
    "router puts it out on link port `direct` (whatever its dst_node); the receiving router "
    "delivers it to its local port and rewrites `direct` to the port it arrived on, so the "
    "receiver learns its own port. Only CONTROL packets (the management port's) are "
    "link-local: on any other type the routers ignore the field, and the host interface "
    "refuses CONTROL and zeroes the field in every header it sends.")


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


#: Datapath widths (bits per *beat*) the router, its FIFOs and the link layer support.
#: A beat carries ``dw // WORD_BITS`` consecutive packet words, word 0 in bits 0..63;
#: the unused words of a packet's last beat are zero. Inside the router and on a link
#: everything is counted in beats: buffer room, credits, the SOF length, replay
#: buffer room (at 64 bits a beat is a word: nothing changes).
DATAPATH_WIDTHS = (64, 128, 256)


def beat_words(dw: int = WORD_BITS) -> int:
    """Packet words per beat of a ``dw``-bit datapath."""
    if dw not in DATAPATH_WIDTHS:
        raise ValueError(f"datapath width {dw} not in {DATAPATH_WIDTHS}")
    return dw // WORD_BITS


def packet_beats(length: int, dw: int = WORD_BITS) -> int:
    """Beats of a whole packet with ``length`` payload bytes on a ``dw``-bit datapath."""
    k = beat_words(dw)
    return (packet_words(length) + k - 1) // k


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
    #: W (64-bit): store+doorbell. The store lands in PIO window word 0 (header word 0) and,
    #: when it carries the upper 4 bytes (the length), rings the doorbell after it: the
    #: doorbell folded into the header's store. See docs/host-interface.md "PIO transmit".
    PIO_SEND = 0x028
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


#: Bits of the privileged ``host_ctx_state`` CSR: the state of the context selected by
#: ``host_ctx_sel``, as the driver's hand-over procedure reads it (bit i = entry i).
CTX_STATE_BITS: tuple[tuple[str, str], ...] = (
    ("enabled", "context enabled"),
    ("pio_busy", "a PIO doorbell is pending or being sent, or the PIO buffer is being zeroed after ctx_reset"),
    ("tx_inflight", "descriptors fetched but not completed (wait for 0 before ctx_reset)"),
    ("tx_pending", "TX_TAIL != TX_HEAD"),
    ("rx_active", "the RX engine is writing a packet into this context's ring"),
    ("rx_full", "the RX ring is full"),
    ("irq_armed", "the MSI is armed"),
    ("status_dirty", "a status-block write is pending"),
)
CtxState = IntEnum("CtxState", {n.upper(): 1 << i for i, (n, _) in enumerate(CTX_STATE_BITS)})
CtxState.__doc__ = "Masks of the ``host_ctx_state`` bits (:data:`CTX_STATE_BITS`)."
#: The bits that say the NIC may still touch the context's memory: a context is quiet,
#: and may be reset and handed to a new owner, when none of them is set.
CTX_BUSY_MASK = CtxState.PIO_BUSY | CtxState.TX_INFLIGHT | CtxState.RX_ACTIVE | CtxState.STATUS_DIRTY


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
#: The CSR region: the standalone NicCore's CSR bank sits here. The CSR addresses
#: inside it come from the gateware's CSR map (LiteX assigns them), never from here.
BAR0_CSR_OFFSET = 0x40000
BAR0_CSR_BYTES = 0x10000
#: The SoC's own LiteX CSR region (hw/soc.py: MSI/MSI-X enable and table, PCIe PHY link
#: status, SoC control, identifier), mirrored into BAR0 here so the driver reaches what
#: the soft CPU reaches; every BAR0 address from here to the end of BAR0 lands in it
#: (modulo its size). Not part of NicCore's map: a standalone NicCore has no such region.
BAR0_SOC_CSR_OFFSET = 0x80000
BAR0_SOC_CSR_BYTES = 0x10000
#: MSI-X (the SoC's msi_type="msi-x"): LitePCIe's MSI-X table and pending-bit array live
#: in that region (hw/soc.py pins their CSR locations there); the hard IP's MSI-X
#: capability must announce them in BAR0 at these offsets.
BAR0_MSIX_TABLE_OFFSET = BAR0_SOC_CSR_OFFSET + 0xF800
BAR0_MSIX_PBA_OFFSET = BAR0_SOC_CSR_OFFSET + 0xF008

#: Identity of the NicCore's gateware, read-only CSRs ``ident`` and ``version`` (in
#: pn_csr.h): the driver refuses a BAR0 whose ``ident`` is not NIC_IDENT ("PNIC") and
#: reports ``version``, bumped whenever the CSR map or a register's meaning changes.
NIC_IDENT = 0x504E4943
NIC_VERSION = 4  # 2: management port, identity and fw_* CSRs; 3: two table sets, divert, injection gate, mgmt_tx_target; 4: PIO_SEND (store+doorbell), 64-bit context pages
