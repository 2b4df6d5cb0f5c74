"""The cluster simulator's facts: its client protocol and its cables' error model.

**Client protocol** between libparanic's ``sim`` backend (``hal_sim.c``) and the
Verilator cluster simulator's harness (``sim/harness``): socket messages and
shared-memory layouts. ``python -m paranic.spec`` writes them as
``userlib/src/pn_sim_shm.h`` (C11 for the library, C++17 for the harness); Python
clients and tools use the :class:`~paranic.spec.cstruct.CStruct` s below.

1. The client creates a memfd holding its "host memory" (``pn_sim_ctl``, the MMIO
   queue, status block, RX ring, TX ring, DMA heap), connects to the harness's UNIX
   socket (SOCK_SEQPACKET) and sends ``pn_sim_hello`` with the memfd (SCM_RIGHTS).
2. The harness maps the memfd into the node's DMA address space at
   ``PN_SIM_DMA_BASE(ctx)``, programs the context through the CSRs as a driver would
   (rings, status block, DMA window, reset, enable) and answers ``pn_sim_welcome``
   with the fd of its global shared memory (``pn_sim_global``: the cycle counter and
   per-context trace records).
3. MMIO travels through the SPSC ring in the client's memory (``pn_sim_op``): the
   client writes entries and advances ``q_head``; the harness takes them, stamps them
   with the current cycle and applies them on the node's Wishbone bus after the PCIe
   latency; a read's value comes back in ``r_value``/``r_seq``.
4. Closing the socket (or dying) detaches: the harness disables and resets the
   context, waits until the NIC can no longer DMA into the memory, then unmaps it.

While the harness sleeps (nothing in flight) it sets ``pn_sim_global.sleeping``; a
client that pushed an entry then sends one byte on its socket to wake it.

**Fault requests**: a connection whose first message is a ``pn_sim_fault`` (magic
``PN_SIM_MAGIC_FAULT``, no fds) is a fault-injection client, not a process of a job:
every message it sends is a request (``enum pn_sim_fault_op``: cut, mend, set the
bit-error threshold of a cable, or query it, now or at a cycle) and gets one
``pn_sim_fault_reply``. Cables are numbered as ``paranic.spec.topo.Topology.cables()``.

**Cable error model**: every simulated cable flips one bit of a line word with
probability ``ber_threshold / 2**32`` (:func:`ber_to_threshold`); the gateware's cable
(``paranic.sim.cable``) and the harness both take the threshold from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

from .cstruct import CStruct, Member as M
from . import protocol as P
from .link import LINE_WORD_BITS

VERSION = 2
MAGIC_HELLO = 0x4F4C4C45484D4953    #: "SIMHELLO"
MAGIC_WELCOME = 0x454D4F434C574D53  #: "SMWLCOME"
MAGIC_CTL = 0x4C54434D49534E50      #: "PNSIMCTL"
MAGIC_GLOBAL = 0x4C424C474D49534E   #: "NSIMGLBL"
MAGIC_FAULT = 0x544C5541464D4953    #: "SIMFAULT"
MAGIC_FAULT_REPLY = 0x594C5052464D4953  #: "SIMFRPLY"

#: DMA address of byte 0 of context c's shared memory is ``(c + 1) << DMA_SHIFT`` (every
#: node has its own space): 64 GiB per context, so a DMA address names its context.
DMA_SHIFT = 36
MAX_MEM = 1 << DMA_SHIFT
#: Byte offset of the trace records in the global shared memory.
TRACE_OFF = 256


def dma_base(ctx: int) -> int:
    return (ctx + 1) << DMA_SHIFT


class OpKind(IntEnum):
    """``pn_sim_op.kind``: what a queue entry asks of the harness (:data:`OP_KIND_DOC`)."""

    W32 = 1
    W64 = 2
    R32 = 3
    RCSR = 4
    WINDOW = 5


OP_KIND_DOC = {
    OpKind.W32: "32-bit store at context-page offset `off`",
    OpKind.W64: "64-bit store: one bus beat on the NicCore cluster's 64-bit bus (two 32-bit writes, low word first, on the SoC cluster's)",
    OpKind.R32: "32-bit load from the context page; value = sequence number",
    OpKind.RCSR: "32-bit load of a read-only CSR word at byte address `off`",
    OpKind.WINDOW: "driver call: DMA window = heap base .. + value bytes",
}

class FaultOp(IntEnum):
    """``pn_sim_fault.op``: what a fault request asks of the harness (:data:`FAULT_OP_DOC`)."""

    CUT = 1
    MEND = 2
    BER = 3
    QUERY = 4


FAULT_OP_DOC = {
    FaultOp.CUT: "pull cable `cable`: both directions carry nothing (SimPhy.cut)",
    FaultOp.MEND: "plug it back in",
    FaultOp.BER: "set the cable's bit-error threshold (both directions) to `value` (< 2^32)",
    FaultOp.QUERY: "change nothing: the reply shows the cable's state",
}

#: ``pn_sim_hello.flags``: a device client (:data:`HELLO_DEVICE_DOC`).
HELLO_DEVICE = 0x1
HELLO_DEVICE_DOC = (
    "pn_sim_hello.flags: a device client (sim/qemu/pn_proxydev: a QEMU guest's PCI "
    "function). It takes a whole node (no context of it may be attached) and sends two "
    "fds: its memfd (control block and MMIO queue only; rings and offsets unused) and the "
    "guest's RAM (a memfd whose offset is the guest-physical address, heap_bytes long). "
    "Its queue entries address BAR0 (off < PN_BAR0_BYTES: context pages and CSRs); the "
    "node's DMA goes to guest RAM (bus address = offset). The harness configures nothing: "
    "the guest's driver does, through the CSRs. On detach every context is disabled and reset.")

OP = CStruct("pn_sim_op", (
    M("kind", "u32", doc="enum pn_sim_op_kind"),
    M("off", "u32"),
    M("value", "u64"),
), 16, "One MMIO queue entry.")

CTL = CStruct("pn_sim_ctl", (
    M("magic", "u64", doc="PN_SIM_MAGIC_CTL, written by the client"),
    M("version", "u32"),
    M("qsize", "u32", doc="queue entries, power of two"),
    M("queue_off", "u64", doc="byte offset of the pn_sim_op array"),
    M("pad0", "u8", 64 - 24),
    M("q_head", "u64", doc="client: entries pushed (absolute)"),
    M("c_polls", "u64", doc="client: wait rounds, bumped after each look at host memory "
                            "(the harness's pause, docs/simulator.md \"The clock\")"),
    M("pad1", "u8", 48),
    M("q_tail", "u64", doc="harness: entries taken (absolute)"),
    M("pad2", "u8", 56),
    M("r_value", "u64", doc="harness: value of the last read ..."),
    M("r_seq", "u64", doc="... and its sequence number, stored after the value"),
    M("pad3", "u8", 48),
), 256, "At offset 0 of the client's memfd. Each 64-byte line is written by one side only.")

HELLO = CStruct("pn_sim_hello", (
    M("magic", "u64"),
    M("version", "u32"),
    M("node", "i32", doc="this process's node id"),
    M("ctx", "i32", doc="a context, or -1 for any free one"),
    M("nodes", "i32", doc="job size (0: the running job's, else the cluster's)"),
    M("pid", "i32"),
    M("rx_log2", "u32", doc="RX ring size"),
    M("tx_log2", "u32", doc="TX ring size"),
    M("flags", "u32", doc="PN_SIM_HELLO_* (0 for libparanic's sim backend)"),
    M("mem_bytes", "u64", doc="size of the memfd"),
    M("status_off", "u64"),
    M("rx_off", "u64"),
    M("tx_off", "u64"),
    M("heap_off", "u64"),
    M("heap_bytes", "u64"),
), 88, "Client -> harness, first message on the socket, with the memfd. Offsets are bytes\n"
       "into the memfd; every region is 4 KiB aligned (the status block 64-byte aligned).")

WELCOME = CStruct("pn_sim_welcome", (
    M("magic", "u64"),
    M("version", "u32"),
    M("status", "i32", doc="0 or -errno"),
    M("node", "u32"),
    M("nodes", "u32", doc="the job's size (<= sim_nodes)"),
    M("sim_nodes", "u32"),
    M("ctx", "u32"),
    M("n_ctx", "u32"),
    M("mtu", "u32"),
    M("csr_dropped", "u32", doc="CSR byte address of host_err_unknown_ctx (RCSR)"),
    M("rsvd", "u32"),
    M("dma_base", "u64", doc="DMA address of memfd offset 0"),
    M("global_bytes", "u64", doc="size of the global shm"),
    M("topo", "char", 32),
), 96, "Harness -> client: the answer (with the global shm fd when status == 0).")

TRACE = CStruct("pn_sim_trace", (
    M("generation", "u64", doc="incremented on every attach to this context"),
    M("issue_cycle", "u64"),
    M("pio_doorbell_cycle", "u64"),
    M("tx_tail_cycle", "u64"),
    M("rx_valid_cycle", "u64"),
    M("rx_valid_count", "u64"),
    M("barrier_enter_cycle", "u64"),
    M("barrier_done_cycle", "u64"),
    M("barrier_done_count", "u64"),
    M("status_cycle", "u64"),
    M("pio_doorbells", "u64", doc="PIO doorbells applied on the bus since attach"),
    M("tx_tails", "u64", doc="TX_TAIL writes applied since attach"),
    M("rx_valids", "u64", doc="RX valid words written since attach"),
    M("pad", "u64", 3),
), 128, """Per (node, context) record in the global shm, written by the harness, in cycles of
the harness's clock (docs/simulator.md):
 issue_cycle         the cycle the harness took the first MMIO store of the latest send
                     from the client's queue (PIO: first store after the previous
                     PIO_DOORBELL; DMA: the TX_TAIL store): the CPU's issue time;
 pio_doorbell_cycle  the cycle the latest PIO_DOORBELL write was acknowledged on the bus;
 tx_tail_cycle       the same for TX_TAIL;
 rx_valid_cycle      the cycle the latest RX valid word became visible in host memory
                     (DMA write latency included); rx_valid_count is its value;
 barrier_enter_cycle the cycle the latest BARRIER write was acknowledged on the bus;
 barrier_done_cycle  the cycle a status-block write raising barrier_done became
                     visible; barrier_done_count its value;
 status_cycle        the cycle the latest status-block write became visible.""")

#: The trace fields a tool reads (all but the padding).
TRACE_FIELDS = tuple(m.name for m in TRACE.members if m.name != "pad")

GLOBAL = CStruct("pn_sim_global", (
    M("magic", "u64"),
    M("version", "u32"),
    M("hdr_bytes", "u32", doc="sizeof(struct pn_sim_global)"),
    M("nodes", "u32"),
    M("n_ctx", "u32"),
    M("mtu", "u32"),
    M("clk_hz", "u32"),
    M("topo_x", "u32"),
    M("topo_y", "u32"),
    M("trace_off", "u32", doc="trace of (node, ctx): trace_off + (node * n_ctx + ctx) * stride"),
    M("trace_stride", "u32"),
    M("mmio_write_cycles", "u32"),
    M("mmio_read_cycles", "u32"),
    M("dma_read_cycles", "u32"),
    M("dma_write_cycles", "u32"),
    M("pid", "u32"),
    M("status_off", "u32", doc="node status of harness node n: status_off + n * status_stride"),
    M("status_stride", "u32"),
    M("status_period", "u32", doc="cycles between two refreshes of a node's status"),
    M("pad0", "u8", 128 - 80),
    M("cycle", "u64", doc="the clock: rising edges since the harness started"),
    M("pad1", "u8", 56),
    M("sleeping", "u32", doc="nothing in flight: the harness waits for a wake byte"),
    M("clients", "u32", doc="clients attached"),
    M("dma_refused", "u64", doc="DMA requests outside client memory (refused, logged)"),
    M("mmio_ops", "u64", doc="client MMIO operations applied"),
    M("job_nodes", "u64", doc="size of the running job (0: none)"),
    M("pauses", "u64", doc="times the clock waited for a client to look (docs/simulator.md)"),
    M("pause_caps", "u64", doc="... of which the wall-clock cap ended (the client did not look)"),
    M("work_ns", "u64", doc="the clock of the library's deadlines: the harness's CPU time plus its idle "
                            "sleeps, not its pauses nor its waits for a CPU (docs/simulator.md)"),
    M("pad2", "u8", 64 - 56),
), 256, "The harness's global shared memory (read-only for clients).")

#: Link ports a node status record has room for (a torus router has 4).
STATUS_LINKS = 4
#: Per-link values of a node status record: (name, CSR ``link<i>_<name>``). A CSR the
#: gateware lacks reads 0 and clears its bit in ``have``.
STATUS_LINK_FIELDS: tuple[tuple[str, str], ...] = (
    ("state", "link_state"), ("down_reason", "down_reason"), ("downs", "downs"),
    ("tx_packets", "tx_packets"), ("rx_packets", "rx_packets"), ("crc_errors", "crc_errors"),
    ("replays", "replays"), ("timeouts", "timeouts"),
)
#: The firmware status registers, in :data:`paranic.spec.fw.FW_STATUS` order.
from .fw import FW_STATUS_NAMES as _FW_NAMES  # noqa: E402

NODE_STATUS = CStruct("pn_sim_node_status", (
    M("seq", "u64", doc="odd while the harness rewrites the record (seqlock)"),
    M("cycle", "u64", doc="the cycle the CSR reads finished (0: never read)"),
    M("dna", "u64", doc="id_dna"),
    M("node_id", "u32", doc="the node CSR"),
    M("cfg_node", "u32", doc="id_cfg_node"),
    M("n_links", "u32", doc="link ports of the node"),
    M("have", "u32", doc="bit k: link field k (PN_SIM_LINK_*) exists in the gateware"),
    M("fw", "u32", len(_FW_NAMES), doc="fw_* CSRs in FW_STATUS order (PN_FW_REG_*)"),
    M("link", "u32", STATUS_LINKS * len(STATUS_LINK_FIELDS),
      doc="field k of link port p (0-based) at [k * PN_SIM_STATUS_LINKS + p]"),
    M("pad", "u8", 256 - 40 - 4 * len(_FW_NAMES) - 4 * STATUS_LINKS * len(STATUS_LINK_FIELDS)),
), 256, """Per node of the cluster (harness index), in the global shm at status_off: the node's
identity, firmware status and links, refreshed by the harness's CSR reads every
status_period cycles while the clock runs (docs/simulator.md, "Status snapshot").
Read it as a seqlock: seq even and unchanged around the copy.""")

#: The global counters a tool reads.
GLOBAL_COUNTERS = ("cycle", "sleeping", "clients", "dma_refused", "mmio_ops", "job_nodes", "pauses",
                   "pause_caps", "work_ns")

FAULT = CStruct("pn_sim_fault", (
    M("magic", "u64", doc="PN_SIM_MAGIC_FAULT"),
    M("version", "u32"),
    M("op", "u32", doc="enum pn_sim_fault_op"),
    M("cable", "u32", doc="0 .. cables-1 (Topology.cables() order)"),
    M("rsvd", "u32"),
    M("at_cycle", "u64", doc="apply at this cycle; 0 or a cycle already past: now"),
    M("value", "u64", doc="FAULT_BER: the threshold, P(bit flipped in a line word) * 2^32"),
), 40, "Fault client -> harness: one request (a cable cut, mended, or its error rate set).")

FAULT_REPLY = CStruct("pn_sim_fault_reply", (
    M("magic", "u64", doc="PN_SIM_MAGIC_FAULT_REPLY"),
    M("version", "u32"),
    M("status", "i32", doc="0 or -errno (-EINVAL: bad op, cable or value)"),
    M("cable", "u32"),
    M("cables", "u32", doc="cables of the cluster"),
    M("cut", "u32", doc="the cable is cut now"),
    M("ber", "u32", doc="its threshold now"),
    M("cycle", "u64", doc="the harness's cycle when it answered"),
    M("at_cycle", "u64", doc="the cycle the request takes (or took) effect"),
), 48, "Harness -> fault client: the answer to each pn_sim_fault.")

STRUCTS = (OP, CTL, HELLO, WELCOME, TRACE, GLOBAL, FAULT, FAULT_REPLY, NODE_STATUS)

assert TRACE_OFF >= GLOBAL.size


def trace_offset(node: int, ctx: int, n_ctx: int) -> int:
    """Byte offset of (node, ctx)'s trace record in the global shared memory."""
    return TRACE_OFF + (node * n_ctx + ctx) * TRACE.size


