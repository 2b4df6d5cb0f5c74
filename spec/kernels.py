"""Facts the HLS kernels (``hls/``) and their gateware twins share: the one definition.

* :data:`ROUTE_PORTS`: the RTL port list of the ``route`` kernel, as Vitis HLS exports it
  for the C++ signature in ``hls/route/route.cpp`` (block protocol ``ap_ctrl_hs``, scalar
  inputs ``ap_none``, the table an ``ap_memory`` read port). The Migen twin
  (:mod:`paranic.hw.route_fn`) has exactly these signals, and its Vitis ``Instance``
  wrapper connects exactly these names; a test parses the C++ signature against it.
* The ``collective`` kernel's operations, element types, reduction operators and its
  payload layout: a collective packet is a normal packet (two header words, type
  ``PacketType.COLLECTIVE``) whose payload is one :data:`COLL_FIELDS` word, then the
  vector (``nbytes`` bytes, little-endian elements, at most :data:`COLL_MAX_BYTES`).
  The host side of the kernel uses the same payload without the network header.

``python -m paranic.spec`` writes ``hls/include/pn_hls.h`` from here (:func:`paranic.spec.cgen.hls_header`).
"""

from __future__ import annotations

from enum import IntEnum

from . import protocol as P
from .fields import Field, pack as _pack, unpack as _unpack

# ---------------------------------------------------------------------------
# route: the routing function of one router input
# ---------------------------------------------------------------------------

#: Entries of the route kernel's table (destinations ``0 .. ROUTE_TABLE_NODES-1``); a
#: destination beyond it is routed by dimension-order computation instead.
ROUTE_TABLE_NODES = P.DEFAULT_TABLE_NODES
#: Address width of the table port.
ROUTE_TABLE_ADDR_BITS = (ROUTE_TABLE_NODES - 1).bit_length()
#: Width of a topology dimension (1 .. MAX_NODES: one bit more than a node id).
DIM_BITS = P.NODE_BITS + 1

#: RTL ports of the route kernel: (name, direction "i"/"o", width, meaning). The clock and
#: reset (``ap_clk``, ``ap_rst``, active high) come first, as Vitis HLS emits them.
ROUTE_PORTS: tuple[tuple[str, str, int, str], ...] = (
    ("ap_clk", "i", 1, "clock"),
    ("ap_rst", "i", 1, "synchronous reset, active high"),
    ("ap_start", "i", 1, "a routing request: the inputs below are valid this cycle"),
    ("ap_done", "o", 1, "ap_return holds the port of a request (one pulse per request, in order)"),
    ("ap_idle", "o", 1, "no request in flight"),
    ("ap_ready", "o", 1, "a request is taken this cycle (always: initiation interval 1)"),
    ("dst", "i", P.NODE_BITS, "the header's dst_node"),
    ("node_x", "i", P.NODE_BITS, "this node's X coordinate"),
    ("node_y", "i", P.NODE_BITS, "this node's Y coordinate (0 on a ring)"),
    ("dim_x", "i", DIM_BITS, "topology X dimension (ring: the node count)"),
    ("dim_y", "i", DIM_BITS, "topology Y dimension (ring: 1)"),
    ("table_address0", "o", ROUTE_TABLE_ADDR_BITS, "table read address (= dst)"),
    ("table_ce0", "o", 1, "table read enable"),
    ("table_q0", "i", P.ROUTE_BITS, "table entry at the address of the previous cycle"),
    ("ap_return", "o", P.ROUTE_BITS, "the output port (Port), valid with ap_done"),
)

#: The Vitis flow's names (hls/flow.tcl gets them from paranic.hls through the
#: environment): kernel k's project is ``pn_<k>``, with one solution; its exported
#: Verilog lies at :func:`hls_export_path` under the build folder, where board builds
#: with ``--collective vitis`` / ``--route vitis`` take it.
HLS_SOLUTION = "solution1"


def hls_project(kernel: str) -> str:
    return f"pn_{kernel}"


def hls_export_path(kernel: str) -> str:
    """The exported Verilog's folder, relative to the build folder (``build/``)."""
    return f"hls/{kernel}/{hls_project(kernel)}/{HLS_SOLUTION}/impl/verilog"


#: The C++ arguments of the route kernel's top function, in order: (name, width); the
#: table is ``ap_uint<ROUTE_BITS> table[ROUTE_TABLE_NODES]``.
ROUTE_ARGS: tuple[tuple[str, int], ...] = (
    ("dst", P.NODE_BITS), ("node_x", P.NODE_BITS), ("node_y", P.NODE_BITS),
    ("dim_x", DIM_BITS), ("dim_y", DIM_BITS), ("table", P.ROUTE_BITS))

