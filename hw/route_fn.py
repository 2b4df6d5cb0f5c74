"""The routing function of one router input: the Migen twin of the HLS kernel ``route``.

``hls/route/route.cpp`` is the routing function in Vitis HLS C++; this module is the same
function in Migen, with the same ports (:data:`paranic.spec.kernels.ROUTE_PORTS`, defined
once): a destination inside the table (``dst < ROUTE_TABLE_NODES``) takes the table's
entry; one beyond it is routed by dimension-order computation (X then Y, the shorter way
round, ties +, as ``spec/c/pn_route.c``), so a 4096-node torus needs no 4096-entry
table; a destination outside the topology is ``Port.DROP``. docs/hls.md describes both.

Blocks:

* :class:`RouteFn` -- the function, ``ap_ctrl_hs`` handshake, one request per cycle,
  result two cycles after ``ap_start`` (``ap_done`` says when; a caller must not assume
  the latency, since the Vitis build's differs).
* :class:`RouteFnVitis` -- the same ports as an ``Instance`` of the kernel's exported
  RTL (module ``route``), for a board built with Vitis; only elaborated here.
* :class:`RouteTable` -- the table: block RAM of ``ROUTE_TABLE_NODES`` entries, written
  through a port the router's CSRs drive, read through the kernel's ``ap_memory`` port.
* :class:`RouteUnit` -- a table and a routing function, the function chosen by the build
  option ``vitis`` (True: the HLS kernel's RTL; False: :class:`RouteFn`).
"""

from __future__ import annotations

from migen import ClockSignal, If, Instance, Memory, Module, Mux, ResetSignal, Signal

from paranic.spec import kernels as K
from paranic.spec import protocol as P

#: Cycles from ``ap_start`` to ``ap_done`` in :class:`RouteFn`.
LATENCY = 2


def _ports(m: Module) -> None:
    """Give ``m`` one Signal per kernel port except the clock and reset, named as the port."""
    for name, _dir, width, _doc in K.ROUTE_PORTS:
        if name not in ("ap_clk", "ap_rst"):
            setattr(m, name, Signal(width, name=name))


def _divmod(m: Module, a: Signal, d: Signal, bits: int) -> tuple[Signal, Signal]:
    """Combinational ``(a // d, a % d)`` of a ``bits``-bit ``a``: restoring division, one
    compare-and-subtract stage per quotient bit (``d`` = 0 gives an all-ones quotient)."""
    q = Signal(bits)
    rem = Signal(len(d) + 1)
    prev = Signal(len(d) + 1)
    m.comb += prev.eq(0)
    for i in reversed(range(bits)):
        shifted = Signal(len(d) + 1)
        nxt = Signal(len(d) + 1)
        m.comb += [
            shifted.eq((prev << 1) | a[i]),
            If(shifted >= d, q[i].eq(1), nxt.eq(shifted - d)).Else(q[i].eq(0), nxt.eq(shifted)),
        ]
        prev = nxt
    m.comb += rem.eq(prev)
    return q, rem


def _dor_step(a, b, n, plus: int, minus: int):
    """One dimension of dimension-order routing, as ``pn_dor_step`` in hls/route/route.h:
    ``Port.LOCAL`` when a == b, else the shorter way round, ties going +."""
    w = K.DIM_BITS + 1
    d = Signal(w)
    back = Signal(w)
    port = Signal(P.ROUTE_BITS)
    stmts = [
        d.eq(Mux(b >= a, b - a, b + n - a)),
        back.eq(n - d),
        port.eq(Mux(d == 0, P.Port.LOCAL, Mux(d <= back, plus, minus))),
    ]
    return port, stmts


