"""``paranic cluster status``: what each node of a cluster says about itself (firmware
state, topology and coordinates, route epoch, links and their counters), through
libparanic's ``pn_cluster_status`` on the sim, pci or sw backend (docs/userlib.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from paranic.spec import fw as FW
from paranic.spec import protocol as P
from paranic.spec.link import LinkDownReason, LinkState

#: ``down_reason`` values (the link layer's ``link<i>_down_reason`` CSR, docs/link-layer.md).
DOWN_REASONS = {int(r): r.name.lower() for r in LinkDownReason}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["status"], help="status: every node's firmware state and links")
    p.add_argument("--backend", choices=["sim", "pci", "sw"],
                   help="default $PARANIC_BACKEND (sim: the simulator at $PARANIC_SIM_SOCKET or "
                        "--cluster; pci: this board; sw: a sw cluster)")
    p.add_argument("--cluster", help="cluster name (sim, sw; default $PARANIC_CLUSTER)")
    p.add_argument("--json", action="store_true", help="one JSON object {\"backend\", \"nodes\": [...]}")


def _name(enum: Any, v: int) -> str:
    try:
        return enum(v).name.lower()
    except ValueError:
        return str(v)


def describe(st: dict[str, Any]) -> dict[str, Any]:
    """A node's pn_node_status_t as the JSON the command prints: names for the enums."""
    cfg = st["cfg_node"]
    d = {
        "index": st["index"],
        "node_id": st["node_id"],
        "dna": f"0x{st['dna']:016x}",
        "cfg_node": cfg & 0xFFF if cfg & FW.CFG_NODE_VALID else None,
        "fw_state": _name(FW.FwState, st["fw_state"]),
        "fw_error": _name(FW.FwError, st["fw_error"]),
        "topology": [st["topo_x"], st["topo_y"]],
        "coords": [st["coord_x"], st["coord_y"]],
        "have_fw": bool(st["flags"] & 1),
        "cycle": st["cycle"],
    }
    for k in ("epoch", "links_in", "reroutes", "link_downs", "evacuated", "lost", "heartbeat",
              "fingerprint", "flush_timeouts", "phase"):
        d[k] = st[k]
    d["links"] = []
    for ln in st["links"]:
        e = {"port": P.Port(ln["port"]).name, "state": _name(LinkState, ln["state"])}
        if ln["flags"] & 1:
            e["down_reason"] = DOWN_REASONS.get(ln["down_reason"], str(ln["down_reason"]))
            e["downs"] = ln["downs"]
        for k in ("tx_packets", "rx_packets", "crc_errors", "replays", "timeouts"):
            e[k] = ln[k]
        d["links"].append(e)
    return d


def _topology(nodes: list[dict[str, Any]]) -> str:
    tops = {tuple(n["topology"]) for n in nodes if n["fw_state"] != "none"}
    if not tops:
        return "not discovered (no firmware: the host configured the nodes)"
    if len(tops) > 1:
        return "nodes disagree: " + ", ".join(f"{x}x{y}" for x, y in sorted(tops))
    x, y = tops.pop()
    return f"ring:{x}" if y <= 1 else f"torus:{x}x{y}"


def run(a: argparse.Namespace) -> int:
    from paranic.clib import LibraryError, PnError
    from paranic.lib import Hal

    try:
        with Hal.open(backend=a.backend, cluster=a.cluster, node=0) as h:
            backend = h.backend
            nodes = [describe(s) for s in h.cluster()]
    except (PnError, LibraryError, OSError) as e:
        print(f"paranic cluster status: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({"backend": backend, "topology": _topology(nodes), "nodes": nodes}))
        return 0
    print(f"backend {backend}: {len(nodes)} node(s); topology {_topology(nodes)}")
    for n in nodes:
        cfg = "" if n["cfg_node"] is None else f" (configured {n['cfg_node']})"
        err = "" if n["fw_error"] == "none" else f" error {n['fw_error']}"
        print(f"node {n['index']}: id {n['node_id']}{cfg} dna {n['dna']} fw {n['fw_state']}{err} "
              f"coords {n['coords'][0]},{n['coords'][1]} epoch {n['epoch']} "
              f"fingerprint 0x{n['fingerprint']:08x}")
        if n["have_fw"] and n["fw_state"] != "none":
            print(f"  reroutes {n['reroutes']} link_downs {n['link_downs']} evacuated {n['evacuated']} "
                  f"lost {n['lost']} flush_timeouts {n['flush_timeouts']} heartbeat {n['heartbeat']} "
                  f"links_in 0x{n['links_in']:x}")
        for ln in n["links"]:
            fault = f" down_reason {ln['down_reason']} downs {ln['downs']}" if "downs" in ln else ""
            print(f"  {ln['port']:<3} {ln['state']:<9} tx {ln['tx_packets']} rx {ln['rx_packets']} "
                  f"crc {ln['crc_errors']} replays {ln['replays']} timeouts {ln['timeouts']}{fault}")
        if not n["links"]:
            print("  no links")
    return 0
