"""Topologies and routing tables: rings and 2-D tori, dimension-order routing.

Node ``i`` of an ``X x Y`` torus sits at ``(i % X, i // X)``; a ring of ``n`` nodes is an
``n x 1`` torus. Link port ``XP`` of node ``(x, y)`` is cabled to port ``XM`` of node
``(x+1, y)`` (mod X), and ``YP`` to ``YM`` of ``(x, y+1)``. Routing is X first, then Y,
each along the shorter direction. A destination exactly half way round an even ring (a
tie) goes + when the position in that dimension plus the destination's coordinate in
the other dimension is even, else - (``ties="split"``, the default: both directions get
half the ties); ``ties="plus"`` sends every tie + (the old rule, kept for comparison).
Either way the path between a source and a destination is unique, which with FIFO links
gives in-order delivery.
The tables are what ``paranic topo`` prints and what the router's CSRs are loaded with.

The routing function itself is C (``spec/c/pn_route.c``, :mod:`paranic.spec.routelib`): the
SoC firmware compiles the same file, so the tables it loads after a link failure are the
ones ``paranic topo --down`` prints. A failed cable turns its row's or column's ring into a
line; a destination cut off in X or Y is unreachable (``Port.DROP``).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Iterable

from .protocol import MAX_NODES, Port

#: Failed links: (node, link port) pairs; a cable is out when either end is listed.
Down = Iterable[tuple[int, int]]


@dataclass(frozen=True)
class Topology:
    x: int
    y: int = 1
    #: tie rule of the routing function: "split" (by parity) or "plus" (every tie +)
    ties: str = "split"

    def __post_init__(self) -> None:
        if self.x < 1 or self.y < 1 or self.x * self.y > MAX_NODES:
            raise ValueError(f"bad topology {self.x}x{self.y}")
        if self.ties not in ("split", "plus"):
            raise ValueError(f"bad tie rule {self.ties!r}: use 'split' or 'plus'")

    @classmethod
    def ring(cls, n: int, ties: str = "split") -> "Topology":
        return cls(n, 1, ties)

    @classmethod
    def torus(cls, x: int, y: int, ties: str = "split") -> "Topology":
        return cls(x, y, ties)

    @classmethod
    def parse(cls, text: str, ties: str = "split") -> "Topology":
        """``ring:8``, ``torus:4x4`` or ``8`` (a ring)."""
        kind, _, arg = text.partition(":")
        if not arg:
            kind, arg = "ring", kind
        try:
            if kind == "ring":
                return cls.ring(int(arg), ties)
            if kind == "torus":
                a, b = arg.lower().split("x")
                return cls.torus(int(a), int(b), ties)
        except ValueError:
            pass
        raise ValueError(f"bad topology {text!r}: use ring:N or torus:XxY")

    @property
    def nodes(self) -> int:
        return self.x * self.y

    @property
    def is_torus(self) -> bool:
        return self.y > 1

    @property
    def link_ports(self) -> int:
        """Link ports each router needs: 2 on a ring, 4 on a torus."""
        return 4 if self.is_torus else 2

    def __str__(self) -> str:
        return f"torus:{self.x}x{self.y}" if self.is_torus else f"ring:{self.x}"

    def coords(self, node: int) -> tuple[int, int]:
        return node % self.x, node // self.x

    def node(self, x: int, y: int) -> int:
        return (x % self.x) + (y % self.y) * self.x

    def neighbor(self, node: int, port: int) -> tuple[int, int]:
        """(node, port) at the far end of ``port`` of ``node``."""
        x, y = self.coords(node)
        if port == Port.XP:
            return self.node(x + 1, y), Port.XM
        if port == Port.XM:
            return self.node(x - 1, y), Port.XP
        if port == Port.YP and self.is_torus:
            return self.node(x, y + 1), Port.YM
        if port == Port.YM and self.is_torus:
            return self.node(x, y - 1), Port.YP
        raise ValueError(f"node {node} has no port {port}")

    def _c(self, down: Down | None):
        """The ``struct pn_route_topo`` of this topology with ``down`` (kept alive)."""
        from .routelib import TIES, RouteTopo

        t = RouteTopo(self.x, self.y, None, TIES[self.ties])
        arr = None
        if down:
            arr = (ctypes.c_uint8 * self.nodes)()
            for node, port in down:
                if not (0 <= node < self.nodes) or port not in self.ports:
                    raise ValueError(f"{self}: no link port {port} on node {node}")
                arr[node] |= 1 << (int(port) - 1)
            t.down = ctypes.cast(arr, ctypes.POINTER(ctypes.c_uint8))
        return t, arr

    @property
    def ports(self) -> tuple[int, ...]:
        """The link ports of a router in this topology."""
        return (Port.XP, Port.XM, Port.YP, Port.YM) if self.is_torus else (Port.XP, Port.XM)

    def route(self, node: int, dst: int, down: Down | None = None) -> int:
        """Output port at ``node`` for a packet to ``dst`` (X then Y), avoiding ``down``."""
        from .routelib import lib

        if not (0 <= dst < self.nodes) or not (0 <= node < self.nodes):
            return Port.DROP
        t, _keep = self._c(down)
        return int(lib().pn_route(ctypes.byref(t), node, dst))

    def table(self, node: int, depth: int | None = None, down: Down | None = None) -> list[int]:
        """Routing table of ``node``: one port per destination id (DROP past the end)."""
        from .routelib import lib

        depth = self.nodes if depth is None else depth
        if not 0 <= node < self.nodes:
            raise ValueError(f"node {node} not in {self}")
        t, _keep = self._c(down)
        out = (ctypes.c_uint8 * max(depth, 1))()
        lib().pn_route_table(ctypes.byref(t), node, out, depth)
        return [int(v) for v in out[:depth]]

    def path(self, src: int, dst: int, down: Down | None = None) -> list[int]:
        """Nodes visited from ``src`` to ``dst`` inclusive (ValueError when cut off)."""
        out = [src]
        node = src
        while node != dst:
            port = self.route(node, dst, down)
            if port == Port.DROP:
                raise ValueError(f"{self}: node {dst} unreachable from {node}")
            node, _ = self.neighbor(node, port)
            out.append(node)
            if len(out) > self.nodes + 1:
                raise RuntimeError("routing loop")
        return out

    def hops(self, src: int, dst: int, down: Down | None = None) -> int:
        return len(self.path(src, dst, down)) - 1

    def links(self) -> list[tuple[int, int, int, int]]:
        """Every unidirectional link as (src node, src port, dst node, dst port)."""
        out = []
        ports = [Port.XP, Port.XM] + ([Port.YP, Port.YM] if self.is_torus else [])
        for n in range(self.nodes):
            for p in ports:
                m, q = self.neighbor(n, p)
                out.append((n, int(p), m, int(q)))
        return out

    def cables(self) -> list[tuple[int, int, int, int]]:
        """Every cable (both directions between two ports) once, as
        (node, port, far node, far port), numbered by position in this list.

        Numbering rule: cables are listed from the "plus" end, node by node (0, 1, ...),
        and for each node its ``XP`` cable before its ``YP`` cable (torus only); the far
        end is the neighbour's ``XM``/``YM``. So on a ring cable ``k`` joins node ``k``'s
        XP to node ``k+1``'s XM (mod N); on an X x Y torus cable ``2n`` is node ``n``'s X
        cable and ``2n+1`` its Y cable. Every cable has exactly one plus end (also on a
        2-node ring, whose two cables join the same pair of nodes), so each appears once.
        The simulator's ``cable<k>_*`` ports and fault options use these numbers.
        """
        ports = [Port.XP] + ([Port.YP] if self.is_torus else [])
        out = []
        for n in range(self.nodes):
            for p in ports:
                m, q = self.neighbor(n, p)
                out.append((n, int(p), m, int(q)))
        return out

    def cable_of(self, node: int, port: int) -> int:
        """Number of the cable at ``port`` of ``node`` (either end)."""
        for k, (n, p, m, q) in enumerate(self.cables()):
            if (n, p) == (node, int(port)) or (m, q) == (node, int(port)):
                return k
        raise ValueError(f"node {node} has no port {port}")

    # -- traffic patterns used by tests and benchmarks ---------------------
    def pattern_dst(self, pattern: str, src: int) -> int:
        """Destination of ``src`` under a classic permutation pattern."""
        n = self.nodes
        x, y = self.coords(src)
        if pattern == "tornado":
            return self.node(x + (self.x - 1) // 2, y + (self.y - 1) // 2) if self.is_torus \
                else (src + (n - 1) // 2) % n
        if pattern == "transpose":
            if self.is_torus and self.x == self.y:
                return self.node(y, x)
            return (n - 1 - src)  # on a ring: reversal
        if pattern == "bitcomp":
            bits = max(1, (n - 1).bit_length())
            return (~src) & ((1 << bits) - 1) if n == 1 << bits else (n - 1 - src)
        if pattern == "all-to-one":
            return 0
        raise ValueError(f"unknown pattern {pattern!r}")

    # -- channel load analysis -----------------------------------------------
    def sources(self, pattern: str, self_traffic: bool = True) -> dict[int, dict[int, float]]:
        """Traffic matrix of ``pattern`` per unit injection rate: ``{src: {dst: share}}``,
        shares of a source summing to 1. ``uniform``: every other node alike (no self
        traffic, as the hardware generator draws it); a permutation or ``all-to-one``:
        :meth:`pattern_dst`. A node whose pattern destination is itself sends to itself
        (through its router's local port: injection and ejection only), as the traffic
        generator does; ``self_traffic=False`` makes it silent instead."""
        n = self.nodes
        out: dict[int, dict[int, float]] = {}
        for s in range(n):
            if pattern == "uniform":
                if n > 1:
                    out[s] = {d: 1.0 / (n - 1) for d in range(n) if d != s}
                continue
            d = self.pattern_dst(pattern, s)
            if d != s or self_traffic:
                out[s] = {d: 1.0}
        return out

    def channel_loads(self, pattern: str, self_traffic: bool = True) -> dict[tuple, float]:
        """Expected load of every channel per unit injection rate of each sending node
        (the routing function's paths, :meth:`path`): keys ``("inject", node)``,
        ``("eject", node)``, ``("link", node, port)`` (the link leaving ``node`` on
        ``port``); a load of 1.5 means the channel would need 1.5 words/cycle when
        every sending node injects 1 word/cycle."""
        loads: dict[tuple, float] = {("inject", i): 0.0 for i in range(self.nodes)}
        loads.update({("eject", i): 0.0 for i in range(self.nodes)})
        loads.update({("link", n, p): 0.0 for n, p, _, _ in self.links()})
        for s, dsts in self.sources(pattern, self_traffic).items():
            for d, share in dsts.items():
                loads[("inject", s)] += share
                loads[("eject", d)] += share
                path = self.path(s, d)
                for a, b in zip(path, path[1:]):
                    loads[("link", a, self.route(a, d))] += share
        return loads

    def saturation_bound(self, pattern: str, self_traffic: bool = True) -> float:
        """Throughput bound per sending node (fraction of a link's word rate) of
        ``pattern`` under this routing: ``min(1, 1 / max channel load)``
        (:meth:`channel_loads`; injection and ejection channels included, so it
        never exceeds 1)."""
        worst = max(self.channel_loads(pattern, self_traffic).values())
        return min(1.0, 1.0 / worst) if worst > 0 else 1.0