# ---------------------------------------------------------------------------
# collective: in-network reduce, allreduce and broadcast
# ---------------------------------------------------------------------------

#: Largest vector of one operation, in bytes (32 words).
COLL_MAX_BYTES = 256
COLL_MAX_WORDS = COLL_MAX_BYTES // P.WORD_BYTES
#: A float SUM whose result is a NaN gives this NaN (positive, quiet), whatever the
#: operands' payloads: the C++ ``x + y`` keeps one operand's payload, which one depends
#: on the compiler's operand order; the kernel and its gateware twin both canonicalize.
COLL_F32_QNAN = 0x7FC00000
COLL_F64_QNAN = 0x7FF8000000000000
#: Default combining-tree fan-out exponent (4 children), as the barrier's tree.
COLL_DEFAULT_RADIX_LOG2 = 2
#: Largest fan-out exponent the kernel is built for (one child buffer per child: 2**this).
COLL_MAX_RADIX_LOG2 = 2
#: Largest job of an all-to-all ALLREDUCE (header bit ``a2a``): the kernel keeps two
#: vectors per member (this many sources, :data:`COLL_MAX_WORDS` words each, twice). A larger
#: ``nodes`` with ``a2a`` set is BAD_ARGS, answered at once.
COLL_A2A_MAX_NODES = 32
#: Words of FIFO behind the kernel's net_out in NicCore (hw/collective.py): two all-to-all
#: operations' sends at the limit (2 x (COLL_A2A_MAX_NODES - 1) packets of 3 + COLL_MAX_WORDS
#: words = 2170), so the kernel never waits on injection while the network waits on it
#: (the tree's sends, five packets of 35 words, fit many times over).
COLL_NET_OUT_WORDS = 4096
assert 2 * (COLL_A2A_MAX_NODES - 1) * (3 + COLL_MAX_WORDS) <= COLL_NET_OUT_WORDS
#: Cycles of the kernel's floating-point add, operands in to result out: the depth the
#: all-to-all fold's schedule leaves between a result and its first use (collective.h), the
#: simulator's charge for a float add (sim/harness/coll.cpp) and the Migen twin's adder
#: pipeline (hw/fp_add.py ``FPAdd.LATENCY``, tested equal). Not yet checked against a Vitis
#: schedule.
COLL_FADD_CYCLES = 5
#: The library's default: an ALLREDUCE of a job of at most this many nodes is sent with
#: ``a2a`` set (environment ``PARANIC_COLL_A2A_MAX``; 0: always the tree), as the barrier's
#: ``--barrier-a2a-max``.
COLL_DEFAULT_A2A_MAX = COLL_A2A_MAX_NODES


class CollOp(IntEnum):
    """The operation (field ``op``)."""

    REDUCE = 0     #: the root's host receives the combined vector
    ALLREDUCE = 1  #: every node's host receives the combined vector (the root's, sent down)
    BCAST = 2      #: every node's host receives the root's vector


class CollType(IntEnum):
    """The element type (field ``dtype``)."""

    I32 = 0
    I64 = 1
    F32 = 2
    F64 = 3


#: Bytes per element of each type.
COLL_TYPE_BYTES = {CollType.I32: 4, CollType.I64: 8, CollType.F32: 4, CollType.F64: 8}


class CollRed(IntEnum):
    """The reduction operator (field ``red``); ignored by BCAST."""

    SUM = 0  #: two's complement wrap-around for integers, IEEE-754 round-to-nearest for floats
    MIN = 1  #: ``b < a ? b : a`` (a: the partial result so far; a NaN ``a`` stays)
    MAX = 2  #: ``b > a ? b : a``
    AND = 3  #: bitwise; integers only (on a float type: error)
    OR = 4   #: bitwise; integers only


class CollPhase(IntEnum):
    """Direction of a collective packet (field ``phase``)."""

    UP = 0    #: towards the root: a subtree's combined vector
    DOWN = 1  #: from the root: the result (ALLREDUCE) or the root's vector (BCAST)


class CollErr(IntEnum):
    """Bits of the ``err`` field: set anywhere, carried to the root and down to every host."""

    MISMATCH = 1 << 0  #: contributions disagree on op, dtype, red, root or nbytes
    BAD_ARGS = 1 << 1  #: nbytes not a multiple of the element size or > COLL_MAX_BYTES, AND/OR on floats, bad root