#: The simulator's per-node device id (a NicCore's ``dna`` input; a board wires its FPGA's
#: DNA): harness node ``i`` gets ``SIM_DNA_BASE + i + 1`` (0 means "no id").
SIM_DNA_BASE = 0x5349_4D44_4E41_0000  # "SIMDNA" << 16


def sim_dna(index: int) -> int:
    return SIM_DNA_BASE + index + 1


def ber_to_threshold(ber: float, bits: int = LINE_WORD_BITS) -> int:
    """A cable's ``ber_threshold``: it flips one bit of a line word with probability
    ``1 - (1 - ber)**bits`` (about ``bits * ber``), i.e. ``threshold / 2**32``."""
    if not isinstance(ber, (int, float)) or math.isnan(ber) or not 0.0 <= ber <= 1.0:
        raise ValueError(f"bit-error rate must be a number in 0..1, not {ber!r}")
    p = 1.0 - (1.0 - ber) ** bits
    return min(round(p * 2**32), 2**32 - 1)


# ---------------------------------------------------------------------------------------
# Latency model (docs/simulator.md, "Latency model")
#
# The simulator's host and link latencies, per corner. Every number comes with its source
# in docs/simulator.md's table; the harness takes them through the generated header
# (PN_SIM_LATENCY_MODELS) and Python (paranic.sim.run, the benches) from here.

