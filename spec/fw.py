"""Firmware status facts: the states and error codes the SoC's firmware reports, and the
``fw_*`` status registers it writes (docs/mgmt.md).

A NicCore carries the registers whether or not a soft CPU runs firmware on it: the
firmware writes them, the host (driver sysfs, the simulator's status snapshot, the HAL's
``pn_cluster_status``) reads them. Without firmware they stay 0 (``FwState.NONE``).
``python -m paranic.spec`` writes the enums into ``pn_protocol.h`` (``PN_FW_STATE_*``,
``PN_FW_ERROR_*`` and the name tables) and the tables of docs/mgmt.md.
"""

from __future__ import annotations

from enum import IntEnum


class FwState(IntEnum):
    """Value of the ``fw_state`` register."""

    NONE = 0      #: no firmware (or not started): the host configures the NIC
    BOOT = 1      #: firmware running, links being trained
    DISCOVER = 2  #: exchanging HELLO / topology messages with the neighbours
    ROUTED = 3    #: node id and routing table loaded, every link in use
    DEGRADED = 4  #: routed around at least one failed link
    ERROR = 5     #: gave up; ``fw_error`` says why


FW_STATE_DOC = {
    FwState.NONE: "no firmware, or not started: the host configures the NIC",
    FwState.BOOT: "firmware running, links being trained",
    FwState.DISCOVER: "exchanging control packets with the neighbours",
    FwState.ROUTED: "node id and routing table loaded, every link in use",
    FwState.DEGRADED: "routed around at least one failed link",
    FwState.ERROR: "gave up; fw_error says why",
}


class FwError(IntEnum):
    """Value of the ``fw_error`` register (0 while ``fw_state`` is not ERROR, or a warning
    the firmware keeps after it recovered)."""

    NONE = 0          #: no error
    NO_LINKS = 1      #: no link came up
    TOPOLOGY = 2      #: the cabling is neither a ring nor a 2-D torus it recognises
    ID_CONFLICT = 3   #: two nodes are configured with the same node id
    TOO_MANY = 4      #: more nodes than the routing table (or the id space) holds
    DISAGREE = 5      #: the nodes' topology databases never agreed (fingerprints differ)
    PARTITIONED = 6   #: failed links split the network: some nodes are unreachable
    INTERNAL = 7      #: firmware assertion failed


FW_ERROR_DOC = {
    FwError.NONE: "no error",
    FwError.NO_LINKS: "no link came up",
    FwError.TOPOLOGY: "cabling is neither a ring nor a 2-D torus",
    FwError.ID_CONFLICT: "two nodes are configured with the same node id",
    FwError.TOO_MANY: "more nodes than the routing table holds",
    FwError.DISAGREE: "the nodes' topology databases never agreed",
    FwError.PARTITIONED: "failed links split the network",
    FwError.INTERNAL: "firmware assertion failed",
}

#: The firmware status registers, in order: (name, bits, meaning). Each is a NicCore
#: CSRStorage ``fw_<name>`` (hw/mgmt.py), written by the firmware and read by the host.
FW_STATUS: tuple[tuple[str, int, str], ...] = (
    ("state", 8, "FwState"),
    ("error", 8, "FwError"),
    ("topo", 32, "topology dimensions: x | y << 16 (a ring: y = 1)"),
    ("coords", 32, "this node's coordinates: x | y << 16"),
    ("epoch", 32, "route plan in use: +1 on every route change"),
    ("links_in", 8, "bit p-1 set: link port p carries routes"),
    ("reroutes", 32, "route reloads after a link went down or came back"),
    ("link_downs", 32, "links the firmware took out"),
    ("evacuated", 32, "packets caught on a failed link and replayed by another path"),
    ("lost", 32, "packets caught on a failed link that could not be replayed"),
    ("heartbeat", 32, "incremented by the firmware's main loop"),
    ("fingerprint", 32, "hash of the topology database: equal on all nodes once they agree"),
    ("flush_timeouts", 32, "route changes whose flush gave up: order across them not guaranteed"),
    ("phase", 8, "route change under way: 0 none, 1 armed, 2 replaying, 3 flushing, 4 switched"),
)
FW_STATUS_NAMES = tuple(n for n, _, _ in FW_STATUS)

#: Identity inputs of a NicCore (driven by the board or the simulator), read-only CSRs
#: ``id_<name>``: (name, bits, meaning).
ID_REGS: tuple[tuple[str, int, str], ...] = (
    ("dna", 64, "unique device id (the FPGA's DNA; a per-node value in the simulator); 0 = none"),
    ("cfg_node", 16, "bit 15: a node id is configured; bits 11..0: that id"),
)
#: ``id_cfg_node`` bit 15: a node id is configured.
CFG_NODE_VALID = 1 << 15


def cfg_node(node: int | None) -> int:
    """The ``id_cfg_node`` value for a configured id (None: no id configured)."""
    if node is None:
        return 0
    if not 0 <= node < (1 << 12):
        raise ValueError(f"configured node id {node} must be in 0..4095")
    return CFG_NODE_VALID | node


def split_xy(v: int) -> tuple[int, int]:
    """``fw_topo``/``fw_coords`` -> (x, y)."""
    return v & 0xFFFF, (v >> 16) & 0xFFFF