#: The collective header: payload word 0 of a collective packet and of a host command/result.
COLL_FIELDS: tuple[Field, ...] = (
    Field("op", 0, 2, "CollOp: REDUCE, ALLREDUCE, BCAST"),
    Field("dtype", 2, 2, "CollType: I32, I64, F32, F64"),
    Field("red", 4, 3, "CollRed: SUM, MIN, MAX, AND, OR"),
    Field("phase", 7, 1, "CollPhase: UP (towards the root) or DOWN"),
    Field("nbytes", 8, 9, "vector length in bytes, 0..256, a multiple of the element size"),
    Field("root", 17, P.NODE_BITS, "root node of the tree (REDUCE, BCAST; ALLREDUCE: any, the same on every node)"),
    Field("nodes", 29, P.NODE_BITS + 1, "participating nodes: ids 0 .. nodes-1"),
    Field("err", 42, 2, "CollErr bits"),
    Field("nodata", 44, 1, "no vector follows: a REDUCE's completion to a non-root node"),
    Field("refused", 45, 1, "result only: the NIC refused the command, as no collective unit is configured for the sending context"),
    Field("a2a", 46, 1, "ALLREDUCE only: all-to-all (every node sends its vector to every other, each combines all in the pairwise tree over member index: (v0 op v1), (v2 op v3), ..., then pairs of those; docs/hls.md) instead of the tree; nodes <= COLL_A2A_MAX_NODES, else (or on REDUCE, BCAST) BAD_ARGS at once"),
    Field("rsvd", 47, 1, "reserved, zero"),
    Field("episode", 48, 16, "operation number (wraps); contributions of one operation carry the same"),
)
COLL_FIELD = {f.name: f for f in COLL_FIELDS}


#: The collective kernel's streams (64-bit words; no TLAST: a message's length is in its
#: header): (name, direction as seen from the kernel, meaning).
COLL_STREAMS: tuple[tuple[str, str, str], ...] = (
    ("host_in", "i", "commands from this node's host: the collective header word, then ceil(nbytes/8) vector words"),
    ("host_out", "o", "results to this node's host: the header word (phase DOWN), then the vector unless nodata"),
    ("net_in", "i", "collective packets for this node: two network header words, the collective header word, the vector"),
    ("net_out", "o", "collective packets this node sends, framed the same way"),
)

#: RTL ports of the collective kernel, as Vitis HLS exports ``collective()`` with its
#: pragmas (``ap_ctrl_hs``, the streams ``axis``, the scalars ``ap_none``); the gateware's
#: Migen implementation and its Vitis ``Instance`` have exactly these signals.
#: ``ap_start`` is held high: each call handles one message, and the next starts at once.
COLL_PORTS: tuple[tuple[str, str, int, str], ...] = (
    ("ap_clk", "i", 1, "clock"),
    ("ap_rst", "i", 1, "synchronous reset, active high"),
    ("ap_start", "i", 1, "held high: handle messages as they come"),
    ("ap_done", "o", 1, "a call (one message) finished"),
    ("ap_idle", "o", 1, "no call in progress"),
    ("ap_ready", "o", 1, "a call is taken this cycle"),
    *(p for name, d, doc in COLL_STREAMS for p in (
        (f"{name}_TDATA", d, P.WORD_BITS, f"{name}: {doc}"),
        (f"{name}_TVALID", d, 1, f"{name}: a word this cycle"),
        (f"{name}_TREADY", "o" if d == "i" else "i", 1, f"{name}: the word is taken"))),
    ("node", "i", P.NODE_BITS, "this node's id"),
    ("radix_log2", "i", 2, "the tree's fan-out exponent (children per node: 2**radix_log2, at most 4)"),
)


def pack_coll(**values: int) -> int:
    """The collective header word from keyword fields (missing fields are zero)."""
    return int.from_bytes(_pack(COLL_FIELDS, values, P.WORD_BYTES), "little")


def unpack_coll(word: int) -> dict[str, int]:
    return _unpack(COLL_FIELDS, int(word).to_bytes(P.WORD_BYTES, "little"))


# -- the reduction order ------------------------------------------------------------------
#
# The combining tree is the implicit k-ary heap (k = 2**radix_log2) over *relative* ids
# r = (node - root) mod nodes, so the root is r = 0 (the barrier's tree, rotated to the
# root). Every node combines, in this fixed order, whatever the arrival order:
#
#     partial(r) = (((own(r) (+) partial(c0)) (+) partial(c1)) ... ) (+) partial(c_last)
#
# with c0 < c1 < ... its children. The root's partial is the result; ALLREDUCE sends it
# down the same tree unchanged, so every node holds the very bits the root computed.


def coll_parent(rel: int, radix_log2: int) -> int | None:
    return None if rel == 0 else (rel - 1) >> radix_log2


def coll_children(rel: int, nodes: int, radix_log2: int) -> list[int]:
    first = (rel << radix_log2) + 1
    return [c for c in range(first, first + (1 << radix_log2)) if c < nodes]