#: Cable propagation: about 0.7 c in twinax copper and in fibre (5 ns per metre).
NS_PER_M = 5.0
#: The simulator's clock (the NIC's sys clock): one cycle in ns.
_SYS_NS = 1e9 / P.TARGET_CLK_HZ


@dataclass(frozen=True)
class LinkLatency:
    """One direction of one cable between two NICs' sys clock domains: the transceiver's
    fixed TX + RX datapath (``serdes_ui`` unit intervals at ``line_gbps``), its TX buffer and
    RX elastic buffer (``buffers_ns``), the two clock-domain crossings sys -> transceiver
    clock (``gt_mhz``) and back (one cycle of the writing clock plus ``sync_stages`` of the
    reading one each), and ``length_m`` of cable."""

    line_gbps: float
    serdes_ui: float
    buffers_ns: float
    gt_mhz: float
    sync_stages: int
    length_m: float

    @property
    def serdes_ns(self) -> float:
        return self.serdes_ui / self.line_gbps

    @property
    def cdc_ns(self) -> float:
        gt = 1e3 / self.gt_mhz
        return (_SYS_NS + self.sync_stages * gt) + (gt + self.sync_stages * _SYS_NS)

    @property
    def propagation_ns(self) -> float:
        return self.length_m * NS_PER_M

    @property
    def ns(self) -> float:
        return self.serdes_ns + self.buffers_ns + self.cdc_ns + self.propagation_ns