class RouteFn(Module):
    """The routing function (ports :data:`~paranic.spec.kernels.ROUTE_PORTS`).

    Cycle 0: ``ap_start`` with the inputs; the table is read at ``dst`` and the inputs
    registered. Cycle 1: the table entry arrives (``table_q0``) and the dimension-order
    port is computed from the registered inputs. Cycle 2: ``ap_done``, ``ap_return``.
    """

    def __init__(self) -> None:
        _ports(self)
        ab = K.ROUTE_TABLE_ADDR_BITS
        # -- stage 0: table read, inputs registered
        self.comb += [
            self.table_address0.eq(self.dst[:ab]),
            self.table_ce0.eq(self.ap_start),
            self.ap_ready.eq(1),
        ]
        v1 = Signal()
        dst, nx, ny = Signal(P.NODE_BITS), Signal(P.NODE_BITS), Signal(P.NODE_BITS)
        dimx, dimy = Signal(K.DIM_BITS), Signal(K.DIM_BITS)
        self.sync += [
            v1.eq(self.ap_start),
            If(self.ap_start, dst.eq(self.dst), nx.eq(self.node_x), ny.eq(self.node_y),
               dimx.eq(self.dim_x), dimy.eq(self.dim_y)),
        ]
        # -- stage 1: table entry or dimension order
        nodes = Signal(2 * K.DIM_BITS)
        self.comb += nodes.eq(dimx * dimy)
        dy, dx = _divmod(self, dst, dimx, P.NODE_BITS)
        px, sx = _dor_step(nx, dx, dimx, P.Port.XP, P.Port.XM)
        py, sy = _dor_step(ny, dy, dimy, P.Port.YP, P.Port.YM)
        self.comb += sx + sy
        port = Signal(P.ROUTE_BITS)
        self.comb += If(dst >= nodes, port.eq(P.Port.DROP)
                        ).Elif(dst < K.ROUTE_TABLE_NODES, port.eq(self.table_q0)
                               ).Elif(px != P.Port.LOCAL, port.eq(px)
                                      ).Else(port.eq(py))
        # -- stage 2: result
        self.sync += [self.ap_done.eq(v1), If(v1, self.ap_return.eq(port))]
        self.comb += self.ap_idle.eq(~self.ap_start & ~v1 & ~self.ap_done)


class RouteFnVitis(Module):
    """The HLS kernel's exported RTL (Verilog module ``route``) behind the same ports.

    Used when a board is built with Vitis (``RouteUnit(vitis=True)``): the RTL comes from
    ``hls/route/run_hls.tcl``'s IP export and is added to the build's sources then.
    Without Vitis this is only elaborated (the RTL does not exist here).
    """

    MODULE = "route"

    def __init__(self) -> None:
        _ports(self)
        conn = {}
        for name, d, _w, _doc in K.ROUTE_PORTS:
            if name == "ap_clk":
                conn["i_ap_clk"] = ClockSignal()
            elif name == "ap_rst":
                conn["i_ap_rst"] = ResetSignal()
            else:
                conn[f"{d}_{name}"] = getattr(self, name)
        self.specials += Instance(self.MODULE, **conn)


class RouteTable(Module):
    """The routing table: ``ROUTE_TABLE_NODES`` entries of ``ROUTE_BITS``, initially DROP.

    Write port ``we``/``adr``/``dat`` (the router's CSRs); read port ``address0``/``ce0``
    -> ``q0`` one cycle later (the kernel's ``ap_memory`` interface, latency 1).
    """

    def __init__(self, init: list[int] | None = None) -> None:
        n = K.ROUTE_TABLE_NODES
        init = list(init or [])
        if len(init) > n or any(not 0 <= v <= P.Port.DROP for v in init):
            raise ValueError(f"table init: at most {n} entries, each a Port value")
        self.we = Signal()
        self.adr = Signal(K.ROUTE_TABLE_ADDR_BITS)
        self.dat = Signal(P.ROUTE_BITS)
        self.address0 = Signal(K.ROUTE_TABLE_ADDR_BITS)
        self.ce0 = Signal()
        self.q0 = Signal(P.ROUTE_BITS)
        self.specials.mem = mem = Memory(P.ROUTE_BITS, n, init=init + [int(P.Port.DROP)] * (n - len(init)))
        wp = mem.get_port(write_capable=True)
        rp = mem.get_port(has_re=True)
        self.specials += wp, rp
        self.comb += [wp.we.eq(self.we), wp.adr.eq(self.adr), wp.dat_w.eq(self.dat),
                      rp.adr.eq(self.address0), rp.re.eq(self.ce0), self.q0.eq(rp.dat_r)]


class RouteUnit(Module):
    """A routing table and the routing function, the function's implementation chosen
    by the build option ``vitis``. Exposes the function's request ports (``ap_start``,
    ``dst``, ``node_x`` ...) and the table's write port (``table_we``/``_adr``/``_dat``)."""

    def __init__(self, vitis: bool = False, table_init: list[int] | None = None) -> None:
        self.submodules.fn = fn = RouteFnVitis() if vitis else RouteFn()
        self.submodules.table = t = RouteTable(table_init)
        self.comb += [t.address0.eq(fn.table_address0), t.ce0.eq(fn.table_ce0), fn.table_q0.eq(t.q0)]
        for name, _d, _w, _doc in K.ROUTE_PORTS:
            if not name.startswith(("ap_clk", "ap_rst", "table_")):
                setattr(self, name, getattr(fn, name))
        self.table_we, self.table_adr, self.table_dat = t.we, t.adr, t.dat
