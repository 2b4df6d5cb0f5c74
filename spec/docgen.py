"""Markdown tables generated from the spec, for the documents in ``docs/``.

A document holds each generated table between ``<!-- BEGIN GENERATED: <name> -->`` and
``<!-- END GENERATED -->``; :data:`TABLES` maps a name to its generator, and
``python -m paranic.spec`` rewrites every such block (``--check`` only compares).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from . import fw as FW
from . import kernels as K
from . import link as LK
from . import protocol as P
from .fields import Field


def _md_fields(fields: Iterable[Field], unit_bits: int) -> list[str]:
    out = ["| field | word | bits | width | meaning |", "|---|---|---|---|---|"]
    for f in fields:
        lo = f.offset % unit_bits
        out.append(f"| `{f.name}` | {f.offset // unit_bits} | {lo + f.width - 1}:{lo} | "
                   f"{f.width} | {f.doc} |")
    return out


def protocol_tables() -> str:
    """The layout tables of docs/protocol.md."""
    L = ["### Packet header (two 64-bit little-endian words)", ""]
    L += _md_fields(P.HEADER_FIELDS, 64)
    L += ["", "### Packet types", "", "| value | name |", "|---|---|"]
    L += [f"| {int(t)} | `{t.name}` |" for t in P.PacketType]
    L += ["", "### Flags", "", "| bit | name |", "|---|---|"]
    L += [f"| 0x{int(t):x} | `{t.name}` |" for t in P.Flags]
    L += ["", "### Router ports (routing-table entries)", "", "| value | port |", "|---|---|"]
    L += [f"| {int(t)} | `{t.name}` |" for t in P.Port]
    L += ["", f"### Context page ({P.CTX_PAGE_BYTES} bytes per context)", "",
          "| offset | register |", "|---|---|"]
    L += [f"| 0x{int(r):03x} | `{r.name}` |" for r in P.CtxReg]
    L += [f"| 0x{P.PIO_WINDOW_OFFSET:03x}..0x{P.PIO_WINDOW_OFFSET + P.PIO_WINDOW_BYTES - 1:03x} "
          f"| PIO transmit window |"]
    L += ["", "### STATUS register bits", "", "| bit | name |", "|---|---|"]
    L += [f"| 0x{int(t):x} | `{t.name}` |" for t in P.StatusBit]
    L += ["", "### `host_ctx_state` bits (privileged CSR, the driver's hand-over)", "",
          "| bit | name | meaning |", "|---|---|---|"]
    L += [f"| {i} | `{n}` | {d} |" for i, (n, d) in enumerate(P.CTX_STATE_BITS)]
    L += ["", f"### DMA TX descriptor ({P.TX_DESC_BYTES} bytes, 64-bit little-endian words)", ""]
    L += _md_fields(P.TX_DESC_FIELDS, 64)
    L += ["", f"### Status block ({P.STATUS_BLOCK_BYTES} bytes, 32-bit little-endian words)", ""]
    L += _md_fields(P.STATUS_FIELDS, 32)
    L += ["", f"### RX slot (MTU {P.DEFAULT_MTU}: {P.rx_slot_bytes()} bytes)", "",
          "| offset | content |", "|---|---|",
          f"| {P.RX_SLOT_HEADER_OFFSET} | packet header (16 bytes, as received, src stamped) |",
          f"| {P.RX_SLOT_PAYLOAD_OFFSET} | payload (`length` bytes, up to MTU) |",
          f"| slot size - {P.RX_VALID_BYTES} | valid word: packet number in this ring + 1 (u64), "
          "written last |"]
    return "\n".join(L) + "\n"


def control_word_table() -> str:
    """The control-word layout of docs/link-layer.md."""
    L = ["| bits | field | SOF | STATUS | TRAIN |", "|---|---|---|---|---|"]
    for f in LK.CTL_FIELDS:
        bits = f"{f.offset}" if f.width == 1 else f"{f.offset}..{f.offset + f.width - 1}"
        L.append(f"| {bits} | `{f.name}` | " + " | ".join(LK.CTL_USE[f.name]) + " |")
    return "\n".join(L) + "\n"


def link_state_table() -> str:
    L = ["| `link_state` | meaning |", "|---|---|"]
    L += [f"| {int(s)} {s.name} | {LK.LINK_STATE_DOC[s]} |" for s in LK.LinkState]
    return "\n".join(L) + "\n"


def link_down_reason_table() -> str:
    L = ["| `down_reason` | meaning |", "|---|---|"]
    L += [f"| {int(s)} {s.name} | {LK.LINK_DOWN_REASON_DOC[s]} |" for s in LK.LinkDownReason]
    return "\n".join(L) + "\n"


def fw_tables() -> str:
    """The firmware-status tables of docs/mgmt.md."""
    L = ["| `fw_state` | name | meaning |", "|---|---|---|"]
    L += [f"| {int(s)} | `{s.name}` | {FW.FW_STATE_DOC[s]} |" for s in FW.FwState]
    L += ["", "| `fw_error` | name | meaning |", "|---|---|---|"]
    L += [f"| {int(s)} | `{s.name}` | {FW.FW_ERROR_DOC[s]} |" for s in FW.FwError]
    L += ["", "| CSR | bits | meaning |", "|---|---|---|"]
    L += [f"| `fw_{n}` | {w} | {d} |" for n, w, d in FW.FW_STATUS]
    L += [f"| `id_{n}` (ro) | {w} | {d} |" for n, w, d in FW.ID_REGS]
    return "\n".join(L) + "\n"


def hls_tables() -> str:
    """The HLS kernels' interfaces in docs/hls.md (:mod:`paranic.spec.kernels`)."""
    L = ["### `route` kernel ports", "", "| port | dir | width | meaning |", "|---|---|---|---|"]
    L += [f"| `{n}` | {'in' if d == 'i' else 'out'} | {w} | {doc} |" for n, d, w, doc in K.ROUTE_PORTS]
    L += ["", "### `collective` kernel ports", "", "| port | dir | width | meaning |", "|---|---|---|---|"]
    L += [f"| `{n}` | {'in' if d == 'i' else 'out'} | {w} | {doc} |" for n, d, w, doc in K.COLL_PORTS]
    L += ["", "### Collective header (payload word 0)", ""]
    L += _md_fields(K.COLL_FIELDS, 64)
    for enum in (K.CollOp, K.CollType, K.CollRed, K.CollPhase, K.CollErr):
        L += ["", f"### `{enum.__name__}`", "", "| value | name |", "|---|---|"]
        L += [f"| {int(t)} | `{t.name}` |" for t in enum]
    return "\n".join(L) + "\n"


#: Generated block name -> generator.
TABLES: dict[str, Callable[[], str]] = {
    "protocol": protocol_tables,
    "link-control-word": control_word_table,
    "link-state": link_state_table,
    "link-down-reason": link_down_reason_table,
    "fw-status": fw_tables,
    "hls": hls_tables,
}

_BLOCK = re.compile(r"(<!-- BEGIN GENERATED: ([\w-]+) -->\n)(.*?)(<!-- END GENERATED -->)", re.S)


def refresh(doc: str) -> str:
    """``doc`` with every generated block rewritten (unknown names raise KeyError)."""
    return _BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)]() + m.group(4), doc)


def blocks(doc: str) -> list[str]:
    """Names of the generated blocks in ``doc``."""
    return [m.group(2) for m in _BLOCK.finditer(doc)]