@dataclass(frozen=True)
class LatencyModel:
    """One corner: the harness's PCIe latencies (``paranic-sim --mmio-write-ns`` ...), the
    receiving CPU's miss on a line the NIC wrote (``poll_miss_ns``, added to the DMA write's
    visibility), and the cable (the gateware's ``SimPhy`` delay, a build parameter)."""

    name: str
    mmio_write_ns: float   #: CPU store -> applied on the NIC's bus (posted write)
    mmio_read_ns: float    #: CPU load -> value back in the CPU (round trip)
    dma_read_ns: float     #: DMA read request -> first completion beat
    dma_write_ns: float    #: last beat of a DMA write -> in the host's memory system
    poll_miss_ns: float    #: the polling CPU's miss on the written line (LLC/DDIO or DRAM)
    link: LinkLatency

    @property
    def cable_ns(self) -> float:
        return self.link.ns

    def ns(self) -> dict[str, float]:
        """Every latency of the model in ns, by :data:`LATENCY_KEYS`."""
        return {k: round(getattr(self, f"{k}_ns"), 3) for k in LATENCY_KEYS}

    def cycles(self) -> dict[str, int]:
        """The same in cycles of the simulator's clock (:func:`ns_to_cycles`)."""
        return {k: ns_to_cycles(v) for k, v in self.ns().items()}


