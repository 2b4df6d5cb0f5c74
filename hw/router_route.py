"""The routing stage of one router input: the route of the packet at the head of the input.

The router (hw/router.py) instantiates one :class:`RouteStage` per input. The stage
reads the router's routing table (two sets side by side in one entry, docs/architecture.md
"Two table sets and divert") and gives the head packet's route in its own set (header
``rt``) and in the other one (for divert), with ``valid`` when they are there. How the
route is computed is the build option ``route_fn`` (:data:`ROUTE_FNS`):

* ``"table"``: the table alone, read in the cycle the header is at the head (route one
  cycle later); a destination beyond the table is dropped (``oob``).
* ``"migen"``: the route kernel's Migen twin (:class:`~paranic.hw.route_fn.RouteFn`) --
  the table for destinations inside it, dimension-order routing beyond it.
* ``"vitis"``: the kernel's exported RTL (:class:`~paranic.hw.route_fn.RouteFnVitis`).
* ``"sim"``: the simulator's DPI-C shell (:class:`~paranic.hw.route_fn.RouteFnDpi`), which
  runs the kernel's C++.

With a kernel, the kernel's ``ap_memory`` table port reads the table of the packet's own
set; the other set's entry comes from the same read (the port's other half), kept for
divert, read again every cycle while the route waits for its packet to be taken (the
kernel is idle then), so that divert sees a plan written meanwhile. The kernel needs this node's coordinates and the topology's dimensions
(:class:`RouteCoords`).
"""

from __future__ import annotations

from migen import If, Module, Mux, Signal
from migen.fhdl.specials import READ_FIRST
from litex.soc.interconnect.csr import AutoCSR, CSRStatus, CSRStorage

from paranic.spec import kernels as K
from paranic.spec import protocol as P

from .route_fn import RouteFn, RouteFnDpi, RouteFnVitis

#: The router's build option ``route_fn``: how an input's route is computed.
ROUTE_FNS = ("table", "migen", "vitis", "sim")


def make_route_fn(impl: str, table_nodes: int) -> Module:
    """The route kernel of ``impl`` (``"migen"``, ``"vitis"``, ``"sim"``) for a router whose
    table has ``table_nodes`` entries."""
    if impl == "migen":
        return RouteFn(table_nodes=table_nodes)
    if impl in ("vitis", "sim"):
        if table_nodes > K.ROUTE_TABLE_NODES:
            raise ValueError(f"route_fn={impl!r}: the kernel's table has {K.ROUTE_TABLE_NODES} entries, "
                             f"the router {table_nodes}")
        return RouteFnVitis() if impl == "vitis" else RouteFnDpi()
    raise ValueError(f"route_fn: {impl!r} is not one of {ROUTE_FNS}")