#: The model's latencies, by name: ``paranic-sim --<name>-ns`` (with ``_`` as ``-``) and
#: the ready file's ``latency_cycles``/``latency_ns`` keys.
LATENCY_KEYS = ("mmio_write", "mmio_read", "dma_read", "dma_write", "poll_miss", "cable")


def ns_to_cycles(ns: float) -> int:
    """ns -> whole cycles of ``P.TARGET_CLK_HZ``, rounded to nearest (the harness's rule)."""
    return int(ns * P.TARGET_CLK_HZ / 1e9 + 0.5)


#: Corners (docs/simulator.md, "Latency model", has each number's source).
LATENCY_MODELS: dict[str, LatencyModel] = {m.name: m for m in (
    LatencyModel("optimistic", mmio_write_ns=150, mmio_read_ns=700, dma_read_ns=450, dma_write_ns=150,
                 poll_miss_ns=20,
                 # GTYE3 16-bit 8b/10b, buffers bypassed; 0.5 m
                 link=LinkLatency(line_gbps=10.0, serdes_ui=99 + 134.5, buffers_ns=0, gt_mhz=250,
                                  sync_stages=2, length_m=0.5)),
    LatencyModel("realistic", mmio_write_ns=225, mmio_read_ns=1000, dma_read_ns=550, dma_write_ns=225,
                 poll_miss_ns=40,
                 # GTYE4 32-bit 8b/10b with TX buffer and RX elastic buffer; 1 m
                 link=LinkLatency(line_gbps=10.0, serdes_ui=169 + 242.5, buffers_ns=20, gt_mhz=250,
                                  sync_stages=2, length_m=1.0)),
    LatencyModel("pessimistic", mmio_write_ns=350, mmio_read_ns=1500, dma_read_ns=1000, dma_write_ns=350,
                 poll_miss_ns=100,
                 # GTPE2 (Artix-7) 6.25 Gb/s, buffers; 3-stage synchronisers; 3 m
                 link=LinkLatency(line_gbps=6.25, serdes_ui=153.73 + 223, buffers_ns=40, gt_mhz=156.25,
                                  sync_stages=3, length_m=3.0)),
)}
DEFAULT_MODEL = "realistic"


def latency_model(name: str) -> LatencyModel:
    """The corner called ``name``; a clear error for anything else."""
    try:
        return LATENCY_MODELS[name]
    except (KeyError, TypeError):
        raise ValueError(f"latency model {name!r}: give one of {', '.join(LATENCY_MODELS)}") from None


def cable_cycles(model: str | None = None, cable_ns: float | None = None) -> int:
    """The simulated cable's delay in cycles (``NicCluster(phy_delay=)``, at least 1):
    ``cable_ns`` if given, else the model's (default :data:`DEFAULT_MODEL`)."""
    if cable_ns is None:
        cable_ns = latency_model(model or DEFAULT_MODEL).cable_ns
    elif not isinstance(cable_ns, (int, float)) or math.isnan(cable_ns) or not 0 <= cable_ns <= 1e4:
        raise ValueError(f"cable latency must be a number of ns in 0..10000, not {cable_ns!r}")
    return max(1, ns_to_cycles(cable_ns))