class RouteStage(Module):
    """The route of one input's head packet.

    Inputs: ``head`` (a packet's header word 0 is at the head of the input and the table
    is ready), ``take`` (the input takes that packet this cycle), ``dst``, ``rt`` (from the
    header word, stable while ``head`` and not ``take``), and the node's coordinates
    ``node_x``/``node_y`` and the topology's ``dim_x``/``dim_y`` (used by the kernels).

    Outputs: ``valid`` (the route of the head packet is there; it falls with ``take``),
    ``own``/``other`` (its route in its own set and in the other one), ``in_table`` (the
    destination has table entries: only then may it be diverted), ``oob`` (beyond the
    table with ``route_fn="table"``: to be dropped).
    """

    def __init__(self, impl: str, table, table_nodes: int) -> None:
        if impl not in ROUTE_FNS:
            raise ValueError(f"route_fn: {impl!r} is not one of {ROUTE_FNS}")
        rb = P.ROUTE_BITS
        tbits = (table_nodes - 1).bit_length()
        self.head = Signal()
        self.take = Signal()
        self.dst = Signal(P.NODE_BITS)
        self.rt = Signal()
        self.node_x = Signal(P.NODE_BITS)
        self.node_y = Signal(P.NODE_BITS)
        self.dim_x = Signal(K.DIM_BITS)
        self.dim_y = Signal(K.DIM_BITS)
        self.valid = Signal()
        self.own = Signal(rb)
        self.other = Signal(rb)
        self.in_table = Signal()
        self.oob = Signal()
        #: routing requests issued to the kernel (kernels only; for tests and benches)
        self.requests = Signal(32)

        if impl == "table":
            # The read in the head's cycle, the route one cycle later (combinational from
            # the block RAM's output).
            rp = table.get_port(mode=READ_FIRST)
            self.specials += rp
            r_set = [rp.dat_r[s * rb:(s + 1) * rb] for s in range(2)]
            self.comb += [
                rp.adr.eq(self.dst[:tbits]),
                self.own.eq(Mux(self.rt, r_set[1], r_set[0])),
                self.other.eq(Mux(self.rt, r_set[0], r_set[1])),
                self.in_table.eq(1),
            ]
            self.sync += [
                self.valid.eq(self.head & ~self.take),
                self.oob.eq(self.dst[tbits:] != 0) if P.NODE_BITS > tbits else self.oob.eq(0),
            ]
            return

        self.submodules.fn = fn = make_route_fn(impl, table_nodes)
        ab = len(fn.table_address0)
        rp = table.get_port(has_re=True, mode=READ_FIRST)
        self.specials += rp
        pending = Signal()          # a request issued, its ap_done still to come
        done = Signal()             # its ap_done, now
        valid_r = Signal()          # the route came in an earlier cycle ...
        own_r = Signal(rb)          # ... and is this
        start = Signal()
        refresh = Signal()          # the route is there and waits: read the other set again
        rt_req = Signal()           # the set of the request in flight
        read = Signal()             # the table was read in the previous cycle
        beyond = Signal()           # ... at an address the router's table does not have
        other_r = Signal(rb)        # the other set's entry, kept after the read
        half = [rp.dat_r[s * rb:(s + 1) * rb] for s in range(2)]
        self.comb += [
            start.eq(self.head & ~valid_r & ~pending),
            # The result is used in the cycle of ap_done (which may be the cycle the table
            # entry arrives: the twin's and the DPI shell's short path), then kept until
            # the packet is taken.
            done.eq(fn.ap_done & pending),
            self.valid.eq(valid_r | done),
            self.own.eq(Mux(done, fn.ap_return, own_r)),
            self.in_table.eq(self.dst < table_nodes),
            fn.ap_start.eq(start),
            fn.dst.eq(self.dst),
            fn.node_x.eq(self.node_x), fn.node_y.eq(self.node_y),
            fn.dim_x.eq(self.dim_x), fn.dim_y.eq(self.dim_y),
            # While the route waits for its packet to be taken, the kernel is idle and the
            # port reads the other set again every cycle: divert must see the table as it
            # is when it diverts (a plan written while the packet waited), not as it was.
            refresh.eq(valid_r & ~pending),
            rp.adr.eq(Mux(refresh, self.dst[:tbits], fn.table_address0[:tbits])),
            rp.re.eq(fn.table_ce0 | refresh),
            # The kernel reads the packet's own set; an address beyond the router's table
            # (a kernel whose table is larger) answers DROP.
            fn.table_q0.eq(Mux(beyond, P.Port.DROP, Mux(rt_req, half[1], half[0]))),
            # The other set's entry, from the very read the kernel made: straight from the
            # read port in the cycle after the read (the earliest ap_done), kept afterwards.
            self.other.eq(Mux(read, Mux(beyond, P.Port.DROP, Mux(rt_req, half[0], half[1])), other_r)),
        ]
        self.sync += [
            If(start, rt_req.eq(self.rt)),
            read.eq(fn.table_ce0 | refresh),
            If(refresh, beyond.eq(self.dst[tbits:] != 0) if P.NODE_BITS > tbits else beyond.eq(0)
            ).Elif(fn.table_ce0, beyond.eq(fn.table_address0[tbits:] != 0) if ab > tbits else beyond.eq(0)),
            If(read, other_r.eq(self.other)),
            If(start & fn.ap_ready, pending.eq(1), self.requests.eq(self.requests + 1)),
            If(done, pending.eq(0), valid_r.eq(1), own_r.eq(fn.ap_return)),
            If(self.take, valid_r.eq(0)),
        ]
        self.comb += self.oob.eq(0)


class RouteCoords(Module, AutoCSR):
    """This node's coordinates from its node id and the topology's dimensions, for the
    route kernels.

    CSRs ``dim_x``, ``dim_y`` (reset: the build's ``dims``; the firmware or driver writes
    the network's when it differs) and the status ``node_x``, ``node_y``. The coordinates
    are ``node_id % dim_x`` and ``node_id / dim_x``, from a one-bit-per-cycle restoring
    divider that restarts whenever the node id or ``dim_x`` changes (``NODE_BITS`` + 1
    cycles; ``ready`` meanwhile low).
    """

    def __init__(self, dims: tuple[int, int] = (P.MAX_NODES, 1)) -> None:
        dx, dy = dims
        if not (1 <= dx <= P.MAX_NODES and 1 <= dy <= P.MAX_NODES and dx * dy <= P.MAX_NODES):
            raise ValueError(f"dims {dims}: each 1..{P.MAX_NODES}, at most {P.MAX_NODES} nodes")
        nb = P.NODE_BITS
        self.node_id = Signal(nb)
        self.node_x = Signal(nb)
        self.node_y = Signal(nb)
        self.ready = Signal()
        self._dim_x = CSRStorage(K.DIM_BITS, reset=dx, name="dim_x",
                                 description="Topology X dimension (a ring: its node count), for the route kernel.")
        self._dim_y = CSRStorage(K.DIM_BITS, reset=dy, name="dim_y",
                                 description="Topology Y dimension (a ring: 1), for the route kernel.")
        self._node_x = CSRStatus(nb, name="node_x", description="This node's X coordinate (node id % dim_x).")
        self._node_y = CSRStatus(nb, name="node_y", description="This node's Y coordinate (node id / dim_x).")
        self.dim_x = self._dim_x.storage
        self.dim_y = self._dim_y.storage

        seen_id = Signal(nb)
        seen_dx = Signal(K.DIM_BITS)
        step = Signal(max=nb + 1)
        busy = Signal(reset=1)
        rem = Signal(K.DIM_BITS + 1)
        q = Signal(nb)
        shifted = Signal(K.DIM_BITS + 1)
        sh = Signal(nb)             # the dividend's bits still to come, highest first
        self.comb += [
            shifted.eq((rem << 1) | sh[nb - 1]),
            self.ready.eq(~busy & (seen_id == self.node_id) & (seen_dx == self.dim_x)),
            self._node_x.status.eq(self.node_x),
            self._node_y.status.eq(self.node_y),
        ]
        self.sync += [
            If((seen_id != self.node_id) | (seen_dx != self.dim_x),
                seen_id.eq(self.node_id), seen_dx.eq(self.dim_x),
                busy.eq(1), step.eq(0), rem.eq(0), q.eq(0), sh.eq(self.node_id),
            ).Elif(busy,
                If(step == nb,
                    busy.eq(0), self.node_x.eq(rem), self.node_y.eq(q),
                ).Else(
                    step.eq(step + 1), sh.eq(sh << 1),
                    If(shifted >= seen_dx,
                        rem.eq(shifted - seen_dx), q.eq((q << 1) | 1),
                    ).Else(
                        rem.eq(shifted), q.eq(q << 1),
                    ),
                ),
            ),
        ]
